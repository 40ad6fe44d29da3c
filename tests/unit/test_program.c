/*
** tests/unit/test_program.c - csq device programs: the verifier against a
** corpus of bad programs (every truncation, every bit flip of valid programs,
** bad indexes and fields), and the executor (dev_ptype_csq.xRun, called
** directly on a fake SLM) against SQLite itself as the oracle, over random
** mixed-class data in every chunk encoding, for every operator, flag and
** collation, with deleted rows, AND/OR clauses, and results too big for the
** output area (continued from nextRow). Also the zone-map skip test against
** the executor: a skipped row group must have no qualifying row.
** Exit 0 = pass; one line per failed check.
*/
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "device/format/chunk.h"
#include "device/format/program.h"
#include "device/engine/ptype.h"
#include "device/store/store.h"
#include "tests/unit/helpers.h"

/* ---- verifier corpus ---- */

static uint8_t *sample_program(size_t *pn) {
  csq_pb *b = csq_pb_new();
  int s0 = csq_pb_input(b, 0), s1 = csq_pb_input(b, 1), s2 = csq_pb_input(b, 3);
  csq_pb_output(b, s0);
  csq_pb_output(b, s2);
  int k1 = csq_pb_const_int(b, 5), k2 = csq_pb_const_real(b, 2.5);
  int k3 = csq_pb_const_bytes(b, CSQ_TEXT, "ab%", 3);
  csq_pb_const_bytes(b, CSQ_BLOB, "\x01\x02", 2);
  csq_pb_const_null(b);
  csq_pb_clause(b);
  csq_pb_term(b, CSQ_OP_GT, 0, s1, k1, 0, 0);
  csq_pb_term(b, CSQ_OP_LIKE, CSQ_TF_NOT, s2, k3, 0, '\\');
  csq_pb_clause(b);
  csq_pb_term(b, CSQ_OP_BETWEEN, 0, s1, k1, k2, 0);
  csq_pb_clause(b);
  csq_pb_term(b, CSQ_OP_IN, CSQ_TF_NOCASE, s2, 0, 5, 0);
  csq_pb_term(b, CSQ_OP_ISNULL, 0, s2, 0, 0, 0);
  uint8_t *p;
  size_t n;
  int rc = csq_pb_finish(b, &p, &n);
  csq_pb_free(b);
  CHECK(rc == 0, "finish %d", rc);
  *pn = n;
  return p;
}

static void try_program(const uint8_t *p, size_t n, int bExpectOk) {
  char zErr[200] = "";
  csq_prog pr;
  int rc = csq_prog_parse(p, n, &pr, zErr, sizeof(zErr));
  CHECK(rc == 0 || rc == -EINVAL, "parse rc %d", rc);
  if (rc) CHECK(zErr[0] != 0, "refusal without a message");
  if (bExpectOk) CHECK(rc == 0, "valid program refused: %s", zErr);
  if (rc == 0) csq_prog_clear(&pr);
  void *pc = NULL;
  zErr[0] = 0;
  int rc2 = dev_ptype_csq.xVerify(p, n, &pc, zErr, sizeof(zErr));
  CHECK((rc2 == 0) == (rc == 0), "xVerify %d vs parse %d", rc2, rc);
  if (rc2 == 0) dev_ptype_csq.xFree(pc);
}

static void test_verifier(void) {
  size_t n;
  uint8_t *p = sample_program(&n);
  try_program(p, n, 1);
  /* every truncation */
  for (size_t k = 0; k < n; k++) {
    uint8_t *q = malloc(k ? k : 1);
    memcpy(q, p, k);
    try_program(q, k, 0);
    free(q);
  }
  /* every bit flip: a clean refusal or a valid program, never a crash */
  uint8_t *q = malloc(n);
  int nOk = 0;
  for (size_t i = 0; i < n; i++)
    for (int bit = 0; bit < 8; bit++) {
      memcpy(q, p, n);
      q[i] ^= (uint8_t)(1u << bit);
      char zErr[200];
      csq_prog pr;
      int rc = csq_prog_parse(q, n, &pr, zErr, sizeof(zErr));
      if (rc == 0) {
        nOk++;
        csq_prog_clear(&pr);
      }
      try_program(q, n, 0);
    }
  /* random byte garbage in the body and whole random programs */
  for (int it = 0; it < 20000; it++) {
    memcpy(q, p, n);
    int m = 1 + (int)rndn(4);
    for (int k = 0; k < m; k++) q[rndn(n)] = (uint8_t)rnd();
    try_program(q, n, 0);
  }
  /* specific faults with the message that names them */
  struct {
    int off;
    uint32_t v;
    int w;
    const char *zWant;
  } aBad[] = {
      {0, 0x12345678, 4, "magic"}, {4, 9, 2, "version"},      {12, 2000, 2, "inputs"},
      {18, 600, 2, "terms"},       {8, 12, 4, "header says"}, {6, 1, 2, "reserved"},
  };
  for (size_t i = 0; i < sizeof(aBad) / sizeof(aBad[0]); i++) {
    memcpy(q, p, n);
    for (int k = 0; k < aBad[i].w; k++) q[aBad[i].off + k] = (uint8_t)(aBad[i].v >> (8 * k));
    char zErr[200] = "";
    csq_prog pr;
    int rc = csq_prog_parse(q, n, &pr, zErr, sizeof(zErr));
    CHECK(rc == -EINVAL && strstr(zErr, aBad[i].zWant), "case %zu: rc %d msg '%s'", i, rc, zErr);
  }
  /* bad indexes through the encoder's raw fields */
  {
    csq_pb *b = csq_pb_new();
    int s = csq_pb_input(b, 1);
    csq_pb_term(b, CSQ_OP_EQ, 0, s + 1, 0, 0, 0); /* slot out of range */
    csq_pb_const_int(b, 1);
    uint8_t *x;
    size_t nx;
    CHECK(csq_pb_finish(b, &x, &nx) == 0, "finish");
    char zErr[200] = "";
    csq_prog pr;
    CHECK(csq_prog_parse(x, nx, &pr, zErr, sizeof(zErr)) == -EINVAL && strstr(zErr, "slot"),
          "slot: %s", zErr);
    free(x);
    csq_pb_free(b);
    b = csq_pb_new();
    s = csq_pb_input(b, 1);
    csq_pb_term(b, CSQ_OP_EQ, 0, s, 3, 0, 0); /* constant out of range */
    csq_pb_finish(b, &x, &nx);
    zErr[0] = 0;
    CHECK(csq_prog_parse(x, nx, &pr, zErr, sizeof(zErr)) == -EINVAL && strstr(zErr, "constant"),
          "const: %s", zErr);
    free(x);
    csq_pb_free(b);
    b = csq_pb_new();
    s = csq_pb_input(b, 1);
    csq_pb_const_int(b, 1);
    csq_pb_term(b, CSQ_OP_IN, 0, s, 0, 4, 0); /* IN list past the pool */
    csq_pb_finish(b, &x, &nx);
    zErr[0] = 0;
    CHECK(csq_prog_parse(x, nx, &pr, zErr, sizeof(zErr)) == -EINVAL && strstr(zErr, "IN"), "in: %s",
          zErr);
    free(x);
    csq_pb_free(b);
    b = csq_pb_new();
    s = csq_pb_input(b, 1);
    csq_pb_const_int(b, 1);
    csq_pb_term(b, CSQ_OP_LIKE, 0, s, 0, 0, 0); /* pattern not text */
    csq_pb_finish(b, &x, &nx);
    zErr[0] = 0;
    CHECK(csq_prog_parse(x, nx, &pr, zErr, sizeof(zErr)) == -EINVAL && strstr(zErr, "pattern"),
          "like: %s", zErr);
    free(x);
    csq_pb_free(b);
  }
  /* too many terms */
  {
    csq_pb *b = csq_pb_new();
    int s = csq_pb_input(b, 1), k = csq_pb_const_int(b, 1), rc = 0;
    for (int i = 0; i <= CSQ_PROG_MAX_TERMS && rc == 0; i++)
      rc = csq_pb_term(b, CSQ_OP_EQ, 0, s, k, 0, 0);
    CHECK(rc == -EINVAL, "term limit not enforced by the encoder");
    csq_pb_free(b);
  }
  printf("verifier: %zu-byte program, %zu bit flips (%d still valid), truncations, random\n", n,
         n * 8, nOk);
  free(q);
  free(p);
}

/* ---- executor vs SQLite ---- */

#define NROW 3000

static test_val aData[NROW];
static int aDel[NROW];

/* Value pools shared by data and constants so that equality hits. */
static const char *azWord[] = {"apple",
                               "Apple",
                               "APPLE",
                               "banana",
                               "ban",
                               "b%n",
                               "a_b",
                               "a\\b",
                               "",
                               "zeta ",
                               "zeta",
                               "Zeta",
                               "\xc3\xa9t\xc3\xa9",
                               "x[y]",
                               "1.5",
                               "10",
                               "caf\xc3\xa9"};
#define NWORD ((int)(sizeof(azWord) / sizeof(azWord[0])))
static const double arReal[] = {1.5,  -2.25,        10.0, 1e20, 0.1, 3.0, -0.5, 9007199254740993.0,
                                1e15, 123456789.125};
#define NREAL ((int)(sizeof(arReal) / sizeof(arReal[0])))

