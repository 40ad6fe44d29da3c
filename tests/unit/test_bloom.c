/*
** tests/unit/test_bloom.c - join filters: the key hash (device/format/
** keyhash.h) against SQLite itself, the split-block Bloom filter
** (device/format/bloom.h), and the program term CSQ_OP_BLOOM.
**
**   - keyhash: random pairs of values of every class (integers, integral
**     and fractional reals around 2^53 and near +-2^63, TEXT, BLOB),
**     bound as parameters (no affinity): whenever SQLite says ?1 = ?2, the
**     two hashes are equal; unequal values rarely collide;
**   - bloom: never a false negative; the false positive rate of a filter
**     sized by csq_bloom_size stays near its target; sizes are bounded
**     powers of two.
** Exit 0 = pass, 1 = fail; one line per failed check.
*/
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/format/bloom.h"
#include "device/format/keyhash.h"
#include "device/format/value.h"
#include "tests/unit/helpers.h"

/* ---- keyhash against SQLite ---- */

typedef struct kval {
  int cls;
  int64_t i;
  double r;
  uint8_t z[8];
  int n;
} kval;

/* An integer from the interesting places: small, around 2^53, near the
** ends of int64, or anywhere. */
static int64_t draw_int(void) {
  switch (rndn(5)) {
  case 0:
    return (int64_t)rndn(21) - 10;
  case 1:
    return (rndn(2) ? 1 : -1) * (9007199254740992LL + (int64_t)rndn(9) - 4);
  case 2:
    return INT64_MAX - (int64_t)rndn(2048);
  case 3:
    return INT64_MIN + (int64_t)rndn(2048);
  default:
    return (int64_t)rnd() >> rndn(64);
  }
}

static kval draw_val(void) {
  kval v;
  memset(&v, 0, sizeof(v));
  switch (rndn(6)) {
  case 0:
  case 1:
    v.cls = CSQ_INT;
    v.i = draw_int();
    break;
  case 2:
  case 3: {
    static const double aSpecial[] = {0.0,
                                      -0.0,
                                      0.5,
                                      -0.5,
                                      9223372036854775808.0,
                                      -9223372036854775808.0,
                                      1e300,
                                      -1e300,
                                      18446744073709551616.0};
    v.cls = CSQ_REAL;
    int k = (int)rndn(4);
    if (k == 0)
      v.r = aSpecial[rndn(sizeof(aSpecial) / sizeof(aSpecial[0]))];
    else if (k == 1)
      v.r = (double)draw_int() + 0.5 * (double)rndn(2);
    else
      v.r = (double)draw_int();
    break;
  }
  default:
    v.cls = rndn(2) ? CSQ_TEXT : CSQ_BLOB;
    v.n = (int)rndn(4);
    for (int j = 0; j < v.n; j++) v.z[j] = (uint8_t)("ab\0"[rndn(3)]);
  }
  return v;
}

/* A value near v: the same number in the other class, the same bytes in
** the other class, or v itself. */
static kval near_val(const kval *v) {
  kval w = *v;
  switch (v->cls) {
  case CSQ_INT:
    if (rndn(2)) {
      w.cls = CSQ_REAL;
      w.r = (double)v->i;
    }
    break;
  case CSQ_REAL:
    if (v->r >= -9223372036854775808.0 && v->r < 9223372036854775808.0 && rndn(2)) {
      w.cls = CSQ_INT;
      w.i = (int64_t)v->r + (int64_t)rndn(3) - 1;
    }
    break;
  default:
    if (rndn(3) == 0) w.cls = v->cls == CSQ_TEXT ? CSQ_BLOB : CSQ_TEXT;
  }
  return w;
}

static void bind_val(sqlite3_stmt *st, int i, const kval *v) {
  switch (v->cls) {
  case CSQ_INT:
    sqlite3_bind_int64(st, i, v->i);
    break;
  case CSQ_REAL:
    sqlite3_bind_double(st, i, v->r);
    break;
  case CSQ_TEXT:
    sqlite3_bind_text(st, i, (const char *)v->z, v->n, SQLITE_TRANSIENT);
    break;
  default:
    sqlite3_bind_blob(st, i, v->z, v->n, SQLITE_TRANSIENT);
  }
}

static uint64_t hash_val(const kval *v) {
  switch (v->cls) {
  case CSQ_INT:
    return csq_key_hash_int(v->i);
  case CSQ_REAL:
    return csq_key_hash_real(v->r);
  default:
    return csq_key_hash_bytes(v->cls, v->z, (uint32_t)v->n);
  }
}

