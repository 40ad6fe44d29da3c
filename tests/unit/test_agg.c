/*
** tests/unit/test_agg.c - grouped programs (program.h, AGGREGATION): the
** device executor (dev_ptype_csq.xRun on a fake SLM, row groups split into
** several Executes when the output area is small) and the host merge
** (dev_agg_add / dev_agg_finish) against SQLite itself as the oracle:
** thousands of random GROUP BY programs with expressions (+ - * / unary
** minus, CASE) over random mixed data with NULLs, in every chunk encoding and
** several row groups; SUM integer overflow; empty input; more than 64K
** groups; the verifier on grouped programs (truncations, bit flips); the
** NOT_NUMERIC fault; and the grouped scan end to end on an in-memory device
** (dev_agg_open). With CSQ_AGG_BENCH=1 it times a TPC-H Q1-shaped
** aggregation over 6M rows with 2 engines (information only).
** Exit 0 = pass; one line per failed check.
*/
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "device/host/agg.h"
#include "device/format/chunk.h"
#include "device/format/codemap.h"
#include "device/driver/driver.h"
#include "device/format/program.h"
#include "device/engine/ptype.h"
#include "device/host/scan.h"
#include "device/store/store.h"
#include "tests/unit/helpers.h"

/* expression texts are short (depth <= 2); a truncated one would only fail a check */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define NCOL   4
#define MAXROW 200000

static test_val (*aData)[NCOL]; /* [row][col] */
static int *aDel;
static int nRow;
static sqlite3 *db;

static const char *azWord[] = {"apple", "Apple", "b",         "banana", "",
                               "zeta ", "zeta",  "x\xc3\xa9", "10",     "1.5"};
#define NWORD ((int)(sizeof(azWord) / sizeof(azWord[0])))
static const double arReal[] = {1.5, -2.25, 10.0, 1e15, 0.1, 3.0, -0.5, 2.0, 123456.125, 7.0};
#define NREAL ((int)(sizeof(arReal) / sizeof(arReal[0])))

/* Column modes: how a column's values are drawn (and so its encoding). */
enum {
  M_INT,
  M_INTNULL,
  M_RUNS,
  M_REAL,
  M_NUM,
  M_TEXT,
  M_UTEXT,
  M_BLOB,
  M_MIXED,
  M_CONST,
  M_NULL,
  M_BIG,
  M_WIDE,
  M_NMODE
};
static int aMode[NCOL];

static int mode_numeric(int m) {
  return m == M_INT || m == M_INTNULL || m == M_RUNS || m == M_REAL || m == M_NUM || m == M_CONST ||
         m == M_NULL || m == M_BIG || m == M_WIDE;
}

static void draw(test_val *v, int mode, int r, const test_val *prev) {
  memset(v, 0, sizeof(*v));
  switch (mode) {
  case M_INT:
    v->cls = CSQ_INT;
    v->i = (int64_t)rndn(13) - 4;
    break;
  case M_INTNULL:
    v->cls = rndn(6) ? CSQ_INT : CSQ_NULL;
    v->i = (int64_t)rndn(9) - 3;
    break;
  case M_RUNS:
    if (r % 61 == 0 || !prev) {
      v->cls = CSQ_INT;
      v->i = (int64_t)rndn(5);
    } else
      *v = *prev;
    break;
  case M_REAL:
    v->cls = CSQ_REAL;
    v->r = arReal[rndn(NREAL)];
    break;
  case M_NUM: /* ints, reals and NULLs */
    switch (rndn(4)) {
    case 0:
      v->cls = CSQ_NULL;
      break;
    case 1:
      v->cls = CSQ_REAL;
      v->r = arReal[rndn(NREAL)];
      break;
    default:
      v->cls = CSQ_INT;
      v->i = (int64_t)rndn(21) - 10;
      break;
    }
    break;
  case M_TEXT:
    v->cls = rndn(9) ? CSQ_TEXT : CSQ_NULL;
    v->n = snprintf(v->z, sizeof(v->z), "%s", azWord[rndn(NWORD)]);
    break;
  case M_UTEXT:
    v->cls = CSQ_TEXT;
    v->n = snprintf(v->z, sizeof(v->z), "u%d", (int)rndn(100000));
    break;
  case M_BLOB:
    v->cls = CSQ_BLOB;
    v->n = (int)rndn(3);
    for (int k = 0; k < v->n; k++) v->z[k] = "a\0\xff"[rndn(3)];
    break;
  case M_MIXED:
    switch (rndn(5)) {
    case 0:
      v->cls = CSQ_NULL;
      break;
    case 1:
      v->cls = CSQ_REAL;
      v->r = rndn(2) ? 2.0 : arReal[rndn(NREAL)];
      break;
    case 2:
      v->cls = CSQ_TEXT;
      v->n = 1;
      v->z[0] = "ab2"[rndn(3)];
      break;
    case 3:
      v->cls = CSQ_BLOB;
      v->n = 1;
      v->z[0] = "ab"[rndn(2)];
      break;
    default:
      v->cls = CSQ_INT;
      v->i = (int64_t)rndn(5);
      break;
    }
    break;
  case M_CONST:
    v->cls = CSQ_INT;
    v->i = 7;
    break;
  case M_NULL:
    v->cls = CSQ_NULL;
    break;
  case M_BIG: /* large positive integers: sums overflow in some groups */
    v->cls = CSQ_INT;
    v->i = rndn(3) ? (int64_t)rndn(1000) : INT64_MAX / 4 + (int64_t)rndn(1000000);
    break;
  default: /* M_WIDE: integers of every size, and the extremes */
    v->cls = CSQ_INT;
    switch (rndn(6)) {
    case 0:
      v->i = INT64_MAX - (int64_t)rndn(3);
      break;
    case 1:
      v->i = INT64_MIN + (int64_t)rndn(3);
      break;
    case 2:
      v->i = (int64_t)(rnd() >> rndn(64));
      break;
    case 3:
      v->i = -1;
      break;
    default:
      v->i = (int64_t)rndn(2000000) - 1000000;
      break;
    }
    break;
  }
}

