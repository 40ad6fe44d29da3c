/*
** planner/joinagg.h - the host part of a join plan (planner/join.h) as a
** grouped program over its joined rows.
**
** A join's host part is SQL over csq_jrows: SQLite aggregates the joined
** rows one at a time. When that SQL is a query split.c can split (GROUP BY
** keys and aggregates it compiles, WHERE terms it runs exactly), the joined
** rows become a table of their own, "csq_j", whose chunk PL_JAGG_CHUNK(...)
** holds row-set column k under each of its csq_jrows names (so the names
** keep their affinities and collations), and split.c plans the host part
** over it: a grouped program, which csq's host engine runs over the joined
** rows (device/host/vecrun.h), and SQL over the merged groups.
*/
#ifndef CSQ_PLANNER_JOINAGG_H
#define CSQ_PLANNER_JOINAGG_H

#include "planner/join.h"
#include "planner/split.h"

/* The row-set column that chunk iChunk (>= 1) of csq_j holds, for a row set
** of nCol columns. */
#define PL_JAGG_COL(nCol, iChunk) (((iChunk)-1) % (nCol))
/* Chunks of csq_j: the rowid's (never read) and 15 names per column. */
#define PL_JAGG_NCHUNK(nCol) (1 + 15 * (nCol))

/* Plan j's host part over its joined rows: SQLITE_OK with *ppPlan, whose
** bPush is 1 for a grouped program (bRows 0) and its zHost over the
** merged groups (csq_rows(?iRows); for a derived table's join, the inner
** SELECT's part over them typed, csq_jrows(?iRows), for the caller to
** splice into the outer statement), else 0 with zWhy; SQLITE_NOMEM.
** aParam[0..nParam) are zHost's parameters (the row set's NULL). */
int pl_join_agg_plan(sqlite3 *db, const pl_join *j, sqlite3_value **aParam, int nParam,
                     pl_plan **ppPlan);

#endif /* CSQ_PLANNER_JOINAGG_H */
