/*
** device/host/agg.c - the host merge of partial aggregates (device/host/agg.h): a hash
** table of groups keyed by their key values under SQLite's equality, each
** group holding the merged states of its aggregates (exact 128-bit integer
** sums, compensated real sums, counts, MIN/MAX values), and the SQLite
** finalisation of those states. The partial row layout is program.h's
** (AGGREGATION); the device side is device/engine/exec_agg.c.
*/
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/host/agg.h"
#include "device/format/value.h"
#include "device/host/scan.h"

/* A value the merger holds: TEXT/BLOB bytes live in the merger's heap. */
typedef struct ag_hv {
  uint8_t cls; /* CSQ_*, 0 = none yet (MIN/MAX) */
  uint32_t n;
  union {
    int64_t i;
    double r;
    uint64_t off;
  } u;
} ag_hv;

typedef struct ag_hsum {
  __int128 isum;
  unsigned __int128 upos, uneg; /* bounds of any running integer sum */
  int64_t cnt, nReal;
  double rs, rc;
} ag_hsum;

struct dev_agg {
  uint8_t *aProg;
  size_t nProg;
  csq_prog prog;
  int nKey, nAgg, nPartial;
  uint32_t aOff[CSQ_AGG_MAX_AGGS]; /* state offset of each aggregate in a group's block */
  uint32_t stride;
  uint32_t nGroup, nAlloc;
  ag_hv *aKey;     /* nGroup x nKey */
  uint64_t *aHash; /* per group */
  uint8_t *aState; /* nGroup x stride */
  uint32_t *aSlot; /* group + 1, 0 empty */
  uint32_t nSlot;
  char *aHeap;
  uint64_t nHeap, nHeapAlloc;
};

/* The bytes of a TEXT/BLOB key held in the heap; NULL for other classes
** (whose u holds a number, not an offset). */
static const uint8_t *hv_bytes(const dev_agg *a, const ag_hv *v) {
  if (v->cls != CSQ_TEXT && v->cls != CSQ_BLOB) return NULL;
  return (const uint8_t *)a->aHeap + v->u.off;
}

/* Held value v (bytes z) as a value.h value, to compare and hash. */
static inline csq_value hv_value(const ag_hv *v, const uint8_t *z) {
  csq_value x = {v->cls, v->u.i, v->u.r, z, v->n};
  return x;
}

/* SQLite's order of two non-NULL values, TEXT under collation coll
** (CSQ_TF_BINARY / NOCASE / RTRIM). */
static int hv_cmp(const ag_hv *a, const uint8_t *za, const ag_hv *b, const uint8_t *zb, int coll) {
  csq_value x = hv_value(a, za), y = hv_value(b, zb);
  return csq_value_cmp(&x, &y, coll);
}

/* Equality under SQLite's GROUP BY (NULL equals NULL, 1 equals 1.0). */
static int hv_eq(const ag_hv *a, const uint8_t *za, const ag_hv *b, const uint8_t *zb) {
  csq_value x = hv_value(a, za), y = hv_value(b, zb);
  return csq_value_eq(&x, &y);
}

/* Hash that agrees with hv_eq. */
static uint64_t hv_hash(const ag_hv *v, const uint8_t *z) {
  csq_value x = hv_value(v, z);
  return csq_value_hash(&x);
}

/* Value r of vector p as an ag_hv whose bytes (if any) are still in p. */
static void vec_val(const csq_vec *p, uint32_t r, ag_hv *v, const uint8_t **pz) {
  v->cls = p->aCls[r];
  v->n = 0;
  v->u.i = p->aVal[r].i;
  *pz = NULL;
  if (v->cls == CSQ_TEXT || v->cls == CSQ_BLOB) {
    v->n = p->aLen[r];
    *pz = (const uint8_t *)csq_vec_bytes(p, r);
  }
}

