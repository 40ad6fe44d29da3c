/*
** device/engine/cp_jobs.h - the list of jobs a device's compute engines
** take their work from, and how many engines a device runs. One
** implementation serves the emulated device (device/emu/) and the nvme
** backend's host engine (device/nvme/nvme_backend.c): each backend's job
** type begins with a dev_cp_job, and its engine threads loop on
** dev_cp_jobs_take until it returns NULL.
**
** Thread safety: every call but dev_cp_jobs_waiting takes jobs->mu; code
** that walks the list itself (pHead, pNext) holds jobs->mu while it does.
*/
#ifndef CSQ_DEVICE_CP_JOBS_H
#define CSQ_DEVICE_CP_JOBS_H

#include <pthread.h>

/* The link of a job in the list: the first member of a backend's job. */
typedef struct dev_cp_job dev_cp_job;
struct dev_cp_job {
  dev_cp_job *pNext;
};

typedef struct dev_cp_jobs {
  pthread_mutex_t mu;
  pthread_cond_t cond;
  dev_cp_job *pHead, *pTail; /* first in, first out */
  int nJob;                  /* jobs in the list: written under mu, read without it (atomic) */
  int bStop;                 /* set by dev_cp_jobs_stop */
} dev_cp_jobs;

/* Set up an empty list; dev_cp_jobs_destroy undoes it. */
void dev_cp_jobs_init(dev_cp_jobs *jobs);
/* Destroy the list's lock and condition; its jobs, if any, stay the
** caller's. */
void dev_cp_jobs_destroy(dev_cp_jobs *jobs);

/* Append j (the list's until an engine takes it) and wake one engine (a
** futex call only if one sleeps). */
void dev_cp_jobs_push(dev_cp_jobs *jobs, dev_cp_job *j);

/* The first job, taken out of the list (then the caller's), waiting for
** one as long as the list is empty; NULL once dev_cp_jobs_stop was called
** and the list is drained. */
dev_cp_job *dev_cp_jobs_take(dev_cp_jobs *jobs);

/* Wake every engine to drain the list and return (dev_cp_jobs_take gives
** NULL once it is empty). */
void dev_cp_jobs_stop(dev_cp_jobs *jobs);

/* 1 if a job waits in the list: without the lock, for a loop that asks
** often (taking mu that often would make pushers wait and wake). */
static inline int dev_cp_jobs_waiting(dev_cp_jobs *jobs) {
  return __atomic_load_n(&jobs->nJob, __ATOMIC_ACQUIRE) > 0;
}

/* How many engine threads a device runs for the options' nEngines: that
** many, or one per online CPU when it is 0 or less; 1 to 256. */
int dev_cp_engines(int nEngines);

#endif /* CSQ_DEVICE_CP_JOBS_H */
