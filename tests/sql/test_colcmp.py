"""Column comparisons (program.h, COLUMN COMPARISONS): WHERE terms that
compare two columns of one table, such as TPC-H's l_commitdate <
l_receiptdate, which SQLite never offers a virtual table. The planner
(planner/split.c) pushes them to the device when SQLite would convert
neither value first (both columns of one affinity, or both numeric) and
the collation is BINARY, NOCASE or RTRIM; otherwise the query stays with
SQLite.

A differential test: random tables with columns of every affinity and of
declared collations, holding values of every storage class and NULLs,
queried with random pairs of columns and comparison operators (with and
without COLLATE) through pushdown views (pl_plan_query: aggregates and
the row plan) and the join planner, against the same SQL over native
tables with the same rows. Exact cases must be pushed (csq_explain names
the comparison; the rows that cross drop); inexact ones must still answer
as native does. Then TPC-H-shaped text dates (Q4, Q12, Q21's terms).
"""
import random

from harness import connect, stats

# name, declared type, affinity letter as vtab.h's ('A' none .. 'E' REAL),
# whether it declares a collation other than BINARY
COLS = [
    ("ci", "INTEGER", "D", 0),
    ("cr", "REAL", "E", 0),
    ("cn", "NUMERIC", "C", 0),
    ("ct", "TEXT", "B", 0),
    ("cb", "BLOB", "A", 0),
    ("cu", "", "A", 0),
    ("ct2", "TEXT", "B", 0),
    ("ci2", "INTEGER", "D", 0),
    ("tn", "TEXT COLLATE NOCASE", "B", 1),
    ("tr", "TEXT COLLATE RTRIM", "B", 1),
]
OPS = ["=", "==", "<>", "!=", "<", "<=", ">", ">=", "IS", "IS NOT"]
NROW = 600


def value(rnd):
    k = rnd.randrange(12)
    if k == 0:
        return None
    if k <= 2:
        return rnd.randrange(-5, 6)
    if k == 3:
        return rnd.choice([0.5, -1.5, 2.0, 3.0, -0.0, 9007199254740993.0, 1e18])
    if k == 4:
        return rnd.choice([9007199254740992, 9007199254740993, 2**62])
    if k <= 7:
        return rnd.choice(["", "a", "A", "ab", "Ab", "ab ", "AB  ", "b", "B", "10", " 5", "5", "2.0",
                           "1996-03-13", "1996-02-12", "1996-03-13 "])
    if k == 8:
        return rnd.choice([b"", b"a", b"ab", b"\x00\x01", b"5"])
    return rnd.choice(["1.0", "2", "-3", "1e2", "abc "])


def canon(row):
    # exact: numbers as (kind, repr) keep 1 and 1.0 apart only where SQLite
    # does (a class difference is an answer difference here)
    return repr(row)


class Db:
    def __init__(self, seed):
        self.rnd = random.Random(seed)
        self.con = connect()
        decl = ", ".join("%s %s" % (n, t) for n, t, _, _ in COLS)
        self.con.execute("CREATE TABLE n(k INTEGER PRIMARY KEY, %s)" % decl)
        self.con.execute("CREATE VIRTUAL TABLE c USING csq(k INTEGER PRIMARY KEY, %s, rowgroup=128, "
                         "pushdown='always')" % decl)
        rows = [(i + 1,) + tuple(value(self.rnd) for _ in COLS) for i in range(NROW)]
        marks = ",".join("?" * (len(COLS) + 1))
        self.con.execute("BEGIN")
        for t in ("n", "c"):
            self.con.executemany("INSERT INTO %s VALUES(%s)" % (t, marks), rows)
        self.con.execute("COMMIT")
        self.nv = 0

    def plan(self, sql):
        return dict(self.con.execute("SELECT * FROM csq_explain(?)", (sql,)).fetchall())

    def view(self, sql):
        self.nv += 1
        name = "v%d" % self.nv
        self.con.execute("CREATE VIRTUAL TABLE temp.%s USING csq_query('%s')" % (name, sql.replace("'", "''")))
        try:
            return self.con.execute("SELECT * FROM %s" % name).fetchall()
        finally:
            self.con.execute("DROP TABLE temp.%s" % name)


def exact(a, b, coll):
    """Would csq push "a op b" (columns a and b of COLS, coll the explicit
    COLLATE or None)?"""
    if a[3] or b[3]:
        return False  # a declared collation keeps the query on the host
    if coll not in (None, "BINARY", "NOCASE", "RTRIM"):
        return False
    return a[2] == b[2] or (a[2] >= "C" and b[2] >= "C")


