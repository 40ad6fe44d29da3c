/*
** device/emu/emu_io.c - I/O commands of the emulated device: NVM Read, Write,
** Flush, Reservation Acquire/Release; SLM Memory Copy, Read, Write, Fill;
** CP Execute Program. Each runs on the controller (small ones) or on a
** compute engine, checks every field against the device's bounds, moves
** the data, and completes through emu_complete(). Layouts: device/link/cmd.h.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "device/emu/emu.h"

#define ULL(x) ((unsigned long long)(x))

int emu_io_is_quick(const csq_sqe *p) {
  if (p->nsid == CSQ_NSID_NVM) {
    if (p->opcode == CSQ_NVM_READ || p->opcode == CSQ_NVM_WRITE)
      return ((p->cdw12 & 0xFFFF) + 1u) * CSQ_LBA_SIZE <= EMU_INLINE_BYTES;
    return p->opcode != CSQ_NVM_FLUSH; /* fdatasync may take milliseconds */
  }
  if (p->nsid == CSQ_NSID_SLM) {
    if (p->opcode == CSQ_SLM_READ || p->opcode == CSQ_SLM_WRITE || p->opcode == CSQ_SLM_FILL)
      return p->cdw12 <= 4 * EMU_INLINE_BYTES;
    if (p->opcode == CSQ_SLM_COPY) {
      /* a copy of a few blocks in one range (the statement-start look at
      ** the superblocks) is cheaper here than an engine's wake-up */
      const csq_lba_range *a = (const csq_lba_range *)(uintptr_t)p->prp1;
      return a && (p->cdw12 & 0xFFF) == 0 && a[0].nlb <= EMU_QUICK_COPY_BLOCKS;
    }
    return 1;
  }
  if (p->nsid == CSQ_NSID_CP) return p->opcode != CSQ_CP_EXECUTE;
  return 1; /* invalid namespace: answered at once */
}

static int lba_ok(const dev_backend *d, uint64_t slba, uint64_t nlb) {
  return nlb > 0 && slba < d->nBlocks && nlb <= d->nBlocks - slba;
}

/* ---- NVM namespace ------------------------------------------------------ */

/* io_nvm's answer when an NVM Read went asynchronous: nvm_read_done
** completes the command later (not an NVMe status: those fit in 11 bits). */
#define EMU_SC_PENDING 0xFFFFu

/* The end of an NVM Read of nByte into pBuf whose media read returned rc:
** the status, an injected corruption, the counters. */
static uint16_t nvm_read_end(int rc, void *pBuf, uint64_t nByte, const dev_fault_hit *pHit,
                             dev_io_acct *pAcct, char *zDetail, size_t nDetail) {
  if (rc) {
    snprintf(zDetail, nDetail, "media read failed: %s", strerror(-rc));
    return CSQ_SC_READ_ERROR;
  }
  if (pHit && pHit->action == DEV_FAULT_CORRUPT) dev_fault_corrupt(pHit, pBuf, nByte);
  pAcct->mediaRead += nByte;
  pAcct->toHost += nByte;
  return CSQ_SC_SUCCESS;
}

/* An NVM Read in flight on a controller thread's media context. */
typedef struct nvm_aread {
  dev_bqueue *q; /* kept alive by the command's count in q->nInflight */
  csq_sqe sqe;
  int bHit;
  dev_fault_hit hit;
} nvm_aread;

/* dev_mio_done_fn of an asynchronous NVM Read: complete the command, free
** its nvm_aread. Runs on the thread that started it (dev_mio_reap). */
static void nvm_read_done(void *pCtx, int rc) {
  nvm_aread *a = pCtx;
  dev_io_acct acct = {0};
  char zDetail[256] = "";
  uint64_t nByte = ((uint64_t)(a->sqe.cdw12 & 0xFFFF) + 1) * CSQ_LBA_SIZE;
  uint16_t sf = nvm_read_end(rc, (void *)(uintptr_t)a->sqe.prp1, nByte, a->bHit ? &a->hit : NULL,
                             &acct, zDetail, sizeof(zDetail));
  emu_complete(a->q, &a->sqe, sf, 0, &acct, zDetail);
  free(a);
}

