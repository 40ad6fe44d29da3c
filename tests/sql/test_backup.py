"""tests/sql/test_backup.py - csq_backup(DEST [, DIR]) and the csq shell's
.dump: a backup holds the rows of csq tables (not only the database file),
is one committed state while writers go on, opens in the stock sqlite3
shell, covers striped and device= tables, refuses what it cannot do with a
message; a database copied without its image says so; .dump round-trips
every value through build/csq and sqlite3."""
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time

from harness import EXT, Skip, connect, expect_error, same_rows, tmpdir

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("CSQ_BUILD", os.path.join(HERE, "..", "..", "build"))
SHELL = os.path.join(BUILD, "csq")


def rows(con, sql, args=()):
    return con.execute(sql, args).fetchall()


def fill(con, n=1000, rowgroup=100):
    """A csq table over several row groups, with deletes and updates, and a
    native table beside it."""
    con.execute("CREATE VIRTUAL TABLE t USING csq(id INTEGER PRIMARY KEY, a INTEGER, b REAL, "
                "c TEXT, rowgroup=%d)" % rowgroup)
    con.execute("CREATE TABLE n(k INTEGER PRIMARY KEY, v TEXT)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t(a, b, c) VALUES(?, ?, ?)",
                    [(i, i * 0.25, "r%d" % (i % 17)) for i in range(n)])
    con.executemany("INSERT INTO n(v) VALUES(?)", [("n%d" % i,) for i in range(50)])
    con.execute("COMMIT")
    con.execute("DELETE FROM t WHERE a % 7 = 0")
    con.execute("UPDATE t SET c = 'upd' WHERE a % 11 = 0")


ALL_T = "SELECT id, a, b, c FROM t ORDER BY id"


def sqlite3_cli():
    exe = shutil.which("sqlite3")
    if not exe:
        raise Skip("no sqlite3 shell on PATH")
    return exe


def test_backup_copies_database_and_default_image():
    d = tmpdir()
    src = os.path.join(d, "src.db")
    con = connect(src)
    fill(con)
    want_t, want_n = rows(con, ALL_T), rows(con, "SELECT * FROM n")
    assert len(want_t) > 800
    dst = os.path.join(d, "copy.db")
    assert con.execute("SELECT csq_backup(?)", (dst,)).fetchone() == (1,)
    assert os.path.getsize(dst) > 0 and os.path.getsize(dst + "-csd") > 0
    # the source goes on; the copy keeps the state of the backup
    con.execute("DELETE FROM t WHERE a < 500")
    con.execute("INSERT INTO n(v) VALUES('later')")
    c2 = connect(dst)
    same_rows(rows(c2, ALL_T), want_t, "copy t")
    same_rows(rows(c2, "SELECT * FROM n"), want_n, "copy n")
    assert rows(c2, "SELECT count(*), sum(a), sum(b) FROM t WHERE a > 100") == \
        [(sum(1 for r in want_t if r[1] > 100), sum(r[1] for r in want_t if r[1] > 100),
          sum(r[2] for r in want_t if r[1] > 100))]
    # the copy is a database of its own: its writes do not reach the source
    c2.execute("INSERT INTO t(a) VALUES(-1)")
    assert rows(c2, "SELECT count(*) FROM t WHERE a = -1") == [(1,)]
    assert rows(con, "SELECT count(*) FROM t WHERE a = -1") == [(0,)]
    # a database without csq tables: no image to copy
    plain = os.path.join(d, "plain.db")
    p = connect(plain)
    p.execute("CREATE TABLE x(a)")
    p.execute("INSERT INTO x VALUES(42)")
    assert p.execute("SELECT csq_backup(?)", (plain + ".bak",)).fetchone() == (0,)
    assert not os.path.exists(plain + ".bak-csd")
    assert rows(sqlite3.connect(plain + ".bak"), "SELECT a FROM x") == [(42,)]


