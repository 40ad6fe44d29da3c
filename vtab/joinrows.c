/*
** vtab/joinrows.c - csq_jrows: the joined rows of a join plan
** (planner/join.h), handed to SQLite as a table-valued function with typed
** columns, so that SQLite finishes the query over them exactly as over the
** base tables:
**
**   SELECT sum(csq_j.ex_0) FROM csq_jrows(?1) AS csq_j WHERE csq_j.bn_1 = 'x';
**
** ?1 is bound with sqlite3_bind_pointer(stmt, 1, pRowset, "csq_rowset", 0):
** a vt_rowset (vtab.h) owned by the caller, which must outlive the
** statement (its finalize or reset) unchanged: as csq_rows, it hands TEXT
** and BLOB over without a copy. Unlike csq_rows, whose columns carry no affinity,
** row-set column k is visible under 15 names, one per affinity and
** collation, "<a><c>_<k>" (planner/join.h, PL_JROWS_NAME_FMT): <a> is the
** affinity, a (BLOB), b (TEXT), c (NUMERIC), d (INTEGER) or e (REAL), and
** <c> the collation, x (BINARY), n (NOCASE) or r (RTRIM). The planner names
** each column by the affinity and collation of the table column it holds,
** so comparisons, GROUP BY and ORDER BY over it behave as over that table
** column (values keep their storage class: no affinity is applied to them,
** the base table applied it when they were written).
**
** Under a GROUP BY over BINARY columns the rows come grouped, the groups
** sorted on their keys (vt_group_order, vtab/group.c), so that SQLite
** aggregates them as they stream by instead of sorting them first: the
** orderByConsumed of sqlite3_vtab_distinct() == 1. SQLite may then also
** skip an ORDER BY on the same keys, which the sorted groups satisfy. The
** rows are copied once into that order (kept with the set, vt_rowset's
** aOrdered), so that SQLite reads each column in sequence.
*/
#include <stdlib.h>
#include <string.h>
#include "vtab/vtab.h"

#define JROWS_MAX_COL  64
#define JROWS_NAMES    15 /* 5 affinities x 3 collations */
#define JROWS_PTR_TYPE "csq_rowset"

typedef struct jrows_cursor {
  sqlite3_vtab_cursor base; /* must be first */
  vt_rowset *pSet;
  const csq_vec *aCol; /* the columns served: the set's, or its grouped copy */
  uint32_t iRow;       /* position in the order served */
  uint32_t *aPos;      /* grouped without a copy: the row at each position; NULL: in order */
} jrows_cursor;

/* Row-set column and collation (0 BINARY, 1 NOCASE, 2 RTRIM) of declared
** column i, one of the names "<a><c>_<k>". */
#define JROWS_COL(i)  ((i) % JROWS_MAX_COL)
#define JROWS_COLL(i) (((i) / JROWS_MAX_COL) % 3)

static int jrows_connect(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                         sqlite3_vtab **ppVtab, char **pzErr) {
  (void)pAux, (void)argc, (void)argv, (void)pzErr;
  static const char *const azType[] = {"BLOB", "TEXT", "NUMERIC", "INTEGER", "REAL"};
  static const char *const azColl[] = {"", " COLLATE NOCASE", " COLLATE RTRIM"};
  static const char acColl[] = {'x', 'n', 'r'};
  sqlite3_str *s = sqlite3_str_new(db);
  sqlite3_str_appendall(s, "CREATE TABLE x(");
  for (int a = 0; a < 5; a++)
    for (int c = 0; c < 3; c++)
      for (int k = 0; k < JROWS_MAX_COL; k++)
        sqlite3_str_appendf(s, "%c%c_%d %s%s, ", 'a' + a, acColl[c], k, azType[a], azColl[c]);
  sqlite3_str_appendall(s, "rs HIDDEN)");
  char *z = sqlite3_str_finish(s);
  if (!z) return SQLITE_NOMEM;
  int rc = sqlite3_declare_vtab(db, z);
  sqlite3_free(z);
  if (rc) return rc;
  sqlite3_vtab *p = sqlite3_malloc64(sizeof(*p));
  if (!p) return SQLITE_NOMEM;
  memset(p, 0, sizeof(*p));
  *ppVtab = p;
  return SQLITE_OK;
}

