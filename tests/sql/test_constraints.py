"""tests/sql/test_constraints.py - DEFAULT, CHECK and the constraints csq
refuses (vtab/check.c, vtab/schema.c).

Every enforced constraint is compared with a native table of the same
declaration: random rows (NULLs, numeric-looking text, reals, blobs) through
INSERT and UPDATE in every conflict mode, in autocommit and in explicit
transactions, with the exact error messages and codes; DEFAULT in every
form SQLite accepts; both after reopening the database. Every constraint csq
cannot enforce must fail CREATE with a message naming the column and the
constraint."""
import os
import random
import sqlite3

from harness import connect, expect_error, tmpdir

MODES = ["", "OR IGNORE ", "OR REPLACE ", "OR FAIL ", "OR ABORT ", "OR ROLLBACK "]

VALUES = [None, None, 0, 1, -1, 2, 5, 7, 12, 100, 3000, -3.5, 2.0, 0.0, 3.25, 1e300,
          "5", " 5", "5.0", "1e1", "abc", "ABC", "Abc", "", "0", "-2", "bad", "x", "a",
          b"\x00", b"", b"5", b"abc", 9223372036854775807, -9223372036854775808]


def outcome(con, sql, params=()):
    """What a statement does: its rows, or its error (message and code).
    The extended code is compared for CHECK and for NOT NULL on a table with
    CHECKs (vtab/check.c); elsewhere only the primary code (write.c returns
    plain SQLITE_CONSTRAINT for UNIQUE and NOT NULL)."""
    try:
        return ("ok", con.execute(sql, params).fetchall())
    except sqlite3.Error as e:
        code = getattr(e, "sqlite_errorcode", None)
        if code is not None and not str(e).startswith("CHECK constraint failed"):
            code &= 0xFF
        return ("error", str(e), code)


def pair(cols, path_c=":memory:", path_n=":memory:"):
    """(csq connection, native connection), each with table t(cols)."""
    c = connect(path_c)
    n = connect(path_n)
    c.execute("CREATE VIRTUAL TABLE t USING csq(%s)" % cols)
    n.execute("CREATE TABLE t(%s)" % cols)
    return c, n


def contents(con):
    names = [r[1] for r in con.execute("PRAGMA table_info(t)")]
    sel = ", ".join(["rowid"] + ['"%s", typeof("%s")' % (x, x) for x in names])
    return con.execute("SELECT %s FROM t ORDER BY rowid" % sel).fetchall()


def same(c, n, sql, params=(), what="", counts=None, loose=False):
    """Run sql on both; their outcomes and their counters must agree. The
    counters (changes()) are not compared after an OR IGNORE statement
    unless counts: write.c counts a row it skips for NOT NULL or a rowid
    conflict (a CHECK's skipped row is compared in test_check_conflict_modes).
    loose: for a statement over many rows in no fixed order, which row fails
    first may differ, so only the kind of error is compared."""
    a, b = outcome(c, sql, params), outcome(n, sql, params)
    if loose and a[0] == b[0] == "error":
        a, b = (a[0], a[1].split(":")[0], a[2]), (b[0], b[1].split(":")[0], b[2])
    assert a == b, "%s\n%s %r\ncsq:    %r\nnative: %r" % (what, sql, params, a, b)
    ca = c.execute("SELECT changes()").fetchone()
    na = n.execute("SELECT changes()").fetchone()
    if counts is None:
        counts = "OR IGNORE" not in sql and sql.split()[0].upper() in ("INSERT", "UPDATE",
                                                                       "DELETE", "REPLACE")
    assert ca == na or not counts, "%s\n%s %r: changes csq %r native %r" % (what, sql, params,
                                                                          ca, na)
    assert c.in_transaction == n.in_transaction, "%s\n%s: transaction state differs" % (what, sql)
    return a


