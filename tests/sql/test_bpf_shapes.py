"""csq_bpf in every place a query can hold it: each answer against the same
program run on the host over a native table with the same rows (and, where
the logic has one, the same logic written in SQL), and csq_explain's word
on where each call ran: on the device (which call, as a filter term or as a
value) or on the host (and, for a WHERE term the device cannot take, which
term).

Columns: id, a INTEGER with NULLs, b REAL with NULLs, g INTEGER in runs of
seven (stored run-length encoded), s TEXT, bl BLOB, m of every storage
class. Programs are compiled here with clang -target bpf (SKIP without)."""
import os
import random
import shutil
import subprocess

from harness import Skip, connect, same_rows, stats, tmpdir

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

PROGRAMS = {
    # a % 3 == 0 for an INTEGER; anything else 0 (eBPF has no signed
    # division: the magnitude's unsigned remainder)
    "p_int": ("INTEGER", r'''
CSQ_PROGRAM u64 f(const struct csq_arg *a) {
  if (!csq_is(a, 0, CSQ_T_INTEGER)) return 0;
  u64 v = csq_int(a, 0) < 0 ? -csq_int(a, 0) : csq_int(a, 0);
  return v % 3 == 0;
}'''),
    # a > 10 and b < 500.0, both present
    "p_two": ("INTEGER,REAL", r'''
CSQ_PROGRAM u64 f(const struct csq_arg *a) {
  if (csq_is_null(a, 0) || !csq_is(a, 0, CSQ_T_INTEGER) || !csq_is(a, 1, CSQ_T_REAL)) return 0;
  return csq_int(a, 0) > 10 && csq_fcmp(a[1].v, csq_real(500.0)) < 0;
}'''),
    # the storage class as its slot type (0 NULL .. 4 BLOB)
    "p_type": ("ANY", r'''
CSQ_PROGRAM u64 f(const struct csq_arg *a) { return a[0].type; }'''),
    # a TEXT or BLOB holding the byte 'x'
    "p_x": ("ANY", r'''
CSQ_PROGRAM u64 f(const struct csq_arg *a) { return csq_find(0, 'x', 1) >= 0; }'''),
}

TYPE_SQL = ("CASE typeof(%s) WHEN 'null' THEN 0 WHEN 'integer' THEN 1 WHEN 'real' THEN 2 "
            "WHEN 'text' THEN 3 ELSE 4 END")

