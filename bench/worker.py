#!/usr/bin/python3
"""bench/worker.py - one engine's measurements in a process of its own.

Owns: timing one engine's queries on one database and reading csq's
counters and the process's memory. bench/run.py starts it once per engine
and query of the benchmark (so that a query that runs away can be killed
at its time limit without losing the others, and each query's peak resident
set is its own), and once per engine for the crossover sweep, with a JSON
job on stdin, and reads one JSON object from stdout:

  job = {"db": PATH, "ext": PATH or null, "setup": [SQL, ...],
         "queries": [{"name", "sql", "runs", "slow_s", "budget_s",
                      "explain": bool}]}
  out = {"setup_s": float, "queries": [{"name", "times", "median", "runs",
         "rows", "columns", "media_bytes_read", "bytes_to_host",
         "rows_scanned", "hwm_kb", "base_kb", "steal_pct", "plan",
         "csq_explain", "csq_plan", "csq_why", "error"}]}

Each query runs once to warm up (not counted), then `runs` timed times; when
the warm-up alone took longer than `slow_s` seconds, it is the one and only
run (runs = 1), and fewer runs are made where `runs` of them would not end
within `budget_s` seconds of the start (the caller's time limit). csq counters are
reset before the counted runs and divided by their number. The peak
RSS mark is reset (5 to /proc/self/clear_refs) before the warm-up and read
(VmHWM) after the last run; base_kb is the resident set just before.
steal_pct is the share of the machine's CPU time that the hypervisor took
while the timed runs ran (/proc/stat's steal, 10 ms ticks): on a shared VM
it tells a run that lost its cores from a slow one.
With "explain", plan holds EXPLAIN QUERY PLAN's detail text and, with an
extension loaded, csq_explain its "plan (why)" rows: what ran where
(csq_plan and csq_why the two apart; csq_plan "host" means csq_query
would hand the whole query to SQLite as written).
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


def steal_pct(since, wall):
    """The share (%) of the machine's CPU time stolen over the last `wall`
    seconds, from the steal_s() reading `since` taken at their start."""
    if wall <= 0:
        return None
    return min(100.0, 100.0 * (steal_s() - since) / (wall * (os.cpu_count() or 1)))


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
    """(EXPLAIN QUERY PLAN's details joined by ' | ', csq_explain's rows as a
    dict or {})."""
    plan = " | ".join(r[3] for r in con.execute("EXPLAIN QUERY PLAN " + sql))
    rows = {}
    if ext:
        try:
            rows = dict(con.execute("SELECT part, detail FROM csq_explain(?)", (sql,)).fetchall())
        except sqlite3.Error as e:
            rows = {"plan": "error", "why": str(e)}
    return plan, rows


def measure(con, q, ext):
    r = {"name": q["name"], "times": [], "median": None, "runs": 0, "rows": None,
         "media_bytes_read": None, "bytes_to_host": None, "rows_scanned": None,
         "hwm_kb": None, "base_kb": proc_kb("VmRSS"), "steal_pct": None, "plan": None,
         "csq_explain": None, "csq_plan": None, "csq_why": None, "columns": None, "error": None}
    start = time.perf_counter()
    try:
        if q.get("explain"):
            r["plan"], split = explain(con, q["sql"], ext)
            if split:
                r["csq_plan"], r["csq_why"] = split.get("plan"), split.get("why")
                r["csq_explain"] = "%s (%s)" % (r["csq_plan"], r["csq_why"])
        reset_peak()
        if ext:
            con.execute("SELECT csq_stats_reset()")
        sw, t0 = steal_s(), time.perf_counter()
        cur = con.execute(q["sql"])
        rows = cur.fetchall()
        warm = time.perf_counter() - t0
        r["columns"] = [d[0] for d in cur.description]
        runs = q.get("runs", 5)
        # leave a tenth of the budget for the answer to reach the caller
        left = 0.9 * q.get("budget_s", 1e18) - (time.perf_counter() - start)
        runs = min(runs, int(left / warm)) if warm > 0 else runs
        if warm > q.get("slow_s", 1e9) or runs < 1:
            r["times"] = [warm]  # too slow to repeat: the warm-up is the one run
            runs = 1
            r["steal_pct"] = steal_pct(sw, warm)
        else:
            if ext:
                con.execute("SELECT csq_stats_reset()")
            s0, w0 = steal_s(), time.perf_counter()
            for _ in range(runs):
                t0 = time.perf_counter()
                rows = con.execute(q["sql"]).fetchall()
                r["times"].append(time.perf_counter() - t0)
            r["steal_pct"] = steal_pct(s0, time.perf_counter() - w0)
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