static void rand_val(test_val *v, int mode) {
  int c;
  memset(v, 0, sizeof(*v));
  switch (mode) {
  case 0:
    c = CSQ_INT;
    break; /* ints */
  case 1:
    c = rndn(10) ? CSQ_INT : CSQ_NULL;
    break;
  case 2:
    c = CSQ_REAL;
    break;
  case 3:
    c = rndn(8) ? CSQ_TEXT : CSQ_NULL;
    break;
  case 4:
    c = CSQ_BLOB;
    break;
  default:
    c = 1 + (int)rndn(5);
    break; /* mixed */
  }
  v->cls = c;
  switch (c) {
  case CSQ_INT:
    v->i = rndn(4) == 0 ? (int64_t)rndn(3) - 1 + (rndn(2) ? INT64_MAX - 1 : INT64_MIN + 1)
                        : (int64_t)rndn(40) - 15;
    if (rndn(20) == 0) v->i = 9007199254740992ll + (int64_t)rndn(3);
    break;
  case CSQ_REAL:
    v->r = rndn(3) ? arReal[rndn(NREAL)] : (double)((int64_t)rndn(40) - 15) / (1 + rndn(2));
    break;
  case CSQ_TEXT: {
    const char *w = azWord[rndn(NWORD)];
    v->n = (int)strlen(w);
    memcpy(v->z, w, v->n);
    break;
  }
  case CSQ_BLOB:
    v->n = (int)rndn(4);
    for (int k = 0; k < v->n; k++) v->z[k] = "ab\0\xff"[rndn(4)];
    break;
  }
}

/* The fake SLM: job | input | output. */
typedef struct rg_buf {
  uint8_t *slm;
  size_t nSlm;
  csq_mrange aMr[3];
  uint8_t *aChunk[2];
  size_t anChunk[2];
} rg_buf;

static void vec_from_data(csq_vec *v, int bRowid) {
  csq_vec_init(v);
  for (int r = 0; r < NROW; r++) {
    const test_val *x = &aData[r];
    if (bRowid) {
      csq_vec_push_int(v, r + 1);
      continue;
    }
    test_val_push(v, x);
  }
}

static int g_enc;
static csq_chunk_info g_info[2];

static void rg_build(rg_buf *g, size_t nOut) {
  csq_vec v[2];
  vec_from_data(&v[0], 1);
  vec_from_data(&v[1], 0);
  for (int c = 0; c < 2; c++) {
    csq_chunk_encode(&v[c], 0, NROW, &g->aChunk[c], &g->anChunk[c], &g_info[c]);
    csq_vec_free(&v[c]);
  }
  g_enc = g_info[1].enc;
  size_t nJob = CSQ_JOB_HDR + 2 * CSQ_JOB_CHUNK_SZ + (NROW + 7) / 8;
  nJob = (nJob + 7) & ~7u;
  size_t off1 = (g->anChunk[0] + 7) & ~7u;
  size_t nIn = off1 + g->anChunk[1];
  nIn = (nIn + 7) & ~7u;
  g->nSlm = nJob + nIn + nOut;
  g->slm = calloc(1, g->nSlm);
  uint8_t *j = g->slm;
  uint32_t h[4] = {CSQ_JOB_MAGIC, NROW, 2, (NROW + 7) / 8};
  memcpy(j, h, 16);
  uint64_t e[6] = {0,    g->anChunk[0], XXH3_64bits(g->aChunk[0], g->anChunk[0]),
                   off1, g->anChunk[1], XXH3_64bits(g->aChunk[1], g->anChunk[1])};
  memcpy(j + CSQ_JOB_HDR, e, sizeof(e));
  uint8_t *del = j + CSQ_JOB_HDR + 2 * CSQ_JOB_CHUNK_SZ;
  for (int r = 0; r < NROW; r++)
    if (aDel[r]) del[r / 8] |= (uint8_t)(1u << (r % 8));
  uint64_t hJob = csq_job_hash(j, CSQ_JOB_HDR + 2 * CSQ_JOB_CHUNK_SZ + (NROW + 7) / 8);
  memcpy(j + 16, &hJob, 8);
  memcpy(g->slm + nJob, g->aChunk[0], g->anChunk[0]);
  memcpy(g->slm + nJob + off1, g->aChunk[1], g->anChunk[1]);
  g->aMr[0] = (csq_mrange){CSQ_NSID_SLM, 0, nJob, 0, 0};
  g->aMr[1] = (csq_mrange){CSQ_NSID_SLM, 0, nIn, nJob, 0};
  g->aMr[2] = (csq_mrange){CSQ_NSID_SLM, 0, nOut, nJob + nIn, 0};
}

/* An Execute context over slm[0..nSlm) with ranges aMr[0..3) for program
** p[0..n), its statistics in *pSt (zeroed). */
static void ctx_init(dev_exec_ctx *ctx, dev_stats *pSt, uint8_t *slm, size_t nSlm, csq_mrange *aMr,
                     const uint8_t *p, size_t n) {
  memset(pSt, 0, sizeof(*pSt));
  memset(ctx, 0, sizeof(*ctx));
  ctx->pSlm = slm;
  ctx->nSlm = nSlm;
  ctx->aRange = aMr;
  ctx->nRange = 3;
  ctx->aParam[0] = csq_prog_id(p, n);
  ctx->pStats = pSt;
}

static void rg_free(rg_buf *g) {
  free(g->slm);
  free(g->aChunk[0]);
  free(g->aChunk[1]);
}

/* Run program p over the row group, continuing partial results; the rowids
** of the output (column 0) go to aOut, values of column 1 are checked
** against the data. rowCap: Execute's row cap (CDW15; 0 none), which every
** result must respect. Returns the count, or -1 on a fault. */
static int run_prog(rg_buf *g, const uint8_t *p, size_t n, int64_t *aOut, uint32_t rowCap) {
  void *pc = NULL;
  char zErr[200];
  if (dev_ptype_csq.xVerify(p, n, &pc, zErr, sizeof(zErr))) {
    printf("verify failed: %s\n", zErr);
    return -1;
  }
  dev_stats st;
  dev_exec_ctx ctx;
  ctx_init(&ctx, &st, g->slm, g->nSlm, g->aMr, p, n);
  int nRes = 0;
  uint32_t start = 0;
  for (int guard = 0; guard < 100000; guard++) {
    uint64_t ret = 0;
    ctx.aParam[1] = start | (uint64_t)rowCap << 32;
    int rc = dev_ptype_csq.xRun(pc, &ctx, &ret);
    if (rc) {
      printf("xRun fault %d reason %llu (%s)\n", rc, (unsigned long long)ret, csq_fault_name(ret));
      nRes = -1;
      break;
    }
    const uint8_t *o = g->slm + g->aMr[2].addr;
    uint32_t h[4];
    uint64_t nBytes;
    memcpy(h, o, 16);
    memcpy(&nBytes, o + 16, 8);
    CHECK(h[0] == CSQ_RES_MAGIC && csq_res_check(o, nBytes) == (uint32_t)ret &&
              nBytes == ((ret >> 32) & ~7ull),
          "result header");
    /* column 0: rowids, single class INT */
    const uint8_t *d0 = o + CSQ_RES_HDR;
    CHECK(h[1] == 0 || (d0[0] == (1u << CSQ_INT) && d0[1] == 0), "rowid column classes");
    CHECK(rowCap == 0 || h[1] <= rowCap, "%u rows past the cap of %u", h[1], rowCap);
    const uint8_t *pv = o + CSQ_RES_HDR + 2 * CSQ_RES_COL_SZ;
    for (uint32_t k = 0; k < h[1]; k++) memcpy(&aOut[nRes + k], pv + 8 * k, 8);
    /* column 1: the values, compare with the data */
    const uint8_t *d1 = d0 + CSQ_RES_COL_SZ;
    const uint8_t *q = pv + 8ull * h[1];
    uint64_t nHeap;
    memcpy(&nHeap, d1 + 8, 8);
    const uint8_t *aCls = d1[1] ? q : NULL;
    if (aCls) q += (h[1] + 7) & ~7u;
    const uint8_t *aVal = q;
    q += 8ull * h[1];
    const uint8_t *aLen = d1[2] ? q : NULL;
    if (aLen) q += (4ull * h[1] + 7) & ~7ull;
    const uint8_t *aHeap = q;
    for (uint32_t k = 0; k < h[1]; k++) {
      int64_t rid = aOut[nRes + k];
      if (rid < 1 || rid > NROW) {
        CHECK(0, "rowid %lld", (long long)rid);
        break;
      }
      const test_val *x = &aData[rid - 1];
      int cls = aCls ? aCls[k] : __builtin_ctz(d1[0]);
      uint64_t u;
      memcpy(&u, aVal + 8 * k, 8);
      int ok = cls == x->cls;
      if (ok && cls == CSQ_INT) ok = (int64_t)u == x->i;
      if (ok && cls == CSQ_REAL) ok = memcmp(&u, &x->r, 8) == 0;
      if (ok && (cls == CSQ_TEXT || cls == CSQ_BLOB)) {
        uint32_t len;
        memcpy(&len, aLen + 4 * k, 4);
        ok = len == (uint32_t)x->n && u + len <= nHeap && memcmp(aHeap + u, x->z, len) == 0;
      }
      CHECK(ok, "row %lld: output value differs (class %d vs %d)", (long long)rid, cls, x->cls);
    }
    nRes += (int)h[1];
    if (h[2] >= NROW) break;
    CHECK(h[2] > start, "no progress");
    start = h[2];
  }
  dev_ptype_csq.xFree(pc);
  return nRes;
}

static sqlite3 *db;

