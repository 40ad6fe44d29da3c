"""User eBPF programs from SQL (vtab/bpf.c): csq_bpf_load, csq_bpf, csq_bpf_col.

Each example of examples/bpf/ against the same logic as SQL or as a Python
function registered with sqlite3_create_function over a native table; the
pushed path (a csq table's filter program, or csq's planner under an
aggregate) against the host path on random data with NULLs and mixed
classes; refusals, faults, and registration refused from a view.

The examples come from $CSQ_BUILD/bpf/ (make bpf-examples); the test's own
programs are compiled here with clang -target bpf (SKIP without clang)."""
import math
import os
import random
import shutil
import struct
import subprocess

from harness import Skip, connect, expect_error, stats, tmpdir

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BUILD = os.environ.get("CSQ_BUILD", os.path.join(ROOT, "build"))
_tmp = None


def compile_c(name, src=None):
    """The object of examples/bpf/NAME.c, or of the C source src."""
    global _tmp
    if src is None:
        built = os.path.join(BUILD, "bpf", name + ".o")
        if os.path.exists(built):
            return open(built, "rb").read()
        src = open(os.path.join(ROOT, "examples", "bpf", name + ".c")).read()
    if not shutil.which("clang"):
        raise Skip("clang is not installed (needed to compile eBPF programs)")
    if _tmp is None:
        _tmp = tmpdir()
    c = os.path.join(_tmp, name + ".c")
    o = os.path.join(_tmp, name + ".o")
    with open(c, "w") as f:
        f.write(src)
    subprocess.run(["clang", "-target", "bpf", "-O2", "-I", os.path.join(ROOT, "ext"), "-c", c, "-o", o],
                   check=True, capture_output=True)
    return open(o, "rb").read()


def load(con, name, obj, types):
    return con.execute("SELECT csq_bpf_load(?, ?, ?)", (name, obj, types)).fetchone()[0]


def q_pushed(con, sql):
    """sql through csq's planner (a csq_query view): the aggregate and its
    filter on the device. Returns the rows and the plan."""
    plan = dict(con.execute("SELECT * FROM csq_explain(?)", (sql,)).fetchall())
    con.execute("DROP TABLE IF EXISTS temp.qv")
    con.execute("CREATE VIRTUAL TABLE temp.qv USING csq_query('%s')" % sql.replace("'", "''"))
    return con.execute("SELECT * FROM qv").fetchall(), plan


# ---- the examples ----

def near_py(lat, lon, lat0, lon0, km):
    """examples/bpf/near.c, operation for operation."""
    vals = [lat, lon, lat0, lon0, km]
    if any(v is None or isinstance(v, (str, bytes)) for v in vals):
        return 0
    lat, lon, lat0, lon0, km = (float(v) for v in vals)
    rad = math.pi / 180.0
    dlat = (lat - lat0) * rad
    mlat = ((lat + lat0) * 0.5) * rad
    dlon = ((lon - lon0) * rad) * math.cos(mlat)
    d2 = dlat * dlat + dlon * dlon
    r = km / 6371.0
    return 1 if d2 <= r * r else 0


def luhn_py(n):
    if not isinstance(n, int) or n < 0:
        return 0
    s = 0
    for i in range(20):
        d = n % 10
        n //= 10
        if i & 1:
            d *= 2
            if d > 9:
                d -= 9
        s += d
    return 1 if s % 10 == 0 else 0


def test_near_matches_python_pushed_and_host():
    con = connect()
    assert load(con, "near", compile_c("near"), "REAL,REAL,REAL,REAL,REAL") > 0
    con.create_function("near_py", 5, near_py)
    rnd = random.Random(7)
    rows = []
    for _ in range(30000):
        lat = 40.6 + rnd.random() * 0.3
        lon = -74.15 + rnd.random() * 0.3
        k = rnd.randrange(20)
        if k == 0:
            lat = None
        elif k == 1:
            lon = "x"
        elif k == 2:
            lat = int(lat)  # an INTEGER, passed as REAL
        rows.append((lat, lon))
    con.execute("CREATE TABLE n(lat REAL, lon ANY)")
    con.execute("CREATE VIRTUAL TABLE t USING csq(lat REAL, lon ANY, pushdown='always')")
    con.execute("BEGIN")
    con.executemany("INSERT INTO n VALUES(?,?)", rows)
    con.executemany("INSERT INTO t VALUES(?,?)", rows)
    con.execute("COMMIT")
    for args in ["40.75, -73.99, 2.0", "40.7, -74.0, 5", "40.8, -73.9, 0.5"]:
        want = con.execute("SELECT count(*) FROM n WHERE near_py(lat, lon, %s)" % args).fetchone()
        host = con.execute("SELECT count(*) FROM n WHERE csq_bpf('near', lat, lon, %s)" % args).fetchone()
        got, plan = q_pushed(con, "SELECT count(*) FROM t WHERE csq_bpf('near', lat, lon, %s)" % args)
        assert plan["plan"] == "device+host", plan
        assert host == want and got == [want], (args, want, host, got)
        assert want[0] > 0


