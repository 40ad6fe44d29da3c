/*
** vtab/vtab.h - internals of the csq virtual-table module (not a public API).
**
**   vtab/conn.c      per-connection state: the devices a connection has open
**   vtab/schema.c    module arguments: column definitions and options
**   vtab/affinity.c  SQLite's type affinity applied to inserted values
**   vtab/check.c     DEFAULT and CHECK constraints of written rows
**   vtab/table.c     xCreate/xConnect/xDisconnect/xDestroy/xRename
**   vtab/plan.c      xBestIndex: the plans, idxNum and idxStr (vtab/plan.h)
**   vtab/cursor.c    the scan cursor: xOpen, xFilter, xNext, xColumn...
**   vtab/topn.c      the cursor's top-N heap for ORDER BY ... LIMIT (vtab/topn.h)
**   vtab/write.c     xUpdate, transactions and savepoints
**   vtab/drop.c      DROP TABLE, at once or inside a transaction
**   vtab/stats.c     the csq_stats and csq_devices tables, csq_stats_reset()
**   vtab/rows.c      csq_rows(?1): computed rows handed back to SQLite
**   vtab/query.c     csq_query pushdown views
**   vtab/joinrows.c  csq_jrows(?1): joined rows, typed, for SQLite to finish a join
**   vtab/stripe.c    tables striped over several devices (devices=)
**   vtab/fault.c     csq_fault() and csq_timeout(): fault injection, timeouts
**   vtab/backup.c    csq_backup(): a copy of the database and its device images
**   vtab/stmt.c      the committed state one statement run reads
**   vtab/lock.c      busy timeout, SQLite's lock before a device commit, read-only tables
**   vtab/probe.c     the join probe cache of a cursor
**   vtab/import.c    csq_import(): bulk loads from CSV (vtab/csv.c) or a query
*/
#ifndef CSQ_VTAB_H
#define CSQ_VTAB_H

#include <sqlite3ext.h>
#include "device/driver/driver.h"
#include "device/store/store.h"
#include "device/format/vec.h"

#ifndef SQLITE_CORE
extern const sqlite3_api_routines *sqlite3_api;
#endif

#define VT_ROWGROUP_ROWS  65536 /* rows per row group (default) */
#define VT_SAMPLES        4     /* join planner samples kept per table */
#define VT_SMALL_ROWGROUP 8192  /* a last row group this small is merged at commit */
#define VT_ENCQ_DEPTH     2     /* row groups in flight to the encode thread */
#define VT_BUSY_MS        5000  /* CREATE/DROP/RENAME, csq_backup: wait for a writer this long */
#define VT_PUSH_MIN_ROWS  8192  /* pushdown=auto: smaller tables filter on the host */
/* pushdown=auto: a filter keeping more (by the zone maps) runs on the host */
#define VT_PUSH_MAX_SEL 0.5

#define VT_PUSH_AUTO   0
#define VT_PUSH_ALWAYS 1
#define VT_PUSH_NEVER  2

typedef struct vt_conn vt_conn;
typedef struct vt_dev vt_dev;
typedef struct vt_tab vt_tab;
typedef struct vt_probe vt_probe;
typedef struct vt_bpf vt_bpf;
typedef struct vt_grouper vt_grouper;
typedef struct vt_rowcheck vt_rowcheck;

/* A device as one connection uses it: its own queue pair, the shared store,
** and the connection's open write transaction on it, if any. */
struct vt_dev {
  char *zKey; /* path as given, or ":memory:" */
  dev_device *pDev;
  dev_queue *pQ;
  store *pStore;
  store_txn *pTxn;       /* open write transaction, or NULL */
  store_snap *pStmtSnap; /* the snapshot the running statement reads */
  uint64_t stmtKey;      /* the statement run it belongs to (vtab/stmt.c) */
  int nRef;              /* tables of this connection using it */
  int eMedia;            /* VT_MEDIA_BUFFERED or VT_MEDIA_DIRECT, as opened */
  vt_dev *pNext;
};

