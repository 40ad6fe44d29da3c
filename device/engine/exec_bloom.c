/*
** device/engine/exec_bloom.c - join filter terms (CSQ_OP_BLOOM, program.h
** JOIN FILTERS) over integer and real columns: the selected rows' values
** unpacked as words, hashed a vector at a time (keyhash.h), probed in the
** filter (bloom.h). Other columns take exec_term.c's paths: a dictionary's
** entries are probed once each (its mask), TEXT/BLOB and mixed columns one
** value at a time through ex_ev_one.
*/
#include "device/engine/exec_int.h"

int ex_bloom_eval(const ex_term *et, ex_col *c, uint32_t b0, uint32_t nb, const uint32_t *aSel,
                  uint32_t n, uint8_t *aM) {
  if (c->kind != K_INT && c->kind != K_REAL) return 0;
  uint64_t aW[BATCH], aH[BATCH];
  ex_col_sel_words(c, b0, nb, aSel, n, aW);
  /* the words are int64 values or doubles' bits: reinterpret, not convert */
  if (c->kind == K_INT) {
    int64_t aI[BATCH];
    memcpy(aI, aW, 8 * (size_t)n);
    csq_key_hash_ints(aI, aH, (int)n);
  } else {
    double aR[BATCH];
    memcpy(aR, aW, 8 * (size_t)n);
    csq_key_hash_reals(aR, aH, (int)n);
  }
  csq_bloom_maybe_many(et->a->z, et->a->len, aH, aM, (int)n);
  if (c->d.aNull)
    for (uint32_t k = 0; k < n; k++)
      if (col_null(c, aSel[k])) aM[k] = 0;
  return 1;
}
