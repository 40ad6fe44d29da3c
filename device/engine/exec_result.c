/*
** device/engine/exec_result.c - a grouped program's result: the groups'
** keys and states written in program.h's result format, and a previous
** result read back as starting groups (Execute with CSQ_EXEC_ACC).
*/
#include "device/engine/exec_int.h"

/* Upper bound of the result's bytes with nGroup rows and nVar heap bytes. */
uint64_t ex_ag_bound(const ag_tab *t, uint64_t nGroup, uint64_t nVar) {
  return CSQ_RES_HDR + (uint64_t)CSQ_RES_COL_SZ * t->nCol + (uint64_t)t->nCol * (13 * nGroup + 21) +
         nVar;
}

/* Column j (0..7, program.h's order) of a SUM state as its result word: an
** INTEGER, or for 4 and 5 a REAL's bits. */
static inline uint64_t sum_col_word(const ag_sum *s, int j) {
  double r;
  uint64_t u;
  switch (j) {
  case 0:
    return (uint64_t)s->cnt;
  case 1:
    return (uint64_t)s->nReal;
  case 2:
    return (uint64_t)s->isum;
  case 3:
    return (uint64_t)(s->isum >> 64);
  case 4:
  case 5:
    r = j == 4 ? s->rs : s->rc;
    memcpy(&u, &r, 8);
    return u;
  case 6: /* positives and negatives, each saturating at INT64_MAX */
    return s->isum + s->ineg > INT64_MAX ? (uint64_t)INT64_MAX
                                         : (uint64_t)(int64_t)(s->isum + s->ineg);
  default:
    return s->ineg > INT64_MAX ? (uint64_t)INT64_MAX : (uint64_t)(int64_t)s->ineg;
  }
}

static inline uint8_t sum_col_cls(int j) {
  return j == 4 || j == 5 ? CSQ_REAL : CSQ_INT;
}

/* The aggregate whose state holds result column j, and in *pj the column
** within that state; -1 for a key column (or past the states). */
static int ag_col_agg(const ag_tab *t, const csq_prog *pp, int j, int *pj) {
  j -= t->g.nKey;
  if (j < 0) return -1;
  int ia = 0;
  while (ia < t->nAgg && j >= csq_agg_state_cols(pp->aAgg[ia].fn))
    j -= csq_agg_state_cols(pp->aAgg[ia++].fn);
  *pj = j;
  return ia < t->nAgg ? ia : -1;
}

/* The value of result column j (key or state) of group g. */
static void ag_cell(const ag_tab *t, const csq_prog *pp, int j, uint32_t g, ex_val *v) {
  memset(v, 0, sizeof(*v));
  if (j < t->g.nKey) {
    *v = csq_group_keys(&t->g, g)[j];
    return;
  }
  int jj = 0, ia = ag_col_agg(t, pp, j, &jj);
  if (ia < 0) return;
  const uint8_t *p = csq_group_state(&t->g, g) + t->aOff[ia];
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
    uint64_t u = sum_col_word((const ag_sum *)p, jj);
    v->cls = sum_col_cls(jj);
    if (v->cls == CSQ_REAL)
      memcpy(&v->r, &u, 8);
    else
      v->i = (int64_t)u;
    return;
  }
  }
}

/* Write state column j of every group when it is a count or one of a
** sum's columns (one class, no bytes: no pass to learn its shape, no
** value built per cell); 0 if it is neither. */
static int ag_write_fixed(const ag_tab *t, const csq_prog *pp, int j, uint8_t *pDesc, uint8_t *q,
                          uint64_t *pnBytes) {
  uint32_t n = t->g.nGroup;
  int ia = ag_col_agg(t, pp, j, &j);
  if (ia < 0) return 0;
  int fn = pp->aAgg[ia].fn, bCount = fn == CSQ_AGG_COUNT_STAR || fn == CSQ_AGG_COUNT;
  if (!bCount && csq_agg_state_cols(fn) != CSQ_AGG_SUM_COLS) return 0;
  uint8_t cls = bCount ? CSQ_INT : sum_col_cls(j);
  const ex_res_shape sh = ex_res_shape_of((uint8_t)(1u << cls), n, 0);
  ex_res_desc_put(pDesc, &sh, (uint8_t)(1u << cls), 0);
  const uint8_t *st = t->g.aState + t->aOff[ia];
  const size_t stride = t->g.stride;
  uint8_t *o = q + sh.l.oVal;
  /* one loop per column, so sum_col_word's switch folds away */
#define EACH(expr)                                                                                 \
  for (uint32_t g = 0; g < n; g++, st += stride) csq_put_le64(o + 8ull * g, (expr));
#define SUM(k) EACH(sum_col_word((const ag_sum *)(const void *)st, k))
  if (bCount) {
    EACH((uint64_t) * (const int64_t *)(const void *)st);
  } else {
    switch (j) {
    case 0:
      SUM(0);
      break;
    case 1:
      SUM(1);
      break;
    case 2:
      SUM(2);
      break;
    case 3:
      SUM(3);
      break;
    case 4:
      SUM(4);
      break;
    case 5:
      SUM(5);
      break;
    case 6:
      SUM(6);
      break;
    default:
      SUM(7);
      break;
    }
  }
#undef SUM
#undef EACH
  ex_res_pad(q, &sh, n, 0);
  *pnBytes = sh.l.nBytes;
  return 1;
}

