"""Subqueries run through the planner first (planner/join.c, jp_value_sub
and jp_sub_values; vtab/query.c, run_value and q_rows), and correlated
scalar subqueries over a query of one table.

Uncorrelated scalar subqueries of a join's host part:

"(SELECT agg ... FROM ...)" with one aggregate row and a result with no
affinity or collation becomes a parameter of the host part, bound to the
value the subquery gives as a query of its own; one over the query's own
FROM and WHERE (TPC-H Q11's HAVING) is computed by SQLite over the joined
rows instead, after the host part's own terms. Random
joins with such subqueries in WHERE, HAVING, the select list and IN lists,
over keys and values of mixed classes with NULLs, must answer as native.
Subqueries whose result has an affinity (a bare column, CAST) or that feed
IN / EXISTS stay SQLite's; one that fails when run first leaves the whole
query to SQLite, which raises its error only where it would.

"x IN (SELECT ...)" subqueries, whose values filter on the devices, run as
queries of their own through the planner too (grouped ones as TPC-H Q18's,
ones with a correlated scalar subquery as Q20's); a query of one table
takes a correlated scalar subquery as a grouped aggregate, as a join does.

A correlated scalar subquery over a join, correlated by equalities of its
columns with outer ones (TPC-H Q2), runs decorrelated: grouped by its
keys, through the planner, each joined row taking its group's value.
"""
import random
import subprocess

from harness import connect
from test_join_plan import NTAB, Db, explain, filter_term, same_as_native
from test_group_rows import BUILD
from test_semi_plan import scalar_term, single_table


def value_subquery(rnd, n_tab):
    """The text of a random uncorrelated scalar subquery over t0..t3."""
    t = rnd.randrange(n_tab)
    agg = rnd.choice(["sum(q.r)", "avg(q.k1)", "max(q.k2)", "min(q.r) + 1", "count(*) / 3",
                      "total(q.r) * 0.5", "count(q.v)", "max(q.v)", "min(q.k1) - 0.5"])
    where = rnd.choice(["", " WHERE q.r > 3", " WHERE q.k1 < 0", " WHERE q.v = 'a'"])
    if rnd.random() < 0.3:  # over a join of its own
        u = rnd.randrange(n_tab)
        return "(SELECT %s FROM {t%d} AS q, {t%d} AS q2 WHERE q.k1 = q2.k2%s)" % (
            agg, t, u, where.replace(" WHERE", " AND"))
    if rnd.random() < 0.15:  # no row: HAVING false
        return "(SELECT %s FROM {t%d} AS q%s HAVING count(*) < 0)" % (agg, t, where)
    return "(SELECT %s FROM {t%d} AS q%s)" % (agg, t, where)


def statement(rnd):
    n = rnd.randint(2, 3)
    tabs = rnd.sample(range(NTAB), n)
    frm = ", ".join("{t%d} AS x%d" % (t, i) for i, t in enumerate(tabs))
    where = ["x%d.k1 = x%d.k2" % (rnd.randrange(i), i) for i in range(1, n)]
    sub = lambda: value_subquery(rnd, NTAB)  # noqa: E731
    col = lambda: "x%d.%s" % (rnd.randrange(n), rnd.choice(["k1", "k2", "r", "v"]))  # noqa: E731
    place = rnd.randrange(4)
    if place == 0:
        where.append("%s %s %s" % (col(), rnd.choice(["<", ">=", "=", "<>"]), sub()))
    elif place == 3:
        where.append("%s IN (%s, 2)" % (col(), sub()))
    w = " WHERE " + " AND ".join(where)
    if place == 1:
        g = "x0.k1"
        return "SELECT %s, count(*), sum(x%d.r) FROM %s%s GROUP BY %s HAVING sum(x%d.r) %s %s" % (
            g, rnd.randrange(n), frm, w, g, rnd.randrange(n), rnd.choice([">", "<="]), sub())
    if place == 2:
        return "SELECT %s, %s, %s FROM %s%s" % (col(), sub(), col(), frm, w)
    return "SELECT %s, %s FROM %s%s" % (col(), col(), frm, w)


