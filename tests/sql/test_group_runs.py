"""GROUP BY on a key the table is stored in the order of (TPC-H's lineitem
by l_orderkey): the device makes a row group's groups without hashing
while its INTEGER keys ascend (device/engine/exec_group.c), and the host
merges the partials in runs of ascending keys (device/host/agg.c), both
falling back to hashing at the first key out of order. Every answer is
the one the same query gives over a native table: runs of equal keys that
cross row groups, NULLs, 1 next to 1.0, TEXT keys, keys out of order and
interleaved row groups whose runs must be split, sum() overflow."""
import random

from harness import connect, expect_error, stats

_n = [0]


def view(con, sql):
    """Rows of sql through a fresh pushdown view (the csq planner)."""
    _n[0] += 1
    name = "gr%d" % _n[0]
    con.execute("CREATE VIRTUAL TABLE temp.%s USING csq_query('%s')" % (name, sql.replace("'", "''")))
    try:
        return con.execute("SELECT * FROM %s" % name).fetchall()
    finally:
        con.execute("DROP TABLE temp.%s" % name)


def canon(rows):
    return sorted(repr(tuple("%.9g" % v if isinstance(v, float) else v for v in r)) for r in rows)


QUERIES = [
    "SELECT k, count(*), sum(v), min(v), max(v), avg(v), total(w), sum(w) FROM {T} GROUP BY k",
    "SELECT k FROM {T} GROUP BY k HAVING sum(v) > 20",
    "SELECT k, count(w), min(w), max(w) FROM {T} WHERE v % 3 <> 1 GROUP BY k",
    "SELECT k, typeof(k), count(*) FROM {T} GROUP BY k ORDER BY 3 DESC, 1 LIMIT 7",
]


def load(con, rows, rowgroup=64, ktype="INTEGER"):
    con.execute("DROP TABLE IF EXISTS t")
    con.execute("DROP TABLE IF EXISTS nt")
    con.execute("CREATE TABLE nt(k %s, v INTEGER, w REAL)" % ktype)
    con.execute("CREATE VIRTUAL TABLE t USING csq(k %s, v INTEGER, w REAL, rowgroup=%d, "
                "pushdown='always')" % (ktype, rowgroup))
    con.execute("BEGIN")
    for t in ("nt", "t"):
        con.executemany("INSERT INTO %s VALUES(?,?,?)" % t, rows)
    con.execute("COMMIT")


def check(con, what, dev=True):
    """Every query the same as native; dev: the device ran them (a key
    column with both INTEGER and REAL values is grouped by SQLite)."""
    con.execute("SELECT csq_stats_reset()")
    for q in QUERIES:
        got = view(con, q.format(T="t"))
        want = con.execute(q.format(T="nt")).fetchall()
        assert canon(got) == canon(want), (what, q, canon(got)[:5], canon(want)[:5], len(got), len(want))
    assert stats(con)["programs_executed"] > 0 or not dev, what


def runs(rnd, keys, maxrun=9):
    """Rows whose keys come in the given order, each repeated 1..maxrun times."""
    rows = []
    for k in keys:
        for _ in range(rnd.randint(1, maxrun)):
            rows.append((k, rnd.randrange(-5, 20), rnd.choice([None, rnd.uniform(-3, 3)])))
    return rows


def test_ascending_keys_wide_and_narrow():
    """Wide keys (hashed on the device) and narrow ones (its direct table),
    runs crossing row groups of 64 rows."""
    rnd = random.Random(11)
    con = connect()
    for step in (1000003, 1, 7):
        load(con, runs(rnd, [10**12 + step * i for i in range(900)]))
        check(con, "ascending step %d" % step)


