#!/usr/bin/python3
"""bench/run.py BUILD SF - csq against native SQLite tables, in one run.

Loads TPC-H lineitem at scale factor SF into a native SQLite table and into a
csq table (build/bench/gen, the same rows), timing both loads, then runs each
query as a native query and through csq's transparent pushdown (the stock
SQLite planner, the filter on the device), five warm runs each, and reports
medians, the ratio native/csq, and the bytes that crossed the device
boundary. The answers of the two engines are cross-checked.

Output: a table on stdout and bench/results/tpch_sf<SF>.csv. Times are wall
clock on a shared machine; only ratios measured in the same run mean much.
"""
import csv
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
SF = sys.argv[2] if len(sys.argv) > 2 else "0.1"
RUNS = 5
EXT = os.path.abspath(os.path.join(BUILD, "csq.so"))
GEN = os.path.join(BUILD, "bench", "gen")

QUERIES = {
    "Q6": """SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem
             WHERE l_shipdate >= '1994-01-01' AND l_shipdate < '1995-01-01'
               AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24""",
    "Q1": """SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice),
               sum(l_extendedprice * (1 - l_discount)),
               sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)), avg(l_quantity),
               avg(l_extendedprice), avg(l_discount), count(*)
             FROM lineitem WHERE l_shipdate <= date('1998-12-01', '-90 days')
             GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus""",
    "none": "SELECT count(*) FROM lineitem WHERE l_shipdate > '2000-01-01'",
    "point": "SELECT count(*), sum(l_quantity) FROM lineitem WHERE l_orderkey = 4242",
}
# the columns each query reads: what a host-side scan would have to move
QCOLS = {"Q6": 4, "Q1": 7, "none": 1, "point": 2}


def load(db, csq):
    cmd = [GEN, "tpch", SF, db, "--tables", "lineitem", "--quiet"]
    if csq:
        cmd[4:4] = ["--csq", EXT]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t0


def connect(db, csq):
    con = sqlite3.connect(db)
    if csq:
        con.enable_load_extension(True)
        con.load_extension(EXT)
    return con


def same(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            if isinstance(u, float) or isinstance(v, float):
                if abs(u - v) > 1e-9 * max(1.0, abs(u), abs(v)):
                    return False
            elif u != v:
                return False
    return True


def timed(con, sql):
    ts, rows = [], None
    for _ in range(RUNS + 1):  # the first run warms caches and is not counted
        t0 = time.perf_counter()
        rows = con.execute(sql).fetchall()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts[1:]), rows


def main():
    d = tempfile.mkdtemp(prefix="csq-bench-")
    native_db, csq_db = os.path.join(d, "native.db"), os.path.join(d, "csq.db")
    t_native = load(native_db, False)
    t_csq = load(csq_db, True)
    nat, dev = connect(native_db, False), connect(csq_db, True)
    nrows = nat.execute("SELECT count(*) FROM lineitem").fetchone()[0]
    out = []
    print("csq benchmark: TPC-H lineitem SF %s (%d rows), %d warm runs, median" % (SF, nrows, RUNS))
    print("load: native %.2f s, csq %.2f s, native/csq %.2fx" % (t_native, t_csq, t_native / t_csq))
    out.append(["load", "", "%.4f" % t_native, "%.4f" % t_csq, "%.2f" % (t_native / t_csq), "", "", "",
                "ok"])
    print("%-6s %-12s %10s %10s %8s %14s %14s %12s %s" % (
        "query", "csq path", "native s", "csq s", "ratio", "media read B", "to host B",
        "host scan B", "answers"))
    for name, sql in QUERIES.items():
        tn, rn = timed(nat, sql)
        dev.execute("CREATE VIRTUAL TABLE temp.v_%s USING csq_query('%s')" % (name, sql.replace("'", "''")))
        for path, q in (("transparent", sql), ("view", "SELECT * FROM v_%s" % name)):
            dev.execute("SELECT csq_stats_reset()")
            tc, rc = timed(dev, q)
            st = dict(dev.execute("SELECT name, value FROM csq_stats").fetchall())
            runs = RUNS + 1
            media, tohost = st["media_bytes_read"] // runs, st["bytes_to_host"] // runs
            hostscan = nrows * 8 * QCOLS[name]
            ok = "agree" if same(rn, rc) else "DIFFER"
            print("%-6s %-12s %10.4f %10.4f %7.1fx %14d %14d %12d %s" % (
                name, path, tn, tc, tn / tc, media, tohost, hostscan, ok))
            out.append([name, path, "%.4f" % tn, "%.4f" % tc, "%.2f" % (tn / tc), media, tohost,
                        hostscan, ok])
            if ok != "agree":
                print("   native: %r\n   csq:    %r" % (rn[:3], rc[:3]))
    os.makedirs("bench/results", exist_ok=True)
    path = "bench/results/tpch_sf%s.csv" % SF
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["query", "csq_path", "native_s", "csq_s", "native_over_csq", "media_bytes_read",
                    "bytes_to_host", "host_scan_bytes", "answers"])
        w.writerows(out)
    print("wrote %s" % path)
    for p in (native_db, csq_db, csq_db + "-csd"):
        if os.path.exists(p):
            os.remove(p)
    os.rmdir(d)
    return 0 if all(r[-1] in ("ok", "agree") for r in out) else 1


if __name__ == "__main__":
    sys.exit(main())
