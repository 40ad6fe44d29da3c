/*
** device/store/twostep.c - the two-step commit of a transaction over several
** devices (FORMAT.md, "Commit protocol").
**
** store_txn_prepare writes the transaction's catalog and a superblock
** (version 2) that carries it as a prepared commit, until the writer flips
** to it or drops it (store_txn_settle) by the outcome its deciding device
** records. Anyone who reads a superblock with a prepared commit looks up
** that outcome (decision_lookup) and reads the state it gives; whoever can
** take the writer lock (so the writer that prepared it is gone) also
** settles it on the media (store_settle_pending).
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "device/format/checksum.h"
#include "device/store/store_int.h"

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
  ** meanwhile is read again (see store_refresh) */
  for (int nTry = 1;; nTry++) {
    uint8_t aSeen[CSQ_SB_COPIES][CSQ_SB_PREFIX];
    free(buf);
    rc = (buf = store_block_alloc(2)) ? store_io_read(q, 0, 2, buf) : -ENOMEM;
    if (rc) {
      zWhy = rc == -ENOMEM ? dev_mprintf("out of memory") : dev_mprintf("%s", dev_errmsg(q));
      goto done;
    }
    rc = store_sb_from_blocks(r->zPath, buf, &sb, &zWhy);
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
    buf = store_block_alloc(sb.catBlocks);
    rc = buf ? store_io_read(q, sb.catLba, sb.catBlocks, buf) : -ENOMEM;
    if (rc) {
      zWhy = dev_mprintf("reading its catalog failed: %s", dev_errmsg(q));
      goto done;
    }
    if (csq_checksum(buf, sb.catBytes) == sb.catXxh3) break;
    if (nTry < STORE_REREAD_MAX && store_sb_moved(q, aSeen)) continue;
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
int store_settle_pending(store *p, dev_queue *q, int bLocked, store_sb *pSb, store_sb *pEff,
                         char **pzErr) {
  int bCommitted = 0;
  int rc = decision_lookup(p, &pSb->prep, &bCommitted, pzErr);
  if (rc) return rc;
  store_sb sb = sb_settled(pSb, bCommitted);
  if (bLocked || (!p->bReadOnly && writer_trylock(p, q))) {
    rc = store_write_superblocks(p, q, &sb, pzErr, NULL);
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
  int rc = store_txn_write_catalog(t, &s, &sb, pzErr);
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
  rc = store_write_superblocks(p, t->q, pPrep, pzErr, &bMaybe);
  if (rc) {
    /* a copy with the prepared commit may be on the media: its decider
    ** never commits it, so whoever settles it next drops it */
    if (bMaybe) store_distrust(p);
    free(pPrep);
    free(s); /* its tables are t's */
    return rc;
  }
  pthread_mutex_lock(&p->mu);
  store_seen_written(p, pPrep);
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
int store_txn_flip(store_txn *t, char **pzErr) {
  store *p = t->p;
  int rc = store_write_superblocks(p, t->q, &t->sbFlip, pzErr, NULL);
  if (rc) {
    store_distrust(p);
    store_txn_end(t, 1); /* its blocks are committed */
    return rc;
  }
  store_txn_finish(t, t->pPrep, &t->sbFlip);
  return 0;
}

int store_txn_settle(store_txn *t, int *pbCommitted, char **pzErr) {
  store *p = t->p;
  *pbCommitted = 0;
  if (!t->bPrepared) {
    store_txn_end(t, 0);
    return 0;
  }
  int rc = decision_lookup(p, &t->prep, pbCommitted, pzErr);
  if (rc == 0 && *pbCommitted) return store_txn_flip(t, pzErr);
  if (rc == 0) {
    /* not decided, and never will be (the decider's writer gave up): drop
    ** the prepared catalog. The blocks it used become free once the
    ** superblocks no longer name it. */
    rc = store_write_superblocks(p, t->q, &t->sbBase, pzErr, NULL);
    if (rc == 0) {
      pthread_mutex_lock(&p->mu);
      store_seen_written(p, &t->sbBase);
      p->bUndecided = 0;
      pthread_mutex_unlock(&p->mu);
      store_txn_end(t, 0);
      return 0;
    }
  }
  store_distrust(p); /* the prepared commit stays: settled by the next reader or writer */
  store_txn_end(t, 1);
  return rc;
}
