/*
** device/emu_admin.c - admin commands of the emulated device: Identify,
** Load Program (85h), Program Activation (88h), Memory Range Set Management
** (89h); and the program slots and memory range sets they manage.
** Field layouts are documented in device/cmd.h.
*/
#include <endian.h>
#include <libnvme.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

/* Copy a string into a space-padded NVMe identify field. */
static void id_str(char *pDst, size_t n, const char *z) {
  size_t l = strlen(z);
  memset(pDst, ' ', n);
  memcpy(pDst, z, l < n ? l : n);
}

/* Fill pBuf (4096 bytes) with Identify data. cns 1: controller, cns 0:
** namespace nsid. Returns a status field. */
int emu_identify(dev_backend *d, uint8_t cns, uint32_t nsid, void *pBuf) {
  memset(pBuf, 0, 4096);
  if (cns == NVME_IDENTIFY_CNS_CTRL) {
    struct nvme_id_ctrl *c = pBuf;
    csq_id_vs vs;
    _Static_assert(sizeof(csq_id_vs) <= sizeof(c->vs), "csq_id_vs fits nvme_id_ctrl.vs");
    c->vid = htole16(0x1b36);
    c->ssvid = htole16(0x1b36);
    id_str(c->sn, sizeof(c->sn), "CSQEMU0001");
    id_str(c->mn, sizeof(c->mn), "csq emulated computational storage");
    id_str(c->fr, sizeof(c->fr), "1.0");
    c->ver = htole32(0x00020000); /* NVMe 2.0 */
    c->cntrltype = 1;             /* I/O controller */
    c->sqes = 0x66;               /* 64-byte SQEs */
    c->cqes = 0x44;               /* 16-byte CQEs */
    c->nn = htole32(3);
    c->mdts = 0;                  /* no transfer size limit */
    memset(&vs, 0, sizeof(vs));
    vs.magic = CSQ_ID_MAGIC;
    vs.version = 1;
    vs.n_engines = (uint16_t)d->nEngine;
    vs.slm_bytes = d->nSlm;
    vs.max_programs = EMU_MAX_PROGRAMS;
    vs.max_active = EMU_MAX_ACTIVE;
    vs.max_prog_bytes = EMU_MAX_PROG_BYTES;
    vs.load_gran = EMU_LOAD_GRAN;
    vs.max_mrs = EMU_MAX_MRS;
    vs.max_ranges = EMU_MAX_RANGES;
    vs.n_queues = EMU_MAX_QUEUES;
    vs.max_qdepth = d->nMaxDepth;
    vs.ptypes[0] = CSQ_PTYPE_CSQ;
    vs.nvm_blocks = d->nBlocks;
    memcpy(c->vs, &vs, sizeof(vs));
    return CSQ_SC_SUCCESS;
  }
  if (cns == NVME_IDENTIFY_CNS_NS) {
    struct nvme_id_ns *ns = pBuf;
    uint64_t nsze;
    if (nsid == CSQ_NSID_NVM) nsze = d->nBlocks;
    else if (nsid == CSQ_NSID_SLM) nsze = d->nSlm / 4096; /* SLM reported in 4 KiB units */
    else if (nsid == CSQ_NSID_CP) nsze = 0;
    else return CSQ_SC_INVALID_NS;
    ns->nsze = htole64(nsze);
    ns->ncap = htole64(nsze);
    ns->nuse = htole64(nsid == CSQ_NSID_NVM ? dev_media_used_blocks(d->pMedia) : 0);
    ns->nlbaf = 0;  /* one format */
    ns->flbas = 0;
    ns->lbaf[0].ds = 12; /* 2^12 = 4096-byte blocks */
    return CSQ_SC_SUCCESS;
  }
  return CSQ_SC_INVALID_FIELD;
}

/* Empty a slot (progMutex held). */
static void slot_clear(emu_slot *s) {
  if (s->pType && s->pType->xFree) s->pType->xFree(s->pCompiled);
  s->pType = NULL;
  s->pCompiled = NULL;
  s->id = 0;
  s->nByte = 0;
}

static void slot_load_abort(emu_slot *s) {
  free(s->aLoad);
  s->aLoad = NULL;
  s->nLoadTotal = s->nLoadHave = 0;
}

void emu_programs_free(dev_backend *d) {
  int i;
  for (i = 0; i < EMU_MAX_PROGRAMS; i++) {
    slot_clear(&d->aSlot[i]);
    slot_load_abort(&d->aSlot[i]);
  }
  for (i = 0; i < EMU_MAX_MRS; i++) free(d->aMrs[i].aRange);
  memset(d->aMrs, 0, sizeof(d->aMrs));
}

