/*
** device/host/agg.h - host side of a pushed-down GROUP BY: merge the partial
** groups that grouped programs (device/format/program.h, AGGREGATION) return per
** row group, from one or many devices, into final groups with SQLite's
** aggregate values.
**
** Typical use (one table, one device):
**     dev_agg *a;
**     rc = dev_agg_open(q, st, pTab, apRg, nRg, prog, nProg, &a, &zErr);
**     rc = dev_agg_finish(a, aOut, &nRows, &zErr);   (aOut: dev_agg_ncol vectors)
**     dev_agg_free(a);
** Several devices: dev_agg_new once, then dev_agg_scan per device (or feed
** dev_agg_add with partial rows obtained any other way), then finish.
**
** Groups are keyed with SQLite's equality (BINARY collation; NULL is one
** group; 1 and 1.0 are the same group, reported in the form seen first).
** Partials are merged in the order they are added, which for dev_agg_scan is
** row group order: MIN/MAX ties keep the first value, as a scan would.
**
** Errors: 0, a negative errno or a positive NVMe status, with *pzErr
** (malloc'd, caller frees) set. Special cases the caller acts on:
**   -EDOM    the device met a TEXT/BLOB operand of arithmetic or SUM/TOTAL/
**            AVG (CSQ_FAULT_NOT_NUMERIC), or (dev_agg_finish) a SUM's
**            integers are large enough that SQLite, adding them in row
**            order, might raise "integer overflow": run the query without
**            pushdown.
**   -ERANGE  dev_agg_finish: a SUM overflowed int64; the message is SQLite's
**            "integer overflow", the error SQLite itself raises.
*/
#ifndef CSQ_DEVICE_AGG_H
#define CSQ_DEVICE_AGG_H

#include <stddef.h>
#include <stdint.h>
#include "device/driver/driver.h"
#include "device/format/program.h"
#include "device/store/store.h"
#include "device/format/vec.h"

typedef struct dev_agg dev_agg;

/* A merger for grouped program prog[0..nProg) (copied; it must have an
** aggregation section). -EINVAL with a message if it has not or does not
** verify. */
int dev_agg_new(const uint8_t *prog, size_t nProg, dev_agg **pp, char **pzErr);

/* Columns of a partial row (keys, then every aggregate's state columns) and
** of a final row (nKey keys, then one value per aggregate). */
int dev_agg_npartial(const dev_agg *a);
int dev_agg_ncol(const dev_agg *a);
/* Groups merged so far. */
uint64_t dev_agg_ngroups(const dev_agg *a);

/* Merge nRows partial rows held in aPart[0..dev_agg_npartial) (as
** dev_scan_next returns them; the caller keeps them). -EBADMSG if a state
** column holds a class it cannot hold. */
int dev_agg_add(dev_agg *a, const csq_vec *aPart, uint32_t nRows, char **pzErr);

/* Run the program over row groups apRg[0..nRg) of pTab on queue q (a
** dev_scan) and merge every partial. May be called again for other tables /
** devices. Errors as dev_scan_next's, -EDOM as above. */
int dev_agg_scan(dev_agg *a, dev_queue *q, store *st, const store_table *pTab, store_rg **apRg,
                 int nRg, char **pzErr);

/* Run the program over rows [i0, i0 + nRow) the host holds as vectors,
** chunk i's values in apChunk[i] (i < nChunk), in csq's host engine
** (device/host/vecrun.h), and merge every partial. Errors as dev_vecrun's
** (-EDOM as above). */
int dev_agg_rows(dev_agg *a, const csq_vec *const *apChunk, int nChunk, uint32_t i0, uint32_t nRow,
                 char **pzErr);

/* dev_agg_new + dev_agg_scan. On error *pp is NULL. */
int dev_agg_open(dev_queue *q, store *st, const store_table *pTab, store_rg **apRg, int nRg,
                 const uint8_t *prog, size_t nProg, dev_agg **pp, char **pzErr);

/* The final rows: aOut[0..dev_agg_ncol) are caller-initialised vectors,
** reset and filled with one row per group (keys first, in their classes,
** then per aggregate: COUNT INTEGER; SUM INTEGER / REAL / NULL; TOTAL REAL;
** AVG REAL / NULL; MIN/MAX the value or NULL), groups in no particular
** order. Without keys there is exactly one row, also over no input. May be
** called more than once. -ERANGE "integer overflow" as above. */
int dev_agg_finish(dev_agg *a, csq_vec *aOut, uint32_t *pnRows, char **pzErr);

void dev_agg_free(dev_agg *a); /* NULL is a no-op */

#endif /* CSQ_DEVICE_AGG_H */
