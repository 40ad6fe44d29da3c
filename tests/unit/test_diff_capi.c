/*
** tests/unit/test_diff_capi.c - differential writes through the C API
** (issue 15): two connections, one with csq tables (sqlite3_csq_init,
** linked from libcsq.a, registered with sqlite3_auto_extension) and one with native tables of the
** same names, each with a fixed set of parameterised statements prepared
** once and re-stepped thousands of times with random binds: inserts in
** every conflict mode, updates (of the rowid too), deletes, reads kept
** prepared and re-run after writes, aggregate and join reads (semi-, anti-
** and LEFT joins and a correlated count among them) through
** csq_prepare (pushdown views), transactions and savepoints, a SELECT left unfinished
** while writes happen, statements finalized and re-prepared (the same SQL,
** or swapped, so that a new statement gets a finished one's address), and
** the connections closed and reopened. After every step the two sides
** must agree: rows, result code and message, changes(), total_changes(),
** last_insert_rowid(), autocommit. The native side is the oracle.
**
** Rounds start from fresh databases so that one mismatch does not hide
** the next; each failing round prints its last steps as a reproducer.
** CSQ_DIFF_SEED seeds it, CSQ_DIFF_SCALE scales the steps (a quarter under
** AddressSanitizer). Exit 0 pass, 1 fail.
**
** Shrinking a failing round: CSQ_DIFF_ROUND=N runs round N alone, and
** CSQ_DIFF_SKIP=3,8,10-200 leaves those steps out (every step draws its
** random values whether it runs or not, so the others stay as they were):
** skip what the failure does not need, and the log is the reproducer.
*/
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ext/csq.h"
#include "tests/unit/helpers.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* ------------------------------------------------------------ statements */

typedef struct op {
  const char *zSql;
  const char *zBinds; /* one letter per ?N: i a rowid, v any value, o a shift
                      ** larger than the span of the rowids t holds */
  char cKind;         /* w write, r read, p read through csq_prepare, t transaction */
} op;

