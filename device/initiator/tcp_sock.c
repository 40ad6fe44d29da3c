/*
** device/initiator/tcp_sock.c - the bytes of one NVMe/TCP queue's socket
** (tcp_int.h): sending the PDUs tcp_queue.c queued, receiving into a buffer
** it parses, waiting with a timeout.
**
** Each queue has its own io_uring (created once, kept across reconnections):
** at most one IORING_OP_SEND and one IORING_OP_RECV in flight, waits in
** io_uring_submit_and_wait_timeout. A send owns the buffer it sends from
** (aFly); PDUs queued meanwhile go to aTx, and the two swap when the send
** is done, so no buffer moves under the kernel. Receives land in aRx, or,
** for the bulk of a large C2HData, straight in the command's buffer; such a
** receive is cancelled before the queue returns to the driver (which may
** give up on the command and free its buffer), and when the connection ends
** every operation in flight is cancelled and its completion awaited first.
**
** Where io_uring cannot be set up (an old kernel, a seccomp filter,
** kernel.io_uring_disabled) or CSQ_TCP_URING=0 is in the environment, the
** queue uses non-blocking send/recv and ppoll instead, with the same buffers
** and the same behaviour.
*/
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "device/initiator/tcp_int.h"

#define RING_DEPTH 8
#define RX_BUF     65536 /* bytes of aRx */
#define UD_SEND    1
#define UD_RECV    2
#define UD_CANCEL  3

int tcpb_sock_init(dev_bqueue *q) {
  const char *z = getenv("CSQ_TCP_URING");
  struct io_uring_probe *pProbe;
  struct io_uring *r;
  q->aRx = malloc(RX_BUF);
  if (!q->aRx) return -ENOMEM;
  if (z && z[0] == '0') return 0;
  r = calloc(1, sizeof(*r));
  if (!r) return -ENOMEM;
  if (io_uring_queue_init(RING_DEPTH, r, 0) < 0) {
    free(r); /* no io_uring here: send/recv */
    return 0;
  }
  pProbe = io_uring_get_probe_ring(r);
  if (!pProbe || !io_uring_opcode_supported(pProbe, IORING_OP_SEND) ||
      !io_uring_opcode_supported(pProbe, IORING_OP_RECV) ||
      !io_uring_opcode_supported(pProbe, IORING_OP_ASYNC_CANCEL)) {
    io_uring_queue_exit(r);
    free(r);
  } else {
    q->pRing = r;
  }
  if (pProbe) io_uring_free_probe(pProbe);
  return 0;
}

void tcpb_sock_fini(dev_bqueue *q) {
  tcpb_sock_close(q);
  if (q->pRing) {
    io_uring_queue_exit(q->pRing);
    free(q->pRing);
    q->pRing = NULL;
  }
  free(q->aTx);
  free(q->aFly);
  free(q->aRx);
  q->aTx = q->aFly = q->aRx = NULL;
}

