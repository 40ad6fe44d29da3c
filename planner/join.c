/*
** planner/join.c - the join planner: which terms go to which table's device
** scan, which are hash-join keys, which SQLite evaluates after the join, the
** join order, and the host SQL over the joined rows; see join.h.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "planner/join.h"
#include "planner/filter.h"
#include "planner/joinfilter.h"
#include "planner/parse.h"
#include "device/format/program.h"

#ifndef SQLITE_CORE
extern const sqlite3_api_routines *sqlite3_api;
#endif

#define JP_MAX_TERM  256
#define JP_MAX_GROUP 64 /* GROUP BY keys a key of their table may determine */
#define JP_MAX_SUB   16 /* IN subqueries run first, as device filters */
/* Values of one IN subquery pushed at most: a program's constants, less
** room for its other filters; a join filter that no longer fits is left
** out (joinfilter.h), which costs rows on the link, never an answer. */
#define JP_SUB_MAX_VALUES (CSQ_PROG_MAX_CONSTS - 1024)

enum { JT_RESIDUAL = 0, JT_FILTER, JT_KEY, JT_DROPPED, JT_SEMI };
#define JP_MAX_SEMI_TERM 64 /* conjuncts of one [NOT] EXISTS subquery */
#define JP_MAX_IMPLIED   16 /* filters implied by an OR, per query */
/* Tables of at least this many rows are sampled for their estimates, and
** a sample of at least JP_SAMPLE_MIN_IN rows replaces the guesses */
#define JP_SAMPLE_MIN_ROWS 100000
#define JP_SAMPLE_MIN_IN   4096

/* A correlated subquery over one table, taken as a table of the plan. */
typedef struct jp_sub {
  pl_ast *sub; /* the subquery, parsed (its nodes are the filters') */
  const char *zQual;
  const pl_expr *aFilter[JP_MAX_SEMI_TERM]; /* its terms pushed to the scan */
  int nFilter;
  int nKey;                     /* "s.x = o.y": the scan's output aKeyOut[k] equals ... */
  int aKeyOut[PL_JOIN_MAX_KEY]; /* ... column aKeyCol[k] of outer table aKeyTab[k] */
  int aKeyTab[PL_JOIN_MAX_KEY];
  int aKeyCol[PL_JOIN_MAX_KEY];
  int nNe; /* "s.x <> o.y", the same way */
  int aNeOut[PL_JOIN_MAX_KEY];
  int aNeTab[PL_JOIN_MAX_KEY];
  int aNeCol[PL_JOIN_MAX_KEY];
} jp_sub;

typedef struct jp {
  sqlite3 *db;
  pl_ast *a;
  pl_join *j;
  sqlite3_value **aParam;
  int nParam;
  pl_tabinfo aTi[PL_JOIN_MAX_TAB];
  const char **aazCol[PL_JOIN_MAX_TAB]; /* copies of the lookups' arrays (malloc'd) */
  char *aAff[PL_JOIN_MAX_TAB];
  char *aColl[PL_JOIN_MAX_TAB]; /* per column: 'x' BINARY, 'n' NOCASE, 'r' RTRIM, '?' other */
  csq_pb *aB[PL_JOIN_MAX_TAB];
  int bFail;
  const pl_expr *aTerm[JP_MAX_TERM]; /* the conjuncts of WHERE and of every ON */
  int aKind[JP_MAX_TERM];            /* JT_* */
  int aKeyTab[JP_MAX_TERM][2];       /* JT_KEY: the two (table, column) pairs */
  int aKeyCol[JP_MAX_TERM][2];
  int aUsed[JP_MAX_TERM];        /* JT_KEY: used as a hash key */
  int aTermTab[JP_MAX_TERM];     /* JT_FILTER: the table it filters */
  int aOnOf[JP_MAX_TERM];        /* 1 + t: a term of the ON of table t, LEFT JOINed; 0 else */
  int iAddOn;                    /* the aOnOf of the terms being added */
  uint8_t aImplied[JP_MAX_TERM]; /* an implied filter: pushed, or dropped (JT_DROPPED) */
  int nTerm;
  pl_expr *apImplied[JP_MAX_IMPLIED]; /* their nodes (children borrowed from the AST) */
  int nImplied;
  const pl_expr *aSub[JP_MAX_SUB];      /* "x IN (SELECT ...)" terms run at planning ... */
  sqlite3_value **aaSubVal[JP_MAX_SUB]; /* ... their values (not NULL) ... */
  int anSubVal[JP_MAX_SUB];
  int abSubFit[JP_MAX_SUB];  /* ... 0: too many to push, or not one column ... */
  int abSubNull[JP_MAX_SUB]; /* ... 1: a NULL among them */
  int nSub;
  int nSubPushed;       /* of them pushed as filters */
  pl_lookup_fn xLookup; /* how tables are looked up */
  pl_coll_fn xColl;
  pl_rows_fn xRows; /* how uncorrelated subqueries run, or NULL */
  void *pLookupArg;
  jp_sub aCorr[PL_JOIN_MAX_TAB];                      /* table nTab + x: subquery aCorr[x] */
  const pl_expr *apScalar[PL_JOIN_MAX_SCALAR];        /* the scalar subqueries decorrelated */
  int aJsKeyTab[PL_JOIN_MAX_SCALAR][PL_JOIN_MAX_KEY]; /* a scalar subquery over a join: its */
  int aJsKeyCol[PL_JOIN_MAX_SCALAR][PL_JOIN_MAX_KEY]; /* keys' outer columns */
  uint8_t *aNeed[PL_JOIN_MAX_TAB]; /* column c of table t is read by the host part */
  int *aColOf[PL_JOIN_MAX_TAB];    /* row-set column of table t's column c, or -1 */
  sqlite3_str *pHost;
  /* the GROUP BY keys' texts in pHost, "(...)" each, and those a key of
  ** their own table determines (jp_key_group) */
  int aGroupAt[JP_MAX_GROUP], aGroupEnd[JP_MAX_GROUP];
  uint8_t aGroupDrop[JP_MAX_GROUP];
  int iWhereEnd; /* where the host part's WHERE ends in pHost */
  /* value subquery i over the same rows as the query (jp_value_rows):
  ** its parse, or NULL */
  pl_ast *apValAst[PL_JOIN_MAX_VALUE];
} jp;

static void jp_fail(jp *s, const char *zFmt, const char *zArg) {
  if (s->bFail) return;
  s->bFail = 1;
  snprintf(s->j->zWhy, sizeof(s->j->zWhy), zFmt, zArg ? zArg : "");
}

/* Fail with the text of e, a node of AST a. */
static void jp_fail_in(jp *s, const pl_ast *a, const char *zFmt, const pl_expr *e) {
  int n = 0;
  const char *z = pl_expr_text(a, e, &n);
  char *zText = sqlite3_mprintf("%.*s", n, z);
  jp_fail(s, zFmt, zText);
  sqlite3_free(zText);
}

static void jp_fail_expr(jp *s, const char *zFmt, const pl_expr *e) {
  jp_fail_in(s, s->a, zFmt, e);
}

/* The name FROM item i goes by. */
static const char *jp_qual(jp *s, int i) {
  const pl_from *f = &s->a->aFrom[i];
  return f->zAlias ? f->zAlias : f->zTable;
}

/* Look up column reference e as SQLite would: 1 with *piTab, *piCol; 0 if
** it names no table column but a result column's alias (left to SQLite as
** written); -1 if it names none, -2 if several. bOrder: an ORDER BY term,
** where an alias wins over a column. */
static int jp_lookup(jp *s, const pl_expr *e, int bOrder, int *piTab, int *piCol) {
  if (!e->zTab && bOrder && pl_ast_alias(s->a, e->zName)) return 0;
  int nFound = 0;
  for (int t = 0; t < s->j->nTab; t++) {
    if (e->zTab) {
      if (sqlite3_stricmp(e->zTab, jp_qual(s, t)) != 0) continue;
      if (e->zDb && (s->a->aFrom[t].zAlias || !s->a->aFrom[t].zDb ||
                     sqlite3_stricmp(e->zDb, s->a->aFrom[t].zDb) != 0))
        continue;
    }
    for (int c = 0; c < s->aTi[t].nCol; c++) {
      if (sqlite3_stricmp(s->aTi[t].azCol[c], e->zName) != 0) continue;
      *piTab = t;
      *piCol = c;
      nFound++;
      break;
    }
  }
  if (nFound == 1) return 1;
  if (nFound == 0 && !e->zTab && pl_ast_alias(s->a, e->zName)) return 0;
  return nFound ? -2 : -1;
}

/* jp_lookup, and s fails when e names no column or several. */
static int jp_resolve(jp *s, const pl_expr *e, int bOrder, int *piTab, int *piCol) {
  int r = jp_lookup(s, e, bOrder, piTab, piCol);
  if (r >= 0) return r;
  jp_fail_expr(s,
               r == -2 ? "the column %s is ambiguous"
                       : "%s is no column of the joined tables (rowid, or an unknown name)",
               e);
  return -1;
}

/* Mark every table column e reads as needed by the host part. */
/* The FROM item a t.* names (by its alias or name, as SQLite), or -1. */
static int jp_star_table(jp *s, const pl_expr *e) {
  for (int t = 0; t < s->j->nTab; t++)
    if (sqlite3_stricmp(e->zTab, jp_qual(s, t)) == 0) return t;
  jp_fail_expr(s, "%s names no table of the join", e);
  return -1;
}

static void jp_need(jp *s, const pl_expr *e, int bOrder) {
  if (!e || s->bFail) return;
  if (e->op == PL_E_STAR) { /* every column of every table, or of t */
    int t0 = e->zTab ? jp_star_table(s, e) : 0, t1 = e->zTab ? t0 + 1 : s->j->nTab;
    for (int t = t0; t >= 0 && t < t1; t++)
      for (int c = 0; c < s->aTi[t].nCol; c++) s->aNeed[t][c] = 1;
    return;
  }
  if (e->op == PL_E_COLUMN) {
    int t, c;
    if (jp_resolve(s, e, bOrder, &t, &c) == 1) s->aNeed[t][c] = 1;
    return;
  }
  jp_need(s, e->pLeft, bOrder);
  jp_need(s, e->pRight, bOrder);
  jp_need(s, e->pExtra, bOrder);
  for (int i = 0; i < e->nArg; i++) jp_need(s, e->apArg[i], bOrder);
}

/* The tables e reads, as a bit mask; -1 if a reference does not resolve to
** a column (then s fails, or e reads an alias: *pbAlias). */
static int jp_tables(jp *s, const pl_expr *e, int *pbAlias) {
  if (!e) return 0;
  if (e->op == PL_E_COLUMN) {
    int t, c, r = jp_resolve(s, e, 0, &t, &c);
    if (r == 0) *pbAlias = 1;
    return r == 1 ? 1 << t : r == 0 ? 0 : -1;
  }
  int m = 0, x;
  if ((x = jp_tables(s, e->pLeft, pbAlias)) < 0) return -1;
  m |= x;
  if ((x = jp_tables(s, e->pRight, pbAlias)) < 0) return -1;
  m |= x;
  if ((x = jp_tables(s, e->pExtra, pbAlias)) < 0) return -1;
  m |= x;
  for (int i = 0; i < e->nArg; i++) {
    if ((x = jp_tables(s, e->apArg[i], pbAlias)) < 0) return -1;
    m |= x;
  }
  return m;
}

/* Does e read a column of a collation other than BINARY? (The device
** compares text BINARY.) */
static int jp_collated(jp *s, const pl_expr *e) {
  if (!e) return 0;
  if (e->op == PL_E_COLUMN) {
    int t, c;
    return jp_resolve(s, e, 0, &t, &c) == 1 && s->aColl[t][c] != 'x';
  }
  if (e->op == PL_E_COLLATE) return 1;
  if (jp_collated(s, e->pLeft) || jp_collated(s, e->pRight) || jp_collated(s, e->pExtra)) return 1;
  for (int i = 0; i < e->nArg; i++)
    if (jp_collated(s, e->apArg[i])) return 1;
  return 0;
}

/* The operands of e's tree of op (PL_E_AND: its conjuncts, PL_E_OR: its
** disjuncts) into ap[n..nMax); the new count (nMax + 1 if they do not
** fit). */
static int jp_operands(const pl_expr *e, int op, const pl_expr **ap, int n, int nMax) {
  if (e->op == op)
    return jp_operands(e->pRight, op, ap, jp_operands(e->pLeft, op, ap, n, nMax), nMax);
  if (n >= nMax) return nMax + 1;
  ap[n] = e;
  return n + 1;
}

