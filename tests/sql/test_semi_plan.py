"""Correlated subqueries as joins (planner/join.c, jp_corr): [NOT] EXISTS as
semi- and anti-joins, scalar aggregates as groups joined back.

A WHERE term "[NOT] EXISTS (SELECT ... FROM s WHERE ...)" whose subquery
reads one csq table, correlated by "s.x = o.y" (and "s.x <> o.y") between
numeric columns, its other terms device filters, runs as a scan of s with a
join filter of the joined rows' keys, marking the rows it matches. Random
queries over csq tables and native twins (keys of mixed storage classes and
NULLs, one to four outer tables, shapes the planner refuses among them) must
answer as the same SQL over native tables; TPC-H Q4, Q21 and Q22's shapes
must be planned. A scalar subquery "(SELECT agg(...) FROM s WHERE s.x = o.y
AND filters)" is grouped by its keys over the rows of s the joined rows'
keys let through, and each joined row takes its group's value (the
aggregate over no rows where none: count 0, sum NULL); TPC-H Q17's shape
must be planned and random ones must answer as native.
"""
import random

from harness import connect, stats
from test_join_plan import NTAB, Db, answer, explain, filter_term, same_as_native, statement, via_view


def exists_term(rnd, aliases, tab, planned=True):
    """A random [NOT] EXISTS over {tab}, correlated with the outer aliases."""
    inner = rnd.choice(["s", "x0", "q"])  # x0: shadows an outer alias, as SQLite resolves it
    keys = []
    for _ in range(rnd.choice([1, 1, 2])):
        keys.append("%s.%s = %s.%s" % (inner, rnd.choice(["k1", "k2"]), rnd.choice(aliases),
                                       rnd.choice(["k1", "k2"])))
    if rnd.random() < 0.3:
        keys.append("%s.%s <> %s.%s" % (inner, rnd.choice(["k1", "k2", "r"]), rnd.choice(aliases),
                                        rnd.choice(["k1", "k2", "r"])))
    if rnd.random() < 0.3:  # unqualified: the subquery's own column
        keys[0] = keys[0].replace("%s." % inner, "", 1)
    if inner == "x0":  # x0 inside means the subquery's table: correlate with another
        others = [a for a in aliases if a != "x0"]
        if not others:
            inner = "s"
        keys = [k.replace("= x0.", "= %s." % others[0]).replace("<> x0.", "<> %s." % others[0])
                if others else k.replace("x0.", "s.") for k in keys]
    terms = keys + [filter_term(rnd, inner) for _ in range(rnd.randrange(3))]
    if not planned:
        terms.append(rnd.choice([
            "%s.k1 < %s.k2" % (inner, aliases[0]),     # not an equality
            "%s.v = %s.v" % (inner, aliases[0]),       # a TEXT key
            "%s.k1 + 1 = %s.k2" % (inner, aliases[0]),  # an expression
        ]))
    rnd.shuffle(terms)
    sel = rnd.choice(["*", "1", "%s.k1" % inner, "NULL"])
    return "%sEXISTS (SELECT %s FROM %s AS %s WHERE %s)" % (
        rnd.choice(["", "NOT "]), sel, tab, inner, " AND ".join(terms))


def with_terms(sql, terms):
    at = [k for k in (" GROUP BY ", " ORDER BY ") if k in sql]
    cut = min(sql.index(k) for k in at) if at else len(sql)
    head, tail = sql[:cut], sql[cut:]
    glue = " AND " if " WHERE " in head else " WHERE "
    return head + glue + " AND ".join(terms) + tail


def single_table(rnd, cols):
    t = rnd.randrange(NTAB)
    w = [filter_term(rnd, "x0") for _ in range(rnd.randrange(2))]
    where = (" WHERE " + " AND ".join(w)) if w else ""
    if rnd.random() < 0.5:
        return "SELECT x0.k1, count(*), sum(x0.r) FROM {t%d} AS x0%s GROUP BY x0.k1" % (t, where)
    return "SELECT x0.k1, x0.k2, x0.r FROM {t%d} AS x0%s" % (t, where)


