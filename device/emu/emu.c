/*
** device/emu/emu.c - the emulated computational-storage device ("emu" backend):
** device object, controller thread, compute-engine pool, queue pairs.
** Commands themselves are in emu_admin.c and emu_io.c; see emu.h.
**
** The controller's work (taking SQEs, running small commands inline) can
** use more than one thread: a pass takes at most one "heavy" inline
** transfer (a 128 KiB read is ~20 us of copying), and if commands are still
** waiting behind it the controller calls an engine to help (a job without a
** queue); the engine then takes commands the same way until the SQs stay
** empty, or a job (a program) waits for it. Each such thread has its own
** io_uring (dev_mio): an NVM Read it takes is submitted straight into the
** host buffer and completed when the thread reaps it, so a thread keeps
** several media reads in flight while it takes more commands (a read the
** page cache holds is copied during the submission itself). Faults are
** decided as commands are taken, under qMutex, so nth= rules count in SQ
** order. Waits spin on the waiter's own CPU time (dev_spin) before they
** sleep, so threads sharing a core do not sleep merely for not running.
*/
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/emu/emu.h"
#include "device/emu/mcache.h"

/* How long the controller keeps polling the SQs after its last command
** before it sleeps (its own CPU time, see dev_spin): covers the think time
** of a host issuing commands back to back, so a synchronous round trip
** avoids two futex wakes. */
#define CTRL_SPIN_NS 50000

/* How long an engine that helped drain the SQs keeps polling them for more
** before it returns to its job queue (own CPU time). */
#define HELP_SPIN_NS 20000

/* Commands taken from the SQs in one pass, at most (a pass is bounded so
** that one busy queue cannot starve the others). */
#define CTRL_BATCH 32

/* An inline transfer this large keeps a controller thread busy for tens of
** microseconds (a 128 KiB read is ~20 us of copying): a pass stops taking
** commands after one, so that the commands queued behind it are left for
** another thread (see ctrl_want_help). */
#define CTRL_HEAVY_BYTES (32u * 1024)

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
  if (sf) dev_errlog_add(&q->errLog, pSqe->cid, sf, zDetail);
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
  j->q = q;
  j->sqe = *pSqe;
  j->bHit = pHit != NULL;
  if (pHit) j->hit = *pHit;
  dev_cp_jobs_push(&d->jobs, &j->link);
}

/* A command taken from an SQ, its fault decision made (in SQ order, so that
** nth= rules count commands as the host issued them). */
typedef struct ctrl_cmd {
  dev_bqueue *q; /* kept alive by the nInflight the take added */
  csq_sqe sqe;
  int bHit;
  dev_fault_hit hit;
} ctrl_cmd;

/* One thread acting as the controller: the controller thread itself, or an
** engine helping it (engine_help). */
typedef struct ctrl_ctx {
  dev_backend *d;
  dev_mio *pMio;     /* the thread's own media context */
  int iNext;         /* queue the next pass starts at (round robin) */
  int bMain;         /* the controller thread: may call for help */
  int bDrained;      /* the last look at the SQs found them empty... */
  uint32_t lastRing; /* ...when the SQ bell had rung this many times */
} ctrl_ctx;

/* 1 if the command is an inline transfer of at least CTRL_HEAVY_BYTES. */
static int ctrl_is_heavy(const ctrl_cmd *c) {
  const csq_sqe *p = &c->sqe;
  uint64_t n = 0;
  if (c->bHit && c->hit.action != DEV_FAULT_CORRUPT && c->hit.action != DEV_FAULT_SHORT) return 0;
  if (dev_sqe_is_admin(p) || !emu_io_is_quick(p)) return 0;
  if (p->nsid == CSQ_NSID_NVM && (p->opcode == CSQ_NVM_READ || p->opcode == CSQ_NVM_WRITE))
    n = ((uint64_t)(p->cdw12 & 0xFFFF) + 1) * CSQ_LBA_SIZE;
  else if (p->nsid == CSQ_NSID_SLM &&
           (p->opcode == CSQ_SLM_READ || p->opcode == CSQ_SLM_WRITE || p->opcode == CSQ_SLM_FILL))
    n = p->cdw12;
  return n >= CTRL_HEAVY_BYTES;
}

