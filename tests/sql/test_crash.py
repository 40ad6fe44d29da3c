"""Crash consistency: a writer process is SIGKILLed at hundreds of random
moments while it runs a deterministic stream of transactions; after each kill
a fresh process reopens the image, and what it sees must be exactly the state
after the last transaction the writer reported committed (or after the one in
flight, if its COMMIT had returned but the report had not yet left), and the
image must keep working: that same process is the next writer.

The stream (transaction id -> statements) is a pure function of the id, so
the parent replays the committed transactions on a native in-memory SQLite
database (the model) and compares a digest of every row of every table.

The same runs with every table striped over two device images
(devices=, vtab/stripe.c), the tables' coordinators on different images, so
that a kill can land between the steps of the two-step commit of
device/store/FORMAT.md ("Commit protocol") and every reopen must settle it.

Run as a program (`test_crash.py writer DB START`) it is the writer child.
"""
import hashlib
import os
import random
import select
import signal
import sqlite3
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import connect, tmpdir, EXT  # noqa: E402

SEED = 20240611
N_ACCT = 10
KILLS = 220            # >= 200 random kill moments
BUDGET_S = 65          # wall-clock budget of the kill loop

def schema(csq, devs=None):
    """devs: two image paths to stripe every table over (t and m coordinated
    by the first, acct by the second), or None for the default device."""
    if csq:
        on = (lambda k: ", devices='%s,%s'" % (devs[k], devs[1 - k])) if devs else (lambda k: "")
        return ["CREATE VIRTUAL TABLE t USING csq(id INTEGER PRIMARY KEY, txn INTEGER, k INTEGER, v, "
                "rowgroup=100%s)" % on(0),
                "CREATE VIRTUAL TABLE acct USING csq(id INTEGER PRIMARY KEY, bal INTEGER, rowgroup=100%s)" % on(1),
                "CREATE VIRTUAL TABLE m USING csq(id INTEGER PRIMARY KEY, last INTEGER%s)" % on(0)]
    return ["CREATE TABLE t(id INTEGER PRIMARY KEY, txn INTEGER, k INTEGER, v)",
            "CREATE TABLE acct(id INTEGER PRIMARY KEY, bal INTEGER)",
            "CREATE TABLE m(id INTEGER PRIMARY KEY, last INTEGER)"]


SEED_SQL = [("INSERT INTO acct VALUES(?, 1000)", [(i,) for i in range(N_ACCT)]),
            ("INSERT INTO m VALUES(0, 0)", None)]


def value(rnd, n):
    k = rnd.randrange(6)
    if k == 0:
        return None
    if k == 1:
        return rnd.randrange(-2**40, 2**40)
    if k == 2:
        return rnd.uniform(-1e9, 1e9)
    if k == 3:
        return "s%d-" % n + "x" * rnd.randrange(0, 60)
    if k == 4:
        return bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 12)))
    return "n%d" % (n % 17)


def txn(i):
    """Transaction i: (commits, [(sql, params-or-list-of-params, many)]).
    Only its id decides its statements, so the model can replay it."""
    rnd = random.Random(SEED * 1000003 + i)
    commits = rnd.random() > 0.15
    ops = []
    kinds = rnd.choices(["small", "medium", "spill", "update", "delete", "transfer", "savepoint"],
                        weights=[4, 3, 2, 3, 2, 3, 1], k=rnd.randrange(1, 5))
    base = i * 10000
    seq = [0]

    def rows(n):
        out = []
        for _ in range(n):
            j = seq[0]
            seq[0] += 1
            out.append((base + j, i, rnd.randrange(0, 1000), value(rnd, j)))
        return out

    for kind in kinds:
        if kind == "small":
            ops.append(("INSERT INTO t VALUES(?,?,?,?)", rows(rnd.randrange(1, 6)), True))
        elif kind == "medium":
            ops.append(("INSERT INTO t VALUES(?,?,?,?)", rows(rnd.randrange(20, 90)), True))
        elif kind == "spill":  # one or more full row groups (rowgroup=100) before COMMIT
            ops.append(("INSERT INTO t VALUES(?,?,?,?)", rows(rnd.randrange(100, 320)), True))
        elif kind == "update":
            ops.append(("UPDATE t SET k = k + 1, v = ? WHERE k % 13 = ?",
                        (value(rnd, i), rnd.randrange(13)), False))
        elif kind == "delete":
            if rnd.random() < 0.5:
                ops.append(("DELETE FROM t WHERE txn < ?", (i - 25,), False))
            else:
                ops.append(("DELETE FROM t WHERE k % 7 = ?", (rnd.randrange(7),), False))
        elif kind == "transfer":
            a, b = rnd.sample(range(N_ACCT), 2)
            amt = rnd.randrange(1, 300)
            ops.append(("UPDATE acct SET bal = bal - ? WHERE id = ?", (amt, a), False))
            ops.append(("UPDATE acct SET bal = bal + ? WHERE id = ?", (amt, b), False))
        elif kind == "savepoint":
            ops.append(("SAVEPOINT sp", None, False))
            ops.append(("INSERT INTO t VALUES(?,?,?,?)", rows(rnd.randrange(50, 250)), True))
            ops.append(("DELETE FROM t WHERE k < ?", (rnd.randrange(300),), False))
            ops.append(("ROLLBACK TO sp", None, False))
            ops.append(("RELEASE sp", None, False))
    if commits:
        ops.append(("UPDATE m SET last = ? WHERE id = 0", (i,), False))
    # the table is kept small so that every check stays cheap
    if i % 9 == 0:
        ops.append(("DELETE FROM t WHERE txn < ?", (i - 12,), False))
    return commits, ops


