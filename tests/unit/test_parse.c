/*
** tests/unit/test_parse.c - the planner's SQL parser (planner/parse.h):
** AST dumps for every construct and precedence case, TPC-H queries,
** unsupported and syntax-error detection with positions, the span
** property (each node's text parses back to that node), a differential
** precedence check against SQLite itself (our tree, fully parenthesised,
** must evaluate like the original text), truncations and mutations that
** must never crash, and every allocation failing in turn.
*/
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "planner/parse.h"
#include "tests/unit/helpers.h"

/* ---- helpers ---- */

/* Parse "SELECT <expr> FROM t" and return the dump of the first column. */
static char *expr_dump(const char *zExpr, int *pRc, pl_err *pErr) {
  char zSql[2000];
  snprintf(zSql, sizeof zSql, "SELECT %s FROM t", zExpr);
  pl_ast *a = NULL;
  *pRc = pl_parse(zSql, -1, &a, pErr);
  if (*pRc != PL_OK) return NULL;
  char *z = pl_expr_dump(a->aCol[0].pExpr);
  /* the top node's span is the whole expression text */
  int n;
  const char *zt = pl_expr_text(a, a->aCol[0].pExpr, &n);
  CHECK(n == (int)strlen(zExpr) && memcmp(zt, zExpr, (size_t)n) == 0, "span of %s is %.*s", zExpr,
        n, zt);
  pl_ast_free(a);
  return z;
}

static const struct {
  const char *zExpr, *zDump;
} aExpr[] = {
    /* literals */
    {"1", "1"},
    {"0x10", "16"},
    {"0xFFFFFFFFFFFFFFFF", "-1"},
    {"0x7fffffffffffffff", "9223372036854775807"},
    {"9223372036854775807", "9223372036854775807"},
    {"9223372036854775808", "9.223372036854776e+18"},
    {"-9223372036854775808", "-9223372036854775808"},
    {"-(9223372036854775808)", "-9223372036854775808"},
    {"- 9223372036854775809", "(neg 9.223372036854776e+18)"},
    {"123456789012345678901234567890", "1.2345678901234568e+29"},
    {"1.5", "1.5"},
    {".5", "0.5"},
    {"5.", "5.0"},
    {"1e3", "1000.0"},
    {"2.5E-3", "0.0025"},
    {"'it''s'", "'it''s'"},
    {"''", "''"},
    {"x'00fF'", "x'00FF'"},
    {"X''", "x''"},
    {"NULL", "NULL"},
    {"TRUE", "TRUE"},
    {"false", "FALSE"},
    {"?", "?#1"},
    {"?5", "?5#5"},
    {":name", ":name#1"},
    {"@x", "@x#1"},
    {"$v", "$v#1"},
    {"$a::b(c)", "$a::b(c)#1"},
    /* names */
    {"a", "a"},
    {"t.a", "t.a"},
    {"main.t.a", "main.t.a"},
    {"\"we\"\"ird\"", "we\"ird"},
    {"[x y]", "x y"},
    {"`b`", "b"},
    {"'t'.a", "t.a"},
    {"key + first + last + desc + end + replace + left + indexed",
     "(+ (+ (+ (+ (+ (+ (+ key first) last) desc) end) replace) left) indexed)"},
    {"\"true\"", "true"},
    /* precedence */
    {"1 + 2 * 3", "(+ 1 (* 2 3))"},
    {"1 * 2 + 3", "(+ (* 1 2) 3)"},
    {"1 - 2 - 3", "(- (- 1 2) 3)"},
    {"a || b * c", "(* (|| a b) c)"},
    {"a * b || c", "(* a (|| b c))"},
    {"a + b << 1", "(<< (+ a b) 1)"},
    {"a & b | c << d >> e", "(>> (<< (| (& a b) c) d) e)"},
    {"a < b & c", "(< a (& b c))"},
    {"a = b < c", "(= a (< b c))"},
    {"a < b = c", "(= (< a b) c)"},
    {"a = b = c", "(= (= a b) c)"},
    {"a == b", "(= a b)"},
    {"a <> b", "(!= a b)"},
    {"a != b", "(!= a b)"},
    {"a OR b AND c", "(OR a (AND b c))"},
    {"a AND b OR c", "(OR (AND a b) c)"},
    {"NOT a AND b", "(AND (NOT a) b)"},
    {"NOT a = b", "(NOT (= a b))"},
    {"NOT NOT a", "(NOT (NOT a))"},
    {"a = NOT b", "(= a (NOT b))"},
    {"-a * b", "(* (neg a) b)"},
    {"- - a", "(neg (neg a))"},
    {"+a", "(pos a)"},
    {"~a + 1", "(+ (~ a) 1)"},
    {"-a COLLATE nocase", "(COLLATE nocase (neg a))"},
    {"a || b COLLATE nocase", "(|| a (COLLATE nocase b))"},
    {"a COLLATE \"binary\" = b", "(= (COLLATE binary a) b)"},
    {"a COLLATE 'rtrim'", "(COLLATE rtrim a)"},
    {"(a + b) * c", "(* (+ a b) c)"},
    {"((a))", "a"},
    {"a - -1", "(- a (neg 1))"},
    {"a % 3 / 2", "(/ (% a 3) 2)"},
    /* comparisons, IS */
    {"a IS b", "(IS a b)"},
    {"a IS NOT b", "(IS NOT a b)"},
    {"a IS NULL", "(ISNULL a)"},
    {"a IS NOT NULL", "(NOTNULL a)"},
    {"a ISNULL", "(ISNULL a)"},
    {"a NOTNULL", "(NOTNULL a)"},
    {"a NOT NULL", "(NOTNULL a)"},
    {"a IS (NULL)", "(ISNULL a)"},
    {"a IS TRUE", "(IS TRUE a)"},
    {"a IS NOT FALSE", "(IS NOT FALSE a)"},
    {"a IS DISTINCT FROM b", "(IS NOT a b)"},
    {"a IS NOT DISTINCT FROM b", "(IS a b)"},
    {"a IS b + 1", "(IS a (+ b 1))"},
    {"a = b IS NULL", "(ISNULL (= a b))"},
    {"a < b IS c", "(IS (< a b) c)"},
    /* IN, BETWEEN, LIKE */
    {"a IN (1, 2, 3)", "(IN a 1 2 3)"},
    {"a NOT IN ('x')", "(NOT IN a 'x')"},
    {"a IN ()", "(IN a)"},
    {"a + 1 IN (b, c * 2)", "(IN (+ a 1) b (* c 2))"},
    {"a BETWEEN 1 AND 2", "(BETWEEN a 1 2)"},
    {"a NOT BETWEEN b + 1 AND c * 2", "(NOT BETWEEN a (+ b 1) (* c 2))"},
    {"a BETWEEN 1 AND 2 AND b", "(AND (BETWEEN a 1 2) b)"},
    {"a BETWEEN 1 AND 2 = 1", "(= (BETWEEN a 1 2) 1)"},
    {"5 BETWEEN 1 AND 10 BETWEEN 0 AND 1", "(BETWEEN (BETWEEN 5 1 10) 0 1)"},
    {"a BETWEEN b < c AND d", "(BETWEEN a (< b c) d)"},
    {"a LIKE 'x%'", "(LIKE a 'x%')"},
    {"a NOT LIKE 'x%' ESCAPE '\\'", "(NOT LIKE a 'x%' '\\')"},
    {"a GLOB '*x'", "(GLOB a '*x')"},
    {"a NOT GLOB b", "(NOT GLOB a b)"},
    {"a LIKE b || c", "(LIKE a (|| b c))"},
    {"a LIKE b = 1", "(= (LIKE a b) 1)"},
    {"a LIKE b < c", "(LIKE a (< b c))"},
    {"like LIKE glob", "(LIKE like glob)"},
    /* CASE, CAST */
    {"CASE WHEN a THEN 1 ELSE 2 END", "(CASE (WHEN a 1) (ELSE 2))"},
    {"CASE a WHEN 1 THEN 'x' WHEN 2 THEN 'y' END", "(CASE a (WHEN 1 'x') (WHEN 2 'y'))"},
    {"case when a > 1 then b end + 1", "(+ (CASE (WHEN (> a 1) b)) 1)"},
    {"CAST(a AS INTEGER)", "(CAST INTEGER D a)"},
    {"CAST(a AS text)", "(CAST text B a)"},
    {"CAST(a AS DECIMAL(10, 2))", "(CAST DECIMAL(10, 2) C a)"},
    {"CAST(a AS double precision)", "(CAST double precision E a)"},
    {"CAST(a AS BLOB)", "(CAST BLOB A a)"},
    {"CAST(a AS)", "(CAST  C a)"},
    {"CAST(a AS VARCHAR(+5))", "(CAST VARCHAR(+5) B a)"},
    /* functions and aggregates */
    {"count(*)", "(agg count *)"},
    {"COUNT(a)", "(agg count a)"},
    {"count(DISTINCT a)", "(agg count DISTINCT a)"},
    {"Sum(a * (1 - b))", "(agg sum (* a (- 1 b)))"},
    {"total(a)", "(agg total a)"},
    {"avg(ALL a)", "(agg avg a)"},
    {"min(a)", "(agg min a)"},
    {"max(a) + min(b)", "(+ (agg max a) (agg min b))"},
    {"min(a, b)", "(fn min a b)"},
    {"max(a, b, 3)", "(fn max a b 3)"},
    {"abs(a)", "(fn abs a)"},
    {"substr(a, 1, 2)", "(fn substr a 1 2)"},
    {"random()", "(fn random)"},
    {"replace(a, 'x', 'y')", "(fn replace a 'x' 'y')"},
    {"like(a, b)", "(fn like a b)"},
    {"coalesce(sum(a), 0)", "(fn coalesce (agg sum a) 0)"},
    {"sum(a) / count(*)", "(/ (agg sum a) (agg count *))"},
    {"current_date", "(fn current_date)"},
    {"CURRENT_TIMESTAMP", "(fn current_timestamp)"},
    {"\"count\"(*)", "(agg count *)"},
};