/* Per connection: the module's client data. */
struct vt_conn {
  sqlite3 *db;
  vt_dev *pDevs;
  vt_dev *pMem;       /* the connection's in-memory device (":memory:" dbs) */
  dev_stats closed;   /* counters of queues already closed */
  vt_tab *pTabs;      /* every open csq table of this connection */
  uint64_t stmtKey;   /* the statement run whose cursors share snapshots (vtab/stmt.c) */
  int nStmtCur;       /* its cursors still open */
  uint64_t stmtEpoch; /* counts statement runs: never repeats, unlike stmtKey */
  int busyMs;         /* the busy timeout at the last device transaction's start (vtab/lock.c) */
  int bTxnDdl;        /* a catalog change went into the open device transactions */
  uint64_t txnEpoch;  /* counts changes of the set of store tables the open device
                         transactions hold: each begin, end and catalog change (a
                         table's pTxnTab is valid while this has not moved) */
  int bOrphanTxn;     /* they outlived every table in them (vtab/drop.c) */
  vt_tab *pDropped;   /* tables dropped inside a transaction, not yet settled (vtab/drop.c) */
  vt_bpf *pBpf;       /* eBPF programs loaded by csq_bpf_load, newest first (vtab/bpf.c) */
  int64_t nImportRows, nImportSkipped; /* csq_import's loads that committed (csq_stats) */
  uint64_t nImportBytes;               /* ... and the bytes of CSV they read */
  uint64_t nStarJoins;   /* joins grouped on the probe side's devices (planner/star.h) */
  uint64_t nKeyGroups;   /* joins grouped by one table's unique key (pl_join.zHostKey) */
  uint64_t nProbeCopy;   /* a join probe copies columns while under this many bytes ... */
  uint64_t nProbeChunks; /* ... and caches chunks up to this many (csq_probe_memory) */
};

/* Column affinity, SQLite's letters. */
#define VT_AFF_BLOB    'A'
#define VT_AFF_TEXT    'B'
#define VT_AFF_NUMERIC 'C'
#define VT_AFF_INTEGER 'D'
#define VT_AFF_REAL    'E'

typedef struct vt_col {
  char *zName;
  char *zType; /* declared type ("" if none) */
  char aff;    /* VT_AFF_* */
  int bNotNull;
  int bIpk;     /* INTEGER PRIMARY KEY: an alias of the rowid */
  int bAutoinc; /* AUTOINCREMENT: new rowids never reuse one (a high-water mark) */
  int bColl;    /* declares COLLATE other than BINARY */
  char *zDflt;  /* DEFAULT as an SQL expression, or NULL (vtab/check.c) */
} vt_col;

/* A CHECK constraint (vtab/check.c). */
typedef struct vt_check {
  char *zExpr; /* the expression, as written between its parentheses */
  char *zName; /* what a failure names: the CONSTRAINT name, else zExpr */
  int iCol;    /* the column it was declared on, or -1 (a table constraint) */
} vt_check;

/* Parsed module arguments. */
typedef struct vt_schema {
  int nCol;
  vt_col *aCol;
  char *zDeclare;  /* CREATE TABLE x(...) for sqlite3_declare_vtab */
  char *zDevice;   /* device= (NULL: the default device) */
  int nDevice;     /* devices= with two or more paths: a striped table */
  char **azDevice; /* its paths, in member order (nDevice entries) */
  char *zDevices;  /* the same list joined with ',' as stored in each member */
  int nRowGroup;   /* rowgroup= */
  int ePush;       /* pushdown=: VT_PUSH_AUTO, VT_PUSH_ALWAYS, VT_PUSH_NEVER */
  int eMedia;      /* media=: VT_MEDIA_ANY (not given), VT_MEDIA_BUFFERED, VT_MEDIA_DIRECT */
  int iIpk;        /* column that aliases the rowid, or -1 */
  int nCheck;      /* CHECK constraints, in the order SQLite checks them */
  vt_check *aCheck;
  char *zRefused; /* a constraint csq does not enforce: CREATE fails with this
                     message, and writes to a table that has it too */
} vt_schema;

/* How the device reads its image (media=): through the page cache, which
** then stands in for the device's own DRAM, or with O_DIRECT where the file
** system allows it (buffered where it does not). One device path is opened
** once per connection: the first table to open it decides. */
#define VT_MEDIA_ANY      -1
#define VT_MEDIA_BUFFERED 0
#define VT_MEDIA_DIRECT   1

/* A row inserted by an open transaction is named by its insert sequence
** number; spans map sequence numbers to the row groups they were written to. */
typedef struct vt_span {
  store_rg *pRg; /* a row group this transaction wrote (txnState 2) */
  int iMem;      /* on member iMem */
  int64_t seq0;  /* sequence number of its row 0 */
  uint32_t n;
} vt_span;

/* One delete done by the open transaction, for ROLLBACK TO. */
typedef struct vt_undo {
  store_rg *pRg; /* committed row group (its private clone), or NULL */
  int iMem;      /* member pRg belongs to */
  uint32_t iRow; /* row in pRg */
  int64_t seq;   /* when pRg == NULL: the inserted row's sequence number */
} vt_undo;

