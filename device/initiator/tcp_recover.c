/*
** device/initiator/tcp_recover.c - the NVMe/TCP initiator when a connection
** drops (tcp_int.h): the controller is (re)created, a dropped I/O queue
** reconnects and re-sends what is safe to re-send.
**
** Reconnection (nvme-tcp://...?reconnect=N, default 6): the next xReap of a
** queue that went down waits TCPB_BACKOFF_MS, doubling up to
** TCPB_BACKOFF_MAX_MS, between attempts; each attempt checks the controller
** with a Keep Alive on the admin queue (a target that restarted has
** forgotten it: a new one is created, the admin queue connected anew, CC.EN
** set), connects the queue again (Connect with the controller id), takes
** back the namespace's reservation if the queue held it, and sends every
** command still in its slots in the order they were submitted. After N
** failed attempts the queue is dead: its commands fail with "link is down".
**
** What is re-sent, and why a committed write is neither lost nor repeated:
** only commands that leave the device as they were when run twice - reads,
** writes of a block with the same data, Flush, Reservation Acquire/Release
** by the same queue, Identify. A write whose answer was lost may run twice,
** to the same effect; the host never has two writes to one block in flight.
** Execute, SLM and program commands are not: a program may append, count or
** have consumed the SLM it read; they complete with CSQ_SC_HOST_LINK ("link
** dropped, not sent again") and the statement fails. A write that completed
** before the drop is in the device's cache; if the target restarted (the
** controller is new), that cache may be gone, so the next Flush of the queue
** fails ("may be lost") rather than vouching for it, and the transaction
** that would have committed on it fails instead.
*/
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/format/le.h"
#include "device/initiator/tcp_int.h"
#include "device/link/msg.h"
#include "device/tcp/xfer.h"

int tcpb_resendable(const csq_sqe *p) {
  if (dev_sqe_is_admin(p)) return p->opcode == CSQ_ADM_IDENTIFY;
  if (p->nsid != CSQ_NSID_NVM) return 0;
  return p->opcode == CSQ_NVM_READ || p->opcode == CSQ_NVM_WRITE || p->opcode == CSQ_NVM_FLUSH ||
         p->opcode == CSQ_NVM_RESV_ACQUIRE || p->opcode == CSQ_NVM_RESV_RELEASE;
}

/* Property Get/Set on the admin queue. */
static int prop(dev_backend *d, int bSet, uint32_t ofst, uint64_t val, uint64_t *pOut, int64_t tEnd,
                char **pzErr) {
  csq_sqe e;
  csq_cqe c;
  uint8_t *b = (uint8_t *)&e;
  memset(&e, 0, sizeof(e));
  e.opcode = TCP_OPC_FABRICS;
  e.nsid = bSet ? TCP_FCTYPE_PSET : TCP_FCTYPE_PGET;
  csq_put_le32(b + 44, ofst);
  if (bSet) csq_put_le64(b + 48, val);
  int rc = tcpb_sync_cmd(d->pAdmin, &e, tEnd, &c, pzErr, bSet ? "Property Set" : "Property Get");
  if (rc == 0 && pOut) *pOut = (uint64_t)c.dw1 << 32 | c.dw0;
  return rc;
}

