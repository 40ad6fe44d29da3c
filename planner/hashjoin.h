/*
** planner/hashjoin.h - the host part of a join plan (planner/join.h): the
** in-memory hash joins over the rows each table's device scan returned,
** producing the joined rows, one vector per row-set column.
**
** Left-deep, in the plan's order: each build side gets a hash table over
** its key outputs; a batch of the probe side's rows starts the intermediate
** result (one row index per joined table and joined row), and each build
** side in turn is probed with the values of the outputs its keys equal.
** Keys are equal by SQLite's "=" between columns of numeric affinity,
** without conversion (device/format/value.h: csq_value_eq, csq_value_hash):
** 4 = 4.0, TEXT equals TEXT of the same bytes, NULL never joins.
*/
#ifndef CSQ_PLANNER_HASHJOIN_H
#define CSQ_PLANNER_HASHJOIN_H

#include <stdint.h>

#include "device/format/vec.h"
#include "planner/join.h"

/* The rows a table's scan returned: its nOut outputs (pl_jtab), nRow rows. */
typedef struct pl_jdata {
  csq_vec *aCol;
  int nCol;
  uint32_t nRow;
} pl_jdata;

/* The hash tables of a plan's build sides, built once; the probe side's
** rows then stream through them a batch at a time. */
typedef struct pl_hj pl_hj;

/* Build the hash tables over the build sides' rows aData[t] (FROM order;
** the probe side's entry, j->aOrder[0], is not read). aData must outlive
** the result. Returns 0 or -ENOMEM. */
int pl_hj_new(const pl_join *j, const pl_jdata *aData, pl_hj **pp);

/* Join one batch of the probe side's rows (its outputs, as pl_jtab says)
** and append the joined rows to aOut[0..j->nCol) (initialised vectors);
** *pnRow counts the rows appended so far. Returns 0, -ENOMEM, or -E2BIG
** when the joined rows would pass 2^32 - 1 (SQLite runs the query instead). */
int pl_hj_probe(pl_hj *h, const pl_jdata *pProbe, csq_vec *aOut, uint32_t *pnRow);

void pl_hj_free(pl_hj *h);

/* A semi- or anti-join (join.h, pl_jsemi) over joined rows: a hash table
** of their keys, marked by the rows of the subquery's table as they
** stream through, then the joined rows kept where marked (EXISTS) or
** unmarked (NOT EXISTS). */
typedef struct pl_semi pl_semi;

/* Hash the nRow joined rows aRow (row-set columns) by semi-join iSemi's
** keys; aRow must outlive the result. Returns 0 or -ENOMEM. */
int pl_semi_new(const pl_join *j, int iSemi, const csq_vec *aRow, uint32_t nRow, pl_semi **pp);

/* Mark the joined rows that a batch of the subquery table's rows (its scan's
** outputs) matches. Returns 0. */
int pl_semi_mark(pl_semi *h, const pl_jdata *pBatch);

/* Keep the joined rows the semi-join keeps, in order, in the nCol columns of
** aRow that hold them (a scalar subquery's column is filled later);
** *pnRow becomes their count. Returns 0 or -ENOMEM. */
int pl_semi_keep(pl_semi *h, csq_vec *aRow, int nCol, uint32_t *pnRow);

void pl_semi_free(pl_semi *h);

/* Scalar subquery iScalar (join.h, pl_jscalar): append to pOut, for each of
** the nRow joined rows aRow, the value of the group of aGroupKey (nGroup
** groups, the keys in row-set order) whose keys equal its keys, pGroupVal's
** value of that group; pEmpty's one value when none does (a NULL key equals
** nothing). Returns 0 or -ENOMEM. */
int pl_scalar_fill(const pl_join *j, int iScalar, const csq_vec *aGroupKey,
                   const csq_vec *pGroupVal, uint32_t nGroup, const csq_vec *pEmpty,
                   const csq_vec *aRow, uint32_t nRow, csq_vec *pOut);

/* Bytes the rows of d hold (for the memory budget of a build side). */
uint64_t pl_jdata_bytes(const pl_jdata *d);

#endif /* CSQ_PLANNER_HASHJOIN_H */
