/*
** device/format/vec.c - csq_vec: growable column vectors of SQLite-classed values.
**
** Owns the memory policy of csq_vec (see vec.h): geometric growth of the
** per-value arrays and of the byte heap, upkeep of clsMask, and the bulk
** operations (append a slice of another vector, keep a selection, truncate).
** Everything here is libc malloc/free; no SQLite.
*/
#include "device/format/vec.h"

#include "device/format/keep.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define VEC_MIN_CAP  64
#define VEC_MIN_HEAP 256

/* Arrays of at least this many bytes ask for transparent huge pages. */
#define VEC_HUGE_MIN  (4u << 20)
#define VEC_HUGE_PAGE ((uintptr_t)2 << 20)

/* A large array (a join's build side, its joined rows, a hash table) is
** written from start to end right after it is allocated: with 4 KiB pages
** that is a page fault every 4 KiB, which under virtualisation costs more
** than the writing. The 2 MiB-aligned interior of p[0..n) is marked for
** huge pages (a hint: the kernel may ignore it, and errors are ignored). */
void csq_mem_advise(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
  if (!p || n < VEC_HUGE_MIN) return;
  uintptr_t a = ((uintptr_t)p + VEC_HUGE_PAGE - 1) & ~(VEC_HUGE_PAGE - 1);
  uintptr_t e = ((uintptr_t)p + n) & ~(VEC_HUGE_PAGE - 1);
  if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
  (void)p;
  (void)n;
#endif
}

/* Freed large arrays are kept, up to VEC_KEEP_BYTES in all, for the next
** ones: a query allocates the same large arrays each time it runs, and
** memory fresh from the kernel is zeroed page by page before use. Not
** under AddressSanitizer, which must see every free. */
#if defined(__SANITIZE_ADDRESS__)
#define VEC_KEEP_SLOTS 0
#else
#define VEC_KEEP_SLOTS 32
#endif
#define VEC_KEEP_BYTES ((size_t)128 << 20)

static csq_keep gKeep = CSQ_KEEP_INIT(VEC_KEEP_SLOTS, VEC_KEEP_BYTES);

/* A large block of at least n bytes: a kept one of n to 2n bytes, else a
** new one advised for huge pages. */
static void *large_alloc(size_t n) {
  size_t nKept;
  void *p = csq_keep_take(&gKeep, n, 2 * n, &nKept);
  if (!p && (p = malloc(n)) != NULL) csq_mem_advise(p, n);
  return p;
}

/* Free block p, known to hold at least n bytes: kept if large and there is
** room. */
static void vec_block_free(void *p, size_t n) {
  if (p && n >= VEC_HUGE_MIN && csq_keep_give(&gKeep, p, n)) return;
  free(p);
}

static void block_free(void *p, size_t n) {
  (void)n;
  free(p);
}

void csq_vec_release_kept(void) {
  csq_keep_drain(&gKeep, block_free);
}

/* realloc of an array of nOld bytes to nNew bytes (nNew > nOld). A large
** one is taken afresh (a kept block, or a new one advised for huge pages)
** before the old bytes are copied in, so the copy already lands on huge
** pages (realloc would copy first); the old one is freed or kept. All
** nOld bytes are copied, as realloc would, not only a vector's n values:
** a caller may have written past n before raising it. NULL on OOM (p is
** then untouched). */
static void *vec_realloc(void *p, size_t nOld, size_t nNew) {
  if (nNew < VEC_HUGE_MIN) return realloc(p, nNew);
  void *q = large_alloc(nNew);
  if (!q) return NULL;
  if (nOld) memcpy(q, p, nOld);
  vec_block_free(p, nOld);
  return q;
}

void csq_vec_init(csq_vec *v) {
  memset(v, 0, sizeof(*v));
}

void csq_vec_free(csq_vec *v) {
  vec_block_free(v->aCls, v->nCap);
  vec_block_free(v->aVal, (size_t)v->nCap * sizeof(csq_val));
  vec_block_free(v->aLen, (size_t)v->nCap * sizeof(uint32_t));
  vec_block_free(v->aHeap, v->nHeapCap);
  memset(v, 0, sizeof(*v));
}

void csq_vec_reset(csq_vec *v) {
  v->n = 0;
  v->nHeap = 0;
  v->clsMask = 0;
}

