/*
** device/format/group.c - the table of groups (device/format/group.h):
** growing its arrays and its hash slots, and the blocks of bytes it keeps.
**
** Large arrays (a merge of a million groups holds hundreds of MiB) are
** mapped rather than malloc'd: growing one is then an mremap, which moves
** page tables instead of copying bytes as realloc does once glibc serves
** the size from its heap, and the mapping asks for transparent huge
** pages, one page fault per 2 MiB instead of per 4 KiB. Freed mappings
** are kept for the next tables, up to a bound.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "device/format/group.h"
#include "device/format/keep.h"

/* A block of kept bytes; blocks are never reallocated, so kept bytes stay
** put. */
struct csq_group_blk {
  csq_group_blk *pNext;
  size_t nUsed, nSize;
  uint8_t a[];
};

#define GROUP_BLK_MIN 65536 /* bytes of a block, unless one copy needs more */

#define GROUP_MAP_MIN  ((size_t)4 << 20) /* arrays of this many bytes or more are mapped */
#define GROUP_MAP_PAGE ((size_t)2 << 20) /* a mapping's size is a multiple of this */

static size_t map_size(size_t n) {
  return (n + GROUP_MAP_PAGE - 1) & ~(GROUP_MAP_PAGE - 1);
}

/* Mappings freed by one table are kept, up to GROUP_KEEP_BYTES in all, for
** the next ones: a query makes the same large tables each time it runs,
** and pages fresh from the kernel are zeroed before use, which costs more
** than the grouping that fills them. */
#define GROUP_KEEP_SLOTS 16
#define GROUP_KEEP_BYTES ((size_t)384 << 20)

static csq_keep gKeep = CSQ_KEEP_INIT(GROUP_KEEP_SLOTS, GROUP_KEEP_BYTES);

static void map_free(void *p, size_t n) {
  munmap(p, n);
}

/* Mapping p of n bytes is no longer used: kept if there is room, else
** unmapped. */
static void keep_give(void *p, size_t n) {
  if (!csq_keep_give(&gKeep, p, n)) munmap(p, n);
}

void csq_group_release_kept(void) {
  csq_keep_drain(&gKeep, map_free);
}

/* Array p of nOld bytes (NULL if nOld is 0) resized to at least nNew bytes,
** larger: malloc'd below GROUP_MAP_MIN bytes, mapped from there on (a size
** says which, so callers keep sizes, not flags). The smallest kept mapping
** of at least the size is taken first, whole; *pnCap is the array's size
** now, which the caller keeps. The new array, or NULL on OOM (p is then
** unchanged). The bytes past nOld are undefined. A size no larger than
** nOld returns p. */
static void *arr_grow(void *p, size_t nOld, size_t nNew, size_t *pnCap) {
  *pnCap = nOld;
  if (nNew <= nOld) return p; /* grown before, by a call that failed later */
  if (nNew < GROUP_MAP_MIN) {
    void *q = realloc(p, nNew);
    if (q) *pnCap = nNew;
    return q;
  }
  /* any larger kept mapping will do (the smallest): a table grows through
  ** the same sizes each time a query runs, and one that takes the mapping
  ** its last size had grows no more */
  size_t nMap = map_size(nNew), nKept = 0;
  void *q = csq_keep_take(&gKeep, nMap, SIZE_MAX, &nKept);
  if (q) {
    if (nOld) memcpy(q, p, nOld);
    if (nOld >= GROUP_MAP_MIN)
      keep_give(p, nOld);
    else
      free(p);
    *pnCap = nKept;
    return q;
  }
  if (nOld >= GROUP_MAP_MIN) {
    q = mremap(p, nOld, nMap, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) return NULL;
  } else {
    q = mmap(NULL, nMap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED) return NULL;
    if (nOld) memcpy(q, p, nOld);
    free(p);
  }
#ifdef MADV_HUGEPAGE
  madvise(q, nMap, MADV_HUGEPAGE); /* advice only: no huge pages is fine */
#endif
  *pnCap = nMap;
  return q;
}

