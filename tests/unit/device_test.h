/*
** tests/unit/device_test.h - tiny check macros and helpers shared by the
** device unit tests (test_device_*.c). Each test is its own program: exit 0
** pass, 77 skip, anything else fail; one line per failed check.
*/
#ifndef CSQ_TESTS_DEVICE_TEST_H
#define CSQ_TESTS_DEVICE_TEST_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/driver/driver.h"
#include "check.h"

#define CHECK_RC(expr, want)                                                                       \
  do {                                                                                             \
    long long got_ = (long long)(expr);                                                            \
    nCheck++;                                                                                      \
    if (got_ != (long long)(want)) {                                                               \
      nFail++;                                                                                     \
      printf("FAIL %s:%d: %s = %lld (0x%llx), want %lld (0x%llx)\n", __FILE__, __LINE__, #expr,    \
             got_, got_, (long long)(want), (long long)(want));                                    \
    }                                                                                              \
  } while (0)

static __attribute__((unused)) int test_done(const char *zName) {
  if (nFail) {
    printf("%s: %d of %d checks failed\n", zName, nFail, nCheck);
    return 1;
  }
  printf("%s: %d checks passed\n", zName, nCheck);
  return 0;
}

/* A fresh temporary directory for image files; removed by test_tmp_cleanup. */
static char zTmpDir[256];
static __attribute__((unused)) const char *test_tmpdir(void) {
  if (!zTmpDir[0]) {
    snprintf(zTmpDir, sizeof(zTmpDir), "/tmp/csq-devtest-XXXXXX");
    if (!mkdtemp(zTmpDir)) {
      printf("SKIP: cannot create a temporary directory\n");
      exit(77);
    }
  }
  return zTmpDir;
}
static __attribute__((unused)) void test_tmp_cleanup(void) {
  char zCmd[300];
  if (!zTmpDir[0]) return;
  snprintf(zCmd, sizeof(zCmd), "rm -rf '%s'", zTmpDir);
  if (system(zCmd) != 0) printf("note: could not remove %s\n", zTmpDir);
}

static __attribute__((unused)) void fill_pattern(void *p, size_t n, uint64_t seed) {
  uint64_t *a = p;
  size_t i;
  for (i = 0; i < n / 8; i++) a[i] = seed * 0x9E3779B97F4A7C15ull + i;
}

static __attribute__((unused)) dev_device *open_dev(const char *zPath, const dev_options *pOpt) {
  dev_device *d = NULL;
  char *zErr = NULL;
  int rc = dev_open(zPath, pOpt, &d, &zErr);
  if (rc) {
    printf("FAIL: dev_open(%s): %d %s\n", zPath, rc, zErr ? zErr : "");
    free(zErr);
    exit(1);
  }
  return d;
}

static __attribute__((unused)) dev_queue *open_queue(dev_device *d) {
  dev_queue *q = NULL;
  int rc = dev_queue_open(d, &q);
  if (rc) {
    printf("FAIL: dev_queue_open: %d\n", rc);
    exit(1);
  }
  return q;
}

#endif
