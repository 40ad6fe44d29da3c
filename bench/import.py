#!/usr/bin/python3
"""bench/import.py BUILD SF [--runs N] [--out DIR] [--no-duckdb] - how fast a
table loads, in one run, from the same CSV file or the same native table:

  native .import   the stock sqlite3 shell, .import into a native table
                   inside BEGIN ... COMMIT (the baseline)
  csq .import      the same into a csq table (SQLite's per-row insert path)
  csq_import       SELECT csq_import('lineitem', FILE) in the stock shell
  build/csq        .import --csv FILE lineitem in the csq shell (csq_import)
  native INSERT..SELECT  INSERT INTO lineitem SELECT * FROM src.lineitem, an
                   attached native table into a native table (SQLite's
                   transfer optimisation copies the records as they are)
  csq INSERT..SELECT     the same into a csq table
  csq_import(SELECT)     SELECT csq_import('lineitem', 'SELECT * FROM
                   src.lineitem'): the same rows through csq's bulk path
  duckdb           DuckDB 2 threads, CREATE TABLE AS read_csv (COPY's path),
                   TPC-H's own types, where bench/run.py finds it installed

Each load is a child process (wall time, CPU time user+sys and peak RSS from
wait4; DuckDB's from its own report) into a fresh database. The loads run
interleaved, run 1 of every load before run 2 of any, so a change in the
machine's load hits them alike; the median of --runs runs (default 1) is
shown, with its ratio to the native load of the same source (wall and CPU).
--only runs a subset (and the native loads they are compared with).
The load average and the CPU time stolen by the hypervisor during the run
are printed with the table. The file is TPC-H lineitem from build/bench/gen
(',' separated, 6 M rows and 754 MB at SF 1); the native source table is
that file .imported once before the timed loads. Results also go to
DIR/import_sf<SF>.csv (default bench/results).

  /usr/bin/python3 bench/import.py build 1 --runs 3
  /usr/bin/python3 bench/import.py build 1 --runs 3 --only INSERT   (the two INSERT ... SELECT loads)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run import child, duckdb_ready, duck_type  # noqa: E402


def schema(gen, sf):
    out = subprocess.run([gen, "tpch", sf, "-", "--format", "schema", "--tables", "lineitem"],
                         capture_output=True, text=True, check=True).stdout
    return out.strip().rstrip(";")


def columns(create):
    inner = create[create.index("(") + 1:create.rindex(")")]
    return [c.strip().split()[:2] for c in inner.split(",")]


def timed(cmd, stdin_data):
    """Run cmd with stdin_data; (wall seconds, CPU seconds user+sys, peak RSS
    kB) of that child. Raises RuntimeError on a non-zero exit."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    p.stdin.write(stdin_data)
    p.stdin.close()
    _, status, ru = os.wait4(p.pid, 0)
    sec = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("%s exited with %d" % (" ".join(cmd), os.waitstatus_to_exitcode(status)))
    return sec, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def cpu_ticks():
    """(all ticks, steal ticks) of /proc/stat's cpu line, or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v[:8]), v[7]
    except (OSError, ValueError, IndexError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("sf")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--no-duckdb", action="store_true")
    ap.add_argument("--only", default="",
                    help="comma-separated words: run only the loads whose name holds one of them "
                         "(and the native load each is compared with; no DuckDB), e.g. --only INSERT")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    gen, ext, csq = (os.path.join(build, "bench", "gen"), os.path.join(build, "csq"),
                     os.path.join(build, "csq"))
    sqlite = shutil.which("sqlite3")
    if not sqlite:
        sys.exit("bench/import.py: the sqlite3 shell is not installed")
    work = tempfile.mkdtemp(prefix="csq-import-bench-")
    try:
        path = os.path.join(work, "lineitem.csv")
        with open(path, "wb") as f:
            child([gen, "tpch", args.sf, "-", "--format", "csv", "--tables", "lineitem", "--quiet"], stdout=f)
        mb = os.path.getsize(path) / 1e6
        native = schema(gen, args.sf)
        vcsq = native.replace("CREATE TABLE lineitem(", "CREATE VIRTUAL TABLE lineitem USING csq(", 1)
        load = ".load %s\n" % ext
        src = os.path.join(work, "src.db")
        subprocess.run([sqlite, src], input=("%s;\n.mode csv\nBEGIN;\n.import %s lineitem\nCOMMIT;\n"
                                             % (native, path)).encode(), check=True)
        attach = "ATTACH '%s' AS src;\n" % src

        def fresh(name):
            db = os.path.join(work, name + ".db")
            for p in (db, db + "-csd"):
                if os.path.exists(p):
                    os.remove(p)
            return db

        def shell(name, script):
            db = fresh(name)
            sec, cpu, kb = timed([sqlite, db], script.encode())
            n = subprocess.run([sqlite, db], input=(load if "csq" in name else "") +
                               "SELECT count(*) FROM lineitem;", capture_output=True, text=True).stdout
            return sec, cpu, kb, int(n.strip().splitlines()[-1])

        def csq_shell():
            db = fresh("csqshell")
            sec, cpu, kb = timed([csq, db], ("%s;\n.import --csv %s lineitem\n" % (vcsq, path)).encode())
            n = subprocess.run([csq, db, "SELECT count(*) FROM lineitem"], capture_output=True, text=True).stdout
            return sec, cpu, kb, int(n.strip())

        # (name, run, index of the baseline in this list)
        engines = [
            ("native .import", lambda: shell("native", "%s;\n.mode csv\nBEGIN;\n.import %s lineitem\nCOMMIT;\n"
                                             % (native, path)), 0),
            ("csq .import", lambda: shell("csq_rows", "%s%s;\n.mode csv\nBEGIN;\n.import %s lineitem\nCOMMIT;\n"
                                          % (load, vcsq, path)), 0),
            ("csq_import", lambda: shell("csq_bulk", "%s%s;\nSELECT csq_import('lineitem', '%s');\n"
                                         % (load, vcsq, path)), 0),
            ("build/csq .import", csq_shell, 0),
            ("native INSERT..SELECT", lambda: shell("native_ins", "%s%s;\nBEGIN;\nINSERT INTO lineitem SELECT * "
                                                    "FROM src.lineitem;\nCOMMIT;\n" % (attach, native)), 4),
            ("csq INSERT..SELECT", lambda: shell("csq_ins", "%s%s%s;\nBEGIN;\nINSERT INTO lineitem SELECT * "
                                                 "FROM src.lineitem;\nCOMMIT;\n" % (load, attach, vcsq)), 4),
            ("csq_import(SELECT)", lambda: shell("csq_qbulk", "%s%s%s;\nSELECT csq_import('lineitem', 'SELECT * "
                                                 "FROM src.lineitem');\n" % (load, attach, vcsq)), 4),
        ]
        words = [w.strip().lower() for w in args.only.split(",") if w.strip()]
        chosen = [i for i, (name, _, _) in enumerate(engines)
                  if not words or any(w in name.lower() for w in words)]
        chosen = sorted(set(chosen) | {engines[i][2] for i in chosen})
        if not chosen:
            sys.exit("bench/import.py: --only %s matches no load" % args.only)
        runs = {i: [] for i in chosen}
        ticks0, load0 = cpu_ticks(), os.getloadavg()[0]
        for _ in range(args.runs):
            for i in chosen:
                runs[i].append(engines[i][1]())
        ticks1, load1 = cpu_ticks(), os.getloadavg()[0]
        results = []
        for i in chosen:  # a load's baseline comes before it in engines
            name, _, base = engines[i]
            r = sorted(runs[i], key=lambda x: x[0])
            results.append([name, chosen.index(base)] + list(r[len(r) // 2]))
        ddir = None if args.no_duckdb or words else duckdb_ready(False)
        if ddir:
            cols = [[c, duck_type("tpch", c, ty)] for c, ty in columns(native)]
            job = {"threads": 2, "runs": 1, "tables": [{"name": "lineitem", "csv": path, "columns": cols}],
                   "queries": []}
            jpath = os.path.join(work, "job.json")
            with open(jpath, "w") as f:
                json.dump(job, f)
            secs = []
            for _ in range(args.runs):
                r = subprocess.run(["node", os.path.join(HERE, "duckdb", "run.mjs"), jpath],
                                   env=dict(os.environ, CSQ_DUCKDB_DIR=ddir), capture_output=True, text=True)
                if r.returncode == 0:
                    ld = json.loads(r.stdout)["loads"][0]
                    secs.append((ld["seconds"], None, ld["hwm_kb"], ld["rows"]))
            if secs:
                secs.sort(key=lambda x: x[0])
                results.append(["duckdb COPY (2 threads)", 0] + list(secs[len(secs) // 2]))
        elif not words:
            print("note: DuckDB not measured (not installed where bench/run.py installs it)")
        steal = ""
        if ticks0 and ticks1 and ticks1[0] > ticks0[0]:
            steal = ", %.1f%% of CPU time stolen by the hypervisor" % (
                100.0 * (ticks1[1] - ticks0[1]) / (ticks1[0] - ticks0[0]))
        print("TPC-H lineitem SF %s: %.0f MB of CSV, %d rows; median of %d run(s), interleaved; "
              "load average %.1f at the start, %.1f at the end%s" %
              (args.sf, mb, results[0][5], args.runs, load0, load1, steal))
        print("| load | seconds | vs native | CPU seconds | CPU vs native | MB/s | peak RSS | rows |")
        print("|---|---|---|---|---|---|---|---|")
        rows = []
        for name, base, sec, cpu, kb, n in results:
            bsec, bcpu = results[base][2], results[base][3]
            rows.append((name, sec, bsec / sec, cpu, (bcpu / cpu) if cpu else None, mb / sec, kb, n))
        for name, sec, vs, cpu, vcpu, mbs, kb, n in rows:
            print("| %s | %.2f | %.2fx | %s | %s | %.0f | %.0f MB | %d |" %
                  (name, sec, vs, "%.2f" % cpu if cpu is not None else "n/a",
                   "%.2fx" % vcpu if vcpu is not None else "n/a", mbs, kb / 1024, n))
        os.makedirs(args.out, exist_ok=True)
        # a partial run (--only) does not overwrite the whole table's file
        fname = "import_sf%s%s.csv" % (args.sf, "_only" if words else "")
        with open(os.path.join(args.out, fname), "w") as f:
            f.write("load,seconds,vs_native,cpu_seconds,cpu_vs_native,mb_per_s,peak_rss_kb,rows\n")
            for name, sec, vs, cpu, vcpu, mbs, kb, n in rows:
                f.write("%s,%.3f,%.3f,%s,%s,%.1f,%d,%d\n" % (name, sec, vs, "%.3f" % cpu if cpu is not None else "",
                                                           "%.3f" % vcpu if vcpu is not None else "", mbs, kb, n))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
