/*
** bench/tpch.h - a deterministic, fast TPC-H data generator (all eight
** tables), usable from C without SQLite.
**
**   tpch_gen *g = tpch_gen_open(TPCH_LINEITEM, 0.1, 1);
**   tpch_lineitem r;
**   while (tpch_gen_next(g, &r)) use(&r);
**   tpch_gen_close(g);
**
** Values follow the TPC-H specification's distributions (row counts per
** scale factor, sparse order keys, dates, flags, prices, word lists); the
** comment text is drawn from a fixed-vocabulary pool as dbgen does, but the
** random streams are our own, so the rows are not dbgen's rows. The same
** (table, sf, seed) always gives the same rows, byte for byte, and any part
** of a table (tpch_gen_open_part) gives exactly the rows of that slice of the
** whole.
**
** Types, as TPC-H is usually loaded into SQLite: keys and counts (including
** l_quantity) INTEGER, money and rates REAL (exact to 2 decimals), dates
** TEXT 'YYYY-MM-DD', everything else TEXT.
*/
#ifndef CSQ_BENCH_TPCH_H
#define CSQ_BENCH_TPCH_H

#include "bench/gen_common.h"

typedef enum tpch_table {
  TPCH_REGION,
  TPCH_NATION,
  TPCH_SUPPLIER,
  TPCH_CUSTOMER,
  TPCH_PART,
  TPCH_PARTSUPP,
  TPCH_ORDERS,
  TPCH_LINEITEM,
  TPCH_NTABLE
} tpch_table;

/* Row structs: one field per column, in column order. TEXT fields are
** NUL-terminated and sized for their longest possible value. */
typedef struct tpch_region {
  int64_t r_regionkey;
  char r_name[26];
  char r_comment[116];
} tpch_region;

typedef struct tpch_nation {
  int64_t n_nationkey;
  char n_name[26];
  int64_t n_regionkey;
  char n_comment[116];
} tpch_nation;

typedef struct tpch_supplier {
  int64_t s_suppkey;
  char s_name[26];
  char s_address[41];
  int64_t s_nationkey;
  char s_phone[16];
  double s_acctbal;
  char s_comment[104];
} tpch_supplier;

typedef struct tpch_customer {
  int64_t c_custkey;
  char c_name[26];
  char c_address[41];
  int64_t c_nationkey;
  char c_phone[16];
  double c_acctbal;
  char c_mktsegment[11];
  char c_comment[120];
} tpch_customer;

typedef struct tpch_part {
  int64_t p_partkey;
  char p_name[56];
  char p_mfgr[26];
  char p_brand[11];
  char p_type[26];
  int64_t p_size;
  char p_container[11];
  double p_retailprice;
  char p_comment[24];
} tpch_part;

typedef struct tpch_partsupp {
  int64_t ps_partkey;
  int64_t ps_suppkey;
  int64_t ps_availqty;
  double ps_supplycost;
  char ps_comment[200];
} tpch_partsupp;

typedef struct tpch_orders {
  int64_t o_orderkey;
  int64_t o_custkey;
  char o_orderstatus[2];
  double o_totalprice;
  char o_orderdate[11];
  char o_orderpriority[16];
  char o_clerk[16];
  int64_t o_shippriority;
  char o_comment[80];
} tpch_orders;

typedef struct tpch_lineitem {
  int64_t l_orderkey;
  int64_t l_partkey;
  int64_t l_suppkey;
  int64_t l_linenumber;
  int64_t l_quantity;
  double l_extendedprice;
  double l_discount;
  double l_tax;
  char l_returnflag[2];
  char l_linestatus[2];
  char l_shipdate[11];
  char l_commitdate[11];
  char l_receiptdate[11];
  char l_shipinstruct[26];
  char l_shipmode[11];
  char l_comment[44];
} tpch_lineitem;

/* Big enough for a row of any table. */
typedef union tpch_row {
  tpch_region region;
  tpch_nation nation;
  tpch_supplier supplier;
  tpch_customer customer;
  tpch_part part;
  tpch_partsupp partsupp;
  tpch_orders orders;
  tpch_lineitem lineitem;
} tpch_row;

typedef struct tpch_gen tpch_gen;

/* "lineitem" etc.; tpch_table_from_name returns -1 for an unknown name. */
const char *tpch_table_name(tpch_table t);
int tpch_table_from_name(const char *zName);

/* The columns of t, in order (static storage), and the size of its row struct. */
const gen_col *tpch_columns(tpch_table t, int *pnCol);
size_t tpch_row_size(tpch_table t);

/* Rows table t has at scale factor sf. Exact; for lineitem (1..7 lines per
** order, drawn) it runs the line-count draw of every order, which takes a
** few milliseconds per million orders. */
int64_t tpch_row_count(tpch_table t, double sf, uint64_t seed);

/* A generator of table t at scale factor sf (0 < sf <= 1000) with seed.
** Returns NULL for a bad table or sf, or out of memory. Free with
** tpch_gen_close(). tpch_gen_open_part generates part iPart (0-based) of
** nPart near-equal slices of the table (split on orders for orders and
** lineitem, on parts for partsupp); concatenating parts 0..nPart-1 gives
** exactly the rows of tpch_gen_open(). */
tpch_gen *tpch_gen_open(tpch_table t, double sf, uint64_t seed);
tpch_gen *tpch_gen_open_part(tpch_table t, double sf, uint64_t seed, int iPart, int nPart);

/* Writes the next row into *pRow (the table's row struct) and returns 1, or
** returns 0 at the end of the table. */
int tpch_gen_next(tpch_gen *g, void *pRow);

/* Writes up to nRow rows into the array aRow (of the table's row struct);
** returns how many, 0 at the end. */
int tpch_gen_fill(tpch_gen *g, void *aRow, int nRow);

void tpch_gen_close(tpch_gen *g);

#endif /* CSQ_BENCH_TPCH_H */
