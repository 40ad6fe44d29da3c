/*
** tests/unit/test_vec.c - csq_vec: pushes of every class, growth, reserve,
** append (with heap rebasing), select, truncate (heap reclaim) and clsMask
** upkeep. Exit 0 = pass; one line per failed check.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/format/vec.h"
#include "tests/unit/helpers.h"

#define M(c) (uint8_t)(1u << (c))

/* Value k of the reference pattern: cycles through every class. */
static int push_pattern(csq_vec *v, uint32_t k) {
  char buf[64];
  switch (k % 6) {
  case 0:
    return csq_vec_push_int(v, (int64_t)k * 7 - 1000);
  case 1:
    return csq_vec_push_real(v, (double)k / 4);
  case 2: {
    int n = snprintf(buf, sizeof buf, "text-%u", k);
    return csq_vec_push_bytes(v, CSQ_TEXT, buf, (uint32_t)n);
  }
  case 3: {
    memset(buf, (int)(k & 0xff), 5);
    return csq_vec_push_bytes(v, CSQ_BLOB, buf, 5);
  }
  case 4:
    return csq_vec_push_null(v);
  default:
    return csq_vec_push_bytes(v, (k & 1) ? CSQ_TEXT : CSQ_BLOB, NULL, 0);
  }
}

/* Is v[i] equal to pattern value k? */
static int is_pattern(const csq_vec *v, uint32_t i, uint32_t k) {
  char buf[64];
  switch (k % 6) {
  case 0:
    return v->aCls[i] == CSQ_INT && v->aVal[i].i == (int64_t)k * 7 - 1000;
  case 1:
    return v->aCls[i] == CSQ_REAL && v->aVal[i].r == (double)k / 4;
  case 2: {
    int n = snprintf(buf, sizeof buf, "text-%u", k);
    return v->aCls[i] == CSQ_TEXT && v->aLen[i] == (uint32_t)n &&
           !memcmp(csq_vec_bytes(v, i), buf, n);
  }
  case 3:
    memset(buf, (int)(k & 0xff), 5);
    return v->aCls[i] == CSQ_BLOB && v->aLen[i] == 5 && !memcmp(csq_vec_bytes(v, i), buf, 5);
  case 4:
    return v->aCls[i] == CSQ_NULL;
  default:
    return v->aCls[i] == ((k & 1) ? CSQ_TEXT : CSQ_BLOB) && v->aLen[i] == 0;
  }
}

static uint8_t brute_mask(const csq_vec *v) {
  uint8_t m = 0;
  for (uint32_t i = 0; i < v->n; i++) m |= M(v->aCls[i]);
  return m;
}

