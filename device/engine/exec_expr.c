/*
** device/engine/exec_expr.c - a grouped program's expressions (program.h,
** AGGREGATION) over one run of rows: columns, constants, SQLite arithmetic
** (vectorised where no row overflows or is NaN) and CASE, into ex_ev
** vectors.
*/
#include "device/engine/exec_int.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

/* After per-row classes were written: make the vector uniform if it is. */
static void ev_settle(ex_ev *e, uint32_t n) {
  uint8_t m = 0;
  for (uint32_t k = 0; k < n; k++) m |= (uint8_t)(1u << e->aCls[k]);
  e->cls = mask_single(m) ? (uint8_t)__builtin_ctz(m) : n ? 0 : CSQ_NULL;
}

/* A bound of mag_of() over an integer column's values: a frame of
** reference's values lie in [ref, ref + 2^width - 1], unless that range
** leaves int64 (where the values wrap). UINT64_MAX if unknown. */
static uint64_t col_mag(const ex_col *c) {
  if (c->d.enc == CSQ_ENC_CONST) return mag_of(c->d.iRef);
  if (c->d.enc != CSQ_ENC_INT_FOR || c->d.width >= 63) return UINT64_MAX;
  __int128 hi = (__int128)c->d.iRef + (((__int128)1 << c->d.width) - 1);
  if (hi > INT64_MAX) return UINT64_MAX;
  uint64_t a = mag_of(c->d.iRef), b = mag_of((int64_t)hi);
  return a > b ? a : b;
}

/* Column values for rows aSel[0..n) of aligned batch [b0, b0+nb). */
static void ev_col(ex_ev *e, ex_col *c, uint32_t b0, uint32_t nb, const uint32_t *aSel,
                   uint32_t n) {
  uint32_t k;
  if (c->bAllNull || (c->kind == K_CONSTX && c->cval.cls == CSQ_NULL)) {
    e->cls = CSQ_NULL;
    return;
  }
  if (c->kind == K_INT || c->kind == K_REAL) {
    int bDense = n > 0 && aSel[n - 1] - aSel[0] == n - 1; /* rows aSel[0].. in a run */
    if (c->kind == K_INT && c->d.enc == CSQ_ENC_INT_FOR && c->b0 != b0 && n < nb / 4) {
      /* few rows survived: unpack just theirs */
      uint64_t *u = (uint64_t *)e->aI, ref = (uint64_t)c->d.iRef;
      ex_col_sel_codes(c, b0, aSel, n, u);
      for (k = 0; k < n; k++) u[k] += ref;
    } else if (c->kind == K_INT) {
      ex_col_ints(c, b0, nb);
      if (bDense) /* read in place: nothing writes a column's vector */
        e->aI = c->aI + (aSel[0] - b0);
      else
        ex_gather8(e->aI, c->aI, aSel, n, b0);
    } else if (c->d.enc == CSQ_ENC_REAL_DEC && c->b0 != b0 && n < nb / 4) {
      /* few rows of the batch survived the filter: convert just those */
      uint64_t u[BATCH];
      ex_col_sel_codes(c, b0, aSel, n, u);
      csq_dec_values(u, n, c->d.iRef, c->d.nAux, e->aR);
    } else {
      ex_col_reals(c, b0, nb);
      if (bDense)
        e->aR = c->aR + (aSel[0] - b0);
      else
        ex_gather8(e->aR, c->aR, aSel, n, b0);
    }
    uint8_t cls = c->kind == K_INT ? CSQ_INT : CSQ_REAL;
    e->cls = cls;
    if (cls == CSQ_INT) {
      e->mag = col_mag(c);
      e->bNonNeg = e->mag != UINT64_MAX && c->d.iRef >= 0; /* FOR: values >= ref */
    }
    if (c->d.aNull) {
      int bNull = 0;
      for (k = 0; k < n; k++) {
        uint8_t x = col_null(c, aSel[k]) ? CSQ_NULL : cls;
        e->aCls[k] = x;
        bNull |= x == CSQ_NULL;
      }
      if (bNull) ev_settle(e, n);
    }
    return;
  }
  ex_val v;
  memset(&v, 0, sizeof(v));
  for (k = 0; k < n; k++) {
    ex_col_get(c, aSel[k], &v);
    ev_put(e, k, &v);
  }
  ev_settle(e, n);
}

