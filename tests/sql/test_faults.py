"""Injected device faults from SQL (csq_fault, csq_timeout): every failing
command surfaces as an SQL error that names what failed, nothing hangs, a
corrupted read is caught by checksums and never answered, and after the fault
is cleared every committed row is there (also for a fresh process) and the
database keeps working.

Faults act on the device object, shared by every connection of this process
that uses the image, so each test uses its own database directory."""
import faulthandler
import os
import subprocess
import sys
import threading
import sqlite3
import time

from harness import connect, tmpdir, expect_error, EXT

HERE = os.path.dirname(os.path.abspath(__file__))
N = 20000          # rows of the scan tables: several row groups, pushdown='always'
GUARD_S = 240      # the whole file must finish by then (a hang dumps stacks and exits)
QUICK_S = 20.0     # a timed-out command (200 ms timeout) fails well before the 30 s default

faulthandler.dump_traceback_later(GUARD_S, exit=True)


def fresh_count(db, table="t"):
    """count(*), sum(a) of a table as a new process sees it."""
    code = ("import sys; sys.path.insert(0, %r); from harness import connect; "
            "c = connect(%r); print(c.execute('SELECT count(*), sum(a) FROM %s').fetchone())"
            % (HERE, db, table))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, CSQ_EXT=EXT))
    assert out.returncode == 0, out.stderr[-2000:]
    return eval(out.stdout.strip())


def scan_db():
    """A file-backed database with a device scan table d (pushed down) and a
    host scan table h (pushdown='never'), N rows each, rowgroup 4096."""
    d = tmpdir()
    db = os.path.join(d, "f.db")
    con = connect(db)
    for name, push in (("d", "always"), ("h", "never")):
        con.execute("CREATE VIRTUAL TABLE %s USING csq(a INTEGER, b TEXT, rowgroup=4096, pushdown='%s')"
                    % (name, push))
        con.execute("BEGIN")
        con.executemany("INSERT INTO %s VALUES(?, ?)" % name, [(i, "v%05d" % i) for i in range(N)])
        con.execute("COMMIT")
    # reopen: the store caches what it wrote, and the reads should reach the device
    con.close()
    return db, connect(db)


def expected(lo):
    rows = [i for i in range(N) if i > lo]
    return [(len(rows), sum(rows), "v%05d" % max(rows))]


def failing(con, spec, sql, *fragments):
    """With fault spec set, sql fails quickly with every fragment in its
    message; after clearing, the fault is gone."""
    con.execute("SELECT csq_fault(?)", (spec,))
    t0 = time.monotonic()
    try:
        msg = expect_error(lambda: con.execute(sql).fetchall(), *fragments)
    finally:
        assert con.execute("SELECT csq_fault(NULL)").fetchone() == (spec,)
    took = time.monotonic() - t0
    assert took < QUICK_S, "%s: took %.1f s" % (spec, took)
    return msg