static void load_sqlite(void) {
  sqlite3_exec(db,
               "DROP TABLE IF EXISTS t; CREATE TABLE t(rid INTEGER PRIMARY KEY, c0, c1, c2, c3)", 0,
               0, 0);
  sqlite3_stmt *st;
  sqlite3_exec(db, "BEGIN", 0, 0, 0);
  sqlite3_prepare_v2(db, "INSERT INTO t VALUES(?1, ?2, ?3, ?4, ?5)", -1, &st, 0);
  for (int r = 0; r < nRow; r++) {
    if (aDel[r]) continue;
    sqlite3_bind_int(st, 1, r + 1);
    for (int c = 0; c < NCOL; c++) test_val_bind(st, 2 + c, &aData[r][c]);
    sqlite3_step(st);
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  sqlite3_exec(db, "COMMIT", 0, 0, 0);
}

/* ---- row groups in a fake SLM ---- */

typedef struct rg_buf {
  uint8_t *slm;
  size_t nSlm;
  csq_mrange aMr[3];
  uint32_t r0, n;
} rg_buf;

static int aEncSeen[16];

static void rg_build(rg_buf *g, uint32_t r0, uint32_t n, size_t nOut) {
  uint8_t *apC[NCOL + 1];
  size_t anC[NCOL + 1], aOff[NCOL + 1], nIn = 0;
  for (int c = 0; c <= NCOL; c++) {
    csq_vec v;
    csq_vec_init(&v);
    for (uint32_t r = r0; r < r0 + n; r++) {
      if (c == 0)
        csq_vec_push_int(&v, r + 1);
      else
        test_val_push(&v, &aData[r][c - 1]);
    }
    csq_chunk_info info;
    csq_chunk_encode(&v, 0, n, &apC[c], &anC[c], &info);
    if (c) aEncSeen[info.enc] = 1;
    csq_vec_free(&v);
    aOff[c] = nIn;
    nIn += (anC[c] + 7) & ~7u;
  }
  size_t nJob = (CSQ_JOB_HDR + (NCOL + 1) * CSQ_JOB_CHUNK_SZ + (n + 7) / 8 + 7) & ~7u;
  g->nSlm = nJob + nIn + nOut;
  g->slm = calloc(1, g->nSlm);
  g->r0 = r0;
  g->n = n;
  uint32_t h[4] = {CSQ_JOB_MAGIC, n, NCOL + 1, (n + 7) / 8};
  memcpy(g->slm, h, 16);
  for (int c = 0; c <= NCOL; c++) {
    uint64_t e[3] = {aOff[c], anC[c], XXH3_64bits(apC[c], anC[c])};
    memcpy(g->slm + CSQ_JOB_HDR + CSQ_JOB_CHUNK_SZ * c, e, 24);
    memcpy(g->slm + nJob + aOff[c], apC[c], anC[c]);
    free(apC[c]);
  }
  uint8_t *del = g->slm + CSQ_JOB_HDR + (NCOL + 1) * CSQ_JOB_CHUNK_SZ;
  for (uint32_t r = 0; r < n; r++)
    if (aDel[r0 + r]) del[r / 8] |= (uint8_t)(1u << (r % 8));
  uint64_t hJob = csq_job_hash(g->slm, CSQ_JOB_HDR + (NCOL + 1) * CSQ_JOB_CHUNK_SZ + (n + 7) / 8);
  memcpy(g->slm + 16, &hJob, 8);
  g->aMr[0] = (csq_mrange){CSQ_NSID_SLM, 0, nJob, 0, 0};
  g->aMr[1] = (csq_mrange){CSQ_NSID_SLM, 0, nIn, nJob, 0};
  g->aMr[2] = (csq_mrange){CSQ_NSID_SLM, 0, nOut, nJob + nIn, 0};
}

/* Decode a result (format of program.h) into vectors. 0 or -1. */
static int decode(const uint8_t *o, csq_vec *aV, int nColWant, uint32_t *pnRows, uint32_t *pNext) {
  uint32_t h[4];
  uint64_t nBytes;
  memcpy(h, o, 16);
  memcpy(&nBytes, o + 16, 8);
  if (h[0] != CSQ_RES_MAGIC || (int)h[3] != nColWant) return -1;
  uint32_t n = h[1];
  const uint8_t *q = o + CSQ_RES_HDR + CSQ_RES_COL_SZ * h[3];
  for (uint32_t j = 0; j < h[3]; j++) {
    const uint8_t *d = o + CSQ_RES_HDR + CSQ_RES_COL_SZ * j;
    uint64_t nHeap;
    memcpy(&nHeap, d + 8, 8);
    const uint8_t *aCls = d[1] ? q : NULL;
    if (aCls) q += (n + 7) & ~7u;
    const uint8_t *aVal = q;
    q += 8ull * n;
    const uint8_t *aLen = d[2] ? q : NULL;
    if (aLen) q += (4ull * n + 7) & ~7ull;
    const uint8_t *aHeap = q;
    q += (nHeap + 7) & ~7ull;
    csq_vec_reset(&aV[j]);
    for (uint32_t k = 0; k < n; k++) {
      int cls = aCls ? aCls[k] : __builtin_ctz(d[0]);
      uint64_t u;
      uint32_t len = 0;
      memcpy(&u, aVal + 8 * k, 8);
      if (aLen) memcpy(&len, aLen + 4 * k, 4);
      switch (cls) {
      case CSQ_INT:
        csq_vec_push_int(&aV[j], (int64_t)u);
        break;
      case CSQ_REAL: {
        double r;
        memcpy(&r, &u, 8);
        csq_vec_push_real(&aV[j], r);
        break;
      }
      case CSQ_TEXT:
      case CSQ_BLOB:
        if (u + len > nHeap) return -1;
        csq_vec_push_bytes(&aV[j], cls, aHeap + u, len);
        break;
      default:
        csq_vec_push_null(&aV[j]);
        break;
      }
    }
  }
  if ((uint64_t)(q - o) != nBytes) return -1;
  *pnRows = n;
  *pNext = h[2];
  return 0;
}

/* An Execute context over row group g's buffer for the program id. */
static void ctx_for(dev_exec_ctx *ctx, rg_buf *g, uint64_t id, dev_stats *pSt) {
  memset(ctx, 0, sizeof(*ctx));
  ctx->pSlm = g->slm;
  ctx->nSlm = g->nSlm;
  ctx->aRange = g->aMr;
  ctx->nRange = 3;
  ctx->aParam[0] = id;
  ctx->pStats = pSt;
}

/* Run grouped program p over row group g into merger a, Execute by Execute.
** Returns 0, the fault reason (> 0), or -1 on a malformed result. */
static int64_t run_rg(rg_buf *g, void *pc, uint64_t id, dev_agg *a, int *pnExec) {
  dev_stats st;
  memset(&st, 0, sizeof(st));
  dev_exec_ctx ctx;
  ctx_for(&ctx, g, id, &st);
  int nCol = dev_agg_npartial(a);
  csq_vec aV[CSQ_PROG_MAX_OUT];
  for (int j = 0; j < nCol; j++) csq_vec_init(&aV[j]);
  int64_t ret64 = 0;
  uint32_t start = 0;
  for (int guard = 0; guard < 1000000 && start < g->n; guard++) {
    uint64_t ret = 0;
    ctx.aParam[1] = start;
    int rc = dev_ptype_csq.xRun(pc, &ctx, &ret);
    (*pnExec)++;
    if (rc) {
      ret64 = ret ? (int64_t)ret : -1;
      break;
    }
    uint32_t nr, next;
    const uint8_t *pRes = g->slm + g->aMr[2].addr;
    if (decode(pRes, aV, nCol, &nr, &next) ||
        csq_res_check(pRes, (ret >> 32) & ~7ull) != (uint32_t)ret || next <= start || next > g->n ||
        ((ret >> 32) & 1) != (next < g->n)) {
      ret64 = -1;
      break;
    }
    char *zErr = NULL;
    if (dev_agg_add(a, aV, nr, &zErr)) {
      printf("dev_agg_add: %s\n", zErr ? zErr : "?");
      ret64 = -1;
    }
    free(zErr);
    start = next;
  }
  for (int j = 0; j < nCol; j++) csq_vec_free(&aV[j]);
  return ret64;
}

/* Run p over row groups aRg[0..nRg) as one device slot in accumulate mode
** would (device/host/scan.c): each row group's Execute merges into the result the
** previous one left in the output area (CSQ_EXEC_ACC, checked by the result's
** check value), read out only when partial, at random, and at the end. Rows
** still reach the aggregates in row order, so the answer must be the
** oracle's exactly as without accumulating. Returns as run_rg. */
static int64_t run_acc(rg_buf *aRg, int nRg, void *pc, uint64_t id, dev_agg *a, int *pnExec) {
  dev_stats st;
  dev_exec_ctx ctx;
  memset(&st, 0, sizeof(st));
  memset(&ctx, 0, sizeof(ctx));
  int nCol = dev_agg_npartial(a);
  csq_vec aV[CSQ_PROG_MAX_OUT];
  for (int j = 0; j < nCol; j++) csq_vec_init(&aV[j]);
  uint8_t *pHeld = NULL; /* the accumulated result, moved from slot to slot */
  uint64_t nHeld = 0;
  uint32_t check = 0;
  int64_t ret64 = 0;
  for (int r = 0; r <= nRg && ret64 == 0; r++) {
    uint8_t *pOut = r < nRg ? aRg[r].slm + aRg[r].aMr[2].addr : NULL;
    int bFlush = pHeld && (r == nRg || rndn(3) == 0 || nHeld > aRg[r].aMr[2].len);
    if (bFlush) {
      uint32_t nr, next;
      char *zErr = NULL;
      if (decode(pHeld, aV, nCol, &nr, &next) || dev_agg_add(a, aV, nr, &zErr)) ret64 = -1;
      free(zErr);
      free(pHeld);
      pHeld = NULL;
    }
    if (r == nRg || ret64) break;
    rg_buf *g = &aRg[r];
    if (pHeld) memcpy(pOut, pHeld, nHeld);
    ctx_for(&ctx, g, id, &st);
    uint32_t start = 0;
    for (int guard = 0; guard < 100000; guard++) {
      uint64_t ret = 0;
      ctx.aParam[1] = start | (pHeld ? CSQ_EXEC_ACC | (uint64_t)check << 32 : 0);
      int rc = dev_ptype_csq.xRun(pc, &ctx, &ret);
      (*pnExec)++;
      if (rc) {
        ret64 = ret ? (int64_t)ret : -1;
        break;
      }
      uint64_t nBytes = (ret >> 32) & ~7ull;
      uint32_t nr, next;
      if (decode(pOut, aV, nCol, &nr, &next) || csq_res_check(pOut, nBytes) != (uint32_t)ret ||
          next > g->n || (next <= start && !pHeld && next < g->n) ||
          ((ret >> 32) & 1) != (next < g->n)) {
        ret64 = -1;
        break;
      }
      free(pHeld);
      pHeld = NULL;
      if (next < g->n) { /* partial: read it out, go on without accumulating */
        char *zErr = NULL;
        if (dev_agg_add(a, aV, nr, &zErr)) ret64 = -1;
        free(zErr);
        start = next;
        if (ret64) break;
        continue;
      }
      pHeld = malloc(nBytes);
      memcpy(pHeld, pOut, nBytes);
      nHeld = nBytes;
      check = (uint32_t)ret;
      break;
    }
  }
  free(pHeld);
  for (int j = 0; j < nCol; j++) csq_vec_free(&aV[j]);
  return ret64;
}

static int bAccMode; /* test_random runs its programs through run_acc */

/* ---- random programs with their SQL ---- */

typedef struct gen {
  csq_pb *b;
  int aSlot[NCOL + 1];
  char *zSql; /* being built */
  int nSql, nSqlAlloc;
  test_val aParam[512];
  int nParam;
  int bBigSafe; /* M_BIG present: sums over plain columns only */
  int bSumArg;  /* building a SUM argument: no huge constants, no M_BIG/M_WIDE column */
} gen;

static int param(gen *g, const test_val *v) {
  g->aParam[g->nParam] = *v;
  return ++g->nParam;
}

/* A random numeric column (bSmall: none whose integers can overflow a sum
** in an order-dependent way, see program.h), or -1. */
static int numeric_col2(int bSmall) {
  int a[NCOL], n = 0;
  for (int c = 0; c < NCOL; c++)
    if (mode_numeric(aMode[c]) && !(bSmall && (aMode[c] == M_BIG || aMode[c] == M_WIDE)))
      a[n++] = c;
  return n ? a[rndn(n)] : -1;
}
static int numeric_col(void) {
  return numeric_col2(0);
}

static void rand_const(test_val *v, int bSmall) {
  memset(v, 0, sizeof(*v));
  switch (bSmall ? 5 + rndn(3) : rndn(8)) {
  case 0:
    v->cls = CSQ_NULL;
    break;
  case 1:
    v->cls = CSQ_REAL;
    v->r = arReal[rndn(NREAL)];
    break;
  case 2:
    v->cls = CSQ_INT;
    v->i = rndn(2) ? INT64_MAX - (int64_t)rndn(2) : INT64_MIN + (int64_t)rndn(2);
    break;
  case 3:
    v->cls = CSQ_INT;
    v->i = 0;
    break;
  case 4:
    v->cls = CSQ_REAL;
    v->r = rndn(2) ? 0.0 : 1e300;
    break;
  default:
    v->cls = CSQ_INT;
    v->i = (int64_t)rndn(9) - 3;
    break;
  }
}

/* A random numeric expression: its instruction, its SQL in z. */
static int rand_expr(gen *g, int depth, char *z, size_t nz) {
  int k = (int)rndn(depth > 0 ? 10 : 4);
  if (k <= 1) {
    int c = numeric_col2(g->bSumArg);
    if (!g->bSumArg && rndn(12) == 0) c = (int)rndn(NCOL); /* text operands: NOT_NUMERIC */
    if (c >= 0) {
      snprintf(z, nz, "c%d", c);
      return csq_pb_expr_col(g->b, g->aSlot[c + 1]);
    }
    k = 2;
  }
  if (k <= 3) {
    test_val v;
    rand_const(&v, g->bSumArg);
    int p = param(g, &v);
    snprintf(z, nz, "?%d", p);
    return csq_pb_expr_const(g->b, test_val_const(g->b, &v));
  }
  char za[1024], zb[1024];
  if (k == 8) {
    int e = rand_expr(g, depth - 1, za, sizeof(za));
    snprintf(z, nz, "(-%s)", za);
    return csq_pb_expr_neg(g->b, e);
  }
  if (k == 9) { /* CASE WHEN c op ? THEN a ELSE b END */
    int c = (int)rndn(NCOL);
    test_val v;
    rand_const(&v, 0);
    if (rndn(2)) v = aData[rndn(nRow)][c];
    int p = param(g, &v);
    static const int aOp[] = {CSQ_OP_LT, CSQ_OP_GE, CSQ_OP_EQ, CSQ_OP_ISNULL, CSQ_OP_NE};
    static const char *azOp[] = {"<", ">=", "=", "ISNULL", "!="};
    int o = (int)rndn(5);
    int cond = o == 3
                   ? csq_pb_cond(g->b, CSQ_OP_ISNULL, 0, g->aSlot[c + 1], 0, 0, 0)
                   : csq_pb_cond(g->b, aOp[o], 0, g->aSlot[c + 1], test_val_const(g->b, &v), 0, 0);
    int e1 = rand_expr(g, depth - 1, za, sizeof(za));
    int e2 = rand_expr(g, depth - 1, zb, sizeof(zb));
    if (o == 3)
      snprintf(z, nz, "(CASE WHEN c%d ISNULL THEN %s ELSE %s END)", c, za, zb);
    else
      snprintf(z, nz, "(CASE WHEN c%d %s ?%d THEN %s ELSE %s END)", c, azOp[o], p, za, zb);
    return csq_pb_expr_case(g->b, cond, e1, e2);
  }
  static const int aEx[] = {CSQ_EX_ADD, CSQ_EX_SUB, CSQ_EX_MUL, CSQ_EX_DIV};
  static const char *azEx[] = {"+", "-", "*", "/"};
  int op = (int)rndn(4);
  int e1 = rand_expr(g, depth - 1, za, sizeof(za));
  int e2 = rand_expr(g, depth - 1, zb, sizeof(zb));
  snprintf(z, nz, "(%s %s %s)", za, azEx[op], zb);
  return csq_pb_expr_arith(g->b, aEx[op], e1, e2);
}

/* A random group key: a column of any class, a numeric expression, or a
** column's code in a key code map (CSQ_EX_MAP), which SQL writes as a
** CASE of the column without affinity ("+c") against each key. */
static int rand_key(gen *g, char *z, size_t nz) {
  if (rndn(5) == 0) {
    int c = (int)rndn(NCOL), nSpan = 1 + (int)rndn(12), o = snprintf(z, nz, "(CASE");
    int64_t base = (int64_t)rndn(7) - 4;
    uint8_t m[CSQ_CODEMAP_HDR + 4 * 12];
    csq_put_le64(m, (uint64_t)base);
    for (int i = 0; i < nSpan; i++) {
      uint32_t code = i == 0 ? 1 + (uint32_t)rndn(3) : (uint32_t)rndn(4);
      csq_put_le32(m + CSQ_CODEMAP_HDR + 4 * i, code);
      if (code)
        o += snprintf(z + o, nz - o, " WHEN +c%d = %lld THEN %u", c, (long long)(base + i), code);
    }
    snprintf(z + o, nz - o, " ELSE NULL END)");
    int e = csq_pb_expr_col(g->b, g->aSlot[c + 1]);
    return csq_pb_expr_map(g->b, e, m, CSQ_CODEMAP_HDR + 4 * (uint32_t)nSpan);
  }
  if (rndn(3)) {
    int c = (int)rndn(NCOL);
    snprintf(z, nz, "c%d", c);
    return csq_pb_expr_col(g->b, g->aSlot[c + 1]);
  }
  return rand_expr(g, 1, z, nz);
}

typedef struct aggdef {
  int fn, coll;
  char zArg[1100];
} aggdef;

/* Canonical text of a value for matching groups: numbers by value. */
static void canon(int cls, int64_t i, double r, const void *z, int n, char *out, size_t nOut) {
  switch (cls) {
  case CSQ_INT:
    snprintf(out, nOut, "N%lld", (long long)i);
    break;
  case CSQ_REAL:
    if (r >= -9223372036854775808.0 && r < 9223372036854775808.0 && r == floor(r))
      snprintf(out, nOut, "N%lld", (long long)r);
    else
      snprintf(out, nOut, "R%.17g", r);
    break;
  case CSQ_TEXT:
  case CSQ_BLOB: {
    int o = snprintf(out, nOut, "%c", cls == CSQ_TEXT ? 'T' : 'B');
    for (int k = 0; k < n && o + 3 < (int)nOut; k++)
      o += snprintf(out + o, nOut - o, "%02x", ((const uint8_t *)z)[k]);
    break;
  }
  default:
    snprintf(out, nOut, "0");
    break;
  }
}

static int real_close(double a, double b, double tol) {
  if (a == b) return 1;
  if (isinf(a) || isinf(b)) return 0;
  return fabs(a - b) <= tol;
}

static int nProgs, nGroupsSeen, nOverflowSeen, nEmptySeen, nNotNumSeen;

/* One random grouped query over the current data, split into nRg row
** groups with output areas of nOut bytes. */
static void one_query(rg_buf *aRg, int nRg) {
  gen G, *g = &G;
  memset(g, 0, sizeof(*g));
  g->b = csq_pb_new();
  for (int c = 0; c <= NCOL; c++) g->aSlot[c] = csq_pb_input(g->b, (uint32_t)c);
  for (int c = 0; c < NCOL; c++) g->bBigSafe |= aMode[c] == M_BIG;
  int nKey = (int)rndn(4), nAgg = 1 + (int)rndn(5);
  char azKey[4][1100];
  aggdef aA[8];
  for (int j = 0; j < nKey; j++) csq_pb_group(g->b, rand_key(g, azKey[j], sizeof(azKey[j])));
  for (int i = 0; i < nAgg; i++) {
    aggdef *d = &aA[i];
    d->fn = 1 + (int)rndn(CSQ_AGG_FN_MAX);
    d->coll = 0;
    int e = -1;
    if (d->fn == CSQ_AGG_SUM || d->fn == CSQ_AGG_TOTAL || d->fn == CSQ_AGG_AVG) {
      if (g->bBigSafe) {
        int c = numeric_col();
        if (d->fn == CSQ_AGG_SUM && aMode[c] == M_WIDE) d->fn = CSQ_AGG_TOTAL; /* order-dependent */
        e = csq_pb_expr_col(g->b, g->aSlot[c + 1]);
        snprintf(d->zArg, sizeof(d->zArg), "c%d", c);
        if (rndn(3) == 0) {
          e = csq_pb_expr_neg(g->b, e);
          snprintf(d->zArg, sizeof(d->zArg), "(-c%d)", c);
        }
      } else {
        g->bSumArg = d->fn == CSQ_AGG_SUM;
        e = rand_expr(g, 2, d->zArg, sizeof(d->zArg));
        g->bSumArg = 0;
      }
    } else if (d->fn != CSQ_AGG_COUNT_STAR) {
      if (rndn(2)) {
        int c = (int)rndn(NCOL);
        e = csq_pb_expr_col(g->b, g->aSlot[c + 1]);
        snprintf(d->zArg, sizeof(d->zArg), "c%d", c);
        if ((d->fn == CSQ_AGG_MIN || d->fn == CSQ_AGG_MAX) && rndn(4) == 0)
          d->coll = rndn(2) ? CSQ_TF_NOCASE : CSQ_TF_RTRIM;
      } else {
        e = rand_expr(g, 2, d->zArg, sizeof(d->zArg));
      }
    }
    csq_pb_agg(g->b, d->fn, d->coll, e);
  }
  /* filter: up to two terms */
  char zWhere[600] = "";
  int nT = (int)rndn(3), ow = 0;
  for (int t = 0; t < nT; t++) {
    int c = (int)rndn(NCOL);
    test_val v = aData[rndn(nRow)][c];
    int p = param(g, &v);
    int op = rndn(2) ? CSQ_OP_GE : CSQ_OP_LT;
    if (rndn(8) == 0) { /* nothing qualifies */
      op = CSQ_OP_ISNULL;
      csq_pb_clause(g->b);
      csq_pb_term(g->b, CSQ_OP_ISNULL, 0, g->aSlot[0], 0, 0, 0);
      ow += snprintf(zWhere + ow, sizeof(zWhere) - ow, "%s rid ISNULL", t ? " AND" : " WHERE");
      continue;
    }
    csq_pb_clause(g->b);
    csq_pb_term(g->b, op, 0, g->aSlot[c + 1], test_val_const(g->b, &v), 0, 0);
    ow += snprintf(zWhere + ow, sizeof(zWhere) - ow, "%s c%d %s ?%d", t ? " AND" : " WHERE", c,
                   op == CSQ_OP_GE ? ">=" : "<", p);
  }
  uint8_t *p;
  size_t n;
  int rc = csq_pb_finish(g->b, &p, &n);
  csq_pb_free(g->b);
  CHECK(rc == 0, "finish %d", rc);
  if (rc) return;
  /* SQL: keys, then per aggregate its value (and a tolerance helper) */
  char *zSql = malloc(65536);
  int o = snprintf(zSql, 65536, "SELECT ");
  for (int j = 0; j < nKey; j++) o += snprintf(zSql + o, 65536 - o, "%s, ", azKey[j]);
  static const char *azFn[] = {"", "count", "count", "sum", "total", "avg", "min", "max"};
  for (int i = 0; i < nAgg; i++) {
    const aggdef *d = &aA[i];
    const char *zColl = d->coll == CSQ_TF_NOCASE  ? " COLLATE NOCASE"
                        : d->coll == CSQ_TF_RTRIM ? " COLLATE RTRIM"
                                                  : "";
    if (d->fn == CSQ_AGG_COUNT_STAR)
      o += snprintf(zSql + o, 65536 - o, "count(*), 0");
    else
      o += snprintf(zSql + o, 65536 - o, "%s(%s%s), total(abs(1.0*(%s)))", azFn[d->fn], d->zArg,
                    zColl, d->fn >= CSQ_AGG_SUM && d->fn <= CSQ_AGG_AVG ? d->zArg : "0");
    o += snprintf(zSql + o, 65536 - o, "%s", i + 1 < nAgg ? ", " : "");
  }
  o += snprintf(zSql + o, 65536 - o, " FROM t%s", zWhere);
  if (nKey) {
    o += snprintf(zSql + o, 65536 - o, " GROUP BY ");
    for (int j = 0; j < nKey; j++)
      o += snprintf(zSql + o, 65536 - o, "%s%s", j ? ", " : "", azKey[j]);
  }
  /* device + merge */
  void *pc = NULL;
  char zErr[256];
  rc = dev_ptype_csq.xVerify(p, n, &pc, zErr, sizeof(zErr));
  CHECK(rc == 0, "verify: %s", zErr);
  if (rc) {
    free(p);
    free(zSql);
    return;
  }
  dev_agg *a = NULL;
  char *zE = NULL;
  rc = dev_agg_new(p, n, &a, &zE);
  CHECK(rc == 0, "dev_agg_new: %s", zE ? zE : "");
  free(zE);
  zE = NULL;
  int64_t fault = 0;
  int nExec = 0;
  if (bAccMode)
    fault = run_acc(aRg, nRg, pc, csq_prog_id(p, n), a, &nExec);
  else
    for (int r = 0; r < nRg && !fault; r++)
      fault = run_rg(&aRg[r], pc, csq_prog_id(p, n), a, &nExec);
  dev_ptype_csq.xFree(pc);
  CHECK(fault >= 0, "malformed result: %s", zSql);
  nProgs++;
  /* the oracle */
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, zSql, -1, &st, 0) != SQLITE_OK) {
    CHECK(0, "sqlite prepare: %s: %s", zSql, sqlite3_errmsg(db));
    goto out;
  }
  for (int k = 0; k < g->nParam; k++) test_val_bind(st, k + 1, &g->aParam[k]);
  int nCol = dev_agg_ncol(a);
  csq_vec aOut[16];
  for (int j = 0; j < nCol; j++) csq_vec_init(&aOut[j]);
  uint32_t nGot = 0;
  int rcFin = fault ? 0 : dev_agg_finish(a, aOut, &nGot, &zE);
  /* our rows by canonical key */
  char(*azCanon)[256] = calloc(nGot ? nGot : 1, 256);
  char *aUsed = calloc(nGot ? nGot : 1, 1);
  for (uint32_t r = 0; r < nGot && rcFin == 0; r++) {
    int oc = 0;
    for (int j = 0; j < nKey; j++) {
      const csq_vec *v = &aOut[j];
      char zc[128];
      canon(v->aCls[r], v->aVal[r].i, v->aVal[r].r,
            v->aCls[r] == CSQ_TEXT || v->aCls[r] == CSQ_BLOB ? csq_vec_bytes(v, r) : NULL,
            (int)v->aLen[r], zc, sizeof(zc));
      oc += snprintf(azCanon[r] + oc, 256 - oc, "%s|", zc);
    }
  }
  int nWant = 0, srcRc, bBad = 0;
  while ((srcRc = sqlite3_step(st)) == SQLITE_ROW && rcFin == 0 && !fault) {
    nWant++;
    char zk[256] = "";
    int oc = 0;
    for (int j = 0; j < nKey; j++) {
      char zc[128];
      int cls = sqlite3_column_type(st, j);
      canon(cls, sqlite3_column_int64(st, j), sqlite3_column_double(st, j),
            cls == SQLITE_TEXT ? (const void *)sqlite3_column_text(st, j)
                               : sqlite3_column_blob(st, j),
            sqlite3_column_bytes(st, j), zc, sizeof(zc));
      oc += snprintf(zk + oc, sizeof(zk) - oc, "%s|", zc);
    }
    uint32_t r = 0;
    while (r < nGot && (aUsed[r] || strcmp(azCanon[r], zk))) r++;
    if (r == nGot) {
      if (!bBad) CHECK(0, "group %s missing: %s", zk, zSql);
      bBad = 1;
      continue;
    }
    aUsed[r] = 1;
    for (int i = 0; i < nAgg; i++) {
      int jc = nKey + 2 * i;
      const csq_vec *v = &aOut[nKey + i];
      int cls = sqlite3_column_type(st, jc), ok = 1;
      double tol = 1e-9 * sqlite3_column_double(st, jc + 1);
      if (aA[i].fn == CSQ_AGG_AVG) {
        /* the tolerance helper is a total; AVG divides it */
        tol = tol + 1e-300;
      }
      if (cls == SQLITE_NULL)
        ok = v->aCls[r] == CSQ_NULL;
      else if (cls == SQLITE_INTEGER && aA[i].fn != CSQ_AGG_MIN && aA[i].fn != CSQ_AGG_MAX)
        ok = v->aCls[r] == CSQ_INT && v->aVal[r].i == sqlite3_column_int64(st, jc);
      else if (cls == SQLITE_FLOAT && aA[i].fn != CSQ_AGG_MIN && aA[i].fn != CSQ_AGG_MAX) {
        double w = sqlite3_column_double(st, jc);
        ok = v->aCls[r] == CSQ_REAL && real_close(v->aVal[r].r, w, tol + 1e-12 * fabs(w));
      } else {
        char z1[128], z2[128];
        canon(cls, sqlite3_column_int64(st, jc), sqlite3_column_double(st, jc),
              cls == SQLITE_TEXT ? (const void *)sqlite3_column_text(st, jc)
                                 : sqlite3_column_blob(st, jc),
              sqlite3_column_bytes(st, jc), z1, sizeof(z1));
        canon(v->aCls[r], v->aVal[r].i, v->aVal[r].r,
              v->aCls[r] == CSQ_TEXT || v->aCls[r] == CSQ_BLOB ? csq_vec_bytes(v, r) : NULL,
              (int)v->aLen[r], z2, sizeof(z2));
        ok = strcmp(z1, z2) == 0;
        if (!ok && aA[i].coll) { /* collation ties: another member of the tie is fine */
          ok = sqlite3_column_type(st, jc) == SQLITE_TEXT && v->aCls[r] == CSQ_TEXT;
        }
      }
      if (!ok && !bBad) {
        CHECK(0,
              "agg %d (fn %d) of group %s differs: sqlite cls %d %lld %.17g '%s' / ours cls %d "
              "%lld %.17g: %s",
              i, aA[i].fn, zk, cls, (long long)sqlite3_column_int64(st, jc),
              sqlite3_column_double(st, jc),
              cls == SQLITE_TEXT ? (const char *)sqlite3_column_text(st, jc) : "", v->aCls[r],
              (long long)v->aVal[r].i, v->aVal[r].r, zSql);
        bBad = 1;
      }
    }
  }
  if (fault) {
    /* the device refused arithmetic over text: only legal if SQLite's
    ** expression indeed met text (modes with text columns only) */
    int bText = 0;
    for (int c = 0; c < NCOL; c++) bText |= !mode_numeric(aMode[c]);
    CHECK(fault == CSQ_FAULT_NOT_NUMERIC && bText, "fault %lld: %s", (long long)fault, zSql);
    nNotNumSeen++;
  } else {
    while (srcRc == SQLITE_ROW) srcRc = sqlite3_step(st); /* run SQLite to its end */
  }
  if (fault) {
  } else if (srcRc == SQLITE_ERROR || rcFin) {
    const char *zS = sqlite3_errmsg(db);
    int bOv = srcRc == SQLITE_ERROR && strstr(zS, "integer overflow") != NULL;
    /* where SQLite's row-order sum overflows, the merger must hand the query
    ** back to the host (-EDOM); it may also do so where the bounds cannot
    ** rule an overflow out but SQLite happened not to overflow */
    int bOk = rcFin == -EDOM && (srcRc != SQLITE_ERROR || bOv);
    CHECK(bOk, "errors: sqlite %d '%s', ours %d '%s': %s", srcRc, srcRc == SQLITE_ERROR ? zS : "",
          rcFin, zE ? zE : "", zSql);
    if (!bOk && getenv("CSQ_AGG_DEBUG")) {
      printf("  modes %d %d %d %d, %d params:", aMode[0], aMode[1], aMode[2], aMode[3], g->nParam);
      for (int k = 0; k < g->nParam; k++)
        printf(" %d:%lld/%g", g->aParam[k].cls, (long long)g->aParam[k].i, g->aParam[k].r);
      printf("\n");
    }
    nOverflowSeen++;
  } else {
    CHECK(srcRc == SQLITE_DONE, "sqlite step %d %s", srcRc, sqlite3_errmsg(db));
    CHECK(bBad || nWant == (int)nGot, "%d groups, SQLite %d: %s", (int)nGot, nWant, zSql);
    nGroupsSeen += nWant;
    if (nWant == 0 || (nKey == 0 && nGot == 1 && aOut[0].n && 0)) nEmptySeen++;
  }
  sqlite3_finalize(st);
  for (int j = 0; j < nCol; j++) csq_vec_free(&aOut[j]);
  free(azCanon);
  free(aUsed);
