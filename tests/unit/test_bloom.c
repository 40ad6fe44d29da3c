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
**     powers of two;
**   - the term CSQ_OP_BLOOM run by the executor (dev_ptype_csq, on a fake
**     SLM, the code every device and the host engine run) over every chunk
**     encoding, alone, ANDed and ORed with other terms, with NULLs and
**     deleted rows, against brute force (the filter probed row by row),
**     and every row whose value equals a key (by SQLite's =) kept;
**   - end to end on an emulated device: a table written through the store,
**     scanned (dev_scan) with a program carrying a 2 MiB filter (so Load
**     Program takes it in several pieces), rows compared with brute force;
**   - the verifier refuses malformed join filter terms and the builder
**     refuses what the format does not allow.
** Exit 0 = pass, 1 = fail; one line per failed check. SEED=n draws other
** random data (the default is fixed, so a run is reproducible).
*/
/* the test links SQLite itself: planner/filter.h's sqlite3ext.h must not
** route calls through an extension's API table */
#define SQLITE_CORE 1
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "device/driver/driver.h"
#include "device/engine/ptype.h"
#include "device/format/bloom.h"
#include "device/format/chunk.h"
#include "device/format/keyhash.h"
#include "device/format/keymap.h"
#include "device/format/le.h"
#include "device/format/value.h"
#include "device/host/scan.h"
#include "device/store/store.h"
#include "planner/filter.h"
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
      w.i = (int64_t)((uint64_t)(int64_t)v->r + rndn(3) - 1); /* wraps at the ends */
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
  /* the vector form: a vector of every class, and one of integers only */
  for (int bInt = 0; bInt < 2; bInt++) {
    csq_vec v;
    uint64_t aVh[300];
    uint8_t aNull[300];
    kval aK[300];
    csq_vec_init(&v);
    for (int i = 0; i < 300; i++) {
      aK[i] = draw_val();
      if (bInt && aK[i].cls != CSQ_INT) {
        aK[i].cls = CSQ_INT;
        aK[i].i = draw_int();
      }
      if (!bInt && i % 7 == 0) aK[i].cls = CSQ_NULL;
      switch (aK[i].cls) {
      case CSQ_INT:
        csq_vec_push_int(&v, aK[i].i);
        break;
      case CSQ_REAL:
        csq_vec_push_real(&v, aK[i].r);
        break;
      case CSQ_NULL:
        csq_vec_push_null(&v);
        break;
      default:
        csq_vec_push_bytes(&v, aK[i].cls, aK[i].z, (uint32_t)aK[i].n);
      }
    }
    csq_key_hash_vec(&v, 10, 290, aVh, aNull);
    for (int k = 0; k < 290; k++) {
      const kval *x = &aK[10 + k];
      CHECK(aNull[k] == (x->cls == CSQ_NULL));
      if (x->cls != CSQ_NULL) {
        CHECK(aVh[k] == hash_val(x), ": value %d of class %d", 10 + k, x->cls);
        csq_value cv = {
            .cls = (uint8_t)x->cls, .i = x->i, .r = x->r, .z = x->z, .n = (uint32_t)x->n};
        CHECK(csq_key_hash_value(&cv) == aVh[k]);
      }
    }
    csq_vec_free(&v);
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
      /* near the estimate: within 4 standard deviations of the sampling,
      ** plus the spread of the filter itself (how its keys fell into
      ** blocks), which matters when it has few blocks */
      double sd = sqrt(est * (1 - est) / (double)nTry);
      double spread = est * 3 / sqrt((double)(nB / CSQ_BLOOM_BLOCK));
      CHECK(fabs(got - est) <= 4 * sd + spread + 1e-4,
            ": %llu keys, %u bytes: rate %g, estimate %g", (unsigned long long)n, nB, got, est);
      CHECK(got <= aP[b] * 1.2 + 4 * sd + spread, ": rate %g, target %g", got, aP[b]);
      /* the vector probe (AVX2 where the CPU has it) answers as the scalar
      ** one, "maybe" or not, over other keys */
      for (uint64_t i = 0; i < n; i++) aKey[i] = rnd() | 1;
      csq_key_hash_ints((const int64_t *)aKey, aH, (int)n);
      csq_bloom_maybe_many(f, nB, aH, aOut, (int)n);
      uint64_t nDiff = 0;
      for (uint64_t i = 0; i < n; i++) nDiff += aOut[i] != csq_bloom_maybe(f, nB, aH[i]);
      CHECK(nDiff == 0, ": %llu answers differ", (unsigned long long)nDiff);
      free(f);
      free(aKey);
      free(aH);
      free(aOut);
    }
  }
}

/* ---- the program term over every encoding ---- */

static const csq_zone *zone_of(const void *pCtx, int iChunk) {
  return &((const csq_chunk_info *)pCtx)[iChunk].zone;
}

#define NROW 5000

static test_val aData[NROW];
static int aDel[NROW];
static const char *azWord[] = {"apple", "Apple", "banana", "", "zeta ", "zeta", "4", "4.0", "x"};
#define NWORD ((int)(sizeof(azWord) / sizeof(azWord[0])))

static void val_int(test_val *v, int64_t i) {
  memset(v, 0, sizeof(*v));
  v->cls = CSQ_INT;
  v->i = i;
}
static void val_real(test_val *v, double r) {
  memset(v, 0, sizeof(*v));
  v->cls = CSQ_REAL;
  v->r = r;
}
static void val_bytes(test_val *v, int cls, const char *z, int n) {
  memset(v, 0, sizeof(*v));
  v->cls = cls;
  v->n = n;
  memcpy(v->z, z, (size_t)n);
}
static void val_word(test_val *v, int cls) {
  const char *w = azWord[rndn(NWORD)];
  val_bytes(v, cls, w, (int)strlen(w));
}

