#!/usr/bin/python3
"""bench/import.py BUILD SF [--runs N] [--out DIR] [--no-duckdb] - how fast a
table loads from a CSV file, in one run, on the same file:

  native .import   the stock sqlite3 shell, .import into a native table
                   inside BEGIN ... COMMIT (the baseline)
  csq .import      the same into a csq table (SQLite's per-row insert path)
  csq_import       SELECT csq_import('lineitem', FILE) in the stock shell
  build/csq        .import --csv FILE lineitem in the csq shell (csq_import)
  duckdb           DuckDB 2 threads, CREATE TABLE AS read_csv (COPY's path),
                   TPC-H's own types, where bench/run.py finds it installed

Each load is a child process (time and peak RSS from wait4; DuckDB's from its
own VmHWM) into a fresh database; the median of --runs runs (default 1) is
shown, with each load's ratio to native. The file is TPC-H lineitem from
build/bench/gen (',' separated, 6 M rows and 754 MB at SF 1). Results also
go to DIR/import_sf<SF>.csv (default bench/results).

  /usr/bin/python3 bench/import.py build 1
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("sf")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--no-duckdb", action="store_true")
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

        def shell(name, script):
            db = os.path.join(work, name + ".db")
            for p in (db, db + "-csd"):
                if os.path.exists(p):
                    os.remove(p)
            sec, kb, _ = child([sqlite, db], stdin_data=script.encode(), stdout=subprocess.DEVNULL)
            n = subprocess.run([sqlite, db], input=(load if "csq" in name else "") +
                               "SELECT count(*) FROM lineitem;", capture_output=True, text=True).stdout
            return sec, kb, int(n.strip().splitlines()[-1])

        def csq_shell():
            db = os.path.join(work, "csqshell.db")
            for p in (db, db + "-csd"):
                if os.path.exists(p):
                    os.remove(p)
            sec, kb, _ = child([csq, db], stdin_data=("%s;\n.import --csv %s lineitem\n" % (vcsq, path)).encode(),
                               stdout=subprocess.DEVNULL)
            n = subprocess.run([csq, db, "SELECT count(*) FROM lineitem"], capture_output=True, text=True).stdout
            return sec, kb, int(n.strip())

        engines = [
            ("native .import", lambda: shell("native", "%s;\n.mode csv\nBEGIN;\n.import %s lineitem\nCOMMIT;\n"
                                             % (native, path))),
            ("csq .import", lambda: shell("csq_rows", "%s%s;\n.mode csv\nBEGIN;\n.import %s lineitem\nCOMMIT;\n"
                                          % (load, vcsq, path))),
            ("csq_import", lambda: shell("csq_bulk", "%s%s;\nSELECT csq_import('lineitem', '%s');\n"
                                         % (load, vcsq, path))),
            ("build/csq .import", csq_shell),
        ]
        results = []
        for name, fn in engines:
            runs = sorted((fn() for _ in range(args.runs)), key=lambda r: r[0])
            results.append((name,) + runs[len(runs) // 2])
        ddir = None if args.no_duckdb else duckdb_ready(False)
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
                    secs.append((ld["seconds"], ld["hwm_kb"], ld["rows"]))
            if secs:
                secs.sort()
                results.append(("duckdb COPY (2 threads)",) + secs[len(secs) // 2])
        else:
            print("note: DuckDB not measured (not installed where bench/run.py installs it)")
        base = results[0][1]
        print("TPC-H lineitem SF %s: %.0f MB of CSV, %d rows; median of %d run(s)" %
              (args.sf, mb, results[0][3], args.runs))
        print("| load | seconds | vs native | MB/s | peak RSS | rows |")
        print("|---|---|---|---|---|---|")
        for name, sec, kb, n in results:
            print("| %s | %.2f | %.2fx | %.0f | %.0f MB | %d |" % (name, sec, base / sec, mb / sec, kb / 1024, n))
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "import_sf%s.csv" % args.sf), "w") as f:
            f.write("load,seconds,vs_native,mb_per_s,peak_rss_kb,rows\n")
            for name, sec, kb, n in results:
                f.write("%s,%.3f,%.3f,%.1f,%d,%d\n" % (name, sec, base / sec, mb / sec, kb, n))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
