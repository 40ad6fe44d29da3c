/*
** planner/parse.h - the SQL parser of the whole-query planner.
**
** pl_parse() turns one SELECT statement of the pushdown subset into an AST:
**
**   SELECT [ALL] expr [[AS] name], ... | * | t.*
**   FROM item [joinop item [ON expr]] ...
**     item:   [schema.]table [[AS] alias]
**     joinop: , | [INNER] JOIN | CROSS JOIN | LEFT [OUTER] JOIN
**   [WHERE expr] [GROUP BY expr, ...] [HAVING expr]
**   [ORDER BY expr [ASC|DESC] [NULLS FIRST|LAST], ...]
**   [LIMIT expr [OFFSET expr] | LIMIT expr, expr] [;]
**
** with SQLite's expression grammar and operator precedence (lowest first:
** OR, AND, NOT, = == != <> IS IN LIKE GLOB BETWEEN ISNULL NOTNULL, < <= > >=,
** & | << >>, + -, * / %, ||, COLLATE, unary - + ~). Keywords are
** case-insensitive and SQLite's non-reserved keywords (key, first, desc,
** replace, ...) work as identifiers where SQLite accepts them.
**
** Three outcomes, never anything else:
**   PL_OK           *ppAst is the statement.
**   PL_UNSUPPORTED  valid-looking SQL outside the subset (NATURAL, RIGHT or
**                   FULL joins, USING, ON after a comma, a subquery,
**                   a window function, DISTINCT, a compound, WITH, another
**                   statement, ...) or SQL that SQLite rejects on semantic
**                   grounds (misused aggregate, ORDER BY term out of range):
**                   run the statement as ordinary SQL; SQLite gives the
**                   right answer or its own error. Never an error by itself.
**   PL_SYNTAX       malformed SQL. err says what and where. Handing the
**                   statement to SQLite instead is always safe too (it then
**                   reports its own message).
**   PL_NOMEM        out of memory.
** err.zMsg says what (for PL_UNSUPPORTED: what was not supported) and
** err.iPos is the byte offset in zSql where it was found.
**
** Every node keeps the byte span [iStart, iEnd) of its source text in
** pl_ast.zSql (which equals the caller's text byte for byte), so any
** sub-expression can be pasted back as SQL for SQLite to evaluate: the text
** of a node is always a complete expression that parses to that node (spans
** of parenthesised expressions include their parentheses). Paste it inside
** parentheses when embedding it in a larger expression.
**
** Memory: plain libc malloc/free; no SQLite dependency. The AST owns every
** string and node in it; pl_ast_free() frees all of it.
*/
#ifndef CSQ_PLANNER_PARSE_H
#define CSQ_PLANNER_PARSE_H

#include <stdint.h>

/* Outcomes of pl_parse(). */
#define PL_OK          0
#define PL_SYNTAX      1
#define PL_UNSUPPORTED 2
#define PL_NOMEM       3

/* Deepest expression tree accepted (SQLite's default SQLITE_MAX_EXPR_DEPTH);
** deeper ones are PL_UNSUPPORTED, so recursive walkers of an AST are safe. */
#define PL_MAX_DEPTH 1000
/* Highest ?N accepted (SQLite's default SQLITE_MAX_VARIABLE_NUMBER). */
#define PL_MAX_PARAM 32766