# Declarations for the random comparison: affinities, collations, named,
# unnamed, column and table CHECKs, CHECKs over two columns, with NOT NULL
# and DEFAULT around them.
DECLS = [
    "y INTEGER CHECK(y > 0), z TEXT CHECK(z <> 'bad'), w REAL DEFAULT 1.5 CHECK(w < 100)",
    "y TEXT CHECK(y = 5 OR y IS NULL OR length(y) > 1), "
    "z NUMERIC NOT NULL DEFAULT 3 CHECK(z >= 0), w",
    "y CHECK(y), z INT CHECK(z = '5' OR z < 0), CONSTRAINT pair CHECK(y <> z), "
    "CHECK(coalesce(y, 0) + coalesce(z, 0) < 50)",
    "y TEXT COLLATE NOCASE CHECK(y <> 'abc'), z BLOB CHECK(typeof(z) <> 'real'), "
    "w DEFAULT 'x' NOT NULL",
    "id INTEGER PRIMARY KEY CHECK(id > 0 AND id < 1000), "
    "y CONSTRAINT ypos CHECK(y >= 0) CONSTRAINT ysmall CHECK(y < 10), z",
    "y REAL CHECK(y <> 2), z CHECK(z IN (1, 2, 'a', x'00') OR z IS NULL), "
    "w NUMERIC CHECK(w BETWEEN -5 AND 5), CONSTRAINT t_ok CHECK(t.y IS NOT t.w) CHECK(1)",
]


def random_statement(rnd, cols, ipk):
    """One random INSERT/UPDATE/DELETE on t with its parameters."""
    mode = rnd.choice(MODES)
    k = rnd.random()
    if k < 0.55:
        if not ipk and rnd.random() < 0.08:
            return "INSERT %sINTO t DEFAULT VALUES" % mode, ()
        if rnd.random() < 0.3:
            named = list(cols)  # no column list
        else:
            named = [x for x in cols if rnd.random() < 0.6] or [cols[0]]
            if ipk and "id" not in named:
                named.insert(0, "id")
        nrow = rnd.choice([1, 1, 2, 3])
        params = []
        for _ in range(nrow):
            for x in named:
                params.append(rnd.randrange(-2, 30) if x == "id" else rnd.choice(VALUES))
        row = "(%s)" % ", ".join("?" * len(named))
        lst = "" if named == cols and rnd.random() < 0.5 else "(%s)" % ", ".join(named)
        return ("INSERT %sINTO t%s VALUES %s" % (mode, lst, ", ".join([row] * nrow)),
                tuple(params))
    if k < 0.9:
        if ipk and rnd.random() < 0.2:
            return ("UPDATE %st SET id = ? WHERE id = ?" % mode,
                    (rnd.randrange(-2, 30), rnd.randrange(0, 30)))
        targets = [x for x in cols if x != "id"]
        x = rnd.choice(targets)
        if rnd.random() < 0.4 and mode != "OR FAIL ":
            # many rows (not with FAIL, which keeps the rows updated before the
            # failing one: csq's scan order is not the rowid order once rows
            # were updated, and no ORDER BY fixes it)
            return "UPDATE %st SET %s = %s - ?" % (mode, x, x), (rnd.choice([1, 3, 7, "2"]),)
        return ("UPDATE %st SET %s = ? WHERE rowid %% 4 = ?" % (mode, x),
                (rnd.choice(VALUES), rnd.randrange(4)))
    return "DELETE FROM t WHERE rowid % 7 = ?", (rnd.randrange(7),)


def test_check_random_against_native():
    rnd = random.Random(20261204)
    for decl in DECLS:
        c, n = pair(decl)
        cols = [r[1] for r in n.execute("PRAGMA table_info(t)")]
        ipk = cols[0] == "id"
        in_txn = False
        for step in range(1500):
            r = rnd.random()
            if not in_txn and r < 0.05:
                same(c, n, "BEGIN", what=decl)
            elif c.in_transaction and r < 0.08:
                same(c, n, rnd.choice(["COMMIT", "ROLLBACK"]), what=decl)
            elif c.in_transaction and r < 0.10:
                same(c, n, "SAVEPOINT s1", what=decl)
            sql, params = random_statement(rnd, cols, ipk)
            many = "WHERE" not in sql and sql.startswith("UPDATE")
            same(c, n, sql, params, what="%s (step %d)" % (decl, step), loose=many)
            if many:
                assert contents(c) == contents(n), "%s: contents differ at step %d" % (decl, step)
            in_txn = c.in_transaction
            if step % 100 == 99:
                assert contents(c) == contents(n), "%s: contents differ at step %d" % (decl, step)
        if c.in_transaction:
            same(c, n, "COMMIT", what=decl)
        assert contents(c) == contents(n), decl
        c.close()
        n.close()


