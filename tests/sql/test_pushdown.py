"""Transparent pushdown: constraints that SQLite offers a csq table run on the
device as a program. Differential tests against a native table holding the
same rows, plus the plan, zone-map skipping and the edge cases of SQLite's
comparison rules."""
import os
import random
from collections import Counter

from harness import connect, stats, same_rows, tmpdir

AFFS = ["INTEGER", "REAL", "TEXT", "BLOB", "NUMERIC", ""]


def value(rnd):
    k = rnd.randrange(10)
    if k == 0:
        return None
    if k <= 2:
        return rnd.randrange(-20, 20)
    if k == 3:
        return rnd.choice([0.5, -1.5, 2.0, 1e18, -0.0, 3.0])
    if k <= 5:
        return rnd.choice(["", "a", "A", "ab", "Ab", "abc", "b", "B", "10", " 5", "5", "x%y", "_z", "é"])
    if k == 6:
        return rnd.choice([b"", b"a", b"ab", b"\x00\x01"])
    if k == 7:
        return rnd.randrange(-2**62, 2**62)
    return rnd.choice(["1.0", "2", "-3", "1e2", "abc "])


def const(rnd):
    v = value(rnd)
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, bytes):
        return "x'" + v.hex() + "'"
    if v is None:
        return "NULL"
    return repr(v)


def setup(n, seed, rowgroup=64):
    rnd = random.Random(seed)
    con = connect()
    cols = ", ".join("c%d %s" % (i, a) for i, a in enumerate(AFFS))
    con.execute("CREATE TABLE n(%s)" % cols)
    con.execute("CREATE VIRTUAL TABLE t USING csq(%s, rowgroup=%d, pushdown='always')" % (cols, rowgroup))
    rows = [tuple(value(rnd) for _ in AFFS) for _ in range(n)]
    con.execute("BEGIN")
    con.executemany("INSERT INTO n VALUES(?,?,?,?,?,?)", rows)
    con.executemany("INSERT INTO t VALUES(?,?,?,?,?,?)", rows)
    con.execute("COMMIT")
    return con, rnd


def predicate(rnd):
    c = "c%d" % rnd.randrange(len(AFFS))
    k = rnd.randrange(12)
    if k < 6:
        return "%s %s %s" % (c, rnd.choice(["=", "<", "<=", ">", ">=", "!=", "IS", "IS NOT", "=="]), const(rnd))
    if k == 6:
        return "%s IS %sNULL" % (c, rnd.choice(["", "NOT "]))
    if k == 7:
        return "%s IN (%s)" % (c, ", ".join(const(rnd) for _ in range(rnd.randrange(1, 5))))
    if k == 8:
        return "%s LIKE '%s'" % (c, rnd.choice(["a%", "A%", "%b%", "_", "1%", "%", "x\\%%", "é%"]))
    if k == 9:
        return "%s GLOB '%s'" % (c, rnd.choice(["a*", "A*", "*b*", "?", "[ab]*", "1*"]))
    if k == 10:
        return "%s BETWEEN %s AND %s" % (c, const(rnd), const(rnd))
    return "%s COLLATE NOCASE = %s" % (c, const(rnd))


def random_order(rnd):
    """(ORDER BY clause, covers a unique key, sort key columns of the row)."""
    k = rnd.randrange(10)
    if k < 3:
        return "ORDER BY rowid" + rnd.choice(["", " DESC"]), True, [0]
    if k < 6:
        cols = rnd.sample(range(len(AFFS)), rnd.randrange(1, 3))
        dirs = [rnd.choice(["", " DESC"]) for _ in cols]
        total = rnd.random() < 0.6
        o = ", ".join("c%d%s" % (c, d) for c, d in zip(cols, dirs))
        if total:
            o += ", rowid" + rnd.choice(["", " DESC"])
        return "ORDER BY " + o, total, [1 + c for c in cols]
    return "", False, []


