"""tests/sql/test_tcp_drop.py - an NVMe/TCP link that drops under csq: an
Execute in flight when csq-target dies is not sent again and fails its
statement with "link dropped, not sent again", the next statement answers as
native SQLite does; only the admin queue's connection cut (by a proxy) while
the target stays up: the queries in flight and after answer correctly."""
import os
import random
import socket
import threading
import time

from harness import connect, expect_error, same_rows, tmpdir
from test_tcp import NQN, Target, check_same, create_pair, fill, rand_row

AGG = "SELECT c, count(*), sum(a), max(b) FROM {t} WHERE b > 1 GROUP BY c"


def agg_view(con, t, n):
    """The aggregate as a csq_query view of t (on the device) and on n."""
    con.execute("DROP TABLE IF EXISTS temp.v")
    con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query('%s')" % AGG.format(t=t))
    return (lambda: sorted(con.execute("SELECT * FROM v").fetchall(), key=repr),
            sorted(con.execute(AGG.format(t=n)).fetchall(), key=repr))


def crash_then_restart(tg, faults, codes):
    """Restart tg with the fault rules `faults` (one ends it, action=crash);
    once it has died (its exit status appended to codes), start it again
    without them. Returns the watcher thread."""
    tg.stop()
    tg.args = ["-f", faults]
    tg.start()

    def watch():
        codes.append(tg.p.wait())
        tg.args = []
        tg.start()
    th = threading.Thread(target=watch)
    th.start()
    return th


def test_execute_in_flight_fails_and_is_not_sent_again():
    d = tmpdir()
    tg = Target(d, ["x.csd"])
    try:
        db = os.path.join(d, "x.db")
        con = connect(db)
        create_pair(con, "device='%s', pushdown='always'" % tg.url("x.csd"))
        fill(con, "t", "n", 3000, 21)
        plan = dict(con.execute("SELECT part, detail FROM csq_explain('%s')" % AGG.format(t="t")))
        assert plan["plan"] == "device+host", plan
        con.close()
        # the target dies as the first Execute arrives: the watcher checks
        # it was that rule (exit 86) and starts it again without faults
        codes = []
        th = crash_then_restart(tg, "op=execute,nth=1,action=crash", codes)
        con = connect(db)
        run, want = agg_view(con, "t", "n")
        expect_error(run, "link dropped, not sent again", "nvme-tcp://")
        th.join()
        assert codes == [86], codes  # the Execute rule's crash, nothing else
        # the link reconnected: the next statement runs its program on the
        # restarted target and answers as native SQLite
        same_rows(run(), want, "after the drop")
        check_same(con, "t", "n")
        con.close()
    finally:
        tg.stop()


class AdminCutter:
    """A TCP proxy to a target that knows which connections carry an admin
    queue (Fabrics Connect with qid 0) and can cut just those."""

    def __init__(self, port):
        self.port_to = port
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        self.port = self.ls.getsockname()[1]
        self.mu = threading.Lock()
        self.conns = []  # [client, server, qid or None]
        self.admins = 0  # admin connections seen
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.port_to))
            rec = [c, s, None]
            with self.mu:
                self.conns.append(rec)
            threading.Thread(target=self.pump, args=(rec, c, s, True), daemon=True).start()
            threading.Thread(target=self.pump, args=(rec, s, c, False), daemon=True).start()

    def pump(self, rec, a, b, up):
        seen = b""
        while True:
            try:
                buf = a.recv(65536)
            except OSError:
                buf = b""
            if not buf:
                break
            if up and rec[2] is None:
                # ICReq (128 bytes), then the Connect capsule: 8 bytes of
                # header, the SQE whose bytes 42..43 are the queue id
                seen += buf
                if len(seen) >= 128 + 8 + 44:
                    rec[2] = int.from_bytes(seen[178:180], "little")
                    if rec[2] == 0:
                        with self.mu:
                            self.admins += 1
            try:
                b.sendall(buf)
            except OSError:
                break
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut_admin(self):
        n = 0
        with self.mu:
            for rec in self.conns:
                if rec[2] == 0:
                    for x in rec[:2]:
                        try:
                            x.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                    n += 1
        return n

    def close(self):
        self.ls.close()
        self.cut_admin()
        with self.mu:
            for rec in self.conns:
                for x in rec[:2]:
                    x.close()


def test_admin_queue_dropped_while_target_stays_up():
    d = tmpdir()
    tg = Target(d, ["a.csd"])
    px = AdminCutter(tg.port)
    try:
        db = os.path.join(d, "a.db")
        con = connect(db)
        url = "nvme-tcp://127.0.0.1:%d/%sa.csd?kato=500" % (px.port, NQN)
        create_pair(con, "device='%s', rowgroup=2048" % url)
        fill(con, "t", "n", 20000, 23)
        run, want = agg_view(con, "t", "n")
        assert px.admins == 1, px.admins
        # a scan in flight (its later row groups read after the cut): the
        # admin connection is cut under it
        q = "SELECT id, a, c FROM %s WHERE id %% 3 = 0 ORDER BY id"
        cur = con.execute(q % "t")
        got = [cur.fetchone()]
        assert px.cut_admin() == 1
        got += cur.fetchall()
        same_rows(got, con.execute(q % "n").fetchall(), "scan across the cut")
        same_rows(run(), want, "device aggregate after the cut")
        # the Keep Alive thread notices and makes a new controller; the I/O
        # queues of the old one go on or reconnect to it
        deadline = time.time() + 20
        while px.admins < 2 and time.time() < deadline:
            time.sleep(0.05)
        assert px.admins >= 2, "no new admin queue after the cut"
        time.sleep(1.5)  # past the old controller's 2 x KATO at the target
        same_rows(run(), want, "device aggregate on the new controller")
        check_same(con, "t", "n")
        # writes commit and are there once
        rows = [(50000 + i,) + rand_row(random.Random(i)) for i in range(200)]
        for tbl in ("t", "n"):
            con.execute("BEGIN")
            con.executemany("INSERT INTO %s VALUES(?,?,?,?)" % tbl, rows)
            con.execute("COMMIT")
        check_same(con, "t", "n")
        con.close()
        con = connect(db)
        check_same(con, "t", "n")
        con.close()
    finally:
        px.close()
        tg.stop()
