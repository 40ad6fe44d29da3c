/*
** tests/fuzz/fuzz_chunk.c - libFuzzer harness for the column chunk decoder
** (csq_chunk_decode / csq_chunk_view, device/format/chunk.h).
**
** The checksum would stop almost every mutated input at the door, so the
** first input byte picks a mode: odd = take the bytes as they are; even =
** recompute the header checksum over [12, nBytes) first, so the structural
** checks behind it get fuzzed. A chunk that decodes must view the same way,
** re-encode, and decode again to the same values (a round-trip oracle).
*/
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "device/format/chunk.h"

static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Two vectors hold the same values (class, bits, bytes). */
static int same_vec(const csq_vec *a, const csq_vec *b) {
  if (a->n != b->n) return 0;
  for (uint32_t i = 0; i < a->n; i++) {
    if (a->aCls[i] != b->aCls[i]) return 0;
    switch (a->aCls[i]) {
    case CSQ_INT:
    case CSQ_REAL:
      if (a->aVal[i].i != b->aVal[i].i) return 0;
      break;
    case CSQ_TEXT:
    case CSQ_BLOB:
      if (a->aLen[i] != b->aLen[i] ||
          memcmp(a->aHeap + a->aVal[i].off, b->aHeap + b->aVal[i].off, a->aLen[i]) != 0)
        return 0;
      break;
    default:
      break;
    }
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int bRaw = data[0] & 1;
  size_t n = size - 1;
  /* a private, exactly sized copy: ASan catches a read past the end */
  uint8_t *p = malloc(n ? n : 1);
  if (!p) return 0;
  memcpy(p, data + 1, n);
  if (!bRaw && n >= CSQ_CHUNK_HDR) {
    uint64_t nb = csq_le64(p + 16);
    if (nb >= 12 && nb <= n) put64(p + 4, XXH3_64bits(p + 12, nb - 12));
  }
  csq_vec v;
  csq_vec_init(&v);
  int rc = csq_chunk_decode(p, n, &v);
  csq_chunk_desc d;
  int rcView = csq_chunk_view(p, n, &d);
  if ((rc == 0) != (rcView == 0) && rc != -ENOMEM) abort(); /* decode and view must agree */
  if (csq_chunk_verify(p, n) != 0 && rc == 0) abort();      /* decode implies verify */
  if (rc == 0) {
    uint8_t *q = NULL;
    size_t nq = 0;
    csq_chunk_info info;
    if (csq_chunk_encode(&v, 0, v.n, &q, &nq, &info) == 0) {
      csq_vec w;
      csq_vec_init(&w);
      if (csq_chunk_decode(q, nq, &w) != 0) abort(); /* our own encoding must decode */
      if (!same_vec(&v, &w)) abort();                /* ... to the same values */
      csq_vec_free(&w);
      free(q);
    }
  }
  csq_vec_free(&v);
  free(p);
  return 0;
}
