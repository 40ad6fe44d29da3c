"""Join keys of TEXT and of no affinity (planner/join.c, jp_key_term).

"a.x = b.y" is a hash-join key when SQLite converts neither side: both
numeric, both TEXT, or both without affinity, and both BINARY. Random joins
over every pair of such columns and of the pairs SQLite converts (TEXT
against INTEGER, none against TEXT, NOCASE), with values of every storage
class ('1' and 1, 'a' and x'61', '' and NULL), must answer as native; the
same-affinity pairs must be planned, the others not. A build side with more
than 4096 distinct text keys sends a Bloom filter of them.
"""
import random

from harness import connect
from test_join_plan import explain, same_as_native

COLS = [("t1", "TEXT"), ("t2", "TEXT"), ("n1", ""), ("n2", "BLOB"), ("i1", "INTEGER"),
        ("c1", "TEXT COLLATE NOCASE")]
VALUES = ["a", "A", "1", 1, 1.0, "1.0", "", None, b"a", b"1", "b ", "x%d", 2.5]


def value(rnd):
    v = rnd.choice(VALUES)
    return v % rnd.randrange(30) if v == "x%d" else v


def same_affinity(c1, c2):
    aff = {"TEXT": "B", "": "A", "BLOB": "A", "INTEGER": "D", "TEXT COLLATE NOCASE": "N"}
    a, b = aff[dict(COLS)[c1]], aff[dict(COLS)[c2]]
    return a == b and a != "N"


def test_random_text_and_untyped_keys_equal_native():
    con = connect()
    body = ", ".join("%s %s" % c for c in COLS)
    rnd = random.Random(5150)
    for name, n in (("p", 400), ("q", 150), ("r", 60)):
        rows = [tuple(value(rnd) for _ in COLS) for _ in range(n)]
        con.execute("CREATE VIRTUAL TABLE %s USING csq(%s)" % (name, body))
        con.execute("CREATE TABLE n%s(%s)" % (name, body))
        for t in (name, "n" + name):
            con.executemany("INSERT INTO %s VALUES(%s)" % (t, ",".join("?" * len(COLS))), rows)
    planned = wanted = 0
    names = [c for c, _ in COLS]
    for step in range(200):
        a, b = rnd.choice(names), rnd.choice(names)
        sql = "SELECT x.%s, y.%s, count(*) FROM {p} AS x, {q} AS y WHERE x.%s = y.%s GROUP BY 1, 2" % (
            a, b, a, b)
        if rnd.random() < 0.4:
            c, d = rnd.choice(names), rnd.choice(names)
            sql = ("SELECT x.%s, z.%s FROM {p} AS x, {q} AS y, {r} AS z WHERE x.%s = y.%s AND y.%s = z.%s"
                   % (a, d, a, b, c, d))
            want = same_affinity(a, b) and same_affinity(c, d)
        else:
            want = same_affinity(a, b)
        mine, native = sql.format(p="p", q="q", r="r"), sql.format(p="np", q="nq", r="nr")
        same_as_native(con, mine, native, "step %d" % step)
        got = explain(con, mine)["plan"].startswith("join")
        assert got == want, (mine, explain(con, mine))
        planned += got
        wanted += want
    assert planned > 20, planned
    print("%d of 200 joins planned on keys SQLite does not convert" % planned)


def test_many_text_keys_send_a_bloom_filter():
    con = connect()
    for name in ("big", "dim"):
        con.execute("CREATE VIRTUAL TABLE %s USING csq(s TEXT, v INTEGER)" % name)
        con.execute("CREATE TABLE n%s(s TEXT, v INTEGER)" % name)
    big = [("key%d" % (i % 9000), i) for i in range(30000)]
    dim = [("key%d" % (i * 2), i) for i in range(5000)] + [("KEY2", 1), (None, 2), ("4", 3)]
    for t, rows in (("big", big), ("nbig", big), ("dim", dim), ("ndim", dim)):
        con.executemany("INSERT INTO %s VALUES(?, ?)" % t, rows)
    sql = "SELECT count(*), sum(b.v), sum(d.v) FROM {b} AS b, {d} AS d WHERE b.s = d.s"
    mine, native = sql.format(b="big", d="dim"), sql.format(b="nbig", d="ndim")
    same_as_native(con, mine, native, sql)
    # 5003 distinct keys: past the IN list's 4096, the scan of big gets a
    # Bloom filter, whose text hashes must agree with the host's
    e = explain(con, mine)
    assert e["plan"].startswith("join") and "Bloom" in e["join filter"], e
