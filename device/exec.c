/*
** device/exec.c - the device side of csq programs (program type
** CSQ_PTYPE_CSQ): xVerify compiles a verified program (device/program.h) into
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
** the result format of program.h.
*/
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "chunk.h"
#include "program.h"
#include "ptype.h"

#define BATCH CSQ_PROG_BATCH

/* A value in the generic evaluator. z/n: TEXT/BLOB bytes. */
typedef struct ex_val {
  uint8_t cls;
  int64_t i;
  double r;
  const uint8_t *z;
  uint32_t n;
} ex_val;

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
  int coll;        /* CSQ_TF_BINARY / NOCASE / RTRIM */
  int bNot;
  uint8_t nullRes; /* result for a NULL value */
  /* IN */
  csq_pconst *aIn; /* non-NULL constants, sorted in SQLite order under coll */
  int nIn;
  int bInNull;     /* the list holds a NULL */
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
} ex_prog;

/* ---- values, collations, ordering ---- */

static int cls_rank(int cls) {
  return cls == CSQ_INT || cls == CSQ_REAL ? 1 : cls == CSQ_TEXT ? 2 : cls == CSQ_BLOB ? 3 : 0;
}

static int lower_ascii(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* Compare bytes under a collation, SQLite's way (NOCASE stops early at a NUL
** of the left operand, as sqlite3StrNICmp does). */
static int cmp_bytes(const uint8_t *a, uint32_t na, const uint8_t *b, uint32_t nb, int coll) {
  if (coll == CSQ_TF_RTRIM) {
    while (na && a[na - 1] == ' ') na--;
    while (nb && b[nb - 1] == ' ') nb--;
  }
  uint32_t m = na < nb ? na : nb;
  if (coll == CSQ_TF_NOCASE) {
    for (uint32_t i = 0; i < m; i++) {
      int x = lower_ascii(a[i]), y = lower_ascii(b[i]);
      if (a[i] == 0 || x != y) {
        if (x != y) return x < y ? -1 : 1;
        break; /* both NUL: equal so far, lengths decide */
      }
    }
  } else if (m) {
    int r = memcmp(a, b, m);
    if (r) return r < 0 ? -1 : 1;
  }
  return na < nb ? -1 : na > nb;
}

static int cmp_num(const ex_val *v, uint8_t kc, int64_t ki, double kr) {
  if (v->cls == CSQ_INT) {
    if (kc == CSQ_INT) return v->i < ki ? -1 : v->i > ki;
    int c = csq_cmp_int_real(v->i, kr);
    return c < 0 ? -1 : c > 0;
  }
  if (kc == CSQ_INT) {
    int c = csq_cmp_int_real(ki, v->r);
    return c < 0 ? 1 : c > 0 ? -1 : 0;
  }
  return v->r < kr ? -1 : v->r > kr;
}

/* v (not NULL) against constant k (not NULL): -1, 0, 1 in SQLite order. */
static int cmp_vk(const ex_val *v, const csq_pconst *k, int coll) {
  int rv = cls_rank(v->cls), rk = cls_rank(k->cls);
  if (rv != rk) return rv < rk ? -1 : 1;
  if (rv == 1) return cmp_num(v, k->cls, k->i, k->r);
  return cmp_bytes(v->z, v->n, k->z, k->len, rv == 2 ? coll : CSQ_TF_BINARY);
}

static void const_val(const csq_pconst *k, ex_val *v) {
  v->cls = k->cls;
  v->i = k->i;
  v->r = k->r;
  v->z = k->z;
  v->n = k->len;
}

/* ---- LIKE / GLOB ---- */

/* Read one UTF-8 character at z[*pi] (< n), as SQLite reads them: a lead
** byte and any continuation bytes; malformed forms become U+FFFD. */
static uint32_t utf8_read(const uint8_t *z, uint32_t n, uint32_t *pi) {
  uint32_t i = *pi, c = z[i++];
  if (c >= 0xC0) {
    c = c < 0xE0 ? c & 0x1F : c < 0xF0 ? c & 0x0F : c < 0xF8 ? c & 0x07 : c < 0xFC ? c & 0x03
        : c < 0xFE ? c & 0x01 : 0;
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
    if (c == '*') t->kind = TK_ALL;
    else if (c == '?') t->kind = TK_ONE;
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
  case TK_ONE: return 1;
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
  default: return 0;
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
    if (c < 0) hi = mid - 1;
    else lo = mid + 1;
  }
  return 0;
}

