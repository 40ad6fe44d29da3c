/*
** device/link/backend.h - the interface between the host driver and a backend.
**
** driver.c (dev_open, queues, dev_exec, timeouts, error messages, the SLM
** allocator) is backend-neutral. Everything that touches a particular kind
** of device sits behind one dev_backend_ops table:
**   emu   the emulated CSD in process (device/emu/), dev_emu_backend
**   nvme  a real namespace through io_uring passthrough (device/nvme/),
**         dev_nvme_backend; referenced weakly, so the tree links without it.
**   tcp   a device across an NVMe/TCP link ("nvme-tcp://HOST:PORT/NQN",
**         device/initiator/), dev_tcp_backend.
**
** The contract, per call:
**   xOpen       open zPath (the "nvme:" prefix already stripped for nvme);
**               0 or non-zero with *pzErr = malloc'd message (caller frees).
**   xClose      every queue is closed before; frees the backend.
**   xIdentify   fill pBuf (4096 bytes) with Identify data: cns 1 controller
**               (struct nvme_id_ctrl, a csq_id_vs at the start of vs[]),
**               cns 0 namespace nsid (struct nvme_id_ns). 0 or status/-errno.
**   xQueueOpen  a queue pair able to hold nDepth commands in flight. pStats
**               is the driver's counter block for this queue: the backend adds
**               to it (atomically, see dev_stats_account) as commands
**               complete, and keeps it until xQueueClose.
**   xQueueClose waits for commands still inside the device, then frees.
**               Commands the device dropped (fault "timeout") are forgotten.
**   xSubmit     queue one SQE (cid already set by the driver); 0 or -EAGAIN
**               when the submission ring is full. Never blocks.
**   xReap       one CQE of this queue, any order; waits up to timeoutNs
**               (0 = poll, spin briefly then sleep); 0 or -ETIMEDOUT.
**               A queue is used by one host thread at a time: xSubmit and
**               xReap are never called concurrently on one queue.
**   xStats      device-wide counters (snapshot).
**   xDetail     optional: device-side detail of the failed command cid that
**               completed with status sf (e.g. the verifier's message), copied
**               to zOut; "" if the device does not remember it.
**   xSetFault   optional: replace the device's fault-injection rules with
**               zSpec (device/emu/fault.h; NULL or "" removes them), as
**               dev_set_fault (driver.h) documents; NULL for a backend that
**               injects no faults (the driver answers -ENOTSUP).
**
** Admin and I/O commands travel on the same queue pair: csq's admin opcodes
** (06h, 85h, 88h, 89h) are disjoint from its I/O opcodes, so a backend routes
** by dev_sqe_is_admin(). A backend that talks to real hardware sends admin
** commands to the controller's admin queue.
*/
#ifndef CSQ_DEVICE_BACKEND_H
#define CSQ_DEVICE_BACKEND_H

#include <stdint.h>
#include "device/link/cmd.h"
#include "device/link/options.h"
#include "device/link/stats.h"

typedef struct dev_backend dev_backend; /* defined by each backend */
typedef struct dev_bqueue dev_bqueue;   /* defined by each backend */

typedef struct dev_backend_ops {
  const char *zName; /* "emu", "nvme": what dev_backend_name() reports */
  int (*xOpen)(const char *zPath, const dev_options *pOpt, dev_backend **ppB, char **pzErr);
  void (*xClose)(dev_backend *pB);
  int (*xIdentify)(dev_backend *pB, uint8_t cns, uint32_t nsid, void *pBuf);
  int (*xQueueOpen)(dev_backend *pB, uint32_t nDepth, dev_stats *pStats, dev_bqueue **ppQ);
  void (*xQueueClose)(dev_bqueue *pQ);
  int (*xSubmit)(dev_bqueue *pQ, const csq_sqe *pSqe);
  int (*xReap)(dev_bqueue *pQ, csq_cqe *pCqe, int64_t timeoutNs);
  void (*xStats)(dev_backend *pB, dev_stats *pOut);
  void (*xDetail)(dev_bqueue *pQ, uint16_t cid, uint16_t sf, char *zOut, size_t nOut); /* or NULL */
  int (*xSetFault)(dev_backend *pB, const char *zSpec, char **pzPrev, char **pzErr);   /* or NULL */
} dev_backend_ops;

extern const dev_backend_ops dev_emu_backend;
/* Defined by device/nvme/ when it exists; NULL address otherwise. */
extern const dev_backend_ops dev_nvme_backend __attribute__((weak));
extern const dev_backend_ops dev_tcp_backend;

#define DEV_MAX_QDEPTH 1024u /* entries per queue pair, upper bound */

/* 1 if the SQE is an admin command (see the banner). */
static inline int dev_sqe_is_admin(const csq_sqe *p) {
  return p->opcode == CSQ_ADM_IDENTIFY || p->opcode == CSQ_ADM_LOAD_PROGRAM ||
         p->opcode == CSQ_ADM_PROGRAM_ACTIVATION || p->opcode == CSQ_ADM_MRS_MGMT;
}

/* Row of dev_stats.cmd_by_opcode for a command: 0 admin, 2 SLM, 1 others. */
static inline int dev_sqe_stats_row(const csq_sqe *p) {
  if (dev_sqe_is_admin(p)) return 0;
  return p->nsid == CSQ_NSID_SLM ? 2 : 1;
}

/* Bytes a completed command moved, for dev_stats_account. */
typedef struct dev_io_acct {
  uint64_t toHost, fromHost, mediaRead, mediaWritten;
} dev_io_acct;

/* Count one completed command with status field sf into *p: commands,
** admin_commands, errors, cmd_by_opcode and the byte counters of pAcct (may
** be NULL). Atomic adds, so device threads may account concurrently while the
** host reads. Implemented in stats.c; usable by every backend. */
void dev_stats_account(dev_stats *p, const csq_sqe *pSqe, uint16_t sf, const dev_io_acct *pAcct);

#endif /* CSQ_DEVICE_BACKEND_H */
