/*
** planner/derived.c - derived tables: finding "SELECT ... FROM (SELECT ...)
** [AS x] ..." or "WITH x AS (SELECT ...) SELECT ..." in a statement's text, naming the inner
*SELECT's columns as
** SQLite names them, and splicing other text in the inner SELECT's place
** (planner/derived.h).
**
** The outer query is only read token by token here, never parsed: SQLite
** parses it when the caller prepares the spliced text, and a text that
** does not prepare goes back to SQLite unchanged. So the lexer below needs
** to know only where tokens begin and end, parentheses, parameters and
** words; it is not planner/parse.c's (which is private to the parser).
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "planner/derived.h"
#include "planner/parse.h"

enum { D_EOF, D_WORD, D_QUOTED, D_STRING, D_NUMBER, D_PARAM, D_LP, D_RP, D_SEMI, D_OTHER };

typedef struct dtok {
  int type; /* D_* */
  int i;    /* first byte */
  int n;    /* bytes */
} dtok;

static int d_idchar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$' || c >= 0x80;
}

static int d_space(unsigned char c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d);
}

/* The token at or after byte i of z, past whitespace and comments. An
** unterminated quote or comment runs to the end, as in SQLite (which then
** rejects the statement; the caller's prepare says so). */
static dtok d_lex(const char *zIn, int i) {
  const unsigned char *z = (const unsigned char *)zIn;
  for (;;) {
    while (d_space(z[i])) i++;
    if (z[i] == '-' && z[i + 1] == '-') {
      while (z[i] && z[i] != '\n') i++;
    } else if (z[i] == '/' && z[i + 1] == '*') {
      i += 2;
      while (z[i] && !(z[i] == '*' && z[i + 1] == '/')) i++;
      if (z[i]) i += 2;
    } else {
      break;
    }
  }
  dtok t = {D_OTHER, i, 1};
  unsigned char c = z[i];
  int j = i + 1;
  if (c == 0) {
    t.type = D_EOF;
    j = i;
  } else if (c == '(') {
    t.type = D_LP;
  } else if (c == ')') {
    t.type = D_RP;
  } else if (c == ';') {
    t.type = D_SEMI;
  } else if (c == '\'' || c == '"' || c == '`' || c == '[' ||
             ((c == 'x' || c == 'X') && z[i + 1] == '\'')) {
    unsigned char q = c == '[' ? ']' : c;
    if (c == 'x' || c == 'X') {
      q = '\'';
      j++;
    }
    for (;; j++) {
      if (!z[j]) break;
      if (z[j] == q) {
        if (q != ']' && z[j + 1] == q) {
          j++;
          continue;
        }
        j++;
        break;
      }
    }
    t.type = c == '\'' || q == '\'' ? D_STRING : D_QUOTED;
  } else if (c == '?' || c == ':' || c == '@' || c == '$' || c == '#') {
    while (d_idchar(z[j])) j++;
    /* a lone ':' or '@' is not a parameter but is no valid SQL either */
    t.type = D_PARAM;
  } else if (c >= '0' && c <= '9') {
    while (d_idchar(z[j]) || z[j] == '.' ||
           ((z[j] == '+' || z[j] == '-') && (z[j - 1] == 'e' || z[j - 1] == 'E')))
      j++;
    t.type = D_NUMBER;
  } else if (c == '.' && z[i + 1] >= '0' && z[i + 1] <= '9') {
    while (d_idchar(z[j]) || z[j] == '.') j++;
    t.type = D_NUMBER;
  } else if (d_idchar(c)) {
    while (d_idchar(z[j])) j++;
    t.type = D_WORD;
  }
  t.n = j - i;
  return t;
}

static int d_is(const char *z, const dtok *t, const char *zWord) {
  return t->type == D_WORD && (int)strlen(zWord) == t->n && strncasecmp(z + t->i, zWord, t->n) == 0;
}

static int d_is_any(const char *z, const dtok *t, const char *const *azWord) {
  for (int k = 0; azWord[k]; k++)
    if (d_is(z, t, azWord[k])) return 1;
  return 0;
}

