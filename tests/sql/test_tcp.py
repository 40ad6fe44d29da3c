"""tests/sql/test_tcp.py - csq tables on a device across NVMe/TCP: build/csq-target
serving images on loopback, tables with device='nvme-tcp://...' (and devices=
lists over two targets) checked against native tables, reopened, the target
killed mid-query (a clear error, no hang) and restarted (committed state
served), SIGTERM, the discovery controller, a fake target that sends garbage,
and a raw-socket hostile host against csq-target (every malformed PDU ends
only its own connection; every wrong command gets its NVMe status)."""
import os
import random
import signal
import socket
import sqlite3
import struct
import subprocess
import threading
import time

from harness import Skip, connect, expect_error, same_rows, stats, tmpdir

BUILD = os.environ.get("CSQ_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
TARGET = os.path.join(BUILD, "csq-target")
NQN = "nqn.2026-12.io.csq:"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Target:
    """A csq-target process serving images (created in dir) on addr:port (a
    free port by default). prefix runs it in another network namespace
    (["ip", "netns", "exec", NS]); its stderr goes to dir/target-NAME.log
    (NAME: the port by default). start and kill9 never overlap (one lock), so
    a test's thread may kill it while another restarts it."""

    def __init__(self, d, images, port=None, addr="127.0.0.1", prefix=(), name=None):
        if not os.access(TARGET, os.X_OK):
            raise Skip("no %s (make all builds it)" % TARGET)
        self.dir, self.images, self.image = d, images, images[0]
        self.args = []  # more options, e.g. ["-f", FAULTS]
        self.addr, self.prefix = addr, list(prefix)
        self.port = port or free_port()
        self.logpath = os.path.join(d, "target-%s.log" % (self.port if name is None else name))
        self.lock = threading.Lock()
        self.start()

    def start(self):
        with self.lock:
            self.log = open(self.logpath, "a")
            self.p = subprocess.Popen(self.prefix + [
                TARGET, "-l", "%s:%d" % (self.addr, self.port), "-t", "1"] + self.args +
                [os.path.join(self.dir, i) for i in self.images], stderr=self.log)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection((self.addr, self.port), timeout=1).close()
                return
            except OSError:
                if self.p.poll() is not None:
                    raise AssertionError("csq-target exited: %s" % self.read_log())
                time.sleep(0.05)
        raise AssertionError("csq-target did not listen on %s:%d" % (self.addr, self.port))

    def url(self, image=None):
        return "nvme-tcp://%s:%d/%s%s" % (self.addr, self.port, NQN, image or self.image)

    def read_log(self):
        if not self.log.closed:
            self.log.flush()
        return open(self.logpath).read()

    def kill9(self):
        with self.lock:
            if self.p.poll() is None:
                self.p.kill()
            self.p.wait()

    def stop(self):
        with self.lock:
            if self.p.poll() is None:
                self.p.send_signal(signal.SIGTERM)
                try:
                    self.p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.p.kill()
                    self.p.wait()
                    raise AssertionError("csq-target ignored SIGTERM")
            self.log.close()
        log = self.read_log()
        # under make sanitize the target is an ASan build: its findings fail the test
        assert "Sanitizer" not in log and "runtime error" not in log, log[-3000:]


def rand_row(r):
    return (r.choice([None, r.randint(-50, 50), r.randint(0, 10 ** 6), "7", 2.5]),
            r.choice([None, r.random() * 100, float(r.randint(0, 9)), 3]),
            r.choice([None, "x", "yy", "zzz", "w%d" % r.randint(0, 30), b"\x00\x01"]))


QUERIES = [
    "SELECT id, a, b, c FROM {t} ORDER BY id",
    "SELECT id, a FROM {t} WHERE a > 10 ORDER BY id",
    "SELECT id, c FROM {t} WHERE c = 'x' OR a < 0 ORDER BY id",
    "SELECT count(*), sum(a), min(c), max(b) FROM {t} WHERE b IS NOT NULL",
    "SELECT c, count(*), sum(a), avg(b) FROM {t} GROUP BY c ORDER BY c",
    "SELECT typeof(a), count(*) FROM {t} GROUP BY 1 ORDER BY 1",
    "SELECT id FROM {t} WHERE c LIKE 'w1%' ORDER BY id",
]


def rnd6(rows):
    return [tuple(round(v, 6) if isinstance(v, float) else v for v in r) for r in rows]


def check_same(con, t, n):
    for q in QUERIES:
        same_rows(rnd6(con.execute(q.format(t=t)).fetchall()),
                  rnd6(con.execute(q.format(t=n)).fetchall()), q)
    for q in QUERIES[3:6]:
        con.execute("DROP TABLE IF EXISTS temp.v")
        con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query('%s')" % q.format(t=t))
        got = sorted(con.execute("SELECT * FROM v").fetchall(), key=repr)
        want = sorted(con.execute(q.format(t=n)).fetchall(), key=repr)
        same_rows(rnd6(got), rnd6(want), "view " + q)


COLS = "id INTEGER PRIMARY KEY, a, b REAL, c TEXT"


def create_pair(con, opts):
    """Table t on csq (with the options opts) and its native twin n, both with
    the columns fill() writes."""
    con.execute("CREATE VIRTUAL TABLE t USING csq(%s, %s)" % (COLS, opts))
    con.execute("CREATE TABLE n(%s)" % COLS)


def fill(con, t, n, rows, seed):
    r = random.Random(seed)
    con.execute("BEGIN")
    for i in range(rows):
        row = (i + 1,) + rand_row(r)
        con.execute("INSERT INTO %s VALUES(?,?,?,?)" % t, row)
        con.execute("INSERT INTO %s VALUES(?,?,?,?)" % n, row)
    con.execute("COMMIT")


def test_tcp_table_matches_native_and_reopens():
    d = tmpdir()
    tg = Target(d, ["x.csd"])
    try:
        db = os.path.join(d, "t.db")
        con = connect(db)
        create_pair(con, "device='%s'" % tg.url("x.csd"))
        fill(con, "t", "n", 6000, 1)
        check_same(con, "t", "n")
        # deletes and updates travel too
        con.execute("DELETE FROM t WHERE id % 7 = 0")
        con.execute("DELETE FROM n WHERE id % 7 = 0")
        con.execute("UPDATE t SET a = 99 WHERE id % 11 = 0")
        con.execute("UPDATE n SET a = 99 WHERE id % 11 = 0")
        check_same(con, "t", "n")
        s = stats(con)
        assert s["bytes_to_host"] > 0 and s["bytes_from_host"] > 0, s
        con.close()
        # a new connection (a new NVMe/TCP controller) reads the committed state
        con = connect(db)
        check_same(con, "t", "n")
        con.close()
        # a device that is not served: a clear error
        con = connect(os.path.join(d, "u.db"))
        expect_error(lambda: con.execute(
            "CREATE VIRTUAL TABLE u USING csq(a, device='%s')" % tg.url("nope.csd")),
            "nope.csd", "Connect")
        expect_error(lambda: con.execute(
            "CREATE VIRTUAL TABLE u USING csq(a, device='nvme-tcp://127.0.0.1:%d/%sx.csd')" %
            (free_port(), NQN)), "csq-target running")
        expect_error(lambda: con.execute(
            "CREATE VIRTUAL TABLE u USING csq(a, device='nvme-tcp://127.0.0.1/x')"),
            "nvme-tcp://HOST:PORT/NQN")
        con.close()
    finally:
        tg.stop()
    log = tg.read_log()
    assert "qid 1" in log and "closed by the host" in log, log


def test_without_io_uring_the_same_answers():
    """CSQ_TCP_URING=0: the queues use send/recv and ppoll, as where io_uring
    is unavailable (tcp_sock.c); the answers, with and without digests, are
    the same as native SQLite's, and a killed target still gives the link's
    error."""
    d = tmpdir()
    tg = Target(d, ["x.csd"])
    old = os.environ.get("CSQ_TCP_URING")
    os.environ["CSQ_TCP_URING"] = "0"
    try:
        con = connect(os.path.join(d, "t.db"))
        create_pair(con, "device='%s?digest=1'" % tg.url("x.csd"))
        fill(con, "t", "n", 20000, 3)
        check_same(con, "t", "n")
        con.close()
        con = connect(os.path.join(d, "t.db"))
        con.execute("DROP TABLE t")
        con.execute("CREATE VIRTUAL TABLE t USING csq(%s, device='%s?reconnect=0')" %
                    (COLS, tg.url("x.csd")))
        con.execute("INSERT INTO t SELECT * FROM n")
        check_same(con, "t", "n")
        tg.kill9()
        expect_error(lambda: con.execute("SELECT sum(a) FROM t").fetchall(), "NVMe/TCP link")
        con.close()
    finally:
        if old is None:
            del os.environ["CSQ_TCP_URING"]
        else:
            os.environ["CSQ_TCP_URING"] = old
        tg.stop()


def test_stripe_over_two_targets():
    d = tmpdir()
    t1, t2 = Target(d, ["a.csd"]), Target(d, ["b.csd"])
    try:
        con = connect(os.path.join(d, "s.db"))
        create_pair(con, "devices='%s,%s'" % (t1.url("a.csd"), t2.url("b.csd")))
        fill(con, "t", "n", 5000, 2)
        check_same(con, "t", "n")
        con.close()
    finally:
        t1.stop()
        t2.stop()
    assert "qid 1" in t1.read_log() and "qid 1" in t2.read_log()


def test_target_killed_mid_query_then_restarted():
    d = tmpdir()
    tg = Target(d, ["k.csd"])
    try:
        db = os.path.join(d, "k.db")
        con = connect(db)
        create_pair(con, "device='%s'" % tg.url("k.csd"))
        fill(con, "t", "n", 40000, 3)
        want = con.execute("SELECT count(*), sum(a) FROM n WHERE typeof(a) = 'integer'").fetchall()
        cur = con.execute("SELECT id, a, c FROM t")
        cur.fetchone()
        tg.kill9()
        t0 = time.time()

        def drain():
            for _ in cur:
                pass

        # the rows already on the host may finish the statement; any more
        # reading fails with the link's error, never waits for the timeout
        try:
            drain()
        except sqlite3.Error as e:
            assert "link" in str(e).lower(), e
        msg = expect_error(lambda: con.execute("SELECT count(*) FROM t WHERE a > 5").fetchall(),
                           "link")
        assert time.time() - t0 < 20, "the error took %.1f s" % (time.time() - t0)
        assert "nvme-tcp://" in msg, msg
        con.close()
        tg.start()
        con = connect(db)
        got = con.execute("SELECT count(*), sum(a) FROM t WHERE typeof(a) = 'integer'").fetchall()
        same_rows(got, want, "after restart")
        check_same(con, "t", "n")
        con.close()
    finally:
        tg.stop()


def restart_soon(tg, after, down=0.3):
    """Kill the target (SIGKILL) after `after` seconds, start it `down` later."""
    def run():
        time.sleep(after)
        tg.kill9()
        time.sleep(down)
        tg.start()
    th = threading.Thread(target=run)
    th.start()
    return th


def test_reconnect_keeps_committed_writes_across_target_restarts():
    """Transactions and queries run while the target is killed and restarted
    twice: the link reconnects; every transaction that committed is there
    exactly once, every one that failed is wholly absent or wholly there (a
    failed commit may have reached the media), and queries agree with a
    native table holding the same rows."""
    d = tmpdir()
    tg = Target(d, ["r.csd"])
    try:
        db = os.path.join(d, "r.db")
        con = connect(db)
        con.execute("CREATE VIRTUAL TABLE t USING csq(id INTEGER PRIMARY KEY, a, b REAL, c TEXT, "
                    "device='%s')" % tg.url("r.csd"))
        r = random.Random(7)
        done, failed, errors = [], [], []
        batch, k = 40, 0
        for restart in (0.4, 0.6):
            th = restart_soon(tg, restart)
            t_end = time.time() + restart + 1.5
            while time.time() < t_end or th.is_alive():
                rows = [(k * batch + i + 1,) + rand_row(r) for i in range(batch)]
                k += 1
                try:
                    con.execute("BEGIN")
                    con.executemany("INSERT INTO t VALUES(?,?,?,?)", rows)
                    con.execute("COMMIT")
                    done.append(rows)
                except sqlite3.Error as e:
                    errors.append(str(e))
                    failed.append(rows)
                    try:
                        con.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                try:
                    con.execute("SELECT count(*), sum(a) FROM t WHERE b > 1").fetchall()
                except sqlite3.Error as e:
                    errors.append(str(e))
            th.join()
        for e in errors:
            # a failure says it was the link, never a timeout or a crash
            assert "link" in e.lower() or "lost" in e.lower(), e
        have = {row[0]: row for row in con.execute("SELECT id, a, b, c FROM t")}
        want = []
        for rows in done:
            for row in rows:
                assert row[0] in have, "committed row %d lost" % row[0]
            want += rows
        for rows in failed:
            n = sum(row[0] in have for row in rows)
            assert n in (0, len(rows)), "a failed transaction is half there (%d rows)" % n
            if n:
                want += rows
        assert len(have) == len(want), (len(have), len(want))
        con.execute("CREATE TABLE n(id INTEGER PRIMARY KEY, a, b REAL, c TEXT)")
        con.executemany("INSERT INTO n VALUES(?,?,?,?)", want)
        check_same(con, "t", "n")
        assert len(done) > 10, "only %d transactions committed" % len(done)
        con.close()
        # a new process-level open reads the same committed state
        con = connect(db)
        check_same(con, "t", "n")
        con.close()
    finally:
        tg.stop()


def test_reconnect_zero_fails_at_once_and_reconnect_gives_up():
    d = tmpdir()
    tg = Target(d, ["z0.csd", "z2.csd"])
    try:
        for n, frag in ((0, "is down"), (2, "2 reconnection")):
            con = connect(os.path.join(d, "z%d.db" % n))
            con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, device='%s?reconnect=%d')" %
                        (tg.url("z%d.csd" % n), n))
            con.execute("INSERT INTO t VALUES(1)")
            tg.kill9()
            t0 = time.time()
            msg = expect_error(lambda: con.execute("SELECT sum(a) FROM t WHERE a > 0").fetchall(),
                               "link", frag)
            assert "nvme-tcp://" in msg, msg
            assert time.time() - t0 < 10, time.time() - t0
            con.close()
            tg.start()
        con = connect(os.path.join(d, "b.db"))
        expect_error(lambda: con.execute(
            "CREATE VIRTUAL TABLE u USING csq(a, device='%s?reconnect=x')" % tg.url("z0.csd")),
            "reconnect=N")
        con.close()
    finally:
        tg.stop()


