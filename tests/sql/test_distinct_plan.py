"""count(DISTINCT x) through csq's planner (planner/split.c sp_distinct).

A query whose only aggregate is count(DISTINCT x) groups by its keys and x
on the device (or in csq's host engine over a join's rows, or on a star's
probe side), so each key's distinct values of x are one merged row each;
the host then groups those rows by the keys alone, counting the x that are
not NULL. Random such queries over every affinity, NULLs, values of every
class, several row groups and a table striped over two devices answer as
native tables do; a value that may hold one number in two forms (a column
without affinity), a second DISTINCT argument or another aggregate beside
it stay with SQLite and answer as native too. Then joins (star and hash),
empty inputs, writes between runs and the clients.
"""
import os
import random
import sqlite3

from harness import connect, stats, tmpdir
from test_query import close
from test_join_agg import same_in_shells
from test_join_plan import answer, make_pair, via_view
from test_star_plan import make_star, native as star_native, stars

COLS = "g TEXT, h INTEGER, i INTEGER, r REAL, n NUMERIC, x"


def value(rnd):
    return rnd.choice([None, rnd.randrange(-20, 20), rnd.randrange(-20, 20) + 0.5, 3.0, "7", "a",
                       "B", b"\x01", "", -0.0, 2 ** 40])


def fill(con, rnd, nrows, opts):
    con.execute("CREATE TABLE n(%s)" % COLS)
    con.execute("CREATE VIRTUAL TABLE t USING csq(%s%s)" % (COLS, opts))
    rows = [(rnd.choice(["a", "b", "c", None, "B", 1]), rnd.choice([1, 2, 3, None, 2.0, "2"]),
             rnd.choice([None, rnd.randrange(-300, 300), "x"]), rnd.choice([None, rnd.randrange(8) / 2]),
             rnd.choice([None, rnd.randrange(-5, 5), rnd.randrange(9) / 4, "5"]), value(rnd))
            for _ in range(nrows)]
    con.execute("BEGIN")
    for tab in ("n", "t"):
        con.executemany("INSERT INTO %s VALUES(?,?,?,?,?,?)" % tab, rows)
    con.execute("COMMIT")


def view(con, sql):
    con.execute("CREATE VIRTUAL TABLE temp.dq USING csq_query('%s')" % sql.replace("'", "''"))
    try:
        return con.execute("SELECT * FROM dq").fetchall()
    finally:
        con.execute("DROP TABLE temp.dq")


def one_table(seed, opts, count):
    """count random statements over t (csq, opts) against n; returns how
    many ran on the device."""
    rnd = random.Random(seed)
    con = connect()
    fill(con, rnd, rnd.randint(500, 4000), opts)
    wheres = ["", "WHERE i > 0", "WHERE g IN ('a', 'b')", "WHERE r IS NULL", "WHERE h != 1",
              "WHERE i BETWEEN -100 AND 100 AND g IS NOT NULL", "WHERE i > 1000"]
    keys = [[], ["g"], ["h"], ["g", "h"], ["i / 100"], ["r"], ["n", "g", "h"]]
    args = ["g", "h", "i", "r", "n", "i * 2", "h + 1", "x"]
    pushed = 0
    for step in range(count):
        k = rnd.choice(keys)
        arg = rnd.choice(args)
        agg = "count(DISTINCT %s)" % arg
        # other aggregates beside it come out of the partials it groups
        plain = rnd.sample(["count(*)", "sum(i)", "total(r)", "min(g)", "max(n)", "count(h)", "min(x)",
                            "sum(i * 2 - h)", "max(r)"], rnd.choice([0, 0, 1, 2]))
        sel = list(k) + [agg] + plain
        sql = "SELECT %s FROM TBL %s" % (", ".join(sel), rnd.choice(wheres))
        if k:
            sql += " GROUP BY %s" % ", ".join(k)
            if rnd.random() < 0.3:
                sql += " HAVING %s > %d" % (agg, rnd.randrange(0, 4))
        if rnd.random() < 0.6:  # else the groups come in key order, as SQLite's
            sql += " ORDER BY %d DESC%s" % (len(k) + 1, "".join(", %d" % (j + 1) for j in range(len(k))))
        if rnd.random() < 0.2:
            sql += " LIMIT %d" % rnd.randrange(1, 5)
        con.execute("SELECT csq_stats_reset()")
        want = con.execute(sql.replace("TBL", "n")).fetchall()
        got = view(con, sql.replace("TBL", "t"))
        assert close(got, want), "seed %d step %d: %s\n csq %r\n native %r" % (seed, step, sql, got[:5],
                                                                                 want[:5])
        plan = dict(con.execute("SELECT part, detail FROM csq_explain(?)", (sql.replace("TBL", "t"),)))
        ran = plan["plan"] == "device+host"
        assert not ran or stats(con)["programs_executed"] > 0, sql
        # x has no affinity: 3 and 3.0 may both be there, one value to
        # DISTINCT, so SQLite counts it
        assert ran == (arg != "x"), (sql, ran)
        pushed += ran
    con.close()
    return pushed