def test_copy_opens_in_stock_sqlite3_shell():
    exe = sqlite3_cli()
    d = tmpdir()
    src = os.path.join(d, "s.db")
    con = connect(src)
    fill(con, 3000, 500)
    dst = os.path.join(d, "c.db")
    con.execute("SELECT csq_backup(?)", (dst,))
    want = con.execute("SELECT count(*), sum(a), total(b), count(DISTINCT c) FROM t").fetchone()
    con.close()
    os.unlink(src + "-csd")  # the copy must not lean on the source's image
    out = subprocess.run([exe, dst], input=".load %s\nSELECT count(*), sum(a), total(b), "
                         "count(DISTINCT c) FROM t;\nSELECT count(*) FROM n;\n" % EXT[:-3],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    got = lines[0].split("|")
    assert (int(got[0]), int(got[1]), float(got[2]), int(got[3])) == want, (got, want)
    assert lines[1] == "50"


def test_in_memory_database_backs_up_to_files():
    d = tmpdir()
    con = connect(":memory:")
    fill(con, 700, 128)
    want = rows(con, ALL_T)
    dst = os.path.join(d, "mem.db")
    assert con.execute("SELECT csq_backup(?)", (dst,)).fetchone() == (1,)
    c2 = connect(dst)
    same_rows(rows(c2, ALL_T), want, "copy of :memory:")
    assert rows(c2, "SELECT count(*) FROM n") == [(50,)]


def test_uncommitted_rows_are_not_in_a_backup():
    d = tmpdir()
    src = os.path.join(d, "s.db")
    con = connect(src)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER)")
    con.execute("INSERT INTO t VALUES(1), (2)")
    other = connect(src, check_same_thread=False)
    other.execute("BEGIN")
    other.executemany("INSERT INTO t VALUES(?)", [(i,) for i in range(100, 20100)])
    # the writer commits 0.5 s later: the backup waits for the device, then
    # copies the state after that commit, never a part of it
    timer = threading.Timer(0.5, lambda: other.execute("COMMIT"))
    timer.start()
    t0 = time.time()
    dst1 = os.path.join(d, "c1.db")
    con.execute("SELECT csq_backup(?)", (dst1,))
    timer.join()
    assert time.time() - t0 >= 0.4, "the backup did not wait for the writer"
    assert rows(connect(dst1), "SELECT count(*) FROM t") == [(20002,)]
    # a writer that keeps the device past the wait: a busy error, no files left
    other.execute("BEGIN")
    other.execute("INSERT INTO t VALUES(-5)")
    dst2 = os.path.join(d, "c2.db")
    expect_error(lambda: con.execute("SELECT csq_backup(?)", (dst2,)).fetchall(),
                 "locked", "try again")
    assert not os.path.exists(dst2) and not os.path.exists(dst2 + "-csd")
    other.execute("ROLLBACK")
    # this connection's own uncommitted writes: refused, not left out silently
    con.execute("BEGIN")
    con.execute("INSERT INTO t VALUES(7)")
    expect_error(lambda: con.execute("SELECT csq_backup(?)", (dst2,)).fetchall(),
                 "uncommitted", "COMMIT")
    con.execute("ROLLBACK")
    assert con.execute("SELECT csq_backup(?)", (dst2,)).fetchone() == (1,)
    assert rows(connect(dst2), "SELECT count(*) FROM t") == [(20002,)]


WRITER = r"""
import os, sqlite3, sys, time
sys.path.insert(0, %(here)r)
from harness import connect
con = connect("src.db", timeout=30)
B = %(batch)d
batch, deadline = 0, time.time() + %(secs)f
while time.time() < deadline:
    vals = [batch * 1000 + i for i in range(B)]
    try:
        con.execute("BEGIN")
        con.executemany("INSERT INTO t(batch, v) VALUES(?, ?)", [(batch, v) for v in vals])
        con.executemany("INSERT INTO s(batch, v) VALUES(?, ?)", [(batch, v) for v in vals])
        con.execute("INSERT INTO u(batch, total) VALUES(?, ?)", (batch, sum(vals)))
        con.execute("INSERT INTO n(batch, total) VALUES(?, ?)", (batch, sum(vals)))
        con.execute("COMMIT")
        batch += 1
    except sqlite3.Error as e:
        try:
            con.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        time.sleep(0.01)
print(batch)
"""


