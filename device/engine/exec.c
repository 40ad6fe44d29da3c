/*
** device/engine/exec.c - the device side of csq programs (program type
** CSQ_PTYPE_CSQ): xVerify compiles a verified program (device/format/program.h) into
** a read-only form, xRun executes it on one row group held in SLM.
**
** Execution is batch at a time: CSQ_PROG_BATCH rows, a selection vector of
** row numbers, and per term a typed loop chosen once per chunk and term
** (never a function pointer per row):
**   - integer chunks (frame-of-reference, run-length, constant): the batch is
**     unpacked to int64 and every comparison, BETWEEN and IN has been reduced
**     at compile time to an integer interval test or a sorted set, so SQLite's
**     exact integer/real ordering costs nothing per row;
**   - real chunks: double comparisons when the constants are exactly
**     representable as doubles;
**   - dictionary text: the term is evaluated once per dictionary entry, then
**     per row by code lookup (this covers LIKE/GLOB too);
**   - constant chunks: once per chunk;
**   - plain text/blob and mixed (tagged) chunks: the generic evaluator.
** Qualifying rows are then written column by column into the output area in
** the result format of program.h. A grouped program (version 2, AGGREGATION
** in program.h) instead evaluates its expressions over the qualifying rows
** batch by batch, groups them (a direct table on dictionary / narrow integer
** codes, else a hash table on the values) and writes one row of partial
** aggregate states per group (agg_exec).
*/
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "device/format/checksum.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "device/format/chunk.h"
#include "device/format/program.h"
#include "device/format/value.h"
#include "device/engine/ptype.h"

#define BATCH CSQ_PROG_BATCH
_Static_assert(CSQ_PROG_BATCH <= 2048, "int64 lanes of ag_update need runs of at most 2048 rows");

/* A value in the generic evaluator (value.h: ordered, compared and hashed
** by SQLite's rules there). z/n: TEXT/BLOB bytes. */
typedef csq_value ex_val;

/* A LIKE/GLOB pattern compiled to tokens. */
enum { TK_LIT, TK_ONE, TK_ALL, TK_SET, TK_BAD };
typedef struct ex_tok {
  uint8_t kind;
  uint8_t bInvert; /* TK_SET */
  uint32_t c;      /* TK_LIT code point; TK_SET: first index in aRange */
  uint32_t nRange; /* TK_SET: number of [lo, hi] pairs */
} ex_tok;

/* Integer plan: the set of int64 values for which the term is true, as an
** interval [lo, hi] (bEmpty: no value), negated if bNeg, or a sorted set. */
enum { IP_RANGE, IP_SET, IP_GENERIC };

typedef struct ex_term {
  csq_pterm t;
  const csq_pconst *a, *b;
  int coll; /* CSQ_TF_BINARY / NOCASE / RTRIM */
  int bNot;
  uint8_t nullRes; /* result for a NULL value */
  /* IN */
  csq_pconst *aIn; /* non-NULL constants, sorted in SQLite order under coll */
  int nIn;
  int bInNull; /* the list holds a NULL */
  /* integer plan */
  int ip;
  int64_t lo, hi;
  int bEmpty, bNeg;
  int64_t *aSet;
  int nSet;
  /* real plan: usable when bReal; compare doubles against rA/rB */
  int bReal;
  double rA, rB;
  /* LIKE / GLOB */
  ex_tok *aTok;
  int nTok;
  uint32_t *aRange;
} ex_term;

typedef struct ex_prog {
  csq_prog p;
  uint8_t *aByte; /* private copy of the program: constants point into it */
  uint64_t id;
  ex_term *aT;
  ex_term *aCondT; /* the aggregation's condition terms (nCond) */
} ex_prog;

/* ---- values, collations, ordering ---- */

static int lower_ascii(int c) {
  return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* Constant k as a value (its bytes stay in the program). */
static inline void const_val(const csq_pconst *k, ex_val *v) {
  v->cls = k->cls;
  v->i = k->i;
  v->r = k->r;
  v->z = k->z;
  v->n = k->len;
}

/* v (not NULL) against constant k (not NULL): -1, 0, 1 in SQLite order,
** TEXT under coll. */
static inline int cmp_vk(const ex_val *v, const csq_pconst *k, int coll) {
  ex_val kv;
  const_val(k, &kv);
  return csq_value_cmp(v, &kv, coll);
}

/* ---- LIKE / GLOB ---- */

/* Read one UTF-8 character at z[*pi] (< n), as SQLite reads them: a lead
** byte and any continuation bytes; malformed forms become U+FFFD. */
static uint32_t utf8_read(const uint8_t *z, uint32_t n, uint32_t *pi) {
  uint32_t i = *pi, c = z[i++];
  if (c >= 0xC0) {
    c = c < 0xE0   ? c & 0x1F
        : c < 0xF0 ? c & 0x0F
        : c < 0xF8 ? c & 0x07
        : c < 0xFC ? c & 0x03
        : c < 0xFE ? c & 0x01
                   : 0;
    while (i < n && (z[i] & 0xC0) == 0x80) c = (c << 6) + (z[i++] & 0x3F);
    if (c < 0x80 || (c & 0xFFFFF800) == 0xD800 || (c & 0xFFFFFFFE) == 0xFFFE) c = 0xFFFD;
  }
  *pi = i;
  return c;
}

static uint32_t str_end(const uint8_t *z, uint32_t n) {
  const uint8_t *e = n ? memchr(z, 0, n) : NULL;
  return e ? (uint32_t)(e - z) : n;
}

/* Compile the pattern of a LIKE/GLOB term into tokens. */
static int pat_compile(ex_term *et) {
  const csq_pconst *k = et->a;
  uint32_t n = str_end(k->z, k->len), i = 0, nTok = 0, nRange = 0;
  int bGlob = et->t.op == CSQ_OP_GLOB;
  uint32_t esc = et->t.esc;
  et->aTok = malloc(sizeof(ex_tok) * (n + 1));
  et->aRange = malloc(sizeof(uint32_t) * 2 * (n + 1));
  if (!et->aTok || !et->aRange) return -ENOMEM;
  while (i < n) {
    uint32_t c = utf8_read(k->z, n, &i);
    ex_tok *t = &et->aTok[nTok++];
    memset(t, 0, sizeof(*t));
    if (!bGlob) {
      if (esc && c == esc) {
        if (i >= n) { /* a trailing escape matches nothing */
          t->kind = TK_BAD;
          continue;
        }
        t->kind = TK_LIT;
        t->c = utf8_read(k->z, n, &i);
      } else if (c == '%') {
        t->kind = TK_ALL;
      } else if (c == '_') {
        t->kind = TK_ONE;
      } else {
        t->kind = TK_LIT;
        t->c = c;
      }
      continue;
    }
    if (c == '*')
      t->kind = TK_ALL;
    else if (c == '?')
      t->kind = TK_ONE;
    else if (c != '[') {
      t->kind = TK_LIT;
      t->c = c;
    } else {
      /* [set]: '^' first inverts; ']' first is literal; a-b ranges; '-'
      ** first or last is literal; unterminated never matches. */
      uint32_t prior = 0, c2;
      int bHavePrior = 0;
      t->kind = TK_SET;
      t->c = nRange;
      if (i < n && k->z[i] == '^') {
        t->bInvert = 1;
        i++;
      }
      if (i < n && k->z[i] == ']') {
        et->aRange[2 * nRange] = et->aRange[2 * nRange + 1] = ']';
        nRange++;
        i++;
      }
      int bClosed = 0;
      while (i < n) {
        c2 = utf8_read(k->z, n, &i);
        if (c2 == ']') {
          bClosed = 1;
          break;
        }
        if (c2 == '-' && bHavePrior && i < n && k->z[i] != ']') {
          uint32_t hi = utf8_read(k->z, n, &i);
          et->aRange[2 * nRange] = prior;
          et->aRange[2 * nRange + 1] = hi;
          /* the prior literal was already added as [prior, prior]; widen it */
          nRange--;
          et->aRange[2 * nRange] = prior;
          et->aRange[2 * nRange + 1] = hi;
          nRange++;
          bHavePrior = 0;
        } else {
          et->aRange[2 * nRange] = et->aRange[2 * nRange + 1] = c2;
          nRange++;
          prior = c2;
          bHavePrior = 1;
        }
      }
      t->nRange = nRange - t->c;
      if (!bClosed) t->kind = TK_BAD;
    }
  }
  et->nTok = (int)nTok;
  return 0;
}

static int tok_match(const ex_term *et, const ex_tok *t, uint32_t c) {
  switch (t->kind) {
  case TK_ONE:
    return 1;
  case TK_LIT:
    if (t->c == c) return 1;
    return et->t.op == CSQ_OP_LIKE && !(et->t.flags & CSQ_TF_LIKE_CASE) && t->c < 0x80 &&
           c < 0x80 && lower_ascii((int)t->c) == lower_ascii((int)c);
  case TK_SET: {
    int seen = 0;
    for (uint32_t r = 0; r < t->nRange && !seen; r++) {
      /* SQLite matches a range as c >= lo && c <= hi, and a literal by == */
      uint32_t lo = et->aRange[2 * (t->c + r)], hi = et->aRange[2 * (t->c + r) + 1];
      if (c >= lo && c <= hi) seen = 1;
    }
    return seen ^ t->bInvert;
  }
  default:
    return 0;
  }
}

/* Wildcard match with one backtrack point (the last '%' / '*'): linear in
** the common case, O(pattern x string) at worst, never exponential. */
static int pat_match(const ex_term *et, const uint8_t *z, uint32_t n) {
  n = str_end(z, n);
  int p = 0, starP = -1;
  uint32_t s = 0, starS = 0;
  for (;;) {
    if (p < et->nTok && et->aTok[p].kind == TK_ALL) {
      starP = p++;
      starS = s;
      continue;
    }
    if (s >= n) break;
    uint32_t s2 = s, c = utf8_read(z, n, &s2);
    if (p < et->nTok && tok_match(et, &et->aTok[p], c)) {
      p++;
      s = s2;
      continue;
    }
    if (starP < 0) return 0;
    utf8_read(z, n, &starS);
    s = starS;
    p = starP + 1;
  }
  while (p < et->nTok && et->aTok[p].kind == TK_ALL) p++;
  return p == et->nTok;
}

/* The text SQLite gives a number: integers in decimal, reals as "%!.15g"
** (a ".0" where %g would print none; "Inf"/"-Inf"). */
static uint32_t render_num(const ex_val *v, char *buf, size_t nBuf) {
  int n;
  if (v->cls == CSQ_INT) return (uint32_t)snprintf(buf, nBuf, "%lld", (long long)v->i);
  if (isinf(v->r)) return (uint32_t)snprintf(buf, nBuf, "%s", v->r < 0 ? "-Inf" : "Inf");
  if (v->r == 0) return (uint32_t)snprintf(buf, nBuf, "0.0");
  n = snprintf(buf, nBuf, "%.15g", v->r);
  if (n < 0 || (size_t)n >= nBuf - 3) return n < 0 ? 0 : (uint32_t)n;
  if (!strchr(buf, '.')) {
    char *e = strchr(buf, 'e');
    if (e) {
      memmove(e + 2, e, strlen(e) + 1);
      e[0] = '.';
      e[1] = '0';
    } else {
      buf[n] = '.';
      buf[n + 1] = '0';
      buf[n + 2] = 0;
    }
    n += 2;
  }
  return (uint32_t)n;
}

static int like_val(const ex_term *et, const ex_val *v) {
  char buf[64];
  if (v->cls == CSQ_INT || v->cls == CSQ_REAL) {
    uint32_t n = render_num(v, buf, sizeof(buf));
    return pat_match(et, (const uint8_t *)buf, n);
  }
  if (v->cls == CSQ_BLOB && !(et->t.flags & CSQ_TF_BLOB_TEXT)) return 0;
  return pat_match(et, v->z, v->n);
}

/* ---- the generic evaluator: one value, any term ---- */

static int in_find(const ex_term *et, const ex_val *v) {
  int lo = 0, hi = et->nIn - 1;
  if (et->nIn <= 8) {
    for (int i = 0; i < et->nIn; i++)
      if (cmp_vk(v, &et->aIn[i], et->coll) == 0) return 1;
    return 0;
  }
  while (lo <= hi) {
    int mid = (lo + hi) / 2, c = cmp_vk(v, &et->aIn[mid], et->coll);
    if (c == 0) return 1;
    if (c < 0)
      hi = mid - 1;
    else
      lo = mid + 1;
  }
  return 0;
}

static int ev_one(const ex_term *et, const ex_val *v) {
  if (v->cls == CSQ_NULL) return et->nullRes;
  const csq_pconst *a = et->a;
  switch (et->t.op) {
  case CSQ_OP_ISNULL:
    return 0;
  case CSQ_OP_NOTNULL:
    return 1;
  case CSQ_OP_EQ:
  case CSQ_OP_IS:
    return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) == 0;
  case CSQ_OP_NE:
    return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) != 0;
  case CSQ_OP_ISNOT:
    return a->cls == CSQ_NULL || cmp_vk(v, a, et->coll) != 0;
  case CSQ_OP_LT:
    return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) < 0;
  case CSQ_OP_LE:
    return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) <= 0;
  case CSQ_OP_GT:
    return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) > 0;
  case CSQ_OP_GE:
    return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) >= 0;
  case CSQ_OP_BETWEEN: {
    /* 1 true, 0 false, -1 NULL */
    int ge = a->cls == CSQ_NULL ? -1 : cmp_vk(v, a, et->coll) >= 0;
    int le = et->b->cls == CSQ_NULL ? -1 : cmp_vk(v, et->b, et->coll) <= 0;
    return et->bNot ? (ge == 0 || le == 0) : (ge == 1 && le == 1);
  }
  case CSQ_OP_IN: {
    int f = in_find(et, v);
    if (f) return !et->bNot;
    return et->bNot && !et->bInNull;
  }
  case CSQ_OP_LIKE:
  case CSQ_OP_GLOB:
    /* SQLite tests for a BLOB before it looks at a NULL pattern */
    if (v->cls == CSQ_BLOB && !(et->t.flags & CSQ_TF_BLOB_TEXT)) return et->bNot;
    if (a->cls == CSQ_NULL) return 0;
    return like_val(et, v) ^ et->bNot;
  }
  return 0;
}

/* ---- compile ---- */

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

static int term_compile(ex_prog *ep, ex_term *et, const csq_pterm *t) {
  const csq_prog *p = &ep->p;
  memset(et, 0, sizeof(*et));
  et->t = *t;
  et->a = &p->aConst[t->op == CSQ_OP_ISNULL || t->op == CSQ_OP_NOTNULL ? 0 : t->k0];
  if (p->nConst == 0) {
    static const csq_pconst kNull = {CSQ_NULL, 0, 0, 0, NULL};
    et->a = &kNull;
  }
  et->b = t->op == CSQ_OP_BETWEEN ? &p->aConst[t->k1] : et->a;
  et->coll = t->flags & CSQ_TF_COLL_MASK;
  et->bNot = (t->flags & CSQ_TF_NOT) != 0;
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
    return pat_compile(et);
  return 0;
}

static void ex_free(void *pv) {
  ex_prog *ep = pv;
  if (!ep) return;
  if (ep->aT)
    for (int i = 0; i < ep->p.nTerm; i++) {
      free(ep->aT[i].aIn);
      free(ep->aT[i].aSet);
      free(ep->aT[i].aTok);
      free(ep->aT[i].aRange);
    }
  if (ep->aCondT)
    for (int i = 0; i < ep->p.nCond; i++) {
      free(ep->aCondT[i].aIn);
      free(ep->aCondT[i].aSet);
      free(ep->aCondT[i].aTok);
      free(ep->aCondT[i].aRange);
    }
  free(ep->aT);
  free(ep->aCondT);
  csq_prog_clear(&ep->p);
  free(ep->aByte);
  free(ep);
}

/* xVerify: verify, then compile. The compiled form is read-only afterwards,
** so several engines may run it at once. */
static int ex_verify(const uint8_t *p, size_t n, void **ppCompiled, char *zErr, size_t nErr) {
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
    rc = term_compile(ep, &ep->aT[i], &ep->p.aTerm[i]);
  if (rc == 0 && ep->p.bAgg) {
    ep->aCondT = calloc(ep->p.nCond ? ep->p.nCond : 1, sizeof(ex_term));
    if (!ep->aCondT) rc = -ENOMEM;
    for (int i = 0; i < ep->p.nCond && rc == 0; i++)
      rc = term_compile(ep, &ep->aCondT[i], &ep->p.aCond[i]);
  }
  if (rc) goto fail;
  *ppCompiled = ep;
  return 0;
fail:
  if (rc == -ENOMEM && zErr && nErr) snprintf(zErr, nErr, "out of memory compiling the program");
  ex_free(ep);
  return rc ? rc : -ENOMEM;
}

