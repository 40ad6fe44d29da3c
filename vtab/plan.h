/*
** vtab/plan.h - the plans of a csq table scan: what xBestIndex chooses and
** writes into idxNum and idxStr, and what xFilter reads back (vtab/plan.c,
** whose banner gives the grammar of idxStr).
*/
#ifndef CSQ_VTAB_PLAN_H
#define CSQ_VTAB_PLAN_H

#include "vtab/vtab.h"
#include "device/format/program.h"
#include "planner/filter.h"

/* idxNum: the plan kind. EXPLAIN QUERY PLAN shows it before the ':' of
** "VIRTUAL TABLE INDEX idxNum:idxStr", and idxStr opens with its name. */
typedef enum vt_plan_kind {
  VT_PLAN_SCAN = 0,   /* "scan": every live row; SQLite checks the constraints */
  VT_PLAN_ROWID = 1,  /* "rowid-eq": argv[0] is the rowid sought */
  VT_PLAN_DEVICE = 2, /* "device": the terms run on the device as a program */
  VT_PLAN_PROBE = 3   /* "probe": a join probe answered from a hash (vtab/probe.c) */
} vt_plan_kind;

/* ORDER BY ... LIMIT is consumed (a top-N in the cursor) only for at most
** this many rows (LIMIT + OFFSET) and sort keys; beyond, SQLite sorts. */
#define VT_TOPN_MAX    65536
#define VT_TOPN_MAXKEY 16
_Static_assert(VT_TOPN_MAXKEY <= CSQ_TOPN_MAX_KEYS && VT_TOPN_MAX <= CSQ_TOPN_MAX,
               "a consumed ORDER BY fits a device top-N");

/* A plan as xFilter reads it back: idxStr decoded, with the LIMIT and
** OFFSET values of argv. */
typedef struct vt_plan {
  int eKind;        /* VT_PLAN_*: idxNum as given (an unknown one reads as a scan) */
  uint64_t colUsed; /* cols=, with the sort keys' columns added; all ones without cols= */
  int nTerm;        /* device (or probe) terms, whose values are argv[0..nTerm) */
  int64_t nLeft;    /* limit= (+ offset=): rows to hand to SQLite; -1 no cap */
  int64_t nSkip;    /* offset=: the first of those, which SQLite drops itself */
  int nKey;         /* order=: sort keys (0: none) */
  int aKeyChunk[VT_TOPN_MAXKEY]; /* chunk of each key: 0 rowid, 1 + i column i */
  uint8_t aKeyDesc[VT_TOPN_MAXKEY];
  int nGroup; /* group=: the rows come grouped on these chunks (0: not) */
  int aGroupChunk[VT_GROUP_MAXKEY];
  uint8_t aGroupDesc[VT_GROUP_MAXKEY];
  int nProbeKey; /* VT_PLAN_PROBE: the probed chunks (1 + i), whose values follow the terms' */
  int aProbeChunk[VT_PROBE_MAXKEY];
} vt_plan;

/* xFilter: decode idxNum, idxStr and the LIMIT/OFFSET values of argv into
** *pPlan. SQLITE_ERROR, with the table's error message, on a plan csq did
** not write. */
int vt_plan_decode(vt_tab *p, int idxNum, const char *idxStr, int argc, sqlite3_value **argv,
                   vt_plan *pPlan);

/* The terms of a device plan that go into its program, into aTerm[] (room
** for pPlan->nTerm): values copied from argv, IN lists read with
** sqlite3_vtab_in_first/next. A term a program must not run (keep_term in
** plan.c) is left out: it was never marked exact, so SQLite still checks
** it. Sets *pnTerm to the terms kept, which the caller frees with
** vt_plan_terms_free. SQLITE_ERROR, with the table's error message (and
** nothing to free), on a malformed plan or no memory. */
int vt_plan_terms(vt_tab *p, const vt_plan *pPlan, const char *idxStr, sqlite3_value **argv,
                  pl_cons *aTerm, int *pnTerm);
void vt_plan_terms_free(pl_cons *aTerm, int nTerm);

#endif /* CSQ_VTAB_PLAN_H */
