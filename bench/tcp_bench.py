"""bench/tcp_bench.py [SF] - the NVMe/TCP link on loopback (build/csq-target),
then TPC-H Q1 and Q6 across it.

First the link itself: build/bench/tcplink measures 4 KiB round trips and
128 KiB reads (8 in flight) over NVMe/TCP against a plain TCP stream served
by the same csq-target process (-b), medians of interleaved rounds.

Then Q1 and Q6 on a csq table reached over NVMe/TCP, next to the same table
on the in-process emulated device and a native SQLite table; each as written
and as a pushdown view (csq_query). Reports the best of 3 runs and the bytes
that crossed the device boundary (for NVMe/TCP: the socket, PDU headers
included) per query. The target is pinned to CPU 1 and this process (and
tcplink) to CPU 0 when the machine has two.

    /usr/bin/python3 bench/tcp_bench.py 0.1
"""
import math
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("CSQ_BUILD", os.path.join(HERE, "..", "build"))
sys.path.insert(0, HERE)
import queries  # noqa: E402

WIRE = ("bytes_to_host", "bytes_from_host")


def connect(path):
    con = sqlite3.connect(path, isolation_level=None)
    con.enable_load_extension(True)
    con.load_extension(os.path.join(BUILD, "csq.so"))
    return con


def stats(con):
    return dict(con.execute("SELECT name, value FROM csq_stats").fetchall())


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def run(con, sql, n=3):
    best, rows, moved = None, None, None
    for _ in range(n):
        s0 = stats(con)
        t0 = time.perf_counter()
        rows = con.execute(sql).fetchall()
        dt = time.perf_counter() - t0
        s1 = stats(con)
        moved = {k: s1.get(k, 0) - s0.get(k, 0) for k in WIRE}
        best = dt if best is None or dt < best else best
    return best, rows, moved


def main():
    sf = sys.argv[1] if len(sys.argv) > 1 else "0.1"
    d = tempfile.mkdtemp(prefix="csq-tcp-bench-")
    two = os.cpu_count() and os.cpu_count() >= 2
    tgt = None
    try:
        db = os.path.join(d, "t.db")
        subprocess.check_call([os.path.join(BUILD, "bench", "gen"), "tpch", sf, db, "--tables",
                               "lineitem", "--quiet"])
        port, plain = free_port(), free_port()
        cmd = [os.path.join(BUILD, "csq-target"), "-l", "127.0.0.1:%d" % port, "-t", "1",
               "-b", "127.0.0.1:%d" % plain, os.path.join(d, "remote.csd"),
               os.path.join(d, "link.csd")]
        if two and shutil.which("taskset"):
            cmd = ["taskset", "-c", "1"] + cmd
        tgt = subprocess.Popen(cmd, stderr=open(os.path.join(d, "target.log"), "w"))
        if two:
            os.sched_setaffinity(0, {0})
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
        link = subprocess.check_output(
            (["taskset", "-c", "0"] if two and shutil.which("taskset") else []) +
            [os.path.join(BUILD, "bench", "tcplink"),
             "nvme-tcp://127.0.0.1:%d/nqn.2026-12.io.csq:link.csd" % port,
             "127.0.0.1:%d" % plain, "5"], text=True)
        print("link, medians of 5 rounds:")
        for ln in link.splitlines():
            k, _, a, _, b = ln.split()
            a, b = float(a), float(b)
            what = ("4 KiB round trip (us)" if k.startswith("rtt") else
                    "128 KiB reads, 8 in flight (MB/s)")
            print("  %-34s nvme-tcp %8.1f   plain TCP %8.1f   ratio %.2f" % (what, a, b, a / b))
        cols = ", ".join("%s %s" % c for c in queries.schema("tpch")["lineitem"])
        con = connect(db)
        url = "nvme-tcp://127.0.0.1:%d/nqn.2026-12.io.csq:remote.csd" % port
        for name, dev in [("l_tcp", url), ("l_emu", os.path.join(d, "local.csd"))]:
            con.execute("CREATE VIRTUAL TABLE %s USING csq(%s, device='%s')" % (name, cols, dev))
            t0 = time.perf_counter()
            con.execute("INSERT INTO %s SELECT * FROM lineitem" % name)
            print("loaded %s in %.1f s" % (name, time.perf_counter() - t0))
        con.close()
        con = connect(db)
        qs = {q["name"]: "\n".join(ln for ln in q["sql"].splitlines() if not ln.startswith("--"))
              for q in queries.load("tpch") if q["name"] in ("Q1", "Q6")}
        print("\nTPC-H SF %s, best of 3 (ms); bytes across the device boundary per query" % sf)
        print("%-4s %-8s %10s %12s %12s" % ("q", "where", "ms", "to host", "from host"))
        for qn in ("Q1", "Q6"):
            native, _, _ = run(con, qs[qn])
            print("%-4s %-8s %10.1f %12s %12s" % (qn, "native", native * 1e3, "-", "-"))
            want = None
            for t in ("l_emu", "l_tcp"):
                sql = qs[qn].replace("lineitem", t)
                for how in ("written", "view"):
                    if how == "view":
                        con.execute("DROP TABLE IF EXISTS temp.v")
                        con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query('%s')" %
                                    sql.replace("'", "''"))
                        dt, rows, moved = run(con, "SELECT * FROM v")
                    else:
                        dt, rows, moved = run(con, sql)
                    if want is None:
                        want = rows
                    # sums of millions of doubles differ in their last bits by order
                    assert len(rows) == len(want) and all(
                        math.isclose(x, y, rel_tol=1e-9) if isinstance(x, float) else x == y
                        for r1, r2 in zip(rows, want) for x, y in zip(r1, r2)), (qn, t, how)
                    where = ("tcp" if t == "l_tcp" else "in-proc") + ("/view" if how == "view"
                                                                       else "")
                    print("%-4s %-8s %10.1f %12d %12d   %.1fx native" %
                          (qn, where, dt * 1e3, moved["bytes_to_host"], moved["bytes_from_host"],
                           native / dt))
        con.close()
    finally:
        if tgt:
            tgt.terminate()
            tgt.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
