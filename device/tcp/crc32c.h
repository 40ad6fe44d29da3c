/*
** device/tcp/crc32c.h - CRC32C (Castagnoli), the header and data digests of
** NVMe/TCP (HDGST, DDGST). The digest of a byte string is
** tcp_crc32c_final(tcp_crc32c_update(TCP_CRC32C_INIT, p, n)) and travels
** little endian after the header or the data it covers.
*/
#ifndef CSQ_DEVICE_TCP_CRC32C_H
#define CSQ_DEVICE_TCP_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#define TCP_CRC32C_INIT 0xFFFFFFFFu

/* Continue a CRC32C over n bytes at p (crc starts at TCP_CRC32C_INIT). */
uint32_t tcp_crc32c_update(uint32_t crc, const void *p, size_t n);
static inline uint32_t tcp_crc32c_final(uint32_t crc) {
  return crc ^ 0xFFFFFFFFu;
}
/* The whole digest of n bytes at p. */
static inline uint32_t tcp_crc32c(const void *p, size_t n) {
  return tcp_crc32c_final(tcp_crc32c_update(TCP_CRC32C_INIT, p, n));
}
/* The table version, whatever the CPU: for the unit test to compare with. */
uint32_t tcp_crc32c_update_table(uint32_t crc, const void *p, size_t n);

#endif /* CSQ_DEVICE_TCP_CRC32C_H */
