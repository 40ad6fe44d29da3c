/*
** planner/star.c - a star join grouped on the probe side's device
** (planner/star.h): the shape test, the code maps, the probe's grouped
** program and the decoding of its merged groups.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device/format/codemap.h"
#include "device/format/group.h"
#include "device/format/keymap.h"
#include "device/format/le.h"
#include "device/format/value.h"
#include "planner/filter.h"
#include "planner/joinagg.h"
#include "planner/keyspan.h"
#include "planner/star.h"

int pl_star_shape(const pl_join *j) {
  if (j->nTab < 2 || j->nSemi || j->nScalar || j->nValue || j->zInner || j->nExtra) return 0;
  int p = j->aOrder[0];
  for (int t = 0; t < j->nTab; t++) {
    const pl_jtab *jt = &j->aTab[t];
    if (jt->bLeft) return 0;
    if (t != p && (jt->nKey != 1 || jt->aKeyTab[0] != p)) return 0;
  }
  return 1;
}

/* The code of each row's value of x (1.., numbering x's distinct values
** under SQLite's GROUP BY equality: a group table's numbers, + 1) into
** aCode[0..x->n), each distinct value once, first seen first, into *pVal.
** 0 or -ENOMEM. */
static int number_values(const csq_vec *x, uint32_t *aCode, csq_vec *pVal) {
  csq_group g;
  csq_group_init(&g, 1, 16);
  int e = 0;
  for (uint32_t r = 0; r < x->n && !e; r++) {
    csq_value v = csq_value_of_vec(x, r);
    uint64_t h = csq_group_hash(&v, 1);
    uint32_t pos = 0;
    int64_t k = (e = csq_group_reserve(&g)) ? -1 : csq_group_find(&g, &v, h, &pos);
    if (!e && k < 0) {
      k = csq_group_add(&g, &v, h, pos);
      e = k < 0 ? -ENOMEM : csq_vec_append(pVal, x, r, 1);
    }
    if (!e) aCode[r] = (uint32_t)k + 1;
  }
  csq_group_free(&g);
  return e;
}

/* The code map of build side rows: key column k, value column x. */
static int code_map(const csq_vec *k, const csq_vec *x, int64_t lo, uint32_t nSpan, uint8_t **pp,
                    uint32_t *pn, csq_vec *pVal) {
  uint32_t n = CSQ_CODEMAP_HDR + 4 * nSpan;
  uint8_t *p = calloc(n, 1);
  uint32_t *aCode = malloc(sizeof(uint32_t) * (x->n ? x->n : 1));
  int e = p && aCode ? number_values(x, aCode, pVal) : -ENOMEM;
  if (e == 0) {
    csq_put_le64(p, (uint64_t)lo);
    for (uint32_t r = 0; r < k->n; r++)
      csq_put_le32(p + CSQ_CODEMAP_HDR + 4 * ((uint64_t)k->aVal[r].i - (uint64_t)lo), aCode[r]);
  }
  free(aCode);
  if (e) {
    free(p);
    return e;
  }
  *pp = p;
  *pn = n;
  return 0;
}

/* The exact filter "probe key in a build side's keys k", a bitmap of them
** (their join filter, which the hash join may send as a Bloom filter). */
static int presence_filter(csq_pb *b, int slot, const csq_vec *k, int64_t lo, uint32_t nSpan) {
  uint32_t n = CSQ_KEYMAP_HDR + nSpan / 8 + 1;
  uint8_t *p = calloc(n, 1);
  if (!p) return -ENOMEM;
  csq_put_le64(p, (uint64_t)lo);
  for (uint32_t r = 0; r < k->n; r++) {
    uint64_t u = (uint64_t)k->aVal[r].i - (uint64_t)lo;
    p[CSQ_KEYMAP_HDR + (u >> 3)] |= (uint8_t)(1u << (u & 7));
  }
  int e = pl_filter_add_keymap(b, slot, p, n);
  free(p);
  return e < 0 ? e : 0;
}

