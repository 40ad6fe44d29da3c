/*
** device/host/scan.h - host side of a pushed-down scan: run a csq program
** (device/format/program.h) over row groups of a table on the device and hand the
** qualifying rows back as column vectors, one row group (or part of one) per
** call.
**
** Per row group the scan skips what the zone maps rule out
** (store_rg_zone_skip; counted in row_groups_skipped of the queue), then
** sends: Memory Copy of the needed chunks' blocks into SLM, SLM Write of the
** job descriptor, Execute Program, SLM Read of just the result bytes. Two row
** groups are kept in flight when SLM allows, so copies, compute engines and
** reads overlap. Results come back in row group order.
**
** Several scans may be open on one queue at once (a join of two csq tables):
** they route each other's completions. Other users of the queue may use
** dev_exec freely in between, but must not dev_reap while a scan is open.
*/
#ifndef CSQ_DEVICE_SCAN_H
#define CSQ_DEVICE_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include "device/driver/driver.h"
#include "device/format/program.h"
#include "device/store/store.h"
#include "device/format/vec.h"

typedef struct dev_scan dev_scan;

/* Load program p[0..n) (if the device does not hold it already: the load is
** keyed by its XXH3 id) into a program slot and activate it. *pPind
** receives the slot. 0, or an error with *pzErr (malloc'd) set. */
int dev_prog_load(dev_queue *q, const uint8_t *p, size_t n, uint16_t *pPind, char **pzErr);

/* Open a scan of row groups apRg[0..nRg) of pTab with program prog[0..nProg)
** (copied; the caller keeps its buffer). The row groups and pTab must stay
** valid until dev_scan_close (hold the snapshot). The program's outputs are
** the columns returned, in its order: to get rowids, build the program with
** chunk 0 as its first output. On error returns non-zero with *pzErr set
** (malloc'd, caller frees) naming the table. */
int dev_scan_open(dev_queue *q, store *st, const store_table *pTab, store_rg **apRg, int nRg,
                  const uint8_t *prog, size_t nProg, dev_scan **pp, char **pzErr);

/* Number of output columns (the program's nOut; for a grouped program,
** version 2 with an aggregation section, the columns of its partial rows:
** csq_prog.nResCol, see program.h; merge them with dev_agg, device/host/agg.h). */
int dev_scan_ncol(const dev_scan *s);

/* The next batch of rows: aOut[0..ncol) (caller-initialised vectors; they
** are reset and refilled, the caller keeps ownership) receive *pnRows rows.
** Returns 0 with *pnRows = 0 at the end of the scan. On error returns
** non-zero with *pzErr set naming the table and row group; the scan then
** only fails. */
int dev_scan_next(dev_scan *s, csq_vec *aOut, uint32_t *pnRows, char **pzErr);

/* At most nRow rows per Execute from now on (0: no cap), for a caller
** that will stop after so many rows (a LIMIT): a capped row group comes back
** in parts, each read only when the caller asks for more. Programs with
** aggregation are never capped. */
void dev_scan_set_row_cap(dev_scan *s, uint32_t nRow);

/* After dev_scan_next failed with an Execute fault: its CSQ_FAULT_* reason
** (program.h); else 0. */
uint64_t dev_scan_fault(const dev_scan *s);

/* Index (in apRg) of the row group the last batch came from, -1 if none. */
int dev_scan_rg(const dev_scan *s);

/* Programs with row numbers (CSQ_PF_ROWNUM, program.h): the row number in
** its row group of each row of the last batch (valid until the next
** dev_scan_next), NULL for other programs. */
const uint32_t *dev_scan_rownums(const dev_scan *s);

/* Programs with row numbers: leave out of the row groups started from now
** on the output columns j < 64 whose bit (1 << j) is set in mask (later
** ones always come back). A left-out column comes back as an empty vector
** (n = 0) in a batch of rows; row groups already in flight keep the mask
** they started with. No-op for other programs. */
void dev_scan_set_omit(dev_scan *s, uint64_t mask);

/* Wait for commands still in flight, free SLM and the scan. NULL is a no-op. */
void dev_scan_close(dev_scan *s);

#endif /* CSQ_DEVICE_SCAN_H */
