"""A csq table's scan that hands SQLite its rows grouped and sorted on the
GROUP BY keys (";group=" plans, vtab/group.c), and join probes keyed on
several columns and filtered by the constant terms beside them
(vtab/probe.c): every answer is the one the same query gives over a native
table, with NULLs and every storage class in the keys."""
import random

from harness import connect


def fill(con, rnd, n):
    con.execute("CREATE TABLE nt(a, b INTEGER, c TEXT, d REAL)")
    con.execute("CREATE VIRTUAL TABLE t USING csq(a, b INTEGER, c TEXT, d REAL)")
    con.execute("CREATE TABLE nu(k INTEGER, j INTEGER, s TEXT, w REAL)")
    con.execute("CREATE VIRTUAL TABLE u USING csq(k INTEGER, j INTEGER, s TEXT, w REAL)")
    rows = []
    for i in range(n):
        a = rnd.choice([None, 1, 1.0, 2, 2.5, "1", "x", "X", b"\x01", -3, 10**15])
        b = rnd.choice([None, rnd.randrange(5), rnd.randrange(5) + 0.0, str(rnd.randrange(5)), "b"])
        c = rnd.choice([None, "p", "q", "P", "", "q "])
        rows.append((a, b, c, rnd.choice([None, rnd.uniform(-5, 5)])))
    probes = []
    for i in range(n // 3):
        probes.append((rnd.choice([None, rnd.randrange(6), float(rnd.randrange(6)), str(rnd.randrange(6))]),
                       rnd.choice([None, rnd.randrange(5), "2", 3.0]), rnd.choice(["p", "q", None]),
                       rnd.uniform(0, 10)))
    con.execute("BEGIN")
    for t in ("nt", "t"):
        con.executemany("INSERT INTO %s VALUES(?,?,?,?)" % t, rows)
    for t in ("nu", "u"):
        con.executemany("INSERT INTO %s VALUES(?,?,?,?)" % t, probes)
    con.execute("COMMIT")


def canon(row):
    return repr(tuple("%.9g" % v if isinstance(v, float) else v for v in row))


def same(con, q, ordered):
    got = [canon(r) for r in con.execute(q.format(T="t", U="u")).fetchall()]
    want = [canon(r) for r in con.execute(q.format(T="nt", U="nu")).fetchall()]
    if not ordered:
        got.sort()
        want.sort()
    assert got == want, (q, got[:6], want[:6], len(got), len(want))
    return len(got)


GROUPED = [
    ("SELECT a, count(*), sum(d) FROM {T} GROUP BY a", False),
    ("SELECT a, count(*) FROM {T} GROUP BY a ORDER BY a", True),
    ("SELECT a, count(*) FROM {T} GROUP BY a ORDER BY a DESC", True),
    ("SELECT b, c, count(*), min(d), max(a) FROM {T} GROUP BY b, c ORDER BY b, c", True),
    ("SELECT b, c, count(*) FROM {T} GROUP BY b, c ORDER BY c DESC, b", True),
    ("SELECT c, total(d) FROM {T} WHERE b IS NOT NULL GROUP BY c HAVING count(*) > 3 ORDER BY c", True),
    ("SELECT c, count(*) FROM {T} WHERE d > 0 GROUP BY c ORDER BY 2 DESC, 1", True),
    ("SELECT rowid % 7, count(*) FROM {T} GROUP BY rowid % 7 ORDER BY 1", True),
    ("SELECT a, b, count(*) FROM {T} GROUP BY a, b ORDER BY a, b", True),
    ("SELECT count(*), c FROM {T} GROUP BY c", False),
    ("SELECT DISTINCT c FROM {T} ORDER BY c", True),
]


def test_group_by_comes_grouped_and_sorted():
    con = connect()
    fill(con, random.Random(11), 3000)
    plan = " ".join(r[3] for r in con.execute("EXPLAIN QUERY PLAN SELECT b, count(*) FROM t GROUP BY b"))
    assert ";group=c2:asc" in plan, plan
    for q, ordered in GROUPED:
        same(con, q, ordered)
    # with rows still in the transaction's write buffer, some deleted (no
    # UPDATE: it moves a row to the end of csq's storage order, and a group
    # of 1 and 1.0 shows the value of its first row: README "Semantics")
    con.execute("BEGIN")
    for t in ("t", "nt"):
        con.execute("INSERT INTO %s VALUES(2, 1, 'q', 1.5), (NULL, NULL, NULL, NULL), ('x', 9, 'z', 0)" % t)
        con.execute("DELETE FROM %s WHERE rowid %% 5 = 0" % t)
    for q, ordered in GROUPED:
        same(con, q, ordered)
    con.execute("ROLLBACK")


def test_group_by_through_a_device_program():
    con = connect()
    fill(con, random.Random(12), 2000)
    con.execute("DROP TABLE t")
    con.execute("CREATE VIRTUAL TABLE t USING csq(a, b INTEGER, c TEXT, d REAL, pushdown=always)")
    con.execute("INSERT INTO t SELECT * FROM nt")
    q = "SELECT c, count(*), sum(d) FROM {T} WHERE b >= 2 GROUP BY c ORDER BY c"
    plan = " ".join(r[3] for r in con.execute("EXPLAIN QUERY PLAN " + q.format(T="t")))
    assert "device;" in plan and ";group=" in plan, plan
    assert same(con, q, True) > 0
    same(con, "SELECT b, count(*) FROM {T} WHERE b = NULL GROUP BY b", True)


PROBES = [
    # two keys hashed together
    "SELECT {T}.rowid, {U}.rowid FROM {U} JOIN {T} ON {T}.b = {U}.k AND {T}.b = {U}.j",
    "SELECT count(*), sum({U}.w) FROM {T}, {U} WHERE {U}.k = {T}.b AND {U}.j = {T}.a",
    # constant terms filter the probe's rows on the device
    "SELECT {T}.c, {U}.s FROM {T} JOIN {U} ON {U}.k = {T}.b AND {U}.s = 'p' AND {U}.w > 2.5",
    "SELECT count(*) FROM {T} JOIN {U} ON {U}.k = {T}.b AND {U}.s IS NULL",
    "SELECT count(*) FROM {T} JOIN {U} ON {U}.k = {T}.b AND {U}.s LIKE 'P%'",
    # the same table probed twice in one statement with different constants
    "SELECT count(*) FROM {T} WHERE EXISTS (SELECT 1 FROM {U} WHERE {U}.k = {T}.b AND {U}.w > 5)"
    " AND NOT EXISTS (SELECT 1 FROM {U} WHERE {U}.k = {T}.b AND {U}.w > 9)",
    "SELECT (SELECT count(*) FROM {U} WHERE {U}.k = {T}.b AND {U}.s = 'q'),"
    " (SELECT count(*) FROM {U} WHERE {U}.k = {T}.b AND {U}.s = 'p') FROM {T}",
]


def test_probes_with_several_keys_and_constant_terms():
    con = connect()
    fill(con, random.Random(13), 1500)
    plan = " ".join(r[3] for r in con.execute(
        "EXPLAIN QUERY PLAN SELECT count(*) FROM nt, u WHERE u.k = nt.b AND u.j = nt.a AND u.s = 'p'"))
    assert "probe;" in plan and "key=c1,c2" in plan and ":eq:" in plan, plan
    for q in PROBES:
        same(con, q, False)
    # the probe sees the statement's own transaction, and a changed table
    con.execute("BEGIN")
    for t in ("u", "nu"):
        con.execute("INSERT INTO %s VALUES(2, 2, 'p', 7.0), ('3', 3, 'q', 9.5)" % t)
        con.execute("DELETE FROM %s WHERE rowid %% 4 = 1" % t)
    for q in PROBES:
        same(con, q, False)
    con.execute("COMMIT")
