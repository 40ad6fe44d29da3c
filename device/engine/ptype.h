/*
** device/engine/ptype.h - program types of the emulated device: the registration
** table through which Load Program verifies and Execute Program runs.
**
** A program type is a byte (Load Program CDW10[31:24], CSQ_PTYPE_*). Its
** implementation registers a dev_ptype once per process, before the first
** Load of that type (unit tests register toy types); csq's own executor,
** CSQ_PTYPE_CSQ (device/engine/exec_*.c), is registered by this table itself on its
** first lookup. The emulated device:
**   - on the last chunk of a Load, calls xVerify(program bytes). Non-zero
**     means refused: the slot stays empty and the Load completes with
**     CSQ_SC_INVALID_PROGRAM (zErr becomes the queue's device-side detail,
**     appended to dev_errmsg). On success *ppCompiled is the type's private
**     compiled form, owned by the slot until xFree.
**   - on Execute, calls xRun(pCompiled, ctx, &ret) on a compute engine
**     thread. Several engines may run the same pCompiled at once: xRun must
**     treat it as read-only. xRun returns 0 or a CSQ status field (normally
**     CSQ_SC_PROGRAM_FAULT); *pRet goes to DW0-DW1 of the completion in both
**     cases (for a fault: the reason).
**   - xFree when the slot is unloaded/replaced or the device closes.
** A type whose byte is not registered cannot be loaded (INVALID_PROGRAM).
*/
#ifndef CSQ_DEVICE_PTYPE_H
#define CSQ_DEVICE_PTYPE_H

#include <stddef.h>
#include <stdint.h>
#include "device/link/cmd.h"
#include "device/link/stats.h"

typedef struct dev_exec_ctx dev_exec_ctx;

/* What a running program may touch. Everything is bounded: SLM is
** [pSlm, pSlm+nSlm), and the command's ranges were checked against it (nsid
** SLM, 4-byte aligned, inside SLM) before xRun is called. */
struct dev_exec_ctx {
  uint8_t *pSlm;            /* base of the SLM namespace */
  uint64_t nSlm;            /* its size in bytes */
  const csq_mrange *aRange; /* memory ranges of the command (MRS or inline) */
  int nRange;
  uint64_t aParam[2]; /* program parameters 0 and 1 (CDW12-13, CDW14-15) */
  uint16_t pind;      /* program slot */
  int iEngine;        /* which compute engine runs this (0-based) */
  /* Counters of this execution, zeroed before xRun: the program adds
  ** rows_scanned, rows_returned, row_groups_scanned/skipped, ...; the device
  ** adds them to the queue's and the device's totals afterwards, together
  ** with programs_executed and engine_ns. */
  dev_stats *pStats;
  /* Read NVM LBA ranges back to back into pDst (normally inside SLM), with
  ** several reads in flight; counts media_bytes_read. Returns 0 or a CSQ
  ** status field (LBA_RANGE, READ_ERROR). */
  int (*xReadLba)(dev_exec_ctx *ctx, const csq_lba_range *a, int n, void *pDst);
  void *pDevPriv; /* the device's, for xReadLba */
  /* Tags of chunks this device has checked in full (see device/engine/exec_run.c):
  ** nChecked slots (a power of 2), direct-mapped, shared by every engine and
  ** accessed with relaxed atomics only. NULL: the device keeps none. */
  uint64_t *aChecked;
  uint32_t nChecked;
};

typedef struct dev_ptype {
  uint8_t type; /* CSQ_PTYPE_* */
  const char *zName;
  int (*xVerify)(const uint8_t *p, size_t n, void **ppCompiled, char *zErr, size_t nErr);
  int (*xRun)(void *pCompiled, dev_exec_ctx *ctx, uint64_t *pRet);
  void (*xFree)(void *pCompiled);
} dev_ptype;

/* Register a program type; p must stay valid for the life of the process.
** Returns 0 (also when the same p is registered again), -EINVAL for a
** malformed entry, -EEXIST if another dev_ptype already holds that byte. */
int dev_ptype_register(const dev_ptype *p);
/* The registered type for a byte, or NULL. */
const dev_ptype *dev_ptype_find(uint8_t type);

/* csq's executor (device/engine/exec_run.c), CSQ_PTYPE_CSQ: dev_ptype_find registers it
** on the first lookup of that type, the one place it is registered. */
extern const dev_ptype dev_ptype_csq;

#endif /* CSQ_DEVICE_PTYPE_H */