static void load_sqlite(void) {
  sqlite3_exec(db, "DROP TABLE IF EXISTS t; CREATE TABLE t(rid INTEGER PRIMARY KEY, x)", 0, 0, 0);
  sqlite3_stmt *st;
  sqlite3_exec(db, "BEGIN", 0, 0, 0);
  sqlite3_prepare_v2(db, "INSERT INTO t VALUES(?1, ?2)", -1, &st, 0);
  for (int r = 0; r < NROW; r++) {
    if (aDel[r]) continue;
    sqlite3_bind_int(st, 1, r + 1);
    test_val_bind(st, 2, &aData[r]);
    sqlite3_step(st);
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  sqlite3_exec(db, "COMMIT", 0, 0, 0);
}

static const char *coll_sql(int f) {
  return (f & CSQ_TF_COLL_MASK) == CSQ_TF_NOCASE  ? " COLLATE NOCASE"
         : (f & CSQ_TF_COLL_MASK) == CSQ_TF_RTRIM ? " COLLATE RTRIM"
                                                  : "";
}

/* One random term: SQL text (parameters ?N from *pnParam on) and encoder. */
typedef struct term {
  int op, flags, nK;
  test_val aK[6];
  uint32_t esc;
} term;

static void rand_const(test_val *v) {
  int m = (int)rndn(10);
  rand_val(v, m < 2 ? 0 : m < 4 ? 2 : m < 7 ? 3 : m < 8 ? 4 : 5);
  if (rndn(25) == 0) v->cls = CSQ_NULL;
}

static void rand_term(term *t) {
  memset(t, 0, sizeof(*t));
  t->op = 1 + (int)rndn(CSQ_OP_GLOB); /* the comparisons SQLite can check (not BPF) */
  int c = (int)rndn(6);
  t->flags = c == 4 ? CSQ_TF_NOCASE : c == 5 ? CSQ_TF_RTRIM : 0;
  switch (t->op) {
  case CSQ_OP_ISNULL:
  case CSQ_OP_NOTNULL:
    t->nK = 0;
    break;
  case CSQ_OP_BETWEEN:
    t->nK = 2;
    break;
  case CSQ_OP_IN:
    t->nK = 1 + (int)rndn(6);
    break;
  default:
    t->nK = 1;
    break;
  }
  for (int k = 0; k < t->nK; k++) rand_const(&t->aK[k]);
  if (t->op == CSQ_OP_BETWEEN || t->op == CSQ_OP_IN) {
    if (rndn(2)) t->flags |= CSQ_TF_NOT;
  }
  if (t->op == CSQ_OP_LIKE || t->op == CSQ_OP_GLOB) {
    static const char *azPat[] = {
        "a%", "%a%", "_pple", "A%E", "b\\%n", "%\\_%", "a\\\\b", "", "%", "zeta%", "[a-c]*",
        "*[^a]", "?", "*e*", "1%", "%.5", "1_", "[]x]*", "x[[]*", "%0", "-%", "%e+%", "caf_", "_t_",
        "[a-", "*\xc3\xa9*",
        /* literal segments between wildcards (exec_value.c's seg_match) */
        "%a%e%", "a%a", "%pp%le", "apple", "%%", "a%%e", "*a*e", "A*E", "%An%an%", "e%e", "%E",
        "p%l%", "*pp*", "ap*le", "%\xc3\xa9%"};
    t->flags &= ~CSQ_TF_COLL_MASK;
    const char *z = azPat[rndn(sizeof(azPat) / sizeof(azPat[0]))];
    t->aK[0].cls = rndn(30) ? CSQ_TEXT : CSQ_NULL;
    t->aK[0].n = (int)strlen(z);
    memcpy(t->aK[0].z, z, t->aK[0].n);
    if (rndn(2)) t->flags |= CSQ_TF_NOT;
    if (t->op == CSQ_OP_LIKE) {
      if (rndn(2)) t->esc = '\\';
      if (rndn(3) == 0) t->flags |= CSQ_TF_LIKE_CASE;
    }
  }
}

static void term_sql(const term *t, char *z, size_t nz, int *piParam) {
  int p = *piParam;
  const char *zN = (t->flags & CSQ_TF_NOT) ? "NOT " : "";
  const char *zC = coll_sql(t->flags);
  switch (t->op) {
  case CSQ_OP_EQ:
    snprintf(z, nz, "x%s = ?%d", zC, p);
    break;
  case CSQ_OP_NE:
    snprintf(z, nz, "x%s != ?%d", zC, p);
    break;
  case CSQ_OP_LT:
    snprintf(z, nz, "x%s < ?%d", zC, p);
    break;
  case CSQ_OP_LE:
    snprintf(z, nz, "x%s <= ?%d", zC, p);
    break;
  case CSQ_OP_GT:
    snprintf(z, nz, "x%s > ?%d", zC, p);
    break;
  case CSQ_OP_GE:
    snprintf(z, nz, "x%s >= ?%d", zC, p);
    break;
  case CSQ_OP_IS:
    snprintf(z, nz, "x%s IS ?%d", zC, p);
    break;
  case CSQ_OP_ISNOT:
    snprintf(z, nz, "x%s IS NOT ?%d", zC, p);
    break;
  case CSQ_OP_ISNULL:
    snprintf(z, nz, "x IS NULL");
    break;
  case CSQ_OP_NOTNULL:
    snprintf(z, nz, "x IS NOT NULL");
    break;
  case CSQ_OP_BETWEEN:
    snprintf(z, nz, "x%s %sBETWEEN ?%d AND ?%d", zC, zN, p, p + 1);
    break;
  case CSQ_OP_IN: {
    int o = snprintf(z, nz, "x%s %sIN (", zC, zN);
    for (int k = 0; k < t->nK; k++) o += snprintf(z + o, nz - o, "%s?%d", k ? "," : "", p + k);
    snprintf(z + o, nz - o, ")");
    break;
  }
  case CSQ_OP_LIKE:
    if (t->esc)
      snprintf(z, nz, "x %sLIKE ?%d ESCAPE '\\'", zN, p);
    else
      snprintf(z, nz, "x %sLIKE ?%d", zN, p);
    break;
  case CSQ_OP_GLOB:
    snprintf(z, nz, "x %sGLOB ?%d", zN, p);
    break;
  }
  *piParam = p + t->nK;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static int aEncSeen[16];

/* Random queries of nClause clauses of up to nOr terms, checked. */
static void check_queries(rg_buf *g, int nQuery, size_t nOutSmall) {
  static int64_t aGot[NROW], aWant[NROW];
  for (int qi = 0; qi < nQuery; qi++) {
    int nClause = 1 + (int)rndn(2), nOr[3];
    term aT[3][3];
    char zSql[4096];
    int o = snprintf(zSql, sizeof(zSql), "SELECT rid FROM t WHERE ");
    int iParam = 1, bLikeCase = 0;
    csq_pb *b = csq_pb_new();
    int s0 = csq_pb_input(b, 0), s1 = csq_pb_input(b, 1);
    csq_pb_output(b, s0);
    csq_pb_output(b, s1);
    for (int c = 0; c < nClause; c++) {
      nOr[c] = rndn(3) ? 1 : 2;
      o += snprintf(zSql + o, sizeof(zSql) - o, "%s(", c ? " AND " : "");
      csq_pb_clause(b);
      for (int k = 0; k < nOr[c]; k++) {
        term *t = &aT[c][k];
        rand_term(t);
        if (t->flags & CSQ_TF_LIKE_CASE) bLikeCase = 1;
        char zT[512];
        term_sql(t, zT, sizeof(zT), &iParam);
        o += snprintf(zSql + o, sizeof(zSql) - o, "%s%s", k ? " OR " : "", zT);
        int k0 = 0;
        for (int j = 0; j < t->nK; j++) {
          int kk = test_val_const(b, &t->aK[j]);
          if (j == 0) k0 = kk;
        }
        int k1 = t->op == CSQ_OP_BETWEEN ? k0 + 1 : t->op == CSQ_OP_IN ? t->nK : 0;
        csq_pb_term(b, t->op, t->flags, s1, k0, k1, t->esc);
      }
      o += snprintf(zSql + o, sizeof(zSql) - o, ")");
    }
    /* a program with a case-sensitive LIKE and a case-insensitive one cannot
    ** be expressed with one pragma: make them all agree */
    if (bLikeCase) {
      csq_pb_free(b);
      qi--;
      continue;
    }
    /* every fourth query (not capped) keeps only a top-N of its rows */
    uint32_t nTop = 0;
    if (qi % 4 == 3) {
      static const uint32_t aTop[] = {1, 5, 37, 400, 5000};
      int bDesc = (int)rndn(2);
      nTop = aTop[rndn(5)];
      csq_pb_topn(b, nTop);
      csq_pb_topn_key(b, s1, bDesc);
      o += snprintf(zSql + o, sizeof(zSql) - o, " ORDER BY x%s, rid LIMIT %u", bDesc ? " DESC" : "",
                    nTop);
    }
    uint8_t *p;
    size_t n;
    CHECK(csq_pb_finish(b, &p, &n) == 0, "finish");
    csq_pb_free(b);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, zSql, -1, &st, 0) != SQLITE_OK) {
      printf("sqlite: %s: %s\n", zSql, sqlite3_errmsg(db));
      nFail++;
      free(p);
      continue;
    }
    int ip = 1;
    for (int c = 0; c < nClause; c++)
      for (int k = 0; k < nOr[c]; k++)
        for (int j = 0; j < aT[c][k].nK; j++) test_val_bind(st, ip++, &aT[c][k].aK[j]);
    int nWant = 0;
    while (sqlite3_step(st) == SQLITE_ROW) aWant[nWant++] = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    /* every fourth query under a row cap: the parts must add up to the same rows */
    int nGot = run_prog(g, p, n, aGot, qi % 4 == 1 ? 1 + (uint32_t)qi % 50 : 0);
    qsort(aWant, nWant, 8, cmp_i64);
    int ok = nGot == nWant && memcmp(aGot, aWant, 8ull * nWant) == 0;
    if (nTop && nOutSmall && nGot >= nWant) {
      /* a top-N cut into parts by a small output area may return more rows
      ** (each part's own top-N), never fewer: the host's top-N finishes */
      ok = 1;
      for (int k = 0, m = 0; k < nWant && ok; k++) {
        while (m < nGot && aGot[m] < aWant[k]) m++;
        ok = m < nGot && aGot[m] == aWant[k];
      }
    }
    CHECK(ok, "enc %d: %s: got %d rows, SQLite %d", g_enc, zSql, nGot, nWant);
    if (!ok && nFail < 10) {
      for (int k = 0; k < nWant && k < 400; k++) {
        int bIn = 0;
        for (int m = 0; m < nGot; m++) bIn |= aGot[m] == aWant[k];
        if (!bIn) {
          const test_val *x = &aData[aWant[k] - 1];
          printf("  missing row %lld cls %d i %lld r %.17g z '%.*s'\n", (long long)aWant[k], x->cls,
                 (long long)x->i, x->r, x->n, x->z);
          break;
        }
      }
      for (int m = 0; m < nGot && nGot >= 0; m++) {
        int bIn = 0;
        for (int k = 0; k < nWant; k++) bIn |= aGot[m] == aWant[k];
        if (!bIn) {
          const test_val *x = &aData[aGot[m] - 1];
          printf("  extra row %lld cls %d i %lld r %.17g z '%.*s'\n", (long long)aGot[m], x->cls,
                 (long long)x->i, x->r, x->n, x->z);
          break;
        }
      }
    }
    /* zone maps: if the row group would be skipped, nothing may qualify */
    {
      csq_prog pr;
      char zErr[100];
      if (csq_prog_parse(p, n, &pr, zErr, sizeof(zErr)) == 0) {
        store_rg rg;
        store_chunk ac[2];
        memset(&rg, 0, sizeof(rg));
        memset(ac, 0, sizeof(ac));
        rg.nRow = NROW;
        rg.nChunk = 2;
        rg.aChunk = ac;
        ac[0].zone = g_info[0].zone;
        ac[1].zone = g_info[1].zone;
        if (store_rg_zone_skip(&rg, &pr))
          CHECK(nWant == 0, "zone skip with %d rows: %s", nWant, zSql);
        csq_prog_clear(&pr);
      }
    }
    (void)nOutSmall;
    free(p);
  }
}