/* Take up to CTRL_BATCH commands from the SQs into a[], starting at queue
** c->iNext, stopping after the first heavy one. Each taken command counts in
** its queue's nInflight (so the queue outlives it) and has been checked
** against the fault rules. *pbMore: commands are still waiting in some SQ
** after a heavy one was taken. Returns the number taken. */
static int ctrl_take(ctrl_ctx *c, ctrl_cmd *a, int *pbMore) {
  dev_backend *d = c->d;
  int n = 0, j, i, bStop = 0;
  *pbMore = 0;
  pthread_mutex_lock(&d->qMutex);
  if (c->iNext >= d->nQ) c->iNext = 0;
  for (j = 0; j < d->nQ && !bStop; j++) {
    dev_bqueue *q;
    i = (c->iNext + j) % d->nQ;
    q = d->apQ[i];
    if (!q) continue;
    while (n < CTRL_BATCH && dev_qp_fetch(&q->qp, &a[n].sqe)) {
      ctrl_cmd *p = &a[n++];
      p->q = q;
      __atomic_fetch_add(&q->nInflight, 1, __ATOMIC_ACQUIRE);
      p->bHit = dev_fault_check(d->pFault, &p->sqe, &p->hit);
      if (ctrl_is_heavy(p)) {
        bStop = 1;
        break;
      }
    }
    if (n == CTRL_BATCH) bStop = 1;
    if (bStop) c->iNext = i + 1; /* the next pass serves the other queues first */
  }
  if (bStop && n > 0 && ctrl_is_heavy(&a[n - 1]))
    for (j = 0; j < d->nQ && !*pbMore; j++)
      if (d->apQ[j] && dev_qp_pending(&d->apQ[j]->qp)) *pbMore = 1;
  pthread_mutex_unlock(&d->qMutex);
  return n;
}

/* Handle one taken command: injected faults, then inline on this thread or
** on an engine. */
static void ctrl_dispatch(ctrl_ctx *c, const ctrl_cmd *p) {
  dev_backend *d = c->d;
  dev_bqueue *q = p->q;
  const csq_sqe *pSqe = &p->sqe;
  const dev_fault_hit *pHit = p->bHit ? &p->hit : NULL;
  if (pHit && pHit->action == DEV_FAULT_TIMEOUT) { /* never completes */
    __atomic_fetch_sub(&q->nInflight, 1, __ATOMIC_RELEASE);
    return;
  }
  if (pHit && pHit->action == DEV_FAULT_STATUS) {
    emu_complete(q, pSqe, pHit->status, 0, NULL, "injected fault");
    return;
  }
  if (pHit && pHit->action == DEV_FAULT_DELAY) {
    job_push(d, q, pSqe, pHit);
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
    emu_io(q, pSqe, c->pMio, pHit, -1);
  } else {
    job_push(d, q, pSqe, pHit);
  }
}

/* Ask an engine to help drain the SQs: a job without a queue (engine_main
** then runs engine_help). Only one such request waits at a time; engines
** already helping are not counted, so up to every engine may help while
** the backlog lasts. */
static void ctrl_want_help(dev_backend *d) {
  emu_job *j;
  int bQueued = 0;
  pthread_mutex_lock(&d->jobs.mu);
  for (dev_cp_job *p = d->jobs.pHead; p && !bQueued; p = p->pNext)
    bQueued = ((emu_job *)p)->q == NULL;
  pthread_mutex_unlock(&d->jobs.mu);
  if (bQueued) return;
  j = calloc(1, sizeof(*j));
  if (j) dev_cp_jobs_push(&d->jobs, &j->link); /* no memory: the controller carries on alone */
}