/* Row r's value for data mode m (comments: the encoding it should get). */
static void draw_row(int m, int r, test_val *v) {
  memset(v, 0, sizeof(*v));
  switch (m) {
  case 0: /* INT_FOR */
    val_int(v, (int64_t)rndn(3000) - 100);
    break;
  case 1: /* INT_FOR with NULLs (and deleted rows) */
    if (rndn(6) == 0)
      v->cls = CSQ_NULL;
    else
      val_int(v, (int64_t)rndn(500));
    break;
  case 2: /* INT_RLE */
    if (r % 61 == 0)
      val_int(v, (int64_t)rndn(200));
    else
      *v = aData[r - 1];
    break;
  case 3: /* REAL_PLAIN: integral and fractional */
    val_real(v, rndn(2) ? (double)rndn(300) : (double)rndn(300) + 1.0 / (1 + (double)rndn(7)));
    break;
  case 4: /* REAL_DEC: prices */
    val_real(v, (double)rndn(100000) / 100);
    break;
  case 5: /* TEXT_DICT */
    val_word(v, CSQ_TEXT);
    break;
  case 6: /* TEXT_PLAIN: unique */
    v->cls = CSQ_TEXT;
    v->n = snprintf(v->z, sizeof(v->z), "k%d", (int)rndn(20000));
    break;
  case 7: /* BLOB_PLAIN */
    val_word(v, CSQ_BLOB);
    break;
  case 8: /* TAGGED: every class */
    switch (rndn(5)) {
    case 0:
      val_int(v, (int64_t)rndn(50));
      break;
    case 1:
      val_real(v, (double)rndn(50) / (1 + (double)rndn(2)));
      break;
    case 2:
      val_word(v, CSQ_TEXT);
      break;
    case 3:
      val_word(v, CSQ_BLOB);
      break;
    default:
      v->cls = CSQ_NULL;
    }
    break;
  case 9: /* CONST INT */
    val_int(v, 42);
    break;
  case 10: /* CONST TEXT */
    val_bytes(v, CSQ_TEXT, "zeta", 4);
    break;
  case 11: /* CONST NULL */
    v->cls = CSQ_NULL;
    break;
  case 12: /* INT_FOR, 64 bits wide: the ends of int64 */
    val_int(v, rndn(2) ? INT64_MAX - (int64_t)rndn(100) : INT64_MIN + (int64_t)rndn(100));
    break;
  case 14: /* INT_FOR of few codes (a small dimension's keys): probed per code */
    val_int(v, (int64_t)rndn(100) - 50);
    break;
  default: /* TEXT_DICT with NULLs */
    if (rndn(4) == 0)
      v->cls = CSQ_NULL;
    else
      val_word(v, CSQ_TEXT);
  }
}

/* The rows of data mode m, some deleted in the modes with deletes. */
static void draw_mode(int m) {
  for (int r = 0; r < NROW; r++) {
    draw_row(m, r, &aData[r]);
    aDel[r] = (m == 1 || m == 8 || m == 13 || m == 14) && rndn(9) == 0;
  }
}

static uint64_t tv_hash(const test_val *v) {
  switch (v->cls) {
  case CSQ_INT:
    return csq_key_hash_int(v->i);
  case CSQ_REAL:
    return csq_key_hash_real(v->r);
  default:
    return csq_key_hash_bytes(v->cls, v->z, (uint32_t)v->n);
  }
}

static int tv_eq(const test_val *a, const test_val *b) {
  csq_value x = {.cls = (uint8_t)a->cls,
                 .i = a->i,
                 .r = a->r,
                 .z = (const uint8_t *)a->z,
                 .n = (uint32_t)a->n};
  csq_value y = {.cls = (uint8_t)b->cls,
                 .i = b->i,
                 .r = b->r,
                 .z = (const uint8_t *)b->z,
                 .n = (uint32_t)b->n};
  return a->cls != CSQ_NULL && b->cls != CSQ_NULL && csq_value_eq(&x, &y);
}

/* A fake SLM holding the job, the row group's two chunks (rowids, the
** column) and the output area. */
typedef struct rg {
  uint8_t *slm;
  size_t nSlm;
  csq_mrange aMr[3];
  int enc;
  csq_chunk_info aInfo[2];
} rg;

static void rg_build(rg *g) {
  uint8_t *aC[2];
  size_t anC[2];
  csq_vec v[2];
  for (int c = 0; c < 2; c++) {
    csq_vec_init(&v[c]);
    for (int r = 0; r < NROW; r++) {
      if (c == 0)
        csq_vec_push_int(&v[c], r + 1);
      else
        test_val_push(&v[c], &aData[r]);
    }
    CHECK_RC(csq_chunk_encode(&v[c], 0, NROW, &aC[c], &anC[c], &g->aInfo[c]), 0);
    csq_vec_free(&v[c]);
  }
  g->enc = g->aInfo[1].enc;
  size_t nDel = (NROW + 7) / 8, nJob = (CSQ_JOB_HDR + 2 * CSQ_JOB_CHUNK_SZ + nDel + 7) & ~7u;
  size_t off1 = (anC[0] + 7) & ~7u, nIn = (off1 + anC[1] + 7) & ~7u, nOut = 1 << 20;
  g->nSlm = nJob + nIn + nOut;
  g->slm = calloc(1, g->nSlm);
  uint8_t *j = g->slm;
  csq_put_le32(j, CSQ_JOB_MAGIC);
  csq_put_le32(j + 4, NROW);
  csq_put_le32(j + 8, 2);
  csq_put_le32(j + 12, (uint32_t)nDel);
  uint64_t aOff[2] = {0, off1};
  for (int c = 0; c < 2; c++) {
    uint8_t *e = j + CSQ_JOB_HDR + CSQ_JOB_CHUNK_SZ * c;
    csq_put_le64(e, aOff[c]);
    csq_put_le64(e + 8, anC[c]);
    csq_put_le64(e + 16, XXH3_64bits(aC[c], anC[c]));
    memcpy(g->slm + nJob + aOff[c], aC[c], anC[c]);
    free(aC[c]);
  }
  uint8_t *del = j + CSQ_JOB_HDR + 2 * CSQ_JOB_CHUNK_SZ;
  for (int r = 0; r < NROW; r++)
    if (aDel[r]) del[r / 8] |= (uint8_t)(1u << (r % 8));
  csq_put_le64(j + 16, csq_job_hash(j, CSQ_JOB_HDR + 2 * CSQ_JOB_CHUNK_SZ + nDel));
  g->aMr[0] = (csq_mrange){CSQ_NSID_SLM, 0, nJob, 0, 0};
  g->aMr[1] = (csq_mrange){CSQ_NSID_SLM, 0, nIn, nJob, 0};
  g->aMr[2] = (csq_mrange){CSQ_NSID_SLM, 0, nOut, nJob + nIn, 0};
}