def check_copy(dst_dir, batch):
    """The copy in dst_dir (c.db, its images) holds whole batches, the same
    ones in every csq table, whichever device holds them. The number of
    batches it holds."""
    cwd = os.getcwd()
    os.chdir(dst_dir)  # the striped table names its members relative to the directory
    try:
        c = connect("c.db")
        t = rows(c, "SELECT batch, count(*), sum(v) FROM t GROUP BY batch ORDER BY batch")
        s = rows(c, "SELECT batch, count(*), sum(v) FROM s GROUP BY batch ORDER BY batch")
        u = rows(c, "SELECT batch, 0 + ?, total FROM u ORDER BY batch", (batch,))
        n = rows(c, "SELECT batch, 0 + ?, total FROM n ORDER BY batch", (batch,))
        c.close()
    finally:
        os.chdir(cwd)
    nb = len(t)
    assert [r[0] for r in t] == list(range(nb)), "batches missing in t: %r" % [r[0] for r in t]
    for b, cnt, tot in t:
        assert cnt == batch and tot == sum(b * 1000 + i for i in range(batch)), (b, cnt, tot)
    same_rows(s, t, "striped s against t")
    same_rows(u, t, "u (one row per batch) against t")
    # a native table written in the same transactions: the device commits
    # before the database file, so the copy may lack the batch whose commit
    # was between the two, as any reader at that moment would
    assert n == t or n == t[:-1], "native n: %r, t: %r" % ([r[0] for r in n], [r[0] for r in t])
    return nb


def test_backup_while_another_process_writes():
    d = tmpdir()
    src = os.path.join(d, "src")
    os.mkdir(src)
    cwd = os.getcwd()
    os.chdir(src)
    try:
        con = connect("src.db")
        con.execute("CREATE VIRTUAL TABLE t USING csq(batch INTEGER, v INTEGER, rowgroup=64)")
        con.execute("CREATE VIRTUAL TABLE s USING csq(batch INTEGER, v INTEGER, rowgroup=64, "
                    "devices='a.csd,b.csd')")
        con.execute("CREATE VIRTUAL TABLE u USING csq(batch INTEGER, total INTEGER)")
        con.execute("CREATE TABLE n(batch INTEGER, total INTEGER)")
        B = 150
        writer = subprocess.Popen([sys.executable, "-c", WRITER % {"here": HERE, "batch": B,
                                                                  "secs": 6.0}],
                                  cwd=src, stdout=subprocess.PIPE, text=True)
        seen, busy = [], 0
        try:
            while rows(con, "SELECT count(*) FROM u")[0][0] < 2:
                time.sleep(0.05)
            for k in range(6):
                dst = os.path.join(d, "b%d" % k)
                os.mkdir(dst)
                try:
                    n = con.execute("SELECT csq_backup(?, ?)",
                                    (os.path.join(dst, "c.db"), dst)).fetchone()[0]
                except sqlite3.OperationalError as e:
                    assert "try again" in str(e), e
                    busy += 1
                    continue
                assert n == 3, n  # the default image, a.csd, b.csd
                seen.append(dst)
                time.sleep(0.4)
        finally:
            out, _ = writer.communicate(timeout=120)
        con.close()
    finally:
        os.chdir(cwd)
    total = int(out.strip())
    assert len(seen) >= 4, "only %d of 6 backups succeeded (%d busy)" % (len(seen), busy)
    counts = [check_copy(dst, B) for dst in seen]
    assert counts[0] >= 2 and counts == sorted(counts), counts
    assert counts[-1] > counts[0], "the writer made no progress during the backups: %r" % counts
    assert counts[-1] <= total


