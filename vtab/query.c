/*
** vtab/query.c - pushdown views: a whole SELECT as a table.
**
**   CREATE VIRTUAL TABLE temp.q6 USING csq_query(
**     'SELECT sum(l_extendedprice * l_discount) FROM lineitem
**      WHERE l_shipdate >= ?1 AND l_shipdate < ?2');
**   SELECT * FROM q6('1994-01-01', '1995-01-01');
**
** The view's columns are the query's result columns (named as SQLite names
** them); each parameter ?N becomes a hidden column pN, so the view is called
** like a table-valued function. When it runs, the planner (planner/split.c)
** splits the query: the device filters, groups and aggregates, the host
** merges the partial results and SQLite finishes (HAVING, final
** expressions, ORDER BY, LIMIT) over csq_rows. A query the planner cannot
** split runs as ordinary SQL on the same connection, where the csq tables
** it reads still push their filters: never an error SQLite would not give,
** never a different answer.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "vtab/vtab.h"
#include "device/host/scan.h"
#include "device/host/agg.h"
#include "planner/split.h"
#include "planner/join.h"
#include "planner/keyspan.h"
#include "planner/joinagg.h"
#include "planner/hashjoin.h"
#include "planner/joinfilter.h"
#include "planner/derived.h"
#include "planner/star.h"

typedef struct q_tab {
  sqlite3_vtab base; /* must be first */
  sqlite3 *db;
  vt_conn *pConn;
  char *zSql; /* the query */
  int nCol;   /* result columns */
  int nParam; /* ?1..?nParam: hidden columns after the result columns */
} q_tab;

typedef struct q_cursor {
  sqlite3_vtab_cursor base; /* must be first */
  sqlite3_stmt *pStmt;      /* the statement producing the rows */
  vt_rowset rows;           /* the device part's merged rows, if the query was split */
  int bEof;
  sqlite3_int64 iRow;
} q_cursor;

/* The text of a SQL string literal argument, dequoted; sqlite3_malloc'd. */
static char *dequote_arg(const char *z) {
  while (*z == ' ' || *z == '\t' || *z == '\n' || *z == '\r') z++;
  size_t n = strlen(z);
  while (n > 0 && (z[n - 1] == ' ' || z[n - 1] == '\t' || z[n - 1] == '\n' || z[n - 1] == '\r'))
    n--;
  if (n < 2 || (z[0] != '\'' && z[0] != '"') || z[n - 1] != z[0]) return NULL;
  char q = z[0];
  char *zOut = sqlite3_malloc64(n);
  if (!zOut) return NULL;
  size_t j = 0;
  for (size_t i = 1; i < n - 1; i++) {
    zOut[j++] = z[i];
    if (z[i] == q && z[i + 1] == q) i++;
  }
  zOut[j] = 0;
  return zOut;
}

static int q_init(sqlite3 *db, void *pAux, int argc, const char *const *argv, sqlite3_vtab **ppVtab,
                  char **pzErr) {
  if (argc != 4) {
    *pzErr = sqlite3_mprintf("csq_query: usage: CREATE VIRTUAL TABLE name USING "
                             "csq_query('SELECT ...')");
    return SQLITE_ERROR;
  }
  char *zSql = dequote_arg(argv[3]);
  if (!zSql) {
    *pzErr = sqlite3_mprintf("csq_query: the argument must be a quoted SELECT statement");
    return SQLITE_ERROR;
  }
  /* SQLite itself checks the query and names its columns */
  sqlite3_stmt *pStmt = NULL;
  const char *zTail = NULL;
  int rc = sqlite3_prepare_v2(db, zSql, -1, &pStmt, &zTail);
  if (rc == SQLITE_OK && !pStmt) rc = SQLITE_ERROR;
  if (rc == SQLITE_OK) {
    while (zTail && (*zTail == ' ' || *zTail == ';' || *zTail == '\n' || *zTail == '\t')) zTail++;
    if ((zTail && *zTail) || !sqlite3_stmt_readonly(pStmt) || sqlite3_column_count(pStmt) == 0) {
      *pzErr = sqlite3_mprintf("csq_query: the argument must be one SELECT statement");
      rc = SQLITE_ERROR;
    }
  } else {
    *pzErr = sqlite3_mprintf("csq_query: %s", sqlite3_errmsg(db));
  }
  sqlite3_str *pDecl = NULL;
  int nCol = 0, nParam = 0;
  if (rc == SQLITE_OK) {
    nCol = sqlite3_column_count(pStmt);
    nParam = sqlite3_bind_parameter_count(pStmt);
    pDecl = sqlite3_str_new(db);
    sqlite3_str_appendall(pDecl, "CREATE TABLE x(");
    for (int i = 0; i < nCol; i++) {
      const char *zName = sqlite3_column_name(pStmt, i);
      /* duplicate names get a suffix, as CREATE TABLE AS does */
      int nDup = 0;
      for (int j = 0; j < i; j++)
        if (sqlite3_stricmp(sqlite3_column_name(pStmt, j), zName) == 0) nDup++;
      if (nDup)
        sqlite3_str_appendf(pDecl, "%s\"%w:%d\"", i ? ", " : "", zName, nDup);
      else
        sqlite3_str_appendf(pDecl, "%s\"%w\"", i ? ", " : "", zName);
    }
    for (int i = 1; i <= nParam; i++) sqlite3_str_appendf(pDecl, ", \"p%d\" HIDDEN", i);
    sqlite3_str_appendall(pDecl, ")");
  }
  sqlite3_finalize(pStmt);
  char *zDecl = pDecl ? sqlite3_str_finish(pDecl) : NULL;
  if (rc == SQLITE_OK && !zDecl) rc = SQLITE_NOMEM;
  if (rc == SQLITE_OK) {
    rc = sqlite3_declare_vtab(db, zDecl);
    if (rc) *pzErr = sqlite3_mprintf("csq_query: %s", sqlite3_errmsg(db));
  }
  sqlite3_free(zDecl);
  q_tab *p = NULL;
  if (rc == SQLITE_OK) {
    p = sqlite3_malloc64(sizeof(*p));
    if (!p) rc = SQLITE_NOMEM;
  }
  if (rc) {
    sqlite3_free(zSql);
    return rc;
  }
  memset(p, 0, sizeof(*p));
  p->db = db;
  p->pConn = pAux;
  p->zSql = zSql;
  p->nCol = nCol;
  p->nParam = nParam;
  *ppVtab = &p->base;
  return SQLITE_OK;
}

static int q_disconnect(sqlite3_vtab *pVtab) {
  q_tab *p = (q_tab *)pVtab;
  sqlite3_free(p->zSql);
  sqlite3_free(p);
  return SQLITE_OK;
}

/* Parameters are the hidden columns: each pN = value goes to argv, in a
** bitmask-ordered idxNum so xFilter knows which are given. */
static int q_best_index(sqlite3_vtab *pVtab, sqlite3_index_info *pInfo) {
  q_tab *p = (q_tab *)pVtab;
  int nArg = 0;
  int mask = 0;
  for (int k = 1; k <= p->nParam && k <= 30; k++) {
    for (int i = 0; i < pInfo->nConstraint; i++) {
      const struct sqlite3_index_constraint *c = &pInfo->aConstraint[i];
      if (c->iColumn != p->nCol + k - 1 || c->op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
      if (!c->usable) return SQLITE_CONSTRAINT;
      pInfo->aConstraintUsage[i].argvIndex = ++nArg;
      pInfo->aConstraintUsage[i].omit = 1;
      mask |= 1 << (k - 1);
      break;
    }
  }
  pInfo->idxNum = mask;
  pInfo->estimatedCost = 1000;
  pInfo->estimatedRows = 100;
  return SQLITE_OK;
}

static int q_open(sqlite3_vtab *pVtab, sqlite3_vtab_cursor **ppCur) {
  (void)pVtab;
  q_cursor *c = sqlite3_malloc64(sizeof(*c));
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof(*c));
  c->bEof = 1;
  *ppCur = &c->base;
  return SQLITE_OK;
}

static void q_reset(q_cursor *c) {
  sqlite3_finalize(c->pStmt);
  c->pStmt = NULL;
  vt_rowset_clear(&c->rows);
  c->bEof = 1;
}

static int q_close(sqlite3_vtab_cursor *pCur) {
  q_reset((q_cursor *)pCur);
  sqlite3_free(pCur);
  return SQLITE_OK;
}

static int q_step(q_cursor *c, q_tab *p) {
  int rc = sqlite3_step(c->pStmt);
  if (rc == SQLITE_ROW) {
    c->bEof = 0;
    return SQLITE_OK;
  }
  c->bEof = 1;
  if (rc == SQLITE_DONE) return SQLITE_OK;
  sqlite3_free(p->base.zErrMsg);
  p->base.zErrMsg = sqlite3_mprintf("%s", sqlite3_errmsg(p->db));
  return rc;
}

/* Ordinary SQL on the same connection: the csq tables it reads still push
** their filters (transparent pushdown). */
static int run_plain(q_cursor *c, q_tab *p, sqlite3_value **aParam, int nParam) {
  int rc = sqlite3_prepare_v2(p->db, p->zSql, -1, &c->pStmt, NULL);
  for (int k = 0; rc == SQLITE_OK && k < nParam; k++)
    if (aParam[k]) rc = sqlite3_bind_value(c->pStmt, k + 1, aParam[k]);
  if (rc) {
    sqlite3_free(p->base.zErrMsg);
    p->base.zErrMsg = sqlite3_mprintf("%s", sqlite3_errmsg(p->db));
  }
  return rc;
}

/* The planner's view of this connection's csq tables. */
typedef struct q_lookup {
  vt_conn *pConn;
  vt_tab *pFound;
  const char **azCol;
  char *aAff;
  char *aColl;
  vt_tab *apFound[PL_JOIN_MAX_TAB]; /* every table found, in lookup order (joins) */
  int nFound;
  q_tab *pTab; /* the view planning (q_rows) */
} q_lookup;

static vt_tab *find_tab(vt_conn *pConn, const char *zDb, const char *zTable) {
  for (vt_tab *t = pConn->pTabs; t; t = t->pNextTab)
    if (sqlite3_stricmp(t->zName, zTable) == 0 && (!zDb || sqlite3_stricmp(t->zDb, zDb) == 0))
      return t;
  return NULL;
}

/* pl_tabinfo.xBpf: the connection's eBPF programs (vtab/bpf.c). */
static int q_bpf(void *pArg, const char *zName, const uint8_t **paIns, uint32_t *pnIns,
                 const uint8_t **paDecl, int *pnArg) {
  const vt_bpf *p = vt_bpf_find((vt_conn *)pArg, zName);
  if (!p) return 1;
  vt_bpf_code(p, paIns, pnIns, paDecl);
  *pnArg = vt_bpf_nArg(p);
  return 0;
}

/* A table's view on every member for one scan (vt_visible_members),
** a member whose view is the connection's write transaction read through
** a copy: a transaction's working table moves as it writes. */
typedef struct q_members {
  int n;
  store_table **aTab; /* what to scan, per member */
  store_snap **aSnap;
  store_table **aCopy;
} q_members;

static void members_close(q_members *m) {
  for (int k = 0; m->aCopy && m->aSnap && k < m->n; k++) {
    store_table_free(m->aCopy[k]);
    if (m->aSnap[k]) store_snap_unref(m->aSnap[k]);
  }
  free(m->aTab);
  free(m->aSnap);
  free(m->aCopy);
  memset(m, 0, sizeof(*m));
}

/* 0, or -ENOMEM or a device error with *pzErr; m is to be closed either
** way (closing twice is harmless). */
static int members_open(vt_tab *t, q_members *m, char **pzErr) {
  int n = t->nMem, e = 0;
  m->n = n;
  m->aTab = calloc((size_t)n, sizeof(store_table *));
  m->aSnap = calloc((size_t)n, sizeof(store_snap *));
  m->aCopy = calloc((size_t)n, sizeof(store_table *));
  if (!m->aTab || !m->aSnap || !m->aCopy)
    e = -12;
  else
    e = vt_visible_members(t, m->aTab, m->aSnap, pzErr);
  for (int k = 0; e == 0 && k < n; k++) {
    if (m->aSnap[k]) continue;
    m->aCopy[k] = store_table_clone(m->aTab[k]);
    if (!m->aCopy[k]) e = -12;
    m->aTab[k] = m->aCopy[k];
  }
  if (e) members_close(m);
  return e;
}