/* Run program p[0..n) (its one output: the rowids) over g: aKeep[r] = 1
** for each row returned. 0, or -1 if it was refused or faulted. */
static int rg_run(rg *g, const uint8_t *p, size_t n, uint8_t *aKeep) {
  void *pc = NULL;
  char zErr[200];
  memset(aKeep, 0, NROW);
  if (dev_ptype_csq.xVerify(p, n, &pc, zErr, sizeof(zErr))) {
    printf("verify failed: %s\n", zErr);
    return -1;
  }
  dev_stats st;
  dev_exec_ctx ctx;
  memset(&st, 0, sizeof(st));
  memset(&ctx, 0, sizeof(ctx));
  ctx.pSlm = g->slm;
  ctx.nSlm = g->nSlm;
  ctx.aRange = g->aMr;
  ctx.nRange = 3;
  ctx.aParam[0] = csq_prog_id(p, n);
  ctx.pStats = &st;
  uint64_t ret = 0;
  int rc = dev_ptype_csq.xRun(pc, &ctx, &ret);
  dev_ptype_csq.xFree(pc);
  if (rc) {
    printf("xRun fault %d: %s\n", rc, csq_fault_name(ret));
    return -1;
  }
  const uint8_t *o = g->slm + g->aMr[2].addr;
  uint32_t nRows = csq_le32(o + 4), nextRow = csq_le32(o + 8);
  CHECK(csq_le32(o) == CSQ_RES_MAGIC && nextRow == NROW, ": result header");
  const uint8_t *pv = o + CSQ_RES_HDR + CSQ_RES_COL_SZ;
  for (uint32_t k = 0; k < nRows; k++) {
    int64_t rid = (int64_t)csq_le64(pv + 8 * k);
    if (rid >= 1 && rid <= NROW)
      aKeep[rid - 1] = 1;
    else
      CHECK(0, ": rowid %lld", (long long)rid);
  }
  return 0;
}

/* The key set: some of the data's values (in the other numeric class half
** of the time: 4.0 for 4), and values the data never holds. */
static test_val aKey[NROW];
static int nKey;

static void draw_keys(int m) {
  nKey = 0;
  int nWant = 1 + (int)rndn(rndn(2) ? 3 : NROW / 3);
  /* at least one key of a live row, unless the column is all NULL */
  for (int i = 0; i < nWant || (nKey == 0 && i < 100000); i++) {
    int r = (int)rndn(NROW);
    test_val v = aData[r];
    if (v.cls == CSQ_NULL || aDel[r]) continue;
    if (v.cls == CSQ_INT && rndn(2) && v.i > -(1ll << 53) && v.i < (1ll << 53))
      val_real(&v, (double)v.i);
    else if (v.cls == CSQ_REAL && v.r == floor(v.r) && fabs(v.r) < 1e15 && rndn(2))
      val_int(&v, (int64_t)v.r);
    aKey[nKey++] = v;
  }
  for (int i = 0; i < 20; i++) {
    test_val v;
    draw_row(m == 11 ? 0 : m, 0, &v);
    if (v.cls == CSQ_INT) v.i = (int64_t)((uint64_t)v.i + 1000000); /* wraps at the ends */
    if (v.cls == CSQ_REAL) v.r += 0.03125;
    if ((v.cls == CSQ_TEXT || v.cls == CSQ_BLOB) && v.n < 20) v.z[v.n++] = '#';
    if (v.cls == CSQ_NULL) continue;
    aKey[nKey++] = v;
  }
}

/* Build the filter of the key set into a malloc'd buffer of *pnB bytes (a
** size for rate fp, or the smallest filter if bTiny). */
static uint8_t *keys_filter(double fp, int bTiny, uint32_t *pnB) {
  uint32_t nB = bTiny ? CSQ_BLOOM_MIN_BYTES : csq_bloom_size((uint64_t)nKey, fp);
  uint8_t *f = malloc(nB);
  csq_bloom_init(f, nB);
  for (int i = 0; i < nKey; i++) csq_bloom_add(f, nB, tv_hash(&aKey[i]));
  *pnB = nB;
  return f;
}

