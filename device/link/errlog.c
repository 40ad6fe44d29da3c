/*
** device/link/errlog.c - the per-queue failure log of the backends; see errlog.h.
*/
#include <stdio.h>
#include <string.h>

#include "device/link/errlog.h"

void dev_errlog_init(dev_errlog *p) {
  memset(p, 0, sizeof(*p));
  pthread_mutex_init(&p->mu, NULL);
}

void dev_errlog_free(dev_errlog *p) {
  pthread_mutex_destroy(&p->mu);
}

void dev_errlog_add(dev_errlog *p, uint16_t cid, uint16_t sf, const char *zDetail) {
  pthread_mutex_lock(&p->mu);
  unsigned i = p->n++ % DEV_ERRLOG_N;
  p->a[i].cid = cid;
  p->a[i].sf = sf;
  snprintf(p->a[i].z, sizeof(p->a[i].z), "%s", zDetail ? zDetail : "");
  pthread_mutex_unlock(&p->mu);
}

int dev_errlog_find(dev_errlog *p, uint16_t cid, uint16_t sf, char *zOut, size_t nOut) {
  int bFound = 0;
  zOut[0] = 0;
  pthread_mutex_lock(&p->mu);
  unsigned nKept = p->n < DEV_ERRLOG_N ? p->n : DEV_ERRLOG_N;
  for (unsigned k = 1; k <= nKept; k++) {
    unsigned i = (p->n - k) % DEV_ERRLOG_N;
    if (p->a[i].cid == cid && p->a[i].sf == sf) {
      snprintf(zOut, nOut, "%s", p->a[i].z);
      bFound = 1;
      break;
    }
  }
  pthread_mutex_unlock(&p->mu);
  return bFound;
}
