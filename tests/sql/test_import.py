"""csq_import: bulk loads from CSV files and queries. Values and types row
by row as the stock sqlite3 shell's .import gives a native table; malformed
CSV of every kind; a load that fails or is killed leaves the table as it
was; the three ways in (Python, the sqlite3 shell, build/csq)."""
import gc
import os
import random
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import time

from harness import connect, tmpdir, expect_error, same_rows, Skip, EXT

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("CSQ_BUILD", os.path.join(HERE, "..", "..", "build"))
TYPES = ["INTEGER", "TEXT", "REAL", "NUMERIC", "", "BLOB", "VARCHAR(10)", "DOUBLE"]

# texts whose conversion under each affinity is where importers go wrong
EDGE = ["", " 12 ", "12", "-0", "+5", "007", "1e3", "1E-2", "0x10", "1.", ".5", ".", "-", "e5",
        "12abc", "3.0", "-0.0", "9223372036854775807", "9223372036854775808",
        "-9223372036854775808", "123456789012345678", "1234567890123456789.5", "0.1",
        "21168.23", "1e400", "inf", "NaN", " ", "\t7\t", "1 2", "abc", "é", "x" * 5000,
        "\x01\x02 binary-ish \x7f", "0.30000000000000004", "100000000000000000000"]


def rows_of(con, table, ncol):
    cols = ", ".join("c%d, typeof(c%d)" % (i, i) for i in range(ncol))
    out = []
    for r in con.execute("SELECT rowid, %s FROM %s ORDER BY rowid" % (cols, table)):
        # REALs compared by their bits: -0.0 and the last digit matter
        out.append(tuple(struct.pack("<d", v) if isinstance(v, float) else v for v in r))
    return out


def csv_field(v, sep, rnd):
    if any(c in v for c in (sep, '"', "\n", "\r")) or (v and rnd.random() < 0.2):
        return '"' + v.replace('"', '""') + '"'
    return v


def write_csv(path, rows, sep=",", crlf=False):
    rnd = random.Random(7)
    nl = "\r\n" if crlf else "\n"
    with open(path, "w", newline="") as f:
        for r in rows:
            f.write(sep.join(csv_field(v, sep, rnd) for v in r) + nl)


def stock_import(db, table, path, sep=","):
    """The stock shell's .import into an existing native table."""
    exe = shutil.which("sqlite3")
    if not exe:
        raise Skip("no sqlite3 shell")
    mode = ".mode csv" if sep == "," else ".mode csv\n.separator %s" % sep
    r = subprocess.run([exe, db], input="%s\n.import %s %s\n" % (mode, path, table), text=True,
                       capture_output=True, timeout=120)
    assert r.returncode == 0 and "rror" not in r.stderr, r.stderr


def random_text(rnd):
    k = rnd.randrange(10)
    if k < 3:
        return rnd.choice(EDGE)
    if k == 3:
        return str(rnd.randrange(-10**6, 10**6))
    if k == 4:
        nd = rnd.randrange(1, 16)
        d = "".join(rnd.choice("0123456789") for _ in range(nd))
        p = rnd.randrange(nd + 1)
        return rnd.choice(["", "-"]) + d[:p] + "." + d[p:]
    if k == 5:
        return "%.17g" % rnd.uniform(-1e9, 1e9)
    if k == 6:
        return "a,b\nc\"d\"" * rnd.randrange(3)
    if k == 7:
        return "".join(rnd.choice("ab 1.e-|,\"") for _ in range(rnd.randrange(6)))
    if k == 8:
        return str(rnd.randrange(-2**63, 2**63))
    return "%d.%02d" % (rnd.randrange(100000), rnd.randrange(100))


def load_both(d, rows, ncol_types, sep=",", crlf=False, opts=""):
    path = os.path.join(d, "data.csv")
    write_csv(path, rows, sep, crlf)
    db = os.path.join(d, "x.db")
    coldefs = ", ".join("c%d %s" % (i, t) for i, t in enumerate(ncol_types))
    con = connect(db)
    con.execute("CREATE TABLE n(%s)" % coldefs)
    con.execute("CREATE VIRTUAL TABLE t USING csq(%s, rowgroup=512)" % coldefs)
    con.close()
    stock_import(db, "n", path, sep)
    con = connect(db)
    o = "separator=%s%s" % (sep, opts)
    n = con.execute("SELECT csq_import('t', ?, ?)", (path, o)).fetchone()[0]
    return con, n, path


def test_values_and_types_as_stock_import():
    """Every storage class and affinity edge case, quoted or not, with
    separators, quotes and newlines inside fields: what .import puts in a
    native table, row by row, typeof included."""
    rnd = random.Random(1)
    d = tmpdir()
    rows = [[random_text(rnd) for _ in TYPES] for _ in range(3000)]
    rows += [[e] * len(TYPES) for e in EDGE]
    con, n, _ = load_both(d, rows, TYPES)
    assert n == len(rows), n
    same_rows(rows_of(con, "t", len(TYPES)), rows_of(con, "n", len(TYPES)), "csq_import vs .import")


def test_pipe_separator_and_crlf():
    rnd = random.Random(2)
    d = tmpdir()
    rows = [[random_text(rnd) for _ in range(4)] for _ in range(1500)]
    types = ["INTEGER", "REAL", "TEXT", "NUMERIC"]
    con, n, _ = load_both(d, rows, types, sep="|", crlf=True)
    assert n == len(rows)
    same_rows(rows_of(con, "t", 4), rows_of(con, "n", 4), "'|' and CRLF")


