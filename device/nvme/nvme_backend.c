/*
** device/nvme/nvme_backend.c - the "nvme" backend (dev_nvme_backend, backend.h):
** a real NVMe namespace reached through io_uring passthrough on its generic
** char device ("nvme:/dev/ngXnY"), plus a HOST ENGINE that provides csq's
** computational-storage commands on a device that has none.
**
** What goes where:
**   NVM Read/Write/Flush    NVMe Read/Write/Flush on /dev/ngXnY (uring_cmd,
**                           NVME_URING_CMD_IO), split at the device's maximum
**                           transfer; csq's 4 KiB blocks are converted to the
**                           namespace's LBAs (512..4096 bytes).
**   Identify                NVMe Identify on the controller /dev/nvmeX
**                           (NVME_URING_CMD_ADMIN), or by ioctl through the
**                           namespace node when the controller cannot be
**                           opened. Namespace data of csq's NVM namespace
**                           (nsid 1) is the real namespace's, restated in
**                           4096-byte blocks (one LBA format, ds 12), because
**                           that is the namespace csq sees. The controller
**                           data is the device's: a plain device has no
**                           csq_id_vs in vs[], so dev_caps() reports no compute
**                           and the SLM/CP namespaces (nsid 3/2) are the host
**                           engine's (Identify of them is synthesized).
**   Reservation Acq/Rel     flock() on the namespace fd across processes, one
**                           holder queue within the process (as in the emu).
**   SLM Read/Write/Fill     memory operations on the host SLM buffer (the
**                           emulator's SLM, device/engine/cp_slm.c), completed
**                           at once; so is a Memory Copy between SLM ranges.
**   Memory Copy (NVM->SLM)  NVMe Reads by passthrough straight into host SLM.
**   Load Program, Program   the host engine: program slots and memory range
**   Activation, MRS Mgmt    sets kept here; Load verifies with the registered
**                           program type (dev_ptype_find / xVerify).
**   Execute Program         run xRun on a host engine thread; the program's
**                           xReadLba reads by passthrough on that thread's own
**                           ring.
** A DEVICE WITH csq COMPUTE (its Identify Controller carries csq_id_vs, as
** csq-target's subsystems do when the kernel's nvme-tcp reaches them): the
** host engine stays idle and every CP and SLM command goes to the device,
** field for field, through the passthrough node of its namespace
** (/dev/ngXn2, /dev/ngXn3: the kernel passes a command only to the node of
** its nsid); its data is the buffer at DPTR with the length xfer.h reads from
** the command (SLM Read/Write split at the maximum transfer); csq's admin
** commands go by ioctl to the controller. Reservations stay flock()s.
**
** Counters: bytes_to_host counts what crossed the device link (NVM reads,
** Memory Copy, Identify); SLM Read/Write are host memory copies here and
** move nothing over the link.
**
** Completions: passthrough CQEs arrive on the queue's ring; commands
** finished by the host (inline or by an engine thread) are posted to the
** queue's ready list, and an engine thread also writes the queue's eventfd,
** on which xReap keeps a read armed so that one io_uring wait covers both.
*/
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <libnvme.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "device/link/backend.h"
#include "device/nvme/nvme_passthru.h"
#include "device/engine/ptype.h"
#include "device/link/queue.h"
#include "device/engine/cp_jobs.h"
#include "device/engine/cp_slots.h"
#include "device/link/errlog.h"
#include "device/link/msg.h"
#include "device/tcp/xfer.h"

#define ULL(x) ((unsigned long long)(x))

#define NVB_RING_ENTRIES 256
#define NVB_ENGINE_RING  64
#define NVB_EVENT_TAG    UINT64_MAX

typedef struct nvb_job nvb_job;
struct nvb_job {
  dev_cp_job link; /* must be first: the engines' job list (cp_jobs.h) */
  dev_bqueue *q;
  csq_sqe sqe;
  dev_cp_run run; /* the program taken by host_execute */
};

typedef struct nvb_engine {
  dev_backend *d;
  int iEngine;
  pthread_t thread;
  int bStarted;
} nvb_engine;

struct dev_backend {
  char *zPath;
  int fd;     /* namespace generic char device */
  int ctrlFd; /* controller char device for admin, or -1 */
  dev_nvme_geom g;
  uint64_t nBlocks; /* csq 4 KiB blocks */
  dev_stats stats;

  dev_cp_slm slm; /* host engine SLM */
  int bDevCs;     /* the device runs csq's compute commands itself */
  int aNsFd[4];   /* bDevCs: the passthrough node of each csq nsid (1 = fd) */

  dev_cp cp; /* program slots and memory range sets */

  pthread_mutex_t resvMutex;
  dev_bqueue *pResvHolder;

  int nEngine;
  nvb_engine *aEngine;
  dev_cp_jobs jobs;
};

/* One csq command in flight on a queue. */
typedef struct nvb_cmd {
  csq_sqe sqe;
  int bLive;
  int bQueued;    /* in the queue's work FIFO */
  int bAdmin;     /* its parts go to the admin queue */
  uint8_t nvmeOp; /* NVMe opcode of the parts */
  uint32_t nPart, iNext, nOut;
  int res;               /* first failing part's result */
  uint64_t result;       /* last part's dwords 0-1 */
  uint64_t nByte;        /* bytes the parts move */
  csq_lba_range *aRange; /* Memory Copy: private copy of the descriptors */
  int nRange, iRange;
  uint32_t iRangePart;
  uint64_t dst;  /* Memory Copy: SLM offset of the current range */
  uint32_t nsid; /* Identify: the csq nsid asked for */
  int bFwd;      /* sent to a device with csq compute as it is (bDevCs) */
  int bFwdH2C;   /* bFwd: its data goes to the device */
} nvb_cmd;

struct dev_bqueue {
  dev_backend *d;
  dev_stats *pStats;
  dev_nvme_ring *ring;
  uint32_t nRingOut; /* passthrough commands submitted, not completed */
  nvb_cmd *aCmd;
  uint32_t nCmd;
  uint32_t *aFree;
  uint32_t nFree;
  uint32_t *aWork; /* FIFO of commands with parts still to issue */
  uint32_t iWork, nWork;
  /* ready completions, posted by this thread or by engine threads */
  pthread_mutex_t readyMutex;
  csq_cqe *aReady;
  uint32_t nReady, nReadyAlloc;
  int evfd;
  uint64_t evBuf;
  int bEvArmed;
  int nJobs;          /* Executes handed to engines, not yet posted (atomic) */
  dev_errlog errLog;  /* failed commands' detail (xDetail) */
  char zRingErr[160]; /* the last io_uring submit failure: every command's concern */
};