typedef struct vt_mark {
  int iSavepoint;
  int64_t seq; /* inserts before this mark survive */
  int nUndo;
  int64_t nextRowid; /* the coordinator's rowid counter (AUTOINCREMENT's) */
  int bStmt;         /* a statement's savepoint (taken in a writing statement) */
} vt_mark;

struct vt_tab {
  sqlite3_vtab base; /* must be first */
  vt_conn *pConn;
  vt_dev *pDev;   /* == apMem[0]: the only device, or a stripe's coordinator */
  int nMem;       /* devices the table lives on: 1, or nDevice of devices= */
  vt_dev **apMem; /* member k's device (see vtab/stripe.c) */
  char *zName;
  char *zDb;
  vt_schema s;
  int64_t nRowEst; /* rows at the last look, for xBestIndex */
  uint64_t nWrite; /* xUpdate calls so far: tells a probe cache it is stale */
  /* The join planner's last samples of the table (vtab/query.c q_sample):
  ** a filter program's id with nWrite and nRowEst, and what it passed. An
  ** estimate only steers the plan, so one that another connection's writes
  ** made stale costs time at most, never an answer. */
  struct {
    uint64_t key, nIn, nOut;
  } aSample[VT_SAMPLES];
  int iSample;      /* the slot the next sample takes */
  csq_zone *aZone;  /* per chunk (0 rowid, 1 + i column i): the zone maps of every row
                       group merged, at the last look (xBestIndex's selectivity) */
  int nZoneRg;      /* row groups merged into aZone; 0 = none yet */
  uint64_t zoneSig; /* a hash of their addresses */
  double *aNdv;     /* per chunk: distinct values estimated from the zone maps; 0 unknown */
  /* write state of the open transaction */
  csq_vec *aBuf;    /* nCol + 1 vectors, [0] = rowids: rows not yet written */
  csq_vec *aStage;  /* nCol + 1 vectors: the newest rows, after aBuf's, moved there in
                       batches and before anything looks at aBuf (vtab/write.c, "The stage") */
  uint8_t *aBufDel; /* deleted flags of buffered rows (aBuf's, then aStage's) */
  uint32_t nBufDelAlloc;
  int64_t bufSeq0; /* sequence number of aBuf row 0 */
  int64_t nSeq;    /* inserts so far in this transaction */
  /* full row groups handed to the encode thread (vtab/write.c), in order */
  store_encq *pEncq;              /* started at the first full row group */
  int64_t aQSeq0[VT_ENCQ_DEPTH];  /* sequence number of each one's row 0 */
  uint32_t aQRows[VT_ENCQ_DEPTH]; /* and its rows */
  int iQHead, nQ;                 /* ring of the nQ in flight */
  uint64_t *aHeapHint;            /* per vector: heap bytes of the last one handed over */
  sqlite3_stmt *pFillStmt;        /* the statement that wrote the buffer's first row */
  int nFillRun;                   /* ... in this run of it (SQLITE_STMTSTATUS_RUN) */
  int rcBroken;                   /* a row group failed to reach the device: */
  char *zBroken;                  /* ... why (sqlite3_malloc'd) */
  int64_t brokenSeq0;             /* ... from this sequence number on */
  vt_span *aSpan;
  int nSpan, nSpanAlloc;
  vt_undo *aUndo;
  int nUndo, nUndoAlloc;
  vt_mark *aSave;
  int nSave, nSaveAlloc;
  int bInTxn;
  int bReadOnly;       /* its database is opened read-only (vtab/lock.c) */
  int bMaxRowid;       /* iMaxRowid is known for the open transaction */
  int bMembersChecked; /* a stripe's members agreed when its transaction began */
  int bWrote;          /* xUpdate ran in the open transaction (not only xBegin) */
  int bSaveBase;       /* iSaveBase is set: */
  int iSaveBase;       /* the first savepoint the table saw in the transaction */
  int64_t nextRowid0;  /* the rowid counter when the table joined the transaction */
  int64_t *aReplaced;  /* rowids UPDATE OR REPLACE moved rows onto (see write.c) */
  int nReplaced, nReplacedAlloc;
  uint64_t replacedKey; /* ... in the statement run of this stmtEpoch */
  vt_mark stmtMark;     /* the table before the writes of the statement run... */
  uint64_t markEpoch;   /* ... of this stmtEpoch (0: none) */
  store_table *pTxnTab; /* the coordinator's view in the open transaction, for writes ... */
  uint64_t txnEpoch;    /* ... while pConn->txnEpoch is this (vtab/write.c, ensure_txn) */
  int64_t iMaxRowid;    /* the largest rowid of a live row (new rowids follow it) */
  int bMaxAny;          /* ... or 0: the table has no row */
  int bStripeTxn;       /* a striped table written in the open transaction: its commit
                           sequence is raised at commit (kept until then, unlike bInTxn) */
  vt_rowcheck *pCheck;  /* compiled DEFAULT and CHECK (vtab/check.c), or NULL */
  int eDflt;            /* a column has a DEFAULT xUpdate applies (vtab/check.c), and ... */
  int eNotNull;         /* ... one besides the rowid alias is NOT NULL (vtab/write.c): 0 not
                           yet looked at, 1 no, 2 yes; the schema never changes after open */
  vt_probe *pProbes;    /* join probes the running statement's cursors share (probe.c) */
  vt_tab *pNextTab;
};

