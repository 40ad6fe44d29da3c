/*
** device/initiator/tcp_backend.c - the "tcp" backend (dev_tcp_backend,
** backend.h): a csq device across an NVMe/TCP link, opened as
**
**   nvme-tcp://HOST:PORT/NQN     e.g. nvme-tcp://127.0.0.1:4420/nqn.2026-12.io.csq:x.csd
**
** xOpen connects the admin queue (ICReq, Fabrics Connect qid 0, Property Set
** CC.EN, wait for CSTS.RDY); Identify goes over it. Each xQueueOpen is one
** more TCP connection, an I/O queue (Connect qid 1, 2, ...) of the same
** controller, and carries every command of that queue, csq's admin opcodes
** included (csq-target accepts them on I/O queues, target.h).
**
** A queue never blocks in xSubmit: the capsule (with in-capsule data up to
** TCP_INLINE_MAX bytes) goes into the queue's send buffer, flushed as far as
** the socket takes it; xReap waits in ppoll for the socket, sends what is
** left and what R2Ts ask for (H2CData), and reads PDUs through a small state
** machine (header, padding, data straight into the caller's buffer, digest)
** until a response completes a command. Wire command ids are the queue's
** slot indexes; the driver's cid is kept in the slot.
**
** Failures: a PDU that breaks the rules (pdu.h), one for a command not in
** flight, data beyond a command's buffer, a C2HTermReq, or the connection
** closing mark the link dead: every command in flight, and every one
** submitted later, completes with CSQ_SC_HOST_LINK and a detail message that
** says what happened. Nothing waits past the driver's timeout.
**
** Counters: bytes_to_host and bytes_from_host count the bytes of each
** command's PDUs that crossed the socket (headers, data, digests) in each
** direction; the device's media counters are not visible from here.
*/
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "device/format/le.h"
#include "device/link/backend.h"
#include "device/link/errlog.h"
#include "device/link/msg.h"
#include "device/tcp/crc32c.h"
#include "device/tcp/pdu.h"
#include "device/tcp/xfer.h"

#define TCPB_PREFIX      "nvme-tcp://"
#define TCPB_SETUP_MS    10000 /* connect, ICReq, Connect, CC.EN at most this long */
#define TCPB_HOSTNQN_PFX "nqn.2014-08.org.nvmexpress:uuid:"
#define RX_CH            0 /* reading the common header */
#define RX_HDR           1 /* the rest of the header (with its digest) */
#define RX_PAD           2
#define RX_DATA          3
#define RX_DDGST         4

typedef struct tcpb_cmd {
  int bLive;
  uint16_t driverCid;
  csq_sqe sqe; /* as the driver sent it */
  int dir;
  uint32_t nLen;
  uint8_t *pBuf;     /* the driver's buffer */
  uint32_t nC2H;     /* C2HData bytes received, in order */
  int bBadData;      /* a data digest did not match */
  uint64_t nTx, nRx; /* bytes of its PDUs each way */
} tcpb_cmd;

struct dev_backend {
  char *zUrl;
  char zHost[256], zPort[16], zNqn[TCP_TERM_MAX * 2];
  char zHostNqn[128];
  uint8_t aHostId[16];
  int timeoutMs;
  uint16_t cntlid;
  pthread_mutex_t mu; /* the admin queue, qids */
  dev_bqueue *pAdmin;
  uint64_t aQidUsed;
  dev_stats stats;
  dev_stats adminStats;
};

struct dev_bqueue {
  dev_backend *d;
  dev_stats *pStats;
  int fd;
  uint16_t qid;
  int bHdgst, bDdgst;
  uint32_t maxH2C;
  int bDead;
  char zDead[300];
  /* slots */
  tcpb_cmd *aCmd;
  uint32_t nCmd, nFree;
  uint16_t *aFree;
  /* completions made here (failures), handed out before the socket's */
  csq_cqe *aReady;
  uint32_t nReady, nReadyAlloc;
  /* send buffer: aTx[iTx..nTx) still to send */
  uint8_t *aTx;
  size_t iTx, nTx, nTxAlloc;
  /* receive state */
  int eRx;
  uint8_t aHdr[TCP_MAX_HDR];
  uint32_t nGot; /* bytes of the current part */
  tcp_layout L;
  tcp_hdr h;
  uint8_t aSmall[TCP_TERM_MAX + 8]; /* TermReq data, padding */
  uint8_t aDd[4];
  uint32_t crc;     /* data digest so far */
  tcpb_cmd *pRxCmd; /* the command a C2HData is for */
  dev_errlog errLog;
};

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ---- the link dies ------------------------------------------------------- */

