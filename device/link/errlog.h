/*
** device/link/errlog.h - a backend queue's log of recent command failures, like
** NVMe's Error Information log page: each entry keeps the failed command's
** cid, its status and the device's detail text. The host may reap a failure
** after later failures on the same queue (its driver stashes completions,
** scans hand them to one another), so the detail is looked up by cid and
** status rather than read as "the last failure". The host driver keeps
** its own messages for completions the same way.
*/
#ifndef CSQ_DEVICE_ERRLOG_H
#define CSQ_DEVICE_ERRLOG_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define DEV_ERRLOG_N 16 /* failures remembered per queue */
/* bytes of text per failure (a driver message with the device's detail) */
#define DEV_ERRLOG_TEXT 640

typedef struct dev_errlog {
  pthread_mutex_t mu; /* completions are posted from device threads */
  unsigned n;         /* entries ever added; the newest is a[(n - 1) % DEV_ERRLOG_N] */
  struct {
    uint16_t cid, sf;
    char z[DEV_ERRLOG_TEXT];
  } a[DEV_ERRLOG_N];
} dev_errlog;

void dev_errlog_init(dev_errlog *p);
void dev_errlog_free(dev_errlog *p);
/* Record a failure (zDetail may be NULL). Thread safe. */
void dev_errlog_add(dev_errlog *p, uint16_t cid, uint16_t sf, const char *zDetail);
/* The newest entry for cid and sf, copied into zOut: 1, or 0 with "" if
** none is kept. */
int dev_errlog_find(dev_errlog *p, uint16_t cid, uint16_t sf, char *zOut, size_t nOut);

#endif
