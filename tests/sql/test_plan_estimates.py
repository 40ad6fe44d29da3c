"""Row estimates that steer SQLite's join order over csq tables
(vtab/plan.c): the constant terms SQLite checks itself on a table read on
the host still shrink its estimated rows; "= constant" on a TEXT column
keeps one dictionary entry's share of the rows; IS NULL the zone maps'
share of NULLs. Checked by the join order EXPLAIN QUERY PLAN shows for
the shapes where the order decides the cost (TPC-H Q21's), and every
answer against the same query over native tables."""
import random

import os

from harness import connect, tmpdir


def reopen(con, path):
    """A new connection to path: its tables are opened afresh (xConnect),
    which is when csq reads their dictionaries for the estimates."""
    con.close()
    return connect(path)


def order(con, q):
    """The tables in the order of the plan's loops."""
    out = []
    for r in con.execute("EXPLAIN QUERY PLAN " + q):
        words = r[3].split()
        if words[0] in ("SCAN", "SEARCH") and r[1] == 0:
            out.append(words[1])
    return out


def load_q21(rnd):
    """nation (25), supplier (400), orders (6000, status F/O/P),
    lineitem (24000): TPC-H's shape, small, in a new database; returns a
    connection opened after the load, as a user's would be."""
    path = os.path.join(tmpdir(), "q21_%d.db" % rnd.randrange(1 << 30))
    con = connect(path)
    specs = {
        "nation": "n_nationkey INTEGER, n_name TEXT",
        "supplier": "s_suppkey INTEGER, s_name TEXT, s_nationkey INTEGER",
        "orders": "o_orderkey INTEGER, o_orderstatus TEXT, o_note TEXT",
        "lineitem": "l_orderkey INTEGER, l_suppkey INTEGER, l_commit TEXT, l_receipt TEXT",
    }
    rows = {
        "nation": [(i, "NATION%02d" % i) for i in range(25)],
        "supplier": [(i, "Supplier#%d" % i, rnd.randrange(25)) for i in range(400)],
        "orders": [(i, rnd.choice("FOP"), None if i % 4 else "n%d" % i) for i in range(6000)],
        "lineitem": [],
    }
    for o in range(6000):
        for _ in range(4):
            c = "1995-%02d-%02d" % (rnd.randrange(1, 13), rnd.randrange(1, 29))
            r = "1995-%02d-%02d" % (rnd.randrange(1, 13), rnd.randrange(1, 29))
            rows["lineitem"].append((o, rnd.randrange(400), c, r))
    con.execute("BEGIN")
    for t, cols in specs.items():
        con.execute("CREATE TABLE n%s(%s)" % (t, cols))
        con.execute("CREATE VIRTUAL TABLE %s USING csq(%s, rowgroup=2048)" % (t, cols))
        marks = ",".join("?" * len(rows[t][0]))
        for name in (t, "n" + t):
            con.executemany("INSERT INTO %s VALUES(%s)" % (name, marks), rows[t])
    con.execute("CREATE INDEX nlineitem_o ON nlineitem(l_orderkey)")  # native answers in time
    con.execute("COMMIT")
    return reopen(con, path)


Q21 = """SELECT s_name, count(*) AS numwait
FROM {s} AS supplier, {l} AS l1, {o} AS orders, {n} AS nation
WHERE s_suppkey = l1.l_suppkey AND o_orderkey = l1.l_orderkey AND o_orderstatus = 'F'
  AND l1.l_receipt > l1.l_commit
  AND EXISTS (SELECT * FROM {l} AS l2 WHERE l2.l_orderkey = l1.l_orderkey AND l2.l_suppkey <> l1.l_suppkey)
  AND NOT EXISTS (SELECT * FROM {l} AS l3 WHERE l3.l_orderkey = l1.l_orderkey
                  AND l3.l_suppkey <> l1.l_suppkey AND l3.l_receipt > l3.l_commit)
  AND s_nationkey = n_nationkey AND n_name = 'NATION07'
GROUP BY s_name ORDER BY numwait DESC, s_name"""


