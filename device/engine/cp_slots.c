/*
** device/engine/cp_slots.c - program slots and memory range sets of a device; see
** cp_slots.h. Status codes and their meaning are documented in cmd.h.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "device/engine/cp_slots.h"
#include "device/link/queue.h"

#define ULL(x) ((unsigned long long)(x))

void dev_cp_init(dev_cp *cp, uint64_t nSlm, const char *zWho) {
  memset(cp, 0, sizeof(*cp));
  pthread_mutex_init(&cp->mu, NULL);
  cp->nSlm = nSlm;
  cp->zWho = zWho;
  cp->aChecked = calloc(DEV_CP_CHECKED, sizeof(uint64_t)); /* NULL: no memo, every chunk checked */
}

/* Empty a slot (mu held). */
static void slot_clear(dev_cp_slot *s) {
  if (s->pType && s->pType->xFree) s->pType->xFree(s->pCompiled);
  s->pType = NULL;
  s->pCompiled = NULL;
  s->id = 0;
  s->nByte = 0;
}

static void slot_load_abort(dev_cp_slot *s) {
  free(s->aLoad);
  s->aLoad = NULL;
  s->nLoadTotal = s->nLoadHave = 0;
}

void dev_cp_free(dev_cp *cp) {
  for (int i = 0; i < DEV_CP_MAX_PROGRAMS; i++) {
    slot_clear(&cp->aSlot[i]);
    slot_load_abort(&cp->aSlot[i]);
  }
  for (int i = 0; i < DEV_CP_MAX_MRS; i++) free(cp->aMrs[i].aRange);
  memset(cp->aMrs, 0, sizeof(cp->aMrs));
  free(cp->aChecked);
  cp->aChecked = NULL;
  pthread_mutex_destroy(&cp->mu);
}

static uint16_t slm_range_err(const dev_cp *cp, int i, const csq_mrange *r, char *zDetail,
                              size_t nDetail) {
  snprintf(zDetail, nDetail, "range %d: %llu bytes at SLM 0x%llx (SLM is %llu bytes)", i,
           ULL(r->len), ULL(r->addr), ULL(cp->nSlm));
  return CSQ_SC_SLM_RANGE;
}

