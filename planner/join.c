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
#include "planner/parse.h"
#include "device/format/program.h"

#ifndef SQLITE_CORE
extern const sqlite3_api_routines *sqlite3_api;
#endif

#define JP_MAX_TERM 256
#define JP_MAX_SUB  16 /* IN subqueries run first, as device filters */
/* Values of one IN subquery pushed at most: a program's constants, less
** room for its other filters; a join filter that no longer fits is left
** out (joinfilter.h), which costs rows on the link, never an answer. */
#define JP_SUB_MAX_VALUES (CSQ_PROG_MAX_CONSTS - 1024)

enum { JT_RESIDUAL = 0, JT_FILTER, JT_KEY, JT_DROPPED };
#define JP_MAX_IMPLIED 16 /* filters implied by an OR, per query */

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
  uint8_t aImplied[JP_MAX_TERM]; /* an implied filter: pushed, or dropped (JT_DROPPED) */
  int nTerm;
  pl_expr *apImplied[JP_MAX_IMPLIED]; /* their nodes (children borrowed from the AST) */
  int nImplied;
  const pl_expr *aSub[JP_MAX_SUB];      /* "x IN (SELECT ...)" terms run at planning ... */
  sqlite3_value **aaSubVal[JP_MAX_SUB]; /* ... their values (not NULL) ... */
  int anSubVal[JP_MAX_SUB];
  int abSubFit[JP_MAX_SUB]; /* ... 0: too many to push, or not one column */
  int nSub;
  int nSubPushed;                  /* of them pushed as filters */
  uint8_t *aNeed[PL_JOIN_MAX_TAB]; /* column c of table t is read by the host part */
  int *aColOf[PL_JOIN_MAX_TAB];    /* row-set column of table t's column c, or -1 */
  sqlite3_str *pHost;
} jp;

static void jp_fail(jp *s, const char *zFmt, const char *zArg) {
  if (s->bFail) return;
  s->bFail = 1;
  snprintf(s->j->zWhy, sizeof(s->j->zWhy), zFmt, zArg ? zArg : "");
}

static void jp_fail_expr(jp *s, const char *zFmt, const pl_expr *e) {
  int n = 0;
  const char *z = pl_expr_text(s->a, e, &n);
  char *zText = sqlite3_mprintf("%.*s", n, z);
  jp_fail(s, zFmt, zText);
  sqlite3_free(zText);
}

/* The name FROM item i goes by. */
static const char *jp_qual(jp *s, int i) {
  const pl_from *f = &s->a->aFrom[i];
  return f->zAlias ? f->zAlias : f->zTable;
}