def test_random_filters_match_native():
    # random filters, some with ORDER BY and/or LIMIT/OFFSET: ordered lists
    # are compared when ORDER BY covers a unique key; with LIMIT and no total
    # order, the row count, the sort keys (if any) and that each row is one
    # of the native table's; without LIMIT, the multisets
    con, rnd = setup(3000, 7)
    con.execute("SELECT csq_stats_reset()")
    n = nlim = ntop = 0
    for i in range(2500):
        w = " AND ".join(predicate(rnd) for _ in range(rnd.randrange(1, 4)))
        if rnd.random() < 0.2:
            w = "(%s) OR (%s)" % (w, predicate(rnd))
        order, total, keys = random_order(rnd)
        lim = ""
        if rnd.random() < 0.4:
            lim = " LIMIT %d" % rnd.choice([0, 1, 3, 7, 20, 100, -1])
            if rnd.random() < 0.5:
                lim += " OFFSET %d" % rnd.choice([0, 1, 4, 30, 5000])
        q = "SELECT rowid, * FROM TBL WHERE %s %s%s" % (w, order, lim)
        a = con.execute(q.replace("TBL", "t")).fetchall()
        b = con.execute(q.replace("TBL", "n")).fetchall()
        if total:
            same_rows(a, b, q)
        elif not lim:
            assert Counter(a) == Counter(b), q
        else:
            assert len(a) == len(b), (q, len(a), len(b))
            assert [tuple(r[j] for j in keys) for r in a] == [tuple(r[j] for j in keys) for r in b], q
            every = Counter(con.execute("SELECT rowid, * FROM n WHERE %s" % w).fetchall())
            assert not (Counter(a) - every), q
        n += len(a)
        if lim:
            plan = " ".join(r[-1] for r in con.execute("EXPLAIN QUERY PLAN " + q.replace("TBL", "t")))
            nlim += ";limit=" in plan
            ntop += ";order=" in plan
    assert n > 1000, "the random predicates should select something: %d rows" % n
    assert nlim > 50 and ntop > 20, (nlim, ntop)
    st = stats(con)
    assert st["programs_executed"] > 1000, st


def test_plan_is_readable_and_pushed():
    con, _ = setup(100, 1)
    plan = " ".join(r[-1] for r in con.execute(
        "EXPLAIN QUERY PLAN SELECT c0 FROM t WHERE c0 > 5 AND c2 = 'a' AND c1 IS NULL"))
    assert "device;" in plan and "c1:gt" in plan and "c3:eq" in plan and "c2:isnull" in plan, plan


def test_projection_and_bytes():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, c TEXT, d REAL, rowgroup=4096)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES(?,?,?,?)",
                    [(i, "long text value %d" % i * 3, "x" * 40, i / 7) for i in range(40000)])
    con.execute("COMMIT")
    con.execute("SELECT csq_stats_reset()")
    r = con.execute("SELECT sum(a) FROM t WHERE a % 1 = 0 AND a < 400").fetchone()
    assert r == (sum(range(400)),)
    st = stats(con)
    # only column a and the rowids of 400 rows come back, not 40000 rows of text
    assert st["bytes_to_host"] < 64 * 1024, st
    assert st["programs_executed"] == 1 and st["row_groups_skipped"] >= 8, st


def test_zone_maps_skip_every_row_group():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(k INTEGER, d TEXT, rowgroup=1000)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES(?,?)", [(i, "1995-%02d-01" % (1 + i % 12)) for i in range(20000)])
    con.execute("COMMIT")
    con.execute("SELECT csq_stats_reset()")
    assert con.execute("SELECT count(*) FROM t WHERE k > 1000000").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM t WHERE d < '1990-01-01'").fetchone() == (0,)
    st = stats(con)
    assert st["row_groups_skipped"] == 40 and st["programs_executed"] == 0, st