static int ev_one(const ex_term *et, const ex_val *v) {
  if (v->cls == CSQ_NULL) return et->nullRes;
  const csq_pconst *a = et->a;
  switch (et->t.op) {
  case CSQ_OP_ISNULL: return 0;
  case CSQ_OP_NOTNULL: return 1;
  case CSQ_OP_EQ:
  case CSQ_OP_IS: return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) == 0;
  case CSQ_OP_NE: return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) != 0;
  case CSQ_OP_ISNOT: return a->cls == CSQ_NULL || cmp_vk(v, a, et->coll) != 0;
  case CSQ_OP_LT: return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) < 0;
  case CSQ_OP_LE: return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) <= 0;
  case CSQ_OP_GT: return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) > 0;
  case CSQ_OP_GE: return a->cls != CSQ_NULL && cmp_vk(v, a, et->coll) >= 0;
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
    case CSQ_OP_EQ: lo = hi = c; break;
    case CSQ_OP_LT: if (c == INT64_MIN) return 0; hi = c - 1; break;
    case CSQ_OP_LE: hi = c; break;
    case CSQ_OP_GT: if (c == INT64_MAX) return 0; lo = c + 1; break;
    case CSQ_OP_GE: lo = c; break;
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
      } else hi = f;
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
  case CSQ_OP_ISNULL: et->nullRes = 1; break;
  case CSQ_OP_IS: et->nullRes = et->a->cls == CSQ_NULL; break;
  case CSQ_OP_ISNOT: et->nullRes = et->a->cls != CSQ_NULL; break;
  default: et->nullRes = 0; break;
  }
  /* integer plan */
  et->ip = IP_RANGE;
  int64_t lo = 0, hi = 0, lo2 = 0, hi2 = 0;
  int ok, ok2;
  switch (t->op) {
  case CSQ_OP_ISNULL: et->bEmpty = 1; break;
  case CSQ_OP_NOTNULL: et->lo = INT64_MIN; et->hi = INT64_MAX; break;
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
  default: et->ip = IP_GENERIC; break;
  }
  /* real plan: plain comparisons whose constants are exact doubles */
  switch (t->op) {
  case CSQ_OP_EQ:
  case CSQ_OP_NE:
  case CSQ_OP_LT:
  case CSQ_OP_LE:
  case CSQ_OP_GT:
  case CSQ_OP_GE: et->bReal = double_exact(et->a, &et->rA); break;
  case CSQ_OP_BETWEEN:
    et->bReal = !et->bNot && double_exact(et->a, &et->rA) && double_exact(et->b, &et->rB);
    break;
  default: break;
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
  free(ep->aT);
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
  for (int i = 0; i < ep->p.nTerm && rc == 0; i++) rc = term_compile(ep, &ep->aT[i], &ep->p.aTerm[i]);
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
    if (csq_le32(c->d.aRunEnd + 4 * mid) > r) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

static int64_t rle_value(const ex_col *c, uint32_t run) {
  uint64_t u;
  csq_unpack_u64(c->d.aPacked, c->d.width, run, 1, &u);
  return (int64_t)((uint64_t)c->d.iRef + u);
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
    if (v->cls == CSQ_INT) v->i = (int64_t)u;
    else if (v->cls == CSQ_REAL) memcpy(&v->r, &u, 8);
    else if (v->cls == CSQ_TEXT || v->cls == CSQ_BLOB) {
      v->z = c->d.aVar + c->aTagOff[r];
      v->n = (uint32_t)u;
    }
    break;
  default: *v = c->cval; break;
  }
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
  if (c->d.enc == CSQ_ENC_REAL_PLAIN) memcpy(c->aR, c->d.aReal + 8 * (size_t)b0, 8 * (size_t)n);
  else
    for (uint32_t i = 0; i < n; i++) c->aR[i] = c->d.rConst;
}

