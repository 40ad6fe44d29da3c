/*
** tests/unit/test_device_queue.c - queue pairs: the raw rings (ordering,
** phase wrap, full ring, overflow), and through the driver: full queue
** (-EAGAIN), async submit/reap with cid matching, dev_exec mixed with async
** commands, many threads each with its own queue.
*/
#include <pthread.h>
#include <stdint.h>

#include "device/link/queue.h"
#include "tests/unit/helpers.h"

static void test_raw_ring(void) {
  dev_bell bell = {0, 0, 0};
  dev_qp qp;
  csq_sqe s;
  csq_cqe c;
  int i, lap;
  CHECK_RC(dev_qp_init(&qp, 64, 7, &bell), 0);
  /* Several laps so the phase tag wraps a few times. */
  for (lap = 0; lap < 5; lap++) {
    memset(&s, 0, sizeof(s));
    for (i = 0; i < 64; i++) {
      s.cid = (uint16_t)(lap * 100 + i);
      CHECK_RC(dev_qp_submit(&qp, &s), 0);
    }
    CHECK_RC(dev_qp_submit(&qp, &s), -EAGAIN); /* 64 in the ring: full */
    for (i = 0; i < 64; i++) {
      CHECK(dev_qp_fetch(&qp, &s) == 1);
      CHECK_RC(s.cid, lap * 100 + i); /* in submission order */
    }
    CHECK(dev_qp_fetch(&qp, &s) == 0);
    /* Complete in reverse order: the host sees them in posting order. */
    for (i = 63; i >= 0; i--) {
      memset(&c, 0, sizeof(c));
      c.cid = (uint16_t)(lap * 100 + i);
      c.dw0 = (uint32_t)i;
      dev_qp_post(&qp, &c);
    }
    for (i = 63; i >= 0; i--) {
      CHECK(dev_qp_poll(&qp, &c) == 1);
      CHECK_RC(c.cid, lap * 100 + i);
      CHECK_RC(c.sq_id, 7);
      CHECK(csq_cqe_ok(&c));
    }
    CHECK(dev_qp_poll(&qp, &c) == 0);
  }
  /* Overflow: more completions than slots (late completions), none lost. */
  for (i = 0; i < 100; i++) {
    memset(&c, 0, sizeof(c));
    c.cid = (uint16_t)i;
    dev_qp_post(&qp, &c);
  }
  for (i = 0; i < 100; i++) {
    CHECK(dev_qp_wait(&qp, &c, 1000000) == 0);
    CHECK_RC(c.cid, i);
  }
  CHECK_RC(dev_qp_wait(&qp, &c, 1000), -ETIMEDOUT);
  dev_qp_destroy(&qp);
}

static void test_full_queue(void) {
  dev_options o;
  dev_device *d;
  dev_queue *q;
  csq_sqe s;
  csq_cqe c;
  static uint8_t aBuf[65][4096];
  uint8_t aSeen[65536];
  int i, n;
  dev_options_default(&o);
  o.nQueueDepth = 64;
  d = open_dev(":memory:", &o);
  q = open_queue(d);
  memset(aSeen, 0, sizeof(aSeen));
  for (i = 0; i < 64; i++) {
    memset(&s, 0, sizeof(s));
    s.opcode = CSQ_NVM_READ;
    s.nsid = CSQ_NSID_NVM;
    s.prp1 = (uintptr_t)aBuf[i];
    s.cdw10 = (uint32_t)i;
    CHECK_RC(dev_submit(q, &s), 0);
    CHECK(aSeen[s.cid] == 0); /* cids unique among commands in flight */
    aSeen[s.cid] = 1;
  }
  CHECK_RC(dev_submit(q, &s), -EAGAIN);
  CHECK(strstr(dev_errmsg(q), "queue full") != NULL);
  for (n = 0; n < 64; n++) {
    CHECK_RC(dev_reap(q, &c, 5000), 0);
    CHECK(csq_cqe_ok(&c));
    CHECK(aSeen[c.cid] == 1);
    aSeen[c.cid] = 2;
  }
  CHECK_RC(dev_reap(q, &c, 10), -ETIMEDOUT);
  /* The queue takes commands again once reaped. */
  CHECK_RC(dev_nvm_read(q, 1, 1, aBuf[0]), 0);

  /* dev_exec while async commands are in flight: their completions are
  ** kept for dev_reap. */
  for (i = 0; i < 10; i++) {
    memset(&s, 0, sizeof(s));
    s.opcode = CSQ_NVM_READ;
    s.nsid = CSQ_NSID_NVM;
    s.prp1 = (uintptr_t)aBuf[i];
    s.cdw10 = (uint32_t)i;
    CHECK_RC(dev_submit(q, &s), 0);
  }
  CHECK_RC(dev_nvm_flush(q), 0);
  for (i = 0; i < 10; i++) CHECK_RC(dev_reap(q, &c, 5000), 0);
  CHECK_RC(dev_reap(q, &c, 0), -ETIMEDOUT);
  dev_queue_close(q);
  dev_unref(d);
}

