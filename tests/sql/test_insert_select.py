"""INSERT ... SELECT into a csq table, the per-row path whose full row groups
are encoded on another thread (vtab/write.c): the rows and their types are
those the same statement gives a native table; a statement that fails half
way (a constraint, a device fault) leaves the table as before it, as do
ROLLBACK TO, ROLLBACK and a process killed in the middle."""
import os
import signal
import struct
import subprocess
import sys
import time

from harness import connect, tmpdir, expect_error, same_rows, EXT

COLS = "a INTEGER, b REAL, c TEXT, d NUMERIC, e BLOB, f"
NCOL = 6
RG = 1000  # rows per row group: the statements below span several


def src_rows(n, seed=0):
    """Rows whose values cover every class in every column (numeric text,
    integral REALs, -0.0, NULLs, blobs), as a native source table holds them."""
    out = []
    for i in range(n):
        k = (i * 7919 + seed) % 97
        a = [i, "%d" % i, float(i), None, " %d " % i][k % 5]
        b = [i + 0.25, i, -0.0, "%d.5" % i, None][k % 5]
        c = ["text %d" % i, i, 1.5, None, b"\x00b"][k % 5] if k % 11 == 0 else "t%d" % (i % 37)
        d = [i, "%d" % i, "%d.0" % i, "x%d" % i, 2.0, None][k % 6]
        e = [b"\x01\x02" * (i % 5), "e%d" % i, i, None][k % 4]
        f = [i, "f%d" % (i % 13), i * 0.5, None, b"z"][k % 5]
        out.append((a, b, c, d, e, f))
    return out


def rows_of(con, table):
    cols = ", ".join("%s, typeof(%s)" % (c, c) for c in "abcdef")
    out = []
    for r in con.execute("SELECT rowid, %s FROM %s ORDER BY rowid" % (cols, table)):
        # REALs compared by their bits: -0.0 and the last digit matter
        out.append(tuple(struct.pack("<d", v) if isinstance(v, float) else v for v in r))
    return out


def fill(con, table, rows):
    """The native source, in one transaction (not one fsync per row)."""
    con.execute("BEGIN")
    con.executemany("INSERT INTO %s VALUES(?,?,?,?,?,?)" % table, rows)
    con.execute("COMMIT")


def pair(con, extra=""):
    con.execute("CREATE TABLE src(%s)" % COLS)
    con.execute("CREATE TABLE nat(%s%s)" % (COLS, extra))
    con.execute("CREATE VIRTUAL TABLE t USING csq(%s%s, rowgroup=%d)" % (COLS, extra, RG))


def test_values_and_types_as_native():
    """Several row groups through INSERT ... SELECT, in autocommit and in a
    transaction, read back as the native table's, before and after COMMIT."""
    db = os.path.join(tmpdir(), "v.db")
    con = connect(db)
    pair(con)
    fill(con, "src", src_rows(5500))
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src" % tab)
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "autocommit")
    con.execute("BEGIN")
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src WHERE rowid %% 3 != 1" % tab)
        con.execute("INSERT INTO %s(a, c) SELECT a, c FROM src WHERE rowid < 2500" % tab)
    # inside the transaction: the rows still with the encode thread are read too
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "in the transaction")
    assert con.execute("SELECT count(*), sum(rowid) FROM t").fetchone() == \
        con.execute("SELECT count(*), sum(rowid) FROM nat").fetchone()
    con.execute("COMMIT")
    con.close()
    con = connect(db)
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "after reopening")


