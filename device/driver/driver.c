/*
** device/driver/driver.c - the host driver (driver.h): the process-wide registry
** of open devices, queue pairs with command ids and timeouts, synchronous
** execution, convenience wrappers, error messages and the SLM allocator.
**
** Command ids: a queue of depth D has D slots; cid = generation << bits |
** slot, where bits = ceil(log2 D). When a command times out its slot is
** freed at once and its cid remembered as abandoned, so a late completion is
** recognised and dropped, and the slot's next cid differs (new generation).
*/
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "device/link/backend.h"
#include "device/driver/driver.h"
#include "device/link/errlog.h"
#include "device/link/queue.h"

#define ULL(x)    ((unsigned long long)(x))
#define N_ABANDON 64

typedef struct slm_ext {
  uint64_t addr, len;
} slm_ext;

struct dev_device {
  char *zPath; /* canonical path (the registry key) or ":memory:" */
  const dev_backend_ops *pOps;
  dev_backend *pB;
  int nRef; /* guarded by the registry mutex */
  int bRegistered;
  dev_device *pNext;
  csq_id_vs caps;
  uint64_t nBlocks;
  int bReadOnly; /* the namespace is write protected (Identify NSATTR bit 0) */
  uint32_t nDepth;
  int timeoutMs; /* atomic: dev_set_timeout may change it */
  /* SLM allocator: sorted free extents and live allocations */
  pthread_mutex_t slmMutex;
  slm_ext *aFree, *aUsed;
  int nFree, nUsed, nFreeAlloc, nUsedAlloc;
};

typedef struct cid_slot {
  csq_sqe sqe;       /* copy, for error messages (cid inside) */
  int64_t tDeadline; /* ns, CLOCK_MONOTONIC */
  uint8_t bLive;
} cid_slot;

struct dev_queue {
  dev_device *pDev;
  dev_bqueue *pB;
  dev_stats stats;
  uint32_t nDepth;
  int nBits; /* slot bits of a cid */
  cid_slot *aSlot;
  uint16_t *aGen;
  uint16_t *aFreeSlot;
  uint32_t nFreeSlot;
  uint32_t nLive;
  int64_t tLow; /* no live deadline is earlier than this */
  uint16_t aAbandon[N_ABANDON];
  int nAbandon, iAbandon;
  csq_cqe *aStash; /* completions reaped by dev_exec for other commands */
  uint32_t nStash, iStash;
  char zErr[640];
  /* Completions can be handled long after they were reaped (dev_exec stashes
  ** others' completions; scans route them between themselves), by when zErr
  ** may describe a later failure: each failure's text is also logged with
  ** its cid and status (dev_cqe_errmsg). */
  dev_errlog errLog;
  char zCqeErr[DEV_ERRLOG_TEXT];
  int lockFd; /* the local lock standing in for a reservation, or -1 */
};

/* ---- registry ------------------------------------------------------------ */

static pthread_mutex_t registryMutex = PTHREAD_MUTEX_INITIALIZER;
static dev_device *pRegistry = NULL;
static pthread_once_t forkOnce = PTHREAD_ONCE_INIT;

/* In a forked child the parent's devices have no threads: forget them (they
** leak, by design) so that dev_open in the child opens its own. */
static void registry_atfork_child(void) {
  pthread_mutex_init(&registryMutex, NULL);
  pRegistry = NULL;
}
static void registry_install_atfork(void) {
  pthread_atfork(NULL, NULL, registry_atfork_child);
}

/* Canonical path of an image file, creating it if allowed. Returns a malloc'd
** path or NULL with *prc and *pzErr set. */
static char *canonical_path(const char *zPath, int bCreate, int *prc, char **pzErr) {
  char *z = realpath(zPath, NULL);
  if (z) return z;
  if (errno == ENOENT && bCreate) {
    int fd = open(zPath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
      close(fd);
      z = realpath(zPath, NULL);
      if (z) return z;
    }
  }
  *prc = -errno;
  if (errno == ENOENT && !bCreate)
    *pzErr =
        dev_mprintf("device image %s does not exist (open it with bCreate to create it)", zPath);
  else
    *pzErr = dev_mprintf("cannot open device image %s: %s", zPath, strerror(errno));
  return NULL;
}

