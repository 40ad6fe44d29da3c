/*
** device/format/keymap.h - a bitmap of integer join keys, the exact join
** filter for build sides whose keys are integers within a span a bitmap
** covers (CSQ_OP_KEYMAP in program.h). The host fills it from a join's
** build side, the device tests the probe side's values against it: one
** bit per row instead of a hash and a Bloom filter's block.
**
** FORMAT (part of the program format: it travels in programs)
**   8 bytes, the span's first key (base, a little-endian int64), then
**   nBits / 8 bytes of bits: key base + i is in the set when bit i % 8 of
**   byte i / 8 is set. At least 1 byte of bits and at most
**   CSQ_KEYMAP_MAX_BYTES; so a map of n bytes covers [base, base + 8(n-8)).
** MEMBERSHIP: an INTEGER is in when it is in the span and its bit is set;
**   a REAL when it equals an integer that is (SQLite's "=": 4.0 = 4); a
**   NULL, TEXT or BLOB never (every key of the set is an integer, and a
**   join key "=" never makes TEXT equal a number).
*/
#ifndef CSQ_DEVICE_KEYMAP_H
#define CSQ_DEVICE_KEYMAP_H

#include <stdint.h>

#include "device/format/le.h"
#include "device/format/value.h"

#define CSQ_KEYMAP_HDR       8
#define CSQ_KEYMAP_MAX_BYTES (16u << 20) /* bytes of bits */

/* 1 if a map of nBytes (header included) is one this format allows. */
static inline int csq_keymap_size_ok(uint64_t nBytes) {
  return nBytes > CSQ_KEYMAP_HDR && nBytes - CSQ_KEYMAP_HDR <= CSQ_KEYMAP_MAX_BYTES;
}

/* Is integer v in map p of nBytes? */
static inline int csq_keymap_has_int(const uint8_t *p, uint32_t nBytes, int64_t v) {
  uint64_t u = (uint64_t)v - csq_le64(p);
  return u < 8ull * (nBytes - CSQ_KEYMAP_HDR) && ((p[CSQ_KEYMAP_HDR + (u >> 3)] >> (u & 7)) & 1);
}

/* Is real r in it (as the integer it equals, if any)? */
static inline int csq_keymap_has_real(const uint8_t *p, uint32_t nBytes, double r) {
  int64_t i;
  return csq_real_int(r, &i) && csq_keymap_has_int(p, nBytes, i);
}

/* Is value v in it? */
static inline int csq_keymap_has_value(const uint8_t *p, uint32_t nBytes, const csq_value *v) {
  if (v->cls == CSQ_INT) return csq_keymap_has_int(p, nBytes, v->i);
  if (v->cls == CSQ_REAL) return csq_keymap_has_real(p, nBytes, v->r);
  return 0;
}

#endif /* CSQ_DEVICE_KEYMAP_H */
