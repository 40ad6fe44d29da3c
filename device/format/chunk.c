/*
** device/format/chunk.c - column chunks: encoder, checker/decoder, zone maps, and
** the bit-unpacker that scans use on encoded data.
**
** Owns the on-media "Column chunk" format (device/store/FORMAT.md): a 56-byte
** little-endian header, an optional null bitmap, then the sections of one of
** the CSQ_ENC_* encodings, every section starting at a multiple of 8. The
** encoder picks the encoding from the values (see encode_*); the
** decoder trusts nothing in the bytes: csq_chunk_view() verifies the checksum
** and then every count, size, offset, code and tag against the buffer before
** anything is materialised, so corrupt media yields -EBADMSG, never a crash
** or an out-of-bounds read.
**
** Hot loops work on whole arrays (bit packing/unpacking in blocks, memcpy of
** plain sections); there is no per-value function call on the typed paths.
*/
#include "device/format/chunk.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "device/format/checksum.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define CHUNK_MAGIC   "CSQC"
#define CHUNK_VERSION 1
#define FLAG_NULLS    0x01 /* a null bitmap follows the header */

/* Header field offsets (device/store/FORMAT.md, "Column chunk"). */
#define H_MAGIC   0
#define H_XXH3    4
#define H_VERSION 12
#define H_ENC     13
#define H_CLS     14
#define H_FLAGS   15
#define H_NBYTES  16
#define H_NVAL    24
#define H_NNULL   28
#define H_WIDTH   32
#define H_RSVD    33 /* 3 bytes, zero */
#define H_NAUX    36
#define H_REF     40
#define H_NVAR    48

#define BLOCK 1024 /* values per unpack block: fits L1 with its output */

static inline uint64_t pad8(uint64_t x) {
  return (x + 7) & ~(uint64_t)7;
}

static inline uint64_t ld64(const uint8_t *p) {
  uint64_t x;
  memcpy(&x, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  x = __builtin_bswap64(x);
#endif
  return x;
}
static inline uint32_t ld32(const uint8_t *p) {
  uint32_t x;
  memcpy(&x, p, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  x = __builtin_bswap32(x);
#endif
  return x;
}
static inline void st64(uint8_t *p, uint64_t x) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  x = __builtin_bswap64(x);
#endif
  memcpy(p, &x, 8);
}
static inline void st32(uint8_t *p, uint32_t x) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  x = __builtin_bswap32(x);
#endif
  memcpy(p, &x, 4);
}
static inline double bits2dbl(uint64_t b) {
  double r;
  memcpy(&r, &b, 8);
  return r;
}
static inline uint64_t dbl2bits(double r) {
  uint64_t b;
  memcpy(&b, &r, 8);
  return b;
}
/* Bits needed for x (0 for 0). */
static inline unsigned bitlen(uint64_t x) {
  return x ? 64u - (unsigned)__builtin_clzll(x) : 0u;
}

/* BINARY collation: memcmp, then the shorter is smaller. */
static inline int cmp_bytes(const void *a, uint64_t na, const void *b, uint64_t nb) {
  uint64_t m = na < nb ? na : nb;
  int c = m ? memcmp(a, b, (size_t)m) : 0;
  if (c) return c;
  return na < nb ? -1 : na > nb;
}

/* ------------------------------------------------------------------------ */
/* Bit packing                                                              */
/* ------------------------------------------------------------------------ */

/* W(1) ... W(64): the cases of a switch over the code width, one per width,
** so that each loop behind them is compiled with its width as a constant. */
// clang-format off
#define EACH_WIDTH(W)                                                                              \
  W(1)  W(2)  W(3)  W(4)  W(5)  W(6)  W(7)  W(8)  W(9)  W(10) W(11) W(12) W(13) W(14) W(15) W(16) \
  W(17) W(18) W(19) W(20) W(21) W(22) W(23) W(24) W(25) W(26) W(27) W(28) W(29) W(30) W(31) W(32) \
  W(33) W(34) W(35) W(36) W(37) W(38) W(39) W(40) W(41) W(42) W(43) W(44) W(45) W(46) W(47) W(48) \
  W(49) W(50) W(51) W(52) W(53) W(54) W(55) W(56) W(57) W(58) W(59) W(60) W(61) W(62) W(63) W(64)
// clang-format on

/*
** Unpack groups of 8 codes: 8 codes of w bits are exactly w bytes, so within
** a group the bit offset of code j is the constant j*w and, with w a
** compile-time constant (see the switch below), each code is one unaligned
** load, a shift and a mask. The extra byte load for w > 56 stays inside the
** section thanks to its 8 bytes of slack.
*/
static inline __attribute__((always_inline)) uint64_t group_code(const uint8_t *base, unsigned j,
                                                                 const unsigned w) {
  const unsigned bit = j * w, sh = bit & 7;
  uint64_t x = ld64(base + (bit >> 3)) >> sh;
  if (sh + w > 64) x |= (uint64_t)base[(bit >> 3) + 8] << (64 - sh);
  return w == 64 ? x : x & (((uint64_t)1 << w) - 1);
}

static inline __attribute__((always_inline)) void
unpack_groups(const uint8_t *base, uint32_t nGroup, uint64_t *out, const unsigned w) {
  for (uint32_t g = 0; g < nGroup; g++, base += w, out += 8) {
#pragma GCC unroll 8
    for (unsigned j = 0; j < 8; j++) out[j] = group_code(base, j, w);
  }
}

/* One code at a time, for the ragged head and tail of a range. */
static inline uint64_t unpack_one(const uint8_t *packed, unsigned w, uint64_t i) {
  uint64_t bit = i * w;
  const uint8_t *q = packed + (bit >> 6) * 8;
  unsigned s = (unsigned)(bit & 63);
  uint64_t x = ld64(q) >> s;
  if (s + w > 64) x |= ld64(q + 8) << (64 - s);
  return w == 64 ? x : x & (((uint64_t)1 << w) - 1);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* csq_unpack_sel for codes of at most 25 bits with AVX2, 8 at a time: each
** code lies in the 4 bytes from bit i*w rounded down to a byte (its shift
** is at most 7), so one gather of 32-bit words, a per-lane shift and a mask
** give 8 codes. A word read for the last code stays inside the section's 8
** bytes of slack. Returns how many it did (a multiple of 8). */
__attribute__((target("avx2"))) static uint32_t unpack_sel_avx2(const uint8_t *packed, unsigned w,
                                                                const uint32_t *aIdx, uint32_t n,
                                                                uint64_t *out) {
  const __m256i vW = _mm256_set1_epi32((int)w), v7 = _mm256_set1_epi32(7),
                vMask = _mm256_set1_epi32((int)((1u << w) - 1));
  uint32_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256i bit =
        _mm256_mullo_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(aIdx + k)), vW);
    __m256i v =
        _mm256_i32gather_epi32((const int *)(const void *)packed, _mm256_srli_epi32(bit, 3), 1);
    v = _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_and_si256(bit, v7)), vMask);
    _mm256_storeu_si256((__m256i *)(void *)(out + k),
                        _mm256_cvtepu32_epi64(_mm256_castsi256_si128(v)));
    _mm256_storeu_si256((__m256i *)(void *)(out + k + 4),
                        _mm256_cvtepu32_epi64(_mm256_extracti128_si256(v, 1)));
  }
  return k;
}

/* unpack_groups for codes of at most 25 bits with AVX2: a group of 8 codes
** is w bytes, code j's bits lie in the 4 bytes from byte j*w/8 (shift
** j*w%8), the same in every group. Codes 0-3 come from the group's first 16
** bytes, codes 4-7 from the 16 from byte 4*w/8: one byte shuffle puts each
** code's 4 bytes in its lane, then a shift and a mask. The loads reach up
** to w/2 + 16 bytes from the group's start, past the group itself for
** narrow codes, so the caller leaves the last groups to the scalar loop. */
__attribute__((target("avx2"))) static void unpack_groups_avx2(const uint8_t *base, uint32_t nGroup,
                                                               uint64_t *out, unsigned w) {
  uint8_t aCtl[32];
  uint32_t aSh[8];
  unsigned off1 = (4 * w) >> 3;
  for (unsigned j = 0; j < 8; j++) {
    unsigned bit = j * w, b = (bit >> 3) - (j < 4 ? 0 : off1);
    for (unsigned i = 0; i < 4; i++) aCtl[(j < 4 ? 0 : 16) + 4 * (j & 3) + i] = (uint8_t)(b + i);
    aSh[j] = bit & 7;
  }
  const __m256i vCtl = _mm256_loadu_si256((const __m256i *)(const void *)aCtl),
                vSh = _mm256_loadu_si256((const __m256i *)(const void *)aSh),
                vMask = _mm256_set1_epi32((int)((1u << w) - 1));
  for (uint32_t g = 0; g < nGroup; g++, base += w, out += 8) {
    __m256i v = _mm256_loadu2_m128i((const __m128i *)(const void *)(base + off1),
                                    (const __m128i *)(const void *)base);
    v = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(v, vCtl), vSh), vMask);
    _mm256_storeu_si256((__m256i *)(void *)out, _mm256_cvtepu32_epi64(_mm256_castsi256_si128(v)));
    _mm256_storeu_si256((__m256i *)(void *)(out + 4),
                        _mm256_cvtepu32_epi64(_mm256_extracti128_si256(v, 1)));
  }
}
#endif

void csq_unpack_sel(const uint8_t *packed, unsigned w, const uint32_t *aIdx, uint32_t n,
                    uint64_t *out) {
  if (w == 0 || w > 64) {
    memset(out, 0, (size_t)n * 8);
    return;
  }
  uint32_t k = 0;
#if defined(__x86_64__) && defined(__GNUC__)
  /* row numbers stay below CSQ_CHUNK_MAX_VALS (2^20), so i*w fits 32 bits */
  if (w <= 25 && n >= 8 && __builtin_cpu_supports("avx2"))
    k = unpack_sel_avx2(packed, w, aIdx, n, out);
#endif
  for (; k < n; k++) out[k] = unpack_one(packed, w, aIdx[k]);
}

