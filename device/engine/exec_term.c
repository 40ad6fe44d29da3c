/*
** device/engine/exec_term.c - a term over a selection of rows: aM[k] for rows
** aSel[0..n) of one batch, by a typed loop chosen once per chunk and term
** (a range of packed codes, integer intervals and sets, double compares, a
** dictionary's entries evaluated once), or by the generic evaluator.
*/
#include "device/engine/exec_int.h"

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
void ex_code_range(ex_col *c, uint32_t b0, uint32_t nb, const uint32_t *aSel, uint32_t n, int eAll,
                   uint64_t lo, uint64_t w, uint8_t neg, uint8_t rn, uint8_t *aM) {
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
    const uint64_t *u = ex_col_codes(c, b0, nb);
    for (k = 0; k < n; k++) aM[k] = (uint8_t)((u[k] - lo <= w) ^ neg);
  } else {
    const uint64_t *u = ex_col_codes(c, b0, nb);
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
      dm->m[e] = (uint8_t)ex_ev_one(et, &v);
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

/* Is term et on column c a range of c's codes in this chunk? 1 with *pr
** filled; 0 if not (or on error, with *pRc = a CSQ_FAULT_*):
**  - INT_FOR: codes are x - iRef, so the integer plan's interval moves by
**    iRef, clipped to the chunk's values;
**  - REAL_DEC: the comparison becomes an interval of the scaled integers
**    (dec_first), so nothing is converted or divided;
**  - TEXT_DICT: the entries are sorted (chunk_dec.c checks), so the true ones
**    usually form one run of codes (dict_mask). */
int ex_term_codes(const ex_term *et, ex_col *c, uint8_t **ppDict, ex_crange *pr, int *pRc) {
  memset(pr, 0, sizeof(*pr));
  /* these read several columns: never one range of one's codes */
  if (et->t.op == CSQ_OP_BPF || et->t.op == CSQ_OP_COLCMP) return 0;
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

/* ---- IN over integers ----
** A join filter's IN list holds up to thousands of keys, tested against
** every row the terms before it kept: a binary search costs a dozen
** mispredicted branches a row. So a set that is not small gets a lookup
** table once, at compile time: a bitmap over [setLo, setLo + setSpan] when
** the values are dense enough that it is not much bigger than a hash table
** (keys of a dimension are usually near consecutive), else an
** open-addressing hash table with linear probing. */

/* Sets of at most this many values whose span is too wide for the bitmap
** are compared with every value, without branches: a binary search over
** them mispredicts about once per row. */
#define SET_SMALL 16

/* The bitmap when its bits are at most this (256 KiB, which stays in a
** core's cache: one load per row beats a hash probe's mixing and chain for
** the rows a join filter turns away), or at most SET_BITS_PER_KEY a value
** of the set. */
#define SET_BITS_MIN     (1u << 21)
#define SET_BITS_PER_KEY 128

void ex_set_free(ex_term *et) {
  free(et->aSetBits);
  free(et->aSetHash);
  et->aSetBits = NULL;
  et->aSetHash = NULL;
}

int ex_set_compile(ex_term *et) {
  if (et->nSet < 2) return 0;
  int64_t lo = et->aSet[0], hi = et->aSet[et->nSet - 1];
  uint64_t span = (uint64_t)hi - (uint64_t)lo;
  if (span < SET_BITS_MIN || span / SET_BITS_PER_KEY < (uint64_t)et->nSet) {
    /* bit span + 1 stays clear: the probe clamps out-of-range values to it */
    size_t nWord = (size_t)((span + 1) / 64 + 1);
    if (!(et->aSetBits = calloc(nWord, 8))) return -ENOMEM;
    for (int i = 0; i < et->nSet; i++) {
      uint64_t u = (uint64_t)et->aSet[i] - (uint64_t)lo;
      et->aSetBits[u >> 6] |= (uint64_t)1 << (u & 63);
    }
    et->setLo = lo;
    et->setSpan = span;
    return 0;
  }
  if (et->nSet <= SET_SMALL) return 0;
  /* a value outside [lo, hi] marks a free slot; there is one unless the set
  ** holds both INT64_MIN and INT64_MAX (then the binary search serves) */
  if (lo > INT64_MIN)
    et->setEmpty = lo - 1;
  else if (hi < INT64_MAX)
    et->setEmpty = hi + 1;
  else
    return 0;
  uint64_t nSlot = 16;
  while (nSlot < 2 * (uint64_t)et->nSet) nSlot *= 2;
  if (!(et->aSetHash = malloc(8 * nSlot))) return -ENOMEM;
  for (uint64_t i = 0; i < nSlot; i++) et->aSetHash[i] = et->setEmpty;
  et->setMask = nSlot - 1;
  for (int i = 0; i < et->nSet; i++) {
    uint64_t b = csq_mix64((uint64_t)et->aSet[i]) & et->setMask;
    while (et->aSetHash[b] != et->setEmpty && et->aSetHash[b] != et->aSet[i])
      b = (b + 1) & et->setMask;
    et->aSetHash[b] = et->aSet[i];
  }
  return 0;
}

/* aM[k] = is row aSel[k]'s value, a[aSel[k] - b0], in et's set. */
static void set_find(const ex_term *et, const int64_t *a, uint32_t b0, const uint32_t *aSel,
                     uint32_t n, uint8_t *aM) {
  uint32_t k;
  if (et->aSetBits) {
    const uint64_t *w = et->aSetBits;
    uint64_t lo = (uint64_t)et->setLo, span = et->setSpan;
    for (k = 0; k < n; k++) {
      uint64_t u = (uint64_t)a[aSel[k] - b0] - lo;
      u = u <= span ? u : span + 1;
      aM[k] = (uint8_t)((w[u >> 6] >> (u & 63)) & 1);
    }
  } else if (et->aSetHash) {
    const int64_t *h = et->aSetHash, none = et->setEmpty;
    uint64_t mask = et->setMask;
    for (k = 0; k < n; k++) {
      int64_t x = a[aSel[k] - b0];
      uint64_t b = csq_mix64((uint64_t)x) & mask;
      while (h[b] != x && h[b] != none) b = (b + 1) & mask;
      aM[k] = h[b] == x && x != none; /* none itself is never in the set */
    }
  } else if (et->nSet <= SET_SMALL) {
    const int64_t *aSet = et->aSet;
    const int nSet = et->nSet;
    for (k = 0; k < n; k++) {
      int64_t x = a[aSel[k] - b0];
      int f = 0;
      for (int i = 0; i < nSet; i++) f |= aSet[i] == x;
      aM[k] = (uint8_t)f;
    }
  } else {
    for (k = 0; k < n; k++) {
      int64_t x = a[aSel[k] - b0];
      int l = 0, r = et->nSet - 1, f = 0;
      while (l <= r) {
        int mid = (l + r) / 2;
        if (et->aSet[mid] == x) {
          f = 1;
          break;
        }
        if (et->aSet[mid] < x)
          l = mid + 1;
        else
          r = mid - 1;
      }
      aM[k] = (uint8_t)f;
    }
  }
}

int ex_eval_term(const ex_term *et, ex_col *c, uint32_t b0, uint32_t nb, const uint32_t *aSel,
                 uint32_t n, uint8_t *aM, uint8_t **ppDict) {
  uint32_t k;
  ex_val v;
  /* an eBPF term or a column comparison reads several inputs: every caller
  ** passes c as &aCol[et->t.slot] of the execution's input columns, so
  ** c - slot is aCol */
  if (et->t.op == CSQ_OP_COLCMP)
    return ex_colcmp_eval(et, c, c - et->t.slot + et->t.k0, b0, nb, aSel, n, aM);
  if (et->t.op == CSQ_OP_BPF) {
    int rc = ex_bpf_eval(et, c - et->t.slot, b0, nb, aSel, n, aM);
    if (et->t.flags & CSQ_TF_NOT)
      for (k = 0; k < n; k++) aM[k] ^= 1;
    return rc;
  }
  if (c->kind == K_CONSTX || c->bAllNull) {
    /* one value for every non-NULL row */
    uint8_t rv = 0, rn = et->nullRes;
    if (!c->bAllNull) rv = (uint8_t)ex_ev_one(et, &c->cval);
    for (k = 0; k < n; k++) aM[k] = col_null(c, aSel[k]) ? rn : rv;
    return 0;
  }
  ex_crange cr;
  int rc = 0;
  if ((et->t.op == CSQ_OP_BLOOM || et->t.op == CSQ_OP_KEYMAP) &&
      ex_bloom_eval(et, c, b0, nb, aSel, n, aM, ppDict, &rc))
    return rc;
  if (ex_term_codes(et, c, ppDict, &cr, &rc)) {
    ex_code_range(c, b0, nb, aSel, n, cr.eAll, cr.lo, cr.hi - cr.lo, cr.neg, et->nullRes, aM);
    return 0;
  }
  if (rc) return rc;
  if (c->kind == K_INT && et->ip != IP_GENERIC) {
    ex_col_ints(c, b0, nb);
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
      /* found: !bNot; not found: NOT IN is true unless the list holds a NULL */
      set_find(et, a, b0, aSel, n, aM);
      uint8_t yes = (uint8_t)!et->bNot, no = (uint8_t)(et->bNot && !et->bInNull);
      for (k = 0; k < n; k++) aM[k] = aM[k] ? yes : no;
    }
    if (c->d.aNull)
      for (k = 0; k < n; k++)
        if (col_null(c, aSel[k])) aM[k] = rn;
    return 0;
  }
  if (c->kind == K_REAL && et->bReal) {
    ex_col_reals(c, b0, nb);
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
    const uint64_t *u = ex_col_codes(c, b0, nb);
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
  if (ex_like_text_col(et, c, aSel, n, aM)) return 0;
  for (k = 0; k < n; k++) {
    ex_col_get(c, aSel[k], &v);
    aM[k] = (uint8_t)ex_ev_one(et, &v);
  }
  return 0;
}
