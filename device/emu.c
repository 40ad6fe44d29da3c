/*
** device/emu.c - the emulated computational-storage device ("emu" backend):
** device object, controller thread, compute-engine pool, queue pairs.
** Commands themselves are in emu_admin.c and emu_io.c; see emu.h.
*/
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "emu.h"

/* How long the controller keeps polling the SQs after its last command
** before it sleeps: covers the think time of a host issuing commands back
** to back, so a synchronous round trip avoids two futex wakes. */
#define CTRL_SPIN_NS 50000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void emu_complete(dev_bqueue *q, const csq_sqe *pSqe, uint16_t sf, uint64_t result,
                  const dev_io_acct *pAcct, const char *zDetail) {
  csq_cqe cqe;
  dev_stats_account(q->pStats, pSqe, sf, pAcct);
  dev_stats_account(&q->pDev->stats, pSqe, sf, pAcct);
  if (sf) snprintf(q->zDetail, sizeof(q->zDetail), "%s", zDetail ? zDetail : "");
  cqe.dw0 = (uint32_t)result;
  cqe.dw1 = (uint32_t)(result >> 32);
  cqe.sq_head = 0;
  cqe.sq_id = 0;
  cqe.cid = pSqe->cid;
  cqe.status = (uint16_t)(sf << 1);
  dev_qp_post(&q->qp, &cqe);
  __atomic_fetch_sub(&q->nInflight, 1, __ATOMIC_RELEASE);
}

/* Hand a command to the engine pool. */
static void job_push(dev_backend *d, dev_bqueue *q, const csq_sqe *pSqe,
                     const dev_fault_hit *pHit) {
  emu_job *j = malloc(sizeof(*j));
  if (!j) {
    emu_complete(q, pSqe, CSQ_SC_INTERNAL, 0, NULL, "device out of memory");
    return;
  }
  j->pNext = NULL;
  j->q = q;
  j->sqe = *pSqe;
  j->bHit = pHit != NULL;
  if (pHit) j->hit = *pHit;
  pthread_mutex_lock(&d->jobMutex);
  if (d->pJobTail)
    d->pJobTail->pNext = j;
  else
    d->pJobHead = j;
  d->pJobTail = j;
  pthread_cond_signal(&d->jobCond);
  pthread_mutex_unlock(&d->jobMutex);
}

/* The controller's handling of one SQE: faults, then inline or engine. */
static void ctrl_dispatch(dev_backend *d, dev_bqueue *q, const csq_sqe *pSqe) {
  dev_fault_hit hit;
  int bHit;
  __atomic_fetch_add(&q->nInflight, 1, __ATOMIC_ACQUIRE);
  bHit = dev_fault_check(d->pFault, pSqe, &hit);
  if (bHit && hit.action == DEV_FAULT_TIMEOUT) { /* never completes */
    __atomic_fetch_sub(&q->nInflight, 1, __ATOMIC_RELEASE);
    return;
  }
  if (bHit && hit.action == DEV_FAULT_STATUS) {
    emu_complete(q, pSqe, hit.status, 0, NULL, "injected fault");
    return;
  }
  if (bHit && hit.action == DEV_FAULT_DELAY) {
    job_push(d, q, pSqe, &hit);
    return;
  }
  if (dev_sqe_is_admin(pSqe)) {
    uint64_t result = 0;
    dev_io_acct acct = {0};
    char zDetail[256] = "";
    uint16_t sf = emu_admin(q, pSqe, &result, &acct, zDetail, sizeof(zDetail));
    emu_complete(q, pSqe, sf, result, &acct, zDetail);
    return;
  }
  if (emu_io_is_quick(pSqe)) {
    emu_io(q, pSqe, d->pCtrlMio, bHit ? &hit : NULL, -1);
  } else {
    job_push(d, q, pSqe, bHit ? &hit : NULL);
  }
}

/* One pass over every queue; returns the number of commands taken. */
static int ctrl_pass(dev_backend *d) {
  int i, n = 0;
  pthread_mutex_lock(&d->qMutex);
  for (i = 0; i < d->nQ; i++) {
    dev_bqueue *q = d->apQ[i];
    csq_sqe sqe;
    int k;
    if (!q) continue;
    /* Bounded per queue per pass, so one busy queue cannot starve others. */
    for (k = 0; k < 32 && dev_qp_fetch(&q->qp, &sqe); k++) {
      ctrl_dispatch(d, q, &sqe);
      n++;
    }
  }
  pthread_mutex_unlock(&d->qMutex);
  return n;
}

static int ctrl_any_pending(dev_backend *d) {
  int i, b = 0;
  pthread_mutex_lock(&d->qMutex);
  for (i = 0; i < d->nQ && !b; i++)
    if (d->apQ[i] && dev_qp_pending(&d->apQ[i]->qp)) b = 1;
  pthread_mutex_unlock(&d->qMutex);
  return b;
}