def test_random_exists_queries_equal_native():
    planned = total = 0
    for seed in range(8):
        rnd = random.Random(500 + seed)
        db = Db(rnd)
        for step in range(60):
            sql = single_table(rnd, db.cols) if rnd.random() < 0.4 else statement(rnd, db.cols)
            aliases = ["x%d" % i for i in range(sql.count(" AS x"))]
            terms = [exists_term(rnd, aliases, "{t%d}" % rnd.randrange(NTAB), rnd.random() < 0.85)
                     for _ in range(rnd.randint(1, 2))]
            sql = with_terms(sql, terms)
            mine = sql.format(**{"t%d" % t: "t%d" % t for t in range(NTAB)})
            native = sql.format(**{"t%d" % t: "n%d" % t for t in range(NTAB)})
            same_as_native(db.con, mine, native, "seed %d step %d" % (seed, step))
            total += 1
            e = explain(db.con, mine)
            planned += e["plan"].startswith("join") and "EXISTS" in e["why"]
        db.con.close()
    assert planned > total // 3, "%d of %d queries planned with semi-joins" % (planned, total)
    print("%d of %d queries planned with semi- or anti-joins" % (planned, total))


def pair(con, name, decl, rows):
    con.execute("CREATE VIRTUAL TABLE %s USING csq(%s)" % (name, decl))
    con.execute("CREATE TABLE n%s(%s)" % (name, decl))
    for t in (name, "n" + name):
        con.executemany("INSERT INTO %s VALUES(%s)" % (t, ",".join("?" * len(rows[0]))), rows)


def orders_lineitem(con, n=3000):
    rnd = random.Random(7)
    pair(con, "orders", "o_orderkey INTEGER, o_orderpriority TEXT, o_orderdate TEXT",
         [(i if i % 17 else None, "%d-P" % rnd.randrange(5), "1993-%02d-01" % rnd.randrange(1, 13))
          for i in range(n)])
    pair(con, "lineitem",
         "l_orderkey INTEGER, l_suppkey INTEGER, l_commitdate TEXT, l_receiptdate TEXT",
         [(rnd.randrange(n + 500), rnd.randrange(9), "1993-%02d-10" % rnd.randrange(1, 13),
           "1993-%02d-10" % rnd.randrange(1, 13)) for _ in range(4 * n)])


Q4 = """SELECT o_orderpriority, count(*) AS order_count FROM {o}
WHERE o_orderdate >= '1993-07-01' AND o_orderdate < '1993-10-01'
  AND EXISTS (SELECT * FROM {l} WHERE l_orderkey = o_orderkey AND l_commitdate < '1993-06-10')
GROUP BY o_orderpriority ORDER BY o_orderpriority"""

Q21 = """SELECT count(*), sum(l1.l_suppkey) FROM {l} l1, {o}
WHERE o_orderkey = l1.l_orderkey AND l1.l_receiptdate > l1.l_commitdate
  AND EXISTS (SELECT * FROM {l} l2 WHERE l2.l_orderkey = l1.l_orderkey
              AND l2.l_suppkey <> l1.l_suppkey)
  AND NOT EXISTS (SELECT * FROM {l} l3 WHERE l3.l_orderkey = l1.l_orderkey
              AND l3.l_suppkey <> l1.l_suppkey AND l3.l_receiptdate > '1993-09-10')"""


def test_tpch_shapes_are_planned_and_equal_native():
    con = connect()
    orders_lineitem(con)
    for q in (Q4, Q21, Q4.replace("AND EXISTS", "AND NOT EXISTS")):
        mine, native = q.format(o="orders", l="lineitem"), q.format(o="norders", l="nlineitem")
        e = explain(con, mine)
        assert e["plan"].startswith("join") and "EXISTS" in e["why"], e
        assert any("semi-join" in p or "anti-join" in p for p in e), e
        got, gerr = via_view(con, mine)
        want, werr = answer(con, native)
        assert gerr is None and werr is None and got == want and got, (q, got, want, gerr)


def test_subquery_rows_stay_on_the_device():
    """The joined rows' keys go into the subquery's scan: of its 12,000 rows,
    only those whose key some outer row has come to the host."""
    con = connect()
    orders_lineitem(con)
    sql = Q4.format(o="orders", l="lineitem").replace("o_orderdate < '1993-10-01'",
                                                      "o_orderdate < '1993-07-02'")
    before = stats(con)
    got, _ = via_view(con, sql)
    after = stats(con)
    want, _ = answer(con, sql.replace("FROM orders", "FROM norders").replace("FROM lineitem",
                                                                             "FROM nlineitem"))
    assert got == want and got, (got, want)
    sent = after["rows_returned"] - before["rows_returned"]
    assert 0 < sent < 2000, sent