static const op aOp[] = {
    {"INSERT INTO t(id, a, b, c, d) VALUES (?1, ?2, ?3, ?4, ?5)", "ivvvv", 'w'},
    {"INSERT OR IGNORE INTO t(id, a, b, c, d) VALUES (?1, ?2, ?3, ?4, ?5)", "ivvvv", 'w'},
    {"INSERT OR REPLACE INTO t(id, a, b, c, d) VALUES (?1, ?2, ?3, ?4, ?5)", "ivvvv", 'w'},
    {"INSERT OR FAIL INTO t(id, a, b, c, d) VALUES (?1, ?2, ?3, ?4, ?5), (?1 + 1, ?2, ?3, ?4, "
     "?5)",
     "ivvvv", 'w'},
    {"INSERT INTO t(a, b, c, d) SELECT a + ?1, b, c, d FROM t WHERE id > ?2 ORDER BY id LIMIT 3",
     "vi", 'w'},
    {"UPDATE t SET a = ?1, b = ?2 WHERE id = ?3", "vvi", 'w'},
    {"UPDATE OR IGNORE t SET id = ?1 WHERE id = ?2", "ii", 'w'},
    {"UPDATE t SET c = c + ?1 WHERE a BETWEEN ?2 AND ?3", "vvv", 'w'},
    {"DELETE FROM t WHERE a < ?1", "v", 'w'},
    {"DELETE FROM t WHERE id = ?1", "i", 'w'},
    {"UPDATE OR REPLACE t SET id = ?1 WHERE id = ?2", "ii", 'w'},
    /* limit L (README "Row order"): csq visits rows in storage order, so a
    ** multi-row UPDATE whose rowid changes can collide, and what OR FAIL
    ** changed before it failed, depend on the order. OR FAIL over several
    ** rows shifts them past the table's rowid range (o: no collision, no
    ** failure possible: the top rows go below the others, the bottom ones
    ** above, so the span of rowids stays as it was); a collision is tried
    ** on one row at a time. */
    {"UPDATE OR FAIL t SET a = a + 1, id = id - ?1 WHERE id >= ?2", "oi", 'w'},
    {"UPDATE t SET c = c - 1, id = id + ?1 WHERE id <= ?2", "oi", 'w'},
    {"UPDATE OR FAIL t SET a = a + 1, id = ?1 WHERE id = ?2", "ii", 'w'},
    {"INSERT INTO u(k, v) VALUES (?1, ?2)", "vv", 'w'},
    {"INSERT OR REPLACE INTO u(rowid, k, v) VALUES (?1, ?2, ?3)", "ivv", 'w'},
    {"DELETE FROM u WHERE k = ?1", "v", 'w'},
    {"UPDATE u SET v = ?2 WHERE k = ?1", "vv", 'w'},
    {"SELECT count(*), sum(a), total(c), min(b), max(b), max(id) FROM t", "", 'r'},
    {"SELECT id, a, b, c, d FROM t WHERE a >= ?1 ORDER BY id", "v", 'r'},
    {"SELECT rowid, * FROM t ORDER BY rowid", "", 'r'},
    /* CAST: 29.5 % 5 is 4.0 and 4 % 5 is 4, equal keys of two classes, and
    ** which one a group shows depends on row order */
    {"SELECT CAST(a AS INTEGER) % 5, count(*), sum(a), total(c) FROM t GROUP BY 1 ORDER BY 1", "",
     'p'},
    {"SELECT count(*), sum(k), max(rowid) FROM u", "", 'p'},
    {"SELECT count(*), sum(a) FROM t WHERE a > ?1", "v", 'p'},
    /* inner joins of csq tables: csq_prepare pushes them (hashed by the view) */
    {"SELECT u.v, count(*), sum(t.c) FROM t JOIN u ON t.a = u.k GROUP BY u.v ORDER BY 1", "", 'p'},
    {"SELECT t.id, t.b, u.rowid, u.v FROM t, u WHERE t.a = u.k AND t.id > ?1 ORDER BY 1, 3", "i",
     'p'},
    /* grouped in csq's host engine, CASE conditions with a parameter */
    {"SELECT u.v, count(*), sum(CASE WHEN t.a > ?1 OR t.b LIKE 'x%' THEN 1 ELSE 0 END), "
     "min(t.c), max(t.a) FROM t JOIN u ON t.a = u.k GROUP BY u.v",
     "v", 'p'},
    /* semi-, anti- and LEFT joins and a correlated count, planned the same way */
    {"SELECT count(*), max(t.id) FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.a AND u.v IS "
     "NOT NULL)",
     "", 'p'},
    {"SELECT count(*), min(t.id) FROM t WHERE NOT EXISTS (SELECT * FROM u WHERE u.k = t.a)", "",
     'p'},
    {"SELECT count(*), count(u.v), max(t.id) FROM t LEFT JOIN u ON u.k = t.a AND u.v > ?1", "v",
     'p'},
    {"SELECT count(*), max(t.id), count(w.v) FROM t, u AS w WHERE w.k = t.a AND t.a >= (SELECT "
     "count(*) FROM u WHERE u.k = t.a)",
     "", 'p'},
    /* a subquery's value bound, an IN subquery run first, a one-table
    ** correlated count: all run through the planner at each step */
    {"SELECT u.v, count(*) FROM t JOIN u ON t.a = u.k GROUP BY u.v HAVING count(*) >= (SELECT "
     "count(*) / 4 FROM t, u AS w WHERE t.a = w.k) ORDER BY 1",
     "", 'p'},
    {"SELECT count(*), max(t.id) FROM t, u WHERE t.a = u.k AND t.a IN (SELECT k FROM u GROUP BY k "
     "HAVING count(*) > 1)",
     "", 'p'},
    {"SELECT count(*), max(t.id) FROM t WHERE t.c < (SELECT count(*) FROM u WHERE u.k = t.a)", "",
     'p'},
    {"SELECT count(*), max(t.id) FROM t WHERE t.c >= (SELECT count(*) FROM u, t AS t2 WHERE u.k "
     "= t2.a AND u.k = t.a)",
     "", 'p'},
    {"SELECT last_insert_rowid(), changes(), total_changes()", "", 'r'},
    {"SELECT t.id, u.rowid FROM t JOIN u ON t.a = u.k ORDER BY 1, 2", "", 'r'},
    {"SELECT * FROM t WHERE id BETWEEN ?1 AND ?2 ORDER BY id", "ii", 'r'},
    {"SELECT rowid, k, v FROM u ORDER BY rowid", "", 'r'},
    {"BEGIN", "", 't'},
    {"COMMIT", "", 't'},
    {"ROLLBACK", "", 't'},
    {"SAVEPOINT s1", "", 't'},
    {"RELEASE s1", "", 't'},
    {"ROLLBACK TO s1", "", 't'},
    {"SAVEPOINT s2", "", 't'},
    {"ROLLBACK TO s2", "", 't'},
};
#define N_OP ((int)(sizeof(aOp) / sizeof(aOp[0])))

