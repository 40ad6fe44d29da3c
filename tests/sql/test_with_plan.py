"""WITH tables and derived tables over one csq table (vtab/query.c,
plan_derived_one; planner/derived.c, pl_derived_with; planner/split.c,
PL_PLAN_TYPED).

"WITH x AS (SELECT ... FROM t ... GROUP BY ...) SELECT ..." (TPC-H Q15) and
"SELECT ... FROM (SELECT ... FROM t ...) AS x ..." run the inner SELECT's
device part first; SQLite runs the statement with the inner SELECT replaced
by its host part over the merged rows, whose group keys keep their
columns' affinities, so the outer query compares them as it would compare
the inner SELECT's columns. A WITH over a join plans its join the same
way. Random inner SELECTs over keys of mixed classes, outer filters
comparing those keys with constants of every class, joins with other
tables and a WITH table read twice must answer as native; CAST and COLLATE
keys stay SQLite's; a device part that fails leaves the statement to
SQLite, which fails only where it would.
"""
import random

from harness import connect
from test_join_plan import KEY_TYPES, NTAB, TEXT_TYPES, explain, key_value, same_as_native, text_value


class Db:
    """csq tables t0..t3 (pushdown='always': small tables would group on
    the host) and native twins n0..n3, as test_join_plan.Db."""

    def __init__(self, rnd):
        self.con = connect()
        self.con.execute("PRAGMA automatic_index = OFF")
        for t in range(NTAB):
            decl = [("k1", rnd.choice(KEY_TYPES)), ("k2", rnd.choice(KEY_TYPES)),
                    ("v", rnd.choice(TEXT_TYPES[:1] + TEXT_TYPES[3:])), ("w", rnd.choice(TEXT_TYPES)),
                    ("r", "REAL")]
            body = ", ".join("%s %s" % c for c in decl)
            self.con.execute("CREATE VIRTUAL TABLE t%d USING csq(%s, pushdown='always')" % (t, body))
            self.con.execute("CREATE TABLE n%d(%s)" % (t, body))
            dom = 12
            rows = [(key_value(rnd, dom), key_value(rnd, dom), text_value(rnd), text_value(rnd),
                     rnd.choice([None, rnd.randrange(100) / 4.0, rnd.randrange(-5, 5)]))
                    for _ in range(rnd.choice([50, 300]))]
            for name in ("t%d" % t, "n%d" % t):
                self.con.executemany("INSERT INTO %s VALUES(?,?,?,?,?)" % name, rows)


def inner(rnd, t):
    keys = rnd.sample(["k1", "k2", "v", "w"], rnd.randint(1, 2))
    agg = rnd.choice(["count(*)", "sum(r)", "max(k1)", "total(r)", "avg(k2)", "min(v)"])
    w = rnd.choice(["", " WHERE r > 2", " WHERE k1 < 8", " WHERE r IS NOT NULL"])
    return "SELECT %s, %s AS a FROM {t%d}%s GROUP BY %s" % (", ".join(keys), agg, t, w, ", ".join(keys)), keys


def const(rnd):
    return rnd.choice(["3", "'3'", "3.0", "'a'", "'A'", "2.5", "NULL", "'x1'", "x'01'"])


def statement(rnd):
    t = rnd.randrange(NTAB)
    body, keys = inner(rnd, t)
    k = rnd.choice(keys)
    cond = rnd.choice(["x.%s = %s" % (k, const(rnd)), "x.%s > %s" % (k, const(rnd)),
                       "x.%s IN (%s, %s)" % (k, const(rnd), const(rnd)), "x.a >= %s" % const(rnd),
                       "x.%s BETWEEN %s AND %s" % (k, const(rnd), const(rnd)), "x.%s IS NOT NULL" % k])
    shape = rnd.randrange(4)
    if shape == 0:  # derived table
        return "SELECT * FROM (%s) AS x WHERE %s" % (body, cond)
    if shape == 1:  # WITH, grouped again outside
        return "WITH x AS (%s) SELECT x.%s, count(*), sum(x.a) FROM x WHERE %s GROUP BY x.%s" % (
            body, k, cond, k)
    if shape == 2:  # WITH joined with another table
        u = rnd.randrange(NTAB)
        return "WITH x AS (%s) SELECT x.*, y.r FROM x, {t%d} AS y WHERE y.k1 = x.%s AND %s" % (
            body, u, k, cond)
    # WITH read twice (TPC-H Q15)
    return "WITH x AS (%s) SELECT * FROM x WHERE x.a = (SELECT max(a) FROM x) OR %s" % (body, cond)


