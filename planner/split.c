/*
** planner/split.c - the split of an aggregate SELECT between device and
** host; see split.h for the model.
**
** What goes to the device, and why it is exact:
**   WHERE: a conjunction of terms "column op constant" (= == != <> < <= > >=
**     IS, IS NOT), "column [NOT] NULL", "column IN (constants)" and "column
**     BETWEEN constant AND constant". A constant is a literal, a parameter,
**     or an expression of literals and deterministic functions (folded by
**     SQLite itself, e.g. date('1998-12-01', '-90 days')); none of these has
**     an affinity, so SQLite compares the column with the value converted by
**     the column's affinity - which planner/filter.c does too. COLLATE other
**     than the default, LIKE, OR, and anything else keep the query on the
**     host: a filter under an aggregate must be exact.
**     csq_bpf('name', args...) and csq_bpf_col(col, 'name') over columns and
**     constants: an eBPF term (program.h, EBPF TERMS), the same program and
**     slots the host function would use, so exact too. As a GROUP BY key or
**     an aggregate's whole argument (sum(csq_bpf(...))), the same call is a
**     CSQ_EX_BPF expression: an INTEGER per row.
**     "column op column" over two columns of the table (the rowid too): a
**     column comparison term (program.h, COLUMN COMPARISONS) when SQLite
**     would convert neither value first (both columns of one affinity, or
**     both numeric: sp_cmp_exact) and compares under BINARY, NOCASE or
**     RTRIM (an explicit COLLATE; a column declaring a collation keeps the
**     query on the host, as everywhere here). A query without aggregates
**     whose WHERE holds one, like one that calls csq_bpf, gets a row plan
**     (sp_plan_rows): SQLite could offer the table neither.
**     "substr(column, p[, n]) [NOT] IN ('L', ...)" (or = / <> 'L'), L
**     ASCII: GLOBs of the column's text (pl_substr_glob), exact because
**     SQLite compares substr's TEXT, without affinity, BINARY, with L.
**   GROUP BY keys and aggregate arguments: columns, numeric literals and
**     + - * / and unary minus over columns of numeric affinity (the device
**     does SQLite's integer/real arithmetic; text would need SQLite's
**     text-to-number conversion). count(*), count, sum, total, avg, min,
**     max; count(DISTINCT x) of one x, beside any of them but avg
**     (sp_distinct).
** GROUP BY keys: see sp_key_ok.
** The host part is the query's own text with each aggregate call and group
** key replaced by its column of the merged rows; a column outside an
** aggregate must be a group key. A group key compared in the host part
** keeps the query on the host unless its column has no affinity (the merged
** rows carry none, and the affinity would change the comparison).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "planner/split.h"
#include "planner/filter.h"
#include "planner/parse.h"
#include "device/format/bpf.h"
#include "device/format/program.h"

#ifndef SQLITE_CORE
extern const sqlite3_api_routines *sqlite3_api;
#endif

#define SP_MAX_KEY 8
#define SP_MAX_AGG 64

typedef struct sp {
  sqlite3 *db;
  pl_ast *a;
  pl_tabinfo ti;
  sqlite3_value **aParam;
  int nParam;
  csq_pb *b;
  pl_plan *p;
  int bFail;  /* not splittable: p->zWhy says why */
  int bTyped; /* the host reads csq_jrows, each column with its affinity */
  const pl_expr *aKey[SP_MAX_KEY];
  char aKeyAff[SP_MAX_KEY];
  int nKey;
  const pl_expr *aAgg[SP_MAX_AGG];
  int nAgg;
  /* count(DISTINCT x): x (one x per query); aFn[k]: aggregate k's program
  ** function, 0 for count(DISTINCT x) (not in the program) */
  const pl_expr *pDistinct;
  int aFn[SP_MAX_AGG];
  int nTerm;
  sqlite3_str *pHost;
  sqlite3_str *pBpf; /* the eBPF calls the program runs, for csq_explain */
  sqlite3_str *pCmp; /* the column comparisons it runs, for csq_explain (or NULL) */
  /* a row plan (sp_plan_rows): output 0 is the rowid (aKey[0] NULL, nKey
  ** 1), output 1 + k column chunk aRowChunk[k] (aAgg[k], nAgg of them) */
  int bRows;
  int aRowChunk[SP_MAX_AGG];
  const char *zQual; /* the name the table goes by, if not a's only table (pl_split_filter) */
  /* While bCond: constraints become CASE conditions (sp_case_when), into
  ** aCond (bNever: one can never be true), not filter clauses */
  int bCond, nCond, bNever;
  int aCond[2];
  pl_plan dummy; /* pl_split_filter's p */
} sp;

static void sp_fail(sp *s, const char *zFmt, const char *zArg) {
  if (s->bFail) return;
  s->bFail = 1;
  snprintf(s->p->zWhy, sizeof(s->p->zWhy), zFmt, zArg ? zArg : "");
}

/* Text of e, as a new string (for messages). */
static char *sp_text(sp *s, const pl_expr *e) {
  int n = 0;
  const char *z = pl_expr_text(s->a, e, &n);
  return sqlite3_mprintf("%.*s", n, z);
}

static void sp_fail_expr(sp *s, const char *zFmt, const pl_expr *e) {
  char *z = sp_text(s, e);
  sp_fail(s, zFmt, z);
  sqlite3_free(z);
}

/* The chunk of a column reference (0 = rowid) and its affinity, or -1. */
static int sp_column(sp *s, const pl_expr *e, char *pAff) {
  if (e->op != PL_E_COLUMN) return -1;
  const char *zQual = s->zQual ? s->zQual : s->a->zAlias ? s->a->zAlias : s->a->zTable;
  if (e->zTab && sqlite3_stricmp(e->zTab, zQual) != 0) return -1;
  for (int i = 0; i < s->ti.nCol; i++) {
    if (sqlite3_stricmp(s->ti.azCol[i], e->zName) == 0) {
      if (i == s->ti.iIpk) {
        *pAff = 'D';
        return 0;
      }
      *pAff = s->ti.aAff[i];
      /* the device groups, compares and orders text BINARY; a column that
      ** declares another collation makes SQLite do all three its way */
      if (s->ti.aColl && s->ti.aColl[i])
        sp_fail(s, "column %s declares a collation other than BINARY", s->ti.azCol[i]);
      return i + 1;
    }
  }
  if (!(e->flags & PL_F_QUOTED) &&
      (sqlite3_stricmp(e->zName, "rowid") == 0 || sqlite3_stricmp(e->zName, "oid") == 0 ||
       sqlite3_stricmp(e->zName, "_rowid_") == 0)) {
    *pAff = 'D';
    return 0;
  }
  return -1;
}

/* Deterministic scalar functions whose value SQLite computes once. */
static int sp_det_func(const char *z) {
  static const char *const az[] = {"date",  "time",     "datetime", "julianday", "strftime",
                                   "abs",   "lower",    "upper",    "substr",    "length",
                                   "round", "coalesce", "ifnull",   "nullif",    "trim",
                                   "ltrim", "rtrim",    "replace",  "printf",    "char",
                                   "hex",   "instr",    "unicode",  "unixepoch", 0};
  for (int i = 0; az[i]; i++)
    if (strcmp(az[i], z) == 0) return 1;
  return 0;
}

/* 1 if e is a constant without affinity that SQLite evaluates once. */
static int sp_is_const(const pl_expr *e, int bTop) {
  switch (e->op) {
  case PL_E_INT:
  case PL_E_REAL:
  case PL_E_STR:
  case PL_E_BLOB:
  case PL_E_NULL:
    return 1;
  case PL_E_PARAM:
    return bTop; /* inside an expression it would need renumbering */
  case PL_E_FUNC:
    if (!sp_det_func(e->zName)) return 0;
    for (int i = 0; i < e->nArg; i++)
      if (!sp_is_const(e->apArg[i], 0)) return 0;
    return 1;
  case PL_E_ADD:
  case PL_E_SUB:
  case PL_E_MUL:
  case PL_E_DIV:
  case PL_E_CONCAT:
    return sp_is_const(e->pLeft, 0) && sp_is_const(e->pRight, 0);
  case PL_E_NEG:
    return sp_is_const(e->pLeft, 0);
  default:
    return 0; /* CAST and columns carry affinity; the rest is not needed */
  }
}

