"""bench/bpf.py BUILD [SF] [--work DIR] [--runs N] - a user's eBPF filter on
the device against the same predicate as a C scalar function and as SQL on a
native table, in one run, over TPC-H lineitem (default SF 1).

  /usr/bin/python3 bench/bpf.py build 1

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
The C functions are compiled here (gcc -O2) as a loadable SQLite extension
(sqlite3_create_function, one call per row, as a user's UDF would be); the
eBPF programs with clang -target bpf. Prints one line per query: seconds
(median of --runs after a warm-up), rows, bytes to the host (csq), and the
ratio C / csq. Needs build/bench/gen (make bench-bin)."""
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


def timed(con, sql, runs):
    con.execute(sql).fetchall()  # warm-up
    ts, rows = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        rows = con.execute(sql).fetchall()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2], rows


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(zip(sys.argv[1:], sys.argv[2:]))
    bdir = args[0] if args else "build"
    sf = args[1] if len(args) > 1 else "1"
    runs = int(opts.get("--runs", "3"))
    work = opts.get("--work") or tempfile.mkdtemp(prefix="csq-bpf-bench-")
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
    ]
    print("SF %s lineitem, median of %d runs" % (sf, runs))
    print("%-7s %-30s %9s %9s %14s" % ("query", "how", "seconds", "rows", "bytes to host"))
    res = {}
    for q, how, sql in cases:
        con.execute("SELECT csq_stats_reset()")
        sec, rows = timed(con, sql, runs)
        st = dict(con.execute("SELECT name, value FROM csq_stats").fetchall())
        n = rows[0][0] if q == "rev" else len(rows)
        per = st.get("bytes_to_host", 0) // (runs + 1)
        res[(q, how.split(",")[0])] = (sec, n)
        print("%-7s %-30s %9.3f %9d %14s" % (q, how, sec, n, per if how.startswith("csq eBPF pushed") else "-"),
              flush=True)
    for q in ("pricey", "rev"):
        p = [v for k, v in res.items() if k[0] == q and k[1].startswith("csq eBPF pushed")][0]
        c = res[(q, "C function")]
        assert p[1] == c[1], "%s: pushed %d rows, C function %d" % (q, p[1], c[1])
        print("%s: C function on native / pushed eBPF = %.1fx" % (q, c[0] / p[0]))


if __name__ == "__main__":
    main()
