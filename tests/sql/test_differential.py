"""Differential writes (issue 15): random scripts of INSERT/UPDATE/DELETE in
every conflict mode, transactions, savepoints and reads, run over csq tables
and over native tables of the same names in a second database file, through
every client a user would use; every output line and every error must be the
same (the native side is the oracle).

Clients:
  test_shell           the stock sqlite3 shell (.load, .bail off, .echo on):
                       one process per session of 1-3 chunks, `.open` (the
                       database reopened) at random points between chunks
  test_python_execute  Python's execute, one statement at a time
                       (isolation_level=None), the connection reopened at
                       random points
  test_python_script   Python's executescript per chunk, the state compared
                       after each chunk
  test_csq_shell       build/csq DB SQL (or the SQL on stdin), one process
                       per chunk
  test_mixed_clients   chunks of one script dealt to the clients above in
                       turn over the same pair of databases, Python's
                       connections kept open while the others write
  test_big_tables      scripts over thousands of rows (execute)
(the C API with statements kept prepared is tests/unit/test_diff_capi.c).
After every script both databases are closed, reopened and compared whole.

Accepted limits (README "Semantics"): where csq is documented to differ,
the generator or the comparison has a rule, commented with the limit's
letter; everything else is compared exactly, errors included.
  L  row order: csq visits rows in storage order, not rowid order.
     (1) a read without ORDER BY has a tag as its first column ('uN') and
     its rows are compared as a multiset; every other read has an ORDER BY
     that fixes the order; (2) no write whose effect depends on the order:
     the rowid changes on one row (WHERE rowid = N) or as a shift past the
     table's other rowids; a multi-row UPDATE can fail in one way only, and
     under OR FAIL not part way; (3) sum/total/avg over a column that held
     numbers beyond 2**20 add only the smaller ones (where the overflow or
     the rounding of a cancelling sum lands is the order); (4) LIMIT without
     ORDER BY is compared by its count.
  K  UPDATE OR REPLACE moving a row onto one the statement updates later is
     refused by csq: not generated (multi-row rowid changes never collide);
     test_regress_writes checks the refusal.
  M  RENAME of a csq table comes in autocommit only (csq refuses it in a
     transaction); DROP inside a transaction only while no SAVEPOINT is
     open (a DROP undone by ROLLBACK TO loses the table's earlier writes of
     the transaction when no other table was written in it), and the
     dropped name is not created again before the transaction ends.
  J  a multi-row INSERT OR REPLACE/IGNORE/FAIL/ROLLBACK in a transaction
     gets integer (or NULL) rowids only.

Knobs (environment):
  CSQ_DIFF_SEED=N      base seed (default 15); a failure prints the seed and
                       script number that reproduce it
  CSQ_DIFF_SCALE=X     scripts per client scaled by X (default 1; a quarter
                       under the sanitizers)
  CSQ_DIFF_KEEP=DIR    keep every script's SQL in DIR (failing scripts are
                       always written to a temporary directory, path in the
                       failure)
  CSQ_DIFF_REPORTS=N   mismatches listed per test (default 6; one per
                       script: a script stops at its first mismatch)

Reproduce and shrink one failing script (delta debugging over its
statements, through Python's execute or the stock shell; execute-file also
compares the tables after reopening):
  CSQ_EXT=build/csq.so /usr/bin/python3 tests/sql/test_differential.py \\
      minimize SEED [execute|execute-file|script|shell|csq]
(SEED: the script's seed, as a failure prints it)
"""
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import EXT, Skip  # noqa: E402

BUILD = os.environ.get("CSQ_BUILD", os.path.join(HERE, "..", "..", "build"))
SQLITE3 = "/usr/bin/sqlite3" if os.path.exists("/usr/bin/sqlite3") else shutil.which("sqlite3")
SANITIZE = bool(os.environ.get("SANITIZE")) or "asan" in os.environ.get("LD_PRELOAD", "")
SCALE = float(os.environ.get("CSQ_DIFF_SCALE", "1")) * (0.25 if SANITIZE else 1.0)
BASE_SEED = int(os.environ.get("CSQ_DIFF_SEED", "15"))
KEEP = os.environ.get("CSQ_DIFF_KEEP")
MAX_REPORTS = int(os.environ.get("CSQ_DIFF_REPORTS", "6"))  # mismatches listed per test


def n_scripts(base):
    return max(1, int(round(base * SCALE)))


# ---------------------------------------------------------------- schema


class Col:
    def __init__(self, name, ty, notnull=False, default=None, check=None, ipk=False,
                 autoinc=False):
        self.name, self.ty, self.notnull = name, ty, notnull
        self.default, self.check, self.ipk, self.autoinc = default, check, ipk, autoinc

    def decl(self):
        s = self.name + (" " + self.ty if self.ty else "")
        if self.ipk:
            s += " PRIMARY KEY" + (" AUTOINCREMENT" if self.autoinc else "")
        if self.notnull:
            s += " NOT NULL"
        if self.default is not None:
            s += " DEFAULT " + self.default
        if self.check:
            s += " CHECK (%s)" % self.check
        return s

    def aff(self):
        t = self.ty.upper()
        if "INT" in t:
            return "INTEGER"
        if "CHAR" in t or "CLOB" in t or "TEXT" in t:
            return "TEXT"
        if "BLOB" in t or not t:
            return "BLOB"
        if "REAL" in t or "FLOA" in t or "DOUB" in t:
            return "REAL"
        return "NUMERIC"


class Table:
    def __init__(self, name, cols, opts=""):
        self.name, self.cols, self.opts = name, cols, opts
        # limit L(3): the columns that held a number of magnitude 2**20 or
        # more at some point of the script (in the replica)
        self.big = set()

    @property
    def ipk(self):
        for c in self.cols:
            if c.ipk:
                return c
        return None

    def csq_create(self):
        decl = ", ".join(c.decl() for c in self.cols)
        return "CREATE VIRTUAL TABLE %s USING csq(%s%s)" % (
            self.name, decl, (", " + self.opts) if self.opts else "")

    def native_create(self):
        return "CREATE TABLE %s(%s)" % (self.name, ", ".join(c.decl() for c in self.cols))

    def value_cols(self):
        return [c for c in self.cols if not c.ipk]

    def dump_sql(self):
        """Every row, every value and its storage class, in rowid order."""
        cols = ", ".join("%s, typeof(%s)" % (c.name, c.name) for c in self.cols)
        return "SELECT rowid, %s FROM %s ORDER BY rowid" % (cols, self.name)


def make_schema(rnd):
    """The tables of one script: t1 with a rowid alias and one column of each
    declared type; t2 without a rowid alias, with NOT NULL columns (DEFAULT
    and CHECK in some scripts); t3 with AUTOINCREMENT in some scripts. csq
    options (row group size, pushdown) vary by script."""
    opts = []
    if rnd.random() < 0.6:
        opts.append("rowgroup=%d" % rnd.choice([16, 16, 40, 100, 1000]))
    if rnd.random() < 0.5:
        opts.append("pushdown=%s" % rnd.choice(["'always'", "'always'", "'never'", "'auto'"]))
    opts = ", ".join(opts)
    t1 = Table("t1", [Col("id", "INTEGER", ipk=True), Col("a", "INTEGER"), Col("b", "TEXT"),
                      Col("c", "REAL"), Col("d", "NUMERIC"), Col("e", "BLOB"), Col("f", "")], opts)
    dflt = rnd.random() < 0.25
    chk = rnd.random() < 0.25
    t2 = Table("t2", [Col("k", "INTEGER", notnull=True),
                      Col("s", "TEXT", notnull=True, default="'dflt'" if dflt else None),
                      Col("n", "NUMERIC", check="n IS NULL OR n <> 13" if chk else None),
                      Col("v", "VARCHAR(8)"), Col("w", "DOUBLE", notnull=rnd.random() < 0.5)], opts)
    tabs = [t1, t2]
    if rnd.random() < 0.3:
        tabs.append(Table("t3", [Col("id", "INTEGER", ipk=True, autoinc=True), Col("x", "INT"),
                                 Col("y", "TEXT", notnull=True)], opts))
    return tabs


