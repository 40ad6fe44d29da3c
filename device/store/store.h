/*
** device/store/store.h - tables on a device image: superblocks, catalog, row groups,
** transactions. The on-media format is documented in device/store/FORMAT.md.
**
** A store is the host's view of one device image. It is shared by every
** connection of the process that opens the same device (reference counted),
** and all its I/O goes through the device's command interface (driver.h):
** NVM Read/Write/Flush and reservations. Nothing here touches a file.
**
** Readers take a snapshot: an immutable, reference-counted catalog of one
** committed generation. Writers open a transaction (one per store at a time,
** across threads and processes: an in-process lock plus a device reservation),
** write whole row groups to free space as they fill, mark deleted rows, and
** commit: data and catalog first, flush, then the two superblock copies, each
** followed by a flush. A crash at any moment leaves the last committed
** generation intact.
**
** Errors: 0, -errno, or an NVMe status (> 0); *pzErr (malloc'd, caller frees)
** names the table and block when data is involved.
*/
#ifndef CSQ_DEVICE_STORE_H
#define CSQ_DEVICE_STORE_H

#include <pthread.h>
#include <stdint.h>
#include "device/driver/driver.h"
#include "device/format/chunk.h"
#include "device/format/vec.h"

typedef struct store store;
typedef struct store_snap store_snap;
typedef struct store_table store_table;
typedef struct store_rg store_rg;
typedef struct store_txn store_txn;

/* Where one column chunk of a row group lives, and what it holds. */
typedef struct store_chunk {
  uint32_t off;  /* byte offset inside the row group's extent */
  uint32_t len;  /* encoded bytes */
  uint64_t xxh3; /* checksum of the encoded chunk */
  uint8_t enc;   /* CSQ_ENC_* */
  csq_zone zone;
} store_chunk;

/* A row group: an extent of blocks holding one chunk per column, chunk 0 the
** rowids. Immutable once written, except for the fields marked lazy, which
** are caches filled under the store's mutex. Shared between snapshots
** (reference counted). */
struct store_rg {
  int nRef;
  uint64_t lba;    /* first block */
  uint32_t nblk;   /* blocks in the extent */
  uint32_t nRow;   /* rows stored, deleted included */
  uint32_t nDel;   /* rows marked deleted */
  uint64_t delLba; /* extent of the delete bitmap (0 = none) */
  uint32_t delBytes;
  uint64_t delXxh3;
  uint8_t *aDel; /* delete bitmap, nRow bits (NULL if nDel == 0), loaded with the snapshot */
  int nChunk;    /* columns + 1 */
  store_chunk *aChunk;
  int64_t *aRowid; /* lazy: decoded rowids (see store_rg_rowids) */
  int bSorted;     /* lazy: aRowid ascending */
  uint8_t *aRaw;   /* lazy: the whole extent of a small row group, read once
                      (see STORE_RAW_CACHE_BLOCKS in store.c) */
  int txnState;    /* 0 committed (shared, immutable), 1 committed but its delete
                      bitmap changed in the open transaction, 2 written by it */
};

typedef struct store_col {
  char *zName;
  char *zType; /* declared type, "" if none */
  int bNotNull;
} store_col;

struct store_table {
  uint32_t id;
  char *zName;
  int nCol;
  store_col *aCol;
  int64_t nextRowid; /* next rowid to assign */
  int nRg;
  int nRgAlloc;
  store_rg **apRg;
  /* Where this table's row group records are in the on-media catalog of
  ** the snapshot it belongs to (see store_table_catpos); 0 = not known,
  ** as for a transaction's working copy. */
  uint64_t catLba; /* the catalog's first block */
  uint64_t catOff; /* byte offset of row group record 0 in it */
};

struct store_snap {
  int nRef;
  uint64_t gen; /* generation */
  int nTab;
  store_table **apTab;
  store *pStore;         /* owner; a snapshot must be released before the store */
  store_snap *pNextLive; /* the store's list of snapshots still referenced */
};

/* The longest table name, column name or declared type a catalog holds, in
** bytes (a u16 length: FORMAT.md "Catalog"); longer ones are refused
** (-ENAMETOOLONG). And the longest name of the table a prepared commit's
** decision names (FORMAT.md "Superblock"): a striped table's metadata
** table, "csq_stripe:" and its name, must fit it. */
#define STORE_MAX_NAME          65535
#define STORE_MAX_DECISION_NAME 1024

/* Open the store of a device. bCreate: format an empty image (a device whose
** media holds no csq superblock and no data; -EROFS when it is read-only). A
** non-empty image with no csq superblock is refused ("not a csq device
** image"). */
int store_open(dev_device *pDev, dev_queue *pQ, int bCreate, store **ppStore, char **pzErr);
void store_unref(store *p);
dev_device *store_device(store *p);
/* 1 when the device is write protected (dev_read_only: an image this
** process may only read). Such a store reads, and follows other processes'
** commits, but never writes: no format, no settling of a prepared commit,
** and store_txn_begin fails with -EROFS. */
int store_read_only(const store *p);

