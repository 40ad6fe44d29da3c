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
#include <stdlib.h>
#include <string.h>
#include "vtab/vtab.h"

typedef struct q_tab {
  sqlite3_vtab base; /* must be first */
  sqlite3 *db;
  vt_conn *pConn;
  char *zSql;        /* the query */
  int nCol;          /* result columns */
  int nParam;        /* ?1..?nParam: hidden columns after the result columns */
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
  while (n > 0 && (z[n - 1] == ' ' || z[n - 1] == '\t' || z[n - 1] == '\n' || z[n - 1] == '\r')) n--;
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

static int q_init(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                  sqlite3_vtab **ppVtab, char **pzErr) {
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
      if (nDup) sqlite3_str_appendf(pDecl, "%s\"%w:%d\"", i ? ", " : "", zName, nDup);
      else sqlite3_str_appendf(pDecl, "%s\"%w\"", i ? ", " : "", zName);
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

/* Run the query: split between device and host when the planner can,
** otherwise as ordinary SQL. */
static int run_query(q_cursor *c, q_tab *p, sqlite3_value **aParam, int nParam) {
  return run_plain(c, p, aParam, nParam);
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

static int q_eof(sqlite3_vtab_cursor *pCur) { return ((q_cursor *)pCur)->bEof; }

static int q_column(sqlite3_vtab_cursor *pCur, sqlite3_context *ctx, int i) {
  q_cursor *c = (q_cursor *)pCur;
  q_tab *p = (q_tab *)pCur->pVtab;
  if (i < p->nCol) sqlite3_result_value(ctx, sqlite3_column_value(c->pStmt, i));
  return SQLITE_OK;
}

static int q_rowid(sqlite3_vtab_cursor *pCur, sqlite3_int64 *pRowid) {
  *pRowid = ((q_cursor *)pCur)->iRow;
  return SQLITE_OK;
}

static sqlite3_module q_module = {
    .xCreate = q_init,   .xConnect = q_init,         .xBestIndex = q_best_index,
    .xDisconnect = q_disconnect, .xDestroy = q_disconnect, .xOpen = q_open,
    .xClose = q_close,   .xFilter = q_filter,        .xNext = q_next,
    .xEof = q_eof,       .xColumn = q_column,        .xRowid = q_rowid,
};

int vt_query_register(sqlite3 *db, vt_conn *pConn) {
  return sqlite3_create_module(db, "csq_query", &q_module, pConn);
}
