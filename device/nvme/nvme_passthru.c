/*
** device/nvme/nvme_passthru.c - NVMe passthrough (nvme_passthru.h): csq -> NVMe
** command encodings, status decoding, the io_uring passthrough ring
** (IORING_OP_URING_CMD with 128-byte SQEs and 32-byte CQEs) and the ioctl
** fallbacks.
**
** The only file of csq that includes <linux/nvme_ioctl.h>; it must never
** include <libnvme.h> (libnvme 1.3's nvme/ioctl.h shares the kernel header's
** include guard and lacks NVME_URING_CMD_ADMIN).
*/
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <linux/nvme_ioctl.h>
#include <liburing.h>

#include "device/nvme/nvme_passthru.h"

/* dev_nvme_cmd is copied byte for byte into sqe->cmd: same layout. */
_Static_assert(sizeof(dev_nvme_cmd) == sizeof(struct nvme_uring_cmd), "nvme_uring_cmd size");
_Static_assert(offsetof(dev_nvme_cmd, addr) == offsetof(struct nvme_uring_cmd, addr), "addr");
_Static_assert(offsetof(dev_nvme_cmd, data_len) == offsetof(struct nvme_uring_cmd, data_len),
               "data_len");
_Static_assert(offsetof(dev_nvme_cmd, cdw10) == offsetof(struct nvme_uring_cmd, cdw10), "cdw10");
_Static_assert(offsetof(dev_nvme_cmd, timeout_ms) == offsetof(struct nvme_uring_cmd, timeout_ms),
               "timeout_ms");
_Static_assert(offsetof(struct nvme_passthru_cmd64, result) == sizeof(struct nvme_uring_cmd),
               "nvme_passthru_cmd64 = nvme_uring_cmd + result");

/* ---- encodings --------------------------------------------------------- */

int dev_nvme_lba_shift(uint32_t lbaSize, uint32_t *pShift) {
  uint32_t s;
  for (s = 9; s <= 12; s++) {
    if (lbaSize == (1u << s)) {
      *pShift = s;
      return 0;
    }
  }
  return -EINVAL;
}

uint32_t dev_nvme_max_xfer(uint8_t mdts, uint32_t pageSize) {
  uint64_t n = DEV_NVME_MAX_XFER;
  if (pageSize < 4096) pageSize = 4096;
  if (mdts != 0 && mdts < 32 && ((uint64_t)pageSize << mdts) < n) n = (uint64_t)pageSize << mdts;
  n &= ~(uint64_t)4095;
  return n < 4096 ? 4096u : (uint32_t)n;
}

static uint32_t blocks_per_part(const dev_nvme_geom *g) {
  uint32_t b = g->maxXfer / CSQ_LBA_SIZE;
  return b ? b : 1;
}

uint32_t dev_nvme_rw_parts(const dev_nvme_geom *g, uint32_t nlb) {
  uint32_t b = blocks_per_part(g);
  return nlb == 0 ? 0 : (nlb + b - 1) / b;
}

void dev_nvme_rw_part(const dev_nvme_geom *g, uint8_t op, uint64_t slba, uint32_t nlb,
                      uint64_t addr, uint32_t iPart, dev_nvme_cmd *pOut) {
  uint32_t b = blocks_per_part(g);
  uint32_t k = 12 - g->lbaShift; /* device LBAs per csq block: 1 << k */
  uint64_t first = slba + (uint64_t)iPart * b;
  uint32_t n = nlb - iPart * b;
  uint64_t dlba;
  if (n > b) n = b;
  dlba = first << k;
  memset(pOut, 0, sizeof(*pOut));
  pOut->opcode = op;
  pOut->nsid = g->nsid;
  pOut->addr = addr + (uint64_t)iPart * b * CSQ_LBA_SIZE;
  pOut->data_len = n * CSQ_LBA_SIZE;
  pOut->cdw10 = (uint32_t)dlba;
  pOut->cdw11 = (uint32_t)(dlba >> 32);
  pOut->cdw12 = (n << k) - 1; /* NLB, 0-based, in device LBAs */
}