static void test_keyhash(sqlite3 *db) {
  sqlite3_stmt *st;
  CHECK_RC(sqlite3_prepare_v2(db, "SELECT ?1 = ?2", -1, &st, NULL), SQLITE_OK);
  int nEq = 0, nNe = 0, nCollide = 0, nCross = 0;
  for (int it = 0; it < 200000; it++) {
    kval a = draw_val(), b = rndn(2) ? near_val(&a) : draw_val();
    bind_val(st, 1, &a);
    bind_val(st, 2, &b);
    CHECK_RC(sqlite3_step(st), SQLITE_ROW);
    int eq = sqlite3_column_int(st, 0);
    sqlite3_reset(st);
    uint64_t ha = hash_val(&a), hb = hash_val(&b);
    if (eq) {
      nEq++;
      nCross += a.cls != b.cls;
      CHECK(ha == hb, ": classes %d %d ints %lld %lld reals %.17g %.17g", a.cls, b.cls,
            (long long)a.i, (long long)b.i, a.r, b.r);
    } else {
      nNe++;
      nCollide += ha == hb;
    }
  }
  sqlite3_finalize(st);
  /* the draw must exercise both sides, and integer = real often */
  CHECK(nEq > 20000 && nNe > 20000 && nCross > 5000, ": %d equal (%d across classes), %d unequal",
        nEq, nCross, nNe);
  CHECK(nCollide == 0, ": %d unequal pairs hash alike", nCollide);
  /* the vector forms agree with the scalar ones */
  int64_t aI[64];
  double aR[64];
  uint64_t aH[64], aG[64];
  for (int i = 0; i < 64; i++) {
    aI[i] = draw_int();
    aR[i] = (double)draw_int() + (i & 1 ? 0.5 : 0.0);
  }
  csq_key_hash_ints(aI, aH, 64);
  csq_key_hash_reals(aR, aG, 64);
  for (int i = 0; i < 64; i++) {
    CHECK(aH[i] == csq_key_hash_int(aI[i]));
    CHECK(aG[i] == csq_key_hash_real(aR[i]));
  }
  CHECK(csq_key_hash_real(-0.0) == csq_key_hash_int(0));
  CHECK(csq_key_hash_real(4.0) == csq_key_hash_int(4));
  CHECK(csq_key_hash_real(-9223372036854775808.0) == csq_key_hash_int(INT64_MIN));
  CHECK(csq_key_hash_bytes(CSQ_TEXT, NULL, 0) == csq_key_hash_bytes(CSQ_TEXT, "", 0));
}

/* ---- the filter ---- */

static void test_filter(void) {
  /* sizes */
  CHECK(csq_bloom_size(0, 0.01) == CSQ_BLOOM_MIN_BYTES);
  CHECK(csq_bloom_size(1000, 1.5) == CSQ_BLOOM_MIN_BYTES);
  CHECK(csq_bloom_size(1000, 0.0) == CSQ_BLOOM_MAX_BYTES);
  CHECK(csq_bloom_size(1000, NAN) == CSQ_BLOOM_MAX_BYTES);
  CHECK(csq_bloom_size(UINT64_MAX, 0.01) == CSQ_BLOOM_MAX_BYTES);
  CHECK(!csq_bloom_size_ok(0) && !csq_bloom_size_ok(16) && !csq_bloom_size_ok(96) &&
        csq_bloom_size_ok(32) && csq_bloom_size_ok(CSQ_BLOOM_MAX_BYTES) &&
        !csq_bloom_size_ok(2ull * CSQ_BLOOM_MAX_BYTES));
  for (uint64_t n = 1; n < 100000000; n = n * 3 + 1) {
    uint32_t s = csq_bloom_size(n, 0.01);
    CHECK(csq_bloom_size_ok(s), ": %u bytes for %llu keys", s, (unsigned long long)n);
    CHECK(s == CSQ_BLOOM_MAX_BYTES || csq_bloom_fpr(n, s) <= 0.01);
    CHECK(s == CSQ_BLOOM_MIN_BYTES || csq_bloom_fpr(n, s / 2) > 0.01);
  }
  /* no false negative, and the measured rate near the estimate */
  static const uint64_t aN[] = {1, 10, 1000, 100000, 300000};
  static const double aP[] = {0.1, 0.01, 0.001};
  for (size_t a = 0; a < sizeof(aN) / sizeof(aN[0]); a++) {
    for (size_t b = 0; b < sizeof(aP) / sizeof(aP[0]); b++) {
      uint64_t n = aN[a];
      uint32_t nB = csq_bloom_size(n, aP[b]);
      uint8_t *f = malloc(nB);
      uint64_t *aKey = malloc(n * sizeof(uint64_t)), *aH = malloc(n * sizeof(uint64_t));
      uint8_t *aOut = malloc(n);
      csq_bloom_init(f, nB);
      for (uint64_t i = 0; i < n; i++) aKey[i] = rnd();
      csq_key_hash_ints((const int64_t *)aKey, aH, (int)n);
      csq_bloom_add_many(f, nB, aH, (int)n);
      csq_bloom_maybe_many(f, nB, aH, aOut, (int)n);
      uint64_t nMiss = 0;
      for (uint64_t i = 0; i < n; i++) nMiss += !aOut[i] || !csq_bloom_maybe(f, nB, aH[i]);
      CHECK(nMiss == 0, ": %llu false negatives", (unsigned long long)nMiss);
      /* other keys (odd, the added ones even) */
      uint64_t nTry = 200000, nPos = 0;
      for (uint64_t i = 0; i < nTry; i++)
        nPos += csq_bloom_maybe(f, nB, csq_key_hash_int((int64_t)(2 * rnd() + 1) | 1));
      double est = csq_bloom_fpr(n, nB), got = (double)nPos / (double)nTry;
      /* within 4 standard deviations of the estimate, and never far above the target */
      double sd = sqrt(est * (1 - est) / (double)nTry);
      CHECK(fabs(got - est) <= 4 * sd + 1e-4, ": %llu keys, %u bytes: rate %g, estimate %g",
            (unsigned long long)n, nB, got, est);
      CHECK(got <= aP[b] * 1.2 + 4 * sd, ": rate %g, target %g", got, aP[b]);
      free(f);
      free(aKey);
      free(aH);
      free(aOut);
    }
  }
}

int main(void) {
  sqlite3 *db;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) {
    printf("test_bloom: cannot open SQLite\n");
    return 1;
  }
  test_keyhash(db);
  test_filter();
  sqlite3_close(db);
  return test_done("test_bloom");
}