static void push_ready(dev_bqueue *q, uint16_t cid, uint16_t sf, uint64_t result) {
  csq_cqe c;
  if (q->nReady == q->nReadyAlloc) {
    uint32_t n = q->nReadyAlloc ? q->nReadyAlloc * 2 : 64;
    csq_cqe *a = realloc(q->aReady, n * sizeof(csq_cqe));
    if (!a) return; /* the driver times the command out */
    q->aReady = a;
    q->nReadyAlloc = n;
  }
  memset(&c, 0, sizeof(c));
  c.cid = cid;
  c.sq_id = q->qid;
  c.status = (uint16_t)(sf << 1);
  c.dw0 = (uint32_t)result;
  c.dw1 = (uint32_t)(result >> 32);
  q->aReady[q->nReady++] = c;
}

static void slot_free(dev_bqueue *q, tcpb_cmd *p) {
  p->bLive = 0;
  q->aFree[q->nFree++] = (uint16_t)(p - q->aCmd);
}

/* Complete p with status sf: count it, remember a failure's detail. */
static void complete(dev_bqueue *q, tcpb_cmd *p, uint16_t sf, uint64_t result, const char *zWhy) {
  dev_io_acct acct = {p->nRx, p->nTx, 0, 0};
  dev_stats_account(q->pStats, &p->sqe, sf, &acct);
  dev_stats_account(&q->d->stats, &p->sqe, sf, &acct);
  if ((sf & 0x7FF) && zWhy) dev_errlog_add(&q->errLog, p->driverCid, sf & 0x7FF, zWhy);
  push_ready(q, p->driverCid, sf, result);
  slot_free(q, p);
}

/* Mark the link dead (the first reason stays) and fail every command in
** flight with CSQ_SC_HOST_LINK. */
static void link_dead(dev_bqueue *q, const char *zFmt, ...) __attribute__((format(printf, 2, 3)));
static void link_dead(dev_bqueue *q, const char *zFmt, ...) {
  if (!q->bDead) {
    va_list ap;
    char z[200];
    va_start(ap, zFmt);
    vsnprintf(z, sizeof(z), zFmt, ap);
    va_end(ap);
    snprintf(q->zDead, sizeof(q->zDead), "the NVMe/TCP link to %s (queue %u) is down: %s",
             q->d->zUrl, q->qid, z);
    q->bDead = 1;
    shutdown(q->fd, SHUT_RDWR);
  }
  for (uint32_t i = 0; i < q->nCmd; i++)
    if (q->aCmd[i].bLive) complete(q, &q->aCmd[i], CSQ_SC_HOST_LINK, 0, q->zDead);
  q->nTx = q->iTx = 0;
}

/* ---- sending ------------------------------------------------------------ */

static int tx_room(dev_bqueue *q, size_t n) {
  if (q->iTx == q->nTx) q->iTx = q->nTx = 0;
  if (q->nTx + n <= q->nTxAlloc) return 0;
  if (q->iTx) {
    memmove(q->aTx, q->aTx + q->iTx, q->nTx - q->iTx);
    q->nTx -= q->iTx;
    q->iTx = 0;
    if (q->nTx + n <= q->nTxAlloc) return 0;
  }
  size_t nNew = q->nTxAlloc ? q->nTxAlloc : 65536;
  while (nNew < q->nTx + n) nNew *= 2;
  uint8_t *a = realloc(q->aTx, nNew);
  if (!a) return -ENOMEM;
  q->aTx = a;
  q->nTxAlloc = nNew;
  return 0;
}

/* Queue one PDU (header h, nData bytes at pData) for sending. Bytes queued,
** or 0 when out of memory (the link is then dead). */
static uint32_t tx_queue(dev_bqueue *q, const tcp_hdr *h, const void *pData, uint32_t nData) {
  uint32_t nAll = TCP_MAX_HDR + nData + TCP_DGST_LEN, nHdr;
  if (tx_room(q, nAll)) {
    link_dead(q, "out of memory for the send buffer");
    return 0;
  }
  nHdr = tcp_hdr_encode(h, nData, q->bHdgst, q->bDdgst, q->aTx + q->nTx);
  q->nTx += nHdr;
  if (nData) {
    memcpy(q->aTx + q->nTx, pData, nData);
    q->nTx += nData;
    if (q->bDdgst && h->type != TCP_H2C_TERMREQ) {
      csq_put_le32(q->aTx + q->nTx, tcp_crc32c(pData, nData));
      q->nTx += TCP_DGST_LEN;
      nData += TCP_DGST_LEN;
    }
  }
  return nHdr + nData;
}

