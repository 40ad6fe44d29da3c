#!/usr/bin/python3
"""bench/run.py BUILD SF [options] - make bench: the 22 TPC-H and 13 SSB
queries on native SQLite, on csq tables and in DuckDB, in one run, on the
same generated rows.

Owns the run: the loads, which engine runs which query under which time
limit, the cross-checks, the printed tables, the CSV files. bench/queries.py
holds the queries (bench/sql/), bench/answers.py judges answers,
bench/worker.py and bench/duckdb/run.mjs measure, bench/charts.py draws.

  /usr/bin/python3 bench/run.py build 0.1
  options: --out DIR        results folder (default bench/results)
           --work DIR       where the databases and CSV files go (default: a
                            fresh folder under $TMPDIR, removed at the end)
           --runs N         timed runs per query (default 5, after one warm-up)
           --timeout S      per query and engine (default 300): a query still
                            running then is killed and reported as a timeout
           --suites LIST    tpch,ssb (default both)
           --queries LIST   only these, e.g. Q1,Q6,Q3.1 (default all 35)
           --no-duckdb      do not run (or install) DuckDB
           --no-install     use DuckDB only when it is installed already
           --no-charts      do not draw PNG charts
           --no-crossover   skip the selectivity sweep

What it does:
 1. Generates every table of TPC-H and SSB with build/bench/gen into native
    SQLite databases and csq databases (each load a child process: time and
    peak RSS from wait4). Native tables get no indexes, as gen makes them.
 2. Runs every query of bench/sql as
      native        SQLite on the native tables;
      csq           the same text on the csq tables, SQLite's own planner
                    (csq as written: each table's filters and join probes
                    pushed to the device);
      csq-planner   the text as a csq_query view, where csq_explain says csq
                    plans it (its plan is not "host"); "n/a" where csq_query
                    would hand the whole query to SQLite as written, which
                    the csq column measures already;
      duckdb        DuckDB 2 threads (bench/duckdb/run.mjs), tables loaded
                    from gen's CSV with TPC-H's own types (DATE, DECIMAL(15,2)
                    for money, quantity, discount and tax) and SSB's (INTEGER
                    date keys and prices), the DuckDB variant of the text
                    where bench/sql has one (bench/sql/README.md).
    Each SQLite engine runs each query in a process of its own
    (bench/worker.py): one warm-up, then N timed runs, median; a warm-up over
    SLOW_S seconds is the only run. A query with no answer within --timeout
    seconds is killed and recorded as a timeout; the run goes on.
 3. Cross-checks every answer against native SQLite by bench/answers.py's
    rules (against DuckDB's where native timed out).
 4. Bytes: media_bytes_read and bytes_to_host from csq_stats per run; the
    host-scan bytes of a query are the bytes of the columns it names, as a
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
 6. Prints a table per suite (ms per engine, geometric means, bytes to the
    host, steal) and writes {tpch,ssb,loads,crossover}_sf<SF>.csv under --out
    (lines starting with # are the header: machine, command, model) and,
    with gnuplot, {tpch,ssb}_time_sf<SF>.png, bytes_sf<SF>.png and
    crossover_sf<SF>.png.
Times are wall clock on a shared machine: /proc/stat's steal is reported per
query and for the run; only ratios measured in the same run mean much.
Exit status 0 when every answer agrees (timeouts are reported, not failed).
"""
import argparse
import csv
import json
import math
import os
import platform
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import answers  # noqa: E402
import queries as Q  # noqa: E402
from worker import steal_s  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"
SLOW_S = 2.0
# A worker's own start (Python, the extension, opening the database) is not
# the query's: the kill comes this much after the query's time limit.
START_SLACK_S = 15.0
SELECTIVITIES = [0.0001, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0]
CROSS_RUNS = 3
ENGINES = ["native", "csq", "csq-planner", "duckdb"]
# TPC-H's own types for DuckDB (spec 1.4: DATE, and decimal for money,
# quantity, discount and tax); gen declares these TEXT, REAL and INTEGER for
# SQLite. Keys stay INTEGER, orderkeys BIGINT (they pass 2^31 above SF 300).
TPCH_DATES = {"l_shipdate", "l_commitdate", "l_receiptdate", "o_orderdate"}
TPCH_DECIMALS = {"l_quantity", "l_extendedprice", "l_discount", "l_tax", "o_totalprice", "ps_supplycost",
                 "p_retailprice", "s_acctbal", "c_acctbal"}


