"""bench/charts.py - PNG charts of a bench/run.py run, drawn with gnuplot.

Owns the pictures of a run. draw(out, sf, rows, xrows, work, timeout)
writes into `out`:
  tpch_time_sf<SF>.png  median ms per TPC-H query and engine (log scale);
  ssb_time_sf<SF>.png   the same for SSB; a query with no answer within the
                        time limit is drawn at the limit, in its own colour
                        per engine, so a timeout never looks fast
  bytes_sf<SF>.png      bytes per query: what a columnar host scan of its
                        columns moves, what csq read from media, what csq
                        sent to the host
  crossover_sf<SF>.png  the selectivity sweep: time and bytes to the host
and returns the paths written. Without a gnuplot binary it prints a note and
returns []. Data files for gnuplot go to `work` (the run's scratch folder).
"""
import os
import shutil
import subprocess

ENGINES = ["native", "csq", "csq-planner", "duckdb"]


def _cell(rows, bench, query, engine):
    for r in rows:
        if r["bench"] == bench and r["query"] == query and r["engine"] == engine:
            return r
    return None


def _val(rows, bench, query, engine, key):
    r = _cell(rows, bench, query, engine)
    v = r.get(key) if r else None
    return "-" if v is None or v == 0 else repr(float(v))


def _gnuplot(script, work, name):
    p = os.path.join(work, name + ".gp")
    with open(p, "w") as f:
        f.write(script)
    r = subprocess.run(["gnuplot", p], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        print("note: gnuplot failed on %s: %s" % (name, r.stdout.decode(errors="replace")[-400:]), flush=True)
        return False
    return True


COMMON = ("set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
          "set boxwidth 0.9\nset datafile missing '-'\nset logscale y\nset grid ytics\n"
          "set key top left\nset xtics rotate by -30\n")


def _term(n):
    return ("set terminal pngcairo noenhanced size %d,520 font 'sans,9'\nset xrange [-0.6:%g]\n"
            % (max(900, 40 * n * 2), n - 0.4))


def _time_chart(out, sf, rows, work, timeout, bench):
    keys = []
    for r in rows:
        if r["bench"] == bench and r["query"] not in keys:
            keys.append(r["query"])
    if not keys:
        return None
    dat = os.path.join(work, "%s_time.dat" % bench)
    n = len(ENGINES)
    # per query: its slot, its name, per engine its ms, then per engine the
    # limit in ms where it timed out ('-' elsewhere)
    timeouts = set()
    with open(dat, "w") as f:
        f.write("# slot query " + " ".join(ENGINES) + " " + " ".join(e + "-timeout" for e in ENGINES) + "\n")
        for i, q in enumerate(keys):
            t, to = [], []
            for e in ENGINES:
                v = _val(rows, bench, q, e, "median_s")
                t.append("-" if v == "-" else repr(float(v) * 1000))
                c = _cell(rows, bench, q, e)
                to.append(repr(timeout * 1000) if c and c["answers"] == "TIMEOUT" else "-")
                if to[-1] != "-":
                    timeouts.add(e)
            f.write("%d %s %s %s\n" % (i, q, " ".join(t), " ".join(to)))
    png = os.path.join(out, "%s_time_sf%s.png" % (bench, sf))
    w = 0.8 / n
    plots = []
    for j, e in enumerate(ENGINES):
        off = (j - (n - 1) / 2.0) * w
        plots.append("'%s' using ($1%+.4f):%d:(%g)%s with boxes fs solid 0.8 border -1 lc %d title '%s'"
                     % (dat, off, j + 3, w, ":xtic(2)" if j == 0 else "", j + 1, e))
    for j, e in enumerate(ENGINES):
        if e in timeouts:
            off = (j - (n - 1) / 2.0) * w
            plots.append("'%s' using ($1%+.4f):%d:(%g) with boxes fs pattern 4 border -1 lc %d "
                         "title '%s: no answer in %g s'" % (dat, off, n + j + 3, w, j + 1, e, timeout))
    title = {"tpch": "TPC-H", "ssb": "SSB"}[bench]
    script = ("set terminal pngcairo noenhanced size %d,520 font 'sans,9'\nset output '%s'\n"
              "set xrange [-0.6:%g]\nset datafile missing '-'\nset logscale y\nset grid ytics\n"
              "set key top left\nset xtics rotate by -30\nset ylabel 'ms'\n"
              "set title 'csq bench SF %s, %s: median ms per query (log scale; hatched: timed out, drawn at "
              "the limit; n/a left out)'\nplot %s\n"
              % (max(900, 60 * len(keys)), png, len(keys) - 0.4, sf, title, ", ".join(plots)))
    return png if _gnuplot(script, work, "%s_time" % bench) else None


def draw(out, sf, rows, xrows, work, timeout):
    if not shutil.which("gnuplot"):
        print("note: charts skipped: no gnuplot (Debian package gnuplot-nox)", flush=True)
        return []
    written = []
    for bench in ("tpch", "ssb"):
        png = _time_chart(out, sf, rows, work, timeout, bench)
        if png:
            written.append(png)

    keys = []
    for r in rows:
        if (r["bench"], r["query"]) not in keys:
            keys.append((r["bench"], r["query"]))
    dat = os.path.join(work, "bytes.dat")
    cols = ["host-scan", "csq-media-read", "csq-to-host", "csq-planner-to-host"]
    with open(dat, "w") as f:
        f.write("# query " + " ".join(cols) + "\n")
        for b, q in keys:
            f.write("%s:%s %s %s %s %s\n" % (b, q, _val(rows, b, q, "native", "host_scan_bytes"),
                                            _val(rows, b, q, "csq", "media_bytes_read"),
                                            _val(rows, b, q, "csq", "bytes_to_host"),
                                            _val(rows, b, q, "csq-planner", "bytes_to_host")))
    png = os.path.join(out, "bytes_sf%s.png" % sf)
    plot = ", ".join("'%s' using %d:xtic(1) title '%s'" % (dat, i + 2, c) for i, c in enumerate(cols))
    if _gnuplot(_term(len(keys)) + COMMON + "set output '%s'\nset title 'csq bench SF %s: bytes per query (log)'\n"
                "set ylabel 'bytes'\nplot %s\n" % (png, sf, plot), work, "bytes"):
        written.append(png)

    if xrows:
        paths = []
        for r in xrows:
            if r["path"] not in paths:
                paths.append(r["path"])
        blocks = []
        for pth in paths:
            lines = ["%r %s %s" % (r["actual_sel"] * 100, "-" if r["median_s"] is None else repr(r["median_s"]),
                                   "-" if not r["bytes_to_host"] else repr(float(r["bytes_to_host"])))
                     for r in xrows if r["path"] == pth and r["actual_sel"] > 0]
            blocks.append("\n".join(lines))
        dat = os.path.join(work, "cross.dat")
        with open(dat, "w") as f:
            f.write("\n\n\n".join(blocks) + "\n")
        auto = sorted(set(r["auto_table_chose"] for r in xrows))
        png = os.path.join(out, "crossover_sf%s.png" % sf)
        t = ("set terminal pngcairo noenhanced size 1100,480 font 'sans,9'\nset output '%s'\nset datafile missing '-'\n"
             "set multiplot layout 1,2 title 'crossover SF %s: sum(l_extendedprice) WHERE l_partkey < K; "
             "pushdown=auto chose: %s'\nset logscale x\nset logscale y\nset grid\nset key top left\n"
             "set xlabel 'selectivity (%%)'\n" % (png, sf, "/".join(auto)))
        t += "set ylabel 'median seconds'\nplot " + ", ".join(
            "'%s' index %d using 1:2 with linespoints lc %d pt %d title '%s'" % (dat, i, i + 1, i + 1, p)
            for i, p in enumerate(paths)) + "\n"
        t += "set ylabel 'bytes to host'\nset yrange [1000:*]\nplot " + ", ".join(
            "'%s' index %d using 1:3 with linespoints lc %d pt %d title '%s'" % (dat, i, i + 1, i + 1, p)
            for i, p in enumerate(paths) if p != "native") + "\nunset multiplot\n"
        if _gnuplot(t, work, "crossover"):
            written.append(png)
    return written
