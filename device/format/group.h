/*
** device/format/group.h - a table of groups keyed by SQLite values: the
** device's GROUP BY (device/engine/exec_group.c) and the host's merge of
** partial aggregates (device/host/agg.c) both keep their groups in one.
**
** A group is its key values (nKey csq_values, equal and hashed by
** value.h's GROUP BY rules: NULL equals NULL, 1 equals 1.0), the hash of
** those keys, and a state block of stride bytes, zeroed when the group is
** made, that the caller lays out. Groups are numbered 0, 1, ... in the
** order they were made, and never move in that order, so a result listed
** by group number comes out in the order the groups were first seen.
**
** Lookups go through open addressing with linear probing (aSlot), kept at
** most half full. A group may also be made without a slot (a caller with
** a direct table of its own, or one with no keys): csq_group_reserve is
** then never called, since it re-slots every group. The exception is a
** caller that sets bNoHash on an empty table and then makes its groups
** without slots or hashes (one whose keys arrive sorted finds its groups
** by itself): the first csq_group_reserve hashes those groups, clears
** bNoHash and slots them, after which the table works as any other.
**
** Key values name bytes the table does not own; csq_group_keep copies
** bytes into blocks the table owns, which never move, for a caller whose
** bytes would not outlive it.
**
** The lookup (csq_group_find) is static inline: the executor calls it per
** row.
*/
#ifndef CSQ_DEVICE_GROUP_H
#define CSQ_DEVICE_GROUP_H

#include <stdint.h>

#include "device/format/program.h"
#include "device/format/value.h"

typedef struct csq_group_blk csq_group_blk;

typedef struct csq_group {
  int nKey;                      /* key values per group */
  uint32_t stride;               /* bytes of a group's state block */
  uint32_t nGroup;               /* groups made */
  uint32_t nAlloc;               /* groups the arrays below hold */
  csq_value *aKey;               /* nKey values per group */
  uint64_t *aHash;               /* hash of each group's keys */
  uint8_t *aState;               /* stride bytes per group */
  uint32_t *aSlot;               /* open addressing: group + 1, 0 empty */
  uint32_t nSlot;                /* 0, or a power of 2 at least twice nGroup */
  size_t szKey, szHash, szState; /* bytes allocated for aKey, aHash, aState */
  csq_group_blk *pBlk;           /* bytes kept by csq_group_keep */
  uint8_t bNoHash;               /* aHash unset: groups made without slots or hashes */
} csq_group;

/* No slot: the group is made outside the hash table (csq_group_add). */
#define CSQ_GROUP_NO_SLOT UINT32_MAX

/* The layout of grouped program pp's aggregate states in a group's block:
** SUM / TOTAL / AVG states first (szSum bytes each, a multiple of 16, so
** they stay 16-aligned), then the 8-byte counts and the MIN / MAX values
** (a csq_value each). Sets aOff[i], aggregate i's offset; returns the
** stride (a multiple of 16, at least 16). */
uint32_t csq_group_layout(const csq_prog *pp, size_t szSum, uint32_t *aOff);

/* An empty table of nKey keys and stride-byte states per group. */
void csq_group_init(csq_group *t, int nKey, uint32_t stride);
/* Free what t holds, and the bytes kept for it; t is empty again. Its
** large arrays are kept for the next tables (group.c), up to a bound. */
void csq_group_free(csq_group *t);
/* Unmap the large arrays kept for the next tables. */
void csq_group_release_kept(void);

/* The hash of a group's keys, combined one key's csq_value_hash at a
** time: start from CSQ_GROUP_HASH_SEED, csq_group_hash_step each key, and
** csq_mix64 the whole (csq_group_hash does all three). A caller that
** hashes a vector of rows key by key must combine the same way. */
#define CSQ_GROUP_HASH_SEED 0x84222325cbf29ce4ull
static inline uint64_t csq_group_hash_step(uint64_t h, uint64_t hKey) {
  return (h ^ hKey) * 0x100000001b3ull;
}
static inline uint64_t csq_group_hash(const csq_value *aK, int nKey) {
  uint64_t h = CSQ_GROUP_HASH_SEED;
  for (int j = 0; j < nKey; j++) h = csq_group_hash_step(h, csq_value_hash(&aK[j]));
  return csq_mix64(h);
}

/* Make room in the hash slots for one more group. 0 or -ENOMEM. Inline
** for its common case, nothing to do; csq_group_grow re-slots (hashing
** the groups first if bNoHash). */
int csq_group_grow(csq_group *t);
static inline int csq_group_reserve(csq_group *t) {
  return (uint64_t)(t->nGroup + 1) * 2 <= t->nSlot ? 0 : csq_group_grow(t);
}

/* The group whose keys equal aK (hash h), or -1 with *pPos the empty slot
** where a group of those keys belongs (for csq_group_add, unless a group
** is made or the slots grow in between). The slots must have room
** (csq_group_reserve). */
static inline int64_t csq_group_find(const csq_group *t, const csq_value *aK, uint64_t h,
                                     uint32_t *pPos) {
  int nKey = t->nKey;
  uint32_t mask = t->nSlot - 1, pos = (uint32_t)h & mask, s;
  while ((s = t->aSlot[pos]) != 0) {
    uint32_t g = s - 1;
    if (t->aHash[g] == h) {
      const csq_value *gk = &t->aKey[(size_t)g * nKey];
      int j = 0;
      while (j < nKey && csq_value_eq(&gk[j], &aK[j])) j++;
      if (j == nKey) return g;
    }
    pos = (pos + 1) & mask;
  }
  *pPos = pos;
  return -1;
}

/* Make a group of keys aK (copied as values: their bytes stay where they
** are) and hash h (ignored if bNoHash), its state zeroed, in slot pos
** (from csq_group_find) or CSQ_GROUP_NO_SLOT. Its number, or -1 on OOM
** (then t is unchanged). */
int64_t csq_group_add(csq_group *t, const csq_value *aK, uint64_t h, uint32_t pos);

/* Keys and state block of group g. */
static inline const csq_value *csq_group_keys(const csq_group *t, uint32_t g) {
  return &t->aKey[(size_t)g * t->nKey];
}
static inline uint8_t *csq_group_state(const csq_group *t, uint32_t g) {
  return t->aState + (size_t)g * t->stride;
}

/* A copy of z[0..n) owned by t, which stays put until csq_group_free;
** NULL on OOM. */
const uint8_t *csq_group_keep(csq_group *t, const uint8_t *z, uint32_t n);

#endif /* CSQ_DEVICE_GROUP_H */