/* ---- columns of one execution ---- */

enum { K_INT, K_REAL, K_TEXTP, K_DICT, K_TAG, K_CONSTX };

typedef struct ex_col {
  csq_chunk_desc d;
  int kind;
  int bAllNull;
  uint32_t *aTagOff; /* K_TAG: offset in aVar of value i's bytes */
  ex_val cval;       /* K_CONSTX and CONST INT/REAL: the value */
  int64_t b0;        /* batch materialised in aI / aR (-1 none) */
  int64_t *aI;
  double *aR;
  uint64_t *aCode;
  int64_t aCodeB0; /* FOR, REAL_DEC, DICT: batch whose codes are in aCode (-1 none) */
} ex_col;

static inline int col_null(const ex_col *c, uint32_t r) {
  if (c->d.aNull) return (c->d.aNull[r >> 3] >> (r & 7)) & 1;
  return c->bAllNull;
}

/* Run of row r in an RLE chunk (binary search over run ends). */
static uint32_t rle_run(const ex_col *c, uint32_t r) {
  uint32_t lo = 0, hi = c->d.nAux - 1;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (csq_le32(c->d.aRunEnd + 4 * mid) > r)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

static int64_t rle_value(const ex_col *c, uint32_t run) {
  uint64_t u;
  csq_unpack_u64(c->d.aPacked, c->d.width, run, 1, &u);
  return (int64_t)((uint64_t)c->d.iRef + u);
}

/* REAL_DEC: the value of a code; the encoder guaranteed that this division
** gives back the exact bits. */
static inline double dec_value(const ex_col *c, uint64_t code) {
  return (double)(int64_t)(code + (uint64_t)c->d.iRef) / csq_pow10(c->d.nAux);
}

/* Value of row r (any kind). */
static void col_get(const ex_col *c, uint32_t r, ex_val *v) {
  uint64_t u;
  if (col_null(c, r)) {
    v->cls = CSQ_NULL;
    return;
  }
  switch (c->kind) {
  case K_INT:
    v->cls = CSQ_INT;
    if (c->d.enc == CSQ_ENC_INT_FOR) {
      csq_unpack_u64(c->d.aPacked, c->d.width, r, 1, &u);
      v->i = (int64_t)((uint64_t)c->d.iRef + u);
    } else if (c->d.enc == CSQ_ENC_INT_RLE) {
      v->i = rle_value(c, rle_run(c, r));
    } else {
      v->i = c->d.iRef;
    }
    break;
  case K_REAL:
    v->cls = CSQ_REAL;
    if (c->d.enc == CSQ_ENC_REAL_PLAIN) {
      u = csq_le64(c->d.aReal + 8 * (size_t)r);
      memcpy(&v->r, &u, 8);
    } else if (c->d.enc == CSQ_ENC_REAL_DEC) {
      csq_unpack_u64(c->d.aPacked, c->d.width, r, 1, &u);
      v->r = dec_value(c, u);
    } else {
      v->r = c->d.rConst;
    }
    break;
  case K_TEXTP: {
    uint32_t o0 = csq_le32(c->d.aOff + 4 * (size_t)r), o1 = csq_le32(c->d.aOff + 4 * (size_t)r + 4);
    v->cls = c->d.cls;
    v->z = c->d.aVar + o0;
    v->n = o1 - o0;
    break;
  }
  case K_DICT: {
    csq_unpack_u64(c->d.aPacked, c->d.width, r, 1, &u);
    uint32_t o0 = csq_le32(c->d.aOff + 4 * u), o1 = csq_le32(c->d.aOff + 4 * u + 4);
    v->cls = CSQ_TEXT;
    v->z = c->d.aVar + o0;
    v->n = o1 - o0;
    break;
  }
  case K_TAG:
    v->cls = c->d.aTag[r];
    u = csq_le64(c->d.aSlot + 8 * (size_t)r);
    if (v->cls == CSQ_INT)
      v->i = (int64_t)u;
    else if (v->cls == CSQ_REAL)
      memcpy(&v->r, &u, 8);
    else if (v->cls == CSQ_TEXT || v->cls == CSQ_BLOB) {
      v->z = c->d.aVar + c->aTagOff[r];
      v->n = (uint32_t)u;
    }
    break;
  default:
    *v = c->cval;
    break;
  }
}

/* The packed codes of batch [b0, b0+n) in c->aCode (INT_FOR, REAL_DEC),
** unpacked once per batch whoever asks first. */
static const uint64_t *col_codes(ex_col *c, uint32_t b0, uint32_t n) {
  if (c->aCodeB0 != b0) {
    c->aCodeB0 = b0;
    csq_unpack_u64(c->d.aPacked, c->d.width, b0, n, c->aCode);
  }
  return c->aCode;
}

/* The packed codes of rows aSel[0..n) of batch b0 into u: from the batch's
** unpacked codes if some term already asked for them, else just theirs. */
static void col_sel_codes(const ex_col *c, uint32_t b0, const uint32_t *aSel, uint32_t n,
                          uint64_t *u) {
  if (c->aCodeB0 == b0)
    for (uint32_t k = 0; k < n; k++) u[k] = c->aCode[aSel[k] - b0];
  else
    csq_unpack_sel(c->d.aPacked, c->d.width, aSel, n, u);
}

/* Materialise batch [b0, b0+n) of an integer column into c->aI. */
static void col_ints(ex_col *c, uint32_t b0, uint32_t n) {
  if (c->b0 == b0) return;
  c->b0 = b0;
  if (c->d.enc == CSQ_ENC_INT_FOR) {
    uint64_t *u = (uint64_t *)c->aI;
    csq_unpack_u64(c->d.aPacked, c->d.width, b0, n, u);
    uint64_t ref = (uint64_t)c->d.iRef;
    for (uint32_t i = 0; i < n; i++) u[i] += ref;
  } else if (c->d.enc == CSQ_ENC_INT_RLE) {
    uint32_t run = rle_run(c, b0), i = 0;
    while (i < n) {
      uint32_t end = csq_le32(c->d.aRunEnd + 4 * run);
      int64_t v = rle_value(c, run);
      for (; i < n && b0 + i < end; i++) c->aI[i] = v;
      run++;
    }
  } else {
    for (uint32_t i = 0; i < n; i++) c->aI[i] = c->d.iRef;
  }
}

static void col_reals(ex_col *c, uint32_t b0, uint32_t n) {
  if (c->b0 == b0) return;
  c->b0 = b0;
  if (c->d.enc == CSQ_ENC_REAL_PLAIN)
    memcpy(c->aR, c->d.aReal + 8 * (size_t)b0, 8 * (size_t)n);
  else if (c->d.enc == CSQ_ENC_REAL_DEC) {
    csq_dec_values(col_codes(c, b0, n), n, c->d.iRef, c->d.nAux, c->aR);
  } else
    for (uint32_t i = 0; i < n; i++) c->aR[i] = c->d.rConst;
}

/* dst[k] = src[aSel[k] - b0] for k < n, elements of 8 bytes. aSel ascends,
** so 8 entries whose ends differ by 7 are 8 consecutive rows: one block
** copy. After a filter that keeps most rows, nearly every block is one. */
static void gather8(void *dst, const void *src, const uint32_t *aSel, uint32_t n, uint32_t b0) {
  uint8_t *d = dst;
  const uint8_t *q = src;
  uint32_t k = 0;
  for (; k + 8 <= n; k += 8) {
    if (aSel[k + 7] - aSel[k] == 7) {
      memcpy(d + 8 * (size_t)k, q + 8 * (size_t)(aSel[k] - b0), 64);
    } else {
      for (uint32_t j = k; j < k + 8; j++)
        memcpy(d + 8 * (size_t)j, q + 8 * (size_t)(aSel[j] - b0), 8);
    }
  }
  for (; k < n; k++) memcpy(d + 8 * (size_t)k, q + 8 * (size_t)(aSel[k] - b0), 8);
}

/* The device's memo of chunks checked in full. Every Execute verifies each
** input chunk's bytes against the XXH3-64 its job names; chunk bytes that
** once passed csq_chunk_view's full check (the checksum, the ordered
** dictionary, every code in range, ...) need only their layout next time,
** which spares a scan from re-reading every value of every chunk before it
** starts. A slot holds the tag of one chunk (its XXH3-64 mixed with its
** length, never 0); engines race on slots harmlessly, since a slot only
** ever holds a whole tag of some checked chunk. */
static uint64_t chunk_tag(uint64_t h, uint64_t len) {
  uint64_t t = h ^ (len * 0x9E3779B97F4A7C15ull);
  return t ? t : 1;
}
static int chunk_checked(const dev_exec_ctx *ctx, uint64_t tag) {
  if (!ctx->aChecked) return 0;
  return __atomic_load_n(&ctx->aChecked[tag & (ctx->nChecked - 1)], __ATOMIC_RELAXED) == tag;
}
static void chunk_set_checked(const dev_exec_ctx *ctx, uint64_t tag) {
  if (ctx->aChecked)
    __atomic_store_n(&ctx->aChecked[tag & (ctx->nChecked - 1)], tag, __ATOMIC_RELAXED);
}

/* Set up column c from the chunk at p[0..n): 0 or a CSQ_FAULT_*. bChecked:
** these very bytes passed csq_chunk_view before (see chunk_checked). */
static int col_open(ex_col *c, const uint8_t *p, size_t n, uint32_t nRow, int bChecked) {
  memset(c, 0, sizeof(*c));
  c->b0 = -1;
  c->aCodeB0 = -1;
  if ((bChecked ? csq_chunk_layout : csq_chunk_view)(p, n, &c->d)) return CSQ_FAULT_CORRUPT_CHUNK;
  if (c->d.nVal < nRow) return CSQ_FAULT_SHORT_CHUNK;
  c->bAllNull = c->d.nVal > 0 && c->d.nNull == c->d.nVal;
  switch (c->d.enc) {
  case CSQ_ENC_INT_FOR:
  case CSQ_ENC_INT_RLE:
    c->kind = K_INT;
    break;
  case CSQ_ENC_REAL_PLAIN:
  case CSQ_ENC_REAL_DEC:
    c->kind = K_REAL;
    break;
  case CSQ_ENC_TEXT_PLAIN:
  case CSQ_ENC_BLOB_PLAIN:
    c->kind = K_TEXTP;
    break;
  case CSQ_ENC_TEXT_DICT:
    c->kind = K_DICT;
    break;
  case CSQ_ENC_TAGGED: {
    c->kind = K_TAG;
    c->aTagOff = malloc(sizeof(uint32_t) * (c->d.nVal ? c->d.nVal : 1));
    if (!c->aTagOff) return CSQ_FAULT_NOMEM;
    uint64_t off = 0;
    for (uint32_t i = 0; i < c->d.nVal; i++) {
      c->aTagOff[i] = (uint32_t)off;
      if (c->d.aTag[i] == CSQ_TEXT || c->d.aTag[i] == CSQ_BLOB)
        off += csq_le64(c->d.aSlot + 8 * (size_t)i);
      if (off > c->d.nVar) return CSQ_FAULT_CORRUPT_CHUNK; /* view checked it; be safe */
    }
    break;
  }
  case CSQ_ENC_CONST:
    if (c->d.cls == CSQ_INT)
      c->kind = K_INT;
    else if (c->d.cls == CSQ_REAL)
      c->kind = K_REAL;
    else {
      c->kind = K_CONSTX;
      c->cval.cls = c->d.cls;
      c->cval.z = c->d.aVar;
      c->cval.n = (uint32_t)c->d.nVar;
      if (c->d.cls == CSQ_NULL) c->bAllNull = 1;
    }
    break;
  default:
    return CSQ_FAULT_CORRUPT_CHUNK;
  }
  if (c->kind == K_INT) c->aI = malloc(sizeof(int64_t) * BATCH);
  if (c->kind == K_REAL) c->aR = malloc(sizeof(double) * BATCH);
  int bCodes = c->kind == K_DICT || c->d.enc == CSQ_ENC_INT_FOR || c->d.enc == CSQ_ENC_REAL_DEC;
  if (bCodes) c->aCode = malloc(sizeof(uint64_t) * BATCH);
  if ((c->kind == K_INT && !c->aI) || (c->kind == K_REAL && !c->aR) || (bCodes && !c->aCode))
    return CSQ_FAULT_NOMEM;
  return 0;
}

static void col_close(ex_col *c) {
  free(c->aTagOff);
  free(c->aI);
  free(c->aR);
  free(c->aCode);
}

/* REAL_DEC: the first k in [lo, hi] whose value (double)k / p10 is >= r
** (> r when bStrict), or hi + 1. The value only grows with k (an exact
** integer divided by a positive constant, correctly rounded), so a binary
** search over the chunk's range of integers is exact. */
static int64_t dec_first(int64_t lo, int64_t hi, double p10, double r, int bStrict) {
  int64_t a = lo, b = hi + 1; /* answer in [a, b] */
  while (a < b) {
    int64_t m = a + (b - a) / 2;
    double v = (double)m / p10;
    if (bStrict ? v > r : v >= r)
      b = m;
    else
      a = m + 1;
  }
  return a;
}

/* A term decided on packed codes (INT_FOR, REAL_DEC): aM[k] is whether row
** aSel[k]'s code lies in [lo, lo + w] (mod 2^64), xor neg. eAll decides the
** whole chunk at once where its range allows: 1 every code is inside, 0
** none is, -1 look at each. NULL rows then get rn. */
static void code_range(ex_col *c, uint32_t b0, uint32_t nb, const uint32_t *aSel, uint32_t n,
                       int eAll, uint64_t lo, uint64_t w, uint8_t neg, uint8_t rn, uint8_t *aM) {
  uint32_t k;
  if (eAll >= 0) {
    memset(aM, (uint8_t)eAll ^ neg, n);
  } else if (c->aCodeB0 != b0 && (uint64_t)n * 2 < nb) {
    /* under half the batch left: fetching just their codes costs less than
    ** unpacking all */
    uint64_t u[BATCH];
    csq_unpack_sel(c->d.aPacked, c->d.width, aSel, n, u);
    for (k = 0; k < n; k++) aM[k] = (uint8_t)((u[k] - lo <= w) ^ neg);
  } else if (n == nb && aSel[0] == b0 && aSel[n - 1] == b0 + n - 1) {
    /* every row of the batch: no selection vector to follow (vectorises) */
    const uint64_t *u = col_codes(c, b0, nb);
    for (k = 0; k < n; k++) aM[k] = (uint8_t)((u[k] - lo <= w) ^ neg);
  } else {
    const uint64_t *u = col_codes(c, b0, nb);
    for (k = 0; k < n; k++) aM[k] = (uint8_t)((u[aSel[k] - b0] - lo <= w) ^ neg);
  }
  if (c->d.aNull)
    for (k = 0; k < n; k++)
      if (col_null(c, aSel[k])) aM[k] = rn;
}

/* ---- term evaluation over a selection ----
** aSel[0..n) are row numbers inside batch [b0, b0+nb); aM[k] receives 1 if
** row aSel[k] satisfies the term. pDict: per-term dictionary match map of
** this chunk (K_DICT), built on first use. */
/* A term over a dictionary column's entries (cached per term and row group):
** m[e] is the term on entry e; eAll says whether the set entries are none
** (0), all (1), one run lo..hi (-1) or scattered (-2). */
typedef struct ex_dmask {
  int eAll;
  uint32_t lo, hi;
  uint8_t m[];
} ex_dmask;

/* Dictionary entry e of column c as a value. */
static void dict_entry(const ex_col *c, uint32_t e, ex_val *v) {
  uint32_t o0 = csq_le32(c->d.aOff + 4 * (size_t)e), o1 = csq_le32(c->d.aOff + 4 * (size_t)e + 4);
  v->cls = CSQ_TEXT;
  v->z = c->d.aVar + o0;
  v->n = o1 - o0;
}

/* The first entry of c's dictionary from which cmp_vk(entry, k) >= 0 (> 0
** when bStrict) holds, or nAux. */
static uint32_t dict_first(const ex_col *c, const csq_pconst *k, int coll, int bStrict) {
  uint32_t a = 0, b = c->d.nAux;
  ex_val v = {0}; /* TEXT: i and r are never read */
  while (a < b) {
    uint32_t m = a + (b - a) / 2;
    dict_entry(c, m, &v);
    int r = cmp_vk(&v, k, coll);
    if (bStrict ? r > 0 : r >= 0)
      b = m;
    else
      a = m + 1;
  }
  return a;
}

/* A comparison term over a dictionary column whose true entries form one
** run, found by binary search: entries are TEXT in strictly ascending
** BINARY order (csq_chunk_view checks), and against a constant of another
** class, or a TEXT one under BINARY, cmp_vk is monotone in that order.
** Returns 1 with the run in [*pLo, *pHi] (empty when lo > hi), or 0 if the
** term is not of that kind (then every entry is evaluated). */
static int dict_run(const ex_term *et, const ex_col *c, uint32_t *pLo, uint32_t *pHi) {
  const csq_pconst *a = et->a, *b = et->b;
  int coll = et->coll;
  uint32_t n = c->d.nAux, lo = 0, hi = n; /* hi exclusive here */
  if (!a || a->cls == CSQ_NULL || (a->cls == CSQ_TEXT && coll != CSQ_TF_BINARY)) return 0;
  switch (et->t.op) {
  case CSQ_OP_EQ:
  case CSQ_OP_IS:
    lo = dict_first(c, a, coll, 0);
    hi = dict_first(c, a, coll, 1);
    break;
  case CSQ_OP_LT:
    hi = dict_first(c, a, coll, 0);
    break;
  case CSQ_OP_LE:
    hi = dict_first(c, a, coll, 1);
    break;
  case CSQ_OP_GT:
    lo = dict_first(c, a, coll, 1);
    break;
  case CSQ_OP_GE:
    lo = dict_first(c, a, coll, 0);
    break;
  case CSQ_OP_BETWEEN:
    if (et->bNot || !b || b->cls == CSQ_NULL || (b->cls == CSQ_TEXT && coll != CSQ_TF_BINARY))
      return 0;
    lo = dict_first(c, a, coll, 0);
    hi = dict_first(c, b, coll, 1);
    break;
  default:
    return 0;
  }
  if (lo >= hi) {
    *pLo = 1;
    *pHi = 0;
  } else {
    *pLo = lo;
    *pHi = hi - 1;
  }
  return 1;
}

/* The term over each entry of dictionary column c, built on first use into
** *ppDict (one per term and row group). 0 or a CSQ_FAULT_*. */
static int dict_mask(const ex_term *et, const ex_col *c, uint8_t **ppDict) {
  ex_val v;
  if (!*ppDict) {
    ex_dmask *dm = malloc(sizeof(ex_dmask) + (c->d.nAux ? c->d.nAux : 1));
    if (!dm) return CSQ_FAULT_NOMEM;
    uint32_t nSet = 0, lo = UINT32_MAX, hi = 0;
    int bRun = dict_run(et, c, &lo, &hi);
    if (bRun) {
      nSet = lo <= hi ? hi - lo + 1 : 0;
      memset(dm->m, 0, c->d.nAux);
      if (nSet) memset(dm->m + lo, 1, nSet);
    }
    for (uint32_t e = 0; e < c->d.nAux && !bRun; e++) {
      dict_entry(c, e, &v);
      dm->m[e] = (uint8_t)ev_one(et, &v);
      if (dm->m[e]) {
        nSet++;
        if (lo == UINT32_MAX) lo = e;
        hi = e;
      }
    }
    dm->eAll = nSet == 0 ? 0 : nSet == c->d.nAux ? 1 : nSet == hi - lo + 1 ? -1 : -2;
    dm->lo = lo;
    dm->hi = hi;
    *ppDict = (uint8_t *)dm;
  }
  return 0;
}

/* A term decided on a chunk's packed codes: a row satisfies it when its
** code lies in [lo, hi], xor neg. The chunk's codes are [0, top]; eAll is 1
** when every code is inside, 0 when none is (then lo > hi), -1 otherwise. */
typedef struct ex_crange {
  int eAll;
  uint64_t lo, hi, top;
  uint8_t neg;
} ex_crange;

static void crange_settle(ex_crange *r) {
  r->eAll = r->lo > r->hi ? 0 : r->lo == 0 && r->hi == r->top ? 1 : -1;
}

/* Is term et on column c a range of c's codes in this chunk? 1 with *pr
** filled; 0 if not (or on error, with *pRc = a CSQ_FAULT_*):
**  - INT_FOR: codes are x - iRef, so the integer plan's interval moves by
**    iRef, clipped to the chunk's values;
**  - REAL_DEC: the comparison becomes an interval of the scaled integers
**    (dec_first), so nothing is converted or divided;
**  - TEXT_DICT: the entries are sorted (chunk_dec.c checks), so the true ones
**    usually form one run of codes (dict_mask). */
static int term_codes(const ex_term *et, ex_col *c, uint8_t **ppDict, ex_crange *pr, int *pRc) {
  memset(pr, 0, sizeof(*pr));
  if (c->kind == K_INT && et->ip == IP_RANGE && !et->bEmpty && c->d.enc == CSQ_ENC_INT_FOR &&
      c->d.width < 64) {
    pr->top = ((uint64_t)1 << c->d.width) - 1;
    __int128 cMin = (__int128)c->d.iRef, cMax = cMin + (__int128)pr->top;
    __int128 lo = et->lo > cMin ? et->lo : cMin, hi = et->hi < cMax ? et->hi : cMax;
    pr->lo = lo > hi ? 1 : (uint64_t)(lo - cMin);
    pr->hi = lo > hi ? 0 : (uint64_t)(hi - cMin);
    pr->neg = (uint8_t)et->bNeg;
    crange_settle(pr);
    return 1;
  }
  if (c->kind == K_REAL && et->bReal && c->d.enc == CSQ_ENC_REAL_DEC && c->d.width < 53 &&
      et->t.op != CSQ_OP_NE && !isnan(et->rA) && !isnan(et->rB)) {
    const double p10 = csq_pow10(c->d.nAux);
    const int64_t kMin = c->d.iRef, kMax = kMin + (((int64_t)1 << c->d.width) - 1);
    double ra = et->rA, rb = et->t.op == CSQ_OP_BETWEEN ? et->rB : et->rA;
    int64_t kLo = kMin, kHi = kMax;
    switch (et->t.op) {
    case CSQ_OP_GE:
      kLo = dec_first(kMin, kMax, p10, ra, 0);
      break;
    case CSQ_OP_GT:
      kLo = dec_first(kMin, kMax, p10, ra, 1);
      break;
    case CSQ_OP_LE:
      kHi = dec_first(kMin, kMax, p10, ra, 1) - 1;
      break;
    case CSQ_OP_LT:
      kHi = dec_first(kMin, kMax, p10, ra, 0) - 1;
      break;
    default: /* EQ, BETWEEN */
      kLo = dec_first(kMin, kMax, p10, ra, 0);
      kHi = dec_first(kMin, kMax, p10, rb, 1) - 1;
      break;
    }
    pr->top = (uint64_t)(kMax - kMin);
    pr->lo = kLo > kHi ? 1 : (uint64_t)(kLo - kMin);
    pr->hi = kLo > kHi ? 0 : (uint64_t)(kHi - kMin);
    crange_settle(pr);
    return 1;
  }
  if (c->kind == K_DICT) {
    if ((*pRc = dict_mask(et, c, ppDict)) != 0) return 0;
    const ex_dmask *dm = (const ex_dmask *)*ppDict;
    if (dm->eAll == -2) return 0;
    pr->top = c->d.nAux - 1;
    pr->lo = dm->eAll == 0 ? 1 : dm->eAll == 1 ? 0 : dm->lo;
    pr->hi = dm->eAll == 0 ? 0 : dm->eAll == 1 ? pr->top : dm->hi;
    crange_settle(pr);
    return 1;
  }
  return 0;
}

static int eval_term(const ex_term *et, ex_col *c, uint32_t b0, uint32_t nb, const uint32_t *aSel,
                     uint32_t n, uint8_t *aM, uint8_t **ppDict) {
  uint32_t k;
  ex_val v;
  if (c->kind == K_CONSTX || c->bAllNull) {
    /* one value for every non-NULL row */
    uint8_t rv = 0, rn = et->nullRes;
    if (!c->bAllNull) rv = (uint8_t)ev_one(et, &c->cval);
    for (k = 0; k < n; k++) aM[k] = col_null(c, aSel[k]) ? rn : rv;
    return 0;
  }
  ex_crange cr;
  int rc = 0;
  if (term_codes(et, c, ppDict, &cr, &rc)) {
    code_range(c, b0, nb, aSel, n, cr.eAll, cr.lo, cr.hi - cr.lo, cr.neg, et->nullRes, aM);
    return 0;
  }
  if (rc) return rc;
  if (c->kind == K_INT && et->ip != IP_GENERIC) {
    col_ints(c, b0, nb);
    const int64_t *a = c->aI;
    uint8_t rn = et->nullRes;
    if (et->ip == IP_RANGE) {
      if (et->bEmpty) {
        for (k = 0; k < n; k++) aM[k] = (uint8_t)et->bNeg;
      } else {
        uint64_t lo = (uint64_t)et->lo, w = (uint64_t)et->hi - lo;
        uint8_t neg = (uint8_t)et->bNeg;
        for (k = 0; k < n; k++) aM[k] = (uint8_t)(((uint64_t)a[aSel[k] - b0] - lo <= w) ^ neg);
      }
    } else {
      for (k = 0; k < n; k++) {
        int64_t x = a[aSel[k] - b0];
        int lo = 0, hi = et->nSet - 1, f = 0;
        while (lo <= hi) {
          int mid = (lo + hi) / 2;
          if (et->aSet[mid] == x) {
            f = 1;
            break;
          }
          if (et->aSet[mid] < x)
            lo = mid + 1;
          else
            hi = mid - 1;
        }
        aM[k] = (uint8_t)(f ? !et->bNot : (et->bNot && !et->bInNull));
      }
    }
    if (c->d.aNull)
      for (k = 0; k < n; k++)
        if (col_null(c, aSel[k])) aM[k] = rn;
    return 0;
  }
  if (c->kind == K_REAL && et->bReal) {
    col_reals(c, b0, nb);
    const double *a = c->aR;
    double ra = et->rA, rb = et->rB;
    switch (et->t.op) {
    case CSQ_OP_EQ:
      for (k = 0; k < n; k++) aM[k] = a[aSel[k] - b0] == ra;
      break;
    case CSQ_OP_NE:
      for (k = 0; k < n; k++) aM[k] = a[aSel[k] - b0] != ra;
      break;
    case CSQ_OP_LT:
      for (k = 0; k < n; k++) aM[k] = a[aSel[k] - b0] < ra;
      break;
    case CSQ_OP_LE:
      for (k = 0; k < n; k++) aM[k] = a[aSel[k] - b0] <= ra;
      break;
    case CSQ_OP_GT:
      for (k = 0; k < n; k++) aM[k] = a[aSel[k] - b0] > ra;
      break;
    case CSQ_OP_GE:
      for (k = 0; k < n; k++) aM[k] = a[aSel[k] - b0] >= ra;
      break;
    default:
      for (k = 0; k < n; k++) {
        double x = a[aSel[k] - b0];
        aM[k] = x >= ra && x <= rb;
      }
      break;
    }
    if (c->d.aNull)
      for (k = 0; k < n; k++)
        if (col_null(c, aSel[k])) aM[k] = et->nullRes;
    return 0;
  }
  if (c->kind == K_DICT) {
    /* here the true entries are scattered (a run was decided above) */
    const ex_dmask *dm = (const ex_dmask *)*ppDict;
    const uint64_t *u = col_codes(c, b0, nb);
    const uint8_t *m = dm->m;
    for (k = 0; k < n; k++) {
      uint64_t code = u[aSel[k] - b0];
      aM[k] = code < c->d.nAux ? m[code] : 0;
    }
    if (c->d.aNull)
      for (k = 0; k < n; k++)
        if (col_null(c, aSel[k])) aM[k] = et->nullRes;
    return 0;
  }
  for (k = 0; k < n; k++) {
    col_get(c, aSel[k], &v);
    aM[k] = (uint8_t)ev_one(et, &v);
  }
  return 0;
}

/* ---- top-N (program.h, TOP-N) ---- */

/* ORDER BY order of two values (BINARY; NULL first). */
static int ord_cmp(const ex_val *a, const ex_val *b) {
  return csq_value_cmp(a, b, CSQ_TF_BINARY);
}

/* Order of selected row aSel[x] against the key values aK of another row
** (< 0: x first), by the program's keys; ties are left to the caller. */
static int top_cmp(const csq_prog *pp, const ex_col *aCol, uint32_t r, const ex_val *aK) {
  for (int j = 0; j < pp->nTopKey; j++) {
    ex_val v;
    col_get(&aCol[pp->aTopSlot[j]], r, &v);
    int c = ord_cmp(&v, &aK[j]);
    if (c) return pp->aTopDesc[j] ? -c : c;
  }
  return 0;
}

/* Does position x sort after position y (keys, then row order)? */
static int top_after(const csq_prog *pp, const ex_col *aCol, const uint32_t *aSel, uint32_t x,
                     uint32_t y) {
  ex_val aK[CSQ_TOPN_MAX_KEYS];
  for (int j = 0; j < pp->nTopKey; j++) col_get(&aCol[pp->aTopSlot[j]], aSel[y], &aK[j]);
  int c = top_cmp(pp, aCol, aSel[x], aK);
  return c > 0 || (c == 0 && x > y);
}

static void top_sift_down(const csq_prog *pp, const ex_col *aCol, const uint32_t *aSel,
                          uint32_t *aH, uint32_t i, uint32_t n) {
  for (;;) {
    uint32_t l = 2 * i + 1, m = l;
    if (l >= n) return;
    if (l + 1 < n && top_after(pp, aCol, aSel, aH[l + 1], aH[l])) m = l + 1;
    if (!top_after(pp, aCol, aSel, aH[m], aH[i])) return;
    uint32_t t = aH[i];
    aH[i] = aH[m];
    aH[m] = t;
    i = m;
  }
}

static int cmp_u32(const void *x, const void *y) {
  uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
  return (a > b) - (a < b);
}

/* Keep in aSel[0..*pnSel) (ascending rows) only the nTop rows that sort
** first, still ascending. A max-heap of positions holds the kept rows with
** the one that sorts last at the root, whose key values are kept decoded:
** a row that does not belong costs one comparison against them. */
static int top_select(const csq_prog *pp, const ex_col *aCol, uint32_t *aSel, uint32_t *pnSel) {
  uint32_t n = *pnSel, nTop = pp->nTop, nH = 0;
  uint32_t *aH = malloc(sizeof(uint32_t) * nTop);
  if (!aH) return CSQ_FAULT_NOMEM;
  ex_val aRoot[CSQ_TOPN_MAX_KEYS];
  for (uint32_t x = 0; x < n; x++) {
    if (nH < nTop) {
      uint32_t i = nH++;
      aH[i] = x;
      while (i > 0) {
        uint32_t up = (i - 1) / 2;
        if (!top_after(pp, aCol, aSel, aH[i], aH[up])) break;
        uint32_t t = aH[i];
        aH[i] = aH[up];
        aH[up] = t;
        i = up;
      }
      if (nH == nTop)
        for (int j = 0; j < pp->nTopKey; j++)
          col_get(&aCol[pp->aTopSlot[j]], aSel[aH[0]], &aRoot[j]);
      continue;
    }
    /* a later row replaces the root only if it sorts strictly before it */
    if (top_cmp(pp, aCol, aSel[x], aRoot) >= 0) continue;
    aH[0] = x;
    top_sift_down(pp, aCol, aSel, aH, 0, nH);
    for (int j = 0; j < pp->nTopKey; j++) col_get(&aCol[pp->aTopSlot[j]], aSel[aH[0]], &aRoot[j]);
  }
  qsort(aH, nH, sizeof(uint32_t), cmp_u32);
  for (uint32_t i = 0; i < nH; i++) aSel[i] = aSel[aH[i]];
  *pnSel = nH;
  free(aH);
  return 0;
}

/* ---- output ---- */

typedef struct ex_outcol {
  uint8_t clsMask;
  uint64_t nHeap;
} ex_outcol;

static void put32(uint8_t *p, uint32_t v) {
  memcpy(p, &v, 4);
}
static void put64(uint8_t *p, uint64_t v) {
  memcpy(p, &v, 8);
}

static uint64_t pad8(uint64_t n) {
  return (n + 7) & ~(uint64_t)7;
}

/* Class mask and heap bytes of column c over rows aSel[0..n). */
static void out_size(const ex_col *c, const uint32_t *aSel, uint32_t n, ex_outcol *o) {
  ex_val v;
  o->clsMask = 0;
  o->nHeap = 0;
  if (c->kind == K_INT || c->kind == K_REAL) {
    uint8_t m = 0;
    for (uint32_t k = 0; k < n; k++)
      m |= (uint8_t)(col_null(c, aSel[k]) ? 1u << CSQ_NULL
                                          : 1u << (c->kind == K_INT ? CSQ_INT : CSQ_REAL));
    o->clsMask = m;
    return;
  }
  if (c->kind == K_TEXTP && !c->d.aNull && !c->bAllNull && n) {
    for (uint32_t k = 0; k < n; k++)
      o->nHeap +=
          csq_le32(c->d.aOff + 4 * (size_t)aSel[k] + 4) - csq_le32(c->d.aOff + 4 * (size_t)aSel[k]);
    o->clsMask = (uint8_t)(1u << c->d.cls);
    return;
  }
  for (uint32_t k = 0; k < n; k++) {
    col_get(c, aSel[k], &v);
    o->clsMask |= (uint8_t)(1u << v.cls);
    if (v.cls == CSQ_TEXT || v.cls == CSQ_BLOB) o->nHeap += v.n;
  }
}

/* Did the job's omit mask (NULL: none) leave output column j out? */
static int out_omitted(const uint8_t *aOmit, int j) {
  return aOmit && (csq_le64(aOmit + 8 * (size_t)(j / 64)) >> (j % 64)) & 1;
}

static int mask_single(uint8_t m) {
  return m && !(m & (m - 1));
}

static uint64_t col_bytes(const ex_outcol *o, uint32_t n) {
  int bCls = !mask_single(o->clsMask) && n > 0;
  int bLen = (o->clsMask & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) != 0;
  return (bCls ? pad8(n) : 0) + 8ull * n + (bLen ? pad8(4ull * n) : 0) + pad8(o->nHeap);
}

/* Write column c over aSel[0..n) at out (sized by col_bytes). */
static void out_write(ex_col *c, const uint32_t *aSel, uint32_t n, const ex_outcol *o,
                      uint8_t *out) {
  int bCls = !mask_single(o->clsMask) && n > 0;
  int bLen = (o->clsMask & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) != 0;
  /* SLM addresses are only 4-byte aligned: store through memcpy */
  uint8_t *aCls = bCls ? out : NULL;
  uint8_t *aVal = out + (bCls ? pad8(n) : 0);
  uint8_t *aLen = bLen ? aVal + 8ull * n : NULL;
  uint8_t *aHeap = aVal + 8ull * n + (bLen ? pad8(4ull * n) : 0);
  uint64_t nHeap = 0;
  ex_val v;
  if (bCls && (pad8(n) > n)) memset(out + n, 0, pad8(n) - n);
  if (bLen && pad8(4ull * n) > 4ull * n) memset(aLen + 4ull * n, 0, 4);
  if ((c->kind == K_INT || c->kind == K_REAL) && !c->bAllNull) {
    /* batch by batch: the values of the rows of one aligned batch as 8-byte
    ** words, unpacking just theirs when few of the batch's rows are here */
    const uint8_t cls = c->kind == K_INT ? CSQ_INT : CSQ_REAL;
    const int bCodes = c->d.enc == CSQ_ENC_INT_FOR || c->d.enc == CSQ_ENC_REAL_DEC;
    uint64_t aU[BATCH];
    double aD[BATCH];
    uint32_t k = 0;
    while (k < n) {
      uint32_t b0 = aSel[k] / BATCH * BATCH, e = k;
      while (e < n && aSel[e] < b0 + BATCH) e++;
      uint32_t nb = c->d.nVal - b0 < BATCH ? c->d.nVal - b0 : BATCH, m = e - k;
      if (bCodes && c->b0 != b0 && (uint64_t)m * 4 < nb) {
        col_sel_codes(c, b0, aSel + k, m, aU);
        if (cls == CSQ_INT) {
          for (uint32_t j = 0; j < m; j++) aU[j] += (uint64_t)c->d.iRef;
        } else {
          csq_dec_values(aU, m, c->d.iRef, c->d.nAux, aD);
          memcpy(aU, aD, 8 * (size_t)m);
        }
      } else if (cls == CSQ_INT) {
        col_ints(c, b0, nb);
        gather8(aU, c->aI, aSel + k, m, b0);
      } else {
        col_reals(c, b0, nb);
        gather8(aU, c->aR, aSel + k, m, b0);
      }
      for (uint32_t j = 0; j < m; j++, k++) {
        int bNull = col_null(c, aSel[k]);
        put64(aVal + 8ull * k, bNull ? 0 : aU[j]);
        if (aCls) aCls[k] = bNull ? CSQ_NULL : cls;
      }
    }
  } else {
    for (uint32_t k = 0; k < n; k++) {
      col_get(c, aSel[k], &v);
      uint64_t u = 0;
      switch (v.cls) {
      case CSQ_INT:
        u = (uint64_t)v.i;
        break;
      case CSQ_REAL:
        memcpy(&u, &v.r, 8);
        break;
      case CSQ_TEXT:
      case CSQ_BLOB:
        u = nHeap;
        if (v.n) memcpy(aHeap + nHeap, v.z, v.n);
        nHeap += v.n;
        break;
      default:
        break;
      }
      put64(aVal + 8ull * k, u);
      if (aCls) aCls[k] = v.cls;
      if (aLen) put32(aLen + 4ull * k, (v.cls == CSQ_TEXT || v.cls == CSQ_BLOB) ? v.n : 0);
    }
  }
  if (pad8(nHeap) > nHeap) memset(aHeap + nHeap, 0, pad8(nHeap) - nHeap);
}

/* ---- aggregation (program.h, AGGREGATION) ----
** Per run of selected rows inside one aligned batch: every expression is
** evaluated into a vector (ex_ev), each row gets a group id (a direct table
** indexed by dictionary / frame-of-reference codes when every key is a
** narrow column, else a hash table on the key values), then each aggregate
** updates its states with a typed loop. Nothing is mutated before the run is
** known to fit the output area, so a full area cuts the result at a run. */

/* An expression's values over a run: one class for all (cls) or per row. */
typedef struct ex_ev {
  uint8_t cls;     /* CSQ_* of every value, or 0: see aCls */
  uint8_t bAsReal; /* cls INT, and aR holds (double)aI[k] too (a constant) */
  uint8_t bFilled; /* a constant's vectors hold all BATCH rows already */
  uint8_t *aCls;
  int64_t *aI; /* a column's may point into the column's batch (ev_col) */
  double *aR;
  const uint8_t **aZ;
  uint32_t *aN;
  int64_t *aIOwn;  /* this vector's own arrays, which aI and aR point to again */
  double *aROwn;   /* before each run */
  uint64_t mag;    /* cls INT: every aI[k] has aI[k] ^ (aI[k] >> 63) <= mag
                   ** (known from the encoding), else UINT64_MAX */
  uint8_t bNonNeg; /* cls INT, mag known, and no aI[k] is negative */
} ex_ev;

/* SUM / TOTAL / AVG state (48 bytes, 16-aligned inside a group's block). */
typedef struct ag_sum {
  __int128 isum; /* exact sum of the INTEGER values */
  __int128 ineg; /* sum of the magnitudes of the negative ones: bounds any
                    running sum, for SQLite's "integer overflow" (agg.c) */
  int64_t cnt;   /* non-NULL values */
  int64_t nReal; /* REAL values */
  double rs, rc; /* Kahan-Babuska-Neumaier sum of the REAL values */
} ag_sum;

#define AG_DIRECT_MAX (1u << 16) /* largest product of key domains for the direct table */
#define AG_LANES      4          /* per-group scratch sums per run (REAL: four running sums) */

typedef struct ag_tab {
  int nKey, nAgg, nCol;
  uint32_t nGroup, nAlloc;
  ex_val *aKey;     /* nGroup x nKey */
  uint64_t *aHashG; /* hash of each group's key */
  uint8_t *aState;  /* nGroup x stride */
  uint32_t stride;
  uint32_t aOff[CSQ_AGG_MAX_AGGS];
  uint32_t *aSlot; /* hash table: group + 1, 0 = empty */
  uint32_t nSlot;
  int32_t *aDirect; /* direct table: composite code -> group, -1 none */
  uint32_t nDirect;
  uint32_t aDom[CSQ_AGG_MAX_KEYS]; /* direct: domain of each key (its NULL code = dom - 1) */
  uint64_t nVar;                   /* TEXT/BLOB bytes held by keys and MIN/MAX states */
  /* per run: rows of each group (0 outside the run's touched groups) and a
  ** scratch real sum per group */
  uint32_t *aRunN;
  double *aRunR;    /* AG_LANES per group */
  uint32_t *aTouch; /* groups the run touched */
  uint32_t nTouch;
  /* the run's rows grouped (ag_group_rows, whenever there are several
  ** groups): touched group aTouch[j] has rows aPerm[aSeg[j] .. aSeg[j+1]),
  ** in row order */
  uint32_t *aPerm, *aSeg;
} ag_tab;

static inline uint8_t ev_cls(const ex_ev *e, uint32_t k) {
  return e->cls ? e->cls : e->aCls[k];
}

static inline void ev_get(const ex_ev *e, uint32_t k, ex_val *v) {
  v->cls = ev_cls(e, k);
  switch (v->cls) {
  case CSQ_INT:
    v->i = e->aI[k];
    break;
  case CSQ_REAL:
    v->r = e->aR[k];
    break;
  case CSQ_TEXT:
  case CSQ_BLOB:
    v->z = e->aZ[k];
    v->n = e->aN[k];
    break;
  default:
    break;
  }
}

static inline void ev_put(ex_ev *e, uint32_t k, const ex_val *v) {
  e->aCls[k] = v->cls;
  e->aI[k] = v->i;
  e->aR[k] = v->r;
  e->aZ[k] = v->z;
  e->aN[k] = v->n;
}

/* After per-row classes were written: make the vector uniform if it is. */
static void ev_settle(ex_ev *e, uint32_t n) {
  uint8_t m = 0;
  for (uint32_t k = 0; k < n; k++) m |= (uint8_t)(1u << e->aCls[k]);
  e->cls = mask_single(m) ? (uint8_t)__builtin_ctz(m) : n ? 0 : CSQ_NULL;
}

/* x ^ (x >> 63): |x|, or |x| - 1 for a negative x. */
static inline uint64_t mag_of(int64_t x) {
  return (uint64_t)(x ^ (x >> 63));
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
      col_sel_codes(c, b0, aSel, n, u);
      for (k = 0; k < n; k++) u[k] += ref;
    } else if (c->kind == K_INT) {
      col_ints(c, b0, nb);
      if (bDense) /* read in place: nothing writes a column's vector */
        e->aI = c->aI + (aSel[0] - b0);
      else
        gather8(e->aI, c->aI, aSel, n, b0);
    } else if (c->d.enc == CSQ_ENC_REAL_DEC && c->b0 != b0 && n < nb / 4) {
      /* few rows of the batch survived the filter: convert just those */
      uint64_t u[BATCH];
      col_sel_codes(c, b0, aSel, n, u);
      csq_dec_values(u, n, c->d.iRef, c->d.nAux, e->aR);
    } else {
      col_reals(c, b0, nb);
      if (bDense)
        e->aR = c->aR + (aSel[0] - b0);
      else
        gather8(e->aR, c->aR, aSel, n, b0);
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
    col_get(c, aSel[k], &v);
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
static int ev_all(const ex_prog *ep, ex_col *aCol, uint8_t **apCondDict, ex_ev *aEv, uint8_t *aM,
                  const uint8_t *aNeed, uint32_t b0, uint32_t nb, const uint32_t *aSel,
                  uint32_t n) {
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
    case CSQ_EX_CASE: {
      const ex_term *et = &ep->aCondT[x->a];
      rc = eval_term(et, &aCol[et->t.slot], b0, nb, aSel, n, aM, &apCondDict[x->a]);
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

/* ---- keys (hashed and compared by value.h's csq_value_hash/eq) ---- */

static inline uint64_t var_bytes(const ex_val *v) {
  return v->cls == CSQ_TEXT || v->cls == CSQ_BLOB ? v->n : 0;
}

static void ag_tab_free(ag_tab *t) {
  free(t->aRunN);
  free(t->aRunR);
  free(t->aTouch);
  free(t->aPerm);
  free(t->aSeg);
  free(t->aKey);
  free(t->aHashG);
  free(t->aState);
  free(t->aSlot);
  free(t->aDirect);
}

/* Append a group with key values aK (nKey) and hash h; its index or -1 (OOM). */
static int64_t ag_new_group(ag_tab *t, const ex_val *aK, uint64_t h) {
  if (t->nGroup == t->nAlloc) {
    uint32_t nNew = t->nAlloc ? t->nAlloc * 2 : 64;
    ex_val *aKey = realloc(t->aKey, sizeof(ex_val) * (size_t)nNew * (t->nKey ? t->nKey : 1));
    if (!aKey) return -1;
    t->aKey = aKey;
    uint64_t *aH = realloc(t->aHashG, sizeof(uint64_t) * nNew);
    if (!aH) return -1;
    t->aHashG = aH;
    uint8_t *aS = realloc(t->aState, (size_t)t->stride * nNew);
    if (!aS) return -1;
    t->aState = aS;
    uint32_t *aN = realloc(t->aRunN, sizeof(uint32_t) * nNew);
    if (!aN) return -1;
    t->aRunN = aN;
    memset(aN + t->nAlloc, 0, sizeof(uint32_t) * (nNew - t->nAlloc));
    double *aR = realloc(t->aRunR, sizeof(double) * AG_LANES * nNew);
    if (!aR) return -1;
    t->aRunR = aR;
    t->nAlloc = nNew;
  }
  uint32_t g = t->nGroup++;
  for (int j = 0; j < t->nKey; j++) {
    t->aKey[(size_t)g * t->nKey + j] = aK[j];
    t->nVar += var_bytes(&aK[j]);
  }
  t->aHashG[g] = h;
  memset(t->aState + (size_t)g * t->stride, 0, t->stride);
  return g;
}

/* Make room in the hash table for one more group. 0 or -ENOMEM. */
static int ag_hash_grow(ag_tab *t) {
  if ((uint64_t)(t->nGroup + 1) * 2 <= t->nSlot) return 0;
  uint32_t nNew = t->nSlot ? t->nSlot * 2 : 1024;
  uint32_t *a = calloc(nNew, sizeof(uint32_t));
  if (!a) return -ENOMEM;
  for (uint32_t g = 0; g < t->nGroup; g++) {
    uint32_t pos = (uint32_t)t->aHashG[g] & (nNew - 1);
    while (a[pos]) pos = (pos + 1) & (nNew - 1);
    a[pos] = g + 1;
  }
  free(t->aSlot);
  t->aSlot = a;
  t->nSlot = nNew;
  return 0;
}

/* Hash of a group's key values, the same whether the keys come from row
** vectors (ag_ids_hash) or from a seeded result (ag_seed). */
static uint64_t keys_hash(const ex_val *aK, int nKey) {
  uint64_t h = 0x84222325cbf29ce4ull;
  for (int j = 0; j < nKey; j++) h = (h ^ csq_value_hash(&aK[j])) * 0x100000001b3ull;
  return csq_mix64(h);
}

/* The group whose keys equal aK (hash h), created if none; -1 when out of
** memory. The hash table must have room (ag_hash_grow). */
static int64_t ag_lookup(ag_tab *t, const ex_val *aK, uint64_t h) {
  int nKey = t->nKey;
  uint32_t mask = t->nSlot - 1, pos = (uint32_t)h & mask, s;
  while ((s = t->aSlot[pos]) != 0) {
    uint32_t c = s - 1;
    if (t->aHashG[c] == h) {
      const ex_val *gk = &t->aKey[(size_t)c * nKey];
      int j = 0;
      while (j < nKey && csq_value_eq(&gk[j], &aK[j])) j++;
      if (j == nKey) return c;
    }
    pos = (pos + 1) & mask;
  }
  int64_t g = ag_new_group(t, aK, h);
  if (g >= 0) t->aSlot[pos] = (uint32_t)g + 1;
  return g;
}

/* Group ids of rows [0, n) by hashing the key vectors (row k's values at
** X[k], or k if X is NULL; see agg_exec). 0 or a fault. */
static int ag_ids_hash(ag_tab *t, const csq_prog *pp, const ex_ev *aEv, uint32_t n,
                       const uint32_t *X, uint32_t *aGid) {
  uint64_t aH[BATCH];
  int nKey = t->nKey;
  ex_val aK[CSQ_AGG_MAX_KEYS];
  memset(aK, 0, sizeof(aK));
  for (uint32_t k = 0; k < n; k++) aH[k] = 0x84222325cbf29ce4ull;
  for (int j = 0; j < nKey; j++) {
    const ex_ev *e = &aEv[pp->aKey[j]];
    if (e->cls == CSQ_INT) {
      for (uint32_t k = 0; k < n; k++)
        aH[k] = (aH[k] ^ csq_mix64((uint64_t)e->aI[X ? X[k] : k])) * 0x100000001b3ull;
    } else {
      for (uint32_t k = 0; k < n; k++) {
        ev_get(e, X ? X[k] : k, &aK[0]);
        aH[k] = (aH[k] ^ csq_value_hash(&aK[0])) * 0x100000001b3ull;
      }
    }
  }
  for (uint32_t k = 0; k < n; k++) {
    if (ag_hash_grow(t)) return CSQ_FAULT_NOMEM;
    for (int j = 0; j < nKey; j++) ev_get(&aEv[pp->aKey[j]], X ? X[k] : k, &aK[j]);
    int64_t g = ag_lookup(t, aK, csq_mix64(aH[k]));
    if (g < 0) return CSQ_FAULT_NOMEM;
    aGid[k] = (uint32_t)g;
  }
  return 0;
}

/* Domain of a key column for the direct table (codes 0..dom-2, NULL dom-1),
** or 0 if the column does not qualify. */
static uint32_t key_domain(const ex_col *c) {
  if (c->bAllNull || c->kind == K_CONSTX) return 2;
  if (c->kind == K_DICT) return c->d.nAux + 1;
  if (c->kind == K_INT && c->d.width <= 16) return (1u << c->d.width) + 1;
  return 0;
}

/* Group ids through the direct table: every key is a narrow column. With X
** (see agg_exec) the table index is computed for every batch row up to the
** run's last, in place, and looked up for the run's rows only. */
static int ag_ids_direct(ag_tab *t, const csq_prog *pp, ex_col *aCol, uint32_t b0, uint32_t nb,
                         const uint32_t *aSel, uint32_t n, const uint32_t *X, uint32_t *aGid) {
  uint32_t aIdx[BATCH];
  uint32_t stride = 1;
  /* rows k < nIdx; row k is batch row S ? S[k] - b0 : k */
  const uint32_t *S = X ? NULL : aSel;
  uint32_t nIdx = X ? (n ? X[n - 1] + 1 : 0) : n;
#define ROW(k) (S ? S[k] - b0 : (k))
  memset(aIdx, 0, sizeof(uint32_t) * nIdx);
  for (int j = 0; j < t->nKey; j++) {
    ex_col *c = &aCol[pp->aExpr[pp->aKey[j]].a];
    uint32_t dom = t->aDom[j], nullCode = dom - 1;
    if (c->bAllNull || c->kind == K_CONSTX) {
      for (uint32_t k = 0; k < nIdx; k++)
        aIdx[k] += stride * (col_null(c, b0 + ROW(k)) ? nullCode : 0);
    } else if (c->kind == K_DICT) {
      const uint64_t *u = col_codes(c, b0, nb);
      if (c->d.aNull) {
        for (uint32_t k = 0; k < nIdx; k++)
          aIdx[k] += stride * (col_null(c, b0 + ROW(k)) ? nullCode : (uint32_t)u[ROW(k)]);
      } else if (S) {
        uint64_t aU[BATCH];
        gather8(aU, u, aSel, n, b0);
        for (uint32_t k = 0; k < n; k++) aIdx[k] += stride * (uint32_t)aU[k];
      } else {
        for (uint32_t k = 0; k < nIdx; k++) aIdx[k] += stride * (uint32_t)u[k];
      }
    } else {
      col_ints(c, b0, nb);
      uint64_t ref = (uint64_t)c->d.iRef;
      if (c->d.aNull) {
        for (uint32_t k = 0; k < nIdx; k++)
          aIdx[k] +=
              stride *
              (col_null(c, b0 + ROW(k)) ? nullCode : (uint32_t)((uint64_t)c->aI[ROW(k)] - ref));
      } else {
        for (uint32_t k = 0; k < nIdx; k++)
          aIdx[k] += stride * (uint32_t)((uint64_t)c->aI[ROW(k)] - ref);
      }
    }
    stride *= dom;
  }
#undef ROW
  /* the run's indexes, checked, then their groups; a row whose group does
  ** not exist yet is rare (the first rows of each group): a second pass */
  uint32_t aRunIdx[BATCH], mx = 0;
  int32_t gOr = 0;
  if (X)
    for (uint32_t k = 0; k < n; k++) aRunIdx[k] = aIdx[X[k]];
  else
    memcpy(aRunIdx, aIdx, sizeof(uint32_t) * n);
  for (uint32_t k = 0; k < n; k++) mx = aRunIdx[k] > mx ? aRunIdx[k] : mx;
  if (n && mx >= t->nDirect) return CSQ_FAULT_CORRUPT_CHUNK; /* a code beyond its domain */
  for (uint32_t k = 0; k < n; k++) {
    int32_t g = t->aDirect[aRunIdx[k]];
    aGid[k] = (uint32_t)g;
    gOr |= g;
  }
  for (uint32_t k = 0; gOr < 0 && k < n; k++) {
    uint32_t idx = aRunIdx[k];
    int32_t g = t->aDirect[idx];
    if (g < 0) {
      ex_val aK[CSQ_AGG_MAX_KEYS];
      memset(aK, 0, sizeof(aK));
      for (int j = 0; j < t->nKey; j++) col_get(&aCol[pp->aExpr[pp->aKey[j]].a], aSel[k], &aK[j]);
      /* codes are this row group's: a seeded group is found by its values */
      int64_t gg;
      if (t->nSlot) {
        if (ag_hash_grow(t)) return CSQ_FAULT_NOMEM;
        gg = ag_lookup(t, aK, keys_hash(aK, t->nKey));
      } else {
        gg = ag_new_group(t, aK, idx);
      }
      if (gg < 0) return CSQ_FAULT_NOMEM;
      g = (int32_t)gg;
      t->aDirect[idx] = g;
    }
    aGid[k] = (uint32_t)g;
  }
  return 0;
}

/* ---- aggregate updates ---- */

#if defined(__x86_64__) && defined(__GNUC__)
#define AG_PART_MAX 8 /* groups ag_partition_avx2 picks out one by one, at most */
/* What the touched-group count and ag_group_rows do, for a table of at most
** AG_PART_MAX groups: each group's rows are picked out of the run in turn,
** 8 at a time (a compare, and a compress of the rows' positions through a
** permutation that PDEP/PEXT make from the compare's mask), which counts
** them too. The counting sort's per-row counters in memory, which
** consecutive rows of one group wait on, are gone. */
__attribute__((target("avx2,bmi2,popcnt"))) static void
ag_partition_avx2(ag_tab *t, const uint32_t *aGid, uint32_t n, const uint32_t *X) {
  uint32_t *P = t->aPerm, pos = 0;
  const __m256i vIota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  t->nTouch = 0;
  for (uint32_t g = 0; g < t->nGroup; g++) {
    uint32_t start = pos, k = 0;
    const __m256i vG = _mm256_set1_epi32((int)g);
    for (; k + 8 <= n; k += 8) {
      __m256i vGid = _mm256_loadu_si256((const __m256i *)(const void *)(aGid + k));
      unsigned bits =
          (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(vGid, vG)));
      uint64_t wanted =
          _pext_u64(0x0706050403020100ull, _pdep_u64(bits, 0x0101010101010101ull) * 0xFF);
      __m256i perm = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)wanted));
      __m256i src = X ? _mm256_loadu_si256((const __m256i *)(const void *)(X + k))
                      : _mm256_add_epi32(_mm256_set1_epi32((int)k), vIota);
      /* all 8 lanes are stored, the selected ones first: P has 8 spare */
      _mm256_storeu_si256((__m256i *)(void *)(P + pos), _mm256_permutevar8x32_epi32(src, perm));
      pos += (uint32_t)__builtin_popcount(bits);
    }
    for (; k < n; k++) {
      P[pos] = X ? X[k] : k;
      pos += aGid[k] == g;
    }
    if (pos > start) {
      t->aSeg[t->nTouch] = start;
      t->aTouch[t->nTouch++] = g;
      t->aRunN[g] = pos - start;
    }
  }
  t->aSeg[t->nTouch] = pos;
}
#endif