def test_like_case_and_blobs():
    con = connect()
    con.execute("CREATE TABLE n(x)")
    con.execute("CREATE VIRTUAL TABLE t USING csq(x, pushdown='always')")
    vals = ["abc", "ABC", "aBc", b"abc", 123, 1.5, None, "a_c", "a%c", "xyz"]
    for v in vals:
        con.execute("INSERT INTO n VALUES(?)", (v,))
        con.execute("INSERT INTO t VALUES(?)", (v,))
    for pat in ["abc", "a%", "A_C", "1%", "%.5", "a\\%c", "%"]:
        for esc in ["", " ESCAPE '\\'"]:
            for ci in ["OFF", "ON"]:
                con.execute("PRAGMA case_sensitive_like=%s" % ci)
                q = "SELECT quote(x) FROM TBL WHERE x LIKE '%s'%s ORDER BY rowid" % (pat, esc)
                same_rows(con.execute(q.replace("TBL", "t")).fetchall(),
                          con.execute(q.replace("TBL", "n")).fetchall(), q + " " + ci)
    con.execute("PRAGMA case_sensitive_like=OFF")
    q = "SELECT quote(x) FROM %s WHERE x GLOB 'a*' ORDER BY rowid"
    same_rows(con.execute(q % "t").fetchall(), con.execute(q % "n").fetchall(), q)


def test_joins_push_the_inner_equality():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE big USING csq(k INTEGER, v TEXT, pushdown='always')")
    con.execute("CREATE TABLE small(k INTEGER)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO big VALUES(?,?)", [(i, "v%d" % i) for i in range(5000)])
    con.executemany("INSERT INTO small VALUES(?)", [(i * 37,) for i in range(50)])
    con.execute("COMMIT")
    # CROSS JOIN fixes the order: big is the inner table, probed once per outer row
    q = "SELECT count(*), sum(length(v)) FROM small CROSS JOIN big WHERE big.k = small.k"
    plan = " ".join(r[-1] for r in con.execute("EXPLAIN QUERY PLAN " + q))
    assert "probe;" in plan and plan.endswith(";key=c1"), plan
    con.execute("SELECT csq_stats_reset()")
    r = con.execute(q).fetchone()
    assert r[0] == 50, r
    st = stats(con)
    # big is read once into the probe hash, not scanned once per probe
    assert st["rows_scanned"] == 5000 and st["row_groups_scanned"] == 1, st
    # with a constant, the equality goes to the device as before
    q = "SELECT count(*) FROM big WHERE k = 37"
    plan = " ".join(r[-1] for r in con.execute("EXPLAIN QUERY PLAN " + q))
    assert "c1:eq" in plan, plan
    assert con.execute(q).fetchone() == (1,)


def test_text_column_against_numbers():
    # a TEXT column compared with a number: SQLite converts the number
    con = connect()
    con.execute("CREATE TABLE n(t TEXT, b BLOB)")
    con.execute("CREATE VIRTUAL TABLE v USING csq(t TEXT, b BLOB, pushdown='always')")
    rows = [("5", "5"), ("5.0", 5), (5, b"5"), ("10", 10), ("9", 9.0), (None, None)]
    for r in rows:
        con.execute("INSERT INTO n VALUES(?,?)", r)
        con.execute("INSERT INTO v VALUES(?,?)", r)
    con.execute("CREATE TABLE nums(x INTEGER)")
    con.execute("INSERT INTO nums VALUES(5), (10)")
    for w in ["t = 5", "t > 5", "t = '5'", "b = 5", "b = '5'", "b > 5", "t IN (5, 10)"]:
        q = "SELECT quote(t), quote(b) FROM %%s WHERE %s ORDER BY rowid" % w
        same_rows(con.execute(q % "v").fetchall(), con.execute(q % "n").fetchall(), w)
    # the right side a column with numeric affinity (a join)
    q = "SELECT quote(t), x FROM nums, %s WHERE t = x ORDER BY x, %s.rowid"
    same_rows(con.execute(q % ("v", "v")).fetchall(), con.execute(q % ("n", "n")).fetchall(), "join")
    q = "SELECT quote(b), x FROM nums, %s WHERE b = x ORDER BY x, %s.rowid"
    same_rows(con.execute(q % ("v", "v")).fetchall(), con.execute(q % ("n", "n")).fetchall(), "join b")


