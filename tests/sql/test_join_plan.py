"""The join planner (planner/join.c): inner equi-joins of csq tables as host
hash joins over device-filtered scans, SQLite finishing the rest.

A differential test of random queries over two to four csq tables and their
native twins: keys of INTEGER, REAL and NUMERIC affinity holding integers,
integral and fractional reals, numeric text and NULLs; text columns of
BINARY, NOCASE and RTRIM collation; random constant filters (ORs of
equalities too), residual terms across tables (a.x < b.y, OR, LIKE), keys
inside every branch of an OR (as in TPC-H Q19), GROUP BY with aggregates
and HAVING, ORDER BY ... LIMIT. Each query runs through a csq_query view
and as written on the native tables; the answers must be equal (as
multisets, numbers compared as numbers: see test_join_random.canon), and
most queries must take the join path (csq_explain says so). Then the shapes
the planner must refuse (a LEFT JOIN's ON over its preserved side, keys SQLite converts, a native table, a build side
over the memory budget) still answer as native does, * expands as in SQLite, device faults are the
statement's error, join filters keep rows on the device, and csq_explain
shows the plan as a tree.
"""
import os
import random
import shutil
import sys

from harness import connect, expect_error, stats, tmpdir
from test_join_random import canon

KEY_TYPES = ["INTEGER", "REAL", "NUMERIC"]
TEXT_TYPES = ["TEXT", "TEXT COLLATE NOCASE", "TEXT COLLATE RTRIM", ""]
NTAB = 4


def key_value(rnd, dom):
    i = rnd.randrange(dom)
    r = rnd.random()
    if r < 0.6:
        return i
    if r < 0.72:
        return float(i)
    if r < 0.78:
        return i + 0.5
    if r < 0.86:
        return str(i)
    return None


def text_value(rnd):
    return rnd.choice([None, "a", "A", "b", "b ", "ab", "B", "", "x%d" % rnd.randrange(5), 7, 2.5])