# ---------------------------------------------------------------- values

BIG_INTS = ["9223372036854775807", "-9223372036854775808", "9223372036854775806",
            "4294967296", "-2147483649", "9007199254740993", "1000000000000", "-4611686018427387904"]
REALS = ["0.5", "-1.25", "2.0", "3.0", "1e3", "1.5e10", "-0.0", "0.1", "100.0", "123456.789",
         "-7.5", "1e-5", "3.14159", "13.0", "1e18", "4.0e-3"]
TEXTS = ["'abc'", "''", "'x y'", "'12'", "' 12 '", "'3.0'", "'1e3'", "'0x10'", "'-7'",
         "'9223372036854775808'", "'\u00e9t\u00e9'", "'it''s'", "'NULL'", "'A'", "'a%b'",
         "'abc_d'", "'12abc'", "'0012'", "'1.50'", "'13'", "'Abc'", "'north'", "'south'",
         "'x|y,z'"]
BLOBS = ["X''", "X'00'", "X'41'", "X'3132'", "X'ff00ff'", "X'616263'", "zeroblob(3)"]
WORDS = ["north", "south", "east", "abc", "ab", "b", "zz", "A", "a_c", "10", "2"]


def lit(rnd, aff=None):
    """A literal of any storage class, biased toward the column's affinity."""
    r = rnd.random()
    if r < 0.12:
        return "NULL"
    if aff and r < 0.6:
        if aff == "INTEGER":
            return str(rnd.randrange(-5, 40)) if rnd.random() < 0.8 else rnd.choice(BIG_INTS)
        if aff == "TEXT":
            if rnd.random() < 0.5:
                return "'%s'" % rnd.choice(WORDS)
            return rnd.choice(TEXTS)
        if aff == "REAL":
            return "%.2f" % rnd.uniform(-500, 500) if rnd.random() < 0.6 else rnd.choice(REALS)
        if aff == "NUMERIC":
            return rnd.choice(["'12'", "'3.0'", "' 7'", "'1e2'", "'abc'", "2.5", "7", "'0x1f'",
                               "'13'", "13", "'9223372036854775808'", "1e20"])
    k = rnd.randrange(9)
    if k <= 2:
        return str(rnd.randrange(-5, 40))
    if k == 3:
        return rnd.choice(BIG_INTS)
    if k == 4:
        return "%.3f" % rnd.uniform(-1000, 1000)
    if k == 5:
        return rnd.choice(REALS)
    if k == 6:
        return rnd.choice(TEXTS)
    if k == 7:
        return "'%s'" % rnd.choice(WORDS)
    return rnd.choice(BLOBS)


CONFLICT = ["", "", "", "OR IGNORE ", "OR REPLACE ", "OR FAIL ", "OR ABORT ", "OR ROLLBACK "]


def no_max_rowid(expr):
    """expr as a rowid, but never near the largest integer: once a row holds
    rowid 9223372036854775807, SQLite picks new rowids at random and the two
    sides could no longer be compared (test_regress_writes checks that
    rowid's conflicts). Values of other classes pass as they are."""
    return "CASE WHEN CAST(%s AS INTEGER) > 4611686018427387904 THEN NULL ELSE %s END" % (
        expr, expr)


def t4_table(name, opts):
    """The table a script creates, renames and drops as it goes."""
    return Table(name, [Col("id", "INTEGER", ipk=True), Col("a", "INTEGER"), Col("b", "TEXT")],
                 opts)


