/*
** device/engine/exec_colcmp.c - column comparison terms (CSQ_OP_COLCMP,
** program.h COLUMN COMPARISONS): "x op y" for two input columns of each
** selected row, such as l_commitdate < l_receiptdate.
**
** A batch at a time, by the pair of column kinds, chosen once per call:
**   - integer with integer, real with real: the batch materialised as
**     int64 / double vectors and compared into signs (vectorises);
**   - integer with real: exact integer-real signs (value.h);
**   - anything else (text, blobs, tagged chunks): each row's two values by
**     csq_value_cmp, the one rule of SQLite's order (value.h), a
**     dictionary's codes unpacked once per batch.
** Signs become truth values through the comparison's table, and rows with
** a NULL on either side get the NULL-aware answer last.
*/
#include "device/engine/exec_int.h"

/* The truth of "x cmp y" for x, y not NULL, by the sign of x - y: t[s+1]. */
static void cmp_table(int cmp, uint8_t t[3]) {
  t[0] = cmp == CSQ_OP_NE || cmp == CSQ_OP_ISNOT || cmp == CSQ_OP_LT || cmp == CSQ_OP_LE;
  t[1] = cmp == CSQ_OP_EQ || cmp == CSQ_OP_IS || cmp == CSQ_OP_LE || cmp == CSQ_OP_GE;
  t[2] = cmp == CSQ_OP_NE || cmp == CSQ_OP_ISNOT || cmp == CSQ_OP_GT || cmp == CSQ_OP_GE;
}

/* The truth of "x cmp y" when x or y is NULL (bBoth: both are): only IS
** and IS NOT are ever true then. */
static uint8_t null_truth(int cmp, int bBoth) {
  if (cmp == CSQ_OP_IS) return (uint8_t)bBoth;
  if (cmp == CSQ_OP_ISNOT) return (uint8_t)!bBoth;
  return 0;
}

/* Row r (inside batch b0) of c as a value; aCode: c's codes of the batch
** when c is a dictionary column (else unused). */
static inline void row_val(const ex_col *c, const uint64_t *aCode, uint32_t b0, uint32_t r,
                           ex_val *v) {
  if (c->kind == K_DICT && aCode && !col_null(c, r)) {
    uint64_t u = aCode[r - b0];
    uint32_t o0 = csq_le32(c->d.aOff + 4 * u), o1 = csq_le32(c->d.aOff + 4 * u + 4);
    v->cls = CSQ_TEXT;
    v->z = c->d.aVar + o0;
    v->n = o1 - o0;
    return;
  }
  ex_col_get(c, r, v);
}

int ex_colcmp_eval(const ex_term *et, ex_col *cx, ex_col *cy, uint32_t b0, uint32_t nb,
                   const uint32_t *aSel, uint32_t n, uint8_t *aM) {
  const int cmp = et->t.k1;
  int8_t aS[BATCH]; /* sign of x - y per selected row */
  uint8_t t[3];
  uint32_t k;
  cmp_table(cmp, t);
  const int bAnyNull = cx->d.aNull || cy->d.aNull || cx->bAllNull || cy->bAllNull;
  const int bNumX = cx->kind == K_INT || cx->kind == K_REAL;
  const int bNumY = cy->kind == K_INT || cy->kind == K_REAL;
  if (cx->bAllNull || cy->bAllNull) {
    /* every row has a NULL on one side, so only the NULL answers below
    ** count (and such a column may lack the arrays the loops read) */
    memset(aS, 0, n);
  } else if (!bNumX || !bNumY) {
    const uint64_t *ux = cx->kind == K_DICT ? ex_col_codes(cx, b0, nb) : NULL;
    const uint64_t *uy = cy->kind == K_DICT ? ex_col_codes(cy, b0, nb) : NULL;
    ex_val vx, vy;
    memset(&vx, 0, sizeof(vx));
    memset(&vy, 0, sizeof(vy));
    for (k = 0; k < n; k++) {
      row_val(cx, ux, b0, aSel[k], &vx);
      row_val(cy, uy, b0, aSel[k], &vy);
      /* a NULL's sign is overwritten below */
      aS[k] = (int8_t)csq_value_cmp(&vx, &vy, et->coll);
    }
  } else if (cx->kind == K_INT && cy->kind == K_INT) {
    ex_col_ints(cx, b0, nb);
    ex_col_ints(cy, b0, nb);
    const int64_t *x = cx->aI, *y = cy->aI;
    for (k = 0; k < n; k++) {
      uint32_t r = aSel[k] - b0;
      aS[k] = (int8_t)((x[r] > y[r]) - (x[r] < y[r]));
    }
  } else if (cx->kind == K_REAL && cy->kind == K_REAL) {
    /* no NaN is ever stored, so the two tests order every pair */
    ex_col_reals(cx, b0, nb);
    ex_col_reals(cy, b0, nb);
    const double *x = cx->aR, *y = cy->aR;
    for (k = 0; k < n; k++) {
      uint32_t r = aSel[k] - b0;
      aS[k] = (int8_t)((x[r] > y[r]) - (x[r] < y[r]));
    }
  } else if (cx->kind == K_INT) { /* and y REAL */
    ex_col_ints(cx, b0, nb);
    ex_col_reals(cy, b0, nb);
    for (k = 0; k < n; k++) {
      uint32_t r = aSel[k] - b0;
      aS[k] = (int8_t)csq_value_cmp_int_real(cx->aI[r], cy->aR[r]);
    }
  } else { /* x REAL, y INTEGER */
    ex_col_reals(cx, b0, nb);
    ex_col_ints(cy, b0, nb);
    for (k = 0; k < n; k++) {
      uint32_t r = aSel[k] - b0;
      aS[k] = (int8_t)-csq_value_cmp_int_real(cy->aI[r], cx->aR[r]);
    }
  }
  for (k = 0; k < n; k++) aM[k] = t[aS[k] + 1];
  if (bAnyNull)
    for (k = 0; k < n; k++) {
      int nx = col_null(cx, aSel[k]), ny = col_null(cy, aSel[k]);
      if (nx || ny) aM[k] = null_truth(cmp, nx && ny);
    }
  return 0;
}
