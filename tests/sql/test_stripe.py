"""tests/sql/test_stripe.py - tables striped over several devices
(devices='a.csd,b.csd'): differential against a native table, reopen,
member errors, torn-commit detection, statistics and option errors."""
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import threading

from harness import EXT, connect, expect_error, same_rows, stats, tmpdir

HERE = os.path.dirname(os.path.abspath(__file__))


def make(con, name, devs, extra=""):
    con.execute("CREATE VIRTUAL TABLE %s USING csq(id INTEGER PRIMARY KEY, a INTEGER, b REAL, "
                "c TEXT, devices='%s'%s)" % (name, ",".join(devs), extra))
    con.execute("CREATE TABLE n_%s(id INTEGER PRIMARY KEY, a INTEGER, b REAL, c TEXT)" % name)


def rand_row(r):
    return (r.choice([None, r.randint(-50, 50), r.randint(0, 10 ** 6)]),
            r.choice([None, r.random() * 100, float(r.randint(0, 9))]),
            r.choice([None, "x", "yy", "zzz", "w%d" % r.randint(0, 30)]))


QUERIES = [
    "SELECT id, a, b, c FROM {t} ORDER BY id",
    "SELECT id, a FROM {t} WHERE a > 10 ORDER BY id",
    "SELECT id, c FROM {t} WHERE c = 'x' OR a < 0 ORDER BY id",
    "SELECT count(*), sum(a), min(c), max(b) FROM {t} WHERE b IS NOT NULL",
    "SELECT c, count(*), sum(a), avg(b) FROM {t} GROUP BY c ORDER BY c",
    "SELECT id FROM {t} WHERE c LIKE 'w1%' ORDER BY id",
]


def check_same(con, t, what):
    for q in QUERIES:
        got = con.execute(q.format(t=t)).fetchall()
        want = con.execute(q.format(t="n_" + t)).fetchall()
        same_rows(round_rows(got), round_rows(want), "%s: %s" % (what, q.format(t=t)))
    # the aggregates again through a pushdown view: every member runs its part
    for q in QUERIES[3:5] + ["SELECT sum(c), count(*) FROM {t}"]:
        con.execute("DROP TABLE IF EXISTS temp.v")
        con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query('%s')" % q.format(t=t))
        got = con.execute("SELECT * FROM v").fetchall()
        want = con.execute(q.format(t="n_" + t)).fetchall()
        same_rows(round_rows(sorted(got, key=repr)), round_rows(sorted(want, key=repr)),
                  "%s: view %s" % (what, q))
    for rid in [1, 2, 7, 100, 333, 10 ** 6]:
        q = "SELECT * FROM {t} WHERE id = %d" % rid
        same_rows(con.execute(q.format(t=t)).fetchall(), con.execute(q.format(t="n_" + t)).fetchall(),
                  "%s: lookup %d" % (what, rid))


def round_rows(rows):
    return [tuple(round(v, 6) if isinstance(v, float) else v for v in r) for r in rows]


def both(con, sql, args=()):
    con.execute(sql.format(t="t"), args)
    con.execute(sql.format(t="n_t"), args)