/* Send what the socket takes now. 0, or -1 when the link died. */
static int tx_flush(dev_bqueue *q) {
  while (q->iTx < q->nTx) {
    ssize_t k = send(q->fd, q->aTx + q->iTx, q->nTx - q->iTx, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (k <= 0) {
      link_dead(q, "sending failed: %s", k < 0 ? strerror(errno) : "connection closed");
      return -1;
    }
    q->iTx += (size_t)k;
  }
  return 0;
}

/* ---- submitting --------------------------------------------------------- */

static int tcpb_submit(dev_bqueue *q, const csq_sqe *pSqe) {
  tcpb_cmd *p;
  tcp_hdr h;
  uint32_t nLen = 0, nInline = 0;
  int dir;
  if (q->bDead) {
    dev_errlog_add(&q->errLog, pSqe->cid, CSQ_SC_HOST_LINK, q->zDead);
    push_ready(q, pSqe->cid, CSQ_SC_HOST_LINK, 0);
    return 0;
  }
  if (q->nFree == 0) return -EAGAIN;
  dir = tcp_cmd_xfer(pSqe, q->qid == 0, &nLen);
  p = &q->aCmd[q->aFree[--q->nFree]];
  memset(p, 0, sizeof(*p));
  p->bLive = 1;
  p->driverCid = pSqe->cid;
  p->sqe = *pSqe;
  if (dir < 0) {
    complete(q, p, CSQ_SC_INVALID_FIELD | CSQ_DNR, 0,
             "the command's data is too long for NVMe/TCP");
    return 0;
  }
  p->dir = dir;
  p->nLen = nLen;
  p->pBuf = (uint8_t *)(uintptr_t)pSqe->prp1;
  memset(&h, 0, sizeof(h));
  h.type = TCP_CAPSULE_CMD;
  csq_sqe *e = (csq_sqe *)h.aEntry;
  *e = *pSqe;
  e->cid = (uint16_t)(p - q->aCmd);
  if (dir == TCP_XFER_H2C && nLen <= TCP_INLINE_MAX) {
    tcp_sgl_set(e, TCP_SGL_INCAPSULE, 0, nLen);
    nInline = nLen;
  } else {
    tcp_sgl_set(e, TCP_SGL_TRANSPORT, 0, nLen);
  }
  p->nTx += tx_queue(q, &h, p->pBuf, nInline);
  if (!q->bDead) tx_flush(q);
  return 0;
}

/* ---- receiving ---------------------------------------------------------- */

static tcpb_cmd *cmd_of(dev_bqueue *q, uint16_t wireCid) {
  return wireCid < q->nCmd && q->aCmd[wireCid].bLive ? &q->aCmd[wireCid] : NULL;
}

/* A whole header has arrived (and passed tcp_hdr_decode): act on it, and set
** up the reading of its data. 0, or -1 when the link died. */
static int on_header(dev_bqueue *q) {
  tcp_hdr *h = &q->h;
  tcpb_cmd *p;
  switch (h->type) {
  case TCP_CAPSULE_RSP: {
    csq_cqe c;
    memcpy(&c, h->aEntry, 16);
    p = cmd_of(q, c.cid);
    if (!p) {
      link_dead(q, "the target answered command %u, which is not in flight", c.cid);
      return -1;
    }
    p->nRx += q->L.plen;
    uint16_t sf = csq_cqe_sf(&c);
    if ((sf & 0x7FF) == 0 && p->bBadData) sf = CSQ_SC_DATA_XFER_ERROR;
    if ((sf & 0x7FF) == 0 && p->dir == TCP_XFER_C2H && p->nC2H != p->nLen)
      sf = CSQ_SC_DATA_XFER_ERROR;
    complete(q, p, sf, (uint64_t)c.dw1 << 32 | c.dw0,
             sf == CSQ_SC_DATA_XFER_ERROR ? "the data that crossed the link was incomplete or "
                                            "failed its digest"
                                          : NULL);
    return 0;
  }
  case TCP_R2T: {
    p = cmd_of(q, h->cccid);
    if (!p || p->dir != TCP_XFER_H2C || (uint64_t)h->offset + h->length > p->nLen) {
      link_dead(q, "the target asked (R2T) for data that command %u does not have", h->cccid);
      return -1;
    }
    p->nRx += q->L.plen;
    for (uint32_t off = 0; off < h->length;) {
      uint32_t k = h->length - off < q->maxH2C ? h->length - off : q->maxH2C;
      tcp_hdr d;
      memset(&d, 0, sizeof(d));
      d.type = TCP_H2C_DATA;
      d.cccid = h->cccid;
      d.ttag = h->ttag;
      d.offset = h->offset + off;
      d.length = k;
      if (off + k == h->length) d.flags = TCP_F_LAST;
      p->nTx += tx_queue(q, &d, p->pBuf + d.offset, k);
      if (q->bDead) return -1;
      off += k;
    }
    return tx_flush(q);
  }
  case TCP_C2H_DATA:
    p = cmd_of(q, h->cccid);
    if (!p || p->dir != TCP_XFER_C2H || h->offset != p->nC2H ||
        (uint64_t)h->offset + h->length > p->nLen) {
      link_dead(q, "the target sent data outside command %u's buffer", h->cccid);
      return -1;
    }
    q->pRxCmd = p;
    p->nRx += q->L.plen;
    return 0;
  case TCP_C2H_TERMREQ:
    return 0; /* its data (the offending header) is read, then the link dies */
  default:
    link_dead(q, "the target sent a PDU of type %u out of sequence", h->type);
    return -1;
  }
}

/* The PDU is complete. */
static void on_pdu_end(dev_bqueue *q) {
  tcp_hdr *h = &q->h;
  if (h->type == TCP_C2H_TERMREQ) {
    link_dead(q, "the target ended the connection (C2HTermReq, fatal error status %u)", h->fes);
    return;
  }
  if (h->type == TCP_C2H_DATA && q->pRxCmd) {
    tcpb_cmd *p = q->pRxCmd;
    if (q->L.nDdgst && csq_le32(q->aDd) != tcp_crc32c_final(q->crc)) p->bBadData = 1;
    p->nC2H += h->length;
    if ((h->flags & TCP_F_SUCCESS) && p->nC2H == p->nLen && !p->bBadData)
      complete(q, p, 0, 0, NULL);
    q->pRxCmd = NULL;
  }
}

/* Read what the socket has, PDU by PDU. 0, or -1 when the link died. */
static int rx_pump(dev_bqueue *q) {
  for (;;) {
    uint8_t *pDst;
    uint32_t nWant;
    switch (q->eRx) {
    case RX_CH:
      pDst = q->aHdr + q->nGot;
      nWant = TCP_CH_LEN - q->nGot;
      break;
    case RX_HDR:
      pDst = q->aHdr + q->nGot;
      nWant = q->L.nHdr - q->nGot;
      break;
    case RX_PAD:
      pDst = q->aSmall;
      nWant = q->L.nPad - q->nGot;
      break;
    case RX_DATA:
      nWant = q->L.nData - q->nGot;
      pDst = q->pRxCmd ? q->pRxCmd->pBuf + q->h.offset + q->nGot : q->aSmall + q->nGot;
      break;
    default:
      pDst = q->aDd + q->nGot;
      nWant = 4 - q->nGot;
    }
    ssize_t k = nWant ? recv(q->fd, pDst, nWant, MSG_DONTWAIT) : 0;
    if (nWant) {
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
      if (k <= 0) {
        link_dead(q, "%s", k == 0 ? "the target closed the connection" : strerror(errno));
        return -1;
      }
      if (q->eRx == RX_DATA && q->L.nDdgst) q->crc = tcp_crc32c_update(q->crc, pDst, (size_t)k);
      q->nGot += (uint32_t)k;
      if ((uint32_t)k < nWant) continue;
    }
    /* the part is complete: on to the next */
    q->nGot = 0;
    if (q->eRx == RX_CH) {
      const char *zWhy;
      int fes = tcp_ch_check(q->aHdr, TCP_ROLE_HOST, q->bHdgst, q->bDdgst, TCP_CMD_DATA_MAX, &q->L,
                             &zWhy);
      if (fes) {
        link_dead(q, "the target sent a malformed PDU: %s", zWhy);
        return -1;
      }
      q->eRx = RX_HDR;
      q->nGot = TCP_CH_LEN;
      continue;
    }
    if (q->eRx == RX_HDR) {
      const char *zWhy;
      uint32_t fei;
      int fes = tcp_hdr_decode(q->aHdr, &q->L, &q->h, &fei, &zWhy);
      if (fes) {
        link_dead(q, "the target sent a malformed PDU: %s", zWhy);
        return -1;
      }
      if (q->h.type == TCP_ICRESP) {
        link_dead(q, "the target sent a second ICResp");
        return -1;
      }
      q->crc = TCP_CRC32C_INIT;
      q->pRxCmd = NULL;
      if (on_header(q)) return -1;
      q->eRx = RX_PAD;
    } else if (q->eRx == RX_PAD) {
      q->eRx = RX_DATA;
    } else if (q->eRx == RX_DATA) {
      q->eRx = RX_DDGST;
    } else {
      q->eRx = RX_CH;
      on_pdu_end(q);
      if (q->bDead) return -1;
      continue;
    }
    /* skip parts this PDU does not have */
    if (q->eRx == RX_PAD && q->L.nPad == 0) q->eRx = RX_DATA;
    if (q->eRx == RX_DATA && q->L.nData == 0) q->eRx = RX_DDGST;
    if (q->eRx == RX_DATA && q->L.nData > TCP_TERM_MAX && !q->pRxCmd) {
      link_dead(q, "the target sent data with no command to hold it");
      return -1;
    }
    if (q->eRx == RX_DDGST && q->L.nDdgst == 0) {
      q->eRx = RX_CH;
      on_pdu_end(q);
      if (q->bDead) return -1;
    }
  }
}

static int tcpb_reap(dev_bqueue *q, csq_cqe *pCqe, int64_t timeoutNs) {
  int64_t tEnd = now_ns() + (timeoutNs > 0 ? timeoutNs : 0);
  for (;;) {
    if (q->nReady) {
      *pCqe = q->aReady[0];
      memmove(q->aReady, q->aReady + 1, (q->nReady - 1) * sizeof(csq_cqe));
      q->nReady--;
      return 0;
    }
    if (q->bDead) {
      /* nothing more will come: wait as asked, so a caller's loop does not spin */
      if (timeoutNs > 0) {
        struct timespec t = {(time_t)(timeoutNs / 1000000000), (long)(timeoutNs % 1000000000)};
        nanosleep(&t, NULL);
      }
      return -ETIMEDOUT;
    }
    int64_t left = tEnd - now_ns();
    if (left < 0) left = 0;
    struct timespec ts = {(time_t)(left / 1000000000), (long)(left % 1000000000)};
    struct pollfd pf = {q->fd, (short)(POLLIN | (q->iTx < q->nTx ? POLLOUT : 0)), 0};
    int n = ppoll(&pf, 1, &ts, NULL);
    if (n < 0 && errno != EINTR) {
      link_dead(q, "poll: %s", strerror(errno));
      continue;
    }
    if (n > 0) {
      if ((pf.revents & POLLOUT) && tx_flush(q)) continue;
      if (pf.revents & (POLLIN | POLLHUP | POLLERR)) rx_pump(q);
      continue;
    }
    if (left == 0) return -ETIMEDOUT;
  }
}

/* Wait for the completion of cid (nothing else in flight), up to tEnd. */
static int wait_cid(dev_bqueue *q, uint16_t cid, int64_t tEnd, csq_cqe *pCqe) {
  for (;;) {
    int64_t left = tEnd - now_ns();
    if (left <= 0 || tcpb_reap(q, pCqe, left)) return -ETIMEDOUT;
    if (pCqe->cid == cid) return 0;
  }
}

/* ---- connections -------------------------------------------------------- */

static void queue_free(dev_bqueue *q) {
  if (!q) return;
  if (q->fd >= 0) close(q->fd);
  free(q->aCmd);
  free(q->aFree);
  free(q->aReady);
  free(q->aTx);
  dev_errlog_free(&q->errLog);
  free(q);
}

/* TCP connect to the backend's address within tEnd. fd or -errno. */
static int tcp_dial(dev_backend *d, int64_t tEnd, char **pzErr) {
  struct addrinfo hints, *pRes = NULL;
  int fd = -1, rc, one = 1;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  rc = getaddrinfo(d->zHost, d->zPort, &hints, &pRes);
  if (rc) {
    *pzErr =
        dev_mprintf("cannot open %s: cannot resolve %s: %s", d->zUrl, d->zHost, gai_strerror(rc));
    return -EHOSTUNREACH;
  }
  fd = socket(pRes->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    rc = -errno;
    goto fail;
  }
  if (connect(fd, pRes->ai_addr, pRes->ai_addrlen) && errno != EINPROGRESS) {
    rc = -errno;
    goto fail;
  }
  for (;;) {
    struct pollfd pf = {fd, POLLOUT, 0};
    int64_t left = (tEnd - now_ns()) / 1000000;
    int n = poll(&pf, 1, left > 0 ? (int)left : 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      rc = -ETIMEDOUT;
      goto fail;
    }
    socklen_t nErr = sizeof(rc);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &nErr);
    if (rc) {
      rc = -rc;
      goto fail;
    }
    break;
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  freeaddrinfo(pRes);
  return fd;
fail:
  *pzErr = dev_mprintf("cannot open %s: cannot connect to %s:%s: %s (is csq-target running?)",
                       d->zUrl, d->zHost, d->zPort, strerror(-rc));
  if (fd >= 0) close(fd);
  freeaddrinfo(pRes);
  return rc;
}

/* Run one command synchronously on q (setup: nothing else in flight). */
static int sync_cmd(dev_bqueue *q, csq_sqe *e, int64_t tEnd, csq_cqe *pCqe, char **pzErr,
                    const char *zWhat) {
  e->cid = 0xFFF0;
  tcpb_submit(q, e);
  if (wait_cid(q, 0xFFF0, tEnd, pCqe)) {
    *pzErr = dev_mprintf("cannot open %s: %s: %s", q->d->zUrl, zWhat,
                         q->bDead ? q->zDead : "no answer in time");
    return q->bDead ? -ECONNRESET : -ETIMEDOUT;
  }
  uint16_t sf = csq_cqe_sf(pCqe) & 0x7FF;
  if (sf == CSQ_SC_HOST_LINK) {
    *pzErr = dev_mprintf("cannot open %s: %s: %s", q->d->zUrl, zWhat, q->zDead);
    return -ECONNRESET;
  }
  if (sf) {
    *pzErr = dev_mprintf(
        "cannot open %s: %s failed: %s (status 0x%03x)%s", q->d->zUrl, zWhat, csq_status_name(sf),
        sf, sf == CSQ_STATUS(1, 0x82) ? ": no such subsystem or queue at the target" : "");
    return -ECONNREFUSED;
  }
  return 0;
}

/* A connected queue: TCP, ICReq/ICResp, Fabrics Connect. */
static int queue_connect(dev_backend *d, uint16_t qid, uint32_t nDepth, dev_stats *pStats,
                         dev_bqueue **ppQ, char **pzErr) {
  int64_t tEnd = now_ns() + (int64_t)TCPB_SETUP_MS * 1000000;
  dev_bqueue *q = calloc(1, sizeof(*q));
  uint8_t aIc[TCP_MAX_HDR], *aConn = NULL;
  tcp_hdr h;
  csq_cqe c;
  int rc = -ENOMEM;
  *ppQ = NULL;
  if (!q) return -ENOMEM;
  q->fd = -1;
  q->d = d;
  q->qid = qid;
  q->pStats = pStats;
  dev_errlog_init(&q->errLog);
  /* one more slot than the driver uses, for setup commands */
  q->nCmd = nDepth + 1;
  q->aCmd = calloc(q->nCmd, sizeof(tcpb_cmd));
  q->aFree = calloc(q->nCmd, sizeof(uint16_t));
  if (!q->aCmd || !q->aFree) goto fail;
  for (uint32_t i = 0; i < q->nCmd; i++) q->aFree[i] = (uint16_t)(q->nCmd - 1 - i);
  q->nFree = q->nCmd;
  q->fd = tcp_dial(d, tEnd, pzErr);
  if (q->fd < 0) {
    rc = q->fd;
    goto fail;
  }
  /* ICReq: no digests (csq's choice on loopback), one R2T per command */
  memset(&h, 0, sizeof(h));
  h.type = TCP_ICREQ;
  tx_queue(q, &h, NULL, 0);
  tx_flush(q);
  {
    /* the ICResp, read whole before any other PDU */
    uint32_t nGot = 0;
    const char *zWhy = "";
    tcp_layout L;
    uint32_t fei;
    while (nGot < TCP_HLEN_IC && !q->bDead) {
      struct pollfd pf = {q->fd, POLLIN | (q->iTx < q->nTx ? POLLOUT : 0), 0};
      int64_t left = (tEnd - now_ns()) / 1000000;
      if (left <= 0 || poll(&pf, 1, (int)left) == 0) break;
      if (pf.revents & POLLOUT) tx_flush(q);
      ssize_t k = recv(q->fd, aIc + nGot, TCP_HLEN_IC - nGot, MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
        link_dead(q, "the target closed the connection during ICReq");
        break;
      }
      if (k > 0) nGot += (uint32_t)k;
      if (nGot >= TCP_CH_LEN && tcp_ch_check(aIc, TCP_ROLE_HOST, 0, 0, 0, &L, &zWhy) != 0) break;
    }
    if (nGot < TCP_HLEN_IC || tcp_ch_check(aIc, TCP_ROLE_HOST, 0, 0, 0, &L, &zWhy) ||
        L.type != TCP_ICRESP || tcp_hdr_decode(aIc, &L, &h, &fei, &zWhy)) {
      *pzErr = dev_mprintf("cannot open %s: no valid ICResp from %s:%s (%s)", d->zUrl, d->zHost,
                           d->zPort,
                           q->bDead  ? q->zDead
                           : zWhy[0] ? zWhy
                                     : "timed out");
      rc = -EPROTO;
      goto fail;
    }
    q->maxH2C = h.maxVal;
  }
  /* Fabrics Connect */
  aConn = aligned_alloc(4096, 4096);
  if (!aConn) goto fail;
  memset(aConn, 0, TCP_CONNECT_DATA);
  memcpy(aConn, d->aHostId, 16);
  csq_put_le16(aConn + 16, qid ? d->cntlid : 0xFFFF);
  snprintf((char *)aConn + 256, 256, "%s", d->zNqn);
  snprintf((char *)aConn + 512, 256, "%s", d->zHostNqn);
  csq_sqe e;
  memset(&e, 0, sizeof(e));
  e.opcode = TCP_OPC_FABRICS;
  e.nsid = TCP_FCTYPE_CONN;
  e.prp1 = (uint64_t)(uintptr_t)aConn;
  uint8_t *b = (uint8_t *)&e;
  csq_put_le16(b + 42, qid);
  csq_put_le16(b + 44, (uint16_t)(qid ? nDepth : 31)); /* SQSIZE, 0-based: one spare */
  rc = sync_cmd(q, &e, tEnd, &c, pzErr, "Fabrics Connect");
  free(aConn);
  if (rc) goto fail;
  if (qid == 0) d->cntlid = (uint16_t)c.dw0;
  *ppQ = q;
  return 0;
fail:
  queue_free(q);
  return rc;
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
  int rc = sync_cmd(d->pAdmin, &e, tEnd, &c, pzErr, bSet ? "Property Set" : "Property Get");
  if (rc == 0 && pOut) *pOut = (uint64_t)c.dw1 << 32 | c.dw0;
  return rc;
}

/* "nvme-tcp://HOST:PORT/NQN" (HOST may be [v6]); the prefix is optional. */
static int parse_url(dev_backend *d, const char *zPath, char **pzErr) {
  const char *z = zPath, *zSlash, *zColon;
  if (strncmp(z, TCPB_PREFIX, strlen(TCPB_PREFIX)) == 0) z += strlen(TCPB_PREFIX);
  zSlash = strchr(z, '/');
  if (!zSlash || !zSlash[1] || strlen(zSlash + 1) >= 224) goto bad;
  snprintf(d->zNqn, sizeof(d->zNqn), "%s", zSlash + 1);
  if (z[0] == '[') {
    const char *zEnd = memchr(z, ']', (size_t)(zSlash - z));
    if (!zEnd || zEnd[1] != ':') goto bad;
    snprintf(d->zHost, sizeof(d->zHost), "%.*s", (int)(zEnd - z - 1), z + 1);
    zColon = zEnd + 1;
  } else {
    zColon = memchr(z, ':', (size_t)(zSlash - z));
    if (!zColon) goto bad;
    snprintf(d->zHost, sizeof(d->zHost), "%.*s", (int)(zColon - z), z);
  }
  if (zSlash - zColon - 1 <= 0 || zSlash - zColon - 1 > 5) goto bad;
  snprintf(d->zPort, sizeof(d->zPort), "%.*s", (int)(zSlash - zColon - 1), zColon + 1);
  for (const char *p = d->zPort; *p; p++)
    if (*p < '0' || *p > '9') goto bad;
  if (!d->zHost[0]) goto bad;
  return 0;
bad:
  *pzErr = dev_mprintf("bad device %s: want nvme-tcp://HOST:PORT/NQN, e.g. "
                       "nvme-tcp://127.0.0.1:4420/nqn.2026-12.io.csq:x.csd",
                       zPath);
  return -EINVAL;
}

static void tcpb_close(dev_backend *d);

static int tcpb_open(const char *zPath, const dev_options *pOpt, dev_backend **ppB, char **pzErr) {
  dev_backend *d = calloc(1, sizeof(*d));
  int64_t tEnd = now_ns() + (int64_t)TCPB_SETUP_MS * 1000000;
  uint64_t v = 0;
  int rc;
  *ppB = NULL;
  if (pzErr) *pzErr = NULL;
  if (!d) return -ENOMEM;
  pthread_mutex_init(&d->mu, NULL);
  d->zUrl = strdup(zPath);
  if (!d->zUrl) {
    tcpb_close(d);
    return -ENOMEM;
  }
  d->timeoutMs = pOpt->timeoutMs > 0 ? pOpt->timeoutMs : 30000;
  rc = parse_url(d, zPath, pzErr);
  if (rc) goto fail;
  /* a host identity per open device: its queues share it, as Connect asks */
  {
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, d->aHostId, 16) != 16) {
      uint64_t t = (uint64_t)now_ns() ^ (uint64_t)getpid() << 32;
      memcpy(d->aHostId, &t, 8);
    }
    if (fd >= 0) close(fd);
    uint8_t *u = d->aHostId;
    snprintf(d->zHostNqn, sizeof(d->zHostNqn),
             TCPB_HOSTNQN_PFX
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
  }
  rc = queue_connect(d, 0, 31, &d->adminStats, &d->pAdmin, pzErr);
  if (rc) goto fail;
  d->aQidUsed = 1;
  /* CC: EN, I/O SQ entries 2^6, CQ entries 2^4; then wait for CSTS.RDY */
  rc = prop(d, 1, 0x14, 1u | 6u << 16 | 4u << 20, NULL, tEnd, pzErr);
  while (rc == 0) {
    rc = prop(d, 0, 0x1C, 0, &v, tEnd, pzErr);
    if (rc || (v & 1)) break;
    if (now_ns() > tEnd) {
      *pzErr = dev_mprintf("cannot open %s: the controller did not become ready", zPath);
      rc = -ETIMEDOUT;
      break;
    }
    usleep(1000);
  }
  if (rc) goto fail;
  *ppB = d;
  return 0;
fail:
  tcpb_close(d);
  return rc;
}