def test_transaction_rows_are_filtered_too():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, pushdown='always')")
    con.execute("INSERT INTO t VALUES(1), (2), (3)")
    con.execute("BEGIN")
    con.execute("INSERT INTO t VALUES(4), (5)")
    con.execute("DELETE FROM t WHERE a = 2")
    assert con.execute("SELECT a FROM t WHERE a >= 2 ORDER BY a").fetchall() == [(3,), (4,), (5,)]
    con.execute("SAVEPOINT s")
    con.execute("INSERT INTO t VALUES(6)")
    assert con.execute("SELECT a FROM t WHERE a > 4 ORDER BY a").fetchall() == [(5,), (6,)]
    con.execute("ROLLBACK TO s")
    assert con.execute("SELECT a FROM t WHERE a > 4 ORDER BY a").fetchall() == [(5,)]
    con.execute("ROLLBACK")
    assert con.execute("SELECT a FROM t WHERE a > 0 ORDER BY a").fetchall() == [(1,), (2,), (3,)]


def test_filters_that_keep_most_rows_stay_on_the_host():
    # pushdown=auto estimates a range filter's selectivity from the zone maps:
    # one that keeps most rows would make the device send back nearly whole
    # columns, so the host scans the compressed chunks instead
    con = connect()
    con.execute("CREATE VIRTUAL TABLE u USING csq(a INTEGER, d TEXT, r REAL)")
    con.execute("CREATE TABLE nu(a INTEGER, d TEXT, r REAL)")
    rows = [(i, "2020-%02d-%02d" % (1 + i % 12, 1 + i % 28), i / 7.0) for i in range(40000)]
    for t in ("u", "nu"):
        con.executemany("INSERT INTO %s VALUES(?,?,?)" % t, rows)
    con.execute("SELECT count(*) FROM u").fetchone()  # a first look notes the zone maps
    for where, where_runs in (("a < 36000", "host"), ("a >= 39000", "device"), ("a > 1000 AND r < 5500.0", "host"),
                              ("a > 1000 AND r < 500.0", "device"), ("d <= '2020-11-30'", "host"),
                              ("d < '2020-02-01'", "device"), ("a = 5", "device")):
        q = "SELECT count(*), sum(r) FROM %s WHERE " + where
        plan = " ".join(r[-1] for r in con.execute("EXPLAIN QUERY PLAN " + q % "u"))
        assert (("INDEX 2:device" in plan) == (where_runs == "device")), (where, plan)
        if where_runs == "host":
            assert "keeps~" in plan, plan
        assert con.execute(q % "u").fetchall() == con.execute(q % "nu").fetchall(), where
    # pushdown='always' pushes whatever the estimate
    con.execute("CREATE VIRTUAL TABLE w USING csq(a INTEGER, pushdown='always')")
    con.executemany("INSERT INTO w VALUES(?)", [(i,) for i in range(20000)])
    con.execute("SELECT count(*) FROM w").fetchone()
    plan = " ".join(r[-1] for r in con.execute("EXPLAIN QUERY PLAN SELECT count(*) FROM w WHERE a < 19000"))
    assert "INDEX 2:device" in plan, plan