/* Load Program (mu held). */
static uint16_t cp_load(dev_cp *cp, const csq_sqe *p, uint64_t *pResult, dev_io_acct *pAcct,
                        char *zDetail, size_t nDetail) {
  uint32_t pind = p->cdw10 & 0xFFFF;
  int bUnload = (p->cdw10 >> 16) & 1;
  uint8_t type = (uint8_t)(p->cdw10 >> 24);
  uint32_t nTotal = p->cdw11, nChunk = p->cdw12, off = p->cdw13;
  uint64_t id = (uint64_t)p->cdw14 | ((uint64_t)p->cdw15 << 32);
  if (pind >= DEV_CP_MAX_PROGRAMS) return CSQ_SC_INVALID_PIND;
  dev_cp_slot *s = &cp->aSlot[pind];
  if (bUnload) {
    if (!s->pType && !s->aLoad) return CSQ_SC_NO_PROGRAM;
    if (s->bActive) return CSQ_SC_PROGRAM_IN_USE;
    slot_clear(s);
    slot_load_abort(s);
    return CSQ_SC_SUCCESS;
  }
  if (s->pType && s->id == id && s->pType->type == type) {
    *pResult = 1; /* already loaded: nothing transferred */
    return CSQ_SC_SUCCESS;
  }
  if (s->bActive) {
    snprintf(zDetail, nDetail, "slot %u holds an active program; deactivate it first", pind);
    return CSQ_SC_PROGRAM_IN_USE;
  }
  if (nTotal == 0) return CSQ_SC_INVALID_FIELD;
  if (nTotal > DEV_CP_MAX_PROG_BYTES) {
    snprintf(zDetail, nDetail, "program of %u bytes, %s takes at most %u", nTotal, cp->zWho,
             DEV_CP_MAX_PROG_BYTES);
    return CSQ_SC_PROGRAM_TOO_BIG;
  }
  const dev_ptype *pt = dev_ptype_find(type);
  if (!pt) {
    snprintf(zDetail, nDetail, "program type 0x%02x is not supported by %s", type, cp->zWho);
    return CSQ_SC_INVALID_PROGRAM;
  }
  if (off == 0) {
    slot_load_abort(s);
    s->aLoad = malloc(nTotal);
    if (!s->aLoad) return CSQ_SC_INTERNAL;
    s->nLoadTotal = nTotal;
    s->loadId = id;
    s->loadType = type;
  } else if (!s->aLoad || s->loadId != id || s->loadType != type || off != s->nLoadHave ||
             nTotal != s->nLoadTotal) {
    snprintf(zDetail, nDetail, "program chunk at offset %u out of order (expected %u)", off,
             s->aLoad ? s->nLoadHave : 0);
    return CSQ_SC_INVALID_FIELD;
  }
  if (nChunk == 0 || nChunk > nTotal - off || !p->prp1) {
    slot_load_abort(s);
    return CSQ_SC_INVALID_FIELD;
  }
  memcpy(s->aLoad + off, (const void *)(uintptr_t)p->prp1, nChunk);
  s->nLoadHave += nChunk;
  pAcct->fromHost += nChunk;
  if (s->nLoadHave == s->nLoadTotal) {
    void *pCompiled = NULL;
    char zErr[200] = "";
    slot_clear(s);
    if (pt->xVerify(s->aLoad, s->nLoadTotal, &pCompiled, zErr, sizeof(zErr))) {
      snprintf(zDetail, nDetail, "program rejected by the verifier: %s",
               zErr[0] ? zErr : "invalid");
      slot_load_abort(s);
      return CSQ_SC_INVALID_PROGRAM;
    }
    s->pType = pt;
    s->pCompiled = pCompiled;
    s->id = id;
    s->nByte = s->nLoadTotal;
    slot_load_abort(s);
  }
  return CSQ_SC_SUCCESS;
}

/* Program Activation Management (mu held). */
static uint16_t cp_activate(dev_cp *cp, const csq_sqe *p, char *zDetail, size_t nDetail) {
  uint32_t pind = p->cdw10 & 0xFFFF;
  int bAct = (p->cdw10 >> 16) & 1;
  if (pind >= DEV_CP_MAX_PROGRAMS) return CSQ_SC_INVALID_PIND;
  dev_cp_slot *s = &cp->aSlot[pind];
  if (bAct) {
    if (!s->pType) return CSQ_SC_NO_PROGRAM;
    if (s->bActive) return CSQ_SC_SUCCESS;
    if (cp->nActive >= DEV_CP_MAX_ACTIVE) {
      snprintf(zDetail, nDetail, "%d programs already active", cp->nActive);
      return CSQ_SC_MAX_ACTIVE;
    }
    s->bActive = 1;
    cp->nActive++;
    return CSQ_SC_SUCCESS;
  }
  if (!s->bActive) return CSQ_SC_SUCCESS;
  if (s->nRunning > 0) {
    snprintf(zDetail, nDetail, "%d executions of slot %u still running", s->nRunning, pind);
    return CSQ_SC_PROGRAM_IN_USE;
  }
  s->bActive = 0;
  cp->nActive--;
  return CSQ_SC_SUCCESS;
}

