/*
** device/format/chunk_int.h - internals of the column chunk codec, shared by
** its files (not for use outside them):
**   bitpack.c    bit packing and unpacking, the select and decimal kernels
**   zone.c       zone maps: merging, and computing a chunk's by scanning
**   chunk_enc.c  the encoder (csq_chunk_encode)
**   chunk_dec.c  checking and decoding (csq_chunk_verify, _view, _decode)
** The format itself is documented in device/store/FORMAT.md ("Column chunk");
** the public API in chunk.h.
*/
#ifndef CSQ_DEVICE_CHUNK_INT_H
#define CSQ_DEVICE_CHUNK_INT_H

#include "device/format/chunk.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "device/format/checksum.h"
#include "device/format/le.h"
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

/* W(1) ... W(64): the cases of a switch over the code width, one per width,
** so that each loop behind them is compiled with its width as a constant. */
// clang-format off
#define EACH_WIDTH(W)                                                                              \
  W(1)  W(2)  W(3)  W(4)  W(5)  W(6)  W(7)  W(8)  W(9)  W(10) W(11) W(12) W(13) W(14) W(15) W(16) \
  W(17) W(18) W(19) W(20) W(21) W(22) W(23) W(24) W(25) W(26) W(27) W(28) W(29) W(30) W(31) W(32) \
  W(33) W(34) W(35) W(36) W(37) W(38) W(39) W(40) W(41) W(42) W(43) W(44) W(45) W(46) W(47) W(48) \
  W(49) W(50) W(51) W(52) W(53) W(54) W(55) W(56) W(57) W(58) W(59) W(60) W(61) W(62) W(63) W(64)
// clang-format on

/* Zone maps (zone.c), for the encoder: set the text minimum or maximum from
** the n bytes at p (truncated to CSQ_ZONE_PREFIX); fill the numeric and text
** fields of z by scanning the values of v[i0, i0+n). */
void chunk_zone_set_min(csq_zone *z, const void *p, uint64_t n);
void chunk_zone_set_max(csq_zone *z, const void *p, uint64_t n);
void chunk_zone_scan(csq_zone *z, const csq_vec *v, uint32_t i0, uint32_t n);

#endif /* CSQ_DEVICE_CHUNK_INT_H */