/* IN lists of integers (a join filter's keys): the set becomes a bitmap
** (dense values, of any count), a list compared whole (up to 16 sparse
** ones), a hash table (more sparse ones; its free-slot marker, one below
** the least value, is a value of the data) or a binary search (more, holding
** both int64 extremes). Each with reals that equal integers, NULL and NOT,
** checked against SQLite. */
static void check_in_lists(rg_buf *g, int nQuery) {
  static int64_t aGot[NROW], aWant[NROW];
  static test_val aK[400];
  for (int qi = 0; qi < nQuery; qi++) {
    int shape = qi % 3, nK = 0, bNot = (int)rndn(2);
    int nWant = (qi / 3) % 2 ? 2 + (int)rndn(15) : 17 + (int)rndn(shape == 0 ? 40 : 300);
    while (nK < nWant) {
      test_val *v = &aK[nK++];
      memset(v, 0, sizeof(*v));
      v->cls = CSQ_INT;
      v->i = (int64_t)rndn(40) - 14; /* the data's small integers, not -15 */
      if (shape == 1 && rndn(4) == 0) v->i = (int64_t)rndn(1u << 30) << 20;
      if (shape == 2 && nK < 3) v->i = nK == 1 ? INT64_MIN : INT64_MAX;
      if (rndn(10) == 0) {
        v->cls = CSQ_REAL;
        v->r = (double)v->i + (rndn(2) ? 0.0 : 0.5);
      }
      if (rndn(15) == 0) rand_const(v);
    }
    char zSql[8192];
    int o = snprintf(zSql, sizeof(zSql), "SELECT rid FROM t WHERE x %sIN (", bNot ? "NOT " : "");
    csq_pb *b = csq_pb_new();
    int s0 = csq_pb_input(b, 0), s1 = csq_pb_input(b, 1), k0 = 0;
    csq_pb_output(b, s0);
    csq_pb_output(b, s1);
    csq_pb_clause(b);
    for (int k = 0; k < nK; k++) {
      int kk = test_val_const(b, &aK[k]);
      if (k == 0) k0 = kk;
      o += snprintf(zSql + o, sizeof(zSql) - o, "%s?%d", k ? "," : "", k + 1);
    }
    snprintf(zSql + o, sizeof(zSql) - o, ")");
    csq_pb_term(b, CSQ_OP_IN, bNot ? CSQ_TF_NOT : 0, s1, k0, nK, 0);
    uint8_t *p;
    size_t n;
    CHECK(csq_pb_finish(b, &p, &n) == 0, "finish");
    csq_pb_free(b);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, zSql, -1, &st, 0) != SQLITE_OK) {
      printf("sqlite: %s\n", sqlite3_errmsg(db));
      nFail++;
      free(p);
      continue;
    }
    for (int k = 0; k < nK; k++) test_val_bind(st, k + 1, &aK[k]);
    int nW = 0;
    while (sqlite3_step(st) == SQLITE_ROW) aWant[nW++] = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    int nGot = run_prog(g, p, n, aGot, 0);
    qsort(aWant, nW, 8, cmp_i64);
    CHECK(nGot == nW && memcmp(aGot, aWant, 8ull * nW) == 0,
          "enc %d: IN list of %d (shape %d, not %d): got %d rows, SQLite %d", g_enc, nK, shape,
          bNot, nGot, nW);
    free(p);
  }
}

static void test_executor(void) {
  sqlite3_open(":memory:", &db);
  /* modes: data distribution -> encoding */
  for (int mode = 0; mode < 13; mode++) {
    memset(aDel, 0, sizeof(aDel));
    for (int r = 0; r < NROW; r++) {
      switch (mode) {
      case 0:
        rand_val(&aData[r], 0);
        break; /* ints, FOR */
      case 1:
        rand_val(&aData[r], 1);
        break; /* ints + nulls */
      case 2:  /* runs: RLE */
        if (r % 97 == 0 || r == 0)
          rand_val(&aData[r], 0);
        else
          aData[r] = aData[r - 1];
        break;
      case 3:
        rand_val(&aData[r], 2);
        break; /* reals */
      case 4:
        rand_val(&aData[r], 3);
        break; /* text, dict */
      case 5:  /* unique text: plain */
        aData[r].cls = CSQ_TEXT;
        aData[r].n = snprintf(aData[r].z, sizeof(aData[r].z), "%s%d", azWord[rndn(NWORD)],
                              (int)rndn(100000));
        break;
      case 6:
        rand_val(&aData[r], 4);
        break; /* blobs */
      case 7:
        rand_val(&aData[r], 5);
        break; /* mixed: tagged */
      case 8:  /* constant int */
        aData[r].cls = CSQ_INT;
        aData[r].i = 7;
        break;
      case 9:
        memset(&aData[r], 0, sizeof(test_val));
        aData[r].cls = CSQ_NULL;
        break; /* all NULL */
      case 10: /* constant text */
        memset(&aData[r], 0, sizeof(test_val));
        aData[r].cls = CSQ_TEXT;
        aData[r].n = 5;
        memcpy(aData[r].z, "Apple", 5);
        break;
      case 12: /* prices: REAL_DEC */
        memset(&aData[r], 0, sizeof(test_val));
        aData[r].cls = rndn(15) ? CSQ_REAL : CSQ_NULL;
        aData[r].r = rndn(4) ? (double)((int64_t)rndn(4000) - 2000) / 100 : arReal[rndn(2)];
        break;
      default:
        rand_val(&aData[r], 5);
        break; /* mixed, deletes */
      }
      if (mode == 11 || mode == 1 || mode == 4) aDel[r] = rndn(7) == 0;
    }
    load_sqlite();
    rg_buf g;
    rg_build(&g, 1 << 20);
    aEncSeen[g_enc] = 1;
    for (int cs = 0; cs < 2; cs++) {
      sqlite3_exec(db, cs ? "PRAGMA case_sensitive_like=ON" : "PRAGMA case_sensitive_like=OFF", 0,
                   0, 0);
      /* draw only LIKE-case-insensitive terms when cs==0; all are accepted when
      ** cs==1 only if flagged: simplest is to run a query batch per setting */
      (void)cs;
    }
    sqlite3_exec(db, "PRAGMA case_sensitive_like=OFF", 0, 0, 0);
    check_queries(&g, 400, 0);
    check_in_lists(&g, 30);
    rg_free(&g);
    /* a small output area: results come back in parts */
    rg_build(&g, 4096);
    check_queries(&g, 40, 4096);
    rg_free(&g);
  }
  int nEnc = 0;
  for (int e = 1; e <= 9; e++) nEnc += aEncSeen[e];
  CHECK(nEnc == 9, "only %d encodings met the executor", nEnc);
  printf("executor: encodings covered: %d of 9 (", nEnc);
  for (int e = 1; e <= 9; e++)
    if (aEncSeen[e]) printf(" %d", e);
  printf(" )\n");
  sqlite3_close(db);
}