static int jrows_disconnect(sqlite3_vtab *pVtab) {
  sqlite3_free(pVtab);
  return SQLITE_OK;
}

/* The row set argument is required: without it there is nothing to read.
** A GROUP BY over BINARY columns is consumed: idxStr lists the
** key columns, "k+" or "k-" (descending) each, for jrows_filter. */
static int jrows_best_index(sqlite3_vtab *pVtab, sqlite3_index_info *pInfo) {
  (void)pVtab;
  for (int i = 0; i < pInfo->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &pInfo->aConstraint[i];
    if (c->iColumn == JROWS_NAMES * JROWS_MAX_COL && c->op == SQLITE_INDEX_CONSTRAINT_EQ) {
      if (!c->usable) return SQLITE_CONSTRAINT;
      pInfo->aConstraintUsage[i].argvIndex = 1;
      pInfo->aConstraintUsage[i].omit = 1;
      pInfo->estimatedCost = 10;
      pInfo->estimatedRows = 1000;
      int nOb = pInfo->nOrderBy, bGroup = nOb > 0 && nOb <= VT_GROUP_MAXKEY &&
                                          sqlite3_libversion_number() >= 3038000 &&
                                          sqlite3_vtab_distinct(pInfo) == 1;
      for (int k = 0; bGroup && k < nOb; k++) {
        int iCol = pInfo->aOrderBy[k].iColumn;
        bGroup = iCol >= 0 && iCol < JROWS_NAMES * JROWS_MAX_COL && JROWS_COLL(iCol) == 0;
      }
      if (bGroup) {
        sqlite3_str *z = sqlite3_str_new(NULL);
        for (int k = 0; k < nOb; k++)
          sqlite3_str_appendf(z, "%d%c", JROWS_COL(pInfo->aOrderBy[k].iColumn),
                              pInfo->aOrderBy[k].desc ? '-' : '+');
        char *zIdx = sqlite3_str_finish(z);
        if (!zIdx) return SQLITE_NOMEM;
        pInfo->idxStr = zIdx;
        pInfo->needToFreeIdxStr = 1;
        pInfo->orderByConsumed = 1;
      }
      return SQLITE_OK;
    }
  }
  return SQLITE_CONSTRAINT;
}

static int jrows_open(sqlite3_vtab *pVtab, sqlite3_vtab_cursor **ppCur) {
  (void)pVtab;
  jrows_cursor *c = sqlite3_malloc64(sizeof(*c));
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof(*c));
  *ppCur = &c->base;
  return SQLITE_OK;
}

static int jrows_close(sqlite3_vtab_cursor *pCur) {
  free(((jrows_cursor *)pCur)->aPos);
  sqlite3_free(pCur);
  return SQLITE_OK;
}

