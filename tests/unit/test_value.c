/*
** tests/unit/test_value.c - device/format/value.h against SQLite itself.
**
** Many values of every storage class (NULL; integers up to INT64_MIN/MAX
** and around 2^53; reals incl. -0.0, +-inf, 2^63, neighbours of 2^53 and
** of integers; TEXT incl. empty, case pairs, trailing spaces, UTF-8, an
** embedded NUL; BLOBs incl. empty, prefixes and the bytes of a TEXT), and
** for every ordered pair (a, b) and each collation (BINARY, NOCASE,
** RTRIM), bound as parameters (no affinity):
**   - csq_value_cmp's sign is SQLite's ORDER BY order of the two (NULL
**     first), and for two non-NULL values that of ?1 < ?2, ?1 = ?2, ?1 > ?2
**     under the collation;
**   - it is -1, 0 or 1 and antisymmetric;
**   - csq_value_eq is SQLite's ?1 IS ?2, and equal values hash equal;
**   - csq_value_of_vec reads back what a vector holds.
** Exit 0 = pass, 1 = fail; one line per failed check.
*/
#include <float.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/format/value.h"
#include "tests/unit/helpers.h"

#define MAXV 400

static csq_value aV[MAXV];
static int nV = 0;

static void add_null(void) {
  aV[nV++] = (csq_value){.cls = CSQ_NULL};
}
static void add_int(int64_t i) {
  aV[nV++] = (csq_value){.cls = CSQ_INT, .i = i};
}
static void add_real(double r) {
  aV[nV++] = (csq_value){.cls = CSQ_REAL, .r = r};
}
/* TEXT or BLOB of n bytes at z (a string literal: it outlives the test). */
static void add_bytes(int cls, const char *z, uint32_t n) {
  aV[nV++] = (csq_value){.cls = (uint8_t)cls, .z = (const uint8_t *)z, .n = n};
}
#define TEXT(s) add_bytes(CSQ_TEXT, s, sizeof(s) - 1)
#define BLOB(s) add_bytes(CSQ_BLOB, s, sizeof(s) - 1)

static void make_values(void) {
  const double two53 = 9007199254740992.0, two63 = 9223372036854775808.0;
  add_null();
  add_null();
  /* integers: small, and the edges of doubles' exact range and of int64 */
  int64_t aI[] = {0,
                  1,
                  -1,
                  2,
                  3,
                  42,
                  -42,
                  1000000,
                  9007199254740991LL,
                  9007199254740992LL,
                  9007199254740993LL,
                  -9007199254740992LL,
                  -9007199254740993LL,
                  4611686018427387904LL,
                  INT64_MAX,
                  INT64_MAX - 1,
                  INT64_MAX - 512,
                  INT64_MAX - 1024,
                  INT64_MIN,
                  INT64_MIN + 1,
                  INT64_MIN + 1024};
  for (size_t k = 0; k < sizeof(aI) / sizeof(aI[0]); k++) add_int(aI[k]);
  /* reals: the same places, their neighbours, and what has no integer */
  double aR[] = {0.0,
                 -0.0,
                 1.0,
                 -1.0,
                 0.5,
                 -0.5,
                 1.5,
                 2.0,
                 2.5,
                 42.0,
                 41.999999999999993,
                 1e6,
                 two53,
                 two53 - 1,
                 two53 + 2,
                 -two53,
                 nextafter(two53, 0),
                 two63,
                 -two63,
                 nextafter(two63, 0),
                 nextafter(-two63, 0),
                 nextafter(two63, INFINITY),
                 nextafter(-two63, -INFINITY),
                 4611686018427387904.0,
                 1e300,
                 -1e300,
                 DBL_MAX,
                 -DBL_MAX,
                 DBL_MIN,
                 -DBL_MIN,
                 4.9e-324,
                 INFINITY,
                 -INFINITY};
  for (size_t k = 0; k < sizeof(aR) / sizeof(aR[0]); k++) add_real(aR[k]);
  /* random integers and reals, some integral */
  for (int k = 0; k < 40; k++) {
    int64_t i = (int64_t)rnd() >> rndn(64);
    add_int(i);
    add_real(k % 2 ? (double)i : (double)i + 0.25);
  }
  /* TEXT: empty, case, collation edges ('_' sits between 'Z' and 'a'),
  ** trailing spaces, UTF-8, a NUL inside */
  TEXT("");
  TEXT(" ");
  TEXT("  ");
  TEXT("a");
  TEXT("A");
  TEXT("a ");
  TEXT("A  ");
  TEXT("ab");
  TEXT("aB");
  TEXT("abc");
  TEXT("ABC");
  TEXT("abc ");
  TEXT("abc  ");
  TEXT("abd");
  TEXT("b");
  TEXT("Z");
  TEXT("z");
  TEXT("_");
  TEXT("[");
  TEXT("@");
  TEXT("1");
  TEXT("10");
  TEXT("9");
  TEXT("\xc3\xa9");         /* é */
  TEXT("\xc3\x89");         /* É: NOCASE folds ASCII only */
  TEXT("\xe2\x82\xac");     /* € */
  TEXT("\xf0\x9f\x98\x80"); /* an emoji */
  TEXT("a\tb");
  TEXT("a\0b");
  TEXT("A\0c");
  TEXT("a\0");
  /* BLOB: empty, NUL bytes, prefixes, a TEXT's bytes */
  BLOB("");
  BLOB("\0");
  BLOB("\0\0");
  BLOB("\x01");
  BLOB("\xff");
  BLOB("\xff\x00");
  BLOB("abc");
  BLOB("abc ");
  BLOB("ab");
  BLOB("ABC");
  BLOB("a");
  BLOB(" ");
}