def term(rnd):
    a, b = rnd.choice(COLS), rnd.choice(COLS)
    op = rnd.choice(OPS)
    coll = None
    left, right = a[0], b[0]
    k = rnd.randrange(6)
    if k == 0:
        coll = rnd.choice(["NOCASE", "RTRIM", "BINARY"])
        left += " COLLATE " + coll
    elif k == 1:
        coll = rnd.choice(["NOCASE", "RTRIM"])
        right += " COLLATE " + coll
    return "%s %s %s" % (left, op, right), exact(a, b, coll)


def test_random_pairs_match_native_and_exact_ones_are_pushed():
    for seed in range(3):
        d = Db(seed)
        rnd = d.rnd
        nPushed = nHost = 0
        for qi in range(120):
            t, bExact = term(rnd)
            extra = rnd.choice(["", " AND ci > 0", " AND ct IS NOT NULL"])
            if qi % 2 == 0:
                sql = "SELECT count(*), sum(k), min(k) FROM %s WHERE " + t + extra
            else:
                sql = "SELECT k, ci, ct FROM %s WHERE " + t + extra + " ORDER BY k"
            want = d.con.execute(sql % "n").fetchall()
            p = d.plan(sql % "c")
            d.con.execute("SELECT csq_stats_reset()")
            got = d.view(sql % "c")
            st = stats(d.con)
            assert got == want, (seed, sql % "c", p, got[:5], want[:5])
            if bExact:
                nPushed += 1
                assert p["plan"].startswith("device"), (sql, p)
                assert "comparing columns: " + t in p["device"], (sql, p)
                if qi % 2 == 1:
                    # only the rows that pass cross to the host
                    assert st["rows_returned"] == len(want), (sql, st, len(want))
            else:
                nHost += 1
                assert p["plan"].startswith("host"), (sql, p)
        # both kinds were drawn often enough to mean something
        assert nPushed > 20 and nHost > 20, (nPushed, nHost)


def test_every_pair_of_affinities_and_operator():
    d = Db(7)
    for a in COLS:
        for b in COLS:
            for op in OPS:
                t = "%s %s %s" % (a[0], op, b[0])
                sql = "SELECT count(*), sum(k) FROM %s WHERE " + t
                want = d.con.execute(sql % "n").fetchall()
                assert d.view(sql % "c") == want, (t, d.plan(sql % "c"))
                if exact(a, b, None):
                    assert "comparing columns" in d.plan(sql % "c").get("device", ""), t


def test_rowid_against_columns():
    d = Db(11)
    for other in ("ci", "cr", "cn", "ct", "cu"):
        for op in ("<", "=", "IS NOT", ">="):
            for t in ("k %s %s" % (op, other), "%s %s rowid" % (other, op)):
                sql = "SELECT count(*), sum(k) FROM %s WHERE " + t
                want = d.con.execute(sql % "n").fetchall()
                assert d.view(sql % "c") == want, t
                p = d.plan(sql % "c")
                pushed = other in ("ci", "cr", "cn")  # INTEGER against numeric only
                assert p["plan"].startswith("device" if pushed else "host"), (t, p)


def test_group_by_with_comparisons():
    d = Db(13)
    for t in ("ci < ci2", "ct >= ct2", "cb IS cu", "cr <> cn", "ct2 COLLATE NOCASE = ct"):
        q = "SELECT ci2, count(*), sum(k) FROM %s WHERE " + t + " GROUP BY ci2 ORDER BY ci2"
        want = d.con.execute(q % "n").fetchall()
        assert d.view(q % "c") == want, t
        assert "comparing columns" in d.plan(q % "c")["device"], t


def test_join_planner_pushes_them_per_table():
    d = Db(17)
    con = d.con
    con.execute("CREATE TABLE n2(j INTEGER, x TEXT, y TEXT)")
    con.execute("CREATE VIRTUAL TABLE c2 USING csq(j INTEGER, x TEXT, y TEXT, pushdown='always')")
    rnd = random.Random(5)
    rows = [(rnd.randrange(-5, 6), rnd.choice(["a", "b", "B", None]), rnd.choice(["a", "b", None]))
            for _ in range(300)]
    for t in ("n2", "c2"):
        con.executemany("INSERT INTO %s VALUES(?,?,?)" % t, rows)
    # (term of the first table, of the second, filters pushed into each scan)
    cases = [("{a}.ct < {a}.ct2", "{b}.x <= {b}.y", 1, 1),
             ("{a}.ci IS NOT {a}.ci2", "{b}.x = {b}.y", 1, 1),
             ("{a}.cr > {a}.cn", "{b}.y IS {b}.x", 1, 1),
             ("{a}.ci < {a}.ct", "{b}.x < {b}.y", 0, 1)]
    for t1, t2, n1, n2 in cases:
        sql = "SELECT count(*), sum({a}.k) FROM {a} JOIN {b} ON {a}.ci = {b}.j WHERE %s AND %s" % (t1, t2)
        want = con.execute(sql.format(a="n", b="n2")).fetchall()
        q = sql.format(a="c", b="c2")
        assert d.view(q) == want, (q, d.plan(q))
        p = d.plan(q)
        assert p["plan"].startswith("join"), (q, p)
        scans = {v.split(" ")[0]: v for k, v in p.items() if "scan" in k}
        assert ("%d pushed filter(s)" % n1) in scans["c"], (q, p)
        assert ("%d pushed filter(s)" % n2) in scans["c2"], (q, p)