class Gen:
    """Writes one script. A native in-memory replica runs each statement as it
    is written, so that rowids are chosen among those the table holds (and
    conflict), or just past them; the replica only guides choices, the
    oracle is the native side of each client."""

    def __init__(self, rnd, tabs, big=False):
        self.rnd, self.tabs, self.big = rnd, list(tabs), big
        self.rep = sqlite3.connect(":memory:", isolation_level=None)
        for t in tabs:
            self.rep.execute(t.native_create())
        self.saves = []
        self.nsave = 0
        self.dropped_in_txn = False
        self.nread = 0  # the tags of unordered reads
        self.t4 = None  # a table created and dropped in the middle of the script

    # -- helpers
    def rowids(self, t):
        try:
            lo, hi, n = self.rep.execute(
                "SELECT min(rowid), max(rowid), count(*) FROM %s" % t.name).fetchone()
        except sqlite3.Error:
            return 0, 0, 0
        return (lo or 0), (hi or 0), n

    def rowid_val(self, t):
        """A rowid: an existing one (conflicts), the next ones, a far one."""
        rnd = self.rnd
        lo, hi, n = self.rowids(t)
        r = rnd.random()
        if r < 0.45 and n:
            return str(rnd.randint(lo, hi))
        if r < 0.75:
            return str(hi + rnd.randint(1, 4))
        if r < 0.82:
            return "NULL"
        if r < 0.87:
            return str(rnd.randint(-5, 0))
        if r < 0.9:
            return rnd.choice(["'%d'" % (hi + 1), "%d.0" % max(hi, 1), "2.5", "'abc'", "X'01'"])
        if r < 0.93:
            return str(rnd.choice([2**40, 2**31, 10**12, 2**62]))
        return str(rnd.randint(1, max(hi, 1) + 10))

    def some_rowid(self, t):
        """A rowid the replica's t holds (mostly), else one near them."""
        lo, hi, n = self.rowids(t)
        if n and self.rnd.random() < 0.85:
            try:
                return str(self.rep.execute("SELECT rowid FROM %s LIMIT 1 OFFSET %d" % (
                    t.name, self.rnd.randrange(n))).fetchone()[0])
            except (sqlite3.Error, TypeError):
                pass
        return str(self.rnd.randint(lo - 1, hi + 1))

    def int_rowid_val(self, t):
        """rowid_val, but only integers or NULL (limit J: in a transaction,
        a multi-row INSERT OR REPLACE/IGNORE/FAIL/ROLLBACK whose later row
        has a rowid that is no integer keeps the earlier rows on native, as
        SQLite runs these without a statement journal; csq's statement is
        rolled back whole)."""
        v = self.rowid_val(t)
        return v if v in ("NULL",) or re.match(r"^-?\d+$", v) else str(self.rowids(t)[1] + 1)

    def agg(self, t, fn, name):
        """fn(name) for sum, total and avg, but over the values up to 2**20
        only where the column held larger numbers: limit L(3), csq adds in
        storage order, native in rowid order, and with large values the
        order decides whether sum() of integers overflows ('integer
        overflow') and what a sum that cancels out rounds to (0.0 or 38.0
        for 38, -2**63 and 2.0**63; beyond 1e-9 from 2**20 on)."""
        if name in t.big:
            return "%s(CASE WHEN %s BETWEEN -1048576 AND 1048576 THEN %s END)" % (
                fn, name, name)
        return "%s(%s)" % (fn, name)

    def note_big(self):
        """Limit L(3): mark the columns that hold a number of magnitude
        over 2**20 now (in the replica; a mark stays)."""
        for t in self.tabs:
            cols = ["rowid"] + [c.name for c in t.cols]
            # (text and blobs as sum() reads them: '9223372036854775808'
            # is 2.0**63)
            q = ", ".join("max(NOT CAST(%s AS REAL) BETWEEN -1048576 AND 1048576)" % c
                          for c in cols)
            try:
                row = self.rep.execute("SELECT %s FROM %s" % (q, t.name)).fetchone()
            except sqlite3.Error:
                continue
            for c, m in zip(cols, row):
                if m:
                    t.big.add(c)
                    if c == "rowid" and t.ipk:
                        t.big.add(t.ipk.name)

    def table(self):
        return self.rnd.choice(self.tabs)

    def col(self, t, any_col=True):
        cols = t.cols if any_col else t.value_cols()
        return self.rnd.choice(cols)

    def expr(self, t, c=None):
        """A value expression over t's row (for SET and INSERT ... SELECT)."""
        rnd = self.rnd
        aff = c.aff() if c else None
        if rnd.random() < 0.45:
            return lit(rnd, aff)
        x = self.col(t).name
        y = self.col(t).name
        return rnd.choice([
            "%s + 1" % x, "%s * 2" % x, "-%s" % x, "%s || 'x'" % x, "%s / 2" % x, "%s %% 7" % x,
            "abs(%s)" % x, "length(%s)" % x, "upper(%s)" % x, "substr(%s, 2)" % x,
            "CAST(%s AS INTEGER)" % x, "CAST(%s AS TEXT)" % x, "CAST(%s AS REAL)" % x,
            "coalesce(%s, %s, 0)" % (x, y), "round(%s, 1)" % x, "%s + %s" % (x, y), "NULL",
            "typeof(%s)" % x, "CASE WHEN %s > 5 THEN NULL ELSE %s END" % (x, y), "hex(%s)" % x,
            "%s" % y, "rowid", "rowid * 10", "(SELECT max(rowid) FROM %s)" % self.table().name,
            "%s IS NULL" % x, "%s - rowid" % x, "quote(%s)" % x, "%s || %s" % (x, y)])

    def pred(self, t, depth=0):
        rnd = self.rnd
        c = self.col(t)
        x = c.name
        k = rnd.randrange(17)
        if k == 0:
            p = "%s %s %s" % (x, rnd.choice(["=", "<", "<=", ">", ">=", "!=", "<>", "IS", "IS NOT"]),
                              lit(rnd, c.aff()))
        elif k == 1:
            p = "%s IS %sNULL" % (x, rnd.choice(["", "NOT "]))
        elif k == 2:
            p = "%s %sIN (%s)" % (x, rnd.choice(["", "", "NOT "]),
                                  ", ".join(lit(rnd, c.aff()) for _ in range(rnd.randint(1, 4))))
        elif k == 3:
            p = "%s %sLIKE '%s'" % (x, rnd.choice(["", "NOT "]), rnd.choice(
                ["a%", "%b%", "_", "A%", "1%", "%", "n%", "%h", "ab_"]))
        elif k == 4:
            a, b = sorted([rnd.randint(-5, 40), rnd.randint(-5, 40)])
            p = "%s %sBETWEEN %d AND %d" % (x, rnd.choice(["", "", "NOT "]), a, b)
        elif k == 5:
            lo, hi, n = self.rowids(t)
            a = rnd.randint(lo - 2, hi + 2)
            b = rnd.randint(a, hi + 3)
            rid = rnd.choice(["rowid", "_rowid_", "oid"] + ([t.ipk.name] if t.ipk else []))
            p = rnd.choice(["%s BETWEEN %d AND %d" % (rid, a, b), "%s > %d" % (rid, a),
                            "%s <= %d" % (rid, a), "%s = %d" % (rid, a),
                            "%s IN (%d, %d, %d)" % (rid, a, b, rnd.randint(lo, hi + 1))])
        elif k == 6:
            y = self.col(t).name
            p = rnd.choice(["%s + %s > %d" % (x, y, rnd.randint(-3, 30)),
                            "%s %% 3 = %d" % (x, rnd.randint(0, 2)),
                            "length(%s) %s %d" % (x, rnd.choice(["<", ">", "="]), rnd.randint(0, 4)),
                            "%s = %s" % (x, y), "%s < %s" % (x, y),
                            "abs(%s) < 10" % x, "typeof(%s) = '%s'" % (
                                x, rnd.choice(["integer", "real", "text", "blob", "null"]))])
        elif k == 7:
            p = "%s GLOB '%s'" % (x, rnd.choice(["a*", "*1*", "?", "[ns]*", "*"]))
        elif k == 8:
            o = self.table()
            oc = self.col(o).name
            if o is t:
                # SQLite 3.40 answers `x IN (SELECT id FROM t)` (id the rowid
                # alias) in a DELETE of t by probing t's rowids while it
                # deletes, so its rows depend on the visiting order (a
                # bug of the oracle, not csq's): `+id` makes it build the set
                oc = "+" + oc
            p = "%s %sIN (SELECT %s FROM %s%s)" % (
                x, rnd.choice(["", "NOT "]), oc, o.name,
                "" if rnd.random() < 0.5 else " WHERE " + self.pred(o, 2))
        elif k == 9:
            # correlated with t's row (over t itself through an alias: t's
            # name in it would name the inner table)
            o = self.table()
            alias = "o3" if o is t else o.name
            p = "%sEXISTS (SELECT 1 FROM %s%s WHERE %s.rowid = %s.%s)" % (
                rnd.choice(["", "NOT "]), o.name, " AS o3" if o is t else "", alias, t.name, x)
        elif k == 10 and depth < 2:
            p = "(%s) %s (%s)" % (self.pred(t, depth + 1), rnd.choice(["AND", "OR"]),
                                  self.pred(t, depth + 1))
        elif k == 11 and depth < 2:
            p = "NOT (%s)" % self.pred(t, depth + 1)
        elif k == 12:
            p = "%s %s %d" % (x, rnd.choice(["<", ">", ">=", "<="]), rnd.randint(-3, 40))
        elif k == 13:
            p = "%s = '%s'" % (x, rnd.choice(WORDS))
        else:
            p = "%s %s %s" % (x, rnd.choice(["=", "<", ">"]), lit(rnd))
        return p

    # -- statements
    def insert(self):
        rnd = self.rnd
        t = self.table()
        verb = "INSERT %s" % rnd.choice(CONFLICT) if rnd.random() < 0.93 else "REPLACE "
        form = rnd.random()
        if form < 0.04:
            return "%sINTO %s DEFAULT VALUES" % (verb, t.name)
        # the column list: all in order (none named), a permutation, a subset;
        # the rowid by an alias name or the key's name
        cols = None
        if rnd.random() < 0.7:
            vc = t.value_cols()
            cols = rnd.sample(vc, rnd.randint(1, len(vc)))
            cols = [c.name for c in cols]
            if rnd.random() < 0.5:
                rid = t.ipk.name if t.ipk and rnd.random() < 0.6 else \
                    rnd.choice(["rowid", "_rowid_", "oid"])
                cols.insert(rnd.randrange(len(cols) + 1), rid)
        names = cols if cols is not None else [c.name for c in t.cols]
        collist = "(%s)" % ", ".join(cols) if cols is not None else ""
        bycol = {c.name: c for c in t.cols}
        # limit J: in a transaction, an INSERT OR REPLACE/IGNORE/FAIL/
        # ROLLBACK of several rows gives only integer (or NULL) rowids
        int_rowids = self.rep.in_transaction and any(
            m in verb for m in ("IGNORE", "REPLACE", "FAIL", "ROLLBACK"))
        many = False

        def val(n):
            c = bycol.get(n)
            if c is None or c.ipk:
                return self.int_rowid_val(t) if int_rowids and many else self.rowid_val(t)
            if c.notnull and rnd.random() < 0.85:
                v = lit(rnd, c.aff())
                return v if v != "NULL" else "0"
            return lit(rnd, c.aff())

        if form < 0.75:
            nrows = rnd.randint(1, 5)
            many = nrows > 1
            rows = ["(%s)" % ", ".join(val(n) for n in names) for _ in range(nrows)]
            return "%sINTO %s%s VALUES %s" % (verb, t.name, collist, ", ".join(rows))
        if form < 0.82 or (self.big and form < 0.84):
            # a bulk insert: spills row groups
            n = rnd.randint(20, 400) if not self.big else rnd.randint(2000, 12000)
            exprs = []
            for nm in names:
                c = bycol.get(nm)
                if c is None or c.ipk:
                    exprs.append(rnd.choice(["NULL", "i + %d" % (self.rowids(t)[1] + rnd.randint(-3, 3)),
                                             "NULL"]))
                else:
                    exprs.append(rnd.choice(["i %% %d" % rnd.randint(2, 13), "'v' || (i % 17)",
                                             "i * 0.5", "CASE WHEN i % 5 = 0 THEN NULL ELSE i END",
                                             "hex(i)", "i", "-i", "(i % 3) || ''"]))
            return ("%sINTO %s%s WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r "
                    "WHERE i < %d) SELECT %s FROM r" % (verb, t.name, collist, n, ", ".join(exprs)))
        # INSERT ... SELECT from the same table or another, in rowid order
        src = self.table()
        exprs = []
        for nm in names:
            c = bycol.get(nm)
            if c is None or c.ipk:
                e = no_max_rowid(self.expr(src))
                if int_rowids:  # limit J
                    e = "CAST(%s AS INTEGER)" % e
                exprs.append(rnd.choice(["NULL", "rowid", "rowid + %d" % rnd.randint(1, 30),
                                         "-rowid", e]))
            else:
                exprs.append(self.expr(src, c))
        where = " WHERE " + self.pred(src) if rnd.random() < 0.6 else ""
        limit = " LIMIT %d" % rnd.randint(0, 30) if rnd.random() < 0.6 else ""
        return "%sINTO %s%s SELECT %s FROM %s%s ORDER BY rowid%s" % (
            verb, t.name, collist, ", ".join(exprs), src.name, where, limit)

    def update(self):
        """An UPDATE in any conflict mode. Limit L(2): csq visits rows in
        storage order, so what depends on the order is not generated:
        - the rowid changes on the one row a WHERE rowid = N picks, or as a
          shift past the other rows (the rows above N go below the lowest,
          or those below N above the highest: no collision, and the span of
          rowids stays as it was), never SET id = id + 1 over many rows
          (which collides or not by the order; under OR REPLACE, limit K:
          csq refuses to move a row onto one it updates later);
        - over many rows, the statement can fail in one way only (at most
          one NOT NULL or CHECK column set), so that any row that fails
          first fails with the same message; OR FAIL over many rows sets
          such a column only to a literal (every row or none fails). OR
          IGNORE skips the rows that fail, in any order."""
        rnd = self.rnd
        t = self.table()
        mode = rnd.choice(CONFLICT)
        lo, hi, n = self.rowids(t)
        rids = ["rowid", "_rowid_", "oid"] + ([t.ipk.name] * 3 if t.ipk else [])
        r = rnd.random()
        single = r < 0.3
        # the shift: only over small rowids, so that it never overflows
        shift = not single and r < 0.42 and -2 ** 40 < lo and hi < 2 ** 40
        sets = []
        if single:
            rid = rnd.choice(rids)
            where = " WHERE %s = %s" % (rid, self.some_rowid(t))
            if rnd.random() < 0.3:
                where += " AND (%s)" % self.pred(t)
            if rnd.random() < 0.5:
                rid = rnd.choice(rids)
                sets.append((rid, rnd.choice([
                    "%s + 1" % rid, "%s - 1" % rid, "%s + %d" % (rid, rnd.randint(1, 20)),
                    "%s * 2" % rid, "-%s" % rid, self.rowid_val(t), "NULL", self.rowid_val(t),
                    no_max_rowid(self.col(t).name), "%s + 1000" % rid])))
        elif shift:
            rid = rnd.choice(rids)
            x = rnd.randint(lo, hi) if n else 0
            span = "(SELECT max(rowid) - min(rowid) + 1 FROM %s)" % t.name
            if rnd.random() < 0.5:
                sets.append((rid, "%s - %s" % (rid, span)))
                where = " WHERE %s >= %d" % (rnd.choice(rids), x)
            else:
                sets.append((rid, "%s + %s" % (rid, span)))
                where = " WHERE %s <= %d" % (rnd.choice(rids), x)
        else:
            where = " WHERE " + self.pred(t) if rnd.random() < 0.8 else ""
        constrained = 0
        for _ in range(rnd.randint(0 if sets else 1, 3)):
            c = self.col(t, any_col=False)
            e = self.expr(t, c)
            if c.notnull and rnd.random() < 0.3:
                e = rnd.choice(["NULL", "CASE WHEN rowid %% 2 = 0 THEN NULL ELSE %s END" % c.name])
            if (c.notnull or c.check) and not single and "IGNORE" not in mode:
                if constrained:
                    continue
                constrained += 1
                if "FAIL" in mode:
                    e = lit(rnd, c.aff())
            sets.append((c.name, e))
        seen, uniq = set(), []
        for nm, e in sets:
            if nm not in seen:
                seen.add(nm)
                uniq.append("%s = %s" % (nm, e))
        if not uniq:
            c = self.col(t, any_col=False)
            uniq.append("%s = %s" % (c.name, c.name))
        return "UPDATE %s%s SET %s%s" % (mode, t.name, ", ".join(uniq), where)

    def update_from(self):
        rnd = self.rnd
        t = self.table()
        o = rnd.choice([x for x in self.tabs if x is not t] or [t])
        if o is t:
            return self.update()
        c = self.col(t, any_col=False)
        oc = self.col(o)
        mode = rnd.choice(CONFLICT)
        if (c.notnull or c.check) and "FAIL" in mode:
            # limit L(2): which rows OR FAIL changed before the failing one
            # is the visiting order
            mode = "OR ABORT "
        return "UPDATE %s%s SET %s = %s.%s FROM %s WHERE %s.rowid = %s.rowid%s" % (
            mode, t.name, c.name, o.name, oc.name, o.name, o.name, t.name,
            # (in parentheses: an OR in it would join a row of t to several
            # of o, and which one sets it is the visiting order, limit L)
            " AND (%s)" % self.pred(t) if rnd.random() < 0.4 else "")

    def delete(self):
        t = self.table()
        if self.rnd.random() < 0.04:
            return "DELETE FROM %s" % t.name
        return "DELETE FROM %s WHERE %s" % (t.name, self.pred(t))

    def txn(self):
        rnd = self.rnd
        intx = self.rep.in_transaction
        r = rnd.random()
        if r < 0.35:
            self.nsave += 1
            name = "sp%d" % self.nsave
            self.saves.append(name)
            return "SAVEPOINT %s" % name
        if r < 0.5 and self.saves:
            name = rnd.choice(self.saves)
            i = self.saves.index(name)
            del self.saves[i:]
            return rnd.choice(["RELEASE %s", "RELEASE SAVEPOINT %s"]) % name
        if r < 0.65 and self.saves:
            name = rnd.choice(self.saves)
            i = self.saves.index(name)
            del self.saves[i + 1:]
            return rnd.choice(["ROLLBACK TO %s", "ROLLBACK TRANSACTION TO SAVEPOINT %s"]) % name
        if r < 0.8 and not intx:
            return rnd.choice(["BEGIN", "BEGIN", "BEGIN IMMEDIATE", "BEGIN DEFERRED"])
        if r < 0.9:
            self.saves = []
            return rnd.choice(["COMMIT", "END"])
        if r < 0.97:
            self.saves = []
            return "ROLLBACK"
        # an invalid one now and then: the errors must match too
        return rnd.choice(["RELEASE nosuch", "ROLLBACK TO nosuch", "BEGIN", "COMMIT"])

    def read(self):
        rnd = self.rnd
        t = self.table()
        r = rnd.random()
        if r < 0.18:
            if self.big:
                return "%s LIMIT %d OFFSET %d" % (t.dump_sql(), rnd.randint(1, 40),
                                                  rnd.randint(0, 20000))
            return t.dump_sql()
        if r < 0.33:
            cols = ", ".join(c.name for c in rnd.sample(t.cols, rnd.randint(1, len(t.cols))))
            lim = ""
            if rnd.random() < 0.3:
                lim = " LIMIT %d" % rnd.randint(0, 10)
                if rnd.random() < 0.5:
                    lim += " OFFSET %d" % rnd.randint(0, 5)
            if self.big and not lim:
                lim = " LIMIT 30"
            return "SELECT rowid, %s FROM %s WHERE %s ORDER BY rowid%s" % (cols, t.name,
                                                                          self.pred(t), lim)
        # min/max of a column without affinity could pick 1 or 1.0 (equal
        # values of two classes) by row order: those columns get count/sum
        aggc = [c for c in t.cols if c.aff() != "BLOB"]
        anyc = t.cols
        if r < 0.5:
            a = rnd.choice(aggc).name
            b = rnd.choice(anyc).name
            where = " WHERE " + self.pred(t) if rnd.random() < 0.5 else ""
            return ("SELECT count(*), count(%s), %s, %s, min(%s), max(%s), %s "
                    "FROM %s%s" % (b, self.agg(t, "sum", rnd.choice(aggc).name),
                                   self.agg(t, "total", b), a, rnd.choice(aggc).name,
                                   self.agg(t, "avg", rnd.choice(aggc).name), t.name, where))
        if r < 0.68:
            # (a CAST: x % 3 is 4.0 for 29.5 and 4 for 4, equal keys of two
            # classes, and which one a group shows is row order)
            g = rnd.choice([c.name for c in aggc] + ["CAST(%s AS INTEGER) %% 3" % rnd.choice(aggc).name,
                                                     "typeof(%s)" % rnd.choice(anyc).name,
                                                     "length(%s)" % rnd.choice(aggc).name,
                                                     "%s IS NULL" % rnd.choice(anyc).name])
            a = rnd.choice(aggc).name
            where = " WHERE " + self.pred(t) if rnd.random() < 0.4 else ""
            having = " HAVING count(*) > 1" if rnd.random() < 0.2 else ""
            return ("SELECT %s, count(*), %s, %s, min(%s), max(%s), %s FROM %s%s "
                    "GROUP BY 1%s ORDER BY 1" % (g, self.agg(t, "sum", a),
                                                 self.agg(t, "total", rnd.choice(anyc).name), a,
                                                 rnd.choice(aggc).name, self.agg(t, "avg", a),
                                                 t.name, where, having))
        if r < 0.8:
            return rnd.choice(["SELECT last_insert_rowid(), changes(), total_changes()",
                               "SELECT max(rowid), min(rowid), count(*) FROM %s" % t.name,
                               "SELECT last_insert_rowid()", "SELECT changes()",
                               "SELECT max(rowid) FROM %s" % t.name,
                               "SELECT * FROM %s WHERE rowid = (SELECT max(rowid) FROM %s)"
                               % (t.name, t.name)])
        if r < 0.88:
            o = self.table()
            alias = "o2" if o is t else o.name
            return ("SELECT %s.rowid, %s.rowid FROM %s JOIN %s%s ON %s.%s = %s.%s ORDER BY 1, 2 "
                    "LIMIT 200" % (t.name, alias, t.name, o.name, " AS o2" if o is t else "",
                                   t.name, self.col(t).name, alias, self.col(o).name))
        if r < 0.91:
            c = rnd.choice(aggc).name
            return "SELECT DISTINCT %s FROM %s ORDER BY 1" % (c, t.name)
        if r < 0.96:
            # limit L(1): without ORDER BY csq lists rows in storage order;
            # the tag (a first column 'uN') makes the rows compared as a
            # multiset, and LIMIT without ORDER BY is compared by its count
            # only (L(4))
            self.nread += 1
            cols = ", ".join(c.name for c in rnd.sample(t.cols, rnd.randint(1, len(t.cols))))
            where = " WHERE " + self.pred(t) if rnd.random() < 0.7 else ""
            if rnd.random() < 0.25:
                return "SELECT count(*) FROM (SELECT rowid, %s FROM %s%s LIMIT %d)" % (
                    cols, t.name, where, rnd.randint(0, 12))
            if self.big and not where:
                where = " WHERE rowid %% 97 = %d" % rnd.randrange(97)
            return "SELECT 'u%d', rowid, %s FROM %s%s" % (self.nread, cols, t.name, where)
        return "SELECT count(*), sum(%s IS NULL) FROM %s WHERE %s" % (
            self.col(t).name, t.name, self.pred(t))

    def ddl(self):
        """A csq table created in the middle of a script (after others were
        read), used for a while, renamed, dropped. CREATE in transactions
        too (and so rolled back at times), DROP too; limit M: RENAME in
        autocommit only, DROP in a transaction only with no SAVEPOINT
        open, no CREATE of the name it dropped in the same transaction."""
        rnd = self.rnd
        if not self.rep.in_transaction:
            self.dropped_in_txn = False
        if self.t4 is None and self.dropped_in_txn:
            return self.read()
        if self.t4 is None:
            self.t4 = t4_table("t4", self.tabs[0].opts)
            self.tabs.append(self.t4)
            return (self.t4.csq_create(), self.t4.native_create())
        r = rnd.random()
        if r < 0.45 or (self.rep.in_transaction and (r < 0.65 or self.saves)):
            return self.insert_into(self.t4)
        if r < 0.65:
            old = self.t4.name
            self.t4.name = "t5" if old == "t4" else "t4"
            return "ALTER TABLE %s RENAME TO %s" % (old, self.t4.name)
        self.tabs.remove(self.t4)
        name, self.t4 = self.t4.name, None
        self.dropped_in_txn = self.rep.in_transaction
        return "DROP TABLE %s" % name

    def resync(self):
        """The model of t4 after the replica ran a statement (a CREATE,
        RENAME or DROP rolled back, or failed)."""
        names = {r[0] for r in self.rep.execute("SELECT name FROM sqlite_schema "
                                                "WHERE type = 'table'")}
        mine = sorted(names & {"t4", "t5"})
        if self.t4 is not None and self.t4.name not in names:
            if mine:
                self.t4.name = mine[0]
            else:
                self.tabs.remove(self.t4)
                self.t4 = None
        elif self.t4 is None and mine:
            self.t4 = t4_table(mine[0], self.tabs[0].opts)
            self.tabs.append(self.t4)

    def insert_into(self, t):
        save = self.tabs
        self.tabs = [t]
        try:
            return self.insert()
        finally:
            self.tabs = save

    def statement(self):
        r = self.rnd.random()
        if r < 0.26:
            s = self.insert()
        elif r < 0.42:
            s = self.update()
        elif r < 0.44:
            s = self.update_from()
        elif r < 0.53:
            s = self.delete()
        elif r < 0.64:
            s = self.txn()
        elif r < 0.655:
            s = self.ddl()
        else:
            s = self.read()
        native = s[1] if isinstance(s, tuple) else s
        try:
            self.rep.execute(native).fetchall()
        except sqlite3.Error:
            pass
        if not self.rep.in_transaction:
            self.saves = []
        self.resync()
        if not native.startswith("SELECT"):
            self.note_big()
        return s

    def end_session(self):
        """The session ends (the shell reopens the database)."""
        if self.rep.in_transaction:
            self.rep.execute("ROLLBACK")
        self.saves = []
        self.resync()

    def bulk_load(self, t, n):
        """n rows of every declared type (no NULL where NOT NULL)."""
        names, exprs = [], []
        for i, c in enumerate(t.value_cols()):
            names.append(c.name)
            e = {"INTEGER": "i %% %d" % (50 + i), "TEXT": "'v' || (i % 31)", "REAL": "i * 0.25",
                 "NUMERIC": "CASE WHEN i % 7 = 0 THEN NULL ELSE 1000 + i % 1000 END",
                 "BLOB": "CASE WHEN i % 3 = 0 THEN x'00' WHEN i % 3 = 1 THEN NULL ELSE i END"}[
                     c.aff()]
            if c.notnull:
                e = "coalesce(%s, 0)" % e
            exprs.append(e)
        return ("INSERT INTO %s(%s) WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
                "FROM r WHERE i < %d) SELECT %s FROM r" % (t.name, ", ".join(names), n,
                                                            ", ".join(exprs)))


