/*
** ext/api.c - the public C API of ext/csq.h: csq_prepare(), which returns an
** ordinary sqlite3_stmt that reads a pushdown view when the query can be
** pushed down whole, and the statement as written otherwise.
**
** The decision is deliberately simple and cheap: an aggregate SELECT over
** one csq table, or an inner join of csq tables, gains from a view (a
** filter-only query over one table already has its filter pushed by the csq
** table itself), and the view falls back to
** plain SQL at run time for anything its planner cannot split, so wrapping
** can never change an answer. Parameters must be ? or ?N because the view
** exposes them as hidden columns p1..pN, which the wrapper statement binds
** in the same order, so the caller's sqlite3_bind_* calls work unchanged.
*/
#include <string.h>
#include <xxhash.h>

#include "ext/csq.h"
#include "planner/join.h"
#include "planner/parse.h"
#include "vtab/vtab.h"

#define API_VIEW_PREFIX "csq_prepared_"

/* 1 if zTable in schema zDb (NULL: main or temp, as SQLite resolves an
** unqualified name) is a csq table. */
static int is_csq_table(sqlite3 *db, const char *zDb, const char *zTable) {
  const char *azDb[2] = {"temp", "main"};
  int nDb = 2;
  if (zDb) {
    azDb[0] = zDb;
    nDb = 1;
  }
  for (int i = 0; i < nDb; i++) {
    char *zSql = sqlite3_mprintf("SELECT sql FROM \"%w\".sqlite_schema WHERE type = 'table' AND "
                                 "name = ?1 COLLATE NOCASE",
                                 azDb[i]);
    sqlite3_stmt *p = NULL;
    int bFound = 0, bCsq = 0;
    if (zSql && sqlite3_prepare_v2(db, zSql, -1, &p, NULL) == SQLITE_OK) {
      sqlite3_bind_text(p, 1, zTable, -1, SQLITE_STATIC);
      if (sqlite3_step(p) == SQLITE_ROW) {
        const char *z = (const char *)sqlite3_column_text(p, 0);
        bFound = 1;
        /* CREATE VIRTUAL TABLE x USING csq(...): the module name follows USING */
        for (; z && *z; z++) {
          if (sqlite3_strnicmp(z, "USING", 5) == 0) {
            const char *m = z + 5;
            while (*m == ' ' || *m == '\t' || *m == '\n' || *m == '\r') m++;
            if (sqlite3_strnicmp(m, "csq", 3) == 0 && (m[3] == '(' || m[3] == ' ' || !m[3]))
              bCsq = 1;
            break;
          }
        }
      }
    }
    sqlite3_finalize(p);
    sqlite3_free(zSql);
    if (bFound) return bCsq;
  }
  return 0;
}

/*
** 1 if the statement text zSql[0..n) is worth a pushdown view: an aggregate
** over one csq table (the device computes partial aggregates), or a join
** whose every FROM item is a csq table, inner or LEFT joined (the view's
** planner runs it as hash joins with join filters on the devices, where
** SQLite would run nested loops), or one csq table with a [NOT] EXISTS
** (a semi- or anti-join). A native table in the FROM list stays with
** SQLite: the view would only hand it back.
*/
static int worth_a_view(sqlite3 *db, const char *zSql, int n) {
  pl_ast *a = NULL;
  int bSub = 0; /* subqueries: the join planner takes uncorrelated ones */
  if (pl_parse(zSql, n, &a, NULL) != PL_OK) {
    if (pl_parse_opt(zSql, n, PL_PARSE_SUBQUERY, &a, NULL) != PL_OK) return 0;
    bSub = 1;
  }
  int bOk = a->zTable != NULL &&
            (bSub ? a->nFrom > 1 || pl_join_has_exists(a->pWhere) : a->bAgg || a->nFrom > 1);
  for (int i = 0; bOk && i < a->nParam; i++)
    if (a->azParam && a->azParam[i] && a->azParam[i][0] != '?') bOk = 0; /* :name, @name, $name */
  for (int i = 0; bOk && i < a->nFrom; i++)
    bOk = is_csq_table(db, a->aFrom[i].zDb, a->aFrom[i].zTable);
  pl_ast_free(a);
  return bOk;
}

