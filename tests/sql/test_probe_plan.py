"""Join orders around probes that cannot keep their columns (vtab/plan.c,
probe_reread_cost): when the columns a probe of a large table reads fit
neither the copy budget nor the chunk budget (csq_probe_memory), probing it
once per outer row would decode its row groups' chunks again on every
lookup of a scattered key; SQLite must rather scan it once as the outer
table. Checked by EXPLAIN QUERY PLAN (the counters cannot tell at a test's
scale: the host keeps a small table's chunks), and every answer against
native tables."""
import random

from harness import connect


def load(con, rnd, n_fact, n_key):
    con.execute("CREATE TABLE nf(k INTEGER, a INTEGER, b INTEGER, v INTEGER)")
    con.execute("CREATE TABLE nd(k INTEGER, name TEXT)")
    con.execute("CREATE VIRTUAL TABLE f USING csq(k INTEGER, a INTEGER, b INTEGER, v INTEGER, rowgroup=1000)")
    con.execute("CREATE VIRTUAL TABLE d USING csq(k INTEGER, name TEXT)")
    facts = [(rnd.randrange(n_key), rnd.randrange(10**6), rnd.randrange(10**6), rnd.randrange(100))
             for _ in range(n_fact)]
    dims = [(k, "n%d" % (k % 7)) for k in range(n_key)]
    con.execute("BEGIN")
    for t, rows in (("nf", facts), ("f", facts)):
        con.executemany("INSERT INTO %s VALUES(?,?,?,?)" % t, rows)
    for t, rows in (("nd", dims), ("d", dims)):
        con.executemany("INSERT INTO %s VALUES(?,?)" % t, rows)
    con.execute("COMMIT")


QUERY = ("SELECT {D}.name, count(*), sum({F}.v), sum({F}.a - {F}.b) FROM {D}, {F} "
         "WHERE {F}.k = {D}.k GROUP BY {D}.name ORDER BY {D}.name")


def plan_of(con, q, table):
    rows = [r[3] for r in con.execute("EXPLAIN QUERY PLAN " + q).fetchall()]
    mine = [r for r in rows if r.startswith("SCAN %s " % table) or r.startswith("SEARCH %s " % table)]
    assert len(mine) == 1, rows
    return mine[0]


def test_large_table_whose_probe_cannot_keep_columns_is_not_probed():
    rnd = random.Random(17)
    con = connect()
    load(con, rnd, 20000, 300)
    want = con.execute(QUERY.format(F="nf", D="nd")).fetchall()
    q = QUERY.format(F="f", D="d")
    # the default budgets hold every column: probing f is cheap, either order answers
    assert con.execute(q).fetchall() == want
    # keys only, and room for a few chunks or none: every lookup of a key
    # scattered over f's 20 row groups would decode their chunks again
    for budgets in ((0, 16384), (0, 0), (1024, 65536)):
        con.execute("SELECT csq_probe_memory(?, ?)", budgets)
        plan = plan_of(con, q, "f")
        assert "probe" not in plan, (budgets, plan)
        assert "probe" in plan_of(con, q, "d"), budgets
        got = con.execute(q).fetchall()
        assert got == want, (budgets, got[:3], want[:3])
