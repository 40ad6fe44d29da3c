/*
** bench/ssb.c - the Star Schema Benchmark generator behind bench/ssb.h.
**
** lineorder is TPC-H's orders and lineitem folded into one table, so it is
** drawn the same way: one stream per order (seeded with the order number),
** the line count first, then the order's fields, then each line's. The
** dimension tables draw one stream per row.
**
** Distributions (SSB specification, rev. 3):
**   lo_orderkey   sparse, as TPC-H o_orderkey; lo_linenumber 1..7
**   lo_custkey    uniform over customers, never a multiple of 3 (as TPC-H)
**   lo_partkey, lo_suppkey uniform; lo_orderdate in [1992-01-01, 1998-08-02]
**   lo_quantity 1..50, lo_discount 0..10, lo_tax 0..8 (percent)
**   lo_extendedprice = quantity * retail price (TPC-H formula, cents)
**   lo_revenue = extendedprice * (100 - discount) / 100
**   lo_supplycost = 6 * retail price / 10
**   lo_ordtotalprice = sum over the order of ext * (100-disc) * (100+tax) / 10^4
**   lo_commitdate = orderdate + 30..90
**   c_city / s_city = nation name cut or padded to 9 characters + digit 0..9
**   p_mfgr MFGR#1..5, p_category MFGR#mc (c 1..5), p_brand1 MFGR#mcb (b 1..40)
*/
#include "bench/ssb.h"

/* File-scope names carry an ssb_ prefix where tpch.c has the same idea, so
** that a test can compile both files into one unit (the unit-test build
** links only libcsq.a). */

#include <stddef.h>
#include <stdlib.h>

enum { ST_SSB_DATE = 0x101, ST_SSB_SUPPLIER, ST_SSB_CUSTOMER, ST_SSB_PART, ST_SSB_ORDER };

