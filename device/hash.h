/*
** device/hash.h - XXH3-64 for checksums over bulk bytes (chunks, results,
** catalogs, jobs).
**
** xxHash's plain entry point is compiled for the baseline instruction set
** (SSE2 on x86-64); its x86 dispatcher picks AVX2 or AVX-512 at run time and
** returns the same values, about 6x faster on a chunk. Checksums of whole
** chunks are on every scan's path, so they go through here; hashes of short
** keys stay on XXH3_64bits, where the dispatch costs more than it saves.
*/
#ifndef CSQ_DEVICE_HASH_H
#define CSQ_DEVICE_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>
#if defined(__x86_64__) && defined(__has_include)
#if __has_include(<xxh_x86dispatch.h>)
#define CSQ_XXH_DISPATCH 1
#endif
#endif
#ifdef CSQ_XXH_DISPATCH
XXH_PUBLIC_API XXH64_hash_t XXH3_64bits_dispatch(const void *input, size_t len);
#endif

static inline uint64_t csq_xxh3(const void *p, size_t n) {
#ifdef CSQ_XXH_DISPATCH
  return XXH3_64bits_dispatch(p, n);
#else
  return XXH3_64bits(p, n);
#endif
}

#endif /* CSQ_DEVICE_HASH_H */