def random_runs(statement_fn, seed0, n_seed, n_step, counted):
    """Random statements of statement_fn over fresh tables and their native
    twins, each answering as native: (how many counted(explain) held for,
    how many ran)."""
    hit = total = 0
    for seed in range(n_seed):
        rnd = random.Random(seed0 + seed)
        db = Db(rnd)
        for step in range(n_step):
            sql = statement_fn(rnd)
            mine = sql.format(**{"t%d" % t: "t%d" % t for t in range(NTAB)})
            native = sql.format(**{"t%d" % t: "n%d" % t for t in range(NTAB)})
            same_as_native(db.con, mine, native, "seed %d step %d" % (seed, step))
            total += 1
            hit += bool(counted(explain(db.con, mine)))
        db.con.close()
    return hit, total


def test_random_value_subqueries_equal_native():
    planned, total = random_runs(statement, 7100, 6, 60,
                                 lambda e: e["plan"].startswith("join") and "subquery value" in e)
    assert planned > total // 3, "%d of %d queries bound a subquery's value" % (planned, total)
    print("%d of %d queries planned with a subquery's value bound" % (planned, total))


def same_rows_statement(rnd):
    """A join whose HAVING or select list holds a subquery over its own FROM
    and WHERE (TPC-H Q11), the WHERE with keys, filters and terms SQLite
    evaluates over the joined rows; sometimes the subquery differs a little."""
    n = rnd.randint(2, 3)
    tabs = rnd.sample(range(NTAB), n)
    frm = ", ".join("{t%d} AS x%d" % (t, i) for i, t in enumerate(tabs))
    if rnd.random() < 0.25:
        frm = "{t%d} AS x0 LEFT JOIN {t%d} AS x1 ON x1.k2 = x0.k1" % (tabs[0], tabs[1])
        frm += "".join(", {t%d} AS x%d" % (t, i + 2) for i, t in enumerate(tabs[2:]))
        where = ["x%d.k1 = x0.k2" % i for i in range(2, n)]
    else:
        where = ["x%d.k1 = x%d.k2" % (rnd.randrange(i), i) for i in range(1, n)]
    for _ in range(rnd.randint(0, 2)):
        where.append(filter_term(rnd, "x%d" % rnd.randrange(n)))
    if rnd.random() < 0.6:  # terms only the joined rows can answer
        where.append(rnd.choice(["x0.r < x1.r + 3", "x0.r IS NOT x%d.r" % (n - 1),
                                 "(x0.k1 > 2 OR x%d.v = 'a')" % (n - 1), "x1.r * 2 > x0.k2"]))
    w = " WHERE " + " AND ".join(where) if where else ""
    agg = rnd.choice(["sum(x0.r)", "count(*)", "total(x%d.r) * 0.5" % (n - 1), "max(x1.k1) - 1",
                      "avg(x0.r)", "count(x1.v) / 2", "min(x0.r) + max(x1.r)"])
    sub_w = w
    if rnd.random() < 0.2:  # not the same rows: an extra term, or another alias
        sub_w = w + (" AND" if w else " WHERE") + " x0.r > 1"
    sub = "(SELECT %s FROM %s%s)" % (agg, frm, sub_w)
    # keys without a collation: of 'b' and 'b ' under RTRIM, which one a
    # group shows depends on the order SQLite meets the rows in
    g = rnd.choice(["x0.k1", "x1.k1", "x0.k2"])
    if rnd.random() < 0.7:
        return "SELECT %s, count(*), sum(x0.r) FROM %s%s GROUP BY %s HAVING %s %s %s" % (
            g, frm, w, g, rnd.choice(["sum(x0.r)", "count(*) * 3", "max(x1.r)"]),
            rnd.choice([">", "<=", ">="]), sub)
    return "SELECT %s, %s AS s, count(*) FROM %s%s GROUP BY %s" % (g, sub, frm, w, g)


