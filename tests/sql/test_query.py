"""Whole-query pushdown views (csq_query): the device filters, groups and
aggregates, the host merges and SQLite finishes. Every answer is compared
with the same SQL on a native table holding the same rows."""
import math
import os
import random
import sqlite3
import subprocess

from harness import connect, stats, expect_error, EXT

BUILD = os.environ.get("CSQ_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))

_n = [0]


def view(con, sql):
    """Run sql through a fresh pushdown view; returns its rows."""
    _n[0] += 1
    name = "v%d" % _n[0]
    con.execute("CREATE VIRTUAL TABLE temp.%s USING csq_query('%s')" % (name, sql.replace("'", "''")))
    try:
        return con.execute("SELECT * FROM %s" % name).fetchall()
    finally:
        con.execute("DROP TABLE temp.%s" % name)


def close(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if len(x) != len(y):
            return False
        for u, v in zip(x, y):
            if isinstance(u, float) and isinstance(v, float):
                if not (u == v or abs(u - v) <= 1e-9 * max(abs(u), abs(v))):
                    return False
            elif type(u) != type(v) or u != v:
                return False
    return True


def check(con, sql_t, native):
    a = view(con, sql_t)
    b = con.execute(native).fetchall()
    assert close(a, b), "%s\n csq:    %r\n native: %r" % (sql_t, a[:5], b[:5])
    return a


def tpch(con):
    gen = os.path.join(BUILD, "bench", "gen")
    csv = subprocess.run([gen, "tpch", "0.02", "-", "--format", "csv", "--tables", "lineitem"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    import csv as csvmod
    rows = list(csvmod.reader(csv))
    cols = ("l_orderkey INTEGER, l_partkey INTEGER, l_suppkey INTEGER, l_linenumber INTEGER, "
            "l_quantity INTEGER, l_extendedprice REAL, l_discount REAL, l_tax REAL, "
            "l_returnflag TEXT, l_linestatus TEXT, l_shipdate TEXT, l_commitdate TEXT, "
            "l_receiptdate TEXT, l_shipinstruct TEXT, l_shipmode TEXT, l_comment TEXT")
    con.execute("CREATE TABLE n_lineitem(%s)" % cols)
    con.execute("CREATE VIRTUAL TABLE lineitem USING csq(%s, rowgroup=8192)" % cols)
    ph = ",".join("?" * 16)
    con.execute("BEGIN")
    con.executemany("INSERT INTO n_lineitem VALUES(%s)" % ph, rows)
    con.executemany("INSERT INTO lineitem VALUES(%s)" % ph, rows)
    con.execute("COMMIT")
    return len(rows)


Q1 = """SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty,
  sum(l_extendedprice) AS sum_base_price, sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
  sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, avg(l_quantity) AS avg_qty,
  avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc, count(*) AS count_order
FROM TBL WHERE l_shipdate <= date('1998-12-01', '-90 days')
GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus"""

Q6 = """SELECT sum(l_extendedprice * l_discount) AS revenue FROM TBL
WHERE l_shipdate >= '1994-01-01' AND l_shipdate < date('1994-01-01', '+1 year')
  AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01 AND l_quantity < 24"""


def test_tpch_q1_q6_equal_native_and_run_on_device():
    con = connect()
    n = tpch(con)
    assert n > 100000
    for q in (Q1, Q6):
        con.execute("SELECT csq_stats_reset()")
        rows = check(con, q.replace("TBL", "lineitem"), q.replace("TBL", "n_lineitem"))
        assert rows
        st = stats(con)
        assert st["programs_executed"] >= 1, st
        # only partial aggregates come back, never the rows; each device
        # slot merges its row groups' partials, so the host reads one small
        # result per slot, not one per row group
        assert st["bytes_to_host"] < (1024 if q is Q6 else 16 * 1024), st


def test_parameters_are_hidden_columns():
    con = connect()
    tpch(con)
    con.execute("CREATE VIRTUAL TABLE temp.q6 USING csq_query('SELECT sum(l_extendedprice * l_discount) "
                "FROM lineitem WHERE l_shipdate >= ?1 AND l_shipdate < ?2 AND l_quantity < ?3')")
    a = con.execute("SELECT * FROM q6('1994-01-01', '1995-01-01', 24)").fetchall()
    b = con.execute("SELECT sum(l_extendedprice * l_discount) FROM n_lineitem WHERE l_shipdate >= "
                    "'1994-01-01' AND l_shipdate < '1995-01-01' AND l_quantity < 24").fetchall()
    assert close(a, b), (a, b)


def value(rnd):
    k = rnd.randrange(9)
    if k == 0:
        return None
    if k <= 3:
        return rnd.randrange(-50, 50)
    if k <= 5:
        return rnd.choice([0.5, -2.25, 3.0, 1e10, -0.0, 7.75])
    if k == 6:
        return rnd.choice(["a", "b", "", "B"])
    if k == 7:
        return rnd.randrange(-2**40, 2**40)
    return rnd.choice(["x", "y"])


def test_random_aggregates_match_native():
    rnd = random.Random(11)
    con = connect()
    cols = "g TEXT, h INTEGER, i INTEGER, r REAL, n NUMERIC, x"
    con.execute("CREATE TABLE n(%s)" % cols)
    con.execute("CREATE VIRTUAL TABLE t USING csq(%s, rowgroup=300, pushdown='always')" % cols)
    rows = []
    for _ in range(5000):
        rows.append((rnd.choice(["a", "b", "c", None, "B"]), rnd.choice([1, 2, 3, None, 2.0]),
                     rnd.choice([None, rnd.randrange(-1000, 1000)]),
                     rnd.choice([None, rnd.uniform(-100, 100)]),
                     rnd.choice([None, rnd.randrange(-10, 10), rnd.uniform(-1, 1)]), value(rnd)))
    con.execute("BEGIN")
    con.executemany("INSERT INTO n VALUES(?,?,?,?,?,?)", rows)
    con.executemany("INSERT INTO t VALUES(?,?,?,?,?,?)", rows)
    con.execute("COMMIT")
    aggs = ["count(*)", "count(i)", "sum(i)", "total(r)", "avg(n)", "min(x)", "max(x)", "min(g)",
            "max(r)", "sum(i * 2 + h)", "sum(r - i)", "avg(i / 3)", "count(x)", "sum(n)", "max(i % 1)"]
    wheres = ["", "WHERE i > 0", "WHERE r < 10 AND h = 2", "WHERE g IN ('a', 'b')", "WHERE n IS NULL",
              "WHERE i BETWEEN -100 AND 100", "WHERE x = 5", "WHERE g LIKE 'a%'", "WHERE h != 1",
              "WHERE i > '10'", "WHERE r >= -5.5 AND i < 500 AND g IS NOT NULL"]
    keys = [[], ["g"], ["h"], ["g", "h"], ["i / 100"], ["x"]]
    pushed = 0
    for q in range(1500):
        k = rnd.choice(keys)
        sel = list(k) + rnd.sample(aggs, rnd.randrange(1, 4))
        sql = "SELECT %s FROM TBL %s" % (", ".join(sel), rnd.choice(wheres))
        if k:
            sql += " GROUP BY %s" % ", ".join(k)
            if rnd.random() < 0.3:
                sql += " HAVING count(*) > %d" % rnd.randrange(0, 50)
        sql += " ORDER BY %s" % ", ".join(str(j + 1) for j in range(len(sel)))
        if rnd.random() < 0.2:
            sql += " LIMIT %d" % rnd.randrange(1, 5)
        con.execute("SELECT csq_stats_reset()")
        try:
            check(con, sql.replace("TBL", "t"), sql.replace("TBL", "n"))
        except sqlite3.Error as e:
            # both must fail the same way (integer overflow)
            try:
                con.execute(sql.replace("TBL", "n")).fetchall()
                raise AssertionError("csq failed, native did not: %s: %s" % (sql, e))
            except sqlite3.Error as e2:
                assert str(e) == str(e2), (sql, str(e), str(e2))
        pushed += stats(con)["programs_executed"] > 0
    assert pushed > 600, "only %d of 1500 queries ran on the device" % pushed


def test_accumulating_on_the_device_keeps_row_order_answers():
    """Slots merge partials on the device only where the order of rows cannot
    show; a MIN met as 1.0 in one row group and 1 in a later one, or a MIN
    under NOCASE, keeps SQLite's first-in-row-order answer."""
    con = connect()
    cols = "k, t TEXT, v INTEGER, r REAL, u TEXT COLLATE NOCASE"
    con.execute("CREATE TABLE n(%s)" % cols)
    con.execute("CREATE VIRTUAL TABLE t USING csq(%s, rowgroup=64, pushdown='always')" % cols)
    rows = []
    for i in range(64 * 40):
        rg = i // 64
        k = (1.0 if rg == 0 else 1) if i % 3 == 0 else ("a" if rg < 20 else "a")
        t = ("X" if rg == 1 else "x") if i % 5 == 0 else "y%d" % (i % 7)
        rows.append((k, t, i % 11 - 5, (i % 13) * 0.5, t))
    con.execute("BEGIN")
    con.executemany("INSERT INTO n VALUES(?,?,?,?,?)", rows)
    con.executemany("INSERT INTO t VALUES(?,?,?,?,?)", rows)
    con.execute("COMMIT")
    for sql, dev in [("SELECT min(k), max(k), count(*), sum(v) FROM TBL WHERE k < 'a'", 1),
                     # a column declared NOCASE groups and orders its way: host
                     ("SELECT min(u), max(u), count(*) FROM TBL", 0),
                     ("SELECT u, count(*) FROM TBL GROUP BY u ORDER BY 2", 0),
                     ("SELECT count(*) FROM TBL WHERE u = 'X'", 0),
                     ("SELECT t, sum(v), total(r), min(v), max(r), count(*) FROM TBL GROUP BY t "
                      "ORDER BY 1", 1),
                     ("SELECT sum(v), avg(r), min(t), max(t) FROM TBL WHERE v > 0", 1)]:
        con.execute("SELECT csq_stats_reset()")
        check(con, sql.replace("TBL", "t"), sql.replace("TBL", "n"))
        st = stats(con)
        # on the device: one Execute per row group, or one per slot over a range of them
        assert (st["programs_executed"] > 0 and st["row_groups_scanned"] >= 40) or not dev, (sql, st)
        plan = dict(con.execute("SELECT * FROM csq_explain(?)", (sql.replace("TBL", "t"),)).fetchall())
        assert (plan["plan"] == "host") != bool(dev), (sql, plan)


def test_rows_the_filter_drops_do_not_fault_the_aggregate():
    """The device evaluates a run that keeps most of its batch over the whole
    batch; text in arithmetic on a row the filter drops must not fault it, and
    the answer must equal native SQLite's, computed on the device."""
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b INTEGER, c TEXT, pushdown='always')")
    con.execute("CREATE TABLE n(a INTEGER, b INTEGER, c TEXT)")
    rows = [("x%d" % i if i % 7 == 3 else i, i % 7, "k%d" % (i % 3)) for i in range(20000)]
    con.executemany("INSERT INTO t VALUES(?, ?, ?)", rows)
    con.executemany("INSERT INTO n VALUES(?, ?, ?)", rows)
    for where in ("b <> 3", "b > 3", "b <> 3 AND a IS NOT NULL"):  # 6/7, 3/7, 6/7 of a batch
        q = "SELECT c, sum(a * 2), avg(a + 1), min(a - 1), count(*) FROM TBL WHERE %s GROUP BY c ORDER BY 1" % where
        con.execute("SELECT csq_stats_reset()")
        check(con, q.replace("TBL", "t"), q.replace("TBL", "n"))
        st = stats(con)
        assert st["rows_returned"] <= 9 and st["programs_executed"] == 3, st  # aggregated on the device


def test_integer_overflow_and_empty_tables():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b REAL)")
    assert view(con, "SELECT count(*), sum(a), total(b), avg(a), min(a), max(b) FROM t") == \
        [(0, None, 0.0, None, None, None)]
    assert view(con, "SELECT a, count(*) FROM t GROUP BY a") == []
    con.execute("INSERT INTO t VALUES(9223372036854775807, 1), (1, 2)")
    expect_error(lambda: view(con, "SELECT sum(a) FROM t"), "integer overflow")
    assert view(con, "SELECT total(a) > 9e18, count(*) FROM t") == [(1, 2)]


def test_sum_overflow_follows_row_order_as_sqlite_does():
    # SQLite raises "integer overflow" when a running sum of the integers met
    # before the first REAL leaves int64: the same values may or may not
    # overflow depending on their order, and a REAL first stops the check
    big = 9223372036854775807
    cases = [[big, 1, -5],            # overflows on the second row
             [-5, big, 1],            # the same values, never out of range
             [big, 2.5, 1],           # the REAL comes first: a real result
             [big, 1, 2.5],           # overflow before the REAL: an error
             [-big - 1, -1, 3],       # below INT64_MIN
             [-big - 1, 3, -1],
             [big // 2, big // 2, 1, -3]]
    for vals in cases:
        con = connect()
        con.execute("CREATE VIRTUAL TABLE t USING csq(a, pushdown='always')")
        con.execute("CREATE TABLE n(a)")
        rows = []
        for i, v in enumerate(vals):  # spread over row groups and groups
            rows += [(0,)] * 5000 + [(v,)]
        con.executemany("INSERT INTO t VALUES(?)", rows)
        con.executemany("INSERT INTO n VALUES(?)", rows)
        for q in ["SELECT sum(a) FROM TBL", "SELECT a = 0, sum(a) FROM TBL GROUP BY 1 ORDER BY 1",
                  "SELECT sum(a), avg(a), total(a) FROM TBL WHERE a <> 0"]:
            try:
                want = con.execute(q.replace("TBL", "n")).fetchall()
            except sqlite3.Error as e:
                want = str(e)
            try:
                got = view(con, q.replace("TBL", "t"))
            except sqlite3.Error as e:
                got = str(e)
            assert got == want, (vals, q, got, want)


def test_cost_model_says_where_and_why():
    con = connect()
    for name, n, push in (("small", 500, "auto"), ("never", 20000, "never"), ("always", 500, "always"),
                          ("big", 20000, "auto")):
        con.execute("CREATE VIRTUAL TABLE %s USING csq(a INTEGER, b TEXT, pushdown='%s')" % (name, push))
        con.executemany("INSERT INTO %s VALUES(?, ?)" % name, [(i, "k%d" % (i % 3)) for i in range(n)])

    def plan(sql):
        return dict(con.execute("SELECT * FROM csq_explain(?)", (sql,)).fetchall())

    agg = "SELECT b, count(*), sum(a) FROM %s GROUP BY b ORDER BY b"
    for name, where, why in (("small", "host", "500 rows, fewer than 8192"),
                             ("never", "host", "pushdown='never'"),
                             ("always", "device", "on the device"),
                             ("big", "device", "on the device")):
        p = plan(agg % name)
        assert p["plan"].startswith(where), (name, p)
        assert why in p["why"], (name, p)
        con.execute("SELECT csq_stats_reset()")
        want = con.execute(agg.replace("FROM %s", "FROM (SELECT * FROM %s)") % name).fetchall()
        assert view(con, agg % name) == want
        assert (stats(con)["programs_executed"] > 0) == (where == "device"), (name, stats(con))
    p = plan("SELECT a FROM big WHERE a < 10")
    assert p["plan"].startswith("host") and "no aggregate" in p["why"], p


def test_fallbacks_give_native_answers():
    con = connect()
    con.execute("CREATE TABLE n(a INTEGER, b TEXT)")
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT)")
    for i in range(100):
        con.execute("INSERT INTO n VALUES(?, ?)", (i % 7, "s%d" % (i % 5)))
        con.execute("INSERT INTO t VALUES(?, ?)", (i % 7, "s%d" % (i % 5)))
    for q in ["SELECT count(DISTINCT a) FROM TBL",
              "SELECT b, sum(a) FROM TBL WHERE b LIKE 's1%' OR a = 3 GROUP BY b ORDER BY b",
              "SELECT a, b FROM TBL WHERE a = 2 ORDER BY rowid LIMIT 3",
              "SELECT sum(length(b)) FROM TBL",
              "SELECT b, group_concat(a) FROM TBL GROUP BY b ORDER BY b",
              "SELECT x.a, count(*) FROM TBL AS x, TBL AS y WHERE x.a = y.a GROUP BY 1 ORDER BY 1"]:
        check(con, q.replace("TBL", "t"), q.replace("TBL", "n"))


def test_bad_views_give_sqlite_errors():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a)")
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query('SELEC 1')"), "syntax error")
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query('DELETE FROM t')"),
                 "one SELECT")
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query('SELECT nope FROM t')"),
                 "no such column")
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query(1, 2)"), "usage")