static int d_refuse(pl_derived *p, const char *zFmt, ...) __attribute__((format(printf, 2, 3)));
static int d_refuse(pl_derived *p, const char *zFmt, ...) {
  va_list ap;
  va_start(ap, zFmt);
  vsnprintf(p->zWhy, sizeof(p->zWhy), zFmt, ap);
  va_end(ap);
  return PL_UNSUPPORTED;
}

/* Clauses that may follow the derived table. */
static const char *const azAfter[] = {"WHERE", "GROUP", "HAVING", "WINDOW", "ORDER", "LIMIT", NULL};
/* Words that after ")" begin a join, a compound or a table option, never an alias. */
static const char *const azNotAlias[] = {
    "WHERE", "GROUP",  "HAVING",    "WINDOW",  "ORDER",   "LIMIT", "JOIN", "LEFT",
    "RIGHT", "FULL",   "INNER",     "CROSS",   "NATURAL", "OUTER", "ON",   "USING",
    "UNION", "EXCEPT", "INTERSECT", "INDEXED", "NOT",     "AS",    NULL};
static const char *const azCompound[] = {"UNION", "EXCEPT", "INTERSECT", NULL};

/* The rest of a statement from token t on: no parameter, balanced
** parentheses, one statement, and no compound at the top when
** bNoCompound. */
static int d_rest(const char *zSql, dtok t, int bNoCompound, pl_derived *p) {
  int depth = 0;
  for (;; t = d_lex(zSql, t.i + t.n)) {
    if (t.type == D_EOF) break;
    if (t.type == D_PARAM)
      return d_refuse(p, "a bound parameter (%.*s): its number would change", t.n, zSql + t.i);
    if (t.type == D_LP) depth++;
    if (t.type == D_RP && --depth < 0) return d_refuse(p, "unbalanced parentheses");
    if (bNoCompound && depth == 0 && d_is_any(zSql, &t, azCompound))
      return d_refuse(p, "a compound SELECT");
    if (depth == 0 && t.type == D_SEMI) {
      do t = d_lex(zSql, t.i + t.n);
      while (t.type == D_SEMI);
      if (t.type != D_EOF) return d_refuse(p, "more than one statement");
      break;
    }
  }
  return depth == 0 ? PL_OK : d_refuse(p, "unbalanced parentheses");
}

int pl_derived_find(const char *zSql, pl_derived *p) {
  memset(p, 0, sizeof(*p));
  dtok t = d_lex(zSql, 0);
  if (!d_is(zSql, &t, "SELECT")) return d_refuse(p, "the statement does not begin with SELECT");
  /* the outer select list, up to its FROM */
  int depth = 0;
  for (t = d_lex(zSql, t.i + t.n);; t = d_lex(zSql, t.i + t.n)) {
    if (t.type == D_EOF || t.type == D_SEMI) return d_refuse(p, "no FROM clause at the top level");
    if (t.type == D_PARAM)
      return d_refuse(p, "a bound parameter (%.*s): its number would change", t.n, zSql + t.i);
    if (t.type == D_LP) depth++;
    if (t.type == D_RP && --depth < 0) return d_refuse(p, "unbalanced parentheses");
    if (depth > 0) continue;
    if (d_is(zSql, &t, "FROM")) break;
    if (d_is_any(zSql, &t, azCompound) || d_is(zSql, &t, "SELECT") || d_is(zSql, &t, "VALUES"))
      return d_refuse(p, "a compound SELECT");
  }
  t = d_lex(zSql, t.i + t.n);
  if (t.type != D_LP) return d_refuse(p, "the first FROM item is not a parenthesised SELECT");
  p->iOpen = t.i;
  t = d_lex(zSql, t.i + t.n);
  if (!d_is(zSql, &t, "SELECT"))
    return d_refuse(p, "the first FROM item is not a parenthesised SELECT");
  p->iInner = t.i;
  for (depth = 1; depth > 0;) {
    t = d_lex(zSql, t.i + t.n);
    if (t.type == D_EOF) return d_refuse(p, "unbalanced parentheses");
    if (t.type == D_PARAM)
      return d_refuse(p, "a bound parameter (%.*s): its number would change", t.n, zSql + t.i);
    if (t.type == D_LP) depth++;
    if (t.type == D_RP) depth--;
  }
  p->iClose = t.i;
  p->nInner = t.i - p->iInner;
  /* [[AS] alias] */
  t = d_lex(zSql, t.i + t.n);
  if (d_is(zSql, &t, "AS")) {
    t = d_lex(zSql, t.i + t.n);
    if (t.type != D_WORD && t.type != D_QUOTED && t.type != D_STRING)
      return d_refuse(p, "AS without a name after the derived table");
    t = d_lex(zSql, t.i + t.n);
  } else if (t.type == D_QUOTED || t.type == D_STRING ||
             (t.type == D_WORD && !d_is_any(zSql, &t, azNotAlias))) {
    t = d_lex(zSql, t.i + t.n);
  }
  if (t.type != D_EOF && t.type != D_SEMI && !d_is_any(zSql, &t, azAfter))
    return d_refuse(p, "the derived table is not the only FROM item");
  /* the rest: no parameter, no compound, one statement */
  return d_rest(zSql, t, 1, p);
}

