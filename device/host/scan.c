/*
** device/host/scan.c - the host call that runs a csq program over a table's row
** groups on the device (see device/host/scan.h), and program loading.
**
** Each in-flight row group owns a "slot": one SLM allocation laid out as
** [job descriptor | input area | output area] (program.h gives the formats),
** host buffers for the job, the LBA ranges, the memory ranges and the
** result, and a small state machine:
**   COPY   Memory Copy(s) of the chunk blocks + SLM Write of the job pending
**   EXEC   Execute Program pending
**   READ   SLM Read of the result pending
**   READY  result in the host buffer, waiting to be handed out
**   HOLD   a part was handed out and the row cap stopped it: the rest runs
**          only when the caller asks for more
** dev_scan_next advances every slot as completions arrive and returns the
** oldest row group's result. Commands are asynchronous (dev_submit /
** dev_reap); completions of other scans on the same queue are routed to
** them through a small per-process registry.
**
** SLM is finite (and shared by every scan on the device): the slots are
** sized for the largest row group if SLM allows, else for the largest that
** fits. A row group that needs more than a slot holds (very wide TEXT or
** BLOB values) degrades instead of failing: its chunks are read to the host
** with NVM Read and the same program runs there, in the host engine (the
** verified program type's xRun over a host buffer laid out like a slot), and
** its result is handed out in its turn. Device slots drain before it runs,
** so results stay in row group order.
*/
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "device/engine/ptype.h"
#include "device/format/le.h"
#include "device/host/result.h"
#include "device/host/scan.h"
#include "device/host/vecrun.h"

/* Row groups in flight per scan: enough that one row group's Memory Copy
** overlaps another's Execute on the device's engines. */
#define SCAN_SLOTS 4
#define SCAN_RETRY                                                                                 \
  32 /* re-executions after a stale/unloaded program (another connection                           \
      ** may replace ours between Load and Execute) */
#define MAX_COPY_RANGES 256
#define ACC_MAX_BYTES                                                                              \
  (64u * 1024) /* an accumulated result larger than this is read out: beyond it,                   \
               ** merging on the device costs more than it saves */

enum { S_FREE, S_COPY, S_EXEC, S_READ, S_READY, S_HOLD };

typedef struct scan_slot {
  int state;
  int iRg;   /* index in apRg */
  int nPend; /* commands in flight */
  uint16_t aCid[8];
  int nCid;
  uint64_t slm; /* SLM base of this slot */
  uint64_t offIn, offOut, nOutCap;
  uint8_t *aJob; /* job descriptor (host copy) */
  uint32_t nJob;
  csq_lba_range *aLba;
  int nLba;
  csq_mrange aMr[3];
  uint8_t *aRes; /* result read back */
  uint64_t nRes, nResAlloc;
  uint32_t resCheck; /* csq_res_check() of the result, as Execute reported it */
  uint32_t nRow;     /* rows of the row group */
  uint32_t startRow; /* aParam[1] of the Execute in flight */
  int nRetry;
  int bAcc;    /* the output area holds a complete result (nRes bytes, resCheck)
               ** that the slot's next Execute accumulates into */
  int bAccRun; /* the Execute in flight (or last) accumulated: its result may
               ** stop before any new row if the merged groups filled the area */
  int bRange;  /* the Execute in flight covers a piece of row groups (range mode) */
} scan_slot;

/* Range mode: consecutive row groups [first, first + n) that one Execute
** covers, and the XXH3 of their catalog records. */
typedef struct scan_piece {
  int first, n;
  uint64_t recXxh3;
} scan_piece;

struct dev_scan {
  dev_queue *q;
  dev_device *pDev;
  store *st;
  const store_table *pTab;
  store_rg **apRg;
  int nRg;
  int iNext; /* next row group to consider */
  uint8_t *aProg;
  size_t nProg;
  uint64_t id;
  uint16_t pind;
  int bActivated; /* pind holds our program, activated by this scan */
  csq_prog prog;
  int nSlot;
  uint32_t nRowCap; /* Execute's row cap for the next row programs (0 none) */
  scan_slot aSlot[SCAN_SLOTS];
  int iHead; /* slot to deliver next (slots are used round robin) */
  int iTail; /* slot to fill next */
  int nBusy;
  int iLastRg;
  int rcErr;
  uint64_t fault; /* CSQ_FAULT_* of a failed Execute, 0 if none */
  char *zErr;
  csq_cqe *aMail; /* completions reaped by another scan of this queue */
  int nMail, nMailAlloc;
  dev_scan *pNextOpen;
  /* the host engine, for row groups too big for a slot (see the banner) */
  scan_slot host;    /* S_FREE or S_READY; its aRes points into aHostBuf */
  uint8_t *aHostBuf; /* [job | input | output], 4 KiB aligned */
  uint64_t nHostBuf;
  const dev_ptype *pHostType;
  void *pHostProg; /* the program as the host engine's xVerify compiled it */
  int bHostMore;   /* the host slot's row group has more to run (from startRow) */
  int nLbaCap;     /* LBA ranges a device slot's aLba holds */
  int bAcc;        /* accumulate mode (see dev_scan_next_acc) */
  /* programs with row numbers (CSQ_PF_ROWNUM): */
  int nOmitW;        /* words of each job's omit mask: (nOut + 63) / 64 */
  uint64_t omit;     /* its first word for the jobs from now on (later ones are 0) */
  uint32_t *aRowNum; /* the last batch's row numbers */
  uint32_t nRowNumCap;
  /* range mode (see "range mode" below): */
  int bRange;         /* pieces are being run; results are read only at the end */
  int bRangeFall;     /* a piece faulted: drain, then run row group by row group */
  scan_piece *aPiece; /* the pieces, nPiece of them; iPiece the next to start */
  int nPiece, iPiece;
  uint64_t catLba, catOff; /* store_table_catpos */
  uint32_t nChunkRec, nScratch, jobOff;
};

/* ---- registry of open scans (completion routing) ---- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static dev_scan *g_pOpen;

static scan_slot *slot_of_cid(dev_scan *s, uint16_t cid) {
  for (int i = 0; i < s->nSlot; i++) {
    scan_slot *t = &s->aSlot[i];
    if (t->state == S_FREE || t->state == S_READY) continue;
    for (int k = 0; k < t->nCid; k++)
      if (t->aCid[k] == cid) return t;
  }
  return NULL;
}

/* Give a completion that is not ours to the open scan on this queue that
** waits for it. 1 if someone took it. */
static int route_foreign(dev_scan *s, const csq_cqe *c) {
  int bTaken = 0;
  pthread_mutex_lock(&g_mu);
  for (dev_scan *o = g_pOpen; o && !bTaken; o = o->pNextOpen) {
    if (o == s || o->q != s->q || !slot_of_cid(o, c->cid)) continue;
    if (o->nMail == o->nMailAlloc) {
      int n = o->nMailAlloc ? o->nMailAlloc * 2 : 8;
      csq_cqe *a = realloc(o->aMail, sizeof(csq_cqe) * n);
      if (!a) break;
      o->aMail = a;
      o->nMailAlloc = n;
    }
    o->aMail[o->nMail++] = *c;
    bTaken = 1;
  }
  pthread_mutex_unlock(&g_mu);
  return bTaken;
}

/* ---- program loading ---- */

static void sqe_init(csq_sqe *p, uint8_t opcode, uint32_t nsid) {
  memset(p, 0, sizeof(*p));
  p->opcode = opcode;
  p->nsid = nsid;
}

static int load_one(dev_queue *q, uint16_t pind, const uint8_t *p, size_t n, uint64_t id,
                    uint32_t nChunkMax) {
  size_t off = 0;
  while (off < n) {
    csq_sqe e;
    csq_cqe c;
    size_t m = n - off < nChunkMax ? n - off : nChunkMax;
    sqe_init(&e, CSQ_ADM_LOAD_PROGRAM, 0);
    e.cdw10 = pind | ((uint32_t)CSQ_PTYPE_CSQ << 24);
    e.cdw11 = (uint32_t)n;
    e.cdw12 = (uint32_t)m;
    e.cdw13 = (uint32_t)off;
    e.cdw14 = (uint32_t)id;
    e.cdw15 = (uint32_t)(id >> 32);
    e.prp1 = (uint64_t)(uintptr_t)(p + off);
    int rc = dev_exec(q, &e, &c);
    if (rc) return rc;
    if (c.dw0 & 1) return 0; /* already loaded */
    off += m;
  }
  return 0;
}