/* The value of constant e, as SQLite computes it (sqlite3_value_dup'd). */
static sqlite3_value *sp_const_value(sp *s, const pl_expr *e) {
  if (e->op == PL_E_PARAM && e->iVal >= 1 && e->iVal <= s->nParam && s->aParam[e->iVal - 1])
    return sqlite3_value_dup(s->aParam[e->iVal - 1]);
  char *zSql = NULL;
  if (e->op == PL_E_PARAM) {
    zSql = sqlite3_mprintf("SELECT NULL");
  } else {
    int n = 0;
    const char *z = pl_expr_text(s->a, e, &n);
    zSql = sqlite3_mprintf("SELECT (%.*s)", n, z);
  }
  sqlite3_stmt *pStmt = NULL;
  sqlite3_value *v = NULL;
  if (zSql && sqlite3_prepare_v2(s->db, zSql, -1, &pStmt, NULL) == SQLITE_OK &&
      sqlite3_step(pStmt) == SQLITE_ROW)
    v = sqlite3_value_dup(sqlite3_column_value(pStmt, 0));
  sqlite3_finalize(pStmt);
  sqlite3_free(zSql);
  return v;
}

static char sp_cmp_aff(char colAff) {
  return colAff >= 'C' ? PL_AFF_NUMERIC : colAff == 'B' ? PL_AFF_TEXT : PL_AFF_NONE;
}

/* Add one filter constraint with its constant values; frees the values. */
static void sp_add_cons_flags(sp *s, int iChunk, int op, int flags, char aff, sqlite3_value **ap,
                              int n) {
  pl_cons c;
  memset(&c, 0, sizeof(c));
  c.iChunk = iChunk;
  c.op = op;
  c.flags = flags;
  c.aff = aff;
  c.apVal = ap;
  c.nVal = n;
  int bEmpty = 0;
  for (int i = 0; i < n; i++)
    if (!ap[i]) sp_fail(s, "a constant could not be evaluated%s", "");
  if (s->bCond && !s->bFail) {
    int k = s->nCond < 2 ? pl_filter_cond(s->b, &c, &bEmpty) : -1;
    if (k < 0)
      sp_fail(s, "program limit reached%s", "");
    else
      s->aCond[s->nCond++] = k;
    s->bNever |= bEmpty;
  } else {
    if (!s->bFail && pl_filter_add(s->b, &c, &bEmpty) < 0)
      sp_fail(s, "program limit reached%s", "");
    if (bEmpty) s->p->bEmpty = 1;
    s->nTerm++;
  }

  for (int i = 0; i < n; i++) sqlite3_value_free(ap[i]);
  sqlite3_free(ap);
}

static void sp_add_cons(sp *s, int iChunk, int op, char colAff, sqlite3_value **ap, int n) {
  sp_add_cons_flags(s, iChunk, op, 0, sp_cmp_aff(colAff), ap, n);
}

/* "column [NOT] LIKE|GLOB 'pattern'" as a device term, exact (program.h:
** the device matches the text of the value as SQLite's functions do); 0 if
** e is not of that shape or the operator is not SQLite's own. */
static int sp_like_term(sp *s, const pl_expr *e) {
  char aff = 0;
  int iChunk;
  if ((e->op != PL_E_LIKE && e->op != PL_E_GLOB) || e->pExtra ||
      (iChunk = sp_column(s, e->pLeft, &aff)) < 0 || !sp_is_const(e->pRight, 1))
    return 0;
  int flags = pl_like_flags(s->db, e->op == PL_E_GLOB);
  if (flags < 0) return 0;
  sqlite3_value **ap = sqlite3_malloc64(sizeof(*ap));
  if (!ap) {
    sp_fail(s, "out of memory%s", "");
    return 1;
  }
  ap[0] = sp_const_value(s, e->pRight);
  /* a number SQLite would render as text first; NULL, which its LIKE and
  ** GLOB answer 0 for a BLOB value (before looking at the pattern), not NULL */
  if (!ap[0] || sqlite3_value_type(ap[0]) != SQLITE_TEXT) {
    sqlite3_value_free(ap[0]);
    sqlite3_free(ap);
    return 0;
  }
  if (e->flags & PL_F_NOT) flags |= CSQ_TF_NOT;
  sp_add_cons_flags(s, iChunk, e->op == PL_E_LIKE ? CSQ_OP_LIKE : CSQ_OP_GLOB, flags, PL_AFF_NONE,
                    ap, 1);
  return 1;
}

/* The substr(column, p[, n]) of a WHERE term "substr(...) [NOT] IN
** ('L', ...)" or "substr(...) = | <> | != 'L'": 1 with its column chunk and
** p, n (-1 without); else 0. */
static int sp_substr_call(sp *s, const pl_expr *e, int *piChunk, int *pp, int *pn) {
  char aff = 0;
  if (e->op != PL_E_FUNC || (e->nArg != 2 && e->nArg != 3) ||
      (sqlite3_stricmp(e->zName, "substr") != 0 && sqlite3_stricmp(e->zName, "substring") != 0))
    return 0;
  for (int i = 1; i < e->nArg; i++)
    if (e->apArg[i]->op != PL_E_INT || e->apArg[i]->iVal < 1 || e->apArg[i]->iVal > 1000000)
      return 0;
  if ((*piChunk = sp_column(s, e->apArg[0], &aff)) < 0) return 0;
  *pp = (int)e->apArg[1]->iVal;
  *pn = e->nArg == 3 ? (int)e->apArg[2]->iVal : -1;
  return 1;
}

/* "substr(column, p, n) [NOT] IN ('L', ...)" (or = / <> one 'L') as GLOB
** terms of the column's text (pl_substr_glob): IN is one clause ORing a
** GLOB per literal, NOT IN a clause of NOT GLOB per literal, as SQLite
** compares substr's TEXT (no affinity, BINARY) with each. 0 if e is not of
** that shape or a literal has no exact pattern (nothing done). */
static int sp_substr_term(sp *s, const pl_expr *e) {
  const pl_expr *pCall = e->pLeft, *aOne[1];
  const pl_expr *const *apLit = (const pl_expr *const *)e->apArg;
  int nLit = e->nArg, bNot = (e->flags & PL_F_NOT) != 0;
  if (e->op == PL_E_EQ || e->op == PL_E_NE) {
    if (pCall->op != PL_E_FUNC) pCall = e->pRight;
    aOne[0] = pCall == e->pLeft ? e->pRight : e->pLeft;
    apLit = aOne;
    nLit = 1;
    bNot = e->op == PL_E_NE;
  } else if (e->op != PL_E_IN || nLit == 0) {
    return 0;
  }
  int iChunk, p, n;
  if (s->bCond || !sp_substr_call(s, pCall, &iChunk, &p, &n)) return 0;
  char aPat[256];
  int nKeep = 0;
  for (int i = 0; i < nLit; i++) {
    if (apLit[i]->op == PL_E_NULL) continue;
    if (apLit[i]->op != PL_E_STR ||
        pl_substr_glob(p, n, apLit[i]->z, apLit[i]->n, aPat, (int)sizeof(aPat)) == -1)
      return 0;
  }
  if (!pl_substr_ok(s->db)) return 0;
  s->nTerm++; /* from here on b changes */
  int slot = csq_pb_input(s->b, (uint32_t)iChunk), rc = slot;
  int bNull = 0;
  if (rc >= 0 && !bNot) rc = csq_pb_clause(s->b);
  for (int i = 0; i < nLit && rc >= 0; i++) {
    if (apLit[i]->op == PL_E_NULL) {
      bNull = 1;
      continue;
    }
    int nPat = pl_substr_glob(p, n, apLit[i]->z, apLit[i]->n, aPat, (int)sizeof(aPat));
    if (nPat < 0) continue; /* never equal: no GLOB for IN, always true for NOT IN */
    int k = csq_pb_const_bytes(s->b, CSQ_TEXT, aPat, (uint32_t)nPat);
    if (k >= 0 && bNot) k = csq_pb_clause(s->b) < 0 ? -1 : k;
    rc = k < 0 ? k : csq_pb_term(s->b, CSQ_OP_GLOB, bNot ? CSQ_TF_NOT : 0, slot, k, 0, 0);
    nKeep++;
  }
  if (rc < 0) {
    sp_fail(s, "program limit reached%s", "");
    return 1;
  }
  /* substr() of NULL, and of an empty BLOB, is NULL: NOT IN is not true;
  ** x <> x'' holds for every other value */
  if (bNot && !bNull) {
    int k = csq_pb_const_bytes(s->b, CSQ_BLOB, "", 0);
    if (k < 0 || csq_pb_clause(s->b) < 0 || csq_pb_term(s->b, CSQ_OP_NE, 0, slot, k, 0, 0) < 0)
      sp_fail(s, "program limit reached%s", "");
  }
  /* IN with no literal it can equal, NOT IN with a NULL: never true */
  if ((!bNot && nKeep == 0) || (bNot && bNull)) {
    s->p->bEmpty = 1;
    if (!bNot) { /* the open clause holds no term: give it one that never holds */
      int k = csq_pb_const_null(s->b);
      if (k < 0 || csq_pb_term(s->b, CSQ_OP_EQ, 0, slot, k, 0, 0) < 0)
        sp_fail(s, "program limit reached%s", "");
    }
  }
  return 1;
}

