/*
** tests/unit/test_gen.c - the TPC-H and SSB generators of bench/: row counts
** against the spec formulas, determinism (XXH3 over the rows' text form,
** whole table vs. the same table generated in parts), value domains and
** cross-table rules, and a load into a temporary SQLite database.
**
** The unit-test build links only libcsq.a, so the generator sources are
** compiled into this program directly.
*/
#include "bench/gen_common.c"
#include "bench/ssb.c"
#include "bench/tpch.c"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>
#include "tests/unit/helpers.h"

/* Appends the text form of one row (as the CSV writer would) to an XXH3 state. */
static void hash_row(XXH3_state_t *h, const gen_col *aCol, int nCol, const char *pRow) {
  char z[64];
  for (int i = 0; i < nCol; i++) {
    const char *p = pRow + aCol[i].off;
    int n;
    switch (aCol[i].eKind) {
    case GEN_INT:
      n = gen_fmt_i64(z, *(const int64_t *)p);
      break;
    case GEN_REAL:
      n = gen_fmt_scaled(z, llround(*(const double *)p * 100), 2);
      break;
    default:
      XXH3_64bits_update(h, p, strlen(p));
      n = 0;
      break;
    }
    z[n++] = i + 1 < nCol ? '|' : '\n';
    XXH3_64bits_update(h, z, (size_t)n);
  }
}

/* Hash and row count of TPC-H table t (part iPart of nPart). */
static uint64_t tpch_hash(tpch_table t, double sf, uint64_t seed, int iPart, int nPart,
                          int64_t *pnRow) {
  XXH3_state_t *h = XXH3_createState();
  XXH3_64bits_reset(h);
  tpch_gen *g = tpch_gen_open_part(t, sf, seed, iPart, nPart);
  int nCol;
  const gen_col *aCol = tpch_columns(t, &nCol);
  static tpch_row aRow[100];
  int64_t nRow = 0;
  int n;
  while ((n = tpch_gen_fill(g, aRow, 100)) > 0) {
    for (int i = 0; i < n; i++)
      hash_row(h, aCol, nCol, (const char *)&aRow[0] + i * tpch_row_size(t));
    nRow += n;
  }
  tpch_gen_close(g);
  uint64_t v = XXH3_64bits_digest(h);
  XXH3_freeState(h);
  if (pnRow) *pnRow = nRow;
  return v;
}

static uint64_t tpch_hash_parts(tpch_table t, double sf, uint64_t seed, int nPart) {
  /* Hash of the concatenation: one state across all parts. */
  XXH3_state_t *h = XXH3_createState();
  XXH3_64bits_reset(h);
  int nCol;
  const gen_col *aCol = tpch_columns(t, &nCol);
  for (int p = 0; p < nPart; p++) {
    tpch_gen *g = tpch_gen_open_part(t, sf, seed, p, nPart);
    tpch_row r;
    while (tpch_gen_next(g, &r)) hash_row(h, aCol, nCol, (const char *)&r);
    tpch_gen_close(g);
  }
  uint64_t v = XXH3_64bits_digest(h);
  XXH3_freeState(h);
  return v;
}

static uint64_t ssb_hash(ssb_table t, double sf, uint64_t seed, int64_t *pnRow) {
  XXH3_state_t *h = XXH3_createState();
  XXH3_64bits_reset(h);
  ssb_gen *g = ssb_gen_open(t, sf, seed);
  int nCol;
  const gen_col *aCol = ssb_columns(t, &nCol);
  ssb_row r;
  int64_t nRow = 0;
  while (ssb_gen_next(g, &r)) {
    hash_row(h, aCol, nCol, (const char *)&r);
    nRow++;
  }
  ssb_gen_close(g);
  uint64_t v = XXH3_64bits_digest(h);
  XXH3_freeState(h);
  if (pnRow) *pnRow = nRow;
  return v;
}

/* Day number of an ISO date via the calendar (-1 if not in it). */
static int day_of(const char *zIso) {
  for (int i = 0; i < GEN_NDAYS; i++)
    if (memcmp(gen_aDay[i].zIso, zIso, 11) == 0) return i;
  return -1;
}

static int64_t cents(double v) {
  return llround(v * 100);
}

