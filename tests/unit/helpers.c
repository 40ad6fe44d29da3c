/*
** tests/unit/helpers.c - what the C unit tests share; see helpers.h. Linked
** into every unit test program (Makefile, $(BUILD)/tests/%).
*/
#include <stdarg.h>

#include "tests/unit/helpers.h"

int nFail = 0;
int nCheck = 0;
uint64_t rng = 0x9E3779B97F4A7C15ull;

void check_note(const char *zFmt, ...) {
  if (!zFmt[0]) return;
  va_list ap;
  va_start(ap, zFmt);
  printf(": ");
  vprintf(zFmt, ap);
  va_end(ap);
}

int test_done(const char *zName) {
  if (nFail) {
    printf("%s: %d of %d checks failed\n", zName, nFail, nCheck);
    return 1;
  }
  printf("%s: %d checks passed\n", zName, nCheck);
  return 0;
}

uint64_t rnd(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545F4914F6CDD1Dull;
}

uint64_t rndn(uint64_t n) {
  return n ? rnd() % n : 0;
}

static char zTmpDir[256];

const char *test_tmpdir(void) {
  if (!zTmpDir[0]) {
    snprintf(zTmpDir, sizeof(zTmpDir), "/tmp/csq-devtest-XXXXXX");
    if (!mkdtemp(zTmpDir)) {
      printf("SKIP: cannot create a temporary directory\n");
      exit(77);
    }
  }
  return zTmpDir;
}

void test_tmp_cleanup(void) {
  char zCmd[300];
  if (!zTmpDir[0]) return;
  snprintf(zCmd, sizeof(zCmd), "rm -rf '%s'", zTmpDir);
  if (system(zCmd) != 0) printf("note: could not remove %s\n", zTmpDir);
}

void fill_pattern(void *p, size_t n, uint64_t seed) {
  uint64_t *a = p;
  for (size_t i = 0; i < n / 8; i++) a[i] = seed * 0x9E3779B97F4A7C15ull + i;
}

dev_device *open_dev(const char *zPath, const dev_options *pOpt) {
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

dev_queue *open_queue(dev_device *d) {
  dev_queue *q = NULL;
  int rc = dev_queue_open(d, &q);
  if (rc) {
    printf("FAIL: dev_queue_open: %d\n", rc);
    exit(1);
  }
  return q;
}

int test_world_open(test_world *w, const char *zPath, const char *zFault, int bCreate,
                    char **pzErr) {
  dev_options o;
  dev_options_default(&o);
  o.bCreate = bCreate;
  o.zFault = zFault;
  o.timeoutMs = 300;
  memset(w, 0, sizeof(*w));
  int rc = dev_open(zPath, &o, &w->d, pzErr);
  if (rc == 0) rc = dev_queue_open(w->d, &w->q);
  if (rc == 0) rc = store_open(w->d, w->q, bCreate, &w->s, pzErr);
  return rc;
}

void test_world_close(test_world *w) {
  if (w->s) store_unref(w->s);
  if (w->q) dev_queue_close(w->q);
  if (w->d) dev_unref(w->d);
  memset(w, 0, sizeof(*w));
}

void test_val_bind(sqlite3_stmt *st, int i, const test_val *v) {
  switch (v->cls) {
  case CSQ_INT:
    sqlite3_bind_int64(st, i, v->i);
    break;
  case CSQ_REAL:
    sqlite3_bind_double(st, i, v->r);
    break;
  case CSQ_TEXT:
    sqlite3_bind_text(st, i, v->z, v->n, SQLITE_TRANSIENT);
    break;
  case CSQ_BLOB:
    sqlite3_bind_blob(st, i, v->z, v->n, SQLITE_TRANSIENT);
    break;
  default:
    sqlite3_bind_null(st, i);
    break;
  }
}

void test_val_push(csq_vec *v, const test_val *x) {
  switch (x->cls) {
  case CSQ_INT:
    csq_vec_push_int(v, x->i);
    break;
  case CSQ_REAL:
    csq_vec_push_real(v, x->r);
    break;
  case CSQ_TEXT:
  case CSQ_BLOB:
    csq_vec_push_bytes(v, x->cls, x->z, (uint32_t)x->n);
    break;
  default:
    csq_vec_push_null(v);
    break;
  }
}

int test_val_const(csq_pb *b, const test_val *v) {
  switch (v->cls) {
  case CSQ_INT:
    return csq_pb_const_int(b, v->i);
  case CSQ_REAL:
    return csq_pb_const_real(b, v->r);
  case CSQ_TEXT:
  case CSQ_BLOB:
    return csq_pb_const_bytes(b, v->cls, v->z, (uint32_t)v->n);
  default:
    return csq_pb_const_null(b);
  }
}