static void ev_const(ex_ev *e, const csq_pconst *p, uint32_t n) {
  e->cls = p->cls;
  uint32_t k;
  switch (p->cls) { /* a uniform vector: only its class's array is read */
  case CSQ_INT:     /* and as a REAL, converted once for real arithmetic */
    for (k = 0; k < n; k++) e->aI[k] = p->i;
    for (k = 0; k < n; k++) e->aR[k] = (double)p->i;
    e->bAsReal = 1;
    break;
  case CSQ_REAL:
    for (k = 0; k < n; k++) e->aR[k] = p->r;
    break;
  case CSQ_TEXT:
  case CSQ_BLOB:
    for (k = 0; k < n; k++) {
      e->aZ[k] = p->z;
      e->aN[k] = p->len;
    }
    break;
  default:
    break;
  }
}

/* One row of SQLite arithmetic on non-NULL numbers: *po = x op y. Returns
** 0, or 1 when the result is NULL. */
static int arith_one(int op, const ex_val *x, const ex_val *y, ex_val *po) {
  if (x->cls == CSQ_INT && y->cls == CSQ_INT) {
    int64_t a = x->i, b = y->i, r;
    int bOv = 0;
    switch (op) {
    case CSQ_EX_ADD:
      bOv = __builtin_add_overflow(a, b, &r);
      break;
    case CSQ_EX_SUB:
      bOv = __builtin_sub_overflow(a, b, &r);
      break;
    case CSQ_EX_MUL:
      bOv = __builtin_mul_overflow(a, b, &r);
      break;
    default:
      if (b == 0) return 1;
      bOv = b == -1 && a == INT64_MIN;
      r = bOv ? 0 : a / b;
      break;
    }
    if (!bOv) {
      po->cls = CSQ_INT;
      po->i = r;
      return 0;
    }
  }
  double a = x->cls == CSQ_INT ? (double)x->i : x->r;
  double b = y->cls == CSQ_INT ? (double)y->i : y->r, r;
  switch (op) {
  case CSQ_EX_ADD:
    r = a + b;
    break;
  case CSQ_EX_SUB:
    r = a - b;
    break;
  case CSQ_EX_MUL:
    r = a * b;
    break;
  default:
    if (b == 0) return 1;
    r = a / b;
    break;
  }
  if (isnan(r)) return 1;
  po->cls = CSQ_REAL;
  po->r = r;
  return 0;
}

/* r = a op b (ADD, SUB or MUL) over n doubles; 1 if some result is NaN. r
** may be a or b (each lane is read before it is written). The NaN test
** keeps the compiler from vectorising the plain loop, so lanes go by hand:
** four at a time with AVX, else two with SSE2 (every x86-64). */
#define REAL_OP_LOOP(OPV, OPS)                                                                     \
  do {                                                                                             \
    REAL_OP_SSE2(OPV);                                                                             \
    for (; k < n; k++) {                                                                           \
      double v = a[k] OPS b[k];                                                                    \
      r[k] = v;                                                                                    \
      bad |= v != v;                                                                               \
    }                                                                                              \
  } while (0)
#ifdef __SSE2__
#define REAL_OP_SSE2(OPV)                                                                          \
  do {                                                                                             \
    __m128d m = _mm_setzero_pd();                                                                  \
    for (; k + 2 <= n; k += 2) {                                                                   \
      __m128d v = OPV(_mm_loadu_pd(a + k), _mm_loadu_pd(b + k));                                   \
      _mm_storeu_pd(r + k, v);                                                                     \
      m = _mm_or_pd(m, _mm_cmpunord_pd(v, v));                                                     \
    }                                                                                              \
    bad = _mm_movemask_pd(m) != 0;                                                                 \
  } while (0)
#else
#define REAL_OP_SSE2(OPV) (void)0
#endif
#if defined(__x86_64__) && defined(__GNUC__)
/* The same, four lanes at a time with AVX; returns the lanes done (a
** multiple of 4) and sets *pBad. */
#define REAL_OP_AVX(OPV)                                                                           \
  do {                                                                                             \
    for (; k + 4 <= n; k += 4) {                                                                   \
      __m256d v = OPV(_mm256_loadu_pd(a + k), _mm256_loadu_pd(b + k));                             \
      _mm256_storeu_pd(r + k, v);                                                                  \
      m = _mm256_or_pd(m, _mm256_cmp_pd(v, v, _CMP_UNORD_Q));                                      \
    }                                                                                              \
  } while (0)