static void test_counts_and_determinism(void) {
  const double sf = 0.01;
  const int64_t aWant[TPCH_NTABLE] = {5, 25, 100, 1500, 2000, 8000, 15000, -1};
  for (int t = 0; t < TPCH_NTABLE; t++) {
    int64_t nRow = 0, nRow2 = 0;
    uint64_t h1 = tpch_hash((tpch_table)t, sf, 42, 0, 1, &nRow);
    uint64_t h2 = tpch_hash((tpch_table)t, sf, 42, 0, 1, &nRow2);
    uint64_t h3 = tpch_hash_parts((tpch_table)t, sf, 42, 3);
    const char *zName = tpch_table_name((tpch_table)t);
    CHECK(h1 == h2 && nRow == nRow2, "%s: two runs differ", zName);
    CHECK(h1 == h3, "%s: generated in 3 parts differs from whole", zName);
    CHECK(nRow == tpch_row_count((tpch_table)t, sf, 42), "%s: %lld rows, tpch_row_count says %lld",
          zName, (long long)nRow, (long long)tpch_row_count((tpch_table)t, sf, 42));
    if (aWant[t] >= 0)
      CHECK(nRow == aWant[t], "%s: %lld rows at SF 0.01, want %lld", zName, (long long)nRow,
            (long long)aWant[t]);
    else
      CHECK(nRow >= 15000 && nRow <= 7 * 15000 && fabs((double)nRow / 15000 - 4) < 0.1,
            "lineitem: %lld rows for 15000 orders (want about 60000)", (long long)nRow);
    if (t >= TPCH_SUPPLIER) {
      uint64_t h4 = tpch_hash((tpch_table)t, sf, 43, 0, 1, 0);
      CHECK(h4 != h1, "%s: seeds 42 and 43 give the same rows", zName);
    }
  }
  /* Scale: SF 1 counts from the formulas (lineitem only approximately). */
  CHECK(tpch_row_count(TPCH_ORDERS, 1, 1) == 1500000, "orders at SF 1");
  CHECK(tpch_row_count(TPCH_PARTSUPP, 1, 1) == 800000, "partsupp at SF 1");
  CHECK(tpch_row_count(TPCH_SUPPLIER, 0.1, 1) == 1000, "supplier at SF 0.1");
  CHECK(tpch_row_count(TPCH_CUSTOMER, 0.3, 1) == 45000, "customer at SF 0.3");
  CHECK(tpch_gen_open(TPCH_LINEITEM, 0, 1) == 0, "SF 0 accepted");
  CHECK(tpch_gen_open(TPCH_NTABLE, 1, 1) == 0, "bad table accepted");
}

