/*
** device/target/target_conn.c - one NVMe/TCP connection of csq-target
** (target.h): the queue's PDUs in and out, the capsules it carries, and the
** commands it hands to the emulated device.
**
** Two threads per connection, plain blocking sockets: the receiver reads
** PDUs in order (ICReq first, then capsules and H2CData), answers the
** Fabrics and local admin commands itself and submits the rest to the
** connection's queue pair on the device; the completer reaps that queue pair
** and sends C2HData and the response capsule. Sends are serialised by a
** mutex. The emulated device's queue pair is a pair of single-producer
** rings (device/link/queue.h), so one thread submitting while another reaps
** is safe; that is what lets a slow command never hold up the socket.
**
** Commands are remapped: the host's command id goes in a slot of this
** connection and the device sees the slot index as cid, so a host cannot make
** two commands collide inside the device, and each slot owns the command's
** data buffer (the device "DMAs" by address into it, cmd.h).
**
** What a hostile host gets: a malformed PDU header, a header digest that does
** not match, data beyond what was agreed, or a PDU out of sequence ends the
** connection with a C2HTermReq carrying the fatal error status; a capsule that
** is well formed but wrong (unknown opcode, a field out of range, a data
** digest that does not match, a command before Connect or before CC.EN) is
** answered with its NVMe status and the connection goes on.
*/
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "device/format/le.h"
#include "device/target/target.h"
#include "device/tcp/crc32c.h"
#include "device/tcp/pdu.h"
#include "device/tcp/xfer.h"

#define SC_CMD_SEQ_ERROR   CSQ_STATUS(0, 0x0C)
#define SC_SGL_LEN_INVALID CSQ_STATUS(0, 0x0D)
#define SC_SGL_TYPE        CSQ_STATUS(0, 0x11)
#define SC_TRANSIENT_XPORT CSQ_STATUS(0, 0x22)
#define TGT_KATO_TICK_MS   100        /* how often a quiet receiver checks Keep Alive */
#define TGT_BUF_KEEP       (1u << 20) /* largest data buffer a slot keeps */

typedef struct tgt_cmd {
  int bLive;
  int bInDevice;
  uint16_t hostCid;
  csq_sqe sqe; /* as the host sent it */
  int dir;
  uint32_t nLen;
  uint32_t nGot;  /* H2CData bytes received */
  uint8_t *pBuf;  /* the command's data, kept with the slot for the next */
  size_t nBufCap; /* bytes at pBuf */
  int bWaitData;  /* an R2T was sent: H2CData expected */
} tgt_cmd;

typedef struct tgt_conn tgt_conn;
struct tgt_conn {
  tgt_conn *pNext;
  tgt_server *s;
  int fd;
  char zPeer[64];
  pthread_t rx, cq;
  int bCqStarted;
  int bDone; /* the receiver has ended: join it (server mutex) */
  int bHdgst, bDdgst;
  uint16_t qid;
  tgt_ctrl *pCtrl;
  dev_bqueue *pQ; /* the device's queue pair (a subsystem's queue) */
  dev_stats qstats;
  pthread_mutex_t txMu;
  int bTxDead;
  pthread_mutex_t slotMu;
  pthread_cond_t slotCond;
  tgt_cmd *aCmd;
  uint32_t nCmd, nFree;
  uint32_t *aFree;
  int nInDevice; /* atomic */
  int bRxEnd;    /* atomic: the receiver stopped; the completer drains and ends */
  uint64_t nCmds, nIn, nOut;
  char zEnd[200];
};

/* ---- socket ------------------------------------------------------------- */

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* 1 if an I/O queue's controller lost its admin queue (and says so in
** zEnd): the host gets a dropped connection and reconnects to a new one. */
static int ctrl_gone(tgt_conn *c) {
  if (!c->pCtrl || c->qid == 0 || !tgt_ctrl_gone(c->s, c->pCtrl)) return 0;
  snprintf(c->zEnd, sizeof(c->zEnd), "the controller's admin queue disconnected");
  return 1;
}

