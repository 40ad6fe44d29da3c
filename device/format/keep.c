/*
** device/format/keep.c - the pool of kept blocks (keep.h).
*/
#include "device/format/keep.h"

void *csq_keep_take(csq_keep *k, size_t nMin, size_t nMax, size_t *pn) {
  void *p = NULL;
  pthread_mutex_lock(&k->mu);
  int iBest = -1;
  for (int i = 0; i < k->n; i++)
    if (k->a[i].n >= nMin && k->a[i].n <= nMax && (iBest < 0 || k->a[i].n < k->a[iBest].n))
      iBest = i;
  if (iBest >= 0) {
    p = k->a[iBest].p;
    *pn = k->a[iBest].n;
    k->nBytes -= k->a[iBest].n;
    k->a[iBest] = k->a[--k->n];
  }
  pthread_mutex_unlock(&k->mu);
  return p;
}

int csq_keep_give(csq_keep *k, void *p, size_t n) {
  int bKept = 0;
  pthread_mutex_lock(&k->mu);
  if (k->n < k->nSlot && k->nBytes + n <= k->nMaxBytes) {
    k->a[k->n].p = p;
    k->a[k->n++].n = n;
    k->nBytes += n;
    bKept = 1;
  }
  pthread_mutex_unlock(&k->mu);
  return bKept;
}

void csq_keep_drain(csq_keep *k, void (*xFree)(void *p, size_t n)) {
  pthread_mutex_lock(&k->mu);
  while (k->n > 0) {
    k->n--;
    xFree(k->a[k->n].p, k->a[k->n].n);
  }
  k->nBytes = 0;
  pthread_mutex_unlock(&k->mu);
}