def test_decimal_columns_filter_on_their_integers():
    # REAL columns of decimals are stored as scaled integers (REAL_DEC); range
    # filters on them compare those integers, which must give exactly what
    # comparing the doubles gives, at and around every boundary
    rnd = random.Random(7)
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(x REAL, y REAL, pushdown='always')")
    con.execute("CREATE TABLE n(x REAL, y REAL)")
    rows = []
    for _ in range(60000):
        x = rnd.choice([rnd.randrange(0, 11) / 100, rnd.randrange(-5000, 5000) / 8, None,
                        rnd.randrange(100000) / 100])
        rows.append((x, rnd.randrange(-99999, 99999) / 1000))
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES(?,?)", rows)
    con.executemany("INSERT INTO n VALUES(?,?)", rows)
    con.execute("COMMIT")
    consts = [0.05, 0.07, 0.06, 0.0, -0.0, 0.1, 1e9, -1e9, 0.055, 0.07000000000000001, 0.069999999999,
              3, -625.0, -624.875, 999.99, 1000]
    for _ in range(300):
        a, b = rnd.choice(consts), rnd.choice(consts)
        w = rnd.choice(["x BETWEEN %r AND %r", "x >= %r AND x < %r", "x > %r AND x <= %r",
                        "x = %r OR x = %r", "x < %r AND y > %r"]) % (a, b)
        # (sums rounded: an OR may run as two scans, which changes the order of addition)
        q = "SELECT count(*), round(sum(x), 6), round(sum(y), 6) FROM %s WHERE " + w
        same_rows(con.execute(q % "t").fetchall(), con.execute(q % "n").fetchall(), w)


def lazy_tables(con, n=20000, rowgroup=1000, extra=""):
    """t (csq, pushdown always) and n (native) with the same rows:
    a = i, b = i % 1000, c = a long text, d = i / 8."""
    rows = [(i, i % 1000, "text value number %d" % i, i / 8) for i in range(n)]
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b INTEGER, c TEXT, d REAL, "
                "rowgroup=%d, pushdown='always'%s)" % (rowgroup, extra))
    con.execute("CREATE TABLE n(a INTEGER, b INTEGER, c TEXT, d REAL)")
    con.execute("BEGIN")
    for tb in ("t", "n"):
        con.executemany("INSERT INTO %s VALUES(?,?,?,?)" % tb, rows)
    con.execute("COMMIT")


def same_as_native(con, q, bSort=False):
    """q (with TBL for the table) gives the same rows on t (csq) as on n."""
    a = con.execute(q.replace("TBL", "t")).fetchall()
    b = con.execute(q.replace("TBL", "n")).fetchall()
    same_rows(sorted(a) if bSort else a, sorted(b) if bSort else b, q)


def bytes_of(con, q):
    con.execute("SELECT csq_stats_reset()")
    r = con.execute(q).fetchall()
    return r, stats(con)["bytes_to_host"]


def test_device_sends_only_the_columns_sqlite_reads():
    # colUsed names b and c (the WHERE), but SQLite never reads them: the
    # device evaluates those terms exactly. After the first batch the device
    # leaves them (and the rowids) out.
    con = connect()
    lazy_tables(con, n=40000, rowgroup=500)
    q_few = "SELECT sum(d) FROM TBL WHERE c >= 'text' AND b < 500"
    q_all = "SELECT sum(d), max(c), sum(b) FROM TBL WHERE c >= 'text' AND b < 500"
    few, n_few = bytes_of(con, q_few.replace("TBL", "t"))
    alls, n_all = bytes_of(con, q_all.replace("TBL", "t"))
    assert few == con.execute(q_few.replace("TBL", "n")).fetchall()
    assert alls == con.execute(q_all.replace("TBL", "n")).fetchall()
    # d and the row number, 12 bytes a row once the first batch is read,
    # against 4 + 8 + 8 + 8 + 4 + ~24 with b and c (offset, length, text)
    assert n_few * 2.5 < n_all, (n_few, n_all)