def differential(ndev, push):
    d = tmpdir()
    devs = [os.path.join(d, "m%d.csd" % i) for i in range(ndev)]
    db = os.path.join(d, "db")
    con = connect(db)
    make(con, "t", devs, ", rowgroup=64, pushdown='%s'" % push)
    r = random.Random(ndev * 7 + len(push))
    con.execute("BEGIN")
    for _ in range(700):
        both(con, "INSERT INTO {t}(a, b, c) VALUES(?, ?, ?)", rand_row(r))
    con.execute("COMMIT")
    check_same(con, "t", "after insert")
    # UPDATE, DELETE, explicit rowids
    both(con, "UPDATE {t} SET a = a + 1, c = 'u' WHERE id % 5 = 0")
    both(con, "DELETE FROM {t} WHERE id % 7 = 3")
    both(con, "INSERT INTO {t}(id, a, c) VALUES(100000, 1, 'big')")
    check_same(con, "t", "after update/delete")
    # rollback: nothing of it on any member
    con.execute("BEGIN")
    both(con, "DELETE FROM {t} WHERE a > 0")
    for _ in range(200):
        both(con, "INSERT INTO {t}(a, b, c) VALUES(?, ?, ?)", rand_row(r))
    con.execute("ROLLBACK")
    check_same(con, "t", "after rollback")
    # savepoints: ROLLBACK TO keeps what came before it, on every member
    con.execute("BEGIN")
    for _ in range(150):
        both(con, "INSERT INTO {t}(a, b, c) VALUES(?, ?, ?)", rand_row(r))
    con.execute("SAVEPOINT s1")
    both(con, "DELETE FROM {t} WHERE id % 3 = 0")
    for _ in range(150):
        both(con, "INSERT INTO {t}(a, b, c) VALUES(?, ?, ?)", rand_row(r))
    check_same(con, "t", "inside savepoint")
    con.execute("ROLLBACK TO s1")
    both(con, "UPDATE {t} SET b = 1.5 WHERE id % 4 = 1")
    con.execute("RELEASE s1")
    con.execute("COMMIT")
    check_same(con, "t", "after savepoints")
    con.close()
    # reopen in another process: every member found, same answers
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from harness import connect\n"
            "con = connect(%r)\n"
            "q = 'SELECT count(*), sum(a), round(total(b), 3), max(c) FROM '\n"
            "print(con.execute(q + 't').fetchone() == con.execute(q + 'n_t').fetchone())\n"
            % (os.path.dirname(os.path.abspath(__file__)), db))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, CSQ_EXT=EXT))
    assert out.stdout.strip() == "True", (out.stdout, out.stderr)
    con = connect(db)
    check_same(con, "t", "after reopen")
    # every member holds part of the table
    used = dict(con.execute("SELECT path, blocks_used FROM csq_devices").fetchall())
    for p in devs:
        key = [k for k in used if k.endswith(os.path.basename(p))]
        assert key and used[key[0]] > 4, (p, used)
    return d, devs, db, con


def test_two_devices_pushdown_auto():
    differential(2, "auto")


def test_three_devices_pushdown_always():
    d, devs, db, con = differential(3, "always")
    plan = con.execute("EXPLAIN QUERY PLAN SELECT * FROM t WHERE a > 3").fetchall()
    assert "device" in repr(plan), plan
    ex = dict(con.execute("SELECT * FROM csq_explain('SELECT c, sum(a) FROM t GROUP BY c')"))
    assert ex["devices"].startswith("3 members"), ex
    assert ex["table_rows"] == str(con.execute("SELECT count(*) FROM n_t").fetchone()[0]), ex


def test_stats_count_every_member():
    d = tmpdir()
    devs = [os.path.join(d, "a.csd"), os.path.join(d, "b.csd")]
    con = connect(os.path.join(d, "db"))
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, devices='%s', rowgroup=1000, pushdown='always')"
                % ",".join(devs))
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES(?)", [(i,) for i in range(8000)])
    con.execute("COMMIT")
    con.close()
    # a fresh connection reads from both devices; csq_stats sums its queues
    con = connect(os.path.join(d, "db"))
    con.execute("SELECT csq_stats_reset()")
    assert con.execute("SELECT sum(a) FROM t").fetchone()[0] == sum(range(8000))
    st = stats(con)
    # each member holds 4 of the 8 row groups; a column chunk of 1000 ints is
    # far more than one 4 KiB block in total over 8 groups
    assert st["rows_scanned"] == 8000, st
    assert st["row_groups_scanned"] == 8, st
    assert st["media_bytes_read"] >= 8 * 4096, st
    # the pushed-down scan too
    con.execute("SELECT csq_stats_reset()")
    con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query('SELECT count(*), sum(a) FROM t')")
    assert con.execute("SELECT * FROM v").fetchone() == (8000, sum(range(8000)))
    st = stats(con)
    assert st["programs_executed"] >= 8, st