def run_ops(con, ops):
    for sql, params, many in ops:
        if many:
            con.executemany(sql, params)
        elif params is None:
            con.execute(sql)
        else:
            con.execute(sql, params)


DUMP = ["SELECT id, txn, k, v, typeof(v) FROM t ORDER BY id",
        "SELECT id, bal FROM acct ORDER BY id",
        "SELECT id, last FROM m ORDER BY id"]


def digest(con):
    h = hashlib.sha256()
    n = 0
    for q in DUMP:
        for r in con.execute(q):
            h.update(repr(r).encode())
            n += 1
        h.update(b"|")
    return "%d:%s" % (n, h.hexdigest()[:32])


# ---- the writer child --------------------------------------------------------

def say(line):
    os.write(1, (line + "\n").encode())


def writer(db, start):
    con = connect(db)
    last = con.execute("SELECT last FROM m").fetchone()[0]
    bal = con.execute("SELECT sum(bal) FROM acct").fetchone()[0]
    say("S %d %d %s" % (last, bal, digest(con)))
    i = last + 1
    while start >= 0:
        commits, ops = txn(i)
        con.execute("BEGIN")
        run_ops(con, ops)
        if commits:
            con.execute("COMMIT")
            say("C %d" % i)
        else:
            con.execute("ROLLBACK")
            say("R %d" % i)
        i += 1
    say("D")


def create(db, devs=None):
    """The schema and seed rows, before any kill (CREATE itself spans the
    database file and the image, which is not what this test is about)."""
    con = connect(db)
    for s in schema(True, devs):
        con.execute(s)
    con.execute("BEGIN")
    for sql, params in SEED_SQL:
        if params:
            con.executemany(sql, params)
        else:
            con.execute(sql)
    con.execute("COMMIT")
    con.close()


# ---- the parent ----------------------------------------------------------------

class Model:
    """The committed state, replayed on native SQLite."""

    def __init__(self):
        self.con = sqlite3.connect(":memory:", isolation_level=None)
        for s in schema(False):
            self.con.execute(s)
        for sql, params in SEED_SQL:
            if params:
                self.con.executemany(sql, params)
            else:
                self.con.execute(sql)
        self.last = 0
        self.unreported = 0  # kills that landed after COMMIT returned, before the report

    def apply(self, i):
        commits, ops = txn(i)
        assert commits, "transaction %d rolls back; it cannot be committed" % i
        self.con.execute("BEGIN")
        run_ops(self.con, ops)
        self.con.execute("COMMIT")
        self.last = i

    def next_commit(self):
        i = self.last + 1
        while not txn(i)[0]:
            i += 1
        return i

    def digest(self):
        return digest(self.con)


