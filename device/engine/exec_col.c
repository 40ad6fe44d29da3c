/*
** device/engine/exec_col.c - the input columns of one execution (ex_col): a
** chunk opened in SLM, its values read one at a time or unpacked a batch at
** a time (integers, reals, packed codes).
*/
#include "device/engine/exec_int.h"

/* Run of row r in an RLE chunk (binary search over run ends). */
static uint32_t rle_run(const ex_col *c, uint32_t r) {
  uint32_t lo = 0, hi = c->d.nAux - 1;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (csq_le32(c->d.aRunEnd + 4 * mid) > r)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

static int64_t rle_value(const ex_col *c, uint32_t run) {
  uint64_t u;
  csq_unpack_u64(c->d.aPacked, c->d.width, run, 1, &u);
  return (int64_t)((uint64_t)c->d.iRef + u);
}

/* REAL_DEC: the value of a code; the encoder guaranteed that this division
** gives back the exact bits. */
static inline double dec_value(const ex_col *c, uint64_t code) {
  return (double)(int64_t)(code + (uint64_t)c->d.iRef) / csq_pow10(c->d.nAux);
}

/* Value of row r (any kind). */
void ex_col_get(const ex_col *c, uint32_t r, ex_val *v) {
  uint64_t u;
  if (col_null(c, r)) {
    v->cls = CSQ_NULL;
    return;
  }
  switch (c->kind) {
  case K_INT:
    v->cls = CSQ_INT;
    if (c->d.enc == CSQ_ENC_INT_FOR) {
      csq_unpack_u64(c->d.aPacked, c->d.width, r, 1, &u);
      v->i = (int64_t)((uint64_t)c->d.iRef + u);
    } else if (c->d.enc == CSQ_ENC_INT_RLE) {
      v->i = rle_value(c, rle_run(c, r));
    } else {
      v->i = c->d.iRef;
    }
    break;
  case K_REAL:
    v->cls = CSQ_REAL;
    if (c->d.enc == CSQ_ENC_REAL_PLAIN) {
      u = csq_le64(c->d.aReal + 8 * (size_t)r);
      memcpy(&v->r, &u, 8);
    } else if (c->d.enc == CSQ_ENC_REAL_DEC) {
      csq_unpack_u64(c->d.aPacked, c->d.width, r, 1, &u);
      v->r = dec_value(c, u);
    } else {
      v->r = c->d.rConst;
    }
    break;
  case K_TEXTP: {
    uint32_t o0 = csq_le32(c->d.aOff + 4 * (size_t)r), o1 = csq_le32(c->d.aOff + 4 * (size_t)r + 4);
    v->cls = c->d.cls;
    v->z = c->d.aVar + o0;
    v->n = o1 - o0;
    break;
  }
  case K_DICT: {
    csq_unpack_u64(c->d.aPacked, c->d.width, r, 1, &u);
    uint32_t o0 = csq_le32(c->d.aOff + 4 * u), o1 = csq_le32(c->d.aOff + 4 * u + 4);
    v->cls = CSQ_TEXT;
    v->z = c->d.aVar + o0;
    v->n = o1 - o0;
    break;
  }
  case K_TAG:
    v->cls = c->d.aTag[r];
    u = csq_le64(c->d.aSlot + 8 * (size_t)r);
    if (v->cls == CSQ_INT)
      v->i = (int64_t)u;
    else if (v->cls == CSQ_REAL)
      memcpy(&v->r, &u, 8);
    else if (v->cls == CSQ_TEXT || v->cls == CSQ_BLOB) {
      v->z = c->d.aVar + c->aTagOff[r];
      v->n = (uint32_t)u;
    }
    break;
  default:
    *v = c->cval;
    break;
  }
}

/* The packed codes of batch [b0, b0+n) in c->aCode (INT_FOR, REAL_DEC),
** unpacked once per batch whoever asks first. */
const uint64_t *ex_col_codes(ex_col *c, uint32_t b0, uint32_t n) {
  if (c->aCodeB0 != b0) {
    c->aCodeB0 = b0;
    csq_unpack_u64(c->d.aPacked, c->d.width, b0, n, c->aCode);
  }
  return c->aCode;
}

/* The packed codes of rows aSel[0..n) of batch b0 into u: from the batch's
** unpacked codes if some term already asked for them, else just theirs. */
void ex_col_sel_codes(const ex_col *c, uint32_t b0, const uint32_t *aSel, uint32_t n, uint64_t *u) {
  if (c->aCodeB0 == b0)
    for (uint32_t k = 0; k < n; k++) u[k] = c->aCode[aSel[k] - b0];
  else
    csq_unpack_sel(c->d.aPacked, c->d.width, aSel, n, u);
}

/* The values of rows aSel[0..n) (ascending, inside one batch) of an RLE
** chunk into out: the runs from the first row's to the last's unpacked in
** one call (at most a batch of them: every run holds a row), then rows and
** runs walked together. Runs are often a few rows long (a foreign key of a
** table sorted by its own key): an unpack per run, or a binary search per
** row that skips some, would cost more than the rows. */
static void rle_sel(const ex_col *c, const uint32_t *aSel, uint32_t n, int64_t *out) {
  if (n == 0) return;
  uint32_t run0 = rle_run(c, aSel[0]), last = rle_run(c, aSel[n - 1]);
  uint64_t aRun[BATCH];
  csq_unpack_u64(c->d.aPacked, c->d.width, run0, last - run0 + 1, aRun);
  uint64_t ref = (uint64_t)c->d.iRef;
  const uint8_t *aEnd = c->d.aRunEnd;
  uint32_t run = run0;
  for (uint32_t k = 0; k < n; k++) {
    while (csq_le32(aEnd + 4 * run) <= aSel[k]) run++; /* stops at last */
    out[k] = (int64_t)(ref + aRun[run - run0]);
  }
}

/* Materialise batch [b0, b0+n) of an integer column into c->aI. */
void ex_col_ints(ex_col *c, uint32_t b0, uint32_t n) {
  if (c->b0 == b0) return;
  c->b0 = b0;
  if (c->d.enc == CSQ_ENC_INT_FOR) {
    uint64_t *u = (uint64_t *)c->aI;
    csq_unpack_u64(c->d.aPacked, c->d.width, b0, n, u);
    uint64_t ref = (uint64_t)c->d.iRef;
    for (uint32_t i = 0; i < n; i++) u[i] += ref;
  } else if (c->d.enc == CSQ_ENC_INT_RLE && n > 0) {
    /* the batch's runs unpacked in one call (see rle_sel) */
    uint32_t run0 = rle_run(c, b0), nRun = rle_run(c, b0 + n - 1) - run0 + 1, i = 0;
    uint64_t aRun[BATCH], ref = (uint64_t)c->d.iRef;
    csq_unpack_u64(c->d.aPacked, c->d.width, run0, nRun, aRun);
    for (uint32_t k = 0; k < nRun; k++) {
      uint32_t end = csq_le32(c->d.aRunEnd + 4 * (run0 + k)) - b0;
      int64_t v = (int64_t)(ref + aRun[k]), *d = c->aI + i;
      if (end > n) end = n;
      /* runs are often shorter than 8 rows: 8 stores that the next run
      ** overwrites beat a loop whose exit is mispredicted (aI has the slack) */
      for (uint32_t j = 0; j < 8; j++) d[j] = v;
      for (i += 8; i < end; i++) c->aI[i] = v;
      i = end;
    }
  } else {
    for (uint32_t i = 0; i < n; i++) c->aI[i] = c->d.iRef;
  }
}

void ex_col_reals(ex_col *c, uint32_t b0, uint32_t n) {
  if (c->b0 == b0) return;
  c->b0 = b0;
  if (c->d.enc == CSQ_ENC_REAL_PLAIN)
    memcpy(c->aR, c->d.aReal + 8 * (size_t)b0, 8 * (size_t)n);
  else if (c->d.enc == CSQ_ENC_REAL_DEC) {
    csq_dec_values(ex_col_codes(c, b0, n), n, c->d.iRef, c->d.nAux, c->aR);
  } else
    for (uint32_t i = 0; i < n; i++) c->aR[i] = c->d.rConst;
}

void ex_col_sel_words(ex_col *c, uint32_t b0, uint32_t nb, const uint32_t *aSel, uint32_t n,
                      uint64_t *u) {
  const int bInt = c->kind == K_INT;
  if (c->b0 != b0 && (uint64_t)n * 4 < nb) {
    switch (c->d.enc) {
    case CSQ_ENC_INT_FOR:
      ex_col_sel_codes(c, b0, aSel, n, u);
      for (uint32_t k = 0; k < n; k++) u[k] += (uint64_t)c->d.iRef;
      return;
    case CSQ_ENC_REAL_DEC: {
      double aD[BATCH];
      ex_col_sel_codes(c, b0, aSel, n, u);
      csq_dec_values(u, n, c->d.iRef, c->d.nAux, aD);
      memcpy(u, aD, 8 * (size_t)n);
      return;
    }
    case CSQ_ENC_INT_RLE:
      rle_sel(c, aSel, n, (int64_t *)u);
      return;
    case CSQ_ENC_REAL_PLAIN:
      for (uint32_t k = 0; k < n; k++) u[k] = csq_le64(c->d.aReal + 8 * (size_t)aSel[k]);
      return;
    default:
      break;
    }
  }
  if (bInt) {
    ex_col_ints(c, b0, nb);
    ex_gather8(u, c->aI, aSel, n, b0);
  } else {
    ex_col_reals(c, b0, nb);
    ex_gather8(u, c->aR, aSel, n, b0);
  }
}

/* dst[k] = src[aSel[k] - b0] for k < n, elements of 8 bytes. aSel ascends,
** so 8 entries whose ends differ by 7 are 8 consecutive rows: one block
** copy. After a filter that keeps most rows, nearly every block is one. */
void ex_gather8(void *dst, const void *src, const uint32_t *aSel, uint32_t n, uint32_t b0) {
  uint8_t *d = dst;
  const uint8_t *q = src;
  uint32_t k = 0;
  for (; k + 8 <= n; k += 8) {
    if (aSel[k + 7] - aSel[k] == 7) {
      memcpy(d + 8 * (size_t)k, q + 8 * (size_t)(aSel[k] - b0), 64);
    } else {
      for (uint32_t j = k; j < k + 8; j++)
        memcpy(d + 8 * (size_t)j, q + 8 * (size_t)(aSel[j] - b0), 8);
    }
  }
  for (; k < n; k++) memcpy(d + 8 * (size_t)k, q + 8 * (size_t)(aSel[k] - b0), 8);
}

/* Set up column c from the chunk at p[0..n): 0 or a CSQ_FAULT_*. bChecked:
** these very bytes passed csq_chunk_view before (see chunk_checked). */
int ex_col_open(ex_col *c, const uint8_t *p, size_t n, uint32_t nRow, int bChecked) {
  memset(c, 0, sizeof(*c));
  c->b0 = -1;
  c->aCodeB0 = -1;
  if ((bChecked ? csq_chunk_layout : csq_chunk_view)(p, n, &c->d)) return CSQ_FAULT_CORRUPT_CHUNK;
  if (c->d.nVal < nRow) return CSQ_FAULT_SHORT_CHUNK;
  c->bAllNull = c->d.nVal > 0 && c->d.nNull == c->d.nVal;
  switch (c->d.enc) {
  case CSQ_ENC_INT_FOR:
  case CSQ_ENC_INT_RLE:
    c->kind = K_INT;
    break;
  case CSQ_ENC_REAL_PLAIN:
  case CSQ_ENC_REAL_DEC:
    c->kind = K_REAL;
    break;
  case CSQ_ENC_TEXT_PLAIN:
  case CSQ_ENC_BLOB_PLAIN:
    c->kind = K_TEXTP;
    break;
  case CSQ_ENC_TEXT_DICT:
    c->kind = K_DICT;
    break;
  case CSQ_ENC_TAGGED: {
    c->kind = K_TAG;
    c->aTagOff = malloc(sizeof(uint32_t) * (c->d.nVal ? c->d.nVal : 1));
    if (!c->aTagOff) return CSQ_FAULT_NOMEM;
    uint64_t off = 0;
    for (uint32_t i = 0; i < c->d.nVal; i++) {
      c->aTagOff[i] = (uint32_t)off;
      if (c->d.aTag[i] == CSQ_TEXT || c->d.aTag[i] == CSQ_BLOB)
        off += csq_le64(c->d.aSlot + 8 * (size_t)i);
      if (off > c->d.nVar) return CSQ_FAULT_CORRUPT_CHUNK; /* view checked it; be safe */
    }
    break;
  }
  case CSQ_ENC_CONST:
    if (c->d.cls == CSQ_INT)
      c->kind = K_INT;
    else if (c->d.cls == CSQ_REAL)
      c->kind = K_REAL;
    else {
      c->kind = K_CONSTX;
      c->cval.cls = c->d.cls;
      c->cval.z = c->d.aVar;
      c->cval.n = (uint32_t)c->d.nVar;
      if (c->d.cls == CSQ_NULL) c->bAllNull = 1;
    }
    break;
  default:
    return CSQ_FAULT_CORRUPT_CHUNK;
  }
  if (c->kind == K_INT) c->aI = malloc(sizeof(int64_t) * (BATCH + 8)); /* + RLE's slack */
  if (c->kind == K_REAL) c->aR = malloc(sizeof(double) * BATCH);
  int bCodes = c->kind == K_DICT || c->d.enc == CSQ_ENC_INT_FOR || c->d.enc == CSQ_ENC_REAL_DEC;
  if (bCodes) c->aCode = malloc(sizeof(uint64_t) * BATCH);
  if ((c->kind == K_INT && !c->aI) || (c->kind == K_REAL && !c->aR) || (bCodes && !c->aCode))
    return CSQ_FAULT_NOMEM;
  return 0;
}

void ex_col_close(ex_col *c) {
  free(c->aTagOff);
  free(c->aI);
  free(c->aR);
  free(c->aCode);
}