/* conn.c */
vt_conn *vt_conn_new(sqlite3 *db);
void vt_conn_free(void *p);
int vt_conn_device(vt_conn *pConn, const char *zPath, int bCreate, int eMedia, vt_dev **ppDev,
                   char **pzErr);
void vt_dev_release(vt_conn *pConn, vt_dev *pDev);
void vt_conn_stats(vt_conn *pConn, dev_stats *pOut);
void vt_conn_stats_reset(vt_conn *pConn);
char *vt_default_device(sqlite3 *db, const char *zDb); /* sqlite3_malloc'd, or NULL = memory */
int vt_rc_from(int rc);                                /* device/store return -> SQLite code */

/* schema.c */
int vt_schema_parse(int argc, const char *const *argv, vt_schema *pS, char **pzErr);
void vt_schema_clear(vt_schema *pS);
char vt_affinity(const char *zType);
/* SQL tokens as csq reads them: an identifier or keyword (maybe quoted), a
** number, a string or blob literal, a parenthesised group whole, or one
** other character; white space and comments are skipped. n == 0 at the end,
** n < 0 on an unterminated quote, comment-free group or parenthesis. */
typedef struct vt_tok {
  const char *z;
  int n;
} vt_tok;
vt_tok vt_tok_next(const char **pz);
int vt_tok_is(vt_tok t, const char *zKw); /* the keyword zKw, any case */
char *vt_tok_ident(vt_tok t);             /* dequoted, sqlite3_malloc'd */

/* check.c: DEFAULT and CHECK constraints of written rows. */
/* At CREATE: refuse a constraint csq does not enforce (pS->zRefused), and
** compile the CHECK and DEFAULT expressions once, failing as SQLite's
** CREATE TABLE would. *pzErr sqlite3_malloc'd. */
int vt_check_create(sqlite3 *db, vt_tab *p, char **pzErr);
/* Before a row is written (write.c): apply the DEFAULTs of the columns an
** INSERT leaves out (*pArgv may then point to csq's copy of argv, valid
** until the next call), then NOT NULL and CHECK as SQLite does. bUpdate: 0
** for an INSERT; iRowid the new row's rowid if bGiven. SQLITE_CONSTRAINT
** (with the table's error message) when the row fails. */
int vt_check_row(vt_tab *p, sqlite3_value ***pArgv, int bUpdate, int bGiven, int64_t iRowid);
void vt_check_free(vt_tab *p); /* when the table is disconnected */
/* csq_import's CHECK: vt_check_bulk_begin compiles the table's CHECK
** constraints and reads PRAGMA ignore_check_constraints once for the load;
** *pbCheck = 1 when rows must be checked. vt_check_bulk_row checks row
** iRow of aCol (nCol + 1 vectors, [0] the rowids, the values with their
** columns' affinity, the INTEGER PRIMARY KEY's NULL): SQLITE_OK,
** SQLITE_CONSTRAINT_CHECK or an error, the message in p->base.zErrMsg. */
int vt_check_bulk_begin(vt_tab *p, int *pbCheck);
int vt_check_bulk_row(vt_tab *p, const csq_vec *aCol, uint32_t iRow);

/* affinity.c: convert argv value to the column's affinity and push it. */
int vt_push_value(csq_vec *pVec, sqlite3_value *pVal, char aff);
/* The same for text z[0..n) (csq_import's fields), without an
** sqlite3_value: SQLite's answer, computed in the common cases and asked
** of SQLite in the rare ones through pConv (vt_numconv_new prepares a
** statement on db and learns how this SQLite rounds decimals). */
typedef struct vt_numconv vt_numconv;
int vt_numconv_new(sqlite3 *db, vt_numconv **pp);
void vt_numconv_free(vt_numconv *p);
int vt_push_text(vt_numconv *pConv, csq_vec *pVec, const char *z, uint32_t n, char aff);
uint64_t vt_numconv_slow(const vt_numconv *p); /* texts handed to SQLite so far */