/* 1 if the connection's controller has heard nothing for 2 x KATO, or has
** lost its admin queue (and says so in zEnd). */
static int kato_expired(tgt_conn *c) {
  tgt_ctrl *p = c->pCtrl;
  uint32_t kato = p ? __atomic_load_n(&p->katoMs, __ATOMIC_RELAXED) : 0;
  /* a silent controller's queues all say so, whichever ends first */
  int64_t quiet = kato ? now_ns() - __atomic_load_n(&p->tHeardNs, __ATOMIC_RELAXED) : 0;
  if (quiet <= (int64_t)kato * 2 * 1000000) return ctrl_gone(c);
  snprintf(c->zEnd, sizeof(c->zEnd),
           "keep alive timeout: nothing from the host for %lld ms (KATO %u ms)",
           (long long)(quiet / 1000000), kato);
  return 1;
}

/* Read exactly n bytes. 0, or -1 at end of stream / error / keep alive
** timeout. The socket's receive timeout (TGT_KATO_TICK_MS) wakes it to
** check the controller's Keep Alive. */
static int rx_all(tgt_conn *c, void *p, size_t n) {
  uint8_t *z = p;
  while (n) {
    ssize_t k = recv(c->fd, z, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (kato_expired(c)) return -1;
      continue;
    }
    if (k <= 0) return -1;
    z += k;
    n -= (size_t)k;
    c->nIn += (uint64_t)k;
    if (c->pCtrl) __atomic_store_n(&c->pCtrl->tHeardNs, now_ns(), __ATOMIC_RELAXED);
  }
  return 0;
}