static int flip_op(int op) {
  switch (op) {
  case CSQ_OP_LT:
    return CSQ_OP_GT;
  case CSQ_OP_LE:
    return CSQ_OP_GE;
  case CSQ_OP_GT:
    return CSQ_OP_LT;
  case CSQ_OP_GE:
    return CSQ_OP_LE;
  default:
    return op;
  }
}

static int cmp_op(int k) {
  switch (k) {
  case PL_E_EQ:
    return CSQ_OP_EQ;
  case PL_E_NE:
    return CSQ_OP_NE;
  case PL_E_LT:
    return CSQ_OP_LT;
  case PL_E_LE:
    return CSQ_OP_LE;
  case PL_E_GT:
    return CSQ_OP_GT;
  case PL_E_GE:
    return CSQ_OP_GE;
  case PL_E_IS:
    return CSQ_OP_IS;
  case PL_E_ISNOT:
    return CSQ_OP_ISNOT;
  default:
    return 0;
  }
}

/* The arguments of csq_bpf('name', args...) or csq_bpf_col(col, 'name')
** e, resolved: 1 with aArg (constants' values sqlite3_value_dup'd: free
** them with sp_bpf_args_free) and the program; 0 if e is no such call, or
** names no program of that many arguments (the host then reports it), or an
** argument is neither a column nor a constant (then s fails). */
typedef struct sp_bpf {
  pl_bpf_arg aArg[CSQ_BPF_MAX_ARGS];
  int nArg;
  const uint8_t *aIns, *aDecl;
  uint32_t nIns;
} sp_bpf;

static void sp_bpf_free(sp_bpf *c) {
  for (int j = 0; j < c->nArg; j++) sqlite3_value_free(c->aArg[j].pVal);
}

static int sp_bpf_args(sp *s, const pl_expr *e, sp_bpf *c) {
  memset(c, 0, sizeof(*c));
  if (e->op != PL_E_FUNC) return 0;
  int bCol = strcmp(e->zName, "csq_bpf_col") == 0;
  if (!bCol && strcmp(e->zName, "csq_bpf") != 0) return 0;
  if (!s->ti.xBpf || e->nArg < 2 || e->nArg - 1 > CSQ_BPF_MAX_ARGS || (bCol && e->nArg != 2))
    return 0;
  const pl_expr *pName = e->apArg[bCol ? 1 : 0];
  int nArg = 0;
  if (pName->op != PL_E_STR ||
      s->ti.xBpf(s->ti.pBpfArg, pName->z, &c->aIns, &c->nIns, &c->aDecl, &nArg) ||
      nArg != e->nArg - 1)
    return 0;
  for (int j = 0; j < nArg; j++, c->nArg++) {
    const pl_expr *a = e->apArg[bCol ? 0 : j + 1];
    char aff;
    c->aArg[j].iChunk = sp_column(s, a, &aff);
    if (c->aArg[j].iChunk >= 0) continue;
    if (!sp_is_const(a, 1) || !(c->aArg[j].pVal = sp_const_value(s, a))) {
      sp_fail_expr(s, "the eBPF argument %s is neither a column nor a constant", a);
      sp_bpf_free(c);
      return 0;
    }
  }
  return 1;
}

/* Note eBPF call e, taken into the program as zAs, for csq_explain. */
static void sp_bpf_note(sp *s, const pl_expr *e, const char *zAs) {
  char *z = sp_text(s, e);
  if (sqlite3_str_length(s->pBpf)) sqlite3_str_appendall(s->pBpf, "; ");
  sqlite3_str_appendf(s->pBpf, "%s %s", z ? z : "csq_bpf(...)", zAs);
  sqlite3_free(z);
}

/* A WHERE conjunct that is an eBPF call, or NOT of one, as an eBPF term; 0
** if it is not. */
static int sp_bpf_term(sp *s, const pl_expr *eTerm) {
  sp_bpf c;
  const int bNot = eTerm->op == PL_E_NOT;
  const pl_expr *e = bNot ? eTerm->pLeft : eTerm;
  if (!e || !sp_bpf_args(s, e, &c)) return 0;
  int bCol = 0;
  for (int j = 0; j < c.nArg; j++) bCol |= c.aArg[j].iChunk >= 0;
  if (!bCol)
    sp_fail_expr(s, "the eBPF call %s reads no column: SQLite runs it on the host", e);
  else if (pl_filter_bpf(s->b, c.aArg, c.nArg, c.aIns, c.nIns, c.aDecl, bNot) < 0)
    sp_fail(s, "the eBPF call does not fit a device program%s", "");
  sp_bpf_free(&c);
  sp_bpf_note(s, eTerm, "as a filter term");
  s->nTerm++;
  return 1;
}

/* The collation flags (CSQ_TF_*) of collation zName, or -1 for one the
** device does not have. */
static int sp_coll_flags(const char *zName) {
  if (sqlite3_stricmp(zName, "BINARY") == 0) return CSQ_TF_BINARY;
  if (sqlite3_stricmp(zName, "NOCASE") == 0) return CSQ_TF_NOCASE;
  if (sqlite3_stricmp(zName, "RTRIM") == 0) return CSQ_TF_RTRIM;
  return -1;
}

/* e without its COLLATE operators; *pColl = the collation of the
** outermost one (the one SQLite uses: sp_coll_flags), -2 if there is none. */
static const pl_expr *sp_uncollate(const pl_expr *e, int *pColl) {
  *pColl = -2;
  for (; e && e->op == PL_E_COLLATE; e = e->pLeft)
    if (*pColl == -2) *pColl = sp_coll_flags(e->zName);
  return e;
}

/* Is a comparison between columns of affinities a and b (vtab.h letters:
** 'A' none, 'B' TEXT, 'C' NUMERIC, 'D' INTEGER, 'E' REAL) one where SQLite
** converts neither value? Then the stored values are what it compares
** (datatype3.html, "Type Conversions Prior To Comparison": a numeric
** affinity against TEXT or none applies NUMERIC to the other side, TEXT
** against none applies TEXT; two numeric affinities, or equal ones, apply
** nothing that changes a stored value). */
static int sp_cmp_exact(char a, char b) {
  return a == b || (a >= 'C' && b >= 'C');
}