# (name, query over {t} (a csq table, or the native one), the same logic in
#  SQL over {t} or None, where: "device" with what explain's ebpf row holds,
#  "host" with a fragment of explain's why, or "table" (the stock path:
#  the csq table itself pushes csq_bpf_col))
SHAPES = [
    ("where alone", "SELECT count(*) FROM {t} WHERE csq_bpf('p_int', a)",
     "SELECT count(*) FROM {t} WHERE a % 3 = 0 AND typeof(a) = 'integer'",
     "device", "csq_bpf('p_int', a) as a filter term"),
    ("and a comparison", "SELECT count(*), sum(a) FROM {t} WHERE csq_bpf('p_int', a) AND b > 100.0",
     "SELECT count(*), sum(a) FROM {t} WHERE a % 3 = 0 AND b > 100.0", "device", "as a filter term"),
    ("and a selective range over runs",
     "SELECT count(*), sum(g) FROM {t} WHERE id < 200 AND csq_bpf('p_int', g)",
     "SELECT count(*), sum(g) FROM {t} WHERE id < 200 AND g % 3 = 0", "device", "csq_bpf('p_int', g)"),
    ("two programs", "SELECT count(*) FROM {t} WHERE csq_bpf('p_int', a) AND csq_bpf('p_two', a, b)",
     "SELECT count(*) FROM {t} WHERE a % 3 = 0 AND a > 10 AND b < 500.0", "device",
     "csq_bpf('p_int', a) as a filter term; csq_bpf('p_two', a, b) as a filter term"),
    ("two columns", "SELECT count(*) FROM {t} WHERE csq_bpf('p_two', a, b)",
     "SELECT count(*) FROM {t} WHERE a > 10 AND b < 500.0", "device", "csq_bpf('p_two', a, b)"),
    ("a constant argument", "SELECT count(*) FROM {t} WHERE csq_bpf('p_two', a, 250.5)",
     "SELECT count(*) FROM {t} WHERE typeof(a) = 'integer' AND a > 10", "device", "as a filter term"),
    ("an INTEGER constant for a REAL", "SELECT count(*) FROM {t} WHERE csq_bpf('p_two', a, 7)",
     "SELECT count(*) FROM {t} WHERE typeof(a) = 'integer' AND a > 10", "device", "as a filter term"),
    ("a NULL argument", "SELECT count(*) FROM {t} WHERE csq_bpf('p_two', a, NULL)",
     "SELECT 0", "device", "as a filter term"),
    ("mixed storage classes", "SELECT count(*) FROM {t} WHERE csq_bpf('p_x', m)",
     "SELECT count(*) FROM {t} WHERE typeof(m) IN ('text', 'blob') AND instr(m, 'x') > 0",
     "device", "csq_bpf('p_x', m)"),
    ("a TEXT column", "SELECT count(*) FROM {t} WHERE csq_bpf('p_x', s)",
     "SELECT count(*) FROM {t} WHERE instr(s, 'x') > 0", "device", "csq_bpf('p_x', s)"),
    ("a BLOB column", "SELECT count(*) FROM {t} WHERE csq_bpf('p_x', bl)",
     "SELECT count(*) FROM {t} WHERE instr(bl, x'78') > 0", "device", "csq_bpf('p_x', bl)"),
    ("a TEXT constant", "SELECT count(*) FROM {t} WHERE csq_bpf('p_x', 'wax') AND a > 50",
     "SELECT count(*) FROM {t} WHERE a > 50", "host", "csq_bpf('p_x', 'wax') reads no column"),
    ("in an aggregate", "SELECT sum(csq_bpf('p_type', m)), count(*) FROM {t} WHERE a > 20",
     "SELECT sum(" + TYPE_SQL % "m" + "), count(*) FROM {t} WHERE a > 20", "device",
     "csq_bpf('p_type', m) as a value"),
    ("as a GROUP BY key",
     "SELECT csq_bpf('p_type', m) AS k, count(*) FROM {t} GROUP BY csq_bpf('p_type', m) ORDER BY k",
     "SELECT " + TYPE_SQL % "m" + " AS k, count(*) FROM {t} GROUP BY k ORDER BY k", "device",
     "as a value"),
    ("as a GROUP BY key named by its alias",
     "SELECT csq_bpf('p_type', m) AS k, count(*), max(id) FROM {t} GROUP BY k ORDER BY k",
     "SELECT " + TYPE_SQL % "m" + " AS k, count(*), max(id) FROM {t} GROUP BY k ORDER BY k", "device",
     "csq_bpf('p_type', m) as a value"),
    ("in the select list", "SELECT id, csq_bpf('p_type', m) FROM {t} WHERE id % 5 = 0 ORDER BY id",
     "SELECT id, " + TYPE_SQL % "m" + " FROM {t} WHERE id % 5 = 0 ORDER BY id", "host", "no aggregate"),
    ("a plain SELECT of several columns",
     "SELECT id, a, b, s, m FROM {t} WHERE csq_bpf('p_two', a, b)",
     "SELECT id, a, b, s, m FROM {t} WHERE a > 10 AND b < 500.0", "device",
     "csq_bpf('p_two', a, b) as a filter term"),
    ("a plain SELECT, ordered and limited",
     "SELECT s || '!', bl, b * 2 FROM {t} WHERE csq_bpf('p_x', m) AND g > 100 ORDER BY b DESC, id LIMIT 40 OFFSET 3",
     "SELECT s || '!', bl, b * 2 FROM {t} WHERE typeof(m) IN ('text', 'blob') AND instr(m, 'x') > 0 "
     "AND g > 100 ORDER BY b DESC, id LIMIT 40 OFFSET 3", "device", "csq_bpf('p_x', m)"),
    ("a plain SELECT, a call in its list too",
     "SELECT id, csq_bpf('p_type', m) FROM {t} WHERE NOT csq_bpf('p_int', g) AND id < 500",
     "SELECT id, " + TYPE_SQL % "m" + " FROM {t} WHERE g % 3 != 0 AND id < 500", "device",
     "NOT csq_bpf('p_int', g) as a filter term"),
    ("a plain SELECT of no column", "SELECT 7 FROM {t} WHERE csq_bpf('p_int', a) AND id < 90",
     "SELECT 7 FROM {t} WHERE a % 3 = 0 AND id < 90", "device", "csq_bpf('p_int', a)"),
    ("a plain SELECT *", "SELECT * FROM {t} WHERE csq_bpf('p_two', a, b)",
     "SELECT * FROM {t} WHERE a > 10 AND b < 500.0", "host", "SELECT * without aggregates"),
    ("rows from the stock path",
     "SELECT id, g, b FROM {t} WHERE csq_bpf_col(g, 'p_int') ORDER BY id",
     "SELECT id, g, b FROM {t} WHERE g % 3 = 0 ORDER BY id", "table", None),
    ("under NOT", "SELECT count(*) FROM {t} WHERE NOT csq_bpf('p_int', a)",
     "SELECT count(*) FROM {t} WHERE NOT (typeof(a) = 'integer' AND a % 3 = 0)", "device",
     "NOT csq_bpf('p_int', a) as a filter term"),
    ("under NOT, AND-ed", "SELECT count(*), max(b) FROM {t} WHERE NOT csq_bpf('p_two', a, b) AND a < 400",
     "SELECT count(*), max(b) FROM {t} WHERE NOT (a > 10 AND b < 500.0 AND b IS NOT NULL) AND a < 400",
     "device", "NOT csq_bpf('p_two', a, b) as a filter term"),
    ("under OR", "SELECT count(*) FROM {t} WHERE csq_bpf('p_int', a) OR b < 10.0",
     "SELECT count(*) FROM {t} WHERE (typeof(a) = 'integer' AND a % 3 = 0) OR b < 10.0", "host",
     "csq_bpf('p_int', a) OR b < 10.0"),
    ("compared", "SELECT count(*) FROM {t} WHERE csq_bpf('p_type', m) = 3",
     "SELECT count(*) FROM {t} WHERE typeof(m) = 'text'", "host", "csq_bpf('p_type', m) = 3"),
    ("in a subquery",
     "SELECT count(*) FROM {t} WHERE id IN (SELECT id FROM {t} WHERE csq_bpf('p_int', a))",
     "SELECT count(*) FROM {t} WHERE a % 3 = 0", None, None),
    ("in a FROM subquery",
     "SELECT count(*), max(b) FROM (SELECT a, b FROM {t} WHERE csq_bpf('p_two', a, b))",
     "SELECT count(*), max(b) FROM {t} WHERE a > 10 AND b < 500.0", None, None),
    ("joined", "SELECT count(*), sum(x.a) FROM {t} AS x JOIN other AS o ON x.id = o.id "
     "WHERE csq_bpf('p_int', x.a)",
     "SELECT count(*), sum(x.a) FROM {t} AS x JOIN other AS o ON x.id = o.id WHERE x.a % 3 = 0",
     None, None),
]


