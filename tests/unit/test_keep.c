/*
** tests/unit/test_keep.c - the pool of kept blocks (device/format/keep.h):
** the smallest block within the asked range comes out, blocks past the
** pool's count or bytes are refused, and draining hands every kept block
** to the owner's free once.
*/
#include "device/format/keep.h"
#include "tests/unit/helpers.h"

static int nFreed;
static size_t nFreedBytes;

static void count_free(void *p, size_t n) {
  nFreed++;
  nFreedBytes += n;
  free(p);
}

int main(void) {
  static csq_keep k = CSQ_KEEP_INIT(3, 1000);
  void *a = malloc(100), *b = malloc(300), *c = malloc(500), *d = malloc(50);
  size_t n = 0;
  CHECK(csq_keep_take(&k, 1, 1000, &n) == NULL, ": an empty pool gave a block");
  CHECK_RC(csq_keep_give(&k, a, 100), 1);
  CHECK_RC(csq_keep_give(&k, b, 300), 1);
  CHECK_RC(csq_keep_give(&k, c, 500), 1);
  CHECK_RC(csq_keep_give(&k, d, 50), 0); /* three blocks at most */
  free(d);
  CHECK(csq_keep_take(&k, 301, 499, &n) == NULL, ": a block outside the range");
  CHECK(csq_keep_take(&k, 200, 1000, &n) == b && n == 300, ": not the smallest that fits");
  void *e = malloc(200);
  CHECK_RC(csq_keep_give(&k, e, 401), 0); /* 100 + 500 + 401 bytes: over 1000 */
  CHECK_RC(csq_keep_give(&k, e, 400), 1);
  free(b);
  csq_keep_drain(&k, count_free);
  CHECK(nFreed == 3 && nFreedBytes == 1000, ": drained %d blocks, %zu bytes", nFreed, nFreedBytes);
  CHECK(csq_keep_take(&k, 0, 1000, &n) == NULL, ": a drained pool gave a block");
  static csq_keep none = CSQ_KEEP_INIT(0, 1000);
  static char buf[8];
  CHECK_RC(csq_keep_give(&none, buf, 1), 0); /* a pool of no slots keeps nothing */
  return test_done("test_keep");
}