_ACCEPTED = {}


def accepted(tabs):
    """The tables as csq accepts them. A constraint csq refuses at CREATE is
    allowed (DESIGN.md: refused, never ignored), so a script whose CREATE is
    refused goes without that constraint (AUTOINCREMENT: without t3); any
    other refusal is an error."""
    out = []
    for t in tabs:
        while True:
            sql = t.csq_create()
            if sql not in _ACCEPTED:
                con = py_connect(":memory:")
                try:
                    con.execute(sql)
                    _ACCEPTED[sql] = None
                except sqlite3.Error as e:
                    _ACCEPTED[sql] = str(e)
                con.close()
            err = _ACCEPTED[sql]
            if err is None:
                out.append(t)
                break
            c = next((c for c in t.cols if c.autoinc or c.check or c.default), None)
            if c is None:
                raise AssertionError("csq refuses %s: %s" % (sql, err))
            if c.autoinc:
                break
            if c.check:
                c.check = None
            else:
                c.default = None
    return out


class Script:
    def __init__(self, seed, big=None):
        rnd = random.Random(seed)
        self.seed = seed
        self.big = big if big is not None else rnd.random() < 0.06
        self.tabs = accepted(make_schema(rnd))
        g = Gen(rnd, self.tabs, self.big)
        n = rnd.randint(60, 140) if not self.big else rnd.randint(30, 50)
        self.chunks = []
        # where a session ends (the shell's .open, execute's reconnect)
        self.reopen = []
        if self.big:
            # thousands of rows: row groups on the device, filters pushed
            load = [g.bulk_load(t, rnd.randint(2000, 12000)) for t in self.tabs]
            for st in load:
                g.rep.execute(st)
            g.note_big()
            self.chunks.append(load)
            self.reopen.append(True)
        while n > 0:
            k = min(n, rnd.randint(2, 24))
            self.chunks.append([g.statement() for _ in range(k)])
            n -= k
            self.reopen.append(rnd.random() < 0.4)
            if self.reopen[-1]:
                g.end_session()
        g.rep.close()

    def table(self, name):
        """The table named name, for a dump (t4/t5 come and go)."""
        for t in self.tabs:
            if t.name == name:
                return t
        if name in ("t4", "t5"):
            return t4_table(name, "")
        return None

    def setup(self, native):
        return [t.native_create() if native else t.csq_create() for t in self.tabs]