/* The allocator covers the SLM the device reports; a device without csq
** compute (no capabilities in Identify) is served by the backend's host
** engine, whose SLM is nHostSlm bytes (dev_options.nSlmBytes). */
static void slm_init(dev_device *d, uint64_t nHostSlm) {
  pthread_mutex_init(&d->slmMutex, NULL);
  uint64_t n = d->caps.magic == CSQ_ID_MAGIC ? d->caps.slm_bytes : nHostSlm;
  if (n >= 4096) {
    d->aFree = malloc(sizeof(slm_ext));
    if (d->aFree) {
      d->aFree[0].addr = 0;
      d->aFree[0].len = n & ~(uint64_t)4095;
      d->nFree = d->nFreeAlloc = 1;
    }
  }
}

static void device_free(dev_device *d) {
  if (d->pB) d->pOps->xClose(d->pB);
  pthread_mutex_destroy(&d->slmMutex);
  free(d->aFree);
  free(d->aUsed);
  free(d->zPath);
  free(d);
}

int dev_open(const char *zPath, const dev_options *p, dev_device **ppDev, char **pzErr) {
  dev_options opt;
  dev_device *d = NULL;
  char *zKey = NULL, *zErr = NULL;
  const char *zBackendPath;
  const dev_backend_ops *pOps = &dev_emu_backend;
  int rc = 0, bShare = 1;
  void *pId = NULL;

  *ppDev = NULL;
  if (pzErr) *pzErr = NULL;
  pthread_once(&forkOnce, registry_install_atfork);
  dev_options_default(&opt);
  if (p) {
    opt = *p;
    if (opt.nQueueDepth == 0) opt.nQueueDepth = 256;
    if (opt.timeoutMs <= 0) opt.timeoutMs = 30000;
    if (opt.nSlmBytes == 0) opt.nSlmBytes = 256ull << 20;
  }
  if (opt.nQueueDepth < 64) opt.nQueueDepth = 64;
  if (opt.nQueueDepth > (int)DEV_MAX_QDEPTH) opt.nQueueDepth = (int)DEV_MAX_QDEPTH;
  if (!zPath || !zPath[0]) {
    zErr = dev_mprintf("no device path given");
    rc = -EINVAL;
    goto done;
  }

  if (strcmp(zPath, ":memory:") == 0) {
    bShare = 0;
    zKey = strdup(zPath);
    zBackendPath = zPath;
  } else if (strncmp(zPath, "nvme:", 5) == 0) {
    if (&dev_nvme_backend == NULL) {
      zErr = dev_mprintf("cannot open %s: this build has no nvme backend", zPath);
      rc = -ENOTSUP;
      goto done;
    }
    pOps = &dev_nvme_backend;
    zKey = strdup(zPath);
    zBackendPath = zPath + 5;
  } else if (strncmp(zPath, "nvme-tcp://", 11) == 0) {
    /* a device across an NVMe/TCP link: the URL is the key, as for nvme: */
    pOps = &dev_tcp_backend;
    zKey = strdup(zPath);
    zBackendPath = zPath;
  } else {
    zKey = canonical_path(zPath, opt.bCreate, &rc, &zErr);
    if (!zKey) goto done;
    zBackendPath = zKey;
  }
  if (!zKey) {
    rc = -ENOMEM;
    goto done;
  }

  pthread_mutex_lock(&registryMutex);
  if (bShare) {
    for (d = pRegistry; d; d = d->pNext) {
      if (strcmp(d->zPath, zKey) == 0) {
        d->nRef++;
        pthread_mutex_unlock(&registryMutex);
        *ppDev = d;
        free(zKey);
        return 0;
      }
    }
  }
  /* Opened under the registry mutex so two threads opening one path at once
  ** end up sharing a single device. */
  d = calloc(1, sizeof(*d));
  pId = aligned_alloc(4096, 4096);
  if (!d || !pId) {
    rc = -ENOMEM;
    goto unlock;
  }
  d->zPath = zKey;
  zKey = NULL;
  d->pOps = pOps;
  d->nRef = 1;
  d->nDepth = (uint32_t)opt.nQueueDepth;
  d->timeoutMs = opt.timeoutMs;
  rc = pOps->xOpen(zBackendPath, &opt, &d->pB, &zErr);
  if (rc) {
    d->pB = NULL;
    if (!zErr)
      zErr = dev_mprintf("cannot open device %s: %s", zPath, rc < 0 ? strerror(-rc) : "error");
    goto unlock;
  }
  rc = pOps->xIdentify(d->pB, 1, 0, pId);
  if (rc == 0) {
    /* csq_id_vs sits at byte 3072 of the controller data (nvme_id_ctrl.vs). */
    memcpy(&d->caps, (uint8_t *)pId + 3072, sizeof(d->caps));
    if (d->caps.magic != CSQ_ID_MAGIC) memset(&d->caps, 0, sizeof(d->caps));
    rc = pOps->xIdentify(d->pB, 0, CSQ_NSID_NVM, pId);
  }
  if (rc) {
    zErr = dev_mprintf("cannot identify device %s: %s", zPath,
                       rc < 0 ? strerror(-rc) : csq_status_name((uint16_t)rc));
    goto unlock;
  }
  memcpy(&d->nBlocks, pId, sizeof(uint64_t)); /* nvme_id_ns.nsze, little endian */
  d->bReadOnly = ((uint8_t *)pId)[99] & 1;    /* nvme_id_ns.nsattr: write protected */
  if (d->caps.max_qdepth && d->nDepth > d->caps.max_qdepth) d->nDepth = d->caps.max_qdepth;
  slm_init(d, opt.nSlmBytes);
  if (bShare) {
    d->bRegistered = 1;
    d->pNext = pRegistry;
    pRegistry = d;
  }
unlock:
  pthread_mutex_unlock(&registryMutex);
done:
  free(pId);
  free(zKey);
  if (rc) {
    if (d) device_free(d);
    if (pzErr)
      *pzErr = zErr ? zErr : dev_mprintf("cannot open device %s", zPath ? zPath : "");
    else
      free(zErr);
    return rc;
  }
  free(zErr);
  *ppDev = d;
  return 0;
}