int pl_derived_with(const char *zSql, pl_derived *p) {
  memset(p, 0, sizeof(*p));
  dtok t = d_lex(zSql, 0);
  if (!d_is(zSql, &t, "WITH")) return d_refuse(p, "the statement does not begin with WITH");
  t = d_lex(zSql, t.i + t.n);
  if (d_is(zSql, &t, "RECURSIVE")) return d_refuse(p, "WITH RECURSIVE");
  if (t.type != D_WORD && t.type != D_QUOTED) return d_refuse(p, "WITH without a name");
  t = d_lex(zSql, t.i + t.n);
  if (t.type == D_LP) { /* its column names */
    do t = d_lex(zSql, t.i + t.n);
    while (t.type == D_WORD || t.type == D_QUOTED || (t.type == D_OTHER && zSql[t.i] == ','));
    if (t.type != D_RP) return d_refuse(p, "a WITH column list of other than names");
    t = d_lex(zSql, t.i + t.n);
  }
  if (!d_is(zSql, &t, "AS")) return d_refuse(p, "WITH without AS");
  t = d_lex(zSql, t.i + t.n);
  if (d_is(zSql, &t, "NOT")) t = d_lex(zSql, t.i + t.n);
  if (d_is(zSql, &t, "MATERIALIZED")) t = d_lex(zSql, t.i + t.n);
  if (t.type != D_LP) return d_refuse(p, "WITH ... AS without a parenthesised SELECT");
  p->iOpen = t.i;
  t = d_lex(zSql, t.i + t.n);
  if (!d_is(zSql, &t, "SELECT")) return d_refuse(p, "a WITH table that is not a SELECT");
  p->iInner = t.i;
  for (int depth = 1; depth > 0;) {
    t = d_lex(zSql, t.i + t.n);
    if (t.type == D_EOF) return d_refuse(p, "unbalanced parentheses");
    if (t.type == D_PARAM)
      return d_refuse(p, "a bound parameter (%.*s): its number would change", t.n, zSql + t.i);
    if (t.type == D_LP) depth++;
    if (t.type == D_RP) depth--;
  }
  p->iClose = t.i;
  p->nInner = t.i - p->iInner;
  t = d_lex(zSql, t.i + t.n);
  if (t.type == D_OTHER && zSql[t.i] == ',') return d_refuse(p, "more than one WITH table");
  if (!d_is(zSql, &t, "SELECT")) return d_refuse(p, "WITH before other than a SELECT");
  return d_rest(zSql, t, 0, p);
}

/* A growing malloc'd string. */
typedef struct dbuf {
  char *z;
  size_t n, nAlloc;
  int bOom;
} dbuf;

