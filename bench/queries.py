"""bench/queries.py - the benchmark's queries and its energy model, as data.

Every query is one SQL text that SQLite (native and csq) and DuckDB all run
unchanged: dates are TEXT 'YYYY-MM-DD' in bench/schema/tpch.sql, so date
arithmetic is written out as a literal (Q1's "date '1998-12-01' - interval
'90' day" is '1998-09-02'); SSB's lo_orderdate is an INTEGER yyyymmdd.

Per query:
  tables  the tables it reads (the first is the fact table that is scanned)
  cols    per table, the columns it needs: what a host-side scan must move
  ops     per row of the fact table: comparisons, fp adds, fp multiplies (a
          hand count of the query's expressions, for the energy model)
  single  True when it reads one table: then it also runs as a csq pushdown
          view (whole-query pushdown); joins run as written on csq tables
          (transparent pushdown of each table's filters).
  rewrite_of  set on a labelled rewrite of a standard query (not the
          benchmark's text): its native answer is checked against that query's.
"""

TPCH = [
    {"name": "Q1", "tables": ["lineitem"], "single": True,
     "cols": {"lineitem": ["l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_returnflag",
                           "l_linestatus", "l_shipdate"]},
     "ops": (3, 10, 3),
     "sql": """SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty,
  sum(l_extendedprice) AS sum_base_price, sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
  sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, avg(l_quantity) AS avg_qty,
  avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc, count(*) AS count_order
FROM lineitem WHERE l_shipdate <= '1998-09-02'
GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus"""},
    {"name": "Q6", "tables": ["lineitem"], "single": True,
     "cols": {"lineitem": ["l_shipdate", "l_discount", "l_quantity", "l_extendedprice"]},
     "ops": (5, 1, 1),
     "sql": """SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem
WHERE l_shipdate >= '1994-01-01' AND l_shipdate < '1995-01-01'
  AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"""},
    {"name": "Q12", "tables": ["lineitem", "orders"], "single": False,
     "cols": {"lineitem": ["l_orderkey", "l_shipmode", "l_commitdate", "l_receiptdate", "l_shipdate"],
              "orders": ["o_orderkey", "o_orderpriority"]},
     "ops": (8, 2, 0),
     "sql": """SELECT l_shipmode,
  sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END) AS high_line_count,
  sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END) AS low_line_count
FROM orders, lineitem
WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate
  AND l_shipdate < l_commitdate AND l_receiptdate >= '1994-01-01' AND l_receiptdate < '1995-01-01'
GROUP BY l_shipmode ORDER BY l_shipmode"""},
    {"name": "Q14", "tables": ["lineitem", "part"], "single": False,
     "cols": {"lineitem": ["l_partkey", "l_extendedprice", "l_discount", "l_shipdate"],
              "part": ["p_partkey", "p_type"]},
     "ops": (8, 4, 2),
     "sql": """SELECT 100.00 * sum(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - l_discount) ELSE 0 END)
  / sum(l_extendedprice * (1 - l_discount)) AS promo_revenue
FROM lineitem, part
WHERE l_partkey = p_partkey AND l_shipdate >= '1995-09-01' AND l_shipdate < '1995-10-01'"""},
    {"name": "none", "tables": ["lineitem"], "single": True,
     "cols": {"lineitem": ["l_shipdate"]}, "ops": (1, 0, 0),
     "sql": "SELECT count(*) FROM lineitem WHERE l_shipdate > '2000-01-01'"},
    {"name": "point", "tables": ["lineitem"], "single": True,
     "cols": {"lineitem": ["l_orderkey", "l_quantity"]}, "ops": (1, 2, 0),
     "sql": "SELECT count(*), sum(l_quantity) FROM lineitem WHERE l_orderkey = 4242"},
]

# Joins on csq tables as written run as SQLite nested loops with a device
# scan of the inner table per outer row (SQLite builds no automatic index on
# a virtual table). The 'm' variants are a rewrite a user can make: the
# dimension side as a MATERIALIZED CTE, which SQLite copies once and indexes
# automatically; the fact table keeps its pushed filters. Labelled as
# rewrites, checked against the standard text.
def _materialized(q, cte, dim, cols):
    sql = q["sql"].replace("FROM orders, lineitem", "FROM o, lineitem").replace("FROM lineitem, part",
                                                                                "FROM lineitem, p")
    return dict(q, name=q["name"] + "m", rewrite_of=q["name"],
                sql="WITH %s AS MATERIALIZED (SELECT %s FROM %s)\n%s" % (cte, ", ".join(cols), dim, sql))


