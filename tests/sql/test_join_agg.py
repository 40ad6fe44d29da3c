"""A join's aggregation in csq's host engine (planner/joinagg.c,
device/host/vecrun.c).

When the host part of a planned join is a grouped query split.c can
split, the joined rows are encoded into column chunks and the same grouped
program a device runs computes the partial aggregates on the host; SQLite
then finishes over the merged groups. Random grouped joins over keys and
values of every storage class (integers, integral and fractional reals,
numeric text, text, NULLs) must answer as native tables do, in native's
order where native fixes one (an ORDER BY that places every row, or a GROUP
BY without ORDER BY, whose groups SQLite hands out in key order). Then:
joined rows of several pieces with few groups (the engine), with nearly a
group per row (left to SQLite's grouping), sums that overflow or might in
row order, text under arithmetic, a GROUP BY key over a collated column,
bound subquery values and parameters in the host part, and the same
queries from the stock sqlite3 shell, build/csq and Python's
executescript.
"""
import os
import random
import sqlite3
import subprocess

from harness import connect, tmpdir
from test_join_plan import NTAB, Db, explain, make_pair
from test_join_random import canon

BUILD = os.environ.get("CSQ_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
EXT = os.environ.get("CSQ_EXT", os.path.join(BUILD, "csq.so"))


def engine_used(con, sql):
    """csq_explain says the joined rows are grouped in csq's host engine."""
    d = explain(con, sql)
    return d.get("host aggregation", "").startswith("instead")


def grouped(rnd, cols):
    """A random grouped join over {t0}..{t3}: (text, ordered)."""
    n = rnd.randint(2, NTAB)
    tabs = rnd.sample(range(NTAB), n)
    al = ["x%d" % i for i in range(n)]
    frm, where = "{t%d} AS x0" % tabs[0], []
    for i in range(1, n):
        frm += ", {t%d} AS x%d" % (tabs[i], i)
        where.append("x%d.%s = x%d.%s" % (rnd.randrange(i), rnd.choice(["k1", "k2"]), i,
                                          rnd.choice(["k1", "k2"])))
    if rnd.random() < 0.3:
        a = rnd.choice(al)
        where.append(rnd.choice(["%s.r IS NOT NULL" % a, "%s.k1 < 9" % a, "%s.k2 >= 2" % a]))

    def plain():
        i = rnd.randrange(n)
        names = [c for c, t in cols[tabs[i]] if "COLLATE" not in t]
        return "x%d.%s" % (i, rnd.choice(names))

    def num():
        return "%s.%s" % (rnd.choice(al), rnd.choice(["k1", "k2", "r"]))

    def arg():
        r = rnd.random()
        if r < 0.4:
            return num()
        if r < 0.7:
            return "%s %s %s" % (num(), rnd.choice(["+", "-", "*"]), num())
        if r < 0.85:
            return "%s * %s" % (num(), rnd.choice(["2", "0.5", "(1 - %s)" % num()]))
        return "-%s" % num()
    aggs = ["count(*)", "count(%s)" % plain(), "sum(%s)" % arg(), "total(%s)" % arg(),
            "avg(%s)" % arg(), "min(%s)" % plain(), "max(%s)" % plain(), "sum(%s) / 4" % arg()]
    keys = list(dict.fromkeys(plain() for _ in range(rnd.randint(0, 3))))
    sel = keys + rnd.sample(aggs, rnd.randint(1, 4))
    sql = "SELECT %s FROM %s WHERE %s" % (", ".join(sel), frm, " AND ".join(where))
    if not keys:
        return sql, True
    sql += " GROUP BY %s" % ", ".join(keys)
    if rnd.random() < 0.3:
        sql += " HAVING count(*) > %d" % rnd.randrange(3)
    shape = rnd.randrange(4)
    if shape == 0:
        return sql + " ORDER BY %s" % ", ".join(
            "%s %s" % (k, rnd.choice(["ASC", "DESC", ""])) for k in keys), True
    if shape == 1:
        return sql + " ORDER BY %s LIMIT %d" % (", ".join(keys), rnd.randint(1, 5)), True
    if shape == 2:
        return sql + " LIMIT %d" % rnd.randint(1, 5), True  # the first groups in key order
    return sql, True


def rows(con, sql, params=()):
    try:
        return [canon(r) for r in con.execute(sql, params).fetchall()], None
    except sqlite3.Error as e:
        return None, str(e)


def view_rows(con, sql, params=()):
    con.execute("CREATE VIRTUAL TABLE temp.ja USING csq_query('%s')" % sql.replace("'", "''"))
    try:
        args = "(%s)" % ", ".join("?" * len(params)) if params else ""
        return rows(con, "SELECT * FROM ja%s" % args, params)
    finally:
        con.execute("DROP TABLE temp.ja")


def check(con, mine, native, ctx, params=()):
    got, gerr = view_rows(con, mine, params)
    want, werr = rows(con, native, params)
    assert (gerr is None) == (werr is None), "%s\n  %s\n  csq error %r, native error %r" % (
        ctx, mine, gerr, werr)
    assert gerr is None or gerr == werr, "%s: csq says %r, native %r" % (ctx, gerr, werr)
    assert got == want, "%s:\n  %s\n  csq    %s\n  native %s" % (ctx, mine, got[:6], want[:6])


def test_random_grouped_joins_equal_native_in_order():
    used = total = 0
    for seed in range(8):
        rnd = random.Random(1000 + seed)
        db = Db(rnd)
        for step in range(45):
            sql, _ = grouped(rnd, db.cols)
            mine = sql.format(**{"t%d" % t: "t%d" % t for t in range(NTAB)})
            native = sql.format(**{"t%d" % t: "n%d" % t for t in range(NTAB)})
            check(db.con, mine, native, "seed %d step %d" % (seed, step))
            total += 1
            used += engine_used(db.con, mine)
        db.con.close()
    # text in a key or collated columns leave some to SQLite, not most
    assert used > total // 2, "%d of %d grouped joins in csq's host engine" % (used, total)
    print("%d of %d grouped joins aggregated in csq's host engine" % (used, total))


def star(con, n_fact, n_dim, seed=7):
    """A fact table f and a dimension d, as csq tables and native twins."""
    rnd = random.Random(seed)
    drows = [(i, rnd.choice(["a", "b", "c", None, 5, 2.5]), i % 7) for i in range(n_dim)]
    frows = [(rnd.randrange(n_dim + 3) if rnd.random() > 0.02 else None,
              rnd.choice([rnd.randrange(-50, 100), None, 3.0]),
              rnd.choice([rnd.randrange(1000) / 8.0, None, 7]),
              rnd.choice(["x", "y", "12", None])) for _ in range(n_fact)]
    make_pair(con, "d", "dk INTEGER, name TEXT, grp INTEGER", drows)
    make_pair(con, "f", "fk INTEGER, qty INTEGER, price REAL, tag TEXT", frows)


def test_many_pieces_few_groups_and_a_group_per_row():
    """More joined rows than one piece of the engine, grouped into few
    groups (the engine, across pieces) or nearly one per row (SQLite)."""
    con = connect()
    star(con, 150000, 3000)
    few = ("SELECT d.grp, d.name, count(*), sum(f.qty), total(f.price * f.qty), avg(f.price), "
           "min(f.tag), max(f.qty) FROM f, d WHERE f.fk = d.dk GROUP BY d.grp, d.name")
    many = ("SELECT f.qty, f.price, d.dk, count(*), sum(f.qty * 2) FROM f, d WHERE f.fk = d.dk "
            "GROUP BY f.qty, f.price, d.dk")
    for sql in (few, many, few + " ORDER BY 3 DESC, 1, 2", many + " ORDER BY 4 DESC, 1, 2, 3 LIMIT 20"):
        check(con, sql, sql.replace("f,", "nf AS f,").replace("d WHERE", "nd AS d WHERE"), "star")
    assert engine_used(con, few)
    # both plans say the engine may take them; the run decides by the rows
    assert engine_used(con, many)
    con.close()


def test_sums_that_overflow_and_text_under_arithmetic():
    con = connect()
    big = 2 ** 62
    make_pair(con, "a", "k INTEGER, v",
              [(1, big), (1, big), (2, big), (2, -big), (2, big), (3, "7"), (3, 2), (4, "x"), (4, 1)])
    make_pair(con, "b", "k INTEGER, g TEXT", [(1, "p"), (2, "q"), (3, "r"), (4, "s")])
    cases = [
        # the total overflows: SQLite's "integer overflow", from the engine too
        "SELECT b.g, sum(a.v) FROM a, b WHERE a.k = b.k AND a.k = 1 GROUP BY b.g",
        # big + (-big) + big fits, and does in SQLite's row order too
        "SELECT b.g, sum(a.v) FROM a, b WHERE a.k = b.k AND a.k = 2 GROUP BY b.g",
        # text in a sum: SQLite's conversion, by SQLite ('7' counts 7, 'x' 0)
        "SELECT b.g, sum(a.v), total(a.v * 2), avg(a.v) FROM a, b WHERE a.k = b.k AND a.k >= 3 GROUP BY b.g",
        "SELECT b.g, sum(a.v + 1) FROM a, b WHERE a.k = b.k GROUP BY b.g",
    ]
    for sql in cases:
        check(con, sql, sql.replace("FROM a, b", "FROM na AS a, nb AS b"), "overflow/text")
    got, err = view_rows(con, cases[0])
    assert err and "integer overflow" in err, (got, err)
    con.close()


def test_values_parameters_and_refusals():
    con = connect()
    star(con, 20000, 500, seed=3)
    nat = lambda s: s.replace("FROM f, d", "FROM nf AS f, nd AS d").replace(  # noqa: E731
        "FROM f)", "FROM nf)")
    # a bound scalar subquery and a parameter in the host part
    sql = ("SELECT d.grp, sum(f.qty) FROM f, d WHERE f.fk = d.dk AND f.qty > ?1 GROUP BY d.grp "
           "HAVING sum(f.qty) > (SELECT avg(qty) FROM f) ORDER BY 1")
    check(con, sql, nat(sql), "value + parameter", (10,))
    check(con, sql, nat(sql), "value + parameter", (None,))
    # a collated key: SQLite groups it (its collation), and says why
    con.execute("CREATE VIRTUAL TABLE dc USING csq(dk INTEGER, name TEXT COLLATE NOCASE)")
    con.execute("CREATE TABLE ndc(dk INTEGER, name TEXT COLLATE NOCASE)")
    for t in ("dc", "ndc"):
        con.executemany("INSERT INTO %s VALUES(?,?)" % t, [(i, "Ab"[i % 2] + "c") for i in range(500)])
    sql = "SELECT dc.name, count(*), sum(f.qty) FROM f, dc WHERE f.fk = dc.dk GROUP BY dc.name"
    check(con, sql, sql.replace("FROM f, dc", "FROM nf AS f, ndc AS dc"), "collated key")
    why = explain(con, sql).get("host aggregation", "")
    assert why.startswith("none") and "collation" in why, why
    # group_concat is not the engine's: SQLite aggregates, same answer
    sql = "SELECT d.grp, group_concat(d.name) FROM f, d WHERE f.fk = d.dk AND f.qty = 3 GROUP BY d.grp"
    got, _ = view_rows(con, sql)
    want, _ = rows(con, nat(sql))
    assert len(got) == len(want) and not engine_used(con, sql)
    con.close()


def test_clients_see_native_answers():
    """The stock sqlite3 shell (one session, then reopened), build/csq and
    Python's executescript over a view of a grouped join."""
    d = tmpdir()
    db = os.path.join(d, "ja.db")
    con = sqlite3.connect(db)
    con.enable_load_extension(True)
    con.load_extension(EXT)
    star(con, 30000, 800, seed=11)
    q = ("SELECT d.grp, d.name, count(*), sum(f.qty), total(f.price * f.qty) FROM f, d "
         "WHERE f.fk = d.dk GROUP BY d.grp, d.name")
    qn = q.replace("FROM f, d", "FROM nf AS f, nd AS d")
    con.execute("CREATE VIRTUAL TABLE gv USING csq_query('%s')" % q.replace("'", "''"))
    con.commit()
    want = [canon(r) for r in con.execute(qn).fetchall()]
    got = [canon(r) for r in con.execute("SELECT * FROM gv").fetchall()]
    assert got == want, (got[:4], want[:4])
    # executescript: a write, then the view again in the same connection
    con.executescript("BEGIN; INSERT INTO f VALUES(1, 1000, 1.5, 'z'); "
                      "INSERT INTO nf VALUES(1, 1000, 1.5, 'z'); COMMIT;")
    want = [canon(r) for r in con.execute(qn).fetchall()]
    assert [canon(r) for r in con.execute("SELECT * FROM gv").fetchall()] == want
    con.close()
    same_in_shells(db, "gv", qn)


def same_in_shells(db, view, native_sql):
    """The stock sqlite3 shell and build/csq, each in a session of its own
    over db, print the same lines for view as for native_sql, and each the
    same as the other."""
    want_text = None
    for shell, args in (("sqlite3", ["-cmd", ".load %s" % EXT]), (os.path.join(BUILD, "csq"), [])):
        script = "SELECT * FROM %s;\n%s;\n" % (view, native_sql)
        out = subprocess.run([shell, db] + args, input=script, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0 and not out.stderr.strip(), out.stderr
        lines = out.stdout.strip().split("\n")
        half = len(lines) // 2
        assert len(lines) == 2 * half and lines[:half] == lines[half:], (shell, lines[:3], lines[half:half + 3])
        want_text = want_text or lines[:half]
        assert lines[:half] == want_text
