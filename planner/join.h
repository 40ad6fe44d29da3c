/*
** planner/join.h - the join planner: inner equi-joins of csq tables as host
** hash joins over device-filtered, projected scans, SQLite finishing the
** rest.
**
** For a SELECT whose FROM items are all csq tables joined by commas,
** [INNER] JOIN or CROSS JOIN, the conjunction of WHERE and every ON splits
** into:
**   - filters: terms over one table that its device program takes exactly
**     (pl_split_filter: column op constant, IN, BETWEEN, IS NULL, ...);
**   - join keys: "a.x = b.y" between two tables, both columns of BINARY
**     collation and both of INTEGER, REAL or NUMERIC affinity, or both
**     TEXT, or both none: SQLite then compares the values without
**     conversion (1 = 1.0; TEXT = TEXT by bytes, never a number or a BLOB;
**     NULL never joins), which is what the hash join does
**     (device/format/value.h, csq_value_eq and csq_value_hash);
**   - the residual: everything else, which SQLite evaluates after the join.
** The join keys must connect every table (no cross products). Each table's
** scan returns only the columns the query reads.
**
** The plan is left-deep: the table with the most estimated rows after its
** filters is the probe side; the others are build sides, joined in turn,
** biggest first among those connected to what is joined already, so that
** they are read (in the reverse order, planner/joinfilter.h) smallest
** first, each small table's keys filtering the scans of the bigger ones it
** joins. If the query has an aggregate the one-table planner splits, the
** joined rows are grouped in csq's host engine (planner/joinagg.h). The
** joined rows form a row set (csq_jrows, vtab/joinrows.c), one column per
** table column the query reads, declared with that column's affinity and
** collation; the host part is the query's own text with the FROM list
** replaced by the row set, each column reference by its row-set column,
** and WHERE by the residual: GROUP BY, aggregates, HAVING, the select list,
** ORDER BY and LIMIT keep SQLite's semantics exactly.
**
** A WHERE conjunct "[NOT] EXISTS (SELECT ... FROM s WHERE ...)" whose
** subquery reads one csq table s, correlated with the outer tables only by
** "s.x = o.y" (and "s.x <> o.y") between columns of numeric affinity and
** BINARY collation, its other terms filters s's device program takes, is a
** semi-join (EXISTS) or an anti-join (NOT EXISTS): once the inner joins
** have given their rows, s is scanned with a join filter of their keys
** (planner/joinfilter.h), each row of s marks the joined rows it matches
** (pl_semi in hashjoin.h), and the joined rows are kept where marked
** (EXISTS) or unmarked (NOT EXISTS). That is the truth of the subquery for
** each outer row: it has a row exactly when some row of s passes its
** filters and matches the keys, and "=" / "<>" with a NULL is never true,
** so a NULL key marks nothing. The outer query may then be one table.
**
** An uncorrelated scalar subquery of the host part whose answer is one
** aggregate row ("(SELECT sum(x) * 0.1 FROM a, b WHERE ...)", no GROUP
** BY, LIMIT or parameters) becomes a parameter of the host part: the
** caller runs it first, through the planner, and binds its value, where
** SQLite would run it as written over the base tables. Exact when its
** result expression has no affinity and no collation (an aggregate or
** arithmetic, no column, CAST or COLLATE): a bound value compares as the
** subquery's value does.
**
** What the planner does not take it says (pl_join.zWhy), and the query
** runs as ordinary SQL.
*/
#ifndef CSQ_PLANNER_JOIN_H
#define CSQ_PLANNER_JOIN_H

#include <sqlite3ext.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/split.h"

#define PL_JOIN_MAX_TAB    8  /* tables in one join */
#define PL_JOIN_MAX_OUT    64 /* columns a table's scan returns; also row-set columns */
#define PL_JOIN_MAX_KEY    8  /* key columns of one build side */
#define PL_JOIN_MAX_SEMI   4  /* [NOT] EXISTS subqueries taken as semi- and anti-joins */
#define PL_JOIN_MAX_SCALAR 4  /* scalar subqueries taken as aggregates grouped by their keys */
#define PL_JOIN_MAX_VALUE  8  /* uncorrelated scalar subqueries run first, their values bound */

/* One table of the join, in FROM order. */
typedef struct pl_jtab {
  char *zDb;      /* as written in FROM, or NULL (sqlite3_malloc'd) */
  char *zTable;   /* (sqlite3_malloc'd) */
  char *zName;    /* the name the query uses for it: alias or table (sqlite3_malloc'd) */
  uint8_t *pProg; /* its scan: the pushed filters, then the outputs (sqlite3_malloc'd) */
  size_t nProg;
  int bEmpty;                     /* a filter is never true: the join is empty */
  int nOut;                       /* outputs of the scan ... */
  int aChunk[PL_JOIN_MAX_OUT];    /* ... output k reads chunk aChunk[k] (0 rowid, 1 + c) */
  int aRowCol[PL_JOIN_MAX_OUT];   /* ... and is row-set column aRowCol[k], or -1 */
  int nFilter;                    /* filter terms pushed */
  int64_t nRows;                  /* rows of the table, -1 unknown */
  int64_t nEst;                   /* estimated rows after the filters */
  int bLeft;                      /* LEFT JOINed: rows without a match keep going, with NULLs */
  int nKey;                       /* a build side: its key outputs ... */
  int aKeyOut[PL_JOIN_MAX_KEY];   /* ... output aKeyOut[j] equals ... */
  int aKeyTab[PL_JOIN_MAX_KEY];   /* ... output aKeyProbe[j] of table aKeyTab[j], joined */
  int aKeyProbe[PL_JOIN_MAX_KEY]; /*     earlier in aOrder */
} pl_jtab;