static int activate(dev_queue *q, uint16_t pind, int bOn) {
  csq_sqe e;
  sqe_init(&e, CSQ_ADM_PROGRAM_ACTIVATION, 0);
  e.cdw10 = pind | ((uint32_t)(bOn ? 1 : 0) << 16);
  return dev_exec(q, &e, NULL);
}

/* Slots are shared by every user of the device, so a program goes to the
** slot its id hashes to, or the next one that is free or holds it; a slot
** holding another active program answers PROGRAM_IN_USE and is passed over.
** Execute re-checks the id (aParam[0]), so losing a race here is caught. */
int dev_prog_load(dev_queue *q, const uint8_t *p, size_t n, uint16_t *pPind, char **pzErr) {
  const csq_id_vs *caps = dev_caps(dev_queue_device(q));
  uint32_t nSlots = caps && caps->magic == CSQ_ID_MAGIC ? caps->max_programs : 0;
  uint32_t gran = caps && caps->load_gran ? caps->load_gran : 4;
  uint32_t nChunk = (1u << 20) / gran * gran;
  uint64_t id = csq_prog_id(p, n);
  int rc = 0;
  *pzErr = NULL;
  if (nSlots == 0) {
    *pzErr = dev_mprintf("device %s has no csq compute (no program slots)",
                         dev_path(dev_queue_device(q)));
    return -ENOTSUP;
  }
  if (caps->max_prog_bytes && n > caps->max_prog_bytes) {
    *pzErr =
        dev_mprintf("program of %zu bytes exceeds the device limit of %u", n, caps->max_prog_bytes);
    return -E2BIG;
  }
  /* Pass 0 looks for a slot holding this program or a free one and never
  ** disturbs another connection's program; only if none is found does pass
  ** 1 replace an idle program (its owner reloads on its next Execute). */
  for (int pass = 0; pass < 2; pass++) {
    for (uint32_t i = 0; i < nSlots; i++) {
      uint16_t pind = (uint16_t)((id + i) % nSlots);
      rc = load_one(q, pind, p, n, id, nChunk);
      if (rc == CSQ_SC_PROGRAM_IN_USE && pass == 1 && activate(q, pind, 0) == 0)
        rc = load_one(q, pind, p, n, id, nChunk);
      if (rc == CSQ_SC_PROGRAM_IN_USE) continue;
      if (rc) break;
      rc = activate(q, pind, 1);
      if (rc == CSQ_SC_MAX_ACTIVE && pass == 0) continue;
      if (rc == CSQ_SC_MAX_ACTIVE) {
        /* Too many active programs: idle ones give way until ours fits. */
        for (uint32_t j = 1; j < nSlots && rc == CSQ_SC_MAX_ACTIVE; j++) {
          activate(q, (uint16_t)((pind + j) % nSlots), 0);
          rc = activate(q, pind, 1);
        }
      }
      if (rc) break;
      *pPind = pind;
      return 0;
    }
    if (rc && rc != CSQ_SC_PROGRAM_IN_USE && rc != CSQ_SC_MAX_ACTIVE) break;
  }
  *pzErr = dev_mprintf("loading a program on %s: %s", dev_path(dev_queue_device(q)),
                       rc ? dev_errmsg(q) : "no free program slot");
  return rc ? rc : -ENOSPC;
}

/* ---- sizing ---- */

static uint64_t pad8(uint64_t n) {
  return (n + 7) & ~(uint64_t)7;
}
static uint64_t pad4k(uint64_t n) {
  return (n + 4095) & ~(uint64_t)4095;
}

static uint64_t job_bytes(const dev_scan *s, const store_rg *pRg) {
  uint64_t n = CSQ_JOB_HDR + (uint64_t)CSQ_JOB_CHUNK_SZ * s->prog.nIn + 8ull * s->nOmitW;
  if (pRg->nDel && pRg->aDel) n += (pRg->nRow + 7) / 8;
  return pad8(n);
}

/* Record merged range number n ([r0, r1) of the row group at lba) in aLba
** (may be NULL) and return the input-area position after it. */
static uint64_t close_range(csq_lba_range *aLba, int n, uint64_t lba, uint64_t r0, uint64_t r1,
                            uint64_t pos) {
  if (aLba) {
    aLba[n - 1].nsid = CSQ_NSID_NVM;
    aLba[n - 1].slba = lba + r0;
    aLba[n - 1].nlb = (uint32_t)(r1 - r0);
  }
  return pos + (r1 - r0) * CSQ_LBA_SIZE;
}

