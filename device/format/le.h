/*
** device/format/le.h - little-endian loads and stores, the one set every
** byte format of csq uses (chunks, programs, jobs, results, the catalog and
** the superblock: all little-endian, at any alignment).
**
** Each goes through memcpy, which compilers turn into one unaligned load
** or store, with a byte swap only on a big-endian host.
*/
#ifndef CSQ_DEVICE_LE_H
#define CSQ_DEVICE_LE_H

#include <stdint.h>
#include <string.h>

/* The unsigned integer of 2, 4 or 8 little-endian bytes at p. */
static inline uint16_t csq_le16(const uint8_t *p) {
  uint16_t x;
  memcpy(&x, p, 2);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  x = __builtin_bswap16(x);
#endif
  return x;
}
static inline uint32_t csq_le32(const uint8_t *p) {
  uint32_t x;
  memcpy(&x, p, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  x = __builtin_bswap32(x);
#endif
  return x;
}
static inline uint64_t csq_le64(const uint8_t *p) {
  uint64_t x;
  memcpy(&x, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  x = __builtin_bswap64(x);
#endif
  return x;
}

/* Store x at p as 2, 4 or 8 little-endian bytes. */
static inline void csq_put_le16(uint8_t *p, uint16_t x) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  x = __builtin_bswap16(x);
#endif
  memcpy(p, &x, 2);
}
static inline void csq_put_le32(uint8_t *p, uint32_t x) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  x = __builtin_bswap32(x);
#endif
  memcpy(p, &x, 4);
}
static inline void csq_put_le64(uint8_t *p, uint64_t x) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  x = __builtin_bswap64(x);
#endif
  memcpy(p, &x, 8);
}

#endif /* CSQ_DEVICE_LE_H */
