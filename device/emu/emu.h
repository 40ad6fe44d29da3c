/*
** device/emu/emu.h - internals of the emulated computational-storage device,
** shared by emu.c (device object, controller thread, compute engines,
** queues), emu_admin.c (Identify, Load Program, Program Activation, MRS
** Management) and emu_io.c (NVM, reservation, SLM and Execute commands).
** Not for use outside device/emu/: the driver sees only dev_emu_backend.
**
** Threads: one controller thread takes SQEs from every queue pair. It runs
** admin commands and I/O inline (a synchronous round trip costs one thread
** hop each way; NVM Reads go in flight on its io_uring) and hands Memory
** Copy, Flush, Execute and delayed completions to the compute engines, a
** pool of threads each with its own io_uring; when large transfers queue up
** behind one another, an idle engine helps drain the queues the way the
** controller does (emu.c's banner has the details). Completions therefore
** come back out of order.
**
** The threads start at the first command that needs them (a program run,
** a large read, an injected delay); until then each command runs on the
** host thread that submits it. A process that only writes small batches
** (the sqlite3 shell's .import) then stays single-threaded, and glibc's
** stdio keeps skipping its per-character locks.
*/
#ifndef CSQ_DEVICE_EMU_H
#define CSQ_DEVICE_EMU_H

#include <pthread.h>
#include <stdint.h>

#include "device/link/backend.h"
#include "device/emu/fault.h"
#include "device/emu/media.h"
#include "device/engine/ptype.h"
#include "device/link/queue.h"
#include "device/engine/cp_jobs.h"
#include "device/engine/cp_slots.h"
#include "device/link/errlog.h"

/* Compute limits reported by Identify: the shared program-slot module's. */
#define EMU_MAX_PROGRAMS      DEV_CP_MAX_PROGRAMS
#define EMU_MAX_ACTIVE        DEV_CP_MAX_ACTIVE
#define EMU_MAX_PROG_BYTES    DEV_CP_MAX_PROG_BYTES
#define EMU_LOAD_GRAN         DEV_CP_LOAD_GRAN
#define EMU_MAX_MRS           DEV_CP_MAX_MRS
#define EMU_MAX_RANGES        DEV_CP_MAX_RANGES
#define EMU_MAX_QUEUES        1024
#define EMU_INLINE_BYTES      (128u * 1024) /* larger transfers go to an engine */
#define EMU_QUICK_COPY_BLOCKS 4             /* Memory Copies up to this many blocks run inline */

typedef struct emu_job emu_job;
struct emu_job {
  dev_cp_job link; /* must be first: the engines' job list (cp_jobs.h) */
  dev_bqueue *q;
  csq_sqe sqe;
  int bHit;
  dev_fault_hit hit;
};

typedef struct emu_engine {
  dev_backend *pDev;
  int iEngine;
  dev_mio *pMio;
  pthread_t thread;
  int bStarted;
} emu_engine;

struct dev_backend {
  char *zPath;
  dev_media *pMedia;
  dev_fault *pFault;
  dev_cp_slm slm;
  uint64_t nBlocks;
  uint32_t nMaxDepth;
  dev_stats stats; /* device-wide, atomic adds */

  /* lazy start (emu.c's emu_submit): startMu serialises the commands run
  ** on host threads before the start, and the start itself */
  pthread_mutex_t startMu;
  int bThreads; /* atomic: controller and engines are running */
  int rcStart;  /* a failed start (negative errno), sticky */

  /* controller */
  pthread_t ctrlThread;
  int bCtrlStarted;
  dev_mio *pCtrlMio;
  dev_bell sqBell; /* hosts ring it on submit */
  int bStop;
  pthread_mutex_t qMutex; /* held by the controller during a pass over apQ */
  dev_bqueue *apQ[EMU_MAX_QUEUES];
  int nQ; /* high-water mark of apQ */

  /* compute engines */
  int nEngine;
  emu_engine *aEngine;
  dev_cp_jobs jobs;

  /* programs and memory range sets */
  dev_cp cp;

  /* reservations: one holder queue per device, plus flock() across processes */
  pthread_mutex_t resvMutex;
  dev_bqueue *pResvHolder;
};

struct dev_bqueue {
  dev_qp qp;
  dev_backend *pDev;
  dev_stats *pStats;
  int iSlot;         /* index in pDev->apQ */
  int nInflight;     /* taken from the SQ, not yet completed (atomic) */
  dev_errlog errLog; /* recent failures' detail (xDetail) */
};

/* Complete a command: count it (queue and device), log a failure's detail
** text (zDetail may be NULL), post the CQE. */
void emu_complete(dev_bqueue *q, const csq_sqe *pSqe, uint16_t sf, uint64_t result,
                  const dev_io_acct *pAcct, const char *zDetail);

/* emu_admin.c: run one admin command (thread safe); returns the status, *pResult = DW0-1. */
uint16_t emu_admin(dev_bqueue *q, const csq_sqe *pSqe, uint64_t *pResult, dev_io_acct *pAcct,
                   char *zDetail, size_t nDetail);
int emu_identify(dev_backend *d, uint8_t cns, uint32_t nsid, void *pBuf);

/* emu_io.c: run one I/O command (any device thread) and complete it.
** pMio is the calling thread's media context; iEngine -1 on the controller. */
void emu_io(dev_bqueue *q, const csq_sqe *pSqe, dev_mio *pMio, const dev_fault_hit *pHit,
            int iEngine);
/* 1 if the command is cheap enough to run on the controller thread. */
int emu_io_is_quick(const csq_sqe *pSqe);
/* Drop q's reservation if it holds one (queue close). */
void emu_resv_drop(dev_bqueue *q);

#endif /* CSQ_DEVICE_EMU_H */
