/*
** device/store/store.c - the store itself: opening an image, snapshots, reads.
**
** See store.h for the model. This file owns the store object (the registry
** of open stores, one per device in the process), the block I/O every store
** file uses, reading and writing superblocks and catalogs, free space, the
** refresh that notices other processes' commits, and reading row groups.
** Transactions are in txn.c, the two-step commit over several devices in
** twostep.c.
**
** Concurrency inside the process: p->mu guards the store's fields (current
** snapshot, free space, deferred frees, live snapshots, lazy row-group
** caches); p->writer is held by the one open transaction. Across processes a
** device reservation serialises writers, and a reader notices another
** process's commit by re-reading the superblock.
**
** Free space and readers: an extent a commit frees is still referenced by
** older snapshots, so it is parked (deferred) until no live snapshot of this
** process is older than the commit that freed it.
**
** Noticing another process's commit cheaply: at each snapshot a shared store
** copies blocks 0-1 into device SLM (Memory Copy) and reads back only the
** first CSQ_SB_PREFIX bytes of each copy; if both are as this store last saw
** them, nothing was committed since (sb_unchanged), and 128 bytes crossed to
** the host instead of 8 KiB.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "device/format/checksum.h"
#include "device/format/program.h"
#include "device/store/store_int.h"

#define IO_MAX_BLOCKS 1024 /* blocks per NVM command: 4 MiB */
/* A row group this small is read from the device once, as a whole, and its
** bytes kept with the (immutable) row group: joins probe small tables
** thousands of times, and a device round trip per probe would dominate.
** Large row groups are always read from the device, chunk by chunk. */
#define STORE_RAW_CACHE_BLOCKS 64

/* The registry of open stores: one per device in the process. */
static pthread_mutex_t g_storeMu = PTHREAD_MUTEX_INITIALIZER;
static store *g_stores = NULL;

/* ---- small helpers ---- */

int store_ext_push(store_extent **pa, int *pn, int *pnAlloc, uint64_t lba, uint64_t nblk,
                   uint64_t gen) {
  if (*pn == *pnAlloc) {
    int nNew = *pnAlloc ? *pnAlloc * 2 : 16;
    store_extent *a = realloc(*pa, sizeof(store_extent) * (size_t)nNew);
    if (!a) return -ENOMEM;
    *pa = a;
    *pnAlloc = nNew;
  }
  (*pa)[*pn].lba = lba;
  (*pa)[*pn].nblk = nblk;
  (*pa)[*pn].gen = gen;
  (*pn)++;
  return 0;
}

void *store_block_alloc(uint64_t nblk) {
  void *p = NULL;
  if (posix_memalign(&p, CSQ_LBA_SIZE, nblk ? nblk * CSQ_LBA_SIZE : CSQ_LBA_SIZE)) return NULL;
  return p;
}

/* Read (bWrite 0) or write a run of blocks in commands of at most
** IO_MAX_BLOCKS. buf is only read when writing. */
static int io_run(dev_queue *q, int bWrite, uint64_t lba, uint64_t nblk, uint8_t *buf) {
  while (nblk > 0) {
    uint32_t n = nblk > IO_MAX_BLOCKS ? IO_MAX_BLOCKS : (uint32_t)nblk;
    int rc = bWrite ? dev_nvm_write(q, lba, n, buf) : dev_nvm_read(q, lba, n, buf);
    if (rc) return rc;
    lba += n;
    nblk -= n;
    buf += (size_t)n * CSQ_LBA_SIZE;
  }
  return 0;
}
int store_io_read(dev_queue *q, uint64_t lba, uint64_t nblk, uint8_t *buf) {
  return io_run(q, 0, lba, nblk, buf);
}
int store_io_write(dev_queue *q, uint64_t lba, uint64_t nblk, const uint8_t *buf) {
  return io_run(q, 1, lba, nblk, (uint8_t *)buf); /* io_run only reads it */
}

char *store_io_errmsg(store *p, dev_queue *q, int rc, const char *zWhat) {
  if (rc == -ENOMEM) return dev_mprintf("out of memory");
  return dev_mprintf("device %s: %s failed: %s", dev_path(p->pDev), zWhat, dev_errmsg(q));
}

/* Read back the nblk blocks just written at lba from buf and compare: a
** device that stored damaged data is caught before the superblock points
** at it. Only for the catalog and the superblocks (a few blocks a commit);
** row group data is checked by its chunk checksums when read. 0, or an
** error with *pzErr set (-EIO when the blocks differ). */
static int verify_write(store *p, dev_queue *q, uint64_t lba, uint64_t nblk, const uint8_t *buf,
                        const char *zWhat, char **pzErr) {
  uint8_t *chk = store_block_alloc(nblk);
  if (!chk) return -ENOMEM;
  int rc = store_io_read(q, lba, nblk, chk);
  if (rc) {
    *pzErr = store_io_errmsg(p, q, rc, zWhat);
  } else if (memcmp(chk, buf, (size_t)nblk * CSQ_LBA_SIZE) != 0) {
    *pzErr = dev_mprintf("device %s: %s failed: blocks %llu-%llu read back differ from what was "
                         "written (the device stored damaged data)",
                         dev_path(p->pDev), zWhat, (unsigned long long)lba,
                         (unsigned long long)(lba + nblk - 1));
    rc = -EIO;
  }
  free(chk);
  return rc;
}

