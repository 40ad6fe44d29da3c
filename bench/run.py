#!/usr/bin/python3
"""bench/run.py BUILD SF [options] - make bench: csq against native SQLite and
DuckDB, in one run, on the same generated rows.

  /usr/bin/python3 bench/run.py build 0.1
  options: --out DIR        results folder (default bench/results)
           --work DIR       where the databases and CSV files go (default: a
                            fresh folder under $TMPDIR, removed at the end)
           --runs N         timed runs per query (default 5, after one warm-up)
           --no-duckdb      do not run (or install) DuckDB
           --no-install     use DuckDB only when it is installed already
           --no-charts      do not draw PNG charts
           --no-crossover   skip the selectivity sweep

What it does:
 1. Loads TPC-H lineitem, orders, part and SSB lineorder, dwdate with
    build/bench/gen into native SQLite databases and csq databases (each load
    a child process: time and peak RSS from wait4).
 2. Runs every query of bench/queries.py as (a) native SQLite, (b) csq
    transparent (the same SQL on csq tables: each table's filters pushed),
    (c) csq view (whole-query pushdown through csq_query; single-table
    queries only), (d) DuckDB (bench/duckdb/run.mjs, 2 threads, tables loaded
    from the generator's CSV output) when npm can provide @duckdb/node-api.
    Besides the standard texts, labelled rewrites (bench/queries.py): 'm'
    variants of the joins with the dimension side as a MATERIALIZED CTE, and
    'r' variants of SSB Q1.x on lineorder alone (the date filter as a
    lo_orderdate range found in the data); both checked against the standard.
    Each engine runs in a process of its own (bench/worker.py), so the peak
    RSS of each query is its own. One warm-up run, then N timed runs, median.
    A csq transparent join whose warm-up alone takes over SLOW_S seconds
    gets that one run only (the runs column says so): SQLite runs joins of
    virtual tables as nested loops of device scans, minutes at SF 1.
 3. Cross-checks every answer against native SQLite (REAL within 1e-9
    relative), and the SSB single-table rewrites against the standard text.
 4. Bytes: media_bytes_read and bytes_to_host from csq_stats per run; the
    host-scan bytes of a query are the bytes of the columns it needs, as a
    columnar host scan would move them: 8 bytes per INTEGER/REAL value and
    the UTF-8 length of each TEXT value (summed over the native table).
    Modelled energy from bench/queries.py (constants cited there).
 5. Crossover: SELECT sum(l_extendedprice) FROM lineitem WHERE l_partkey < K
    for K picked from the data for selectivities 0.01% .. 100% (l_partkey is
    uniform, so zone maps prune nothing and the sweep isolates the filter),
    run native, on a csq table with pushdown='never' (host filters), with
    pushdown='always' (device filters) and as a view (device aggregates),
    plus what pushdown='auto' chose (EXPLAIN QUERY PLAN's idxStr: 'device' or
    'scan'; for the view, csq_explain's plan). The three csq tables share one
    device image: the 'never', 'always' and 'auto' databases are copies of
    the csq database whose schema row names the same stored table with
    device= and another pushdown= option (written with PRAGMA
    writable_schema; SQLite then opens it with xConnect, which never creates).
 6. Writes a table to stdout, {tpch,ssb,loads,crossover}_sf<SF>.csv under
    --out (lines starting with # are the header: machine, command, model),
    and with gnuplot {time,bytes,crossover}_sf<SF>.png.
Times are wall clock on a shared machine; only ratios measured in the same
run mean much. Exit status 0 when every answer agrees.
"""
import argparse
import csv
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import queries as Q  # noqa: E402
from worker import steal_s  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"
SLOW_S = 2.0
SELECTIVITIES = [0.0001, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0]
CROSS_RUNS = 3
TABLES = {"tpch": ["lineitem", "orders", "part"], "ssb": ["lineorder", "dwdate"]}
DUCK_TYPES = {"INTEGER": "BIGINT", "REAL": "DOUBLE", "TEXT": "VARCHAR"}


def log(*a):
    print(*a, flush=True)


# ---- loads ------------------------------------------------------------------

