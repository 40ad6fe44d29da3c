/*
** planner/star.h - a star join grouped on the probe side's device: the
** build sides (dimensions) reduced to maps from their keys to codes of
** their group columns, which travel in the probe table's program.
**
** A join plan (planner/join.h) whose host part groups in csq's host
** engine (planner/joinagg.h) reads every probe row that survives the join
** filters to the host, joins it there and groups it. When every build side
** joins the probe table on one key whose values in its rows are unique
** integers within a span, and the build sides' columns appear in the host
** part only as plain GROUP BY keys, each joined row's group is known from
** the probe row alone: a build side's group column is a function of the
** probe row's key. So the probe table's device groups its rows itself:
**   - each GROUP BY key over a build side's column x becomes CSQ_EX_MAP of
**     the probe's key column through a code map (device/format/codemap.h):
**     key -> the code of x's value in that key's row, codes numbering x's
**     distinct values (SQLite's GROUP BY equality, BINARY);
**   - a build side none of whose columns is a key filters the probe's rows
**     exactly, by a bitmap of its keys (CSQ_OP_KEYMAP);
**   - the aggregates, over the probe's columns only, are the host part's.
** A probe row whose key no build row has gets a NULL code: its groups are
** dropped when the merged groups are decoded, each code replaced by the
** value it numbers. Unique keys make each probe row join at most one row
** of each build side, so the groups and their aggregates are the join's.
** Anything else (LEFT JOIN, semi-joins, subqueries, a build column in an
** aggregate or an expression, a key of another class, duplicate keys, a
** collation) leaves the join to the hash join, as before.
*/
#ifndef CSQ_PLANNER_STAR_H
#define CSQ_PLANNER_STAR_H

#include "device/format/program.h"
#include "device/format/vec.h"
#include "planner/hashjoin.h"
#include "planner/join.h"
#include "planner/split.h"

/* Largest span of a build side's keys a code map covers. */
#define PL_STAR_MAX_SPAN (1u << 20)

typedef struct pl_star {
  uint8_t *pProg; /* the probe table's grouped program (malloc'd) */
  size_t nProg;
  int nKey;                       /* GROUP BY keys of the program, as the host part's */
  int aMapped[CSQ_AGG_MAX_KEYS];  /* key k is a build side's column: its codes ... */
  csq_vec aVal[CSQ_AGG_MAX_KEYS]; /* ... number the values aVal[k][code - 1] */
} pl_star;

/* 1 if j's shape allows a star plan at all (no LEFT JOIN, semi-join,
** subquery or derived table; every build side keyed on the probe side by
** one column): csq_explain says so. */
int pl_star_shape(const pl_join *j);

/* 1 if j with host part plan (pl_join_agg_plan) is a star but for what
** its rows decide (keys unique integers within a span): csq_explain says
** so. */
int pl_star_possible(const pl_join *j, const pl_plan *plan);

/* Build j's star plan from the build sides' rows aData (FROM order; the
** probe side's empty) and plan, the host part planned over the joined
** rows (pl_join_agg_plan). 0 with *s filled (free with pl_star_clear), 1
** when the join is not a star (s empty), or a negative errno. */
int pl_star_build(const pl_join *j, const pl_jdata *aData, const pl_plan *plan, pl_star *s);

/* Decode the merged groups aCol[0..nCol) of nRow rows (keys first) in
** place: groups with a NULL code dropped, codes replaced by their values.
** 0 or -ENOMEM. */
int pl_star_decode(const pl_star *s, csq_vec *aCol, int nCol, uint32_t *pnRow);

void pl_star_clear(pl_star *s);

#endif /* CSQ_PLANNER_STAR_H */
