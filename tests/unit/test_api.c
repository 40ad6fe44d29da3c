/*
** tests/unit/test_api.c - the public C API (ext/csq.h) as an embedding
** program uses it: csq registered with sqlite3_auto_extension, csq_prepare
** on aggregate queries and inner joins of csq tables (pushed, answers equal
** to the same query on native tables, bound parameters, few bytes to the
** host or few programs), on everything else (as
** written), view reuse, statement tails, and errors.
*/
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "ext/csq.h"
#include "tests/unit/helpers.h"

static void exec(sqlite3 *db, const char *z) {
  char *zErr = NULL;
  int rc = sqlite3_exec(db, z, NULL, NULL, &zErr);
  CHECK(rc == SQLITE_OK, "%s: %s", z, zErr ? zErr : "");
  sqlite3_free(zErr);
}

static sqlite3_int64 stat(sqlite3 *db, const char *zName) {
  sqlite3_stmt *p = NULL;
  sqlite3_int64 v = -1;
  if (sqlite3_prepare_v2(db, "SELECT value FROM csq_stats WHERE name = ?1", -1, &p, NULL) ==
      SQLITE_OK) {
    sqlite3_bind_text(p, 1, zName, -1, SQLITE_STATIC);
    if (sqlite3_step(p) == SQLITE_ROW) v = sqlite3_column_int64(p, 0);
  }
  sqlite3_finalize(p);
  return v;
}

/* Every row of a statement as text, one line per row ("|" between values,
** reals rounded so that summation order does not matter). */
static char *rows_text(sqlite3_stmt *p, int *pRc) {
  sqlite3_str *s = sqlite3_str_new(NULL);
  int rc;
  while ((rc = sqlite3_step(p)) == SQLITE_ROW) {
    for (int i = 0; i < sqlite3_column_count(p); i++) {
      if (i) sqlite3_str_appendchar(s, 1, '|');
      switch (sqlite3_column_type(p, i)) {
      case SQLITE_NULL:
        sqlite3_str_appendall(s, "NULL");
        break;
      case SQLITE_FLOAT:
        sqlite3_str_appendf(s, "%.9g", sqlite3_column_double(p, i));
        break;
      default:
        sqlite3_str_appendf(s, "%s", sqlite3_column_text(p, i));
        break;
      }
    }
    sqlite3_str_appendchar(s, 1, '\n');
  }
  *pRc = rc;
  return sqlite3_str_finish(s);
}

/* Substitute the table name into a query template ("%s" once). */
static char *q_for(const char *zTmpl, const char *zTab) {
  return sqlite3_mprintf(zTmpl, zTab);
}

typedef struct api_case {
  const char *zSql; /* %s = table */
  int bPushed;      /* expected from csq_stmt_pushed on the csq table */
  int nBind;        /* integer parameters bound as 1000 * i */
} api_case;

static const api_case aCase[] = {
    {"SELECT count(*), sum(x), avg(y), min(g), max(g) FROM %s", 1, 0},
    {"SELECT g, count(*), total(y) FROM %s WHERE x < ?1 GROUP BY g ORDER BY g", 1, 1},
    {"SELECT g, sum(x) FROM %s WHERE x BETWEEN ?1 AND ?2 GROUP BY 1 HAVING count(*) > 3 ORDER BY 2 "
     "DESC",
     1, 2},
    {"SELECT sum(x * y) FROM %s WHERE g IN ('a', 'c') AND y < 50.0", 1, 0},
    {"SELECT count(*) FROM %s WHERE x < ? AND y > ?", 1, 2},
    /* not aggregates: the table pushes their filters itself */
    {"SELECT x, y FROM %s WHERE x < 40 ORDER BY x", 0, 0},
    /* named parameters cannot become hidden columns */
    {"SELECT count(*) FROM %s WHERE x < :lim", 0, 1},
    /* a join is more than one table */
    {"SELECT count(*) FROM %s a, (SELECT 1 AS one) b WHERE a.x < 100", 0, 0},
};

static void step_all(sqlite3 *db, sqlite3_stmt *p) {
  int rc;
  while ((rc = sqlite3_step(p)) == SQLITE_ROW) {}
  CHECK(rc == SQLITE_DONE, "%s: %s", sqlite3_sql(p), sqlite3_errmsg(db));
  sqlite3_reset(p);
}