def test_constraint_half_way_leaves_table_as_before():
    """A CHECK or NOT NULL failure at a row several row groups into the
    statement (earlier row groups already handed to the encode thread or
    written) undoes the statement only: the transaction's earlier rows stay,
    ROLLBACK TO and COMMIT then behave as on a native table."""
    db = os.path.join(tmpdir(), "c.db")
    con = connect(db)
    extra = ", CHECK (a IS NULL OR typeof(a) != 'integer' OR a != 4321)"
    pair(con, extra)
    con.execute("CREATE TABLE src2(%s)" % COLS)
    rows = src_rows(6000, seed=3)
    fill(con, "src", rows)
    fill(con, "src2", [(4321,) + r[1:] if i == 3500 else r for i, r in enumerate(rows)])
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src WHERE rowid <= 1500" % tab)
    con.execute("BEGIN")
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src WHERE rowid > 1500 AND rowid <= 2300" % tab)
        # fails at its 3501st row: earlier full row groups went out meanwhile
        expect_error(lambda: con.execute("INSERT INTO %s SELECT * FROM src2" % tab), "CHECK constraint failed")
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "after the failed statement")
    con.execute("SAVEPOINT s")
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src WHERE rowid <= 4200" % tab)
        # an error of the SELECT side (integer overflow) at its 3333rd row
        expect_error(lambda: con.execute("INSERT INTO %s SELECT a, b, c, d, e, CASE WHEN rowid = 3333 "
                                         "THEN abs(-9223372036854775807 - 1) ELSE f END FROM src" % tab),
                     "integer overflow")
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "in the savepoint")
    con.execute("ROLLBACK TO s")
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "after ROLLBACK TO")
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src WHERE rowid > 5000" % tab)
    con.execute("RELEASE s")
    con.execute("COMMIT")
    con.close()
    con = connect(db)
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "after COMMIT")
    # NOT NULL, failing half way in autocommit
    con.execute("CREATE TABLE nn_nat(a INTEGER NOT NULL, b TEXT)")
    con.execute("CREATE VIRTUAL TABLE nn USING csq(a INTEGER NOT NULL, b TEXT, rowgroup=%d)" % RG)
    for tab in ("nn_nat", "nn"):
        con.execute("INSERT INTO %s SELECT rowid, c FROM src WHERE rowid <= 100" % tab)
        expect_error(lambda: con.execute("INSERT INTO %s SELECT CASE WHEN rowid = 4000 THEN NULL ELSE rowid END, "
                                         "c FROM src" % tab), "NOT NULL constraint failed")
    assert con.execute("SELECT rowid, a, b FROM nn ORDER BY rowid").fetchall() == \
        con.execute("SELECT rowid, a, b FROM nn_nat ORDER BY rowid").fetchall()


def test_device_fault_half_way_undoes_the_statement():
    """A row group that cannot be written (an injected Write Fault on the
    device) fails the statement that is inserting when it comes back from
    the encode thread, with the device's error; the statement's rows are
    undone, the rest of the transaction commits."""
    db = os.path.join(tmpdir(), "f.db")
    con = connect(db)
    pair(con)
    fill(con, "src", src_rows(6000, seed=5))
    con.execute("BEGIN")
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src WHERE rowid <= 700" % tab)
    con.execute("SELECT csq_fault('op=nvm_write,nth=2,action=status:0x280')")
    expect_error(lambda: con.execute("INSERT INTO t SELECT * FROM src"), "Write Fault")
    con.execute("SELECT csq_fault(NULL)")
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "after the fault")
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src WHERE rowid > 3000" % tab)
    con.execute("COMMIT")
    con.close()
    con = connect(db)
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "after COMMIT")
    # OR FAIL keeps rows only before a constraint failure: a device error
    # still undoes the statement
    con.execute("BEGIN")
    con.execute("SELECT csq_fault('op=nvm_write,nth=2,action=status:0x280')")
    expect_error(lambda: con.execute("INSERT OR FAIL INTO t SELECT * FROM src"), "Write Fault")
    con.execute("SELECT csq_fault(NULL)")
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "after OR FAIL")
    con.execute("COMMIT")
    # the last row groups are written at COMMIT: it fails, and the
    # transaction is rolled back
    con.execute("BEGIN")
    con.execute("INSERT INTO t SELECT * FROM src WHERE rowid <= 2990")
    con.execute("SELECT csq_fault('op=nvm_write,nth=1,action=status:0x280')")
    expect_error(lambda: con.execute("COMMIT"), "Write Fault", "roll it back")
    con.execute("SELECT csq_fault(NULL)")
    if con.in_transaction:
        con.execute("ROLLBACK")
    con.close()
    con = connect(db)
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "after the failed COMMIT")