void csq_unpack_u64(const uint8_t *packed, unsigned w, uint32_t i0, uint32_t n, uint64_t *out) {
  if (w == 0 || w > 64) {
    memset(out, 0, (size_t)n * 8);
    return;
  }
  uint32_t k = 0;
  while (k < n && ((i0 + k) & 7)) {
    out[k] = unpack_one(packed, w, (uint64_t)i0 + k);
    k++;
  }
  uint32_t nGroup = (n - k) / 8;
#if defined(__x86_64__) && defined(__GNUC__)
  /* The last AVX2 group's loads end w/2 + 16 bytes from its start; the t
  ** full groups after it and the section's 8 bytes of slack give (t+1)*w + 8. */
  uint32_t nTail = ((w >> 1) + 8 + w - 1) / w - 1;
  if (w <= 25 && nGroup > nTail && __builtin_cpu_supports("avx2")) {
    unpack_groups_avx2(packed + ((uint64_t)(i0 + k) / 8) * w, nGroup - nTail, out + k, w);
    k += (nGroup - nTail) * 8;
    nGroup = nTail;
  }
#endif
  if (nGroup) {
    const uint8_t *base = packed + ((uint64_t)(i0 + k) / 8) * w;
    switch (w) {
#define W(x)                                                                                       \
  case x:                                                                                          \
    unpack_groups(base, nGroup, out + k, x);                                                       \
    break;
      EACH_WIDTH(W)
#undef W
    }
    k += nGroup * 8;
  }
  for (; k < n; k++) out[k] = unpack_one(packed, w, (uint64_t)i0 + k);
}

/*
** Decimal-scaled values without a division. A double division costs about
** as much as the rest of an aggregate's work per value, and REAL_DEC
** columns (prices, rates) are converted on every scan. With FMA, the
** quotient a/b is q0 = a*y (y = 1/b rounded), corrected once:
** r = a - b*q0 is exact under FMA, and q0 + r*y rounds to a/b exactly
** (Markstein's theorem: y within half an ulp of 1/b, q0 within one ulp of
** a/b). a = code + ref is formed in doubles exactly: a code under 2^52 is
** read through the exponent trick, and the sum of two integers that are
** doubles is exact while it stays under 2^53, which the encoder ensures
** (encode checks each value's round trip). test_chunk compares this with
** the division bit for bit. Four lanes at a time with AVX2 where the CPU
** has it (Q1 view: about 12% less CPU than two lanes, measured in
** alternating runs on this project's Xeon), never 512-bit vectors: those
** slow the scalar code that follows on the same core (its clock drops) by
** more than they save, which is also why chunk checksums do not use
** xxHash's AVX-512 dispatch.
*/
static inline double u52_to_double(uint64_t u) {
  uint64_t b = u | 0x4330000000000000ull; /* 2^52 + u */
  double d;
  memcpy(&d, &b, 8);
  return d - 4503599627370496.0;
}

#if defined(__x86_64__)
/* dec_values_fma's loop four lanes at a time (AVX2 for the 64-bit integer
** OR); returns the values done (a multiple of 4) and ORs the codes into *pOr. */
__attribute__((target("avx2,fma"))) static uint32_t dec_values_avx2(const uint64_t *u, uint32_t n,
                                                                    double r0, double y, double p10,
                                                                    double *out, uint64_t *pOr) {
  const __m256d vy = _mm256_set1_pd(y), vp = _mm256_set1_pd(p10), vr0 = _mm256_set1_pd(r0),
                v52 = _mm256_set1_pd(4503599627370496.0);
  const __m256i vexp = _mm256_set1_epi64x(0x4330000000000000ll);
  __m256i vor = _mm256_setzero_si256();
  uint32_t k = 0;
  for (; k + 4 <= n; k += 4) {
    __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(u + k));
    vor = _mm256_or_si256(vor, c);
    __m256d a =
        _mm256_add_pd(_mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(c, vexp)), v52), vr0);
    __m256d q = _mm256_mul_pd(a, vy);
    _mm256_storeu_pd(out + k, _mm256_fmadd_pd(_mm256_fnmadd_pd(q, vp, a), vy, q));
  }
  uint64_t aOr[4];
  _mm256_storeu_si256((__m256i *)(void *)aOr, vor);
  *pOr |= aOr[0] | aOr[1] | aOr[2] | aOr[3];
  return k;
}

/* Returns the OR of the codes: the caller redoes the work by division if
** a code was too wide for the exponent trick. */
__attribute__((target("fma"))) static uint64_t
dec_values_fma(const uint64_t *u, uint32_t n, int64_t ref, double p10, double *out) {
  const double y = 1.0 / p10, r0 = (double)ref;
  const __m128d vy = _mm_set1_pd(y), vp = _mm_set1_pd(p10), vr0 = _mm_set1_pd(r0),
                v52 = _mm_set1_pd(4503599627370496.0);
  const __m128i vexp = _mm_set1_epi64x(0x4330000000000000ll);
  __m128i vor = _mm_setzero_si128();
  uint32_t k = 0;
  uint64_t mx = 0;
  if (n >= 16 && __builtin_cpu_supports("avx2")) k = dec_values_avx2(u, n, r0, y, p10, out, &mx);
  for (; k + 2 <= n; k += 2) {
    __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(u + k));
    vor = _mm_or_si128(vor, c);
    __m128d a = _mm_add_pd(_mm_sub_pd(_mm_castsi128_pd(_mm_or_si128(c, vexp)), v52), vr0);
    __m128d q = _mm_mul_pd(a, vy);
    _mm_storeu_pd(out + k, _mm_fmadd_pd(_mm_fnmadd_pd(q, vp, a), vy, q));
  }
  uint64_t aOr[2];
  _mm_storeu_si128((__m128i *)(void *)aOr, vor);
  mx |= aOr[0] | aOr[1];
  for (; k < n; k++) {
    mx |= u[k];
    double a = u52_to_double(u[k] & (((uint64_t)1 << 52) - 1)) + r0, q = a * y;
    out[k] = __builtin_fma(__builtin_fma(-q, p10, a), y, q);
  }
  return mx;
}
#endif

void csq_dec_values(const uint64_t *u, uint32_t n, int64_t ref, unsigned scale, double *out) {
  const double p10 = csq_pow10(scale);
#if defined(__x86_64__)
  int64_t aref = ref < 0 ? -(ref + 1) : ref;
  if (aref < ((int64_t)1 << 52) && __builtin_cpu_supports("fma") &&
      dec_values_fma(u, n, ref, p10, out) < ((uint64_t)1 << 52))
    return;
#endif
  /* no FMA, or a code of 52 bits or more: divide */
  for (uint32_t k = 0; k < n; k++) out[k] = (double)(int64_t)(u[k] + (uint64_t)ref) / p10;
}

/* Groups of 8 codes as in unpack_groups, each code tested and its index
** appended without a branch (the store always happens, the count moves
** only for a selected code). */
static inline __attribute__((always_inline)) uint32_t
select_groups(const uint8_t *base, uint32_t nGroup, uint32_t i, uint64_t lo, uint64_t w,
              uint64_t neg, uint32_t *out, const unsigned wd) {
  uint32_t m = 0;
  for (uint32_t g = 0; g < nGroup; g++, base += wd, i += 8) {
#pragma GCC unroll 8
    for (unsigned j = 0; j < 8; j++) {
      out[m] = i + j;
      m += (uint32_t)((group_code(base, j, wd) - lo <= w) ^ neg);
    }
  }
  return m;
}

#if defined(__x86_64__) && defined(__GNUC__)
/*
** select_groups for codes of at most 16 bits with AVX2, 8 codes per step:
** the group's w bytes are broadcast to both halves of a register, a byte
** shuffle puts each code's bytes in its own 32-bit lane, a per-lane shift
** and a mask leave the code, two unsigned compares test lo <= code <= hi,
** and the 8 results come out as a bit mask (all 8 taken at once when all
** pass). Only groups whose 16-byte load stays inside the codes up to
** i + 8*nGroup (plus the section's 8 bytes of slack) come here. Integer
** operations only: no clock penalty for the scalar code around it.
*/
__attribute__((target("avx2,bmi2,popcnt"))) static uint32_t
select_groups_avx2(const uint8_t *base, uint32_t nGroup, uint32_t i, uint32_t lo, uint32_t hi,
                   unsigned neg, uint32_t *out, unsigned w) {
  uint8_t aShuf[32];
  uint32_t aShift[8];
  for (unsigned j = 0; j < 8; j++) {
    unsigned b = (j * w) >> 3;
    aShift[j] = (j * w) & 7;
    for (unsigned t = 0; t < 4; t++) {
      uint8_t x = b + t <= 15 ? (uint8_t)(b + t) : 0x80;
      aShuf[(j & 3) * 4 + t + (j >= 4 ? 16 : 0)] = x;
    }
  }
  const __m256i vShuf = _mm256_loadu_si256((const __m256i *)(const void *)aShuf),
                vShift = _mm256_loadu_si256((const __m256i *)(const void *)aShift),
                vMask = _mm256_set1_epi32((int)((1u << w) - 1)), vLo = _mm256_set1_epi32((int)lo),
                vHi = _mm256_set1_epi32((int)hi), vIota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const unsigned negBits = neg ? 0xFFu : 0u;
  uint32_t m = 0;
  for (uint32_t g = 0; g < nGroup; g++, base += w, i += 8) {
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)base));
    v = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(v, vShuf), vShift), vMask);
    __m256i ok = _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_max_epu32(v, vLo), v),
                                  _mm256_cmpeq_epi32(_mm256_min_epu32(v, vHi), v));
    unsigned bits = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(ok)) ^ negBits;
    /* compress without a branch: the selected lanes' numbers move to the
    ** front (byte k of wanted = the k-th selected lane), all 8 are stored,
    ** and only the selected count advances (out has room: m <= i - i0) */
    uint64_t wanted =
        _pext_u64(0x0706050403020100ull, _pdep_u64(bits, 0x0101010101010101ull) * 0xFF);
    __m256i perm = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)wanted));
    _mm256_storeu_si256(
        (__m256i *)(void *)(out + m),
        _mm256_permutevar8x32_epi32(_mm256_add_epi32(_mm256_set1_epi32((int)i), vIota), perm));
    m += (uint32_t)__builtin_popcount(bits);
  }
  return m;
}
#endif