/* ---- small helpers ------------------------------------------------------- */

static int lba_ok(const dev_backend *d, uint64_t slba, uint64_t nlb) {
  return nlb > 0 && slba < d->nBlocks && nlb <= d->nBlocks - slba;
}

/* Post a completion for csq command pSqe: counters, detail text, CQE. Safe
** from any thread. */
static void post_cqe(dev_bqueue *q, const csq_sqe *pSqe, uint16_t sf, uint64_t result,
                     const dev_io_acct *pAcct, const char *zDetail) {
  csq_cqe c;
  dev_stats_account(q->pStats, pSqe, sf, pAcct);
  dev_stats_account(&q->d->stats, pSqe, sf, pAcct);
  memset(&c, 0, sizeof(c));
  c.dw0 = (uint32_t)result;
  c.dw1 = (uint32_t)(result >> 32);
  c.cid = pSqe->cid;
  c.status = (uint16_t)(sf << 1);
  pthread_mutex_lock(&q->readyMutex);
  if (sf & 0x7FF) dev_errlog_add(&q->errLog, pSqe->cid, sf & 0x7FF, zDetail);
  if (q->nReady == q->nReadyAlloc) {
    uint32_t nNew = q->nReadyAlloc ? q->nReadyAlloc * 2 : 64;
    csq_cqe *a = realloc(q->aReady, nNew * sizeof(csq_cqe));
    if (a) {
      q->aReady = a;
      q->nReadyAlloc = nNew;
    }
  }
  /* On ENOMEM the completion is lost and the driver times the command out. */
  if (q->nReady < q->nReadyAlloc) q->aReady[q->nReady++] = c;
  pthread_mutex_unlock(&q->readyMutex);
}

/* ---- Identify ------------------------------------------------------------- */

/* Restate the real namespace's Identify data in csq's 4096-byte blocks. */
static void id_ns_to_4k(const dev_backend *d, struct nvme_id_ns *ns) {
  uint32_t k = 12 - d->g.lbaShift;
  ns->nsze = htole64(le64toh(ns->nsze) >> k);
  ns->ncap = htole64(le64toh(ns->ncap) >> k);
  ns->nuse = htole64(le64toh(ns->nuse) >> k);
  ns->nlbaf = 0;
  ns->flbas = 0;
  memset(ns->lbaf, 0, sizeof(ns->lbaf));
  ns->lbaf[0].ds = 12;
}

/* Identify of the host engine's namespaces (CP 2, SLM 3). */
static int id_host_ns(const dev_backend *d, uint32_t nsid, void *pBuf) {
  struct nvme_id_ns *ns = pBuf;
  uint64_t nsze = nsid == CSQ_NSID_SLM ? d->slm.n / 4096 : 0;
  memset(pBuf, 0, 4096);
  ns->nsze = htole64(nsze);
  ns->ncap = htole64(nsze);
  ns->lbaf[0].ds = 12;
  return 0;
}

/* Synchronous Identify by ioctl (controller node, else namespace node). */
static int identify_sync(dev_backend *d, uint8_t cns, uint32_t nsid, void *pBuf) {
  dev_nvme_cmd c;
  int rc;
  if (cns == NVME_IDENTIFY_CNS_NS) {
    if (nsid == CSQ_NSID_SLM || nsid == CSQ_NSID_CP) return id_host_ns(d, nsid, pBuf);
    if (nsid != CSQ_NSID_NVM) return CSQ_SC_INVALID_NS;
    dev_nvme_identify_cmd(cns, d->g.nsid, pBuf, &c);
  } else if (cns == NVME_IDENTIFY_CNS_CTRL) {
    dev_nvme_identify_cmd(cns, 0, pBuf, &c);
  } else {
    return CSQ_SC_INVALID_FIELD;
  }
  rc = dev_nvme_ioctl_cmd(d->ctrlFd >= 0 ? d->ctrlFd : d->fd, 1, &c, NULL);
  if (rc) return rc;
  if (cns == NVME_IDENTIFY_CNS_NS) id_ns_to_4k(d, pBuf);
  return 0;
}

static int nvb_identify(dev_backend *d, uint8_t cns, uint32_t nsid, void *pBuf) {
  int rc = identify_sync(d, cns, nsid, pBuf);
  return rc > 0 ? (int)(dev_nvme_status_sf(rc) & 0x7FFF) : rc;
}

/* ---- host engine: programs and memory range sets ------------------------- */

/* ---- host engine: Execute ------------------------------------------------ */

typedef struct nvb_exec_priv {
  dev_backend *d;
  dev_nvme_ring *ring;
} nvb_exec_priv;

/* Read LBA ranges back to back into pDst with several NVMe Reads in flight
** on ring (owned by the calling thread). Returns 0 or a csq status field. */
static int read_ranges_sync(dev_backend *d, dev_nvme_ring *ring, const csq_lba_range *a, int n,
                            uint8_t *pDst) {
  int i = 0, nOut = 0, failRes = 0;
  uint32_t iPart = 0;
  uint64_t off = 0;
  for (;;) {
    while (failRes == 0 && i < n && nOut < NVB_ENGINE_RING) {
      dev_nvme_cmd c;
      uint32_t nPart = dev_nvme_rw_parts(&d->g, a[i].nlb);
      dev_nvme_rw_part(&d->g, DEV_NVME_OP_READ, a[i].slba, a[i].nlb,
                       (uint64_t)(uintptr_t)(pDst + off), iPart, &c);
      if (dev_nvme_ring_prep(ring, d->fd, 0, &c, 0) != 0) break;
      nOut++;
      if (++iPart == nPart) {
        off += (uint64_t)a[i].nlb * CSQ_LBA_SIZE;
        iPart = 0;
        i++;
      }
    }
    if (nOut == 0) break;
    if (dev_nvme_ring_submit(ring) < 0 && failRes == 0) failRes = -EIO;
    {
      dev_nvme_cqe aC[16];
      int k, m = dev_nvme_ring_reap(ring, aC, 16, -1);
      if (m < 0) return CSQ_SC_INTERNAL; /* the ring is broken: in-flight reads are lost */
      for (k = 0; k < m; k++) {
        if (aC[k].res != 0 && failRes == 0) failRes = aC[k].res;
      }
      nOut -= m;
    }
  }
  if (failRes == 0) return 0;
  return failRes > 0 ? (int)(dev_nvme_status_sf(failRes) & 0x7FFF) : CSQ_SC_READ_ERROR;
}

