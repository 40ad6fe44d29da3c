/*
** vtab/rows.c - csq_rows: rows that csq computed (merged partial results of
** the device), handed to SQLite as a table-valued function, so that SQLite
** finishes a split query (HAVING, final expressions, ORDER BY, LIMIT) with
** its own evaluator:
**
**   SELECT c0, c1 / c2 FROM csq_rows(?1) WHERE c3 > 5 ORDER BY c0;
**
** ?1 is bound with sqlite3_bind_pointer(stmt, 1, pRowset, "csq_rowset", 0):
** a vt_rowset (vtab.h) owned by the caller, which must outlive the
** statement (its finalize or reset) unchanged: TEXT and BLOB values are
** handed over SQLITE_STATIC, not copied per row, so the statement's
** registers may point into it. Columns c0..c63; those beyond the row set's
** are NULL. The rowset is read-only here.
*/
#include <string.h>
#include "vtab/vtab.h"

#define ROWS_MAX_COL  64
#define ROWS_PTR_TYPE "csq_rowset"

typedef struct rows_cursor {
  sqlite3_vtab_cursor base; /* must be first */
  const vt_rowset *pSet;
  uint32_t iRow;
} rows_cursor;

static int rows_connect(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                        sqlite3_vtab **ppVtab, char **pzErr) {
  (void)pAux, (void)argc, (void)argv, (void)pzErr;
  sqlite3_str *s = sqlite3_str_new(db);
  sqlite3_str_appendall(s, "CREATE TABLE x(");
  for (int i = 0; i < ROWS_MAX_COL; i++) sqlite3_str_appendf(s, "c%d, ", i);
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

static int rows_disconnect(sqlite3_vtab *pVtab) {
  sqlite3_free(pVtab);
  return SQLITE_OK;
}

/* The row set argument is required: without it there is nothing to read. */
static int rows_best_index(sqlite3_vtab *pVtab, sqlite3_index_info *pInfo) {
  (void)pVtab;
  for (int i = 0; i < pInfo->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &pInfo->aConstraint[i];
    if (c->iColumn == ROWS_MAX_COL && c->op == SQLITE_INDEX_CONSTRAINT_EQ) {
      if (!c->usable) return SQLITE_CONSTRAINT;
      pInfo->aConstraintUsage[i].argvIndex = 1;
      pInfo->aConstraintUsage[i].omit = 1;
      pInfo->estimatedCost = 10;
      pInfo->estimatedRows = 100;
      return SQLITE_OK;
    }
  }
  return SQLITE_CONSTRAINT;
}

static int rows_open(sqlite3_vtab *pVtab, sqlite3_vtab_cursor **ppCur) {
  (void)pVtab;
  rows_cursor *c = sqlite3_malloc64(sizeof(*c));
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof(*c));
  *ppCur = &c->base;
  return SQLITE_OK;
}

static int rows_close(sqlite3_vtab_cursor *pCur) {
  sqlite3_free(pCur);
  return SQLITE_OK;
}

static int rows_filter(sqlite3_vtab_cursor *pCur, int idxNum, const char *idxStr, int argc,
                       sqlite3_value **argv) {
  (void)idxNum, (void)idxStr;
  rows_cursor *c = (rows_cursor *)pCur;
  c->pSet = argc > 0 ? sqlite3_value_pointer(argv[0], ROWS_PTR_TYPE) : NULL;
  c->iRow = 0;
  return SQLITE_OK;
}

static int rows_next(sqlite3_vtab_cursor *pCur) {
  ((rows_cursor *)pCur)->iRow++;
  return SQLITE_OK;
}

static int rows_eof(sqlite3_vtab_cursor *pCur) {
  rows_cursor *c = (rows_cursor *)pCur;
  return !c->pSet || c->iRow >= c->pSet->nRow;
}

/* Hand value r of v to SQLite, TEXT and BLOB with xDel: SQLITE_TRANSIENT
** copies them (the csq table cursor's rows change, and SQLite may keep a
** value past the next row), SQLITE_STATIC lends them (a row set that
** outlives the statement). */
static void result_value(sqlite3_context *ctx, const csq_vec *v, uint32_t r, void (*xDel)(void *)) {
  switch (v->aCls[r]) {
  case CSQ_INT:
    sqlite3_result_int64(ctx, v->aVal[r].i);
    break;
  case CSQ_REAL:
    sqlite3_result_double(ctx, v->aVal[r].r);
    break;
  case CSQ_TEXT: /* an empty value may have no heap: a NULL pointer would make it NULL */
    sqlite3_result_text64(ctx, v->aLen[r] ? csq_vec_bytes(v, r) : "", v->aLen[r], xDel,
                          SQLITE_UTF8);
    break;
  case CSQ_BLOB:
    sqlite3_result_blob64(ctx, v->aLen[r] ? csq_vec_bytes(v, r) : "", v->aLen[r], xDel);
    break;
  default:
    break; /* NULL */
  }
}

void vt_result_value(sqlite3_context *ctx, const csq_vec *v, uint32_t r) {
  result_value(ctx, v, r, SQLITE_TRANSIENT);
}

void vt_result_value_kept(sqlite3_context *ctx, const csq_vec *v, uint32_t r) {
  result_value(ctx, v, r, SQLITE_STATIC);
}

static int rows_column(sqlite3_vtab_cursor *pCur, sqlite3_context *ctx, int i) {
  rows_cursor *c = (rows_cursor *)pCur;
  if (i >= 0 && i < c->pSet->nCol && c->iRow < c->pSet->aCol[i].n)
    vt_result_value_kept(ctx, &c->pSet->aCol[i], c->iRow);
  return SQLITE_OK;
}

static int rows_rowid(sqlite3_vtab_cursor *pCur, sqlite3_int64 *pRowid) {
  *pRowid = ((rows_cursor *)pCur)->iRow;
  return SQLITE_OK;
}

static sqlite3_module rows_module = {
    .xConnect = rows_connect,
    .xBestIndex = rows_best_index,
    .xDisconnect = rows_disconnect,
    .xOpen = rows_open,
    .xClose = rows_close,
    .xFilter = rows_filter,
    .xNext = rows_next,
    .xEof = rows_eof,
    .xColumn = rows_column,
    .xRowid = rows_rowid,
};

int vt_rows_register(sqlite3 *db) {
  return sqlite3_create_module(db, "csq_rows", &rows_module, NULL);
}

void vt_rowset_clear_order(vt_rowset *p) {
  for (int i = 0; p->aOrdered && i < p->nCol; i++) csq_vec_free(&p->aOrdered[i]);
  sqlite3_free(p->aOrdered);
  sqlite3_free(p->zOrder);
  p->aOrdered = NULL;
  p->zOrder = NULL;
}

void vt_rowset_clear(vt_rowset *p) {
  vt_rowset_clear_order(p);
  for (int i = 0; i < p->nCol; i++) csq_vec_free(&p->aCol[i]);
  sqlite3_free(p->aCol);
  memset(p, 0, sizeof(*p));
}
