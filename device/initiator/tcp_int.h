/*
** device/initiator/tcp_int.h - what the files of the NVMe/TCP initiator
** share: the backend and queue structs and the functions between them.
**   tcp_queue.c    one queue's connection: submit, PDUs in and out, reap,
**                  dial + ICReq + Fabrics Connect, synchronous commands
**   tcp_sock.c     the bytes of a queue's socket: io_uring (or send/recv and
**                  ppoll where io_uring is unavailable), buffers, waits
**   tcp_recover.c  a dropped queue reconnects and re-sends what is safe to
**                  re-send; the controller is created and kept alive
**   tcp_backend.c  the backend (backend.h): URL and options, open, close
** Not a public header: only device/initiator/ includes it.
*/
#ifndef CSQ_DEVICE_INITIATOR_TCP_INT_H
#define CSQ_DEVICE_INITIATOR_TCP_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "device/link/backend.h"
#include "device/link/errlog.h"
#include "device/tcp/pdu.h"

#define TCPB_SETUP_MS 10000  /* connect, ICReq, Connect, CC.EN at most this long */
#define TCPB_SYNC_CID 0xFFF0 /* driver cid of the queue's own setup commands */

/* Reconnection: the first attempt after TCPB_BACKOFF_MS, doubling up to
** TCPB_BACKOFF_MAX_MS. */
#define TCPB_BACKOFF_MS     100
#define TCPB_BACKOFF_MAX_MS 2000

/* One command of a queue, in the slot whose index is its wire cid. */
typedef struct tcpb_cmd {
  int bLive;
  int bSent; /* its capsule was handed to the current connection */
  uint16_t driverCid;
  uint64_t seq; /* submission order: re-sent in this order */
  csq_sqe sqe;  /* as the driver sent it */
  int dir;
  uint32_t nLen;
  uint8_t *pBuf;     /* the driver's buffer */
  uint32_t nC2H;     /* C2HData bytes received, in order */
  int bBadData;      /* a data digest did not match */
  uint64_t wMark;    /* a Flush: the queue's nWritesDone when it was submitted */
  uint64_t nTx, nRx; /* bytes of its PDUs each way */
} tcpb_cmd;

struct dev_backend {
  char *zUrl;
  char zHost[256], zPort[16], zNqn[TCP_TERM_MAX * 2];
  char zHostNqn[128];
  uint8_t aHostId[16];
  int timeoutMs;
  int nReconnect;     /* attempts after a dropped connection; 0 = none */
  int katoMs;         /* Keep Alive timeout; 0 = no keep alive */
  int bHdgst, bDdgst; /* digests to ask for in ICReq */
  pthread_mutex_t mu; /* everything below but the stats */
  dev_bqueue *pAdmin; /* NULL while no controller */
  uint16_t cntlid;
  uint32_t gen; /* bumped at each new controller (atomic reads) */
  uint64_t aQidUsed;
  pthread_t ka; /* the Keep Alive thread, when katoMs > 0 */
  int bKa, bKaStop;
  pthread_cond_t kaCond;
  dev_stats stats;
  dev_stats adminStats;
};