static void tcpb_close(dev_backend *d) {
  if (!d) return;
  queue_free(d->pAdmin);
  pthread_mutex_destroy(&d->mu);
  free(d->zUrl);
  free(d);
}

static int tcpb_identify(dev_backend *d, uint8_t cns, uint32_t nsid, void *pBuf) {
  csq_sqe e;
  csq_cqe c;
  char *zErr = NULL;
  int rc;
  memset(&e, 0, sizeof(e));
  memset(&c, 0, sizeof(c));
  e.opcode = CSQ_ADM_IDENTIFY;
  e.nsid = nsid;
  e.cdw10 = cns;
  e.prp1 = (uint64_t)(uintptr_t)pBuf;
  pthread_mutex_lock(&d->mu);
  rc = sync_cmd(d->pAdmin, &e, now_ns() + (int64_t)d->timeoutMs * 1000000, &c, &zErr, "Identify");
  pthread_mutex_unlock(&d->mu);
  free(zErr);
  if (rc == 0) return 0;
  return (csq_cqe_sf(&c) & 0x7FF) ? (int)(csq_cqe_sf(&c) & 0x7FF) : rc;
}

static int tcpb_queue_open(dev_backend *d, uint32_t nDepth, dev_stats *pStats, dev_bqueue **ppQ) {
  char *zErr = NULL;
  uint16_t qid = 0;
  int rc;
  /* SQSIZE is 0-based and this queue keeps one slot for itself */
  if (nDepth > DEV_MAX_QDEPTH - 2) nDepth = DEV_MAX_QDEPTH - 2;
  pthread_mutex_lock(&d->mu);
  for (uint16_t i = 1; i < 64; i++) {
    if (!(d->aQidUsed & (1ull << i))) {
      qid = i;
      d->aQidUsed |= 1ull << i;
      break;
    }
  }
  pthread_mutex_unlock(&d->mu);
  if (!qid) return -EMFILE;
  rc = queue_connect(d, qid, nDepth, pStats, ppQ, &zErr);
  if (rc) {
    /* the driver reports only the code; say why on stderr, once */
    fprintf(stderr, "csq: %s\n", zErr ? zErr : "cannot connect an NVMe/TCP queue");
    pthread_mutex_lock(&d->mu);
    d->aQidUsed &= ~(1ull << qid);
    pthread_mutex_unlock(&d->mu);
  }
  free(zErr);
  return rc;
}