static int jp_conjuncts(const pl_expr *e, const pl_expr **ap, int n, int nMax) {
  return jp_operands(e, PL_E_AND, ap, n, nMax);
}

/* Is conjunct c one of every disjunct of e (an OR tree)? */
static int jp_in_every(const pl_expr *e, const pl_expr *c) {
  if (e->op == PL_E_OR) return jp_in_every(e->pLeft, c) && jp_in_every(e->pRight, c);
  const pl_expr *ap[32];
  int n = jp_conjuncts(e, ap, 0, 32);
  for (int i = 0; i < n && i < 32; i++)
    if (pl_expr_equal(ap[i], c)) return 1;
  return 0;
}

/* If e is "c = literal", "literal = c" or "c IN (literals)", its column c
** and its literals appended to ap[*pn..nMax); else NULL. */
static const pl_expr *jp_col_values(const pl_expr *e, const pl_expr **ap, int *pn, int nMax) {
  const pl_expr *c = NULL, *aLit[64];
  int n = 0;
  if (e->op == PL_E_EQ) {
    c = e->pLeft->op == PL_E_COLUMN ? e->pLeft : e->pRight;
    aLit[n++] = c == e->pLeft ? e->pRight : e->pLeft;
  } else if (e->op == PL_E_IN && !(e->flags & PL_F_NOT) && e->nArg > 0 && e->nArg <= 64) {
    c = e->pLeft;
    for (int i = 0; i < e->nArg; i++) aLit[n++] = e->apArg[i];
  }
  if (!c || c->op != PL_E_COLUMN || *pn + n > nMax) return NULL;
  for (int i = 0; i < n; i++)
    if (aLit[i]->op != PL_E_INT && aLit[i]->op != PL_E_REAL && aLit[i]->op != PL_E_STR) return NULL;
  for (int i = 0; i < n; i++) ap[(*pn)++] = aLit[i];
  return c;
}

/* Filters an OR implies: when every disjunct holds "c = literal" or "c IN
** (literals)" for one column c, the OR is only true where c is IN the
** union of those literals (TPC-H Q7's nations, Q19's brands): the same
** comparison, c's affinity and collation applied to the literals alike. The
** OR itself stays where it was; an implied filter the device does not take
** is dropped, never handed to SQLite. */
static void jp_implied(jp *s, const pl_expr *e) {
  const pl_expr *aDis[32], *aConj[32];
  int nDis = jp_operands(e, PL_E_OR, aDis, 0, 32);
  if (nDis > 32) return; /* every disjunct must hold the column */
  int nConj = jp_conjuncts(aDis[0], aConj, 0, 32);
  for (int i = 0; i < nConj && i < 32 && !s->bFail; i++) {
    const pl_expr *aLit[64];
    int nLit = 0;
    const pl_expr *c = jp_col_values(aConj[i], aLit, &nLit, 64);
    if (!c || jp_in_every(e, aConj[i])) continue;
    int bAll = 1;
    for (int d = 1; d < nDis && bAll; d++) {
      const pl_expr *aOther[32];
      int nOther = jp_conjuncts(aDis[d], aOther, 0, 32), bFound = 0;
      for (int k = 0; k < nOther && k < 32 && !bFound; k++) {
        int nBefore = nLit;
        const pl_expr *c2 = jp_col_values(aOther[k], aLit, &nLit, 64);
        if (c2 && pl_expr_equal(c, c2))
          bFound = 1;
        else
          nLit = nBefore;
      }
      bAll = bFound;
    }
    if (!bAll || s->nImplied >= JP_MAX_IMPLIED || s->nTerm >= JP_MAX_TERM) continue;
    pl_expr *in = calloc(1, sizeof(*in));
    pl_expr **apArg = malloc(sizeof(*apArg) * (size_t)nLit);
    if (!in || !apArg) {
      free(in);
      free(apArg);
      return jp_fail(s, "out of memory%s", "");
    }
    in->op = PL_E_IN;
    in->iStart = e->iStart; /* for messages: the OR it comes from */
    in->iEnd = e->iEnd;
    in->nHeight = 3;
    in->pLeft = (pl_expr *)c;
    for (int k = 0; k < nLit; k++) apArg[k] = (pl_expr *)aLit[k];
    in->apArg = apArg;
    in->nArg = nLit;
    s->apImplied[s->nImplied++] = in;
    s->aImplied[s->nTerm] = 1;
    s->aOnOf[s->nTerm] = s->iAddOn;
    s->aTerm[s->nTerm++] = in;
  }
}

static void jp_add_term(jp *s, const pl_expr *e) {
  if (s->bFail) return;
  if (e->op == PL_E_AND) {
    jp_add_term(s, e->pLeft);
    jp_add_term(s, e->pRight);
    return;
  }
  if (s->nTerm >= JP_MAX_TERM) return jp_fail(s, "more than 256 WHERE and ON terms%s", "");
  s->aOnOf[s->nTerm] = s->iAddOn;
  s->aTerm[s->nTerm++] = e;
  if (e->op != PL_E_OR) return;
  /* (A AND B1) OR (A AND B2): A is true wherever the OR is, so A is a term
  ** too (a join key or a filter; TPC-H Q19), the OR staying as it is */
  const pl_expr *d = e;
  while (d->op == PL_E_OR) d = d->pLeft;
  const pl_expr *ap[32];
  int n = jp_conjuncts(d, ap, 0, 32);
  for (int i = 0; i < n && i < 32; i++)
    if (ap[i]->op != PL_E_OR && jp_in_every(e, ap[i])) jp_add_term(s, ap[i]);
  jp_implied(s, e);
}

/* The affinity of column c of table t as a join compares it: the rowid
** alias is INTEGER. */
static char jp_aff(jp *s, int t, int c) {
  return c == s->aTi[t].iIpk ? 'D' : s->aAff[t][c];
}

/* Is e "a.x = b.y" between two tables, both BINARY and of affinities
** SQLite converts neither of? Then 1 with the pairs in term k. */
static int jp_key_term(jp *s, int k) {
  const pl_expr *e = s->aTerm[k];
  if (e->op != PL_E_EQ || e->pLeft->op != PL_E_COLUMN || e->pRight->op != PL_E_COLUMN) return 0;
  int t1, c1, t2, c2;
  if (jp_resolve(s, e->pLeft, 0, &t1, &c1) != 1 || jp_resolve(s, e->pRight, 0, &t2, &c2) != 1)
    return 0;
  if (t1 == t2) return 0;
  /* SQLite converts neither side when both have numeric affinity, both
  ** TEXT, or both none: "=" is then csq_value_eq (4 = 4.0; TEXT equals the
  ** same bytes only, never a number or a BLOB), which the hash join and
  ** the join filters compute */
  char f1 = jp_aff(s, t1, c1), f2 = jp_aff(s, t2, c2);
  int bSame = (f1 >= 'C' && f2 >= 'C') || (f1 == 'B' && f2 == 'B') || (f1 == 'A' && f2 == 'A');
  if (!bSame || s->aColl[t1][c1] != 'x' || s->aColl[t2][c2] != 'x') return 0;
  s->aKeyTab[k][0] = t1, s->aKeyCol[k][0] = c1;
  s->aKeyTab[k][1] = t2, s->aKeyCol[k][1] = c2;
  return 1;
}

/* Collect the operands of "c = k1 OR c = k2 OR ..." (one column c, each k
** a constant side, either order) into ap (at most nMax); the count, or 0
** if e is not of that shape. */
static int jp_or_list(const pl_expr *e, const pl_expr **pCol, const pl_expr **ap, int n, int nMax) {
  if (e->op == PL_E_OR) {
    n = jp_or_list(e->pLeft, pCol, ap, n, nMax);
    return n ? jp_or_list(e->pRight, pCol, ap, n, nMax) : 0;
  }
  if (e->op != PL_E_EQ || n >= nMax) return 0;
  const pl_expr *c = e->pLeft, *k = e->pRight;
  if (c->op != PL_E_COLUMN) c = e->pRight, k = e->pLeft;
  if (c->op != PL_E_COLUMN || k->op == PL_E_COLUMN) return 0;
  if (*pCol && !pl_expr_equal(*pCol, c)) return 0;
  *pCol = c;
  ap[n] = k;
  return n + 1;
}

/*
** Subqueries. The join planner takes a subquery only when it is
** uncorrelated: its text prepares on its own, so every name in it resolves
** inside it, as it does in place (SQLite resolves the innermost scope
** first). SQLite then evaluates it in the host part, which pastes its text
** as written. Correlated ones leave the query to SQLite.
*/
static void jp_check_subqueries(jp *s, const pl_expr *e) {
  if (!e || s->bFail) return;
  for (int i = 0; i < s->j->nScalar; i++)
    if (s->apScalar[i] == e) return; /* decorrelated (jp_scalars) */
  if (e->op == PL_E_SUBQUERY) {
    sqlite3_stmt *pStmt = NULL;
    int rc = sqlite3_prepare_v2(s->db, e->z, e->n, &pStmt, NULL);
    sqlite3_finalize(pStmt);
    if (rc != SQLITE_OK) {
      char *z = sqlite3_mprintf("%.60s%s", e->z, e->n > 60 ? "..." : "");
      jp_fail(s, "a correlated subquery (%s): SQLite plans the query", z);
      sqlite3_free(z);
    }
    return;
  }
  jp_check_subqueries(s, e->pLeft);
  jp_check_subqueries(s, e->pRight);
  jp_check_subqueries(s, e->pExtra);
  for (int i = 0; i < e->nArg; i++) jp_check_subqueries(s, e->apArg[i]);
}

/* The values of a subquery as jp_sub_values collects them. */
typedef struct jp_subrows {
  sqlite3_value **ap;
  int n;
  int bFit; /* 0: more than JP_SUB_MAX_VALUES */
  int rc;
  int bNull; /* a NULL among them */
} jp_subrows;

static int jp_sub_row(void *pCtx, sqlite3_value *v) {
  jp_subrows *x = pCtx;
  if (sqlite3_value_type(v) == SQLITE_NULL) { /* never makes IN true, NOT IN never so */
    x->bNull = 1;
    return 0;
  }
  if (x->n >= JP_SUB_MAX_VALUES) {
    x->bFit = 0;
    return 1;
  }
  if (x->n % 64 == 0) {
    sqlite3_value **apNew = sqlite3_realloc64(x->ap, sizeof(*x->ap) * (size_t)(x->n + 64));
    if (!apNew) {
      x->rc = SQLITE_NOMEM;
      return 1;
    }
    x->ap = apNew;
  }
  if (!(x->ap[x->n] = sqlite3_value_dup(v))) {
    x->rc = SQLITE_NOMEM;
    return 1;
  }
  x->n++;
  return 0;
}

/* The non-NULL values of uncorrelated subquery term e ("x IN (SELECT
** ...)"), run once per plan (through s->xRows: the planner, when the
** caller gives one): *pap (owned by s) and *pn, *pbFit 0 when there are
** more than JP_SUB_MAX_VALUES or the subquery does not give one column.
** Returns SQLITE_OK or SQLite's error (s fails with its message). */
static int jp_sub_values(jp *s, const pl_expr *e, sqlite3_value ***pap, int *pn, int *pbFit,
                         int *pbNull) {
  for (int i = 0; i < s->nSub; i++)
    if (s->aSub[i] == e) {
      *pap = s->aaSubVal[i];
      *pn = s->anSubVal[i];
      *pbFit = s->abSubFit[i];
      *pbNull = s->abSubNull[i];
      return SQLITE_OK;
    }
  *pap = NULL;
  *pn = 0;
  *pbFit = 0;
  *pbNull = 0;
  if (s->nSub >= JP_MAX_SUB) return SQLITE_OK;
  int iSub = s->nSub++;
  s->aSub[iSub] = e;
  sqlite3_stmt *pStmt = NULL;
  const pl_expr *q = e->pRight;
  jp_subrows x = {NULL, 0, 1, SQLITE_OK, 0};
  int rc = sqlite3_prepare_v2(s->db, q->z, q->n, &pStmt, NULL);
  x.bFit = rc == SQLITE_OK && pStmt && sqlite3_column_count(pStmt) == 1;
  if (x.bFit && s->xRows && sqlite3_bind_parameter_count(pStmt) == 0) {
    sqlite3_finalize(pStmt);
    pStmt = NULL;
    rc = s->xRows(s->pLookupArg, q->z, q->n, jp_sub_row, &x);
  } else {
    while (x.bFit && x.rc == SQLITE_OK && (rc = sqlite3_step(pStmt)) == SQLITE_ROW)
      if (jp_sub_row(&x, sqlite3_column_value(pStmt, 0))) break;
    if (rc == SQLITE_DONE || rc == SQLITE_ROW) rc = SQLITE_OK;
  }
  if (rc == SQLITE_OK) rc = x.rc;
  if (rc != SQLITE_OK && !s->bFail) {
    s->bFail = 1;
    snprintf(s->j->zWhy, sizeof(s->j->zWhy), "the subquery failed: %s", sqlite3_errmsg(s->db));
  }
  sqlite3_finalize(pStmt);
  if (rc != SQLITE_OK || !x.bFit) {
    for (int i = 0; i < x.n; i++) sqlite3_value_free(x.ap[i]);
    sqlite3_free(x.ap);
    x.ap = NULL;
    x.n = 0;
  }
  s->aaSubVal[iSub] = x.ap;
  s->anSubVal[iSub] = x.n;
  s->abSubFit[iSub] = *pbFit = rc == SQLITE_OK && x.bFit;
  s->abSubNull[iSub] = *pbNull = x.bNull;
  *pap = x.ap;
  *pn = x.n;
  return rc;
}