void dev_ref(dev_device *d) {
  pthread_mutex_lock(&registryMutex);
  d->nRef++;
  pthread_mutex_unlock(&registryMutex);
}

void dev_unref(dev_device *d) {
  int bClose;
  if (!d) return;
  pthread_mutex_lock(&registryMutex);
  bClose = --d->nRef == 0;
  if (bClose && d->bRegistered) {
    dev_device **pp;
    for (pp = &pRegistry; *pp; pp = &(*pp)->pNext) {
      if (*pp == d) {
        *pp = d->pNext;
        break;
      }
    }
  }
  pthread_mutex_unlock(&registryMutex);
  if (bClose) device_free(d);
}

const char *dev_path(const dev_device *d) {
  return d->zPath;
}
const char *dev_backend_name(const dev_device *d) {
  return d->pOps->zName;
}
const csq_id_vs *dev_caps(const dev_device *d) {
  return &d->caps;
}
uint64_t dev_nvm_blocks(const dev_device *d) {
  return d->nBlocks;
}
int dev_read_only(const dev_device *d) {
  return d->bReadOnly;
}
void dev_device_stats(dev_device *d, dev_stats *pOut) {
  d->pOps->xStats(d->pB, pOut);
}

/* ---- runtime settings ---------------------------------------------------- */

int dev_set_fault(dev_device *d, const char *zSpec, char **pzPrev, char **pzErr) {
  if (pzPrev) *pzPrev = NULL;
  if (pzErr) *pzErr = NULL;
  if (!d->pOps->xSetFault) {
    if (pzErr)
      *pzErr = dev_mprintf("device %s uses the %s backend: fault injection is a feature of the "
                           "emulated device (emu) only",
                           d->zPath, d->pOps->zName);
    return -ENOTSUP;
  }
  char *zErr = NULL;
  int rc = d->pOps->xSetFault(d->pB, zSpec, pzPrev, &zErr);
  if (rc && pzErr) {
    *pzErr = zErr ? dev_mprintf("device %s: %s", d->zPath, zErr)
                  : dev_mprintf("device %s: cannot set faults: %s", d->zPath, strerror(-rc));
  }
  free(zErr);
  return rc;
}

int dev_set_timeout(dev_device *d, int ms) {
  if (ms <= 0) return -EINVAL;
  return __atomic_exchange_n(&d->timeoutMs, ms, __ATOMIC_RELAXED);
}

int dev_timeout(const dev_device *d) {
  return __atomic_load_n(&d->timeoutMs, __ATOMIC_RELAXED);
}

/* ---- queues ---------------------------------------------------------------- */