def crash_then_restart(tg, faults):
    """Restart tg with the fault rules `faults` (one ends it, action=crash);
    once it has died, start it again without them. Returns the watcher."""
    tg.stop()
    tg.args = ["-f", faults]
    tg.start()

    def watch():
        tg.p.wait()
        assert tg.p.returncode == 86, tg.p.returncode  # the fault's crash
        tg.args = []
        tg.start()
    th = threading.Thread(target=watch)
    th.start()
    return th


def test_commands_in_flight_when_the_target_dies():
    """The target dies as a command arrives and comes back: a read in flight
    is sent again and the query answers as if nothing happened; a write in
    flight is sent again and its transaction either commits or fails whole."""
    d = tmpdir()
    tg = Target(d, ["f.csd"])
    try:
        db = os.path.join(d, "f.db")
        con = connect(db)
        create_pair(con, "device='%s'" % tg.url("f.csd"))
        fill(con, "t", "n", 5000, 11)
        con.close()
        q = "SELECT count(*), sum(a) FROM %s WHERE a > 5"
        th = crash_then_restart(tg, "op=nvm_read,nth=3,action=crash")
        con = connect(db)
        # the read in flight is sent again to the restarted target: the same answer
        same_rows(con.execute(q % "t").fetchall(), con.execute(q % "n").fetchall(), "re-sent")
        th.join()
        con.close()
        th = crash_then_restart(tg, "op=nvm_write,nth=1,action=crash")
        con = connect(db)
        rows = [(100000 + i,) + rand_row(random.Random(i)) for i in range(300)]
        try:
            con.execute("BEGIN")
            con.executemany("INSERT INTO t VALUES(?,?,?,?)", rows)
            con.execute("COMMIT")
            committed = True
        except sqlite3.Error as e:
            assert "link" in str(e).lower() or "lost" in str(e).lower(), e
            committed = False
            try:
                con.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        th.join()
        n = con.execute("SELECT count(*) FROM t WHERE id >= 100000").fetchone()[0]
        assert n == (300 if committed else n) and n in (0, 300), (committed, n)
        if n:
            con.executemany("INSERT INTO n VALUES(?,?,?,?)", rows)
        check_same(con, "t", "n")
        con.close()
    finally:
        tg.stop()