def test_contains_matches_instr():
    con = connect()
    load(con, "contains", compile_c("contains"), "ANY,ANY")
    rnd = random.Random(3)
    words = ["ERR", "err", "warn", "ok", "x\x00y", "ERRor", "", "é", "abcdefgh"]
    rows = []
    for _ in range(20000):
        k = rnd.randrange(12)
        if k == 0:
            rows.append((None,))
        elif k == 1:
            rows.append((bytes(rnd.randrange(256) for _ in range(rnd.randrange(6))),))
        else:
            rows.append(("".join(rnd.choice(words) for _ in range(rnd.randrange(4))),))
    con.execute("CREATE TABLE n(s)")
    con.execute("CREATE VIRTUAL TABLE t USING csq(s, pushdown='always')")
    con.execute("BEGIN")
    con.executemany("INSERT INTO n VALUES(?)", rows)
    con.executemany("INSERT INTO t VALUES(?)", rows)
    con.execute("COMMIT")
    for pat in ["'ERR'", "'r'", "'abcdefgh'", "x'00'", "'é'", "'zz'"]:
        want = con.execute("SELECT count(*) FROM n WHERE instr(s, %s) > 0" % pat).fetchone()
        host = con.execute("SELECT count(*) FROM n WHERE csq_bpf('contains', s, %s)" % pat).fetchone()
        got, plan = q_pushed(con, "SELECT count(*) FROM t WHERE csq_bpf('contains', s, %s)" % pat)
        assert plan["plan"] == "device+host", plan
        assert host == want and got == [want], (pat, want, host, got)
    # a pattern longer than 8 bytes: the program fails the query, both ways
    expect_error(lambda: con.execute("SELECT count(*) FROM n WHERE csq_bpf('contains', s, '123456789')").fetchall(),
                 "csq_fail(8)")
    expect_error(lambda: q_pushed(con, "SELECT count(*) FROM t WHERE csq_bpf('contains', s, '123456789')"),
                 "eBPF", "csq_fail(8)")


def test_luhn_filter_and_function():
    con = connect()
    load(con, "luhn", compile_c("luhn"), "INTEGER")
    con.create_function("luhn_py", 1, luhn_py)
    rnd = random.Random(11)
    rows = [(rnd.choice([rnd.randrange(10**15, 10**16), rnd.randrange(-1000, 1000), None, 1.5, "79927398713",
                         79927398713]),) for _ in range(20000)]
    con.execute("CREATE TABLE n(num ANY)")
    con.execute("CREATE VIRTUAL TABLE t USING csq(num ANY, pushdown='always')")
    con.execute("BEGIN")
    con.executemany("INSERT INTO n VALUES(?)", rows)
    con.executemany("INSERT INTO t VALUES(?)", rows)
    con.execute("COMMIT")
    want = con.execute("SELECT rowid FROM n WHERE luhn_py(num) ORDER BY rowid").fetchall()
    plan = " ".join(str(r) for r in con.execute(
        "EXPLAIN QUERY PLAN SELECT rowid FROM t WHERE csq_bpf_col(num, 'luhn')").fetchall())
    assert ":bpf:" in plan, plan
    con.execute("SELECT csq_stats_reset()")
    got = con.execute("SELECT rowid FROM t WHERE csq_bpf_col(num, 'luhn') ORDER BY rowid").fetchall()
    st = stats(con)
    assert got == want and len(want) > 100, (len(got), len(want))
    assert st["rows_returned"] <= 2 * len(want), st  # only matching rows came back
    host = con.execute("SELECT rowid FROM n WHERE csq_bpf_col(num, 'luhn') ORDER BY rowid").fetchall()
    assert host == want
    # as a function in a select list
    a = con.execute("SELECT csq_bpf('luhn', num) FROM t ORDER BY rowid").fetchall()
    b = con.execute("SELECT luhn_py(num) FROM n ORDER BY rowid").fetchall()
    assert a == b


