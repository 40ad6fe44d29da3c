/*
** tests/unit/test_store_2pc.c - the store's two-step commit over two images
** (device/store/FORMAT.md, "Commit protocol"; store.h, store_txn_prepare), below
** SQL, and the cheap statement-start superblock check.
**
** Image A decides, image B is prepared. Each transaction appends rows to
** table t on both images and raises the counter of table d on A (the
** decision). Checked:
**   - the whole sequence (prepare B, commit A, flip B) in one process;
**   - a process that stops (_exit) after the prepare, or after the
**     decision: reopening B settles it from A's media, old or new like A;
**   - a fault on each write and each flush of either image during the
**     sequence, handled as vtab/stripe.c does (settle B after a failed
**     decision, leave a failed flip): after reopening, A and B agree;
**   - a decider that cannot be read: B refuses to open, naming A's path,
**     until A is back;
**   - store_snapshot of an unchanged image moves 128 bytes to the host, and
**     still sees a commit made by another process.
** The child processes are this program again (argv[1] = "child").
*/
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tests/unit/helpers.h"
#include "device/store/store.h"

static char zA[300], zB[300];

/* count and sum of t's values in the latest snapshot; -1 count on error */
typedef struct state {
  int64_t n, sum;
} state;

static state read_state(test_world *w) {
  state r = {-1, 0};
  store_snap *s = NULL;
  char *zErr = NULL;
  if (store_snapshot(w->s, w->q, &s, &zErr)) {
    printf("note: snapshot: %s\n", zErr ? zErr : "?");
    free(zErr);
    return r;
  }
  store_table *pTab = store_snap_table(s, "t");
  r.n = 0;
  for (int g = 0; pTab && g < pTab->nRg; g++) {
    csq_vec v;
    int iCol = 0;
    csq_vec_init(&v);
    if (store_read_chunks(w->s, w->q, pTab, pTab->apRg[g], &iCol, 1, &v, &zErr)) {
      free(zErr);
      zErr = NULL;
      r.n = -1;
    }
    for (uint32_t i = 0; r.n >= 0 && i < pTab->apRg[g]->nRow; i++) {
      if (store_rg_deleted(pTab->apRg[g], i)) continue;
      r.n++;
      r.sum += v.aVal[i].i;
    }
    csq_vec_free(&v);
  }
  store_snap_unref(s);
  return r;
}

static int append(store_txn *t, int64_t v0, int n, char **pzErr) {
  store_table *pTab = store_txn_table(t, "t");
  if (!pTab) return -ENOENT;
  csq_vec a[2];
  csq_vec_init(&a[0]);
  csq_vec_init(&a[1]);
  int64_t r0 = store_txn_new_rowids(t, pTab, n);
  for (int i = 0; i < n; i++) {
    csq_vec_push_int(&a[0], r0 + i);
    csq_vec_push_int(&a[1], v0 + i);
  }
  int rc = store_txn_append(t, pTab, a, 0, (uint32_t)n, pzErr);
  csq_vec_free(&a[0]);
  csq_vec_free(&a[1]);
  return rc;
}

/* Create t on both images and d on A. */
static int setup(char **pzErr) {
  test_world a, b;
  store_col c = {"v", "INTEGER", 0};
  int rc = test_world_open(&a, zA, NULL, 1, pzErr);
  if (rc == 0) rc = test_world_open(&b, zB, NULL, 1, pzErr);
  for (int k = 0; k < 2 && rc == 0; k++) {
    test_world *w = k ? &b : &a;
    store_txn *t = NULL;
    rc = store_txn_begin(w->s, w->q, 1000, &t, pzErr);
    if (rc) break;
    rc = store_txn_create_table(t, "t", 1, &c, pzErr);
    if (rc == 0 && k == 0) rc = store_txn_create_table(t, "d", 1, &c, pzErr);
    if (rc == 0) rc = append(t, 0, 10, pzErr);
    if (rc)
      store_txn_rollback(t);
    else
      rc = store_txn_commit(t, pzErr);
  }
  test_world_close(&a);
  test_world_close(&b);
  return rc;
}

