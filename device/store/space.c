/*
** device/store/space.c - free-space allocation on the NVM namespace.
**
** Free space is a sorted, coalesced list of extents below the high-water mark
** (hwm); beyond it everything is free. It is never stored: it is rebuilt from
** the catalog (every block a committed object uses) when a writer starts on a
** generation it did not write itself, so no crash can leak or double-book it.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "device/store/store_int.h"

static int ext_cmp(const void *a, const void *b) {
  const store_extent *x = a, *y = b;
  return x->lba < y->lba ? -1 : x->lba > y->lba;
}

/* First fit below hwm, else extend hwm. 0, or -ENOSPC past capacity. */
int space_alloc(store_freemap *s, uint64_t nblk, uint64_t *pLba) {
  for (int i = 0; i < s->n; i++) {
    if (s->a[i].nblk >= nblk) {
      *pLba = s->a[i].lba;
      s->a[i].lba += nblk;
      s->a[i].nblk -= nblk;
      if (s->a[i].nblk == 0) {
        memmove(&s->a[i], &s->a[i + 1], (size_t)(s->n - i - 1) * sizeof(store_extent));
        s->n--;
      }
      return 0;
    }
  }
  if (s->nCap && s->hwm + nblk > s->nCap) return -ENOSPC;
  *pLba = s->hwm;
  s->hwm += nblk;
  return 0;
}

/* Return an extent; coalesces with neighbours and with the hwm. */
int space_free(store_freemap *s, uint64_t lba, uint64_t nblk) {
  if (nblk == 0) return 0;
  if (lba + nblk == s->hwm) {
    s->hwm = lba;
    /* the last free extent may now touch the hwm */
    while (s->n > 0 && s->a[s->n - 1].lba + s->a[s->n - 1].nblk == s->hwm) {
      s->hwm = s->a[s->n - 1].lba;
      s->n--;
    }
    return 0;
  }
  int i = 0;
  while (i < s->n && s->a[i].lba < lba) i++;
  if (i > 0 && s->a[i - 1].lba + s->a[i - 1].nblk == lba) {
    s->a[i - 1].nblk += nblk;
    if (i < s->n && s->a[i - 1].lba + s->a[i - 1].nblk == s->a[i].lba) {
      s->a[i - 1].nblk += s->a[i].nblk;
      memmove(&s->a[i], &s->a[i + 1], (size_t)(s->n - i - 1) * sizeof(store_extent));
      s->n--;
    }
    return 0;
  }
  if (i < s->n && lba + nblk == s->a[i].lba) {
    s->a[i].lba = lba;
    s->a[i].nblk += nblk;
    return 0;
  }
  if (s->n == s->nAlloc) {
    int nNew = s->nAlloc ? s->nAlloc * 2 : 64;
    store_extent *aNew = realloc(s->a, (size_t)nNew * sizeof(store_extent));
    if (!aNew) return -ENOMEM;
    s->a = aNew;
    s->nAlloc = nNew;
  }
  memmove(&s->a[i + 1], &s->a[i], (size_t)(s->n - i) * sizeof(store_extent));
  s->a[i].lba = lba;
  s->a[i].nblk = nblk;
  s->a[i].gen = 0;
  s->n++;
  return 0;
}

void space_clear(store_freemap *s) {
  free(s->a);
  memset(s, 0, sizeof(*s));
}

/* Free = [CSQ_FIRST_DATA_LBA, hwm) minus the used extents. */
int space_rebuild(store_freemap *s, store_extent *aUsed, int nUsed, uint64_t hwm, uint64_t nCap) {
  s->n = 0;
  s->hwm = hwm;
  s->nCap = nCap;
  qsort(aUsed, (size_t)nUsed, sizeof(store_extent), ext_cmp);
  uint64_t at = CSQ_FIRST_DATA_LBA;
  for (int i = 0; i < nUsed; i++) {
    if (aUsed[i].lba > at) {
      int rc = space_free(s, at, aUsed[i].lba - at);
      if (rc) return rc;
    }
    if (aUsed[i].lba + aUsed[i].nblk > at) at = aUsed[i].lba + aUsed[i].nblk;
  }
  if (at < hwm) s->hwm = at; /* trailing free space folds into the hwm */
  return 0;
}

uint64_t space_free_blocks(const store_freemap *s) {
  uint64_t n = 0;
  for (int i = 0; i < s->n; i++) n += s->a[i].nblk;
  return n;
}
