"""A join's GROUP BY by one table's unique key alone (planner/join.c
jp_key_group, vtab/query.c key_group_ok).

TPC-H Q10 groups its joined rows by c_custkey and six more columns of
customer and nation. When the GROUP BY keys include several plain columns
of one build side, one of them INTEGER, the plan keeps a second host
statement that groups by that one alone among them; it runs when that
column's values in the table's rows turn out unique integers, for then the
table's other columns hold one value per group (SQLite's bare columns give
it). Duplicate keys, a REAL or TEXT key, NULLs, a LEFT JOIN's missing rows,
the keys of other tables beside them: random statements answer as native
tables do, and the counter key_groupings says when the shorter GROUP BY ran.
"""
import os
import random

from harness import connect, tmpdir
from test_join_agg import same_in_shells
from test_join_plan import answer, explain, make_pair, via_view

CUST_KEYS = ["c.ck", "c.name", "c.bal", "c.seg", "c.nk"]
OTHER_KEYS = ["n.nname", "o.day"]
AGGS = ["sum(o.price)", "count(*)", "min(o.day)", "max(o.price)", "avg(o.price)", "total(o.q)",
        "count(DISTINCT o.q)", "sum(o.q)"]


def make(con, rnd, kind, n_cust=2500, n_ord=6000):
    """kind: 'unique' keys, 'dup' (one key twice, other columns differing),
'real' (a key 5.5), 'text' (a key '7'), 'null' (a NULL key)."""
    cust = [(k, rnd.choice([None, "Ann%d" % (k % 97), "bob%d" % (k % 89), "Bob", "", 7]),
             rnd.choice([None, rnd.randrange(10000) / 4.0, 3]), rnd.choice(["A", "B", None, 1]),
             rnd.randrange(12)) for k in range(1, n_cust + 1)]
    if kind == "dup":
        k = rnd.randrange(1, n_cust)
        cust.append((k, "twin", 1.5, "Z", 3))
    elif kind == "real":
        cust[4] = (5.5,) + cust[4][1:]  # 5.0 would be stored as 5
    elif kind == "text":
        cust[6] = ("x7",) + cust[6][1:]
    elif kind == "null":
        cust.append((None, "nobody", 2.0, "A", 1))
    rnd.shuffle(cust)
    make_pair(con, "cust", "ck INTEGER, name TEXT, bal REAL, seg TEXT, nk INTEGER", cust, ", rowgroup=900")
    make_pair(con, "nat", "nk INTEGER, nname TEXT", [(k, rnd.choice(["FR", "DE", None, "fr"])) for k in range(10)])
    make_pair(con, "ord", "ok INTEGER, ck INTEGER, day TEXT, price REAL, q INTEGER",
              [(i, rnd.randrange(1, n_cust + 60), "199%d-0%d" % (rnd.randrange(4), rnd.randrange(1, 10)),
                rnd.choice([None, rnd.randrange(100000) / 8.0]), rnd.choice([None, rnd.randrange(50)]))
               for i in range(n_ord)], ", rowgroup=1500")


def native(sql):
    return sql.replace("ord AS o", "nord AS o").replace("cust AS c", "ncust AS c").replace("nat AS n", "nnat AS n")


def statement(rnd):
    keys = rnd.sample(CUST_KEYS, rnd.randint(2, 4))
    if rnd.random() < 0.7 and "c.ck" not in keys:
        keys[0] = "c.ck"
    if rnd.random() < 0.3:
        keys.append(rnd.choice(OTHER_KEYS))
    rnd.shuffle(keys)
    aggs = rnd.sample(AGGS, rnd.randint(1, 3))
    sel = keys + aggs
    if rnd.random() < 0.3:
        sel.append("upper(c.name)")  # an expression of a key column
    join = rnd.choice(["FROM ord AS o, cust AS c, nat AS n WHERE o.ck = c.ck AND c.nk = n.nk",
                       "FROM ord AS o JOIN cust AS c ON o.ck = c.ck JOIN nat AS n ON c.nk = n.nk",
                       "FROM ord AS o LEFT JOIN cust AS c ON o.ck = c.ck, nat AS n WHERE o.q % 10 = n.nk"])
    sql = "SELECT %s %s" % (", ".join(sel), join)
    if rnd.random() < 0.3:
        sql += rnd.choice([" AND o.q > 5", " AND c.bal IS NOT NULL", " AND o.day >= '1991'"])
    sql += " GROUP BY %s" % ", ".join(keys)
    if rnd.random() < 0.3:
        sql += " HAVING count(*) > %d" % rnd.randrange(3)
    if rnd.random() < 0.5:
        # every column after the first: LIMIT then cuts where native does
        sql += " ORDER BY %d DESC, %s" % (len(keys) + 1, ", ".join(str(i + 1) for i in range(len(sel))))
        if rnd.random() < 0.4:
            sql += " LIMIT %d" % rnd.randint(1, 20)
    return sql