/* Whole statements and their dumps. */
static const struct {
  const char *zSql, *zDump;
} aStmt[] = {
    {"select * from t", "SELECT *\nFROM t\n"},
    /* joins */
    {"select a from t, u", "SELECT a\nFROM t, u\n"},
    {"select t.a, v.b from main.t x, u as y join v on x.a = v.b and y.c > 1",
     "SELECT t.a; v.b\nFROM main.t AS x, u AS y JOIN v ON (AND (= x.a v.b) (> y.c 1))\n"},
    {"select * from t inner join u on (t.a = u.a) cross join v left join w on w.k = v.k",
     "SELECT *\nFROM t JOIN u ON (= t.a u.a) CROSS JOIN v LEFT JOIN w ON (= w.k v.k)\n"},
    {"select 1 from t left outer join u on 1 cross join v on v.a = t.a where t.b",
     "SELECT 1\nFROM t LEFT JOIN u ON 1 CROSS JOIN v ON (= v.a t.a)\nWHERE t.b\n"},
    {"select a from t join u", "SELECT a\nFROM t JOIN u\n"},
    {"select count(*) over from t", "SELECT (agg count *) AS over\nFROM t\n"},
    {"SELECT ALL a AS x, b y, c 'z', t.*, * FROM main.t AS u;",
     "SELECT a AS x; b AS y; c AS z; t.*; *\nFROM main.t AS u\n"},
    {"select a from t u where u.a > 1", "SELECT a\nFROM t AS u\nWHERE (> u.a 1)\n"},
    {"select a desc, b asc, c first from t offset",
     "SELECT a AS desc; b AS asc; c AS first\nFROM t AS offset\n"},
    {"select a, count(*) from t group by a having count(*) > 1 order by 2 desc, a",
     "SELECT a; (agg count *)\nFROM t\nGROUP BY a =#1\nHAVING (> (agg count *) 1)\nORDER BY 2 =#2 "
     "DESC; a =#1\n"},
    {"select a as x, b from t order by x collate nocase desc nulls last, b nulls first, 1",
     "SELECT a AS x; b\nFROM t\nORDER BY (COLLATE nocase x) =#1 DESC NULLS LAST; b =#2 NULLS "
     "FIRST; 1 =#1\n"},
    {"select a from t order by -1 + 2, 99999999999",
     "SELECT a\nFROM t\nORDER BY (+ (neg 1) 2); 99999999999\n"},
    {"select * from t order by 3", "SELECT *\nFROM t\nORDER BY 3 @3\n"},
    {"select a x from t group by x, 1", "SELECT a AS x\nFROM t\nGROUP BY x; 1 =#1\n"},
    {"select a from t limit 10", "SELECT a\nFROM t\nLIMIT 10\n"},
    {"select a from t limit 10 offset ?", "SELECT a\nFROM t\nLIMIT 10\nOFFSET ?#1\nPARAMS 1 -\n"},
    {"select a from t limit 5, 10", "SELECT a\nFROM t\nLIMIT 10\nOFFSET 5\n"},
    {"select ?, ?3, ?, :a, ?1, :a, @b, $a from t",
     "SELECT ?#1; ?3#3; ?#4; :a#5; ?1#1; :a#5; @b#6; $a#7\nFROM t\nPARAMS 7 ?1 - ?3 - :a @b $a\n"},
    {"select :a, ?1 from t", "SELECT :a#1; ?1#1\nFROM t\nPARAMS 1 :a\n"},
    {"select a from t -- comment\n /* more */ ;  ; ", "SELECT a\nFROM t\n"},
    {"select a from t where x = 1 /* unterminated", "SELECT a\nFROM t\nWHERE (= x 1)\n"},
    {"SeLeCt A FrOm T wHeRe A iS nOt NuLl", "SELECT A\nFROM T\nWHERE (NOTNULL A)\n"},
    {"select a from \"my table\" as [u]", "SELECT a\nFROM my table AS u\n"},
    {"select a from t window", "SELECT a\nFROM t AS window\n"},
    {"select 0x1g from t", "SELECT 1 AS g\nFROM t\n"},
    {"select count(*) from t having count(*) > 0",
     "SELECT (agg count *)\nFROM t\nHAVING (> (agg count *) 0)\n"},
    /* TPC-H Q1 */
    {"select l_returnflag, l_linestatus, sum(l_quantity) as sum_qty,\n"
     "  sum(l_extendedprice) as sum_base_price,\n"
     "  sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,\n"
     "  sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,\n"
     "  avg(l_quantity) as avg_qty, avg(l_extendedprice) as avg_price,\n"
     "  avg(l_discount) as avg_disc, count(*) as count_order\n"
     "from lineitem\n"
     "where l_shipdate <= date('1998-12-01', '-90 day')\n"
     "group by l_returnflag, l_linestatus\n"
     "order by l_returnflag, l_linestatus;",
     "SELECT l_returnflag; l_linestatus; (agg sum l_quantity) AS sum_qty; (agg sum "
     "l_extendedprice) AS "
     "sum_base_price; (agg sum (* l_extendedprice (- 1 l_discount))) AS sum_disc_price; (agg sum "
     "(* (* "
     "l_extendedprice (- 1 l_discount)) (+ 1 l_tax))) AS sum_charge; (agg avg l_quantity) AS "
     "avg_qty; "
     "(agg avg l_extendedprice) AS avg_price; (agg avg l_discount) AS avg_disc; (agg count *) AS "
     "count_order\n"
     "FROM lineitem\n"
     "WHERE (<= l_shipdate (fn date '1998-12-01' '-90 day'))\n"
     "GROUP BY l_returnflag =#1; l_linestatus =#2\n"
     "ORDER BY l_returnflag =#1; l_linestatus =#2\n"},
    /* TPC-H Q6 */
    {"select sum(l_extendedprice * l_discount) as revenue from lineitem\n"
     "where l_shipdate >= '1994-01-01' and l_shipdate < '1995-01-01'\n"
     "  and l_discount between 0.06 - 0.01 and 0.06 + 0.01 and l_quantity < 24",
     "SELECT (agg sum (* l_extendedprice l_discount)) AS revenue\n"
     "FROM lineitem\n"
     "WHERE (AND (AND (AND (>= l_shipdate '1994-01-01') (< l_shipdate '1995-01-01')) (BETWEEN "
     "l_discount (- 0.06 0.01) (+ 0.06 0.01))) (< l_quantity 24))\n"},
    /* TPC-H Q12, its lineitem part */
    {"select l_shipmode,\n"
     "  sum(case when l_orderkey % 2 = 0 then 1 else 0 end) as high_line_count,\n"
     "  sum(case when l_orderkey % 2 <> 0 then 1 else 0 end) as low_line_count\n"
     "from lineitem\n"
     "where l_shipmode in ('MAIL', 'SHIP') and l_commitdate < l_receiptdate\n"
     "  and l_shipdate < l_commitdate and l_receiptdate >= date '1994-01-01'\n"
     "  and l_receiptdate < '1995-01-01'\n"
     "group by l_shipmode order by l_shipmode",
     NULL /* "date '1994-01-01'" is an alias-less syntax error in SQLite: checked below */},
    {"select l_shipmode,\n"
     "  sum(case when l_orderkey % 2 = 0 then 1 else 0 end) as high_line_count\n"
     "from lineitem\n"
     "where l_shipmode in ('MAIL', 'SHIP') and l_commitdate < l_receiptdate\n"
     "  and l_shipdate < l_commitdate and l_receiptdate >= '1994-01-01'\n"
     "group by l_shipmode order by l_shipmode",
     "SELECT l_shipmode; (agg sum (CASE (WHEN (= (% l_orderkey 2) 0) 1) (ELSE 0))) AS "
     "high_line_count\n"
     "FROM lineitem\n"
     "WHERE (AND (AND (AND (IN l_shipmode 'MAIL' 'SHIP') (< l_commitdate l_receiptdate)) (< "
     "l_shipdate "
     "l_commitdate)) (>= l_receiptdate '1994-01-01'))\n"
     "GROUP BY l_shipmode =#1\n"
     "ORDER BY l_shipmode =#1\n"},
    /* Q14-like: a ratio of conditional sums over one table */
    {"select 100.00 * sum(case when l_partkey like 'PROMO%' then l_extendedprice * (1 - "
     "l_discount) "
     "else 0 end) / sum(l_extendedprice * (1 - l_discount)) as promo_revenue from lineitem "
     "where l_shipdate >= '1995-09-01' and l_shipdate < date('1995-09-01', '+1 month')",
     "SELECT (/ (* 100.0 (agg sum (CASE (WHEN (LIKE l_partkey 'PROMO%') (* l_extendedprice (- 1 "
     "l_discount))) (ELSE 0)))) (agg sum (* l_extendedprice (- 1 l_discount)))) AS promo_revenue\n"
     "FROM lineitem\n"
     "WHERE (AND (>= l_shipdate '1995-09-01') (< l_shipdate (fn date '1995-09-01' '+1 month')))\n"},
};