def test_sql_surface():
    d = tmpdir()
    db = os.path.join(d, "s.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER)")
    assert con.execute("SELECT csq_fault('op=nvm_read,nth=5,action=status:0x281')").fetchone() == (None,)
    assert con.execute("SELECT csq_fault('')").fetchone() == ("op=nvm_read,nth=5,action=status:0x281",)
    assert con.execute("SELECT csq_fault(NULL)").fetchone() == (None,)
    # a bad spec: the parser's words, and the rules in force stay as they were
    con.execute("SELECT csq_fault('op=execute,action=delay:1')")
    for spec, frag in [("op=nosuch,action=timeout", "unknown op 'nosuch'"),
                       ("op=execute", "no action"),
                       ("action=status:0", "status"),
                       ("nth=1,prob=0.5,action=timeout", "nth or prob"),
                       ("op=execute,action=corrupt", "corrupt applies to"),
                       ("bogus", "not key=value")]:
        expect_error(lambda: con.execute("SELECT csq_fault(?)", (spec,)).fetchall(), "csq_fault", frag)
    assert con.execute("SELECT csq_fault(NULL)").fetchone() == ("op=execute,action=delay:1",)
    # explicit path, other spellings of it, and paths that are not devices
    img = db + "-csd"
    odd = os.path.join(d, ".", "s.db-csd")
    assert con.execute("SELECT csq_fault('op=execute,action=timeout', ?)", (img,)).fetchone() == (None,)
    assert con.execute("SELECT csq_fault(NULL, ?)", (odd,)).fetchone() == ("op=execute,action=timeout",)
    expect_error(lambda: con.execute("SELECT csq_fault('', ?)", (os.path.join(d, "none.csd"),)).fetchall(),
                 "does not exist")
    with open(os.path.join(d, "plain.txt"), "w") as f:
        f.write("not a device")
    expect_error(lambda: con.execute("SELECT csq_fault('', ?)", (os.path.join(d, "plain.txt"),)).fetchall(),
                 "not a csq device image")
    # timeouts
    assert con.execute("SELECT csq_timeout(200)").fetchone() == (30000,)
    assert con.execute("SELECT csq_timeout(1000, ?)", (img,)).fetchone() == (200,)
    for bad in ("0", "-5", "'soon'", "NULL", "100000000000"):
        expect_error(lambda: con.execute("SELECT csq_timeout(%s)" % bad).fetchall(), "csq_timeout", "milliseconds")
    # an in-memory database: its private device
    m = connect()
    assert m.execute("SELECT csq_fault('op=execute,action=timeout')").fetchone() == (None,)
    m.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, pushdown='always')")
    m.execute("SELECT csq_timeout(200)")
    m.executemany("INSERT INTO t VALUES(?)", [(i,) for i in range(100)])
    expect_error(lambda: m.execute("SELECT count(*) FROM t WHERE a > 5").fetchall(), "no completion within 200 ms")
    m.execute("SELECT csq_fault(NULL)")
    assert m.execute("SELECT count(*) FROM t WHERE a > 5").fetchone() == (94,)
    # not callable from a schema object (a database from elsewhere cannot set faults)
    con.execute("CREATE VIEW evil AS SELECT csq_fault('action=timeout') AS x")
    expect_error(lambda: con.execute("SELECT * FROM evil").fetchall(), "unsafe use of csq_fault")
    # the setting is per device: another connection of this process sees it
    con.execute("SELECT csq_fault('op=execute,action=status:0x281')")
    other = connect(db)
    other.execute("CREATE VIRTUAL TABLE u USING csq(a INTEGER, pushdown='always')")
    other.execute("INSERT INTO u VALUES(1)")
    expect_error(lambda: other.execute("SELECT * FROM u WHERE a = 1").fetchall(), "Execute Program",
                 "injected fault")
    con.execute("SELECT csq_fault(NULL)")
    assert other.execute("SELECT * FROM u WHERE a = 1").fetchall() == [(1,)]