/* Start the media read of a checked NVM Read without waiting for it, where
** the thread's media context reaps asynchronous reads and the command has
** no injected fault other than a corruption. 1 if started (the command is
** nvm_read_done's now), 0 if the caller must read synchronously. */
static int nvm_read_start(dev_bqueue *q, const csq_sqe *p, dev_mio *pMio, const dev_fault_hit *pHit,
                          uint64_t slba, uint32_t nlb) {
  nvm_aread *a;
  if (!dev_mio_async(pMio) || (pHit && pHit->action != DEV_FAULT_CORRUPT)) return 0;
  a = malloc(sizeof(*a));
  if (!a) return 0;
  a->q = q;
  a->sqe = *p;
  a->bHit = pHit != NULL;
  if (pHit) a->hit = *pHit;
  if (dev_mio_read_start(pMio, slba, nlb, (void *)(uintptr_t)p->prp1, nvm_read_done, a) == 0)
    return 1;
  free(a);
  return 0;
}

static uint16_t io_nvm(dev_bqueue *q, const csq_sqe *p, dev_mio *pMio, const dev_fault_hit *pHit,
                       dev_io_acct *pAcct, char *zDetail, size_t nDetail) {
  dev_backend *d = q->pDev;
  uint64_t slba = (uint64_t)p->cdw10 | ((uint64_t)p->cdw11 << 32);
  uint32_t nlb = (p->cdw12 & 0xFFFF) + 1;
  uint64_t nByte = (uint64_t)nlb * CSQ_LBA_SIZE;
  int bCorrupt = pHit && pHit->action == DEV_FAULT_CORRUPT;
  int rc;
  switch (p->opcode) {
  case CSQ_NVM_READ:
  case CSQ_NVM_WRITE:
    if (!lba_ok(d, slba, nlb)) {
      snprintf(zDetail, nDetail, "LBAs %llu..%llu, namespace has %llu blocks", ULL(slba),
               ULL(slba + nlb - 1), ULL(d->nBlocks));
      return CSQ_SC_LBA_RANGE;
    }
    if (!p->prp1) return CSQ_SC_INVALID_FIELD;
    if (p->opcode == CSQ_NVM_READ) {
      /* Straight into the host buffer the command names, no bounce copy
      ** (except O_DIRECT into unaligned memory, inside dev_mio_read). */
      csq_lba_range r = {CSQ_NSID_NVM, nlb, slba};
      void *pBuf = (void *)(uintptr_t)p->prp1;
      if (nvm_read_start(q, p, pMio, pHit, slba, nlb)) return EMU_SC_PENDING;
      rc = dev_mio_read(pMio, &r, 1, pBuf);
      return nvm_read_end(rc, pBuf, nByte, pHit, pAcct, zDetail, nDetail);
    } else {
      const void *pSrc = (const void *)(uintptr_t)p->prp1;
      void *pTmp = NULL;
      if (dev_media_read_only(d->pMedia)) {
        snprintf(zDetail, nDetail, "the image is open read-only (this process may not write it)");
        return CSQ_SC_WRITE_PROTECTED;
      }
      if (pHit && pHit->action == DEV_FAULT_SHORT) {
        uint32_t k = (uint32_t)(pHit->rnd % nlb);
        rc = k ? dev_mio_write(pMio, slba, k, pSrc) : 0;
        pAcct->mediaWritten += (uint64_t)k * CSQ_LBA_SIZE;
        pAcct->fromHost += nByte;
        snprintf(zDetail, nDetail, "injected fault: short write, %u of %u blocks written%s", k, nlb,
                 rc ? " (and the media write failed)" : "");
        return CSQ_SC_WRITE_FAULT;
      }
      if (bCorrupt) { /* store a damaged copy, as a failing device would */
        pTmp = malloc(nByte);
        if (!pTmp) return CSQ_SC_INTERNAL;
        memcpy(pTmp, pSrc, nByte);
        dev_fault_corrupt(pHit, pTmp, nByte);
        pSrc = pTmp;
      }
      rc = dev_mio_write(pMio, slba, nlb, pSrc);
      free(pTmp);
      if (rc) {
        snprintf(zDetail, nDetail, "media write failed: %s", strerror(-rc));
        return rc == -ENOSPC ? CSQ_SC_CAPACITY : CSQ_SC_WRITE_FAULT;
      }
      pAcct->mediaWritten += nByte;
      pAcct->fromHost += nByte;
    }
    return CSQ_SC_SUCCESS;
  case CSQ_NVM_FLUSH:
    rc = dev_media_flush(d->pMedia);
    if (rc) {
      snprintf(zDetail, nDetail, "fdatasync failed: %s", strerror(-rc));
      return CSQ_SC_WRITE_FAULT;
    }
    return CSQ_SC_SUCCESS;
  case CSQ_NVM_RESV_ACQUIRE: {
    uint16_t sf = CSQ_SC_SUCCESS;
    int fd = dev_media_fd(d->pMedia);
    if ((p->cdw10 & 7) != 0) return CSQ_SC_INVALID_FIELD;
    pthread_mutex_lock(&d->resvMutex);
    if (d->pResvHolder == q) {
      /* already ours */
    } else if (d->pResvHolder) {
      snprintf(zDetail, nDetail, "held by another queue (connection) of this process");
      sf = CSQ_SC_RESV_CONFLICT;
    } else if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) {
        snprintf(zDetail, nDetail, "held by another process");
        sf = CSQ_SC_RESV_CONFLICT;
      } else {
        snprintf(zDetail, nDetail, "flock failed: %s", strerror(errno));
        sf = CSQ_SC_INTERNAL;
      }
    } else {
      d->pResvHolder = q;
    }
    pthread_mutex_unlock(&d->resvMutex);
    return sf;
  }
  case CSQ_NVM_RESV_RELEASE:
    emu_resv_drop(q); /* releasing a reservation one does not hold is a no-op */
    return CSQ_SC_SUCCESS;
  }
  return CSQ_SC_INVALID_OPCODE;
}