static void test_term(void) {
  int aEncSeen[16] = {0}, nZoneSkip = 0;
  uint8_t *aKeep = malloc(NROW);
  for (int m = 0; m < 15; m++) {
    draw_mode(m);
    rg g;
    rg_build(&g);
    aEncSeen[g.enc] = 1;
    for (int it = 0; it < 12; it++) {
      draw_keys(m);
      uint32_t nB;
      uint8_t *f = keys_filter(it % 3 == 0 ? 0.3 : 0.01, it == 5, &nB);
      /* shapes: 0 the term alone; 1 AND a rowid range; 2 OR the column IS
      ** NULL; 3 AND a second filter (of other keys) on the same column */
      int shape = it % 4;
      int64_t cut = (int64_t)rndn(NROW);
      csq_pb *b = csq_pb_new();
      int s0 = csq_pb_input(b, 0), s1 = csq_pb_input(b, 1);
      csq_pb_output(b, s0);
      csq_pb_clause(b);
      CHECK_RC(pl_filter_add_bloom(b, s1, f, nB), 0);
      if (shape == 2) CHECK_RC(csq_pb_term(b, CSQ_OP_ISNULL, 0, s1, 0, 0, 0), 0);
      if (shape == 1) {
        int k = csq_pb_const_int(b, cut);
        csq_pb_clause(b);
        csq_pb_term(b, CSQ_OP_LE, 0, s0, k, 0, 0);
      }
      uint32_t nB2 = 0;
      uint8_t *f2 = NULL;
      if (shape == 3) {
        draw_keys(m);
        f2 = keys_filter(0.05, 0, &nB2);
        CHECK_RC(csq_pb_clause(b), 0);
        CHECK_RC(csq_pb_bloom(b, CSQ_TF_AFF_NUMERIC, s1, f2, nB2), 0);
      }
      uint8_t *p;
      size_t n;
      CHECK_RC(csq_pb_finish(b, &p, &n), 0);
      csq_pb_free(b);
      if (rg_run(&g, p, n, aKeep) == 0) {
        int nBad = 0, nKept = 0, nMust = 0;
        for (int r = 0; r < NROW; r++) {
          const test_val *x = &aData[r];
          int bNull = x->cls == CSQ_NULL;
          int want = !bNull && csq_bloom_maybe(f, nB, tv_hash(x));
          if (shape == 1) want = want && r + 1 <= cut;
          if (shape == 2) want = want || bNull;
          if (shape == 3) want = want && !bNull && csq_bloom_maybe(f2, nB2, tv_hash(x));
          want = want && !aDel[r];
          if (aKeep[r] != want && nBad++ < 3)
            CHECK(0, ": mode %d enc %d shape %d row %d (class %d): got %d want %d", m, g.enc, shape,
                  r, x->cls, aKeep[r], want);
          nKept += aKeep[r];
          /* a row whose value equals a key is kept (the filter's promise) */
          if (shape == 0 && !aDel[r]) {
            int bJoin = 0;
            for (int i = 0; i < nKey && !bJoin; i++) bJoin = tv_eq(x, &aKey[i]);
            nMust += bJoin;
            if (bJoin && !aKeep[r] && nBad++ < 3)
              CHECK(0, ": mode %d row %d joins but was dropped", m, r);
          }
        }
        CHECK(nBad == 0, ": mode %d enc %d shape %d: %d rows differ", m, g.enc, shape, nBad);
        if (shape == 0 && m != 11) CHECK(nMust > 0 && nKept >= nMust, ": mode %d", m);
      } else {
        CHECK(0, ": mode %d shape %d: the program did not run", m, shape);
      }
      free(p);
      free(f);
      free(f2);
    }
    /* zone maps: only an all-NULL column is skipped */
    {
      uint32_t nB;
      uint8_t *f = keys_filter(0.01, 0, &nB);
      csq_pb *b = csq_pb_new();
      int s0 = csq_pb_input(b, 0), s1 = csq_pb_input(b, 1);
      csq_pb_output(b, s0);
      csq_pb_bloom(b, 0, s1, f, nB);
      uint8_t *p;
      size_t n;
      csq_prog pr;
      char zErr[200];
      CHECK_RC(csq_pb_finish(b, &p, &n), 0);
      CHECK_RC(csq_prog_parse(p, n, &pr, zErr, sizeof(zErr)), 0);
      int bSkip = csq_prog_zone_skip(&pr, NROW, 0, zone_of, g.aInfo);
      CHECK(bSkip == (m == 11), ": mode %d: zone skip %d", m, bSkip);
      csq_prog_clear(&pr);
      csq_pb_free(b);
      free(p);
      free(f);
    }
    /* zone maps with a filter of keys the column lacks: a skip must be
    ** sound (no row may pass), and a column of integers in a narrow range,
    ** or of one value, is skipped when none of its values may pass */
    for (int j = 0; j < 2; j++) {
      uint32_t nB = 256;
      uint8_t f[256];
      csq_bloom_init(f, nB);
      test_val x;
      if (j == 0) {
        val_int(&x, 1000000007);
      } else {
        draw_row(m == 11 ? 0 : m, 0, &x); /* maybe one of the column's values */
        if (x.cls == CSQ_NULL) val_int(&x, 1);
      }
      csq_bloom_add(f, nB, tv_hash(&x));
      int bAny = 0;
      for (int r = 0; r < NROW && !bAny; r++)
        bAny = aData[r].cls != CSQ_NULL && csq_bloom_maybe(f, nB, tv_hash(&aData[r]));
      csq_pb *b = csq_pb_new();
      int s0 = csq_pb_input(b, 0), s1 = csq_pb_input(b, 1);
      csq_pb_output(b, s0);
      csq_pb_bloom(b, 0, s1, f, nB);
      uint8_t *p;
      size_t n;
      csq_prog pr;
      char zErr[200];
      CHECK_RC(csq_pb_finish(b, &p, &n), 0);
      CHECK_RC(csq_prog_parse(p, n, &pr, zErr, sizeof(zErr)), 0);
      int bSkip = csq_prog_zone_skip(&pr, NROW, 0, zone_of, g.aInfo);
      const csq_zone *z = &g.aInfo[1].zone;
      int bNarrow = (z->clsMask & ~(1u << CSQ_NULL)) == (1u << CSQ_INT) &&
                    (uint64_t)z->iMax - (uint64_t)z->iMin < 4096;
      int bOne = g.enc == CSQ_ENC_CONST;
      nZoneSkip += bSkip && m != 11;
      CHECK(!bSkip || !bAny, ": mode %d: a row group skipped that has a row to keep", m);
      /* a narrow range is probed whole: absent values count too */
      int bAnyRange = 0;
      for (uint64_t k = 0; bNarrow && k <= (uint64_t)z->iMax - (uint64_t)z->iMin; k++)
        bAnyRange |= csq_bloom_maybe(f, nB, csq_key_hash_int((int64_t)((uint64_t)z->iMin + k)));
      if (bNarrow)
        CHECK(bSkip == !bAnyRange, ": mode %d filter %d: skip %d", m, j, bSkip);
      else if (bOne || m == 11)
        CHECK(bSkip == !bAny, ": mode %d filter %d: skip %d, a value may pass %d", m, j, bSkip,
              bAny);
      csq_prog_clear(&pr);
      csq_pb_free(b);
      free(p);
    }
    free(g.slm);
  }
  for (int e = 1; e <= 9; e++) CHECK(aEncSeen[e], ": encoding %d never met", e);
  CHECK(nZoneSkip >= 3, ": zone maps skipped %d row groups with values", nZoneSkip);
  free(aKeep);
}

/* ---- end to end: store, device, dev_scan ---- */

#define E_RG   4
#define E_ROWS 20000 /* per row group */

