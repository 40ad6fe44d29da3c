/*
** tests/unit/test_scan.c - dev_scan end to end on an in-memory emulated
** device: a table written through the store (several row groups, mixed
** columns, deleted rows), scanned with pushed programs, compared with a
** brute-force evaluation in C; zone-map skipping (row_groups_skipped and
** identical results); results larger than the output area; two scans open
** on one queue at once; a program that reads a missing column.
** With CSQ_SCAN_BENCH=1 it also times a scan of 6M integer rows with a
** 1%-selective predicate (information only, never asserted).
** Exit 0 = pass, 77 = skip; one line per failed check.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/driver/driver.h"
#include "device/format/program.h"
#include "device/host/scan.h"
#include "device/store/store.h"
#include "tests/unit/helpers.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define NRG    8
#define RGROWS 5000
#define NROWS  (NRG * RGROWS)

/* Table t(a INTEGER sorted, b mixed, c TEXT). */
static int64_t aA[NROWS];
static int bBNull[NROWS];
static int64_t aB[NROWS];
static char azC[NROWS][16];
static int aDeleted[NROWS];

static dev_device *pDev;
static dev_queue *q;
static store *st;

static int build_table(const char *zName, int nRg, int nPer, int bBench) {
  char *zErr = NULL;
  store_txn *t;
  int rc = store_txn_begin(st, q, 1000, &t, &zErr);
  CHECK(rc == 0, "begin: %s", zErr ? zErr : "");
  if (rc) return rc;
  store_col aCol[3] = {{"a", "INTEGER", 0}, {"b", "", 0}, {"c", "TEXT", 0}};
  rc = store_txn_create_table(t, zName, bBench ? 1 : 3, aCol, &zErr);
  CHECK(rc == 0, "create: %s", zErr ? zErr : "");
  store_table *pTab = store_txn_table(t, zName);
  int nCol = bBench ? 2 : 4;
  csq_vec v[4];
  for (int c = 0; c < 4; c++) csq_vec_init(&v[c]);
  for (int g = 0; g < nRg && rc == 0; g++) {
    for (int c = 0; c < nCol; c++) csq_vec_reset(&v[c]);
    int64_t r0 = store_txn_new_rowids(t, pTab, nPer);
    for (int i = 0; i < nPer; i++) {
      int r = g * nPer + i;
      csq_vec_push_int(&v[0], r0 + i);
      if (bBench) {
        csq_vec_push_int(&v[1], (int64_t)(rnd() % 1000000));
        continue;
      }
      csq_vec_push_int(&v[1], aA[r]);
      if (bBNull[r])
        csq_vec_push_null(&v[2]);
      else if (r % 7 == 3)
        csq_vec_push_real(&v[2], (double)aB[r] + 0.5);
      else
        csq_vec_push_int(&v[2], aB[r]);
      csq_vec_push_bytes(&v[3], CSQ_TEXT, azC[r], (uint32_t)strlen(azC[r]));
    }
    rc = store_txn_append(t, pTab, v, 0, nPer, &zErr);
    CHECK(rc == 0, "append: %s", zErr ? zErr : "");
  }
  /* delete some rows */
  for (int r = 0; r < nRg * nPer && !bBench && rc == 0; r++) {
    if (!aDeleted[r]) continue;
    int iRg;
    uint32_t iRow;
    rc = store_txn_find(t, pTab, r + 1, 0, &iRg, &iRow, &zErr);
    if (rc == 0 && iRg >= 0) rc = store_txn_delete(t, pTab, iRg, iRow, 1, &zErr);
    CHECK(rc == 0, "delete: %s", zErr ? zErr : "");
  }
  for (int c = 0; c < 4; c++) csq_vec_free(&v[c]);
  if (rc == 0) {
    rc = store_txn_commit(t, &zErr);
    CHECK(rc == 0, "commit: %s", zErr ? zErr : "");
  } else {
    store_txn_rollback(t);
  }
  free(zErr);
  return rc;
}

/* Brute force of: a >= lo AND a < hi AND (b > bmin OR b IS NULL) AND c LIKE 'k1%'
** (each part optional) */
typedef struct query {
  int bA, bB, bC;
  int64_t lo, hi, bmin;
} query;