/* Statements kept prepared: a row inserted and deleted in a savepoint, a
** pushed read through csq_prepare (which writes the insert buffer to the
** device), ROLLBACK TO: the row is back. The buffer, all of its rows
** deleted, was left off the device, and the rollback had nothing to
** restore (found by test_diff_capi). */
static void rollback_to_after_a_pushed_read(sqlite3 *db) {
  exec(db, "CREATE VIRTUAL TABLE u USING csq(k INTEGER NOT NULL, v TEXT, pushdown='always')");
  sqlite3_stmt *pIns = NULL, *pDel = NULL, *pAgg = NULL, *pSp1 = NULL, *pRb1 = NULL, *pSp2 = NULL,
               *pRel = NULL, *pAll = NULL;
  CHECK(sqlite3_prepare_v2(db, "INSERT INTO u(k, v) VALUES (?1, ?2)", -1, &pIns, NULL) == 0);
  CHECK(sqlite3_prepare_v2(db, "DELETE FROM u WHERE k = ?1", -1, &pDel, NULL) == 0);
  CHECK(csq_prepare(db, "SELECT count(*), sum(k), max(rowid) FROM u", -1, &pAgg, NULL) == 0);
  CHECK(sqlite3_prepare_v2(db, "SAVEPOINT s1", -1, &pSp1, NULL) == 0);
  CHECK(sqlite3_prepare_v2(db, "ROLLBACK TO s1", -1, &pRb1, NULL) == 0);
  CHECK(sqlite3_prepare_v2(db, "SAVEPOINT s2", -1, &pSp2, NULL) == 0);
  CHECK(sqlite3_prepare_v2(db, "RELEASE s2", -1, &pRel, NULL) == 0);
  CHECK(sqlite3_prepare_v2(db, "SELECT group_concat(rowid || ':' || k) FROM u", -1, &pAll, NULL) ==
        0);
  step_all(db, pSp2);
  sqlite3_bind_int(pIns, 1, 12);
  sqlite3_bind_int(pIns, 2, 15);
  step_all(db, pIns);
  step_all(db, pSp1);
  sqlite3_bind_text(pDel, 1, "12", -1, SQLITE_STATIC);
  step_all(db, pDel);
  CHECK(sqlite3_step(pAgg) == SQLITE_ROW && sqlite3_column_int(pAgg, 0) == 0);
  sqlite3_reset(pAgg);
  step_all(db, pRb1);
  sqlite3_bind_int(pIns, 1, 25);
  sqlite3_bind_int(pIns, 2, 31);
  step_all(db, pIns);
  CHECK(sqlite3_last_insert_rowid(db) == 2, "%lld", (long long)sqlite3_last_insert_rowid(db));
  step_all(db, pRel);
  CHECK(sqlite3_step(pAll) == SQLITE_ROW &&
            strcmp((const char *)sqlite3_column_text(pAll, 0), "1:12,2:25") == 0,
        "%s", (const char *)sqlite3_column_text(pAll, 0));
  sqlite3_stmt *ap[] = {pIns, pDel, pAgg, pSp1, pRb1, pSp2, pRel, pAll};
  for (int i = 0; i < (int)(sizeof(ap) / sizeof(ap[0])); i++) sqlite3_finalize(ap[i]);
}

/* Joins: an inner join of csq tables is pushed (the view hashes it, so the
** devices run a handful of programs, not one per outer row), and so is a
** correlated [NOT] EXISTS over one csq table (a semi- or anti-join), and a
** LEFT join on numeric keys; a join with a native table is prepared as written. Every answer equals
*the
** same query over native tables, parameters bound through both. */
typedef struct join_case {
  const char *zSql; /* the fact table, then the dimension table (%s each) */
  int bPushed;
  int nBind;
  int aBind[2]; /* ?1 in the first run, then in the second */
} join_case;