def test_missing_and_mismatched_members():
    d = tmpdir()
    devs = [os.path.join(d, "a.csd"), os.path.join(d, "b.csd")]
    db = os.path.join(d, "db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, devices='%s')" % ",".join(devs))
    con.execute("INSERT INTO t VALUES(1)")
    con.close()
    shutil.move(devs[1], devs[1] + ".away")
    con = connect(db)
    expect_error(lambda: con.execute("SELECT * FROM t").fetchall(), "member 2 of 2", "b.csd")
    con.close()
    # a member image of another stripe (same table name) is refused
    d2 = tmpdir()
    other = [os.path.join(d2, "a.csd"), os.path.join(d2, "b.csd")]
    c2 = connect(os.path.join(d2, "db"))
    c2.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, devices='%s')" % ",".join(other))
    c2.execute("INSERT INTO t VALUES(2)")
    c2.close()
    shutil.copy(other[1], devs[1])
    con = connect(db)
    expect_error(lambda: con.execute("SELECT * FROM t").fetchall(), "not member 2 of 2")
    con.close()
    shutil.move(devs[1] + ".away", devs[1])
    con = connect(db)
    assert con.execute("SELECT * FROM t").fetchall() == [(1,)]
    con.close()
    # the member list in another order: each image says which member it is
    con = connect(db)
    con.execute("PRAGMA writable_schema=ON")
    con.execute("UPDATE sqlite_master SET sql = replace(sql, ?, ?) WHERE name = 't'",
                (",".join(devs), ",".join(reversed(devs))))
    con.close()
    con = connect(db)
    expect_error(lambda: con.execute("SELECT * FROM t").fetchall(), "not member 1 of 2")
    con.execute("PRAGMA writable_schema=ON")
    con.execute("UPDATE sqlite_master SET sql = replace(sql, ?, ?) WHERE name = 't'",
                (",".join(reversed(devs)), ",".join(devs)))
    con.close()
    con = connect(db)
    assert con.execute("SELECT * FROM t").fetchall() == [(1,)]
    # DROP removes the table from every member
    con.execute("DROP TABLE t")
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, devices='%s')" % ",".join(devs))
    assert con.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_torn_commit_is_detected():
    """A crash between member commits leaves a member ahead of the
    coordinator: images copied before and after a commit recreate that
    state exactly (the coordinator commits last)."""
    d = tmpdir()
    devs = [os.path.join(d, "a.csd"), os.path.join(d, "b.csd")]
    db = os.path.join(d, "db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, devices='%s')" % ",".join(devs))
    con.execute("INSERT INTO t VALUES(1)")
    con.close()
    for p in devs:
        shutil.copy(p, p + ".old")
    con = connect(db)
    con.execute("INSERT INTO t VALUES(2)")
    con.close()
    # coordinator lost its commit, member 2 kept it: torn
    shutil.copy(devs[0] + ".old", devs[0])
    con = connect(db)
    expect_error(lambda: con.execute("SELECT * FROM t").fetchall(), "torn", "member 2 of 2")
    con.close()
    # a member older than its coordinator (an old image restored)
    shutil.copy(devs[1] + ".old", devs[1])
    con = connect(db)
    assert con.execute("SELECT * FROM t").fetchall() == [(1,)]  # both old: consistent
    con.close()
    os.unlink(devs[0])
    shutil.copy(devs[0] + ".old", devs[0])
    con = connect(db)
    con.execute("INSERT INTO t VALUES(3)")
    con.close()
    shutil.copy(devs[1] + ".old", devs[1])
    con = connect(db)
    expect_error(lambda: con.execute("SELECT * FROM t").fetchall(), "older")
    expect_error(lambda: con.execute("INSERT INTO t VALUES(4)"), "older")
    con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query('SELECT count(*) FROM t')")
    expect_error(lambda: con.execute("SELECT * FROM v").fetchall(), "older")
    con.execute("DROP TABLE temp.v")
    # a table in that state can still be dropped, from every member
    con.execute("DROP TABLE t")
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, devices='%s')" % ",".join(devs))
    assert con.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_rename_and_reopen():
    d = tmpdir()
    devs = [os.path.join(d, "a.csd"), os.path.join(d, "b.csd")]
    db = os.path.join(d, "db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, devices='%s', rowgroup=16)"
                % ",".join(devs))
    con.executemany("INSERT INTO t VALUES(?)", [(i,) for i in range(100)])
    con.execute("ALTER TABLE t RENAME TO u")
    con.close()
    con = connect(db)
    assert con.execute("SELECT count(*), sum(a) FROM u").fetchone() == (100, 4950)