def tpch_tables(con, rnd):
    con.execute("CREATE TABLE lineitem_n(l_orderkey INTEGER, l_quantity REAL, l_shipmode TEXT, "
                "l_shipdate TEXT, l_commitdate TEXT, l_receiptdate TEXT)")
    con.execute("CREATE VIRTUAL TABLE lineitem USING csq(l_orderkey INTEGER, l_quantity REAL, "
                "l_shipmode TEXT, l_shipdate TEXT, l_commitdate TEXT, l_receiptdate TEXT, "
                "rowgroup=256, pushdown='always')")
    con.execute("CREATE TABLE orders_n(o_orderkey INTEGER, o_orderpriority TEXT, o_orderdate TEXT)")
    con.execute("CREATE VIRTUAL TABLE orders USING csq(o_orderkey INTEGER, o_orderpriority TEXT, "
                "o_orderdate TEXT, pushdown='always')")
    day = lambda n: "199%d-%02d-%02d" % (3 + n // 360, 1 + n % 360 // 30, 1 + n % 30)
    li, od = [], []
    for o in range(1, 401):
        base = rnd.randrange(0, 1500)
        od.append((o, rnd.choice(["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"]),
                   day(base)))
        for _ in range(rnd.randrange(1, 6)):
            ship = base + rnd.randrange(1, 60)
            li.append((o, float(rnd.randrange(1, 50)), rnd.choice(["MAIL", "SHIP", "AIR", "TRUCK"]),
                       day(ship), day(base + rnd.randrange(20, 80)), day(ship + rnd.randrange(1, 30))))
    for t in ("lineitem", "lineitem_n"):
        con.executemany("INSERT INTO %s VALUES(?,?,?,?,?,?)" % t, li)
    for t in ("orders", "orders_n"):
        con.executemany("INSERT INTO %s VALUES(?,?,?)" % t, od)


def test_tpch_shaped_text_dates():
    con = connect()
    tpch_tables(con, random.Random(42))
    d = Db.__new__(Db)
    d.con, d.nv = con, 0
    queries = [
        # Q4's subquery and Q21's l1 filter, as aggregates over lineitem
        "SELECT count(*), sum(l_orderkey) FROM lineitem WHERE l_commitdate < l_receiptdate",
        "SELECT l_shipmode, count(*) FROM lineitem WHERE l_receiptdate > l_commitdate "
        "GROUP BY l_shipmode ORDER BY 1",
        # Q12: both comparisons, with constants
        "SELECT o_orderpriority, count(*) FROM orders JOIN lineitem ON o_orderkey = l_orderkey "
        "WHERE l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate "
        "AND l_shipdate < l_commitdate AND l_receiptdate >= '1994-01-01' "
        "AND l_receiptdate < '1995-01-01' GROUP BY o_orderpriority ORDER BY 1",
        # Q4 decorrelated by hand
        "SELECT o_orderpriority, count(*) FROM orders WHERE o_orderdate >= '1993-07-01' "
        "AND o_orderkey IN (SELECT l_orderkey FROM lineitem WHERE l_commitdate < l_receiptdate) "
        "GROUP BY o_orderpriority ORDER BY 1",
        # a row plan
        "SELECT l_orderkey, l_shipdate FROM lineitem WHERE l_shipdate >= l_commitdate ORDER BY 1, 2",
    ]
    for q in queries:
        native = q.replace("lineitem", "lineitem_n").replace("orders", "orders_n")
        want = con.execute(native).fetchall()
        assert want, q  # the data makes every query return something
        assert d.view(q) == want, (q, d.plan(q))
    # the single-table ones name the comparison on the device
    for q in (queries[0], queries[1], queries[4]):
        p = d.plan(q)
        assert p["plan"].startswith("device") and "comparing columns" in p["device"], (q, p)
    # the join's lineitem scan carries its four filters (IN, two column
    # comparisons, the range of two terms ... at least the comparisons)
    p = d.plan(queries[2])
    assert p["plan"].startswith("join"), p
    scan = [v for k, v in p.items() if "lineitem on its device" in v]
    assert scan and "5 pushed filter(s)" in scan[0], p
    # the row plan returns only the rows that pass
    con.execute("SELECT csq_stats_reset()")
    rows = d.view(queries[4])
    assert stats(con)["rows_returned"] == len(rows), stats(con)
