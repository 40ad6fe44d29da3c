/*
** device/format/group.c - the table of groups (device/format/group.h):
** growing its arrays and its hash slots, and the blocks of bytes it keeps.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device/format/group.h"

/* A block of kept bytes; blocks are never reallocated, so kept bytes stay
** put. */
struct csq_group_blk {
  csq_group_blk *pNext;
  size_t nUsed, nSize;
  uint8_t a[];
};

#define GROUP_BLK_MIN 65536 /* bytes of a block, unless one copy needs more */

uint32_t csq_group_layout(const csq_prog *pp, size_t szSum, uint32_t *aOff) {
  uint32_t off = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < pp->nAgg; i++) {
      int fn = pp->aAgg[i].fn, bSum = csq_agg_state_cols(fn) > 1;
      if (bSum != (pass == 0)) continue;
      aOff[i] = off;
      off += bSum                                     ? (uint32_t)szSum
             : fn == CSQ_AGG_MIN || fn == CSQ_AGG_MAX ? (uint32_t)sizeof(csq_value)
                                                      : 8;
    }
  uint32_t stride = (off + 15) & ~15u;
  return stride ? stride : 16;
}

void csq_group_init(csq_group *t, int nKey, uint32_t stride) {
  memset(t, 0, sizeof(*t));
  t->nKey = nKey;
  t->stride = stride;
}

void csq_group_free(csq_group *t) {
  free(t->aKey);
  free(t->aHash);
  free(t->aState);
  free(t->aSlot);
  for (csq_group_blk *b = t->pBlk, *next; b; b = next) {
    next = b->pNext;
    free(b);
  }
  csq_group_init(t, t->nKey, t->stride);
}

int csq_group_grow(csq_group *t) {
  uint32_t nNew = t->nSlot ? t->nSlot * 2 : 1024;
  uint32_t *a = calloc(nNew, sizeof(uint32_t));
  if (!a) return -ENOMEM;
  for (uint32_t g = 0; g < t->nGroup; g++) {
    uint32_t pos = (uint32_t)t->aHash[g] & (nNew - 1);
    while (a[pos]) pos = (pos + 1) & (nNew - 1);
    a[pos] = g + 1;
  }
  free(t->aSlot);
  t->aSlot = a;
  t->nSlot = nNew;
  return 0;
}

int64_t csq_group_add(csq_group *t, const csq_value *aK, uint64_t h, uint32_t pos) {
  if (t->nGroup == t->nAlloc) {
    uint32_t nNew = t->nAlloc ? t->nAlloc * 2 : 64;
    csq_value *aKey = realloc(t->aKey, sizeof(csq_value) * (size_t)nNew * (t->nKey ? t->nKey : 1));
    if (!aKey) return -1;
    t->aKey = aKey;
    uint64_t *aH = realloc(t->aHash, sizeof(uint64_t) * nNew);
    if (!aH) return -1;
    t->aHash = aH;
    uint8_t *aS = realloc(t->aState, (size_t)t->stride * nNew);
    if (!aS) return -1;
    t->aState = aS;
    t->nAlloc = nNew;
  }
  uint32_t g = t->nGroup++;
  for (int j = 0; j < t->nKey; j++) t->aKey[(size_t)g * t->nKey + j] = aK[j];
  t->aHash[g] = h;
  memset(t->aState + (size_t)g * t->stride, 0, t->stride);
  if (pos != CSQ_GROUP_NO_SLOT) t->aSlot[pos] = g + 1;
  return g;
}

const uint8_t *csq_group_keep(csq_group *t, const uint8_t *z, uint32_t n) {
  csq_group_blk *b = t->pBlk;
  if (!b || b->nSize - b->nUsed < n) {
    size_t nSize = n > GROUP_BLK_MIN ? n : GROUP_BLK_MIN;
    b = malloc(sizeof(*b) + nSize);
    if (!b) return NULL;
    b->pNext = t->pBlk;
    b->nUsed = 0;
    b->nSize = nSize;
    t->pBlk = b;
  }
  uint8_t *p = b->a + b->nUsed;
  if (n) memcpy(p, z, n);
  b->nUsed += n;
  return p;
}
