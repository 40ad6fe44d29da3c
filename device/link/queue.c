/*
** device/link/queue.c - queue pair rings with phase tags, and futex doorbells.
** See queue.h for the protocol. Memory ordering: an SQ entry is published by
** a release store of sqTail, taken after an acquire load of it; a CQ entry is
** published by a release store of its status word (which carries the phase),
** so the host never sees a half-written completion.
*/
#include <errno.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "device/link/queue.h"

#define LOAD_ACQ(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define LOAD_RLX(p)     __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

/* How long the host spins on its CQ before sleeping (own CPU time, see
** dev_spin). Long enough to cover a command the controller handles inline,
** short enough not to waste a core. */
#define HOST_SPIN_NS 40000

/* A spin round or yield longer than this means another thread had the core:
** not charged to the spinner (rounds themselves take about a microsecond). */
#define SPIN_DESCHED_NS 10000

/* A spinning wait ends after this much wall time whatever its budget. */
#define SPIN_WALL_NS 1000000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int64_t dev_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void dev_spin_init(dev_spin *s) {
  s->tStart = s->tLast = dev_now_ns();
  s->nSpent = 0;
}

int dev_spin_step(dev_spin *s, int64_t budgetNs) {
  int64_t t = dev_now_ns(), t2;
  if (t - s->tLast < SPIN_DESCHED_NS) s->nSpent += t - s->tLast;
  s->tLast = t;
  if (s->nSpent >= budgetNs || t - s->tStart >= SPIN_WALL_NS) return 0;
  sched_yield(); /* if the thread we wait for shares this core, let it run */
  t2 = dev_now_ns();
  if (t2 - t < SPIN_DESCHED_NS) s->nSpent += t2 - t;
  s->tLast = t2;
  return s->nSpent < budgetNs && t2 - s->tStart < SPIN_WALL_NS;
}

uint32_t dev_bell_prepare(dev_bell *b) {
  __atomic_fetch_add(&b->nWaiter, 1, __ATOMIC_SEQ_CST);
  return __atomic_load_n(&b->seq, __ATOMIC_SEQ_CST);
}

void dev_bell_wait(dev_bell *b, uint32_t seq, int64_t timeoutNs) {
  struct timespec ts, *pTs = NULL;
  if (timeoutNs >= 0) {
    ts.tv_sec = timeoutNs / 1000000000;
    ts.tv_nsec = timeoutNs % 1000000000;
    pTs = &ts;
  }
  syscall(SYS_futex, &b->seq, FUTEX_WAIT_PRIVATE, seq, pTs, NULL, 0);
}

void dev_bell_done(dev_bell *b) {
  __atomic_fetch_sub(&b->nWaiter, 1, __ATOMIC_SEQ_CST);
}