/* Every lineitem of SF 0.01 against its order, part and partsupp. */
static void test_tpch_domains(void) {
  const double sf = 0.01;
  const int64_t nPart = 2000, nSupp = 100, nCust = 1500;
  /* partsupp pairs, and part prices. */
  static int64_t aPsSupp[2001][4];
  static int64_t aPrice[2001];
  tpch_gen *g = tpch_gen_open(TPCH_PARTSUPP, sf, 7);
  tpch_partsupp ps;
  int64_t nPs = 0;
  while (tpch_gen_next(g, &ps)) {
    CHECK(ps.ps_partkey >= 1 && ps.ps_partkey <= nPart, "ps_partkey %lld",
          (long long)ps.ps_partkey);
    CHECK(ps.ps_suppkey >= 1 && ps.ps_suppkey <= nSupp, "ps_suppkey %lld",
          (long long)ps.ps_suppkey);
    CHECK(ps.ps_availqty >= 1 && ps.ps_availqty <= 9999, "ps_availqty %lld",
          (long long)ps.ps_availqty);
    CHECK(ps.ps_supplycost >= 1.0 && ps.ps_supplycost <= 1000.0, "ps_supplycost %f",
          ps.ps_supplycost);
    int n = (int)strlen(ps.ps_comment);
    CHECK(n >= 49 && n <= 198, "ps_comment length %d", n);
    int j = (int)(nPs % 4);
    aPsSupp[ps.ps_partkey][j] = ps.ps_suppkey;
    for (int k = 0; k < j; k++)
      CHECK(aPsSupp[ps.ps_partkey][k] != ps.ps_suppkey, "partsupp (%lld,%lld) twice",
            (long long)ps.ps_partkey, (long long)ps.ps_suppkey);
    nPs++;
  }
  tpch_gen_close(g);

  g = tpch_gen_open(TPCH_PART, sf, 7);
  tpch_part p;
  while (tpch_gen_next(g, &p)) {
    int64_t want = 90000 + (p.p_partkey / 10) % 20001 + 100 * (p.p_partkey % 1000);
    aPrice[p.p_partkey] = cents(p.p_retailprice);
    CHECK(aPrice[p.p_partkey] == want, "p_retailprice of %lld: %f", (long long)p.p_partkey,
          p.p_retailprice);
    CHECK(p.p_size >= 1 && p.p_size <= 50, "p_size %lld", (long long)p.p_size);
    CHECK(p.p_brand[6] == p.p_mfgr[13], "p_brand %s vs p_mfgr %s", p.p_brand, p.p_mfgr);
    /* five distinct color words */
    char z[64], *save = 0;
    const char *aw[6];
    int nw = 0;
    snprintf(z, sizeof(z), "%s", p.p_name);
    for (char *w = strtok_r(z, " ", &save); w && nw < 6; w = strtok_r(0, " ", &save)) {
      int ok = 0;
      for (int c = 0; c < 92; c++) ok |= strcmp(w, gen_aColor[c]) == 0;
      CHECK(ok, "p_name word %s", w);
      for (int k = 0; k < nw; k++) CHECK(strcmp(aw[k], w) != 0, "p_name repeats %s", w);
      aw[nw++] = w;
    }
    CHECK(nw == 5, "p_name \"%s\" has %d words", p.p_name, nw);
  }
  tpch_gen_close(g);

  tpch_gen *go = tpch_gen_open(TPCH_ORDERS, sf, 7);
  tpch_gen *gl = tpch_gen_open(TPCH_LINEITEM, sf, 7);
  tpch_orders o;
  tpch_lineitem l;
  int bHaveLine = tpch_gen_next(gl, &l);
  int64_t nOrder = 0, prevKey = 0, nLineTotal = 0;
  int aFlagSeen[3] = {0};
  while (tpch_gen_next(go, &o)) {
    nOrder++;
    CHECK(o.o_orderkey > prevKey, "o_orderkey not increasing at %lld", (long long)o.o_orderkey);
    CHECK(((o.o_orderkey >> 3) & 3) == 0, "o_orderkey %lld not sparse", (long long)o.o_orderkey);
    prevKey = o.o_orderkey;
    CHECK(o.o_custkey >= 1 && o.o_custkey <= nCust && o.o_custkey % 3 != 0, "o_custkey %lld",
          (long long)o.o_custkey);
    int od = day_of(o.o_orderdate);
    CHECK(od >= 0 && od <= GEN_DAY_END - 151, "o_orderdate %s", o.o_orderdate);
    CHECK(strncmp(o.o_clerk, "Clerk#", 6) == 0 && atoi(o.o_clerk + 6) >= 1 &&
              atoi(o.o_clerk + 6) <= 10,
          "o_clerk %s", o.o_clerk);
    int64_t total = 0;
    int nLine = 0, nF = 0;
    while (bHaveLine && l.l_orderkey == o.o_orderkey) {
      nLine++;
      nLineTotal++;
      CHECK(l.l_linenumber == nLine, "l_linenumber %lld, want %d", (long long)l.l_linenumber,
            nLine);
      CHECK(l.l_quantity >= 1 && l.l_quantity <= 50, "l_quantity %lld", (long long)l.l_quantity);
      int64_t disc = cents(l.l_discount), tax = cents(l.l_tax);
      CHECK(disc >= 0 && disc <= 10 && l.l_discount == (double)disc / 100, "l_discount %.17g",
            l.l_discount);
      CHECK(tax >= 0 && tax <= 8 && l.l_tax == (double)tax / 100, "l_tax %.17g", l.l_tax);
      CHECK(l.l_partkey >= 1 && l.l_partkey <= nPart, "l_partkey %lld", (long long)l.l_partkey);
      CHECK(cents(l.l_extendedprice) == l.l_quantity * aPrice[l.l_partkey],
            "l_extendedprice %.2f for %lld x part %lld", l.l_extendedprice, (long long)l.l_quantity,
            (long long)l.l_partkey);
      int bPs = 0;
      for (int k = 0; k < 4; k++) bPs |= aPsSupp[l.l_partkey][k] == l.l_suppkey;
      CHECK(bPs, "(l_partkey, l_suppkey) = (%lld, %lld) not in partsupp", (long long)l.l_partkey,
            (long long)l.l_suppkey);
      int sd = day_of(l.l_shipdate), cd = day_of(l.l_commitdate), rd = day_of(l.l_receiptdate);
      CHECK(sd - od >= 1 && sd - od <= 121, "l_shipdate %s for orderdate %s", l.l_shipdate,
            o.o_orderdate);
      CHECK(cd - od >= 30 && cd - od <= 90, "l_commitdate %s for orderdate %s", l.l_commitdate,
            o.o_orderdate);
      CHECK(rd - sd >= 1 && rd - sd <= 30, "l_receiptdate %s for shipdate %s", l.l_receiptdate,
            l.l_shipdate);
      CHECK(strcmp(l.l_shipdate, "1992-01-01") > 0 && strcmp(l.l_receiptdate, "1998-12-31") <= 0,
            "dates out of range: %s %s", l.l_shipdate, l.l_receiptdate);
      if (strcmp(l.l_receiptdate, "1995-06-17") <= 0)
        CHECK(l.l_returnflag[0] == 'R' || l.l_returnflag[0] == 'A', "returnflag %s, receipt %s",
              l.l_returnflag, l.l_receiptdate);
      else
        CHECK(l.l_returnflag[0] == 'N', "returnflag %s, receipt %s", l.l_returnflag,
              l.l_receiptdate);
      aFlagSeen[l.l_returnflag[0] == 'R' ? 0 : l.l_returnflag[0] == 'A' ? 1 : 2] = 1;
      CHECK(l.l_linestatus[0] == (strcmp(l.l_shipdate, "1995-06-17") > 0 ? 'O' : 'F'),
            "linestatus %s, shipdate %s", l.l_linestatus, l.l_shipdate);
      nF += l.l_linestatus[0] == 'F';
      total += (cents(l.l_extendedprice) * (100 - disc) * (100 + tax) + 5000) / 10000;
      int bMode = 0, bInstr = 0;
      for (int k = 0; k < 7; k++) bMode |= strcmp(l.l_shipmode, gen_aShipMode[k]) == 0;
      for (int k = 0; k < 4; k++) bInstr |= strcmp(l.l_shipinstruct, gen_aShipInstruct[k]) == 0;
      CHECK(bMode && bInstr, "shipmode %s / shipinstruct %s", l.l_shipmode, l.l_shipinstruct);
      int n = (int)strlen(l.l_comment);
      CHECK(n >= 10 && n <= 43, "l_comment length %d", n);
      bHaveLine = tpch_gen_next(gl, &l);
    }
    CHECK(nLine >= 1 && nLine <= 7, "order %lld has %d lines", (long long)o.o_orderkey, nLine);
    CHECK(cents(o.o_totalprice) == total, "o_totalprice %.2f, lines sum to %.2f", o.o_totalprice,
          (double)total / 100);
    char want = nF == nLine ? 'F' : nF == 0 ? 'O' : 'P';
    CHECK(o.o_orderstatus[0] == want, "o_orderstatus %s, want %c", o.o_orderstatus, want);
  }
  CHECK(!bHaveLine, "lineitem rows left over after the last order");
  CHECK(nOrder == 15000, "orders %lld", (long long)nOrder);
  CHECK(aFlagSeen[0] && aFlagSeen[1] && aFlagSeen[2], "not all return flags R, A, N seen");
  tpch_gen_close(go);
  tpch_gen_close(gl);

  /* Fixed tables. */
  g = tpch_gen_open(TPCH_NATION, sf, 7);
  tpch_nation n;
  int64_t k = 0;
  while (tpch_gen_next(g, &n)) {
    CHECK(n.n_nationkey == k && strcmp(n.n_name, gen_aNation[k]) == 0 &&
              n.n_regionkey == gen_aNationRegion[k],
          "nation %lld", (long long)k);
    k++;
  }
  tpch_gen_close(g);
  CHECK(strcmp(gen_aNation[24], "UNITED STATES") == 0 && gen_aNationRegion[24] == 1,
        "nation 24 is UNITED STATES in AMERICA");
  CHECK(strcmp(gen_aDay[GEN_DAY_CURRENT].zIso, "1995-06-17") == 0, "CURRENTDATE day %s",
        gen_aDay[GEN_DAY_CURRENT].zIso);
  CHECK(strcmp(gen_aDay[GEN_DAY_END].zIso, "1998-12-31") == 0, "END day %s",
        gen_aDay[GEN_DAY_END].zIso);

  g = tpch_gen_open(TPCH_CUSTOMER, sf, 7);
  tpch_customer c;
  while (tpch_gen_next(g, &c)) {
    CHECK(c.c_acctbal >= -999.99 && c.c_acctbal <= 9999.99, "c_acctbal %f", c.c_acctbal);
    CHECK(atoi(c.c_phone) == c.c_nationkey + 10 && strlen(c.c_phone) == 15, "c_phone %s",
          c.c_phone);
    CHECK(c.c_nationkey >= 0 && c.c_nationkey <= 24, "c_nationkey %lld", (long long)c.c_nationkey);
  }
  tpch_gen_close(g);

  /* Complaints / Recommends: exactly SF*5 suppliers each at SF 1 (10000 suppliers). */
  g = tpch_gen_open(TPCH_SUPPLIER, 1, 7);
  tpch_supplier s;
  int nComplaint = 0, nRecommend = 0;
  while (tpch_gen_next(g, &s)) {
    char *pc = strstr(s.s_comment, "Customer ");
    nComplaint += pc && strstr(pc, "Complaints") != 0;
    nRecommend += pc && strstr(pc, "Recommends") != 0;
  }
  tpch_gen_close(g);
  CHECK(nComplaint == 5 && nRecommend == 5, "Complaints %d, Recommends %d at SF 1 (want 5, 5)",
        nComplaint, nRecommend);
}