def test_decimals_round_as_sqlite():
    """Plain decimals take csq's fast path: each double must be SQLite's own,
    bit for bit (SQLite 3.40 rounds through long double; csq learns how)."""
    rnd = random.Random(3)
    con = connect()
    vals = []
    for _ in range(60000):
        nd = rnd.randrange(1, 16)
        dg = "".join(rnd.choice("0123456789") for _ in range(nd))
        p = rnd.randrange(nd + 1)
        vals.append((rnd.choice(["", "-"]) + dg[:p] + "." + dg[p:],))
    con.execute("CREATE TABLE src(x TEXT)")
    con.executemany("INSERT INTO src VALUES(?)", vals)
    for ty in ("REAL", "NUMERIC", "INTEGER"):
        con.execute("CREATE TABLE n_%s(x %s)" % (ty, ty))
        con.execute("INSERT INTO n_%s SELECT x FROM src" % ty)
        con.execute("CREATE VIRTUAL TABLE t_%s USING csq(x %s)" % (ty, ty))
        assert con.execute("SELECT csq_import('t_%s', 'SELECT x FROM src')" % ty).fetchone()[0] == 60000
        q = "SELECT typeof(x), CASE typeof(x) WHEN 'real' THEN hex(CAST(x AS BLOB)) END, " \
            "printf('%%!.17g', x) FROM %s ORDER BY rowid"
        same_rows(con.execute(q % ("t_" + ty)).fetchall(), con.execute(q % ("n_" + ty)).fetchall(),
                  ty)
        # and all of them took the fast path (SQLite asked for none)
        p = con.execute("SELECT csq_import_progress()").fetchone()[0]
        assert p.endswith(",by_sqlite=0"), p


def test_header_null_and_quoted_empty():
    d = tmpdir()
    path = os.path.join(d, "h.csv")
    with open(path, "w") as f:
        f.write("a,b,c\n1,\\N,\"\"\n2,,\"\\N\"\n")
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, c TEXT)")
    assert con.execute("SELECT csq_import('t', ?, 'header=1,null=\\N')", (path,)).fetchone()[0] == 2
    assert con.execute("SELECT a, b, c FROM t ORDER BY a").fetchall() == [(1, None, ""), (2, "", "\\N")]
    con.execute("DELETE FROM t")
    # null= with nothing: empty unquoted fields are NULL, "" stays a string
    assert con.execute("SELECT csq_import('t', ?, 'header=1,null=')", (path,)).fetchone()[0] == 2
    assert con.execute("SELECT a, b, c FROM t ORDER BY a").fetchall() == [(1, "\\N", ""), (2, None, "\\N")]
    # by default nothing is NULL, as with .import
    con.execute("DELETE FROM t")
    con.execute("SELECT csq_import('t', ?, 'header=1')", (path,))
    assert con.execute("SELECT count(*) FROM t WHERE b IS NULL OR c IS NULL").fetchone()[0] == 0


def test_bom_and_last_line_without_newline():
    d = tmpdir()
    path = os.path.join(d, "b.csv")
    with open(path, "wb") as f:
        f.write(b"\xef\xbb\xbf1,x\n2,\"y\nz\"\n3,w")
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT)")
    assert con.execute("SELECT csq_import('t', ?)", (path,)).fetchone()[0] == 3
    assert con.execute("SELECT a, b FROM t").fetchall() == [(1, "x"), (2, "y\nz"), (3, "w")]


MALFORMED = [
    ('1,a\n2,"b\n3,c\n', "line 2, field 2", "no closing quote"),
    ('1,a\n2,"b"x\n3,c\n', "line 2, field 2", "must be doubled"),
    ('1,a\n2,b,c\n3,c\n', "line 2", "3 fields"),
    ('1,a\n2\n3,c\n', "line 2", "1 field"),
    ('1,a\n\n3,c\n', "line 2", "1 field"),
    ('1,"a\nb"\n2,"c"d\n', "line 3, field 2", "must be doubled"),
]


def test_malformed_fails_and_leaves_table():
    """Each kind of bad record fails the load with its line and field, and the
    table keeps exactly its rows, also when row groups were written already."""
    d = tmpdir()
    db = os.path.join(d, "m.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, rowgroup=100)")
    con.execute("INSERT INTO t VALUES(-1, 'before')")
    good = "".join("%d,g%d\n" % (i, i) for i in range(1000, 1500))  # five row groups first
    for k, (text, where, what) in enumerate(MALFORMED):
        path = os.path.join(d, "bad%d.csv" % k)
        with open(path, "w") as f:
            f.write(text)
        expect_error(lambda: con.execute("SELECT csq_import('t', ?)", (path,)).fetchone(), where, what)
        with open(path, "w") as f:
            f.write(good + text)
        expect_error(lambda: con.execute("SELECT csq_import('t', ?)", (path,)).fetchone(), what)
        assert con.execute("SELECT a, b FROM t").fetchall() == [(-1, "before")], k
    con.close()
    con = connect(db)
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 1