/* Block ranges covering the program's chunks, merged, in ascending order;
** aOff[i] receives input slot i's byte offset in the input area. Returns the
** number of ranges (aLba may be NULL to count), or -1 if a chunk is missing. */
static int chunk_ranges(const dev_scan *s, const store_rg *pRg, csq_lba_range *aLba, uint64_t *aOff,
                        uint64_t *pnBytes) {
  int nIn = s->prog.nIn, n = 0;
  uint64_t aB0[CSQ_PROG_MAX_IN], aB1[CSQ_PROG_MAX_IN];
  int aOrd[CSQ_PROG_MAX_IN];
  for (int i = 0; i < nIn; i++) {
    int c = s->prog.aIn[i];
    if (c >= pRg->nChunk) return -1;
    const store_chunk *pC = &pRg->aChunk[c];
    aB0[i] = pC->off / CSQ_LBA_SIZE;
    aB1[i] = ((uint64_t)pC->off + pC->len + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
    if (aB1[i] <= aB0[i]) aB1[i] = aB0[i] + 1;
    aOrd[i] = i;
  }
  /* insertion sort by first block: nIn is small */
  for (int i = 1; i < nIn; i++) {
    int x = aOrd[i], j = i;
    while (j > 0 && aB0[aOrd[j - 1]] > aB0[x]) {
      aOrd[j] = aOrd[j - 1];
      j--;
    }
    aOrd[j] = x;
  }
  uint64_t pos = 0, r0 = 0, r1 = 0; /* current merged range [r0, r1) at pos */
  for (int k = 0; k < nIn; k++) {
    int i = aOrd[k];
    if (n == 0 || aB0[i] > r1) {
      if (n > 0) pos = close_range(aLba, n, pRg->lba, r0, r1, pos);
      r0 = aB0[i];
      r1 = aB1[i];
      n++;
    } else if (aB1[i] > r1) {
      r1 = aB1[i];
    }
    if (aOff) aOff[i] = pos + (uint64_t)pRg->aChunk[s->prog.aIn[i]].off - r0 * CSQ_LBA_SIZE;
  }
  if (n > 0) pos = close_range(aLba, n, pRg->lba, r0, r1, pos);
  if (pnBytes) *pnBytes = pos;
  return n;
}

/* Output area for a row group: every column's arrays for all its rows, and
** a heap of at least the chunk's own size (so one row always fits; a result
** that does not fit comes back in parts). */
static uint64_t out_bytes(const dev_scan *s, const store_rg *pRg) {
  uint64_t n = CSQ_RES_HDR + (uint64_t)CSQ_RES_COL_SZ * s->prog.nResCol, r = pRg->nRow;
  if (s->prog.bAgg) {
    /* Partial groups: room for up to 4096 groups (a row group with more comes
    ** back in parts) plus text the keys and MIN/MAX may carry. */
    uint64_t g = r < 4096 ? r : 4096, nText = 0;
    for (int i = 0; i < s->prog.nIn; i++) {
      const store_chunk *pC = &pRg->aChunk[s->prog.aIn[i]];
      if (pC->zone.clsMask & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) nText += pC->len;
    }
    n += (uint64_t)s->prog.nResCol * (13 * g + 24) + nText + 65536;
    return pad8(n);
  }
  for (int j = 0; j < s->prog.nOut; j++) {
    const store_chunk *pC = &pRg->aChunk[s->prog.aIn[s->prog.aOut[j]]];
    n += pad8(r) + 8 * r + pad8(4 * r) + 8;
    if (pC->zone.clsMask & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) n += pad8(2ull * pC->len) + 4096;
  }
  return pad8(n);
}

/* The output area a range Execute needs for every group of the table at
** once, or 0 when the number of groups is not known from the zone maps:
** grouping on INTEGER columns only, where the product of the keys' value
** spans (a NULL counted as one more value) bounds it, up to RANGE_GROUPS.
** A range whose groups outgrow its area faults and the scan starts over
** one row group at a time, so a size too small costs a second pass. */
#define RANGE_GROUPS (64u * 1024)
static uint64_t range_out_bytes(const dev_scan *s, store_rg *const *apRg, int nRg) {
  uint64_t nGroup = 1, nRow = 0, nText = 0;
  for (int i = 0; i < nRg; i++) {
    nRow += apRg[i]->nRow;
    uint64_t n = 0;
    for (int k = 0; k < s->prog.nIn; k++) {
      const store_chunk *pC = &apRg[i]->aChunk[s->prog.aIn[k]];
      if (pC->zone.clsMask & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) n += pC->len;
    }
    if (n > nText) nText = n;
  }
  for (int j = 0; j < s->prog.nKey; j++) {
    const csq_pexpr *x = &s->prog.aExpr[s->prog.aKey[j]];
    if (x->op != CSQ_EX_COL) return 0;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    int bNull = 0;
    for (int i = 0; i < nRg; i++) {
      const csq_zone *z = &apRg[i]->aChunk[s->prog.aIn[x->a]].zone;
      if (z->clsMask & ~((1u << CSQ_INT) | (1u << CSQ_NULL))) return 0;
      if (z->nNull) bNull = 1;
      if (!(z->clsMask & (1u << CSQ_INT))) continue;
      if (z->iMin < lo) lo = z->iMin;
      if (z->iMax > hi) hi = z->iMax;
    }
    uint64_t span = lo <= hi ? (uint64_t)hi - (uint64_t)lo + 1 : 0;
    if ((span == 0 && lo <= hi) || span > RANGE_GROUPS) return 0; /* 0: the whole 64-bit range */
    nGroup *= span + (uint64_t)bNull; /* at most 65536 * 65537: no overflow */
    if (nGroup > RANGE_GROUPS) return 0;
  }
  if (nGroup > nRow) nGroup = nRow;
  return pad8(CSQ_RES_HDR + (uint64_t)CSQ_RES_COL_SZ * s->prog.nResCol +
              (uint64_t)s->prog.nResCol * (13 * nGroup + 24) + nText + 65536);
}

/* ---- errors ---- */

static int scan_fail(dev_scan *s, int rc, const store_rg *pRg, int iRg, const char *zWhat,
                     const char *zWhy) {
  if (s->rcErr) return s->rcErr;
  s->rcErr = rc ? rc : -EIO;
  s->zErr = dev_mprintf("table '%s', row group %d (block %llu) on %s: %s: %s", s->pTab->zName, iRg,
                        pRg ? (unsigned long long)pRg->lba : 0ull, dev_path(s->pDev), zWhat, zWhy);
  return s->rcErr;
}

/* ---- per-slot commands ---- */

static int submit(dev_scan *s, scan_slot *t, csq_sqe *e) {
  int rc = dev_submit(s->q, e);
  while (rc == -EAGAIN) {
    /* queue full: wait for anything, park it in our own mailbox */
    csq_cqe c;
    rc = dev_reap(s->q, &c, -1);
    if (rc) break;
    if (!route_foreign(s, &c)) {
      pthread_mutex_lock(&g_mu);
      if (s->nMail == s->nMailAlloc) {
        int n = s->nMailAlloc ? s->nMailAlloc * 2 : 8;
        csq_cqe *a = realloc(s->aMail, sizeof(csq_cqe) * n);
        if (a) {
          s->aMail = a;
          s->nMailAlloc = n;
        }
      }
      if (s->nMail < s->nMailAlloc) s->aMail[s->nMail++] = c;
      pthread_mutex_unlock(&g_mu);
    }
    rc = dev_submit(s->q, e);
  }
  if (rc) return rc;
  if (t->nCid < 8) t->aCid[t->nCid++] = e->cid;
  t->nPend++;
  return 0;
}

static int submit_exec(dev_scan *s, scan_slot *t) {
  csq_sqe e;
  sqe_init(&e, CSQ_CP_EXECUTE, CSQ_NSID_CP);
  e.cdw10 = s->pind | (0xFFFFu << 16);
  e.cdw11 = 3;
  e.cdw12 = (uint32_t)s->id;
  e.cdw13 = (uint32_t)(s->id >> 32);
  t->bAccRun = t->bAcc || t->bRange;
  e.cdw14 = t->startRow | (t->bAcc ? (uint32_t)CSQ_EXEC_ACC : 0) |
            (t->bRange ? (uint32_t)CSQ_EXEC_RANGE : 0);
  e.cdw15 = t->bAcc ? t->resCheck : t->bRange ? 0 : s->nRowCap;
  e.prp1 = (uint64_t)(uintptr_t)t->aMr;
  t->nCid = 0;
  t->state = S_EXEC;
  return submit(s, t, &e);
}

/* Write the job descriptor of pRg (job_bytes(s, pRg) bytes) to j; aOff are
** the chunks' offsets in the input area (chunk_ranges). */
static uint32_t build_job(const dev_scan *s, const store_rg *pRg, const uint64_t *aOff,
                          uint8_t *j) {
  uint32_t nJob = (uint32_t)job_bytes(s, pRg);
  memset(j, 0, nJob);
  uint32_t delBytes = pRg->nDel && pRg->aDel ? (pRg->nRow + 7) / 8 : 0;
  csq_put_le32(j, CSQ_JOB_MAGIC);
  csq_put_le32(j + 4, pRg->nRow);
  csq_put_le32(j + 8, (uint32_t)s->prog.nIn);
  csq_put_le32(j + 12, delBytes);
  for (int i = 0; i < s->prog.nIn; i++) {
    const store_chunk *pC = &pRg->aChunk[s->prog.aIn[i]];
    uint8_t *e = j + CSQ_JOB_HDR + (size_t)CSQ_JOB_CHUNK_SZ * i;
    csq_put_le64(e, aOff[i]);
    csq_put_le64(e + 8, pC->len);
    csq_put_le64(e + 16, pC->xxh3);
  }
  size_t nHead = CSQ_JOB_HDR + (size_t)CSQ_JOB_CHUNK_SZ * s->prog.nIn;
  if (s->nOmitW) csq_put_le64(j + nHead, s->omit); /* the other words stay 0 (memset) */
  nHead += 8 * (size_t)s->nOmitW;
  if (delBytes) memcpy(j + nHead, pRg->aDel, delBytes);
  uint64_t h = csq_job_hash(j, nHead + delBytes);
  csq_put_le64(j + 16, h);
  return nJob;
}

/* 1 if row group pRg fits the device slots (all slots share one layout). */
static int rg_fits(const dev_scan *s, const store_rg *pRg) {
  const scan_slot *t = &s->aSlot[0];
  uint64_t nIn = 0;
  if (s->nSlot == 0) return 0;
  int n = chunk_ranges(s, pRg, NULL, NULL, &nIn);
  if (n < 0 || n > s->nLbaCap) return 0;
  return job_bytes(s, pRg) <= t->offIn && pad8(nIn ? nIn : 8) <= t->offOut - t->offIn &&
         out_bytes(s, pRg) <= t->nOutCap;
}

/* Start row group iRg in slot t: copy, job write. */
static int slot_start(dev_scan *s, scan_slot *t, int iRg) {
  const store_rg *pRg = s->apRg[iRg];
  uint64_t aOff[CSQ_PROG_MAX_IN], nIn = 0;
  int n = chunk_ranges(s, pRg, t->aLba, aOff, &nIn);
  t->iRg = iRg;
  t->nRow = pRg->nRow;
  t->startRow = 0;
  t->nRetry = 0;
  t->nCid = 0;
  t->nPend = 0;
  t->nLba = n;
  t->bRange = 0;
  uint32_t nJob = build_job(s, pRg, aOff, t->aJob);
  t->nJob = nJob;
  uint64_t offJob = 0;
  t->aMr[0] = (csq_mrange){CSQ_NSID_SLM, 0, nJob, t->slm + offJob, 0};
  t->aMr[1] = (csq_mrange){CSQ_NSID_SLM, 0, pad8(nIn ? nIn : 8), t->slm + t->offIn, 0};
  t->aMr[2] = (csq_mrange){CSQ_NSID_SLM, 0, t->nOutCap, t->slm + t->offOut, 0};
  t->state = S_COPY;
  int rc = 0;
  for (int r = 0; r < n && rc == 0; r += MAX_COPY_RANGES) {
    int m = n - r < MAX_COPY_RANGES ? n - r : MAX_COPY_RANGES;
    uint64_t dst = t->slm + t->offIn;
    for (int k = 0; k < r; k++) dst += (uint64_t)t->aLba[k].nlb * CSQ_LBA_SIZE;
    csq_sqe e;
    sqe_init(&e, CSQ_SLM_COPY, CSQ_NSID_SLM);
    e.cdw10 = (uint32_t)dst;
    e.cdw11 = (uint32_t)(dst >> 32);
    e.cdw12 = (uint32_t)(m - 1);
    e.prp1 = (uint64_t)(uintptr_t)(t->aLba + r);
    rc = submit(s, t, &e);
  }
  if (rc == 0) {
    csq_sqe e;
    sqe_init(&e, CSQ_SLM_WRITE, CSQ_NSID_SLM);
    e.cdw10 = (uint32_t)(t->slm + offJob);
    e.cdw11 = (uint32_t)((t->slm + offJob) >> 32);
    e.cdw12 = nJob;
    e.prp1 = (uint64_t)(uintptr_t)t->aJob;
    rc = submit(s, t, &e);
  }
  if (rc == 0 && t->nPend == 0) rc = submit_exec(s, t); /* nothing to copy or write */
  if (rc) return scan_fail(s, rc, pRg, iRg, "submitting commands", dev_errmsg(s->q));
  return 0;
}

static const char *op_of(int state) {
  return state == S_COPY   ? "Memory Copy / SLM Write"
         : state == S_EXEC ? "Execute Program"
                           : "SLM Read";
}

/* Read slot t's result (nRes bytes, checked against resCheck on arrival). */
static int slot_read(dev_scan *s, scan_slot *t) {
  const store_rg *pRg = s->apRg[t->iRg];
  if (t->nRes > t->nResAlloc) {
    uint8_t *a = realloc(t->aRes, t->nRes);
    if (!a) return scan_fail(s, -ENOMEM, pRg, t->iRg, "reading the result", "out of memory");
    t->aRes = a;
    t->nResAlloc = t->nRes;
  }
  csq_sqe e;
  sqe_init(&e, CSQ_SLM_READ, CSQ_NSID_SLM);
  e.cdw10 = (uint32_t)(t->slm + t->offOut);
  e.cdw11 = (uint32_t)((t->slm + t->offOut) >> 32);
  e.cdw12 = (uint32_t)t->nRes;
  e.prp1 = (uint64_t)(uintptr_t)t->aRes;
  t->nCid = 0;
  t->state = S_READ;
  int rc = submit(s, t, &e);
  if (rc) return scan_fail(s, rc, pRg, t->iRg, "SLM Read", dev_errmsg(s->q));
  return 0;
}

/* A completion for slot t. */
static int slot_complete(dev_scan *s, scan_slot *t, const csq_cqe *c) {
  const store_rg *pRg = s->apRg[t->iRg];
  uint16_t sf = (uint16_t)(csq_cqe_sf(c) & 0x7FF);
  t->nPend--;
  for (int k = 0; k < t->nCid; k++) /* the driver may reuse a cid once completed */
    if (t->aCid[k] == c->cid) {
      t->aCid[k] = t->aCid[--t->nCid];
      break;
    }
  if (t->state == S_EXEC && sf) {
    uint64_t ret = (uint64_t)c->dw0 | ((uint64_t)c->dw1 << 32);
    int bStale = sf == CSQ_SC_NOT_ACTIVATED || sf == CSQ_SC_NO_PROGRAM ||
                 (sf == CSQ_SC_PROGRAM_FAULT && ret == CSQ_FAULT_STALE_PROGRAM);
    if (bStale && t->nRetry < SCAN_RETRY) {
      /* someone replaced or deactivated our program: load it again */
      char *zErr = NULL;
      t->nRetry++;
      int rc = dev_prog_load(s->q, s->aProg, s->nProg, &s->pind, &zErr);
      if (rc) {
        rc = scan_fail(s, rc, pRg, t->iRg, "reloading the program", zErr ? zErr : "");
        free(zErr);
        return rc;
      }
      int rc2 = submit_exec(s, t);
      if (rc2) return scan_fail(s, rc2, pRg, t->iRg, "Execute Program", dev_errmsg(s->q));
      return 0;
    }
    if (t->bRange && sf == CSQ_SC_PROGRAM_FAULT &&
        (ret == CSQ_FAULT_RANGE_STALE || ret == CSQ_FAULT_RANGE_FULL || ret == CSQ_FAULT_BAD_JOB ||
         ret == CSQ_FAULT_BAD_RANGES)) {
      /* the device cannot cover this piece in one run (or does not know
      ** range Executes): nothing was handed out yet, start over per row
      ** group once every command has completed */
      s->bRangeFall = 1;
      t->bAcc = 0;
      t->state = S_FREE;
      return 0;
    }
    char zWhy[512];
    if (sf == CSQ_SC_PROGRAM_FAULT && !s->rcErr) s->fault = ret;
    if (sf == CSQ_SC_PROGRAM_FAULT) {
      char zF[200];
      csq_fault_text(ret, zF, sizeof(zF));
      snprintf(zWhy, sizeof(zWhy), "program fault: %s", zF);
    } else
      snprintf(zWhy, sizeof(zWhy), "%s", dev_cqe_errmsg(s->q, c));
    return scan_fail(s, (int)sf, pRg, t->iRg, "Execute Program", zWhy);
  }
  if (sf) return scan_fail(s, (int)sf, pRg, t->iRg, op_of(t->state), dev_cqe_errmsg(s->q, c));
  if (t->state == S_EXEC) {
    uint64_t ret = (uint64_t)c->dw0 | ((uint64_t)c->dw1 << 32), nBytes = csq_ret_bytes(ret);
    int bPartial = csq_ret_partial(ret);
    if (nBytes < CSQ_RES_HDR || nBytes > t->nOutCap || csq_ret_bad(ret))
      return scan_fail(s, -EBADMSG, pRg, t->iRg, "Execute Program", "result size out of range");
    t->nRes = nBytes;
    t->resCheck = c->dw0;
    if (t->bRange && bPartial)
      return scan_fail(s, -EBADMSG, pRg, t->iRg, "Execute Program",
                       "a range of row groups came back partial");
    if (t->bRange || (s->bAcc && !bPartial && nBytes <= ACC_MAX_BYTES)) {
      /* keep it on the device: the slot's next row group merges into it */
      t->bAcc = 1;
      t->state = S_FREE;
      return 0;
    }
    t->bAcc = 0;
    return slot_read(s, t);
  }
  if (t->nPend > 0) return 0;
  if (t->state == S_COPY) {
    int rc = submit_exec(s, t);
    if (rc) return scan_fail(s, rc, pRg, t->iRg, "Execute Program", dev_errmsg(s->q));
    return 0;
  }
  if (t->state == S_READ) {
    if (csq_res_check(t->aRes, t->nRes) != t->resCheck)
      return scan_fail(s, -EBADMSG, pRg, t->iRg, "SLM Read",
                       "the result arrived damaged (its checksum differs from the device's)");
    t->state = S_READY;
  }
  return 0;
}

/* Wait for one completion of ours (mailbox first) and process it. */
static int pump_one(dev_scan *s) {
  csq_cqe c;
  int bHave = 0;
  pthread_mutex_lock(&g_mu);
  if (s->nMail) {
    c = s->aMail[0];
    memmove(s->aMail, s->aMail + 1, sizeof(csq_cqe) * (s->nMail - 1));
    s->nMail--;
    bHave = 1;
  }
  pthread_mutex_unlock(&g_mu);
  while (!bHave) {
    int rc = dev_reap(s->q, &c, -1);
    if (rc) return scan_fail(s, rc, NULL, -1, "waiting for the device", dev_errmsg(s->q));
    if (slot_of_cid(s, c.cid))
      bHave = 1;
    else
      route_foreign(s, &c); /* another scan's, or nobody's: dropped */
  }
  scan_slot *t = slot_of_cid(s, c.cid);
  if (!t) return 0;
  return slot_complete(s, t, &c);
}

/* The next row group to run, s->iNext, once those the zone maps rule out
** are passed over (and counted); -1 at the end. The caller takes it by
** advancing s->iNext. */
static int next_rg(dev_scan *s) {
  while (s->iNext < s->nRg && store_rg_zone_skip(s->apRg[s->iNext], &s->prog)) {
    dev_queue_stats(s->q)->row_groups_skipped++;
    s->iNext++;
  }
  return s->iNext < s->nRg ? s->iNext : -1;
}

/* Start row groups while slots are free. Stops at a row group that does
** not fit a slot: the host engine takes it once the slots have drained. */
static int fill(dev_scan *s) {
  int iRg;
  while (!s->rcErr && s->nBusy < s->nSlot && (iRg = next_rg(s)) >= 0) {
    if (!rg_fits(s, s->apRg[iRg])) break;
    s->iNext++;
    scan_slot *t = &s->aSlot[s->iTail];
    s->iTail = (s->iTail + 1) % s->nSlot;
    s->nBusy++;
    int rc = slot_start(s, t, iRg);
    if (rc) return rc;
  }
  return s->rcErr;
}

/* Copy a result into the caller's vectors, checking every offset. */
static int decode_result(dev_scan *s, scan_slot *t, csq_vec *aOut, uint32_t *pnRows,
                         uint32_t *pNext) {
  const uint8_t *pRowNum = NULL;
  int rc = dev_result_decode(&s->prog, t->aRes, t->nRes, t->startRow, t->nRow, t->bAccRun, aOut,
                             pnRows, pNext, &pRowNum);
  if (rc || !pRowNum) return rc;
  uint32_t nRows = *pnRows;
  if (nRows > s->nRowNumCap) {
    uint32_t *a = realloc(s->aRowNum, sizeof(uint32_t) * nRows);
    if (!a) return -ENOMEM;
    s->aRowNum = a;
    s->nRowNumCap = nRows;
  }
  for (uint32_t i = 0; i < nRows; i++) s->aRowNum[i] = csq_le32(pRowNum + 4ull * i);
  return 0;
}

/* Decode slot t's result into the caller's vectors; *pNext is the first
** row of its row group it did not cover. 0 or the scan's error. */
static int take_result(dev_scan *s, scan_slot *t, csq_vec *aOut, uint32_t *pnRows,
                       uint32_t *pNext) {
  int rc = decode_result(s, t, aOut, pnRows, pNext);
  if (rc)
    return scan_fail(s, rc, s->apRg[t->iRg], t->iRg, "decoding the result",
                     rc == -ENOMEM ? "out of memory" : "the device returned a malformed result");
  s->iLastRg = t->iRg;
  return 0;
}

/* Run slot t's row group again from row next (its output area was full),
** without accumulating: the result just taken is the host's now. */
static int resume_slot(dev_scan *s, scan_slot *t, uint32_t next) {
  t->startRow = next;
  t->nRetry = 0;
  int rc = submit_exec(s, t);
  if (rc) return scan_fail(s, rc, s->apRg[t->iRg], t->iRg, "Execute Program", dev_errmsg(s->q));
  return 0;
}

/* ---- accumulate mode ----
** An aggregation whose answer cannot depend on the order in which rows
** reach it lets each slot merge its row groups into one result on the
** device (Execute with CSQ_EXEC_ACC): the host reads one result per slot
** instead of one per row group. Slots take row groups as they free up and
** results are handed out as they arrive, so order-free is required:
** program.h keeps "the first in row order" for a group key met as both
** INTEGER and an equal REAL and for MIN/MAX ties, which only matter where
** equal values can look different. The test is on the zone maps: every key
** and MIN/MAX argument is a plain column that never holds both INTEGER and
** REAL values, and a MIN/MAX under a non-BINARY collation sees no TEXT. */

/* The union of the class masks of input slot iSlot's chunks. */
static unsigned slot_classes(const dev_scan *s, int iSlot) {
  unsigned m = 0;
  int c = s->prog.aIn[iSlot];
  for (int i = 0; i < s->nRg; i++)
    if (c < s->apRg[i]->nChunk) m |= s->apRg[i]->aChunk[c].zone.clsMask;
  return m;
}

static int expr_order_free(const dev_scan *s, int iExpr, int coll) {
  const csq_pexpr *x = &s->prog.aExpr[iExpr];
  if (x->op == CSQ_EX_CONST) return 1;
  if (x->op != CSQ_EX_COL) return 0;
  unsigned m = slot_classes(s, x->a), num = (1u << CSQ_INT) | (1u << CSQ_REAL);
  if ((m & num) == num) return 0;
  return coll == CSQ_TF_BINARY || !(m & (1u << CSQ_TEXT));
}

static int order_free(const dev_scan *s) {
  for (int j = 0; j < s->prog.nKey; j++)
    if (!expr_order_free(s, s->prog.aKey[j], CSQ_TF_BINARY)) return 0;
  for (int i = 0; i < s->prog.nAgg; i++) {
    const csq_pagg *a = &s->prog.aAgg[i];
    if ((a->fn == CSQ_AGG_MIN || a->fn == CSQ_AGG_MAX) &&
        !expr_order_free(s, a->expr, a->flags & CSQ_TF_COLL_MASK))
      return 0;
  }
  return 1;
}

/* ---- range mode ----
** An accumulating scan of a whole table as its committed catalog holds it
** (store_table_catpos) runs Executes over pieces of consecutive row groups
** (program.h, RUNNING OVER A RANGE): the device reads the catalog records,
** the chunks and the delete bitmaps itself, so what crosses the link per
** piece is a 64-byte header, the Execute and, at the end, one result per
** slot, whatever the number of row groups. The row groups the zone maps
** rule out split the pieces; the rest is cut into about one piece per slot
** so that the device's engines work in parallel. Results are read only
** once every piece has run: a piece the device cannot cover (the catalog
** moved, the merged groups outgrew the output area, a device without range
** Executes) then falls back to one Execute per row group from the start,
** with nothing handed out twice. */

static int fill_acc(dev_scan *s);

static uint64_t rec_stride(const dev_scan *s) {
  return CSQ_CATREC_HDR + (uint64_t)CSQ_CATREC_CHUNK * s->nChunkRec;
}

/* Cut the row groups the zone maps leave into pieces (counting the
** skipped ones). 0 or -ENOMEM. */
static int range_pieces(dev_scan *s) {
  int nLive = 0;
  for (int i = 0; i < s->nRg; i++) nLive += !store_rg_zone_skip(s->apRg[i], &s->prog);
  int per = s->nSlot > 0 ? (nLive + s->nSlot - 1) / s->nSlot : nLive;
  if (per < 1) per = 1;
  s->aPiece = malloc(sizeof(scan_piece) * (size_t)(s->nRg + 1));
  if (!s->aPiece) return -ENOMEM;
  for (int i = 0; i < s->nRg;) {
    if (store_rg_zone_skip(s->apRg[i], &s->prog)) {
      dev_queue_stats(s->q)->row_groups_skipped++;
      i++;
      continue;
    }
    int n = 1;
    while (i + n < s->nRg && n < per && !store_rg_zone_skip(s->apRg[i + n], &s->prog)) n++;
    scan_piece *p = &s->aPiece[s->nPiece++];
    p->first = i;
    p->n = n;
    if (store_rg_records_hash(s->apRg + i, n, &p->recXxh3)) return -ENOMEM;
    i += n;
  }
  return 0;
}

/* Start piece iPiece in slot t (accumulating into what t holds): the
** header by SLM Write, then the Execute. */
static int slot_start_range(dev_scan *s, scan_slot *t, int iPiece) {
  const scan_piece *p = &s->aPiece[iPiece];
  int iLast = p->first + p->n - 1;
  uint8_t *h = t->aJob;
  memset(h, 0, CSQ_RANGE_HDR);
  csq_put_le32(h, CSQ_RANGE_MAGIC);
  csq_put_le32(h + 4, (uint32_t)p->n);
  csq_put_le64(h + 8, s->catLba);
  csq_put_le64(h + 16, s->catOff + rec_stride(s) * (uint64_t)p->first);
  csq_put_le32(h + 24, s->nChunkRec);
  csq_put_le32(h + 28, s->nScratch);
  csq_put_le64(h + 32, p->recXxh3);
  csq_put_le32(h + 40, s->jobOff);
  t->iRg = iLast; /* the result's nextRow is the last row group's row count */
  t->nRow = s->apRg[iLast]->nRow;
  t->startRow = 0;
  t->nRetry = 0;
  t->nCid = 0;
  t->nPend = 0;
  t->bRange = 1;
  t->aMr[0] = (csq_mrange){CSQ_NSID_SLM, 0, t->offIn, t->slm, 0};
  t->aMr[1] = (csq_mrange){CSQ_NSID_SLM, 0, t->offOut - t->offIn, t->slm + t->offIn, 0};
  t->aMr[2] = (csq_mrange){CSQ_NSID_SLM, 0, t->nOutCap, t->slm + t->offOut, 0};
  t->state = S_COPY;
  csq_sqe e;
  sqe_init(&e, CSQ_SLM_WRITE, CSQ_NSID_SLM);
  e.cdw10 = (uint32_t)t->slm;
  e.cdw11 = (uint32_t)(t->slm >> 32);
  e.cdw12 = CSQ_RANGE_HDR;
  e.prp1 = (uint64_t)(uintptr_t)t->aJob;
  int rc = submit(s, t, &e);
  if (rc) return scan_fail(s, rc, s->apRg[iLast], iLast, "submitting commands", dev_errmsg(s->q));
  return 0;
}

/* fill_acc in range mode: start pieces on free slots; once all have run,
** read out what each slot accumulated; after a fault, drain and go back to
** one Execute per row group. */
static int fill_range(dev_scan *s) {
  int bBusy = 0;
  for (int i = 0; i < s->nSlot; i++)
    if (s->aSlot[i].state != S_FREE) bBusy = 1;
  if (s->bRangeFall) {
    if (bBusy) return 0; /* the caller pumps */
    for (int i = 0; i < s->nSlot; i++) {
      s->aSlot[i].bAcc = 0;
      s->aSlot[i].bRange = 0;
    }
    s->bRange = 0;
    s->iNext = 0;
    return fill_acc(s);
  }
  for (int i = 0; i < s->nSlot && !s->rcErr && s->iPiece < s->nPiece; i++) {
    scan_slot *t = &s->aSlot[i];
    if (t->state != S_FREE) continue;
    int rc = slot_start_range(s, t, s->iPiece++);
    if (rc) return rc;
    bBusy = 1;
  }
  if (!bBusy && s->iPiece == s->nPiece) {
    s->bRange = 0; /* every piece ran: read the results out */
    for (int i = 0; i < s->nSlot && !s->rcErr; i++) {
      scan_slot *t = &s->aSlot[i];
      t->bRange = 0;
      if (t->bAcc) {
        t->bAcc = 0;
        int rc = slot_read(s, t);
        if (rc) return rc;
      }
    }
    s->iNext = s->nRg; /* nothing left for fill_acc */
  }
  return s->rcErr;
}

/* Give every free slot its next row group, or, when none is left, read out
** what it accumulated. */
static int fill_acc(dev_scan *s) {
  if (s->bRange) return fill_range(s);
  for (int i = 0; i < s->nSlot && !s->rcErr; i++) {
    scan_slot *t = &s->aSlot[(s->iHead + i) % s->nSlot];
    if (t->state != S_FREE) continue;
    int iRg = next_rg(s), rc = 0;
    if (iRg >= 0) {
      s->iNext++;
      rc = slot_start(s, t, iRg);
    } else if (t->bAcc) {
      t->bAcc = 0;
      rc = slot_read(s, t);
    }
    if (rc) return rc;
  }
  s->iHead = (s->iHead + 1) % s->nSlot; /* spread the next row groups' starts */
  return s->rcErr;
}

/* dev_scan_next in accumulate mode: results in the order they complete. */
static int dev_scan_next_acc(dev_scan *s, csq_vec *aOut, uint32_t *pnRows, char **pzErr) {
  for (;;) {
    int rc = s->rcErr ? s->rcErr : fill_acc(s);
    if (rc) goto fail;
    scan_slot *t = NULL;
    int bBusy = 0;
    for (int i = 0; i < s->nSlot; i++) {
      scan_slot *u = &s->aSlot[i];
      if (u->state == S_READY && !t) t = u;
      if (u->state != S_FREE || u->bAcc) bBusy = 1;
    }
    if (s->bRange && !t) {
      /* pieces still to start, or the fall back to take over: go round */
      int bRun = 0;
      for (int i = 0; i < s->nSlot; i++) bRun |= s->aSlot[i].state != S_FREE;
      if (!bRun) continue;
    }
    if (!t) {
      if (!bBusy) return 0; /* the end */
      rc = pump_one(s);
      if (rc) goto fail;
      continue;
    }
    uint32_t nRows = 0, next = 0;
    rc = take_result(s, t, aOut, &nRows, &next);
    if (rc) goto fail;
    if (next < t->nRow) { /* the output area was full: go on from there */
      rc = resume_slot(s, t, next);
      if (rc) goto fail;
    } else {
      t->state = S_FREE;
    }
    if (nRows) {
      *pnRows = nRows;
      return 0;
    }
  }
fail:
  if (pzErr) *pzErr = dev_mprintf("%s", s->zErr ? s->zErr : "scan failed");
  return s->rcErr ? s->rcErr : -EIO;
}

/* ---- the host engine ---- */

/* Run the program over the host slot's row group from its startRow: the
** same verified program and executor as on the device, over aHostBuf. On
** success the slot is S_READY with its result in aRes. */
static int host_exec(dev_scan *s) {
  scan_slot *t = &s->host;
  const store_rg *pRg = s->apRg[t->iRg];
  dev_stats local;
  uint64_t ret = 0;
  int rc = dev_host_xrun(s->pHostType, s->pHostProg, s->aHostBuf, s->nHostBuf, t->aMr, s->id,
                         t->startRow, &local, &ret);
  dev_stats_add(dev_queue_stats(s->q), &local);
  if (rc) {
    char zWhy[128];
    if (rc == CSQ_SC_PROGRAM_FAULT && !s->rcErr) s->fault = ret;
    if (rc == CSQ_SC_PROGRAM_FAULT) {
      char zF[96];
      csq_fault_text(ret, zF, sizeof(zF));
      snprintf(zWhy, sizeof(zWhy), "program fault: %s", zF);
    } else
      snprintf(zWhy, sizeof(zWhy), "%s", csq_status_name((uint16_t)rc));
    return scan_fail(s, rc > 0 && rc <= 0x7FFF ? rc : CSQ_SC_PROGRAM_FAULT, pRg, t->iRg,
                     "running the program on the host (the row group does not fit the device's "
                     "local memory)",
                     zWhy);
  }
  uint64_t nBytes = csq_ret_bytes(ret);
  if (nBytes < CSQ_RES_HDR || nBytes > t->nOutCap || csq_ret_bad(ret))
    return scan_fail(s, -EBADMSG, pRg, t->iRg, "running the program on the host",
                     "result size out of range");
  t->aRes = s->aHostBuf + t->offOut;
  t->nRes = nBytes;
  if (csq_res_check(t->aRes, t->nRes) != (uint32_t)ret)
    return scan_fail(s, -EBADMSG, pRg, t->iRg, "running the program on the host",
                     "the result's checksum differs");
  t->state = S_READY;
  return 0;
}

/* Take the next row group (zone maps first) into the host engine: read its
** chunks to the host, write its job, run the program. Called only when no
** device slot is busy, so results keep their order. Returns 0 with the host
** slot S_READY, or 0 with it S_FREE at the end of the scan, or an error. */
static int host_next(dev_scan *s) {
  scan_slot *t = &s->host;
  int iRg = next_rg(s);
  if (iRg < 0) return 0;
  s->iNext++;
  const store_rg *pRg = s->apRg[iRg];
  if (!s->pHostType) {
    char zErr[256] = "";
    s->pHostType = dev_ptype_find(CSQ_PTYPE_CSQ);
    if (!s->pHostType ||
        s->pHostType->xVerify(s->aProg, s->nProg, &s->pHostProg, zErr, sizeof(zErr))) {
      s->pHostType = NULL;
      return scan_fail(s, -ENOSPC, pRg, iRg,
                       "no room in the device's local memory for this row "
                       "group, and the host engine cannot run the program",
                       zErr[0] ? zErr : "no executor in this build");
    }
  }
  uint64_t aOff[CSQ_PROG_MAX_IN], nIn = 0;
  int n = chunk_ranges(s, pRg, NULL, NULL, NULL);
  csq_lba_range *aLba = realloc(t->aLba, sizeof(csq_lba_range) * (n > 0 ? n : 1));
  if (!aLba) return scan_fail(s, -ENOMEM, pRg, iRg, "the host engine", "out of memory");
  t->aLba = aLba;
  chunk_ranges(s, pRg, t->aLba, aOff, &nIn);
  t->offIn = pad4k(job_bytes(s, pRg));
  t->offOut = t->offIn + pad4k(nIn ? nIn : 8);
  t->nOutCap = pad4k(out_bytes(s, pRg));
  uint64_t nBuf = t->offOut + t->nOutCap;
  if (nBuf > s->nHostBuf) {
    free(s->aHostBuf);
    s->nHostBuf = 0;
    s->aHostBuf = aligned_alloc(4096, nBuf);
    if (!s->aHostBuf)
      return scan_fail(s, -ENOMEM, pRg, iRg, "the host engine",
                       "out of memory for the row group's chunks");
    s->nHostBuf = nBuf;
  }
  uint8_t *pIn = s->aHostBuf + t->offIn;
  for (int i = 0; i < n; i++) {
    int rc = dev_nvm_read(s->q, t->aLba[i].slba, t->aLba[i].nlb, pIn);
    if (rc)
      return scan_fail(s, rc, pRg, iRg, "reading chunks for the host engine", dev_errmsg(s->q));
    pIn += (uint64_t)t->aLba[i].nlb * CSQ_LBA_SIZE;
  }
  uint32_t nJob = build_job(s, pRg, aOff, s->aHostBuf);
  t->aMr[0] = (csq_mrange){CSQ_NSID_SLM, 0, nJob, 0, 0};
  t->aMr[1] = (csq_mrange){CSQ_NSID_SLM, 0, pad8(nIn ? nIn : 8), t->offIn, 0};
  t->aMr[2] = (csq_mrange){CSQ_NSID_SLM, 0, t->nOutCap, t->offOut, 0};
  t->iRg = iRg;
  t->nRow = pRg->nRow;
  t->startRow = 0;
  return host_exec(s);
}

int dev_scan_next(dev_scan *s, csq_vec *aOut, uint32_t *pnRows, char **pzErr) {
  *pnRows = 0;
  if (pzErr) *pzErr = NULL;
  if (s->bAcc) return dev_scan_next_acc(s, aOut, pnRows, pzErr);
  if (s->nBusy && s->aSlot[s->iHead].state == S_HOLD && !s->rcErr) {
    /* more is wanted from the row group the cap stopped */
    scan_slot *h = &s->aSlot[s->iHead];
    int rc = resume_slot(s, h, h->startRow);
    if (rc) goto fail;
  }
  for (;;) {
    int rc = s->rcErr ? s->rcErr : fill(s);
    if (rc) goto fail;
    scan_slot *t;
    if (s->bHostMore) {
      s->bHostMore = 0;
      rc = host_exec(s);
      if (rc) goto fail;
    }
    if (s->host.state == S_READY) {
      /* the host's row group comes before any the slots hold (they were
      ** started after it) */
      t = &s->host;
    } else if (s->nBusy == 0) {
      /* the slots are idle: what is left (if anything) is for the host engine */
      rc = host_next(s);
      if (rc) goto fail;
      if (s->host.state != S_READY) return 0; /* the end */
      t = &s->host;
    } else {
      t = &s->aSlot[s->iHead];
    }
    if (t->state != S_READY) {
      rc = pump_one(s);
      if (rc) goto fail;
      continue;
    }
    uint32_t nRows = 0, next = 0;
    rc = take_result(s, t, aOut, &nRows, &next);
    if (rc) goto fail;
    if (next < t->nRow && t == &s->host) {
      /* partial: the output area was full; the next part is computed on
      ** the next call, into the same buffer (these rows are copied out) */
      t->startRow = next;
      t->state = S_FREE;
      s->bHostMore = 1;
    } else if (next < t->nRow && s->nRowCap) {
      /* partial, perhaps at the row cap: the caller may need no more */
      t->startRow = next;
      t->state = S_HOLD;
    } else if (next < t->nRow) {
      /* partial: the output area was full; continue this row group */
      rc = resume_slot(s, t, next);
      if (rc) goto fail;
    } else if (t == &s->host) {
      t->state = S_FREE;
    } else {
      t->state = S_FREE;
      s->iHead = (s->iHead + 1) % s->nSlot;
      s->nBusy--;
      rc = fill(s); /* keep the device busy while the caller works */
      if (rc) goto fail;
    }
    if (nRows) {
      *pnRows = nRows;
      return 0;
    }
  }
fail:
  if (pzErr) *pzErr = dev_mprintf("%s", s->zErr ? s->zErr : "scan failed");
  return s->rcErr ? s->rcErr : -EIO;
}

int dev_scan_ncol(const dev_scan *s) {
  return s->prog.nResCol;
}
int dev_scan_rg(const dev_scan *s) {
  return s->iLastRg;
}
uint64_t dev_scan_fault(const dev_scan *s) {
  return s->fault;
}

const uint32_t *dev_scan_rownums(const dev_scan *s) {
  return s->prog.bRowNum ? s->aRowNum : NULL;
}

void dev_scan_set_omit(dev_scan *s, uint64_t mask) {
  if (s && s->nOmitW) s->omit = s->prog.nOut < 64 ? mask & ((1ull << s->prog.nOut) - 1) : mask;
}

void dev_scan_set_row_cap(dev_scan *s, uint32_t nRow) {
  if (s && !s->bAcc && !s->prog.bAgg) s->nRowCap = nRow;
}

void dev_scan_close(dev_scan *s) {
  if (!s) return;
  /* drain: the device may still write into our SLM and host buffers */
  for (int i = 0; i < s->nSlot; i++) {
    scan_slot *t = &s->aSlot[i];
    while (t->state != S_FREE && t->state != S_READY && t->nPend > 0) {
      csq_cqe c;
      int bHave = 0;
      pthread_mutex_lock(&g_mu);
      if (s->nMail) {
        c = s->aMail[--s->nMail];
        bHave = 1;
      }
      pthread_mutex_unlock(&g_mu);
      if (!bHave && dev_reap(s->q, &c, -1)) break; /* timed out: the driver expired them */
      scan_slot *u = slot_of_cid(s, c.cid);
      if (u) {
        for (int k = 0; k < u->nCid; k++)
          if (u->aCid[k] == c.cid) {
            u->aCid[k] = u->aCid[--u->nCid];
            break;
          }
        u->nPend--;
        if (u->nPend == 0) u->state = S_FREE;
      } else {
        route_foreign(s, &c);
      }
    }
  }
  pthread_mutex_lock(&g_mu);
  for (dev_scan **pp = &g_pOpen; *pp; pp = &(*pp)->pNextOpen)
    if (*pp == s) {
      *pp = s->pNextOpen;
      break;
    }
  pthread_mutex_unlock(&g_mu);
  /* Leave the program loaded but inactive: a later scan with the same
  ** program reactivates it for one command, and the activation limit is
  ** never spent on programs nobody runs. */
  if (s->bActivated) activate(s->q, s->pind, 0);
  for (int i = 0; i < s->nSlot; i++) {
    scan_slot *t = &s->aSlot[i];
    if (t->slm != UINT64_MAX) dev_slm_free(s->pDev, t->slm);
    free(t->aJob);
    free(t->aLba);
    free(t->aRes);
  }
  if (s->pHostType && s->pHostProg) s->pHostType->xFree(s->pHostProg);
  free(s->aHostBuf);
  free(s->host.aLba);
  csq_prog_clear(&s->prog);
  free(s->aProg);
  free(s->aMail);
  free(s->aRowNum);
  free(s->aPiece);
  free(s->zErr);
  free(s);
}

int dev_scan_open(dev_queue *q, store *st, const store_table *pTab, store_rg **apRg, int nRg,
                  const uint8_t *prog, size_t nProg, dev_scan **pp, char **pzErr) {
  char zErr[256];
  int rc;
  *pp = NULL;
  *pzErr = NULL;
  dev_scan *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->q = q;
  s->pDev = dev_queue_device(q);
  s->st = st;
  s->pTab = pTab;
  s->apRg = apRg;
  s->nRg = nRg;
  s->iLastRg = -1;
  for (int i = 0; i < SCAN_SLOTS; i++) s->aSlot[i].slm = UINT64_MAX;
  s->aProg = malloc(nProg ? nProg : 1);
  if (!s->aProg) {
    free(s);
    return -ENOMEM;
  }
  memcpy(s->aProg, prog, nProg);
  s->nProg = nProg;
  s->id = csq_prog_id(prog, nProg);
  rc = csq_prog_parse(s->aProg, nProg, &s->prog, zErr, sizeof(zErr));
  if (rc) {
    *pzErr = dev_mprintf("table '%s': invalid program: %s", pTab->zName, zErr);
    goto fail;
  }
  if (s->prog.bRowNum) s->nOmitW = (s->prog.nOut + 63) / 64;
  /* Size the slots for the largest row group that will be sent. If SLM
  ** cannot hold that, size them for the row groups under a bound that halves
  ** until an allocation succeeds: the bigger ones run in the host engine
  ** (host_next). With no room at all, every row group does. */
  uint64_t nLimit = UINT64_MAX, nSlm = 0, nJobMax = 8, nInMax = 8, nOutMax = 8;
  int nRanges = 1;
  /* range mode needs the whole table as its catalog holds it (and room in
  ** range 0 for the records and the largest delete bitmap) */
  const char *zRange = getenv("CSQ_EXEC_RANGE"); /* "0": one Execute per row group */
  int bRangeCand = s->prog.bAgg && nRg > 0 && apRg == pTab->apRg && nRg == pTab->nRg &&
                   !(zRange && zRange[0] == '0') &&
                   store_table_catpos(pTab, &s->catLba, &s->catOff) == 0;
  if (bRangeCand) {
    s->nChunkRec = (uint32_t)pTab->nCol + 1;
    uint64_t nScr = pad4k(rec_stride(s)) + CSQ_LBA_SIZE;
    for (int i = 0; i < nRg; i++) {
      if (apRg[i]->nChunk != (int)s->nChunkRec) bRangeCand = 0;
      if (apRg[i]->nDel && pad4k(apRg[i]->delBytes) > nScr) nScr = pad4k(apRg[i]->delBytes);
    }
    s->nScratch = (uint32_t)nScr;
    s->jobOff = CSQ_RANGE_SCR + s->nScratch;
  }
  uint64_t nRangeOut = bRangeCand ? range_out_bytes(s, apRg, nRg) : 0;
  for (;;) {
    int nFit = 0;
    nJobMax = nInMax = nOutMax = 8;
    nRanges = 1;
    for (int i = 0; i < nRg; i++) {
      const store_rg *pRg = apRg[i];
      uint64_t nIn = 0;
      int n = chunk_ranges(s, pRg, NULL, NULL, &nIn);
      if (n < 0) {
        *pzErr = dev_mprintf("table '%s', row group %d: the program reads a column the table "
                             "does not have",
                             pTab->zName, i);
        rc = -EINVAL;
        goto fail;
      }
      if (store_rg_zone_skip(pRg, &s->prog)) continue;
      uint64_t a = job_bytes(s, pRg), b = out_bytes(s, pRg);
      if (pad4k(a) + pad4k(nIn ? nIn : 8) + pad4k(b) > nLimit) continue;
      nFit++;
      if (n > nRanges) nRanges = n;
      if (a > nJobMax) nJobMax = a;
      if (nIn > nInMax) nInMax = nIn;
      if (b > nOutMax) nOutMax = b;
    }
    if (bRangeCand) nJobMax = s->jobOff + pad4k(nJobMax);
    if (nRangeOut > nOutMax) nOutMax = nRangeOut;
    nSlm = pad4k(nJobMax) + pad4k(nInMax) + pad4k(nOutMax);
    if (nFit == 0) {
      nSlm = 0; /* nothing to send (or nothing fits): no slot */
      break;
    }
    if (dev_slm_alloc(s->pDev, nSlm, &s->aSlot[0].slm) == 0) break;
    s->aSlot[0].slm = UINT64_MAX;
    if (nOutMax == nRangeOut) { /* no room for a range's groups: row groups' sizes only */
      nRangeOut = 0;
      continue;
    }
    nLimit = nSlm / 2;
    if (nLimit < 4 * 4096) {
      nSlm = 0;
      break;
    }
  }
  for (int i = 0; i < SCAN_SLOTS && nSlm; i++) {
    scan_slot *t = &s->aSlot[i];
    if (i > 0 && dev_slm_alloc(s->pDev, nSlm, &t->slm)) {
      t->slm = UINT64_MAX;
      break;
    }
    t->offIn = pad4k(nJobMax);
    t->offOut = t->offIn + pad4k(nInMax);
    t->nOutCap = pad4k(nOutMax);
    t->aJob = malloc(nJobMax);
    t->aLba = malloc(sizeof(csq_lba_range) * nRanges);
    s->nLbaCap = nRanges;
    s->nSlot++; /* counted before the check: dev_scan_close frees what it has */
    if (!t->aJob || !t->aLba) {
      rc = -ENOMEM;
      goto fail;
    }
  }
  if (s->nSlot == 0) {
    /* every row group runs in the host engine: no program on the device */
    pthread_mutex_lock(&g_mu);
    s->pNextOpen = g_pOpen;
    g_pOpen = s;
    pthread_mutex_unlock(&g_mu);
    *pp = s;
    return 0;
  }
  /* accumulate when the order of rows cannot show and every row group
  ** runs on the device */
  s->bAcc = s->prog.bAgg && s->nSlot > 0 && order_free(s);
  for (int i = 0; i < nRg && s->bAcc; i++)
    if (!store_rg_zone_skip(apRg[i], &s->prog) && !rg_fits(s, apRg[i])) s->bAcc = 0;
  if (s->bAcc && bRangeCand && s->aSlot[0].offIn >= s->jobOff + CSQ_JOB_HDR) {
    rc = range_pieces(s);
    if (rc) goto fail;
    s->bRange = s->nPiece > 0;
    s->iNext = s->nRg; /* the pieces cover every row group (the fall back resets it) */
  }
  char *zLoad = NULL;
  rc = dev_prog_load(q, s->aProg, nProg, &s->pind, &zLoad);
  s->bActivated = rc == 0;
  if (rc) {
    *pzErr = dev_mprintf("table '%s': %s", pTab->zName, zLoad ? zLoad : "loading the program");
    free(zLoad);
    goto fail;
  }
  pthread_mutex_lock(&g_mu);
  s->pNextOpen = g_pOpen;
  g_pOpen = s;
  pthread_mutex_unlock(&g_mu);
  *pp = s;
  return 0;
fail:
  dev_scan_close(s);
  return rc ? rc : -ENOMEM;
}
