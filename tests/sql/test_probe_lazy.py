"""Join probes that copy only their keys (vtab/probe.c): the other columns
are read from their row groups' chunks when SQLite asks, within the
connection's budgets (csq_probe_memory). Every answer is compared with the
same query over native tables: copy budget 0 (keys only), a tiny chunk
cache (a chunk read for nearly every value), a budget crossed in the
middle of a build, NULLs and mixed storage classes in keys and columns,
unwritten rows of a transaction, correlated subqueries that SELECT *."""
import random

from harness import connect, expect_error


def canon(row):
    return repr(tuple("%.10g" % v if isinstance(v, float) else v for v in row))


def same(con, q):
    got = sorted(map(canon, con.execute(q.format(F="f", D="d")).fetchall()))
    want = sorted(map(canon, con.execute(q.format(F="nf", D="nd")).fetchall()))
    assert got == want, (q, got[:5], want[:5], len(got), len(want))
    return len(got)


def load(con, rnd, n_fact, n_dim, opts=""):
    con.execute("CREATE TABLE nf(k INTEGER, v REAL, t TEXT, x, d INTEGER)")
    con.execute("CREATE TABLE nd(id INTEGER PRIMARY KEY, k INTEGER, name TEXT, grp INTEGER, m)")
    con.execute("CREATE VIRTUAL TABLE f USING csq(k INTEGER, v REAL, t TEXT, x, d INTEGER%s)" % opts)
    con.execute("CREATE VIRTUAL TABLE d USING csq(id INTEGER PRIMARY KEY, k INTEGER, name TEXT, grp INTEGER, "
                "m%s)" % opts)
    dims = []
    for i in range(n_dim):
        k = rnd.choice([i, float(i), str(i), None]) if i % 9 == 0 else i
        m = rnd.choice([i, i * 0.5, "t%d" % i, b"\x00\x01", None])
        dims.append((i + 1, k, "n%d" % (i % 13), i % 5, m))
    facts = []
    for i in range(n_fact):
        k = rnd.choice([rnd.randrange(-3, n_dim + 3), rnd.randrange(n_dim) + 0.0, str(rnd.randrange(n_dim)),
                        None, "zz"])
        facts.append((k, rnd.uniform(0, 100), rnd.choice(["a", "bb", None, "c" * 40]),
                      rnd.choice([1, "1", 1.5, None, b"\x02"]), rnd.randrange(10)))
    con.execute("BEGIN")
    for t, rows in (("nf", facts), ("f", facts)):
        con.executemany("INSERT INTO %s VALUES(?,?,?,?,?)" % t, rows)
    for t, rows in (("nd", dims), ("d", dims)):
        con.executemany("INSERT INTO %s VALUES(?,?,?,?,?)" % t, rows)
    con.execute("COMMIT")


QUERIES = [
    # the probe is d: its columns read for each hit
    "SELECT {F}.v, {D}.name, {D}.m, {D}.id, {D}.rowid FROM {F} CROSS JOIN {D} ON {D}.k = {F}.k",
    "SELECT {D}.name, count(*), sum({F}.v), group_concat({D}.m) FROM {F} CROSS JOIN {D} ON {D}.k = {F}.k "
    "GROUP BY {D}.name",
    # constant terms: the probe is built by a device program
    "SELECT {F}.t, {D}.grp, {D}.m FROM {F} CROSS JOIN {D} ON {D}.k = {F}.k WHERE {D}.grp = 2",
    "SELECT {F}.x, {D}.name FROM {F} CROSS JOIN {D} ON {D}.k = {F}.k WHERE {D}.grp >= 1 AND {D}.name LIKE 'n1%'",
    # the probe is f, many rows per key, scattered: reordered rows
    "SELECT {D}.id, {F}.t, {F}.x, {F}.d FROM {D} CROSS JOIN {F} ON {F}.k = {D}.k",
    "SELECT {D}.grp, sum({F}.v), count({F}.x) FROM {D} CROSS JOIN {F} ON {F}.k = {D}.k WHERE {F}.d < 5 "
    "GROUP BY {D}.grp",
    # two keys
    "SELECT {F}.v, {D}.m FROM {F} CROSS JOIN {D} ON {D}.k = {F}.k AND {D}.grp = {F}.d",
]