__attribute__((target("avx"))) static uint32_t real_op_avx(int op, const double *a, const double *b,
                                                           double *r, uint32_t n, int *pBad) {
  uint32_t k = 0;
  __m256d m = _mm256_setzero_pd();
  switch (op) {
  case CSQ_EX_ADD:
    REAL_OP_AVX(_mm256_add_pd);
    break;
  case CSQ_EX_SUB:
    REAL_OP_AVX(_mm256_sub_pd);
    break;
  default:
    REAL_OP_AVX(_mm256_mul_pd);
    break;
  }
  *pBad = _mm256_movemask_pd(m) != 0;
  return k;
}
#undef REAL_OP_AVX
#endif

static int real_op(int op, const double *a, const double *b, double *r, uint32_t n) {
  uint32_t k = 0;
  int bad = 0;
#if defined(__x86_64__) && defined(__GNUC__)
  if (n >= 16 && __builtin_cpu_supports("avx")) {
    int badAvx;
    k = real_op_avx(op, a, b, r, n, &badAvx);
    if (badAvx) return 1;
    if (k == n) return 0;
    a += k, b += k, r += k, n -= k;
    k = 0;
  }
#endif
  switch (op) {
  case CSQ_EX_ADD:
    REAL_OP_LOOP(_mm_add_pd, +);
    break;
  case CSQ_EX_SUB:
    REAL_OP_LOOP(_mm_sub_pd, -);
    break;
  default:
    REAL_OP_LOOP(_mm_mul_pd, *);
    break;
  }
  return bad;
}
#undef REAL_OP_LOOP
#undef REAL_OP_SSE2

/* o = x op y over n rows. 0 or CSQ_FAULT_NOT_NUMERIC. */
static int ev_arith(int op, const ex_ev *x, const ex_ev *y, ex_ev *o, uint32_t n) {
  uint32_t k;
  if (x->cls == CSQ_NULL || y->cls == CSQ_NULL) {
    o->cls = CSQ_NULL;
    return 0;
  }
  if (x->cls == CSQ_INT && y->cls == CSQ_INT) {
    const int64_t *a = x->aI, *b = y->aI;
    int64_t *r = o->aI;
    int bad = 0;
    switch (op) {
    case CSQ_EX_ADD:
      for (k = 0; k < n; k++) bad |= __builtin_add_overflow(a[k], b[k], &r[k]);
      break;
    case CSQ_EX_SUB:
      for (k = 0; k < n; k++) bad |= __builtin_sub_overflow(a[k], b[k], &r[k]);
      break;
    case CSQ_EX_MUL:
      for (k = 0; k < n; k++) bad |= __builtin_mul_overflow(a[k], b[k], &r[k]);
      break;
    default:
      for (k = 0; k < n; k++) {
        int bk = b[k] == 0 || (b[k] == -1 && a[k] == INT64_MIN);
        bad |= bk;
        r[k] = bk ? 0 : a[k] / b[k];
      }
      break;
    }
    if (!bad) {
      o->cls = CSQ_INT;
      return 0;
    }
  } else if (csq_value_is_num(x->cls) && csq_value_is_num(y->cls)) {
    double *r = o->aR;
    const double *a = x->aR, *b = y->aR;
    if (x->cls == CSQ_INT && x->bAsReal) {
      a = x->aR;
    } else if (x->cls == CSQ_INT) {
      for (k = 0; k < n; k++) r[k] = (double)x->aI[k];
      a = r;
    }
    if (y->cls == CSQ_INT && y->bAsReal) b = y->aR;
    int bad = 0; /* a may be r itself: every loop below reads a[k] before writing r[k] */
    if (y->cls == CSQ_INT && !y->bAsReal) {
      switch (op) {
      case CSQ_EX_ADD:
        for (k = 0; k < n; k++) r[k] = a[k] + (double)y->aI[k];
        break;
      case CSQ_EX_SUB:
        for (k = 0; k < n; k++) r[k] = a[k] - (double)y->aI[k];
        break;
      case CSQ_EX_MUL:
        for (k = 0; k < n; k++) r[k] = a[k] * (double)y->aI[k];
        break;
      default:
        for (k = 0; k < n; k++) {
          double d = (double)y->aI[k];
          bad |= d == 0;
          r[k] = a[k] / d;
        }
        break;
      }
    } else {
      /* a NaN result (Inf - Inf, 0 * Inf) is NULL: checked in the same pass */
      switch (op) {
      case CSQ_EX_ADD:
      case CSQ_EX_SUB:
      case CSQ_EX_MUL:
        bad = real_op(op, a, b, r, n);
        break;
      default:
        for (k = 0; k < n; k++) {
          double v = a[k] / b[k];
          bad |= b[k] == 0;
          r[k] = v;
          bad |= v != v;
        }
        break;
      }
    }
    if (y->cls == CSQ_INT && !y->bAsReal)
      for (k = 0; k < n; k++) bad |= r[k] != r[k]; /* NaN */
    if (!bad) {
      o->cls = CSQ_REAL;
      return 0;
    }
  }
  /* the general case, row by row (also redoes the fast paths' special rows) */
  ex_val vx, vy, vo;
  memset(&vo, 0, sizeof(vo));
  memset(&vx, 0, sizeof(vx));
  memset(&vy, 0, sizeof(vy));
  for (k = 0; k < n; k++) {
    ev_get(x, k, &vx);
    ev_get(y, k, &vy);
    vo.cls = CSQ_NULL;
    if (vx.cls != CSQ_NULL && vy.cls != CSQ_NULL) {
      if (!csq_value_is_num(vx.cls) || !csq_value_is_num(vy.cls)) return CSQ_FAULT_NOT_NUMERIC;
      if (arith_one(op, &vx, &vy, &vo)) vo.cls = CSQ_NULL;
    }
    o->aCls[k] = vo.cls;
    o->aI[k] = vo.i;
    o->aR[k] = vo.r;
  }
  ev_settle(o, n);
  return 0;
}

