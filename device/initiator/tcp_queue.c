/*
** device/initiator/tcp_queue.c - one queue of the NVMe/TCP initiator
** (tcp_int.h): a TCP connection carrying the capsules of one NVMe queue.
**
** A queue never blocks in xSubmit: the capsule (with in-capsule data up to
** TCP_INLINE_MAX bytes) goes into the queue's send buffer and its sending
** starts (tcp_sock.c: io_uring, or send/recv where io_uring is unavailable);
** xReap waits for the socket, sends what is left and what R2Ts ask for
** (H2CData), and parses what arrives through a small state machine (header,
** padding, data into the caller's buffer, digest) until a response
** completes a command. Wire command ids are the queue's slot indexes; the
** driver's cid is kept in the slot.
**
** When the connection drops (closed, reset, a send or receive error) and the
** URL allows reconnection, the queue goes down instead of dead: commands
** whose capsule was sent and that must not run twice (tcpb_resendable)
** complete with CSQ_SC_HOST_LINK ("not sent again"), the others stay in
** their slots, and the next xReap reconnects (tcp_recover.c) and sends them
** again in their order. A PDU that breaks the rules (pdu.h), one for a
** command not in flight, data beyond a command's buffer or a C2HTermReq is
** the target's fault, not the link's: the queue dies at once, every command
** completes with CSQ_SC_HOST_LINK and a message that says what happened.
**
** Counters: bytes_to_host and bytes_from_host count the bytes of each
** command's PDUs that crossed the socket (headers, data, digests) in each
** direction, re-sent ones included.
*/
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "device/format/le.h"
#include "device/initiator/tcp_int.h"
#include "device/link/msg.h"
#include "device/tcp/crc32c.h"
#include "device/tcp/xfer.h"

#define RX_CH    0 /* reading the common header */
#define RX_HDR   1 /* the rest of the header (with its digest) */
#define RX_PAD   2
#define RX_DATA  3
#define RX_DDGST 4

int64_t tcpb_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ---- completions -------------------------------------------------------- */

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

/* What a successful completion of p changes in the queue's bookkeeping of
** writes, flushes and the reservation; may turn it into a failure (a Flush
** that cannot vouch for writes a new controller may have lost). */
static uint16_t note_success(dev_bqueue *q, tcpb_cmd *p, const char **pzWhy) {
  const csq_sqe *e = &p->sqe;
  if (e->nsid != CSQ_NSID_NVM || dev_sqe_is_admin(e)) return 0;
  switch (e->opcode) {
  case CSQ_NVM_WRITE:
    q->nWritesDone++;
    break;
  case CSQ_NVM_FLUSH:
    if (q->nMaybeLost > q->nFlushed) {
      q->nFlushed = q->nMaybeLost;
      *pzWhy = "the target was restarted (a new controller) before writes that had completed "
               "were flushed: they may be lost";
      return CSQ_SC_HOST_LINK;
    }
    if (p->wMark > q->nFlushed) q->nFlushed = p->wMark;
    break;
  case CSQ_NVM_RESV_ACQUIRE:
    q->bResv = 1;
    break;
  case CSQ_NVM_RESV_RELEASE:
    q->bResv = 0;
    break;
  }
  return 0;
}

/* Complete p with status sf: count it, remember a failure's detail. */
static void complete(dev_bqueue *q, tcpb_cmd *p, uint16_t sf, uint64_t result, const char *zWhy) {
  dev_io_acct acct = {p->nRx, p->nTx, 0, 0};
  if ((sf & 0x7FF) == 0 && !q->bSetup) sf = note_success(q, p, &zWhy);
  dev_stats_account(q->pStats, &p->sqe, sf, &acct);
  dev_stats_account(&q->d->stats, &p->sqe, sf, &acct);
  if ((sf & 0x7FF) && zWhy) dev_errlog_add(&q->errLog, p->driverCid, sf & 0x7FF, zWhy);
  push_ready(q, p->driverCid, sf, result);
  slot_free(q, p);
}

/* The parser's state (the buffers are emptied by tcpb_sock_close). */
static void rx_reset(dev_bqueue *q) {
  q->eRx = RX_CH;
  q->nGot = 0;
  q->pRxCmd = NULL;
}