def test_sigterm_clean_stop():
    d = tmpdir()
    tg = Target(d, ["g.csd"])
    db = os.path.join(d, "g.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, device='%s')" % tg.url("g.csd"))
    con.execute("WITH RECURSIVE s(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM s WHERE v < 3000) "
                "INSERT INTO t SELECT v FROM s")
    con.close()
    t0 = time.time()
    tg.stop()
    assert tg.p.returncode == 0, tg.p.returncode
    assert time.time() - t0 < 10
    assert "stopped" in tg.read_log()
    tg.start()
    try:
        con = connect(db)
        assert con.execute("SELECT count(*), sum(a) FROM t").fetchall() == [(3000, 4501500)]
        con.close()
    finally:
        tg.stop()


# ---- a raw NVMe/TCP host ---------------------------------------------------


class Raw:
    def __init__(self, port, hdgst=False, ddgst=False):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.hd, self.dd = hdgst, ddgst

    def recv_all(self, n):
        b = b""
        while len(b) < n:
            k = self.s.recv(n - len(b))
            if not k:
                raise EOFError("closed")
            b += k
        return b

    def pdu(self):
        ch = self.recv_all(8)
        t, f, hl, pdo, plen = struct.unpack("<BBBBI", ch)
        return t, f, ch + self.recv_all(plen - 8)

    def closed(self):
        """True if the target ends the connection (after an optional TermReq)."""
        try:
            while True:
                t, f, b = self.pdu()
                if t == 3:
                    continue
        except (EOFError, ConnectionResetError):
            return True
        except socket.timeout:
            return False

    def icreq(self):
        dg = (1 if self.hd else 0) | (2 if self.dd else 0)
        self.s.sendall(struct.pack("<BBBBIHBBI", 0, 0, 128, 0, 128, 0, 0, dg, 0) + bytes(112))
        t, f, b = self.pdu()
        assert t == 1 and len(b) == 128, (t, len(b))

    def capsule(self, sqe, data=b"", bad_dd=False):
        flags = 1 if self.hd else 0
        hlen = 72
        hd = 4 if self.hd else 0
        dd = 4 if (self.dd and data) else 0
        if dd:
            flags |= 2
        pdo = hlen + hd if data else 0
        ch = struct.pack("<BBBBI", 4, flags, hlen, pdo, hlen + hd + len(data) + dd)
        b = ch + sqe
        if self.hd:
            b += struct.pack("<I", crc32c(b))
        b += data
        if dd:
            b += struct.pack("<I", crc32c(data) ^ (1 if bad_dd else 0))
        self.s.sendall(b)

    def resp(self):
        t, f, b = self.pdu()
        while t == 7:  # C2HData
            t, f, b = self.pdu()
        assert t == 5, t
        o = 12 if self.hd else 8
        dw0, dw1, sqhd, sqid, cid, st = struct.unpack("<IIHHHH", b[8:24])
        return cid, st >> 1, dw0

    def connect(self, nqn, qid=0, cntlid=0xFFFF, host=b"nqn.test-host", kato=0):
        data = (bytes(16) + struct.pack("<H", cntlid) + bytes(238) + nqn.encode().ljust(256, b"\0") +
                host.ljust(256, b"\0") + bytes(256))
        self.capsule(sqe(0x7F, 1, nsid=1, sgl=(0x01, 1024),
                         extra=struct.pack("<HHHBxI", 0, qid, 31, 0, kato)), data)
        return self.resp()

    def enable(self):
        self.capsule(sqe(0x7F, 2, nsid=0, extra=struct.pack("<B3xIQ", 0, 0x14, 1)))
        return self.resp()


