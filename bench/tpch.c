/*
** bench/tpch.c - the TPC-H generator behind bench/tpch.h.
**
** Streams: every table has its own stream id; a row's draws come from the
** stream seeded with its driver index (the region, nation, supplier,
** customer or part number, or the order number for both orders and
** lineitem, or the part number for its four partsupp rows). orders and
** lineitem share one draw routine, draw_order(), so o_totalprice and
** o_orderstatus agree with the lines generated separately.
**
** Distributions (TPC-H 2.x, clause 4.2.3), in cents where money:
**   supplier  SF*10,000   customer SF*150,000   part SF*200,000
**   partsupp  4 per part, ps_suppkey = (pk + i*(S/4 + (pk-1)/S)) % S + 1
**   orders    SF*1,500,000, sparse keys, o_custkey never a multiple of 3,
**             o_orderdate in [1992-01-01, 1998-12-31 - 151 days]
**   lineitem  1..7 per order; shipdate = orderdate + 1..121, commitdate =
**             orderdate + 30..90, receiptdate = shipdate + 1..30;
**             returnflag R/A if receipt <= 1995-06-17 else N; linestatus O if
**             ship > 1995-06-17 else F; quantity 1..50, discount 0..0.10,
**             tax 0..0.08, extendedprice = quantity * p_retailprice
*/
#include "bench/tpch.h"

#include <stddef.h>
#include <stdlib.h>

enum {
  ST_REGION = 1,
  ST_NATION,
  ST_SUPPLIER,
  ST_CUSTOMER,
  ST_PART,
  ST_PARTSUPP,
  ST_ORDERS, /* orders and lineitem */
  ST_MISC
};

