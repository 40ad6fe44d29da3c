/*
** device/superblock.c - the superblock: the one place a csq image says which
** catalog is the committed one. Two copies (blocks 0 and 1) carry the same
** content after every commit; a reader takes the valid copy with the highest
** generation. Layout in device/FORMAT.md, section "Superblock".
*/
#include <errno.h>
#include <string.h>
#include <xxhash.h>
#include "store_int.h"

#define SB_CHECKSUM_OFF (CSQ_LBA_SIZE - 8)

static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Encode into a whole zeroed 4 KiB block, checksum last. */
void store_sb_encode(const store_sb *pSb, uint8_t *a) {
  memset(a, 0, CSQ_LBA_SIZE);
  memcpy(a, CSQ_SB_MAGIC, 8);
  put32(a + 8, CSQ_FORMAT_VERSION);
  put32(a + 12, CSQ_LBA_SIZE);
  put64(a + 16, pSb->gen);
  put64(a + 24, pSb->catLba);
  put32(a + 32, pSb->catBlocks);
  put64(a + 40, pSb->catBytes);
  put64(a + 48, pSb->catXxh3);
  put64(a + 56, pSb->hwm);
  memcpy(a + 64, pSb->uuid, 16);
  put64(a + 80, pSb->created);
  put64(a + SB_CHECKSUM_OFF, XXH3_64bits(a, SB_CHECKSUM_OFF));
}

int store_sb_decode(const uint8_t *a, store_sb *pSb) {
  if (memcmp(a, CSQ_SB_MAGIC, 8) != 0) return -ENOENT;
  if (get64(a + SB_CHECKSUM_OFF) != XXH3_64bits(a, SB_CHECKSUM_OFF)) return -EBADMSG;
  if (get32(a + 8) != CSQ_FORMAT_VERSION || get32(a + 12) != CSQ_LBA_SIZE) return -EBADMSG;
  memset(pSb, 0, sizeof(*pSb));
  pSb->gen = get64(a + 16);
  pSb->catLba = get64(a + 24);
  pSb->catBlocks = get32(a + 32);
  pSb->catBytes = get64(a + 40);
  pSb->catXxh3 = get64(a + 48);
  pSb->hwm = get64(a + 56);
  memcpy(pSb->uuid, a + 64, 16);
  pSb->created = get64(a + 80);
  if (pSb->catLba < CSQ_FIRST_DATA_LBA || pSb->catBlocks == 0 ||
      pSb->catBytes > (uint64_t)pSb->catBlocks * CSQ_LBA_SIZE ||
      pSb->catLba + pSb->catBlocks > pSb->hwm)
    return -EBADMSG;
  return 0;
}