/* dev_exec_ctx.xReadLba of the host engine. */
static int exec_read_lba(dev_exec_ctx *ctx, const csq_lba_range *a, int n, void *pDst) {
  nvb_exec_priv *pp = ctx->pDevPriv;
  uint8_t *pD = pDst;
  uint64_t nByte = 0;
  char zIgnore[8];
  int rc = dev_cp_slm_lba_ranges(pp->d->nBlocks, a, n, &nByte, zIgnore, sizeof(zIgnore));
  if (rc) return rc;
  if (!dev_cp_slm_holds(ctx->pSlm, ctx->nSlm, pD, nByte)) return CSQ_SC_SLM_RANGE;
  if (!pp->ring) return CSQ_SC_INTERNAL;
  rc = read_ranges_sync(pp->d, pp->ring, a, n, pD);
  if (rc == 0) {
    ctx->pStats->media_bytes_read += nByte;
    ctx->pStats->bytes_to_host += nByte; /* it crossed the link into host SLM */
  }
  return rc;
}

static void job_run(nvb_engine *e, dev_nvme_ring *ring, nvb_job *j) {
  dev_backend *d = e->d;
  const csq_sqe *p = &j->sqe;
  dev_stats local;
  nvb_exec_priv priv = {d, ring};
  dev_io_acct acct = {0};
  uint64_t ret = 0;
  char zDetail[200] = "";
  uint16_t sf = dev_cp_run_program(&j->run, p, d->slm.a, d->slm.n, e->iEngine, exec_read_lba, &priv,
                                   &local, &ret, zDetail, sizeof(zDetail));
  /* Link traffic of xReadLba goes through the acct (with the command). */
  acct.toHost = local.bytes_to_host;
  acct.mediaRead = local.media_bytes_read;
  local.bytes_to_host = 0;
  local.media_bytes_read = 0;
  dev_stats_add(j->q->pStats, &local);
  dev_stats_add(&d->stats, &local);
  dev_cp_exec_end(&d->cp, &j->run);
  post_cqe(j->q, p, sf, ret, &acct, zDetail);
  {
    uint64_t one = 1;
    /* Wake the reaper, then let go of the queue: once nJobs drops, the queue
    ** may close (and its eventfd with it). */
    if (write(j->q->evfd, &one, sizeof(one)) < 0) {
      /* eventfd writes fail only on counter overflow; the reader wakes anyway */
    }
    __atomic_fetch_sub(&j->q->nJobs, 1, __ATOMIC_RELEASE);
  }
}

static void *engine_main(void *pArg) {
  nvb_engine *e = pArg;
  dev_backend *d = e->d;
  dev_nvme_ring *ring = NULL;
  if (dev_nvme_ring_open(NVB_ENGINE_RING, &ring)) ring = NULL; /* xReadLba then fails */
  for (;;) {
    nvb_job *j = (nvb_job *)dev_cp_jobs_take(&d->jobs);
    if (!j) break; /* stopping and drained */
    job_run(e, ring, j);
    free(j);
  }
  dev_nvme_ring_close(ring);
  return NULL;
}

/* Validate an Execute and hand it to the engines. Returns 0 (the engine
** will complete it) or a status to complete with now. */
static uint16_t host_execute(dev_bqueue *q, const csq_sqe *p, dev_io_acct *pAcct, char *zDetail,
                             size_t nDetail) {
  dev_backend *d = q->d;
  nvb_job *j = calloc(1, sizeof(*j));
  if (!j) return CSQ_SC_INTERNAL;
  j->q = q;
  j->sqe = *p;
  uint16_t sf = dev_cp_exec_begin(&d->cp, p, &j->run, pAcct, zDetail, nDetail);
  if (sf) {
    free(j);
    return sf;
  }
  __atomic_fetch_add(&q->nJobs, 1, __ATOMIC_ACQUIRE);
  dev_cp_jobs_push(&d->jobs, &j->link);
  return 0;
}

/* ---- queue: passthrough commands ------------------------------------------ */

static void work_push(dev_bqueue *q, uint32_t i) {
  q->aCmd[i].bQueued = 1;
  q->aWork[(q->iWork + q->nWork++) % q->nCmd] = i;
}

static void cmd_free(dev_bqueue *q, nvb_cmd *c) {
  free(c->aRange);
  c->aRange = NULL;
  c->bLive = 0;
  q->aFree[q->nFree++] = (uint32_t)(c - q->aCmd);
}

/* Part iPart of a command forwarded to a device with csq compute: the SQE
** as it is, its data buffer at DPTR; an SLM Read/Write in maxXfer pieces. */
static void fwd_part(const dev_backend *d, const nvb_cmd *c, uint32_t iPart, dev_nvme_cmd *o) {
  const csq_sqe *p = &c->sqe;
  uint64_t off = (uint64_t)iPart * d->g.maxXfer;
  memset(o, 0, sizeof(*o));
  o->opcode = p->opcode;
  o->nsid = p->nsid;
  o->cdw2 = p->cdw2;
  o->cdw3 = p->cdw3;
  o->cdw10 = p->cdw10;
  o->cdw11 = p->cdw11;
  o->cdw12 = p->cdw12;
  o->cdw13 = p->cdw13;
  o->cdw14 = p->cdw14;
  o->cdw15 = p->cdw15;
  if (c->nByte == 0) return;
  o->addr = p->prp1 + off;
  o->data_len = (uint32_t)(c->nByte - off < d->g.maxXfer ? c->nByte - off : d->g.maxXfer);
  if (c->nPart > 1) { /* SLM Read/Write: the piece's own SLM address and length */
    uint64_t a = ((uint64_t)p->cdw11 << 32 | p->cdw10) + off;
    o->cdw10 = (uint32_t)a;
    o->cdw11 = (uint32_t)(a >> 32);
    o->cdw12 = o->data_len;
  }
}

