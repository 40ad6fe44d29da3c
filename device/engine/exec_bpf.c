/*
** device/engine/exec_bpf.c - eBPF terms of csq's executor (EBPF TERMS in
** program.h): the call descriptor compiled into a verified, JIT-compiled
** program once at Load, then run over a batch's selected rows, one
** argument block per row built straight from the input columns: as a
** filter term (its result a truth value) or as an expression of a grouped
** program (CSQ_EX_BPF: its result an INTEGER).
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

/* csq_fail's code of this thread's last fault: a fault travels through the
** executor as an int, too narrow for it, so ex_bpf_fault_reason adds it
** back when the Execute completes (on the thread that ran the program). */
static __thread int64_t tlsFailCode;

/* The fault reason of frame f: its kind, the code kept aside. */
static int bpf_fault(const dev_bpf_frame *f) {
  tlsFailCode = f->failCode;
  return (int)csq_bpf_fault_reason((unsigned)f->fault, 0);
}

uint64_t ex_bpf_fault_reason(uint64_t reason) {
  if ((reason & 0xFF) != CSQ_FAULT_BPF || ((reason >> 8) & 0xFF) != CSQ_BPF_FAULT_FAIL)
    return reason;
  return csq_bpf_fault_reason(CSQ_BPF_FAULT_FAIL, tlsFailCode);
}

/* Write slot s: value bits u, type t (bytes 9..15 stay zero). */
static inline void slot_set(uint8_t *s, uint64_t u, uint8_t t) {
  memcpy(s, &u, 8);
  s[8] = t;
}