#define COL_I(S, f)                                                                                \
  { #f, "INTEGER", GEN_INT, offsetof(S, f), 0 }
#define COL_R(S, f)                                                                                \
  { #f, "REAL", GEN_REAL, offsetof(S, f), 2 }
#define COL_T(S, f)                                                                                \
  { #f, "TEXT", GEN_TEXT, offsetof(S, f), 0 }

static const gen_col aRegionCol[] = {COL_I(tpch_region, r_regionkey), COL_T(tpch_region, r_name),
                                     COL_T(tpch_region, r_comment)};
static const gen_col aNationCol[] = {COL_I(tpch_nation, n_nationkey), COL_T(tpch_nation, n_name),
                                     COL_I(tpch_nation, n_regionkey),
                                     COL_T(tpch_nation, n_comment)};
static const gen_col aSupplierCol[] = {
    COL_I(tpch_supplier, s_suppkey), COL_T(tpch_supplier, s_name),
    COL_T(tpch_supplier, s_address), COL_I(tpch_supplier, s_nationkey),
    COL_T(tpch_supplier, s_phone),   COL_R(tpch_supplier, s_acctbal),
    COL_T(tpch_supplier, s_comment)};
static const gen_col aCustomerCol[] = {
    COL_I(tpch_customer, c_custkey),    COL_T(tpch_customer, c_name),
    COL_T(tpch_customer, c_address),    COL_I(tpch_customer, c_nationkey),
    COL_T(tpch_customer, c_phone),      COL_R(tpch_customer, c_acctbal),
    COL_T(tpch_customer, c_mktsegment), COL_T(tpch_customer, c_comment)};
static const gen_col aPartCol[] = {
    COL_I(tpch_part, p_partkey),   COL_T(tpch_part, p_name),        COL_T(tpch_part, p_mfgr),
    COL_T(tpch_part, p_brand),     COL_T(tpch_part, p_type),        COL_I(tpch_part, p_size),
    COL_T(tpch_part, p_container), COL_R(tpch_part, p_retailprice), COL_T(tpch_part, p_comment)};
static const gen_col aPartsuppCol[] = {
    COL_I(tpch_partsupp, ps_partkey), COL_I(tpch_partsupp, ps_suppkey),
    COL_I(tpch_partsupp, ps_availqty), COL_R(tpch_partsupp, ps_supplycost),
    COL_T(tpch_partsupp, ps_comment)};
static const gen_col aOrdersCol[] = {
    COL_I(tpch_orders, o_orderkey),    COL_I(tpch_orders, o_custkey),
    COL_T(tpch_orders, o_orderstatus), COL_R(tpch_orders, o_totalprice),
    COL_T(tpch_orders, o_orderdate),   COL_T(tpch_orders, o_orderpriority),
    COL_T(tpch_orders, o_clerk),       COL_I(tpch_orders, o_shippriority),
    COL_T(tpch_orders, o_comment)};
static const gen_col aLineitemCol[] = {
    COL_I(tpch_lineitem, l_orderkey),    COL_I(tpch_lineitem, l_partkey),
    COL_I(tpch_lineitem, l_suppkey),     COL_I(tpch_lineitem, l_linenumber),
    COL_I(tpch_lineitem, l_quantity),    COL_R(tpch_lineitem, l_extendedprice),
    COL_R(tpch_lineitem, l_discount),    COL_R(tpch_lineitem, l_tax),
    COL_T(tpch_lineitem, l_returnflag),  COL_T(tpch_lineitem, l_linestatus),
    COL_T(tpch_lineitem, l_shipdate),    COL_T(tpch_lineitem, l_commitdate),
    COL_T(tpch_lineitem, l_receiptdate), COL_T(tpch_lineitem, l_shipinstruct),
    COL_T(tpch_lineitem, l_shipmode),    COL_T(tpch_lineitem, l_comment)};

static const gen_table aTable[TPCH_NTABLE] = {
#define T GEN_TABLE
    T("region", aRegionCol, tpch_region),
    T("nation", aNationCol, tpch_nation),
    T("supplier", aSupplierCol, tpch_supplier),
    T("customer", aCustomerCol, tpch_customer),
    T("part", aPartCol, tpch_part),
    T("partsupp", aPartsuppCol, tpch_partsupp),
    T("orders", aOrdersCol, tpch_orders),
    T("lineitem", aLineitemCol, tpch_lineitem),
#undef T
};

/* Everything drawn for one line of an order. */
typedef struct line_draw {
  int64_t partkey, suppkey, extCents;
  int qty, disc, tax;
  int shipDay, commitDay, receiptDay;
  int instr, mode;
  char rflag, lstatus;
  int nComment;
  uint32_t offComment;
} line_draw;

/* Everything drawn for one order and its lines. */
typedef struct order_draw {
  int64_t orderkey, custkey;
  int nLine, orderDay, prio, clerk;
  int nComment;
  uint32_t offComment;
  line_draw aLine[7];
} order_draw;

struct tpch_gen {
  tpch_table t;
  uint64_t seed;
  int64_t nSupp, nCust, nPart, nOrder, nClerk;
  int64_t i, iEnd;        /* driver index: next, one past the last */
  int j;                  /* next sub-row of driver row i-1 (partsupp, lineitem) */
  int nSub;               /* sub-rows of the current driver row */
  uint32_t complaintSlot; /* suppliers k with k % 2000 == slot carry Complaints */
  gen_rng r;              /* partsupp: the stream of the current part */
  order_draw od;          /* lineitem: the current order */
};

const char *tpch_table_name(tpch_table t) {
  return (unsigned)t < TPCH_NTABLE ? aTable[t].zName : 0;
}

int tpch_table_from_name(const char *zName) {
  for (int t = 0; t < TPCH_NTABLE; t++)
    if (strcmp(zName, aTable[t].zName) == 0) return t;
  return -1;
}

const gen_col *tpch_columns(tpch_table t, int *pnCol) {
  if ((unsigned)t >= TPCH_NTABLE) return 0;
  if (pnCol) *pnCol = aTable[t].nCol;
  return aTable[t].aCol;
}

size_t tpch_row_size(tpch_table t) {
  return (unsigned)t < TPCH_NTABLE ? aTable[t].szRow : 0;
}

static int64_t nclerk(double sf) {
  return gen_scaled(1000, sf);
}

/* The supplier of part pk numbered i (0..3), spec 4.2.3 (PS_SUPPKEY). */
static inline int64_t part_supp(int64_t pk, int64_t i, int64_t nSupp) {
  return (pk + i * (nSupp / 4 + (pk - 1) / nSupp)) % nSupp + 1;
}

/* Rows of the driver table: the table itself, parts for partsupp, orders for lineitem. */
static int64_t driver_count(tpch_table t, double sf) {
  switch (t) {
  case TPCH_REGION:
    return 5;
  case TPCH_NATION:
    return 25;
  case TPCH_SUPPLIER:
    return gen_scaled(10000, sf);
  case TPCH_CUSTOMER:
    return gen_scaled(150000, sf);
  case TPCH_PART:
  case TPCH_PARTSUPP:
    return gen_scaled(200000, sf);
  default:
    return gen_scaled(1500000, sf);
  }
}

/* Draws order idx (0-based) and all its lines into *od. The first draw of
** the stream is the line count, which tpch_row_count relies on. */
static void draw_order(const tpch_gen *g, int64_t idx, order_draw *od) {
  gen_rng r;
  gen_rng_seed(&r, g->seed, ST_ORDERS, (uint64_t)idx);
  od->nLine = (int)gen_rand(&r, 1, 7);
  od->orderkey = gen_orderkey(idx);
  /* The k-th customer key that is not a multiple of 3 is k + k/2 + 1. */
  int64_t k = gen_rand(&r, 0, g->nCust - g->nCust / 3 - 1);
  od->custkey = k + k / 2 + 1;
  od->orderDay = (int)gen_rand(&r, 0, GEN_DAY_END - 151);
  od->prio = (int)gen_rand(&r, 0, 4);
  od->clerk = (int)gen_rand(&r, 1, g->nClerk);
  od->nComment = gen_text_pick(&r, 19, 78, &od->offComment);
  for (int j = 0; j < od->nLine; j++) {
    line_draw *l = &od->aLine[j];
    l->partkey = gen_rand(&r, 1, g->nPart);
    l->suppkey = part_supp(l->partkey, gen_rand(&r, 0, 3), g->nSupp);
    l->qty = (int)gen_rand(&r, 1, 50);
    l->disc = (int)gen_rand(&r, 0, 10);
    l->tax = (int)gen_rand(&r, 0, 8);
    l->shipDay = od->orderDay + (int)gen_rand(&r, 1, 121);
    l->commitDay = od->orderDay + (int)gen_rand(&r, 30, 90);
    l->receiptDay = l->shipDay + (int)gen_rand(&r, 1, 30);
    int ra = (int)gen_rand(&r, 0, 1);
    l->rflag = l->receiptDay <= GEN_DAY_CURRENT ? (ra ? 'R' : 'A') : 'N';
    l->lstatus = l->shipDay > GEN_DAY_CURRENT ? 'O' : 'F';
    l->instr = (int)gen_rand(&r, 0, 3);
    l->mode = (int)gen_rand(&r, 0, 6);
    l->nComment = gen_text_pick(&r, 10, 43, &l->offComment);
    l->extCents = l->qty * gen_retail_cents(l->partkey);
  }
}

int64_t tpch_row_count(tpch_table t, double sf, uint64_t seed) {
  if ((unsigned)t >= TPCH_NTABLE || !(sf > 0 && sf <= 1000)) return -1;
  int64_t n = driver_count(t, sf);
  if (t == TPCH_PARTSUPP) return 4 * n;
  if (t != TPCH_LINEITEM) return n;
  int64_t nLine = 0;
  for (int64_t i = 0; i < n; i++) {
    gen_rng r;
    gen_rng_seed(&r, seed, ST_ORDERS, (uint64_t)i);
    nLine += gen_rand(&r, 1, 7);
  }
  return nLine;
}

tpch_gen *tpch_gen_open_part(tpch_table t, double sf, uint64_t seed, int iPart, int nPart) {
  if ((unsigned)t >= TPCH_NTABLE || !(sf > 0 && sf <= 1000)) return 0;
  if (nPart < 1 || iPart < 0 || iPart >= nPart) return 0;
  tpch_gen *g = calloc(1, sizeof(*g));
  if (!g) return 0;
  gen_init();
  g->t = t;
  g->seed = seed;
  g->nSupp = gen_scaled(10000, sf);
  g->nCust = gen_scaled(150000, sf);
  g->nPart = gen_scaled(200000, sf);
  g->nOrder = gen_scaled(1500000, sf);
  g->nClerk = nclerk(sf);
  int64_t n = driver_count(t, sf);
  g->i = n * iPart / nPart;
  g->iEnd = n * (iPart + 1) / nPart;
  g->complaintSlot = (uint32_t)(gen_mix64(seed ^ 0xC0FFEE) % 2000);
  return g;
}

tpch_gen *tpch_gen_open(tpch_table t, double sf, uint64_t seed) {
  return tpch_gen_open_part(t, sf, seed, 0, 1);
}

void tpch_gen_close(tpch_gen *g) {
  free(g);
}

static void make_region(tpch_gen *g, int64_t i, tpch_region *p) {
  gen_rng r;
  gen_rng_seed(&r, g->seed, ST_REGION, (uint64_t)i);
  p->r_regionkey = i;
  gen_copy(p->r_name, gen_aRegion[i]);
  gen_text(&r, p->r_comment, 31, 115);
}

static void make_nation(tpch_gen *g, int64_t i, tpch_nation *p) {
  gen_rng r;
  gen_rng_seed(&r, g->seed, ST_NATION, (uint64_t)i);
  p->n_nationkey = i;
  gen_copy(p->n_name, gen_aNation[i]);
  p->n_regionkey = gen_aNationRegion[i];
  gen_text(&r, p->n_comment, 31, 114);
}

/* Spec 4.2.3: SF*5 suppliers carry "Customer ... Complaints" in s_comment and
** SF*5 others "Customer ... Recommends"; here one slot in every 2000. */
static void make_supplier(tpch_gen *g, int64_t i, tpch_supplier *p) {
  gen_rng r;
  gen_rng_seed(&r, g->seed, ST_SUPPLIER, (uint64_t)i);
  p->s_suppkey = i + 1;
  gen_key_name(p->s_name, "Supplier#", i + 1);
  gen_vstring(&r, p->s_address, 10, 40);
  p->s_nationkey = gen_rand(&r, 0, 24);
  gen_phone(&r, p->s_phone, (int)p->s_nationkey);
  p->s_acctbal = (double)gen_rand(&r, -99999, 999999) / 100.0;
  int n = gen_text(&r, p->s_comment, 25, 100);
  int gap = (int)gen_rand(&r, 0, 6);
  int at = (int)gen_rand(&r, 0, n - 19 - gap);
  uint32_t slot = (uint32_t)(i % 2000);
  if (slot == g->complaintSlot || slot == (g->complaintSlot + 1000) % 2000) {
    memcpy(p->s_comment + at, "Customer ", 9);
    memcpy(p->s_comment + at + 9 + gap, slot == g->complaintSlot ? "Complaints" : "Recommends", 10);
  }
}

static void make_customer(tpch_gen *g, int64_t i, tpch_customer *p) {
  gen_rng r;
  gen_rng_seed(&r, g->seed, ST_CUSTOMER, (uint64_t)i);
  p->c_custkey = i + 1;
  gen_key_name(p->c_name, "Customer#", i + 1);
  gen_vstring(&r, p->c_address, 10, 40);
  p->c_nationkey = gen_rand(&r, 0, 24);
  gen_phone(&r, p->c_phone, (int)p->c_nationkey);
  p->c_acctbal = (double)gen_rand(&r, -99999, 999999) / 100.0;
  gen_copy(p->c_mktsegment, gen_aSegment[gen_rand(&r, 0, 4)]);
  gen_text(&r, p->c_comment, 29, 116);
}

static void make_part(tpch_gen *g, int64_t i, tpch_part *p) {
  gen_rng r;
  gen_rng_seed(&r, g->seed, ST_PART, (uint64_t)i);
  p->p_partkey = i + 1;
  /* Five distinct colors. */
  int aPick[5], n = 0;
  for (int k = 0; k < 5; k++) {
    int c, dup;
    do {
      c = (int)gen_rand(&r, 0, 91);
      dup = 0;
      for (int m = 0; m < k; m++) dup |= aPick[m] == c;
    } while (dup);
    aPick[k] = c;
    if (k) p->p_name[n++] = ' ';
    n += gen_copy(p->p_name + n, gen_aColor[c]);
  }
  int m = (int)gen_rand(&r, 1, 5);
  int b = (int)gen_rand(&r, 1, 5);
  n = gen_copy(p->p_mfgr, "Manufacturer#");
  p->p_mfgr[n] = (char)('0' + m);
  p->p_mfgr[n + 1] = 0;
  n = gen_copy(p->p_brand, "Brand#");
  p->p_brand[n] = (char)('0' + m);
  p->p_brand[n + 1] = (char)('0' + b);
  p->p_brand[n + 2] = 0;
  n = gen_copy(p->p_type, gen_aTypeS1[gen_rand(&r, 0, 5)]);
  p->p_type[n++] = ' ';
  n += gen_copy(p->p_type + n, gen_aTypeS2[gen_rand(&r, 0, 4)]);
  p->p_type[n++] = ' ';
  gen_copy(p->p_type + n, gen_aTypeS3[gen_rand(&r, 0, 4)]);
  p->p_size = gen_rand(&r, 1, 50);
  n = gen_copy(p->p_container, gen_aContainerS1[gen_rand(&r, 0, 4)]);
  p->p_container[n++] = ' ';
  gen_copy(p->p_container + n, gen_aContainerS2[gen_rand(&r, 0, 7)]);
  p->p_retailprice = (double)gen_retail_cents(i + 1) / 100.0;
  gen_text(&r, p->p_comment, 5, 22);
}

/* Partsupp row j (0..3) of part i; g->r is that part's stream, positioned. */
static void make_partsupp(tpch_gen *g, int64_t i, int j, tpch_partsupp *p) {
  p->ps_partkey = i + 1;
  p->ps_suppkey = part_supp(i + 1, j, g->nSupp);
  p->ps_availqty = gen_rand(&g->r, 1, 9999);
  p->ps_supplycost = (double)gen_rand(&g->r, 100, 100000) / 100.0;
  gen_text(&g->r, p->ps_comment, 49, 198);
}

static void make_orders(tpch_gen *g, int64_t i, tpch_orders *p) {
  order_draw *od = &g->od;
  draw_order(g, i, od);
  int64_t total = 0;
  int nF = 0;
  for (int j = 0; j < od->nLine; j++) {
    const line_draw *l = &od->aLine[j];
    total += (l->extCents * (100 - l->disc) * (100 + l->tax) + 5000) / 10000;
    nF += l->lstatus == 'F';
  }
  p->o_orderkey = od->orderkey;
  p->o_custkey = od->custkey;
  p->o_orderstatus[0] = nF == od->nLine ? 'F' : nF == 0 ? 'O' : 'P';
  p->o_orderstatus[1] = 0;
  p->o_totalprice = (double)total / 100.0;
  memcpy(p->o_orderdate, gen_aDay[od->orderDay].zIso, 11);
  gen_copy(p->o_orderpriority, gen_aPriority[od->prio]);
  gen_key_name(p->o_clerk, "Clerk#", od->clerk);
  p->o_shippriority = 0;
  gen_text_copy(p->o_comment, od->offComment, od->nComment);
}

static void make_line(const order_draw *od, int j, tpch_lineitem *p) {
  const line_draw *l = &od->aLine[j];
  p->l_orderkey = od->orderkey;
  p->l_partkey = l->partkey;
  p->l_suppkey = l->suppkey;
  p->l_linenumber = j + 1;
  p->l_quantity = l->qty;
  p->l_extendedprice = (double)l->extCents / 100.0;
  p->l_discount = (double)l->disc / 100.0;
  p->l_tax = (double)l->tax / 100.0;
  p->l_returnflag[0] = l->rflag;
  p->l_returnflag[1] = 0;
  p->l_linestatus[0] = l->lstatus;
  p->l_linestatus[1] = 0;
  memcpy(p->l_shipdate, gen_aDay[l->shipDay].zIso, 11);
  memcpy(p->l_commitdate, gen_aDay[l->commitDay].zIso, 11);
  memcpy(p->l_receiptdate, gen_aDay[l->receiptDay].zIso, 11);
  gen_copy(p->l_shipinstruct, gen_aShipInstruct[l->instr]);
  gen_copy(p->l_shipmode, gen_aShipMode[l->mode]);
  gen_text_copy(p->l_comment, l->offComment, l->nComment);
}

int tpch_gen_next(tpch_gen *g, void *pRow) {
  if (g->j < g->nSub) { /* the rest of the current driver row */
    if (g->t == TPCH_LINEITEM)
      make_line(&g->od, g->j, pRow);
    else
      make_partsupp(g, g->i - 1, g->j, pRow);
    g->j++;
    return 1;
  }
  if (g->i >= g->iEnd) return 0;
  int64_t i = g->i++;
  switch (g->t) {
  case TPCH_REGION:
    make_region(g, i, pRow);
    break;
  case TPCH_NATION:
    make_nation(g, i, pRow);
    break;
  case TPCH_SUPPLIER:
    make_supplier(g, i, pRow);
    break;
  case TPCH_CUSTOMER:
    make_customer(g, i, pRow);
    break;
  case TPCH_PART:
    make_part(g, i, pRow);
    break;
  case TPCH_PARTSUPP:
    gen_rng_seed(&g->r, g->seed, ST_PARTSUPP, (uint64_t)i);
    g->nSub = 4;
    make_partsupp(g, i, 0, pRow);
    g->j = 1;
    break;
  case TPCH_ORDERS:
    make_orders(g, i, pRow);
    break;
  case TPCH_LINEITEM:
    draw_order(g, i, &g->od);
    g->nSub = g->od.nLine;
    make_line(&g->od, 0, pRow);
    g->j = 1;
    break;
  default:
    return 0;
  }
  return 1;
}

int tpch_gen_fill(tpch_gen *g, void *aRow, int nRow) {
  char *p = aRow;
  size_t sz = aTable[g->t].szRow;
  int n = 0;
  while (n < nRow && tpch_gen_next(g, p + (size_t)n * sz)) n++;
  return n;
}

#undef COL_I
#undef COL_R
#undef COL_T