void emu_resv_drop(dev_bqueue *q) {
  dev_backend *d = q->pDev;
  pthread_mutex_lock(&d->resvMutex);
  if (d->pResvHolder == q) {
    int fd = dev_media_fd(d->pMedia);
    if (fd >= 0) flock(fd, LOCK_UN);
    d->pResvHolder = NULL;
  }
  pthread_mutex_unlock(&d->resvMutex);
}

/* ---- SLM namespace ------------------------------------------------------ */

/* SLM Read, Write, Fill and Memory Copy (cp_slm.c); a Memory Copy from NVM
** reads the media here. A corrupt fault damages what an SLM Read returns
** or an SLM Write or a Memory Copy from NVM stores. */
static uint16_t io_slm(dev_bqueue *q, const csq_sqe *p, dev_mio *pMio, const dev_fault_hit *pHit,
                       dev_io_acct *pAcct, char *zDetail, size_t nDetail) {
  dev_backend *d = q->pDev;
  uint64_t addr = (uint64_t)p->cdw10 | ((uint64_t)p->cdw11 << 32);
  uint64_t n = p->cdw12;
  int bCorrupt = pHit && pHit->action == DEV_FAULT_CORRUPT;
  uint16_t sf = dev_cp_slm_cmd(&d->slm, p, pAcct, zDetail, nDetail);
  if (sf == CSQ_SC_SUCCESS && bCorrupt && n > 0) {
    if (p->opcode == CSQ_SLM_READ) dev_fault_corrupt(pHit, (void *)(uintptr_t)p->prp1, n);
    if (p->opcode == CSQ_SLM_WRITE) dev_fault_corrupt(pHit, d->slm.a + addr, n);
  }
  if (sf != DEV_CP_SLM_FROM_NVM) return sf;
  int nRange = (int)(p->cdw12 & 0xFF) + 1;
  const csq_lba_range *a = (const csq_lba_range *)(uintptr_t)p->prp1;
  uint64_t nByte = 0;
  sf = dev_cp_slm_lba_ranges(d->nBlocks, a, nRange, &nByte, zDetail, nDetail);
  if (sf == 0) sf = dev_cp_slm_range(&d->slm, addr, nByte, zDetail, nDetail);
  if (sf) return sf;
  int rc = dev_mio_read(pMio, a, nRange, d->slm.a + addr);
  if (rc) {
    snprintf(zDetail, nDetail, "media read failed: %s", strerror(-rc));
    return CSQ_SC_READ_ERROR;
  }
  if (bCorrupt) dev_fault_corrupt(pHit, d->slm.a + addr, nByte);
  pAcct->mediaRead += nByte;
  return CSQ_SC_SUCCESS;
}

