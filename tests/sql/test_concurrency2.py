"""Several processes on one table, read-only use, and long names.

Processes: four processes insert into and read one table for a few seconds,
each with SQLite's busy timeout (5 s), under modest contention (short pauses
between operations, new connections opened now and then), while a fifth
connects the table over and over, some of its superblock reads answered late
(fault injection) so that other processes commit between its read of the
superblocks and its read of the catalog they name. Each writer counts what
it committed; at the end the table holds exactly that (rows, sum of values,
rows per process). No process may see an error: not a torn catalog
("checksum mismatch") while another process commits, not SQLITE_BUSY
within its busy timeout.

Commit order: a commit that cannot have SQLite's lock on the database file
(readers still at work past the busy timeout) fails with nothing committed,
and an explicit COMMIT stays open to be retried. The device's write lock is
waited for up to the connection's busy timeout, not a fixed time.

Read-only: a database opened read-only (mode=ro, immutable=1) and an image
the process may not write (as root: checked in a process run as nobody with
setpriv; SKIP where that is impossible) can be queried; INSERT, UPDATE,
DELETE, DROP, CREATE and RENAME fail with SQLITE_READONLY and change
nothing (the image's bytes stay the same).

Names: a name the catalog cannot hold (a table's more than 65523 bytes,
65535 less room for the prefix a table dropped inside a transaction wears
until COMMIT; a striped table's more than 1001; a column's more than 65535)
is refused at CREATE and RENAME with a short
message; a name at the limit works and survives reopening, and the errors
that name it stay short.

Run as a program (`test_concurrency2.py worker DB SECONDS ID`,
`connector DB SECONDS` or `readonly DB`) it is the other process.
"""
import hashlib
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import Skip, connect, expect_error, tmpdir, EXT  # noqa: E402

N_PROC = 4
SECONDS = 3.0
BUSY_MS = 5000


def worker(db, secs, me):
    """One process: inserts (three ways) and reads, with short pauses;
    prints 'rows sum errors' and then each error on its own line."""
    rnd = random.Random(1000 + me)
    con = connect(db, timeout=BUSY_MS / 1000.0)
    n = s = 0
    errors = []
    stop_at = time.monotonic() + secs
    while time.monotonic() < stop_at:
        op = rnd.random()
        try:
            if op < 0.30:
                rows = [(me, rnd.randrange(1000)) for _ in range(rnd.randrange(1, 40))]
                con.execute("BEGIN")
                con.executemany("INSERT INTO t(k, v) VALUES(?, ?)", rows)
                con.execute("COMMIT")
                n += len(rows)
                s += sum(v for _, v in rows)
            elif op < 0.45:
                v = rnd.randrange(1000)
                con.execute("INSERT INTO t(k, v) VALUES(?, ?)", (me, v))
                n += 1
                s += v
            elif op < 0.55:
                # read, then write on what was read: BEGIN IMMEDIATE, as with a native table
                con.execute("BEGIN IMMEDIATE")
                mine = con.execute("SELECT count(*) FROM t WHERE k = ?", (me,)).fetchone()[0]
                con.execute("INSERT INTO t(k, v) VALUES(?, ?)", (me, mine % 1000))
                con.execute("COMMIT")
                n += 1
                s += mine % 1000
            elif op < 0.65:
                # a fresh connection: the table is connected (its catalog read)
                # while the others commit
                c2 = connect(db, timeout=BUSY_MS / 1000.0)
                got = c2.execute("SELECT count(*) FROM t WHERE k = ?", (me,)).fetchone()[0]
                c2.close()
                assert got == n, "fresh connection sees %d of my rows, I committed %d" % (got, n)
            else:
                got = con.execute("SELECT count(*), total(v) FROM t WHERE k = ?", (me,)).fetchone()
                assert got == (n, float(s)), "I see %r of my rows, I committed %r" % (got, (n, s))
                con.execute("SELECT count(*), sum(v), max(k) FROM t").fetchone()
        except sqlite3.Error as e:
            errors.append("%s: %s" % (type(e).__name__, e))
            if con.in_transaction:
                con.execute("ROLLBACK")
        except AssertionError as e:
            errors.append("AssertionError: %s" % e)
        time.sleep(rnd.random() * 0.004)  # modest contention
    con.close()
    print("%d %d %d" % (n, s, len(errors)))
    for e in errors[:20]:
        print(e)