out:
  free(zE);
  dev_agg_free(a);
  free(p);
  free(zSql);
}

static void fill_data(int n) {
  nRow = n;
  for (int c = 0; c < NCOL; c++)
    for (int r = 0; r < n; r++) draw(&aData[r][c], aMode[c], r, r ? &aData[r - 1][c] : NULL);
  for (int r = 0; r < n; r++) aDel[r] = rndn(11) == 0;
  load_sqlite();
}

static void test_random(int nRound, int nQuery) {
  for (int round = 0; round < nRound; round++) {
    for (int c = 0; c < NCOL; c++) aMode[c] = (int)rndn(M_NMODE);
    if (round % 3 == 0) /* numbers only: no NOT_NUMERIC faults */
      for (int c = 0; c < NCOL; c++)
        while (!mode_numeric(aMode[c])) aMode[c] = (int)rndn(M_NMODE);
    int n = 500 + (int)rndn(3000);
    fill_data(n);
    /* 1..3 row groups; output areas large or tiny (results in parts) */
    int nRg = 1 + (int)rndn(3);
    rg_buf aRg[3];
    uint32_t r0 = 0;
    size_t nOut = rndn(3) ? (size_t)4 << 20 : 8192 + rndn(8192);
    for (int i = 0; i < nRg; i++) {
      uint32_t m = i + 1 == nRg ? (uint32_t)n - r0 : (uint32_t)n / nRg;
      rg_build(&aRg[i], r0, m, nOut);
      r0 += m;
    }
    for (int qi = 0; qi < nQuery; qi++) one_query(aRg, nRg);
    for (int i = 0; i < nRg; i++) free(aRg[i].slm);
  }
}

