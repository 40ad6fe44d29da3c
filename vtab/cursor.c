/*
** vtab/cursor.c - reading csq tables: the scan cursor.
**
** xFilter runs the plan xBestIndex chose (vtab/plan.c chooses it, and
** documents idxNum and idxStr, which it encodes and decodes).
**
** The cursor holds references on the row groups it will read, taken at
** xFilter, so commits and writes by anyone while it runs do not disturb it.
** A striped table's cursor reads every member: a plain scan or lookup walks
** the members' row groups one after another; a device scan opens one
** dev_scan per member, all in flight at once, and takes their batches in
** turn.
** A row group's columns are fetched from the device (NVM Read commands) when
** the cursor reaches it, only the columns the statement uses (colUsed), and
** handed to SQLite straight from the decoded vectors.
** A device scan's program returns each row's number in its row group instead
** of its rowid, and after the first batch only the columns SQLite has read
** (update_omit): a rowid or column asked for later is read from its chunk
** (lazy_value), so the device sends what the statement reads, not what
** colUsed names (which includes the columns of exact, omitted constraints).
** With a pushed LIMIT the cursor stops at LIMIT + OFFSET rows; a device scan
** then runs in windows of row groups (1, 2, 4, ...) so that nothing past the
** window holding the last row is ever read. With a consumed ORDER BY the
** device keeps each row group's LIMIT + OFFSET best rows (a top-N section in
** the program), the cursor reads them into a bounded top-N heap
** (vtab/topn.c) and hands back its LIMIT + OFFSET best rows in order.
*/
#include <string.h>
#include "vtab/plan.h"
#include "vtab/topn.h"
#include "device/format/value.h"
#include "device/host/scan.h"

typedef struct vt_cursor {
  sqlite3_vtab_cursor base; /* must be first */
  int nMem;                 /* the table's members (devices) */
  uint64_t stmtKey;         /* the statement run that opened it (vtab/stmt.c) */
  store_snap **aSnap;       /* per member: keeps committed row groups alive */
  const store_table **aTab; /* per member: table of aSnap[k], or a private copy */
  store_table **aTabCopy;   /* per member: the copy made of a transaction's working table */
  store_rg **apRg;          /* row groups to read (referenced), every member's */
  int *aRgMem;              /* member of apRg[i] */
  int nRg;
  int iRg; /* current row group; nRg = the buffer copy */
  uint32_t iRow;
  uint32_t nRow;       /* rows in the current row group or buffer */
  const uint8_t *aDel; /* deleted rows of the current source */
  csq_vec *aVec;       /* nCol + 1 vectors, [0] = rowids */
  uint8_t *aLoaded;    /* aVec[i] holds the current source's column */
  csq_vec *aBuf;       /* copy of the transaction's buffered rows */
  uint8_t *aBufDel;
  uint32_t nBuf;
  dev_scan **apScan; /* VT_PLAN_DEVICE: the device program's scan on each member */
  int iScan;         /* member whose scan gives the next batch */
  csq_vec *aOut;     /* its output columns: rowids, then the used columns */
  int nOut;
  int *aOutOf;     /* nCol + 1: output index of aVec's slot, -1 if not fetched */
  int64_t iLookup; /* VT_PLAN_ROWID: the rowid sought */
  int bLookup;
  vt_probe *pProbe;       /* VT_PLAN_PROBE: the table, hashed on the probed column (probe.c),
                             one reference */
  vt_probe_hits hits;     /* the rows of its last lookup */
  const char *zProbePlan; /* idxStr of the plan that last looked pProbe up (SQLite's string:
                             compared by address only, never read) */
  int bProbe;             /* rows come from pProbe's hits */
  int nProbeArg;          /* the plan's terms, whose values come before the keys' in argv */
  int bWhole;             /* device_filter for a probe build or grouping: every output,
                             rowids too */
  vt_grouper *pGroup;     /* GROUP BY consumed: the rows, collected (vtab/group.c) */
  const uint32_t *aServe; /* its order: output row of each iRow (else iRow itself) */
  uint32_t iHit;
  int bEof;
  uint64_t colUsed;
  /* pushed LIMIT/OFFSET (vt_plan's): */
  int64_t nLeft;  /* rows still to hand to SQLite, this one included; -1: no cap */
  int64_t nSkip;  /* of those, the first rows SQLite drops for OFFSET (host scans do
                     not read a row group made only of them) */
  uint8_t *pProg; /* capped device scan: its program, for the next window */
  size_t nProg;
  int *aWinNext; /* per member: first row group of its next window, -1 none */
  int *aWinLen;  /* per member: row groups in its next window */
  int *aWinBase; /* per member: index in its table of its scan's first row group */
  /* device scans with row numbers (see device_filter): */
  int bRowNum;
  const uint32_t *aRowNum;       /* the current batch's row numbers in its row group */
  const store_rg *pBatchRg;      /* the current batch's row group */
  int iBatchMem;                 /* and its member */
  int iBatchRg;                  /* and its index in that member's table */
  uint64_t mAsked;               /* outputs (the first 64) SQLite has read so far */
  uint64_t mOmit;                /* outputs left out of the row groups started since */
  const store_rg **apLazyRg;     /* nCol + 1: row group whose chunk aVec[i] holds, read
                                    because the batch left column i out */
  int nKey;                      /* consumed ORDER BY: sort keys (0: none) */
  int aKeyChunk[VT_TOPN_MAXKEY]; /* chunk of each key: 0 rowid, 1 + i column i */
  uint8_t aKeyDesc[VT_TOPN_MAXKEY];
} vt_cursor;

/* sqlite3_malloc64'd n bytes, zeroed; NULL if no memory. */
static void *zalloc(size_t n) {
  void *p = sqlite3_malloc64(n ? n : 1);
  if (p) memset(p, 0, n);
  return p;
}

/* Free a cursor and the arrays vt_open gave it: a half-built one (vt_open
** ran out of memory: any array may be NULL, nothing else is held) or a
** closed one (vt_close released what xFilter took first). */
static void cursor_free(vt_cursor *c, int nCol) {
  if (!c) return;
  if (c->aVec)
    for (int i = 0; i <= nCol; i++) csq_vec_free(&c->aVec[i]);
  sqlite3_free(c->aVec);
  sqlite3_free(c->aLoaded);
  sqlite3_free(c->aOutOf);
  sqlite3_free(c->aSnap);
  sqlite3_free(c->aTab);
  sqlite3_free(c->aTabCopy);
  sqlite3_free(c->apScan);
  sqlite3_free(c->aWinNext);
  sqlite3_free(c->aWinLen);
  sqlite3_free(c->aWinBase);
  sqlite3_free(c->apLazyRg);
  sqlite3_free(c);
}