def test_a_column_read_for_some_rows_only_comes_from_its_chunk():
    # c is read only for rows past 15000: the first batch does not read it,
    # so the device stops sending it, and the cursor reads it from the
    # chunks of the later row groups when SQLite asks after all
    con = connect()
    lazy_tables(con)
    q = "SELECT a, CASE WHEN a >= 15000 THEN c END, CASE WHEN a % 997 = 5 THEN rowid END FROM TBL WHERE b < 300"
    con.execute("SELECT csq_stats_reset()")
    same_as_native(con, q)
    st = stats(con)
    # the device filtered every row group; the cursor read left-out columns
    # (the chunks of c and the rowids) for some of them
    assert st["programs_executed"] == 20 and st["media_bytes_read"] > 0, st
    # with deleted rows in the row groups, row numbers still index the chunks
    for tb in ("t", "n"):
        con.execute("DELETE FROM %s WHERE a %% 7 = 3" % tb)
    same_as_native(con, q)


def test_rowids_through_device_scans():
    # the device returns row numbers, not rowids: writes, rowid in the
    # statement, OR-by-union and LIMIT windows read rowids from the chunk
    con = connect()
    lazy_tables(con)
    for q in ["SELECT rowid, a FROM TBL WHERE b < 3",
              "SELECT rowid FROM TBL WHERE b = 5 OR c = 'text value number 77'",
              "SELECT rowid, d FROM TBL WHERE b > 990 AND rowid % 2 = 0"]:
        same_as_native(con, q, bSort=True)
    # no column read at all: the program still has an output, left out after a batch
    for q in ["SELECT count(*) FROM TBL WHERE rowid > 5", "SELECT 1 FROM TBL WHERE rowid BETWEEN 5 AND 4000"]:
        same_as_native(con, q)
    q = "SELECT rowid, a FROM TBL WHERE b < 10 LIMIT 5 OFFSET 12"
    assert ";limit=" in " ".join(r[-1] for r in con.execute("EXPLAIN QUERY PLAN " + q.replace("TBL", "t")))
    got = con.execute(q.replace("TBL", "t")).fetchall()
    assert len(got) == 5 and all(r[0] == r[1] + 1 and r[1] % 1000 < 10 for r in got), got
    for w in ["UPDATE TBL SET d = d + 1 WHERE b < 20",
              "DELETE FROM TBL WHERE b = 3 AND a > 100",
              "UPDATE TBL SET c = 'changed' WHERE b BETWEEN 40 AND 45"]:
        for tb in ("t", "n"):
            con.execute(w.replace("TBL", tb))
        same_as_native(con, "SELECT rowid, * FROM TBL ORDER BY rowid")


def test_row_numbers_over_striped_devices():
    d = tmpdir()
    con = connect()
    devs = ",".join(os.path.join(d, x) for x in ("a.csd", "b.csd"))
    lazy_tables(con, n=9000, rowgroup=500, extra=", devices='%s'" % devs)
    q = "SELECT rowid, a, CASE WHEN a > 6000 THEN c END FROM TBL WHERE b < 50"
    same_as_native(con, q, bSort=True)
    # a LIMIT takes the members' rows in turn: each row must be the native one
    got = con.execute("SELECT rowid, d FROM t WHERE b < 7 LIMIT 30").fetchall()
    every = set(con.execute("SELECT rowid, d FROM n WHERE b < 7").fetchall())
    assert len(got) == 30 and set(got) <= every, got


def test_random_projections_match_native():
    # the select list decides what the device sends after the first batch:
    # random subsets of the columns, none at all, columns read only on some
    # rows (CASE), the rowid, against the same filters on a native table
    con, rnd = setup(3000, 11, rowgroup=100)
    for i in range(600):
        w = " AND ".join(predicate(rnd) for _ in range(rnd.randrange(1, 3)))
        cols = ["c%d" % j for j in range(len(AFFS))] + ["rowid"]
        k = rnd.randrange(5)
        if k == 0:
            sel = "count(*)"
        elif k == 1:
            sel = ", ".join(rnd.sample(cols, rnd.randrange(1, 4)))
        else:
            a, b = rnd.sample(cols, 2)
            sel = "CASE WHEN rowid %% %d = 0 THEN %s END, %s" % (rnd.choice([7, 50, 400, 2900]), a, b)
        q = "SELECT %s FROM TBL WHERE %s" % (sel, w)
        a = con.execute(q.replace("TBL", "t")).fetchall()
        b = con.execute(q.replace("TBL", "n")).fetchall()
        assert Counter(a) == Counter(b), q