/* xSample of pl_tabinfo: filter program pProg over a few row groups of
** table pArg (a vt_tab), spread over its first member, for the join
** planner's estimates. Rows buffered by the connection and not yet
** written are not in the sample. */
#define SAMPLE_RG 2
static int q_sample(void *pArg, const uint8_t *pProg, size_t nProg, uint64_t *pnIn,
                    uint64_t *pnOut) {
  vt_tab *t = pArg;
  uint64_t key =
      csq_prog_id(pProg, nProg) ^ csq_mix64(t->nWrite) ^ csq_mix64(~(uint64_t)t->nRowEst);
  for (int i = 0; i < VT_SAMPLES; i++)
    if (t->aSample[i].key == key && key) {
      *pnIn = t->aSample[i].nIn;
      *pnOut = t->aSample[i].nOut;
      return 0;
    }
  q_members m = {0, NULL, NULL, NULL};
  char *zErr = NULL;
  *pnIn = *pnOut = 0;
  int e = members_open(t, &m, &zErr);
  store_table *pTab = e == 0 ? m.aTab[0] : NULL;
  if (pTab && pTab->nRg > 0) {
    store_rg *apRg[SAMPLE_RG];
    int nRg = 0;
    for (int i = 0; i < SAMPLE_RG; i++) {
      store_rg *rg = pTab->apRg[(size_t)pTab->nRg * (2 * (size_t)i + 1) / (2 * SAMPLE_RG)];
      if (nRg == 0 || apRg[nRg - 1] != rg) apRg[nRg++] = rg;
    }
    dev_scan *sc = NULL;
    csq_vec v;
    csq_vec_init(&v);
    e = dev_scan_open(t->apMem[0]->pQ, t->apMem[0]->pStore, pTab, apRg, nRg, pProg, nProg, &sc,
                      &zErr);
    while (e == 0) {
      uint32_t nRow = 0;
      e = dev_scan_next(sc, &v, &nRow, &zErr);
      if (e || nRow == 0) break;
      *pnOut += nRow;
    }
    dev_scan_close(sc);
    csq_vec_free(&v);
    for (int i = 0; i < nRg; i++) *pnIn += apRg[i]->nRow - apRg[i]->nDel;
  } else if (pTab)
    e = 1;
  members_close(&m);
  free(zErr);
  if (e == 0) {
    t->aSample[t->iSample].key = key;
    t->aSample[t->iSample].nIn = *pnIn;
    t->aSample[t->iSample].nOut = *pnOut;
    t->iSample = (t->iSample + 1) % VT_SAMPLES;
  }
  return e;
}

static int q_lookup_table(void *pArg, const char *zDb, const char *zTable, pl_tabinfo *pInfo) {
  q_lookup *l = pArg;
  if (!find_tab(l->pConn, zDb, zTable)) {
    /* not used by this connection yet: preparing a statement connects it */
    char *zSql = zDb ? sqlite3_mprintf("SELECT 1 FROM \"%w\".\"%w\"", zDb, zTable)
                     : sqlite3_mprintf("SELECT 1 FROM \"%w\"", zTable);
    sqlite3_stmt *pStmt = NULL;
    if (zSql) sqlite3_prepare_v2(l->pConn->db, zSql, -1, &pStmt, NULL);
    sqlite3_finalize(pStmt);
    sqlite3_free(zSql);
  }
  for (vt_tab *t = l->pConn->pTabs; t; t = t->pNextTab) {
    if (sqlite3_stricmp(t->zName, zTable) != 0) continue;
    if (zDb && sqlite3_stricmp(t->zDb, zDb) != 0) continue;
    /* the join planner copies what it keeps before the next lookup */
    sqlite3_free(l->azCol);
    sqlite3_free(l->aAff);
    sqlite3_free(l->aColl);
    l->azCol = sqlite3_malloc64(sizeof(char *) * (size_t)t->s.nCol);
    l->aAff = sqlite3_malloc64((size_t)t->s.nCol + 1);
    l->aColl = sqlite3_malloc64((size_t)t->s.nCol + 1);
    if (!l->azCol || !l->aAff || !l->aColl) return 1;
    for (int i = 0; i < t->s.nCol; i++) {
      l->azCol[i] = t->s.aCol[i].zName;
      l->aAff[i] = t->s.aCol[i].aff;
      l->aColl[i] = (char)t->s.aCol[i].bColl;
    }
    pInfo->aColl = l->aColl;
    pInfo->xBpf = q_bpf;
    pInfo->pBpfArg = l->pConn;
    pInfo->xSample = q_sample;
    pInfo->pSampleArg = t;
    pInfo->nCol = t->s.nCol;
    pInfo->azCol = l->azCol;
    pInfo->aAff = l->aAff;
    pInfo->iIpk = t->s.iIpk;
    /* what the cost model weighs (planner/split.h) */
    pInfo->ePush = t->s.ePush;
    pInfo->nRows = t->nRowEst;
    pInfo->nEngines = -1;
    for (int k = 0; k < t->nMem; k++) {
      const csq_id_vs *caps = dev_caps(t->apMem[k]->pDev);
      int n = caps && caps->magic == CSQ_ID_MAGIC ? (int)caps->n_engines : 0;
      if (pInfo->nEngines < 0 || n < pInfo->nEngines) pInfo->nEngines = n;
    }
    l->pFound = t;
    if (l->nFound < PL_JOIN_MAX_TAB) l->apFound[l->nFound++] = t;
    return 0;
  }
  return 1;
}

/* pl_coll_fn: the collation column iCol of a csq table declares. */
static const char *q_coll(void *pArg, const char *zDb, const char *zTable, int iCol) {
  q_lookup *l = pArg;
  vt_tab *t = find_tab(l->pConn, zDb, zTable);
  if (!t || iCol < 0 || iCol >= t->s.nCol) return NULL;
  const char *zColl = NULL;
  if (sqlite3_table_column_metadata(l->pConn->db, zDb ? zDb : t->zDb, zTable, t->s.aCol[iCol].zName,
                                    NULL, &zColl, NULL, NULL, NULL) != SQLITE_OK)
    return NULL;
  return zColl;
}

static void q_lookup_free(q_lookup *l) {
  sqlite3_free(l->azCol);
  sqlite3_free(l->aAff);
  sqlite3_free(l->aColl);
  l->azCol = NULL;
  l->aAff = l->aColl = NULL;
}

/* The device part over a striped table: one scan per member, all in
** flight at once so that every device works in parallel; their partial
** rows are merged as they arrive, in turn, into one result (merging
** partials of different devices is the same operation as merging those of
** different row groups). Errors as dev_agg_scan's. */
static int agg_members(vt_tab *t, dev_agg *pAgg, const pl_plan *plan, store_table **aTab,
                       char **pzErr) {
  int n = t->nMem, nPart = dev_agg_npartial(pAgg), e = 0;
  dev_scan **apScan = calloc((size_t)n, sizeof(dev_scan *));
  csq_vec *aV = calloc((size_t)nPart, sizeof(csq_vec));
  if (!apScan || !aV) e = -12;
  for (int k = 0; e == 0 && k < n; k++)
    e = dev_scan_open(t->apMem[k]->pQ, t->apMem[k]->pStore, aTab[k], aTab[k]->apRg, aTab[k]->nRg,
                      plan->pProg, plan->nProg, &apScan[k], pzErr);
  for (int nLive = n, k = 0; e == 0 && nLive > 0; k = (k + 1) % n) {
    if (!apScan[k]) continue;
    uint32_t nRow = 0;
    e = dev_scan_next(apScan[k], aV, &nRow, pzErr);
    if (e && dev_scan_fault(apScan[k]) == CSQ_FAULT_NOT_NUMERIC) e = -33; /* -EDOM */
    if (e == 0 && nRow == 0) {
      dev_scan_close(apScan[k]);
      apScan[k] = NULL;
      nLive--;
    } else if (e == 0) {
      e = dev_agg_add(pAgg, aV, nRow, pzErr);
    }
  }
  for (int k = 0; apScan && k < n; k++) dev_scan_close(apScan[k]);
  for (int c = 0; aV && c < nPart; c++) csq_vec_free(&aV[c]);
  free(aV);
  free(apScan);
  return e;
}

/* A row plan (pl_plan.bRows): the matching rows of every member, appended
** to c->rows as they come. 0, a negative errno with *pzErr, or -EDOM when
** more than an eighth of the table matches: collecting the rows then costs
** more than the table's own scan streaming them to SQLite, which filters
** them (the caller runs the query as ordinary SQL). */
static int rows_members(q_cursor *c, vt_tab *t, const pl_plan *plan, store_table **aTab,
                        char **pzErr) {
  int nCol = plan->nKey + plan->nAgg, e = 0;
  csq_vec *aV = calloc((size_t)nCol, sizeof(csq_vec));
  c->rows.aCol = sqlite3_malloc64(sizeof(csq_vec) * (size_t)nCol);
  if (!aV || !c->rows.aCol) {
    free(aV);
    return -12;
  }
  c->rows.nCol = nCol;
  for (int i = 0; i < nCol; i++) csq_vec_init(&c->rows.aCol[i]);
  int64_t nMax = t->nRowEst / 8 > 65536 ? t->nRowEst / 8 : 65536;
  if (nMax > UINT32_MAX) nMax = UINT32_MAX;
  for (int k = 0; e == 0 && k < t->nMem; k++) {
    dev_scan *s = NULL;
    e = dev_scan_open(t->apMem[k]->pQ, t->apMem[k]->pStore, aTab[k], aTab[k]->apRg, aTab[k]->nRg,
                      plan->pProg, plan->nProg, &s, pzErr);
    while (e == 0) {
      uint32_t nRow = 0;
      e = dev_scan_next(s, aV, &nRow, pzErr);
      if (e || nRow == 0) break;
      if ((int64_t)c->rows.nRow + nRow > nMax) {
        e = -33; /* -EDOM: too many rows to be worth collecting */
        break;
      }
      for (int i = 0; e == 0 && i < nCol; i++)
        e = csq_vec_append(&c->rows.aCol[i], &aV[i], 0, nRow);
      c->rows.nRow += nRow;
    }
    dev_scan_close(s);
  }
  for (int i = 0; i < nCol; i++) csq_vec_free(&aV[i]);
  free(aV);
  return e;
}

/* The merged groups of pAgg into *r (empty: its columns are allocated
** here). 0, or a negative errno with *pzErr (malloc'd). */
static int agg_rows(dev_agg *pAgg, vt_rowset *r, char **pzErr) {
  int n = dev_agg_ncol(pAgg);
  r->aCol = sqlite3_malloc64(sizeof(csq_vec) * (size_t)n);
  if (!r->aCol) return -12;
  r->nCol = n;
  for (int i = 0; i < n; i++) csq_vec_init(&r->aCol[i]);
  return dev_agg_finish(pAgg, r->aCol, &r->nRow, pzErr);
}

/* count(DISTINCT x) (pl_plan.pRegroup): the merged rows r, the keys and
** x, grouped again by the keys in csq's host engine, replace r. 0, or a
** negative errno with *pzErr (malloc'd) and r unchanged. */
static int regroup_rows(const pl_plan *plan, vt_rowset *r, char **pzErr) {
  if (!plan->pRegroup) return 0;
  int nChunk = 1 + r->nCol, e = 0;
  const csq_vec **apChunk = malloc(sizeof(csq_vec *) * (size_t)nChunk);
  dev_agg *pAgg = NULL;
  vt_rowset out = {0, NULL, 0, NULL, NULL};
  if (!apChunk) return -12;
  apChunk[0] = NULL;
  for (int i = 1; i < nChunk; i++) apChunk[i] = &r->aCol[i - 1];
  e = dev_agg_new(plan->pRegroup, plan->nRegroup, &pAgg, pzErr);
  if (e == 0 && r->nRow) e = dev_agg_rows(pAgg, apChunk, nChunk, 0, r->nRow, pzErr);
  if (e == 0) e = agg_rows(pAgg, &out, pzErr);
  if (e == 0) {
    vt_rowset_clear(r);
    *r = out;
  } else if (out.aCol) {
    vt_rowset_clear(&out);
  }
  dev_agg_free(pAgg);
  free(apChunk);
  return e;
}

/* Run the device part of a plan: filter, group and partial aggregates over
** the table's visible row groups, merged into c->rows. Returns SQLITE_OK,
** an error, or SQLITE_MISMATCH when the device met values it cannot
** compute on (the caller then runs the query as ordinary SQL). */
static int run_device(q_cursor *c, q_tab *p, vt_tab *t, const pl_plan *plan) {
  int rc = vt_flush(t);
  if (rc) return rc;
  int n = t->nMem;
  q_members m = {0, NULL, NULL, NULL};
  char *zErr = NULL;
  dev_agg *pAgg = NULL;
  int e = members_open(t, &m, &zErr);
  store_table **aTab = m.aTab;
  if (e == 0 && plan->bRows)
    e = rows_members(c, t, plan, aTab, &zErr);
  else if (e == 0)
    e = dev_agg_new(plan->pProg, plan->nProg, &pAgg, &zErr);
  if (e == 0 && plan->bRows) {
    /* the rows are in c->rows */
  } else if (e == 0 && n == 1)
    e = dev_agg_scan(pAgg, t->pDev->pQ, t->pDev->pStore, aTab[0], aTab[0]->apRg, aTab[0]->nRg,
                     &zErr);
  else if (e == 0)
    e = agg_members(t, pAgg, plan, aTab, &zErr);
  if (e == 0 && !plan->bRows) e = agg_rows(pAgg, &c->rows, &zErr);
  if (e == 0 && !plan->bRows) e = regroup_rows(plan, &c->rows, &zErr);
  dev_agg_free(pAgg);
  members_close(&m);
  if (e == -33 /* -EDOM: text where the device needs numbers, or too many rows */) {
    free(zErr);
    vt_rowset_clear(&c->rows);
    return SQLITE_MISMATCH;
  }
  if (e) {
    sqlite3_free(p->base.zErrMsg);
    p->base.zErrMsg = sqlite3_mprintf("%s", zErr ? zErr : "csq: the device part failed");
    free(zErr);
    return e == -34 /* -ERANGE: integer overflow, SQLite's own error */ ? SQLITE_ERROR
                                                                        : vt_rc_from(e < 0 ? e
                                                                                           : -5);
  }
  return SQLITE_OK;
}