/* The first statement of aStmt containing zPart. */
static const char *stmt_with(const char *zPart) {
  for (size_t i = 0; i < sizeof aStmt / sizeof aStmt[0]; i++)
    if (strstr(aStmt[i].zSql, zPart)) return aStmt[i].zSql;
  return "";
}

/* Statements outside the subset: PL_UNSUPPORTED, message containing zWhat. */
static const struct {
  const char *zSql, *zWhat;
} aUnsup[] = {
    {"select a from t, u on t.x = u.x", "ON without a JOIN"},
    {"select a from t on 1", "ON or USING without a join"},
    {"select a from t join u using (x)", "USING"},
    {"select a from t left join u", "LEFT JOIN without ON"},
    {"select a from t natural join u", "NATURAL"},
    {"select a from t right join u on 1", "RIGHT"},
    {"select a from t full outer join u on 1", "NATURAL, RIGHT, FULL"},
    {"select a from t left natural join u", "NATURAL"},
    {"select a from t, (select 1)", "subquery"},
    {"select a from t join u on count(*)", "misuse"},
    {"select a from (select a from t)", "subquery"},
    {"select (select 1) from t", "subquery"},
    {"select a from t where a in (select b from u)", "IN subquery"},
    {"select a from t where a in u", "IN table"},
    {"select a from t where exists (select 1)", "EXISTS"},
    {"select a from t where not exists (select 1)", "EXISTS"},
    {"select distinct a from t", "DISTINCT"},
    {"select a from t union select b from u", "compound"},
    {"select a from t union all select b from u", "compound"},
    {"select a from t except select b from u", "compound"},
    {"with x as (select 1) select * from x", "WITH"},
    {"select a from t; select b from t", "more than one statement"},
    {"select 1", "without FROM"},
    {"select 1 where 1", "without FROM"},
    {"insert into t values(1)", "not a SELECT"},
    {"explain select a from t", "not a SELECT"},
    {"values(1)", "VALUES"},
    {"", "empty"},
    {" ; ", "empty"},
    {"select row_number() over () from t", "window"},
    {"select row_number() from t", "aggregate or window"},
    {"select count(distinct) from t", "wrong number"},
    {"select sum(a) over (partition by b) from t", "window"},
    {"select sum(a) over w from t", "window"},
    {"select count(*) filter (where a > 1) from t", "FILTER"},
    {"select group_concat(a) from t", "group_concat"},
    {"select a from t window w as (order by a)", "WINDOW"},
    {"select a from t where count(*) > 1", "misuse"},
    {"select a from t group by count(*)", "misuse"},
    {"select sum(count(*)) from t", "inside an aggregate"},
    {"select sum(a, b) from t", "wrong number"},
    {"select count(a, b) from t", "wrong number"},
    {"select min() from t", "wrong number"},
    {"select avg(*) from t", "wrong number"},
    {"select abs(*) from t", "f(*)"},
    {"select abs(distinct a) from t", "DISTINCT"},
    {"select a from t limit b", "LIMIT"},
    {"select a from t limit count(*)", "misuse"},
    {"select a from t order by 2", "out of range"},
    {"select a from t order by 0", "out of range"},
    {"select a from t group by -1", "out of range"},
    {"select a from t having a > 1", "HAVING"},
    {"select (a, b) from t", "row value"},
    {"select a -> 'x' from t", "JSON"},
    {"select a from t where a match 'x'", "MATCH"},
    {"select a from t where a regexp 'x'", "REGEXP"},
    {"select a from t where a glob 'x' escape 'y'", "GLOB with ESCAPE"},
    {"select a from t indexed by i", "INDEXED"},
    {"select a from t not indexed", "INDEXED"},
    {"select a from f(1)", "table-valued"},
    {"select -0x8000000000000000 from t", "hex"},
    {"select raise(ignore) from t", "RAISE"},
};

