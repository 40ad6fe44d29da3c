"""Device tables end to end: create, fill, query, reopen; values exactly as a
native table; transactions, savepoints, DROP, RENAME, errors."""
import os
import random
import sqlite3
import subprocess
import sys

from harness import connect, tmpdir, stats, expect_error, same_rows, EXT

TYPES = ["INTEGER", "TEXT", "REAL", "BLOB", "NUMERIC", "", "VARCHAR(10)", "DOUBLE", "INT"]


def random_value(rnd):
    k = rnd.randrange(12)
    if k == 0:
        return None
    if k == 1:
        return rnd.randrange(-2**63, 2**63)
    if k == 2:
        return rnd.randrange(-1000, 1000)
    if k == 3:
        return rnd.uniform(-1e6, 1e6)
    if k == 4:
        return rnd.choice([0.0, -0.0, 1e308, -1e-308, 3.0, 2.5])
    if k == 5:
        return "".join(rnd.choice("abcXYZ 019é") for _ in range(rnd.randrange(8)))
    if k == 6:
        return rnd.choice(["", "12", " 12 ", "3.0", "1e3", "0x10", "-7", "abc", "9223372036854775808"])
    if k == 7:
        return bytes(rnd.randrange(256) for _ in range(rnd.randrange(6)))
    if k == 8:
        return b""
    if k == 9:
        return rnd.randrange(0, 50)
    if k == 10:
        return "x" * rnd.randrange(0, 3000)
    return rnd.randrange(-2**31, 2**31) * 1.0


def both(con, cols, rows, name="t", opts=""):
    """The same rows in a native table n_<name> and a csq table <name>."""
    coldefs = ", ".join("c%d %s" % (i, ty) for i, ty in enumerate(cols))
    con.execute("CREATE TABLE n_%s(%s)" % (name, coldefs))
    con.execute("CREATE VIRTUAL TABLE %s USING csq(%s%s)" % (name, coldefs, opts))
    ph = ",".join("?" * len(cols))
    con.execute("BEGIN")
    con.executemany("INSERT INTO n_%s VALUES(%s)" % (name, ph), rows)
    con.executemany("INSERT INTO %s VALUES(%s)" % (name, ph), rows)
    con.execute("COMMIT")


def compare(con, sql_csq, sql_native, what):
    a = con.execute(sql_csq).fetchall()
    b = con.execute(sql_native).fetchall()
    same_rows(a, b, what)


def test_values_exactly_as_native():
    rnd = random.Random(1)
    con = connect()
    rows = [tuple(random_value(rnd) for _ in TYPES) for _ in range(3000)]
    both(con, TYPES, rows, opts=", rowgroup=500")
    sel = ", ".join("c%d, typeof(c%d)" % (i, i) for i in range(len(TYPES)))
    compare(con, "SELECT rowid, %s FROM t ORDER BY rowid" % sel,
            "SELECT rowid, %s FROM n_t ORDER BY rowid" % sel, "values")
    # comparisons use the declared affinity, as for a native column
    for w in ["c0 = '12'", "c1 = 12", "c2 > 0", "c3 IS NULL", "c4 < 'a'", "c5 = x''",
              "c6 LIKE '1%'", "c0 BETWEEN -5 AND 5"]:
        compare(con, "SELECT rowid FROM t WHERE %s ORDER BY 1" % w,
                "SELECT rowid FROM n_t WHERE %s ORDER BY 1" % w, w)


def test_million_rows_round_trip():
    rnd = random.Random(2)
    con = connect()
    cols = ["INTEGER", "REAL", "TEXT", "BLOB", ""]
    rows = []
    for i in range(1_000_000):
        r = rnd.random()
        rows.append((i if r > 0.05 else None,
                     i * 0.5 if r > 0.1 else None,
                     "s%d" % (i % 5000) if r > 0.02 else None,
                     bytes([i % 256]) if r > 0.5 else None,
                     [i, "t%d" % i, i / 3.0, None, b"\x01"][i % 5]))
    both(con, cols, rows)
    q = "SELECT count(*), count(c0), sum(c0), total(c1), count(DISTINCT c2), sum(length(c3)), " \
        "sum(typeof(c4)='text'), sum(typeof(c4)='blob'), sum(typeof(c4)='null') FROM %s"
    compare(con, q % "t", q % "n_t", "aggregates")
    a = con.execute("SELECT * FROM t ORDER BY rowid").fetchall()
    same_rows(a, rows, "1M rows")