def test_striped_and_device_tables_need_a_directory():
    d = tmpdir()
    imgs = os.path.join(d, "images")
    os.mkdir(imgs)
    a, b, e = (os.path.join(imgs, x) for x in ("a.csd", "b.csd", "e.csd"))
    src = os.path.join(d, "s.db")
    con = connect(src)
    con.execute("CREATE VIRTUAL TABLE plain USING csq(x INTEGER)")
    con.execute("CREATE VIRTUAL TABLE st USING csq(x INTEGER, rowgroup=50, devices='%s,%s')" % (a, b))
    con.execute("CREATE VIRTUAL TABLE ex USING csq(x INTEGER, device='%s')" % e)
    con.execute("INSERT INTO plain VALUES(1), (2)")
    con.executemany("INSERT INTO st VALUES(?)", [(i,) for i in range(400)])
    con.execute("INSERT INTO ex VALUES(10), (20), (30)")
    out = os.path.join(d, "out")
    os.mkdir(out)
    dst = os.path.join(out, "c.db")
    # without a directory: refused, naming a table and what to pass
    msg = expect_error(lambda: con.execute("SELECT csq_backup(?)", (dst,)).fetchall(),
                       "csq_backup", "DIR")
    assert "table st" in msg or "table ex" in msg, msg
    assert not os.path.exists(dst), "a refused backup left the database copy behind"
    assert con.execute("SELECT csq_backup(?, ?)", (dst, out)).fetchone() == (4,)
    for f in ("c.db", "c.db-csd", "a.csd", "b.csd", "e.csd"):
        assert os.path.getsize(os.path.join(out, f)) > 0, f
    want = [rows(con, "SELECT count(*), sum(x) FROM " + t) for t in ("plain", "st", "ex")]
    # the source moves on; then its images are lost and restored from the backup
    con.execute("DELETE FROM st WHERE x < 100")
    con.execute("INSERT INTO ex VALUES(99)")
    con.close()
    for f in ("a.csd", "b.csd", "e.csd"):
        shutil.copyfile(os.path.join(out, f), os.path.join(imgs, f))
    c2 = connect(dst)
    got = [rows(c2, "SELECT count(*), sum(x) FROM " + t) for t in ("plain", "st", "ex")]
    assert got == want, (got, want)
    # two images with one file name cannot share the directory
    other = os.path.join(d, "other")
    os.mkdir(other)
    c3 = connect(os.path.join(d, "s3.db"))
    c3.execute("CREATE VIRTUAL TABLE p USING csq(x, device='%s')" % os.path.join(imgs, "x.csd"))
    c3.execute("CREATE VIRTUAL TABLE q USING csq(x, device='%s')" % os.path.join(other, "x.csd"))
    out3 = os.path.join(d, "out3")
    os.mkdir(out3)
    expect_error(lambda: c3.execute("SELECT csq_backup(?, ?)", (os.path.join(out3, "c.db"), out3)
                                    ).fetchall(), "x.csd", "distinct file names")
    assert os.listdir(out3) == [], os.listdir(out3)
    # an image whose file name is the copy's own: refused, nothing left
    c3.execute("DROP TABLE q")
    expect_error(lambda: c3.execute("SELECT csq_backup(?, ?)", (os.path.join(out3, "x.csd"), out3)
                                    ).fetchall(), "cannot create", "x.csd")
    assert os.listdir(out3) == [], os.listdir(out3)