def child(cmd, stdout=None, stdin_data=None):
    """Run cmd; return (seconds, peak RSS in kB of that child, its stdout
    bytes when stdout is None). Raises RuntimeError on a non-zero exit."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE if stdout is None else stdout,
                         stdin=subprocess.PIPE if stdin_data is not None else None)
    out = b""
    if stdin_data is not None:
        p.stdin.write(stdin_data)
        p.stdin.close()
    if stdout is None:
        out = p.stdout.read()
        p.stdout.close()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    sec = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError("%s exited with %d" % (" ".join(cmd), p.returncode))
    return sec, ru.ru_maxrss, out


def load(args, bench, db, csq):
    cmd = [args.gen, bench, args.sf, db, "--tables", ",".join(TABLES[bench]), "--quiet"]
    if csq:
        cmd[4:4] = ["--csq", args.ext]
    sec, kb, _ = child(cmd, stdout=subprocess.DEVNULL)
    return sec, kb


def schema_types(bench):
    """{table: [(column, declared type)]} from bench/schema/<bench>.sql."""
    out = {}
    con = sqlite3.connect(":memory:")
    with open(os.path.join(HERE, "schema", bench + ".sql")) as f:
        con.executescript(f.read())
    for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
        out[t] = [(r[1], r[2]) for r in con.execute("PRAGMA table_info(%s)" % t)]
    con.close()
    return out


def column_bytes(db, tables, types):
    """{table: {column: bytes, "_rows": n}} of a columnar host scan (see the
    module doc), one pass over each native table."""
    con = sqlite3.connect(db)
    out = {}
    for t in tables:
        cols = types[t]
        exprs = ["count(*)"] + ["sum(length(CAST(%s AS BLOB)))" % c for c, ty in cols if ty == "TEXT"]
        r = con.execute("SELECT %s FROM %s" % (", ".join(exprs), t)).fetchone()
        n, text = r[0], list(r[1:])
        out[t] = {"_rows": n}
        for c, ty in cols:
            out[t][c] = (text.pop(0) or 0) if ty == "TEXT" else 8 * n
    con.close()
    return out


def ssb_date_ranges(db):
    """{query: (lo, hi)}: each SSB flight-1 date filter as a contiguous range
    of d_datekey, when it is one (every date key in the range qualifies)."""
    con = sqlite3.connect(db)
    out = {}
    for q in Q.SSB:
        lo, hi, n = con.execute("SELECT min(d_datekey), max(d_datekey), count(*) FROM dwdate WHERE "
                                + q["date"]).fetchone()
        if n and con.execute("SELECT count(*) FROM dwdate WHERE d_datekey BETWEEN ? AND ?",
                             (lo, hi)).fetchone()[0] == n:
            out[q["name"]] = (lo, hi)
    con.close()
    return out


# ---- DuckDB -------------------------------------------------------------------

def duckdb_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "csq-bench", "duckdb")


def duckdb_ready(install):
    """The npm prefix holding @duckdb/node-api, installing it there when
    allowed; None (with a printed note) when DuckDB cannot run here."""
    d = duckdb_dir()
    if not shutil.which("node"):
        log("note: DuckDB skipped: node is not installed")
        return None
    if os.path.isdir(os.path.join(d, "node_modules", "@duckdb", "node-api")):
        return d
    if not install:
        log("note: DuckDB skipped: @duckdb/node-api is not installed in %s" % d)
        return None
    if not shutil.which("npm"):
        log("note: DuckDB skipped: npm is not installed")
        return None
    os.makedirs(d, exist_ok=True)
    log("installing @duckdb/node-api into %s ..." % d)
    try:
        r = subprocess.run(["npm", "install", "--prefix", d, "--no-audit", "--no-fund", "@duckdb/node-api"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
        msg, ok = r.stdout.decode(errors="replace"), r.returncode == 0
    except subprocess.TimeoutExpired:
        msg, ok = "timed out", False
    if not ok or not os.path.isdir(os.path.join(d, "node_modules", "@duckdb", "node-api")):
        log("note: DuckDB skipped: npm install @duckdb/node-api failed:\n  "
            + msg.strip().replace("\n", "\n  ")[-800:])
        return None
    return d


def run_duckdb(args, ddir, work, qlist):
    """Write the tables as CSV, run bench/duckdb/run.mjs on them; returns
    (its loads, {query: result}, seconds the CSV files took), or Nones."""
    tables, t_csv = [], 0.0
    for bench in ("tpch", "ssb"):
        types = schema_types(bench)
        for t in TABLES[bench]:
            path = os.path.join(work, "%s_%s.csv" % (bench, t))
            with open(path, "wb") as f:
                sec, _, _ = child([args.gen, bench, args.sf, "-", "--format", "csv", "--tables", t, "--quiet"],
                                  stdout=f)
            t_csv += sec
            tables.append({"name": t, "csv": path,
                           "columns": [[c, DUCK_TYPES.get(ty, "VARCHAR")] for c, ty in types[t]]})
    job = {"threads": 2, "runs": args.runs, "tables": tables,
           "queries": [{"name": q["name"], "sql": q["sql"]} for q in qlist]}
    jpath = os.path.join(work, "duckdb_job.json")
    with open(jpath, "w") as f:
        json.dump(job, f)
    env = dict(os.environ, CSQ_DUCKDB_DIR=ddir)
    t0 = time.perf_counter()
    r = subprocess.run(["node", os.path.join(HERE, "duckdb", "run.mjs"), jpath], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for t in tables:
        os.remove(t["csv"])
    if r.returncode != 0:
        log("note: DuckDB run failed (exit %d): %s" % (r.returncode, r.stderr.decode(errors="replace")[-800:]))
        return None, None, t_csv
    out = json.loads(r.stdout)
    log("DuckDB %s: %.1f s in all" % (out.get("version"), time.perf_counter() - t0))
    return out["loads"], {q["name"]: q for q in out["queries"]}, t_csv


# ---- SQLite engines -----------------------------------------------------------

def run_worker(db, ext, setup, qs):
    """bench/worker.py on one database: {query name: its result}."""
    job = {"db": db, "ext": ext, "setup": setup, "queries": qs}
    _, _, out = child([PY, os.path.join(HERE, "worker.py")], stdin_data=json.dumps(job).encode())
    return {q["name"]: q for q in json.loads(out)["queries"]}


def view_name(q):
    return "v_" + q["name"].replace(".", "_")


def view_setup(qlist):
    return ["CREATE VIRTUAL TABLE temp.%s USING csq_query('%s')" % (view_name(q), q["sql"].replace("'", "''"))
            for q in qlist]


def same(a, b):
    """Rows equal: integers and text exactly, REAL within 1e-9 relative."""
    if a is None or b is None or len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if len(x) != len(y):
            return False
        for u, v in zip(x, y):
            if isinstance(u, (int, float)) and isinstance(v, (int, float)):
                if isinstance(u, float) or isinstance(v, float):
                    if abs(u - v) > 1e-9 * max(1.0, abs(u), abs(v)):
                        return False
                elif u != v:
                    return False
            elif u != v:
                return False
    return True


def add_note(note, more):
    return (note + "; " if note else "") + more


def run_bench(args, bench, dbs, qlist, colbytes, duck):
    """Every engine on one benchmark's queries; returns the result rows."""
    single = [q for q in qlist if q["single"]]
    base = [{"name": q["name"], "sql": q["sql"], "runs": args.runs} for q in qlist]
    log("  %s: native ..." % bench)
    nat = run_worker(dbs["native"], None, [], base)
    log("  %s: csq transparent ..." % bench)
    # joins on csq tables run as nested loops of device scans: minutes at SF 1, so one run
    tr = run_worker(dbs["csq"], args.ext, [], [dict(b, explain=True, slow_s=1e9 if q["single"] else SLOW_S)
                                               for b, q in zip(base, qlist)])
    log("  %s: csq view ..." % bench)
    vw = run_worker(dbs["csq"], args.ext, view_setup(single),
                    [{"name": q["name"], "sql": "SELECT * FROM %s" % view_name(q), "runs": args.runs}
                     for q in single])
    rows = []
    for q in qlist:
        n, t_r = nat[q["name"]], tr[q["name"]]
        nrows = colbytes[q["tables"][0]]["_rows"]
        hostb = sum(colbytes[t][c] for t, cs in q["cols"].items() for c in cs)
        d = duck.get(q["name"]) if duck else None
        engines = [("native", n), ("csq-transparent", t_r)]
        if q["single"]:
            engines.append(("csq-view", vw[q["name"]]))
        if d is not None:
            engines.append(("duckdb", d))
        for eng, r in engines:
            t = r.get("median")
            note = ""
            if r.get("error"):
                ok, note = "ERROR", r["error"][:200]
            elif eng == "native" and q.get("rewrite_of"):
                ok = "agree" if same(n.get("rows"), nat[q["rewrite_of"]].get("rows")) else "DIFFER"
                note = "rewrite of %s: its date filter as a lo_orderdate range; checked against it" % q["rewrite_of"]
            elif eng == "native":
                ok = "reference"
            else:
                ok = "agree" if same(n.get("rows"), r.get("rows")) else "DIFFER"
            if eng.startswith("csq"):
                media, toh = r.get("media_bytes_read"), r.get("bytes_to_host")
                energy = Q.energy_push_mj(media, toh, nrows, q["ops"]) if media is not None else None
            else:
                media, toh = None, None
                energy = Q.energy_host_mj(hostb, nrows, q["ops"])
            if eng == "csq-transparent" and t_r.get("plan"):
                note = add_note(note, "EXPLAIN QUERY PLAN: " + t_r["plan"])
                if not q["single"]:
                    note = add_note(note, "csq_explain: " + (t_r.get("csq_explain") or ""))
            if eng == "csq-view" and t_r.get("csq_explain"):
                note = add_note(note, "csq_explain: " + t_r["csq_explain"])
            if r.get("times") and len(r["times"]) == 1 and args.runs > 1:
                note = add_note(note, "one run only: the warm-up took over %g s" % SLOW_S)
            rows.append({
                "bench": bench, "query": q["name"], "engine": eng,
                "runs": len(r.get("times") or []), "median_s": t,
                "x_native": (n["median"] / t) if t and n.get("median") else None,
                "x_duckdb": (d["median"] / t) if (t and d and d.get("median")) else None,
                "media_bytes_read": media, "bytes_to_host": toh, "host_scan_bytes": hostb,
                "energy_mj": energy,
                "peak_rss_mb": (r["hwm_kb"] / 1024.0) if r.get("hwm_kb") else None,
                "base_rss_mb": (r["base_kb"] / 1024.0) if r.get("base_kb") else None,
                "steal_pct": r.get("steal_pct"),
                "answers": ok, "note": note,
                "_rows": r.get("rows"), "_ref": n.get("rows")})
    return rows