uint32_t csq_select_range(const uint8_t *packed, unsigned w, uint32_t i0, uint32_t n, uint64_t lo,
                          uint64_t wid, int neg, uint32_t *out) {
  uint64_t ng = neg ? 1 : 0;
  uint32_t k = 0, m = 0;
  if (w == 0 || w > 64) { /* every code is 0 */
    if (((0 - lo <= wid) ^ ng) != 0)
      for (; k < n; k++) out[k] = i0 + k;
    return k;
  }
  while (k < n && ((i0 + k) & 7)) {
    out[m] = i0 + k;
    m += (uint32_t)(((unpack_one(packed, w, (uint64_t)i0 + k) - lo) <= wid) ^ ng);
    k++;
  }
  uint32_t nGroup = (n - k) / 8;
#if defined(__x86_64__) && defined(__GNUC__)
  /* groups left to the scalar loop so that no 16-byte load passes the 8
  ** bytes of slack after the codes: ceil(8 / w) groups of w bytes */
  uint32_t nTail = (8 + w - 1) / w;
  if (nGroup > nTail && w <= 16 && lo < ((uint64_t)1 << 16) && wid <= UINT64_MAX - lo &&
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2") &&
      __builtin_cpu_supports("popcnt")) {
    /* codes are below 2^16, so the range is [lo, min(lo + wid, 2^32 - 1)] */
    uint64_t hi = lo + wid > UINT32_MAX ? UINT32_MAX : lo + wid;
    uint32_t nv = nGroup - nTail;
    m += select_groups_avx2(packed + ((uint64_t)(i0 + k) / 8) * w, nv, i0 + k, (uint32_t)lo,
                            (uint32_t)hi, (unsigned)ng, out + m, w);
    k += nv * 8;
    nGroup -= nv;
  }
#endif
  if (nGroup) {
    const uint8_t *base = packed + ((uint64_t)(i0 + k) / 8) * w;
    switch (w) {
#define W(x)                                                                                       \
  case x:                                                                                          \
    m += select_groups(base, nGroup, i0 + k, lo, wid, ng, out + m, x);                             \
    break;
      EACH_WIDTH(W)
#undef W
    }
    k += nGroup * 8;
  }
  for (; k < n; k++) {
    out[m] = i0 + k;
    m += (uint32_t)(((unpack_one(packed, w, (uint64_t)i0 + k) - lo) <= wid) ^ ng);
  }
  return m;
}

/* ------------------------------------------------------------------------ */
/* Zone maps                                                                */
/* ------------------------------------------------------------------------ */

static void zone_set_min(csq_zone *z, const void *p, uint64_t n) {
  z->nMinTxt = (uint8_t)(n > CSQ_ZONE_PREFIX ? CSQ_ZONE_PREFIX : n);
  z->bMinTrunc = n > CSQ_ZONE_PREFIX;
  if (z->nMinTxt) memcpy(z->zMinTxt, p, z->nMinTxt);
}
static void zone_set_max(csq_zone *z, const void *p, uint64_t n) {
  z->nMaxTxt = (uint8_t)(n > CSQ_ZONE_PREFIX ? CSQ_ZONE_PREFIX : n);
  z->bMaxTrunc = n > CSQ_ZONE_PREFIX;
  if (z->nMaxTxt) memcpy(z->zMaxTxt, p, z->nMaxTxt);
}

/*
** Merge zone b into a. Fields are combined only where the class masks say
** they are valid. Min/max prefixes merge exactly: two prefixes that compare
** unequal order their full values the same way (a proper prefix is only
** possible for an untruncated, hence complete, value), and equal prefixes
** keep the min untruncated if either is, the max truncated if either is.
** nVal/nNull saturate at UINT32_MAX.
*/
void csq_zone_merge(csq_zone *a, const csq_zone *b) {
  const uint8_t mI = 1u << CSQ_INT, mNum = (1u << CSQ_INT) | (1u << CSQ_REAL);
  const uint8_t mT = 1u << CSQ_TEXT, mB = 1u << CSQ_BLOB;
  uint64_t nv = (uint64_t)a->nVal + b->nVal, nn = (uint64_t)a->nNull + b->nNull;
  a->nVal = nv > UINT32_MAX ? UINT32_MAX : (uint32_t)nv;
  a->nNull = nn > UINT32_MAX ? UINT32_MAX : (uint32_t)nn;
  if (b->clsMask & mI) {
    if (!(a->clsMask & mI)) {
      a->iMin = b->iMin;
      a->iMax = b->iMax;
    } else {
      if (b->iMin < a->iMin) a->iMin = b->iMin;
      if (b->iMax > a->iMax) a->iMax = b->iMax;
    }
  }
  if (b->clsMask & mNum) {
    if (!(a->clsMask & mNum)) {
      a->rMin = b->rMin;
      a->rMax = b->rMax;
    } else {
      if (b->rMin < a->rMin) a->rMin = b->rMin;
      if (b->rMax > a->rMax) a->rMax = b->rMax;
    }
  }
  /* Which class the text fields describe: 2 = TEXT, 1 = BLOB (no TEXT), 0 = none. */
  int ka = (a->clsMask & mT) ? 2 : (a->clsMask & mB) ? 1 : 0;
  int kb = (b->clsMask & mT) ? 2 : (b->clsMask & mB) ? 1 : 0;
  if (kb > ka) { /* b's fields describe the class that a's must now describe */
    a->nMinTxt = b->nMinTxt;
    a->bMinTrunc = b->bMinTrunc;
    memcpy(a->zMinTxt, b->zMinTxt, sizeof(a->zMinTxt));
    a->nMaxTxt = b->nMaxTxt;
    a->bMaxTrunc = b->bMaxTrunc;
    memcpy(a->zMaxTxt, b->zMaxTxt, sizeof(a->zMaxTxt));
  } else if (kb && kb == ka) {
    int c = cmp_bytes(b->zMinTxt, b->nMinTxt, a->zMinTxt, a->nMinTxt);
    if (c < 0) {
      a->nMinTxt = b->nMinTxt;
      a->bMinTrunc = b->bMinTrunc;
      memcpy(a->zMinTxt, b->zMinTxt, sizeof(a->zMinTxt));
    } else if (c == 0) {
      a->bMinTrunc = a->bMinTrunc && b->bMinTrunc;
    }
    c = cmp_bytes(b->zMaxTxt, b->nMaxTxt, a->zMaxTxt, a->nMaxTxt);
    if (c > 0) {
      a->nMaxTxt = b->nMaxTxt;
      a->bMaxTrunc = b->bMaxTrunc;
      memcpy(a->zMaxTxt, b->zMaxTxt, sizeof(a->zMaxTxt));
    } else if (c == 0) {
      a->bMaxTrunc = a->bMaxTrunc || b->bMaxTrunc;
    }
  }
  a->clsMask |= b->clsMask;
}

/*
** Numeric and text zone fields by brute force over the values of v[i0, i0+n)
** (used for BLOB, plain TEXT and mixed chunks; INT and REAL compute theirs on the
** way). NaN never reaches a SQLite column, but if one does it is left out of
** rMin/rMax, and a chunk of NaNs only gets the all-covering [-inf, +inf].
*/
static void zone_scan(csq_zone *z, const csq_vec *v, uint32_t i0, uint32_t n) {
  int bInt = 0, bNum = 0;
  const uint8_t kTxt = (z->clsMask & (1u << CSQ_TEXT)) ? CSQ_TEXT : CSQ_BLOB;
  const char *zMin = 0, *zMax = 0;
  uint64_t nMin = 0, nMax = 0;
  int bHaveTxt = 0;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = i0 + k;
    uint8_t c = v->aCls[i];
    if (c == CSQ_INT) {
      int64_t x = v->aVal[i].i;
      if (!bInt)
        z->iMin = z->iMax = x, bInt = 1;
      else if (x < z->iMin)
        z->iMin = x;
      else if (x > z->iMax)
        z->iMax = x;
      double r = (double)x;
      if (!bNum)
        z->rMin = z->rMax = r, bNum = 1;
      else if (r < z->rMin)
        z->rMin = r;
      else if (r > z->rMax)
        z->rMax = r;
    } else if (c == CSQ_REAL) {
      double r = v->aVal[i].r;
      if (isnan(r)) continue;
      if (!bNum)
        z->rMin = z->rMax = r, bNum = 1;
      else if (r < z->rMin)
        z->rMin = r;
      else if (r > z->rMax)
        z->rMax = r;
    } else if (c == kTxt) {
      const char *p = csq_vec_bytes(v, i);
      uint32_t len = v->aLen[i];
      if (!bHaveTxt) {
        zMin = zMax = p, nMin = nMax = len, bHaveTxt = 1;
      } else if (cmp_bytes(p, len, zMin, nMin) < 0) {
        zMin = p, nMin = len;
      } else if (cmp_bytes(p, len, zMax, nMax) > 0) {
        zMax = p, nMax = len;
      }
    }
  }
  if (!bNum && (z->clsMask & (1u << CSQ_REAL))) {
    z->rMin = -INFINITY;
    z->rMax = INFINITY;
  }
  if (bHaveTxt) {
    zone_set_min(z, zMin, nMin);
    zone_set_max(z, zMax, nMax);
  }
}

/* ------------------------------------------------------------------------ */
/* Encoder                                                                  */
/* ------------------------------------------------------------------------ */

/* What the encoder decided; turned into a header by chunk_alloc(). */
typedef struct enc_plan {
  uint8_t enc, cls, width;
  uint32_t nVal, nNull, nAux;
  uint64_t ref, nVar;
  uint64_t nPayload; /* bytes after the header and the bitmap */
} enc_plan;