static int want(const query *pq, int r) {
  if (aDeleted[r]) return 0;
  if (pq->bA && !(aA[r] >= pq->lo && aA[r] < pq->hi)) return 0;
  if (pq->bB) {
    if (!bBNull[r]) {
      int64_t b = aB[r];
      /* b is b or b + 0.5 as a real: b + 0.5 > bmin  <=>  b >= bmin */
      int gt = r % 7 == 3 ? b >= pq->bmin : b > pq->bmin;
      if (!gt) return 0;
    }
  }
  if (pq->bC && strncmp(azC[r], "k1", 2) != 0 && strncmp(azC[r], "K1", 2) != 0) return 0;
  return 1;
}

static uint8_t *make_prog(const query *pq, size_t *pn, int bMissing) {
  csq_pb *b = csq_pb_new();
  int sR = csq_pb_input(b, 0), sA = csq_pb_input(b, 1), sB = csq_pb_input(b, 2),
      sC = csq_pb_input(b, 3);
  csq_pb_output(b, sR);
  csq_pb_output(b, sA);
  csq_pb_output(b, sB);
  csq_pb_output(b, sC);
  if (bMissing) csq_pb_output(b, csq_pb_input(b, 9));
  if (pq->bA) {
    csq_pb_clause(b);
    csq_pb_term(b, CSQ_OP_GE, 0, sA, csq_pb_const_int(b, pq->lo), 0, 0);
    csq_pb_clause(b);
    csq_pb_term(b, CSQ_OP_LT, 0, sA, csq_pb_const_int(b, pq->hi), 0, 0);
  }
  if (pq->bB) {
    csq_pb_clause(b);
    csq_pb_term(b, CSQ_OP_GT, 0, sB, csq_pb_const_int(b, pq->bmin), 0, 0);
    csq_pb_term(b, CSQ_OP_ISNULL, 0, sB, 0, 0, 0);
  }
  if (pq->bC) {
    csq_pb_clause(b);
    csq_pb_term(b, CSQ_OP_LIKE, 0, sC, csq_pb_const_bytes(b, CSQ_TEXT, "k1%", 3), 0, 0);
  }
  uint8_t *p = NULL;
  int rc = csq_pb_finish(b, &p, pn);
  CHECK(rc == 0, "finish %d", rc);
  csq_pb_free(b);
  return p;
}

/* Run query pq over the snapshot's table and compare. */
static void run_query(store_table *pTab, const query *pq, int nSkipWant) {
  size_t n;
  uint8_t *p = make_prog(pq, &n, 0);
  dev_scan *s;
  char *zErr = NULL;
  uint64_t skip0 = dev_queue_stats(q)->row_groups_skipped;
  int rc = dev_scan_open(q, st, pTab, pTab->apRg, pTab->nRg, p, n, &s, &zErr);
  CHECK(rc == 0, "open: %s", zErr ? zErr : "");
  free(p);
  if (rc) {
    free(zErr);
    return;
  }
  csq_vec v[4];
  for (int c = 0; c < 4; c++) csq_vec_init(&v[c]);
  static char aSeen[NROWS];
  memset(aSeen, 0, sizeof(aSeen));
  int nGot = 0, nBad = 0;
  int64_t last = 0;
  for (;;) {
    uint32_t nr;
    rc = dev_scan_next(s, v, &nr, &zErr);
    CHECK(rc == 0, "next: %s", zErr ? zErr : "");
    if (rc || nr == 0) break;
    for (uint32_t i = 0; i < nr; i++) {
      int64_t rid = v[0].aVal[i].i;
      int r = (int)rid - 1;
      if (r < 0 || r >= NROWS || aSeen[r] || rid <= last) {
        nBad++;
        continue;
      }
      last = rid;
      aSeen[r] = 1;
      nGot++;
      int ok = v[1].aCls[i] == CSQ_INT && v[1].aVal[i].i == aA[r];
      if (bBNull[r])
        ok &= v[2].aCls[i] == CSQ_NULL;
      else if (r % 7 == 3)
        ok &= v[2].aCls[i] == CSQ_REAL && v[2].aVal[i].r == (double)aB[r] + 0.5;
      else
        ok &= v[2].aCls[i] == CSQ_INT && v[2].aVal[i].i == aB[r];
      ok &= v[3].aCls[i] == CSQ_TEXT && v[3].aLen[i] == strlen(azC[r]) &&
            memcmp(csq_vec_bytes(&v[3], i), azC[r], v[3].aLen[i]) == 0;
      if (!ok) nBad++;
    }
  }
  int nWant = 0, nMiss = 0;
  for (int r = 0; r < NROWS; r++) {
    int w = want(pq, r);
    nWant += w;
    if (w && !aSeen[r]) nMiss++;
    if (!w && aSeen[r]) nBad++;
  }
  CHECK(nBad == 0 && nMiss == 0 && nGot == nWant,
        "query a[%lld,%lld) b>%lld c: %d/%d/%d: got %d want %d, %d wrong, %d missing",
        (long long)pq->lo, (long long)pq->hi, (long long)pq->bmin, pq->bA, pq->bB, pq->bC, nGot,
        nWant, nBad, nMiss);
  uint64_t nSkip = dev_queue_stats(q)->row_groups_skipped - skip0;
  if (nSkipWant >= 0)
    CHECK((int)nSkip == nSkipWant, "row groups skipped %llu, want %d", (unsigned long long)nSkip,
          nSkipWant);
  dev_scan_close(s);
  for (int c = 0; c < 4; c++) csq_vec_free(&v[c]);
  free(zErr);
}

