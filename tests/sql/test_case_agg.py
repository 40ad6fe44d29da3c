"""CASE in aggregates on the device (planner/split.c, sp_case_when).

An aggregate argument "CASE WHEN w THEN r ... [ELSE x] END" runs in the
grouped program when each w is an AND or OR of terms that run as filters
(comparisons with constants, IN lists, IS [NOT] NULL, BETWEEN, LIKE and
GLOB): each term a condition, AND and OR as nested CASEs. Random CASE
aggregates over a csq table whose columns hold every storage class and
NULLs (pushdown='always') and over joins (csq's host engine) must answer
as a native table does; CASE WHEN NOT ..., a CASE with a base expression,
a CASE group key and comparisons across columns stay with SQLite and still
answer right.
"""
import random

from harness import connect
from test_join_plan import NTAB, Db, explain
from test_join_random import canon


def value(rnd):
    return rnd.choice([None, rnd.randrange(-5, 10), rnd.randrange(10) + 0.5, float(rnd.randrange(5)),
                       str(rnd.randrange(8)), "a", "Ab", "b%", "", b"\x01"])


def setup(con, n, seed):
    rnd = random.Random(seed)
    decl = "k INTEGER, x INTEGER, y REAL, s TEXT, u NUMERIC, v"
    con.execute("CREATE VIRTUAL TABLE t USING csq(%s, pushdown='always')" % decl)
    con.execute("CREATE TABLE nt(%s)" % decl)
    rows = [(rnd.randrange(6), value(rnd), value(rnd), value(rnd), value(rnd), value(rnd))
            for _ in range(n)]
    con.execute("BEGIN")
    for t in ("t", "nt"):
        con.executemany("INSERT INTO %s VALUES(?,?,?,?,?,?)" % t, rows)
    con.execute("COMMIT")


def const(rnd):
    return rnd.choice(["3", "2.5", "'3'", "'a'", "'Ab'", "NULL", "-1", "'b%'", "X'01'", "0"])


def term(rnd, cols):
    c = rnd.choice(cols)
    k = rnd.randrange(7)
    if k == 0:
        return "%s %s %s" % (c, rnd.choice(["=", "<>", "<", "<=", ">", ">=", "IS", "IS NOT"]), const(rnd))
    if k == 1:
        return "%s %sIN (%s)" % (c, rnd.choice(["", "NOT "]),
                                 ", ".join(const(rnd) for _ in range(rnd.randint(1, 3))))
    if k == 2:
        return "%s IS %sNULL" % (c, rnd.choice(["", "NOT "]))
    if k == 3:
        return "%s BETWEEN %s AND %s" % (c, const(rnd), const(rnd))
    if k == 4:
        return "%s %s '%s'" % (c, rnd.choice(["LIKE", "NOT LIKE", "GLOB"]),
                               rnd.choice(["a%", "%b%", "A_", "3", "*b*", "[a-b]*"]))
    if k == 5:
        return "(%s = %s OR %s = %s)" % (c, const(rnd), c, const(rnd))
    return "%s < %s" % (c, const(rnd))


def cond(rnd, cols, depth=0):
    if depth < 2 and rnd.random() < 0.35:
        return "(%s %s %s)" % (cond(rnd, cols, depth + 1), rnd.choice(["AND", "OR"]),
                               cond(rnd, cols, depth + 1))
    return term(rnd, cols)


def case(rnd, cols, nums):
    parts = ["WHEN %s THEN %s" % (cond(rnd, cols), rnd.choice(nums + ["1", "0.5", "NULL"]))
             for _ in range(rnd.randint(1, 3))]
    els = rnd.choice(["", " ELSE %s" % rnd.choice(nums + ["0", "-2"])])
    return "CASE %s%s END" % (" ".join(parts), els)


def agg(rnd, cols, nums):
    e = case(rnd, cols, nums)
    if rnd.random() < 0.3:
        e = "%s * %s" % (e, rnd.choice(nums + ["2"]))
    return "%s(%s)" % (rnd.choice(["sum", "total", "count", "avg", "min", "max"]), e)


def rows(con, sql):
    try:
        return sorted(map(canon, con.execute(sql).fetchall())), None
    except Exception as e:  # noqa: BLE001 - compared with native's error
        return None, str(e)