def test_kill9_during_insert_select_leaves_table():
    """A process killed while a long INSERT ... SELECT inside BEGIN has
    written row groups leaves the table as it was; the image reopens and
    takes the same statement."""
    d = tmpdir()
    db = os.path.join(d, "k.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, c REAL, rowgroup=1024)")
    con.execute("INSERT INTO t VALUES(1, 'kept', 2.5)")
    con.close()
    image = db + "-csd"
    size0 = os.stat(image).st_blocks  # sparse: allocated blocks show row groups written
    code = ("import sqlite3; c = sqlite3.connect(%r, isolation_level=None); c.enable_load_extension(True); "
            "c.load_extension(%r); c.execute('BEGIN'); "
            "c.execute(\"WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s) "
            "INSERT INTO t SELECT i, 'text ' || i, i + 0.5 FROM s\")" % (db, EXT))
    p = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.time() + 60
    while os.stat(image).st_blocks < size0 + 2048 and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert p.returncode == -signal.SIGKILL, p.returncode
    assert os.stat(image).st_blocks >= size0 + 2048, "no row group was written before the kill"
    con = connect(db)
    assert con.execute("SELECT rowid, a, b, c FROM t").fetchall() == [(1, 1, "kept", 2.5)]
    con.execute("WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 5000) "
                "INSERT INTO t SELECT i, 'v' || i, i * 0.5 FROM s")
    con.close()
    con = connect(db)
    assert con.execute("SELECT count(*), sum(a), max(rowid) FROM t").fetchone() == (5001, 1 + 5000 * 5001 // 2, 5001)


def test_rowid_lookups_see_rows_in_flight():
    """Statements that look rows up by rowid (UPDATE, DELETE, an explicit
    rowid that exists) in the transaction that inserted them while their
    row groups were being encoded act as on a native table."""
    con = connect()
    pair(con)
    fill(con, "src", src_rows(4500, seed=9))
    con.execute("BEGIN")
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src" % tab)
        con.execute("DELETE FROM %s WHERE rowid IN (5, 1500, 2999, 4400)" % tab)
        con.execute("UPDATE %s SET c = 'upd' WHERE rowid IN (7, 2100)" % tab)
        expect_error(lambda: con.execute("INSERT INTO %s(rowid, a) VALUES(1200, 1)" % tab), "UNIQUE")
        con.execute("INSERT OR REPLACE INTO %s(rowid, a) VALUES(1300, 1)" % tab)
        con.execute("INSERT INTO %s SELECT * FROM src WHERE rowid > 2000" % tab)
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "in the transaction")
    con.execute("COMMIT")
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "after COMMIT")


# The start of a child program that counts its own threads (io_uring's kernel
# workers aside) with csq loaded on a connection c to argv[1].
COUNT_THREADS = """
import os, sqlite3, sys
def threads():  # io_uring's kernel workers (iou-*) aside
    n = 0
    for t in os.listdir('/proc/self/task'):
        try:
            with open('/proc/self/task/%s/comm' % t) as f:
                n += not f.read().startswith('iou-')
        except FileNotFoundError:
            pass
    return n
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.enable_load_extension(True)
c.load_extension(sys.argv[2])
"""