static const join_case aJoin[] = {
    {"SELECT d.w, count(*), sum(f.x) FROM %s f JOIN %s d ON f.g = d.g WHERE f.x < ?1 "
     "GROUP BY d.w ORDER BY d.w",
     1,
     1,
     {5000, 2}},
    {"SELECT f.x, f.y, d.w FROM %s f, %s d WHERE f.g = d.g AND f.x < 60 AND d.w > ?1 "
     "ORDER BY f.x, f.y, d.w",
     1,
     1,
     {0, 2}},
    {"SELECT d.g, count(*) FROM %s f JOIN %s d ON f.g = d.g WHERE f.x IN (SELECT x FROM n WHERE "
     "y < 20.0) AND d.w < ?1 GROUP BY 1 ORDER BY 1",
     1,
     1,
     {5, 2}},
    {"SELECT count(*), sum(f.y), min(f.x) FROM %s f WHERE f.x < ?1 AND NOT EXISTS (SELECT 1 "
     "FROM %s d WHERE d.w = f.x)",
     1,
     1,
     {5000, 4}},
    {"SELECT f.g, count(*) FROM %s f WHERE f.x > ?1 AND EXISTS (SELECT * FROM %s d WHERE d.w = "
     "f.x AND d.g IS NOT NULL) GROUP BY 1 ORDER BY 1",
     1,
     1,
     {0, 2}},
    {"SELECT f.g, count(*), count(d.w), sum(d.w) FROM %s f LEFT JOIN %s d ON f.x = d.w WHERE f.x < "
     "?1 GROUP BY 1 ORDER BY 1",
     1,
     1,
     {9, 3}},
    {"SELECT count(*) FROM %s f JOIN n m ON f.x = m.x WHERE f.x < 30", 0, 0, {0, 0}},
};

static void joins(sqlite3 *db) {
  exec(db, "DELETE FROM t WHERE g = 'z'"); /* the row main() added: t and n agree again */
  exec(db, "CREATE VIRTUAL TABLE dm USING csq(g TEXT, w INTEGER);"
           "CREATE TABLE ndm(g TEXT, w INTEGER);");
  static const char *azRow[] = {"('a', 1)",  "('b', 2)",    "('a', 3)",
                                "(NULL, 4)", "('c', NULL)", "('d', 6)"};
  for (size_t i = 0; i < sizeof(azRow) / sizeof(azRow[0]); i++) {
    char *z =
        sqlite3_mprintf("INSERT INTO dm VALUES %s; INSERT INTO ndm VALUES %s", azRow[i], azRow[i]);
    exec(db, z);
    sqlite3_free(z);
  }
  for (size_t c = 0; c < sizeof(aJoin) / sizeof(aJoin[0]); c++) {
    char *zCsq = sqlite3_mprintf(aJoin[c].zSql, "t", "dm");
    char *zNat = sqlite3_mprintf(aJoin[c].zSql, "n", "ndm");
    sqlite3_stmt *pC = NULL, *pN = NULL;
    CHECK(csq_prepare(db, zCsq, -1, &pC, NULL) == SQLITE_OK && pC, "%s: %s", zCsq,
          sqlite3_errmsg(db));
    CHECK(sqlite3_prepare_v2(db, zNat, -1, &pN, NULL) == SQLITE_OK, "%s", zNat);
    CHECK(csq_stmt_pushed(pC) == aJoin[c].bPushed, "%s: pushed %d", zCsq, csq_stmt_pushed(pC));
    for (int run = 0; pC && pN && run < 2; run++) {
      for (int i = 1; i <= aJoin[c].nBind; i++) {
        sqlite3_bind_int64(pC, i, aJoin[c].aBind[run]);
        sqlite3_bind_int64(pN, i, aJoin[c].aBind[run]);
      }
      sqlite3_exec(db, "SELECT csq_stats_reset()", NULL, NULL, NULL);
      int rcC, rcN;
      char *zA = rows_text(pC, &rcC);
      sqlite3_int64 nProg = stat(db, "programs_executed");
      char *zB = rows_text(pN, &rcN);
      CHECK(rcC == SQLITE_DONE && rcN == SQLITE_DONE, "%s: %d %d", zCsq, rcC, rcN);
      CHECK(zA && zB && zB[0] && strcmp(zA, zB) == 0, "%s run %d:\ncsq:\n%.300snative:\n%.300s",
            zCsq, run, zA, zB);
      if (aJoin[c].bPushed)
        CHECK(nProg > 0 && nProg <= 32, "%s: %lld programs", zCsq, (long long)nProg);
      sqlite3_free(zA);
      sqlite3_free(zB);
      sqlite3_reset(pC);
      sqlite3_reset(pN);
    }
    sqlite3_finalize(pC);
    sqlite3_finalize(pN);
    sqlite3_free(zCsq);
    sqlite3_free(zNat);
  }
}