/* More than 64K groups, in the hash table, with results in parts. */
static void test_many_groups(void) {
  int n = 150000;
  aMode[0] = M_INT;
  aMode[1] = M_NUM;
  aMode[2] = M_TEXT;
  aMode[3] = M_INT;
  nRow = n;
  for (int r = 0; r < n; r++) {
    for (int c = 0; c < NCOL; c++) draw(&aData[r][c], aMode[c], r, r ? &aData[r - 1][c] : NULL);
    aData[r][0].i = (int64_t)((r * 7919ll) % 100003); /* ~100K groups */
    aDel[r] = 0;
  }
  load_sqlite();
  for (int pass = 0; pass < 2; pass++) {
    rg_buf g;
    rg_build(&g, 0, n, pass ? 1 << 20 : 64 << 20);
    csq_pb *b = csq_pb_new();
    for (int c = 0; c <= NCOL; c++) csq_pb_input(b, (uint32_t)c); /* the job's chunk order */
    int s0 = 1, s1 = 2, s3 = 3;
    csq_pb_group(b, csq_pb_expr_col(b, s0));
    csq_pb_agg(b, CSQ_AGG_COUNT_STAR, 0, -1);
    csq_pb_agg(b, CSQ_AGG_SUM, 0, csq_pb_expr_col(b, s1));
    csq_pb_agg(b, CSQ_AGG_MAX, 0, csq_pb_expr_col(b, s3));
    uint8_t *p;
    size_t np;
    csq_pb_finish(b, &p, &np);
    csq_pb_free(b);
    void *pc;
    char zErr[200];
    CHECK(dev_ptype_csq.xVerify(p, np, &pc, zErr, sizeof(zErr)) == 0, "verify");
    dev_agg *a;
    char *zE = NULL;
    dev_agg_new(p, np, &a, &zE);
    int nExec = 0;
    CHECK(run_rg(&g, pc, csq_prog_id(p, np), a, &nExec) == 0, "run");
    dev_ptype_csq.xFree(pc);
    csq_vec aOut[4];
    for (int j = 0; j < 4; j++) csq_vec_init(&aOut[j]);
    uint32_t nGot;
    CHECK(dev_agg_finish(a, aOut, &nGot, &zE) == 0, "finish");
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, "SELECT c0, count(*), sum(c1), max(c2) FROM t GROUP BY c0", -1, &st, 0);
    /* keys are distinct integers 0..100002: index our rows by key */
    int32_t *aIdx = malloc(sizeof(int32_t) * 100003);
    memset(aIdx, 0xFF, sizeof(int32_t) * 100003);
    for (uint32_t r = 0; r < nGot; r++) aIdx[aOut[0].aVal[r].i] = (int32_t)r;
    int nWant = 0, nBad = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
      nWant++;
      int64_t k = sqlite3_column_int64(st, 0);
      int32_t r = aIdx[k];
      if (r < 0) {
        nBad++;
        continue;
      }
      int ok = aOut[1].aVal[r].i == sqlite3_column_int64(st, 1);
      if (sqlite3_column_type(st, 2) == SQLITE_NULL)
        ok &= aOut[2].aCls[r] == CSQ_NULL;
      else if (sqlite3_column_type(st, 2) == SQLITE_INTEGER)
        ok &= aOut[2].aCls[r] == CSQ_INT && aOut[2].aVal[r].i == sqlite3_column_int64(st, 2);
      else {
        double w = sqlite3_column_double(st, 2);
        ok &= aOut[2].aCls[r] == CSQ_REAL && fabs(aOut[2].aVal[r].r - w) <= 1e-9 * (fabs(w) + 1e16);
      }
      if (sqlite3_column_type(st, 3) == SQLITE_NULL)
        ok &= aOut[3].aCls[r] == CSQ_NULL;
      else
        ok &= aOut[3].aCls[r] == CSQ_TEXT &&
              aOut[3].aLen[r] == (uint32_t)sqlite3_column_bytes(st, 3) &&
              memcmp(csq_vec_bytes(&aOut[3], r), sqlite3_column_text(st, 3), aOut[3].aLen[r]) == 0;
      if (!ok && nBad == 0)
        printf("  many groups: key %lld: count %lld/%lld sum cls %d %.17g / %d %.17g\n",
               (long long)k, (long long)aOut[1].aVal[r].i, (long long)sqlite3_column_int64(st, 1),
               aOut[2].aCls[r], aOut[2].aVal[r].r, sqlite3_column_type(st, 2),
               sqlite3_column_double(st, 2));
      nBad += !ok;
    }
    sqlite3_finalize(st);
    CHECK(nWant == (int)nGot && nWant > 65536 && nBad == 0, "many groups: %u vs %d, %d bad", nGot,
          nWant, nBad);
    printf("many groups: %u groups from %d rows, %d Executes (output area %s)\n", nGot, n, nExec,
           pass ? "1 MiB" : "64 MiB");
    if (pass) CHECK(nExec > 1, "a small output area must split the result");
    free(aIdx);
    for (int j = 0; j < 4; j++) csq_vec_free(&aOut[j]);
    dev_agg_free(a);
    free(zE);
    free(p);
    free(g.slm);
  }
}

