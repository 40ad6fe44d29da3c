/*
** device/engine/cp_slm.h - a device's SLM (subsystem local memory, the memory
** namespace of the Computational Programs command set) and the commands that
** touch it alone: SLM Read, Write, Fill, and Memory Copy between SLM ranges.
** One implementation serves the emulated device (device/emu/) and the nvme
** backend's host engine (device/nvme/nvme_backend.c), so that SLM behaves
** the same on both, as program slots do (cp_slots.h).
**
** A Memory Copy from NVM (format 0) reads the media, which each backend does
** its own way; dev_cp_slm_cmd hands it back (DEV_CP_SLM_FROM_NVM), and the
** backend checks it with dev_cp_slm_lba_ranges and dev_cp_slm_range.
**
** Thread safety: none of its own. SLM is memory the host allocates from and
** addresses (dev_slm_alloc in the driver); commands on one range are
** ordered by the host, as on a real device.
*/
#ifndef CSQ_DEVICE_CP_SLM_H
#define CSQ_DEVICE_CP_SLM_H

#include <stddef.h>
#include <stdint.h>
#include "device/link/backend.h"
#include "device/link/cmd.h"

/* dev_cp_slm_cmd's answer for a Memory Copy from NVM (not an NVMe status:
** those fit in 15 bits). */
#define DEV_CP_SLM_FROM_NVM 0xFFFEu

typedef struct dev_cp_slm {
  uint8_t *a; /* mapped, reserved but not committed: pages cost memory once touched */
  uint64_t n; /* bytes, a multiple of 4 KiB */
} dev_cp_slm;

/* Map SLM of nBytes rounded up to 4 KiB (0: 256 MiB). 0, or -ENOMEM with
** *s empty. */
int dev_cp_slm_map(dev_cp_slm *s, uint64_t nBytes);
/* Unmap SLM; an empty (never mapped, or failed) *s is fine. */
void dev_cp_slm_unmap(dev_cp_slm *s);

/* 1 if [addr, addr+len) is inside SLM of size nSlm and both are 4-byte aligned. */
static inline int dev_cp_slm_ok(uint64_t nSlm, uint64_t addr, uint64_t len) {
  return (addr & 3) == 0 && (len & 3) == 0 && addr <= nSlm && len <= nSlm - addr;
}

/* 1 if nByte bytes at pDst lie inside SLM [pSlm, pSlm+nSlm): where a
** running program may have the media read into (dev_exec_ctx.xReadLba). */
static inline int dev_cp_slm_holds(const uint8_t *pSlm, uint64_t nSlm, const void *pDst,
                                   uint64_t nByte) {
  const uint8_t *pD = pDst;
  return pD >= pSlm && pD <= pSlm + nSlm && nByte <= (uint64_t)(pSlm + nSlm - pD);
}

/* 0 if [addr, addr+n) is a valid SLM range of s (dev_cp_slm_ok), else
** CSQ_SC_SLM_RANGE with zDetail saying why. */
uint16_t dev_cp_slm_range(const dev_cp_slm *s, uint64_t addr, uint64_t n, char *zDetail,
                          size_t nDetail);

/* Check the n LBA descriptors a[] of a Memory Copy or of a program's read
** against a namespace of nBlocks blocks: 0 with *pnByte their total size, or
** the status to complete with (zDetail says which range, where it helps). */
uint16_t dev_cp_slm_lba_ranges(uint64_t nBlocks, const csq_lba_range *a, int n, uint64_t *pnByte,
                               char *zDetail, size_t nDetail);

/* Do the SLM command p on s: SLM Read, Write or Fill, or a Memory Copy
** between SLM ranges (format 1). Returns the status field, zDetail
** explaining a failure, or DEV_CP_SLM_FROM_NVM for a Memory Copy from NVM
** (format 0, prp1 set), left to the caller. Bytes an SLM Read or Write
** moves count in pAcct->toHost / fromHost; pAcct may be NULL where SLM is
** host memory and nothing crosses a link. */
uint16_t dev_cp_slm_cmd(dev_cp_slm *s, const csq_sqe *p, dev_io_acct *pAcct, char *zDetail,
                        size_t nDetail);

#endif /* CSQ_DEVICE_CP_SLM_H */