def connector(db, secs):
    """One more process: connects the table again and again (each new
    connection reads the image's superblocks, then the catalog they name,
    with no lock). Its device answers some superblock reads 10 ms late, the
    data read on time: a window in which the writers commit twice, writing
    over that catalog. Prints 'connections errors' and each error."""
    keep = connect(db)  # holds the device, and so its fault rule
    keep.execute("SELECT csq_fault('op=nvm_read,lba=0,prob=0.3,seed=5,action=delay:10', ?)",
                 (db + "-csd",))
    n = 0
    errors = []
    stop_at = time.monotonic() + secs
    while time.monotonic() < stop_at:
        try:
            c = connect(db, timeout=BUSY_MS / 1000.0)
            c.execute("SELECT count(*), sum(v) FROM t").fetchone()
            c.close()
            n += 1
        except sqlite3.Error as e:
            errors.append("%s: %s" % (type(e).__name__, e))
    keep.close()
    print("%d %d" % (n, len(errors)))
    for e in errors[:20]:
        print(e)


def test_processes_insert_and_read():
    d = tmpdir()
    db = os.path.join(d, "p.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(k INTEGER, v INTEGER, rowgroup=500)")
    con.close()
    env = dict(os.environ, CSQ_EXT=EXT)
    me = os.path.abspath(__file__)
    procs = [subprocess.Popen([sys.executable, me, "worker", db, str(SECONDS), str(k)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(N_PROC)]
    conn = subprocess.Popen([sys.executable, me, "connector", db, str(SECONDS)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    total_n = total_s = 0
    per = {}
    errors = []
    for k, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=SECONDS + 60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            raise AssertionError("process %d hung (deadlock?): %s" % (k, err[-2000:]))
        assert p.returncode == 0, "process %d exited %d: %s%s" % (k, p.returncode, out[-2000:],
                                                                 err[-2000:])
        lines = out.strip().split("\n")
        n, s, nerr = map(int, lines[0].split())
        errors += ["process %d: %s" % (k, e) for e in lines[1:]]
        if nerr > len(lines) - 1:
            errors.append("process %d: %d more errors" % (k, nerr - (len(lines) - 1)))
        per[k] = n
        total_n += n
        total_s += s
    out, err = conn.communicate(timeout=60)
    assert conn.returncode == 0, "connector exited %d: %s%s" % (conn.returncode, out, err[-2000:])
    lines = out.strip().split("\n")
    n_conn = int(lines[0].split()[0])
    errors += ["connector: %s" % e for e in lines[1:]]
    assert not errors, "\n".join(errors)
    assert n_conn > 10, "the connector connected only %d times" % n_conn
    assert min(per.values()) > 0, "a process committed nothing: %r" % per
    con = connect(db)
    got = con.execute("SELECT count(*), total(v) FROM t").fetchone()
    assert got == (total_n, float(total_s)), "table holds %r, processes committed %r" % (
        got, (total_n, total_s))
    got_per = dict(con.execute("SELECT k, count(*) FROM t GROUP BY k").fetchall())
    assert got_per == per, "rows per process %r, committed %r" % (got_per, per)
    con.close()
    print("    %d processes committed %d rows (%r); %d connections meanwhile" % (
        N_PROC, total_n, per, n_conn))


def test_commit_waits_for_readers():
    """SQLite ends a write transaction with an EXCLUSIVE lock on the
    database file, waiting for its readers; csq takes it before committing
    the device, so a commit that times out there has committed nothing."""
    d = tmpdir()
    db = os.path.join(d, "w.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER)")
    con.executemany("INSERT INTO t VALUES(?)", [(i,) for i in range(3000)])
    con.close()
    r = connect(db)
    cur = r.execute("SELECT a FROM t")
    cur.fetchmany(5)  # a statement in progress: its connection reads the database
    w = connect(db, timeout=0.3)
    t0 = time.monotonic()
    msg = expect_error(lambda: w.execute("INSERT INTO t VALUES(-1)"), "locked", "nothing was committed")
    waited = time.monotonic() - t0
    assert 0.2 < waited < 3.0, "waited %.2f s for the readers, busy timeout 0.3 s" % waited
    assert "database is locked" not in msg or "csq" in msg, msg
    w.execute("BEGIN")
    w.execute("INSERT INTO t VALUES(-2)")
    expect_error(lambda: w.execute("COMMIT"), "locked")
    assert w.in_transaction, "a COMMIT that failed busy must leave the transaction open"
    cur.fetchall()  # the reader finishes
    w.execute("COMMIT")  # and the retried COMMIT goes through
    rows = sorted(x for (x,) in r.execute("SELECT a FROM t WHERE a < 0"))
    assert rows == [-2], "rows of the failed INSERT and the retried COMMIT: %r" % rows
    r.close()
    w.close()


def test_device_lock_waits_busy_timeout():
    """Two databases share one device: the second writer waits for the
    device's write lock as long as its busy timeout says, no longer."""
    d = tmpdir()
    dev = os.path.join(d, "shared.csd")
    a = connect(os.path.join(d, "a.db"), check_same_thread=False)
    b = connect(os.path.join(d, "b.db"), timeout=0.3)
    a.execute("CREATE VIRTUAL TABLE ta USING csq(x INTEGER, device='%s')" % dev)
    b.execute("CREATE VIRTUAL TABLE tb USING csq(x INTEGER, device='%s')" % dev)
    a.execute("BEGIN")
    a.execute("INSERT INTO ta VALUES(1)")  # a holds the device's write lock until COMMIT
    t0 = time.monotonic()
    expect_error(lambda: b.execute("INSERT INTO tb VALUES(1)"), "locked")
    waited = time.monotonic() - t0
    assert 0.2 < waited < 3.0, "waited %.2f s for the device, busy timeout 0.3 s" % waited
    b.execute("PRAGMA busy_timeout = 0")
    t0 = time.monotonic()
    expect_error(lambda: b.execute("INSERT INTO tb VALUES(2)"), "locked")
    assert time.monotonic() - t0 < 0.2, "busy timeout 0 still waited"
    b.execute("PRAGMA busy_timeout = 5000")
    # a commits from another thread while b waits: b then goes through
    timer = threading.Timer(0.4, lambda: a.execute("COMMIT"))
    timer.start()
    b.execute("INSERT INTO tb VALUES(3)")
    timer.join()
    assert a.execute("SELECT count(*) FROM ta").fetchone()[0] == 1
    assert b.execute("SELECT x FROM tb").fetchall() == [(3,)]
    a.close()
    b.close()


# ---- read-only ----

WRITES = [
    "INSERT INTO t VALUES(100, 'x')",
    "UPDATE t SET b = 'y'",
    "DELETE FROM t",
    "DROP TABLE t",
    "CREATE VIRTUAL TABLE v USING csq(a INTEGER)",
    "ALTER TABLE t RENAME TO t2",
]


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def make_ro_db(d):
    db = os.path.join(d, "r.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT)")
    con.executemany("INSERT INTO t VALUES(?, ?)", [(i, "v%d" % i) for i in range(50)])
    con.close()
    return db


def check_read_only(db, uri=False):
    """Queries work; every write fails with SQLITE_READONLY; nothing changes.
    Returns a list of problems (empty when all is well)."""
    bad = []
    con = sqlite3.connect(db, isolation_level=None, uri=uri)
    con.enable_load_extension(True)
    con.load_extension(EXT)
    want = (50, 1225)
    got = con.execute("SELECT count(*), sum(a) FROM t").fetchone()
    if got != want:
        bad.append("read %r, want %r" % (got, want))
    for sql in WRITES:
        try:
            con.execute(sql)
            bad.append("%s: no error" % sql)
        except sqlite3.Error as e:
            code = getattr(e, "sqlite_errorcode", sqlite3.SQLITE_READONLY)
            if code != sqlite3.SQLITE_READONLY:
                bad.append("%s: error %d (%s), want SQLITE_READONLY" % (sql, code, e))
            elif "read" not in str(e).lower():
                bad.append("%s: message %r does not say read-only" % (sql, str(e)))
        if con.in_transaction:
            con.execute("ROLLBACK")
    got = con.execute("SELECT count(*), sum(a) FROM t").fetchone()
    if got != want:
        bad.append("after the writes: read %r, want %r" % (got, want))
    con.close()
    return bad


def test_read_only_database():
    d = tmpdir()
    db = make_ro_db(d)
    before = digest(db + "-csd"), digest(db)
    for uri in ("file:%s?mode=ro" % db, "file:%s?immutable=1" % db):
        bad = check_read_only(uri, uri=True)
        assert not bad, "%s:\n%s" % (uri, "\n".join(bad))
    assert (digest(db + "-csd"), digest(db)) == before, "a read-only connection changed the files"
    con = connect(db)
    assert con.execute("SELECT count(*), sum(a) FROM t").fetchone() == (50, 1225)
    con.close()


def test_read_only_image():
    """The database may be written, its image may not (file permissions):
    csq refuses every write to the table, naming it."""
    d = tmpdir()
    db = make_ro_db(d)
    before = digest(db + "-csd")
    me = os.path.abspath(__file__)
    env = dict(os.environ, CSQ_EXT=EXT)
    if os.geteuid() != 0:
        os.chmod(db + "-csd", 0o444)
        out = subprocess.run([sys.executable, me, "readonly", db], env=env, capture_output=True,
                             text=True, timeout=60)
    else:
        # root writes any file: check as nobody, who owns the directory and
        # the database (SQLite writes its journal beside it) but not the image
        setpriv = shutil.which("setpriv")
        if not setpriv:
            raise Skip("running as root and setpriv is missing: cannot make an image unwritable")
        try:
            import pwd
            nobody = pwd.getpwnam("nobody")
        except (ImportError, KeyError):
            raise Skip("running as root and there is no user nobody")
        os.chown(d, nobody.pw_uid, nobody.pw_gid)
        os.chown(db, nobody.pw_uid, nobody.pw_gid)
        os.chmod(db + "-csd", 0o644)
        # nobody may not reach the tree (a clone under /root): run copies
        # of the extension and of this file from the test's own directory
        ext = os.path.join(d, "csq.so")
        shutil.copy(EXT, ext)
        for f in (me, os.path.join(os.path.dirname(me), "harness.py")):
            shutil.copy(f, d)
        me = os.path.join(d, os.path.basename(me))
        env["CSQ_EXT"] = ext
        os.chmod(d, 0o755)
        probe = subprocess.run([setpriv, "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid,
                                "--clear-groups", sys.executable, "-c",
                                "import sqlite3, sys; open(sys.argv[1], 'rb').read(1); "
                                "open(sys.argv[2], 'rb').read(1); open(sys.argv[3], 'rb').read(1)",
                                db, ext, me], capture_output=True, text=True, timeout=60)
        if probe.returncode != 0:
            raise Skip("cannot run as nobody with access to the test files: %s" % probe.stderr[-300:])
        out = subprocess.run([setpriv, "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid,
                              "--clear-groups", sys.executable, me, "readonly", db], env=env,
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, "read-only process exited %d:\n%s%s" % (out.returncode, out.stdout,
                                                                       out.stderr[-2000:])
    assert out.stdout.strip() == "ok", out.stdout
    assert digest(db + "-csd") == before, "the image changed"
    con = connect(db)
    assert con.execute("SELECT count(*), sum(a) FROM t").fetchone() == (50, 1225)
    assert [n for (n,) in con.execute("SELECT name FROM sqlite_schema ORDER BY name")] == ["t"]
    con.close()


def read_only_image_process(db):
    """As a process that may write db but not its image."""
    bad = []
    try:
        open(db + "-csd", "r+b").close()
        bad.append("this process can write the image: the test cannot check read-only use")
    except OSError:
        pass
    bad += check_read_only(db)
    con = connect(db)
    msg = expect_error(lambda: con.execute("INSERT INTO t VALUES(1, 'x')"), "read-only", "table t")
    if "r.db-csd" not in msg:
        bad.append("message %r does not name the image" % msg)
    con.close()
    print("\n".join(bad) if bad else "ok")


# ---- names ----

def test_long_names():
    d = tmpdir()
    db = os.path.join(d, "n.db")
    con = connect(db)
    too_long = "t" * 65524
    msg = expect_error(lambda: con.execute('CREATE VIRTUAL TABLE "%s" USING csq(a INTEGER)' % too_long),
                       "65524 bytes", "65523")
    assert len(msg) < 300, "message of %d bytes" % len(msg)
    msg = expect_error(lambda: con.execute('CREATE VIRTUAL TABLE c USING csq("%s" INTEGER)' % ("c" * 65536)),
                       "column name", "65535")
    assert len(msg) < 300, "message of %d bytes" % len(msg)
    assert con.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0] == 0

    name, col = "n" * 65523, "c" * 65535
    con.execute('CREATE VIRTUAL TABLE "%s" USING csq("%s" INTEGER PRIMARY KEY, b TEXT NOT NULL)'
                % (name, col))
    con.execute('INSERT INTO "%s" VALUES(1, \'one\')' % name)
    for sql in ('INSERT INTO "%s" VALUES(1, \'again\')' % name, 'INSERT INTO "%s" VALUES(2, NULL)' % name):
        msg = expect_error(lambda: con.execute(sql), "...")
        assert len(msg) < 300, "error naming a long table is %d bytes: %r..." % (len(msg), msg[:100])
    msg = expect_error(lambda: con.execute('ALTER TABLE "%s" RENAME TO "%s"' % (name, "r" * 65524)),
                       "65524 bytes")
    assert len(msg) < 300, "message of %d bytes" % len(msg)
    con.close()
    con = connect(db)  # reopened: the table is found on the device by its whole name
    assert con.execute('SELECT * FROM "%s"' % name).fetchall() == [(1, "one")]
    assert con.execute('SELECT "%s" FROM "%s"' % (col, name)).fetchall() == [(1,)]
    con.close()


def test_long_names_striped():
    """A striped table's name must leave room for its metadata table's in a
    prepared commit and for the dropped-table prefix: 1001 bytes."""
    d = tmpdir()
    db = os.path.join(d, "s.db")
    devs = "%s,%s" % (os.path.join(d, "a.csd"), os.path.join(d, "b.csd"))
    con = connect(db)
    msg = expect_error(lambda: con.execute("CREATE VIRTUAL TABLE \"%s\" USING csq(a INTEGER, devices='%s')"
                                           % ("s" * 1002, devs)), "1002 bytes", "1001")
    assert len(msg) < 300, msg
    name = "s" * 1001
    con.execute("CREATE VIRTUAL TABLE \"%s\" USING csq(a INTEGER, devices='%s')" % (name, devs))
    con.executemany('INSERT INTO "%s" VALUES(?)' % name, [(i,) for i in range(10)])
    con.close()
    con = connect(db)
    assert con.execute('SELECT count(*), sum(a) FROM "%s"' % name).fetchone() == (10, 45)
    con.close()


def main():
    role = sys.argv[1]
    if role == "worker":
        worker(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
    elif role == "connector":
        connector(sys.argv[2], float(sys.argv[3]))
    elif role == "readonly":
        read_only_image_process(sys.argv[2])


if __name__ == "__main__" and len(sys.argv) >= 3:
    main()