void tcpb_fail_all(dev_bqueue *q) {
  for (uint32_t i = 0; i < q->nCmd; i++)
    if (q->aCmd[i].bLive) complete(q, &q->aCmd[i], CSQ_SC_HOST_LINK, 0, q->zDead);
  rx_reset(q);
}

/* The connection failed (bTargetFault: the target broke the protocol). While
** connecting, the attempt ends; with reconnection allowed and the target not
** at fault, the queue goes down; otherwise it dies. The first reason stays. */
void tcpb_link_fail(dev_bqueue *q, int bTargetFault, const char *zFmt, ...) {
  va_list ap;
  char z[200];
  if (q->bDead) return;
  va_start(ap, zFmt);
  vsnprintf(z, sizeof(z), zFmt, ap);
  va_end(ap);
  tcpb_sock_close(q);
  if (q->bSetup) {
    if (!q->bDown) snprintf(q->zDown, sizeof(q->zDown), "%s", z);
    q->bDown = 1;
    /* only the setup command can be on the wire */
    for (uint32_t i = 0; i < q->nCmd; i++)
      if (q->aCmd[i].bLive && q->aCmd[i].driverCid == TCPB_SYNC_CID)
        complete(q, &q->aCmd[i], CSQ_SC_HOST_LINK, 0, q->zDown);
    rx_reset(q);
    return;
  }
  if (!bTargetFault && q->qid != 0 && q->d->nReconnect > 0) {
    if (!q->bDown) snprintf(q->zDown, sizeof(q->zDown), "%s", z);
    q->bDown = 1;
    for (uint32_t i = 0; i < q->nCmd; i++) {
      tcpb_cmd *p = &q->aCmd[i];
      if (!p->bLive || !p->bSent) continue;
      if (!tcpb_resendable(&p->sqe)) {
        char zWhy[400];
        snprintf(zWhy, sizeof(zWhy),
                 "the NVMe/TCP link to %s (queue %u) dropped (%s) while the command was in "
                 "flight; link dropped, not sent again (it may or may not have run)",
                 q->d->zUrl, q->qid, q->zDown);
        complete(q, p, CSQ_SC_HOST_LINK, 0, zWhy);
        continue;
      }
      p->bSent = 0;
      p->nC2H = 0;
      p->bBadData = 0;
    }
    rx_reset(q);
    return;
  }
  snprintf(q->zDead, sizeof(q->zDead), "the NVMe/TCP link to %s (queue %u) is down: %s", q->d->zUrl,
           q->qid, z);
  q->bDead = 1;
  tcpb_fail_all(q);
}

/* ---- sending ------------------------------------------------------------ */

