"""The benchmark driver (bench/run.py) at a tiny scale factor: it completes,
every engine gives the same answers to the 35 queries, and the CSV files
hold the rows they should. DuckDB takes part only when @duckdb/node-api is
already installed (--no-install: no network) and not under the sanitizers;
charts are drawn when gnuplot is there. Times are not checked: speed is
shown by make bench, never in a timed test."""
import csv
import os
import shutil
import subprocess
import sys
import tempfile

from harness import Skip

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("CSQ_BUILD", os.path.join(ROOT, "build"))
SF = "0.002"
_run = {}

sys.path.insert(0, os.path.join(ROOT, "bench"))
import queries as Q  # noqa: E402


def run():
    """Run the driver once for all the tests of this file; returns (exit
    status, output, results folder)."""
    if not _run:
        if not os.path.exists(os.path.join(BUILD, "bench", "gen")):
            raise Skip("%s/bench/gen is not built (make bench-bin)" % BUILD)
        out = tempfile.mkdtemp(prefix="csq-test-bench-")
        cmd = ["/usr/bin/python3", os.path.join(ROOT, "bench", "run.py"), BUILD, SF, "--out", out, "--runs", "2",
               "--timeout", "60", "--no-install"]
        if os.environ.get("SANITIZE") or os.environ.get("LD_PRELOAD"):
            cmd.append("--no-duckdb")  # node would inherit the sanitizer runtimes preloaded for csq.so
        p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
        _run.update(rc=p.returncode, text=p.stdout.decode(errors="replace"), out=out)
    return _run["rc"], _run["text"], _run["out"]


def read(name):
    _, _, out = run()
    with open(os.path.join(out, name)) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def duckdb_ran(text):
    return "DuckDB: CSV files" in text and "DuckDB run failed" not in text


def test_completes_and_engines_agree():
    rc, text, _ = run()
    assert rc == 0, "bench/run.py exited %d:\n%s" % (rc, text[-3000:])
    assert "DIFFER" not in text and "ERROR" not in text, text[-3000:]
    assert "0 disagree or failed" in text, text[-1500:]


def test_query_csvs_have_every_engine():
    _, text, _ = run()
    duck = duckdb_ran(text)
    for suite in Q.SUITES:
        rows = read("%s_sf%s.csv" % (suite, SF))
        got = {(r["query"], r["engine"]): r for r in rows}
        for q in Q.load(suite):
            want = ["native", "csq", "csq-planner"] + (["duckdb"] if duck else [])
            for eng in want:
                assert (q["name"], eng) in got, "%s: no row for %s %s" % (suite, q["name"], eng)
            # a one-table query is what csq_query plans today: its view must run
            if q["single"]:
                assert got[(q["name"], "csq-planner")]["answers"] == "agree", got[(q["name"], "csq-planner")]
        for r in rows:
            assert r["answers"] in ("reference", "agree", "n/a"), r
            if r["answers"] == "n/a":
                assert r["engine"] == "csq-planner" and r["note"] and not r["median_s"], r
                continue
            assert float(r["median_s"]) > 0 and int(r["runs"]) >= 1, r
            assert float(r["energy_mj"]) > 0 and int(r["host_scan_bytes"]) > 0, r
            if r["engine"].startswith("csq"):
                assert int(r["media_bytes_read"]) >= 0 and int(r["bytes_to_host"]) > 0, r
            assert r["peak_rss_mb"] and float(r["peak_rss_mb"]) > 1, r
            if int(r["runs"]) > 1 and r["engine"] != "duckdb":  # steal of the timed runs, in %
                assert 0 <= float(r["steal_pct"]) <= 100, r
    assert "geomean ms over the" in text and "answered: native" in text, text[-3000:]


def test_loads_and_crossover_csvs():
    _, text, _ = run()
    loads = read("loads_sf%s.csv" % SF)
    engines = {r["engine"] for r in loads}
    assert {"native", "csq"} <= engines, engines
    assert ("duckdb" in engines) == duckdb_ran(text), (engines, text[-800:])
    for r in loads:
        if r["engine"] != "gen":
            assert float(r["seconds"]) > 0 and float(r["peak_rss_mb"]) > 1 and int(r["rows"]) > 0, r
    x = read("crossover_sf%s.csv" % SF)
    paths = {}
    for r in x:
        paths.setdefault(r["k"], []).append(r["path"])
        assert r["answers"] in ("reference", "agree"), r
        assert r["auto_table_chose"] in ("device", "scan"), r
    assert len(paths) >= 3, paths
    for k, ps in paths.items():
        assert len(ps) == 4 and len(set(ps)) == 4, (k, ps)
    sels = sorted(float(r["actual_sel"]) for r in x)
    assert sels[-1] == 1.0 and sels[0] < 0.05, sels


def test_charts_when_gnuplot_exists():
    _, _, out = run()
    if not shutil.which("gnuplot"):
        raise Skip("no gnuplot: charts are skipped by design")
    for name in ("tpch_time", "ssb_time", "bytes", "crossover"):
        p = os.path.join(out, "%s_sf%s.png" % (name, SF))
        assert os.path.exists(p) and os.path.getsize(p) > 1000, p
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", p


def test_zz_cleanup():
    if _run:
        shutil.rmtree(_run["out"], ignore_errors=True)