static void *ctrl_main(void *pArg) {
  dev_backend *d = pArg;
  int64_t tLast = dev_now_ns();
  unsigned nIdle = 0;
  while (!__atomic_load_n(&d->bStop, __ATOMIC_ACQUIRE)) {
    if (ctrl_pass(d)) {
      nIdle = 0;
      continue;
    }
    if ((++nIdle & 63) != 0) {
      cpu_relax();
      continue;
    }
    sched_yield(); /* let a host thread on this core run */
    if (nIdle == 64) tLast = dev_now_ns();
    if (dev_now_ns() - tLast < CTRL_SPIN_NS) continue;
    /* Sleep until a host rings the SQ bell (or stop). */
    uint32_t s = dev_bell_prepare(&d->sqBell);
    if (!ctrl_any_pending(d) && !__atomic_load_n(&d->bStop, __ATOMIC_ACQUIRE))
      dev_bell_wait(&d->sqBell, s, 1000000000);
    dev_bell_done(&d->sqBell);
    nIdle = 0;
  }
  return NULL;
}

static void *engine_main(void *pArg) {
  emu_engine *e = pArg;
  dev_backend *d = e->pDev;
  for (;;) {
    emu_job *j;
    pthread_mutex_lock(&d->jobMutex);
    while (!d->pJobHead && !d->bJobStop) pthread_cond_wait(&d->jobCond, &d->jobMutex);
    j = d->pJobHead;
    if (!j) { /* stopping and drained */
      pthread_mutex_unlock(&d->jobMutex);
      break;
    }
    d->pJobHead = j->pNext;
    if (!d->pJobHead) d->pJobTail = NULL;
    pthread_mutex_unlock(&d->jobMutex);
    if (dev_sqe_is_admin(&j->sqe)) { /* only via a delay fault */
      uint64_t result = 0;
      dev_io_acct acct = {0};
      char zDetail[256] = "";
      uint16_t sf;
      sf = emu_admin(j->q, &j->sqe, &result, &acct, zDetail, sizeof(zDetail));
      if (j->bHit && j->hit.action == DEV_FAULT_DELAY) usleep(j->hit.delayMs * 1000u);
      emu_complete(j->q, &j->sqe, sf, result, &acct, zDetail);
    } else {
      emu_io(j->q, &j->sqe, e->pMio, j->bHit ? &j->hit : NULL, e->iEngine);
    }
    free(j);
  }
  return NULL;
}

static void emu_close(dev_backend *d);