/* A WHERE conjunct "x op y" over two columns of the table (op a CSQ_OP_*
** comparison, the rowid counting as a column): a column comparison term
** (program.h, COLUMN COMPARISONS) when SQLite converts neither value and
** compares under BINARY, NOCASE or RTRIM; else s fails, as the term must
** stay with SQLite. 0 if e is not of that shape (nothing done). */
static int sp_colcmp_term(sp *s, const pl_expr *e, int op) {
  int collL, collR;
  const pl_expr *pL = sp_uncollate(e->pLeft, &collL), *pR = sp_uncollate(e->pRight, &collR);
  if (!pL || !pR || pL->op != PL_E_COLUMN || pR->op != PL_E_COLUMN) return 0;
  char affL = 0, affR = 0;
  int iL = sp_column(s, pL, &affL), iR = sp_column(s, pR, &affR);
  if (iL < 0 || iR < 0) return 0;
  /* SQLite takes an explicit COLLATE of the left operand, then one of the
  ** right; else a column's own, and sp_column refused every column that
  ** declares one other than BINARY */
  int coll = collL != -2 ? collL : collR != -2 ? collR : CSQ_TF_BINARY;
  if (coll < 0) {
    sp_fail_expr(s, "the WHERE term %s uses a collation the device does not have", e);
    return 1;
  }
  if (!sp_cmp_exact(affL, affR)) {
    sp_fail_expr(s,
                 "the WHERE term %s compares columns whose affinities differ (SQLite converts "
                 "one side first)",
                 e);
    return 1;
  }
  if (s->bFail) return 1;
  int aff = affL >= 'C' ? CSQ_TF_AFF_NUMERIC : affL == 'B' ? CSQ_TF_AFF_TEXT : CSQ_TF_AFF_NONE;
  s->nTerm++; /* from here on b changes */
  int slotL = csq_pb_input(s->b, (uint32_t)iL);
  int slotR = slotL < 0 ? slotL : csq_pb_input(s->b, (uint32_t)iR);
  if (slotR < 0 || csq_pb_clause(s->b) < 0 ||
      csq_pb_colcmp(s->b, op, coll | aff, slotL, slotR) < 0) {
    sp_fail(s, "program limit reached%s", "");
    return 1;
  }
  if (s->pCmp) {
    char *z = sp_text(s, e);
    if (sqlite3_str_length(s->pCmp)) sqlite3_str_appendall(s->pCmp, "; ");
    sqlite3_str_appendall(s->pCmp, z ? z : "?");
    sqlite3_free(z);
  }
  return 1;
}

/* One conjunct of WHERE. */
static void sp_where_term(sp *s, const pl_expr *e) {
  char aff = 0;
  int iChunk;
  if (e->op == PL_E_AND) {
    sp_where_term(s, e->pLeft);
    sp_where_term(s, e->pRight);
    return;
  }
  if (!s->bCond && (e->op == PL_E_FUNC || e->op == PL_E_NOT) && sp_bpf_term(s, e)) return;
  int op = cmp_op(e->op);
  if (op && !s->bCond && sp_colcmp_term(s, e, op)) return;
  if (sp_like_term(s, e)) return;
  if (sp_substr_term(s, e)) return;
  if (op) {
    const pl_expr *pCol = e->pLeft, *pVal = e->pRight;
    if ((iChunk = sp_column(s, pCol, &aff)) < 0) {
      pCol = e->pRight;
      pVal = e->pLeft;
      op = flip_op(op);
      iChunk = sp_column(s, pCol, &aff);
    }
    if (iChunk >= 0 && sp_is_const(pVal, 1)) {
      sqlite3_value **ap = sqlite3_malloc64(sizeof(*ap));
      if (!ap) return sp_fail(s, "out of memory%s", "");
      ap[0] = sp_const_value(s, pVal);
      sp_add_cons(s, iChunk, op, aff, ap, 1);
      return;
    }
  } else if ((e->op == PL_E_ISNULL || e->op == PL_E_NOTNULL) &&
             (iChunk = sp_column(s, e->pLeft, &aff)) >= 0) {
    sp_add_cons(s, iChunk, e->op == PL_E_ISNULL ? CSQ_OP_ISNULL : CSQ_OP_NOTNULL, aff, NULL, 0);
    return;
  } else if (e->op == PL_E_IN && e->nArg > 0 && (iChunk = sp_column(s, e->pLeft, &aff)) >= 0) {
    /* NOT IN: the device's negation is true only where IN is FALSE, so a
    ** NULL value or a NULL in the list keeps the row out, as in SQLite */
    int bConst = 1;
    for (int i = 0; i < e->nArg; i++) bConst = bConst && sp_is_const(e->apArg[i], 1);
    if (bConst) {
      sqlite3_value **ap = sqlite3_malloc64(sizeof(*ap) * (size_t)e->nArg);
      if (!ap) return sp_fail(s, "out of memory%s", "");
      for (int i = 0; i < e->nArg; i++) ap[i] = sp_const_value(s, e->apArg[i]);
      sp_add_cons_flags(s, iChunk, CSQ_OP_IN, (e->flags & PL_F_NOT) ? CSQ_TF_NOT : 0,
                        sp_cmp_aff(aff), ap, e->nArg);
      return;
    }
  } else if (e->op == PL_E_BETWEEN && !(e->flags & PL_F_NOT) &&
             (iChunk = sp_column(s, e->pLeft, &aff)) >= 0 && sp_is_const(e->pRight, 1) &&
             sp_is_const(e->pExtra, 1)) {
    sqlite3_value **ap = sqlite3_malloc64(sizeof(*ap));
    sqlite3_value **ap2 = sqlite3_malloc64(sizeof(*ap));
    if (!ap || !ap2) {
      sqlite3_free(ap);
      sqlite3_free(ap2);
      return sp_fail(s, "out of memory%s", "");
    }
    ap[0] = sp_const_value(s, e->pRight);
    ap2[0] = sp_const_value(s, e->pExtra);
    sp_add_cons(s, iChunk, CSQ_OP_GE, aff, ap, 1);
    sp_add_cons(s, iChunk, CSQ_OP_LE, aff, ap2, 1);
    return;
  }
  sp_fail_expr(s, "the WHERE term %s does not run exactly on the device", e);
}

/* The instruction of "CASE WHEN w THEN eThen ELSE eElse END": w an AND or
** OR of the comparisons, IN lists, IS [NOT] NULL, BETWEEN and LIKE/GLOB
** that run as filter terms, each a condition (program.h, AGGREGATION).
** "A AND B" is CASE WHEN A THEN (CASE WHEN B THEN t ELSE e) ELSE e, "A OR
** B" CASE WHEN A THEN t ELSE (CASE WHEN B THEN t ELSE e): a condition
** that is NULL is not true, in SQLite as in these. NOT is not taken (NOT
** NULL is NULL, so swapping the branches would be wrong). -1 with s
** failed otherwise. */
static int sp_case_when(sp *s, const pl_expr *w, int eThen, int eElse) {
  if (s->bFail) return -1;
  if (w->op == PL_E_AND) {
    int inner = sp_case_when(s, w->pRight, eThen, eElse);
    return inner < 0 ? -1 : sp_case_when(s, w->pLeft, inner, eElse);
  }
  if (w->op == PL_E_OR) {
    int inner = sp_case_when(s, w->pRight, eThen, eElse);
    return inner < 0 ? -1 : sp_case_when(s, w->pLeft, eThen, inner);
  }
  s->bCond = 1;
  s->nCond = 0;
  s->bNever = 0;
  sp_where_term(s, w);
  s->bCond = 0;
  if (s->bFail) { /* say which CASE condition, not "WHERE term" */
    char *z = sp_text(s, w);
    snprintf(s->p->zWhy, sizeof(s->p->zWhy), "the CASE condition %s does not run on the device",
             z ? z : "?");
    sqlite3_free(z);
    return -1;
  }
  if (s->bNever) return eElse; /* a comparison with NULL: never true */
  int r = eThen;
  for (int i = s->nCond - 1; r >= 0 && i >= 0; i--)
    r = csq_pb_expr_case(s->b, s->aCond[i], r, eElse);
  if (r < 0) sp_fail(s, "program limit reached%s", "");
  return r;
}