def test_readers_never_see_half_a_commit():
    """Each transaction inserts 64 rows (one row group per member, rowgroup=32)
    so a reader that saw one member's part without the other's would count a
    number that is not a multiple of 64."""
    d = tmpdir()
    devs = [os.path.join(d, "a.csd"), os.path.join(d, "b.csd")]
    db = os.path.join(d, "db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, devices='%s', rowgroup=32)"
                % ",".join(devs))
    con.close()
    bad = []
    stop = threading.Event()

    def reader():
        c = connect(db)
        while not stop.is_set():
            n = c.execute("SELECT count(*) FROM t").fetchone()[0]
            if n % 64:
                bad.append(n)

    th = [threading.Thread(target=reader) for _ in range(2)]
    for x in th:
        x.start()
    w = connect(db)
    for i in range(40):
        w.execute("BEGIN")
        w.executemany("INSERT INTO t VALUES(?)", [(i,)] * 64)
        w.execute("COMMIT")
    stop.set()
    for x in th:
        x.join()
    assert not bad, bad[:5]
    assert w.execute("SELECT count(*) FROM t").fetchone() == (40 * 64,)


def test_option_errors():
    d = tmpdir()
    con = connect(os.path.join(d, "db"))
    a, b = os.path.join(d, "a.csd"), os.path.join(d, "b.csd")
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE t USING csq(x, devices='%s,%s')" % (a, a)),
                 "twice")
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE t USING csq(x, devices='%s,,%s')" % (a, b)),
                 "empty entry")
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE t USING csq(x, devices='%s,')" % a),
                 "empty entry")
    expect_error(lambda: con.execute(
        "CREATE VIRTUAL TABLE t USING csq(x, device='%s', devices='%s,%s')" % (a, a, b)),
        "device= or devices=")
    expect_error(lambda: con.execute(
        "CREATE VIRTUAL TABLE t USING csq(x, devices='%s,%s', device='%s')" % (a, b, a)),
        "device= or devices=")
    # the same file under two names is one device
    expect_error(lambda: con.execute(
        "CREATE VIRTUAL TABLE t USING csq(x, devices='%s,%s')" % (a, os.path.join(d, ".", "a.csd"))),
        "same device")
    # one path is just device=
    con.execute("CREATE VIRTUAL TABLE one USING csq(x, devices='%s')" % b)
    con.execute("INSERT INTO one VALUES(5)")
    assert con.execute("SELECT * FROM one").fetchall() == [(5,)]


def test_writers_of_stripes_in_opposite_orders():
    """Tables over (a, b) and (b, a) written at once from two connections:
    members are locked in path order, so neither writer waits out the busy
    timeout holding one device while wanting the other."""
    d = tmpdir()
    a, b = os.path.join(d, "a.csd"), os.path.join(d, "b.csd")
    db = os.path.join(d, "db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE x USING csq(v INTEGER, devices='%s,%s', rowgroup=16)" % (a, b))
    con.execute("CREATE VIRTUAL TABLE y USING csq(v INTEGER, devices='%s,%s', rowgroup=16)" % (b, a))
    con.close()
    errors = []

    def writer(t):
        c = connect(db, timeout=30)
        try:
            for i in range(30):
                c.execute("BEGIN")
                c.executemany("INSERT INTO %s VALUES(?)" % t, [(i,)] * 40)
                c.execute("COMMIT")
        except Exception as e:  # reported below
            errors.append(repr(e))

    th = [threading.Thread(target=writer, args=(t,)) for t in ("x", "y")]
    for x in th:
        x.start()
    for x in th:
        x.join(120)
    assert not any(x.is_alive() for x in th), "writers hung"
    assert not errors, errors
    con = connect(db)
    assert con.execute("SELECT count(*), sum(v) FROM x").fetchone() == (1200, 40 * sum(range(30)))
    assert con.execute("SELECT count(*), sum(v) FROM y").fetchone() == (1200, 40 * sum(range(30)))