/* Memory Range Set Management (mu held). */
static uint16_t cp_mrs(dev_cp *cp, const csq_sqe *p, uint64_t *pResult, dev_io_acct *pAcct,
                       char *zDetail, size_t nDetail) {
  uint32_t sel = p->cdw10 & 0xF;
  if (sel == 0) {
    uint32_t n = p->cdw11;
    const csq_mrange *a = (const csq_mrange *)(uintptr_t)p->prp1;
    int id;
    if (n == 0 || !a) return CSQ_SC_INVALID_FIELD;
    if (n > DEV_CP_MAX_RANGES) return CSQ_SC_MAX_RANGES;
    for (uint32_t i = 0; i < n; i++) {
      if (a[i].nsid != CSQ_NSID_SLM) return CSQ_SC_INVALID_NS;
      if (!dev_cp_slm_ok(cp->nSlm, a[i].addr, a[i].len))
        return slm_range_err(cp, (int)i, &a[i], zDetail, nDetail);
    }
    for (id = 0; id < DEV_CP_MAX_MRS && cp->aMrs[id].bUsed; id++) {}
    if (id == DEV_CP_MAX_MRS) {
      snprintf(zDetail, nDetail, "all %d memory range sets are in use", DEV_CP_MAX_MRS);
      return CSQ_SC_INVALID_MRS;
    }
    cp->aMrs[id].aRange = malloc(n * sizeof(csq_mrange));
    if (!cp->aMrs[id].aRange) return CSQ_SC_INTERNAL;
    memcpy(cp->aMrs[id].aRange, a, n * sizeof(csq_mrange));
    cp->aMrs[id].nRange = (int)n;
    cp->aMrs[id].bUsed = 1;
    pAcct->fromHost += n * sizeof(csq_mrange);
    *pResult = (uint64_t)id + 1; /* ids are 1-based; 0xFFFF means inline */
    return CSQ_SC_SUCCESS;
  }
  if (sel == 1) {
    uint32_t id = p->cdw10 >> 16;
    if (id == 0 || id > DEV_CP_MAX_MRS || !cp->aMrs[id - 1].bUsed) return CSQ_SC_INVALID_MRS;
    free(cp->aMrs[id - 1].aRange);
    memset(&cp->aMrs[id - 1], 0, sizeof(dev_cp_mrs));
    return CSQ_SC_SUCCESS;
  }
  return CSQ_SC_INVALID_FIELD;
}

uint16_t dev_cp_admin(dev_cp *cp, const csq_sqe *p, uint64_t *pResult, dev_io_acct *pAcct,
                      char *zDetail, size_t nDetail) {
  uint16_t sf = CSQ_SC_INVALID_OPCODE;
  *pResult = 0;
  pthread_mutex_lock(&cp->mu);
  switch (p->opcode) {
  case CSQ_ADM_LOAD_PROGRAM:
    sf = cp_load(cp, p, pResult, pAcct, zDetail, nDetail);
    break;
  case CSQ_ADM_PROGRAM_ACTIVATION:
    sf = cp_activate(cp, p, zDetail, nDetail);
    break;
  case CSQ_ADM_MRS_MGMT:
    sf = cp_mrs(cp, p, pResult, pAcct, zDetail, nDetail);
    break;
  }
  pthread_mutex_unlock(&cp->mu);
  return sf;
}