int main(void) {
  sqlite3_auto_extension((void (*)(void))sqlite3_csq_init);
  sqlite3 *db = NULL;
  CHECK(sqlite3_open(":memory:", &db) == SQLITE_OK);
  exec(db, "CREATE VIRTUAL TABLE t USING csq(g TEXT, x INTEGER, y REAL);"
           "CREATE TABLE n(g TEXT, x INTEGER, y REAL);");
  exec(db, "BEGIN");
  sqlite3_stmt *pIns = NULL;
  CHECK(sqlite3_prepare_v2(db, "INSERT INTO t VALUES(?1, ?2, ?3)", -1, &pIns, NULL) == SQLITE_OK);
  sqlite3_stmt *pInsN = NULL;
  CHECK(sqlite3_prepare_v2(db, "INSERT INTO n VALUES(?1, ?2, ?3)", -1, &pInsN, NULL) == SQLITE_OK);
  static const char *azG[] = {"a", "b", "c", "d", NULL};
  for (int i = 0; i < 40000; i++) {
    const char *g = azG[rndn(5)];
    sqlite3_int64 x = (sqlite3_int64)rndn(10000);
    double y = (double)rndn(10000) / 100.0;
    sqlite3_stmt *ap[2] = {pIns, pInsN};
    for (int k = 0; k < 2; k++) {
      if (g)
        sqlite3_bind_text(ap[k], 1, g, -1, SQLITE_STATIC);
      else
        sqlite3_bind_null(ap[k], 1);
      sqlite3_bind_int64(ap[k], 2, x);
      if (i % 97)
        sqlite3_bind_double(ap[k], 3, y);
      else
        sqlite3_bind_null(ap[k], 3);
      CHECK(sqlite3_step(ap[k]) == SQLITE_DONE);
      sqlite3_reset(ap[k]);
    }
  }
  sqlite3_finalize(pIns);
  sqlite3_finalize(pInsN);
  exec(db, "COMMIT");

  for (size_t c = 0; c < sizeof(aCase) / sizeof(aCase[0]); c++) {
    char *zCsq = q_for(aCase[c].zSql, "t"), *zNat = q_for(aCase[c].zSql, "n");
    sqlite3_stmt *pC = NULL, *pN = NULL;
    int rc = csq_prepare(db, zCsq, -1, &pC, NULL);
    CHECK(rc == SQLITE_OK && pC, "%s: %s", zCsq, sqlite3_errmsg(db));
    CHECK(sqlite3_prepare_v2(db, zNat, -1, &pN, NULL) == SQLITE_OK);
    CHECK(csq_stmt_pushed(pC) == aCase[c].bPushed, "%s: pushed %d", zCsq, csq_stmt_pushed(pC));
    CHECK(!csq_stmt_pushed(pN));
    CHECK(pC && sqlite3_column_count(pC) == sqlite3_column_count(pN), "%s", zCsq);
    CHECK(pC && sqlite3_bind_parameter_count(pC) == aCase[c].nBind, "%s: %d params", zCsq,
          pC ? sqlite3_bind_parameter_count(pC) : -1);
    for (int run = 0; pC && run < 2; run++) { /* bindings survive a reset, as SQLite's do */
      for (int i = 1; i <= aCase[c].nBind; i++) {
        sqlite3_bind_int64(pC, i, 1000 * i + 1000 * run);
        sqlite3_bind_int64(pN, i, 1000 * i + 1000 * run);
      }
      sqlite3_exec(db, "SELECT csq_stats_reset()", NULL, NULL, NULL);
      int rcC, rcN;
      char *zA = rows_text(pC, &rcC), *zB = rows_text(pN, &rcN);
      CHECK(rcC == SQLITE_DONE && rcN == SQLITE_DONE, "%s: %d %d", zCsq, rcC, rcN);
      CHECK(zA && zB && strcmp(zA, zB) == 0, "%s run %d:\ncsq:\n%snative:\n%s", zCsq, run, zA, zB);
      if (aCase[c].bPushed && c < 4)
        CHECK(stat(db, "programs_executed") > 0 && stat(db, "bytes_to_host") < 64 * 1024,
              "%s: %lld programs, %lld bytes to host", zCsq, stat(db, "programs_executed"),
              stat(db, "bytes_to_host"));
      sqlite3_free(zA);
      sqlite3_free(zB);
      sqlite3_reset(pC);
      sqlite3_reset(pN);
    }
    if (c == 0 && pC) CHECK(strcmp(sqlite3_column_name(pC, 1), "sum(x)") == 0);
    sqlite3_finalize(pC);
    sqlite3_finalize(pN);
    sqlite3_free(zCsq);
    sqlite3_free(zNat);
  }

  /* the same text again reuses its view; another text gets its own */
  sqlite3_stmt *p = NULL;
  CHECK(sqlite3_prepare_v2(db, "SELECT count(*) FROM temp.sqlite_schema", -1, &p, NULL) ==
        SQLITE_OK);
  CHECK(sqlite3_step(p) == SQLITE_ROW);
  int nViews = sqlite3_column_int(p, 0);
  sqlite3_reset(p);
  sqlite3_stmt *pC = NULL;
  char *zAgain = q_for(aCase[0].zSql, "t");
  CHECK(csq_prepare(db, zAgain, -1, &pC, NULL) == SQLITE_OK && csq_stmt_pushed(pC));
  sqlite3_finalize(pC);
  sqlite3_free(zAgain);
  CHECK(sqlite3_step(p) == SQLITE_ROW && sqlite3_column_int(p, 0) == nViews, "views %d -> %d",
        nViews, sqlite3_column_int(p, 0));
  sqlite3_finalize(p);

  /* several statements: the tail points after the first, as sqlite3_prepare_v2's */
  const char *zTwo = "SELECT max(x) FROM t; SELECT 42";
  const char *zTail = NULL;
  CHECK(csq_prepare(db, zTwo, -1, &pC, &zTail) == SQLITE_OK && csq_stmt_pushed(pC));
  CHECK(zTail && strcmp(zTail, " SELECT 42") == 0, "tail '%s'", zTail ? zTail : "(null)");
  CHECK(sqlite3_step(pC) == SQLITE_ROW && sqlite3_column_int(pC, 0) <= 9999);
  sqlite3_finalize(pC);

  /* anything else is prepared as written */
  CHECK(csq_prepare(db, "INSERT INTO t VALUES('z', 1, 2.0)", -1, &pC, NULL) == SQLITE_OK &&
        !csq_stmt_pushed(pC));
  CHECK(sqlite3_step(pC) == SQLITE_DONE);
  sqlite3_finalize(pC);
  CHECK(csq_prepare(db, "SELECT count(*) FROM n", -1, &pC, NULL) == SQLITE_OK &&
        !csq_stmt_pushed(pC));
  sqlite3_finalize(pC);
  CHECK(csq_prepare(db, "  -- nothing\n", -1, &pC, NULL) == SQLITE_OK && pC == NULL);

  /* errors are SQLite's own */
  pC = (sqlite3_stmt *)1;
  CHECK(csq_prepare(db, "SELECT count(* FROM t", -1, &pC, NULL) == SQLITE_ERROR && pC == NULL);
  CHECK(strstr(sqlite3_errmsg(db), "syntax error") != NULL, "%s", sqlite3_errmsg(db));
  CHECK(csq_prepare(db, "SELECT sum(nope) FROM t", -1, &pC, NULL) == SQLITE_ERROR && pC == NULL);
  CHECK(strstr(sqlite3_errmsg(db), "no such column: nope") != NULL, "%s", sqlite3_errmsg(db));
  /* a failure while running is reported by step, with the query's message */
  CHECK(csq_prepare(db, "SELECT sum(x) FROM t WHERE x < ?1", -1, &pC, NULL) == SQLITE_OK &&
        csq_stmt_pushed(pC));
  sqlite3_bind_int64(pC, 1, 100);
  CHECK(sqlite3_step(pC) == SQLITE_ROW);
  sqlite3_finalize(pC);

  joins(db);
  rollback_to_after_a_pushed_read(db);

  sqlite3_close(db);
  sqlite3_reset_auto_extension();
  printf("test_api: %d checks, %d failed\n", nCheck, nFail);
  return nFail ? 1 : 0;
}