/* The next passthrough command of c into *pOut; 0, or 1 if c has no more. */
static int cmd_next_part(dev_bqueue *q, nvb_cmd *c, dev_nvme_cmd *pOut) {
  dev_backend *d = q->d;
  const csq_sqe *p = &c->sqe;
  if (c->iNext >= c->nPart || c->res != 0) return 1;
  if (c->bFwd) {
    fwd_part(d, c, c->iNext, pOut);
  } else if (c->bAdmin) { /* Identify */
    uint32_t nsid = c->nsid == CSQ_NSID_NVM ? d->g.nsid : c->nsid;
    dev_nvme_identify_cmd((uint8_t)(p->cdw10 & 0xFF), nsid, (void *)(uintptr_t)p->prp1, pOut);
  } else if (c->aRange) { /* Memory Copy: walk the ranges */
    const csq_lba_range *r = &c->aRange[c->iRange];
    dev_nvme_rw_part(&d->g, DEV_NVME_OP_READ, r->slba, r->nlb,
                     (uint64_t)(uintptr_t)(d->slm.a + c->dst), c->iRangePart, pOut);
    if (++c->iRangePart == dev_nvme_rw_parts(&d->g, r->nlb)) {
      c->dst += (uint64_t)r->nlb * CSQ_LBA_SIZE;
      c->iRangePart = 0;
      c->iRange++;
    }
  } else if (p->opcode == CSQ_NVM_FLUSH) {
    dev_nvme_map_nvm(&d->g, p, pOut);
  } else {
    uint64_t slba = (uint64_t)p->cdw10 | ((uint64_t)p->cdw11 << 32);
    dev_nvme_rw_part(&d->g, c->nvmeOp, slba, (p->cdw12 & 0xFFFF) + 1, p->prp1, c->iNext, pOut);
  }
  c->iNext++;
  return 0;
}

static void cmd_finish(dev_bqueue *q, nvb_cmd *c);

/* Issue parts of queued commands while the ring has room; then submit. A
** command leaves the FIFO once all its parts are issued or one has failed
** (then, if none is still out, it completes here). */
static void pump(dev_bqueue *q) {
  int nPrep = 0;
  while (q->nWork > 0) {
    nvb_cmd *c = &q->aCmd[q->aWork[q->iWork]];
    dev_nvme_cmd nc;
    while (q->nRingOut < NVB_RING_ENTRIES && dev_nvme_ring_space(q->ring) > 0 &&
           cmd_next_part(q, c, &nc) == 0) {
      int fd = c->bAdmin ? q->d->ctrlFd : c->bFwd ? q->d->aNsFd[c->sqe.nsid] : q->d->fd;
      dev_nvme_ring_prep(q->ring, fd, c->bAdmin, &nc, (uint64_t)(c - q->aCmd));
      c->nOut++;
      q->nRingOut++;
      nPrep++;
    }
    if (c->iNext < c->nPart && c->res == 0) break; /* ring full: continue later */
    q->iWork = (q->iWork + 1) % q->nCmd;
    q->nWork--;
    c->bQueued = 0;
    if (c->nOut == 0) cmd_finish(q, c);
  }
  if (nPrep) {
    int rc = dev_nvme_ring_submit(q->ring);
    if (rc < 0)
      snprintf(q->zRingErr, sizeof(q->zRingErr), "io_uring submit failed: %s", strerror(-rc));
  }
}

/* All parts of c are back: complete it. */
static void cmd_finish(dev_bqueue *q, nvb_cmd *c) {
  dev_io_acct acct = {0};
  char zDetail[320] = "";
  uint16_t sf = 0;
  const csq_sqe *p = &c->sqe;
  if (c->bFwd) {
    if (c->res) {
      sf = dev_nvme_status_sf(c->res);
      dev_nvme_describe(0, p->opcode, c->res, zDetail, sizeof(zDetail));
    } else if (c->bFwdH2C) {
      acct.fromHost = c->nByte;
    } else {
      acct.toHost = c->nByte;
    }
    if (sf == 0 && p->nsid == CSQ_NSID_CP && p->opcode == CSQ_CP_EXECUTE) {
      dev_stats one = {.programs_executed = 1}; /* the device's own count stays there */
      dev_stats_add(q->pStats, &one);
      dev_stats_add(&q->d->stats, &one);
    }
    post_cqe(q, p, sf, c->nPart == 1 ? c->result : 0, &acct, zDetail);
    cmd_free(q, c);
    return;
  }
  if (c->res) {
    sf = dev_nvme_status_sf(c->res);
    dev_nvme_describe(c->bAdmin, c->bAdmin ? DEV_NVME_ADM_IDENTIFY : c->nvmeOp, c->res, zDetail,
                      sizeof(zDetail));
    if (!c->bAdmin && c->nvmeOp == DEV_NVME_OP_READ && (sf & 0x700) == 0x200)
      sf = CSQ_SC_READ_ERROR | (sf & CSQ_DNR); /* keep csq's media error name */
  } else if (c->bAdmin) {
    if ((p->cdw10 & 0xFF) == NVME_IDENTIFY_CNS_NS) id_ns_to_4k(q->d, (void *)(uintptr_t)p->prp1);
    acct.toHost = 4096;
  } else if (c->nvmeOp == DEV_NVME_OP_READ) {
    acct.mediaRead = acct.toHost = c->nByte;
  } else if (c->nvmeOp == DEV_NVME_OP_WRITE) {
    acct.mediaWritten = acct.fromHost = c->nByte;
  }
  post_cqe(q, p, sf, c->nPart == 1 ? c->result : 0, &acct, zDetail);
  cmd_free(q, c);
}

static void on_ring_cqe(dev_bqueue *q, const dev_nvme_cqe *e) {
  nvb_cmd *c;
  if (e->userData == NVB_EVENT_TAG) {
    q->bEvArmed = 0;
    return;
  }
  q->nRingOut--;
  if (e->userData >= q->nCmd) return;
  c = &q->aCmd[e->userData];
  c->nOut--;
  if (e->res != 0 && c->res == 0) c->res = e->res;
  c->result = e->result;
  if (c->nOut == 0 && !c->bQueued) cmd_finish(q, c);
}

/* ---- queue: submission ------------------------------------------------------ */

/* A device with csq compute: its admin commands by ioctl (completed here,
** returns 1), its CP and SLM commands as passthrough parts (returns 0). */
static int submit_fwd(dev_bqueue *q, const csq_sqe *p, nvb_cmd *c) {
  dev_backend *d = q->d;
  uint32_t nLen = 0;
  int dir = tcp_cmd_xfer(p, dev_sqe_is_admin(p), &nLen);
  if (dir < 0 || (dir != TCP_XFER_NONE && !p->prp1)) {
    post_cqe(q, p, CSQ_SC_INVALID_FIELD | CSQ_DNR, 0, &(dev_io_acct){0},
             dir < 0 ? "its data is longer than a command may carry" : "no data buffer");
    cmd_free(q, c);
    return 1;
  }
  c->bFwd = 1;
  c->bFwdH2C = dir == TCP_XFER_H2C;
  c->nByte = nLen;
  c->nPart = 1;
  if (p->nsid == CSQ_NSID_SLM && (p->opcode == CSQ_SLM_READ || p->opcode == CSQ_SLM_WRITE) &&
      nLen > d->g.maxXfer)
    c->nPart = (nLen + d->g.maxXfer - 1) / d->g.maxXfer;
  if (dev_sqe_is_admin(p)) {
    dev_nvme_cmd nc;
    dev_io_acct acct = {0};
    char zDetail[320] = "";
    uint64_t result = 0;
    uint16_t sf = 0;
    fwd_part(d, c, 0, &nc);
    int rc = dev_nvme_ioctl_cmd(d->ctrlFd >= 0 ? d->ctrlFd : d->fd, 1, &nc, &result);
    if (rc) {
      sf = dev_nvme_status_sf(rc);
      dev_nvme_describe(1, p->opcode, rc, zDetail, sizeof(zDetail));
    } else if (c->bFwdH2C) {
      acct.fromHost = nLen;
    } else {
      acct.toHost = nLen;
    }
    post_cqe(q, p, sf, result, &acct, zDetail);
    cmd_free(q, c);
    return 1;
  }
  return 0;
}