static void dbuf_add(dbuf *b, const char *z, size_t n) {
  if (b->bOom) return;
  if (b->n + n + 1 > b->nAlloc) {
    size_t nNew = (b->n + n + 1) * 2;
    char *zNew = realloc(b->z, nNew);
    if (!zNew) {
      b->bOom = 1;
      return;
    }
    b->z = zNew;
    b->nAlloc = nNew;
  }
  memcpy(b->z + b->n, z, n);
  b->n += n;
  b->z[b->n] = 0;
}

/* ` AS "name"`, the name quoted as an identifier. */
static void dbuf_alias(dbuf *b, const char *zName, size_t nName) {
  dbuf_add(b, " AS \"", 5);
  for (size_t k = 0; k < nName; k++)
    dbuf_add(b, zName[k] == '"' ? "\"\"" : zName + k, zName[k] == '"' ? 2 : 1);
  dbuf_add(b, "\"", 1);
}

int pl_derived_inner(const char *zSql, const pl_derived *d, char **pzInner, char *zWhy,
                     size_t nWhy) {
  *pzInner = NULL;
  if (nWhy) zWhy[0] = 0;
  pl_ast *a = NULL;
  pl_err err;
  int rc = pl_parse_opt(zSql + d->iInner, d->nInner, PL_PARSE_SUBQUERY, &a, &err);
  if (rc == PL_NOMEM) return PL_NOMEM;
  if (rc != PL_OK) {
    snprintf(zWhy, nWhy, "its SELECT is %s: %s",
             rc == PL_SYNTAX ? "not parsed" : "outside the pushdown subset", err.zMsg);
    return PL_UNSUPPORTED;
  }
  /* each column's name as SQLite gives it (select.c, sqlite3ColumnsFromExprList) */
  const char **azName = calloc((size_t)a->nCol + 1, sizeof(char *));
  int *anName = calloc((size_t)a->nCol + 1, sizeof(int));
  char(*aNum)[24] = calloc((size_t)a->nCol + 1, sizeof(*aNum));
  if (!azName || !anName || !aNum) rc = PL_NOMEM;
  for (int i = 0; rc == PL_OK && i < a->nCol; i++) {
    const pl_rescol *rc0 = &a->aCol[i];
    const pl_expr *e = rc0->pExpr;
    while (e->op == PL_E_COLLATE) e = e->pLeft;
    if (rc0->zAlias) {
      azName[i] = rc0->zAlias;
      anName[i] = (int)strlen(rc0->zAlias);
    } else if (e->op == PL_E_STAR) {
      snprintf(zWhy, nWhy, "its select list has a *: its columns have no names to rewrite");
      rc = PL_UNSUPPORTED;
    } else if (e->op == PL_E_COLUMN) {
      if (strcasecmp(e->zName, "rowid") == 0 || strcasecmp(e->zName, "oid") == 0 ||
          strcasecmp(e->zName, "_rowid_") == 0) {
        snprintf(zWhy, nWhy, "its select list has %s without an alias", e->zName);
        rc = PL_UNSUPPORTED;
      }
      azName[i] = e->zName;
      anName[i] = (int)strlen(e->zName);
    } else {
      azName[i] = pl_expr_text(a, rc0->pExpr, &anName[i]);
    }
    if (rc == PL_OK && ((anName[i] == 4 && strncasecmp(azName[i], "true", 4) == 0) ||
                        (anName[i] == 5 && strncasecmp(azName[i], "false", 5) == 0))) {
      anName[i] = snprintf(aNum[i], sizeof(aNum[i]), "column%d", i + 1);
      azName[i] = aNum[i];
    }
  }
  for (int i = 0; rc == PL_OK && i < a->nCol; i++)
    for (int k = 0; rc == PL_OK && k < i; k++)
      if (anName[i] == anName[k] && strncasecmp(azName[i], azName[k], (size_t)anName[i]) == 0) {
        snprintf(zWhy, nWhy, "two of its columns are named %.*s", anName[i], azName[i]);
        rc = PL_UNSUPPORTED;
      }
  dbuf b = {0};
  if (rc == PL_OK) {
    int at = 0;
    for (int i = 0; i < a->nCol; i++) {
      if (a->aCol[i].zAlias) continue;
      dbuf_add(&b, a->zSql + at, (size_t)(a->aCol[i].iEnd - at));
      dbuf_alias(&b, azName[i], (size_t)anName[i]);
      at = a->aCol[i].iEnd;
    }
    dbuf_add(&b, a->zSql + at, (size_t)(a->nSql - at));
    if (b.bOom || !b.z) rc = PL_NOMEM;
  }
  if (rc == PL_OK) {
    *pzInner = b.z;
    b.z = NULL;
  }
  free(b.z);
  free(azName);
  free(anName);
  free(aNum);
  pl_ast_free(a);
  return rc;
}