def test_skip_bad_counts():
    d = tmpdir()
    path = os.path.join(d, "s.csv")
    with open(path, "w") as f:
        f.write('1,a\n2,b,c\n3,"c"x\n4,d\n5,"e\n')
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT NOT NULL)")
    assert con.execute("SELECT csq_import('t', ?, 'skip_bad=1')", (path,)).fetchone()[0] == 2
    assert con.execute("SELECT a FROM t").fetchall() == [(1,), (4,)]
    p = con.execute("SELECT csq_import_progress()").fetchone()[0]
    assert "rows=2," in p and "skipped=3," in p and "running=0" in p, p
    st = dict(con.execute("SELECT name, value FROM csq_stats WHERE name LIKE 'import%'").fetchall())
    assert st == {"import_rows": 2, "import_rows_skipped": 3, "import_bytes": 26}, st
    # NOT NULL
    with open(path, "w") as f:
        f.write("7,x\n8,\\N\n")
    expect_error(lambda: con.execute("SELECT csq_import('t', ?, 'null=\\N')", (path,)).fetchone(),
                 "line 2, field 2", "NOT NULL")
    assert con.execute("SELECT csq_import('t', ?, 'null=\\N,skip_bad=1')", (path,)).fetchone()[0] == 1


def test_from_query_as_insert_select():
    rnd = random.Random(4)
    con = connect()
    con.execute("CREATE TABLE src(a, b, c, d)")
    vals = [(rnd.choice([None, 1, 2.5, "12", " 3 ", "x", b"\x00\x01", 1e300, -0.0, "1e3"]),
             rnd.randrange(-10**9, 10**9), str(rnd.random()), rnd.choice(["a", None, 7]))
            for _ in range(5000)]
    con.executemany("INSERT INTO src VALUES(?,?,?,?)", vals)
    coldefs = "a INTEGER, b TEXT, c REAL, d"
    con.execute("CREATE TABLE n(%s)" % coldefs)
    con.execute("CREATE VIRTUAL TABLE t USING csq(%s, rowgroup=700)" % coldefs)
    con.execute("INSERT INTO n SELECT * FROM src")
    assert con.execute("SELECT csq_import('t', 'SELECT * FROM src')").fetchone()[0] == 5000
    q = "SELECT rowid, a, typeof(a), b, typeof(b), c, typeof(c), d, typeof(d) FROM %s ORDER BY rowid"
    same_rows(con.execute(q % "t").fetchall(), con.execute(q % "n").fetchall(), "query")
    # appended after the rows there, rowids following them
    assert con.execute("SELECT csq_import('t', 'VALUES(1, 2, 3, 4)')").fetchone()[0] == 1
    assert con.execute("SELECT max(rowid), count(*) FROM t").fetchone() == (5001, 5001)
    expect_error(lambda: con.execute("SELECT csq_import('t', 'SELECT 1')").fetchone(),
                 "1 columns", "has 4")
    # a file whose name starts like a query is a file
    d = tmpdir()
    with open(os.path.join(d, "select.csv"), "w") as f:
        f.write("1,2,3,4\n")
    cwd = os.getcwd()
    os.chdir(d)
    try:
        assert con.execute("SELECT csq_import('t', 'select.csv')").fetchone()[0] == 1
    finally:
        os.chdir(cwd)


def test_refusals_and_errors():
    d = tmpdir()
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT)")
    con.execute("CREATE TABLE nat(a, b)")
    path = os.path.join(d, "r.csv")
    with open(path, "w") as f:
        f.write("1,x\n")
    expect_error(lambda: con.execute("SELECT csq_import('nat', ?)", (path,)).fetchone(), "not a csq table")
    expect_error(lambda: con.execute("SELECT csq_import('nosuch', ?)", (path,)).fetchone(), "no table nosuch")
    # names resolve as SQLite resolves them; "schema.table" names one
    con.execute("ATTACH ? AS aux", (os.path.join(d, "aux.db"),))  # its own device
    con.execute("CREATE VIRTUAL TABLE aux.t2 USING csq(a INTEGER, b TEXT)")
    con.execute("CREATE VIRTUAL TABLE aux.t USING csq(a INTEGER, b TEXT)")
    assert con.execute("SELECT csq_import('t2', ?)", (path,)).fetchone()[0] == 1
    assert con.execute("SELECT csq_import('aux.t', ?)", (path,)).fetchone()[0] == 1
    assert con.execute("SELECT (SELECT count(*) FROM aux.t), (SELECT count(*) FROM aux.t2), "
                       "(SELECT count(*) FROM main.t)").fetchone() == (1, 1, 0)
    con.execute("CREATE TEMP TABLE nat2(a, b)")
    con.execute("CREATE VIRTUAL TABLE nat2 USING csq(a, b)")  # main.nat2, hidden by temp.nat2
    expect_error(lambda: con.execute("SELECT csq_import('nat2', ?)", (path,)).fetchone(), "not a csq table")
    assert con.execute("SELECT csq_import('main.nat2', ?)", (path,)).fetchone()[0] == 1
    expect_error(lambda: con.execute("SELECT csq_import('t', ?)", (path + ".no",)).fetchone(), "cannot open")
    expect_error(lambda: con.execute("SELECT csq_import('t', ?, 'sep=|')", (path,)).fetchone(), "unknown option")
    expect_error(lambda: con.execute("SELECT csq_import('t', ?, 'separator=ab')", (path,)).fetchone(), "one byte")
    # inside BEGIN: the rows are the transaction's
    con.execute("BEGIN")
    con.execute("INSERT INTO t VALUES(0, 'in txn')")
    assert con.execute("SELECT csq_import('t', ?)", (path,)).fetchone()[0] == 1
    con.execute("COMMIT")
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 2
    # options: separator=, itself, tab by name
    with open(path, "w") as f:
        f.write("5\tt\n")
    assert con.execute("SELECT csq_import('t', ?, 'separator=tab,header=0')", (path,)).fetchone()[0] == 1
    with open(path, "w") as f:
        f.write("6,u\n")
    assert con.execute("SELECT csq_import('t', ?, 'separator=,,header=0')", (path,)).fetchone()[0] == 1
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 4


