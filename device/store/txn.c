/*
** device/store/txn.c - transactions on one device and their commit.
**
** A transaction (store_txn_begin) holds the device's writer lock and works
** on private copies of the tables: appends write whole row groups to free
** space at once, deletes change delete bitmaps in memory. The commit
** (store_txn_commit) writes the changed delete bitmaps and a new catalog,
** flushes, and flips the superblocks (FORMAT.md, "Commit protocol"); a
** rollback returns the blocks the transaction allocated. A transaction
** over several devices ends through twostep.c instead.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>
#include "device/store/store_int.h"

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
      *pzErr = store_io_errmsg(p, q, rc, "reservation acquire");
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
  rc = store_refresh(p, q, 1, pzErr); /* a prepared commit is settled before anything is written */
  if (rc == 0 && !p->bSpaceValid) rc = store_rebuild_space(p);
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
    rc = store_ext_push(&t->aFree, &t->nFree, &t->nFreeAlloc, pRg->lba, pRg->nblk, 0);
  }
  if (rc == 0 && pRg->delLba && pRg->txnState != 2) {
    uint64_t n = (pRg->delBytes + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
    rc = store_ext_push(&t->aFree, &t->nFree, &t->nFreeAlloc, pRg->delLba, n, 0);
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

/* Encode the chunks of rows [i0, i0+n) into one extent's bytes: touches no
** store state, so an encode thread may run it (device/store/encq.c). */
int store_rg_encode(int nChunk, const char *zTable, const csq_vec *aCol, uint32_t i0, uint32_t n,
                    store_enc_rg **ppEnc, char **pzErr) {
  uint8_t **apEnc = calloc((size_t)nChunk, sizeof(uint8_t *));
  size_t *anEnc = calloc((size_t)nChunk, sizeof(size_t));
  store_enc_rg *pEnc = calloc(1, sizeof(*pEnc));
  int rc = 0;
  *ppEnc = NULL;
  if (!apEnc || !anEnc || !pEnc) {
    rc = -ENOMEM;
    goto done;
  }
  pEnc->nRow = n;
  pEnc->nChunk = nChunk;
  pEnc->aChunk = calloc((size_t)nChunk, sizeof(store_chunk));
  if (!pEnc->aChunk) {
    rc = -ENOMEM;
    goto done;
  }
  uint64_t off = 0;
  for (int c = 0; c < nChunk; c++) {
    csq_chunk_info info;
    rc = csq_chunk_encode(&aCol[c], i0, n, &apEnc[c], &anEnc[c], &info);
    if (rc) goto done;
    store_chunk *pC = &pEnc->aChunk[c];
    pC->off = (uint32_t)off;
    pC->len = (uint32_t)anEnc[c];
    pC->xxh3 = info.xxh3;
    pC->enc = info.enc;
    pC->zone = info.zone;
    off = (off + anEnc[c] + 7) & ~(uint64_t)7;
    if (off > UINT32_MAX - CSQ_LBA_SIZE) {
      *pzErr = dev_mprintf("table %s: a row group would exceed 4 GiB; insert fewer rows per "
                           "transaction or use a smaller rowgroup= option",
                           zTable);
      rc = -EFBIG;
      goto done;
    }
  }
  uint64_t nblk = (off + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
  if (nblk == 0) nblk = 1;
  pEnc->buf = store_block_alloc(nblk);
  if (!pEnc->buf) {
    rc = -ENOMEM;
    goto done;
  }
  pEnc->nblk = nblk;
  /* each chunk, then zeros up to the next one (the 8-byte alignment) or to
  ** the end of the last block: every byte written is defined, and the
  ** chunks themselves are not written twice */
  for (int c = 0; c < nChunk; c++) {
    uint64_t end = c + 1 < nChunk ? pEnc->aChunk[c + 1].off : nblk * CSQ_LBA_SIZE;
    uint64_t at = pEnc->aChunk[c].off + anEnc[c];
    memcpy(pEnc->buf + pEnc->aChunk[c].off, apEnc[c], anEnc[c]);
    memset(pEnc->buf + at, 0, end - at);
  }
  if (nChunk == 0) memset(pEnc->buf, 0, nblk * CSQ_LBA_SIZE);
done:
  if (apEnc)
    for (int c = 0; c < nChunk; c++) free(apEnc[c]);
  free(apEnc);
  free(anEnc);
  if (rc) {
    store_enc_rg_free(pEnc);
    if (rc == -ENOMEM && !*pzErr) *pzErr = dev_mprintf("out of memory");
    return rc;
  }
  *ppEnc = pEnc;
  return 0;
}

void store_enc_rg_free(store_enc_rg *pEnc) {
  if (!pEnc) return;
  free(pEnc->aChunk);
  free(pEnc->buf);
  free(pEnc);
}

/* Write an encoded row group to free space as one extent; *ppRg takes over
** its chunk table. pEnc stays the caller's. */
static int write_enc(store_txn *t, store_enc_rg *pEnc, store_rg **ppRg, char **pzErr) {
  store_rg *pRg = calloc(1, sizeof(*pRg));
  if (!pRg) {
    *pzErr = dev_mprintf("out of memory");
    return -ENOMEM;
  }
  pRg->nRef = 1;
  pRg->txnState = 2;
  pRg->nRow = pEnc->nRow;
  pRg->nChunk = pEnc->nChunk;
  pRg->aChunk = pEnc->aChunk;
  pEnc->aChunk = NULL;
  pthread_mutex_lock(&t->p->mu);
  int rc = space_alloc(&t->p->space, pEnc->nblk, &pRg->lba);
  pthread_mutex_unlock(&t->p->mu);
  if (rc) {
    *pzErr = dev_mprintf("device %s is full", dev_path(t->p->pDev));
    store_rg_unref(pRg);
    return rc;
  }
  pRg->nblk = (uint32_t)pEnc->nblk;
  rc = store_ext_push(&t->aAlloc, &t->nAlloc, &t->nAllocAlloc, pRg->lba, pEnc->nblk, 0);
  if (rc == 0) {
    rc = store_io_write(t->q, pRg->lba, pEnc->nblk, pEnc->buf);
    if (rc) *pzErr = store_io_errmsg(t->p, t->q, rc, "writing a row group");
  } else {
    *pzErr = dev_mprintf("out of memory");
  }
  if (rc) {
    store_rg_unref(pRg); /* its extent stays recorded in aAlloc: rollback returns it */
    return rc;
  }
  *ppRg = pRg;
  return 0;
}

/* Encode the chunks of rows [i0, i0+n) and write them as one extent. */
static int write_rg(store_txn *t, store_table *pTab, const csq_vec *aCol, uint32_t i0, uint32_t n,
                    store_rg **ppRg, char **pzErr) {
  store_enc_rg *pEnc = NULL;
  int rc = store_rg_encode(pTab->nCol + 1, pTab->zName, aCol, i0, n, &pEnc, pzErr);
  if (rc) return rc;
  rc = write_enc(t, pEnc, ppRg, pzErr);
  store_enc_rg_free(pEnc);
  return rc;
}

int store_txn_append_encoded(store_txn *t, store_table *pTab, store_enc_rg *pEnc, char **pzErr) {
  if (pEnc->nChunk != pTab->nCol + 1) {
    *pzErr = dev_mprintf("table %s: a row group of %d columns for a table of %d", pTab->zName,
                         pEnc->nChunk - 1, pTab->nCol);
    return -EINVAL;
  }
  store_rg *pRg = NULL;
  int rc = write_enc(t, pEnc, &pRg, pzErr);
  if (rc) return rc;
  rc = table_push_rg(pTab, pRg);
  if (rc) {
    store_rg_unref(pRg);
    *pzErr = dev_mprintf("out of memory");
    return rc;
  }
  t->bDirty = 1;
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
void store_txn_end(store_txn *t, int bKeep) {
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
void store_distrust(store *p) {
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
  store_txn_end(t, 0);
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
      int rc = store_ext_push(&t->aFree, &t->nFree, &t->nFreeAlloc, pRg->delLba, n, 0);
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
    uint8_t *buf = store_block_alloc(nblk);
    if (!buf) return -ENOMEM;
    memcpy(buf, pRg->aDel, nBytes);
    memset(buf + nBytes, 0, nblk * CSQ_LBA_SIZE - nBytes);
    uint64_t lba;
    pthread_mutex_lock(&t->p->mu);
    int rc = space_alloc(&t->p->space, nblk, &lba);
    pthread_mutex_unlock(&t->p->mu);
    if (rc == 0) rc = store_ext_push(&t->aAlloc, &t->nAlloc, &t->nAllocAlloc, lba, nblk, 0);
    if (rc == 0) {
      rc = store_io_write(t->q, lba, nblk, buf);
      if (rc) *pzErr = store_io_errmsg(t->p, t->q, rc, "writing a delete bitmap");
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
int store_txn_write_catalog(store_txn *t, store_snap **ppSnap, store_sb *pSb, char **pzErr) {
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
    rc = store_write_catalog(p, t->q, s, t->nextTabId, pSb, t, pzErr);
  }
  if (rc == 0) {
    rc = dev_nvm_flush(t->q);
    if (rc) *pzErr = store_io_errmsg(p, t->q, rc, "flushing data before commit");
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
void store_txn_finish(store_txn *t, store_snap *s, const store_sb *pSb) {
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
  store_ext_push(&p->aPend, &p->nPend, &p->nPendAlloc, t->sbBase.catLba, t->sbBase.catBlocks,
                 s->gen);
  for (int i = 0; i < t->nFree; i++)
    store_ext_push(&p->aPend, &p->nPend, &p->nPendAlloc, t->aFree[i].lba, t->aFree[i].nblk, s->gen);
  store_snap_link(p, s);
  store_snap *pOld = p->pCur;
  p->pCur = s;
  p->sb = *pSb;
  p->nextTabId = t->nextTabId;
  p->bSpaceValid = 1;
  p->bUndecided = 0;
  store_seen_written(p, pSb);
  pthread_mutex_unlock(&p->mu);
  store_snap_unref(pOld);
  store_txn_end(t, 1);
}

int store_txn_commit(store_txn *t, char **pzErr) {
  store *p = t->p;
  if (t->bPrepared) return store_txn_flip(t, pzErr);
  if (!t->bDirty) {
    store_txn_end(t, 0);
    return 0;
  }
  store_snap *s = NULL;
  store_sb sb;
  int rc = store_txn_write_catalog(t, &s, &sb, pzErr);
  if (rc == 0) {
    int bMaybe = 0;
    rc = store_write_superblocks(p, t->q, &sb, pzErr, &bMaybe);
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
    if (rc) store_distrust(p);
  }
  if (rc) {
    free(s); /* its tables are t's */
    if (rc == -ENOMEM && !*pzErr) *pzErr = dev_mprintf("out of memory");
    store_txn_end(t, 0);
    return rc;
  }
  store_txn_finish(t, s, &sb);
  return 0;
}