/* Node kinds (pl_expr.op). Children are in pLeft, pRight, pExtra and
** apArg[0..nArg); any not listed for a kind is NULL/0.
**
**   kind            meaning / fields
**   PL_E_INT        integer literal (decimal or hex) iVal. Hex literals are
**                   two's complement: 0xFFFFFFFFFFFFFFFF is -1 (PL_F_HEX).
**                   "-9223372036854775808" is folded into one INT node.
**   PL_E_REAL       real literal rVal; also a decimal integer literal too big
**                   for 64 bits (PL_F_BIGINT), as SQLite does.
**   PL_E_STR        string literal, decoded: z (NUL-terminated), n bytes.
**   PL_E_BLOB       blob literal x'..': z, n bytes.
**   PL_E_NULL       NULL.
**   PL_E_BOOL       TRUE / FALSE: iVal 1 / 0. (SQLite resolves a column
**                   named "true"/"false" first; the planner may check.)
**   PL_E_PARAM      bound parameter: iVal = its number as SQLite assigns it
**                   (sqlite3_bind_* index); zName = its text ("?", "?3",
**                   ":x", "@x", "$x").
**   PL_E_COLUMN     column reference zName, qualified by zTab (or NULL) and
**                   zDb (or NULL). Names are dequoted, case kept. PL_F_QUOTED:
**                   written "x" (SQLite makes it a string if no such column).
**                   A bare name may also be a result-column alias, which only
**                   schema knowledge can tell (SQLite prefers the column in
**                   WHERE/GROUP BY/HAVING); see pl_ast_alias().
**   PL_E_STAR       * (zTab NULL) or zTab.* ; only as a result column.
**   PL_E_AGG        aggregate call: eAgg (PL_AGG_*), zName lower case, the
**                   argument in apArg[0] (nArg 1) or none for count(*)
**                   (nArg 0, PL_F_STAR). PL_F_DISTINCT: agg(DISTINCT x).
**                   min/max with one argument are aggregates.
**   PL_E_FUNC       scalar function call: zName lower case, apArg/nArg.
**                   PL_F_NOPAREN: CURRENT_DATE/CURRENT_TIME/CURRENT_TIMESTAMP.
**                   The parser does not know user-defined aggregates: the
**                   planner should check that a FUNC name is scalar.
**   PL_E_OR, PL_E_AND                      pLeft, pRight
**   PL_E_NOT                               pLeft
**   PL_E_EQ (= ==), PL_E_NE (!= <>), PL_E_LT, PL_E_LE, PL_E_GT, PL_E_GE,
**   PL_E_IS (IS, IS NOT DISTINCT FROM), PL_E_ISNOT (IS NOT, IS DISTINCT FROM)
**                                          pLeft, pRight
**   PL_E_ISNULL     pLeft IS NULL / ISNULL           pLeft
**   PL_E_NOTNULL    pLeft IS NOT NULL / NOTNULL / NOT NULL
**   PL_E_TRUTH      pLeft IS [NOT] TRUE|FALSE: iVal 1 (TRUE) / 0 (FALSE),
**                   PL_F_NOT for IS NOT. SQLite's truth test, not IS 1.
**   PL_E_IN         pLeft [NOT] IN (apArg...) (nArg may be 0); PL_F_NOT.
**   PL_E_BETWEEN    pLeft [NOT] BETWEEN pRight AND pExtra; PL_F_NOT.
**   PL_E_LIKE, PL_E_GLOB
**                   pLeft [NOT] LIKE pRight [ESCAPE pExtra]; PL_F_NOT.
**   PL_E_BITAND, PL_E_BITOR, PL_E_LSHIFT, PL_E_RSHIFT,
**   PL_E_ADD, PL_E_SUB, PL_E_MUL, PL_E_DIV, PL_E_MOD, PL_E_CONCAT
**                                          pLeft, pRight
**   PL_E_NEG, PL_E_POS (unary +: drops affinity in SQLite), PL_E_BITNOT
**                                          pLeft
**   PL_E_COLLATE    pLeft COLLATE zName (dequoted)
**   PL_E_CAST       CAST(pLeft AS zName): zName is the type as written
**                   (may be ""), cAff its affinity by SQLite's rules:
**                   'A' blob, 'B' text, 'C' numeric, 'D' integer, 'E' real.
**   PL_E_CASE       CASE [pLeft] WHEN apArg[0] THEN apArg[1] ...
**                   [ELSE pRight] END; nArg is even.
**
** Only with PL_PARSE_SUBQUERY (pl_parse_opt), subqueries in expressions,
** kept as text (their SELECT is not parsed; a parameter inside one is
** PL_UNSUPPORTED, since its number depends on the text around it):
**   PL_E_SUBQUERY   "(SELECT ...)": z/n the text inside the parentheses;
**                   the span covers the parentheses. As an operand, a scalar
**                   subquery.
**   PL_E_EXISTS     EXISTS pLeft (a SUBQUERY); NOT EXISTS is NOT over it.
**   PL_E_INSELECT   pLeft [NOT] IN pRight (a SUBQUERY); PL_F_NOT.
*/
enum pl_kind {
  PL_E_INT = 1,
  PL_E_REAL,
  PL_E_STR,
  PL_E_BLOB,
  PL_E_NULL,
  PL_E_BOOL,
  PL_E_PARAM,
  PL_E_COLUMN,
  PL_E_STAR,
  PL_E_AGG,
  PL_E_FUNC,
  PL_E_OR,
  PL_E_AND,
  PL_E_NOT,
  PL_E_EQ,
  PL_E_NE,
  PL_E_LT,
  PL_E_LE,
  PL_E_GT,
  PL_E_GE,
  PL_E_IS,
  PL_E_ISNOT,
  PL_E_ISNULL,
  PL_E_NOTNULL,
  PL_E_TRUTH,
  PL_E_IN,
  PL_E_BETWEEN,
  PL_E_LIKE,
  PL_E_GLOB,
  PL_E_BITAND,
  PL_E_BITOR,
  PL_E_LSHIFT,
  PL_E_RSHIFT,
  PL_E_ADD,
  PL_E_SUB,
  PL_E_MUL,
  PL_E_DIV,
  PL_E_MOD,
  PL_E_CONCAT,
  PL_E_NEG,
  PL_E_POS,
  PL_E_BITNOT,
  PL_E_COLLATE,
  PL_E_CAST,
  PL_E_CASE,
  PL_E_SUBQUERY,
  PL_E_EXISTS,
  PL_E_INSELECT,
  PL_E_MAX_ /* one past the last kind */
};