/* A case-sensitive LIKE batch: the pragma set for all terms. */
static void test_like_case(void) {
  sqlite3_open(":memory:", &db);
  memset(aDel, 0, sizeof(aDel));
  for (int r = 0; r < NROW; r++) rand_val(&aData[r], 5);
  load_sqlite();
  sqlite3_exec(db, "PRAGMA case_sensitive_like=ON", 0, 0, 0);
  rg_buf g;
  rg_build(&g, 1 << 20);
  static int64_t aGot[NROW], aWant[NROW];
  const char *azPat[] = {"a%", "A%", "%E", "_PPLE", "%a%"};
  for (int i = 0; i < 5; i++) {
    csq_pb *b = csq_pb_new();
    int s0 = csq_pb_input(b, 0), s1 = csq_pb_input(b, 1);
    csq_pb_output(b, s0);
    csq_pb_output(b, s1);
    int k = csq_pb_const_bytes(b, CSQ_TEXT, azPat[i], (uint32_t)strlen(azPat[i]));
    csq_pb_term(b, CSQ_OP_LIKE, CSQ_TF_LIKE_CASE, s1, k, 0, 0);
    uint8_t *p;
    size_t n;
    csq_pb_finish(b, &p, &n);
    csq_pb_free(b);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, "SELECT rid FROM t WHERE x LIKE ?1 ORDER BY rid", -1, &st, 0);
    sqlite3_bind_text(st, 1, azPat[i], -1, SQLITE_STATIC);
    int nWant = 0;
    while (sqlite3_step(st) == SQLITE_ROW) aWant[nWant++] = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    int nGot = run_prog(&g, p, n, aGot, 0);
    CHECK(nGot == nWant && memcmp(aGot, aWant, 8ull * nWant) == 0, "case LIKE '%s': %d vs %d",
          azPat[i], nGot, nWant);
    free(p);
  }
  rg_free(&g);
  sqlite3_close(db);
}

/* Faults: a damaged chunk, a stale id, a bad job. */
static void test_faults(void) {
  memset(aDel, 0, sizeof(aDel));
  for (int r = 0; r < NROW; r++) rand_val(&aData[r], 0);
  rg_buf g;
  rg_build(&g, 1 << 20);
  csq_pb *b = csq_pb_new();
  csq_pb_output(b, csq_pb_input(b, 0));
  csq_pb_input(b, 1);
  uint8_t *p;
  size_t n;
  csq_pb_finish(b, &p, &n);
  csq_pb_free(b);
  void *pc;
  char zErr[100];
  CHECK(dev_ptype_csq.xVerify(p, n, &pc, zErr, sizeof(zErr)) == 0, "verify");
  dev_stats st;
  dev_exec_ctx ctx;
  ctx_init(&ctx, &st, g.slm, g.nSlm, g.aMr, p, n);
  uint64_t ret;
  CHECK(dev_ptype_csq.xRun(pc, &ctx, &ret) == 0 && csq_le32(g.slm + g.aMr[2].addr + 4) == NROW &&
            (uint32_t)ret == csq_res_check(g.slm + g.aMr[2].addr, (ret >> 32) & ~7ull),
        "plain run %llu", (unsigned long long)ret);
  /* a job descriptor damaged on its way faults, whichever byte it is */
  for (int b = 0; b < CSQ_JOB_HDR + 2 * CSQ_JOB_CHUNK_SZ; b += 5) {
    g.slm[b] ^= 0x10;
    uint64_t r2 = 0;
    CHECK(dev_ptype_csq.xRun(pc, &ctx, &r2) == CSQ_SC_PROGRAM_FAULT &&
              (r2 == CSQ_FAULT_BAD_JOB || r2 == CSQ_FAULT_STALE_PROGRAM),
          "damaged job byte %d: %llu", b, (unsigned long long)r2);
    g.slm[b] ^= 0x10;
  }
  CHECK(st.rows_scanned == NROW && st.rows_returned == NROW, "stats %llu %llu",
        (unsigned long long)st.rows_scanned, (unsigned long long)st.rows_returned);
  ctx.aParam[0]++;
  CHECK(dev_ptype_csq.xRun(pc, &ctx, &ret) == CSQ_SC_PROGRAM_FAULT &&
            ret == CSQ_FAULT_STALE_PROGRAM,
        "stale");
  ctx.aParam[0]--;
  g.slm[g.aMr[1].addr + 100] ^= 1;
  CHECK(dev_ptype_csq.xRun(pc, &ctx, &ret) == CSQ_SC_PROGRAM_FAULT && ret == CSQ_FAULT_CHECKSUM,
        "checksum %llu", (unsigned long long)ret);
  g.slm[g.aMr[1].addr + 100] ^= 1;
  g.slm[7] ^= 0xFF; /* nRow beyond the limit */
  CHECK(dev_ptype_csq.xRun(pc, &ctx, &ret) == CSQ_SC_PROGRAM_FAULT && ret == CSQ_FAULT_BAD_JOB,
        "bad job");
  g.slm[7] ^= 0xFF;
  g.slm[0] ^= 1; /* magic */
  CHECK(dev_ptype_csq.xRun(pc, &ctx, &ret) == CSQ_SC_PROGRAM_FAULT && ret == CSQ_FAULT_BAD_JOB,
        "bad magic");
  g.slm[0] ^= 1;
  ctx.nRange = 2;
  CHECK(dev_ptype_csq.xRun(pc, &ctx, &ret) == CSQ_SC_PROGRAM_FAULT && ret == CSQ_FAULT_BAD_RANGES,
        "ranges");
  ctx.nRange = 3;
  g.aMr[2].len = 16;
  CHECK(dev_ptype_csq.xRun(pc, &ctx, &ret) == CSQ_SC_PROGRAM_FAULT && ret == CSQ_FAULT_OUTPUT_FULL,
        "output full");
  dev_ptype_csq.xFree(pc);
  free(p);
  rg_free(&g);
}

/* Row numbers (CSQ_PF_ROWNUM): run one Execute over a row group laid out by
** hand with omit mask `omit` in its job; rows with rowid > 100 that are not
** deleted qualify. Checks the result against the data and returns its size
** in bytes (0 on a fault: *pReason gets it). */
static uint64_t run_rownums(const uint8_t *p, size_t n, rg_buf *g, uint64_t omit, int bDamage,
                            uint64_t *pReason) {
  size_t nJobHead = CSQ_JOB_HDR + 2 * CSQ_JOB_CHUNK_SZ + 8, nDel = (NROW + 7) / 8;
  size_t nJob = (nJobHead + nDel + 7) & ~(size_t)7;
  size_t off1 = (g->anChunk[0] + 7) & ~(size_t)7;
  size_t nIn = (off1 + g->anChunk[1] + 7) & ~(size_t)7, nOut = 1 << 20;
  uint8_t *slm = calloc(1, nJob + nIn + nOut), *j = slm;
  uint32_t h[4] = {CSQ_JOB_MAGIC, NROW, 2, (uint32_t)nDel};
  memcpy(j, h, 16);
  uint64_t e[6] = {0,    g->anChunk[0], XXH3_64bits(g->aChunk[0], g->anChunk[0]),
                   off1, g->anChunk[1], XXH3_64bits(g->aChunk[1], g->anChunk[1])};
  memcpy(j + CSQ_JOB_HDR, e, sizeof(e));
  memcpy(j + nJobHead - 8, &omit, 8);
  for (int r = 0; r < NROW; r++)
    if (aDel[r]) j[nJobHead + r / 8] |= (uint8_t)(1u << (r % 8));
  uint64_t hJob = csq_job_hash(j, nJobHead + nDel);
  memcpy(j + 16, &hJob, 8);
  if (bDamage) j[nJobHead - 8] ^= 0x04; /* the omit mask changed after hashing */
  memcpy(slm + nJob, g->aChunk[0], g->anChunk[0]);
  memcpy(slm + nJob + off1, g->aChunk[1], g->anChunk[1]);
  csq_mrange aMr[3] = {{CSQ_NSID_SLM, 0, nJob, 0, 0},
                       {CSQ_NSID_SLM, 0, nIn, nJob, 0},
                       {CSQ_NSID_SLM, 0, nOut, nJob + nIn, 0}};
  void *pc = NULL;
  char zErr[200];
  uint64_t ret = 0, nBytes = 0;
  CHECK(dev_ptype_csq.xVerify(p, n, &pc, zErr, sizeof(zErr)) == 0, "verify: %s", zErr);
  dev_stats st;
  dev_exec_ctx ctx;
  ctx_init(&ctx, &st, slm, nJob + nIn + nOut, aMr, p, n);
  *pReason = 0;
  if (pc && dev_ptype_csq.xRun(pc, &ctx, &ret) != 0) {
    *pReason = ret;
  } else if (pc) {
    const uint8_t *o = slm + nJob + nIn;
    uint32_t hr[4];
    memcpy(hr, o, 16);
    memcpy(&nBytes, o + 16, 8);
    uint32_t nWant = 0;
    for (int r = 100; r < NROW; r++) nWant += !aDel[r];
    CHECK(hr[1] == nWant && hr[2] == NROW && hr[3] == 2, "rows %u of %u", hr[1], nWant);
    /* the sections of the columns present, then the row numbers */
    const uint8_t *q = o + CSQ_RES_HDR + 2 * CSQ_RES_COL_SZ;
    const uint8_t *aRid = NULL;
    for (int c = 0; c < 2; c++) {
      const uint8_t *d = o + CSQ_RES_HDR + (size_t)CSQ_RES_COL_SZ * c;
      uint64_t nHeap;
      memcpy(&nHeap, d + 8, 8);
      if ((omit >> c) & 1) {
        CHECK(d[3] == 1 && d[0] == 0 && d[1] == 0 && d[2] == 0 && nHeap == 0,
              "column %d should be absent", c);
        continue;
      }
      CHECK(d[3] == 0, "column %d should be present", c);
      if (d[1]) q += (hr[1] + 7) & ~7u;
      if (c == 0) aRid = q;
      q += 8ull * hr[1];
      if (d[2]) q += (4ull * hr[1] + 7) & ~7ull;
      q += (nHeap + 7) & ~7ull;
    }
    const uint8_t *aNum = q;
    CHECK((uint64_t)(aNum - o) + ((4ull * hr[1] + 7) & ~7ull) == nBytes, "result size %llu",
          (unsigned long long)nBytes);
    uint32_t k = 0;
    for (uint32_t r = 100; r < NROW && k < hr[1]; r++) {
      if (aDel[r]) continue;
      uint32_t num;
      memcpy(&num, aNum + 4ull * k, 4);
      CHECK(num == r, "row number %u: %u, want %u", k, num, r);
      if (aRid) {
        int64_t rid;
        memcpy(&rid, aRid + 8ull * k, 8);
        CHECK(rid == (int64_t)num + 1, "rowid of row number %u: %lld", num, (long long)rid);
      }
      k++;
    }
  }
  if (pc) dev_ptype_csq.xFree(pc);
  free(slm);
  return nBytes;
}