class Db:
    """csq tables t0..t3 and native twins n0..n3 of the same random schema."""

    def __init__(self, rnd):
        self.con = connect()
        # SQLite 3.40's automatic index on a join key takes the key column's
        # collation, not the comparison's (see test_join_random): compare
        # with the answer it gives without one
        self.con.execute("PRAGMA automatic_index = OFF")
        self.rnd = rnd
        self.cols = {}
        sizes = [400, 120, 40, 15]
        for t in range(NTAB):
            decl = [("k1", rnd.choice(KEY_TYPES)), ("k2", rnd.choice(KEY_TYPES)),
                    ("v", rnd.choice(TEXT_TYPES)), ("w", rnd.choice(TEXT_TYPES)), ("r", "REAL")]
            self.cols[t] = decl
            body = ", ".join("%s %s" % c for c in decl)
            self.con.execute("CREATE VIRTUAL TABLE t%d USING csq(%s)" % (t, body))
            self.con.execute("CREATE TABLE n%d(%s)" % (t, body))
            dom = max(3, sizes[t] // 4)
            rows = [(key_value(rnd, dom), key_value(rnd, dom), text_value(rnd), text_value(rnd),
                     rnd.choice([None, rnd.randrange(100) / 4.0, rnd.randrange(-5, 5)]))
                    for _ in range(sizes[t])]
            self.con.execute("BEGIN")
            for name in ("t%d" % t, "n%d" % t):
                self.con.executemany("INSERT INTO %s VALUES(?,?,?,?,?)" % name, rows)
            self.con.execute("COMMIT")


def const(rnd, col):
    if col in ("k1", "k2", "r"):
        return repr(rnd.choice([rnd.randrange(20), rnd.randrange(20) + 0.5, float(rnd.randrange(20))]))
    return "'%s'" % rnd.choice(["a", "A", "b", "b ", "x1", "7"])


def filter_term(rnd, a):
    col = rnd.choice(["k1", "k2", "v", "w", "r"])
    op = rnd.choice(["=", "<", ">=", "<>", "BETWEEN", "IN", "IS NULL", "IS NOT NULL", "LIKE", "OR", "OR="])
    c = "%s.%s" % (a, col)
    if op in ("IS NULL", "IS NOT NULL"):
        return "%s %s" % (c, op)
    if op == "BETWEEN":
        return "%s BETWEEN %s AND %s" % (c, const(rnd, col), const(rnd, col))
    if op == "IN":
        return "%s IN (%s)" % (c, ", ".join(const(rnd, col) for _ in range(rnd.randint(1, 3))))
    if op == "LIKE":
        return "%s LIKE '%s'" % (c, rnd.choice(["a%", "x%", "%b"]))
    if op == "OR=":  # an OR of equalities on one column: pushed as IN
        return "(%s = %s OR %s = %s)" % (c, const(rnd, col), const(rnd, col), c)
    if op == "OR":
        return "(%s = %s OR %s IS NULL)" % (c, const(rnd, col), c)
    return "%s %s %s" % (c, op, const(rnd, col))


def residual_term(rnd, aliases):
    a, b = rnd.sample(aliases, 2)
    kind = rnd.randrange(4)
    if kind == 0:
        return "%s.%s < %s.%s" % (a, rnd.choice(["k1", "k2", "r"]), b, rnd.choice(["k1", "k2", "r"]))
    if kind == 1:
        return "%s.v = %s.w" % (a, b)
    if kind == 2:
        return "(%s.r > %s.k1 OR %s.v IS NULL)" % (a, b, b)
    return "%s.k1 + %s.k2 <> 3" % (a, b)


def statement(rnd, cols):
    """A random inner equi-join over tables {t0}..{t3} (columns cols): its
    text. GROUP BY keys, min() and max() avoid collated columns: which of
    'b' and 'b ' (RTRIM) shows for their group depends on row order."""
    n = rnd.randint(2, NTAB)
    tabs = rnd.sample(range(NTAB), n)
    aliases = ["x%d" % i for i in range(n)]
    frm, where = "{t%d} AS x0" % tabs[0], []
    for i in range(1, n):
        other = "x%d" % rnd.randrange(i)
        keys = ["%s.%s = %s.%s" % (other, rnd.choice(["k1", "k2"]), aliases[i], rnd.choice(["k1", "k2"]))
                for _ in range(rnd.choice([1, 1, 2]))]
        on = " AND ".join(dict.fromkeys(keys))
        style = rnd.randrange(4)
        if style == 3:  # the keys inside every branch of an OR (TPC-H Q19)
            frm += ", {t%d} AS x%d" % (tabs[i], i)
            where.append("((%s AND %s) OR (%s AND %s))" % (on, filter_term(rnd, aliases[i]), on,
                                                           filter_term(rnd, other)))
        elif style == 0:
            frm += ", {t%d} AS x%d" % (tabs[i], i)
            where.append(on)
        else:
            frm += " %s {t%d} AS x%d ON %s" % (rnd.choice(["JOIN", "INNER JOIN", "CROSS JOIN"]), tabs[i], i, on)
    for _ in range(rnd.randrange(4)):
        where.append(filter_term(rnd, rnd.choice(aliases)))
    if rnd.random() < 0.4:
        where.append(residual_term(rnd, aliases))
    w = (" WHERE " + " AND ".join(where)) if where else ""
    col = lambda: "%s.%s" % (rnd.choice(aliases), rnd.choice(["k1", "k2", "v", "w", "r"]))  # noqa: E731

    def plain():
        i = rnd.randrange(n)
        names = [c for c, t in cols[tabs[i]] if "COLLATE" not in t]
        return "%s.%s" % (aliases[i], rnd.choice(names))
    if rnd.random() < 0.5:
        g = plain()
        sql = "SELECT %s, count(*), count(%s), sum(%s), min(%s), max(%s), avg(%s) FROM %s%s GROUP BY %s" % (
            g, col(), "%s.r" % rnd.choice(aliases), plain(), plain(), "%s.k1" % rnd.choice(aliases), frm, w, g)
        if rnd.random() < 0.3:
            sql += " HAVING count(*) > %d" % rnd.randrange(3)
        if rnd.random() < 0.3:
            sql += " ORDER BY 2 DESC, 1 LIMIT %d" % rnd.randrange(1, 8)
        return sql
    limit = rnd.random() < 0.3  # then ties of 'b' and 'B' (NOCASE) could cut either
    cols = [plain() if limit else col() for _ in range(rnd.randint(1, 4))]
    sql = "SELECT %s FROM %s%s" % (", ".join(cols), frm, w)
    if limit:
        sql += " ORDER BY %s LIMIT %d" % (", ".join(str(i + 1) for i in range(len(cols))), rnd.randrange(1, 30))
    return sql


def answer(con, sql):
    try:
        return sorted(map(canon, con.execute(sql).fetchall())), None
    except Exception as e:  # noqa: BLE001 - compared with native's error
        return None, str(e)


def via_view(con, sql):
    con.execute("CREATE VIRTUAL TABLE temp.jq USING csq_query('%s')" % sql.replace("'", "''"))
    try:
        return answer(con, "SELECT * FROM jq")
    finally:
        con.execute("DROP TABLE temp.jq")


def explain(con, sql):
    return dict((p.strip(), d) for p, d in con.execute("SELECT part, detail FROM csq_explain(?)", (sql,)))


def same_as_native(con, mine, native, where):
    """The view of mine answers as native does (the same error, or rows)."""
    got, gerr = via_view(con, mine)
    want, werr = answer(con, native)
    ctx = "%s:\n  %s" % (where, mine)
    assert (gerr is None) == (werr is None), "%s\n  csq error %r, native error %r" % (ctx, gerr, werr)
    if "LIMIT" in mine and "ORDER BY 2 DESC" in mine:
        # ties in count(*) may cut other groups: compare the counts only
        got = sorted(r.split(",")[1] for r in got) if got else got
        want = sorted(r.split(",")[1] for r in want) if want else want
    assert got == want, "%s\n  csq %d rows %s\n  native %d rows %s" % (
        ctx, len(got), got[:4], len(want), want[:4])


def test_random_inner_equi_joins_equal_native():
    planned = total = 0
    for seed in range(10):
        rnd = random.Random(seed)
        db = Db(rnd)
        for step in range(80):
            sql = statement(rnd, db.cols)
            mine = sql.format(**{"t%d" % t: "t%d" % t for t in range(NTAB)})
            native = sql.format(**{"t%d" % t: "n%d" % t for t in range(NTAB)})
            same_as_native(db.con, mine, native, "seed %d step %d" % (seed, step))
            total += 1
            planned += explain(db.con, mine)["plan"].startswith("join")
        db.con.close()
    # keys join whatever affinity pair; only text in a key or a collated
    # column in the host part could refuse: most queries take the join path
    assert planned > total // 2, "%d of %d queries planned as joins" % (planned, total)
    print("%d of %d queries planned as joins" % (planned, total))


def make_pair(con, name, decl, rows, opts=""):
    con.execute("CREATE VIRTUAL TABLE %s USING csq(%s%s)" % (name, decl, opts))
    con.execute("CREATE TABLE n%s(%s)" % (name, decl))
    for t in (name, "n" + name):
        con.executemany("INSERT INTO %s VALUES(%s)" % (t, ",".join("?" * len(rows[0]))), rows)


def refused(con, text, why):
    """text over {a}, {b} is not planned as a join (csq_explain says why) and
    its view answers as native."""
    sql, native = text.format(a="a", b="b", t="t"), text.format(a="na", b="nb", t="nt")
    e = explain(con, sql)
    assert e["plan"] == "host" and why in e["why"], e
    got, gerr = via_view(con, sql)
    want, werr = answer(con, native)
    assert gerr is None and werr is None, (gerr, werr)
    assert got == want and got, (got, want)


def test_refused_shapes_still_answer_right():
    con = connect()
    make_pair(con, "a", "k INTEGER, s TEXT, v", [(i % 7, "s%d" % (i % 5), i) for i in range(200)])
    make_pair(con, "b", "k REAL, s TEXT, w", [(float(i), "s%d" % i, "w%d" % i) for i in range(6)])
    refused(con, "SELECT a.k, b.w FROM {a} AS a LEFT JOIN {b} AS b ON a.k = b.k AND a.v > 3",
            "the ON of a LEFT JOIN")
    # TEXT against INTEGER: SQLite converts the text, the hash join would not
    make_pair(con, "t", "t TEXT, u", [(str(i % 4), i) for i in range(8)])
    refused(con, "SELECT a.v, t.u FROM {a} AS a JOIN {t} AS t ON a.k = t.t", "do not connect")
    refused(con, "SELECT a.v, b.w FROM {a} AS a JOIN {b} AS b ON a.s = b.s COLLATE NOCASE",
            "do not connect")
    # TEXT against TEXT, both BINARY: a key
    sql = "SELECT a.v, b.w FROM {a} AS a JOIN {b} AS b ON a.s = b.s ORDER BY 1, 2"
    assert explain(con, sql.format(a="a", b="b"))["plan"].startswith("join")
    got, _ = via_view(con, sql.format(a="a", b="b"))
    want, _ = answer(con, sql.format(a="na", b="nb"))
    assert got == want and got, (got, want)
    refused(con, "SELECT count(*) FROM {a} AS a, {b} AS b", "do not connect")
    for star in ("*", "b.*, a.k", "a.*"):  # expanded as SQLite does, then joined
        sql = "SELECT %s FROM {a} AS a JOIN {b} AS b ON a.k = b.k ORDER BY 1, 2, 3" % star
        assert explain(con, sql.format(a="a", b="b"))["plan"].startswith("join")
        got, _ = via_view(con, sql.format(a="a", b="b"))
        want, _ = answer(con, sql.format(a="na", b="nb"))
        assert got == want and got, (star, got, want)
    # * leaves out a HIDDEN column: such a table keeps SELECT * with SQLite
    con.execute("CREATE VIRTUAL TABLE h USING csq(k INTEGER, secret INTEGER HIDDEN, v)")
    con.execute("INSERT INTO h(k, secret, v) VALUES(1, 2, 'x')")
    sql = "SELECT * FROM h JOIN {b} AS b ON h.k = b.k"
    assert "HIDDEN" in explain(con, sql.format(b="b"))["why"]
    assert via_view(con, sql.format(b="b")) == answer(con, sql.format(b="b"))
    con.execute("CREATE TABLE c(k INTEGER)")
    con.executemany("INSERT INTO c VALUES(?)", [(i,) for i in range(3)])
    e = explain(con, "SELECT count(*) FROM a JOIN c ON a.k = c.k")
    assert e["plan"] == "host" and "not a csq table" in e["why"], e
    got, _ = via_view(con, "SELECT count(*) FROM a JOIN c ON a.k = c.k")
    want, _ = answer(con, "SELECT count(*) FROM na JOIN c ON na.k = c.k")
    assert got == want, (got, want)


def test_build_side_over_the_budget_runs_as_sql():
    con = connect()
    make_pair(con, "a", "k INTEGER, s TEXT", [(i % 50, "s%d" % i) for i in range(2000)])
    make_pair(con, "b", "k INTEGER, t TEXT", [(i, "t" * (i % 40)) for i in range(300)])
    sql = "SELECT b.t, count(*) FROM a AS a JOIN b AS b ON a.k = b.k GROUP BY b.t"
    want, _ = answer(con, sql.replace("a AS", "na AS").replace("b AS", "nb AS"))
    assert explain(con, sql)["plan"].startswith("join")
    got, _ = via_view(con, sql)
    assert got == want
    old = con.execute("SELECT csq_probe_memory(100)").fetchone()[0]
    try:
        e = explain(con, sql)
        assert "100 bytes" in e["memory"], e
        got, _ = via_view(con, sql)
        assert got == want
    finally:
        con.execute("SELECT csq_probe_memory(?)", (old,))


def test_explain_shows_the_join_tree():
    con = connect()
    make_pair(con, "f", "k1 INTEGER, k2 INTEGER, x REAL", [(i % 20, i % 7, i / 3) for i in range(3000)])
    make_pair(con, "d1", "k INTEGER, name TEXT", [(i, "n%d" % i) for i in range(20)])
    make_pair(con, "d2", "k NUMERIC, cat TEXT", [(i, "c%d" % (i % 2)) for i in range(7)])
    sql = ("SELECT d1.name, sum(f.x) FROM f, d1, d2 WHERE f.k1 = d1.k AND f.k2 = d2.k AND d2.cat = 'c1' "
           "AND f.x > 10 AND d1.k < f.x - 5 GROUP BY d1.name ORDER BY 2 DESC")
    rows = con.execute("SELECT part, detail FROM csq_explain(?)", (sql,)).fetchall()
    parts = [p for p, _ in rows]
    assert parts[0] == "plan" and rows[0][1].startswith("join"), rows
    detail = dict((p.strip(), d) for p, d in rows)
    assert detail["scan (probe side)"].startswith("f on its device: 1 pushed filter"), rows
    assert sum(p.strip() == "scan (build side)" for p in parts) == 2, rows
    assert sum(p.strip() == "hash join" for p in parts) == 2, rows
    assert "1 residual" in detail["why"], rows
    assert "csq_jrows" in detail["host"], rows
    got, _ = via_view(con, sql)
    want, _ = answer(con, sql.replace("f,", "nf AS f,").replace("d1,", "nd1 AS d1,").replace(
        "d2 WHERE", "nd2 AS d2 WHERE"))
    assert got == want and got, (got, want)


def test_device_failure_mid_scan_is_the_statements_error():
    d = tmpdir()
    db = os.path.join(d, "j.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE f USING csq(k INTEGER, x REAL, rowgroup=1024)")
    con.execute("CREATE VIRTUAL TABLE g USING csq(k INTEGER, s TEXT)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO f VALUES(?, ?)", [(i % 30, i / 7) for i in range(8000)])
    con.executemany("INSERT INTO g VALUES(?, ?)", [(i, "s%d" % (i % 4)) for i in range(30)])
    con.execute("COMMIT")
    con.close()
    con = connect(db)  # reopen: reads reach the device
    sql = "SELECT g.s, sum(f.x) FROM f JOIN g ON f.k = g.k GROUP BY g.s"
    con.execute("CREATE VIRTUAL TABLE temp.jq USING csq_query('%s')" % sql)
    assert explain(con, sql)["plan"].startswith("join")
    want = con.execute("SELECT * FROM jq").fetchall()
    assert len(want) == 4
    for spec, msg in (("op=execute,nth=1,action=status:0x6", "Execute Program"),
                      ("op=execute,nth=2,action=status:0x6", "Internal Error")):
        con.execute("SELECT csq_fault(?)", (spec,))
        try:
            expect_error(lambda: con.execute("SELECT * FROM jq").fetchall(), msg)
        finally:
            con.execute("SELECT csq_fault(NULL)")
        assert sorted(con.execute("SELECT * FROM jq").fetchall()) == sorted(want)
    shutil.rmtree(d, ignore_errors=True)


def test_bench_queries_that_fit_take_the_join_path():
    """Over empty csq tables of bench/schema: which TPC-H and SSB queries the
    join planner takes, and which the one-table planner takes as a WITH
    table (tests/sql/test_tpch_ssb.py checks their answers)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import queries as Q
    want = {"tpch": {"Q2", "Q3", "Q4", "Q5", "Q7", "Q8", "Q9", "Q10", "Q11", "Q12", "Q13", "Q14", "Q16",
                     "Q17", "Q18", "Q19", "Q20", "Q21", "Q22"},
            "ssb": {q["name"] for q in Q.load("ssb")}}
    for suite in Q.SUITES:
        con = connect()
        for t, cols in Q.schema(suite).items():
            # pushdown='always': as at scale, where no table is too small to group on its device
            con.execute("CREATE VIRTUAL TABLE %s USING csq(%s, pushdown='always')"
                        % (t, ", ".join(" ".join(c) for c in cols)))
        plans = {q["name"]: explain(con, q["sql"])["plan"] for q in Q.load(suite)}
        got = {n for n, p in plans.items() if p.startswith("join")}
        assert got == want[suite], (suite, sorted(got ^ want[suite]))
        # Q15's WITH table, a GROUP BY of lineitem, runs on the device first
        derived = {n for n, p in plans.items() if p == "derived: device+host"}
        assert derived == ({"Q15"} if suite == "tpch" else set()), (suite, derived)


def test_join_filter_keeps_rows_that_cannot_join_on_the_device():
    con = connect()
    make_pair(con, "f", "k INTEGER, x REAL", [(i % 1000, i / 3) for i in range(20000)], ", rowgroup=2048")
    make_pair(con, "d", "k REAL, name TEXT", [(float(i), "n%d" % (i % 7)) for i in range(1000)])
    sql = "SELECT d.name, count(*), sum(f.x) FROM {f} AS f JOIN {d} AS d ON f.k = d.k WHERE d.k < 10 GROUP BY d.name"
    e = explain(con, sql.format(f="f", d="d"))
    assert e["join filter"].startswith("f.k IN (the distinct d.k of d's rows)"), e

    def to_host(q):
        before = stats(con)["bytes_to_host"]
        rows = con.execute(q).fetchall()
        return stats(con)["bytes_to_host"] - before, rows
    scan, _ = to_host("SELECT k, x FROM f")
    con.execute("CREATE VIRTUAL TABLE temp.jq USING csq_query('%s')" % sql.format(f="f", d="d").replace("'", "''"))
    joined, got = to_host("SELECT * FROM jq")
    want = con.execute(sql.format(f="nf", d="nd")).fetchall()
    assert sorted(map(canon, got)) == sorted(map(canon, want)) and got
    # 10 of 1000 keys join: the probe side sends about 1% of its rows
    assert joined * 10 < scan, (joined, scan)


def test_striped_tables_join_on_every_member():
    d = tmpdir()
    con = connect(os.path.join(d, "s.db"))
    devs = ",".join(os.path.join(d, "m%d.csd" % i) for i in range(3))
    make_pair(con, "f", "k INTEGER, x REAL", [(i % 97, i / 5) for i in range(9000)],
              ", devices='%s', rowgroup=1000" % devs)
    make_pair(con, "g", "k NUMERIC, s TEXT", [(i, "s%d" % (i % 6)) for i in range(0, 97, 2)])
    sql = "SELECT g.s, count(*), sum(f.x) FROM {f} AS f, {g} AS g WHERE f.k = g.k AND f.x > 100 GROUP BY g.s"
    e = explain(con, sql.format(f="f", g="g"))
    assert e["plan"].startswith("join") and "member devices" in e["scan (probe side)"], e
    got, _ = via_view(con, sql.format(f="f", g="g"))
    want, _ = answer(con, sql.format(f="nf", g="ng"))
    assert got == want and len(got) == 3, (got, want)
    con.close()
    shutil.rmtree(d, ignore_errors=True)


def test_integer_primary_key_joins_as_the_rowid():
    con = connect()
    make_pair(con, "p", "id INTEGER PRIMARY KEY, name TEXT", [(i * 3, "p%d" % i) for i in range(50)])
    make_pair(con, "c", "pid REAL, v INTEGER", [(float(i % 160), i) for i in range(900)] + [(None, 1)])
    sql = ("SELECT p.name, p.id, count(*), sum(c.v) FROM {c} AS c JOIN {p} AS p ON c.pid = p.id "
           "WHERE p.id < 100 GROUP BY p.id ORDER BY p.id")
    assert explain(con, sql.format(c="c", p="p"))["plan"].startswith("join")
    got, _ = via_view(con, sql.format(c="c", p="p"))
    want, _ = answer(con, sql.format(c="nc", p="np"))
    assert got == want and len(got) == 34, (got, want)


def test_bloom_join_filter_past_the_in_list():
    """A build side with more distinct keys than an IN list holds (4096)
    sends a Bloom filter of them into the probe side's scan: integers,
    integral reals and fractional reals as keys, NULLs never joining."""
    con = connect()
    rows_f = [((i % 40000) if i % 5 else float(i % 40000), i % 9) for i in range(60000)]
    rows_f += [(None, 1), (0.5, 2), (7.25, 3)]
    make_pair(con, "f", "k REAL, x INTEGER", rows_f, ", rowgroup=4096")
    rows_d = [(i * 4 if i % 3 else float(i * 4), "n%d" % (i % 5)) for i in range(5000)]
    rows_d += [(None, "z"), (7.25, "q")]
    make_pair(con, "d", "k NUMERIC, name TEXT", rows_d)
    sql = "SELECT d.name, count(*), sum(f.x) FROM {f} AS f JOIN {d} AS d ON f.k = d.k GROUP BY d.name"
    con.execute("CREATE VIRTUAL TABLE temp.jq USING csq_query('%s')" % sql.format(f="f", d="d"))
    before = stats(con)["bytes_to_host"]
    got = con.execute("SELECT * FROM jq").fetchall()
    joined = stats(con)["bytes_to_host"] - before
    want = con.execute(sql.format(f="nf", d="nd")).fetchall()
    assert sorted(map(canon, got)) == sorted(map(canon, want)) and len(got) == 6, (got, want)
    def to_host(q):
        before = stats(con)["bytes_to_host"]
        con.execute(q).fetchall()
        return stats(con)["bytes_to_host"] - before
    # every row through a device program, as the join reads them without a filter
    probe, build = to_host("SELECT k, x FROM f WHERE x > -1"), to_host("SELECT k, name FROM d")
    # 5001 of 40000 keys join: about an eighth of the probe side's rows,
    # plus the filter's false positives, leave the device
    assert joined - build < probe / 3, (joined, build, probe)


def test_integer_keys_past_the_in_list_filter_exactly():
    """Integer keys past the IN list (integral reals among them), within a
    span a bitmap covers, filter the probe side's scan exactly: only the
    rows that join leave the device. A probe value that is TEXT, a BLOB,
    NULL or a fractional real never passes; 8.0 passes for the key 8;
    keys at the ends of the span pass. A fractional key among them (a
    Bloom filter then) gives the same answers."""
    con = connect()
    rnd = random.Random(91)
    rows_f = [((i % 40000) if i % 5 else float(i % 40000), i % 9) for i in range(60000)]
    rows_f += [(None, 1), (0.5, 2), (8.5, 3), ("abc", 4), ("8", 5), (b"\x08", 6), (19996, 7),
               (-4, 8), (20000, 9), (4.0, 1), (2 ** 62, 2), (7.25, 4)]
    rnd.shuffle(rows_f)
    make_pair(con, "f", "k REAL, x INTEGER", rows_f, ", rowgroup=4096")
    for frac in (False, True):
        rows_d = [(i * 4 if i % 3 else float(i * 4), "n%d" % (i % 5)) for i in range(5000)]
        rows_d += [(None, "z")] + ([(7.25, "q")] if frac else [])
        con.execute("DROP TABLE IF EXISTS d")
        con.execute("DROP TABLE IF EXISTS nd")
        make_pair(con, "d", "k NUMERIC, name TEXT", rows_d)
        sql = ("SELECT d.name, count(*), sum(f.x), min(f.k), max(f.k) FROM {f} AS f JOIN {d} AS d "
               "ON f.k = d.k GROUP BY d.name")
        con.execute("CREATE VIRTUAL TABLE temp.jq USING csq_query('%s')" % sql.format(f="f", d="d"))
        before = stats(con)["rows_returned"]
        got = con.execute("SELECT * FROM jq").fetchall()
        returned = stats(con)["rows_returned"] - before
        con.execute("DROP TABLE temp.jq")
        want = con.execute(sql.format(f="nf", d="nd")).fetchall()
        assert sorted(map(canon, got)) == sorted(map(canon, want)), (got, want)
        assert len(got) == 5 + frac
        joins = con.execute("SELECT count(*) FROM nf WHERE k IN (SELECT k FROM nd)").fetchone()[0]
        if not frac:
            # the build side's rows (the NULL key's too) and exactly the
            # probe rows that join
            assert returned == len(rows_d) + joins, (returned, len(rows_d), joins)
        else:
            assert returned >= len(rows_d) + joins, (returned, len(rows_d), joins)


def test_an_or_implies_filters_on_each_table():
    """TPC-H Q7's (n1 = A AND n2 = B) OR (n1 = B AND n2 = A): each nation
    scan gets n_name IN (A, B) on its device, the OR stays for SQLite; an OR
    where one branch does not name the column implies nothing, and a NOCASE
    column's implied filter is dropped, not handed to SQLite."""
    con = connect()
    names = ["FRANCE", "GERMANY", "france", "PERU", None, 7, "GERMANY "]
    make_pair(con, "nat", "k INTEGER, name TEXT, ci TEXT COLLATE NOCASE", [
        (i, names[i % len(names)], names[(i + 3) % len(names)]) for i in range(40)])
    make_pair(con, "sup", "mk INTEGER, nk INTEGER, v REAL", [(i % 40, i % 45, i / 3.0) for i in range(3000)])
    cases = [
        ("SELECT a.name, b.name, count(*), sum(s.v) FROM {sup} s, {nat} a, {nat} b WHERE s.nk = a.k AND "
         "s.mk = b.k AND ((a.name = 'FRANCE' AND b.name = 'GERMANY') OR (a.name = 'GERMANY' AND "
         "b.name IN ('FRANCE', 7))) GROUP BY 1, 2", 2),
        ("SELECT count(*) FROM {sup} s, {nat} a WHERE s.nk = a.k AND (a.name = 'FRANCE' OR s.v > 900)", 0),
        ("SELECT count(*), sum(s.v) FROM {sup} s, {nat} a WHERE s.nk = a.k AND (a.ci = 'france' OR "
         "a.ci = 'PERU')", 0),
    ]
    for text, n_pushed in cases:
        sql, native = text.format(sup="sup", nat="nat"), text.format(sup="nsup", nat="nnat")
        e = explain(con, sql)
        assert e["plan"].startswith("join"), e
        pushed = sum(1 for p, d in con.execute("SELECT part, detail FROM csq_explain(?)", (sql,))
                     if "AS a on" in d or "AS b on" in d or d.startswith("nat on")
                     if "1 pushed filter" in d)
        assert pushed == n_pushed, (text, pushed, list(con.execute("SELECT * FROM csq_explain(?)", (sql,))))
        got, want = via_view(con, sql), answer(con, native)
        assert got == want and want[0], (text, got, want)


def test_join_filters_through_equal_keys():
    """a.k = b.k AND c.k = b.k: c's keys filter a's scan too (the keys are
    equal in every joined row), never through a LEFT JOIN's keys. Keys
    with NULLs, INTEGERs and REALs that equal them (4 = 4.0), TEXT that
    never equals a number; answers as native tables, in every shape."""
    con = connect()
    rnd = random.Random(57)
    keys = [None, 1, 2, 3, 4, 4.0, 5.5, "4", 7, 8, 9, 10, 11, 12]
    for name, n in (("a", 900), ("b", 300), ("c", 40)):
        con.execute("CREATE VIRTUAL TABLE %s USING csq(k NUMERIC, v INTEGER, pushdown='always')" % name)
        con.execute("CREATE TABLE n%s(k NUMERIC, v INTEGER)" % name)
        rows = [(rnd.choice(keys), rnd.randrange(100)) for _ in range(n)]
        for t in (name, "n" + name):
            con.executemany("INSERT INTO %s VALUES(?,?)" % t, rows)
    shapes = [
        "SELECT a.v, b.v, c.v FROM {a} AS a, {b} AS b, {c} AS c WHERE a.k = b.k AND c.k = b.k AND c.v < 30",
        "SELECT count(*), sum(a.v) FROM {a} AS a JOIN {b} AS b ON a.k = b.k JOIN {c} AS c ON b.k = c.k "
        "WHERE c.v % 3 = 0",
        "SELECT a.v, c.v FROM {a} AS a JOIN {b} AS b ON a.k = b.k LEFT JOIN {c} AS c ON c.k = b.k AND c.v < 20",
        "SELECT b.k, count(*) FROM {a} AS a, {b} AS b, {c} AS c WHERE b.k = a.k AND c.k = a.k AND b.v < 50 "
        "GROUP BY 1",
    ]
    via = 0
    for q in shapes:
        mine, native = q.format(a="a", b="b", c="c"), q.format(a="na", b="nb", c="nc")
        same_as_native(con, mine, native, "equal keys")
        e = [d for p, d in con.execute("SELECT part, detail FROM csq_explain(?)", (mine,))
             if p.strip() == "join filter"]
        via += any("keys that join them are equal" in d for d in e)
        if "LEFT JOIN" in q:
            assert not any("of c's rows" in d for d in e), e
    assert via >= 2, via


def test_text_read_across_refilters_of_a_view():
    """The rows of a planned join are handed to SQLite without copying
    their TEXT and BLOB values; what leaves the view is copied, so an
    outer query that keeps values while the view runs again for its next
    row (a parameter from a table) gets them intact (ASan checks too)."""
    con = connect()
    for name in ("a", "b"):
        con.execute("CREATE VIRTUAL TABLE %s USING csq(k INTEGER, t TEXT, x BLOB, pushdown='always')" % name)
        con.execute("CREATE TABLE n%s(k INTEGER, t TEXT, x BLOB)" % name)
    rnd = random.Random(61)
    rows = [(rnd.randrange(30), "text-%d-%s" % (i, "z" * rnd.randrange(40)), bytes([i % 256]) * rnd.randrange(20))
            for i in range(600)]
    for t in ("a", "na", "b", "nb"):
        con.executemany("INSERT INTO %s VALUES(?,?,?)" % t, rows)
    con.execute("CREATE TABLE p(k INTEGER)")
    con.executemany("INSERT INTO p VALUES(?)", [(k,) for k in range(0, 30, 2)])
    q = "SELECT a.t AS t, b.x AS x, a.k AS k FROM {a} AS a JOIN {b} AS b ON a.k = b.k WHERE a.k < ?1"
    con.execute("CREATE VIRTUAL TABLE temp.jv USING csq_query('%s')" % q.format(a="a", b="b").replace("'", "''"))
    e = explain(con, q.format(a="a", b="b"))
    assert e["plan"].startswith("join"), e
    got = con.execute("SELECT p.k, max(v.t), min(v.x), count(*) FROM p, jv(p.k) AS v GROUP BY p.k").fetchall()
    want = con.execute("SELECT p.k, max(a.t), min(b.x), count(*) FROM p, na AS a JOIN nb AS b ON a.k = b.k "
                       "WHERE a.k < p.k GROUP BY p.k").fetchall()
    assert got == want, (got[:3], want[:3])
    got = con.execute("SELECT max(v.t) || '/' || min(v.t), group_concat(hex(v.x)) IS NOT NULL "
                      "FROM p, jv(p.k) AS v").fetchall()
    want = con.execute("SELECT max(a.t) || '/' || min(a.t), group_concat(hex(b.x)) IS NOT NULL "
                       "FROM p, na AS a JOIN nb AS b ON a.k = b.k WHERE a.k < p.k").fetchall()
    assert got == want, (got, want)
