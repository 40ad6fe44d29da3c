/*
** device/engine/cp_jobs.c - the compute engines' job list (cp_jobs.h).
*/
#include <unistd.h>
#include "device/engine/cp_jobs.h"

void dev_cp_jobs_init(dev_cp_jobs *jobs) {
  pthread_mutex_init(&jobs->mu, NULL);
  pthread_cond_init(&jobs->cond, NULL);
  jobs->pHead = jobs->pTail = NULL;
  jobs->nJob = 0;
  jobs->bStop = 0;
}

void dev_cp_jobs_destroy(dev_cp_jobs *jobs) {
  pthread_mutex_destroy(&jobs->mu);
  pthread_cond_destroy(&jobs->cond);
}

void dev_cp_jobs_push(dev_cp_jobs *jobs, dev_cp_job *j) {
  j->pNext = NULL;
  pthread_mutex_lock(&jobs->mu);
  if (jobs->pTail)
    jobs->pTail->pNext = j;
  else
    jobs->pHead = j;
  jobs->pTail = j;
  __atomic_fetch_add(&jobs->nJob, 1, __ATOMIC_RELEASE);
  pthread_cond_signal(&jobs->cond);
  pthread_mutex_unlock(&jobs->mu);
}

dev_cp_job *dev_cp_jobs_take(dev_cp_jobs *jobs) {
  dev_cp_job *j;
  pthread_mutex_lock(&jobs->mu);
  while (!jobs->pHead && !jobs->bStop) pthread_cond_wait(&jobs->cond, &jobs->mu);
  j = jobs->pHead;
  if (j) {
    jobs->pHead = j->pNext;
    if (!jobs->pHead) jobs->pTail = NULL;
    __atomic_fetch_sub(&jobs->nJob, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&jobs->mu);
  return j; /* NULL: stopping and drained */
}

void dev_cp_jobs_stop(dev_cp_jobs *jobs) {
  pthread_mutex_lock(&jobs->mu);
  jobs->bStop = 1;
  pthread_cond_broadcast(&jobs->cond);
  pthread_mutex_unlock(&jobs->mu);
}

int dev_cp_engines(int nEngines) {
  int n = nEngines > 0 ? nEngines : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  if (n > 256) n = 256;
  return n;
}