/* Compile a key or aggregate argument into an expression instruction;
** *pAff receives its affinity for columns ('A' otherwise). */
static int sp_expr(sp *s, const pl_expr *e, char *pAff, int bArith) {
  char aff = 'A';
  int iChunk = sp_column(s, e, &aff);
  int r = -1;
  *pAff = 'A';
  if (iChunk >= 0) {
    if (bArith && aff < 'C') {
      sp_fail_expr(s, "arithmetic on %s, a column without numeric affinity", e);
      return -1;
    }
    int slot = csq_pb_input(s->b, (uint32_t)iChunk);
    r = slot < 0 ? slot : csq_pb_expr_col(s->b, slot);
    *pAff = aff;
  } else if (e->op == PL_E_INT || e->op == PL_E_REAL) {
    int k = e->op == PL_E_INT ? csq_pb_const_int(s->b, e->iVal) : csq_pb_const_real(s->b, e->rVal);
    r = k < 0 ? k : csq_pb_expr_const(s->b, k);
  } else if (e->op == PL_E_FUNC && strncmp(e->zName, "csq_bpf", 7) == 0) {
    /* an eBPF call as a value (an INTEGER), e.g. sum(csq_bpf('f', x)) */
    sp_bpf c;
    int slot0 = 0, k = -1;
    if (sp_bpf_args(s, e, &c)) {
      k = pl_bpf_const(s->b, c.aArg, c.nArg, c.aIns, c.nIns, c.aDecl, &slot0);
      sp_bpf_free(&c);
    }
    if (k < 0) {
      sp_fail_expr(s, "the expression %s does not run on the device", e);
      return -1;
    }
    r = csq_pb_expr(s->b, CSQ_EX_BPF, k, 0, 0);
    sp_bpf_note(s, e, "as a value");
  } else if (e->op == PL_E_CASE && !e->pLeft && e->nArg >= 2) {
    /* CASE WHEN w1 THEN r1 ... [ELSE x] END, from the last WHEN outwards */
    char a2;
    int k = e->pRight ? 0 : csq_pb_const_null(s->b);
    r = e->pRight ? sp_expr(s, e->pRight, &a2, bArith) : k < 0 ? k : csq_pb_expr_const(s->b, k);
    for (int i = e->nArg - 2; r >= 0 && i >= 0; i -= 2) {
      int eThen = sp_expr(s, e->apArg[i + 1], &a2, bArith);
      r = eThen < 0 ? -1 : sp_case_when(s, e->apArg[i], eThen, r);
    }
    if (r < 0 && !s->bFail) sp_fail(s, "program limit reached%s", "");
    if (r < 0) return -1;
  } else if (e->op == PL_E_NEG) {
    char a2;
    int x = sp_expr(s, e->pLeft, &a2, 1);
    if (x < 0) return -1;
    r = csq_pb_expr_neg(s->b, x);
  } else if (e->op == PL_E_ADD || e->op == PL_E_SUB || e->op == PL_E_MUL || e->op == PL_E_DIV) {
    char a1, a2;
    int x = sp_expr(s, e->pLeft, &a1, 1);
    int y = x < 0 ? -1 : sp_expr(s, e->pRight, &a2, 1);
    if (y < 0) return -1;
    int op = e->op == PL_E_ADD   ? CSQ_EX_ADD
             : e->op == PL_E_SUB ? CSQ_EX_SUB
             : e->op == PL_E_MUL ? CSQ_EX_MUL
                                 : CSQ_EX_DIV;
    r = csq_pb_expr_arith(s->b, op, x, y);
  } else {
    sp_fail_expr(s, "the expression %s does not run on the device", e);
    return -1;
  }
  if (r < 0) sp_fail(s, "program limit reached%s", "");
  return r;
}

/* Group keys must have one representation per group: SQLite reports a
** group in the form of one of its rows, and 3 and 3.0 are one group. A
** column of INTEGER, NUMERIC, REAL or TEXT affinity never holds both forms
** (affinity converts them on insert); integer arithmetic over INTEGER
** columns and integer literals stays integer. Anything else stays on the
** host. */
static int sp_key_ok(sp *s, const pl_expr *e, int bInt) {
  char aff = 0;
  if (sp_column(s, e, &aff) >= 0) return bInt ? aff == 'D' : aff != 'A';
  switch (e->op) {
  case PL_E_INT:
    return 1;
  case PL_E_FUNC: /* an eBPF call is an INTEGER, in one form (sp_expr checks the call) */
    return strcmp(e->zName, "csq_bpf") == 0 || strcmp(e->zName, "csq_bpf_col") == 0;
  case PL_E_NEG:
    return sp_key_ok(s, e->pLeft, 1);
  case PL_E_ADD:
  case PL_E_SUB:
  case PL_E_MUL:
  case PL_E_DIV:
    return sp_key_ok(s, e->pLeft, 1) && sp_key_ok(s, e->pRight, 1);
  default:
    return 0;
  }
}

static int sp_find_key(sp *s, const pl_expr *e) {
  for (int k = 0; k < s->nKey; k++)
    if (s->aKey[k] && pl_expr_equal(s->aKey[k], e)) return k;
  return -1;
}

static int sp_find_agg(sp *s, const pl_expr *e) {
  for (int k = 0; k < s->nAgg; k++)
    if (pl_expr_equal(s->aAgg[k], e)) return k;
  return -1;
}

static void sp_add_agg(sp *s, const pl_expr *e) {
  if (s->bFail || sp_find_agg(s, e) >= 0) return;
  if (s->nAgg >= SP_MAX_AGG) return sp_fail(s, "more than 64 aggregates%s", "");
  if (e->flags & PL_F_DISTINCT) {
    /* counted by grouping twice (sp_distinct): no program aggregate here */
    if (e->eAgg != PL_AGG_COUNT || e->nArg != 1 ||
        (s->pDistinct && !pl_expr_equal(s->pDistinct, e->apArg[0])))
      return sp_fail_expr(s,
                          "%s: DISTINCT aggregates other than count(DISTINCT x) of one x stay on "
                          "the host",
                          e);
    s->pDistinct = e->apArg[0];
    s->aFn[s->nAgg] = 0;
    s->aAgg[s->nAgg++] = e;
    return;
  }
  int fn = 0;
  switch (e->eAgg) {
  case PL_AGG_COUNT:
    fn = (e->flags & PL_F_STAR) ? CSQ_AGG_COUNT_STAR : CSQ_AGG_COUNT;
    break;
  case PL_AGG_SUM:
    fn = CSQ_AGG_SUM;
    break;
  case PL_AGG_TOTAL:
    fn = CSQ_AGG_TOTAL;
    break;
  case PL_AGG_AVG:
    fn = CSQ_AGG_AVG;
    break;
  case PL_AGG_MIN:
    fn = CSQ_AGG_MIN;
    break;
  case PL_AGG_MAX:
    fn = CSQ_AGG_MAX;
    break;
  }
  if (!fn) return sp_fail_expr(s, "%s is not a device aggregate", e);
  int x = -1;
  if (fn != CSQ_AGG_COUNT_STAR) {
    if (e->nArg != 1) return sp_fail_expr(s, "%s is not a device aggregate", e);
    char aff;
    int bNum = fn == CSQ_AGG_SUM || fn == CSQ_AGG_TOTAL || fn == CSQ_AGG_AVG;
    x = sp_expr(s, e->apArg[0], &aff, 0);
    if (x < 0) return;
    if (bNum && aff != 'A' && aff < 'C')
      return sp_fail_expr(s, "%s sums a column without numeric affinity", e);
  }
  if (csq_pb_agg(s->b, fn, 0, x) < 0) return sp_fail(s, "program limit reached%s", "");
  s->aFn[s->nAgg] = fn;
  s->aAgg[s->nAgg++] = e;
}

/* Merged-row column k, of affinity aff ('A'..'E'), in the host text. */
static void sp_col(sp *s, int k, char aff) {
  if (s->bTyped)
    sqlite3_str_appendf(s->pHost, "csq_j.%cx_%d", aff - 'A' + 'a', k);
  else
    sqlite3_str_appendf(s->pHost, "c%d", k);
}

