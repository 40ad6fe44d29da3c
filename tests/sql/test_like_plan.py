"""LIKE, GLOB and NOT IN pushed by the planner (planner/split.c).

"column [NOT] LIKE|GLOB 'pattern'" and "column NOT IN (constants)" run on
the device, exactly: the planner asks the connection how its LIKE and GLOB
behave (PRAGMA case_sensitive_like, whether a BLOB matches as text) and
leaves the term to SQLite when the operator is not SQLite's own. Random
terms over columns of every affinity holding every storage class and NULLs,
through pushdown views (one table, and a join), must answer as native
tables; the pushed ones must show in csq_explain.
"""
import random

from harness import connect
from test_join_plan import answer, explain, via_view

VALUES = [None, "abc", "ABC", "a_c", "a%c", "xyz", "Abc ", "", "é", "É", 12, 12.5, -3, 0, "12",
          b"abc", b"\x00a", "hello world", "Hello", "h_llo", "[x]", "a*b"]
PATTERNS = ["a%", "A%", "%c", "_bc", "%", "", "a\\_c", "1%", "%.5", "h_llo", "%o%", "é", "É%",
            "[x]", "a*b", None]
GLOBS = ["a*", "A*", "*c", "?bc", "*", "1*", "[a-c]*", "*[xX]*", "h?llo", "a\\*b", None]


def setup(con):
    decl = "i INTEGER, r REAL, n NUMERIC, t TEXT, b BLOB, u"
    con.execute("CREATE VIRTUAL TABLE a USING csq(%s, pushdown='always')" % decl)
    con.execute("CREATE TABLE na(%s)" % decl)
    con.execute("CREATE VIRTUAL TABLE j USING csq(i INTEGER, w TEXT)")
    con.execute("CREATE TABLE nj(i INTEGER, w TEXT)")
    rnd = random.Random(4)
    rows = [tuple(rnd.choice(VALUES) for _ in range(6)) for _ in range(600)]
    rows = [(i % 50,) + r[1:] for i, r in enumerate(rows)]
    for t in ("a", "na"):
        con.executemany("INSERT INTO %s VALUES(?,?,?,?,?,?)" % t, rows)
    for t in ("j", "nj"):
        con.executemany("INSERT INTO %s VALUES(?,?)" % t, [(i, "w%d" % i) for i in range(0, 50, 3)])


def lit(v):
    return "NULL" if v is None else "'%s'" % v.replace("'", "''")


def term(rnd):
    col = rnd.choice(["i", "r", "n", "t", "b", "u"])
    kind = rnd.randrange(3)
    neg = rnd.choice(["", "NOT "])
    if kind == 0:
        return "a.%s %sLIKE %s" % (col, neg, lit(rnd.choice(PATTERNS)))
    if kind == 1:
        return "a.%s %sGLOB %s" % (col, neg, lit(rnd.choice(GLOBS)))
    vals = ", ".join(rnd.choice(["12", "12.5", "'12'", "'abc'", "NULL", "x'616263'", "0", "'ABC'"])
                     for _ in range(rnd.randint(1, 3)))
    return "a.%s NOT IN (%s)" % (col, vals)


def check(con, rnd, n, pragma):
    pushed = 0
    for step in range(n):
        w = " AND ".join(term(rnd) for _ in range(rnd.randint(1, 2)))
        shape = rnd.randrange(3)
        if shape == 0:
            q = "SELECT a.t, count(*), sum(a.i) FROM {a} AS a WHERE %s GROUP BY 1" % w
        elif shape == 1:
            q = "SELECT a.i, a.t, a.b, a.u FROM {a} AS a WHERE %s" % w
        else:
            q = "SELECT j.w, count(*) FROM {a} AS a JOIN {j} AS j ON a.i = j.i WHERE %s GROUP BY 1" % w
        mine, native = q.format(a="a", j="j"), q.format(a="na", j="nj")
        got, gerr = via_view(con, mine)
        want, werr = answer(con, native)
        assert (gerr is None) == (werr is None) and got == want, (pragma, mine, got[:5] if got else gerr,
                                                                  want[:5] if want else werr)
        e = explain(con, mine)
        pushed += e["plan"] != "host"
    return pushed


def test_like_glob_not_in_equal_native():
    con = connect()
    setup(con)
    rnd = random.Random(11)
    pushed = check(con, rnd, 150, "default")
    assert pushed > 100, pushed
    con.execute("PRAGMA case_sensitive_like = ON")
    pushed = check(con, rnd, 80, "case_sensitive_like")
    assert pushed > 50, pushed
    con.execute("PRAGMA case_sensitive_like = OFF")
    print("pushed: %d" % pushed)