static void tcpb_queue_close(dev_bqueue *q) {
  dev_backend *d = q->d;
  /* commands still out complete first, within the timeout (the contract) */
  int64_t tEnd = now_ns() + (int64_t)d->timeoutMs * 1000000;
  for (;;) {
    uint32_t nLive = 0;
    csq_cqe c;
    for (uint32_t i = 0; i < q->nCmd; i++) nLive += q->aCmd[i].bLive;
    if (!nLive || q->bDead || now_ns() > tEnd) break;
    tcpb_reap(q, &c, 10 * 1000000);
  }
  pthread_mutex_lock(&d->mu);
  d->aQidUsed &= ~(1ull << q->qid);
  pthread_mutex_unlock(&d->mu);
  queue_free(q);
}

static void tcpb_stats(dev_backend *d, dev_stats *pOut) {
  dev_stats_snapshot(pOut, &d->stats);
}

static void tcpb_detail(dev_bqueue *q, uint16_t cid, uint16_t sf, char *zOut, size_t nOut) {
  if (!dev_errlog_find(&q->errLog, cid, sf, zOut, nOut) && nOut) zOut[0] = 0;
}

const dev_backend_ops dev_tcp_backend = {
    "tcp",           tcpb_open,        tcpb_close,  tcpb_identify,
    tcpb_queue_open, tcpb_queue_close, tcpb_submit, tcpb_reap,
    tcpb_stats,      tcpb_detail,      NULL,
};
