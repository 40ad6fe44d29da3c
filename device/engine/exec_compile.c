/*
** device/engine/exec_compile.c - xVerify and xFree of the executor: a program
** verified (device/format/program.h), then compiled into a read-only ex_prog
** (ex_term per term: an integer plan, a real plan, a sorted IN list, a
** compiled pattern) that several engines may run at once.
*/
#include "device/engine/exec_int.h"

static int cmp_const_sort(const void *x, const void *y, void *pTerm) {
  ex_val v;
  const_val((const csq_pconst *)x, &v);
  return cmp_vk(&v, (const csq_pconst *)y, ((const ex_term *)pTerm)->coll);
}
static int cmp_i64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return a < b ? -1 : a > b;
}

/* Integer interval of "x op k" over int64 x: sets *pLo, *pHi, returns 0 if
** empty. op is LT LE GT GE EQ. */
static int int_interval(int op, const csq_pconst *k, int64_t *pLo, int64_t *pHi) {
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  if (k->cls == CSQ_NULL) return 0;
  if (k->cls == CSQ_TEXT || k->cls == CSQ_BLOB) {
    /* every integer is below text and blobs */
    *pLo = lo;
    *pHi = hi;
    return op == CSQ_OP_LT || op == CSQ_OP_LE;
  }
  if (k->cls == CSQ_INT) {
    int64_t c = k->i;
    switch (op) {
    case CSQ_OP_EQ:
      lo = hi = c;
      break;
    case CSQ_OP_LT:
      if (c == INT64_MIN) return 0;
      hi = c - 1;
      break;
    case CSQ_OP_LE:
      hi = c;
      break;
    case CSQ_OP_GT:
      if (c == INT64_MAX) return 0;
      lo = c + 1;
      break;
    case CSQ_OP_GE:
      lo = c;
      break;
    }
  } else {
    double r = k->r;
    int bBelow = r < -9223372036854775808.0, bAbove = r >= 9223372036854775808.0;
    int64_t f = 0;
    int bInt = 0;
    if (!bBelow && !bAbove) {
      double fl = floor(r);
      f = (int64_t)fl;
      bInt = fl == r;
    }
    switch (op) {
    case CSQ_OP_EQ:
      if (bBelow || bAbove || !bInt) return 0;
      lo = hi = f;
      break;
    case CSQ_OP_LT: /* x < r */
      if (bBelow) return 0;
      if (bAbove) break;
      if (bInt) {
        if (f == INT64_MIN) return 0;
        hi = f - 1;
      } else
        hi = f;
      break;
    case CSQ_OP_LE:
      if (bBelow) return 0;
      if (!bAbove) hi = f;
      break;
    case CSQ_OP_GT: /* x > r */
      if (bAbove) return 0;
      if (!bBelow) lo = f + 1;
      break;
    case CSQ_OP_GE:
      if (bAbove) return 0;
      if (!bBelow) lo = bInt ? f : f + 1;
      break;
    }
  }
  *pLo = lo;
  *pHi = hi;
  return lo <= hi;
}

static int double_exact(const csq_pconst *k, double *pr) {
  if (k->cls == CSQ_REAL) {
    *pr = k->r;
    return 1;
  }
  if (k->cls == CSQ_INT && k->i >= -(1ll << 53) && k->i <= (1ll << 53)) {
    *pr = (double)k->i;
    return 1;
  }
  return 0;
}