def test_check_messages_and_codes():
    """Named and unnamed, column and table CHECKs: SQLite's messages, in
    SQLite's order, NOT NULL before CHECK, with the extended codes."""
    cases = [
        ("y CHECK(y>0)", "INSERT INTO t VALUES (-5)"),
        ("y CONSTRAINT pos CHECK(y>0)", "INSERT INTO t VALUES (-5)"),
        ("y, CHECK(y>0)", "INSERT INTO t VALUES (-5)"),
        ("y, CONSTRAINT c1 CHECK(y>0)", "INSERT INTO t VALUES (-5)"),
        ("y   CHECK(  y >  0 /* c */ )", "INSERT INTO t VALUES (-5)"),
        ("y CHECK(y > 0) CHECK(y < 10)", "INSERT INTO t VALUES (11)"),
        ("y, CHECK(y > 0) CHECK(y < 5)", "INSERT INTO t VALUES (6)"),
        ("y, CONSTRAINT c CHECK(y > 0) CHECK(y < 5)", "INSERT INTO t VALUES (6)"),
        ("y CONSTRAINT c NOT NULL CHECK(y < 5)", "INSERT INTO t VALUES (6)"),
        ("y CONSTRAINT c NOT NULL CHECK(y < 5)", "INSERT INTO t VALUES (NULL)"),
        ("y CONSTRAINT c CHECK(y > 0) CONSTRAINT d CHECK(y < 5)", "INSERT INTO t VALUES (6)"),
        ("y CHECK(z > 0), z CHECK(y > 0)", "INSERT INTO t VALUES (-1, -1)"),
        ("y NOT NULL CHECK(y > 0), z CHECK(z > 0) NOT NULL", "INSERT INTO t VALUES (-1, NULL)"),
        ("y CHECK(y)", "INSERT INTO t VALUES ('abc')"),
        ("y CHECK(y)", "INSERT INTO t VALUES (x'00')"),
        ("y CHECK(y)", "INSERT INTO t VALUES ('0.0e5')"),
        ("y CHECK(y)", "INSERT INTO t VALUES (-0.0)"),
        ("y CHECK(y)", "INSERT INTO t VALUES (NULL)"),
        ("y TEXT CHECK(y = 5)", "INSERT INTO t VALUES (5)"),
        ("y INT CHECK(y = '5')", "INSERT INTO t VALUES ('5')"),
        ("y TEXT COLLATE NOCASE CHECK(y = 'ABC')", "INSERT INTO t VALUES ('abc')"),
        ("y TEXT COLLATE RTRIM CHECK(y = 'a')", "INSERT INTO t VALUES ('a  ')"),
        ("y REAL CHECK(typeof(y) = 'real')", "INSERT INTO t VALUES (3)"),
        ("y DEFAULT 'x' CHECK(y > 0)", "INSERT INTO t DEFAULT VALUES"),
        ("y NOT NULL DEFAULT 3 CHECK(y > 5)", "INSERT OR REPLACE INTO t VALUES (NULL)"),
        ("y CHECK(abs(y) > 0)", "INSERT INTO t VALUES (-9223372036854775808)"),
        ("id INTEGER PRIMARY KEY CHECK(id < 3), v", "INSERT INTO t VALUES (3, 1)"),
        ("id INTEGER PRIMARY KEY, v CHECK(rowid < 3)", "INSERT INTO t VALUES (3, 1)"),
        ("v CHECK(rowid < 3)", "INSERT INTO t(rowid, v) VALUES (3, 1)"),
        ("v CHECK(t.v > 1)", "INSERT INTO t VALUES (1)"),
    ]
    for decl, sql in cases:
        c, n = pair(decl)
        same(c, n, sql, what=decl)
        same(c, n, "SELECT rowid, * FROM t", what=decl)
        c.close()
        n.close()