static void test_ssb(void) {
  const double sf = 0.01;
  const int64_t aWant[SSB_NTABLE] = {2557, 20, 300, 2000, -1};
  for (int t = 0; t < SSB_NTABLE; t++) {
    int64_t n1, n2;
    uint64_t h1 = ssb_hash((ssb_table)t, sf, 5, &n1), h2 = ssb_hash((ssb_table)t, sf, 5, &n2);
    const char *zName = ssb_table_name((ssb_table)t);
    CHECK(h1 == h2 && n1 == n2, "ssb %s: two runs differ", zName);
    CHECK(n1 == ssb_row_count((ssb_table)t, sf, 5), "ssb %s: count", zName);
    if (aWant[t] >= 0)
      CHECK(n1 == aWant[t], "ssb %s: %lld rows, want %lld", zName, (long long)n1,
            (long long)aWant[t]);
    else
      CHECK(fabs((double)n1 / 15000 - 4) < 0.1, "ssb lineorder: %lld rows for 15000 orders",
            (long long)n1);
  }
  CHECK(ssb_row_count(SSB_PART, 1, 1) == 200000, "ssb part at SF 1");
  CHECK(ssb_row_count(SSB_PART, 2, 1) == 400000, "ssb part at SF 2");
  CHECK(ssb_row_count(SSB_PART, 10, 1) == 800000, "ssb part at SF 10");
  CHECK(ssb_row_count(SSB_CUSTOMER, 1, 1) == 30000, "ssb customer at SF 1");
  CHECK(ssb_row_count(SSB_SUPPLIER, 1, 1) == 2000, "ssb supplier at SF 1");
  CHECK(ssb_table_from_name("date") == SSB_DWDATE, "ssb table 'date'");

  ssb_gen *g = ssb_gen_open(SSB_DWDATE, sf, 5);
  ssb_dwdate d;
  ssb_gen_next(g, &d);
  CHECK(d.d_datekey == 19920101 && strcmp(d.d_date, "January 1, 1992") == 0 &&
            strcmp(d.d_dayofweek, "Wednesday") == 0 && d.d_weeknuminyear == 1 &&
            strcmp(d.d_yearmonth, "Jan1992") == 0 && d.d_holidayfl == 1,
        "first dwdate row %lld %s %s", (long long)d.d_datekey, d.d_date, d.d_dayofweek);
  int64_t last = 0;
  while (ssb_gen_next(g, &d)) last = d.d_datekey;
  CHECK(last == 19981231, "last dwdate %lld", (long long)last);
  ssb_gen_close(g);

  g = ssb_gen_open(SSB_LINEORDER, sf, 5);
  ssb_lineorder lo;
  while (ssb_gen_next(g, &lo)) {
    CHECK(lo.lo_revenue == lo.lo_extendedprice * (100 - lo.lo_discount) / 100, "lo_revenue");
    CHECK(lo.lo_extendedprice == lo.lo_quantity * gen_retail_cents(lo.lo_partkey),
          "lo_extendedprice");
    CHECK(lo.lo_discount >= 0 && lo.lo_discount <= 10 && lo.lo_tax >= 0 && lo.lo_tax <= 8 &&
              lo.lo_quantity >= 1 && lo.lo_quantity <= 50,
          "lo ranges");
    CHECK(lo.lo_commitdate > lo.lo_orderdate && lo.lo_orderdate >= 19920101 &&
              lo.lo_commitdate <= 19981231,
          "lo dates %lld %lld", (long long)lo.lo_orderdate, (long long)lo.lo_commitdate);
    CHECK(lo.lo_custkey >= 1 && lo.lo_custkey <= 300 && lo.lo_suppkey >= 1 && lo.lo_suppkey <= 20 &&
              lo.lo_partkey >= 1 && lo.lo_partkey <= 2000,
          "lo keys");
  }
  ssb_gen_close(g);

  g = ssb_gen_open(SSB_CUSTOMER, sf, 5);
  ssb_customer c;
  while (ssb_gen_next(g, &c)) {
    size_t nn = strlen(c.c_nation) < 9 ? strlen(c.c_nation) : 9;
    CHECK(strlen(c.c_city) == 10 && strncmp(c.c_city, c.c_nation, nn) == 0, "c_city %s of %s",
          c.c_city, c.c_nation);
  }
  ssb_gen_close(g);
  g = ssb_gen_open(SSB_PART, sf, 5);
  ssb_part p;
  while (ssb_gen_next(g, &p)) {
    CHECK(strncmp(p.p_brand1, p.p_category, 7) == 0 && strncmp(p.p_category, p.p_mfgr, 6) == 0 &&
              atoi(p.p_brand1 + 7) >= 1 && atoi(p.p_brand1 + 7) <= 40,
          "part %s %s %s", p.p_mfgr, p.p_category, p.p_brand1);
  }
  ssb_gen_close(g);
}