static int term_compile(ex_prog *ep, ex_term *et, const csq_pterm *t, char *zErr, size_t nErr) {
  static const csq_pconst kNull = {CSQ_NULL, 0, 0, 0, NULL};
  const csq_prog *p = &ep->p;
  memset(et, 0, sizeof(*et));
  et->t = *t;
  if (t->op == CSQ_OP_COLCMP) {
    /* k0 is an input slot, not a constant: no plan over constants */
    et->a = et->b = &kNull;
    et->coll = t->flags & CSQ_TF_COLL_MASK;
    et->ip = IP_GENERIC;
    return 0;
  }
  et->a = &p->aConst[t->op == CSQ_OP_ISNULL || t->op == CSQ_OP_NOTNULL ? 0 : t->k0];
  if (p->nConst == 0) et->a = &kNull;
  et->b = t->op == CSQ_OP_BETWEEN ? &p->aConst[t->k1] : et->a;
  et->coll = t->flags & CSQ_TF_COLL_MASK;
  et->bNot = (t->flags & CSQ_TF_NOT) != 0;
  if (t->op == CSQ_OP_BPF) {
    et->ip = IP_GENERIC; /* no plan over codes: the program sees every row */
    return ex_bpf_compile(ep, et, zErr, nErr);
  }
  switch (t->op) {
  case CSQ_OP_ISNULL:
    et->nullRes = 1;
    break;
  case CSQ_OP_IS:
    et->nullRes = et->a->cls == CSQ_NULL;
    break;
  case CSQ_OP_ISNOT:
    et->nullRes = et->a->cls != CSQ_NULL;
    break;
  default:
    et->nullRes = 0;
    break;
  }
  /* integer plan */
  et->ip = IP_RANGE;
  int64_t lo = 0, hi = 0, lo2 = 0, hi2 = 0;
  int ok, ok2;
  switch (t->op) {
  case CSQ_OP_ISNULL:
    et->bEmpty = 1;
    break;
  case CSQ_OP_NOTNULL:
    et->lo = INT64_MIN;
    et->hi = INT64_MAX;
    break;
  case CSQ_OP_EQ:
  case CSQ_OP_LT:
  case CSQ_OP_LE:
  case CSQ_OP_GT:
  case CSQ_OP_GE:
  case CSQ_OP_IS:
    ok = int_interval(t->op == CSQ_OP_IS ? CSQ_OP_EQ : t->op, et->a, &et->lo, &et->hi);
    et->bEmpty = !ok;
    break;
  case CSQ_OP_NE:
  case CSQ_OP_ISNOT:
    if (et->a->cls == CSQ_NULL) {
      et->bEmpty = 1;
      et->bNeg = t->op == CSQ_OP_ISNOT; /* NOT empty = every value */
    } else {
      ok = int_interval(CSQ_OP_EQ, et->a, &et->lo, &et->hi);
      et->bEmpty = !ok;
      et->bNeg = 1;
    }
    break;
  case CSQ_OP_BETWEEN:
    if (!et->bNot) {
      ok = int_interval(CSQ_OP_GE, et->a, &lo, &hi);
      ok2 = int_interval(CSQ_OP_LE, et->b, &lo2, &hi2);
      et->lo = lo > lo2 ? lo : lo2;
      et->hi = hi < hi2 ? hi : hi2;
      et->bEmpty = !ok || !ok2 || et->lo > et->hi;
    } else if (et->a->cls != CSQ_NULL && et->b->cls != CSQ_NULL) {
      /* NOT (x >= a AND x <= b) with both known = complement of [a, b] */
      ok = int_interval(CSQ_OP_GE, et->a, &lo, &hi);
      ok2 = int_interval(CSQ_OP_LE, et->b, &lo2, &hi2);
      et->lo = lo > lo2 ? lo : lo2;
      et->hi = hi < hi2 ? hi : hi2;
      et->bEmpty = !ok || !ok2 || et->lo > et->hi;
      et->bNeg = 1;
    } else if (et->a->cls != CSQ_NULL) {
      ok = int_interval(CSQ_OP_LT, et->a, &et->lo, &et->hi);
      et->bEmpty = !ok;
    } else if (et->b->cls != CSQ_NULL) {
      ok = int_interval(CSQ_OP_GT, et->b, &et->lo, &et->hi);
      et->bEmpty = !ok;
    } else {
      et->bEmpty = 1;
    }
    break;
  case CSQ_OP_IN: {
    et->ip = IP_SET;
    et->aSet = malloc(sizeof(int64_t) * t->k1);
    et->aIn = malloc(sizeof(csq_pconst) * t->k1);
    if (!et->aSet || !et->aIn) return -ENOMEM;
    for (int i = 0; i < t->k1; i++) {
      const csq_pconst *k = &p->aConst[t->k0 + i];
      if (k->cls == CSQ_NULL) {
        et->bInNull = 1;
        continue;
      }
      et->aIn[et->nIn++] = *k;
      if (int_interval(CSQ_OP_EQ, k, &lo, &hi)) et->aSet[et->nSet++] = lo;
    }
    qsort_r(et->aIn, et->nIn, sizeof(csq_pconst), cmp_const_sort, et);
    qsort(et->aSet, et->nSet, sizeof(int64_t), cmp_i64);
    if (ex_set_compile(et)) return -ENOMEM;
    break;
  }
  default:
    et->ip = IP_GENERIC;
    break;
  }
  /* real plan: plain comparisons whose constants are exact doubles */
  switch (t->op) {
  case CSQ_OP_EQ:
  case CSQ_OP_NE:
  case CSQ_OP_LT:
  case CSQ_OP_LE:
  case CSQ_OP_GT:
  case CSQ_OP_GE:
    et->bReal = double_exact(et->a, &et->rA);
    break;
  case CSQ_OP_BETWEEN:
    et->bReal = !et->bNot && double_exact(et->a, &et->rA) && double_exact(et->b, &et->rB);
    break;
  default:
    break;
  }
  if ((t->op == CSQ_OP_LIKE || t->op == CSQ_OP_GLOB) && et->a->cls == CSQ_TEXT)
    return ex_pat_compile(et);
  return 0;
}