def side(stmt, native):
    if isinstance(stmt, tuple):
        return stmt[1] if native else stmt[0]
    return stmt


# ---------------------------------------------------------------- comparing


def close_enough(x, y):
    if isinstance(x, float) and isinstance(y, float):
        if x == y:
            return True
        return abs(x - y) <= 1e-9 * max(1.0, abs(x), abs(y))
    return type(x) is type(y) and x == y


def same_result(a, b):
    """Python-level results: ('rows', [...]) or ('err', class, message)."""
    if a[0] != b[0]:
        return False
    if a[0] == "err":
        return a[1:] == b[1:]
    ra, rb = a[1], b[1]
    if len(ra) != len(rb):
        return False
    for x, y in zip(ra, rb):
        if len(x) != len(y) or not all(close_enough(u, v) for u, v in zip(x, y)):
            return False
    return a[2:] == b[2:]


_FLOAT = re.compile(r"^-?(\d+\.\d*|\d*\.\d+)([eE][-+]?\d+)?$|^-?\d+[eE][-+]?\d+$|^-?Inf$")


def same_line(a, b):
    """Shell lines: equal, or equal but for REAL fields within 1e-9."""
    if a == b:
        return True
    fa, fb = re.split(r"[|,]", a), re.split(r"[|,]", b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        if x == y:
            continue
        if not (_FLOAT.match(x) and _FLOAT.match(y)):
            return False
        if not close_enough(float(x), float(y)):
            return False
    return True


def unordered_runs(lines):
    """Limit L(1): the rows of a read without ORDER BY (tagged 'uN' in
    their first column by the generator), sorted: csq lists them in
    storage order, native in rowid order. Every other line as it is."""
    out, i = [], 0
    tag = re.compile(r"^(u\d+)\|")
    while i < len(lines):
        m = tag.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].startswith(m.group(1) + "|"):
            j += 1
        out += sorted(lines[i:j])
        i = j
    return out