/* Allocate the chunk (zeroed, so padding is deterministic), fill the header
** except the checksum, and write the null bitmap of v[i0, i0+n). Returns the
** buffer and the offset of the payload in *piPay, or NULL. */
static uint8_t *chunk_alloc(const enc_plan *pl, const csq_vec *v, uint32_t i0, uint64_t *pnBytes,
                            uint64_t *piPay) {
  int bNulls = pl->nNull > 0 && pl->nNull < pl->nVal;
  uint64_t nMap = bNulls ? pad8(((uint64_t)pl->nVal + 7) / 8) : 0;
  uint64_t nBytes = CSQ_CHUNK_HDR + nMap + pl->nPayload;
  if (nBytes > SIZE_MAX) return 0;
  uint8_t *p = calloc(1, (size_t)nBytes);
  if (!p) return 0;
  memcpy(p + H_MAGIC, CHUNK_MAGIC, 4);
  p[H_VERSION] = CHUNK_VERSION;
  p[H_ENC] = pl->enc;
  p[H_CLS] = pl->cls;
  p[H_FLAGS] = bNulls ? FLAG_NULLS : 0;
  st64(p + H_NBYTES, nBytes);
  st32(p + H_NVAL, pl->nVal);
  st32(p + H_NNULL, pl->nNull);
  p[H_WIDTH] = pl->width;
  st32(p + H_NAUX, pl->nAux);
  st64(p + H_REF, pl->ref);
  st64(p + H_NVAR, pl->nVar);
  if (bNulls) {
    uint8_t *m = p + CSQ_CHUNK_HDR;
    const uint8_t *aCls = v->aCls + i0;
    for (uint32_t k = 0; k < pl->nVal; k++)
      m[k >> 3] |= (uint8_t)((aCls[k] == CSQ_NULL) << (k & 7));
  }
  *pnBytes = nBytes;
  *piPay = CSQ_CHUNK_HDR + nMap;
  return p;
}

/*
** Streaming bit packer into a zeroed section: codes arrive in blocks (so no
** encoder needs a temporary array the size of the chunk). Groups of 8 codes
** fill exactly w bytes; with w a compile-time constant (the switch below) a
** group is assembled in registers and written with whole-word stores. A
** store may spill zeros past the group's w bytes: only into bytes of later
** codes (written afterwards) or the section's slack. Codes outside whole
** groups are OR-ed in one at a time.
*/
typedef struct packer {
  uint8_t *base; /* start of the section */
  uint64_t pos;  /* codes written */
} packer;

static inline void pack_one(uint8_t *base, unsigned w, uint64_t i, uint64_t x) {
  uint64_t bit = i * w;
  uint8_t *q = base + (bit >> 6) * 8;
  unsigned s = (unsigned)(bit & 63);
  st64(q, ld64(q) | x << s);
  if (s + w > 64) st64(q + 8, ld64(q + 8) | x >> (64 - s));
}

static inline __attribute__((always_inline)) void
pack_groups(uint8_t *base, const uint64_t *a, uint32_t nGroup, uint64_t ref, const unsigned w) {
  const uint64_t mask = w == 64 ? ~(uint64_t)0 : ((uint64_t)1 << w) - 1;
  for (uint32_t g = 0; g < nGroup; g++, base += w, a += 8) {
    uint64_t t[9] = {0};
#pragma GCC unroll 8
    for (unsigned j = 0; j < 8; j++) {
      const unsigned bit = j * w, wi = bit >> 6, sh = bit & 63;
      uint64_t x = (a[j] - ref) & mask;
      t[wi] |= x << sh;
      if (sh && sh + w > 64) t[wi + 1] |= x >> (64 - sh);
    }
#pragma GCC unroll 8
    for (unsigned q = 0; q < (w + 7) / 8; q++) st64(base + 8 * q, t[q]);
  }
}

/* Append codes (a[i] - ref) mod 2^w, i < n, w in 1..64. */
static void pack_codes(packer *pk, const uint64_t *a, uint32_t n, unsigned w, uint64_t ref) {
  const uint64_t mask = w == 64 ? ~(uint64_t)0 : ((uint64_t)1 << w) - 1;
  uint32_t k = 0;
  for (; k < n && (pk->pos & 7); k++, pk->pos++)
    pack_one(pk->base, w, pk->pos, (a[k] - ref) & mask);
  uint32_t nGroup = (n - k) / 8;
  if (nGroup) {
    uint8_t *base = pk->base + (pk->pos / 8) * w;
    switch (w) {
#define W(x)                                                                                       \
  case x:                                                                                          \
    pack_groups(base, a + k, nGroup, ref, x);                                                      \
    break;
      EACH_WIDTH(W)
#undef W
    }
    k += nGroup * 8;
    pk->pos += (uint64_t)nGroup * 8;
  }
  for (; k < n; k++, pk->pos++) pack_one(pk->base, w, pk->pos, (a[k] - ref) & mask);
}

/*
** INT values (plus NULLs) of v[i0, i0+n), at least one INT: CONST, INT_FOR
** or INT_RLE, whichever is smallest. NULL slots are coded as the previous
** value (the first value for leading NULLs) so that they never break a run;
** with FOR they cost nothing extra either way. One pass finds min, max and
** the run count, a second packs, block by block.
*/
static int encode_int(const csq_vec *v, uint32_t i0, uint32_t n, uint32_t nNull, csq_zone *z,
                      uint8_t **pp, uint64_t *pnBytes) {
  const csq_val *a = v->aVal + i0;
  const uint8_t *aCls = v->aCls + i0;
  uint32_t k0 = 0;
  if (nNull)
    while (aCls[k0] == CSQ_NULL) k0++;
  int64_t mn = a[k0].i, mx = a[k0].i;
  uint32_t nRun = 1;
  if (nNull == 0) {
    for (uint32_t k = 0; k < n; k++) {
      int64_t x = a[k].i;
      mn = x < mn ? x : mn;
      mx = x > mx ? x : mx;
    }
    for (uint32_t k = 1; k < n; k++) nRun += a[k].i != a[k - 1].i;
  } else {
    int64_t prev = a[k0].i;
    for (uint32_t k = k0; k < n; k++) {
      if (aCls[k] == CSQ_NULL) continue;
      int64_t x = a[k].i;
      mn = x < mn ? x : mn;
      mx = x > mx ? x : mx;
      nRun += x != prev;
      prev = x;
    }
  }
  z->iMin = mn;
  z->iMax = mx;
  z->rMin = (double)mn;
  z->rMax = (double)mx;

  enc_plan pl = {.cls = CSQ_INT, .nVal = n, .nNull = nNull, .ref = (uint64_t)mn};
  if (mn == mx) {
    pl.enc = CSQ_ENC_CONST;
  } else {
    pl.width = (uint8_t)bitlen((uint64_t)mx - (uint64_t)mn);
    uint64_t nFor = csq_packed_size(n, pl.width);
    uint64_t nRle = csq_packed_size(nRun, pl.width) + pad8((uint64_t)nRun * 4);
    if (nRle < nFor) {
      pl.enc = CSQ_ENC_INT_RLE;
      pl.nAux = nRun;
      pl.nPayload = nRle;
    } else {
      pl.enc = CSQ_ENC_INT_FOR;
      pl.nPayload = nFor;
    }
  }
  uint64_t iPay;
  uint8_t *p = chunk_alloc(&pl, v, i0, pnBytes, &iPay);
  if (!p) return -ENOMEM;
  uint64_t aBuf[BLOCK];
  packer pk = {p + iPay, 0};
  if (pl.enc == CSQ_ENC_INT_FOR && nNull == 0) {
    pack_codes(&pk, (const uint64_t *)(const void *)a, n, pl.width, pl.ref);
  } else if (pl.enc == CSQ_ENC_INT_FOR) {
    uint64_t prev = (uint64_t)a[k0].i;
    for (uint32_t k = 0; k < n; k += BLOCK) {
      uint32_t m = n - k < BLOCK ? n - k : BLOCK;
      for (uint32_t j = 0; j < m; j++) {
        prev = aCls[k + j] == CSQ_NULL ? prev : (uint64_t)a[k + j].i;
        aBuf[j] = prev;
      }
      pack_codes(&pk, aBuf, m, pl.width, pl.ref);
    }
  } else if (pl.enc == CSQ_ENC_INT_RLE) {
    /* Run values are packed a block at a time; run ends go straight out. */
    uint8_t *aEnd = p + iPay + csq_packed_size(nRun, pl.width);
    uint64_t cur = (uint64_t)a[k0].i;
    uint32_t r = 0, m = 0;
    for (uint32_t k = k0; k < n; k++) {
      if (aCls[k] == CSQ_NULL || (uint64_t)a[k].i == cur) continue;
      aBuf[m++] = cur;
      st32(aEnd + 4 * (uint64_t)r++, k);
      cur = (uint64_t)a[k].i;
      if (m == BLOCK) pack_codes(&pk, aBuf, m, pl.width, pl.ref), m = 0;
    }
    aBuf[m++] = cur;
    st32(aEnd + 4 * (uint64_t)r, n);
    pack_codes(&pk, aBuf, m, pl.width, pl.ref);
  }
  *pp = p;
  return 0;
}

/* 1 if x is exactly (double)k / 10^s for the integer k = round(x * 10^s),
** |k| <= 2^53 (so that (double)k is exact); *pk gets k. -0.0, NaN and the
** infinities never are. */
static int dec_exact(double x, unsigned s, int64_t *pk) {
  double y = x * csq_pow10(s);
  if (!(fabs(y) <= 9007199254740992.0)) return 0;
  int64_t k = (int64_t)llrint(y);
  if (dbl2bits((double)k / csq_pow10(s)) != dbl2bits(x)) return 0;
  *pk = k;
  return 1;
}

/*
** Can the REAL values of v[i0, i0+n) be stored as decimal-scaled integers?
** If x = k / 10^s exactly (as a correctly rounded division) then also
** x = (k * 10^t) / 10^(s+t), the same rational number, as long as the
** integer stays exact: so the smallest scale that suits the most demanding
** value suits all, and each value is tried from the scale found so far
** upward (one try for most). Sets *pScale, the smallest integer *pkMin and
** the code width; 0 when some value has no such form.
*/
static int real_dec_plan(const csq_vec *v, uint32_t i0, uint32_t n, uint32_t nNull, int64_t *aK,
                         unsigned *pScale, int64_t *pkMin, uint8_t *pWidth) {
  const csq_val *a = v->aVal + i0;
  const uint8_t *aCls = v->aCls + i0;
  unsigned s = 0;
  int64_t k;
  for (uint32_t i = 0; i < n; i++) {
    if (nNull && aCls[i] == CSQ_NULL) continue;
    while (!dec_exact(a[i].r, s, &k))
      if (++s > CSQ_DEC_MAX_SCALE) return 0;
  }
  /* the integers at the final scale, checked again: a value exact at a
  ** smaller scale is exact here in exact arithmetic, but x * 10^s is not */
  int64_t mn = INT64_MAX, mx = INT64_MIN;
  for (uint32_t i = 0; i < n; i++) {
    if (nNull && aCls[i] == CSQ_NULL) continue;
    if (!dec_exact(a[i].r, s, &k)) return 0;
    aK[i] = k;
    mn = k < mn ? k : mn;
    mx = k > mx ? k : mx;
  }
  if (mn > mx) return 0;
  if (nNull) /* NULL slots take code 0 */
    for (uint32_t i = 0; i < n; i++)
      if (aCls[i] == CSQ_NULL) aK[i] = mn;
  *pScale = s;
  *pkMin = mn;
  *pWidth = (uint8_t)bitlen((uint64_t)mx - (uint64_t)mn);
  return *pWidth > 0; /* one value only: CONST would have been chosen */
}