static void test_rownums(void) {
  memset(aDel, 0, sizeof(aDel));
  for (int r = 0; r < NROW; r++) {
    rand_val(&aData[r], 5);
    aDel[r] = r % 11 == 4;
  }
  rg_buf g;
  rg_build(&g, 64);
  csq_pb *b = csq_pb_new();
  int s0 = csq_pb_input(b, 0), s1 = csq_pb_input(b, 1);
  csq_pb_output(b, s0);
  csq_pb_output(b, s1);
  csq_pb_term(b, CSQ_OP_GT, 0, s0, csq_pb_const_int(b, 100), 0, 0);
  csq_pb_rownums(b);
  uint8_t *p = NULL;
  size_t n = 0;
  CHECK(csq_pb_finish(b, &p, &n) == 0, "encode with row numbers");
  csq_pb_free(b);
  csq_prog pr;
  char zErr[200];
  CHECK(csq_prog_parse(p, n, &pr, zErr, sizeof(zErr)) == 0 && pr.bRowNum && p[4] == 2 &&
            p[6] == CSQ_PF_ROWNUM,
        "parse: %s", zErr);
  csq_prog_clear(&pr);
  uint64_t why;
  uint64_t nAll = run_rownums(p, n, &g, 0, 0, &why);
  uint64_t nNoText = run_rownums(p, n, &g, 2, 0, &why);
  uint64_t nNone = run_rownums(p, n, &g, 3, 0, &why);
  CHECK(nAll > nNoText && nNoText > nNone && nNone > 0, "sizes %llu %llu %llu",
        (unsigned long long)nAll, (unsigned long long)nNoText, (unsigned long long)nNone);
  CHECK(run_rownums(p, n, &g, 2, 1, &why) == 0 && why == CSQ_FAULT_BAD_JOB,
        "a damaged omit mask faults: %llu", (unsigned long long)why);
  /* row numbers are for programs without aggregation */
  p[6] |= CSQ_PF_AGG;
  CHECK(csq_prog_parse(p, n, &pr, zErr, sizeof(zErr)) != 0, "AGG with ROWNUM accepted");
  free(p);
  b = csq_pb_new();
  csq_pb_agg(b, CSQ_AGG_COUNT_STAR, 0, -1);
  csq_pb_rownums(b);
  CHECK(csq_pb_finish(b, &p, &n) != 0, "an aggregation program with row numbers was encoded");
  csq_pb_free(b);
  rg_free(&g);
}

/* The top-N section: each field the verifier must refuse. */
static void test_topn_format(void) {
  csq_pb *b = csq_pb_new();
  int s0 = csq_pb_input(b, 0), s1 = csq_pb_input(b, 1);
  csq_pb_output(b, s0);
  csq_pb_topn(b, 10);
  csq_pb_topn_key(b, s1, 1);
  csq_pb_topn_key(b, s0, 0);
  uint8_t *p = NULL;
  size_t n = 0;
  CHECK(csq_pb_finish(b, &p, &n) == 0, "encode a top-N");
  csq_pb_free(b);
  csq_prog pr;
  char zErr[200];
  CHECK(csq_prog_parse(p, n, &pr, zErr, sizeof(zErr)) == 0 && pr.nTop == 10 && pr.nTopKey == 2 &&
            pr.aTopSlot[0] == s1 && pr.aTopDesc[0] == 1 && pr.aTopDesc[1] == 0,
        "parse a top-N: %s", zErr);
  csq_prog_clear(&pr);
  size_t off = n - 16; /* the section: 8-byte header, two 4-byte keys */
  struct {
    size_t at;
    uint8_t x;
    const char *zWhat;
  } aBad[] = {{off, 0, "nTop 0"},
              {off + 2, 2, "nTop > CSQ_TOPN_MAX"},
              {off + 4, 0, "no key"},
              {off + 4, 17, "17 keys"},
              {off + 6, 1, "reserved"},
              {off + 8, 9, "slot out of range"},
              {off + 10, 3, "key flags"},
              {off + 11, 1, "key reserved"},
              {6, CSQ_PF_TOPN | CSQ_PF_AGG, "with AGG"},
              {6, CSQ_PF_TOPN | CSQ_PF_ROWNUM, "with ROWNUM"}};
  for (size_t i = 0; i < sizeof(aBad) / sizeof(aBad[0]); i++) {
    uint8_t *q = malloc(n);
    memcpy(q, p, n);
    q[aBad[i].at] = aBad[i].x;
    CHECK(csq_prog_parse(q, n, &pr, zErr, sizeof(zErr)) != 0, "top-N %s accepted", aBad[i].zWhat);
    free(q);
  }
  CHECK(csq_prog_parse(p, n - 8, &pr, zErr, sizeof(zErr)) != 0, "truncated top-N accepted");
  free(p);
  b = csq_pb_new();
  csq_pb_topn(b, 10);
  CHECK(csq_pb_finish(b, &p, &n) != 0, "a top-N without keys was encoded");
  csq_pb_free(b);
  /* a row cap with a top-N is a malformed Execute */
  memset(aDel, 0, sizeof(aDel));
  for (int r = 0; r < NROW; r++) rand_val(&aData[r], 0);
  rg_buf g;
  rg_build(&g, 1 << 20);
  b = csq_pb_new();
  s0 = csq_pb_input(b, 0);
  s1 = csq_pb_input(b, 1);
  csq_pb_output(b, s0);
  csq_pb_topn(b, 3);
  csq_pb_topn_key(b, s1, 0);
  csq_pb_finish(b, &p, &n);
  csq_pb_free(b);
  void *pc = NULL;
  CHECK(dev_ptype_csq.xVerify(p, n, &pc, zErr, sizeof(zErr)) == 0, "verify top-N: %s", zErr);
  dev_stats st;
  dev_exec_ctx ctx;
  ctx_init(&ctx, &st, g.slm, g.nSlm, g.aMr, p, n);
  ctx.aParam[1] = (uint64_t)5 << 32;
  uint64_t ret = 0;
  CHECK(pc && dev_ptype_csq.xRun(pc, &ctx, &ret) == CSQ_SC_PROGRAM_FAULT &&
            ret == CSQ_FAULT_BAD_JOB,
        "row cap with a top-N: %llu", (unsigned long long)ret);
  ctx.aParam[1] = 0;
  CHECK(pc && dev_ptype_csq.xRun(pc, &ctx, &ret) == 0 && csq_le32(g.slm + g.aMr[2].addr + 4) == 3,
        "top-N of 3 rows");
  if (pc) dev_ptype_csq.xFree(pc);
  free(p);
  rg_free(&g);
}

/* ---- column comparisons (CSQ_OP_COLCMP) ----
** A row group of three chunks (rowid, x, y), x and y each drawn in one of
** the executor's data modes, so that every pair of encodings meets: every
** comparison and collation of x with y (and y with x, and x with itself),
** alone, ORed, under AND, and as the condition of CASE in an aggregation,
** against SQLite over a table whose columns have no affinity. */

static test_val aDataY[NROW];

