/*
** device/format/chunk_dec.c - column chunks: checking and decoding. Trusts nothing in
** the bytes: csq_chunk_view() verifies the checksum and then every count,
** size, offset, code and tag against the buffer before anything is
** materialised, so corrupt media yields -EBADMSG, never a crash or an
** out-of-bounds read.
*/
#include "device/format/chunk_int.h"

/* Header and checksum only. On success *pnBytes = the chunk's size. */
static int chunk_check_header(const uint8_t *p, size_t n, uint64_t *pnBytes, int bDeep) {
  if (!p || n < CSQ_CHUNK_HDR || memcmp(p + H_MAGIC, CHUNK_MAGIC, 4)) return -EBADMSG;
  uint64_t nBytes = csq_le64(p + H_NBYTES);
  if (nBytes < CSQ_CHUNK_HDR || nBytes > n) return -EBADMSG;
  if (bDeep && csq_checksum(p + H_VERSION, (size_t)nBytes - H_VERSION) != csq_le64(p + H_XXH3))
    return -EBADMSG;
  if (p[H_VERSION] != CHUNK_VERSION) return -EBADMSG;
  *pnBytes = nBytes;
  return 0;
}

int csq_chunk_verify(const uint8_t *p, size_t n) {
  uint64_t nBytes;
  return chunk_check_header(p, n, &nBytes, 1);
}

/* Claim the next section of nSec bytes (a multiple of 8 by construction)
** at *pOff, or fail if it would pass the chunk's end. */
static const uint8_t *take(const uint8_t *p, uint64_t *pOff, uint64_t nSec, uint64_t nBytes) {
  if (nSec > nBytes - *pOff) return 0;
  const uint8_t *q = p + *pOff;
  *pOff += nSec;
  return q;
}

/* nOff+1 offsets at a: must start at 0, never decrease, end at nVar. */
static int check_offsets(const uint8_t *a, uint32_t nOff, uint64_t nVar) {
  uint32_t prev = csq_le32(a);
  if (prev != 0) return -EBADMSG;
  for (uint32_t k = 1; k <= nOff; k++) {
    uint32_t o = csq_le32(a + 4 * (uint64_t)k);
    if (o < prev) return -EBADMSG;
    prev = o;
  }
  return prev == nVar ? 0 : -EBADMSG;
}

