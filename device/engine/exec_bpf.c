/*
** device/engine/exec_bpf.c - eBPF terms of csq's executor (EBPF TERMS in
** program.h): the call descriptor compiled into a verified, JIT-compiled
** program once at Load, then run over a batch's selected rows, one
** argument block per row built straight from the input columns.
*/
#include "device/engine/exec_int.h"
#include "device/format/bpf.h"

int ex_bpf_compile(const ex_prog *ep, ex_term *et, char *zErr, size_t nErr) {
  const csq_prog *p = &ep->p;
  const csq_pconst *k = &p->aConst[et->t.k0];
  et->pCall = calloc(1, sizeof(csq_bpf_call));
  if (!et->pCall) return -ENOMEM;
  int rc = csq_bpf_call_parse(k->z, k->len, p->nIn, p->nConst, et->pCall, zErr, nErr);
  if (rc) return rc;
  et->aBpfK = calloc((size_t)et->pCall->nArg, sizeof(ex_val));
  if (!et->aBpfK) return -ENOMEM;
  for (int j = 0; j < et->pCall->nArg; j++)
    if (et->pCall->aConst[j]) const_val(&p->aConst[et->pCall->aSrc[j]], &et->aBpfK[j]);
  return dev_bpf_load(et->pCall->aIns, et->pCall->nIns, et->pCall->nArg, &et->pBpf, zErr, nErr);
}

void ex_bpf_free(ex_term *et) {
  dev_bpf_free(et->pBpf);
  free(et->pCall);
  free(et->aBpfK);
  et->pBpf = NULL;
  et->pCall = NULL;
  et->aBpfK = NULL;
}

int ex_bpf_eval(const ex_term *et, ex_col *aCol, const uint32_t *aSel, uint32_t n, uint8_t *aM) {
  const csq_bpf_call *pc = et->pCall;
  uint8_t aBlock[CSQ_BPF_SLOT * CSQ_BPF_MAX_ARGS];
  const uint8_t *apZ[CSQ_BPF_MAX_ARGS];
  uint32_t aN[CSQ_BPF_MAX_ARGS];
  dev_bpf_frame f;
  memset(&f, 0, sizeof(f));
  f.nArg = pc->nArg;
  f.aBlock = aBlock;
  f.apZ = apZ;
  f.aN = aN;
  /* constant arguments once per batch; columns per row */
  for (int j = 0; j < pc->nArg; j++) {
    if (!pc->aConst[j]) continue;
    csq_bpf_slot_put(aBlock + CSQ_BPF_SLOT * j, &et->aBpfK[j], pc->aDecl[j]);
    apZ[j] = et->aBpfK[j].z;
    aN[j] = et->aBpfK[j].n;
  }
  dev_bpf_frame_set(&f);
  int rc = 0;
  for (uint32_t k = 0; k < n; k++) {
    for (int j = 0; j < pc->nArg; j++) {
      if (pc->aConst[j]) continue;
      ex_val v;
      ex_col_get(&aCol[pc->aSrc[j]], aSel[k], &v);
      csq_bpf_slot_put(aBlock + CSQ_BPF_SLOT * j, &v, pc->aDecl[j]);
      apZ[j] = v.z;
      aN[j] = v.n;
    }
    aM[k] = dev_bpf_run(et->pBpf, &f) != 0;
    if (f.fault) {
      rc = CSQ_FAULT_BPF;
      break;
    }
  }
  dev_bpf_frame_set(NULL);
  return rc;
}
