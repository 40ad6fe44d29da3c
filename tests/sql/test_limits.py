"""Limits and hostile input: clear errors or right answers, never a crash."""
import os
import sqlite3

from harness import connect, tmpdir, expect_error


def test_huge_values_and_many_columns():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b BLOB, c TEXT)")
    big = os.urandom(32 * 1024 * 1024)
    con.execute("INSERT INTO t VALUES(1, ?, ?)", (big, "z" * (8 * 1024 * 1024)))
    r = con.execute("SELECT b, length(c) FROM t WHERE a = 1").fetchone()
    assert r[0] == big and r[1] == 8 * 1024 * 1024
    # SQLite counts a virtual table's module arguments against SQLITE_LIMIT_COLUMN
    # (2000, and a few more arguments count): csq tables take up to 1994 columns
    cols = ", ".join("c%d INTEGER" % i for i in range(1994))
    con.execute("CREATE VIRTUAL TABLE w USING csq(%s)" % cols)
    con.execute("INSERT INTO w(c0, c1993) VALUES(1, 2)")
    assert con.execute("SELECT c0, c1000, c1993 FROM w").fetchall() == [(1, None, 2)]
    assert con.execute("SELECT count(*) FROM w WHERE c1993 = 2").fetchone() == (1,)


def test_long_in_lists_are_left_to_sqlite():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, pushdown='always')")
    con.executemany("INSERT INTO t VALUES(?)", [(i,) for i in range(20000)])
    vals = ",".join(str(i * 2) for i in range(10000))
    assert con.execute("SELECT count(*) FROM t WHERE a IN (%s)" % vals).fetchone() == (10000,)


def test_absurd_options_and_empty_tables():
    con = connect()
    for opt, frag in [("rowgroup=-5", "rowgroup"), ("rowgroup=99999999999", "rowgroup"),
                      ("device=''", "device"), ("pushdown='sometimes'", "pushdown"),
                      ("devices='a.csd,,b.csd'", "devices")]:
        expect_error(lambda: con.execute("CREATE VIRTUAL TABLE t USING csq(a, %s)" % opt), frag)
    con.execute("CREATE VIRTUAL TABLE e USING csq(a INTEGER, b TEXT, pushdown='always')")
    assert con.execute("SELECT count(*), sum(a), max(b) FROM e WHERE a > 0").fetchone() == (0, None, None)
    assert con.execute("SELECT * FROM e WHERE b LIKE 'x%'").fetchall() == []


def test_malformed_queries_for_views_and_explain():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER)")
    for arg in ["'SELEC * FROM t'", "'SELECT * FROM nosuch'", "''", "'SELECT 1; SELECT 2'",
                "'INSERT INTO t VALUES(1)'", "x'00'", "42"]:
        try:
            con.execute("CREATE VIRTUAL TABLE temp.v USING csq_query(%s)" % arg)
            con.execute("SELECT * FROM v").fetchall()
            con.execute("DROP TABLE temp.v")
        except sqlite3.Error as e:
            assert "csq_query" in str(e) or "syntax" in str(e) or "no such" in str(e), (arg, str(e))
    for arg in ["'SELEC'", "NULL", "'SELECT 1; SELECT 2'", "'SELECT ((((('", "x'ff00'", "'%s'" % ("(" * 5000)]:
        rows = con.execute("SELECT * FROM csq_explain(%s)" % arg).fetchall()
        assert rows == [] or rows[0][0] == "plan", (arg, rows)


def test_views_and_triggers_over_csq_tables():
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT)")
    con.execute("CREATE TABLE log(a)")
    con.execute("CREATE VIEW big AS SELECT a, b FROM t WHERE a > 10")
    con.execute("CREATE TRIGGER tr AFTER INSERT ON log BEGIN INSERT INTO t VALUES(new.a, 'from trigger'); END")
    con.execute("INSERT INTO log VALUES(42)")
    con.execute("INSERT INTO t VALUES(5, 'small')")
    assert con.execute("SELECT * FROM big").fetchall() == [(42, "from trigger")]


def test_device_path_never_opens_other_files():
    d = tmpdir()
    victim = os.path.join(d, "victim.txt")
    with open(victim, "w") as f:
        f.write("precious")
    con = connect()
    expect_error(lambda: con.execute("CREATE VIRTUAL TABLE t USING csq(a, device='%s')" % victim),
                 "not a csq device image")
    assert open(victim).read() == "precious"
    # a database whose schema points a csq table at a foreign file
    db = os.path.join(d, "x.db")
    c2 = connect(db)
    c2.execute("CREATE VIRTUAL TABLE t USING csq(a, device='%s')" % os.path.join(d, "real.csd"))
    c2.close()
    raw = sqlite3.connect(db)
    raw.execute("PRAGMA writable_schema=ON")
    raw.execute("UPDATE sqlite_master SET sql = replace(sql, 'real.csd', 'victim.txt')")
    raw.commit()
    raw.close()
    c3 = connect(db)
    expect_error(lambda: c3.execute("SELECT * FROM t").fetchall(), "not a csq device image")
    assert open(victim).read() == "precious"