def crc32c(b):
    crc = 0xFFFFFFFF
    for x in b:
        crc ^= x
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def sqe(opc, cid, nsid=0, sgl=None, cdws=(0,) * 6, extra=None):
    flags, dptr = 0, bytes(16)
    if sgl:
        flags, dptr = 0x40, struct.pack("<QI3xB", 0, sgl[1], sgl[0])
    b = struct.pack("<BBHI", opc, flags, cid, nsid) + bytes(16) + dptr + struct.pack("<6I", *cdws)
    if extra:
        b = b[:40] + extra + b[40 + len(extra):]
    return b


def test_hostile_host_against_target():
    d = tmpdir()
    tg = Target(d, ["h.csd"])
    try:
        sub = NQN + "h.csd"
        # malformed PDUs: a TermReq and the connection ends
        cases = [
            struct.pack("<BBBBI", 0x0E, 0, 24, 0, 24) + bytes(16),        # unknown type
            struct.pack("<BBBBI", 4, 0, 24, 0, 24) + bytes(16),           # wrong HLEN
            struct.pack("<BBBBI", 4, 0, 72, 0, 0xFFFFFF) + bytes(64),     # wrong PLEN
            struct.pack("<BBBBI", 5, 0, 24, 0, 24) + bytes(16),           # a host-bound type
            struct.pack("<BBBBI", 6, 0, 24, 24, 28) + bytes(20),          # H2CData for no R2T
        ]
        for i, bad in enumerate(cases):
            r = Raw(tg.port)
            r.icreq()
            assert r.connect(sub)[1] == 0
            r.s.sendall(bad)
            assert r.closed(), "case %d" % i
        # a PDU before ICReq
        r = Raw(tg.port)
        r.s.sendall(struct.pack("<BBBBI", 4, 0, 72, 0, 72) + bytes(64))
        assert r.closed()
        # a header digest that does not match
        r = Raw(tg.port, hdgst=True)
        r.icreq()
        h = struct.pack("<BBBBI", 4, 1, 72, 0, 76) + sqe(0x18, 5)
        r.s.sendall(h + struct.pack("<I", crc32c(h) ^ 1))
        assert r.closed()
        # well-formed but wrong commands: their status, and the connection goes on
        r = Raw(tg.port, hdgst=True, ddgst=True)
        r.icreq()
        r.capsule(sqe(0x18, 9))
        assert r.resp() == (9, 0x400C, 0)          # Keep Alive before Connect: sequence error
        cid, sf, cntlid = r.connect(sub)
        assert sf == 0, hex(sf)
        r.capsule(sqe(0x06, 10, sgl=(0x5A, 4096), cdws=(1, 0, 0, 0, 0, 0)))
        assert r.resp()[1] & 0x3FF == 0x00C        # before CC.EN
        assert r.enable()[1] == 0
        r.capsule(sqe(0xEE, 11))
        assert r.resp()[1] & 0x3FF == 0x001        # unknown admin opcode
        r.capsule(sqe(0x18, 12))
        assert r.resp() == (12, 0, 0)              # Keep Alive
        r.capsule(sqe(0x06, 13, sgl=(0x5A, 100), cdws=(1, 0, 0, 0, 0, 0)))
        assert r.resp()[1] & 0x3FF == 0x00D        # SGL shorter than the data
        # a data digest that does not match: Transient Transport Error
        r.capsule(sqe(0x89, 14, sgl=(0x01, 32), cdws=(0, 1, 0, 0, 0, 0)), bytes(32), bad_dd=True)
        assert r.resp()[1] & 0x3FF == 0x022
        # I/O queues: a bad qid, an unknown controller, then a good one
        q = Raw(tg.port)
        q.icreq()
        assert q.connect(sub, qid=200, cntlid=cntlid)[1] & 0x7FF == 0x182
        q = Raw(tg.port)
        q.icreq()
        assert q.connect(sub, qid=1, cntlid=cntlid + 77)[1] & 0x7FF == 0x182
        q = Raw(tg.port)
        q.icreq()
        assert q.connect(sub, qid=1, cntlid=cntlid, host=b"someone-else")[1] & 0x7FF == 0x184
        q = Raw(tg.port)
        q.icreq()
        assert q.connect(sub, qid=1, cntlid=cntlid)[1] == 0
        q2 = Raw(tg.port)
        q2.icreq()
        assert q2.connect(sub, qid=1, cntlid=cntlid)[1] & 0x7FF == 0x182  # qid taken
        q.capsule(sqe(0xEE, 20, nsid=1))
        assert q.resp()[1] & 0x3FF == 0x001        # unknown I/O opcode
        q.capsule(sqe(0x02, 21, nsid=1, sgl=(0x5A, 4096), cdws=(0xFFFFFFF0, 0, 0, 0, 0, 0)))
        assert q.resp()[1] & 0x3FF == 0x080        # LBA out of range
        q.capsule(sqe(0x02, 22, nsid=9, sgl=(0x5A, 4096)))
        assert q.resp()[1] & 0x3FF == 0x00B        # no such namespace
        # (far from blocks 0-1, so that the image stays fresh for SQL below)
        q.capsule(sqe(0x01, 23, nsid=1, sgl=(0x5A, 4096), cdws=(5000, 0, 0, 0, 0, 0)))
        t, f, b = q.pdu()                          # a write past the inline size: R2T
        assert t == 9, t
        cccid, ttag, off, ln = struct.unpack("<HHII", b[8:20])
        assert (cccid, off, ln) == (23, 0, 4096)
        q.s.sendall(struct.pack("<BBBBIHHII4x", 6, 4, 24, 24, 24 + 4096, 23, ttag, 0, 4096) +
                    b"\xab" * 4096)
        assert q.resp()[1] == 0
        q.capsule(sqe(0x02, 24, nsid=1, sgl=(0x5A, 4096), cdws=(5000, 0, 0, 0, 0, 0)))
        t, f, b = q.pdu()
        assert t == 7 and b[24:] == b"\xab" * 4096
        assert q.resp()[1] == 0
        # H2CData outside its R2T ends that connection only
        q.capsule(sqe(0x01, 25, nsid=1, sgl=(0x5A, 4096)))
        t, f, b = q.pdu()
        ttag = struct.unpack("<H", b[10:12])[0]
        q.s.sendall(struct.pack("<BBBBIHHII4x", 6, 4, 24, 24, 24 + 8, 25, ttag, 4092, 8) + bytes(8))
        assert q.closed()
        # a host that connects and sends half a header, then goes
        r2 = Raw(tg.port)
        r2.s.sendall(b"\x00\x00")
        r2.s.close()
        # the target still serves SQL
        con = connect(os.path.join(d, "ok.db"))
        con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, device='%s')" % tg.url("h.csd"))
        con.execute("INSERT INTO t VALUES (1), (2), (3)")
        assert con.execute("SELECT sum(a) FROM t").fetchall() == [(6,)]
        con.close()
        assert tg.p.poll() is None
    finally:
        tg.stop()
    assert "terminated" in tg.read_log()