/* the statement left unfinished while writes happen */
static const char *zOpenSql = "SELECT id, a, b FROM t WHERE id > ?1 ORDER BY id";

/* ------------------------------------------------------------ values */

typedef struct val {
  int eType; /* SQLITE_INTEGER, _FLOAT, _TEXT, _BLOB, _NULL */
  sqlite3_int64 i;
  double r;
  const char *z;
} val;

static const char *azText[] = {"abc",   "",    "12",   " 12", "1e3", "north",
                               "south", "x y", "0x10", "-7",  "3.0", "\xc3\xa9t\xc3\xa9"};

static val rnd_val(int eBias) {
  val v;
  memset(&v, 0, sizeof(v));
  int k = (int)rndn(10);
  if (k == 0) {
    v.eType = SQLITE_NULL;
  } else if (k <= 3 || (eBias == SQLITE_INTEGER && k <= 7)) {
    v.eType = SQLITE_INTEGER;
    v.i = (sqlite3_int64)rndn(45) - 5;
    if (rndn(20) == 0) v.i = rndn(2) ? 4294967296LL : -9007199254740993LL;
  } else if (k <= 5) {
    v.eType = SQLITE_FLOAT;
    v.r = (double)((int64_t)rndn(200000) - 100000) / 100.0;
    if (rndn(10) == 0) v.r = 2.0;
  } else if (k <= 8) {
    v.eType = SQLITE_TEXT;
    v.z = azText[rndn(sizeof(azText) / sizeof(azText[0]))];
  } else {
    v.eType = SQLITE_BLOB;
    v.z = rndn(2) ? "\x01\x02" : "ab";
  }
  return v;
}

/* a rowid: mostly one the table may hold, sometimes far, NULL, or not an integer */
static val rnd_id(void) {
  val v;
  memset(&v, 0, sizeof(v));
  int k = (int)rndn(20);
  v.eType = SQLITE_INTEGER;
  if (k < 14)
    v.i = (sqlite3_int64)rndn(60) + 1;
  else if (k < 16)
    v.eType = SQLITE_NULL;
  else if (k == 16)
    v.i = -(sqlite3_int64)rndn(5);
  else if (k == 17)
    v.i = 1000 + (sqlite3_int64)rndn(10);
  else if (k == 18) {
    v.eType = SQLITE_TEXT;
    v.z = rndn(2) ? "7" : "x";
  } else {
    v.eType = SQLITE_FLOAT;
    v.r = rndn(2) ? 3.0 : 2.5;
  }
  return v;
}

static void bind_val(sqlite3_stmt *p, int i, const val *v) {
  switch (v->eType) {
  case SQLITE_INTEGER:
    sqlite3_bind_int64(p, i, v->i);
    break;
  case SQLITE_FLOAT:
    sqlite3_bind_double(p, i, v->r);
    break;
  case SQLITE_TEXT:
    sqlite3_bind_text(p, i, v->z, -1, SQLITE_STATIC);
    break;
  case SQLITE_BLOB:
    sqlite3_bind_blob(p, i, v->z, (int)strlen(v->z), SQLITE_STATIC);
    break;
  default:
    sqlite3_bind_null(p, i);
    break;
  }
}