int tcpb_ctrl_create(dev_backend *d, int64_t tEnd, char **pzErr) {
  dev_bqueue *q = NULL;
  uint16_t sf;
  uint64_t v = 0;
  int rc;
  *pzErr = NULL;
  if (d->pAdmin) {
    tcpb_queue_free(d->pAdmin);
    d->pAdmin = NULL;
  }
  rc = tcpb_queue_alloc(d, 0, 31, &d->adminStats, &q);
  if (rc) return rc;
  rc = tcpb_queue_link(q, 0xFFFF, tEnd, pzErr, &sf);
  if (rc) {
    tcpb_queue_free(q);
    return rc;
  }
  d->pAdmin = q;
  /* CC: EN, I/O SQ entries 2^6, CQ entries 2^4; then wait for CSTS.RDY */
  rc = prop(d, 1, 0x14, 1u | 6u << 16 | 4u << 20, NULL, tEnd, pzErr);
  while (rc == 0) {
    rc = prop(d, 0, 0x1C, 0, &v, tEnd, pzErr);
    if (rc || (v & 1)) break;
    if (tcpb_now() > tEnd) {
      *pzErr = dev_mprintf("the controller did not become ready");
      rc = -ETIMEDOUT;
      break;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  if (rc) {
    tcpb_queue_free(d->pAdmin);
    d->pAdmin = NULL;
    return rc;
  }
  d->cntlid = q->cntlid;
  __atomic_add_fetch(&d->gen, 1, __ATOMIC_RELEASE);
  return 0;
}

/* Keep Alive on the admin queue: 0 if the controller answers. d->mu held. */
static int ctrl_alive(dev_backend *d, int64_t tEnd) {
  csq_sqe e;
  csq_cqe c;
  char *zErr = NULL;
  if (!d->pAdmin || d->pAdmin->bDead || d->pAdmin->bDown) return -ENOTCONN;
  memset(&e, 0, sizeof(e));
  e.opcode = TCP_ADM_KEEP_ALIVE;
  int rc = tcpb_sync_cmd(d->pAdmin, &e, tEnd, &c, &zErr, "Keep Alive");
  free(zErr);
  return rc;
}

/* One attempt: a live controller, the queue connected to it, the
** reservation back. 0, or -errno with *pzErr. */
static int relink(dev_bqueue *q, char **pzErr) {
  dev_backend *d = q->d;
  int setupMs = d->timeoutMs < TCPB_SETUP_MS ? d->timeoutMs : TCPB_SETUP_MS;
  int64_t tEnd = tcpb_now() + (int64_t)setupMs * 1000000;
  uint16_t cntlid, sf = 0;
  uint32_t gen;
  int rc = 0;
  pthread_mutex_lock(&d->mu);
  if (ctrl_alive(d, tEnd)) rc = tcpb_ctrl_create(d, tEnd, pzErr);
  cntlid = d->cntlid;
  gen = __atomic_load_n(&d->gen, __ATOMIC_ACQUIRE);
  pthread_mutex_unlock(&d->mu);
  if (rc) return rc;
  /* a refused Connect (the qid still held by the old connection, which the
  ** target is draining) is tried again at the next attempt */
  rc = tcpb_queue_link(q, cntlid, tEnd, pzErr, &sf);
  if (rc) return rc;
  if (gen != q->gen && q->nWritesDone > q->nFlushed) q->nMaybeLost = q->nWritesDone;
  q->cntlid = cntlid;
  q->gen = gen;
  if (q->bResv) {
    csq_sqe e;
    csq_cqe c;
    memset(&e, 0, sizeof(e));
    e.opcode = CSQ_NVM_RESV_ACQUIRE;
    e.nsid = CSQ_NSID_NVM;
    q->bSetup = 1;
    rc = tcpb_sync_cmd(q, &e, tEnd, &c, pzErr, "taking back the reservation");
    q->bSetup = 0;
    if (rc) {
      /* another host may hold it now: drop this connection, try again */
      free(*pzErr);
      *pzErr = dev_mprintf(
          "could not take back the namespace's reservation%s",
          (csq_cqe_sf(&c) & 0x7FF) == CSQ_SC_RESV_CONFLICT ? ": another host holds it" : "");
      tcpb_queue_unlink(q);
      return rc;
    }
  }
  return 0;
}

int tcpb_recover(dev_bqueue *q) {
  dev_backend *d = q->d;
  char *zLast = NULL, zWhy[sizeof(q->zDown)];
  snprintf(zWhy, sizeof(zWhy), "%s", q->zDown[0] ? q->zDown : "dropped");
  while (q->nTries < d->nReconnect) {
    int64_t ms = (int64_t)TCPB_BACKOFF_MS << (q->nTries < 8 ? q->nTries : 8);
    if (ms > TCPB_BACKOFF_MAX_MS) ms = TCPB_BACKOFF_MAX_MS;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
    q->nTries++;
    free(zLast);
    zLast = NULL;
    if (relink(q, &zLast) == 0) {
      free(zLast);
      tcpb_resend(q);
      return 0;
    }
  }
  snprintf(q->zDead, sizeof(q->zDead),
           "the NVMe/TCP link to %s (queue %u) is down: %s; %d reconnection attempt(s) failed "
           "(last: %s)",
           d->zUrl, q->qid, zWhy, q->nTries, zLast ? zLast : "no reason given");
  free(zLast);
  q->bDead = 1;
  tcpb_fail_all(q);
  return -1;
}

/* The Keep Alive thread: every KATO/2, a Keep Alive on the admin queue, or a
** new controller when the admin queue died. */
static void *keepalive_main(void *pArg) {
  dev_backend *d = pArg;
  pthread_mutex_lock(&d->mu);
  while (!d->bKaStop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)ts.tv_nsec + (int64_t)d->katoMs * 1000000 / 2;
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(&d->kaCond, &d->mu, &ts);
    if (d->bKaStop) break;
    int64_t tEnd = tcpb_now() + (int64_t)d->katoMs * 1000000;
    if (ctrl_alive(d, tEnd) && d->nReconnect > 0) {
      char *zErr = NULL;
      tcpb_ctrl_create(d, tEnd, &zErr); /* a queue that needs it says why */
      free(zErr);
    }
  }
  pthread_mutex_unlock(&d->mu);
  return NULL;
}

int tcpb_keepalive_start(dev_backend *d) {
  pthread_condattr_t a;
  int rc;
  if (d->katoMs <= 0) return 0;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&d->kaCond, &a);
  pthread_condattr_destroy(&a);
  rc = pthread_create(&d->ka, NULL, keepalive_main, d);
  if (rc) {
    pthread_cond_destroy(&d->kaCond);
    return -rc;
  }
  d->bKa = 1;
  return 0;
}

void tcpb_keepalive_stop(dev_backend *d) {
  if (!d->bKa) return;
  pthread_mutex_lock(&d->mu);
  d->bKaStop = 1;
  pthread_cond_signal(&d->kaCond);
  pthread_mutex_unlock(&d->mu);
  pthread_join(d->ka, NULL);
  pthread_cond_destroy(&d->kaCond);
  d->bKa = 0;
}
