/*
** device/format/keep.h - a pool of freed large blocks kept for the next
** allocations: a query allocates the same large arrays each time it runs,
** and memory fresh from the kernel is zeroed page by page before use,
** which can cost more than the work that fills it. The vectors
** (device/format/vec.c) and the tables of groups (device/format/group.c)
** each keep a pool of their own blocks; the pool only holds pointers and
** sizes, its owner allocates and frees.
*/
#ifndef CSQ_DEVICE_KEEP_H
#define CSQ_DEVICE_KEEP_H

#include <pthread.h>
#include <stddef.h>

#define CSQ_KEEP_MAX_SLOTS 32

typedef struct csq_keep {
  pthread_mutex_t mu;
  int nSlot;        /* blocks kept at most (<= CSQ_KEEP_MAX_SLOTS; 0: none) */
  size_t nMaxBytes; /* bytes kept at most */
  int n;            /* blocks kept */
  size_t nBytes;    /* their bytes */
  struct {
    void *p;
    size_t n;
  } a[CSQ_KEEP_MAX_SLOTS];
} csq_keep;

/* A pool of at most nSlot blocks and nMaxBytes bytes, for a static. */
#define CSQ_KEEP_INIT(nSlot, nMaxBytes)                                                            \
  {                                                                                                \
    PTHREAD_MUTEX_INITIALIZER, (nSlot), (nMaxBytes), 0, 0, {                                       \
      { 0 }                                                                                        \
    }                                                                                              \
  }

/* The smallest kept block of nMin to nMax bytes, out of the pool, its size
** in *pn; NULL if there is none. */
void *csq_keep_take(csq_keep *k, size_t nMin, size_t nMax, size_t *pn);
/* Keep block p of n bytes if there is room: 1, else 0 (the caller frees
** it). */
int csq_keep_give(csq_keep *k, void *p, size_t n);
/* Empty the pool, handing each block to xFree. */
void csq_keep_drain(csq_keep *k, void (*xFree)(void *p, size_t n));

#endif /* CSQ_DEVICE_KEEP_H */