static void val_text(sqlite3_str *s, const val *v) {
  switch (v->eType) {
  case SQLITE_INTEGER:
    sqlite3_str_appendf(s, "%lld", v->i);
    break;
  case SQLITE_FLOAT:
    sqlite3_str_appendf(s, "%!.17g", v->r);
    break;
  case SQLITE_TEXT:
    sqlite3_str_appendf(s, "%Q", v->z);
    break;
  case SQLITE_BLOB: {
    sqlite3_str_appendall(s, "X'");
    for (const char *z = v->z; *z; z++) sqlite3_str_appendf(s, "%02x", (unsigned char)*z);
    sqlite3_str_appendall(s, "'");
    break;
  }
  default:
    sqlite3_str_appendall(s, "NULL");
  }
}

/* ------------------------------------------------------------ the two sides */

typedef struct side {
  sqlite3 *db;
  sqlite3_stmt *ap[N_OP];
  sqlite3_stmt *pOpen; /* the unfinished SELECT */
  int bOpenBusy;       /* pOpen stepped and not yet reset */
} side;

static side aSide[2]; /* 0: csq, 1: native */
static char zDir[256];
static int bCsqOnly; /* set when a csq-only setup step fails */
static uint64_t seed;

static int prepare_op(int s, int i) {
  sqlite3_stmt **pp = &aSide[s].ap[i];
  int rc;
  if (s == 0 && aOp[i].cKind == 'p')
    rc = csq_prepare(aSide[s].db, aOp[i].zSql, -1, pp, NULL);
  else
    rc = sqlite3_prepare_v2(aSide[s].db, aOp[i].zSql, -1, pp, NULL);
  if (rc != SQLITE_OK) {
    printf("FAIL prepare on %s: %s: %s\n", s ? "native" : "csq", aOp[i].zSql,
           sqlite3_errmsg(aSide[s].db));
    return rc;
  }
  return SQLITE_OK;
}

static void close_side(int s) {
  side *p = &aSide[s];
  for (int i = 0; i < N_OP; i++) {
    sqlite3_finalize(p->ap[i]);
    p->ap[i] = NULL;
  }
  sqlite3_finalize(p->pOpen);
  p->pOpen = NULL;
  p->bOpenBusy = 0;
  sqlite3_close(p->db);
  p->db = NULL;
}

static int open_side(int s, int bCreate, const char *zOpts) {
  side *p = &aSide[s];
  char zPath[300];
  snprintf(zPath, sizeof(zPath), "%s/%s.db", zDir, s ? "native" : "csq");
  /* csq registered for the csq side's connection only (as an embedding
  ** program does, through sqlite3_auto_extension) */
  if (s == 0) sqlite3_auto_extension((void (*)(void))sqlite3_csq_init);
  int rcOpen = sqlite3_open(zPath, &p->db);
  if (s == 0) sqlite3_cancel_auto_extension((void (*)(void))sqlite3_csq_init);
  if (rcOpen != SQLITE_OK) {
    printf("FAIL open %s: %s\n", zPath, sqlite3_errmsg(p->db));
    return 1;
  }
  if (bCreate) {
    char *z;
    if (s == 0)
      z = sqlite3_mprintf(
          "CREATE VIRTUAL TABLE t USING csq(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, c REAL, "
          "d%s);"
          "CREATE VIRTUAL TABLE u USING csq(k INTEGER NOT NULL, v TEXT%s);",
          zOpts, zOpts);
    else
      z = sqlite3_mprintf("CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, c REAL, d);"
                          "CREATE TABLE u(k INTEGER NOT NULL, v TEXT);");
    char *zErr = NULL;
    int rc = sqlite3_exec(p->db, z, NULL, NULL, &zErr);
    sqlite3_free(z);
    if (rc != SQLITE_OK) {
      printf("FAIL create (%s): %s\n", s ? "native" : "csq", zErr ? zErr : "?");
      sqlite3_free(zErr);
      bCsqOnly = 1;
      return 1;
    }
  }
  for (int i = 0; i < N_OP; i++)
    if (prepare_op(s, i)) return 1;
  if (sqlite3_prepare_v2(p->db, zOpenSql, -1, &p->pOpen, NULL) != SQLITE_OK) return 1;
  return 0;
}

