/*
** device/engine/cp_slots.h - the Computational Programs namespace state a device
** keeps: program slots and memory range sets, and the admin commands that
** manage them (Load Program, Program Activation, MRS Management) plus the
** checks of an Execute Program. One implementation serves both the emulated
** device (device/emu/) and the nvme backend's host engine
** (device/nvme/nvme_backend.c), so that a program behaves the same on both.
**
** Thread safety: every call takes cp->mu; a program's compiled form stays
** valid while an Execute holds it (nRunning), since a slot in use cannot be
** unloaded.
*/
#ifndef CSQ_DEVICE_CP_SLOTS_H
#define CSQ_DEVICE_CP_SLOTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "device/link/backend.h"
#include "device/link/cmd.h"
#include "device/engine/cp_slm.h"
#include "device/engine/ptype.h"
#include "device/format/program.h"

#define DEV_CP_MAX_PROGRAMS   64
#define DEV_CP_MAX_ACTIVE     32
#define DEV_CP_MAX_PROG_BYTES CSQ_PROG_MAX_BYTES /* a csq program with its join filters */
#define DEV_CP_LOAD_GRAN      4
#define DEV_CP_MAX_MRS        64
#define DEV_CP_MAX_RANGES     256
#define DEV_CP_CHECKED        4096 /* memo of checked chunks: 32 KiB per device */

typedef struct dev_cp_slot {
  const dev_ptype *pType; /* NULL: empty */
  void *pCompiled;
  uint64_t id; /* 64-bit program identifier */
  uint32_t nByte;
  int bActive;
  int nRunning; /* Executes in progress */
  /* a load in progress (chunks arrive in order) */
  uint8_t *aLoad;
  uint32_t nLoadTotal, nLoadHave;
  uint64_t loadId;
  uint8_t loadType;
} dev_cp_slot;

typedef struct dev_cp_mrs {
  int bUsed;
  int nRange;
  csq_mrange *aRange;
} dev_cp_mrs;

typedef struct dev_cp {
  pthread_mutex_t mu;
  dev_cp_slot aSlot[DEV_CP_MAX_PROGRAMS];
  int nActive;
  dev_cp_mrs aMrs[DEV_CP_MAX_MRS];
  uint64_t nSlm;      /* SLM size, for range checks */
  const char *zWho;   /* "this device", "the host engine": for messages */
  uint64_t *aChecked; /* DEV_CP_CHECKED tags of fully checked chunks (dev_exec_ctx) */
} dev_cp;

/* An Execute that passed its checks: what to run, on which ranges. */
typedef struct dev_cp_run {
  uint16_t pind;
  const dev_ptype *pType;
  void *pCompiled;
  csq_mrange *aRange; /* private copy (an MRS may be deleted meanwhile) */
  int nRange;
  uint64_t *aChecked; /* the device's memo of checked chunks, or NULL */
} dev_cp_run;

void dev_cp_init(dev_cp *cp, uint64_t nSlm, const char *zWho);
void dev_cp_free(dev_cp *cp);

/* Load Program, Program Activation or MRS Management. Returns the status
** field; *pResult = DW0-1; bytes taken from the host go to pAcct->fromHost;
** zDetail explains a failure. */
uint16_t dev_cp_admin(dev_cp *cp, const csq_sqe *p, uint64_t *pResult, dev_io_acct *pAcct,
                      char *zDetail, size_t nDetail);

/* Check an Execute Program and take the program: on success (0) pRun is
** filled and the slot counts one more running execution; the caller runs it
** and then calls dev_cp_exec_end. Otherwise returns the status to complete
** with. Inline ranges count in pAcct->fromHost. */
uint16_t dev_cp_exec_begin(dev_cp *cp, const csq_sqe *p, dev_cp_run *pRun, dev_io_acct *pAcct,
                           char *zDetail, size_t nDetail);
void dev_cp_exec_end(dev_cp *cp, dev_cp_run *pRun);

/* Run a taken program on the calling engine thread: builds the execution
** context over SLM [pSlm, pSlm+nSlm) with the command's parameters, times
** it and counts programs_executed and engine_ns into *pLocal (zeroed
** first). Returns 0 or the status field (a program fault), *pRet = the
** program's return value. */
uint16_t dev_cp_run_program(const dev_cp_run *pRun, const csq_sqe *p, uint8_t *pSlm, uint64_t nSlm,
                            int iEngine,
                            int (*xReadLba)(dev_exec_ctx *, const csq_lba_range *, int, void *),
                            void *pDevPriv, dev_stats *pLocal, uint64_t *pRet, char *zDetail,
                            size_t nDetail);

#endif /* CSQ_DEVICE_CP_SLOTS_H */
