/*
** vtab/cursor.c - reading csq tables: xBestIndex and the scan cursor.
**
** idxNum encoding (shown by EXPLAIN QUERY PLAN as "VIRTUAL TABLE INDEX n:s"):
**   0  full scan of the visible row groups (and the transaction's buffer)
**   1  rowid lookup: argv[0] is the rowid (or its INTEGER PRIMARY KEY alias)
**
** The cursor holds references on the row groups it will read, taken at
** xFilter, so commits and writes by anyone while it runs do not disturb it.
** A row group's columns are fetched from the device (NVM Read commands) when
** the cursor reaches it, only the columns the statement uses (colUsed), and
** handed to SQLite straight from the decoded vectors.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "vtab/vtab.h"

typedef struct vt_cursor {
  sqlite3_vtab_cursor base; /* must be first */
  store_snap *pSnap;        /* keeps committed row groups alive */
  const store_table *pTab;  /* table of pSnap, or a private copy */
  store_table *pTabCopy;    /* the copy made of a transaction's working table */
  store_rg **apRg;          /* row groups to read (referenced) */
  int nRg;
  int iRg;                  /* current row group; nRg = the buffer copy */
  uint32_t iRow;
  uint32_t nRow;            /* rows in the current row group or buffer */
  const uint8_t *aDel;      /* deleted rows of the current source */
  csq_vec *aVec;            /* nCol + 1 vectors, [0] = rowids */
  uint8_t *aLoaded;         /* aVec[i] holds the current source's column */
  csq_vec *aBuf;            /* copy of the transaction's buffered rows */
  uint8_t *aBufDel;
  uint32_t nBuf;
  int64_t iLookup;          /* idxNum 1: the rowid sought */
  int bLookup;
  int bEof;
  uint64_t colUsed;
} vt_cursor;

int vt_best_index(sqlite3_vtab *pVtab, sqlite3_index_info *pInfo) {
  vt_tab *p = (vt_tab *)pVtab;
  int iEq = -1;
  for (int i = 0; i < pInfo->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &pInfo->aConstraint[i];
    if (!c->usable || c->op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
    if (c->iColumn == -1 || (p->s.iIpk >= 0 && c->iColumn == p->s.iIpk)) {
      iEq = i;
      break;
    }
  }
  double nRow = p->nRowEst > 0 ? (double)p->nRowEst : 1.0;
  if (iEq >= 0) {
    pInfo->idxNum = 1;
    pInfo->aConstraintUsage[iEq].argvIndex = 1;
    pInfo->aConstraintUsage[iEq].omit = 1;
    pInfo->estimatedCost = 10.0;
    pInfo->estimatedRows = 1;
    pInfo->idxFlags = SQLITE_INDEX_SCAN_UNIQUE;
  } else {
    pInfo->idxNum = 0;
    pInfo->estimatedCost = 100.0 + nRow;
    pInfo->estimatedRows = (sqlite3_int64)nRow;
  }
  /* idxStr carries the columns the statement reads, so xFilter fetches
  ** only those chunks: "<plan>;cols=<hex colUsed>" */
  pInfo->idxStr = sqlite3_mprintf("%s;cols=%llx", iEq >= 0 ? "rowid-eq" : "scan",
                                  (unsigned long long)pInfo->colUsed);
  pInfo->needToFreeIdxStr = 1;
  return pInfo->idxStr ? SQLITE_OK : SQLITE_NOMEM;
}

int vt_open(sqlite3_vtab *pVtab, sqlite3_vtab_cursor **ppCur) {
  vt_tab *p = (vt_tab *)pVtab;
  vt_cursor *c = sqlite3_malloc64(sizeof(*c));
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof(*c));
  c->aVec = sqlite3_malloc64(sizeof(csq_vec) * (size_t)(p->s.nCol + 1));
  c->aLoaded = sqlite3_malloc64((size_t)p->s.nCol + 1);
  if (!c->aVec || !c->aLoaded) {
    sqlite3_free(c->aVec);
    sqlite3_free(c->aLoaded);
    sqlite3_free(c);
    return SQLITE_NOMEM;
  }
  for (int i = 0; i <= p->s.nCol; i++) csq_vec_init(&c->aVec[i]);
  memset(c->aLoaded, 0, (size_t)p->s.nCol + 1);
  c->bEof = 1;
  *ppCur = &c->base;
  return SQLITE_OK;
}

static void cursor_reset(vt_cursor *c, int nCol) {
  for (int i = 0; i < c->nRg; i++) store_rg_unref(c->apRg[i]);
  sqlite3_free(c->apRg);
  c->apRg = NULL;
  c->nRg = 0;
  if (c->aBuf) {
    for (int i = 0; i <= nCol; i++) csq_vec_free(&c->aBuf[i]);
    sqlite3_free(c->aBuf);
    c->aBuf = NULL;
  }
  sqlite3_free(c->aBufDel);
  c->aBufDel = NULL;
  c->nBuf = 0;
  if (c->pSnap) store_snap_unref(c->pSnap);
  c->pSnap = NULL;
  c->pTab = NULL;
  store_table_free(c->pTabCopy);
  c->pTabCopy = NULL;
  c->bEof = 1;
}