/* REAL values (plus NULLs): CONST when every value has the same bits,
** REAL_DEC when they are decimals of a few digits (prices, rates) and that
** is smaller, else REAL_PLAIN (bits kept exactly: -0.0 stays -0.0, NaN payloads survive).
** NaN (which SQLite never stores) is left out of rMin/rMax; a chunk of only
** NaNs gets the all-covering [-inf, +inf]. */
static int encode_real(const csq_vec *v, uint32_t i0, uint32_t n, uint32_t nNull, csq_zone *z,
                       uint8_t **pp, uint64_t *pnBytes) {
  const csq_val *a = v->aVal + i0;
  const uint8_t *aCls = v->aCls + i0;
  uint32_t k0 = 0;
  if (nNull)
    while (aCls[k0] == CSQ_NULL) k0++;
  const uint64_t first = dbl2bits(a[k0].r);
  double mn = INFINITY, mx = -INFINITY;
  uint64_t diff = 0; /* nonzero once some value's bits differ from the first's */
  for (uint32_t k = k0; k < n; k++) {
    if (nNull && aCls[k] == CSQ_NULL) continue;
    double r = a[k].r;
    mn = r < mn ? r : mn; /* false for NaN: NaN is skipped */
    mx = r > mx ? r : mx;
    diff |= dbl2bits(r) ^ first;
  }
  if (mn > mx) mn = -INFINITY, mx = INFINITY;
  z->rMin = mn;
  z->rMax = mx;
  enc_plan pl = {.cls = CSQ_REAL, .nVal = n, .nNull = nNull};
  unsigned scale = 0;
  int64_t kMin = 0, *aK = NULL; /* REAL_DEC: the integers */
  if (diff == 0) {
    pl.enc = CSQ_ENC_CONST;
    pl.ref = first;
  } else if ((aK = malloc(sizeof(int64_t) * (n ? n : 1))) == NULL) {
    return -ENOMEM;
  } else if (real_dec_plan(v, i0, n, nNull, aK, &scale, &kMin, &pl.width) &&
             csq_packed_size(n, pl.width) < (uint64_t)n * 8) {
    pl.enc = CSQ_ENC_REAL_DEC;
    pl.nAux = scale;
    pl.ref = (uint64_t)kMin;
    pl.nPayload = csq_packed_size(n, pl.width);
  } else {
    pl.enc = CSQ_ENC_REAL_PLAIN;
    pl.width = 0;
    pl.nPayload = (uint64_t)n * 8;
  }
  uint64_t iPay;
  uint8_t *p = chunk_alloc(&pl, v, i0, pnBytes, &iPay);
  if (!p) {
    free(aK);
    return -ENOMEM;
  }
  if (pl.enc == CSQ_ENC_REAL_DEC) {
    packer pk = {p + iPay, 0};
    pack_codes(&pk, (const uint64_t *)aK, n, pl.width, pl.ref);
  } else if (diff) {
    uint8_t *q = p + iPay;
    for (uint32_t k = 0; k < n; k++) st64(q + 8 * (uint64_t)k, dbl2bits(a[k].r));
    if (nNull) /* NULL slots hold 0.0 whatever the vector had there */
      for (uint32_t k = 0; k < n; k++)
        if (aCls[k] == CSQ_NULL) st64(q + 8 * (uint64_t)k, 0);
  }
  free(aK);
  *pp = p;
  return 0;
}

/* Writes offsets [nVal+1] and then the bytes of the TEXT/BLOB values of
** v[i0, i0+n) at q (NULL slots are empty). Returns the end of the bytes. */
static uint8_t *write_plain(uint8_t *q, const csq_vec *v, uint32_t i0, uint32_t n) {
  uint8_t *b = q + pad8(((uint64_t)n + 1) * 4);
  uint32_t off = 0;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = i0 + k;
    st32(q + 4 * (uint64_t)k, off);
    if (v->aCls[i] != CSQ_NULL && v->aLen[i]) {
      memcpy(b + off, csq_vec_bytes(v, i), v->aLen[i]);
      off += v->aLen[i];
    }
  }
  st32(q + 4 * (uint64_t)n, off);
  return b + off;
}

/* a[0..n) == b[0..n); short values (dates, codes) without a call. */
static inline int bytes_eq(const char *a, const char *b, uint32_t n) {
  if (n >= 8 && n <= 16) {
    const uint8_t *x = (const uint8_t *)a, *y = (const uint8_t *)b;
    return ld64(x) == ld64(y) && ld64(x + n - 8) == ld64(y + n - 8);
  }
  return n == 0 || !memcmp(a, b, n);
}

/* Sort context for dictionary entries: entry e is value aFirst[e] of v. */
typedef struct dict_ctx {
  const csq_vec *v;
  const uint32_t *aFirst;
} dict_ctx;

static int dict_cmp(const void *pa, const void *pb, void *pCtx) {
  const dict_ctx *c = pCtx;
  uint32_t ia = c->aFirst[*(const uint32_t *)pa], ib = c->aFirst[*(const uint32_t *)pb];
  return cmp_bytes(csq_vec_bytes(c->v, ia), c->v->aLen[ia], csq_vec_bytes(c->v, ib),
                   c->v->aLen[ib]);
}

/*
** TEXT or BLOB values (plus NULLs), cls says which, nVar = their total bytes
** (< 2^32). TEXT: CONST, TEXT_DICT or TEXT_PLAIN; BLOB: CONST or BLOB_PLAIN.
** The dictionary is tried when TEXT repeats: distinct values are found with
** an XXH3 hash table (abandoned once they exceed half the values: then the
** dictionary cannot pay much), sorted in BINARY order, and kept only if the
** chunk comes out smaller than plain.
*/
/* Values looked at before a dictionary that is not paying is given up. */
#define DICT_PROBE 4096

