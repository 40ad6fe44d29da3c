"""bench/bpf.py - a user's eBPF filter on the device against the same
predicate as a C scalar function and as SQL on a native table, in one run,
over TPC-H lineitem (default SF 1).

  /usr/bin/python3 bench/bpf.py build 1 --runs 7

Two predicates, each three ways:
  pricey  one column:  l_extendedprice * 1.08 > 100000.0
          csq:    SELECT l_orderkey, l_extendedprice FROM lineitem
                  WHERE csq_bpf_col(l_extendedprice, 'pricey')   (pushed: the
                  rows that match come back, nothing else)
          C:      ... WHERE pricey_c(l_extendedprice)   on the native table
          SQL:    ... WHERE l_extendedprice * 1.08 > 100000.0  on the native table
  rev     three columns under an aggregate:
          l_extendedprice * (1 - l_discount) * (1 + l_tax) > 95000.0
          csq:    SELECT count(*) ... WHERE csq_bpf('rev', ...) through a
                  csq_query view (csq's planner pushes it)
          C, SQL: as above on the native table
  revrows the rev predicate in a plain SELECT of two columns (26835 rows):
          csq:    SELECT l_orderkey, l_extendedprice ... WHERE csq_bpf('rev', ...)
                  through a csq_query view (csq's planner pushes the filter
                  and collects the matching rows)
          C, SQL: the same SELECT on the native table
The C functions are compiled here (gcc -O2) as a loadable SQLite extension
(sqlite3_create_function, one call per row, as a user's UDF would be); the
eBPF programs with clang -target bpf.

The runs of every way are interleaved (round r runs each case once, in an
order that rotates from round to round), so load from elsewhere on the
machine hits all of them alike. Each case reports the median wall seconds
and the median CPU seconds of this process (the emulated device's engines
are threads of it, so their work counts), the rows, and for the pushed
cases the bytes to the host per run and per matching row; then the ratios
C / pushed and SQL / pushed, wall and CPU. Needs build/bench/gen (make
bench-bin)."""
import argparse
import os
import subprocess
import sys
import tempfile
import time
import sqlite3

PRICEY_BPF = r'''
#include "csq_bpf.h"
CSQ_PROGRAM u64 pricey(const struct csq_arg *a) {
  if (a[0].type != CSQ_T_REAL) return 0;
  return csq_fcmp(csq_fmul(a[0].v, csq_real(1.08)), csq_real(100000.0)) > 0;
}
'''
REV_BPF = r'''
#include "csq_bpf.h"
CSQ_PROGRAM u64 rev(const struct csq_arg *a) {
  if (a[0].type != CSQ_T_REAL || a[1].type != CSQ_T_REAL || a[2].type != CSQ_T_REAL) return 0;
  u64 one = csq_real(1.0);
  u64 r = csq_fmul(csq_fmul(a[0].v, csq_fsub(one, a[1].v)), csq_fadd(one, a[2].v));
  return csq_fcmp(r, csq_real(95000.0)) > 0;
}
'''
UDF_C = r'''
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
static void pricey(sqlite3_context *c, int n, sqlite3_value **v) {
  (void)n;
  sqlite3_result_int(c, sqlite3_value_type(v[0]) == SQLITE_FLOAT &&
                        sqlite3_value_double(v[0]) * 1.08 > 100000.0);
}
static void rev(sqlite3_context *c, int n, sqlite3_value **v) {
  (void)n;
  for (int i = 0; i < 3; i++)
    if (sqlite3_value_type(v[i]) != SQLITE_FLOAT) { sqlite3_result_int(c, 0); return; }
  double r = sqlite3_value_double(v[0]) * (1.0 - sqlite3_value_double(v[1])) *
             (1.0 + sqlite3_value_double(v[2]));
  sqlite3_result_int(c, r > 95000.0);
}
int sqlite3_udf_init(sqlite3 *db, char **e, const sqlite3_api_routines *api) {
  (void)e;
  SQLITE_EXTENSION_INIT2(api);
  int f = SQLITE_UTF8 | SQLITE_DETERMINISTIC;
  sqlite3_create_function(db, "pricey_c", 1, f, 0, pricey, 0, 0);
  return sqlite3_create_function(db, "rev_c", 3, f, 0, rev, 0, 0);
}
'''


def build(work, root):
    ext = os.path.join(root, "ext")
    out = {}
    for name, src in (("pricey", PRICEY_BPF), ("rev", REV_BPF)):
        c, o = os.path.join(work, name + ".c"), os.path.join(work, name + ".o")
        open(c, "w").write(src)
        subprocess.run(["clang", "-target", "bpf", "-O2", "-I", ext, "-c", c, "-o", o], check=True)
        out[name] = open(o, "rb").read()
    c, so = os.path.join(work, "udf.c"), os.path.join(work, "udf.so")
    open(c, "w").write(UDF_C)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", so, c], check=True)
    return out, so