/* One two-step transaction i: 20 rows with values 1000*i.. on each image.
** stop 1: _exit right after B's prepare; 2: right after A's commit. Errors
** are handled as vtab/stripe.c does. 0 when A committed (B flipped or left
** to be flipped), else an error. */
static int two_step(test_world *a, test_world *b, int i, int stop, char **pzErr) {
  store_txn *tA = NULL, *tB = NULL;
  int rc = store_txn_begin(b->s, b->q, 1000, &tB, pzErr);
  if (rc == 0) rc = store_txn_begin(a->s, a->q, 1000, &tA, pzErr);
  if (rc == 0) rc = append(tB, 1000 * i, 20, pzErr);
  if (rc == 0) rc = append(tA, 1000 * i, 20, pzErr);
  store_decision dec;
  memset(&dec, 0, sizeof(dec));
  if (rc == 0) {
    store_table *pD = store_txn_table(tA, "d");
    dec.seq = pD->nextRowid + 1;
    store_txn_saw_rowid(tA, pD, dec.seq - 1);
    store_image_id(a->s, dec.uuid);
    dec.zPath = dev_path(a->d);
    dec.zTable = "d";
    rc = store_txn_prepare(tB, &dec, pzErr);
  }
  if (rc) {
    if (tA) store_txn_rollback(tA);
    if (tB) store_txn_rollback(tB); /* a failed prepare: an open, unprepared txn */
    return rc;
  }
  if (stop == 1) _exit(0);
  rc = store_txn_commit(tA, pzErr);
  if (stop == 2) _exit(0);
  if (rc) {
    int bCommitted = 0;
    char *zErr = NULL;
    store_txn_settle(tB, &bCommitted, &zErr);
    free(zErr);
    return rc;
  }
  char *zErr = NULL;
  store_txn_commit(tB, &zErr); /* a failed flip is redone by the next reader */
  free(zErr);
  return 0;
}