static int jrows_filter(sqlite3_vtab_cursor *pCur, int idxNum, const char *idxStr, int argc,
                        sqlite3_value **argv) {
  (void)idxNum;
  jrows_cursor *c = (jrows_cursor *)pCur;
  c->pSet = argc > 0 ? sqlite3_value_pointer(argv[0], JROWS_PTR_TYPE) : NULL;
  c->aCol = c->pSet ? c->pSet->aCol : NULL;
  c->iRow = 0;
  free(c->aPos);
  c->aPos = NULL;
  if (!c->pSet || !idxStr || c->pSet->nRow < 2) return SQLITE_OK;
  vt_rowset *pSet = c->pSet;
  if (pSet->zOrder && strcmp(pSet->zOrder, idxStr) == 0) {
    c->aCol = pSet->aOrdered;
    return SQLITE_OK;
  }
  /* the keys named by jrows_best_index; a column the row set lacks is NULL
  ** in every row, one group */
  static const csq_vec vNull; /* no values: reads as NULL */
  const csq_vec *apKey[VT_GROUP_MAXKEY];
  uint8_t aDesc[VT_GROUP_MAXKEY];
  int nKey = 0;
  for (const char *z = idxStr; *z && nKey < VT_GROUP_MAXKEY;) {
    int k = 0;
    while (*z >= '0' && *z <= '9') k = k * 10 + (*z++ - '0');
    aDesc[nKey] = *z == '-';
    if (*z) z++;
    apKey[nKey++] = k < c->pSet->nCol ? &c->pSet->aCol[k] : &vNull;
  }
  if (!nKey || vt_group_sorted(apKey, aDesc, nKey, pSet->nRow)) return SQLITE_OK;
  int rc = vt_group_order(apKey, aDesc, nKey, pSet->nRow, &c->aPos);
  if (rc != SQLITE_OK || pSet->zOrder) return rc; /* another order's copy may be in use */
  /* the rows copied once into group order: SQLite then reads each column
  ** in sequence, not a cache miss per value; without memory for it, aPos */
  csq_vec *a = sqlite3_malloc64(sizeof(csq_vec) * (size_t)pSet->nCol);
  char *z = sqlite3_mprintf("%s", idxStr);
  int e = a && z ? 0 : -1;
  for (int k = 0; a && k < pSet->nCol; k++) csq_vec_init(&a[k]);
  for (int k = 0; e == 0 && k < pSet->nCol; k++)
    e = csq_vec_gather(&a[k], &pSet->aCol[k], c->aPos, pSet->nRow);
  if (e) {
    for (int k = 0; a && k < pSet->nCol; k++) csq_vec_free(&a[k]);
    sqlite3_free(a);
    sqlite3_free(z);
    return SQLITE_OK;
  }
  pSet->aOrdered = a;
  pSet->zOrder = z;
  c->aCol = a;
  free(c->aPos);
  c->aPos = NULL;
  return SQLITE_OK;
}

static int jrows_next(sqlite3_vtab_cursor *pCur) {
  ((jrows_cursor *)pCur)->iRow++;
  return SQLITE_OK;
}

static int jrows_eof(sqlite3_vtab_cursor *pCur) {
  jrows_cursor *c = (jrows_cursor *)pCur;
  return !c->pSet || c->iRow >= c->pSet->nRow;
}

static int jrows_column(sqlite3_vtab_cursor *pCur, sqlite3_context *ctx, int i) {
  jrows_cursor *c = (jrows_cursor *)pCur;
  int k = JROWS_COL(i);
  uint32_t r = c->aPos ? c->aPos[c->iRow] : c->iRow;
  if (i >= 0 && i < JROWS_NAMES * JROWS_MAX_COL && k < c->pSet->nCol && r < c->aCol[k].n)
    vt_result_value_kept(ctx, &c->aCol[k], r);
  return SQLITE_OK;
}

static int jrows_rowid(sqlite3_vtab_cursor *pCur, sqlite3_int64 *pRowid) {
  jrows_cursor *c = (jrows_cursor *)pCur;
  *pRowid = c->aPos ? c->aPos[c->iRow] : c->iRow;
  return SQLITE_OK;
}

static sqlite3_module jrows_module = {
    .xConnect = jrows_connect,
    .xBestIndex = jrows_best_index,
    .xDisconnect = jrows_disconnect,
    .xOpen = jrows_open,
    .xClose = jrows_close,
    .xFilter = jrows_filter,
    .xNext = jrows_next,
    .xEof = jrows_eof,
    .xColumn = jrows_column,
    .xRowid = jrows_rowid,
};

int vt_jrows_register(sqlite3 *db) {
  return sqlite3_create_module(db, "csq_jrows", &jrows_module, NULL);
}
