/*
** device/engine/cp_slm.c - a device's SLM and the commands that touch it
** alone; see cp_slm.h. Status codes and command layouts are in cmd.h.
*/
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include "device/engine/cp_slm.h"

#define ULL(x) ((unsigned long long)(x))

int dev_cp_slm_map(dev_cp_slm *s, uint64_t nBytes) {
  s->n = nBytes ? (nBytes + 4095) & ~(uint64_t)4095 : 256ull << 20;
  /* reserved, not committed: a large SLM costs only the pages written */
  s->a =
      mmap(NULL, s->n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (s->a == MAP_FAILED) {
    s->a = NULL;
    return -ENOMEM;
  }
  return 0;
}

void dev_cp_slm_unmap(dev_cp_slm *s) {
  if (s->a) munmap(s->a, s->n);
  s->a = NULL;
}

uint16_t dev_cp_slm_range(const dev_cp_slm *s, uint64_t addr, uint64_t n, char *zDetail,
                          size_t nDetail) {
  if (dev_cp_slm_ok(s->n, addr, n)) return CSQ_SC_SUCCESS;
  snprintf(zDetail, nDetail, "%llu bytes at SLM 0x%llx (SLM is %llu bytes, 4-byte aligned)", ULL(n),
           ULL(addr), ULL(s->n));
  return CSQ_SC_SLM_RANGE;
}

uint16_t dev_cp_slm_lba_ranges(uint64_t nBlocks, const csq_lba_range *a, int n, uint64_t *pnByte,
                               char *zDetail, size_t nDetail) {
  *pnByte = 0;
  for (int i = 0; i < n; i++) {
    if (a[i].nsid != CSQ_NSID_NVM) return CSQ_SC_INVALID_NS;
    if (a[i].nlb == 0 || a[i].slba >= nBlocks || a[i].nlb > nBlocks - a[i].slba) {
      snprintf(zDetail, nDetail, "range %d: %u blocks at LBA %llu, namespace has %llu blocks", i,
               a[i].nlb, ULL(a[i].slba), ULL(nBlocks));
      return a[i].nlb == 0 ? CSQ_SC_INVALID_FIELD : CSQ_SC_LBA_RANGE;
    }
    *pnByte += (uint64_t)a[i].nlb * CSQ_LBA_SIZE;
  }
  return CSQ_SC_SUCCESS;
}

/* Memory Copy of n SLM ranges a[] to addr, one after another. */
static uint16_t copy_slm(dev_cp_slm *s, const csq_mrange *a, int n, uint64_t addr, char *zDetail,
                         size_t nDetail) {
  uint64_t nByte = 0;
  uint16_t sf;
  for (int i = 0; i < n; i++) {
    if (a[i].nsid != CSQ_NSID_SLM) return CSQ_SC_INVALID_NS;
    if ((sf = dev_cp_slm_range(s, a[i].addr, a[i].len, zDetail, nDetail)) != 0) return sf;
    nByte += a[i].len;
  }
  if ((sf = dev_cp_slm_range(s, addr, nByte, zDetail, nDetail)) != 0) return sf;
  for (int i = 0; i < n; i++) {
    memmove(s->a + addr, s->a + a[i].addr, a[i].len);
    addr += a[i].len;
  }
  return CSQ_SC_SUCCESS;
}

uint16_t dev_cp_slm_cmd(dev_cp_slm *s, const csq_sqe *p, dev_io_acct *pAcct, char *zDetail,
                        size_t nDetail) {
  uint64_t addr = (uint64_t)p->cdw10 | ((uint64_t)p->cdw11 << 32);
  uint64_t n = p->cdw12;
  uint16_t sf;
  switch (p->opcode) {
  case CSQ_SLM_READ:
  case CSQ_SLM_WRITE:
  case CSQ_SLM_FILL:
    if ((sf = dev_cp_slm_range(s, addr, n, zDetail, nDetail)) != 0) return sf;
    if (n == 0) return CSQ_SC_SUCCESS;
    if (p->opcode == CSQ_SLM_FILL) {
      memset(s->a + addr, (int)(p->cdw13 & 0xFF), n);
      return CSQ_SC_SUCCESS;
    }
    if (!p->prp1) return CSQ_SC_INVALID_FIELD;
    if (p->opcode == CSQ_SLM_READ) {
      memcpy((void *)(uintptr_t)p->prp1, s->a + addr, n);
      if (pAcct) pAcct->toHost += n;
    } else {
      memcpy(s->a + addr, (const void *)(uintptr_t)p->prp1, n);
      if (pAcct) pAcct->fromHost += n;
    }
    return CSQ_SC_SUCCESS;
  case CSQ_SLM_COPY: {
    int nRange = (int)(p->cdw12 & 0xFF) + 1;
    int fmt = (p->cdw12 >> 8) & 0xF;
    if (!p->prp1 || fmt > 1) return CSQ_SC_INVALID_FIELD;
    if (fmt == 0) return DEV_CP_SLM_FROM_NVM;
    return copy_slm(s, (const csq_mrange *)(uintptr_t)p->prp1, nRange, addr, zDetail, nDetail);
  }
  }
  return CSQ_SC_INVALID_OPCODE;
}