/* table.c */
extern sqlite3_module vt_module;
void vt_tab_free(vt_tab *p);
void vt_tab_unlink(vt_tab *p); /* off pConn->pTabs (a table dropped, freed) */
/* Catalog changes, run on each member (vt_stripe_catalog): drop table
** pArg (a name) with its stripe metadata, if there; rename one. */
int vt_catalog_drop(store_txn *t, void *pArg, char **pzErr);
typedef struct vt_rename_arg {
  const char *zOld, *zNew;
} vt_rename_arg;
int vt_catalog_rename(store_txn *t, void *pArg, char **pzErr);
void vt_set_error(sqlite3_vtab *pVtab, const char *zFmt, ...);
int vt_err(sqlite3_vtab *pVtab, int rc, char *zMsg); /* takes a malloc'd device message */
/* An SQL function's error: the message formatted, or SQLITE_NOMEM when
** it cannot be. The one way csq's functions (csq_bpf_load, csq_bpf,
** csq_fault, csq_import) report a failure. */
void vt_result_errorf(sqlite3_context *ctx, const char *zFmt, ...)
    __attribute__((format(printf, 2, 3)));

/* write.c */
int vt_flush(vt_tab *p); /* write the transaction's buffered rows as a row group */
/* Write the row groups still with the encode thread (vtab/write.c); an
** error when one of them could not be written in this transaction (errno
** style, *pzErr malloc'd), which then cannot commit. */
int vt_write_settle(vt_tab *p, char **pzErr);
int vt_update(sqlite3_vtab *pVtab, int argc, sqlite3_value **argv, sqlite3_int64 *pRowid);
int vt_begin(sqlite3_vtab *pVtab);
int vt_sync(sqlite3_vtab *pVtab);
int vt_commit(sqlite3_vtab *pVtab);
int vt_rollback(sqlite3_vtab *pVtab);
int vt_savepoint(sqlite3_vtab *pVtab, int iSavepoint);
int vt_release(sqlite3_vtab *pVtab, int iSavepoint);
int vt_rollback_to(sqlite3_vtab *pVtab, int iSavepoint);
void vt_tab_txn_reset(vt_tab *p);
/* Before a catalog change (DROP, RENAME): end a transaction that only
** xBegin opened, so that the change commits on its own, as before. */
void vt_txn_drop_idle(vt_tab *p);
/* End every device transaction of the connection: commit (as COMMIT does,
** SQLite's lock first) or roll back. */
int vt_txn_commit_all(vt_conn *pConn, char **pzErr);
void vt_txn_rollback_all(vt_conn *pConn);

/* drop.c: DROP TABLE, at once or inside a transaction (see the file). */
#define VT_DROPPED_PREFIX "csq_dropped:"
int vt_drop(vt_tab *p, int *pbKept); /* xDestroy; *pbKept: p is the connection's now */
/* Settle earlier drops whose transaction ended; pCreating: the table
** xCreate makes now (its name is in the schema already), or NULL. */
void vt_drop_settle(vt_conn *pConn, const vt_tab *pCreating);
int vt_drop_pending(vt_tab *p,
                    char **pzErr); /* xCreate: refuse a name dropped in the transaction */
int vt_drop_clear_stale(store_txn *t, const char *zName, char **pzErr); /* in xCreate's txn */
int vt_drop_restore(vt_tab *p, int *pbRestored, char **pzErr); /* xConnect: table missing */
/* bpf.c: eBPF programs from SQL (csq_bpf_load, csq_bpf; see the file). */
int vt_bpf_register(sqlite3 *db, vt_conn *pConn);
void vt_bpf_free_all(vt_conn *pConn); /* the connection closes */
/* The newest program loaded as zName (any case), or NULL. */
const vt_bpf *vt_bpf_find(vt_conn *pConn, const char *zName);
int vt_bpf_nArg(const vt_bpf *p);
/* Its instructions (8 bytes each) and declared types (CSQ_BPF_DECL_*). */
void vt_bpf_code(const vt_bpf *p, const uint8_t **paIns, uint32_t *pnIns, const uint8_t **paDecl);
/* xFindFunction: csq_bpf('name', col) becomes a constraint on col. */
int vt_bpf_find_function(sqlite3_vtab *pVtab, int nArg, const char *zName,
                         void (**pxFunc)(sqlite3_context *, int, sqlite3_value **), void **ppArg);

void vt_drop_free_all(vt_conn *pConn); /* the connection closes */