/* The share of its table build side t's rows are. */
static double build_share(const pl_join *j, const pl_jdata *aData, int t) {
  int64_t n = j->aTab[t].nRows;
  double x = n > 0 ? (double)aData[t].nRow / (double)n : 0.5;
  return x > 1 ? 1 : x;
}

/* A constant of the host part's program, again in b. */
static int copy_const(csq_pb *b, const csq_pconst *k) {
  switch (k->cls) {
  case CSQ_INT:
    return csq_pb_const_int(b, k->i);
  case CSQ_REAL:
    return csq_pb_const_real(b, k->r);
  case CSQ_TEXT:
  case CSQ_BLOB:
    return csq_pb_const_bytes(b, k->cls, k->z, k->len);
  default:
    return csq_pb_const_null(b);
  }
}

/* The table and output of row-set column rc. */
static int rowset_source(const pl_join *j, int rc, int *pOut) {
  for (int t = 0; t < j->nTab; t++)
    for (int o = 0; o < j->aTab[t].nOut; o++)
      if (j->aTab[t].aRowCol[o] == rc) {
        *pOut = o;
        return t;
      }
  return -1;
}

/* The probe's program: the host part's program h (over the joined rows)
** with the probe's columns read from its chunks and each build column key
** through a code map. 0, 1 (not a star) or a negative errno. */
typedef struct star_x {
  int aNew[CSQ_AGG_MAX_EXPR];      /* instruction i in b, or -1: ... */
  int aBuildTab[CSQ_AGG_MAX_EXPR]; /* ... a build side's column, a key only */
  int aBuildOut[CSQ_AGG_MAX_EXPR];
} star_x;

/* The host part's instructions h again in b, over the probe's chunks;
** those reading a build side's column noted in x, allowed as keys only.
** 0, 1 (not a star) or a negative errno. */
static int star_exprs(const pl_join *j, const csq_prog *h, csq_pb *b, star_x *x0) {
  int p = j->aOrder[0];
  int *aNew = x0->aNew, *aBuildTab = x0->aBuildTab, *aBuildOut = x0->aBuildOut;
  if (h->nTerm || h->nCond) return 1;
  for (int i = 0; i < h->nExpr; i++) {
    const csq_pexpr *x = &h->aExpr[i];
    aBuildTab[i] = -1;
    aNew[i] = -1;
    switch (x->op) {
    case CSQ_EX_COL: {
      int iChunk = h->aIn[x->a], o = 0;
      if (iChunk < 1) return 1;
      int rc = PL_JAGG_COL(j->nCol, iChunk), t = rowset_source(j, rc, &o);
      if (t < 0) return 1;
      if (t != p) { /* a build column: a key only, through its code map */
        if (j->aColColl[rc] != 'x') return 1;
        aBuildTab[i] = t;
        aBuildOut[i] = o;
        break;
      }
      int slot = csq_pb_input(b, (uint32_t)j->aTab[p].aChunk[o]);
      aNew[i] = slot < 0 ? slot : csq_pb_expr_col(b, slot);
      break;
    }
    case CSQ_EX_CONST: {
      int k = copy_const(b, &h->aConst[x->a]);
      aNew[i] = k < 0 ? k : csq_pb_expr_const(b, k);
      break;
    }
    case CSQ_EX_ADD:
    case CSQ_EX_SUB:
    case CSQ_EX_MUL:
    case CSQ_EX_DIV:
      if (aNew[x->a] < 0 || aNew[x->b] < 0) return 1; /* over a build column */
      aNew[i] = csq_pb_expr_arith(b, x->op, aNew[x->a], aNew[x->b]);
      break;
    case CSQ_EX_NEG:
      if (aNew[x->a] < 0) return 1;
      aNew[i] = csq_pb_expr_neg(b, aNew[x->a]);
      break;
    default:
      return 1;
    }
    if (aBuildTab[i] < 0 && aNew[i] < 0) return aNew[i];
  }
  for (int i = 0; i < h->nAgg; i++) {
    const csq_pagg *a = &h->aAgg[i];
    int e = a->fn == CSQ_AGG_COUNT_STAR ? -1 : aNew[a->expr];
    if (a->fn != CSQ_AGG_COUNT_STAR && e < 0) return 1; /* over a build column */
  }
  return 0;
}