/* Malformed statements: PL_SYNTAX at byte iPos. */
static const struct {
  const char *zSql;
  int iPos;
} aSyntax[] = {
    {"select from t", 7},
    {"select a from", 13},
    {"select a from t where", 21},
    {"select a + from t", 11},
    {"select a from t where a = = 1", 26},
    {"select (a from t", 10},
    {"select a) from t", 8},
    {"select 'abc from t", 7},
    {"select \"abc from t", 7},
    {"select [abc from t", 7},
    {"select x'0g' from t", 7},
    {"select x'abc' from t", 7},
    {"select 1e from t", 7},
    {"select 12abc from t", 7},
    {"select a ! b from t", 9},
    {"select a from t where a between 1 or 2", 34},
    {"select a from t order by", 24},
    {"select a from t order by a nulls", 32},
    {"select a from t group a", 22},
    {"select a from t limit", 21},
    {"select cast(a as integer from t", 25},
    {"select cast from t", 12},
    {"select case when 1 then 2 from t", 26},
    {"select case end from t", 16},
    {"select a as from t", 12},
    {"select a from t as where 1", 19},
    {"select commit from t", 7},
    {"select left(a) from t", 11},
    {"select a like from t", 14},
    {"select a from t x.y", 17},
    {"select a collate from t", 17},
    {"select ?0 from t", 7},
    {"select ?32767 from t", 7},
    {"select #1 from t", 7},
    {"select : from t", 7},
    {"select 0x10000000000000000 from t", 7},
    {"select a from t where a is not distinct b", 40},
    {"select a from t where a in (1, 2", 32},
    {"select a from t where a in 1", 27},
    {"select * + 1 from t", 9},
    {"select a from t where a not b", 24},
};

/* ---- span property: the text of every node parses back to that node ---- */

static int has_param(const pl_expr *e) {
  if (!e) return 0;
  if (e->op == PL_E_PARAM) return 1;
  if (has_param(e->pLeft) || has_param(e->pRight) || has_param(e->pExtra)) return 1;
  for (int i = 0; i < e->nArg; i++)
    if (has_param(e->apArg[i])) return 1;
  return 0;
}

static int nSpanChecked = 0;

static void check_spans(const pl_ast *a, const pl_expr *e) {
  if (!e || e->op == PL_E_STAR) return;
  int n;
  const char *z = pl_expr_text(a, e, &n);
  CHECK(n > 0 && e->iStart >= 0 && e->iEnd <= a->nSql);
  char *zSql = malloc((size_t)n + 32);
  snprintf(zSql, (size_t)n + 32, "SELECT %.*s FROM t", n, z);
  pl_ast *b = NULL;
  pl_err err;
  int rc = pl_parse(zSql, -1, &b, &err);
  CHECK(rc == PL_OK, "span '%.*s' does not parse: %s", n, z, err.zMsg);
  if (rc == PL_OK) {
    CHECK(b->nCol == 1 && (has_param(e) || pl_expr_equal(b->aCol[0].pExpr, e)),
          "span '%.*s' parses to something else", n, z);
    nSpanChecked++;
  }
  pl_ast_free(b);
  free(zSql);
  /* its children in the order of their text, each inside its span */
  const pl_expr *aChild[64];
  int nc = pl_expr_children(e, aChild, 64);
  int nWant = (e->pLeft != NULL) + (e->pRight != NULL) + (e->pExtra != NULL) + e->nArg;
  CHECK(nc == nWant, "span '%.*s': %d children, not %d", n, z, nc, nWant);
  for (int i = 0; i < nc; i++) {
    CHECK(aChild[i]->iStart >= e->iStart && aChild[i]->iEnd <= e->iEnd, "child %d of '%.*s'", i, n,
          z);
    if (i) CHECK(aChild[i - 1]->iEnd <= aChild[i]->iStart, "children of '%.*s' out of order", n, z);
  }
  CHECK(pl_expr_children(e, aChild, e->nArg + 2) == -1);
  check_spans(a, e->pLeft);
  check_spans(a, e->pRight);
  check_spans(a, e->pExtra);
  for (int i = 0; i < e->nArg; i++) check_spans(a, e->apArg[i]);
}

static void check_all_spans(const pl_ast *a) {
  for (int i = 0; i < a->nCol; i++) check_spans(a, a->aCol[i].pExpr);
  check_spans(a, a->pWhere);
  check_spans(a, a->pHaving);
  for (int i = 0; i < a->nGroup; i++) check_spans(a, a->aGroup[i].pExpr);
  for (int i = 0; i < a->nOrder; i++) check_spans(a, a->aOrder[i].pExpr);
  for (int i = 0; i < a->nFrom; i++) check_spans(a, a->aFrom[i].pOn);
}

/* ---- differential precedence check against SQLite ---- */

typedef struct Str {
  char z[8000];
  int n;
} Str;

static void put(Str *s, const char *z, int n) {
  if (n < 0) n = (int)strlen(z);
  if (s->n + n >= (int)sizeof s->z) n = (int)sizeof s->z - 1 - s->n;
  memcpy(s->z + s->n, z, (size_t)n);
  s->n += n;
  s->z[s->n] = 0;
}