/* stripe.c: tables over several devices (devices='a.csd,b.csd'). Every
** function works for a one-device table too (nMem == 1, no metadata). */
char *vt_stripe_meta_name(const char *zTable); /* sqlite3_malloc'd */
/* Open every member's device (bCreate as vt_conn_device), fill apMem/pDev. */
int vt_stripe_open(vt_tab *p, sqlite3 *db, int bCreate, char **pzErr);
typedef int (*vt_catalog_fn)(store_txn *, void *, char **);
/* Create the table on every member (fnCreate(txn, pArg)), with the stripe
** metadata (member k of n, device list, stripe id) in the same commit. */
int vt_stripe_create(vt_tab *p, vt_catalog_fn fnCreate, void *pArg, char **pzErr);
/* Check each member holds the table with matching metadata and that the
** members agree on their commit sequence (reopen). */
int vt_stripe_check(vt_tab *p, char **pzErr);
/* Run fn (a catalog change) on every member, coordinator last. */
int vt_stripe_catalog(vt_tab *p, vt_catalog_fn fn, void *pArg, char **pzErr);
/* Views of the table on every member, consistent with each other (aTab,
** aSnap: p->nMem entries; aSnap[k] NULL where the connection's write
** transaction on member k gives the view). The views stay valid until the
** next write; the caller releases the snapshots. Device error codes, with
** *pzErr malloc'd (libc). */
int vt_visible_members(vt_tab *p, store_table **aTab, store_snap **aSnap, char **pzErr);
/* Commit every device that holds a member of a striped table written in
** this transaction, in two steps (store_txn_prepare on the participants,
** the decider's ordinary commit, then the flips; device/store/FORMAT.md "Commit
** protocol"), and clear d->pTxn on each device it finishes, so that the
** caller commits only the devices left. */
int vt_stripe_prepare_commit(vt_conn *pConn, char **pzErr);
/* Is device d the coordinator of a striped table written in this transaction? */
int vt_stripe_is_coordinator(vt_conn *pConn, vt_dev *d);

/* stmt.c: the committed state a statement run reads (see the file). */
uint64_t vt_stmt_key(sqlite3 *db);                /* the running statements, 0 if none */
uint64_t vt_stmt_enter(vt_conn *pConn);           /* a cursor opens: its run's key */
void vt_stmt_leave(vt_conn *pConn, uint64_t key); /* it closes */
void vt_stmt_forget(vt_conn *pConn);              /* the connection committed */
/* A snapshot of d for the running statement: the one its other cursors
** read, unless bFresh. The caller owns one reference. */
int vt_stmt_snapshot(vt_conn *pConn, vt_dev *d, int bFresh, store_snap **ppSnap, char **pzErr);

/* probe.c: the join probe cache of a cursor (VT_PLAN_PROBE, vtab/plan.h). */
#define VT_PROBE_MAX_ROWS 8000000 /* larger tables are probed by device scans */
#define VT_PROBE_MAXKEY   4       /* columns hashed together */
/* bytes a probe's keys and row locations may hold, about (plan.c) ... */
#define VT_PROBE_BUDGET      ((uint64_t)768 << 20)
#define VT_PROBE_VALUE_BYTES 16 /* ... at this many a value */
/* defaults of the connection's nProbeCopy and nProbeChunks */
#define VT_PROBE_EAGER_BUDGET ((uint64_t)128 << 20) /* other columns copied while under */
#define VT_PROBE_CACHE_BUDGET ((uint64_t)256 << 20) /* chunks read for the columns not copied */
/* A cache of the rows that pass the filter zSig names (its terms and
** values; "" none), hashed on vectors aKey[0..nKey) (as a cursor's aVec:
** [0] rowid, [1 + i] column i; nVec of them). Vectors with aWant[i] set are
** copied at build while they fit pConn->nProbeCopy; any other is read
** from its chunks when asked for, up to pConn->nProbeChunks of them. */
vt_probe *vt_probe_new(const vt_conn *pConn, int nVec, const uint8_t *aWant, const int *aKey,
                       int nKey, const char *zSig, uint64_t stamp);