/* Order the run's n rows by group (a counting sort on aRunN, the rows of
** each group kept in row order): the sums below then add each group's
** values in registers, instead of through per-group lanes in memory where
** rows of the same group wait for one another's stores. */
static void ag_group_rows(ag_tab *t, const uint32_t *aGid, uint32_t n, const uint32_t *X) {
  uint32_t pos = 0;
  for (uint32_t j = 0; j < t->nTouch; j++) { /* aRunN: counts -> starts */
    uint32_t g = t->aTouch[j], c = t->aRunN[g];
    t->aSeg[j] = pos;
    t->aRunN[g] = pos;
    pos += c;
  }
  t->aSeg[t->nTouch] = pos;
  if (X) /* aPerm holds where the values are (agg_exec) */
    for (uint32_t k = 0; k < n; k++) t->aPerm[t->aRunN[aGid[k]]++] = X[k];
  else
    for (uint32_t k = 0; k < n; k++) t->aPerm[t->aRunN[aGid[k]]++] = k; /* -> ends */
  for (uint32_t j = 0; j < t->nTouch; j++)                              /* -> counts again */
    t->aRunN[t->aTouch[j]] = t->aSeg[j + 1] - t->aSeg[j];
}

/* Group the run's rows for ag_update: the touched groups with their row
** counts, and with more than one group the rows in group order (aPerm,
** aSeg). */
static void ag_order_run(ag_tab *t, const uint32_t *aGid, uint32_t n, const uint32_t *X) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (t->nGroup > 1 && t->nGroup <= AG_PART_MAX && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt")) {
    ag_partition_avx2(t, aGid, n, X);
    return;
  }
