/*
** planner/joinfilter.c - join filters of a join plan's probe side; see
** joinfilter.h.
*/
#include "planner/joinfilter.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device/format/program.h"
#include "device/format/value.h"

/* The distinct non-NULL values of v (indices of their first rows) into
** aPick[0..*pn); 0, -E2BIG past nMax of them, or -ENOMEM. */
static int distinct(const csq_vec *v, uint32_t *aPick, uint32_t nMax, uint32_t *pn) {
  uint32_t nBucket = 16;
  while (nBucket < nMax * 2u) nBucket *= 2;
  uint32_t *aHead = malloc(sizeof(uint32_t) * nBucket);
  if (!aHead) return -ENOMEM;
  memset(aHead, 0xff, sizeof(uint32_t) * nBucket);
  uint32_t *aNext = malloc(sizeof(uint32_t) * (nMax ? nMax : 1));
  if (!aNext) {
    free(aHead);
    return -ENOMEM;
  }
  uint32_t n = 0;
  int e = 0;
  for (uint32_t r = 0; r < v->n; r++) {
    if (v->aCls[r] == CSQ_NULL) continue;
    csq_value x = csq_value_of_vec(v, r);
    uint32_t b = (uint32_t)(csq_value_hash(&x) & (nBucket - 1)), i;
    for (i = aHead[b]; i != UINT32_MAX; i = aNext[i]) {
      csq_value y = csq_value_of_vec(v, aPick[i]);
      if (csq_value_eq(&x, &y)) break;
    }
    if (i != UINT32_MAX) continue;
    if (n == nMax) {
      e = -E2BIG;
      break;
    }
    aPick[n] = r;
    aNext[n] = aHead[b];
    aHead[b] = n++;
  }
  free(aHead);
  free(aNext);
  *pn = n;
  return e;
}

/* Add "probe chunk iChunk IN (values aPick of v)" to b. */
static int add_in(csq_pb *b, int iChunk, const csq_vec *v, const uint32_t *aPick, uint32_t n) {
  int slot = csq_pb_input(b, (uint32_t)iChunk), k0 = -1;
  if (slot < 0) return slot;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t r = aPick[i];
    int k;
    switch (v->aCls[r]) {
    case CSQ_INT:
      k = csq_pb_const_int(b, v->aVal[r].i);
      break;
    case CSQ_REAL:
      k = csq_pb_const_real(b, v->aVal[r].r);
      break;
    default:
      k = csq_pb_const_bytes(b, v->aCls[r], csq_vec_bytes(v, r), v->aLen[r]);
      break;
    }
    if (k < 0) return k;
    if (k0 < 0) k0 = k;
  }
  int rc = csq_pb_clause(b);
  if (rc < 0) return rc;
  return csq_pb_term(b, CSQ_OP_IN, 0, slot, k0, (int)n, 0);
}

int pl_join_filter_program(pl_join *j, int t, const pl_jdata *aData, uint8_t **pp, size_t *pn,
                           int *pnFilter) {
  csq_pb *b = j->apB[t];
  j->apB[t] = NULL;
  *pp = NULL;
  *pn = 0;
  *pnFilter = 0;
  if (!b) return -EINVAL;
  int iStep = 0, e = 0;
  while (iStep < j->nTab && j->aOrder[iStep] != t) iStep++;
  uint32_t nTotal = 0, nHeap = 0;
  uint32_t *aPick = malloc(sizeof(uint32_t) * PL_JOINFILTER_MAX_KEYS);
  if (!aPick) e = -ENOMEM;
  for (int s = iStep + 1; e == 0 && s < j->nTab; s++) {
    int u = j->aOrder[s];
    const pl_jtab *ju = &j->aTab[u];
    for (int k = 0; e == 0 && k < ju->nKey; k++) {
      if (ju->aKeyTab[k] != t) continue;
      const csq_vec *v = &aData[u].aCol[ju->aKeyOut[k]];
      uint32_t n = 0;
      int rc = distinct(v, aPick, PL_JOINFILTER_MAX_KEYS, &n);
      if (rc == -E2BIG) continue; /* too many keys to be worth a list */
      if (rc) {
        e = rc;
        break;
      }
      uint32_t nBytes = 0;
      for (uint32_t i = 0; i < n; i++) nBytes += v->aLen[aPick[i]];
      if (n == 0 || nTotal + n > 2 * PL_JOINFILTER_MAX_KEYS || nHeap + nBytes > 64 * 1024) continue;
      e = add_in(b, j->aTab[t].aChunk[ju->aKeyProbe[k]], v, aPick, n);
      nTotal += n;
      nHeap += nBytes;
      (*pnFilter)++;
    }
  }
  free(aPick);
  if (e == 0) e = csq_pb_finish(b, pp, pn);
  csq_pb_free(b);
  return e < 0 ? e : 0;
}
