/*
** device/format/bloom.c - the split-block Bloom filter (bloom.h has the
** format and the sizing rule).
*/
#include <math.h>
#include <string.h>

#include "device/format/bloom.h"
#include "device/format/le.h"

/* Odd multipliers, one per word of a block: each maps the key's low 32 bits
** to a different bit position (their top 5 bits). Fixed by the format. */
const uint32_t csq_bloom_salt[8] = {0x9E3779B1u, 0x85EBCA77u, 0xC2B2AE3Du, 0x27D4EB2Fu,
                                    0x165667B1u, 0xD3A2646Bu, 0xFD7046C5u, 0xB55A4F09u};

int csq_bloom_size_ok(uint64_t n) {
  return n >= CSQ_BLOOM_MIN_BYTES && n <= CSQ_BLOOM_MAX_BYTES && (n & (n - 1)) == 0;
}

/* The block of hash h in a filter of nBytes. */
static inline uint8_t *bl_block(const void *p, uint32_t nBytes, uint64_t h) {
  uint32_t nBlock = nBytes / CSQ_BLOOM_BLOCK;
  return (uint8_t *)p + (size_t)((uint32_t)(h >> 32) & (nBlock - 1)) * CSQ_BLOOM_BLOCK;
}

static inline uint32_t bl_bit(uint64_t h, int j) {
  return 1u << (((uint32_t)h * csq_bloom_salt[j]) >> 27);
}

void csq_bloom_init(void *p, uint32_t nBytes) {
  memset(p, 0, nBytes);
}

void csq_bloom_add(void *p, uint32_t nBytes, uint64_t h) {
  uint8_t *b = bl_block(p, nBytes, h);
  for (int j = 0; j < 8; j++) csq_put_le32(b + 4 * j, csq_le32(b + 4 * j) | bl_bit(h, j));
}

void csq_bloom_add_many(void *p, uint32_t nBytes, const uint64_t *aHash, int n) {
  for (int i = 0; i < n; i++) csq_bloom_add(p, nBytes, aHash[i]);
}

/* The eight words of a block and the eight bits of h as arrays: a compiler
** targeting 8-lane vectors (AVX2) tests a block in a few instructions. */
static inline int bl_maybe(const void *p, uint32_t nBytes, uint64_t h) {
  const uint8_t *b = bl_block(p, nBytes, h);
  uint32_t aW[8], miss = 0, key = (uint32_t)h;
  memcpy(aW, b, sizeof(aW));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  for (int j = 0; j < 8; j++) aW[j] = __builtin_bswap32(aW[j]);
#endif
  for (int j = 0; j < 8; j++) miss |= ~aW[j] & (1u << ((key * csq_bloom_salt[j]) >> 27));
  return miss == 0;
}

int csq_bloom_maybe(const void *p, uint32_t nBytes, uint64_t h) {
  return bl_maybe(p, nBytes, h);
}

/* A filter larger than the caches makes each probe a memory access: the
** blocks of the keys PREFETCH ahead are requested early, so the accesses
** overlap instead of waiting one after another. */
#define PREFETCH 16

#if defined(__x86_64__) && defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#include <immintrin.h>
/* bl_maybe for aHash[0..n) with AVX2: a block is one 256-bit load, the
** eight bits of a key one multiply, shift and variable shift across the
** eight words. Without it (the build targets baseline x86-64) each key costs
** eight scalar multiplies. Blocks of keys PREFETCH ahead are requested
** early when the filter is large. */
__attribute__((target("avx2"))) static void
maybe_many_avx2(const void *p, uint32_t nBytes, const uint64_t *aHash, uint8_t *aOut, int n) {
  const __m256i vSalt = _mm256_loadu_si256((const __m256i *)(const void *)csq_bloom_salt);
  const __m256i v27 = _mm256_set1_epi32(27), vOne = _mm256_set1_epi32(1);
  const int bPrefetch = nBytes > 32768;
  for (int i = 0; i < n; i++) {
    if (bPrefetch && i + PREFETCH < n) __builtin_prefetch(bl_block(p, nBytes, aHash[i + PREFETCH]));
    uint64_t h = aHash[i];
    __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)bl_block(p, nBytes, h));
    __m256i bit = _mm256_mullo_epi32(_mm256_set1_epi32((int)(uint32_t)h), vSalt);
    bit = _mm256_sllv_epi32(vOne, _mm256_srlv_epi32(bit, v27));
    /* every bit set: bit & ~w is zero */
    aOut[i] = (uint8_t)_mm256_testc_si256(w, bit);
  }
}
#endif

void csq_bloom_maybe_many(const void *p, uint32_t nBytes, const uint64_t *aHash, uint8_t *aOut,
                          int n) {
  int i = 0;
#if defined(__x86_64__) && defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (__builtin_cpu_supports("avx2")) {
    if (nBytes > 32768)
      for (int j = 0; j < n && j < PREFETCH; j++) __builtin_prefetch(bl_block(p, nBytes, aHash[j]));
    maybe_many_avx2(p, nBytes, aHash, aOut, n);
    return;
  }
#endif
  if (nBytes > 32768) {
    for (int j = 0; j < n && j < PREFETCH; j++) __builtin_prefetch(bl_block(p, nBytes, aHash[j]));
    for (; i + PREFETCH < n; i++) {
      __builtin_prefetch(bl_block(p, nBytes, aHash[i + PREFETCH]));
      aOut[i] = (uint8_t)bl_maybe(p, nBytes, aHash[i]);
    }
  }
  for (; i < n; i++) aOut[i] = (uint8_t)bl_maybe(p, nBytes, aHash[i]);
}

/* A block holding k keys answers "maybe" for another key with probability
** (1 - (31/32)^k)^8; k is Poisson with mean nKeys / nBlocks. */
double csq_bloom_fpr(uint64_t nKeys, uint32_t nBytes) {
  if (!csq_bloom_size_ok(nBytes)) return 1.0;
  double lambda = (double)nKeys / (double)(nBytes / CSQ_BLOOM_BLOCK);
  if (nKeys == 0) return 0.0;
  if (lambda > 4096) return 1.0; /* every block saturated */
  double sd = sqrt(lambda), lo = floor(lambda - 12 * sd - 12), hi = ceil(lambda + 12 * sd + 12);
  if (lo < 0) lo = 0;
  double fpr = 0, q = log(31.0 / 32.0);
  for (double k = lo; k <= hi; k++) {
    double pmf = exp(k * log(lambda) - lambda - lgamma(k + 1));
    fpr += pmf * pow(1.0 - exp(k * q), 8);
  }
  return fpr > 1.0 ? 1.0 : fpr;
}

uint32_t csq_bloom_size(uint64_t nKeys, double fpRate) {
  if (fpRate >= 1.0) return CSQ_BLOOM_MIN_BYTES;
  if (!(fpRate > 0.0)) return CSQ_BLOOM_MAX_BYTES;
  uint32_t n = CSQ_BLOOM_MIN_BYTES;
  while (n < CSQ_BLOOM_MAX_BYTES && csq_bloom_fpr(nKeys, n) > fpRate) n *= 2;
  return n;
}