static void bind(sqlite3_stmt *p, int i, const csq_value *v) {
  switch (v->cls) {
  case CSQ_INT:
    sqlite3_bind_int64(p, i, v->i);
    break;
  case CSQ_REAL:
    sqlite3_bind_double(p, i, v->r);
    break;
  case CSQ_TEXT:
    sqlite3_bind_text(p, i, v->n ? (const char *)v->z : "", (int)v->n, SQLITE_STATIC);
    break;
  case CSQ_BLOB:
    sqlite3_bind_blob(p, i, v->n ? (const void *)v->z : "", (int)v->n, SQLITE_STATIC);
    break;
  default:
    sqlite3_bind_null(p, i);
  }
}

/* A value as text, for a failure's message (in one of two buffers). */
static const char *show(const csq_value *v) {
  static char a[2][96];
  static int k = 0;
  char *z = a[k ^= 1];
  switch (v->cls) {
  case CSQ_INT:
    snprintf(z, 96, "%lld", (long long)v->i);
    break;
  case CSQ_REAL:
    snprintf(z, 96, "%.17g", v->r);
    break;
  case CSQ_TEXT:
  case CSQ_BLOB: {
    int o = snprintf(z, 96, "%s'", v->cls == CSQ_TEXT ? "" : "x");
    for (uint32_t i = 0; i < v->n && o < 90; i++) o += snprintf(z + o, 96 - o, "%02x", v->z[i]);
    snprintf(z + o, 96 - o, "'");
    break;
  }
  default:
    snprintf(z, 96, "NULL");
  }
  return z;
}

static int step_int(sqlite3_stmt *p, int iCol) {
  return sqlite3_column_type(p, iCol) == SQLITE_NULL ? -1 : sqlite3_column_int(p, iCol);
}