/* Set up column c from the chunk at p[0..n): 0 or a CSQ_FAULT_*. */
static int col_open(ex_col *c, const uint8_t *p, size_t n, uint32_t nRow) {
  memset(c, 0, sizeof(*c));
  c->b0 = -1;
  if (csq_chunk_view(p, n, &c->d)) return CSQ_FAULT_CORRUPT_CHUNK;
  if (c->d.nVal < nRow) return CSQ_FAULT_SHORT_CHUNK;
  c->bAllNull = c->d.nVal > 0 && c->d.nNull == c->d.nVal;
  switch (c->d.enc) {
  case CSQ_ENC_INT_FOR:
  case CSQ_ENC_INT_RLE: c->kind = K_INT; break;
  case CSQ_ENC_REAL_PLAIN: c->kind = K_REAL; break;
  case CSQ_ENC_TEXT_PLAIN:
  case CSQ_ENC_BLOB_PLAIN: c->kind = K_TEXTP; break;
  case CSQ_ENC_TEXT_DICT: c->kind = K_DICT; break;
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
    if (c->d.cls == CSQ_INT) c->kind = K_INT;
    else if (c->d.cls == CSQ_REAL) c->kind = K_REAL;
    else {
      c->kind = K_CONSTX;
      c->cval.cls = c->d.cls;
      c->cval.z = c->d.aVar;
      c->cval.n = (uint32_t)c->d.nVar;
      if (c->d.cls == CSQ_NULL) c->bAllNull = 1;
    }
    break;
  default: return CSQ_FAULT_CORRUPT_CHUNK;
  }
  if (c->kind == K_INT) c->aI = malloc(sizeof(int64_t) * BATCH);
  if (c->kind == K_REAL) c->aR = malloc(sizeof(double) * BATCH);
  if (c->kind == K_DICT) c->aCode = malloc(sizeof(uint64_t) * BATCH);
  if ((c->kind == K_INT && !c->aI) || (c->kind == K_REAL && !c->aR) ||
      (c->kind == K_DICT && !c->aCode))
    return CSQ_FAULT_NOMEM;
  return 0;
}

static void col_close(ex_col *c) {
  free(c->aTagOff);
  free(c->aI);
  free(c->aR);
  free(c->aCode);
}

/* ---- term evaluation over a selection ----
** aSel[0..n) are row numbers inside batch [b0, b0+nb); aM[k] receives 1 if
** row aSel[k] satisfies the term. pDict: per-term dictionary match map of
** this chunk (K_DICT), built on first use. */
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
          if (et->aSet[mid] < x) lo = mid + 1;
          else hi = mid - 1;
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
    case CSQ_OP_EQ: for (k = 0; k < n; k++) aM[k] = a[aSel[k] - b0] == ra; break;
    case CSQ_OP_NE: for (k = 0; k < n; k++) aM[k] = a[aSel[k] - b0] != ra; break;
    case CSQ_OP_LT: for (k = 0; k < n; k++) aM[k] = a[aSel[k] - b0] < ra; break;
    case CSQ_OP_LE: for (k = 0; k < n; k++) aM[k] = a[aSel[k] - b0] <= ra; break;
    case CSQ_OP_GT: for (k = 0; k < n; k++) aM[k] = a[aSel[k] - b0] > ra; break;
    case CSQ_OP_GE: for (k = 0; k < n; k++) aM[k] = a[aSel[k] - b0] >= ra; break;
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
    if (!*ppDict) {
      uint8_t *m = malloc(c->d.nAux ? c->d.nAux : 1);
      if (!m) return CSQ_FAULT_NOMEM;
      for (uint32_t e = 0; e < c->d.nAux; e++) {
        uint32_t o0 = csq_le32(c->d.aOff + 4 * (size_t)e), o1 = csq_le32(c->d.aOff + 4 * (size_t)e + 4);
        v.cls = CSQ_TEXT;
        v.z = c->d.aVar + o0;
        v.n = o1 - o0;
        m[e] = (uint8_t)ev_one(et, &v);
      }
      *ppDict = m;
    }
    const uint8_t *m = *ppDict;
    if (c->b0 != b0) {
      c->b0 = b0;
      csq_unpack_u64(c->d.aPacked, c->d.width, b0, nb, c->aCode);
    }
    for (k = 0; k < n; k++) {
      uint64_t code = c->aCode[aSel[k] - b0];
      aM[k] = col_null(c, aSel[k]) ? et->nullRes : code < c->d.nAux ? m[code] : 0;
    }
    return 0;
  }
  for (k = 0; k < n; k++) {
    col_get(c, aSel[k], &v);
    aM[k] = (uint8_t)ev_one(et, &v);
  }
  return 0;
}

/* ---- output ---- */

typedef struct ex_outcol {
  uint8_t clsMask;
  uint64_t nHeap;
} ex_outcol;

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static uint64_t pad8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