def test_encode_thread_only_for_one_statement_filling_a_row_group():
    """In a process of one thread, row-by-row INSERTs (a shell's .import)
    encode on the inserting thread, so stdio stays lock-free; an INSERT ...
    SELECT that fills row groups starts the encode thread, which ends with
    the transaction."""
    db = os.path.join(tmpdir(), "th.db")
    code = COUNT_THREADS + """
c.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, rowgroup=1000)")
c.execute("BEGIN")
for i in range(2500):
    c.execute("INSERT INTO t VALUES (?, ?)", (i, 'row %d' % i))
n1 = threads()
c.execute("WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 3000) "
          "INSERT INTO t SELECT i, 'x' || i FROM s")
n2 = threads()
c.execute("COMMIT")
print(n1, n2, threads(), c.execute("SELECT count(*), sum(a) FROM t").fetchone()[0])
"""
    out = subprocess.run([sys.executable, "-c", code, db, EXT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    n1, n2, n3, rows = (int(x) for x in out.stdout.split())
    assert n1 == 1, "row-by-row inserts started a thread: %d" % n1
    assert n2 == 2, "INSERT ... SELECT of three row groups: %d threads" % n2
    assert n3 == 1 and rows == 5500, (n3, rows)


def striped_pair(con, d, extra=""):
    devs = ",".join(os.path.join(d, x) for x in ("m0.csd", "m1.csd", "m2.csd"))
    con.execute("CREATE TABLE src(%s)" % COLS)
    con.execute("CREATE TABLE nat(%s%s)" % (COLS, extra))
    con.execute("CREATE VIRTUAL TABLE t USING csq(%s%s, rowgroup=%d, devices='%s')" % (COLS, extra, RG, devs))
    return [os.path.join(d, x) for x in ("m0.csd", "m1.csd", "m2.csd")]


def test_striped_insert_select_round_trips_and_undoes_failures():
    """A table striped over three devices takes INSERT ... SELECT of several
    row groups through the encode thread like a one-device table: values
    and types as native, row groups on every member, and a statement that
    fails half way (a constraint, a device fault), ROLLBACK TO and ROLLBACK
    leave the table as before them."""
    d = tmpdir()
    db = os.path.join(d, "s.db")
    con = connect(db)
    extra = ", CHECK (a IS NULL OR typeof(a) != 'integer' OR a != -77)"
    devs = striped_pair(con, d, extra)
    rows = src_rows(7300, seed=11)
    fill(con, "src", rows)
    con.execute("CREATE TABLE src2(%s)" % COLS)
    fill(con, "src2", [(-77,) + r[1:] if i == 4100 else r for i, r in enumerate(rows)])
    size0 = [os.stat(m).st_blocks for m in devs]
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src" % tab)
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "autocommit")
    grown = [os.stat(m).st_blocks > s for m, s in zip(devs, size0)]
    assert all(grown), "row groups did not reach every member: %r" % grown
    before = rows_of(con, "t")
    # a constraint failure at the 4101st row: four row groups went out first
    for tab in ("nat", "t"):
        expect_error(lambda: con.execute("INSERT INTO %s SELECT * FROM src2" % tab), "CHECK constraint failed")
    same_rows(rows_of(con, "t"), before, "after the failed autocommit statement")
    con.execute("BEGIN")
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src WHERE rowid %% 4 != 1" % tab)
        expect_error(lambda: con.execute("INSERT INTO %s SELECT * FROM src2" % tab), "CHECK constraint failed")
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "after the failed statement in a transaction")
    con.execute("SAVEPOINT s")
    mark = rows_of(con, "t")
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src WHERE rowid > 1000" % tab)
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "in the savepoint")
    con.execute("ROLLBACK TO s")
    same_rows(rows_of(con, "t"), mark, "after ROLLBACK TO")
    same_rows(rows_of(con, "nat"), mark, "native after ROLLBACK TO")
    con.execute("RELEASE s")
    con.execute("COMMIT")
    con.close()
    con = connect(db)
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "after COMMIT and reopening")
    committed = rows_of(con, "t")
    # a whole transaction of several row groups rolled back
    con.execute("BEGIN")
    con.execute("INSERT INTO t SELECT * FROM src")
    con.execute("DELETE FROM t WHERE rowid % 5 = 0")
    con.execute("ROLLBACK")
    same_rows(rows_of(con, "t"), committed, "after ROLLBACK")
    # a device fault on a member other than the coordinator while row
    # groups come back from the thread
    con.execute("SELECT csq_fault('op=nvm_write,nth=2,action=status:0x280', ?)", (devs[1],))
    expect_error(lambda: con.execute("INSERT INTO t SELECT * FROM src"), "Write Fault")
    con.execute("SELECT csq_fault(NULL, ?)", (devs[1],))
    same_rows(rows_of(con, "t"), committed, "after the fault")
    con.close()
    con = connect(db)
    same_rows(rows_of(con, "t"), committed, "after the fault and reopening")