int pl_derived_splice(const char *zSql, const pl_derived *d, const char *zWith, char **pzOut) {
  dbuf b = {0};
  dbuf_add(&b, zSql, (size_t)d->iOpen);
  dbuf_add(&b, zWith, strlen(zWith));
  dbuf_add(&b, zSql + d->iClose + 1, strlen(zSql + d->iClose + 1));
  if (b.bOom || !b.z) {
    free(b.z);
    *pzOut = NULL;
    return PL_NOMEM;
  }
  *pzOut = b.z;
  return PL_OK;
}

/* ---- pre-grouping (pl_derived_pregroup) ---- */

#define PG_MAX_AGG  32
#define PG_MAX_COLS 256

typedef struct pg {
  const pl_ast *o; /* the outer query, the derived table named PG_TABLE */
  const pl_ast *in;
  char aKey[PG_MAX_COLS]; /* derived column i is an outer GROUP BY key */
  const pl_expr *aAgg[PG_MAX_AGG];
  int nAgg;
  char *zWhy;
  size_t nWhy;
  int bFail;
} pg;

#define PG_TABLE "csq_pregroup"

static void pg_fail(pg *g, const char *zFmt, const char *zArg) {
  if (g->bFail) return;
  g->bFail = 1;
  snprintf(g->zWhy, g->nWhy, zFmt, zArg);
}

/* The derived column an outer column reference names, or -1. */
static int pg_column(const pg *g, const pl_expr *e) {
  if (e->op != PL_E_COLUMN || e->zDb) return -1;
  if (e->zTab && !(g->o->zAlias && strcasecmp(e->zTab, g->o->zAlias) == 0) &&
      strcasecmp(e->zTab, PG_TABLE) != 0)
    return -1;
  for (int i = 0; i < g->in->nCol; i++)
    if (g->in->aCol[i].zAlias && strcasecmp(g->in->aCol[i].zAlias, e->zName) == 0) return i;
  return -1;
}

/* Scalar functions whose value depends on their arguments alone: a key
** computed from the pre-grouped columns is then the one the rows had. */
static int pg_det_func(const char *z) {
  static const char *const az[] = {
      "abs",       "coalesce", "date",    "datetime", "hex",     "ifnull",    "iif",      "instr",
      "julianday", "length",   "lower",   "ltrim",    "max",     "min",       "nullif",   "printf",
      "format",    "quote",    "replace", "round",    "rtrim",   "sign",      "strftime", "substr",
      "substring", "time",     "trim",    "typeof",   "unicode", "unixepoch", "upper"};
  for (size_t i = 0; i < sizeof(az) / sizeof(az[0]); i++)
    if (strcasecmp(z, az[i]) == 0) return 1;
  return 0;
}

/* Is e (an inner select-list expression) a function of its columns? */
static int pg_deterministic(const pl_expr *e) {
  if (!e) return 1;
  if (e->op == PL_E_PARAM || e->op == PL_E_AGG || e->op == PL_E_SUBQUERY || e->op == PL_E_EXISTS ||
      e->op == PL_E_INSELECT || e->op == PL_E_STAR)
    return 0;
  if (e->op == PL_E_FUNC && ((e->flags & PL_F_NOPAREN) || !pg_det_func(e->zName))) return 0;
  if (!pg_deterministic(e->pLeft) || !pg_deterministic(e->pRight) || !pg_deterministic(e->pExtra))
    return 0;
  for (int i = 0; i < e->nArg; i++)
    if (!pg_deterministic(e->apArg[i])) return 0;
  return 1;
}