# ---- pushed and host agree on mixed values ----

MIX = r'''
#include "csq_bpf.h"
static inline u64 mixh(const struct csq_arg *a, u64 i) {
  u64 h = a[i].type * 0x9E3779B97F4A7C15ull ^ a[i].v;
  s64 b0 = csq_byte(i, 0), b1 = csq_byte(i, 1);
  h ^= (u64)b0 * 31 + (u64)b1;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}
CSQ_PROGRAM u64 mix(const struct csq_arg *a) {
  return (mixh(a, 0) ^ (mixh(a, 1) * 3)) % 3 == 0;
}
'''


def mix_py(x, y):
    def slot(v):
        if v is None:
            return 0, 0, b""
        if isinstance(v, int):
            return 1, v & (2**64 - 1), b""
        if isinstance(v, float):
            return 2, struct.unpack("<Q", struct.pack("<d", v))[0], b""
        z = v.encode() if isinstance(v, str) else v
        return (3 if isinstance(v, str) else 4), len(z), z

    def h(v):
        t, u, z = slot(v)
        m = 2**64 - 1
        hh = ((t * 0x9E3779B97F4A7C15) & m) ^ u
        b0 = z[0] if len(z) > 0 else m
        b1 = z[1] if len(z) > 1 else m
        hh ^= (b0 * 31 + b1) & m
        hh = (hh * 0xff51afd7ed558ccd) & m
        return hh ^ (hh >> 33)

    m = 2**64 - 1
    return 1 if ((h(x) ^ ((h(y) * 3) & m)) % 3) == 0 else 0


def mixed(rnd):
    k = rnd.randrange(8)
    if k == 0:
        return None
    if k <= 2:
        return rnd.choice([rnd.randrange(-50, 50), rnd.randrange(-2**63, 2**63)])
    if k == 3:
        return rnd.choice([0.5, -1.25, 1e300, -0.0, 3.0])
    if k <= 5:
        return rnd.choice(["", "a", "ab", "é", "xyz", "10"])
    return rnd.choice([b"", b"\x00", b"\xff\x01", b"abc"])


def test_pushed_and_host_agree_on_mixed_values():
    con = connect()
    load(con, "mix", compile_c("mix", MIX), "ANY,ANY")
    con.create_function("mix_py", 2, mix_py)
    rnd = random.Random(5)
    rows = [(mixed(rnd), mixed(rnd)) for _ in range(20000)]
    con.execute("CREATE TABLE n(a, b)")
    con.execute("CREATE VIRTUAL TABLE t USING csq(a, b, pushdown='always', rowgroup=3000)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO n VALUES(?,?)", rows)
    con.executemany("INSERT INTO t VALUES(?,?)", rows)
    con.execute("COMMIT")
    want = con.execute("SELECT count(*) FROM n WHERE mix_py(a, b)").fetchone()
    host = con.execute("SELECT count(*) FROM n WHERE csq_bpf('mix', a, b)").fetchone()
    host_t = con.execute("SELECT count(*) FROM t WHERE csq_bpf('mix', a, b)").fetchone()
    got, plan = q_pushed(con, "SELECT count(*) FROM t WHERE csq_bpf('mix', a, b)")
    assert plan["plan"] == "device+host", plan
    assert host == want == host_t and got == [want], (want, host, host_t, got)
    # typed columns without NULLs (the executor's batch path), and with some
    typed = [(rnd.randrange(-10**6, 10**6), rnd.randrange(10**6) / 100.0) for _ in range(20000)]
    for nulls in (0, 1):
        if nulls:
            typed = [(None, b) if i % 17 == 0 else (a, None) if i % 23 == 0 else (a, b)
                     for i, (a, b) in enumerate(typed)]
        con.execute("DROP TABLE IF EXISTS n2")
        con.execute("DROP TABLE IF EXISTS t2")
        con.execute("CREATE TABLE n2(a INTEGER, b REAL)")
        con.execute("CREATE VIRTUAL TABLE t2 USING csq(a INTEGER, b REAL, pushdown='always', rowgroup=5000)")
        con.execute("BEGIN")
        con.executemany("INSERT INTO n2 VALUES(?,?)", typed)
        con.executemany("INSERT INTO t2 VALUES(?,?)", typed)
        con.execute("COMMIT")
        want = con.execute("SELECT count(*) FROM n2 WHERE mix_py(a, b)").fetchone()
        got, plan = q_pushed(con, "SELECT count(*) FROM t2 WHERE csq_bpf('mix', a, b)")
        assert plan["plan"] == "device+host" and got == [want], (nulls, got, want)
    # a constant argument on the device, and the grouped form
    got, _ = q_pushed(con, "SELECT count(*) FROM t WHERE csq_bpf('mix', a, 'ab') AND b IS NOT NULL")
    want = con.execute("SELECT count(*) FROM n WHERE mix_py(a, 'ab') AND b IS NOT NULL").fetchall()
    assert got == want, (got, want)