static void test_scan(void) {
  char *zErr = NULL;
  dev_options o;
  dev_device *pDev = NULL;
  dev_queue *q = NULL;
  store *st = NULL;
  dev_options_default(&o);
  if (dev_open(":memory:", &o, &pDev, &zErr) || dev_queue_open(pDev, &q) ||
      store_open(pDev, q, 1, &st, &zErr)) {
    CHECK(0, ": cannot open an in-memory device and store: %s", zErr ? zErr : "?");
    free(zErr);
    return;
  }
  /* t(a INTEGER, c TEXT): a in a wide range, c a key of 1000 */
  const int nRow = E_RG * E_ROWS;
  int64_t *aA = malloc(sizeof(int64_t) * (size_t)nRow);
  int *aCNull = malloc(sizeof(int) * (size_t)nRow);
  char(*azC)[12] = malloc(12 * (size_t)nRow);
  store_txn *t = NULL;
  int rc = store_txn_begin(st, q, 1000, &t, &zErr);
  store_col aCol[2] = {{"a", "INTEGER", 0}, {"c", "TEXT", 0}};
  if (rc == 0) rc = store_txn_create_table(t, "t", 2, aCol, &zErr);
  store_table *pTab = rc == 0 ? store_txn_table(t, "t") : NULL;
  csq_vec v[3];
  for (int c = 0; c < 3; c++) csq_vec_init(&v[c]);
  for (int g = 0; g < E_RG && rc == 0; g++) {
    for (int c = 0; c < 3; c++) csq_vec_reset(&v[c]);
    int64_t r0 = store_txn_new_rowids(t, pTab, E_ROWS);
    for (int i = 0; i < E_ROWS; i++) {
      int r = g * E_ROWS + i;
      aA[r] = (int64_t)rndn(4000000);
      aCNull[r] = rndn(10) == 0;
      snprintf(azC[r], sizeof(azC[r]), "c%d", (int)rndn(1000));
      csq_vec_push_int(&v[0], r0 + i);
      csq_vec_push_int(&v[1], aA[r]);
      if (aCNull[r])
        csq_vec_push_null(&v[2]);
      else
        csq_vec_push_bytes(&v[2], CSQ_TEXT, azC[r], (uint32_t)strlen(azC[r]));
    }
    rc = store_txn_append(t, pTab, v, 0, E_ROWS, &zErr);
  }
  for (int c = 0; c < 3; c++) csq_vec_free(&v[c]);
  if (rc == 0)
    rc = store_txn_commit(t, &zErr);
  else if (t)
    store_txn_rollback(t);
  CHECK(rc == 0, ": building the table: %s", zErr ? zErr : "?");
  store_snap *snap = NULL;
  if (rc == 0) rc = store_snapshot(st, q, &snap, &zErr);
  pTab = snap ? store_snap_table(snap, "t") : NULL;
  CHECK(pTab != NULL);
  /* filters: a of every third row (a 2 MiB filter: a program of more than
  ** one Load Program piece), c of 300 keys */
  uint32_t nA = 2u << 20, nC = csq_bloom_size(300, 0.01);
  uint8_t *fA = malloc(nA), *fC = malloc(nC);
  csq_bloom_init(fA, nA);
  csq_bloom_init(fC, nC);
  for (int r = 0; r < nRow; r += 3) csq_bloom_add(fA, nA, csq_key_hash_int(aA[r]));
  for (int k = 0; k < 300; k++) {
    char z[12];
    int n = snprintf(z, sizeof(z), "c%d", (int)rndn(1000));
    csq_bloom_add(fC, nC, csq_key_hash_bytes(CSQ_TEXT, z, (uint32_t)n));
  }
  for (int shape = 0; shape < 3 && pTab; shape++) {
    csq_pb *b = csq_pb_new();
    int sR = csq_pb_input(b, 0), sA = csq_pb_input(b, 1), sC = csq_pb_input(b, 2);
    csq_pb_output(b, sR);
    if (shape != 1) pl_filter_add_bloom(b, sA, fA, nA);
    if (shape != 0) pl_filter_add_bloom(b, sC, fC, nC);
    uint8_t *p;
    size_t n;
    CHECK_RC(csq_pb_finish(b, &p, &n), 0);
    csq_pb_free(b);
    CHECK(shape == 1 || n > (1u << 20), ": a program of %zu bytes", n);
    dev_scan *s = NULL;
    rc = dev_scan_open(q, st, pTab, pTab->apRg, pTab->nRg, p, n, &s, &zErr);
    CHECK(rc == 0, ": scan: %s", zErr ? zErr : "?");
    free(p);
    if (rc) break;
    uint8_t *aSeen = calloc(1, (size_t)nRow);
    csq_vec out;
    csq_vec_init(&out);
    for (;;) {
      uint32_t nr = 0;
      rc = dev_scan_next(s, &out, &nr, &zErr);
      CHECK(rc == 0, ": next: %s", zErr ? zErr : "?");
      if (rc || nr == 0) break;
      for (uint32_t i = 0; i < nr; i++) {
        int64_t rid = out.aVal[i].i;
        if (rid >= 1 && rid <= nRow) aSeen[rid - 1] = 1;
      }
    }
    int nBad = 0, nJoin = 0, nGot = 0;
    for (int r = 0; r < nRow; r++) {
      uint64_t hC = csq_key_hash_bytes(CSQ_TEXT, azC[r], (uint32_t)strlen(azC[r]));
      int okA = csq_bloom_maybe(fA, nA, csq_key_hash_int(aA[r]));
      int okC = !aCNull[r] && csq_bloom_maybe(fC, nC, hC);
      int want = shape == 0 ? okA : shape == 1 ? okC : okA && okC;
      nBad += aSeen[r] != want;
      nGot += aSeen[r];
      if (shape == 0 && r % 3 == 0) {
        nJoin++;
        nBad += !aSeen[r]; /* a row whose key is in the set is never dropped */
      }
    }
    CHECK(nBad == 0, ": shape %d: %d rows differ (%d kept)", shape, nBad, nGot);
    if (shape == 0) CHECK(nGot >= nJoin && nGot < nJoin + nRow / 50, ": %d kept", nGot);
    csq_vec_free(&out);
    free(aSeen);
    dev_scan_close(s);
  }
  if (snap) store_snap_unref(snap);
  free(fA);
  free(fC);
  free(aA);
  free(aCNull);
  free(azC);
  free(zErr);
  store_unref(st);
  dev_queue_close(q);
  dev_unref(pDev);
}

/* ---- the verifier and the builder ---- */

static int parse_rc(const uint8_t *p, size_t n, char *zErr, size_t nErr) {
  csq_prog pr;
  int rc = csq_prog_parse(p, n, &pr, zErr, nErr);
  csq_prog_clear(&pr);
  return rc;
}

