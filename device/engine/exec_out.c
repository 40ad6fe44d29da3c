/*
** device/engine/exec_out.c - the result of a filter program (program.h,
** result format): the selected rows' output columns sized and written
** column by column.
*/
#include "device/engine/exec_int.h"

/* Class mask and heap bytes of column c over rows aSel[0..n). */
void ex_out_size(const ex_col *c, const uint32_t *aSel, uint32_t n, ex_outcol *o) {
  ex_val v;
  o->clsMask = 0;
  o->nHeap = 0;
  if (c->kind == K_INT || c->kind == K_REAL) {
    uint8_t m = 0;
    for (uint32_t k = 0; k < n; k++)
      m |= (uint8_t)(col_null(c, aSel[k]) ? 1u << CSQ_NULL
                                          : 1u << (c->kind == K_INT ? CSQ_INT : CSQ_REAL));
    o->clsMask = m;
    return;
  }
  if (c->kind == K_TEXTP && !c->d.aNull && !c->bAllNull && n) {
    for (uint32_t k = 0; k < n; k++)
      o->nHeap +=
          csq_le32(c->d.aOff + 4 * (size_t)aSel[k] + 4) - csq_le32(c->d.aOff + 4 * (size_t)aSel[k]);
    o->clsMask = (uint8_t)(1u << c->d.cls);
    return;
  }
  for (uint32_t k = 0; k < n; k++) {
    ex_col_get(c, aSel[k], &v);
    o->clsMask |= (uint8_t)(1u << v.cls);
    if (v.cls == CSQ_TEXT || v.cls == CSQ_BLOB) o->nHeap += v.n;
  }
}

/* Did the job's omit mask (NULL: none) leave output column j out? */
int ex_out_omitted(const uint8_t *aOmit, int j) {
  return aOmit && (csq_le64(aOmit + 8 * (size_t)(j / 64)) >> (j % 64)) & 1;
}

uint64_t ex_out_bytes(const ex_outcol *o, uint32_t n) {
  int bCls = !mask_single(o->clsMask) && n > 0;
  int bLen = (o->clsMask & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) != 0;
  return (bCls ? pad8(n) : 0) + 8ull * n + (bLen ? pad8(4ull * n) : 0) + pad8(o->nHeap);
}

/* Write column c over aSel[0..n) at out (sized by ex_out_bytes). */
void ex_out_write(ex_col *c, const uint32_t *aSel, uint32_t n, const ex_outcol *o, uint8_t *out) {
  int bCls = !mask_single(o->clsMask) && n > 0;
  int bLen = (o->clsMask & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) != 0;
  /* SLM addresses are only 4-byte aligned: le.h stores at any alignment */
  uint8_t *aCls = bCls ? out : NULL;
  uint8_t *aVal = out + (bCls ? pad8(n) : 0);
  uint8_t *aLen = bLen ? aVal + 8ull * n : NULL;
  uint8_t *aHeap = aVal + 8ull * n + (bLen ? pad8(4ull * n) : 0);
  uint64_t nHeap = 0;
  ex_val v;
  if (bCls && (pad8(n) > n)) memset(out + n, 0, pad8(n) - n);
  if (bLen && pad8(4ull * n) > 4ull * n) memset(aLen + 4ull * n, 0, 4);
  if ((c->kind == K_INT || c->kind == K_REAL) && !c->bAllNull) {
    /* batch by batch: the values of the rows of one aligned batch as 8-byte
    ** words, unpacking just theirs when few of the batch's rows are here */
    const uint8_t cls = c->kind == K_INT ? CSQ_INT : CSQ_REAL;
    const int bCodes = c->d.enc == CSQ_ENC_INT_FOR || c->d.enc == CSQ_ENC_REAL_DEC;
    uint64_t aU[BATCH];
    double aD[BATCH];
    uint32_t k = 0;
    while (k < n) {
      uint32_t b0 = aSel[k] / BATCH * BATCH, e = k;
      while (e < n && aSel[e] < b0 + BATCH) e++;
      uint32_t nb = c->d.nVal - b0 < BATCH ? c->d.nVal - b0 : BATCH, m = e - k;
      if (bCodes && c->b0 != b0 && (uint64_t)m * 4 < nb) {
        ex_col_sel_codes(c, b0, aSel + k, m, aU);
        if (cls == CSQ_INT) {
          for (uint32_t j = 0; j < m; j++) aU[j] += (uint64_t)c->d.iRef;
        } else {
          csq_dec_values(aU, m, c->d.iRef, c->d.nAux, aD);
          memcpy(aU, aD, 8 * (size_t)m);
        }
      } else if (cls == CSQ_INT) {
        ex_col_ints(c, b0, nb);
        ex_gather8(aU, c->aI, aSel + k, m, b0);
      } else {
        ex_col_reals(c, b0, nb);
        ex_gather8(aU, c->aR, aSel + k, m, b0);
      }
      for (uint32_t j = 0; j < m; j++, k++) {
        int bNull = col_null(c, aSel[k]);
        csq_put_le64(aVal + 8ull * k, bNull ? 0 : aU[j]);
        if (aCls) aCls[k] = bNull ? CSQ_NULL : cls;
      }
    }
  } else {
    for (uint32_t k = 0; k < n; k++) {
      ex_col_get(c, aSel[k], &v);
      uint64_t u = 0;
      switch (v.cls) {
      case CSQ_INT:
        u = (uint64_t)v.i;
        break;
      case CSQ_REAL:
        memcpy(&u, &v.r, 8);
        break;
      case CSQ_TEXT:
      case CSQ_BLOB:
        u = nHeap;
        if (v.n) memcpy(aHeap + nHeap, v.z, v.n);
        nHeap += v.n;
        break;
      default:
        break;
      }
      csq_put_le64(aVal + 8ull * k, u);
      if (aCls) aCls[k] = v.cls;
      if (aLen) csq_put_le32(aLen + 4ull * k, (v.cls == CSQ_TEXT || v.cls == CSQ_BLOB) ? v.n : 0);
    }
  }
  if (pad8(nHeap) > nHeap) memset(aHeap + nHeap, 0, pad8(nHeap) - nHeap);
}
