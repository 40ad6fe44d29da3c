"""tests/sql/test_tcp_range.py - aggregations as one Execute over a range of row
groups (device/format/program.h, RUNNING OVER A RANGE): TPC-H Q6 and a Q1-like
GROUP BY as pushdown views over a csq table across NVMe/TCP (build/csq-target)
and on the in-process device, checked against native SQLite, with the bytes
each way across the socket bounded whatever the number of row groups; with
deletes, inside an open transaction (the per row group path), and with range
Executes turned off (CSQ_EXEC_RANGE=0), which must give the same answers."""
import math
import os
import random

from harness import connect, stats, tmpdir
from test_tcp import Target

Q6 = ("SELECT sum(p * d) AS revenue FROM {t} WHERE s >= 100 AND s < 465 "
      "AND d BETWEEN 0.05 AND 0.07 AND q < 24")
Q1 = ("SELECT f, count(*), sum(q), avg(p), min(d), max(s) FROM {t} WHERE s <= 700 "
      "GROUP BY f ORDER BY f")
WIRE = ("bytes_to_host", "bytes_from_host")


def load(con, name, using, n, seed):
    con.execute("CREATE TABLE IF NOT EXISTS n_%s(s INTEGER, d REAL, q INTEGER, p REAL, f TEXT)"
                % name)
    if using:
        con.execute("CREATE VIRTUAL TABLE %s USING csq(s INTEGER, d REAL, q INTEGER, p REAL, "
                    "f TEXT, %s, rowgroup=1000)" % (name, using))
    r = random.Random(seed)
    rows = [(r.randrange(0, 1000), r.randrange(0, 11) / 100.0, r.randrange(1, 51),
             round(r.uniform(900, 100000), 2), r.choice("AFNR")) for _ in range(n)]
    con.execute("BEGIN")
    con.executemany("INSERT INTO n_%s VALUES (?,?,?,?,?)" % name, rows)
    if using:
        con.executemany("INSERT INTO %s VALUES (?,?,?,?,?)" % name, rows)
    con.execute("COMMIT")


def close(a, b):
    assert len(a) == len(b), (a, b)
    for r1, r2 in zip(a, b):
        for x, y in zip(r1, r2):
            if isinstance(x, float) or isinstance(y, float):
                assert math.isclose(x, y, rel_tol=1e-9), (r1, r2)
            else:
                assert x == y, (r1, r2)


def view(con, sql):
    """Rows of sql as a pushdown view and the bytes each way it moved."""
    con.execute("DROP TABLE IF EXISTS temp.v")
    con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query('%s')" % sql.replace("'", "''"))
    s0 = stats(con)
    rows = con.execute("SELECT * FROM v").fetchall()
    s1 = stats(con)
    return rows, {k: s1[k] - s0[k] for k in WIRE}, s1["programs_executed"] - s0[
        "programs_executed"]


def check(con, name, bound=None):
    """Q6 and Q1 over csq table name equal native; returns Q6's bytes."""
    moved = None
    for q in (Q6, Q1):
        want = con.execute(q.format(t="n_" + name)).fetchall()
        got, m, _ = view(con, q.format(t=name))
        close(got, want)
        if bound is not None:
            assert all(m[k] < bound for k in WIRE), (q, m)
        if q is Q6:
            moved = m
    return moved


def test_q6_view_over_tcp_under_8k_whatever_the_size():
    d = tmpdir()
    tg = Target(d, ["x.csd"])
    try:
        con = connect(os.path.join(d, "t.db"))
        load(con, "small", "device='%s'" % tg.url("x.csd"), 40000, 1)
        load(con, "big", "device='%s'" % tg.url("x.csd"), 240000, 2)
        small = check(con, "small", 8192)
        big = check(con, "big", 8192)
        # six times the row groups, about the same commands and bytes
        assert big["bytes_from_host"] <= small["bytes_from_host"] + 1024, (small, big)
        # row group by row group, the bytes grow with the table: the range
        # is what keeps them down
        os.environ["CSQ_EXEC_RANGE"] = "0"
        try:
            old = check(con, "big")
        finally:
            del os.environ["CSQ_EXEC_RANGE"]
        assert old["bytes_from_host"] > 2 * big["bytes_from_host"], (old, big)
        # deletes: the device reads the delete bitmaps itself
        con.execute("DELETE FROM big WHERE rowid % 5 = 0")
        con.execute("DELETE FROM n_big WHERE rowid % 5 = 0")
        check(con, "big", 8192)
        # an open transaction's rows are not in the catalog: per row group
        con.execute("BEGIN")
        con.execute("INSERT INTO big SELECT * FROM n_small LIMIT 3000")
        con.execute("INSERT INTO n_big SELECT * FROM n_small LIMIT 3000")
        check(con, "big")
        con.execute("COMMIT")
        check(con, "big", 8192)
        con.close()
        # a new connection reads the committed catalog from the media
        con = connect(os.path.join(d, "t.db"))
        check(con, "big", 8192)
        con.close()
    finally:
        tg.kill9()


