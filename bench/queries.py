"""bench/queries.py - the benchmark's queries and its energy model, as data.

Owns: which queries make bench and tests/sql/test_tpch_ssb.py run (the 22
TPC-H and 13 SSB queries in bench/sql/, see bench/sql/README.md for how the
standard texts map to SQLite), what each one reads, and the energy model.

load(suite) -> one dict per query, in the suite's order:
  name        "Q1" .. "Q22", "Q1.1" .. "Q4.3"
  suite       "tpch" or "ssb"
  file        its path under bench/sql/
  sql         the text SQLite runs (native and csq tables)
  duckdb_sql  the text DuckDB runs: sql, or the variant in bench/sql/tpch/duckdb/
  tables      the tables it reads, largest first (the first is the fact table)
  cols        per table, the columns it names: what a columnar host scan
              must move (found in the text, not hand-listed)
  single      True when it reads one table (a csq_query pushdown view of it
              needs no join)
  ops         per row of the fact table: comparisons, fp adds, fp multiplies,
              a hand count for the energy model, or None where nobody counted
"""
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
SQL_DIR = os.path.join(HERE, "sql")
SCHEMA_DIR = os.path.join(HERE, "schema")
SUITES = ("tpch", "ssb")

# Largest first, so that a query's first table is the one it scans most.
TABLE_ORDER = {"tpch": ["lineitem", "orders", "partsupp", "part", "customer", "supplier", "nation", "region"],
               "ssb": ["lineorder", "customer", "part", "supplier", "dwdate"]}

# Hand counts of comparisons, fp adds and fp multiplies per fact row, kept
# from the earlier benchmark for the queries that had them; the op term is
# small next to the bytes, so the others go without it (see ENERGY_NOTE).
OPS = {"Q1": (3, 10, 3), "Q6": (5, 1, 1), "Q12": (8, 2, 0), "Q14": (8, 4, 2),
       "Q1.1": (8, 1, 1), "Q1.2": (8, 1, 1), "Q1.3": (8, 1, 1)}


def schema(suite):
    """{table: [(column, declared type), ...]} from bench/schema/<suite>.sql."""
    out = {}
    with open(os.path.join(SCHEMA_DIR, suite + ".sql")) as f:
        for m in re.finditer(r"CREATE TABLE (\w+)\((.*?)\);", f.read()):
            out[m.group(1)] = [tuple(c.split()) for c in m.group(2).split(", ")]
    return out


def read_sql(path):
    """A query file's statement: its text without the trailing ';' (Python's
    sqlite3 and DuckDB both take one statement; comments stay)."""
    with open(path) as f:
        return f.read().strip().rstrip(";").rstrip()


def _name(suite, path):
    base = os.path.basename(path)[1:-4]  # q01.sql -> 01, q1.1.sql -> 1.1
    return "Q" + (str(int(base)) if suite == "tpch" else base)


def _sort_key(path):
    return [int(x) for x in os.path.basename(path)[1:-4].split(".")]


def _strip_comments(sql):
    return re.sub(r"--[^\n]*", "", sql)


def load(suite):
    tables = schema(suite)
    owner = {c: t for t, cs in tables.items() for c, _ in cs}
    d = os.path.join(SQL_DIR, suite)
    files = sorted((os.path.join(d, f) for f in os.listdir(d) if re.fullmatch(r"q[\d.]+\.sql", f)), key=_sort_key)
    out = []
    for path in files:
        sql = read_sql(path)
        variant = os.path.join(d, "duckdb", os.path.basename(path))
        words = set(re.findall(r"[a-z_][a-z0-9_]*", _strip_comments(sql).lower()))
        cols = {}
        for w in sorted(words):
            if w in owner:
                cols.setdefault(owner[w], []).append(w)
        used = [t for t in TABLE_ORDER[suite] if t in cols]
        name = _name(suite, path)
        out.append({"name": name, "suite": suite, "file": os.path.relpath(path, os.path.dirname(HERE)),
                    "sql": sql, "duckdb_sql": read_sql(variant) if os.path.exists(variant) else sql,
                    "tables": used, "cols": {t: cols[t] for t in used}, "single": len(used) == 1,
                    "ops": OPS.get(name)})
    return out


