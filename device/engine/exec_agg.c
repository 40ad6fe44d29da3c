/*
** device/engine/exec_agg.c - the aggregate updates (COUNT, SUM / TOTAL / AVG
** states, MIN / MAX) of one run, and ex_agg_exec: a grouped program over the
** selected rows of one row group, run by run, into partial aggregate
** states.
*/
#include "device/engine/exec_int.h"

#define AG_DIRECT_MAX (1u << 16) /* largest product of key domains for the direct table */

/* Update aggregate ia's states with rows [0, n) of the run, whose groups
** are aGid and whose per-group row counts are t->aRunN over t->aTouch.
** Uniform vectors take typed loops: counts come from the run's histogram,
** real sums are summed per group for the run (at most CSQ_PROG_BATCH plain
** additions) and then added to the state with compensation. Row k's value is
** at X[k] in e's vectors, or at k if X is NULL. 0 or a fault. */
static int ag_update(ag_tab *t, const csq_pagg *a, int ia, const ex_ev *e, const uint32_t *aGid,
                     uint32_t n, const uint32_t *X) {
  uint8_t *base = t->g.aState + t->aOff[ia];
  size_t st = t->g.stride;
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
      if (t->g.nGroup == 1) {
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
      if (t->g.nGroup == 1) {
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

void ex_carry_free(ex_carry *c) {
  ex_ag_free(&c->t);
  free(c->aMinMax);
  memset(c, 0, sizeof(*c));
}

/* Before a carry's groups outlive their row group: copy the bytes of new
** groups' text keys into the table, and those of every text MIN/MAX state
** into a fresh aMinMax (a state kept from an earlier row group is copied
** again, so the old copy can go). 0 or CSQ_FAULT_NOMEM. */
static int carry_keep(ex_carry *c, ag_tab *t, const csq_prog *pp, const int8_t *aAlias) {
  int nKey = t->g.nKey;
  for (uint32_t g = c->nKept; g < t->g.nGroup; g++)
    for (int j = 0; j < nKey; j++) {
      ex_val *k = &t->g.aKey[(size_t)g * nKey + j];
      if ((k->cls != CSQ_TEXT && k->cls != CSQ_BLOB) || k->n == 0) continue;
      const uint8_t *z = csq_group_keep(&t->g, k->z, k->n);
      if (!z) return CSQ_FAULT_NOMEM;
      k->z = z;
    }
  c->nKept = t->g.nGroup;
  uint64_t nByte = 0;
  for (int pass = 0; pass < 2; pass++) {
    uint8_t *a = NULL;
    if (pass == 1) {
      if (nByte == 0) break;
      a = malloc(nByte);
      if (!a) return CSQ_FAULT_NOMEM;
      nByte = 0;
    }
    for (int i = 0; i < pp->nAgg; i++) {
      if (aAlias[i] >= 0 || (pp->aAgg[i].fn != CSQ_AGG_MIN && pp->aAgg[i].fn != CSQ_AGG_MAX))
        continue;
      for (uint32_t g = 0; g < t->g.nGroup; g++) {
        ex_val *b = (ex_val *)(csq_group_state(&t->g, g) + t->aOff[i]);
        if ((b->cls != CSQ_TEXT && b->cls != CSQ_BLOB) || b->n == 0) continue;
        if (a) {
          memcpy(a + nByte, b->z, b->n);
          b->z = a + nByte;
        }
        nByte += b->n;
      }
    }
    if (a) {
      free(c->aMinMax);
      c->aMinMax = a;
    }
  }
  return 0;
}

/* Aggregate the selected rows aSel[0..nSel) (ascending, from row `start` of
** an nRow-row group) into the output area. 0 or a CSQ_FAULT_* reason; on
** success *pRet is the completion's DW0-DW1. */
int ex_agg_exec(const ex_prog *ep, ex_col *aCol, const uint32_t *aSel, uint32_t nSel,
                uint32_t start, uint32_t nRow, const uint8_t *pSeed, uint64_t nSeed, uint8_t *pOut,
                uint64_t nOutArea, ex_carry *pCarry, dev_exec_ctx *ctx, uint64_t *pRet) {
  const csq_prog *pp = &ep->p;
  ag_tab t;
  int reason = 0;
  if (pCarry && pCarry->bLive) { /* t owns the carried groups until they go back */
    t = pCarry->t;
    memset(&pCarry->t, 0, sizeof(pCarry->t));
    pCarry->bLive = 0;
  } else {
    memset(&t, 0, sizeof(t));
    t.nAgg = pp->nAgg;
    t.nCol = pp->nResCol;
    csq_group_init(&t.g, pp->nKey, csq_group_layout(pp, sizeof(ag_sum), t.aOff));
  }

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
  /* Codes are per row group, but an INTEGER key's code is its value less
  ** the chunk's reference: a carried direct table whose keys had the same
  ** references and domains maps the same values, and is kept. */
  int bKeep = t.aDirect != NULL;
  for (int j = 0; j < pp->nKey && bDirect; j++) {
    const csq_pexpr *x = &pp->aExpr[pp->aKey[j]];
    const ex_col *c = x->op == CSQ_EX_COL ? &aCol[x->a] : NULL;
    uint32_t dom = c ? ex_key_domain(c) : 0;
    if (!dom || nDirect * dom > AG_DIRECT_MAX) bDirect = 0;
    bKeep = bKeep && c && c->kind == K_INT && !c->bAllNull && t.aDom[j] == dom &&
            t.aDirRef[j] == c->d.iRef;
    t.aDom[j] = dom;
    t.aDirRef[j] = c ? c->d.iRef : 0;
    nDirect *= dom ? dom : 1;
  }
  if (!bDirect || !bKeep || t.nDirect != nDirect) {
    free(t.aDirect);
    t.aDirect = NULL;
    t.nDirect = 0;
  }
  /* Carried groups are found by their key values: groups another row
  ** group's direct table made have no hashes yet. Ones made in ascending
  ** key order without hashes stay so for a hashed run (ex_ag_ids_hash). */
  if (pp->nKey > 0 && t.g.nGroup > 0 && t.g.nSlot == 0 && (bDirect || !t.g.bNoHash)) {
    t.g.bNoHash = 1;
    if (csq_group_grow(&t.g)) {
      reason = CSQ_FAULT_NOMEM;
      goto done;
    }
  }
  if (bDirect && !t.aDirect) {
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
    if (!aNeed[i] || x->op == CSQ_EX_COL || x->op == CSQ_EX_CONST || x->op == CSQ_EX_BPF) continue;
    if (x->op == CSQ_EX_CASE) { /* a is a condition term */
      aNeed[x->b] = aNeed[x->c] = 1;
    } else {
      aNeed[x->a] = 1;
      if (x->op != CSQ_EX_NEG && x->op != CSQ_EX_MAP) aNeed[x->b] = 1; /* MAP's b: a constant */
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
  if (!t.aTouch) t.aTouch = malloc(sizeof(uint32_t) * BATCH);
  if (!t.aPerm) t.aPerm = malloc(sizeof(uint32_t) * (BATCH + 8)); /* + 8: ag_partition_avx2's */
  if (!t.aSeg) t.aSeg = malloc(sizeof(uint32_t) * (BATCH + 1));
  if (!t.aTouch || !t.aPerm || !t.aSeg) {
    reason = CSQ_FAULT_NOMEM;
    goto done;
  }
  if (pSeed) {
    reason = ex_ag_seed(&t, pp, aAlias, pSeed, nSeed);
    if (reason) goto done;
  }
  uint32_t nSeeded = t.g.nGroup;

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
      reason = ex_ev_all(ep, aCol, apCondDict, aEv, aM, aNeed, b0, nb, aAll, nb);
      if (!reason) {
        for (uint32_t k = 0; k < n; k++) aX[k] = s[k] - b0;
        X = aX;
      }
    }
    if (reason) reason = ex_ev_all(ep, aCol, apCondDict, aEv, aM, aNeed, b0, nb, s, n);
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
    while (m > 0 &&
           ex_ag_bound(&t, (uint64_t)t.g.nGroup + m,
                       t.nVar + (nVarEv ? aVarCum[m] : (uint64_t)m * nKeyVarMax)) > nOutArea)
      m /= 2;
    if (m == 0) {
      if (t.g.nGroup == 0 && k0 == 0) {
        reason = CSQ_FAULT_OUTPUT_FULL;
        goto done;
      }
      nextRow = s[0];
      break;
    }
    if (pp->nKey == 0) { /* one group, made by the first row */
      if (t.g.nGroup == 0 && ex_ag_new_group(&t, NULL, 0, CSQ_GROUP_NO_SLOT) < 0) {
        reason = CSQ_FAULT_NOMEM;
        goto done;
      }
      memset(aGid, 0, sizeof(uint32_t) * m);
    } else if (bDirect) {
      reason = ex_ag_ids_direct(&t, pp, aCol, b0, nb, s, m, X, aGid);
    } else {
      reason = ex_ag_ids_hash(&t, pp, aEv, m, X, aGid);
    }
    if (reason) goto done;
    ex_ag_order_run(&t, aGid, m, X);
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
  if (pCarry && !pCarry->bLast) {
    if (nextRow < nRow) { /* the groups would not fit one result */
      reason = CSQ_FAULT_RANGE_FULL;
      goto done;
    }
    reason = carry_keep(pCarry, &t, pp, aAlias);
    if (reason) goto done;
    *pRet = 0;
    ctx->pStats->rows_scanned += nRow - start;
    ctx->pStats->rows_returned += t.g.nGroup - nSeeded;
    ctx->pStats->row_groups_scanned++;
    pCarry->t = t;
    pCarry->bLive = 1;
    memset(&t, 0, sizeof(t));
    goto done;
  }
  uint64_t nBytes = ex_ag_write(&t, pp, pOut, nextRow);
  ex_res_done(ctx, pOut, nBytes, start, nextRow, nRow, t.g.nGroup - nSeeded, pRet);
done:
  if (apCondDict)
    for (int i = 0; i < pp->nCond; i++) free(apCondDict[i]);
  free(apCondDict);
  free(aEvMem);
  free(aEv);
  free(aGid);
  free(aVarCum);
  free(aAll);
  ex_ag_free(&t);
  return reason;
}