def test_striped_insert_select_uses_the_encode_thread():
    """The encode thread serves striped tables too: an INSERT ... SELECT
    filling row groups of a table over two devices starts it, and it ends
    with the transaction."""
    d = tmpdir()
    code = COUNT_THREADS + """
c.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, rowgroup=1000, devices='%s,%s')"
          % (sys.argv[3], sys.argv[4]))
c.execute("BEGIN")
n1 = threads()
c.execute("WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 4500) "
          "INSERT INTO t SELECT i, 'x' || i FROM s")
n2 = threads()
c.execute("COMMIT")
print(n1, n2, threads(), *c.execute("SELECT count(*), sum(a) FROM t").fetchone())
"""
    out = subprocess.run([sys.executable, "-c", code, os.path.join(d, "th.db"), EXT, os.path.join(d, "a.csd"),
                          os.path.join(d, "b.csd")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    n1, n2, n3, rows, total = (int(x) for x in out.stdout.split())
    assert n1 == 1, "threads before the statement: %d" % n1
    assert n2 == 2, "striped INSERT ... SELECT of four row groups: %d threads" % n2
    assert n3 == 1 and rows == 4500 and total == 4500 * 4501 // 2, (n3, rows, total)


def test_two_tables_interleaved_with_savepoints_and_ddl():
    """Rows reach two csq tables of one transaction in turn: INSERT ... SELECT
    into one while a SELECT kept open feeds a prepared INSERT into the other,
    a savepoint rolled back in between, a table created, written and dropped
    beside them, the transaction rolled back and done again.
    Each csq table ends as its native twin (rows, rowids, types), inside the
    transaction and after COMMIT. The write path keeps each table's view of
    the device transaction from row to row; every change of the
    transactions or their catalogs in between must be seen."""
    db = os.path.join(tmpdir(), "i.db")
    con = connect(db)
    con.execute("CREATE TABLE src(%s)" % COLS)
    fill(con, "src", src_rows(6000, seed=5))
    for n in ("1", "2"):
        con.execute("CREATE TABLE nat%s(%s)" % (n, COLS))
        con.execute("CREATE VIRTUAL TABLE t%s USING csq(%s, rowgroup=%d)" % (n, COLS, RG))
    ins = "INSERT INTO %s VALUES(?,?,?,?,?,?)"
    feed = con.cursor()  # stays open across the statements below

    def both(sql, *args):
        for pre in ("nat", "t"):
            con.execute(sql.replace("@", pre), *args)

    def check(what):
        for n in ("1", "2"):
            same_rows(rows_of(con, "t" + n), rows_of(con, "nat" + n), "%s: t%s" % (what, n))

    for attempt in ("rolled back", "committed"):
        con.execute("BEGIN")
        both("INSERT INTO @1 SELECT * FROM src WHERE rowid <= 2500")
        feed.execute("SELECT * FROM src ORDER BY rowid DESC")
        con.execute("SAVEPOINT a")
        for i in range(1200):
            r = feed.fetchone()
            both(ins % "@2", r)
            if i % 300 == 0:
                both("INSERT INTO @1 SELECT * FROM src WHERE rowid > 2500 LIMIT 50 OFFSET %d" % i)
        check("before ROLLBACK TO")
        con.execute("ROLLBACK TO a")
        check("after ROLLBACK TO")
        for i in range(1500):
            r = feed.fetchone()
            both(ins % "@2", r)
            if i == 700:
                con.execute("CREATE VIRTUAL TABLE t3 USING csq(%s, rowgroup=%d)" % (COLS, RG))
                con.execute("INSERT INTO t3 SELECT * FROM src WHERE rowid < 1500")
                both("INSERT INTO @1 SELECT * FROM src WHERE rowid % 7 = 0")
                con.execute("DROP TABLE t3")
            if i % 400 == 0:
                both("INSERT INTO @1 SELECT * FROM src WHERE rowid % 5 = 1 LIMIT 1100")
        con.execute("RELEASE a")
        check("after RELEASE")
        for i in range(1300):
            both(ins % "@2", feed.fetchone())
        both("INSERT INTO @1 SELECT * FROM src WHERE rowid > 5000")
        check("at the end")
        if attempt == "rolled back":
            con.execute("ROLLBACK")
            check("after ROLLBACK")
        else:
            con.execute("COMMIT")
    feed.close()
    check("after COMMIT")
    con.close()
    con = connect(db)
    check("after reopening")


def test_first_row_group_of_default_size_round_trips():
    """The buffer of a table of the default row-group size grows to a whole
    row group at once once it holds more than a small one (vtab/write.c,
    unstage): rows before and after that step, values longer than those
    its heap was sized by, a savepoint rolled back across it and a full
    row group after it read back as the native table's."""
    db = os.path.join(tmpdir(), "g.db")
    con = connect(db)
    con.execute("CREATE TABLE src(%s)" % COLS)
    con.execute("CREATE TABLE nat(%s)" % COLS)
    con.execute("CREATE VIRTUAL TABLE t USING csq(%s)" % COLS)
    fill(con, "src", src_rows(9000, seed=3))
    con.execute("BEGIN")
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src WHERE rowid <= 8000" % tab)
    con.execute("SAVEPOINT a")
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT a, b, c || printf('%%.400c', 'x'), d, e, f FROM src" % tab)
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "past the step")
    con.execute("ROLLBACK TO a")
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "rolled back across the step")
    for tab in ("nat", "t"):
        for _ in range(7):
            con.execute("INSERT INTO %s SELECT * FROM src" % tab)
    con.execute("COMMIT")
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 8000 + 7 * 9000
    same_rows(rows_of(con, "t"), rows_of(con, "nat"), "after COMMIT")