static int join_agg_outer(q_tab *p, const pl_join *j, const pl_plan *plan, char **pzOuter);

/* Prepare zSql over row set pRows (parameter iRows) into *ppStmt, with
** the values aVal[0..nVal) bound where given. */
static int rows_stmt(sqlite3 *db, const char *zSql, sqlite3_value **aVal, int nVal, int iRows,
                     vt_rowset *pRows, sqlite3_stmt **ppStmt) {
  int rc = sqlite3_prepare_v2(db, zSql, -1, ppStmt, NULL);
  for (int k = 0; rc == SQLITE_OK && k < nVal; k++)
    if (aVal[k]) rc = sqlite3_bind_value(*ppStmt, k + 1, aVal[k]);
  if (rc == SQLITE_OK) rc = sqlite3_bind_pointer(*ppStmt, iRows, pRows, "csq_rowset", NULL);
  return rc;
}

/* Prepare the host part zSql over c->rows (parameter iRows) with the
** values aAll[0..nAll) bound where given: SQLITE_OK, or an error with
** the vtab's message set. */
static int host_stmt(q_cursor *c, q_tab *p, const char *zSql, sqlite3_value **aAll, int nAll,
                     int iRows) {
  int rc = rows_stmt(p->db, zSql, aAll, nAll, iRows, &c->rows, &c->pStmt);
  if (rc) {
    sqlite3_free(p->base.zErrMsg);
    p->base.zErrMsg = sqlite3_mprintf("csq_query: host part failed: %s", sqlite3_errmsg(p->db));
  }
  return rc;
}

/* The joined rows' first JAGG_SAMPLE rows are grouped first: unless their
** groups are fewer than a JAGG_MIN_SHRINK-th of them, the rest is left to
** SQLite (see run_join_agg). */
#define JAGG_SAMPLE     4096
#define JAGG_MIN_SHRINK 4

/* The host part of join j as a grouped program over its joined rows, in
** csq's host engine (planner/joinagg.h): SQLITE_OK with *pbDone 1, c->rows
** the merged groups and c->pStmt SQLite's part over them; SQLITE_OK with
** *pbDone 0 when the host part is not one split.c splits, or the engine
** met what SQLite decides by its own row order (text in a sum, a sum that
** may overflow) or failed otherwise: the caller then runs j->zHost over
** the joined rows; else an error (a sum that overflows, as SQLite's).
** apValue: the bound values of j's scalar subqueries; pPlan: the host
** part already planned over the joined rows (pl_join_agg_plan; owned from
** here), or NULL. */
static int run_join_agg(q_cursor *c, q_tab *p, const pl_join *j, sqlite3_value **aParam, int nParam,
                        sqlite3_value **apValue, pl_plan *pPlan, int *pbDone) {
  *pbDone = 0;
  int nAll = j->iRows + j->nValue, nChunk = PL_JAGG_NCHUNK(c->rows.nCol);
  sqlite3_value **aAll = sqlite3_malloc64(sizeof(sqlite3_value *) * (size_t)nAll);
  const csq_vec **apChunk = sqlite3_malloc64(sizeof(csq_vec *) * (size_t)nChunk);
  pl_plan *plan = pPlan;
  dev_agg *pAgg = NULL;
  char *zErr = NULL;
  vt_rowset merged = {0, NULL, 0, NULL, NULL};
  char *zOuter = NULL;
  int rc = aAll && apChunk ? SQLITE_OK : SQLITE_NOMEM, e = 0;
  for (int k = 0; rc == SQLITE_OK && k < nAll; k++)
    aAll[k] = k < nParam && k != j->iRows - 1 ? aParam[k]
              : k >= j->iRows                 ? apValue[k - j->iRows]
                                              : NULL;
  if (rc == SQLITE_OK && !plan) rc = pl_join_agg_plan(p->db, j, aAll, nAll, &plan);
  if (rc || !plan->bPush || plan->bRows || c->rows.nCol < 1) goto done;
  apChunk[0] = NULL;
  for (int i = 1; i < nChunk; i++) apChunk[i] = &c->rows.aCol[PL_JAGG_COL(c->rows.nCol, i)];
  e = dev_agg_new(plan->pProg, plan->nProg, &pAgg, &zErr);
  uint32_t nRow = plan->bEmpty ? 0 : c->rows.nRow, nHead = nRow < JAGG_SAMPLE ? nRow : JAGG_SAMPLE;
  if (e == 0 && nHead) e = dev_agg_rows(pAgg, apChunk, nChunk, 0, nHead, &zErr);
  /* nearly a group per row: grouping twice (engine, merge) costs more than
  ** SQLite's grouping of the rows served group by group (csq_jrows) */
  if (e == 0 && nRow > nHead && dev_agg_ngroups(pAgg) > nHead / JAGG_MIN_SHRINK && !j->bPreGroup)
    goto done;
  if (e == 0 && nRow > nHead) e = dev_agg_rows(pAgg, apChunk, nChunk, nHead, nRow - nHead, &zErr);
  if (e == 0) e = agg_rows(pAgg, &merged, &zErr);
  if (e == 0) e = regroup_rows(plan, &merged, &zErr);
  /* an overflowing sum is SQLite's own error; anything else the engine
  ** could not do (text in a sum, no memory for its groups) SQLite may
  ** still do over the joined rows */
  if (e && e != -34 /* -ERANGE */) goto done;
  if (e) {
    sqlite3_free(p->base.zErrMsg);
    p->base.zErrMsg = sqlite3_mprintf("%s", zErr ? zErr : "integer overflow");
    rc = SQLITE_ERROR;
    goto done;
  }
  if (j->zInner) {
    rc = join_agg_outer(p, j, plan, &zOuter);
    if (rc || !zOuter) goto done; /* SQLite groups the joined rows */
  }
  vt_rowset_clear(&c->rows);
  c->rows = merged;
  merged.aCol = NULL;
  rc = host_stmt(c, p, zOuter ? zOuter : plan->zHost, aAll, nAll, plan->iRows);
  if (rc == SQLITE_OK) *pbDone = 1;
done:
  if (merged.aCol) vt_rowset_clear(&merged);
  sqlite3_free(zOuter);
  free(zErr);
  dev_agg_free(pAgg);
  pl_plan_free(plan);
  sqlite3_free(aAll);
  sqlite3_free(apChunk);
  return rc;
}

/* Join j as a star grouped on its probe side's devices (planner/star.h),
** the build sides' rows in aData: SQLITE_OK with *pbDone 1, c->rows the
** decoded groups and c->pStmt the host part's SQL over them; SQLITE_OK with
** *pbDone 0 when j is no star or the device met what SQLite decides by its
** own row order (the hash join then runs, *ppPlan the host part planned
** over the joined rows, for run_join_agg); else an error. */
static int run_star(q_cursor *c, q_tab *p, const pl_join *j, vt_tab **apTab, const pl_jdata *aData,
                    sqlite3_value **aParam, int nParam, pl_plan **ppPlan, int *pbDone) {
  *pbDone = 0;
  int nAll = j->iRows;
  sqlite3_value **aAll = sqlite3_malloc64(sizeof(sqlite3_value *) * (size_t)nAll);
  pl_plan *plan = NULL;
  pl_star s;
  memset(&s, 0, sizeof(s));
  int rc = aAll ? SQLITE_OK : SQLITE_NOMEM, e = 1;
  for (int k = 0; rc == SQLITE_OK && k < nAll; k++)
    aAll[k] = k < nParam && k != j->iRows - 1 ? aParam[k] : NULL;
  if (rc == SQLITE_OK) rc = pl_join_agg_plan(p->db, j, aAll, nAll, &plan);
  if (rc == SQLITE_OK) e = pl_star_build(j, aData, plan, &s);
  if (e < 0) rc = SQLITE_NOMEM;
  if (rc || e) goto done;
  pl_plan dev;
  memset(&dev, 0, sizeof(dev));
  dev.bPush = 1;
  dev.pProg = s.pProg;
  dev.nProg = s.nProg;
  rc = run_device(c, p, apTab[j->aOrder[0]], &dev);
  if (rc == SQLITE_MISMATCH) rc = SQLITE_OK; /* text in a sum: the hash join and SQLite */
  if (rc || !c->rows.aCol) goto done;
  if (pl_star_decode(&s, c->rows.aCol, c->rows.nCol, &c->rows.nRow)) rc = SQLITE_NOMEM;
  if (rc == SQLITE_OK) {
    char *zErr = NULL;
    int e2 = regroup_rows(plan, &c->rows, &zErr);
    if (e2 == -33 /* -EDOM: a sum SQLite's row order decides */) {
      free(zErr);
      vt_rowset_clear(&c->rows);
      goto done; /* the hash join, then SQLite */
    }
    if (e2) {
      sqlite3_free(p->base.zErrMsg);
      p->base.zErrMsg = sqlite3_mprintf("%s", zErr ? zErr : "csq: regrouping failed");
      rc = e2 == -12 ? SQLITE_NOMEM : SQLITE_ERROR;
    }
    free(zErr);
  }
  if (rc == SQLITE_OK) rc = host_stmt(c, p, plan->zHost, aAll, nAll, plan->iRows);
  if (rc) {
    sqlite3_finalize(c->pStmt);
    c->pStmt = NULL;
    vt_rowset_clear(&c->rows);
  } else {
    *pbDone = 1;
    p->pConn->nStarJoins++;
  }
done:
  pl_star_clear(&s);
  if (rc == SQLITE_OK && !*pbDone) { /* the hash join's grouping plans the same */
    *ppPlan = plan;
    plan = NULL;
  }
  pl_plan_free(plan);
  sqlite3_free(aAll);
  return rc;
}

/* Scan table t with program pProg (nOut outputs) on every member device,
** handing each batch of rows to xBatch(pArg, batch) as it comes (the batch's
** vectors are reused for the next one). Returns 0, a negative errno with
** *pzErr (malloc'd), or what xBatch returned. */
static int scan_batches(vt_tab *t, const uint8_t *pProg, size_t nProg, int nOut,
                        int (*xBatch)(void *, const pl_jdata *), void *pArg, char **pzErr) {
  int rc = vt_flush(t);
  if (rc) return rc == SQLITE_NOMEM ? -12 : -5;
  int n = t->nMem;
  q_members m = {0, NULL, NULL, NULL};
  csq_vec *aV = calloc((size_t)(nOut ? nOut : 1), sizeof(csq_vec));
  int e = aV ? members_open(t, &m, pzErr) : -12;
  store_table **aTab = e == 0 ? m.aTab : NULL;
  for (int k = 0; e == 0 && k < n; k++) {
    dev_scan *sc = NULL;
    e = dev_scan_open(t->apMem[k]->pQ, t->apMem[k]->pStore, aTab[k], aTab[k]->apRg, aTab[k]->nRg,
                      pProg, nProg, &sc, pzErr);
    while (e == 0) {
      pl_jdata d = {aV, nOut, 0};
      e = dev_scan_next(sc, aV, &d.nRow, pzErr);
      if (e || d.nRow == 0) break;
      e = xBatch(pArg, &d);
    }
    dev_scan_close(sc);
  }
  for (int i = 0; aV && i < nOut; i++) csq_vec_free(&aV[i]);
  free(aV);
  members_close(&m);
  return e;
}

/* xBatch of a build side: append the batch to the table's rows; -E2BIG
** past the memory budget *(uint64_t *)... (see collect). */
typedef struct collect {
  pl_jdata *d;
  uint64_t *pnBytes; /* bytes held by the build sides so far */
  uint64_t nBudget;
} collect;

static int collect_batch(void *pArg, const pl_jdata *b) {
  collect *x = pArg;
  pl_jdata *d = x->d;
  if ((uint64_t)d->nRow + b->nRow > UINT32_MAX) return -7; /* -E2BIG */
  uint64_t nBefore = pl_jdata_bytes(d);
  for (int i = 0; i < d->nCol; i++) {
    int e = csq_vec_append(&d->aCol[i], &b->aCol[i], 0, b->nRow);
    if (e) return e;
  }
  d->nRow += b->nRow;
  *x->pnBytes += pl_jdata_bytes(d) - nBefore;
  return *x->pnBytes > x->nBudget ? -7 : 0;
}

/* xBatch of the probe side: join the batch, append to the row set. */
typedef struct probe_ctx {
  pl_hj *h;
  vt_rowset *pRows;
} probe_ctx;

