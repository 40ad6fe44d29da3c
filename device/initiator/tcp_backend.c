/*
** device/initiator/tcp_backend.c - the "tcp" backend (dev_tcp_backend,
** backend.h): a csq device across an NVMe/TCP link, opened as
**
**   nvme-tcp://HOST:PORT/NQN[?OPTION=VALUE&...]
**   e.g. nvme-tcp://127.0.0.1:4420/nqn.2026-12.io.csq:x.csd?reconnect=3
**
** Options (tcp_recover.c): reconnect=N attempts after a dropped connection
** (default 6, 0 = none); kato=MS, the Keep Alive timeout (default 10000, 0 =
** none). digest=1 asks the target for CRC32C header and data digests,
** hdgst=1 / ddgst=1 for one of them (default none: TCP's own checksum
** covers loopback and most links; a digest also covers what the NICs and
** the kernels in between do). A PDU whose header digest does not match ends
** the connection; data whose digest does not match fails its command with
** Data Transfer Error (tcp_queue.c).
**
** xOpen creates the controller (tcp_recover.c: the admin queue, Fabrics
** Connect qid 0, Property Set CC.EN, wait for CSTS.RDY); Identify goes over
** it. Each xQueueOpen is one more TCP connection, an I/O queue (Connect qid
** 1, 2, ...) of the same controller, and carries every command of that queue,
** csq's admin opcodes included (csq-target accepts them on I/O queues,
** target.h); tcp_queue.c moves its PDUs.
**
** Counters: bytes_to_host and bytes_from_host count the bytes of each
** command's PDUs that crossed the socket (headers, data, digests) in each
** direction; the device's media counters are not visible from here.
*/
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/initiator/tcp_int.h"
#include "device/link/msg.h"

#define TCPB_PREFIX      "nvme-tcp://"
#define TCPB_HOSTNQN_PFX "nqn.2014-08.org.nvmexpress:uuid:"
#define TCPB_RECONNECT   6     /* default reconnection attempts */
#define TCPB_KATO_MS     10000 /* default Keep Alive timeout */

/* One "NAME=VALUE" option of the URL. 0 or -EINVAL with *pzErr. */
static int parse_option(dev_backend *d, const char *z, size_t n, char **pzErr) {
  static const struct {
    const char *zName;
    int iMax;
  } aOpt[] = {{"reconnect", 1000}, {"kato", 3600000}, {"digest", 1}, {"hdgst", 1}, {"ddgst", 1}};
  const char *zEq = memchr(z, '=', n);
  for (size_t i = 0; zEq && i < sizeof(aOpt) / sizeof(aOpt[0]); i++) {
    if ((size_t)(zEq - z) != strlen(aOpt[i].zName) || memcmp(z, aOpt[i].zName, (size_t)(zEq - z)))
      continue;
    char zVal[16], *zEnd;
    size_t nVal = n - (size_t)(zEq - z) - 1;
    if (nVal == 0 || nVal >= sizeof(zVal)) break;
    memcpy(zVal, zEq + 1, nVal);
    zVal[nVal] = 0;
    long v = strtol(zVal, &zEnd, 10);
    if (*zEnd || v < 0 || v > aOpt[i].iMax) break;
    if (i == 0) d->nReconnect = (int)v;
    if (i == 1) d->katoMs = (int)v;
    if (i == 2 || i == 3) d->bHdgst = (int)v;
    if (i == 2 || i == 4) d->bDdgst = (int)v;
    return 0;
  }
  *pzErr = dev_mprintf(
      "bad option \"%.*s\" in %s: want reconnect=N (attempts, 0..1000) or kato=MS (Keep Alive "
      "timeout, 0..3600000)",
      (int)n, z, d->zUrl);
  return -EINVAL;
}