/* A program field changed (width 1, 2 or 4 bytes at off to v), and why it
** must be refused. */
typedef struct prog_mut {
  size_t off;
  int width;
  uint64_t v;
  const char *zWhy;
} prog_mut;

/* Each mutation of program p[0..n) is refused with a message (holding
** zNeed when not NULL). */
static void check_refused(const uint8_t *p, size_t n, const prog_mut *a, size_t nMut,
                          const char *zNeed) {
  uint8_t *q = malloc(n);
  char zErr[200];
  for (size_t i = 0; i < nMut; i++) {
    memcpy(q, p, n);
    if (a[i].width == 1) q[a[i].off] = (uint8_t)a[i].v;
    if (a[i].width == 2) csq_put_le16(q + a[i].off, (uint16_t)a[i].v);
    if (a[i].width == 4) csq_put_le32(q + a[i].off, (uint32_t)a[i].v);
    zErr[0] = 0;
    CHECK_RC(parse_rc(q, n, zErr, sizeof(zErr)), -EINVAL);
    CHECK(zErr[0] != 0 && (!zNeed || strstr(zErr, zNeed)), ": %s refused with \"%s\"", a[i].zWhy,
          zErr);
  }
  free(q);
}

/* A join filter term of op over BLOB f[0..nf) only filters: as a condition
** of CASE the program is refused. */
static void check_not_a_condition(int op, const uint8_t *f, uint32_t nf) {
  csq_pb *b = csq_pb_new();
  int s1 = csq_pb_input(b, 1);
  int k = csq_pb_const_bytes(b, CSQ_BLOB, f, nf);
  int c = csq_pb_cond(b, op, 0, s1, k, 0, 0);
  int e1 = csq_pb_expr_const(b, csq_pb_const_int(b, 1)),
      e0 = csq_pb_expr_const(b, csq_pb_const_int(b, 0));
  csq_pb_agg(b, CSQ_AGG_SUM, 0, csq_pb_expr_case(b, c, e1, e0));
  uint8_t *p;
  size_t n;
  char zErr[200];
  CHECK_RC(csq_pb_finish(b, &p, &n), 0);
  csq_pb_free(b);
  CHECK_RC(parse_rc(p, n, zErr, sizeof(zErr)), -EINVAL);
  CHECK(strstr(zErr, "only filter terms") != NULL, ": %s", zErr);
  free(p);
}

static void test_verify(void) {
  uint8_t f[64] = {0}, big[128] = {0};
  char zErr[200];
  /* the builder refuses what the format does not allow */
  static const uint32_t aBadSize[] = {0, 16, 31, 48, 100, 96, 2 * CSQ_BLOOM_MAX_BYTES};
  for (size_t i = 0; i < sizeof(aBadSize) / sizeof(aBadSize[0]); i++) {
    csq_pb *b = csq_pb_new();
    int s = csq_pb_input(b, 1);
    CHECK_RC(csq_pb_bloom(b, 0, s, big, aBadSize[i]), -EINVAL);
    csq_pb_free(b);
  }
  static const int aBadFlags[] = {CSQ_TF_NOT,      CSQ_TF_NOCASE,    CSQ_TF_RTRIM, CSQ_TF_LIKE_CASE,
                                  CSQ_TF_AFF_MASK, CSQ_TF_BLOB_TEXT, 0x100};
  for (size_t i = 0; i < sizeof(aBadFlags) / sizeof(aBadFlags[0]); i++) {
    csq_pb *b = csq_pb_new();
    int s = csq_pb_input(b, 1);
    CHECK_RC(csq_pb_bloom(b, aBadFlags[i], s, f, sizeof(f)), -EINVAL);
    csq_pb_free(b);
  }
  {
    csq_pb *b = csq_pb_new();
    int s = csq_pb_input(b, 1);
    CHECK_RC(csq_pb_bloom(b, 0, s + 1, f, sizeof(f)), -EINVAL);
    csq_pb_free(b);
    b = csq_pb_new();
    s = csq_pb_input(b, 1);
    CHECK_RC(csq_pb_bloom(b, 0, s, NULL, sizeof(f)), -EINVAL);
    csq_pb_free(b);
  }
  /* a valid program, then each field of its term and filter made wrong */
  csq_pb *b = csq_pb_new();
  int s0 = csq_pb_input(b, 0), s1 = csq_pb_input(b, 1);
  csq_pb_output(b, s0);
  for (int i = 0; i < 64; i++) f[i] = (uint8_t)rnd();
  CHECK_RC(csq_pb_bloom(b, CSQ_TF_AFF_TEXT, s1, f, sizeof(f)), 0);
  int kText = csq_pb_const_bytes(b, CSQ_TEXT, "abcdefgh", 8);
  uint8_t *p;
  size_t n;
  CHECK_RC(csq_pb_finish(b, &p, &n), 0);
  csq_pb_free(b);
  CHECK_RC(parse_rc(p, n, zErr, sizeof(zErr)), 0);
  uint8_t *q = malloc(n);
  const size_t oTerm = CSQ_PROG_HDR + 4 * (2 + 1 + 1), oConst = oTerm + CSQ_PROG_TERM_SZ;
  const prog_mut aMut[] = {
      {oTerm + 1, 1, CSQ_TF_NOT, "NOT"},
      {oTerm + 1, 1, CSQ_TF_NOCASE, "collation"},
      {oTerm + 1, 1, CSQ_TF_BLOB_TEXT, "blob-as-text"},
      {oTerm + 6, 2, 1, "second constant"},
      {oTerm + 8, 4, 7, "escape"},
      {oTerm + 4, 2, (uint64_t)kText, "a TEXT filter"},
      {oTerm + 4, 2, 2, "a constant out of range"},
      {oConst + 4, 4, 48, "48 bytes"},
      {oConst + 4, 4, 16, "16 bytes"},
      {oConst + 4, 4, 0, "0 bytes"},
      {oConst + 4, 4, 128, "128 bytes (past the heap)"},
      {oConst, 1, CSQ_TEXT, "a TEXT constant"},
  };
  check_refused(p, n, aMut, sizeof(aMut) / sizeof(aMut[0]), NULL);
  /* every truncation refused; every bit flip parsed or refused, never more */
  for (size_t k = 0; k < n; k++) CHECK_RC(parse_rc(p, k, zErr, sizeof(zErr)), -EINVAL);
  for (size_t k = 0; k < n * 8; k++) {
    memcpy(q, p, n);
    q[k / 8] ^= (uint8_t)(1u << (k % 8));
    int rc = parse_rc(q, n, zErr, sizeof(zErr));
    CHECK(rc == 0 || rc == -EINVAL);
  }
  free(q);
  free(p);
  /* a join filter only filters: not a condition of CASE */
  check_not_a_condition(CSQ_OP_BLOOM, f, sizeof(f));
  /* the largest filters fit, two of them; a third does not */
  uint8_t *pMax = calloc(1, CSQ_BLOOM_MAX_BYTES);
  csq_bloom_add(pMax, CSQ_BLOOM_MAX_BYTES, csq_key_hash_int(7));
  b = csq_pb_new();
  s1 = csq_pb_input(b, 1);
  CHECK_RC(csq_pb_bloom(b, 0, s1, pMax, CSQ_BLOOM_MAX_BYTES), 0);
  CHECK_RC(csq_pb_bloom(b, 0, s1, pMax, CSQ_BLOOM_MAX_BYTES), 0);
  CHECK_RC(csq_pb_finish(b, &p, &n), 0);
  csq_pb_free(b);
  CHECK(n <= CSQ_PROG_MAX_BYTES);
  void *pc = NULL;
  CHECK_RC(dev_ptype_csq.xVerify(p, n, &pc, zErr, sizeof(zErr)), 0);
  if (pc) dev_ptype_csq.xFree(pc);
  free(p);
  b = csq_pb_new();
  s1 = csq_pb_input(b, 1);
  csq_pb_bloom(b, 0, s1, pMax, CSQ_BLOOM_MAX_BYTES);
  csq_pb_bloom(b, 0, s1, pMax, CSQ_BLOOM_MAX_BYTES);
  CHECK_RC(csq_pb_bloom(b, 0, s1, pMax, CSQ_BLOOM_MAX_BYTES), -EINVAL);
  csq_pb_free(b);
  /* a LIKE pattern stays within its own bound, whatever the heap allows */
  b = csq_pb_new();
  s1 = csq_pb_input(b, 1);
  memset(pMax, '%', CSQ_PROG_MAX_PATTERN + 1);
  int k = csq_pb_const_bytes(b, CSQ_TEXT, pMax, CSQ_PROG_MAX_PATTERN + 1);
  csq_pb_term(b, CSQ_OP_LIKE, 0, s1, k, 0, 0);
  CHECK_RC(csq_pb_finish(b, &p, &n), 0);
  csq_pb_free(b);
  CHECK_RC(parse_rc(p, n, zErr, sizeof(zErr)), -EINVAL);
  CHECK(strstr(zErr, "pattern of") != NULL, ": %s", zErr);
  free(p);
  free(pMax);
}

