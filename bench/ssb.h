/*
** bench/ssb.h - a deterministic, fast Star Schema Benchmark generator
** (O'Neil, O'Neil, Chen: lineorder, customer, supplier, part, date), usable
** from C without SQLite. Same shape as bench/tpch.h:
**
**   ssb_gen *g = ssb_gen_open(SSB_LINEORDER, 1.0, 1);
**   ssb_lineorder r;
**   while (ssb_gen_next(g, &r)) use(&r);
**   ssb_gen_close(g);
**
** The date table is named "dwdate" (DATE is an SQL keyword). Row counts:
** lineorder 1..7 lines for each of SF*1,500,000 orders (about SF*6M),
** customer SF*30,000, supplier SF*2,000, part 200,000*(1 + floor(log2 SF))
** for SF >= 1 and SF*200,000 below, dwdate every day of 1992-1998 (2557).
**
** As in SSB, money is INTEGER in cents (lo_extendedprice, lo_revenue, ...),
** discount and tax INTEGER percent, dates INTEGER yyyymmdd.
*/
#ifndef CSQ_BENCH_SSB_H
#define CSQ_BENCH_SSB_H

#include "bench/gen_common.h"

typedef enum ssb_table {
  SSB_DWDATE,
  SSB_SUPPLIER,
  SSB_CUSTOMER,
  SSB_PART,
  SSB_LINEORDER,
  SSB_NTABLE
} ssb_table;

typedef struct ssb_lineorder {
  int64_t lo_orderkey;
  int64_t lo_linenumber;
  int64_t lo_custkey;
  int64_t lo_partkey;
  int64_t lo_suppkey;
  int64_t lo_orderdate;
  char lo_orderpriority[16];
  char lo_shippriority[2];
  int64_t lo_quantity;
  int64_t lo_extendedprice;
  int64_t lo_ordtotalprice;
  int64_t lo_discount;
  int64_t lo_revenue;
  int64_t lo_supplycost;
  int64_t lo_tax;
  int64_t lo_commitdate;
  char lo_shipmode[11];
} ssb_lineorder;

typedef struct ssb_customer {
  int64_t c_custkey;
  char c_name[26];
  char c_address[26];
  char c_city[11];
  char c_nation[16];
  char c_region[13];
  char c_phone[16];
  char c_mktsegment[11];
} ssb_customer;

typedef struct ssb_supplier {
  int64_t s_suppkey;
  char s_name[26];
  char s_address[26];
  char s_city[11];
  char s_nation[16];
  char s_region[13];
  char s_phone[16];
} ssb_supplier;

typedef struct ssb_part {
  int64_t p_partkey;
  char p_name[23];
  char p_mfgr[7];
  char p_category[8];
  char p_brand1[10];
  char p_color[12];
  char p_type[26];
  int64_t p_size;
  char p_container[11];
} ssb_part;

typedef struct ssb_dwdate {
  int64_t d_datekey;    /* 19920101 */
  char d_date[19];      /* "January 1, 1992" */
  char d_dayofweek[10]; /* "Wednesday" */
  char d_month[10];     /* "January" */
  int64_t d_year;
  int64_t d_yearmonthnum; /* 199201 */
  char d_yearmonth[8];    /* "Jan1992" */
  int64_t d_daynuminweek; /* 1 = Sunday .. 7 = Saturday */
  int64_t d_daynuminmonth;
  int64_t d_daynuminyear;
  int64_t d_monthnuminyear;
  int64_t d_weeknuminyear;  /* week 1 holds January 1st; weeks start on Sunday */
  char d_sellingseason[10]; /* Winter, Spring, Summer, Fall, Christmas */
  int64_t d_lastdayinweekfl;
  int64_t d_lastdayinmonthfl;
  int64_t d_holidayfl;
  int64_t d_weekdayfl;
} ssb_dwdate;

typedef union ssb_row {
  ssb_lineorder lineorder;
  ssb_customer customer;
  ssb_supplier supplier;
  ssb_part part;
  ssb_dwdate dwdate;
} ssb_row;

typedef struct ssb_gen ssb_gen;

/* "lineorder", ..., "dwdate" ("date" is accepted too by ssb_table_from_name,
** which returns -1 for an unknown name). */
const char *ssb_table_name(ssb_table t);
int ssb_table_from_name(const char *zName);

const gen_col *ssb_columns(ssb_table t, int *pnCol);
size_t ssb_row_size(ssb_table t);

/* Exact row count (lineorder runs every order's line-count draw). */
int64_t ssb_row_count(ssb_table t, double sf, uint64_t seed);

/* Same contracts as tpch_gen_open / _open_part / _next / _fill / _close. */
ssb_gen *ssb_gen_open(ssb_table t, double sf, uint64_t seed);
ssb_gen *ssb_gen_open_part(ssb_table t, double sf, uint64_t seed, int iPart, int nPart);
int ssb_gen_next(ssb_gen *g, void *pRow);
int ssb_gen_fill(ssb_gen *g, void *aRow, int nRow);
void ssb_gen_close(ssb_gen *g);

#endif /* CSQ_BENCH_SSB_H */