/* pl_expr.flags */
#define PL_F_NOT      0x01 /* NOT IN, NOT BETWEEN, NOT LIKE/GLOB, IS NOT TRUE */
#define PL_F_DISTINCT 0x02 /* agg(DISTINCT x) */
#define PL_F_STAR     0x04 /* count(*) */
#define PL_F_BIGINT   0x08 /* REAL written as an integer too big for 64 bits */
#define PL_F_HEX      0x10 /* INT written in hex */
#define PL_F_QUOTED   0x20 /* COLUMN written as "name" */
#define PL_F_NOPAREN  0x40 /* FUNC written without parentheses (CURRENT_DATE) */

/* Aggregates of the subset (pl_expr.eAgg). */
enum pl_agg { PL_AGG_COUNT = 1, PL_AGG_SUM, PL_AGG_TOTAL, PL_AGG_AVG, PL_AGG_MIN, PL_AGG_MAX };

typedef struct pl_expr pl_expr;
struct pl_expr {
  int op;           /* PL_E_* */
  int flags;        /* PL_F_* */
  int iStart, iEnd; /* source text: pl_ast.zSql[iStart..iEnd) */
  int nHeight;      /* 1 for a leaf, 1 + the tallest child otherwise */
  pl_expr *pLeft;   /* children: see the table above */
  pl_expr *pRight;
  pl_expr *pExtra;
  pl_expr **apArg;
  int nArg;
  int eAgg;     /* PL_E_AGG: PL_AGG_* */
  char *zName;  /* COLUMN, PARAM, AGG, FUNC, COLLATE, CAST */
  char *zTab;   /* COLUMN, STAR: table qualifier or NULL */
  char *zDb;    /* COLUMN: schema qualifier or NULL */
  char *z;      /* STR, BLOB: the bytes (NUL-terminated) */
  int n;        /* STR, BLOB: number of bytes */
  int64_t iVal; /* INT, BOOL, PARAM, TRUTH */
  double rVal;  /* REAL */
  char cAff;    /* CAST */
};