/* Copy n bytes into the heap; their offset, or -1 on OOM. */
static int64_t heap_put(dev_agg *a, const uint8_t *z, uint32_t n) {
  if (a->nHeap + n > a->nHeapAlloc) {
    uint64_t nNew = (a->nHeap + n) * 2 + 4096;
    char *p = realloc(a->aHeap, nNew);
    if (!p) return -1;
    a->aHeap = p;
    a->nHeapAlloc = nNew;
  }
  uint64_t off = a->nHeap;
  if (n) memcpy(a->aHeap + off, z, n);
  a->nHeap += n;
  return (int64_t)off;
}

/* Store v (bytes z) into *pDst, copying bytes into the heap. 0 or -ENOMEM. */
static int hv_store(dev_agg *a, ag_hv *pDst, const ag_hv *v, const uint8_t *z) {
  *pDst = *v;
  if (v->cls == CSQ_TEXT || v->cls == CSQ_BLOB) {
    int64_t off = heap_put(a, z, v->n);
    if (off < 0) return -ENOMEM;
    pDst->u.off = (uint64_t)off;
  }
  return 0;
}

void dev_agg_free(dev_agg *a) {
  if (!a) return;
  csq_prog_clear(&a->prog);
  free(a->aProg);
  free(a->aKey);
  free(a->aHash);
  free(a->aState);
  free(a->aSlot);
  free(a->aHeap);
  free(a);
}

int dev_agg_new(const uint8_t *prog, size_t nProg, dev_agg **pp, char **pzErr) {
  char zErr[256];
  *pp = NULL;
  *pzErr = NULL;
  dev_agg *a = calloc(1, sizeof(*a));
  if (!a || !(a->aProg = malloc(nProg ? nProg : 1))) {
    free(a);
    return -ENOMEM;
  }
  memcpy(a->aProg, prog, nProg);
  a->nProg = nProg;
  int rc = csq_prog_parse(a->aProg, nProg, &a->prog, zErr, sizeof(zErr));
  if (rc) {
    *pzErr = dev_mprintf("invalid grouped program: %s", zErr);
    dev_agg_free(a);
    return rc;
  }
  if (!a->prog.bAgg) {
    *pzErr = dev_mprintf("the program has no aggregation section");
    dev_agg_free(a);
    return -EINVAL;
  }
  a->nKey = a->prog.nKey;
  a->nAgg = a->prog.nAgg;
  a->nPartial = a->prog.nResCol;
  uint32_t off = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < a->nAgg; i++) {
      int bSum = csq_agg_state_cols(a->prog.aAgg[i].fn) > 1;
      if (bSum != (pass == 0)) continue;
      a->aOff[i] = off;
      int fn = a->prog.aAgg[i].fn;
      off += bSum                                     ? (uint32_t)sizeof(ag_hsum)
             : fn == CSQ_AGG_MIN || fn == CSQ_AGG_MAX ? (uint32_t)sizeof(ag_hv)
                                                      : 8;
    }
  a->stride = (off + 15) & ~15u;
  if (!a->stride) a->stride = 16;
  *pp = a;
  return 0;
}

int dev_agg_npartial(const dev_agg *a) {
  return a->nPartial;
}
int dev_agg_ncol(const dev_agg *a) {
  return a->nKey + a->nAgg;
}
uint64_t dev_agg_ngroups(const dev_agg *a) {
  return a->nGroup;
}

/* A new group with keys aK (bytes az): its index, or -1 on OOM. */
static int64_t group_new(dev_agg *a, const ag_hv *aK, const uint8_t *const *az, uint64_t h) {
  if (a->nGroup == a->nAlloc) {
    uint32_t nNew = a->nAlloc ? a->nAlloc * 2 : 64;
    ag_hv *aKey = realloc(a->aKey, sizeof(ag_hv) * (size_t)nNew * (a->nKey ? a->nKey : 1));
    if (!aKey) return -1;
    a->aKey = aKey;
    uint64_t *aH = realloc(a->aHash, sizeof(uint64_t) * nNew);
    if (!aH) return -1;
    a->aHash = aH;
    uint8_t *aS = realloc(a->aState, (size_t)a->stride * nNew);
    if (!aS) return -1;
    a->aState = aS;
    a->nAlloc = nNew;
  }
  uint32_t g = a->nGroup;
  for (int j = 0; j < a->nKey; j++)
    if (hv_store(a, &a->aKey[(size_t)g * a->nKey + j], &aK[j], az[j])) return -1;
  a->aHash[g] = h;
  memset(a->aState + (size_t)g * a->stride, 0, a->stride);
  a->nGroup++;
  return g;
}