class Child:
    def __init__(self, db, start=0):
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "writer", db, str(start)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=dict(os.environ, CSQ_EXT=EXT))
        self.buf = b""
        self.lines = []

    def pump(self, until):
        """Collect output lines until time `until` or EOF."""
        fd = self.p.stdout.fileno()
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return True
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                return True
            data = os.read(fd, 65536)
            if not data:
                return False
            self.buf += data
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                self.lines.append(line.decode())

    def kill(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()
        self.pump(time.monotonic() + 5)  # whatever was written before death
        err = self.p.stderr.read().decode(errors="replace")
        self.p.stdout.close()
        self.p.stderr.close()
        return err


def check_state(model, line, where):
    """The S line of a fresh process against the model; advances the model
    when the transaction in flight at the kill turns out to be committed."""
    _, last, bal, dig = line.split(" ")
    last = int(last)
    assert int(bal) == 1000 * N_ACCT, "%s: sum of balances %s (a transfer is torn)" % (where, bal)
    if last == model.last:
        pass
    else:
        nxt = model.next_commit()
        assert last == nxt, "%s: image is at transaction %d; last reported %d, next commit %d" % (
            where, last, model.last, nxt)
        model.apply(nxt)  # committed, the report was lost with the process
        model.unreported += 1
    want = model.digest()
    assert dig == want, "%s: rows differ from the committed state after transaction %d " \
        "(image %s, model %s)" % (where, model.last, dig, want)


def consume(model, lines, where):
    for line in lines:
        if line.startswith("C "):
            i = int(line[2:])
            nxt = model.next_commit()
            assert i == nxt, "%s: writer reported commit %d, expected %d" % (where, i, nxt)
            model.apply(i)


def kill_loop(db, seed, n_kills, budget_s):
    """Kill a writer of db n_kills times at random moments (seeded), spread
    over about budget_s seconds; check every reopen against the model.
    Returns the model."""
    rnd = random.Random(seed)
    model = Model()
    t0 = time.monotonic()
    kills = 0
    while kills < n_kills:
        elapsed = time.monotonic() - t0
        # a stall guard only (the sanitizers and a loaded machine slow each
        # kill several times over; speed is bench/'s business)
        assert elapsed < budget_s * 10, "kill loop stalled: %d kills in %.0f s" % (kills, elapsed)
        c = Child(db)
        where = "kill %d" % (kills + 1)
        if rnd.random() < 0.1:
            # during startup/open/first reads
            c.pump(time.monotonic() + rnd.uniform(0, 0.08))
        else:
            alive = True
            deadline = time.monotonic() + 30
            while alive and not any(l.startswith("S ") for l in c.lines):
                alive = c.pump(min(deadline, time.monotonic() + 0.05))
                assert time.monotonic() < deadline, "%s: reopening took over 30 s" % where
            if alive:
                # spread over the budget: shorter delays when behind schedule
                left = max(0.05, (budget_s - (time.monotonic() - t0)) / max(1, n_kills - kills) - 0.12)
                alive = c.pump(time.monotonic() + rnd.uniform(0, 2 * left))
        rc = c.p.poll()
        err = c.kill()
        # after the kill: it reads what the writer printed up to its death,
        # so every reported commit reaches the model (a copy taken before
        # could miss commits made between the last read and the kill)
        lines = list(c.lines)
        if rc is not None:
            raise AssertionError("%s: writer exited on its own (%r): %s\n%s" % (where, rc, lines[-3:], err))
        kills += 1
        s = [l for l in lines if l.startswith("S ")]
        if s:
            check_state(model, s[0], where)
            consume(model, lines, where)
    # a final reader: the image after the last kill, then a few queries
    c = Child(db, start=-1)
    alive = True
    deadline = time.monotonic() + 30
    while alive and "D" not in c.lines:
        alive = c.pump(deadline)
        assert time.monotonic() < deadline, "final reopen hung"
    s = [l for l in c.lines if l.startswith("S ")]
    assert s, "final reopen printed nothing: %s" % c.kill()
    c.p.wait()
    check_state(model, s[0], "final")
    con = connect(db)
    for q in ["SELECT count(*), sum(k), count(v) FROM t WHERE k > 500",
              "SELECT txn, count(*) FROM t GROUP BY txn ORDER BY txn",
              "SELECT sum(bal), min(bal), max(bal) FROM acct"]:
        assert con.execute(q).fetchall() == model.con.execute(q).fetchall(), q
    print("    %d kills, %d transactions committed (%d found committed though unreported), %.1f s"
          % (kills, model.last, model.unreported, time.monotonic() - t0))
    return model


def test_sigkill_at_random_moments():
    d = tmpdir()
    db = os.path.join(d, "crash.db")
    create(db)
    model = kill_loop(db, SEED, KILLS, BUDGET_S)
    assert model.last > 100, "only %d transactions committed" % model.last


def test_sigkill_striped_tables():
    """Every table striped over a.csd and b.csd (acct coordinated by b):
    a transaction is one two-step commit over both images, and a kill
    between its steps must leave all tables old or all new."""
    d = tmpdir()
    db = os.path.join(d, "crash.db")
    create(db, [os.path.join(d, "a.csd"), os.path.join(d, "b.csd")])
    model = kill_loop(db, SEED + 1, 60, 20)
    assert model.last > 30, "only %d transactions committed" % model.last


if __name__ == "__main__" and len(sys.argv) >= 4 and sys.argv[1] == "writer":
    # start 0: run until killed; start -1: only print the state
    writer(sys.argv[2], int(sys.argv[3]))