def test_statement_start_check_moves_128_bytes_per_device():
    """Each statement checks whether another process committed: blocks 0-1
    are copied into device SLM and only 64 bytes of each superblock copy come
    back, so a whole-query aggregate on a small table moves well under 1 KiB
    in all (it used to move both 4 KiB superblocks); on a stripe, 128 bytes
    per member. A commit by another process is still seen at once."""
    d = tmpdir()
    db = os.path.join(d, "db")
    devs = [os.path.join(d, "a.csd"), os.path.join(d, "b.csd")]
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE one USING csq(a INTEGER, b REAL, pushdown='always')")
    con.execute("CREATE VIRTUAL TABLE two USING csq(a INTEGER, b REAL, pushdown='always', "
                "rowgroup=500, devices='%s')" % ",".join(devs))
    for t in ("one", "two"):
        con.execute("BEGIN")
        con.executemany("INSERT INTO %s VALUES(?, ?)" % t, [(i, i / 4) for i in range(1000)])
        con.execute("COMMIT")
    con.close()
    con = connect(db)
    for t, limit in (("one", 1024), ("two", 2 * 1024)):
        con.execute("CREATE VIRTUAL TABLE temp.v_%s USING csq_query('SELECT count(*), sum(a), sum(b) "
                    "FROM %s WHERE a > ?1')" % (t, t))
        want = (989, sum(range(11, 1000)), sum(i / 4 for i in range(11, 1000)))
        for _ in range(3):  # the first statement after the open, and later ones
            con.execute("SELECT csq_stats_reset()")
            assert con.execute("SELECT * FROM v_%s(10)" % t).fetchone() == want
            moved = con.execute("SELECT value FROM csq_stats WHERE name = 'bytes_to_host'").fetchone()[0]
            assert moved < limit, (t, moved)
        # another process commits: the next statement sees it
        code = ("import sys; sys.path.insert(0, %r); from harness import connect; "
                "c = connect(%r); c.execute('INSERT INTO %s VALUES(5000, 1.0)')" % (HERE, db, t))
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, CSQ_EXT=EXT))
        assert out.returncode == 0, out.stderr[-2000:]
        assert con.execute("SELECT * FROM v_%s(10)" % t).fetchone() == (want[0] + 1, want[1] + 5000,
                                                                     want[2] + 1.0)


# ---- crashes between the steps of a striped commit ---------------------------
#
# A child process runs one transaction and is stopped by a device fault rule
# "op=any,nth=K,action=crash" (device/emu/fault.c: _exit(86) before the K-th
# command on that member after the rule is set, just before COMMIT). K runs
# over every command the COMMIT sends to each member in turn: row group and
# catalog writes, read-backs, flushes, both superblock copies of the prepare,
# the decision and the flip. The next child opens the database in a fresh
# process: each table must be whole, old or new, the same on every member,
# and writable (that child commits the next transaction).

CRASH_EXIT = 86


def crash_txn(con, tables, i):
    """Transaction i on each table: rows on every member (rowgroup=16), an
    update and a delete. The same statements run on the native model (with
    explicit rowids, which a native table and a csq table assign alike)."""
    r = random.Random(1000 + i)
    for t in tables:
        con.executemany("INSERT INTO %s(id, a, b) VALUES(?, ?, ?)" % t,
                        [(i * 1000 + j, r.randint(0, 1000), r.random()) for j in range(r.randint(20, 60))])
        con.execute("UPDATE %s SET a = a + 1 WHERE id %% 7 = ?" % t, (i % 7,))
        con.execute("DELETE FROM %s WHERE id %% 11 = ?" % t, (i % 11,))


def crash_state(con, tables):
    return [list(con.execute("SELECT count(*), coalesce(sum(a), 0), round(total(b), 6), "
                             "coalesce(sum(id * (a %% 13)), 0) FROM %s" % t).fetchone()) for t in tables]


def crash_child(db, tables, i, dev, spec):
    """Child: print the state it finds, then run transaction i with the
    crash rule on device dev. Exit 0 after COMMIT returned, 86 if stopped."""
    con = connect(db)
    print(repr(crash_state(con, tables)), flush=True)
    if i is None:
        return
    con.execute("BEGIN")
    crash_txn(con, tables, i)
    con.execute("SELECT csq_fault(?, ?)", (spec, dev))
    con.execute("COMMIT")
    print("C", flush=True)