# ---- refusals and errors ----

def test_clear_errors():
    con = connect()
    expect_error(lambda: con.execute("SELECT csq_bpf('nope', 1)").fetchall(), "no eBPF program named 'nope'")
    load(con, "luhn", compile_c("luhn"), "INTEGER")
    expect_error(lambda: con.execute("SELECT csq_bpf('luhn', 1, 2)").fetchall(), "takes 1 argument", "2 given")
    expect_error(lambda: load(con, "x", compile_c("luhn"), "REAL,FLOAT"), "unknown argument type 'FLOAT'")
    expect_error(lambda: load(con, "x", b"not an object", "INTEGER"), "not an ELF object")
    expect_error(lambda: load(con, "x", b"", "INTEGER"), "must be the program")
    loop = compile_c("loop", '#include "csq_bpf.h"\nCSQ_PROGRAM u64 f(const struct csq_arg *a) {\n'
                             '  u64 s = 0; for (u64 i = 0; i < a[0].v; i++) s ^= i + 3; return s; }\n')
    expect_error(lambda: load(con, "loop", loop, "INTEGER"), "verifier", "loop")
    oob = compile_c("oob", '#include "csq_bpf.h"\nCSQ_PROGRAM u64 f(const struct csq_arg *a) { return a[3].v; }\n')
    expect_error(lambda: load(con, "oob", oob, "INTEGER"), "boundary")
    expect_error(lambda: load(con, "oob", oob, "INTEGER,INTEGER"), "boundary")
    assert load(con, "oob", oob, "INTEGER,INTEGER,INTEGER,INTEGER") > 0
    # a constraint naming a program that is not loaded is not pushed: the host says so
    con.execute("CREATE VIRTUAL TABLE t USING csq(x INTEGER, pushdown='always')")
    con.execute("INSERT INTO t VALUES (1)")
    expect_error(lambda: con.execute("SELECT * FROM t WHERE csq_bpf_col(x, 'nope')").fetchall(), "no eBPF program")


def test_registration_refused_from_a_view_or_trigger():
    con = connect()
    obj = compile_c("luhn")
    con.execute("CREATE TABLE blobs(b)")
    con.execute("INSERT INTO blobs VALUES (?)", (obj,))
    con.execute("CREATE VIEW v AS SELECT csq_bpf_load('v', b, 'INTEGER') FROM blobs")
    expect_error(lambda: con.execute("SELECT * FROM v").fetchall(), "unsafe use of csq_bpf_load")
    con.execute("CREATE TABLE log(x)")
    con.execute("CREATE TRIGGER tr AFTER INSERT ON log BEGIN SELECT csq_bpf_load('t', b, 'INTEGER') FROM blobs; END")
    expect_error(lambda: con.execute("INSERT INTO log VALUES (1)"), "unsafe use of csq_bpf_load")
    expect_error(lambda: con.execute("SELECT csq_bpf('v', 1)").fetchall(), "no eBPF program")


FAILER = r'''
#include "csq_bpf.h"
CSQ_PROGRAM u64 f(const struct csq_arg *a) {
  if (a[0].type == CSQ_T_INTEGER && a[0].v == 99999) { csq_fail(77); return 0; }
  if (a[0].type == CSQ_T_INTEGER && a[0].v == 99998) { csq_fail(-123456789012); return 0; }
  return a[0].v & 1;
}
'''