/* The queue and its per-slot arrays come from one allocation, the arrays in
** decreasing alignment after the struct, so that set-up has one thing to
** fail and dev_queue_close one to free. */
int dev_queue_open(dev_device *d, dev_queue **ppQ) {
  uint32_t n = d->nDepth;
  size_t nByte =
      sizeof(dev_queue) + n * (sizeof(cid_slot) + sizeof(csq_cqe) + 2 * sizeof(uint16_t));
  dev_queue *q = calloc(1, nByte);
  int rc;
  *ppQ = NULL;
  if (!q) return -ENOMEM;
  dev_ref(d);
  q->pDev = d;
  q->nDepth = n;
  q->aSlot = (cid_slot *)&q[1];
  q->aStash = (csq_cqe *)&q->aSlot[n];
  q->aGen = (uint16_t *)&q->aStash[n];
  q->aFreeSlot = &q->aGen[n];
  q->lockFd = -1;
  dev_errlog_init(&q->errLog);
  while ((1u << q->nBits) < q->nDepth) q->nBits++;
  for (uint32_t i = 0; i < n; i++) q->aFreeSlot[i] = (uint16_t)(n - 1 - i);
  q->nFreeSlot = n;
  snprintf(q->zErr, sizeof(q->zErr), "not an error");
  rc = d->pOps->xQueueOpen(d->pB, n, &q->stats, &q->pB);
  if (rc) {
    dev_queue_close(q);
    return rc;
  }
  *ppQ = q;
  return 0;
}

/* Also the destructor of a queue whose dev_queue_open failed (no pB). */
void dev_queue_close(dev_queue *q) {
  if (!q) return;
  if (q->pB) q->pDev->pOps->xQueueClose(q->pB);
  if (q->lockFd >= 0) close(q->lockFd); /* releases the lock */
  dev_unref(q->pDev);
  dev_errlog_free(&q->errLog);
  free(q);
}

dev_device *dev_queue_device(dev_queue *q) {
  return q->pDev;
}
dev_stats *dev_queue_stats(dev_queue *q) {
  return &q->stats;
}
const char *dev_errmsg(dev_queue *q) {
  return q ? q->zErr : "no queue";
}

/* Describe a command for an error message: "Read of LBAs 8..15". */
static void describe_cmd(const csq_sqe *p, char *z, size_t n) {
  uint64_t a = (uint64_t)p->cdw10 | ((uint64_t)p->cdw11 << 32);
  const char *zName = csq_opcode_name(dev_sqe_is_admin(p) ? 0 : p->nsid, p->opcode);
  if (dev_sqe_is_admin(p)) {
    if (p->opcode == CSQ_ADM_LOAD_PROGRAM || p->opcode == CSQ_ADM_PROGRAM_ACTIVATION)
      snprintf(z, n, "%s (slot %u)", zName, p->cdw10 & 0xFFFF);
    else
      snprintf(z, n, "%s", zName);
  } else if (p->nsid == CSQ_NSID_NVM && (p->opcode == CSQ_NVM_READ || p->opcode == CSQ_NVM_WRITE)) {
    snprintf(z, n, "%s of LBAs %llu..%llu", zName, ULL(a), ULL(a + (p->cdw12 & 0xFFFF)));
  } else if (p->nsid == CSQ_NSID_SLM && p->opcode == CSQ_SLM_COPY) {
    snprintf(z, n, "%s of %u range(s) to SLM address 0x%llx", zName, (p->cdw12 & 0xFF) + 1, ULL(a));
  } else if (p->nsid == CSQ_NSID_SLM) {
    snprintf(z, n, "%s of %u bytes at SLM address 0x%llx", zName, p->cdw12, ULL(a));
  } else if (p->nsid == CSQ_NSID_CP) {
    snprintf(z, n, "%s (slot %u)", zName, p->cdw10 & 0xFFFF);
  } else {
    snprintf(z, n, "%s (namespace %u)", zName, p->nsid);
  }
}

static void set_cmd_error(dev_queue *q, const csq_sqe *p, uint16_t sf) {
  char zCmd[160];
  char zDetail[256] = "";
  describe_cmd(p, zCmd, sizeof(zCmd));
  if (sf == CSQ_SC_HOST_TIMEOUT) {
    snprintf(q->zErr, sizeof(q->zErr),
             "%s on device %s failed: no completion within %d ms (%s, status 0x%03x)", zCmd,
             q->pDev->zPath, dev_timeout(q->pDev), csq_status_name(sf), sf);
  } else {
    if (q->pDev->pOps->xDetail) q->pDev->pOps->xDetail(q->pB, p->cid, sf, zDetail, sizeof(zDetail));
    snprintf(q->zErr, sizeof(q->zErr), "%s on device %s failed: %s (status 0x%03x)%s%s", zCmd,
             q->pDev->zPath, csq_status_name(sf), sf, zDetail[0] ? ": " : "", zDetail);
  }
  dev_errlog_add(&q->errLog, p->cid, sf, q->zErr);
}