/*
** Grow the per-value arrays to hold at least nCap values and the heap to at
** least nHeapCap bytes; never shrinks. Each array is realloc'd on its own and
** nCap is only raised once all three succeeded, so a failure leaves v valid
** (possibly with some arrays already larger than nCap says, which is harmless).
*/
int csq_vec_reserve(csq_vec *v, uint32_t nCap, uint64_t nHeapCap) {
  if (nCap > v->nCap) {
    uint8_t *aCls = vec_realloc(v->aCls, (size_t)v->nCap, (size_t)nCap);
    if (!aCls) return -ENOMEM;
    v->aCls = aCls;
    csq_val *aVal =
        vec_realloc(v->aVal, (size_t)v->nCap * sizeof(csq_val), (size_t)nCap * sizeof(csq_val));
    if (!aVal) return -ENOMEM;
    v->aVal = aVal;
    uint32_t *aLen =
        vec_realloc(v->aLen, (size_t)v->nCap * sizeof(uint32_t), (size_t)nCap * sizeof(uint32_t));
    if (!aLen) return -ENOMEM;
    v->aLen = aLen;
    v->nCap = nCap;
  }
  if (nHeapCap > v->nHeapCap) {
    if (nHeapCap > SIZE_MAX) return -ENOMEM;
    char *aHeap = vec_realloc(v->aHeap, (size_t)v->nHeapCap, (size_t)nHeapCap);
    if (!aHeap) return -ENOMEM;
    v->aHeap = aHeap;
    v->nHeapCap = nHeapCap;
  }
  return 0;
}

/* Make room for nMore values and nMoreHeap heap bytes, doubling so that a
** sequence of pushes costs amortised O(1) each. */
static int vec_grow(csq_vec *v, uint32_t nMore, uint64_t nMoreHeap) {
  uint32_t nCap = v->nCap;
  uint64_t nHeapCap = v->nHeapCap;
  if (nMore > UINT32_MAX - v->n) return -ENOMEM;
  if (v->n + nMore > nCap) {
    uint64_t want = (uint64_t)v->n + nMore;
    uint64_t c = nCap < VEC_MIN_CAP ? VEC_MIN_CAP : (uint64_t)nCap * 2;
    if (c < want) c = want;
    if (c > UINT32_MAX) c = UINT32_MAX;
    nCap = (uint32_t)c;
  }
  if (nMoreHeap > UINT64_MAX - v->nHeap) return -ENOMEM;
  if (v->nHeap + nMoreHeap > nHeapCap) {
    uint64_t want = v->nHeap + nMoreHeap;
    uint64_t c = nHeapCap < VEC_MIN_HEAP ? VEC_MIN_HEAP : nHeapCap * 2;
    if (c < want) c = want;
    nHeapCap = c;
  }
  return csq_vec_reserve(v, nCap, nHeapCap);
}

int csq_vec_push_null(csq_vec *v) {
  if (v->n >= v->nCap) {
    int rc = vec_grow(v, 1, 0);
    if (rc) return rc;
  }
  v->aCls[v->n] = CSQ_NULL;
  v->aVal[v->n].i = 0;
  v->aLen[v->n] = 0;
  v->n++;
  v->clsMask |= 1u << CSQ_NULL;
  return 0;
}

int csq_vec_push_int(csq_vec *v, int64_t i) {
  if (v->n >= v->nCap) {
    int rc = vec_grow(v, 1, 0);
    if (rc) return rc;
  }
  v->aCls[v->n] = CSQ_INT;
  v->aVal[v->n].i = i;
  v->aLen[v->n] = 0;
  v->n++;
  v->clsMask |= 1u << CSQ_INT;
  return 0;
}

int csq_vec_push_real(csq_vec *v, double r) {
  if (v->n >= v->nCap) {
    int rc = vec_grow(v, 1, 0);
    if (rc) return rc;
  }
  v->aCls[v->n] = CSQ_REAL;
  v->aVal[v->n].r = r;
  v->aLen[v->n] = 0;
  v->n++;
  v->clsMask |= 1u << CSQ_REAL;
  return 0;
}