#define COL_I(S, f)                                                                                \
  { #f, "INTEGER", GEN_INT, offsetof(S, f), 0 }
#define COL_T(S, f)                                                                                \
  { #f, "TEXT", GEN_TEXT, offsetof(S, f), 0 }

static const gen_col aDateCol[] = {COL_I(ssb_dwdate, d_datekey),
                                   COL_T(ssb_dwdate, d_date),
                                   COL_T(ssb_dwdate, d_dayofweek),
                                   COL_T(ssb_dwdate, d_month),
                                   COL_I(ssb_dwdate, d_year),
                                   COL_I(ssb_dwdate, d_yearmonthnum),
                                   COL_T(ssb_dwdate, d_yearmonth),
                                   COL_I(ssb_dwdate, d_daynuminweek),
                                   COL_I(ssb_dwdate, d_daynuminmonth),
                                   COL_I(ssb_dwdate, d_daynuminyear),
                                   COL_I(ssb_dwdate, d_monthnuminyear),
                                   COL_I(ssb_dwdate, d_weeknuminyear),
                                   COL_T(ssb_dwdate, d_sellingseason),
                                   COL_I(ssb_dwdate, d_lastdayinweekfl),
                                   COL_I(ssb_dwdate, d_lastdayinmonthfl),
                                   COL_I(ssb_dwdate, d_holidayfl),
                                   COL_I(ssb_dwdate, d_weekdayfl)};
static const gen_col aSsbSupplierCol[] = {
    COL_I(ssb_supplier, s_suppkey), COL_T(ssb_supplier, s_name),   COL_T(ssb_supplier, s_address),
    COL_T(ssb_supplier, s_city),    COL_T(ssb_supplier, s_nation), COL_T(ssb_supplier, s_region),
    COL_T(ssb_supplier, s_phone)};
static const gen_col aSsbCustomerCol[] = {
    COL_I(ssb_customer, c_custkey), COL_T(ssb_customer, c_name),
    COL_T(ssb_customer, c_address), COL_T(ssb_customer, c_city),
    COL_T(ssb_customer, c_nation),  COL_T(ssb_customer, c_region),
    COL_T(ssb_customer, c_phone),   COL_T(ssb_customer, c_mktsegment)};
static const gen_col aSsbPartCol[] = {
    COL_I(ssb_part, p_partkey),  COL_T(ssb_part, p_name),   COL_T(ssb_part, p_mfgr),
    COL_T(ssb_part, p_category), COL_T(ssb_part, p_brand1), COL_T(ssb_part, p_color),
    COL_T(ssb_part, p_type),     COL_I(ssb_part, p_size),   COL_T(ssb_part, p_container)};
static const gen_col aLineorderCol[] = {
    COL_I(ssb_lineorder, lo_orderkey),      COL_I(ssb_lineorder, lo_linenumber),
    COL_I(ssb_lineorder, lo_custkey),       COL_I(ssb_lineorder, lo_partkey),
    COL_I(ssb_lineorder, lo_suppkey),       COL_I(ssb_lineorder, lo_orderdate),
    COL_T(ssb_lineorder, lo_orderpriority), COL_T(ssb_lineorder, lo_shippriority),
    COL_I(ssb_lineorder, lo_quantity),      COL_I(ssb_lineorder, lo_extendedprice),
    COL_I(ssb_lineorder, lo_ordtotalprice), COL_I(ssb_lineorder, lo_discount),
    COL_I(ssb_lineorder, lo_revenue),       COL_I(ssb_lineorder, lo_supplycost),
    COL_I(ssb_lineorder, lo_tax),           COL_I(ssb_lineorder, lo_commitdate),
    COL_T(ssb_lineorder, lo_shipmode)};

static const gen_table aSsbTable[SSB_NTABLE] = {
#define T GEN_TABLE
    T("dwdate", aDateCol, ssb_dwdate),
    T("supplier", aSsbSupplierCol, ssb_supplier),
    T("customer", aSsbCustomerCol, ssb_customer),
    T("part", aSsbPartCol, ssb_part),
    T("lineorder", aLineorderCol, ssb_lineorder),
#undef T
};

typedef struct lo_line {
  int64_t partkey, suppkey, ext, revenue, supplycost;
  int qty, disc, tax, commitDay, mode;
} lo_line;

typedef struct lo_order {
  int64_t orderkey, custkey, total;
  int nLine, orderDay, prio;
  lo_line aLine[7];
} lo_order;

struct ssb_gen {
  ssb_table t;
  uint64_t seed;
  int64_t nSupp, nCust, nPart;
  int64_t i, iEnd; /* driver index: next, one past the last */
  int j, nSub;     /* lineorder: next line of order i-1, lines in it */
  lo_order od;
};

static const char *const aMonth[12] = {"January",   "February", "March",    "April",
                                       "May",       "June",     "July",     "August",
                                       "September", "October",  "November", "December"};
static const char *const aWeekday[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                        "Thursday", "Friday", "Saturday"};

const char *ssb_table_name(ssb_table t) {
  return (unsigned)t < SSB_NTABLE ? aSsbTable[t].zName : 0;
}

int ssb_table_from_name(const char *zName) {
  if (strcmp(zName, "date") == 0) return SSB_DWDATE;
  for (int t = 0; t < SSB_NTABLE; t++)
    if (strcmp(zName, aSsbTable[t].zName) == 0) return t;
  return -1;
}

const gen_col *ssb_columns(ssb_table t, int *pnCol) {
  if ((unsigned)t >= SSB_NTABLE) return 0;
  if (pnCol) *pnCol = aSsbTable[t].nCol;
  return aSsbTable[t].aCol;
}

size_t ssb_row_size(ssb_table t) {
  return (unsigned)t < SSB_NTABLE ? aSsbTable[t].szRow : 0;
}

/* SSB grows part logarithmically above SF 1; below it we scale linearly so
** small test databases keep the proportions. */
static int64_t ssb_part_count(double sf) {
  if (sf < 1) return gen_scaled(200000, sf);
  int64_t k = 0;
  while ((double)(2LL << k) <= sf + 1e-9) k++; /* k = floor(log2 sf) */
  return 200000 * (1 + k);
}

static int64_t ssb_driver_count(ssb_table t, double sf) {
  switch (t) {
  case SSB_DWDATE:
    return GEN_DAY_END + 1;
  case SSB_SUPPLIER:
    return gen_scaled(2000, sf);
  case SSB_CUSTOMER:
    return gen_scaled(30000, sf);
  case SSB_PART:
    return ssb_part_count(sf);
  default:
    return gen_scaled(1500000, sf);
  }
}

/* Draws order idx and its lines; the line count is the stream's first draw. */
static void ssb_draw_order(const ssb_gen *g, int64_t idx, lo_order *od) {
  gen_rng r;
  gen_rng_seed(&r, g->seed, ST_SSB_ORDER, (uint64_t)idx);
  od->nLine = (int)gen_rand(&r, 1, 7);
  od->orderkey = gen_orderkey(idx);
  int64_t k = gen_rand(&r, 0, g->nCust - g->nCust / 3 - 1);
  od->custkey = k + k / 2 + 1;
  od->orderDay = (int)gen_rand(&r, 0, GEN_DAY_END - 151);
  od->prio = (int)gen_rand(&r, 0, 4);
  od->total = 0;
  for (int j = 0; j < od->nLine; j++) {
    lo_line *l = &od->aLine[j];
    l->partkey = gen_rand(&r, 1, g->nPart);
    l->suppkey = gen_rand(&r, 1, g->nSupp);
    l->qty = (int)gen_rand(&r, 1, 50);
    l->disc = (int)gen_rand(&r, 0, 10);
    l->tax = (int)gen_rand(&r, 0, 8);
    l->commitDay = od->orderDay + (int)gen_rand(&r, 30, 90);
    l->mode = (int)gen_rand(&r, 0, 6);
    int64_t retail = gen_retail_cents(l->partkey);
    l->ext = l->qty * retail;
    l->revenue = l->ext * (100 - l->disc) / 100;
    l->supplycost = 6 * retail / 10;
    od->total += l->ext * (100 - l->disc) * (100 + l->tax) / 10000;
  }
}

int64_t ssb_row_count(ssb_table t, double sf, uint64_t seed) {
  if ((unsigned)t >= SSB_NTABLE || !(sf > 0 && sf <= 1000)) return -1;
  int64_t n = ssb_driver_count(t, sf);
  if (t != SSB_LINEORDER) return n;
  int64_t nLine = 0;
  for (int64_t i = 0; i < n; i++) {
    gen_rng r;
    gen_rng_seed(&r, seed, ST_SSB_ORDER, (uint64_t)i);
    nLine += gen_rand(&r, 1, 7);
  }
  return nLine;
}

ssb_gen *ssb_gen_open_part(ssb_table t, double sf, uint64_t seed, int iPart, int nPart) {
  if ((unsigned)t >= SSB_NTABLE || !(sf > 0 && sf <= 1000)) return 0;
  if (nPart < 1 || iPart < 0 || iPart >= nPart) return 0;
  ssb_gen *g = calloc(1, sizeof(*g));
  if (!g) return 0;
  gen_init();
  g->t = t;
  g->seed = seed;
  g->nSupp = gen_scaled(2000, sf);
  g->nCust = gen_scaled(30000, sf);
  g->nPart = ssb_part_count(sf);
  int64_t n = ssb_driver_count(t, sf);
  g->i = n * iPart / nPart;
  g->iEnd = n * (iPart + 1) / nPart;
  return g;
}

ssb_gen *ssb_gen_open(ssb_table t, double sf, uint64_t seed) {
  return ssb_gen_open_part(t, sf, seed, 0, 1);
}

void ssb_gen_close(ssb_gen *g) {
  free(g);
}

/* SSB city: the nation name cut or space-padded to 9 characters, then a digit. */
static void ssb_city(char *z, int nation, int digit) {
  const char *zNation = gen_aNation[nation];
  int i = 0;
  for (; i < 9 && zNation[i]; i++) z[i] = zNation[i];
  for (; i < 9; i++) z[i] = ' ';
  z[9] = (char)('0' + digit);
  z[10] = 0;
}

static void ssb_make_date(int64_t i, ssb_dwdate *p) {
  const gen_day *d = &gen_aDay[i];
  int n;
  p->d_datekey = d->yyyymmdd;
  n = gen_copy(p->d_date, aMonth[d->month - 1]);
  p->d_date[n++] = ' ';
  n += gen_fmt_u64(p->d_date + n, d->mday);
  p->d_date[n++] = ',';
  p->d_date[n++] = ' ';
  n += gen_fmt_u64(p->d_date + n, (uint64_t)d->year);
  p->d_date[n] = 0;
  gen_copy(p->d_dayofweek, aWeekday[d->wday]);
  gen_copy(p->d_month, aMonth[d->month - 1]);
  p->d_year = d->year;
  p->d_yearmonthnum = d->year * 100 + d->month;
  memcpy(p->d_yearmonth, aMonth[d->month - 1], 3);
  gen_fmt_u64(p->d_yearmonth + 3, (uint64_t)d->year);
  p->d_yearmonth[7] = 0;
  p->d_daynuminweek = d->wday + 1;
  p->d_daynuminmonth = d->mday;
  p->d_daynuminyear = d->yday;
  p->d_monthnuminyear = d->month;
  int wdayJan1 = ((d->wday - (d->yday - 1)) % 7 + 7) % 7;
  p->d_weeknuminyear = (d->yday - 1 + wdayJan1) / 7 + 1;
  const char *zSeason = d->month == 12  ? "Christmas"
                        : d->month <= 2 ? "Winter"
                        : d->month <= 5 ? "Spring"
                        : d->month <= 8 ? "Summer"
                                        : "Fall";
  gen_copy(p->d_sellingseason, zSeason);
  p->d_lastdayinweekfl = d->wday == 6;
  p->d_lastdayinmonthfl = d->lastInMonth;
  int md = d->month * 100 + d->mday;
  int thanksgiving = d->month == 11 && d->wday == 4 && d->mday >= 22 && d->mday <= 28;
  p->d_holidayfl = md == 101 || md == 704 || md == 1224 || md == 1225 || md == 1231 || thanksgiving;
  p->d_weekdayfl = d->wday >= 1 && d->wday <= 5;
}

static void ssb_make_supplier(ssb_gen *g, int64_t i, ssb_supplier *p) {
  gen_rng r;
  gen_rng_seed(&r, g->seed, ST_SSB_SUPPLIER, (uint64_t)i);
  p->s_suppkey = i + 1;
  gen_key_name(p->s_name, "Supplier#", i + 1);
  gen_vstring(&r, p->s_address, 10, 25);
  int nation = (int)gen_rand(&r, 0, 24);
  ssb_city(p->s_city, nation, (int)gen_rand(&r, 0, 9));
  gen_copy(p->s_nation, gen_aNation[nation]);
  gen_copy(p->s_region, gen_aRegion[gen_aNationRegion[nation]]);
  gen_phone(&r, p->s_phone, nation);
}

static void ssb_make_customer(ssb_gen *g, int64_t i, ssb_customer *p) {
  gen_rng r;
  gen_rng_seed(&r, g->seed, ST_SSB_CUSTOMER, (uint64_t)i);
  p->c_custkey = i + 1;
  gen_key_name(p->c_name, "Customer#", i + 1);
  gen_vstring(&r, p->c_address, 10, 25);
  int nation = (int)gen_rand(&r, 0, 24);
  ssb_city(p->c_city, nation, (int)gen_rand(&r, 0, 9));
  gen_copy(p->c_nation, gen_aNation[nation]);
  gen_copy(p->c_region, gen_aRegion[gen_aNationRegion[nation]]);
  gen_phone(&r, p->c_phone, nation);
  gen_copy(p->c_mktsegment, gen_aSegment[gen_rand(&r, 0, 4)]);
}

static void ssb_make_part(ssb_gen *g, int64_t i, ssb_part *p) {
  gen_rng r;
  gen_rng_seed(&r, g->seed, ST_SSB_PART, (uint64_t)i);
  p->p_partkey = i + 1;
  int n = gen_copy(p->p_name, gen_aColor[gen_rand(&r, 0, 91)]);
  p->p_name[n++] = ' ';
  gen_copy(p->p_name + n, gen_aColor[gen_rand(&r, 0, 91)]);
  int m = (int)gen_rand(&r, 1, 5), c = (int)gen_rand(&r, 1, 5), b = (int)gen_rand(&r, 1, 40);
  memcpy(p->p_mfgr, "MFGR#", 5);
  p->p_mfgr[5] = (char)('0' + m);
  p->p_mfgr[6] = 0;
  memcpy(p->p_category, p->p_mfgr, 6);
  p->p_category[6] = (char)('0' + c);
  p->p_category[7] = 0;
  memcpy(p->p_brand1, p->p_category, 7);
  p->p_brand1[7 + gen_fmt_u64(p->p_brand1 + 7, (uint64_t)b)] = 0;
  gen_copy(p->p_color, gen_aColor[gen_rand(&r, 0, 91)]);
  n = gen_copy(p->p_type, gen_aTypeS1[gen_rand(&r, 0, 5)]);
  p->p_type[n++] = ' ';
  n += gen_copy(p->p_type + n, gen_aTypeS2[gen_rand(&r, 0, 4)]);
  p->p_type[n++] = ' ';
  gen_copy(p->p_type + n, gen_aTypeS3[gen_rand(&r, 0, 4)]);
  p->p_size = gen_rand(&r, 1, 50);
  n = gen_copy(p->p_container, gen_aContainerS1[gen_rand(&r, 0, 4)]);
  p->p_container[n++] = ' ';
  gen_copy(p->p_container + n, gen_aContainerS2[gen_rand(&r, 0, 7)]);
}

static void ssb_make_line(const lo_order *od, int j, ssb_lineorder *p) {
  const lo_line *l = &od->aLine[j];
  p->lo_orderkey = od->orderkey;
  p->lo_linenumber = j + 1;
  p->lo_custkey = od->custkey;
  p->lo_partkey = l->partkey;
  p->lo_suppkey = l->suppkey;
  p->lo_orderdate = gen_aDay[od->orderDay].yyyymmdd;
  gen_copy(p->lo_orderpriority, gen_aPriority[od->prio]);
  p->lo_shippriority[0] = '0';
  p->lo_shippriority[1] = 0;
  p->lo_quantity = l->qty;
  p->lo_extendedprice = l->ext;
  p->lo_ordtotalprice = od->total;
  p->lo_discount = l->disc;
  p->lo_revenue = l->revenue;
  p->lo_supplycost = l->supplycost;
  p->lo_tax = l->tax;
  p->lo_commitdate = gen_aDay[l->commitDay].yyyymmdd;
  gen_copy(p->lo_shipmode, gen_aShipMode[l->mode]);
}

int ssb_gen_next(ssb_gen *g, void *pRow) {
  if (g->j < g->nSub) {
    ssb_make_line(&g->od, g->j++, pRow);
    return 1;
  }
  if (g->i >= g->iEnd) return 0;
  int64_t i = g->i++;
  switch (g->t) {
  case SSB_DWDATE:
    ssb_make_date(i, pRow);
    break;
  case SSB_SUPPLIER:
    ssb_make_supplier(g, i, pRow);
    break;
  case SSB_CUSTOMER:
    ssb_make_customer(g, i, pRow);
    break;
  case SSB_PART:
    ssb_make_part(g, i, pRow);
    break;
  case SSB_LINEORDER:
    ssb_draw_order(g, i, &g->od);
    g->nSub = g->od.nLine;
    ssb_make_line(&g->od, 0, pRow);
    g->j = 1;
    break;
  default:
    return 0;
  }
  return 1;
}

int ssb_gen_fill(ssb_gen *g, void *aRow, int nRow) {
  char *p = aRow;
  size_t sz = aSsbTable[g->t].szRow;
  int n = 0;
  while (n < nRow && ssb_gen_next(g, p + (size_t)n * sz)) n++;
  return n;
}

#undef COL_I
#undef COL_T