/* The cursor's arrays are sized once, here: per chunk (nCol + 1) and per
** member (nMem); every xFilter reuses them. */
int vt_open(sqlite3_vtab *pVtab, sqlite3_vtab_cursor **ppCur) {
  vt_tab *p = (vt_tab *)pVtab;
  size_t nChunk = (size_t)p->s.nCol + 1, nMem = (size_t)p->nMem;
  vt_cursor *c = zalloc(sizeof(*c));
  if (!c) return SQLITE_NOMEM;
  c->nMem = p->nMem;
  c->aVec = zalloc(sizeof(csq_vec) * nChunk); /* zeroed: csq_vec_init's empty vectors */
  c->aLoaded = zalloc(nChunk);
  c->aOutOf = zalloc(sizeof(int) * nChunk);
  c->apLazyRg = zalloc(sizeof(store_rg *) * nChunk);
  c->aSnap = zalloc(sizeof(store_snap *) * nMem);
  c->aTab = zalloc(sizeof(store_table *) * nMem);
  c->aTabCopy = zalloc(sizeof(store_table *) * nMem);
  c->apScan = zalloc(sizeof(dev_scan *) * nMem);
  c->aWinNext = zalloc(sizeof(int) * nMem);
  c->aWinLen = zalloc(sizeof(int) * nMem);
  c->aWinBase = zalloc(sizeof(int) * nMem);
  if (!c->aVec || !c->aLoaded || !c->aOutOf || !c->apLazyRg || !c->aSnap || !c->aTab ||
      !c->aTabCopy || !c->apScan || !c->aWinNext || !c->aWinLen || !c->aWinBase) {
    cursor_free(c, p->s.nCol);
    return SQLITE_NOMEM;
  }
  for (int k = 0; k < c->nMem; k++) c->aWinNext[k] = -1;
  c->nLeft = -1;
  c->bEof = 1;
  c->stmtKey = vt_stmt_enter(p->pConn);
  *ppCur = &c->base;
  return SQLITE_OK;
}

/* Stop every device scan of the cursor, including windows not yet opened. */
static void stop_scans(vt_cursor *c) {
  for (int k = 0; k < c->nMem; k++) {
    dev_scan_close(c->apScan[k]);
    c->apScan[k] = NULL;
    c->aWinNext[k] = -1;
  }
}

/* Release what the cursor reads from: scans, row groups, the buffer copy,
** snapshots. Its output vectors (aOut) stay. */
static void release_sources(vt_cursor *c, int nCol) {
  stop_scans(c);
  for (int i = 0; i < c->nRg; i++) store_rg_unref(c->apRg[i]);
  sqlite3_free(c->apRg);
  c->apRg = NULL;
  sqlite3_free(c->aRgMem);
  c->aRgMem = NULL;
  c->nRg = 0;
  if (c->aBuf) {
    for (int i = 0; i <= nCol; i++) csq_vec_free(&c->aBuf[i]);
    sqlite3_free(c->aBuf);
    c->aBuf = NULL;
  }
  sqlite3_free(c->aBufDel);
  c->aBufDel = NULL;
  c->nBuf = 0;
  for (int k = 0; k < c->nMem; k++) {
    if (c->aSnap[k]) store_snap_unref(c->aSnap[k]);
    c->aSnap[k] = NULL;
    c->aTab[k] = NULL;
    store_table_free(c->aTabCopy[k]);
    c->aTabCopy[k] = NULL;
  }
}

static void cursor_reset(vt_cursor *c, int nCol) {
  release_sources(c, nCol);
  for (int i = 0; i < c->nOut; i++) csq_vec_free(&c->aOut[i]);
  sqlite3_free(c->aOut);
  c->aOut = NULL;
  c->nOut = 0;
  sqlite3_free(c->pProg);
  c->pProg = NULL;
  c->nProg = 0;
  c->nLeft = -1;
  c->nSkip = 0;
  c->nKey = 0;
  c->bProbe = 0;
  c->bEof = 1;
  c->bRowNum = 0;
  c->aRowNum = NULL;
  c->pBatchRg = NULL;
  c->mAsked = c->mOmit = 0;
  vt_grouper_free(c->pGroup);
  c->pGroup = NULL;
  c->aServe = NULL;
  memset(c->apLazyRg, 0, sizeof(store_rg *) * (size_t)(nCol + 1));
}