# ---- crossover ------------------------------------------------------------------

def retarget(src, dst, table, opts):
    """Copy database src to dst with its csq table `table` declared with the
    extra options opts (device= the original image, pushdown=...): a second
    name for the same stored table, which SQLite opens with xConnect."""
    shutil.copy(src, dst)
    con = sqlite3.connect(dst)
    sql = con.execute("SELECT sql FROM sqlite_master WHERE name=?", (table,)).fetchone()[0]
    sql = sql.rstrip().rstrip(")") + ", " + opts + ")"
    con.execute("PRAGMA writable_schema=ON")
    con.execute("UPDATE sqlite_master SET sql=? WHERE name=?", (sql, table))
    con.commit()
    con.execute("PRAGMA writable_schema=OFF")
    con.close()


def crossover(args, work, native_db, csq_db):
    image = os.path.abspath(csq_db + "-csd").replace("'", "''")
    dbs = {}
    for mode in ("never", "always", "auto"):
        dbs[mode] = os.path.join(work, "cross_%s.db" % mode)
        retarget(csq_db, dbs[mode], "lineitem", "device='%s', pushdown='%s'" % (image, mode))
    con = sqlite3.connect(native_db)
    hist = con.execute("SELECT l_partkey, count(*) FROM lineitem GROUP BY l_partkey ORDER BY 1").fetchall()
    con.close()
    n = sum(c for _, c in hist)
    points = []  # (target, K, actual selectivity): the smallest K reaching the target
    for s in SELECTIVITIES:
        acc, k = n, hist[-1][0] + 1
        run_acc = 0
        for key, c in hist:
            if run_acc >= s * n:
                k, acc = key, run_acc
                break
            run_acc += c
        if not points or points[-1][1] != k:
            points.append((s, k, acc / n))
    qs = [{"name": "p%d" % i, "sql": "SELECT sum(l_extendedprice) FROM lineitem WHERE l_partkey < %d" % k,
           "runs": CROSS_RUNS, "slow_s": 1e9} for i, (s, k, real) in enumerate(points)]
    log("  crossover: %d points, native ..." % len(qs))
    res = {"native": run_worker(native_db, None, [], qs)}
    log("  crossover: pushdown='never' ...")
    res["never"] = run_worker(dbs["never"], args.ext, [], qs)
    log("  crossover: pushdown='always' ...")
    res["always"] = run_worker(dbs["always"], args.ext, [], qs)
    log("  crossover: views ...")
    res["view"] = run_worker(dbs["always"], args.ext, view_setup(qs),
                             [dict(q, sql="SELECT * FROM %s" % view_name(q)) for q in qs])
    # what pushdown='auto' picks (the plans; the query runs only twice)
    auto = run_worker(dbs["auto"], args.ext, [], [dict(q, runs=1, explain=True) for q in qs])
    rows = []
    for i, (s, k, real) in enumerate(points):
        name = "p%d" % i
        plan = auto[name].get("plan") or ""
        choice = "device" if "INDEX 2:device" in plan else ("scan" if "INDEX 0:scan" in plan else "?")
        vchoice = (auto[name].get("csq_explain") or "?").split(" ")[0]
        ref = res["native"][name].get("rows")
        for path, label in (("native", "native"), ("never", "csq pushdown=never (host filter)"),
                            ("always", "csq pushdown=always (device filter)"),
                            ("view", "csq view (device aggregate)")):
            r = res[path][name]
            if r.get("error"):
                ok = "ERROR"
            else:
                ok = "reference" if path == "native" else ("agree" if same(ref, r.get("rows")) else "DIFFER")
            rows.append({"target_sel": s, "actual_sel": real, "k": k, "path": label,
                         "runs": len(r.get("times") or []), "median_s": r.get("median"),
                         "media_bytes_read": r.get("media_bytes_read"), "bytes_to_host": r.get("bytes_to_host"),
                         "peak_rss_mb": (r["hwm_kb"] / 1024.0) if r.get("hwm_kb") else None,
                         "auto_table_chose": choice, "auto_view_chose": vchoice, "answers": ok})
    return rows