def first_line_diff(la, lb):
    la, lb = unordered_runs(la), unordered_runs(lb)
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else "<missing>"
        y = lb[i] if i < len(lb) else "<missing>"
        if not same_line(x, y):
            return i
    return None


def show_rows(res, limit=12):
    if res[0] == "err":
        return "error %s: %s" % (res[1], res[2])
    rows = res[1]
    s = "; ".join(repr(r) for r in rows[:limit])
    if len(rows) > limit:
        s += "; ... (%d rows)" % len(rows)
    return "rows [" + s + "]" + ("" if len(res) < 3 else " in_txn=%s" % res[2])


class Mismatch(Exception):
    pass


class Report:
    def __init__(self, client):
        self.client = client
        self.items = []
        self.dir = None

    def add(self, script, where, detail):
        if self.dir is None:
            self.dir = tempfile.mkdtemp(prefix="csq-diff-")
        path = write_script(self.dir, script, self.client)
        self.items.append("seed %d (%s, %s): %s\n    %s\n    script: %s" % (
            script.seed, self.client, where, detail.split("\n")[0],
            "\n    ".join(detail.split("\n")[1:]), path))

    def check(self):
        if self.items:
            raise AssertionError("%d script(s) differ from native (first %d shown; "
                                 "CSQ_DIFF_SEED=%d):\n%s" % (
                                     len(self.items), min(len(self.items), MAX_REPORTS), BASE_SEED,
                                     "\n".join(self.items[:MAX_REPORTS])))


def write_script(d, script, client):
    """The script as two stock-shell files (csq side, native side)."""
    base = os.path.join(d, "seed%d-%s" % (script.seed, client))
    for native, suffix in ((False, ".csq.sql"), (True, ".native.sql")):
        with open(base + suffix, "w") as f:
            f.write(".load %s\n.bail off\n.echo on\n" % os.path.abspath(EXT).replace(".so", ""))
            for s in script.setup(native):
                f.write(s + ";\n")
            for i, ch in enumerate(script.chunks):
                f.write("-- chunk %d%s\n" % (i, " (session ends)" if script.reopen[i] else ""))
                for s in ch:
                    f.write(side(s, native) + ";\n")
    return base + ".{csq,native}.sql"


def py_connect(path):
    con = sqlite3.connect(path, isolation_level=None)
    con.enable_load_extension(True)
    con.load_extension(EXT)
    return con


def err_class(e):
    """The primary result code of an error. (csq's constraint errors carry
    the primary code where native ones carry the extended code, e.g.
    SQLITE_CONSTRAINT_NOTNULL: test_regress_writes checks that apart, so
    that it does not hide everything else here.)"""
    code = getattr(e, "sqlite_errorcode", None)
    if code is None:
        return type(e).__name__
    return "%s(%d)" % (type(e).__name__, code & 0xFF)


UNORDERED = re.compile(r"^SELECT '(u\d+)', ")


def py_run(con, sql):
    try:
        rows = con.execute(sql).fetchall()
        if UNORDERED.match(sql):
            # limit L(1): no ORDER BY, csq's rows in storage order: a multiset
            rows.sort(key=repr)
        return ("rows", rows, con.in_transaction)
    except sqlite3.Error as e:
        return ("err", err_class(e), str(e), con.in_transaction)


def dumps(paths, tabs):
    """Every table of both databases, from fresh connections."""
    out = []
    for p in paths:
        con = py_connect(p)
        try:
            out.append([py_run(con, t.dump_sql()) for t in tabs])
        finally:
            con.close()
    return out


def compare_dumps(paths, tabs, what):
    a, b = dumps(paths, tabs)
    for t, x, y in zip(tabs, a, b):
        if not same_result(x, y):
            raise Mismatch("%s: table %s differs\n  csq:    %s\n  native: %s" % (
                what, t.name, show_rows(x), show_rows(y)))