int main(void) {
  static const char *azColl[] = {"BINARY", "NOCASE", "RTRIM"};
  static const int aColl[] = {CSQ_COLL_BINARY, CSQ_COLL_NOCASE, CSQ_COLL_RTRIM};
  sqlite3 *db;
  make_values();
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) {
    printf("test_value: cannot open SQLite\n");
    return 1;
  }

  /* The operators, ORDER BY's order (which of the two comes first, ties
  ** broken one way then the other) and IS, per collation. */
  sqlite3_stmt *apOp[3], *apOrd[3], *pIs;
  for (int c = 0; c < 3; c++) {
    char *zOp = sqlite3_mprintf("SELECT ?1 < ?2 COLLATE %s, ?1 = ?2 COLLATE %s, ?1 > ?2 COLLATE %s",
                                azColl[c], azColl[c], azColl[c]);
    char *zOrd = sqlite3_mprintf("WITH t(k, v) AS (SELECT 1, ?1 UNION ALL SELECT 2, ?2)"
                                 " SELECT (SELECT k FROM t ORDER BY v COLLATE %s, k LIMIT 1),"
                                 " (SELECT k FROM t ORDER BY v COLLATE %s, k DESC LIMIT 1)",
                                 azColl[c], azColl[c]);
    int rc = sqlite3_prepare_v2(db, zOp, -1, &apOp[c], NULL);
    rc |= sqlite3_prepare_v2(db, zOrd, -1, &apOrd[c], NULL);
    sqlite3_free(zOp);
    sqlite3_free(zOrd);
    if (rc != SQLITE_OK) {
      printf("test_value: prepare: %s\n", sqlite3_errmsg(db));
      return 1;
    }
  }
  if (sqlite3_prepare_v2(db, "SELECT ?1 IS ?2", -1, &pIs, NULL) != SQLITE_OK) {
    printf("test_value: prepare: %s\n", sqlite3_errmsg(db));
    return 1;
  }

  int nPair = 0;
  for (int x = 0; x < nV; x++) {
    for (int y = 0; y < nV; y++) {
      const csq_value *a = &aV[x], *b = &aV[y];
      nPair++;
      for (int c = 0; c < 3; c++) {
        int cmp = csq_value_cmp(a, b, aColl[c]);
        CHECK(cmp >= -1 && cmp <= 1, "%s %s: %d", show(a), show(b), cmp);
        CHECK(csq_value_cmp(b, a, aColl[c]) == -cmp, "%s %s %s: not antisymmetric", show(a),
              show(b), azColl[c]);

        /* ORDER BY: first k with ties to 1, then with ties to 2 */
        sqlite3_stmt *p = apOrd[c];
        bind(p, 1, a);
        bind(p, 2, b);
        if (sqlite3_step(p) != SQLITE_ROW) {
          CHECK(0, "step: %s", sqlite3_errmsg(db));
          return 1;
        }
        int k1 = step_int(p, 0), k2 = step_int(p, 1);
        int want = k1 == 1 && k2 == 1 ? -1 : k1 == 2 && k2 == 2 ? 1 : 0;
        CHECK(k1 != 2 || k2 != 1, "order %d %d", k1, k2);
        CHECK(cmp == want, "%s vs %s under %s: csq %d, SQLite's ORDER BY %d", show(a), show(b),
              azColl[c], cmp, want);
        sqlite3_reset(p);

        /* the operators, for two non-NULL values */
        p = apOp[c];
        bind(p, 1, a);
        bind(p, 2, b);
        if (sqlite3_step(p) != SQLITE_ROW) {
          CHECK(0, "step: %s", sqlite3_errmsg(db));
          return 1;
        }
        int lt = step_int(p, 0), eq = step_int(p, 1), gt = step_int(p, 2);
        sqlite3_reset(p);
        if (a->cls == CSQ_NULL || b->cls == CSQ_NULL) {
          CHECK(lt == -1 && eq == -1 && gt == -1);
          continue;
        }
        CHECK(lt + eq + gt == 1, "%s vs %s: %d %d %d", show(a), show(b), lt, eq, gt);
        want = lt ? -1 : gt ? 1 : 0;
        CHECK(cmp == want, "%s vs %s under %s: csq %d, SQLite's < = > %d", show(a), show(b),
              azColl[c], cmp, want);
      }

      /* IS: csq_value_eq, and the hash of equal values */
      bind(pIs, 1, a);
      bind(pIs, 2, b);
      if (sqlite3_step(pIs) != SQLITE_ROW) {
        CHECK(0, "step: %s", sqlite3_errmsg(db));
        return 1;
      }
      int is = step_int(pIs, 0);
      sqlite3_reset(pIs);
      int eq = csq_value_eq(a, b);
      CHECK(eq == is, "%s IS %s: csq %d, SQLite %d", show(a), show(b), eq, is);
      CHECK(eq == (csq_value_cmp(a, b, CSQ_COLL_BINARY) == 0), "%s %s", show(a), show(b));
      if (eq)
        CHECK(csq_value_hash(a) == csq_value_hash(b), "%s = %s but hashes differ", show(a),
              show(b));
    }
  }

  /* An INTEGER hashes as csq_mix64 of itself (callers rely on it). */
  for (int x = 0; x < nV; x++)
    if (aV[x].cls == CSQ_INT) CHECK(csq_value_hash(&aV[x]) == csq_mix64((uint64_t)aV[x].i));

  /* Values read back from a vector are the values pushed. */
  csq_vec v;
  csq_vec_init(&v);
  for (int x = 0; x < nV; x++) {
    const csq_value *a = &aV[x];
    int rc = a->cls == CSQ_INT    ? csq_vec_push_int(&v, a->i)
             : a->cls == CSQ_REAL ? csq_vec_push_real(&v, a->r)
             : a->cls == CSQ_NULL ? csq_vec_push_null(&v)
                                  : csq_vec_push_bytes(&v, a->cls, a->z, a->n);
    CHECK(rc == 0);
  }
  for (int x = 0; x < nV && (uint32_t)x < v.n; x++) {
    csq_value b = csq_value_of_vec(&v, (uint32_t)x);
    CHECK(b.cls == aV[x].cls && csq_value_eq(&b, &aV[x]), "%s", show(&aV[x]));
    CHECK(csq_value_cmp(&b, &aV[x], CSQ_COLL_BINARY) == 0 && b.n == aV[x].n);
  }
  csq_vec_free(&v);

  for (int c = 0; c < 3; c++) {
    sqlite3_finalize(apOp[c]);
    sqlite3_finalize(apOrd[c]);
  }
  sqlite3_finalize(pIs);
  sqlite3_close(db);
  if (nFail) {
    printf("test_value: %d of %d checks failed (%d values, %d pairs)\n", nFail, nCheck, nV, nPair);
    return 1;
  }
  printf("test_value: ok (%d checks, %d values, %d pairs)\n", nCheck, nV, nPair);
  return 0;
}
