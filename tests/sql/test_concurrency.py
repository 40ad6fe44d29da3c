"""Concurrency: readers on several threads and connections (and in another
process) scan one device while a writer commits transfers and batches; they
must see only committed snapshots - the sum of the balances never moves, a
batch of log rows is there whole or not at all, rolled-back and in-flight
rows never show, what a reader has seen never goes back - and nothing may
deadlock (every thread and process runs under a timeout). Two writer
processes contend for one device and lose nothing.

Run as a program (`test_concurrency.py reader|writer DB SECONDS [ID]`) it is
the other process.
"""
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import connect, tmpdir, EXT  # noqa: E402

N_ACCT = 20
START = 1000
SECONDS = 8.0


def batch_rows(txn):
    """How many log rows transaction txn inserts (some spill row groups)."""
    return [3, 40, 150, 260, 1][txn % 5]


def setup(db):
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE acct USING csq(id INTEGER PRIMARY KEY, bal INTEGER, rowgroup=100)")
    con.execute("CREATE VIRTUAL TABLE log USING csq(txn INTEGER, i INTEGER, pad TEXT, rowgroup=100)")
    con.execute("CREATE VIRTUAL TABLE logp USING csq(txn INTEGER, i INTEGER, pad TEXT, rowgroup=100, "
                "pushdown=always)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO acct VALUES(?, ?)", [(i, START) for i in range(N_ACCT)])
    con.execute("COMMIT")
    con.close()


def write_one(con, rnd, txn, commit=True, pause=0.0):
    """One transaction: a transfer, a batch of log rows (in both log tables),
    the batch of an older transaction deleted whole."""
    a, b = rnd.sample(range(N_ACCT), 2)
    amt = rnd.randrange(1, 500)
    con.execute("BEGIN")
    con.execute("UPDATE acct SET bal = bal - ? WHERE id = ?", (amt, a))
    rows = [(txn, j, "p%d" % txn) for j in range(batch_rows(txn))]
    con.executemany("INSERT INTO log VALUES(?,?,?)", rows)
    con.executemany("INSERT INTO logp VALUES(?,?,?)", rows)
    if txn % 3 == 0:
        con.execute("DELETE FROM log WHERE txn = ?", (txn - 30,))
        con.execute("DELETE FROM logp WHERE txn = ?", (txn - 30,))
    if pause:
        time.sleep(pause)  # readers run while this transaction's row groups sit on the device
    con.execute("UPDATE acct SET bal = bal + ? WHERE id = ?", (amt, b))
    con.execute("COMMIT" if commit else "ROLLBACK")


def check_log(rows, what):
    """rows: (txn, count) of one scan. Every batch whole; no rolled-back one."""
    for txn, n in rows:
        assert txn >= 0, "%s: rolled-back batch %d is visible (%d rows)" % (what, -txn, n)
        assert n == batch_rows(txn), "%s: batch %d has %d rows, should have %d (torn read)" % (
            what, txn, n, batch_rows(txn))


def reader_loop(db, stop_at, errors, counts, tag):
    con = connect(db)
    seen = -1
    n = 0

    def scan(seen):
        s = con.execute("SELECT sum(bal), count(*) FROM acct").fetchone()
        assert s == (START * N_ACCT, N_ACCT), "%s: sum/count of balances %r" % (tag, s)
        rows = con.execute("SELECT txn, count(*) FROM log GROUP BY txn").fetchall()
        check_log(rows, tag + " log")
        top = max([t for t, _ in rows] or [-1])
        assert top >= seen, "%s: went back in time: saw batch %d, now newest is %d" % (tag, seen, top)
        rows = con.execute("SELECT txn, count(*) FROM logp WHERE i >= 0 AND pad LIKE 'p%' "
                           "GROUP BY txn").fetchall()
        check_log(rows, tag + " logp (device program)")
        return top

    try:
        while time.monotonic() < stop_at:
            try:
                seen = scan(seen)
            except sqlite3.OperationalError as e:
                # in rollback-journal mode a reader waits for a committing
                # writer's EXCLUSIVE lock, and a long read ahead of that
                # writer can outlast the busy timeout: SQLITE_BUSY, as with
                # native tables; the reader tries again
                if "locked" not in str(e).lower() and "busy" not in str(e).lower():
                    raise
                time.sleep(0.01)
                continue
            n += 1
    except Exception as e:  # noqa: BLE001
        errors.append("%s: %s: %s" % (tag, type(e).__name__, e))
    finally:
        con.close()
        counts[tag] = n


