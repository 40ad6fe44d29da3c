/*
** device/store/store.c - snapshots, reads and transactions over a csq device image.
**
** See store.h for the model. Concurrency inside the process: p->mu guards the
** store's fields (current snapshot, free space, deferred frees, live
** snapshots, lazy row-group caches); p->writer is held by the one open
** transaction. Across processes a device reservation serialises writers, and
** a reader notices another process's commit by re-reading the superblock.
**
** Free space and readers: an extent a commit frees is still referenced by
** older snapshots, so it is parked (deferred) until no live snapshot of this
** process is older than the commit that freed it.
**
** Transactions over several devices (store_txn_prepare) use the two-step
** commit of FORMAT.md, "Commit protocol": a prepared commit sits in the
** superblock (version 2) until the writer flips to it or drops it. Anyone
** who reads a superblock with a prepared commit looks up its outcome on the
** deciding device (decision_lookup) and reads the state that outcome gives;
** whoever can take the writer lock (so the writer that prepared it is gone)
** also settles it on the media (settle_pending).
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
/* Reads of a catalog that other processes' commits keep rewriting before a
** reader gives up with -EBUSY (see refresh). */
#define STORE_REREAD_MAX 100

struct store {
  int nRef;
  dev_device *pDev;
  pthread_mutex_t mu;
  pthread_mutex_t writer;
  store_snap *pCur; /* newest committed snapshot known */
  store_sb sb;      /* its superblock */
  uint32_t nextTabId;
  store_freemap space;
  int bSpaceValid;     /* space describes pCur (else rebuild before writing) */
  store_extent *aPend; /* deferred frees, gen = generation that freed them */
  int nPend, nPendAlloc;
  store_snap *pLive; /* snapshots still referenced */
  int bShared;       /* other processes may open the image: re-read superblocks */
  int bReadOnly;     /* the device is write protected: read, never write nor lock */
  int bUndecided;    /* the superblock holds a prepared commit whose outcome was not
                        decided at the last look: look again at every refresh */
  int bSeen;         /* aSeen holds the prefixes of both superblock copies on the media */
  uint8_t aSeen[CSQ_SB_COPIES][CSQ_SB_PREFIX];
  store *pNext; /* registry */
};

struct store_txn {
  store *p;
  dev_queue *q;
  store_snap *pBase;
  store_sb sbBase; /* superblock of pBase: its catalog is freed at commit */
  int nTab;
  store_table **apTab; /* working copies, owned */
  uint32_t nextTabId;
  store_extent *aAlloc; /* allocated by this transaction */
  int nAlloc, nAllocAlloc;
  store_extent *aFree; /* committed extents this transaction frees at commit */
  int nFree, nFreeAlloc;
  int bDirty;
  /* after store_txn_prepare: */
  int bPrepared;
  store_snap *pPrep; /* the prepared snapshot; its tables are apTab (owned by t) */
  store_sb sbFlip;   /* the superblock that makes it current */
  store_prep prep;   /* the prepared commit as the superblock records it */
};

/* The registry of open stores: one per device in the process. */
static pthread_mutex_t g_storeMu = PTHREAD_MUTEX_INITIALIZER;
static store *g_stores = NULL;

/* ---- small helpers ---- */