def log(*a):
    print(*a, flush=True)


def duck_type(suite, col, ty):
    if suite == "tpch":
        if col in TPCH_DATES:
            return "DATE"
        if col in TPCH_DECIMALS:
            return "DECIMAL(15,2)"
        if col.endswith("orderkey"):
            return "BIGINT"
    return {"INTEGER": "INTEGER", "REAL": "DOUBLE"}.get(ty, "VARCHAR")


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


def load(args, suite, db, csq):
    cmd = [args.gen, suite, args.sf, db, "--quiet"]
    if csq:
        cmd += ["--csq", args.ext]
    sec, kb, _ = child(cmd, stdout=subprocess.DEVNULL)
    return sec, kb


def column_bytes(db, types):
    """{table: {column: bytes, "_rows": n}} of a columnar host scan (see the
    module doc), one pass over each native table."""
    con = sqlite3.connect(db)
    out = {}
    for t, cols in types.items():
        exprs = ["count(*)"] + ["sum(length(CAST(%s AS BLOB)))" % c for c, ty in cols if ty == "TEXT"]
        r = con.execute("SELECT %s FROM %s" % (", ".join(exprs), t)).fetchone()
        n, text = r[0], list(r[1:])
        out[t] = {"_rows": n}
        for c, ty in cols:
            out[t][c] = (text.pop(0) or 0) if ty == "TEXT" else 8 * n
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


def run_duckdb(args, ddir, work, suite, qlist):
    """One suite in DuckDB: write its tables as CSV, run bench/duckdb/run.mjs
    on them; returns (its loads, {query: result}, seconds the CSV files
    took), or (None, None, seconds) when it failed."""
    tables, t_csv = [], 0.0
    for t, cols in Q.schema(suite).items():
        path = os.path.join(work, "%s_%s.csv" % (suite, t))
        with open(path, "wb") as f:
            sec, _, _ = child([args.gen, suite, args.sf, "-", "--format", "csv", "--tables", t, "--quiet"], stdout=f)
        t_csv += sec
        tables.append({"name": t, "csv": path, "columns": [[c, duck_type(suite, c, ty)] for c, ty in cols]})
    job = {"threads": 2, "runs": args.runs, "timeout_s": args.timeout, "slow_s": SLOW_S, "tables": tables,
           "queries": [{"name": q["name"], "sql": q["duckdb_sql"]} for q in qlist]}
    jpath = os.path.join(work, "duckdb_%s.json" % suite)
    with open(jpath, "w") as f:
        json.dump(job, f)
    env = dict(os.environ, CSQ_DUCKDB_DIR=ddir)
    t0 = time.perf_counter()
    try:
        r = subprocess.run(["node", os.path.join(HERE, "duckdb", "run.mjs"), jpath], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=(args.timeout + START_SLACK_S) * (len(qlist) + len(tables)))
        rc, err = r.returncode, r.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        rc, err = -1, "the DuckDB run outlived every query's time limit together"
    for t in tables:
        os.remove(t["csv"])
    if rc != 0:
        log("note: DuckDB run failed (exit %d): %s" % (rc, err[-800:]))
        return None, None, t_csv
    out = json.loads(r.stdout)
    log("  %s: DuckDB %s: %.1f s in all" % (suite, out.get("version"), time.perf_counter() - t0))
    return out["loads"], {q["name"]: q for q in out["queries"]}, t_csv


# ---- SQLite engines -----------------------------------------------------------

def run_worker(db, ext, setup, qs):
    """bench/worker.py on one database, every query of qs in one process
    (the crossover sweep): {query name: its result}."""
    job = {"db": db, "ext": ext, "setup": setup, "queries": qs}
    _, _, out = child([PY, os.path.join(HERE, "worker.py")], stdin_data=json.dumps(job).encode())
    return {q["name"]: q for q in json.loads(out)["queries"]}