def compile_all():
    if not shutil.which("clang"):
        raise Skip("clang is not installed (needed to compile eBPF programs)")
    d = tmpdir()
    out = {}
    for name, (types, body) in PROGRAMS.items():
        c, o = os.path.join(d, name + ".c"), os.path.join(d, name + ".o")
        with open(c, "w") as f:
            f.write('#include "csq_bpf.h"\n' + body)
        subprocess.run(["clang", "-target", "bpf", "-O2", "-I", os.path.join(ROOT, "ext"), "-c", c, "-o", o],
                       check=True, capture_output=True)
        out[name] = (open(o, "rb").read(), types)
    return out


def make_rows(n):
    rnd = random.Random(19)
    words = ["ax", "bee", "xyz", "plain", "", "x", "mixed"]
    rows = []
    for i in range(n):
        a = None if rnd.random() < 0.08 else rnd.randrange(-50, 1000)
        b = None if rnd.random() < 0.08 else rnd.randrange(0, 200000) / 100.0
        s = None if rnd.random() < 0.05 else rnd.choice(words) + str(i % 13)
        bl = None if rnd.random() < 0.05 else bytes(rnd.choice(b"abx\0") for _ in range(rnd.randrange(0, 6)))
        m = rnd.choice([None, rnd.randrange(-9, 9), rnd.random() * 10, rnd.choice(words),
                        rnd.choice(words).encode()])
        rows.append((i, a, b, i // 7, s, bl, m))
    return rows


def setup():
    progs = compile_all()
    con = connect()
    for name, (obj, types) in progs.items():
        con.execute("SELECT csq_bpf_load(?, ?, ?)", (name, obj, types))
    cols = "id INTEGER PRIMARY KEY, a INTEGER, b REAL, g INTEGER, s TEXT, bl BLOB, m"
    con.execute("CREATE VIRTUAL TABLE t USING csq(%s, pushdown='always', rowgroup=1500)" % cols)
    con.execute("CREATE TABLE n(%s)" % cols)
    con.execute("CREATE TABLE other(id INTEGER PRIMARY KEY, w)")
    rows = make_rows(6000)
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    con.executemany("INSERT INTO n VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    con.executemany("INSERT INTO other VALUES (?, ?)", [(i, i % 4) for i in range(0, 6000, 3)])
    con.execute("COMMIT")
    return con


def explain(con, sql):
    return dict(con.execute("SELECT * FROM csq_explain(?)", (sql,)).fetchall())


def pushed(con, sql):
    """sql through csq's planner, as a csq_query view runs it."""
    con.execute("DROP TABLE IF EXISTS temp.qv")
    con.execute("CREATE VIRTUAL TABLE temp.qv USING csq_query('%s')" % sql.replace("'", "''"))
    return con.execute("SELECT * FROM qv").fetchall()


def test_every_shape_answers_as_on_the_host_and_says_where_it_ran():
    con = setup()
    assert len(SHAPES) >= 18
    for name, q, logic, where, what in SHAPES:
        sql_t, sql_n = q.format(t="t"), q.format(t="n")
        want = con.execute(sql_n).fetchall()  # the program on the host, native rows
        if logic is not None:
            same_rows(want, con.execute(logic.format(t="n")).fetchall(), name + ": host program vs SQL")
        same_rows(con.execute(sql_t).fetchall(), want, name + ": csq table, as written")
        same_rows(pushed(con, sql_t), want, name + ": csq table, through csq's planner")
        plan = explain(con, sql_t)
        if where == "device":
            assert plan["plan"] == "device+host", (name, plan)
            assert what in plan.get("ebpf", ""), (name, plan)
            assert plan["ebpf"].startswith("on the device"), (name, plan)
        elif where == "host":
            assert plan["plan"] == "host", (name, plan)
            assert what in plan["why"], (name, plan)
            assert plan["ebpf"].startswith("on the host"), (name, plan)
        elif where == "table":
            # the stock path: the table's filter program runs the call, so
            # only the matching rows come back
            con.execute("SELECT csq_stats_reset()")
            con.execute(sql_t).fetchall()
            assert stats(con)["rows_returned"] == len(want), (name, stats(con))
        # the same query as a view over the csq table
        con.execute("DROP VIEW IF EXISTS sv")
        con.execute("CREATE VIEW sv AS " + sql_t)
        same_rows(con.execute("SELECT * FROM sv").fetchall(), want, name + ": in a view")


def test_shapes_after_writes_in_a_transaction():
    """Rows written in the open transaction (not yet on the device) are
    filtered by the same program on the host, and counted once."""
    con = setup()
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(10000 + i, i * 3, 1.5, 0, "x", b"x", "x") for i in range(50)])
    con.executemany("INSERT INTO n VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(10000 + i, i * 3, 1.5, 0, "x", b"x", "x") for i in range(50)])
    con.execute("DELETE FROM t WHERE id < 300")
    con.execute("DELETE FROM n WHERE id < 300")
    for name, q, _logic, _where, _what in SHAPES:
        want = con.execute(q.format(t="n")).fetchall()
        same_rows(con.execute(q.format(t="t")).fetchall(), want, name + ": inside a transaction")
        same_rows(pushed(con, q.format(t="t")), want, name + ": inside a transaction, csq's planner")
    con.execute("COMMIT")


def test_plain_select_keeping_most_rows():
    """A plain SELECT whose filter keeps most of a big table: the planner
    gives the rows to SQLite's own scan of the table instead of collecting
    them (the answer is the same either way)."""
    progs = compile_all()
    con = connect()
    obj, types = progs["p_int"]
    con.execute("SELECT csq_bpf_load('p_int', ?, ?)", (obj, types))
    con.execute("CREATE VIRTUAL TABLE big USING csq(a INTEGER, b REAL, pushdown='always')")
    con.execute("CREATE TABLE nbig(a INTEGER, b REAL)")
    rows = [(3 * i if i % 50 else 3 * i + 1, i / 4.0) for i in range(80000)]
    con.execute("BEGIN")
    con.executemany("INSERT INTO big VALUES (?, ?)", rows)
    con.executemany("INSERT INTO nbig VALUES (?, ?)", rows)
    con.execute("COMMIT")
    for q in ("SELECT a, b FROM {t} WHERE csq_bpf('p_int', a)",
              "SELECT a, b FROM {t} WHERE NOT csq_bpf('p_int', a)",
              "SELECT b FROM {t} WHERE csq_bpf('p_int', a) ORDER BY b DESC LIMIT 5"):
        want = con.execute(q.format(t="nbig")).fetchall()
        assert explain(con, q.format(t="big"))["plan"] == "device+host"
        same_rows(pushed(con, q.format(t="big")), want, q)
    assert len(pushed(con, "SELECT a FROM big WHERE csq_bpf('p_int', a)")) == 80000 - 1600


def test_plain_select_over_a_striped_table():
    """A row plan over a table striped on two devices: every member's
    matching rows, in rowid order, as the native table gives them."""
    progs = compile_all()
    d = tmpdir()
    con = connect(os.path.join(d, "db"))
    obj, types = progs["p_two"]
    con.execute("SELECT csq_bpf_load('p_two', ?, ?)", (obj, types))
    con.execute("CREATE VIRTUAL TABLE st USING csq(a INTEGER, b REAL, devices='%s,%s', "
                "pushdown='always', rowgroup=1000)" % (os.path.join(d, "a.csd"), os.path.join(d, "b.csd")))
    con.execute("CREATE TABLE sn(a INTEGER, b REAL)")
    rnd = random.Random(7)
    rows = [(rnd.randrange(-20, 60), rnd.randrange(0, 100000) / 100.0) for _ in range(12000)]
    con.execute("BEGIN")
    con.executemany("INSERT INTO st VALUES (?, ?)", rows)
    con.executemany("INSERT INTO sn VALUES (?, ?)", rows)
    con.execute("COMMIT")
    q = "SELECT rowid, a, b FROM {t} WHERE csq_bpf('p_two', a, b) AND a < 40"
    assert explain(con, q.format(t="st"))["plan"] == "device+host"
    same_rows(pushed(con, q.format(t="st")), con.execute(q.format(t="sn")).fetchall(), "striped")