/* Column values in data mode m (the modes of test_executor). */
static void fill_mode(test_val *a, int m) {
  for (int r = 0; r < NROW; r++) {
    test_val *v = &a[r];
    switch (m) {
    case 0:
    case 1:
    case 3:
    case 6:
      rand_val(v, m == 0 ? 0 : m == 1 ? 1 : m == 3 ? 2 : 4);
      break;
    case 2: /* runs: RLE */
      if (r % 97 == 0)
        rand_val(v, 0);
      else
        *v = a[r - 1];
      break;
    case 4: /* text, dictionary; some NULLs */
      rand_val(v, 3);
      break;
    case 5: /* unique text: plain */
      memset(v, 0, sizeof(*v));
      v->cls = CSQ_TEXT;
      v->n = snprintf(v->z, sizeof(v->z), "%s%d", azWord[rndn(NWORD)], (int)rndn(3));
      break;
    case 8: /* constant int */
      memset(v, 0, sizeof(*v));
      v->cls = CSQ_INT;
      v->i = 3;
      break;
    case 9: /* all NULL */
      memset(v, 0, sizeof(*v));
      v->cls = CSQ_NULL;
      break;
    case 10: /* constant text */
      memset(v, 0, sizeof(*v));
      v->cls = CSQ_TEXT;
      v->n = 5;
      memcpy(v->z, "Apple", 5);
      break;
    case 11: /* prices: REAL_DEC */
      memset(v, 0, sizeof(*v));
      v->cls = rndn(15) ? CSQ_REAL : CSQ_NULL;
      v->r = (double)((int64_t)rndn(40) - 15) / (rndn(2) ? 1 : 4);
      break;
    default: /* mixed: tagged */
      rand_val(v, 5);
      break;
    }
  }
}
#define NMODE 13

typedef struct rg3 {
  uint8_t *slm;
  size_t nSlm;
  csq_mrange aMr[3];
  csq_chunk_info aInfo[3];
} rg3;

/* Lay out the row group (rowid, aData, aDataY) with deletes aDel in a fake
** SLM with an output area of nOut bytes. */
static void rg3_build(rg3 *g, size_t nOut) {
  uint8_t *aC[3];
  size_t anC[3], aOff[3], nIn = 0;
  for (int c = 0; c < 3; c++) {
    csq_vec v;
    csq_vec_init(&v);
    for (int r = 0; r < NROW; r++) {
      if (c == 0)
        csq_vec_push_int(&v, r + 1);
      else
        test_val_push(&v, c == 1 ? &aData[r] : &aDataY[r]);
    }
    csq_chunk_encode(&v, 0, NROW, &aC[c], &anC[c], &g->aInfo[c]);
    csq_vec_free(&v);
    aOff[c] = nIn;
    nIn = (nIn + anC[c] + 7) & ~(size_t)7;
  }
  size_t nDesc = CSQ_JOB_HDR + 3 * CSQ_JOB_CHUNK_SZ, nJob = (nDesc + (NROW + 7) / 8 + 7) & ~7u;
  g->nSlm = nJob + nIn + nOut;
  g->slm = calloc(1, g->nSlm);
  uint8_t *j = g->slm;
  csq_put_le32(j, CSQ_JOB_MAGIC);
  csq_put_le32(j + 4, NROW);
  csq_put_le32(j + 8, 3);
  csq_put_le32(j + 12, (NROW + 7) / 8);
  for (int c = 0; c < 3; c++) {
    uint8_t *e = j + CSQ_JOB_HDR + CSQ_JOB_CHUNK_SZ * c;
    csq_put_le64(e, aOff[c]);
    csq_put_le64(e + 8, anC[c]);
    csq_put_le64(e + 16, XXH3_64bits(aC[c], anC[c]));
    memcpy(g->slm + nJob + aOff[c], aC[c], anC[c]);
    free(aC[c]);
  }
  for (int r = 0; r < NROW; r++)
    if (aDel[r]) j[nDesc + r / 8] |= (uint8_t)(1u << (r % 8));
  csq_put_le64(j + 16, csq_job_hash(j, nDesc + (NROW + 7) / 8));
  g->aMr[0] = (csq_mrange){CSQ_NSID_SLM, 0, nJob, 0, 0};
  g->aMr[1] = (csq_mrange){CSQ_NSID_SLM, 0, nIn, nJob, 0};
  g->aMr[2] = (csq_mrange){CSQ_NSID_SLM, 0, nOut, nJob + nIn, 0};
}

/* Run filter program p (its one output the rowid) over g, continuing
** partial results: the rowids into aOut, their count, or -1 on a fault. If
** pnAgg: p aggregates instead, and *pnAgg gets the INTEGER of its one
** result row's first column (-1 when it returns no row). */
static int rg3_run(rg3 *g, const uint8_t *p, size_t n, int64_t *aOut, int64_t *pnAgg) {
  void *pc = NULL;
  char zErr[200];
  if (dev_ptype_csq.xVerify(p, n, &pc, zErr, sizeof(zErr))) {
    printf("verify failed: %s\n", zErr);
    return -1;
  }
  dev_stats st;
  dev_exec_ctx ctx;
  ctx_init(&ctx, &st, g->slm, g->nSlm, g->aMr, p, n);
  int nRes = 0;
  uint32_t start = 0;
  const uint8_t *o = g->slm + g->aMr[2].addr;
  for (int guard = 0; guard < 100000; guard++) {
    uint64_t ret = 0;
    ctx.aParam[1] = start;
    if (dev_ptype_csq.xRun(pc, &ctx, &ret)) {
      printf("xRun fault %llu (%s)\n", (unsigned long long)ret, csq_fault_name(ret));
      nRes = -1;
      break;
    }
    uint32_t nRows = csq_le32(o + 4), nCol = csq_le32(o + 12), nextRow = csq_le32(o + 8);
    const uint8_t *d0 = o + CSQ_RES_HDR;
    const uint8_t *pv = d0 + (size_t)CSQ_RES_COL_SZ * nCol + (d0[1] ? (nRows + 7) & ~7u : 0);
    if (pnAgg) {
      CHECK(nextRow == NROW, "aggregation cut at %u", nextRow);
      *pnAgg = nRows ? (int64_t)csq_le64(pv) : -1;
      break;
    }
    for (uint32_t k = 0; k < nRows; k++) aOut[nRes + k] = (int64_t)csq_le64(pv + 8 * k);
    nRes += (int)nRows;
    if (nextRow >= NROW) break;
    CHECK(nextRow > start, "no progress");
    start = nextRow;
  }
  dev_ptype_csq.xFree(pc);
  return nRes;
}

static const char *const azCmpSql[] = {"", "=", "!=", "<", "<=", ">", ">=", "IS", "IS NOT"};

/* The rowids SQLite returns for zSql (ascending) into a; their count. */
static int sql_rowids(const char *zSql, int64_t *a) {
  sqlite3_stmt *st;
  int n = 0;
  if (sqlite3_prepare_v2(db, zSql, -1, &st, 0) != SQLITE_OK) {
    printf("sqlite: %s: %s\n", zSql, sqlite3_errmsg(db));
    return -1;
  }
  while (sqlite3_step(st) == SQLITE_ROW) a[n++] = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  qsort(a, n, 8, cmp_i64);
  return n;
}

/* One filter: x (or y) cmp y (or x, or x itself) under collation fColl;
** shape 0 alone, 1 ORed with "x IS NULL", 2 ANDed with "y IS NOT NULL". */
static void colcmp_filter(rg3 *g, int cmp, int fColl, int eSide, int shape) {
  static int64_t aGot[NROW], aWant[NROW];
  static const char *azL[] = {"x", "y", "x"}, *azR[] = {"y", "x", "x"};
  char zSql[300];
  const char *zShape = shape == 1 ? " OR x IS NULL" : shape == 2 ? " AND y IS NOT NULL" : "";
  snprintf(zSql, sizeof(zSql), "SELECT rid FROM t3 WHERE (%s%s %s %s)%s", azL[eSide],
           coll_sql(fColl), azCmpSql[cmp], azR[eSide], zShape);
  csq_pb *b = csq_pb_new();
  int s0 = csq_pb_input(b, 0), sx = csq_pb_input(b, 1), sy = csq_pb_input(b, 2);
  csq_pb_output(b, s0);
  csq_pb_clause(b);
  int sL = eSide == 1 ? sy : sx, sR = eSide == 0 ? sy : sx;
  CHECK_RC(csq_pb_colcmp(b, cmp, fColl, sL, sR), 0);
  if (shape == 1) csq_pb_term(b, CSQ_OP_ISNULL, 0, sx, 0, 0, 0);
  if (shape == 2) {
    csq_pb_clause(b);
    csq_pb_term(b, CSQ_OP_NOTNULL, 0, sy, 0, 0, 0);
  }
  uint8_t *p;
  size_t n;
  CHECK(csq_pb_finish(b, &p, &n) == 0, "finish");
  csq_pb_free(b);
  CHECK(csq_le16(p + 4) == 1, "a filter with a column comparison stays version 1");
  int nWant = sql_rowids(zSql, aWant);
  int nGot = rg3_run(g, p, n, aGot, NULL);
  int ok = nGot == nWant && memcmp(aGot, aWant, 8ull * (nWant > 0 ? nWant : 0)) == 0;
  CHECK(ok, "enc %d/%d: %s: got %d rows, SQLite %d", g->aInfo[1].enc, g->aInfo[2].enc, zSql, nGot,
        nWant);
  if (!ok && nFail < 20)
    for (int k = 0, m = 0; k < nWant; k++) {
      while (m < nGot && aGot[m] < aWant[k]) m++;
      if (m >= nGot || aGot[m] != aWant[k]) {
        const test_val *x = &aData[aWant[k] - 1], *y = &aDataY[aWant[k] - 1];
        printf("  missing row %lld: x cls %d i %lld r %.17g z '%.*s'; y cls %d i %lld r %.17g "
               "z '%.*s'\n",
               (long long)aWant[k], x->cls, (long long)x->i, x->r, x->n, x->z, y->cls,
               (long long)y->i, y->r, y->n, y->z);
        break;
      }
    }
  /* zone maps never skip for a column comparison */
  csq_prog pr;
  char zErr[100];
  if (csq_prog_parse(p, n, &pr, zErr, sizeof(zErr)) == 0) {
    store_rg rg;
    store_chunk ac[3];
    memset(&rg, 0, sizeof(rg));
    memset(ac, 0, sizeof(ac));
    rg.nRow = NROW;
    rg.nChunk = 3;
    rg.aChunk = ac;
    for (int c = 0; c < 3; c++) ac[c].zone = g->aInfo[c].zone;
    if (store_rg_zone_skip(&rg, &pr)) CHECK(nWant == 0, "zone skip with %d rows: %s", nWant, zSql);
    csq_prog_clear(&pr);
  } else {
    CHECK(0, "parse: %s", zErr);
  }
  free(p);
}

