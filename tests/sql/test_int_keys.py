"""Joins over keys of integers and NULLs only (planner/hashjoin.c's typed
loops: the build, the probe, the semi-join's marking).

The other join tests give every key column a mix of storage classes, so
their keys take the generic loops. Here tables t0..t2 hold keys that are
integers or NULL only, and t3 the mixed keys of test_join_plan (4 = 4.0 =
'4' across a typed and a generic side). Random inner joins, LEFT JOINs and
[NOT] EXISTS (with "<>" terms) over csq tables and native twins must answer
as the same SQL over native tables, and most must take the join path.
"""
import contextlib
import random

import test_join_plan as join_plan
import test_left_plan as left_plan
from test_join_plan import NTAB, Db, explain, same_as_native
from test_semi_plan import exists_term, with_terms


@contextlib.contextmanager
def int_keys(rnd):
    """Db() inside builds t0..t2 with integer-or-NULL keys, t3 mixed."""
    mixed, types = join_plan.key_value, join_plan.KEY_TYPES
    made = [0]

    def key_value(r, dom):
        if made[0] >= 2 * (400 + 120 + 40):  # t3 (Db draws two keys a row of t0..t2 first)
            return mixed(r, dom)
        made[0] += 1
        return None if r.random() < 0.12 else r.randrange(dom)

    # a REAL column would make the integers reals
    join_plan.key_value, join_plan.KEY_TYPES = key_value, ["INTEGER", "NUMERIC"]
    try:
        yield
    finally:
        join_plan.key_value, join_plan.KEY_TYPES = mixed, types


def make_db(rnd):
    with int_keys(rnd):
        db = Db(rnd)
    classes = [r[0] for r in db.con.execute(
        "SELECT DISTINCT typeof(k1) FROM n0 UNION SELECT DISTINCT typeof(k2) FROM n2")]
    assert sorted(classes) == ["integer", "null"], classes
    for t in ("t3", "n3"):  # surely a real key in t3's
        db.con.execute("INSERT INTO %s VALUES(2.5, 1.5, 'a', 'b', 1.0), (2, '1', 'a', 'b', 2.0)" % t)
    return db


def native_pair(sql):
    return (sql.format(**{"t%d" % t: "t%d" % t for t in range(NTAB)}),
            sql.format(**{"t%d" % t: "n%d" % t for t in range(NTAB)}))


def test_inner_and_left_joins_equal_native():
    planned = total = 0
    for seed in range(6):
        rnd = random.Random(1700 + seed)
        db = make_db(rnd)
        for step in range(50):
            if rnd.random() < 0.5:
                sql = join_plan.statement(rnd, db.cols)
            else:
                sql, _ = left_plan.statement(rnd, db.cols)
            mine, native = native_pair(sql)
            same_as_native(db.con, mine, native, "seed %d step %d" % (seed, step))
            total += 1
            planned += explain(db.con, mine)["plan"].startswith("join")
        db.con.close()
    assert planned > total // 2, "%d of %d joins planned" % (planned, total)


def test_exists_and_not_exists_equal_native():
    planned = total = 0
    for seed in range(6):
        rnd = random.Random(1800 + seed)
        db = make_db(rnd)
        for step in range(50):
            t = rnd.randrange(NTAB)
            sql = "SELECT x0.k1, x0.k2, x0.r FROM {t%d} AS x0" % t
            if rnd.random() < 0.5:
                sql = join_plan.statement(rnd, db.cols)
            aliases = ["x%d" % i for i in range(sql.count(" AS x"))]
            terms = [exists_term(rnd, aliases, "{t%d}" % rnd.randrange(NTAB))
                     for _ in range(rnd.randint(1, 2))]
            mine, native = native_pair(with_terms(sql, terms))
            same_as_native(db.con, mine, native, "seed %d step %d" % (seed, step))
            total += 1
            e = explain(db.con, mine)
            planned += e["plan"].startswith("join") and "EXISTS" in e["why"]
        db.con.close()
    assert planned > total // 3, "%d of %d queries planned with semi-joins" % (planned, total)