/* The latest committed snapshot (checks the superblocks to see commits by
** other processes: 128 bytes to the host when nothing changed and the
** device has SLM; see store.c). The caller owns one reference. */
int store_snapshot(store *p, dev_queue *pQ, store_snap **ppSnap, char **pzErr);
void store_snap_unref(store_snap *pSnap);
void store_snap_ref(store_snap *pSnap); /* one more reference */
store_table *store_snap_table(const store_snap *pSnap, const char *zName);

/* Where the catalog records of pTab's row groups lie on the media, for a
** device that reads them itself (an Execute over a range of row groups,
** device/format/program.h): the records of apRg[i] start at byte
** *pOff + i * (CSQ_CATREC_HDR + CSQ_CATREC_CHUNK * nChunk) from block *pLba.
** 0, or -ENOENT when pTab is not a committed snapshot's table as the
** catalog holds it (a transaction's working copy, a clone). */
int store_table_catpos(const store_table *pTab, uint64_t *pLba, uint64_t *pOff);
/* XXH3-64 of the catalog records of row groups apRg[0..n), back to back,
** as store_cat_encode writes them: what a device reading them must find.
** 0 with *pHash, or -ENOMEM. */
int store_rg_records_hash(store_rg *const *apRg, int n, uint64_t *pHash);

/* Read chunks of a row group: aiCol[i] is a column index, or -1 for rowids;
** values are appended to aOut[i] (caller-initialised vectors). */
int store_read_chunks(store *p, dev_queue *pQ, const store_table *pTab, const store_rg *pRg,
                      const int *aiCol, int nCol, csq_vec *aOut, char **pzErr);
/* The distinct values of chunk iChunk (0 rowids, 1 + i column i) of pRg
** as its encoding records them: a dictionary's entries, 1 for a constant
** chunk, UINT32_MAX for plain TEXT (the encoder found more than half its
** values distinct); 0 for other encodings. Only a dictionary is read. */
int store_chunk_distinct(store *p, dev_queue *pQ, const store_table *pTab, const store_rg *pRg,
                         int iChunk, uint32_t *pnDistinct, char **pzErr);
/* Decoded rowids of a row group, cached in pRg (owned by pRg). */
int store_rg_rowids(store *p, dev_queue *pQ, const store_table *pTab, store_rg *pRg,
                    const int64_t **paRowid, char **pzErr);
/* 1 if the zone maps of pRg's chunks show that no row of it can satisfy
** pProg's predicate (csq_prog_zone_skip, device/format/program.h), else 0. */
struct csq_prog;
int store_rg_zone_skip(const store_rg *pRg, const struct csq_prog *pProg);
static inline int store_rg_deleted(const store_rg *pRg, uint32_t i) {
  return pRg->aDel && (pRg->aDel[i >> 3] >> (i & 7)) & 1;
}

/* ---- Transactions (one writer per store) ---- */
/* Take the writer lock, waiting up to busyTimeoutMs for another writer of
** this process or another one (-EBUSY after that); -EROFS on a read-only
** store. */
int store_txn_begin(store *p, dev_queue *pQ, int busyTimeoutMs, store_txn **ppTxn, char **pzErr);
/* The transaction's working view of a table (its own rows included). */
store_table *store_txn_table(store_txn *pTxn, const char *zName);
/* Names longer than STORE_MAX_NAME are refused (-ENAMETOOLONG). */
int store_txn_create_table(store_txn *pTxn, const char *zName, int nCol, const store_col *aCol,
                           char **pzErr);
int store_txn_drop_table(store_txn *pTxn, const char *zName, char **pzErr);
int store_txn_rename_table(store_txn *pTxn, const char *zOld, const char *zNew, char **pzErr);
/* Assign n fresh rowids (returns the first). */
int64_t store_txn_new_rowids(store_txn *pTxn, store_table *pTab, int64_t n);
void store_txn_saw_rowid(store_txn *pTxn, store_table *pTab, int64_t iRowid);
/* The largest rowid of a live row of pTab (*pbAny 0 when it has none): SQLite's
** base for the next rowid of a table without AUTOINCREMENT. Reads the
** rowids of row groups with deleted rows when their zone map says they may
** hold it. */
int store_txn_max_rowid(store_txn *pTxn, store_table *pTab, int64_t *pMax, int *pbAny,
                        char **pzErr);
/* Write rows [i0, i0+n) of aCol[0..nCol] (aCol[0] = rowids) as a new row
** group of the table, to free space. Visible to the transaction at once. */
int store_txn_append(store_txn *pTxn, store_table *pTab, const csq_vec *aCol, uint32_t i0,
                     uint32_t n, char **pzErr);
/* A row group encoded but not yet written: one extent's bytes (nblk
** blocks, block-aligned) and its chunk table. store_rg_encode touches no
** store state, so it may run on any thread (device/store/encq.c runs it
** off the inserting one); store_txn_append_encoded writes it as a new row
** group of the table, as store_txn_append would (pEnc stays the caller's,
** to free with store_enc_rg_free). nChunk is the table's columns + 1. */
typedef struct store_enc_rg {
  uint32_t nRow;
  int nChunk;
  store_chunk *aChunk;
  uint8_t *buf;
  uint64_t nblk;
} store_enc_rg;
int store_rg_encode(int nChunk, const char *zTable, const csq_vec *aCol, uint32_t i0, uint32_t n,
                    store_enc_rg **ppEnc, char **pzErr);