/* The host text of e: aggregates and keys replaced by csq_rows columns.
** bCmp: e is an operand of a comparison (affinity matters there). */
static void sp_emit(sp *s, const pl_expr *e, int bCmp) {
  if (s->bFail) return;
  int k;
  if (e->op == PL_E_AGG) {
    k = sp_find_agg(s, e);
    if (k < 0) return sp_fail_expr(s, "internal: aggregate %s not planned", e);
    return sp_col(s, s->nKey + k, 'A');
  }
  if ((k = sp_find_key(s, e)) >= 0) {
    if (bCmp && s->aKeyAff[k] != 'A')
      return sp_fail_expr(s, "the group key %s is compared after grouping (its affinity)", e);
    return sp_col(s, k, s->aKeyAff[k]);
  }
  if (e->op == PL_E_COLUMN && s->bRows) {
    char aff;
    int iChunk = sp_column(s, e, &aff);
    for (k = 0; k < s->nAgg; k++)
      if (s->aRowChunk[k] == iChunk) return sp_col(s, s->nKey + k, aff);
    return sp_fail_expr(s, "internal: column %s not planned", e);
  }
  if (e->op == PL_E_COLUMN) return sp_fail_expr(s, "%s is neither grouped nor aggregated", e);
  if (e->op == PL_E_PARAM) {
    sqlite3_str_appendf(s->pHost, "?%d", (int)e->iVal);
    return;
  }
  /* children in source order, with the text between them copied */
  const pl_expr *aChild[64];
  int n = pl_expr_children(e, aChild, 64);
  if (n < 0) return sp_fail(s, "expression too wide%s", "");
  int bChildCmp =
      (e->op >= PL_E_EQ && e->op <= PL_E_ISNOT) || e->op == PL_E_IN || e->op == PL_E_BETWEEN;
  int at = e->iStart;
  for (int i = 0; i < n; i++) {
    sqlite3_str_append(s->pHost, s->a->zSql + at, aChild[i]->iStart - at);
    sqlite3_str_appendchar(s->pHost, 1, '(');
    sp_emit(s, aChild[i], bChildCmp);
    sqlite3_str_appendchar(s->pHost, 1, ')');
    at = aChild[i]->iEnd;
  }
  sqlite3_str_append(s->pHost, s->a->zSql + at, e->iEnd - at);
}

/* Gather the aggregates of e. */
static void sp_aggs_of(sp *s, const pl_expr *e) {
  if (!e || s->bFail) return;
  pl_refs r;
  memset(&r, 0, sizeof(r));
  if (pl_expr_refs(e, 0, &r)) return sp_fail(s, "out of memory%s", "");
  for (int i = 0; i < r.nAgg; i++) sp_add_agg(s, r.aAgg[i]);
  pl_refs_free(&r);
}

/* The function that merges partial results of program function fn into
** the whole group's (sp_distinct), or 0 if none does (avg). */
static int sp_merge_fn(int fn) {
  switch (fn) {
  case CSQ_AGG_COUNT_STAR:
  case CSQ_AGG_COUNT:
  case CSQ_AGG_SUM:
    return CSQ_AGG_SUM; /* a group has a row: its counts' sum is never NULL */
  case CSQ_AGG_TOTAL:
  case CSQ_AGG_MIN:
  case CSQ_AGG_MAX:
    return fn;
  default:
    return 0;
  }
}

/* count(DISTINCT x): the program groups by the keys and x, so each key's
** distinct values of x are one merged row each (by the equality GROUP BY
** uses, which is DISTINCT's: x must have one form per value, as a key),
** with the other aggregates' partial results beside them; pl_plan.pRegroup
** then groups those rows by the keys alone, counting the x that are not
** NULL and merging the partials (a count by a sum of counts). */
static void sp_distinct(sp *s) {
  if (s->bFail) return;
  for (int k = 0; k < s->nAgg; k++)
    if (s->aFn[k] && !sp_merge_fn(s->aFn[k]))
      return sp_fail_expr(s, "%s beside count(DISTINCT ...) stays on the host", s->aAgg[k]);
  if (s->nKey >= SP_MAX_KEY) return sp_fail(s, "more than 7 GROUP BY keys with DISTINCT%s", "");
  if (!sp_key_ok(s, s->pDistinct, 0))
    return sp_fail_expr(s, "count(DISTINCT %s): the value may hold one value in two forms",
                        s->pDistinct);
  char aff;
  int x = sp_expr(s, s->pDistinct, &aff, 0);
  if (x < 0) return;
  if (csq_pb_group(s->b, x) < 0) return sp_fail(s, "program limit reached%s", "");
  csq_pb *b = csq_pb_new();
  int e = b ? 0 : -1;
  /* the merged rows: the keys, x, then the plain aggregates in order */
  for (int k = 0; e >= 0 && k < s->nKey; k++) {
    int slot = csq_pb_input(b, (uint32_t)k + 1);
    int v = slot < 0 ? slot : csq_pb_expr_col(b, slot);
    e = v < 0 ? v : csq_pb_group(b, v);
  }
  for (int k = 0, iPlain = 0; e >= 0 && k < s->nAgg; k++) {
    int iCol = s->aFn[k] ? s->nKey + 1 + iPlain++ : s->nKey;
    int slot = csq_pb_input(b, (uint32_t)iCol + 1);
    int v = slot < 0 ? slot : csq_pb_expr_col(b, slot);
    e = v < 0 ? v : csq_pb_agg(b, s->aFn[k] ? sp_merge_fn(s->aFn[k]) : CSQ_AGG_COUNT, 0, v);
  }
  uint8_t *pProg = NULL;
  size_t nProg = 0;
  if (e >= 0 && csq_pb_finish(b, &pProg, &nProg) >= 0) {
    s->p->pRegroup = sqlite3_malloc64(nProg);
    if (s->p->pRegroup) memcpy(s->p->pRegroup, pProg, nProg);
    s->p->nRegroup = s->p->pRegroup ? nProg : 0;
  }
  free(pProg);
  csq_pb_free(b);
  if (!s->p->pRegroup) sp_fail(s, "the regrouping program could not be built%s", "");
}

static void sp_host(sp *s);
static int sp_has_bpf(const pl_expr *e);
static void sp_plan_rows(sp *s);

/* Is a conjunct of WHERE e a comparison of two columns (sp_colcmp_term's
** shape; whether it runs exactly is its business)? */
static int sp_has_colcmp(const pl_expr *e) {
  if (!e) return 0;
  if (e->op == PL_E_AND) return sp_has_colcmp(e->pLeft) || sp_has_colcmp(e->pRight);
  int c1, c2;
  const pl_expr *l = cmp_op(e->op) ? sp_uncollate(e->pLeft, &c1) : NULL;
  const pl_expr *r = l ? sp_uncollate(e->pRight, &c2) : NULL;
  return l && r && l->op == PL_E_COLUMN && r->op == PL_E_COLUMN;
}