int main(void) {
  csq_vec v, w;
  csq_vec_init(&v);
  csq_vec_init(&w);
  CHECK(v.n == 0 && v.clsMask == 0 && v.aCls == NULL);

  /* Many pushes: amortised growth keeps every value. */
  const uint32_t N = 300000;
  for (uint32_t k = 0; k < N; k++) CHECK(push_pattern(&v, k) == 0);
  CHECK(v.n == N);
  CHECK(v.nCap >= N && v.nCap < 4 * N);
  CHECK(v.clsMask == (M(CSQ_INT) | M(CSQ_REAL) | M(CSQ_TEXT) | M(CSQ_BLOB) | M(CSQ_NULL)));
  int bad = 0;
  for (uint32_t k = 0; k < N; k++) bad += !is_pattern(&v, k, k);
  CHECK(bad == 0);
  CHECK(csq_vec_push_bytes(&v, CSQ_INT, "x", 1) == -EINVAL);
  CHECK(csq_vec_push_bytes(&v, CSQ_NULL, "x", 1) == -EINVAL);

  /* Append a slice into a vector that already has a heap: offsets rebased. */
  CHECK(csq_vec_push_bytes(&w, CSQ_TEXT, "prefix", 6) == 0);
  CHECK(w.clsMask == M(CSQ_TEXT));
  CHECK(csq_vec_append(&w, &v, 1001, 5000) == 0);
  CHECK(w.n == 5001);
  bad = 0;
  for (uint32_t k = 0; k < 5000; k++) bad += !is_pattern(&w, 1 + k, 1001 + k);
  CHECK(bad == 0);
  CHECK(w.clsMask == brute_mask(&w));
  CHECK(csq_vec_append(&w, &v, N - 1, 2) == -EINVAL);
  CHECK(csq_vec_append(&w, &v, N, 0) == 0);

  /* Append of a class-homogeneous slice sets only its classes. */
  csq_vec x;
  csq_vec_init(&x);
  CHECK(csq_vec_append(&x, &v, 0, 1) == 0);
  CHECK(x.clsMask == M(CSQ_INT) && x.n == 1 && x.aVal[0].i == -1000);

  /* Gather: scattered and repeated indices and NULLs (UINT32_MAX), after a
  ** value already in the heap; then only integers: only their class. */
  {
    csq_vec g;
    csq_vec_init(&g);
    CHECK(csq_vec_push_bytes(&g, CSQ_BLOB, "head", 4) == 0);
    uint32_t aIdx[3000];
    for (uint32_t k = 0; k < 3000; k++) aIdx[k] = k % 7 == 3 ? UINT32_MAX : (k * 7919) % N;
    CHECK(csq_vec_gather(&g, &v, aIdx, 3000) == 0);
    CHECK(g.n == 3001 && g.aLen[0] == 4 && !memcmp(csq_vec_bytes(&g, 0), "head", 4));
    int nBad = 0;
    for (uint32_t k = 0; k < 3000; k++)
      nBad += aIdx[k] == UINT32_MAX ? g.aCls[1 + k] != CSQ_NULL : !is_pattern(&g, 1 + k, aIdx[k]);
    CHECK(nBad == 0);
    CHECK(g.clsMask == brute_mask(&g));
    CHECK(csq_vec_gather(&g, &v, aIdx, 0) == 0 && g.n == 3001);
    csq_vec_free(&g);
    for (uint32_t k = 0; k < 3000; k++) aIdx[k] = (k % 500) * 6; /* pattern 0: INT */
    CHECK(csq_vec_gather(&g, &v, aIdx, 3000) == 0);
    nBad = 0;
    for (uint32_t k = 0; k < 3000; k++) nBad += !is_pattern(&g, k, aIdx[k]);
    CHECK(nBad == 0 && g.n == 3000 && g.clsMask == M(CSQ_INT));
    csq_vec_free(&g);
    /* a source of one fixed-size class (its own loop): INT, then REAL,
    ** after a TEXT already held, with NULL indices among them */
    for (int cls = CSQ_INT; cls <= CSQ_REAL; cls++) {
      csq_vec s1;
      csq_vec_init(&s1);
      for (uint32_t k = 0; k < 700; k++)
        CHECK((cls == CSQ_INT ? csq_vec_push_int(&s1, (int64_t)k * 3 - 5)
                              : csq_vec_push_real(&s1, k * 0.5)) == 0);
      CHECK(csq_vec_push_bytes(&g, CSQ_TEXT, "t", 1) == 0);
      for (uint32_t k = 0; k < 3000; k++) aIdx[k] = k % 11 == 4 ? UINT32_MAX : (k * 7919) % 700;
      CHECK(csq_vec_gather(&g, &s1, aIdx, 3000) == 0 && g.n == 3001);
      nBad = 0;
      for (uint32_t k = 0; k < 3000; k++) {
        uint32_t j = aIdx[k];
        if (j == UINT32_MAX)
          nBad += g.aCls[1 + k] != CSQ_NULL || g.aLen[1 + k] != 0;
        else
          nBad +=
              g.aCls[1 + k] != cls || g.aLen[1 + k] != 0 ||
              (cls == CSQ_INT ? g.aVal[1 + k].i != (int64_t)j * 3 - 5 : g.aVal[1 + k].r != j * 0.5);
      }
      CHECK(nBad == 0 && g.aCls[0] == CSQ_TEXT && !memcmp(csq_vec_bytes(&g, 0), "t", 1));
      CHECK(g.clsMask == (M(CSQ_TEXT) | M(cls) | M(CSQ_NULL)) && g.clsMask == brute_mask(&g));
      for (uint32_t k = 0; k < 3000; k++) aIdx[k] = k % 700; /* no NULL: none in the mask */
      csq_vec_free(&g);
      CHECK(csq_vec_gather(&g, &s1, aIdx, 3000) == 0 && g.clsMask == M(cls));
      csq_vec_free(&g);
      csq_vec_free(&s1);
    }
  }

  /* Bytes of every length from 0 to 40 (vec.c copies short ones its own
  ** way) survive append and gather, and nothing of their neighbours. */
  {
    csq_vec t, a, gt;
    csq_vec_init(&t);
    csq_vec_init(&a);
    csq_vec_init(&gt);
    char buf[41];
    for (uint32_t len = 0; len <= 40; len++) {
      for (uint32_t i = 0; i < len; i++) buf[i] = (char)('a' + (len * 7 + i) % 26);
      CHECK(csq_vec_push_bytes(&t, len % 2 ? CSQ_TEXT : CSQ_BLOB, buf, len) == 0);
    }
    uint32_t aRev[41];
    for (uint32_t k = 0; k < 41; k++) aRev[k] = 40 - k;
    CHECK(csq_vec_append(&a, &t, 0, 41) == 0 && csq_vec_gather(&gt, &t, aRev, 41) == 0);
    int nBad = 0;
    for (uint32_t len = 0; len <= 40; len++) {
      for (uint32_t i = 0; i < len; i++) buf[i] = (char)('a' + (len * 7 + i) % 26);
      nBad += a.aLen[len] != len || memcmp(csq_vec_bytes(&a, len), buf, len);
      nBad += gt.aLen[40 - len] != len || memcmp(csq_vec_bytes(&gt, 40 - len), buf, len);
    }
    CHECK(nBad == 0 && a.nHeap == t.nHeap && gt.nHeap == t.nHeap);
    csq_vec_free(&t);
    csq_vec_free(&a);
    csq_vec_free(&gt);
  }

  /* Growth past the size that allocates afresh (huge pages, vec.c): every
  ** value and byte is kept across it. */
  {
    csq_vec big;
    csq_vec_init(&big);
    const uint32_t NB = 1200000;
    for (uint32_t k = 0; k < NB; k++)
      CHECK(k % 3 ? csq_vec_push_int(&big, (int64_t)k * 31) == 0
                  : csq_vec_push_bytes(&big, CSQ_TEXT, "abcdefg", 1 + k % 7) == 0);
    int nBad = 0;
    for (uint32_t k = 0; k < NB; k++)
      nBad += k % 3 ? big.aCls[k] != CSQ_INT || big.aVal[k].i != (int64_t)k * 31
                    : big.aCls[k] != CSQ_TEXT || big.aLen[k] != 1 + k % 7 ||
                          memcmp(csq_vec_bytes(&big, k), "abcdefg", 1 + k % 7);
    CHECK(nBad == 0 && big.n == NB && big.nCap * sizeof(csq_val) >= (4u << 20));
    csq_vec_free(&big);
  }

  /* Select: keep the TEXT ones (k % 6 == 2) of w, mask shrinks. */
  uint32_t *aSel = malloc(sizeof(uint32_t) * w.n);
  uint32_t nSel = 0;
  for (uint32_t i = 1; i < w.n; i++)
    if ((1001 + i - 1) % 6 == 2) aSel[nSel++] = i;
  csq_vec_select(&w, aSel, nSel);
  CHECK(w.n == nSel);
  CHECK(w.clsMask == M(CSQ_TEXT));
  bad = 0;
  for (uint32_t k = 0; k < nSel; k++) bad += !is_pattern(&w, k, 1001 + aSel[k] - 1);
  CHECK(bad == 0);
  csq_vec_select(&w, aSel, 0);
  CHECK(w.n == 0 && w.clsMask == 0);
  free(aSel);

  /* Truncate: mask recomputed, heap reclaimed back to the last kept value. */
  csq_vec_reset(&x);
  CHECK(x.n == 0 && x.clsMask == 0 && x.nHeap == 0);
  CHECK(csq_vec_push_int(&x, 1) == 0);
  CHECK(csq_vec_push_bytes(&x, CSQ_BLOB, "abc", 3) == 0);
  CHECK(csq_vec_push_real(&x, -0.0) == 0);
  CHECK(csq_vec_push_bytes(&x, CSQ_TEXT, "defgh", 5) == 0);
  CHECK(csq_vec_push_null(&x) == 0);
  CHECK(x.nHeap == 8);
  csq_vec_truncate(&x, 10);
  CHECK(x.n == 5);
  csq_vec_truncate(&x, 4);
  CHECK(x.clsMask == (M(CSQ_INT) | M(CSQ_BLOB) | M(CSQ_REAL) | M(CSQ_TEXT)) && x.nHeap == 8);
  csq_vec_truncate(&x, 3);
  CHECK(x.clsMask == (M(CSQ_INT) | M(CSQ_BLOB) | M(CSQ_REAL)) && x.nHeap == 3);
  CHECK(x.aCls[2] == CSQ_REAL && x.aVal[2].r == 0.0);
  CHECK(csq_vec_push_bytes(&x, CSQ_TEXT, "Z", 1) == 0);
  CHECK(x.aVal[3].off == 3 && *csq_vec_bytes(&x, 3) == 'Z');
  csq_vec_truncate(&x, 0);
  CHECK(x.n == 0 && x.clsMask == 0 && x.nHeap == 0);

  /* Reserve: capacity is honoured and never shrinks. */
  CHECK(csq_vec_reserve(&x, 10000, 1 << 20) == 0);
  CHECK(x.nCap >= 10000 && x.nHeapCap >= (1u << 20));
  uint32_t cap = x.nCap;
  CHECK(csq_vec_reserve(&x, 10, 10) == 0);
  CHECK(x.nCap == cap);

  /* Free leaves an empty, reusable vector. */
  csq_vec_free(&x);
  CHECK(x.n == 0 && x.nCap == 0 && x.aHeap == NULL);
  CHECK(csq_vec_push_bytes(&x, CSQ_TEXT, "again", 5) == 0 && x.n == 1);
  csq_vec_free(&x);
  csq_vec_free(&v);
  csq_vec_free(&w);

  if (nFail) {
    printf("test_vec: %d checks failed\n", nFail);
    return 1;
  }
  printf("test_vec: ok\n");
  return 0;
}
