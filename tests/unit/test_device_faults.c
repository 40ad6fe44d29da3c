/*
** tests/unit/test_device_faults.c - fault injection (device/emu/fault.h):
** spec parse errors reported by dev_open, injected statuses, timeouts (the
** driver's timeout fires, the queue stays usable), late completions ignored,
** silent corruption of reads and writes, probabilistic rules with seeds,
** and rules and timeouts changed on an open device (dev_set_fault,
** dev_set_timeout) while another thread has commands in flight.
*/
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "tests/unit/helpers.h"

static dev_device *open_fault(const char *zFault, int timeoutMs) {
  dev_options o;
  dev_options_default(&o);
  o.zFault = zFault;
  o.timeoutMs = timeoutMs;
  return open_dev(":memory:", &o);
}

static void test_parse_errors(void) {
  static const struct {
    const char *zSpec, *zWant;
  } a[] = {
      {"op=bogus,action=timeout", "unknown op 'bogus'"},
      {"op=nvm_read,nth=3", "no action"},
      {"action=status:zz", "status"},
      {"action=explode", "unknown action 'explode'"},
      {"op=nvm_read,action=timeout;color=red,action=timeout", "rule 2: unknown key 'color'"},
      {"prob=2,action=timeout", "prob=2"},
      {"nth=1,prob=0.5,action=timeout", "nth or prob"},
      {"op=nvm_flush,action=corrupt", "corrupt applies"},
      {"op=nvm_read,action=short", "short applies to op=nvm_write"},
      {"action=short", "short applies to op=nvm_write"},
      {"nth", "not key=value"},
  };
  size_t i;
  for (i = 0; i < sizeof(a) / sizeof(a[0]); i++) {
    dev_options o;
    dev_device *d = NULL;
    char *zErr = NULL;
    dev_options_default(&o);
    o.zFault = a[i].zSpec;
    CHECK_RC(dev_open(":memory:", &o, &d, &zErr), -EINVAL);
    CHECK(d == NULL);
    if (!zErr || !strstr(zErr, a[i].zWant)) {
      printf("FAIL: spec \"%s\": message \"%s\" lacks \"%s\"\n", a[i].zSpec, zErr ? zErr : "(null)",
             a[i].zWant);
      nFail++;
    }
    free(zErr);
  }
}

static void test_status(void) {
  dev_device *d = open_fault("op=nvm_read,nth=3,action=status:0x281", 0);
  dev_queue *q = open_queue(d);
  uint8_t b[4096];
  CHECK_RC(dev_nvm_read(q, 0, 1, b), 0);
  CHECK_RC(dev_nvm_read(q, 0, 1, b), 0);
  CHECK_RC(dev_nvm_read(q, 7, 1, b), CSQ_SC_READ_ERROR);
  CHECK(strstr(dev_errmsg(q), "Unrecovered Read Error") != NULL);
  CHECK(strstr(dev_errmsg(q), "LBAs 7..7") != NULL);
  CHECK(strstr(dev_errmsg(q), ":memory:") != NULL);
  CHECK_RC(dev_nvm_read(q, 0, 1, b), 0); /* fires once */
  CHECK_RC(dev_queue_stats(q)->errors, 1);
  dev_queue_close(q);
  dev_unref(d);
}