/* ---- Computational Programs namespace ---------------------------------- */

typedef struct exec_priv {
  dev_backend *d;
  dev_mio *pMio;
} exec_priv;

/* dev_exec_ctx.xReadLba: bounded media reads for a running program. */
static int exec_read_lba(dev_exec_ctx *ctx, const csq_lba_range *a, int n, void *pDst) {
  exec_priv *pp = ctx->pDevPriv;
  uint64_t nByte;
  char zIgnore[8];
  uint16_t sf = dev_cp_slm_lba_ranges(pp->d->nBlocks, a, n, &nByte, zIgnore, sizeof(zIgnore));
  if (sf) return sf;
  if (!dev_cp_slm_holds(ctx->pSlm, ctx->nSlm, pDst, nByte)) return CSQ_SC_SLM_RANGE;
  if (dev_mio_read(pp->pMio, a, n, pDst)) return CSQ_SC_READ_ERROR;
  ctx->pStats->media_bytes_read += nByte;
  return 0;
}

static uint16_t io_execute(dev_bqueue *q, const csq_sqe *p, dev_mio *pMio, int iEngine,
                           uint64_t *pResult, dev_io_acct *pAcct, char *zDetail, size_t nDetail) {
  dev_backend *d = q->pDev;
  dev_cp_run run;
  uint16_t sf = dev_cp_exec_begin(&d->cp, p, &run, pAcct, zDetail, nDetail);
  if (sf) return sf;
  dev_stats local;
  exec_priv priv = {d, pMio};
  sf = dev_cp_run_program(&run, p, d->slm.a, d->slm.n, iEngine, exec_read_lba, &priv, &local,
                          pResult, zDetail, nDetail);
  dev_stats_add(q->pStats, &local);
  dev_stats_add(&d->stats, &local);
  dev_cp_exec_end(&d->cp, &run);
  return sf;
}

/* See emu.h. Where pMio reaps asynchronous reads (dev_mio_async: the
** controller's threads), an NVM Read may return with its media read in
** flight; the thread's next dev_mio_reap completes it. */
void emu_io(dev_bqueue *q, const csq_sqe *p, dev_mio *pMio, const dev_fault_hit *pHit,
            int iEngine) {
  dev_io_acct acct = {0};
  uint64_t result = 0;
  char zDetail[256] = "";
  uint16_t sf;
  switch (p->nsid) {
  case CSQ_NSID_NVM:
    sf = io_nvm(q, p, pMio, pHit, &acct, zDetail, sizeof(zDetail));
    break;
  case CSQ_NSID_SLM:
    sf = io_slm(q, p, pMio, pHit, &acct, zDetail, sizeof(zDetail));
    break;
  case CSQ_NSID_CP:
    sf = io_execute(q, p, pMio, iEngine, &result, &acct, zDetail, sizeof(zDetail));
    break;
  default:
    sf = CSQ_SC_INVALID_NS;
    break;
  }
  if (sf == EMU_SC_PENDING) return; /* an asynchronous read completes it */
  if (pHit && pHit->action == DEV_FAULT_DELAY) usleep(pHit->delayMs * 1000u);
  emu_complete(q, p, sf, result, &acct, zDetail);
}
