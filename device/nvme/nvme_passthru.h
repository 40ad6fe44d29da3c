/*
** device/nvme/nvme_passthru.h - NVMe passthrough for the nvme backend: the
** encodings from csq's command set (device/link/cmd.h) to real NVMe commands,
** status decoding, and an io_uring passthrough ring.
**
** Only device/nvme/nvme_passthru.c includes <linux/nvme_ioctl.h> (libnvme 1.3's
** nvme/ioctl.h reuses its include guard, NVME-CS.md): everything else uses
** dev_nvme_cmd, a field-for-field copy of the kernel's struct nvme_uring_cmd
** (nvme_passthru.c checks the layout at compile time).
**
** Geometry: csq's NVM namespace has 4096-byte blocks. A real namespace may
** be formatted with 512..4096-byte LBAs (a power of two); each csq block is
** then 1 << (12 - lbaShift) device LBAs. Larger LBAs, or LBA formats with
** metadata, are refused at open. A csq transfer larger than the device's
** maximum (dev_nvme_geom.maxXfer) becomes several NVMe commands ("parts").
*/
#ifndef CSQ_DEVICE_NVME_PASSTHRU_H
#define CSQ_DEVICE_NVME_PASSTHRU_H

#include <stddef.h>
#include <stdint.h>

#include "device/link/cmd.h"

/* struct nvme_uring_cmd, 72 bytes (also the first 72 of nvme_passthru_cmd64). */
typedef struct dev_nvme_cmd {
  uint8_t opcode;
  uint8_t flags;
  uint16_t rsvd1;
  uint32_t nsid;
  uint32_t cdw2;
  uint32_t cdw3;
  uint64_t metadata;
  uint64_t addr;
  uint32_t metadata_len;
  uint32_t data_len;
  uint32_t cdw10;
  uint32_t cdw11;
  uint32_t cdw12;
  uint32_t cdw13;
  uint32_t cdw14;
  uint32_t cdw15;
  uint32_t timeout_ms;
  uint32_t rsvd2;
} dev_nvme_cmd;
_Static_assert(sizeof(dev_nvme_cmd) == 72, "struct nvme_uring_cmd is 72 bytes");

/* NVMe base / NVM command set opcodes the backend sends. */
#define DEV_NVME_OP_FLUSH     0x00
#define DEV_NVME_OP_WRITE     0x01
#define DEV_NVME_OP_READ      0x02
#define DEV_NVME_ADM_IDENTIFY 0x06

/* Largest transfer per NVMe command the backend uses even if the device
** allows more: 256 KiB is 64 pages, under the kernel's segment limit for a
** user buffer mapped page by page. */
#define DEV_NVME_MAX_XFER (256u * 1024)

typedef struct dev_nvme_geom {
  uint32_t nsid;     /* the real namespace id (NVME_IOCTL_ID) */
  uint32_t lbaShift; /* log2 of the device LBA size, 9..12 */
  uint32_t maxXfer;  /* bytes per NVMe command, a multiple of 4096, >= 4096 */
} dev_nvme_geom;

/* lbaShift for a device LBA size in bytes: 0, or -EINVAL for a size csq's
** 4096-byte blocks cannot be built from (not a power of two in 512..4096). */
int dev_nvme_lba_shift(uint32_t lbaSize, uint32_t *pShift);

/* maxXfer from Identify Controller MDTS (0 = no limit) and the controller's
** minimum page size (4096 when unknown): min(pageSize << mdts, DEV_NVME_MAX_XFER),
** rounded down to 4096, at least 4096. */
uint32_t dev_nvme_max_xfer(uint8_t mdts, uint32_t pageSize);

/* Number of NVMe commands a csq NVM Read/Write of nlb 4 KiB blocks becomes. */
uint32_t dev_nvme_rw_parts(const dev_nvme_geom *g, uint32_t nlb);

/* Fill *pOut with part iPart (< dev_nvme_rw_parts) of an NVMe Read or Write
** (op DEV_NVME_OP_READ/WRITE) of nlb 4 KiB blocks at csq LBA slba, data at
** host address addr. Device LBAs: slba << (12 - lbaShift). */
void dev_nvme_rw_part(const dev_nvme_geom *g, uint8_t op, uint64_t slba, uint32_t nlb,
                      uint64_t addr, uint32_t iPart, dev_nvme_cmd *pOut);

/* Translate a csq NVM Read/Write/Flush SQE (nsid CSQ_NSID_NVM) into its first
** NVMe command (iPart 0; the caller asks dev_nvme_rw_parts for the rest).
** Returns 0, or -EINVAL if the SQE is not one of those three. */
int dev_nvme_map_nvm(const dev_nvme_geom *g, const csq_sqe *p, dev_nvme_cmd *pOut);