/* Handle a command the host answers without the device. Returns 1 if it was
** completed (or handed to an engine), 0 if it needs passthrough parts. */
static int submit_host(dev_bqueue *q, const csq_sqe *p, nvb_cmd *c) {
  dev_backend *d = q->d;
  dev_io_acct acct = {0};
  uint64_t result = 0;
  char zDetail[256] = "";
  uint16_t sf = 0;
  uint64_t addr = (uint64_t)p->cdw10 | ((uint64_t)p->cdw11 << 32);
  if (d->bDevCs && (p->nsid == CSQ_NSID_CP || p->nsid == CSQ_NSID_SLM ||
                    (dev_sqe_is_admin(p) && p->opcode != CSQ_ADM_IDENTIFY)))
    return submit_fwd(q, p, c);
  if (dev_sqe_is_admin(p)) {
    switch (p->opcode) {
    case CSQ_ADM_IDENTIFY: {
      uint8_t cns = (uint8_t)(p->cdw10 & 0xFF);
      if (!p->prp1)
        sf = CSQ_SC_INVALID_FIELD;
      else if (cns == NVME_IDENTIFY_CNS_NS && (p->nsid == CSQ_NSID_SLM || p->nsid == CSQ_NSID_CP))
        id_host_ns(d, p->nsid, (void *)(uintptr_t)p->prp1);
      else if (cns != NVME_IDENTIFY_CNS_NS && cns != NVME_IDENTIFY_CNS_CTRL)
        sf = CSQ_SC_INVALID_FIELD;
      else if (cns == NVME_IDENTIFY_CNS_NS && p->nsid != CSQ_NSID_NVM)
        sf = CSQ_SC_INVALID_NS;
      else if (d->ctrlFd >= 0) {
        c->bAdmin = 1;
        c->nPart = 1;
        c->nsid = p->nsid;
        return 0;
      } else { /* no controller node: a synchronous ioctl on the namespace */
        int rc = identify_sync(d, cns, p->nsid, (void *)(uintptr_t)p->prp1);
        if (rc) {
          sf = dev_nvme_status_sf(rc);
          dev_nvme_describe(1, DEV_NVME_ADM_IDENTIFY, rc, zDetail, sizeof(zDetail));
        }
      }
      if (sf == 0) acct.toHost = 4096;
      break;
    }
    case CSQ_ADM_LOAD_PROGRAM:
    case CSQ_ADM_PROGRAM_ACTIVATION:
    case CSQ_ADM_MRS_MGMT:
      sf = dev_cp_admin(&d->cp, p, &result, &acct, zDetail, sizeof(zDetail));
      break;
    }
  } else if (p->nsid == CSQ_NSID_NVM) {
    switch (p->opcode) {
    case CSQ_NVM_READ:
    case CSQ_NVM_WRITE: {
      uint32_t nlb = (p->cdw12 & 0xFFFF) + 1;
      if (!lba_ok(d, addr, nlb)) {
        snprintf(zDetail, sizeof(zDetail), "LBAs %llu..%llu, namespace has %llu blocks", ULL(addr),
                 ULL(addr + nlb - 1), ULL(d->nBlocks));
        sf = CSQ_SC_LBA_RANGE;
      } else if (!p->prp1) {
        sf = CSQ_SC_INVALID_FIELD;
      } else {
        c->nvmeOp = p->opcode == CSQ_NVM_READ ? DEV_NVME_OP_READ : DEV_NVME_OP_WRITE;
        c->nPart = dev_nvme_rw_parts(&d->g, nlb);
        c->nByte = (uint64_t)nlb * CSQ_LBA_SIZE;
        return 0;
      }
      break;
    }
    case CSQ_NVM_FLUSH:
      c->nvmeOp = DEV_NVME_OP_FLUSH;
      c->nPart = 1;
      return 0;
    case CSQ_NVM_RESV_ACQUIRE:
      /* No NVMe reservations needed: flock() serialises csq processes on
      ** this host, the holder pointer the queues of this process. */
      if ((p->cdw10 & 7) != 0) {
        sf = CSQ_SC_INVALID_FIELD;
        break;
      }
      pthread_mutex_lock(&d->resvMutex);
      if (d->pResvHolder == q) {
      } else if (d->pResvHolder) {
        snprintf(zDetail, sizeof(zDetail), "held by another queue (connection) of this process");
        sf = CSQ_SC_RESV_CONFLICT;
      } else if (flock(d->fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
          snprintf(zDetail, sizeof(zDetail), "held by another process");
          sf = CSQ_SC_RESV_CONFLICT;
        } else {
          snprintf(zDetail, sizeof(zDetail), "flock failed: %s", strerror(errno));
          sf = CSQ_SC_INTERNAL;
        }
      } else {
        d->pResvHolder = q;
      }
      pthread_mutex_unlock(&d->resvMutex);
      break;
    case CSQ_NVM_RESV_RELEASE:
      pthread_mutex_lock(&d->resvMutex);
      if (d->pResvHolder == q) {
        flock(d->fd, LOCK_UN);
        d->pResvHolder = NULL;
      }
      pthread_mutex_unlock(&d->resvMutex);
      break;
    default:
      sf = CSQ_SC_INVALID_OPCODE;
    }
  } else if (p->nsid == CSQ_NSID_SLM) {
    /* host memory: SLM Read and Write move nothing over the link */
    sf = dev_cp_slm_cmd(&d->slm, p, NULL, zDetail, sizeof(zDetail));
    if (sf == DEV_CP_SLM_FROM_NVM) {
      /* NVM -> SLM: NVMe Reads straight into host SLM. */
      int nRange = (int)(p->cdw12 & 0xFF) + 1;
      uint64_t nByte = 0;
      c->aRange = malloc(nRange * sizeof(csq_lba_range));
      if (!c->aRange) {
        sf = CSQ_SC_INTERNAL;
      } else {
        memcpy(c->aRange, (const void *)(uintptr_t)p->prp1, nRange * sizeof(csq_lba_range));
        c->nRange = nRange;
        sf = dev_cp_slm_lba_ranges(d->nBlocks, c->aRange, nRange, &nByte, zDetail, sizeof(zDetail));
        if (sf == 0) sf = dev_cp_slm_range(&d->slm, addr, nByte, zDetail, sizeof(zDetail));
        if (sf) {
          free(c->aRange);
          c->aRange = NULL;
        }
      }
      if (sf == 0) {
        for (int i = 0; i < nRange; i++) c->nPart += dev_nvme_rw_parts(&d->g, c->aRange[i].nlb);
        c->nvmeOp = DEV_NVME_OP_READ;
        c->nByte = nByte;
        c->dst = addr;
        return 0;
      }
    }
  } else if (p->nsid == CSQ_NSID_CP) {
    sf = host_execute(q, p, &acct, zDetail, sizeof(zDetail));
    if (sf == 0) {
      cmd_free(q, c); /* the engine job carries the command from here */
      return 1;
    }
  } else {
    sf = CSQ_SC_INVALID_NS;
  }
  post_cqe(q, p, sf, result, &acct, zDetail);
  cmd_free(q, c);
  return 1;
}