/* ------------------------------------------------------------ results */

/* What one step did on one side, as text: rows, then the result code and
** message, then the connection's counters. */
static char *run_stmt(int s, sqlite3_stmt *p) {
  sqlite3 *db = aSide[s].db;
  sqlite3_str *out = sqlite3_str_new(NULL);
  int rc;
  while ((rc = sqlite3_step(p)) == SQLITE_ROW) {
    int n = sqlite3_column_count(p);
    for (int i = 0; i < n; i++) {
      if (i) sqlite3_str_appendchar(out, 1, '|');
      switch (sqlite3_column_type(p, i)) {
      case SQLITE_INTEGER:
        sqlite3_str_appendf(out, "%lld", sqlite3_column_int64(p, i));
        break;
      case SQLITE_FLOAT:
        /* 12 digits: the summation order of a csq aggregate may differ */
        sqlite3_str_appendf(out, "r%!.12g", sqlite3_column_double(p, i));
        break;
      case SQLITE_TEXT:
        sqlite3_str_appendf(out, "'%s'", (const char *)sqlite3_column_text(p, i));
        break;
      case SQLITE_BLOB: {
        const unsigned char *a = sqlite3_column_blob(p, i);
        int nb = sqlite3_column_bytes(p, i);
        sqlite3_str_appendall(out, "x'");
        for (int j = 0; j < nb; j++) sqlite3_str_appendf(out, "%02x", a[j]);
        sqlite3_str_appendall(out, "'");
        break;
      }
      default:
        sqlite3_str_appendall(out, "NULL");
      }
    }
    sqlite3_str_appendchar(out, 1, '\n');
  }
  if (rc != SQLITE_DONE) sqlite3_str_appendf(out, "error %d: %s\n", rc & 0xff, sqlite3_errmsg(db));
  sqlite3_reset(p);
  sqlite3_clear_bindings(p);
  sqlite3_str_appendf(out, "changes %d total %d last %lld autocommit %d", sqlite3_changes(db),
                      sqlite3_total_changes(db), sqlite3_last_insert_rowid(db),
                      sqlite3_get_autocommit(db));
  return sqlite3_str_finish(out);
}

/* ------------------------------------------------------------ the log */

/* Every step of the round, as SQL: printed (the tail) and written whole to
** a file when the round fails. */
static char **azLog;
static int *aiLogStep; /* the step each line belongs to (for CSQ_DIFF_SKIP) */
static int nLog, nLogAlloc, iLogStep;

static void log_step(char *z) {
  if (nLog == nLogAlloc) {
    nLogAlloc = nLogAlloc ? nLogAlloc * 2 : 1024;
    azLog = realloc(azLog, sizeof(char *) * (size_t)nLogAlloc);
    aiLogStep = realloc(aiLogStep, sizeof(int) * (size_t)nLogAlloc);
    if (!azLog || !aiLogStep) abort();
  }
  aiLogStep[nLog] = iLogStep;
  azLog[nLog++] = z;
}

static void print_log(int iRound, const char *zOpts) {
  char zPath[300];
  snprintf(zPath, sizeof(zPath), "/tmp/csq-diffcapi-seed%llu-round%d.sql", (unsigned long long)seed,
           iRound);
  FILE *f = fopen(zPath, "w");
  if (f) {
    fprintf(f,
            "-- test_diff_capi round %d: the csq side; the native side has CREATE TABLE\n"
            "-- and no csq options. '-- ...' lines are what the test did besides SQL.\n"
            "CREATE VIRTUAL TABLE t USING csq(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, "
            "c REAL, d%s);\nCREATE VIRTUAL TABLE u USING csq(k INTEGER NOT NULL, v TEXT%s);\n",
            iRound, zOpts, zOpts);
    for (int i = 0; i < nLog; i++) fprintf(f, "%s /* step %d */\n", azLog[i], aiLogStep[i]);
    fclose(f);
  }
  int i0 = nLog > 25 ? nLog - 25 : 0;
  printf("  the last %d steps (all %d in %s):\n", nLog - i0, nLog, zPath);
  for (int i = i0; i < nLog; i++) printf("    %s\n", azLog[i]);
}