#endif
  t->nTouch = 0;
  for (uint32_t k = 0; k < n; k++)
    if (t->aRunN[aGid[k]]++ == 0) t->aTouch[t->nTouch++] = aGid[k];
  if (t->nGroup > 1) ag_group_rows(t, aGid, n, X);
}

/* Update aggregate ia's states with rows [0, n) of the run, whose groups
** are aGid and whose per-group row counts are t->aRunN over t->aTouch.
** Uniform vectors take typed loops: counts come from the run's histogram,
** real sums are summed per group for the run (at most CSQ_PROG_BATCH plain
** additions) and then added to the state with compensation. Row k's value is
** at X[k] in e's vectors, or at k if X is NULL. 0 or a fault. */
static int ag_update(ag_tab *t, const csq_pagg *a, int ia, const ex_ev *e, const uint32_t *aGid,
                     uint32_t n, const uint32_t *X) {
  uint8_t *base = t->aState + t->aOff[ia];
  size_t st = t->stride;
  uint32_t k, nT = t->nTouch;
  const uint32_t *aT = t->aTouch, *aRunN = t->aRunN;
#define CNT(g)   (*(int64_t *)(base + (size_t)(g)*st))
#define SUMST(g) ((ag_sum *)(base + (size_t)(g)*st))
#define BEST(g)  ((ex_val *)(base + (size_t)(g)*st))
#define IX(k)    (X ? X[k] : (k))
  switch (a->fn) {
  case CSQ_AGG_COUNT_STAR:
    for (k = 0; k < nT; k++) CNT(aT[k]) += aRunN[aT[k]];
    return 0;
  case CSQ_AGG_COUNT:
    if (e->cls == CSQ_NULL) return 0;
    if (e->cls)
      for (k = 0; k < nT; k++) CNT(aT[k]) += aRunN[aT[k]];
    else
      for (k = 0; k < n; k++) CNT(aGid[k]) += e->aCls[IX(k)] != CSQ_NULL;
    return 0;
  case CSQ_AGG_SUM:
  case CSQ_AGG_TOTAL:
  case CSQ_AGG_AVG:
    switch (e->cls) {
    case CSQ_NULL:
      return 0;
    case CSQ_INT:
      if (t->nGroup == 1) {
        __int128 acc = 0, neg = 0;
        for (k = 0; k < n; k++) {
          int64_t x = e->aI[IX(k)];
          acc += x;
          neg += (((uint64_t)0 - (uint64_t)x) & (uint64_t)(x >> 63));
        }
        SUMST(0)->isum += acc;
        SUMST(0)->ineg += neg;
      } else {
        /* Values under 2^51 in magnitude cannot overflow an int64 over one
        ** run (BATCH rows): sum them in int64 (the sum and the negatives'
        ** magnitudes), and add to the 128-bit states once per group. */
        /* (with X, every row of the batch: the run's are among them) */
        uint64_t m = e->mag;
        uint32_t nAll = X && n ? X[n - 1] + 1 : n;
        if (m >= ((uint64_t)1 << 51))
          for (k = 0, m = 0; k < nAll; k++) m |= mag_of(e->aI[k]);
        if (m < ((uint64_t)1 << 51) && e->bNonNeg) {
          /* as below, with no negative values to track */
          for (k = 0; k < nT; k++) {
            int64_t s0 = 0, s1 = 0;
            uint32_t q = t->aSeg[k], qEnd = t->aSeg[k + 1];
            for (; q + 2 <= qEnd; q += 2) {
              s0 += e->aI[t->aPerm[q]];
              s1 += e->aI[t->aPerm[q + 1]];
            }
            if (q < qEnd) s0 += e->aI[t->aPerm[q]];
            SUMST(aT[k])->isum += (__int128)s0 + s1;
          }
        } else if (m < ((uint64_t)1 << 51)) {
          /* group by group in registers (ag_group_rows) */
          for (k = 0; k < nT; k++) {
            int64_t s0 = 0, s1 = 0, n0 = 0, n1 = 0;
            uint32_t q = t->aSeg[k], qEnd = t->aSeg[k + 1];
            for (; q + 2 <= qEnd; q += 2) {
              int64_t x0 = e->aI[t->aPerm[q]], x1 = e->aI[t->aPerm[q + 1]];
              s0 += x0;
              s1 += x1;
              n0 += x0 & (x0 >> 63);
              n1 += x1 & (x1 >> 63);
            }
            if (q < qEnd) {
              int64_t x0 = e->aI[t->aPerm[q]];
              s0 += x0;
              n0 += x0 & (x0 >> 63);
            }
            ag_sum *s = SUMST(aT[k]);
            s->isum += (__int128)s0 + s1;
            s->ineg -= (__int128)n0 + n1;
          }
        } else {
          for (k = 0; k < n; k++) {
            int64_t x = e->aI[IX(k)];
            ag_sum *s = SUMST(aGid[k]);
            s->isum += x;
            s->ineg += (((uint64_t)0 - (uint64_t)x) & (uint64_t)(x >> 63));
          }
        }
      }
      for (k = 0; k < nT; k++) SUMST(aT[k])->cnt += aRunN[aT[k]];
      return 0;
    case CSQ_REAL: {
      double *aR = t->aRunR;
      const double *x = e->aR;
      for (k = 0; k < nT; k++) memset(&aR[AG_LANES * aT[k]], 0, sizeof(double) * AG_LANES);
      if (t->nGroup == 1) {
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        if (X) {
          for (k = 0; k + 4 <= n; k += 4) {
            a0 += x[X[k]];
            a1 += x[X[k + 1]];
            a2 += x[X[k + 2]];
            a3 += x[X[k + 3]];
          }
          for (; k < n; k++) a0 += x[X[k]];
        } else {
          for (k = 0; k + 4 <= n; k += 4) {
            a0 += x[k];
            a1 += x[k + 1];
            a2 += x[k + 2];
            a3 += x[k + 3];
          }
          for (; k < n; k++) a0 += x[k];
        }
        aR[0] = a0;
        aR[1] = a1;
        aR[2] = a2;
        aR[3] = a3;
      } else {
        /* group by group (ag_group_rows), four running sums in registers */
        for (k = 0; k < nT; k++) {
          double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
          uint32_t q = t->aSeg[k], qEnd = t->aSeg[k + 1];
          const uint32_t *P = t->aPerm;
          for (; q + 4 <= qEnd; q += 4) {
            a0 += x[P[q]];
            a1 += x[P[q + 1]];
            a2 += x[P[q + 2]];
            a3 += x[P[q + 3]];
          }
          for (; q < qEnd; q++) a0 += x[P[q]];
          double *l = &aR[AG_LANES * aT[k]];
          l[0] = a0;
          l[1] = a1;
          l[2] = a2;
          l[3] = a3;
        }
      }
      for (k = 0; k < nT; k++) {
        ag_sum *s = SUMST(aT[k]);
        const double *l = &aR[AG_LANES * aT[k]];
        s->cnt += aRunN[aT[k]];
        s->nReal += aRunN[aT[k]];
        csq_kbn_add(&s->rs, &s->rc, l[0]);
        csq_kbn_add(&s->rs, &s->rc, l[1]);
        csq_kbn_add(&s->rs, &s->rc, l[2]);
        csq_kbn_add(&s->rs, &s->rc, l[3]);
      }
      return 0;
    }
    case 0:
      for (k = 0; k < n; k++) {
        ag_sum *s = SUMST(aGid[k]);
        uint32_t r = IX(k);
        switch (e->aCls[r]) {
        case CSQ_INT:
          s->isum += e->aI[r];
          if (e->aI[r] < 0) s->ineg += (uint64_t)0 - (uint64_t)e->aI[r];
          s->cnt++;
          break;
        case CSQ_REAL:
          s->cnt++;
          s->nReal++;
          csq_kbn_add(&s->rs, &s->rc, e->aR[r]);
          break;
        case CSQ_NULL:
          break;
        default:
          return CSQ_FAULT_NOT_NUMERIC;
        }
      }
      return 0;
    default:
      return n ? CSQ_FAULT_NOT_NUMERIC : 0;
    }
  default: { /* MIN / MAX */
    int coll = a->flags & CSQ_TF_COLL_MASK, sign = a->fn == CSQ_AGG_MIN ? -1 : 1;
    if (e->cls == CSQ_NULL) return 0;
    if (e->cls == CSQ_INT) {
      for (k = 0; k < n; k++) {
        ex_val *b = BEST(aGid[k]);
        int64_t x = e->aI[IX(k)];
        if (b->cls == CSQ_INT) {
          if (sign < 0 ? x < b->i : x > b->i) b->i = x;
          continue;
        }
        ex_val v;
        v.cls = CSQ_INT;
        v.i = x;
        if (b->cls == 0 || csq_value_cmp(&v, b, coll) * sign > 0) {
          t->nVar -= var_bytes(b);
          memset(b, 0, sizeof(*b));
          b->cls = CSQ_INT;
          b->i = x;
        }
      }
      return 0;
    }
    ex_val v;
    memset(&v, 0, sizeof(v));
    for (k = 0; k < n; k++) {
      ev_get(e, IX(k), &v);
      if (v.cls == CSQ_NULL) continue;
      ex_val *b = BEST(aGid[k]);
      if (b->cls == 0 || csq_value_cmp(&v, b, coll) * sign > 0) {
        t->nVar += var_bytes(&v) - var_bytes(b);
        *b = v;
      }
    }
    return 0;
  }
  }
#undef CNT
#undef SUMST
#undef BEST
#undef IX
}