TPCH += [_materialized(TPCH[2], "o", "orders", ["o_orderkey", "o_orderpriority"]),
         _materialized(TPCH[3], "p", "part", ["p_partkey", "p_type"])]

# SSB flight 1, as published (lineorder joined with the date dimension).
SSB = [
    {"name": "Q1.1", "date": "d_year = 1993", "rest": "lo_discount BETWEEN 1 AND 3 AND lo_quantity < 25",
     "dcols": ["d_datekey", "d_year"]},
    {"name": "Q1.2", "date": "d_yearmonthnum = 199401",
     "rest": "lo_discount BETWEEN 4 AND 6 AND lo_quantity BETWEEN 26 AND 35",
     "dcols": ["d_datekey", "d_yearmonthnum"]},
    {"name": "Q1.3", "date": "d_weeknuminyear = 6 AND d_year = 1994",
     "rest": "lo_discount BETWEEN 5 AND 7 AND lo_quantity BETWEEN 26 AND 35",
     "dcols": ["d_datekey", "d_weeknuminyear", "d_year"]},
]
SSB_FACT_COLS = ["lo_orderdate", "lo_discount", "lo_quantity", "lo_extendedprice"]


def ssb_queries(date_ranges):
    """The SSB queries: the standard join text; '<name>m', the date dimension
    as a MATERIALIZED CTE (see above); and where date_ranges (name -> (lo,
    hi), found in the data by bench/run.py) holds the date filter as one
    contiguous range of d_datekey, a single-table variant '<name>r' with the
    filter on lo_orderdate instead (labelled as a rewrite, not SSB's text)."""
    out = []
    for q in SSB:
        out.append({"name": q["name"], "tables": ["lineorder", "dwdate"], "single": False,
                    "cols": {"lineorder": SSB_FACT_COLS, "dwdate": q["dcols"]}, "ops": (8, 1, 1),
                    "sql": "SELECT sum(lo_extendedprice * lo_discount) AS revenue FROM lineorder, dwdate\n"
                           "WHERE lo_orderdate = d_datekey AND %s AND %s" % (q["date"], q["rest"])})
        out.append(dict(out[-1], name=q["name"] + "m", rewrite_of=q["name"],
                        sql="WITH d AS MATERIALIZED (SELECT d_datekey FROM dwdate WHERE %s)\n"
                            "SELECT sum(lo_extendedprice * lo_discount) AS revenue FROM lineorder, d\n"
                            "WHERE lo_orderdate = d_datekey AND %s" % (q["date"], q["rest"])))
        if q["name"] in date_ranges:
            lo, hi = date_ranges[q["name"]]
            out.append({"name": q["name"] + "r", "tables": ["lineorder"], "single": True,
                        "rewrite_of": q["name"],
                        "cols": {"lineorder": SSB_FACT_COLS}, "ops": (5, 1, 1),
                        "sql": "SELECT sum(lo_extendedprice * lo_discount) AS revenue FROM lineorder\n"
                               "WHERE lo_orderdate BETWEEN %d AND %d AND %s" % (lo, hi, q["rest"])})
    return out


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
               "both + fact rows x (cmp %.1f, fp add %.1f, fp mul %.1f pJ) x ops per row; a model, not a "
               "measurement" % ((PCIE_PJ_BIT, DRAM_PJ_BIT, DRAM_PJ_BIT) + OP_PJ))


def ops_pj(rows, ops):
    return rows * sum(n * e for n, e in zip(ops, OP_PJ))


def energy_host_mj(host_bytes, rows, ops):
    """Modelled energy (mJ) of a host-side scan moving host_bytes."""
    return (host_bytes * HOST_BYTE_PJ + ops_pj(rows, ops)) * 1e-9


def energy_push_mj(media_bytes, to_host_bytes, rows, ops):
    """Modelled energy (mJ) of a pushdown reading media_bytes on the device
    and sending to_host_bytes to the host."""
    return (to_host_bytes * HOST_BYTE_PJ + media_bytes * SLM_BYTE_PJ + ops_pj(rows, ops)) * 1e-9