static int emu_open(const char *zPath, const dev_options *pOpt, dev_backend **ppB, char **pzErr) {
  dev_backend *d = calloc(1, sizeof(*d));
  int rc, i;
  *ppB = NULL;
  if (!d) return -ENOMEM;
  pthread_mutex_init(&d->qMutex, NULL);
  pthread_mutex_init(&d->jobMutex, NULL);
  pthread_cond_init(&d->jobCond, NULL);
  dev_cp_init(&d->cp, 0, "this device");
  pthread_mutex_init(&d->resvMutex, NULL);
  d->zPath = strdup(zPath);
  if (!d->zPath) {
    emu_close(d);
    return -ENOMEM;
  }
  rc = dev_fault_parse(pOpt->zFault, &d->pFault, pzErr);
  /* always a fault set, so that dev_set_fault can fill it later */
  if (rc == 0 && !d->pFault) rc = dev_fault_new(&d->pFault);
  if (rc) goto fail;
  rc = dev_media_open(strcmp(zPath, ":memory:") ? zPath : NULL, pOpt->bCreate, pOpt->bDirect,
                      &d->pMedia, pzErr);
  if (rc) goto fail;
  d->nBlocks = dev_media_blocks(d->pMedia);
  d->nSlm = pOpt->nSlmBytes ? (pOpt->nSlmBytes + 4095) & ~(uint64_t)4095 : 256ull << 20;
  d->cp.nSlm = d->nSlm;
  /* SLM: reserved, not committed; pages cost memory once touched. */
  d->pSlm = mmap(NULL, d->nSlm, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (d->pSlm == MAP_FAILED) {
    d->pSlm = NULL;
    rc = -ENOMEM;
    if (pzErr && asprintf(pzErr, "cannot map %llu bytes of SLM for %s", (unsigned long long)d->nSlm,
                          zPath) < 0)
      *pzErr = NULL;
    goto fail;
  }
  d->nMaxDepth = DEV_MAX_QDEPTH;
  rc = dev_mio_open(d->pMedia, &d->pCtrlMio);
  if (rc) goto fail_io;
  d->nEngine = pOpt->nEngines > 0 ? pOpt->nEngines : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (d->nEngine < 1) d->nEngine = 1;
  if (d->nEngine > 256) d->nEngine = 256;
  d->aEngine = calloc(d->nEngine, sizeof(emu_engine));
  if (!d->aEngine) {
    rc = -ENOMEM;
    goto fail;
  }
  for (i = 0; i < d->nEngine; i++) {
    emu_engine *e = &d->aEngine[i];
    e->pDev = d;
    e->iEngine = i;
    rc = dev_mio_open(d->pMedia, &e->pMio);
    if (rc) goto fail_io;
    rc = -pthread_create(&e->thread, NULL, engine_main, e);
    if (rc) goto fail;
    e->bStarted = 1;
  }
  rc = -pthread_create(&d->ctrlThread, NULL, ctrl_main, d);
  if (rc) goto fail;
  d->bCtrlStarted = 1;
  *ppB = d;
  return 0;

fail_io:
  if (pzErr && !*pzErr &&
      asprintf(pzErr, "cannot set up io_uring for %s: %s", zPath, strerror(-rc)) < 0)
    *pzErr = NULL;
fail:
  if (pzErr && !*pzErr && asprintf(pzErr, "cannot open %s: %s", zPath, strerror(-rc)) < 0)
    *pzErr = NULL;
  emu_close(d);
  return rc;
}

static void emu_close(dev_backend *d) {
  int i;
  if (!d) return;
  if (d->bCtrlStarted) {
    __atomic_store_n(&d->bStop, 1, __ATOMIC_RELEASE);
    __atomic_fetch_add(&d->sqBell.seq, 1, __ATOMIC_SEQ_CST);
    dev_bell_ring(&d->sqBell);
    pthread_join(d->ctrlThread, NULL);
  }
  pthread_mutex_lock(&d->jobMutex);
  d->bJobStop = 1;
  pthread_cond_broadcast(&d->jobCond);
  pthread_mutex_unlock(&d->jobMutex);
  for (i = 0; d->aEngine && i < d->nEngine; i++) {
    if (d->aEngine[i].bStarted) pthread_join(d->aEngine[i].thread, NULL);
    dev_mio_close(d->aEngine[i].pMio);
  }
  free(d->aEngine);
  dev_mio_close(d->pCtrlMio);
  dev_cp_free(&d->cp);
  if (d->pSlm) munmap(d->pSlm, d->nSlm);
  dev_media_close(d->pMedia);
  dev_fault_free(d->pFault);
  pthread_mutex_destroy(&d->qMutex);
  pthread_mutex_destroy(&d->jobMutex);
  pthread_cond_destroy(&d->jobCond);
  pthread_mutex_destroy(&d->resvMutex);
  free(d->zPath);
  free(d);
}

static int emu_queue_open(dev_backend *d, uint32_t nDepth, dev_stats *pStats, dev_bqueue **ppQ) {
  dev_bqueue *q = calloc(1, sizeof(*q));
  int i, rc;
  *ppQ = NULL;
  if (!q) return -ENOMEM;
  q->pDev = d;
  q->pStats = pStats;
  pthread_mutex_lock(&d->qMutex);
  for (i = 0; i < EMU_MAX_QUEUES && d->apQ[i]; i++) {}
  if (i == EMU_MAX_QUEUES) {
    pthread_mutex_unlock(&d->qMutex);
    free(q);
    return -EMFILE;
  }
  rc = dev_qp_init(&q->qp, nDepth, (uint16_t)(i + 1), &d->sqBell);
  if (rc) {
    pthread_mutex_unlock(&d->qMutex);
    free(q);
    return rc;
  }
  q->iSlot = i;
  d->apQ[i] = q;
  if (i >= d->nQ) d->nQ = i + 1;
  pthread_mutex_unlock(&d->qMutex);
  *ppQ = q;
  return 0;
}

/* Detach the queue from the controller, wait for the commands the device
** still works on (engines, delayed completions), then free it. */
static void emu_queue_close(dev_bqueue *q) {
  dev_backend *d = q->pDev;
  pthread_mutex_lock(&d->qMutex);
  d->apQ[q->iSlot] = NULL;
  while (d->nQ > 0 && !d->apQ[d->nQ - 1]) d->nQ--;
  pthread_mutex_unlock(&d->qMutex);
  while (__atomic_load_n(&q->nInflight, __ATOMIC_ACQUIRE) > 0) usleep(200);
  emu_resv_drop(q);
  dev_qp_destroy(&q->qp);
  free(q);
}

dev_fault *dev_emu_fault(dev_backend *d) {
  return d->pFault;
}

static int emu_submit(dev_bqueue *q, const csq_sqe *pSqe) {
  return dev_qp_submit(&q->qp, pSqe);
}

static int emu_reap(dev_bqueue *q, csq_cqe *pCqe, int64_t timeoutNs) {
  return dev_qp_wait(&q->qp, pCqe, timeoutNs);
}

static int emu_identify_op(dev_backend *d, uint8_t cns, uint32_t nsid, void *pBuf) {
  return emu_identify(d, cns, nsid, pBuf);
}

static void emu_stats(dev_backend *d, dev_stats *pOut) {
  dev_stats_snapshot(pOut, &d->stats);
}

static const char *emu_detail(dev_bqueue *q) {
  return q->zDetail;
}

const dev_backend_ops dev_emu_backend = {
    "emu",           emu_open,   emu_close, emu_identify_op, emu_queue_open,
    emu_queue_close, emu_submit, emu_reap,  emu_stats,       emu_detail,
};