uint16_t dev_cp_exec_begin(dev_cp *cp, const csq_sqe *p, dev_cp_run *pRun, dev_io_acct *pAcct,
                           char *zDetail, size_t nDetail) {
  uint32_t pind = p->cdw10 & 0xFFFF, mrsId = p->cdw10 >> 16, nInline = p->cdw11;
  uint16_t sf = CSQ_SC_SUCCESS;
  memset(pRun, 0, sizeof(*pRun));
  if (p->opcode != CSQ_CP_EXECUTE) return CSQ_SC_INVALID_OPCODE;
  if (pind >= DEV_CP_MAX_PROGRAMS) return CSQ_SC_INVALID_PIND;
  pthread_mutex_lock(&cp->mu);
  dev_cp_slot *s = &cp->aSlot[pind];
  const csq_mrange *aSrc = NULL;
  if (!s->pType)
    sf = CSQ_SC_NO_PROGRAM;
  else if (!s->bActive)
    sf = CSQ_SC_NOT_ACTIVATED;
  else if (mrsId == 0xFFFF) {
    if (nInline > DEV_CP_MAX_RANGES)
      sf = CSQ_SC_MAX_RANGES;
    else if (nInline > 0 && !p->prp1)
      sf = CSQ_SC_INVALID_FIELD;
    else
      pRun->nRange = (int)nInline;
    aSrc = (const csq_mrange *)(uintptr_t)p->prp1;
  } else if (mrsId == 0 || mrsId > DEV_CP_MAX_MRS || !cp->aMrs[mrsId - 1].bUsed) {
    sf = CSQ_SC_INVALID_MRS;
  } else {
    pRun->nRange = cp->aMrs[mrsId - 1].nRange;
    aSrc = cp->aMrs[mrsId - 1].aRange;
  }
  if (sf == 0 && pRun->nRange > 0) {
    pRun->aRange = malloc(pRun->nRange * sizeof(csq_mrange));
    if (!pRun->aRange)
      sf = CSQ_SC_INTERNAL;
    else
      memcpy(pRun->aRange, aSrc, pRun->nRange * sizeof(csq_mrange));
  }
  if (sf == 0 && mrsId == 0xFFFF) {
    /* inline ranges are the command's data: they crossed the link */
    pAcct->fromHost += (uint64_t)pRun->nRange * sizeof(csq_mrange);
    for (int i = 0; i < pRun->nRange && sf == 0; i++) {
      if (pRun->aRange[i].nsid != CSQ_NSID_SLM)
        sf = CSQ_SC_INVALID_NS;
      else if (!dev_cp_slm_ok(cp->nSlm, pRun->aRange[i].addr, pRun->aRange[i].len))
        sf = slm_range_err(cp, i, &pRun->aRange[i], zDetail, nDetail);
    }
  }
  if (sf == 0) {
    s->nRunning++;
    pRun->pind = (uint16_t)pind;
    pRun->pType = s->pType;
    pRun->pCompiled = s->pCompiled;
    pRun->aChecked = cp->aChecked;
  }
  pthread_mutex_unlock(&cp->mu);
  if (sf) {
    free(pRun->aRange);
    pRun->aRange = NULL;
  }
  return sf;
}

void dev_cp_exec_end(dev_cp *cp, dev_cp_run *pRun) {
  pthread_mutex_lock(&cp->mu);
  cp->aSlot[pRun->pind].nRunning--;
  pthread_mutex_unlock(&cp->mu);
  free(pRun->aRange);
  pRun->aRange = NULL;
}

uint16_t dev_cp_run_program(const dev_cp_run *pRun, const csq_sqe *p, uint8_t *pSlm, uint64_t nSlm,
                            int iEngine,
                            int (*xReadLba)(dev_exec_ctx *, const csq_lba_range *, int, void *),
                            void *pDevPriv, dev_stats *pLocal, uint64_t *pRet, char *zDetail,
                            size_t nDetail) {
  dev_exec_ctx ctx;
  memset(pLocal, 0, sizeof(*pLocal));
  memset(&ctx, 0, sizeof(ctx));
  ctx.pSlm = pSlm;
  ctx.nSlm = nSlm;
  ctx.aRange = pRun->aRange;
  ctx.nRange = pRun->nRange;
  ctx.aParam[0] = (uint64_t)p->cdw12 | ((uint64_t)p->cdw13 << 32);
  ctx.aParam[1] = (uint64_t)p->cdw14 | ((uint64_t)p->cdw15 << 32);
  ctx.pind = pRun->pind;
  ctx.iEngine = iEngine;
  ctx.pStats = pLocal;
  ctx.xReadLba = xReadLba;
  ctx.pDevPriv = pDevPriv;
  ctx.aChecked = pRun->aChecked;
  ctx.nChecked = pRun->aChecked ? DEV_CP_CHECKED : 0;
  *pRet = 0;
  int64_t t0 = dev_now_ns();
  int rc = pRun->pType->xRun(pRun->pCompiled, &ctx, pRet);
  pLocal->engine_ns += (uint64_t)(dev_now_ns() - t0);
  pLocal->programs_executed++;
  if (rc == 0) return CSQ_SC_SUCCESS;
  snprintf(zDetail, nDetail, "program in slot %u failed (reason %llu)", pRun->pind, ULL(*pRet));
  return (rc < 0 || rc > 0x7FFF) ? CSQ_SC_PROGRAM_FAULT : (uint16_t)rc;
}