/* A result column: pExpr [AS zAlias]; [iStart, iEnd) covers the alias too. */
typedef struct pl_rescol {
  pl_expr *pExpr;
  char *zAlias; /* dequoted alias or NULL */
  int iStart, iEnd;
} pl_rescol;

/* A GROUP BY or ORDER BY term. iCol > 0 says the term is result column
** aCol[iCol-1] as SQLite resolves it: by position number, by alias (ORDER BY
** only, alias first, COLLATE ignored) or by being the same expression
** (pl_expr_equal). Position numbers are checked against nCol unless the
** list has a * (bStar): then iCol is 0 and iPos holds the number, to be
** mapped once * is expanded. */
typedef struct pl_term {
  pl_expr *pExpr;
  int iCol;   /* 1-based result column, or 0 */
  int iPos;   /* the position number as written, or 0 */
  int bDesc;  /* ORDER BY: DESC */
  int eNulls; /* ORDER BY: 0 default, 1 NULLS FIRST, 2 NULLS LAST */
} pl_term;

/* How a FROM item joins the items before it (pl_from.eJoin). */
#define PL_JOIN_FIRST 0 /* the first item */
#define PL_JOIN_COMMA 1 /* , */
#define PL_JOIN_INNER 2 /* JOIN, INNER JOIN */
#define PL_JOIN_CROSS 3 /* CROSS JOIN (an inner join whose order SQLite keeps) */
#define PL_JOIN_LEFT  4 /* LEFT [OUTER] JOIN (always with ON) */

/* One table of the FROM list; [iStart, iEnd) covers [schema.]table [AS
** alias], not the ON expression (whose span is its own). */
typedef struct pl_from {
  char *zDb; /* or NULL */
  char *zTable;
  char *zAlias; /* or NULL */
  int iStart, iEnd;
  int eJoin;    /* PL_JOIN_*: how it joins the items before it */
  pl_expr *pOn; /* ON expression, or NULL (none for the first item or a comma) */
} pl_from;

/* One parsed SELECT statement. */
typedef struct pl_ast {
  char *zSql; /* private NUL-terminated copy of the statement text */
  int nSql;
  pl_rescol *aCol; /* the result columns */
  int nCol;
  int bStar;    /* some result column is * or t.* */
  char *zDb;    /* the first FROM item [zDb.]zTable [AS zAlias] (copies of */
  char *zTable; /* aFrom[0]'s); zDb, zAlias may be NULL */
  char *zAlias;
  int iTabStart, iTabEnd; /* span of the first FROM item */
  pl_from *aFrom;         /* every FROM item, in order (nFrom >= 1) */
  int nFrom;
  int iFromStart, iFromEnd; /* span of the whole FROM list, ON expressions included */
  pl_expr *pWhere;          /* or NULL */
  pl_term *aGroup;          /* GROUP BY terms */
  int nGroup;
  pl_expr *pHaving; /* or NULL */
  pl_term *aOrder;  /* ORDER BY terms */
  int nOrder;
  pl_expr *pLimit;  /* or NULL */
  pl_expr *pOffset; /* or NULL (LIMIT a, b: pLimit = b, pOffset = a) */
  int bAgg;         /* an aggregate query: an aggregate call, or GROUP BY */
  int nParam;       /* highest parameter number */
  char **azParam;   /* azParam[i-1]: name of parameter i, NULL if anonymous */
} pl_ast;

/* Where and why a parse did not give PL_OK. */
typedef struct pl_err {
  int iPos;       /* byte offset in the statement */
  char zMsg[240]; /* a message for a person */
} pl_err;

/* Parse the first nSql bytes of zSql (nSql < 0: up to the NUL; a NUL byte
** ends the text as in SQLite). On PL_OK *ppAst is a new AST the caller frees
** with pl_ast_free(); otherwise *ppAst is NULL and *pErr (if pErr is not
** NULL) says why. zSql is not kept. */
int pl_parse(const char *zSql, int nSql, pl_ast **ppAst, pl_err *pErr);

