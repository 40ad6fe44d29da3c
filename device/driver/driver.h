/*
** device/driver/driver.h - the host driver: open a device, queue pairs, commands.
**
** Everything above device/ (the store, the vtab, the planner's runtime) talks
** to a device only through this API, and this API talks to the device only
** in csq_sqe / csq_cqe (device/link/cmd.h). Backends behind it:
**   emu   the emulated computational-storage device, in process (default);
**         media is an image file (read with io_uring) or memory.
**   nvme  a real NVMe namespace through io_uring passthrough (/dev/ngXnY);
**         programs run in a host engine when the device has no compute.
**
** Devices are shared: opening the same path twice in one process returns the
** same dev_device (reference counted), so several connections and tables
** share one controller. Each user thread/connection opens its own queue pair.
**
** Errors: functions return 0, a negative errno, or a positive NVMe status
** field (device/link/cmd.h, CSQ_SC_*). dev_errmsg() describes the last failure on
** a queue or device in words a user can act on (the command, the LBA, the
** status name, the path).
**
** Memory: libc malloc; every object is freed by its own close/unref call.
**
** The counters (dev_stats), the open options (dev_options) and the message
** helpers (dev_mprintf) belong to both sides of the link: they live in
** device/link/ (stats.h, options.h, msg.h), which this header includes.
*/
#ifndef CSQ_DEVICE_DRIVER_H
#define CSQ_DEVICE_DRIVER_H

#include <stdint.h>
#include <stddef.h>
#include "device/link/cmd.h"
#include "device/link/msg.h"
#include "device/link/options.h"
#include "device/link/stats.h"

typedef struct dev_device dev_device;
typedef struct dev_queue dev_queue;

/* Open (or share) the device at zPath:
**   ":memory:"          a new private in-memory emulated device (never shared)
**   "nvme:/dev/ngXnY"   a real NVMe namespace (nvme backend)
**   anything else       an image file for the emulated device.
** A file that exists and is not empty is opened as it is (the store checks
** its format); a missing file is created only if p->bCreate. On error returns
** non-zero and sets *pzErr to a malloc'd message (caller frees). */
int dev_open(const char *zPath, const dev_options *p, dev_device **ppDev, char **pzErr);
void dev_ref(dev_device *pDev);
void dev_unref(dev_device *pDev); /* the last reference closes it */

const char *dev_path(const dev_device *pDev);
const char *dev_backend_name(const dev_device *pDev); /* "emu" or "nvme" */
/* Identify data decoded at open: compute capabilities (magic 0 if the device
** has no csq compute) and NVM namespace size. */
const csq_id_vs *dev_caps(const dev_device *pDev);
uint64_t dev_nvm_blocks(const dev_device *pDev);
/* 1 when the NVM namespace is write protected (Identify Namespace NSATTR
** bit 0): for the emulated device, an image file this process may only
** read. Writes to it fail with CSQ_SC_WRITE_PROTECTED. */
int dev_read_only(const dev_device *pDev);
/* Device-wide counters (a snapshot). */
void dev_device_stats(dev_device *pDev, dev_stats *pOut);

/* Runtime settings of an open device. They act on the device object, which
** every connection and table of this process that opened the same path
** shares (see the banner), so they affect all of them.
**
** dev_set_fault replaces the device's fault-injection rules (device/emu/fault.h;
** NULL or "" removes them) while commands may be in flight on other queues:
** each command is checked against either the old rules or the new ones.
** Only the emu backend injects faults: the nvme backend answers -ENOTSUP.
** A bad spec changes nothing and returns -EINVAL. On failure *pzErr (may be
** NULL) receives a malloc'd message. On success *pzPrev (may be NULL)
** receives the previous spec, malloc'd, or NULL if there was none. */
int dev_set_fault(dev_device *pDev, const char *zSpec, char **pzPrev, char **pzErr);
/* Set the command timeout (dev_options.timeoutMs) to ms (> 0); commands
** submitted from now on use it. Returns the previous timeout, or -EINVAL. */
int dev_set_timeout(dev_device *pDev, int ms);
/* The command timeout in ms. */
int dev_timeout(const dev_device *pDev);

/* Queue pairs. One per connection / thread; a queue is not thread safe. */
int dev_queue_open(dev_device *pDev, dev_queue **ppQ);
void dev_queue_close(dev_queue *pQ);
dev_device *dev_queue_device(dev_queue *pQ);
dev_stats *dev_queue_stats(dev_queue *pQ); /* live counters of this queue; caller may reset */
const char *dev_errmsg(dev_queue *pQ);     /* last error on this queue, never NULL */
/* The failure a completion reports, described (the command, the device, the
** status and the device's detail) even if later failures on the queue have
** replaced dev_errmsg; valid until the queue's next failure. */
const char *dev_cqe_errmsg(dev_queue *pQ, const csq_cqe *pCqe);

/* Asynchronous: dev_submit assigns pSqe->cid and queues the command; returns
** 0, or -EAGAIN when the queue is full (reap first). dev_reap waits up to
** timeoutMs (-1 = the device timeout) for any completion of this queue;
** returns 0 with *pCqe filled, or -ETIMEDOUT. Completions may come back in any
** order; match them by cid. */
int dev_submit(dev_queue *pQ, csq_sqe *pSqe);
int dev_reap(dev_queue *pQ, csq_cqe *pCqe, int timeoutMs);

/* Synchronous: submit one command and wait for its own completion. Returns 0,
** the status field (> 0), or -errno; pCqe (may be NULL) receives the CQE. */
int dev_exec(dev_queue *pQ, csq_sqe *pSqe, csq_cqe *pCqe);

/* Convenience wrappers over dev_exec (same returns). */
int dev_nvm_read(dev_queue *pQ, uint64_t slba, uint32_t nlb, void *pBuf);
int dev_nvm_write(dev_queue *pQ, uint64_t slba, uint32_t nlb, const void *pBuf);
int dev_nvm_flush(dev_queue *pQ);
int dev_resv_acquire(dev_queue *pQ, int busyTimeoutMs); /* retries conflicts until the timeout */
int dev_resv_release(dev_queue *pQ);
int dev_slm_read(dev_queue *pQ, uint64_t addr, void *pBuf, uint32_t n);
int dev_slm_write(dev_queue *pQ, uint64_t addr, const void *pBuf, uint32_t n);
/* Memory Copy of LBA ranges into SLM at addr (back to back). */
int dev_slm_copy(dev_queue *pQ, uint64_t addr, const csq_lba_range *aRange, int nRange);

/* SLM is allocated by the host (its addresses are the host's to choose):
** a first-fit allocator per device, 4 KiB granularity. */
int dev_slm_alloc(dev_device *pDev, uint64_t nBytes, uint64_t *pAddr);
void dev_slm_free(dev_device *pDev, uint64_t addr);

#endif /* CSQ_DEVICE_DRIVER_H */