/* A device filter for "x [NOT] IN (SELECT ...)" over table t: the
** subquery's values as an IN list. Exact when x has numeric affinity:
** SQLite then compares with numeric affinity applied to the values
** (PL_AFF_NUMERIC does the same). A NULL among them cannot make IN true,
** and makes NOT IN never true; NOT IN over no rows is true even for a NULL
** x (no filter at all); else the device's NOT IN is true only where IN is
** FALSE, as SQLite's. 1 pushed, 0 not (the term stays for SQLite), -1 the
** program is full. */
static int jp_push_in_select(jp *s, int t, csq_pb *b, const pl_expr *e, int *pbEmpty) {
  int tCol, c, bNot = (e->flags & PL_F_NOT) != 0;
  if (e->pLeft->op != PL_E_COLUMN || jp_resolve(s, e->pLeft, 0, &tCol, &c) != 1 || tCol != t)
    return 0;
  char aff = c == s->aTi[t].iIpk ? 'D' : s->aAff[t][c];
  if (aff < 'C') return 0;
  sqlite3_value **ap = NULL;
  int n = 0, bFit = 0, bNull = 0;
  if (jp_sub_values(s, e, &ap, &n, &bFit, &bNull) != SQLITE_OK || !bFit) return 0;
  if (bNot && bNull) {
    *pbEmpty = 1;
    return 1;
  }
  if (bNot && n == 0) return 1;
  pl_cons cons;
  memset(&cons, 0, sizeof(cons));
  cons.iChunk = c == s->aTi[t].iIpk ? 0 : c + 1;
  cons.op = CSQ_OP_IN;
  cons.flags = bNot ? CSQ_TF_NOT : 0;
  cons.aff = PL_AFF_NUMERIC;
  cons.apVal = ap;
  cons.nVal = n;
  return pl_filter_add(b, &cons, pbEmpty) < 0 ? -1 : 1;
}

/* A device filter for term e over table t: the term itself, or, for an OR
** of equalities of one column with constants, the same as "c IN (k1, k2,
** ...)" (the same truth for every row: both compare with c's affinity and
** collation, and neither is true for a NULL). As pl_split_filter. */
static int jp_push(jp *s, int t, csq_pb *b, const pl_expr *e, int *pbEmpty) {
  if (e->op == PL_E_INSELECT) return jp_push_in_select(s, t, b, e, pbEmpty);
  const pl_expr *aK[64], *pCol = NULL;
  int n = e->op == PL_E_OR ? jp_or_list(e, &pCol, aK, 0, 64) : 0;
  if (n < 2)
    return pl_split_filter(s->db, s->a, &s->aTi[t], jp_qual(s, t), s->aParam, s->nParam, b, e,
                           pbEmpty);
  pl_expr in;
  memset(&in, 0, sizeof(in));
  in.op = PL_E_IN;
  in.iStart = e->iStart;
  in.iEnd = e->iEnd;
  in.nHeight = e->nHeight;
  in.pLeft = (pl_expr *)pCol;
  in.apArg = (pl_expr **)aK;
  in.nArg = n;
  return pl_split_filter(s->db, s->a, &s->aTi[t], jp_qual(s, t), s->aParam, s->nParam, b, &in,
                         pbEmpty);
}

/* Selectivity guess of a pushed filter term. */
static double jp_selectivity(const pl_expr *e) {
  switch (e->op) {
  case PL_E_EQ:
  case PL_E_IS:
  case PL_E_IN:
  case PL_E_ISNULL:
  case PL_E_OR:
    return 0.1;
  default:
    return 0.3;
  }
}

/* The output of table t that reads column c (added if new), or -1. */
static int jp_output(jp *s, int t, int c) {
  pl_jtab *jt = &s->j->aTab[t];
  int iChunk = c == s->aTi[t].iIpk ? 0 : c + 1;
  for (int k = 0; k < jt->nOut; k++)
    if (jt->aChunk[k] == iChunk) return k;
  if (jt->nOut >= PL_JOIN_MAX_OUT) {
    jp_fail(s, "a table returns more than 64 columns%s", "");
    return -1;
  }
  int slot = csq_pb_input(s->aB[t], (uint32_t)iChunk);
  if (slot < 0 || csq_pb_output(s->aB[t], slot) < 0) {
    jp_fail(s, "program limit reached%s", "");
    return -1;
  }
  jt->aChunk[jt->nOut] = iChunk;
  jt->aRowCol[jt->nOut] = -1;
  return jt->nOut++;
}

static int jp_semi_resolve(jp *s, int t, const char *zQual, const pl_expr *e, int *piTab,
                           int *piCol);

/* Append the name of row-set column k to p. */
static void jp_colname(jp *s, sqlite3_str *p, int k) {
  sqlite3_str_appendf(p, "csq_j." PL_JROWS_NAME_FMT, s->j->aColAff[k] - 'A' + 'a',
                      s->j->aColColl[k], k);
}

/* The output of the subquery table t's scan that reads column c, or -1. */
static int jp_find_output(jp *s, int t, int c) {
  int iChunk = c == s->aTi[t].iIpk ? 0 : c + 1;
  for (int o = 0; o < s->j->aTab[t].nOut; o++)
    if (s->j->aTab[t].aChunk[o] == iChunk) return o;
  return -1;
}

/* 1 if a and b read the same rows: the same FROM items (names, aliases,
** joins, ON) and the same WHERE. */
static int jp_same_rows(const pl_ast *a, const pl_ast *b) {
  if (a->nFrom != b->nFrom || (!a->pWhere) != (!b->pWhere)) return 0;
  if (a->pWhere && !pl_expr_equal(a->pWhere, b->pWhere)) return 0;
  for (int i = 0; i < a->nFrom; i++) {
    const pl_from *x = &a->aFrom[i], *y = &b->aFrom[i];
    if (x->eJoin != y->eJoin || (!x->pOn) != (!y->pOn) || (!x->zDb) != (!y->zDb) ||
        (!x->zAlias) != (!y->zAlias))
      return 0;
    if (sqlite3_stricmp(x->zTable, y->zTable) || (x->zDb && sqlite3_stricmp(x->zDb, y->zDb)) ||
        (x->zAlias && sqlite3_stricmp(x->zAlias, y->zAlias)))
      return 0;
    if (x->pOn && !pl_expr_equal(x->pOn, y->pOn)) return 0;
  }
  return 1;
}

/* Is uncorrelated subquery e (PL_E_SUBQUERY) one whose value the host
** part may take as a parameter (join.h)? If so it becomes the next of
** pl_join.azValue: 1; else 0, and SQLite runs it in place. */
static int jp_value_sub(jp *s, const pl_expr *e) {
  pl_join *j = s->j;
  if (j->nValue >= PL_JOIN_MAX_VALUE) return 0;
  pl_ast *q = NULL;
  if (pl_parse_opt(e->z, e->n, PL_PARSE_SUBQUERY, &q, NULL) != PL_OK) return 0;
  const pl_expr *r = q->nCol == 1 && !q->bStar ? q->aCol[0].pExpr : NULL;
  int bOk = r && q->bAgg && q->nGroup == 0 && !q->pLimit && !q->pOffset && q->nParam == 0;
  /* no affinity (sqlite3ExprAffinity): not a column, CAST or subquery; no
  ** function, which could be likely() and pass its argument's on */
  bOk = bOk && r->op != PL_E_COLUMN && r->op != PL_E_CAST && r->op != PL_E_SUBQUERY &&
        r->op != PL_E_FUNC && !pl_expr_has_op(r, PL_E_COLLATE);
  char *z = bOk ? sqlite3_mprintf("%.*s", e->n, e->z) : NULL;
  if (bOk && !z) jp_fail(s, "out of memory%s", "");
  if (!z) {
    pl_ast_free(q);
    return 0;
  }
  if (jp_same_rows(s->a, q)) {
    s->apValAst[j->nValue] = q;
    q = NULL;
  }
  pl_ast_free(q);
  j->azValue[j->nValue++] = z;
  return 1;
}

/* The text of e (a node of AST a) into p, each column reference replaced:
** tSub < 0, by its row-set column (the host part); else by the column of
** the rows of subquery table tSub's scan (a scalar subquery's aggregate,
** run over them). */
static void jp_emit_to(jp *s, sqlite3_str *p, const pl_ast *a, const pl_expr *e, int bOrder,
                       int tSub) {
  if (s->bFail) return;
  if (e->op == PL_E_COLUMN && tSub >= 0) {
    int u, c, o = -1;
    if (jp_semi_resolve(s, tSub, s->aCorr[tSub - s->j->nTab].zQual, e, &u, &c) == 1)
      o = jp_find_output(s, tSub, c);
    if (o < 0) return jp_fail_in(s, a, "internal: column %s of a subquery not planned", e);
    sqlite3_str_appendf(p, "csq_j." PL_JROWS_NAME_FMT,
                        c == s->aTi[tSub].iIpk ? 'd' : s->aAff[tSub][c] - 'A' + 'a', 'x', o);
    return;
  }
  if (e->op == PL_E_COLUMN) {
    int t, c, r = jp_resolve(s, e, bOrder, &t, &c);
    if (r < 0) return;
    if (r == 0) { /* an alias, as written */
      int n = 0;
      const char *z = pl_expr_text(a, e, &n);
      sqlite3_str_append(p, z, n);
      return;
    }
    int k = s->aColOf[t][c];
    if (k < 0) return jp_fail_expr(s, "internal: column %s not planned", e);
    return jp_colname(s, p, k);
  }
  if (e->op == PL_E_SUBQUERY && tSub < 0) { /* a scalar subquery decorrelated: its column */
    for (int i = 0; i < s->j->nScalar; i++)
      if (s->apScalar[i] == e) {
        sqlite3_str_appendchar(p, 1, '(');
        jp_colname(s, p, s->j->aScalar[i].iCol);
        sqlite3_str_appendchar(p, 1, ')');
        return;
      }
  }
  if (e->op == PL_E_SUBQUERY && tSub < 0 && jp_value_sub(s, e)) {
    sqlite3_str_appendf(p, "?%d", s->j->iRows + s->j->nValue);
    return;
  }
  if (e->op == PL_E_PARAM) {
    sqlite3_str_appendf(p, "?%d", (int)e->iVal);
    return;
  }
  if (e->op == PL_E_STAR) { /* its columns in order, as SQLite expands it */
    int t0 = e->zTab ? jp_star_table(s, e) : 0, t1 = e->zTab ? t0 + 1 : s->j->nTab, n = 0;
    for (int t = t0; t >= 0 && t < t1; t++)
      for (int c = 0; c < s->aTi[t].nCol; c++) {
        int k = s->aColOf[t][c];
        if (k < 0) return jp_fail(s, "internal: a column of * not planned%s", "");
        if (n++) sqlite3_str_appendall(p, ", ");
        jp_colname(s, p, k);
      }
    return;
  }
  const pl_expr *aChild[64];
  int n = pl_expr_children(e, aChild, 64);
  if (n < 0) return jp_fail(s, "expression too wide%s", "");
  int at = e->iStart;
  for (int i = 0; i < n; i++) {
    sqlite3_str_append(p, a->zSql + at, aChild[i]->iStart - at);
    /* a subquery keeps its own parentheses: "x IN ((SELECT ...))" would
    ** compare with its first row only */
    int bParen = aChild[i]->op != PL_E_SUBQUERY;
    if (bParen) sqlite3_str_appendchar(p, 1, '(');
    if (aChild[i]->op == PL_E_SUBQUERY && (e->op == PL_E_INSELECT || e->op == PL_E_EXISTS))
      /* a table, not a value: never a parameter */
      sqlite3_str_append(p, a->zSql + aChild[i]->iStart, aChild[i]->iEnd - aChild[i]->iStart);
    else
      jp_emit_to(s, p, a, aChild[i], bOrder, tSub);
    if (bParen) sqlite3_str_appendchar(p, 1, ')');
    at = aChild[i]->iEnd;
  }
  sqlite3_str_append(p, a->zSql + at, e->iEnd - at);
}

