"""Uncorrelated subqueries inside planned joins (planner/join.c).

The join planner takes a join whose WHERE, ON, select list, HAVING or ORDER
BY hold subqueries that do not refer to the outer query: SQLite evaluates
them in the host part, pasted as written, and a top-level "x IN (SELECT
...)" over a column of numeric affinity runs first, its values going into
x's device scan as an IN list. A correlated subquery leaves the whole query
to SQLite. Random queries over csq tables and native twins (keys of mixed
classes and NULLs, subqueries over csq and native tables, giving NULLs,
numeric text, nothing, or more values than a filter holds) must answer as
the same SQL over native tables.
"""
import random

from harness import connect
from test_join_plan import NTAB, Db, answer, explain, make_pair, same_as_native, statement, via_view


def subquery_term(rnd, aliases, src):
    """A random uncorrelated subquery term over a random outer column."""
    a = rnd.choice(aliases)
    col = "%s.%s" % (a, rnd.choice(["k1", "k2", "k1", "r", "v"]))
    inner = rnd.choice(["k1", "k2", "r", "v"])
    tab = rnd.choice(src)
    where = rnd.choice(["", " WHERE %s IS NOT NULL" % inner, " WHERE k2 < %d" % rnd.randrange(12),
                        " WHERE 0"])
    kind = rnd.randrange(7)
    if kind <= 2:  # the pushed shape
        return "%s IN (SELECT %s FROM %s%s)" % (col, inner, tab, where)
    if kind == 3:
        return "%s NOT IN (SELECT %s FROM %s%s)" % (col, inner, tab, where)
    if kind == 4:
        return "EXISTS (SELECT 1 FROM %s%s)" % (tab, where)
    if kind == 5:
        return "%s > (SELECT avg(%s) FROM %s%s)" % (col, inner, tab, where)
    # a compound: values of two columns, past what one filter holds with big
    return "%s IN (SELECT k1 + 0 FROM %s UNION ALL SELECT k2 FROM %s)" % (col, tab, tab)


def with_subqueries(rnd, sql, src):
    n = sql.count(" AS x")
    aliases = ["x%d" % i for i in range(n)]
    terms = [subquery_term(rnd, aliases, src) for _ in range(rnd.randint(1, 2))]
    at = [k for k in (" GROUP BY ", " ORDER BY ") if k in sql]
    cut = min(sql.index(k) for k in at) if at else len(sql)
    head, tail = sql[:cut], sql[cut:]
    glue = " AND " if " WHERE " in head else " WHERE "
    return head + glue + " AND ".join(terms) + tail


def test_random_joins_with_subqueries_equal_native():
    planned = pushed = total = 0
    for seed in range(6):
        rnd = random.Random(1000 + seed)
        db = Db(rnd)
        big = ["big"]
        db.con.execute("CREATE VIRTUAL TABLE big USING csq(k1 INTEGER, k2 INTEGER, r REAL, v TEXT)")
        db.con.execute("CREATE TABLE nbig(k1 INTEGER, k2 INTEGER, r REAL, v TEXT)")
        rows = [(i, i % 7, i / 2.0, str(i % 11)) for i in range(5000)]
        db.con.executemany("INSERT INTO big VALUES(?,?,?,?)", rows)
        db.con.executemany("INSERT INTO nbig VALUES(?,?,?,?)", rows)
        for step in range(60):
            src = ["{t%d}" % rnd.randrange(NTAB), "n%d" % rnd.randrange(NTAB), "{big}"]
            sql = with_subqueries(rnd, statement(rnd, db.cols), src)
            names = {"t%d" % t: "t%d" % t for t in range(NTAB)}
            mine = sql.format(big="big", **names)
            native = sql.format(big="nbig", **{"t%d" % t: "n%d" % t for t in range(NTAB)})
            same_as_native(db.con, mine, native, "seed %d step %d" % (seed, step))
            total += 1
            e = explain(db.con, mine)
            planned += e["plan"].startswith("join")
            pushed += "IN subqueries run first" in e.get("why", "")
        db.con.close()
    assert planned > total // 3 and pushed > 0, (planned, pushed, total)
    print("%d of %d queries planned as joins, %d with an IN subquery pushed" % (planned, total, pushed))