/* Re-emit e as SQL with every operator parenthesised: if our tree has the
** wrong shape, SQLite computes something else from it. */
static void emit(Str *s, const pl_ast *a, const pl_expr *e) {
  int n;
  const char *z;
  static const char *const azBin[PL_E_MAX_] = {
      [PL_E_OR] = " OR ",        [PL_E_AND] = " AND ",   [PL_E_EQ] = " = ",
      [PL_E_NE] = " != ",        [PL_E_LT] = " < ",      [PL_E_LE] = " <= ",
      [PL_E_GT] = " > ",         [PL_E_GE] = " >= ",     [PL_E_IS] = " IS ",
      [PL_E_ISNOT] = " IS NOT ", [PL_E_BITAND] = " & ",  [PL_E_BITOR] = " | ",
      [PL_E_LSHIFT] = " << ",    [PL_E_RSHIFT] = " >> ", [PL_E_ADD] = " + ",
      [PL_E_SUB] = " - ",        [PL_E_MUL] = " * ",     [PL_E_DIV] = " / ",
      [PL_E_MOD] = " % ",        [PL_E_CONCAT] = " || "};
  if (azBin[e->op]) {
    put(s, "(", 1), emit(s, a, e->pLeft), put(s, azBin[e->op], -1), emit(s, a, e->pRight),
        put(s, ")", 1);
    return;
  }
  switch (e->op) {
  case PL_E_NOT:
    put(s, "(NOT ", -1), emit(s, a, e->pLeft), put(s, ")", 1);
    return;
  case PL_E_NEG:
    put(s, "(- ", -1), emit(s, a, e->pLeft), put(s, ")", 1);
    return;
  case PL_E_POS:
    put(s, "(+ ", -1), emit(s, a, e->pLeft), put(s, ")", 1);
    return;
  case PL_E_BITNOT:
    put(s, "(~ ", -1), emit(s, a, e->pLeft), put(s, ")", 1);
    return;
  case PL_E_ISNULL:
    put(s, "(", 1), emit(s, a, e->pLeft), put(s, " ISNULL)", -1);
    return;
  case PL_E_NOTNULL:
    put(s, "(", 1), emit(s, a, e->pLeft), put(s, " NOTNULL)", -1);
    return;
  case PL_E_TRUTH:
    put(s, "(", 1), emit(s, a, e->pLeft);
    put(s, e->flags & PL_F_NOT ? " IS NOT " : " IS ", -1);
    put(s, e->iVal ? "TRUE)" : "FALSE)", -1);
    return;
  case PL_E_COLLATE:
    put(s, "(", 1), emit(s, a, e->pLeft), put(s, " COLLATE ", -1), put(s, e->zName, -1),
        put(s, ")", 1);
    return;
  case PL_E_IN:
    put(s, "(", 1), emit(s, a, e->pLeft), put(s, e->flags & PL_F_NOT ? " NOT IN (" : " IN (", -1);
    for (int i = 0; i < e->nArg; i++) {
      if (i) put(s, ", ", 2);
      emit(s, a, e->apArg[i]);
    }
    put(s, "))", 2);
    return;
  case PL_E_BETWEEN:
    put(s, "(", 1), emit(s, a, e->pLeft),
        put(s, e->flags & PL_F_NOT ? " NOT BETWEEN " : " BETWEEN ", -1);
    emit(s, a, e->pRight), put(s, " AND ", -1), emit(s, a, e->pExtra), put(s, ")", 1);
    return;
  case PL_E_LIKE:
  case PL_E_GLOB:
    put(s, "(", 1), emit(s, a, e->pLeft);
    put(s, e->flags & PL_F_NOT ? " NOT " : " ", -1);
    put(s, e->op == PL_E_LIKE ? "LIKE " : "GLOB ", -1), emit(s, a, e->pRight);
    if (e->pExtra) put(s, " ESCAPE ", -1), emit(s, a, e->pExtra);
    put(s, ")", 1);
    return;
  default:
    z = pl_expr_text(a, e, &n); /* leaves, and nodes whose parts are delimited */
    put(s, "(", 1), put(s, z, n), put(s, ")", 1);
  }
}