/* The host text of e, column references replaced by row-set columns. */
static void jp_emit(jp *s, const pl_expr *e, int bOrder) {
  jp_emit_to(s, s->pHost, s->a, e, bOrder, -1);
}

/* The GROUP BY keys one key of their table determines, when that key's
** values turn out unique (pl_join.zHostKey): of the keys that are plain
** columns of one build side, the most of any, the first of INTEGER
** affinity stays in j->iKeyTab, iKeyCol; the others are marked in
** s->aGroupDrop. 0 if there are none, -1 out of memory. */
static int jp_key_group(jp *s) {
  const pl_ast *a = s->a;
  pl_join *j = s->j;
  int aTab[JP_MAX_GROUP], aCol[JP_MAX_GROUP], aN[PL_JOIN_MAX_TAB] = {0};
  if (s->bFail || a->nGroup < 2 || a->nGroup > JP_MAX_GROUP) return 0;
  for (int i = 0; i < a->nGroup; i++) {
    const pl_expr *e = a->aGroup[i].pExpr;
    aTab[i] = -1;
    if (e->op == PL_E_COLUMN && jp_lookup(s, e, 0, &aTab[i], &aCol[i]) != 1) aTab[i] = -1;
    if (aTab[i] >= 0 && aTab[i] != j->aOrder[0]) aN[aTab[i]]++;
  }
  int t = -1;
  for (int u = 0; u < j->nTab; u++)
    if (aN[u] >= 2 && (t < 0 || aN[u] > aN[t])) t = u;
  if (t < 0) return 0;
  int iKey = -1;
  for (int i = 0; i < a->nGroup && iKey < 0; i++)
    if (aTab[i] == t && s->aAff[t][aCol[i]] == 'D' && s->aColOf[t][aCol[i]] >= 0) iKey = i;
  if (iKey < 0) return 0;
  for (int i = 0; i < a->nGroup; i++) s->aGroupDrop[i] = aTab[i] == t && i != iKey;
  j->iKeyTab = t;
  j->iKeyCol = s->aColOf[t][aCol[iKey]];
  j->zKeyName = sqlite3_mprintf("%s.%s", jp_qual(s, t), s->aTi[t].azCol[aCol[iKey]]);
  return j->zKeyName ? 1 : -1;
}

/* Value subquery i (s->apValAst[i]) reads the rows the query reads: its
** result expression over the joined rows, after the host part's own WHERE,
** as j->azValueRows[i]. Nothing when the joined rows are not just those
** of FROM and WHERE (semi-joins, scalar subqueries) or it reads a column
** the rows do not carry. 0, or -1 out of memory. */
static int jp_value_rows(jp *s, int i, const char *zHost) {
  pl_join *j = s->j;
  const pl_ast *q = s->apValAst[i];
  const pl_expr *r = q->aCol[0].pExpr;
  if (j->nSemi || j->nScalar || j->nExtra || pl_expr_has_op(r, PL_E_SUBQUERY) ||
      pl_expr_has_op(r, PL_E_EXISTS) || pl_expr_has_op(r, PL_E_INSELECT))
    return 0;
  pl_refs refs;
  memset(&refs, 0, sizeof(refs));
  if (pl_expr_refs(r, 0, &refs)) return -1;
  int bOk = 1;
  for (int k = 0; k < refs.nCol && bOk; k++) {
    int t, c;
    bOk = jp_lookup(s, refs.aCol[k], 0, &t, &c) == 1 && s->aColOf[t][c] >= 0;
  }
  pl_refs_free(&refs);
  if (!bOk) return 0;
  sqlite3_str *p = sqlite3_str_new(s->db);
  sqlite3_str_appendall(p, "SELECT (");
  jp_emit_to(s, p, q, r, 0, -1);
  sqlite3_str_appendchar(p, 1, ')');
  sqlite3_str_append(p, zHost + j->iHostFrom, s->iWhereEnd - j->iHostFrom);
  j->azValueRows[i] = sqlite3_str_finish(p);
  return j->azValueRows[i] ? 0 : -1;
}

/* zHost with the GROUP BY keys s->aGroupDrop marks left out. */
static char *jp_key_host(jp *s, const char *zHost) {
  int n = s->a->nGroup, nKeep = 0;
  sqlite3_str *p = sqlite3_str_new(s->db);
  /* " GROUP BY " stands just before the first key */
  sqlite3_str_append(p, zHost, s->aGroupAt[0] - (int)strlen(" GROUP BY "));
  for (int i = 0; i < n; i++) {
    if (s->aGroupDrop[i]) continue;
    sqlite3_str_appendall(p, nKeep++ ? ", " : " GROUP BY ");
    sqlite3_str_append(p, zHost + s->aGroupAt[i], s->aGroupEnd[i] - s->aGroupAt[i]);
  }
  sqlite3_str_appendall(p, zHost + s->aGroupEnd[n - 1]);
  return sqlite3_str_finish(p);
}

static void jp_host(jp *s) {
  pl_ast *a = s->a;
  pl_join *j = s->j;
  j->iRows = (a->nParam > s->nParam ? a->nParam : s->nParam) + 1;
  sqlite3_str_appendall(s->pHost, "SELECT ");
  for (int i = 0; i < a->nCol; i++) {
    if (i) sqlite3_str_appendall(s->pHost, ", ");
    if (a->aCol[i].pExpr->op == PL_E_STAR) {
      jp_emit(s, a->aCol[i].pExpr, 0);
      continue;
    }
    sqlite3_str_appendchar(s->pHost, 1, '(');
    jp_emit(s, a->aCol[i].pExpr, 0);
    sqlite3_str_appendchar(s->pHost, 1, ')');
    if (a->aCol[i].zAlias) sqlite3_str_appendf(s->pHost, " AS \"%w\"", a->aCol[i].zAlias);
  }
  j->iHostFrom = sqlite3_str_length(s->pHost);
  sqlite3_str_appendf(s->pHost, " FROM csq_jrows(?%d) AS csq_j", j->iRows);
  j->nHostFrom = sqlite3_str_length(s->pHost) - j->iHostFrom;
  int nRes = 0;
  for (int k = 0; k < s->nTerm; k++) {
    if (s->aKind[k] == JT_FILTER || s->aKind[k] == JT_DROPPED || s->aKind[k] == JT_SEMI ||
        (s->aKind[k] == JT_KEY && s->aUsed[k]))
      continue;
    sqlite3_str_appendall(s->pHost, nRes++ ? " AND (" : " WHERE (");
    jp_emit(s, s->aTerm[k], 0);
    sqlite3_str_appendchar(s->pHost, 1, ')');
  }
  j->nResidual = nRes;
  s->iWhereEnd = sqlite3_str_length(s->pHost);
  for (int i = 0; i < a->nGroup; i++) {
    sqlite3_str_appendall(s->pHost, i ? ", " : " GROUP BY ");
    int at = sqlite3_str_length(s->pHost);
    sqlite3_str_appendchar(s->pHost, 1, '(');
    jp_emit(s, a->aGroup[i].pExpr, 0);
    sqlite3_str_appendchar(s->pHost, 1, ')');
    if (i < JP_MAX_GROUP) {
      s->aGroupAt[i] = at;
      s->aGroupEnd[i] = sqlite3_str_length(s->pHost);
    }
  }
  if (a->pHaving) {
    sqlite3_str_appendall(s->pHost, " HAVING (");
    jp_emit(s, a->pHaving, 0);
    sqlite3_str_appendchar(s->pHost, 1, ')');
  }
  for (int i = 0; i < a->nOrder; i++) {
    const pl_term *t = &a->aOrder[i];
    sqlite3_str_appendall(s->pHost, i ? ", " : " ORDER BY ");
    if (t->iCol > 0 && t->pExpr->op != PL_E_COLLATE) {
      sqlite3_str_appendf(s->pHost, "%d", t->iCol);
    } else {
      sqlite3_str_appendchar(s->pHost, 1, '(');
      jp_emit(s, t->pExpr, 1);
      sqlite3_str_appendchar(s->pHost, 1, ')');
    }
    if (t->bDesc) sqlite3_str_appendall(s->pHost, " DESC");
    if (t->eNulls) sqlite3_str_appendall(s->pHost, t->eNulls == 1 ? " NULLS FIRST" : " NULLS LAST");
  }
  if (a->pLimit) {
    sqlite3_str_appendall(s->pHost, " LIMIT (");
    jp_emit(s, a->pLimit, 0);
    sqlite3_str_appendchar(s->pHost, 1, ')');
    if (a->pOffset) {
      sqlite3_str_appendall(s->pHost, " OFFSET (");
      jp_emit(s, a->pOffset, 0);
      sqlite3_str_appendchar(s->pHost, 1, ')');
    }
  }
}

/* Look up table zTable as table t of the plan, known to the query as zName;
** copy what planning needs. 1 if it is no csq table, 0, or SQLITE_NOMEM
** as a negative number. */
static int jp_table_info(jp *s, int t, const char *zDb, const char *zTable, const char *zName) {
  pl_tabinfo *ti = &s->aTi[t];
  ti->ePush = PL_PUSH_AUTO;
  ti->nRows = -1;
  ti->nEngines = -1;
  ti->xSample = NULL;
  if (s->xLookup(s->pLookupArg, zDb, zTable, ti) != 0) return 1;
  int n = ti->nCol;
  s->aazCol[t] = malloc(sizeof(char *) * (size_t)(n ? n : 1));
  s->aAff[t] = malloc((size_t)n + 1);
  s->aColl[t] = malloc((size_t)n + 1);
  s->aNeed[t] = calloc((size_t)n + 1, 1);
  s->aColOf[t] = malloc(sizeof(int) * (size_t)(n + 1));
  if (!s->aazCol[t] || !s->aAff[t] || !s->aColl[t] || !s->aNeed[t] || !s->aColOf[t])
    return -SQLITE_NOMEM;
  for (int c = 0; c < n; c++) {
    s->aazCol[t][c] = ti->azCol[c];
    s->aAff[t][c] = ti->aAff[c];
    s->aColOf[t][c] = -1;
    s->aColl[t][c] = 'x';
    if (ti->aColl && ti->aColl[c]) {
      const char *z = s->xColl ? s->xColl(s->pLookupArg, zDb, zTable, c) : NULL;
      s->aColl[t][c] = !z                                  ? '?'
                       : sqlite3_stricmp(z, "BINARY") == 0 ? 'x'
                       : sqlite3_stricmp(z, "NOCASE") == 0 ? 'n'
                       : sqlite3_stricmp(z, "RTRIM") == 0  ? 'r'
                                                           : '?';
    }
  }
  ti->azCol = s->aazCol[t];
  ti->aAff = s->aAff[t];
  ti->aColl = NULL; /* the lookup's buffer is reused by the next lookup */
  pl_jtab *jt = &s->j->aTab[t];
  jt->zDb = zDb ? sqlite3_mprintf("%s", zDb) : NULL;
  jt->zTable = sqlite3_mprintf("%s", zTable);
  jt->zName = sqlite3_mprintf("%s", zName);
  if ((zDb && !jt->zDb) || !jt->zTable || !jt->zName) return -SQLITE_NOMEM;
  jt->nRows = ti->nRows;
  if (!(s->aB[t] = csq_pb_new())) return -SQLITE_NOMEM;
  return 0;
}