def test_read_and_execute_faults():
    db, con = scan_db()
    con.execute("SELECT csq_timeout(200)")
    want = expected(5)
    qd = "SELECT count(*), sum(a), max(b) FROM d WHERE a > 5"
    qh = "SELECT count(*), sum(a), max(b) FROM h WHERE a > 5"
    # the host scan first: its chunks are cached once read. The first rule lets
    # the superblock reads at statement start through (delay:0 changes nothing).
    sb = "op=nvm_read,lba=0,action=delay:0;"
    failing(con, sb + "op=nvm_read,action=status:0x281", qh, "Read of LBAs", "Unrecovered Read Error")
    failing(con, sb + "op=nvm_read,action=timeout", qh, "Read of LBAs", "no completion within 200 ms")
    failing(con, sb + "op=nvm_read,action=corrupt", qh, "table 'h'", "damaged")
    # the statement-start check copies the superblocks into SLM (Memory Copy
    # of LBA 0) and reads back their first 64 bytes; failing that copy falls
    # back to reading the whole superblocks, which fails too
    failing(con, "op=slm_copy,lba=0,action=status:0x281;op=nvm_read,action=status:0x281", qd,
            "reading the superblocks", "Unrecovered Read Error")
    assert con.execute(qd).fetchall() == want and con.execute(qh).fetchall() == want
    # error status and timeout on each command a scan sends (pushed down) ...
    # (the first rule lets the check's Memory Copy of LBA 0 through; its two
    # SLM Reads come before the scan's)
    for op, what, sbskip in [("slm_copy", "Memory Copy", 0), ("slm_write", "SLM Write", 0),
                             ("execute", "Execute Program", 0), ("slm_read", "SLM Read", 2)]:
        for nth in (1, 3):
            failing(con, "op=slm_copy,lba=0,action=delay:0;op=%s,nth=%d,action=status:0x281"
                    % (op, nth + sbskip), qd, what, "Unrecovered Read Error", "table 'd'")
        failing(con, "op=slm_copy,lba=0,action=delay:0;op=%s,nth=%d,action=timeout" % (op, 2 + sbskip), qd,
                what, "no completion within 200 ms")
        assert con.execute(qd).fetchall() == want
    # corrupted payloads are caught by the chunk checksums, never answered
    for nth in (1, 2, 3):
        failing(con, "op=slm_copy,lba=0,action=delay:0;op=slm_copy,nth=%d,action=corrupt" % nth, qd,
                "table 'd'", "checksum")
    # a fault firing at random during a long scan: right answer or a clear error
    for seed in range(1, 6):
        con.execute("SELECT csq_fault('op=any,prob=0.05,seed=%d,action=status:0x281')" % seed)
        try:
            assert con.execute(qd).fetchall() == want
        except Exception as e:  # noqa: BLE001 - sqlite3.Error, checked below
            assert "status 0x281" in str(e), str(e)
        con.execute("SELECT csq_fault(NULL)")
    assert con.execute(qd).fetchall() == want and con.execute(qh).fetchall() == want
    assert fresh_count(db, "d") == (N, N * (N - 1) // 2)


def test_damaged_jobs_and_results_are_never_answered():
    # a byte flipped in the job descriptor on its way to the device (SLM
    # Write) or in a result on its way back (SLM Read): the job's and the
    # result's checksums catch it, with deleted rows too (their bitmap rides
    # in the job)
    db, con = scan_db()
    con.execute("DELETE FROM d WHERE a % 3 = 0")
    con.execute("DELETE FROM h WHERE a % 3 = 0")
    con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query('SELECT a % 5 AS k, count(*), sum(a) "
                "FROM d WHERE a > ?1 GROUP BY 1 ORDER BY 1')")
    qd = "SELECT count(*), sum(a), max(b) FROM d WHERE a > 5"
    want = con.execute(qd.replace("FROM d", "FROM h")).fetchall()
    wantv = con.execute("SELECT a % 5, count(*), sum(a) FROM h WHERE a > 7 GROUP BY 1 ORDER BY 1").fetchall()
    caught = 0
    for op in ("slm_write", "slm_read"):
        for seed in range(1, 41):
            for q, w in ((qd, want), ("SELECT * FROM v(7)", wantv)):
                con.execute("SELECT csq_fault('op=%s,prob=0.3,seed=%d,action=corrupt')" % (op, seed))
                try:
                    got = con.execute(q).fetchall()
                    assert got == w, (op, seed, q, got, w)
                except sqlite3.Error as e:
                    assert "damaged" in str(e) or "job descriptor is malformed" in str(e) or "checksum" in str(e), str(e)
                    caught += 1
                con.execute("SELECT csq_fault(NULL)")
    assert caught > 20, caught
    assert con.execute(qd).fetchall() == want


def test_pushdown_views_under_execute_faults():
    db, con = scan_db()
    con.execute("SELECT csq_timeout(200)")
    con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query('SELECT a % 7 AS k, count(*), sum(a) "
                "FROM d WHERE a > ?1 GROUP BY a % 7 ORDER BY k')")
    want = con.execute("SELECT a % 7, count(*), sum(a) FROM h WHERE a > 100 GROUP BY a % 7 ORDER BY 1").fetchall()
    assert con.execute("SELECT k, \"count(*)\", \"sum(a)\" FROM v(100)").fetchall() == want
    q = "SELECT * FROM v(100)"
    failing(con, "op=execute,nth=2,action=status:0x6", q, "Execute Program", "Internal Error")
    failing(con, "op=execute,nth=1,action=timeout", q, "Execute Program", "no completion within 200 ms")
    failing(con, "op=slm_copy,nth=2,action=corrupt", q, "checksum")
    assert con.execute("SELECT k, \"count(*)\", \"sum(a)\" FROM v(100)").fetchall() == want
    # csq_explain's plans also run through the device
    assert con.execute("SELECT count(*) FROM d WHERE a > 100").fetchone() == (N - 101,)


def commit_case(d, i, spec):
    """A fresh database of 3 committed rows; a transaction inserting 100 more
    meets fault spec at COMMIT. Returns (db, con, error message or None)."""
    db = os.path.join(d, "w%d.db" % i)
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT)")
    con.executemany("INSERT INTO t VALUES(?, 'x')", [(1,), (2,), (3,)])
    con.execute("SELECT csq_timeout(200)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES(?, 'y')", [(100 + k,) for k in range(100)])
    con.execute("SELECT csq_fault(?)", (spec,))
    t0 = time.monotonic()
    err = None
    try:
        con.execute("COMMIT")
    except Exception as e:  # noqa: BLE001
        err = str(e)
    assert time.monotonic() - t0 < QUICK_S, spec
    con.execute("SELECT csq_fault(NULL)")
    if con.in_transaction:
        con.execute("ROLLBACK")
    return db, con, err