int vt_close(sqlite3_vtab_cursor *pCur) {
  vt_cursor *c = (vt_cursor *)pCur;
  vt_tab *p = (vt_tab *)pCur->pVtab;
  cursor_reset(c, p->s.nCol);
  /* kept for the next cursors of this statement run (probe.c) */
  vt_probe_release(p, c->pProbe, c->stmtKey != 0 && c->stmtKey == p->pConn->stmtKey);
  c->pProbe = NULL;
  sqlite3_free(c->hits.a);
  vt_stmt_leave(p->pConn, c->stmtKey);
  cursor_free(c, p->s.nCol);
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
  int k = c->aRgMem[c->iRg];
  int rc = store_read_chunks(p->apMem[k]->pStore, p->apMem[k]->pQ, c->aTab[k], c->apRg[c->iRg], &ai,
                             1, &c->aVec[iCol], &zErr);
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
  dev_stats *st = dev_queue_stats(p->apMem[c->iRg < c->nRg ? c->aRgMem[c->iRg] : 0]->pQ);
  st->row_groups_scanned++;
  st->rows_scanned += c->nRow;
  if (c->nSkip > 0 && !c->bLookup) {
    /* SQLite drops the next nSkip rows for OFFSET without reading them: a
    ** source made only of such rows is not loaded (vt_column loads a
    ** column after all if SQLite asks, so this is only a saving) */
    uint32_t nLive = 0;
    if (c->iRg < c->nRg)
      nLive = c->apRg[c->iRg]->nRow - c->apRg[c->iRg]->nDel;
    else
      for (uint32_t r = 0; r < c->nBuf; r++) nLive += !c->aBufDel[r];
    if ((uint64_t)c->nSkip >= nLive) return SQLITE_OK;
  }
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

/* Has member k a scan open, or a window of row groups still to open? */
static int scan_live(const vt_cursor *c, int k) {
  return c->apScan[k] || c->aWinNext[k] >= 0;
}

/* A capped device scan: open member k's next window of row groups, twice
** as many as the last. The scan reads ahead only inside its window, so
** once the cap is reached nothing beyond that window has been read. */
static int open_window(vt_cursor *c, vt_tab *p, int k) {
  const store_table *pTab = c->aTab[k];
  int i0 = c->aWinNext[k];
  int n = pTab->nRg - i0 < c->aWinLen[k] ? pTab->nRg - i0 : c->aWinLen[k];
  char *zErr = NULL;
  int rc = dev_scan_open(p->apMem[k]->pQ, p->apMem[k]->pStore, pTab, pTab->apRg + i0, n, c->pProg,
                         c->nProg, &c->apScan[k], &zErr);
  if (rc) return vt_err(&p->base, rc, zErr);
  c->aWinBase[k] = i0;
  if (c->mOmit) dev_scan_set_omit(c->apScan[k], c->mOmit);
  c->aWinNext[k] = i0 + n < pTab->nRg ? i0 + n : -1;
  if (c->aWinLen[k] < (1 << 20)) c->aWinLen[k] *= 2;
  return SQLITE_OK;
}

/* A device scan with row numbers asks only for the outputs SQLite has read
** so far: once a batch is consumed, the others are left out of the row
** groups started from then on (vt_column reads one from its chunk if SQLite
** wants it after all, and from then on it comes back again). The columns a
** statement reads do not change between rows in practice (colUsed also
** counts the columns of the constraints the device evaluated exactly, which
** SQLite never reads), so the device sends only what is read. */
static void update_omit(vt_cursor *c) {
  if (!c->bRowNum || !c->pBatchRg) return; /* no batch consumed yet */
  int n = c->nOut < 64 ? c->nOut : 64;
  uint64_t all = n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
  uint64_t m = all & ~c->mAsked;
  if (m == c->mOmit) return;
  c->mOmit = m;
  for (int k = 0; k < c->nMem; k++) dev_scan_set_omit(c->apScan[k], m);
}

/* Device mode: the rows of every batch qualify; fetch batches as needed,
** taking them from the members' scans in turn (each scan keeps its device
** busy with the row groups it has in flight meanwhile). A member whose
** window ran out opens its next window in its turn, so the order of the
** rows does not depend on the windows. */
static int settle_scan(vt_cursor *c, vt_tab *p) {
  while (c->iRow >= c->nRow) {
    uint32_t n = 0;
    update_omit(c);
    int k = c->iScan, nTry = 0;
    while (!scan_live(c, k) && nTry < c->nMem) k = (k + 1) % c->nMem, nTry++;
    if (!scan_live(c, k)) {
      c->bEof = 1;
      return SQLITE_OK;
    }
    if (!c->apScan[k]) {
      int rc = open_window(c, p, k);
      if (rc) return rc;
    }
    char *zErr = NULL;
    if (c->nLeft > 0 && c->nKey == 0) /* a LIMIT: the device sends no more rows than are left */
      dev_scan_set_row_cap(c->apScan[k], c->nLeft < UINT32_MAX ? (uint32_t)c->nLeft : 0);
    int rc = dev_scan_next(c->apScan[k], c->aOut, &n, &zErr);
    if (rc) return vt_err(&p->base, rc, zErr);
    c->iScan = (k + 1) % c->nMem;
    if (n == 0) {
      dev_scan_close(c->apScan[k]);
      c->apScan[k] = NULL;
      continue;
    }
    c->iRow = 0;
    c->nRow = n;
    if (c->bRowNum) {
      c->aRowNum = dev_scan_rownums(c->apScan[k]);
      c->iBatchMem = k;
      c->iBatchRg = c->aWinBase[k] + dev_scan_rg(c->apScan[k]);
      c->pBatchRg = c->aTab[k]->apRg[c->iBatchRg];
    }
  }
  return SQLITE_OK; /* the device counted rows_returned */
}

/* Advance to the next visible row at or after (iRg, iRow). */
static int settle(vt_cursor *c, vt_tab *p) {
  if (c->nOut) return settle_scan(c, p);
  for (;;) {
    while (c->iRow < c->nRow) {
      if (row_ok(c)) {
        dev_queue_stats(p->apMem[c->iRg < c->nRg ? c->aRgMem[c->iRg] : 0]->pQ)->rows_returned++;
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

/* Take the table's visible state on every member: snapshots, or private
** copies of a transaction's working tables (they change as it writes). */
static int visible(vt_cursor *c, vt_tab *p) {
  char *zErr = NULL;
  int rc = vt_visible_members(p, (store_table **)c->aTab, c->aSnap, &zErr);
  if (rc) return vt_err(&p->base, rc, zErr);
  for (int k = 0; k < c->nMem; k++) {
    if (c->aSnap[k]) continue;
    c->aTabCopy[k] = store_table_clone(c->aTab[k]);
    if (!c->aTabCopy[k]) return SQLITE_NOMEM;
    c->aTab[k] = c->aTabCopy[k];
  }
  return SQLITE_OK;
}

/* The cursor's output columns: rowids (if bRowid, or the INTEGER PRIMARY
** KEY is read), then every column the statement reads (colUsed, which
** includes the sort keys); fills aChunk[] with their chunks and c->aOutOf.
** Returns their number. */
static int set_outputs(vt_cursor *c, const vt_tab *p, int bRowid, int *aChunk) {
  int nOut = 0, nCol = p->s.nCol;
  for (int i = 0; i <= nCol; i++) c->aOutOf[i] = -1;
  if (bRowid || (p->s.iIpk >= 0 && col_used(c, p->s.iIpk))) {
    aChunk[nOut] = 0;
    c->aOutOf[0] = nOut++;
  }
  for (int i = 0; i < nCol; i++) {
    if (!col_used(c, i) || i == p->s.iIpk) continue;
    aChunk[nOut] = i + 1;
    c->aOutOf[i + 1] = nOut++;
  }
  return nOut;
}

/* Rows the top-N keeps: LIMIT + OFFSET (no cap: all of them). */
static uint32_t topn_max(const vt_cursor *c) {
  return c->nLeft >= 0 && c->nLeft < UINT32_MAX ? (uint32_t)c->nLeft : UINT32_MAX;
}

/* A top-N heap for the cursor's sort keys over its nOut outputs (aOutOf
** set), keeping LIMIT + OFFSET rows. NULL: no memory. */
static vt_topn *new_topn(const vt_cursor *c, int nOut) {
  int aKey[VT_TOPN_MAXKEY];
  for (int k = 0; k < c->nKey; k++) aKey[k] = c->aOutOf[c->aKeyChunk[k]];
  return vt_topn_new(nOut, c->nKey, aKey, c->aKeyDesc, topn_max(c));
}

/* The top-N is complete: serve its rows, sorted, as the cursor's output
** vectors (allocated here for a host scan) through the device-mode path. */
static int serve_topn(vt_cursor *c, vt_topn *t, int nOut) {
  if (!c->aOut) {
    c->aOut = sqlite3_malloc64(sizeof(csq_vec) * (size_t)nOut);
    if (!c->aOut) return SQLITE_NOMEM;
    for (int i = 0; i < nOut; i++) csq_vec_init(&c->aOut[i]);
    c->nOut = nOut;
  }
  int rc = vt_topn_emit(t, c->aOut);
  if (rc) return rc;
  c->iScan = 0;
  c->iRow = 0;
  c->nRow = vt_topn_rows(t);
  c->bEof = c->nRow == 0;
  return SQLITE_OK;
}

/* VT_PLAN_DEVICE: run the pushed terms as a device program over the visible
** row groups (the transaction's buffered rows are written out first, so the
** device sees them).
** With a cap (nLeft > 0) the scans run in windows of row groups; with sort
** keys every qualifying row goes through a top-N heap first. */
static int device_filter(vt_cursor *c, vt_tab *p, const vt_plan *pPlan, const char *idxStr,
                         sqlite3_value **argv) {
  int nCol = p->s.nCol, rc, nTerm = 0;
  pl_cons *aTerm = sqlite3_malloc64(sizeof(pl_cons) * (size_t)(pPlan->nTerm + 1));
  int *aChunk = sqlite3_malloc64(sizeof(int) * (size_t)(nCol + 1));
  const csq_vec **apSrc = NULL;
  uint8_t *pProg = NULL;
  size_t nProg = 0;
  int bEmpty = 0;
  char *zErr = NULL;
  vt_topn *t = NULL;
  if (!aTerm || !aChunk) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  rc = vt_plan_terms(p, pPlan, idxStr, argv, aTerm, &nTerm);
  if (rc) goto done;
  /* Without a top-N, rows go to SQLite straight from the batches: the
  ** program then returns row numbers, so the rowid (which SQLite reads only
  ** for writes, rowid in the statement, or OR-by-union) and any column left
  ** out can be read from their chunks when asked for (vt_column). */
  c->bRowNum = c->nKey == 0 && !c->bWhole;
  int nOut = set_outputs(c, p, !c->bRowNum, aChunk);
  if (nOut == 0) /* no column read (count(*)): one output all the same, dropped after a batch */
    nOut = set_outputs(c, p, 1, aChunk);
  /* With sort keys the device keeps only each row group's top LIMIT +
  ** OFFSET rows; the cursor's top-N merges them. */
  pl_topn top;
  memset(&top, 0, sizeof(top));
  top.nTop = topn_max(c);
  top.nKey = c->nKey;
  for (int k = 0; k < c->nKey; k++) {
    top.aChunk[k] = c->aKeyChunk[k];
    top.aDesc[k] = c->aKeyDesc[k];
  }
  const pl_topn *pTop = c->nKey > 0 && top.nTop >= 1 && top.nTop <= CSQ_TOPN_MAX ? &top : NULL;
  rc = pl_filter_program(aTerm, nTerm, aChunk, nOut, c->bRowNum, pTop, &pProg, &nProg, &bEmpty,
                         &zErr);
  if (rc) {
    vt_set_error(&p->base, "%s", zErr ? zErr : "csq: cannot build the device program");
    sqlite3_free(zErr);
    goto done;
  }
  if (bEmpty) goto done; /* a comparison with NULL: no row */
  rc = vt_flush(p);
  if (rc) goto done;
  rc = visible(c, p);
  if (rc) goto done;
  c->aOut = sqlite3_malloc64(sizeof(csq_vec) * (size_t)nOut);
  if (!c->aOut) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  for (int i = 0; i < nOut; i++) csq_vec_init(&c->aOut[i]);
  c->nOut = nOut;
  vt_note_table(p, (store_table *const *)c->aTab, c->nMem, 0);
  if (c->nLeft > 0 && c->nKey == 0) {
    /* capped: each member's first window holds the row groups the cap
    ** would fill if every row qualified (at least one); it is opened when
    ** the member's turn comes (settle_scan), later ones twice as large */
    int64_t nPer = (int64_t)p->s.nRowGroup * c->nMem;
    int64_t nWin = nPer > 0 ? (c->nLeft + nPer - 1) / nPer : 1;
    for (int k = 0; k < c->nMem; k++) {
      c->aWinNext[k] = c->aTab[k]->nRg > 0 ? 0 : -1;
      c->aWinLen[k] = nWin < 1 ? 1 : nWin > c->aTab[k]->nRg ? c->aTab[k]->nRg : (int)nWin;
    }
    c->pProg = pProg;
    c->nProg = nProg;
    pProg = NULL;
  } else {
    /* one scan per member, all open at once: every device works in parallel */
    for (int k = 0; k < c->nMem; k++) {
      const store_table *pTab = c->aTab[k];
      c->aWinBase[k] = 0;
      rc = dev_scan_open(p->apMem[k]->pQ, p->apMem[k]->pStore, pTab, pTab->apRg, pTab->nRg, pProg,
                         nProg, &c->apScan[k], &zErr);
      if (rc) {
        rc = vt_err(&p->base, rc, zErr);
        goto done;
      }
    }
  }
  c->iScan = 0;
  c->bEof = 0;
  c->iRow = c->nRow = 0;
  if (c->nKey == 0) {
    rc = settle_scan(c, p);
    goto done;
  }
  /* ORDER BY consumed: every qualifying row through the heap */
  apSrc = sqlite3_malloc64(sizeof(csq_vec *) * (size_t)nOut);
  if (!apSrc) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  for (int j = 0; j < nOut; j++) apSrc[j] = &c->aOut[j];
  t = new_topn(c, nOut);
  if (!t) rc = SQLITE_NOMEM;
  while (rc == SQLITE_OK) {
    rc = settle_scan(c, p);
    if (rc || c->bEof) break;
    rc = vt_topn_add(t, apSrc, c->iRow, c->nRow - c->iRow);
    c->iRow = c->nRow;
  }
  release_sources(c, nCol);
  if (rc == SQLITE_OK) rc = serve_topn(c, t, nOut);
done:
  vt_topn_free(t);
  vt_plan_terms_free(aTerm, nTerm);
  sqlite3_free(aTerm);
  sqlite3_free(aChunk);
  sqlite3_free(apSrc);
  sqlite3_free(pProg);
  return rc;
}

static int open_scan(vt_cursor *c, vt_tab *p);

/* What the rows of a probe passed: the terms of its plan (idxStr's segments
** between cols= and key=) and their values, argv[0..nTerm); "" without
** terms. NULL: no memory. */
static char *probe_sig(const char *idxStr, const vt_plan *pPlan, sqlite3_value **argv) {
  if (pPlan->nTerm == 0) return sqlite3_mprintf("");
  const char *z0 = strchr(strchr(idxStr, ';') + 1, ';'); /* after "probe;cols=HEX" */
  const char *z1 = strstr(idxStr, ";key=");
  sqlite3_str *pStr = sqlite3_str_new(NULL);
  sqlite3_str_append(pStr, z0, (int)(z1 - z0));
  for (int i = 0; i < pPlan->nTerm; i++) {
    sqlite3_value *v = argv[i];
    switch (sqlite3_value_type(v)) {
    case SQLITE_INTEGER:
      sqlite3_str_appendf(pStr, "|i%lld", sqlite3_value_int64(v));
      break;
    case SQLITE_FLOAT:
      sqlite3_str_appendf(pStr, "|r%!.17g", sqlite3_value_double(v));
      break;
    case SQLITE_NULL:
      sqlite3_str_appendall(pStr, "|n");
      break;
    default: { /* TEXT or BLOB: their bytes, with their length */
      const unsigned char *b = sqlite3_value_blob(v);
      int n = sqlite3_value_bytes(v);
      sqlite3_str_appendf(pStr, "|%c%d:", sqlite3_value_type(v) == SQLITE_TEXT ? 't' : 'b', n);
      for (int k = 0; k < n; k++) sqlite3_str_appendf(pStr, "%02x", b[k]);
    }
    }
  }
  return sqlite3_str_finish(pStr);
}

/* The probe may take more rows: SQLITE_FULL with a message once it holds
** twice VT_PROBE_MAX_ROWS (the table grew since it was planned). */
static int probe_room(vt_tab *p, const vt_probe *pr) {
  if (vt_probe_rows(pr) < VT_PROBE_MAX_ROWS * 2u) return SQLITE_OK;
  vt_set_error(&p->base, "csq: table %s grew past %d rows during a join probe", p->zName,
               VT_PROBE_MAX_ROWS * 2);
  return SQLITE_FULL;
}

/* The colUsed bit of chunk iVec (0 the rowid: none). */
static uint64_t chunk_bit(int iVec) {
  return iVec <= 0 ? 0 : (uint64_t)1 << (iVec - 1 < 63 ? iVec - 1 : 63);
}

/* Build the probe pr from every visible row (a host scan through this
** cursor, as open_scan reads, loading only the vectors pr copies), and hand
** it what it read from. */
static int probe_build_host(vt_cursor *c, vt_tab *p, vt_probe *pr) {
  int nVec = p->s.nCol + 1;
  const csq_vec **apSrc = sqlite3_malloc64(sizeof(csq_vec *) * (size_t)nVec);
  if (!apSrc) return SQLITE_NOMEM;
  for (int i = 0; i < nVec; i++) apSrc[i] = &c->aVec[i];
  uint64_t colUsed = c->colUsed;
  c->colUsed = 0; /* enter_source loads nothing: the loop below loads what is copied */
  int rc = open_scan(c, p);
  if (rc == SQLITE_OK) {
    uint64_t nLive = c->nBuf;
    for (int g = 0; g < c->nRg; g++) nLive += c->apRg[g]->nRow - c->apRg[g]->nDel;
    vt_probe_expect(pr, nLive);
    if (nLive < VT_PROBE_MAX_ROWS * 2u) rc = vt_probe_reserve(pr, (uint32_t)nLive);
  }
  while (rc == SQLITE_OK && !c->bEof) {
    for (int i = 0; rc == SQLITE_OK && i < nVec; i++)
      if (vt_probe_copied(pr, i) && !c->aLoaded[i]) rc = load_column(c, p, i);
    if (rc == SQLITE_OK) rc = probe_room(p, pr);
    if (rc == SQLITE_OK) {
      /* the run of visible rows from here, in one append */
      uint32_t r0 = c->iRow;
      do c->iRow++;
      while (c->iRow < c->nRow && row_ok(c));
      rc = vt_probe_append(pr, apSrc, r0, c->iRow - r0, (uint32_t)c->iRg, NULL);
      dev_queue_stats(p->apMem[c->iRg < c->nRg ? c->aRgMem[c->iRg] : 0]->pQ)->rows_returned +=
          c->iRow - r0 - 1; /* settle counted the first */
    }
    if (rc == SQLITE_OK) rc = settle(c, p);
  }
  c->colUsed = colUsed;
  sqlite3_free(apSrc);
  if (rc) return rc;
  /* the probe takes the row groups' references and the unwritten rows */
  rc = vt_probe_adopt(pr, c->nMem, c->aSnap, c->aTab, c->aTabCopy, (uint32_t)c->nRg, c->apRg,
                      c->aRgMem, c->aBuf);
  c->nRg = 0;
  c->aBuf = NULL;
  return rc;
}

/* Build the probe pr from the rows that pass the plan's terms: a device
** program over every member, with row numbers, whose batches (the vectors
** pr copies) are appended as they come; the others are left out of the
** batches from the moment pr stops copying them (update_omit). Then hand
** pr what it read from. */
static int probe_build_device(vt_cursor *c, vt_tab *p, vt_probe *pr, const vt_plan *pPlan,
                              const char *idxStr, sqlite3_value **argv) {
  int nVec = p->s.nCol + 1;
  const csq_vec **apSrc = sqlite3_malloc64(sizeof(csq_vec *) * (size_t)nVec);
  uint32_t *aBase = sqlite3_malloc64(sizeof(uint32_t) * (size_t)(c->nMem + 1));
  store_rg **apRg = NULL;
  int *aRgMem = NULL;
  if (!apSrc || !aBase) {
    sqlite3_free(apSrc);
    sqlite3_free(aBase);
    return SQLITE_NOMEM;
  }
  for (int k = 0; k < pPlan->nProbeKey; k++) c->colUsed |= chunk_bit(pPlan->aProbeChunk[k]);
  int rc = device_filter(c, p, pPlan, idxStr, argv); /* bRowNum: no sort keys, no bWhole */
  if (rc == SQLITE_OK && !c->bRowNum) rc = SQLITE_INTERNAL;
  aBase[0] = 0;
  for (int k = 0; rc == SQLITE_OK && k < c->nMem; k++)
    aBase[k + 1] = aBase[k] + (uint32_t)(c->aTab[k] ? c->aTab[k]->nRg : 0);
  while (rc == SQLITE_OK && !c->bEof) {
    uint64_t mKeep = 0;
    for (int i = 0; i < nVec; i++) {
      int j = c->aOutOf[i];
      apSrc[i] = j >= 0 ? &c->aOut[j] : NULL;
      if (j >= 0 && j < 64 && vt_probe_copied(pr, i)) mKeep |= (uint64_t)1 << j;
    }
    rc = probe_room(p, pr);
    if (rc == SQLITE_OK)
      rc = vt_probe_append(pr, apSrc, 0, c->nRow, aBase[c->iBatchMem] + (uint32_t)c->iBatchRg,
                           c->aRowNum);
    c->iRow = c->nRow;
    c->mAsked = mKeep; /* the outputs still copied: the rest are left out from now */
    if (rc == SQLITE_OK) rc = settle_scan(c, p);
  }
  if (rc == SQLITE_OK && c->aTab[0]) {
    /* the sources: every row group of every member, referenced */
    uint32_t nRg = aBase[c->nMem];
    apRg = sqlite3_malloc64(sizeof(store_rg *) * (size_t)(nRg + 1));
    aRgMem = sqlite3_malloc64(sizeof(int) * (size_t)(nRg + 1));
    if (!apRg || !aRgMem) rc = SQLITE_NOMEM;
    for (int k = 0; rc == SQLITE_OK && k < c->nMem; k++)
      for (int g = 0; g < c->aTab[k]->nRg; g++) {
        store_rg *pRg = c->aTab[k]->apRg[g];
        __atomic_add_fetch(&pRg->nRef, 1, __ATOMIC_RELAXED);
        apRg[aBase[k] + (uint32_t)g] = pRg;
        aRgMem[aBase[k] + (uint32_t)g] = k;
      }
    stop_scans(c);
    if (rc == SQLITE_OK)
      rc = vt_probe_adopt(pr, c->nMem, c->aSnap, c->aTab, c->aTabCopy, nRg, apRg, aRgMem, NULL);
  }
  sqlite3_free(apRg);
  sqlite3_free(aRgMem);
  sqlite3_free(apSrc);
  sqlite3_free(aBase);
  return rc;
}

/* VT_PLAN_PROBE: look the key values (argv after the terms') up in the
** probe cache, building it first (one scan of the table through this
** cursor, filtered on the device by the plan's terms if it has any) if the
** cursor has none or the table was written since. */
static int probe_filter(vt_cursor *c, vt_tab *p, const vt_plan *pPlan, const char *idxStr,
                        sqlite3_value **argv) {
  if (c->pProbe && vt_probe_stamp(c->pProbe) != p->nWrite) {
    vt_probe_release(p, c->pProbe, 1);
    c->pProbe = NULL;
  }
  if (!c->pProbe) {
    int nVec = p->s.nCol + 1;
    uint8_t *aKeep = sqlite3_malloc64((size_t)nVec);
    char *zSig = probe_sig(idxStr, pPlan, argv);
    if (!aKeep || !zSig) {
      sqlite3_free(aKeep);
      sqlite3_free(zSig);
      return SQLITE_NOMEM;
    }
    /* copied if they fit: the columns the statement reads (the rowid only
    ** as its INTEGER PRIMARY KEY) */
    aKeep[0] = p->s.iIpk >= 0 && col_used(c, p->s.iIpk);
    for (int i = 0; i < p->s.nCol; i++) aKeep[i + 1] = col_used(c, i) && i != p->s.iIpk;
    /* another cursor of this statement run may have built it */
    c->pProbe = vt_probe_acquire(p, nVec, pPlan->aProbeChunk, pPlan->nProbeKey, zSig);
    vt_probe *pr = c->pProbe ? NULL
                             : vt_probe_new(p->pConn, nVec, aKeep, pPlan->aProbeChunk,
                                            pPlan->nProbeKey, zSig, p->nWrite);
    sqlite3_free(aKeep);
    sqlite3_free(zSig);
    if (c->pProbe) goto found;
    if (!pr) return SQLITE_NOMEM;
    int rc = pPlan->nTerm > 0 ? probe_build_device(c, p, pr, pPlan, idxStr, argv)
                              : probe_build_host(c, p, pr);
    if (rc == SQLITE_OK) rc = vt_probe_index(pr);
    cursor_reset(c, p->s.nCol);
    if (rc) {
      vt_probe_free(pr);
      return rc;
    }
    c->pProbe = pr;
    vt_probe_publish(p, pr);
  }
found:;
  int rc = vt_probe_find(c->pProbe, argv + pPlan->nTerm, &c->hits);
  if (rc) return rc;
  c->bProbe = 1;
  c->zProbePlan = idxStr;
  c->nProbeArg = pPlan->nTerm;
  c->iHit = 0;
  c->bEof = c->hits.n == 0;
  return SQLITE_OK;
}

/* VT_PLAN_SCAN with ORDER BY consumed: every live row through the top-N heap
** (the used columns of each row group loaded as usual), then the kept rows,
** sorted, are served as output vectors. */
static int host_topn(vt_cursor *c, vt_tab *p) {
  int nCol = p->s.nCol, rc = SQLITE_OK;
  int *aChunk = sqlite3_malloc64(sizeof(int) * (size_t)(nCol + 1));
  const csq_vec **apSrc = sqlite3_malloc64(sizeof(csq_vec *) * (size_t)(nCol + 1));
  vt_topn *t = NULL;
  if (!aChunk || !apSrc) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  int nOut = set_outputs(c, p, 1, aChunk);
  for (int j = 0; j < nOut; j++) apSrc[j] = &c->aVec[aChunk[j]];
  t = new_topn(c, nOut);
  if (!t) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  rc = open_scan(c, p);
  int iSrc = -1;
  while (rc == SQLITE_OK && !c->bEof) {
    for (int j = 0; c->iRg != iSrc && rc == SQLITE_OK && j < nOut; j++)
      if (!c->aLoaded[aChunk[j]]) rc = load_column(c, p, aChunk[j]);
    iSrc = c->iRg;
    if (rc == SQLITE_OK) rc = vt_topn_add(t, apSrc, c->iRow, 1);
    if (rc == SQLITE_OK) {
      c->iRow++;
      rc = settle(c, p);
    }
  }
  release_sources(c, nCol);
  if (rc == SQLITE_OK) rc = serve_topn(c, t, nOut);
done:
  vt_topn_free(t);
  sqlite3_free(aChunk);
  sqlite3_free(apSrc);
  return rc;
}

/* GROUP BY consumed: every row the plan returns (rowids and the used
** columns) is collected, then handed to SQLite group by group, the groups
** sorted on their keys (vtab/group.c). */
static int group_filter(vt_cursor *c, vt_tab *p, const vt_plan *pPlan, const char *idxStr,
                        sqlite3_value **argv) {
  int nVec = p->s.nCol + 1, rc;
  int *aChunk = sqlite3_malloc64(sizeof(int) * (size_t)nVec);
  const csq_vec **apSrc = sqlite3_malloc64(sizeof(csq_vec *) * (size_t)nVec);
  uint32_t *aRow = NULL, nRowAlloc = 0;
  if (!aChunk || !apSrc) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  int nOut = set_outputs(c, p, 1, aChunk);
  int aKey[VT_GROUP_MAXKEY];
  for (int k = 0; k < pPlan->nGroup; k++) {
    aKey[k] = c->aOutOf[pPlan->aGroupChunk[k]];
    if (aKey[k] < 0) {
      vt_set_error(&p->base, "csq: malformed plan '%s'", idxStr);
      rc = SQLITE_ERROR;
      goto done;
    }
  }
  c->pGroup = vt_grouper_new(nOut, aKey, pPlan->aGroupDesc, pPlan->nGroup);
  if (!c->pGroup) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  if (p->nRowEst > 0 && p->nRowEst < UINT32_MAX &&
      vt_grouper_reserve(c->pGroup, (uint32_t)p->nRowEst)) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  if (pPlan->eKind == VT_PLAN_DEVICE) {
    c->bWhole = 1;
    rc = device_filter(c, p, pPlan, idxStr, argv);
    c->bWhole = 0;
    while (rc == SQLITE_OK && !c->bEof) {
      for (int j = 0; j < nOut; j++) apSrc[j] = &c->aOut[j];
      rc = vt_grouper_add(c->pGroup, apSrc, NULL, c->nRow);
      c->iRow = c->nRow;
      if (rc == SQLITE_OK) rc = settle_scan(c, p);
    }
  } else {
    rc = open_scan(c, p);
    while (rc == SQLITE_OK && !c->bEof) {
      for (int i = 0; rc == SQLITE_OK && i < nVec; i++)
        if (c->aOutOf[i] >= 0) {
          if (!c->aLoaded[i]) rc = load_column(c, p, i);
          apSrc[c->aOutOf[i]] = &c->aVec[i];
        }
      if (rc == SQLITE_OK && c->nRow > nRowAlloc) {
        sqlite3_free(aRow);
        aRow = sqlite3_malloc64(sizeof(uint32_t) * c->nRow);
        nRowAlloc = aRow ? c->nRow : 0;
        if (!aRow) rc = SQLITE_NOMEM;
      }
      if (rc) break;
      uint32_t n = 0;
      for (uint32_t r = c->iRow; r < c->nRow; r++) {
        c->iRow = r;
        if (row_ok(c)) aRow[n++] = r;
      }
      rc = vt_grouper_add(c->pGroup, apSrc, aRow, n);
      c->iRow = c->nRow;
      if (rc == SQLITE_OK) rc = settle(c, p);
    }
    if (rc == SQLITE_OK && !c->aOut) {
      c->aOut = sqlite3_malloc64(sizeof(csq_vec) * (size_t)nOut);
      if (!c->aOut) rc = SQLITE_NOMEM;
      for (int j = 0; rc == SQLITE_OK && j < nOut; j++) csq_vec_init(&c->aOut[j]);
      if (rc == SQLITE_OK) c->nOut = nOut;
    }
  }
  /* every row is in: serve them as the output vectors of one batch */
  uint32_t n = 0;
  if (rc == SQLITE_OK && c->aOut) rc = vt_grouper_emit(c->pGroup, c->aOut, &n, &c->aServe);
  release_sources(c, p->s.nCol);
  c->iScan = 0;
  c->iRow = 0;
  c->nRow = n;
  c->bEof = n == 0;
done:
  sqlite3_free(aChunk);
  sqlite3_free(apSrc);
  sqlite3_free(aRow);
  return rc;
}

/* Run a decoded plan: position the cursor (reset, its colUsed set) on its
** first row, or at EOF. */
static int run_plan(vt_cursor *c, vt_tab *p, const vt_plan *pPlan, const char *idxStr, int argc,
                    sqlite3_value **argv) {
  c->nLeft = pPlan->nLeft;
  c->nSkip = pPlan->nSkip;
  c->nKey = pPlan->nKey;
  memcpy(c->aKeyChunk, pPlan->aKeyChunk, sizeof(c->aKeyChunk));
  memcpy(c->aKeyDesc, pPlan->aKeyDesc, sizeof(c->aKeyDesc));
  if ((pPlan->eKind == VT_PLAN_SCAN || pPlan->eKind == VT_PLAN_DEVICE) && pPlan->nGroup > 0)
    return group_filter(c, p, pPlan, idxStr, argv);
  switch (pPlan->eKind) {
  case VT_PLAN_DEVICE:
    if (c->nLeft == 0) return SQLITE_OK; /* LIMIT 0: nothing to read (bEof is set) */
    return device_filter(c, p, pPlan, idxStr, argv);
  case VT_PLAN_PROBE:
    return probe_filter(c, p, pPlan, idxStr, argv);
  case VT_PLAN_ROWID:
    if (argc >= 1) {
      sqlite3_value *v = argv[0];
      int t = sqlite3_value_numeric_type(v);
      if (t == SQLITE_FLOAT) {
        double r = sqlite3_value_double(v);
        /* no integer rowid equals a fraction or a value out of range: empty */
        if (!csq_real_int(r, &c->iLookup)) return SQLITE_OK;
      } else if (t == SQLITE_INTEGER) {
        c->iLookup = sqlite3_value_int64(v);
      } else {
        return SQLITE_OK; /* NULL or text: nothing matches a rowid */
      }
      c->bLookup = 1;
    }
    return open_scan(c, p);
  case VT_PLAN_SCAN:
    if (c->nLeft == 0) return SQLITE_OK;
    if (c->nKey) return host_topn(c, p);
    return open_scan(c, p);
  default:
    return open_scan(c, p);
  }
}

/* xFilter: a fresh scan by the plan xBestIndex chose (vtab/plan.c). On an
** error the cursor keeps nothing of the scan it began (cursor_reset). */
int vt_filter(sqlite3_vtab_cursor *pCur, int idxNum, const char *idxStr, int argc,
              sqlite3_value **argv) {
  vt_cursor *c = (vt_cursor *)pCur;
  vt_tab *p = (vt_tab *)pCur->pVtab;
  if (idxNum == VT_PLAN_PROBE && c->bProbe && idxStr == c->zProbePlan && argc > c->nProbeArg &&
      vt_probe_stamp(c->pProbe) == p->nWrite) {
    /* the next probe of a join, same plan: only the lookup (the cursor
    ** holds nothing else since the last one; the terms' values are
    ** literals, the same for the whole statement run) */
    int rc = vt_probe_find(c->pProbe, argv + c->nProbeArg, &c->hits);
    c->iHit = 0;
    c->bEof = rc != SQLITE_OK || c->hits.n == 0;
    return rc;
  }
  cursor_reset(c, p->s.nCol);
  c->bLookup = 0;
  vt_plan plan;
  int rc = vt_plan_decode(p, idxNum, idxStr, argc, argv, &plan);
  c->colUsed = plan.colUsed;
  if (rc == SQLITE_OK) rc = run_plan(c, p, &plan, idxStr, argc, argv);
  if (rc) cursor_reset(c, p->s.nCol);
  return rc;
}

/* VT_PLAN_SCAN and VT_PLAN_ROWID (and building a probe cache): take the visible row groups
** (pruned by the rowid sought, if any) and the write buffer, and position
** on the first live row. */
static int open_scan(vt_cursor *c, vt_tab *p) {
  int rc = visible(c, p);
  if (rc) return rc;
  int nAll = 0;
  for (int k = 0; k < c->nMem; k++) nAll += c->aTab[k]->nRg;
  c->apRg = sqlite3_malloc64(sizeof(store_rg *) * (size_t)(nAll + 1));
  c->aRgMem = sqlite3_malloc64(sizeof(int) * (size_t)(nAll + 1));
  if (!c->apRg || !c->aRgMem) return SQLITE_NOMEM;
  for (int k = 0; k < c->nMem; k++) {
    const store_table *pTab = c->aTab[k];
    for (int g = 0; g < pTab->nRg; g++) {
      store_rg *pRg = pTab->apRg[g];
      if (c->bLookup) {
        const csq_zone *z = &pRg->aChunk[0].zone;
        if (c->iLookup < z->iMin || c->iLookup > z->iMax) {
          dev_queue_stats(p->apMem[k]->pQ)->row_groups_skipped++;
          continue;
        }
      }
      if (pRg->nDel == pRg->nRow) continue;
      __atomic_add_fetch(&pRg->nRef, 1, __ATOMIC_RELAXED);
      c->aRgMem[c->nRg] = k;
      c->apRg[c->nRg++] = pRg;
    }
  }
  vt_note_table(p, (store_table *const *)c->aTab, c->nMem, 0);
  if (p->aBuf) {
    /* rows still in the write buffer */
    uint32_t nBuf = p->aBuf[0].n;
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
  if (c->bProbe) {
    c->bEof = ++c->iHit >= c->hits.n;
    return SQLITE_OK;
  }
  if (c->pGroup) {
    c->bEof = ++c->iRow >= c->nRow;
    return SQLITE_OK;
  }
  if (c->nSkip > 0) c->nSkip--;
  if (c->nLeft > 0 && --c->nLeft == 0) {
    /* the pushed LIMIT is reached: no further row group is read */
    stop_scans(c);
    c->bEof = 1;
    return SQLITE_OK;
  }
  c->iRow++;
  return settle(c, (vt_tab *)pCur->pVtab);
}

int vt_eof(sqlite3_vtab_cursor *pCur) {
  return ((vt_cursor *)pCur)->bEof;
}

/* The value of column iVec (0 the rowid) for the current row of a device
** batch that left it out: its chunk of the batch's row group is read (once
** per row group) and indexed by the row's number. */
static int lazy_value(vt_cursor *c, vt_tab *p, int iVec, const csq_vec **ppV, uint32_t *pR) {
  csq_vec *v = &c->aVec[iVec];
  if (!c->aRowNum || !c->pBatchRg) {
    vt_set_error(&p->base, "csq: no device batch to read a column for");
    return SQLITE_ERROR;
  }
  if (c->apLazyRg[iVec] != c->pBatchRg) {
    int k = c->iBatchMem, ai = iVec - 1;
    char *zErr = NULL;
    c->apLazyRg[iVec] = NULL;
    csq_vec_reset(v);
    int rc = store_read_chunks(p->apMem[k]->pStore, p->apMem[k]->pQ, c->aTab[k], c->pBatchRg, &ai,
                               1, v, &zErr);
    if (rc) return vt_err(&p->base, rc, zErr);
    c->apLazyRg[iVec] = c->pBatchRg;
  }
  uint32_t r = c->aRowNum[c->iRow];
  if (r >= v->n) {
    vt_set_error(&p->base, "csq: the device returned row %u of a row group of %u rows", r, v->n);
    return SQLITE_CORRUPT;
  }
  *ppV = v;
  *pR = r;
  return SQLITE_OK;
}

/* Device mode: where the current row's value of column iVec (0 the rowid)
** is: its output vector in the batch, or, if the batch left it out, its
** chunk (lazy_value). Notes that SQLite read it (update_omit). zName names
** the column (NULL: the rowid) in the error of a program without row
** numbers that did not fetch it. */
static int batch_value(vt_cursor *c, vt_tab *p, int iVec, const char *zName, const csq_vec **ppV,
                       uint32_t *pR) {
  int j = c->aOutOf[iVec];
  if (j >= 0 && j < 64) c->mAsked |= (uint64_t)1 << j;
  if (j >= 0 && c->aOut[j].n == c->nRow) {
    *ppV = &c->aOut[j];
    *pR = c->aServe ? c->aServe[c->iRow] : c->iRow;
    return SQLITE_OK;
  }
  if (c->bRowNum) return lazy_value(c, p, iVec, ppV, pR);
  if (zName)
    vt_set_error(&p->base, "csq: column %s was not fetched (colUsed)", zName);
  else
    vt_set_error(&p->base, "csq: rowids were not fetched");
  return SQLITE_ERROR;
}

int vt_column(sqlite3_vtab_cursor *pCur, sqlite3_context *ctx, int i) {
  vt_cursor *c = (vt_cursor *)pCur;
  vt_tab *p = (vt_tab *)pCur->pVtab;
  if (i < 0 || i >= p->s.nCol) return SQLITE_OK;
  int iVec = i == p->s.iIpk ? 0 : i + 1;
  const csq_vec *v;
  if (c->bProbe) {
    uint32_t r;
    int rc = vt_probe_value(c->pProbe, p, iVec, c->hits.a[c->iHit], &v, &r);
    if (rc) return rc;
    vt_result_value(ctx, v, r);
    return SQLITE_OK;
  }
  if (c->nOut) {
    uint32_t r;
    int rc = batch_value(c, p, iVec, p->s.aCol[i].zName, &v, &r);
    if (rc) return rc;
    vt_result_value(ctx, v, r);
    return SQLITE_OK;
  } else {
    if (!c->aLoaded[iVec]) {
      int rc = load_column(c, p, iVec);
      if (rc) return rc;
    }
    v = &c->aVec[iVec];
  }
  vt_result_value(ctx, v, c->iRow);
  return SQLITE_OK;
}

int vt_rowid(sqlite3_vtab_cursor *pCur, sqlite3_int64 *pRowid) {
  vt_cursor *c = (vt_cursor *)pCur;
  vt_tab *p = (vt_tab *)pCur->pVtab;
  if (c->bProbe) {
    uint32_t r;
    const csq_vec *v;
    int rc = vt_probe_value(c->pProbe, p, 0, c->hits.a[c->iHit], &v, &r);
    if (rc) return rc;
    *pRowid = v->aVal[r].i;
    return SQLITE_OK;
  }
  if (c->nOut) {
    const csq_vec *v;
    uint32_t r;
    int rc = batch_value(c, p, 0, NULL, &v, &r);
    if (rc) return rc;
    *pRowid = v->aVal[r].i;
    return SQLITE_OK;
  }
  if (!c->aLoaded[0]) {
    int rc = load_column(c, p, 0);
    if (rc) return rc;
  }
  *pRowid = c->aVec[0].aVal[c->iRow].i;
  return SQLITE_OK;
}