def test_fault_fails_the_query_and_the_device_serves_on():
    d = tmpdir()
    path = os.path.join(d, "db")
    con = connect(path)
    con2 = connect(path)
    load(con, "failer", compile_c("failer", FAILER), "INTEGER")
    con.execute("CREATE VIRTUAL TABLE t USING csq(x INTEGER, pushdown='always', rowgroup=1000)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(5000)])
    con.execute("COMMIT")
    assert con.execute("SELECT count(*) FROM t WHERE csq_bpf_col(x, 'failer')").fetchone() == (2500,)
    con.execute("INSERT INTO t VALUES (99999)")
    msg = expect_error(lambda: con.execute("SELECT count(*) FROM t WHERE csq_bpf_col(x, 'failer')").fetchall(),
                       "eBPF", "csq_fail(77)")
    # the host path names the program and the code
    expect_error(lambda: con.execute("SELECT csq_bpf('failer', 99999)").fetchall(), "failer", "csq_fail(77)")
    # a code wider than 32 bits, negative, reaches the user whole from both sides
    con.execute("DELETE FROM t WHERE x = 99999")
    con.execute("INSERT INTO t VALUES (99998)")
    expect_error(lambda: con.execute("SELECT count(*) FROM t WHERE csq_bpf_col(x, 'failer')").fetchall(),
                 "eBPF", "csq_fail(-123456789012)")
    expect_error(lambda: con.execute("SELECT csq_bpf('failer', 99998)").fetchall(), "failer",
                 "csq_fail(-123456789012)")
    # the connection and another one still run queries on the device
    assert con.execute("SELECT count(*) FROM t WHERE x < 10").fetchone() == (10,), msg
    assert con2.execute("SELECT count(*) FROM t WHERE x >= 4000").fetchone() == (1001,)
    con.execute("DELETE FROM t WHERE x = 99998")
    assert con.execute("SELECT count(*) FROM t WHERE csq_bpf_col(x, 'failer')").fetchone() == (2500,)


def test_bytes_to_host_are_the_matching_rows():
    con = connect()
    load(con, "luhn", compile_c("luhn"), "INTEGER")
    con.execute("CREATE VIRTUAL TABLE t USING csq(num INTEGER, pad TEXT, pushdown='always')")
    rnd = random.Random(2)
    con.execute("BEGIN")
    pad = lambda: "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(40))
    con.executemany("INSERT INTO t VALUES (?, ?)", [(rnd.randrange(10**15, 10**16), pad()) for _ in range(40000)])
    con.execute("COMMIT")
    con.execute("SELECT csq_stats_reset()")
    n_all = len(con.execute("SELECT num, pad FROM t").fetchall())
    all_bytes = stats(con)["bytes_to_host"]
    con.execute("SELECT csq_stats_reset()")
    n = len(con.execute("SELECT num, pad FROM t WHERE csq_bpf_col(num, 'luhn')").fetchall())
    some_bytes = stats(con)["bytes_to_host"]
    assert n_all == 40000 and 3000 < n < 5000, n
    # about a tenth of the rows pass: about a tenth of the bytes (with slack
    # for the result's lengths, row numbers and headers)
    assert some_bytes < all_bytes * (n / n_all) * 2 and some_bytes < n * 100, (some_bytes, all_bytes, n)
    con.execute("SELECT csq_stats_reset()")
    assert con.execute("SELECT count(*) FROM t WHERE csq_bpf_col(num, 'luhn')").fetchone() == (n,)
    assert stats(con)["bytes_to_host"] < n * 40, stats(con)


def test_a_program_as_an_aggregate_argument_on_the_device():
    con = connect()
    load(con, "luhn", compile_c("luhn"), "INTEGER")
    load(con, "mix", compile_c("mix", MIX), "ANY,ANY")
    rnd = random.Random(9)
    rows = [(mixed(rnd), mixed(rnd)) for _ in range(20000)]
    con.execute("CREATE TABLE n(a, b)")
    con.execute("CREATE VIRTUAL TABLE t USING csq(a, b, pushdown='always', rowgroup=3000)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO n VALUES(?,?)", rows)
    con.executemany("INSERT INTO t VALUES(?,?)", rows)
    con.execute("COMMIT")
    for q in ["SELECT sum(csq_bpf('mix', a, b)), count(*) FROM %s",
              "SELECT sum(csq_bpf('luhn', a) * 3 + 1), max(csq_bpf('mix', a, 'ab')) FROM %s "
              "WHERE csq_bpf('mix', b, a)",
              "SELECT csq_bpf('mix', a, 'ab'), count(*), sum(csq_bpf('luhn', a)) FROM %s "
              "GROUP BY csq_bpf('mix', a, 'ab') ORDER BY 1",
              "SELECT typeof(b), total(csq_bpf_col(a, 'luhn')) FROM %s GROUP BY typeof(b) ORDER BY 1"]:
        want = con.execute(q % "n").fetchall()
        got, plan = q_pushed(con, q % "t")
        assert got == want, (q, got, want)
        if "typeof" not in q:
            assert plan["plan"] == "device+host", plan