int vt_close(sqlite3_vtab_cursor *pCur) {
  vt_cursor *c = (vt_cursor *)pCur;
  vt_tab *p = (vt_tab *)pCur->pVtab;
  cursor_reset(c, p->s.nCol);
  for (int i = 0; i <= p->s.nCol; i++) csq_vec_free(&c->aVec[i]);
  sqlite3_free(c->aVec);
  sqlite3_free(c->aLoaded);
  sqlite3_free(c);
  return SQLITE_OK;
}

/* Load column iCol (0 = rowid, i+1 = column i) of the current row group. */
static int load_column(vt_cursor *c, vt_tab *p, int iCol) {
  csq_vec_reset(&c->aVec[iCol]);
  if (c->iRg >= c->nRg) { /* the buffer copy */
    c->aLoaded[iCol] = 1;
    return csq_vec_append(&c->aVec[iCol], &c->aBuf[iCol], 0, c->nBuf) ? SQLITE_NOMEM : SQLITE_OK;
  }
  int ai = iCol - 1;
  char *zErr = NULL;
  int rc = store_read_chunks(p->pDev->pStore, p->pDev->pQ, c->pTab, c->apRg[c->iRg], &ai, 1,
                             &c->aVec[iCol], &zErr);
  if (rc) return vt_err(&p->base, rc, zErr);
  c->aLoaded[iCol] = 1;
  return SQLITE_OK;
}

static int col_used(const vt_cursor *c, int i) {
  return i >= 63 ? (c->colUsed >> 63) & 1 : (c->colUsed >> i) & 1;
}

/* Position on row group c->iRg (or the buffer): load the used columns. */
static int enter_source(vt_cursor *c, vt_tab *p) {
  memset(c->aLoaded, 0, (size_t)p->s.nCol + 1);
  if (c->iRg < c->nRg) {
    store_rg *pRg = c->apRg[c->iRg];
    c->nRow = pRg->nRow;
    c->aDel = pRg->aDel;
  } else {
    c->nRow = c->nBuf;
    c->aDel = c->aBufDel;
  }
  c->iRow = 0;
  dev_stats *st = dev_queue_stats(p->pDev->pQ);
  st->row_groups_scanned++;
  st->rows_scanned += c->nRow;
  for (int i = 0; i < p->s.nCol; i++) {
    if (!col_used(c, i) || i == p->s.iIpk) continue;
    int rc = load_column(c, p, i + 1);
    if (rc) return rc;
  }
  if (c->bLookup || (p->s.iIpk >= 0 && col_used(c, p->s.iIpk))) {
    int rc = load_column(c, p, 0);
    if (rc) return rc;
  }
  return SQLITE_OK;
}

static int row_ok(const vt_cursor *c) {
  if (c->aDel && (c->aDel[c->iRow >> 3] >> (c->iRow & 7)) & 1 && c->iRg < c->nRg) return 0;
  if (c->iRg >= c->nRg && c->aBufDel[c->iRow]) return 0;
  if (c->bLookup && c->aVec[0].aVal[c->iRow].i != c->iLookup) return 0;
  return 1;
}

/* Advance to the next visible row at or after (iRg, iRow). */
static int settle(vt_cursor *c, vt_tab *p) {
  for (;;) {
    while (c->iRow < c->nRow) {
      if (row_ok(c)) {
        dev_queue_stats(p->pDev->pQ)->rows_returned++;
        return SQLITE_OK;
      }
      c->iRow++;
    }
    if (c->iRg >= c->nRg) {
      c->bEof = 1;
      return SQLITE_OK;
    }
    c->iRg++;
    if (c->iRg == c->nRg && c->nBuf == 0) {
      c->bEof = 1;
      return SQLITE_OK;
    }
    int rc = enter_source(c, p);
    if (rc) return rc;
  }
}