static void sp_plan(sp *s) {
  pl_ast *a = s->a;
  /* SQLite can offer a virtual table neither an eBPF call over several
  ** columns nor a comparison of two columns, so every row would cross */
  if (!a->bAgg && (sp_has_bpf(a->pWhere) || sp_has_colcmp(a->pWhere))) return sp_plan_rows(s);
  if (!a->bAgg)
    return sp_fail(s,
                   "cost: no aggregate, so the table's own filter pushdown moves only the rows "
                   "that qualify%s",
                   "");
  if (a->bStar) return sp_fail(s, "SELECT * with aggregates stays on the host%s", "");
  /* WHERE */
  if (a->pWhere) sp_where_term(s, a->pWhere);
  /* GROUP BY keys */
  for (int i = 0; i < a->nGroup && !s->bFail; i++) {
    const pl_expr *e =
        a->aGroup[i].iCol > 0 ? a->aCol[a->aGroup[i].iCol - 1].pExpr : a->aGroup[i].pExpr;
    char affName;
    if (e->op == PL_E_COLUMN && !e->zTab && sp_column(s, e, &affName) < 0) {
      /* a result column's alias, as SQLite reads a GROUP BY name that is
      ** no column of the table: GROUP BY k for csq_bpf('f', x) AS k */
      for (int j = 0; j < a->nCol; j++)
        if (a->aCol[j].zAlias && sqlite3_stricmp(a->aCol[j].zAlias, e->zName) == 0) {
          e = a->aCol[j].pExpr;
          break;
        }
    }
    if (sp_find_key(s, e) >= 0) continue;
    if (s->nKey >= SP_MAX_KEY) return sp_fail(s, "more than 8 GROUP BY keys%s", "");
    if (!sp_key_ok(s, e, 0))
      return sp_fail_expr(s, "the group key %s may hold one value in two forms (3 and 3.0)", e);
    /* a CAST or COLLATE gives the key an affinity or a collation that a
    ** typed host part (PL_PLAN_TYPED) would not carry */
    if (s->bTyped && (pl_expr_has_op(e, PL_E_CAST) || pl_expr_has_op(e, PL_E_COLLATE)))
      return sp_fail_expr(s, "the group key %s has a CAST or COLLATE", e);
    char aff;
    int x = sp_expr(s, e, &aff, 0);
    if (x < 0) return;
    if (csq_pb_group(s->b, x) < 0) return sp_fail(s, "program limit reached%s", "");
    s->aKeyAff[s->nKey] = aff;
    s->aKey[s->nKey++] = e;
  }
  /* aggregates, wherever they appear */
  for (int i = 0; i < a->nCol; i++) sp_aggs_of(s, a->aCol[i].pExpr);
  sp_aggs_of(s, a->pHaving);
  for (int i = 0; i < a->nOrder; i++) sp_aggs_of(s, a->aOrder[i].pExpr);
  if (s->pDistinct) sp_distinct(s);
  sp_host(s);
}

/* Does e call csq_bpf (or csq_bpf_col)? */
static int sp_has_bpf(const pl_expr *e) {
  if (!e) return 0;
  if (e->op == PL_E_FUNC && strncmp(e->zName, "csq_bpf", 7) == 0) return 1;
  if (sp_has_bpf(e->pLeft) || sp_has_bpf(e->pRight) || sp_has_bpf(e->pExtra)) return 1;
  for (int i = 0; i < e->nArg; i++)
    if (sp_has_bpf(e->apArg[i])) return 1;
  return 0;
}

/* A SELECT without aggregates whose WHERE calls csq_bpf or compares two
** columns: SQLite can offer a virtual table neither, so the planner takes
** it. The device runs the filter and returns the matching rows (the rowid,
** then each column the query reads: pl_plan.bRows); the host reads them
** back in rowid order unless the query orders them. */
static void sp_plan_rows(sp *s) {
  pl_ast *a = s->a;
  if (a->bStar)
    return sp_fail(s,
                   "SELECT * without aggregates stays on the host (name the columns and csq "
                   "pushes its eBPF filter or column comparison)%s",
                   "");
  s->bRows = 1;
  sp_where_term(s, a->pWhere);
  if (s->bFail) return;
  int slot = csq_pb_input(s->b, 0);
  if (slot < 0 || csq_pb_output(s->b, slot) < 0) return sp_fail(s, "program limit reached%s", "");
  s->aKey[0] = NULL;
  s->aKeyAff[0] = 'D';
  s->nKey = 1;
  pl_refs r;
  memset(&r, 0, sizeof(r));
  int bNoMem = 0;
  for (int i = 0; i < a->nCol; i++) bNoMem |= pl_expr_refs(a->aCol[i].pExpr, 0, &r) != 0;
  for (int i = 0; i < a->nOrder; i++) bNoMem |= pl_expr_refs(a->aOrder[i].pExpr, 0, &r) != 0;
  if (bNoMem) sp_fail(s, "out of memory%s", "");
  for (int i = 0; i < r.nCol && !s->bFail; i++) {
    char aff;
    int iChunk = sp_column(s, r.aCol[i], &aff), k;
    if (iChunk < 0) {
      sp_fail_expr(s, "%s is not a column of the table", r.aCol[i]);
      break;
    }
    for (k = 0; k < s->nAgg && s->aRowChunk[k] != iChunk; k++) {}
    if (k < s->nAgg) continue;
    if (s->nAgg >= SP_MAX_AGG - 1) { /* csq_rows holds 64 columns, the rowid one */
      sp_fail(s, "more than 63 columns%s", "");
      break;
    }
    int sl = csq_pb_input(s->b, (uint32_t)iChunk);
    if (sl < 0 || csq_pb_output(s->b, sl) < 0) {
      sp_fail(s, "program limit reached%s", "");
      break;
    }
    s->aRowChunk[s->nAgg] = iChunk;
    s->aAgg[s->nAgg++] = r.aCol[i];
  }
  pl_refs_free(&r);
  sp_host(s);
}

/* The host part: the query over the merged rows (csq_rows). */
static void sp_host(sp *s) {
  pl_ast *a = s->a;
  if (s->bFail) return;
  s->p->iRows = s->nParam + 1;
  if (a->nParam > s->nParam) s->p->iRows = a->nParam + 1;
  sqlite3_str_appendall(s->pHost, "SELECT ");
  for (int i = 0; i < a->nCol; i++) {
    if (i) sqlite3_str_appendall(s->pHost, ", ");
    sqlite3_str_appendchar(s->pHost, 1, '(');
    sp_emit(s, a->aCol[i].pExpr, 0);
    sqlite3_str_appendchar(s->pHost, 1, ')');
    if (a->aCol[i].zAlias) sqlite3_str_appendf(s->pHost, " AS \"%w\"", a->aCol[i].zAlias);
  }
  if (s->bTyped)
    sqlite3_str_appendf(s->pHost, " FROM csq_jrows(?%d) AS csq_j", s->p->iRows);
  else
    sqlite3_str_appendf(s->pHost, " FROM csq_rows(?%d)", s->p->iRows);
  if (a->pHaving) {
    sqlite3_str_appendall(s->pHost, " WHERE (");
    sp_emit(s, a->pHaving, 0);
    sqlite3_str_appendchar(s->pHost, 1, ')');
  }
  for (int i = 0; i < a->nOrder; i++) {
    const pl_term *t = &a->aOrder[i];
    sqlite3_str_appendall(s->pHost, i ? ", " : " ORDER BY ");
    if (t->iCol > 0 && t->pExpr->op != PL_E_COLLATE) {
      sqlite3_str_appendf(s->pHost, "%d", t->iCol);
    } else {
      sqlite3_str_appendchar(s->pHost, 1, '(');
      sp_emit(s, t->pExpr, 0);
      sqlite3_str_appendchar(s->pHost, 1, ')');
    }
    if (t->bDesc) sqlite3_str_appendall(s->pHost, " DESC");
    if (t->eNulls) sqlite3_str_appendall(s->pHost, t->eNulls == 1 ? " NULLS FIRST" : " NULLS LAST");
  }
  if (s->bRows && a->nOrder == 0) sqlite3_str_appendall(s->pHost, " ORDER BY c0");
  /* SQLite's GROUP BY hands its groups out in key order, which users see
  ** without an ORDER BY: the merged groups come in no order, so ask for it */
  for (int i = 0; !s->bRows && a->nOrder == 0 && i < a->nGroup; i++) {
    sqlite3_str_appendall(s->pHost, i ? ", (" : " ORDER BY (");
    sp_emit(s, a->aGroup[i].pExpr, 0);
    sqlite3_str_appendchar(s->pHost, 1, ')');
  }
  if (a->pLimit) {
    sqlite3_str_appendall(s->pHost, " LIMIT (");
    sp_emit(s, a->pLimit, 0);
    sqlite3_str_appendchar(s->pHost, 1, ')');
    if (a->pOffset) {
      sqlite3_str_appendall(s->pHost, " OFFSET (");
      sp_emit(s, a->pOffset, 0);
      sqlite3_str_appendchar(s->pHost, 1, ')');
    }
  }
}