def test_in_lists_on_text_columns():
    # pushed when every value is text, a blob or NULL; a number in the list
    # (or from a subquery) leaves the term to SQLite, which converts values
    # the device does not
    con = connect()
    rows = [(i, rnd_text) for i, rnd_text in enumerate(
        ["MAIL", "SHIP", "mail", "5", "5.0", " 5", "AIR", None, "RAIL", "TRUCK", "Ship", "10"] * 300)]
    for tb, extra in (("t", ", rowgroup=500, pushdown='always'"), ("n", "")):
        if tb == "t":
            con.execute("CREATE VIRTUAL TABLE t USING csq(k INTEGER, m TEXT, u, c TEXT COLLATE NOCASE%s)" % extra)
        else:
            con.execute("CREATE TABLE n(k INTEGER, m TEXT, u, c TEXT COLLATE NOCASE)")
        con.executemany("INSERT INTO %s VALUES(?,?,?,?)" % tb, [(k, m, m, m) for k, m in rows])
    con.execute("CREATE TABLE nums(x NUMERIC, y TEXT, z)")
    con.executemany("INSERT INTO nums VALUES(?,?,?)", [(5, "MAIL", 5), ("abc", "AIR", "5"), (10, None, 10.0)])
    plan = " ".join(r[-1] for r in con.execute("EXPLAIN QUERY PLAN SELECT k FROM t WHERE m IN ('MAIL', 'SHIP')"))
    assert ":in:" in plan, plan
    con.execute("SELECT csq_stats_reset()")
    got = con.execute("SELECT count(*) FROM t WHERE m IN ('MAIL', 'SHIP')").fetchone()
    assert got == (600,) and stats(con)["bytes_to_host"] < 3600 * 4, (got, stats(con))
    for col in ("m", "u", "c"):
        for rhs in ["('MAIL', 'SHIP')", "('mail', x'41')", "(5, 'AIR')", "(5.0, '10', NULL)",
                    "('5', ' 5', 10)", "(SELECT x FROM nums)", "(SELECT y FROM nums)",
                    "(SELECT z FROM nums)", "(SELECT 5 UNION SELECT 'RAIL')"]:
            for neg in ("", "NOT "):
                q = "SELECT k FROM TBL WHERE %s %sIN %s ORDER BY k" % (col, neg, rhs)
                same_as_native(con, q)


def test_order_by_limit_keeps_a_top_n_on_the_device():
    # each row group sends only its own LIMIT + OFFSET best rows; the cursor
    # merges them (ties go to the earlier row, as SQLite's sort would)
    con = connect()
    lazy_tables(con)
    for q in ["SELECT rowid, * FROM TBL WHERE b < 900 ORDER BY d DESC LIMIT 3",
              "SELECT a, c FROM TBL WHERE b < 900 ORDER BY b, a DESC LIMIT 4 OFFSET 2",
              "SELECT a FROM TBL WHERE d > 10 ORDER BY c LIMIT 7"]:
        plan = " ".join(r[-1] for r in con.execute("EXPLAIN QUERY PLAN " + q.replace("TBL", "t")))
        assert ";order=" in plan, plan
        con.execute("SELECT csq_stats_reset()")
        got = con.execute(q.replace("TBL", "t")).fetchall()
        st = stats(con)
        same_rows(got, con.execute(q.replace("TBL", "n")).fetchall(), q)
        assert st["bytes_to_host"] < 32 * 1024 and st["programs_executed"] == 20, (q, st)