/* Look up every FROM item. */
static int jp_tables_info(jp *s) {
  pl_ast *a = s->a;
  for (int t = 0; t < a->nFrom && !s->bFail; t++) {
    const pl_from *f = &a->aFrom[t];
    s->j->aTab[t].bLeft = f->eJoin == PL_JOIN_LEFT;
    int r = jp_table_info(s, t, f->zDb, f->zTable, jp_qual(s, t));
    if (r < 0) return SQLITE_NOMEM;
    if (r) {
      jp_fail(s, "%s is not a csq table: a join with a native table stays with SQLite", f->zTable);
      break;
    }
    if (s->aTi[t].ePush == PL_PUSH_NEVER) {
      jp_fail(s, "%s says pushdown='never'", f->zTable);
      break;
    }
  }
  return SQLITE_OK;
}

/*
** Semi- and anti-joins (join.h). A column reference inside the subquery
** resolves as SQLite resolves it, the innermost scope first: to the
** subquery's table t (qualified zQual), 1; else to exactly one column of
** the outer tables, 2 (not to an alias of the outer select list, which
** SQLite does not offer there); else 0, a reference the planner leaves.
*/
static int jp_semi_resolve(jp *s, int t, const char *zQual, const pl_expr *e, int *piTab,
                           int *piCol) {
  if (e->zDb) return 0;
  if (!e->zTab || sqlite3_stricmp(e->zTab, zQual) == 0) {
    for (int c = 0; c < s->aTi[t].nCol; c++)
      if (sqlite3_stricmp(s->aTi[t].azCol[c], e->zName) == 0) {
        *piTab = t;
        *piCol = c;
        return 1;
      }
    if (e->zTab) return 0;
  }
  if (!e->zTab && pl_ast_alias(s->a, e->zName)) return 0;
  int nFound = 0;
  for (int u = 0; u < s->j->nTab; u++) {
    if (e->zTab && sqlite3_stricmp(e->zTab, jp_qual(s, u)) != 0) continue;
    for (int c = 0; c < s->aTi[u].nCol; c++)
      if (sqlite3_stricmp(s->aTi[u].azCol[c], e->zName) == 0) {
        *piTab = u;
        *piCol = c;
        nFound++;
        break;
      }
  }
  return nFound == 1 ? 2 : 0;
}

/* Does e read only columns of the subquery's table t, of BINARY collation,
** with no COLLATE and no subquery? */
static int jp_semi_local(jp *s, int t, const char *zQual, const pl_expr *e) {
  if (!e) return 1;
  if (e->op == PL_E_COLUMN) {
    int u, c;
    return jp_semi_resolve(s, t, zQual, e, &u, &c) == 1 && s->aColl[t][c] == 'x';
  }
  if (e->op == PL_E_COLLATE || e->op == PL_E_STAR || e->op == PL_E_AGG || e->op == PL_E_SUBQUERY ||
      e->op == PL_E_EXISTS || e->op == PL_E_INSELECT)
    return 0;
  if (!jp_semi_local(s, t, zQual, e->pLeft) || !jp_semi_local(s, t, zQual, e->pRight) ||
      !jp_semi_local(s, t, zQual, e->pExtra))
    return 0;
  for (int i = 0; i < e->nArg; i++)
    if (!jp_semi_local(s, t, zQual, e->apArg[i])) return 0;
  return 1;
}

/* Does WHERE expression e hold a scalar subquery (not one of EXISTS or IN),
** which a query of one table may take as a grouped aggregate? */
static int jp_has_scalar(const pl_expr *e) {
  if (!e || e->op == PL_E_EXISTS || e->op == PL_E_INSELECT) return 0;
  if (e->op == PL_E_SUBQUERY) return 1;
  if (jp_has_scalar(e->pLeft) || jp_has_scalar(e->pRight) || jp_has_scalar(e->pExtra)) return 1;
  for (int i = 0; i < e->nArg; i++)
    if (jp_has_scalar(e->apArg[i])) return 1;
  return 0;
}

int pl_join_has_exists(const pl_expr *e) {
  if (!e) return 0;
  if (e->op == PL_E_AND) return pl_join_has_exists(e->pLeft) || pl_join_has_exists(e->pRight);
  if (e->op == PL_E_NOT) e = e->pLeft;
  return e->op == PL_E_EXISTS;
}

/*
** A correlated subquery over one csq table q (PL_E_SUBQUERY), as a table
** of the plan: t = nTab + nExtra, its keys "s.x = o.y" (and, bNe, "s.x <>
** o.y") against the outer tables, its other terms pushed to its scan. bAgg:
** a scalar subquery, its one result an aggregate expression. 1 taken
** (pl_join.nExtra grows), 0 not such a subquery (uncorrelated: it prepares
** on its own; jp_check_subqueries then decides), or s fails with why.
*/
static int jp_corr(jp *s, const pl_expr *q, int bNe, int bAgg) {
  pl_join *j = s->j;
  /* one that prepares on its own is not correlated: SQLite runs it once */
  sqlite3_stmt *pStmt = NULL;
  int rc = sqlite3_prepare_v2(s->db, q->z, q->n, &pStmt, NULL);
  sqlite3_finalize(pStmt);
  if (rc == SQLITE_OK) return 0;
  pl_ast *sub = NULL;
  if (pl_parse(q->z, q->n, &sub, NULL) != PL_OK) return 0;
  const char *zWhy = NULL;
  int x = j->nExtra, t = j->nTab + x;
  if (t >= PL_JOIN_MAX_TAB)
    zWhy = "too many tables with its subqueries";
  else if (sub->nFrom != 1 || sub->nGroup || sub->pHaving || sub->pLimit || sub->aFrom[0].zDb ||
           !sub->pWhere || sub->bAgg != bAgg || (bAgg && (sub->nCol != 1 || sub->bStar)))
    zWhy = bAgg ? "not one aggregate over one table filtered by its WHERE"
                : "not one table filtered by its WHERE";
  for (int c = 0; !zWhy && !bAgg && c < sub->nCol; c++) {
    int op = sub->aCol[c].pExpr->op;
    if (op != PL_E_STAR && op != PL_E_COLUMN && op != PL_E_INT && op != PL_E_STR &&
        op != PL_E_NULL && op != PL_E_REAL)
      zWhy = "its select list is more than columns or constants";
  }
  if (zWhy) {
    pl_ast_free(sub);
    char *z = sqlite3_mprintf("%.60s%s", q->z, q->n > 60 ? "..." : "");
    char *zMsg = sqlite3_mprintf("a correlated subquery (%%s), %s: SQLite plans the query", zWhy);
    jp_fail(s, zMsg ? zMsg : "a correlated subquery (%s): SQLite plans the query", z);
    sqlite3_free(zMsg);
    sqlite3_free(z);
    return 0;
  }
  jp_sub *c0 = &s->aCorr[x];
  memset(c0, 0, sizeof(*c0));
  c0->sub = sub; /* freed with the plan: its nodes are referred to */
  const pl_from *f = &sub->aFrom[0];
  c0->zQual = f->zAlias ? f->zAlias : f->zTable;
  int r = jp_table_info(s, t, NULL, f->zTable, c0->zQual);
  if (r < 0) {
    jp_fail(s, "out of memory%s", "");
    return 0;
  }
  if (r || s->aTi[t].ePush == PL_PUSH_NEVER) {
    jp_fail(s, "a correlated subquery reads %s, not a csq table that pushes: SQLite plans it",
            f->zTable);
    return 0;
  }
  j->nExtra++;
  pl_jtab *jt = &j->aTab[t];
  double nEst = s->aTi[t].nRows >= 0 ? (double)s->aTi[t].nRows : 1e6;
  for (int c = 0; !bAgg && c < sub->nCol; c++) {
    int u, col;
    if (sub->aCol[c].pExpr->op == PL_E_COLUMN &&
        !jp_semi_resolve(s, t, c0->zQual, sub->aCol[c].pExpr, &u, &col)) {
      jp_fail_in(s, sub, "%s in a subquery names no column: SQLite plans the query",
                 sub->aCol[c].pExpr);
      return 0;
    }
  }
  const pl_expr *ap[JP_MAX_SEMI_TERM + 1];
  int n = jp_conjuncts(sub->pWhere, ap, 0, JP_MAX_SEMI_TERM);
  if (n > JP_MAX_SEMI_TERM) {
    jp_fail(s, "a subquery has too many terms%s", "");
    return 0;
  }
  for (int k = 0; k < n && !s->bFail; k++) {
    const pl_expr *c = ap[k];
    if ((c->op == PL_E_EQ || (bNe && c->op == PL_E_NE)) && c->pLeft->op == PL_E_COLUMN &&
        c->pRight->op == PL_E_COLUMN) {
      int t1, c1, t2, c2;
      int r1 = jp_semi_resolve(s, t, c0->zQual, c->pLeft, &t1, &c1);
      int r2 = jp_semi_resolve(s, t, c0->zQual, c->pRight, &t2, &c2);
      if (r1 + r2 == 3) { /* the subquery's column against an outer one */
        if (r1 == 2) {
          int xt = t1, xc = c1;
          t1 = t2, c1 = c2, t2 = xt, c2 = xc;
        }
        if (jp_aff(s, t1, c1) < 'C' || jp_aff(s, t2, c2) < 'C' || s->aColl[t1][c1] != 'x' ||
            s->aColl[t2][c2] != 'x') {
          jp_fail_in(s, sub,
                     "a subquery correlates by %s, not numeric BINARY columns: SQLite "
                     "plans the query",
                     c);
          return 0;
        }
        int bEq = c->op == PL_E_EQ;
        int *pn = bEq ? &c0->nKey : &c0->nNe;
        if (*pn >= PL_JOIN_MAX_KEY) {
          jp_fail(s, "a subquery has too many keys%s", "");
          return 0;
        }
        int o = jp_output(s, t, c1);
        if (o < 0) return 0;
        (bEq ? c0->aKeyOut : c0->aNeOut)[*pn] = o;
        (bEq ? c0->aKeyTab : c0->aNeTab)[*pn] = t2;
        (bEq ? c0->aKeyCol : c0->aNeCol)[*pn] = c2;
        (*pn)++;
        s->aNeed[t2][c2] = 1;
        continue;
      }
    }
    int bEmpty = 0;
    if (!jp_semi_local(s, t, c0->zQual, c) ||
        pl_split_filter(s->db, sub, &s->aTi[t], c0->zQual, NULL, 0, s->aB[t], c, &bEmpty) != 1) {
      jp_fail_in(s, sub,
                 "the correlated subquery's term %s is neither a device filter nor a key: SQLite "
                 "plans the query",
                 c);
      return 0;
    }
    c0->aFilter[c0->nFilter++] = c;
    jt->nFilter++;
    if (bEmpty) jt->bEmpty = 1;
    nEst *= jp_selectivity(c);
  }
  if (s->bFail) return 0;
  if (c0->nKey == 0) {
    jp_fail(s, "a subquery correlated other than by \"=\": SQLite plans the query%s", "");
    return 0;
  }
  jt->nEst = nEst < 1 ? 1 : (int64_t)nEst;
  return 1;
}

/* Term e of WHERE as a semi-join (EXISTS) or anti-join (NOT EXISTS): 1
** taken, 0 not (see jp_corr). */
static int jp_semi(jp *s, const pl_expr *e) {
  pl_join *j = s->j;
  int bAnti = e->op == PL_E_NOT;
  const pl_expr *x = bAnti ? e->pLeft : e;
  if (x->op != PL_E_EXISTS || !x->pLeft || x->pLeft->op != PL_E_SUBQUERY) return 0;
  if (j->nSemi >= PL_JOIN_MAX_SEMI) return 0;
  if (!jp_corr(s, x->pLeft, 1, 0)) return 0;
  pl_jsemi *qs = &j->aSemi[j->nSemi++];
  memset(qs, 0, sizeof(*qs));
  qs->bAnti = bAnti;
  qs->iTab = j->nTab + j->nExtra - 1;
  return 1;
}

/* Is a column of the subquery's table t that the aggregate reads of a
** collation other than BINARY, or no column it resolves? */
static int jp_scalar_cols_bad(jp *s, const jp_sub *c0, int t, const pl_expr *e) {
  if (!e) return 0;
  if (e->op == PL_E_COLUMN) {
    int u, c;
    return jp_semi_resolve(s, t, c0->zQual, e, &u, &c) != 1 || s->aColl[t][c] != 'x';
  }
  if (e->op == PL_E_COLLATE || e->op == PL_E_STAR || e->op == PL_E_SUBQUERY ||
      e->op == PL_E_EXISTS || e->op == PL_E_INSELECT || e->op == PL_E_PARAM)
    return 1;
  if (jp_scalar_cols_bad(s, c0, t, e->pLeft) || jp_scalar_cols_bad(s, c0, t, e->pRight) ||
      jp_scalar_cols_bad(s, c0, t, e->pExtra))
    return 1;
  for (int i = 0; i < e->nArg; i++)
    if (jp_scalar_cols_bad(s, c0, t, e->apArg[i])) return 1;
  return 0;
}