# ---- output ----------------------------------------------------------------------

def fmt(v, spec):
    return "-" if v is None else spec % v


def print_table(rows):
    log("%-5s %-6s %-16s %4s %9s %8s %8s %12s %12s %12s %9s %7s %6s %s" % (
        "bench", "query", "engine", "runs", "median s", "x native", "x duckdb", "media B", "to host B",
        "host scan B", "model mJ", "RSS MB", "steal%", "answers"))
    for r in rows:
        log("%-5s %-6s %-16s %4d %9s %8s %8s %12s %12s %12s %9s %7s %6s %s" % (
            r["bench"], r["query"], r["engine"], r["runs"], fmt(r["median_s"], "%.4f"),
            fmt(r["x_native"], "%.2f"), fmt(r["x_duckdb"], "%.2f"), fmt(r["media_bytes_read"], "%d"),
            fmt(r["bytes_to_host"], "%d"), fmt(r["host_scan_bytes"], "%d"), fmt(r["energy_mj"], "%.3f"),
            fmt(r["peak_rss_mb"], "%.1f"), fmt(r.get("steal_pct"), "%.1f"), r["answers"]))
        if r["answers"] in ("DIFFER", "ERROR"):
            log("    %s\n    got %r\n    native %r" % (r["note"], (r["_rows"] or [])[:3], (r["_ref"] or [])[:3]))