/* ---- snapshots ---- */

void store_snap_link(store *p, store_snap *s) {
  s->pStore = p;
  s->pNextLive = p->pLive;
  p->pLive = s;
}

void store_snap_unref(store_snap *s) {
  if (!s) return;
  store *p = s->pStore;
  pthread_mutex_lock(&p->mu);
  int n = --s->nRef;
  if (n == 0) {
    for (store_snap **pp = &p->pLive; *pp; pp = &(*pp)->pNextLive) {
      if (*pp == s) {
        *pp = s->pNextLive;
        break;
      }
    }
  }
  pthread_mutex_unlock(&p->mu);
  if (n == 0) {
    store_snap_free_tables(s);
    free(s);
  }
}

void store_snap_ref(store_snap *s) {
  pthread_mutex_lock(&s->pStore->mu);
  s->nRef++;
  pthread_mutex_unlock(&s->pStore->mu);
}

store_table *store_snap_table(const store_snap *s, const char *zName) {
  for (int i = 0; i < s->nTab; i++)
    if (strcasecmp(s->apTab[i]->zName, zName) == 0) return s->apTab[i];
  return NULL;
}

/* Load the delete bitmaps of a freshly decoded snapshot. */
static int load_delmaps(store *p, dev_queue *q, store_snap *s, char **pzErr) {
  for (int t = 0; t < s->nTab; t++) {
    store_table *pTab = s->apTab[t];
    for (int g = 0; g < pTab->nRg; g++) {
      store_rg *pRg = pTab->apRg[g];
      if (pRg->nDel == 0) continue;
      uint64_t nblk = (pRg->delBytes + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
      uint8_t *buf = store_block_alloc(nblk);
      if (!buf) return -ENOMEM;
      int rc = store_io_read(q, pRg->delLba, nblk, buf);
      if (rc) {
        free(buf);
        *pzErr = store_io_errmsg(p, q, rc, "reading a delete bitmap");
        return rc;
      }
      if (XXH3_64bits(buf, pRg->delBytes) != pRg->delXxh3) {
        free(buf);
        char aName[DEV_NAME_SHOW_BUF];
        *pzErr = dev_mprintf("device %s: table '%s': the delete bitmap at block %llu is "
                             "damaged (checksum mismatch)",
                             dev_path(p->pDev), dev_name_show(pTab->zName, aName),
                             (unsigned long long)pRg->delLba);
        return -EBADMSG;
      }
      pRg->aDel = buf;
    }
  }
  return 0;
}

/* Remember the prefixes of both superblock copies as they are on the media
** (a[i] the block of copy i). With p->mu held, or p not shared yet. */
static void seen_set(store *p, const uint8_t *a0, const uint8_t *a1) {
  memcpy(p->aSeen[0], a0, CSQ_SB_PREFIX);
  memcpy(p->aSeen[1], a1, CSQ_SB_PREFIX);
  p->bSeen = 1;
}

/* Both copies now hold *pSb (a completed store_write_superblocks). */
void store_seen_written(store *p, const store_sb *pSb) {
  uint8_t a[CSQ_LBA_SIZE];
  store_sb_encode(pSb, a);
  seen_set(p, a, a);
}

/* Choose the superblock that counts from blocks 0-1 in buf (2 blocks).
** 0 with *pSb; 1 when both blocks are zero (an empty image); else an error
** with *pzErr naming zPath. */
int store_sb_from_blocks(const char *zPath, const uint8_t *buf, store_sb *pSb, char **pzErr) {
  store_sb a[2];
  int rcs[2];
  uint32_t aVer[2] = {0, 0};
  int bZero = 1;
  for (size_t i = 0; i < 2 * (size_t)CSQ_LBA_SIZE && bZero; i++) bZero = buf[i] == 0;
  for (int i = 0; i < 2; i++)
    rcs[i] = store_sb_decode(buf + (size_t)i * CSQ_LBA_SIZE, &a[i], &aVer[i]);
  int best = store_sb_choose(a, rcs);
  if (best >= 0) {
    *pSb = a[best];
    return 0;
  }
  if (bZero) return 1;
  if (rcs[0] == -EPROTONOSUPPORT || rcs[1] == -EPROTONOSUPPORT) {
    *pzErr = dev_mprintf("device image %s has on-media format version %u; this build of csq "
                         "reads versions %u and %u only (open it with a newer csq)",
                         zPath, rcs[0] == -EPROTONOSUPPORT ? aVer[0] : aVer[1], CSQ_FORMAT_VERSION,
                         CSQ_SB_VERSION_PREPARED);
    return -EPROTONOSUPPORT;
  }
  if (rcs[0] == -ENOENT && rcs[1] == -ENOENT) {
    *pzErr = dev_mprintf("%s is not a csq device image (no csq superblock in blocks 0-1)", zPath);
    return -EINVAL;
  }
  *pzErr = dev_mprintf("device image %s: both superblocks (blocks 0 and 1) are damaged", zPath);
  return -EBADMSG;
}

/* Read both superblocks and pick the committed one. aSeen (may be NULL)
** receives the prefixes of both copies as read, for the caller to keep once
** it has taken in the state they describe. */
static int read_superblock(store *p, dev_queue *q, store_sb *pSb, int *pbEmpty,
                           uint8_t aSeen[CSQ_SB_COPIES][CSQ_SB_PREFIX], char **pzErr) {
  uint8_t *buf = store_block_alloc(2);
  if (!buf) return -ENOMEM;
  int rc = store_io_read(q, 0, 2, buf);
  if (rc) {
    free(buf);
    *pzErr = store_io_errmsg(p, q, rc, "reading the superblocks (blocks 0-1)");
    return rc;
  }
  rc = store_sb_from_blocks(dev_path(p->pDev), buf, pSb, pzErr);
  *pbEmpty = rc == 1;
  if (rc == 0 && aSeen) {
    memcpy(aSeen[0], buf, CSQ_SB_PREFIX);
    memcpy(aSeen[1], buf + CSQ_LBA_SIZE, CSQ_SB_PREFIX);
  }
  free(buf);
  return rc == 1 ? 0 : rc;
}

/* Has the image stayed as this store last read or wrote it? Blocks 0-1 go
** into device SLM by Memory Copy, and only the first CSQ_SB_PREFIX bytes of
** each copy come back: every commit changes the generation there, a
** prepared commit and its end the version, so equal prefixes mean the same
** committed state. 1 if unchanged; 0 if changed, unknown (never read), on
** any error (the caller then reads the superblocks whole, which reports
** it), or where the device has no SLM of its own (a device without csq
** compute: its "SLM" is host memory, and the full read costs the same).
** With p->mu held: the SLM buffer and q are used by one thread at a time. */
static int sb_unchanged(store *p, dev_queue *q) {
  const csq_id_vs *pCaps = dev_caps(p->pDev);
  uint64_t addr;
  if (!p->bSeen || pCaps->magic != CSQ_ID_MAGIC || pCaps->slm_bytes < 2 * (uint64_t)CSQ_LBA_SIZE)
    return 0;
  if (dev_slm_alloc(p->pDev, 2 * (uint64_t)CSQ_LBA_SIZE, &addr)) return 0;
  csq_lba_range r = {CSQ_NSID_NVM, 2, 0};
  uint8_t a[CSQ_SB_COPIES][CSQ_SB_PREFIX];
  int rc = dev_slm_copy(q, addr, &r, 1);
  for (int i = 0; i < CSQ_SB_COPIES && rc == 0; i++)
    rc = dev_slm_read(q, addr + (uint64_t)i * CSQ_LBA_SIZE, a[i], CSQ_SB_PREFIX);
  dev_slm_free(p->pDev, addr);
  return rc == 0 && memcmp(a, p->aSeen, sizeof(a)) == 0;
}

/* Read and decode the catalog a superblock names. */
static int read_catalog(store *p, dev_queue *q, const store_sb *pSb, store_snap **ppSnap,
                        uint32_t *pNextTabId, char **pzErr) {
  uint8_t *buf = store_block_alloc(pSb->catBlocks);
  if (!buf) return -ENOMEM;
  int rc = store_io_read(q, pSb->catLba, pSb->catBlocks, buf);
  if (rc) {
    *pzErr = store_io_errmsg(p, q, rc, "reading the catalog");
    free(buf);
    return rc;
  }
  if (csq_checksum(buf, pSb->catBytes) != pSb->catXxh3) {
    *pzErr = dev_mprintf("device image %s: the catalog (blocks %llu-%llu) is damaged "
                         "(checksum mismatch)",
                         dev_path(p->pDev), (unsigned long long)pSb->catLba,
                         (unsigned long long)(pSb->catLba + pSb->catBlocks - 1));
    free(buf);
    return -EBADMSG;
  }
  char *zErr = NULL;
  rc = store_cat_decode(buf, pSb->catBytes, ppSnap, pNextTabId, &zErr);
  free(buf);
  if (rc) {
    *pzErr = dev_mprintf("device image %s: %s", dev_path(p->pDev), zErr ? zErr : "bad catalog");
    free(zErr);
    return rc;
  }
  for (int i = 0; i < (*ppSnap)->nTab; i++) (*ppSnap)->apTab[i]->catLba = pSb->catLba;
  if ((*ppSnap)->gen != pSb->gen) {
    store_snap_free_tables(*ppSnap);
    free(*ppSnap);
    *pzErr = dev_mprintf("device image %s: catalog generation does not match the superblock",
                         dev_path(p->pDev));
    return -EBADMSG;
  }
  rc = load_delmaps(p, q, *ppSnap, pzErr);
  if (rc) {
    store_snap_free_tables(*ppSnap);
    free(*ppSnap);
  }
  return rc;
}

/* Write a snapshot's catalog to fresh space and return its superblock.
** Called with the writer lock; allocations recorded in pTxn (may be NULL when
** formatting). */
int store_write_catalog(store *p, dev_queue *q, store_snap *s, uint32_t nextTabId, store_sb *pSb,
                        store_txn *pTxn, char **pzErr) {
  uint8_t *a = NULL;
  size_t n = 0;
  int rc = store_cat_encode(s, nextTabId, &a, &n);
  if (rc) return rc;
  uint64_t nblk = (n + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
  uint8_t *buf = store_block_alloc(nblk);
  if (!buf) {
    free(a);
    return -ENOMEM;
  }
  memcpy(buf, a, n);
  memset(buf + n, 0, nblk * CSQ_LBA_SIZE - n);
  free(a);
  uint64_t lba;
  pthread_mutex_lock(&p->mu);
  rc = space_alloc(&p->space, nblk, &lba);
  pthread_mutex_unlock(&p->mu);
  if (rc) {
    free(buf);
    *pzErr = dev_mprintf("device %s is full", dev_path(p->pDev));
    return rc;
  }
  if (pTxn) store_ext_push(&pTxn->aAlloc, &pTxn->nAlloc, &pTxn->nAllocAlloc, lba, nblk, 0);
  rc = store_io_write(q, lba, nblk, buf);
  if (rc)
    *pzErr = store_io_errmsg(p, q, rc, "writing the catalog");
  else
    rc = verify_write(p, q, lba, nblk, buf, "writing the catalog", pzErr);
  if (rc == 0) {
    pSb->gen = s->gen;
    pSb->catLba = lba;
    pSb->catBlocks = (uint32_t)nblk;
    pSb->catBytes = n;
    pSb->catXxh3 = csq_checksum(buf, n);
  }
  for (int i = 0; i < s->nTab; i++) s->apTab[i]->catLba = rc == 0 ? lba : 0;
  free(buf);
  return rc;
}

/* Superblock flip: copy 0, flush, copy 1, flush. Data and catalog must
** already be durable. On failure *pbMaybe (may be NULL) is 1 unless the
** device refused the very first write: only then is it certain that no
** copy carries the new generation (a write that timed out may still land). */
int store_write_superblocks(store *p, dev_queue *q, const store_sb *pSb, char **pzErr,
                            int *pbMaybe) {
  uint8_t *buf = store_block_alloc(1);
  if (pbMaybe) *pbMaybe = 0;
  if (!buf) return -ENOMEM;
  store_sb_encode(pSb, buf);
  int rc = 0;
  for (int i = 0; i < CSQ_SB_COPIES && rc == 0; i++) {
    rc = dev_nvm_write(q, (uint64_t)i, 1, buf);
    if (pbMaybe && (i > 0 || rc == 0 || rc == CSQ_SC_HOST_TIMEOUT || rc == CSQ_SC_HOST_LINK))
      *pbMaybe = 1;
    if (rc == 0) rc = dev_nvm_flush(q);
    if (rc)
      *pzErr = store_io_errmsg(p, q, rc, "writing the superblock");
    else
      rc = verify_write(p, q, (uint64_t)i, 1, buf, "writing the superblock", pzErr);
  }
  free(buf);
  return rc;
}

/* Every extent a snapshot references (for rebuilding free space). */
static int snap_extents(const store_snap *s, store_extent **pa, int *pn, int *pnAlloc) {
  int rc = 0;
  for (int t = 0; t < s->nTab && rc == 0; t++) {
    const store_table *pTab = s->apTab[t];
    for (int g = 0; g < pTab->nRg && rc == 0; g++) {
      const store_rg *pRg = pTab->apRg[g];
      rc = store_ext_push(pa, pn, pnAlloc, pRg->lba, pRg->nblk, 0);
      if (rc == 0 && pRg->nDel)
        rc = store_ext_push(pa, pn, pnAlloc, pRg->delLba,
                            (pRg->delBytes + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE, 0);
    }
  }
  return rc;
}

/* Free space as the current catalog and every live snapshot leave it, into
** *pOut. Called with p->mu held. */
static int compute_space(store *p, store_freemap *pOut) {
  store_extent *a = NULL;
  int n = 0, nAlloc = 0, rc = 0;
  rc = store_ext_push(&a, &n, &nAlloc, p->sb.catLba, p->sb.catBlocks, 0);
  if (rc == 0) rc = snap_extents(p->pCur, &a, &n, &nAlloc);
  for (store_snap *s = p->pLive; s && rc == 0; s = s->pNextLive)
    if (s != p->pCur) rc = snap_extents(s, &a, &n, &nAlloc);
  if (rc == 0) {
    uint64_t hwm = p->sb.hwm;
    for (int i = 0; i < n; i++)
      if (a[i].lba + a[i].nblk > hwm) hwm = a[i].lba + a[i].nblk;
    rc = space_rebuild(pOut, a, n, hwm, dev_nvm_blocks(p->pDev));
  }
  free(a);
  return rc;
}

/* Rebuild the writer's free space (the writer lock held, p->mu too). */
int store_rebuild_space(store *p) {
  int rc = compute_space(p, &p->space);
  if (rc == 0) {
    p->bSpaceValid = 1;
    p->nPend = 0;
  }
  return rc;
}

/* Do the superblocks on the media differ from the prefixes in aSeen (read
** before)? 0 when they are the same or cannot be read. */
int store_sb_moved(dev_queue *q, uint8_t aSeen[CSQ_SB_COPIES][CSQ_SB_PREFIX]) {
  uint8_t *buf = store_block_alloc(CSQ_SB_COPIES);
  if (!buf) return 0;
  int bMoved = 0;
  if (store_io_read(q, 0, CSQ_SB_COPIES, buf) == 0) {
    for (int i = 0; i < CSQ_SB_COPIES; i++)
      if (memcmp(buf + (size_t)i * CSQ_LBA_SIZE, aSeen[i], CSQ_SB_PREFIX) != 0) bMoved = 1;
  }
  free(buf);
  return bMoved;
}

/* Read the superblocks and, when they name another catalog than p->pCur's,
** that catalog, making it p->pCur. aSeen receives the superblock prefixes
** read; *pbCatalog is set when the failure came from reading the catalog
** (or its delete bitmaps), after the superblocks were read. With p->mu
** held; see store_refresh. */
static int refresh_read(store *p, dev_queue *q, int bLocked,
                        uint8_t aSeen[CSQ_SB_COPIES][CSQ_SB_PREFIX], int *pbCatalog, char **pzErr) {
  store_sb sb, eff;
  int bEmpty = 0;
  *pbCatalog = 0;
  p->bSeen = 0;
  int rc = read_superblock(p, q, &sb, &bEmpty, aSeen, pzErr);
  if (rc) return rc;
  if (bEmpty) {
    *pzErr = dev_mprintf("device image %s lost its superblocks", dev_path(p->pDev));
    return -EBADMSG;
  }
  p->bUndecided = 0;
  eff = sb;
  if (sb.version == CSQ_SB_VERSION_PREPARED) {
    rc = store_settle_pending(p, q, bLocked, &sb, &eff, pzErr);
    if (rc) return rc;
    if (sb.version != CSQ_SB_VERSION_PREPARED) {
      /* settled just now: both copies hold sb */
      uint8_t a[CSQ_LBA_SIZE];
      store_sb_encode(&sb, a);
      memcpy(aSeen[0], a, CSQ_SB_PREFIX);
      memcpy(aSeen[1], a, CSQ_SB_PREFIX);
    }
  }
  if (!(p->pCur && eff.gen == p->sb.gen && eff.catLba == p->sb.catLba)) {
    store_snap *s = NULL;
    uint32_t nextTabId = 0;
    rc = read_catalog(p, q, &eff, &s, &nextTabId, pzErr);
    if (rc) {
      *pbCatalog = 1;
      return rc;
    }
    s->nRef = 1;
    store_snap_link(p, s);
    store_snap *pOld = p->pCur;
    p->pCur = s;
    p->sb = eff;
    p->nextTabId = nextTabId;
    p->bSpaceValid = 0;
    if (pOld) {
      /* drop the store's own reference without re-taking p->mu */
      if (--pOld->nRef == 0) {
        for (store_snap **pp = &p->pLive; *pp; pp = &(*pp)->pNextLive)
          if (*pp == pOld) {
            *pp = pOld->pNextLive;
            break;
          }
        store_snap_free_tables(pOld);
        free(pOld);
      }
    }
  }
  memcpy(p->aSeen, aSeen, sizeof(p->aSeen));
  p->bSeen = 1;
  return 0;
}

/* Refresh p->pCur from the device if another process committed. bLocked:
** the caller holds the writer lock (a prepared commit found is settled).
** With p->mu held.
**
** A reader holds no lock while it reads: between its read of the
** superblocks and its read of the catalog they name, other processes may
** commit twice, and the second commit may write over that catalog's blocks
** (freed by the first). The catalog then fails its checksum although the
** image is sound. So a catalog that fails to read is read again, from the
** superblocks as they are now, whenever they changed meanwhile; only a
** failure under unchanged superblocks (or under the writer lock, when no
** one else can commit) is damage. */
int store_refresh(store *p, dev_queue *q, int bLocked, char **pzErr) {
  if (!p->bShared && p->pCur) return 0;
  if (p->pCur && !p->bUndecided && sb_unchanged(p, q)) return 0;
  for (int nTry = 1;; nTry++) {
    uint8_t aSeen[CSQ_SB_COPIES][CSQ_SB_PREFIX];
    int bCatalog = 0;
    int rc = refresh_read(p, q, bLocked, aSeen, &bCatalog, pzErr);
    if (rc != -EBADMSG || !bCatalog || bLocked || !p->bShared || !store_sb_moved(q, aSeen))
      return rc;
    free(*pzErr);
    *pzErr = NULL;
    if (nTry == STORE_REREAD_MAX) {
      *pzErr = dev_mprintf("device image %s: other processes committed %d times while this one "
                           "read the catalog; try again",
                           dev_path(p->pDev), nTry);
      return -EBUSY;
    }
  }
}

int store_snapshot(store *p, dev_queue *q, store_snap **ppSnap, char **pzErr) {
  pthread_mutex_lock(&p->mu);
  int rc = store_refresh(p, q, 0, pzErr);
  if (rc == 0) {
    p->pCur->nRef++;
    *ppSnap = p->pCur;
  }
  pthread_mutex_unlock(&p->mu);
  return rc;
}

/* A fresh image id: two images must not share one, even when created in the
** same second (a prepared commit names its deciding image by it). */
static void image_id(store *p, uint8_t aId[16]) {
  static uint64_t nSeq = 0;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t a[6] = {
      (uint64_t)ts.tv_sec,    (uint64_t)ts.tv_nsec,
      (uint64_t)getpid(),     __atomic_add_fetch(&nSeq, 1, __ATOMIC_RELAXED),
      (uint64_t)(uintptr_t)p, XXH3_64bits(dev_path(p->pDev), strlen(dev_path(p->pDev)))};
  uint64_t h0 = XXH3_64bits(a, sizeof(a)), h1 = XXH3_64bits_withSeed(a, sizeof(a), h0);
  memcpy(aId, &h0, 8);
  memcpy(aId + 8, &h1, 8);
}

/* Format an empty image: generation 1, an empty catalog. */
static int format_image(store *p, dev_queue *q, char **pzErr) {
  store_snap *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->gen = 1;
  s->nRef = 1;
  store_sb sb;
  memset(&sb, 0, sizeof(sb));
  sb.version = CSQ_FORMAT_VERSION;
  p->space.hwm = CSQ_FIRST_DATA_LBA;
  p->space.nCap = dev_nvm_blocks(p->pDev);
  sb.created = (uint64_t)time(NULL);
  image_id(p, sb.uuid);
  int rc = store_write_catalog(p, q, s, 1, &sb, NULL, pzErr);
  if (rc == 0) rc = dev_nvm_flush(q);
  sb.hwm = p->space.hwm;
  if (rc == 0) rc = store_write_superblocks(p, q, &sb, pzErr, NULL);
  if (rc) {
    if (!*pzErr) *pzErr = store_io_errmsg(p, q, rc, "formatting the image");
    free(s);
    return rc;
  }
  store_snap_link(p, s);
  p->pCur = s;
  p->sb = sb;
  p->nextTabId = 1;
  p->bSpaceValid = 1;
  store_seen_written(p, &sb);
  return 0;
}

int store_open(dev_device *pDev, dev_queue *q, int bCreate, store **ppStore, char **pzErr) {
  *ppStore = NULL;
  pthread_mutex_lock(&g_storeMu);
  for (store *s = g_stores; s; s = s->pNext) {
    if (s->pDev == pDev) {
      s->nRef++;
      pthread_mutex_unlock(&g_storeMu);
      *ppStore = s;
      return 0;
    }
  }
  store *p = calloc(1, sizeof(*p));
  if (!p) {
    pthread_mutex_unlock(&g_storeMu);
    return -ENOMEM;
  }
  p->nRef = 1;
  p->pDev = pDev;
  dev_ref(pDev);
  p->bShared = strcmp(dev_path(pDev), ":memory:") != 0;
  p->bReadOnly = dev_read_only(pDev);
  pthread_mutex_init(&p->mu, NULL);
  pthread_mutex_init(&p->writer, NULL);
  store_sb sb;
  int bEmpty = 0;
  int rc = read_superblock(p, q, &sb, &bEmpty, NULL, pzErr);
  if (rc == 0 && bEmpty) {
    if (bCreate && p->bReadOnly) {
      *pzErr = dev_mprintf("%s is empty and read-only (this process may not write it): no "
                           "tables can be created on it",
                           dev_path(pDev));
      rc = -EROFS;
    } else if (bCreate) {
      rc = format_image(p, q, pzErr);
    } else {
      *pzErr = dev_mprintf("%s holds no csq tables (an empty image)", dev_path(pDev));
      rc = -ENOENT;
    }
  } else if (rc == 0) {
    p->bShared = 1;                     /* force the first read */
    rc = store_refresh(p, q, 0, pzErr); /* settles a prepared commit if it can */
    p->bShared = strcmp(dev_path(pDev), ":memory:") != 0;
  }
  if (rc) {
    pthread_mutex_unlock(&g_storeMu);
    if (p->pCur) store_snap_unref(p->pCur);
    dev_unref(pDev);
    space_clear(&p->space);
    free(p);
    return rc;
  }
  p->pNext = g_stores;
  g_stores = p;
  pthread_mutex_unlock(&g_storeMu);
  *ppStore = p;
  return 0;
}

/* Snapshots do not hold the store: whoever holds a snapshot (a cursor, a
** transaction) also holds the store, through its table or connection, and
** releases the snapshot first. So the last reference here frees the store
** together with its own reference on the current snapshot. */
void store_unref(store *p) {
  if (!p) return;
  pthread_mutex_lock(&g_storeMu);
  int n = --p->nRef;
  if (n == 0) {
    for (store **pp = &g_stores; *pp; pp = &(*pp)->pNext)
      if (*pp == p) {
        *pp = p->pNext;
        break;
      }
  }
  pthread_mutex_unlock(&g_storeMu);
  if (n > 0) return;
  store_snap_unref(p->pCur);
  dev_unref(p->pDev);
  space_clear(&p->space);
  free(p->aPend);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->writer);
  free(p);
}

dev_device *store_device(store *p) {
  return p->pDev;
}

int store_read_only(const store *p) {
  return p->bReadOnly;
}

void store_space(store *p, uint64_t *pnUsed, uint64_t *pnHigh) {
  pthread_mutex_lock(&p->mu);
  if (p->bSpaceValid) {
    *pnHigh = p->space.hwm;
    *pnUsed = p->space.hwm - space_free_blocks(&p->space);
  } else {
    /* a reader's view, derived from the catalog; the writer's own free space
    ** is rebuilt only under the writer lock (a writer may be at work) */
    store_freemap m = {0};
    *pnHigh = *pnUsed = 0;
    if (compute_space(p, &m) == 0) {
      *pnHigh = m.hwm;
      *pnUsed = m.hwm - space_free_blocks(&m);
    }
    space_clear(&m);
  }
  pthread_mutex_unlock(&p->mu);
}

/* ---- reads ---- */

/* The cached extent of a small row group (NULL if not small or on error). */
static const uint8_t *rg_raw(store *p, dev_queue *q, const store_rg *pRgConst) {
  store_rg *pRg = (store_rg *)pRgConst; /* aRaw is a cache, filled once */
  if (pRg->nblk > STORE_RAW_CACHE_BLOCKS) return NULL;
  pthread_mutex_lock(&p->mu);
  uint8_t *a = pRg->aRaw;
  pthread_mutex_unlock(&p->mu);
  if (a) return a;
  a = store_block_alloc(pRg->nblk);
  if (!a) return NULL;
  if (store_io_read(q, pRg->lba, pRg->nblk, a)) {
    free(a);
    return NULL; /* the chunk-by-chunk path reports the error */
  }
  pthread_mutex_lock(&p->mu);
  if (pRg->aRaw)
    free(a);
  else
    pRg->aRaw = a;
  a = pRg->aRaw;
  pthread_mutex_unlock(&p->mu);
  return a;
}

static int read_chunk_bytes(store *p, dev_queue *q, const store_table *pTab, const store_rg *pRg,
                            int iChunk, uint8_t **ppBuf, const uint8_t **ppChunk, char **pzErr) {
  const store_chunk *pC = &pRg->aChunk[iChunk];
  const uint8_t *aRaw = rg_raw(p, q, pRg);
  if (aRaw && csq_checksum(aRaw + pC->off, pC->len) == pC->xxh3) {
    *ppBuf = NULL;
    *ppChunk = aRaw + pC->off;
    return 0;
  }
  uint64_t first = pC->off / CSQ_LBA_SIZE;
  uint64_t last = ((uint64_t)pC->off + pC->len + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
  if (last <= first) last = first + 1;
  uint8_t *buf = store_block_alloc(last - first);
  if (!buf) return -ENOMEM;
  int rc = store_io_read(q, pRg->lba + first, last - first, buf);
  char aTab[DEV_NAME_SHOW_BUF], aCol[DEV_NAME_SHOW_BUF];
  const char *zTab = dev_name_show(pTab->zName, aTab);
  const char *zCol = iChunk == 0 ? "rowid" : dev_name_show(pTab->aCol[iChunk - 1].zName, aCol);
  if (rc) {
    char *z = store_io_errmsg(p, q, rc, "reading");
    *pzErr = dev_mprintf("table '%s', column '%s': %s", zTab, zCol, z ? z : "");
    free(z);
    free(buf);
    return rc;
  }
  const uint8_t *pChunk = buf + (pC->off - first * CSQ_LBA_SIZE);
  if (csq_checksum(pChunk, pC->len) != pC->xxh3) {
    *pzErr = dev_mprintf("device image %s: table '%s', column '%s': the chunk at blocks "
                         "%llu-%llu is damaged (checksum mismatch)",
                         dev_path(p->pDev), zTab, zCol, (unsigned long long)(pRg->lba + first),
                         (unsigned long long)(pRg->lba + last - 1));
    free(buf);
    return -EBADMSG;
  }
  *ppBuf = buf;
  *ppChunk = pChunk;
  return 0;
}

int store_read_chunks(store *p, dev_queue *q, const store_table *pTab, const store_rg *pRg,
                      const int *aiCol, int nCol, csq_vec *aOut, char **pzErr) {
  for (int i = 0; i < nCol; i++) {
    int iChunk = aiCol[i] + 1;
    if (iChunk < 0 || iChunk >= pRg->nChunk) return -EINVAL;
    uint8_t *buf = NULL;
    const uint8_t *pChunk = NULL;
    int rc = read_chunk_bytes(p, q, pTab, pRg, iChunk, &buf, &pChunk, pzErr);
    if (rc) return rc;
    rc = csq_chunk_decode(pChunk, pRg->aChunk[iChunk].len, &aOut[i]);
    free(buf);
    char aName[DEV_NAME_SHOW_BUF];
    if (rc) {
      if (rc != -ENOMEM)
        *pzErr = dev_mprintf("device image %s: table '%s': the chunk of column %d at block %llu "
                             "does not decode",
                             dev_path(p->pDev), dev_name_show(pTab->zName, aName), aiCol[i],
                             (unsigned long long)pRg->lba);
      return rc;
    }
    if (aOut[i].n < pRg->nRow) {
      *pzErr = dev_mprintf("device image %s: table '%s': row group at block %llu is short",
                           dev_path(p->pDev), dev_name_show(pTab->zName, aName),
                           (unsigned long long)pRg->lba);
      return -EBADMSG;
    }
  }
  return 0;
}

int store_chunk_distinct(store *p, dev_queue *q, const store_table *pTab, const store_rg *pRg,
                         int iChunk, uint32_t *pnDistinct, char **pzErr) {
  *pnDistinct = 0;
  if (iChunk < 0 || iChunk >= pRg->nChunk) return -EINVAL;
  const store_chunk *pC = &pRg->aChunk[iChunk];
  if (pC->enc == CSQ_ENC_CONST || pC->enc == CSQ_ENC_TEXT_PLAIN) {
    *pnDistinct = pC->enc == CSQ_ENC_CONST ? 1 : UINT32_MAX;
    return 0;
  }
  if (pC->enc != CSQ_ENC_TEXT_DICT) return 0;
  uint8_t *buf = NULL;
  const uint8_t *pChunk = NULL;
  int rc = read_chunk_bytes(p, q, pTab, pRg, iChunk, &buf, &pChunk, pzErr);
  if (rc) return rc;
  csq_chunk_desc d;
  rc = csq_chunk_layout(pChunk, pC->len, &d);
  if (rc == 0 && d.enc == CSQ_ENC_TEXT_DICT) *pnDistinct = d.nAux;
  free(buf);
  return rc;
}

/* The zone of pRg's chunk iChunk, or NULL if it has none (csq_prog_zone_skip). */
static const csq_zone *rg_zone(const void *pCtx, int iChunk) {
  const store_rg *pRg = pCtx;
  return iChunk < pRg->nChunk ? &pRg->aChunk[iChunk].zone : NULL;
}

int store_rg_zone_skip(const store_rg *pRg, const csq_prog *pProg) {
  return csq_prog_zone_skip(pProg, pRg->nRow, pRg->nDel, rg_zone, pRg);
}

int store_rg_rowids(store *p, dev_queue *q, const store_table *pTab, store_rg *pRg,
                    const int64_t **paRowid, char **pzErr) {
  pthread_mutex_lock(&p->mu);
  int64_t *a = pRg->aRowid;
  pthread_mutex_unlock(&p->mu);
  if (!a) {
    csq_vec v;
    csq_vec_init(&v);
    int iCol = -1;
    int rc = store_read_chunks(p, q, pTab, pRg, &iCol, 1, &v, pzErr);
    if (rc) {
      csq_vec_free(&v);
      return rc;
    }
    a = malloc(sizeof(int64_t) * (pRg->nRow ? pRg->nRow : 1));
    if (!a) {
      csq_vec_free(&v);
      return -ENOMEM;
    }
    int bSorted = 1;
    for (uint32_t i = 0; i < pRg->nRow; i++) {
      a[i] = v.aVal[i].i;
      if (i && a[i] <= a[i - 1]) bSorted = 0;
    }
    csq_vec_free(&v);
    pthread_mutex_lock(&p->mu);
    if (pRg->aRowid) {
      free(a);
    } else {
      pRg->aRowid = a;
      pRg->bSorted = bSorted;
    }
    a = pRg->aRowid;
    pthread_mutex_unlock(&p->mu);
  }
  *paRowid = a;
  return 0;
}
