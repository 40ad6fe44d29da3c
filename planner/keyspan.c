/*
** planner/keyspan.c - whether a key column's integers are unique, by a
** bitmap over their span (planner/keyspan.h).
*/
#include <errno.h>
#include <stdlib.h>

#include "planner/keyspan.h"

int pl_keys_unique(const csq_vec *k, uint64_t nMaxSpan, int64_t *pLo, uint32_t *pnSpan) {
  if (k->n == 0 || k->clsMask != (1u << CSQ_INT)) return 1;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (uint32_t r = 0; r < k->n; r++) {
    lo = k->aVal[r].i < lo ? k->aVal[r].i : lo;
    hi = k->aVal[r].i > hi ? k->aVal[r].i : hi;
  }
  if (nMaxSpan > UINT32_MAX) nMaxSpan = UINT32_MAX;
  if ((uint64_t)hi - (uint64_t)lo >= nMaxSpan) return 1;
  uint32_t nSpan = (uint32_t)((uint64_t)hi - (uint64_t)lo + 1);
  uint8_t *aSeen = calloc(nSpan / 8 + 1, 1);
  if (!aSeen) return -ENOMEM;
  int rc = 0;
  for (uint32_t r = 0; r < k->n && !rc; r++) {
    uint64_t u = (uint64_t)k->aVal[r].i - (uint64_t)lo;
    if ((aSeen[u >> 3] >> (u & 7)) & 1) rc = 1;
    aSeen[u >> 3] |= (uint8_t)(1u << (u & 7));
  }
  free(aSeen);
  *pLo = lo;
  *pnSpan = nSpan;
  return rc;
}