/* Copies n bytes from p (p may be NULL when n == 0, and must not point into
** v's own heap, which may move). cls must be CSQ_TEXT or CSQ_BLOB, else
** -EINVAL. */
int csq_vec_push_bytes(csq_vec *v, int cls, const void *p, uint32_t n) {
  if (cls != CSQ_TEXT && cls != CSQ_BLOB) return -EINVAL;
  /* An empty value still gets a heap, so that csq_vec_bytes() never
  ** offsets a null pointer. */
  if (v->n >= v->nCap || v->nHeap + n > v->nHeapCap || !v->aHeap) {
    int rc = vec_grow(v, 1, n ? n : 1);
    if (rc) return rc;
  }
  if (n) memcpy(v->aHeap + v->nHeap, p, n);
  v->aCls[v->n] = (uint8_t)cls;
  v->aVal[v->n].off = v->nHeap;
  v->aLen[v->n] = n;
  v->nHeap += n;
  v->n++;
  v->clsMask |= (uint8_t)(1u << cls);
  return 0;
}

/*
** Append src's values [i0, i0+n) to v (v != src). TEXT/BLOB bytes are copied
** into v's heap; values that shared bytes in src (as decoded dictionary
** values do) get their own copy. The caller keeps ownership of src.
*/
int csq_vec_append(csq_vec *v, const csq_vec *src, uint32_t i0, uint32_t n) {
  if (i0 > src->n || n > src->n - i0) return -EINVAL;
  if (n == 0) return 0;
  const uint8_t *aCls = src->aCls + i0;
  uint8_t mask = 0;
  uint64_t nBytes = 0;
  for (uint32_t k = 0; k < n; k++) mask |= (uint8_t)(1u << aCls[k]);
  const uint8_t varMask = (1u << CSQ_TEXT) | (1u << CSQ_BLOB);
  if (mask & varMask) {
    for (uint32_t k = 0; k < n; k++) nBytes += src->aLen[i0 + k];
  }
  int rc = vec_grow(v, n, nBytes ? nBytes : (mask & varMask) != 0);
  if (rc) return rc;
  uint32_t d = v->n;
  memcpy(v->aCls + d, aCls, n);
  memcpy(v->aVal + d, src->aVal + i0, (size_t)n * sizeof(csq_val));
  memcpy(v->aLen + d, src->aLen + i0, (size_t)n * sizeof(uint32_t));
  if (mask & varMask) {
    for (uint32_t k = 0; k < n; k++) {
      uint8_t c = aCls[k];
      if (c == CSQ_TEXT || c == CSQ_BLOB) {
        uint32_t len = src->aLen[i0 + k];
        csq_copy_short(v->aHeap + v->nHeap, src->aHeap + src->aVal[i0 + k].off, len);
        v->aVal[d + k].off = v->nHeap;
        v->nHeap += len;
      }
    }
  }
  v->n += n;
  v->clsMask |= mask;
  return 0;
}

/*
** Append src's values aIdx[0..n) to v (v != src); UINT32_MAX stands for a
** NULL. The rows a hash join produced are gathered column by column this
** way: one pass sizes the heap and the class mask, one copies, so a value
** costs a few loads and stores and no capacity check.
*/
int csq_vec_gather(csq_vec *v, const csq_vec *src, const uint32_t *aIdx, uint32_t n) {
  if (n == 0) return 0;
  const uint8_t varMask = (1u << CSQ_TEXT) | (1u << CSQ_BLOB);
  if (src->clsMask == (1u << CSQ_INT) || src->clsMask == (1u << CSQ_REAL)) {
    /* one class of fixed size (a key, a number): one pass that reads only
    ** each value, where the rows of a build side come in random order and
    ** every array read is a cache miss */
    int rc = vec_grow(v, n, 0);
    if (rc) return rc;
    uint8_t cls = src->clsMask == (1u << CSQ_INT) ? CSQ_INT : CSQ_REAL, bNull = 0;
    uint8_t *aCls = v->aCls + v->n;
    csq_val *aVal = v->aVal + v->n;
    for (uint32_t k = 0; k < n; k++) {
      uint32_t j = aIdx[k];
      if (j == UINT32_MAX) {
        bNull = 1;
        aCls[k] = CSQ_NULL;
        aVal[k].i = 0;
      } else {
        aCls[k] = cls;
        aVal[k] = src->aVal[j];
      }
    }
    memset(v->aLen + v->n, 0, sizeof(uint32_t) * (size_t)n);
    v->n += n;
    v->clsMask |= (uint8_t)((1u << cls) | (bNull ? 1u << CSQ_NULL : 0));
    return 0;
  }
  uint8_t mask = 0;
  uint64_t nBytes = 0;
  int bVar = (src->clsMask & varMask) != 0;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t j = aIdx[k];
    if (j == UINT32_MAX) {
      mask |= 1u << CSQ_NULL;
      continue;
    }
    mask |= (uint8_t)(1u << src->aCls[j]);
    if (bVar) nBytes += src->aLen[j];
  }
  int rc = vec_grow(v, n, nBytes ? nBytes : (mask & varMask) != 0);
  if (rc) return rc;
  uint8_t *aCls = v->aCls + v->n;
  csq_val *aVal = v->aVal + v->n;
  uint32_t *aLen = v->aLen + v->n;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t j = aIdx[k];
    if (j == UINT32_MAX) {
      aCls[k] = CSQ_NULL;
      aVal[k].i = 0;
      aLen[k] = 0;
      continue;
    }
    aCls[k] = src->aCls[j];
    aVal[k] = src->aVal[j];
    aLen[k] = src->aLen[j];
  }
  if (mask & varMask) {
    for (uint32_t k = 0; k < n; k++) {
      if (aCls[k] != CSQ_TEXT && aCls[k] != CSQ_BLOB) continue;
      uint32_t len = aLen[k];
      csq_copy_short(v->aHeap + v->nHeap, src->aHeap + aVal[k].off, len);
      aVal[k].off = v->nHeap;
      v->nHeap += len;
    }
  }
  v->n += n;
  v->clsMask |= mask;
  return 0;
}