static int slots_grow(dev_agg *a) {
  if ((uint64_t)(a->nGroup + 1) * 2 <= a->nSlot) return 0;
  uint32_t nNew = a->nSlot ? a->nSlot * 2 : 256;
  uint32_t *p = calloc(nNew, sizeof(uint32_t));
  if (!p) return -ENOMEM;
  for (uint32_t g = 0; g < a->nGroup; g++) {
    uint32_t pos = (uint32_t)a->aHash[g] & (nNew - 1);
    while (p[pos]) pos = (pos + 1) & (nNew - 1);
    p[pos] = g + 1;
  }
  free(a->aSlot);
  a->aSlot = p;
  a->nSlot = nNew;
  return 0;
}

/* The group of key values aK, made if new: its index, or -1 on OOM. */
static int64_t group_find(dev_agg *a, const ag_hv *aK, const uint8_t *const *az) {
  if (slots_grow(a)) return -1;
  uint64_t h = 0x84222325cbf29ce4ull;
  for (int j = 0; j < a->nKey; j++) h = (h ^ hv_hash(&aK[j], az[j])) * 0x100000001b3ull;
  h = csq_mix64(h);
  uint32_t mask = a->nSlot - 1, pos = (uint32_t)h & mask, s;
  while ((s = a->aSlot[pos]) != 0) {
    uint32_t g = s - 1;
    if (a->aHash[g] == h) {
      const ag_hv *gk = &a->aKey[(size_t)g * a->nKey];
      int j = 0;
      while (j < a->nKey && hv_eq(&gk[j], hv_bytes(a, &gk[j]), &aK[j], az[j])) j++;
      if (j == a->nKey) return g;
    }
    pos = (pos + 1) & mask;
  }
  int64_t g = group_new(a, aK, az, h);
  if (g >= 0) a->aSlot[pos] = (uint32_t)g + 1;
  return g;
}

/* Class check of a state cell: 1 if column p's row r is of class cls. */
static int cell_is(const csq_vec *p, uint32_t r, int cls) {
  return p->aCls[r] == cls;
}