static int probe_batch(void *pArg, const pl_jdata *b) {
  probe_ctx *x = pArg;
  return pl_hj_probe(x->h, b, x->pRows->aCol, &x->pRows->nRow);
}

static void free_jdata(pl_jdata *d) {
  for (int i = 0; d->aCol && i < d->nCol; i++) csq_vec_free(&d->aCol[i]);
  free(d->aCol);
  memset(d, 0, sizeof(*d));
}

/* Bytes a join's build sides may hold: the connection's probe copy budget
** (csq_probe_memory), the same memory a nested-loop probe would take. */
static uint64_t join_budget(q_tab *p) {
  return p->pConn->nProbeCopy;
}

/* Table t's program with the join filters of the tables read before it
** (planner/joinfilter.h) in *pp (malloc'd), or NULL when there are none. */
static void join_program(pl_join *j, int t, const pl_jdata *aData, uint8_t **pp, size_t *pn) {
  int nFilter = 0;
  int eJf = pl_join_filter_program(j, t, aData, pp, pn, &nFilter);
  if (eJf != 0 || !nFilter) {
    free(*pp);
    *pp = NULL;
  }
}

/* Scan subquery table iTab (t) of j, its program given a join filter of
** the keys of the joined rows aRow (row-set columns aKeyCol, which its
** outputs aKeyOut equal), each batch to xBatch. As scan_batches. */
static int scan_sub(vt_tab *t, pl_join *j, int iTab, int nKey, const int *aKeyOut,
                    const int *aKeyCol, const csq_vec *aRow,
                    int (*xBatch)(void *, const pl_jdata *), void *pArg, char **pzErr) {
  const pl_jtab *jt = &j->aTab[iTab];
  uint8_t *pFiltered = NULL;
  size_t nFiltered = 0;
  int nFilter = 0;
  if (pl_join_filter_sub(j, iTab, nKey, aKeyOut, aKeyCol, aRow, &pFiltered, &nFiltered, &nFilter) !=
      0) {
    free(pFiltered);
    pFiltered = NULL;
  }
  int e = scan_batches(t, pFiltered ? pFiltered : jt->pProg, pFiltered ? nFiltered : jt->nProg,
                       jt->nOut, xBatch, pArg, pzErr);
  free(pFiltered);
  return e;
}

/* xBatch of a semi-join's table: mark the joined rows its rows match. */
static int semi_batch(void *pArg, const pl_jdata *b) {
  return pl_semi_mark((pl_semi *)pArg, b);
}

/* Apply semi-join iSemi (table t) to the joined rows in c->rows: scan t
** with a join filter of their keys, mark, keep. 0 or a negative errno. */
static int run_semi(pl_join *j, int iSemi, vt_tab *t, q_cursor *c, char **pzErr) {
  const pl_jsemi *q = &j->aSemi[iSemi];
  const pl_jtab *jt = &j->aTab[q->iTab];
  vt_rowset *r = &c->rows;
  if (r->nRow == 0) return 0;
  pl_semi *h = NULL;
  int e = pl_semi_new(j, iSemi, r->aCol, r->nRow, &h);
  if (e == 0 && !jt->bEmpty)
    e = scan_sub(t, j, q->iTab, q->nKey, q->aKeyOut, q->aKeyCol, r->aCol, semi_batch, h, pzErr);
  if (e == 0) e = pl_semi_keep(h, r->aCol, r->nCol, &r->nRow);
  pl_semi_free(h);
  return e;
}

/* Append pStmt's current row, columns 0..nOut, to aOut[]: SQLITE_OK or
** SQLITE_NOMEM. */
static int push_row(sqlite3_stmt *pStmt, csq_vec *aOut, int nOut) {
  int rc = SQLITE_OK;
  for (int k = 0; rc == SQLITE_OK && k < nOut; k++) {
    sqlite3_value *v = sqlite3_column_value(pStmt, k);
    int e;
    switch (sqlite3_value_type(v)) {
    case SQLITE_INTEGER:
      e = csq_vec_push_int(&aOut[k], sqlite3_value_int64(v));
      break;
    case SQLITE_FLOAT:
      e = csq_vec_push_real(&aOut[k], sqlite3_value_double(v));
      break;
    case SQLITE_TEXT:
      e = csq_vec_push_bytes(&aOut[k], CSQ_TEXT, sqlite3_value_text(v),
                             (uint32_t)sqlite3_value_bytes(v));
      break;
    case SQLITE_BLOB:
      e = csq_vec_push_bytes(&aOut[k], CSQ_BLOB, sqlite3_value_blob(v),
                             (uint32_t)sqlite3_value_bytes(v));
      break;
    default:
      e = csq_vec_push_null(&aOut[k]);
    }
    if (e) rc = SQLITE_NOMEM;
  }
  return rc;
}

/* The rows of SQL zSql over the row set r (csq_jrows(?1), when zSql reads
** it): their first nOut columns appended to aOut. SQLITE_OK or SQLite's
** error (*pzErr). */
static int rows_of(sqlite3 *db, const char *zSql, vt_rowset *r, csq_vec *aOut, int nOut,
                   char **pzErr) {
  sqlite3_stmt *pStmt = NULL;
  int rc = sqlite3_prepare_v2(db, zSql, -1, &pStmt, NULL);
  if (rc == SQLITE_OK && sqlite3_bind_parameter_count(pStmt) > 0)
    rc = sqlite3_bind_pointer(pStmt, 1, r, "csq_rowset", NULL);
  while (rc == SQLITE_OK && (rc = sqlite3_step(pStmt)) == SQLITE_ROW)
    rc = push_row(pStmt, aOut, nOut);
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  if (rc != SQLITE_OK && !*pzErr) {
    const char *z = sqlite3_errmsg(db);
    size_t n = strlen(z) + 64;
    if ((*pzErr = malloc(n))) snprintf(*pzErr, n, "csq_query: a subquery's groups failed: %s", z);
  }
  sqlite3_finalize(pStmt);
  return rc;
}

/* The end of a scalar subquery's fill: with its groups in aG (keys, then
** the value; freed here) and e so far, the value over no rows from zEmpty
** (over pSub, if it reads one), then each joined row's value into its
** row-set column. eFail is the error when zEmpty fails. */
static int scalar_fill(q_tab *p, pl_join *j, int iScalar, vt_rowset *pSub, csq_vec *aG, int eFail,
                       int e, q_cursor *c, char **pzErr) {
  const pl_jscalar *q = &j->aScalar[iScalar];
  vt_rowset *r = &c->rows;
  csq_vec vEmpty;
  csq_vec_init(&vEmpty);
  if (e == 0 && rows_of(p->db, q->zEmpty, pSub, &vEmpty, 1, pzErr)) e = eFail;
  if (e == 0 && vEmpty.n != 1) e = eFail;
  if (e == 0)
    e = pl_scalar_fill(j, iScalar, aG, &aG[q->nKey], aG[0].n, &vEmpty, r->aCol, r->nRow,
                       &r->aCol[q->iCol]);
  for (int k = 0; k <= q->nKey; k++) csq_vec_free(&aG[k]);
  csq_vec_free(&vEmpty);
  return e;
}

/* Fill scalar subquery iScalar's row-set column (table t): scan t with a
** join filter of the joined rows' keys, let SQLite group its rows, and give
** each joined row its group's value. 0 or a negative errno; -E2BIG when
** t's rows pass the build sides' budget (the query then runs as SQL). */
static int run_scalar(q_tab *p, pl_join *j, int iScalar, vt_tab *t, q_cursor *c, char **pzErr) {
  const pl_jscalar *q = &j->aScalar[iScalar];
  const pl_jtab *jt = &j->aTab[q->iTab];
  vt_rowset *r = &c->rows;
  csq_vec aG[PL_JOIN_MAX_KEY + 1];
  for (int k = 0; k <= q->nKey; k++) csq_vec_init(&aG[k]);
  int e = 0;
  pl_jdata d = {calloc((size_t)(jt->nOut ? jt->nOut : 1), sizeof(csq_vec)), jt->nOut, 0};
  if (!d.aCol) e = -12;
  uint64_t nBytes = 0;
  collect x = {&d, &nBytes, join_budget(p)};
  if (e == 0 && r->nRow > 0 && !jt->bEmpty)
    e = scan_sub(t, j, q->iTab, q->nKey, q->aKeyOut, q->aKeyCol, r->aCol, collect_batch, &x, pzErr);
  vt_rowset sRows = {d.nCol, d.aCol, d.nRow, NULL, NULL}; /* csq_jrows' view (d owns them) */
  if (e == 0 && sRows.nRow > 0 && rows_of(p->db, q->zGroup, &sRows, aG, q->nKey + 1, pzErr)) e = -5;
  e = scalar_fill(p, j, iScalar, &sRows, aG, -5, e, c, pzErr);
  vt_rowset_clear_order(&sRows);
  free_jdata(&d);
  return e;
}

static int run_query(q_cursor *c, q_tab *p, sqlite3_value **aParam, int nParam);

/* Subquery zSql[0..nSql) run as a query of its own through the planner,
** xRow(pCtx, pStmt) given each row until it returns non-zero. SQLite's
** result code. */
static int run_sub(q_tab *p, const char *zSql, int nSql, int (*xRow)(void *, sqlite3_stmt *),
                   void *pCtx) {
  q_tab sub;
  memset(&sub, 0, sizeof(sub));
  sub.db = p->db;
  sub.pConn = p->pConn;
  sub.zSql = sqlite3_mprintf("%.*s", nSql, zSql);
  sub.nCol = 1;
  if (!sub.zSql) return SQLITE_NOMEM;
  q_cursor c;
  memset(&c, 0, sizeof(c));
  c.bEof = 1;
  int rc = run_query(&c, &sub, NULL, 0);
  for (rc = rc ? rc : q_step(&c, &sub); rc == SQLITE_OK && !c.bEof; rc = q_step(&c, &sub))
    if (xRow(pCtx, c.pStmt)) break;
  q_reset(&c);
  sqlite3_free(sub.base.zErrMsg);
  sqlite3_free(sub.zSql);
  return rc;
}

typedef struct first_row {
  sqlite3_value *pVal;
  int bRow;
} first_row;

static int first_value(void *pCtx, sqlite3_stmt *pStmt) {
  first_row *x = pCtx;
  x->bRow = 1;
  x->pVal = sqlite3_value_dup(sqlite3_column_value(pStmt, 0));
  return 1;
}

/* The value of scalar subquery zSql (pl_join.azValue): its first row's
** first column into *ppVal (the caller frees), left NULL without a row.
** SQLite's error code when it fails; the caller then leaves the whole
** query to SQLite, which runs the subquery where it stands, only if it
** needs it, and says why. */
static int run_value(q_tab *p, const char *zSql, sqlite3_value **ppVal) {
  first_row x = {NULL, 0};
  int rc = run_sub(p, zSql, (int)strlen(zSql), first_value, &x);
  if (rc == SQLITE_OK && x.bRow && !x.pVal) rc = SQLITE_NOMEM;
  if (rc != SQLITE_OK) {
    sqlite3_value_free(x.pVal);
    x.pVal = NULL;
  }
  *ppVal = x.pVal;
  return rc;
}

/* The value of subquery i of join j over its joined rows c->rows
** (pl_join.azValueRows): SQLite runs the expression over them, the
** query's parameters bound as in the host part. */
static int rows_value(q_cursor *c, q_tab *p, const pl_join *j, int i, sqlite3_value **aParam,
                      int nParam, sqlite3_value **ppVal) {
  sqlite3_stmt *pStmt = NULL;
  *ppVal = NULL;
  int rc = rows_stmt(p->db, j->azValueRows[i], aParam, nParam, j->iRows, &c->rows, &pStmt);
  if (rc == SQLITE_OK) rc = sqlite3_step(pStmt);
  if (rc == SQLITE_ROW) {
    *ppVal = sqlite3_value_dup(sqlite3_column_value(pStmt, 0));
    rc = *ppVal ? SQLITE_OK : SQLITE_NOMEM;
  } else if (rc == SQLITE_DONE) {
    rc = SQLITE_OK; /* an aggregate gives a row; none, as no row: NULL */
  }
  sqlite3_finalize(pStmt);
  return rc;
}

/* Rows of a statement appended to vectors (run_sub's xRow). */
typedef struct push_rows {
  csq_vec *aOut;
  int nOut;
  int rc;
} push_rows;

static int push_rows_row(void *pCtx, sqlite3_stmt *pStmt) {
  push_rows *x = pCtx;
  x->rc = push_row(pStmt, x->aOut, x->nOut);
  return x->rc != SQLITE_OK;
}

