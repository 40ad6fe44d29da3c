/*
** device/host/vecrun.c - csq's host engine over column vectors
** (device/host/vecrun.h). Each piece of VR_PIECE rows is encoded into
** column chunks (the store's codec: dictionaries and bit-packing make the
** engine group on codes), laid out in one host buffer as a device slot is
** ([job descriptor | input area | output area], program.h "RUNNING A
** PROGRAM") and run by the program type's xRun; a result that does not fit
** the output area continues from its nextRow, as on a device.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/engine/ptype.h"
#include "device/format/chunk.h"
#include "device/format/checksum.h"
#include "device/format/le.h"
#include "device/format/program.h"
#include "device/host/result.h"
#include "device/host/vecrun.h"
#include "device/link/msg.h"
#include "device/link/queue.h" /* dev_now_ns */

/* Rows per piece: as many as a chunk holds. Each piece's groups come back
** as a result of their own, merged on the host value by value, so rows with
** about as many groups as rows would be grouped twice over many pieces;
** the engine's batches inside a piece stay in cache whatever its size. */
#define VR_PIECE CSQ_CHUNK_MAX_VALS

typedef struct vr_run {
  const csq_prog *pProg;
  const dev_ptype *pType;
  void *pCompiled;
  uint64_t id;
  uint8_t *aBuf; /* job | input | output */
  uint64_t nBuf;
  uint8_t *apEnc[CSQ_PROG_MAX_IN];
  size_t anEnc[CSQ_PROG_MAX_IN];
  uint64_t aHash[CSQ_PROG_MAX_IN]; /* each chunk's XXH3, as the catalog keeps it */
  csq_vec *aPart;                  /* pProg->nResCol vectors of a result */
} vr_run;

static uint64_t vr_pad8(uint64_t n) {
  return (n + 7) & ~(uint64_t)7;
}
static uint64_t vr_pad4k(uint64_t n) {
  return (n + 4095) & ~(uint64_t)4095;
}

static int vr_fail(char **pzErr, int rc, const char *zFmt, const char *zWhy) {
  if (pzErr && !*pzErr) *pzErr = dev_mprintf(zFmt, zWhy);
  return rc;
}

int dev_host_xrun(const dev_ptype *pType, void *pCompiled, uint8_t *pBuf, uint64_t nBuf,
                  const csq_mrange *aMr, uint64_t id, uint64_t param1, dev_stats *pStats,
                  uint64_t *pRet) {
  dev_exec_ctx ctx;
  memset(&ctx, 0, sizeof(ctx));
  memset(pStats, 0, sizeof(*pStats));
  ctx.pSlm = pBuf;
  ctx.nSlm = nBuf;
  ctx.aRange = aMr;
  ctx.nRange = 3;
  ctx.aParam[0] = id;
  ctx.aParam[1] = param1;
  ctx.pStats = pStats;
  *pRet = 0;
  int64_t t0 = dev_now_ns();
  int rc = pType->xRun(pCompiled, &ctx, pRet);
  pStats->engine_ns = (uint64_t)(dev_now_ns() - t0);
  pStats->programs_executed = 1;
  return rc;
}

/* Write the job of the piece's encoded chunks (n rows) at r->aBuf and the
** chunks at offIn (program.h, "RUNNING A PROGRAM"). */
static void vr_lay(vr_run *r, uint32_t n, uint64_t nJob, uint64_t offIn) {
  const csq_prog *P = r->pProg;
  uint8_t *j = r->aBuf;
  memset(j, 0, nJob);
  csq_put_le32(j, CSQ_JOB_MAGIC);
  csq_put_le32(j + 4, n);
  csq_put_le32(j + 8, (uint32_t)P->nIn);
  uint64_t off = 0;
  for (int k = 0; k < P->nIn; k++) {
    uint8_t *e = j + CSQ_JOB_HDR + (size_t)CSQ_JOB_CHUNK_SZ * k;
    memcpy(r->aBuf + offIn + off, r->apEnc[k], r->anEnc[k]);
    csq_put_le64(e, off);
    csq_put_le64(e + 8, r->anEnc[k]);
    csq_put_le64(e + 16, r->aHash[k]);
    off += vr_pad8(r->anEnc[k]);
  }
  csq_put_le64(j + 16, csq_job_hash(j, nJob));
}