/* One pass: take commands, call for help if a backlog remains behind a
** heavy one, run them, complete the media reads that have finished.
** Help is called only while this thread has no reads in flight: then it
** carries out its transfers itself (copies from the page cache, writes)
** and is the bottleneck; with reads in flight the media is, and one thread
** keeps many of them going alone. Returns the number of commands taken
** and reads completed. */
static int ctrl_pass(ctrl_ctx *c) {
  ctrl_cmd a[CTRL_BATCH];
  int bMore = 0, i, n = 0;
  /* Hosts ring the SQ bell after each submission: while it has not rung
  ** since the SQs were found empty, there is nothing to take, and the
  ** spinning threads (controller, helping engines) leave qMutex alone;
  ** taking it on every spin made them wait for one another in the kernel. */
  uint32_t r = __atomic_load_n(&c->d->sqBell.nRing, __ATOMIC_ACQUIRE);
  if (!c->bDrained || r != c->lastRing) {
    n = ctrl_take(c, a, &bMore);
    c->bDrained = n == 0;
    c->lastRing = r;
  }
  if (bMore && c->bMain && dev_mio_inflight(c->pMio) == 0) ctrl_want_help(c->d);
  for (i = 0; i < n; i++) ctrl_dispatch(c, &a[i]);
  if (dev_mio_inflight(c->pMio)) n += dev_mio_reap(c->pMio, 0);
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
  ctrl_ctx c = {.d = d, .pMio = d->pCtrlMio, .bMain = 1};
  dev_spin spin;
  unsigned nIdle = 0;
  dev_mio_set_async(c.pMio, 1);
  while (!__atomic_load_n(&d->bStop, __ATOMIC_ACQUIRE)) {
    if (ctrl_pass(&c)) {
      nIdle = 0;
      continue;
    }
    if (dev_mio_inflight(c.pMio)) {
      /* Media reads in flight (the page cache did not have them: they take
      ** tens of microseconds or more): sleep on them and on the SQ bell at
      ** once rather than spin (in a VM a spinning vCPU slows the device
      ** emulation serving those very reads). */
      uint32_t s = dev_bell_prepare(&d->sqBell);
      if (!ctrl_any_pending(d) && !__atomic_load_n(&d->bStop, __ATOMIC_ACQUIRE))
        dev_mio_wait(c.pMio, &d->sqBell.seq, s, 1000000000);
      dev_bell_done(&d->sqBell);
      nIdle = 0;
      continue;
    }
    if (nIdle++ == 0) dev_spin_init(&spin);
    if ((nIdle & 63) != 0) {
      cpu_relax();
      continue;
    }
    /* yields the core now and then, so a host thread on this core can run */
    if (dev_spin_step(&spin, CTRL_SPIN_NS)) continue;
    /* Sleep until a host rings the SQ bell (or stop). */
    uint32_t s = dev_bell_prepare(&d->sqBell);
    if (!ctrl_any_pending(d) && !__atomic_load_n(&d->bStop, __ATOMIC_ACQUIRE))
      dev_bell_wait(&d->sqBell, s, 1000000000);
    dev_bell_done(&d->sqBell);
    nIdle = 0;
  }
  /* (every queue is closed by now, so nothing should be in flight) */
  while (dev_mio_inflight(c.pMio)) dev_mio_reap(c.pMio, 1000000);
  return NULL;
}