static int encode_bytes(const csq_vec *v, uint32_t i0, uint32_t n, uint32_t nNull, uint8_t cls,
                        uint64_t nVar, csq_zone *z, uint8_t **pp, uint64_t *pnBytes) {
  const uint8_t *aCls = v->aCls + i0;
  uint32_t nNonNull = n - nNull;
  uint32_t *aFirst = 0, *aProv = 0, *aSort = 0, *aRank = 0;
  uint64_t *aHash = 0, *aEnt = 0, nArena = 0; /* aEnt[e] = arena offset << 32 | length */
  char *zArena = 0;
  uint32_t nDict = 0;
  uint64_t nDictVar = 0;
  int bDict = 0, rc = -ENOMEM;
  uint8_t *p = 0;

  uint32_t k0 = 0;
  while (aCls[k0] == CSQ_NULL) k0++;
  const char *zFirst = csq_vec_bytes(v, i0 + k0);
  uint32_t nFirst = v->aLen[i0 + k0];
  int bConst = 1;
  for (uint32_t k = k0 + 1; k < n && bConst; k++) {
    uint32_t i = i0 + k;
    bConst = aCls[k] == CSQ_NULL || (v->aLen[i] == nFirst &&
                                     (nFirst == 0 || !memcmp(csq_vec_bytes(v, i), zFirst, nFirst)));
  }

  if (!bConst && cls == CSQ_TEXT && nNonNull >= 4) {
    /* Open addressing; a slot holds the hash's high 32 bits and entry+1, so
    ** a probe touches the (small, growing) table only, and bytes are
    ** compared on a full match of the hash only. */
    uint32_t nLimit = nNonNull / 2, cap = 1024;
    uint64_t *aTab = calloc(cap, 8);
    aFirst = malloc((size_t)nLimit * 4);
    aHash = malloc((size_t)nLimit * 8);
    aEnt = malloc((size_t)nLimit * 8);
    aProv = malloc((size_t)n * 4);
    zArena = malloc(nArena = 256);
    if (!aTab || !aFirst || !aHash || !aEnt || !aProv || !zArena) {
      free(aTab);
      goto done;
    }
    bDict = 1;
    for (uint32_t k = 0; k < n && bDict; k++) {
      uint32_t i = i0 + k;
      /* values that are nearly all distinct so far (comments, names) will
      ** not make a dictionary pay: stop hashing them early */
      if (k == DICT_PROBE && nDict > DICT_PROBE / 4 * 3) {
        bDict = 0;
        break;
      }
      if (aCls[k] == CSQ_NULL) {
        aProv[k] = UINT32_MAX;
        continue;
      }
      const char *z = csq_vec_bytes(v, i);
      uint32_t len = v->aLen[i];
      uint64_t h = XXH3_64bits(z, len), hTag = h & 0xFFFFFFFF00000000ull;
      uint32_t j = (uint32_t)h & (cap - 1);
      for (;;) {
        uint64_t t = aTab[j];
        if (t == 0) {
          if (nDict == nLimit) {
            bDict = 0;
            break;
          }
          if (nDictVar + len > nArena) { /* entries' bytes, packed together for locality */
            uint64_t nNew = nArena * 2 > nDictVar + len + 256 ? nArena * 2 : nDictVar + len + 256;
            char *zNew = realloc(zArena, (size_t)nNew);
            if (!zNew) {
              free(aTab);
              goto done;
            }
            zArena = zNew;
            nArena = nNew;
          }
          if (len) memcpy(zArena + nDictVar, z, len);
          aEnt[nDict] = nDictVar << 32 | len;
          aFirst[nDict] = i;
          aHash[nDict] = h;
          nDictVar += len;
          aTab[j] = hTag | ++nDict;
          aProv[k] = nDict - 1;
          if (2 * (uint64_t)nDict > cap) { /* keep the load under 1/2 */
            uint64_t *aNew = calloc((size_t)cap * 2, 8);
            if (!aNew) {
              free(aTab);
              goto done;
            }
            cap *= 2;
            for (uint32_t e = 0; e < nDict; e++) {
              uint32_t jj = (uint32_t)aHash[e] & (cap - 1);
              while (aNew[jj]) jj = (jj + 1) & (cap - 1);
              aNew[jj] = (aHash[e] & 0xFFFFFFFF00000000ull) | (e + 1);
            }
            free(aTab);
            aTab = aNew;
          }
          break;
        }
        if ((t & 0xFFFFFFFF00000000ull) == hTag) {
          uint32_t e = (uint32_t)t - 1;
          if ((uint32_t)aEnt[e] == len && bytes_eq(zArena + (aEnt[e] >> 32), z, len)) {
            aProv[k] = e;
            break;
          }
        }
        j = (j + 1) & (cap - 1);
      }
    }
    free(aTab);
    if (bDict) {
      unsigned w = bitlen(nDict - 1);
      uint64_t nDictSize = pad8(((uint64_t)nDict + 1) * 4) + pad8(nDictVar) + csq_packed_size(n, w);
      uint64_t nPlainSize = pad8(((uint64_t)n + 1) * 4) + pad8(nVar);
      bDict = nDictSize < nPlainSize;
    }
  }

  enc_plan pl = {.cls = cls, .nVal = n, .nNull = nNull};
  if (bConst) {
    pl.enc = CSQ_ENC_CONST;
    pl.nVar = nFirst;
    pl.nPayload = pad8(nFirst);
    zone_set_min(z, zFirst, nFirst);
    zone_set_max(z, zFirst, nFirst);
  } else if (bDict) {
    pl.enc = CSQ_ENC_TEXT_DICT;
    pl.nAux = nDict;
    pl.width = (uint8_t)bitlen(nDict - 1);
    pl.nVar = nDictVar;
    pl.nPayload = pad8(((uint64_t)nDict + 1) * 4) + pad8(nDictVar) + csq_packed_size(n, pl.width);
  } else {
    pl.enc = cls == CSQ_TEXT ? CSQ_ENC_TEXT_PLAIN : CSQ_ENC_BLOB_PLAIN;
    pl.nVar = nVar;
    pl.nPayload = pad8(((uint64_t)n + 1) * 4) + pad8(nVar);
    zone_scan(z, v, i0, n);
  }
  uint64_t iPay;
  p = chunk_alloc(&pl, v, i0, pnBytes, &iPay);
  if (!p) goto done;
  uint8_t *q = p + iPay;
  if (bConst) {
    if (nFirst) memcpy(q, zFirst, nFirst);
  } else if (bDict) {
    /* Sort the entries, then rank[entry] = its code. */
    dict_ctx ctx = {v, aFirst};
    aSort = malloc((size_t)nDict * 4);
    aRank = malloc((size_t)nDict * 4);
    if (!aSort || !aRank) goto done;
    for (uint32_t e = 0; e < nDict; e++) aSort[e] = e;
    qsort_r(aSort, nDict, 4, dict_cmp, &ctx);
    uint8_t *b = q + pad8(((uint64_t)nDict + 1) * 4);
    uint32_t off = 0;
    for (uint32_t r = 0; r < nDict; r++) {
      uint32_t f = aFirst[aSort[r]];
      aRank[aSort[r]] = r;
      st32(q + 4 * (uint64_t)r, off);
      if (v->aLen[f]) memcpy(b + off, csq_vec_bytes(v, f), v->aLen[f]);
      off += v->aLen[f];
    }
    st32(q + 4 * (uint64_t)nDict, off);
    uint32_t fMin = aFirst[aSort[0]], fMax = aFirst[aSort[nDict - 1]];
    zone_set_min(z, csq_vec_bytes(v, fMin), v->aLen[fMin]);
    zone_set_max(z, csq_vec_bytes(v, fMax), v->aLen[fMax]);
    packer pk = {b + pad8(nDictVar), 0};
    uint64_t aBuf[BLOCK];
    for (uint32_t k = 0; k < n; k += BLOCK) {
      uint32_t m = n - k < BLOCK ? n - k : BLOCK;
      for (uint32_t j = 0; j < m; j++)
        aBuf[j] = aProv[k + j] == UINT32_MAX ? 0 : aRank[aProv[k + j]];
      pack_codes(&pk, aBuf, m, pl.width, 0);
    }
  } else {
    write_plain(q, v, i0, n);
  }
  *pp = p;
  p = 0;
  rc = 0;
done:
  free(p);
  free(aFirst);
  free(aEnt);
  free(zArena);
  free(aHash);
  free(aProv);
  free(aSort);
  free(aRank);
  return rc;
}

/* Mixed classes: tags, one 8-byte slot per value, then TEXT/BLOB bytes. */
static int encode_tagged(const csq_vec *v, uint32_t i0, uint32_t n, uint32_t nNull, uint64_t nVar,
                         csq_zone *z, uint8_t **pp, uint64_t *pnBytes) {
  zone_scan(z, v, i0, n);
  enc_plan pl = {.enc = CSQ_ENC_TAGGED, .cls = 0, .nVal = n, .nNull = nNull, .nVar = nVar};
  pl.nPayload = pad8(n) + (uint64_t)n * 8 + pad8(nVar);
  uint64_t iPay;
  uint8_t *p = chunk_alloc(&pl, v, i0, pnBytes, &iPay);
  if (!p) return -ENOMEM;
  uint8_t *aTag = p + iPay, *aSlot = aTag + pad8(n), *b = aSlot + (uint64_t)n * 8;
  memcpy(aTag, v->aCls + i0, n);
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = i0 + k;
    uint64_t s = 0;
    switch (v->aCls[i]) {
    case CSQ_INT:
      s = (uint64_t)v->aVal[i].i;
      break;
    case CSQ_REAL:
      s = dbl2bits(v->aVal[i].r);
      break;
    case CSQ_TEXT:
    case CSQ_BLOB:
      s = v->aLen[i];
      if (s) memcpy(b, csq_vec_bytes(v, i), (size_t)s);
      b += s;
      break;
    }
    st64(aSlot + 8 * (uint64_t)k, s);
  }
  *pp = p;
  return 0;
}