/* A semi-join (EXISTS) or anti-join (NOT EXISTS) over the joined rows; its
** table is pl_join.aTab[iTab] (pl_jtab: its scan, outputs, estimate). */
typedef struct pl_jsemi {
  int iTab;
  int bAnti;                    /* NOT EXISTS: keep the rows nothing matches */
  int nKey;                     /* the subquery's table's output aKeyOut[k] ... */
  int aKeyOut[PL_JOIN_MAX_KEY]; /* ... equals ... */
  int aKeyCol[PL_JOIN_MAX_KEY]; /* ... row-set column aKeyCol[k] */
  int nNe;                      /* and its output aNeOut[k] differs (<>) from ... */
  int aNeOut[PL_JOIN_MAX_KEY];  /* ... row-set column aNeCol[k] */
  int aNeCol[PL_JOIN_MAX_KEY];
} pl_jsemi;

/* A correlated scalar subquery "(SELECT agg(...) FROM s WHERE s.x = o.y
** AND filters)": s (pl_join.aTab[iTab]) is scanned with a join filter of
** the joined rows' keys, SQLite runs zGroup over those rows (csq_jrows(?1),
** the scan's outputs), giving the keys and the subquery's value per group,
** and each joined row gets its group's value in row-set column iCol, or
** zEmpty's (the aggregate over no rows: count 0, sum NULL) when no row of s
** has its keys; the host part reads that column where the subquery was. */
typedef struct pl_jscalar {
  int iTab;                     /* or -1: a subquery over a join (see below) */
  int nKey;                     /* the scan's output aKeyOut[k] (column k of zGroup) ... */
  int aKeyOut[PL_JOIN_MAX_KEY]; /* ... equals row-set column aKeyCol[k] */
  int aKeyCol[PL_JOIN_MAX_KEY];
  int iCol;     /* the row-set column of its value (affinity none, BINARY) */
  char *zGroup; /* "SELECT keys..., value FROM csq_jrows(?1) ... GROUP BY ..." (sqlite3_malloc'd) */
  char *zEmpty; /* "SELECT value FROM csq_jrows(?1) ... WHERE 0" (sqlite3_malloc'd) */
  /* iTab -1 with one key: the key's text in zGroup (sqlite3_malloc'd), and
  ** where zGroup's " GROUP BY" begins, so that a caller may add
  ** "AND key IN (...)" of the keys the joined rows hold */
  char *zKey;
  int iGroupBy;
  int bWhere; /* zGroup has a WHERE */
} pl_jscalar;
/* A correlated scalar subquery over a join ("(SELECT min(ps_supplycost)
** FROM partsupp, supplier, ... WHERE ps_partkey = p_partkey AND ...)",
** TPC-H Q2), correlated only by equalities of its columns with the outer
** tables' (numeric, BINARY), has iTab -1, and aKeyOut unused: zGroup is the
** subquery decorrelated, its keys grouped ("SELECT ps_partkey, min(...) FROM
** partsupp, ... WHERE <its other terms> GROUP BY 1"), an uncorrelated query
** the caller runs through the planner; zEmpty is "SELECT value FROM ...
** WHERE 0". GROUP BY puts 1 and 1.0 in one group, as "=" finds them equal. */