/* pl_parse with options: PL_PARSE_SUBQUERY accepts subqueries in
** expressions as PL_E_SUBQUERY, PL_E_EXISTS and PL_E_INSELECT nodes, for
** callers that hand them to SQLite as text. */
#define PL_PARSE_SUBQUERY 1
int pl_parse_opt(const char *zSql, int nSql, int flags, pl_ast **ppAst, pl_err *pErr);

/* Free an AST (NULL is fine). */
void pl_ast_free(pl_ast *p);

/* Free one expression tree (NULL is fine); for trees the caller built or
** detached from an AST. */
void pl_expr_free(pl_expr *p);

/* The affinity of a column declared with type zType, by SQLite's rules
** (datatype3 section 3.1): 'A' BLOB (also no type, NULL or ""), 'B' TEXT,
** 'C' NUMERIC, 'D' INTEGER, 'E' REAL. */
char pl_decl_affinity(const char *zType);

/* 1 if e (NULL is fine) or any node under it is of kind op (PL_E_*). */
int pl_expr_has_op(const pl_expr *e, int op);
/* The children of e (pLeft, pRight, pExtra, apArg) in the order of their
** text, into aChild[0..nMax): their number, or -1 if e has more than nMax
** - 3 arguments. For pasting e's text back with its children rewritten. */
int pl_expr_children(const pl_expr *e, const pl_expr **aChild, int nMax);

/* The source text of p: a pointer into a->zSql and its length *pn. */
const char *pl_expr_text(const pl_ast *a, const pl_expr *p, int *pn);

/* The result column (1-based) whose alias is zName (case-insensitive), or 0.
** The first match wins, as in SQLite. */
int pl_ast_alias(const pl_ast *a, const char *zName);

/* 1 if a and b are the same expression: spans and spelling are ignored (=
** and ==, 0x10 and 16, quoting, (a) and a); names of columns, tables,
** functions and collations compare case-insensitively; string and blob
** values exactly. Column references compare by name only (t.a is not a). */
int pl_expr_equal(const pl_expr *a, const pl_expr *b);

/* Lists of nodes inside one expression (pointers into the AST, not owned). */
typedef struct pl_refs {
  pl_expr **aAgg; /* aggregate calls (PL_E_AGG), in source order */
  int nAgg, nAggAlloc;
  pl_expr **aCol; /* column references (PL_E_COLUMN), in source order */
  int nCol, nColAlloc;
} pl_refs;

/* pl_expr_refs() flags. PL_REFS_OUTER: skip column references inside
** aggregate arguments (what a host expression over merged partials needs). */
#define PL_REFS_OUTER 1

/* Append the aggregate calls and column references of p (NULL is fine) to
** *r, which starts zeroed or from an earlier call. Aggregate arguments are
** not searched for aggregates (the parser rejects nested ones). Returns 0
** or -ENOMEM. Free the arrays with pl_refs_free(). */
int pl_expr_refs(const pl_expr *p, int flags, pl_refs *r);
void pl_refs_free(pl_refs *r);

/* Debug text of an expression as an S-expression, e.g. "(+ a (agg sum b))",
** or of a whole statement, one clause per line. malloc'd (caller frees), or
** NULL when out of memory. The formats are what tests/unit/test_parse.c
** expects; they are for people and tests, not for machines. */
char *pl_expr_dump(const pl_expr *p);
char *pl_ast_dump(const pl_ast *a);

/* Name of a node kind ("+", "AND", "INT", ...). */
const char *pl_kind_name(int op);

/* Testing hook: when > 0, the n-th allocation from now on fails
** (counts down; 0 = off). Lets tests prove every path handles PL_NOMEM. */
extern int pl_parse_fail_alloc;

#endif /* CSQ_PLANNER_PARSE_H */
