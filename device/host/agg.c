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
#include "device/host/vecrun.h"

typedef struct ag_hsum {
  __int128 isum;
  unsigned __int128 upos, uneg; /* bounds of any running integer sum */
  int64_t cnt, nReal;
  double rs, rc;
} ag_hsum;

/* A run of groups: numbers g0 .. g0 + n - 1, made in a row, with INTEGER
** keys strictly ascending from lo to hi. A table stored in the order of its
** GROUP BY key yields partials whose rows ascend by key, each partial (or
** each device slot's sequence of them) covering a stretch of keys that no
** other covers but for the key at its ends, which two row groups share.
** Such partials make a few long runs: a row's group is then the next one
** of its run, found by a compare, or one at a run's end, found by binary
** search, and no group is ever hashed. A key that falls inside a run's
** range without being one of its keys splits the run. A key that is not
** an INTEGER, or more than AG_RUN_MAX runs (keys in no useful order), ends
** this: the groups are hashed (csq_group_reserve) and the merge goes on by
** hash. */
typedef struct ag_run {
  int64_t lo, hi;
  uint32_t g0, n;
} ag_run;

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
  /* Ascending runs (see ag_run_group): while bRuns, the groups have one
  ** INTEGER key each and are made without hashing (g.bNoHash), found
  ** through aRun instead. */
  int bRuns;
  ag_run *aRun; /* nRun runs, in key order: disjoint key ranges */
  uint32_t nRun, nRunAlloc;
  uint32_t iCur; /* the run of the last group found or made */
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
  free(a->aRun);
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
  a->bRuns = a->g.bNoHash = a->nKey == 1;
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

/* Insert run *pR at index i of a->aRun. 0 or -1 on OOM. */
static int run_insert(dev_agg *a, uint32_t i, const ag_run *pR) {
  if (a->nRun == a->nRunAlloc) {
    uint32_t nNew = a->nRunAlloc ? a->nRunAlloc * 2 : 64;
    ag_run *aR = realloc(a->aRun, sizeof(ag_run) * nNew);
    if (!aR) return -1;
    a->aRun = aR;
    a->nRunAlloc = nNew;
  }
  memmove(&a->aRun[i + 1], &a->aRun[i], sizeof(ag_run) * (a->nRun - i));
  a->aRun[i] = *pR;
  a->nRun++;
  return 0;
}

/* Make a group of INTEGER key x, the next group number: with bExtend at
** the end of run i (which ends with the last group made, and whose range
** x extends without meeting the next run's), else as a new run inserted at
** index i (between runs whose ranges leave room for x). Its number, or -1
** on OOM. */
static int64_t run_new_group(dev_agg *a, int64_t x, uint32_t i, int bExtend) {
  csq_value k;
  memset(&k, 0, sizeof(k));
  k.cls = CSQ_INT;
  k.i = x;
  ag_run r = {x, x, a->g.nGroup, 1};
  if (!bExtend && run_insert(a, i, &r)) return -1;
  int64_t g = csq_group_add(&a->g, &k, 0, CSQ_GROUP_NO_SLOT);
  if (g < 0) return -1; /* the merge fails: its runs no longer matter */
  if (bExtend) {
    a->aRun[i].hi = x;
    a->aRun[i].n++;
  }
  a->iCur = i;
  return g;
}

/* Runs beyond which keys look unordered: the merge goes by hash. */
#define AG_RUN_MAX 4096