def test_random_case_aggregates_on_one_table():
    con = connect()
    setup(con, 3000, 5)
    cols = ["x", "y", "s", "u", "v", "k"]
    nums = ["x", "y", "k", "u"]
    pushed = total = 0
    for seed in range(400):
        rnd = random.Random(seed)
        sel = [agg(rnd, cols, nums) for _ in range(rnd.randint(1, 3))]
        g = rnd.random() < 0.6
        sql = "SELECT %s%s FROM {t}%s" % ("k, " if g else "", ", ".join(sel),
                                          " GROUP BY k" if g else "")
        mine, native = sql.format(t="t"), sql.format(t="nt")
        got, gerr = rows(con, mine)
        want, werr = rows(con, native)
        assert (gerr is None) == (werr is None), (mine, gerr, werr)
        assert got == want, "seed %d:\n  %s\n  csq    %s\n  native %s" % (seed, mine, got[:4], want[:4])
        # through a pushdown view too: the device's program
        con.execute("CREATE VIRTUAL TABLE temp.cq USING csq_query('%s')" % mine.replace("'", "''"))
        try:
            got, gerr = rows(con, "SELECT * FROM cq")
        finally:
            con.execute("DROP TABLE temp.cq")
        assert (gerr is None) == (werr is None), (mine, gerr, werr)
        assert got == want, "view, seed %d:\n  %s\n  csq    %s\n  native %s" % (
            seed, mine, got[:4], want[:4])
        total += 1
        pushed += explain(con, mine)["plan"] != "host"
    # text in arithmetic or a sum, BLOB LIKE, and NULL-only lists are the
    # refusals; most CASE aggregates run on the device
    assert pushed > total // 2, "%d of %d CASE aggregates pushed" % (pushed, total)
    print("%d of %d CASE aggregates pushed to the device" % (pushed, total))


def test_refused_case_shapes_still_answer_right():
    con = connect()
    setup(con, 2000, 9)
    for sql in [
        "SELECT k, sum(CASE WHEN NOT x = 3 THEN y ELSE 1 END) FROM {t} GROUP BY k",
        "SELECT k, sum(CASE x WHEN 3 THEN 1 WHEN 4 THEN 2 ELSE 0 END) FROM {t} GROUP BY k",
        "SELECT CASE WHEN x > 2 THEN 1 ELSE 0 END, count(*) FROM {t} GROUP BY 1",
        "SELECT k, sum(CASE WHEN x < y THEN 1 ELSE 0 END) FROM {t} GROUP BY k",
    ]:
        mine, native = sql.format(t="t"), sql.format(t="nt")
        con.execute("CREATE VIRTUAL TABLE temp.cq USING csq_query('%s')" % mine.replace("'", "''"))
        try:
            got = rows(con, "SELECT * FROM cq")
        finally:
            con.execute("DROP TABLE temp.cq")
        assert got == rows(con, native), mine
    why = explain(con, "SELECT k, sum(CASE WHEN NOT x = 3 THEN y ELSE 1 END) FROM t GROUP BY k")["why"]
    assert "CASE condition" in why, why


def test_case_aggregates_over_joins():
    used = total = 0
    for seed in range(4):
        rnd = random.Random(300 + seed)
        db = Db(rnd)
        for step in range(40):
            n = rnd.randint(2, NTAB)
            tabs = rnd.sample(range(NTAB), n)
            frm = ", ".join("{t%d} AS x%d" % (t, i) for i, t in enumerate(tabs))
            where = " AND ".join("x%d.k1 = x%d.%s" % (rnd.randrange(i), i, rnd.choice(["k1", "k2"]))
                                 for i in range(1, n))
            cols = ["x%d.%s" % (rnd.randrange(n), c) for c in ("k1", "k2", "r", "v", "w")]
            cols = [c for c in cols if "COLLATE" not in dict(db.cols[tabs[int(c[1])]])[c.split(".")[1]]]
            nums = ["x%d.%s" % (rnd.randrange(n), c) for c in ("k1", "k2", "r")]
            key = "x%d.k1" % rnd.randrange(n)
            sql = "SELECT %s, %s FROM %s WHERE %s GROUP BY %s ORDER BY %s" % (
                key, agg(rnd, cols, nums), frm, where, key, key)
            mine = sql.format(**{"t%d" % t: "t%d" % t for t in range(NTAB)})
            native = sql.format(**{"t%d" % t: "n%d" % t for t in range(NTAB)})
            db.con.execute("CREATE VIRTUAL TABLE temp.cj USING csq_query('%s')" % mine.replace("'", "''"))
            try:
                got = rows(db.con, "SELECT * FROM cj")
            finally:
                db.con.execute("DROP TABLE temp.cj")
            want = rows(db.con, native)
            assert got == want, "seed %d step %d:\n  %s\n  csq    %s\n  native %s" % (
                seed, step, mine, got, want)
            total += 1
            used += explain(db.con, mine).get("host aggregation", "").startswith("instead")
        db.con.close()
    assert used > total // 3, "%d of %d CASE joins aggregated in csq's host engine" % (used, total)
    print("%d of %d CASE joins aggregated in csq's host engine" % (used, total))