def test_group_by_with_more_groups_than_a_row_group_has_rows():
    """A pushed GROUP BY merges its row groups' partials on the device; the
    merged result of the last row groups holds every group seen so far, so
    it can have more rows than the row group it ends with. The host took
    such a result for malformed ("the device returned a malformed result")
    once the groups outnumbered the rows of a row group."""
    d = tmpdir()
    con = connect(os.path.join(d, "g.db"))
    con.execute("CREATE VIRTUAL TABLE t USING csq(g TEXT, v REAL, w, rowgroup=16)")
    con.execute("CREATE TABLE n(g TEXT, v REAL, w)")
    for tab in ("t", "n"):
        con.execute("INSERT INTO %s WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r "
                    "WHERE i < 30000) SELECT 'k' || (i %% 97), i * 0.5, "
                    "CASE WHEN i %% 3 = 0 THEN NULL ELSE i END FROM r" % tab)
    con.commit()
    q = "SELECT g, count(*), sum(v), min(w), max(w) FROM %s GROUP BY g"
    con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query('%s')" % (q % "t"))
    got = sorted(con.execute("SELECT * FROM v").fetchall())
    want = sorted(con.execute(q % "n").fetchall())
    assert len(want) == 97 and got == want, (len(got), got[:3], want[:3])
    con.close()


def test_collated_columns_match_native():
    """Columns that declare NOCASE or RTRIM, every operator SQLite offers
    (SQLite 3.40 names BINARY for "<>" and IS NOT over such a column, which
    compare by its collation: those stay with SQLite), alone and as the
    inner table of a join (the probe's filters)."""
    rnd = random.Random(21)
    con = connect()
    con.execute("PRAGMA automatic_index = OFF")
    decl = "k INTEGER, a TEXT COLLATE NOCASE, b TEXT COLLATE RTRIM, c TEXT"
    con.execute("CREATE VIRTUAL TABLE t USING csq(%s, rowgroup=64, pushdown='always')" % decl)
    con.execute("CREATE TABLE n(%s)" % decl)
    con.execute("CREATE VIRTUAL TABLE o USING csq(k INTEGER)")
    con.execute("CREATE TABLE no(k INTEGER)")
    words = [None, "b", "b ", "B", "B ", "a", "ab", "", " ", 5, 5.5, "5", b"b"]
    rows = [(i % 9, rnd.choice(words), rnd.choice(words), rnd.choice(words)) for i in range(3000)]
    for t in ("t", "n"):
        con.executemany("INSERT INTO %s VALUES(?,?,?,?)" % t, rows)
    for t in ("o", "no"):
        con.executemany("INSERT INTO %s VALUES(?)" % t, [(i,) for i in range(0, 9, 2)])
    ops = ["=", "<>", "!=", "IS", "IS NOT", "<", ">=", "LIKE", "GLOB"]
    for i in range(600):
        col = rnd.choice(["a", "b", "c"])
        op = rnd.choice(ops)
        val = rnd.choice(["'b'", "'B'", "'b '", "'a'", "5", "''", "NULL"])
        coll = rnd.choice(["", "", " COLLATE BINARY", " COLLATE NOCASE", " COLLATE RTRIM"])
        term = "x.%s %s %s%s" % (col, op, val, coll if op not in ("LIKE", "GLOB") else "")
        if rnd.random() < 0.5:
            q = "SELECT count(*), sum(x.k) FROM TBL AS x WHERE %s" % term
        else:
            q = "SELECT count(*), sum(x.k) FROM OTH AS y, TBL AS x WHERE x.k = y.k AND %s" % term
        got = con.execute(q.replace("TBL", "t").replace("OTH", "o")).fetchall()
        want = con.execute(q.replace("TBL", "n").replace("OTH", "no")).fetchall()
        assert got == want, (q, got, want)
