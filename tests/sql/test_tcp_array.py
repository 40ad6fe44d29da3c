"""tests/sql/test_tcp_array.py - a table striped over three csq-target
processes, each in its own network namespace with its own address (as three
machines would be: ip netns, a veth pair each, the target at 10.213.K.2).
Where namespaces cannot be made (no root, no ip), or CSQ_TEST_NETNS=0, the
targets listen on 127.0.0.2, .3 and .4 instead.

Checks: scans and aggregates over the three equal native SQLite's; a target
killed in the middle of a query fails the statement with the link's error,
never a hang, and serves the table again once restarted; a target killed
before each command a COMMIT sends it (a proxy in front of each target counts
the command capsules and kills the target at the K-th, for every K until the
COMMIT gets through, on each member in turn) leaves every member whole: a
new connection of the same process, after the restart, finds the table old
or new, the same on all members, and writable; connections that close and
open their queues one after another get them (a qid reused at once)."""
import os
import random
import shutil
import socket
import sqlite3
import struct
import subprocess
import threading
import time

from harness import connect, expect_error, same_rows, tmpdir
from test_tcp import NQN, Target, check_same, create_pair, fill


class Machines:
    """Three network namespaces (or 127.0.0.x addresses): address K is where
    target K listens."""

    def __init__(self, n=3):
        self.ns, self.links, self.addrs = [], [], []
        base = (os.getpid() % 80) * 3
        want = os.environ.get("CSQ_TEST_NETNS", "1") != "0"
        if want and shutil.which("ip") and os.geteuid() == 0:
            try:
                for k in range(n):
                    net = "10.213.%d" % (base + k)
                    name, veth = "csq%d-%d" % (os.getpid(), k), "csq%dv%d" % (os.getpid() % 100000, k)
                    self.sh("ip", "netns", "add", name)
                    self.ns.append(name)
                    self.sh("ip", "link", "add", veth, "type", "veth", "peer", "name", veth + "p")
                    self.links.append(veth)
                    self.sh("ip", "link", "set", veth + "p", "netns", name)
                    self.sh("ip", "addr", "add", net + ".1/24", "dev", veth)
                    self.sh("ip", "link", "set", veth, "up")
                    for c in (["addr", "add", net + ".2/24", "dev", veth + "p"],
                              ["link", "set", veth + "p", "up"], ["link", "set", "lo", "up"]):
                        self.sh("ip", "netns", "exec", name, "ip", *c)
                    self.addrs.append(net + ".2")
            except (OSError, subprocess.CalledProcessError):
                self.close()
        if len(self.addrs) < n:
            self.ns, self.addrs = [], ["127.0.0.%d" % (2 + k) for k in range(n)]

    @staticmethod
    def sh(*argv):
        subprocess.run(argv, check=True, capture_output=True, timeout=20)

    def prefix(self, k):
        return ["ip", "netns", "exec", self.ns[k]] if self.ns else []

    def close(self):
        for v in self.links:
            subprocess.run(["ip", "link", "del", v], capture_output=True)
        for n in self.ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
        self.ns, self.links, self.addrs = [], [], []


def member(m, k, d, image):
    """csq-target serving one image on machine k (in its namespace, on the
    NVMe/TCP port, when there are namespaces)."""
    return Target(d, [image], port=4420 if m.ns else None, addr=m.addrs[k], prefix=m.prefix(k),
                  name=str(k))


