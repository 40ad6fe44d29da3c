/*
** planner/parse.c - lexer and recursive-descent parser for the SELECT subset
** of the whole-query planner; the API and the node kinds are in parse.h.
**
** The grammar follows SQLite's parse.y (precedence climbing over SQLite's
** precedence table) and the lexer follows SQLite's tokenizer, so that
** whatever this accepts means what it means to SQLite. Anything it is not
** sure about is PL_UNSUPPORTED: the caller then runs the statement as
** ordinary SQL and SQLite decides, so the parser only has to be right about
** what it accepts, never complete.
**
** Plain libc allocation, no SQLite dependency, so unit tests need nothing.
*/
#include "planner/parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int pl_parse_fail_alloc = 0;

/* Every allocation goes through here so tests can make the n-th one fail. */
static void *pl_alloc(size_t n) {
  if (pl_parse_fail_alloc > 0 && --pl_parse_fail_alloc == 0) return NULL;
  return calloc(1, n ? n : 1);
}

static void *pl_grow(void *p, size_t n) {
  if (pl_parse_fail_alloc > 0 && --pl_parse_fail_alloc == 0) return NULL;
  return realloc(p, n ? n : 1);
}

/* ------------------------------------------------------------------ */
/* Keywords                                                           */
/* ------------------------------------------------------------------ */

/* Keyword classes, from SQLite's parse.y: RES reserved; FB falls back to an
** identifier where the keyword means nothing; IDX (INDEXED) is an "id" but
** not a fallback; JOIN (JOIN_KW) names a table or a column but is no alias
** or function name. FILTER, OVER and WINDOW are identifiers that matter
** only in context, as in SQLite's tokenizer, so they are not listed. */
enum { C_RES = 1, C_FB, C_IDX, C_JOIN };

// clang-format off
#define PL_KEYWORDS(X) \
  X(ABORT, C_FB) \
  X(ACTION, C_FB) \
  X(ADD, C_RES) \
  X(AFTER, C_FB) \
  X(ALL, C_RES) \
  X(ALTER, C_RES) \
  X(ALWAYS, C_FB) \
  X(ANALYZE, C_FB) \
  X(AND, C_RES) \
  X(AS, C_RES) \
  X(ASC, C_FB) \
  X(ATTACH, C_FB) \
  X(AUTOINCREMENT, C_RES) \
  X(BEFORE, C_FB) \
  X(BEGIN, C_FB) \
  X(BETWEEN, C_RES) \
  X(BY, C_FB) \
  X(CASCADE, C_FB) \
  X(CASE, C_RES) \
  X(CAST, C_FB) \
  X(CHECK, C_RES) \
  X(COLLATE, C_RES) \
  X(COLUMN, C_FB) \
  X(COMMIT, C_RES) \
  X(CONFLICT, C_FB) \
  X(CONSTRAINT, C_RES) \
  X(CREATE, C_RES) \
  X(CROSS, C_JOIN) \
  X(CURRENT, C_FB) \
  X(CURRENT_DATE, C_FB) \
  X(CURRENT_TIME, C_FB) \
  X(CURRENT_TIMESTAMP, C_FB) \
  X(DATABASE, C_FB) \
  X(DEFAULT, C_RES) \
  X(DEFERRABLE, C_RES) \
  X(DEFERRED, C_FB) \
  X(DELETE, C_RES) \
  X(DESC, C_FB) \
  X(DETACH, C_FB) \
  X(DISTINCT, C_RES) \
  X(DO, C_FB) \
  X(DROP, C_RES) \
  X(EACH, C_FB) \
  X(ELSE, C_RES) \
  X(END, C_FB) \
  X(ESCAPE, C_RES) \
  X(EXCEPT, C_RES) \
  X(EXCLUDE, C_FB) \
  X(EXCLUSIVE, C_FB) \
  X(EXISTS, C_RES) \
  X(EXPLAIN, C_FB) \
  X(FAIL, C_FB) \
  X(FIRST, C_FB) \
  X(FOLLOWING, C_FB) \
  X(FOR, C_FB) \
  X(FOREIGN, C_RES) \
  X(FROM, C_RES) \
  X(FULL, C_JOIN) \
  X(GENERATED, C_FB) \
  X(GLOB, C_FB) \
  X(GROUP, C_RES) \
  X(GROUPS, C_FB) \
  X(HAVING, C_RES) \
  X(IF, C_FB) \
  X(IGNORE, C_FB) \
  X(IMMEDIATE, C_FB) \
  X(IN, C_RES) \
  X(INDEX, C_RES) \
  X(INDEXED, C_IDX) \
  X(INITIALLY, C_FB) \
  X(INNER, C_JOIN) \
  X(INSERT, C_RES) \
  X(INSTEAD, C_FB) \
  X(INTERSECT, C_RES) \
  X(INTO, C_RES) \
  X(IS, C_RES) \
  X(ISNULL, C_RES) \
  X(JOIN, C_RES) \
  X(KEY, C_FB) \
  X(LAST, C_FB) \
  X(LEFT, C_JOIN) \
  X(LIKE, C_FB) \
  X(LIMIT, C_RES) \
  X(MATCH, C_FB) \
  X(MATERIALIZED, C_FB) \
  X(NATURAL, C_JOIN) \
  X(NO, C_FB) \
  X(NOT, C_RES) \
  X(NOTHING, C_RES) \
  X(NOTNULL, C_RES) \
  X(NULL, C_RES) \
  X(NULLS, C_FB) \
  X(OF, C_FB) \
  X(OFFSET, C_FB) \
  X(ON, C_RES) \
  X(OR, C_RES) \
  X(ORDER, C_RES) \
  X(OTHERS, C_FB) \
  X(OUTER, C_JOIN) \
  X(PARTITION, C_FB) \
  X(PLAN, C_FB) \
  X(PRAGMA, C_FB) \
  X(PRECEDING, C_FB) \
  X(PRIMARY, C_RES) \
  X(QUERY, C_FB) \
  X(RAISE, C_FB) \
  X(RANGE, C_FB) \
  X(RECURSIVE, C_FB) \
  X(REFERENCES, C_RES) \
  X(REGEXP, C_FB) \
  X(REINDEX, C_FB) \
  X(RELEASE, C_FB) \
  X(RENAME, C_FB) \
  X(REPLACE, C_FB) \
  X(RESTRICT, C_FB) \
  X(RETURNING, C_RES) \
  X(RIGHT, C_JOIN) \
  X(ROLLBACK, C_FB) \
  X(ROW, C_FB) \
  X(ROWS, C_FB) \
  X(SAVEPOINT, C_FB) \
  X(SELECT, C_RES) \
  X(SET, C_RES) \
  X(TABLE, C_RES) \
  X(TEMP, C_FB) \
  X(TEMPORARY, C_FB) \
  X(THEN, C_RES) \
  X(TIES, C_FB) \
  X(TO, C_RES) \
  X(TRANSACTION, C_RES) \
  X(TRIGGER, C_FB) \
  X(UNBOUNDED, C_FB) \
  X(UNION, C_RES) \
  X(UNIQUE, C_RES) \
  X(UPDATE, C_RES) \
  X(USING, C_RES) \
  X(VACUUM, C_FB) \
  X(VALUES, C_RES) \
  X(VIEW, C_FB) \
  X(VIRTUAL, C_FB) \
  X(WHEN, C_RES) \
  X(WHERE, C_RES) \
  X(WITH, C_FB) \
  X(WITHOUT, C_FB)
// clang-format on

#define KW_ENUM(name, cls) K_##name,
enum { K_NONE_, PL_KEYWORDS(KW_ENUM) K_COUNT_ };
#define KW_ENTRY(name, cls) {#name, sizeof(#name) - 1, cls},
static const struct {
  const char *z;
  int n;
  int cls;
} aKeyword[] = {{"", 0, 0}, PL_KEYWORDS(KW_ENTRY)};