static void clear_log(void) {
  for (int i = 0; i < nLog; i++) sqlite3_free(azLog[i]);
  nLog = 0;
}

/* ------------------------------------------------------------ a round */

static int op_index(const char *zSql) {
  for (int i = 0; i < N_OP; i++)
    if (strcmp(aOp[i].zSql, zSql) == 0) return i;
  abort();
}

/* max(id) - min(id) of t on the native side (0 when empty) */
static sqlite3_int64 t_rowid_span(void) {
  sqlite3_stmt *p = NULL;
  sqlite3_int64 n = 0;
  if (sqlite3_prepare_v2(aSide[1].db, "SELECT coalesce(max(id) - min(id), 0) FROM t", -1, &p,
                         NULL) == SQLITE_OK &&
      sqlite3_step(p) == SQLITE_ROW)
    n = sqlite3_column_int64(p, 0);
  sqlite3_finalize(p);
  return n;
}

static const char *zRoundOpts = "";

static int mismatch(int iRound, int iStep, const char *zWhat, const char *zCsq,
                    const char *zNative) {
  printf("FAIL round %d step %d: %s\n  csq:    %s\n  native: %s\n", iRound, iStep, zWhat, zCsq,
         zNative);
  print_log(iRound, zRoundOpts);
  nFail++;
  return 1;
}

/* the statement with its binds written in as literals: the log replays
** as a script (the stock shell, or Python) */
static char *describe(const char *zSql, const val *aV, int n) {
  sqlite3_str *s = sqlite3_str_new(NULL);
  for (const char *z = zSql; *z; z++) {
    if (*z == '?' && z[1] >= '1' && z[1] <= '9' && z[1] - '1' < n) {
      val_text(s, &aV[z[1] - '1']);
      z++;
    } else {
      sqlite3_str_appendchar(s, 1, *z);
    }
  }
  sqlite3_str_appendchar(s, 1, ';');
  return sqlite3_str_finish(s);
}

/* CSQ_DIFF_SKIP: the steps left out */
static const char *zSkip;

static int skipped(int iStep) {
  for (const char *z = zSkip; z && *z;) {
    char *zEnd;
    long a = strtol(z, &zEnd, 10), b = a;
    if (zEnd == z) break;
    if (*zEnd == '-') b = strtol(zEnd + 1, &zEnd, 10);
    if (iStep >= a && iStep <= b) return 1;
    z = *zEnd == ',' ? zEnd + 1 : zEnd;
  }
  return 0;
}