def test_check_conflict_modes():
    """OR IGNORE skips the row and counts no change, OR REPLACE is ABORT, OR
    FAIL keeps the statement's earlier rows, OR ABORT none of them, OR
    ROLLBACK ends the transaction; the same for UPDATE. In autocommit and
    inside a transaction (statement rollback through a savepoint)."""
    for txn in (False, True):
        for mode in MODES:
            c, n = pair("k INTEGER PRIMARY KEY, y INTEGER CHECK(y > 0), z TEXT")
            for con in (c, n):
                con.execute("INSERT INTO t VALUES (1, 1, 'a'), (2, 2, 'b'), (3, 3, 'c')")
            if txn:
                same(c, n, "BEGIN")
            w = "%s %s" % (mode, txn)
            same(c, n, "INSERT %sINTO t VALUES (4, 4, 'd'), (5, -5, 'e'), (6, 6, 'f')" % mode, what=w, counts=True)
            same(c, n, "INSERT %sINTO t(y) VALUES (0)" % mode, what=w, counts=True)
            same(c, n, "SELECT k, y, z FROM t ORDER BY k", what=w, counts=True)
            same(c, n, "UPDATE %st SET y = y - 2" % mode, what=w, counts=True)
            same(c, n, "SELECT k, y, z FROM t ORDER BY k", what=w, counts=True)
            same(c, n, "UPDATE %st SET y = -1, k = k + 10 WHERE k = 3" % mode, what=w, counts=True)
            same(c, n, "SELECT k, y, z FROM t ORDER BY k", what=w, counts=True)
            same(c, n, "SELECT last_insert_rowid()", what=w, counts=True)
            if c.in_transaction:
                same(c, n, "COMMIT", what=w, counts=True)
            same(c, n, "SELECT k, y, z FROM t ORDER BY k", what=w, counts=True)
            c.close()
            n.close()


def test_defaults_every_form():
    decl = ("k, a DEFAULT 5, b DEFAULT -3, c DEFAULT +4.5, d DEFAULT 'str', e DEFAULT x'00ff', "
            "f DEFAULT NULL, g DEFAULT (1 + 2), h DEFAULT abc, i DEFAULT \"q\", j DEFAULT [r], "
            "l DEFAULT true, m DEFAULT FALSE, n DEFAULT - 3, o DEFAULT 1e3, p DEFAULT .5, "
            "q DEFAULT 0x10, r DEFAULT -'abc', s INTEGER DEFAULT '7', u TEXT DEFAULT 8, "
            "v REAL DEFAULT (abs(-2)), w DEFAULT (x'41' || 'b'), x DEFAULT (-9223372036854775807 - 1), "
            "y NOT NULL DEFAULT 'nn', z DEFAULT (lower('ABC'))")
    c, n = pair(decl)
    stmts = [
        "INSERT INTO t(k) VALUES (1)",
        "INSERT INTO t DEFAULT VALUES",
        "INSERT INTO t(k, a, b) VALUES (2, NULL, 9)",
        "INSERT INTO t(k, y) VALUES (3, NULL)",
        "INSERT OR REPLACE INTO t(k, y) VALUES (4, NULL)",
        "INSERT OR IGNORE INTO t(k, y) VALUES (5, NULL)",
        "INSERT INTO t(k) SELECT 6 UNION ALL SELECT 7",
        "WITH x(v) AS (SELECT 8) INSERT INTO t(k) SELECT v FROM x",
        "REPLACE INTO t(k) VALUES (9)",
        "/* a comment */ insert -- another\n into main . \"t\" ( [k] , \"A\" ) values (10, 11)",
        "INSERT INTO t AS q(k) VALUES (12)",
        "INSERT INTO t SELECT 13, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
        "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'given', NULL",
        "UPDATE t SET a = NULL WHERE k = 1",
        "UPDATE OR REPLACE t SET y = NULL WHERE k = 2",
        "UPDATE t SET y = NULL WHERE k = 3",
    ]
    for sql in stmts:
        same(c, n, sql, what=sql)
    c.executemany("INSERT INTO t(k, b) VALUES (?, ?)", [(20, None), (21, 1)])
    n.executemany("INSERT INTO t(k, b) VALUES (?, ?)", [(20, None), (21, 1)])
    assert contents(c) == contents(n)
    c.close()
    n.close()