/* The columns of subquery table t that e reads, as outputs of its scan. */
static void jp_scalar_outputs(jp *s, const jp_sub *c0, int t, const pl_expr *e) {
  if (!e || s->bFail) return;
  if (e->op == PL_E_COLUMN) {
    int u, c;
    if (jp_semi_resolve(s, t, c0->zQual, e, &u, &c) == 1) jp_output(s, t, c);
    return;
  }
  jp_scalar_outputs(s, c0, t, e->pLeft);
  jp_scalar_outputs(s, c0, t, e->pRight);
  jp_scalar_outputs(s, c0, t, e->pExtra);
  for (int i = 0; i < e->nArg; i++) jp_scalar_outputs(s, c0, t, e->apArg[i]);
}

/* Scalar subquery i's keys, row-set column and the SQL of its groups. */
static void jp_scalar_plan(jp *s, int i) {
  pl_join *j = s->j;
  pl_jscalar *qs = &j->aScalar[i];
  if (qs->iTab < 0) { /* over a join: its text is made (jp_scalar_join) */
    for (int k = 0; k < qs->nKey; k++)
      qs->aKeyCol[k] = s->aColOf[s->aJsKeyTab[i][k]][s->aJsKeyCol[i][k]];
    if (j->nCol >= PL_JOIN_MAX_OUT) return jp_fail(s, "more than 64 columns%s", "");
    qs->iCol = j->nCol++;
    j->aColAff[qs->iCol] = 'A';
    j->aColColl[qs->iCol] = 'x';
    return;
  }
  const jp_sub *c0 = &s->aCorr[qs->iTab - j->nTab];
  const pl_jtab *jt = &j->aTab[qs->iTab];
  qs->nKey = c0->nKey;
  for (int k = 0; k < qs->nKey; k++) {
    qs->aKeyOut[k] = c0->aKeyOut[k];
    qs->aKeyCol[k] = s->aColOf[c0->aKeyTab[k]][c0->aKeyCol[k]];
  }
  if (j->nCol >= PL_JOIN_MAX_OUT) return jp_fail(s, "more than 64 columns%s", "");
  qs->iCol = j->nCol++;
  j->aColAff[qs->iCol] = 'A'; /* a subquery's value has no affinity */
  j->aColColl[qs->iCol] = 'x';
  sqlite3_str *pG = sqlite3_str_new(s->db), *pE = sqlite3_str_new(s->db);
  sqlite3_str_appendall(pG, "SELECT ");
  for (int k = 0; k < qs->nKey; k++) {
    int o = qs->aKeyOut[k], iChunk = jt->aChunk[o];
    char aff = iChunk == 0 ? 'D' : jp_aff(s, qs->iTab, iChunk - 1);
    sqlite3_str_appendf(pG, "csq_j." PL_JROWS_NAME_FMT ", ", aff - 'A' + 'a', 'x', o);
  }
  sqlite3_str_appendall(pG, "(");
  jp_emit_to(s, pG, c0->sub, c0->sub->aCol[0].pExpr, 0, qs->iTab);
  sqlite3_str_appendall(pG, ") FROM csq_jrows(?1) AS csq_j GROUP BY ");
  for (int k = 0; k < qs->nKey; k++) sqlite3_str_appendf(pG, "%s%d", k ? ", " : "", k + 1);
  sqlite3_str_appendall(pE, "SELECT (");
  jp_emit_to(s, pE, c0->sub, c0->sub->aCol[0].pExpr, 0, qs->iTab);
  sqlite3_str_appendall(pE, ") FROM csq_jrows(?1) AS csq_j WHERE 0");
  qs->zGroup = sqlite3_str_finish(pG);
  qs->zEmpty = sqlite3_str_finish(pE);
  if (!qs->zGroup || !qs->zEmpty) jp_fail(s, "out of memory%s", "");
}

/* Does "SELECT <zExpr> FROM <zFrom> [WHERE <zWhere>]" prepare on its own
** (every name resolves inside it)? *pStmt (if given) keeps the statement. */
static int jp_prepares(jp *s, const char *zFrom, int nFrom, const char *zSel, int nSel,
                       const char *zWhere, int nWhere, sqlite3_stmt **ppStmt) {
  char *z = sqlite3_mprintf("SELECT %.*s FROM %.*s%s%.*s", nSel, zSel, nFrom, zFrom,
                            zWhere ? " WHERE " : "", zWhere ? nWhere : 0, zWhere ? zWhere : "");
  sqlite3_stmt *pStmt = NULL;
  int rc = z ? sqlite3_prepare_v2(s->db, z, -1, &pStmt, NULL) : SQLITE_NOMEM;
  sqlite3_free(z);
  if (ppStmt)
    *ppStmt = pStmt;
  else
    sqlite3_finalize(pStmt);
  return rc == SQLITE_OK;
}

/* Is the column pStmt's one result names (a column of a table, through
** SQLite's column metadata) of numeric affinity and BINARY collation? */
static int jp_numeric_binary(jp *s, sqlite3_stmt *pStmt) {
  const char *zDb = sqlite3_column_database_name(pStmt, 0);
  const char *zTab = sqlite3_column_table_name(pStmt, 0);
  const char *zCol = sqlite3_column_origin_name(pStmt, 0);
  const char *zType = NULL, *zColl = NULL;
  int bPk = 0;
  if (!zTab || !zCol) return 0;
  if (sqlite3_table_column_metadata(s->db, zDb, zTab, zCol, &zType, &zColl, NULL, &bPk, NULL) !=
      SQLITE_OK)
    return 0;
  return pl_decl_affinity(zType) >= 'C' && (!zColl || sqlite3_stricmp(zColl, "BINARY") == 0);
}

/* A correlated scalar subquery over a join (join.h, pl_jscalar with iTab
** -1): 1 taken (or s failed with why), 0 not such a subquery (one table,
** or uncorrelated), left to jp_corr. Which names resolve inside the
** subquery SQLite decides: a term that prepares inside its FROM is the
** subquery's own; "a = b" where only a does is a key against outer
** column b. */
static int jp_scalar_join(jp *s, const pl_expr *e) {
  pl_join *j = s->j;
  sqlite3_stmt *pStmt = NULL;
  int rc = sqlite3_prepare_v2(s->db, e->z, e->n, &pStmt, NULL);
  sqlite3_finalize(pStmt);
  if (rc == SQLITE_OK) return 0; /* uncorrelated */
  pl_ast *sub = NULL;
  if (pl_parse(e->z, e->n, &sub, NULL) != PL_OK) return 0;
  if (sub->nFrom < 2) {
    pl_ast_free(sub);
    return 0;
  }
  const char *zWhy = NULL;
  const char *zFrom = sub->zSql + sub->iFromStart;
  int nFrom = sub->iFromEnd - sub->iFromStart, nKey = 0, nRes = 0, nKey0 = 0;
  const char *zKey0 = NULL;
  const pl_expr *ap[JP_MAX_SEMI_TERM + 1];
  int n = sub->pWhere ? jp_conjuncts(sub->pWhere, ap, 0, JP_MAX_SEMI_TERM) : 0;
  int iScalar = j->nScalar;
  sqlite3_str *pG = sqlite3_str_new(s->db), *pW = sqlite3_str_new(s->db);
  if (iScalar >= PL_JOIN_MAX_SCALAR)
    zWhy = "too many scalar subqueries";
  else if (!sub->bAgg || sub->nGroup || sub->pHaving || sub->pLimit || sub->nCol != 1 ||
           sub->bStar || n == 0)
    zWhy = "not one aggregate over its FROM filtered by its WHERE";
  else if (n > JP_MAX_SEMI_TERM)
    zWhy = "too many terms";
  sqlite3_str_appendall(pG, "SELECT ");
  for (int k = 0; !zWhy && k < n; k++) {
    int nT;
    const char *zT = pl_expr_text(sub, ap[k], &nT);
    if (jp_prepares(s, zFrom, nFrom, "1", 1, zT, nT, NULL)) { /* its own term */
      sqlite3_str_appendf(pW, "%s(%.*s)", nRes++ ? " AND " : " WHERE ", nT, zT);
      continue;
    }
    const pl_expr *x = ap[k]->pLeft, *y = ap[k]->pRight;
    if (ap[k]->op != PL_E_EQ || x->op != PL_E_COLUMN || y->op != PL_E_COLUMN) {
      zWhy = "correlated other than by equalities of columns";
      break;
    }
    int nX, nY;
    const char *zX = pl_expr_text(sub, x, &nX), *zY = pl_expr_text(sub, y, &nY);
    if (!jp_prepares(s, zFrom, nFrom, zX, nX, NULL, 0, NULL)) {
      const pl_expr *t0 = x;
      const char *z0 = zX;
      int n0 = nX;
      x = y, zX = zY, nX = nY;
      y = t0, zY = z0, nY = n0;
    }
    int t2 = -1, c2 = -1;
    if (!jp_prepares(s, zFrom, nFrom, zX, nX, NULL, 0, &pStmt) ||
        jp_prepares(s, zFrom, nFrom, zY, nY, NULL, 0, NULL) || jp_resolve(s, y, 0, &t2, &c2) != 1) {
      zWhy = "correlated other than by a column of it equal to an outer column";
    } else if (!jp_numeric_binary(s, pStmt) || jp_aff(s, t2, c2) < 'C' || s->aColl[t2][c2] != 'x') {
      zWhy = "correlated by columns other than numeric BINARY ones";
    } else if (nKey >= PL_JOIN_MAX_KEY) {
      zWhy = "too many keys";
    } else {
      s->aJsKeyTab[iScalar][nKey] = t2;
      s->aJsKeyCol[iScalar][nKey] = c2;
      s->aNeed[t2][c2] = 1;
      sqlite3_str_appendf(pG, "%.*s, ", nX, zX);
      if (nKey == 0) zKey0 = zX, nKey0 = nX;
      nKey++;
    }
    sqlite3_finalize(pStmt);
    pStmt = NULL;
  }
  if (!zWhy && nKey == 0) zWhy = "correlated other than by equalities of columns";
  int nV, iGroupBy = 0;
  const char *zV = zWhy ? NULL : pl_expr_text(sub, sub->aCol[0].pExpr, &nV);
  char *zWhere = sqlite3_str_finish(pW);
  if (zV) {
    sqlite3_str_appendf(pG, "(%.*s) FROM %.*s%s", nV, zV, nFrom, zFrom, zWhere ? zWhere : "");
    iGroupBy = sqlite3_str_length(pG);
    sqlite3_str_appendall(pG, " GROUP BY ");
    for (int k = 0; k < nKey; k++) sqlite3_str_appendf(pG, "%s%d", k ? ", " : "", k + 1);
  }
  char *zGroup = sqlite3_str_finish(pG);
  char *zEmpty =
      zV ? sqlite3_mprintf("SELECT (%.*s) FROM %.*s WHERE 0", nV, zV, nFrom, zFrom) : NULL;
  sqlite3_free(zWhere);
  /* the decorrelated text must stand on its own: its value reads no outer column */
  if (zV && (!zGroup || !zEmpty)) zWhy = "out of memory";
  if (!zWhy) {
    rc = sqlite3_prepare_v2(s->db, zGroup, -1, &pStmt, NULL);
    int nCol = pStmt ? sqlite3_column_count(pStmt) : 0;
    sqlite3_finalize(pStmt);
    if (rc != SQLITE_OK || nCol != nKey + 1) zWhy = "its value reads an outer column";
  }
  if (zWhy) {
    sqlite3_free(zGroup);
    sqlite3_free(zEmpty);
    char *z = sqlite3_mprintf("%.60s%s", e->z, e->n > 60 ? "..." : "");
    char *zMsg = sqlite3_mprintf("a correlated subquery over a join (%%s), %s: SQLite plans the "
                                 "query",
                                 zWhy);
    jp_fail(s, zMsg ? zMsg : "a correlated subquery (%s): SQLite plans the query", z);
    sqlite3_free(zMsg);
    sqlite3_free(z);
    pl_ast_free(sub);
    return 1;
  }
  char *zKey = nKey == 1 ? sqlite3_mprintf("%.*s", nKey0, zKey0) : NULL;
  pl_ast_free(sub);
  pl_jscalar *qs = &j->aScalar[j->nScalar++];
  memset(qs, 0, sizeof(*qs));
  qs->iTab = -1;
  qs->nKey = nKey;
  qs->zGroup = zGroup;
  qs->zEmpty = zEmpty;
  qs->zKey = zKey;
  qs->iGroupBy = iGroupBy;
  qs->bWhere = nRes > 0;
  s->apScalar[iScalar] = e;
  return 1;
}