/* Scalar subquery q over a join (one key) limited to the groups the
** joined rows can ask for: zGroup with "AND key IN (...)" of pKey's
** distinct values, when they are at most SCALAR_IN_MAX integers; else NULL
** (also on OOM: zGroup alone gives the same answer). Exact: the key column
** has numeric affinity, so IN compares as "=" does, and a row of another
** key only makes a group no joined row reads. (sqlite3_malloc'd) */
#define SCALAR_IN_MAX 4096
static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static char *scalar_key_filter(const pl_jscalar *q, const csq_vec *pKey) {
  if (!q->zKey || pKey->clsMask & ~((1u << CSQ_INT) | (1u << CSQ_NULL))) return NULL;
  int64_t *a = malloc(sizeof(int64_t) * (pKey->n ? pKey->n : 1));
  if (!a) return NULL;
  uint32_t n = 0;
  for (uint32_t i = 0; i < pKey->n; i++)
    if (pKey->aCls[i] == CSQ_INT) a[n++] = pKey->aVal[i].i;
  qsort(a, n, sizeof(int64_t), cmp_i64);
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; i++)
    if (m == 0 || a[i] != a[m - 1]) a[m++] = a[i];
  char *z = NULL;
  if (m > 0 && m <= SCALAR_IN_MAX) {
    sqlite3_str *pS = sqlite3_str_new(NULL);
    sqlite3_str_append(pS, q->zGroup, q->iGroupBy);
    sqlite3_str_appendf(pS, " %s (%s) IN (", q->bWhere ? "AND" : "WHERE", q->zKey);
    for (uint32_t i = 0; i < m; i++)
      sqlite3_str_appendf(pS, "%s%lld", i ? "," : "", (long long)a[i]);
    sqlite3_str_appendf(pS, ")%s", q->zGroup + q->iGroupBy);
    z = sqlite3_str_finish(pS);
  }
  free(a);
  return z;
}

/* Fill scalar subquery iScalar's row-set column when it reads a join
** (pl_jscalar, iTab -1): its decorrelated, grouped text runs as a query of
** its own through the planner, and each joined row takes its group's
** value, or the value over no rows. 0 or a negative errno; -EDOM when the
** subquery failed (the query then runs as SQL, where SQLite says why). */
static int run_scalar_join(q_tab *p, pl_join *j, int iScalar, q_cursor *c, char **pzErr) {
  const pl_jscalar *q = &j->aScalar[iScalar];
  vt_rowset *r = &c->rows;
  csq_vec aG[PL_JOIN_MAX_KEY + 1];
  for (int k = 0; k <= q->nKey; k++) csq_vec_init(&aG[k]);
  int e = 0;
  push_rows x = {aG, q->nKey + 1, SQLITE_OK};
  char *zIn = r->nRow > 0 ? scalar_key_filter(q, &r->aCol[q->aKeyCol[0]]) : NULL;
  if (r->nRow > 0) {
    const char *zSql = zIn ? zIn : q->zGroup;
    int rc = run_sub(p, zSql, (int)strlen(zSql), push_rows_row, &x);
    sqlite3_free(zIn);
    if (rc == SQLITE_OK) rc = x.rc;
    if (rc != SQLITE_OK) e = rc == SQLITE_NOMEM ? -12 : -33;
  }
  return scalar_fill(p, j, iScalar, NULL, aG, -33, e, c, pzErr);
}

/* Largest span of a key's integers its uniqueness is checked over (a
** bitmap of 8 MiB). */
#define KEY_GROUP_MAX_SPAN (1ull << 26)

/* 1 if j->zHostKey may run: its key's values in its table's rows aData
** are unique integers (planner/join.h). */
static int key_group_ok(const pl_join *j, const pl_jdata *aData) {
  if (!j->zHostKey || j->zInner) return 0;
  int t = j->iKeyTab;
  const pl_jtab *jt = &j->aTab[t];
  for (int o = 0; o < jt->nOut && o < aData[t].nCol && aData[t].aCol; o++) {
    if (jt->aRowCol[o] != j->iKeyCol) continue;
    int64_t lo;
    uint32_t nSpan;
    return pl_keys_unique(&aData[t].aCol[o], KEY_GROUP_MAX_SPAN, &lo, &nSpan) == 0;
  }
  return 0;
}

/* Run a join plan: every table's scan on its devices (build sides first,
** so a build side over the budget stops before the probe side is read),
** the hash joins, and SQLite's part over the joined rows. SQLITE_MISMATCH:
** the plan gave up (over budget, too many rows): run the query as SQL. */
static int run_join(q_cursor *c, q_tab *p, pl_join *j, vt_tab **apTab, sqlite3_value **aParam,
                    int nParam) {
  pl_jdata aData[PL_JOIN_MAX_TAB];
  memset(aData, 0, sizeof(aData));
  char *zErr = NULL;
  int e = 0, bEmpty = 0;
  uint64_t nBuild = 0;
  pl_hj *h = NULL;
  for (int t = 0; t < j->nTab; t++) bEmpty |= j->aTab[t].bEmpty && !j->aTab[t].bLeft;
  for (int s = 0; e == 0 && !bEmpty && s < j->nTab - 1; s++) {
    int t = j->aRead[s];
    const pl_jtab *jt = &j->aTab[t];
    aData[t].nCol = jt->nOut;
    aData[t].aCol = calloc((size_t)(jt->nOut ? jt->nOut : 1), sizeof(csq_vec));
    if (!aData[t].aCol) {
      e = -12;
      break;
    }
    if (jt->bLeft && jt->bEmpty) continue; /* no row matches: every row keeps NULLs */
    collect x = {&aData[t], &nBuild, join_budget(p)};
    uint8_t *pFiltered = NULL;
    size_t nFiltered = 0;
    join_program(j, t, aData, &pFiltered, &nFiltered);
    e = scan_batches(apTab[t], pFiltered ? pFiltered : jt->pProg, pFiltered ? nFiltered : jt->nProg,
                     jt->nOut, collect_batch, &x, &zErr);
    free(pFiltered);
    if (e == 0 && aData[t].nRow == 0 && !jt->bLeft) bEmpty = 1; /* an inner join with no rows */
  }
  pl_plan *pAggPlan = NULL; /* the host part over the joined rows, when planned already */
  if (e == 0 && !bEmpty && pl_star_shape(j)) {
    int bDone = 0, rc = run_star(c, p, j, apTab, aData, aParam, nParam, &pAggPlan, &bDone);
    if (rc || bDone) {
      for (int t = 0; t < j->nTab; t++) free_jdata(&aData[t]);
      return rc;
    }
  }
  if (e == 0) {
    c->rows.aCol = sqlite3_malloc64(sizeof(csq_vec) * (size_t)(j->nCol ? j->nCol : 1));
    if (!c->rows.aCol)
      e = -12;
    else {
      c->rows.nCol = j->nCol;
      for (int i = 0; i < j->nCol; i++) csq_vec_init(&c->rows.aCol[i]);
    }
  }
  if (e == 0 && !bEmpty) e = pl_hj_new(j, aData, &h);
  if (e == 0 && !bEmpty) {
    const pl_jtab *jt = &j->aTab[j->aOrder[0]];
    uint8_t *pFiltered = NULL;
    size_t nFiltered = 0;
    join_program(j, j->aOrder[0], aData, &pFiltered, &nFiltered);
    probe_ctx x = {h, &c->rows};
    e = scan_batches(apTab[j->aOrder[0]], pFiltered ? pFiltered : jt->pProg,
                     pFiltered ? nFiltered : jt->nProg, jt->nOut, probe_batch, &x, &zErr);
    free(pFiltered);
  }
  pl_hj_free(h);
  int bKeyGroup = e == 0 && !bEmpty && key_group_ok(j, aData);
  for (int t = 0; t < j->nTab; t++) free_jdata(&aData[t]);
  for (int i = 0; e == 0 && i < j->nSemi; i++)
    e = run_semi(j, i, apTab[j->aSemi[i].iTab], c, &zErr);
  for (int i = 0; e == 0 && i < j->nScalar; i++)
    e = j->aScalar[i].iTab < 0 ? run_scalar_join(p, j, i, c, &zErr)
                               : run_scalar(p, j, i, apTab[j->aScalar[i].iTab], c, &zErr);
  if (e) pl_plan_free(pAggPlan);
  if (e == -7 || e == -33) {
    free(zErr);
    vt_rowset_clear(&c->rows);
    return SQLITE_MISMATCH;
  }
  if (e) {
    vt_rowset_clear(&c->rows);
    sqlite3_free(p->base.zErrMsg);
    p->base.zErrMsg = sqlite3_mprintf("%s", zErr ? zErr : "csq: a join's device scan failed");
    free(zErr);
    return vt_rc_from(e < 0 ? e : -5);
  }
  sqlite3_value *apValue[PL_JOIN_MAX_VALUE] = {0};
  int rc = SQLITE_OK;
  for (int i = 0; rc == SQLITE_OK && i < j->nValue; i++)
    rc = j->azValueRows[i] ? rows_value(c, p, j, i, aParam, nParam, &apValue[i])
                           : run_value(p, j->azValue[i], &apValue[i]);
  if (rc != SQLITE_OK && rc != SQLITE_NOMEM) rc = SQLITE_MISMATCH;
  int bDone = 0;
  if (rc == SQLITE_OK)
    rc = run_join_agg(c, p, j, aParam, nParam, apValue, pAggPlan, &bDone);
  else
    pl_plan_free(pAggPlan);
  if (bDone || (rc != SQLITE_OK && rc != SQLITE_MISMATCH)) {
    for (int i = 0; i < j->nValue; i++) sqlite3_value_free(apValue[i]);
    if (rc) vt_rowset_clear(&c->rows);
    return rc;
  }
  if (rc == SQLITE_OK)
    rc = rows_stmt(p->db, bKeyGroup ? j->zHostKey : j->zHost, aParam, nParam, j->iRows, &c->rows,
                   &c->pStmt);
  if (rc == SQLITE_OK && bKeyGroup) p->pConn->nKeyGroups++;
  for (int i = 0; rc == SQLITE_OK && i < j->nValue; i++)
    rc = apValue[i] ? sqlite3_bind_value(c->pStmt, j->iRows + 1 + i, apValue[i])
                    : sqlite3_bind_null(c->pStmt, j->iRows + 1 + i);
  for (int i = 0; i < j->nValue; i++) sqlite3_value_free(apValue[i]);
  if (rc == SQLITE_MISMATCH) { /* a subquery failed: SQLite runs the query, and says why */
    sqlite3_finalize(c->pStmt);
    c->pStmt = NULL;
    vt_rowset_clear(&c->rows);
    return rc;
  }
  if (rc) {
    sqlite3_free(p->base.zErrMsg);
    p->base.zErrMsg = sqlite3_mprintf("csq_query: host part failed: %s", sqlite3_errmsg(p->db));
  }
  return rc;
}

/* pl_rows_fn: an uncorrelated subquery the planner needs the rows of. */
typedef struct first_col {
  int (*xRow)(void *, sqlite3_value *);
  void *pCtx;
} first_col;

static int first_col_row(void *pCtx, sqlite3_stmt *pStmt) {
  first_col *x = pCtx;
  return x->xRow(x->pCtx, sqlite3_column_value(pStmt, 0));
}

static int q_rows(void *pArg, const char *zSql, int nSql, int (*xRow)(void *, sqlite3_value *),
                  void *pCtx) {
  first_col x = {xRow, pCtx};
  return run_sub(((q_lookup *)pArg)->pTab, zSql, nSql, first_col_row, &x);
}

/* Plan zSql as a join: SQLITE_OK with *ppJoin (bPlan 0: not a join the
** planner takes) and the tables in FROM order in apTab. */
static int plan_join(q_tab *p, const char *zSql, sqlite3_value **aParam, int nParam,
                     pl_join **ppJoin, vt_tab **apTab) {
  q_lookup l;
  memset(&l, 0, sizeof(l));
  l.pConn = p->pConn;
  l.pTab = p;
  int rc = pl_join_plan(p->db, zSql, aParam, nParam, q_lookup_table, q_coll, q_rows, &l, ppJoin);
  q_lookup_free(&l);
  if (rc == SQLITE_OK && (*ppJoin)->bPlan && l.nFound != (*ppJoin)->nTab + (*ppJoin)->nExtra) {
    (*ppJoin)->bPlan = 0; /* cannot happen: every table was looked up once */
    snprintf((*ppJoin)->zWhy, sizeof((*ppJoin)->zWhy), "internal: table lookups do not match");
  }
  for (int t = 0; t < l.nFound; t++) apTab[t] = l.apFound[t];
  /* * leaves out HIDDEN columns, which the planner does not know of (a
  ** declaration that mentions the word at all keeps the query with SQLite) */
  for (int t = 0; rc == SQLITE_OK && (*ppJoin)->bPlan && (*ppJoin)->bStar && t < l.nFound; t++)
    if (sqlite3_strlike("%hidden%", apTab[t]->s.zDeclare, 0) == 0) {
      (*ppJoin)->bPlan = 0;
      snprintf((*ppJoin)->zWhy, sizeof((*ppJoin)->zWhy),
               "SELECT * over a table with HIDDEN columns stays with SQLite");
    }
  return rc;
}