def test_in_subquery_values_filter_the_device_scan():
    """Q18's shape: few keys from a subquery keep the other rows of both
    tables on the device; numeric text among the values matches as SQLite
    applies the column's affinity; NULLs among them match nothing."""
    con = connect()
    make_pair(con, "o", "ok INTEGER, cust INTEGER, price REAL", [(i, i % 50, i * 1.5) for i in range(20000)])
    make_pair(con, "l", "ok INTEGER, qty INTEGER", [(i // 4, i % 9) for i in range(80000)])
    for pre in ("", "n"):
        con.execute("CREATE TABLE %skeys(k)" % pre)
        con.executemany("INSERT INTO %skeys VALUES(?)" % pre, [(7,), ("11",), (None,), (13.0,), ("x",), (19999,)])
    q = ("SELECT o.ok, o.cust, sum(l.qty) FROM {o} o, {l} l WHERE o.ok = l.ok AND o.ok IN "
         "(SELECT k FROM keys) GROUP BY o.ok, o.cust ORDER BY 1")
    mine, native = q.format(o="o", l="l"), q.format(o="no", l="nl")
    e = explain(con, mine)
    assert e["plan"].startswith("join") and "IN subqueries run first" in e["why"], e
    con.execute("SELECT csq_stats_reset()")
    got, _ = via_view(con, mine)
    moved = dict(con.execute("SELECT name, value FROM csq_stats").fetchall())["bytes_to_host"]
    want, _ = answer(con, native)
    assert got == want and len(want) == 4, (got, want)
    # 4 orders and their 16 lines cross, not 100,000 rows
    assert moved < 64 * 1024, moved
    # an empty subquery: nothing joins
    empty = "SELECT count(*) FROM o, l WHERE o.ok = l.ok AND o.ok IN (SELECT k FROM keys WHERE 0)"
    assert via_view(con, empty)[0] == answer(con, empty.replace(" o,", " no AS o,").replace(" l ", " nl AS l "))[0]


def test_not_in_subquery_values_filter_the_device_scan():
    """x NOT IN (SELECT ...) as the device's NOT IN over the values: numeric
    text and 13.0 match as SQLite converts them; a NULL x never passes; a
    NULL among the values makes the term never true; over no rows it is
    true for every row, a NULL x too (Q16's supplier complaints)."""
    con = connect()
    make_pair(con, "o", "ok INTEGER, cust INTEGER", [(i if i % 97 else None, i % 50) for i in range(3000)])
    make_pair(con, "l", "ok INTEGER, qty INTEGER", [(i // 3, i % 9) for i in range(9000)])
    for pre in ("", "n"):
        con.execute("CREATE TABLE %skeys(k, bad)" % pre)
        con.executemany("INSERT INTO %skeys VALUES(?,?)" % pre,
                        [(7, 0), ("11", 0), (13.0, 0), ("x", 0), (2999, 0), (None, 1)])
    pushed = 0
    for where in ("WHERE NOT bad", "WHERE 1", "WHERE 0", "WHERE k > 100", "WHERE bad"):
        for q in ("SELECT count(*), sum(l.qty) FROM {o} o, {l} l WHERE o.cust = l.ok AND o.ok NOT IN "
                  "(SELECT k FROM {k} %s)" % where,
                  "SELECT o.cust, count(*) FROM {o} o, {l} l WHERE o.cust = l.ok AND o.ok NOT IN "
                  "(SELECT k FROM {k} %s) GROUP BY 1" % where):
            mine, native = q.format(o="o", l="l", k="keys"), q.format(o="no", l="nl", k="nkeys")
            same_as_native(con, mine, native, "NOT IN " + where)
            pushed += "IN subqueries run first" in explain(con, mine)["why"]
    assert pushed == 10, pushed


def test_correlated_subqueries_stay_with_sqlite_or_become_semi_joins():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE a USING csq(k INTEGER, v INTEGER)")
    con.execute("CREATE VIRTUAL TABLE b USING csq(k INTEGER, w INTEGER)")
    con.executemany("INSERT INTO a VALUES(?,?)", [(i % 10, i) for i in range(100)])
    con.executemany("INSERT INTO b VALUES(?,?)", [(i % 10, i * 2) for i in range(30)])
    for sql, shape in (
            ("SELECT a.k, count(*) FROM a, b WHERE a.k = b.k AND a.v > (SELECT avg(w) FROM b b2 "
             "WHERE b2.k = a.k) GROUP BY 1 ORDER BY 1", "scalar subquery"),
            ("SELECT a.k, count(*) FROM a, b WHERE a.k = b.k AND a.v > (SELECT avg(w) FROM b b2 "
             "WHERE b2.k < a.k) GROUP BY 1 ORDER BY 1", "correlated"),
            ("SELECT count(*) FROM a, b WHERE a.k = b.k AND EXISTS (SELECT 1 FROM b b2 WHERE b2.w = a.v)",
             "semi-join"),  # test_semi_plan.py has more
            ("SELECT count(*) FROM a, b WHERE a.k = b.k AND EXISTS (SELECT 1 FROM b b2 WHERE b2.w > a.v)",
             "correlated"),
            ("SELECT count(*) FROM a, b WHERE a.k = b.k AND a.v IN (SELECT w FROM b WHERE w < ?1)",
             "parameter inside a subquery")):
        e = explain(con, sql.replace("?1", "40"))
        if shape == "correlated":
            assert not e["plan"].startswith("join") and "correlated" in e["why"], e
        if shape in ("semi-join", "scalar subquery"):
            assert e["plan"].startswith("join") and any(shape in p for p in e), e
        want = con.execute(sql, (40,) if "?1" in sql else ()).fetchall()
        con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query('%s')" % sql.replace("'", "''"))
        got = con.execute("SELECT * FROM v" + ("(40)" if "?1" in sql else "")).fetchall()
        con.execute("DROP TABLE temp.v")
        assert got == want, (sql, got, want)