def test_default_time_and_random():
    """CURRENT_TIME/DATE/TIMESTAMP are the time of the statement; a
    non-constant expression is evaluated for every row."""
    c = connect()
    c.execute("CREATE VIRTUAL TABLE t USING csq(k, a DEFAULT CURRENT_TIMESTAMP, "
              "b DEFAULT CURRENT_DATE, d DEFAULT CURRENT_TIME, r DEFAULT (random()))")
    c.execute("INSERT INTO t(k) VALUES (1), (2), (3)")
    rows = c.execute("SELECT a, b, d, r, abs(julianday(a) - julianday('now')) * 86400, "
                     "date('now'), a = datetime(a), typeof(r) FROM t").fetchall()
    assert len({r[0] for r in rows}) == 1, "one timestamp per statement"
    for a, b, d, r, secs, today, ok, tr in rows:
        assert ok == 1 and secs < 60 and len(d) == 8 and a.endswith(d), rows
        assert b in (today, a[:10]), rows
        assert tr == "integer", rows
    assert len({r[3] for r in rows}) == 3, "random() evaluated per row"
    c.close()


def test_default_with_check_and_not_null():
    c, n = pair("a INTEGER NOT NULL DEFAULT 4 CHECK(a < 5), b TEXT DEFAULT 'x' CHECK(b <> 'y'), "
                "CHECK(a > 0 OR b = 'neg')")
    for sql in ["INSERT INTO t DEFAULT VALUES", "INSERT INTO t(b) VALUES ('y')",
                "INSERT INTO t(a) VALUES (9)", "INSERT INTO t(a) VALUES (-1)",
                "INSERT INTO t(a, b) VALUES (-1, 'neg')", "INSERT INTO t(a) VALUES (NULL)",
                "INSERT OR REPLACE INTO t(a) VALUES (NULL)", "UPDATE OR REPLACE t SET a = NULL",
                "UPDATE OR IGNORE t SET b = 'y'", "SELECT rowid, * FROM t"]:
        same(c, n, sql, what=sql)
    c.close()
    n.close()


def test_constraints_survive_reopen():
    """xConnect reads the declaration again: after reopening, DEFAULT and
    CHECK still hold."""
    d = tmpdir()
    pc, pn = os.path.join(d, "c.db"), os.path.join(d, "n.db")
    decl = ("id INTEGER PRIMARY KEY, a TEXT DEFAULT 'dflt' CHECK(length(a) < 6), "
            "b INT NOT NULL DEFAULT (2 * 3), CONSTRAINT small CHECK(b < 100)")
    c, n = pair(decl, pc, pn)
    for sql in ["INSERT INTO t(id) VALUES (1)", "INSERT INTO t(id, a) VALUES (2, 'toolong')"]:
        same(c, n, sql)
    c.close()
    n.close()
    for _ in range(2):
        c, n = connect(pc), connect(pn)
        # a NULL id leaves the rowid to the table: no CHECK reads it here
        for sql in ["INSERT INTO t(b) VALUES (3)", "INSERT INTO t(id, b) VALUES (10, 100)",
                    "INSERT INTO t(id, a) VALUES (11, 'abcdef')",
                    "INSERT OR IGNORE INTO t(id, a) VALUES (12, 'abcdef')",
                    "UPDATE t SET b = b + 90", "UPDATE OR IGNORE t SET b = b + 50",
                    "SELECT * FROM t ORDER BY id"]:
            same(c, n, sql, what="reopened: " + sql)
        c.close()
        n.close()


def test_check_reading_a_new_rowid():
    """A CHECK that reads the rowid works when the INSERT gives it, and is an
    error, never a wrong answer, when the table picks it."""
    c, n = pair("id INTEGER PRIMARY KEY CHECK(id < 3), v")
    same(c, n, "INSERT INTO t VALUES (1, 'a')")
    same(c, n, "INSERT INTO t VALUES (5, 'b')")
    same(c, n, "UPDATE t SET id = 7")
    expect_error(lambda: c.execute("INSERT INTO t(v) VALUES ('c')"),
                 "CHECK constraint of t reads the rowid", "give id a value")
    c2 = connect()
    c2.execute("CREATE VIRTUAL TABLE t USING csq(v CHECK(rowid < 3))")
    c2.execute("INSERT INTO t(rowid, v) VALUES (1, 1)")
    expect_error(lambda: c2.execute("INSERT INTO t(v) VALUES (1)"), "give the rowid a value")
    assert c2.execute("SELECT rowid, v FROM t").fetchall() == [(1, 1)]