/* The group of INTEGER key x while the groups are in runs (ag_run): found
** or made. bNext: the partial row before this one had the last group made
** (a run only grows through the rows of one partial: the next partial may
** start anywhere, and a run stretched across the gap would have to be
** split when the gap's keys come). -1 on OOM; -2 when the keys do not look
** ordered (the caller then hashes). */
static int64_t ag_run_group(dev_agg *a, int64_t x, int bNext) {
  uint32_t nRun = a->nRun, i = a->iCur;
  if (i < nRun) {
    ag_run *r = &a->aRun[i];
    if (x == r->hi) return r->g0 + r->n - 1; /* a run of equal keys in one partial */
    if (bNext && x > r->hi && (i + 1 == nRun || x < a->aRun[i + 1].lo) &&
        r->g0 + r->n == a->g.nGroup)
      return run_new_group(a, x, i, 1);
  }
  /* i = how many runs have lo <= x; run i - 1 is the one that may hold x */
  uint32_t lo = 0, hi = nRun;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (a->aRun[mid].lo <= x)
      lo = mid + 1;
    else
      hi = mid;
  }
  i = lo;
  if (i > 0 && x <= a->aRun[i - 1].hi) {
    ag_run *r = &a->aRun[i - 1];
    uint32_t l = r->g0, h = r->g0 + r->n; /* keys of groups [l, h) ascend */
    while (l < h) {
      uint32_t mid = l + (h - l) / 2;
      int64_t y = csq_group_keys(&a->g, mid)->i;
      if (y == x) {
        a->iCur = i - 1;
        return mid;
      }
      if (y < x)
        l = mid + 1;
      else
        h = mid;
    }
    /* x falls between two keys of the run, groups l - 1 and l: split it
    ** there, and x's group goes between the halves */
    if (nRun + 2 > AG_RUN_MAX) return -2;
    ag_run b = {csq_group_keys(&a->g, l)->i, r->hi, l, r->g0 + r->n - l};
    r->hi = csq_group_keys(&a->g, l - 1)->i;
    r->n = l - r->g0;
    if (run_insert(a, i, &b)) return -1;
    return run_new_group(a, x, i, 0);
  }
  if (bNext && i > 0 && a->aRun[i - 1].g0 + a->aRun[i - 1].n == a->g.nGroup)
    return run_new_group(a, x, i - 1, 1);
  if (nRun + 1 > AG_RUN_MAX) return -2;
  return run_new_group(a, x, i, 0);
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
  int bNext = 0;
  for (uint32_t r = 0; r < nRows; r++) {
    int64_t g = -1;
    if (a->bRuns) {
      g = aPart[0].aCls[r] == CSQ_INT ? ag_run_group(a, aPart[0].aVal[r].i, bNext) : -2;
      bNext = g >= 0 && (uint64_t)g + 1 == a->g.nGroup;
      if (g == -1) {
        *pzErr = dev_mprintf("out of memory merging partial aggregates");
        return -ENOMEM;
      }
      if (g == -2) { /* g.bNoHash stays: group_find hashes the groups */
        a->bRuns = 0;
        free(a->aRun);
        a->aRun = NULL;
        a->nRun = a->nRunAlloc = 0;
        g = -1;
      }
    }
    if (g < 0) {
      for (int j = 0; j < a->nKey; j++) aK[j] = csq_value_of_vec(&aPart[j], r);
      g = a->nKey == 0 && a->g.nGroup ? 0 : group_find(a, aK);
    }
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

static int agg_part(void *pArg, const csq_vec *aPart, uint32_t nRows, char **pzErr) {
  return dev_agg_add(pArg, aPart, nRows, pzErr);
}

int dev_agg_rows(dev_agg *a, const csq_vec *const *apChunk, int nChunk, uint32_t i0, uint32_t nRow,
                 char **pzErr) {
  return dev_vecrun(a->aProg, a->nProg, apChunk, nChunk, i0, nRow, agg_part, a, pzErr);
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

/* Append a number or NULL to v, whose room dev_agg_finish reserved (one
** store per array, no capacity check and no call per value: these run once
** per group of a result that may hold millions). 0. */
static int put_int(csq_vec *v, int64_t i) {
  v->aCls[v->n] = CSQ_INT;
  v->aVal[v->n].i = i;
  v->aLen[v->n++] = 0;
  v->clsMask |= 1u << CSQ_INT;
  return 0;
}
static int put_null(csq_vec *v) {
  v->aCls[v->n] = CSQ_NULL;
  v->aVal[v->n].i = 0;
  v->aLen[v->n++] = 0;
  v->clsMask |= 1u << CSQ_NULL;
  return 0;
}

/* Append a real result, NULL for NaN as SQLite does. 0. */
static int push_real(csq_vec *v, double r) {
  if (isnan(r)) return put_null(v);
  v->aCls[v->n] = CSQ_REAL;
  v->aVal[v->n].r = r;
  v->aLen[v->n++] = 0;
  v->clsMask |= 1u << CSQ_REAL;
  return 0;
}

/* Append a key or a MIN/MAX value (NULL for none). 0 or -ENOMEM (bytes). */
static int push_value(csq_vec *v, const csq_value *x) {
  switch (x->cls) {
  case CSQ_INT:
    return put_int(v, x->i);
  case CSQ_REAL:
    return push_real(v, x->r); /* never NaN */
  case CSQ_TEXT:
  case CSQ_BLOB:
    return csq_vec_push_bytes(v, x->cls, x->z, x->n);
  default:
    return put_null(v);
  }
}

int dev_agg_finish(dev_agg *a, csq_vec *aOut, uint32_t *pnRows, char **pzErr) {
  *pzErr = NULL;
  *pnRows = 0;
  int nCol = a->nKey + a->nAgg, rc = 0;
  for (int c = 0; c < nCol; c++) csq_vec_reset(&aOut[c]);
  if (a->nKey == 0 && a->g.nGroup == 0 && group_find(a, NULL) < 0) return -ENOMEM;
  for (int c = 0; c < nCol; c++) /* room for every row: the put_ functions rely on it */
    if (csq_vec_reserve(&aOut[c], a->g.nGroup, 0)) return -ENOMEM;
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
        rc = put_int(v, *(const int64_t *)p);
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
          rc = put_null(v);
        else if (s->nReal)
          rc = push_real(v, sum_real(s));
        else if (s->isum >= INT64_MIN && s->isum <= INT64_MAX)
          rc = put_int(v, (int64_t)s->isum);
        else {
          *pzErr = dev_mprintf("integer overflow");
          return -ERANGE;
        }
        break;
      case CSQ_AGG_TOTAL:
        rc = push_real(v, s->cnt ? sum_real(s) : 0.0);
        break;
      default: /* AVG */
        rc = s->cnt ? push_real(v, sum_real(s) / (double)s->cnt) : put_null(v);
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