/*
** Encode v[i0, i0+n) as one chunk (see chunk.h). -EINVAL for a bad range,
** more than CSQ_CHUNK_MAX_VALS values, a class byte outside CSQ_INT..
** CSQ_NULL, or TEXT/BLOB bytes of 4 GiB or more in a typed chunk (the
** offsets are 32-bit: split such a row group).
*/
int csq_chunk_encode(const csq_vec *v, uint32_t i0, uint32_t n, uint8_t **ppOut, size_t *pnOut,
                     csq_chunk_info *pInfo) {
  csq_chunk_info info;
  memset(&info, 0, sizeof(info));
  *ppOut = 0;
  *pnOut = 0;
  if (i0 > v->n || n > v->n - i0 || n > CSQ_CHUNK_MAX_VALS) return -EINVAL;

  /* Classes present and NULL count. A vector of one class (clsMask, an
  ** invariant of csq_vec) needs no scan. */
  const uint8_t *aCls = n ? v->aCls + i0 : 0;
  uint8_t mask = 0;
  uint32_t nNull = 0;
  if (n && __builtin_popcount(v->clsMask) == 1) {
    mask = v->clsMask;
    nNull = mask == (1u << CSQ_NULL) ? n : 0;
  } else if (n) {
    uint8_t seen[256] = {0};
    for (uint32_t k = 0; k < n; k++) seen[aCls[k]] = 1;
    for (uint32_t k = 0; k < n; k++) nNull += aCls[k] == CSQ_NULL;
    for (int c = 0; c < 256; c++) {
      if (!seen[c]) continue;
      if (c < CSQ_INT || c > CSQ_NULL) return -EINVAL;
      mask |= (uint8_t)(1u << c);
    }
  }
  uint64_t nVar = 0;
  if (mask & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) {
    for (uint32_t k = 0; k < n; k++)
      if (aCls[k] == CSQ_TEXT || aCls[k] == CSQ_BLOB) nVar += v->aLen[i0 + k];
  }

  csq_zone *z = &info.zone;
  z->nVal = n;
  z->nNull = nNull;
  z->clsMask = mask;
  uint8_t *p = 0;
  uint64_t nBytes = 0;
  int rc;
  uint8_t only = mask & (uint8_t) ~(1u << CSQ_NULL);
  if (only == 0) { /* empty, or all NULL */
    enc_plan pl = {.enc = CSQ_ENC_CONST, .cls = CSQ_NULL, .nVal = n, .nNull = n};
    uint64_t iPay;
    p = chunk_alloc(&pl, v, i0, &nBytes, &iPay);
    rc = p ? 0 : -ENOMEM;
  } else if (only == (1u << CSQ_INT)) {
    rc = encode_int(v, i0, n, nNull, z, &p, &nBytes);
  } else if (only == (1u << CSQ_REAL)) {
    rc = encode_real(v, i0, n, nNull, z, &p, &nBytes);
  } else if (only == (1u << CSQ_TEXT) || only == (1u << CSQ_BLOB)) {
    if (nVar > UINT32_MAX) return -EINVAL;
    rc = encode_bytes(v, i0, n, nNull, only == (1u << CSQ_TEXT) ? CSQ_TEXT : CSQ_BLOB, nVar, z, &p,
                      &nBytes);
  } else {
    rc = encode_tagged(v, i0, n, nNull, nVar, z, &p, &nBytes);
  }
  if (rc) return rc;
  st64(p + H_XXH3, csq_checksum(p + H_VERSION, (size_t)nBytes - H_VERSION));
  info.enc = p[H_ENC];
  info.nBytes = nBytes;
  info.xxh3 = csq_checksum(p, (size_t)nBytes);
  if (pInfo) *pInfo = info;
  *ppOut = p;
  *pnOut = (size_t)nBytes;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Checking and decoding                                                    */
/* ------------------------------------------------------------------------ */

/* Header and checksum only. On success *pnBytes = the chunk's size. */
static int chunk_check_header(const uint8_t *p, size_t n, uint64_t *pnBytes, int bDeep) {
  if (!p || n < CSQ_CHUNK_HDR || memcmp(p + H_MAGIC, CHUNK_MAGIC, 4)) return -EBADMSG;
  uint64_t nBytes = ld64(p + H_NBYTES);
  if (nBytes < CSQ_CHUNK_HDR || nBytes > n) return -EBADMSG;
  if (bDeep && csq_checksum(p + H_VERSION, (size_t)nBytes - H_VERSION) != ld64(p + H_XXH3))
    return -EBADMSG;
  if (p[H_VERSION] != CHUNK_VERSION) return -EBADMSG;
  *pnBytes = nBytes;
  return 0;
}

int csq_chunk_verify(const uint8_t *p, size_t n) {
  uint64_t nBytes;
  return chunk_check_header(p, n, &nBytes, 1);
}

/* Claim the next section of nSec bytes (a multiple of 8 by construction)
** at *pOff, or fail if it would pass the chunk's end. */
static const uint8_t *take(const uint8_t *p, uint64_t *pOff, uint64_t nSec, uint64_t nBytes) {
  if (nSec > nBytes - *pOff) return 0;
  const uint8_t *q = p + *pOff;
  *pOff += nSec;
  return q;
}

/* nOff+1 offsets at a: must start at 0, never decrease, end at nVar. */
static int check_offsets(const uint8_t *a, uint32_t nOff, uint64_t nVar) {
  uint32_t prev = ld32(a);
  if (prev != 0) return -EBADMSG;
  for (uint32_t k = 1; k <= nOff; k++) {
    uint32_t o = ld32(a + 4 * (uint64_t)k);
    if (o < prev) return -EBADMSG;
    prev = o;
  }
  return prev == nVar ? 0 : -EBADMSG;
}

/*
** The whole of the checking (see chunk.h). After the header and checksum,
** every field not used by the encoding must be zero, the sections must add
** up to the chunk's size exactly, and the contents must be consistent:
** bitmap population = nNull, offsets monotone and ending at nVar, dictionary
** strictly ascending, codes below nAux, runs ending at nVal, tags valid and
** agreeing with the bitmap, TEXT/BLOB lengths summing to nVar. Counts that do
** not come with bytes are capped by CSQ_CHUNK_MAX_VALS.
*/
static int chunk_parse(const uint8_t *p, size_t n, csq_chunk_desc *pv, int bDeep) {
  uint64_t nBytes;
  int rc = chunk_check_header(p, n, &nBytes, bDeep);
  if (rc) return rc;
  csq_chunk_desc w;
  memset(&w, 0, sizeof(w));
  w.enc = p[H_ENC];
  w.cls = p[H_CLS];
  w.width = p[H_WIDTH];
  w.nVal = ld32(p + H_NVAL);
  w.nNull = ld32(p + H_NNULL);
  w.nAux = ld32(p + H_NAUX);
  w.nBytes = nBytes;
  w.nVar = ld64(p + H_NVAR);
  uint64_t ref = ld64(p + H_REF);
  uint8_t flags = p[H_FLAGS];
  if (p[H_RSVD] | p[H_RSVD + 1] | p[H_RSVD + 2]) return -EBADMSG;
  if (w.nVal > CSQ_CHUNK_MAX_VALS || w.nNull > w.nVal) return -EBADMSG;
  int bNulls = w.nNull > 0 && w.nNull < w.nVal;
  if (flags != (bNulls ? FLAG_NULLS : 0)) return -EBADMSG;
  if (w.nNull == w.nVal && !(w.enc == CSQ_ENC_CONST && w.cls == CSQ_NULL)) return -EBADMSG;

  uint64_t off = CSQ_CHUNK_HDR;
  if (bNulls) {
    uint64_t nMap = ((uint64_t)w.nVal + 7) / 8;
    w.aNull = take(p, &off, pad8(nMap), nBytes);
    if (!w.aNull) return -EBADMSG;
    uint64_t nSet = 0;
    if (bDeep) {
      for (uint64_t k = 0; k < nMap; k++) nSet += (unsigned)__builtin_popcount(w.aNull[k]);
      if ((w.nVal & 7) && (w.aNull[nMap - 1] >> (w.nVal & 7))) return -EBADMSG;
      if (nSet != w.nNull) return -EBADMSG;
    }
  }
  uint8_t nullBit = w.nNull ? (uint8_t)(1u << CSQ_NULL) : 0;

  switch (w.enc) {
  case CSQ_ENC_CONST:
    if (w.width || w.nAux) return -EBADMSG;
    if (w.cls == CSQ_NULL) {
      if (w.nNull != w.nVal || ref || w.nVar) return -EBADMSG;
    } else if (w.cls == CSQ_INT || w.cls == CSQ_REAL) {
      if (w.nVar) return -EBADMSG;
      w.iRef = (int64_t)ref;
      w.rConst = bits2dbl(ref);
    } else if (w.cls == CSQ_TEXT || w.cls == CSQ_BLOB) {
      if (ref || w.nVar > UINT32_MAX) return -EBADMSG;
      if (!(w.aVar = take(p, &off, pad8(w.nVar), nBytes))) return -EBADMSG;
    } else {
      return -EBADMSG;
    }
    w.clsMask = (w.nVal > w.nNull ? (uint8_t)(1u << w.cls) : 0) | nullBit;
    break;
  case CSQ_ENC_INT_FOR:
  case CSQ_ENC_INT_RLE:
    if (w.cls != CSQ_INT || w.width < 1 || w.width > 64 || w.nVar) return -EBADMSG;
    w.iRef = (int64_t)ref;
    if (w.enc == CSQ_ENC_INT_FOR) {
      if (w.nAux) return -EBADMSG;
      if (!(w.aPacked = take(p, &off, csq_packed_size(w.nVal, w.width), nBytes))) return -EBADMSG;
    } else {
      if (w.nAux < 1 || w.nAux > w.nVal) return -EBADMSG;
      if (!(w.aPacked = take(p, &off, csq_packed_size(w.nAux, w.width), nBytes))) return -EBADMSG;
      if (!(w.aRunEnd = take(p, &off, pad8((uint64_t)w.nAux * 4), nBytes))) return -EBADMSG;
      uint32_t prev = 0;
      for (uint32_t r = 0; r < w.nAux; r++) {
        uint32_t e = ld32(w.aRunEnd + 4 * (uint64_t)r);
        if (e <= prev) return -EBADMSG;
        prev = e;
      }
      if (prev != w.nVal) return -EBADMSG;
    }
    w.clsMask = (uint8_t)(1u << CSQ_INT) | nullBit;
    break;
  case CSQ_ENC_REAL_DEC:
    if (w.cls != CSQ_REAL || w.width < 1 || w.width > 64 || w.nAux > CSQ_DEC_MAX_SCALE || w.nVar)
      return -EBADMSG;
    w.iRef = (int64_t)ref;
    if (!(w.aPacked = take(p, &off, csq_packed_size(w.nVal, w.width), nBytes))) return -EBADMSG;
    w.clsMask = (uint8_t)(1u << CSQ_REAL) | nullBit;
    break;
  case CSQ_ENC_REAL_PLAIN:
    if (w.cls != CSQ_REAL || w.width || w.nAux || ref || w.nVar) return -EBADMSG;
    if (!(w.aReal = take(p, &off, (uint64_t)w.nVal * 8, nBytes))) return -EBADMSG;
    w.clsMask = (uint8_t)(1u << CSQ_REAL) | nullBit;
    break;
  case CSQ_ENC_TEXT_PLAIN:
  case CSQ_ENC_BLOB_PLAIN: {
    uint8_t cls = w.enc == CSQ_ENC_TEXT_PLAIN ? CSQ_TEXT : CSQ_BLOB;
    if (w.cls != cls || w.width || w.nAux || ref || w.nVar > UINT32_MAX) return -EBADMSG;
    if (!(w.aOff = take(p, &off, pad8(((uint64_t)w.nVal + 1) * 4), nBytes))) return -EBADMSG;
    if (!(w.aVar = take(p, &off, pad8(w.nVar), nBytes))) return -EBADMSG;
    if (bDeep && check_offsets(w.aOff, w.nVal, w.nVar)) return -EBADMSG;
    w.clsMask = (uint8_t)(1u << cls) | nullBit;
    break;
  }
  case CSQ_ENC_TEXT_DICT: {
    if (w.cls != CSQ_TEXT || ref || w.nVar > UINT32_MAX) return -EBADMSG;
    if (w.nAux < 2 || w.nAux > w.nVal - w.nNull || w.width != bitlen(w.nAux - 1)) return -EBADMSG;
    if (!(w.aOff = take(p, &off, pad8(((uint64_t)w.nAux + 1) * 4), nBytes))) return -EBADMSG;
    if (!(w.aVar = take(p, &off, pad8(w.nVar), nBytes))) return -EBADMSG;
    if (!(w.aPacked = take(p, &off, csq_packed_size(w.nVal, w.width), nBytes))) return -EBADMSG;
    if (!bDeep) {
      w.clsMask = (uint8_t)(1u << CSQ_TEXT) | nullBit;
      break;
    }
    if (check_offsets(w.aOff, w.nAux, w.nVar)) return -EBADMSG;
    for (uint32_t e = 1; e < w.nAux; e++) {
      uint32_t a0 = ld32(w.aOff + 4 * (uint64_t)(e - 1)), a1 = ld32(w.aOff + 4 * (uint64_t)e);
      uint32_t a2 = ld32(w.aOff + 4 * (uint64_t)(e + 1));
      if (cmp_bytes(w.aVar + a0, a1 - a0, w.aVar + a1, a2 - a1) >= 0) return -EBADMSG;
    }
    if (w.nAux & (w.nAux - 1)) { /* some codes of this width would be out of range */
      uint64_t aCode[BLOCK];
      for (uint32_t k = 0; k < w.nVal; k += BLOCK) {
        uint32_t m = w.nVal - k < BLOCK ? w.nVal - k : BLOCK;
        csq_unpack_u64(w.aPacked, w.width, k, m, aCode);
        uint64_t mx = 0;
        for (uint32_t j = 0; j < m; j++) mx = aCode[j] > mx ? aCode[j] : mx;
        if (mx >= w.nAux) return -EBADMSG;
      }
    }
    w.clsMask = (uint8_t)(1u << CSQ_TEXT) | nullBit;
    break;
  }
  case CSQ_ENC_TAGGED: {
    if (w.cls || w.width || w.nAux || ref) return -EBADMSG;
    if (!(w.aTag = take(p, &off, pad8(w.nVal), nBytes))) return -EBADMSG;
    if (!(w.aSlot = take(p, &off, (uint64_t)w.nVal * 8, nBytes))) return -EBADMSG;
    if (!(w.aVar = take(p, &off, pad8(w.nVar), nBytes))) return -EBADMSG;
    uint64_t sum = 0;
    uint8_t mask = 0;
    for (uint32_t k = 0; k < w.nVal; k++) {
      uint8_t t = w.aTag[k];
      if (t < CSQ_INT || t > CSQ_NULL) return -EBADMSG;
      int bNull = w.aNull ? (w.aNull[k >> 3] >> (k & 7)) & 1 : w.nNull == w.nVal;
      if ((t == CSQ_NULL) != bNull) return -EBADMSG;
      mask |= (uint8_t)(1u << t);
      if (t == CSQ_TEXT || t == CSQ_BLOB) {
        uint64_t len = ld64(w.aSlot + 8 * (uint64_t)k);
        if (len > UINT32_MAX || len > w.nVar - sum) return -EBADMSG;
        sum += len;
      } else if (t == CSQ_NULL && ld64(w.aSlot + 8 * (uint64_t)k)) {
        return -EBADMSG;
      }
    }
    if (sum != w.nVar) return -EBADMSG;
    w.clsMask = mask;
    break;
  }
  default:
    return -EBADMSG;
  }
  if (off != nBytes) return -EBADMSG;
  *pv = w;
  return 0;
}

int csq_chunk_view(const uint8_t *p, size_t n, csq_chunk_desc *pv) {
  return chunk_parse(p, n, pv, 1);
}

int csq_chunk_layout(const uint8_t *p, size_t n, csq_chunk_desc *pv) {
  return chunk_parse(p, n, pv, 0);
}

/* Make room for nMore values and nHeap heap bytes in v, growing
** geometrically so that decoding chunk after chunk into one vector stays
** linear. */
static int vec_room(csq_vec *v, uint32_t nMore, uint64_t nHeap) {
  if (nMore > UINT32_MAX - v->n || nHeap > UINT64_MAX / 2 - v->nHeap) return -ENOMEM;
  uint64_t want = (uint64_t)v->n + nMore, cap = v->nCap;
  if (want > cap) {
    cap = cap * 2 > want ? cap * 2 : want;
    if (cap > UINT32_MAX) cap = UINT32_MAX;
  }
  uint64_t hwant = v->nHeap + nHeap, hcap = v->nHeapCap;
  if (hwant > hcap) hcap = hcap * 2 > hwant ? hcap * 2 : hwant;
  return csq_vec_reserve(v, (uint32_t)cap, hcap);
}

/*
** Decode a chunk, appending its values to pOut (see chunk.h). Nothing is
** appended unless the whole chunk checked out. Decoded TEXT values of a
** dictionary or CONST chunk share their bytes in pOut's heap (each distinct
** value is stored once).
*/
int csq_chunk_decode(const uint8_t *p, size_t n, csq_vec *pOut) {
  csq_chunk_desc w;
  int rc = csq_chunk_view(p, n, &w);
  if (rc) return rc;
  uint32_t nVal = w.nVal;
  if (nVal == 0) return 0;
  /* TEXT/BLOB values get a heap even when all are empty, so that
  ** csq_vec_bytes() never offsets a null pointer. */
  const uint8_t mVar = (1u << CSQ_TEXT) | (1u << CSQ_BLOB);
  if ((rc = vec_room(pOut, nVal, w.nVar ? w.nVar : (w.clsMask & mVar) != 0))) return rc;
  uint32_t d = pOut->n;
  uint8_t *aCls = pOut->aCls + d;
  csq_val *aVal = pOut->aVal + d;
  uint32_t *aLen = pOut->aLen + d;
  uint64_t h = pOut->nHeap;
  if (w.nVar) memcpy(pOut->aHeap + h, w.aVar, (size_t)w.nVar);

  switch (w.enc) {
  case CSQ_ENC_CONST:
    memset(aCls, w.cls, nVal);
    if (w.cls == CSQ_TEXT || w.cls == CSQ_BLOB) {
      for (uint32_t k = 0; k < nVal; k++) aVal[k].off = h, aLen[k] = (uint32_t)w.nVar;
    } else {
      if (w.cls == CSQ_REAL) {
        for (uint32_t k = 0; k < nVal; k++) aVal[k].r = w.rConst;
      } else {
        int64_t x = w.cls == CSQ_INT ? w.iRef : 0;
        for (uint32_t k = 0; k < nVal; k++) aVal[k].i = x;
      }
      memset(aLen, 0, (size_t)nVal * 4);
    }
    break;
  case CSQ_ENC_INT_FOR: {
    uint64_t aCode[BLOCK];
    const uint64_t ref = (uint64_t)w.iRef;
    for (uint32_t k = 0; k < nVal; k += BLOCK) {
      uint32_t m = nVal - k < BLOCK ? nVal - k : BLOCK;
      csq_unpack_u64(w.aPacked, w.width, k, m, aCode);
      for (uint32_t j = 0; j < m; j++) aVal[k + j].i = (int64_t)(aCode[j] + ref);
    }
    memset(aCls, CSQ_INT, nVal);
    memset(aLen, 0, (size_t)nVal * 4);
    break;
  }
  case CSQ_ENC_INT_RLE: {
    uint64_t aCode[BLOCK];
    const uint64_t ref = (uint64_t)w.iRef;
    uint32_t start = 0;
    for (uint32_t r0 = 0; r0 < w.nAux; r0 += BLOCK) {
      uint32_t m = w.nAux - r0 < BLOCK ? w.nAux - r0 : BLOCK;
      csq_unpack_u64(w.aPacked, w.width, r0, m, aCode);
      for (uint32_t j = 0; j < m; j++) {
        uint32_t end = ld32(w.aRunEnd + 4 * (uint64_t)(r0 + j));
        int64_t x = (int64_t)(aCode[j] + ref);
        for (uint32_t k = start; k < end; k++) aVal[k].i = x;
        start = end;
      }
    }
    memset(aCls, CSQ_INT, nVal);
    memset(aLen, 0, (size_t)nVal * 4);
    break;
  }
  case CSQ_ENC_REAL_DEC: {
    uint64_t aCode[BLOCK];
    double aDec[BLOCK];
    for (uint32_t k = 0; k < nVal; k += BLOCK) {
      uint32_t m = nVal - k < BLOCK ? nVal - k : BLOCK;
      csq_unpack_u64(w.aPacked, w.width, k, m, aCode);
      csq_dec_values(aCode, m, w.iRef, w.nAux, aDec);
      for (uint32_t j = 0; j < m; j++) aVal[k + j].r = aDec[j];
    }
    memset(aCls, CSQ_REAL, nVal);
    memset(aLen, 0, (size_t)nVal * 4);
    break;
  }
  case CSQ_ENC_REAL_PLAIN:
    for (uint32_t k = 0; k < nVal; k++) aVal[k].r = bits2dbl(ld64(w.aReal + 8 * (uint64_t)k));
    memset(aCls, CSQ_REAL, nVal);
    memset(aLen, 0, (size_t)nVal * 4);
    break;
  case CSQ_ENC_TEXT_PLAIN:
  case CSQ_ENC_BLOB_PLAIN: {
    uint32_t o0 = ld32(w.aOff);
    for (uint32_t k = 0; k < nVal; k++) {
      uint32_t o1 = ld32(w.aOff + 4 * (uint64_t)(k + 1));
      aVal[k].off = h + o0;
      aLen[k] = o1 - o0;
      o0 = o1;
    }
    memset(aCls, w.cls, nVal);
    break;
  }
  case CSQ_ENC_TEXT_DICT: {
    /* Host-order copies of the entries' offsets and lengths for the lookup. */
    uint64_t *aEnt = malloc((size_t)w.nAux * 8);
    if (!aEnt) return -ENOMEM;
    for (uint32_t e = 0; e < w.nAux; e++) {
      uint32_t a0 = ld32(w.aOff + 4 * (uint64_t)e), a1 = ld32(w.aOff + 4 * (uint64_t)(e + 1));
      aEnt[e] = (uint64_t)a0 << 32 | (a1 - a0);
    }
    uint64_t aCode[BLOCK];
    for (uint32_t k = 0; k < nVal; k += BLOCK) {
      uint32_t m = nVal - k < BLOCK ? nVal - k : BLOCK;
      csq_unpack_u64(w.aPacked, w.width, k, m, aCode);
      for (uint32_t j = 0; j < m; j++) {
        uint64_t e = aEnt[aCode[j]]; /* codes < nAux: checked by csq_chunk_view */
        aVal[k + j].off = h + (e >> 32);
        aLen[k + j] = (uint32_t)e;
      }
    }
    free(aEnt);
    memset(aCls, CSQ_TEXT, nVal);
    break;
  }
  case CSQ_ENC_TAGGED: {
    uint64_t o = h;
    memcpy(aCls, w.aTag, nVal);
    for (uint32_t k = 0; k < nVal; k++) {
      uint64_t s = ld64(w.aSlot + 8 * (uint64_t)k);
      aLen[k] = 0;
      switch (aCls[k]) {
      case CSQ_INT:
        aVal[k].i = (int64_t)s;
        break;
      case CSQ_REAL:
        aVal[k].r = bits2dbl(s);
        break;
      case CSQ_TEXT:
      case CSQ_BLOB:
        aVal[k].off = o;
        aLen[k] = (uint32_t)s;
        o += s;
        break;
      default:
        aVal[k].i = 0;
        break;
      }
    }
    break;
  }
  }
  /* NULL slots: whatever the encoding put there becomes a proper NULL. */
  if (w.aNull && w.enc != CSQ_ENC_TAGGED) {
    for (uint32_t b = 0; b < (nVal + 7) / 8; b++) {
      uint8_t m = w.aNull[b];
      while (m) {
        uint32_t k = b * 8 + (uint32_t)__builtin_ctz(m);
        m &= (uint8_t)(m - 1);
        aCls[k] = CSQ_NULL;
        aVal[k].i = 0;
        aLen[k] = 0;
      }
    }
  }
  pOut->n += nVal;
  pOut->nHeap += w.nVar;
  pOut->clsMask |= w.clsMask;
  return 0;
}