/* Identify (admin 06h) of cns for nsid into a 4096-byte buffer. */
void dev_nvme_identify_cmd(uint8_t cns, uint32_t nsid, void *pBuf, dev_nvme_cmd *pOut);

/* The csq status field (device/link/cmd.h) for a passthrough result: res is the
** CQE res / ioctl return: 0 success, > 0 the NVMe status field (SC | SCT<<8 |
** CRD | M | DNR<<14, passed through), < 0 -errno from the kernel (mapped:
** EINVAL/EFAULT invalid field, ENOTTY/EOPNOTSUPP invalid opcode, EINTR/
** ECANCELED/ETIMEDOUT aborted, ENOSPC capacity, others internal; DNR set). */
uint16_t dev_nvme_status_sf(int res);

/* 1 if opcode is not one a plain NVMe device implements (admin: bAdmin=1),
** i.e. one of csq's computational-storage opcodes or a vendor opcode. */
int dev_nvme_is_csq_opcode(int bAdmin, uint8_t opcode);

/* Words for a failed passthrough command: "Read: LBA Out of Range (status
** 0x4080)", or for Invalid Command Opcode on a csq/vendor opcode, that the
** device does not implement csq's computational-storage command set. */
void dev_nvme_describe(int bAdmin, uint8_t opcode, int res, char *z, size_t n);

/* ---- the ring ----------------------------------------------------------- */

typedef struct dev_nvme_ring dev_nvme_ring;

typedef struct dev_nvme_cqe {
  uint64_t userData;
  int res;         /* 0, NVMe status (> 0), -errno */
  uint64_t result; /* completion dwords 0-1 (big_cqe[0]) */
} dev_nvme_cqe;

/* A passthrough ring of nEntries SQEs (IORING_SETUP_SQE128 | CQE32). 0 or
** -errno (-EINVAL/-ENOSYS: the kernel has no 128-byte SQEs: Linux < 5.19). */
int dev_nvme_ring_open(unsigned nEntries, dev_nvme_ring **ppR);
void dev_nvme_ring_close(dev_nvme_ring *r);
/* Free SQEs. */
unsigned dev_nvme_ring_space(dev_nvme_ring *r);
/* Prepare a passthrough command (NVME_URING_CMD_ADMIN if bAdmin, else _IO)
** on fd; 0 or -EAGAIN when no SQE is free. Sent by dev_nvme_ring_submit. */
int dev_nvme_ring_prep(dev_nvme_ring *r, int fd, int bAdmin, const dev_nvme_cmd *pCmd,
                       uint64_t userData);
/* Prepare a plain read(fd, p, n) (used on an eventfd); 0 or -EAGAIN. */
int dev_nvme_ring_prep_read(dev_nvme_ring *r, int fd, void *p, unsigned n, uint64_t userData);
/* Submit everything prepared; number submitted or -errno. */
int dev_nvme_ring_submit(dev_nvme_ring *r);
/* Wait up to timeoutNs (< 0 forever, 0 no wait) for completions and take
** up to n of them. Returns the number taken (>= 1), -ETIMEDOUT, or -errno. */
int dev_nvme_ring_reap(dev_nvme_ring *r, dev_nvme_cqe *a, int n, int64_t timeoutNs);

/* ---- synchronous ioctls --------------------------------------------------- */

/* The namespace id of a namespace device (NVME_IOCTL_ID); > 0 or -errno. */
int dev_nvme_ioctl_nsid(int fd);
/* Admin or I/O passthrough by ioctl (NVME_IOCTL_ADMIN64_CMD / IO64_CMD).
** Admin works on a namespace device too. Returns 0, NVMe status, or -errno;
** *pResult (may be NULL) = dwords 0-1. */
int dev_nvme_ioctl_cmd(int fd, int bAdmin, const dev_nvme_cmd *pCmd, uint64_t *pResult);

/* ---- the backend ---------------------------------------------------------- */

/* Defined in nvme_backend.c: &dev_nvme_backend. backend.h references the
** backend weakly, which does not pull nvme_backend.o out of libcsq.a: a
** program linked with the archive that wants "nvme:" paths calls this once
** (or links with -Wl,--undefined=dev_nvme_backend). */
struct dev_backend_ops;
const struct dev_backend_ops *dev_nvme_backend_get(void);

#endif /* CSQ_DEVICE_NVME_PASSTHRU_H */