static int ext_push(store_extent **pa, int *pn, int *pnAlloc, uint64_t lba, uint64_t nblk,
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

static void *block_alloc(uint64_t nblk) {
  void *p = NULL;
  if (posix_memalign(&p, CSQ_LBA_SIZE, nblk ? nblk * CSQ_LBA_SIZE : CSQ_LBA_SIZE)) return NULL;
  return p;
}

/* Read/write runs of blocks in commands of at most IO_MAX_BLOCKS. */
static int io_read(dev_queue *q, uint64_t lba, uint64_t nblk, uint8_t *buf) {
  while (nblk > 0) {
    uint32_t n = nblk > IO_MAX_BLOCKS ? IO_MAX_BLOCKS : (uint32_t)nblk;
    int rc = dev_nvm_read(q, lba, n, buf);
    if (rc) return rc;
    lba += n;
    nblk -= n;
    buf += (size_t)n * CSQ_LBA_SIZE;
  }
  return 0;
}
static int io_write(dev_queue *q, uint64_t lba, uint64_t nblk, const uint8_t *buf) {
  while (nblk > 0) {
    uint32_t n = nblk > IO_MAX_BLOCKS ? IO_MAX_BLOCKS : (uint32_t)nblk;
    int rc = dev_nvm_write(q, lba, n, buf);
    if (rc) return rc;
    lba += n;
    nblk -= n;
    buf += (size_t)n * CSQ_LBA_SIZE;
  }
  return 0;
}

static char *io_errmsg(store *p, dev_queue *q, int rc, const char *zWhat) {
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
  uint8_t *chk = block_alloc(nblk);
  if (!chk) return -ENOMEM;
  int rc = io_read(q, lba, nblk, chk);
  if (rc) {
    *pzErr = io_errmsg(p, q, rc, zWhat);
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

static void snap_link(store *p, store_snap *s) {
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
      uint8_t *buf = block_alloc(nblk);
      if (!buf) return -ENOMEM;
      int rc = io_read(q, pRg->delLba, nblk, buf);
      if (rc) {
        free(buf);
        *pzErr = io_errmsg(p, q, rc, "reading a delete bitmap");
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

/* Both copies now hold *pSb (a completed write_superblocks). */
static void seen_written(store *p, const store_sb *pSb) {
  uint8_t a[CSQ_LBA_SIZE];
  store_sb_encode(pSb, a);
  seen_set(p, a, a);
}

/* Choose the superblock that counts from blocks 0-1 in buf (2 blocks).
** 0 with *pSb; 1 when both blocks are zero (an empty image); else an error
** with *pzErr naming zPath. */
static int sb_from_blocks(const char *zPath, const uint8_t *buf, store_sb *pSb, char **pzErr) {
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
  uint8_t *buf = block_alloc(2);
  if (!buf) return -ENOMEM;
  int rc = io_read(q, 0, 2, buf);
  if (rc) {
    free(buf);
    *pzErr = io_errmsg(p, q, rc, "reading the superblocks (blocks 0-1)");
    return rc;
  }
  rc = sb_from_blocks(dev_path(p->pDev), buf, pSb, pzErr);
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
  uint8_t *buf = block_alloc(pSb->catBlocks);
  if (!buf) return -ENOMEM;
  int rc = io_read(q, pSb->catLba, pSb->catBlocks, buf);
  if (rc) {
    *pzErr = io_errmsg(p, q, rc, "reading the catalog");
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
static int write_catalog(store *p, dev_queue *q, store_snap *s, uint32_t nextTabId, store_sb *pSb,
                         store_txn *pTxn, char **pzErr) {
  uint8_t *a = NULL;
  size_t n = 0;
  int rc = store_cat_encode(s, nextTabId, &a, &n);
  if (rc) return rc;
  uint64_t nblk = (n + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
  uint8_t *buf = block_alloc(nblk);
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
  if (pTxn) ext_push(&pTxn->aAlloc, &pTxn->nAlloc, &pTxn->nAllocAlloc, lba, nblk, 0);
  rc = io_write(q, lba, nblk, buf);
  if (rc)
    *pzErr = io_errmsg(p, q, rc, "writing the catalog");
  else
    rc = verify_write(p, q, lba, nblk, buf, "writing the catalog", pzErr);
  if (rc == 0) {
    pSb->gen = s->gen;
    pSb->catLba = lba;
    pSb->catBlocks = (uint32_t)nblk;
    pSb->catBytes = n;
    pSb->catXxh3 = csq_checksum(buf, n);
  }
  free(buf);
  return rc;
}

/* Superblock flip: copy 0, flush, copy 1, flush. Data and catalog must
** already be durable. On failure *pbMaybe (may be NULL) is 1 unless the
** device refused the very first write: only then is it certain that no
** copy carries the new generation (a write that timed out may still land). */
static int write_superblocks(store *p, dev_queue *q, const store_sb *pSb, char **pzErr,
                             int *pbMaybe) {
  uint8_t *buf = block_alloc(1);
  if (pbMaybe) *pbMaybe = 0;
  if (!buf) return -ENOMEM;
  store_sb_encode(pSb, buf);
  int rc = 0;
  for (int i = 0; i < CSQ_SB_COPIES && rc == 0; i++) {
    rc = dev_nvm_write(q, (uint64_t)i, 1, buf);
    if (pbMaybe && (i > 0 || rc == 0 || rc == CSQ_SC_HOST_TIMEOUT)) *pbMaybe = 1;
    if (rc == 0) rc = dev_nvm_flush(q);
    if (rc)
      *pzErr = io_errmsg(p, q, rc, "writing the superblock");
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
      rc = ext_push(pa, pn, pnAlloc, pRg->lba, pRg->nblk, 0);
      if (rc == 0 && pRg->nDel)
        rc = ext_push(pa, pn, pnAlloc, pRg->delLba,
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
  rc = ext_push(&a, &n, &nAlloc, p->sb.catLba, p->sb.catBlocks, 0);
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
static int rebuild_space(store *p) {
  int rc = compute_space(p, &p->space);
  if (rc == 0) {
    p->bSpaceValid = 1;
    p->nPend = 0;
  }
  return rc;
}

/* Do the superblocks on the media differ from the prefixes in aSeen (read
** before)? 0 when they are the same or cannot be read. */
static int sb_moved(dev_queue *q, uint8_t aSeen[CSQ_SB_COPIES][CSQ_SB_PREFIX]) {
  uint8_t *buf = block_alloc(CSQ_SB_COPIES);
  if (!buf) return 0;
  int bMoved = 0;
  if (io_read(q, 0, CSQ_SB_COPIES, buf) == 0) {
    for (int i = 0; i < CSQ_SB_COPIES; i++)
      if (memcmp(buf + (size_t)i * CSQ_LBA_SIZE, aSeen[i], CSQ_SB_PREFIX) != 0) bMoved = 1;
  }
  free(buf);
  return bMoved;
}

/* The outcome of a prepared commit, as its deciding device records it:
** *pbCommitted = 1 when the decider's committed catalog holds table
** r->zTable with a next-rowid counter of at least r->seq, else 0. The decider
** is read through a queue of its own (its device opened by path, shared when
** this process has it open already), never through its store, so no lock
** of its store is taken: the value read is final for this commit, because
** only a writer that settled this device first can move it (FORMAT.md,
** "Commit protocol"). The decider's own prepared commit, if it has one, is
** left aside: it cannot change the value. 0, or an error with *pzErr. */
static int decision_lookup(store *p, const store_prep *r, int *pbCommitted, char **pzErr) {
  dev_device *pDev = NULL;
  dev_queue *q = NULL;
  uint8_t *buf = NULL;
  store_snap *s = NULL;
  char *zWhy = NULL;
  store_sb sb;
  uint32_t nextTabId;
  int rc = 0;
  *pbCommitted = 0;
  if (strcmp(r->zPath, ":memory:") == 0 || strcmp(r->zPath, dev_path(p->pDev)) == 0) {
    zWhy = dev_mprintf("that is not a device csq can open again");
    rc = -EINVAL;
    goto done;
  }
  dev_options o;
  dev_options_default(&o);
  rc = dev_open(r->zPath, &o, &pDev, &zWhy);
  if (rc == 0) rc = dev_queue_open(pDev, &q);
  if (rc) {
    if (!zWhy) zWhy = q ? dev_mprintf("%s", dev_errmsg(q)) : dev_mprintf("error %d", rc);
    goto done;
  }
  /* read without the decider's lock: a catalog its commits rewrote
  ** meanwhile is read again (see refresh) */
  for (int nTry = 1;; nTry++) {
    uint8_t aSeen[CSQ_SB_COPIES][CSQ_SB_PREFIX];
    free(buf);
    rc = (buf = block_alloc(2)) ? io_read(q, 0, 2, buf) : -ENOMEM;
    if (rc) {
      zWhy = rc == -ENOMEM ? dev_mprintf("out of memory") : dev_mprintf("%s", dev_errmsg(q));
      goto done;
    }
    rc = sb_from_blocks(r->zPath, buf, &sb, &zWhy);
    if (rc == 1) {
      zWhy = dev_mprintf("the image is empty");
      rc = -EBADMSG;
    }
    if (rc) goto done;
    if (memcmp(sb.uuid, r->uuid, 16) != 0) {
      zWhy = dev_mprintf("the image there is another one than the one that took part in the "
                         "commit (its image id differs)");
      rc = -EBADMSG;
      goto done;
    }
    memcpy(aSeen[0], buf, CSQ_SB_PREFIX);
    memcpy(aSeen[1], buf + CSQ_LBA_SIZE, CSQ_SB_PREFIX);
    free(buf);
    buf = block_alloc(sb.catBlocks);
    rc = buf ? io_read(q, sb.catLba, sb.catBlocks, buf) : -ENOMEM;
    if (rc) {
      zWhy = dev_mprintf("reading its catalog failed: %s", dev_errmsg(q));
      goto done;
    }
    if (csq_checksum(buf, sb.catBytes) == sb.catXxh3) break;
    if (nTry < STORE_REREAD_MAX && sb_moved(q, aSeen)) continue;
    zWhy = dev_mprintf("its catalog (blocks %llu-%llu) is damaged (checksum mismatch)",
                       (unsigned long long)sb.catLba,
                       (unsigned long long)(sb.catLba + sb.catBlocks - 1));
    rc = -EBADMSG;
    goto done;
  }
  rc = store_cat_decode(buf, sb.catBytes, &s, &nextTabId, &zWhy);
  if (rc) goto done;
  const store_table *pTab = store_snap_table(s, r->zTable);
  *pbCommitted = pTab && pTab->nextRowid >= r->seq;
done:
  if (rc)
    *pzErr = dev_mprintf("device image %s holds a prepared commit of a transaction over several "
                         "devices whose outcome is recorded on device %s, which cannot be read: %s",
                         dev_path(p->pDev), r->zPath, zWhy ? zWhy : "error");
  free(zWhy);
  if (s) {
    store_snap_free_tables(s);
    free(s);
  }
  free(buf);
  if (q) dev_queue_close(q);
  if (pDev) dev_unref(pDev);
  return rc;
}

/* The superblock that ends the prepared commit of *pSb: its catalog made
** current (bCommit) or dropped. */
static store_sb sb_settled(const store_sb *pSb, int bCommit) {
  store_sb sb = *pSb;
  if (bCommit) {
    sb.gen = pSb->prep.gen;
    sb.catLba = pSb->prep.catLba;
    sb.catBlocks = pSb->prep.catBlocks;
    sb.catBytes = pSb->prep.catBytes;
    sb.catXxh3 = pSb->prep.catXxh3;
  }
  sb.version = CSQ_FORMAT_VERSION;
  memset(&sb.prep, 0, sizeof(sb.prep));
  return sb;
}

/* Writer lock without waiting: only free when no writer (in particular not
** the one that prepared a commit) holds the device. 1 if taken. */
static int writer_trylock(store *p, dev_queue *q) {
  if (pthread_mutex_trylock(&p->writer) != 0) return 0;
  if (p->bShared && dev_resv_acquire(q, 0) != 0) {
    pthread_mutex_unlock(&p->writer);
    return 0;
  }
  return 1;
}
static void writer_unlock(store *p, dev_queue *q) {
  if (p->bShared) dev_resv_release(q);
  pthread_mutex_unlock(&p->writer);
}

/* *pSb (just read) carries a prepared commit: find out its outcome, and
** set *pEff to the superblock whose catalog is the committed state. When
** the writer lock is held (bLocked) or free, the commit is also settled on
** the media (flipped to or dropped), and *pSb becomes what was written; a
** writer must have it settled (an error otherwise), a reader falls back to
** reading the outcome only. Not decided and the lock held by someone else:
** the writer that prepared it is still at work, the current catalog counts
** and the next refresh looks again (p->bUndecided). With p->mu held. */
static int settle_pending(store *p, dev_queue *q, int bLocked, store_sb *pSb, store_sb *pEff,
                          char **pzErr) {
  int bCommitted = 0;
  int rc = decision_lookup(p, &pSb->prep, &bCommitted, pzErr);
  if (rc) return rc;
  store_sb sb = sb_settled(pSb, bCommitted);
  if (bLocked || (!p->bReadOnly && writer_trylock(p, q))) {
    rc = write_superblocks(p, q, &sb, pzErr, NULL);
    if (!bLocked) writer_unlock(p, q);
    p->bSpaceValid = 0; /* the prepared commit's extents are used or free now */
    if (rc == 0) {
      *pSb = *pEff = sb;
      return 0;
    }
    if (bLocked) return rc;
    free(*pzErr);
    *pzErr = NULL;
  }
  *pEff = sb;
  p->bUndecided = !bCommitted;
  return 0;
}

/* Read the superblocks and, when they name another catalog than p->pCur's,
** that catalog, making it p->pCur. aSeen receives the superblock prefixes
** read; *pbCatalog is set when the failure came from reading the catalog
** (or its delete bitmaps), after the superblocks were read. With p->mu
** held; see refresh. */
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
    rc = settle_pending(p, q, bLocked, &sb, &eff, pzErr);
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
    snap_link(p, s);
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
static int refresh(store *p, dev_queue *q, int bLocked, char **pzErr) {
  if (!p->bShared && p->pCur) return 0;
  if (p->pCur && !p->bUndecided && sb_unchanged(p, q)) return 0;
  for (int nTry = 1;; nTry++) {
    uint8_t aSeen[CSQ_SB_COPIES][CSQ_SB_PREFIX];
    int bCatalog = 0;
    int rc = refresh_read(p, q, bLocked, aSeen, &bCatalog, pzErr);
    if (rc != -EBADMSG || !bCatalog || bLocked || !p->bShared || !sb_moved(q, aSeen)) return rc;
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
  int rc = refresh(p, q, 0, pzErr);
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
  int rc = write_catalog(p, q, s, 1, &sb, NULL, pzErr);
  if (rc == 0) rc = dev_nvm_flush(q);
  sb.hwm = p->space.hwm;
  if (rc == 0) rc = write_superblocks(p, q, &sb, pzErr, NULL);
  if (rc) {
    if (!*pzErr) *pzErr = io_errmsg(p, q, rc, "formatting the image");
    free(s);
    return rc;
  }
  snap_link(p, s);
  p->pCur = s;
  p->sb = sb;
  p->nextTabId = 1;
  p->bSpaceValid = 1;
  seen_written(p, &sb);
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
    p->bShared = 1;               /* force the first read */
    rc = refresh(p, q, 0, pzErr); /* settles a prepared commit if it can */
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
  a = block_alloc(pRg->nblk);
  if (!a) return NULL;
  if (io_read(q, pRg->lba, pRg->nblk, a)) {
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
  uint8_t *buf = block_alloc(last - first);
  if (!buf) return -ENOMEM;
  int rc = io_read(q, pRg->lba + first, last - first, buf);
  char aTab[DEV_NAME_SHOW_BUF], aCol[DEV_NAME_SHOW_BUF];
  const char *zTab = dev_name_show(pTab->zName, aTab);
  const char *zCol = iChunk == 0 ? "rowid" : dev_name_show(pTab->aCol[iChunk - 1].zName, aCol);
  if (rc) {
    char *z = io_errmsg(p, q, rc, "reading");
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

/* ---- transactions ---- */

static void ms_sleep(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int store_txn_begin(store *p, dev_queue *q, int busyTimeoutMs, store_txn **ppTxn, char **pzErr) {
  int waited = 0;
  if (p->bReadOnly) {
    *pzErr = dev_mprintf("device image %s is read-only (this process may not write it: file "
                         "permissions, a read-only file system or a write-protected device)",
                         dev_path(p->pDev));
    return -EROFS;
  }
  while (pthread_mutex_trylock(&p->writer) != 0) {
    if (waited >= busyTimeoutMs) {
      *pzErr = dev_mprintf("device %s is locked by another writer", dev_path(p->pDev));
      return -EBUSY;
    }
    ms_sleep(2);
    waited += 2;
  }
  int rc = 0;
  if (p->bShared) {
    rc = dev_resv_acquire(q, busyTimeoutMs - waited > 0 ? busyTimeoutMs - waited : 0);
    if (rc) {
      pthread_mutex_unlock(&p->writer);
      if (rc == CSQ_SC_RESV_CONFLICT || rc == -EBUSY) {
        *pzErr = dev_mprintf("device %s is locked by another process", dev_path(p->pDev));
        return -EBUSY;
      }
      *pzErr = io_errmsg(p, q, rc, "reservation acquire");
      return rc;
    }
  }
  store_txn *t = calloc(1, sizeof(*t));
  if (!t) {
    rc = -ENOMEM;
    goto fail;
  }
  t->p = p;
  t->q = q;
  pthread_mutex_lock(&p->mu);
  rc = refresh(p, q, 1, pzErr); /* a prepared commit is settled before anything is written */
  if (rc == 0 && !p->bSpaceValid) rc = rebuild_space(p);
  if (rc == 0) {
    /* deferred frees no live snapshot can still read become free */
    uint64_t minGen = UINT64_MAX;
    for (store_snap *s = p->pLive; s; s = s->pNextLive)
      if (s->gen < minGen) minGen = s->gen;
    int j = 0;
    for (int i = 0; i < p->nPend; i++) {
      if (p->aPend[i].gen <= minGen) {
        if (rc == 0) rc = space_free(&p->space, p->aPend[i].lba, p->aPend[i].nblk);
      } else {
        p->aPend[j++] = p->aPend[i];
      }
    }
    p->nPend = j;
    t->pBase = p->pCur;
    t->sbBase = p->sb;
    p->pCur->nRef++;
    t->nextTabId = p->nextTabId;
  }
  pthread_mutex_unlock(&p->mu);
  if (rc) goto fail;
  t->apTab = calloc((size_t)t->pBase->nTab + 1, sizeof(store_table *));
  if (!t->apTab) {
    rc = -ENOMEM;
    goto fail;
  }
  for (int i = 0; i < t->pBase->nTab; i++) {
    t->apTab[i] = store_table_clone(t->pBase->apTab[i]);
    if (!t->apTab[i]) {
      rc = -ENOMEM;
      goto fail;
    }
    t->nTab++;
  }
  *ppTxn = t;
  return 0;
fail:
  if (t) {
    for (int i = 0; i < t->nTab; i++) store_table_free(t->apTab[i]);
    free(t->apTab);
    if (t->pBase) store_snap_unref(t->pBase);
    free(t);
  }
  if (p->bShared) dev_resv_release(q);
  pthread_mutex_unlock(&p->writer);
  if (rc == -ENOMEM && !*pzErr) *pzErr = dev_mprintf("out of memory");
  return rc;
}

store_table *store_txn_table(store_txn *t, const char *zName) {
  for (int i = 0; i < t->nTab; i++)
    if (strcasecmp(t->apTab[i]->zName, zName) == 0) return t->apTab[i];
  return NULL;
}

int store_txn_dirty(const store_txn *t) {
  return t->bDirty;
}

/* Does name z (a zWhat) fit the catalog, a u16 length (FORMAT.md
** "Catalog")? 0, or -ENAMETOOLONG with *pzErr. */
static int name_fits(const char *zWhat, const char *z, char **pzErr) {
  size_t n = z ? strlen(z) : 0;
  if (n <= STORE_MAX_NAME) return 0;
  char aName[DEV_NAME_SHOW_BUF];
  *pzErr = dev_mprintf("%s '%s' is %zu bytes long; a csq catalog holds at most %d bytes", zWhat,
                       dev_name_show(z, aName), n, STORE_MAX_NAME);
  return -ENAMETOOLONG;
}

/* A table's name, its columns' names and declared types all fit. */
static int names_fit(const char *zTable, int nCol, const store_col *aCol, char **pzErr) {
  int rc = name_fits("table name", zTable, pzErr);
  for (int i = 0; i < nCol && rc == 0; i++) {
    rc = name_fits("column name", aCol[i].zName, pzErr);
    if (rc == 0) rc = name_fits("declared type", aCol[i].zType, pzErr);
  }
  return rc;
}

int store_txn_create_table(store_txn *t, const char *zName, int nCol, const store_col *aCol,
                           char **pzErr) {
  char aName[DEV_NAME_SHOW_BUF];
  int rc = names_fit(zName, nCol, aCol, pzErr);
  if (rc) return rc;
  if (store_txn_table(t, zName)) {
    *pzErr = dev_mprintf("table %s already exists on device %s", dev_name_show(zName, aName),
                         dev_path(t->p->pDev));
    return -EEXIST;
  }
  store_table *pTab = calloc(1, sizeof(*pTab));
  store_table **ap = realloc(t->apTab, sizeof(store_table *) * ((size_t)t->nTab + 2));
  if (!pTab || !ap) {
    free(pTab);
    if (ap) t->apTab = ap;
    return -ENOMEM;
  }
  t->apTab = ap;
  pTab->id = t->nextTabId++;
  pTab->zName = strdup(zName);
  pTab->aCol = calloc((size_t)nCol, sizeof(store_col));
  pTab->nextRowid = 1;
  if (!pTab->zName || !pTab->aCol) {
    store_table_free(pTab);
    return -ENOMEM;
  }
  for (int i = 0; i < nCol; i++) {
    pTab->aCol[i].zName = strdup(aCol[i].zName);
    pTab->aCol[i].zType = strdup(aCol[i].zType ? aCol[i].zType : "");
    pTab->aCol[i].bNotNull = aCol[i].bNotNull;
    pTab->nCol = i + 1;
    if (!pTab->aCol[i].zName || !pTab->aCol[i].zType) {
      store_table_free(pTab);
      return -ENOMEM;
    }
  }
  t->apTab[t->nTab++] = pTab;
  t->bDirty = 1;
  return 0;
}

/* Give back a row group's space: at once if this transaction wrote it,
** at commit if it is committed. */
static int release_rg(store_txn *t, store_rg *pRg) {
  int rc = 0;
  if (pRg->txnState == 2) {
    pthread_mutex_lock(&t->p->mu);
    rc = space_free(&t->p->space, pRg->lba, pRg->nblk);
    pthread_mutex_unlock(&t->p->mu);
    for (int i = 0; i < t->nAlloc; i++)
      if (t->aAlloc[i].lba == pRg->lba) t->aAlloc[i].nblk = 0;
  } else {
    rc = ext_push(&t->aFree, &t->nFree, &t->nFreeAlloc, pRg->lba, pRg->nblk, 0);
  }
  if (rc == 0 && pRg->delLba && pRg->txnState != 2) {
    uint64_t n = (pRg->delBytes + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
    rc = ext_push(&t->aFree, &t->nFree, &t->nFreeAlloc, pRg->delLba, n, 0);
  }
  return rc;
}

int store_txn_drop_table(store_txn *t, const char *zName, char **pzErr) {
  for (int i = 0; i < t->nTab; i++) {
    store_table *pTab = t->apTab[i];
    if (strcasecmp(pTab->zName, zName) != 0) continue;
    for (int g = 0; g < pTab->nRg; g++) {
      int rc = release_rg(t, pTab->apRg[g]);
      if (rc) return rc;
    }
    store_table_free(pTab);
    memmove(&t->apTab[i], &t->apTab[i + 1], sizeof(store_table *) * (size_t)(t->nTab - i - 1));
    t->nTab--;
    t->bDirty = 1;
    return 0;
  }
  char aName[DEV_NAME_SHOW_BUF];
  *pzErr =
      dev_mprintf("no table %s on device %s", dev_name_show(zName, aName), dev_path(t->p->pDev));
  return -ENOENT;
}

int store_txn_rename_table(store_txn *t, const char *zOld, const char *zNew, char **pzErr) {
  char aName[DEV_NAME_SHOW_BUF];
  store_table *pTab = store_txn_table(t, zOld);
  if (!pTab) {
    *pzErr =
        dev_mprintf("no table %s on device %s", dev_name_show(zOld, aName), dev_path(t->p->pDev));
    return -ENOENT;
  }
  int rc = names_fit(zNew, 0, NULL, pzErr);
  if (rc) return rc;
  store_table *pOther = store_txn_table(t, zNew);
  if (pOther && pOther != pTab) {
    *pzErr = dev_mprintf("table %s already exists on device %s", dev_name_show(zNew, aName),
                         dev_path(t->p->pDev));
    return -EEXIST;
  }
  char *z = strdup(zNew);
  if (!z) return -ENOMEM;
  free(pTab->zName);
  pTab->zName = z;
  t->bDirty = 1;
  return 0;
}

int64_t store_txn_new_rowids(store_txn *t, store_table *pTab, int64_t n) {
  int64_t first = pTab->nextRowid;
  pTab->nextRowid += n;
  t->bDirty = 1;
  return first;
}

void store_txn_saw_rowid(store_txn *t, store_table *pTab, int64_t iRowid) {
  if (iRowid >= pTab->nextRowid) {
    pTab->nextRowid = iRowid == INT64_MAX ? INT64_MAX : iRowid + 1;
    t->bDirty = 1;
  }
}

static int table_push_rg(store_table *pTab, store_rg *pRg) {
  if (pTab->nRg == pTab->nRgAlloc) {
    int nNew = pTab->nRgAlloc ? pTab->nRgAlloc * 2 : 8;
    store_rg **ap = realloc(pTab->apRg, sizeof(store_rg *) * (size_t)nNew);
    if (!ap) return -ENOMEM;
    pTab->apRg = ap;
    pTab->nRgAlloc = nNew;
  }
  pTab->apRg[pTab->nRg++] = pRg;
  return 0;
}

/* Encode the chunks of rows [i0, i0+n) and write them as one extent. */
static int write_rg(store_txn *t, store_table *pTab, const csq_vec *aCol, uint32_t i0, uint32_t n,
                    store_rg **ppRg, char **pzErr) {
  int nChunk = pTab->nCol + 1;
  uint8_t **apEnc = calloc((size_t)nChunk, sizeof(uint8_t *));
  size_t *anEnc = calloc((size_t)nChunk, sizeof(size_t));
  store_rg *pRg = calloc(1, sizeof(*pRg));
  uint8_t *buf = NULL;
  int rc = 0;
  if (!apEnc || !anEnc || !pRg) {
    rc = -ENOMEM;
    goto done;
  }
  pRg->nRef = 1;
  pRg->txnState = 2;
  pRg->nRow = n;
  pRg->nChunk = nChunk;
  pRg->aChunk = calloc((size_t)nChunk, sizeof(store_chunk));
  if (!pRg->aChunk) {
    rc = -ENOMEM;
    goto done;
  }
  uint64_t off = 0;
  for (int c = 0; c < nChunk; c++) {
    csq_chunk_info info;
    rc = csq_chunk_encode(&aCol[c], i0, n, &apEnc[c], &anEnc[c], &info);
    if (rc) goto done;
    store_chunk *pC = &pRg->aChunk[c];
    pC->off = (uint32_t)off;
    pC->len = (uint32_t)anEnc[c];
    pC->xxh3 = info.xxh3;
    pC->enc = info.enc;
    pC->zone = info.zone;
    off = (off + anEnc[c] + 7) & ~(uint64_t)7;
    if (off > UINT32_MAX - CSQ_LBA_SIZE) {
      *pzErr = dev_mprintf("table %s: a row group would exceed 4 GiB; insert fewer rows per "
                           "transaction or use a smaller rowgroup= option",
                           pTab->zName);
      rc = -EFBIG;
      goto done;
    }
  }
  uint64_t nblk = (off + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
  if (nblk == 0) nblk = 1;
  buf = block_alloc(nblk);
  if (!buf) {
    rc = -ENOMEM;
    goto done;
  }
  memset(buf, 0, nblk * CSQ_LBA_SIZE);
  for (int c = 0; c < nChunk; c++) memcpy(buf + pRg->aChunk[c].off, apEnc[c], anEnc[c]);
  pthread_mutex_lock(&t->p->mu);
  rc = space_alloc(&t->p->space, nblk, &pRg->lba);
  pthread_mutex_unlock(&t->p->mu);
  if (rc) {
    *pzErr = dev_mprintf("device %s is full", dev_path(t->p->pDev));
    goto done;
  }
  pRg->nblk = (uint32_t)nblk;
  rc = ext_push(&t->aAlloc, &t->nAlloc, &t->nAllocAlloc, pRg->lba, nblk, 0);
  if (rc == 0) {
    rc = io_write(t->q, pRg->lba, nblk, buf);
    if (rc) *pzErr = io_errmsg(t->p, t->q, rc, "writing a row group");
  }
done:
  if (apEnc)
    for (int c = 0; c < nChunk; c++) free(apEnc[c]);
  free(apEnc);
  free(anEnc);
  free(buf);
  if (rc) {
    if (pRg && pRg->nblk) {
      /* stays recorded in aAlloc: rollback returns it */
    }
    store_rg_unref(pRg);
    if (rc == -ENOMEM && !*pzErr) *pzErr = dev_mprintf("out of memory");
    return rc;
  }
  *ppRg = pRg;
  return 0;
}

int store_txn_append(store_txn *t, store_table *pTab, const csq_vec *aCol, uint32_t i0, uint32_t n,
                     char **pzErr) {
  if (n == 0) return 0;
  store_rg *pRg = NULL;
  int rc = write_rg(t, pTab, aCol, i0, n, &pRg, pzErr);
  if (rc) return rc;
  rc = table_push_rg(pTab, pRg);
  if (rc) {
    store_rg_unref(pRg);
    return rc;
  }
  t->bDirty = 1;
  return 0;
}

int store_txn_append_merge(store_txn *t, store_table *pTab, const csq_vec *aCol, uint32_t i0,
                           uint32_t n, uint32_t nSmall, char **pzErr) {
  store_rg *pLast = pTab->nRg ? pTab->apRg[pTab->nRg - 1] : NULL;
  if (!pLast || pLast->nRow - pLast->nDel >= nSmall || n >= nSmall)
    return store_txn_append(t, pTab, aCol, i0, n, pzErr);
  int nChunk = pTab->nCol + 1;
  csq_vec *aOld = calloc((size_t)nChunk * 2, sizeof(csq_vec));
  int *aiCol = calloc((size_t)nChunk, sizeof(int));
  uint32_t *aSel = malloc(sizeof(uint32_t) * (pLast->nRow + 1));
  int rc = 0;
  if (!aOld || !aiCol || !aSel) {
    rc = -ENOMEM;
    goto done;
  }
  for (int c = 0; c < nChunk; c++) {
    csq_vec_init(&aOld[c]);
    aiCol[c] = c - 1;
  }
  rc = store_read_chunks(t->p, t->q, pTab, pLast, aiCol, nChunk, aOld, pzErr);
  if (rc) goto done;
  uint32_t nSel = 0;
  for (uint32_t i = 0; i < pLast->nRow; i++)
    if (!store_rg_deleted(pLast, i)) aSel[nSel++] = i;
  for (int c = 0; c < nChunk && rc == 0; c++) {
    csq_vec_truncate(&aOld[c], pLast->nRow);
    if (nSel < pLast->nRow) csq_vec_select(&aOld[c], aSel, nSel);
    rc = csq_vec_append(&aOld[c], &aCol[c], i0, n);
  }
  if (rc) goto done;
  store_rg *pNew = NULL;
  rc = write_rg(t, pTab, aOld, 0, nSel + n, &pNew, pzErr);
  if (rc) goto done;
  rc = release_rg(t, pLast);
  if (rc) {
    store_rg_unref(pNew);
    goto done;
  }
  store_rg_unref(pLast);
  pTab->apRg[pTab->nRg - 1] = pNew;
  t->bDirty = 1;
done:
  if (aOld)
    for (int c = 0; c < nChunk; c++) csq_vec_free(&aOld[c]);
  free(aOld);
  free(aiCol);
  free(aSel);
  if (rc == -ENOMEM && !*pzErr) *pzErr = dev_mprintf("out of memory");
  return rc;
}

int store_txn_find(store_txn *t, store_table *pTab, int64_t iRowid, int bDeleted, int *piRg,
                   uint32_t *piRow, char **pzErr) {
  *piRg = -1;
  *piRow = 0;
  for (int g = pTab->nRg - 1; g >= 0; g--) {
    store_rg *pRg = pTab->apRg[g];
    const csq_zone *z = &pRg->aChunk[0].zone;
    if (iRowid < z->iMin || iRowid > z->iMax) continue;
    const int64_t *a = NULL;
    int rc = store_rg_rowids(t->p, t->q, pTab, pRg, &a, pzErr);
    if (rc) return rc;
    if (pRg->bSorted) {
      uint32_t lo = 0, hi = pRg->nRow;
      while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a[mid] < iRowid)
          lo = mid + 1;
        else
          hi = mid;
      }
      if (lo < pRg->nRow && a[lo] == iRowid && (bDeleted || !store_rg_deleted(pRg, lo))) {
        *piRg = g;
        *piRow = lo;
        return 0;
      }
    } else {
      for (uint32_t i = 0; i < pRg->nRow; i++) {
        if (a[i] == iRowid && (bDeleted || !store_rg_deleted(pRg, i))) {
          *piRg = g;
          *piRow = i;
          return 0;
        }
      }
    }
  }
  return 0;
}

int store_txn_max_rowid(store_txn *t, store_table *pTab, int64_t *pMax, int *pbAny, char **pzErr) {
  int64_t best = 0;
  int bAny = 0;
  /* a row group without deletes holds its zone map's maximum */
  for (int g = 0; g < pTab->nRg; g++) {
    const store_rg *pRg = pTab->apRg[g];
    if (pRg->nDel == 0 && pRg->nRow > 0 && (!bAny || pRg->aChunk[0].zone.iMax > best)) {
      best = pRg->aChunk[0].zone.iMax;
      bAny = 1;
    }
  }
  /* the others only where they might hold more: read their rowids */
  for (int g = 0; g < pTab->nRg; g++) {
    store_rg *pRg = pTab->apRg[g];
    if (pRg->nDel == 0 || pRg->nDel >= pRg->nRow) continue;
    if (bAny && pRg->aChunk[0].zone.iMax <= best) continue;
    const int64_t *a = NULL;
    int rc = store_rg_rowids(t->p, t->q, pTab, pRg, &a, pzErr);
    if (rc) return rc;
    for (uint32_t i = 0; i < pRg->nRow; i++) {
      if (store_rg_deleted(pRg, i) || (bAny && a[i] <= best)) continue;
      best = a[i];
      bAny = 1;
    }
  }
  *pMax = bAny ? best : 0;
  *pbAny = bAny;
  return 0;
}

int store_txn_delete(store_txn *t, store_table *pTab, int iRg, uint32_t iRow, int bDelete,
                     char **pzErr) {
  (void)pzErr;
  if (iRg < 0 || iRg >= pTab->nRg) return -EINVAL;
  store_rg *pRg = pTab->apRg[iRg];
  if (iRow >= pRg->nRow) return -EINVAL;
  if (store_rg_deleted(pRg, iRow) == !!bDelete) return 0;
  if (pRg->txnState == 0) {
    store_rg *pNew = store_rg_clone(pRg);
    if (!pNew) return -ENOMEM;
    pNew->txnState = 1;
    /* the rowid cache stays valid: share a copy */
    if (pRg->aRowid) {
      pNew->aRowid = malloc(sizeof(int64_t) * pRg->nRow);
      if (pNew->aRowid) {
        memcpy(pNew->aRowid, pRg->aRowid, sizeof(int64_t) * pRg->nRow);
        pNew->bSorted = pRg->bSorted;
      }
    }
    store_rg_unref(pRg);
    pTab->apRg[iRg] = pRg = pNew;
  }
  if (!pRg->aDel) {
    pRg->aDel = calloc((pRg->nRow + 7) / 8, 1);
    if (!pRg->aDel) return -ENOMEM;
  }
  if (bDelete) {
    pRg->aDel[iRow >> 3] |= (uint8_t)(1u << (iRow & 7));
    pRg->nDel++;
  } else {
    pRg->aDel[iRow >> 3] &= (uint8_t) ~(1u << (iRow & 7));
    pRg->nDel--;
  }
  if (pRg->txnState == 0) pRg->txnState = 1;
  t->bDirty = 1;
  return 0;
}

/* Free t and release the writer lock. bKeep: the blocks t allocated stay
** out of free space (they are committed, or may be: a prepared commit not
** settled); else they return to it. */
static void txn_free(store_txn *t, int bKeep) {
  store *p = t->p;
  if (t->pPrep) {
    t->pPrep->apTab = NULL; /* t->apTab's: freed below */
    t->pPrep->nTab = 0;
    free(t->pPrep);
  }
  for (int i = 0; i < t->nTab; i++) store_table_free(t->apTab[i]);
  free(t->apTab);
  if (!bKeep) {
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < t->nAlloc; i++)
      if (t->aAlloc[i].nblk) space_free(&p->space, t->aAlloc[i].lba, t->aAlloc[i].nblk);
    pthread_mutex_unlock(&p->mu);
  }
  free(t->aAlloc);
  free(t->aFree);
  store_snap_unref(t->pBase);
  if (p->bShared) dev_resv_release(t->q);
  pthread_mutex_unlock(&p->writer);
  free(t);
}

/* A failed superblock write may have left a copy on the media: trust
** nothing held about the image until it is read again. */
static void distrust(store *p) {
  pthread_mutex_lock(&p->mu);
  p->bSpaceValid = 0;
  p->bShared = 1;
  p->bSeen = 0;
  pthread_mutex_unlock(&p->mu);
}

void store_txn_rollback(store_txn *t) {
  if (t->bPrepared) {
    /* only the decider can say which way it goes */
    int bCommitted = 0;
    char *zErr = NULL;
    store_txn_settle(t, &bCommitted, &zErr);
    free(zErr);
    return;
  }
  txn_free(t, 0);
}

/* Write the delete bitmaps that changed; drop row groups whose rows are all
** deleted. */
static int write_delmaps(store_txn *t, store_table *pTab, char **pzErr) {
  for (int g = 0; g < pTab->nRg; g++) {
    store_rg *pRg = pTab->apRg[g];
    if (pRg->txnState == 0) continue;
    if (pRg->nDel == pRg->nRow) {
      int rc = release_rg(t, pRg);
      if (rc) return rc;
      store_rg_unref(pRg);
      memmove(&pTab->apRg[g], &pTab->apRg[g + 1], sizeof(store_rg *) * (size_t)(pTab->nRg - g - 1));
      pTab->nRg--;
      g--;
      continue;
    }
    if (pRg->txnState == 1 && pRg->delLba) {
      uint64_t n = (pRg->delBytes + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
      int rc = ext_push(&t->aFree, &t->nFree, &t->nFreeAlloc, pRg->delLba, n, 0);
      if (rc) return rc;
    }
    pRg->delLba = 0;
    pRg->delBytes = 0;
    pRg->delXxh3 = 0;
    if (pRg->nDel == 0) {
      free(pRg->aDel);
      pRg->aDel = NULL;
      continue;
    }
    uint32_t nBytes = (pRg->nRow + 7) / 8;
    uint64_t nblk = (nBytes + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
    uint8_t *buf = block_alloc(nblk);
    if (!buf) return -ENOMEM;
    memset(buf, 0, nblk * CSQ_LBA_SIZE);
    memcpy(buf, pRg->aDel, nBytes);
    uint64_t lba;
    pthread_mutex_lock(&t->p->mu);
    int rc = space_alloc(&t->p->space, nblk, &lba);
    pthread_mutex_unlock(&t->p->mu);
    if (rc == 0) rc = ext_push(&t->aAlloc, &t->nAlloc, &t->nAllocAlloc, lba, nblk, 0);
    if (rc == 0) {
      rc = io_write(t->q, lba, nblk, buf);
      if (rc) *pzErr = io_errmsg(t->p, t->q, rc, "writing a delete bitmap");
    }
    if (rc == 0) {
      pRg->delLba = lba;
      pRg->delBytes = nBytes;
      pRg->delXxh3 = XXH3_64bits(buf, nBytes);
    }
    free(buf);
    if (rc) return rc;
  }
  return 0;
}

/* Steps 2-3 of a commit (FORMAT.md, "Commit protocol"): the changed delete
** bitmaps and the new catalog to free space, then a flush. *ppSnap: the new
** snapshot, whose tables are t->apTab (still owned by t); *pSb: the
** (version 1) superblock that makes it current. */
static int txn_write_catalog(store_txn *t, store_snap **ppSnap, store_sb *pSb, char **pzErr) {
  store *p = t->p;
  int rc = 0;
  for (int i = 0; i < t->nTab && rc == 0; i++) rc = write_delmaps(t, t->apTab[i], pzErr);
  store_snap *s = NULL;
  *pSb = t->sbBase;
  pSb->version = CSQ_FORMAT_VERSION;
  memset(&pSb->prep, 0, sizeof(pSb->prep));
  if (rc == 0) {
    s = calloc(1, sizeof(*s));
    if (!s) rc = -ENOMEM;
  }
  if (rc == 0) {
    s->nRef = 1;
    s->gen = t->pBase->gen + 1;
    s->nTab = t->nTab;
    s->apTab = t->apTab;
    rc = write_catalog(p, t->q, s, t->nextTabId, pSb, t, pzErr);
  }
  if (rc == 0) {
    rc = dev_nvm_flush(t->q);
    if (rc) *pzErr = io_errmsg(p, t->q, rc, "flushing data before commit");
  }
  if (rc) {
    free(s); /* its tables are t's */
    if (rc == -ENOMEM && !*pzErr) *pzErr = dev_mprintf("out of memory");
    return rc;
  }
  pthread_mutex_lock(&p->mu);
  pSb->hwm = p->space.hwm;
  pthread_mutex_unlock(&p->mu);
  *ppSnap = s;
  return 0;
}

/* The commit is durable (superblock *pSb on both copies): the working tables
** become the store's current snapshot s, and t is freed. */
static void txn_finish(store_txn *t, store_snap *s, const store_sb *pSb) {
  store *p = t->p;
  for (int i = 0; i < s->nTab; i++)
    for (int g = 0; g < s->apTab[i]->nRg; g++) s->apTab[i]->apRg[g]->txnState = 0;
  t->apTab = NULL;
  t->nTab = 0;
  if (t->pPrep == s) t->pPrep = NULL;
  pthread_mutex_lock(&p->mu);
  /* the catalog this commit replaces: the one the transaction started from
  ** (p->sb may already describe this very commit: a reader can re-read the
  ** superblocks while they are being written) */
  ext_push(&p->aPend, &p->nPend, &p->nPendAlloc, t->sbBase.catLba, t->sbBase.catBlocks, s->gen);
  for (int i = 0; i < t->nFree; i++)
    ext_push(&p->aPend, &p->nPend, &p->nPendAlloc, t->aFree[i].lba, t->aFree[i].nblk, s->gen);
  snap_link(p, s);
  store_snap *pOld = p->pCur;
  p->pCur = s;
  p->sb = *pSb;
  p->nextTabId = t->nextTabId;
  p->bSpaceValid = 1;
  p->bUndecided = 0;
  seen_written(p, pSb);
  pthread_mutex_unlock(&p->mu);
  store_snap_unref(pOld);
  txn_free(t, 1);
}

static int txn_flip(store_txn *t, char **pzErr);

int store_txn_commit(store_txn *t, char **pzErr) {
  store *p = t->p;
  if (t->bPrepared) return txn_flip(t, pzErr);
  if (!t->bDirty) {
    txn_free(t, 0);
    return 0;
  }
  store_snap *s = NULL;
  store_sb sb;
  int rc = txn_write_catalog(t, &s, &sb, pzErr);
  if (rc == 0) {
    int bMaybe = 0;
    rc = write_superblocks(p, t->q, &sb, pzErr, &bMaybe);
    if (rc && bMaybe && *pzErr) {
      /* say so: the caller cannot tell from the error alone */
      char *z = dev_mprintf("%s; the commit may have taken effect (a superblock copy "
                            "with it may be on the media): the database holds the state "
                            "before or after this transaction, whole",
                            *pzErr);
      if (z) {
        free(*pzErr);
        *pzErr = z;
      }
    }
    /* the first copy may or may not be durable: re-read before trusting
    ** anything we hold */
    if (rc) distrust(p);
  }
  if (rc) {
    free(s); /* its tables are t's */
    if (rc == -ENOMEM && !*pzErr) *pzErr = dev_mprintf("out of memory");
    txn_free(t, 0);
    return rc;
  }
  txn_finish(t, s, &sb);
  return 0;
}

/* ---- transactions over several devices: the two-step commit ---- */

void store_image_id(store *p, uint8_t aId[16]) {
  pthread_mutex_lock(&p->mu);
  memcpy(aId, p->sb.uuid, 16);
  pthread_mutex_unlock(&p->mu);
}

int store_txn_prepared(const store_txn *t) {
  return t->bPrepared;
}

int store_txn_prepare(store_txn *t, const store_decision *pDec, char **pzErr) {
  store *p = t->p;
  if (t->bPrepared) return -EINVAL;
  if (!t->bDirty) return 0; /* nothing to commit here: commit and rollback free it */
  size_t nPath = strlen(pDec->zPath), nTable = strlen(pDec->zTable);
  if (nPath == 0 || nPath > CSQ_SB_MAX_PATH || nTable == 0 || nTable > CSQ_SB_MAX_TABLE) {
    *pzErr = dev_mprintf("device %s: cannot prepare a commit decided by %s (table %s): a path "
                         "longer than %d bytes or a name longer than %d bytes does not fit the "
                         "superblock",
                         dev_path(p->pDev), pDec->zPath, pDec->zTable, CSQ_SB_MAX_PATH,
                         CSQ_SB_MAX_TABLE);
    return -ENAMETOOLONG;
  }
  store_snap *s = NULL;
  store_sb sb;
  int rc = txn_write_catalog(t, &s, &sb, pzErr);
  if (rc) return rc;
  store_prep *r = &t->prep;
  memset(r, 0, sizeof(*r));
  r->gen = s->gen;
  r->catLba = sb.catLba;
  r->catBlocks = sb.catBlocks;
  r->catBytes = sb.catBytes;
  r->catXxh3 = sb.catXxh3;
  memcpy(r->uuid, pDec->uuid, 16);
  r->seq = pDec->seq;
  memcpy(r->zPath, pDec->zPath, nPath);
  memcpy(r->zTable, pDec->zTable, nTable);
  store_sb *pPrep = malloc(sizeof(*pPrep)); /* big: not on the stack */
  if (!pPrep) {
    free(s);
    return -ENOMEM;
  }
  *pPrep = t->sbBase;
  pPrep->version = CSQ_SB_VERSION_PREPARED;
  pPrep->hwm = sb.hwm;
  pPrep->prep = *r;
  int bMaybe = 0;
  rc = write_superblocks(p, t->q, pPrep, pzErr, &bMaybe);
  if (rc) {
    /* a copy with the prepared commit may be on the media: its decider
    ** never commits it, so whoever settles it next drops it */
    if (bMaybe) distrust(p);
    free(pPrep);
    free(s); /* its tables are t's */
    return rc;
  }
  pthread_mutex_lock(&p->mu);
  seen_written(p, pPrep);
  p->bUndecided = 1; /* readers must look up the outcome from now on */
  pthread_mutex_unlock(&p->mu);
  free(pPrep);
  t->bPrepared = 1;
  t->pPrep = s;
  t->sbFlip = sb;
  return 0;
}

/* Step 3 of a prepared commit whose decider committed: make the prepared
** catalog current. On failure the decision stands and the next reader or
** writer of the device flips it (p is re-read before being trusted); t is
** freed either way. */
static int txn_flip(store_txn *t, char **pzErr) {
  store *p = t->p;
  int rc = write_superblocks(p, t->q, &t->sbFlip, pzErr, NULL);
  if (rc) {
    distrust(p);
    txn_free(t, 1); /* its blocks are committed */
    return rc;
  }
  txn_finish(t, t->pPrep, &t->sbFlip);
  return 0;
}

int store_txn_settle(store_txn *t, int *pbCommitted, char **pzErr) {
  store *p = t->p;
  *pbCommitted = 0;
  if (!t->bPrepared) {
    txn_free(t, 0);
    return 0;
  }
  int rc = decision_lookup(p, &t->prep, pbCommitted, pzErr);
  if (rc == 0 && *pbCommitted) return txn_flip(t, pzErr);
  if (rc == 0) {
    /* not decided, and never will be (the decider's writer gave up): drop
    ** the prepared catalog. The blocks it used become free once the
    ** superblocks no longer name it. */
    rc = write_superblocks(p, t->q, &t->sbBase, pzErr, NULL);
    if (rc == 0) {
      pthread_mutex_lock(&p->mu);
      seen_written(p, &t->sbBase);
      p->bUndecided = 0;
      pthread_mutex_unlock(&p->mu);
      txn_free(t, 0);
      return 0;
    }
  }
  distrust(p); /* the prepared commit stays: settled by the next reader or writer */
  txn_free(t, 1);
  return rc;
}