class Pair:
    """A csq database and a native database in a fresh directory."""

    def __init__(self, script):
        self.dir = tempfile.mkdtemp(prefix="csq-diffdb-")
        self.paths = (os.path.join(self.dir, "csq.db"), os.path.join(self.dir, "native.db"))
        self.script = script
        for p, native in zip(self.paths, (False, True)):
            con = py_connect(p)
            for s in script.setup(native):
                con.execute(s)
            con.close()

    def tabs_in(self, i):
        """The tables both sides hold now (t4 comes and goes)."""
        con = sqlite3.connect(self.paths[1])
        names = sorted(r[0] for r in con.execute("SELECT name FROM sqlite_schema "
                                                 "WHERE type = 'table'"))
        con.close()
        return [t for t in (self.script.table(n) for n in names) if t is not None]

    def final_check(self, what="after close and reopen"):
        compare_dumps(self.paths, self.tabs_in(1), what)

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------- clients


def run_execute_chunk(pair, cons, script, ci):
    """One chunk through Python's execute on both connections."""
    for si, st in enumerate(script.chunks[ci]):
        a = py_run(cons[0], side(st, False))
        b = py_run(cons[1], side(st, True))
        if not same_result(a, b):
            raise Mismatch("chunk %d statement %d: %s\n  csq:    %s\n  native: %s" % (
                ci, si, side(st, False), show_rows(a), show_rows(b)))


def run_script_chunk(pair, cons, script, ci):
    """One chunk through executescript, then the state compared."""
    res = []
    for con, native in zip(cons, (False, True)):
        sql = ";\n".join(side(s, native) for s in script.chunks[ci]) + ";"
        try:
            con.executescript(sql)
            res.append(("rows", [], con.in_transaction))
        except sqlite3.Error as e:
            res.append(("err", err_class(e), str(e), con.in_transaction))
    if not same_result(res[0], res[1]):
        raise Mismatch("chunk %d (executescript): %s\n  csq:    %s\n  native: %s" % (
            ci, " ; ".join(side(s, False) for s in script.chunks[ci])[:600],
            show_rows(res[0]), show_rows(res[1])))
    probes = ["SELECT last_insert_rowid(), changes(), total_changes()"]
    probes += [t.dump_sql() for t in pair.tabs_in(1)]
    for q in probes:
        a, b = py_run(cons[0], q), py_run(cons[1], q)
        if not same_result(a, b):
            raise Mismatch("after chunk %d (executescript: %s): %s\n  csq:    %s\n  native: %s" % (
                ci, " ; ".join(side(s, False) for s in script.chunks[ci])[-400:], q,
                show_rows(a), show_rows(b)))


def shell_text(script, cis, native, db, open_between):
    """Stock-shell input for a session running chunks cis."""
    ext = os.path.abspath(EXT)
    lines = [".bail off", ".load %s" % ext, ".echo on"]
    for j, ci in enumerate(cis):
        if j and open_between[j]:
            lines += [".echo off", ".open %s" % db, ".load %s" % ext, ".echo on"]
        lines.append("-- chunk %d" % ci)
        lines += [side(s, native) + ";" for s in script.chunks[ci]]
    return "\n".join(lines) + "\n"


def run_proc(argv, inp=None, timeout=300):
    p = subprocess.run(argv, input=inp, capture_output=True, timeout=timeout)
    return (p.stdout.decode("utf-8", "replace").splitlines(),
            p.stderr.decode("utf-8", "replace").splitlines())


def compare_lines(what, ca, na, script_lines=None):
    i = first_line_diff(ca, na)
    if i is None:
        return
    ca, na = unordered_runs(ca), unordered_runs(na)
    ctx = ""
    if script_lines is not None:
        # the statement the differing line belongs to (echoed before it)
        for j in range(min(i, len(na) - 1), -1, -1):
            if j < len(na) and na[j].rstrip(";") and (na[j].endswith(";")):
                ctx = " after: " + na[j][:300]
                break
    raise Mismatch("%s line %d%s\n  csq:    %s\n  native: %s" % (
        what, i + 1, ctx, ca[i] if i < len(ca) else "<missing>",
        na[i] if i < len(na) else "<missing>"))


def same_creates(pairs, co, ce, ne):
    """A csq CREATE echoes differently from the native one, and a parse
    error quotes it (with a caret under the error): the lines of the
    (csq, native) statement pairs as written, and the carets, made equal."""
    for c, n in pairs:
        co = [n + ";" if x == c + ";" else x for x in co]
        ce = [x.replace(c, n) for x in ce]
    caret = re.compile(r"^\s+\^--- error here$")
    ce = ["^--- error here" if caret.match(x) else x for x in ce]
    ne = ["^--- error here" if caret.match(x) else x for x in ne]
    return co, ce, ne


def run_shell_session(pair, script, cis, open_between):
    outs = []
    for native in (False, True):
        db = pair.paths[1 if native else 0]
        outs.append(run_proc([SQLITE3, db], shell_text(script, cis, native, db, open_between)
                             .encode()))
    (co, ce), (no, ne) = outs
    # a csq CREATE echoes differently from the native one: the lines of the
    # statements pair as written, so blank those out
    pairs = [s for ci in cis for s in script.chunks[ci] if isinstance(s, tuple)]
    co, ce, ne = same_creates(pairs, co, ce, ne)
    compare_lines("chunks %s stdout" % cis, co, no, script_lines=True)
    compare_lines("chunks %s stderr" % cis, ce, ne)


def run_csq_shell_chunk(pair, script, ci):
    csq = os.path.join(BUILD, "csq")
    outs = []
    for native in (False, True):
        sql = "\n".join(side(s, native) + ";" for s in script.chunks[ci])
        db = pair.paths[1 if native else 0]
        # the SQL as the argument, or on standard input (every other chunk)
        if ci % 2:
            outs.append(run_proc([csq, db], sql.encode()))
        else:
            outs.append(run_proc([csq, db, sql]))
    (co, ce), (no, ne) = outs
    try:
        compare_lines("chunk %d stdout" % ci, co, no)
        compare_lines("chunk %d stderr" % ci, ce, ne)
    except Mismatch as e:
        raise Mismatch("%s\n  chunk: %s" % (e, " ; ".join(side(s, False)
                                                         for s in script.chunks[ci])[:800]))


def drive(client, n_base, seed_off, big=None):
    """Run n scripts through one client; collect a mismatch per script."""
    rep = Report(client)
    for k in range(n_scripts(n_base)):
        seed = BASE_SEED * 1000003 + seed_off * 10007 + k
        script = Script(seed, big=big)
        if KEEP:
            os.makedirs(KEEP, exist_ok=True)
            write_script(KEEP, script, client)
        pair = Pair(script)
        try:
            run_client(client, pair, script, random.Random(seed + 1))
            pair.final_check()
        except Mismatch as e:
            lines = str(e).split("\n")
            rep.add(script, "script %d" % k, "\n".join(lines))
        finally:
            pair.cleanup()
    rep.check()


def run_client(client, pair, script, rnd):
    n = len(script.chunks)
    if client == "execute":
        cons = [py_connect(p) for p in pair.paths]
        try:
            for ci in range(n):
                run_execute_chunk(pair, cons, script, ci)
                if script.reopen[ci]:
                    for c in cons:
                        c.close()
                    cons = [py_connect(p) for p in pair.paths]
        finally:
            for c in cons:
                c.close()
    elif client == "script":
        cons = [py_connect(p) for p in pair.paths]
        try:
            for ci in range(n):
                run_script_chunk(pair, cons, script, ci)
                if script.reopen[ci]:
                    for c in cons:
                        c.close()
                    cons = [py_connect(p) for p in pair.paths]
        finally:
            for c in cons:
                c.close()
    elif client == "shell":
        ci = 0
        while ci < n:
            k = min(n - ci, rnd.randint(1, 3))
            cis = list(range(ci, ci + k))
            run_shell_session(pair, script, cis, [True] + [script.reopen[c - 1] for c in cis[1:]])
            ci += k
    elif client == "csq":
        for ci in range(n):
            run_csq_shell_chunk(pair, script, ci)
    elif client == "mixed":
        cons = None
        for ci in range(n):
            who = rnd.choice(["execute", "script", "shell", "csq"])
            if who in ("execute", "script"):
                if cons is None:
                    cons = [py_connect(p) for p in pair.paths]
                if who == "execute":
                    run_execute_chunk(pair, cons, script, ci)
                else:
                    run_script_chunk(pair, cons, script, ci)
                # no transaction left open over another process's chunk
                for c in cons:
                    if c.in_transaction:
                        c.execute("ROLLBACK")
                if script.reopen[ci]:
                    for c in cons:
                        c.close()
                    cons = None
            elif who == "shell":
                run_shell_session(pair, script, [ci], [True])
            else:
                run_csq_shell_chunk(pair, script, ci)
            # what the Python connections (still open) see after the others wrote
            if cons is not None:
                for t in pair.tabs_in(1):
                    a, b = py_run(cons[0], t.dump_sql()), py_run(cons[1], t.dump_sql())
                    if not same_result(a, b):
                        raise Mismatch("after chunk %d (%s), an open connection reads %s\n"
                                       "  csq:    %s\n  native: %s" % (
                                           ci, who, t.name, show_rows(a), show_rows(b)))
        if cons is not None:
            for c in cons:
                c.close()
    else:
        raise ValueError(client)


