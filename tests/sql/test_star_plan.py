"""Star joins grouped on the probe side's devices (planner/star.c).

A join whose build sides (dimensions) join the probe table (the facts) on
unique integer keys, and whose host part groups by the dimensions' columns
and aggregates the facts' columns, runs as one grouped program on the
facts' devices: each dimension's group column becomes a code per key
(CSQ_EX_MAP), a dimension without group columns an exact filter of its
keys. Random such queries over dimensions whose group columns hold every
storage class (1 and 1.0 and '1', NULLs, blobs), facts whose keys are
NULL, REAL (integral or not), TEXT or missing from the dimension, answer as
native tables do; csq_stats counts the joins that took the star path, and
the ones that must not take it (duplicate keys, a key that is not an
integer, a build column under an aggregate, a collated group column) still
answer as native. Then overflow and text under sum, and the clients.
"""
import os
import random

from harness import connect, stats, tmpdir
from test_join_agg import same_in_shells
from test_join_plan import answer, make_pair, via_view
from test_join_random import canon


def stars(con):
    return stats(con)["star_joins"]


def native(sql):
    for t in ("f", "d1", "d2", "d3"):
        sql = sql.replace(" %s AS " % t, " n%s AS " % t)
    return sql


def check(con, sql, where):
    """The view answers as native; returns 1 if it took the star path."""
    s0 = stars(con)
    got, gerr = via_view(con, sql)
    want, werr = answer(con, native(sql))
    assert (gerr is None) == (werr is None), "%s\n  %s\n  csq %r native %r" % (where, sql, gerr, werr)
    if gerr:
        assert gerr == werr, (where, sql, gerr, werr)
    assert got == want, "%s\n  %s\n  csq %d rows %s\n  native %d rows %s" % (
        where, sql, len(got or []), (got or [])[:4], len(want or []), (want or [])[:4])
    return stars(con) - s0


GROUP_VALUES = [1, 1.0, "1", 2, 2.5, "b", "B", b"b", None, -3, 7.0, "x y", b""]


def make_star(con, rnd):
    """Facts f(k1, k2, k3, v, r, u) over dimensions d1, d2 (INTEGER keys)
    and d3 (untyped keys, integers only), each with group columns a, b, c."""
    # csq's host engine groups a column of no affinity in SQLite (its
    # numbers may be 3 and 3.0): group columns of NUMERIC, TEXT and REAL
    for d, kdecl, aff in (("d1", "k INTEGER", "NUMERIC"), ("d2", "k INTEGER", "TEXT"), ("d3", "k", "REAL")):
        n = rnd.randint(3, 60)
        keys = rnd.sample(range(-5, 3 * n), n)
        make_pair(con, d, "%s, a %s, b TEXT, c REAL" % (kdecl, aff),
                  [(k, rnd.choice(GROUP_VALUES), rnd.choice(["p", "q", None, "r"]),
                    rnd.choice([0.5, 1.0, None, 2.0])) for k in keys])

    def key():
        x = rnd.random()
        if x < 0.08:
            return None
        if x < 0.14:
            return rnd.choice([3.0, 4.5, "7", "zz", b"\x01"])
        return rnd.randint(-8, 200)

    facts = [(key(), key(), key(), rnd.choice([rnd.randint(-50, 50), None, 2.5]),
              rnd.choice([rnd.random() * 10, None, 3]), rnd.choice([1, 2, "t", None, 4.0]))
             for _ in range(rnd.randint(200, 3000))]
    make_pair(con, "f", "k1 INTEGER, k2 INTEGER, k3, v INTEGER, r REAL, u", facts, ", rowgroup=1000")


def statement(rnd):
    dims = rnd.sample(["d1", "d2", "d3"], rnd.randint(1, 3))
    frm = "FROM f AS f, " + ", ".join("%s AS %s" % (d, d) for d in dims)
    where = ["f.k%s = %s.k" % (d[1], d) for d in dims]
    for d in dims:
        if rnd.random() < 0.4:
            where.append(rnd.choice(["%s.b = 'p'" % d, "%s.c > 0.7" % d, "%s.a IS NOT NULL" % d,
                                     "%s.b IN ('q', 'r')" % d]))
    if rnd.random() < 0.3:
        where.append(rnd.choice(["f.v > 0", "f.r < 5", "f.u IS NOT NULL"]))
    keys = []
    for d in dims:
        for c in ("a", "b", "c"):
            if rnd.random() < 0.4:
                keys.append("%s.%s" % (d, c))
    if rnd.random() < 0.3:
        keys.append(rnd.choice(["f.u", "f.v"]))
    aggs = rnd.sample(["count(*)", "sum(f.v)", "total(f.r)", "avg(f.v)", "min(f.r)", "max(f.u)",
                       "count(f.r)", "sum(f.v * 2 - f.r)", "min(f.u)"], rnd.randint(1, 3))
    sql = "SELECT %s %s WHERE %s" % (", ".join(keys + aggs), frm, " AND ".join(where))
    if keys:
        sql += " GROUP BY " + ", ".join(keys)
        if rnd.random() < 0.3:
            sql += " HAVING count(*) > 1"
        if rnd.random() < 0.4:
            sql += " ORDER BY %d DESC" % (len(keys) + 1)
    return sql