def test_keep_alive_timeout_tears_down_a_silent_host():
    d = tmpdir()
    tg = Target(d, ["ka.csd"])
    try:
        # a host that asks for KATO 200 ms and then says nothing: dropped after 2 x KATO
        quiet = Raw(tg.port)
        quiet.icreq()
        cid, st, cntlid = quiet.connect(NQN + "ka.csd", kato=200)
        assert st == 0, hex(st)
        io = Raw(tg.port)
        io.icreq()
        assert io.connect(NQN + "ka.csd", qid=1, cntlid=cntlid)[1] == 0
        t0 = time.time()
        assert quiet.closed() and io.closed(), "a silent controller was kept"
        assert time.time() - t0 < 5
        # one that sends Keep Alive every 100 ms (KATO 500) stays past 2 x KATO, and
        # so do its I/O queues
        live = Raw(tg.port)
        live.icreq()
        cid, st, cntlid = live.connect(NQN + "ka.csd", kato=500)
        assert live.enable()[1] == 0
        io = Raw(tg.port)
        io.icreq()
        assert io.connect(NQN + "ka.csd", qid=1, cntlid=cntlid)[1] == 0
        for i in range(15):
            time.sleep(0.1)
            live.capsule(sqe(0x18, 10 + i))
            assert live.resp()[1] == 0
        io.capsule(sqe(0x00, 5, nsid=1))  # Flush: the I/O queue still works
        assert io.resp()[:2] == (5, 0)
        live.s.close()
        io.s.close()
        # csq's initiator keeps an idle table's controller alive
        con = connect(os.path.join(d, "ka.db"))
        con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, device='%s?kato=500')" %
                    tg.url("ka.csd"))
        con.execute("INSERT INTO t VALUES(1), (2)")
        time.sleep(1.5)
        assert con.execute("SELECT sum(a) FROM t WHERE a > 0").fetchall() == [(3,)]
        con.close()
    finally:
        tg.stop()
    log = tg.read_log()
    assert log.count("keep alive timeout") == 2, log
    assert "KATO 200 ms" in log, log