/* zSql with d's inner SELECT replaced by "(zHost)", into *pzOuter
** (sqlite3_malloc'd), when SQLite takes it as it took zSql: nCol columns
** (nCol < 0: any) and nParam parameters, the host part's own. Else
** SQLITE_OK with *pzOuter NULL and why in zWhy; SQLITE_NOMEM. */
static int splice_host(q_tab *p, const char *zSql, const pl_derived *d, const char *zHost, int nCol,
                       int nParam, char **pzOuter, char *zWhy, size_t nWhy) {
  *pzOuter = NULL;
  char *zWith = sqlite3_mprintf("(%s)", zHost), *zOuter = NULL;
  if (!zWith) return SQLITE_NOMEM;
  int e = pl_derived_splice(zSql, d, zWith, &zOuter);
  sqlite3_free(zWith);
  if (e) return SQLITE_NOMEM;
  sqlite3_stmt *pStmt = NULL;
  int rcPrep = sqlite3_prepare_v2(p->db, zOuter, -1, &pStmt, NULL), rc = SQLITE_OK;
  if (rcPrep == SQLITE_NOMEM) {
    rc = SQLITE_NOMEM;
  } else if (rcPrep || !pStmt || (nCol >= 0 && sqlite3_column_count(pStmt) != nCol) ||
             sqlite3_bind_parameter_count(pStmt) != nParam) {
    snprintf(zWhy, nWhy, "%s", rcPrep ? sqlite3_errmsg(p->db) : "its columns or parameters differ");
  } else {
    *pzOuter = sqlite3_mprintf("%s", zOuter);
    if (!*pzOuter) rc = SQLITE_NOMEM;
  }
  sqlite3_finalize(pStmt);
  free(zOuter);
  return rc;
}

/* Is zSql a derived table or one WITH table of the shapes planner/derived.h
** rewrites? */
static int find_derived(const char *zSql, pl_derived *d) {
  return pl_derived_find(zSql, d) == PL_OK || pl_derived_with(zSql, d) == PL_OK;
}

/* A derived table's join grouped in csq's host engine: the statement with
** plan's host part (typed, over the merged groups) in the inner SELECT's
** place, into *pzOuter (sqlite3_malloc'd); NULL when SQLite does not take
** it as it took the statement (the grouping then stays with SQLite).
** SQLITE_OK or SQLITE_NOMEM. */
static int join_agg_outer(q_tab *p, const pl_join *j, const pl_plan *plan, char **pzOuter) {
  pl_derived d;
  char zWhy[200];
  *pzOuter = NULL;
  if (!j->zOuterSql || !find_derived(j->zOuterSql, &d)) return SQLITE_OK;
  return splice_host(p, j->zOuterSql, &d, plan->zHost, j->nOuterCol, plan->iRows, pzOuter, zWhy,
                     sizeof(zWhy));
}

/* A derived table or WITH table over one csq table that the one-table
** planner splits (typed: the host part's columns take the inner SELECT's
** affinities): *ppPlan, its table *ppTab and the statement with the host
** part in the inner SELECT's place (*pzOuter, sqlite3_malloc'd), which
** prepares to nCol columns (nCol < 0: any) and reads the merged rows as
** its only parameter. SQLITE_OK with *ppPlan NULL when it is not that;
** SQLITE_NOMEM. */
static int plan_derived_one(q_tab *p, const char *zSql, int nCol, pl_plan **ppPlan, vt_tab **ppTab,
                            char **pzOuter) {
  *ppPlan = NULL;
  *ppTab = NULL;
  *pzOuter = NULL;
  pl_derived d;
  if (!find_derived(zSql, &d)) return SQLITE_OK;
  char *zInner = NULL;
  char zWhy[200];
  int e = pl_derived_inner(zSql, &d, &zInner, zWhy, sizeof(zWhy));
  if (e == PL_NOMEM) return SQLITE_NOMEM;
  if (e != PL_OK) return SQLITE_OK;
  q_lookup l = {p->pConn, NULL, NULL, NULL, NULL, {0}, 0, p};
  pl_plan *plan = NULL;
  int rc = pl_plan_query_opt(p->db, zInner, NULL, 0, q_lookup_table, &l, PL_PLAN_TYPED, &plan);
  free(zInner);
  sqlite3_free(l.azCol);
  sqlite3_free(l.aAff);
  sqlite3_free(l.aColl);
  if (rc == SQLITE_OK && plan->bPush && !plan->bEmpty && l.pFound)
    rc = splice_host(p, zSql, &d, plan->zHost, nCol, plan->iRows, pzOuter, zWhy, sizeof(zWhy));
  if (rc != SQLITE_OK) {
    sqlite3_free(*pzOuter);
    *pzOuter = NULL;
  }
  if (*pzOuter) {
    *ppPlan = plan;
    *ppTab = l.pFound;
  } else {
    pl_plan_free(plan);
  }
  return rc;
}

/* Run plan_derived_one's plan: the device part into c->rows, then SQLite
** over zOuter. A device part that fails (an integer overflow, say) leaves
** the statement to SQLite, which runs the inner SELECT only if it needs
** it: SQLITE_MISMATCH. */
static int run_derived_one(q_cursor *c, q_tab *p, vt_tab *t, const pl_plan *plan,
                           const char *zOuter) {
  int rc = run_device(c, p, t, plan);
  if (rc != SQLITE_OK && rc != SQLITE_NOMEM) {
    sqlite3_free(p->base.zErrMsg);
    p->base.zErrMsg = NULL;
    vt_rowset_clear(&c->rows);
    return SQLITE_MISMATCH;
  }
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(p->db, zOuter, -1, &c->pStmt, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_bind_pointer(c->pStmt, plan->iRows, &c->rows, "csq_rowset", NULL);
  if (rc && !p->base.zErrMsg)
    p->base.zErrMsg = sqlite3_mprintf("csq_query: host part failed: %s", sqlite3_errmsg(p->db));
  return rc;
}

/* Plan zSql as a derived table over a join (planner/derived.h): "SELECT
** ... FROM (SELECT ... FROM a, b ...) [AS x] ..." or "WITH x AS (SELECT
** ... FROM a, b ...) SELECT ...". The inner SELECT plans
** through plan_join; its host part, a SELECT over the joined rows, is
** spliced where the inner SELECT stood, so SQLite runs the outer query over
** it, and becomes the plan's zHost. SQLITE_OK with *ppJoin NULL when zSql
** is not of the shape (or has parameters); with *ppJoin whose bPlan is 0
** (zWhy says why) when the inner SELECT is not a join the planner takes or
** the spliced text does not prepare to nCol columns (nCol < 0: any); else
** the plan, its tables in apTab. SQLITE_NOMEM. */
static int plan_derived(q_tab *p, const char *zSql, int nCol, pl_join **ppJoin, vt_tab **apTab) {
  *ppJoin = NULL;
  pl_derived d;
  if (!find_derived(zSql, &d)) return SQLITE_OK;
  char *zInner = NULL;
  char zWhy[200];
  int e = pl_derived_inner(zSql, &d, &zInner, zWhy, sizeof(zWhy));
  if (e == PL_NOMEM) return SQLITE_NOMEM;
  pl_join *j = NULL;
  int rc = SQLITE_OK;
  if (e == PL_OK) {
    rc = plan_join(p, zInner, NULL, 0, &j, apTab);
    free(zInner);
    if (rc) {
      pl_join_free(j);
      return rc;
    }
  } else {
    j = sqlite3_malloc64(sizeof(*j));
    if (!j) return SQLITE_NOMEM;
    memset(j, 0, sizeof(*j));
    snprintf(j->zWhy, sizeof(j->zWhy), "%s", zWhy);
  }
  *ppJoin = j;
  if (j->bPlan) {
    /* SQLite must take the spliced text as it took the original: same
    ** columns, only the row set and the subqueries' values as parameters;
    ** else the query as written */
    char *zOuter = NULL;
    int rc2 =
        splice_host(p, zSql, &d, j->zHost, nCol, j->iRows + j->nValue, &zOuter, zWhy, sizeof(zWhy));
    if (rc2) return rc2;
    if (zOuter) {
      j->zInner = j->zHost; /* the inner host part, for run_join_agg */
      j->zHost = zOuter;
      j->zOuterSql = sqlite3_mprintf("%s", zSql);
      j->nOuterCol = nCol;
      if (!j->zOuterSql) return SQLITE_NOMEM;
    } else {
      j->bPlan = 0;
      snprintf(j->zWhy, sizeof(j->zWhy),
               "the outer query over the joined rows does not prepare: %s", zWhy);
    }
  }
  char zInnerWhy[sizeof(j->zWhy)];
  memcpy(zInnerWhy, j->zWhy, sizeof(zInnerWhy));
  snprintf(j->zWhy, sizeof(j->zWhy), "a derived table over a %s%.256s",
           j->bPlan ? "" : "query the planner does not take: ", zInnerWhy);
  return SQLITE_OK;
}

/* Does join j's host part group its rows in csq's host engine (as
** run_join_agg would, bound values aside)? 1 or 0, with *ppPlan the host
** part planned over the joined rows (pl_join_agg_plan) and, for 1 and a
** derived table's join, *pzOuter the outer statement over its groups
** (else NULL), both the caller's to free; or -SQLITE_NOMEM with both
** NULL. */
static int agg_in_engine(q_tab *p, const pl_join *j, pl_plan **ppPlan, char **pzOuter) {
  *ppPlan = NULL;
  *pzOuter = NULL;
  int nAll = j->iRows + j->nValue;
  sqlite3_value **aNone = sqlite3_malloc64(sizeof(sqlite3_value *) * (size_t)(nAll ? nAll : 1));
  if (!aNone) return -SQLITE_NOMEM;
  memset(aNone, 0, sizeof(sqlite3_value *) * (size_t)(nAll ? nAll : 1));
  pl_plan *plan = NULL;
  int rc = pl_join_agg_plan(p->db, j, aNone, nAll, &plan);
  sqlite3_free(aNone);
  if (rc) return -rc;
  int bYes = plan->bPush && !plan->bRows;
  if (bYes && j->zInner) {
    rc = join_agg_outer(p, j, plan, pzOuter);
    if (rc) {
      pl_plan_free(plan);
      return -rc;
    }
    bYes = *pzOuter != NULL;
  }
  *ppPlan = plan;
  return bYes;
}

/* plan_derived over zSql with the derived table's rows grouped first
** (pl_derived_pregroup) when that gives a join whose grouping runs in
** csq's host engine; else plan_derived over zSql as written. */
static int plan_derived_pre(q_tab *p, const char *zSql, int nCol, pl_join **ppJoin,
                            vt_tab **apTab) {
  pl_derived d;
  char *zInner = NULL, *zPre = NULL;
  char zWhy[200];
  *ppJoin = NULL;
  if (find_derived(zSql, &d)) {
    int e = pl_derived_inner(zSql, &d, &zInner, zWhy, sizeof(zWhy));
    if (e == PL_OK) e = pl_derived_pregroup(zSql, &d, zInner, &zPre, zWhy, sizeof(zWhy));
    free(zInner);
    if (e == PL_NOMEM) return SQLITE_NOMEM;
  }
  if (zPre) {
    pl_join *j = NULL;
    int rc = plan_derived(p, zPre, nCol, &j, apTab);
    free(zPre);
    pl_plan *plan = NULL;
    char *zOuter = NULL;
    int bYes = rc == SQLITE_OK && j && j->bPlan ? agg_in_engine(p, j, &plan, &zOuter) : 0;
    pl_plan_free(plan);
    sqlite3_free(zOuter);
    if (rc == SQLITE_OK && bYes < 0) rc = -bYes;
    if (rc == SQLITE_OK && bYes > 0) {
      j->bPreGroup = 1;
      size_t n = strlen(j->zWhy);
      snprintf(j->zWhy + n, sizeof(j->zWhy) - n,
               "; its rows grouped first by the columns of the "
               "outer GROUP BY keys");
      *ppJoin = j;
      return SQLITE_OK;
    }
    pl_join_free(j);
    if (rc) return rc;
  }
  return plan_derived(p, zSql, nCol, ppJoin, apTab);
}

/* Run the query: split between device and host when the planner can,
** otherwise as ordinary SQL. */
static int run_query(q_cursor *c, q_tab *p, sqlite3_value **aParam, int nParam) {
  pl_join *j = NULL;
  vt_tab *apTab[PL_JOIN_MAX_TAB];
  int rc0 = plan_join(p, p->zSql, aParam, nParam, &j, apTab);
  if (rc0 == SQLITE_OK && j->bPlan) {
    rc0 = run_join(c, p, j, apTab, aParam, nParam);
    pl_join_free(j);
    if (rc0 == SQLITE_MISMATCH) return run_plain(c, p, aParam, nParam);
    return rc0;
  }
  int bJoin = j && j->nTab > 1;
  pl_join_free(j);
  if (rc0) return rc0;
  if (bJoin) return run_plain(c, p, aParam, nParam);
  q_lookup l = {p->pConn, NULL, NULL, NULL, NULL, {0}, 0, p};
  pl_plan *plan = NULL;
  int rc = pl_plan_query(p->db, p->zSql, aParam, nParam, q_lookup_table, &l, &plan);
  sqlite3_free(l.azCol);
  sqlite3_free(l.aAff);
  sqlite3_free(l.aColl);
  if (rc) {
    pl_plan_free(plan);
    return rc;
  }
  if (!plan->bPush || plan->bEmpty || !l.pFound) {
    int bTry = !plan->bPush;
    pl_plan_free(plan);
    plan = NULL;
    j = NULL;
    rc = bTry ? plan_derived_pre(p, p->zSql, p->nCol, &j, apTab) : SQLITE_OK;
    if (rc == SQLITE_OK && j && j->bPlan) {
      rc = run_join(c, p, j, apTab, aParam, nParam);
      pl_join_free(j);
      if (rc == SQLITE_MISMATCH) return run_plain(c, p, aParam, nParam);
      return rc;
    }
    pl_join_free(j);
    if (rc) return rc;
    if (bTry) { /* a derived table or WITH table over one table */
      vt_tab *t = NULL;
      char *zOuter = NULL;
      rc = plan_derived_one(p, p->zSql, p->nCol, &plan, &t, &zOuter);
      if (rc == SQLITE_OK && plan) rc = run_derived_one(c, p, t, plan, zOuter);
      pl_plan_free(plan);
      sqlite3_free(zOuter);
      if (rc != SQLITE_MISMATCH && (rc || c->pStmt)) return rc;
    }
    return run_plain(c, p, aParam, nParam);
  }
  rc = run_device(c, p, l.pFound, plan);
  if (rc == SQLITE_MISMATCH) {
    pl_plan_free(plan);
    return run_plain(c, p, aParam, nParam);
  }
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(p->db, plan->zHost, -1, &c->pStmt, NULL);
  for (int k = 0; rc == SQLITE_OK && k < nParam; k++)
    if (aParam[k]) rc = sqlite3_bind_value(c->pStmt, k + 1, aParam[k]);
  if (rc == SQLITE_OK)
    rc = sqlite3_bind_pointer(c->pStmt, plan->iRows, &c->rows, "csq_rowset", NULL);
  if (rc && !p->base.zErrMsg) {
    sqlite3_free(p->base.zErrMsg);
    p->base.zErrMsg = sqlite3_mprintf("csq_query: host part failed: %s", sqlite3_errmsg(p->db));
  }
  pl_plan_free(plan);
  return rc;
}

static int q_filter(sqlite3_vtab_cursor *pCur, int idxNum, const char *idxStr, int argc,
                    sqlite3_value **argv) {
  (void)idxStr;
  q_cursor *c = (q_cursor *)pCur;
  q_tab *p = (q_tab *)pCur->pVtab;
  q_reset(c);
  c->iRow = 0;
  /* the parameters, by number; the ones not given stay NULL */
  sqlite3_value *aParam[30] = {0};
  for (int k = 0, a = 0; k < p->nParam && k < 30; k++)
    if ((idxNum >> k) & 1 && a < argc) aParam[k] = argv[a++];
  int rc = run_query(c, p, aParam, p->nParam < 30 ? p->nParam : 30);
  if (rc) return rc;
  return q_step(c, p);
}

static int q_next(sqlite3_vtab_cursor *pCur) {
  q_cursor *c = (q_cursor *)pCur;
  c->iRow++;
  return q_step(c, (q_tab *)pCur->pVtab);
}

static int q_eof(sqlite3_vtab_cursor *pCur) {
  return ((q_cursor *)pCur)->bEof;
}

static int q_column(sqlite3_vtab_cursor *pCur, sqlite3_context *ctx, int i) {
  q_cursor *c = (q_cursor *)pCur;
  q_tab *p = (q_tab *)pCur->pVtab;
  if (i >= p->nCol) return SQLITE_OK;
  /* a copy of TEXT and BLOB: the host statement's values may point into
  ** the cursor's row set (csq_jrows, csq_rows), which a new xFilter frees
  ** while the outer statement may still hold what it read */
  sqlite3_value *v = sqlite3_column_value(c->pStmt, i);
  switch (sqlite3_value_type(v)) {
  case SQLITE_TEXT: {
    const char *z = (const char *)sqlite3_value_text(v);
    int n = sqlite3_value_bytes(v);
    if (!z && n == 0) z = ""; /* empty; a NULL pointer would make the result NULL */
    if (z)
      sqlite3_result_text64(ctx, z, (sqlite3_uint64)n, SQLITE_TRANSIENT, SQLITE_UTF8);
    else
      sqlite3_result_error_nomem(ctx);
    break;
  }
  case SQLITE_BLOB: {
    const void *z = sqlite3_value_blob(v);
    int n = sqlite3_value_bytes(v);
    if (n == 0)
      sqlite3_result_zeroblob(ctx, 0); /* sqlite3_value_blob gives NULL for x'' */
    else if (z)
      sqlite3_result_blob64(ctx, z, (sqlite3_uint64)n, SQLITE_TRANSIENT);
    else
      sqlite3_result_error_nomem(ctx);
    break;
  }
  default:
    sqlite3_result_value(ctx, v);
    return SQLITE_OK;
  }
  if (sqlite3_value_subtype(v)) sqlite3_result_subtype(ctx, sqlite3_value_subtype(v));
  return SQLITE_OK;
}

static int q_rowid(sqlite3_vtab_cursor *pCur, sqlite3_int64 *pRowid) {
  *pRowid = ((q_cursor *)pCur)->iRow;
  return SQLITE_OK;
}

static sqlite3_module q_module = {
    .xCreate = q_init,
    .xConnect = q_init,
    .xBestIndex = q_best_index,
    .xDisconnect = q_disconnect,
    .xDestroy = q_disconnect,
    .xOpen = q_open,
    .xClose = q_close,
    .xFilter = q_filter,
    .xNext = q_next,
    .xEof = q_eof,
    .xColumn = q_column,
    .xRowid = q_rowid,
};

int vt_query_register(sqlite3 *db, vt_conn *pConn) {
  int rc = vt_jrows_register(db);
  if (rc) return rc;
  return sqlite3_create_module(db, "csq_query", &q_module, pConn);
}

/* ---- csq_explain('SELECT ...'): the split of a query ----------------------
** Rows (part, detail): "plan" (device+host, or host), "why", and for a split
** query "device" (what the program does), "program_bytes", "table_rows"
** (rows the device scans, from the catalog) and "host" (the SQL SQLite runs
** over the merged rows), and "ebpf" when the query calls csq_bpf: the calls
** the device program runs ("on the device: csq_bpf('f', x) as a filter
** term; ..."), or that they run on the host. Parameters of the query are
** unknown here (NULL). */

typedef struct x_cursor {
  sqlite3_vtab_cursor base; /* must be first */
  char *azPart[40];
  char *azDetail[40];
  int n, i;
} x_cursor;

static int x_connect(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                     sqlite3_vtab **ppVtab, char **pzErr) {
  (void)argc, (void)argv, (void)pzErr;
  int rc = sqlite3_declare_vtab(db, "CREATE TABLE x(part TEXT, detail TEXT, sql HIDDEN)");
  if (rc) return rc;
  q_tab *p = sqlite3_malloc64(sizeof(*p));
  if (!p) return SQLITE_NOMEM;
  memset(p, 0, sizeof(*p));
  p->db = db;
  p->pConn = pAux;
  *ppVtab = &p->base;
  return SQLITE_OK;
}

static int x_best_index(sqlite3_vtab *pVtab, sqlite3_index_info *pInfo) {
  (void)pVtab;
  for (int i = 0; i < pInfo->nConstraint; i++) {
    if (pInfo->aConstraint[i].iColumn == 2 &&
        pInfo->aConstraint[i].op == SQLITE_INDEX_CONSTRAINT_EQ) {
      if (!pInfo->aConstraint[i].usable) return SQLITE_CONSTRAINT;
      pInfo->aConstraintUsage[i].argvIndex = 1;
      pInfo->aConstraintUsage[i].omit = 1;
      pInfo->estimatedCost = 10;
      return SQLITE_OK;
    }
  }
  return SQLITE_CONSTRAINT;
}

static int x_open(sqlite3_vtab *pVtab, sqlite3_vtab_cursor **ppCur) {
  (void)pVtab;
  x_cursor *c = sqlite3_malloc64(sizeof(*c));
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof(*c));
  *ppCur = &c->base;
  return SQLITE_OK;
}