def write_csv(path, rows, cols, header_lines):
    with open(path, "w", newline="") as f:
        for h in header_lines:
            f.write("# %s\n" % h)
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow(["" if r.get(c) is None else (("%.6g" % r[c]) if isinstance(r[c], float) else r[c])
                        for c in cols])


QCOLS = ["bench", "query", "engine", "runs", "median_s", "x_native", "x_duckdb", "media_bytes_read",
         "bytes_to_host", "host_scan_bytes", "energy_mj", "peak_rss_mb", "base_rss_mb", "steal_pct",
         "answers", "note"]
XCOLS = ["target_sel", "actual_sel", "k", "path", "runs", "median_s", "media_bytes_read", "bytes_to_host",
         "peak_rss_mb", "auto_table_chose", "auto_view_chose", "answers"]
LCOLS = ["what", "engine", "seconds", "rows", "peak_rss_mb"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("sf", nargs="?", default="0.1")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--work")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-duckdb", action="store_true")
    ap.add_argument("--no-install", action="store_true")
    ap.add_argument("--no-charts", action="store_true")
    ap.add_argument("--no-crossover", action="store_true")
    args = ap.parse_args()
    args.ext = os.path.abspath(os.path.join(args.build, "csq.so"))
    args.gen = os.path.abspath(os.path.join(args.build, "bench", "gen"))
    for p in (args.ext, args.gen):
        if not os.path.exists(p):
            log("bench: %s is missing: run make first" % p)
            return 2
    t_start, steal_start = time.perf_counter(), steal_s()
    work = args.work or tempfile.mkdtemp(prefix="csq-bench-")
    os.makedirs(work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    machine = "%s, %d cores, %s, Python %s, SQLite %s" % (
        platform.node(), os.cpu_count(), platform.platform(), platform.python_version(), sqlite3.sqlite_version)
    header = ["csq benchmark, SF %s, %d timed runs after one warm-up, median; %s" % (args.sf, args.runs, machine),
              "command: /usr/bin/python3 bench/run.py %s %s; %s" % (
                  args.build, args.sf, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
              "x_native = native s / this s; x_duckdb = DuckDB s / this s (above 1: faster)",
              "host_scan_bytes: the query's columns as a columnar host scan moves them (8 B per INTEGER/REAL "
              "value, UTF-8 bytes per TEXT value)",
              "peak_rss_mb: the engine process's peak resident set (VmHWM, reset before the query) over its "
              "runs; base_rss_mb: its resident set just before",
              "steal_pct: share of the machine's CPU time the hypervisor took during the timed runs "
              "(/proc/stat, 10 ms ticks); csq's device threads need both cores, so steal slows it more "
              "than single-threaded native SQLite", Q.ENERGY_NOTE]
    for h in header:
        log(h)

    # 1. loads
    dbs, loads = {}, []
    for bench in ("tpch", "ssb"):
        dbs[bench] = {"native": os.path.join(work, bench + "_native.db"), "csq": os.path.join(work, bench + "_csq.db")}
        for eng in ("native", "csq"):
            for p in (dbs[bench][eng], dbs[bench][eng] + "-csd"):
                if os.path.exists(p):
                    os.remove(p)
            sec, kb = load(args, bench, dbs[bench][eng], eng == "csq")
            loads.append({"what": "%s %s" % (bench, "+".join(TABLES[bench])), "engine": eng, "seconds": sec,
                          "peak_rss_mb": kb / 1024.0})
            log("load %s into %s: %.2f s, peak RSS %.1f MB" % (bench, eng, sec, kb / 1024.0))
    types = {b: schema_types(b) for b in TABLES}
    colbytes = {}
    for bench in TABLES:
        colbytes.update(column_bytes(dbs[bench]["native"], TABLES[bench], types[bench]))
    for ld in loads:
        ld["rows"] = sum(colbytes[t]["_rows"] for t in TABLES[ld["what"].split()[0]])
    qsets = {"tpch": Q.TPCH, "ssb": Q.ssb_queries(ssb_date_ranges(dbs["ssb"]["native"]))}

    # 2. DuckDB first, so that its CSV files come and go before the rest
    duck = None
    if not args.no_duckdb:
        ddir = duckdb_ready(not args.no_install)
        if ddir:
            log("DuckDB: CSV files, load, queries ...")
            dloads, duck, t_csv = run_duckdb(args, ddir, work, qsets["tpch"] + qsets["ssb"])
            for b in ("tpch", "ssb"):
                ds = [x for x in (dloads or []) if x["name"] in TABLES[b]]
                if ds:
                    loads.append({"what": "%s %s" % (b, "+".join(TABLES[b])), "engine": "duckdb",
                                  "seconds": sum(x["seconds"] for x in ds), "rows": sum(x["rows"] for x in ds),
                                  "peak_rss_mb": max((x["hwm_kb"] or 0) for x in ds) / 1024.0})
            loads.append({"what": "CSV files for DuckDB (gen --format csv)", "engine": "gen", "seconds": t_csv,
                          "rows": None, "peak_rss_mb": None})

    # 3. SQLite engines
    rows = []
    for bench in ("tpch", "ssb"):
        rows += run_bench(args, bench, dbs[bench], qsets[bench], colbytes, duck)
    xrows = [] if args.no_crossover else crossover(args, work, dbs["tpch"]["native"], dbs["tpch"]["csq"])

    # 4. output
    log("")
    for h in header:
        log(h)
    log("loads:")
    for ld in loads:
        log("  %-40s %-7s %8.2f s  %10s rows  peak RSS %s MB" % (
            ld["what"], ld["engine"], ld["seconds"], fmt(ld["rows"], "%d"), fmt(ld["peak_rss_mb"], "%.1f")))
    print_table(rows)
    if xrows:
        log("crossover: SELECT sum(l_extendedprice) FROM lineitem WHERE l_partkey < K (%d timed runs, median)"
            % CROSS_RUNS)
        log("%8s %8s %-37s %9s %11s %11s %7s %-6s %-11s %s" % (
            "target", "actual", "path", "median s", "media B", "to host B", "RSS MB", "auto", "auto view",
            "answers"))
        for r in xrows:
            log("%8.4f %8.5f %-37s %9s %11s %11s %7s %-6s %-11s %s" % (
                r["target_sel"], r["actual_sel"], r["path"], fmt(r["median_s"], "%.4f"),
                fmt(r["media_bytes_read"], "%d"), fmt(r["bytes_to_host"], "%d"), fmt(r["peak_rss_mb"], "%.1f"),
                r["auto_table_chose"], r["auto_view_chose"], r["answers"]))
    sf = args.sf
    files = []
    for bench in ("tpch", "ssb"):
        p = os.path.join(args.out, "%s_sf%s.csv" % (bench, sf))
        write_csv(p, [r for r in rows if r["bench"] == bench], QCOLS, header)
        files.append(p)
    p = os.path.join(args.out, "loads_sf%s.csv" % sf)
    write_csv(p, loads, LCOLS, header[:2])
    files.append(p)
    if xrows:
        p = os.path.join(args.out, "crossover_sf%s.csv" % sf)
        write_csv(p, xrows, XCOLS, header[:2] + ["query: SELECT sum(l_extendedprice) FROM lineitem WHERE "
                                                 "l_partkey < k; auto_*: what pushdown='auto' chose"])
        files.append(p)
    if not args.no_charts:
        import charts
        files += charts.draw(args.out, sf, rows, xrows, work)
    log("wrote " + ", ".join(os.path.relpath(f) for f in files))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    bad = [r for r in rows + xrows if r["answers"] in ("DIFFER", "ERROR")]
    wall = time.perf_counter() - t_start
    log("bench: %d results, %d disagree or failed; %.0f s in all; CPU steal %.1f%% of the machine's time" % (
        len(rows) + len(xrows), len(bad), wall, 100.0 * (steal_s() - steal_start) / (wall * (os.cpu_count() or 1))))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
