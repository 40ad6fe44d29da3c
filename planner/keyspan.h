/*
** planner/keyspan.h - a build side's key column as integers: their span,
** and whether no value repeats. A star's code maps (planner/star.h) and a
** GROUP BY by one table's key alone (planner/join.h, zHostKey) rely on it.
*/
#ifndef CSQ_PLANNER_KEYSPAN_H
#define CSQ_PLANNER_KEYSPAN_H

#include <stdint.h>

#include "device/format/vec.h"

/* The span [*pLo, *pLo + *pnSpan) of the values of k: 0 if they are all
** INTEGERs (no NULL, no other class), no two equal, within nMaxSpan (at
** most 2^32); 1 if not (or k is empty); -ENOMEM. */
int pl_keys_unique(const csq_vec *k, uint64_t nMaxSpan, int64_t *pLo, uint32_t *pnSpan);

#endif