/* ---- the result ---- */

/* Upper bound of the result's bytes with nGroup rows and nVar heap bytes. */
static uint64_t ag_bound(const ag_tab *t, uint64_t nGroup, uint64_t nVar) {
  return CSQ_RES_HDR + (uint64_t)CSQ_RES_COL_SZ * t->nCol + (uint64_t)t->nCol * (13 * nGroup + 21) +
         nVar;
}

/* The value of result column j (key or state) of group g. */
static void ag_cell(const ag_tab *t, const csq_prog *pp, int j, uint32_t g, ex_val *v) {
  memset(v, 0, sizeof(*v));
  if (j < t->nKey) {
    *v = t->aKey[(size_t)g * t->nKey + j];
    return;
  }
  j -= t->nKey;
  for (int ia = 0; ia < t->nAgg; ia++) {
    int nc = csq_agg_state_cols(pp->aAgg[ia].fn);
    if (j >= nc) {
      j -= nc;
      continue;
    }
    const uint8_t *p = t->aState + (size_t)g * t->stride + t->aOff[ia];
    switch (pp->aAgg[ia].fn) {
    case CSQ_AGG_COUNT_STAR:
    case CSQ_AGG_COUNT:
      v->cls = CSQ_INT;
      v->i = *(const int64_t *)p;
      return;
    case CSQ_AGG_MIN:
    case CSQ_AGG_MAX:
      *v = *(const ex_val *)p;
      if (v->cls == 0) v->cls = CSQ_NULL;
      return;
    default: {
      const ag_sum *s = (const ag_sum *)p;
      v->cls = j == 4 || j == 5 ? CSQ_REAL : CSQ_INT;
      switch (j) {
      case 0:
        v->i = s->cnt;
        break;
      case 1:
        v->i = s->nReal;
        break;
      case 2:
        v->i = (int64_t)(uint64_t)s->isum;
        break;
      case 3:
        v->i = (int64_t)(s->isum >> 64);
        break;
      case 4:
        v->r = s->rs;
        break;
      case 5:
        v->r = s->rc;
        break;
      case 6: { /* positives and negatives, each saturating at INT64_MAX */
        __int128 pos = s->isum + s->ineg;
        v->i = pos > INT64_MAX ? INT64_MAX : (int64_t)pos;
        break;
      }
      default:
        v->i = s->ineg > INT64_MAX ? INT64_MAX : (int64_t)s->ineg;
        break;
      }
      return;
    }
    }
  }
}