/* The outer aggregate equal to e, or -1. */
static int pg_agg_index(const pg *g, const pl_expr *e) {
  for (int k = 0; k < g->nAgg; k++)
    if (pl_expr_equal(g->aAgg[k], e)) return k;
  return -1;
}

/* Check outer expression e: its aggregates noted, each column outside
** them a GROUP BY key. */
static void pg_walk(pg *g, const pl_expr *e, int bInAgg) {
  if (!e || g->bFail) return;
  if (e->op == PL_E_AGG) {
    if (bInAgg) return pg_fail(g, "an aggregate inside an aggregate%s", "");
    if ((e->flags & PL_F_DISTINCT) || e->eAgg == PL_AGG_AVG)
      return pg_fail(g, "the outer %s() is not one partial results add up to", e->zName);
    if (pg_agg_index(g, e) < 0) {
      if (g->nAgg >= PG_MAX_AGG) return pg_fail(g, "more than %s outer aggregates", "32");
      g->aAgg[g->nAgg++] = e;
    }
    for (int i = 0; i < e->nArg; i++) pg_walk(g, e->apArg[i], 1);
    return;
  }
  if (e->op == PL_E_COLUMN) {
    int i = pg_column(g, e);
    if (i < 0)
      return pg_fail(g, "the outer query reads %s, no column of the derived table", e->zName);
    if (!bInAgg && !g->aKey[i])
      return pg_fail(g, "the outer query reads %s outside an aggregate and not as a GROUP BY key",
                     e->zName);
    return;
  }
  if (e->op == PL_E_SUBQUERY || e->op == PL_E_EXISTS || e->op == PL_E_INSELECT)
    return pg_fail(g, "the outer query holds a subquery%s", "");
  pg_walk(g, e->pLeft, bInAgg);
  pg_walk(g, e->pRight, bInAgg);
  pg_walk(g, e->pExtra, bInAgg);
  for (int i = 0; i < e->nArg; i++) pg_walk(g, e->apArg[i], bInAgg);
}

/* The text of outer expression e with each derived column replaced by its
** inner expression, in parentheses (as SQLite's flattener substitutes it:
** the expression keeps its affinity and collation). */
static void pg_subst(pg *g, const pl_expr *e, dbuf *b) {
  if (e->op == PL_E_COLUMN) {
    int n = 0;
    const char *z = pl_expr_text(g->in, g->in->aCol[pg_column(g, e)].pExpr, &n);
    dbuf_add(b, "(", 1);
    dbuf_add(b, z, (size_t)n);
    dbuf_add(b, ")", 1);
    return;
  }
  const pl_expr *aChild[64];
  int n = pl_expr_children(e, aChild, 64);
  if (n < 0) return pg_fail(g, "an outer aggregate's argument is too wide%s", "");
  int at = e->iStart;
  for (int i = 0; i < n; i++) {
    dbuf_add(b, g->o->zSql + at, (size_t)(aChild[i]->iStart - at));
    pg_subst(g, aChild[i], b);
    at = aChild[i]->iEnd;
  }
  dbuf_add(b, g->o->zSql + at, (size_t)(e->iEnd - at));
}

/* An ORDER BY term that names a result column (its number, or its alias):
** its text stays, and means what it meant. */
static int pg_result_ref(const pl_term *t) {
  return t->iCol > 0 && (t->pExpr->op == PL_E_INT || t->pExpr->op == PL_E_COLUMN);
}