/* Loads SF 0.001 lineitem through the column descriptors into a temporary
** database and checks what SQLite sees. */
static void test_sqlite_load(void) {
  char zDb[] = "/tmp/test_gen_XXXXXX";
  int fd = mkstemp(zDb);
  if (fd < 0) {
    CHECK(0, "mkstemp failed");
    return;
  }
  close(fd);
  sqlite3 *db = 0;
  sqlite3_stmt *pIns = 0, *pSel = 0;
  CHECK(sqlite3_open(zDb, &db) == SQLITE_OK, "open %s", zDb);
  int nCol;
  const gen_col *aCol = tpch_columns(TPCH_LINEITEM, &nCol);
  char zSql[2048];
  int k = snprintf(zSql, sizeof(zSql), "CREATE TABLE lineitem(");
  for (int i = 0; i < nCol; i++)
    k += snprintf(zSql + k, sizeof(zSql) - (size_t)k, "%s%s %s", i ? "," : "", aCol[i].zName,
                  aCol[i].zType);
  snprintf(zSql + k, sizeof(zSql) - (size_t)k, ")");
  CHECK(sqlite3_exec(db, zSql, 0, 0, 0) == SQLITE_OK, "%s", zSql);
  CHECK(sqlite3_prepare_v2(db, "INSERT INTO lineitem VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1,
                           &pIns, 0) == SQLITE_OK,
        "prepare insert: %s", sqlite3_errmsg(db));
  sqlite3_exec(db, "BEGIN", 0, 0, 0);
  tpch_gen *g = tpch_gen_open(TPCH_LINEITEM, 0.001, 1);
  tpch_lineitem l;
  int64_t nRow = 0, sumQty = 0, sumExt = 0;
  while (pIns && tpch_gen_next(g, &l)) {
    for (int i = 0; i < nCol; i++) {
      const char *p = (const char *)&l + aCol[i].off;
      if (aCol[i].eKind == GEN_INT)
        sqlite3_bind_int64(pIns, i + 1, *(const int64_t *)p);
      else if (aCol[i].eKind == GEN_REAL)
        sqlite3_bind_double(pIns, i + 1, *(const double *)p);
      else
        sqlite3_bind_text(pIns, i + 1, p, -1, SQLITE_STATIC);
    }
    CHECK(sqlite3_step(pIns) == SQLITE_DONE, "insert: %s", sqlite3_errmsg(db));
    sqlite3_reset(pIns);
    nRow++;
    sumQty += l.l_quantity;
    sumExt += cents(l.l_extendedprice);
  }
  tpch_gen_close(g);
  sqlite3_exec(db, "COMMIT", 0, 0, 0);
  CHECK(sqlite3_prepare_v2(db,
                           "SELECT count(*), sum(l_quantity), round(sum(l_extendedprice)*100), "
                           "typeof(l_extendedprice), typeof(l_shipdate) FROM lineitem",
                           -1, &pSel, 0) == SQLITE_OK,
        "prepare select: %s", sqlite3_errmsg(db));
  if (pSel && sqlite3_step(pSel) == SQLITE_ROW) {
    CHECK(sqlite3_column_int64(pSel, 0) == nRow, "count(*) %lld, want %lld",
          (long long)sqlite3_column_int64(pSel, 0), (long long)nRow);
    CHECK(sqlite3_column_int64(pSel, 1) == sumQty, "sum(l_quantity)");
    CHECK(sqlite3_column_int64(pSel, 2) == sumExt, "sum(l_extendedprice)");
    CHECK(strcmp((const char *)sqlite3_column_text(pSel, 3), "real") == 0, "l_extendedprice type");
    CHECK(strcmp((const char *)sqlite3_column_text(pSel, 4), "text") == 0, "l_shipdate type");
  }
  sqlite3_finalize(pSel);
  sqlite3_finalize(pIns);
  sqlite3_close(db);
  unlink(zDb);
}

