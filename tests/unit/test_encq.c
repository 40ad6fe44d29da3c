/*
** tests/unit/test_encq.c - the encode queue of bulk loads (device/store/encq.c).
**
** Checked, below SQL and without a device:
**   - row groups come back in the order they were put, each encoded exactly
**     as store_rg_encode encodes it on the caller's thread (same chunk
**     table, same bytes), and decode to the values put;
**   - at most nDepth are in flight: a put beyond that is -EAGAIN, and the
**     vectors a put hands back are empty (and reusable);
**   - store_encq_get without waiting returns nothing rather than block;
**     with nothing in flight it returns NULL;
**   - a queue freed with row groups still in flight (a load that failed)
**     frees them: run under ASan, nothing leaks or is used after free.
*/
#include <stdint.h>
#include <string.h>

#include "tests/unit/helpers.h"
#include "device/store/store.h"

#define NCHUNK 3

/* Row group g: rowids, an integer column, a text column. */
static void fill(csq_vec *a, int g, uint32_t n) {
  char z[32];
  for (uint32_t i = 0; i < n; i++) {
    csq_vec_push_int(&a[0], (int64_t)g * 100000 + i);
    csq_vec_push_int(&a[1], (int64_t)(rndn(1000)) - 500);
    int k = snprintf(z, sizeof(z), "g%d-%u", g, (unsigned)(i % 97));
    csq_vec_push_bytes(&a[2], CSQ_TEXT, z, (uint32_t)k);
  }
}

static int same_enc(const store_enc_rg *x, const store_enc_rg *y) {
  if (x->nRow != y->nRow || x->nChunk != y->nChunk || x->nblk != y->nblk) return 0;
  for (int c = 0; c < x->nChunk; c++) {
    if (x->aChunk[c].off != y->aChunk[c].off || x->aChunk[c].len != y->aChunk[c].len ||
        x->aChunk[c].xxh3 != y->aChunk[c].xxh3 || x->aChunk[c].enc != y->aChunk[c].enc)
      return 0;
  }
  return memcmp(x->buf, y->buf, x->nblk * 4096) == 0;
}

int main(void) {
  store_encq *q = NULL;
  CHECK_RC(store_encq_new(NCHUNK, "t", 2, &q), 0);
  CHECK(q != NULL);
  if (!q) return test_done("test_encq");
  CHECK_RC(store_encq_depth(q), 2);

  csq_vec aCol[NCHUNK], aRef[NCHUNK];
  for (int c = 0; c < NCHUNK; c++) csq_vec_init(&aCol[c]), csq_vec_init(&aRef[c]);
  store_enc_rg *pEnc = NULL;
  char *zErr = NULL;

  /* nothing in flight: NULL, waiting or not */
  CHECK_RC(store_encq_get(q, 1, &pEnc, &zErr), 0);
  CHECK(pEnc == NULL);

  /* 40 row groups through a queue of 2, each checked against an encode on
  ** this thread of the same values (the same seed refills them) */
  int gPut = 0, gGot = 0, nAgain = 0;
  store_enc_rg *apRef[64] = {0};
  while (gGot < 40) {
    if (gPut < 40) {
      uint32_t n = 1 + (uint32_t)rndn(3000);
      fill(aCol, gPut, n);
      for (int c = 0; c < NCHUNK; c++) {
        csq_vec_reset(&aRef[c]);
        csq_vec_append(&aRef[c], &aCol[c], 0, n);
      }
      CHECK_RC(store_rg_encode(NCHUNK, "t", aRef, 0, n, &apRef[gPut], &zErr), 0);
      int rc = store_encq_put(q, aCol, n);
      if (rc == -EAGAIN) {
        nAgain++;
        CHECK(store_encq_in_flight(q) == 2);
        for (int c = 0; c < NCHUNK; c++) csq_vec_reset(&aCol[c]);
        store_enc_rg_free(apRef[gPut]);
        apRef[gPut] = NULL;
      } else {
        CHECK_RC(rc, 0);
        for (int c = 0; c < NCHUNK; c++) CHECK(aCol[c].n == 0, "put hands back empty vectors");
        gPut++;
      }
    }
    /* take one now and then without waiting, else wait */
    int bWait = gPut == 40 || rndn(3) == 0;
    CHECK_RC(store_encq_get(q, bWait, &pEnc, &zErr), 0);
    if (!pEnc) {
      CHECK(!bWait || store_encq_in_flight(q) == 0);
      continue;
    }
    CHECK(apRef[gGot] && same_enc(pEnc, apRef[gGot]), "row group %d encoded alike", gGot);
    /* and it decodes to what was put */
    csq_vec v;
    csq_vec_init(&v);
    CHECK_RC(csq_chunk_decode(pEnc->buf + pEnc->aChunk[0].off, pEnc->aChunk[0].len, &v), 0);
    CHECK(v.n == pEnc->nRow && v.aVal[0].i == (int64_t)gGot * 100000, "rowids of %d", gGot);
    csq_vec_free(&v);
    store_enc_rg_free(pEnc);
    store_enc_rg_free(apRef[gGot]);
    apRef[gGot] = NULL;
    gGot++;
  }
  (void)nAgain; /* how often the loop above found the queue full depends on timing */
  CHECK_RC(store_encq_in_flight(q), 0);

  /* a slot stays taken until its row group is got, encoded or not: the
  ** third put is -EAGAIN and leaves its vectors as they were */
  fill(aCol, 1, 500);
  CHECK_RC(store_encq_put(q, aCol, 500), 0);
  fill(aCol, 2, 500);
  CHECK_RC(store_encq_put(q, aCol, 500), 0);
  fill(aCol, 3, 500);
  CHECK_RC(store_encq_put(q, aCol, 500), -EAGAIN);
  CHECK(aCol[0].n == 500 && aCol[0].aVal[0].i == 300000);
  for (int c = 0; c < NCHUNK; c++) csq_vec_reset(&aCol[c]);
  /* freed with row groups in flight */
  store_encq_free(q);

  for (int c = 0; c < NCHUNK; c++) csq_vec_free(&aCol[c]), csq_vec_free(&aRef[c]);
  free(zErr);
  return test_done("test_encq");
}