static int nvb_submit(dev_bqueue *q, const csq_sqe *pSqe) {
  nvb_cmd *c;
  if (q->nFree == 0) return -EAGAIN;
  c = &q->aCmd[q->aFree[--q->nFree]];
  memset(c, 0, sizeof(*c));
  c->sqe = *pSqe;
  c->bLive = 1;
  if (submit_host(q, pSqe, c)) return 0;
  work_push(q, (uint32_t)(c - q->aCmd));
  pump(q);
  return 0;
}

/* Take every completion already on the ring, then refill it. */
static void drain_ring(dev_bqueue *q) {
  dev_nvme_cqe a[32];
  int n, i;
  while ((n = dev_nvme_ring_reap(q->ring, a, 32, 0)) > 0)
    for (i = 0; i < n; i++) on_ring_cqe(q, &a[i]);
  pump(q);
}

static int pop_ready(dev_bqueue *q, csq_cqe *pCqe) {
  int b = 0;
  pthread_mutex_lock(&q->readyMutex);
  if (q->nReady > 0) {
    *pCqe = q->aReady[0];
    memmove(q->aReady, q->aReady + 1, (q->nReady - 1) * sizeof(csq_cqe));
    q->nReady--;
    b = 1;
  }
  pthread_mutex_unlock(&q->readyMutex);
  return b;
}

static int nvb_reap(dev_bqueue *q, csq_cqe *pCqe, int64_t timeoutNs) {
  int64_t tEnd = dev_now_ns() + (timeoutNs > 0 ? timeoutNs : 0);
  for (;;) {
    dev_nvme_cqe a[32];
    int64_t now;
    int n, i;
    if (pop_ready(q, pCqe)) return 0;
    drain_ring(q);
    if (pop_ready(q, pCqe)) return 0;
    now = dev_now_ns();
    if (now >= tEnd) return -ETIMEDOUT;
    if (__atomic_load_n(&q->nJobs, __ATOMIC_ACQUIRE) > 0 && !q->bEvArmed) {
      if (dev_nvme_ring_prep_read(q->ring, q->evfd, &q->evBuf, sizeof(q->evBuf), NVB_EVENT_TAG) ==
          0) {
        q->bEvArmed = 1;
        dev_nvme_ring_submit(q->ring);
        continue; /* the engine may have posted meanwhile */
      }
    }
    if (q->nRingOut == 0 && !q->bEvArmed) {
      /* Nothing can complete: sleep out the wait rather than spin. */
      struct timespec ts = {(tEnd - now) / 1000000000, (tEnd - now) % 1000000000};
      nanosleep(&ts, NULL);
      continue;
    }
    n = dev_nvme_ring_reap(q->ring, a, 32, tEnd - now);
    for (i = 0; i < n; i++) on_ring_cqe(q, &a[i]);
    if (n > 0) pump(q);
  }
}

static void nvb_queue_close(dev_bqueue *q);

/* The queue and its per-command arrays come from one allocation, so that
** set-up frees through nvb_queue_close whatever step failed. */
static int nvb_queue_open(dev_backend *d, uint32_t nDepth, dev_stats *pStats, dev_bqueue **ppQ) {
  uint32_t n = nDepth ? nDepth : 256;
  dev_bqueue *q = calloc(1, sizeof(*q) + n * (sizeof(nvb_cmd) + 2 * sizeof(uint32_t)));
  uint32_t i;
  int rc;
  *ppQ = NULL;
  if (!q) return -ENOMEM;
  q->d = d;
  q->pStats = pStats;
  q->nCmd = n;
  q->aCmd = (nvb_cmd *)&q[1];
  q->aFree = (uint32_t *)&q->aCmd[n];
  q->aWork = &q->aFree[n];
  q->evfd = -1;
  pthread_mutex_init(&q->readyMutex, NULL);
  dev_errlog_init(&q->errLog);
  for (i = 0; i < q->nCmd; i++) q->aFree[i] = q->nCmd - 1 - i;
  q->nFree = q->nCmd;
  q->evfd = eventfd(0, EFD_CLOEXEC);
  rc = q->evfd < 0 ? -errno : dev_nvme_ring_open(NVB_RING_ENTRIES, &q->ring);
  if (rc) {
    nvb_queue_close(q);
    return rc;
  }
  *ppQ = q;
  return 0;
}

