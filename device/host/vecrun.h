/*
** device/host/vecrun.h - csq's host engine over rows the host already holds
** as column vectors (the joined rows of a host hash join): the same verified
** program and executor as a device runs (device/engine, through the program
** type table), over chunks encoded from the vectors, so that a grouped
** program computes partial aggregates with the device's rules whatever
** produced the rows.
*/
#ifndef CSQ_DEVICE_VECRUN_H
#define CSQ_DEVICE_VECRUN_H

#include <stddef.h>
#include <stdint.h>
#include "device/engine/ptype.h"
#include "device/format/vec.h"

/* Run pCompiled (pType's xVerify made it) once over the host buffer
** pBuf[0..nBuf), laid out as a device slot with the ranges aMr[0..3) into
** it, parameters id and param1 (program.h, "RUNNING A PROGRAM"), as a
** device's engine would: 0 or pType's status, *pRet the completion's
** DW0-DW1. *pStats is zeroed and receives the execution's counters,
** engine_ns and programs_executed too. */
int dev_host_xrun(const dev_ptype *pType, void *pCompiled, uint8_t *pBuf, uint64_t nBuf,
                  const csq_mrange *aMr, uint64_t id, uint64_t param1, dev_stats *pStats,
                  uint64_t *pRet);

/* Called with each result's rows, aPart[0..csq_prog.nResCol) (the engine's
** vectors, reused for the next result). Non-zero stops the run and is
** returned. */
typedef int (*dev_vecrun_fn)(void *pArg, const csq_vec *aPart, uint32_t nRows, char **pzErr);

/* Run program prog[0..nProg) (without row numbers or top-N) over rows
** [i0, i0 + nRow) whose chunk i holds the values apChunk[i] (i < nChunk;
** NULL for a chunk the program must not read; each at least i0 + nRow
** values), in pieces of rows, handing every result to xPart. Returns 0, -EDOM when arithmetic or
** a sum met TEXT or BLOB (CSQ_FAULT_NOT_NUMERIC), -EINVAL for a program that
** reads a chunk it has not, -ENOMEM, or another negative errno with *pzErr
** (malloc'd) set. */
int dev_vecrun(const uint8_t *prog, size_t nProg, const csq_vec *const *apChunk, int nChunk,
               uint32_t i0, uint32_t nRow, dev_vecrun_fn xPart, void *pArg, char **pzErr);

#endif /* CSQ_DEVICE_VECRUN_H */
