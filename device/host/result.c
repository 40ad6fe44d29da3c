/*
** device/host/result.c - a program's result read back into column vectors
** (device/host/result.h), for the device scan and for the host engine.
*/
#include <errno.h>
#include <string.h>

#include "device/format/le.h"
#include "device/host/result.h"

static uint64_t res_pad8(uint64_t n) {
  return (n + 7) & ~(uint64_t)7;
}

/* Column j's descriptor d and sections from offset *pq of p[0..n) into v. */
static int res_col(const csq_prog *prog, const uint8_t *p, uint64_t n, const uint8_t *d,
                   uint32_t nRows, uint64_t *pq, csq_vec *v) {
  uint8_t clsMask = d[0], bCls = d[1], bLen = d[2];
  uint64_t nHeap = csq_le64(d + 8), q = *pq;
  csq_vec_reset(v);
  if (d[3]) { /* left out by the job's omit mask: v stays empty */
    if (d[3] != 1 || !prog->bRowNum || clsMask || bCls || bLen || nHeap) return -EBADMSG;
    return 0;
  }
  if (csq_vec_reserve(v, nRows ? nRows : 1, nHeap ? nHeap : 1)) return -ENOMEM;
  const csq_res_lay l = csq_res_col_lay(bCls, bLen, nRows, nHeap);
  if (l.nBytes > n - q || clsMask & 0xC1) return -EBADMSG;
  const uint8_t *aCls = bCls ? p + q : NULL;
  const uint8_t *aVal = p + q + l.oVal;
  const uint8_t *aLen = bLen ? p + q + l.oLen : NULL;
  const uint8_t *aHeap = p + q + l.oHeap;
  if (aCls) {
    uint8_t m = 0;
    for (uint32_t i = 0; i < nRows; i++) {
      if (aCls[i] < CSQ_INT || aCls[i] > CSQ_NULL) return -EBADMSG;
      m |= (uint8_t)(1u << aCls[i]);
    }
    if (m != clsMask) return -EBADMSG;
    memcpy(v->aCls, aCls, nRows);
  } else {
    int c = csq_res_mask_cls(clsMask);
    if (nRows && !c) return -EBADMSG;
    memset(v->aCls, c, nRows);
  }
  memcpy(v->aVal, aVal, 8ull * nRows);
  if (aLen) {
    memcpy(v->aLen, aLen, 4ull * nRows);
    for (uint32_t i = 0; i < nRows; i++) {
      uint8_t c = v->aCls[i];
      if (c == CSQ_TEXT || c == CSQ_BLOB) {
        if (v->aVal[i].off > nHeap || v->aLen[i] > nHeap - v->aVal[i].off) return -EBADMSG;
      } else {
        v->aLen[i] = 0;
      }
    }
  } else {
    if (clsMask & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) return -EBADMSG;
    memset(v->aLen, 0, 4ull * nRows);
  }
  if (nHeap) memcpy(v->aHeap, aHeap, nHeap);
  v->nHeap = nHeap;
  v->n = nRows;
  v->clsMask = clsMask;
  *pq = q + l.nBytes;
  return 0;
}

int dev_result_decode(const csq_prog *prog, const uint8_t *p, uint64_t n, uint32_t startRow,
                      uint32_t nRow, int bAcc, csq_vec *aOut, uint32_t *pnRows, uint32_t *pNext,
                      const uint8_t **ppRowNum) {
  if (ppRowNum) *ppRowNum = NULL;
  if (n < CSQ_RES_HDR) return -EBADMSG;
  uint32_t h[4] = {csq_le32(p), csq_le32(p + 4), csq_le32(p + 8), csq_le32(p + 12)};
  uint64_t nBytes = csq_le64(p + 16);
  uint32_t nRows = h[1], nCol = h[3];
  /* an accumulated result holds the groups of every row group merged into
  ** it, more than this row group's rows: its size bounds it (below) */
  if (h[0] != CSQ_RES_MAGIC || nCol != (uint32_t)prog->nResCol || nBytes != n || h[2] < startRow ||
      h[2] > nRow || (!bAcc && nRows > nRow) ||
      (h[2] < nRow && h[2] <= startRow && !(bAcc && h[2] == startRow)))
    return -EBADMSG;
  uint64_t q = CSQ_RES_HDR + (uint64_t)CSQ_RES_COL_SZ * nCol;
  if (q > n) return -EBADMSG;
  for (uint32_t j = 0; j < nCol; j++) {
    int rc = res_col(prog, p, n, p + CSQ_RES_HDR + (size_t)CSQ_RES_COL_SZ * j, nRows, &q, &aOut[j]);
    if (rc) return rc;
  }
  if (prog->bRowNum) {
    if (res_pad8(4ull * nRows) > n - q) return -EBADMSG;
    /* ascending, inside the rows this Execute covered */
    uint32_t prev = 0;
    for (uint32_t i = 0; i < nRows; i++) {
      uint32_t r = csq_le32(p + q + 4ull * i);
      if (r < startRow || r >= h[2] || (i && r <= prev)) return -EBADMSG;
      prev = r;
    }
    if (ppRowNum) *ppRowNum = p + q;
  }
  *pnRows = nRows;
  *pNext = h[2];
  return 0;
}