def _outer_order_by(sql):
    """Where the outermost ORDER BY's terms start in sql without comments
    (None without one), and that text."""
    s = _strip_comments(sql)
    depth, at = 0, None
    for m in re.finditer(r"\(|\)|\bORDER\s+BY\b", s, re.I):
        tok = m.group(0)
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
        elif depth == 0:
            at = m.end()
    return at, s


def has_order_by(sql):
    return _outer_order_by(sql)[0] is not None


def order_by(sql):
    """The outermost ORDER BY's terms as (column name or 1-based position,
    descending), or None when the query has none or one term is an
    expression: what bench/answers.py needs to compare ordered answers."""
    at, s = _outer_order_by(sql)
    if at is None:
        return None
    clause = re.split(r"\bLIMIT\b", s[at:], flags=re.I)[0]
    terms = []
    for t in clause.split(","):
        m = re.fullmatch(r"\s*(?:\w+\.)?(\w+)(?:\s+(ASC|DESC))?\s*", t, re.I)
        if not m:
            return None
        key = int(m.group(1)) if m.group(1).isdigit() else m.group(1).lower()
        terms.append((key, (m.group(2) or "").upper() == "DESC"))
    return terms


# ---- energy model -----------------------------------------------------------
# Constants from /work/shared/NVME-CS.md ("Energy model constants"), which
# takes them from M. Horowitz, "Computing's energy problem (and what we can
# do about it)", ISSCC 2014 (45 nm) for operations, and from published link
# and DRAM interface figures for movement:
#   PCIe end to end 5-10 pJ/bit  -> 7.5 pJ/bit, the middle of the range
#   DRAM 20-40 pJ/bit per access -> 30 pJ/bit, the middle of the range
#   int32 add 0.1 pJ (used for a comparison), fp32 add 0.9 pJ, fp32 mul 3.7 pJ
#   (64-bit values cost more: the op term is a lower bound, and small).
PCIE_PJ_BIT = 7.5
DRAM_PJ_BIT = 30.0
OP_PJ = (0.1, 0.9, 3.7)  # comparison, fp add, fp mul
# A byte that reaches the host crosses PCIe once and DRAM twice (the DMA
# writes it, the CPU reads it); a byte the device reads from media passes
# its SLM twice (Memory Copy writes it, a compute engine reads it). The host
# path is not charged for the SSD's own buffer, so the model leans against
# pushdown; media (NAND) energy is the same either way and left out.
HOST_BYTE_PJ = 8 * (PCIE_PJ_BIT + 2 * DRAM_PJ_BIT)
SLM_BYTE_PJ = 8 * (2 * DRAM_PJ_BIT)

ENERGY_NOTE = ("energy model, constants from NVME-CS.md (ops: Horowitz ISSCC 2014, 45 nm; PCIe 5-10 pJ/bit, "
               "DRAM 20-40 pJ/bit): host scan = needed bytes x 8 x (PCIe %.1f + 2 x DRAM %.0f) pJ/bit; "
               "pushdown = bytes_to_host x the same + media bytes x 8 x 2 x DRAM %.0f (device SLM); "
               "both + fact rows x (cmp %.1f, fp add %.1f, fp mul %.1f pJ) x ops per row where ops were counted "
               "(Q1, Q6, Q12, Q14, SSB Q1.x); a model, not a measurement" % ((PCIE_PJ_BIT, DRAM_PJ_BIT, DRAM_PJ_BIT)
                                                                           + OP_PJ))


def ops_pj(rows, ops):
    return rows * sum(n * e for n, e in zip(ops or (0, 0, 0), OP_PJ))


def energy_host_mj(host_bytes, rows, ops):
    """Modelled energy (mJ) of a host-side scan moving host_bytes."""
    return (host_bytes * HOST_BYTE_PJ + ops_pj(rows, ops)) * 1e-9


def energy_push_mj(media_bytes, to_host_bytes, rows, ops):
    """Modelled energy (mJ) of a pushdown reading media_bytes on the device
    and sending to_host_bytes to the host."""
    return (to_host_bytes * HOST_BYTE_PJ + media_bytes * SLM_BYTE_PJ + ops_pj(rows, ops)) * 1e-9