/* Class mask and heap bytes of column c over rows aSel[0..n). */
static void out_size(const ex_col *c, const uint32_t *aSel, uint32_t n, ex_outcol *o) {
  ex_val v;
  o->clsMask = 0;
  o->nHeap = 0;
  if (c->kind == K_INT || c->kind == K_REAL) {
    uint8_t m = 0;
    for (uint32_t k = 0; k < n; k++) m |= (uint8_t)(col_null(c, aSel[k]) ? 1u << CSQ_NULL : 1u << (c->kind == K_INT ? CSQ_INT : CSQ_REAL));
    o->clsMask = m;
    return;
  }
  if (c->kind == K_TEXTP && !c->d.aNull && !c->bAllNull && n) {
    for (uint32_t k = 0; k < n; k++)
      o->nHeap += csq_le32(c->d.aOff + 4 * (size_t)aSel[k] + 4) - csq_le32(c->d.aOff + 4 * (size_t)aSel[k]);
    o->clsMask = (uint8_t)(1u << c->d.cls);
    return;
  }
  for (uint32_t k = 0; k < n; k++) {
    col_get(c, aSel[k], &v);
    o->clsMask |= (uint8_t)(1u << v.cls);
    if (v.cls == CSQ_TEXT || v.cls == CSQ_BLOB) o->nHeap += v.n;
  }
}

static int mask_single(uint8_t m) { return m && !(m & (m - 1)); }

static uint64_t col_bytes(const ex_outcol *o, uint32_t n) {
  int bCls = !mask_single(o->clsMask) && n > 0;
  int bLen = (o->clsMask & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) != 0;
  return (bCls ? pad8(n) : 0) + 8ull * n + (bLen ? pad8(4ull * n) : 0) + pad8(o->nHeap);
}

/* Write column c over aSel[0..n) at out (sized by col_bytes). */
static void out_write(ex_col *c, const uint32_t *aSel, uint32_t n, const ex_outcol *o, uint8_t *out) {
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
  if (c->kind == K_INT && !c->bAllNull) {
    uint32_t k = 0;
    while (k < n) {
      uint32_t b0 = aSel[k] / BATCH * BATCH, e = k;
      while (e < n && aSel[e] < b0 + BATCH) e++;
      if (e - k >= 16 || c->d.enc != CSQ_ENC_INT_FOR) {
        uint32_t nb = c->d.nVal - b0 < BATCH ? c->d.nVal - b0 : BATCH;
        col_ints(c, b0, nb);
        for (; k < e; k++) {
          put64(aVal + 8ull * k, col_null(c, aSel[k]) ? 0 : (uint64_t)c->aI[aSel[k] - b0]);
          if (aCls) aCls[k] = col_null(c, aSel[k]) ? CSQ_NULL : CSQ_INT;
        }
      } else {
        for (; k < e; k++) {
          col_get(c, aSel[k], &v);
          put64(aVal + 8ull * k, v.cls == CSQ_NULL ? 0 : (uint64_t)v.i);
          if (aCls) aCls[k] = v.cls;
        }
      }
    }
  } else {
    for (uint32_t k = 0; k < n; k++) {
      col_get(c, aSel[k], &v);
      uint64_t u = 0;
      switch (v.cls) {
      case CSQ_INT: u = (uint64_t)v.i; break;
      case CSQ_REAL: memcpy(&u, &v.r, 8); break;
      case CSQ_TEXT:
      case CSQ_BLOB:
        u = nHeap;
        if (v.n) memcpy(aHeap + nHeap, v.z, v.n);
        nHeap += v.n;
        break;
      default: break;
      }
      put64(aVal + 8ull * k, u);
      if (aCls) aCls[k] = v.cls;
      if (aLen) put32(aLen + 4ull * k, (v.cls == CSQ_TEXT || v.cls == CSQ_BLOB) ? v.n : 0);
    }
  }
  if (pad8(nHeap) > nHeap) memset(aHeap + nHeap, 0, pad8(nHeap) - nHeap);
}

/* ---- xRun ---- */

static int fault(uint64_t *pRet, uint64_t reason) {
  *pRet = reason;
  return CSQ_SC_PROGRAM_FAULT;
}

