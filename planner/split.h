/*
** planner/split.h - split a SELECT between the device and the host.
**
** For an aggregate query over one csq table, the device part is a program
** (device/format/program.h) that filters the rows, groups them and computes
** partial aggregates; the host merges the partials (device/host/agg.h) into one
** row per group, laid out as csq_rows columns c0..: the GROUP BY keys, then
** one column per distinct aggregate call. The host part is SQL over those
** rows, built by pasting the query's own text with each aggregate call and
** each group key replaced by its column: SQLite then evaluates HAVING, the
** final expressions, ORDER BY and LIMIT exactly as it would have.
**
** Whatever the planner cannot split exactly, it does not: pl_plan.bPush is 0
** and zWhy says why, and the caller runs the query as ordinary SQL (where
** the csq table still pushes its filters).
*/
#ifndef CSQ_PLANNER_SPLIT_H
#define CSQ_PLANNER_SPLIT_H

#include <sqlite3ext.h>
#include <stddef.h>
#include <stdint.h>

/* What the planner needs to know of a csq table. */
typedef struct pl_tabinfo {
  int nCol;
  const char *const *azCol; /* column names */
  const char *aAff;         /* affinity letter per column ('A'..'E', as vtab.h) */
  const char *aColl;        /* per column: 1 if it declares a collation other than
                               BINARY (NULL: every column is BINARY) */
  int iIpk;                 /* INTEGER PRIMARY KEY column, or -1 */
  /* For the cost model (the lookup leaves them as pl_plan_query set them,
  ** meaning "unknown", if it cannot tell): */
  int ePush;     /* the table's pushdown= option: PL_PUSH_* */
  int64_t nRows; /* rows in the table, -1 unknown */
  int nEngines;  /* compute engines of its device(s); 0 = none (csq's host
                    engine runs the program over plain reads); -1 unknown */
  /* The eBPF programs csq_bpf can call (NULL: none): 0 with the program
  ** named zName (its instructions, declared types and argument count, owned
  ** by the caller), non-zero if there is none. */
  int (*xBpf)(void *pBpfArg, const char *zName, const uint8_t **paIns, uint32_t *pnIns,
              const uint8_t **paDecl, int *pnArg);
  void *pBpfArg;
  /* The rows of a sample of the table's row groups that filter program
  ** pProg returns: 0 with *pnIn rows read and *pnOut returned, non-zero if
  ** it cannot tell (NULL: no sampling). For estimates only. */
  int (*xSample)(void *pSampleArg, const uint8_t *pProg, size_t nProg, uint64_t *pnIn,
                 uint64_t *pnOut);
  void *pSampleArg;
} pl_tabinfo;

#define PL_PUSH_AUTO   0 /* the same numbers as the vtab's VT_PUSH_* */
#define PL_PUSH_ALWAYS 1
#define PL_PUSH_NEVER  2
/* pushdown='auto': a table smaller than this is aggregated on the host, where
** SQLite scans it in less time than one device round trip takes */
#define PL_PUSH_MIN_ROWS 8192

/* Find csq table zTable; 0 and *pInfo filled, or non-zero if it is not one. */
typedef int (*pl_lookup_fn)(void *pArg, const char *zDb, const char *zTable, pl_tabinfo *pInfo);

typedef struct pl_plan {
  int bPush;      /* 1: run pProg on the device, then zHost */
  char zWhy[320]; /* bPush 0: why not; else a short description */
  char *zTable;   /* the csq table (sqlite3_malloc'd) */
  uint8_t *pProg; /* the device program (sqlite3_malloc'd) */
  size_t nProg;
  int bEmpty;        /* the filter can never be true (a comparison with NULL) */
  int nKey, nAgg;    /* merged row layout: nKey keys, then nAgg aggregates */
  int bRows;         /* pProg filters and returns rows (no aggregation): the rowid,
                     ** then nAgg columns; the caller collects them as they come */
  uint8_t *pRegroup; /* count(DISTINCT x): the merged rows are the keys and x,
                     ** each pair once; this program (chunk k + 1: column k)
                     ** groups them by the keys, counting x, into the rows
                     ** zHost reads (NULL: none; sqlite3_malloc'd) */
  size_t nRegroup;
  char *zHost;   /* SELECT ... FROM csq_rows(?iRows) ... (sqlite3_malloc'd) */
  int iRows;     /* parameter number of the row set in zHost */
  char *zDevice; /* what the device runs, for csq_explain (sqlite3_malloc'd) */
  char *zBpf;    /* bPush 1: the eBPF calls in the program, each as written and
                 ** "as a filter term" or "as a value", "; " between (NULL:
                 ** none; sqlite3_malloc'd) */
} pl_plan;

/* Plan zSql with parameter values aParam[0..nParam) (NULL = not given).
** Always returns a plan (bPush 0 when the query is not split) unless out of
** memory (SQLITE_NOMEM). db evaluates constant sub-expressions.
**
** The cost model: the query runs on the host (bPush 0, zWhy says why) when
** it has no aggregate (the table's own filter pushdown moves only the
** qualifying rows, and a partial row per group would be as wide), when the
** table says pushdown='never', or, with pushdown='auto', when the table has
** fewer than PL_PUSH_MIN_ROWS rows. A device without compute engines still
** gets the plan: csq's host engine then runs the program over plain reads,
** which still beats SQLite's row-at-a-time aggregation, and zWhy says so. */
int pl_plan_query(sqlite3 *db, const char *zSql, sqlite3_value **aParam, int nParam,
                  pl_lookup_fn xLookup, void *pArg, pl_plan **ppPlan);

/* pl_plan_query with options. PL_PLAN_TYPED: zHost reads the merged rows
** through csq_jrows (vtab/joinrows.c), each group key under the affinity
** of its column and each aggregate under none, so that an expression over
** them has the affinity and collation it has in zSql: the host part can
** then stand for zSql as a derived table or WITH table, whose columns take
** their expressions' affinities. */
#define PL_PLAN_TYPED 1
int pl_plan_query_opt(sqlite3 *db, const char *zSql, sqlite3_value **aParam, int nParam,
                      pl_lookup_fn xLookup, void *pArg, int flags, pl_plan **ppPlan);
void pl_plan_free(pl_plan *p);

/* For the join planner (planner/join.c): add WHERE conjunct e of statement
** a, which reads only the csq table ti (referenced in a as zQual), to the
** device program b as a filter, if it runs there exactly by the rules
** above. Returns 1 (added; *pbEmpty = 1 if it can never be true), 0 (not
** added, b unchanged: SQLite must evaluate it) or -1 (b was changed but the
** term could not be completed: b is unusable). */
struct csq_pb;
struct pl_ast;
struct pl_expr;
int pl_split_filter(sqlite3 *db, const struct pl_ast *a, const pl_tabinfo *ti, const char *zQual,
                    sqlite3_value **aParam, int nParam, struct csq_pb *b, const struct pl_expr *e,
                    int *pbEmpty);

#endif /* CSQ_PLANNER_SPLIT_H */