/* The verifier on grouped programs: truncations and bit flips never crash;
** the encoder's limits. */
static void test_verifier(void) {
  csq_pb *b = csq_pb_new();
  int s1 = csq_pb_input(b, 1), s2 = csq_pb_input(b, 2);
  int k = csq_pb_const_int(b, 3), kt = csq_pb_const_bytes(b, CSQ_TEXT, "ab", 2);
  csq_pb_term(b, CSQ_OP_GT, 0, s1, k, 0, 0);
  int e1 = csq_pb_expr_col(b, s1), e2 = csq_pb_expr_const(b, k);
  int e3 = csq_pb_expr_arith(b, CSQ_EX_MUL, e1, e2);
  int cnd = csq_pb_cond(b, CSQ_OP_LIKE, 0, s2, kt, 0, 0);
  int e4 = csq_pb_expr_case(b, cnd, e3, csq_pb_expr_neg(b, e1));
  csq_pb_group(b, csq_pb_expr_col(b, s2));
  uint8_t aMap[CSQ_CODEMAP_HDR + 4 * 3] = {0}; /* keys 2..4, codes 7, 0, 9 */
  csq_put_le64(aMap, 2);
  csq_put_le32(aMap + CSQ_CODEMAP_HDR, 7);
  csq_put_le32(aMap + CSQ_CODEMAP_HDR + 8, 9);
  csq_pb_group(b, csq_pb_expr_map(b, e1, aMap, sizeof(aMap)));
  csq_pb_agg(b, CSQ_AGG_SUM, 0, e4);
  csq_pb_agg(b, CSQ_AGG_COUNT_STAR, 0, -1);
  csq_pb_agg(b, CSQ_AGG_MIN, CSQ_TF_NOCASE, csq_pb_expr_col(b, s2));
  uint8_t *p;
  size_t n;
  CHECK(csq_pb_finish(b, &p, &n) == 0, "finish");
  csq_pb_free(b);
  csq_prog pr;
  char zErr[200];
  CHECK(csq_prog_parse(p, n, &pr, zErr, sizeof(zErr)) == 0, "parse: %s", zErr);
  CHECK(pr.bAgg && pr.nKey == 2 && pr.nAgg == 3 && pr.nCond == 1 &&
            pr.nResCol == 2 + CSQ_AGG_SUM_COLS + 1 + 1 && pr.nOut == 0,
        "parsed fields");
  csq_prog_clear(&pr);
  int nOk = 0;
  for (size_t t = 0; t < n; t++) {
    if (csq_prog_parse(p, t, &pr, zErr, sizeof(zErr)) == 0) {
      nOk++;
      csq_prog_clear(&pr);
    }
  }
  CHECK(nOk == 0, "%d truncations accepted", nOk);
  uint8_t *q = malloc(n);
  for (size_t i = 0; i < n; i++)
    for (int bit = 0; bit < 8; bit++) {
      memcpy(q, p, n);
      q[i] ^= (uint8_t)(1u << bit);
      int rc = csq_prog_parse(q, n, &pr, zErr, sizeof(zErr));
      CHECK(rc == 0 || (rc == -EINVAL && zErr[0]), "rc %d", rc);
      if (rc == 0) {
        /* a still-valid program must also compile and be runnable */
        void *pc;
        if (dev_ptype_csq.xVerify(q, n, &pc, zErr, sizeof(zErr)) == 0) dev_ptype_csq.xFree(pc);
        csq_prog_clear(&pr);
      }
    }
  free(q);
  /* a version 1 program with the aggregation flag, or outputs in a grouped one */
  q = malloc(n);
  memcpy(q, p, n);
  q[4] = 1;
  CHECK(csq_prog_parse(q, n, &pr, zErr, sizeof(zErr)) == -EINVAL, "v1 with agg flag");
  free(q);
  free(p);
  /* forward references and limits through the encoder */
  b = csq_pb_new();
  s1 = csq_pb_input(b, 1);
  CHECK(csq_pb_expr_arith(b, CSQ_EX_ADD, 0, 1) == -EINVAL, "forward reference refused");
  csq_pb_free(b);
  b = csq_pb_new();
  s1 = csq_pb_input(b, 1);
  e1 = csq_pb_expr_col(b, s1);
  int rc = 0;
  for (int i = 0; i <= CSQ_AGG_MAX_KEYS && rc >= 0; i++) rc = csq_pb_group(b, e1);
  CHECK(rc == -EINVAL, "key limit");
  csq_pb_free(b);
  /* MAP: its constant must be a key code map (a BLOB of a whole number of
  ** codes), its operand an earlier instruction */
  for (int bad = 0; bad < 4; bad++) {
    uint8_t m[CSQ_CODEMAP_HDR + 8] = {0};
    b = csq_pb_new();
    s1 = csq_pb_input(b, 1);
    e1 = csq_pb_expr_col(b, s1);
    int k0 = bad == 1   ? csq_pb_const_bytes(b, CSQ_TEXT, m, sizeof(m))
             : bad == 2 ? csq_pb_const_bytes(b, CSQ_BLOB, m, sizeof(m) - 1)
                        : csq_pb_const_bytes(b, CSQ_BLOB, m, sizeof(m));
    int eMap = csq_pb_expr(b, CSQ_EX_MAP, bad == 3 ? e1 + 1 : e1, k0, 0);
    csq_pb_group(b, eMap);
    CHECK(csq_pb_finish(b, &p, &n) == 0, "finish MAP %d", bad);
    rc = csq_prog_parse(p, n, &pr, zErr, sizeof(zErr));
    CHECK(bad ? rc == -EINVAL : rc == 0, "MAP program %d: rc %d (%s)", bad, rc, zErr);
    if (rc == 0) csq_prog_clear(&pr);
    free(p);
    csq_pb_free(b);
  }
  /* a filter program keeps version 1 and its bytes */
  b = csq_pb_new();
  csq_pb_output(b, csq_pb_input(b, 0));
  csq_pb_finish(b, &p, &n);
  CHECK(p[4] == 1 && p[6] == 0, "filter programs stay version 1");
  free(p);
  csq_pb_free(b);
}