def run_crash_child(db, tables, i=None, dev="", spec=""):
    args = [sys.executable, os.path.abspath(__file__), "crash", db, ",".join(tables),
            "" if i is None else str(i), dev, spec]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, CSQ_EXT=EXT))
    lines = out.stdout.split("\n")
    assert out.returncode in (0, CRASH_EXIT), (spec, dev, out.returncode, out.stdout, out.stderr[-3000:])
    assert lines and lines[0].startswith("["), (spec, dev, out.stdout, out.stderr[-3000:])
    return eval(lines[0]), out.returncode == CRASH_EXIT, "C" in lines[1:]


def crash_every_step(tables, defs, devs):
    """For each member in turn, crash a transaction before its 1st, 2nd, ...
    command on that member until the COMMIT gets through. Each child first
    reports what it found: after a crash, each table must be whole, old or
    new, and all of them the same way (one decision for the transaction).
    Returns (crashes, found new, found old)."""
    db = os.path.join(os.path.dirname(devs[0]), "db")
    con = connect(db)
    model = sqlite3.connect(":memory:", isolation_level=None)
    for t, members in defs:
        con.execute("CREATE VIRTUAL TABLE %s USING csq(id INTEGER PRIMARY KEY, a INTEGER, b REAL, "
                    "devices='%s', rowgroup=16)" % (t, ",".join(members)))
        model.execute("CREATE TABLE %s(id INTEGER PRIMARY KEY, a INTEGER, b REAL)" % t)
    con.close()
    i, crashes, seen_new, seen_old = 0, 0, 0, 0
    pending = None  # (where, old, new) of a crashed transaction, open on the model

    def found(got):
        nonlocal pending, seen_new, seen_old
        if pending is None:
            want = crash_state(model, tables)
            assert got == want, "found %r, expected %r" % (got, want)
            return
        where, old, new = pending
        pending = None
        if got == new:
            seen_new += 1
            model.execute("COMMIT")
        else:
            assert got == old, "%s: a fresh process found %r; old %r, new %r" % (where, got, old, new)
            seen_old += 1
            model.execute("ROLLBACK")

    for dev in devs:
        nth = 1
        while True:
            i += 1
            got, crashed, committed = run_crash_child(db, tables, i, dev, "op=any,nth=%d,action=crash" % nth)
            found(got)
            old = crash_state(model, tables)
            model.execute("BEGIN")
            crash_txn(model, tables, i)
            new = crash_state(model, tables)
            if not crashed:
                assert committed
                model.execute("COMMIT")
                break  # nth is past the last command the commit sends to dev
            crashes += 1
            pending = ("transaction %d, crash before command %d on %s" % (i, nth, os.path.basename(dev)),
                       old, new)
            nth += 1
    found(run_crash_child(db, tables)[0])
    # both outcomes met: a crash before the decision rolls back, after it forward
    assert crashes >= 2 * len(devs) and seen_new and seen_old, (crashes, seen_new, seen_old)
    con = connect(db)
    assert crash_state(con, tables) == crash_state(model, tables)
    con.execute("INSERT INTO %s(a) VALUES(1)" % tables[0])  # and writable
    return crashes, seen_new, seen_old


def test_crash_at_every_step_of_a_striped_commit():
    d = tmpdir()
    devs = [os.path.join(d, "a.csd"), os.path.join(d, "b.csd")]
    crash_every_step(["t"], [("t", devs)], devs)


def test_crash_at_every_step_of_a_transaction_over_two_stripes():
    """x on (a, b) and y on (b, c) in one transaction: one decision (on a,
    x's coordinator) for all three devices, so x and y are both old or both
    new. c is decided by a counter a keeps for y's stripe."""
    d = tmpdir()
    devs = [os.path.join(d, n) for n in ("a.csd", "b.csd", "c.csd")]
    crash_every_step(["x", "y"], [("x", devs[:2]), ("y", devs[1:])], devs)


if __name__ == "__main__" and len(sys.argv) >= 7 and sys.argv[1] == "crash":
    sys.path.insert(0, HERE)
    crash_child(sys.argv[2], sys.argv[3].split(","), int(sys.argv[4]) if sys.argv[4] else None,
                sys.argv[5], sys.argv[6])