static void bench(void) {
  char *zErr = NULL;
  int nRg = 92, nPer = 65536; /* 6.03M rows */
  double t0 = now();
  if (build_table("big", nRg, nPer, 1)) return;
  double t1 = now();
  store_snap *snap;
  store_snapshot(st, q, &snap, &zErr);
  store_table *pTab = store_snap_table(snap, "big");
  csq_pb *b = csq_pb_new();
  int sR = csq_pb_input(b, 0), sA = csq_pb_input(b, 1);
  csq_pb_output(b, sR);
  csq_pb_output(b, sA);
  csq_pb_term(b, CSQ_OP_LT, 0, sA, csq_pb_const_int(b, 10000), 0, 0); /* 1% */
  uint8_t *p;
  size_t n;
  csq_pb_finish(b, &p, &n);
  csq_pb_free(b);
  dev_stats *ps = dev_queue_stats(q);
  uint64_t m0 = ps->media_bytes_read, h0 = ps->bytes_to_host;
  double t2 = now();
  dev_scan *s;
  int rc = dev_scan_open(q, st, pTab, pTab->apRg, pTab->nRg, p, n, &s, &zErr);
  CHECK(rc == 0, "bench open: %s", zErr ? zErr : "");
  csq_vec v[2];
  csq_vec_init(&v[0]);
  csq_vec_init(&v[1]);
  uint64_t nOut = 0, nRows = (uint64_t)nRg * nPer;
  for (;;) {
    uint32_t nr;
    if (dev_scan_next(s, v, &nr, &zErr) || nr == 0) break;
    nOut += nr;
  }
  double t3 = now();
  dev_scan_close(s);
  printf("bench: wrote %llu rows in %.2fs; scan with a 1%% predicate: %llu rows out, %.3fs, "
         "%.1f M rows/s, media %.1f MB, to host %.2f MB\n",
         (unsigned long long)nRows, t1 - t0, (unsigned long long)nOut, t3 - t2,
         nRows / (t3 - t2) / 1e6, (ps->media_bytes_read - m0) / 1e6,
         (ps->bytes_to_host - h0) / 1e6);
  CHECK(nOut > nRows / 200 && nOut < nRows / 50, "selectivity %llu", (unsigned long long)nOut);
  csq_vec_free(&v[0]);
  csq_vec_free(&v[1]);
  free(p);
  store_snap_unref(snap);
  free(zErr);
}