/* ---- bitmaps of integer keys (CSQ_OP_KEYMAP) ---- */

/* Key k's integer, if it is one (a REAL equal to an integer counts). */
static int key_int(const test_val *v, int64_t *pi) {
  if (v->cls == CSQ_INT) {
    *pi = v->i;
    return 1;
  }
  return v->cls == CSQ_REAL && csq_real_int(v->r, pi);
}

/* The bitmap of the integer keys among aKey (the others dropped), over
** their span widened by `pad` on each side; NULL if there is none or the
** span is too wide. */
static uint8_t *keys_map(uint64_t pad, uint32_t *pnB) {
  int64_t lo = INT64_MAX, hi = INT64_MIN, x;
  for (int i = 0; i < nKey; i++)
    if (key_int(&aKey[i], &x)) {
      lo = x < lo ? x : lo;
      hi = x > hi ? x : hi;
    }
  if (lo > hi) return NULL;
  lo = (uint64_t)lo - (uint64_t)INT64_MIN >= pad ? lo - (int64_t)pad : INT64_MIN;
  hi = (uint64_t)INT64_MAX - (uint64_t)hi >= pad ? hi + (int64_t)pad : INT64_MAX;
  if ((uint64_t)hi - (uint64_t)lo >= 8ull * (1u << 20)) return NULL;
  uint32_t nB = CSQ_KEYMAP_HDR + (uint32_t)(((uint64_t)hi - (uint64_t)lo) / 8 + 1);
  uint8_t *m = calloc(1, nB);
  csq_put_le64(m, (uint64_t)lo);
  for (int i = 0; i < nKey; i++)
    if (key_int(&aKey[i], &x)) {
      uint64_t u = (uint64_t)x - (uint64_t)lo;
      m[CSQ_KEYMAP_HDR + u / 8] |= (uint8_t)(1u << (u % 8));
    }
  *pnB = nB;
  return m;
}

/* Row value x is one of the integer keys (SQLite's "=": 4.0 = 4)? */
static int in_int_keys(const test_val *x) {
  int64_t a, b;
  if (!key_int(x, &a)) return 0;
  for (int i = 0; i < nKey; i++)
    if (key_int(&aKey[i], &b) && a == b) return 1;
  return 0;
}