def test_refused_subqueries_stay_with_sqlite():
    con = connect()
    orders_lineitem(con, 500)
    con.execute("CREATE TABLE native_l AS SELECT * FROM nlineitem")
    cases = [
        ("EXISTS (SELECT * FROM native_l WHERE l_orderkey = o_orderkey)", "not a csq table"),
        ("EXISTS (SELECT * FROM {l} WHERE l_orderkey < o_orderkey)", "l_orderkey < o_orderkey is "
         "neither"),
        ("EXISTS (SELECT * FROM {l} WHERE l_suppkey <> o_orderkey)", "correlated other than"),
        ("EXISTS (SELECT count(*) FROM {l} WHERE l_orderkey = o_orderkey AND l_suppkey > 99)",
         "correlated subquery"),
        ("EXISTS (SELECT * FROM {l} WHERE l_orderkey = o_orderkey AND l_commitdate = o_orderdate)",
         "not numeric BINARY columns"),
        ("EXISTS (SELECT * FROM {l} WHERE l_orderkey = o_orderkey AND l_suppkey + 1 = 3)",
         "neither a device filter nor a key"),
        ("EXISTS (SELECT * FROM {l} WHERE l_orderkey = o_orderkey LIMIT 0)", "correlated subquery"),
        ("EXISTS (SELECT * FROM {l} WHERE l_orderkey = o_orderkey AND "
         "l_suppkey IN (SELECT l_suppkey FROM {l} WHERE l_orderkey = o_orderkey))",
         "correlated subquery"),
    ]
    for term, why in cases:
        q = "SELECT o_orderpriority, count(*) FROM {o} WHERE %s GROUP BY 1" % term
        mine, native = q.format(o="orders", l="lineitem"), q.format(o="norders", l="nlineitem")
        e = explain(con, mine)
        assert not e["plan"].startswith("join") and why in e["why"], (term, e)
        got, gerr = via_view(con, mine)
        want, werr = answer(con, native)
        assert gerr is None and werr is None and got == want, (term, got, want, gerr)
    # an uncorrelated EXISTS is not a semi-join: SQLite runs it once
    q = "SELECT count(*) FROM {o} AS a, {o} AS b WHERE a.o_orderkey = b.o_orderkey AND " \
        "EXISTS (SELECT * FROM {l} WHERE l_suppkey = 3)"
    e = explain(con, q.format(o="orders", l="lineitem"))
    assert e["plan"].startswith("join") and "EXISTS" not in e["why"], e


def test_empty_and_null_sides():
    con = connect()
    orders_lineitem(con, 400)
    for filt in ("l_suppkey > 100", "l_suppkey IS NULL", "l_suppkey = 3"):
        for neg in ("", "NOT "):
            q = ("SELECT count(*), count(o_orderkey) FROM {o} WHERE %sEXISTS (SELECT 1 FROM {l} "
                 "WHERE l_orderkey = o_orderkey AND %s)" % (neg, filt))
            mine, native = q.format(o="orders", l="lineitem"), q.format(o="norders", l="nlineitem")
            assert "EXISTS" in explain(con, mine)["why"]
            got, _ = via_view(con, mine)
            want, _ = answer(con, native)
            assert got == want, (q, got, want)
    # the outer side empty: the subquery is not read
    q = ("SELECT count(*) FROM {o} WHERE o_orderdate = 'none' AND NOT EXISTS (SELECT 1 FROM {l} "
         "WHERE l_orderkey = o_orderkey)")
    got, _ = via_view(con, q.format(o="orders", l="lineitem"))
    assert got == answer(con, q.format(o="norders", l="nlineitem"))[0]


def scalar_term(rnd, aliases, tab):
    """A random comparison with a correlated scalar aggregate over {tab}."""
    o = rnd.choice(aliases)
    keys = ["s.%s = %s.%s" % (rnd.choice(["k1", "k2"]), o, rnd.choice(["k1", "k2"]))]
    if rnd.random() < 0.3:
        keys.append("s.%s = %s.%s" % (rnd.choice(["k1", "k2"]), rnd.choice(aliases), rnd.choice(["k1", "k2"])))
    terms = keys + [filter_term(rnd, "s") for _ in range(rnd.randrange(2))]
    agg = rnd.choice(["count(*)", "count(s.r)", "sum(s.k1)", "avg(s.r)", "min(s.k2)", "max(s.r) * 2",
                      "total(s.k1) + 1", "0.5 * sum(s.r)", "coalesce(max(s.k1), -1)"])
    sub = "(SELECT %s FROM %s AS s WHERE %s)" % (agg, tab, " AND ".join(terms))
    return rnd.choice(["%s.r < %s" % (rnd.choice(aliases), sub), "%s >= %s.k1" % (sub, rnd.choice(aliases)),
                       "coalesce(%s, 0) <> %s.k2" % (sub, rnd.choice(aliases)), "%s IS NULL" % sub])