/*
** The whole of the checking (see chunk.h). After the header and checksum,
** every field not used by the encoding must be zero, the sections must add
** up to the chunk's size exactly, and the contents must be consistent:
** bitmap population = nNull, offsets monotone and ending at nVar, dictionary
** strictly ascending, codes below nAux, runs ending at nVal, tags valid and
** agreeing with the bitmap, TEXT/BLOB lengths summing to nVar. Counts that do
** not come with bytes are capped by CSQ_CHUNK_MAX_VALS.
*/
static int chunk_parse(const uint8_t *p, size_t n, csq_chunk_desc *pv, int bDeep) {
  uint64_t nBytes;
  int rc = chunk_check_header(p, n, &nBytes, bDeep);
  if (rc) return rc;
  csq_chunk_desc w;
  memset(&w, 0, sizeof(w));
  w.enc = p[H_ENC];
  w.cls = p[H_CLS];
  w.width = p[H_WIDTH];
  w.nVal = csq_le32(p + H_NVAL);
  w.nNull = csq_le32(p + H_NNULL);
  w.nAux = csq_le32(p + H_NAUX);
  w.nBytes = nBytes;
  w.nVar = csq_le64(p + H_NVAR);
  uint64_t ref = csq_le64(p + H_REF);
  uint8_t flags = p[H_FLAGS];
  if (p[H_RSVD] | p[H_RSVD + 1] | p[H_RSVD + 2]) return -EBADMSG;
  if (w.nVal > CSQ_CHUNK_MAX_VALS || w.nNull > w.nVal) return -EBADMSG;
  int bNulls = w.nNull > 0 && w.nNull < w.nVal;
  if (flags != (bNulls ? FLAG_NULLS : 0)) return -EBADMSG;
  if (w.nNull == w.nVal && !(w.enc == CSQ_ENC_CONST && w.cls == CSQ_NULL)) return -EBADMSG;

  uint64_t off = CSQ_CHUNK_HDR;
  if (bNulls) {
    uint64_t nMap = ((uint64_t)w.nVal + 7) / 8;
    w.aNull = take(p, &off, pad8(nMap), nBytes);
    if (!w.aNull) return -EBADMSG;
    uint64_t nSet = 0;
    if (bDeep) {
      for (uint64_t k = 0; k < nMap; k++) nSet += (unsigned)__builtin_popcount(w.aNull[k]);
      if ((w.nVal & 7) && (w.aNull[nMap - 1] >> (w.nVal & 7))) return -EBADMSG;
      if (nSet != w.nNull) return -EBADMSG;
    }
  }
  uint8_t nullBit = w.nNull ? (uint8_t)(1u << CSQ_NULL) : 0;

  switch (w.enc) {
  case CSQ_ENC_CONST:
    if (w.width || w.nAux) return -EBADMSG;
    if (w.cls == CSQ_NULL) {
      if (w.nNull != w.nVal || ref || w.nVar) return -EBADMSG;
    } else if (w.cls == CSQ_INT || w.cls == CSQ_REAL) {
      if (w.nVar) return -EBADMSG;
      w.iRef = (int64_t)ref;
      w.rConst = bits2dbl(ref);
    } else if (w.cls == CSQ_TEXT || w.cls == CSQ_BLOB) {
      if (ref || w.nVar > UINT32_MAX) return -EBADMSG;
      if (!(w.aVar = take(p, &off, pad8(w.nVar), nBytes))) return -EBADMSG;
    } else {
      return -EBADMSG;
    }
    w.clsMask = (w.nVal > w.nNull ? (uint8_t)(1u << w.cls) : 0) | nullBit;
    break;
  case CSQ_ENC_INT_FOR:
  case CSQ_ENC_INT_RLE:
    if (w.cls != CSQ_INT || w.width < 1 || w.width > 64 || w.nVar) return -EBADMSG;
    w.iRef = (int64_t)ref;
    if (w.enc == CSQ_ENC_INT_FOR) {
      if (w.nAux) return -EBADMSG;
      if (!(w.aPacked = take(p, &off, csq_packed_size(w.nVal, w.width), nBytes))) return -EBADMSG;
    } else {
      if (w.nAux < 1 || w.nAux > w.nVal) return -EBADMSG;
      if (!(w.aPacked = take(p, &off, csq_packed_size(w.nAux, w.width), nBytes))) return -EBADMSG;
      if (!(w.aRunEnd = take(p, &off, pad8((uint64_t)w.nAux * 4), nBytes))) return -EBADMSG;
      uint32_t prev = 0;
      for (uint32_t r = 0; r < w.nAux; r++) {
        uint32_t e = csq_le32(w.aRunEnd + 4 * (uint64_t)r);
        if (e <= prev) return -EBADMSG;
        prev = e;
      }
      if (prev != w.nVal) return -EBADMSG;
    }
    w.clsMask = (uint8_t)(1u << CSQ_INT) | nullBit;
    break;
  case CSQ_ENC_REAL_DEC:
    if (w.cls != CSQ_REAL || w.width < 1 || w.width > 64 || w.nAux > CSQ_DEC_MAX_SCALE || w.nVar)
      return -EBADMSG;
    w.iRef = (int64_t)ref;
    if (!(w.aPacked = take(p, &off, csq_packed_size(w.nVal, w.width), nBytes))) return -EBADMSG;
    w.clsMask = (uint8_t)(1u << CSQ_REAL) | nullBit;
    break;
  case CSQ_ENC_REAL_PLAIN:
    if (w.cls != CSQ_REAL || w.width || w.nAux || ref || w.nVar) return -EBADMSG;
    if (!(w.aReal = take(p, &off, (uint64_t)w.nVal * 8, nBytes))) return -EBADMSG;
    w.clsMask = (uint8_t)(1u << CSQ_REAL) | nullBit;
    break;
  case CSQ_ENC_TEXT_PLAIN:
  case CSQ_ENC_BLOB_PLAIN: {
    uint8_t cls = w.enc == CSQ_ENC_TEXT_PLAIN ? CSQ_TEXT : CSQ_BLOB;
    if (w.cls != cls || w.width || w.nAux || ref || w.nVar > UINT32_MAX) return -EBADMSG;
    if (!(w.aOff = take(p, &off, pad8(((uint64_t)w.nVal + 1) * 4), nBytes))) return -EBADMSG;
    if (!(w.aVar = take(p, &off, pad8(w.nVar), nBytes))) return -EBADMSG;
    if (bDeep && check_offsets(w.aOff, w.nVal, w.nVar)) return -EBADMSG;
    w.clsMask = (uint8_t)(1u << cls) | nullBit;
    break;
  }
  case CSQ_ENC_TEXT_DICT: {
    if (w.cls != CSQ_TEXT || ref || w.nVar > UINT32_MAX) return -EBADMSG;
    if (w.nAux < 2 || w.nAux > w.nVal - w.nNull || w.width != bitlen(w.nAux - 1)) return -EBADMSG;
    if (!(w.aOff = take(p, &off, pad8(((uint64_t)w.nAux + 1) * 4), nBytes))) return -EBADMSG;
    if (!(w.aVar = take(p, &off, pad8(w.nVar), nBytes))) return -EBADMSG;
    if (!(w.aPacked = take(p, &off, csq_packed_size(w.nVal, w.width), nBytes))) return -EBADMSG;
    if (!bDeep) {
      w.clsMask = (uint8_t)(1u << CSQ_TEXT) | nullBit;
      break;
    }
    if (check_offsets(w.aOff, w.nAux, w.nVar)) return -EBADMSG;
    for (uint32_t e = 1; e < w.nAux; e++) {
      uint32_t a0 = csq_le32(w.aOff + 4 * (uint64_t)(e - 1)),
               a1 = csq_le32(w.aOff + 4 * (uint64_t)e);
      uint32_t a2 = csq_le32(w.aOff + 4 * (uint64_t)(e + 1));
      if (cmp_bytes(w.aVar + a0, a1 - a0, w.aVar + a1, a2 - a1) >= 0) return -EBADMSG;
    }
    if (w.nAux & (w.nAux - 1)) { /* some codes of this width would be out of range */
      uint64_t aCode[BLOCK];
      for (uint32_t k = 0; k < w.nVal; k += BLOCK) {
        uint32_t m = w.nVal - k < BLOCK ? w.nVal - k : BLOCK;
        csq_unpack_u64(w.aPacked, w.width, k, m, aCode);
        uint64_t mx = 0;
        for (uint32_t j = 0; j < m; j++) mx = aCode[j] > mx ? aCode[j] : mx;
        if (mx >= w.nAux) return -EBADMSG;
      }
    }
    w.clsMask = (uint8_t)(1u << CSQ_TEXT) | nullBit;
    break;
  }
  case CSQ_ENC_TAGGED: {
    if (w.cls || w.width || w.nAux || ref) return -EBADMSG;
    if (!(w.aTag = take(p, &off, pad8(w.nVal), nBytes))) return -EBADMSG;
    if (!(w.aSlot = take(p, &off, (uint64_t)w.nVal * 8, nBytes))) return -EBADMSG;
    if (!(w.aVar = take(p, &off, pad8(w.nVar), nBytes))) return -EBADMSG;
    uint64_t sum = 0;
    uint8_t mask = 0;
    for (uint32_t k = 0; k < w.nVal; k++) {
      uint8_t t = w.aTag[k];
      if (t < CSQ_INT || t > CSQ_NULL) return -EBADMSG;
      int bNull = w.aNull ? (w.aNull[k >> 3] >> (k & 7)) & 1 : w.nNull == w.nVal;
      if ((t == CSQ_NULL) != bNull) return -EBADMSG;
      mask |= (uint8_t)(1u << t);
      if (t == CSQ_TEXT || t == CSQ_BLOB) {
        uint64_t len = csq_le64(w.aSlot + 8 * (uint64_t)k);
        if (len > UINT32_MAX || len > w.nVar - sum) return -EBADMSG;
        sum += len;
      } else if (t == CSQ_NULL && csq_le64(w.aSlot + 8 * (uint64_t)k)) {
        return -EBADMSG;
      }
    }
    if (sum != w.nVar) return -EBADMSG;
    w.clsMask = mask;
    break;
  }
  default:
    return -EBADMSG;
  }
  if (off != nBytes) return -EBADMSG;
  *pv = w;
  return 0;
}