def run_one(args, db, ext, setup, q):
    """bench/worker.py on one query in a process of its own, killed (its
    whole process group) when it outlives the time limit: the result, with
    "timeout": True when it had none in time."""
    job = {"db": db, "ext": ext, "setup": setup, "queries": [dict(q, budget_s=args.timeout)]}
    p = subprocess.Popen([PY, os.path.join(HERE, "worker.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(json.dumps(job).encode(), timeout=args.timeout + START_SLACK_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return {"name": q["name"], "timeout": True, "error": "no answer within %g s" % args.timeout}
    if p.returncode != 0:
        return {"name": q["name"], "error": "worker exited %d: %s" % (p.returncode,
                                                                      err.decode(errors="replace")[-600:])}
    return json.loads(out)["queries"][0]


def view_name(q):
    return "v_" + q["name"].replace(".", "_")


def view_setup(qlist):
    return ["CREATE VIRTUAL TABLE temp.%s USING csq_query('%s')" % (view_name(q), q["sql"].replace("'", "''"))
            for q in qlist]


def same(a, b):
    """Unordered one-row answers of the crossover sweep equal (REAL within
    bench/answers.py's tolerance)."""
    return answers.diff(a, b, None, None, False, strict_types=False) is None


def add_note(note, more):
    return (note + "; " if note else "") + more


def state(r):
    if r is None:
        return "n/a"
    if r.get("timeout"):
        return "TIMEOUT"
    if r.get("error"):
        return "ERROR"
    return "ok"


def run_suite(args, suite, dbs, qlist, colbytes, duck):
    """Every SQLite engine on one suite's queries; returns the result rows
    (one per query and engine)."""
    exact = {c for cs in Q.schema(suite).values() for c, _ in cs}
    rows = []
    for q in qlist:
        base = {"name": q["name"], "sql": q["sql"], "runs": args.runs, "slow_s": SLOW_S}
        res = {"native": run_one(args, dbs["native"], None, [], base)}
        res["csq"] = run_one(args, dbs["csq"], args.ext, [], dict(base, explain=True))
        cplan = res["csq"].get("csq_plan")
        why_na = None
        if cplan in (None, "host", "error"):
            why_na = "csq_query plans nothing of it: %s" % (res["csq"].get("csq_why") or res["csq"].get("error")
                                                           or "no csq_explain")
            res["csq-planner"] = None
        else:
            res["csq-planner"] = run_one(args, dbs["csq"], args.ext, view_setup([q]),
                                         dict(base, sql="SELECT * FROM %s" % view_name(q)))
        res["duckdb"] = duck.get(q["name"]) if duck else None
        log("  %-5s %s" % (q["name"], "  ".join(
            "%s %s" % (e, ("%.4f s" % res[e]["median"]) if state(res[e]) == "ok" else state(res[e]))
            for e in ENGINES if res[e] is not None or e == "csq-planner")))
        rows += judge(args, suite, q, res, colbytes, exact, why_na)
    return rows


def judge(args, suite, q, res, colbytes, exact, why_na):
    """The result rows of one query: each engine's answer checked against
    native's (DuckDB's where native has none)."""
    nat, duck = res["native"], res["duckdb"]
    ref_eng = "native" if state(nat) == "ok" else ("duckdb" if state(duck) == "ok" else None)
    ref = res[ref_eng] if ref_eng else None
    terms, ordered = Q.order_by(q["sql"]), Q.has_order_by(q["sql"])
    nrows = colbytes[q["tables"][0]]["_rows"]
    hostb = sum(colbytes[t][c] for t, cs in q["cols"].items() for c in cs)
    out = []
    for eng in ENGINES:
        r = res[eng]
        if r is None and not (eng == "csq-planner" and why_na):
            continue
        r = r or {}
        st = "n/a" if eng == "csq-planner" and why_na else state(r)
        note = why_na if st == "n/a" else ""
        if st == "ok":
            if eng == ref_eng:
                ok = "reference"
            elif ref is None:
                ok = "unchecked"
                note = add_note(note, "no engine to check against")
            else:
                # DuckDB answers with its own types: numbers by value (answers.py)
                strict = "duckdb" not in (eng, ref_eng)
                d = answers.diff(ref.get("rows"), r.get("rows"), ref.get("columns"), terms, ordered,
                                 exact_names=exact if strict else (), strict_types=strict)
                ok = "agree" if d is None else "DIFFER"
                if d:
                    note = add_note(note, "against %s: %s" % (ref_eng, d[:300]))
                elif ref_eng != "native":
                    note = add_note(note, "checked against DuckDB (native had no answer)")
        else:
            ok = st
            if st in ("ERROR", "TIMEOUT"):
                note = add_note(note, (r.get("error") or "")[:300])
        t = r.get("median") if st == "ok" else None
        if eng.startswith("csq") and st == "ok":
            media, toh = r.get("media_bytes_read"), r.get("bytes_to_host")
            energy = Q.energy_push_mj(media, toh, nrows, q["ops"]) if media is not None else None
        else:
            media, toh = None, None
            energy = Q.energy_host_mj(hostb, nrows, q["ops"]) if eng in ("native", "duckdb") else None
        if eng == "csq" and r.get("plan"):
            note = add_note(note, "EXPLAIN QUERY PLAN: " + r["plan"])
            if r.get("csq_explain"):
                note = add_note(note, "csq_explain: " + r["csq_explain"])
        if st == "ok" and len(r.get("times") or []) == 1 and args.runs > 1:
            note = add_note(note, "one run only: the warm-up took over %g s or the time limit left no more"
                            % SLOW_S)
        n_t = nat.get("median") if state(nat) == "ok" else None
        d_t = duck.get("median") if state(duck) == "ok" else None
        out.append({
            "bench": suite, "query": q["name"], "engine": eng,
            "runs": len(r.get("times") or []) if st == "ok" else 0, "median_s": t,
            "x_native": (n_t / t) if t and n_t else None,
            "x_duckdb": (d_t / t) if t and d_t else None,
            "media_bytes_read": media, "bytes_to_host": toh, "host_scan_bytes": hostb,
            "energy_mj": energy,
            "peak_rss_mb": (r["hwm_kb"] / 1024.0) if r.get("hwm_kb") else None,
            "base_rss_mb": (r["base_kb"] / 1024.0) if r.get("base_kb") else None,
            "steal_pct": r.get("steal_pct"),
            "answers": ok, "note": note})
    return out


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


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


def cell(rows, suite, query, engine):
    for r in rows:
        if r["bench"] == suite and r["query"] == query and r["engine"] == engine:
            return r
    return None


def ms(r):
    if r is None:
        return "-"
    if r["median_s"] is not None:
        return "%.1f" % (r["median_s"] * 1000)
    return {"TIMEOUT": "timeout", "n/a": "n/a"}.get(r["answers"], r["answers"].lower())


def summary(rows, suite, args):
    """The per-query table of one suite and its geometric means, as lines."""
    names = []
    for r in rows:
        if r["bench"] == suite and r["query"] not in names:
            names.append(r["query"])
    if not names:
        return []
    title = {"tpch": "TPC-H", "ssb": "SSB"}[suite]
    lines = ["%s SF %s: median ms of up to %d warm runs; timeout = no answer within %g s; csq = as written "
             "(SQLite's planner over csq tables); csq-planner n/a = csq_query hands the query to SQLite"
             % (title, args.sf, args.runs, args.timeout),
             "%-6s %10s %10s %8s %11s %10s %8s %12s %12s %6s  %s" % (
                 "query", "native", "csq", "csq/nat", "csq-planner", "duckdb", "csq/duck", "csq to host B",
                 "host scan B", "steal%", "answers")]
    for name in names:
        e = {eng: cell(rows, suite, name, eng) for eng in ENGINES}
        c = e["csq"]
        steal = [r["steal_pct"] for r in e.values() if r and r.get("steal_pct") is not None]
        lines.append("%-6s %10s %10s %8s %11s %10s %8s %12s %12s %6s  %s" % (
            name, ms(e["native"]), ms(c), fmt(c and c["x_native"], "%.2fx"), ms(e["csq-planner"]), ms(e["duckdb"]),
            fmt(c and c["x_duckdb"], "%.2fx"), fmt(c and c["bytes_to_host"], "%d"),
            fmt(c and c["host_scan_bytes"], "%d"), fmt(max(steal) if steal else None, "%.1f"), verdict(e)))
    answered = {eng: [n for n in names if (cell(rows, suite, n, eng) or {}).get("median_s")] for eng in ENGINES}
    # geometric means over the queries that every engine compared answered,
    # so that each line compares like with like
    for engs in (["native", "csq", "duckdb"], ["csq-planner", "csq", "duckdb"]):
        if not answered[engs[0]]:
            continue
        engs = [x for x in engs if answered[x]]
        common = [n for n in names if all(n in answered[x] for x in engs)]
        if not common:
            continue
        lines.append("geomean ms over the %d of %d queries %s all answered: %s" % (
            len(common), len(names), ", ".join(engs), ", ".join(
                "%s %.1f" % (x, 1000 * geomean([cell(rows, suite, n, x)["median_s"] for n in common])) for x in engs)))
    for other in ("native", "duckdb"):
        ratios = [cell(rows, suite, n, other)["median_s"] / cell(rows, suite, n, "csq")["median_s"]
                  for n in names if n in answered["csq"] and n in answered[other]]
        if ratios:
            lines.append("geomean of %s ms / csq ms over the %d queries both answered: %.2fx (above 1: csq faster)"
                         % (other, len(ratios), geomean(ratios)))
    lines.append("answered: " + ", ".join("%s %d of %d" % (eng, len(answered[eng]), len(names)) for eng in ENGINES))
    return lines


def verdict(e):
    """The answers column of a query: 'all agree', or what did not."""
    out = []
    for eng in ENGINES:
        r = e[eng]
        if r and r["answers"] not in ("reference", "agree", "n/a"):
            out.append("%s %s" % (eng, r["answers"]))
    if any(r and r["answers"] == "agree" and "checked against DuckDB" in r["note"] for r in e.values()):
        out.append("checked against DuckDB")
    return ", ".join(out) or "all agree"


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
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--suites", default=",".join(Q.SUITES))
    ap.add_argument("--queries")
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
    suites = [s for s in args.suites.split(",") if s]
    if any(s not in Q.SUITES for s in suites):
        log("bench: --suites takes %s" % ",".join(Q.SUITES))
        return 2
    wanted = set(args.queries.split(",")) if args.queries else None
    qsets = {s: [q for q in Q.load(s) if wanted is None or q["name"] in wanted] for s in suites}
    t_start, steal_start = time.perf_counter(), steal_s()
    work = args.work or tempfile.mkdtemp(prefix="csq-bench-")
    os.makedirs(work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    machine = "%s, %d cores, %s, Python %s, SQLite %s" % (
        platform.node(), os.cpu_count(), platform.platform(), platform.python_version(), sqlite3.sqlite_version)
    header = ["csq benchmark, SF %s, up to %d timed runs after one warm-up, median; time limit %g s per query "
              "and engine; %s" % (args.sf, args.runs, args.timeout, machine),
              "command: /usr/bin/python3 bench/run.py %s; %s" % (
                  " ".join(sys.argv[1:]) or "build 0.1", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
              "engines: native = SQLite on native tables; csq = the same text on csq tables, SQLite's planner; "
              "csq-planner = the text as a csq_query view where csq plans it (n/a where it hands it to SQLite); "
              "duckdb = DuckDB 2 threads, TPC-H's own types (DATE, DECIMAL(15,2))",
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
    dbs, loads, colbytes = {}, [], {}
    for suite in suites:
        dbs[suite] = {"native": os.path.join(work, suite + "_native.db"), "csq": os.path.join(work, suite + "_csq.db")}
        for eng in ("native", "csq"):
            for p in (dbs[suite][eng], dbs[suite][eng] + "-csd"):
                if os.path.exists(p):
                    os.remove(p)
            sec, kb = load(args, suite, dbs[suite][eng], eng == "csq")
            loads.append({"what": "%s (every table)" % suite, "engine": eng, "seconds": sec,
                          "peak_rss_mb": kb / 1024.0})
            log("load %s into %s: %.2f s, peak RSS %.1f MB" % (suite, eng, sec, kb / 1024.0))
        colbytes[suite] = column_bytes(dbs[suite]["native"], Q.schema(suite))
        for ld in loads:
            if ld["what"].startswith(suite + " "):
                ld["rows"] = sum(v["_rows"] for v in colbytes[suite].values())

    # 2. DuckDB first, so that its CSV files come and go before the rest
    duck = {s: None for s in suites}
    if not args.no_duckdb:
        ddir = duckdb_ready(not args.no_install)
        if ddir:
            t_csv = 0.0
            for suite in suites:
                log("%s: DuckDB: CSV files, load, queries ..." % suite)
                dloads, duck[suite], t = run_duckdb(args, ddir, work, suite, qsets[suite])
                t_csv += t
                if dloads:
                    loads.append({"what": "%s (every table)" % suite, "engine": "duckdb",
                                  "seconds": sum(x["seconds"] for x in dloads), "rows": sum(x["rows"] for x in dloads),
                                  "peak_rss_mb": max((x["hwm_kb"] or 0) for x in dloads) / 1024.0})
            loads.append({"what": "CSV files for DuckDB (gen --format csv)", "engine": "gen", "seconds": t_csv,
                          "rows": None, "peak_rss_mb": None})

    # 3. SQLite engines
    rows = []
    for suite in suites:
        log("%s: native, csq, csq-planner, one process per query ..." % suite)
        rows += run_suite(args, suite, dbs[suite], qsets[suite], colbytes[suite], duck[suite])
    xrows = []
    if not args.no_crossover and "tpch" in suites:
        xrows = crossover(args, work, dbs["tpch"]["native"], dbs["tpch"]["csq"])

    # 4. output
    wall = time.perf_counter() - t_start
    steal_run = 100.0 * (steal_s() - steal_start) / (wall * (os.cpu_count() or 1))
    header.insert(2, "CPU steal over the whole run: %.1f%% of the machine's time (load: %s)" % (
        steal_run, ", ".join("%.2f" % x for x in os.getloadavg())))
    log("")
    for h in header:
        log(h)
    log("loads:")
    for ld in loads:
        log("  %-40s %-7s %8.2f s  %10s rows  peak RSS %s MB" % (
            ld["what"], ld["engine"], ld["seconds"], fmt(ld.get("rows"), "%d"), fmt(ld["peak_rss_mb"], "%.1f")))
    for suite in suites:
        log("")
        for line in summary(rows, suite, args):
            log(line)
    for r in rows:
        if r["answers"] in ("DIFFER", "ERROR"):
            log("%s %s %s: %s: %s" % (r["bench"], r["query"], r["engine"], r["answers"], r["note"][:600]))
    if xrows:
        log("")
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
    for suite in suites:
        p = os.path.join(args.out, "%s_sf%s.csv" % (suite, sf))
        write_csv(p, [r for r in rows if r["bench"] == suite], QCOLS, header + summary(rows, suite, args))
        files.append(p)
    p = os.path.join(args.out, "loads_sf%s.csv" % sf)
    write_csv(p, loads, LCOLS, header[:3])
    files.append(p)
    if xrows:
        p = os.path.join(args.out, "crossover_sf%s.csv" % sf)
        write_csv(p, xrows, XCOLS, header[:3] + ["query: SELECT sum(l_extendedprice) FROM lineitem WHERE "
                                                 "l_partkey < k; auto_*: what pushdown='auto' chose"])
        files.append(p)
    if not args.no_charts:
        import charts
        files += charts.draw(args.out, sf, rows, xrows, work, args.timeout)
    log("wrote " + ", ".join(os.path.relpath(f) for f in files))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    bad = [r for r in rows + xrows if r["answers"] in ("DIFFER", "ERROR")]
    slow = [r for r in rows if r["answers"] == "TIMEOUT"]
    log("bench: %d results, %d disagree or failed, %d timed out; %.0f s in all; CPU steal %.1f%% of the "
        "machine's time" % (len(rows) + len(xrows), len(bad), len(slow), wall, steal_run))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