def test_random_count_distinct_equals_native():
    pushed = sum(one_table(seed, ", rowgroup=300, pushdown='always'", 60) for seed in range(6))
    assert pushed > 200, pushed


def test_striped_table_equals_native():
    d = tmpdir()
    opts = ", rowgroup=250, pushdown='always', devices='%s,%s'" % (
        os.path.join(d, "a.csd"), os.path.join(d, "b.csd"))
    assert one_table(17, opts, 80) > 40


def test_what_stays_with_sqlite():
    rnd = random.Random(3)
    con = connect()
    fill(con, rnd, 2000, ", rowgroup=300, pushdown='always'")
    for sql, where in [("SELECT g, count(DISTINCT i), count(*) FROM TBL GROUP BY g ORDER BY 1", "device"),
                       ("SELECT h, count(DISTINCT i), sum(r), min(g) FROM TBL GROUP BY h ORDER BY 1", "device"),
                       ("SELECT g, count(DISTINCT i), count(DISTINCT h) FROM TBL GROUP BY g ORDER BY 1", "host"),
                       ("SELECT g, sum(DISTINCT i) FROM TBL GROUP BY g ORDER BY 1", "host"),
                       ("SELECT h, count(DISTINCT i), avg(r) FROM TBL GROUP BY h ORDER BY 1", "host"),
                       ("SELECT count(DISTINCT i COLLATE NOCASE) FROM TBL", "host"),
                       ("SELECT count(DISTINCT g) FROM TBL WHERE g LIKE 'a%' OR h = 2", "host")]:
        want = con.execute(sql.replace("TBL", "n")).fetchall()
        assert close(view(con, sql.replace("TBL", "t")), want), sql
        plan = dict(con.execute("SELECT part, detail FROM csq_explain(?)", (sql.replace("TBL", "t"),)))
        assert plan["plan"] == ("device+host" if where == "device" else "host"), (sql, plan)
    sql = "SELECT g, count(DISTINCT i) AS c FROM t GROUP BY g HAVING count(DISTINCT i) > 1"
    plan = dict(con.execute("SELECT part, detail FROM csq_explain(?)", (sql,)))
    assert plan["plan"] == "device+host" and "grouped again by the keys" in plan["device"], plan


def test_empty_inputs_and_uncommitted_rows():
    con = connect()
    con.execute("CREATE TABLE n(a INTEGER, b TEXT)")
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, pushdown='always')")
    for sql in ["SELECT count(DISTINCT a) FROM TBL", "SELECT b, count(DISTINCT a) FROM TBL GROUP BY b",
                "SELECT count(DISTINCT a) FROM TBL WHERE a > 5 HAVING count(DISTINCT a) = 0"]:
        assert view(con, sql.replace("TBL", "t")) == con.execute(sql.replace("TBL", "n")).fetchall(), sql
    con.execute("BEGIN")
    for i in range(500):
        for tab in ("n", "t"):
            con.execute("INSERT INTO %s VALUES(?, ?)" % tab, (i % 13 if i % 11 else None, "s%d" % (i % 4)))
    for sql in ["SELECT count(DISTINCT a) FROM TBL", "SELECT b, count(DISTINCT a) FROM TBL GROUP BY b",
                "SELECT count(DISTINCT b) FROM TBL WHERE a > 5"]:
        assert view(con, sql.replace("TBL", "t")) == con.execute(sql.replace("TBL", "n")).fetchall(), sql
    con.execute("ROLLBACK")
    assert view(con, "SELECT count(DISTINCT a) FROM t") == [(0,)]


def star_statement(rnd):
    dims = rnd.sample(["d1", "d2", "d3"], rnd.randint(1, 3))
    frm = "FROM f AS f, " + ", ".join("%s AS %s" % (d, d) for d in dims)
    where = ["f.k%s = %s.k" % (d[1], d) for d in dims]
    if rnd.random() < 0.4:
        where.append(rnd.choice(["f.v > 0", "f.r < 5", "%s.b = 'p'" % dims[0]]))
    keys = ["%s.%s" % (d, c) for d in dims for c in ("a", "b", "c") if rnd.random() < 0.4]
    agg = "count(DISTINCT %s)" % rnd.choice(["f.v", "f.r", "f.k1", "f.v * 2", "f.u"])
    plain = rnd.sample(["count(*)", "sum(f.v)", "min(f.r)", "total(f.r)"], rnd.choice([0, 1, 2]))
    sql = "SELECT %s %s WHERE %s" % (", ".join(keys + [agg] + plain), frm, " AND ".join(where))
    if keys:
        sql += " GROUP BY " + ", ".join(keys)
        if rnd.random() < 0.3:
            sql += " HAVING %s > 1" % agg
    return sql