typedef struct pl_join {
  int bPlan;      /* 1: run as planned; 0: the query stays ordinary SQL */
  char zWhy[320]; /* bPlan 0: why; else a short description */
  int nTab;       /* tables of the inner joins */
  pl_jtab aTab[PL_JOIN_MAX_TAB];
  int nExtra; /* tables of subqueries: aTab[nTab .. nTab + nExtra), in lookup order */
  int nSemi;  /* semi- and anti-joins, applied in turn to the joined rows */
  pl_jsemi aSemi[PL_JOIN_MAX_SEMI];
  int nScalar; /* scalar subqueries, whose row-set columns are filled after the semi-joins */
  pl_jscalar aScalar[PL_JOIN_MAX_SCALAR];
  int aOrder[PL_JOIN_MAX_TAB];    /* aOrder[0] probes; aOrder[1..] build and join in turn */
  int aRead[PL_JOIN_MAX_TAB];     /* the build sides in the order they are read, then the
                                     probe side (planner/joinfilter.h) */
  int nCol;                       /* row-set columns */
  char aColAff[PL_JOIN_MAX_OUT];  /* affinity of each ('A'..'E') */
  char aColColl[PL_JOIN_MAX_OUT]; /* collation of each: 'x' BINARY, 'n' NOCASE, 'r' RTRIM */
  int nResidual;                  /* terms SQLite evaluates after the join */
  char *zHost;                    /* SELECT ... FROM csq_jrows(?iRows) ... (sqlite3_malloc'd) */
  int iRows;                      /* parameter number of the row set in zHost */
  /* zHost[iHostFrom, iHostFrom + nHostFrom) is its " FROM csq_jrows(?iRows)
  ** AS csq_j" (nHostFrom 0: zHost was rewritten since; see pl_join_agg_plan) */
  int iHostFrom, nHostFrom;
  /* zHost grouped by fewer keys: of the GROUP BY keys that are plain
  ** columns of build side iKeyTab, row-set column iKeyCol alone stays.
  ** When that column's values in the table's rows are unique integers
  ** (planner/keyspan.h), every joined row of a group took the same row of
  ** that table, so its other columns are one value per group, as SQLite's
  ** bare columns then give them. NULL: no such keys (sqlite3_malloc'd). */
  char *zHostKey, *zKeyName; /* and the key as "table.column" (sqlite3_malloc'd) */
  int iKeyTab, iKeyCol;
  /* A derived table's join (vtab/query.c's plan_derived): zHost is the
  ** outer statement with the inner SELECT's host part spliced in; zInner
  ** is that host part, whose " FROM csq_jrows" iHostFrom and nHostFrom
  ** then locate, zOuterSql the statement as written and nOuterCol its
  ** columns (-1: any), for splicing a grouped host part in its place. All
  ** NULL otherwise (sqlite3_malloc'd). */
  char *zInner, *zOuterSql;
  int nOuterCol;
  /* the derived table's rows are grouped before the outer query groups
  ** them (pl_derived_pregroup): csq's host engine groups them however
  ** few rows each group holds, as SQLite would group them all again */
  int bPreGroup;
  /* Uncorrelated scalar subqueries of one aggregate row, run before the
  ** host part (through the planner, by the caller) and bound as parameter
  ** iRows + 1 + i of zHost where they stood (sqlite3_malloc'd texts). */
  int nValue;
  char *azValue[PL_JOIN_MAX_VALUE];
  /* Those whose FROM and WHERE are the query's own (TPC-H Q11's HAVING):
  ** their result expression over the joined rows, "SELECT (expr) FROM
  ** csq_jrows(?iRows) AS csq_j [WHERE the host part's terms]", which
  ** SQLite runs instead once the rows are joined; NULL: azValue runs
  ** (sqlite3_malloc'd). */
  char *azValueRows[PL_JOIN_MAX_VALUE];
  int bStar; /* the select list has * or t.* (every column) */
  /* Each table's program as aTab[t].pProg, still open, for the join
  ** filters of the tables read before it (planner/joinfilter.h); owned.
  ** The subqueries' tables too. */
  struct csq_pb *apB[PL_JOIN_MAX_TAB];
} pl_join;

/* Column k of a row set in SQL: its name in csq_jrows (vtab/joinrows.c), e.g.
** "dx_3" for an INTEGER column of BINARY collation. */
#define PL_JROWS_NAME_FMT "%c%c_%d"

/* What the join planner needs of a table beyond pl_tabinfo: the collation
** of column i ("BINARY", "NOCASE", "RTRIM", or another name), or NULL. */
typedef const char *(*pl_coll_fn)(void *pArg, const char *zDb, const char *zTable, int iCol);

/* How the planner runs an uncorrelated subquery without parameters (the
** text zSql[0..nSql)) whose rows it needs while planning ("x IN (SELECT
** ...)"): as the caller runs a query of its own, through the planner.
** xRow(pCtx, v) is called with the first column of each row until it
** returns non-zero. Returns SQLite's result code. NULL: SQLite runs it
** (sqlite3_prepare). */
typedef int (*pl_rows_fn)(void *pArg, const char *zSql, int nSql,
                          int (*xRow)(void *pCtx, sqlite3_value *v), void *pCtx);

/* Plan zSql (parameters aParam[0..nParam), NULL = not given) as a join.
** The tables it reads are looked up in FROM order, then each semi-join's.
** Returns SQLITE_OK with *ppJoin (bPlan 0 with zWhy when it is not one the
** planner takes), or SQLITE_NOMEM. Free with pl_join_free(). */
int pl_join_plan(sqlite3 *db, const char *zSql, sqlite3_value **aParam, int nParam,
                 pl_lookup_fn xLookup, pl_coll_fn xColl, pl_rows_fn xRows, void *pArg,
                 pl_join **ppJoin);
void pl_join_free(pl_join *p);

/* 1 if a conjunct of WHERE expression e (an AST of pl_parse_opt with
** PL_PARSE_SUBQUERY) is "[NOT] EXISTS (...)": a query over one table the
** planner may still take, as a semi- or anti-join. */
struct pl_expr;
int pl_join_has_exists(const struct pl_expr *e);

#endif /* CSQ_PLANNER_JOIN_H */