int dev_agg_add(dev_agg *a, const csq_vec *aPart, uint32_t nRows, char **pzErr) {
  ag_hv aK[CSQ_AGG_MAX_KEYS];
  const uint8_t *az[CSQ_AGG_MAX_KEYS];
  *pzErr = NULL;
  for (int c = 0; c < a->nPartial; c++)
    if (aPart[c].n < nRows) {
      *pzErr =
          dev_mprintf("partial aggregate: column %d holds %u of %u rows", c, aPart[c].n, nRows);
      return -EINVAL;
    }
  for (uint32_t r = 0; r < nRows; r++) {
    for (int j = 0; j < a->nKey; j++) vec_val(&aPart[j], r, &aK[j], &az[j]);
    int64_t g = a->nKey == 0 && a->nGroup ? 0 : group_find(a, aK, az);
    if (g < 0) {
      *pzErr = dev_mprintf("out of memory merging partial aggregates");
      return -ENOMEM;
    }
    uint8_t *pS = a->aState + (size_t)g * a->stride;
    int c = a->nKey;
    for (int i = 0; i < a->nAgg; i++) {
      const csq_pagg *pa = &a->prog.aAgg[i];
      uint8_t *p = pS + a->aOff[i];
      switch (pa->fn) {
      case CSQ_AGG_COUNT_STAR:
      case CSQ_AGG_COUNT:
        if (!cell_is(&aPart[c], r, CSQ_INT)) goto bad;
        *(int64_t *)p += aPart[c].aVal[r].i;
        break;
      case CSQ_AGG_MIN:
      case CSQ_AGG_MAX: {
        ag_hv v, *best = (ag_hv *)p;
        const uint8_t *z;
        vec_val(&aPart[c], r, &v, &z);
        if (v.cls == CSQ_NULL) break;
        int x =
            best->cls ? hv_cmp(&v, z, best, hv_bytes(a, best), pa->flags & CSQ_TF_COLL_MASK) : 0;
        if (!best->cls || (pa->fn == CSQ_AGG_MIN ? x < 0 : x > 0)) {
          if (hv_store(a, best, &v, z)) {
            *pzErr = dev_mprintf("out of memory merging partial aggregates");
            return -ENOMEM;
          }
        }
        break;
      }
      default: {
        ag_hsum *s = (ag_hsum *)p;
        for (int k = 0; k < CSQ_AGG_SUM_COLS; k++)
          if (!cell_is(&aPart[c + k], r, k == 4 || k == 5 ? CSQ_REAL : CSQ_INT)) goto bad;
        /* a saturated bound counts as more than int64 holds */
        for (int k = 6; k < 8; k++) {
          int64_t b = aPart[c + k].aVal[r].i;
          if (b < 0) goto bad;
          unsigned __int128 u = b == INT64_MAX ? (unsigned __int128)1 << 64 : (uint64_t)b;
          if (k == 6)
            s->upos += u;
          else
            s->uneg += u;
        }
        s->cnt += aPart[c].aVal[r].i;
        s->nReal += aPart[c + 1].aVal[r].i;
        s->isum += (__int128)(((unsigned __int128)(uint64_t)aPart[c + 3].aVal[r].i << 64) |
                              (uint64_t)aPart[c + 2].aVal[r].i);
        csq_kbn_add(&s->rs, &s->rc, aPart[c + 4].aVal[r].r);
        /* a compensation poisoned by infinities means nothing: the sum is
        ** then infinite (or NaN) on its own */
        if (isfinite(aPart[c + 5].aVal[r].r)) csq_kbn_add(&s->rs, &s->rc, aPart[c + 5].aVal[r].r);
        break;
      }
      }
      c += csq_agg_state_cols(pa->fn);
    }
  }
  return 0;
bad:
  *pzErr = dev_mprintf("malformed partial aggregate (a state of the wrong type)");
  return -EBADMSG;
}

int dev_agg_scan(dev_agg *a, dev_queue *q, store *st, const store_table *pTab, store_rg **apRg,
                 int nRg, char **pzErr) {
  dev_scan *s = NULL;
  *pzErr = NULL;
  int rc = dev_scan_open(q, st, pTab, apRg, nRg, a->aProg, a->nProg, &s, pzErr);
  if (rc) return rc;
  csq_vec *aV = calloc(a->nPartial, sizeof(csq_vec));
  if (!aV) {
    dev_scan_close(s);
    return -ENOMEM;
  }
  for (;;) {
    uint32_t n = 0;
    rc = dev_scan_next(s, aV, &n, pzErr);
    if (rc) {
      if (dev_scan_fault(s) == CSQ_FAULT_NOT_NUMERIC) rc = -EDOM;
      break;
    }
    if (n == 0) break;
    rc = dev_agg_add(a, aV, n, pzErr);
    if (rc) break;
  }
  for (int c = 0; c < a->nPartial; c++) csq_vec_free(&aV[c]);
  free(aV);
  dev_scan_close(s);
  return rc;
}

int dev_agg_open(dev_queue *q, store *st, const store_table *pTab, store_rg **apRg, int nRg,
                 const uint8_t *prog, size_t nProg, dev_agg **pp, char **pzErr) {
  dev_agg *a;
  *pp = NULL;
  int rc = dev_agg_new(prog, nProg, &a, pzErr);
  if (rc) return rc;
  rc = dev_agg_scan(a, q, st, pTab, apRg, nRg, pzErr);
  if (rc) {
    dev_agg_free(a);
    return rc;
  }
  *pp = a;
  return 0;
}