SUBQUERIES = [
    # TPC-H Q4's shape: SELECT * and a column-versus-column term SQLite checks
    "SELECT {D}.grp, count(*) FROM {D} WHERE EXISTS (SELECT * FROM {F} WHERE {F}.k = {D}.k AND {F}.d < {D}.grp) "
    "GROUP BY {D}.grp",
    # TPC-H Q21's: EXISTS and NOT EXISTS on the same table, <> the outer row
    "SELECT {F}.d, count(*) FROM {F} WHERE {F}.v > 30 "
    "AND EXISTS (SELECT * FROM {F} AS f2 WHERE f2.k = {F}.k AND f2.d <> {F}.d) "
    "AND NOT EXISTS (SELECT * FROM {F} AS f3 WHERE f3.k = {F}.k AND f3.d <> {F}.d AND f3.v > f3.d * 10) "
    "GROUP BY {F}.d",
    "SELECT {D}.k, (SELECT max({F}.t) FROM {F} WHERE {F}.k = {D}.k), "
    "(SELECT count({F}.x) FROM {F} WHERE {F}.k = {D}.k AND {F}.d = 3) FROM {D}",
]

BUDGETS = [(0, 0), (0, 1 << 30), (3000, 0), (1 << 30, 1 << 30)]


def test_keys_only_probes_answer_as_native():
    rnd = random.Random(21)
    con = connect()
    load(con, rnd, 4000, 500, ", rowgroup=256")
    probes = 0
    for copy, chunks in BUDGETS:
        con.execute("SELECT csq_probe_memory(?, ?)", (copy, chunks))
        for q in QUERIES + SUBQUERIES:
            plan = " ".join(r[3] for r in con.execute("EXPLAIN QUERY PLAN " + q.format(F="f", D="d")))
            probes += "probe;" in plan
            same(con, q)
    assert probes >= 3 * len(BUDGETS), probes


def test_device_built_probe_crosses_the_budget_midway():
    """pushdown='always': the probe is built by a device program; the copy
    budget is crossed after some batches, the columns still to come are
    left out of the device's batches and read from chunks."""
    rnd = random.Random(22)
    con = connect()
    load(con, rnd, 6000, 3000, ", rowgroup=512, pushdown='always'")
    for copy in (0, 20000, 60000, 1 << 30):
        con.execute("SELECT csq_probe_memory(?, 4096)", (copy,))
        q = "SELECT {F}.v, {D}.name, {D}.m, {D}.id FROM {F} CROSS JOIN {D} ON {D}.k = {F}.k WHERE {D}.grp <> 3"
        plan = " ".join(r[3] for r in con.execute("EXPLAIN QUERY PLAN " + q.format(F="f", D="d")))
        assert "probe;" in plan and ":ne:" in plan, plan
        assert same(con, q) > 0


def test_probe_reads_a_transactions_unwritten_rows():
    rnd = random.Random(23)
    con = connect()
    load(con, rnd, 2000, 300, ", rowgroup=128")
    con.execute("SELECT csq_probe_memory(0, 0)")
    con.execute("BEGIN")
    new = [(i % 40, "new%d" % i, i % 3, rnd.choice([None, 1, "x", 2.5])) for i in range(90)]
    for t in ("d", "nd"):
        con.executemany("INSERT INTO %s(k, name, grp, m) VALUES(?,?,?,?)" % t, new)
        con.execute("DELETE FROM %s WHERE id %% 7 = 0" % t)
        con.execute("UPDATE %s SET m = 'upd' WHERE id %% 11 = 0" % t)
    for q in QUERIES[:3] + SUBQUERIES[:1]:
        same(con, q)
    con.execute("ROLLBACK")
    for q in QUERIES[:2]:
        same(con, q)


