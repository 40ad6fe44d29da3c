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
  return ex_res_shape_of(o->clsMask, n, o->nHeap).l.nBytes;
}

/* Write column c over aSel[0..n) at out (sized by ex_out_bytes). */
void ex_out_write(ex_col *c, const uint32_t *aSel, uint32_t n, const ex_outcol *o, uint8_t *out) {
  const ex_res_shape s = ex_res_shape_of(o->clsMask, n, o->nHeap);
  uint8_t *aVal = out + s.l.oVal;
  uint64_t nHeap = 0;
  ex_val v;
  if ((c->kind == K_INT || c->kind == K_REAL) && !c->bAllNull) {
    /* batch by batch: the values of the rows of one aligned batch as 8-byte
    ** words, unpacking just theirs when few of the batch's rows are here */
    const uint8_t cls = c->kind == K_INT ? CSQ_INT : CSQ_REAL;
    uint64_t aU[BATCH];
    uint32_t k = 0;
    while (k < n) {
      uint32_t b0 = aSel[k] / BATCH * BATCH, e = k;
      while (e < n && aSel[e] < b0 + BATCH) e++;
      uint32_t nb = c->d.nVal - b0 < BATCH ? c->d.nVal - b0 : BATCH, m = e - k;
      ex_col_sel_words(c, b0, nb, aSel + k, m, aU);
      for (uint32_t j = 0; j < m; j++, k++) {
        int bNull = col_null(c, aSel[k]);
        csq_put_le64(aVal + 8ull * k, bNull ? 0 : aU[j]);
        if (s.bCls) out[k] = bNull ? CSQ_NULL : cls;
      }
    }
  } else {
    for (uint32_t k = 0; k < n; k++) {
      ex_col_get(c, aSel[k], &v);
      ex_res_put(out, &s, k, &v, &nHeap);
    }
  }
  ex_res_pad(out, &s, n, nHeap);
}
