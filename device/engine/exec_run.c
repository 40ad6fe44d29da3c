/*
** device/engine/exec_run.c - xRun of the executor: the job checked, the
** input chunks verified (with the device's memo of chunks checked in full)
** and opened, the clauses filtering batch by batch in order of their
** selectivity, then top-N and output, or the grouped run; and
** dev_ptype_csq, the program type itself. The executor's design is in
** exec_int.h.
*/
#include "device/engine/exec_int.h"
#include "device/format/checksum.h"

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
  if (!ex_term_codes(e1, c, &apDict[iTerm], pr, pRc)) return 0;
  *pRn = e1->nullRes;
  if (aPair[cl] < 0) return 1;
  int iT2 = aFirst[aPair[cl]];
  const ex_term *e2 = &ep->aT[iT2];
  ex_crange r2;
  if (pr->neg || !ex_term_codes(e2, c, &apDict[iT2], &r2, pRc) || r2.neg) return 0;
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
      ex_code_range(c, ab0, anb, s, n, r.eAll, r.lo, r.hi - r.lo, 0, rn, aM);
      return 0;
    }
    if (rc) return rc;
    if ((rc = ex_eval_term(e1, c, ab0, anb, s, n, aM, &apDict[iTerm])) != 0) return rc;
    if ((rc = ex_eval_term(e2, c, ab0, anb, s, n, aOr, &apDict[iT2])) != 0) return rc;
    for (uint32_t k = 0; k < n; k++) aM[k] &= aOr[k];
    return 0;
  }
  if (nT == 1) {
    const ex_term *et = &ep->aT[iTerm];
    return ex_eval_term(et, &aCol[et->t.slot], ab0, anb, s, n, aM, &apDict[iTerm]);
  }
  memset(aM, 0, n);
  for (int t = 0; t < nT; t++) {
    const ex_term *et = &ep->aT[iTerm + t];
    rc = ex_eval_term(et, &aCol[et->t.slot], ab0, anb, s, n, aOr, &apDict[iTerm + t]);
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

int ex_run(void *pCompiled, dev_exec_ctx *ctx, uint64_t *pRet) {
  if (ctx->aParam[1] & CSQ_EXEC_RANGE) return ex_run_range(pCompiled, ctx, pRet);
  return ex_run_one(pCompiled, ctx, NULL, pRet);
}

int ex_run_one(void *pCompiled, dev_exec_ctx *ctx, ex_carry *pCarry, uint64_t *pRet) {
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
  if (start > nRow || (bAcc && !pp->bAgg) || (rowCap && (pp->bAgg || pp->nTop)) ||
      (pCarry && (!pp->bAgg || start || (bAcc && pCarry->bLive))))
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
    reason = (uint64_t)ex_col_open(&aCol[i], pIn + off, len, nRow, bChecked);
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
    reason = (uint64_t)ex_agg_exec(ep, aCol, aSel, nSel, (uint32_t)start, nRow, pSeed, nSeed, pOut,
                                   nOutArea, pCarry, ctx, pRet);
    goto done;
  }

  if (pp->nTop && nSel > pp->nTop) {
    reason = (uint64_t)ex_top_select(pp, aCol, aSel, &nSel);
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
      if (ex_out_omitted(aOmit, j)) continue;
      ex_out_size(&aCol[pp->aOut[j]], aSel, nKeep, &aOc[j]);
      nBytes += ex_out_bytes(&aOc[j], nKeep);
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
        if (ex_out_omitted(aOmit, j)) continue;
        ex_out_size(&aCol[pp->aOut[j]], aSel, mid, &o);
        nb2 += ex_out_bytes(&o, mid);
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
    if (ex_out_omitted(aOmit, j)) {
      d[3] = 1; /* absent: the host reads it from the chunk if it needs it */
      continue;
    }
    const ex_res_shape sh = ex_res_shape_of(o->clsMask, nKeep, o->nHeap);
    ex_res_desc_put(d, &sh, o->clsMask, o->nHeap);
    ex_out_write(&aCol[pp->aOut[j]], aSel, nKeep, o, q);
    q += sh.l.nBytes;
  }
  if (pp->bRowNum) {
    memcpy(q, aSel, 4ull * nKeep); /* row numbers; SLM is little-endian like the host */
    if (nKeep & 1) memset(q + 4ull * nKeep, 0, 4);
    q += pad8(4ull * nKeep);
  }
  uint64_t nBytes = (uint64_t)(q - pOut);
  ex_res_hdr_put(pOut, nKeep, nextRow, (uint32_t)pp->nOut, nBytes);
  ex_res_done(ctx, pOut, nBytes, start, nextRow, nRow, nKeep, pRet);

done:
  if (aCol)
    for (int i = 0; i < nOpen; i++) ex_col_close(&aCol[i]);
  if (apDict)
    for (int i = 0; i < pp->nTerm; i++) free(apDict[i]);
  free(aCol);
  free(apDict);
  free(aSel);
  free(aOc);
  free(pSeed);
  free(aOrd);
  if (reason) rc = fault(pRet, ex_bpf_fault_reason(reason));
  return rc;
}

/* Registered by the program-type table on its first lookup (ptype.c). */
const dev_ptype dev_ptype_csq = {CSQ_PTYPE_CSQ, "csq", ex_verify, ex_run, ex_free};