/* Free array p of n bytes (arr_grow's size, or arr_zero's). */
static void arr_free(void *p, size_t n) {
  if (!p) return;
  if (n >= GROUP_MAP_MIN)
    keep_give(p, map_size(n));
  else
    free(p);
}

/* A zeroed array of n bytes, for arr_free; NULL on OOM. */
static void *arr_zero(size_t n) {
  if (n < GROUP_MAP_MIN) return calloc(1, n);
  size_t nKept = 0;
  void *q = csq_keep_take(&gKeep, map_size(n), map_size(n), &nKept);
  if (q) return memset(q, 0, n);
  q = mmap(NULL, map_size(n), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (q == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
  madvise(q, map_size(n), MADV_HUGEPAGE);
#endif
  return q;
}

/* Bytes of the key array for n groups. */
static size_t key_bytes(const csq_group *t, uint32_t n) {
  return sizeof(csq_value) * (size_t)n * (t->nKey ? t->nKey : 1);
}

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
  arr_free(t->aKey, t->szKey);
  arr_free(t->aHash, t->szHash);
  arr_free(t->aState, t->szState);
  arr_free(t->aSlot, sizeof(uint32_t) * (size_t)t->nSlot);
  for (csq_group_blk *b = t->pBlk, *next; b; b = next) {
    next = b->pNext;
    free(b);
  }
  csq_group_init(t, t->nKey, t->stride);
}

int csq_group_grow(csq_group *t) {
  uint32_t nNew = t->nSlot ? t->nSlot * 2 : 1024;
  if (t->bNoHash) { /* the groups made so far get their hashes and slots at once */
    for (uint32_t g = 0; g < t->nGroup; g++)
      t->aHash[g] = csq_group_hash(csq_group_keys(t, g), t->nKey);
    while ((uint64_t)(t->nGroup + 1) * 2 > nNew) nNew *= 2;
    t->bNoHash = 0;
  }
  uint32_t *a = arr_zero(sizeof(uint32_t) * (size_t)nNew);
  if (!a) return -ENOMEM;
  for (uint32_t g = 0; g < t->nGroup; g++) {
    uint32_t pos = (uint32_t)t->aHash[g] & (nNew - 1);
    while (a[pos]) pos = (pos + 1) & (nNew - 1);
    a[pos] = g + 1;
  }
  arr_free(t->aSlot, sizeof(uint32_t) * (size_t)t->nSlot);
  t->aSlot = a;
  t->nSlot = nNew;
  return 0;
}

int64_t csq_group_add(csq_group *t, const csq_value *aK, uint64_t h, uint32_t pos) {
  if (t->nGroup == t->nAlloc) {
    uint32_t nNew = t->nAlloc ? t->nAlloc * 2 : 64;
    /* each array's size is its own (szKey, ...): one may grow and the
    ** next fail, and nAlloc is what all three hold */
    size_t nCap;
    csq_value *aKey = arr_grow(t->aKey, t->szKey, key_bytes(t, nNew), &nCap);
    if (!aKey) return -1;
    t->aKey = aKey;
    t->szKey = nCap;
    uint64_t *aH = arr_grow(t->aHash, t->szHash, sizeof(uint64_t) * (size_t)nNew, &nCap);
    if (!aH) return -1;
    t->aHash = aH;
    t->szHash = nCap;
    uint8_t *aS = arr_grow(t->aState, t->szState, (size_t)t->stride * nNew, &nCap);
    if (!aS) return -1;
    t->aState = aS;
    t->szState = nCap;
    t->nAlloc = nNew;
  }
  uint32_t g = t->nGroup++;
  for (int j = 0; j < t->nKey; j++) t->aKey[(size_t)g * t->nKey + j] = aK[j];
  if (!t->bNoHash) t->aHash[g] = h;
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