def test_in_process_device_gives_the_same_answers():
    d = tmpdir()
    con = connect(os.path.join(d, "t.db"))
    load(con, "e", "device='%s'" % os.path.join(d, "e.csd"), 60000, 3)
    check(con, "e")
    _, _, nRange = view(con, Q6.format(t="e"))
    os.environ["CSQ_EXEC_RANGE"] = "0"
    try:
        check(con, "e")
        _, _, nOld = view(con, Q6.format(t="e"))
    finally:
        del os.environ["CSQ_EXEC_RANGE"]
    # one Execute per piece against one per row group (60 of them)
    assert nRange < nOld and nOld >= 50, (nRange, nOld)
    con.close()


def test_many_groups_outgrow_the_range_and_fall_back():
    # 30000 distinct keys over a span too wide to size the output area for:
    # the merged groups outgrow a slot's output area, the device faults the
    # range and the scan starts over per row group
    d = tmpdir()
    con = connect(os.path.join(d, "t.db"))
    con.execute("CREATE VIRTUAL TABLE t USING csq(k INTEGER, v INTEGER, device='%s', "
                "rowgroup=1000)" % os.path.join(d, "e.csd"))
    con.execute("CREATE TABLE n(k INTEGER, v INTEGER)")
    rows = [(i * 7919 % 30011 * 1000, i % 13) for i in range(30000)]
    con.executemany("INSERT INTO t VALUES (?,?)", rows)
    con.executemany("INSERT INTO n VALUES (?,?)", rows)
    got, _, _ = view(con, "SELECT k, count(*), sum(v) FROM t GROUP BY k")
    want = con.execute("SELECT k, count(*), sum(v) FROM n GROUP BY k").fetchall()
    assert len(want) == 30000
    assert sorted(got) == sorted(want)
    con.close()


def carry_table(con, d, n, seed):
    """csq table t and native n over the same rows: integer keys with NULLs
    whose span differs per row group, text keys mixed with numbers, text
    for MIN/MAX, and o, the row's position, for filters the zone maps cut."""
    con.execute("CREATE VIRTUAL TABLE t USING csq(o INTEGER, k INTEGER, s TEXT, z TEXT, v REAL, "
                "x INTEGER, device='%s', rowgroup=1000)" % os.path.join(d, "e.csd"))
    con.execute("CREATE TABLE n(o INTEGER, k INTEGER, s TEXT, z TEXT, v REAL, x INTEGER)")
    r = random.Random(seed)
    rows = []
    for i in range(n):
        k = None if r.random() < 0.02 else (r.randrange(0, 20000) if i % 3000 < 2000
                                            else r.randrange(0, 300))
        s = r.choice(["alpha", "beta", "", "Gamma", 7, 7.5, 12, "12", None,
                      "zz%d" % (i // 1000 * 7 % 60)])
        if isinstance(s, str) and r.random() < 0.3:
            s += "x" * r.randrange(1, 40)
        z = None if r.random() < 0.05 else "".join(
            r.choice("abcXYZ ") for _ in range(r.randrange(0, 9)))
        rows.append((i, k, s, z, r.randrange(-10**6, 10**6) / 100.0, r.randrange(-50, 50)))
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES (?,?,?,?,?,?)", rows)
    con.executemany("INSERT INTO n VALUES (?,?,?,?,?,?)", rows)
    con.execute("COMMIT")


def test_groups_carried_through_a_range_equal_native():
    # each row group aggregates into the groups of the ones before it on
    # the device; keys and text MIN/MAX states must outlive the row group
    # whose chunks they came from. Queries marked 1 keep their groups in
    # one range result: a few Executes, not one per row group (40); the
    # others outgrow it and start over per row group.
    d = tmpdir()
    con = connect(os.path.join(d, "t.db"))
    carry_table(con, d, 40000, 7)
    queries = [
        ("SELECT k, count(*), sum(v), avg(x), min(z), max(z), total(x) FROM {t} GROUP BY k", 1),
        ("SELECT k, s, sum(x), min(z) FROM {t} WHERE k < 40 GROUP BY k, s", 1),
        ("SELECT s, count(*), max(z) FROM {t} WHERE k < 40 AND s >= 'zz' GROUP BY s", 1),
        ("SELECT count(*), min(z), max(s), sum(v) FROM {t} WHERE k < 100", 1),
        ("SELECT s, count(*), min(z), max(z), sum(x), max(k) FROM {t} GROUP BY s", 0),
        ("SELECT z, count(*), sum(v), min(s) FROM {t} GROUP BY z", 0),
    ]
    for q, bRange in queries:
        want = sorted(con.execute(q.format(t="n")).fetchall(), key=repr)
        s0 = stats(con)
        got, _, nExec = view(con, q.format(t="t"))
        nBack = stats(con)["rows_returned"] - s0["rows_returned"]
        close(sorted(got, key=repr), want)
        if bRange:
            assert nExec < 20, (q, nExec)
        if q == queries[0][0]:
            # four slots take ten row groups each, and each slot's result
            # holds each of its groups once, found again by value in the
            # row groups after the one that made it
            once = con.execute("SELECT count(*) FROM (SELECT DISTINCT o / 10000, k FROM n)")
            assert nBack == once.fetchone()[0], (nBack, len(want))
    os.environ["CSQ_EXEC_RANGE"] = "0"
    try:
        for q, _ in queries:
            want = sorted(con.execute(q.format(t="n")).fetchall(), key=repr)
            close(sorted(view(con, q.format(t="t"))[0], key=repr), want)
    finally:
        del os.environ["CSQ_EXEC_RANGE"]
    con.close()