def test_integer_primary_key():
    """An INTEGER PRIMARY KEY gives the rowid, as with .import: NULL takes the
    next one; explicit keys must rise above every rowid before them."""
    d = tmpdir()
    path = os.path.join(d, "k.csv")
    con = connect()
    con.execute("CREATE VIRTUAL TABLE t USING csq(id INTEGER PRIMARY KEY, v TEXT, rowgroup=64)")
    with open(path, "w") as f:
        f.write("3,a\n\\N,b\n10,c\n 11 ,d\n\\N,e\n")
        f.write("".join("%d,r%d\n" % (i, i) for i in range(100, 400, 3)))
    con.execute("INSERT INTO t VALUES(1, 'first')")
    assert con.execute("SELECT csq_import('t', ?, 'null=\\N')", (path,)).fetchone()[0] == 105
    rows = con.execute("SELECT rowid, id, typeof(id), v FROM t ORDER BY rowid").fetchall()
    assert rows[:7] == [(1, 1, "integer", "first"), (3, 3, "integer", "a"), (4, 4, "integer", "b"),
                        (10, 10, "integer", "c"), (11, 11, "integer", "d"), (12, 12, "integer", "e"),
                        (100, 100, "integer", "r100")], rows[:7]
    assert con.execute("SELECT count(*) FROM t WHERE id = 397 AND v = 'r397'").fetchone()[0] == 1
    # a key at or below the rowids before it, or not an integer: the line and field
    for text, what in (("500,x\n450,y\n", "not above"), ("5,x\n", "not above"),
                       ("abc,x\n", "datatype mismatch"), ("1.5,x\n", "datatype mismatch")):
        with open(path, "w") as f:
            f.write(text)
        expect_error(lambda: con.execute("SELECT csq_import('t', ?)", (path,)).fetchone(), "field 1", what)
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 106
    # from a query; AUTOINCREMENT never reuses a rowid
    con.execute("CREATE VIRTUAL TABLE a USING csq(id INTEGER PRIMARY KEY AUTOINCREMENT, v)")
    con.execute("INSERT INTO a VALUES(50, 'x')")
    con.execute("DELETE FROM a")
    assert con.execute("SELECT csq_import('a', 'VALUES(NULL, 1), (60, 2), (NULL, 3)')").fetchone()[0] == 3
    assert con.execute("SELECT id, v FROM a ORDER BY id").fetchall() == [(51, 1), (60, 2), (61, 3)]


def test_inside_begin():
    """Inside BEGIN ... COMMIT a load joins the transaction: its rows are
    seen by the transaction, kept by COMMIT, dropped by ROLLBACK and by
    ROLLBACK TO a savepoint before it; a load that fails is undone and the
    transaction goes on, with its earlier writes."""
    d = tmpdir()
    db = os.path.join(d, "b.db")
    path = os.path.join(d, "b.csv")
    with open(path, "w") as f:
        f.write("".join("%d,r%d\n" % (i, i) for i in range(1000)))
    bad = os.path.join(d, "bad.csv")
    with open(bad, "w") as f:
        f.write("".join("%d,r%d\n" % (i, i) for i in range(500)) + '7,"open\n')
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, rowgroup=64)")
    con.execute("CREATE TABLE n(x)")
    con.execute("INSERT INTO t VALUES(-1, 'before')")
    count = lambda: con.execute("SELECT count(*) FROM t").fetchone()[0]
    con.execute("BEGIN")
    con.execute("INSERT INTO t VALUES(-2, 'in txn')")
    assert con.execute("SELECT csq_import('t', ?)", (path,)).fetchone()[0] == 1000
    assert count() == 1002
    con.execute("ROLLBACK")
    assert count() == 1
    con.execute("BEGIN")
    con.execute("INSERT INTO n VALUES(1)")
    con.execute("SAVEPOINT s")
    con.execute("INSERT INTO t VALUES(-3, 'kept')")
    con.execute("SAVEPOINT s2")
    assert con.execute("SELECT csq_import('t', ?)", (path,)).fetchone()[0] == 1000
    con.execute("ROLLBACK TO s2")
    assert count() == 2
    assert con.execute("SELECT csq_import('t', ?)", (path,)).fetchone()[0] == 1000
    expect_error(lambda: con.execute("SELECT csq_import('t', ?)", (bad,)).fetchone(), "no closing quote")
    assert count() == 1002
    con.execute("INSERT INTO t VALUES(-4, 'after')")
    con.execute("COMMIT")
    con.close()
    con = connect(db)
    assert con.execute("SELECT count(*), min(a), max(a) FROM t").fetchone() == (1003, -4, 999)
    assert con.execute("SELECT count(*) FROM n").fetchone()[0] == 1
    assert con.execute("SELECT count(*) FROM t WHERE b = 'kept'").fetchone()[0] == 1
    assert con.execute("SELECT count(DISTINCT rowid) FROM t").fetchone()[0] == 1003
    assert con.execute("SELECT rowid FROM t WHERE a = -4").fetchone()[0] == \
        1 + con.execute("SELECT max(rowid) FROM t WHERE a >= 0").fetchone()[0]
    # a load from the table itself reads it as it was when the load began
    con.execute("BEGIN")
    assert con.execute("SELECT csq_import('t', 'SELECT * FROM t')").fetchone()[0] == 1003
    con.execute("COMMIT")
    assert con.execute("SELECT count(*), count(DISTINCT rowid) FROM t").fetchone() == (2006, 2006)