/* Write the result of t (rows processed up to nextRow) at pOut. */
static uint64_t ag_write(const ag_tab *t, const csq_prog *pp, uint8_t *pOut, uint32_t nextRow) {
  uint32_t n = t->nGroup;
  uint8_t *q = pOut + CSQ_RES_HDR + (size_t)CSQ_RES_COL_SZ * t->nCol;
  ex_val v;
  for (int j = 0; j < t->nCol; j++) {
    uint8_t m = 0;
    uint64_t nHeap = 0;
    for (uint32_t g = 0; g < n; g++) {
      ag_cell(t, pp, j, g, &v);
      m |= (uint8_t)(1u << v.cls);
      nHeap += var_bytes(&v);
    }
    int bCls = !mask_single(m) && n > 0;
    int bLen = (m & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) != 0;
    uint8_t *d = pOut + CSQ_RES_HDR + (size_t)CSQ_RES_COL_SZ * j;
    memset(d, 0, CSQ_RES_COL_SZ);
    d[0] = m;
    d[1] = (uint8_t)bCls;
    d[2] = (uint8_t)bLen;
    put64(d + 8, nHeap);
    uint8_t *aCls = bCls ? q : NULL;
    uint8_t *aVal = q + (bCls ? pad8(n) : 0);
    uint8_t *aLen = bLen ? aVal + 8ull * n : NULL;
    uint8_t *aHeap = aVal + 8ull * n + (bLen ? pad8(4ull * n) : 0);
    if (bCls) memset(q, 0, pad8(n));
    if (bLen) memset(aLen, 0, pad8(4ull * n));
    uint64_t off = 0;
    for (uint32_t g = 0; g < n; g++) {
      ag_cell(t, pp, j, g, &v);
      uint64_t u = 0;
      switch (v.cls) {
      case CSQ_INT:
        u = (uint64_t)v.i;
        break;
      case CSQ_REAL:
        memcpy(&u, &v.r, 8);
        break;
      case CSQ_TEXT:
      case CSQ_BLOB:
        u = off;
        if (v.n) memcpy(aHeap + off, v.z, v.n);
        put32(aLen + 4ull * g, v.n);
        off += v.n;
        break;
      default:
        break;
      }
      put64(aVal + 8ull * g, u);
      if (aCls) aCls[g] = v.cls;
    }
    if (pad8(off) > off) memset(aHeap + off, 0, pad8(off) - off);
    q = aHeap + pad8(off);
  }
  uint64_t nBytes = (uint64_t)(q - pOut);
  put32(pOut, CSQ_RES_MAGIC);
  put32(pOut + 4, n);
  put32(pOut + 8, nextRow);
  put32(pOut + 12, (uint32_t)t->nCol);
  put64(pOut + 16, nBytes);
  return nBytes;
}

/* One column of a result, located for reading (ag_seed). */
typedef struct ag_rcol {
  uint8_t cls; /* the one class of every value, or 0: see aCls */
  const uint8_t *aCls, *aVal, *aLen, *aHeap;
  uint64_t nHeap;
} ag_rcol;

/* Value r of a located result column; 0, or -1 if it points outside its heap. */
static int rcol_get(const ag_rcol *c, uint32_t r, ex_val *v) {
  memset(v, 0, sizeof(*v));
  v->cls = c->cls ? c->cls : c->aCls[r];
  uint64_t u = csq_le64(c->aVal + 8ull * r);
  switch (v->cls) {
  case CSQ_INT:
    v->i = (int64_t)u;
    return 0;
  case CSQ_REAL:
    memcpy(&v->r, &u, 8);
    return 0;
  case CSQ_TEXT:
  case CSQ_BLOB:
    v->n = csq_le32(c->aLen + 4ull * r);
    if (u > c->nHeap || v->n > c->nHeap - u) return -1;
    v->z = c->aHeap + u;
    return 0;
  case CSQ_NULL:
    return 0;
  default:
    return -1;
  }
}

/* Load a previous result of this program (p, n bytes: a private copy that
** outlives t) into t as its starting groups, for Execute with CSQ_EXEC_ACC.
** The bytes come from the output area, which the host owns between
** commands, so they are checked like any input. 0 or CSQ_FAULT_BAD_JOB /
** CSQ_FAULT_NOMEM. */
static int ag_seed(ag_tab *t, const csq_prog *pp, const int8_t *aAlias, const uint8_t *p,
                   uint64_t n) {
  uint32_t nRows = csq_le32(p + 4), nCol = csq_le32(p + 12);
  if (csq_le32(p) != CSQ_RES_MAGIC || nCol != (uint32_t)t->nCol ||
      CSQ_RES_HDR + (uint64_t)CSQ_RES_COL_SZ * nCol > n ||
      nCol > CSQ_AGG_MAX_KEYS + 8 * CSQ_AGG_MAX_AGGS)
    return CSQ_FAULT_BAD_JOB;
  ag_rcol aRc[CSQ_AGG_MAX_KEYS + 8 * CSQ_AGG_MAX_AGGS];
  uint64_t q = CSQ_RES_HDR + (uint64_t)CSQ_RES_COL_SZ * nCol;
  for (uint32_t j = 0; j < nCol; j++) {
    const uint8_t *d = p + CSQ_RES_HDR + (size_t)CSQ_RES_COL_SZ * j;
    ag_rcol *c = &aRc[j];
    uint8_t m = d[0], bCls = d[1], bLen = d[2];
    c->nHeap = csq_le64(d + 8);
    if (c->nHeap > n || (m & 0xC1)) return CSQ_FAULT_BAD_JOB;
    uint64_t need =
        (bCls ? pad8(nRows) : 0) + 8ull * nRows + (bLen ? pad8(4ull * nRows) : 0) + pad8(c->nHeap);
    if (nRows > n || need > n - q) return CSQ_FAULT_BAD_JOB;
    c->cls = 0;
    c->aCls = bCls ? p + q : NULL;
    c->aVal = p + q + (bCls ? pad8(nRows) : 0);
    c->aLen = bLen ? c->aVal + 8ull * nRows : NULL;
    c->aHeap = c->aVal + 8ull * nRows + (bLen ? pad8(4ull * nRows) : 0);
    if (!bCls) {
      for (int k = CSQ_INT; k <= CSQ_NULL; k++)
        if (m == (1u << k)) c->cls = (uint8_t)k;
      if (nRows && !c->cls) return CSQ_FAULT_BAD_JOB;
    }
    if (!bLen && (m & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB)))) return CSQ_FAULT_BAD_JOB;
    q += need;
  }
  ex_val aK[CSQ_AGG_MAX_KEYS], v;
  for (uint32_t r = 0; r < nRows; r++) {
    for (int j = 0; j < t->nKey; j++)
      if (rcol_get(&aRc[j], r, &aK[j])) return CSQ_FAULT_BAD_JOB;
    int64_t g;
    if (t->nKey == 0) {
      if (nRows != 1) return CSQ_FAULT_BAD_JOB;
      g = ag_new_group(t, NULL, 0);
    } else {
      if (ag_hash_grow(t)) return CSQ_FAULT_NOMEM;
      uint32_t nBefore = t->nGroup;
      g = ag_lookup(t, aK, keys_hash(aK, t->nKey));
      if (g >= 0 && t->nGroup == nBefore) return CSQ_FAULT_BAD_JOB; /* a key twice */
    }
    if (g < 0) return CSQ_FAULT_NOMEM;
    int j = t->nKey;
    for (int ia = 0; ia < t->nAgg; j += csq_agg_state_cols(pp->aAgg[ia].fn), ia++) {
      if (aAlias[ia] >= 0) continue; /* shares the state of an earlier one */
      uint8_t *st = t->aState + (size_t)g * t->stride + t->aOff[ia];
      switch (pp->aAgg[ia].fn) {
      case CSQ_AGG_COUNT_STAR:
      case CSQ_AGG_COUNT:
        if (rcol_get(&aRc[j], r, &v) || v.cls != CSQ_INT || v.i < 0) return CSQ_FAULT_BAD_JOB;
        *(int64_t *)st = v.i;
        break;
      case CSQ_AGG_MIN:
      case CSQ_AGG_MAX:
        if (rcol_get(&aRc[j], r, &v)) return CSQ_FAULT_BAD_JOB;
        if (v.cls == CSQ_NULL) v.cls = 0; /* none yet */
        t->nVar += var_bytes(&v);
        *(ex_val *)st = v;
        break;
      default: { /* the 8 SUM columns, in program.h's order */
        ex_val a[CSQ_AGG_SUM_COLS];
        for (int k = 0; k < CSQ_AGG_SUM_COLS; k++)
          if (rcol_get(&aRc[j + k], r, &a[k]) ||
              a[k].cls != (k == 4 || k == 5 ? CSQ_REAL : CSQ_INT))
            return CSQ_FAULT_BAD_JOB;
        ag_sum *sm = (ag_sum *)st;
        sm->cnt = a[0].i;
        sm->nReal = a[1].i;
        sm->isum = (__int128)(((unsigned __int128)(uint64_t)a[3].i << 64) | (uint64_t)a[2].i);
        sm->rs = a[4].r;
        sm->rc = a[5].r;
        /* a saturated bound stays saturated (any value past INT64_MAX
        ** does); the positives' bound is isum + ineg again */
        sm->ineg = a[7].i == INT64_MAX ? (__int128)1 << 100 : a[7].i;
        if (a[7].i < 0 || a[6].i < 0) return CSQ_FAULT_BAD_JOB;
        break;
      }
      }
    }
  }
  return 0;
}

