"""Derived tables over a join (planner/derived.c, vtab/query.c plan_derived):
"SELECT ... FROM (SELECT ... FROM a, b WHERE ...) AS x ..." runs the inner
join hashed through the join planner and the outer query in SQLite over
its rows.

TPC-H Q7, Q8 and Q9 at SF 0.01 through csq_query views equal native
answers (bench/answers.py's rules) and csq_explain shows them planned. A
differential test of random derived queries over csq tables with NULLs and
mixed storage classes (test_join_plan's tables: random inner joins and
filters inside, outer WHERE, GROUP BY, ORDER BY, LIMIT, references to
unaliased columns by the names SQLite gives them) equals the same SQL over
native tables, and most of it is planned. The shapes the planner must
refuse (a LEFT JOIN's ON over its preserved side, parameters, a native table, a * or duplicate
names inside, a join or compound outside) answer as native does.
"""
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import shutil

from harness import EXT, Skip, connect
from test_join_plan import NTAB, Db, answer, const, explain, filter_term, make_pair, residual_term, via_view

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("CSQ_BUILD", os.path.join(ROOT, "build"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import answers  # noqa: E402
import queries as Q  # noqa: E402

DERIVED = ("Q7", "Q8", "Q9")
_state = {}


def tpch():
    """TPC-H at SF 0.01, native (indexed on the join keys, as
    test_tpch_ssb.py does, so the reference comes fast) and csq."""
    if _state:
        return _state
    gen = os.path.join(BUILD, "bench", "gen")
    if not os.path.exists(gen):
        raise Skip("%s is not built (make bench-bin)" % gen)
    work = tempfile.mkdtemp(prefix="csq-test-derived-")
    native, csq = os.path.join(work, "native.db"), os.path.join(work, "csq.db")
    subprocess.run([gen, "tpch", "0.01", native, "--quiet"], check=True, stdout=subprocess.DEVNULL, timeout=300)
    subprocess.run([gen, "tpch", "0.01", csq, "--csq", EXT, "--quiet"], check=True, stdout=subprocess.DEVNULL,
                   timeout=300)
    con = sqlite3.connect(native)
    for i, on in enumerate(["lineitem(l_orderkey)", "lineitem(l_partkey, l_suppkey)", "orders(o_orderkey)",
                            "partsupp(ps_partkey, ps_suppkey)", "part(p_partkey)", "supplier(s_suppkey)",
                            "customer(c_custkey)"]):
        con.execute("CREATE INDEX ref_%d ON %s" % (i, on))
    con.commit()
    con.close()
    _state.update(work=work, native=native, csq=csq,
                  exact={c for cs in Q.schema("tpch").values() for c, _ in cs},
                  queries={q["name"]: q for q in Q.load("tpch") if q["name"] in DERIVED})
    return _state


def test_tpch_q7_q8_q9_through_views_equal_native():
    st = tpch()
    assert sorted(st["queries"]) == sorted(DERIVED), st["queries"].keys()
    ref = sqlite3.connect(st["native"])
    con = connect(st["csq"])
    for name in DERIVED:
        sql = st["queries"][name]["sql"]
        e = explain(con, sql)
        assert e["plan"].startswith("join") and e["why"].startswith("a derived table over a hash join"), (name, e)
        assert "csq_jrows" in e["host"] and "FROM (SELECT" in e["host"], (name, e["host"])
        cur = ref.execute(sql)
        want, cols = cur.fetchall(), [d[0] for d in cur.description]
        assert want, "%s answers no rows at SF 0.01: nothing compared" % name
        con.execute("CREATE VIRTUAL TABLE temp.q USING csq_query('%s')" % sql.replace("'", "''"))
        try:
            cur = con.execute("SELECT * FROM q")
            got = cur.fetchall()
            assert [d[0] for d in cur.description] == cols, (name, cur.description, cols)
        finally:
            con.execute("DROP TABLE temp.q")
        d = answers.diff([list(r) for r in want], [list(r) for r in got], cols, Q.order_by(sql),
                         Q.has_order_by(sql), exact_names=st["exact"], strict_types=True)
        assert d is None, "%s through a view answers differently from native: %s" % (name, d)
    con.close()
    ref.close()


def test_tpch_derived_rows_come_through_the_join():
    """The view reads its rows through the hash join: the device scans
    return the probe side's filtered rows, far fewer bytes than the
    columns the query names (Q7's l_shipdate filter keeps about 30%)."""
    st = tpch()
    con = connect(st["csq"])
    sql = st["queries"]["Q7"]["sql"]
    con.execute("CREATE VIRTUAL TABLE temp.q USING csq_query('%s')" % sql.replace("'", "''"))
    before = dict(con.execute("SELECT name, value FROM csq_stats").fetchall())
    rows = con.execute("SELECT * FROM q").fetchall()
    after = dict(con.execute("SELECT name, value FROM csq_stats").fetchall())
    assert rows
    moved = after["bytes_to_host"] - before["bytes_to_host"]
    n = con.execute("SELECT count(*) FROM lineitem").fetchone()[0]
    # four lineitem columns of 8 bytes at least, every row: what a host scan would move
    assert 0 < moved < n * 8 * 4, (moved, n)
    con.close()


class Gen:
    """A random derived query over test_join_plan's tables {t0}..{t3}."""

    def __init__(self, rnd, cols):
        self.rnd, self.cols = rnd, cols

    def plain_cols(self, t):
        return [c for c, ty in self.cols[t] if "COLLATE" not in ty]

    def inner(self):
        """(inner SELECT text, [(outer name, may group/order by it)])."""
        rnd = self.rnd
        n = rnd.randint(2, NTAB)
        tabs = rnd.sample(range(NTAB), n)
        aliases = ["x%d" % i for i in range(n)]
        frm, where = "{t%d} AS x0" % tabs[0], []
        for i in range(1, n):
            other = "x%d" % rnd.randrange(i)
            on = " AND ".join(dict.fromkeys(
                "%s.%s = %s.%s" % (other, rnd.choice(["k1", "k2"]), aliases[i], rnd.choice(["k1", "k2"]))
                for _ in range(rnd.choice([1, 1, 2]))))
            if rnd.random() < 0.5:
                frm += ", {t%d} AS x%d" % (tabs[i], i)
                where.append(on)
            else:
                frm += " %s {t%d} AS x%d ON %s" % (rnd.choice(["JOIN", "INNER JOIN"]), tabs[i], i, on)
        for _ in range(rnd.randrange(3)):
            where.append(filter_term(rnd, rnd.choice(aliases)))
        if rnd.random() < 0.3:
            where.append(residual_term(rnd, aliases))
        items, names, used = [], [], set()
        for k in range(rnd.randint(2, 5)):
            i = rnd.randrange(n)
            col = rnd.choice(["k1", "k2", "v", "w", "r"])
            plain = col in self.plain_cols(tabs[i])
            ref = "%s.%s" % (aliases[i], col)
            kind = rnd.random()
            if kind < 0.2 and col not in used:  # unaliased: named by its column
                items.append(ref)
                names.append((col, plain))
                used.add(col)
            elif kind < 0.3 and col in ("k1", "k2", "r"):  # unaliased expression: named by its text
                text = "%s + %d" % (ref, k)
                items.append(text)
                names.append(('"%s"' % text, False))
            elif kind < 0.45 and col in ("k1", "k2", "r"):
                items.append("%s * 2 - %s.k1 AS c%d" % (ref, rnd.choice(aliases), k))
                names.append(("c%d" % k, False))
            else:
                items.append("%s AS c%d" % (ref, k))
                names.append(("c%d" % k, plain))
        w = (" WHERE " + " AND ".join(where)) if where else ""
        if rnd.random() < 0.4:  # grouped inside: csq's host engine may group the joined rows
            # keys and min/max over BINARY columns: under NOCASE or RTRIM the
            # value a group shows among equal ones depends on the row order
            items, names, keys = [], [], []
            for k in range(rnd.randint(1, 2)):
                i = rnd.randrange(n)
                keys.append("%s.%s" % (aliases[i], rnd.choice(self.plain_cols(tabs[i]))))
                items.append("%s AS g%d" % (keys[-1], k))
                names.append(("g%d" % k, True))
            for k in range(rnd.randint(1, 3)):
                i = rnd.randrange(n)
                ref = "%s.%s" % (aliases[i], rnd.choice(self.plain_cols(tabs[i])))
                fn = rnd.choice(["count(*)", "count(%s)", "sum(%s)", "total(%s)", "min(%s)", "max(%s)",
                                 "avg(%s)"])
                items.append("%s AS a%d" % (fn.replace("%s", ref), k))
                names.append(("a%d" % k, True))
            h = " HAVING count(*) > %d" % rnd.randrange(3) if rnd.random() < 0.3 else ""
            return "SELECT %s FROM %s%s GROUP BY %s%s" % (", ".join(items), frm, w, ", ".join(keys),
                                                          h), names
        return "SELECT %s FROM %s%s" % (", ".join(items), frm, w), names

    def statement(self):
        rnd = self.rnd
        inner, names = self.inner()
        alias = rnd.choice(["AS d", "d", ""])
        q = lambda nm: ("d." + nm) if alias and rnd.random() < 0.3 else nm  # noqa: E731
        where = ""
        if rnd.random() < 0.5:
            nm = rnd.choice(names)[0]
            where = " WHERE %s %s" % (q(nm), rnd.choice(["IS NOT NULL", "> 3", "< 'b'", "<> 2", "> '3'",
                                                        "= '4'"]))
        plain = [nm for nm, p in names if p]
        shape = rnd.random()
        if shape < 0.5 and plain:
            g = rnd.choice(plain)
            a = rnd.choice(names)[0]
            sql = "SELECT %s, count(*), count(%s), sum(%s), total(%s) FROM (%s) %s%s GROUP BY %s" % (
                q(g), q(a), q(rnd.choice(names)[0]), q(a), inner, alias, where, q(g))
            if rnd.random() < 0.3:
                sql += " HAVING count(*) > %d" % rnd.randrange(3)
            sql += " ORDER BY 1"
            return sql
        if shape < 0.7 and plain:
            cols = ", ".join(q(nm) for nm in plain)
            return "SELECT DISTINCT %s FROM (%s) %s%s ORDER BY %s LIMIT %d" % (
                cols, inner, alias, where, ", ".join(str(i + 1) for i in range(len(plain))), rnd.randrange(1, 20))
        return "SELECT * FROM (%s) %s%s" % (inner, alias, where)


def test_random_derived_queries_equal_native():
    planned = total = engine = 0
    for seed in range(5):
        rnd = random.Random(1000 + seed)
        db = Db(rnd)
        gen = Gen(rnd, db.cols)
        for step in range(60):
            sql = gen.statement()
            mine = sql.format(**{"t%d" % t: "t%d" % t for t in range(NTAB)})
            native = sql.format(**{"t%d" % t: "n%d" % t for t in range(NTAB)})
            got, gerr = via_view(db.con, mine)
            want, werr = answer(db.con, native)
            ctx = "seed %d step %d:\n  %s" % (seed, step, mine)
            assert (gerr is None) == (werr is None), "%s\n  csq error %r, native error %r" % (ctx, gerr, werr)
            assert got == want, "%s\n  csq %d rows %s\n  native %d rows %s" % (
                ctx, len(got), got[:4], len(want), want[:4])
            total += 1
            e = explain(db.con, mine)
            if e["plan"].startswith("join"):
                planned += 1
                assert e["why"].startswith("a derived table over a hash join"), (ctx, e)
                engine += e.get("host aggregation", "").startswith("instead")
        db.con.close()
    assert total >= 300
    # only text or collated keys refuse (as in test_join_plan): most are planned
    assert planned > total // 2, "%d of %d derived queries planned" % (planned, total)
    # and grouped inner SELECTs are grouped in the host engine
    assert engine >= 20, "%d derived queries grouped in csq's host engine" % engine
    print("%d of %d derived queries planned, %d grouped in the host engine" % (planned, total, engine))


def pair_db():
    con = connect()
    make_pair(con, "a", "k INTEGER, s TEXT, v", [(i % 7, "s%d" % (i % 5), i if i % 9 else None) for i in range(200)])
    make_pair(con, "b", "k REAL, s TEXT, w", [(float(i), "s%d" % i, "w%d" % i) for i in range(6)])
    return con


def same(con, text, planned, why=None, params=()):
    """text over {a}, {b}: through a view (with params as its hidden
    columns) equal to native; csq_explain says planned or not (and why)."""
    sql, native = text.format(a="a", b="b"), text.format(a="na", b="nb")
    e = explain(con, sql)
    assert e["plan"].startswith("join") == planned, (sql, e)
    if why:
        assert why in e["why"], (sql, e)
    con.execute("CREATE VIRTUAL TABLE temp.dq USING csq_query('%s')" % sql.replace("'", "''"))
    try:
        args = "(%s)" % ", ".join("?" * len(params)) if params else ""
        got = sorted(map(repr, con.execute("SELECT * FROM dq%s" % args, params).fetchall()))
    finally:
        con.execute("DROP TABLE temp.dq")
    want = sorted(map(repr, con.execute(native, params).fetchall()))
    assert got == want and got, (sql, got, want)


def test_grouped_inner_join_in_the_host_engine_keeps_affinities():
    """A derived table whose join is grouped (TPC-H Q13's counts per
    customer) is grouped in csq's host engine and the outer statement reads
    the merged groups with the inner columns' affinities: an INTEGER key
    against '3' compares as a number, a TEXT key against 5 as text."""
    con = pair_db()
    make_pair(con, "c", "k INTEGER, s TEXT", [(i % 11, str(i % 13)) for i in range(300)])
    cases = [
        "SELECT g, n FROM (SELECT a.k AS g, count(*) AS n FROM {a} AS a, {b} AS b WHERE a.k = b.k "
        "GROUP BY a.k) WHERE g > '3'",
        "SELECT g, n FROM (SELECT c.s AS g, count(*) AS n FROM {a} AS a, {c} AS c WHERE a.k = c.k "
        "GROUP BY c.s) WHERE g > 5 AND g <> '7'",
        "SELECT g, t FROM (SELECT c.k AS g, total(a.v) AS t, max(c.s) AS m FROM {c} AS c JOIN {a} AS a "
        "ON a.k = c.k GROUP BY c.k) AS d WHERE m = '12' OR g = '2'",
        "SELECT n, count(*) AS cnt FROM (SELECT c.k, count(a.v) AS n FROM {c} AS c LEFT JOIN {a} AS a "
        "ON a.k = c.k AND a.s <> 's1' GROUP BY c.k) AS x GROUP BY n ORDER BY cnt DESC, n DESC",
    ]
    for text in cases:
        sql = text.format(a="a", b="b", c="c")
        e = explain(con, sql)
        assert e["plan"].startswith("join"), (sql, e)
        assert e.get("host aggregation", "").startswith("instead"), (sql, e)
        native = text.format(a="na", b="nb", c="nc")
        got, want = via_view(con, sql), answer(con, native)
        assert got == want and want[0], (sql, got, want)


def test_refused_shapes_fall_back_and_answer_right():
    con = pair_db()
    inner = "SELECT a.k AS k, a.v AS v, b.w FROM {a} AS a %s {b} AS b ON a.k = b.k"
    same(con, "SELECT w, sum(v) FROM (%s) AS x GROUP BY w" % (inner % "JOIN"), True, "a derived table over a hash")
    same(con, "SELECT w, count(*) FROM (%s) AS x GROUP BY w" % (inner % "LEFT JOIN"), True,
         "a derived table over a hash")
    same(con, "SELECT w, count(*) FROM (%s AND a.v > 3) AS x GROUP BY w" % (inner % "LEFT JOIN"), False,
         "the ON of a LEFT JOIN")
    # parameters: ?N, ?, :x, @x and $x in the inner or the outer query
    for p in ("?1", "?", ":lim", "@lim", "$lim"):
        same(con, "SELECT w, sum(v) FROM (%s WHERE a.v > %s) AS x GROUP BY w" % (inner % "JOIN", p), False,
             params=(50,))
        same(con, "SELECT w, sum(v) FROM (%s) AS x WHERE v > %s GROUP BY w" % (inner % "JOIN", p), False,
             params=(50,))
    # a native table inside
    con.execute("CREATE TABLE c(k INTEGER, z TEXT)")
    con.executemany("INSERT INTO c VALUES(?, ?)", [(i, "z%d" % i) for i in range(5)])
    same(con, "SELECT z, count(*) FROM (SELECT c.z, a.v FROM {a} AS a JOIN c ON a.k = c.k) GROUP BY z", False,
         "not a csq table")
    # a * or two columns of one name inside: SQLite names them, csq leaves them
    same(con, "SELECT count(*), sum(v) FROM (SELECT * FROM {a} AS a JOIN {b} AS b ON a.k = b.k) AS x", False,
         "*")
    same(con, "SELECT count(*) FROM (SELECT a.s, b.s FROM {a} AS a JOIN {b} AS b ON a.k = b.k) AS x", False,
         "two of its columns are named s")
    # the derived table joined, or in a compound: not the shape
    same(con, "SELECT x.w, b.s FROM (%s) AS x, {b} AS b WHERE x.k = b.k" % (inner % "JOIN"), False)
    same(con, "SELECT w FROM (%s) AS x UNION SELECT s FROM {b}" % (inner % "JOIN"), False)
    # a derived table over one table: not a join
    same(con, "SELECT s, count(*) FROM (SELECT s, v FROM {a} WHERE v > 10) GROUP BY s", False)


def test_outer_query_sees_the_names_sqlite_gives():
    """Unaliased inner columns keep the names SQLite gives them: a column
    its name (under COLLATE too), an expression its text, true/false
    columnN; the outer query and the view's column names see the same."""
    con = pair_db()
    text = ("SELECT \"a.v + 1\", s, column3, upper(w) FROM (SELECT a.v + 1, a.s COLLATE NOCASE, true, b.w "
            "FROM {a} AS a, {b} AS b WHERE a.k = b.k AND a.v IS NOT NULL) WHERE s >= 'S2' ORDER BY 1")
    same(con, text, True)
    sql = text.format(a="a", b="b")
    con.execute("CREATE VIRTUAL TABLE temp.nq USING csq_query('%s')" % sql.replace("'", "''"))
    cols = [d[0] for d in con.execute("SELECT * FROM nq").description]
    want = [d[0] for d in con.execute(text.format(a="na", b="nb")).description]
    assert cols == want, (cols, want)
    # the NOCASE collation of the inner column still decides the outer filter
    rows = con.execute("SELECT DISTINCT s FROM nq ORDER BY 1").fetchall()
    assert [r[0] for r in rows] == ["s2", "s3", "s4"], rows


def test_parentheses_in_strings_comments_and_names_do_not_count():
    """The derived table is found by tokens: a ')' or '(' inside a string,
    a blob, a comment or a quoted name neither ends nor opens it."""
    con = pair_db()
    text = ("SELECT \"w(\", count(*) /* ) FROM ( */ FROM ( -- ) (\n"
            "SELECT b.w AS \"w(\", a.v AS [v)], x'29' AS bl FROM {a} AS a, {b} AS b "
            "WHERE a.k = b.k AND b.w <> 'w)(' AND a.s <> ')' ) AS `d)` "
            "WHERE \"v)\" > 20 OR bl = x'28' GROUP BY 1 ORDER BY 1;")
    same(con, text, True)
    # a trailing ";" and blanks end the statement; a second statement is not the shape
    same(con, "SELECT count(*) FROM (SELECT a.v FROM {a} AS a, {b} AS b WHERE a.k = b.k) AS d "
         "WHERE v > 1; ", True)
    e = explain(con, "SELECT count(*) FROM (SELECT a.v FROM a, b WHERE a.k = b.k) AS d; SELECT 1")
    assert e["plan"] == "host", e


def test_zz_cleanup():
    if _state.get("work"):
        shutil.rmtree(_state["work"], ignore_errors=True)