int main(void) {
  char *zErr = NULL;
  dev_options o;
  dev_options_default(&o);
  int rc = dev_open(":memory:", &o, &pDev, &zErr);
  if (rc) {
    printf("cannot open an in-memory device: %s\n", zErr ? zErr : "?");
    return 77;
  }
  if (dev_queue_open(pDev, &q)) {
    printf("cannot open a queue\n");
    return 1;
  }
  rc = store_open(pDev, q, 1, &st, &zErr);
  CHECK(rc == 0, "store_open: %s", zErr ? zErr : "");
  if (rc) return 1;
  for (int r = 0; r < NROWS; r++) {
    aA[r] = r * 3; /* sorted: zone maps separate row groups */
    bBNull[r] = rnd() % 10 == 0;
    aB[r] = (int64_t)(rnd() % 1000) - 500;
    snprintf(azC[r], sizeof(azC[r]), "%c%d", "kKz"[rnd() % 3], (int)(rnd() % 30));
    aDeleted[r] = rnd() % 13 == 0;
  }
  if (build_table("t", NRG, RGROWS, 0)) return 1;
  store_snap *snap;
  rc = store_snapshot(st, q, &snap, &zErr);
  CHECK(rc == 0, "snapshot: %s", zErr ? zErr : "");
  store_table *pTab = store_snap_table(snap, "t");
  CHECK(pTab && pTab->nRg == NRG, "table with %d row groups", pTab ? pTab->nRg : -1);
  if (!pTab) return 1;

  query q0 = {0, 0, 0, 0, 0, 0};
  run_query(pTab, &q0, 0); /* everything */
  /* a range inside row group 2 only: 7 skipped */
  query q1 = {1, 0, 0, 3 * (2 * RGROWS + 10), 3 * (2 * RGROWS + 900), 0};
  run_query(pTab, &q1, NRG - 1);
  /* spanning row groups 3-5 */
  query q2 = {1, 1, 0, 3 * (3 * RGROWS + 4000), 3 * (5 * RGROWS + 100), 100};
  run_query(pTab, &q2, NRG - 3);
  query q3 = {0, 1, 1, 0, 0, -200};
  run_query(pTab, &q3, 0);
  query q4 = {1, 1, 1, -100, 3 * NROWS + 5, 250};
  run_query(pTab, &q4, 0);
  query q5 = {1, 0, 0, 3 * NROWS, 3 * NROWS + 100, 0}; /* nothing: all skipped */
  run_query(pTab, &q5, NRG);
  for (int i = 0; i < 20; i++) {
    query qr = {(int)(rnd() % 2),
                (int)(rnd() % 2),
                (int)(rnd() % 2),
                (int64_t)(rnd() % (3 * NROWS)),
                0,
                (int64_t)(rnd() % 1000) - 500};
    qr.hi = qr.lo + (int64_t)(rnd() % (3 * NROWS / 2));
    run_query(pTab, &qr, -1);
  }

  /* two scans open on one queue, interleaved */
  {
    size_t n1, n2;
    uint8_t *p1 = make_prog(&q0, &n1, 0), *p2 = make_prog(&q3, &n2, 0);
    dev_scan *s1, *s2;
    CHECK(dev_scan_open(q, st, pTab, pTab->apRg, pTab->nRg, p1, n1, &s1, &zErr) == 0, "open 1");
    CHECK(dev_scan_open(q, st, pTab, pTab->apRg, pTab->nRg, p2, n2, &s2, &zErr) == 0, "open 2");
    csq_vec v[4];
    for (int c = 0; c < 4; c++) csq_vec_init(&v[c]);
    uint64_t t1 = 0, t2 = 0;
    int bDone1 = 0, bDone2 = 0;
    while (!bDone1 || !bDone2) {
      uint32_t nr;
      if (!bDone1) {
        rc = dev_scan_next(s1, v, &nr, &zErr);
        CHECK(rc == 0, "next 1: %s", zErr ? zErr : "");
        if (rc || nr == 0)
          bDone1 = 1;
        else
          t1 += nr;
      }
      if (!bDone2) {
        rc = dev_scan_next(s2, v, &nr, &zErr);
        CHECK(rc == 0, "next 2: %s", zErr ? zErr : "");
        if (rc || nr == 0)
          bDone2 = 1;
        else
          t2 += nr;
      }
    }
    uint64_t w1 = 0, w2 = 0;
    for (int r = 0; r < NROWS; r++) {
      w1 += want(&q0, r);
      w2 += want(&q3, r);
    }
    CHECK(t1 == w1 && t2 == w2, "interleaved scans: %llu/%llu vs %llu/%llu", (unsigned long long)t1,
          (unsigned long long)t2, (unsigned long long)w1, (unsigned long long)w2);
    dev_scan_close(s1);
    dev_scan_close(s2);
    for (int c = 0; c < 4; c++) csq_vec_free(&v[c]);
    free(p1);
    free(p2);
  }
  /* a program reading a column the table does not have */
  {
    size_t n;
    uint8_t *p = make_prog(&q0, &n, 1);
    dev_scan *s;
    free(zErr);
    zErr = NULL;
    rc = dev_scan_open(q, st, pTab, pTab->apRg, pTab->nRg, p, n, &s, &zErr);
    CHECK(rc != 0 && zErr && strstr(zErr, "'t'"), "missing column: rc %d %s", rc, zErr ? zErr : "");
    free(p);
    free(zErr);
    zErr = NULL;
  }
  /* results far larger than the output area estimate (a constant 300-byte
  ** text encodes to a few bytes): the device returns parts, the scan
  ** continues each row group from nextRow */
  {
    store_txn *t;
    char zLong[301];
    memset(zLong, 'x', 300);
    zLong[300] = 0;
    zLong[0] = 'L';
    rc = store_txn_begin(st, q, 1000, &t, &zErr);
    store_col aCol[1] = {{"w", "TEXT", 0}};
    if (rc == 0) rc = store_txn_create_table(t, "wide", 1, aCol, &zErr);
    store_table *pW = store_txn_table(t, "wide");
    csq_vec v[2];
    csq_vec_init(&v[0]);
    csq_vec_init(&v[1]);
    for (int g = 0; g < 2 && rc == 0; g++) {
      csq_vec_reset(&v[0]);
      csq_vec_reset(&v[1]);
      int64_t r0 = store_txn_new_rowids(t, pW, 5000);
      for (int i = 0; i < 5000; i++) {
        csq_vec_push_int(&v[0], r0 + i);
        csq_vec_push_bytes(&v[1], CSQ_TEXT, zLong, 300);
      }
      rc = store_txn_append(t, pW, v, 0, 5000, &zErr);
    }
    if (rc == 0) rc = store_txn_commit(t, &zErr);
    CHECK(rc == 0, "wide table: %s", zErr ? zErr : "");
    store_snap *snap2;
    store_snapshot(st, q, &snap2, &zErr);
    pW = store_snap_table(snap2, "wide");
    csq_pb *b = csq_pb_new();
    csq_pb_output(b, csq_pb_input(b, 0));
    int sW = csq_pb_input(b, 1);
    csq_pb_output(b, sW);
    csq_pb_term(b, CSQ_OP_LIKE, 0, sW, csq_pb_const_bytes(b, CSQ_TEXT, "l%", 2), 0, 0);
    uint8_t *p;
    size_t n;
    csq_pb_finish(b, &p, &n);
    csq_pb_free(b);
    dev_scan *s;
    rc = dev_scan_open(q, st, pW, pW->apRg, pW->nRg, p, n, &s, &zErr);
    CHECK(rc == 0, "open wide: %s", zErr ? zErr : "");
    int nBatch = 0, nRows = 0, bOk = 1;
    int64_t last = 0;
    while (rc == 0) {
      uint32_t nr;
      rc = dev_scan_next(s, v, &nr, &zErr);
      CHECK(rc == 0, "next wide: %s", zErr ? zErr : "");
      if (rc || nr == 0) break;
      nBatch++;
      for (uint32_t i = 0; i < nr; i++) {
        bOk &= v[0].aVal[i].i == last + 1 && v[1].aLen[i] == 300 &&
               memcmp(csq_vec_bytes(&v[1], i), zLong, 300) == 0;
        last = v[0].aVal[i].i;
      }
      nRows += nr;
    }
    CHECK(nRows == 10000 && bOk && nBatch > 2, "wide: %d rows in %d batches, ok %d", nRows, nBatch,
          bOk);
    printf("wide: %d rows came back in %d parts\n", nRows, nBatch);
    dev_scan_close(s);
    free(p);
    csq_vec_free(&v[0]);
    csq_vec_free(&v[1]);
    store_snap_unref(snap2);
  }
  printf("scan: %d row groups of %d rows, %llu skipped in total\n", NRG, RGROWS,
         (unsigned long long)dev_queue_stats(q)->row_groups_skipped);
  store_snap_unref(snap);
  if (getenv("CSQ_SCAN_BENCH")) bench();
  store_unref(st);
  dev_queue_close(q);
  dev_unref(pDev);
  free(zErr);
  printf("%d failed\n", nFail);
  return nFail ? 1 : 0;
}
