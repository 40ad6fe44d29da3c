/*
** device/host/agg.c - the host merge of partial aggregates (device/host/agg.h): a table
** of groups (device/format/group.h, the device's GROUP BY uses it too), each
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
#include "device/format/group.h"
#include "device/format/value.h"
#include "device/host/scan.h"

typedef struct ag_hsum {
  __int128 isum;
  unsigned __int128 upos, uneg; /* bounds of any running integer sum */
  int64_t cnt, nReal;
  double rs, rc;
} ag_hsum;

/* Groups hold their keys and MIN/MAX values as csq_values whose bytes the
** group table keeps (csq_group_keep): they outlive the partials they came
** from. */
struct dev_agg {
  uint8_t *aProg;
  size_t nProg;
  csq_prog prog;
  int nKey, nAgg, nPartial;
  uint32_t aOff[CSQ_AGG_MAX_AGGS]; /* state offset of each aggregate in a group's block */
  csq_group g;
};

/* Make v's bytes, if any, the group table's own. 0 or -ENOMEM. */
static int value_keep(dev_agg *a, csq_value *v) {
  if ((v->cls == CSQ_TEXT || v->cls == CSQ_BLOB) && v->n) {
    const uint8_t *z = csq_group_keep(&a->g, v->z, v->n);
    if (!z) return -ENOMEM;
    v->z = z;
  }
  return 0;
}

void dev_agg_free(dev_agg *a) {
  if (!a) return;
  csq_prog_clear(&a->prog);
  free(a->aProg);
  csq_group_free(&a->g);
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
  csq_group_init(&a->g, a->nKey, csq_group_layout(&a->prog, sizeof(ag_hsum), a->aOff));
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
  return a->g.nGroup;
}

/* The group of key values aK, made if new (its keys' bytes kept, aK's
** bytes then pointing at them): its index, or -1 on OOM. */
static int64_t group_find(dev_agg *a, csq_value *aK) {
  uint32_t pos;
  if (csq_group_reserve(&a->g)) return -1;
  uint64_t h = csq_group_hash(aK, a->nKey);
  int64_t g = csq_group_find(&a->g, aK, h, &pos);
  if (g >= 0) return g;
  for (int j = 0; j < a->nKey; j++)
    if (value_keep(a, &aK[j])) return -1;
  return csq_group_add(&a->g, aK, h, pos);
}

/* Class check of a state cell: 1 if column p's row r is of class cls. */
static int cell_is(const csq_vec *p, uint32_t r, int cls) {
  return p->aCls[r] == cls;
}

int dev_agg_add(dev_agg *a, const csq_vec *aPart, uint32_t nRows, char **pzErr) {
  csq_value aK[CSQ_AGG_MAX_KEYS];
  *pzErr = NULL;
  for (int c = 0; c < a->nPartial; c++)
    if (aPart[c].n < nRows) {
      *pzErr =
          dev_mprintf("partial aggregate: column %d holds %u of %u rows", c, aPart[c].n, nRows);
      return -EINVAL;
    }
  for (uint32_t r = 0; r < nRows; r++) {
    for (int j = 0; j < a->nKey; j++) aK[j] = csq_value_of_vec(&aPart[j], r);
    int64_t g = a->nKey == 0 && a->g.nGroup ? 0 : group_find(a, aK);
    if (g < 0) {
      *pzErr = dev_mprintf("out of memory merging partial aggregates");
      return -ENOMEM;
    }
    uint8_t *pS = csq_group_state(&a->g, (uint32_t)g);
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
        csq_value v = csq_value_of_vec(&aPart[c], r), *best = (csq_value *)p;
        if (v.cls == CSQ_NULL) break;
        int x = best->cls ? csq_value_cmp(&v, best, pa->flags & CSQ_TF_COLL_MASK) : 0;
        if (!best->cls || (pa->fn == CSQ_AGG_MIN ? x < 0 : x > 0)) {
          if (value_keep(a, &v)) {
            *pzErr = dev_mprintf("out of memory merging partial aggregates");
            return -ENOMEM;
          }
          *best = v;
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

/* Push a key or a MIN/MAX value (NULL for none). */
static int push_value(csq_vec *v, const csq_value *x) {
  switch (x->cls) {
  case CSQ_INT:
    return csq_vec_push_int(v, x->i);
  case CSQ_REAL:
    return csq_vec_push_real(v, x->r);
  case CSQ_TEXT:
  case CSQ_BLOB:
    return csq_vec_push_bytes(v, x->cls, x->z, x->n);
  default:
    return csq_vec_push_null(v);
  }
}

int dev_agg_finish(dev_agg *a, csq_vec *aOut, uint32_t *pnRows, char **pzErr) {
  *pzErr = NULL;
  *pnRows = 0;
  int nCol = a->nKey + a->nAgg, rc = 0;
  for (int c = 0; c < nCol; c++) csq_vec_reset(&aOut[c]);
  if (a->nKey == 0 && a->g.nGroup == 0 && group_find(a, NULL) < 0) return -ENOMEM;
  for (uint32_t g = 0; g < a->g.nGroup && rc == 0; g++) {
    for (int j = 0; j < a->nKey && rc == 0; j++)
      rc = push_value(&aOut[j], &csq_group_keys(&a->g, g)[j]);
    const uint8_t *pS = csq_group_state(&a->g, g);
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
        rc = push_value(v, (const csq_value *)p);
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
  *pnRows = a->g.nGroup;
  return 0;
}