def test_many_row_groups_persist():
    """Rows pass through the encode thread over many row groups, in order,
    and are there after reopening."""
    d = tmpdir()
    db = os.path.join(d, "p.db")
    path = os.path.join(d, "p.csv")
    with open(path, "w") as f:
        for i in range(20000):
            f.write("%d|%d.%02d|s%d\n" % (i, i % 1000, i % 100, i % 37))
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b REAL, c TEXT, rowgroup=1000)")
    assert con.execute("SELECT csq_import('t', ?, 'separator=|')", (path,)).fetchone()[0] == 20000
    con.close()
    con = connect(db)
    assert con.execute("SELECT count(*), sum(a), min(rowid), max(rowid) FROM t").fetchone() == \
        (20000, sum(range(20000)), 1, 20000)
    assert con.execute("SELECT count(*) FROM t WHERE rowid != a + 1").fetchone()[0] == 0
    assert con.execute("SELECT b, c FROM t WHERE a = 12345").fetchone() == (345.45, "s24")


def test_kill9_during_load_leaves_table():
    """A process killed in the middle of a load (row groups already written
    to the device, the rest of the file still to come through a pipe)
    leaves the table as before; the image reopens without repair and takes
    a load again."""
    d = tmpdir()
    db = os.path.join(d, "k.db")
    fifo = os.path.join(d, "k.pipe")
    os.mkfifo(fifo)
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, c REAL, rowgroup=1024)")
    con.execute("INSERT INTO t VALUES(1, 'kept', 2.5)")
    con.close()
    code = ("import sqlite3; c = sqlite3.connect(%r); c.enable_load_extension(True); "
            "c.load_extension(%r); c.execute(\"SELECT csq_import('t', %r)\").fetchone()" % (db, EXT, fifo))
    image = db + "-csd"
    # the image is sparse: its allocated blocks show row groups being written
    size0 = os.stat(image).st_blocks
    p = subprocess.Popen([sys.executable, "-c", code])
    with open(fifo, "w") as f:  # opens once the loader has it open
        f.write("".join("%d,text %d,%d.5\n" % (i, i, i) for i in range(20000)))
        f.flush()
        deadline = time.time() + 30
        while os.stat(image).st_blocks == size0 and time.time() < deadline:
            time.sleep(0.05)  # the first row groups reach the image
        time.sleep(0.2)
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert p.returncode == -signal.SIGKILL, p.returncode
    assert os.stat(image).st_blocks > size0, "no row group was written before the kill"
    con = connect(db)
    assert con.execute("SELECT a, b, c FROM t").fetchall() == [(1, "kept", 2.5)]
    path = os.path.join(d, "k.csv")
    with open(path, "w") as f:
        f.write("".join("%d,text %d,%d.5\n" % (i, i, i) for i in range(20000)))
    assert con.execute("SELECT csq_import('t', ?)", (path,)).fetchone()[0] == 20000
    con.close()
    con = connect(db)
    assert con.execute("SELECT count(*), sum(a) FROM t").fetchone() == (20001, 1 + sum(range(20000)))


def test_stock_shell_and_csq_shell():
    d = tmpdir()
    path = os.path.join(d, "s.csv")
    with open(path, "w") as f:
        f.write('1|"a|b"|2.50\n2|x|7\n')
    exe = shutil.which("sqlite3")
    if exe:
        db = os.path.join(d, "stock.db")
        sql = (".load %s\nCREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, c REAL);\n"
               "SELECT csq_import('t', '%s', 'separator=|');\nSELECT a, b, c FROM t;\n"
               % (EXT[:-3] if EXT.endswith(".so") else EXT, path))
        r = subprocess.run([exe, db], input=sql, text=True, capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "2\n1|a|b|2.5\n2|x|7.0\n", r.stdout
    csq = os.path.join(BUILD, "csq")
    if not os.path.exists(csq):
        raise Skip("no build/csq")
    db = os.path.join(d, "csq.db")
    sql = ("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, c REAL);\n.import %s t\n"
           "SELECT a, b, c FROM t;\n" % path)
    r = subprocess.run([csq, db], input=sql, text=True, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1|a|b|2.5\n2|x|7.0\n", r.stdout
    assert "csq_import t: 2 rows" in r.stderr, r.stderr
    r = subprocess.run([csq, db, ".import --csv %s t" % path], text=True, capture_output=True,
                       timeout=60)
    assert r.returncode == 1 and "1 field" in r.stderr, r.stderr


def test_block_boundaries_through_a_pipe():
    """The reader refills its buffer wherever a read ends. The same bytes fed
    through a pipe a few bytes at a time (every quote, doubled quote, CR and
    LF lands on a boundary somewhere) must load exactly as from a file, or
    fail with the same message."""
    import threading
    rnd = random.Random(5)
    d = tmpdir()
    con = connect()
    pieces = ['a', '1', '2.5', ' ', ',', ',', '\n', '\r\n', '"', '""', '"x,y"', '"p""q"', '"l\nm"',
              '\r', 'é', '-0', '"', '\n']
    for case in range(60):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 120)))
        path = os.path.join(d, "f%d.csv" % case)
        with open(path, "w", newline="") as f:
            f.write(text)
        data = text.encode()
        outs = []
        for src in ("file", "pipe"):
            con.execute("DROP TABLE IF EXISTS t")
            con.execute("CREATE VIRTUAL TABLE t USING csq(a, b NUMERIC, c TEXT)")
            if src == "pipe":
                fifo = os.path.join(d, "p%d" % case)
                os.mkfifo(fifo)

                def feed():
                    try:
                        with open(fifo, "wb", buffering=0) as w:
                            i = 0
                            while i < len(data):
                                k = rnd.randrange(1, 5)
                                w.write(data[i:i + k])
                                i += k
                                time.sleep(0.0002)
                    except BrokenPipeError:
                        pass  # a load that failed stops reading
                th = threading.Thread(target=feed)
                th.start()
                arg = fifo
            else:
                arg = path
            try:
                n = con.execute("SELECT csq_import('t', ?, 'skip_bad=%d')" % (case % 2), (arg,)).fetchone()[0]
                rows = con.execute("SELECT a, typeof(a), b, typeof(b), c FROM t").fetchall()
                outs.append((n, rows))
            except sqlite3.Error as e:
                outs.append(str(e).replace(arg, "F"))
            if src == "pipe":
                th.join()
        assert outs[0] == outs[1], (case, text, outs)