def test_random_scalar_subqueries_equal_native():
    planned = total = 0
    for seed in range(6):
        rnd = random.Random(700 + seed)
        db = Db(rnd)
        for step in range(50):
            sql = statement(rnd, db.cols)
            aliases = ["x%d" % i for i in range(sql.count(" AS x"))]
            sql = with_terms(sql, [scalar_term(rnd, aliases, "{t%d}" % rnd.randrange(NTAB))])
            mine = sql.format(**{"t%d" % t: "t%d" % t for t in range(NTAB)})
            native = sql.format(**{"t%d" % t: "n%d" % t for t in range(NTAB)})
            same_as_native(db.con, mine, native, "seed %d step %d" % (seed, step))
            total += 1
            e = explain(db.con, mine)
            planned += e["plan"].startswith("join") and "scalar subqueries" in e["why"]
        db.con.close()
    assert planned > total // 3, "%d of %d queries planned with scalar subqueries" % (planned, total)
    print("%d of %d queries planned with correlated scalar subqueries" % (planned, total))


Q17 = """SELECT sum(l_extendedprice) / 7.0 AS avg_yearly FROM {l}, {p}
WHERE p_partkey = l_partkey AND p_brand = 'Brand#23' AND p_container = 'MED BOX'
  AND l_quantity < (SELECT 0.2 * avg(l_quantity) FROM {l} WHERE l_partkey = p_partkey)"""


def test_tpch_q17_shape_is_planned_and_equal_native():
    con = connect()
    rnd = random.Random(17)
    pair(con, "part", "p_partkey INTEGER, p_brand TEXT, p_container TEXT",
         [(i, "Brand#%d" % rnd.choice([23, 12]), rnd.choice(["MED BOX", "SM CASE"])) for i in range(400)])
    pair(con, "lineitem", "l_partkey INTEGER, l_quantity REAL, l_extendedprice REAL",
         [(rnd.randrange(420), float(rnd.randrange(1, 51)), rnd.randrange(100000) / 100.0)
          for _ in range(8000)])
    mine, native = Q17.format(l="lineitem", p="part"), Q17.format(l="nlineitem", p="npart")
    e = explain(con, mine)
    assert e["plan"].startswith("join") and "scalar subquery" in "".join(e), e
    got, gerr = via_view(con, mine)
    want, werr = answer(con, native)
    assert gerr is None and werr is None and got, (got, gerr)
    g, w = float(got[0].split("'")[3]), float(want[0].split("'")[3])
    assert abs(g - w) <= 1e-9 * abs(w), (got, want)  # averages summed in another order
    # only the lines of the 400 parts' chosen brands cross for the subquery, not 8000
    before = stats(con)["rows_returned"]
    via_view(con, mine)
    assert stats(con)["rows_returned"] - before < 6000


def test_scalar_subquery_rows_over_the_budget_run_as_sql():
    con = connect()
    rnd = random.Random(18)
    pair(con, "part", "p_partkey INTEGER, p_brand TEXT, p_container TEXT",
         [(i, "Brand#%d" % rnd.choice([23, 12]), rnd.choice(["MED BOX", "SM CASE"])) for i in range(40)])
    pair(con, "lineitem", "l_partkey INTEGER, l_quantity REAL, l_extendedprice REAL",
         [(rnd.randrange(40), float(rnd.randrange(1, 51)), rnd.randrange(100000) / 100.0)
          for _ in range(20000)])
    mine, native = Q17.format(l="lineitem", p="part"), Q17.format(l="nlineitem", p="npart")
    want, _ = answer(con, native)
    for budget in (64 << 20, 60000):  # the parts fit 60,000 bytes, their lines do not
        con.execute("SELECT csq_probe_memory(?)", (budget,))
        got, gerr = via_view(con, mine)
        assert gerr is None and got, gerr
        g, w = float(got[0].split("'")[3]), float(want[0].split("'")[3])
        assert abs(g - w) <= 1e-9 * abs(w), (budget, got, want)