OLD = (3, 6)
NEW = (103, 6 + sum(100 + k for k in range(100)))


def still_usable(db, con, state):
    assert con.execute("SELECT count(*), sum(a) FROM t").fetchone() == state
    assert fresh_count(db) == state
    con.execute("INSERT INTO t VALUES(1000, 'z')")
    after = (state[0] + 1, state[1] + 1000)
    assert con.execute("SELECT count(*), sum(a) FROM t").fetchone() == after
    assert fresh_count(db) == after


def test_commit_faults_keep_the_previous_state():
    """Faults before the superblock flip: COMMIT fails naming the step, and
    the previous committed state is what everybody sees."""
    d = tmpdir()
    cases = [  # a commit writes: row group, catalog, flush, superblock copy 0, flush, copy 1, flush
        ("op=nvm_write,nth=1,action=status:0x280", "writing a row group", "Write Fault"),
        ("op=nvm_write,nth=2,action=status:0x280", "writing the catalog", "Write Fault"),
        ("op=nvm_flush,nth=1,action=status:0x6", "flushing data before commit", "Internal Error"),
        ("op=nvm_write,nth=3,action=status:0x280", "writing the superblock", "Write Fault"),
        ("op=nvm_write,nth=1,action=timeout", "writing a row group", "no completion within 200 ms"),
        ("op=nvm_write,nth=2,action=timeout", "writing the catalog", "no completion within 200 ms"),
        ("op=nvm_flush,nth=1,action=timeout", "flushing data before commit", "no completion within 200 ms"),
        ("op=nvm_write,nth=3,action=timeout", "writing the superblock", "no completion within 200 ms"),
        # a device that stores damaged data: the catalog and the superblocks
        # are read back before they count
        ("op=nvm_write,nth=2,action=corrupt", "writing the catalog", "read back differ"),
        # short writes: a prefix of the blocks lands on the media, then Write Fault
        ("op=nvm_write,nth=1,seed=3,action=short", "writing a row group", "short write"),
        ("op=nvm_write,nth=2,seed=5,action=short", "writing the catalog", "short write"),
        ("op=nvm_write,nth=3,action=short", "writing the superblock", "short write"),
    ]
    for i, (spec, step, why) in enumerate(cases):
        db, con, err = commit_case(d, i, spec)
        assert err is not None, "%s: COMMIT succeeded" % spec
        for frag in (step, why):
            assert frag.lower() in err.lower(), "%s: error %r lacks %r" % (spec, err, frag)
        if "superblock" in step and "status" in spec:
            assert "may have taken effect" not in err, err
        still_usable(db, con, OLD)
    # the write reservation is taken by the transaction's first write
    db = os.path.join(d, "r.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT)")
    con.executemany("INSERT INTO t VALUES(?, 'x')", [(1,), (2,), (3,)])
    con.execute("SELECT csq_timeout(200)")
    con.execute("SELECT csq_fault('op=resv_acquire,action=timeout')")
    expect_error(lambda: con.execute("INSERT INTO t VALUES(4, 'y')"), "reservation", "no completion within 200 ms")
    con.execute("SELECT csq_fault(NULL)")
    still_usable(db, con, OLD)