def test_random_values_over_the_same_rows_equal_native():
    over, total = random_runs(same_rows_statement, 7300, 5, 50,
                              lambda e: "over the rows the query reads" in e.get("subquery value", ""))
    assert over > total // 3, "%d of %d values computed over the joined rows" % (over, total)
    print("%d of %d subquery values computed over the joined rows" % (over, total))


def make(con):
    con.execute("CREATE VIRTUAL TABLE a USING csq(k INTEGER, t TEXT, x REAL)")
    con.execute("CREATE VIRTUAL TABLE b USING csq(k INTEGER, n NUMERIC, big INTEGER)")
    con.execute("CREATE TABLE na(k INTEGER, t TEXT, x REAL)")
    con.execute("CREATE TABLE nb(k INTEGER, n NUMERIC, big INTEGER)")
    ra = [(i % 20, ["1", "2", "10", "abc", None][i % 5], i / 2) for i in range(100)]
    rb = [(i, ["5", 5, 7.5, None][i % 4], 9223372036854775807 - i) for i in range(20)]
    for t, rows in (("a", ra), ("na", ra), ("b", rb), ("nb", rb)):
        con.executemany("INSERT INTO %s VALUES(%s)" % (t, ",".join("?" * len(rows[0]))), rows)
    return con


def test_affinity_and_refused_shapes():
    """A value keeps the subquery's meaning: text against numbers compares
    as SQLite compares a subquery without affinity; a bare column's
    subquery (it has one) and IN (SELECT ...) stay SQLite's."""
    con = make(connect())
    cases = [
        ("SELECT a.k, a.t FROM {a} AS a, {b} AS b WHERE a.k = b.k AND a.t > (SELECT max(x) FROM {a})", True),
        ("SELECT a.k, b.n FROM {a} AS a, {b} AS b WHERE a.k = b.k AND b.n = (SELECT min(t) FROM {a})", True),
        ("SELECT a.k, a.t FROM {a} AS a, {b} AS b WHERE a.k = b.k AND a.t < (SELECT count(*) FROM {b})", True),
        ("SELECT a.k FROM {a} AS a, {b} AS b WHERE a.k = b.k AND b.n = (SELECT t FROM {a} WHERE k = 3)", False),
        ("SELECT a.k FROM {a} AS a, {b} AS b WHERE a.k = b.k AND b.n = (SELECT CAST(max(x) AS TEXT) FROM {a})",
         False),
        ("SELECT a.k FROM {a} AS a, {b} AS b WHERE a.k = b.k AND a.k IN (SELECT max(k) FROM {b})", False),
        ("SELECT a.k, (SELECT avg(x) FROM {a} WHERE t = 'none') FROM {a} AS a, {b} AS b WHERE a.k = b.k", True),
        ("SELECT a.k, count(*) FROM {a} AS a, {b} AS b WHERE a.k = b.k GROUP BY a.k "
         "HAVING count(*) > (SELECT count(*) / 10 FROM {a} AS a2, {b} AS b2 WHERE a2.k = b2.k)", True),
    ]
    for q, bound in cases:
        mine, native = q.format(a="a", b="b"), q.format(a="na", b="nb")
        same_as_native(con, mine, native, q)
        e = explain(con, mine)
        assert e["plan"].startswith("join"), (q, e["why"])
        assert ("subquery value" in e) == bound, (q, e)