static int star_program(const pl_join *j, const pl_jdata *aData, const csq_prog *h, csq_pb *b,
                        pl_star *s) {
  int p = j->aOrder[0];
  star_x x0;
  int rcx = star_exprs(j, h, b, &x0);
  if (rcx) return rcx;
  const int *aNew = x0.aNew, *aBuildTab = x0.aBuildTab, *aBuildOut = x0.aBuildOut;
  /* every build side: its keys' span, checked unique */
  int64_t aLo[PL_JOIN_MAX_TAB];
  uint32_t aSpan[PL_JOIN_MAX_TAB];
  for (int t = 0; t < j->nTab; t++) {
    if (t == p) continue;
    int rc =
        pl_keys_unique(&aData[t].aCol[j->aTab[t].aKeyOut[0]], PL_STAR_MAX_SPAN, &aLo[t], &aSpan[t]);
    if (rc) return rc;
  }
  s->nKey = h->nKey;
  for (int k = 0; k < h->nKey; k++) {
    int i = h->aKey[k], e;
    if (aBuildTab[i] < 0) {
      e = csq_pb_group(b, aNew[i]);
    } else {
      int t = aBuildTab[i];
      const pl_jtab *jt = &j->aTab[t];
      uint8_t *pMap = NULL;
      uint32_t nMap = 0;
      s->aMapped[k] = 1;
      e = code_map(&aData[t].aCol[jt->aKeyOut[0]], &aData[t].aCol[aBuildOut[i]], aLo[t], aSpan[t],
                   &pMap, &nMap, &s->aVal[k]);
      int slot = e ? e : csq_pb_input(b, (uint32_t)j->aTab[p].aChunk[jt->aKeyProbe[0]]);
      int eCol = slot < 0 ? slot : csq_pb_expr_col(b, slot);
      int eMap = eCol < 0 ? eCol : csq_pb_expr_map(b, eCol, pMap, nMap);
      free(pMap);
      e = eMap < 0 ? eMap : csq_pb_group(b, eMap);
    }
    if (e < 0) return e;
  }
  for (int i = 0; i < h->nAgg; i++) {
    const csq_pagg *a = &h->aAgg[i];
    int e = csq_pb_agg(b, a->fn, a->flags, a->fn == CSQ_AGG_COUNT_STAR ? -1 : aNew[a->expr]);
    if (e < 0) return e;
  }
  /* every build side's keys filter the probe's rows exactly, the side
  ** holding the smallest share of its table first (it likely keeps fewest
  ** rows): the codes are then looked up for the rows that join only */
  int aSide[PL_JOIN_MAX_TAB], nSide = 0;
  for (int t = 0; t < j->nTab; t++) {
    if (t == p) continue;
    int i = nSide++;
    for (; i > 0 && build_share(j, aData, aSide[i - 1]) > build_share(j, aData, t); i--)
      aSide[i] = aSide[i - 1];
    aSide[i] = t;
  }
  for (int i = 0; i < nSide; i++) {
    const pl_jtab *jt = &j->aTab[aSide[i]];
    int slot = csq_pb_input(b, (uint32_t)j->aTab[p].aChunk[jt->aKeyProbe[0]]);
    int e = slot < 0 ? slot
                     : presence_filter(b, slot, &aData[aSide[i]].aCol[jt->aKeyOut[0]],
                                       aLo[aSide[i]], aSpan[aSide[i]]);
    if (e < 0) return e;
  }
  return 0;
}