/* Out of order: a large read goes to an engine, small ones run inline. */
static void test_out_of_order(void) {
  dev_device *d = open_dev(":memory:", NULL);
  dev_queue *q = open_queue(d);
  uint8_t *pBig = malloc(16 << 20), small[4096];
  csq_sqe s;
  csq_cqe c;
  uint16_t cidBig;
  int i, posBig = -1;
  memset(&s, 0, sizeof(s));
  s.opcode = CSQ_NVM_READ;
  s.nsid = CSQ_NSID_NVM;
  s.prp1 = (uintptr_t)pBig;
  s.cdw12 = 4095; /* 16 MiB */
  CHECK_RC(dev_submit(q, &s), 0);
  cidBig = s.cid;
  for (i = 0; i < 8; i++) {
    memset(&s, 0, sizeof(s));
    s.opcode = CSQ_NVM_READ;
    s.nsid = CSQ_NSID_NVM;
    s.prp1 = (uintptr_t)small;
    CHECK_RC(dev_submit(q, &s), 0);
  }
  for (i = 0; i < 9; i++) {
    CHECK_RC(dev_reap(q, &c, 5000), 0);
    if (c.cid == cidBig) posBig = i;
  }
  CHECK(posBig >= 0);
  printf("note: the 16 MiB read completed in position %d of 9\n", posBig);
  free(pBig);
  dev_queue_close(q);
  dev_unref(d);
}

typedef struct thr_arg {
  dev_device *d;
  int iThread;
  int nFail;
} thr_arg;

static void *thr_main(void *p) {
  thr_arg *a = p;
  dev_queue *q = NULL;
  uint8_t w[8192], r[8192];
  int i;
  if (dev_queue_open(a->d, &q)) {
    a->nFail++;
    return NULL;
  }
  for (i = 0; i < 1500; i++) {
    uint64_t lba = (uint64_t)a->iThread * 100000 + (uint64_t)(i % 200) * 2;
    fill_pattern(w, sizeof(w), lba * 7 + (uint64_t)i);
    if (dev_nvm_write(q, lba, 2, w) != 0) a->nFail++;
    if (dev_nvm_read(q, lba, 2, r) != 0) a->nFail++;
    if (memcmp(w, r, sizeof(w))) a->nFail++;
  }
  if (dev_queue_stats(q)->commands != 3000) a->nFail++;
  dev_queue_close(q);
  return NULL;
}

static void test_threads(const char *zPath) {
  dev_options o;
  dev_device *d;
  pthread_t t[6];
  thr_arg a[6];
  dev_stats st;
  int i;
  dev_options_default(&o);
  o.bCreate = 1;
  d = open_dev(zPath, &o);
  for (i = 0; i < 6; i++) {
    a[i].d = d;
    a[i].iThread = i;
    a[i].nFail = 0;
    pthread_create(&t[i], NULL, thr_main, &a[i]);
  }
  for (i = 0; i < 6; i++) {
    pthread_join(t[i], NULL);
    CHECK_RC(a[i].nFail, 0);
  }
  dev_device_stats(d, &st);
  CHECK_RC(st.commands, 6 * 3000);
  CHECK_RC(st.cmd_by_opcode[1][CSQ_NVM_READ], 6 * 1500);
  CHECK_RC(st.media_bytes_written, 6 * 1500 * 8192ull);
  dev_unref(d);
}

int main(void) {
  char zPath[300];
  test_raw_ring();
  test_full_queue();
  test_out_of_order();
  test_threads(":memory:");
  snprintf(zPath, sizeof(zPath), "%s/threads.csd", test_tmpdir());
  test_threads(zPath);
  test_tmp_cleanup();
  return test_done("test_device_queue");
}