void ex_free(void *pv) {
  ex_prog *ep = pv;
  if (!ep) return;
  if (ep->aT)
    for (int i = 0; i < ep->p.nTerm; i++) {
      free(ep->aT[i].aIn);
      free(ep->aT[i].aSet);
      ex_set_free(&ep->aT[i]);
      free(ep->aT[i].aTok);
      free(ep->aT[i].aRange);
      free(ep->aT[i].aSegByte);
      free(ep->aT[i].aSegOff);
      ex_bpf_free(&ep->aT[i]);
    }
  if (ep->aCondT)
    for (int i = 0; i < ep->p.nCond; i++) {
      free(ep->aCondT[i].aIn);
      free(ep->aCondT[i].aSet);
      ex_set_free(&ep->aCondT[i]);
      free(ep->aCondT[i].aTok);
      free(ep->aCondT[i].aRange);
      free(ep->aCondT[i].aSegByte);
      free(ep->aCondT[i].aSegOff);
    }
  if (ep->aExprT)
    for (int i = 0; i < ep->p.nExpr; i++) ex_bpf_free(&ep->aExprT[i]);
  free(ep->aT);
  free(ep->aCondT);
  free(ep->aExprT);
  csq_prog_clear(&ep->p);
  free(ep->aByte);
  free(ep);
}

/* xVerify: verify, then compile. The compiled form is read-only afterwards,
** so several engines may run it at once. */
int ex_verify(const uint8_t *p, size_t n, void **ppCompiled, char *zErr, size_t nErr) {
  ex_prog *ep = calloc(1, sizeof(*ep));
  int rc = -ENOMEM;
  *ppCompiled = NULL;
  if (!ep || !(ep->aByte = malloc(n ? n : 1))) goto fail;
  memcpy(ep->aByte, p, n);
  rc = csq_prog_parse(ep->aByte, n, &ep->p, zErr, nErr);
  if (rc) goto fail;
  ep->id = csq_prog_id(p, n);
  ep->aT = calloc(ep->p.nTerm ? ep->p.nTerm : 1, sizeof(ex_term));
  rc = -ENOMEM;
  if (!ep->aT) goto fail;
  rc = 0;
  for (int i = 0; i < ep->p.nTerm && rc == 0; i++)
    rc = term_compile(ep, &ep->aT[i], &ep->p.aTerm[i], zErr, nErr);
  if (rc == 0 && ep->p.bAgg) {
    ep->aCondT = calloc(ep->p.nCond ? ep->p.nCond : 1, sizeof(ex_term));
    if (!ep->aCondT) rc = -ENOMEM;
    for (int i = 0; i < ep->p.nCond && rc == 0; i++)
      rc = term_compile(ep, &ep->aCondT[i], &ep->p.aCond[i], zErr, nErr);
    /* eBPF expressions: their programs verified and compiled like terms' */
    if (rc == 0 && !(ep->aExprT = calloc(ep->p.nExpr ? ep->p.nExpr : 1, sizeof(ex_term))))
      rc = -ENOMEM;
    for (int i = 0; i < ep->p.nExpr && rc == 0; i++) {
      if (ep->p.aExpr[i].op != CSQ_EX_BPF) continue;
      ep->aExprT[i].t.k0 = ep->p.aExpr[i].a;
      rc = ex_bpf_compile(ep, &ep->aExprT[i], zErr, nErr);
    }
  }
  if (rc) goto fail;
  *ppCompiled = ep;
  return 0;
fail:
  if (rc == -ENOMEM && zErr && nErr) snprintf(zErr, nErr, "out of memory compiling the program");
  ex_free(ep);
  return rc ? rc : -ENOMEM;
}