def q21(prefix):
    return Q21.format(s=prefix + "supplier", l=prefix + "lineitem", o=prefix + "orders", n=prefix + "nation")


def test_filtered_dimension_goes_first():
    """Q21: nation is read on the host (25 rows) and filtered by SQLite to
    one row; o_orderstatus = 'F' keeps a third of orders (3 dictionary
    entries), not a guessed 5%: the plan starts from nation and supplier,
    so the correlated subqueries run for one nation's suppliers only."""
    con = load_q21(random.Random(31))
    got = order(con, q21(""))
    assert got[:3] == ["nation", "supplier", "l1"], got
    assert con.execute(q21("")).fetchall() == con.execute(q21("n")).fetchall()


def test_text_equality_and_nulls_estimate():
    """A filter on orders alone decides whether orders or lineitem drives
    a join of the two. "o_orderstatus = 'F'" keeps a third of orders (3
    dictionary entries), "o_note IS NULL" three quarters (the zone maps'
    NULL counts): more than lineitem's filter keeps, so lineitem drives."""
    con = load_q21(random.Random(32))
    for q in [
        "SELECT count(*) FROM {o} AS o, {l} AS l WHERE o.o_orderkey = l.l_orderkey AND o.o_orderstatus = 'F' "
        "AND l.l_suppkey < 10",
        "SELECT count(*) FROM {o} AS o, {l} AS l WHERE o.o_orderkey = l.l_orderkey AND o.o_note IS NULL "
        "AND l.l_suppkey < 40",
    ]:
        got = order(con, q.format(o="orders", l="lineitem"))
        assert got[0] == "l", (q, got)
        assert con.execute(q.format(o="orders", l="lineitem")).fetchall() == \
            con.execute(q.format(o="norders", l="nlineitem")).fetchall()


def test_estimates_follow_writes():
    """The dictionary estimate is taken again when the table is opened
    after it changed: a column that gains many distinct values keeps a
    smaller share per value."""
    path = os.path.join(tmpdir(), "writes.db")
    con = connect(path)
    con.execute("CREATE VIRTUAL TABLE t USING csq(k INTEGER, s TEXT, rowgroup=1024)")
    con.execute("CREATE VIRTUAL TABLE u USING csq(k INTEGER, s TEXT, rowgroup=1024)")
    con.execute("CREATE TABLE nt(k INTEGER, s TEXT)")
    con.execute("CREATE TABLE nu(k INTEGER, s TEXT)")
    rt = [(i, "ab"[i % 2]) for i in range(20000)]
    ru = [(i % 500, "x%d" % (i % 300)) for i in range(20000)]
    con.execute("BEGIN")
    for t, rows in (("t", rt), ("nt", rt), ("u", ru), ("nu", ru)):
        con.executemany("INSERT INTO %s VALUES(?,?)" % t, rows)
    con.execute("COMMIT")
    con = reopen(con, path)
    q = "SELECT count(*) FROM {t} AS t, {u} AS u WHERE t.k = u.k AND t.s = 'a' AND u.s = 'x7'"
    assert order(con, q.format(t="t", u="u"))[0] == "u"
    assert con.execute(q.format(t="t", u="u")).fetchall() == con.execute(q.format(t="nt", u="nu")).fetchall()
    # t.s now has 2000 values, u.s keeps 300: t's filter is the narrower one
    rt = [(i, "a%d" % (i % 2000)) for i in range(20000)]
    con.execute("BEGIN")
    for t in ("t", "nt"):
        con.execute("DELETE FROM %s" % t)
        con.executemany("INSERT INTO %s VALUES(?,?)" % t, rt)
    con.execute("COMMIT")
    con = reopen(con, path)
    q = "SELECT count(*) FROM {t} AS t, {u} AS u WHERE t.k = u.k AND t.s = 'a7' AND u.s = 'x7'"
    assert order(con, q.format(t="t", u="u"))[0] == "t"
    assert con.execute(q.format(t="t", u="u")).fetchall() == con.execute(q.format(t="nt", u="nu")).fetchall()