/* o = the codes of a's values in key code map m[0..nM) (codemap.h): an
** INTEGER per row, NULL where a value is no key of the map. */
static void ev_map(const ex_ev *a, const uint8_t *m, uint32_t nM, ex_ev *o, uint32_t n) {
  uint32_t k, nNull = 0;
  if (a->cls == CSQ_NULL) {
    o->cls = CSQ_NULL;
    return;
  }
  if (a->cls == CSQ_INT) {
    int64_t base = (int64_t)csq_le64(m);
    uint64_t span = (nM - CSQ_CODEMAP_HDR) / 4;
    const uint8_t *c = m + CSQ_CODEMAP_HDR;
    for (k = 0; k < n; k++) {
      uint64_t u = (uint64_t)a->aI[k] - (uint64_t)base;
      uint32_t code = u < span ? csq_le32(c + 4 * u) : 0;
      o->aI[k] = code;
      nNull += code == 0;
    }
  } else {
    ex_val v;
    memset(&v, 0, sizeof(v));
    for (k = 0; k < n; k++) {
      if (a->cls == CSQ_REAL) {
        v.cls = CSQ_REAL;
        v.r = a->aR[k];
      } else
        ev_get(a, k, &v);
      uint32_t code = v.cls == CSQ_INT    ? csq_codemap_int(m, nM, v.i)
                      : v.cls == CSQ_REAL ? csq_codemap_real(m, nM, v.r)
                                          : 0;
      o->aI[k] = code;
      nNull += code == 0;
    }
  }
  o->cls = CSQ_INT;
  o->mag = UINT32_MAX;
  o->bNonNeg = 1;
  if (nNull == 0) return;
  for (k = 0; k < n; k++) o->aCls[k] = o->aI[k] ? CSQ_INT : CSQ_NULL;
  ev_settle(o, n);
}

/* CASE WHEN aM[k] THEN t ELSE f. */
static void ev_case(const uint8_t *aM, const ex_ev *t, const ex_ev *f, ex_ev *o, uint32_t n) {
  ex_val v;
  memset(&v, 0, sizeof(v));
  for (uint32_t k = 0; k < n; k++) {
    ev_get(aM[k] ? t : f, k, &v);
    ev_put(o, k, &v);
  }
  ev_settle(o, n);
}