int dev_nvme_map_nvm(const dev_nvme_geom *g, const csq_sqe *p, dev_nvme_cmd *pOut) {
  if (p->nsid != CSQ_NSID_NVM) return -EINVAL;
  if (p->opcode == CSQ_NVM_READ || p->opcode == CSQ_NVM_WRITE) {
    uint64_t slba = (uint64_t)p->cdw10 | ((uint64_t)p->cdw11 << 32);
    uint32_t nlb = (p->cdw12 & 0xFFFF) + 1;
    dev_nvme_rw_part(g, p->opcode == CSQ_NVM_READ ? DEV_NVME_OP_READ : DEV_NVME_OP_WRITE, slba, nlb,
                     p->prp1, 0, pOut);
    return 0;
  }
  if (p->opcode == CSQ_NVM_FLUSH) {
    memset(pOut, 0, sizeof(*pOut));
    pOut->opcode = DEV_NVME_OP_FLUSH;
    pOut->nsid = g->nsid;
    return 0;
  }
  return -EINVAL;
}

void dev_nvme_identify_cmd(uint8_t cns, uint32_t nsid, void *pBuf, dev_nvme_cmd *pOut) {
  memset(pOut, 0, sizeof(*pOut));
  pOut->opcode = DEV_NVME_ADM_IDENTIFY;
  pOut->nsid = nsid;
  pOut->addr = (uint64_t)(uintptr_t)pBuf;
  pOut->data_len = 4096;
  pOut->cdw10 = cns;
}

uint16_t dev_nvme_status_sf(int res) {
  if (res == 0) return CSQ_SC_SUCCESS;
  if (res > 0) return (uint16_t)(res & 0x7FFF);
  switch (-res) {
  case EINVAL:
  case EFAULT:
    return CSQ_SC_INVALID_FIELD | CSQ_DNR;
  case ENOTTY:
  case EOPNOTSUPP:
    return CSQ_SC_INVALID_OPCODE | CSQ_DNR;
  case EINTR:
  case ECANCELED:
  case ETIMEDOUT:
    return CSQ_SC_ABORTED;
  case ENOSPC:
    return CSQ_SC_CAPACITY | CSQ_DNR;
  default:
    return CSQ_SC_INTERNAL | CSQ_DNR;
  }
}

int dev_nvme_is_csq_opcode(int bAdmin, uint8_t opcode) {
  if (opcode >= 0xC0) return 1; /* vendor specific range, admin and I/O */
  if (bAdmin)
    return opcode == CSQ_ADM_LOAD_PROGRAM || opcode == CSQ_ADM_PROGRAM_ACTIVATION ||
           opcode == CSQ_ADM_MRS_MGMT;
  return 0; /* csq's CP/SLM I/O opcodes reuse low numbers: only the nsid tells */
}

void dev_nvme_describe(int bAdmin, uint8_t opcode, int res, char *z, size_t n) {
  uint16_t sf = dev_nvme_status_sf(res);
  const char *zOp = bAdmin ? (opcode == DEV_NVME_ADM_IDENTIFY ? "Identify" : "admin command")
                    : opcode == DEV_NVME_OP_READ  ? "Read"
                    : opcode == DEV_NVME_OP_WRITE ? "Write"
                    : opcode == DEV_NVME_OP_FLUSH ? "Flush"
                                                  : "I/O command";
  if (res > 0 && (sf & 0x7FF) == CSQ_SC_INVALID_OPCODE && dev_nvme_is_csq_opcode(bAdmin, opcode)) {
    snprintf(z, n,
             "the device does not implement csq's computational-storage command set: "
             "%s opcode 0x%02x answered Invalid Command Opcode (status 0x%04x); "
             "programs must run on the host engine",
             bAdmin ? "admin" : "I/O", opcode, (unsigned)res);
  } else if (res > 0) {
    snprintf(z, n, "NVMe %s (opcode 0x%02x): %s (status 0x%04x)", zOp, opcode, csq_status_name(sf),
             (unsigned)res);
  } else if (res == -ENOTTY && bAdmin) {
    snprintf(z, n,
             "NVMe %s (opcode 0x%02x): admin passthrough is refused on this device node "
             "(use the controller, /dev/nvmeX)",
             zOp, opcode);
  } else if (res == -EACCES || res == -EPERM) {
    snprintf(z, n,
             "NVMe %s (opcode 0x%02x): %s (passthrough needs read-write access to the "
             "device node; admin commands need CAP_SYS_ADMIN)",
             zOp, opcode, strerror(-res));
  } else {
    snprintf(z, n, "NVMe %s (opcode 0x%02x): %s", zOp, opcode, strerror(-res));
  }
}