/* quote(expr) computed by SQLite, or NULL when SQLite rejects expr. */
static char *sqlite_eval(sqlite3 *db, const char *zExpr) {
  char *zSql = sqlite3_mprintf("SELECT quote(%s) FROM t", zExpr);
  sqlite3_stmt *st = NULL;
  char *r = NULL;
  if (sqlite3_prepare_v2(db, zSql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    r = strdup((const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_free(zSql);
  return r;
}

static int nDiffChecked = 0;

/* Compare SQLite on zExpr with SQLite on our parenthesised tree of zExpr. */
static void differential(sqlite3 *db, const char *zExpr) {
  char zSql[4000];
  snprintf(zSql, sizeof zSql, "SELECT %s FROM t", zExpr);
  pl_ast *a = NULL;
  pl_err err;
  int rc = pl_parse(zSql, -1, &a, &err);
  char *zWant = sqlite_eval(db, zExpr);
  if (rc == PL_OK && a->nCol == 1) {
    Str s = {{0}, 0};
    emit(&s, a, a->aCol[0].pExpr);
    char *zGot = sqlite_eval(db, s.z);
    CHECK(zWant && zGot && strcmp(zWant, zGot) == 0, "%s = %s but as parsed %s = %s", zExpr,
          zWant ? zWant : "(error)", s.z, zGot ? zGot : "(error)");
    free(zGot);
    nDiffChecked++;
  } else if (rc == PL_SYNTAX) {
    /* if SQLite takes it, we must not call it malformed */
    CHECK(zWant == NULL, "%s: SQLite accepts it, parser says %s", zExpr, err.zMsg);
  }
  pl_ast_free(a);
  free(zWant);
}

static const char *const azDiff[] = {
    "1 + 2 * 3",
    "2 * 3 - 4 / 2",
    "7 % 4 * 2",
    "1 - 2 - 3",
    "'a' || 1 + 2",
    "1 + 2 || 3",
    "2 * 3 || 4",
    "1 < 2 = 1",
    "3 = 3 < 1",
    "1 = 1 = 1",
    "2 & 3 | 4",
    "1 << 2 + 1",
    "8 >> 1 << 2",
    "1 | 2 < 3",
    "NOT 1 = 2",
    "NOT 0 AND 0",
    "NOT 1 OR 1",
    "0 AND 1 OR 1",
    "1 OR 0 AND 0",
    "- 1 * - 2",
    "~ 1 + 1",
    "- 'a' COLLATE nocase",
    "'a' || 'B' COLLATE nocase = 'AB'",
    "'A' = 'a' COLLATE nocase",
    "1 IS 1 = 1",
    "NULL IS NULL = 1",
    "1 IS NOT 2 IS 1",
    "2 IS TRUE",
    "0 IS NOT FALSE",
    "2 = 2 IS TRUE",
    "NULL ISNULL = 0",
    "1 NOT NULL + 1",
    "5 BETWEEN 1 AND 10 BETWEEN 0 AND 1",
    "5 NOT BETWEEN 1 + 1 AND 2 * 3",
    "2 BETWEEN 1 AND 3 = 1",
    "1 IN (1, 2) = 1",
    "1 + 1 IN (2)",
    "3 NOT IN (1, 2) AND 1",
    "'ab' LIKE 'A%' = 1",
    "'ab' LIKE 'a' || '%'",
    "'a_' LIKE 'a\\_' ESCAPE '\\' = 1",
    "'ab' GLOB 'a*' AND 0",
    "'ab' NOT LIKE 'x%' OR 0",
    "CASE 1 WHEN 1 THEN 2 ELSE 3 END + 1",
    "CAST('12' AS INTEGER) + 1",
    "-9223372036854775808",
    "- 9223372036854775808",
    "9223372036854775808",
    "0xFFFFFFFFFFFFFFFF + 1",
    "1 IS DISTINCT FROM NULL",
    "NULL IS NOT DISTINCT FROM NULL",
    "2 < 3 IS 1 BETWEEN 0 AND 1",
    "1 & 3 = 1",
    "NOT NOT 1",
    "1 = NOT 0",
    "NOT 1 BETWEEN 0 AND 2",
    "NOT 'a' LIKE 'b'",
    "1 + 2 IS NULL",
    "x'41' || 'b'",
    "1 / 0 IS NULL",
    "- - - 1",
    "+ 'a'",
    "TRUE + TRUE",
};

/* Random operator soup over constants, for the same differential check. */
static void random_expr(char *z, size_t n) {
  static const char *const azAtom[] = {"1",   "2", "0",  "NULL",  "'a'", "'B'",
                                       "2.5", "3", "-1", "x'41'", "TRUE"};
  static const char *const azBin[] = {
      " + ",  " - ",      " * ",   " / ",  " % ",    " || ",       " & ",   " | ",  " << ",
      " >> ", " < ",      " <= ",  " > ",  " >= ",   " = ",        " == ",  " != ", " <> ",
      " IS ", " IS NOT ", " AND ", " OR ", " LIKE ", " NOT LIKE ", " GLOB "};
  static const char *const azPre[] = {"NOT ", "- ", "+ ", "~ "};
  static const char *const azPost[] = {" ISNULL",         " NOTNULL", " NOT NULL",    " IS NULL",
                                       " COLLATE nocase", " IS TRUE", " IS NOT FALSE"};
  size_t k = 0;
  int nTerm = 2 + (int)rndn(5);
  z[0] = 0;
  for (int i = 0; i < nTerm; i++) {
    if (i) k += (size_t)snprintf(z + k, n - k, "%s", azBin[rndn(sizeof azBin / sizeof *azBin)]);
    if (rndn(4) == 0) k += (size_t)snprintf(z + k, n - k, "%s", azPre[rndn(4)]);
    int r = (int)rndn(12);
    if (r == 0) {
      k += (size_t)snprintf(z + k, n - k, "%s BETWEEN %s AND %s", azAtom[rndn(11)],
                            azAtom[rndn(11)], azAtom[rndn(11)]);
    } else if (r == 1) {
      k += (size_t)snprintf(z + k, n - k, "%s IN (%s, %s)", azAtom[rndn(11)], azAtom[rndn(11)],
                            azAtom[rndn(11)]);
    } else {
      k += (size_t)snprintf(z + k, n - k, "%s", azAtom[rndn(11)]);
    }
    if (rndn(5) == 0) k += (size_t)snprintf(z + k, n - k, "%s", azPost[rndn(7)]);
    if (k >= n - 64) break;
  }
}

/* ---- robustness ---- */

/* Parse must return one of the four codes and leave a consistent AST. */
/* A random FROM list of csq's join grammar and of what lies just outside it;
** *pn receives the number of tables written. */
static void random_from(char *z, size_t nz, int *pn) {
  static const char *const azTab[] = {"t", "u", "v", "main.u", "\"v\""};
  static const char *const azAlias[] = {"", "", " p", " as q", " AS \"r s\"", " x", " [y]"};
  static const char *const azOp[] = {", ",
                                     " join ",
                                     " inner join ",
                                     " cross join ",
                                     " left join ",
                                     " left outer join ",
                                     " natural join ",
                                     " right join ",
                                     " outer join ",
                                     " inner left join "};
  static const char *const azOn[] = {
      "", "", " on 1", " on t.x = u.x", " on x > 0 and 1", " using (x)", " on (1)"};
  int n = 1 + (int)rndn(4), k = 0;
  k += snprintf(z + k, nz - (size_t)k, "select 1 from %s%s", azTab[rndn(5)], azAlias[rndn(7)]);
  for (int i = 1; i < n; i++)
    k += snprintf(z + k, nz - (size_t)k, "%s%s%s%s", azOp[rndn(10)], azTab[rndn(5)],
                  azAlias[rndn(7)], azOn[rndn(7)]);
  snprintf(z + k, nz - (size_t)k, "%s", rndn(2) ? " where 1" : "");
  *pn = n;
}

static void robust(const char *z, int n) {
  pl_ast *a = NULL;
  pl_err err;
  int rc = pl_parse(z, n, &a, &err);
  CHECK(rc == PL_OK || rc == PL_SYNTAX || rc == PL_UNSUPPORTED, "rc %d for %.*s", rc, n, z);
  CHECK((rc == PL_OK) == (a != NULL));
  if (rc != PL_OK) CHECK(err.zMsg[0] && err.iPos >= 0 && err.iPos <= n, "bad error for %.*s", n, z);
  if (a) {
    char *d = pl_ast_dump(a);
    CHECK(d != NULL);
    free(d);
    pl_ast_free(a);
  }
}

int main(void) {
  int rc;
  pl_err err;

  /* expressions */
  for (size_t i = 0; i < sizeof aExpr / sizeof aExpr[0]; i++) {
    char *d = expr_dump(aExpr[i].zExpr, &rc, &err);
    CHECK(rc == PL_OK, "%s: rc %d %s", aExpr[i].zExpr, rc, err.zMsg);
    CHECK(d && strcmp(d, aExpr[i].zDump) == 0, "%s: got %s want %s", aExpr[i].zExpr, d ? d : "?",
          aExpr[i].zDump);
    free(d);
  }

  /* statements, and the span property on each */
  for (size_t i = 0; i < sizeof aStmt / sizeof aStmt[0]; i++) {
    pl_ast *a = NULL;
    rc = pl_parse(aStmt[i].zSql, -1, &a, &err);
    if (!aStmt[i].zDump) {
      CHECK(rc == PL_SYNTAX, "statement %zu: rc %d", i, rc);
      continue;
    }
    CHECK(rc == PL_OK, "statement %zu: rc %d %s", i, rc, err.zMsg);
    if (rc != PL_OK) continue;
    char *d = pl_ast_dump(a);
    CHECK(strcmp(d, aStmt[i].zDump) == 0, "statement %zu:\n--- got\n%s--- want\n%s", i, d,
          aStmt[i].zDump);
    free(d);
    check_all_spans(a);
    pl_ast_free(a);
  }
  for (size_t i = 0; i < sizeof aExpr / sizeof aExpr[0]; i++) {
    char zSql[2000];
    snprintf(zSql, sizeof zSql, "SELECT %s FROM t", aExpr[i].zExpr);
    pl_ast *a = NULL;
    if (pl_parse(zSql, -1, &a, NULL) == PL_OK) check_all_spans(a);
    pl_ast_free(a);
  }
  CHECK(nSpanChecked > 300, "%d spans", nSpanChecked);

  /* details the dumps do not show */
  {
    pl_ast *a = NULL;
    const char *zSql = "select sum(a*b) s, c+d from main.t as u where x in (?1, :p) order by s";
    rc = pl_parse(zSql, -1, &a, &err);
    CHECK(rc == PL_OK);
    if (a) {
      CHECK(a->bAgg && !a->bStar && a->nCol == 2);
      CHECK(!strcmp(a->zDb, "main") && !strcmp(a->zTable, "t") && !strcmp(a->zAlias, "u"));
      CHECK(a->iTabStart == 28 && a->iTabEnd == 39, "%d %d", a->iTabStart, a->iTabEnd);
      CHECK(a->aCol[0].iStart == 7 && a->aCol[0].iEnd == 17);
      CHECK(a->aOrder[0].iCol == 1);
      CHECK(pl_ast_alias(a, "S") == 1 && pl_ast_alias(a, "x") == 0);
      CHECK(a->nParam == 2 && a->azParam[0] && !strcmp(a->azParam[0], "?1") &&
            !strcmp(a->azParam[1], ":p"));
      const pl_expr *e = a->aCol[0].pExpr;
      CHECK(e->op == PL_E_AGG && e->eAgg == PL_AGG_SUM && e->nHeight == 3);
      int n;
      const char *z = pl_expr_text(a, e->apArg[0], &n);
      CHECK(n == 3 && !memcmp(z, "a*b", 3));
      /* refs */
      pl_refs r = {0};
      CHECK(pl_expr_refs(a->aCol[0].pExpr, 0, &r) == 0);
      CHECK(pl_expr_refs(a->aCol[1].pExpr, 0, &r) == 0);
      CHECK(r.nAgg == 1 && r.nCol == 4);
      CHECK(r.nCol == 4 && !strcmp(r.aCol[0]->zName, "a") && !strcmp(r.aCol[3]->zName, "d"));
      pl_refs_free(&r);
      CHECK(pl_expr_refs(a->aCol[0].pExpr, PL_REFS_OUTER, &r) == 0);
      CHECK(r.nAgg == 1 && r.nCol == 0);
      pl_refs_free(&r);
      pl_ast_free(a);
    }
    rc = pl_parse("select case a when b then c else d end + sum(e) from t", -1, &a, &err);
    CHECK(rc == PL_OK);
    if (a) {
      pl_refs r = {0};
      CHECK(pl_expr_refs(a->aCol[0].pExpr, PL_REFS_OUTER, &r) == 0);
      CHECK(r.nCol == 4 && r.nAgg == 1 && !strcmp(r.aCol[0]->zName, "a") &&
            !strcmp(r.aCol[1]->zName, "b") && !strcmp(r.aCol[2]->zName, "c") &&
            !strcmp(r.aCol[3]->zName, "d"));
      pl_refs_free(&r);
      pl_ast_free(a);
    }
    /* FROM items and their spans */
    zSql = "select 1 from t as x join main.u on x.a = u.b, v where 1";
    rc = pl_parse(zSql, -1, &a, &err);
    CHECK(rc == PL_OK);
    if (a) {
      CHECK(a->nFrom == 3 && !strcmp(a->aFrom[0].zTable, "t") && !strcmp(a->aFrom[0].zAlias, "x"));
      CHECK(!strcmp(a->aFrom[1].zDb, "main") && a->aFrom[1].eJoin == PL_JOIN_INNER);
      CHECK(a->aFrom[2].eJoin == PL_JOIN_COMMA && !a->aFrom[2].pOn && a->aFrom[1].pOn);
      CHECK(a->iFromStart == 14 && a->iFromEnd == 48, "%d %d", a->iFromStart, a->iFromEnd);
      CHECK(a->aFrom[1].iStart == 26 && a->aFrom[1].iEnd == 32);
      CHECK(!strcmp(a->zTable, "t") && a->iTabEnd == 20);
      pl_ast_free(a);
    }
    /* flags */
    rc = pl_parse("select \"q\", 0x1F, 18446744073709551616 from t", -1, &a, &err);
    CHECK(rc == PL_OK);
    if (a) {
      CHECK(a->aCol[0].pExpr->flags & PL_F_QUOTED);
      CHECK(a->aCol[1].pExpr->flags & PL_F_HEX);
      CHECK(a->aCol[2].pExpr->op == PL_E_REAL && (a->aCol[2].pExpr->flags & PL_F_BIGINT));
      pl_ast_free(a);
    }
    /* nSql bounds the text; a NUL ends it */
    rc = pl_parse("select a from t where b garbage", 15, &a, &err);
    CHECK(rc == PL_OK);
    pl_ast_free(a);
    rc = pl_parse("select a from t\0garbage", 24, &a, &err);
    CHECK(rc == PL_OK);
    pl_ast_free(a);
    /* equality */
    pl_ast *b = NULL;
    pl_parse("select A + \"b\" COLLATE NOCASE, 0x10 from t", -1, &a, NULL);
    pl_parse("select (a) + b collate nocase, 16 from T", -1, &b, NULL);
    CHECK(a && b && pl_expr_equal(a->aCol[0].pExpr, b->aCol[0].pExpr) &&
          pl_expr_equal(a->aCol[1].pExpr, b->aCol[1].pExpr));
    pl_ast_free(a);
    pl_ast_free(b);
  }

  /* unsupported */
  for (size_t i = 0; i < sizeof aUnsup / sizeof aUnsup[0]; i++) {
    pl_ast *a = NULL;
    rc = pl_parse(aUnsup[i].zSql, -1, &a, &err);
    CHECK(rc == PL_UNSUPPORTED && a == NULL, "%s: rc %d (%s)", aUnsup[i].zSql, rc, err.zMsg);
    CHECK(strstr(err.zMsg, aUnsup[i].zWhat) != NULL, "%s: message '%s' lacks '%s'", aUnsup[i].zSql,
          err.zMsg, aUnsup[i].zWhat);
  }

  /* syntax errors, with positions */
  for (size_t i = 0; i < sizeof aSyntax / sizeof aSyntax[0]; i++) {
    pl_ast *a = NULL;
    rc = pl_parse(aSyntax[i].zSql, -1, &a, &err);
    CHECK(rc == PL_SYNTAX && a == NULL, "%s: rc %d (%s)", aSyntax[i].zSql, rc, err.zMsg);
    CHECK(err.iPos == aSyntax[i].iPos, "%s: error at %d, want %d (%s)", aSyntax[i].zSql, err.iPos,
          aSyntax[i].iPos, err.zMsg);
  }

  /* deep nesting is left to SQLite, without a crash */
  {
    static char z[20000];
    int k = sprintf(z, "select ");
    for (int i = 0; i < 5000; i++) z[k++] = '(';
    z[k++] = '1';
    for (int i = 0; i < 5000; i++) z[k++] = ')';
    strcpy(z + k, " from t");
    pl_ast *a = NULL;
    rc = pl_parse(z, -1, &a, &err);
    CHECK(rc == PL_UNSUPPORTED && a == NULL, "rc %d", rc);
    k = sprintf(z, "select 1");
    for (int i = 0; i < 3000; i++) k += sprintf(z + k, "+1");
    strcpy(z + k, " from t");
    rc = pl_parse(z, -1, &a, &err);
    CHECK(rc == PL_UNSUPPORTED && strstr(err.zMsg, "too large"), "rc %d", rc);
    k = sprintf(z, "select ");
    for (int i = 0; i < 3000; i++) k += sprintf(z + k, "- ");
    strcpy(z + k, "1 from t");
    rc = pl_parse(z, -1, &a, &err);
    CHECK(rc == PL_UNSUPPORTED, "rc %d", rc);
    k = sprintf(z, "select a from t where a in (");
    for (int i = 0; i < 2000; i++) k += sprintf(z + k, "%s%d", i ? "," : "", i);
    strcpy(z + k, ")");
    rc = pl_parse(z, -1, &a, &err);
    CHECK(rc == PL_OK && a->pWhere->nArg == 2000);
    pl_ast_free(a);
  }

  /* differential precedence against SQLite */
  {
    sqlite3 *db = NULL;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
        sqlite3_exec(
            db,
            "CREATE TABLE t(x, a, b, c, d, e, key, first, last, \"desc\", \"end\", \"replace\", "
            "\"left\", indexed, \"like\", glob, \"we\"\"ird\", \"x y\");"
            "INSERT INTO t VALUES(1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 'ab', 'a*', 14, "
            "15);",
            0, 0, 0) != SQLITE_OK) {
      printf("cannot open SQLite\n");
      return 1;
    }
    for (size_t i = 0; i < sizeof azDiff / sizeof azDiff[0]; i++) differential(db, azDiff[i]);
    for (size_t i = 0; i < sizeof aExpr / sizeof aExpr[0]; i++)
      if (!strchr(aExpr[i].zExpr, '?') && !strstr(aExpr[i].zExpr, "random") &&
          !strchr(aExpr[i].zExpr, '$') && !strchr(aExpr[i].zExpr, ':') &&
          !strchr(aExpr[i].zExpr, '@'))
        differential(db, aExpr[i].zExpr); /* most name columns SQLite lacks: both fail alike */
    char z[2000];
    for (int i = 0; i < 3000; i++) {
      random_expr(z, sizeof z);
      differential(db, z);
    }
    CHECK(nDiffChecked > 2000, "%d differential checks", nDiffChecked);
    /* never wrong about what it accepts: a FROM list it parses is one
    ** SQLite parses too (SQLite may still reject names), with as many tables */
    sqlite3_exec(db, "CREATE TABLE u(x, k); CREATE TABLE v(x, k);", 0, 0, 0);
    int nJoinOk = 0;
    for (int i = 0; i < 3000; i++) {
      int nTab = 0;
      random_from(z, sizeof z, &nTab);
      pl_ast *a = NULL;
      if (pl_parse(z, -1, &a, NULL) != PL_OK) continue;
      nJoinOk++;
      CHECK(a->nFrom == nTab, "%s: %d tables, parsed %d", z, nTab, a->nFrom);
      check_all_spans(a);
      pl_ast_free(a);
      sqlite3_stmt *st = NULL;
      int rc2 = sqlite3_prepare_v2(db, z, -1, &st, NULL);
      sqlite3_finalize(st);
      const char *zMsg = sqlite3_errmsg(db);
      CHECK(rc2 == SQLITE_OK || (!strstr(zMsg, "syntax error") && !strstr(zMsg, "near \"")),
            "%s: accepted, but SQLite says %s", z, zMsg);
    }
    CHECK(nJoinOk > 300, "%d join lists accepted", nJoinOk);
    sqlite3_close(db);
  }

  /* truncations and mutations never crash */
  {
    const char *azSeed[] = {
        stmt_with("l_returnflag"),
        stmt_with("revenue from"),
        stmt_with("high_line_count\n"),
        stmt_with("promo_revenue"),
        stmt_with("?, ?3"),
        "select a, cast(b as decimal(10,2)), x'00ff', \"q\"\"x\", [y], `z` from t where a not "
        "between 1 and 2 and b not like 'x' escape 'y' and c is not distinct from d collate nocase "
        "and e in () and f isnull and g not null and h is true and ~i << 2 >> 1 & 3 | 4 order by 1 "
        "desc nulls first limit 1, 2"};
    for (size_t s = 0; s < sizeof azSeed / sizeof azSeed[0]; s++) {
      int n = (int)strlen(azSeed[s]);
      for (int k = 0; k <= n; k++) robust(azSeed[s], k);
      char *m = malloc((size_t)n + 1);
      for (int r = 0; r < 3000; r++) {
        memcpy(m, azSeed[s], (size_t)n + 1);
        int nMut = 1 + (int)rndn(4);
        for (int j = 0; j < nMut; j++) {
          static const char ach[] = "()'\"[]`,.;*+-/%|&<>=!~?:@$#x0123456789 eE\x80\xff";
          m[rndn((uint64_t)n)] = ach[rndn(sizeof ach - 1)];
        }
        robust(m, (int)rndn((uint64_t)n + 1));
        robust(m, n);
      }
      free(m);
    }
  }

  /* subqueries: refused by default, kept as text with PL_PARSE_SUBQUERY */
  {
    static const struct {
      const char *zSql, *zWant; /* the WHERE dump, or NULL: refused with the option too */
      int iErr;                 /* the offset refused at without the option */
    } aSub[] = {
        {"select a from t where a in (select b from u where (c) > 1) and d", NULL, 28},
        {"select a from t where not exists (select 1 from u)", NULL, 26},
        {"select a from t where a > (select max(b) from u) + 1", NULL, 27},
        {"select a from t where a not in (with w as (select 1) select * from w)", NULL, 32},
        {"select a from t where a in (select b from u where c = ?)", NULL, 28},
        {"select a from t where exists (select b from u", NULL, 22},
    };
    for (size_t i = 0; i < sizeof(aSub) / sizeof(aSub[0]); i++) {
      pl_ast *a = NULL;
      rc = pl_parse(aSub[i].zSql, -1, &a, &err);
      CHECK(rc == PL_UNSUPPORTED && !a && err.iPos == aSub[i].iErr, "%s: rc %d at %d %s",
            aSub[i].zSql, rc, err.iPos, err.zMsg);
      rc = pl_parse_opt(aSub[i].zSql, -1, PL_PARSE_SUBQUERY, &a, &err);
      if (i >= 4) {
        CHECK(rc != PL_OK && !a, "%s: rc %d", aSub[i].zSql, rc);
        continue;
      }
      CHECK(rc == PL_OK && a && a->pWhere, "%s: rc %d %s", aSub[i].zSql, rc, err.zMsg);
      if (rc != PL_OK) continue;
      char *d = pl_expr_dump(a->pWhere);
      static const char *azWant[] = {
          "(AND (INSELECT a (SUBQUERY select b from u where (c) > 1)) d)",
          "(NOT (EXISTS (SUBQUERY select 1 from u)))",
          "(> a (+ (SUBQUERY select max(b) from u) 1))",
          "(NOT INSELECT a (SUBQUERY with w as (select 1) select * from w))"};
      CHECK(d && strcmp(d, azWant[i]) == 0, "%s: %s", aSub[i].zSql, d);
      CHECK(pl_expr_equal(a->pWhere, a->pWhere));
      free(d);
      pl_ast_free(a);
    }
    pl_ast *a = NULL, *b = NULL;
    pl_parse_opt("select a from t where a in (select b from u)", -1, PL_PARSE_SUBQUERY, &a, NULL);
    pl_parse_opt("select a from t where a in (select c from u)", -1, PL_PARSE_SUBQUERY, &b, NULL);
    CHECK(a && b && !pl_expr_equal(a->pWhere, b->pWhere), "different subqueries compare equal");
    pl_ast_free(a);
    pl_ast_free(b);
  }

  /* every allocation failing in turn: PL_NOMEM, no leak, no crash */
  {
    const char *zSql = stmt_with("l_returnflag");
    int nOk = 0, k;
    for (k = 1; k < 100000; k++) {
      pl_ast *a = NULL;
      pl_parse_fail_alloc = k;
      rc = pl_parse(zSql, -1, &a, &err);
      if (rc == PL_OK) {
        char *d = pl_ast_dump(a); /* may fail: allocations still counted down */
        free(d);
        pl_ast_free(a);
        if (pl_parse_fail_alloc > 0) {
          nOk = 1;
          break;
        }
        continue;
      }
      CHECK(rc == PL_NOMEM && a == NULL, "k=%d rc %d %s", k, rc, err.zMsg);
    }
    pl_parse_fail_alloc = 0;
    CHECK(nOk && k > 50, "k=%d", k);
  }

  printf("%d checks, %d failed (%d spans, %d differential)\n", nCheck, nFail, nSpanChecked,
         nDiffChecked);
  return nFail ? 1 : 0;
}