/* Each scalar subquery inside term e (not inside EXISTS or IN (SELECT ...))
** that jp_corr takes as an aggregate grouped by its keys. */
static void jp_scalars(jp *s, const pl_expr *e) {
  if (!e || s->bFail) return;
  pl_join *j = s->j;
  if (e->op == PL_E_SUBQUERY) {
    if (jp_scalar_join(s, e)) return;
    if (j->nScalar >= PL_JOIN_MAX_SCALAR || !jp_corr(s, e, 0, 1)) return;
    int t = j->nTab + j->nExtra - 1;
    jp_sub *c0 = &s->aCorr[t - j->nTab];
    if (jp_scalar_cols_bad(s, c0, t, c0->sub->aCol[0].pExpr))
      return jp_fail_in(s, c0->sub,
                        "a correlated subquery's result %s reads a collated column or more than "
                        "its table's columns: SQLite plans the query",
                        c0->sub->aCol[0].pExpr);
    pl_jscalar *qs = &j->aScalar[j->nScalar++];
    memset(qs, 0, sizeof(*qs));
    qs->iTab = t;
    s->apScalar[j->nScalar - 1] = e;
    /* the columns its aggregate reads, as outputs of the scan */
    jp_scalar_outputs(s, c0, t, c0->sub->aCol[0].pExpr);
    return;
  }
  if (e->op == PL_E_EXISTS) return;
  if (e->op == PL_E_INSELECT) return jp_scalars(s, e->pLeft);
  jp_scalars(s, e->pLeft);
  jp_scalars(s, e->pRight);
  jp_scalars(s, e->pExtra);
  for (int i = 0; i < e->nArg; i++) jp_scalars(s, e->apArg[i]);
}

/* Are the tables every ON key of LEFT JOINed table t joins with in aIn? */
static int jp_on_keys_in(jp *s, int t, const int *aIn) {
  for (int k = 0; k < s->nTerm; k++)
    if (s->aKind[k] == JT_KEY && s->aOnOf[k] - 1 == t &&
        !aIn[s->aKeyTab[k][s->aKeyTab[k][0] == t ? 1 : 0]])
      return 0;
  return 1;
}

/* Table t's estimate after its filters, *pEst, from a sample of its rows
** when it is large enough for the guesses per term to mislead the order
** (a month of lineitem is 1%, not the 9% two range terms guess): its
** filter program run over a few row groups. Left as guessed when the
** table has no filter of its own or cannot be sampled. */
static void jp_sample(jp *s, int t, double *pEst) {
  const pl_tabinfo *ti = &s->aTi[t];
  if (!ti->xSample || ti->nRows < JP_SAMPLE_MIN_ROWS || !s->j->aTab[t].nFilter || !s->aB[t]) return;
  csq_pb *b = csq_pb_copy(s->aB[t]);
  uint8_t *p = NULL;
  size_t n = 0;
  uint64_t nIn = 0, nOut = 0;
  if (b) {
    csq_pb_drop_outputs(b);
    int slot = csq_pb_input(b, 0);
    if (slot >= 0 && csq_pb_output(b, slot) == 0 && csq_pb_finish(b, &p, &n) == 0 &&
        ti->xSample(ti->pSampleArg, p, n, &nIn, &nOut) == 0 && nIn >= JP_SAMPLE_MIN_IN)
      *pEst = (double)ti->nRows * ((double)nOut + 1) / ((double)nIn + 1);
  }
  free(p);
  csq_pb_free(b);
}

/* The probe side: the biggest table p, or a table it joins that would be
** read whole and holds more rows than p's scan will return. A build side
** is read before the probe side, so a table that nothing filters (no
** filter of its own, no other table joining it: TPC-H Q9's orders) is
** read and hashed whole, while the probe side's scan keeps only the rows
** the small tables' keys let through (the green parts' lines). When such
** a parent of p (fewer rows than p) holds more than twice the rows p's
** scan is expected to return (its estimate times the smallest share of
** its table a table joining p keeps), it probes instead: p is then built
** from the rows its other join filters keep, and its keys filter the
** parent's scan. */
static int jp_parent_probe(jp *s, int p, const double *aEst) {
  const pl_join *j = s->j;
  int nTab = j->nTab, aLink[PL_JOIN_MAX_TAB] = {0};
  double share = 1;
  for (int k = 0; k < s->nTerm; k++) {
    if (s->aKind[k] != JT_KEY || s->aOnOf[k]) continue;
    int a = s->aKeyTab[k][0], b = s->aKeyTab[k][1];
    aLink[a] |= 1 << b;
    aLink[b] |= 1 << a;
  }
  for (int t = 0; t < nTab; t++) {
    const pl_jtab *jt = &j->aTab[t];
    if (t == p || !(aLink[p] >> t & 1) || !jt->nFilter || s->aTi[t].nRows <= 0) continue;
    double x = aEst[t] / (double)s->aTi[t].nRows;
    if (x < share) share = x;
  }
  int best = p;
  for (int t = 0; t < nTab; t++) {
    const pl_jtab *jt = &j->aTab[t];
    if (t == p || jt->bLeft || jt->nFilter || aLink[t] != 1 << p) continue;
    if (s->aTi[t].nRows < 0 || s->aTi[p].nRows < 0 || s->aTi[t].nRows >= s->aTi[p].nRows) continue;
    if (aEst[t] > 2 * aEst[p] * share && (best == p || aEst[t] > aEst[best])) best = t;
  }
  return best;
}

/* Push, key or leave each term; the join order; the outputs. */
static void jp_plan(jp *s) {
  pl_ast *a = s->a;
  pl_join *j = s->j;
  int nTab = j->nTab;
  j->bStar = a->bStar;
  if (a->pWhere) jp_add_term(s, a->pWhere);
  for (int t = 0; t < nTab; t++) {
    s->iAddOn = j->aTab[t].bLeft ? t + 1 : 0;
    if (a->aFrom[t].pOn) jp_add_term(s, a->aFrom[t].pOn);
  }
  s->iAddOn = 0;
  int mLeft = 0; /* the LEFT JOINed tables */
  for (int t = 0; t < nTab; t++) mLeft |= j->aTab[t].bLeft << t;
  /* [NOT] EXISTS terms as semi- and anti-joins; the other subqueries must
  ** be uncorrelated */
  for (int k = 0; k < s->nTerm && !s->bFail; k++)
    if (!s->aOnOf[k] && jp_semi(s, s->aTerm[k])) s->aKind[k] = JT_SEMI;
  for (int k = 0; k < s->nTerm && !s->bFail; k++)
    if (!s->aOnOf[k] && s->aKind[k] != JT_SEMI) jp_scalars(s, s->aTerm[k]);
  for (int i = 0; i < a->nCol; i++) jp_check_subqueries(s, a->aCol[i].pExpr);
  for (int k = 0; k < s->nTerm; k++)
    if (s->aKind[k] != JT_SEMI) jp_check_subqueries(s, s->aTerm[k]);
  for (int i = 0; i < a->nGroup; i++) jp_check_subqueries(s, a->aGroup[i].pExpr);
  jp_check_subqueries(s, a->pHaving);
  for (int i = 0; i < a->nOrder; i++) jp_check_subqueries(s, a->aOrder[i].pExpr);
  jp_check_subqueries(s, a->pLimit);
  jp_check_subqueries(s, a->pOffset);
  if (s->bFail) return;
  if (nTab == 1 && j->nSemi == 0 && j->nScalar == 0)
    return jp_fail(s, "one table: not a join%s", "");
  /* classify */
  double aEst[PL_JOIN_MAX_TAB];
  for (int t = 0; t < nTab; t++) aEst[t] = s->aTi[t].nRows >= 0 ? (double)s->aTi[t].nRows : 1e6;
  for (int k = 0; k < s->nTerm && !s->bFail; k++) {
    const pl_expr *e = s->aTerm[k];
    if (s->aKind[k] == JT_SEMI) continue;
    int bAlias = 0, m = jp_tables(s, e, &bAlias);
    if (m < 0) break;
    s->aKind[k] = s->aImplied[k] ? JT_DROPPED : JT_RESIDUAL;
    int tOn = s->aOnOf[k] - 1;
    if (tOn >= 0) {
      /* the ON of a LEFT JOIN decides which rows of tOn match, never which
      ** rows of the others stay: keys of tOn, and filters of tOn alone */
      if (jp_key_term(s, k) && (s->aKeyTab[k][0] == tOn || s->aKeyTab[k][1] == tOn)) {
        s->aKind[k] = JT_KEY;
        continue;
      }
      if (!bAlias && m == 1 << tOn && !jp_collated(s, e)) {
        int bEmpty = 0, r = jp_push(s, tOn, s->aB[tOn], e, &bEmpty);
        if (r < 0) return jp_fail_expr(s, "the filter %s did not fit the device program", e);
        if (r == 1) {
          s->aKind[k] = JT_FILTER;
          s->aTermTab[k] = tOn;
          j->aTab[tOn].nFilter++;
          if (bEmpty) j->aTab[tOn].bEmpty = 1;
          aEst[tOn] *= jp_selectivity(e);
          continue;
        }
      }
      if (s->aImplied[k]) continue; /* implied: needed nowhere */
      return jp_fail_expr(s,
                          "the ON of a LEFT JOIN holds %s, neither a key of its table nor a "
                          "device filter of it: SQLite plans the query",
                          e);
    }
    /* a WHERE term over a LEFT JOINed table sees its NULLs: after the join */
    if (bAlias || (m & mLeft)) continue;
    if (jp_key_term(s, k)) {
      s->aKind[k] = JT_KEY;
    } else if (m && !(m & (m - 1)) && !jp_collated(s, e)) {
      int t = __builtin_ctz((unsigned)m), bEmpty = 0;
      int r = jp_push(s, t, s->aB[t], e, &bEmpty);
      if (r < 0) return jp_fail_expr(s, "the filter %s did not fit the device program", e);
      if (r == 1) {
        s->aKind[k] = JT_FILTER;
        s->aTermTab[k] = t;
        j->aTab[t].nFilter++;
        if (bEmpty) j->aTab[t].bEmpty = 1;
        if (e->op == PL_E_INSELECT) { /* about one row per value: a key, mostly */
          sqlite3_value **ap;
          int n = 0, bFit, bNull;
          jp_sub_values(s, e, &ap, &n, &bFit, &bNull);
          if (e->flags & PL_F_NOT) /* most rows, a guess */
            aEst[t] *= 0.9;
          else if (aEst[t] > n)
            aEst[t] = n;
          s->nSubPushed++;
        } else {
          aEst[t] *= jp_selectivity(e);
        }
      }
    }
  }
  if (s->bFail) return;
  for (int t = 0; t < nTab; t++) jp_sample(s, t, &aEst[t]);
  for (int t = 0; t < nTab; t++) j->aTab[t].nEst = aEst[t] < 1 ? 1 : (int64_t)aEst[t];
  /* the order: the biggest probes; then the biggest connected, in turn.
  ** The tables are read in the reverse order (planner/joinfilter.h), so
  ** the small ones are read first and their keys filter the scans of the
  ** bigger ones they join (a region's nations, their customers, those
  ** customers' orders), all before the probe side's scan takes the keys of
  ** every table it joins */
  int aIn[PL_JOIN_MAX_TAB] = {0}, iProbe = -1;
  for (int t = 0; t < nTab; t++) /* a LEFT JOINed table is never the probe side */
    if (!j->aTab[t].bLeft && (iProbe < 0 || aEst[t] > aEst[iProbe])) iProbe = t;
  if (iProbe < 0) return jp_fail(s, "internal: no table to probe with%s", "");
  iProbe = jp_parent_probe(s, iProbe, aEst);
  j->aOrder[0] = iProbe;
  aIn[iProbe] = 1;
  for (int step = 1; step < nTab; step++) {
    int best = -1;
    for (int k = 0; k < s->nTerm; k++) {
      if (s->aKind[k] != JT_KEY) continue;
      for (int side = 0; side < 2; side++) {
        int t = s->aKeyTab[k][side], o = s->aKeyTab[k][1 - side];
        if (aIn[t] || !aIn[o] || (best >= 0 && aEst[t] <= aEst[best])) continue;
        if (s->aOnOf[k] && s->aOnOf[k] - 1 != t) continue; /* its table joins by it */
        if (j->aTab[t].bLeft && !jp_on_keys_in(s, t, aIn)) continue;
        best = t;
      }
    }
    if (best < 0)
      return jp_fail(s,
                     "the join keys do not connect every table (a cross product, or a join on "
                     "non-numeric or collated columns): SQLite plans it%s",
                     "");
    pl_jtab *jt = &j->aTab[best];
    for (int k = 0; k < s->nTerm && !s->bFail; k++) {
      if (s->aKind[k] != JT_KEY) continue;
      for (int side = 0; side < 2; side++) {
        int t = s->aKeyTab[k][side], o = s->aKeyTab[k][1 - side];
        if (t != best || !aIn[o] || jt->nKey >= PL_JOIN_MAX_KEY) continue;
        if (s->aOnOf[k] && s->aOnOf[k] - 1 != t) continue;
        int x = jp_output(s, t, s->aKeyCol[k][side]);
        int y = x < 0 ? -1 : jp_output(s, o, s->aKeyCol[k][1 - side]);
        if (y < 0) return;
        jt->aKeyOut[jt->nKey] = x;
        jt->aKeyTab[jt->nKey] = o;
        jt->aKeyProbe[jt->nKey] = y;
        jt->nKey++;
        s->aUsed[k] = 1;
      }
    }
    j->aOrder[step] = best;
    aIn[best] = 1;
  }
  for (int k = 0; k < s->nTerm; k++) /* a LEFT JOIN's ON has no residual */
    if (s->aOnOf[k] && s->aKind[k] == JT_KEY && !s->aUsed[k])
      return jp_fail_expr(s, "the LEFT JOIN key %s was not used as a key: SQLite plans the query",
                          s->aTerm[k]);
  pl_join_read_order(j);
  /* the columns the host part reads */
  for (int i = 0; i < a->nCol; i++) jp_need(s, a->aCol[i].pExpr, 0);
  for (int k = 0; k < s->nTerm; k++)
    if (s->aKind[k] == JT_RESIDUAL || (s->aKind[k] == JT_KEY && !s->aUsed[k]))
      jp_need(s, s->aTerm[k], 0);
  for (int i = 0; i < a->nGroup; i++) jp_need(s, a->aGroup[i].pExpr, 0);
  jp_need(s, a->pHaving, 0);
  for (int i = 0; i < a->nOrder; i++) jp_need(s, a->aOrder[i].pExpr, 1);
  jp_need(s, a->pLimit, 0);
  jp_need(s, a->pOffset, 0);
  for (int t = 0; t < nTab && !s->bFail; t++) {
    for (int c = 0; c < s->aTi[t].nCol && !s->bFail; c++) {
      if (!s->aNeed[t][c]) continue;
      if (s->aColl[t][c] == '?')
        return jp_fail(s, "column %s has a collation csq_jrows cannot declare", s->aTi[t].azCol[c]);
      if (j->nCol >= PL_JOIN_MAX_OUT) return jp_fail(s, "more than 64 columns%s", "");
      int o = jp_output(s, t, c);
      if (o < 0) return;
      int k = j->nCol++;
      j->aTab[t].aRowCol[o] = k;
      s->aColOf[t][c] = k;
      /* the IPK column is the rowid: INTEGER */
      j->aColAff[k] = c == s->aTi[t].iIpk ? 'D' : s->aAff[t][c];
      j->aColColl[k] = s->aColl[t][c];
    }
  }
  if (s->bFail) return;
  for (int i = 0; i < j->nSemi; i++) { /* the semi-joins' outer columns, in the row set */
    pl_jsemi *qs = &j->aSemi[i];
    const jp_sub *c0 = &s->aCorr[qs->iTab - nTab];
    qs->nKey = c0->nKey;
    for (int k = 0; k < qs->nKey; k++) {
      qs->aKeyOut[k] = c0->aKeyOut[k];
      qs->aKeyCol[k] = s->aColOf[c0->aKeyTab[k]][c0->aKeyCol[k]];
    }
    qs->nNe = c0->nNe;
    for (int k = 0; k < qs->nNe; k++) {
      qs->aNeOut[k] = c0->aNeOut[k];
      qs->aNeCol[k] = s->aColOf[c0->aNeTab[k]][c0->aNeCol[k]];
    }
  }
  for (int i = 0; i < j->nScalar && !s->bFail; i++) jp_scalar_plan(s, i);
  jp_host(s);
  /* every table's program again, left open for join filters */
  for (int t = 0; t < nTab; t++) {
    int bEmpty = 0;
    if (!(j->apB[t] = csq_pb_new())) return jp_fail(s, "out of memory%s", "");
    for (int k = 0; k < s->nTerm; k++) {
      if (s->aKind[k] != JT_FILTER || s->aTermTab[k] != t) continue;
      if (jp_push(s, t, j->apB[t], s->aTerm[k], &bEmpty) != 1)
        return jp_fail(s, "internal: the filters of %s changed", j->aTab[t].zTable);
    }
    for (int o = 0; o < j->aTab[t].nOut; o++) {
      int slot = csq_pb_input(j->apB[t], (uint32_t)j->aTab[t].aChunk[o]);
      if (slot < 0 || csq_pb_output(j->apB[t], slot) < 0)
        return jp_fail(s, "program limit reached%s", "");
    }
  }
  for (int x = 0; x < j->nExtra; x++) {
    int t = nTab + x, bEmpty = 0;
    const jp_sub *c0 = &s->aCorr[x];
    if (!(j->apB[t] = csq_pb_new())) return jp_fail(s, "out of memory%s", "");
    for (int k = 0; k < c0->nFilter; k++)
      if (pl_split_filter(s->db, c0->sub, &s->aTi[t], c0->zQual, NULL, 0, j->apB[t], c0->aFilter[k],
                          &bEmpty) != 1)
        return jp_fail(s, "internal: the filters of %s changed", j->aTab[t].zTable);
    for (int o = 0; o < j->aTab[t].nOut; o++) {
      int slot = csq_pb_input(j->apB[t], (uint32_t)j->aTab[t].aChunk[o]);
      if (slot < 0 || csq_pb_output(j->apB[t], slot) < 0)
        return jp_fail(s, "program limit reached%s", "");
    }
  }
}