/* Engine e acts as a second controller thread while the SQs have a backlog
** (the controller called for help): commands it takes run on it, with its
** own media context (reads in flight there too), in parallel with the
** controller's. Returns when the SQs stay empty for HELP_SPIN_NS, when a
** job is waiting (jobs come first: a program must not wait behind reads),
** or at stop; its reads are all complete by then. */
static void engine_help(emu_engine *e) {
  dev_backend *d = e->pDev;
  ctrl_ctx c = {.d = d, .pMio = e->pMio, .iNext = e->iEngine};
  dev_spin spin;
  int i;
  dev_mio_set_async(c.pMio, 1);
  dev_spin_init(&spin);
  while (!__atomic_load_n(&d->bStop, __ATOMIC_ACQUIRE) && !dev_cp_jobs_waiting(&d->jobs)) {
    if (ctrl_pass(&c)) {
      dev_spin_init(&spin);
      continue;
    }
    for (i = 0; i < 64; i++) cpu_relax();
    if (!dev_spin_step(&spin, HELP_SPIN_NS)) break;
  }
  while (dev_mio_inflight(c.pMio)) dev_mio_reap(c.pMio, 1000000);
  dev_mio_set_async(c.pMio, 0); /* programs read synchronously */
}

static void *engine_main(void *pArg) {
  emu_engine *e = pArg;
  dev_backend *d = e->pDev;
  for (;;) {
    emu_job *j = (emu_job *)dev_cp_jobs_take(&d->jobs);
    if (!j) break; /* stopping and drained */
    if (!j->q) {   /* the controller's call for help */
      free(j);
      engine_help(e);
      continue;
    }
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

/* Start the engines and the controller (d->startMu held, threads not
** started yet). 0, or a negative errno kept in d->rcStart: the device then
** fails every command that needs its threads. */
static int emu_start(dev_backend *d) {
  int i, rc = d->rcStart;
  for (i = 0; i < d->nEngine && rc == 0; i++) {
    emu_engine *e = &d->aEngine[i];
    rc = -pthread_create(&e->thread, NULL, engine_main, e);
    if (rc == 0) e->bStarted = 1;
  }
  if (rc == 0) rc = -pthread_create(&d->ctrlThread, NULL, ctrl_main, d);
  if (rc == 0) {
    d->bCtrlStarted = 1;
    __atomic_store_n(&d->bThreads, 1, __ATOMIC_RELEASE);
  }
  d->rcStart = rc; /* engines already started just wait for jobs until close */
  return rc;
}

/* 1 if the command needs the device's threads: a program run, and the
** transfers too large to run inline (an NVM Read or a Memory Copy that the
** threads keep in flight on their io_urings). Writes of any size, small
** reads, flushes and admin commands run on the submitting thread as well
** as on the controller. */
static int emu_needs_threads(const csq_sqe *p) {
  if (dev_sqe_is_admin(p)) return 0;
  if (p->nsid == CSQ_NSID_CP) return p->opcode == CSQ_CP_EXECUTE;
  if (p->nsid == CSQ_NSID_NVM && p->opcode == CSQ_NVM_READ) return !emu_io_is_quick(p);
  if (p->nsid == CSQ_NSID_SLM && p->opcode == CSQ_SLM_COPY) return !emu_io_is_quick(p);
  return 0;
}

/* Before the device's threads run (emu_submit): run the command on this
** host thread as the controller would, with the controller's media
** context (synchronous until the controller starts), and return 1; or, if
** it needs the threads, start them and return 0 (the caller queues it).
** startMu keeps host threads of several queues from running commands at
** once, and the start from overlapping one. */
static int emu_run_early(dev_bqueue *q, const csq_sqe *pSqe) {
  dev_backend *d = q->pDev;
  ctrl_cmd c = {.q = q, .sqe = *pSqe};
  int bRun = 0;
  pthread_mutex_lock(&d->startMu);
  if (d->bThreads) goto done; /* another thread started them meanwhile */
  bRun = 1;
  __atomic_fetch_add(&q->nInflight, 1, __ATOMIC_ACQUIRE);
  if (emu_needs_threads(pSqe)) {
    if (emu_start(d) == 0) { /* the controller takes it from the SQ */
      __atomic_fetch_sub(&q->nInflight, 1, __ATOMIC_RELEASE);
      bRun = 0;
    } else {
      emu_complete(q, pSqe, CSQ_SC_INTERNAL, 0, NULL, "the device could not start its threads");
    }
    goto done;
  }
  /* faults decided in submission order, as ctrl_take does */
  pthread_mutex_lock(&d->qMutex);
  c.bHit = dev_fault_check(d->pFault, &c.sqe, &c.hit);
  pthread_mutex_unlock(&d->qMutex);
  if (c.bHit && c.hit.action == DEV_FAULT_TIMEOUT) { /* never completes */
    __atomic_fetch_sub(&q->nInflight, 1, __ATOMIC_RELEASE);
  } else if (c.bHit && c.hit.action == DEV_FAULT_STATUS) {
    emu_complete(q, pSqe, c.hit.status, 0, NULL, "injected fault");
  } else if (c.bHit && c.hit.action == DEV_FAULT_DELAY) { /* an engine sleeps, not the host */
    if (emu_start(d) == 0)
      job_push(d, q, pSqe, &c.hit);
    else
      emu_complete(q, pSqe, CSQ_SC_INTERNAL, 0, NULL, "the device could not start its threads");
  } else if (dev_sqe_is_admin(pSqe)) {
    uint64_t result = 0;
    dev_io_acct acct = {0};
    char zDetail[256] = "";
    uint16_t sf = emu_admin(q, pSqe, &result, &acct, zDetail, sizeof(zDetail));
    emu_complete(q, pSqe, sf, result, &acct, zDetail);
  } else {
    emu_io(q, pSqe, d->pCtrlMio, c.bHit ? &c.hit : NULL, -1);
  }
done:
  pthread_mutex_unlock(&d->startMu);
  return bRun;
}

static void emu_close(dev_backend *d);

static int emu_open(const char *zPath, const dev_options *pOpt, dev_backend **ppB, char **pzErr) {
  dev_backend *d = calloc(1, sizeof(*d));
  int rc, i;
  *ppB = NULL;
  if (!d) return -ENOMEM;
  pthread_mutex_init(&d->qMutex, NULL);
  pthread_mutex_init(&d->startMu, NULL);
  dev_cp_jobs_init(&d->jobs);
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
  rc = dev_media_set_cache(d->pMedia, pOpt->nCacheBytes);
  if (rc) {
    if (pzErr && asprintf(pzErr, "cannot allocate a %llu MiB media cache for %s",
                          (unsigned long long)(pOpt->nCacheBytes >> 20), zPath) < 0)
      *pzErr = NULL;
    goto fail;
  }
  rc = dev_cp_slm_map(&d->slm, pOpt->nSlmBytes);
  d->cp.nSlm = d->slm.n;
  if (rc) {
    if (pzErr && asprintf(pzErr, "cannot map %llu bytes of SLM for %s",
                          (unsigned long long)d->slm.n, zPath) < 0)
      *pzErr = NULL;
    goto fail;
  }
  d->nMaxDepth = DEV_MAX_QDEPTH;
  rc = dev_mio_open(d->pMedia, &d->pCtrlMio);
  if (rc) goto fail_io;
  d->nEngine = dev_cp_engines(pOpt->nEngines);
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
  }
  /* the threads start later, at the first command that needs them (emu_submit) */
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
  dev_cp_jobs_stop(&d->jobs);
  for (i = 0; d->aEngine && i < d->nEngine; i++) {
    if (d->aEngine[i].bStarted) pthread_join(d->aEngine[i].thread, NULL);
    dev_mio_close(d->aEngine[i].pMio);
  }
  free(d->aEngine);
  dev_mio_close(d->pCtrlMio);
  dev_cp_free(&d->cp);
  dev_cp_slm_unmap(&d->slm);
  dev_media_close(d->pMedia);
  dev_fault_free(d->pFault);
  pthread_mutex_destroy(&d->qMutex);
  pthread_mutex_destroy(&d->startMu);
  dev_cp_jobs_destroy(&d->jobs);
  pthread_mutex_destroy(&d->resvMutex);
  free(d->zPath);
  free(d);
}

static void emu_queue_close(dev_bqueue *q);

static int emu_queue_open(dev_backend *d, uint32_t nDepth, dev_stats *pStats, dev_bqueue **ppQ) {
  dev_bqueue *q = calloc(1, sizeof(*q));
  int i, rc;
  *ppQ = NULL;
  if (!q) return -ENOMEM;
  q->pDev = d;
  q->pStats = pStats;
  q->iSlot = -1; /* not attached to the controller yet */
  dev_errlog_init(&q->errLog);
  pthread_mutex_lock(&d->qMutex);
  for (i = 0; i < EMU_MAX_QUEUES && d->apQ[i]; i++) {}
  rc = i == EMU_MAX_QUEUES ? -EMFILE : dev_qp_init(&q->qp, nDepth, (uint16_t)(i + 1), &d->sqBell);
  if (rc == 0) {
    q->iSlot = i;
    d->apQ[i] = q;
    if (i >= d->nQ) d->nQ = i + 1;
  }
  pthread_mutex_unlock(&d->qMutex);
  if (rc) {
    emu_queue_close(q);
    return rc;
  }
  *ppQ = q;
  return 0;
}

/* Detach the queue from the controller, wait for the commands the device
** still works on (engines, delayed completions), then free it. Also the
** destructor of a queue whose emu_queue_open failed (iSlot < 0). */
static void emu_queue_close(dev_bqueue *q) {
  dev_backend *d = q->pDev;
  pthread_mutex_lock(&d->qMutex);
  if (q->iSlot >= 0) d->apQ[q->iSlot] = NULL;
  while (d->nQ > 0 && !d->apQ[d->nQ - 1]) d->nQ--;
  pthread_mutex_unlock(&d->qMutex);
  while (__atomic_load_n(&q->nInflight, __ATOMIC_ACQUIRE) > 0) usleep(200);
  emu_resv_drop(q);
  dev_qp_destroy(&q->qp);
  dev_errlog_free(&q->errLog);
  free(q);
}

/* dev_set_fault (driver.h): the device's fault set is never NULL while it is
** open (emu_open makes an empty one). */
static int emu_set_fault(dev_backend *d, const char *zSpec, char **pzPrev, char **pzErr) {
  return dev_fault_set(d->pFault, zSpec, pzPrev, pzErr);
}

static int emu_submit(dev_bqueue *q, const csq_sqe *pSqe) {
  if (!__atomic_load_n(&q->pDev->bThreads, __ATOMIC_ACQUIRE) && emu_run_early(q, pSqe)) return 0;
  return dev_qp_submit(&q->qp, pSqe);
}

static int emu_reap(dev_bqueue *q, csq_cqe *pCqe, int64_t timeoutNs) {
  return dev_qp_wait(&q->qp, pCqe, timeoutNs);
}

static int emu_identify_op(dev_backend *d, uint8_t cns, uint32_t nsid, void *pBuf) {
  return emu_identify(d, cns, nsid, pBuf);
}

int dev_emu_cache_info(dev_backend *d, dev_mcache_stats *p, int *pbDirect) {
  dev_mcache *c = dev_media_cache(d->pMedia);
  *pbDirect = dev_media_is_direct(d->pMedia);
  if (!c) return -ENOENT;
  dev_mcache_stats_get(c, p);
  return 0;
}

static void emu_stats(dev_backend *d, dev_stats *pOut) {
  dev_stats_snapshot(pOut, &d->stats);
}

static void emu_detail(dev_bqueue *q, uint16_t cid, uint16_t sf, char *zOut, size_t nOut) {
  dev_errlog_find(&q->errLog, cid, sf, zOut, nOut);
}

const dev_backend_ops dev_emu_backend = {
    "emu",      emu_open, emu_close, emu_identify_op, emu_queue_open, emu_queue_close,
    emu_submit, emu_reap, emu_stats, emu_detail,      emu_set_fault,
};