class KillProxy:
    """A TCP proxy on 127.0.0.1 in front of a member. It forwards bytes as
    they are, reading the host's stream PDU by PDU (NVMe/TCP common header:
    type, flags, hlen, pdo, plen): once armed with K, it kills the member
    just before the K-th command capsule (type 04h) would reach it, and
    drops every connection. Kills and arming happen under one lock."""

    CAPSULE = 0x04

    def __init__(self, member):
        self.member = member
        self.lock = threading.Lock()
        self.nth, self.count, self.fired = 0, 0, False
        self.socks = []
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        self.port = self.ls.getsockname()[1]
        self.closing = False
        threading.Thread(target=self.accept, daemon=True).start()

    def url(self):
        # no reconnection attempts: the member stays dead until the test
        # restarts it, after the COMMIT has failed
        return "nvme-tcp://127.0.0.1:%d/%s%s?reconnect=0" % (self.port, NQN, self.member.image)

    def arm(self, nth):
        with self.lock:
            self.nth, self.count, self.fired = nth, 0, False

    def disarm(self):
        with self.lock:
            fired, self.nth, self.fired = self.fired, 0, False
            return fired

    def accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            try:
                u = socket.create_connection((self.member.addr, self.member.port), timeout=5)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            for x in (c, u):  # small PDUs go at once, as from the initiator itself
                x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                if self.closing:
                    c.close()
                    u.close()
                    continue
                self.socks += [c, u]
            threading.Thread(target=self.up, args=(c, u), daemon=True).start()
            threading.Thread(target=self.down, args=(u, c), daemon=True).start()

    @staticmethod
    def read_n(s, n):
        b = b""
        while len(b) < n:
            k = s.recv(n - len(b))
            if not k:
                raise OSError("closed")
            b += k
        return b

    def drop_all(self):
        for s in self.socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.socks = []

    def up(self, c, u):
        try:
            while True:
                h = self.read_n(c, 8)
                plen = struct.unpack_from("<I", h, 4)[0]
                if plen < 8 or plen > (64 << 20):
                    raise OSError("bad PDU")
                pdu = h + self.read_n(c, plen - 8)
                with self.lock:
                    if h[0] == self.CAPSULE and self.nth and not self.fired:
                        self.count += 1
                        if self.count == self.nth:
                            self.fired = True
                            self.member.kill9()
                            self.drop_all()
                            return
                u.sendall(pdu)
        except OSError:
            pass
        for s in (c, u):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def down(self, u, c):
        try:
            while True:
                b = u.recv(65536)
                if not b:
                    break
                c.sendall(b)
        except OSError:
            pass
        for s in (c, u):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        with self.lock:
            self.closing = True
            self.drop_all()
        self.ls.close()


def three(d):
    m = Machines()
    members = []
    try:
        for k in range(3):
            members.append(member(m, k, d, "m%d.csd" % k))
    except BaseException:
        for x in members:
            x.stop()
        m.close()
        raise
    return m, members


def shut(m, members):
    try:
        for x in members:
            x.stop()
    finally:
        m.close()


def test_scans_and_aggregates_over_three_machines():
    d = tmpdir()
    m, members = three(d)
    try:
        con = connect(os.path.join(d, "a.db"))
        create_pair(con, "devices='%s', rowgroup=1000" % ",".join(x.url() for x in members))
        fill(con, "t", "n", 12000, 5)
        check_same(con, "t", "n")
        for q in ["SELECT count(*), sum(id), min(a), max(c) FROM {t}",
                  "SELECT c, count(*), sum(id) FROM {t} WHERE id % 3 = 1 GROUP BY c ORDER BY c"]:
            same_rows(con.execute(q.format(t="t")).fetchall(), con.execute(q.format(t="n")).fetchall(), q)
        # every member scanned its share
        devs = con.execute("SELECT path, blocks_used FROM csq_devices").fetchall()
        assert len([p for p, u in devs if p.startswith("nvme-tcp://") and u > 0]) == 3, devs
        con.close()
    finally:
        shut(m, members)
    for x in members:
        assert "qid 1" in x.read_log(), x.read_log()[-2000:]


def test_member_killed_mid_query_then_restarted():
    d = tmpdir()
    m, members = three(d)
    try:
        db = os.path.join(d, "q.db")
        con = connect(db)
        create_pair(con, "devices='%s', rowgroup=1000" % ",".join(x.url() for x in members))
        fill(con, "t", "n", 30000, 6)
        want = con.execute("SELECT count(*), sum(a) FROM n WHERE typeof(a) = 'integer'").fetchall()
        cur = con.execute("SELECT id, a, c FROM t")
        cur.fetchone()
        members[1].kill9()
        t0 = time.time()
        try:
            for _ in cur:
                pass
        except sqlite3.Error as e:
            assert "link" in str(e).lower(), e
        msg = expect_error(lambda: con.execute("SELECT count(*), sum(a) FROM t").fetchall(), "link")
        assert time.time() - t0 < 20, "the error took %.1f s" % (time.time() - t0)
        assert members[1].addr in msg, msg
        con.close()
        members[1].start()
        con = connect(db)
        same_rows(con.execute("SELECT count(*), sum(a) FROM t WHERE typeof(a) = 'integer'").fetchall(),
                  want, "after restart")
        check_same(con, "t", "n")
        con.close()
    finally:
        shut(m, members)