def test_commit_faults_after_the_flip_leave_one_whole_state():
    """Faults once superblock copy 0 is written: COMMIT reports the error; the
    transaction may have landed (as after a crash at that moment), but the
    database holds one whole state, the same for this process and a fresh
    one, and keeps working."""
    d = tmpdir()
    cases = ["op=nvm_flush,nth=2,action=status:0x6", "op=nvm_write,nth=4,action=status:0x280",
             "op=nvm_flush,nth=3,action=status:0x6", "op=nvm_flush,nth=2,action=timeout",
             "op=nvm_write,nth=4,action=corrupt",
             # copy 0 stored damaged: the read-back catches it, but if the flipped
             # byte lies outside what the superblock checksum covers, the copy counts
             "op=nvm_write,nth=3,action=corrupt"]
    for i, spec in enumerate(cases):
        db, con, err = commit_case(d, 20 + i, spec)
        assert err is not None and "superblock" in err and "may have taken effect" in err, (spec, err)
        state = con.execute("SELECT count(*), sum(a) FROM t").fetchone()
        assert state in (OLD, NEW), (spec, state)
        still_usable(db, con, state)


def test_corrupted_writes_are_caught_when_read():
    """A device that stores damaged row group data: a new process reading it
    gets the right answer (the flipped byte was padding) or an error naming
    the table and the damage, never a wrong answer."""
    d = tmpdir()
    for seed in range(1, 9):
        db, con, err = commit_case(d, 40 + seed, "op=nvm_write,nth=1,seed=%d,action=corrupt" % seed)
        assert err is None, err
        con.close()
        code = ("import sys; sys.path.insert(0, %r); from harness import connect; c = connect(%r)\n"
                "try:\n print(c.execute('SELECT count(*), sum(a) FROM t WHERE a > 50').fetchone())\n"
                "except Exception as e:\n print('ERR', e)" % (HERE, db))
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, CSQ_EXT=EXT)).stdout.strip()
        if out.startswith("ERR"):
            assert "table 't'" in out and "damaged" in out, out
        else:
            assert eval(out) == (100, NEW[1] - 6), out