/* The program of et over rows aSel[0..n) of aligned batch [b0, b0+nb):
** its results as truth values into aM, or (aM NULL) as INTEGERs into aI.
** 0, CSQ_FAULT_NOMEM, or the fault reason. */
static int bpf_rows(const ex_term *et, ex_col *aCol, uint32_t b0, uint32_t nb, const uint32_t *aSel,
                    uint32_t n, uint8_t *aM, int64_t *aI) {
  const csq_bpf_call *pc = et->pCall;
  uint8_t aBlock[CSQ_BPF_SLOT * CSQ_BPF_MAX_ARGS];
  const uint8_t *apZ[CSQ_BPF_MAX_ARGS];
  uint32_t aN[CSQ_BPF_MAX_ARGS];
  /* how each argument is read: 0 constant (set once), 1 an integer column,
  ** 2 a real column (their values as words in apW[j][k], row aSel[k]), 3
  ** any other column (per value) */
  uint8_t aHow[CSQ_BPF_MAX_ARGS];
  const uint64_t *apW[CSQ_BPF_MAX_ARGS];
  uint64_t *aScratch = NULL;
  /* every row of the batch in play: the batch's own arrays, aSel[k] being
  ** b0 + k; else the selected rows' values alone (ex_col_sel_words) */
  const int bWhole = n == nb && n > 0 && aSel[0] == b0;
  int nWord = 0;
  dev_bpf_frame f;
  memset(&f, 0, sizeof(f));
  memset(aBlock, 0, sizeof(aBlock));
  f.nArg = pc->nArg;
  f.aBlock = aBlock;
  f.apZ = apZ;
  f.aN = aN;
  for (int j = 0; j < pc->nArg; j++) {
    ex_col *c = pc->aConst[j] ? NULL : &aCol[pc->aSrc[j]];
    apZ[j] = NULL;
    aN[j] = 0;
    apW[j] = NULL;
    if (!c) {
      csq_bpf_slot_put(aBlock + CSQ_BPF_SLOT * j, &et->aBpfK[j], pc->aDecl[j]);
      apZ[j] = et->aBpfK[j].z;
      aN[j] = et->aBpfK[j].n;
      aHow[j] = 0;
    } else if ((c->kind == K_INT || c->kind == K_REAL) && !c->bAllNull) {
      aHow[j] = c->kind == K_INT ? 1 : 2;
      nWord += !bWhole;
    } else {
      aHow[j] = 3;
    }
  }
  if (nWord) {
    aScratch = malloc(sizeof(uint64_t) * (size_t)nWord * n);
    if (!aScratch) return CSQ_FAULT_NOMEM;
  }
  for (int j = 0, w = 0; j < pc->nArg; j++) {
    if (aHow[j] != 1 && aHow[j] != 2) continue;
    ex_col *c = &aCol[pc->aSrc[j]];
    if (bWhole) {
      if (aHow[j] == 1) {
        ex_col_ints(c, b0, nb);
        apW[j] = (const uint64_t *)c->aI;
      } else {
        ex_col_reals(c, b0, nb);
        apW[j] = (const uint64_t *)c->aR;
      }
    } else {
      uint64_t *u = aScratch + (size_t)n * (size_t)w++;
      ex_col_sel_words(c, b0, nb, aSel, n, u);
      apW[j] = u;
    }
  }
  dev_bpf_frame_set(&f);
  int rc = 0;
  /* the common case, every column argument a number without NULLs and not
  ** converted: the type bytes stay, only the values move */
  int bFast = 1;
  for (int j = 0; j < pc->nArg && bFast; j++) {
    const ex_col *c = aHow[j] ? &aCol[pc->aSrc[j]] : NULL;
    if (aHow[j] == 3 || (c && c->d.aNull) || (aHow[j] == 1 && pc->aDecl[j] == CSQ_BPF_DECL_REAL))
      bFast = 0;
    else if (aHow[j])
      aBlock[CSQ_BPF_SLOT * j + 8] = aHow[j] == 1 ? CSQ_BPF_INT : CSQ_BPF_REAL;
  }
  dev_bpf_fn xNative = dev_bpf_native(et->pBpf);
  for (uint32_t k = 0; bFast && k < n; k++) {
    for (int j = 0; j < pc->nArg; j++)
      if (apW[j]) memcpy(aBlock + CSQ_BPF_SLOT * j, &apW[j][k], 8);
    uint64_t ret = xNative ? xNative(aBlock) : dev_bpf_run(et->pBpf, &f);
    if (aM)
      aM[k] = ret != 0;
    else
      aI[k] = (int64_t)ret;
    if (f.fault) {
      rc = bpf_fault(&f);
      break;
    }
  }
  for (uint32_t k = 0; !bFast && k < n; k++) {
    uint32_t r = aSel[k];
    for (int j = 0; j < pc->nArg; j++) {
      uint8_t *s = aBlock + CSQ_BPF_SLOT * j;
      const ex_col *c = &aCol[pc->aSrc[j]];
      switch (aHow[j]) {
      case 0:
        break;
      case 1:
        if (col_null(c, r))
          slot_set(s, 0, CSQ_BPF_NULL);
        else if (pc->aDecl[j] == CSQ_BPF_DECL_REAL) {
          double d = (double)(int64_t)apW[j][k];
          uint64_t u;
          memcpy(&u, &d, 8);
          slot_set(s, u, CSQ_BPF_REAL);
        } else
          slot_set(s, apW[j][k], CSQ_BPF_INT);
        break;
      case 2:
        slot_set(s, col_null(c, r) ? 0 : apW[j][k], col_null(c, r) ? CSQ_BPF_NULL : CSQ_BPF_REAL);
        break;
      default: {
        ex_val v;
        ex_col_get(c, r, &v);
        csq_bpf_slot_put(s, &v, pc->aDecl[j]);
        apZ[j] = v.z;
        aN[j] = v.n;
      }
      }
    }
    uint64_t ret = dev_bpf_run(et->pBpf, &f);
    if (aM)
      aM[k] = ret != 0;
    else
      aI[k] = (int64_t)ret;
    if (f.fault) {
      rc = bpf_fault(&f);
      break;
    }
  }
  dev_bpf_frame_set(NULL);
  free(aScratch);
  return rc;
}

int ex_bpf_eval(const ex_term *et, ex_col *aCol, uint32_t b0, uint32_t nb, const uint32_t *aSel,
                uint32_t n, uint8_t *aM) {
  return bpf_rows(et, aCol, b0, nb, aSel, n, aM, NULL);
}

int ex_bpf_values(const ex_term *et, ex_col *aCol, uint32_t b0, uint32_t nb, const uint32_t *aSel,
                  uint32_t n, int64_t *aI) {
  return bpf_rows(et, aCol, b0, nb, aSel, n, NULL, aI);
}