def test_reopen_in_new_process():
    d = tmpdir()
    db = os.path.join(d, "x.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES(?,?)", [(i, "v%d" % i) for i in range(70000)])
    con.execute("COMMIT")
    con.execute("DELETE FROM t WHERE a % 7 = 0")
    con.execute("UPDATE t SET b = 'u' WHERE a % 11 = 0")
    con.close()
    assert os.path.exists(db + "-csd"), "default device image X-csd is missing"
    code = ("import sqlite3,sys\n"
            "c=sqlite3.connect(%r); c.enable_load_extension(True); c.load_extension(%r)\n"
            "print(c.execute(\"SELECT count(*), sum(a), sum(b='u') FROM t\").fetchone())\n" % (db, EXT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    n = [i for i in range(70000) if i % 7]
    expect = (len(n), sum(n), len([i for i in n if i % 11 == 0]))
    assert out.stdout.strip() == str(expect), (out.stdout, expect)


def test_rollback_and_savepoints():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, rowgroup=100)")
    con.execute("INSERT INTO t VALUES(1,'keep')")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES(?, 'gone')", [(i,) for i in range(1000)])
    con.execute("DELETE FROM t WHERE a = 1")
    con.execute("ROLLBACK")
    assert con.execute("SELECT a, b FROM t").fetchall() == [(1, "keep")]
    con.execute("BEGIN")
    con.execute("INSERT INTO t VALUES(2,'two')")
    con.execute("SAVEPOINT s1")
    con.executemany("INSERT INTO t VALUES(?, 'sp')", [(i,) for i in range(10, 400)])  # spills row groups
    con.execute("DELETE FROM t WHERE a IN (1, 2, 15)")
    con.execute("UPDATE t SET b='x' WHERE a = 20")
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 389
    con.execute("ROLLBACK TO s1")
    assert con.execute("SELECT a, b FROM t ORDER BY a").fetchall() == [(1, "keep"), (2, "two")]
    con.execute("SAVEPOINT s2")
    con.execute("INSERT INTO t VALUES(3,'three')")
    con.execute("RELEASE s2")
    con.execute("COMMIT")
    assert con.execute("SELECT a, b FROM t ORDER BY a").fetchall() == \
        [(1, "keep"), (2, "two"), (3, "three")]


def test_streaming_transaction_writes_before_commit():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, rowgroup=1000)")
    con.execute("SELECT csq_stats_reset()")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES(?, ?)", [(i, "row %d" % i) for i in range(20000)])
    mid = stats(con)
    assert mid["bytes_from_host"] > 100000, "full row groups should reach the device before COMMIT: %r" % mid
    assert con.execute("SELECT count(*), sum(a) FROM t").fetchone() == (20000, sum(range(20000)))
    con.execute("COMMIT")
    assert con.execute("SELECT count(*), sum(a) FROM t").fetchone() == (20000, sum(range(20000)))


def test_drop_and_rename():
    d = tmpdir()
    db = os.path.join(d, "x.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER)")
    con.execute("CREATE VIRTUAL TABLE u USING csq(a INTEGER)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES(?)", [(i,) for i in range(200000)])
    con.execute("COMMIT")
    used1 = con.execute("SELECT blocks_used FROM csq_devices").fetchone()[0]
    con.execute("DROP TABLE t")
    con.execute("INSERT INTO u VALUES(1)")  # a later commit makes the space reusable
    con.execute("BEGIN")
    con.executemany("INSERT INTO u VALUES(?)", [(i,) for i in range(200000)])
    con.execute("COMMIT")
    used2 = con.execute("SELECT blocks_used FROM csq_devices").fetchone()[0]
    assert used2 <= used1 + 8, "dropped table's space was not reused: %d -> %d" % (used1, used2)
    con.execute("ALTER TABLE u RENAME TO v")
    assert con.execute("SELECT count(*) FROM v").fetchone()[0] == 200001
    con.close()
    con = connect(db)
    assert con.execute("SELECT count(*) FROM v").fetchone()[0] == 200001
    expect_error(lambda: con.execute("SELECT * FROM t"), "no such table")


def test_two_tables_one_device_and_explicit_device():
    d = tmpdir()
    dev = os.path.join(d, "shared.csd")
    con = connect()
    con.execute("CREATE VIRTUAL TABLE a USING csq(x INTEGER, device='%s')" % dev)
    con.execute("CREATE VIRTUAL TABLE b USING csq(y TEXT, device='%s')" % dev)
    con.execute("BEGIN")
    con.execute("INSERT INTO a VALUES(1)")
    con.execute("INSERT INTO b VALUES('one')")
    con.execute("COMMIT")
    assert con.execute("SELECT x, y FROM a, b").fetchall() == [(1, "one")]
    assert con.execute("SELECT count(*) FROM csq_devices WHERE path = ?", (dev,)).fetchone()[0] == 1