def writer_loop(db, stop_at, errors, state, seed, first_txn, step, pause_every=4, gap=0.0):
    con = connect(db)
    rnd = random.Random(seed)
    txn = first_txn
    try:
        while time.monotonic() < stop_at:
            if rnd.random() < 0.15:
                # rolled back: its batch carries a negative id, so it is easy to spot
                write_one(con, rnd, -txn, commit=False, pause=0.01)
            else:
                for attempt in range(100):
                    try:
                        write_one(con, rnd, txn, pause=0.02 if txn % pause_every == 0 else 0.0)
                        break
                    except sqlite3.OperationalError as e:
                        if "busy" not in str(e).lower() and "locked" not in str(e).lower():
                            raise
                        if con.in_transaction:
                            con.execute("ROLLBACK")
                        time.sleep(0.01)
                else:
                    raise AssertionError("writer %d: device busy for 100 attempts" % seed)
                state.append(txn)
            txn += step
            if gap:
                time.sleep(gap)  # let a writer of another process in (busy waits back off up to 50 ms: the lock is not fair)
    except Exception as e:  # noqa: BLE001
        errors.append("writer %d: %s: %s" % (seed, type(e).__name__, e))
    finally:
        con.close()


def join_all(threads, timeout, what):
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic()))
    stuck = [t.name for t in threads if t.is_alive()]
    assert not stuck, "%s: threads still running after %.0f s (deadlock?): %s" % (what, timeout, stuck)


def final_check(db, committed):
    con = connect(db)
    assert con.execute("SELECT sum(bal) FROM acct").fetchone()[0] == START * N_ACCT
    for t in ("log", "logp"):
        rows = con.execute("SELECT txn, count(*) FROM %s GROUP BY txn" % t).fetchall()
        check_log(rows, "final " + t)
        got = {x for x, _ in rows}
        want = {x for x in committed if not (x + 30 in committed and (x + 30) % 3 == 0)}
        assert got == want, "final %s: batches %s missing, %s unexpected" % (
            t, sorted(want - got)[:10], sorted(got - want)[:10])
    con.close()


def test_threads_read_while_one_writes():
    d = tmpdir()
    db = os.path.join(d, "c.db")
    setup(db)
    errors, counts, committed = [], {}, []
    stop_at = time.monotonic() + SECONDS
    th = [threading.Thread(target=writer_loop, name="writer", args=(db, stop_at, errors, committed, 1, 1, 1))]
    for k in range(4):
        th.append(threading.Thread(target=reader_loop, name="reader%d" % k,
                                   args=(db, stop_at, errors, counts, "reader%d" % k)))
    for t in th:
        t.start()
    join_all(th, SECONDS + 60, "threads")
    assert not errors, "\n".join(errors)
    assert len(committed) > 20, "writer committed only %d transactions" % len(committed)
    assert min(counts.values()) > 3, "readers made little progress: %r" % counts
    final_check(db, set(committed))
    print("    %d commits, reader scans %s" % (len(committed), counts))


def test_one_statement_one_snapshot():
    """Two scans of one table inside one statement must see the same commit,
    as they would on a native table."""
    d = tmpdir()
    db = os.path.join(d, "s.db")
    setup(db)
    errors, committed = [], []
    stop_at = time.monotonic() + 4
    w = threading.Thread(target=writer_loop, name="writer", args=(db, stop_at, errors, committed, 2, 1, 1, 1))
    w.start()
    con = connect(db)
    bad = []
    n = 0
    while time.monotonic() < stop_at:
        s = con.execute("SELECT (SELECT sum(bal) FROM acct WHERE id < 10) + "
                        "(SELECT sum(bal) FROM acct WHERE id >= 10)").fetchone()[0]
        n += 1
        if s != START * N_ACCT:
            bad.append(s)
    con.close()
    join_all([w], 60, "writer")
    assert not errors, "\n".join(errors)
    assert not bad, "%d of %d statements saw two different commits (sum %r, want %d)" % (
        len(bad), n, bad[:5], START * N_ACCT)


