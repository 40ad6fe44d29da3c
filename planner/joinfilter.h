/*
** planner/joinfilter.h - join filters: the keys of a join's build sides sent
** into the probe side's device program, so that probe rows that cannot join
** never leave the device.
**
** The tables are read in the reverse of the join order (the build sides,
** last joined first, then the probe side, see pl_join_read_order), so when
** table t is read every table joined after it is in memory. For each such table u and each of
** its keys "t.x = u.y", t's program gets the term "x IN (the distinct
** non-NULL values of y in u's rows)" when there are at most
** PL_JOINFILTER_MAX_KEYS of them: in an inner join a row of t without such a
** partner cannot be in the result. The device's IN compares by SQLite's
** rules without applying an affinity (as the join's "=" between numeric
** columns does: 4 matches 4.0, TEXT only the same bytes), so every row that
** joins passes it; the hash join still checks every key. With more keys
** than that, the term is a Bloom filter of their hashes instead
** (device/format/bloom.h, keyhash.h: equal by SQLite's "=" means equal
** hashes), sized from the build side's actual count of keys for a false
** positive rate of PL_JOINFILTER_BLOOM_FPR: it keeps every row that joins
** and a few that do not. Integer keys within a span whose bitmap is not
** much larger (PL_JOINFILTER_KEYMAP_RATIO) send the bitmap instead
** (device/format/keymap.h), exact and a bit test per row, where the Bloom
** filter costs a hash. At most PL_JOINFILTER_MAX_BLOOMS per program (the
** program format's heap holds two of the largest). The filters of the
** tables that hold the smallest share of their table's rows go first (a
** table read whole filters nothing a foreign key joins). Inner-join keys
** are equalities that hold in every joined row, and SQLite's "=" between
** join keys is transitive, so a column of t equal to one of u through a
** chain of them (t.x = w.y AND w.y = u.z) takes u's values as a filter
** too; a LEFT JOIN's keys are no such chain.
*/
#ifndef CSQ_PLANNER_JOINFILTER_H
#define CSQ_PLANNER_JOINFILTER_H

#include <stddef.h>
#include <stdint.h>

#include "planner/hashjoin.h"
#include "planner/join.h"

/* Distinct keys of one join filter (IN list) at most; all filters of a
** program together hold at most twice as many. */
#define PL_JOINFILTER_MAX_KEYS   4096
#define PL_JOINFILTER_BLOOM_FPR  0.01
#define PL_JOINFILTER_BLOOM_MAX  (16u << 20) /* bytes of one filter */
#define PL_JOINFILTER_MAX_BLOOMS 2
/* A bitmap of integer keys replaces their Bloom filter when it takes at
** most this many times the filter's bytes. */
#define PL_JOINFILTER_KEYMAP_RATIO 8

/* The order j's tables are read in (j->aRead): the build sides last joined
** first, so the small tables filter the bigger ones they join, then the
** probe side; except that a build side that no filter of its own or of a
** table read before it reduces (it would be read whole, and a table read
** whole filters nothing a foreign key joins) is read right after the
** first later build side with filters of its own that its keys connect
** it to, whose keys then filter it (TPC-H Q10's customers after their
** orders). A LEFT JOINed table keeps its place. */
void pl_join_read_order(pl_join *j);

/* A join filter of table t: t's chunk iChunk IN the values of output iOut
** of table u, read before t. bVia: the key is not u's with t but follows
** from equal keys (t.x = w.y AND w.y = u.z, every one of an inner join). */
typedef struct pl_jf_src {
  int u, iChunk, iOut, bVia;
} pl_jf_src;

/* The join filters table t may take: for each table u read before it (one
** joined after it, not LEFT JOINed), u's keys with t, then the columns of
** u that equal a column of t through a chain of inner-join keys. Into
** aSrc[0..nMax); returns how many. The same list for execution and for
** csq_explain. */
int pl_join_filter_sources(const pl_join *j, int t, pl_jf_src *aSrc, int nMax);

/* Finish table t's program (j->apB[t], consumed) with the join filters the
** rows aData (FROM order) of the tables joined after t give. On success *pp
** is a malloc'd program of *pn bytes and *pnFilter the filters added.
** Returns 0 or a negative errno (then the caller uses aTab[t].pProg). */
int pl_join_filter_program(pl_join *j, int t, const pl_jdata *aData, uint8_t **pp, size_t *pn,
                           int *pnFilter);

/* Finish the program of a subquery's table t (j->apB[t], consumed: a
** semi-join's or a scalar subquery's) with join filters of the keys of
** the joined rows aRow (row-set columns aKeyCol[k], which its outputs
** aKeyOut[k] equal): a row of t whose keys no joined row has matches
** nothing, so leaving it on the device changes neither EXISTS, NOT EXISTS
** nor any joined row's aggregate. As pl_join_filter_program. */
int pl_join_filter_sub(pl_join *j, int t, int nKey, const int *aKeyOut, const int *aKeyCol,
                       const csq_vec *aRow, uint8_t **pp, size_t *pn, int *pnFilter);

#endif /* CSQ_PLANNER_JOINFILTER_H */