/* Empty input and overflow, explicitly. */
static void test_edges(void) {
  for (int c = 0; c < NCOL; c++) aMode[c] = M_BIG;
  fill_data(400);
  rg_buf g;
  rg_build(&g, 0, 400, 1 << 20);
  static const int aFn[] = {CSQ_AGG_COUNT_STAR, CSQ_AGG_COUNT, CSQ_AGG_SUM, CSQ_AGG_TOTAL,
                            CSQ_AGG_AVG,        CSQ_AGG_MIN,   CSQ_AGG_MAX};
  for (int bEmpty = 0; bEmpty < 2; bEmpty++) {
    csq_pb *b = csq_pb_new();
    for (int c = 0; c <= NCOL; c++) csq_pb_input(b, (uint32_t)c);
    int s = 1;
    if (bEmpty) csq_pb_term(b, CSQ_OP_ISNULL, 0, s, 0, 0, 0);
    int e = csq_pb_expr_col(b, s);
    for (int i = 0; i < 7; i++) csq_pb_agg(b, aFn[i], 0, e);
    uint8_t *p;
    size_t n;
    csq_pb_finish(b, &p, &n);
    csq_pb_free(b);
    void *pc;
    char zErr[200];
    dev_ptype_csq.xVerify(p, n, &pc, zErr, sizeof(zErr));
    dev_agg *a;
    char *zE = NULL;
    dev_agg_new(p, n, &a, &zE);
    int nExec = 0;
    CHECK(run_rg(&g, pc, csq_prog_id(p, n), a, &nExec) == 0, "run");
    dev_ptype_csq.xFree(pc);
    csq_vec aOut[7];
    for (int j = 0; j < 7; j++) csq_vec_init(&aOut[j]);
    uint32_t nGot = 0;
    int rc = dev_agg_finish(a, aOut, &nGot, &zE);
    if (bEmpty) {
      CHECK(rc == 0 && nGot == 1, "empty: rc %d rows %u", rc, nGot);
      CHECK(aOut[0].aVal[0].i == 0 && aOut[1].aVal[0].i == 0 && aOut[2].aCls[0] == CSQ_NULL &&
                aOut[3].aCls[0] == CSQ_REAL && aOut[3].aVal[0].r == 0.0 &&
                aOut[4].aCls[0] == CSQ_NULL && aOut[5].aCls[0] == CSQ_NULL &&
                aOut[6].aCls[0] == CSQ_NULL,
            "empty input values");
      nEmptySeen++;
    } else {
      CHECK(rc == -EDOM, "overflow: rc %d %s", rc, zE ? zE : "");
    }
    for (int j = 0; j < 7; j++) csq_vec_free(&aOut[j]);
    dev_agg_free(a);
    free(zE);
    free(p);
  }
  free(g.slm);
}