static void x_clear(x_cursor *c) {
  for (int i = 0; i < c->n; i++) {
    sqlite3_free(c->azPart[i]);
    sqlite3_free(c->azDetail[i]);
  }
  c->n = c->i = 0;
}

static int x_close(sqlite3_vtab_cursor *pCur) {
  x_clear((x_cursor *)pCur);
  sqlite3_free(pCur);
  return SQLITE_OK;
}

static void x_add(x_cursor *c, const char *zPart, char *zDetail) {
  if (c->n >= (int)(sizeof(c->azPart) / sizeof(c->azPart[0]))) {
    sqlite3_free(zDetail);
    return;
  }
  c->azPart[c->n] = sqlite3_mprintf("%s", zPart);
  c->azDetail[c->n] = zDetail;
  c->n++;
}

/* The name of chunk iChunk of table t (0: the rowid, or its alias). */
static const char *chunk_name(const vt_tab *t, int iChunk) {
  if (iChunk == 0) return t && t->s.iIpk >= 0 ? t->s.aCol[t->s.iIpk].zName : "rowid";
  return t && iChunk - 1 < t->s.nCol ? t->s.aCol[iChunk - 1].zName : "?";
}

/* Append the table column that row-set column k of j holds, as t.c. */
static void rowcol_name(sqlite3_str *z, const pl_join *j, vt_tab **apTab, int k) {
  for (int t = 0; t < j->nTab; t++)
    for (int o = 0; o < j->aTab[t].nOut; o++)
      if (j->aTab[t].aRowCol[o] == k) {
        sqlite3_str_appendf(z, "%s.%s", j->aTab[t].zName,
                            chunk_name(apTab[t], j->aTab[t].aChunk[o]));
        return;
      }
  sqlite3_str_appendf(z, "row-set column %d", k);
}

/* The row of one table's device scan in a join's plan. */
static void explain_scan(x_cursor *c, const char *zPart, const pl_jtab *jt, const vt_tab *vt) {
  int bAlias = sqlite3_stricmp(jt->zName, jt->zTable) != 0;
  x_add(c, zPart,
        sqlite3_mprintf("%s%s%s on %s: %d pushed filter(s), %d column(s) returned, est %lld of "
                        "%lld rows; program of %lld bytes",
                        jt->zTable, bAlias ? " AS " : "", bAlias ? jt->zName : "",
                        vt && vt->nMem > 1 ? "its member devices" : "its device", jt->nFilter,
                        jt->nOut, (long long)jt->nEst, (long long)jt->nRows, (long long)jt->nProg));
}

