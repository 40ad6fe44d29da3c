/*
** device/engine/exec_top.c - top-N (program.h, TOP-N): of the selected rows,
** keep the nTop that sort first under the program's ORDER BY keys.
*/
#include "device/engine/exec_int.h"

/* ORDER BY order of two values (BINARY; NULL first). */
static int ord_cmp(const ex_val *a, const ex_val *b) {
  return csq_value_cmp(a, b, CSQ_TF_BINARY);
}

/* Order of selected row aSel[x] against the key values aK of another row
** (< 0: x first), by the program's keys; ties are left to the caller. */
static int top_cmp(const csq_prog *pp, const ex_col *aCol, uint32_t r, const ex_val *aK) {
  for (int j = 0; j < pp->nTopKey; j++) {
    ex_val v;
    ex_col_get(&aCol[pp->aTopSlot[j]], r, &v);
    int c = ord_cmp(&v, &aK[j]);
    if (c) return pp->aTopDesc[j] ? -c : c;
  }
  return 0;
}

/* Does position x sort after position y (keys, then row order)? */
static int top_after(const csq_prog *pp, const ex_col *aCol, const uint32_t *aSel, uint32_t x,
                     uint32_t y) {
  ex_val aK[CSQ_TOPN_MAX_KEYS];
  for (int j = 0; j < pp->nTopKey; j++) ex_col_get(&aCol[pp->aTopSlot[j]], aSel[y], &aK[j]);
  int c = top_cmp(pp, aCol, aSel[x], aK);
  return c > 0 || (c == 0 && x > y);
}

static void top_sift_down(const csq_prog *pp, const ex_col *aCol, const uint32_t *aSel,
                          uint32_t *aH, uint32_t i, uint32_t n) {
  for (;;) {
    uint32_t l = 2 * i + 1, m = l;
    if (l >= n) return;
    if (l + 1 < n && top_after(pp, aCol, aSel, aH[l + 1], aH[l])) m = l + 1;
    if (!top_after(pp, aCol, aSel, aH[m], aH[i])) return;
    uint32_t t = aH[i];
    aH[i] = aH[m];
    aH[m] = t;
    i = m;
  }
}

static int cmp_u32(const void *x, const void *y) {
  uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
  return (a > b) - (a < b);
}

/* Keep in aSel[0..*pnSel) (ascending rows) only the nTop rows that sort
** first, still ascending. A max-heap of positions holds the kept rows with
** the one that sorts last at the root, whose key values are kept decoded:
** a row that does not belong costs one comparison against them. */
int ex_top_select(const csq_prog *pp, const ex_col *aCol, uint32_t *aSel, uint32_t *pnSel) {
  uint32_t n = *pnSel, nTop = pp->nTop, nH = 0;
  uint32_t *aH = malloc(sizeof(uint32_t) * nTop);
  if (!aH) return CSQ_FAULT_NOMEM;
  ex_val aRoot[CSQ_TOPN_MAX_KEYS];
  for (uint32_t x = 0; x < n; x++) {
    if (nH < nTop) {
      uint32_t i = nH++;
      aH[i] = x;
      while (i > 0) {
        uint32_t up = (i - 1) / 2;
        if (!top_after(pp, aCol, aSel, aH[i], aH[up])) break;
        uint32_t t = aH[i];
        aH[i] = aH[up];
        aH[up] = t;
        i = up;
      }
      if (nH == nTop)
        for (int j = 0; j < pp->nTopKey; j++)
          ex_col_get(&aCol[pp->aTopSlot[j]], aSel[aH[0]], &aRoot[j]);
      continue;
    }
    /* a later row replaces the root only if it sorts strictly before it */
    if (top_cmp(pp, aCol, aSel[x], aRoot) >= 0) continue;
    aH[0] = x;
    top_sift_down(pp, aCol, aSel, aH, 0, nH);
    for (int j = 0; j < pp->nTopKey; j++)
      ex_col_get(&aCol[pp->aTopSlot[j]], aSel[aH[0]], &aRoot[j]);
  }
  qsort(aH, nH, sizeof(uint32_t), cmp_u32);
  for (uint32_t i = 0; i < nH; i++) aSel[i] = aSel[aH[i]];
  *pnSel = nH;
  free(aH);
  return 0;
}