def test_memory_bounded_whatever_the_file_size():
    """Peak memory of a load does not grow with the file: a file 8 times
    larger (many more row groups than the queue holds) loads within a few
    MB of the smaller one's peak."""
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        raise Skip("AddressSanitizer keeps freed memory in quarantine: peak RSS says nothing")
    d = tmpdir()
    line = "%d,a text field of some length to fill the file %d,%d.25\n"
    peaks = []
    for n in (150000, 1200000):
        db = os.path.join(d, "m%d.db" % n)
        path = os.path.join(d, "m%d.csv" % n)
        with open(path, "w") as f:
            for i0 in range(0, n, 50000):
                f.write("".join(line % (i, i, i) for i in range(i0, min(n, i0 + 50000))))
        code = ("import sqlite3; c = sqlite3.connect(%r); c.enable_load_extension(True); "
                "c.load_extension(%r); c.execute('CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, "
                "c REAL, rowgroup=8192)'); print(c.execute(\"SELECT csq_import('t', %r)\").fetchone()[0])"
                % (db, EXT, path))
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0 and int(out) == n, out
        peaks.append(ru.ru_maxrss / 1024.0)
        os.remove(path)
    assert peaks[1] < peaks[0] + 16, "peak RSS grew with the file: %.0f MB, then %.0f MB" % tuple(peaks)


def test_device_fault_during_load():
    """A device write that fails in the middle of a load (row groups written
    before it, encodes still in flight) fails the load with the device's
    message; the table is as it was, and the next load works."""
    d = tmpdir()
    db = os.path.join(d, "f.db")
    path = os.path.join(d, "f.csv")
    with open(path, "w") as f:
        f.write("".join("%d,v%d\n" % (i, i) for i in range(3000)))
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, rowgroup=100)")
    con.execute("INSERT INTO t VALUES(-1, 'kept')")
    for rule in ("op=nvm_write,nth=7,action=status:0x281", "op=nvm_flush,nth=1,action=status:0x6",
                 "op=nvm_write,nth=12,action=short"):
        con.execute("SELECT csq_fault(?)", (rule,))
        expect_error(lambda: con.execute("SELECT csq_import('t', ?)", (path,)).fetchone(), "csq_import(t)")
        con.execute("SELECT csq_fault(NULL)")
        assert con.execute("SELECT a, b FROM t").fetchall() == [(-1, "kept")], rule
    assert con.execute("SELECT csq_import('t', ?)", (path,)).fetchone()[0] == 3000
    con.close()
    con = connect(db)
    assert con.execute("SELECT count(*), sum(a) FROM t").fetchone() == (3001, sum(range(3000)) - 1)