def test_relative_device_paths_restore_by_running_from_the_directory():
    d = tmpdir()
    src, out = os.path.join(d, "src"), os.path.join(d, "out")
    os.mkdir(src)
    os.mkdir(out)
    code = ("import sys; sys.path.insert(0, %r); from harness import connect\n"
            "con = connect('s.db')\n"
            "con.execute(\"CREATE VIRTUAL TABLE st USING csq(x INTEGER, rowgroup=16, "
            "devices='m1.csd,m2.csd')\")\n"
            "con.executemany('INSERT INTO st VALUES(?)', [(i,) for i in range(95)])\n"
            "print(con.execute('SELECT csq_backup(?, ?)', (%r, %r)).fetchone()[0])\n"
            % (HERE, os.path.join(out, "c.db"), out))
    r = subprocess.run([sys.executable, "-c", code], cwd=src, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "2", (r.stdout, r.stderr)
    check = ("import sys; sys.path.insert(0, %r); from harness import connect\n"
             "print(connect('c.db').execute('SELECT count(*), sum(x) FROM st').fetchone())\n" % HERE)
    r = subprocess.run([sys.executable, "-c", check], cwd=out, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "(95, %d)" % sum(range(95)), (r.stdout,
                                                                                   r.stderr)


def test_missing_image_says_what_happened():
    d = tmpdir()
    src = os.path.join(d, "s.db")
    con = connect(src)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a)")
    con.execute("INSERT INTO t VALUES(1)")
    con.close()
    lone = os.path.join(d, "lone.db")
    shutil.copyfile(src, lone)  # what .backup or cp does: the file, not its image
    c = connect(lone)
    msg = expect_error(lambda: c.execute("SELECT * FROM t").fetchall(),
                       lone + "-csd", "does not exist", "copied without its image",
                       "csq_backup")
    assert "bCreate" not in msg, msg
    assert not os.path.exists(lone + "-csd")
    # the stock shell's .backup leads to the same message
    exe = shutil.which("sqlite3")
    if exe:
        bak = os.path.join(d, "shell.db")
        r = subprocess.run([exe, src], input=".load %s\n.backup %s\n" % (EXT[:-3], bak),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        r = subprocess.run([exe, bak], input=".load %s\nSELECT * FROM t;\n" % EXT[:-3],
                           capture_output=True, text=True, timeout=60)
        assert "csq_backup" in r.stderr and "bCreate" not in r.stderr, r.stderr
    # a striped table's missing member: named, with the same advice
    sdb = os.path.join(d, "st.db")
    c = connect(sdb)
    m1, m2 = os.path.join(d, "m1.csd"), os.path.join(d, "m2.csd")
    c.execute("CREATE VIRTUAL TABLE st USING csq(a, devices='%s,%s')" % (m1, m2))
    c.close()
    os.unlink(m2)
    c = connect(sdb)
    msg = expect_error(lambda: c.execute("SELECT * FROM st").fetchall(),
                       "member 2 of 2", m2, "does not exist", "csq_backup")
    assert "bCreate" not in msg, msg


def test_errors():
    d = tmpdir()
    src = os.path.join(d, "s.db")
    con = connect(src)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a)")
    con.execute("INSERT INTO t VALUES(1)")
    expect_error(lambda: con.execute("SELECT csq_backup()").fetchall(), "wrong number of arguments")
    expect_error(lambda: con.execute("SELECT csq_backup('a', 'b', 'c')").fetchall(),
                 "wrong number of arguments")
    for bad in (None, "", ":memory:", 42):
        expect_error(lambda: con.execute("SELECT csq_backup(?)", (bad,)).fetchall(),
                     "csq_backup", "first argument")
    expect_error(lambda: con.execute("SELECT csq_backup(?, '')", (os.path.join(d, "x.db"),))
                 .fetchall(), "second argument", "directory")
    # a directory that does not exist
    nodir = os.path.join(d, "no", "such", "c.db")
    expect_error(lambda: con.execute("SELECT csq_backup(?)", (nodir,)).fetchall(),
                 "cannot create", nodir)
    # DIR that is not a directory (and nothing left behind)
    dst = os.path.join(d, "c.db")
    expect_error(lambda: con.execute("SELECT csq_backup(?, ?)", (dst, src)).fetchall(),
                 "not a directory")
    assert not os.path.exists(dst) and not os.path.exists(dst + "-csd")
    # never over an existing file: not the source, not an old backup, not its image
    expect_error(lambda: con.execute("SELECT csq_backup(?)", (src,)).fetchall(), "already exists")
    assert rows(con, "SELECT a FROM t") == [(1,)]
    with open(dst + "-csd", "wb") as f:
        f.write(b"keep me")
    expect_error(lambda: con.execute("SELECT csq_backup(?)", (dst,)).fetchall(),
                 "already exists", dst + "-csd")
    assert open(dst + "-csd", "rb").read() == b"keep me"
    assert not os.path.exists(dst), "a refused backup created the database copy"
    os.unlink(dst + "-csd")
    # an empty file is taken (as VACUUM INTO does)
    open(dst, "wb").close()
    assert con.execute("SELECT csq_backup(?)", (dst,)).fetchone() == (1,)
    assert rows(connect(dst), "SELECT a FROM t") == [(1,)]
    # a table whose image is gone: the backup fails naming it, and writes nothing
    other = os.path.join(d, "o.db")
    c = connect(other)
    c.execute("CREATE VIRTUAL TABLE gone USING csq(a, device='%s')" % os.path.join(d, "g.csd"))
    c.close()
    os.unlink(os.path.join(d, "g.csd"))
    c = connect(other)
    out = os.path.join(d, "out")
    os.mkdir(out)
    expect_error(lambda: c.execute("SELECT csq_backup(?, ?)", (os.path.join(out, "c.db"), out))
                 .fetchall(), "table gone", "does not exist")
    assert os.listdir(out) == []


# ---- .dump in the csq shell ----

VALUES = [
    (1, None, None, None),
    (2, 0, 0.1, "it's"),
    (3, -9223372036854775808, 1e308, "two\nlines\r\nand a 'quote' and \"dq\""),
    (4, 9223372036854775807, -1e308, ""),
    (5, 7, 5e-324, "unicode \u00e9\u4e2d\U0001F600"),
    (6, 8, 1.0 / 3, "a\x00b"),
    (7, 9, 2.0, "-- not a comment; .dump not a command"),
    (8, 10, 1.7976931348623157e308, "x"),
    (9, 11, float("inf"), "y"),
    (10, 12, float("-inf"), "z"),
    (11, 13, 123456789.123456789, "w"),
]
BLOBS = [None, b"", b"\x00", b"\x00\xff'\n", bytes(range(256))]


def make_dump_source(path):
    con = connect(path)
    for name, mod in (("t", "USING csq"), ("n", None)):
        cols = "id INTEGER PRIMARY KEY, i INTEGER, r REAL, s TEXT, b BLOB, any"
        if mod:
            con.execute("CREATE VIRTUAL TABLE %s %s(%s, rowgroup=16)" % (name, mod, cols))
        else:
            con.execute("CREATE TABLE %s(%s)" % (name, cols))
        for k, (rid, i, r, s) in enumerate(VALUES):
            any_ = [None, 1, 2.5, "t", b"\x01"][k % 5]
            con.execute("INSERT INTO %s VALUES(?, ?, ?, ?, ?, ?)" % name,
                        (rid, i, r, s, BLOBS[k % len(BLOBS)], any_))
    con.execute("CREATE VIRTUAL TABLE nopk USING csq(a TEXT, b)")
    con.executemany("INSERT INTO nopk VALUES(?, ?)", [("r%d" % i, i * 1.5) for i in range(30)])
    con.execute("CREATE INDEX n_i ON n(i)")
    con.execute("CREATE VIEW v AS SELECT t.id, n.s FROM t JOIN n USING(id)")
    # another module's virtual table: written as the sqlite3 shell writes it
    con.execute("CREATE VIRTUAL TABLE ft USING fts5(body)")
    con.execute("INSERT INTO ft VALUES('hello csq world'), ('goodbye')")
    con.close()


TABLE_Q = ["SELECT id, i, typeof(i), r, typeof(r), s, typeof(s), b, typeof(b), any, typeof(any) "
           "FROM {t} ORDER BY id", "SELECT a, b FROM nopk ORDER BY a"]


def table_rows(con, t):
    return rows(con, TABLE_Q[0].format(t=t))


def assert_same_data(src, dst):
    a, b = connect(src), connect(dst)
    for t in ("t", "n"):
        x, y = table_rows(a, t), table_rows(b, t)
        same_rows(y, x, "table %s" % t)
        for rx, ry in zip(x, y):  # floats bit for bit (same_rows compares with ==)
            if isinstance(rx[3], float):
                assert math.copysign(1, rx[3]) == math.copysign(1, ry[3]) or rx[3] == 0, (rx, ry)
                assert rx[3].hex() == ry[3].hex(), (rx[3], ry[3])
    same_rows(rows(b, TABLE_Q[1]), rows(a, TABLE_Q[1]), "nopk")
    same_rows(rows(b, "SELECT * FROM v ORDER BY id"), rows(a, "SELECT * FROM v ORDER BY id"), "view")
    assert rows(b, "SELECT name FROM sqlite_schema WHERE type = 'index'") == [("n_i",)]
    assert rows(b, "SELECT body FROM ft WHERE ft MATCH 'csq'") == [("hello csq world",)]


def run_shell(db, sql=None, stdin=None):
    if not os.path.exists(SHELL):
        raise Skip("no %s (make all)" % SHELL)
    args = [SHELL, db] + ([sql] if sql is not None else [])
    return subprocess.run(args, input=stdin, capture_output=True, timeout=120)


def test_dump_round_trips_through_the_csq_shell():
    d = tmpdir()
    src = os.path.join(d, "s.db")
    make_dump_source(src)
    r = run_shell(src, ".dump")
    assert r.returncode == 0, r.stderr
    dump = r.stdout
    text = dump.decode()
    assert text.startswith("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n")
    assert text.rstrip().endswith("COMMIT;")
    # rows of the csq tables, not only their schema
    assert text.count('INSERT INTO "t" VALUES(') == len(VALUES)
    assert text.count('INSERT INTO "nopk" VALUES(') == 30
    assert "CREATE VIRTUAL TABLE t USING csq(" in text
    # loaded by the csq shell into a new database: the same values, types and bits
    dst = os.path.join(d, "c.db")
    r = run_shell(dst, stdin=dump)
    assert r.returncode == 0, r.stderr
    assert os.path.getsize(dst + "-csd") > 0
    assert_same_data(src, dst)
    # .dump PATTERN: only that table
    r = run_shell(src, ".dump nopk")
    part = r.stdout.decode()
    assert "CREATE VIRTUAL TABLE nopk" in part and 'INSERT INTO "t"' not in part, part[:300]
    # an unknown dot command is an error that says what the shell knows
    r = run_shell(src, ".tables")
    assert r.returncode != 0 and b".dump" in r.stderr, r.stderr


def test_dump_loads_into_the_stock_sqlite3_shell():
    exe = sqlite3_cli()
    d = tmpdir()
    src = os.path.join(d, "s.db")
    make_dump_source(src)
    r = run_shell(src, ".dump")
    assert r.returncode == 0, r.stderr
    dst = os.path.join(d, "c.db")
    r = subprocess.run([exe, "-bail", dst], input=b".load " + EXT[:-3].encode() + b"\n" + r.stdout,
                       capture_output=True, timeout=120)
    assert r.returncode == 0 and not r.stderr, r.stderr
    assert_same_data(src, dst)


def test_dump_through_stdin_with_statements_around_it():
    d = tmpdir()
    src = os.path.join(d, "s.db")
    r = run_shell(src, stdin=b"CREATE VIRTUAL TABLE t USING csq(a TEXT);\n"
                  b"INSERT INTO t VALUES('x'), ('y''z');\n"
                  b"-- a comment before the command\n  .dump\nSELECT count(*) FROM t;\n.quit\n"
                  b"SELECT 'not reached';\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "INSERT INTO \"t\" VALUES('y''z');" in out, out
    assert out.endswith("COMMIT;\n2\n"), out
    assert "not reached" not in out
