#!/usr/bin/python3
"""bench/worker.py - one engine's measurements in a process of its own.

bench/run.py starts this once per engine (native SQLite, csq transparent,
csq pushdown views, crossover) with a JSON job on stdin and reads one JSON
object from stdout. Running each engine in its own process keeps their
memory apart, so the peak resident set of each query can be read:

  job = {"db": PATH, "ext": PATH or null, "setup": [SQL, ...],
         "queries": [{"name", "sql", "runs", "slow_s", "explain": bool}]}
  out = {"setup_s": float, "queries": [{"name", "times", "median", "runs",
         "rows", "media_bytes_read", "bytes_to_host", "rows_scanned",
         "hwm_kb", "base_kb", "steal_pct", "plan", "csq_explain", "error"}]}

Each query runs once to warm up (not counted), then `runs` timed times; when
the warm-up alone took longer than `slow_s` seconds, it is the one and only
run (runs = 1), to keep slow paths within the time budget. csq counters are
reset before the counted runs and divided by their number. The peak
RSS mark is reset (5 to /proc/self/clear_refs) before the warm-up and read
(VmHWM) after the last run; base_kb is the resident set just before.
steal_pct is the share of the machine's CPU time that the hypervisor took
while the timed runs ran (/proc/stat's steal, 10 ms ticks): on a shared VM
it tells a run that lost its cores from a slow one.
With "explain", plan holds EXPLAIN QUERY PLAN's detail text and, with an
extension loaded, csq_explain its "plan (why)" rows: what ran where.
"""
import json
import os
import sqlite3
import statistics
import sys
import time


def proc_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def steal_s():
    """The machine's stolen CPU time so far, in seconds (0 where unknown)."""
    try:
        with open("/proc/stat") as f:
            cpu = f.readline().split()
        return int(cpu[8]) / os.sysconf("SC_CLK_TCK") if cpu[0] == "cpu" and len(cpu) > 8 else 0.0
    except (OSError, ValueError):
        return 0.0


def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def stats(con):
    return dict(con.execute("SELECT name, value FROM csq_stats").fetchall())


def explain(con, sql, ext):
    """(EXPLAIN QUERY PLAN's details joined by ' | ', csq_explain's "plan (why)" or None)."""
    plan = " | ".join(r[3] for r in con.execute("EXPLAIN QUERY PLAN " + sql))
    split = None
    if ext:
        rows = dict(con.execute("SELECT part, detail FROM csq_explain(?)", (sql,)).fetchall())
        split = "%s (%s)" % (rows.get("plan"), rows.get("why"))
    return plan, split


def measure(con, q, ext):
    r = {"name": q["name"], "times": [], "median": None, "runs": 0, "rows": None,
         "media_bytes_read": None, "bytes_to_host": None, "rows_scanned": None,
         "hwm_kb": None, "base_kb": proc_kb("VmRSS"), "steal_pct": None, "plan": None,
         "csq_explain": None, "error": None}
    try:
        if q.get("explain"):
            r["plan"], r["csq_explain"] = explain(con, q["sql"], ext)
        reset_peak()
        if ext:
            con.execute("SELECT csq_stats_reset()")
        t0 = time.perf_counter()
        rows = con.execute(q["sql"]).fetchall()
        warm = time.perf_counter() - t0
        runs = q.get("runs", 5)
        if warm > q.get("slow_s", 1e9):
            r["times"] = [warm]  # too slow to repeat: the warm-up is the one run
            runs = 1
        else:
            if ext:
                con.execute("SELECT csq_stats_reset()")
            s0, w0 = steal_s(), time.perf_counter()
            for _ in range(runs):
                t0 = time.perf_counter()
                rows = con.execute(q["sql"]).fetchall()
                r["times"].append(time.perf_counter() - t0)
            wall = time.perf_counter() - w0
            if wall > 0:
                r["steal_pct"] = min(100.0, 100.0 * (steal_s() - s0) / (wall * (os.cpu_count() or 1)))
        r["hwm_kb"] = proc_kb("VmHWM")
        r["runs"] = runs
        r["median"] = statistics.median(r["times"])
        r["rows"] = [list(x) for x in rows]
        if ext:
            st = stats(con)
            r["media_bytes_read"] = st["media_bytes_read"] // runs
            r["bytes_to_host"] = st["bytes_to_host"] // runs
            r["rows_scanned"] = st["rows_scanned"] // runs
    except sqlite3.Error as e:
        r["error"] = str(e)
    return r


def main():
    job = json.load(sys.stdin)
    t0 = time.perf_counter()
    con = sqlite3.connect(job["db"], isolation_level=None)
    if job.get("ext"):
        con.enable_load_extension(True)
        con.load_extension(job["ext"])
    for s in job.get("setup", []):
        con.execute(s)
    out = {"setup_s": time.perf_counter() - t0, "queries": []}
    for q in job["queries"]:
        out["queries"].append(measure(con, q, job.get("ext")))
    con.close()
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
