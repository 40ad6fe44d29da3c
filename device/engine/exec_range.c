/*
** device/engine/exec_range.c - Execute over a range of row groups (program.h,
** RUNNING OVER A RANGE): the device reads the row groups' records from the
** on-media catalog, builds each job, reads the chunks (and delete bitmaps)
** itself and runs the one-row-group executor (exec_run.c) over each in turn,
** accumulating into one result. The host's commands and bytes then stay the
** same whatever the number of row groups: only the range header crosses the
** link, and the merged result comes back once.
**
** The records are hashed as they are read and the hash checked against the
** host's before success is reported, so a catalog that moved under the host
** (another process committed and its space was reused) yields a fault and
** no result, never a wrong answer; each chunk is still checked against the
** XXH3 its record names, as in any job.
*/
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "device/engine/exec_int.h"

static int rfault(uint64_t *pRet, uint64_t reason) {
  *pRet = reason;
  return CSQ_SC_PROGRAM_FAULT;
}

/* Where one input slot's chunk is, from a record. */
typedef struct rg_in {
  uint64_t b0, b1; /* blocks [b0, b1) relative to the row group's first */
  uint32_t off, len;
  uint64_t xxh3;
} rg_in;

/* Merge the blocks of aI[0..nIn) (sorted by first block into aOrd) into
** ascending ranges of the row group at lba, written to aLr; aOff[i] gets
** input slot i's offset in the input area. The number of ranges; *pnByte
** their bytes. The same layout the host's scan builds for one job. */
static int merge_blocks(const rg_in *aI, int nIn, int *aOrd, uint64_t lba, csq_lba_range *aLr,
                        uint64_t *aOff, uint64_t *pnByte) {
  for (int i = 0; i < nIn; i++) aOrd[i] = i;
  for (int i = 1; i < nIn; i++) { /* insertion sort: nIn is small */
    int x = aOrd[i], j = i;
    while (j > 0 && aI[aOrd[j - 1]].b0 > aI[x].b0) {
      aOrd[j] = aOrd[j - 1];
      j--;
    }
    aOrd[j] = x;
  }
  int n = 0;
  uint64_t pos = 0, r0 = 0, r1 = 0;
  for (int k = 0; k < nIn; k++) {
    const rg_in *p = &aI[aOrd[k]];
    if (n == 0 || p->b0 > r1) {
      if (n > 0) {
        aLr[n - 1] = (csq_lba_range){CSQ_NSID_NVM, (uint32_t)(r1 - r0), lba + r0};
        pos += (r1 - r0) * CSQ_LBA_SIZE;
      }
      r0 = p->b0;
      r1 = p->b1;
      n++;
    } else if (p->b1 > r1) {
      r1 = p->b1;
    }
    aOff[aOrd[k]] = pos + p->off - r0 * CSQ_LBA_SIZE;
  }
  if (n > 0) {
    aLr[n - 1] = (csq_lba_range){CSQ_NSID_NVM, (uint32_t)(r1 - r0), lba + r0};
    pos += (r1 - r0) * CSQ_LBA_SIZE;
  }
  *pnByte = pos;
  return n;
}