int pl_split_filter(sqlite3 *db, const pl_ast *a, const pl_tabinfo *ti, const char *zQual,
                    sqlite3_value **aParam, int nParam, struct csq_pb *b, const pl_expr *e,
                    int *pbEmpty) {
  sp s;
  memset(&s, 0, sizeof(s));
  s.db = db;
  s.a = (pl_ast *)a;
  s.ti = *ti;
  s.zQual = zQual;
  s.aParam = aParam;
  s.nParam = nParam;
  s.b = b;
  s.p = &s.dummy;
  s.pBpf = sqlite3_str_new(db);
  sp_where_term(&s, e);
  sqlite3_free(sqlite3_str_finish(s.pBpf));
  if (s.dummy.bEmpty) *pbEmpty = 1;
  if (!s.bFail) return 1;
  return s.nTerm ? -1 : 0;
}

int pl_plan_query(sqlite3 *db, const char *zSql, sqlite3_value **aParam, int nParam,
                  pl_lookup_fn xLookup, void *pArg, pl_plan **ppPlan) {
  return pl_plan_query_opt(db, zSql, aParam, nParam, xLookup, pArg, 0, ppPlan);
}

int pl_plan_query_opt(sqlite3 *db, const char *zSql, sqlite3_value **aParam, int nParam,
                      pl_lookup_fn xLookup, void *pArg, int flags, pl_plan **ppPlan) {
  pl_plan *p = sqlite3_malloc64(sizeof(*p));
  *ppPlan = NULL;
  if (!p) return SQLITE_NOMEM;
  memset(p, 0, sizeof(*p));
  *ppPlan = p;
  sp s;
  memset(&s, 0, sizeof(s));
  s.db = db;
  s.p = p;
  s.aParam = aParam;
  s.nParam = nParam;
  s.bTyped = (flags & PL_PLAN_TYPED) != 0;
  pl_err err;
  int rc = pl_parse(zSql, -1, &s.a, &err);
  if (rc == PL_NOMEM) return SQLITE_NOMEM;
  if (rc != PL_OK) {
    snprintf(p->zWhy, sizeof(p->zWhy), "%s: %s",
             rc == PL_SYNTAX ? "not parsed" : "outside the pushdown subset", err.zMsg);
    return SQLITE_OK;
  }
  if (s.a->nFrom > 1) {
    snprintf(p->zWhy, sizeof(p->zWhy), "a join of %d tables: SQLite plans it", s.a->nFrom);
    pl_ast_free(s.a);
    return SQLITE_OK;
  }
  s.ti.ePush = PL_PUSH_AUTO;
  s.ti.nRows = -1;
  s.ti.nEngines = -1;
  if (xLookup(pArg, s.a->zDb, s.a->zTable, &s.ti) != 0) {
    snprintf(p->zWhy, sizeof(p->zWhy), "%s is not a csq table of this connection", s.a->zTable);
    pl_ast_free(s.a);
    return SQLITE_OK;
  }
  /* the cost model's table-level rules (see split.h) */
  const char *zHostWhy = NULL;
  char zBuf[200];
  if (s.ti.ePush == PL_PUSH_NEVER) {
    zHostWhy = "cost: the table says pushdown='never'";
  } else if (s.ti.ePush == PL_PUSH_AUTO && s.ti.nRows >= 0 && s.ti.nRows < PL_PUSH_MIN_ROWS) {
    snprintf(zBuf, sizeof(zBuf),
             "cost: %lld rows, fewer than %d: SQLite scans them faster than a device round trip "
             "(pushdown='always' overrides)",
             (long long)s.ti.nRows, PL_PUSH_MIN_ROWS);
    zHostWhy = zBuf;
  }
  if (zHostWhy) {
    snprintf(p->zWhy, sizeof(p->zWhy), "%s", zHostWhy);
    pl_ast_free(s.a);
    return SQLITE_OK;
  }
  s.b = csq_pb_new();
  s.pHost = sqlite3_str_new(db);
  s.pBpf = sqlite3_str_new(db);
  s.pCmp = sqlite3_str_new(db);
  if (!s.b)
    rc = SQLITE_NOMEM;
  else
    sp_plan(&s);
  char *zHost = sqlite3_str_finish(s.pHost);
  char *zBpf = sqlite3_str_finish(s.pBpf);
  char *zCmp = sqlite3_str_finish(s.pCmp);
  if (rc == SQLITE_OK && !s.bFail) {
    uint8_t *pProg = NULL;
    size_t nProg = 0;
    if (csq_pb_finish(s.b, &pProg, &nProg) < 0) {
      sp_fail(&s, "the device program could not be built%s", "");
    } else {
      p->pProg = sqlite3_malloc64(nProg);
      p->zTable = sqlite3_mprintf("%s", s.a->zTable);
      /* the column comparisons by name: SQLite could not have run them on
      ** the table's own scan, so they are worth seeing */
      char *zCmpNote =
          zCmp && zCmp[0] ? sqlite3_mprintf(" (comparing columns: %s)", zCmp) : sqlite3_mprintf("");
      if (s.bRows)
        p->zDevice = sqlite3_mprintf("scan %s, %d filter term(s)%s, returns the rowid and %d "
                                     "column(s) of each matching row; program of %lld bytes",
                                     s.a->zTable, s.nTerm, zCmpNote ? zCmpNote : "", s.nAgg,
                                     (long long)nProg);
      else
        p->zDevice = sqlite3_mprintf("scan %s, %d filter term(s)%s, %d group key(s), %d "
                                     "aggregate(s); program of %lld bytes",
                                     s.a->zTable, s.nTerm, zCmpNote ? zCmpNote : "", s.nKey, s.nAgg,
                                     (long long)nProg);
      if (p->zDevice && p->pRegroup)
        p->zDevice = sqlite3_mprintf("%z, the DISTINCT value grouped as a key, then its rows "
                                     "grouped again by the keys alone to count it",
                                     p->zDevice);
      int bNoMem = !zCmpNote;
      sqlite3_free(zCmpNote);
      if (bNoMem || !p->pProg || !p->zTable || !p->zDevice || !zHost) {
        rc = SQLITE_NOMEM;
      } else {
        memcpy(p->pProg, pProg, nProg);
        p->nProg = nProg;
        p->bPush = 1;
        p->nKey = s.nKey;
        p->nAgg = s.nAgg;
        p->bRows = s.bRows;
        p->zHost = zHost;
        zHost = NULL;
        p->zBpf = zBpf && zBpf[0] ? zBpf : NULL;
        if (p->zBpf) zBpf = NULL;
        if (s.ti.nEngines == 0)
          snprintf(
              p->zWhy, sizeof(p->zWhy),
              "filter, GROUP BY and aggregates in csq's host engine: the device has no compute "
              "engines (still vectorised, and SQLite merges only partial rows)");
        else if (s.bRows)
          snprintf(p->zWhy, sizeof(p->zWhy),
                   "the filter on the device (its %s SQLite cannot offer the table), the "
                   "matching rows back to the host",
                   p->zBpf ? "eBPF call is one" : "column comparison is one");
        else
          snprintf(p->zWhy, sizeof(p->zWhy), "filter, GROUP BY and aggregates on the device");
      }
      free(pProg);
    }
  }
  if (!p->bPush) {
    sqlite3_free(p->pRegroup);
    p->pRegroup = NULL;
    p->nRegroup = 0;
  }
  sqlite3_free(zHost);
  sqlite3_free(zBpf);
  sqlite3_free(zCmp);
  csq_pb_free(s.b);
  pl_ast_free(s.a);
  return rc;
}

void pl_plan_free(pl_plan *p) {
  if (!p) return;
  sqlite3_free(p->zTable);
  sqlite3_free(p->pProg);
  sqlite3_free(p->zHost);
  sqlite3_free(p->zDevice);
  sqlite3_free(p->zBpf);
  sqlite3_free(p->pRegroup);
  sqlite3_free(p);
}
