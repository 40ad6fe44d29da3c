/*
** device/format/keyhash.c - the join key hash (keyhash.h has the rule).
** XXH3 is inlined here so the vector loops need no call per value.
*/
#define XXH_INLINE_ALL
#include <string.h>
#include <xxhash.h>

#include "device/format/keyhash.h"
#include "device/format/le.h"
#include "device/format/vec.h"

/* Seeds that keep the classes apart (any fixed values would do). */
#define SEED_NUM  0x6373714b65794e75ull /* "csqKeyNu" */
#define SEED_TEXT 0x6373714b65795478ull /* "csqKeyTx" */
#define SEED_BLOB 0x6373714b6579426cull /* "csqKeyBl" */
#define SEED_REAL 0x6373714b65795265ull /* "csqKeyRe" */

static inline uint64_t hash_int(int64_t v) {
  uint8_t a[8];
  csq_put_le64(a, (uint64_t)v);
  return XXH3_64bits_withSeed(a, 8, SEED_NUM);
}

/* A REAL: as the integer it equals, if any (see keyhash.h). */
static inline uint64_t hash_real(double r) {
  int64_t i;
  if (csq_real_int(r, &i)) return hash_int(i);
  uint8_t a[8];
  uint64_t u;
  memcpy(&u, &r, 8);
  csq_put_le64(a, u);
  return XXH3_64bits_withSeed(a, 8, SEED_REAL);
}

uint64_t csq_key_hash_int(int64_t v) {
  return hash_int(v);
}

uint64_t csq_key_hash_real(double r) {
  return hash_real(r);
}

uint64_t csq_key_hash_bytes(int cls, const void *p, uint32_t n) {
  static const uint8_t empty = 0;
  return XXH3_64bits_withSeed(n ? p : &empty, n, cls == CSQ_BLOB ? SEED_BLOB : SEED_TEXT);
}

void csq_key_hash_ints(const int64_t *a, uint64_t *aHash, int n) {
  for (int i = 0; i < n; i++) aHash[i] = hash_int(a[i]);
}

void csq_key_hash_reals(const double *a, uint64_t *aHash, int n) {
  for (int i = 0; i < n; i++) aHash[i] = hash_real(a[i]);
}

void csq_key_hash_vec(const csq_vec *v, uint32_t i0, uint32_t n, uint64_t *aHash, uint8_t *aNull) {
  if (v->clsMask == (1u << CSQ_INT)) {
    for (uint32_t k = 0; k < n; k++) aHash[k] = hash_int(v->aVal[i0 + k].i);
    memset(aNull, 0, n);
    return;
  }
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = i0 + k;
    aNull[k] = v->aCls[i] == CSQ_NULL;
    switch (v->aCls[i]) {
    case CSQ_INT:
      aHash[k] = hash_int(v->aVal[i].i);
      break;
    case CSQ_REAL:
      aHash[k] = hash_real(v->aVal[i].r);
      break;
    case CSQ_TEXT:
    case CSQ_BLOB:
      aHash[k] = csq_key_hash_bytes(v->aCls[i], v->aHeap + v->aVal[i].off, v->aLen[i]);
      break;
    default:
      aHash[k] = 0;
    }
  }
}