def test_star_joins_count_distinct_on_the_devices():
    total = star = 0
    for seed in range(8):
        rnd = random.Random(100 + seed)
        con = connect()
        make_star(con, rnd)
        for step in range(30):
            sql = star_statement(rnd)
            s0 = stars(con)
            got, gerr = via_view(con, sql)
            want, werr = answer(con, star_native(sql))
            assert gerr is None and werr is None, (sql, gerr, werr)
            assert got == want, "seed %d step %d\n  %s\n  csq %s\n  native %s" % (
                seed, step, sql, got[:4], want[:4])
            star += stars(con) - s0
            total += 1
        con.close()
    # f.u has no affinity, so a fifth of the statements stay with SQLite
    assert star > total // 2, "%d of %d" % (star, total)


def test_sums_beside_it_that_may_overflow():
    """Partial sums near the int64 limits: where SQLite's row order decides
    whether a sum overflows, the answer (or the error) is SQLite's."""
    con = connect()
    make_pair(con, "d1", "k INTEGER, a TEXT", [(k, "ab"[k % 2]) for k in range(10)])
    big = 2 ** 62
    rows = [(i % 10, i % 7, [big, big, -big, -big, 5][i % 5]) for i in range(3000)]
    make_pair(con, "f", "k INTEGER, r INTEGER, v INTEGER", rows, ", rowgroup=500")
    for sql in ["SELECT d1.a, count(DISTINCT f.r), sum(f.v) FROM f AS f, d1 AS d1 WHERE f.k = d1.k "
                "GROUP BY d1.a",
                "SELECT f.k, count(DISTINCT f.r), sum(f.v), count(*) FROM f AS f GROUP BY f.k"]:
        got, gerr = via_view(con, sql)
        want, werr = answer(con, sql.replace("FROM f AS", "FROM nf AS").replace("d1 AS", "nd1 AS"))
        assert (gerr, got) == (werr, want), (sql, gerr, werr, got, want)


def test_hash_join_groups_twice_in_the_host_engine():
    """Duplicate dimension keys: no star; the joined rows grouped by the
    keys and the DISTINCT value in csq's host engine, then again."""
    con = connect()
    rnd = random.Random(5)
    make_pair(con, "dim", "k INTEGER, a TEXT", [(i % 40, rnd.choice(["p", "q", None])) for i in range(80)])
    make_pair(con, "fact", "k INTEGER, v INTEGER, w REAL",
              [(rnd.randrange(50), rnd.choice([None, rnd.randrange(6)]), rnd.choice([None, 0.5, 1.0, 1]))
               for _ in range(20000)], ", rowgroup=2000")
    for sql in ["SELECT d.a, count(DISTINCT f.v) FROM fact AS f, dim AS d WHERE f.k = d.k GROUP BY d.a",
                "SELECT d.a, count(DISTINCT f.w) FROM fact AS f, dim AS d WHERE f.k = d.k AND f.v > 1 "
                "GROUP BY d.a ORDER BY 2 DESC, 1",
                "SELECT count(DISTINCT f.k) FROM fact AS f, dim AS d WHERE f.k = d.k AND d.a = 'p'"]:
        got, gerr = via_view(con, sql)
        want, werr = answer(con, sql.replace("fact AS", "nfact AS").replace("dim AS", "ndim AS"))
        assert gerr is None and got == want, (sql, gerr, got, want)
        plan = dict((p.strip(), d) for p, d in con.execute("SELECT part, detail FROM csq_explain(?)", (sql,)))
        assert "grouped again by the keys" in plan["host aggregation"], plan


def test_writes_between_runs_and_clients():
    d = tmpdir()
    db = os.path.join(d, "distinct.db")
    con = connect(db)
    rnd = random.Random(21)
    make_star(con, rnd)
    q = "SELECT d1.a, d2.b, count(DISTINCT f.v) FROM f AS f, d1 AS d1, d2 AS d2 " \
        "WHERE f.k1 = d1.k AND f.k2 = d2.k GROUP BY d1.a, d2.b ORDER BY 3 DESC, 1, 2"
    con.execute("CREATE VIRTUAL TABLE dv USING csq_query('%s')" % q.replace("'", "''"))
    one = "SELECT f.u, count(DISTINCT f.k3) FROM f AS f GROUP BY f.u ORDER BY 2, 1"
    con.execute("CREATE VIRTUAL TABLE dv1 USING csq_query('%s')" % one.replace("'", "''"))
    for step, script in enumerate([
            "INSERT INTO f SELECT k1, k2, k3, v + 100, r, u FROM f WHERE rowid % 3 = 0;"
            "INSERT INTO nf SELECT k1, k2, k3, v + 100, r, u FROM nf WHERE rowid % 3 = 0;",
            "BEGIN; DELETE FROM f WHERE v > 20; DELETE FROM nf WHERE v > 20; COMMIT;",
            "UPDATE d2 SET b = 'moved' WHERE k % 2 = 0; UPDATE nd2 SET b = 'moved' WHERE k % 2 = 0;"]):
        con.executescript(script)
        for v, sql in (("dv", q), ("dv1", one)):
            got = con.execute("SELECT * FROM %s" % v).fetchall()
            want = con.execute(star_native(sql)).fetchall()
            assert got == want, (step, v, got[:3], want[:3])
    con.close()
    same_in_shells(db, "dv", star_native(q))
    same_in_shells(db, "dv1", star_native(one))