def test_random_star_joins_equal_native():
    total = star = 0
    for seed in range(12):
        rnd = random.Random(seed)
        con = connect()
        make_star(con, rnd)
        for step in range(40):
            star += check(con, statement(rnd), "seed %d step %d" % (seed, step))
            total += 1
        con.close()
    # every statement has the shape; text in a sum (f.u) alone sends some back
    assert star > total // 2, "%d of %d took the star path" % (star, total)
    print("%d of %d star joins grouped on the devices" % (star, total))


def test_shapes_that_are_not_stars_answer_as_native():
    con = connect()
    rnd = random.Random(5)
    make_star(con, rnd)
    # duplicate keys: a fact row joins two rows
    make_pair(con, "dd", "k INTEGER, a TEXT", [(i % 10, "g%d" % (i % 3)) for i in range(20)])
    # REAL keys that are not integers, keys as text
    make_pair(con, "dr", "k INTEGER, a TEXT", [(i + 0.5 if i % 4 == 0 else i, "h%d" % (i % 2)) for i in range(30)])
    make_pair(con, "dt", "k TEXT, a TEXT", [(str(i), "t%d" % (i % 2)) for i in range(30)])
    make_pair(con, "dc", "k INTEGER, a TEXT COLLATE NOCASE", [(i, "Ab"[i % 2]) for i in range(30)])
    cases = [
        ("SELECT dd.a, count(*), sum(f.v) FROM f AS f, dd AS dd WHERE f.k1 = dd.k GROUP BY dd.a", 0),
        ("SELECT dr.a, count(*), sum(f.v) FROM f AS f, dr AS dr WHERE f.k1 = dr.k GROUP BY dr.a", 0),
        ("SELECT dc.a, count(*) FROM f AS f, dc AS dc WHERE f.k1 = dc.k GROUP BY dc.a", 0),
        ("SELECT dt.a, count(*) FROM f AS f, dt AS dt WHERE f.u = dt.k GROUP BY dt.a", 0),
        # a build column under an aggregate
        ("SELECT d1.b, sum(d1.c * f.v) FROM f AS f, d1 AS d1 WHERE f.k1 = d1.k GROUP BY d1.b", 0),
        # the keys chain through a dimension: a snowflake, not a star
        ("SELECT d2.a, count(*) FROM f AS f, d1 AS d1, d2 AS d2 WHERE f.k1 = d1.k AND d1.k = d2.k "
         "GROUP BY d2.a", None),
        ("SELECT d1.a, count(*) FROM f AS f LEFT JOIN d1 AS d1 ON f.k1 = d1.k GROUP BY d1.a", 0),
        # the same dimensions as stars
        ("SELECT d1.a, d2.b, count(*), sum(f.v) FROM f AS f, d1 AS d1, d2 AS d2 "
         "WHERE f.k1 = d1.k AND f.k2 = d2.k GROUP BY d1.a, d2.b", 1),
        ("SELECT count(*), sum(f.v), min(f.u) FROM f AS f, d1 AS d1, d3 AS d3 "
         "WHERE f.k1 = d1.k AND f.k3 = d3.k AND d1.b = 'p'", 1),
    ]
    nat = lambda s: native(s).replace(" dd AS ", " ndd AS ").replace(" dr AS ", " ndr AS ").replace(  # noqa: E731
        " dc AS ", " ndc AS ").replace(" dt AS ", " ndt AS ")
    for sql, want_star in cases:
        said = "star aggregation" in dict((r[0].strip(), r[1]) for r in con.execute(
            "SELECT part, detail FROM csq_explain(?)", (sql,)))
        assert said or not want_star, sql  # csq_explain names the path when it may be taken
        s0 = stars(con)
        got, gerr = via_view(con, sql)
        want, werr = answer(con, nat(sql))
        assert gerr is None and werr is None and got == want, (sql, gerr, werr, got[:3], want[:3])
        if want_star is not None:
            assert stars(con) - s0 == want_star, (sql, stars(con) - s0)
        if "d1.c * f.v" in sql or "LEFT JOIN" in sql or "dc.a" in sql:
            assert not said, sql  # what the statement alone rules out, csq_explain does not offer
    con.close()