/* The rows of a join's plan, as a tree: each scan on its device(s), each
** hash join, the host part. */
static void explain_join(x_cursor *c, q_tab *p, const pl_join *j, vt_tab **apTab) {
  x_add(c, "plan",
        sqlite3_mprintf("%s", j->bPlan ? "join: device scans + host hash join + host" : "host"));
  x_add(c, "why", sqlite3_mprintf("%s", j->zWhy));
  if (!j->bPlan) {
    x_add(c, "host", sqlite3_mprintf("the query as written; csq tables in it push their filters"));
    return;
  }
  uint64_t nBudget = join_budget(p);
  for (int s = 0; s < j->nTab; s++) {
    int t = j->aOrder[s];
    const pl_jtab *jt = &j->aTab[t];
    const vt_tab *vt = apTab[t];
    explain_scan(c, s == 0 ? "scan (probe side)" : "  scan (build side)", jt, vt);
  }
  for (int s = 1; s < j->nTab; s++) {
    int t = j->aOrder[s];
    const pl_jtab *jt = &j->aTab[t];
    sqlite3_str *z = sqlite3_str_new(p->db);
    sqlite3_str_appendf(z, "build %s, probe with the rows of ", jt->zName);
    if (jt->bLeft) sqlite3_str_appendall(z, "(LEFT JOIN: rows without a match kept) ");
    for (int u = 0; u < s; u++)
      sqlite3_str_appendf(z, "%s%s", u ? " x " : "", j->aTab[j->aOrder[u]].zName);
    sqlite3_str_appendall(z, " on ");
    for (int k = 0; k < jt->nKey; k++) {
      const pl_jtab *jp = &j->aTab[jt->aKeyTab[k]];
      sqlite3_str_appendf(z, "%s%s.%s = %s.%s", k ? " AND " : "", jt->zName,
                          chunk_name(apTab[t], jt->aChunk[jt->aKeyOut[k]]), jp->zName,
                          chunk_name(apTab[jt->aKeyTab[k]], jp->aChunk[jt->aKeyProbe[k]]));
    }
    x_add(c, "    hash join", sqlite3_str_finish(z));
  }
  for (int s = 0; s < j->nTab; s++) {
    int t = j->aOrder[s];
    const pl_jtab *jt = &j->aTab[t];
    pl_jf_src aSrc[2 * PL_JOIN_MAX_TAB * PL_JOIN_MAX_KEY];
    int nSrc = pl_join_filter_sources(j, t, aSrc, (int)(sizeof(aSrc) / sizeof(aSrc[0])));
    for (int i = 0; i < nSrc; i++) {
      const pl_jtab *ju = &j->aTab[aSrc[i].u];
      x_add(c, "  join filter",
            sqlite3_mprintf("%s.%s IN (the distinct %s.%s of %s's rows) in the scan of %s, "
                            "when they are at most %d, else a bitmap of them (integers within a "
                            "span a bitmap covers) or a Bloom filter of them%s",
                            jt->zName, chunk_name(apTab[t], aSrc[i].iChunk), ju->zName,
                            chunk_name(apTab[aSrc[i].u], ju->aChunk[aSrc[i].iOut]), ju->zName,
                            jt->zName, PL_JOINFILTER_MAX_KEYS,
                            aSrc[i].bVia ? " (the keys that join them are equal)" : ""));
    }
  }
  for (int i = 0; i < j->nSemi; i++) {
    const pl_jsemi *q = &j->aSemi[i];
    int t = q->iTab;
    const pl_jtab *jt = &j->aTab[t];
    explain_scan(c, "  scan (subquery)", jt, apTab[t]);
    sqlite3_str *z = sqlite3_str_new(p->db);
    sqlite3_str_appendf(z, "keep the joined rows %s row of %s matches on ",
                        q->bAnti ? "that no" : "that some", jt->zName);
    for (int k = 0; k < q->nKey; k++) {
      sqlite3_str_appendf(z, "%s%s.%s = ", k ? " AND " : "", jt->zName,
                          chunk_name(apTab[t], jt->aChunk[q->aKeyOut[k]]));
      rowcol_name(z, j, apTab, q->aKeyCol[k]);
    }
    for (int k = 0; k < q->nNe; k++) {
      sqlite3_str_appendf(z, " AND %s.%s <> ", jt->zName,
                          chunk_name(apTab[t], jt->aChunk[q->aNeOut[k]]));
      rowcol_name(z, j, apTab, q->aNeCol[k]);
    }
    sqlite3_str_appendf(z, "; its scan gets a join filter of their keys");
    x_add(c, q->bAnti ? "    anti-join (NOT EXISTS)" : "    semi-join (EXISTS)",
          sqlite3_str_finish(z));
  }
  for (int i = 0; i < j->nScalar; i++) {
    const pl_jscalar *q = &j->aScalar[i];
    int t = q->iTab;
    if (t < 0) {
      sqlite3_str *z = sqlite3_str_new(p->db);
      sqlite3_str_appendall(z, "the correlated subquery over a join, decorrelated: ");
      sqlite3_str_appendall(z, q->zGroup);
      sqlite3_str_appendall(z, ", run first as a query of its own through the planner, its groups "
                               "matched on ");
      for (int k = 0; k < q->nKey; k++) {
        if (k) sqlite3_str_appendall(z, ", ");
        rowcol_name(z, j, apTab, q->aKeyCol[k]);
      }
      sqlite3_str_appendf(z, "; its value in row-set column %d", q->iCol);
      x_add(c, "    scalar subquery", sqlite3_str_finish(z));
      continue;
    }
    const pl_jtab *jt = &j->aTab[t];
    explain_scan(c, "  scan (subquery)", jt, apTab[t]);
    sqlite3_str *z = sqlite3_str_new(p->db);
    sqlite3_str_appendf(z, "the correlated subquery over %s as groups on ", jt->zName);
    for (int k = 0; k < q->nKey; k++) {
      sqlite3_str_appendf(z, "%s%s.%s = ", k ? " AND " : "", jt->zName,
                          chunk_name(apTab[t], jt->aChunk[q->aKeyOut[k]]));
      rowcol_name(z, j, apTab, q->aKeyCol[k]);
    }
    sqlite3_str_appendf(z,
                        " (its scan gets a join filter of their keys), its value in row-set "
                        "column %d: %s",
                        q->iCol, q->zGroup);
    x_add(c, "    scalar subquery", sqlite3_str_finish(z));
  }
  for (int i = 0; i < j->nValue; i++)
    x_add(c, "  subquery value",
          j->azValueRows[i]
              ? sqlite3_mprintf("?%d of the host part: (%s), over the rows the query reads: "
                                "once they are joined, SQLite runs %s",
                                j->iRows + 1 + i, j->azValue[i], j->azValueRows[i])
              : sqlite3_mprintf("?%d of the host part: (%s), run first as a query of its own, "
                                "through the planner",
                                j->iRows + 1 + i, j->azValue[i]));
  x_add(c, "memory",
        sqlite3_mprintf("build sides over %llu bytes (csq_probe_memory) give the "
                        "query back to SQLite",
                        (unsigned long long)nBudget));
  x_add(c, "host", sqlite3_mprintf("%s", j->zHost));
  if (j->zHostKey && !j->zInner)
    x_add(c, "  key grouping",
          sqlite3_mprintf("instead, when %s's values in the rows of %s are unique integers: "
                          "grouped by it alone among that table's columns, the others one value "
                          "per group: %s",
                          j->zKeyName, j->aTab[j->iKeyTab].zName, j->zHostKey));
  pl_plan *plan = NULL;
  char *zOuter = NULL;
  int bEngine = agg_in_engine(p, j, &plan, &zOuter) > 0;
  if (bEngine && j->bPreGroup)
    x_add(c, "  host aggregation",
          sqlite3_mprintf("instead: the joined rows grouped in csq's host engine (%s), then "
                          "SQLite runs %s",
                          plan->zDevice, zOuter ? zOuter : plan->zHost));
  else if (bEngine)
    x_add(c, "  host aggregation",
          sqlite3_mprintf("instead, when the first %d joined rows make fewer than %d groups: the "
                          "joined rows grouped in csq's host engine (%s), then SQLite runs %s",
                          JAGG_SAMPLE, JAGG_SAMPLE / JAGG_MIN_SHRINK, plan->zDevice,
                          zOuter ? zOuter : plan->zHost));
  else if (plan && plan->bPush && !plan->bRows && j->zInner)
    x_add(c, "  host aggregation",
          sqlite3_mprintf("none, SQLite's: the outer statement does not take the grouped rows"));
  else if (plan && !plan->bPush)
    x_add(c, "  host aggregation", sqlite3_mprintf("none, SQLite's: %s", plan->zWhy));
  if (plan && pl_star_possible(j, plan))
    x_add(c, "  star aggregation",
          sqlite3_mprintf("before both, when every build side's keys are unique integers within "
                          "a span of %u: %s's devices "
                          "group the rows themselves, each build side's key column a code of its "
                          "group column per key and an exact filter of its keys "
                          "(planner/star.h); then SQLite runs the statement above over the groups",
                          PL_STAR_MAX_SPAN, j->aTab[j->aOrder[0]].zName));
  sqlite3_free(zOuter);
  pl_plan_free(plan);
}

static int x_filter(sqlite3_vtab_cursor *pCur, int idxNum, const char *idxStr, int argc,
                    sqlite3_value **argv) {
  (void)idxNum, (void)idxStr;
  x_cursor *c = (x_cursor *)pCur;
  q_tab *p = (q_tab *)pCur->pVtab;
  x_clear(c);
  const char *zSql = argc > 0 ? (const char *)sqlite3_value_text(argv[0]) : NULL;
  if (!zSql) return SQLITE_OK;
  pl_join *j = NULL;
  vt_tab *apTab[PL_JOIN_MAX_TAB];
  int rc = plan_join(p, zSql, NULL, 0, &j, apTab);
  if (rc == SQLITE_OK && (j->nTab > 1 || j->bPlan)) {
    explain_join(c, p, j, apTab);
    pl_join_free(j);
    return SQLITE_OK;
  }
  /* one table with a correlated [NOT] EXISTS: why it is no semi-join */
  char *zSemiWhy = rc == SQLITE_OK && j->nTab == 1 ? sqlite3_mprintf("%s", j->zWhy) : NULL;
  pl_join_free(j);
  j = NULL;
  if (rc) return rc;
  q_lookup l = {p->pConn, NULL, NULL, NULL, NULL, {0}, 0, p};
  pl_plan *plan = NULL;
  rc = pl_plan_query(p->db, zSql, NULL, 0, q_lookup_table, &l, &plan);
  sqlite3_free(l.azCol);
  sqlite3_free(l.aAff);
  sqlite3_free(l.aColl);
  if (rc) {
    sqlite3_free(zSemiWhy);
    return rc;
  }
  if (!plan->bPush) {
    /* a derived table over a join: explained as that join, or why not */
    rc = plan_derived_pre(p, zSql, -1, &j, apTab);
    if (rc == SQLITE_OK && j && j->bPlan) {
      sqlite3_free(zSemiWhy);
      pl_plan_free(plan);
      explain_join(c, p, j, apTab);
      pl_join_free(j);
      return SQLITE_OK;
    }
    if (rc) {
      sqlite3_free(zSemiWhy);
      pl_join_free(j);
      pl_plan_free(plan);
      return rc;
    }
    /* a derived table or WITH table over one table */
    pl_plan *p1 = NULL;
    vt_tab *t1 = NULL;
    char *zOuter = NULL;
    rc = plan_derived_one(p, zSql, -1, &p1, &t1, &zOuter);
    if (rc == SQLITE_OK && p1) {
      x_add(c, "plan", sqlite3_mprintf("derived: device+host"));
      x_add(c, "why",
            sqlite3_mprintf("a derived table or WITH table over one table: %s; SQLite "
                            "runs the rest over its rows",
                            p1->zWhy));
      x_add(c, "device", sqlite3_mprintf("%s on %s", p1->zDevice, t1->zName));
      x_add(c, "program_bytes", sqlite3_mprintf("%lld", (long long)p1->nProg));
      x_add(c, "host", sqlite3_mprintf("%s", zOuter));
    }
    int bDone = p1 != NULL;
    pl_plan_free(p1);
    sqlite3_free(zOuter);
    if (rc || bDone) {
      sqlite3_free(zSemiWhy);
      pl_join_free(j);
      pl_plan_free(plan);
      return rc;
    }
  }
  x_add(c, "plan", sqlite3_mprintf("%s", plan->bPush ? "device+host" : "host"));
  x_add(c, "why",
        sqlite3_mprintf("%s", zSemiWhy && !plan->bPush ? zSemiWhy
                              : j                      ? j->zWhy
                                                       : plan->zWhy));
  sqlite3_free(zSemiWhy);
  pl_join_free(j);
  j = NULL;
  if (plan->bPush) {
    int64_t nRows = l.pFound ? l.pFound->nRowEst : -1;
    x_add(c, "device", sqlite3_mprintf("%s", plan->zDevice));
    x_add(c, "program_bytes", sqlite3_mprintf("%lld", (long long)plan->nProg));
    x_add(c, "table_rows", sqlite3_mprintf("%lld", (long long)nRows));
    if (l.pFound && l.pFound->nMem > 1)
      x_add(c, "devices",
            sqlite3_mprintf("%d members, each runs its part: %s", l.pFound->nMem,
                            l.pFound->s.zDevices));
    x_add(c, "host", sqlite3_mprintf("%s", plan->zHost));
    if (plan->zBpf) x_add(c, "ebpf", sqlite3_mprintf("on the device: %s", plan->zBpf));
  } else {
    x_add(c, "host", sqlite3_mprintf("the query as written; csq tables in it push their filters"));
    if (sqlite3_strlike("%csq_bpf(%", zSql, 0) == 0 ||
        sqlite3_strlike("%csq_bpf_col(%", zSql, 0) == 0)
      x_add(c, "ebpf",
            sqlite3_mprintf("on the host, on the rows the device returns (but a csq table "
                            "still runs csq_bpf_col(column, 'name') in its WHERE)"));
  }
  pl_plan_free(plan);
  return SQLITE_OK;
}

static int x_next(sqlite3_vtab_cursor *pCur) {
  ((x_cursor *)pCur)->i++;
  return SQLITE_OK;
}

static int x_eof(sqlite3_vtab_cursor *pCur) {
  x_cursor *c = (x_cursor *)pCur;
  return c->i >= c->n;
}

static int x_column(sqlite3_vtab_cursor *pCur, sqlite3_context *ctx, int i) {
  x_cursor *c = (x_cursor *)pCur;
  if (i == 0)
    sqlite3_result_text(ctx, c->azPart[c->i], -1, SQLITE_TRANSIENT);
  else if (i == 1)
    sqlite3_result_text(ctx, c->azDetail[c->i], -1, SQLITE_TRANSIENT);
  return SQLITE_OK;
}

static sqlite3_module x_module = {
    .xConnect = x_connect,
    .xBestIndex = x_best_index,
    .xDisconnect = q_disconnect,
    .xOpen = x_open,
    .xClose = x_close,
    .xFilter = x_filter,
    .xNext = x_next,
    .xEof = x_eof,
    .xColumn = x_column,
    .xRowid = q_rowid,
};

int vt_explain_register(sqlite3 *db, vt_conn *pConn) {
  return sqlite3_create_module(db, "csq_explain", &x_module, pConn);
}