def test_faults_change_while_other_threads_query():
    """Rules replaced many times while another connection scans: no crash, no
    hang, and every error is an injected one."""
    db, con = scan_db()
    want = expected(5)
    stop = time.monotonic() + 3
    bad = []

    def reader():
        c = connect(db)
        while time.monotonic() < stop:
            try:
                got = c.execute("SELECT count(*), sum(a), max(b) FROM d WHERE a > 5").fetchall()
                if got != want:
                    bad.append(("wrong answer", got))
            except Exception as e:  # noqa: BLE001
                # the message describes the failed command itself, even when
                # other commands of the scan failed after it (stale programs)
                if "status 0x281" not in str(e) or "injected fault" not in str(e):
                    bad.append(("error", str(e)))
        c.close()

    th = [threading.Thread(target=reader) for _ in range(2)]
    for t in th:
        t.start()
    k = 0
    while time.monotonic() < stop:
        k += 1
        con.execute("SELECT csq_fault(?)", ("op=any,prob=0.02,seed=%d,action=status:0x281" % k,))
        time.sleep(0.01)
        con.execute("SELECT csq_fault(NULL)")
        time.sleep(0.01)
    for t in th:
        t.join(60)
        assert not t.is_alive(), "a reader hangs"
    assert not bad, bad[:5]


def test_slm_exhausted_wide_text_degrades_to_the_host_engine():
    """Issue 6, "SLM exhausted": a row group of ~100 MB of TEXT needs more
    local memory than the device has (256 MiB for input plus output areas),
    so the scan runs that row group's program in the host engine over chunks
    read to the host, while the small row groups still run on the device. The
    answers equal native SQLite's."""
    d = tmpdir()
    con = connect(os.path.join(d, "wide.db"))
    con.execute("CREATE VIRTUAL TABLE w USING csq(a INTEGER, b TEXT, rowgroup=1000, pushdown='always')")
    con.execute("CREATE TABLE n(a INTEGER, b TEXT)")
    pad = "abcdefghij" * 10000  # 100 KB

    def rows():
        for i in range(1000):         # row group 0: ~100 MB of distinct text
            yield (i, "%06d" % i + pad + "%06d" % i)
        for i in range(1000, 4000):   # row groups 1-3: small
            yield (i, "%06d" % i)
    for t in ("w", "n"):
        con.execute("BEGIN")
        con.executemany("INSERT INTO %s VALUES(?, ?)" % t, rows())
        con.execute("COMMIT")
    queries = [
        "SELECT a, length(b), substr(b, 1, 12), substr(b, -6) FROM TBL WHERE b > '000005' ORDER BY a",
        "SELECT count(*), sum(length(b)), min(b) = min(b), max(a) FROM TBL WHERE a % 3 != 0",
        "SELECT b FROM TBL WHERE a IN (0, 499, 999, 1000, 3999) ORDER BY a",
        "SELECT a FROM TBL WHERE b LIKE '%j000998' OR a = 2500 ORDER BY a",
    ]
    s0 = con.execute("SELECT value FROM csq_stats WHERE name = 'media_bytes_read'").fetchone()[0]
    for q in queries:
        got = con.execute(q.replace("TBL", "w")).fetchall()
        want = con.execute(q.replace("TBL", "n")).fetchall()
        assert got == want, "%s: %d rows vs %d" % (q, len(got), len(want))
    s1 = con.execute("SELECT value FROM csq_stats WHERE name = 'media_bytes_read'").fetchone()[0]
    assert s1 - s0 >= 100 * 1000 * 1000, "the wide row group was not read"
    # grouped programs too (a pushdown view), and under an injected fault on the
    # host engine's reads: a clear error, then the right answer again
    con.execute("CREATE VIRTUAL TABLE temp.g USING csq_query('SELECT a % 4 AS k, count(*), "
                "sum(length(b)) FROM w WHERE a > 10 GROUP BY a % 4 ORDER BY k')")
    want = con.execute("SELECT a % 4, count(*), sum(length(b)) FROM n WHERE a > 10 GROUP BY a % 4 ORDER BY 1").fetchall()
    assert con.execute("SELECT * FROM g").fetchall() == want
    failing(con, "op=nvm_read,lba=0,action=delay:0;op=nvm_read,nth=1,action=status:0x281", "SELECT * FROM g",
            "host engine", "Unrecovered Read Error")
    assert con.execute("SELECT * FROM g").fetchall() == want
