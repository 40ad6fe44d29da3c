"""The planner's shapes through every client: the stock sqlite3 shell
(.load, statements in one session, then reopened), build/csq, Python's
executescript and execute, each against the native answer in the same
session.

The shapes: a grouped join served grouped (csq_jrows), an uncorrelated
subquery's value bound (TPC-H Q11), a grouped IN subquery run first (Q18),
a correlated scalar subquery over a join (Q2), a WITH table grouped on the
device and read twice (Q15), a one-table query with a correlated aggregate
(Q20's inner query).
"""
import os
import shutil
import sqlite3
import subprocess
import tempfile

from harness import connect

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("CSQ_BUILD", os.path.join(HERE, "..", "..", "build"))
EXT = os.environ.get("CSQ_EXT", os.path.join(BUILD, "csq.so"))
SQLITE3 = "/usr/bin/sqlite3" if os.path.exists("/usr/bin/sqlite3") else shutil.which("sqlite3")

SETUP = """
CREATE VIRTUAL TABLE f USING csq(k INTEGER, g TEXT, x REAL, pushdown='always');
CREATE VIRTUAL TABLE d USING csq(k INTEGER, n TEXT, r INTEGER, pushdown='always');
CREATE TABLE nf(k INTEGER, g TEXT, x REAL);
CREATE TABLE nd(k INTEGER, n TEXT, r INTEGER);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 3000)
  INSERT INTO f SELECT i % 97, char(65 + i % 5), CASE WHEN i % 13 = 0 THEN NULL ELSE (i % 31) * 0.5 END FROM s;
WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 96)
  INSERT INTO d SELECT i, 'n' || (i % 7), i % 3 FROM s;
INSERT INTO nf SELECT * FROM f;
INSERT INTO nd SELECT * FROM d;
"""

QUERIES = [
    "SELECT n, g, count(*), sum(x) FROM {f}, {d} WHERE {f}.k = {d}.k GROUP BY n, g",
    "SELECT {f}.k, sum(x) AS v FROM {f}, {d} WHERE {f}.k = {d}.k AND r = 1 GROUP BY {f}.k "
    "HAVING sum(x) > (SELECT sum(x) * 0.02 FROM {f}, {d} WHERE {f}.k = {d}.k AND r = 1) ORDER BY v DESC, 1",
    "SELECT n, count(*) FROM {f}, {d} WHERE {f}.k = {d}.k AND {f}.k IN (SELECT k FROM {f} GROUP BY k "
    "HAVING sum(x) > 220) GROUP BY n ORDER BY n",
    "SELECT {d}.k, n FROM {d} WHERE r = 2 AND {d}.k < (SELECT count(*) FROM {f} AS a, {d} AS b "
    "WHERE a.k = b.k AND b.r = 2 AND a.k = {d}.k) ORDER BY 1",
    "WITH t (key, total) AS (SELECT k, sum(x) FROM {f} GROUP BY k) SELECT key, total, n FROM {d}, t "
    "WHERE {d}.k = t.key AND total = (SELECT max(total) FROM t) ORDER BY key",
    "SELECT k, g FROM {f} WHERE x > (SELECT avg(r) * 10 FROM {d} WHERE {d}.k = {f}.k) ORDER BY 1, 2",
]


def texts():
    return [(q.format(f="f", d="d"), q.format(f="nf", d="nd")) for q in QUERIES]


def views_script():
    """Views of the csq texts, then each view and its native text, with a
    separator line between answers."""
    out = []
    for i, (mine, native) in enumerate(texts()):
        out.append("CREATE VIRTUAL TABLE temp.v%d USING csq_query('%s');" % (i, mine.replace("'", "''")))
        out.append("SELECT * FROM v%d;" % i)
        out.append("SELECT '==';")
        out.append(native + ";")
        out.append("SELECT '##';")
    return "\n".join(out) + "\n"


def split_answers(text):
    """[(csq rows, native rows)] of a shell's output of views_script()."""
    pairs = []
    for chunk in text.split("##\n")[:-1]:
        mine, native = chunk.split("==\n")
        pairs.append((mine, native))
    return pairs


def make_db():
    db = os.path.join(tempfile.mkdtemp(), "p.db")
    out = subprocess.run([BUILD + "/csq", db], input=SETUP, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return db


def check_pairs(pairs, who):
    assert len(pairs) == len(QUERIES), (who, len(pairs))
    for q, (mine, native) in zip(QUERIES, pairs):
        assert native.strip(), (who, q)
        assert mine == native, "%s: %s\n  csq %r\n  native %r" % (who, q, mine[:200], native[:200])


def test_stock_shell_one_session_then_reopened():
    if not SQLITE3:
        print("SKIP: no sqlite3 shell")
        return
    db = make_db()
    ext = os.path.abspath(EXT).replace(".so", "")
    for round_ in range(2):  # the second run reopens the file
        script = ".bail on\n.load %s\n%s" % (ext, views_script())
        out = subprocess.run([SQLITE3, db], input=script, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        check_pairs(split_answers(out.stdout), "sqlite3 round %d" % round_)


def test_csq_shell():
    db = make_db()
    out = subprocess.run([BUILD + "/csq", db], input=views_script(), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    check_pairs(split_answers(out.stdout), "build/csq")


def test_python_executescript_and_execute():
    db = make_db()
    con = connect(db)
    script = "\n".join("CREATE VIRTUAL TABLE temp.w%d USING csq_query('%s');" % (i, m.replace("'", "''"))
                       for i, (m, _) in enumerate(texts()))
    con.executescript(script)
    for i, (mine, native) in enumerate(texts()):
        plan = dict(con.execute("SELECT part, detail FROM csq_explain(?)", (mine,)))["plan"]
        assert plan != "host", (mine, plan)  # the planner takes each
        want = con.execute(native).fetchall()
        assert want, native
        assert con.execute("SELECT * FROM w%d" % i).fetchall() == want, mine
    # the same views again, after a write to each table, see the writes
    con.execute("INSERT INTO f VALUES (5, 'Z', 99.5)")
    con.execute("INSERT INTO nf VALUES (5, 'Z', 99.5)")
    con.execute("UPDATE d SET r = 1 WHERE k = 5")
    con.execute("UPDATE nd SET r = 1 WHERE k = 5")
    for i, (mine, native) in enumerate(texts()):
        assert con.execute("SELECT * FROM w%d" % i).fetchall() == con.execute(native).fetchall(), mine
    con.close()
    # plain sqlite3 module without the harness: load, view, answer
    con = sqlite3.connect(db)
    con.enable_load_extension(True)
    con.load_extension(EXT)
    mine, native = texts()[4]
    con.execute("CREATE VIRTUAL TABLE temp.q15 USING csq_query('%s')" % mine.replace("'", "''"))
    assert con.execute("SELECT * FROM q15").fetchall() == con.execute(native).fetchall()
    con.close()