int pl_join_plan(sqlite3 *db, const char *zSql, sqlite3_value **aParam, int nParam,
                 pl_lookup_fn xLookup, pl_coll_fn xColl, pl_rows_fn xRows, void *pArg,
                 pl_join **ppJoin) {
  pl_join *j = sqlite3_malloc64(sizeof(*j));
  *ppJoin = j;
  if (!j) return SQLITE_NOMEM;
  memset(j, 0, sizeof(*j));
  jp s;
  memset(&s, 0, sizeof(s));
  s.db = db;
  s.j = j;
  s.aParam = aParam;
  s.nParam = nParam;
  pl_err err;
  int rc = pl_parse_opt(zSql, -1, PL_PARSE_SUBQUERY, &s.a, &err);
  if (rc == PL_NOMEM) return SQLITE_NOMEM;
  if (rc != PL_OK) {
    snprintf(j->zWhy, sizeof(j->zWhy), "%s: %s",
             rc == PL_SYNTAX ? "not parsed" : "outside the pushdown subset", err.zMsg);
    return SQLITE_OK;
  }
  rc = SQLITE_OK;
  s.xLookup = xLookup;
  s.xColl = xColl;
  s.xRows = xRows;
  s.pLookupArg = pArg;
  if (s.a->nFrom < 2 && !pl_join_has_exists(s.a->pWhere) && !jp_has_scalar(s.a->pWhere)) {
    jp_fail(&s, "one table: not a join%s", "");
  } else if (s.a->nFrom > PL_JOIN_MAX_TAB) {
    jp_fail(&s, "more than 8 tables%s", "");
  } else {
    j->nTab = s.a->nFrom;
    rc = jp_tables_info(&s);
    s.pHost = sqlite3_str_new(db);
    if (rc == SQLITE_OK && !s.bFail) jp_plan(&s);
  }
  char *zHost = s.pHost ? sqlite3_str_finish(s.pHost) : NULL;
  for (int t = 0; rc == SQLITE_OK && !s.bFail && t < j->nTab + j->nExtra; t++) {
    uint8_t *pProg = NULL;
    size_t nProg = 0;
    if (csq_pb_finish(s.aB[t], &pProg, &nProg) < 0) {
      jp_fail(&s, "the device program of %s could not be built", j->aTab[t].zTable);
      break;
    }
    j->aTab[t].pProg = sqlite3_malloc64(nProg ? nProg : 1);
    if (!j->aTab[t].pProg)
      rc = SQLITE_NOMEM;
    else
      memcpy(j->aTab[t].pProg, pProg, nProg);
    j->aTab[t].nProg = nProg;
    free(pProg);
  }
  if (rc == SQLITE_OK && !s.bFail && !zHost) rc = SQLITE_NOMEM;
  for (int i = 0; rc == SQLITE_OK && !s.bFail && i < j->nValue; i++)
    if (s.apValAst[i] && jp_value_rows(&s, i, zHost)) rc = SQLITE_NOMEM;
  int bKey = rc == SQLITE_OK && !s.bFail ? jp_key_group(&s) : 0;
  if (bKey > 0) j->zHostKey = jp_key_host(&s, zHost);
  if (bKey < 0 || (bKey > 0 && !j->zHostKey)) rc = SQLITE_NOMEM;
  if (rc == SQLITE_OK && !s.bFail) {
    j->bPlan = 1;
    j->zHost = zHost;
    zHost = NULL;
    snprintf(
        j->zWhy, sizeof(j->zWhy),
        "hash join of %d csq table(s)%s%s: filters and projections on the devices, %d "
        "residual term(s) and the rest in SQLite%s",
        j->nTab, j->nSemi ? " with semi- and anti-joins for [NOT] EXISTS" : "",
        j->nScalar ? " with correlated scalar subqueries as grouped aggregates" : "", j->nResidual,
        s.nSubPushed ? "; IN subqueries run first, their values filtering on the devices" : "");
  }
  sqlite3_free(zHost);
  for (int i = 0; i < PL_JOIN_MAX_VALUE; i++) pl_ast_free(s.apValAst[i]);
  for (int i = 0; i < s.nImplied; i++) {
    free(s.apImplied[i]->apArg);
    free(s.apImplied[i]);
  }
  for (int i = 0; i < s.nSub; i++) {
    for (int k = 0; k < s.anSubVal[i]; k++) sqlite3_value_free(s.aaSubVal[i][k]);
    sqlite3_free(s.aaSubVal[i]);
  }
  for (int x = 0; x < PL_JOIN_MAX_TAB; x++) pl_ast_free(s.aCorr[x].sub);
  for (int t = 0; t < PL_JOIN_MAX_TAB; t++) {
    csq_pb_free(s.aB[t]);
    free(s.aazCol[t]);
    free(s.aAff[t]);
    free(s.aColl[t]);
    free(s.aNeed[t]);
    free(s.aColOf[t]);
  }
  pl_ast_free(s.a);
  return rc;
}

void pl_join_free(pl_join *p) {
  if (!p) return;
  for (int i = 0; i < p->nValue; i++) sqlite3_free(p->azValue[i]);
  for (int i = 0; i < p->nValue; i++) sqlite3_free(p->azValueRows[i]);
  for (int i = 0; i < p->nScalar; i++) {
    sqlite3_free(p->aScalar[i].zGroup);
    sqlite3_free(p->aScalar[i].zEmpty);
    sqlite3_free(p->aScalar[i].zKey);
  }
  for (int t = 0; t < PL_JOIN_MAX_TAB; t++) {
    sqlite3_free(p->aTab[t].zDb);
    sqlite3_free(p->aTab[t].zTable);
    sqlite3_free(p->aTab[t].zName);
    sqlite3_free(p->aTab[t].pProg);
  }
  sqlite3_free(p->zHost);
  sqlite3_free(p->zHostKey);
  sqlite3_free(p->zKeyName);
  sqlite3_free(p->zInner);
  sqlite3_free(p->zOuterSql);
  for (int t = 0; t < PL_JOIN_MAX_TAB; t++) csq_pb_free(p->apB[t]);
  sqlite3_free(p);
}