/* The real value of a sum state: integers exactly, then the compensated
** reals. Infinities make the compensation meaningless: an infinite sum is
** its plain value, and Inf + -Inf is NaN (which SQLite reports as NULL). */
static double sum_real(const ag_hsum *s) {
  double rs = 0, rc = 0, d = (double)s->isum;
  csq_kbn_add(&rs, &rc, d);
  csq_kbn_add(&rs, &rc, (double)(s->isum - (__int128)d)); /* what the rounding lost */
  csq_kbn_add(&rs, &rc, s->rs);
  if (isfinite(s->rc)) csq_kbn_add(&rs, &rc, s->rc);
  return isfinite(rs) ? rs + rc : rs;
}

/* Push a real result, NULL for NaN as SQLite does. */
static int push_real(csq_vec *v, double r) {
  return isnan(r) ? csq_vec_push_null(v) : csq_vec_push_real(v, r);
}

static int push_hv(dev_agg *a, csq_vec *v, const ag_hv *x) {
  switch (x->cls) {
  case CSQ_INT:
    return csq_vec_push_int(v, x->u.i);
  case CSQ_REAL:
    return csq_vec_push_real(v, x->u.r);
  case CSQ_TEXT:
  case CSQ_BLOB:
    return csq_vec_push_bytes(v, x->cls, hv_bytes(a, x), x->n);
  default:
    return csq_vec_push_null(v);
  }
}

int dev_agg_finish(dev_agg *a, csq_vec *aOut, uint32_t *pnRows, char **pzErr) {
  *pzErr = NULL;
  *pnRows = 0;
  int nCol = a->nKey + a->nAgg, rc = 0;
  for (int c = 0; c < nCol; c++) csq_vec_reset(&aOut[c]);
  if (a->nKey == 0 && a->nGroup == 0 && group_find(a, NULL, NULL) < 0) return -ENOMEM;
  for (uint32_t g = 0; g < a->nGroup && rc == 0; g++) {
    for (int j = 0; j < a->nKey && rc == 0; j++)
      rc = push_hv(a, &aOut[j], &a->aKey[(size_t)g * a->nKey + j]);
    const uint8_t *pS = a->aState + (size_t)g * a->stride;
    for (int i = 0; i < a->nAgg && rc == 0; i++) {
      const uint8_t *p = pS + a->aOff[i];
      csq_vec *v = &aOut[a->nKey + i];
      const ag_hsum *s = (const ag_hsum *)p;
      switch (a->prog.aAgg[i].fn) {
      case CSQ_AGG_COUNT_STAR:
      case CSQ_AGG_COUNT:
        rc = csq_vec_push_int(v, *(const int64_t *)p);
        break;
      case CSQ_AGG_MIN:
      case CSQ_AGG_MAX:
        rc = push_hv(a, v, (const ag_hv *)p);
        break;
      case CSQ_AGG_SUM:
        /* SQLite raises "integer overflow" when a running sum of the
        ** integers met before the first REAL leaves int64, which depends on
        ** row order; the bounds say when that cannot happen, otherwise the
        ** query runs without pushdown and SQLite decides */
        if (s->upos > INT64_MAX || s->uneg > (unsigned __int128)1 << 63) {
          *pzErr = dev_mprintf("a SUM may overflow in row order: run on the host");
          return -EDOM;
        }
        if (s->cnt == 0)
          rc = csq_vec_push_null(v);
        else if (s->nReal)
          rc = push_real(v, sum_real(s));
        else if (s->isum >= INT64_MIN && s->isum <= INT64_MAX)
          rc = csq_vec_push_int(v, (int64_t)s->isum);
        else {
          *pzErr = dev_mprintf("integer overflow");
          return -ERANGE;
        }
        break;
      case CSQ_AGG_TOTAL:
        rc = push_real(v, s->cnt ? sum_real(s) : 0.0);
        break;
      default: /* AVG */
        rc = s->cnt ? push_real(v, sum_real(s) / (double)s->cnt) : csq_vec_push_null(v);
        break;
      }
    }
  }
  if (rc) {
    *pzErr = dev_mprintf("out of memory building aggregate results");
    return rc;
  }
  *pnRows = a->nGroup;
  return 0;
}