/* Aggregate the selected rows aSel[0..nSel) (ascending, from row `start` of
** an nRow-row group) into the output area. 0 or a CSQ_FAULT_* reason; on
** success *pRet is the completion's DW0-DW1. */
static int agg_exec(const ex_prog *ep, ex_col *aCol, const uint32_t *aSel, uint32_t nSel,
                    uint32_t start, uint32_t nRow, const uint8_t *pSeed, uint64_t nSeed,
                    uint8_t *pOut, uint64_t nOutArea, dev_exec_ctx *ctx, uint64_t *pRet) {
  const csq_prog *pp = &ep->p;
  ag_tab t;
  int reason = 0;
  memset(&t, 0, sizeof(t));
  t.nKey = pp->nKey;
  t.nAgg = pp->nAgg;
  t.nCol = pp->nResCol;
  /* state layout: 16-aligned sums first, then 8-byte counts and MIN/MAX values */
  uint32_t off = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < pp->nAgg; i++) {
      int bSum = csq_agg_state_cols(pp->aAgg[i].fn) > 1;
      if (bSum != (pass == 0)) continue;
      t.aOff[i] = off;
      int fn = pp->aAgg[i].fn;
      off += bSum                                     ? (uint32_t)sizeof(ag_sum)
             : fn == CSQ_AGG_MIN || fn == CSQ_AGG_MAX ? (uint32_t)sizeof(ex_val)
                                                      : 8;
    }
  t.stride = (off + 15) & ~15u;
  if (t.stride == 0) t.stride = 16;

  size_t nEvBytes = (size_t)BATCH * (1 + 8 + 8 + sizeof(void *) + 4);
  uint8_t *aEvMem = malloc(nEvBytes * (pp->nExpr ? pp->nExpr : 1));
  ex_ev *aEv = calloc(pp->nExpr ? pp->nExpr : 1, sizeof(ex_ev));
  uint8_t **apCondDict = calloc(pp->nCond ? pp->nCond : 1, sizeof(uint8_t *));
  uint32_t *aGid = malloc(sizeof(uint32_t) * BATCH);
  uint64_t *aVarCum = malloc(sizeof(uint64_t) * (BATCH + 1));
  uint32_t *aAll = malloc(sizeof(uint32_t) * BATCH * 2), *aX = aAll ? aAll + BATCH : NULL;
  uint8_t aM[BATCH];
  if (!aEvMem || !aEv || !apCondDict || !aGid || !aVarCum || !aAll) {
    reason = CSQ_FAULT_NOMEM;
    goto done;
  }
  for (int i = 0; i < pp->nExpr; i++) {
    uint8_t *m = aEvMem + nEvBytes * i;
    aEv[i].aI = aEv[i].aIOwn = (int64_t *)m;
    aEv[i].aR = aEv[i].aROwn = (double *)(m + 8 * BATCH);
    aEv[i].aZ = (const uint8_t **)(m + 16 * BATCH);
    aEv[i].aN = (uint32_t *)(m + (16 + sizeof(void *)) * BATCH);
    aEv[i].aCls = m + (20 + sizeof(void *)) * BATCH;
  }
  /* direct table when every key is a narrow column of this row group */
  int bDirect = pp->nKey > 0;
  uint64_t nDirect = 1;
  for (int j = 0; j < pp->nKey && bDirect; j++) {
    const csq_pexpr *x = &pp->aExpr[pp->aKey[j]];
    uint32_t dom = x->op == CSQ_EX_COL ? key_domain(&aCol[x->a]) : 0;
    if (!dom || nDirect * dom > AG_DIRECT_MAX) bDirect = 0;
    t.aDom[j] = dom;
    nDirect *= dom ? dom : 1;
  }
  if (bDirect) {
    t.nDirect = (uint32_t)nDirect;
    t.aDirect = malloc(sizeof(int32_t) * nDirect);
    if (!t.aDirect) {
      reason = CSQ_FAULT_NOMEM;
      goto done;
    }
    memset(t.aDirect, 0xFF, sizeof(int32_t) * nDirect);
  }
  /* Instructions needed per run: the aggregates' arguments and (unless the
  ** direct table reads the key columns' codes itself) the keys, and what
  ** they use. */
  uint8_t aNeed[CSQ_AGG_MAX_EXPR];
  memset(aNeed, 0, sizeof(aNeed));
  for (int i = 0; i < pp->nAgg; i++)
    if (pp->aAgg[i].fn != CSQ_AGG_COUNT_STAR) aNeed[pp->aAgg[i].expr] = 1;
  for (int j = 0; j < pp->nKey && !bDirect; j++) aNeed[pp->aKey[j]] = 1;
  for (int i = pp->nExpr - 1; i >= 0; i--) {
    const csq_pexpr *x = &pp->aExpr[i];
    if (!aNeed[i] || x->op == CSQ_EX_COL || x->op == CSQ_EX_CONST) continue;
    if (x->op == CSQ_EX_CASE) { /* a is a condition term */
      aNeed[x->b] = aNeed[x->c] = 1;
    } else {
      aNeed[x->a] = 1;
      if (x->op != CSQ_EX_NEG) aNeed[x->b] = 1;
    }
  }
  /* Aggregates with the same state over the same argument share it (SUM and
  ** AVG of one expression, say): only the first updates it. */
  int8_t aAlias[CSQ_AGG_MAX_AGGS];
  for (int i = 0; i < pp->nAgg; i++) {
    const csq_pagg *a = &pp->aAgg[i];
    int kind = csq_agg_state_cols(a->fn) > 1 ? 100
               : a->fn == CSQ_AGG_COUNT      ? CSQ_AGG_COUNT_STAR
                                             : a->fn;
    aAlias[i] = -1;
    for (int j = 0; j < i && aAlias[i] < 0; j++) {
      const csq_pagg *b = &pp->aAgg[j];
      int kb = csq_agg_state_cols(b->fn) > 1 ? 100
               : b->fn == CSQ_AGG_COUNT      ? CSQ_AGG_COUNT_STAR
                                             : b->fn;
      if (aAlias[j] < 0 && kb == kind && b->expr == a->expr && b->flags == a->flags &&
          (a->fn == CSQ_AGG_COUNT) == (b->fn == CSQ_AGG_COUNT))
        aAlias[i] = (int8_t)j;
    }
    if (aAlias[i] >= 0) t.aOff[i] = t.aOff[aAlias[i]];
  }
  /* text-valued outputs whose bytes the result carries; a direct key's
  ** bytes are bounded by its dictionary's longest entry */
  int aVarEv[CSQ_AGG_MAX_KEYS + CSQ_AGG_MAX_AGGS], nVarEv = 0;
  uint64_t nKeyVarMax = 0;
  for (int j = 0; j < pp->nKey; j++) {
    if (!bDirect) {
      aVarEv[nVarEv++] = pp->aKey[j];
      continue;
    }
    const ex_col *c = &aCol[pp->aExpr[pp->aKey[j]].a];
    uint32_t mx = 0;
    if (c->kind == K_DICT)
      for (uint32_t e = 0; e < c->d.nAux; e++) {
        uint32_t l = csq_le32(c->d.aOff + 4 * (size_t)e + 4) - csq_le32(c->d.aOff + 4 * (size_t)e);
        if (l > mx) mx = l;
      }
    else if (c->kind == K_CONSTX && !c->bAllNull)
      mx = c->cval.n;
    nKeyVarMax += mx;
  }
  for (int i = 0; i < pp->nAgg; i++)
    if ((pp->aAgg[i].fn == CSQ_AGG_MIN || pp->aAgg[i].fn == CSQ_AGG_MAX) && aAlias[i] < 0)
      aVarEv[nVarEv++] = pp->aAgg[i].expr;
  t.aTouch = malloc(sizeof(uint32_t) * BATCH);
  t.aPerm = malloc(sizeof(uint32_t) * (BATCH + 8)); /* + 8: ag_partition_avx2's stores */
  t.aSeg = malloc(sizeof(uint32_t) * (BATCH + 1));
  if (!t.aTouch || !t.aPerm || !t.aSeg) {
    reason = CSQ_FAULT_NOMEM;
    goto done;
  }
  uint32_t nSeeded = 0;
  if (pSeed) {
    reason = ag_seed(&t, pp, aAlias, pSeed, nSeed);
    if (reason) goto done;
    nSeeded = t.nGroup;
  }

  uint32_t nextRow = nRow;
  uint32_t k0 = 0;
  while (k0 < nSel) {
    /* the run: selected rows of this batch (at most BATCH, ascending) */
    uint32_t b0 = aSel[k0] / BATCH * BATCH;
    uint32_t kEnd = nSel - k0 < BATCH ? nSel : k0 + BATCH;
    if (aSel[kEnd - 1] >= b0 + BATCH) {
      uint32_t lo = k0 + 1, hi = kEnd - 1; /* aSel[lo-1] in the batch, aSel[hi] not */
      while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (aSel[mid] < b0 + BATCH)
          lo = mid + 1;
        else
          hi = mid;
      }
      kEnd = lo;
    }
    uint32_t nb = nRow - b0 < BATCH ? nRow - b0 : BATCH, n = kEnd - k0;
    const uint32_t *s = aSel + k0, *X = NULL;
    /* A run that keeps most of its batch is evaluated over the whole batch,
    ** where columns are read in place, rather than over its rows gathered
    ** first; X maps run row k to its batch row. Should the batch's other
    ** rows fault (text in arithmetic, say), the run's own rows are
    ** evaluated as usual. */
    reason = -1;
    if (n < nb && 2 * n >= nb) {
      for (uint32_t r = 0; r < nb; r++) aAll[r] = b0 + r;
      reason = ev_all(ep, aCol, apCondDict, aEv, aM, aNeed, b0, nb, aAll, nb);
      if (!reason) {
        for (uint32_t k = 0; k < n; k++) aX[k] = s[k] - b0;
        X = aX;
      }
    }
    if (reason) reason = ev_all(ep, aCol, apCondDict, aEv, aM, aNeed, b0, nb, s, n);
    if (reason) goto done;
    /* how many rows of the run fit, assuming each one makes a new group */
    aVarCum[0] = 0;
    for (uint32_t k = 0; nVarEv && k < n; k++) {
      uint64_t b = 0;
      for (int i = 0; i < nVarEv; i++) {
        const ex_ev *e = &aEv[aVarEv[i]];
        uint32_t r = X ? X[k] : k;
        uint8_t c = ev_cls(e, r);
        if (c == CSQ_TEXT || c == CSQ_BLOB) b += e->aN[r];
      }
      aVarCum[k + 1] = aVarCum[k] + b + nKeyVarMax;
    }
    uint32_t m = n;
    while (m > 0 && ag_bound(&t, (uint64_t)t.nGroup + m,
                             t.nVar + (nVarEv ? aVarCum[m] : (uint64_t)m * nKeyVarMax)) > nOutArea)
      m /= 2;
    if (m == 0) {
      if (t.nGroup == 0 && k0 == 0) {
        reason = CSQ_FAULT_OUTPUT_FULL;
        goto done;
      }
      nextRow = s[0];
      break;
    }
    if (pp->nKey == 0) { /* one group, made by the first row */
      if (t.nGroup == 0 && ag_new_group(&t, NULL, 0) < 0) {
        reason = CSQ_FAULT_NOMEM;
        goto done;
      }
      memset(aGid, 0, sizeof(uint32_t) * m);
    } else if (bDirect) {
      reason = ag_ids_direct(&t, pp, aCol, b0, nb, s, m, X, aGid);
    } else {
      reason = ag_ids_hash(&t, pp, aEv, m, X, aGid);
    }
    if (reason) goto done;
    ag_order_run(&t, aGid, m, X);
    for (int i = 0; i < pp->nAgg && !reason; i++) {
      const csq_pagg *a = &pp->aAgg[i];
      if (aAlias[i] < 0)
        reason =
            ag_update(&t, a, i, a->fn == CSQ_AGG_COUNT_STAR ? NULL : &aEv[a->expr], aGid, m, X);
    }
    for (uint32_t k = 0; k < t.nTouch; k++) t.aRunN[t.aTouch[k]] = 0;
    if (reason) goto done;
    if (m < n) {
      nextRow = s[m];
      break;
    }
    k0 = kEnd;
  }
  uint64_t nBytes = ag_write(&t, pp, pOut, nextRow);
  *pRet = csq_res_ret(pOut, nBytes, nextRow < nRow);
  ctx->pStats->rows_scanned += nextRow - start;
  ctx->pStats->rows_returned += t.nGroup - nSeeded;
  if (start == 0) ctx->pStats->row_groups_scanned++;
done:
  if (apCondDict)
    for (int i = 0; i < pp->nCond; i++) free(apCondDict[i]);
  free(apCondDict);
  free(aEvMem);
  free(aEv);
  free(aGid);
  free(aVarCum);
  free(aAll);
  ag_tab_free(&t);
  return reason;
}

/* ---- xRun ---- */

static int fault(uint64_t *pRet, uint64_t reason) {
  *pRet = reason;
  return CSQ_SC_PROGRAM_FAULT;
}

/* Is single-term clause cl (with clause aPair[cl] when >= 0, see
** pair_clauses) one range of its column's codes in this chunk? 1 with *pr
** and *pRn (the clause's result for a NULL row); 0 if not (or on a fault,
** with *pRc set). A pair intersects its two ranges; negated ranges do not
** pair up. */
static int clause_codes(const ex_prog *ep, ex_col *aCol, int cl, const int *aFirst,
                        const int *aPair, uint8_t **apDict, ex_crange *pr, uint8_t *pRn, int *pRc) {
  int iTerm = aFirst[cl];
  if (ep->p.aClause[cl] != 1) return 0;
  const ex_term *e1 = &ep->aT[iTerm];
  ex_col *c = &aCol[e1->t.slot];
  if (!term_codes(e1, c, &apDict[iTerm], pr, pRc)) return 0;
  *pRn = e1->nullRes;
  if (aPair[cl] < 0) return 1;
  int iT2 = aFirst[aPair[cl]];
  const ex_term *e2 = &ep->aT[iT2];
  ex_crange r2;
  if (pr->neg || !term_codes(e2, c, &apDict[iT2], &r2, pRc) || r2.neg) return 0;
  pr->lo = pr->lo > r2.lo ? pr->lo : r2.lo;
  pr->hi = pr->hi < r2.hi ? pr->hi : r2.hi;
  crange_settle(pr);
  *pRn &= e2->nullRes;
  return 1;
}

/* Clause cl (with clause aPair[cl] when >= 0, see pair_clauses) over rows
** s[0..n) of aligned batch [ab0, ab0+anb): aM[k] = 1 if row s[k] passes.
** aOr is scratch. 0 or a CSQ_FAULT_*. */
static int eval_clause(const ex_prog *ep, ex_col *aCol, int cl, const int *aFirst, const int *aPair,
                       uint32_t ab0, uint32_t anb, const uint32_t *s, uint32_t n, uint8_t *aM,
                       uint8_t *aOr, uint8_t **apDict) {
  const csq_prog *pp = &ep->p;
  int iTerm = aFirst[cl], nT = pp->aClause[cl], rc = 0;
  if (nT == 1 && aPair[cl] >= 0) {
    /* two comparisons on one column (x >= a AND x < b): one range of codes
    ** where both are ranges, else both terms on the same rows */
    int iT2 = aFirst[aPair[cl]];
    const ex_term *e1 = &ep->aT[iTerm], *e2 = &ep->aT[iT2];
    ex_col *c = &aCol[e1->t.slot];
    ex_crange r;
    uint8_t rn;
    if (clause_codes(ep, aCol, cl, aFirst, aPair, apDict, &r, &rn, &rc)) {
      code_range(c, ab0, anb, s, n, r.eAll, r.lo, r.hi - r.lo, 0, rn, aM);
      return 0;
    }
    if (rc) return rc;
    if ((rc = eval_term(e1, c, ab0, anb, s, n, aM, &apDict[iTerm])) != 0) return rc;
    if ((rc = eval_term(e2, c, ab0, anb, s, n, aOr, &apDict[iT2])) != 0) return rc;
    for (uint32_t k = 0; k < n; k++) aM[k] &= aOr[k];
    return 0;
  }
  if (nT == 1) {
    const ex_term *et = &ep->aT[iTerm];
    return eval_term(et, &aCol[et->t.slot], ab0, anb, s, n, aM, &apDict[iTerm]);
  }
  memset(aM, 0, n);
  for (int t = 0; t < nT; t++) {
    const ex_term *et = &ep->aT[iTerm + t];
    rc = eval_term(et, &aCol[et->t.slot], ab0, anb, s, n, aOr, &apDict[iTerm + t]);
    if (rc) return rc;
    for (uint32_t k = 0; k < n; k++) aM[k] |= aOr[k];
  }
  return 0;
}

/* Clause cl over the whole of rows [b0, b0+nb), written straight as the
** rows that pass into s, when it is a range of the packed codes of a column
** without NULLs (one pass: no mask, no compaction). Returns the count, or
** -1 when the clause is not of that kind (or on a fault, with *pRc set). */
static int64_t select_first(const ex_prog *ep, ex_col *aCol, int cl, const int *aFirst,
                            const int *aPair, uint32_t b0, uint32_t nb, uint8_t **apDict,
                            uint32_t *s, int *pRc) {
  const ex_col *c = &aCol[ep->aT[aFirst[cl]].t.slot];
  ex_crange r;
  uint8_t rn;
  if (!c->d.aPacked || c->d.aNull) return -1;
  if (!clause_codes(ep, aCol, cl, aFirst, aPair, apDict, &r, &rn, pRc)) return -1;
  if (r.eAll >= 0) {
    if (!(r.eAll ^ r.neg)) return 0;
    for (uint32_t k = 0; k < nb; k++) s[k] = b0 + k;
    return nb;
  }
  return csq_select_range(c->d.aPacked, c->d.width, b0, nb, r.lo, r.hi - r.lo, r.neg, s);
}