int tcpb_tx_room(dev_bqueue *q, size_t n) {
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

/* Where the next receive goes: a command's buffer or the free end of aRx. */
static uint8_t *rx_dest(dev_bqueue *q, uint32_t *pn, int *pbDirect) {
  uint8_t *p = NULL;
  *pbDirect = 0;
  if (q->iRx == q->nRx) q->iRx = q->nRx = 0;
  if (!q->bIcResp && q->iRx == q->nRx) p = tcpb_rx_direct(q, pn);
  if (p) {
    *pbDirect = 1;
    return p;
  }
  if (q->iRx && !q->bIcResp) {
    memmove(q->aRx, q->aRx + q->iRx, q->nRx - q->iRx);
    q->nRx -= q->iRx;
    q->iRx = 0;
  }
  *pn = RX_BUF - q->nRx;
  return q->aRx + q->nRx;
}

/* n bytes were received at rx_dest's address: parse them. 0 or -1. */
static int rx_arrived(dev_bqueue *q, uint32_t n, int bDirect) {
  if (bDirect) return tcpb_rx_direct_done(q, n);
  q->nRx += n;
  if (q->bIcResp) return 0;
  return tcpb_rx_parse(q);
}

/* ---- without io_uring: non-blocking send/recv, ppoll -------------------- */

static int plain_flush(dev_bqueue *q) {
  while (q->iTx < q->nTx) {
    ssize_t k = send(q->fd, q->aTx + q->iTx, q->nTx - q->iTx, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (k <= 0) {
      tcpb_link_fail(q, 0, "sending failed: %s", k < 0 ? strerror(errno) : "connection closed");
      return -1;
    }
    q->iTx += (size_t)k;
  }
  return 0;
}

static void plain_recv(dev_bqueue *q) {
  while (q->fd >= 0) {
    uint32_t n;
    int bDirect;
    uint8_t *p = rx_dest(q, &n, &bDirect);
    if (n == 0) return; /* ICResp: the header is in */
    ssize_t k = recv(q->fd, p, n, MSG_DONTWAIT);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (k <= 0) {
      tcpb_link_fail(q, 0, "%s", k == 0 ? "the target closed the connection" : strerror(errno));
      return;
    }
    if (rx_arrived(q, (uint32_t)k, bDirect) || q->bDead || q->bDown) return;
  }
}

static void plain_wait(dev_bqueue *q, int64_t timeoutNs) {
  struct timespec ts = {(time_t)(timeoutNs / 1000000000), (long)(timeoutNs % 1000000000)};
  struct pollfd pf = {q->fd, (short)(POLLIN | (q->iTx < q->nTx ? POLLOUT : 0)), 0};
  int n = ppoll(&pf, 1, &ts, NULL);
  if (n < 0 && errno != EINTR) {
    tcpb_link_fail(q, 0, "poll: %s", strerror(errno));
    return;
  }
  if (n > 0) {
    if ((pf.revents & POLLOUT) && plain_flush(q)) return;
    if (pf.revents & (POLLIN | POLLHUP | POLLERR)) plain_recv(q);
  }
}

/* ---- io_uring ----------------------------------------------------------- */

static struct io_uring_sqe *ring_sqe(dev_bqueue *q) {
  struct io_uring_sqe *e = io_uring_get_sqe(q->pRing);
  if (!e) {
    io_uring_submit(q->pRing); /* cannot stay full: at most 4 entries */
    e = io_uring_get_sqe(q->pRing);
  }
  return e;
}

/* Post a send of what is queued, unless one is in flight. */
static void ring_post_send(dev_bqueue *q) {
  struct io_uring_sqe *e;
  if (q->fd < 0 || q->bSendFly) return;
  if (q->iFly == q->nFly) {
    if (q->nTx == 0) return;
    /* the queued bytes become the buffer in flight */
    uint8_t *a = q->aFly;
    size_t nAlloc = q->nFlyAlloc;
    q->aFly = q->aTx;
    q->nFlyAlloc = q->nTxAlloc;
    q->iFly = 0;
    q->nFly = q->nTx;
    q->aTx = a;
    q->nTxAlloc = nAlloc;
    q->iTx = q->nTx = 0;
  }
  e = ring_sqe(q);
  if (!e) return;
  io_uring_prep_send(e, q->fd, q->aFly + q->iFly, q->nFly - q->iFly, MSG_NOSIGNAL);
  io_uring_sqe_set_data64(e, UD_SEND);
  q->bSendFly = 1;
}

static void ring_post_recv(dev_bqueue *q) {
  struct io_uring_sqe *e;
  uint32_t n;
  int bDirect;
  uint8_t *p;
  if (q->fd < 0 || q->bRecvFly) return;
  p = rx_dest(q, &n, &bDirect);
  if (n == 0) return;
  e = ring_sqe(q);
  if (!e) return;
  io_uring_prep_recv(e, q->fd, p, n, 0);
  io_uring_sqe_set_data64(e, UD_RECV);
  q->bRecvFly = 1;
  q->bRecvDirect = bDirect;
}

/* One completion; bDrop: the connection is ending, results are dropped. */
static void ring_done(dev_bqueue *q, uint64_t ud, int res, int bDrop) {
  if (ud == UD_SEND) {
    q->bSendFly = 0;
    if (bDrop) return;
    if (res > 0) {
      q->iFly += (size_t)res;
      if (q->iFly == q->nFly) q->iFly = q->nFly = 0;
    } else if (res != -EINTR && res != -EAGAIN && res != -ECANCELED) {
      tcpb_link_fail(q, 0, "sending failed: %s", res < 0 ? strerror(-res) : "connection closed");
    }
  } else if (ud == UD_RECV) {
    int bDirect = q->bRecvDirect;
    q->bRecvFly = q->bRecvDirect = 0;
    if (bDrop) return;
    if (res > 0) {
      rx_arrived(q, (uint32_t)res, bDirect);
    } else if (res != -EINTR && res != -EAGAIN && res != -ECANCELED) {
      tcpb_link_fail(q, 0, "%s", res == 0 ? "the target closed the connection" : strerror(-res));
    }
  }
}

/* Handle the completions there are, without waiting. How many were ours. */
static int ring_reap(dev_bqueue *q, int bDrop) {
  struct io_uring_cqe *c;
  int n = 0;
  while (io_uring_peek_cqe(q->pRing, &c) == 0) {
    uint64_t ud = io_uring_cqe_get_data64(c);
    int res = c->res;
    io_uring_cqe_seen(q->pRing, c);
    if (ud != UD_CANCEL) n++;
    ring_done(q, ud, res, bDrop);
  }
  return n;
}

/* Cancel what is in flight (bRecvOnly: the receive, if it writes into a
** command's buffer) and wait for its completion. Bytes that arrived before
** the cancellation are parsed unless bDrop. */
static void ring_cancel(dev_bqueue *q, int bRecvOnly, int bDrop) {
  int bSent = 0;
  for (;;) {
    int bSend = !bRecvOnly && q->bSendFly;
    int bRecv = q->bRecvFly && (!bRecvOnly || q->bRecvDirect);
    if (!bSend && !bRecv) return;
    if (!bSent) {
      for (int i = 0; i < 2; i++) {
        if (!(i ? bRecv : bSend)) continue;
        struct io_uring_sqe *e = ring_sqe(q);
        if (!e) continue;
        io_uring_prep_cancel64(e, i ? UD_RECV : UD_SEND, 0);
        io_uring_sqe_set_data64(e, UD_CANCEL);
      }
      bSent = 1;
    }
    struct io_uring_cqe *c;
    if (io_uring_submit_and_wait(q->pRing, 1) < 0 && io_uring_peek_cqe(q->pRing, &c)) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    ring_reap(q, bDrop);
  }
}

static void ring_wait(dev_bqueue *q, int64_t timeoutNs) {
  struct __kernel_timespec ts = {timeoutNs / 1000000000, timeoutNs % 1000000000};
  struct io_uring_cqe *c;
  if (ring_reap(q, 0) > 0) return;
  if (q->fd < 0) return;
  ring_post_send(q);
  ring_post_recv(q);
  int rc = io_uring_submit_and_wait_timeout(q->pRing, &c, 1, &ts, NULL);
  if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
    tcpb_link_fail(q, 0, "io_uring: %s", strerror(-rc));
    return;
  }
  ring_reap(q, 0);
}

/* ---- either ------------------------------------------------------------- */

int tcpb_tx_flush(dev_bqueue *q) {
  if (q->fd < 0) return -1;
  if (!q->pRing) return plain_flush(q);
  ring_post_send(q);
  io_uring_submit(q->pRing);
  return 0;
}

void tcpb_sock_wait(dev_bqueue *q, int64_t timeoutNs) {
  if (q->fd < 0) return;
  if (q->pRing)
    ring_wait(q, timeoutNs);
  else
    plain_wait(q, timeoutNs);
}

void tcpb_sock_park(dev_bqueue *q) {
  if (q->pRing && q->bRecvDirect) ring_cancel(q, 1, 0);
}

void tcpb_sock_close(dev_bqueue *q) {
  if (q->fd >= 0) {
    /* wakes what waits on the socket; then cancel the rest */
    shutdown(q->fd, SHUT_RDWR);
    if (q->pRing) ring_cancel(q, 0, 1);
    close(q->fd);
    q->fd = -1;
  }
  q->iTx = q->nTx = 0;
  q->iFly = q->nFly = 0;
  q->iRx = q->nRx = 0;
  q->bIcResp = 0;
}