def test_check_constraints_as_insert():
    """CHECK constraints are checked row by row as INSERT checks them: the
    first failing row fails the load (the table as it was), skip_bad=1 skips
    and counts them with the rowids a native INSERT OR IGNORE gives, and
    PRAGMA ignore_check_constraints turns them off; from a file and from a
    query alike."""
    d = tmpdir()
    path = os.path.join(d, "c.csv")
    rows = [("1", "x"), ("-1", "y"), ("2", "toolong"), ("3", "ok"), ("0", ""), ("7", "abcd")]
    write_csv(path, rows)
    decl = "(a INTEGER CHECK (a > 0), b TEXT, CONSTRAINT short CHECK (length(b) < 5))"
    con = connect(os.path.join(d, "c.db"))
    con.execute("CREATE VIRTUAL TABLE t USING csq%s" % decl)
    con.execute("CREATE TABLE n%s" % decl)
    con.execute("CREATE TABLE src(a, b)")
    con.executemany("INSERT INTO src VALUES (?, ?)", rows)

    def native(ignore):
        con.execute("DELETE FROM n")
        con.execute("PRAGMA ignore_check_constraints = %d" % ignore)
        con.executemany("INSERT OR IGNORE INTO n VALUES (?, ?)", rows)
        return con.execute("SELECT rowid, a, typeof(a), b FROM n ORDER BY rowid").fetchall()

    def loaded():
        got = con.execute("SELECT rowid, a, typeof(a), b FROM t ORDER BY rowid").fetchall()
        con.execute("DELETE FROM t")
        return got

    con.execute("INSERT INTO t VALUES (5, 'old')")
    expect_error(lambda: con.execute("SELECT csq_import('t', ?)", (path,)).fetchone(),
                 "line 2: CHECK constraint failed: a > 0")
    expect_error(lambda: con.execute("SELECT csq_import('t', 'SELECT * FROM src')").fetchone(),
                 "row 2: CHECK constraint failed: a > 0")
    assert loaded() == [(1, 5, "integer", "old")]
    want = native(0)
    assert len(want) == 3
    for src in (path, "SELECT * FROM src"):
        assert con.execute("SELECT csq_import('t', ?, 'skip_bad=1')", (src,)).fetchone()[0] == 3
        assert "skipped=3" in con.execute("SELECT csq_import_progress()").fetchone()[0]
        assert loaded() == want, src
    # inside BEGIN, a failing row undoes the load and keeps the transaction
    con.execute("BEGIN")
    con.execute("INSERT INTO t VALUES (9, 'txn')")
    expect_error(lambda: con.execute("SELECT csq_import('t', ?)", (path,)).fetchone(), "a > 0")
    con.execute("COMMIT")
    assert loaded() == [(1, 9, "integer", "txn")]
    want = native(1)
    assert len(want) == 6
    for src in (path, "SELECT * FROM src"):
        assert con.execute("SELECT csq_import('t', ?)", (src,)).fetchone()[0] == 6
        assert loaded() == want, src
    # a CHECK on the INTEGER PRIMARY KEY sees the new row's rowid
    con.execute("PRAGMA ignore_check_constraints = 0")
    decl = "(id INTEGER PRIMARY KEY CHECK (id % 3 <> 0), v TEXT CHECK (v <> 'bad'))"
    con.execute("CREATE VIRTUAL TABLE k USING csq%s" % decl)
    con.execute("CREATE TABLE nk%s" % decl)
    krows = [(None, "a"), (None, "b"), (None, "bad"), (None, "c"), (None, "d"), (10, "e"), (12, "f")]
    con.executemany("INSERT OR IGNORE INTO nk VALUES (?, ?)", krows)
    kpath = os.path.join(d, "k.csv")
    write_csv(kpath, [("" if a is None else str(a), b) for a, b in krows])
    assert con.execute("SELECT csq_import('k', ?, 'skip_bad=1,null=')", (kpath,)).fetchone()[0] == \
        con.execute("SELECT count(*) FROM nk").fetchone()[0]
    assert con.execute("SELECT * FROM k ORDER BY id").fetchall() == \
        con.execute("SELECT * FROM nk ORDER BY id").fetchall()
    con.close()


def test_striped_table():
    """A table over two devices: outside BEGIN a load is atomic across both
    (a bad row at the end leaves both members as they were), its row groups
    go to both, rowids follow the table's; inside BEGIN it is the
    transaction's (ROLLBACK drops it). Compared with a native table, also
    after reopening."""
    d = tmpdir()
    db = os.path.join(d, "s.db")
    devs = [os.path.join(d, "a.csd"), os.path.join(d, "b.csd")]
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, "
                "devices='%s', rowgroup=1000)" % ",".join(devs))
    con.execute("CREATE TABLE n(id INTEGER PRIMARY KEY, a INTEGER, b TEXT)")
    for t in ("t", "n"):
        con.execute("INSERT INTO %s VALUES (NULL, -1, 'before'), (10, -2, 'ten')" % t)
    rows = [("", str(i * 7 % 1000), "row %d" % i) for i in range(5500)]
    path = os.path.join(d, "s.csv")
    write_csv(path, rows)
    bad = os.path.join(d, "bad.csv")
    write_csv(bad, rows + [("", "1")])
    q = "SELECT id, a, typeof(a), b FROM %s ORDER BY id"
    expect_error(lambda: con.execute("SELECT csq_import('t', ?, 'null=')", (bad,)).fetchone(),
                 "line 5501: 2 fields")
    assert con.execute(q % "t").fetchall() == con.execute(q % "n").fetchall()
    assert con.execute("SELECT csq_import('t', ?, 'null=')", (path,)).fetchone()[0] == 5500
    con.executemany("INSERT INTO n VALUES (NULL, ?, ?)", [(int(a), b) for _, a, b in rows])
    assert con.execute(q % "t").fetchall() == con.execute(q % "n").fetchall()
    used = dict(con.execute("SELECT path, blocks_used FROM csq_devices").fetchall())
    for p in devs:
        key = [k for k in used if k.endswith(os.path.basename(p))]
        assert key and used[key[0]] > 4, (p, used)
    con.execute("BEGIN")
    assert con.execute("SELECT csq_import('t', ?, 'null=')", (path,)).fetchone()[0] == 5500
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 11002
    con.execute("ROLLBACK")
    assert con.execute(q % "t").fetchall() == con.execute(q % "n").fetchall()
    con.execute("BEGIN")
    assert con.execute("SELECT csq_import('t', 'SELECT NULL, a + 1, b FROM n WHERE id > 10')").fetchone()[0] == 5500
    con.execute("INSERT INTO n SELECT NULL, a + 1, b FROM n WHERE id > 10")
    con.execute("COMMIT")
    con.close()
    con = connect(db)
    assert con.execute(q % "t").fetchall() == con.execute(q % "n").fetchall()
    con.close()