def txn(con, t, i):
    r = random.Random(2000 + i)
    con.executemany("INSERT INTO %s(id, a, b) VALUES(?, ?, ?)" % t,
                    [(i * 1000 + j, r.randint(0, 1000), r.random()) for j in range(r.randint(8, 20))])
    con.execute("UPDATE %s SET a = a + 1 WHERE id %% 7 = ?" % t, (i % 7,))
    con.execute("DELETE FROM %s WHERE id %% 11 = ?" % t, (i % 11,))


def state(con, t):
    return list(con.execute("SELECT count(*), coalesce(sum(a), 0), round(total(b), 6), "
                            "coalesce(sum(id * (a %% 13)), 0) FROM %s" % t).fetchone())


def commit_once(db, i, proxy=None, nth=0):
    """A fresh connection: the table's state it finds; then, for i > 0,
    transaction i with the proxy armed just before COMMIT. Returns (state,
    COMMIT's answer, whether the proxy killed its member)."""
    con = connect(db)
    try:
        got = state(con, "t")
        if not i:
            return got, "", False
        con.execute("BEGIN")
        txn(con, "t", i)
        proxy.arm(nth)
        try:
            con.execute("COMMIT")
            res = "COMMITTED"
        except sqlite3.Error as e:
            res = "ERROR " + str(e)
        return got, res, proxy.disarm()
    finally:
        con.close()


def test_member_killed_before_each_command_of_a_commit():
    d = tmpdir()
    m, members = three(d)
    proxies = [KillProxy(x) for x in members]
    try:
        db = os.path.join(d, "c.db")
        con = connect(db)
        con.execute("CREATE VIRTUAL TABLE t USING csq(id INTEGER PRIMARY KEY, a INTEGER, b REAL, "
                    "devices='%s', rowgroup=64)" % ",".join(p.url() for p in proxies))
        con.close()
        model = sqlite3.connect(":memory:", isolation_level=None)
        model.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, b REAL)")
        i, kills, seen_old, seen_new = 0, 0, 0, 0
        pending = None

        def found(got):
            nonlocal pending, seen_old, seen_new
            if pending is None:
                assert got == state(model, "t"), (got, state(model, "t"))
                return
            where, old, new = pending
            pending = None
            if got == new:
                seen_new += 1
                model.execute("COMMIT")
            else:
                assert got == old, "%s: found %r; old %r, new %r" % (where, got, old, new)
                seen_old += 1
                model.execute("ROLLBACK")

        for k, p in enumerate(proxies):
            nth = 1
            while True:
                i += 1
                got, res, fired = commit_once(db, i, p, nth)
                found(got)
                old = state(model, "t")
                model.execute("BEGIN")
                txn(model, "t", i)
                new = state(model, "t")
                if not fired:
                    assert res == "COMMITTED", res
                    model.execute("COMMIT")
                    break  # nth is past the last command this COMMIT sends to member k
                assert res == "COMMITTED" or "link" in res.lower(), res
                kills += 1
                members[k].start()
                pending = ("member %d killed before command %d of a COMMIT" % (k + 1, nth), old, new)
                nth += 1
        found(commit_once(db, 0)[0])
        con = connect(db)
        assert state(con, "t") == state(model, "t")
        con.execute("INSERT INTO t(a) VALUES(1)")  # and writable
        con.close()
        # a kill before the decision rolls back, after it forward
        assert kills >= 6 and seen_old and seen_new, (kills, seen_old, seen_new)
        print("kill points: %d (rolled back %d, forward %d)" % (kills, seen_old, seen_new))
    finally:
        for p in proxies:
            p.close()
        shut(m, members)


def test_queue_closed_and_connected_again_at_once():
    """Each connection of a process adds its own I/O queue to a shared
    device; one that closes frees its qid, and the next connection takes the
    same qid at once. The target must take it, although the commands of the
    closed queue may still be draining."""
    d = tmpdir()
    m, members = three(d)
    try:
        db = os.path.join(d, "r.db")
        con = connect(db)
        con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, devices='%s')" %
                    ",".join(x.url() for x in members))
        con.execute("BEGIN")
        con.executemany("INSERT INTO t VALUES(?)", [(i,) for i in range(3000)])
        con.execute("COMMIT")
        for _ in range(12):
            c2 = connect(db)
            assert c2.execute("SELECT count(*), sum(a) FROM t").fetchone() == (3000, 4498500)
            c2.close()
        con.close()
    finally:
        shut(m, members)