/* The outer text again, each aggregate over the partials and the derived
** table replaced by the pre-grouping SELECT zPre. */
static void pg_outer_node(const pg *g, const pl_expr *e, int *pAt, dbuf *b) {
  if (!e) return;
  if (e->op == PL_E_AGG) {
    int k = pg_agg_index(g, e);
    dbuf_add(b, g->o->zSql + *pAt, (size_t)(e->iStart - *pAt));
    char z[64];
    /* a count adds up its partial counts: each group has a row, so the
    ** sum is never NULL */
    snprintf(z, sizeof(z), "%s(\"csq_p%d\")", e->eAgg == PL_AGG_COUNT ? "sum" : e->zName, k);
    dbuf_add(b, z, strlen(z));
    *pAt = e->iEnd;
    return;
  }
  pg_outer_node(g, e->pLeft, pAt, b);
  pg_outer_node(g, e->pRight, pAt, b);
  pg_outer_node(g, e->pExtra, pAt, b);
  for (int i = 0; i < e->nArg; i++) pg_outer_node(g, e->apArg[i], pAt, b);
}

int pl_derived_pregroup(const char *zSql, const pl_derived *d, const char *zInner, char **pzOut,
                        char *zWhy, size_t nWhy) {
  *pzOut = NULL;
  if (nWhy) zWhy[0] = 0;
  char *zOuter = NULL;
  pl_ast *o = NULL, *in = NULL;
  pl_err err;
  int rc = pl_derived_splice(zSql, d, PG_TABLE, &zOuter);
  if (rc == PL_OK) rc = pl_parse(zOuter, -1, &o, &err);
  if (rc == PL_OK) rc = pl_parse(zInner, -1, &in, &err);
  dbuf pre = {0}, out = {0};
  pg g;
  memset(&g, 0, sizeof(g));
  g.o = o;
  g.in = in;
  g.zWhy = zWhy;
  g.nWhy = nWhy;
  if (rc != PL_OK) {
    if (rc != PL_NOMEM) pg_fail(&g, "not parsed: %s", err.zMsg);
    goto done;
  }
  if (o->nFrom != 1 || o->pWhere || o->nGroup == 0 || o->bStar)
    pg_fail(&g, "the outer query is not a GROUP BY over the derived table alone%s", "");
  else if (in->bAgg || in->nOrder || in->pLimit || in->bStar || in->nCol > PG_MAX_COLS)
    pg_fail(&g, "the derived table is grouped, ordered or limited itself%s", "");
  /* GROUP BY keys: derived columns, named or through a result column */
  for (int i = 0; !g.bFail && i < o->nGroup; i++) {
    const pl_expr *e = o->aGroup[i].pExpr;
    int k = pg_column(&g, e);
    if (k < 0 && o->aGroup[i].iCol > 0) k = pg_column(&g, o->aCol[o->aGroup[i].iCol - 1].pExpr);
    if (k < 0) {
      pg_fail(&g, "an outer GROUP BY key is not a column of the derived table%s", "");
      break;
    }
    if (!pg_deterministic(in->aCol[k].pExpr))
      pg_fail(&g, "the key %s is not a function of its columns alone", in->aCol[k].zAlias);
    g.aKey[k] = 1;
  }
  for (int i = 0; !g.bFail && i < o->nCol; i++) pg_walk(&g, o->aCol[i].pExpr, 0);
  pg_walk(&g, o->pHaving, 0);
  for (int i = 0; !g.bFail && i < o->nOrder; i++)
    if (!pg_result_ref(&o->aOrder[i])) pg_walk(&g, o->aOrder[i].pExpr, 0);
  pg_walk(&g, o->pLimit, 0);
  pg_walk(&g, o->pOffset, 0);
  if (!g.bFail && g.nAgg == 0) pg_fail(&g, "the outer query has no aggregate%s", "");
  for (int i = 0; !g.bFail && i < in->nCol; i++)
    if (strncasecmp(in->aCol[i].zAlias, "csq_p", 5) == 0)
      pg_fail(&g, "a column of the derived table is named %s", in->aCol[i].zAlias);
  if (g.bFail) goto done;
  /* the pre-grouping SELECT: the keys' expressions, the partials, grouped
  ** by every column the keys read */
  pl_refs r;
  memset(&r, 0, sizeof(r));
  int bFirst = 1;
  dbuf_add(&pre, "(SELECT ", 8);
  for (int i = 0; i < in->nCol; i++) {
    if (!g.aKey[i]) continue;
    int n = 0;
    const char *z = pl_expr_text(in, in->aCol[i].pExpr, &n);
    if (!bFirst) dbuf_add(&pre, ", ", 2);
    bFirst = 0;
    dbuf_add(&pre, z, (size_t)n);
    dbuf_alias(&pre, in->aCol[i].zAlias, strlen(in->aCol[i].zAlias));
    if (pl_expr_refs(in->aCol[i].pExpr, 0, &r)) rc = PL_NOMEM;
  }
  for (int k = 0; k < g.nAgg; k++) {
    const pl_expr *e = g.aAgg[k];
    char z[32];
    dbuf_add(&pre, ", ", 2);
    dbuf_add(&pre, e->zName, strlen(e->zName));
    if (e->nArg == 0) {
      dbuf_add(&pre, "(*)", 3);
    } else {
      dbuf_add(&pre, "(", 1);
      pg_subst(&g, e->apArg[0], &pre);
      dbuf_add(&pre, ")", 1);
    }
    snprintf(z, sizeof(z), "csq_p%d", k);
    dbuf_alias(&pre, z, strlen(z));
  }
  dbuf_add(&pre, " FROM ", 6);
  size_t nTail = (size_t)(in->nSql - in->iFromStart);
  while (nTail > 0 && (in->zSql[in->iFromStart + nTail - 1] == ';' ||
                       d_space((unsigned char)in->zSql[in->iFromStart + nTail - 1])))
    nTail--;
  dbuf_add(&pre, in->zSql + in->iFromStart, nTail);
  int nBase = 0;
  for (int i = 0; i < r.nCol; i++) {
    int j = 0;
    while (j < i && !pl_expr_equal(r.aCol[j], r.aCol[i])) j++;
    if (j < i) continue;
    int n = 0;
    const char *z = pl_expr_text(in, r.aCol[i], &n);
    /* a line break first: the inner text may end in a -- comment */
    const char *zSep = nBase++ ? ", " : "\nGROUP BY ";
    dbuf_add(&pre, zSep, strlen(zSep));
    dbuf_add(&pre, z, (size_t)n);
  }
  dbuf_add(&pre, "\n)", 2);
  pl_refs_free(&r);
  if (g.bFail) goto done;
  if (rc == PL_OK && nBase == 0) {
    /* every key a constant: the pre-grouping would make a group of no rows */
    pg_fail(&g, "the outer GROUP BY keys read no column%s", "");
    goto done;
  }
  if (rc != PL_OK || pre.bOom) {
    rc = PL_NOMEM;
    goto done;
  }
  /* the outer query: aggregates over the partials, the derived table the
  ** pre-grouping SELECT (PG_TABLE stands where it stood) */
  int at = 0;
  for (int i = 0; i < o->nCol; i++) pg_outer_node(&g, o->aCol[i].pExpr, &at, &out);
  dbuf_add(&out, o->zSql + at, (size_t)(o->aFrom[0].iStart - at));
  dbuf_add(&out, pre.z, pre.n);
  at = o->aFrom[0].iStart + (int)strlen(PG_TABLE);
  pg_outer_node(&g, o->pHaving, &at, &out);
  for (int i = 0; i < o->nOrder; i++)
    if (!pg_result_ref(&o->aOrder[i])) pg_outer_node(&g, o->aOrder[i].pExpr, &at, &out);
  dbuf_add(&out, o->zSql + at, (size_t)(o->nSql - at));
  if (out.bOom || !out.z) {
    rc = PL_NOMEM;
    goto done;
  }
  *pzOut = out.z;
  out.z = NULL;
done:
  free(pre.z);
  free(out.z);
  free(zOuter);
  pl_ast_free(o);
  pl_ast_free(in);
  if (rc == PL_NOMEM) return PL_NOMEM;
  return *pzOut ? PL_OK : PL_UNSUPPORTED;
}