/* Every encoding's path (codes of a narrow FOR chunk, words, reals,
** dictionaries, tagged values) against membership computed here, and
** the zone maps: a skip only where no row passes, and a column of
** integers wholly outside the span always skipped. */
static void test_keymap_term(void) {
  uint8_t *aKeep = malloc(NROW);
  int nRan = 0, nSkipOut = 0;
  for (int m = 0; m < 15; m++) {
    draw_mode(m);
    rg g;
    rg_build(&g);
    for (int it = 0; it < 10; it++) {
      draw_keys(m);
      if (it % 3 == 2) /* keys beside the data's */
        for (int i = 0; i < nKey; i++)
          if (aKey[i].cls == CSQ_INT) aKey[i].i = (int64_t)((uint64_t)aKey[i].i + 7);
      uint32_t nB = 0;
      uint8_t *f = keys_map(it % 2 ? 0 : rndn(100), &nB);
      if (!f) continue;
      int shape = it % 2; /* 0 the term alone; 1 OR the column IS NULL */
      csq_pb *b = csq_pb_new();
      int s0 = csq_pb_input(b, 0), s1 = csq_pb_input(b, 1);
      csq_pb_output(b, s0);
      csq_pb_clause(b);
      CHECK_RC(pl_filter_add_keymap(b, s1, f, nB), 0);
      if (shape == 1) CHECK_RC(csq_pb_term(b, CSQ_OP_ISNULL, 0, s1, 0, 0, 0), 0);
      uint8_t *p;
      size_t n;
      CHECK_RC(csq_pb_finish(b, &p, &n), 0);
      csq_pb_free(b);
      int bAny = 0;
      if (rg_run(&g, p, n, aKeep) == 0) {
        nRan++;
        int nBad = 0;
        for (int r = 0; r < NROW; r++) {
          const test_val *x = &aData[r];
          int in = in_int_keys(x);
          bAny |= in;
          int want = (in || (shape == 1 && x->cls == CSQ_NULL)) && !aDel[r];
          if (aKeep[r] != want && nBad++ < 3)
            CHECK(0, ": keymap mode %d enc %d shape %d row %d (class %d): got %d want %d", m, g.enc,
                  shape, r, x->cls, aKeep[r], want);
        }
      } else {
        CHECK(0, ": keymap mode %d: the program did not run", m);
      }
      free(p);
      if (shape == 0) { /* zone maps */
        b = csq_pb_new();
        s0 = csq_pb_input(b, 0);
        s1 = csq_pb_input(b, 1);
        csq_pb_output(b, s0);
        csq_pb_keymap(b, 0, s1, f, nB);
        csq_prog pr;
        char zErr[200];
        CHECK_RC(csq_pb_finish(b, &p, &n), 0);
        CHECK_RC(csq_prog_parse(p, n, &pr, zErr, sizeof(zErr)), 0);
        int bSkip = csq_prog_zone_skip(&pr, NROW, 0, zone_of, g.aInfo);
        CHECK(!bSkip || !bAny, ": keymap mode %d: skipped a row group with a row to keep", m);
        csq_prog_clear(&pr);
        csq_pb_free(b);
        free(p);
        /* the same keys moved past the column's largest integer */
        const csq_zone *z = &g.aInfo[1].zone;
        if ((z->clsMask & ~(1u << CSQ_NULL)) == (1u << CSQ_INT) && z->iMax < INT64_MAX - 100000) {
          csq_put_le64(f, (uint64_t)z->iMax + 1 + rndn(5));
          b = csq_pb_new();
          s0 = csq_pb_input(b, 0);
          s1 = csq_pb_input(b, 1);
          csq_pb_output(b, s0);
          csq_pb_keymap(b, 0, s1, f, nB);
          CHECK_RC(csq_pb_finish(b, &p, &n), 0);
          CHECK_RC(csq_prog_parse(p, n, &pr, zErr, sizeof(zErr)), 0);
          bSkip = csq_prog_zone_skip(&pr, NROW, 0, zone_of, g.aInfo);
          CHECK(bSkip, ": keymap mode %d: integers outside the span not skipped", m);
          nSkipOut += bSkip;
          csq_prog_clear(&pr);
          csq_pb_free(b);
          free(p);
        }
      }
      free(f);
    }
    free(g.slm);
  }
  CHECK(nRan >= 40, ": only %d keymap programs ran", nRan);
  CHECK(nSkipOut >= 5, ": %d skips outside the span", nSkipOut);
  /* the builder and the verifier refuse what the format does not allow */
  uint8_t f[64] = {0};
  static const uint32_t aBadSize[] = {0, 8, CSQ_KEYMAP_HDR + CSQ_KEYMAP_MAX_BYTES + 1};
  uint8_t *big = calloc(1, CSQ_KEYMAP_HDR + CSQ_KEYMAP_MAX_BYTES + 1);
  for (size_t i = 0; i < sizeof(aBadSize) / sizeof(aBadSize[0]); i++) {
    csq_pb *b = csq_pb_new();
    int s = csq_pb_input(b, 1);
    CHECK_RC(csq_pb_keymap(b, 0, s, big, aBadSize[i]), -EINVAL);
    csq_pb_free(b);
  }
  free(big);
  static const int aBadFlags[] = {CSQ_TF_NOT, CSQ_TF_NOCASE, CSQ_TF_AFF_MASK, 0x100};
  for (size_t i = 0; i < sizeof(aBadFlags) / sizeof(aBadFlags[0]); i++) {
    csq_pb *b = csq_pb_new();
    int s = csq_pb_input(b, 1);
    CHECK_RC(csq_pb_keymap(b, aBadFlags[i], s, f, sizeof(f)), -EINVAL);
    csq_pb_free(b);
  }
  csq_pb *b = csq_pb_new();
  int s0 = csq_pb_input(b, 0), s1 = csq_pb_input(b, 1);
  csq_pb_output(b, s0);
  CHECK_RC(csq_pb_keymap(b, 0, s1, f, sizeof(f)), 0);
  uint8_t *p;
  size_t n;
  char zErr[200];
  CHECK_RC(csq_pb_finish(b, &p, &n), 0);
  csq_pb_free(b);
  CHECK_RC(parse_rc(p, n, zErr, sizeof(zErr)), 0);
  const size_t oTerm = CSQ_PROG_HDR + 4 * (2 + 1 + 1), oConst = oTerm + CSQ_PROG_TERM_SZ;
  const prog_mut aMut[] = {{oTerm + 1, 1, CSQ_TF_NOT, "NOT"},
                           {oTerm + 6, 2, 1, "second constant"},
                           {oConst + 4, 4, 8, "a header without bits"},
                           {oConst + 4, 4, 0, "0 bytes"},
                           {oConst, 1, CSQ_TEXT, "a TEXT constant"}};
  check_refused(p, n, aMut, sizeof(aMut) / sizeof(aMut[0]), "KEYMAP");
  free(p);
  check_not_a_condition(CSQ_OP_KEYMAP, f, sizeof(f));
  free(aKeep);
}

int main(void) {
  sqlite3 *db;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) {
    printf("test_bloom: cannot open SQLite\n");
    return 1;
  }
  if (getenv("SEED")) rng = strtoull(getenv("SEED"), NULL, 10);
  test_keyhash(db);
  test_filter();
  test_term();
  test_keymap_term();
  test_verify();
  test_scan();
  sqlite3_close(db);
  return test_done("test_bloom");
}