/* csq_probe_memory(COPY_BYTES [, CHUNK_BYTES]): the connection's budgets. */
int vt_probe_register(sqlite3 *db, vt_conn *pConn);
void vt_probe_free(vt_probe *p);
uint64_t vt_probe_stamp(const vt_probe *p);
/* Sharing among a statement run's cursors (see probe.c): a probe of the
** run on aKey of the rows passing zSig, with one more reference, or NULL;
** offer one a cursor built to the run; drop a reference (bRun: the cursor
** belongs to the running statement run), which may free it. */
vt_probe *vt_probe_acquire(vt_tab *pTab, int nVec, const int *aKey, int nKey, const char *zSig);
void vt_probe_publish(vt_tab *pTab, vt_probe *p);
void vt_probe_release(vt_tab *pTab, vt_probe *p, int bRun);
void vt_probe_drop_table(vt_tab *pTab);  /* the table closes, or its run ended */
void vt_probe_drop_kept(vt_conn *pConn); /* the statement run ended */
uint32_t vt_probe_rows(const vt_probe *p);
/* Building: about nRow rows will come (the copies are given up if they
** would not fit); room for nRow rows; rows [iRow, iRow + n) of each
** *apSrc[i] (NULL: not fetched), from source iSrc (see vt_probe_adopt) at
** row numbers aRowNum[iRow..] (NULL: iRow...); is vector i copied. */
void vt_probe_expect(vt_probe *p, uint64_t nRow);
int vt_probe_reserve(vt_probe *p, uint32_t nRow);
int vt_probe_append(vt_probe *p, const csq_vec *const *apSrc, uint32_t iRow, uint32_t n,
                    uint32_t iSrc, const uint32_t *aRowNum);
int vt_probe_copied(const vt_probe *p, int iVec);
/* What the rows are read from, taken over from the building cursor (even
** on failure): per member (nMem) its snapshot and private table copy (the
** caller's entries are set to NULL) and the table read; the sources, row
** groups apRg[0..nRg) (their references) of members aRgMem[], then, if
** aBuf (nVec vectors, sqlite3_malloc'd) is not NULL, the unwritten rows as
** source nRg. */
int vt_probe_adopt(vt_probe *p, int nMem, store_snap **aSnap, const store_table **aTab,
                   store_table **aTabCopy, uint32_t nRg, store_rg **apRg, const int *aRgMem,
                   csq_vec *aBuf);
int vt_probe_index(vt_probe *p); /* after the last append */
/* The rows of a lookup, kept by the cursor (a[] sqlite3_malloc'd). */
typedef struct vt_probe_hits {
  uint32_t *a;
  uint32_t n, nAlloc;
} vt_probe_hits;
/* The rows where key k = apVal[k], into *pHits. */
int vt_probe_find(vt_probe *p, sqlite3_value **apVal, vt_probe_hits *pHits);
/* Where row r's (a hit's) value of vector iVec is: *ppV's row *piRow (read
** from its chunk if not copied; an error sets pTab's message). */
int vt_probe_value(vt_probe *p, vt_tab *pTab, int iVec, uint32_t r, const csq_vec **ppV,
                   uint32_t *piRow);

/* group.c: rows collected and handed to SQLite sorted on the GROUP BY keys
** (VT_PLAN_SCAN/DEVICE with ";group=", vtab/plan.h). Rows are nOut vectors;
** aKey names the key ones, aDesc their directions. */
#define VT_GROUP_MAXKEY 16
#define VT_GROUP_BUDGET ((uint64_t)256 << 20) /* bytes of rows it may hold, about */
vt_grouper *vt_grouper_new(int nOut, const int *aKey, const uint8_t *aDesc, int nKey);
void vt_grouper_free(vt_grouper *g);
int vt_grouper_reserve(vt_grouper *g, uint32_t nRow); /* room for about nRow rows */
/* Take the rows aRow[0..n) (NULL: 0..n) of apSrc[]. */
int vt_grouper_add(vt_grouper *g, const csq_vec *const *apSrc, const uint32_t *aRow, uint32_t n);
/* The rows into aOut[0..nOut) (buffers swapped), and in *paPos (owned by g)
** their positions group by group, the groups in key order. */
int vt_grouper_emit(vt_grouper *g, csq_vec *aOut, uint32_t *pnRow, const uint32_t **paPos);
/* The order that serves rows 0..n grouped on key vectors apKey[0..nKey)
** (a vector shorter than n rows reads as NULL past its end), the groups
** sorted by their keys, key k descending when aDesc[k], the rows of a
** group in their own order: *paPos (malloc'd, n entries) lists the rows in
** that order. SQLITE_OK or SQLITE_NOMEM. */
int vt_group_order(const csq_vec *const *apKey, const uint8_t *aDesc, int nKey, uint32_t n,
                   uint32_t **paPos);
/* 1 when rows 0..n already come in vt_group_order's order (each key
** ascending, or descending when aDesc[k], rows of equal keys together):
** the order of a join's probe side often is. */
int vt_group_sorted(const csq_vec *const *apKey, const uint8_t *aDesc, int nKey, uint32_t n);

/* plan.c: xBestIndex (decoding a plan for xFilter: vtab/plan.h) */
/* Note what a scan found of the table's committed rows: the row count and
** the merged zone maps that xBestIndex estimates from. bSample (when the
** table is opened): also read a few dictionaries of TEXT columns for their
** distinct values; else the last such estimate stays. */
void vt_note_table(vt_tab *p, store_table *const *aTab, int nTab, int bSample);
int vt_best_index(sqlite3_vtab *pVtab, sqlite3_index_info *pInfo);