/* Evaluate every instruction over rows aSel[0..n) of batch [b0, b0+nb). */
int ex_ev_all(const ex_prog *ep, ex_col *aCol, uint8_t **apCondDict, ex_ev *aEv, uint8_t *aM,
              const uint8_t *aNeed, uint32_t b0, uint32_t nb, const uint32_t *aSel, uint32_t n) {
  const csq_prog *pp = &ep->p;
  for (int i = 0; i < pp->nExpr; i++) {
    const csq_pexpr *x = &pp->aExpr[i];
    if (!aNeed[i]) continue;
    ex_ev *e = &aEv[i];
    int rc = 0;
    e->bAsReal = 0;
    e->aI = e->aIOwn;
    e->aR = e->aROwn;
    e->mag = UINT64_MAX;
    e->bNonNeg = 0;
    switch (x->op) {
    case CSQ_EX_COL:
      ev_col(e, &aCol[x->a], b0, nb, aSel, n);
      break;
    case CSQ_EX_CONST: /* the same in every run: fill its vectors once */
      if (!e->bFilled) ev_const(e, &pp->aConst[x->a], BATCH);
      e->bFilled = 1;
      e->cls = pp->aConst[x->a].cls;
      e->bAsReal = e->cls == CSQ_INT;
      if (e->cls == CSQ_INT) {
        e->mag = mag_of(pp->aConst[x->a].i);
        e->bNonNeg = pp->aConst[x->a].i >= 0;
      }
      break;
    case CSQ_EX_BPF: /* a user's program: an INTEGER per row, never NULL */
      rc = ex_bpf_values(&ep->aExprT[i], aCol, b0, nb, aSel, n, e->aI);
      e->cls = CSQ_INT;
      break;
    case CSQ_EX_NEG: { /* 0 - a, as SQLite computes it */
      const ex_ev *a = &aEv[x->a];
      if (a->cls == CSQ_NULL) {
        e->cls = CSQ_NULL;
        break;
      }
      if (a->cls == CSQ_INT) {
        int bad = 0;
        for (uint32_t k = 0; k < n; k++)
          bad |= __builtin_sub_overflow((int64_t)0, a->aI[k], &e->aI[k]);
        if (!bad) {
          e->cls = CSQ_INT;
          break;
        }
      } else if (a->cls == CSQ_REAL) {
        for (uint32_t k = 0; k < n; k++) e->aR[k] = 0.0 - a->aR[k];
        e->cls = CSQ_REAL;
        break;
      }
      ex_val v0, va, vo;
      memset(&v0, 0, sizeof(v0));
      memset(&va, 0, sizeof(va));
      memset(&vo, 0, sizeof(vo));
      v0.cls = CSQ_INT;
      for (uint32_t k = 0; k < n; k++) {
        ev_get(a, k, &va);
        vo.cls = CSQ_NULL;
        if (va.cls != CSQ_NULL) {
          if (!csq_value_is_num(va.cls)) return CSQ_FAULT_NOT_NUMERIC;
          if (arith_one(CSQ_EX_SUB, &v0, &va, &vo)) vo.cls = CSQ_NULL;
        }
        e->aCls[k] = vo.cls;
        e->aI[k] = vo.i;
        e->aR[k] = vo.r;
      }
      ev_settle(e, n);
      break;
    }
    case CSQ_EX_MAP: {
      const csq_pconst *m = &pp->aConst[x->b];
      ev_map(&aEv[x->a], m->z, m->len, e, n);
      break;
    }
    case CSQ_EX_CASE: {
      const ex_term *et = &ep->aCondT[x->a];
      rc = ex_eval_term(et, &aCol[et->t.slot], b0, nb, aSel, n, aM, &apCondDict[x->a]);
      if (rc) return rc;
      ev_case(aM, &aEv[x->b], &aEv[x->c], e, n);
      break;
    }
    default:
      rc = ev_arith(x->op, &aEv[x->a], &aEv[x->b], e, n);
      break;
    }
    if (rc) return rc;
  }
  return 0;
}