/* If the gen program is built, load SF 0.001 TPC-H with it and count rows. */
static void test_gen_program(void) {
  const char *zBuild = getenv("BUILD") ? getenv("BUILD") : "build";
  char zProg[512], zDb[] = "/tmp/test_gen_prog_XXXXXX", zCmd[1200];
  snprintf(zProg, sizeof(zProg), "%s/bench/gen", zBuild);
  if (access(zProg, X_OK) != 0) {
    printf("note: %s not built, program test skipped\n", zProg);
    return;
  }
  int fd = mkstemp(zDb);
  if (fd < 0) return;
  close(fd);
  unlink(zDb);
  snprintf(zCmd, sizeof(zCmd), "%s tpch 0.001 %s --quiet", zProg, zDb);
  int rc = system(zCmd);
  CHECK(rc == 0, "%s exited %d", zCmd, rc);
  sqlite3 *db = 0;
  if (rc == 0 && sqlite3_open(zDb, &db) == SQLITE_OK) {
    for (int t = 0; t < TPCH_NTABLE; t++) {
      char zSql[128];
      sqlite3_stmt *p = 0;
      snprintf(zSql, sizeof(zSql), "SELECT count(*) FROM %s", tpch_table_name((tpch_table)t));
      int64_t n = -1;
      if (sqlite3_prepare_v2(db, zSql, -1, &p, 0) == SQLITE_OK && sqlite3_step(p) == SQLITE_ROW)
        n = sqlite3_column_int64(p, 0);
      sqlite3_finalize(p);
      CHECK(n == tpch_row_count((tpch_table)t, 0.001, 1), "gen program: %s has %lld rows",
            tpch_table_name((tpch_table)t), (long long)n);
    }
  }
  sqlite3_close(db);
  unlink(zDb);
}

int main(void) {
  gen_init();
  test_counts_and_determinism();
  test_tpch_domains();
  test_ssb();
  test_sqlite_load();
  test_gen_program();
  if (nFail) {
    printf("test_gen: %d checks failed\n", nFail);
    return 1;
  }
  printf("test_gen: ok\n");
  return 0;
}