def test_many_device_programs_at_once():
    """More connections than the device has active program slots, each
    running its own pushed-down filter over and over: programs evict each
    other, and every query must still answer (the driver reloads), never
    fail with a program-slot error."""
    d = tmpdir()
    db = os.path.join(d, "m.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, rowgroup=1000, pushdown=always)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES(?, ?)", [(i, "v%d" % (i % 10)) for i in range(20000)])
    con.execute("COMMIT")
    con.close()
    errors = []
    stop_at = time.monotonic() + 5
    done = {}

    def run(k):
        c = connect(db)
        n = 0
        try:
            while time.monotonic() < stop_at:
                lo = k * 997 + n % 50
                got = c.execute("SELECT count(*) FROM t WHERE a >= ? AND b != 'v%d'" % (k % 10), (lo,)).fetchone()[0]
                want = sum(1 for i in range(lo, 20000) if i % 10 != k % 10)
                assert got == want, "thread %d: %d rows, want %d" % (k, got, want)
                n += 1
        except Exception as e:  # noqa: BLE001
            errors.append("thread %d after %d queries: %s" % (k, n, e))
        finally:
            c.close()
            done[k] = n

    th = [threading.Thread(target=run, args=(k,), name="q%d" % k) for k in range(10)]
    for t in th:
        t.start()
    join_all(th, 60, "program threads")
    assert not errors, "\n".join(errors[:5])


def test_reader_process_and_two_writer_processes():
    d = tmpdir()
    db = os.path.join(d, "p.db")
    setup(db)
    secs = 6
    env = dict(os.environ, CSQ_EXT=EXT)
    me = os.path.abspath(__file__)
    procs = [subprocess.Popen([sys.executable, me, "reader", db, str(secs)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
    for k in range(2):  # writer k uses transaction ids k+1, k+3, k+5, ...
        procs.append(subprocess.Popen([sys.executable, me, "writer", db, str(secs), str(k)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    # and readers on threads of this process, too
    errors, counts = [], {}
    stop_at = time.monotonic() + secs
    th = [threading.Thread(target=reader_loop, args=(db, stop_at, errors, counts, "local%d" % k))
          for k in range(2)]
    for t in th:
        t.start()
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=secs + 60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            raise AssertionError("process %s hung (deadlock?): %s" % (p.args[2], err[-2000:]))
        assert p.returncode == 0, "process %s exited %d: %s%s" % (p.args[2], p.returncode, out[-2000:],
                                                                 err[-2000:])
        outs.append(out)
    join_all(th, 60, "local readers")
    assert not errors, "\n".join(errors)
    committed = set()
    per = [len(out.split()) for out in outs[1:]]
    # both writers make progress (how many commits fit in the time depends on
    # the machine: throughput is for bench/, not a test)
    assert min(per) >= 1, "a writer process never committed (%r)" % (per,)
    for out in outs[1:]:
        committed |= {int(x) for x in out.split()}
    assert "scans" in outs[0], outs[0]
    final_check(db, committed)
    print("    %r commits by two processes; %s; local %s" % (per, outs[0].strip(), counts))


def main():
    role, db, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
    errors, counts, state = [], {}, []
    stop_at = time.monotonic() + secs
    if role == "reader":
        reader_loop(db, stop_at, errors, counts, "process reader")
        out = "scans %d" % counts.get("process reader", 0)
    else:
        k = int(sys.argv[4])
        writer_loop(db, stop_at, errors, state, 10 + k, k + 1, 2, pause_every=3, gap=0.06)
        out = " ".join(map(str, state))
    print(out)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__" and len(sys.argv) >= 4:
    main()