/* Wait for the passthrough commands and engine jobs of q, then free it.
** Also the destructor of a queue whose nvb_queue_open failed (nothing in
** flight, no ring or no eventfd). */
static void nvb_queue_close(dev_bqueue *q) {
  dev_backend *d = q->d;
  uint32_t i;
  while (q->nRingOut > 0 || q->nWork > 0 || __atomic_load_n(&q->nJobs, __ATOMIC_ACQUIRE) > 0 ||
         q->bEvArmed) {
    dev_nvme_cqe a[32];
    int n, k;
    if (q->bEvArmed && q->nRingOut == 0 && __atomic_load_n(&q->nJobs, __ATOMIC_ACQUIRE) == 0) {
      uint64_t one = 1; /* complete our own armed eventfd read */
      if (write(q->evfd, &one, sizeof(one)) < 0) break;
    }
    pump(q);
    n = dev_nvme_ring_reap(q->ring, a, 32, 10000000);
    for (k = 0; k < n; k++) on_ring_cqe(q, &a[k]);
  }
  pthread_mutex_lock(&d->resvMutex);
  if (d->pResvHolder == q) {
    flock(d->fd, LOCK_UN);
    d->pResvHolder = NULL;
  }
  pthread_mutex_unlock(&d->resvMutex);
  for (i = 0; i < q->nCmd; i++) free(q->aCmd[i].aRange);
  dev_nvme_ring_close(q->ring);
  if (q->evfd >= 0) close(q->evfd);
  pthread_mutex_destroy(&q->readyMutex);
  dev_errlog_free(&q->errLog);
  free(q->aReady);
  free(q);
}

/* ---- open / close --------------------------------------------------------- */

static void nvb_close(dev_backend *d);

