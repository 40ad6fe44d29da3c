/*
** tests/unit/helpers.h - what the C unit tests share (helpers.c; the model is
** liburing's test/helpers.c): the check macros and their counters, random
** numbers, the end-of-test line, a temporary directory for image files,
** opening a device, a queue and a store, and the mixed values the
** executor tests draw and hand to SQLite, the program builder and vectors.
**
** Each test is its own program, linked with helpers.c: exit 0 pass, 77
** skip, anything else fail; one line per failed check (the first 50), then
** a count.
**
**   CHECK(cond);                      FAIL file:line: cond
**   CHECK(cond, "fmt", args...);      FAIL file:line: cond: message
**   CHECK_RC(expr, want);             FAIL file:line: expr = got, want want
*/
#ifndef CSQ_TESTS_HELPERS_H
#define CSQ_TESTS_HELPERS_H

#include <errno.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/driver/driver.h"
#include "device/format/program.h"
#include "device/format/vec.h"
#include "device/store/store.h"

/* ---- checks ---- */

extern int nFail;  /* checks failed so far */
extern int nCheck; /* checks made so far */

/* The optional message of a failed CHECK ("" when none was given). */
void check_note(const char *zFmt, ...);

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    nCheck++;                                                                                      \
    if (!(cond)) {                                                                                 \
      if (nFail < 50) {                                                                            \
        printf("FAIL %s:%d: %s", __FILE__, __LINE__, #cond);                                       \
        check_note("" __VA_ARGS__);                                                                \
        printf("\n");                                                                              \
      }                                                                                            \
      nFail++;                                                                                     \
    }                                                                                              \
  } while (0)

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

/* "zName: N checks passed", or how many failed: the exit status (0 or 1). */
int test_done(const char *zName);

/* ---- random numbers ---- */

/* xorshift64*: reproducible test data; a test may reseed rng. */
extern uint64_t rng;
uint64_t rnd(void);
uint64_t rndn(uint64_t n); /* 0..n-1; 0 when n is 0 */

/* ---- files and devices ---- */

/* A fresh temporary directory for image files (made at the first call; the
** test SKIPs, exit 77, when it cannot be); removed by test_tmp_cleanup. */
const char *test_tmpdir(void);
void test_tmp_cleanup(void);

/* n bytes of p (a multiple of 8) with a pattern seed chooses. */
void fill_pattern(void *p, size_t n, uint64_t seed);

/* dev_open / dev_queue_open that end the test (exit 1) on failure. */
dev_device *open_dev(const char *zPath, const dev_options *pOpt);
dev_queue *open_queue(dev_device *d);

/* A device, a queue on it and its store, opened together. */
typedef struct test_world {
  dev_device *d;
  dev_queue *q;
  store *s;
} test_world;

/* Open image zPath (created if bCreate) with fault rules zFault (may be
** NULL) and a short command timeout, so that a "timeout" fault costs
** little. 0, or an error (*pzErr may say why): call test_world_close
** either way. */
int test_world_open(test_world *w, const char *zPath, const char *zFault, int bCreate,
                    char **pzErr);
void test_world_close(test_world *w); /* what test_world_open opened; *w zeroed */

/* ---- mixed values ---- */

/* One value of any storage class (CSQ_INT, ... as vec.h numbers them),
** drawn by a test and handed to SQLite, the program builder or a vector. */
typedef struct test_val {
  int cls;
  int64_t i;
  double r;
  char z[24]; /* TEXT or BLOB bytes, n of them */
  int n;
} test_val;

void test_val_bind(sqlite3_stmt *st, int i, const test_val *v); /* bind to parameter i */
void test_val_push(csq_vec *v, const test_val *x);              /* append to v */
int test_val_const(csq_pb *b, const test_val *v);               /* a program constant: its index */

#endif /* CSQ_TESTS_HELPERS_H */