def test_values_of_every_class_are_codes_of_their_own():
    """Group values equal under SQLite's GROUP BY share a code: one group,
    as native's ('1', 1.0 and 1 are one value in a NUMERIC column); x'31',
    'b', 'B', x'62' and NULL are groups apart."""
    con = connect()
    vals = [1, 1.0, "1", b"1", None, None, "b", "B", b"b", 2.5]
    make_pair(con, "d1", "k INTEGER, a NUMERIC", [(i + 1, v) for i, v in enumerate(vals)])
    make_pair(con, "f", "k1 INTEGER, v INTEGER", [(i % 12, i) for i in range(4000)], ", rowgroup=1000")
    sql = "SELECT d1.a, count(*), sum(f.v) FROM f AS f, d1 AS d1 WHERE f.k1 = d1.k GROUP BY d1.a"
    assert check(con, sql, "classes") == 1
    assert len(via_view(con, sql)[0]) == 7
    con.close()


def test_overflow_and_text_in_a_sum():
    con = connect()
    big = 2 ** 62
    make_pair(con, "f", "k1 INTEGER, v", [(1, big), (1, big), (2, big), (2, -big), (2, big), (3, "7"),
                                          (3, 2), (4, "x"), (4, 1)])
    make_pair(con, "d1", "k INTEGER, a TEXT", [(1, "p"), (2, "q"), (3, "r"), (4, "s")])
    over = "SELECT d1.a, sum(f.v) FROM f AS f, d1 AS d1 WHERE f.k1 = d1.k AND f.k1 = 1 GROUP BY d1.a"
    got, err = via_view(con, over)
    assert err and "integer overflow" in err, (got, err)
    # big + (-big) + big fits, but its running sum might not in another
    # order: SQLite adds the rows in its own order (the hash join)
    assert check(con, over.replace("f.k1 = 1", "f.k1 = 2"), "fits") == 0
    # text in a sum: SQLite's conversions, through the hash join
    assert check(con, "SELECT d1.a, sum(f.v), avg(f.v) FROM f AS f, d1 AS d1 WHERE f.k1 = d1.k "
                      "GROUP BY d1.a", "text") == 0
    con.close()


def test_writes_between_runs_and_clients():
    """A view over a star join sees each write (a new dimension row, a fact
    row, a dimension key made duplicate), in Python's executescript, the
    stock sqlite3 shell and build/csq."""
    d = tmpdir()
    db = os.path.join(d, "star.db")
    con = connect(db)
    rnd = random.Random(9)
    make_star(con, rnd)
    q = "SELECT d1.a, d2.b, count(*), sum(f.v) FROM f AS f, d1 AS d1, d2 AS d2 " \
        "WHERE f.k1 = d1.k AND f.k2 = d2.k GROUP BY d1.a, d2.b ORDER BY 3 DESC, 1, 2"
    con.execute("CREATE VIRTUAL TABLE sv2 USING csq_query('%s')" % q.replace("'", "''"))
    for step, script in enumerate([
            "INSERT INTO d1 VALUES(500, 'new', 'p', 1.0); INSERT INTO nd1 VALUES(500, 'new', 'p', 1.0);"
            "INSERT INTO f VALUES(500, (SELECT k FROM d2 LIMIT 1), 9, 1, 1, 1);"
            "INSERT INTO nf VALUES(500, (SELECT k FROM nd2 LIMIT 1), 9, 1, 1, 1);",
            "BEGIN; UPDATE d1 SET a = 'moved' WHERE k = 500; UPDATE nd1 SET a = 'moved' WHERE k = 500; COMMIT;",
            "INSERT INTO d1 VALUES(500, 'twice', 'q', 2.0); INSERT INTO nd1 VALUES(500, 'twice', 'q', 2.0);"]):
        con.executescript(script)
        got = sorted(map(canon, con.execute("SELECT * FROM sv2").fetchall()))
        want = sorted(map(canon, con.execute(native(q)).fetchall()))
        assert got == want, (step, got[:3], want[:3])
    con.close()
    same_in_shells(db, "sv2", native(q))