def test_nulls_reals_and_text_among_runs():
    rnd = random.Random(12)
    con = connect()
    keys = [1000003 * i for i in range(600)]
    # NULL runs at the start, in the middle and at the end
    load(con, runs(rnd, [None] + keys[:300] + [None] + keys[300:] + [None]))
    check(con, "NULL keys")
    # 1 and 1.0 are one group: a REAL run next to the INTEGER run of its
    # value, before it, after it, and in a later row group (an untyped key
    # keeps 1.0 a REAL), and a non-integral REAL in an INTEGER column
    rows = runs(rnd, keys)
    rows = rows[:100] + [(float(rows[99][0]), 1, 0.5)] + rows[100:]
    rows = rows[:400] + [(float(rows[10][0]), 2, 1.5), (float(keys[-1]) + 0.5, 3, 2.5)] + rows[400:]
    for ktype in ("", "INTEGER"):
        load(con, rows, ktype=ktype)
        check(con, "1 and 1.0 " + ktype, dev=False)
    # TEXT keys in ascending order, numbers that look like them, and a BLOB
    tk = ["k%06d" % i for i in range(500)]
    load(con, runs(rnd, tk) + runs(rnd, ["7", 7, "k000003", b"k000004"]), ktype="TEXT")
    check(con, "TEXT keys")


def test_keys_out_of_order():
    rnd = random.Random(13)
    con = connect()
    keys = [1000003 * i for i in range(700)]
    # descending, random, and ascending with a key from far back at the end
    for order in (keys[::-1], rnd.sample(keys, len(keys)), keys + [keys[5], keys[650]]):
        load(con, runs(rnd, order))
        check(con, "out of order")
    # row groups that interleave: evens then odds, so that the host's runs
    # are split (64 distinct keys per row group), and many of them, so that
    # it falls back to hashing
    for n in (640, 20000):
        ev = [2 * 1000003 * i for i in range(n)]
        od = [k + 1000003 for k in ev]
        rows = []
        for i in range(0, n, 64):
            rows += [(k, 1, 0.25) for k in ev[i:i + 64]] + [(k, 2, 0.5) for k in od[i:i + 64]]
        load(con, rows)
        check(con, "interleaved %d" % n)


def test_direct_table_kept_across_row_groups():
    """Narrow INTEGER keys in no order: a row group whose key chunks have
    the reference (least value) and width of the row group before keeps
    the device's direct table of groups; one whose least key moved, whose
    keys are wider, or all NULL makes a new one. Two keys too."""
    rnd = random.Random(15)
    con = connect()
    rows = []
    for g in range(60):
        lo = rnd.choice([0, 0, 0, 3, -2, 40])
        width = rnd.choice([15, 15, 31, 200])
        part = [(lo, 1, 0.5)]  # the least key of the row group is lo
        for _ in range(63):
            k = rnd.choice([None, lo + rnd.randrange(width + 1)]) if g % 7 else None
            part.append((k, rnd.randrange(-3, 9), rnd.choice([None, rnd.uniform(-2, 2)])))
        if g % 11 == 5:
            part = [(None, r[1], r[2]) for r in part]
        rnd.shuffle(part)
        rows += part
    load(con, rows)
    check(con, "direct table kept")
    q = "SELECT k, v, count(*), sum(w), max(w) FROM {T} WHERE v > -3 GROUP BY k, v"
    assert canon(view(con, q.format(T="t"))) == canon(con.execute(q.format(T="nt")).fetchall())


def test_large_ascending_table():
    """Several thousand groups per row group, partials merged out of row
    group order by several device slots."""
    rnd = random.Random(14)
    con = connect()
    load(con, runs(rnd, [3 * i + 10**9 for i in range(60000)], maxrun=4), rowgroup=16384)
    check(con, "large")


def test_sum_overflow_in_a_run():
    con = connect()
    big = 2**62
    rows = [(1000003 * i, 1, 0.0) for i in range(300)]
    rows[150:150] = [(1000003 * 149, big, 0.0), (1000003 * 149, big, 0.0)]
    load(con, rows)
    q = "SELECT k, sum(v) FROM {T} GROUP BY k"
    expect_error(lambda: con.execute(q.format(T="nt")).fetchall(), "integer overflow")
    expect_error(lambda: view(con, q.format(T="t")), "integer overflow")
