/*
** device/store/superblock.c - the superblock: the one place a csq image says which
** catalog is the committed one. Two copies (blocks 0 and 1) carry the same
** content after every commit; a reader takes the valid copy with the highest
** generation. Layout in device/store/FORMAT.md, section "Superblock".
**
** Version 1 is the plain superblock. Version 2 also carries a prepared
** commit of a transaction over several devices (store_prep): written by
** store_txn_prepare, removed again when the commit is flipped to or dropped
** (twostep.c). A version-1 image is written by every ordinary commit, so
** images that never took part in such a transaction stay readable by older
** builds; a newer version is refused with its number.
*/
#include <errno.h>
#include <string.h>
#include <xxhash.h>
#include "device/format/le.h"
#include "device/store/store_int.h"

#define SB_CHECKSUM_OFF (CSQ_LBA_SIZE - 8)

static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Offsets of the prepared commit (version 2 only; zero in version 1). */
#define SB_PREP_GEN    88
#define SB_PREP_LBA    96
#define SB_PREP_BLOCKS 104
#define SB_PREP_BYTES  112
#define SB_PREP_XXH3   120
#define SB_PREP_UUID   128
#define SB_PREP_SEQ    144
#define SB_PREP_NPATH  152
#define SB_PREP_NTABLE 154
#define SB_PREP_NAMES  156 /* the path, then the table name, no terminators */

/* Encode into a whole zeroed 4 KiB block, checksum last. The version
** written follows pSb->version: 2 with the prepared commit, else 1. */
void store_sb_encode(const store_sb *pSb, uint8_t *a) {
  int bPrep = pSb->version == CSQ_SB_VERSION_PREPARED;
  memset(a, 0, CSQ_LBA_SIZE);
  memcpy(a, CSQ_SB_MAGIC, 8);
  put32(a + 8, bPrep ? CSQ_SB_VERSION_PREPARED : CSQ_FORMAT_VERSION);
  put32(a + 12, CSQ_LBA_SIZE);
  put64(a + 16, pSb->gen);
  put64(a + 24, pSb->catLba);
  put32(a + 32, pSb->catBlocks);
  put64(a + 40, pSb->catBytes);
  put64(a + 48, pSb->catXxh3);
  put64(a + 56, pSb->hwm);
  memcpy(a + 64, pSb->uuid, 16);
  put64(a + 80, pSb->created);
  if (bPrep) {
    const store_prep *r = &pSb->prep;
    size_t nPath = strlen(r->zPath), nTable = strlen(r->zTable);
    put64(a + SB_PREP_GEN, r->gen);
    put64(a + SB_PREP_LBA, r->catLba);
    put32(a + SB_PREP_BLOCKS, r->catBlocks);
    put64(a + SB_PREP_BYTES, r->catBytes);
    put64(a + SB_PREP_XXH3, r->catXxh3);
    memcpy(a + SB_PREP_UUID, r->uuid, 16);
    put64(a + SB_PREP_SEQ, (uint64_t)r->seq);
    a[SB_PREP_NPATH] = (uint8_t)nPath;
    a[SB_PREP_NPATH + 1] = (uint8_t)(nPath >> 8);
    a[SB_PREP_NTABLE] = (uint8_t)nTable;
    a[SB_PREP_NTABLE + 1] = (uint8_t)(nTable >> 8);
    memcpy(a + SB_PREP_NAMES, r->zPath, nPath);
    memcpy(a + SB_PREP_NAMES + nPath, r->zTable, nTable);
  }
  put64(a + SB_CHECKSUM_OFF, XXH3_64bits(a, SB_CHECKSUM_OFF));
}

/* A catalog extent lies in data space below the high-water mark. */
static int cat_ok(uint64_t lba, uint32_t nblk, uint64_t nBytes, uint64_t hwm) {
  return lba >= CSQ_FIRST_DATA_LBA && nblk > 0 && nBytes <= (uint64_t)nblk * CSQ_LBA_SIZE &&
         lba + nblk <= hwm && lba + nblk > lba;
}

int store_sb_decode(const uint8_t *a, store_sb *pSb, uint32_t *pVersion) {
  if (memcmp(a, CSQ_SB_MAGIC, 8) != 0) return -ENOENT;
  if (csq_le64(a + SB_CHECKSUM_OFF) != XXH3_64bits(a, SB_CHECKSUM_OFF)) return -EBADMSG;
  uint32_t version = csq_le32(a + 8);
  if (pVersion) *pVersion = version;
  if (version != CSQ_FORMAT_VERSION && version != CSQ_SB_VERSION_PREPARED)
    return version > CSQ_SB_VERSION_PREPARED ? -EPROTONOSUPPORT : -EBADMSG;
  if (csq_le32(a + 12) != CSQ_LBA_SIZE) return -EBADMSG;
  memset(pSb, 0, sizeof(*pSb));
  pSb->version = version;
  pSb->gen = csq_le64(a + 16);
  pSb->catLba = csq_le64(a + 24);
  pSb->catBlocks = csq_le32(a + 32);
  pSb->catBytes = csq_le64(a + 40);
  pSb->catXxh3 = csq_le64(a + 48);
  pSb->hwm = csq_le64(a + 56);
  memcpy(pSb->uuid, a + 64, 16);
  pSb->created = csq_le64(a + 80);
  if (!cat_ok(pSb->catLba, pSb->catBlocks, pSb->catBytes, pSb->hwm)) return -EBADMSG;
  if (version == CSQ_SB_VERSION_PREPARED) {
    store_prep *r = &pSb->prep;
    uint16_t nPath = csq_le16(a + SB_PREP_NPATH), nTable = csq_le16(a + SB_PREP_NTABLE);
    r->gen = csq_le64(a + SB_PREP_GEN);
    r->catLba = csq_le64(a + SB_PREP_LBA);
    r->catBlocks = csq_le32(a + SB_PREP_BLOCKS);
    r->catBytes = csq_le64(a + SB_PREP_BYTES);
    r->catXxh3 = csq_le64(a + SB_PREP_XXH3);
    memcpy(r->uuid, a + SB_PREP_UUID, 16);
    r->seq = (int64_t)csq_le64(a + SB_PREP_SEQ);
    if (nPath == 0 || nPath > CSQ_SB_MAX_PATH || nTable == 0 || nTable > CSQ_SB_MAX_TABLE ||
        r->gen != pSb->gen + 1 || !cat_ok(r->catLba, r->catBlocks, r->catBytes, pSb->hwm))
      return -EBADMSG;
    memcpy(r->zPath, a + SB_PREP_NAMES, nPath);
    r->zPath[nPath] = 0;
    memcpy(r->zTable, a + SB_PREP_NAMES + nPath, nTable);
    r->zTable[nTable] = 0;
    if (strlen(r->zPath) != nPath || strlen(r->zTable) != nTable) return -EBADMSG;
  }
  return 0;
}

int store_sb_choose(const store_sb *a, const int *rcs) {
  if (rcs[0] != 0) return rcs[1] == 0 ? 1 : -1;
  if (rcs[1] != 0) return 0;
  if (a[1].gen != a[0].gen) return a[1].gen > a[0].gen;
  return a[1].version == CSQ_SB_VERSION_PREPARED && a[0].version != CSQ_SB_VERSION_PREPARED;
}