int csq_chunk_view(const uint8_t *p, size_t n, csq_chunk_desc *pv) {
  return chunk_parse(p, n, pv, 1);
}

int csq_chunk_layout(const uint8_t *p, size_t n, csq_chunk_desc *pv) {
  return chunk_parse(p, n, pv, 0);
}

/* Make room for nMore values and nHeap heap bytes in v, growing
** geometrically so that decoding chunk after chunk into one vector stays
** linear. */
static int vec_room(csq_vec *v, uint32_t nMore, uint64_t nHeap) {
  if (nMore > UINT32_MAX - v->n || nHeap > UINT64_MAX / 2 - v->nHeap) return -ENOMEM;
  uint64_t want = (uint64_t)v->n + nMore, cap = v->nCap;
  if (want > cap) {
    cap = cap * 2 > want ? cap * 2 : want;
    if (cap > UINT32_MAX) cap = UINT32_MAX;
  }
  uint64_t hwant = v->nHeap + nHeap, hcap = v->nHeapCap;
  if (hwant > hcap) hcap = hcap * 2 > hwant ? hcap * 2 : hwant;
  return csq_vec_reserve(v, (uint32_t)cap, hcap);
}

/*
** Decode a chunk, appending its values to pOut (see chunk.h). Nothing is
** appended unless the whole chunk checked out. Decoded TEXT values of a
** dictionary or CONST chunk share their bytes in pOut's heap (each distinct
** value is stored once).
*/
int csq_chunk_decode(const uint8_t *p, size_t n, csq_vec *pOut) {
  csq_chunk_desc w;
  int rc = csq_chunk_view(p, n, &w);
  if (rc) return rc;
  uint32_t nVal = w.nVal;
  if (nVal == 0) return 0;
  /* TEXT/BLOB values get a heap even when all are empty, so that
  ** csq_vec_bytes() never offsets a null pointer. */
  const uint8_t mVar = (1u << CSQ_TEXT) | (1u << CSQ_BLOB);
  if ((rc = vec_room(pOut, nVal, w.nVar ? w.nVar : (w.clsMask & mVar) != 0))) return rc;
  uint32_t d = pOut->n;
  uint8_t *aCls = pOut->aCls + d;
  csq_val *aVal = pOut->aVal + d;
  uint32_t *aLen = pOut->aLen + d;
  uint64_t h = pOut->nHeap;
  if (w.nVar) memcpy(pOut->aHeap + h, w.aVar, (size_t)w.nVar);

  switch (w.enc) {
  case CSQ_ENC_CONST:
    memset(aCls, w.cls, nVal);
    if (w.cls == CSQ_TEXT || w.cls == CSQ_BLOB) {
      for (uint32_t k = 0; k < nVal; k++) aVal[k].off = h, aLen[k] = (uint32_t)w.nVar;
    } else {
      if (w.cls == CSQ_REAL) {
        for (uint32_t k = 0; k < nVal; k++) aVal[k].r = w.rConst;
      } else {
        int64_t x = w.cls == CSQ_INT ? w.iRef : 0;
        for (uint32_t k = 0; k < nVal; k++) aVal[k].i = x;
      }
      memset(aLen, 0, (size_t)nVal * 4);
    }
    break;
  case CSQ_ENC_INT_FOR: {
    uint64_t aCode[BLOCK];
    const uint64_t ref = (uint64_t)w.iRef;
    for (uint32_t k = 0; k < nVal; k += BLOCK) {
      uint32_t m = nVal - k < BLOCK ? nVal - k : BLOCK;
      csq_unpack_u64(w.aPacked, w.width, k, m, aCode);
      for (uint32_t j = 0; j < m; j++) aVal[k + j].i = (int64_t)(aCode[j] + ref);
    }
    memset(aCls, CSQ_INT, nVal);
    memset(aLen, 0, (size_t)nVal * 4);
    break;
  }
  case CSQ_ENC_INT_RLE: {
    uint64_t aCode[BLOCK];
    const uint64_t ref = (uint64_t)w.iRef;
    uint32_t start = 0;
    for (uint32_t r0 = 0; r0 < w.nAux; r0 += BLOCK) {
      uint32_t m = w.nAux - r0 < BLOCK ? w.nAux - r0 : BLOCK;
      csq_unpack_u64(w.aPacked, w.width, r0, m, aCode);
      for (uint32_t j = 0; j < m; j++) {
        uint32_t end = csq_le32(w.aRunEnd + 4 * (uint64_t)(r0 + j));
        int64_t x = (int64_t)(aCode[j] + ref);
        for (uint32_t k = start; k < end; k++) aVal[k].i = x;
        start = end;
      }
    }
    memset(aCls, CSQ_INT, nVal);
    memset(aLen, 0, (size_t)nVal * 4);
    break;
  }
  case CSQ_ENC_REAL_DEC: {
    uint64_t aCode[BLOCK];
    double aDec[BLOCK];
    for (uint32_t k = 0; k < nVal; k += BLOCK) {
      uint32_t m = nVal - k < BLOCK ? nVal - k : BLOCK;
      csq_unpack_u64(w.aPacked, w.width, k, m, aCode);
      csq_dec_values(aCode, m, w.iRef, w.nAux, aDec);
      for (uint32_t j = 0; j < m; j++) aVal[k + j].r = aDec[j];
    }
    memset(aCls, CSQ_REAL, nVal);
    memset(aLen, 0, (size_t)nVal * 4);
    break;
  }
  case CSQ_ENC_REAL_PLAIN:
    for (uint32_t k = 0; k < nVal; k++) aVal[k].r = bits2dbl(csq_le64(w.aReal + 8 * (uint64_t)k));
    memset(aCls, CSQ_REAL, nVal);
    memset(aLen, 0, (size_t)nVal * 4);
    break;
  case CSQ_ENC_TEXT_PLAIN:
  case CSQ_ENC_BLOB_PLAIN: {
    uint32_t o0 = csq_le32(w.aOff);
    for (uint32_t k = 0; k < nVal; k++) {
      uint32_t o1 = csq_le32(w.aOff + 4 * (uint64_t)(k + 1));
      aVal[k].off = h + o0;
      aLen[k] = o1 - o0;
      o0 = o1;
    }
    memset(aCls, w.cls, nVal);
    break;
  }
  case CSQ_ENC_TEXT_DICT: {
    /* Host-order copies of the entries' offsets and lengths for the lookup. */
    uint64_t *aEnt = malloc((size_t)w.nAux * 8);
    if (!aEnt) return -ENOMEM;
    for (uint32_t e = 0; e < w.nAux; e++) {
      uint32_t a0 = csq_le32(w.aOff + 4 * (uint64_t)e),
               a1 = csq_le32(w.aOff + 4 * (uint64_t)(e + 1));
      aEnt[e] = (uint64_t)a0 << 32 | (a1 - a0);
    }
    uint64_t aCode[BLOCK];
    for (uint32_t k = 0; k < nVal; k += BLOCK) {
      uint32_t m = nVal - k < BLOCK ? nVal - k : BLOCK;
      csq_unpack_u64(w.aPacked, w.width, k, m, aCode);
      for (uint32_t j = 0; j < m; j++) {
        uint64_t e = aEnt[aCode[j]]; /* codes < nAux: checked by csq_chunk_view */
        aVal[k + j].off = h + (e >> 32);
        aLen[k + j] = (uint32_t)e;
      }
    }
    free(aEnt);
    memset(aCls, CSQ_TEXT, nVal);
    break;
  }
  case CSQ_ENC_TAGGED: {
    uint64_t o = h;
    memcpy(aCls, w.aTag, nVal);
    for (uint32_t k = 0; k < nVal; k++) {
      uint64_t s = csq_le64(w.aSlot + 8 * (uint64_t)k);
      aLen[k] = 0;
      switch (aCls[k]) {
      case CSQ_INT:
        aVal[k].i = (int64_t)s;
        break;
      case CSQ_REAL:
        aVal[k].r = bits2dbl(s);
        break;
      case CSQ_TEXT:
      case CSQ_BLOB:
        aVal[k].off = o;
        aLen[k] = (uint32_t)s;
        o += s;
        break;
      default:
        aVal[k].i = 0;
        break;
      }
    }
    break;
  }
  }
  /* NULL slots: whatever the encoding put there becomes a proper NULL. */
  if (w.aNull && w.enc != CSQ_ENC_TAGGED) {
    for (uint32_t b = 0; b < (nVal + 7) / 8; b++) {
      uint8_t m = w.aNull[b];
      while (m) {
        uint32_t k = b * 8 + (uint32_t)__builtin_ctz(m);
        m &= (uint8_t)(m - 1);
        aCls[k] = CSQ_NULL;
        aVal[k].i = 0;
        aLen[k] = 0;
      }
    }
  }
  pOut->n += nVal;
  pOut->nHeap += w.nVar;
  pOut->clsMask |= w.clsMask;
  return 0;
}