def test_default_in_trigger_is_an_error():
    """A row a trigger's INSERT writes comes from no statement csq can read:
    a DEFAULT due there is an error, never a silent NULL; a row with every
    defaulted column given is fine."""
    c = connect()
    c.execute("CREATE VIRTUAL TABLE t USING csq(a, w DEFAULT 5)")
    c.execute("CREATE TABLE log(x)")
    c.execute("CREATE TRIGGER tr AFTER INSERT ON log BEGIN "
              "INSERT INTO t(a, w) VALUES (new.x, coalesce(new.x, 0)); END")
    c.execute("INSERT INTO log VALUES (1)")
    c.execute("DROP TRIGGER tr")
    c.execute("CREATE TRIGGER tr AFTER INSERT ON log BEGIN INSERT INTO t(a) VALUES (new.x); END")
    expect_error(lambda: c.execute("INSERT INTO log VALUES (2)"), "cannot apply DEFAULT of t.w",
                 "trigger")
    assert c.execute("SELECT * FROM t").fetchall() == [(1, 1)]
    assert c.execute("SELECT * FROM log").fetchall() == [(1,)]


def test_default_in_temp_and_attached():
    d = tmpdir()
    c = connect()
    c.execute("ATTACH ? AS aux", (os.path.join(d, "aux.db"),))
    c.execute("CREATE VIRTUAL TABLE temp.t USING csq(a, w DEFAULT 'temp')")
    c.execute("CREATE VIRTUAL TABLE aux.t USING csq(a, w DEFAULT 'aux')")
    c.execute("INSERT INTO temp.t(a) VALUES (1)")
    c.execute("INSERT INTO aux.t(a) VALUES (2)")
    c.execute("INSERT INTO t(a) VALUES (3)")  # temp first
    assert c.execute("SELECT * FROM temp.t").fetchall() == [(1, "temp"), (3, "temp")]
    assert c.execute("SELECT * FROM aux.t").fetchall() == [(2, "aux")]


# Each refused declaration, with what its message must name. SQLite's own
# CREATE TABLE accepts every one of them.
REFUSED = [
    ("y CHECK(y>0), z UNIQUE, w DEFAULT 5", ["column z: UNIQUE is not supported", "INTEGER PRIMARY KEY"]),
    ("id TEXT PRIMARY KEY, v", ["column id: PRIMARY KEY is not supported"]),
    ("id INT PRIMARY KEY, v", ["column id: PRIMARY KEY is not supported"]),
    ("id INTEGER PRIMARY KEY DESC, v", ["column id: INTEGER PRIMARY KEY DESC is not supported"]),
    ("a, b, PRIMARY KEY(a, b)", ["PRIMARY KEY(a, b) is not supported"]),
    ("a TEXT, b, PRIMARY KEY(a)", ["column a: PRIMARY KEY is not supported"]),
    # a rowid alias in SQLite, but csq kept such a column as a plain one before
    # it read constraints: refused, pointing to the column form
    ("a INTEGER, b, PRIMARY KEY(a)", ["column a: PRIMARY KEY(a) as a table constraint",
                                      "a INTEGER PRIMARY KEY"]),
    ("a INTEGER, b, CONSTRAINT pk PRIMARY KEY(a AUTOINCREMENT)", ["PRIMARY KEY(a AUTOINCREMENT) is not"]),
    ("a, b, UNIQUE(a, b)", ["UNIQUE(a, b) is not supported"]),
    ("a, b, CONSTRAINT u UNIQUE(b)", ["column b: UNIQUE is not supported"]),
    ("a REFERENCES p(x), b", ["column a: REFERENCES", "foreign key"]),
    ("a, b, FOREIGN KEY(a) REFERENCES p(x)", ["FOREIGN KEY is not supported"]),
    ("a, b AS (a + 1)", ["column b: generated columns"]),
    ("a, b GENERATED ALWAYS AS (a + 1) STORED", ["column b: generated columns"]),
    ("a INTEGER NOT NULL ON CONFLICT IGNORE", ["column a: NOT NULL ON CONFLICT IGNORE"]),
    ("a INTEGER PRIMARY KEY ON CONFLICT REPLACE", ["column a: PRIMARY KEY ON CONFLICT REPLACE"]),
    ("a UNIQUE ON CONFLICT ABORT", ["column a: UNIQUE is not supported"]),
    ("a, b, UNIQUE(a)", ["column a: UNIQUE is not supported"]),
]