static int round_run(int iRound, int nStep) {
  static const char *azOpts[] = {"", ", rowgroup=16", ", rowgroup=16, pushdown='always'",
                                 ", pushdown='always'", ", rowgroup=40, pushdown='never'"};
  const char *zOpts = azOpts[iRound % 5];
  zRoundOpts = zOpts;
  snprintf(zDir, sizeof(zDir), "/tmp/csq-diffcapi-XXXXXX");
  if (!mkdtemp(zDir)) {
    printf("FAIL mkdtemp\n");
    return 1;
  }
  clear_log();
  int bad = 0;
  for (int s = 0; s < 2 && !bad; s++) bad = open_side(s, 1, zOpts);
  for (int iStep = 0; iStep < nStep && !bad; iStep++) {
    int k = (int)rndn(100);
    iLogStep = iStep;
    if (k < 3) {
      /* finalize and re-prepare: the same SQL, or two swapped, so that a
      ** new statement lands on a finished one's address */
      int i = (int)rndn(N_OP), j = (int)rndn(N_OP);
      if (skipped(iStep)) continue;
      log_step(sqlite3_mprintf("-- re-prepare: %s / %s", aOp[i].zSql, aOp[j].zSql));
      for (int s = 0; s < 2 && !bad; s++) {
        sqlite3_finalize(aSide[s].ap[i]);
        aSide[s].ap[i] = NULL;
        if (j != i) {
          sqlite3_finalize(aSide[s].ap[j]);
          aSide[s].ap[j] = NULL;
          bad = prepare_op(s, j);
        }
        if (!bad) bad = prepare_op(s, i);
      }
      continue;
    }
    if (k < 4) {
      /* close and reopen both connections (an open transaction rolls back) */
      if (skipped(iStep)) continue;
      log_step(sqlite3_mprintf("-- close and reopen both connections"));
      for (int s = 0; s < 2 && !bad; s++) {
        close_side(s);
        bad = open_side(s, 0, zOpts);
      }
      continue;
    }
    if (k < 10) {
      /* the unfinished SELECT: start it or step it a little further */
      val v = rnd_id();
      char *zRes[2] = {NULL, NULL};
      int bRestart = rndn(3) == 0;
      int bStart = !aSide[0].bOpenBusy || bRestart;
      int nRows = 1 + (int)rndn(3);
      if (skipped(iStep)) continue;
      if (bStart) {
        char *z = describe(zOpenSql, &v, 1);
        log_step(sqlite3_mprintf("-- the unfinished SELECT, restarted: %s", z));
        sqlite3_free(z);
      }
      log_step(sqlite3_mprintf("-- the unfinished SELECT stepped %d more rows", nRows));
      for (int s = 0; s < 2; s++) {
        side *p = &aSide[s];
        sqlite3_str *out = sqlite3_str_new(NULL);
        if (bStart) {
          sqlite3_reset(p->pOpen);
          bind_val(p->pOpen, 1, &v);
        }
        p->bOpenBusy = 1;
        for (int r = 0; r < nRows; r++) {
          int rc = sqlite3_step(p->pOpen);
          if (rc == SQLITE_ROW) {
            /* rows after writes on the same connection are SQLite's
            ** business (undefined for native tables too): compare only the
            ** rows of a freshly started statement */
            if (bStart)
              sqlite3_str_appendf(out, "%lld|%s;", sqlite3_column_int64(p->pOpen, 0),
                                  sqlite3_column_text(p->pOpen, 2)
                                      ? (const char *)sqlite3_column_text(p->pOpen, 2)
                                      : "NULL");
            else
              sqlite3_str_appendall(out, "row;");
            continue;
          }
          if (rc == SQLITE_DONE)
            sqlite3_str_appendall(out, "done;");
          else
            sqlite3_str_appendf(out, "error %d: %s;", rc & 0xff, sqlite3_errmsg(p->db));
          sqlite3_reset(p->pOpen);
          p->bOpenBusy = 0;
          break;
        }
        zRes[s] = sqlite3_str_finish(out);
      }
      /* a resumed statement may end sooner on one side (rows written
      ** meanwhile); only an error on one side alone counts */
      int bDiff = bStart ? strcmp(zRes[0], zRes[1]) != 0
                         : (strstr(zRes[0], "error") != NULL) != (strstr(zRes[1], "error") != NULL);
      if (bDiff)
        bad = mismatch(iRound, iStep,
                       bStart ? "the unfinished SELECT's first rows"
                              : "the unfinished SELECT, resumed after writes",
                       zRes[0], zRes[1]);
      sqlite3_free(zRes[0]);
      sqlite3_free(zRes[1]);
      if (aSide[0].bOpenBusy != aSide[1].bOpenBusy) {
        /* one side finished: finish both */
        for (int s = 0; s < 2; s++) {
          sqlite3_reset(aSide[s].pOpen);
          aSide[s].bOpenBusy = 0;
        }
      }
      continue;
    }
    /* one of the prepared statements, with random binds */
    int i;
    int w = (int)rndn(100);
    do {
      i = (int)rndn(N_OP);
    } while ((w < 50 && aOp[i].cKind != 'w') || (w >= 50 && w < 85 && aOp[i].cKind == 'w') ||
             (w >= 85 && aOp[i].cKind != 't'));
    val aV[5];
    int nBind = (int)strlen(aOp[i].zBinds);
    for (int b = 0; b < nBind; b++) {
      char c = aOp[i].zBinds[b];
      if (c == 'i') {
        aV[b] = rnd_id();
      } else if (c == 'o') {
        /* limit L: larger than max(id) - min(id) (the native side's, the
        ** same rows), so that no moved row lands on a row of t */
        memset(&aV[b], 0, sizeof(aV[b]));
        aV[b].eType = SQLITE_INTEGER;
        aV[b].i = t_rowid_span() + 1 + (sqlite3_int64)rndn(3);
      } else {
        aV[b] = rnd_val(SQLITE_INTEGER);
      }
    }
    if (skipped(iStep)) continue;
    log_step(describe(aOp[i].zSql, aV, nBind));
    char *zRes[2];
    for (int s = 0; s < 2; s++) {
      for (int b = 0; b < nBind; b++) bind_val(aSide[s].ap[i], b + 1, &aV[b]);
      zRes[s] = run_stmt(s, aSide[s].ap[i]);
    }
    if (strcmp(zRes[0], zRes[1]) != 0) bad = mismatch(iRound, iStep, aOp[i].zSql, zRes[0], zRes[1]);
    sqlite3_free(zRes[0]);
    sqlite3_free(zRes[1]);
  }
  /* the whole tables, from fresh connections */
  if (!bad && !bCsqOnly) {
    for (int s = 0; s < 2; s++) {
      close_side(s);
      if (open_side(s, 0, zOpts)) bad = 1;
    }
    for (int q = 0; q < 2 && !bad; q++) {
      int i = op_index(q == 0 ? "SELECT rowid, * FROM t ORDER BY rowid"
                              : "SELECT rowid, k, v FROM u ORDER BY rowid");
      char *zRes[2];
      for (int s = 0; s < 2; s++) zRes[s] = run_stmt(s, aSide[s].ap[i]);
      char *zA = strstr(zRes[0], "changes"), *zB = strstr(zRes[1], "changes");
      if (zA) *zA = 0;
      if (zB) *zB = 0;
      if (strcmp(zRes[0], zRes[1]) != 0)
        bad = mismatch(iRound, nStep, "after close and reopen", zRes[0], zRes[1]);
      sqlite3_free(zRes[0]);
      sqlite3_free(zRes[1]);
    }
  }
  for (int s = 0; s < 2; s++) close_side(s);
  char zCmd[400];
  snprintf(zCmd, sizeof(zCmd), "rm -rf '%s'", zDir);
  if (system(zCmd) != 0) printf("note: could not remove %s\n", zDir);
  return bad;
}

int main(void) {
  const char *zSeed = getenv("CSQ_DIFF_SEED");
  const char *zScale = getenv("CSQ_DIFF_SCALE");
  seed = zSeed ? strtoull(zSeed, NULL, 10) : 15;
  double scale = zScale ? atof(zScale) : 1.0;
  if (SANITIZED) scale *= 0.25;
  int nRound = 8, nStep = (int)(2500 * scale);
  if (nStep < 50) nStep = 50;
  int nBad = 0;
  (void)nCheck;
  const char *zRound = getenv("CSQ_DIFF_ROUND");
  zSkip = getenv("CSQ_DIFF_SKIP");
  for (int r = 0; r < nRound; r++) {
    if (zRound && atoi(zRound) != r) continue;
    rng = 0x9E3779B97F4A7C15ull ^ (seed * 1000003u + (uint64_t)r * 7919u);
    for (int i = 0; i < 4; i++) rnd();
    nBad += round_run(r, nStep);
  }
  clear_log();
  free(azLog);
  free(aiLogStep);
  printf("%d of %d rounds of %d steps differ from native (CSQ_DIFF_SEED=%llu)\n", nBad, nRound,
         nStep, (unsigned long long)seed);
  return nBad ? 1 : 0;
}