def test_a_like_of_its_own_stays_with_sqlite():
    """Through the planner and through SQLite's own plan (xBestIndex)."""
    con = connect()
    setup(con)
    # an application's like(): the device cannot know what it does
    con.create_function("like", 2, lambda p, v: 1 if v is not None and str(p) in str(v) else 0)
    q = "SELECT count(*) FROM {a} AS a WHERE a.t LIKE 'b'"
    mine, native = q.format(a="a"), q.format(a="na")
    assert via_view(con, mine) == answer(con, native)
    e = explain(con, mine)
    assert e["plan"] == "host" or "LIKE" in e["host"], e
    # as written too: SQLite's own table scan must not pre-filter with the device's LIKE
    plan = " ".join(r[-1] for r in con.execute("EXPLAIN QUERY PLAN " + mine))
    assert ":like:" not in plan, plan
    assert con.execute(mine).fetchall() == con.execute(native).fetchall()


def test_pushed_like_is_in_the_device_program():
    con = connect()
    setup(con)
    e = explain(con, "SELECT count(*) FROM a WHERE t LIKE 'a%' AND i NOT IN (1, 2)")
    assert e["plan"] == "device+host" and "LIKE" not in e["host"] and "NOT IN" not in e["host"], e


def test_prefix_patterns_at_the_ends_of_short_text():
    """A prefix pattern ('13*', 'ab%') over a column of distinct texts is
    compared with each text's first bytes: texts equal to the prefix, one
    byte short of it, one longer, with a NUL inside or right after it, in
    the other case, empty, NULL; LIKE folded or not, NOT too."""
    con = connect()
    con.execute("CREATE VIRTUAL TABLE p USING csq(t TEXT, pushdown='always')")
    con.execute("CREATE TABLE np(t TEXT)")
    rnd = random.Random(31)
    base = ["13", "1", "", "13x", "x13", "1\x003", "13\x00", "ab", "AB", "aB", "a", "abc", "Ab\x00c"]
    rows = [(t,) for t in base] + [(None,)] * 3
    rows += [("%s%d" % (rnd.choice(["13", "ab", "AB", "1", "z"]), i),) for i in range(3000)]
    for name in ("p", "np"):
        con.executemany("INSERT INTO %s VALUES(?)" % name, rows)
    n = 0
    for pragma in ("OFF", "ON"):
        con.execute("PRAGMA case_sensitive_like = %s" % pragma)
        for w in ("t GLOB '13*'", "t GLOB '1*'", "t NOT GLOB 'ab*'", "t LIKE 'ab%'", "t LIKE '13%'",
                  "t NOT LIKE 'AB%'", "t LIKE 'abc%'", "t GLOB 'ab*' OR t GLOB '13*'"):
            for q in ("SELECT count(*) FROM {p} WHERE " + w, "SELECT t FROM {p} WHERE " + w):
                mine, native = q.format(p="p"), q.format(p="np")
                got, gerr = via_view(con, mine)
                want, werr = answer(con, native)
                assert (got, gerr) == (want, werr), (pragma, mine, got, want)
                n += explain(con, mine)["plan"].startswith("device")
    assert n >= 10, n


def test_segment_patterns_over_long_text_equal_native():
    """Patterns of literals and '%' ('%special%requests%') are searched for
    segment by segment, sixteen places at a time where the text is long:
    random texts of 0..90 bytes over a few letters of both cases, '@',
    '%', a non-ASCII letter and a NUL, against segments of 1..6 bytes
    anchored or not, folded (LIKE) or not (GLOB, case_sensitive_like)."""
    con = connect()
    decl = "t TEXT, b BLOB"
    con.execute("CREATE VIRTUAL TABLE s USING csq(%s, pushdown='always')" % decl)
    con.execute("CREATE TABLE ns(%s)" % decl)
    rnd = random.Random(29)
    alpha = ["a", "b", "A", "B", "s", "S", "@", "%", "\u00e9", "\x00", " "]
    rows = []
    for _ in range(800):
        t = "".join(rnd.choice(alpha) for _ in range(rnd.randrange(91)))
        rows.append((t, t.encode() if rnd.random() < 0.2 else None))
    for name in ("s", "ns"):
        con.executemany("INSERT INTO %s VALUES(?,?)" % name, rows)

    def seg():
        return "".join(rnd.choice("abABs@") for _ in range(rnd.randint(1, 6)))

    pushed = 0
    for pragma in ("OFF", "ON"):
        con.execute("PRAGMA case_sensitive_like = %s" % pragma)
        for step in range(120):
            segs = [seg() for _ in range(rnd.randint(1, 3))]
            glob = rnd.random() < 0.3
            wild = "*" if glob else "%"
            pat = wild.join(segs)
            if rnd.random() < 0.7:
                pat = wild + pat
            if rnd.random() < 0.7:
                pat = pat + wild
            col = rnd.choice(["t", "t", "b"])
            w = "x.%s %s%s '%s'" % (col, rnd.choice(["", "NOT "]), "GLOB" if glob else "LIKE", pat)
            for q in ("SELECT count(*) FROM {s} AS x WHERE " + w,
                      "SELECT x.t, x.b FROM {s} AS x WHERE " + w):
                mine, native = q.format(s="s"), q.format(s="ns")
                got, gerr = via_view(con, mine)
                want, werr = answer(con, native)
                assert gerr is None and werr is None and got == want, (pragma, mine, got[:3], want[:3])
                pushed += explain(con, mine)["plan"] != "host"
    con.execute("PRAGMA case_sensitive_like = OFF")
    assert pushed > 200, pushed  # the counts; SQLite pushes the rows' LIKE itself


