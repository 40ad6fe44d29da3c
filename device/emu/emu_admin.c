/*
** device/emu/emu_admin.c - admin commands of the emulated device: Identify,
** Load Program (85h), Program Activation (88h), Memory Range Set Management
** (89h); and the program slots and memory range sets they manage.
** Field layouts are documented in device/link/cmd.h.
*/
#include <endian.h>
#include <libnvme.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/emu/emu.h"

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
    c->mdts = 0; /* no transfer size limit */
    memset(&vs, 0, sizeof(vs));
    vs.magic = CSQ_ID_MAGIC;
    vs.version = 1;
    vs.n_engines = (uint16_t)d->nEngine;
    vs.slm_bytes = d->slm.n;
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
    if (nsid == CSQ_NSID_NVM)
      nsze = d->nBlocks;
    else if (nsid == CSQ_NSID_SLM)
      nsze = d->slm.n / 4096; /* SLM reported in 4 KiB units */
    else if (nsid == CSQ_NSID_CP)
      nsze = 0;
    else
      return CSQ_SC_INVALID_NS;
    ns->nsze = htole64(nsze);
    ns->ncap = htole64(nsze);
    ns->nuse = htole64(nsid == CSQ_NSID_NVM ? dev_media_used_blocks(d->pMedia) : 0);
    ns->nlbaf = 0; /* one format */
    ns->flbas = 0;
    ns->lbaf[0].ds = 12; /* 2^12 = 4096-byte blocks */
    /* NSATTR bit 0: write protected (an image this process may only read) */
    ns->nsattr = nsid == CSQ_NSID_NVM && dev_media_read_only(d->pMedia) ? 1 : 0;
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
  case CSQ_ADM_PROGRAM_ACTIVATION:
  case CSQ_ADM_MRS_MGMT:
    return dev_cp_admin(&d->cp, p, pResult, pAcct, zDetail, nDetail);
  }
  return CSQ_SC_INVALID_OPCODE;
}
