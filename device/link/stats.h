/*
** device/link/stats.h - the counters of a device and of each queue pair, shared by
** both sides of the link: a backend adds to them as commands complete, the
** host driver and its users read them.
**
** Every function here is safe while other threads add: adds and reads are
** relaxed atomics on each 64-bit counter.
*/
#ifndef CSQ_DEVICE_STATS_H
#define CSQ_DEVICE_STATS_H

#include <stdint.h>

/* Counters, kept per queue (a connection's totals) and per device. All
** updated by the device as it processes commands of that queue, except the
** three program counters, which executors add from a program's result. */
typedef struct dev_stats {
  uint64_t media_bytes_read;    /* bytes the device read from its media */
  uint64_t media_bytes_written; /* bytes the device wrote to its media */
  uint64_t bytes_to_host;       /* bytes moved device -> host (reads, SLM reads) */
  uint64_t bytes_from_host;     /* bytes moved host -> device (writes, programs) */
  uint64_t commands;            /* commands completed */
  uint64_t admin_commands;      /* of which admin */
  uint64_t errors;              /* completions with a non-zero status */
  uint64_t programs_executed;
  uint64_t row_groups_scanned;
  uint64_t row_groups_skipped; /* by zone maps */
  uint64_t rows_scanned;
  uint64_t rows_returned;
  uint64_t engine_ns;             /* compute engine busy time */
  uint64_t cmd_by_opcode[3][256]; /* [0] admin, [1] NVM/CP, [2] SLM */
} dev_stats;

/* Atomically add every counter of pSrc into pDst. */
void dev_stats_add(dev_stats *pDst, const dev_stats *pSrc);
/* Atomic snapshot-copy of pSrc (a live counter block) into pDst. */
void dev_stats_snapshot(dev_stats *pDst, const dev_stats *pSrc);

#endif /* CSQ_DEVICE_STATS_H */