/*
** Prepare "SELECT * FROM temp.<view>(?1, ..., ?N)" over a csq_query view of
** zSql[0..n) with nParam parameters, creating the view if this text has none
** yet. Returns SQLite's code; on error *ppStmt is NULL and db's message says
** why.
*/
static int prepare_view(sqlite3 *db, const char *zSql, int n, int nParam, sqlite3_stmt **ppStmt) {
  char zName[64];
  sqlite3_snprintf(sizeof(zName), zName, API_VIEW_PREFIX "%016llx",
                   (unsigned long long)XXH3_64bits(zSql, (size_t)n));
  char *zCreate = sqlite3_mprintf("CREATE VIRTUAL TABLE IF NOT EXISTS temp.\"%w\" USING "
                                  "csq_query('%.*q')",
                                  zName, n, zSql);
  if (!zCreate) return SQLITE_NOMEM;
  int rc = sqlite3_exec(db, zCreate, NULL, NULL, NULL);
  if (rc == SQLITE_OK) {
    /* a view of that name must be of this very text: the hash could collide */
    sqlite3_stmt *p = NULL;
    rc = sqlite3_prepare_v2(db, "SELECT sql FROM temp.sqlite_schema WHERE name = ?1", -1, &p, NULL);
    if (rc == SQLITE_OK) {
      sqlite3_bind_text(p, 1, zName, -1, SQLITE_STATIC);
      const char *zHave =
          sqlite3_step(p) == SQLITE_ROW ? (const char *)sqlite3_column_text(p, 0) : 0;
      /* SQLite stores the statement with "IF NOT EXISTS" and "temp." removed */
      const char *zArgs = zHave ? strstr(zHave, "csq_query(") : NULL;
      const char *zWant = strstr(zCreate, "csq_query(");
      if (!zArgs || strcmp(zArgs, zWant) != 0) rc = SQLITE_MISMATCH;
    }
    sqlite3_finalize(p);
  }
  sqlite3_free(zCreate);
  if (rc != SQLITE_OK) return rc;
  sqlite3_str *s = sqlite3_str_new(db);
  sqlite3_str_appendf(s, "SELECT * FROM temp.\"%w\"", zName);
  if (nParam > 0) {
    sqlite3_str_appendchar(s, 1, '(');
    for (int i = 1; i <= nParam; i++) sqlite3_str_appendf(s, "%s?%d", i > 1 ? ", " : "", i);
    sqlite3_str_appendchar(s, 1, ')');
  }
  char *zWrap = sqlite3_str_finish(s);
  if (!zWrap) return SQLITE_NOMEM;
  rc = sqlite3_prepare_v2(db, zWrap, -1, ppStmt, NULL);
  sqlite3_free(zWrap);
  return rc;
}

int csq_prepare(sqlite3 *db, const char *zSql, int nByte, sqlite3_stmt **ppStmt,
                const char **pzTail) {
  const char *zTail = NULL;
  sqlite3_stmt *pStmt = NULL;
  *ppStmt = NULL;
  /* SQLite checks the statement and finds where it ends */
  int rc = sqlite3_prepare_v2(db, zSql, nByte, &pStmt, &zTail);
  if (pzTail) *pzTail = zTail;
  if (rc != SQLITE_OK || !pStmt) {
    *ppStmt = pStmt;
    return rc;
  }
  int bSelect = sqlite3_stmt_readonly(pStmt) && sqlite3_column_count(pStmt) > 0;
  int n = (int)(zTail - zSql);
  while (n > 0 && (zSql[n - 1] == ';' || zSql[n - 1] == ' ' || zSql[n - 1] == '\t' ||
                   zSql[n - 1] == '\n' || zSql[n - 1] == '\r'))
    n--;
  if (bSelect && worth_a_view(db, zSql, n)) {
    sqlite3_stmt *pView = NULL;
    int nParam = sqlite3_bind_parameter_count(pStmt);
    if (prepare_view(db, zSql, n, nParam, &pView) == SQLITE_OK) {
      sqlite3_finalize(pStmt);
      *ppStmt = pView;
      return SQLITE_OK;
    }
    /* the view could not be made (out of memory, a read-only temp schema):
    ** the statement as written gives the same answer */
    sqlite3_finalize(pView);
  }
  *ppStmt = pStmt;
  return SQLITE_OK;
}

int csq_stmt_pushed(sqlite3_stmt *pStmt) {
  const char *z = pStmt ? sqlite3_sql(pStmt) : NULL;
  static const char zPrefix[] = "SELECT * FROM temp.\"" API_VIEW_PREFIX;
  return z && strncmp(z, zPrefix, sizeof(zPrefix) - 1) == 0;
}