def test_large_probe_of_select_star_is_a_probe():
    """EXISTS (SELECT * ...) names every column: the probe holds only its
    keys and locations, so a table too large to copy whole is still probed
    from a hash rather than scanned once per outer row."""
    con = connect()
    cols = ", ".join("c%d TEXT" % i for i in range(30))
    for t, kind in (("nbig", "TABLE nbig"), ("big", "VIRTUAL TABLE big USING csq")):
        con.execute("CREATE %s(k INTEGER, %s%s)" % (kind, cols, ", rowgroup=1024" if t == "big" else ""))
    rows = [(i // 3,) + tuple("v%d_%d" % (i, j) if (i + j) % 5 else None for j in range(30)) for i in range(6000)]
    marks = ",".join("?" * 31)
    con.execute("BEGIN")
    for t in ("nbig", "big"):
        con.executemany("INSERT INTO %s VALUES(%s)" % (t, marks), rows)
    con.execute("COMMIT")
    con.execute("CREATE TABLE nsmall(k INTEGER)")
    con.executemany("INSERT INTO nsmall VALUES(?)", [(i,) for i in range(0, 2500, 7)])
    q = ("SELECT count(*), sum(k) FROM nsmall WHERE EXISTS (SELECT * FROM {B} WHERE {B}.k = nsmall.k "
         "AND {B}.c3 IS NOT NULL AND {B}.c4 < {B}.c7)")
    con.execute("SELECT csq_probe_memory(0, 200000)")
    plan = " ".join(r[3] for r in con.execute("EXPLAIN QUERY PLAN " + q.format(B="big")))
    assert "probe;" in plan, plan
    assert con.execute(q.format(B="big")).fetchall() == con.execute(q.format(B="nbig")).fetchall()


def test_probe_memory_takes_byte_counts():
    con = connect()
    old = con.execute("SELECT csq_probe_memory(1000)").fetchone()[0]
    assert old > 1000
    assert con.execute("SELECT csq_probe_memory(?, 5)", (old,)).fetchone()[0] == 1000
    expect_error(lambda: con.execute("SELECT csq_probe_memory(-1)").fetchall(), "csq_probe_memory")
    expect_error(lambda: con.execute("SELECT csq_probe_memory('x')").fetchall(), "csq_probe_memory")


def test_cursors_of_one_statement_share_a_probe():
    """TPC-H Q21's shape: the outer scan of f and two subqueries over f
    keyed the same way, open at once. The second subquery's cursor takes
    the probe the first built: f is read twice (the scan and one build),
    not three times. The same in a self-join probed twice, and answers as
    native after the table is written between statements."""
    rnd = random.Random(24)
    con = connect()
    load(con, rnd, 4000, 500)
    q = SUBQUERIES[1]
    for rep in range(2):
        con.execute("SELECT csq_stats_reset()")
        same(con, q)
        scanned = con.execute("SELECT value FROM csq_stats WHERE name = 'rows_scanned'").fetchone()[0]
        assert scanned < 3 * 4000, scanned
        for t in ("f", "nf"):
            con.execute("UPDATE %s SET d = d + 1 WHERE rowid %% 5 = 0" % t)
    q = ("SELECT count(*), sum(a.v) FROM {D} CROSS JOIN {F} AS a ON a.k = {D}.k CROSS JOIN {F} AS b "
         "ON b.k = {D}.k AND b.d <> a.d")
    con.execute("SELECT csq_stats_reset()")
    same(con, q)
    scanned = con.execute("SELECT value FROM csq_stats WHERE name = 'rows_scanned'").fetchone()[0]
    assert scanned < 500 + 2 * 4000, scanned