def test_discovery_log_lists_subsystems():
    d = tmpdir()
    tg = Target(d, ["d1.csd", "d2.csd"])
    try:
        r = Raw(tg.port)
        r.icreq()
        assert r.connect("nqn.2014-08.org.nvmexpress.discovery")[1] == 0
        assert r.enable()[1] == 0
        n = 3 * 1024
        r.capsule(sqe(0x02, 5, sgl=(0x5A, n), cdws=(0x70 | ((n // 4 - 1) << 16), 0, 0, 0, 0, 0)))
        t, f, b = r.pdu()
        data = b""
        while t == 7:
            data += b[24:]
            if f & 4:
                break
            t, f, b = r.pdu()
        assert r.resp()[1] == 0
        assert struct.unpack("<Q", data[8:16])[0] == 2
        names = sorted(data[1024 * k + 256:1024 * k + 512].rstrip(b"\0").decode() for k in (1, 2))
        assert names == [NQN + "d1.csd", NQN + "d2.csd"], names
        assert data[1024 + 32:1024 + 64].rstrip(b"\0").decode() == str(tg.port)
    finally:
        tg.stop()


# ---- a fake target ---------------------------------------------------------


def fake_target(behaviour):
    """A listener whose connections get behaviour(sock); returns (port, stop)."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    ls.settimeout(0.2)
    stop = []

    def run():
        while not stop:
            try:
                c, _ = ls.accept()
            except socket.timeout:
                continue
            try:
                behaviour(c)
            except OSError:
                pass

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return ls.getsockname()[1], lambda: (stop.append(1), th.join(), ls.close())


def icresp():
    return struct.pack("<BBBBIHBBI", 1, 0, 128, 0, 128, 0, 0, 0, 131072) + bytes(112)


def test_garbage_target_gives_clear_errors():
    def garbage(c):
        c.recv(128)
        c.sendall(b"\xff" * 256)
        time.sleep(0.5)
        c.close()

    def garbage_after_ic(c):
        c.recv(128)
        c.sendall(icresp())
        c.recv(4096)
        c.sendall(struct.pack("<BBBBI", 5, 0, 24, 0, 24) + struct.pack("<IIHHHH", 0, 0, 0, 0, 999, 0))
        time.sleep(0.5)
        c.close()

    def hangs_up(c):
        c.recv(128)
        c.sendall(icresp())
        c.recv(4096)
        c.close()

    def bad_type(c):
        c.recv(128)
        c.sendall(icresp())
        c.recv(4096)
        c.sendall(struct.pack("<BBBBI", 0x0A, 0, 24, 0, 24) + bytes(16))
        time.sleep(0.5)
        c.close()

    def half_a_pdu(c):
        c.recv(128)
        c.sendall(icresp())
        c.recv(4096)
        c.sendall(struct.pack("<BBBBI", 5, 0, 24, 0, 24) + bytes(5))
        c.close()

    def too_long(c):
        c.recv(128)
        c.sendall(icresp())
        c.recv(4096)
        c.sendall(struct.pack("<BBBBI", 7, 0x0C, 24, 24, 24 + (1 << 30)) +
                  struct.pack("<HHIII", 0, 0, 0, 1 << 30, 0))
        time.sleep(0.5)
        c.close()

    for fn, frag in [(garbage, "ICResp"), (garbage_after_ic, "not in flight"),
                     (hangs_up, "closed the connection"), (bad_type, "malformed PDU"),
                     (half_a_pdu, "closed the connection"), (too_long, "malformed PDU")]:
        port, stop = fake_target(fn)
        try:
            con = connect(":memory:")
            t0 = time.time()
            expect_error(lambda: con.execute(
                "CREATE VIRTUAL TABLE t USING csq(a, device='nvme-tcp://127.0.0.1:%d/%sz.csd')" %
                (port, NQN)), frag)
            assert time.time() - t0 < 15
            con.close()
        finally:
            stop()


class FakeCtrl:
    """A scripted NVMe/TCP controller on one socket, with header and data
    digests: answers Connect, Property Get/Set and Identify; `spoil` names
    what to get wrong ("connect_hdgst": the Connect response's header
    digest, "identify_ddgst": the Identify data's digest)."""

    def __init__(self, c, spoil):
        self.c, self.spoil = c, spoil

    def recv_all(self, n):
        b = b""
        while len(b) < n:
            k = self.c.recv(n - len(b))
            if not k:
                raise EOFError()
            b += k
        return b

    def send_pdu(self, typ, hdr, data=b"", flags=0, bad_h=False, bad_d=False):
        hlen = 8 + len(hdr)
        pdo = hlen + 4 if data else 0
        plen = hlen + 4 + (len(data) + 4 if data else 0)
        flags |= 1 | (2 if data else 0)
        b = struct.pack("<BBBBI", typ, flags, hlen, pdo, plen) + hdr
        b += struct.pack("<I", crc32c(b) ^ (1 if bad_h else 0))
        if data:
            b += data + struct.pack("<I", crc32c(data) ^ (1 if bad_d else 0))
        self.c.sendall(b)

    def resp(self, cid, dw0=0, bad_h=False):
        self.send_pdu(5, struct.pack("<IIHHHH", dw0, 0, 0, 0, cid, 0), bad_h=bad_h)

    def run(self):
        try:
            self.serve()
        except EOFError:
            pass  # the host hung up, as it should after a bad digest

    def serve(self):
        ic = self.recv_all(128)
        assert ic[0] == 0 and ic[11] == 3, ic[:12]  # the host asked for both digests
        self.c.sendall(struct.pack("<BBBBIHBBI", 1, 0, 128, 0, 128, 0, 0, 3, 131072) + bytes(112))
        while True:
            ch = self.recv_all(8)
            t, f, hl, pdo, plen = struct.unpack("<BBBBI", ch)
            rest = self.recv_all(plen - 8)
            assert t == 4 and f & 1, (t, f)
            sq = rest[:64]
            opc, cid = sq[0], struct.unpack("<H", sq[2:4])[0]
            if opc == 0x7F and sq[4] == 1:
                self.resp(cid, dw0=1, bad_h=self.spoil == "connect_hdgst")
            elif opc == 0x7F and sq[4] == 4:
                self.resp(cid, dw0=1)  # CSTS.RDY
            elif opc == 0x7F:
                self.resp(cid)
            elif opc == 0x06:
                self.send_pdu(7, struct.pack("<HHIII", cid, 0, 0, 4096, 0), bytes(4096),
                              flags=4 | 8, bad_d=self.spoil == "identify_ddgst")
            else:
                self.resp(cid)


def test_digests_end_to_end_and_mismatches_refused():
    d = tmpdir()
    tg = Target(d, ["dg.csd"])
    try:
        con = connect(os.path.join(d, "dg.db"))
        create_pair(con, "device='%s?digest=1'" % tg.url("dg.csd"))
        fill(con, "t", "n", 3000, 5)
        check_same(con, "t", "n")
        con.close()
        con = connect(os.path.join(d, "dg.db"))
        s0 = stats(con)
        con.execute("SELECT sum(a) FROM t WHERE b > 1").fetchall()
        s1 = stats(con)
        con.close()
    finally:
        tg.stop()
    log = tg.read_log()
    assert "qid 1 cntlid 1 hdgst ddgst" in log, log
    assert s1["bytes_to_host"] > s0["bytes_to_host"], (s0, s1)
    # a target whose digests do not match: a clear error, never data taken on trust
    for spoil, frag in (("connect_hdgst", "header digest"),
                        ("identify_ddgst", "Data Transfer Error")):
        port, stop = fake_target(lambda c, spoil=spoil: FakeCtrl(c, spoil).run())
        try:
            con = connect(":memory:")
            expect_error(lambda: con.execute(
                "CREATE VIRTUAL TABLE t USING csq(a, device='nvme-tcp://127.0.0.1:%d/%sz.csd"
                "?digest=1&reconnect=0')" % (port, NQN)), frag)
            con.close()
        finally:
            stop()


# ---- the Linux kernel on the other end ---------------------------------------

GUEST_SCRIPT = """#!/bin/sh
exec 3<>/dev/nvme-fabrics
echo transport=tcp,traddr=10.0.2.2,trsvcid=%(port)d,nqn=%(nqn)s >&3 || { echo CONNECT-FAILED; dmesg | tail -20; exit 1; }
read -r r <&3
echo "CONNECTED $r"
n=${r#instance=}; n=${n%%%%,*}
i=0; while [ ! -b /dev/nvme${n}n1 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
echo "MODEL $(cat /sys/class/nvme/nvme$n/model)"
echo "HEAD $(dd if=/dev/nvme${n}n1 bs=4096 count=64 iflag=direct 2>/dev/null | md5sum)"
echo written-by-the-linux-kernel | dd of=/dev/nvme${n}n1 bs=4096 seek=%(lba)d conv=sync oflag=direct 2>/dev/null
echo "BACK $(dd if=/dev/nvme${n}n1 bs=4096 skip=%(lba)d count=1 iflag=direct 2>/dev/null | head -c 27)"
echo 1 > /sys/class/nvme/nvme$n/delete_controller
echo DONE
"""


def qemu_runner():
    r = os.environ.get("QEMU_NVME_RUN")
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    for c in [r, os.path.join(root, "tools", "qemu-nvme-run"),
              os.path.join(root, "..", "shared", "tools", "qemu-nvme-run")]:
        if c and os.access(c, os.X_OK):
            return c
    raise Skip("qemu-nvme-run not found (set QEMU_NVME_RUN)")


def test_linux_kernel_initiator_reads_and_writes_csq_target():
    """The guest kernel's nvme-tcp connects to csq-target on the host: the
    namespace it creates reads what csq wrote, and a block it writes lands in
    the image, which csq still reads as its table."""
    import hashlib
    runner = qemu_runner()
    d = tmpdir()
    tg = Target(d, ["kern.csd"])
    try:
        db = os.path.join(d, "k.db")
        con = connect(db)
        con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, device='%s')" %
                    tg.url("kern.csd"))
        con.executemany("INSERT INTO t VALUES (?, ?)", [(i, "v%d" % i) for i in range(2000)])
        con.close()
        lba = 200000  # far beyond what csq allocated for this table
        script = os.path.join(d, "guest.sh")
        with open(script, "w") as f:
            f.write(GUEST_SCRIPT % {"port": tg.port, "nqn": NQN + "kern.csd", "lba": lba})
        os.chmod(script, 0o755)
        p = subprocess.run([runner, "--net", "--timeout", "240", script], capture_output=True,
                           text=True, timeout=300)
        out = p.stdout + p.stderr
        if p.returncode == 125:
            raise Skip("QEMU could not start: " + out.strip().splitlines()[-1][:200])
        assert p.returncode == 0 and "DONE" in out, out[-3000:]
        with open(os.path.join(d, "kern.csd"), "rb") as f:
            head = f.read(64 * 4096)
        head = head.ljust(64 * 4096, b"\0")
        assert "HEAD %s" % hashlib.md5(head).hexdigest() in out, out[-3000:]
        assert "BACK written-by-the-linux-kernel" in out, out[-3000:]
        assert "MODEL csq emulated computational storage" in out, out[-3000:]
        with open(os.path.join(d, "kern.csd"), "rb") as f:
            f.seek(lba * 4096)
            assert f.read(27) == b"written-by-the-linux-kernel"
        con = connect(db)
        assert con.execute("SELECT count(*), sum(a) FROM t").fetchall() == [(2000, 1999000)]
        con.close()
    finally:
        tg.stop()
    assert "qid 1" in tg.read_log()