/* The program itself, as a child: "child i stop" runs two_step. */
static int run_child(int i, int stop) {
  char zI[16], zStop[16];
  snprintf(zI, sizeof(zI), "%d", i);
  snprintf(zStop, sizeof(zStop), "%d", stop);
  pid_t pid = fork();
  if (pid == 0) {
    char *argv[] = {"test_store_2pc", "child", zA, zB, zI, zStop, NULL};
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int child_main(char **argv) {
  snprintf(zA, sizeof(zA), "%s", argv[2]);
  snprintf(zB, sizeof(zB), "%s", argv[3]);
  test_world a, b;
  char *zErr = NULL;
  if (test_world_open(&a, zA, NULL, 0, &zErr) || test_world_open(&b, zB, NULL, 0, &zErr)) {
    printf("child: %s\n", zErr ? zErr : "open failed");
    return 3;
  }
  int rc = two_step(&a, &b, atoi(argv[4]), atoi(argv[5]), &zErr);
  if (rc) printf("child: %s\n", zErr ? zErr : "two_step failed");
  return rc ? 4 : 0;
}

/* The version field of B's superblock copy 0, as on the media. */
static uint32_t sb_version(test_world *w) {
  uint8_t *a = NULL;
  if (posix_memalign((void **)&a, 4096, 4096)) return 0;
  uint32_t v = 0;
  if (dev_nvm_read(w->q, 0, 1, a) == 0) memcpy(&v, a + 8, 4);
  free(a);
  return v;
}

/* Reopen both images fresh (nothing cached) and read their states. */
static void reopen_states(state *pA, state *pB, uint32_t *pVerB) {
  test_world a, b;
  char *zErr = NULL;
  pA->n = pB->n = -1;
  if (test_world_open(&a, zA, NULL, 0, &zErr) == 0) {
    *pA = read_state(&a);
    test_world_close(&a);
  }
  free(zErr);
  zErr = NULL;
  if (test_world_open(&b, zB, NULL, 0, &zErr) == 0) {
    *pB = read_state(&b);
    if (pVerB) *pVerB = sb_version(&b);
    test_world_close(&b);
  } else {
    printf("note: reopening B: %s\n", zErr ? zErr : "?");
  }
  free(zErr);
}

static state plus(state s, int i) {
  s.n += 20;
  for (int k = 0; k < 20; k++) s.sum += 1000 * i + k;
  return s;
}

int main(int argc, char **argv) {
  if (argc == 6 && strcmp(argv[1], "child") == 0) return child_main(argv);
  snprintf(zA, sizeof(zA), "%s/a.csd", test_tmpdir());
  snprintf(zB, sizeof(zB), "%s/b.csd", test_tmpdir());
  char *zErr = NULL;
  int rc = setup(&zErr);
  CHECK_RC(rc, 0);
  if (rc) {
    printf("setup: %s\n", zErr ? zErr : "");
    return 1;
  }
  state sA, sB;
  reopen_states(&sA, &sB, NULL);
  state want = {10, 45};
  CHECK_RC(sA.n, want.n);
  CHECK_RC(sB.sum, want.sum);
  int i = 1;

  /* the whole sequence in one process */
  {
    test_world a, b;
    CHECK_RC(test_world_open(&a, zA, NULL, 0, &zErr), 0);
    CHECK_RC(test_world_open(&b, zB, NULL, 0, &zErr), 0);
    CHECK_RC(two_step(&a, &b, i, 0, &zErr), 0);
    want = plus(want, i++);
    state x = read_state(&a), y = read_state(&b);
    CHECK_RC(x.n, want.n);
    CHECK_RC(y.n, want.n);
    CHECK_RC(y.sum, want.sum);
    CHECK_RC(sb_version(&b), 1);
    test_world_close(&a);
    test_world_close(&b);
  }

  /* a process that stops after the prepare (old), after the decision (new) */
  for (int stop = 1; stop <= 2; stop++) {
    CHECK_RC(run_child(i, stop), 0);
    if (stop == 2) want = plus(want, i);
    i++;
    uint32_t ver = 0;
    reopen_states(&sA, &sB, &ver);
    CHECK_RC(sA.n, want.n);
    CHECK_RC(sA.sum, want.sum);
    CHECK_RC(sB.n, want.n);
    CHECK_RC(sB.sum, want.sum);
    CHECK_RC(ver, 1); /* settled on the media when B was opened */
  }

  /* a decider that cannot be read; B waits for it */
  {
    CHECK_RC(run_child(i, 2), 0);
    want = plus(want, i++);
    char zAway[320];
    snprintf(zAway, sizeof(zAway), "%s.away", zA);
    CHECK_RC(rename(zA, zAway), 0);
    test_world b;
    rc = test_world_open(&b, zB, NULL, 0, &zErr);
    CHECK(rc != 0 && zErr && strstr(zErr, zA) && strstr(zErr, "prepared commit"),
          "open B without its decider: %d %s", rc, zErr ? zErr : "");
    free(zErr);
    zErr = NULL;
    test_world_close(&b);
    CHECK_RC(rename(zAway, zA), 0);
    reopen_states(&sA, &sB, NULL);
    CHECK_RC(sB.n, want.n);
    CHECK_RC(sA.sum, want.sum);
  }

  /* a fault on each write and flush of either image, in one process */
  static const char *const azOp[] = {"nvm_write", "nvm_flush"};
  int nRun = 0, nOld = 0, nNew = 0;
  for (int img = 0; img < 2; img++) {
    for (int o = 0; o < 2; o++) {
      for (int nth = 1;; nth++) {
        test_world a, b;
        char zSpec[80];
        snprintf(zSpec, sizeof(zSpec), "op=%s,nth=%d,action=status:0x280", azOp[o], nth);
        CHECK_RC(test_world_open(&a, zA, NULL, 0, &zErr), 0);
        CHECK_RC(test_world_open(&b, zB, NULL, 0, &zErr), 0);
        CHECK_RC(dev_set_fault(img ? b.d : a.d, zSpec, NULL, NULL), 0);
        dev_stats st0 = *dev_queue_stats(img ? b.q : a.q);
        rc = two_step(&a, &b, i, 0, &zErr);
        free(zErr);
        zErr = NULL;
        dev_set_fault(img ? b.d : a.d, NULL, NULL, NULL);
        int bFired = dev_queue_stats(img ? b.q : a.q)->errors > st0.errors;
        test_world_close(&a);
        test_world_close(&b);
        reopen_states(&sA, &sB, NULL);
        state next = plus(want, i);
        int bOld = sA.n == want.n && sA.sum == want.sum && sB.n == want.n && sB.sum == want.sum;
        int bNew = sA.n == next.n && sA.sum == next.sum && sB.n == next.n && sB.sum == next.sum;
        CHECK(bOld || bNew, "%s on %s: A %lld/%lld, B %lld/%lld, old %lld/%lld", zSpec,
              img ? "B" : "A", (long long)sA.n, (long long)sA.sum, (long long)sB.n,
              (long long)sB.sum, (long long)want.n, (long long)want.sum);
        CHECK(rc != 0 || bNew, "%s on %s: committed, yet old", zSpec, img ? "B" : "A");
        if (bNew) want = next;
        i++;
        if (!bFired || nth > 40) break;
        nRun++;
        nOld += !bNew;
        nNew += bNew;
      }
    }
  }
  printf("faults: %d runs with a fault, %d left the old state, %d the new one\n", nRun, nOld, nNew);
  CHECK(nOld > 4 && nNew > 4, "both outcomes");

  /* statement-start check: 128 bytes to the host while nothing changed,
  ** and a commit by another process is still seen */
  {
    test_world b;
    CHECK_RC(test_world_open(&b, zB, NULL, 0, &zErr), 0);
    store_snap *s = NULL;
    dev_stats *ps = dev_queue_stats(b.q);
    uint64_t h0 = ps->bytes_to_host;
    CHECK_RC(store_snapshot(b.s, b.q, &s, &zErr), 0);
    CHECK_RC(ps->bytes_to_host - h0, 2 * 64);
    uint64_t gen = s->gen;
    store_snap_unref(s);
    CHECK_RC(run_child(i, 0), 0);
    want = plus(want, i++);
    h0 = ps->bytes_to_host;
    CHECK_RC(store_snapshot(b.s, b.q, &s, &zErr), 0);
    CHECK(ps->bytes_to_host - h0 > 8192, "a changed image is read whole (%llu bytes)",
          (unsigned long long)(ps->bytes_to_host - h0));
    CHECK_RC(s->gen, gen + 1);
    store_snap_unref(s);
    state y = read_state(&b);
    CHECK_RC(y.n, want.n);
    CHECK_RC(y.sum, want.sum);
    test_world_close(&b);
  }

  test_tmp_cleanup();
  return test_done("test_store_2pc");
}