const char *dev_cqe_errmsg(dev_queue *q, const csq_cqe *pCqe) {
  uint16_t sf = (uint16_t)(csq_cqe_sf(pCqe) & 0x7FF);
  if (!q) return "no queue";
  /* the newest entry: a cid's generation bits make an older one with the
  ** same cid and status a different command only after hundreds of reuses */
  if (dev_errlog_find(&q->errLog, pCqe->cid, sf, q->zCqeErr, sizeof(q->zCqeErr))) return q->zCqeErr;
  snprintf(q->zCqeErr, sizeof(q->zCqeErr), "command %u on device %s failed: %s (status 0x%03x)",
           pCqe->cid, q->pDev->zPath, csq_status_name(sf), sf);
  return q->zCqeErr;
}

int dev_submit(dev_queue *q, csq_sqe *pSqe) {
  uint16_t slot, cid;
  uint16_t genMask = (uint16_t)(0xFFFFu >> q->nBits);
  int rc, k, i;
  if (q->nFreeSlot == 0) {
    snprintf(q->zErr, sizeof(q->zErr), "queue full: %u commands in flight on device %s", q->nDepth,
             q->pDev->zPath);
    return -EAGAIN;
  }
  slot = q->aFreeSlot[q->nFreeSlot - 1];
  /* Next generation whose cid is not awaiting a late completion. */
  for (k = 0; k <= N_ABANDON; k++) {
    q->aGen[slot] = (uint16_t)((q->aGen[slot] + 1) & genMask);
    cid = (uint16_t)((q->aGen[slot] << q->nBits) | slot);
    for (i = 0; i < q->nAbandon && q->aAbandon[i] != cid; i++) {}
    if (i == q->nAbandon) break;
  }
  pSqe->cid = cid;
  rc = q->pDev->pOps->xSubmit(q->pB, pSqe);
  if (rc) {
    snprintf(q->zErr, sizeof(q->zErr), "cannot submit to device %s: %s", q->pDev->zPath,
             strerror(-rc));
    return rc;
  }
  q->nFreeSlot--;
  q->aSlot[slot].sqe = *pSqe;
  q->aSlot[slot].bLive = 1;
  q->aSlot[slot].tDeadline = dev_now_ns() + (int64_t)dev_timeout(q->pDev) * 1000000;
  if (q->nLive == 0 || q->aSlot[slot].tDeadline < q->tLow) q->tLow = q->aSlot[slot].tDeadline;
  q->nLive++;
  return 0;
}

static void slot_release(dev_queue *q, uint16_t slot) {
  q->aSlot[slot].bLive = 0;
  q->nLive--;
  q->aFreeSlot[q->nFreeSlot++] = slot;
}

/* Expire live commands past their deadline: each becomes a synthesized
** CSQ_SC_HOST_TIMEOUT completion (the first into *pCqe, the rest stashed) and
** its cid is remembered as abandoned. Returns the number expired. */
static int expire(dev_queue *q, int64_t now, csq_cqe *pCqe) {
  uint32_t i;
  int n = 0;
  int64_t tLow = INT64_MAX;
  for (i = 0; i < q->nDepth; i++) {
    cid_slot *s = &q->aSlot[i];
    if (!s->bLive) continue;
    if (s->tDeadline > now) {
      if (s->tDeadline < tLow) tLow = s->tDeadline;
      continue;
    }
    csq_cqe c;
    memset(&c, 0, sizeof(c));
    c.cid = s->sqe.cid;
    c.status = (uint16_t)(CSQ_SC_HOST_TIMEOUT << 1);
    set_cmd_error(q, &s->sqe, CSQ_SC_HOST_TIMEOUT);
    q->aAbandon[q->iAbandon] = s->sqe.cid;
    q->iAbandon = (q->iAbandon + 1) % N_ABANDON;
    if (q->nAbandon < N_ABANDON) q->nAbandon++;
    slot_release(q, (uint16_t)i);
    if (n == 0)
      *pCqe = c;
    else
      q->aStash[(q->iStash + q->nStash++) % q->nDepth] = c;
    n++;
  }
  q->tLow = tLow;
  return n;
}

