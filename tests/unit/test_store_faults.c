/*
** tests/unit/test_store_faults.c - the store under device faults (device/
** fault.h): a write error, a flush error, a write that never completes, or a
** torn superblock write during a commit must leave the image at the previous
** generation or, when the commit's first superblock copy was already durable,
** at the new one - whole, readable, and never anything in between - and the
** store must go on committing afterwards. Short writes (a prefix of a
** write's blocks on the media, then an error) too.
**
** (Below SQL, so that every write and flush of a commit is reached in turn;
** tests/sql/test_faults.py does the same through csq_fault().)
**
** Method: a scenario (create a table and commit A rows; commit B more rows
** and delete some; commit C more) is run once without faults to count the
** NVM writes and flushes it issues; then once per write k (and per flush k)
** with a fault on exactly that command. After each run the device is closed
** and reopened without faults, and the table must hold exactly one of the
** states the commits could have left.
*/
#include <stdint.h>
#include <string.h>

#include "tests/unit/helpers.h"
#include "device/store/store.h"

#define NA 300
#define NB 250
#define NC 40

static char zImg[300];

/* Rows of the table as (rowid, value) sums: count, sum of values, xor of rowids. */
typedef struct state {
  int64_t n, sum;
  uint64_t x;
} state;

static int append_rows(store_txn *t, store_table *pTab, int64_t v0, int n, char **pzErr) {
  csq_vec a[2];
  csq_vec_init(&a[0]);
  csq_vec_init(&a[1]);
  int64_t r0 = store_txn_new_rowids(t, pTab, n);
  for (int i = 0; i < n; i++) {
    csq_vec_push_int(&a[0], r0 + i);
    csq_vec_push_int(&a[1], v0 + i);
  }
  int rc = 0;
  /* row groups of 100 rows, as a csq table with rowgroup=100 writes them */
  for (int i = 0; i < n && rc == 0; i += 100)
    rc = store_txn_append(t, pTab, a, (uint32_t)i, (uint32_t)(n - i < 100 ? n - i : 100), pzErr);
  csq_vec_free(&a[0]);
  csq_vec_free(&a[1]);
  return rc;
}

/* The table's rows in the latest committed snapshot. -1 if unreadable. */
static int read_state(store *p, dev_queue *q, state *pOut, char **pzErr) {
  store_snap *s = NULL;
  memset(pOut, 0, sizeof(*pOut));
  int rc = store_snapshot(p, q, &s, pzErr);
  if (rc) return rc;
  store_table *pTab = store_snap_table(s, "t");
  if (!pTab) {
    store_snap_unref(s);
    return 1; /* no table: the state before the first commit */
  }
  for (int g = 0; g < pTab->nRg && rc == 0; g++) {
    store_rg *pRg = pTab->apRg[g];
    csq_vec v[2];
    int aiCol[2] = {-1, 0};
    csq_vec_init(&v[0]);
    csq_vec_init(&v[1]);
    rc = store_read_chunks(p, q, pTab, pRg, aiCol, 2, v, pzErr);
    for (uint32_t i = 0; rc == 0 && i < v[0].n; i++) {
      if (store_rg_deleted(pRg, i)) continue;
      pOut->n++;
      pOut->sum += v[1].aVal[i].i;
      pOut->x ^= (uint64_t)v[0].aVal[i].i * 0x9E3779B97F4A7C15ull;
    }
    csq_vec_free(&v[0]);
    csq_vec_free(&v[1]);
  }
  store_snap_unref(s);
  return rc;
}

/* One commit of the scenario (1: create + A rows; 2: B rows, delete rows
** with value % 5 == 0 of the A rows' first group; 3: C rows). 0 or error. */
static int commit_step(test_world *w, int step, char **pzErr) {
  store_txn *t = NULL;
  int rc = store_txn_begin(w->s, w->q, 1000, &t, pzErr);
  if (rc) return rc;
  if (step == 1) {
    store_col c = {"v", "INTEGER", 0};
    rc = store_txn_create_table(t, "t", 1, &c, pzErr);
  }
  store_table *pTab = rc == 0 ? store_txn_table(t, "t") : NULL;
  if (rc == 0 && !pTab) rc = -ENOENT;
  if (rc == 0)
    rc = append_rows(t, pTab, step * 100000, step == 1 ? NA : step == 2 ? NB : NC, pzErr);
  if (rc == 0 && step == 2) {
    for (uint32_t i = 0; i < 100 && rc == 0; i += 5) {
      int iRg = -1;
      uint32_t iRow = 0;
      rc = store_txn_find(t, pTab, (int64_t)i + 1, 0, &iRg, &iRow, pzErr);
      if (rc == 0 && iRg >= 0) rc = store_txn_delete(t, pTab, iRg, iRow, 1, pzErr);
    }
  }
  if (rc) {
    store_txn_rollback(t);
    return rc;
  }
  return store_txn_commit(t, pzErr);
}

