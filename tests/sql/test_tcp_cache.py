"""tests/sql/test_tcp_cache.py - csq-target -m MIB: the device's own DRAM cache
of its media (device/emu/mcache.h), media read with O_DIRECT under it. A
table over a cached target matches native SQLite for queries and writes,
keeps what was committed across kill -9 and a restart, and a repeated query
is served from the cache (csq-target logs the counters on SIGUSR1)."""
import os
import re
import signal
import time

from harness import connect, same_rows, tmpdir
from test_tcp import Target, check_same, create_pair, fill

CACHE_MIB = 64


def cache_counters(tg, image):
    """Ask the target for its cache counters (SIGUSR1) and read them back."""
    n0 = len(re.findall(r"%s: cache " % re.escape(image), tg.read_log()))
    tg.p.send_signal(signal.SIGUSR1)
    deadline = time.time() + 20
    while time.time() < deadline:
        lines = re.findall(r"%s: cache (\d+) hits, (\d+) misses, (\d+) evictions, (\d+) lines" %
                           re.escape(image), tg.read_log())
        if len(lines) > n0:
            return tuple(int(v) for v in lines[-1])
        time.sleep(0.05)
    raise AssertionError("no cache counters in the log: %s" % tg.read_log()[-2000:])


class CachedTarget(Target):
    """test_tcp's Target, started (and restarted) with -m mib."""
    mib = CACHE_MIB

    def start(self):
        self.args = ["-m", str(self.mib)]
        Target.start(self)


def test_cached_target_matches_native_and_survives_kill9():
    d = tmpdir()
    tg = CachedTarget(d, ["c.csd"])
    path = os.path.join(d, "c.csd")
    try:
        log = tg.read_log()
        assert "media cache of %d MiB over" % CACHE_MIB in log, log
        db = os.path.join(d, "c.db")
        con = connect(db)
        create_pair(con, "device='%s'" % tg.url("c.csd"))
        fill(con, "t", "n", 6000, 11)
        check_same(con, "t", "n")
        # writes after the cache holds the lines: they must update them
        con.execute("DELETE FROM t WHERE id % 5 = 0")
        con.execute("DELETE FROM n WHERE id % 5 = 0")
        con.execute("UPDATE t SET a = 77, c = 'upd' WHERE id % 3 = 0")
        con.execute("UPDATE n SET a = 77, c = 'upd' WHERE id % 3 = 0")
        check_same(con, "t", "n")
        # a repeated query is served from the device's DRAM
        q = "SELECT c, count(*), sum(a) FROM t GROUP BY c ORDER BY c"
        con.execute(q).fetchall()
        h1, m1, _, lines = cache_counters(tg, path)
        assert lines == CACHE_MIB * 16, lines
        con.execute(q).fetchall()
        h2, m2, _, _ = cache_counters(tg, path)
        assert h2 > h1, (h1, h2)
        assert m2 == m1, "the repeated query read the media: %d -> %d misses" % (m1, m2)
        # committed, then the target dies without a chance to write anything back
        con.execute("BEGIN")
        con.execute("INSERT INTO t VALUES(100001, 5, 1.5, 'after')")
        con.execute("INSERT INTO n VALUES(100001, 5, 1.5, 'after')")
        con.execute("UPDATE t SET b = 2.25 WHERE id < 100")
        con.execute("UPDATE n SET b = 2.25 WHERE id < 100")
        con.execute("COMMIT")
        con.close()
        tg.kill9()
        tg.start()
        con = connect(db)
        check_same(con, "t", "n")
        same_rows(con.execute("SELECT * FROM t WHERE id = 100001").fetchall(),
                  con.execute("SELECT * FROM n WHERE id = 100001").fetchall(), "after kill -9")
        con.close()
    finally:
        tg.stop()


def test_cache_smaller_than_the_table():
    d = tmpdir()
    tg = CachedTarget.__new__(CachedTarget)
    tg.mib = 1  # 16 lines: the scans keep evicting
    tg.__init__(d, ["s.csd"])
    try:
        con = connect(os.path.join(d, "s.db"))
        create_pair(con, "device='%s'" % tg.url("s.csd"))
        # text that does not compress: some MiB of media for a 1 MiB cache
        con.execute("WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 50000) "
                    "INSERT INTO n SELECT i, i % 97 - 40, i / 7.0, hex(randomblob(24)) FROM s")
        con.execute("INSERT INTO t SELECT * FROM n")
        check_same(con, "t", "n")
        con.execute("UPDATE t SET c = 'w1x' WHERE id % 13 = 0")
        con.execute("UPDATE n SET c = 'w1x' WHERE id % 13 = 0")
        check_same(con, "t", "n")
        con.close()
        _, miss, evict, lines = cache_counters(tg, os.path.join(d, "s.csd"))
        assert lines == 16 and evict > 0 and miss > lines, (miss, evict, lines)
    finally:
        tg.stop()
