/*
** device/format/bitpack.c - bit packing of a chunk's codes: the unpacker that scans
** and the decoder use on encoded data (csq_unpack_*), the decimal and range
** select kernels. Hot loops work on whole arrays, in blocks, with the code
** width a compile-time constant behind a switch.
*/
#include "device/format/chunk_int.h"

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
  uint64_t x = csq_le64(base + (bit >> 3)) >> sh;
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
  uint64_t x = csq_le64(q) >> s;
  if (s + w > 64) x |= csq_le64(q + 8) << (64 - s);
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
** has it, never 512-bit vectors: those
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
