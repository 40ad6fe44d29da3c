/*
** device/link/queue.h - an NVMe-style queue pair in shared memory, and doorbells.
**
** A dev_qp is a submission ring of csq_sqe and a completion ring of csq_cqe,
** each with nDepth+1 slots so nDepth commands fit in flight. The host writes
** SQ entries and moves the SQ tail (its doorbell); the device takes entries
** and moves the SQ head. The device writes CQ entries with the phase tag
** (bit 0 of status) inverted on every wrap; the host consumes them and moves
** the CQ head (its doorbell). Producers of completions may be several device
** threads (a mutex on the device side); the host side is lock-free and owned
** by one thread. If the CQ is full (only possible when the host gave up on
** commands that complete late), completions wait in an overflow list that the
** host drains as it consumes.
**
** Waiting is adaptive: spin on the ring for a few dozen microseconds of the
** waiter's own CPU time (dev_spin), then sleep on a dev_bell (a futex with a
** waiter count, so a producer makes a system call only when someone sleeps).
*/
#ifndef CSQ_DEVICE_QUEUE_H
#define CSQ_DEVICE_QUEUE_H

#include <pthread.h>
#include <stdint.h>
#include "device/link/cmd.h"

/* A wake-up word. A waiter: s = dev_bell_prepare(b); re-check its condition;
** if still false dev_bell_wait(b, s, ns); then dev_bell_done(b). A producer
** publishes its work and calls dev_bell_ring(b). */
typedef struct dev_bell {
  uint32_t seq;
  uint32_t nWaiter;
  uint32_t nRing; /* rings so far, waiters or not: a spinning waiter's lock-free
                  ** "anything new since I last looked?" */
} dev_bell;

uint32_t dev_bell_prepare(dev_bell *b);
void dev_bell_wait(dev_bell *b, uint32_t seq, int64_t timeoutNs); /* <0: forever */
void dev_bell_done(dev_bell *b);
void dev_bell_ring(dev_bell *b);

int64_t dev_now_ns(void); /* CLOCK_MONOTONIC */

/* A bounded, polite busy-wait. The budget counts only the time the waiter
** itself spent spinning: while it has yielded the core and another thread
** ran there (a device thread copying data, say), the clock is not charged,
** so a waiter that shares its core with the thread it waits for does not
** give up and sleep (which would cost a futex wake per event) merely
** because it was not running. A wait that lasts long in wall time (the
** core is contended, or the awaited work is long) ends too: sleeping then
** gets the waiter back sooner than queueing behind other threads after
** each yield. Use: dev_spin_init(&s); while (!cond && dev_spin_step(&s,
** budgetNs)) {} then sleep if still !cond. */
typedef struct dev_spin {
  int64_t tStart; /* dev_spin_init */
  int64_t tLast;  /* end of the last step */
  int64_t nSpent; /* own spinning time so far */
} dev_spin;

void dev_spin_init(dev_spin *s);
/* Call between rounds of polling (each a few dozen polls with a pause):
** charges the round to the budget unless the thread was descheduled in it,
** then yields the core. 1 while the budget (ns of own spinning) lasts and
** the wait is under a millisecond old, else 0 (without yielding).
** s->tLast is a fresh dev_now_ns(). */
int dev_spin_step(dev_spin *s, int64_t budgetNs);

typedef struct dev_qp {
  uint32_t nSlot; /* ring size = depth + 1 */
  uint16_t qid;
  csq_sqe *aSq;
  csq_cqe *aCq;
  dev_bell *pSqBell; /* rung on submit: the device's controller sleeps there */
  /* host-owned */
  __attribute__((aligned(64))) uint32_t sqTail;
  uint32_t cqHead;
  uint16_t cqPhase; /* phase the host expects next */
  dev_bell cqBell;  /* the host sleeps here */
  /* device-owned */
  __attribute__((aligned(64))) uint32_t sqHead;
  uint32_t cqTail;
  uint16_t cqPhaseDev;
  uint32_t nOverflow;
  uint32_t nOverflowAlloc;
  csq_cqe *aOverflow;
  pthread_mutex_t cqMutex; /* serialises completion producers */
} dev_qp;

/* Set up *p for nDepth commands in flight; pSqBell is rung on every submit.
** 0 or -ENOMEM. dev_qp_destroy frees the rings (the struct is the caller's);
** it may be called on a *p whose set-up failed, or on a zeroed one. */
int dev_qp_init(dev_qp *p, uint32_t nDepth, uint16_t qid, dev_bell *pSqBell);
void dev_qp_destroy(dev_qp *p);

/* Host side (one thread). */
int dev_qp_submit(dev_qp *p, const csq_sqe *pSqe); /* 0 or -EAGAIN (SQ full) */
int dev_qp_poll(dev_qp *p, csq_cqe *pCqe);         /* 1 if a CQE was taken */
/* Wait up to timeoutNs (0 = poll only) for a CQE: 0 or -ETIMEDOUT. */
int dev_qp_wait(dev_qp *p, csq_cqe *pCqe, int64_t timeoutNs);

/* Device side. dev_qp_fetch: one consumer at a time; 1 if an SQE was taken.
** dev_qp_post: any device thread; fills sq_head, sq_id and the phase. */
int dev_qp_pending(dev_qp *p);
int dev_qp_fetch(dev_qp *p, csq_sqe *pSqe);
void dev_qp_post(dev_qp *p, const csq_cqe *pCqe);

#endif /* CSQ_DEVICE_QUEUE_H */