def test_two_connections_see_committed_only():
    d = tmpdir()
    db = os.path.join(d, "x.db")
    w = connect(db)
    w.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER)")
    w.execute("INSERT INTO t VALUES(1)")
    r = connect(db)
    assert r.execute("SELECT count(*) FROM t").fetchone()[0] == 1
    w.execute("BEGIN")
    w.executemany("INSERT INTO t VALUES(?)", [(i,) for i in range(100000)])
    assert r.execute("SELECT count(*) FROM t").fetchone()[0] == 1
    w.execute("COMMIT")
    assert r.execute("SELECT count(*) FROM t").fetchone()[0] == 100001
    # and a second process
    code = ("import sqlite3\nc=sqlite3.connect(%r); c.enable_load_extension(True); c.load_extension(%r)\n"
            "print(c.execute('SELECT count(*) FROM t').fetchone()[0])" % (db, EXT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "100001", (out.stdout, out.stderr)


def test_integer_primary_key_is_rowid():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(k INTEGER PRIMARY KEY, v TEXT)")
    con.execute("INSERT INTO t VALUES(10, 'a'), (NULL, 'b'), ('30', 'c')")
    assert con.execute("SELECT rowid, k, v FROM t ORDER BY k").fetchall() == \
        [(10, 10, "a"), (11, 11, "b"), (30, 30, "c")]
    assert con.execute("SELECT v FROM t WHERE k = 11").fetchall() == [("b",)]
    expect_error(lambda: con.execute("INSERT INTO t VALUES(10, 'dup')"), "UNIQUE")
    expect_error(lambda: con.execute("INSERT INTO t VALUES('x', 'bad')"), "mismatch")
    con.execute("UPDATE t SET k = 12 WHERE k = 11")
    assert con.execute("SELECT k, v FROM t ORDER BY k").fetchall() == [(10, "a"), (12, "b"), (30, "c")]


def test_not_null_enforced():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER NOT NULL, b)")
    expect_error(lambda: con.execute("INSERT INTO t VALUES(NULL, 1)"), "NOT NULL constraint failed")
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 0


def test_errors_are_clear():
    d = tmpdir()
    con = connect()
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, colour='red')"),
                 "unknown option", "colour")
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE t USING csq()"), "no columns")
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, a TEXT)"), "duplicate")
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE t USING csq('x' INTEGER)"), "malformed")
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE t USING csq(a, rowgroup='lots')"), "rowgroup")
    other = os.path.join(d, "notcsq.bin")
    with open(other, "wb") as f:
        f.write(b"hello, I am some other file" * 1000)
    before = open(other, "rb").read()
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE t USING csq(a, device='%s')" % other),
                 "not a csq device image")
    assert open(other, "rb").read() == before, "a foreign file was modified"
    expect_error(lambda: con.execute(
        "CREATE VIRTUAL TABLE t USING csq(a, device='/proc/no/such/dir/x.csd')"), "cannot open")
    assert con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0


def test_connect_never_creates_a_device():
    d = tmpdir()
    db = os.path.join(d, "x.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a)")
    con.execute("INSERT INTO t VALUES(1)")
    con.close()
    os.rename(db + "-csd", db + "-csd.moved")
    con = connect(db)
    expect_error(lambda: con.execute("SELECT * FROM t").fetchall(), "cannot open device")
    assert not os.path.exists(db + "-csd"), "xConnect created a device image"


def _image_fd_flags(path):
    """The open flags of this process's descriptors on path."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + fd) == path:
                with open("/proc/self/fdinfo/" + fd) as f:
                    for line in f:
                        if line.startswith("flags:"):
                            out.append(int(line.split()[1], 8))
        except OSError:
            pass
    return out


def test_media_direct_option():
    d = tmpdir()
    img = os.path.join(d, "direct.csd")
    db = os.path.join(d, "m.db")
    con = connect(db)
    con.execute("CREATE TABLE n(a INTEGER, b REAL, c TEXT)")
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b REAL, c TEXT, device='%s', "
                "media='direct', rowgroup=4096)" % img)
    rows = [(i, i * 0.25, "s%d" % (i % 97)) for i in range(30000)]
    con.execute("BEGIN")
    con.executemany("INSERT INTO n VALUES(?,?,?)", rows)
    con.executemany("INSERT INTO t VALUES(?,?,?)", rows)
    con.execute("COMMIT")
    con.execute("DELETE FROM t WHERE a % 5 = 0")
    con.execute("DELETE FROM n WHERE a % 5 = 0")
    qs = ["SELECT count(*), sum(a), total(b) FROM TBL WHERE a > 1000 AND c < 's5'",
          "SELECT c, count(*), max(b) FROM TBL GROUP BY c ORDER BY c"]
    for q in qs:
        assert con.execute(q.replace("TBL", "t")).fetchall() == con.execute(q.replace("TBL", "n")).fetchall(), q
    # O_DIRECT where the file system takes it (the device falls back to the
    # page cache where it does not)
    try:
        fd = os.open(os.path.join(d, "probe"), os.O_RDWR | os.O_CREAT | os.O_DIRECT)
        os.close(fd)
        direct = True
    except OSError:
        direct = False
    flags = _image_fd_flags(img)
    assert flags, "the image is not open"
    if direct:
        assert any(f & os.O_DIRECT for f in flags), [oct(f) for f in flags]
    # one device, one way of reading it per connection
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE u USING csq(a, device='%s', media='buffered')"
                                     % img), "already open with media='direct'")
    con.execute("CREATE VIRTUAL TABLE u USING csq(a, device='%s')" % img)  # not given: fine
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE v USING csq(a, media='fast')"),
                 "media='fast' must be buffered or direct")
    con.close()
    # reopened: the option is part of the table's declaration
    con = connect(db)
    for q in qs:
        assert con.execute(q.replace("TBL", "t")).fetchall() == con.execute(q.replace("TBL", "n")).fetchall(), q
    if direct:
        assert any(f & os.O_DIRECT for f in _image_fd_flags(img))
    con.close()
