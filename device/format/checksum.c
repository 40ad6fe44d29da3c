/*
** device/format/checksum.c - XXH3-64 of bulk bytes (chunks read from media), with
** xxHash's AVX2 code where the CPU has it.
**
** Every scan verifies each chunk it reads, so this hash runs over every byte
** a query touches. xxHash's shared library is built for baseline x86-64
** (SSE2); its runtime dispatcher would pick AVX-512, whose wide multiplies
** lower the core's clock for the scalar work that follows, which costs the
** rest of the scan more than the hash saves. So this file compiles xxHash's own inline
** implementation a second time, for AVX2 only, and chooses per call. The
** values are the same XXH3-64 either way (test_chunk checks).
*/
#include "device/format/checksum.h"

#include <xxhash.h>

/* the shared library's entry point, named before the inline copy below
** takes over the name XXH3_64bits in this file */
static uint64_t xxh3_plain(const void *p, size_t n) {
  return XXH3_64bits(p, n);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC target("avx2")
#define XXH_INLINE_ALL
#undef XXH_VECTOR
#define XXH_VECTOR 2 /* XXH_AVX2 */
#include <xxhash.h>
static uint64_t xxh3_avx2(const void *p, size_t n) {
  return XXH3_64bits(p, n); /* XXH_INLINE_XXH3_64bits, built for AVX2 */
}
#pragma GCC pop_options
#endif

uint64_t csq_checksum(const void *p, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if (n >= 1024 && __builtin_cpu_supports("avx2")) return xxh3_avx2(p, n);
#endif
  return xxh3_plain(p, n);
}