/* Write the result of t (rows processed up to nextRow) at pOut. */
uint64_t ex_ag_write(const ag_tab *t, const csq_prog *pp, uint8_t *pOut, uint32_t nextRow) {
  uint32_t n = t->g.nGroup;
  uint8_t *q = pOut + CSQ_RES_HDR + (size_t)CSQ_RES_COL_SZ * t->nCol;
  ex_val v;
  for (int j = 0; j < t->nCol; j++) {
    uint64_t nFixed = 0;
    if (ag_write_fixed(t, pp, j, pOut + CSQ_RES_HDR + (size_t)CSQ_RES_COL_SZ * j, q, &nFixed)) {
      q += nFixed;
      continue;
    }
    uint8_t m = 0;
    uint64_t nHeap = 0;
    for (uint32_t g = 0; g < n; g++) {
      ag_cell(t, pp, j, g, &v);
      m |= (uint8_t)(1u << v.cls);
      nHeap += var_bytes(&v);
    }
    const ex_res_shape sh = ex_res_shape_of(m, n, nHeap);
    ex_res_desc_put(pOut + CSQ_RES_HDR + (size_t)CSQ_RES_COL_SZ * j, &sh, m, nHeap);
    uint64_t off = 0;
    for (uint32_t g = 0; g < n; g++) {
      ag_cell(t, pp, j, g, &v);
      ex_res_put(q, &sh, g, &v, &off);
    }
    ex_res_pad(q, &sh, n, off);
    q += sh.l.nBytes;
  }
  uint64_t nBytes = (uint64_t)(q - pOut);
  ex_res_hdr_put(pOut, n, nextRow, (uint32_t)t->nCol, nBytes);
  return nBytes;
}

/* One column of a result, located for reading (ex_ag_seed). */
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
int ex_ag_seed(ag_tab *t, const csq_prog *pp, const int8_t *aAlias, const uint8_t *p, uint64_t n) {
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
    const csq_res_lay l = csq_res_col_lay(bCls, bLen, nRows, c->nHeap);
    if (nRows > n || l.nBytes > n - q) return CSQ_FAULT_BAD_JOB;
    c->cls = 0;
    c->aCls = bCls ? p + q : NULL;
    c->aVal = p + q + l.oVal;
    c->aLen = bLen ? p + q + l.oLen : NULL;
    c->aHeap = p + q + l.oHeap;
    if (!bCls) {
      c->cls = (uint8_t)csq_res_mask_cls(m);
      if (nRows && !c->cls) return CSQ_FAULT_BAD_JOB;
    }
    if (!bLen && (m & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB)))) return CSQ_FAULT_BAD_JOB;
    q += l.nBytes;
  }
  ex_val aK[CSQ_AGG_MAX_KEYS], v;
  for (uint32_t r = 0; r < nRows; r++) {
    for (int j = 0; j < t->g.nKey; j++)
      if (rcol_get(&aRc[j], r, &aK[j])) return CSQ_FAULT_BAD_JOB;
    int64_t g;
    if (t->g.nKey == 0) {
      if (nRows != 1) return CSQ_FAULT_BAD_JOB;
      g = ex_ag_new_group(t, NULL, 0, CSQ_GROUP_NO_SLOT);
    } else {
      uint32_t nBefore = t->g.nGroup;
      g = ex_ag_lookup(t, aK, csq_group_hash(aK, t->g.nKey));
      if (g >= 0 && t->g.nGroup == nBefore) return CSQ_FAULT_BAD_JOB; /* a key twice */
    }
    if (g < 0) return CSQ_FAULT_NOMEM;
    int j = t->g.nKey;
    for (int ia = 0; ia < t->nAgg; j += csq_agg_state_cols(pp->aAgg[ia].fn), ia++) {
      if (aAlias[ia] >= 0) continue; /* shares the state of an earlier one */
      uint8_t *st = csq_group_state(&t->g, g) + t->aOff[ia];
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