int store_txn_append_encoded(store_txn *pTxn, store_table *pTab, store_enc_rg *pEnc, char **pzErr);
void store_enc_rg_free(store_enc_rg *pEnc);
/* An encode queue (device/store/encq.c): a thread that encodes row groups
** handed to it, at most nDepth in flight, and returns them in order.
** store_encq_put swaps aCol's nChunk vectors with a free slot's (aCol comes
** back empty, its buffers reused), or returns -EAGAIN when nDepth are in
** flight: take one with store_encq_get first. store_encq_get returns the
** oldest, waiting for it if bWait (else *ppEnc may be NULL), NULL when
** nothing is in flight; an encoding error comes back there, with *pzErr
** (malloc'd). store_encq_free stops the thread and frees what is left. */
typedef struct store_encq store_encq;
int store_encq_new(int nChunk, const char *zTable, int nDepth, store_encq **ppQ);
int store_encq_put(store_encq *q, csq_vec *aCol, uint32_t nRow);
int store_encq_get(store_encq *q, int bWait, store_enc_rg **ppEnc, char **pzErr);
int store_encq_in_flight(store_encq *q);
int store_encq_depth(const store_encq *q);
void store_encq_free(store_encq *q);
/* Find the row with this rowid: *piRg, *piRow (-1 if not present). Deleted
** rows are found only if bDeleted. */
int store_txn_find(store_txn *pTxn, store_table *pTab, int64_t iRowid, int bDeleted, int *piRg,
                   uint32_t *piRow, char **pzErr);
int store_txn_delete(store_txn *pTxn, store_table *pTab, int iRg, uint32_t iRow, int bDelete,
                     char **pzErr);
/* Rewrite a small last row group together with new rows (keeps row groups
** from fragmenting under many small commits). aCol as for append. */
int store_txn_append_merge(store_txn *pTxn, store_table *pTab, const csq_vec *aCol, uint32_t i0,
                           uint32_t n, uint32_t nSmall, char **pzErr);
int store_txn_commit(store_txn *pTxn, char **pzErr); /* frees pTxn, success or not */
void store_txn_rollback(store_txn *pTxn);            /* frees pTxn */
int store_txn_dirty(const store_txn *pTxn);

/* ---- Transactions over several devices: the two-step commit ----
** (FORMAT.md, "Commit protocol"). One device of the transaction is the
** decider; every other one is prepared: store_txn_prepare writes its new
** catalog and records it in the superblock as prepared, not current, with
** where its outcome is decided. Then the decider commits as usual
** (store_txn_commit), and that commit is the decision: the transaction is
** committed iff the decider's committed catalog holds table zTable with a
** next-rowid counter of at least seq. Then each prepared transaction is
** finished with store_txn_commit (which flips to the prepared catalog), or,
** when the decider's commit failed or its outcome is unknown, with
** store_txn_settle. The writer lock of a prepared device is held until then.
**
** Anyone who meets a prepared commit later (a crash came between the steps)
** reads its outcome from the decider: store_snapshot shows the state the
** outcome gives, and whoever can take the writer lock (store_open,
** store_snapshot when it is free, store_txn_begin always) settles it on the
** media. The caller must make sure the decision cannot change until every
** prepared device is settled: only a writer that has locked (and so
** settled) all of them may raise that counter past seq - 1 again. */
typedef struct store_decision {
  uint8_t uuid[16];   /* the deciding image's id (store_image_id) */
  const char *zPath;  /* its device path as dev_path gives it (opened by path to read) */
  const char *zTable; /* the table on it whose next-rowid counter decides */
  int64_t seq;        /* committed iff that counter is at least seq */
} store_decision;
void store_image_id(store *p, uint8_t aId[16]);
/* Step 1 on a device other than the decider. 0, or an error (the
** transaction stays open and unprepared; roll it back). A transaction that
** changed nothing is left unprepared (0). */
int store_txn_prepare(store_txn *pTxn, const store_decision *pDec, char **pzErr);
int store_txn_prepared(const store_txn *pTxn);
/* Finish a prepared transaction by its decider's outcome, read from the
** decider's media: flipped to (*pbCommitted = 1) or dropped (0). Frees
** pTxn. On an error the prepared commit stays on the media for the next
** reader or writer to settle. store_txn_rollback of a prepared transaction
** does the same (the decider alone says which way it goes). */
int store_txn_settle(store_txn *pTxn, int *pbCommitted, char **pzErr);

/* Row groups and tables are reference counted / owned as described above. */
void store_rg_unref(store_rg *pRg);
void store_table_free(store_table *pTab);
store_table *store_table_clone(const store_table *pTab); /* shares (references) row groups */

/* Space accounting for csq_devices: blocks in use / high-water mark. */
void store_space(store *p, uint64_t *pnUsed, uint64_t *pnHigh);

#endif /* CSQ_DEVICE_STORE_H */