/* Take one completion of a live command, waiting until tEnd (ns); 0 or
** -ETIMEDOUT. Late completions of abandoned commands are dropped here. */
static int reap_until(dev_queue *q, csq_cqe *pCqe, int64_t tEnd) {
  for (;;) {
    int64_t now = dev_now_ns();
    int64_t tWait = q->nLive && q->tLow < tEnd ? q->tLow : tEnd;
    int rc = q->pDev->pOps->xReap(q->pB, pCqe, tWait > now ? tWait - now : 0);
    if (rc == 0) {
      uint16_t slot = (uint16_t)(pCqe->cid & ((1u << q->nBits) - 1));
      if (slot < q->nDepth && q->aSlot[slot].bLive && q->aSlot[slot].sqe.cid == pCqe->cid) {
        uint16_t sf = (uint16_t)(csq_cqe_sf(pCqe) & 0x7FF);
        if (sf) set_cmd_error(q, &q->aSlot[slot].sqe, sf);
        slot_release(q, slot);
        return 0;
      }
      continue; /* late or unknown: ignore */
    }
    now = dev_now_ns();
    if (q->nLive && now >= q->tLow && expire(q, now, pCqe) > 0) return 0;
    if (now >= tEnd) return -ETIMEDOUT;
  }
}

int dev_reap(dev_queue *q, csq_cqe *pCqe, int timeoutMs) {
  int64_t tEnd;
  if (q->nStash) {
    *pCqe = q->aStash[q->iStash];
    q->iStash = (q->iStash + 1) % q->nDepth;
    q->nStash--;
    return 0;
  }
  if (timeoutMs < 0) timeoutMs = dev_timeout(q->pDev);
  tEnd = dev_now_ns() + (int64_t)timeoutMs * 1000000;
  if (reap_until(q, pCqe, tEnd) == 0) return 0;
  snprintf(q->zErr, sizeof(q->zErr),
           "device %s: no completion within %d ms (%u command(s) in flight)", q->pDev->zPath,
           timeoutMs, q->nLive);
  return -ETIMEDOUT;
}

int dev_exec(dev_queue *q, csq_sqe *pSqe, csq_cqe *pCqe) {
  csq_cqe c;
  uint16_t cid;
  int rc = dev_submit(q, pSqe);
  if (rc) return rc;
  cid = pSqe->cid;
  for (;;) {
    /* Our own deadline ends the wait at the latest (as a synthesized timeout). */
    rc = reap_until(q, &c, INT64_MAX);
    if (rc) return rc;
    if (c.cid == cid) break;
    q->aStash[(q->iStash + q->nStash++) % q->nDepth] = c;
  }
  if (pCqe) *pCqe = c;
  return csq_cqe_sf(&c) & 0x7FF;
}

/* ---- convenience wrappers --------------------------------------------- */

static void sqe_init(csq_sqe *p, uint8_t opcode, uint32_t nsid) {
  memset(p, 0, sizeof(*p));
  p->opcode = opcode;
  p->nsid = nsid;
}

/* NVM Read/Write of any length: split into commands of at most 65536 blocks. */
static int nvm_rw(dev_queue *q, uint8_t op, uint64_t slba, uint32_t nlb, const void *pBuf) {
  const uint8_t *p = pBuf;
  while (nlb > 0) {
    uint32_t n = nlb > 65536 ? 65536 : nlb;
    csq_sqe s;
    int rc;
    sqe_init(&s, op, CSQ_NSID_NVM);
    s.prp1 = (uint64_t)(uintptr_t)p;
    s.cdw10 = (uint32_t)slba;
    s.cdw11 = (uint32_t)(slba >> 32);
    s.cdw12 = n - 1;
    rc = dev_exec(q, &s, NULL);
    if (rc) return rc;
    slba += n;
    nlb -= n;
    p += (size_t)n * CSQ_LBA_SIZE;
  }
  return 0;
}

int dev_nvm_read(dev_queue *q, uint64_t slba, uint32_t nlb, void *pBuf) {
  return nvm_rw(q, CSQ_NVM_READ, slba, nlb, pBuf);
}

int dev_nvm_write(dev_queue *q, uint64_t slba, uint32_t nlb, const void *pBuf) {
  return nvm_rw(q, CSQ_NVM_WRITE, slba, nlb, pBuf);
}