struct dev_bqueue {
  dev_backend *d;
  dev_stats *pStats;
  int fd;
  uint16_t qid;
  uint16_t cntlid; /* the controller this queue joined ... */
  uint32_t gen;    /* ... and its generation */
  int bHdgst, bDdgst;
  uint32_t maxH2C;
  int bSetup; /* connecting: a drop ends the attempt, nothing is re-sent */
  int bDown;  /* the connection dropped: reconnect before more I/O */
  int bDead;  /* for good: every command fails with zDead */
  int nTries; /* reconnection attempts since the last response */
  char zDown[200];
  char zDead[480];
  uint64_t nextSeq;
  int bResv; /* this queue holds the namespace's reservation */
  /* writes completed, those a Flush covered, those a new controller may
  ** have lost from its volatile cache: a Flush fails once for them */
  uint64_t nWritesDone, nFlushed, nMaybeLost;
  /* slots */
  tcpb_cmd *aCmd;
  uint32_t nCmd, nFree;
  uint16_t *aFree;
  /* completions made here (failures, setup), handed out before the socket's */
  csq_cqe *aReady;
  uint32_t nReady, nReadyAlloc;
  /* send buffer: PDUs are queued at aTx[nTx]; aTx[iTx..nTx) still to send
  ** (with io_uring iTx stays 0: the buffer in flight is aFly[iFly..nFly)) */
  uint8_t *aTx;
  size_t iTx, nTx, nTxAlloc;
  uint8_t *aFly;
  size_t iFly, nFly, nFlyAlloc;
  /* bytes received and not yet parsed: aRx[iRx..nRx) */
  uint8_t *aRx;
  uint32_t iRx, nRx;
  int bIcResp; /* waiting for ICResp: received bytes stay in aRx */
  /* the queue's io_uring (tcp_sock.c); NULL: send/recv and ppoll */
  struct io_uring *pRing;
  int bSendFly, bRecvFly; /* a send, a receive in flight */
  int bRecvDirect;        /* the receive writes into a command's buffer */
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

/* tcp_queue.c ------------------------------------------------------------ */
int64_t tcpb_now(void);
/* A queue of nDepth slots (one more for setup commands), not connected. */
int tcpb_queue_alloc(dev_backend *d, uint16_t qid, uint32_t nDepth, dev_stats *pStats,
                     dev_bqueue **ppQ);
void tcpb_queue_free(dev_bqueue *q);
/* Dial, ICReq/ICResp, Fabrics Connect to controller cntlid (0xFFFF: a new
** one, qid 0) by tEnd. 0, or -errno with *pzErr (malloc'd) and, when the
** target answered Connect with an error, its status field in *pSf. On
** failure the socket is closed and the queue stays down. For qid 0, the
** controller id the target gave is in q->cntlid. */
int tcpb_queue_link(dev_bqueue *q, uint16_t cntlid, int64_t tEnd, char **pzErr, uint16_t *pSf);
/* Close q's connection; the queue is down (nothing is failed or re-sent). */
void tcpb_queue_unlink(dev_bqueue *q);
/* Run one command on q and wait for it until tEnd (the queue's own slot; the
** commands of the driver stay as they are). 0, -errno, or with *pCqe set and
** *pzErr naming zWhat. */
int tcpb_sync_cmd(dev_bqueue *q, csq_sqe *e, int64_t tEnd, csq_cqe *pCqe, char **pzErr,
                  const char *zWhat);
/* Send every live command not yet sent, in submission order. */
void tcpb_resend(dev_bqueue *q);
/* The queue is down for good: fail every live command with zDead. */
void tcpb_fail_all(dev_bqueue *q);
int tcpb_submit(dev_bqueue *q, const csq_sqe *pSqe);
int tcpb_reap(dev_bqueue *q, csq_cqe *pCqe, int64_t timeoutNs);

/* Called by tcp_sock.c (tcp_queue.c): parse the bytes in aRx; 0, or -1 when
** the connection failed. */
int tcpb_rx_parse(dev_bqueue *q);
/* Where the data of the PDU being read may be received straight into (a
** command's buffer), and how much; NULL when not worth it or not allowed. */
uint8_t *tcpb_rx_direct(dev_bqueue *q, uint32_t *pn);
/* n bytes arrived at tcpb_rx_direct's address: 0, or -1 as tcpb_rx_parse. */
int tcpb_rx_direct_done(dev_bqueue *q, uint32_t n);
/* The connection failed (bTargetFault: the target broke the protocol). */
void tcpb_link_fail(dev_bqueue *q, int bTargetFault, const char *zFmt, ...)
    __attribute__((format(printf, 3, 4)));

/* tcp_sock.c ------------------------------------------------------------- */
/* The queue's io_uring, unless io_uring is unavailable or CSQ_TCP_URING=0
** (then send/recv and ppoll). 0 or -ENOMEM. */
int tcpb_sock_init(dev_bqueue *q);
void tcpb_sock_fini(dev_bqueue *q);
/* Make room for n more bytes at aTx + nTx. 0 or -ENOMEM. */
int tcpb_tx_room(dev_bqueue *q, size_t n);
/* Start sending what is queued (without waiting). 0, or -1 when the
** connection failed. */
int tcpb_tx_flush(dev_bqueue *q);
/* Wait up to timeoutNs for the socket, then move what it allows (received
** bytes go to tcpb_rx_parse, unless bIcResp). */
void tcpb_sock_wait(dev_bqueue *q, int64_t timeoutNs);
/* Before returning to the driver: no receive in flight into its buffers. */
void tcpb_sock_park(dev_bqueue *q);
/* End the connection: nothing in flight, the socket closed, the buffers
** empty. */
void tcpb_sock_close(dev_bqueue *q);

/* tcp_recover.c ---------------------------------------------------------- */
/* 1 if a command may be sent again after a dropped connection: running it
** twice leaves the device as running it once (reads, writes, flush, the
** reservation, Identify). */
int tcpb_resendable(const csq_sqe *p);
/* Reconnect the dropped queue q (backoff, up to d->nReconnect attempts),
** then re-send its commands: 0, or -1 with q dead. */
int tcpb_recover(dev_bqueue *q);
/* Create a controller: the admin queue, CC.EN, CSTS.RDY. d->mu held. */
int tcpb_ctrl_create(dev_backend *d, int64_t tEnd, char **pzErr);
/* Start / stop the Keep Alive thread (d->katoMs > 0). 0 or -errno. */
int tcpb_keepalive_start(dev_backend *d);
void tcpb_keepalive_stop(dev_backend *d);

#endif /* CSQ_DEVICE_INITIATOR_TCP_INT_H */