def test_a_failing_subquery_fails_only_where_sqlite_fails():
    con = make(connect())
    # sum() overflows: SQLite raises it when it runs the subquery ...
    q = ("SELECT a.k FROM {a} AS a, {b} AS b WHERE a.k = b.k AND a.x > (SELECT sum(big) FROM {b})")
    same_as_native(con, q.format(a="a", b="b"), q.format(a="na", b="nb"), q)
    # ... and never when no row needs it: the join is empty
    q2 = ("SELECT a.k FROM {a} AS a, {b} AS b WHERE a.k = b.k AND a.k < 0 AND a.x > (SELECT sum(big) FROM {b})")
    same_as_native(con, q2.format(a="a", b="b"), q2.format(a="na", b="nb"), q2)
    rows = con.execute("CREATE VIRTUAL TABLE temp.fv USING csq_query('%s')"
                       % q.format(a="a", b="b").replace("'", "''"))
    try:
        list(con.execute("SELECT * FROM fv"))
        raise AssertionError("no error")
    except Exception as e:  # noqa: BLE001
        assert "integer overflow" in str(e), e
    del rows


def test_q11_shape_in_the_shell():
    """build/csq: TPC-H Q11's shape as a view, against the native answer."""
    import tempfile
    db = tempfile.mkdtemp() + "/q11.db"
    setup = ("CREATE VIRTUAL TABLE ps USING csq(pk INTEGER, sk INTEGER, cost REAL, qty INTEGER);\n"
             "CREATE VIRTUAL TABLE s USING csq(sk INTEGER, nk INTEGER);\n"
             "CREATE TABLE nps(pk INTEGER, sk INTEGER, cost REAL, qty INTEGER);\n"
             "CREATE TABLE ns(sk INTEGER, nk INTEGER);\n"
             "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 4000)\n"
             "  INSERT INTO ps SELECT i % 300, i % 40, (i % 17) * 1.25, i % 9 FROM r;\n"
             "WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i < 39)\n"
             "  INSERT INTO s SELECT i, i % 5 FROM r;\n"
             "INSERT INTO nps SELECT * FROM ps; INSERT INTO ns SELECT * FROM s;\n")
    q = ("SELECT pk, sum(cost * qty) AS v FROM %(ps)s, %(s)s WHERE %(ps)s.sk = %(s)s.sk AND nk = 2 "
         "GROUP BY pk HAVING sum(cost * qty) > (SELECT sum(cost * qty) * 0.01 FROM %(ps)s, %(s)s "
         "WHERE %(ps)s.sk = %(s)s.sk AND nk = 2) ORDER BY v DESC, pk")
    out = subprocess.run([BUILD + "/csq", db], input=setup, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    mine = q % {"ps": "ps", "s": "s"}
    script = ("CREATE VIRTUAL TABLE temp.v USING csq_query('%s');\nSELECT * FROM v;\nSELECT '--';\n%s;\n"
              % (mine, q % {"ps": "nps", "s": "ns"}))
    out = subprocess.run([BUILD + "/csq", db], input=script, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got, want = out.stdout.split("--\n")
    assert got.strip() and got == want, (got, want)
    con = connect(db)
    assert "over the rows the query reads" in explain(con, mine)["subquery value"]


def test_one_table_with_correlated_scalar_subqueries():
    planned = total = 0
    for seed in range(4):
        rnd = random.Random(7300 + seed)
        db = Db(rnd)
        for step in range(50):
            sql = single_table(rnd, db.cols)
            at = [k for k in (" GROUP BY ",) if k in sql]
            cut = sql.index(at[0]) if at else len(sql)
            term = scalar_term(rnd, ["x0"], "{t%d}" % rnd.randrange(NTAB))
            sql = sql[:cut] + (" AND " if " WHERE " in sql[:cut] else " WHERE ") + term + sql[cut:]
            mine = sql.format(**{"t%d" % t: "t%d" % t for t in range(NTAB)})
            native = sql.format(**{"t%d" % t: "n%d" % t for t in range(NTAB)})
            same_as_native(db.con, mine, native, "seed %d step %d" % (seed, step))
            total += 1
            e = explain(db.con, mine)
            planned += e["plan"].startswith("join") and "scalar subqueries" in e["why"]
        db.con.close()
    assert planned > total // 3, "%d of %d one-table queries planned" % (planned, total)
    print("%d of %d one-table queries with a correlated scalar subquery planned" % (planned, total))


def in_subquery(rnd):
    t = rnd.randrange(NTAB)
    w = " WHERE " + filter_term(rnd, "q") if rnd.random() < 0.4 else ""
    shape = rnd.randrange(3)
    if shape == 0:  # grouped, as TPC-H Q18's
        return "(SELECT q.k1 FROM {t%d} AS q%s GROUP BY q.k1 HAVING %s)" % (
            t, w, rnd.choice(["count(*) > 1", "sum(q.r) > 10", "max(q.k2) < 5"]))
    if shape == 1:  # a correlated scalar subquery inside, as Q20's
        return "(SELECT q.k2 FROM {t%d} AS q WHERE q.r > (SELECT 0.5 * sum(u.r) FROM {t%d} AS u " \
               "WHERE u.k1 = q.k1))" % (t, rnd.randrange(NTAB))
    return "(SELECT q.k2 FROM {t%d} AS q%s)" % (t, w)


def test_random_in_subqueries_through_the_planner():
    planned = total = 0
    for seed in range(5):
        rnd = random.Random(7500 + seed)
        db = Db(rnd)
        for step in range(50):
            n = rnd.randint(1, 3)
            tabs = rnd.sample(range(NTAB), n)
            frm = ", ".join("{t%d} AS x%d" % (t, i) for i, t in enumerate(tabs))
            where = ["x%d.k1 = x%d.k2" % (rnd.randrange(i), i) for i in range(1, n)]
            where.append("x%d.%s %sIN %s" % (rnd.randrange(n), rnd.choice(["k1", "k2", "r"]),
                                             rnd.choice(["", "", "NOT "]), in_subquery(rnd)))
            sql = "SELECT x0.k1, x%d.r FROM %s WHERE %s" % (n - 1, frm, " AND ".join(where))
            if rnd.random() < 0.4:
                sql = "SELECT x0.k1, count(*) FROM %s WHERE %s GROUP BY x0.k1" % (frm, " AND ".join(where))
            mine = sql.format(**{"t%d" % t: "t%d" % t for t in range(NTAB)})
            native = sql.format(**{"t%d" % t: "n%d" % t for t in range(NTAB)})
            same_as_native(db.con, mine, native, "seed %d step %d" % (seed, step))
            total += 1
            planned += "IN subqueries run first" in explain(db.con, mine)["why"]
        db.con.close()
    assert planned > total // 4, "%d of %d queries ran an IN subquery first" % (planned, total)
    print("%d of %d queries ran an IN subquery first" % (planned, total))


def test_tpch_q20_shape_is_planned_and_equal_native():
    con = connect()
    rnd = random.Random(20)
    tables = {
        "supplier": ("s_suppkey INTEGER, s_name TEXT, s_nationkey INTEGER",
                     [(i, "s%d" % i, i % 5) for i in range(100)]),
        "nation": ("n_nationkey INTEGER, n_name TEXT", [(i, "N%d" % i) for i in range(5)]),
        "partsupp": ("ps_partkey INTEGER, ps_suppkey INTEGER, ps_availqty INTEGER",
                     [(p, (p * 7 + k) % 100, rnd.randrange(100)) for p in range(200) for k in range(4)]),
        "part": ("p_partkey INTEGER, p_name TEXT", [(p, rnd.choice(["forest a", "green b", "forest c"]))
                                                    for p in range(200)]),
        "lineitem": ("l_partkey INTEGER, l_suppkey INTEGER, l_quantity REAL, l_shipdate TEXT",
                     [(rnd.randrange(200), rnd.randrange(100), rnd.randrange(1, 50),
                       "199%d-0%d-01" % (rnd.randrange(3, 6), rnd.randrange(1, 10))) for _ in range(6000)]),
    }
    for name, (decl, rows) in tables.items():
        con.execute("CREATE VIRTUAL TABLE %s USING csq(%s)" % (name, decl))
        con.execute("CREATE TABLE n%s(%s)" % (name, decl))
        for t in (name, "n" + name):
            con.executemany("INSERT INTO %s VALUES(%s)" % (t, ",".join("?" * len(rows[0]))), rows)
    q20 = ("SELECT s_name FROM {supplier}, {nation} WHERE s_suppkey IN (SELECT ps_suppkey FROM {partsupp} "
           "WHERE ps_partkey IN (SELECT p_partkey FROM {part} WHERE p_name LIKE 'forest%') AND ps_availqty > "
           "(SELECT 0.5 * sum(l_quantity) FROM {lineitem} WHERE l_partkey = ps_partkey AND "
           "l_suppkey = ps_suppkey AND l_shipdate >= '1994-01-01' AND l_shipdate < '1995-01-01')) "
           "AND s_nationkey = n_nationkey AND n_name = 'N2' ORDER BY s_name")
    names = list(tables)
    mine = q20.format(**{t: t for t in names})
    native = q20.format(**{t: "n" + t for t in names})
    same_as_native(con, mine, native, "Q20")
    inner = mine[mine.index("(SELECT ps_suppkey") + 1:mine.index(") AND s_nationkey")]
    e = explain(con, inner)
    assert e["plan"].startswith("join") and "scalar subqueries" in e["why"], e
    assert "IN subqueries run first" in explain(con, mine)["why"]


def join_scalar_term(rnd, aliases):
    """A comparison with a correlated scalar aggregate over a join of two
    of {t0}..{t3}."""
    a, b = rnd.sample(range(NTAB), 2)
    o = rnd.choice(aliases)
    keys = ["s.%s = %s.%s" % (rnd.choice(["k1", "k2"]), o, rnd.choice(["k1", "k2"]))]
    if rnd.random() < 0.25:
        keys.append("s2.k1 = %s.%s" % (rnd.choice(aliases), rnd.choice(["k1", "k2"])))
    terms = ["s.%s = s2.%s" % (rnd.choice(["k1", "k2"]), rnd.choice(["k1", "k2"]))] + keys
    terms += [filter_term(rnd, rnd.choice(["s", "s2"])) for _ in range(rnd.randrange(2))]
    rnd.shuffle(terms)
    agg = rnd.choice(["count(*)", "min(s.r)", "max(s2.k2)", "sum(s.k1)", "avg(s2.r)", "total(s.r) + 1",
                      "count(s2.v)"])
    sub = "(SELECT %s FROM {t%d} AS s, {t%d} AS s2 WHERE %s)" % (agg, a, b, " AND ".join(terms))
    return rnd.choice(["%s.r <= %s" % (rnd.choice(aliases), sub), "%s = %s.k2" % (sub, rnd.choice(aliases)),
                       "coalesce(%s, -1) > %s.k1" % (sub, rnd.choice(aliases)), "%s IS NOT NULL" % sub])


def test_random_scalar_subqueries_over_joins_equal_native():
    planned = total = 0
    for seed in range(5):
        rnd = random.Random(7700 + seed)
        db = Db(rnd)
        for step in range(50):
            n = rnd.randint(1, 3)
            tabs = rnd.sample(range(NTAB), n)
            aliases = ["x%d" % i for i in range(n)]
            frm = ", ".join("{t%d} AS x%d" % (t, i) for i, t in enumerate(tabs))
            where = ["x%d.k1 = x%d.k2" % (rnd.randrange(i), i) for i in range(1, n)]
            where.append(join_scalar_term(rnd, aliases))
            sql = "SELECT x0.k1, x%d.r, x0.v FROM %s WHERE %s" % (n - 1, frm, " AND ".join(where))
            mine = sql.format(**{"t%d" % t: "t%d" % t for t in range(NTAB)})
            native = sql.format(**{"t%d" % t: "n%d" % t for t in range(NTAB)})
            same_as_native(db.con, mine, native, "seed %d step %d" % (seed, step))
            total += 1
            e = explain(db.con, mine)
            planned += "subquery over a join, decorrelated" in e.get("    scalar subquery", "") or any(
                "over a join, decorrelated" in v for v in e.values())
        db.con.close()
    assert planned > total // 3, "%d of %d queries decorrelated a subquery over a join" % (planned, total)
    print("%d of %d queries decorrelated a scalar subquery over a join" % (planned, total))


def test_scalar_subqueries_over_joins_refused_shapes():
    con = make(connect())
    con.execute("CREATE VIRTUAL TABLE c USING csq(k INTEGER, t TEXT)")
    con.execute("CREATE TABLE nc(k INTEGER, t TEXT)")
    for t in ("c", "nc"):
        con.executemany("INSERT INTO %s VALUES(?,?)" % t, [(i % 9, str(i % 4)) for i in range(40)])
    cases = [
        # decorrelated
        ("SELECT a.k FROM {a} AS a, {b} AS b WHERE a.k = b.k AND a.x > (SELECT min(c.k) FROM {c} AS c, {b} AS b2 "
         "WHERE c.k = b2.k AND b2.k = a.k)", True),
        # correlated by "<": SQLite's
        ("SELECT a.k FROM {a} AS a WHERE a.x > (SELECT count(*) FROM {c} AS c, {b} AS b2 WHERE c.k = b2.k "
         "AND b2.k < a.k)", False),
        # by a TEXT column: SQLite's (its "=" converts)
        ("SELECT a.k FROM {a} AS a WHERE a.k < (SELECT count(*) FROM {c} AS c, {b} AS b2 WHERE c.k = b2.k "
         "AND c.t = a.k)", False),
        # its value reads an outer column: SQLite's
        ("SELECT a.k FROM {a} AS a WHERE a.x > (SELECT max(c.k) + a.x FROM {c} AS c, {b} AS b2 WHERE "
         "c.k = b2.k AND c.k = a.k)", False),
    ]
    for q, decorrelated in cases:
        mine, native = q.format(a="a", b="b", c="c"), q.format(a="na", b="nb", c="nc")
        same_as_native(con, mine, native, q)
        e = explain(con, mine)
        got = any("over a join, decorrelated" in v for v in e.values())
        assert got == decorrelated, (q, e)


def test_tpch_q2_shape_is_planned_and_equal_native():
    con = connect()
    rnd = random.Random(2)
    tables = {
        "part": ("p_partkey INTEGER, p_mfgr TEXT, p_size INTEGER, p_type TEXT",
                 [(p, "M%d" % (p % 3), p % 20, rnd.choice(["LARGE BRASS", "SMALL TIN"])) for p in range(300)]),
        "supplier": ("s_suppkey INTEGER, s_name TEXT, s_nationkey INTEGER, s_acctbal REAL",
                     [(i, "S%d" % i, i % 10, rnd.randrange(-999, 9999) / 1.0) for i in range(60)]),
        "partsupp": ("ps_partkey INTEGER, ps_suppkey INTEGER, ps_supplycost REAL",
                     [(p, (p + 13 * k) % 60, rnd.randrange(1, 100) / 1.0) for p in range(300) for k in range(4)]),
        "nation": ("n_nationkey INTEGER, n_name TEXT, n_regionkey INTEGER", [(i, "N%d" % i, i % 2) for i in range(10)]),
        "region": ("r_regionkey INTEGER, r_name TEXT", [(0, "EUROPE"), (1, "ASIA"), (2, "AMERICA")]),
    }
    for name, (decl, rows) in tables.items():
        con.execute("CREATE VIRTUAL TABLE %s USING csq(%s)" % (name, decl))
        con.execute("CREATE TABLE n%s(%s)" % (name, decl))
        for t in (name, "n" + name):
            con.executemany("INSERT INTO %s VALUES(%s)" % (t, ",".join("?" * len(rows[0]))), rows)
    q2 = ("SELECT s_acctbal, s_name, n_name, p_partkey, p_mfgr FROM {part}, {supplier}, {partsupp}, {nation}, "
          "{region} WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND p_size = 15 AND p_type LIKE "
          "'%BRASS' AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'EUROPE' AND "
          "ps_supplycost = (SELECT min(ps_supplycost) FROM {partsupp}, {supplier}, {nation}, {region} WHERE "
          "p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND s_nationkey = n_nationkey AND n_regionkey = "
          "r_regionkey AND r_name = 'EUROPE') ORDER BY s_acctbal DESC, n_name, s_name, p_partkey LIMIT 100")
    names = list(tables)
    mine = q2.format(**{t: t for t in names})
    native = q2.format(**{t: "n" + t for t in names})
    same_as_native(con, mine, native, "Q2")
    assert con.execute(native).fetchall()
    e = explain(con, mine)
    assert e["plan"].startswith("join") and any("over a join, decorrelated" in v for v in e.values()), e


def test_subquery_over_a_join_limited_to_the_outer_keys():
    """Integer outer keys limit the decorrelated subquery to their groups
    ("AND key IN (...)"): an inner REAL key 2.0 still matches 2, text and
    NULL keys match nothing, keys past the IN list's limit still answer."""
    con = connect()
    decl = {"o": "k INTEGER, x REAL", "i": "kr REAL, j INTEGER, y REAL", "m": "j INTEGER, w TEXT"}
    data = {"o": [(i % 50, i / 3) for i in range(200)] + [(None, 1.0)],
            "i": [([float(i % 60), i % 60, "7", None, 2.5][i % 5], i % 11, i / 7) for i in range(600)],
            "m": [(i, "w%d" % (i % 3)) for i in range(11)]}
    for name in decl:
        con.execute("CREATE VIRTUAL TABLE %s USING csq(%s)" % (name, decl[name]))
        con.execute("CREATE TABLE n%s(%s)" % (name, decl[name]))
        for t in (name, "n" + name):
            con.executemany("INSERT INTO %s VALUES(%s)" % (t, ",".join("?" * len(data[name][0]))), data[name])
    for q in ("SELECT o.k, o.x FROM {o} AS o WHERE o.x < (SELECT sum(i.y) FROM {i} AS i, {m} AS m "
              "WHERE i.j = m.j AND m.w <> 'w1' AND i.kr = o.k)",
              "SELECT o.k, count(*) FROM {o} AS o WHERE (SELECT count(*) FROM {i} AS i, {m} AS m "
              "WHERE i.j = m.j AND i.kr = o.k) > 2 GROUP BY o.k"):
        mine, native = q.format(o="o", i="i", m="m"), q.format(o="no", i="ni", m="nm")
        same_as_native(con, mine, native, q)
        assert con.execute(native).fetchall(), q
        assert any("over a join, decorrelated" in v for v in explain(con, mine).values()), q
    # more distinct outer keys than the IN list takes
    con.executemany("INSERT INTO o VALUES(?, ?)", [(i, 1.0) for i in range(100, 5200)])
    con.executemany("INSERT INTO no VALUES(?, ?)", [(i, 1.0) for i in range(100, 5200)])
    q = ("SELECT count(*), sum(o.k) FROM {o} AS o WHERE o.x <= (SELECT count(*) FROM {i} AS i, {m} AS m "
         "WHERE i.j = m.j AND i.kr = o.k)")
    same_as_native(con, q.format(o="o", i="i", m="m"), q.format(o="no", i="ni", m="nm"), q)