def test_text_of_every_length_and_rowid_alias_as_native():
    """Text of every length from 0 to 40 bytes (the stage copies short values
    inline, in overlapping words: vtab/write.c, copy_short), multi-byte
    UTF-8, and the same values in columns of each affinity, into a table with
    an INTEGER PRIMARY KEY, read back as the native table's; a savepoint
    rolled back in the middle and a ROLLBACK undo them."""
    db = os.path.join(tmpdir(), "l.db")
    con = connect(db)
    cols = "k INTEGER PRIMARY KEY, a TEXT, b BLOB, c NUMERIC, d INTEGER, e REAL, f"
    con.execute("CREATE TABLE src(%s)" % cols)
    con.execute("CREATE TABLE nat(%s)" % cols)
    con.execute("CREATE VIRTUAL TABLE t USING csq(%s, rowgroup=700)" % cols)
    rows = []
    for i in range(3000):
        n = i % 41
        s = "".join(chr(ord("a") + (i + j) % 26) for j in range(n))
        if i % 7 == 3:
            s = ("é€" * 20)[:n // 2]  # 2- and 3-byte characters
        k = None if i % 5 else i * 3 + 1  # NULL: the table numbers the row
        rows.append((k, s, s, s if i % 3 else str(i), s if i % 4 else " %d " % i, s if i % 6 else "%d.5" % i, s))
    con.execute("BEGIN")
    con.executemany("INSERT INTO src VALUES(?,?,?,?,?,?,?)", rows)
    con.execute("COMMIT")

    def got(table):
        q = ("SELECT k, %s FROM %s ORDER BY k" %
             (", ".join("%s, typeof(%s), length(%s), hex(%s)" % (c, c, c, c) for c in "abcdef"), table))
        return con.execute(q).fetchall()

    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src WHERE rowid <= 1500" % tab)
    same_rows(got("t"), got("nat"), "autocommit")
    con.execute("BEGIN")
    con.execute("SAVEPOINT s")
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT NULL, a, b, c, d, e, f FROM src" % tab)
    same_rows(got("t"), got("nat"), "in the savepoint")
    con.execute("ROLLBACK TO s")
    same_rows(got("t"), got("nat"), "rolled back to the savepoint")
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT * FROM src WHERE rowid > 1500" % tab)
    same_rows(got("t"), got("nat"), "in the transaction")
    con.execute("ROLLBACK")
    same_rows(got("t"), got("nat"), "after ROLLBACK")
    n = con.execute("SELECT count(*) FROM t").fetchone()[0]
    assert n == con.execute("SELECT count(*) FROM src WHERE rowid <= 1500").fetchone()[0] and n > 0
    for tab in ("nat", "t"):
        con.execute("INSERT INTO %s SELECT NULL, a, b, c, d, e, f FROM src" % tab)
    con.close()
    con = connect(db)
    same_rows(got("t"), got("nat"), "after reopening")