def test_query_shapes():
    """A query source as written: a nested WITH, ORDER BY, a trailing ';'
    or -- comment; and a table with more columns than a function takes
    arguments. Rows and rowids as INSERT ... SELECT gives them."""
    con = connect()
    con.execute("CREATE VIRTUAL TABLE u USING csq(a INTEGER, b TEXT)")
    con.execute("CREATE TABLE nu(a INTEGER, b TEXT)")
    for q in ["WITH x(p, q) AS (VALUES (1, 2), (3, 4)) SELECT p, q FROM x ORDER BY p DESC;  ",
              "SELECT 5, 'six' -- a comment", "VALUES (7, 8.0);;", "SELECT NULL, x'00' UNION ALL SELECT 9, 9"]:
        got = con.execute("SELECT csq_import('u', ?)", (q,)).fetchone()[0]
        assert got == con.execute("INSERT INTO nu %s" % q.rstrip("; ")).rowcount, q
    q = "SELECT rowid, a, typeof(a), b, typeof(b) FROM %s ORDER BY rowid"
    assert con.execute(q % "u").fetchall() == con.execute(q % "nu").fetchall()
    n = 140
    cols = ", ".join("c%d INTEGER" % i for i in range(n))
    con.execute("CREATE VIRTUAL TABLE w USING csq(%s)" % cols)
    con.execute("CREATE TABLE nw(%s)" % cols)
    con.executemany("INSERT INTO nw VALUES (%s)" % ",".join("?" * n),
                    [tuple(str(r * i) if i % 3 else r * i for i in range(n)) for r in range(40)])
    assert con.execute("SELECT csq_import('w', 'SELECT * FROM nw')").fetchone()[0] == 40
    assert con.execute("SELECT * FROM w ORDER BY rowid").fetchall() == \
        con.execute("SELECT * FROM nw ORDER BY rowid").fetchall()
    con.close()


def user_threads():
    """This process's threads other than io_uring's kernel workers."""
    n = 0
    for t in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/comm" % t) as f:
                n += not f.read().startswith("iou-")
        except FileNotFoundError:
            pass  # a thread of an earlier test's closed device, gone since listdir
    return n


def test_row_by_row_load_starts_no_thread():
    """Inserting rows one statement at a time (what the sqlite3 shell's
    .import does) starts no thread in the process: the emulated device runs
    such writes on the inserting thread until a command needs its threads,
    so glibc's stdio keeps reading the shell's file without locks. A query
    then starts them and gets its answer."""
    d = tmpdir()
    db = os.path.join(d, "th.db")
    gc.collect()  # connections of earlier tests closed, their devices' threads gone
    n0 = user_threads()
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, rowgroup=1000)")
    con.close()
    con = connect(db)
    con.execute("BEGIN")
    for i in range(2500):
        con.execute("INSERT INTO t VALUES (?, ?)", (i, "row %d" % i))
    con.execute("COMMIT")
    assert user_threads() <= n0, (n0, user_threads())
    assert con.execute("SELECT count(*), sum(a) FROM t WHERE a % 2 = 0").fetchone() == (1250, 2 * sum(range(1250)))
    con.close()


def test_bench_import_script():
    """bench/import.py at a tiny scale: every load ends with every row."""
    gen = os.path.join(BUILD, "bench", "gen")
    if not os.path.exists(gen):
        raise Skip("no build/bench/gen (make bench-bin)")
    out = tmpdir()
    r = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "bench", "import.py"), BUILD, "0.005",
                        "--no-duckdb", "--out", out], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(out, "import_sf0.005.csv")) as f:
        rows = [line.split(",") for line in f.read().splitlines()[1:]]
    assert [r[0] for r in rows] == ["native .import", "csq .import", "csq_import", "build/csq .import",
                                    "native INSERT..SELECT", "csq INSERT..SELECT", "csq_import(SELECT)"], rows
    assert all(float(r[3]) > 0 for r in rows), rows  # CPU seconds of every load
    assert len(set(r[-1] for r in rows)) == 1 and int(rows[0][-1]) > 20000, rows


def test_bytes_not_utf8_kept_as_import_keeps_them():
    """Bytes that are not UTF-8 are not checked: kept as they are, as the
    stock shell's .import keeps them (compared as blobs)."""
    d = tmpdir()
    path = os.path.join(d, "u.csv")
    with open(path, "wb") as f:
        f.write(b"1,\xff\xfe bad \xc3\n2,\"q\xe9,\xa0\"\n3,ok\xe2\x82\xac\n")
    db = os.path.join(d, "u.db")
    con = connect(db)
    con.execute("CREATE TABLE n(a INTEGER, b TEXT)")
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT)")
    con.close()
    stock_import(db, "n", path)
    con = connect(db)
    assert con.execute("SELECT csq_import('t', ?)", (path,)).fetchone()[0] == 3
    q = "SELECT a, CAST(b AS BLOB), typeof(b) FROM %s ORDER BY a"
    same_rows(con.execute(q % "t").fetchall(), con.execute(q % "n").fetchall(), "bytes")
