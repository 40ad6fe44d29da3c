/*
** device/format/bloom.h - a split-block Bloom filter over join key hashes
** (keyhash.h), the same code on the host (which fills it from a join's
** build side) and on the device (which tests the probe side's values
** against it: CSQ_OP_BLOOM in program.h). The filter is a caller-owned
** buffer; these functions never allocate.
**
** FORMAT (part of the program format: it travels in programs)
**   nBytes, a power of two from CSQ_BLOOM_MIN_BYTES (32) to
**   CSQ_BLOOM_MAX_BYTES (16 MiB), split into 32-byte blocks of eight
**   little-endian u32 words, and nothing else (no header: the size is the
**   buffer's). A key hash h picks one block, block (h >> 32) & (nBlocks-1),
**   and sets one bit in each of its eight words: in word j the bit
**   ((uint32_t)h * csq_bloom_salt[j]) >> 27. A key may be in the set only
**   if all eight bits are set. So a test touches one 32-byte block (half a
**   cache line) and is eight independent shifts and masks, which compilers
**   vectorise; a filter never answers "no" for a key that was added.
** SIZE: csq_bloom_size picks the smallest power of two whose expected false
**   positive rate for nKeys keys is at most the target (estimated with the
**   keys spread over blocks as a Poisson variable, which is what blocked
**   filters lose against classic ones: about 10.5 bits per key give 1%,
**   16 give 0.1%). 16 MiB holds about 12 million keys at 1%; past that the
**   filter stays exact ("no" means no) and only lets more rows through.
*/
#ifndef CSQ_DEVICE_BLOOM_H
#define CSQ_DEVICE_BLOOM_H

#include <stdint.h>

#define CSQ_BLOOM_BLOCK     32
#define CSQ_BLOOM_MIN_BYTES 32u
#define CSQ_BLOOM_MAX_BYTES (16u << 20)

extern const uint32_t csq_bloom_salt[8];

/* 1 if nBytes is a filter size this format allows (a power of two within
** the bounds), else 0. */
int csq_bloom_size_ok(uint64_t nBytes);

/* Bytes of a filter for nKeys keys with false positive rate at most fpRate
** (0 < fpRate < 1; a rate >= 1 gives the smallest filter, a rate <= 0 or
** NaN the largest), bounded by CSQ_BLOOM_MIN_BYTES .. CSQ_BLOOM_MAX_BYTES. */
uint32_t csq_bloom_size(uint64_t nKeys, double fpRate);

/* Expected false positive rate of a filter of nBytes holding nKeys keys. */
double csq_bloom_fpr(uint64_t nKeys, uint32_t nBytes);

/* Empty the filter p[0..nBytes) (nBytes: csq_bloom_size_ok). */
void csq_bloom_init(void *p, uint32_t nBytes);

/* Add key hash h / the n hashes aHash[0..n). */
void csq_bloom_add(void *p, uint32_t nBytes, uint64_t h);
void csq_bloom_add_many(void *p, uint32_t nBytes, const uint64_t *aHash, int n);

/* 1 if the key of hash h may be in the set, 0 if it is certainly not. */
int csq_bloom_maybe(const void *p, uint32_t nBytes, uint64_t h);

/* aOut[i] = csq_bloom_maybe(p, nBytes, aHash[i]) for i < n (0 or 1). */
void csq_bloom_maybe_many(const void *p, uint32_t nBytes, const uint64_t *aHash, uint8_t *aOut,
                          int n);

#endif /* CSQ_DEVICE_BLOOM_H */