/* ---- end to end on an in-memory device ---- */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* lineitem-like rows for Q1: flag, status, qty, price, disc, tax, shipdate */
static void q1_row(int64_t r, csq_vec *v, int bNull) {
  static const char *azF[] = {"A", "N", "R"};
  static const char *azS[] = {"F", "O"};
  uint64_t x = (uint64_t)r * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  int f = (int)(x % 3), s = (int)((x >> 8) % 2);
  csq_vec_push_bytes(&v[1], CSQ_TEXT, azF[f], 1);
  csq_vec_push_bytes(&v[2], CSQ_TEXT, azS[s], 1);
  int64_t qty = 1 + (int64_t)((x >> 16) % 50);
  if (bNull && (x >> 40) % 97 == 0)
    csq_vec_push_null(&v[3]);
  else
    csq_vec_push_int(&v[3], qty);
  double price = (double)qty * (900.0 + (double)((x >> 24) % 20000) / 100.0);
  csq_vec_push_real(&v[4], price);
  csq_vec_push_real(&v[5], (double)((x >> 32) % 11) / 100.0);
  csq_vec_push_real(&v[6], (double)((x >> 36) % 9) / 100.0);
  char zDate[16];
  int day = (int)((x >> 44) % 2500);
  snprintf(zDate, sizeof(zDate), "%04d-%02d-%02d", 1992 + day / 365, 1 + (day % 365) / 31 % 12,
           1 + day % 28);
  csq_vec_push_bytes(&v[7], CSQ_TEXT, zDate, 10);
}

static int build_q1(store *st, dev_queue *q, const char *zName, int nRg, int nPer, int bNull) {
  char *zErr = NULL;
  store_txn *t;
  int rc = store_txn_begin(st, q, 1000, &t, &zErr);
  store_col aCol[7] = {{"l_returnflag", "TEXT", 0},  {"l_linestatus", "TEXT", 0},
                       {"l_quantity", "INTEGER", 0}, {"l_extendedprice", "REAL", 0},
                       {"l_discount", "REAL", 0},    {"l_tax", "REAL", 0},
                       {"l_shipdate", "TEXT", 0}};
  if (rc == 0) rc = store_txn_create_table(t, zName, 7, aCol, &zErr);
  store_table *pTab = store_txn_table(t, zName);
  csq_vec v[8];
  for (int c = 0; c < 8; c++) csq_vec_init(&v[c]);
  for (int g = 0; g < nRg && rc == 0; g++) {
    for (int c = 0; c < 8; c++) csq_vec_reset(&v[c]);
    int64_t r0 = store_txn_new_rowids(t, pTab, nPer);
    for (int i = 0; i < nPer; i++) {
      csq_vec_push_int(&v[0], r0 + i);
      q1_row(r0 + i, v, bNull);
    }
    rc = store_txn_append(t, pTab, v, 0, nPer, &zErr);
  }
  for (int c = 0; c < 8; c++) csq_vec_free(&v[c]);
  if (rc == 0)
    rc = store_txn_commit(t, &zErr);
  else
    store_txn_rollback(t);
  CHECK(rc == 0, "build %s: %s", zName, zErr ? zErr : "");
  free(zErr);
  return rc;
}

/* Q1: SELECT flag, status, sum(qty), sum(price), sum(price*(1-disc)),
** sum(price*(1-disc)*(1+tax)), avg(qty), avg(price), avg(disc), count(*)
** WHERE shipdate <= '1998-09-02' GROUP BY flag, status. */
static uint8_t *q1_prog(size_t *pn) {
  csq_pb *b = csq_pb_new();
  int sF = csq_pb_input(b, 1), sS = csq_pb_input(b, 2), sQ = csq_pb_input(b, 3),
      sP = csq_pb_input(b, 4), sD = csq_pb_input(b, 5), sT = csq_pb_input(b, 6),
      sDate = csq_pb_input(b, 7);
  csq_pb_term(b, CSQ_OP_LE, 0, sDate, csq_pb_const_bytes(b, CSQ_TEXT, "1998-09-02", 10), 0, 0);
  int one = csq_pb_expr_const(b, csq_pb_const_int(b, 1));
  int eQ = csq_pb_expr_col(b, sQ), eP = csq_pb_expr_col(b, sP), eD = csq_pb_expr_col(b, sD),
      eT = csq_pb_expr_col(b, sT);
  int eDisc = csq_pb_expr_arith(b, CSQ_EX_MUL, eP, csq_pb_expr_arith(b, CSQ_EX_SUB, one, eD));
  int eCharge = csq_pb_expr_arith(b, CSQ_EX_MUL, eDisc, csq_pb_expr_arith(b, CSQ_EX_ADD, one, eT));
  csq_pb_group(b, csq_pb_expr_col(b, sF));
  csq_pb_group(b, csq_pb_expr_col(b, sS));
  csq_pb_agg(b, CSQ_AGG_SUM, 0, eQ);
  csq_pb_agg(b, CSQ_AGG_SUM, 0, eP);
  csq_pb_agg(b, CSQ_AGG_SUM, 0, eDisc);
  csq_pb_agg(b, CSQ_AGG_SUM, 0, eCharge);
  csq_pb_agg(b, CSQ_AGG_AVG, 0, eQ);
  csq_pb_agg(b, CSQ_AGG_AVG, 0, eP);
  csq_pb_agg(b, CSQ_AGG_AVG, 0, eD);
  csq_pb_agg(b, CSQ_AGG_COUNT_STAR, 0, -1);
  uint8_t *p;
  csq_pb_finish(b, &p, pn);
  csq_pb_free(b);
  return p;
}

static const char *zQ1 =
    "SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice), "
    "sum(l_extendedprice*(1-l_discount)), sum(l_extendedprice*(1-l_discount)*(1+l_tax)), "
    "avg(l_quantity), avg(l_extendedprice), avg(l_discount), count(*) FROM li "
    "WHERE l_shipdate <= '1998-09-02' GROUP BY l_returnflag, l_linestatus";

