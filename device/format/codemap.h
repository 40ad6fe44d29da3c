/*
** device/format/codemap.h - a map from integer join keys to small codes,
** the operand of CSQ_EX_MAP (program.h, AGGREGATION): a star join's
** dimension table (a build side whose keys are unique integers) reduced to
** what a grouped program needs of it, the code of each key's group value.
** The device groups the fact table's rows by the codes and the host turns
** the codes back into the dimension's values.
**
** FORMAT (part of the program format: it travels in programs)
**   8 bytes, the span's first key (base, a little-endian int64), then one
**   little-endian u32 code per integer of the span: key base + i has code
**   c_i, and 0 means no row has that key. At least one code and at most
**   CSQ_CODEMAP_MAX_KEYS; so a map of n bytes covers [base, base + (n-8)/4).
** LOOKUP: an INTEGER in the span whose code is not 0 gives that code (an
**   INTEGER); a REAL the code of the integer it equals (SQLite's "=": 4.0 =
**   4); anything else (NULL, TEXT, BLOB, a key outside the span or of code
**   0) gives NULL: the row joins no row of the dimension.
*/
#ifndef CSQ_DEVICE_CODEMAP_H
#define CSQ_DEVICE_CODEMAP_H

#include <stdint.h>

#include "device/format/le.h"
#include "device/format/value.h"

#define CSQ_CODEMAP_HDR      8
#define CSQ_CODEMAP_MAX_KEYS (4u << 20) /* codes of one map */

/* 1 if a map of nBytes (header included) is one this format allows. */
static inline int csq_codemap_size_ok(uint64_t nBytes) {
  return nBytes > CSQ_CODEMAP_HDR && (nBytes - CSQ_CODEMAP_HDR) % 4 == 0 &&
         (nBytes - CSQ_CODEMAP_HDR) / 4 <= CSQ_CODEMAP_MAX_KEYS;
}

/* The code of integer v in map p of nBytes, 0 if none. */
static inline uint32_t csq_codemap_int(const uint8_t *p, uint32_t nBytes, int64_t v) {
  uint64_t u = (uint64_t)v - csq_le64(p);
  return u < (nBytes - CSQ_CODEMAP_HDR) / 4 ? csq_le32(p + CSQ_CODEMAP_HDR + 4 * u) : 0;
}

/* The code of real r (as the integer it equals, if any), 0 if none. */
static inline uint32_t csq_codemap_real(const uint8_t *p, uint32_t nBytes, double r) {
  int64_t i;
  return csq_real_int(r, &i) ? csq_codemap_int(p, nBytes, i) : 0;
}

#endif /* CSQ_DEVICE_CODEMAP_H */
