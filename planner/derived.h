/*
** planner/derived.h - derived tables: a SELECT whose only FROM item is a
** parenthesised SELECT, the shape of TPC-H Q7, Q8 and Q9, or one table of
** a WITH (TPC-H Q15):
**
**   SELECT supp_nation, sum(volume) FROM (
**     SELECT n1.n_name AS supp_nation, l_extendedprice AS volume
**     FROM supplier, lineitem, nation n1 WHERE ...) AS shipping
**   GROUP BY supp_nation ORDER BY supp_nation;
**
** The join planner (planner/join.h), or the one-table planner (split.h),
** plans the inner SELECT; its host part, a SELECT over the joined or
** merged rows, then stands where the inner SELECT stood, and SQLite runs
** the outer query over it. This file only reads and rewrites text: it
** finds the shape (pl_derived_find, pl_derived_with), names the inner
** SELECT's result columns as SQLite names the derived table's columns, so
** the outer query's references still resolve after the inner SELECT is
** rewritten (pl_derived_inner), and puts other text in the inner SELECT's
** place (pl_derived_splice).
**
** Memory: plain libc malloc/free, no SQLite calls, as planner/parse.h.
*/
#ifndef CSQ_PLANNER_DERIVED_H
#define CSQ_PLANNER_DERIVED_H

#include <stddef.h>

#include "planner/parse.h" /* PL_OK, PL_UNSUPPORTED, PL_NOMEM */

/* Where the derived table is in the statement text (byte offsets). */
typedef struct pl_derived {
  int iOpen;      /* the '(' before the inner SELECT */
  int iClose;     /* the ')' after it */
  int iInner;     /* the inner SELECT: zSql[iInner, iInner + nInner) */
  int nInner;     /*   (from its SELECT keyword to the last byte before ')') */
  char zWhy[200]; /* PL_UNSUPPORTED: why the statement is not of the shape */
} pl_derived;

/* Find the shape
**   SELECT ... FROM ( SELECT ... ) [[AS] alias]
**     [WHERE ...] [GROUP BY ...] [HAVING ...] [WINDOW ...] [ORDER BY ...]
**     [LIMIT ...] [;]
** in zSql (NUL-terminated): the parenthesised SELECT is the only FROM item
** of the outer SELECT and nothing but those clauses follows it (no join, no
** compound, no second statement). Returns PL_OK with *p filled, or
** PL_UNSUPPORTED with p->zWhy: not that shape, or it has a bound parameter
** (?, ?N, :x, @x, $x), whose numbering would shift when the text is
** rewritten. Never fails otherwise; reads zSql only. */
int pl_derived_find(const char *zSql, pl_derived *p);

/* Find the shape
**   WITH name [(column, ...)] AS [[NOT] MATERIALIZED] ( SELECT ... )
**     SELECT ... [;]
** in zSql: one table of a WITH that is not RECURSIVE, before a SELECT (of
** any shape: the outer query may read the WITH table anywhere, any number
** of times), no bound parameter anywhere, one statement. Returns PL_OK with
** *p filled (the inner SELECT is the WITH table's), or PL_UNSUPPORTED with
** p->zWhy. Reads zSql only. */
int pl_derived_with(const char *zSql, pl_derived *p);

/* The inner SELECT of d (found in zSql by pl_derived_find or pl_derived_with) with every
** result column that has no alias given the name SQLite gives that column
** of the derived table: a column reference (under any COLLATE) its column
** name, any other expression its text as written, "true"/"false" columnN.
** PL_OK with *pzInner (malloc'd, caller frees); PL_UNSUPPORTED with
** pzWhy[0..nWhy) saying why (the inner SELECT is outside the parser's
** subset, has a * column, an unaliased rowid, or two columns of one name,
** which SQLite would rename); PL_NOMEM. */
int pl_derived_inner(const char *zSql, const pl_derived *d, char **pzInner, char *zWhy,
                     size_t nWhy);

/* zSql with "( inner SELECT )" replaced by zWith (a table name, or a
** parenthesised SELECT): PL_OK with *pzOut (malloc'd, caller frees), or
** PL_NOMEM. */
int pl_derived_splice(const char *zSql, const pl_derived *d, const char *zWith, char **pzOut);

/* The statement zSql over derived table d (pl_derived_find), whose inner
** SELECT zInner names every column (pl_derived_inner), with its rows
** grouped before the outer query groups them: when the outer query is a
** GROUP BY over the derived table alone (no WHERE), each key one of its
** columns, computed from the inner columns by deterministic functions,
** every other column read only inside sum, total, min, max or count, the
** inner SELECT becomes
**   SELECT key expressions, agg(its argument over the inner expressions)
**   AS csq_pK ... FROM (the inner FROM and WHERE) GROUP BY (every column
**   the key expressions read)
** and each outer aggregate the same over csq_pK (count's a sum of the
** counts). Its groups are finer than the outer query's, so the outer
** query's groups and their aggregates come out the same, and a join's
** rows can be grouped in csq's host engine by plain columns where the
** outer keys are expressions (TPC-H Q9's year of o_orderdate): PL_OK with
** *pzOut (malloc'd); PL_UNSUPPORTED with zWhy; PL_NOMEM. */
int pl_derived_pregroup(const char *zSql, const pl_derived *d, const char *zInner, char **pzOut,
                        char *zWhy, size_t nWhy);

#endif /* CSQ_PLANNER_DERIVED_H */