/* Resolve column reference e as SQLite would: 1 with *piTab, *piCol; 0 if
** it names no table column but a result column's alias (left to SQLite as
** written); -1 (and s fails) otherwise. bOrder: an ORDER BY term, where an
** alias wins over a column. */
static int jp_resolve(jp *s, const pl_expr *e, int bOrder, int *piTab, int *piCol) {
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
  jp_fail_expr(s,
               nFound ? "the column %s is ambiguous"
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

/* Is e "a.x = b.y" between two tables, both numeric and BINARY? Then 1 with
** the pairs in term k. */
static int jp_key_term(jp *s, int k) {
  const pl_expr *e = s->aTerm[k];
  if (e->op != PL_E_EQ || e->pLeft->op != PL_E_COLUMN || e->pRight->op != PL_E_COLUMN) return 0;
  int t1, c1, t2, c2;
  if (jp_resolve(s, e->pLeft, 0, &t1, &c1) != 1 || jp_resolve(s, e->pRight, 0, &t2, &c2) != 1)
    return 0;
  if (t1 == t2) return 0;
  char f1 = s->aAff[t1][c1], f2 = s->aAff[t2][c2];
  if (f1 < 'C' || f2 < 'C' || s->aColl[t1][c1] != 'x' || s->aColl[t2][c2] != 'x') return 0;
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

/* The non-NULL values of uncorrelated subquery term e ("x IN (SELECT
** ...)"), run once per plan: *pap (owned by s) and *pn, *pbFit 0 when there
** are more than JP_SUB_MAX_VALUES or the subquery does not give one column.
** Returns SQLITE_OK or SQLite's error (s fails with its message). */
static int jp_sub_values(jp *s, const pl_expr *e, sqlite3_value ***pap, int *pn, int *pbFit) {
  for (int i = 0; i < s->nSub; i++)
    if (s->aSub[i] == e) {
      *pap = s->aaSubVal[i];
      *pn = s->anSubVal[i];
      *pbFit = s->abSubFit[i];
      return SQLITE_OK;
    }
  *pap = NULL;
  *pn = 0;
  *pbFit = 0;
  if (s->nSub >= JP_MAX_SUB) return SQLITE_OK;
  int iSub = s->nSub++;
  s->aSub[iSub] = e;
  sqlite3_stmt *pStmt = NULL;
  const pl_expr *q = e->pRight;
  int rc = sqlite3_prepare_v2(s->db, q->z, q->n, &pStmt, NULL);
  sqlite3_value **ap = NULL;
  int n = 0, bFit = rc == SQLITE_OK && sqlite3_column_count(pStmt) == 1;
  while (bFit && (rc = sqlite3_step(pStmt)) == SQLITE_ROW) {
    sqlite3_value *v = sqlite3_column_value(pStmt, 0);
    if (sqlite3_value_type(v) == SQLITE_NULL) continue; /* never makes IN true */
    if (n >= JP_SUB_MAX_VALUES) {
      bFit = 0;
      break;
    }
    if (n % 64 == 0) {
      sqlite3_value **apNew = sqlite3_realloc64(ap, sizeof(*ap) * (size_t)(n + 64));
      if (!apNew) {
        rc = SQLITE_NOMEM;
        break;
      }
      ap = apNew;
    }
    if (!(ap[n] = sqlite3_value_dup(v))) {
      rc = SQLITE_NOMEM;
      break;
    }
    n++;
  }
  if (rc == SQLITE_DONE || (rc == SQLITE_ROW && !bFit)) rc = SQLITE_OK;
  if (rc != SQLITE_OK && !s->bFail) {
    s->bFail = 1;
    snprintf(s->j->zWhy, sizeof(s->j->zWhy), "the subquery failed: %s", sqlite3_errmsg(s->db));
  }
  sqlite3_finalize(pStmt);
  if (rc != SQLITE_OK || !bFit) {
    for (int i = 0; i < n; i++) sqlite3_value_free(ap[i]);
    sqlite3_free(ap);
    ap = NULL;
    n = 0;
  }
  s->aaSubVal[iSub] = ap;
  s->anSubVal[iSub] = n;
  s->abSubFit[iSub] = *pbFit = rc == SQLITE_OK && bFit;
  *pap = ap;
  *pn = n;
  return rc;
}

/* A device filter for "x IN (SELECT ...)" over table t: the subquery's
** values as an IN list. Exact when x has numeric affinity: SQLite then
** compares with numeric affinity applied to the values (PL_AFF_NUMERIC
** does the same), and a NULL among them cannot make a WHERE term true.
** 1 pushed, 0 not (the term stays for SQLite), -1 the program is full. */
static int jp_push_in_select(jp *s, int t, csq_pb *b, const pl_expr *e, int *pbEmpty) {
  int tCol, c;
  if ((e->flags & PL_F_NOT) || e->pLeft->op != PL_E_COLUMN ||
      jp_resolve(s, e->pLeft, 0, &tCol, &c) != 1 || tCol != t)
    return 0;
  char aff = c == s->aTi[t].iIpk ? 'D' : s->aAff[t][c];
  if (aff < 'C') return 0;
  sqlite3_value **ap = NULL;
  int n = 0, bFit = 0;
  if (jp_sub_values(s, e, &ap, &n, &bFit) != SQLITE_OK || !bFit) return 0;
  pl_cons cons;
  memset(&cons, 0, sizeof(cons));
  cons.iChunk = c == s->aTi[t].iIpk ? 0 : c + 1;
  cons.op = CSQ_OP_IN;
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

/* The host text of e, column references replaced by row-set columns. */
static void jp_emit(jp *s, const pl_expr *e, int bOrder) {
  if (s->bFail) return;
  if (e->op == PL_E_COLUMN) {
    int t, c, r = jp_resolve(s, e, bOrder, &t, &c);
    if (r < 0) return;
    if (r == 0) { /* an alias, as written */
      int n = 0;
      const char *z = pl_expr_text(s->a, e, &n);
      sqlite3_str_append(s->pHost, z, n);
      return;
    }
    int k = s->aColOf[t][c];
    if (k < 0) return jp_fail_expr(s, "internal: column %s not planned", e);
    sqlite3_str_appendf(s->pHost, "csq_j." PL_JROWS_NAME_FMT, s->j->aColAff[k] - 'A' + 'a',
                        s->j->aColColl[k], k);
    return;
  }
  if (e->op == PL_E_PARAM) {
    sqlite3_str_appendf(s->pHost, "?%d", (int)e->iVal);
    return;
  }
  if (e->op == PL_E_STAR) { /* its columns in order, as SQLite expands it */
    int t0 = e->zTab ? jp_star_table(s, e) : 0, t1 = e->zTab ? t0 + 1 : s->j->nTab, n = 0;
    for (int t = t0; t >= 0 && t < t1; t++)
      for (int c = 0; c < s->aTi[t].nCol; c++) {
        int k = s->aColOf[t][c];
        if (k < 0) return jp_fail(s, "internal: a column of * not planned%s", "");
        sqlite3_str_appendf(s->pHost, "%scsq_j." PL_JROWS_NAME_FMT, n++ ? ", " : "",
                            s->j->aColAff[k] - 'A' + 'a', s->j->aColColl[k], k);
      }
    return;
  }
  const pl_expr *aChild[64];
  int n = 0;
  if (e->nArg + 3 > 64) return jp_fail(s, "expression too wide%s", "");
  if (e->pLeft) aChild[n++] = e->pLeft;
  if (e->pRight) aChild[n++] = e->pRight;
  if (e->pExtra) aChild[n++] = e->pExtra;
  for (int i = 0; i < e->nArg; i++) aChild[n++] = e->apArg[i];
  for (int i = 1; i < n; i++) /* insertion sort by position */
    for (int j = i; j > 0 && aChild[j]->iStart < aChild[j - 1]->iStart; j--) {
      const pl_expr *x = aChild[j];
      aChild[j] = aChild[j - 1];
      aChild[j - 1] = x;
    }
  int at = e->iStart;
  for (int i = 0; i < n; i++) {
    sqlite3_str_append(s->pHost, s->a->zSql + at, aChild[i]->iStart - at);
    /* a subquery keeps its own parentheses: "x IN ((SELECT ...))" would
    ** compare with its first row only */
    int bParen = aChild[i]->op != PL_E_SUBQUERY;
    if (bParen) sqlite3_str_appendchar(s->pHost, 1, '(');
    jp_emit(s, aChild[i], bOrder);
    if (bParen) sqlite3_str_appendchar(s->pHost, 1, ')');
    at = aChild[i]->iEnd;
  }
  sqlite3_str_append(s->pHost, s->a->zSql + at, e->iEnd - at);
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
  sqlite3_str_appendf(s->pHost, " FROM csq_jrows(?%d) AS csq_j", j->iRows);
  int nRes = 0;
  for (int k = 0; k < s->nTerm; k++) {
    if (s->aKind[k] == JT_FILTER || s->aKind[k] == JT_DROPPED ||
        (s->aKind[k] == JT_KEY && s->aUsed[k]))
      continue;
    sqlite3_str_appendall(s->pHost, nRes++ ? " AND (" : " WHERE (");
    jp_emit(s, s->aTerm[k], 0);
    sqlite3_str_appendchar(s->pHost, 1, ')');
  }
  j->nResidual = nRes;
  for (int i = 0; i < a->nGroup; i++) {
    sqlite3_str_appendall(s->pHost, i ? ", (" : " GROUP BY (");
    jp_emit(s, a->aGroup[i].pExpr, 0);
    sqlite3_str_appendchar(s->pHost, 1, ')');
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

/* Look up every FROM item; copy what planning needs. */
static int jp_tables_info(jp *s, pl_lookup_fn xLookup, pl_coll_fn xColl, void *pArg) {
  pl_ast *a = s->a;
  for (int t = 0; t < a->nFrom && !s->bFail; t++) {
    const pl_from *f = &a->aFrom[t];
    pl_tabinfo *ti = &s->aTi[t];
    ti->ePush = PL_PUSH_AUTO;
    ti->nRows = -1;
    ti->nEngines = -1;
    if (f->eJoin == PL_JOIN_LEFT) {
      jp_fail(s, "LEFT JOIN %s: outer joins stay with SQLite", f->zTable);
      break;
    }
    if (xLookup(pArg, f->zDb, f->zTable, ti) != 0) {
      jp_fail(s, "%s is not a csq table: a join with a native table stays with SQLite", f->zTable);
      break;
    }
    if (ti->ePush == PL_PUSH_NEVER) {
      jp_fail(s, "%s says pushdown='never'", f->zTable);
      break;
    }
    int n = ti->nCol;
    s->aazCol[t] = malloc(sizeof(char *) * (size_t)(n ? n : 1));
    s->aAff[t] = malloc((size_t)n + 1);
    s->aColl[t] = malloc((size_t)n + 1);
    s->aNeed[t] = calloc((size_t)n + 1, 1);
    s->aColOf[t] = malloc(sizeof(int) * (size_t)(n + 1));
    if (!s->aazCol[t] || !s->aAff[t] || !s->aColl[t] || !s->aNeed[t] || !s->aColOf[t])
      return SQLITE_NOMEM;
    for (int c = 0; c < n; c++) {
      s->aazCol[t][c] = ti->azCol[c];
      s->aAff[t][c] = ti->aAff[c];
      s->aColOf[t][c] = -1;
      s->aColl[t][c] = 'x';
      if (ti->aColl && ti->aColl[c]) {
        const char *z = xColl ? xColl(pArg, f->zDb, f->zTable, c) : NULL;
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
    jt->zDb = f->zDb ? sqlite3_mprintf("%s", f->zDb) : NULL;
    jt->zTable = sqlite3_mprintf("%s", f->zTable);
    jt->zName = sqlite3_mprintf("%s", jp_qual(s, t));
    if ((f->zDb && !jt->zDb) || !jt->zTable || !jt->zName) return SQLITE_NOMEM;
    jt->nRows = ti->nRows;
    if (!(s->aB[t] = csq_pb_new())) return SQLITE_NOMEM;
  }
  return SQLITE_OK;
}

/* Push, key or leave each term; the join order; the outputs. */
static void jp_plan(jp *s) {
  pl_ast *a = s->a;
  pl_join *j = s->j;
  int nTab = j->nTab;
  j->bStar = a->bStar;
  for (int i = 0; i < a->nCol; i++) jp_check_subqueries(s, a->aCol[i].pExpr);
  jp_check_subqueries(s, a->pWhere);
  for (int t = 0; t < nTab; t++) jp_check_subqueries(s, a->aFrom[t].pOn);
  for (int i = 0; i < a->nGroup; i++) jp_check_subqueries(s, a->aGroup[i].pExpr);
  jp_check_subqueries(s, a->pHaving);
  for (int i = 0; i < a->nOrder; i++) jp_check_subqueries(s, a->aOrder[i].pExpr);
  jp_check_subqueries(s, a->pLimit);
  jp_check_subqueries(s, a->pOffset);
  if (s->bFail) return;
  if (a->pWhere) jp_add_term(s, a->pWhere);
  for (int t = 0; t < nTab; t++)
    if (a->aFrom[t].pOn) jp_add_term(s, a->aFrom[t].pOn);
  /* classify */
  double aEst[PL_JOIN_MAX_TAB];
  for (int t = 0; t < nTab; t++) aEst[t] = s->aTi[t].nRows >= 0 ? (double)s->aTi[t].nRows : 1e6;
  for (int k = 0; k < s->nTerm && !s->bFail; k++) {
    const pl_expr *e = s->aTerm[k];
    int bAlias = 0, m = jp_tables(s, e, &bAlias);
    if (m < 0) break;
    s->aKind[k] = s->aImplied[k] ? JT_DROPPED : JT_RESIDUAL;
    if (bAlias) continue;
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
          int n = 0, bFit;
          jp_sub_values(s, e, &ap, &n, &bFit);
          if (aEst[t] > n) aEst[t] = n;
          s->nSubPushed++;
        } else {
          aEst[t] *= jp_selectivity(e);
        }
      }
    }
  }
  if (s->bFail) return;
  for (int t = 0; t < nTab; t++) j->aTab[t].nEst = aEst[t] < 1 ? 1 : (int64_t)aEst[t];
  /* the order: the biggest probes; then the smallest connected, in turn */
  int aIn[PL_JOIN_MAX_TAB] = {0}, iProbe = 0;
  for (int t = 1; t < nTab; t++)
    if (aEst[t] > aEst[iProbe]) iProbe = t;
  j->aOrder[0] = iProbe;
  aIn[iProbe] = 1;
  for (int step = 1; step < nTab; step++) {
    int best = -1;
    for (int k = 0; k < s->nTerm; k++) {
      if (s->aKind[k] != JT_KEY) continue;
      for (int side = 0; side < 2; side++) {
        int t = s->aKeyTab[k][side], o = s->aKeyTab[k][1 - side];
        if (!aIn[t] && aIn[o] && (best < 0 || aEst[t] < aEst[best])) best = t;
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
}

int pl_join_plan(sqlite3 *db, const char *zSql, sqlite3_value **aParam, int nParam,
                 pl_lookup_fn xLookup, pl_coll_fn xColl, void *pArg, pl_join **ppJoin) {
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
  if (s.a->nFrom < 2) {
    jp_fail(&s, "one table: not a join%s", "");
  } else if (s.a->nFrom > PL_JOIN_MAX_TAB) {
    jp_fail(&s, "more than 8 tables%s", "");
  } else {
    j->nTab = s.a->nFrom;
    rc = jp_tables_info(&s, xLookup, xColl, pArg);
    s.pHost = sqlite3_str_new(db);
    if (rc == SQLITE_OK && !s.bFail) jp_plan(&s);
  }
  char *zHost = s.pHost ? sqlite3_str_finish(s.pHost) : NULL;
  for (int t = 0; rc == SQLITE_OK && !s.bFail && t < j->nTab; t++) {
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
  if (rc == SQLITE_OK && !s.bFail) {
    j->bPlan = 1;
    j->zHost = zHost;
    zHost = NULL;
    snprintf(j->zWhy, sizeof(j->zWhy),
             "hash join of %d csq tables: filters and projections on the devices, %d residual "
             "term(s) and the rest in SQLite%s",
             j->nTab, j->nResidual,
             s.nSubPushed ? "; IN subqueries run first, their values filtering on the devices"
                          : "");
  }
  sqlite3_free(zHost);
  for (int i = 0; i < s.nImplied; i++) {
    free(s.apImplied[i]->apArg);
    free(s.apImplied[i]);
  }
  for (int i = 0; i < s.nSub; i++) {
    for (int k = 0; k < s.anSubVal[i]; k++) sqlite3_value_free(s.aaSubVal[i][k]);
    sqlite3_free(s.aaSubVal[i]);
  }
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
  for (int t = 0; t < PL_JOIN_MAX_TAB; t++) {
    sqlite3_free(p->aTab[t].zDb);
    sqlite3_free(p->aTab[t].zTable);
    sqlite3_free(p->aTab[t].zName);
    sqlite3_free(p->aTab[t].pProg);
  }
  sqlite3_free(p->zHost);
  for (int t = 0; t < PL_JOIN_MAX_TAB; t++) csq_pb_free(p->apB[t]);
  sqlite3_free(p);
}