static void test_end_to_end(void) {
  dev_options o;
  dev_options_default(&o);
  o.nEngines = 2;
  dev_device *pDev;
  char *zErr = NULL;
  if (dev_open(":memory:", &o, &pDev, &zErr)) {
    printf("note: no in-memory device (%s); end-to-end part skipped\n", zErr ? zErr : "?");
    free(zErr);
    return;
  }
  dev_queue *q;
  dev_queue_open(pDev, &q);
  store *st;
  CHECK(store_open(pDev, q, 1, &st, &zErr) == 0, "store_open");
  int nRg = 6, nPer = 7000;
  build_q1(st, q, "li", nRg, nPer, 1);
  store_snap *snap;
  store_snapshot(st, q, &snap, &zErr);
  store_table *pTab = store_snap_table(snap, "li");
  /* the same rows in SQLite */
  sqlite3_exec(
      db,
      "DROP TABLE IF EXISTS li; CREATE TABLE li(l_returnflag TEXT, l_linestatus TEXT, "
      "l_quantity INTEGER, l_extendedprice REAL, l_discount REAL, l_tax REAL, l_shipdate TEXT)",
      0, 0, 0);
  sqlite3_exec(db, "BEGIN", 0, 0, 0);
  sqlite3_stmt *ins;
  sqlite3_prepare_v2(db, "INSERT INTO li VALUES(?,?,?,?,?,?,?)", -1, &ins, 0);
  csq_vec v[8];
  for (int c = 0; c < 8; c++) csq_vec_init(&v[c]);
  for (int64_t r = 1; r <= (int64_t)nRg * nPer; r++) {
    for (int c = 0; c < 8; c++) csq_vec_reset(&v[c]);
    q1_row(r, v, 1);
    for (int c = 1; c < 8; c++) {
      if (v[c].aCls[0] == CSQ_TEXT)
        sqlite3_bind_text(ins, c, csq_vec_bytes(&v[c], 0), (int)v[c].aLen[0], SQLITE_TRANSIENT);
      else if (v[c].aCls[0] == CSQ_INT)
        sqlite3_bind_int64(ins, c, v[c].aVal[0].i);
      else if (v[c].aCls[0] == CSQ_REAL)
        sqlite3_bind_double(ins, c, v[c].aVal[0].r);
      else
        sqlite3_bind_null(ins, c);
    }
    sqlite3_step(ins);
    sqlite3_reset(ins);
  }
  sqlite3_finalize(ins);
  sqlite3_exec(db, "COMMIT", 0, 0, 0);
  for (int c = 0; c < 8; c++) csq_vec_free(&v[c]);

  size_t n;
  uint8_t *p = q1_prog(&n);
  dev_agg *a = NULL;
  uint64_t h0 = dev_queue_stats(q)->bytes_to_host;
  int rc = dev_agg_open(q, st, pTab, pTab->apRg, pTab->nRg, p, n, &a, &zErr);
  CHECK(rc == 0, "dev_agg_open: %s", zErr ? zErr : "");
  uint64_t nToHost = dev_queue_stats(q)->bytes_to_host - h0;
  if (rc == 0) {
    csq_vec aOut[10];
    for (int j = 0; j < 10; j++) csq_vec_init(&aOut[j]);
    uint32_t nGot;
    CHECK(dev_agg_finish(a, aOut, &nGot, &zErr) == 0, "finish");
    sqlite3_stmt *s;
    sqlite3_prepare_v2(db, zQ1, -1, &s, 0);
    int nWant = 0, nBad = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
      nWant++;
      uint32_t r = 0;
      while (r < nGot && !(memcmp(csq_vec_bytes(&aOut[0], r), sqlite3_column_text(s, 0), 1) == 0 &&
                           memcmp(csq_vec_bytes(&aOut[1], r), sqlite3_column_text(s, 1), 1) == 0))
        r++;
      if (r == nGot) {
        nBad++;
        continue;
      }
      for (int j = 2; j < 10; j++) {
        if (sqlite3_column_type(s, j) == SQLITE_INTEGER)
          nBad += aOut[j].aCls[r] != CSQ_INT || aOut[j].aVal[r].i != sqlite3_column_int64(s, j);
        else {
          double w = sqlite3_column_double(s, j);
          nBad += aOut[j].aCls[r] != CSQ_REAL || fabs(aOut[j].aVal[r].r - w) > 1e-9 * fabs(w);
        }
      }
    }
    sqlite3_finalize(s);
    CHECK(nWant == (int)nGot && nWant == 6 && nBad == 0, "Q1 end to end: %u groups vs %d, %d bad",
          nGot, nWant, nBad);
    printf("end to end: Q1 over %d rows in %d row groups: %u groups, %llu bytes to the host\n",
           nRg * nPer, nRg, nGot, (unsigned long long)nToHost);
    for (int j = 0; j < 10; j++) csq_vec_free(&aOut[j]);
  }
  dev_agg_free(a);
  /* a NOT_NUMERIC fault surfaces as -EDOM */
  {
    csq_pb *b = csq_pb_new();
    int sF = csq_pb_input(b, 1);
    csq_pb_agg(b, CSQ_AGG_SUM, 0, csq_pb_expr_col(b, sF));
    uint8_t *p2;
    size_t n2;
    csq_pb_finish(b, &p2, &n2);
    csq_pb_free(b);
    free(zErr);
    zErr = NULL;
    rc = dev_agg_open(q, st, pTab, pTab->apRg, pTab->nRg, p2, n2, &a, &zErr);
    CHECK(rc == -EDOM && a == NULL, "sum(text): rc %d %s", rc, zErr ? zErr : "");
    free(p2);
  }
  store_snap_unref(snap);

  if (getenv("CSQ_AGG_BENCH")) {
    int nRgB = 92, nPerB = 65536; /* 6.03M rows */
    double t0 = now();
    build_q1(st, q, "big", nRgB, nPerB, 0);
    double t1 = now();
    store_snapshot(st, q, &snap, &zErr);
    pTab = store_snap_table(snap, "big");
    dev_stats *ps = dev_queue_stats(q);
    for (int it = 0; it < 3; it++) {
      uint64_t e0 = ps->engine_ns, h1 = ps->bytes_to_host, m0 = ps->media_bytes_read;
      double t2 = now();
      rc = dev_agg_open(q, st, pTab, pTab->apRg, pTab->nRg, p, n, &a, &zErr);
      double t3 = now();
      CHECK(rc == 0, "bench: %s", zErr ? zErr : "");
      uint64_t nRows = (uint64_t)nRgB * nPerB;
      double eng = (ps->engine_ns - e0) / 1e9;
      printf("bench Q1 (2 engines): %llu rows (built in %.1fs): wall %.3fs (%.1f M rows/s), engine "
             "time %.3fs (%.3fs per engine, %.1f M rows/s per engine), media %.1f MB, to host %.1f "
             "KB, %llu groups\n",
             (unsigned long long)nRows, t1 - t0, t3 - t2, nRows / (t3 - t2) / 1e6, eng, eng / 2,
             nRows / eng / 1e6, (ps->media_bytes_read - m0) / 1e6, (ps->bytes_to_host - h1) / 1e3,
             (unsigned long long)(a ? dev_agg_ngroups(a) : 0));
      dev_agg_free(a);
    }
    store_snap_unref(snap);
  }
  free(p);
  free(zErr);
  store_unref(st);
  dev_queue_close(q);
  dev_unref(pDev);
}

int main(int argc, char **argv) {
  rng = getenv("CSQ_AGG_SEED") ? strtoull(getenv("CSQ_AGG_SEED"), 0, 0) : 0x13198A2E03707344ull;
  aData = malloc(sizeof(*aData) * MAXROW);
  aDel = malloc(sizeof(int) * MAXROW);
  sqlite3_open(":memory:", &db);
  int nRound = argc > 1 ? atoi(argv[1]) : 60;
  test_verifier();
  test_edges();
  test_random(nRound, 40);
  int nEnc = 0;
  for (int e = 1; e <= 8; e++) nEnc += aEncSeen[e];
  for (int e = 1; e <= 8; e++)
    if (!aEncSeen[e]) printf("encoding %d not seen\n", e);
  printf("random: %d programs, %d groups compared, %d overflow errors agreed, %d NOT_NUMERIC "
         "faults, encodings %d of 8\n",
         nProgs, nGroupsSeen, nOverflowSeen, nNotNumSeen, nEnc);
  CHECK(nEnc == 8, "every encoding covered");
  /* the same random programs, merging on the device across row groups */
  int nProgsBefore = nProgs;
  bAccMode = 1;
  test_random(nRound / 2 + 1, 40);
  bAccMode = 0;
  printf("accumulate: %d programs\n", nProgs - nProgsBefore);
  test_many_groups();
  test_end_to_end();
  sqlite3_close(db);
  free(aData);
  free(aDel);
  printf("%d checks, %d failed\n", nCheck, nFail);
  return nFail ? 1 : 0;
}