/* ---- the ring ------------------------------------------------------------ */

struct dev_nvme_ring {
  struct io_uring ring;
};

int dev_nvme_ring_open(unsigned nEntries, dev_nvme_ring **ppR) {
  struct io_uring_params par;
  dev_nvme_ring *r = calloc(1, sizeof(*r));
  int rc;
  *ppR = NULL;
  if (!r) return -ENOMEM;
  memset(&par, 0, sizeof(par));
  par.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQE32;
  rc = io_uring_queue_init_params(nEntries, &r->ring, &par);
  if (rc) {
    free(r);
    return rc;
  }
  *ppR = r;
  return 0;
}

void dev_nvme_ring_close(dev_nvme_ring *r) {
  if (!r) return;
  io_uring_queue_exit(&r->ring);
  free(r);
}

unsigned dev_nvme_ring_space(dev_nvme_ring *r) {
  return io_uring_sq_space_left(&r->ring);
}

int dev_nvme_ring_prep(dev_nvme_ring *r, int fd, int bAdmin, const dev_nvme_cmd *pCmd,
                       uint64_t userData) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
  if (!sqe) return -EAGAIN;
  /* A 128-byte SQE: the first 64 bytes are the io_uring header, the command
  ** (80 bytes of room) follows at sqe->cmd. liburing 2.3 has no helper. */
  memset(sqe, 0, 128);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd;
  sqe->cmd_op = bAdmin ? NVME_URING_CMD_ADMIN : NVME_URING_CMD_IO;
  memcpy(sqe->cmd, pCmd, sizeof(*pCmd));
  io_uring_sqe_set_data64(sqe, userData);
  return 0;
}

int dev_nvme_ring_prep_read(dev_nvme_ring *r, int fd, void *p, unsigned n, uint64_t userData) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
  if (!sqe) return -EAGAIN;
  memset(sqe, 0, 128);
  io_uring_prep_read(sqe, fd, p, n, 0);
  io_uring_sqe_set_data64(sqe, userData);
  return 0;
}

int dev_nvme_ring_submit(dev_nvme_ring *r) {
  int rc;
  do {
    rc = io_uring_submit(&r->ring);
  } while (rc == -EINTR);
  return rc;
}

int dev_nvme_ring_reap(dev_nvme_ring *r, dev_nvme_cqe *a, int n, int64_t timeoutNs) {
  struct io_uring_cqe *cqe = NULL;
  int rc, k = 0;
  if (io_uring_peek_cqe(&r->ring, &cqe) != 0) {
    if (timeoutNs == 0) return -ETIMEDOUT;
    if (timeoutNs < 0) {
      rc = io_uring_wait_cqe(&r->ring, &cqe);
    } else {
      struct __kernel_timespec ts;
      ts.tv_sec = timeoutNs / 1000000000;
      ts.tv_nsec = timeoutNs % 1000000000;
      rc = io_uring_wait_cqe_timeout(&r->ring, &cqe, &ts);
    }
    if (rc == -ETIME || rc == -EINTR) return -ETIMEDOUT;
    if (rc) return rc;
  }
  while (k < n && io_uring_peek_cqe(&r->ring, &cqe) == 0) {
    a[k].userData = io_uring_cqe_get_data64(cqe);
    a[k].res = cqe->res;
    a[k].result = cqe->big_cqe[0];
    io_uring_cqe_seen(&r->ring, cqe);
    k++;
  }
  return k ? k : -ETIMEDOUT;
}

/* ---- ioctls ---------------------------------------------------------------- */

int dev_nvme_ioctl_nsid(int fd) {
  int rc = ioctl(fd, NVME_IOCTL_ID);
  return rc < 0 ? -errno : rc;
}

int dev_nvme_ioctl_cmd(int fd, int bAdmin, const dev_nvme_cmd *pCmd, uint64_t *pResult) {
  struct nvme_passthru_cmd64 c;
  int rc;
  memset(&c, 0, sizeof(c));
  memcpy(&c, pCmd, sizeof(*pCmd));
  do {
    rc = ioctl(fd, bAdmin ? NVME_IOCTL_ADMIN64_CMD : NVME_IOCTL_IO64_CMD, &c);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) return -errno;
  if (pResult) *pResult = c.result;
  return rc;
}
