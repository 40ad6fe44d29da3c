/*
** tests/fuzz/fuzz_prog.c - libFuzzer harness for the device program verifier
** (csq_prog_parse, device/format/program.h): whatever the bytes, it must not read
** outside them, and what it accepts must be self-consistent - every index it
** hands the executor (input slots, output slots, constants, clause sizes)
** within the bounds it reported.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device/format/bloom.h"
#include "device/format/program.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *p = malloc(size ? size : 1); /* exactly sized: ASan sees overreads */
  if (!p) return 0;
  memcpy(p, data, size);
  csq_prog g;
  char zErr[256];
  memset(&g, 0, sizeof(g));
  int rc = csq_prog_parse(p, size, &g, zErr, sizeof(zErr));
  if (rc == 0) {
    if (g.nIn < 0 || g.nIn > CSQ_PROG_MAX_IN || g.nOut < 0 || g.nOut > CSQ_PROG_MAX_OUT) abort();
    for (int i = 0; i < g.nOut; i++)
      if (g.aOut[i] >= g.nIn) abort();
    int nSum = 0;
    for (int k = 0; k < g.nClause; k++) {
      if (g.aClause[k] < 1) abort();
      nSum += g.aClause[k];
    }
    if (nSum != g.nTerm) abort();
    for (int t = 0; t < g.nTerm; t++) {
      const csq_pterm *pt = &g.aTerm[t];
      if (pt->slot >= g.nIn) abort();
      /* a join filter: a BLOB of a size bloom.h allows, no NOT */
      if (pt->op == CSQ_OP_BLOOM &&
          (pt->k0 >= g.nConst || g.aConst[pt->k0].cls != CSQ_BLOB ||
           !csq_bloom_size_ok(g.aConst[pt->k0].len) || (pt->flags & CSQ_TF_NOT)))
        abort();
    }
    for (int c = 0; c < g.nCond; c++)
      if (g.aCond[c].op == CSQ_OP_BLOOM) abort(); /* join filters only filter */
    if (g.nTop > CSQ_TOPN_MAX || (g.nTop && (g.nTopKey < 1 || g.nTopKey > CSQ_TOPN_MAX_KEYS)) ||
        (g.nTop && (g.bAgg || g.bRowNum)))
      abort();
    for (int k = 0; g.nTop && k < g.nTopKey; k++)
      if (g.aTopSlot[k] >= g.nIn) abort();
    for (int c = 0; c < g.nConst; c++) {
      const csq_pconst *k = &g.aConst[c];
      if ((k->cls == CSQ_TEXT || k->cls == CSQ_BLOB) && k->len &&
          (k->z < p || k->z + k->len > p + size))
        abort();
    }
    csq_prog_clear(&g);
  } else {
    if (memchr(zErr, 0, sizeof(zErr)) == NULL) abort(); /* message terminated */
  }
  free(p);
  return 0;
}
