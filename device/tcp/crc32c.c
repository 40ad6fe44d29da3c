/*
** device/tcp/crc32c.c - CRC32C for the NVMe/TCP digests (crc32c.h).
**
** x86-64 with SSE4.2 has the CRC32 instruction, which computes exactly this
** polynomial (0x1EDC6F41, reflected 0x82F63B78) 8 bytes per instruction; the
** choice is made once at run time with __builtin_cpu_supports, so one binary
** runs on any x86-64. Elsewhere a 256-entry table, built on first use, does a
** byte at a time: digests are optional and small PDUs dominate, so a slicing
** table is not worth its code.
*/
#include <pthread.h>
#include <string.h>

#include "device/tcp/crc32c.h"

#define CRC32C_POLY_REFLECTED 0x82F63B78u

static uint32_t aTable[256];
static pthread_once_t tableOnce = PTHREAD_ONCE_INIT;

static void table_build(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ CRC32C_POLY_REFLECTED : c >> 1;
    aTable[i] = c;
  }
}

uint32_t tcp_crc32c_update_table(uint32_t crc, const void *p, size_t n) {
  const uint8_t *z = p;
  pthread_once(&tableOnce, table_build);
  while (n--) crc = aTable[(crc ^ *z++) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t crc, const void *p, size_t n) {
  const uint8_t *z = p;
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, z, 8); /* unaligned load; the CPU is little endian, as the digest is */
    c = __builtin_ia32_crc32di(c, w);
    z += 8;
    n -= 8;
  }
  crc = (uint32_t)c;
  while (n--) crc = __builtin_ia32_crc32qi(crc, *z++);
  return crc;
}
#endif

uint32_t tcp_crc32c_update(uint32_t crc, const void *p, size_t n) {
#if defined(__x86_64__)
  static int bHave = -1; /* every thread that races here computes the same answer */
  int b = __atomic_load_n(&bHave, __ATOMIC_RELAXED);
  if (b < 0) {
    b = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    __atomic_store_n(&bHave, b, __ATOMIC_RELAXED);
  }
  if (b) return crc_sse42(crc, p, n);
#endif
  return tcp_crc32c_update_table(crc, p, n);
}