int pl_star_possible(const pl_join *j, const pl_plan *plan) {
  if (!pl_star_shape(j) || !plan->bPush || plan->bRows || plan->bEmpty) return 0;
  csq_prog h;
  char zErr[8];
  if (csq_prog_parse(plan->pProg, plan->nProg, &h, zErr, sizeof(zErr))) return 0;
  csq_pb *b = csq_pb_new();
  star_x x0;
  int rc = b ? star_exprs(j, &h, b, &x0) : 1;
  csq_pb_free(b);
  csq_prog_clear(&h);
  return rc == 0;
}

int pl_star_build(const pl_join *j, const pl_jdata *aData, const pl_plan *plan, pl_star *s) {
  memset(s, 0, sizeof(*s));
  for (int k = 0; k < CSQ_AGG_MAX_KEYS; k++) csq_vec_init(&s->aVal[k]);
  int p = j->aOrder[0];
  if (!pl_star_shape(j) || !plan->bPush || plan->bRows || plan->bEmpty || !j->apB[p]) return 1;
  csq_prog h;
  char zErr[8];
  int e = csq_prog_parse(plan->pProg, plan->nProg, &h, zErr, sizeof(zErr));
  if (e) return e == -ENOMEM ? e : 1;
  csq_pb *b = csq_pb_copy(j->apB[p]);
  e = b ? 0 : -ENOMEM;
  if (e == 0) {
    csq_pb_drop_outputs(b);
    e = star_program(j, aData, &h, b, s);
  }
  if (e == 0) e = csq_pb_finish(b, &s->pProg, &s->nProg);
  csq_pb_free(b);
  csq_prog_clear(&h);
  if (e == -EINVAL) e = 1; /* a program limit: the hash join takes it */
  if (e) pl_star_clear(s);
  return e < 0 ? e : e ? 1 : 0;
}

int pl_star_decode(const pl_star *s, csq_vec *aCol, int nCol, uint32_t *pnRow) {
  uint32_t n = *pnRow, nKeep = 0;
  uint32_t *aSel = malloc(sizeof(uint32_t) * (n ? n : 1));
  if (!aSel) return -ENOMEM;
  for (uint32_t r = 0; r < n; r++) {
    int bKeep = 1;
    for (int k = 0; k < s->nKey; k++)
      if (s->aMapped[k] && aCol[k].aCls[r] != CSQ_INT) bKeep = 0;
    if (bKeep) aSel[nKeep++] = r;
  }
  int e = 0;
  for (int c = 0; c < nCol && !e; c++) {
    if (c < s->nKey && s->aMapped[c]) {
      uint32_t *aIdx = malloc(sizeof(uint32_t) * (nKeep ? nKeep : 1));
      csq_vec v;
      csq_vec_init(&v);
      if (!aIdx) {
        e = -ENOMEM;
        break;
      }
      for (uint32_t i = 0; i < nKeep; i++) {
        int64_t code = aCol[c].aVal[aSel[i]].i;
        if (code < 1 || (uint64_t)code > s->aVal[c].n) e = -EINVAL; /* never: codes are ours */
        aIdx[i] = e ? 0 : (uint32_t)(code - 1);
      }
      if (e == 0) e = csq_vec_gather(&v, &s->aVal[c], aIdx, nKeep);
      free(aIdx);
      if (e == 0) {
        csq_vec_free(&aCol[c]);
        aCol[c] = v;
      } else
        csq_vec_free(&v);
    } else if (nKeep < n)
      csq_vec_select(&aCol[c], aSel, nKeep);
  }
  free(aSel);
  if (e == 0) *pnRow = nKeep;
  return e;
}

void pl_star_clear(pl_star *s) {
  free(s->pProg);
  s->pProg = NULL;
  s->nProg = 0;
  for (int k = 0; k < CSQ_AGG_MAX_KEYS; k++) csq_vec_free(&s->aVal[k]);
  memset(s->aMapped, 0, sizeof(s->aMapped));
}