def test_substr_terms_equal_native():
    """substr(column, p[, n]) [NOT] IN ('L', ...), = 'L' and <> 'L' run on
    the device as GLOBs of the column's text: over columns of every
    affinity holding texts of digits, GLOB's own characters, a non-ASCII
    letter and a NUL, numbers, BLOBs and NULLs, through the one-table
    planner and a join, as native tables answer."""
    con = connect()
    decl = "i INTEGER, r REAL, t TEXT, b BLOB, u"
    con.execute("CREATE VIRTUAL TABLE s USING csq(%s, pushdown='always')" % decl)
    con.execute("CREATE TABLE ns(%s)" % decl)
    con.execute("CREATE VIRTUAL TABLE j USING csq(i INTEGER, w TEXT)")
    con.execute("CREATE TABLE nj(i INTEGER, w TEXT)")
    rnd = random.Random(31)
    alpha = ["1", "3", "1", "3", "a", "*", "?", "[", "\u00e9", "\x00"]

    def value():
        k = rnd.randrange(10)
        if k == 0:
            return None
        if k == 1:
            return rnd.choice([13, 131, -13, 1, 0])
        if k == 2:
            return rnd.choice([1.5, 13.25, -1.0, 1e20])
        if k == 3:
            return "".join(rnd.choice(alpha) for _ in range(rnd.randrange(4))).encode()
        return "".join(rnd.choice(alpha) for _ in range(rnd.randrange(5)))

    rows = [(k % 20,) + tuple(value() for _ in range(4)) for k in range(700)]
    for name in ("s", "ns"):
        con.executemany("INSERT INTO %s VALUES(?,?,?,?,?)" % name, rows)
    for name in ("j", "nj"):
        con.executemany("INSERT INTO %s VALUES(?,?)" % name, [(k, "w%d" % k) for k in range(0, 20, 3)])
    lits = ["'13'", "'1'", "''", "'3'", "'1*'", "'?'", "'[1'", "'a1'", "'131'", "'1.'", "'-1'",
            "'\u00e9'", "NULL", "13"]
    pushed = 0
    for step in range(400):
        col = rnd.choice(["i", "r", "t", "b", "u"])
        args = "%d, %d" % (rnd.randint(1, 3), rnd.randint(1, 3)) if rnd.random() < 0.8 else \
            "%d" % rnd.randint(1, 3)
        call = "%s(x.%s, %s)" % (rnd.choice(["substr", "substr", "substring"]), col, args)
        form = rnd.randrange(4)
        if form < 2:
            w = "%s %sIN (%s)" % (call, "NOT " if form else "",
                                  ", ".join(rnd.choice(lits) for _ in range(rnd.randint(1, 4))))
        else:
            w = "%s %s %s" % (call, "=" if form == 2 else "<>", rnd.choice(lits))
        shape = rnd.randrange(3)
        if shape == 0:
            q = "SELECT count(*), sum(x.i) FROM {s} AS x WHERE %s" % w
        elif shape == 1:
            q = "SELECT x.i, x.t, x.b, x.u FROM {s} AS x WHERE %s" % w
        else:
            q = "SELECT j.w, count(*) FROM {s} AS x JOIN {j} AS j ON x.i = j.i WHERE %s GROUP BY 1" % w
        mine, native = q.format(s="s", j="j"), q.format(s="ns", j="nj")
        got, gerr = via_view(con, mine)
        want, werr = answer(con, native)
        assert gerr is None and werr is None and got == want, (mine, got[:4], want[:4])
        e = explain(con, mine)
        host = e.get("host", "")
        pushed += e["plan"] != "host" and "substr" not in host.split("FROM")[-1]
    assert pushed > 150, pushed


def test_substr_of_its_own_stays_with_sqlite():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE s USING csq(t TEXT, pushdown='always')")
    con.execute("CREATE TABLE ns(t TEXT)")
    for name in ("s", "ns"):
        con.executemany("INSERT INTO %s VALUES(?)" % name, [("13x",), ("31y",), ("x13",)])
    e = explain(con, "SELECT count(*) FROM s WHERE substr(t, 1, 2) IN ('13', '31')")
    assert "substr" not in e["host"], e
    # an application's substr(): the device cannot know what it does
    con.create_function("substr", 3, lambda v, p, n: None if v is None else str(v)[-n:])
    q = "SELECT count(*) FROM {s} WHERE substr(t, 1, 2) IN ('13', '3x')"
    assert via_view(con, q.format(s="s")) == answer(con, q.format(s="ns"))
    e = explain(con, q.format(s="s"))
    assert e["plan"] == "host" or "substr" in e["host"], e