def run_once(con, sql):
    t0, c0 = time.perf_counter(), time.process_time()
    rows = con.execute(sql).fetchall()
    return time.perf_counter() - t0, time.process_time() - c0, rows


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    ap = argparse.ArgumentParser(description="A pushed eBPF filter against a C UDF and SQL on a "
                                 "native table, TPC-H lineitem (see the top of bench/bpf.py).")
    ap.add_argument("build", nargs="?", default="build", help="build directory (default build)")
    ap.add_argument("sf", nargs="?", default="1", help="TPC-H scale factor (default 1)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs of each case, interleaved "
                    "(default 5; one warm-up run first)")
    ap.add_argument("--work", help="directory for the databases and programs (kept; "
                    "default a new temporary directory)")
    opt = ap.parse_args()
    bdir, sf, runs = opt.build, opt.sf, opt.runs
    work = opt.work or tempfile.mkdtemp(prefix="csq-bpf-bench-")
    os.makedirs(work, exist_ok=True)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    extso = os.path.abspath(os.path.join(bdir, "csq.so"))
    gen = os.path.join(bdir, "bench", "gen")
    progs, udf = build(work, root)
    nat, csq = os.path.join(work, "native.db"), os.path.join(work, "csq.db")
    for db, more in ((nat, []), (csq, ["--csq", extso])):
        if not os.path.exists(db):
            t0 = time.perf_counter()
            subprocess.run([gen, "tpch", sf, db, "--tables", "lineitem", "--quiet"] + more, check=True,
                           stdout=subprocess.DEVNULL)
            print("loaded %s in %.1f s" % (os.path.basename(db), time.perf_counter() - t0), flush=True)
    con = sqlite3.connect(csq, isolation_level=None)
    con.enable_load_extension(True)
    con.load_extension(extso)
    con.load_extension(udf)
    con.execute("ATTACH ? AS nat", (nat,))
    con.execute("SELECT csq_bpf_load('pricey', ?, 'REAL')", (progs["pricey"],))
    con.execute("SELECT csq_bpf_load('rev', ?, 'REAL,REAL,REAL')", (progs["rev"],))
    rev_q = ("SELECT count(*) FROM lineitem WHERE csq_bpf('rev', l_extendedprice, l_discount, l_tax)")
    con.execute("CREATE VIRTUAL TABLE temp.rev_v USING csq_query('%s')" % rev_q.replace("'", "''"))
    rows_q = ("SELECT l_orderkey, l_extendedprice FROM lineitem "
              "WHERE csq_bpf('rev', l_extendedprice, l_discount, l_tax)")
    con.execute("CREATE VIRTUAL TABLE temp.rows_v USING csq_query('%s')" % rows_q.replace("'", "''"))
    cols = "l_orderkey, l_extendedprice"
    cases = [
        ("pricey", "csq eBPF pushed",
         "SELECT %s FROM main.lineitem WHERE csq_bpf_col(l_extendedprice, 'pricey')" % cols),
        ("pricey", "C function, native", "SELECT %s FROM nat.lineitem WHERE pricey_c(l_extendedprice)" % cols),
        ("pricey", "SQL, native", "SELECT %s FROM nat.lineitem WHERE l_extendedprice * 1.08 > 100000.0" % cols),
        ("pricey", "csq eBPF on the host, native",
         "SELECT %s FROM nat.lineitem WHERE csq_bpf('pricey', l_extendedprice)" % cols),
        ("rev", "csq eBPF pushed (csq_query)", "SELECT * FROM rev_v"),
        ("rev", "C function, native",
         "SELECT count(*) FROM nat.lineitem WHERE rev_c(l_extendedprice, l_discount, l_tax)"),
        ("rev", "SQL, native", "SELECT count(*) FROM nat.lineitem "
         "WHERE l_extendedprice * (1 - l_discount) * (1 + l_tax) > 95000.0"),
        ("revrows", "csq eBPF pushed (csq_query)", "SELECT * FROM rows_v"),
        ("revrows", "C function, native", "SELECT l_orderkey, l_extendedprice FROM nat.lineitem "
         "WHERE rev_c(l_extendedprice, l_discount, l_tax)"),
        ("revrows", "SQL, native", "SELECT l_orderkey, l_extendedprice FROM nat.lineitem "
         "WHERE l_extendedprice * (1 - l_discount) * (1 + l_tax) > 95000.0"),
    ]
    print("SF %s lineitem, median of %d interleaved runs (load average %.1f)"
          % (sf, runs, os.getloadavg()[0]))
    for _q, _how, sql in cases:  # warm-up: page cache, programs loaded
        con.execute(sql).fetchall()
    wall = {i: [] for i in range(len(cases))}
    cpu = {i: [] for i in range(len(cases))}
    nrows = {}
    tohost = {i: 0 for i in range(len(cases))}
    for r in range(runs):
        order = list(range(len(cases)))
        order = order[r % len(order):] + order[:r % len(order)]
        for i in order:
            con.execute("SELECT csq_stats_reset()")
            w, c, rows = run_once(con, cases[i][2])
            st = dict(con.execute("SELECT name, value FROM csq_stats").fetchall())
            tohost[i] += st.get("bytes_to_host", 0)
            wall[i].append(w)
            cpu[i].append(c)
            nrows[i] = rows[0][0] if cases[i][0] == "rev" else len(rows)
    print("%-8s %-30s %8s %8s %9s %14s %8s" % ("query", "how", "wall s", "CPU s", "rows",
                                               "bytes to host", "B/row"))
    res = {}
    for i, (q, how, sql) in enumerate(cases):
        w, c, n = median(wall[i]), median(cpu[i]), nrows[i]
        res[(q, how.split(",")[0])] = (w, c, n)
        push = how.startswith("csq eBPF pushed")
        per = tohost[i] // runs
        print("%-8s %-30s %8.3f %8.3f %9d %14s %8s" % (
            q, how, w, c, n, per if push else "-", "%.1f" % (per / n) if push and n else "-"), flush=True)
    for q in ("pricey", "rev", "revrows"):
        p = [v for k, v in res.items() if k[0] == q and k[1].startswith("csq eBPF pushed")][0]
        for other in ("C function", "SQL"):
            o = res[(q, other)]
            assert p[2] == o[2], "%s: pushed %d rows, %s %d" % (q, p[2], other, o[2])
            print("%s: %s on native / pushed eBPF = %.1fx wall, %.1fx CPU"
                  % (q, other, o[0] / p[0], o[1] / p[1]))


if __name__ == "__main__":
    main()