void dev_bell_ring(dev_bell *b) {
  /* The fence orders the caller's publishing store before the waiter check;
  ** it pairs with the seq_cst increment in dev_bell_prepare (Dekker). */
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  __atomic_fetch_add(&b->nRing, 1, __ATOMIC_RELEASE);
  if (__atomic_load_n(&b->nWaiter, __ATOMIC_SEQ_CST) == 0) return;
  __atomic_fetch_add(&b->seq, 1, __ATOMIC_SEQ_CST);
  syscall(SYS_futex, &b->seq, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

/* Both rings come from one allocation (the SQ first, each on its own cache
** lines), so that set-up has one thing to fail and dev_qp_destroy one to free. */
int dev_qp_init(dev_qp *p, uint32_t nDepth, uint16_t qid, dev_bell *pSqBell) {
  size_t nSqByte = ((sizeof(csq_sqe) * (nDepth + 1) + 63) / 64) * 64;
  size_t nCqByte = ((sizeof(csq_cqe) * (nDepth + 1) + 63) / 64) * 64;
  memset(p, 0, sizeof(*p));
  p->aSq = aligned_alloc(64, nSqByte + nCqByte);
  if (!p->aSq) return -ENOMEM;
  memset(p->aSq, 0, nSqByte + nCqByte);
  p->aCq = (csq_cqe *)((uint8_t *)p->aSq + nSqByte);
  p->nSlot = nDepth + 1;
  p->qid = qid;
  p->pSqBell = pSqBell;
  p->cqPhase = 1; /* the ring starts zeroed: phase 0 means "not yet written" */
  p->cqPhaseDev = 1;
  pthread_mutex_init(&p->cqMutex, NULL);
  return 0;
}

void dev_qp_destroy(dev_qp *p) {
  if (!p->aSq) return; /* zeroed: never set up, or its set-up failed */
  free(p->aSq);
  free(p->aOverflow);
  pthread_mutex_destroy(&p->cqMutex);
  p->aSq = NULL;
  p->aCq = NULL;
  p->aOverflow = NULL;
}

int dev_qp_submit(dev_qp *p, const csq_sqe *pSqe) {
  uint32_t t = p->sqTail;
  uint32_t n = t + 1 == p->nSlot ? 0 : t + 1;
  if (n == LOAD_ACQ(&p->sqHead)) return -EAGAIN;
  p->aSq[t] = *pSqe;
  STORE_REL(&p->sqTail, n);
  dev_bell_ring(p->pSqBell);
  return 0;
}

/* Device side, cqMutex held: write one CQE into the ring if there is room. */
static int cq_put_locked(dev_qp *p, const csq_cqe *pCqe) {
  uint32_t t = p->cqTail;
  uint32_t n = t + 1 == p->nSlot ? 0 : t + 1;
  csq_cqe *pDst;
  if (n == LOAD_ACQ(&p->cqHead)) return 0;
  pDst = &p->aCq[t];
  pDst->dw0 = pCqe->dw0;
  pDst->dw1 = pCqe->dw1;
  pDst->sq_head = (uint16_t)LOAD_RLX(&p->sqHead);
  pDst->sq_id = p->qid;
  pDst->cid = pCqe->cid;
  STORE_REL(&pDst->status, (uint16_t)((pCqe->status & ~1u) | p->cqPhaseDev));
  p->cqTail = n;
  if (n == 0) p->cqPhaseDev ^= 1;
  return 1;
}

/* Host side: move overflowed completions into the ring (rare path). */
static void cq_drain_overflow(dev_qp *p) {
  uint32_t i = 0;
  pthread_mutex_lock(&p->cqMutex);
  while (i < p->nOverflow && cq_put_locked(p, &p->aOverflow[i])) i++;
  memmove(p->aOverflow, p->aOverflow + i, (p->nOverflow - i) * sizeof(csq_cqe));
  __atomic_store_n(&p->nOverflow, p->nOverflow - i, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&p->cqMutex);
}

int dev_qp_poll(dev_qp *p, csq_cqe *pCqe) {
  uint32_t h = p->cqHead;
  csq_cqe *pSrc = &p->aCq[h];
  uint16_t st = LOAD_ACQ(&pSrc->status);
  if ((st & 1) != p->cqPhase) {
    if (LOAD_ACQ(&p->nOverflow)) cq_drain_overflow(p);
    return 0;
  }
  pCqe->dw0 = pSrc->dw0;
  pCqe->dw1 = pSrc->dw1;
  pCqe->sq_head = pSrc->sq_head;
  pCqe->sq_id = pSrc->sq_id;
  pCqe->cid = pSrc->cid;
  pCqe->status = st;
  h = h + 1 == p->nSlot ? 0 : h + 1;
  if (h == 0) p->cqPhase ^= 1;
  STORE_REL(&p->cqHead, h);
  if (LOAD_ACQ(&p->nOverflow)) cq_drain_overflow(p);
  return 1;
}

int dev_qp_wait(dev_qp *p, csq_cqe *pCqe, int64_t timeoutNs) {
  int64_t tEnd, now;
  dev_spin spin;
  int i;
  if (dev_qp_poll(p, pCqe)) return 0;
  if (timeoutNs <= 0) return -ETIMEDOUT;
  dev_spin_init(&spin);
  tEnd = spin.tLast + timeoutNs;
  /* Spin first: an inline command completes within microseconds. */
  for (;;) {
    for (i = 0; i < 64; i++) {
      if (dev_qp_poll(p, pCqe)) return 0;
      cpu_relax();
    }
    if (!dev_spin_step(&spin, HOST_SPIN_NS) || spin.tLast >= tEnd) break;
  }
  for (;;) {
    uint32_t s = dev_bell_prepare(&p->cqBell);
    if (dev_qp_poll(p, pCqe)) {
      dev_bell_done(&p->cqBell);
      return 0;
    }
    now = dev_now_ns();
    if (now >= tEnd) {
      dev_bell_done(&p->cqBell);
      return -ETIMEDOUT;
    }
    dev_bell_wait(&p->cqBell, s, tEnd - now);
    dev_bell_done(&p->cqBell);
    if (dev_qp_poll(p, pCqe)) return 0;
  }
}

int dev_qp_pending(dev_qp *p) {
  return LOAD_ACQ(&p->sqTail) != LOAD_RLX(&p->sqHead);
}

int dev_qp_fetch(dev_qp *p, csq_sqe *pSqe) {
  uint32_t h = p->sqHead;
  if (h == LOAD_ACQ(&p->sqTail)) return 0;
  *pSqe = p->aSq[h];
  STORE_REL(&p->sqHead, h + 1 == p->nSlot ? 0 : h + 1);
  return 1;
}

void dev_qp_post(dev_qp *p, const csq_cqe *pCqe) {
  pthread_mutex_lock(&p->cqMutex);
  /* Keep order with earlier overflowed entries: append while any wait. */
  if (p->nOverflow || !cq_put_locked(p, pCqe)) {
    if (p->nOverflow == p->nOverflowAlloc) {
      uint32_t nNew = p->nOverflowAlloc ? p->nOverflowAlloc * 2 : 16;
      csq_cqe *aNew = realloc(p->aOverflow, nNew * sizeof(csq_cqe));
      if (!aNew) { /* out of memory: the completion is lost; the host times out */
        pthread_mutex_unlock(&p->cqMutex);
        return;
      }
      p->aOverflow = aNew;
      p->nOverflowAlloc = nNew;
    }
    p->aOverflow[p->nOverflow] = *pCqe;
    p->aOverflow[p->nOverflow].status &= (uint16_t)~1u;
    __atomic_store_n(&p->nOverflow, p->nOverflow + 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&p->cqMutex);
  dev_bell_ring(&p->cqBell);
}
