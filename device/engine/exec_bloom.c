/*
** device/engine/exec_bloom.c - join filter terms (CSQ_OP_BLOOM, program.h
** JOIN FILTERS, and CSQ_OP_KEYMAP, JOIN KEY BITMAPS) over integer and real
** columns: the selected rows' values unpacked as words, hashed a vector at
** a time (keyhash.h) and probed in the filter (bloom.h), or looked up in
** the bitmap (keymap.h). A frame-of-reference chunk with few codes next to its
** rows (a foreign key into a small dimension) is probed once per code
** instead, into a mask the rows then look up, like a dictionary. Other
** columns take exec_term.c's paths: a dictionary's entries are probed once
** each (its mask), TEXT/BLOB and mixed columns one value at a time through
** ex_ev_one.
*/
#include "device/engine/exec_int.h"

/* Codes of a FOR chunk probed one by one at most: 2^16, and a quarter of
** its values, so building the mask never costs more than the rows would. */
#define CODE_MASK_MAX_WIDTH 16

static int code_mask_fits(const ex_col *c) {
  return c->d.enc == CSQ_ENC_INT_FOR && c->d.width <= CODE_MASK_MAX_WIDTH &&
         ((uint64_t)1 << c->d.width) <= c->d.nVal / 4;
}

/* The filter over every code of FOR chunk c: m[code] = may the value
** iRef + code be a key. NULL on OOM. */
static uint8_t *code_mask(const ex_term *et, const ex_col *c) {
  uint32_t nCode = 1u << c->d.width;
  uint8_t *m = malloc(nCode);
  if (!m) return NULL;
  int64_t aV[BATCH];
  uint64_t aH[BATCH];
  if (et->t.op == CSQ_OP_KEYMAP) {
    for (uint32_t k = 0; k < nCode; k++)
      m[k] = (uint8_t)csq_keymap_has_int(et->a->z, et->a->len, (int64_t)((uint64_t)c->d.iRef + k));
    return m;
  }
  for (uint32_t c0 = 0; c0 < nCode; c0 += BATCH) {
    uint32_t n = nCode - c0 < BATCH ? nCode - c0 : BATCH;
    /* codes past the chunk's largest value never occur: wrapping is harmless */
    for (uint32_t k = 0; k < n; k++) aV[k] = (int64_t)((uint64_t)c->d.iRef + c0 + k);
    csq_key_hash_ints(aV, aH, (int)n);
    csq_bloom_maybe_many(et->a->z, et->a->len, aH, m + c0, (int)n);
  }
  return m;
}

/* aM[k] = is word k (an int64, or a double's bits) in bitmap p? The bits
** of the span read as one loop without branches for integers. */
static void keymap_words(const uint8_t *p, uint32_t nBytes, int bInt, const uint64_t *aW,
                         uint32_t n, uint8_t *aM) {
  if (!bInt) {
    for (uint32_t k = 0; k < n; k++) {
      double r;
      memcpy(&r, &aW[k], 8);
      aM[k] = (uint8_t)csq_keymap_has_real(p, nBytes, r);
    }
    return;
  }
  const uint64_t base = csq_le64(p), nBits = 8ull * (nBytes - CSQ_KEYMAP_HDR);
  const uint8_t *aBit = p + CSQ_KEYMAP_HDR;
  for (uint32_t k = 0; k < n; k++) {
    uint64_t u = aW[k] - base;
    uint64_t in = u < nBits;
    u = in ? u : 0; /* read bit 0 for values outside the span, and drop it */
    aM[k] = (uint8_t)(((aBit[u >> 3] >> (u & 7)) & 1) & in);
  }
}

int ex_bloom_eval(const ex_term *et, ex_col *c, uint32_t b0, uint32_t nb, const uint32_t *aSel,
                  uint32_t n, uint8_t *aM, uint8_t **ppDict, int *pRc) {
  if (c->kind != K_INT && c->kind != K_REAL) return 0;
  uint64_t aW[BATCH], aH[BATCH];
  if (c->kind == K_INT && code_mask_fits(c)) {
    if (!*ppDict && !(*ppDict = code_mask(et, c))) {
      *pRc = CSQ_FAULT_NOMEM;
      return 1;
    }
    const uint8_t *m = *ppDict;
    ex_col_sel_codes(c, b0, aSel, n, aW);
    for (uint32_t k = 0; k < n; k++) aM[k] = m[aW[k]];
  } else {
    ex_col_sel_words(c, b0, nb, aSel, n, aW);
    /* the words are int64 values or doubles' bits: reinterpret, not convert */
    if (et->t.op == CSQ_OP_KEYMAP) {
      keymap_words(et->a->z, et->a->len, c->kind == K_INT, aW, n, aM);
    } else if (c->kind == K_INT) {
      int64_t aI[BATCH];
      memcpy(aI, aW, 8 * (size_t)n);
      csq_key_hash_ints(aI, aH, (int)n);
    } else {
      double aR[BATCH];
      memcpy(aR, aW, 8 * (size_t)n);
      csq_key_hash_reals(aR, aH, (int)n);
    }
    if (et->t.op == CSQ_OP_BLOOM) csq_bloom_maybe_many(et->a->z, et->a->len, aH, aM, (int)n);
  }
  if (c->d.aNull)
    for (uint32_t k = 0; k < n; k++)
      if (col_null(c, aSel[k])) aM[k] = 0;
  return 1;
}