/* The state after k successful commits. */
static state expect(int k) {
  state s = {0, 0, 0};
  int n[4] = {0, NA, NB, NC};
  int64_t rowid = 1;
  for (int step = 1; step <= k; step++)
    for (int i = 0; i < n[step]; i++, rowid++) {
      if (step == 1 && k >= 2 && i < 100 && i % 5 == 0) continue; /* deleted by step 2 */
      s.n++;
      s.sum += step * 100000 + i;
      s.x ^= (uint64_t)rowid * 0x9E3779B97F4A7C15ull;
    }
  return s;
}

static int same(state a, state b) {
  return a.n == b.n && a.sum == b.sum && a.x == b.x;
}

/* Run the scenario under zFault; returns how many commits reported success
** (the rest failed). After a failed commit, the step is retried once (the
** fault fires once): the store must keep working. *pnOk counts successes. */
static void run_scenario(const char *zFault, int *pnOk, int *pbFailed) {
  test_world w;
  char *zErr = NULL;
  *pnOk = 0;
  *pbFailed = 0;
  unlink(zImg);
  int rc = test_world_open(&w, zImg, zFault, 1, &zErr);
  if (rc) {
    /* the fault hit the format itself: nothing committed; must reopen as
    ** empty or as a formatted empty image */
    *pbFailed = 1;
    free(zErr);
    test_world_close(&w);
    return;
  }
  for (int step = 1; step <= 3; step++) {
    rc = commit_step(&w, step, &zErr);
    free(zErr);
    zErr = NULL;
    if (rc) {
      *pbFailed = 1;
      /* a failed commit is ambiguous only after its first superblock copy:
      ** the store must tell which by re-reading, never show a mixture */
      state s;
      int rcRead = read_state(w.s, w.q, &s, &zErr);
      if (rcRead == 1) s = expect(0), rcRead = 0;
      nCheck++;
      if (rcRead == 0 && same(s, expect(step))) {
        (*pnOk)++;
        continue; /* it did commit */
      }
      if (rcRead || !same(s, expect(step - 1))) {
        printf("FAIL [%s]: after failed commit %d the store reads %s (%lld rows)\n", zFault, step,
               rcRead ? (zErr ? zErr : "an error") : "a mixture", (long long)s.n);
        nFail++;
        free(zErr);
        zErr = NULL;
        break;
      }
      free(zErr);
      zErr = NULL;
      rc = commit_step(&w, step, &zErr); /* the fault fired once: this must work */
      if (rc) {
        printf("FAIL [%s]: step %d failed again after the fault: %s\n", zFault, step,
               zErr ? zErr : "?");
        nFail++;
        free(zErr);
        zErr = NULL;
        break;
      }
    }
    (*pnOk)++;
  }
  test_world_close(&w);
}

/* Reopen without faults and check the state is one of the allowed ones. */
static void check_image(const char *zFault, int nOk, int bFailed) {
  test_world w;
  char *zErr = NULL;
  int rc = test_world_open(&w, zImg, NULL, 0, &zErr);
  nCheck++;
  if (rc) {
    if (nOk == 0 && bFailed) { /* the format itself failed: an empty image is fine */
      free(zErr);
      test_world_close(&w);
      return;
    }
    printf("FAIL [%s]: reopen failed: %s\n", zFault, zErr ? zErr : "?");
    nFail++;
    free(zErr);
    test_world_close(&w);
    return;
  }
  state s;
  rc = read_state(w.s, w.q, &s, &zErr);
  if (rc == 1) s = expect(0), rc = 0;
  if (rc) {
    printf("FAIL [%s]: committed data unreadable after the fault: %s\n", zFault, zErr ? zErr : "?");
    nFail++;
  } else if (!same(s, expect(nOk))) {
    /* every retried commit succeeded, so the final state must be the last one */
    printf("FAIL [%s]: %lld rows (sum %lld) after %d commits; want %lld rows (sum %lld)\n", zFault,
           (long long)s.n, (long long)s.sum, nOk, (long long)expect(nOk).n,
           (long long)expect(nOk).sum);
    nFail++;
  }
  free(zErr);
  test_world_close(&w);
}

/* A fault on the k-th command, and no retry: the state must be one of the
** states reachable (previous generation, or the failed commit whole). */
static void run_once_check(const char *zFault) {
  test_world w;
  char *zErr = NULL;
  unlink(zImg);
  int rc = test_world_open(&w, zImg, NULL, 1, &zErr);
  int step;
  for (step = 1; step <= 2 && rc == 0; step++) rc = commit_step(&w, step, &zErr);
  test_world_close(&w);
  free(zErr);
  zErr = NULL;
  if (rc) {
    printf("FAIL: setup commits failed\n");
    nFail++;
    return;
  }
  /* now the faulty commit: step 3, on a device opened with the fault */
  rc = test_world_open(&w, zImg, zFault, 0, &zErr);
  int bOk = 0;
  if (rc == 0) bOk = commit_step(&w, 3, &zErr) == 0;
  free(zErr);
  zErr = NULL;
  test_world_close(&w);
  rc = test_world_open(&w, zImg, NULL, 0, &zErr);
  state s;
  nCheck++;
  if (rc == 0) rc = read_state(w.s, w.q, &s, &zErr);
  if (rc) {
    printf("FAIL [%s]: after the faulty commit the image is unreadable: %s\n", zFault,
           zErr ? zErr : "?");
    nFail++;
  } else if (bOk ? !same(s, expect(3)) : !(same(s, expect(2)) || same(s, expect(3)))) {
    printf("FAIL [%s]: commit %s, image has %lld rows (want %s%lld)\n", zFault,
           bOk ? "succeeded" : "failed", (long long)s.n, bOk ? "" : "the old ",
           (long long)expect(bOk ? 3 : 2).n);
    nFail++;
  }
  free(zErr);
  test_world_close(&w);
}