/* Is et a comparison whose true values form one interval (so that two of
** them on one column intersect into one)? */
static int term_is_bound(const ex_term *et) {
  switch (et->t.op) {
  case CSQ_OP_LT:
  case CSQ_OP_LE:
  case CSQ_OP_GT:
  case CSQ_OP_GE:
    return 1;
  case CSQ_OP_BETWEEN:
    return !et->bNot;
  default:
    return 0;
  }
}

/* Pair single-term clauses that bound the same column: aPair[cl] = the
** clause evaluated together with cl, -1 none, -2 cl is the second of a
** pair (skipped by the clause loop). */
static void pair_clauses(const ex_prog *ep, const int *aFirst, int *aPair) {
  const csq_prog *pp = &ep->p;
  for (int cl = 0; cl < pp->nClause; cl++) aPair[cl] = -1;
  for (int cl = 0; cl < pp->nClause; cl++) {
    const ex_term *et = &ep->aT[aFirst[cl]];
    if (pp->aClause[cl] != 1 || !term_is_bound(et)) continue;
    for (int p = 0; p < cl; p++) {
      const ex_term *ep0 = &ep->aT[aFirst[p]];
      if (aPair[p] == -1 && pp->aClause[p] == 1 && term_is_bound(ep0) &&
          ep0->t.slot == et->t.slot) {
        aPair[p] = cl;
        aPair[cl] = -2;
        break;
      }
    }
  }
}

/* Order the clauses by the share of rows s[0..n) of one batch each keeps on
** its own (a clause of several ORed terms, costlier per row, counts as
** keeping all; the second clause of a pair is skipped), most selective
** first, into aOrd. 0 or a fault. */
static int order_clauses(const ex_prog *ep, ex_col *aCol, uint32_t ab0, uint32_t anb,
                         const uint32_t *s, uint32_t n, uint8_t *aM, uint8_t *aOr, uint8_t **apDict,
                         const int *aFirst, const int *aPair, int *aOrd) {
  const csq_prog *pp = &ep->p;
  uint32_t aKeep[CSQ_PROG_MAX_TERMS];
  for (int cl = 0; cl < pp->nClause; cl++) {
    aKeep[cl] = n + 1;
    if (aPair[cl] == -2 || pp->aClause[cl] != 1) continue;
    int rc = eval_clause(ep, aCol, cl, aFirst, aPair, ab0, anb, s, n, aM, aOr, apDict);
    if (rc) return rc;
    uint32_t m = 0;
    for (uint32_t k = 0; k < n; k++) m += aM[k];
    aKeep[cl] = m;
  }
  for (int i = 1; i < pp->nClause; i++) { /* insertion sort, stable */
    int x = aOrd[i], j = i;
    while (j > 0 && aKeep[aOrd[j - 1]] > aKeep[x]) {
      aOrd[j] = aOrd[j - 1];
      j--;
    }
    aOrd[j] = x;
  }
  return 0;
}

static int ex_run(void *pCompiled, dev_exec_ctx *ctx, uint64_t *pRet) {
  ex_prog *ep = pCompiled;
  const csq_prog *pp = &ep->p;
  ex_col *aCol = NULL;
  uint8_t **apDict = NULL;
  uint32_t *aSel = NULL;
  ex_outcol *aOc = NULL;
  int *aOrd = NULL;
  int rc = 0, nOpen = 0;
  uint64_t reason = 0;
  *pRet = 0;
  if (ctx->aParam[0] != ep->id) return fault(pRet, CSQ_FAULT_STALE_PROGRAM);
  if (ctx->nRange < 3) return fault(pRet, CSQ_FAULT_BAD_RANGES);
  const uint8_t *pJob = ctx->pSlm + ctx->aRange[0].addr;
  uint64_t nJob = ctx->aRange[0].len;
  const uint8_t *pIn = ctx->pSlm + ctx->aRange[1].addr;
  uint64_t nInArea = ctx->aRange[1].len;
  uint8_t *pOut = ctx->pSlm + ctx->aRange[2].addr;
  uint64_t nOutArea = ctx->aRange[2].len;
  if (nJob < CSQ_JOB_HDR) return fault(pRet, CSQ_FAULT_BAD_RANGES);
  uint32_t nRow = csq_le32(pJob + 4), nIn = csq_le32(pJob + 8), delBytes = csq_le32(pJob + 12);
  if (csq_le32(pJob) != CSQ_JOB_MAGIC || nIn != (uint32_t)pp->nIn || nRow > CSQ_CHUNK_MAX_VALS)
    return fault(pRet, CSQ_FAULT_BAD_JOB);
  uint64_t nOmit = pp->bRowNum ? 8ull * (((uint64_t)pp->nOut + 63) / 64) : 0;
  uint64_t nJobNeed = CSQ_JOB_HDR + (uint64_t)CSQ_JOB_CHUNK_SZ * nIn + nOmit;
  if (nJob < nJobNeed + delBytes || (delBytes && delBytes < (nRow + 7) / 8) ||
      csq_job_hash(pJob, nJobNeed + delBytes) != csq_le64(pJob + 16))
    return fault(pRet, CSQ_FAULT_BAD_JOB);
  const uint8_t *aDel = delBytes ? pJob + nJobNeed : NULL;
  const uint8_t *aOmit = nOmit ? pJob + nJobNeed - nOmit : NULL;
  uint64_t start = ctx->aParam[1] & CSQ_EXEC_START_MASK;
  int bAcc = (ctx->aParam[1] & CSQ_EXEC_ACC) != 0;
  uint32_t accCheck = (uint32_t)(ctx->aParam[1] >> 32);
  uint32_t rowCap = bAcc ? 0 : (uint32_t)(ctx->aParam[1] >> 32); /* 0: none */
  if (start > nRow || (bAcc && !pp->bAgg) || (rowCap && (pp->bAgg || pp->nTop)))
    return fault(pRet, CSQ_FAULT_BAD_JOB);
  uint64_t nFixed = CSQ_RES_HDR + (uint64_t)CSQ_RES_COL_SZ * pp->nOut;
  if (nOutArea < nFixed) return fault(pRet, CSQ_FAULT_OUTPUT_FULL);
  uint8_t *pSeed = NULL;
  uint64_t nSeed = 0;
  if (bAcc) {
    /* the result already in the output area, checked against the check
    ** value its own Execute returned, and copied: this run overwrites it */
    nSeed = nOutArea >= CSQ_RES_HDR ? csq_le64(pOut + 16) : 0;
    if (nSeed < CSQ_RES_HDR || nSeed > nOutArea || (nSeed & 7))
      return fault(pRet, CSQ_FAULT_BAD_JOB);
    if (csq_res_check(pOut, nSeed) != accCheck) return fault(pRet, CSQ_FAULT_CHECKSUM);
    pSeed = malloc(nSeed);
    if (!pSeed) return fault(pRet, CSQ_FAULT_NOMEM);
    memcpy(pSeed, pOut, nSeed);
  }

  aCol = calloc(nIn ? nIn : 1, sizeof(ex_col));
  apDict = calloc(pp->nTerm ? pp->nTerm : 1, sizeof(uint8_t *));
  aSel = malloc(sizeof(uint32_t) * (nRow - start + BATCH));
  aOc = calloc(pp->nOut ? pp->nOut : 1, sizeof(ex_outcol));
  if (!aCol || !apDict || !aSel || !aOc) {
    reason = CSQ_FAULT_NOMEM;
    goto done;
  }
  for (uint32_t i = 0; i < nIn; i++) {
    const uint8_t *e = pJob + CSQ_JOB_HDR + (size_t)CSQ_JOB_CHUNK_SZ * i;
    uint64_t off = csq_le64(e), len = csq_le64(e + 8), h = csq_le64(e + 16);
    if (off > nInArea || len > nInArea - off) {
      reason = CSQ_FAULT_CHUNK_RANGE;
      goto done;
    }
    if (csq_checksum(pIn + off, len) != h) {
      reason = CSQ_FAULT_CHECKSUM;
      goto done;
    }
    uint64_t tag = chunk_tag(h, len);
    int bChecked = chunk_checked(ctx, tag);
    nOpen = (int)i + 1;
    reason = (uint64_t)col_open(&aCol[i], pIn + off, len, nRow, bChecked);
    if (reason) goto done;
    if (!bChecked) chunk_set_checked(ctx, tag);
  }

  /* Filter, batch by batch, collecting qualifying rows in aSel. Clauses
  ** run in the order of their selectivity, measured on this row group's
  ** first full batch (AND is commutative and terms have no side effects,
  ** so the order changes the work, not the answer). */
  uint32_t nSel = 0;
  uint8_t aM[BATCH], aOr[BATCH];
  aOrd = malloc(sizeof(int) * 3 * (pp->nClause ? pp->nClause : 1));
  int *aFirst, *aPair;
  if (!aOrd) {
    reason = CSQ_FAULT_NOMEM;
    goto done;
  }
  aFirst = aOrd + pp->nClause;
  aPair = aFirst + pp->nClause;
  for (int cl = 0, iT = 0; cl < pp->nClause; iT += pp->aClause[cl], cl++) {
    aOrd[cl] = cl;
    aFirst[cl] = iT;
  }
  pair_clauses(ep, aFirst, aPair);
  int bOrdered = pp->nClause < 2;
  for (uint32_t b0 = (uint32_t)start; b0 < nRow;) {
    uint32_t bEnd = (b0 / BATCH + 1) * BATCH; /* batches aligned to BATCH rows */
    if (bEnd > nRow) bEnd = nRow;
    uint32_t nb = bEnd - b0, ab0 = b0 / BATCH * BATCH,
             anb = (nRow - ab0) < BATCH ? nRow - ab0 : BATCH;
    uint32_t *s = aSel + nSel, n = 0;
    int bFilled = 1; /* s holds the rows; else the batch's rows are all in play, n = nb */
    if (aDel) {
      for (uint32_t r = b0; r < bEnd; r++)
        if (!((aDel[r >> 3] >> (r & 7)) & 1)) s[n++] = r;
    } else if (bOrdered && pp->nClause > 0) {
      n = nb; /* the first clause may select straight from the codes */
      bFilled = 0;
    } else {
      for (uint32_t r = b0; r < bEnd; r++) s[n++] = r;
    }
    if (!bOrdered && n >= BATCH / 4) {
      reason =
          (uint64_t)order_clauses(ep, aCol, ab0, anb, s, n, aM, aOr, apDict, aFirst, aPair, aOrd);
      if (reason) goto done;
      bOrdered = 1;
    }
    for (int io = 0; io < pp->nClause && n > 0; io++) {
      int cl = aOrd[io];
      if (aPair[cl] == -2) continue;
      if (!bFilled) { /* the first clause, over the whole batch */
        int rcSel = 0;
        int64_t nPass = select_first(ep, aCol, cl, aFirst, aPair, b0, nb, apDict, s, &rcSel);
        if (rcSel) {
          reason = (uint64_t)rcSel;
          goto done;
        }
        bFilled = 1;
        if (nPass >= 0) {
          n = (uint32_t)nPass;
          continue;
        }
        for (uint32_t r = 0; r < nb; r++) s[r] = b0 + r;
      }
      reason = (uint64_t)eval_clause(ep, aCol, cl, aFirst, aPair, ab0, anb, s, n, aM, aOr, apDict);
      if (reason) goto done;
      uint32_t m = 0;
      for (uint32_t k = 0; k < n; k++) {
        s[m] = s[k];
        m += aM[k];
      }
      n = m;
    }
    if (!bFilled) /* no clause looked at the batch (cannot happen: some clause is not a pair's
                     second) */
      for (uint32_t r = 0; r < n; r++) s[r] = b0 + r;
    nSel += n;
    b0 = bEnd;
  }

  if (pp->bAgg) {
    reason = (uint64_t)agg_exec(ep, aCol, aSel, nSel, (uint32_t)start, nRow, pSeed, nSeed, pOut,
                                nOutArea, ctx, pRet);
    goto done;
  }

  if (pp->nTop && nSel > pp->nTop) {
    reason = (uint64_t)top_select(pp, aCol, aSel, &nSel);
    if (reason) goto done;
  }

  /* Size the result; if it does not fit, keep the longest prefix that does
  ** (sizes grow with rows, so a binary search finds it). A partial top-N is
  ** still a superset of what its rows contribute: the rows it left out
  ** before nextRow lose to the nTop it kept, which the host sees (those
  ** before nextRow now, the others in the next part). */
  uint32_t nKeep = rowCap && nSel > rowCap ? rowCap : nSel;
  for (;;) {
    uint64_t nBytes = nFixed + (pp->bRowNum ? pad8(4ull * nKeep) : 0);
    for (int j = 0; j < pp->nOut; j++) {
      if (out_omitted(aOmit, j)) continue;
      out_size(&aCol[pp->aOut[j]], aSel, nKeep, &aOc[j]);
      nBytes += col_bytes(&aOc[j], nKeep);
    }
    if (nBytes <= nOutArea) break;
    if (nKeep == 0) {
      reason = CSQ_FAULT_OUTPUT_FULL;
      goto done;
    }
    /* shrink: binary search the largest fitting prefix below nKeep */
    uint32_t lo = 0, hi = nKeep - 1;
    while (lo < hi) {
      uint32_t mid = lo + (hi - lo + 1) / 2;
      uint64_t nb2 = nFixed + (pp->bRowNum ? pad8(4ull * mid) : 0);
      for (int j = 0; j < pp->nOut; j++) {
        ex_outcol o;
        if (out_omitted(aOmit, j)) continue;
        out_size(&aCol[pp->aOut[j]], aSel, mid, &o);
        nb2 += col_bytes(&o, mid);
      }
      if (nb2 <= nOutArea)
        lo = mid;
      else
        hi = mid - 1;
    }
    if (lo == 0) {
      reason = CSQ_FAULT_OUTPUT_FULL;
      goto done;
    }
    nKeep = lo;
  }
  uint32_t nextRow = nKeep < nSel ? aSel[nKeep] : nRow;

  /* Write it. */
  uint8_t *q = pOut + nFixed;
  for (int j = 0; j < pp->nOut; j++) {
    const ex_outcol *o = &aOc[j];
    uint8_t *d = pOut + CSQ_RES_HDR + (size_t)CSQ_RES_COL_SZ * j;
    memset(d, 0, CSQ_RES_COL_SZ);
    if (out_omitted(aOmit, j)) {
      d[3] = 1; /* absent: the host reads it from the chunk if it needs it */
      continue;
    }
    d[0] = o->clsMask;
    d[1] = (uint8_t)(!mask_single(o->clsMask) && nKeep > 0);
    d[2] = (uint8_t)((o->clsMask & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) != 0);
    put64(d + 8, o->nHeap);
    out_write(&aCol[pp->aOut[j]], aSel, nKeep, o, q);
    q += col_bytes(o, nKeep);
  }
  if (pp->bRowNum) {
    memcpy(q, aSel, 4ull * nKeep); /* row numbers; SLM is little-endian like the host */
    if (nKeep & 1) memset(q + 4ull * nKeep, 0, 4);
    q += pad8(4ull * nKeep);
  }
  uint64_t nBytes = (uint64_t)(q - pOut);
  put32(pOut, CSQ_RES_MAGIC);
  put32(pOut + 4, nKeep);
  put32(pOut + 8, nextRow);
  put32(pOut + 12, (uint32_t)pp->nOut);
  put64(pOut + 16, nBytes);
  *pRet = csq_res_ret(pOut, nBytes, nextRow < nRow);
  ctx->pStats->rows_scanned += nextRow - start;
  ctx->pStats->rows_returned += nKeep;
  if (start == 0) ctx->pStats->row_groups_scanned++;

done:
  if (aCol)
    for (int i = 0; i < nOpen; i++) col_close(&aCol[i]);
  if (apDict)
    for (int i = 0; i < pp->nTerm; i++) free(apDict[i]);
  free(aCol);
  free(apDict);
  free(aSel);
  free(aOc);
  free(pSeed);
  free(aOrd);
  if (reason) rc = fault(pRet, reason);
  return rc;
}

/* Registered by the program-type table on its first lookup (ptype.c). */
const dev_ptype dev_ptype_csq = {CSQ_PTYPE_CSQ, "csq", ex_verify, ex_run, ex_free};