int dev_nvm_flush(dev_queue *q) {
  csq_sqe s;
  sqe_init(&s, CSQ_NVM_FLUSH, CSQ_NSID_NVM);
  return dev_exec(q, &s, NULL);
}

/* A device without NVMe reservations (a plain NVMe/TCP target such as
** Linux 6.1's nvmet answers Reservation Acquire with Invalid Command
** Opcode): a write lock (an open file description lock, one per queue as a
** reservation is) on a file named after the device path,
** /tmp/csq-resv-<FNV-1a of the path>.lock. It keeps out writers of this
** machine only. 0, CSQ_SC_RESV_CONFLICT when held, or -errno. */
static int local_lock(dev_queue *q) {
  const char *z = q->pDev->zPath;
  uint64_t h = 0xcbf29ce484222325ull;
  char zFile[64];
  struct flock fl;
  while (*z) h = (h ^ (uint8_t)*z++) * 0x100000001b3ull;
  if (q->lockFd < 0) {
    snprintf(zFile, sizeof(zFile), "/tmp/csq-resv-%016llx.lock", (unsigned long long)h);
    q->lockFd = open(zFile, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (q->lockFd < 0) {
      int rc = -errno;
      snprintf(q->zErr, sizeof(q->zErr),
               "device %s has no NVMe reservations, and its local lock file %s cannot be "
               "opened: %s",
               q->pDev->zPath, zFile, strerror(-rc));
      return rc;
    }
  }
  memset(&fl, 0, sizeof(fl));
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (fcntl(q->lockFd, F_OFD_SETLK, &fl) == 0) return 0;
  if (errno == EAGAIN || errno == EACCES) {
    snprintf(q->zErr, sizeof(q->zErr),
             "device %s (no NVMe reservations) is locked by another writer of this machine",
             q->pDev->zPath);
    return CSQ_SC_RESV_CONFLICT;
  }
  snprintf(q->zErr, sizeof(q->zErr), "locking device %s: %s", q->pDev->zPath, strerror(errno));
  return -errno;
}

int dev_resv_acquire(dev_queue *q, int busyTimeoutMs) {
  int64_t tEnd = dev_now_ns() + (int64_t)(busyTimeoutMs > 0 ? busyTimeoutMs : 0) * 1000000;
  int sleepUs = 1000;
  for (;;) {
    csq_sqe s;
    int rc;
    if (q->lockFd >= 0) {
      rc = local_lock(q);
    } else {
      sqe_init(&s, CSQ_NVM_RESV_ACQUIRE, CSQ_NSID_NVM);
      rc = dev_exec(q, &s, NULL);
      if (rc > 0 && (rc & 0x7FF) == CSQ_SC_INVALID_OPCODE) rc = local_lock(q);
    }
    if (rc != CSQ_SC_RESV_CONFLICT) return rc;
    if (dev_now_ns() + (int64_t)sleepUs * 1000 > tEnd) {
      size_t n = strlen(q->zErr);
      snprintf(q->zErr + n, sizeof(q->zErr) - n, " (still held after %d ms)", busyTimeoutMs);
      return rc;
    }
    usleep(sleepUs);
    if (sleepUs < 50000) sleepUs *= 2;
  }
}

int dev_resv_release(dev_queue *q) {
  csq_sqe s;
  if (q->lockFd >= 0) {
    struct flock fl;
    memset(&fl, 0, sizeof(fl));
    fl.l_type = F_UNLCK;
    fl.l_whence = SEEK_SET;
    return fcntl(q->lockFd, F_OFD_SETLK, &fl) == 0 ? 0 : -errno;
  }
  sqe_init(&s, CSQ_NVM_RESV_RELEASE, CSQ_NSID_NVM);
  return dev_exec(q, &s, NULL);
}

static int slm_xfer(dev_queue *q, uint8_t op, uint64_t addr, const void *pBuf, uint32_t n) {
  csq_sqe s;
  sqe_init(&s, op, CSQ_NSID_SLM);
  s.prp1 = (uint64_t)(uintptr_t)pBuf;
  s.cdw10 = (uint32_t)addr;
  s.cdw11 = (uint32_t)(addr >> 32);
  s.cdw12 = n;
  return dev_exec(q, &s, NULL);
}

int dev_slm_read(dev_queue *q, uint64_t addr, void *pBuf, uint32_t n) {
  return slm_xfer(q, CSQ_SLM_READ, addr, pBuf, n);
}

int dev_slm_write(dev_queue *q, uint64_t addr, const void *pBuf, uint32_t n) {
  return slm_xfer(q, CSQ_SLM_WRITE, addr, pBuf, n);
}

int dev_slm_copy(dev_queue *q, uint64_t addr, const csq_lba_range *aRange, int nRange) {
  csq_sqe s;
  if (nRange < 1 || nRange > 256) {
    snprintf(q->zErr, sizeof(q->zErr), "Memory Copy takes 1 to 256 ranges, not %d", nRange);
    return -EINVAL;
  }
  sqe_init(&s, CSQ_SLM_COPY, CSQ_NSID_SLM);
  s.prp1 = (uint64_t)(uintptr_t)aRange;
  s.cdw10 = (uint32_t)addr;
  s.cdw11 = (uint32_t)(addr >> 32);
  s.cdw12 = (uint32_t)(nRange - 1); /* format 0: LBA ranges */
  return dev_exec(q, &s, NULL);
}

/* ---- SLM allocator ---------------------------------------------------------- */

static int ext_insert(slm_ext **pa, int *pn, int *pnAlloc, int i, slm_ext e) {
  if (*pn == *pnAlloc) {
    int nNew = *pnAlloc ? *pnAlloc * 2 : 16;
    slm_ext *a = realloc(*pa, nNew * sizeof(slm_ext));
    if (!a) return -ENOMEM;
    *pa = a;
    *pnAlloc = nNew;
  }
  memmove(&(*pa)[i + 1], &(*pa)[i], (*pn - i) * sizeof(slm_ext));
  (*pa)[i] = e;
  (*pn)++;
  return 0;
}

int dev_slm_alloc(dev_device *d, uint64_t nBytes, uint64_t *pAddr) {
  uint64_t n = (nBytes + 4095) & ~(uint64_t)4095;
  int i, j, rc = -ENOMEM;
  if (nBytes == 0 || n < nBytes) return -EINVAL;
  pthread_mutex_lock(&d->slmMutex);
  for (i = 0; i < d->nFree; i++) {
    if (d->aFree[i].len < n) continue;
    slm_ext e = {d->aFree[i].addr, n};
    for (j = 0; j < d->nUsed && d->aUsed[j].addr < e.addr; j++) {}
    rc = ext_insert(&d->aUsed, &d->nUsed, &d->nUsedAlloc, j, e);
    if (rc) break;
    d->aFree[i].addr += n;
    d->aFree[i].len -= n;
    if (d->aFree[i].len == 0) {
      memmove(&d->aFree[i], &d->aFree[i + 1], (d->nFree - i - 1) * sizeof(slm_ext));
      d->nFree--;
    }
    *pAddr = e.addr;
    break;
  }
  pthread_mutex_unlock(&d->slmMutex);
  return rc;
}

void dev_slm_free(dev_device *d, uint64_t addr) {
  int i, j;
  slm_ext e;
  pthread_mutex_lock(&d->slmMutex);
  for (i = 0; i < d->nUsed && d->aUsed[i].addr != addr; i++) {}
  if (i == d->nUsed) { /* not allocated: ignore */
    pthread_mutex_unlock(&d->slmMutex);
    return;
  }
  e = d->aUsed[i];
  memmove(&d->aUsed[i], &d->aUsed[i + 1], (d->nUsed - i - 1) * sizeof(slm_ext));
  d->nUsed--;
  for (j = 0; j < d->nFree && d->aFree[j].addr < e.addr; j++) {}
  /* Coalesce with the neighbours, else insert. */
  if (j > 0 && d->aFree[j - 1].addr + d->aFree[j - 1].len == e.addr) {
    d->aFree[j - 1].len += e.len;
    if (j < d->nFree && e.addr + e.len == d->aFree[j].addr) {
      d->aFree[j - 1].len += d->aFree[j].len;
      memmove(&d->aFree[j], &d->aFree[j + 1], (d->nFree - j - 1) * sizeof(slm_ext));
      d->nFree--;
    }
  } else if (j < d->nFree && e.addr + e.len == d->aFree[j].addr) {
    d->aFree[j].addr = e.addr;
    d->aFree[j].len += e.len;
  } else {
    ext_insert(&d->aFree, &d->nFree, &d->nFreeAlloc, j, e); /* on ENOMEM the range leaks */
  }
  pthread_mutex_unlock(&d->slmMutex);
}