static int fail_msg(char **pzErr, int rc, const char *zFmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_msg(char **pzErr, int rc, const char *zFmt, ...) {
  va_list ap;
  if (pzErr && !*pzErr) {
    va_start(ap, zFmt);
    *pzErr = dev_vmprintf(zFmt, ap);
    va_end(ap);
  }
  return rc;
}

/* A device with csq compute: open the passthrough nodes of its CP and SLM
** namespaces, the siblings /dev/ngXnK of zPath (K is the kernel's instance,
** usually but not always the nsid: each node is asked its nsid). */
static int open_ns_siblings(dev_backend *d, const char *zPath, char **pzErr) {
  const char *zBase = strrchr(zPath, '/');
  unsigned c, ns;
  char tail;
  zBase = zBase ? zBase + 1 : zPath;
  if (d->g.nsid != CSQ_NSID_NVM)
    return fail_msg(pzErr, -EINVAL,
                    "%s is namespace %u of a device with csq compute: name its NVM namespace "
                    "(nsid 1)",
                    zPath, d->g.nsid);
  if (sscanf(zBase, "ng%un%u%c", &c, &ns, &tail) != 2)
    return fail_msg(pzErr, -EINVAL, "%s is not named /dev/ngXnY", zPath);
  for (unsigned k = 1; k <= 64 && (d->aNsFd[CSQ_NSID_CP] < 0 || d->aNsFd[CSQ_NSID_SLM] < 0); k++) {
    char z[PATH_MAX];
    int fd, nsid;
    snprintf(z, sizeof(z), "%.*sng%un%u", (int)(zBase - zPath), zPath, c, k);
    fd = open(z, O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;
    nsid = dev_nvme_ioctl_nsid(fd);
    if ((nsid == CSQ_NSID_CP || nsid == CSQ_NSID_SLM) && d->aNsFd[nsid] < 0)
      d->aNsFd[nsid] = fd;
    else
      close(fd);
  }
  if (d->aNsFd[CSQ_NSID_CP] < 0 || d->aNsFd[CSQ_NSID_SLM] < 0)
    return fail_msg(pzErr, -ENOENT,
                    "%s is a device with csq compute, but the nodes of its %s namespace "
                    "(nsid %u) are missing beside it: csq's programs reach the device "
                    "only through them",
                    zPath, d->aNsFd[CSQ_NSID_CP] < 0 ? "Computational Programs" : "SLM",
                    d->aNsFd[CSQ_NSID_CP] < 0 ? CSQ_NSID_CP : CSQ_NSID_SLM);
  d->aNsFd[CSQ_NSID_NVM] = d->fd;
  return 0;
}

/* "/dev/ng3n1" -> "/dev/nvme3" (the controller of a generic namespace node). */
static int ctrl_path(const char *zPath, char *zOut, size_t n) {
  const char *zBase = strrchr(zPath, '/');
  unsigned c, ns;
  char tail;
  zBase = zBase ? zBase + 1 : zPath;
  if (sscanf(zBase, "ng%un%u%c", &c, &ns, &tail) != 2) return -1;
  snprintf(zOut, n, "/dev/nvme%u", c);
  return 0;
}

static int nvb_open(const char *zPath, const dev_options *pOpt, dev_backend **ppB, char **pzErr) {
  dev_backend *d = calloc(1, sizeof(*d));
  struct stat st;
  char zCtrl[64];
  void *pId = NULL;
  dev_nvme_ring *probe = NULL;
  int rc, i, nsid;
  *ppB = NULL;
  if (!d) return -ENOMEM;
  d->fd = d->ctrlFd = -1;
  for (i = 0; i < 4; i++) d->aNsFd[i] = -1;
  dev_cp_init(&d->cp, 0, "the host engine");
  pthread_mutex_init(&d->resvMutex, NULL);
  dev_cp_jobs_init(&d->jobs);
  d->zPath = strdup(zPath);
  pId = aligned_alloc(4096, 4096);
  if (!d->zPath || !pId) {
    rc = -ENOMEM;
    goto fail;
  }
  d->fd = open(zPath, O_RDWR | O_CLOEXEC);
  if (d->fd < 0) {
    rc = -errno;
    fail_msg(pzErr, rc, "cannot open NVMe namespace %s: %s%s", zPath, strerror(-rc),
             rc == -EACCES || rc == -EPERM
                 ? " (passthrough needs read-write access to the /dev/ngXnY node)"
             : rc == -ENOENT ? " (the generic namespace nodes are /dev/ngXnY, Linux 5.13+)"
                             : "");
    goto fail;
  }
  if (fstat(d->fd, &st) == 0 && !S_ISCHR(st.st_mode)) {
    rc = fail_msg(pzErr, -ENOTTY,
                  "%s is not an NVMe generic char device: use /dev/ngXnY (for "
                  "/dev/nvmeXnY the node is /dev/ngXnY)",
                  zPath);
    goto fail;
  }
  nsid = dev_nvme_ioctl_nsid(d->fd);
  if (nsid <= 0) {
    rc = nsid < 0 ? nsid : -ENOTTY;
    fail_msg(pzErr, rc, "%s is not an NVMe namespace: %s", zPath, strerror(-rc));
    goto fail;
  }
  d->g.nsid = (uint32_t)nsid;
  /* Admin commands go to the controller; without it (permissions), Identify
  ** goes by ioctl through the namespace node. */
  if (ctrl_path(zPath, zCtrl, sizeof(zCtrl)) == 0) d->ctrlFd = open(zCtrl, O_RDWR | O_CLOEXEC);

  /* Controller: MDTS bounds the transfer per command. */
  {
    dev_nvme_cmd c;
    char zWhy[256];
    dev_nvme_identify_cmd(NVME_IDENTIFY_CNS_CTRL, 0, pId, &c);
    rc = dev_nvme_ioctl_cmd(d->ctrlFd >= 0 ? d->ctrlFd : d->fd, 1, &c, NULL);
    if (rc) {
      dev_nvme_describe(1, DEV_NVME_ADM_IDENTIFY, rc, zWhy, sizeof(zWhy));
      rc = fail_msg(pzErr, rc > 0 ? (int)(dev_nvme_status_sf(rc) & 0x7FFF) : rc,
                    "cannot identify the controller of %s: %s", zPath, zWhy);
      goto fail;
    }
    /* CAP.MPSMIN is not visible from user space; 4 KiB is the common minimum. */
    d->g.maxXfer = dev_nvme_max_xfer(((struct nvme_id_ctrl *)pId)->mdts, 4096);
    {
      csq_id_vs vs;
      memcpy(&vs, ((struct nvme_id_ctrl *)pId)->vs, sizeof(vs));
      d->bDevCs = le32toh(vs.magic) == CSQ_ID_MAGIC;
    }
    dev_nvme_identify_cmd(NVME_IDENTIFY_CNS_NS, d->g.nsid, pId, &c);
    rc = dev_nvme_ioctl_cmd(d->ctrlFd >= 0 ? d->ctrlFd : d->fd, 1, &c, NULL);
    if (rc) {
      dev_nvme_describe(1, DEV_NVME_ADM_IDENTIFY, rc, zWhy, sizeof(zWhy));
      rc = fail_msg(pzErr, rc > 0 ? (int)(dev_nvme_status_sf(rc) & 0x7FFF) : rc,
                    "cannot identify namespace %d of %s: %s", nsid, zPath, zWhy);
      goto fail;
    }
  }
  {
    struct nvme_id_ns *ns = pId;
    int iFmt = (ns->flbas & 0xF) | ((ns->flbas >> 5) & 3) << 4;
    uint32_t ds = ns->lbaf[iFmt].ds, ms = le16toh(ns->lbaf[iFmt].ms);
    if (ds < 9 || ds > 12 || dev_nvme_lba_shift(1u << ds, &d->g.lbaShift) != 0) {
      rc = fail_msg(pzErr, -EINVAL,
                    "%s is formatted with %llu-byte LBAs; csq needs 512 to 4096 bytes (a power of "
                    "two) to build its 4096-byte blocks: reformat the namespace (nvme format)",
                    zPath, ds < 64 ? 1ull << ds : 0ull);
      goto fail;
    }
    if (ms != 0) {
      rc = fail_msg(pzErr, -EINVAL,
                    "%s is formatted with %u bytes of metadata per LBA; csq needs "
                    "a format without metadata: reformat the namespace",
                    zPath, ms);
      goto fail;
    }
    d->nBlocks = le64toh(ns->nsze) >> (12 - d->g.lbaShift);
  }
  /* Passthrough on io_uring needs 128-byte SQEs (Linux 5.19+). */
  rc = dev_nvme_ring_open(4, &probe);
  if (rc) {
    fail_msg(pzErr, rc,
             "cannot set up io_uring passthrough for %s: %s (needs Linux 5.19+ with "
             "IORING_SETUP_SQE128)",
             zPath, strerror(-rc));
    goto fail;
  }
  dev_nvme_ring_close(probe);
  if (d->bDevCs) {
    rc = open_ns_siblings(d, zPath, pzErr);
    if (rc) goto fail;
    free(pId);
    *ppB = d;
    return 0; /* the device's own engines and SLM: none here */
  }

  rc = dev_cp_slm_map(&d->slm, pOpt->nSlmBytes);
  d->cp.nSlm = d->slm.n;
  if (rc) {
    rc = fail_msg(pzErr, rc, "cannot map %llu bytes of host SLM for %s", ULL(d->slm.n), zPath);
    goto fail;
  }
  d->nEngine = dev_cp_engines(pOpt->nEngines);
  d->aEngine = calloc(d->nEngine, sizeof(nvb_engine));
  if (!d->aEngine) {
    rc = -ENOMEM;
    goto fail;
  }
  for (i = 0; i < d->nEngine; i++) {
    d->aEngine[i].d = d;
    d->aEngine[i].iEngine = i;
    rc = -pthread_create(&d->aEngine[i].thread, NULL, engine_main, &d->aEngine[i]);
    if (rc) goto fail;
    d->aEngine[i].bStarted = 1;
  }
  free(pId);
  *ppB = d;
  return 0;
fail:
  fail_msg(pzErr, rc, "cannot open NVMe namespace %s: %s", zPath, rc < 0 ? strerror(-rc) : "error");
  free(pId);
  nvb_close(d);
  return rc;
}

static void nvb_close(dev_backend *d) {
  int i;
  if (!d) return;
  dev_cp_jobs_stop(&d->jobs);
  for (i = 0; d->aEngine && i < d->nEngine; i++)
    if (d->aEngine[i].bStarted) pthread_join(d->aEngine[i].thread, NULL);
  free(d->aEngine);
  dev_cp_free(&d->cp);
  dev_cp_slm_unmap(&d->slm);
  if (d->ctrlFd >= 0) close(d->ctrlFd);
  if (d->aNsFd[CSQ_NSID_CP] >= 0) close(d->aNsFd[CSQ_NSID_CP]);
  if (d->aNsFd[CSQ_NSID_SLM] >= 0) close(d->aNsFd[CSQ_NSID_SLM]);
  if (d->fd >= 0) close(d->fd);
  pthread_mutex_destroy(&d->resvMutex);
  dev_cp_jobs_destroy(&d->jobs);
  free(d->zPath);
  free(d);
}

static void nvb_stats(dev_backend *d, dev_stats *pOut) {
  dev_stats_snapshot(pOut, &d->stats);
}

static void nvb_detail(dev_bqueue *q, uint16_t cid, uint16_t sf, char *zOut, size_t nOut) {
  dev_errlog_find(&q->errLog, cid, sf, zOut, nOut);
  if (!zOut[0] && q->zRingErr[0]) snprintf(zOut, nOut, "%s", q->zRingErr);
}

const dev_backend_ops dev_nvme_backend = {
    "nvme",     nvb_open, nvb_close, nvb_identify, nvb_queue_open, nvb_queue_close,
    nvb_submit, nvb_reap, nvb_stats, nvb_detail,   NULL, /* no faults */
};

const struct dev_backend_ops *dev_nvme_backend_get(void) {
  return &dev_nvme_backend;
}