def key_groupings(con):
    return con.execute("SELECT value FROM csq_stats WHERE name = 'key_groupings'").fetchone()[0]


def test_random_statements_equal_native():
    taken = {"unique": 0, "dup": 0, "real": 0, "text": 0, "null": 0}
    planned = 0
    seed = 0
    for kind in ["unique", "dup", "unique", "real", "text", "null", "unique"]:
        seed += 1
        rnd = random.Random(seed)
        con = connect()
        make(con, rnd, kind)
        for step in range(25):
            sql = statement(rnd)
            before = key_groupings(con)
            got, gerr = via_view(con, sql)
            want, werr = answer(con, native(sql))
            ctx = "%s seed %d step %d\n  %s" % (kind, seed, step, sql)
            assert (gerr is None) == (werr is None), "%s\n  csq %r native %r" % (ctx, gerr, werr)
            assert got == want, "%s\n  csq %d %s\n  native %d %s" % (ctx, len(got), got[:3], len(want), want[:3])
            taken[kind] += key_groupings(con) - before
            planned += "key grouping" in explain(con, sql)
        con.close()
    # the other kinds may run it too where a filter or a join filter kept
    # the odd row out of the table's rows: their answers are checked above
    assert taken["unique"] >= 10, taken
    assert planned >= 60, planned
    print("key groupings %s, %d planned" % (taken, planned))


def test_what_it_does_not_take():
    con = connect()
    make(con, random.Random(5), "unique")
    base = "FROM ord AS o, cust AS c, nat AS n WHERE o.ck = c.ck AND c.nk = n.nk"
    assert "key grouping" in explain(con, "SELECT c.ck, c.name, sum(o.price) %s GROUP BY c.ck, c.name" % base)
    for sql in [
            # one key of the table: nothing to leave out
            "SELECT c.ck, n.nname, sum(o.price) %s GROUP BY c.ck, n.nname" % base,
            # no INTEGER column among the table's keys
            "SELECT c.name, c.seg, sum(o.price) %s GROUP BY c.name, c.seg" % base,
            # an expression, not a column
            "SELECT c.ck + 0, c.name, sum(o.price) %s GROUP BY c.ck + 0, c.name" % base,
            # the probe side's columns: its rows are never held to be checked
            "SELECT o.ok, o.day, sum(o.price) %s GROUP BY o.ok, o.day" % base]:
        assert "key grouping" not in explain(con, sql), sql
        got, gerr = via_view(con, sql)
        want, werr = answer(con, native(sql))
        assert gerr is None and werr is None and got == want, (sql, gerr, got[:3], want[:3])


def test_writes_between_runs_and_clients():
    """A view over the shape runs by the key alone until a duplicate key is
    written (executescript), then by every key, then by the key again."""
    d = tmpdir()
    db = os.path.join(d, "keys.db")
    con = connect(db)
    make(con, random.Random(9), "unique")
    q = ("SELECT c.ck, c.name, c.bal, n.nname, sum(o.price) AS rev, count(*) FROM ord AS o, cust AS c, "
         "nat AS n WHERE o.ck = c.ck AND c.nk = n.nk GROUP BY c.ck, c.name, c.bal, n.nname "
         "ORDER BY rev DESC, 1 LIMIT 30")
    con.execute("CREATE VIRTUAL TABLE kv USING csq_query('%s')" % q.replace("'", "''"))
    for script, by_key in [
            ("", True),
            ("INSERT INTO cust VALUES(17, 'other', 9.5, 'A', 2); INSERT INTO ncust VALUES(17, 'other', 9.5, 'A', 2);",
             False),
            ("BEGIN; DELETE FROM cust WHERE name = 'other'; DELETE FROM ncust WHERE name = 'other'; COMMIT;", True),
            ("UPDATE cust SET ck = 5.5 WHERE ck = 5; UPDATE ncust SET ck = 5.5 WHERE ck = 5;", False)]:
        con.executescript(script)
        before = key_groupings(con)
        got = con.execute("SELECT * FROM kv").fetchall()
        want = con.execute(native(q)).fetchall()
        assert got == want, (script, got[:3], want[:3])
        assert (key_groupings(con) > before) == by_key, script
    con.execute("UPDATE cust SET ck = 5 WHERE ck = 5.5")
    con.execute("UPDATE ncust SET ck = 5 WHERE ck = 5.5")
    con.close()
    same_in_shells(db, "kv", native(q))