static int ex_run(void *pCompiled, dev_exec_ctx *ctx, uint64_t *pRet) {
  ex_prog *ep = pCompiled;
  const csq_prog *pp = &ep->p;
  ex_col *aCol = NULL;
  uint8_t **apDict = NULL;
  uint32_t *aSel = NULL;
  ex_outcol *aOc = NULL;
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
  if (csq_le32(pJob) != CSQ_JOB_MAGIC || nIn != (uint32_t)pp->nIn || nRow > CSQ_CHUNK_MAX_VALS ||
      csq_le64(pJob + 16) != 0)
    return fault(pRet, CSQ_FAULT_BAD_JOB);
  uint64_t nJobNeed = CSQ_JOB_HDR + (uint64_t)CSQ_JOB_CHUNK_SZ * nIn;
  if (nJob < nJobNeed + delBytes || (delBytes && delBytes < (nRow + 7) / 8))
    return fault(pRet, CSQ_FAULT_BAD_JOB);
  const uint8_t *aDel = delBytes ? pJob + nJobNeed : NULL;
  uint64_t start = ctx->aParam[1];
  if (start > nRow) return fault(pRet, CSQ_FAULT_BAD_JOB);
  uint64_t nFixed = CSQ_RES_HDR + (uint64_t)CSQ_RES_COL_SZ * pp->nOut;
  if (nOutArea < nFixed) return fault(pRet, CSQ_FAULT_OUTPUT_FULL);

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
    if (XXH3_64bits(pIn + off, len) != h) {
      reason = CSQ_FAULT_CHECKSUM;
      goto done;
    }
    nOpen = (int)i + 1;
    reason = (uint64_t)col_open(&aCol[i], pIn + off, len, nRow);
    if (reason) goto done;
  }

  /* Filter, batch by batch, collecting qualifying rows in aSel. */
  uint32_t nSel = 0;
  uint8_t aM[BATCH], aOr[BATCH];
  for (uint32_t b0 = (uint32_t)start; b0 < nRow;) {
    uint32_t bEnd = (b0 / BATCH + 1) * BATCH; /* batches aligned to BATCH rows */
    if (bEnd > nRow) bEnd = nRow;
    uint32_t nb = bEnd - b0, ab0 = b0 / BATCH * BATCH, anb = (nRow - ab0) < BATCH ? nRow - ab0 : BATCH;
    uint32_t *s = aSel + nSel, n = 0;
    if (aDel) {
      for (uint32_t r = b0; r < bEnd; r++)
        if (!((aDel[r >> 3] >> (r & 7)) & 1)) s[n++] = r;
    } else {
      for (uint32_t r = b0; r < bEnd; r++) s[n++] = r;
    }
    (void)nb;
    int iTerm = 0;
    for (int cl = 0; cl < pp->nClause && n > 0; cl++) {
      int nT = pp->aClause[cl];
      if (nT == 1) {
        const ex_term *et = &ep->aT[iTerm];
        reason = (uint64_t)eval_term(et, &aCol[et->t.slot], ab0, anb, s, n, aM, &apDict[iTerm]);
        if (reason) goto done;
      } else {
        memset(aM, 0, n);
        for (int t = 0; t < nT; t++) {
          const ex_term *et = &ep->aT[iTerm + t];
          reason = (uint64_t)eval_term(et, &aCol[et->t.slot], ab0, anb, s, n, aOr, &apDict[iTerm + t]);
          if (reason) goto done;
          for (uint32_t k = 0; k < n; k++) aM[k] |= aOr[k];
        }
      }
      uint32_t m = 0;
      for (uint32_t k = 0; k < n; k++) {
        s[m] = s[k];
        m += aM[k];
      }
      n = m;
      iTerm += nT;
    }
    nSel += n;
    b0 = bEnd;
  }

  /* Size the result; if it does not fit, keep the longest prefix that does
  ** (sizes grow with rows, so a binary search finds it). */
  uint32_t nKeep = nSel;
  for (;;) {
    uint64_t nBytes = nFixed;
    for (int j = 0; j < pp->nOut; j++) {
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
      uint64_t nb2 = nFixed;
      for (int j = 0; j < pp->nOut; j++) {
        ex_outcol o;
        out_size(&aCol[pp->aOut[j]], aSel, mid, &o);
        nb2 += col_bytes(&o, mid);
      }
      if (nb2 <= nOutArea) lo = mid;
      else hi = mid - 1;
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
    d[0] = o->clsMask;
    d[1] = (uint8_t)(!mask_single(o->clsMask) && nKeep > 0);
    d[2] = (uint8_t)((o->clsMask & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) != 0);
    put64(d + 8, o->nHeap);
    out_write(&aCol[pp->aOut[j]], aSel, nKeep, o, q);
    q += col_bytes(o, nKeep);
  }
  uint64_t nBytes = (uint64_t)(q - pOut);
  put32(pOut, CSQ_RES_MAGIC);
  put32(pOut + 4, nKeep);
  put32(pOut + 8, nextRow);
  put32(pOut + 12, (uint32_t)pp->nOut);
  put64(pOut + 16, nBytes);
  *pRet = (uint64_t)nKeep | (nBytes << 32);
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
  if (reason) rc = fault(pRet, reason);
  return rc;
}

const dev_ptype dev_ptype_csq = {CSQ_PTYPE_CSQ, "csq", ex_verify, ex_run, ex_free};

/* A strong reference point: static links that use the executor call this,
** which also pulls exec.o in (ptype.h only refers to dev_ptype_csq weakly). */
int csq_exec_register(void) { return dev_ptype_register(&dev_ptype_csq); }