int main(void) {
  snprintf(zImg, sizeof(zImg), "%s/faults.csd", test_tmpdir());
  /* count the writes and flushes of the faulty commit (step 3) */
  test_world w;
  char *zErr = NULL;
  unlink(zImg);
  int rc = test_world_open(&w, zImg, NULL, 1, &zErr);
  for (int step = 1; step <= 2 && rc == 0; step++) rc = commit_step(&w, step, &zErr);
  test_world_close(&w);
  if (rc) {
    printf("FAIL: fault-free scenario: %s\n", zErr ? zErr : "?");
    return 1;
  }
  rc = test_world_open(&w, zImg, NULL, 0, &zErr);
  dev_stats *st = dev_queue_stats(w.q);
  uint64_t w0 = st->cmd_by_opcode[1][CSQ_NVM_WRITE], f0 = st->cmd_by_opcode[1][CSQ_NVM_FLUSH];
  if (rc == 0) rc = commit_step(&w, 3, &zErr);
  uint64_t nW = st->cmd_by_opcode[1][CSQ_NVM_WRITE] - w0;
  uint64_t nF = st->cmd_by_opcode[1][CSQ_NVM_FLUSH] - f0;
  test_world_close(&w);
  if (rc || nW < 3 || nF < 3) {
    printf("FAIL: commit 3 without faults: rc %d, %llu writes, %llu flushes: %s\n", rc,
           (unsigned long long)nW, (unsigned long long)nF, zErr ? zErr : "");
    return 1;
  }
  free(zErr);
  char zSpec[200];
  /* every write and flush of a commit, failing or never completing */
  static const char *aAct[] = {"status:0x280", "status:0x6", "timeout"};
  for (uint64_t k = 1; k <= nW; k++)
    for (int a = 0; a < 3; a++) {
      snprintf(zSpec, sizeof(zSpec), "op=nvm_write,nth=%llu,action=%s", (unsigned long long)k,
               aAct[a]);
      run_once_check(zSpec);
    }
  /* short writes: a prefix of the command's blocks lands, then Write Fault */
  for (uint64_t k = 1; k <= nW; k++)
    for (int seed = 1; seed <= 3; seed++) {
      snprintf(zSpec, sizeof(zSpec), "op=nvm_write,nth=%llu,seed=%d,action=short",
               (unsigned long long)k, seed);
      run_once_check(zSpec);
    }
  for (uint64_t k = 1; k <= nF; k++)
    for (int a = 0; a < 3; a++) {
      snprintf(zSpec, sizeof(zSpec), "op=nvm_flush,nth=%llu,action=%s", (unsigned long long)k,
               aAct[a]);
      run_once_check(zSpec);
    }
  /* a torn superblock write (one byte of the stored copy flipped): the
  ** other copy carries the same generation, so the commit stands */
  for (int lba = 0; lba < 2; lba++) {
    snprintf(zSpec, sizeof(zSpec), "op=nvm_write,lba=%d,nth=1,action=corrupt", lba);
    run_once_check(zSpec);
  }
  /* faults anywhere in the whole life of an image, the step retried after
  ** each: the store keeps working and ends with every commit */
  for (int k = 1; k <= 40; k++) {
    int nOk, bFailed;
    snprintf(zSpec, sizeof(zSpec), "op=nvm_write,nth=%d,action=status:0x280", k);
    run_scenario(zSpec, &nOk, &bFailed);
    check_image(zSpec, nOk, bFailed);
    snprintf(zSpec, sizeof(zSpec), "op=nvm_flush,nth=%d,action=status:0x6", k);
    run_scenario(zSpec, &nOk, &bFailed);
    check_image(zSpec, nOk, bFailed);
  }
  /* reads failing during a commit (delete lookups, row-group merges) */
  for (int k = 1; k <= 10; k++) {
    snprintf(zSpec, sizeof(zSpec), "op=nvm_read,nth=%d,action=status:0x281", k);
    run_once_check(zSpec);
  }
  printf("commit 3 issues %llu writes and %llu flushes\n", (unsigned long long)nW,
         (unsigned long long)nF);
  test_tmp_cleanup();
  return test_done("test_store_faults");
}