/* count(CASE WHEN x cmp y THEN 1 END) as an aggregation program. */
static void colcmp_case(rg3 *g, int cmp, int fColl) {
  char zSql[300];
  snprintf(zSql, sizeof(zSql), "SELECT count(CASE WHEN x%s %s y THEN 1 END) FROM t3",
           coll_sql(fColl), azCmpSql[cmp]);
  csq_pb *b = csq_pb_new();
  csq_pb_input(b, 0); /* the job names all three chunks */
  int sx = csq_pb_input(b, 1), sy = csq_pb_input(b, 2);
  int k1 = csq_pb_const_int(b, 1), kN = csq_pb_const_null(b);
  int c = csq_pb_cond(b, CSQ_OP_COLCMP, fColl, sx, sy, cmp, 0);
  int e = csq_pb_expr_case(b, c, csq_pb_expr_const(b, k1), csq_pb_expr_const(b, kN));
  csq_pb_agg(b, CSQ_AGG_COUNT, 0, e);
  uint8_t *p;
  size_t n;
  CHECK(csq_pb_finish(b, &p, &n) == 0, "finish");
  csq_pb_free(b);
  sqlite3_stmt *st;
  int64_t nWant = -2, nGot = -3;
  if (sqlite3_prepare_v2(db, zSql, -1, &st, 0) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    nWant = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  CHECK(rg3_run(g, p, n, NULL, &nGot) >= 0, "run: %s", zSql);
  CHECK(nGot == nWant, "enc %d/%d: %s: got %lld, SQLite %lld", g->aInfo[1].enc, g->aInfo[2].enc,
        zSql, (long long)nGot, (long long)nWant);
  free(p);
}

/* The verifier and the encoder on malformed column comparisons. */
static void colcmp_refusals(void) {
  /* a program without the new term keeps the bytes (and so the id) it had
  ** before column comparisons existed */
  size_t nS;
  uint8_t *pS = sample_program(&nS);
  CHECK(nS == 232 && csq_prog_id(pS, nS) == 0xf4eec2ab4d25d11bull, "sample program changed: %zu",
        nS);
  free(pS);
  csq_pb *b = csq_pb_new();
  int s0 = csq_pb_input(b, 0), s1 = csq_pb_input(b, 1);
  csq_pb_output(b, s0);
  CHECK_RC(csq_pb_colcmp(b, CSQ_OP_LT, CSQ_TF_NOCASE | CSQ_TF_AFF_TEXT, s1, s0), 0);
  uint8_t *p;
  size_t n;
  CHECK_RC(csq_pb_finish(b, &p, &n), 0);
  csq_pb_free(b);
  /* the term's bytes, as program.h lays them out */
  size_t iT = CSQ_PROG_HDR + 4 * (2 + 1 + 1);
  CHECK(p[iT] == CSQ_OP_COLCMP && p[iT + 1] == (CSQ_TF_NOCASE | CSQ_TF_AFF_TEXT) &&
            csq_le16(p + iT + 2) == s1 && csq_le16(p + iT + 4) == s0 &&
            csq_le16(p + iT + 6) == CSQ_OP_LT && csq_le32(p + iT + 8) == 0 &&
            csq_le32(p + iT + 12) == 0,
        "term bytes");
  try_program(p, n, 1);
  static const struct {
    int off, val; /* byte of the term (8: u32 field) and its new value */
    const char *zWhy;
  } aBad[] = {
      {4, 2, "second input slot 2 out of range"},
      {4, 0x7FFF, "second input slot 32767 out of range"},
      {6, 0, "comparison 0 is not one of"},
      {6, CSQ_OP_ISNULL, "comparison 9 is not one of"},
      {6, CSQ_OP_COLCMP, "comparison 17 is not one of"},
      {1, CSQ_TF_NOT, "NOT flag not allowed"},
      {1, CSQ_TF_LIKE_CASE, "case flag only applies to LIKE"},
      {1, CSQ_TF_BLOB_TEXT, "blob-as-text flag"},
      {1, CSQ_TF_COLL_MASK, "bad collation"},
      {8, '\\', "ESCAPE only applies to LIKE"},
      {12, 1, "reserved field not zero"},
      {2, 5, "input slot 5 out of range"},
  };
  for (size_t i = 0; i < sizeof(aBad) / sizeof(aBad[0]); i++) {
    uint8_t *q = malloc(n);
    memcpy(q, p, n);
    if (aBad[i].off == 1)
      q[iT + 1] = (uint8_t)aBad[i].val;
    else if (aBad[i].off >= 8)
      csq_put_le32(q + iT + aBad[i].off, (uint32_t)aBad[i].val);
    else
      csq_put_le16(q + iT + aBad[i].off, (uint16_t)aBad[i].val);
    char zErr[200] = "";
    csq_prog pr;
    int rc = csq_prog_parse(q, n, &pr, zErr, sizeof(zErr));
    CHECK(rc == -EINVAL && strstr(zErr, aBad[i].zWhy), "case %zu: rc %d, '%s'", i, rc, zErr);
    if (rc == 0) csq_prog_clear(&pr);
    try_program(q, n, 0);
    free(q);
  }
  free(p);
  /* the encoder refuses what the verifier would */
  b = csq_pb_new();
  s0 = csq_pb_input(b, 0);
  CHECK_RC(csq_pb_colcmp(b, CSQ_OP_LT, 0, s0, 1), -EINVAL); /* slot 1 not an input */
  csq_pb_free(b);
  b = csq_pb_new();
  s0 = csq_pb_input(b, 0);
  CHECK_RC(csq_pb_colcmp(b, CSQ_OP_LIKE, 0, s0, s0), -EINVAL);
  csq_pb_free(b);
  b = csq_pb_new();
  s0 = csq_pb_input(b, 0);
  CHECK_RC(csq_pb_colcmp(b, CSQ_OP_EQ, CSQ_TF_NOT, s0, s0), -EINVAL);
  csq_pb_free(b);
}

static void test_colcmp(void) {
  colcmp_refusals();
  sqlite3_open(":memory:", &db);
  int nRun = 0;
  for (int mx = 0; mx < NMODE; mx++)
    for (int my = 0; my < NMODE; my++) {
      /* every pair of modes once; a third of them with deleted rows */
      fill_mode(aData, mx);
      fill_mode(aDataY, my);
      for (int r = 0; r < NROW; r++) aDel[r] = (mx + my) % 3 == 0 && rndn(7) == 0;
      /* equal values in both columns on some rows, so EQ and IS hit */
      for (int r = 0; r < NROW; r += 1 + (int)rndn(5))
        if (mx == my) aDataY[r] = aData[r];
      sqlite3_exec(db, "DROP TABLE IF EXISTS t3; CREATE TABLE t3(rid INTEGER PRIMARY KEY, x, y)", 0,
                   0, 0);
      sqlite3_stmt *st;
      sqlite3_exec(db, "BEGIN", 0, 0, 0);
      sqlite3_prepare_v2(db, "INSERT INTO t3 VALUES(?1, ?2, ?3)", -1, &st, 0);
      for (int r = 0; r < NROW; r++) {
        if (aDel[r]) continue;
        sqlite3_bind_int(st, 1, r + 1);
        test_val_bind(st, 2, &aData[r]);
        test_val_bind(st, 3, &aDataY[r]);
        sqlite3_step(st);
        sqlite3_reset(st);
      }
      sqlite3_finalize(st);
      sqlite3_exec(db, "COMMIT", 0, 0, 0);
      rg3 g;
      rg3_build(&g, 1 << 20);
      for (int cmp = CSQ_OP_EQ; cmp <= CSQ_OP_ISNOT; cmp++) {
        int fColl = (int)rndn(3) * 2; /* BINARY, NOCASE, RTRIM */
        colcmp_filter(&g, cmp, fColl, (int)rndn(3), (int)rndn(3));
        colcmp_filter(&g, cmp, CSQ_TF_BINARY, 0, 0);
        colcmp_case(&g, cmp, fColl);
        nRun += 3;
      }
      free(g.slm);
      /* a small output area: the filter's rows come back in parts */
      rg3_build(&g, 4096);
      colcmp_filter(&g, CSQ_OP_LE, CSQ_TF_BINARY, 0, 0);
      free(g.slm);
    }
  sqlite3_close(db);
  printf("column comparisons: %d programs over %d pairs of encodings\n", nRun, NMODE * NMODE);
}

int main(void) {
  rng = 0x243F6A8885A308D3ull; /* the data this test was written with */
  test_verifier();
  test_executor();
  test_like_case();
  test_faults();
  test_rownums();
  test_topn_format();
  test_colcmp();
  printf("%d checks, %d failed\n", nCheck, nFail);
  return nFail ? 1 : 0;
}