/* Queue one PDU (header h, nData bytes at pData) for sending. Bytes queued,
** or 0 when out of memory (the queue is then dead). */
static uint32_t tx_queue(dev_bqueue *q, const tcp_hdr *h, const void *pData, uint32_t nData) {
  uint32_t nAll = TCP_MAX_HDR + nData + TCP_DGST_LEN, nHdr;
  if (tcpb_tx_room(q, nAll)) {
    tcpb_link_fail(q, 1, "out of memory for the send buffer");
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

/* ---- submitting --------------------------------------------------------- */

/* Queue p's capsule (and in-capsule data) on the connection. */
static void send_cmd(dev_bqueue *q, tcpb_cmd *p) {
  tcp_hdr h;
  uint32_t nInline = 0;
  memset(&h, 0, sizeof(h));
  h.type = TCP_CAPSULE_CMD;
  csq_sqe *e = (csq_sqe *)h.aEntry;
  *e = p->sqe;
  e->cid = (uint16_t)(p - q->aCmd);
  if (p->dir == TCP_XFER_H2C && p->nLen <= TCP_INLINE_MAX) {
    tcp_sgl_set(e, TCP_SGL_INCAPSULE, 0, p->nLen);
    nInline = p->nLen;
  } else {
    tcp_sgl_set(e, TCP_SGL_TRANSPORT, 0, p->nLen);
  }
  if (p->sqe.nsid == CSQ_NSID_NVM && p->sqe.opcode == CSQ_NVM_FLUSH && !dev_sqe_is_admin(&p->sqe))
    p->wMark = q->nWritesDone;
  p->bSent = 1;
  p->nTx += tx_queue(q, &h, p->pBuf, nInline);
}

void tcpb_resend(dev_bqueue *q) {
  for (;;) {
    tcpb_cmd *pNext = NULL;
    for (uint32_t i = 0; i < q->nCmd; i++) {
      tcpb_cmd *p = &q->aCmd[i];
      if (p->bLive && !p->bSent && (!pNext || p->seq < pNext->seq)) pNext = p;
    }
    if (!pNext || q->bDown || q->bDead) break;
    send_cmd(q, pNext);
  }
  if (!q->bDown && !q->bDead) tcpb_tx_flush(q);
}

int tcpb_submit(dev_bqueue *q, const csq_sqe *pSqe) {
  tcpb_cmd *p;
  uint32_t nLen = 0;
  int dir;
  if (q->bDead) {
    dev_errlog_add(&q->errLog, pSqe->cid, CSQ_SC_HOST_LINK, q->zDead);
    push_ready(q, pSqe->cid, CSQ_SC_HOST_LINK, 0);
    return 0;
  }
  if (q->nFree == 0) return -EAGAIN;
  /* a new controller replaced the one this idle queue joined: move to it */
  if (q->qid && !q->bDown && !q->bSetup && q->nFree == q->nCmd &&
      q->gen != __atomic_load_n(&q->d->gen, __ATOMIC_ACQUIRE))
    tcpb_link_fail(q, 0, "the controller was replaced");
  dir = tcp_cmd_xfer(pSqe, q->qid == 0, &nLen);
  p = &q->aCmd[q->aFree[--q->nFree]];
  memset(p, 0, sizeof(*p));
  p->bLive = 1;
  p->driverCid = pSqe->cid;
  p->seq = q->nextSeq++;
  p->sqe = *pSqe;
  if (dir < 0) {
    complete(q, p, CSQ_SC_INVALID_FIELD | CSQ_DNR, 0,
             "the command's data is too long for NVMe/TCP");
    return 0;
  }
  p->dir = dir;
  p->nLen = nLen;
  p->pBuf = (uint8_t *)(uintptr_t)pSqe->prp1;
  if (q->bDown) return 0; /* sent after the reconnection */
  send_cmd(q, p);
  if (!q->bDead && !q->bDown) tcpb_tx_flush(q);
  return 0;
}

/* ---- receiving ---------------------------------------------------------- */

static tcpb_cmd *cmd_of(dev_bqueue *q, uint16_t wireCid) {
  return wireCid < q->nCmd && q->aCmd[wireCid].bLive && q->aCmd[wireCid].bSent ? &q->aCmd[wireCid]
                                                                               : NULL;
}

/* A whole header has arrived (and passed tcp_hdr_decode): act on it, and set
** up the reading of its data. 0, or -1 when the connection failed. */
static int on_header(dev_bqueue *q) {
  tcp_hdr *h = &q->h;
  tcpb_cmd *p;
  switch (h->type) {
  case TCP_CAPSULE_RSP: {
    csq_cqe c;
    memcpy(&c, h->aEntry, 16);
    p = cmd_of(q, c.cid);
    if (!p) {
      tcpb_link_fail(q, 1, "the target answered command %u, which is not in flight", c.cid);
      return -1;
    }
    q->nTries = 0; /* the link works */
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
      tcpb_link_fail(q, 1, "the target asked (R2T) for data that command %u does not have",
                     h->cccid);
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
    return tcpb_tx_flush(q);
  }
  case TCP_C2H_DATA:
    p = cmd_of(q, h->cccid);
    if (!p || p->dir != TCP_XFER_C2H || h->offset != p->nC2H ||
        (uint64_t)h->offset + h->length > p->nLen) {
      tcpb_link_fail(q, 1, "the target sent data outside command %u's buffer", h->cccid);
      return -1;
    }
    q->pRxCmd = p;
    p->nRx += q->L.plen;
    return 0;
  case TCP_C2H_TERMREQ:
    return 0; /* its data (the offending header) is read, then the link dies */
  default:
    tcpb_link_fail(q, 1, "the target sent a PDU of type %u out of sequence", h->type);
    return -1;
  }
}

/* The PDU is complete. */
static void on_pdu_end(dev_bqueue *q) {
  tcp_hdr *h = &q->h;
  if (h->type == TCP_C2H_TERMREQ) {
    tcpb_link_fail(q, 1, "the target ended the connection (C2HTermReq, fatal error status %u)",
                   h->fes);
    return;
  }
  if (h->type == TCP_C2H_DATA && q->pRxCmd) {
    tcpb_cmd *p = q->pRxCmd;
    if (q->L.nDdgst && csq_le32(q->aDd) != tcp_crc32c_final(q->crc)) p->bBadData = 1;
    p->nC2H += h->length;
    if (h->flags & TCP_F_SUCCESS) {
      /* no response capsule follows: this PDU completes the command */
      q->nTries = 0;
      if (p->nC2H == p->nLen && !p->bBadData)
        complete(q, p, 0, 0, NULL);
      else
        complete(q, p, CSQ_SC_DATA_XFER_ERROR, 0,
                 p->bBadData ? "the data that crossed the link failed its digest"
                             : "the target reported success before sending all the data");
    }
    q->pRxCmd = NULL;
  }
}

/* Where the rest of the current part goes, and how many bytes it lacks. */
static uint8_t *part_dst(dev_bqueue *q, uint32_t *pnWant) {
  switch (q->eRx) {
  case RX_CH:
    *pnWant = TCP_CH_LEN - q->nGot;
    return q->aHdr + q->nGot;
  case RX_HDR:
    *pnWant = q->L.nHdr - q->nGot;
    return q->aHdr + q->nGot;
  case RX_PAD:
    *pnWant = q->L.nPad - q->nGot;
    return q->aSmall;
  case RX_DATA:
    *pnWant = q->L.nData - q->nGot;
    return q->pRxCmd ? q->pRxCmd->pBuf + q->h.offset + q->nGot : q->aSmall + q->nGot;
  default:
    *pnWant = 4 - q->nGot;
    return q->aDd + q->nGot;
  }
}

/* Receiving a large C2HData's data straight into the command's buffer saves
** copying it out of aRx; below this many bytes, one receive into aRx that
** may also bring the next PDUs is cheaper. */
#define RX_DIRECT_MIN 16384

uint8_t *tcpb_rx_direct(dev_bqueue *q, uint32_t *pn) {
  if (q->eRx != RX_DATA || !q->pRxCmd || q->L.nData - q->nGot < RX_DIRECT_MIN) return NULL;
  return part_dst(q, pn);
}

int tcpb_rx_direct_done(dev_bqueue *q, uint32_t n) {
  uint32_t nWant;
  uint8_t *p = part_dst(q, &nWant);
  if (q->L.nDdgst) q->crc = tcp_crc32c_update(q->crc, p, n);
  q->nGot += n;
  return tcpb_rx_parse(q);
}

int tcpb_rx_parse(dev_bqueue *q) {
  for (;;) {
    uint32_t nWant;
    uint8_t *pDst = part_dst(q, &nWant);
    if (nWant) {
      uint32_t k = q->nRx - q->iRx < nWant ? q->nRx - q->iRx : nWant;
      if (k == 0) return 0;
      memcpy(pDst, q->aRx + q->iRx, k);
      if (q->eRx == RX_DATA && q->L.nDdgst) q->crc = tcp_crc32c_update(q->crc, pDst, k);
      q->iRx += k;
      q->nGot += k;
      if (k < nWant) return 0;
    }
    /* the part is complete: on to the next */
    q->nGot = 0;
    if (q->eRx == RX_CH) {
      const char *zWhy;
      int fes = tcp_ch_check(q->aHdr, TCP_ROLE_HOST, q->bHdgst, q->bDdgst, TCP_CMD_DATA_MAX, &q->L,
                             &zWhy);
      if (fes) {
        tcpb_link_fail(q, 1, "the target sent a malformed PDU: %s", zWhy);
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
        tcpb_link_fail(q, 1, "the target sent a malformed PDU: %s", zWhy);
        return -1;
      }
      if (q->h.type == TCP_ICRESP) {
        tcpb_link_fail(q, 1, "the target sent a second ICResp");
        return -1;
      }
      q->crc = TCP_CRC32C_INIT;
      q->pRxCmd = NULL;
      if (on_header(q) || q->bDead || q->bDown) return -1;
      q->eRx = RX_PAD;
    } else if (q->eRx == RX_PAD) {
      q->eRx = RX_DATA;
    } else if (q->eRx == RX_DATA) {
      q->eRx = RX_DDGST;
    } else {
      q->eRx = RX_CH;
      on_pdu_end(q);
      if (q->bDead || q->bDown) return -1;
      continue;
    }
    /* skip parts this PDU does not have */
    if (q->eRx == RX_PAD && q->L.nPad == 0) q->eRx = RX_DATA;
    if (q->eRx == RX_DATA && q->L.nData == 0) q->eRx = RX_DDGST;
    if (q->eRx == RX_DATA && q->L.nData > TCP_TERM_MAX && !q->pRxCmd) {
      tcpb_link_fail(q, 1, "the target sent data with no command to hold it");
      return -1;
    }
    if (q->eRx == RX_DDGST && q->L.nDdgst == 0) {
      q->eRx = RX_CH;
      on_pdu_end(q);
      if (q->bDead || q->bDown) return -1;
    }
  }
}

int tcpb_reap(dev_bqueue *q, csq_cqe *pCqe, int64_t timeoutNs) {
  int64_t tEnd = tcpb_now() + (timeoutNs > 0 ? timeoutNs : 0);
  for (;;) {
    if (q->nReady) {
      tcpb_sock_park(q);
      *pCqe = q->aReady[0];
      memmove(q->aReady, q->aReady + 1, (q->nReady - 1) * sizeof(csq_cqe));
      q->nReady--;
      return 0;
    }
    if (q->bDown && !q->bDead) {
      if (q->nFree < q->nCmd) tcpb_recover(q);      /* reconnects, or kills the queue */
      if (q->bDown && !q->bDead) return -ETIMEDOUT; /* nothing to wait for */
      continue;
    }
    if (q->bDead) {
      /* nothing more will come: wait as asked, so a caller's loop does not spin */
      if (timeoutNs > 0) {
        struct timespec t = {(time_t)(timeoutNs / 1000000000), (long)(timeoutNs % 1000000000)};
        nanosleep(&t, NULL);
      }
      return -ETIMEDOUT;
    }
    int64_t left = tEnd - tcpb_now();
    if (left < 0) left = 0;
    tcpb_sock_wait(q, left);
    if (left == 0 && !q->nReady) {
      tcpb_sock_park(q);
      return -ETIMEDOUT;
    }
  }
}

/* ---- synchronous commands and connecting -------------------------------- */

int tcpb_sync_cmd(dev_bqueue *q, csq_sqe *e, int64_t tEnd, csq_cqe *pCqe, char **pzErr,
                  const char *zWhat) {
  e->cid = TCPB_SYNC_CID;
  memset(pCqe, 0, sizeof(*pCqe));
  if (q->bDead || q->bDown || q->fd < 0) {
    *pzErr = dev_mprintf("%s: %s", zWhat, q->bDead ? q->zDead : q->zDown);
    return -ECONNRESET;
  }
  if (q->nFree == 0) {
    *pzErr = dev_mprintf("%s: no free slot", zWhat);
    return -EAGAIN;
  }
  tcpb_submit(q, e);
  for (;;) {
    for (uint32_t i = 0; i < q->nReady; i++) {
      if (q->aReady[i].cid != TCPB_SYNC_CID) continue;
      tcpb_sock_park(q);
      *pCqe = q->aReady[i];
      memmove(q->aReady + i, q->aReady + i + 1, (q->nReady - i - 1) * sizeof(csq_cqe));
      q->nReady--;
      uint16_t sf = csq_cqe_sf(pCqe) & 0x7FF;
      if (sf == CSQ_SC_HOST_LINK) {
        *pzErr = dev_mprintf("%s: %s", zWhat, q->bDead ? q->zDead : q->zDown);
        return -ECONNRESET;
      }
      if (sf) {
        *pzErr = dev_mprintf(
            "%s failed: %s (status 0x%03x)%s", zWhat, csq_status_name(sf), sf,
            sf == CSQ_STATUS(1, 0x82) ? ": no such subsystem or queue at the target" : "");
        return -ECONNREFUSED;
      }
      return 0;
    }
    int64_t left = tEnd - tcpb_now();
    if (left <= 0 || q->fd < 0) {
      *pzErr = dev_mprintf("%s: %s", zWhat,
                           q->bDead    ? q->zDead
                           : q->fd < 0 ? q->zDown
                                       : "no answer in time");
      /* a late answer must not meet the next setup command in its slot */
      if (q->fd >= 0) tcpb_link_fail(q, 1, "%s: no answer in time", zWhat);
      return -ETIMEDOUT;
    }
    tcpb_sock_wait(q, left);
  }
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
    *pzErr = dev_mprintf("cannot resolve %s: %s", d->zHost, gai_strerror(rc));
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
    int64_t left = (tEnd - tcpb_now()) / 1000000;
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
  *pzErr = dev_mprintf("cannot connect to %s:%s: %s (is csq-target running?)", d->zHost, d->zPort,
                       strerror(-rc));
  if (fd >= 0) close(fd);
  freeaddrinfo(pRes);
  return rc;
}

/* Read the ICResp, whole, before any other PDU. 0 or -EPROTO with *pzErr. */
static int read_icresp(dev_bqueue *q, int64_t tEnd, char **pzErr) {
  uint8_t aIc[TCP_HLEN_IC];
  uint32_t fei;
  const char *zWhy = "";
  tcp_layout L;
  tcp_hdr h;
  q->bIcResp = 1;
  while (q->fd >= 0 && q->nRx - q->iRx < TCP_HLEN_IC) {
    if (q->nRx - q->iRx >= TCP_CH_LEN &&
        tcp_ch_check(q->aRx + q->iRx, TCP_ROLE_HOST, 0, 0, 0, &L, &zWhy) != 0)
      break;
    int64_t left = tEnd - tcpb_now();
    if (left <= 0) break;
    tcpb_sock_wait(q, left);
  }
  q->bIcResp = 0;
  int bShort = q->fd < 0 || q->nRx - q->iRx < TCP_HLEN_IC;
  if (!bShort) {
    memcpy(aIc, q->aRx + q->iRx, TCP_HLEN_IC);
    q->iRx += TCP_HLEN_IC;
  }
  if (bShort || tcp_ch_check(aIc, TCP_ROLE_HOST, 0, 0, 0, &L, &zWhy) || L.type != TCP_ICRESP ||
      tcp_hdr_decode(aIc, &L, &h, &fei, &zWhy)) {
    *pzErr = dev_mprintf("no valid ICResp from %s:%s (%s)", q->d->zHost, q->d->zPort,
                         q->fd < 0 ? q->zDown
                         : zWhy[0] ? zWhy
                                   : "timed out");
    return -EPROTO;
  }
  if (h.dgst & ~((q->d->bHdgst ? 1 : 0) | (q->d->bDdgst ? 2 : 0))) {
    *pzErr = dev_mprintf("the ICResp of %s:%s turns on a digest the host did not ask for",
                         q->d->zHost, q->d->zPort);
    return -EPROTO;
  }
  q->bHdgst = h.dgst & 1;
  q->bDdgst = (h.dgst >> 1) & 1;
  if (h.maxVal < 4096) {
    *pzErr = dev_mprintf("the ICResp of %s:%s offers MAXH2CDATA %u (the least is 4096)",
                         q->d->zHost, q->d->zPort, h.maxVal);
    return -EPROTO;
  }
  q->maxH2C = h.maxVal;
  /* what came after it is parsed now, with the digests known */
  if (q->iRx < q->nRx) tcpb_rx_parse(q);
  return 0;
}

int tcpb_queue_link(dev_bqueue *q, uint16_t cntlid, int64_t tEnd, char **pzErr, uint16_t *pSf) {
  dev_backend *d = q->d;
  uint8_t *aConn = NULL;
  tcp_hdr h;
  csq_cqe c;
  csq_sqe e;
  int rc;
  *pSf = 0;
  *pzErr = NULL;
  tcpb_sock_close(q);
  q->bSetup = 1;
  q->bDown = 0;
  q->zDown[0] = 0;
  rx_reset(q);
  q->bHdgst = q->bDdgst = 0; /* ICReq and ICResp carry no digests */
  q->fd = tcp_dial(d, tEnd, pzErr);
  if (q->fd < 0) {
    rc = q->fd;
    q->fd = -1;
    goto fail;
  }
  memset(&h, 0, sizeof(h));
  h.type = TCP_ICREQ;
  h.dgst = (uint8_t)((d->bHdgst ? 1 : 0) | (d->bDdgst ? 2 : 0));
  tx_queue(q, &h, NULL, 0);
  tcpb_tx_flush(q);
  rc = read_icresp(q, tEnd, pzErr);
  if (rc) goto fail;
  /* Fabrics Connect */
  aConn = aligned_alloc(4096, 4096);
  if (!aConn) {
    rc = -ENOMEM;
    goto fail;
  }
  memset(aConn, 0, TCP_CONNECT_DATA);
  memcpy(aConn, d->aHostId, 16);
  csq_put_le16(aConn + 16, cntlid);
  snprintf((char *)aConn + 256, 256, "%s", d->zNqn);
  snprintf((char *)aConn + 512, 256, "%s", d->zHostNqn);
  memset(&e, 0, sizeof(e));
  e.opcode = TCP_OPC_FABRICS;
  e.nsid = TCP_FCTYPE_CONN;
  e.prp1 = (uint64_t)(uintptr_t)aConn;
  uint8_t *b = (uint8_t *)&e;
  csq_put_le16(b + 42, q->qid);
  csq_put_le16(b + 44, (uint16_t)(q->nCmd - 1));  /* SQSIZE, 0-based: one spare */
  if (q->qid == 0) e.cdw12 = (uint32_t)d->katoMs; /* KATO */
  rc = tcpb_sync_cmd(q, &e, tEnd, &c, pzErr, "Fabrics Connect");
  free(aConn);
  if (rc) {
    if (rc == -ECONNREFUSED) *pSf = csq_cqe_sf(&c) & 0x7FFF;
    goto fail;
  }
  if (q->qid == 0) q->cntlid = (uint16_t)c.dw0;
  q->bSetup = 0;
  return 0;
fail:
  if (!*pzErr) *pzErr = dev_mprintf("%s", strerror(-rc));
  tcpb_sock_close(q);
  q->bDown = 1;
  q->bSetup = 0;
  rx_reset(q);
  return rc;
}

void tcpb_queue_unlink(dev_bqueue *q) {
  tcpb_sock_close(q);
  q->bDown = 1;
  rx_reset(q);
}

int tcpb_queue_alloc(dev_backend *d, uint16_t qid, uint32_t nDepth, dev_stats *pStats,
                     dev_bqueue **ppQ) {
  dev_bqueue *q = calloc(1, sizeof(*q));
  *ppQ = NULL;
  if (!q) return -ENOMEM;
  q->fd = -1;
  q->d = d;
  q->qid = qid;
  q->pStats = pStats;
  q->bDown = 1; /* until linked */
  dev_errlog_init(&q->errLog);
  /* one more slot than the driver uses, for setup commands */
  q->nCmd = nDepth + 1;
  q->aCmd = calloc(q->nCmd, sizeof(tcpb_cmd));
  q->aFree = calloc(q->nCmd, sizeof(uint16_t));
  if (!q->aCmd || !q->aFree || tcpb_sock_init(q)) {
    tcpb_queue_free(q);
    return -ENOMEM;
  }
  for (uint32_t i = 0; i < q->nCmd; i++) q->aFree[i] = (uint16_t)(q->nCmd - 1 - i);
  q->nFree = q->nCmd;
  *ppQ = q;
  return 0;
}

void tcpb_queue_free(dev_bqueue *q) {
  if (!q) return;
  tcpb_sock_fini(q); /* closes the socket */
  free(q->aCmd);
  free(q->aFree);
  free(q->aReady);
  dev_errlog_free(&q->errLog);
  free(q);
}