/* Recompute clsMask over the n values held (after values were dropped). */
static void vec_remask(csq_vec *v) {
  uint8_t mask = 0;
  for (uint32_t k = 0; k < v->n; k++) mask |= (uint8_t)(1u << v->aCls[k]);
  v->clsMask = mask;
}

/*
** Keep only the values listed in aSel[0..nSel) (ascending, each < v->n), in
** that order. Heap bytes are left where they are: offsets stay valid and a
** selection is usually short-lived, so compacting would be wasted copying.
*/
void csq_vec_select(csq_vec *v, const uint32_t *aSel, uint32_t nSel) {
  for (uint32_t k = 0; k < nSel; k++) {
    uint32_t j = aSel[k];
    v->aCls[k] = v->aCls[j];
    v->aVal[k] = v->aVal[j];
    v->aLen[k] = v->aLen[j];
  }
  v->n = nSel;
  vec_remask(v);
}

/*
** Reorder the values: value k becomes the old value aPerm[k], for k < n
** (each aPerm[k] < v->n; an index may be left out, not repeated). Heap bytes
** stay where they are, so offsets stay valid.
*/
int csq_vec_permute(csq_vec *v, const uint32_t *aPerm, uint32_t n) {
  uint32_t nCap = n ? n : 1;
  uint8_t *aCls = malloc(nCap);
  csq_val *aVal = malloc(sizeof(csq_val) * nCap);
  uint32_t *aLen = malloc(sizeof(uint32_t) * nCap);
  if (!aCls || !aVal || !aLen) {
    free(aCls);
    free(aVal);
    free(aLen);
    return -ENOMEM;
  }
  for (uint32_t k = 0; k < n; k++) {
    uint32_t j = aPerm[k];
    aCls[k] = v->aCls[j];
    aVal[k] = v->aVal[j];
    aLen[k] = v->aLen[j];
  }
  free(v->aCls);
  free(v->aVal);
  free(v->aLen);
  v->aCls = aCls;
  v->aVal = aVal;
  v->aLen = aLen;
  v->n = n;
  v->nCap = nCap;
  vec_remask(v);
  return 0;
}

/*
** Keep the first n values (no-op if n >= v->n). The heap is cut back to the
** end of the last byte still referenced, so bytes of dropped values are
** reclaimed when they sit at the end of the heap (the usual case, as values
** are appended in order).
*/
void csq_vec_truncate(csq_vec *v, uint32_t n) {
  if (n >= v->n) return;
  v->n = n;
  uint8_t mask = 0;
  uint64_t end = 0;
  for (uint32_t k = 0; k < n; k++) {
    uint8_t c = v->aCls[k];
    mask |= (uint8_t)(1u << c);
    if (c == CSQ_TEXT || c == CSQ_BLOB) {
      uint64_t e = v->aVal[k].off + v->aLen[k];
      if (e > end) end = e;
    }
  }
  v->clsMask = mask;
  if (end < v->nHeap) v->nHeap = end;
}
