"""LEFT JOINs through the join planner (planner/join.c, planner/hashjoin.c).

A LEFT JOINed table is a build side joined after every table its ON names;
a probe row without a match keeps going with NULLs for it. Its ON may hold
keys of it against earlier tables and filters of it alone (pushed to its
device scan); WHERE terms that read it run after the join, and no join
filter from it reaches the tables it preserves. Random queries mixing inner
and LEFT joins over csq tables and native twins (keys of mixed storage
classes and NULLs, filters in ON and WHERE, IS NULL tests of the NULL-
extended side, aggregates counting its columns) must answer as the same SQL
over native tables.
"""
import random

from harness import connect
from test_join_plan import NTAB, Db, explain, filter_term, same_as_native, via_view, answer


def statement(rnd, cols):
    n = rnd.randint(2, NTAB)
    tabs = rnd.sample(range(NTAB), n)
    aliases = ["x%d" % i for i in range(n)]
    frm, where, nleft = "{t%d} AS x0" % tabs[0], [], 0
    for i in range(1, n):
        other = "x%d" % rnd.randrange(i)
        on = ["%s.%s = %s.%s" % (aliases[i], rnd.choice(["k1", "k2"]), other, rnd.choice(["k1", "k2"]))]
        left = rnd.random() < 0.6
        if left:
            nleft += 1
            for _ in range(rnd.randrange(3)):
                on.append(filter_term(rnd, aliases[i]))
            if rnd.random() < 0.1:  # a term over the preserved side: SQLite's
                on.append(filter_term(rnd, other))
        frm += " %s {t%d} AS x%d ON %s" % ("LEFT JOIN" if left else "JOIN", tabs[i], i, " AND ".join(on))
    for _ in range(rnd.randrange(3)):
        a = rnd.choice(aliases)
        where.append(rnd.choice([filter_term(rnd, a), "%s.k1 IS NULL" % a, "%s.r IS NOT NULL" % a]))
    w = (" WHERE " + " AND ".join(where)) if where else ""
    a = rnd.choice(aliases)
    if rnd.random() < 0.5:
        g = "x0.k1"
        return "SELECT %s, count(*), count(%s.k2), sum(%s.r), max(%s.k1) FROM %s%s GROUP BY %s" % (
            g, a, rnd.choice(aliases), rnd.choice(aliases), frm, w, g), nleft
    sel = ", ".join("%s.%s" % (rnd.choice(aliases), rnd.choice(["k1", "k2", "r"])) for _ in range(3))
    return "SELECT %s FROM %s%s" % (sel, frm, w), nleft


def test_random_left_joins_equal_native():
    planned = total = 0
    for seed in range(8):
        rnd = random.Random(900 + seed)
        db = Db(rnd)
        for step in range(70):
            sql, nleft = statement(rnd, db.cols)
            mine = sql.format(**{"t%d" % t: "t%d" % t for t in range(NTAB)})
            native = sql.format(**{"t%d" % t: "n%d" % t for t in range(NTAB)})
            same_as_native(db.con, mine, native, "seed %d step %d" % (seed, step))
            if nleft:
                total += 1
                e = explain(db.con, mine)
                planned += e["plan"].startswith("join") and any("LEFT JOIN" in v for v in e.values())
        db.con.close()
    assert planned > total // 3, "%d of %d LEFT JOIN queries planned" % (planned, total)
    print("%d of %d queries with a LEFT JOIN planned" % (planned, total))


def test_tpch_q13_shape_is_planned_and_keeps_customers_without_orders():
    con = connect()
    rnd = random.Random(13)
    for name, decl, rows in (
            ("customer", "c_custkey INTEGER, c_name TEXT",
             [(i if i % 23 else None, "c%d" % i) for i in range(500)]),
            ("orders", "o_orderkey INTEGER, o_custkey INTEGER, o_comment TEXT",
             [(i, rnd.randrange(700) if i % 9 else None,
               rnd.choice(["special requests", "plain", "Special Requests", None])) for i in range(3000)])):
        con.execute("CREATE VIRTUAL TABLE %s USING csq(%s)" % (name, decl))
        con.execute("CREATE TABLE n%s(%s)" % (name, decl))
        for t in (name, "n" + name):
            con.executemany("INSERT INTO %s VALUES(%s)" % (t, ",".join("?" * len(rows[0]))), rows)
    q13 = ("SELECT c_count, count(*) AS custdist FROM (SELECT c_custkey, count(o_orderkey) AS c_count "
           "FROM {c} LEFT OUTER JOIN {o} ON c_custkey = o_custkey AND o_comment NOT LIKE "
           "'%special%requests%' GROUP BY c_custkey) AS c_orders GROUP BY c_count "
           "ORDER BY custdist DESC, c_count DESC")
    mine, native = q13.format(c="customer", o="orders"), q13.format(c="ncustomer", o="norders")
    e = explain(con, mine)
    assert e["plan"].startswith("join"), e
    assert any("LEFT JOIN" in v for v in e.values()), e
    got, gerr = via_view(con, mine)
    want, werr = answer(con, native)
    assert gerr is None and werr is None and got == want and got, (got, want, gerr)
    # the customers without orders are the c_count 0 group
    assert any(r.startswith("(('n', '0')") for r in got), got
    # an ON over the preserved side leaves the query to SQLite, answered the same
    bad = ("SELECT count(*), count(o_orderkey) FROM {c} LEFT JOIN {o} ON c_custkey = o_custkey "
           "AND c_name < 'c3'")
    e = explain(con, bad.format(c="customer", o="orders"))
    assert e["plan"] == "host" and "the ON of a LEFT JOIN" in e["why"], e
    assert via_view(con, bad.format(c="customer", o="orders")) == answer(
        con, bad.format(c="ncustomer", o="norders"))