/* See the banner. Same contract as ex_run: 0 or a status, *pRet the
** completion's DW0-DW1 (a CSQ_FAULT_* reason on a fault). */
int ex_run_range(void *pCompiled, dev_exec_ctx *ctx, uint64_t *pRet) {
  ex_prog *ep = pCompiled;
  const csq_prog *pp = &ep->p;
  *pRet = 0;
  if (ctx->aParam[0] != ep->id) return rfault(pRet, CSQ_FAULT_STALE_PROGRAM);
  if (ctx->nRange < 3) return rfault(pRet, CSQ_FAULT_BAD_RANGES);
  if (!pp->bAgg || !ctx->xReadLba ||
      (ctx->aParam[1] & CSQ_EXEC_START_MASK & ~(uint64_t)CSQ_EXEC_RANGE))
    return rfault(pRet, CSQ_FAULT_BAD_JOB);
  const csq_mrange *pR0 = &ctx->aRange[0], *pR1 = &ctx->aRange[1];
  if (pR0->len < CSQ_RANGE_SCR + CSQ_LBA_SIZE || (pR0->addr & 4095) || (pR1->addr & 4095))
    return rfault(pRet, CSQ_FAULT_BAD_RANGES);
  uint8_t *p0 = ctx->pSlm + pR0->addr;
  uint32_t nRg = csq_le32(p0 + 4), nChunk = csq_le32(p0 + 24), nScratch = csq_le32(p0 + 28),
           jobOff = csq_le32(p0 + 40);
  uint64_t catLba = csq_le64(p0 + 8), recOff = csq_le64(p0 + 16), recXxh3 = csq_le64(p0 + 32);
  if (csq_le32(p0) != CSQ_RANGE_MAGIC || nRg == 0 || nChunk == 0 || nChunk > 65536 ||
      nScratch < CSQ_LBA_SIZE || (nScratch % CSQ_LBA_SIZE) || (jobOff & 7) ||
      (uint64_t)CSQ_RANGE_SCR + nScratch > jobOff || jobOff >= pR0->len)
    return rfault(pRet, CSQ_FAULT_BAD_JOB);
  for (int i = 0; i < pp->nIn; i++)
    if (pp->aIn[i] >= nChunk) return rfault(pRet, CSQ_FAULT_BAD_JOB);
  const uint64_t stride = CSQ_CATREC_HDR + (uint64_t)CSQ_CATREC_CHUNK * nChunk;
  const uint64_t nScrBlk = nScratch / CSQ_LBA_SIZE;
  uint8_t *pScr = p0 + CSQ_RANGE_SCR, *pJob = p0 + jobOff;
  const uint64_t nJobArea = pR0->len - jobOff;
  uint64_t nHead = CSQ_JOB_HDR + (uint64_t)CSQ_JOB_CHUNK_SZ * pp->nIn;
  rg_in *aI = malloc(sizeof(rg_in) * (size_t)(pp->nIn ? pp->nIn : 1));
  int *aOrd = malloc(sizeof(int) * (size_t)(pp->nIn ? pp->nIn : 1));
  uint64_t *aOff = malloc(sizeof(uint64_t) * (size_t)(pp->nIn ? pp->nIn : 1));
  csq_lba_range *aLr = malloc(sizeof(csq_lba_range) * (size_t)(pp->nIn ? pp->nIn : 1));
  int rc = 0;
  ex_carry carry;
  memset(&carry, 0, sizeof(carry));
  if (!aI || !aOrd || !aOff || !aLr) {
    rc = rfault(pRet, CSQ_FAULT_NOMEM);
    goto done;
  }
  XXH3_state_t hs;
  XXH3_64bits_reset(&hs);
  /* the blocks [winB0, winB0 + winN) of the catalog are in the scratch area */
  uint64_t winB0 = 0, winN = 0, endB = (recOff + stride * nRg + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
  uint64_t param = ctx->aParam[1] & ~(CSQ_EXEC_RANGE | CSQ_EXEC_START_MASK);
  for (uint32_t g = 0; g < nRg; g++) {
    uint64_t off = recOff + stride * g, b0 = off / CSQ_LBA_SIZE,
             b1 = (off + stride + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
    if (b1 - b0 > nScrBlk) {
      rc = rfault(pRet, CSQ_FAULT_BAD_JOB);
      goto done;
    }
    if (winN == 0 || b0 < winB0 || b1 > winB0 + winN) {
      uint64_t n = endB - b0 < nScrBlk ? endB - b0 : nScrBlk;
      csq_lba_range lr = {CSQ_NSID_NVM, (uint32_t)n, catLba + b0};
      winN = 0;
      rc = ctx->xReadLba(ctx, &lr, 1, pScr);
      if (rc) goto done;
      winB0 = b0;
      winN = n;
    }
    const uint8_t *rec = pScr + (off - winB0 * CSQ_LBA_SIZE);
    XXH3_64bits_update(&hs, rec, stride);
    uint64_t lba = csq_le64(rec), delLba = csq_le64(rec + 20), delXxh3 = csq_le64(rec + 32);
    uint32_t nblk = csq_le32(rec + 8), nRow = csq_le32(rec + 12), nDel = csq_le32(rec + 16),
             delBytes = csq_le32(rec + 28);
    uint32_t dB = nDel ? (nRow + 7) / 8 : 0;
    if (csq_le32(rec + 40) != nChunk || nRow > CSQ_CHUNK_MAX_VALS || nDel > nRow ||
        (nDel && (delBytes != dB || delLba == 0))) {
      rc = rfault(pRet, CSQ_FAULT_RANGE_STALE);
      goto done;
    }
    for (int i = 0; i < pp->nIn; i++) {
      const uint8_t *c = rec + CSQ_CATREC_HDR + (size_t)CSQ_CATREC_CHUNK * pp->aIn[i];
      rg_in *p = &aI[i];
      p->off = csq_le32(c);
      p->len = csq_le32(c + 4);
      p->xxh3 = csq_le64(c + 8);
      if ((uint64_t)p->off + p->len > (uint64_t)nblk * CSQ_LBA_SIZE) {
        rc = rfault(pRet, CSQ_FAULT_RANGE_STALE);
        goto done;
      }
      p->b0 = p->off / CSQ_LBA_SIZE;
      p->b1 = ((uint64_t)p->off + p->len + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
      if (p->b1 <= p->b0) p->b1 = p->b0 + 1;
    }
    if (nHead + dB > nJobArea || (uint64_t)dB > nScratch) {
      rc = rfault(pRet, CSQ_FAULT_BAD_RANGES);
      goto done;
    }
    uint64_t nIn = 0;
    int nLr = merge_blocks(aI, pp->nIn, aOrd, lba, aLr, aOff, &nIn);
    if (nIn > pR1->len) {
      rc = rfault(pRet, CSQ_FAULT_BAD_RANGES);
      goto done;
    }
    if (nLr > 0 && (rc = ctx->xReadLba(ctx, aLr, nLr, ctx->pSlm + pR1->addr)) != 0) goto done;
    memset(pJob, 0, nHead);
    if (dB) {
      /* the bitmap overwrites the records read so far: read them again next */
      csq_lba_range lr = {CSQ_NSID_NVM, (dB + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE, delLba};
      winN = 0;
      if ((rc = ctx->xReadLba(ctx, &lr, 1, pScr)) != 0) goto done;
      if (XXH3_64bits(pScr, dB) != delXxh3) {
        rc = rfault(pRet, CSQ_FAULT_CHECKSUM);
        goto done;
      }
      memcpy(pJob + nHead, pScr, dB);
    }
    csq_put_le32(pJob, CSQ_JOB_MAGIC);
    csq_put_le32(pJob + 4, nRow);
    csq_put_le32(pJob + 8, (uint32_t)pp->nIn);
    csq_put_le32(pJob + 12, dB);
    for (int i = 0; i < pp->nIn; i++) {
      uint8_t *e = pJob + CSQ_JOB_HDR + (size_t)CSQ_JOB_CHUNK_SZ * i;
      csq_put_le64(e, aOff[i]);
      csq_put_le64(e + 8, aI[i].len);
      csq_put_le64(e + 16, aI[i].xxh3);
    }
    csq_put_le64(pJob + 16, csq_job_hash(pJob, nHead + dB));
    csq_mrange aR[3] = {{CSQ_NSID_SLM, 0, nHead + dB, pR0->addr + jobOff, 0},
                        {CSQ_NSID_SLM, 0, pR1->len, pR1->addr, 0},
                        ctx->aRange[2]};
    dev_exec_ctx sub = *ctx;
    sub.aRange = aR;
    sub.nRange = 3;
    sub.aParam[1] = param;
    carry.bLast = g + 1 == nRg;
    rc = ex_run_one(pCompiled, &sub, &carry, pRet);
    if (rc) goto done;
    if (csq_ret_partial(*pRet)) {
      rc = rfault(pRet, CSQ_FAULT_RANGE_FULL);
      goto done;
    }
    /* the next row group aggregates into the carried groups; a seed (an
    ** earlier piece's result) only ever starts the first */
    param &= ~CSQ_EXEC_ACC & 0xFFFFFFFFull;
  }
  if (XXH3_64bits_digest(&hs) != recXxh3) rc = rfault(pRet, CSQ_FAULT_RANGE_STALE);
done:
  ex_carry_free(&carry);
  free(aI);
  free(aOrd);
  free(aOff);
  free(aLr);
  return rc;
}