def test_random_with_and_derived_tables_equal_native():
    planned = total = 0
    for seed in range(6):
        rnd = random.Random(8100 + seed)
        db = Db(rnd)
        for step in range(60):
            sql = statement(rnd)
            mine = sql.format(**{"t%d" % t: "t%d" % t for t in range(NTAB)})
            native = sql.format(**{"t%d" % t: "n%d" % t for t in range(NTAB)})
            same_as_native(db.con, mine, native, "seed %d step %d" % (seed, step))
            total += 1
            planned += explain(db.con, mine)["plan"] == "derived: device+host"
        db.con.close()
    assert planned > total // 2, "%d of %d queries planned" % (planned, total)
    print("%d of %d WITH and derived queries over one table planned" % (planned, total))


def make(con):
    con.execute("CREATE VIRTUAL TABLE a USING csq(k INTEGER, t TEXT, x REAL, big INTEGER, pushdown='always')")
    con.execute("CREATE TABLE na(k INTEGER, t TEXT, x REAL, big INTEGER)")
    rows = [(i % 7, ["5", "x", "10", None][i % 4], i / 4, 9223372036854775807 - i) for i in range(60)]
    for t in ("a", "na"):
        con.executemany("INSERT INTO %s VALUES(?,?,?,?)" % t, rows)
    con.execute("CREATE VIRTUAL TABLE b USING csq(k INTEGER, n TEXT, pushdown='always')")
    con.execute("CREATE TABLE nb(k INTEGER, n TEXT)")
    for t in ("b", "nb"):
        con.executemany("INSERT INTO %s VALUES(?,?)" % t, [(i, "n%d" % i) for i in range(7)])
    return con


def check(con, q, planned):
    mine, native = q.format(a="a", b="b"), q.format(a="na", b="nb")
    same_as_native(con, mine, native, q)
    got = explain(con, mine)["plan"]
    assert (got == "derived: device+host") == planned, (q, explain(con, mine))


def test_keys_keep_their_affinity():
    """'5' = k matches the integer 5 because k keeps INTEGER affinity
    outside the inner SELECT, and t = 5 matches the text '5': a host part
    whose columns had no affinity would answer neither."""
    con = make(connect())
    for q in ("SELECT * FROM (SELECT k, count(*) AS c FROM {a} GROUP BY k) AS d WHERE d.k = '5'",
              "SELECT * FROM (SELECT t, sum(x) AS s FROM {a} GROUP BY t) AS d WHERE d.t = 5",
              "WITH d AS (SELECT t, k, max(x) AS m FROM {a} GROUP BY t, k) SELECT * FROM d WHERE t > 7 "
              "AND k IN ('1', '2')",
              "WITH d (key, total) AS (SELECT k, sum(x) FROM {a} GROUP BY k) "
              "SELECT key, total, n FROM {b}, d WHERE {b}.k = d.key AND total = (SELECT max(total) FROM d)"):
        check(con, q, True)
        assert con.execute(q.format(a="na", b="nb")).fetchall(), q  # the test means something


def test_shapes_left_to_sqlite_still_answer():
    con = make(connect())
    for q in ("SELECT * FROM (SELECT CAST(k AS TEXT) AS ck, count(*) FROM {a} GROUP BY ck) AS d WHERE ck = 5",
              "SELECT * FROM (SELECT t COLLATE NOCASE AS ct, count(*) FROM {a} GROUP BY ct) WHERE ct = 'X'",
              "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 5) "
              "SELECT count(*) FROM r, {a} WHERE {a}.k = r.i",
              "WITH d AS (SELECT k, count(*) AS c FROM {a} GROUP BY k), e AS (SELECT 1) SELECT * FROM d, e"):
        check(con, q, False)


def test_a_failing_inner_select_fails_only_where_sqlite_fails():
    con = make(connect())
    # sum(big) overflows: SQLite never runs the WITH table under WHERE 0 ...
    q = "WITH d AS (SELECT k, sum(big) AS s FROM {a} GROUP BY k) SELECT * FROM d WHERE 0"
    same_as_native(con, q.format(a="a", b="b"), q.format(a="na", b="nb"), q)
    assert explain(con, q.format(a="a", b="b"))["plan"] == "derived: device+host"
    # ... and raises it when it does
    q2 = "SELECT * FROM (SELECT k, sum(big) AS s FROM {a} GROUP BY k) AS d"
    same_as_native(con, q2.format(a="a", b="b"), q2.format(a="na", b="nb"), q2)


def test_with_over_a_join_plans_the_join():
    con = make(connect())
    q = ("WITH j AS (SELECT {b}.n AS n, {a}.x AS x FROM {a}, {b} WHERE {a}.k = {b}.k) "
         "SELECT n, count(*), sum(x) FROM j GROUP BY n ORDER BY n")
    mine, native = q.format(a="a", b="b"), q.format(a="na", b="nb")
    same_as_native(con, mine, native, q)
    e = explain(con, mine)
    assert e["plan"].startswith("join") and e["why"].startswith("a derived table over a"), e