static double ms_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (t1.tv_sec - t0->tv_sec) * 1e3 + (t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static void test_timeout(void) {
  dev_device *d =
      open_fault("op=nvm_read,nth=2,action=timeout;op=slm_read,nth=1,action=timeout", 200);
  dev_queue *q = open_queue(d);
  uint8_t b[4096];
  struct timespec t0;
  csq_sqe s;
  csq_cqe c;
  int i;
  double ms;
  CHECK_RC(dev_nvm_read(q, 0, 1, b), 0);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_RC(dev_nvm_read(q, 0, 1, b), CSQ_SC_HOST_TIMEOUT);
  ms = ms_since(&t0);
  CHECK(ms >= 190 && ms < 2000);
  CHECK(strstr(dev_errmsg(q), "no completion within 200 ms") != NULL);
  /* The queue stays usable, at full depth. */
  for (i = 0; i < 300; i++) CHECK_RC(dev_nvm_read(q, (uint64_t)i, 1, b), 0);
  /* Asynchronously: dev_reap hands back a synthesized timeout completion. */
  memset(&s, 0, sizeof(s));
  s.opcode = CSQ_SLM_READ;
  s.nsid = CSQ_NSID_SLM;
  s.prp1 = (uintptr_t)b;
  s.cdw12 = 64;
  CHECK_RC(dev_submit(q, &s), 0);
  CHECK_RC(dev_reap(q, &c, 50), -ETIMEDOUT); /* not yet */
  CHECK_RC(dev_reap(q, &c, 1000), 0);
  CHECK_RC(c.cid, s.cid);
  CHECK_RC(csq_cqe_sf(&c), CSQ_SC_HOST_TIMEOUT);
  CHECK_RC(dev_slm_read(q, 0, b, 64), 0);
  dev_queue_close(q);
  dev_unref(d);
}

static void test_late_completion(void) {
  dev_device *d = open_fault("op=nvm_write,nth=1,action=delay:300", 100);
  dev_queue *q = open_queue(d);
  uint8_t w[4096], r[4096];
  struct timespec t0;
  int n = 0;
  fill_pattern(w, sizeof(w), 9);
  CHECK_RC(dev_nvm_write(q, 1, 1, w), CSQ_SC_HOST_TIMEOUT);
  /* Keep the queue busy while the late completion arrives: every command
  ** must still get its own completion. */
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (ms_since(&t0) < 450) {
    fill_pattern(w, sizeof(w), (uint64_t)n);
    CHECK_RC(dev_nvm_write(q, 2, 1, w), 0);
    CHECK_RC(dev_nvm_read(q, 2, 1, r), 0);
    CHECK(memcmp(w, r, 4096) == 0);
    n++;
    usleep(2000);
  }
  CHECK(n > 10);
  dev_queue_close(q);
  dev_unref(d);
}

static void test_corrupt(void) {
  dev_device *d =
      open_fault("op=nvm_read,nth=1,action=corrupt;op=nvm_write,lba=50,action=corrupt", 0);
  dev_queue *q = open_queue(d);
  uint8_t w[8192], r[8192];
  int i, nDiff = 0;
  fill_pattern(w, sizeof(w), 3);
  CHECK_RC(dev_nvm_write(q, 10, 2, w), 0);
  CHECK_RC(dev_nvm_read(q, 10, 2, r), 0); /* succeeds, one byte flipped */
  for (i = 0; i < 8192; i++) nDiff += w[i] != r[i];
  CHECK_RC(nDiff, 1);
  CHECK_RC(dev_nvm_read(q, 10, 2, r), 0);
  CHECK(memcmp(w, r, 8192) == 0);
  /* Writes covering LBA 50 store damaged data; others are intact. */
  CHECK_RC(dev_nvm_write(q, 49, 2, w), 0);
  CHECK_RC(dev_nvm_read(q, 49, 2, r), 0);
  CHECK(memcmp(w, r, 8192) != 0);
  CHECK_RC(dev_nvm_write(q, 60, 2, w), 0);
  CHECK_RC(dev_nvm_read(q, 60, 2, r), 0);
  CHECK(memcmp(w, r, 8192) == 0);
  dev_queue_close(q);
  dev_unref(d);
}

static int count_failures(const char *zSpec) {
  dev_device *d = open_fault(zSpec, 0);
  dev_queue *q = open_queue(d);
  uint8_t b[4096];
  int i, n = 0;
  for (i = 0; i < 400; i++) {
    int rc = dev_nvm_read(q, 0, 1, b);
    if (rc == CSQ_SC_INTERNAL)
      n++;
    else
      CHECK_RC(rc, 0);
  }
  CHECK_RC(dev_nvm_write(q, 0, 1, b), 0); /* other ops unaffected */
  dev_queue_close(q);
  dev_unref(d);
  return n;
}

static void test_prob(void) {
  int a = count_failures("op=nvm_read,prob=0.25,seed=7,action=status:0x6");
  int b = count_failures("op=nvm_read,prob=0.25,seed=7,action=status:0x6");
  int c = count_failures("op=nvm_read,prob=0.25,seed=7,count=3,action=status:0x6");
  CHECK(a > 50 && a < 150);
  CHECK_RC(a, b); /* same seed, same run */
  CHECK_RC(c, 3);
}

typedef struct hammer {
  dev_device *d;
  volatile int bStop;
  int nOk, nFault, nOther;
} hammer;

/* Reads on a queue of its own until told to stop; every failure must be
** the injected status. */
static void *hammer_main(void *pArg) {
  hammer *h = pArg;
  dev_queue *q = open_queue(h->d);
  uint8_t *b = malloc(8 * 4096);
  while (!h->bStop) {
    int rc = dev_nvm_read(q, 0, 8, b);
    if (rc == 0)
      h->nOk++;
    else if (rc == CSQ_SC_INTERNAL)
      h->nFault++;
    else
      h->nOther++;
  }
  free(b);
  dev_queue_close(q);
  return NULL;
}

static void test_runtime_set(void) {
  dev_device *d = open_fault(NULL, 0);
  dev_queue *q = open_queue(d);
  uint8_t b[4096];
  char *zPrev = (char *)1, *zErr = NULL;
  CHECK_RC(dev_nvm_read(q, 3, 1, b), 0);
  CHECK_RC(dev_set_fault(d, "op=nvm_read,nth=2,action=status:0x281", &zPrev, &zErr), 0);
  CHECK(zPrev == NULL && zErr == NULL);
  CHECK_RC(dev_nvm_read(q, 3, 1, b), 0);
  CHECK_RC(dev_nvm_read(q, 3, 1, b), CSQ_SC_READ_ERROR);
  CHECK(strstr(dev_errmsg(q), "injected fault") != NULL, "%s", dev_errmsg(q));
  CHECK_RC(dev_nvm_read(q, 3, 1, b), 0);
  /* a bad spec: an error naming the device and the item, the rules stay */
  CHECK_RC(dev_set_fault(d, "op=nvm_read,action=explode", &zPrev, &zErr), -EINVAL);
  CHECK(zErr && strstr(zErr, "unknown action 'explode'") && strstr(zErr, ":memory:"), "%s", zErr);
  free(zErr);
  zErr = NULL;
  CHECK_RC(dev_set_fault(d, "op=nvm_write,action=status:0x280", &zPrev, NULL), 0);
  CHECK(zPrev && strcmp(zPrev, "op=nvm_read,nth=2,action=status:0x281") == 0, "%s", zPrev);
  free(zPrev);
  CHECK_RC(dev_nvm_write(q, 3, 1, b), CSQ_SC_WRITE_FAULT);
  CHECK_RC(dev_set_fault(d, "", &zPrev, NULL), 0);
  CHECK(zPrev && strcmp(zPrev, "op=nvm_write,action=status:0x280") == 0);
  free(zPrev);
  CHECK_RC(dev_nvm_write(q, 3, 1, b), 0);
  CHECK_RC(dev_set_fault(d, NULL, &zPrev, NULL), 0);
  CHECK(zPrev == NULL);
  /* timeouts */
  CHECK_RC(dev_timeout(d), 30000);
  CHECK_RC(dev_set_timeout(d, 0), -EINVAL);
  CHECK_RC(dev_set_timeout(d, 150), 30000);
  CHECK_RC(dev_set_fault(d, "op=nvm_read,nth=1,action=timeout", NULL, NULL), 0);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_RC(dev_nvm_read(q, 3, 1, b), CSQ_SC_HOST_TIMEOUT);
  double ms = ms_since(&t0);
  CHECK(ms >= 140 && ms < 2000, "%.0f ms", ms);
  CHECK(strstr(dev_errmsg(q), "no completion within 150 ms") != NULL, "%s", dev_errmsg(q));
  CHECK_RC(dev_nvm_read(q, 3, 1, b), 0);
  CHECK_RC(dev_set_timeout(d, 30000), 150);
  /* swaps while another thread's commands are in flight */
  hammer h = {d, 0, 0, 0, 0};
  pthread_t th;
  CHECK_RC(pthread_create(&th, NULL, hammer_main, &h), 0);
  for (int i = 0; i < 2000; i++) {
    char z[96];
    snprintf(z, sizeof(z), "op=nvm_read,prob=0.3,seed=%d,action=status:0x6", i + 1);
    CHECK_RC(dev_set_fault(d, i % 3 == 2 ? NULL : z, NULL, NULL), 0);
    if (i % 64 == 0) usleep(1000);
  }
  h.bStop = 1;
  pthread_join(th, NULL);
  CHECK(h.nOther == 0 && h.nOk > 0, "ok %d fault %d other %d", h.nOk, h.nFault, h.nOther);
  dev_queue_close(q);
  dev_unref(d);
}

int main(void) {
  test_parse_errors();
  test_status();
  test_timeout();
  test_late_completion();
  test_corrupt();
  test_prob();
  test_runtime_set();
  return test_done("test_device_faults");
}