def test_refused_at_create():
    for decl, frags in REFUSED:
        n = sqlite3.connect(":memory:")
        n.execute("CREATE TABLE p(x PRIMARY KEY)")
        n.execute("CREATE TABLE t(%s)" % decl)  # native accepts it
        n.close()
        c = connect()
        msg = expect_error(lambda: c.execute("CREATE VIRTUAL TABLE t USING csq(%s)" % decl),
                           *(["csq: "] + frags))
        assert "not supported" in msg or "not a constraint" in msg or "only allowed" in msg, msg
        assert c.execute("SELECT count(*) FROM sqlite_schema").fetchone() == (0,), decl
        c.close()


def test_accepted_declarations():
    """What csq enforces passes CREATE: the rowid alias (and UNIQUE on it),
    COLLATE of any kind, NULL, ON CONFLICT ABORT."""
    for decl in ["id INTEGER PRIMARY KEY AUTOINCREMENT, v",
                 "id INTEGER PRIMARY KEY UNIQUE NOT NULL, v",
                 "id INTEGER CONSTRAINT pk PRIMARY KEY ASC ON CONFLICT ABORT AUTOINCREMENT, v",
                 "id INTEGER PRIMARY KEY, v, UNIQUE(id)",
                 "a TEXT COLLATE NOCASE NULL, b COLLATE RTRIM, c COLLATE BINARY",
                 "a NOT NULL ON CONFLICT ABORT, b CHECK(b > 0) /* comment */ DEFAULT 1 -- end\n",
                 "a, b, CHECK(a < b) ON CONFLICT IGNORE"]:
        c, n = pair(decl)
        cols = [r[1] for r in n.execute("PRAGMA table_info(t)")]
        for sql, params in [("INSERT INTO t VALUES (%s)" % ", ".join("?" * len(cols)), (5, 6)[:len(cols)] + (7,) * (len(cols) - 2)),
                            ("INSERT INTO t VALUES (%s)" % ", ".join("?" * len(cols)), (5, 1)[:len(cols)] + (7,) * (len(cols) - 2)),
                            ("INSERT INTO t(%s) VALUES (?)" % cols[1], (9,)),
                            ("SELECT rowid, * FROM t ORDER BY rowid", ())]:
            same(c, n, sql, params, what=decl)
        c.close()
        n.close()


def test_create_checks_expressions():
    """CREATE fails as SQLite's CREATE TABLE does on a CHECK or DEFAULT it
    could never evaluate."""
    cases = [("y CHECK(q > 0)", "no such column: q"),
             ("y CHECK(nosuch(y) > 0)", "no such function: nosuch"),
             ("y CHECK(y IN (SELECT 1))", "subqueries prohibited in CHECK constraints"),
             ("y, CHECK(EXISTS (SELECT 1))", "subqueries prohibited in CHECK constraints"),
             ("y CHECK(y > ?1)", "parameters prohibited in CHECK constraints"),
             ("y CHECK(y > :p)", "parameters prohibited in CHECK constraints"),
             ("y CHECK(count(y) > 0)", "misuse of aggregate function count()"),
             ("y CHECK(row_number() OVER () > 0)", "misuse of window function"),
             ("y DEFAULT (y + 1)", "default value of column [y] is not constant"),
             ("y DEFAULT ((SELECT 1))", "default value of column [y] is not constant"),
             ("y DEFAULT (?1)", "default value of column [y] is not constant"),
             ("y DEFAULT (1 +)", "syntax error")]
    for decl, frag in cases:
        n = sqlite3.connect(":memory:")
        expect_error(lambda: n.execute("CREATE TABLE t(%s)" % decl), frag)
        c = connect()
        expect_error(lambda: c.execute("CREATE VIRTUAL TABLE t USING csq(%s)" % decl), "csq:", frag)
        c.close()