/* "nvme-tcp://HOST:PORT/NQN[?OPTIONS]" (HOST may be [v6]); the prefix is
** optional. */
static int parse_url(dev_backend *d, const char *zPath, char **pzErr) {
  const char *z = zPath, *zSlash, *zColon, *zQ;
  size_t nNqn;
  if (strncmp(z, TCPB_PREFIX, strlen(TCPB_PREFIX)) == 0) z += strlen(TCPB_PREFIX);
  zSlash = strchr(z, '/');
  if (!zSlash || !zSlash[1]) goto bad;
  zQ = strchr(zSlash, '?');
  nNqn = zQ ? (size_t)(zQ - zSlash - 1) : strlen(zSlash + 1);
  if (nNqn == 0 || nNqn >= 224) goto bad;
  snprintf(d->zNqn, sizeof(d->zNqn), "%.*s", (int)nNqn, zSlash + 1);
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
  while (zQ && zQ[1]) {
    const char *zOpt = zQ + 1;
    zQ = strchr(zOpt, '&');
    int rc = parse_option(d, zOpt, zQ ? (size_t)(zQ - zOpt) : strlen(zOpt), pzErr);
    if (rc) return rc;
  }
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
  char *zErr = NULL;
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
  d->nReconnect = TCPB_RECONNECT;
  d->katoMs = TCPB_KATO_MS;
  rc = parse_url(d, zPath, pzErr);
  if (rc) goto fail;
  /* a host identity per open device: its queues share it, as Connect asks */
  {
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, d->aHostId, 16) != 16) {
      uint64_t t = (uint64_t)tcpb_now() ^ (uint64_t)getpid() << 32;
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
  pthread_mutex_lock(&d->mu);
  rc = tcpb_ctrl_create(d, tcpb_now() + (int64_t)TCPB_SETUP_MS * 1000000, &zErr);
  pthread_mutex_unlock(&d->mu);
  if (rc) {
    *pzErr = dev_mprintf("cannot open %s: %s", zPath, zErr ? zErr : strerror(-rc));
    free(zErr);
    goto fail;
  }
  d->aQidUsed = 1;
  rc = tcpb_keepalive_start(d);
  if (rc) {
    *pzErr =
        dev_mprintf("cannot open %s: cannot start the Keep Alive thread: %s", zPath, strerror(-rc));
    goto fail;
  }
  *ppB = d;
  return 0;
fail:
  tcpb_close(d);
  return rc;
}

static void tcpb_close(dev_backend *d) {
  if (!d) return;
  tcpb_keepalive_stop(d);
  tcpb_queue_free(d->pAdmin);
  pthread_mutex_destroy(&d->mu);
  free(d->zUrl);
  free(d);
}

static int tcpb_identify(dev_backend *d, uint8_t cns, uint32_t nsid, void *pBuf) {
  int64_t tEnd = tcpb_now() + (int64_t)d->timeoutMs * 1000000;
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
  /* a controller lost since (the target restarted) is created again */
  rc = d->pAdmin && !d->pAdmin->bDead ? 0 : tcpb_ctrl_create(d, tEnd, &zErr);
  free(zErr);
  zErr = NULL;
  if (rc == 0) rc = tcpb_sync_cmd(d->pAdmin, &e, tEnd, &c, &zErr, "Identify");
  pthread_mutex_unlock(&d->mu);
  free(zErr);
  if (rc == 0) return 0;
  return (csq_cqe_sf(&c) & 0x7FF) ? (int)(csq_cqe_sf(&c) & 0x7FF) : rc;
}

static int tcpb_queue_open(dev_backend *d, uint32_t nDepth, dev_stats *pStats, dev_bqueue **ppQ) {
  char *zErr = NULL;
  uint16_t qid = 0, cntlid, sf;
  dev_bqueue *q = NULL;
  int rc;
  *ppQ = NULL;
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
  cntlid = d->cntlid;
  uint32_t gen = d->gen;
  pthread_mutex_unlock(&d->mu);
  if (!qid) return -EMFILE;
  rc = tcpb_queue_alloc(d, qid, nDepth, pStats, &q);
  if (rc == 0) {
    q->cntlid = cntlid;
    q->gen = gen;
    rc = tcpb_queue_link(q, cntlid, tcpb_now() + (int64_t)TCPB_SETUP_MS * 1000000, &zErr, &sf);
    if (rc && d->nReconnect > 0) {
      /* the target may be restarting: try again as a dropped queue would */
      snprintf(q->zDown, sizeof(q->zDown), "%s", zErr ? zErr : strerror(-rc));
      free(zErr);
      zErr = NULL;
      rc = tcpb_recover(q) ? -ECONNREFUSED : 0;
      if (rc) zErr = strdup(q->zDead);
    }
  }
  if (rc) {
    /* the driver reports only the code; say why on stderr, once */
    fprintf(stderr, "csq: cannot connect an NVMe/TCP queue to %s: %s\n", d->zUrl,
            zErr ? zErr : strerror(-rc));
    tcpb_queue_free(q);
    pthread_mutex_lock(&d->mu);
    d->aQidUsed &= ~(1ull << qid);
    pthread_mutex_unlock(&d->mu);
  } else {
    *ppQ = q;
  }
  free(zErr);
  return rc;
}

static void tcpb_queue_close(dev_bqueue *q) {
  dev_backend *d = q->d;
  /* commands still out complete first, within the timeout (the contract) */
  int64_t tEnd = tcpb_now() + (int64_t)d->timeoutMs * 1000000;
  for (;;) {
    csq_cqe c;
    if (q->nFree == q->nCmd || q->bDead || q->bDown || tcpb_now() > tEnd) break;
    tcpb_reap(q, &c, 10 * 1000000);
  }
  pthread_mutex_lock(&d->mu);
  d->aQidUsed &= ~(1ull << q->qid);
  pthread_mutex_unlock(&d->mu);
  tcpb_queue_free(q);
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