# ---------------------------------------------------------------- tests


def need_shell():
    if not SQLITE3:
        raise Skip("no sqlite3 shell")


def test_python_execute():
    drive("execute", 60, 1)


def test_python_script():
    drive("script", 30, 2)


def test_shell():
    need_shell()
    drive("shell", 30, 3)


def test_csq_shell():
    if not os.path.exists(os.path.join(BUILD, "csq")):
        raise Skip("build/csq not built")
    drive("csq", 20, 4)


def test_mixed_clients():
    need_shell()
    drive("mixed", 15, 5)


def test_big_tables():
    """Scripts over tables of thousands of rows (row groups on the device,
    filters pushed), through execute."""
    drive("execute", 4, 6, big=True)


# ---------------------------------------------------------------- shrinking


RECONNECT = "-- reconnect"


def flat(script, sessions=False):
    """The script's statements in one list; with sessions, a RECONNECT
    marker where the execute client reconnects."""
    out = []
    for ch, reopen in zip(script.chunks, script.reopen):
        out += ch
        if sessions and reopen:
            out.append(RECONNECT)
    return out


def differs_execute(setup_pair, stmts, files=False):
    """Run stmts through execute on :memory: pairs (or files); the first
    differing statement's text, or None."""
    d = tempfile.mkdtemp(prefix="csq-min-") if files else None
    paths = [os.path.join(d, "c.db"), os.path.join(d, "n.db")] if files else [":memory:"] * 2
    cons = [py_connect(p) for p in paths]
    try:
        for con, native in zip(cons, (False, True)):
            for s in setup_pair[1 if native else 0]:
                con.execute(s)
        for s in stmts:
            if s == RECONNECT:
                if files:
                    for c in cons:
                        c.close()
                    cons = [py_connect(p) for p in paths]
                continue
            a, b = py_run(cons[0], side(s, False)), py_run(cons[1], side(s, True))
            if not same_result(a, b):
                return side(s, True), a, b
        if files:
            # and the tables after close and reopen (as Pair.final_check)
            for c in cons:
                c.close()
            cons = [py_connect(p) for p in paths]
            tabs = [r[0] for r in cons[1].execute("SELECT name FROM sqlite_schema WHERE "
                                                  "type = 'table' AND name LIKE 't_' ORDER BY 1")]
            for q in ["SELECT rowid, * FROM %s ORDER BY rowid" % t for t in tabs]:
                a, b = py_run(cons[0], q), py_run(cons[1], q)
                if not same_result(a, b):
                    return "after reopen: " + q, a, b
    finally:
        for c in cons:
            c.close()
        if d:
            shutil.rmtree(d, ignore_errors=True)
    return None


def differs_shell(setup_pair, stmts):
    d = tempfile.mkdtemp(prefix="csq-min-")
    try:
        outs = []
        for native in (False, True):
            db = os.path.join(d, "n.db" if native else "c.db")
            text = ".bail off\n.load %s\n" % os.path.abspath(EXT)
            text += "".join(s + ";\n" for s in setup_pair[1 if native else 0])
            text += ".echo on\n" + "".join(side(s, native) + ";\n" for s in stmts)
            outs.append(run_proc([SQLITE3, db], text.encode()))
        (co, ce), (no, ne) = outs
        co, ce, ne = same_creates([s for s in stmts if isinstance(s, tuple)], co, ce, ne)
        if first_line_diff(co, no) is not None or first_line_diff(ce, ne) is not None:
            return "shell", (co, ce), (no, ne)
        return None
    finally:
        shutil.rmtree(d, ignore_errors=True)


def differs_csq_shell(setup_pair, stmts):
    """stmts through build/csq (one process per side)."""
    d = tempfile.mkdtemp(prefix="csq-min-")
    try:
        outs = []
        for native in (False, True):
            db = os.path.join(d, "n.db" if native else "c.db")
            sql = "".join(s + ";\n" for s in setup_pair[1 if native else 0])
            sql += "".join(side(s, native) + ";\n" for s in stmts if s != RECONNECT)
            outs.append(run_proc([os.path.join(BUILD, "csq"), db, sql]))
        (co, ce), (no, ne) = outs
        if first_line_diff(co, no) is not None or first_line_diff(ce, ne) is not None:
            return "csq shell", (co, ce), (no, ne)
        return None
    finally:
        shutil.rmtree(d, ignore_errors=True)


def differs_script(setup_pair, stmts):
    """stmts through one executescript on :memory: pairs, then the probes."""
    cons = [py_connect(":memory:"), py_connect(":memory:")]
    try:
        res = []
        for con, native in zip(cons, (False, True)):
            for s in setup_pair[1 if native else 0]:
                con.execute(s)
            try:
                con.executescript(";\n".join(side(s, native) for s in stmts) + ";")
                res.append(("rows", [], con.in_transaction))
            except sqlite3.Error as e:
                res.append(("err", err_class(e), str(e), con.in_transaction))
        if not same_result(res[0], res[1]):
            return "executescript", res[0], res[1]
        tabs = [r[0] for r in cons[1].execute("SELECT name FROM sqlite_schema WHERE type='table' "
                                              "AND name LIKE 't_' ORDER BY 1")]
        for q in ["SELECT last_insert_rowid(), changes(), total_changes()"] + [
                "SELECT rowid, * FROM %s ORDER BY rowid" % t for t in tabs]:
            a, b = py_run(cons[0], q), py_run(cons[1], q)
            if not same_result(a, b):
                return q, a, b
    finally:
        for c in cons:
            c.close()
    return None


def minimize(seed, how="execute"):
    script = Script(seed)
    setup = (script.setup(False), script.setup(True))
    test = {"execute": differs_execute, "shell": differs_shell, "script": differs_script,
            "csq": differs_csq_shell,
            "execute-file": lambda su, st: differs_execute(su, st, files=True)}[how]
    stmts = flat(script, sessions=how == "execute-file")
    first = test(setup, stmts)
    if not first:
        print("no difference through %s (session ends between chunks are not replayed)" % how)
        return
    key = first[0]

    def same(st):
        r = test(setup, st)
        return r is not None and r[0] == key

    n = 2
    while len(stmts) >= 2:
        size = max(1, len(stmts) // n)
        done = False
        for i in range(0, len(stmts), size):
            cand = stmts[:i] + stmts[i + size:]
            if cand and same(cand):
                stmts = cand
                n = max(n - 1, 2)
                done = True
                break
        if not done:
            if size == 1:
                break
            n = min(len(stmts), n * 2)
    r = test(setup, stmts)
    print("-- csq setup:")
    for s in setup[0]:
        print(s + ";")
    print("-- native setup:")
    for s in setup[1]:
        print(s + ";")
    print("-- statements:")
    for s in stmts:
        print(side(s, False) + ";")
    text = how in ("shell", "csq")
    if not text:
        print("-- %s" % r[0])
    print("-- csq:    %s" % (show_rows(r[1]) if not text else (r[1],)))
    print("-- native: %s" % (show_rows(r[2]) if not text else (r[2],)))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "minimize":
        minimize(int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "execute")
    else:
        print(__doc__)
