"""bench/charts.py - PNG charts of a bench/run.py run, drawn with gnuplot.

draw(out, sf, rows, xrows, work) writes into `out`:
  time_sf<SF>.png       median seconds per query and engine (log scale)
  bytes_sf<SF>.png      bytes per query: host-scan bytes, media bytes read,
                        bytes sent to the host (transparent and view)
  crossover_sf<SF>.png  the selectivity sweep: time and bytes to the host
and returns the paths written. Without a gnuplot binary it prints a note and
returns []. Data files for gnuplot go to `work` (the run's scratch folder).
"""
import os
import shutil
import subprocess

ENGINES = ["native", "csq-transparent", "csq-view", "duckdb"]


def _val(rows, bench, query, engine, key):
    for r in rows:
        if r["bench"] == bench and r["query"] == query and r["engine"] == engine:
            v = r.get(key)
            return "-" if v is None or v == 0 else repr(float(v))
    return "-"


def _gnuplot(script, work, name):
    p = os.path.join(work, name + ".gp")
    with open(p, "w") as f:
        f.write(script)
    r = subprocess.run(["gnuplot", p], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        print("note: gnuplot failed on %s: %s" % (name, r.stdout.decode(errors="replace")[-400:]), flush=True)
        return False
    return True


def draw(out, sf, rows, xrows, work):
    if not shutil.which("gnuplot"):
        print("note: charts skipped: no gnuplot (Debian package gnuplot-nox)", flush=True)
        return []
    written = []
    keys = []
    for r in rows:
        if (r["bench"], r["query"]) not in keys:
            keys.append((r["bench"], r["query"]))
    term = "set terminal pngcairo noenhanced size 1100,520 font 'sans,9'\nset xrange [-0.6:%g]\n" % (len(keys) - 0.4)
    common = ("set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
              "set boxwidth 0.9\nset datafile missing '-'\nset logscale y\nset grid ytics\n"
              "set key top left\nset xtics rotate by -30\n")

    dat = os.path.join(work, "time.dat")
    with open(dat, "w") as f:
        f.write("# query " + " ".join(ENGINES) + "\n")
        for b, q in keys:
            f.write("%s:%s %s\n" % (b, q, " ".join(_val(rows, b, q, e, "median_s") for e in ENGINES)))
    png = os.path.join(out, "time_sf%s.png" % sf)
    plot = ", ".join("'%s' using %d:xtic(1) title '%s'" % (dat, i + 2, e) for i, e in enumerate(ENGINES))
    if _gnuplot(term + common + "set output '%s'\nset title 'csq bench SF %s: median seconds per query (log)'\n"
                "set ylabel 'seconds'\nplot %s\n" % (png, sf, plot), work, "time"):
        written.append(png)

    dat = os.path.join(work, "bytes.dat")
    cols = ["host-scan", "media-read", "to-host(transparent)", "to-host(view)"]
    with open(dat, "w") as f:
        f.write("# query " + " ".join(cols) + "\n")
        for b, q in keys:
            media = _val(rows, b, q, "csq-view", "media_bytes_read")
            if media == "-":
                media = _val(rows, b, q, "csq-transparent", "media_bytes_read")
            f.write("%s:%s %s %s %s %s\n" % (b, q, _val(rows, b, q, "native", "host_scan_bytes"), media,
                                            _val(rows, b, q, "csq-transparent", "bytes_to_host"),
                                            _val(rows, b, q, "csq-view", "bytes_to_host")))
    png = os.path.join(out, "bytes_sf%s.png" % sf)
    plot = ", ".join("'%s' using %d:xtic(1) title '%s'" % (dat, i + 2, c) for i, c in enumerate(cols))
    if _gnuplot(term + common + "set output '%s'\nset title 'csq bench SF %s: bytes per query (log)'\n"
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