static int tx_iov(tgt_conn *c, struct iovec *aIov, int nIov) {
  while (nIov) {
    struct msghdr m;
    memset(&m, 0, sizeof(m));
    m.msg_iov = aIov;
    m.msg_iovlen = (size_t)nIov;
    ssize_t k = sendmsg(c->fd, &m, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    c->nOut += (uint64_t)k;
    while (nIov && (size_t)k >= aIov->iov_len) {
      k -= (ssize_t)aIov->iov_len;
      aIov++;
      nIov--;
    }
    if (nIov) {
      aIov->iov_base = (uint8_t *)aIov->iov_base + k;
      aIov->iov_len -= (size_t)k;
    }
  }
  return 0;
}

/* Send one PDU: header h, then nData bytes at pData (and their digest). */
static int tx_pdu(tgt_conn *c, const tcp_hdr *h, const void *pData, uint32_t nData) {
  uint8_t aHdr[TCP_MAX_HDR], aDd[4];
  struct iovec a[3];
  int n = 0, rc;
  uint32_t nHdr = tcp_hdr_encode(h, nData, c->bHdgst, c->bDdgst, aHdr);
  a[n].iov_base = aHdr;
  a[n++].iov_len = nHdr;
  if (nData) {
    a[n].iov_base = (void *)pData;
    a[n++].iov_len = nData;
    if (c->bDdgst && h->type != TCP_C2H_TERMREQ) {
      csq_put_le32(aDd, tcp_crc32c(pData, nData));
      a[n].iov_base = aDd;
      a[n++].iov_len = 4;
    }
  }
  pthread_mutex_lock(&c->txMu);
  rc = c->bTxDead ? -1 : tx_iov(c, a, n);
  if (rc) c->bTxDead = 1;
  pthread_mutex_unlock(&c->txMu);
  return rc;
}

static void tx_resp(tgt_conn *c, uint16_t hostCid, uint16_t sf, uint64_t result) {
  tcp_hdr h;
  memset(&h, 0, sizeof(h));
  h.type = TCP_CAPSULE_RSP;
  csq_put_le32(h.aEntry, (uint32_t)result);
  csq_put_le32(h.aEntry + 4, (uint32_t)(result >> 32));
  csq_put_le16(h.aEntry + 10, c->qid);
  csq_put_le16(h.aEntry + 12, hostCid);
  csq_put_le16(h.aEntry + 14, (uint16_t)(sf << 1));
  tx_pdu(c, &h, NULL, 0);
}

/* C2HData PDUs for n bytes at p, each at most TCP_C2H_MAX. */
static void tx_c2h(tgt_conn *c, uint16_t hostCid, const uint8_t *p, uint32_t n) {
  for (uint32_t off = 0; off < n;) {
    uint32_t k = n - off < TCP_C2H_MAX ? n - off : TCP_C2H_MAX;
    tcp_hdr h;
    memset(&h, 0, sizeof(h));
    h.type = TCP_C2H_DATA;
    h.cccid = hostCid;
    h.offset = off;
    h.length = k;
    if (off + k == n) h.flags = TCP_F_LAST;
    if (tx_pdu(c, &h, p + off, k)) return;
    off += k;
  }
}

/* End the connection with a C2HTermReq quoting the offending header. */
static void tx_term(tgt_conn *c, int fes, uint32_t fei, const uint8_t *pHdr, uint32_t nHdr,
                    const char *zWhy) {
  tcp_hdr h;
  memset(&h, 0, sizeof(h));
  h.type = TCP_C2H_TERMREQ;
  h.fes = (uint16_t)fes;
  h.fei = fei;
  tx_pdu(c, &h, pHdr, nHdr < TCP_TERM_MAX ? nHdr : TCP_TERM_MAX);
  snprintf(c->zEnd, sizeof(c->zEnd), "terminated: %s", zWhy);
}

/* ---- slots -------------------------------------------------------------- */

/* A free slot; waits while the device holds them all. NULL when every slot
** waits for H2CData instead: the host sent more than any queue holds. */
static tgt_cmd *slot_get(tgt_conn *c) {
  tgt_cmd *p;
  pthread_mutex_lock(&c->slotMu);
  while (c->nFree == 0) {
    if (__atomic_load_n(&c->nInDevice, __ATOMIC_ACQUIRE) == 0) {
      pthread_mutex_unlock(&c->slotMu);
      return NULL;
    }
    pthread_cond_wait(&c->slotCond, &c->slotMu);
  }
  p = &c->aCmd[c->aFree[--c->nFree]];
  pthread_mutex_unlock(&c->slotMu);
  uint8_t *pBuf = p->pBuf;
  size_t nBufCap = p->nBufCap;
  memset(p, 0, sizeof(*p));
  p->pBuf = pBuf;
  p->nBufCap = nBufCap;
  p->bLive = 1;
  return p;
}

static void slot_put(tgt_conn *c, tgt_cmd *p) {
  /* a buffer is kept for the slot's next command: a new one per command
  ** costs page faults and, when freed, a TLB shootdown on every core */
  if (p->nBufCap > TGT_BUF_KEEP) {
    free(p->pBuf);
    p->pBuf = NULL;
    p->nBufCap = 0;
  }
  p->bLive = 0;
  p->bWaitData = 0;
  pthread_mutex_lock(&c->slotMu);
  c->aFree[c->nFree++] = (uint32_t)(p - c->aCmd);
  pthread_cond_signal(&c->slotCond);
  pthread_mutex_unlock(&c->slotMu);
}

/* ---- commands ----------------------------------------------------------- */

static void *completer_main(void *pArg);

static void finish_local(tgt_conn *c, tgt_cmd *p, uint16_t sf, uint64_t result) {
  if (sf == 0 && p->dir == TCP_XFER_C2H) tx_c2h(c, p->hostCid, p->pBuf, p->nLen);
  tx_resp(c, p->hostCid, sf, result);
  __atomic_add_fetch(&c->nCmds, 1, __ATOMIC_RELAXED);
  slot_put(c, p);
}

/* Fabrics Connect: the data is struct nvmf_connect_data (host id 16 bytes,
** cntlid at 16, subnqn at 256, hostnqn at 512). */
static uint16_t do_connect(tgt_conn *c, tgt_cmd *p, uint64_t *pResult) {
  const uint8_t *e = (const uint8_t *)&p->sqe;
  uint16_t recfmt = csq_le16(e + 40), qid = csq_le16(e + 42), sqsize = csq_le16(e + 44);
  char zSub[TGT_NQN_MAX], zHost[TGT_NQN_MAX];
  uint16_t sf;
  if (c->pCtrl) return SC_CMD_SEQ_ERROR | CSQ_DNR; /* a queue connects once */
  if (recfmt != 0 || sqsize == 0 || sqsize >= TGT_MAX_QDEPTH) return CSQ_STATUS(1, 0x82) | CSQ_DNR;
  memcpy(zSub, p->pBuf + 256, TGT_NQN_MAX - 1);
  zSub[TGT_NQN_MAX - 1] = 0;
  memcpy(zHost, p->pBuf + 512, TGT_NQN_MAX - 1);
  zHost[TGT_NQN_MAX - 1] = 0;
  sf = tgt_ctrl_connect(c->s, zSub, zHost, csq_le16(p->pBuf + 16), qid, &c->pCtrl);
  if (sf) {
    snprintf(c->zEnd, sizeof(c->zEnd), "refused Connect to %.80s qid %u", zSub, qid);
    return sf;
  }
  c->qid = qid;
  __atomic_store_n(&c->pCtrl->tHeardNs, now_ns(), __ATOMIC_RELAXED);
  if (qid == 0) __atomic_store_n(&c->pCtrl->katoMs, csq_le32(e + 48), __ATOMIC_RELAXED);
  if (c->pCtrl->pSub) {
    int rc =
        dev_emu_backend.xQueueOpen(c->pCtrl->pSub->pDev, (uint32_t)sqsize + 1, &c->qstats, &c->pQ);
    if (rc == 0) {
      rc = -pthread_create(&c->cq, NULL, completer_main, c);
      c->bCqStarted = rc == 0;
    }
    if (rc) {
      snprintf(c->zEnd, sizeof(c->zEnd), "cannot open a device queue: %s", strerror(-rc));
      tgt_ctrl_disconnect(c->s, c->pCtrl, qid);
      c->pCtrl = NULL;
      return CSQ_SC_INTERNAL;
    }
  }
  *pResult = c->pCtrl->cntlid;
  return 0;
}

/* Hand p to the device: its slot index is the device's cid, its buffer the
** data pointer. */
static void submit_device(tgt_conn *c, tgt_cmd *p) {
  csq_sqe e = p->sqe;
  e.flags = 0;
  e.cid = (uint16_t)(p - c->aCmd);
  e.prp1 = p->dir == TCP_XFER_NONE ? 0 : (uint64_t)(uintptr_t)p->pBuf;
  e.prp2 = 0;
  p->bInDevice = 1;
  __atomic_add_fetch(&c->nInDevice, 1, __ATOMIC_ACQ_REL);
  /* the ring holds sqsize + 1; a host that sends more waits for room */
  while (dev_emu_backend.xSubmit(c->pQ, &e) == -EAGAIN) {
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
}

/* Run a command whose data (if any) has arrived. */
static void exec_cmd(tgt_conn *c, tgt_cmd *p) {
  const csq_sqe *e = &p->sqe;
  uint64_t result = 0;
  uint16_t sf;
  if (e->opcode == TCP_OPC_FABRICS) {
    const uint8_t *b = (const uint8_t *)e;
    uint8_t fctype = b[4];
    if (fctype == TCP_FCTYPE_CONN) {
      sf = do_connect(c, p, &result);
    } else if (!c->pCtrl) {
      sf = SC_CMD_SEQ_ERROR | CSQ_DNR;
    } else if (fctype == TCP_FCTYPE_PGET) {
      sf = tgt_prop_get(c->s, c->pCtrl, csq_le32(b + 44), b[40] & 7, &result);
    } else if (fctype == TCP_FCTYPE_PSET && c->qid == 0) {
      sf = tgt_prop_set(c->s, c->pCtrl, csq_le32(b + 44), csq_le64(b + 48));
    } else {
      sf = CSQ_SC_INVALID_FIELD | CSQ_DNR;
    }
    finish_local(c, p, sf, result);
    return;
  }
  if (!c->pCtrl) {
    finish_local(c, p, SC_CMD_SEQ_ERROR | CSQ_DNR, 0);
    return;
  }
  if (c->qid == 0) {
    switch (e->opcode) {
    case TCP_ADM_KEEP_ALIVE:
      finish_local(c, p, 0, 0);
      return;
    case TCP_ADM_SET_FEAT:
      if ((e->cdw10 & 0xFF) == 0x07) { /* Number of Queues: I/O queues, 0-based */
        finish_local(c, p, 0, (TGT_MAX_QUEUES - 2) | (uint64_t)(TGT_MAX_QUEUES - 2) << 16);
      } else if ((e->cdw10 & 0xFF) == 0x0F) { /* Keep Alive Timer, ms */
        __atomic_store_n(&c->pCtrl->tHeardNs, now_ns(), __ATOMIC_RELAXED);
        __atomic_store_n(&c->pCtrl->katoMs, e->cdw11, __ATOMIC_RELAXED);
        finish_local(c, p, 0, 0);
      } else {
        finish_local(c, p, CSQ_SC_INVALID_FIELD | CSQ_DNR, 0);
      }
      return;
    case TCP_ADM_GET_LOG:
      if (!c->pCtrl->pSub && (e->cdw10 & 0xFF) == 0x70) {
        tgt_discovery_log(c->s, (uint64_t)e->cdw13 << 32 | e->cdw12, p->nLen, p->pBuf);
        finish_local(c, p, 0, 0);
      } else {
        finish_local(c, p, CSQ_SC_INVALID_FIELD | CSQ_DNR, 0);
      }
      return;
    case CSQ_ADM_IDENTIFY:
      if (!c->pCtrl->pSub) {
        if ((e->cdw10 & 0xFF) == 1) {
          tgt_discovery_identify(c->s, c->pCtrl, p->pBuf);
          finish_local(c, p, 0, 0);
        } else {
          finish_local(c, p, CSQ_SC_INVALID_FIELD | CSQ_DNR, 0);
        }
        return;
      }
      if ((e->cdw10 & 0xFF) == 2) { /* Active Namespace ID list */
        tgt_active_ns_list(e->nsid, p->pBuf);
        finish_local(c, p, 0, 0);
        return;
      }
      break;
    default:
      if (!dev_sqe_is_admin(e) || !c->pCtrl->pSub) {
        finish_local(c, p, CSQ_SC_INVALID_OPCODE | CSQ_DNR, 0);
        return;
      }
    }
  }
  if (!tgt_ctrl_ready(c->s, c->pCtrl)) {
    finish_local(c, p, SC_CMD_SEQ_ERROR, 0); /* not enabled (CC.EN), or reset */
    return;
  }
  submit_device(c, p);
}

/* The completer: device completions become C2HData and response capsules. */
static void *completer_main(void *pArg) {
  tgt_conn *c = pArg;
  for (;;) {
    csq_cqe q;
    if (__atomic_load_n(&c->bRxEnd, __ATOMIC_ACQUIRE) &&
        __atomic_load_n(&c->nInDevice, __ATOMIC_ACQUIRE) == 0)
      break;
    if (dev_emu_backend.xReap(c->pQ, &q, 50 * 1000 * 1000)) continue;
    if (q.cid >= c->nCmd || !c->aCmd[q.cid].bInDevice) continue; /* cannot happen */
    tgt_cmd *p = &c->aCmd[q.cid];
    uint16_t sf = csq_cqe_sf(&q);
    if ((sf & 0x7FF) == 0 && c->qid == 0 && p->sqe.opcode == CSQ_ADM_IDENTIFY &&
        (p->sqe.cdw10 & 0xFF) == 1)
      tgt_identify_patch(c->pCtrl, p->pBuf);
    if ((sf & 0x7FF) == 0 && p->sqe.opcode == CSQ_ADM_IDENTIFY && (p->sqe.cdw10 & 0xFF) == 0)
      tgt_identify_ns_patch(p->sqe.nsid, p->pBuf);
    if ((sf & 0x7FF) == 0 && p->dir == TCP_XFER_C2H) tx_c2h(c, p->hostCid, p->pBuf, p->nLen);
    tx_resp(c, p->hostCid, sf, (uint64_t)q.dw1 << 32 | q.dw0);
    p->bInDevice = 0;
    __atomic_add_fetch(&c->nCmds, 1, __ATOMIC_RELAXED);
    slot_put(c, p);
    __atomic_sub_fetch(&c->nInDevice, 1, __ATOMIC_ACQ_REL);
  }
  return NULL;
}

/* A command capsule, its in-capsule data (nData bytes at pData) read, with
** bBadDd when their digest did not match. 0, or -1 when the host has more
** commands outstanding than slots (the connection ends). */
static int on_capsule(tgt_conn *c, const uint8_t *pEntry, const uint8_t *pData, uint32_t nData,
                      int bBadDd) {
  tgt_cmd *p = slot_get(c);
  uint32_t nLen = 0;
  if (!p) return -1;
  memcpy(&p->sqe, pEntry, 64);
  p->hostCid = p->sqe.cid;
  int dir = tcp_cmd_xfer(&p->sqe, c->qid == 0, &nLen);
  if (dir < 0) {
    finish_local(c, p, CSQ_SC_INVALID_FIELD | CSQ_DNR, 0);
    return 0;
  }
  p->dir = dir;
  p->nLen = nLen;
  if (bBadDd) {
    finish_local(c, p, SC_TRANSIENT_XPORT, 0);
    return 0;
  }
  if (dir != TCP_XFER_NONE) {
    uint8_t type = tcp_sgl_type(&p->sqe);
    if ((p->sqe.flags & 0xC0) != TCP_PSDT_SGL) {
      finish_local(c, p, CSQ_SC_INVALID_FIELD | CSQ_DNR, 0);
      return 0;
    }
    if (tcp_sgl_len(&p->sqe) < nLen) {
      finish_local(c, p, SC_SGL_LEN_INVALID | CSQ_DNR, 0);
      return 0;
    }
    if (type == TCP_SGL_INCAPSULE ? dir != TCP_XFER_H2C || p->sqe.prp1 != 0 || nData < nLen
                                  : type != TCP_SGL_TRANSPORT || nData != 0) {
      finish_local(c, p, type == TCP_SGL_INCAPSULE ? SC_SGL_LEN_INVALID | CSQ_DNR : SC_SGL_TYPE, 0);
      return 0;
    }
    /* rounded up to a block: the device may read its media straight in */
    size_t nNeed = ((size_t)nLen + 4095) & ~(size_t)4095;
    if (p->nBufCap < nNeed) {
      free(p->pBuf);
      p->nBufCap = 0;
      p->pBuf = aligned_alloc(4096, nNeed);
      if (!p->pBuf) {
        finish_local(c, p, CSQ_SC_INTERNAL, 0);
        return 0;
      }
      p->nBufCap = nNeed;
    }
    if (dir == TCP_XFER_C2H) memset(p->pBuf, 0, nLen);
    if (type == TCP_SGL_INCAPSULE) {
      memcpy(p->pBuf, pData, nLen);
    } else if (dir == TCP_XFER_H2C) {
      /* one R2T for the whole transfer; the host splits it by MAXH2CDATA */
      tcp_hdr h;
      memset(&h, 0, sizeof(h));
      h.type = TCP_R2T;
      p->bWaitData = 1;
      h.cccid = p->hostCid;
      h.ttag = (uint16_t)(p - c->aCmd);
      h.offset = 0;
      h.length = nLen;
      tx_pdu(c, &h, NULL, 0);
      return 0; /* exec_cmd when the last H2CData arrives */
    }
  }
  exec_cmd(c, p);
  return 0;
}

/* The receiver: ICReq, then PDUs until the host goes or breaks the rules. */
static void *rx_main(void *pArg) {
  tgt_conn *c = pArg;
  uint8_t aHdr[TCP_MAX_HDR], aPad[TCP_MAX_PAD], aDd[4];
  uint8_t *aInline = malloc(TCP_INLINE_MAX);
  tcp_layout L;
  tcp_hdr h;
  const char *zWhy = "";
  uint32_t fei = 0;
  int fes, bIc = 0;
  snprintf(c->zEnd, sizeof(c->zEnd), "closed by the host");
  while (aInline) {
    if (rx_all(c, aHdr, TCP_CH_LEN)) break;
    fes = tcp_ch_check(aHdr, TCP_ROLE_CONTROLLER, c->bHdgst, c->bDdgst,
                       aHdr[0] == TCP_CAPSULE_CMD ? TCP_INLINE_MAX : TCP_H2C_MAX, &L, &zWhy);
    if (fes) {
      tx_term(c, fes, 0, aHdr, TCP_CH_LEN, zWhy);
      break;
    }
    if (rx_all(c, aHdr + TCP_CH_LEN, L.nHdr - TCP_CH_LEN)) break;
    fes = tcp_hdr_decode(aHdr, &L, &h, &fei, &zWhy);
    if (!fes && (bIc != (h.type != TCP_ICREQ))) {
      fes = TCP_FES_SEQUENCE;
      zWhy = bIc ? "a second ICReq" : "a PDU before ICReq";
    }
    if (fes) {
      tx_term(c, fes, fei, aHdr, L.nHdr, zWhy);
      break;
    }
    if (L.nPad && rx_all(c, aPad, L.nPad)) break;
    if (h.type == TCP_ICREQ) {
      tcp_hdr r;
      memset(&r, 0, sizeof(r));
      r.type = TCP_ICRESP;
      r.dgst = h.dgst & 3;
      r.maxVal = TCP_H2C_MAX;
      if (tx_pdu(c, &r, NULL, 0)) break;
      c->bHdgst = h.dgst & 1;
      c->bDdgst = (h.dgst >> 1) & 1;
      bIc = 1;
      continue;
    }
    if (h.type == TCP_H2C_TERMREQ) {
      snprintf(c->zEnd, sizeof(c->zEnd), "terminated by the host (FES %u)", h.fes);
      break;
    }
    if (h.type == TCP_CAPSULE_CMD) {
      int bBad = 0;
      if (L.nData && rx_all(c, aInline, L.nData)) break;
      if (L.nDdgst) {
        if (rx_all(c, aDd, 4)) break;
        bBad = csq_le32(aDd) != tcp_crc32c(aInline, L.nData);
      }
      if (ctrl_gone(c)) break; /* not run: the host re-sends it or fails it */
      if (on_capsule(c, h.aEntry, aInline, L.nData, bBad)) {
        tx_term(c, TCP_FES_LIMIT, 0, aHdr, L.nHdr, "more commands outstanding than slots");
        break;
      }
      continue;
    }
    /* H2CData: for a command that sent an R2T, the next bytes in order */
    tgt_cmd *p = h.ttag < c->nCmd ? &c->aCmd[h.ttag] : NULL;
    if (!p || !p->bLive || p->bInDevice || p->dir != TCP_XFER_H2C || !p->bWaitData ||
        p->hostCid != h.cccid) {
      tx_term(c, TCP_FES_HDR, 10, aHdr, L.nHdr, "H2CData for no R2T of this connection");
      break;
    }
    if (h.offset != p->nGot || (uint64_t)h.offset + h.length > p->nLen) {
      tx_term(c, TCP_FES_RANGE, 12, aHdr, L.nHdr, "H2CData outside the R2T");
      break;
    }
    if (rx_all(c, p->pBuf + h.offset, h.length)) break;
    p->nGot += h.length;
    if (L.nDdgst) {
      if (rx_all(c, aDd, 4)) break;
      if (csq_le32(aDd) != tcp_crc32c(p->pBuf + h.offset, h.length)) {
        /* the data is wrong but the stream is in step: fail only this command */
        p->nGot = p->nLen + 1;
      }
    }
    if (p->nGot >= p->nLen || (h.flags & TCP_F_LAST)) {
      p->bWaitData = 0;
      if (p->nGot != p->nLen)
        finish_local(c, p, p->nGot > p->nLen ? SC_TRANSIENT_XPORT : CSQ_SC_DATA_XFER_ERROR, 0);
      else
        exec_cmd(c, p);
    }
  }
  free(aInline);
  /* drain: the device finishes what it has, then the queue pair closes */
  __atomic_store_n(&c->bRxEnd, 1, __ATOMIC_RELEASE);
  /* the qid is free at once: a host that closed this queue may connect it
  ** again before the commands still in the device finish */
  if (c->pCtrl) tgt_ctrl_release_qid(c->s, c->pCtrl, c->qid);
  shutdown(c->fd, SHUT_RDWR);
  if (c->bCqStarted) pthread_join(c->cq, NULL);
  if (c->pQ) dev_emu_backend.xQueueClose(c->pQ);
  for (uint32_t i = 0; i < c->nCmd; i++) free(c->aCmd[i].pBuf);
  fprintf(stderr,
          "csq-target: %s %s qid %u cntlid %u%s: %llu commands, %llu bytes in, %llu out; %s\n",
          c->zPeer, c->pCtrl ? (c->pCtrl->pSub ? c->pCtrl->pSub->zNqn : TGT_DISCOVERY_NQN) : "-",
          c->qid, c->pCtrl ? c->pCtrl->cntlid : 0,
          c->bHdgst   ? (c->bDdgst ? " hdgst ddgst" : " hdgst")
          : c->bDdgst ? " ddgst"
                      : "",
          (unsigned long long)c->nCmds, (unsigned long long)c->nIn, (unsigned long long)c->nOut,
          c->zEnd);
  if (c->pCtrl) tgt_ctrl_unref(c->s, c->pCtrl);
  pthread_mutex_lock(&c->s->mu);
  c->bDone = 1;
  pthread_mutex_unlock(&c->s->mu);
  return NULL;
}

static void conn_free(tgt_conn *c) {
  close(c->fd);
  pthread_mutex_destroy(&c->txMu);
  pthread_mutex_destroy(&c->slotMu);
  pthread_cond_destroy(&c->slotCond);
  free(c->aCmd);
  free(c->aFree);
  free(c);
}

int tgt_conn_start(tgt_server *s, int fd, const char *zPeer) {
  tgt_conn *c = calloc(1, sizeof(*c));
  int one = 1, rc;
  if (!c) {
    close(fd);
    return -ENOMEM;
  }
  c->s = s;
  c->fd = fd;
  snprintf(c->zPeer, sizeof(c->zPeer), "%s", zPeer);
  pthread_mutex_init(&c->txMu, NULL);
  pthread_mutex_init(&c->slotMu, NULL);
  pthread_cond_init(&c->slotCond, NULL);
  c->nCmd = TGT_MAX_QDEPTH;
  c->aCmd = calloc(c->nCmd, sizeof(tgt_cmd));
  c->aFree = calloc(c->nCmd, sizeof(uint32_t));
  if (!c->aCmd || !c->aFree) {
    conn_free(c);
    return -ENOMEM;
  }
  for (uint32_t i = 0; i < c->nCmd; i++) c->aFree[i] = c->nCmd - 1 - i;
  c->nFree = c->nCmd;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  {
    struct timeval tv = {0, TGT_KATO_TICK_MS * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  pthread_mutex_lock(&s->mu);
  rc = -pthread_create(&c->rx, NULL, rx_main, c);
  if (rc == 0) {
    c->pNext = s->pConn;
    s->pConn = c;
  }
  pthread_mutex_unlock(&s->mu);
  if (rc) conn_free(c);
  return rc;
}

void tgt_conn_stop_all(tgt_server *s) {
  pthread_mutex_lock(&s->mu);
  for (tgt_conn *c = s->pConn; c; c = c->pNext) shutdown(c->fd, SHUT_RDWR);
  pthread_mutex_unlock(&s->mu);
}

void tgt_conn_reap(tgt_server *s, int bAll) {
  for (;;) {
    tgt_conn *pDone = NULL;
    int bAny;
    pthread_mutex_lock(&s->mu);
    for (tgt_conn **pp = &s->pConn; *pp; pp = &(*pp)->pNext) {
      if ((*pp)->bDone) {
        pDone = *pp;
        *pp = pDone->pNext;
        break;
      }
    }
    bAny = s->pConn != NULL;
    pthread_mutex_unlock(&s->mu);
    if (pDone) {
      pthread_join(pDone->rx, NULL);
      conn_free(pDone);
      continue;
    }
    if (!bAll || !bAny) return;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}
