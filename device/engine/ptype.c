/*
** device/engine/ptype.c - the process-wide table of program types (ptype.h).
** One slot per type byte; entries are only ever added, so lookups read the
** slot with an acquire load and take no lock.
*/
#include <errno.h>
#include <pthread.h>
#include <stddef.h>

#include "device/engine/ptype.h"

static const dev_ptype *apType[256];
static pthread_mutex_t ptypeMutex = PTHREAD_MUTEX_INITIALIZER;

int dev_ptype_register(const dev_ptype *p) {
  int rc = 0;
  if (!p || !p->xVerify || !p->xRun) return -EINVAL;
  pthread_mutex_lock(&ptypeMutex);
  if (apType[p->type] && apType[p->type] != p)
    rc = -EEXIST;
  else
    __atomic_store_n(&apType[p->type], p, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&ptypeMutex);
  return rc;
}

const dev_ptype *dev_ptype_find(uint8_t type) {
  const dev_ptype *p = __atomic_load_n(&apType[type], __ATOMIC_ACQUIRE);
  /* csq's own executor (exec_run.c) is registered here, on first use, and
  ** nowhere else; the reference links the executor into every user of this table. */
  if (!p && type == CSQ_PTYPE_CSQ) {
    dev_ptype_register(&dev_ptype_csq);
    p = __atomic_load_n(&apType[type], __ATOMIC_ACQUIRE);
  }
  return p;
}