static int keyword_code(const char *z, int n) {
  for (int i = 1; i < K_COUNT_; i++) {
    if (aKeyword[i].n == n && strncasecmp(aKeyword[i].z, z, (size_t)n) == 0) return i;
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* Lexer                                                              */
/* ------------------------------------------------------------------ */

enum {
  T_EOF,
  T_ILLEGAL,
  T_SEMI,
  T_LP,
  T_RP,
  T_COMMA,
  T_DOT,
  T_STAR,
  T_PLUS,
  T_MINUS,
  T_SLASH,
  T_REM,
  T_CONCAT,
  T_PTR,
  T_EQ,
  T_NE,
  T_LT,
  T_LE,
  T_GT,
  T_GE,
  T_LSHIFT,
  T_RSHIFT,
  T_BITAND,
  T_BITOR,
  T_BITNOT,
  T_INTEGER,
  T_FLOAT,
  T_STRING,
  T_BLOB,
  T_VARIABLE,
  T_ID,
  T_KW
};

typedef struct Tok {
  int type;   /* T_* */
  int kw;     /* T_KW: K_* */
  int iStart; /* byte offset */
  int n;      /* length in bytes */
} Tok;

/* SQLite's IdChar: letters, digits, _ and $, and every byte >= 0x80. */
static int id_char(unsigned char c) {
  return isalnum(c) || c == '_' || c == '$' || c >= 0x80;
}
static int id_start(unsigned char c) {
  return isalpha(c) || c == '_' || c >= 0x80;
}
static int is_space(unsigned char c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d);
}

/* The token starting at or after byte i of z (NUL-terminated): skips
** whitespace and comments. Never fails: bad input is a T_ILLEGAL token. */
static Tok lex(const char *zIn, int i) {
  const unsigned char *z = (const unsigned char *)zIn;
  Tok t = {T_EOF, 0, i, 0};
  for (;;) {
    while (is_space(z[i])) i++;
    if (z[i] == '-' && z[i + 1] == '-') {
      while (z[i] && z[i] != '\n') i++;
      continue;
    }
    if (z[i] == '/' && z[i + 1] == '*') {
      i += 2;
      while (z[i] && !(z[i] == '*' && z[i + 1] == '/')) i++;
      if (z[i]) i += 2; /* an unterminated comment runs to the end, as in SQLite */
      continue;
    }
    break;
  }
  t.iStart = i;
  int j = i + 1;
  unsigned char c = z[i];
  switch (c) {
  case 0:
    t.type = T_EOF;
    j = i;
    break;
  case ';':
    t.type = T_SEMI;
    break;
  case '(':
    t.type = T_LP;
    break;
  case ')':
    t.type = T_RP;
    break;
  case ',':
    t.type = T_COMMA;
    break;
  case '*':
    t.type = T_STAR;
    break;
  case '+':
    t.type = T_PLUS;
    break;
  case '/':
    t.type = T_SLASH;
    break;
  case '%':
    t.type = T_REM;
    break;
  case '&':
    t.type = T_BITAND;
    break;
  case '~':
    t.type = T_BITNOT;
    break;
  case '-':
    if (z[i + 1] == '>') {
      t.type = T_PTR;
      j = z[i + 2] == '>' ? i + 3 : i + 2;
    } else {
      t.type = T_MINUS;
    }
    break;
  case '|':
    if (z[i + 1] == '|')
      t.type = T_CONCAT, j = i + 2;
    else
      t.type = T_BITOR;
    break;
  case '=':
    t.type = T_EQ;
    if (z[i + 1] == '=') j = i + 2;
    break;
  case '!':
    if (z[i + 1] == '=')
      t.type = T_NE, j = i + 2;
    else
      t.type = T_ILLEGAL;
    break;
  case '<':
    if (z[i + 1] == '=')
      t.type = T_LE, j = i + 2;
    else if (z[i + 1] == '>')
      t.type = T_NE, j = i + 2;
    else if (z[i + 1] == '<')
      t.type = T_LSHIFT, j = i + 2;
    else
      t.type = T_LT;
    break;
  case '>':
    if (z[i + 1] == '=')
      t.type = T_GE, j = i + 2;
    else if (z[i + 1] == '>')
      t.type = T_RSHIFT, j = i + 2;
    else
      t.type = T_GT;
    break;
  case '\'':
  case '"':
  case '`': {
    unsigned char d = c, e = 0;
    for (j = i + 1; (e = z[j]) != 0; j++) {
      if (e == d) {
        if (z[j + 1] == d)
          j++;
        else
          break;
      }
    }
    if (e == 0)
      t.type = T_ILLEGAL;
    else
      t.type = d == '\'' ? T_STRING : T_ID, j++;
    break;
  }
  case '[':
    for (j = i + 1; z[j] && z[j] != ']'; j++) {}
    if (z[j] == ']')
      t.type = T_ID, j++;
    else
      t.type = T_ILLEGAL;
    break;
  case '?':
    t.type = T_VARIABLE;
    while (isdigit(z[j])) j++;
    break;
  case '$':
  case '@':
  case ':':
  case '#': {
    /* SQLite's rule, Tcl suffixes included: $a::b(c) */
    int n = 0;
    t.type = T_VARIABLE;
    for (j = i + 1; z[j]; j++) {
      if (id_char(z[j])) {
        n++;
      } else if (z[j] == '(' && n > 0) {
        do j++;
        while (z[j] && !is_space(z[j]) && z[j] != ')');
        if (z[j] == ')')
          j++;
        else
          t.type = T_ILLEGAL;
        break;
      } else if (z[j] == ':' && z[j + 1] == ':') {
        j++;
      } else {
        break;
      }
    }
    if (n == 0) t.type = T_ILLEGAL;
    break;
  }
  case '.':
    if (!isdigit(z[i + 1])) {
      t.type = T_DOT;
      break;
    }
    /* .5 is a number */
    __attribute__((fallthrough));
  case '0':
  case '1':
  case '2':
  case '3':
  case '4':
  case '5':
  case '6':
  case '7':
  case '8':
  case '9':
    t.type = T_INTEGER;
    if (c == '0' && (z[i + 1] == 'x' || z[i + 1] == 'X') && isxdigit(z[i + 2])) {
      for (j = i + 3; isxdigit(z[j]); j++) {}
      break; /* SQLite stops here: 0x1g is 0x1 then g */
    }
    for (j = i; isdigit(z[j]); j++) {}
    if (z[j] == '.') {
      j++;
      while (isdigit(z[j])) j++;
      t.type = T_FLOAT;
    }
    if ((z[j] == 'e' || z[j] == 'E') &&
        (isdigit(z[j + 1]) || ((z[j + 1] == '+' || z[j + 1] == '-') && isdigit(z[j + 2])))) {
      j += 2;
      while (isdigit(z[j])) j++;
      t.type = T_FLOAT;
    }
    while (id_char(z[j])) t.type = T_ILLEGAL, j++;
    break;
  case 'x':
  case 'X':
    if (z[i + 1] == '\'') {
      t.type = T_BLOB;
      for (j = i + 2; isxdigit(z[j]); j++) {}
      if (z[j] != '\'' || (j - i) % 2 != 0) {
        t.type = T_ILLEGAL;
        while (z[j] && z[j] != '\'') j++;
      }
      if (z[j]) j++;
      break;
    }
    __attribute__((fallthrough));
  default:
    if (!id_start(c)) {
      t.type = T_ILLEGAL;
      break;
    }
    for (j = i + 1; id_char(z[j]); j++) {}
    t.kw = keyword_code((const char *)z + i, j - i);
    t.type = t.kw ? T_KW : T_ID;
    break;
  }
  t.n = j - i;
  return t;
}

/* ------------------------------------------------------------------ */
/* Parser state and helpers                                           */
/* ------------------------------------------------------------------ */

/* Where an expression is, for SQLite's rules on aggregates. */
enum { X_RESULT, X_WHERE, X_GROUP, X_HAVING, X_ORDER, X_LIMIT };

typedef struct Parser {
  const char *z; /* the statement (pl_ast.zSql) */
  Tok t;         /* current token */
  int rc;        /* first failure, PL_OK while all is well */
  pl_err *pErr;
  int depth; /* recursion depth of the expression parser */
  int ctx;   /* X_*: the clause being parsed */
  int nAgg;  /* aggregate calls made so far */
  int flags; /* PL_PARSE_* */
  pl_ast *a;
} Parser;

static void fail(Parser *p, int rc, int iPos, const char *zFmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Record the first failure; later ones are consequences and are dropped. */
static void fail(Parser *p, int rc, int iPos, const char *zFmt, ...) {
  if (p->rc) return;
  p->rc = rc;
  if (p->pErr) {
    va_list ap;
    va_start(ap, zFmt);
    vsnprintf(p->pErr->zMsg, sizeof(p->pErr->zMsg), zFmt, ap);
    va_end(ap);
    p->pErr->iPos = iPos;
  }
}

static void nomem(Parser *p) {
  fail(p, PL_NOMEM, p->t.iStart, "out of memory");
}

/* A syntax error at token t, worded like SQLite's. */
static void syntax_err(Parser *p, const Tok *t) {
  if (t->type == T_EOF)
    fail(p, PL_SYNTAX, t->iStart, "incomplete input (offset %d)", t->iStart);
  else if (t->type == T_ILLEGAL)
    fail(p, PL_SYNTAX, t->iStart, "unrecognized token: \"%.*s\" (offset %d)", t->n > 40 ? 40 : t->n,
         p->z + t->iStart, t->iStart);
  else
    fail(p, PL_SYNTAX, t->iStart, "near \"%.*s\": syntax error (offset %d)", t->n > 40 ? 40 : t->n,
         p->z + t->iStart, t->iStart);
}

static void unsupported(Parser *p, int iPos, const char *zWhat) {
  fail(p, PL_UNSUPPORTED, iPos, "not pushed down: %s (offset %d)", zWhat, iPos);
}

static void advance(Parser *p) {
  p->t = lex(p->z, p->t.iStart + p->t.n);
}
static Tok peek(Parser *p, const Tok *t) {
  return lex(p->z, t->iStart + t->n);
}
static int tok_end(const Tok *t) {
  return t->iStart + t->n;
}
static int is_kw(const Tok *t, int kw) {
  return t->type == T_KW && t->kw == kw;
}

/* An unquoted identifier token spelled zWord (FILTER, OVER, TRUE...). */
static int is_word(Parser *p, const Tok *t, const char *zWord) {
  int n = (int)strlen(zWord);
  return t->type == T_ID && t->n == n && strncasecmp(p->z + t->iStart, zWord, (size_t)n) == 0;
}

/* Token classes of parse.y: id, nm (id|STRING|JOIN_KW), ids (ID|STRING). */
static int is_id(const Tok *t) {
  return t->type == T_ID ||
         (t->type == T_KW && (aKeyword[t->kw].cls == C_FB || aKeyword[t->kw].cls == C_IDX));
}
static int is_nm(const Tok *t) {
  return is_id(t) || t->type == T_STRING || (t->type == T_KW && aKeyword[t->kw].cls == C_JOIN);
}
static int is_ids(const Tok *t) {
  return t->type == T_ID || t->type == T_STRING || (t->type == T_KW && aKeyword[t->kw].cls == C_FB);
}

/* Require token type `type` and step over it. */
static int expect(Parser *p, int type) {
  if (p->rc) return 0;
  if (p->t.type != type) {
    syntax_err(p, &p->t);
    return 0;
  }
  advance(p);
  return 1;
}
static int expect_kw(Parser *p, int kw) {
  if (p->rc) return 0;
  if (!is_kw(&p->t, kw)) {
    syntax_err(p, &p->t);
    return 0;
  }
  advance(p);
  return 1;
}

static char *dup_bytes(Parser *p, const char *z, int n) {
  char *r = pl_alloc((size_t)n + 1);
  if (!r) {
    nomem(p);
    return NULL;
  }
  memcpy(r, z, (size_t)n);
  r[n] = 0;
  return r;
}

/* The name a token stands for, dequoted ('x', "x", `x`, [x]); malloc'd. */
static char *tok_name(Parser *p, const Tok *t) {
  const char *z = p->z + t->iStart;
  char q = z[0];
  if (t->type == T_KW || (q != '\'' && q != '"' && q != '`' && q != '['))
    return dup_bytes(p, z, t->n);
  char *r = pl_alloc((size_t)t->n);
  if (!r) {
    nomem(p);
    return NULL;
  }
  char close = q == '[' ? ']' : q;
  int k = 0;
  for (int i = 1; i < t->n - 1; i++) {
    r[k++] = z[i];
    if (z[i] == close && q != '[') i++; /* a doubled quote stands for one */
  }
  r[k] = 0;
  return r;
}

static void lower(char *z) {
  for (; *z; z++) *z = (char)tolower((unsigned char)*z);
}

/* ------------------------------------------------------------------ */
/* Nodes                                                              */
/* ------------------------------------------------------------------ */

void pl_expr_free(pl_expr *e) {
  if (!e) return;
  pl_expr_free(e->pLeft);
  pl_expr_free(e->pRight);
  pl_expr_free(e->pExtra);
  for (int i = 0; i < e->nArg; i++) pl_expr_free(e->apArg[i]);
  free(e->apArg);
  free(e->zName);
  free(e->zTab);
  free(e->zDb);
  free(e->z);
  free(e);
}

static pl_expr *node(Parser *p, int op, int iStart, int iEnd) {
  pl_expr *e = pl_alloc(sizeof *e);
  if (!e) {
    nomem(p);
    return NULL;
  }
  e->op = op;
  e->iStart = iStart;
  e->iEnd = iEnd;
  e->nHeight = 1;
  return e;
}

static int height(const pl_expr *e) {
  return e ? e->nHeight : 0;
}

/* Set e's height from its children; a tree deeper than SQLite allows is
** left to SQLite (and keeps every recursive walk of an AST shallow).
** Frees e and returns NULL on failure. */
static pl_expr *finish(Parser *p, pl_expr *e) {
  if (!e) return NULL;
  int h = height(e->pLeft);
  if (height(e->pRight) > h) h = height(e->pRight);
  if (height(e->pExtra) > h) h = height(e->pExtra);
  for (int i = 0; i < e->nArg; i++)
    if (height(e->apArg[i]) > h) h = height(e->apArg[i]);
  e->nHeight = h + 1;
  if (e->nHeight > PL_MAX_DEPTH) {
    unsupported(p, e->iStart, "expression tree is too large (maximum depth 1000)");
    pl_expr_free(e);
    return NULL;
  }
  return e;
}

/* A node over children l, r (either may be NULL); takes ownership of them
** whatever happens. */
static pl_expr *node2(Parser *p, int op, pl_expr *l, pl_expr *r, int iStart, int iEnd) {
  pl_expr *e = node(p, op, iStart, iEnd);
  if (!e) {
    pl_expr_free(l);
    pl_expr_free(r);
    return NULL;
  }
  e->pLeft = l;
  e->pRight = r;
  return finish(p, e);
}

/* Growable array of expressions for argument lists. */
typedef struct List {
  pl_expr **a;
  int n, nAlloc;
} List;

static int list_add(Parser *p, List *l, pl_expr *e) {
  if (l->n == l->nAlloc) {
    int nNew = l->nAlloc ? 2 * l->nAlloc : 4;
    pl_expr **aNew = pl_grow(l->a, sizeof(*aNew) * (size_t)nNew);
    if (!aNew) {
      pl_expr_free(e);
      nomem(p);
      return 0;
    }
    l->a = aNew;
    l->nAlloc = nNew;
  }
  l->a[l->n++] = e;
  return 1;
}

static void list_free(List *l) {
  for (int i = 0; i < l->n; i++) pl_expr_free(l->a[i]);
  free(l->a);
  l->a = NULL;
  l->n = l->nAlloc = 0;
}

/* ------------------------------------------------------------------ */
/* Literals                                                           */
/* ------------------------------------------------------------------ */

static int hexval(char c) {
  return isdigit((unsigned char)c) ? c - '0' : (tolower((unsigned char)c) - 'a' + 10);
}

static pl_expr *parse_number(Parser *p) {
  Tok t = p->t;
  const char *z = p->z + t.iStart;
  pl_expr *e = node(p, PL_E_INT, t.iStart, tok_end(&t));
  if (!e) return NULL;
  if (t.type == T_INTEGER && t.n > 2 && z[0] == '0' && (z[1] == 'x' || z[1] == 'X')) {
    int i = 2;
    while (i < t.n && z[i] == '0') i++;
    if (t.n - i > 16) {
      fail(p, PL_SYNTAX, t.iStart, "hex literal too big: %.*s (offset %d)", t.n > 40 ? 40 : t.n, z,
           t.iStart);
      pl_expr_free(e);
      return NULL;
    }
    uint64_t u = 0;
    for (; i < t.n; i++) u = (u << 4) | (uint64_t)hexval(z[i]);
    e->iVal = (int64_t)u; /* two's complement, as SQLite */
    e->flags |= PL_F_HEX;
  } else if (t.type == T_INTEGER) {
    uint64_t u = 0;
    int big = 0;
    for (int i = 0; i < t.n; i++) {
      unsigned d = (unsigned)(z[i] - '0');
      if (u > (UINT64_MAX - d) / 10)
        big = 1;
      else
        u = u * 10 + d;
    }
    if (big || u > (uint64_t)INT64_MAX) {
      /* too big for an integer: a REAL, except 9223372036854775808 under a
      ** minus sign (parse_unary folds that one) */
      char buf[400];
      int n = t.n < (int)sizeof buf - 1 ? t.n : (int)sizeof buf - 1;
      memcpy(buf, z, (size_t)n);
      buf[n] = 0;
      e->op = PL_E_REAL;
      e->rVal = t.n < (int)sizeof buf - 1 ? strtod(buf, NULL) : HUGE_VAL;
      e->flags |= PL_F_BIGINT;
      e->iVal = (!big && u == (uint64_t)INT64_MAX + 1); /* 1: exactly 2^63 */
    } else {
      e->iVal = (int64_t)u;
    }
  } else {
    char buf[400];
    e->op = PL_E_REAL;
    if (t.n < (int)sizeof buf) {
      memcpy(buf, z, (size_t)t.n);
      buf[t.n] = 0;
      e->rVal = strtod(buf, NULL);
    } else {
      char *zBuf = dup_bytes(p, z, t.n);
      if (!zBuf) {
        pl_expr_free(e);
        return NULL;
      }
      e->rVal = strtod(zBuf, NULL);
      free(zBuf);
    }
  }
  advance(p);
  return e;
}

static pl_expr *parse_string(Parser *p) {
  Tok t = p->t;
  pl_expr *e = node(p, PL_E_STR, t.iStart, tok_end(&t));
  if (!e) return NULL;
  e->z = tok_name(p, &t);
  if (!e->z) {
    pl_expr_free(e);
    return NULL;
  }
  e->n = (int)strlen(e->z); /* no NUL inside: the text ends at the first NUL */
  advance(p);
  return e;
}

static pl_expr *parse_blob(Parser *p) {
  Tok t = p->t;
  const char *z = p->z + t.iStart + 2;
  int nHex = t.n - 3;
  pl_expr *e = node(p, PL_E_BLOB, t.iStart, tok_end(&t));
  if (!e) return NULL;
  e->n = nHex / 2;
  e->z = pl_alloc((size_t)e->n + 1);
  if (!e->z) {
    nomem(p);
    pl_expr_free(e);
    return NULL;
  }
  for (int i = 0; i < e->n; i++) e->z[i] = (char)(hexval(z[2 * i]) << 4 | hexval(z[2 * i + 1]));
  advance(p);
  return e;
}

/* A bound parameter, numbered as sqlite3ExprAssignVarNumber() does. */
static pl_expr *parse_param(Parser *p) {
  Tok t = p->t;
  const char *z = p->z + t.iStart;
  pl_ast *a = p->a;
  if (z[0] == '#') {
    syntax_err(p, &t);
    return NULL;
  }
  pl_expr *e = node(p, PL_E_PARAM, t.iStart, tok_end(&t));
  if (!e) return NULL;
  e->zName = dup_bytes(p, z, t.n);
  if (!e->zName) goto fail;
  int64_t x = 0;
  int bAddName = 0;
  if (z[0] == '?' && t.n == 1) {
    x = a->nParam + 1;
  } else if (z[0] == '?') {
    for (int i = 1; i < t.n && x <= PL_MAX_PARAM; i++) x = x * 10 + (z[i] - '0');
    if (x < 1 || x > PL_MAX_PARAM) {
      fail(p, PL_SYNTAX, t.iStart, "variable number must be between ?1 and ?%d (offset %d)",
           PL_MAX_PARAM, t.iStart);
      goto fail;
    }
    bAddName = 1;
  } else {
    for (int i = 0; i < a->nParam; i++) {
      if (a->azParam[i] && strcmp(a->azParam[i], e->zName) == 0) {
        x = i + 1;
        break;
      }
    }
    if (x == 0) {
      x = a->nParam + 1;
      bAddName = 1;
    }
  }
  if (x > PL_MAX_PARAM) {
    unsupported(p, t.iStart, "too many SQL variables");
    goto fail;
  }
  if (x > a->nParam) {
    char **azNew = pl_grow(a->azParam, sizeof(char *) * (size_t)x);
    if (!azNew) {
      nomem(p);
      goto fail;
    }
    for (int64_t i = a->nParam; i < x; i++) azNew[i] = NULL;
    a->azParam = azNew;
    a->nParam = (int)x;
  }
  if (bAddName && !a->azParam[x - 1]) {
    a->azParam[x - 1] = dup_bytes(p, z, t.n);
    if (!a->azParam[x - 1]) goto fail;
  }
  e->iVal = x;
  advance(p);
  return e;
fail:
  pl_expr_free(e);
  return NULL;
}

/* ------------------------------------------------------------------ */
/* Expressions                                                        */
/* ------------------------------------------------------------------ */

/* Precedence levels, lowest first, from parse.y. */
enum {
  P_OR = 1,
  P_AND,
  P_NOT,
  P_EQ,
  P_LT,
  P_ESCAPE,
  P_BIT,
  P_ADD,
  P_MUL,
  P_CONCAT,
  P_COLLATE,
  P_UNARY
};

static pl_expr *parse_expr(Parser *p, int minPrec);

/* SQLite's rule for CAST affinity (sqlite3AffinityType): the first of INT,
** CHAR/CLOB/TEXT, BLOB, REAL/FLOA/DOUB found in the type name decides. */
static char affinity_of(const char *z) {
  uint32_t h = 0;
  char aff = 'C';
  for (; *z; z++) {
    h = (h << 8) + (uint32_t)tolower((unsigned char)*z);
    if (h == (('c' << 24) + ('h' << 16) + ('a' << 8) + 'r'))
      aff = 'B';
    else if (h == (('c' << 24) + ('l' << 16) + ('o' << 8) + 'b'))
      aff = 'B';
    else if (h == (('t' << 24) + ('e' << 16) + ('x' << 8) + 't'))
      aff = 'B';
    else if (h == (('b' << 24) + ('l' << 16) + ('o' << 8) + 'b') && (aff == 'C' || aff == 'E'))
      aff = 'A';
    else if (h == (('r' << 24) + ('e' << 16) + ('a' << 8) + 'l') && aff == 'C')
      aff = 'E';
    else if (h == (('f' << 24) + ('l' << 16) + ('o' << 8) + 'a') && aff == 'C')
      aff = 'E';
    else if (h == (('d' << 24) + ('o' << 16) + ('u' << 8) + 'b') && aff == 'C')
      aff = 'E';
    else if ((h & 0x00FFFFFF) == (('i' << 16) + ('n' << 8) + 't'))
      return 'D';
  }
  return aff;
}

char pl_decl_affinity(const char *zType) {
  return !zType || !zType[0] ? 'A' : affinity_of(zType);
}

/* CAST ( expr AS typetoken ): the current token is CAST. */
static pl_expr *parse_cast(Parser *p) {
  int iStart = p->t.iStart;
  advance(p);
  if (!expect(p, T_LP)) return NULL;
  pl_expr *x = parse_expr(p, 0);
  if (!x) return NULL;
  if (!expect_kw(p, K_AS)) goto fail;
  /* typetoken: ids... [ ( signed [, signed] ) ], possibly empty */
  int tStart = p->t.iStart, tEnd = tStart;
  while (is_ids(&p->t)) {
    tEnd = tok_end(&p->t);
    advance(p);
  }
  if (tEnd > tStart && p->t.type == T_LP) {
    advance(p);
    for (int k = 0;; k++) {
      if (p->t.type == T_PLUS || p->t.type == T_MINUS) advance(p);
      if (p->t.type != T_INTEGER && p->t.type != T_FLOAT) {
        syntax_err(p, &p->t);
        goto fail;
      }
      advance(p);
      if (k == 0 && p->t.type == T_COMMA) {
        advance(p);
        continue;
      }
      break;
    }
    tEnd = tok_end(&p->t);
    if (!expect(p, T_RP)) goto fail;
  }
  int iEnd = tok_end(&p->t);
  if (!expect(p, T_RP)) goto fail;
  pl_expr *e = node(p, PL_E_CAST, iStart, iEnd);
  if (!e) goto fail;
  e->pLeft = x;
  e->zName = dup_bytes(p, p->z + tStart, tEnd - tStart);
  if (!e->zName) {
    pl_expr_free(e);
    return NULL;
  }
  e->cAff = affinity_of(e->zName);
  return finish(p, e);
fail:
  pl_expr_free(x);
  return NULL;
}

/* CASE [base] WHEN a THEN b ... [ELSE c] END: the current token is CASE. */
static pl_expr *parse_case(Parser *p) {
  int iStart = p->t.iStart;
  pl_expr *base = NULL, *els = NULL;
  List l = {0};
  advance(p);
  if (!is_kw(&p->t, K_WHEN)) {
    base = parse_expr(p, 0);
    if (!base) goto fail;
  }
  if (!is_kw(&p->t, K_WHEN)) {
    syntax_err(p, &p->t);
    goto fail;
  }
  while (is_kw(&p->t, K_WHEN)) {
    advance(p);
    pl_expr *w = parse_expr(p, 0);
    if (!w || !list_add(p, &l, w)) goto fail;
    if (!expect_kw(p, K_THEN)) goto fail;
    pl_expr *r = parse_expr(p, 0);
    if (!r || !list_add(p, &l, r)) goto fail;
  }
  if (is_kw(&p->t, K_ELSE)) {
    advance(p);
    els = parse_expr(p, 0);
    if (!els) goto fail;
  }
  int iEnd = tok_end(&p->t);
  if (!expect_kw(p, K_END)) goto fail;
  pl_expr *e = node(p, PL_E_CASE, iStart, iEnd);
  if (!e) goto fail;
  e->pLeft = base;
  e->pRight = els;
  e->apArg = l.a;
  e->nArg = l.n;
  return finish(p, e);
fail:
  pl_expr_free(base);
  pl_expr_free(els);
  list_free(&l);
  return NULL;
}

/* Aggregate and window functions SQLite has that are not in the subset. */
static const char *const azOtherAgg[] = {"group_concat",
                                         "string_agg",
                                         "json_group_array",
                                         "json_group_object",
                                         "jsonb_group_array",
                                         "jsonb_group_object",
                                         "row_number",
                                         "rank",
                                         "dense_rank",
                                         "percent_rank",
                                         "cume_dist",
                                         "ntile",
                                         "lag",
                                         "lead",
                                         "first_value",
                                         "last_value",
                                         "nth_value",
                                         "median",
                                         "percentile",
                                         "percentile_cont",
                                         "percentile_disc",
                                         "mode",
                                         "stddev",
                                         "variance"};

/* name ( [DISTINCT|ALL] args | * ) : the current token is the name. */
static pl_expr *parse_call(Parser *p) {
  Tok name = p->t;
  int bDistinct = 0, bStar = 0, nAgg0 = p->nAgg;
  List l = {0};
  pl_expr *e = NULL;
  char *zName = tok_name(p, &name);
  if (!zName) return NULL;
  lower(zName);
  advance(p); /* name */
  advance(p); /* ( */
  if (p->t.type == T_STAR && peek(p, &p->t).type == T_RP) {
    bStar = 1;
    advance(p);
  } else {
    if (is_kw(&p->t, K_DISTINCT))
      bDistinct = 1, advance(p);
    else if (is_kw(&p->t, K_ALL))
      advance(p);
    if (p->t.type != T_RP) {
      for (;;) {
        pl_expr *x = parse_expr(p, 0);
        if (!x || !list_add(p, &l, x)) goto fail;
        if (p->t.type != T_COMMA) break;
        advance(p);
      }
    }
    if (is_kw(&p->t, K_ORDER)) {
      unsupported(p, p->t.iStart, "ORDER BY inside a function call");
      goto fail;
    }
  }
  int iEnd = tok_end(&p->t);
  if (!expect(p, T_RP)) goto fail;
  if (is_word(p, &p->t, "filter") && peek(p, &p->t).type == T_LP) {
    unsupported(p, p->t.iStart, "FILTER clause");
    goto fail;
  }
  if (is_word(p, &p->t, "over")) {
    Tok nx = peek(p, &p->t);
    if (nx.type == T_LP || is_id(&nx)) {
      unsupported(p, p->t.iStart, "window function");
      goto fail;
    }
  }
  int eAgg = 0;
  if (!strcmp(zName, "count"))
    eAgg = PL_AGG_COUNT;
  else if (!strcmp(zName, "sum"))
    eAgg = PL_AGG_SUM;
  else if (!strcmp(zName, "total"))
    eAgg = PL_AGG_TOTAL;
  else if (!strcmp(zName, "avg"))
    eAgg = PL_AGG_AVG;
  else if (!strcmp(zName, "min") && l.n <= 1)
    eAgg = PL_AGG_MIN;
  else if (!strcmp(zName, "max") && l.n <= 1)
    eAgg = PL_AGG_MAX;
  for (size_t i = 0; !eAgg && i < sizeof azOtherAgg / sizeof azOtherAgg[0]; i++) {
    if (!strcmp(zName, azOtherAgg[i])) {
      char zMsg[80];
      snprintf(zMsg, sizeof zMsg, "aggregate or window function %.40s()", zName);
      unsupported(p, name.iStart, zMsg);
      goto fail;
    }
  }
  if (eAgg) {
    /* what SQLite rejects is left to SQLite, with its own message */
    int nWant = eAgg == PL_AGG_COUNT ? (l.n <= 1) : (l.n == 1 && !bStar);
    if (!nWant || (bDistinct && l.n != 1)) {
      unsupported(p, name.iStart, "wrong number of arguments to an aggregate");
      goto fail;
    }
    if (p->nAgg != nAgg0) {
      unsupported(p, name.iStart, "aggregate inside an aggregate");
      goto fail;
    }
    if (p->ctx == X_WHERE || p->ctx == X_GROUP || p->ctx == X_LIMIT) {
      unsupported(p, name.iStart, "misuse of an aggregate function");
      goto fail;
    }
    p->nAgg++;
    p->a->bAgg = 1;
  } else if (bStar || bDistinct) {
    unsupported(p, name.iStart,
                bStar ? "f(*) of a function other than count"
                      : "DISTINCT in a call of a non-aggregate function");
    goto fail;
  }
  e = node(p, eAgg ? PL_E_AGG : PL_E_FUNC, name.iStart, iEnd);
  if (!e) goto fail;
  e->zName = zName;
  e->eAgg = eAgg;
  e->apArg = l.a;
  e->nArg = l.n;
  if (eAgg && l.n == 0) e->flags |= PL_F_STAR;
  if (bDistinct) e->flags |= PL_F_DISTINCT;
  return finish(p, e);
fail:
  free(zName);
  list_free(&l);
  return NULL;
}

/* A column reference: nm, nm.nm or nm.nm.nm (the current token is nm). */
static pl_expr *parse_column(Parser *p) {
  Tok parts[3];
  int n = 0;
  int iStart = p->t.iStart;
  parts[n++] = p->t;
  advance(p);
  while (n < 3 && p->t.type == T_DOT) {
    advance(p);
    if (!is_nm(&p->t)) {
      syntax_err(p, &p->t);
      return NULL;
    }
    parts[n++] = p->t;
    advance(p);
  }
  pl_expr *e = node(p, PL_E_COLUMN, iStart, tok_end(&parts[n - 1]));
  if (!e) return NULL;
  e->zName = tok_name(p, &parts[n - 1]);
  if (n >= 2) e->zTab = tok_name(p, &parts[n - 2]);
  if (n == 3) e->zDb = tok_name(p, &parts[0]);
  if (!e->zName || (n >= 2 && !e->zTab) || (n == 3 && !e->zDb)) {
    pl_expr_free(e);
    return NULL;
  }
  if (p->z[parts[n - 1].iStart] == '"') e->flags |= PL_F_QUOTED;
  if (p->ctx == X_LIMIT) {
    unsupported(p, iStart, "a column in LIMIT or OFFSET");
    pl_expr_free(e);
    return NULL;
  }
  return e;
}

/* "(SELECT ...)" at the current token (a T_LP): with PL_PARSE_SUBQUERY a
** PL_E_SUBQUERY node holding the text inside the parentheses, the tokens
** skipped to the matching ")"; otherwise unsupported as zWhat. */
static pl_expr *parse_subquery(Parser *p, const char *zWhat) {
  Tok open = p->t;
  if (!(p->flags & PL_PARSE_SUBQUERY)) {
    unsupported(p, peek(p, &open).iStart, zWhat);
    return NULL;
  }
  int depth = 0;
  for (;;) {
    if (p->t.type == T_EOF || p->t.type == T_ILLEGAL) {
      syntax_err(p, &p->t);
      return NULL;
    }
    if (p->t.type == T_VARIABLE) {
      unsupported(p, p->t.iStart, "a parameter inside a subquery");
      return NULL;
    }
    if (p->t.type == T_LP) depth++;
    if (p->t.type == T_RP && --depth == 0) break;
    advance(p);
  }
  int iEnd = tok_end(&p->t);
  advance(p);
  pl_expr *e = node(p, PL_E_SUBQUERY, open.iStart, iEnd);
  if (!e) return NULL;
  e->n = iEnd - open.iStart - 2;
  e->z = pl_alloc((size_t)e->n + 1);
  if (!e->z) {
    pl_expr_free(e);
    nomem(p);
    return NULL;
  }
  memcpy(e->z, p->z + open.iStart + 1, (size_t)e->n);
  e->z[e->n] = 0;
  return e;
}

static pl_expr *parse_primary(Parser *p) {
  Tok t = p->t;
  switch (t.type) {
  case T_INTEGER:
  case T_FLOAT:
    return parse_number(p);
  case T_BLOB:
    return parse_blob(p);
  case T_VARIABLE:
    return parse_param(p);
  case T_STRING:
    if (peek(p, &t).type == T_DOT) return parse_column(p);
    return parse_string(p);
  case T_LP: {
    Tok nx = peek(p, &t);
    if (is_kw(&nx, K_SELECT) || is_kw(&nx, K_WITH) || is_kw(&nx, K_VALUES))
      return parse_subquery(p, "subquery");
    advance(p);
    pl_expr *e = parse_expr(p, 0);
    if (!e) return NULL;
    if (p->t.type == T_COMMA) {
      unsupported(p, t.iStart, "row value");
      pl_expr_free(e);
      return NULL;
    }
    int iEnd = tok_end(&p->t);
    if (!expect(p, T_RP)) {
      pl_expr_free(e);
      return NULL;
    }
    /* the span takes the parentheses: "(a+b)" is still that expression */
    e->iStart = t.iStart;
    e->iEnd = iEnd;
    return e;
  }
  case T_KW:
    switch (t.kw) {
    case K_NULL:
      advance(p);
      return node(p, PL_E_NULL, t.iStart, tok_end(&t));
    case K_CAST:
      return parse_cast(p);
    case K_CASE:
      return parse_case(p);
    case K_EXISTS: {
      if (!(p->flags & PL_PARSE_SUBQUERY)) {
        unsupported(p, t.iStart, "EXISTS subquery");
        return NULL;
      }
      advance(p);
      Tok nx = peek(p, &p->t);
      if (p->t.type != T_LP ||
          !(is_kw(&nx, K_SELECT) || is_kw(&nx, K_WITH) || is_kw(&nx, K_VALUES))) {
        syntax_err(p, &p->t);
        return NULL;
      }
      pl_expr *q = parse_subquery(p, "EXISTS subquery");
      if (!q) return NULL;
      pl_expr *e = node(p, PL_E_EXISTS, t.iStart, q->iEnd);
      if (!e) {
        pl_expr_free(q);
        return NULL;
      }
      e->pLeft = q;
      return finish(p, e);
    }
    case K_RAISE:
      unsupported(p, t.iStart, "RAISE()");
      return NULL;
    case K_CURRENT_DATE:
    case K_CURRENT_TIME:
    case K_CURRENT_TIMESTAMP: {
      pl_expr *e = node(p, PL_E_FUNC, t.iStart, tok_end(&t));
      if (!e) return NULL;
      e->flags |= PL_F_NOPAREN;
      e->zName = tok_name(p, &t);
      if (!e->zName) {
        pl_expr_free(e);
        return NULL;
      }
      lower(e->zName);
      advance(p);
      return e;
    }
    default:
      break;
    }
    break;
  default:
    break;
  }
  if (is_nm(&t)) {
    Tok nx = peek(p, &t);
    if (nx.type == T_LP && is_id(&t)) return parse_call(p);
    if (nx.type != T_DOT && (is_word(p, &t, "true") || is_word(p, &t, "false"))) {
      pl_expr *e = node(p, PL_E_BOOL, t.iStart, tok_end(&t));
      if (e) e->iVal = is_word(p, &t, "true");
      advance(p);
      return e;
    }
    return parse_column(p);
  }
  syntax_err(p, &t);
  return NULL;
}

/* Prefix operators: NOT binds looser than comparisons, - + ~ tightest. */
static pl_expr *parse_unary(Parser *p) {
  Tok t = p->t;
  int op = 0;
  if (is_kw(&t, K_NOT))
    op = PL_E_NOT;
  else if (t.type == T_MINUS)
    op = PL_E_NEG;
  else if (t.type == T_PLUS)
    op = PL_E_POS;
  else if (t.type == T_BITNOT)
    op = PL_E_BITNOT;
  if (!op) return parse_primary(p);
  if (++p->depth > 2 * PL_MAX_DEPTH) {
    unsupported(p, t.iStart, "expression nested too deeply");
    return NULL;
  }
  advance(p);
  pl_expr *x = op == PL_E_NOT ? parse_expr(p, P_NOT) : parse_unary(p);
  p->depth--;
  if (!x) return NULL;
  if (op == PL_E_NEG && x->op == PL_E_REAL && (x->flags & PL_F_BIGINT) && x->iVal == 1) {
    /* -9223372036854775808 is the smallest integer, as in SQLite */
    x->op = PL_E_INT;
    x->flags &= ~PL_F_BIGINT;
    x->iVal = INT64_MIN;
    x->rVal = 0;
    x->iStart = t.iStart;
    return x;
  }
  if (op == PL_E_NEG && x->op == PL_E_INT && (x->flags & PL_F_HEX) && x->iVal == INT64_MIN) {
    unsupported(p, t.iStart, "hex literal too big");
    pl_expr_free(x);
    return NULL;
  }
  return node2(p, op, x, NULL, t.iStart, x->iEnd);
}

/* The binary or postfix operator at t: its precedence (0: none) and, for
** the plain binary ones, the node kind. */
static int binop(Parser *p, const Tok *t, int *pOp) {
  *pOp = 0;
  switch (t->type) {
  case T_EQ:
    *pOp = PL_E_EQ;
    return P_EQ;
  case T_NE:
    *pOp = PL_E_NE;
    return P_EQ;
  case T_LT:
    *pOp = PL_E_LT;
    return P_LT;
  case T_LE:
    *pOp = PL_E_LE;
    return P_LT;
  case T_GT:
    *pOp = PL_E_GT;
    return P_LT;
  case T_GE:
    *pOp = PL_E_GE;
    return P_LT;
  case T_BITAND:
    *pOp = PL_E_BITAND;
    return P_BIT;
  case T_BITOR:
    *pOp = PL_E_BITOR;
    return P_BIT;
  case T_LSHIFT:
    *pOp = PL_E_LSHIFT;
    return P_BIT;
  case T_RSHIFT:
    *pOp = PL_E_RSHIFT;
    return P_BIT;
  case T_PLUS:
    *pOp = PL_E_ADD;
    return P_ADD;
  case T_MINUS:
    *pOp = PL_E_SUB;
    return P_ADD;
  case T_STAR:
    *pOp = PL_E_MUL;
    return P_MUL;
  case T_SLASH:
    *pOp = PL_E_DIV;
    return P_MUL;
  case T_REM:
    *pOp = PL_E_MOD;
    return P_MUL;
  case T_CONCAT:
    *pOp = PL_E_CONCAT;
    return P_CONCAT;
  case T_PTR:
    return P_CONCAT;
  case T_KW:
    switch (t->kw) {
    case K_OR:
      *pOp = PL_E_OR;
      return P_OR;
    case K_AND:
      *pOp = PL_E_AND;
      return P_AND;
    case K_COLLATE:
      return P_COLLATE;
    case K_IS:
    case K_IN:
    case K_LIKE:
    case K_GLOB:
    case K_MATCH:
    case K_REGEXP:
    case K_BETWEEN:
    case K_ISNULL:
    case K_NOTNULL:
      return P_EQ;
    case K_NOT: {
      Tok nx = peek(p, t);
      if (nx.type == T_KW &&
          (nx.kw == K_IN || nx.kw == K_LIKE || nx.kw == K_GLOB || nx.kw == K_MATCH ||
           nx.kw == K_REGEXP || nx.kw == K_BETWEEN || nx.kw == K_NULL))
        return P_EQ;
      return 0;
    }
    default:
      return 0;
    }
  default:
    return 0;
  }
}

/* The operator at p->t applied to lhs (owned); returns the new tree. */
static pl_expr *parse_operator(Parser *p, pl_expr *lhs, int prec, int op) {
  Tok t = p->t;
  int iStart = lhs->iStart;
  if (op) { /* plain left-associative binary operator */
    advance(p);
    pl_expr *rhs = parse_expr(p, prec + 1);
    if (!rhs) goto fail;
    return node2(p, op, lhs, rhs, iStart, rhs->iEnd);
  }
  if (t.type == T_PTR) {
    unsupported(p, t.iStart, "JSON operator -> or ->>");
    goto fail;
  }
  if (is_kw(&t, K_COLLATE)) {
    advance(p);
    if (!is_ids(&p->t)) {
      syntax_err(p, &p->t);
      goto fail;
    }
    pl_expr *e = node(p, PL_E_COLLATE, iStart, tok_end(&p->t));
    if (!e) goto fail;
    e->pLeft = lhs;
    e->zName = tok_name(p, &p->t);
    if (!e->zName) {
      pl_expr_free(e);
      return NULL;
    }
    advance(p);
    return finish(p, e);
  }
  if (is_kw(&t, K_ISNULL) || is_kw(&t, K_NOTNULL)) {
    advance(p);
    return node2(p, t.kw == K_ISNULL ? PL_E_ISNULL : PL_E_NOTNULL, lhs, NULL, iStart, tok_end(&t));
  }
  if (is_kw(&t, K_IS)) {
    int bNot = 0;
    advance(p);
    if (is_kw(&p->t, K_NOT)) bNot = 1, advance(p);
    if (is_kw(&p->t, K_DISTINCT)) {
      advance(p);
      if (!expect_kw(p, K_FROM)) goto fail;
      bNot = !bNot;
    }
    pl_expr *rhs = parse_expr(p, P_EQ + 1);
    if (!rhs) goto fail;
    if (rhs->op == PL_E_NULL) { /* x IS NULL is ISNULL, as SQLite's binaryToUnaryIfNull */
      int iEnd = rhs->iEnd;
      pl_expr_free(rhs);
      return node2(p, bNot ? PL_E_NOTNULL : PL_E_ISNULL, lhs, NULL, iStart, iEnd);
    }
    if (rhs->op == PL_E_BOOL) { /* x IS TRUE is a truth test, not x IS 1 */
      int iEnd = rhs->iEnd;
      int64_t v = rhs->iVal;
      pl_expr_free(rhs);
      pl_expr *e = node2(p, PL_E_TRUTH, lhs, NULL, iStart, iEnd);
      if (e) {
        e->iVal = v;
        if (bNot) e->flags |= PL_F_NOT;
      }
      return e;
    }
    return node2(p, bNot ? PL_E_ISNOT : PL_E_IS, lhs, rhs, iStart, rhs->iEnd);
  }
  int bNot = 0;
  if (is_kw(&t, K_NOT)) {
    advance(p);
    if (is_kw(&p->t, K_NULL)) { /* x NOT NULL */
      int iEnd = tok_end(&p->t);
      advance(p);
      return node2(p, PL_E_NOTNULL, lhs, NULL, iStart, iEnd);
    }
    bNot = 1;
  }
  Tok k = p->t;
  if (is_kw(&k, K_MATCH) || is_kw(&k, K_REGEXP)) {
    unsupported(p, k.iStart, "MATCH or REGEXP");
    goto fail;
  }
  if (is_kw(&k, K_IN)) {
    List l = {0};
    advance(p);
    if (p->t.type != T_LP) {
      if (is_nm(&p->t))
        unsupported(p, p->t.iStart, "IN table");
      else
        syntax_err(p, &p->t);
      goto fail;
    }
    Tok nx = peek(p, &p->t);
    if (is_kw(&nx, K_SELECT) || is_kw(&nx, K_WITH) || is_kw(&nx, K_VALUES)) {
      pl_expr *q = parse_subquery(p, "IN subquery");
      if (!q) goto fail;
      pl_expr *e = node(p, PL_E_INSELECT, iStart, q->iEnd);
      if (!e) {
        pl_expr_free(q);
        goto fail;
      }
      e->pLeft = lhs;
      e->pRight = q;
      if (bNot) e->flags |= PL_F_NOT;
      return finish(p, e);
    }
    advance(p);
    if (p->t.type != T_RP) {
      for (;;) {
        pl_expr *x = parse_expr(p, 0);
        if (!x || !list_add(p, &l, x)) {
          list_free(&l);
          goto fail;
        }
        if (p->t.type != T_COMMA) break;
        advance(p);
      }
    }
    int iEnd = tok_end(&p->t);
    if (!expect(p, T_RP)) {
      list_free(&l);
      goto fail;
    }
    pl_expr *e = node(p, PL_E_IN, iStart, iEnd);
    if (!e) {
      list_free(&l);
      goto fail;
    }
    e->pLeft = lhs;
    e->apArg = l.a;
    e->nArg = l.n;
    if (bNot) e->flags |= PL_F_NOT;
    return finish(p, e);
  }
  if (is_kw(&k, K_BETWEEN)) {
    advance(p);
    pl_expr *lo = parse_expr(p, P_EQ);
    if (!lo) goto fail;
    if (!expect_kw(p, K_AND)) {
      pl_expr_free(lo);
      goto fail;
    }
    pl_expr *hi = parse_expr(p, P_EQ + 1);
    if (!hi) {
      pl_expr_free(lo);
      goto fail;
    }
    pl_expr *e = node(p, PL_E_BETWEEN, iStart, hi->iEnd);
    if (!e) {
      pl_expr_free(lo);
      pl_expr_free(hi);
      goto fail;
    }
    e->pLeft = lhs;
    e->pRight = lo;
    e->pExtra = hi;
    if (bNot) e->flags |= PL_F_NOT;
    return finish(p, e);
  }
  if (is_kw(&k, K_LIKE) || is_kw(&k, K_GLOB)) {
    advance(p);
    pl_expr *pat = parse_expr(p, P_EQ + 1), *esc = NULL;
    if (!pat) goto fail;
    if (is_kw(&p->t, K_ESCAPE)) {
      if (k.kw == K_GLOB) { /* glob() takes no escape: SQLite says so itself */
        unsupported(p, p->t.iStart, "GLOB with ESCAPE");
        pl_expr_free(pat);
        goto fail;
      }
      advance(p);
      esc = parse_expr(p, P_EQ + 1);
      if (!esc) {
        pl_expr_free(pat);
        goto fail;
      }
    }
    pl_expr *e = node(p, k.kw == K_LIKE ? PL_E_LIKE : PL_E_GLOB, iStart, (esc ? esc : pat)->iEnd);
    if (!e) {
      pl_expr_free(pat);
      pl_expr_free(esc);
      goto fail;
    }
    e->pLeft = lhs;
    e->pRight = pat;
    e->pExtra = esc;
    if (bNot) e->flags |= PL_F_NOT;
    return finish(p, e);
  }
  syntax_err(p, &p->t);
fail:
  pl_expr_free(lhs);
  return NULL;
}

/* An expression of operators binding at least as tight as minPrec. */
static pl_expr *parse_expr(Parser *p, int minPrec) {
  if (p->rc) return NULL;
  if (++p->depth > 2 * PL_MAX_DEPTH) {
    unsupported(p, p->t.iStart, "expression nested too deeply");
    return NULL;
  }
  pl_expr *e = parse_unary(p);
  while (e) {
    int op, prec = binop(p, &p->t, &op);
    if (!prec || prec < minPrec) break;
    e = parse_operator(p, e, prec, op);
  }
  p->depth--;
  return e;
}

/* ------------------------------------------------------------------ */
/* The statement                                                      */
/* ------------------------------------------------------------------ */

void pl_ast_free(pl_ast *a) {
  if (!a) return;
  for (int i = 0; i < a->nCol; i++) {
    pl_expr_free(a->aCol[i].pExpr);
    free(a->aCol[i].zAlias);
  }
  free(a->aCol);
  for (int i = 0; i < a->nGroup; i++) pl_expr_free(a->aGroup[i].pExpr);
  free(a->aGroup);
  for (int i = 0; i < a->nOrder; i++) pl_expr_free(a->aOrder[i].pExpr);
  free(a->aOrder);
  pl_expr_free(a->pWhere);
  pl_expr_free(a->pHaving);
  pl_expr_free(a->pLimit);
  pl_expr_free(a->pOffset);
  for (int i = 0; i < a->nParam; i++) free(a->azParam[i]);
  free(a->azParam);
  free(a->zDb);
  free(a->zTable);
  free(a->zAlias);
  for (int i = 0; i < a->nFrom; i++) {
    free(a->aFrom[i].zDb);
    free(a->aFrom[i].zTable);
    free(a->aFrom[i].zAlias);
    pl_expr_free(a->aFrom[i].pOn);
  }
  free(a->aFrom);
  free(a->zSql);
  free(a);
}

/* Append one element of size sz to *pa (count *pn); 0 when out of memory. */
static void *append(Parser *p, void *pa, int *pn, size_t sz) {
  void **ppa = pa;
  char *aNew = pl_grow(*ppa, sz * (size_t)(*pn + 1));
  if (!aNew) {
    nomem(p);
    return NULL;
  }
  *ppa = aNew;
  memset(aNew + sz * (size_t)*pn, 0, sz);
  return aNew + sz * (size_t)(*pn)++;
}

static int parse_result_columns(Parser *p) {
  pl_ast *a = p->a;
  p->ctx = X_RESULT;
  for (;;) {
    Tok t = p->t;
    pl_expr *e = NULL;
    if (t.type == T_STAR) {
      e = node(p, PL_E_STAR, t.iStart, tok_end(&t));
      advance(p);
    } else if (is_nm(&t) && peek(p, &t).type == T_DOT) {
      Tok d = peek(p, &t), s = peek(p, &d);
      if (s.type == T_STAR) {
        e = node(p, PL_E_STAR, t.iStart, tok_end(&s));
        if (e && !(e->zTab = tok_name(p, &t))) {
          pl_expr_free(e);
          e = NULL;
        }
        p->t = s;
        advance(p);
      } else {
        e = parse_expr(p, 0);
      }
    } else {
      e = parse_expr(p, 0);
    }
    if (!e) return 0;
    pl_rescol *c = append(p, &a->aCol, &a->nCol, sizeof *c);
    if (!c) {
      pl_expr_free(e);
      return 0;
    }
    c->pExpr = e;
    c->iStart = e->iStart;
    c->iEnd = e->iEnd;
    if (e->op == PL_E_STAR) {
      a->bStar = 1;
    } else {
      Tok al = p->t;
      int bAs = is_kw(&al, K_AS);
      if (bAs) {
        advance(p);
        al = p->t;
      }
      if (bAs ? is_nm(&al) : is_ids(&al)) {
        if (!(c->zAlias = tok_name(p, &al))) return 0;
        c->iEnd = tok_end(&al);
        advance(p);
      } else if (bAs) {
        syntax_err(p, &al);
        return 0;
      }
    }
    if (p->t.type != T_COMMA) return 1;
    advance(p);
  }
}

/* One table of the FROM list: [schema.]table [[AS] alias], into *it. */
static int parse_from_item(Parser *p, pl_from *it) {
  Tok t = p->t;
  if (t.type == T_LP) {
    unsupported(p, t.iStart, "subquery or parenthesised FROM");
    return 0;
  }
  if (!is_nm(&t)) {
    syntax_err(p, &t);
    return 0;
  }
  it->iStart = t.iStart;
  it->iEnd = tok_end(&t);
  advance(p);
  if (p->t.type == T_DOT) {
    advance(p);
    if (!is_nm(&p->t)) {
      syntax_err(p, &p->t);
      return 0;
    }
    if (!(it->zDb = tok_name(p, &t))) return 0;
    t = p->t;
    it->iEnd = tok_end(&t);
    advance(p);
  }
  if (!(it->zTable = tok_name(p, &t))) return 0;
  if (p->t.type == T_LP) {
    unsupported(p, p->t.iStart, "table-valued function");
    return 0;
  }
  /* alias, unless the word is a WINDOW clause (WINDOW name AS ...) */
  Tok al = p->t;
  int bAs = is_kw(&al, K_AS);
  if (bAs) {
    advance(p);
    al = p->t;
  }
  int bWindow = 0;
  if (!bAs && is_word(p, &al, "window")) {
    Tok n1 = peek(p, &al), n2 = peek(p, &n1);
    bWindow = is_id(&n1) && is_kw(&n2, K_AS);
  }
  if (!bWindow && (bAs ? is_nm(&al) : is_ids(&al))) {
    if (!(it->zAlias = tok_name(p, &al))) return 0;
    it->iEnd = tok_end(&al);
    advance(p);
  } else if (bAs) {
    syntax_err(p, &al);
    return 0;
  }
  Tok n = p->t, n1 = peek(p, &n);
  if (is_kw(&n, K_INDEXED) || (is_kw(&n, K_NOT) && is_kw(&n1, K_INDEXED))) {
    unsupported(p, n.iStart, "INDEXED BY");
    return 0;
  }
  return 1;
}

/* The join operator before the next FROM item, as SQLite's joinop: ","
** or [CROSS | INNER | LEFT [OUTER]] JOIN; 0 at the end of the list, -1
** after an error. The others (NATURAL, RIGHT, FULL, ...) are unsupported. */
static int parse_joinop(Parser *p) {
  Tok t = p->t;
  if (t.type == T_COMMA) {
    advance(p);
    return PL_JOIN_COMMA;
  }
  if (is_kw(&t, K_JOIN)) {
    advance(p);
    return PL_JOIN_INNER;
  }
  if (t.type != T_KW || aKeyword[t.kw].cls != C_JOIN) return 0;
  Tok t1 = peek(p, &t), t2 = peek(p, &t1);
  int e = 0;
  if (is_kw(&t1, K_JOIN)) {
    e = is_kw(&t, K_INNER)   ? PL_JOIN_INNER
        : is_kw(&t, K_CROSS) ? PL_JOIN_CROSS
        : is_kw(&t, K_LEFT)  ? PL_JOIN_LEFT
                             : 0;
    if (e) p->t = t1;
  } else if (is_kw(&t, K_LEFT) && is_kw(&t1, K_OUTER) && is_kw(&t2, K_JOIN)) {
    e = PL_JOIN_LEFT;
    p->t = t2;
  }
  if (!e) {
    unsupported(p, t.iStart, "this kind of join (NATURAL, RIGHT, FULL)");
    return -1;
  }
  advance(p);
  return e;
}

static int parse_from(Parser *p) {
  pl_ast *a = p->a;
  if (!is_kw(&p->t, K_FROM)) {
    if (p->t.type == T_EOF || p->t.type == T_SEMI || is_kw(&p->t, K_WHERE) ||
        is_kw(&p->t, K_GROUP) || is_kw(&p->t, K_HAVING) || is_kw(&p->t, K_ORDER) ||
        is_kw(&p->t, K_LIMIT) || is_kw(&p->t, K_UNION) || is_kw(&p->t, K_EXCEPT) ||
        is_kw(&p->t, K_INTERSECT) || is_word(p, &p->t, "window"))
      unsupported(p, p->t.iStart, "SELECT without FROM");
    else
      syntax_err(p, &p->t);
    return 0;
  }
  advance(p);
  a->iFromStart = p->t.iStart;
  int eJoin = PL_JOIN_FIRST;
  for (;;) {
    pl_from *it = append(p, &a->aFrom, &a->nFrom, sizeof *it);
    if (!it) return 0;
    it->eJoin = eJoin;
    if (!parse_from_item(p, it)) return 0;
    a->iFromEnd = it->iEnd;
    Tok n = p->t;
    if (is_kw(&n, K_ON)) {
      if (eJoin == PL_JOIN_FIRST || eJoin == PL_JOIN_COMMA) {
        unsupported(p, n.iStart,
                    eJoin == PL_JOIN_FIRST ? "ON or USING without a join"
                                           : "ON without a JOIN keyword");
        return 0;
      }
      advance(p);
      int ctx = p->ctx;
      p->ctx = X_WHERE; /* no aggregates, as in WHERE */
      it->pOn = parse_expr(p, 0);
      p->ctx = ctx;
      if (!it->pOn) return 0;
      a->iFromEnd = it->pOn->iEnd;
    } else if (is_kw(&n, K_USING)) {
      unsupported(p, n.iStart, eJoin == PL_JOIN_FIRST ? "ON or USING without a join" : "USING");
      return 0;
    } else if (eJoin == PL_JOIN_LEFT) {
      /* SQLite takes LEFT JOIN without ON; the planner does not need it */
      unsupported(p, n.iStart, "LEFT JOIN without ON");
      return 0;
    }
    eJoin = parse_joinop(p);
    if (eJoin < 0) return 0;
    if (eJoin == 0) break;
  }
  /* the first item, also as the single-table fields */
  const pl_from *f = &a->aFrom[0];
  a->iTabStart = f->iStart;
  a->iTabEnd = f->iEnd;
  if ((f->zDb && !(a->zDb = dup_bytes(p, f->zDb, (int)strlen(f->zDb)))) ||
      !(a->zTable = dup_bytes(p, f->zTable, (int)strlen(f->zTable))) ||
      (f->zAlias && !(a->zAlias = dup_bytes(p, f->zAlias, (int)strlen(f->zAlias)))))
    return 0;
  return 1;
}

/* Position number of a GROUP/ORDER BY term as sqlite3ExprIsInteger sees
** it (a 32-bit integer literal under any unary + and -); 0 if none. */
static int term_int(const pl_expr *e, int *pv) {
  if (e->op == PL_E_INT && e->iVal >= 0 && e->iVal <= 0x7fffffff) {
    *pv = (int)e->iVal;
    return 1;
  }
  if ((e->op == PL_E_POS || e->op == PL_E_NEG) && term_int(e->pLeft, pv)) {
    if (e->op == PL_E_NEG) *pv = -*pv;
    return 1;
  }
  return 0;
}

/* Resolve a GROUP BY or ORDER BY term to a result column, as SQLite's
** resolveOrderGroupBy(). */
static int resolve_term(Parser *p, pl_term *t, int bOrder, int iTerm) {
  pl_ast *a = p->a;
  const pl_expr *e2 = t->pExpr;
  while (e2->op == PL_E_COLLATE) e2 = e2->pLeft;
  if (bOrder && e2->op == PL_E_COLUMN && !e2->zTab) {
    int k = pl_ast_alias(a, e2->zName);
    if (k) {
      t->iCol = k;
      return 1;
    }
  }
  int v;
  if (term_int(e2, &v)) {
    t->iPos = v;
    if (v < 1 || (!a->bStar && v > a->nCol)) {
      char zMsg[120];
      snprintf(zMsg, sizeof zMsg, "term %d of %s BY out of range - should be between 1 and %d",
               iTerm + 1, bOrder ? "ORDER" : "GROUP", a->nCol);
      unsupported(p, t->pExpr->iStart, zMsg);
      return 0;
    }
    if (!a->bStar) t->iCol = v;
    return 1;
  }
  for (int j = 0; j < a->nCol; j++)
    if (pl_expr_equal(t->pExpr, a->aCol[j].pExpr)) t->iCol = j + 1;
  return 1;
}

static int parse_terms(Parser *p, pl_term **pa, int *pn, int bOrder) {
  for (;;) {
    pl_expr *e = parse_expr(p, 0);
    if (!e) return 0;
    pl_term *t = append(p, pa, pn, sizeof *t);
    if (!t) {
      pl_expr_free(e);
      return 0;
    }
    t->pExpr = e;
    if (bOrder) {
      if (is_kw(&p->t, K_ASC))
        advance(p);
      else if (is_kw(&p->t, K_DESC))
        t->bDesc = 1, advance(p);
      if (is_kw(&p->t, K_NULLS)) {
        advance(p);
        if (is_kw(&p->t, K_FIRST))
          t->eNulls = 1;
        else if (is_kw(&p->t, K_LAST))
          t->eNulls = 2;
        else {
          syntax_err(p, &p->t);
          return 0;
        }
        advance(p);
      }
    }
    if (p->t.type != T_COMMA) return 1;
    advance(p);
  }
}

static int parse_select(Parser *p) {
  pl_ast *a = p->a;
  Tok t = p->t;
  if (!is_kw(&t, K_SELECT)) {
    if (t.type == T_EOF || t.type == T_SEMI)
      unsupported(p, t.iStart, "empty statement");
    else if (is_kw(&t, K_WITH))
      unsupported(p, t.iStart, "WITH clause");
    else if (is_kw(&t, K_VALUES))
      unsupported(p, t.iStart, "VALUES");
    else if (t.type == T_KW || t.type == T_ID)
      unsupported(p, t.iStart, "not a SELECT statement");
    else
      syntax_err(p, &t);
    return 0;
  }
  advance(p);
  if (is_kw(&p->t, K_DISTINCT)) {
    unsupported(p, p->t.iStart, "SELECT DISTINCT");
    return 0;
  }
  if (is_kw(&p->t, K_ALL)) advance(p);
  if (!parse_result_columns(p) || !parse_from(p)) return 0;
  if (is_kw(&p->t, K_WHERE)) {
    advance(p);
    p->ctx = X_WHERE;
    if (!(a->pWhere = parse_expr(p, 0))) return 0;
  }
  if (is_kw(&p->t, K_GROUP)) {
    advance(p);
    if (!expect_kw(p, K_BY)) return 0;
    p->ctx = X_GROUP;
    if (!parse_terms(p, &a->aGroup, &a->nGroup, 0)) return 0;
    a->bAgg = 1;
  }
  if (is_kw(&p->t, K_HAVING)) {
    advance(p);
    p->ctx = X_HAVING;
    if (!(a->pHaving = parse_expr(p, 0))) return 0;
  }
  if (is_word(p, &p->t, "window")) {
    unsupported(p, p->t.iStart, "WINDOW clause");
    return 0;
  }
  if (is_kw(&p->t, K_ORDER)) {
    advance(p);
    if (!expect_kw(p, K_BY)) return 0;
    p->ctx = X_ORDER;
    if (!parse_terms(p, &a->aOrder, &a->nOrder, 1)) return 0;
  }
  if (is_kw(&p->t, K_LIMIT)) {
    advance(p);
    p->ctx = X_LIMIT;
    if (!(a->pLimit = parse_expr(p, 0))) return 0;
    if (is_kw(&p->t, K_OFFSET)) {
      advance(p);
      if (!(a->pOffset = parse_expr(p, 0))) return 0;
    } else if (p->t.type == T_COMMA) { /* LIMIT offset, count */
      advance(p);
      a->pOffset = a->pLimit;
      if (!(a->pLimit = parse_expr(p, 0))) return 0;
    }
  }
  t = p->t;
  if (is_kw(&t, K_UNION) || is_kw(&t, K_EXCEPT) || is_kw(&t, K_INTERSECT)) {
    unsupported(p, t.iStart, "compound SELECT");
    return 0;
  }
  if (t.type == T_SEMI) {
    while (p->t.type == T_SEMI) advance(p);
    if (p->t.type != T_EOF) {
      unsupported(p, p->t.iStart, "more than one statement");
      return 0;
    }
  } else if (t.type != T_EOF) {
    syntax_err(p, &t);
    return 0;
  }
  /* semantic checks SQLite makes, left to SQLite */
  if (a->pHaving && !a->bAgg) {
    unsupported(p, a->pHaving->iStart, "HAVING clause on a non-aggregate query");
    return 0;
  }
  for (int i = 0; i < a->nGroup; i++)
    if (!resolve_term(p, &a->aGroup[i], 0, i)) return 0;
  for (int i = 0; i < a->nOrder; i++)
    if (!resolve_term(p, &a->aOrder[i], 1, i)) return 0;
  return 1;
}

int pl_parse(const char *zSql, int nSql, pl_ast **ppAst, pl_err *pErr) {
  return pl_parse_opt(zSql, nSql, 0, ppAst, pErr);
}

int pl_parse_opt(const char *zSql, int nSql, int flags, pl_ast **ppAst, pl_err *pErr) {
  Parser p;
  memset(&p, 0, sizeof p);
  p.flags = flags;
  *ppAst = NULL;
  if (pErr) {
    pErr->iPos = 0;
    pErr->zMsg[0] = 0;
  }
  p.pErr = pErr;
  size_t n = 0;
  if (!zSql) zSql = "";
  if (nSql < 0)
    n = strlen(zSql);
  else
    while (n < (size_t)nSql && zSql[n]) n++;
  if (n > 0x3fffffff) {
    fail(&p, PL_UNSUPPORTED, 0, "not pushed down: statement too long");
    return p.rc;
  }
  p.a = pl_alloc(sizeof *p.a);
  if (!p.a || !(p.a->zSql = pl_alloc(n + 1))) {
    free(p.a);
    fail(&p, PL_NOMEM, 0, "out of memory");
    return p.rc;
  }
  memcpy(p.a->zSql, zSql, n);
  p.a->zSql[n] = 0;
  p.a->nSql = (int)n;
  p.z = p.a->zSql;
  p.t = lex(p.z, 0);
  if (!parse_select(&p) && !p.rc) fail(&p, PL_SYNTAX, p.t.iStart, "syntax error");
  if (p.rc) {
    pl_ast_free(p.a);
    return p.rc;
  }
  *ppAst = p.a;
  return PL_OK;
}

/* ------------------------------------------------------------------ */
/* Helpers over the AST                                               */
/* ------------------------------------------------------------------ */

const char *pl_expr_text(const pl_ast *a, const pl_expr *e, int *pn) {
  *pn = e->iEnd - e->iStart;
  return a->zSql + e->iStart;
}

int pl_expr_children(const pl_expr *e, const pl_expr **aChild, int nMax) {
  int n = 0;
  if (e->nArg + 3 > nMax) return -1;
  if (e->pLeft) aChild[n++] = e->pLeft;
  if (e->pRight) aChild[n++] = e->pRight;
  if (e->pExtra) aChild[n++] = e->pExtra;
  for (int i = 0; i < e->nArg; i++) aChild[n++] = e->apArg[i];
  for (int i = 1; i < n; i++) /* insertion sort: a handful of children */
    for (int j = i; j > 0 && aChild[j]->iStart < aChild[j - 1]->iStart; j--) {
      const pl_expr *x = aChild[j];
      aChild[j] = aChild[j - 1];
      aChild[j - 1] = x;
    }
  return n;
}

int pl_expr_has_op(const pl_expr *e, int op) {
  if (!e) return 0;
  if (e->op == op) return 1;
  if (pl_expr_has_op(e->pLeft, op) || pl_expr_has_op(e->pRight, op) ||
      pl_expr_has_op(e->pExtra, op))
    return 1;
  for (int i = 0; i < e->nArg; i++)
    if (pl_expr_has_op(e->apArg[i], op)) return 1;
  return 0;
}

int pl_ast_alias(const pl_ast *a, const char *zName) {
  for (int i = 0; i < a->nCol; i++)
    if (a->aCol[i].zAlias && strcasecmp(a->aCol[i].zAlias, zName) == 0) return i + 1;
  return 0;
}

static int name_eq(const char *x, const char *y) {
  if (!x || !y) return x == y;
  return strcasecmp(x, y) == 0;
}

int pl_expr_equal(const pl_expr *a, const pl_expr *b) {
  if (!a || !b) return a == b;
  const int mask = ~(PL_F_HEX | PL_F_QUOTED);
  if (a->op != b->op || (a->flags & mask) != (b->flags & mask) || a->nArg != b->nArg) return 0;
  switch (a->op) {
  case PL_E_INT:
  case PL_E_BOOL:
  case PL_E_PARAM:
    if (a->iVal != b->iVal) return 0;
    break;
  case PL_E_TRUTH:
    if (a->iVal != b->iVal) return 0;
    break;
  case PL_E_REAL:
    if (a->rVal != b->rVal) return 0;
    break;
  case PL_E_STR:
  case PL_E_BLOB:
  case PL_E_SUBQUERY:
    if (a->n != b->n || memcmp(a->z, b->z, (size_t)a->n) != 0) return 0;
    break;
  case PL_E_CAST:
    if (a->cAff != b->cAff) return 0;
    break;
  case PL_E_COLUMN:
  case PL_E_STAR:
  case PL_E_AGG:
  case PL_E_FUNC:
  case PL_E_COLLATE:
    if (!name_eq(a->zName, b->zName) || !name_eq(a->zTab, b->zTab) || !name_eq(a->zDb, b->zDb))
      return 0;
    break;
  default:
    break;
  }
  if (!pl_expr_equal(a->pLeft, b->pLeft) || !pl_expr_equal(a->pRight, b->pRight) ||
      !pl_expr_equal(a->pExtra, b->pExtra))
    return 0;
  for (int i = 0; i < a->nArg; i++)
    if (!pl_expr_equal(a->apArg[i], b->apArg[i])) return 0;
  return 1;
}

static int refs_add(pl_expr ***pa, int *pn, int *pnAlloc, pl_expr *e) {
  if (*pn == *pnAlloc) {
    int nNew = *pnAlloc ? 2 * *pnAlloc : 8;
    pl_expr **aNew = pl_grow(*pa, sizeof(*aNew) * (size_t)nNew);
    if (!aNew) return -ENOMEM;
    *pa = aNew;
    *pnAlloc = nNew;
  }
  (*pa)[(*pn)++] = e;
  return 0;
}

int pl_expr_refs(const pl_expr *e, int flags, pl_refs *r) {
  if (!e) return 0;
  pl_expr *m = (pl_expr *)e; /* the lists point into the caller's tree */
  int rc = 0;
  if (e->op == PL_E_COLUMN) return refs_add(&r->aCol, &r->nCol, &r->nColAlloc, m);
  if (e->op == PL_E_AGG) {
    rc = refs_add(&r->aAgg, &r->nAgg, &r->nAggAlloc, m);
    if (rc || (flags & PL_REFS_OUTER)) return rc;
  }
  /* children in source order: CASE base, WHEN/THEN, ELSE; x IN (list); ... */
  if (!rc) rc = pl_expr_refs(e->pLeft, flags, r);
  if (e->op == PL_E_CASE) {
    for (int i = 0; !rc && i < e->nArg; i++) rc = pl_expr_refs(e->apArg[i], flags, r);
    if (!rc) rc = pl_expr_refs(e->pRight, flags, r);
    return rc;
  }
  if (!rc) rc = pl_expr_refs(e->pRight, flags, r);
  if (!rc) rc = pl_expr_refs(e->pExtra, flags, r);
  for (int i = 0; !rc && i < e->nArg; i++) rc = pl_expr_refs(e->apArg[i], flags, r);
  return rc;
}

void pl_refs_free(pl_refs *r) {
  free(r->aAgg);
  free(r->aCol);
  memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------------ */
/* Debug dumps                                                        */
/* ------------------------------------------------------------------ */

typedef struct Buf {
  char *z;
  size_t n, nAlloc;
  int bErr;
} Buf;

static void buf_append(Buf *b, const char *z, size_t n) {
  if (b->bErr) return;
  if (b->n + n + 1 > b->nAlloc) {
    size_t nNew = (b->nAlloc + n + 1) * 2;
    char *zNew = pl_grow(b->z, nNew);
    if (!zNew) {
      b->bErr = 1;
      return;
    }
    b->z = zNew;
    b->nAlloc = nNew;
  }
  memcpy(b->z + b->n, z, n);
  b->n += n;
  b->z[b->n] = 0;
}

static void buf_printf(Buf *b, const char *zFmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(Buf *b, const char *zFmt, ...) {
  char tmp[128];
  va_list ap;
  va_start(ap, zFmt);
  int n = vsnprintf(tmp, sizeof tmp, zFmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  buf_append(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}
static void buf_puts(Buf *b, const char *z) {
  buf_append(b, z, strlen(z));
}

const char *pl_kind_name(int op) {
  static const char *const az[] = {[PL_E_INT] = "INT",
                                   [PL_E_REAL] = "REAL",
                                   [PL_E_STR] = "STR",
                                   [PL_E_BLOB] = "BLOB",
                                   [PL_E_NULL] = "NULL",
                                   [PL_E_BOOL] = "BOOL",
                                   [PL_E_PARAM] = "PARAM",
                                   [PL_E_COLUMN] = "COLUMN",
                                   [PL_E_STAR] = "STAR",
                                   [PL_E_AGG] = "agg",
                                   [PL_E_FUNC] = "fn",
                                   [PL_E_OR] = "OR",
                                   [PL_E_AND] = "AND",
                                   [PL_E_NOT] = "NOT",
                                   [PL_E_EQ] = "=",
                                   [PL_E_NE] = "!=",
                                   [PL_E_LT] = "<",
                                   [PL_E_LE] = "<=",
                                   [PL_E_GT] = ">",
                                   [PL_E_GE] = ">=",
                                   [PL_E_IS] = "IS",
                                   [PL_E_ISNOT] = "IS NOT",
                                   [PL_E_ISNULL] = "ISNULL",
                                   [PL_E_NOTNULL] = "NOTNULL",
                                   [PL_E_TRUTH] = "TRUTH",
                                   [PL_E_IN] = "IN",
                                   [PL_E_BETWEEN] = "BETWEEN",
                                   [PL_E_LIKE] = "LIKE",
                                   [PL_E_GLOB] = "GLOB",
                                   [PL_E_BITAND] = "&",
                                   [PL_E_BITOR] = "|",
                                   [PL_E_LSHIFT] = "<<",
                                   [PL_E_RSHIFT] = ">>",
                                   [PL_E_ADD] = "+",
                                   [PL_E_SUB] = "-",
                                   [PL_E_MUL] = "*",
                                   [PL_E_DIV] = "/",
                                   [PL_E_MOD] = "%",
                                   [PL_E_CONCAT] = "||",
                                   [PL_E_NEG] = "neg",
                                   [PL_E_POS] = "pos",
                                   [PL_E_BITNOT] = "~",
                                   [PL_E_COLLATE] = "COLLATE",
                                   [PL_E_CAST] = "CAST",
                                   [PL_E_CASE] = "CASE",
                                   [PL_E_SUBQUERY] = "SUBQUERY",
                                   [PL_E_EXISTS] = "EXISTS",
                                   [PL_E_INSELECT] = "INSELECT"};
  if (op <= 0 || op >= PL_E_MAX_ || !az[op]) return "?";
  return az[op];
}

/* The shortest %g form that reads back as the same double. */
static void dump_real(Buf *b, double r) {
  char tmp[40];
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, r);
    if (strtod(tmp, NULL) == r) break;
  }
  buf_puts(b, tmp);
  if (!strpbrk(tmp, ".eni")) buf_puts(b, ".0"); /* 1e10 prints 10000000000 */
}

static void dump(Buf *b, const pl_expr *e) {
  if (!e) {
    buf_puts(b, "nil");
    return;
  }
  switch (e->op) {
  case PL_E_INT:
    buf_printf(b, "%lld", (long long)e->iVal);
    return;
  case PL_E_REAL:
    dump_real(b, e->rVal);
    return;
  case PL_E_STR:
    buf_puts(b, "'");
    for (int i = 0; i < e->n; i++) {
      if (e->z[i] == '\'')
        buf_puts(b, "''");
      else
        buf_append(b, e->z + i, 1);
    }
    buf_puts(b, "'");
    return;
  case PL_E_BLOB:
    buf_puts(b, "x'");
    for (int i = 0; i < e->n; i++) buf_printf(b, "%02X", (unsigned char)e->z[i]);
    buf_puts(b, "'");
    return;
  case PL_E_NULL:
    buf_puts(b, "NULL");
    return;
  case PL_E_BOOL:
    buf_puts(b, e->iVal ? "TRUE" : "FALSE");
    return;
  case PL_E_PARAM:
    if (strcmp(e->zName, "?") == 0)
      buf_printf(b, "?#%lld", (long long)e->iVal);
    else
      buf_printf(b, "%s#%lld", e->zName, (long long)e->iVal);
    return;
  case PL_E_SUBQUERY:
    buf_puts(b, "(SUBQUERY "), buf_append(b, e->z, (size_t)e->n), buf_puts(b, ")");
    return;
  case PL_E_COLUMN:
  case PL_E_STAR:
    if (e->zDb) buf_puts(b, e->zDb), buf_puts(b, ".");
    if (e->zTab) buf_puts(b, e->zTab), buf_puts(b, ".");
    buf_puts(b, e->op == PL_E_STAR ? "*" : e->zName);
    return;
  default:
    break;
  }
  buf_puts(b, "(");
  switch (e->op) {
  case PL_E_AGG:
  case PL_E_FUNC:
    buf_printf(b, "%s %s", pl_kind_name(e->op), e->zName);
    if (e->flags & PL_F_DISTINCT) buf_puts(b, " DISTINCT");
    if (e->op == PL_E_AGG && e->nArg == 0) buf_puts(b, " *");
    break;
  case PL_E_TRUTH:
    buf_printf(b, "IS%s %s", e->flags & PL_F_NOT ? " NOT" : "", e->iVal ? "TRUE" : "FALSE");
    break;
  case PL_E_COLLATE:
    buf_printf(b, "COLLATE %s", e->zName);
    break;
  case PL_E_CAST:
    buf_puts(b, "CAST "), buf_puts(b, e->zName), buf_printf(b, " %c", e->cAff);
    break;
  default:
    if (e->flags & PL_F_NOT) buf_puts(b, "NOT ");
    buf_puts(b, pl_kind_name(e->op));
  }
  if (e->op == PL_E_CASE) {
    if (e->pLeft) buf_puts(b, " "), dump(b, e->pLeft);
    for (int i = 0; i + 1 < e->nArg; i += 2) {
      buf_puts(b, " (WHEN ");
      dump(b, e->apArg[i]);
      buf_puts(b, " ");
      dump(b, e->apArg[i + 1]);
      buf_puts(b, ")");
    }
    if (e->pRight) buf_puts(b, " (ELSE "), dump(b, e->pRight), buf_puts(b, ")");
  } else {
    if (e->pLeft) buf_puts(b, " "), dump(b, e->pLeft);
    if (e->pRight) buf_puts(b, " "), dump(b, e->pRight);
    if (e->pExtra) buf_puts(b, " "), dump(b, e->pExtra);
    for (int i = 0; i < e->nArg; i++) buf_puts(b, " "), dump(b, e->apArg[i]);
  }
  buf_puts(b, ")");
}

char *pl_expr_dump(const pl_expr *e) {
  Buf b = {0};
  dump(&b, e);
  buf_append(&b, "", 0);
  if (b.bErr) {
    free(b.z);
    return NULL;
  }
  return b.z;
}

static void dump_terms(Buf *b, const char *zLabel, const pl_term *a, int n, int bOrder) {
  if (!n) return;
  buf_puts(b, zLabel);
  for (int i = 0; i < n; i++) {
    buf_puts(b, i ? "; " : " ");
    dump(b, a[i].pExpr);
    if (a[i].iCol)
      buf_printf(b, " =#%d", a[i].iCol);
    else if (a[i].iPos)
      buf_printf(b, " @%d", a[i].iPos);
    if (bOrder && a[i].bDesc) buf_puts(b, " DESC");
    if (a[i].eNulls) buf_puts(b, a[i].eNulls == 1 ? " NULLS FIRST" : " NULLS LAST");
  }
  buf_puts(b, "\n");
}

char *pl_ast_dump(const pl_ast *a) {
  Buf b = {0};
  buf_puts(&b, "SELECT");
  for (int i = 0; i < a->nCol; i++) {
    buf_puts(&b, i ? "; " : " ");
    dump(&b, a->aCol[i].pExpr);
    if (a->aCol[i].zAlias) buf_puts(&b, " AS "), buf_puts(&b, a->aCol[i].zAlias);
  }
  buf_puts(&b, "\nFROM ");
  if (a->zDb) buf_puts(&b, a->zDb), buf_puts(&b, ".");
  buf_puts(&b, a->zTable ? a->zTable : "?");
  if (a->zAlias) buf_puts(&b, " AS "), buf_puts(&b, a->zAlias);
  static const char *const azJoin[] = {"", ", ", " JOIN ", " CROSS JOIN ", " LEFT JOIN "};
  for (int i = 1; i < a->nFrom; i++) {
    const pl_from *f = &a->aFrom[i];
    buf_puts(&b, azJoin[f->eJoin]);
    if (f->zDb) buf_puts(&b, f->zDb), buf_puts(&b, ".");
    buf_puts(&b, f->zTable);
    if (f->zAlias) buf_puts(&b, " AS "), buf_puts(&b, f->zAlias);
    if (f->pOn) buf_puts(&b, " ON "), dump(&b, f->pOn);
  }
  buf_puts(&b, "\n");
  if (a->pWhere) buf_puts(&b, "WHERE "), dump(&b, a->pWhere), buf_puts(&b, "\n");
  dump_terms(&b, "GROUP BY", a->aGroup, a->nGroup, 0);
  if (a->pHaving) buf_puts(&b, "HAVING "), dump(&b, a->pHaving), buf_puts(&b, "\n");
  dump_terms(&b, "ORDER BY", a->aOrder, a->nOrder, 1);
  if (a->pLimit) buf_puts(&b, "LIMIT "), dump(&b, a->pLimit), buf_puts(&b, "\n");
  if (a->pOffset) buf_puts(&b, "OFFSET "), dump(&b, a->pOffset), buf_puts(&b, "\n");
  if (a->nParam) {
    buf_printf(&b, "PARAMS %d", a->nParam);
    for (int i = 0; i < a->nParam; i++)
      buf_puts(&b, " "), buf_puts(&b, a->azParam[i] ? a->azParam[i] : "-");
    buf_puts(&b, "\n");
  }
  buf_append(&b, "", 0);
  if (b.bErr) {
    free(b.z);
    return NULL;
  }
  return b.z;
}