def test_old_table_with_refused_constraint_takes_no_writes():
    """A table an older csq created with a constraint it ignored still opens
    (reads, DROP) but refuses writes, naming the constraint."""
    d = tmpdir()
    path = os.path.join(d, "old.db")
    c = connect(path)
    c.execute("CREATE VIRTUAL TABLE t USING csq(a, b)")
    c.execute("INSERT INTO t VALUES (1, 2)")
    c.execute("PRAGMA writable_schema = ON")
    c.execute("UPDATE sqlite_schema SET sql = replace(sql, 'b)', 'b UNIQUE)') WHERE name = 't'")
    c.close()
    c = connect(path)
    assert c.execute("SELECT a, b FROM t").fetchall() == [(1, 2)]
    expect_error(lambda: c.execute("INSERT INTO t VALUES (3, 4)"),
                 "column b: UNIQUE is not supported", "takes no writes")
    expect_error(lambda: c.execute("UPDATE t SET a = 5"), "column b: UNIQUE")
    c.execute("DROP TABLE t")
    assert c.execute("SELECT count(*) FROM sqlite_schema").fetchone() == (0,)
    c.close()


def test_tables_without_constraints_unchanged():
    """No CHECK and no DEFAULT: nothing compiled, no helper module."""
    c = connect()
    c.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER NOT NULL, b TEXT)")
    c.executemany("INSERT INTO t VALUES (?, ?)", [(i, str(i)) for i in range(1000)])
    expect_error(lambda: c.execute("INSERT INTO t VALUES (NULL, 'x')"),
                 "NOT NULL constraint failed: t.a")
    mods = [r[0] for r in c.execute("PRAGMA module_list")]
    assert not [m for m in mods if m.startswith("csq_check_")], mods
    c.execute("CREATE VIRTUAL TABLE u USING csq(a CHECK(a > 0))")
    c.execute("INSERT INTO u VALUES (1)")
    mods = [r[0] for r in c.execute("PRAGMA module_list")]
    assert len([m for m in mods if m.startswith("csq_check_")]) == 1, mods
    c.execute("DROP TABLE u")
    mods = [r[0] for r in c.execute("PRAGMA module_list")]
    assert not [m for m in mods if m.startswith("csq_check_")], mods


def test_ignore_check_constraints_pragma():
    """PRAGMA ignore_check_constraints turns CHECK off (not NOT NULL), from
    the next statement on, as on a native table."""
    c, n = pair("a INTEGER CHECK(a > 0), b NOT NULL DEFAULT 1")
    for sql in ["INSERT INTO t(a) VALUES (-1)", "PRAGMA ignore_check_constraints = ON",
                "INSERT INTO t(a) VALUES (-2)", "INSERT INTO t(a, b) VALUES (-3, NULL)",
                "PRAGMA ignore_check_constraints = OFF", "INSERT INTO t(a) VALUES (-4)",
                "INSERT INTO t(a) VALUES (4)", "SELECT rowid, * FROM t"]:
        same(c, n, sql, what=sql)


def test_defaults_quoting_and_extremes():
    c, n = pair("k, a DEFAULT -9223372036854775808, b DEFAULT \"it\"\"s\", c DEFAULT 'it''s', "
                "d DEFAULT +x'00', e DEFAULT [x y], f DEFAULT `b`, g TEXT DEFAULT 1e400, "
                "h INTEGER DEFAULT '0x10', i DEFAULT (CASE WHEN 1 THEN 'yes' END)")
    for sql in ["INSERT INTO t(k) VALUES (1)", "INSERT INTO t DEFAULT VALUES"]:
        same(c, n, sql, what=sql)
    assert contents(c) == contents(n)


def test_row_module_is_inert():
    """The helper module csq registers for a table's CHECKs shows no row
    outside a check, and a user's statement over it survives the table."""
    c = connect()
    c.execute("CREATE VIRTUAL TABLE t USING csq(a CHECK(a > 0))")
    c.execute("INSERT INTO t VALUES (1)")
    mod = [r[0] for r in c.execute("PRAGMA module_list") if r[0].startswith("csq_check_")][0]
    sql = 'SELECT * FROM "%s"' % mod
    assert c.execute(sql).fetchall() == []
    c.execute("DROP TABLE t")
    try:
        rows = c.execute(sql).fetchall()  # the cached statement, or a new one
        assert rows == [], rows
    except sqlite3.Error:
        pass
    c.close()