int vt_filter(sqlite3_vtab_cursor *pCur, int idxNum, const char *idxStr, int argc,
              sqlite3_value **argv) {
  vt_cursor *c = (vt_cursor *)pCur;
  vt_tab *p = (vt_tab *)pCur->pVtab;
  cursor_reset(c, p->s.nCol);
  c->colUsed = ~(uint64_t)0;
  const char *zCols = idxStr ? strstr(idxStr, ";cols=") : NULL;
  if (zCols) c->colUsed = strtoull(zCols + 6, NULL, 16);
  c->bLookup = 0;
  if (idxNum == 1 && argc >= 1) {
    sqlite3_value *v = argv[0];
    int t = sqlite3_value_numeric_type(v);
    if (t == SQLITE_FLOAT) {
      double r = sqlite3_value_double(v);
      if (r != (double)(int64_t)r) return SQLITE_OK; /* no integer rowid equals it: empty */
      c->iLookup = (int64_t)r;
    } else if (t == SQLITE_INTEGER) {
      c->iLookup = sqlite3_value_int64(v);
    } else {
      return SQLITE_OK; /* NULL or text: nothing matches a rowid */
    }
    c->bLookup = 1;
  }
  store_table *pTab = NULL;
  char *zErr = NULL;
  int rc = vt_visible_table(p, &pTab, &c->pSnap, &zErr);
  if (rc) return vt_err(&p->base, rc, zErr);
  c->apRg = sqlite3_malloc64(sizeof(store_rg *) * (size_t)(pTab->nRg + 1));
  if (!c->apRg) return SQLITE_NOMEM;
  int64_t nLive = 0;
  for (int g = 0; g < pTab->nRg; g++) {
    store_rg *pRg = pTab->apRg[g];
    nLive += pRg->nRow - pRg->nDel;
    if (c->bLookup) {
      const csq_zone *z = &pRg->aChunk[0].zone;
      if (c->iLookup < z->iMin || c->iLookup > z->iMax) {
        dev_queue_stats(p->pDev->pQ)->row_groups_skipped++;
        continue;
      }
    }
    if (pRg->nDel == pRg->nRow) continue;
    __atomic_add_fetch(&pRg->nRef, 1, __ATOMIC_RELAXED);
    c->apRg[c->nRg++] = pRg;
  }
  p->nRowEst = nLive;
  if (c->pSnap) {
    c->pTab = pTab;
  } else {
    /* a transaction's working table changes as it writes: read a copy */
    c->pTabCopy = store_table_clone(pTab);
    if (!c->pTabCopy) return SQLITE_NOMEM;
    c->pTab = c->pTabCopy;
    /* rows still in the write buffer */
    uint32_t nBuf = p->aBuf ? p->aBuf[0].n : 0;
    if (nBuf > 0) {
      c->aBuf = sqlite3_malloc64(sizeof(csq_vec) * (size_t)(p->s.nCol + 1));
      c->aBufDel = sqlite3_malloc64(nBuf);
      if (!c->aBuf || !c->aBufDel) return SQLITE_NOMEM;
      for (int i = 0; i <= p->s.nCol; i++) {
        csq_vec_init(&c->aBuf[i]);
        if (csq_vec_append(&c->aBuf[i], &p->aBuf[i], 0, nBuf)) return SQLITE_NOMEM;
      }
      memcpy(c->aBufDel, p->aBufDel, nBuf);
      c->nBuf = nBuf;
    }
  }
  c->bEof = 0;
  c->iRg = 0;
  if (c->nRg == 0 && c->nBuf == 0) {
    c->bEof = 1;
    return SQLITE_OK;
  }
  rc = enter_source(c, p);
  if (rc) return rc;
  return settle(c, p);
}

int vt_next(sqlite3_vtab_cursor *pCur) {
  vt_cursor *c = (vt_cursor *)pCur;
  c->iRow++;
  return settle(c, (vt_tab *)pCur->pVtab);
}

int vt_eof(sqlite3_vtab_cursor *pCur) { return ((vt_cursor *)pCur)->bEof; }

int vt_column(sqlite3_vtab_cursor *pCur, sqlite3_context *ctx, int i) {
  vt_cursor *c = (vt_cursor *)pCur;
  vt_tab *p = (vt_tab *)pCur->pVtab;
  if (i < 0 || i >= p->s.nCol) return SQLITE_OK;
  int iVec = i == p->s.iIpk ? 0 : i + 1;
  if (!c->aLoaded[iVec]) {
    int rc = load_column(c, p, iVec);
    if (rc) return rc;
  }
  const csq_vec *v = &c->aVec[iVec];
  uint32_t r = c->iRow;
  switch (v->aCls[r]) {
  case CSQ_INT: sqlite3_result_int64(ctx, v->aVal[r].i); break;
  case CSQ_REAL: sqlite3_result_double(ctx, v->aVal[r].r); break;
  case CSQ_TEXT:
    sqlite3_result_text64(ctx, csq_vec_bytes(v, r), v->aLen[r], SQLITE_TRANSIENT, SQLITE_UTF8);
    break;
  case CSQ_BLOB: sqlite3_result_blob64(ctx, csq_vec_bytes(v, r), v->aLen[r], SQLITE_TRANSIENT); break;
  default: break; /* NULL */
  }
  return SQLITE_OK;
}

int vt_rowid(sqlite3_vtab_cursor *pCur, sqlite3_int64 *pRowid) {
  vt_cursor *c = (vt_cursor *)pCur;
  vt_tab *p = (vt_tab *)pCur->pVtab;
  if (!c->aLoaded[0]) {
    int rc = load_column(c, p, 0);
    if (rc) return rc;
  }
  *pRowid = c->aVec[0].aVal[c->iRow].i;
  return SQLITE_OK;
}