/* Load Program, progMutex held. */
static uint16_t adm_load(dev_backend *d, const csq_sqe *p, uint64_t *pResult, dev_io_acct *pAcct,
                         char *zDetail, size_t nDetail) {
  uint32_t pind = p->cdw10 & 0xFFFF;
  int bUnload = (p->cdw10 >> 16) & 1;
  uint8_t type = (uint8_t)(p->cdw10 >> 24);
  uint32_t nTotal = p->cdw11, nChunk = p->cdw12, off = p->cdw13;
  uint64_t id = (uint64_t)p->cdw14 | ((uint64_t)p->cdw15 << 32);
  const dev_ptype *pt;
  emu_slot *s;
  if (pind >= EMU_MAX_PROGRAMS) return CSQ_SC_INVALID_PIND;
  s = &d->aSlot[pind];
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
  if (nTotal > EMU_MAX_PROG_BYTES) {
    snprintf(zDetail, nDetail, "program of %u bytes, the device takes at most %u", nTotal,
             EMU_MAX_PROG_BYTES);
    return CSQ_SC_PROGRAM_TOO_BIG;
  }
  pt = dev_ptype_find(type);
  if (!pt) {
    snprintf(zDetail, nDetail, "program type 0x%02x is not supported by this device", type);
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
    int rc;
    slot_clear(s);
    rc = pt->xVerify(s->aLoad, s->nLoadTotal, &pCompiled, zErr, sizeof(zErr));
    if (rc) {
      snprintf(zDetail, nDetail, "program rejected by the verifier: %s", zErr[0] ? zErr : "invalid");
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

static uint16_t adm_activate(dev_backend *d, const csq_sqe *p, char *zDetail, size_t nDetail) {
  uint32_t pind = p->cdw10 & 0xFFFF;
  int bAct = (p->cdw10 >> 16) & 1;
  emu_slot *s;
  if (pind >= EMU_MAX_PROGRAMS) return CSQ_SC_INVALID_PIND;
  s = &d->aSlot[pind];
  if (bAct) {
    if (!s->pType) return CSQ_SC_NO_PROGRAM;
    if (s->bActive) return CSQ_SC_SUCCESS;
    if (d->nActive >= EMU_MAX_ACTIVE) {
      snprintf(zDetail, nDetail, "%d programs already active", d->nActive);
      return CSQ_SC_MAX_ACTIVE;
    }
    s->bActive = 1;
    d->nActive++;
    return CSQ_SC_SUCCESS;
  }
  if (!s->bActive) return CSQ_SC_SUCCESS;
  if (s->nRunning > 0) {
    snprintf(zDetail, nDetail, "%d executions of slot %u still running", s->nRunning, pind);
    return CSQ_SC_PROGRAM_IN_USE;
  }
  s->bActive = 0;
  d->nActive--;
  return CSQ_SC_SUCCESS;
}

static uint16_t adm_mrs(dev_backend *d, const csq_sqe *p, uint64_t *pResult, dev_io_acct *pAcct,
                        char *zDetail, size_t nDetail) {
  uint32_t sel = p->cdw10 & 0xF;
  if (sel == 0) {
    uint32_t n = p->cdw11, i;
    const csq_mrange *a = (const csq_mrange *)(uintptr_t)p->prp1;
    int id;
    if (n == 0 || !a) return CSQ_SC_INVALID_FIELD;
    if (n > EMU_MAX_RANGES) return CSQ_SC_MAX_RANGES;
    for (i = 0; i < n; i++) {
      if (a[i].nsid != CSQ_NSID_SLM) return CSQ_SC_INVALID_NS;
      if (!emu_slm_ok(d, a[i].addr, a[i].len)) {
        snprintf(zDetail, nDetail, "range %u: %llu bytes at SLM 0x%llx (SLM is %llu bytes)", i,
                 (unsigned long long)a[i].len, (unsigned long long)a[i].addr,
                 (unsigned long long)d->nSlm);
        return CSQ_SC_SLM_RANGE;
      }
    }
    for (id = 0; id < EMU_MAX_MRS && d->aMrs[id].bUsed; id++) {
    }
    if (id == EMU_MAX_MRS) {
      snprintf(zDetail, nDetail, "all %d memory range sets are in use", EMU_MAX_MRS);
      return CSQ_SC_INVALID_MRS;
    }
    d->aMrs[id].aRange = malloc(n * sizeof(csq_mrange));
    if (!d->aMrs[id].aRange) return CSQ_SC_INTERNAL;
    memcpy(d->aMrs[id].aRange, a, n * sizeof(csq_mrange));
    d->aMrs[id].nRange = (int)n;
    d->aMrs[id].bUsed = 1;
    pAcct->fromHost += n * sizeof(csq_mrange);
    *pResult = (uint64_t)id + 1; /* ids are 1-based; 0xFFFF means inline */
    return CSQ_SC_SUCCESS;
  }
  if (sel == 1) {
    uint32_t id = p->cdw10 >> 16;
    if (id == 0 || id > EMU_MAX_MRS || !d->aMrs[id - 1].bUsed) return CSQ_SC_INVALID_MRS;
    free(d->aMrs[id - 1].aRange);
    memset(&d->aMrs[id - 1], 0, sizeof(emu_mrs));
    return CSQ_SC_SUCCESS;
  }
  return CSQ_SC_INVALID_FIELD;
}

uint16_t emu_admin(dev_bqueue *q, const csq_sqe *p, uint64_t *pResult, dev_io_acct *pAcct,
                   char *zDetail, size_t nDetail) {
  dev_backend *d = q->pDev;
  uint16_t sf;
  *pResult = 0;
  switch (p->opcode) {
  case CSQ_ADM_IDENTIFY:
    if (!p->prp1) return CSQ_SC_INVALID_FIELD;
    sf = (uint16_t)emu_identify(d, (uint8_t)(p->cdw10 & 0xFF), p->nsid, (void *)(uintptr_t)p->prp1);
    if (sf == 0) pAcct->toHost += 4096;
    return sf;
  case CSQ_ADM_LOAD_PROGRAM:
    pthread_mutex_lock(&d->progMutex);
    sf = adm_load(d, p, pResult, pAcct, zDetail, nDetail);
    pthread_mutex_unlock(&d->progMutex);
    return sf;
  case CSQ_ADM_PROGRAM_ACTIVATION:
    pthread_mutex_lock(&d->progMutex);
    sf = adm_activate(d, p, zDetail, nDetail);
    pthread_mutex_unlock(&d->progMutex);
    return sf;
  case CSQ_ADM_MRS_MGMT:
    pthread_mutex_lock(&d->progMutex);
    sf = adm_mrs(d, p, pResult, pAcct, zDetail, nDetail);
    pthread_mutex_unlock(&d->progMutex);
    return sf;
  }
  return CSQ_SC_INVALID_OPCODE;
}