/* cursor.c */
int vt_open(sqlite3_vtab *pVtab, sqlite3_vtab_cursor **ppCur);
int vt_close(sqlite3_vtab_cursor *pCur);
int vt_filter(sqlite3_vtab_cursor *pCur, int idxNum, const char *idxStr, int argc,
              sqlite3_value **argv);
int vt_next(sqlite3_vtab_cursor *pCur);
int vt_eof(sqlite3_vtab_cursor *pCur);
int vt_column(sqlite3_vtab_cursor *pCur, sqlite3_context *ctx, int i);
int vt_rowid(sqlite3_vtab_cursor *pCur, sqlite3_int64 *pRowid);

/* rows.c: csq_rows(?1), rows csq computed, for SQLite to finish a query. */
typedef struct vt_rowset {
  int nCol;      /* at most 64 */
  csq_vec *aCol; /* nCol vectors of nRow values (sqlite3_malloc'd array) */
  uint32_t nRow;
  /* csq_jrows' copy of the rows in the group order its plan zOrder names
  ** (joinrows.c), or NULL: owned by the set, as values read from it stay
  ** in use until the statement ends */
  char *zOrder;
  csq_vec *aOrdered;
} vt_rowset;
int vt_rows_register(sqlite3 *db);
/* joinrows.c: csq_jrows(?1), the same with typed, collated columns
** (registered by vt_query_register). */
int vt_jrows_register(sqlite3 *db);
/* query.c: csq_query pushdown views. */
int vt_query_register(sqlite3 *db, vt_conn *pConn);
int vt_explain_register(sqlite3 *db, vt_conn *pConn);
void vt_rowset_clear(vt_rowset *p);
/* Free only the ordered copy (a set whose columns another owner holds). */
void vt_rowset_clear_order(vt_rowset *p);
void vt_result_value(sqlite3_context *ctx, const csq_vec *v, uint32_t r);
/* The same without copying TEXT and BLOB (SQLITE_STATIC): for row sets
** that outlive, unchanged, the statement reading them (csq_rows, csq_jrows) */
void vt_result_value_kept(sqlite3_context *ctx, const csq_vec *v, uint32_t r);

/* stats.c */
int vt_stats_register(sqlite3 *db, vt_conn *pConn);

/* lock.c: the connection's busy timeout (PRAGMA busy_timeout, kept in
** pConn->busyMs); before a device commit, SQLite's EXCLUSIVE lock on every
** database file the transaction writes (a device error code, -EBUSY after
** the busy timeout, with *pzErr libc-malloc'd); and whether a table may be
** written (SQLITE_READONLY with the vtab's message if not). */
int vt_busy_ms(vt_conn *pConn);
int vt_lock_for_commit(vt_conn *pConn, char **pzErr);
int vt_tab_writable(vt_tab *p);

/* fault.c: csq_fault(spec[, path]) and csq_timeout(ms[, path]). */
int vt_fault_register(sqlite3 *db, vt_conn *pConn);

/* backup.c: csq_backup(DEST [, DIR]), a consistent copy of the main
** database and of the device images its csq tables use. */
int vt_backup_register(sqlite3 *db, vt_conn *pConn);

/* write.c, for csq_import inside BEGIN ... COMMIT (and into a striped
** table outside it, a transaction of its own committed with
** vt_txn_commit_all): join the connection's transaction (buffer written,
** *pMark to undo to, the coordinator's transaction and the table's view in
** it); the member the next row group goes to (the one holding the fewest,
** as INSERT chooses), its transaction and view; the largest rowid over
** every member; note a row group of n rows the load appended to member
** iMem; undo a failed load. SQLite codes, the message in p->base.zErrMsg. */
int vt_import_join(vt_tab *p, vt_mark *pMark, store_txn **ppTxn, store_table **ppTab);
int vt_import_member(vt_tab *p, int *piMem, store_txn **ppTxn, store_table **ppTab);
int vt_import_max_rowid(vt_tab *p, int64_t *pMax, int *pbAny);
int vt_import_span(vt_tab *p, store_rg *pRg, int iMem, uint32_t n);
int vt_import_undo(vt_tab *p, const vt_mark *pMark);

/* import.c: csq_import(TABLE, FILE-OR-QUERY [, OPTIONS]) and
** csq_import_progress(), loading a table in bulk (see the file). */
int vt_import_register(sqlite3 *db, vt_conn *pConn);

#endif /* CSQ_VTAB_H */