/* Run the piece's encoded chunks (n rows) from row 0 to the end. */
static int vr_piece(vr_run *r, uint32_t n, dev_vecrun_fn xPart, void *pArg, char **pzErr) {
  const csq_prog *P = r->pProg;
  uint64_t nJob = CSQ_JOB_HDR + (uint64_t)CSQ_JOB_CHUNK_SZ * P->nIn;
  uint64_t nIn = 0, nText = 0;
  for (int k = 0; k < P->nIn; k++) nIn += vr_pad8(r->anEnc[k]);
  for (int k = 0; k < P->nIn; k++) nText += r->anEnc[k];
  uint64_t offIn = vr_pad4k(nJob), offOut = offIn + vr_pad4k(nIn ? nIn : 8);
  /* room for every row to be its own group, and the text keys may carry */
  uint64_t nOut = vr_pad4k(CSQ_RES_HDR + (uint64_t)P->nResCol * (CSQ_RES_COL_SZ + 13ull * n + 24) +
                           nText + 65536);
  int bLaid = 0; /* the job and the chunks are in r->aBuf: a continuation reuses them */
  for (uint32_t start = 0; start < n;) {
    if (offOut + nOut > r->nBuf) {
      free(r->aBuf);
      r->nBuf = 0;
      r->aBuf = aligned_alloc(4096, offOut + nOut);
      if (!r->aBuf) return -ENOMEM;
      r->nBuf = offOut + nOut;
      bLaid = 0;
    }
    if (!bLaid) vr_lay(r, n, nJob, offIn);
    bLaid = 1;
    csq_mrange aMr[3] = {{CSQ_NSID_SLM, 0, nJob, 0, 0},
                         {CSQ_NSID_SLM, 0, vr_pad8(nIn ? nIn : 8), offIn, 0},
                         {CSQ_NSID_SLM, 0, nOut, offOut, 0}};
    dev_stats st;
    uint64_t ret = 0;
    int rc = dev_host_xrun(r->pType, r->pCompiled, r->aBuf, r->nBuf, aMr, r->id, start, &st, &ret);
    if (rc == CSQ_SC_PROGRAM_FAULT && ret == CSQ_FAULT_NOT_NUMERIC) return -EDOM;
    if (rc == CSQ_SC_PROGRAM_FAULT && ret == CSQ_FAULT_OUTPUT_FULL && nOut < (1ull << 40)) {
      nOut *= 2; /* not even one run fits: wider values than estimated */
      continue;
    }
    if (rc == CSQ_SC_PROGRAM_FAULT) {
      char zF[96];
      csq_fault_text(ret, zF, sizeof(zF));
      return vr_fail(pzErr, -EIO, "csq's host engine over joined rows: program fault: %s", zF);
    }
    if (rc)
      return vr_fail(pzErr, -EIO, "csq's host engine over joined rows: %s",
                     csq_status_name((uint16_t)rc));
    uint64_t nBytes = csq_ret_bytes(ret);
    const uint8_t *pRes = r->aBuf + offOut;
    if (nBytes < CSQ_RES_HDR || nBytes > nOut || csq_ret_bad(ret) ||
        csq_res_check(pRes, nBytes) != (uint32_t)ret)
      return vr_fail(pzErr, -EBADMSG, "csq's host engine over joined rows: %s",
                     "a malformed result");
    uint32_t nRows = 0, next = 0;
    rc = dev_result_decode(P, pRes, nBytes, start, n, 0, r->aPart, &nRows, &next, NULL);
    if (rc)
      return vr_fail(pzErr, rc, "csq's host engine over joined rows: %s",
                     rc == -ENOMEM ? "out of memory" : "a malformed result");
    rc = xPart(pArg, r->aPart, nRows, pzErr);
    if (rc) return rc;
    start = next;
  }
  return 0;
}

int dev_vecrun(const uint8_t *prog, size_t nProg, const csq_vec *const *apChunk, int nChunk,
               uint32_t iFirst, uint32_t nRow, dev_vecrun_fn xPart, void *pArg, char **pzErr) {
  char zErr[256] = "";
  csq_prog P;
  vr_run r;
  memset(&r, 0, sizeof(r));
  if (pzErr) *pzErr = NULL;
  int rc = csq_prog_parse(prog, nProg, &P, zErr, sizeof(zErr));
  if (rc) return vr_fail(pzErr, rc, "csq's host engine: the program does not verify: %s", zErr);
  r.pProg = &P;
  r.id = csq_prog_id(prog, nProg);
  r.aPart = calloc(P.nResCol ? (size_t)P.nResCol : 1, sizeof(csq_vec));
  if (!r.aPart) {
    rc = vr_fail(pzErr, -ENOMEM, "csq's host engine: %s", "out of memory");
    goto done;
  }
  if (P.bRowNum || P.nTop) {
    rc = vr_fail(pzErr, -EINVAL, "csq's host engine: %s",
                 "a program with row numbers or top-N runs on a device only");
    goto done;
  }
  for (int k = 0; k < P.nIn; k++)
    if (P.aIn[k] >= nChunk || !apChunk[P.aIn[k]] ||
        apChunk[P.aIn[k]]->n < (uint64_t)iFirst + nRow) {
      rc = vr_fail(pzErr, -EINVAL, "csq's host engine: %s",
                   "the program reads a column the rows do not have");
      goto done;
    }
  r.pType = dev_ptype_find(CSQ_PTYPE_CSQ);
  if (!r.pType || r.pType->xVerify(prog, nProg, &r.pCompiled, zErr, sizeof(zErr))) {
    r.pType = NULL;
    rc = vr_fail(pzErr, -EINVAL, "csq's host engine cannot run the program: %s",
                 zErr[0] ? zErr : "no executor in this build");
    goto done;
  }
  for (uint32_t i0 = iFirst; rc == 0 && i0 < iFirst + nRow; i0 += VR_PIECE) {
    uint32_t n = iFirst + nRow - i0 < VR_PIECE ? iFirst + nRow - i0 : VR_PIECE;
    for (int k = 0; rc == 0 && k < P.nIn; k++) {
      csq_chunk_info info;
      free(r.apEnc[k]);
      r.apEnc[k] = NULL;
      rc = csq_chunk_encode(apChunk[P.aIn[k]], i0, n, &r.apEnc[k], &r.anEnc[k], &info);
      r.aHash[k] = info.xxh3;
    }
    if (rc == 0) rc = vr_piece(&r, n, xPart, pArg, pzErr);
  }
  if (rc == -ENOMEM) vr_fail(pzErr, rc, "csq's host engine: %s", "out of memory");
done:
  if (r.pType) r.pType->xFree(r.pCompiled);
  for (int k = 0; k < CSQ_PROG_MAX_IN; k++) free(r.apEnc[k]);
  for (int i = 0; r.aPart && i < P.nResCol; i++) csq_vec_free(&r.aPart[i]);
  free(r.aPart);
  free(r.aBuf);
  csq_prog_clear(&P);
  return rc;
}
