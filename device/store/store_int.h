/*
** device/store/store_int.h - internals shared by the store's files (not an API).
**   device/store/superblock.c  superblock encode/decode/choose
**   device/store/catalog.c     catalog serialisation
**   device/store/space.c       free-space allocator
**   device/store/store.c       the store object, block I/O, superblocks and
**                              catalogs on the media, refresh, snapshots, reads
**   device/store/txn.c         transactions on one device and their commit
**   device/store/twostep.c     the two-step commit over several devices
*/
#ifndef CSQ_DEVICE_STORE_INT_H
#define CSQ_DEVICE_STORE_INT_H

#include "device/store/store.h"

#define CSQ_SB_MAGIC       "CSQIMG\0\1"
#define CSQ_CAT_MAGIC      "CSQCAT01"
#define CSQ_FORMAT_VERSION 1u /* catalogs; superblocks without a prepared commit */
/* a superblock that also carries a prepared commit (FORMAT.md, "Commit protocol") */
#define CSQ_SB_VERSION_PREPARED 2u
#define CSQ_SB_COPIES           2 /* blocks 0 and 1 */
#define CSQ_FIRST_DATA_LBA      2
/* Bytes of a superblock copy that every committed state changes (magic to
** high-water mark, the version included: see FORMAT.md "Superblock"). A
** reader that finds both copies' prefixes as it last saw them knows the
** image holds the state it last read (store.c, sb_unchanged). */
#define CSQ_SB_PREFIX    64
#define CSQ_SB_MAX_PATH  2048                    /* a prepared commit's decider path, bytes */
#define CSQ_SB_MAX_TABLE STORE_MAX_DECISION_NAME /* a prepared commit's decision table, bytes */

/* A prepared commit (superblock version 2): a catalog written and durable
** but not yet current, and where its fate is decided: it becomes current
** when table zTable of the image uuid (found at zPath) has a next-rowid
** counter of at least seq, and is dropped otherwise. */
typedef struct store_prep {
  uint64_t gen; /* the prepared catalog's generation: the current one + 1 */
  uint64_t catLba;
  uint32_t catBlocks;
  uint64_t catBytes;
  uint64_t catXxh3;
  uint8_t uuid[16]; /* the deciding image's id */
  int64_t seq;
  char zPath[CSQ_SB_MAX_PATH + 1];
  char zTable[CSQ_SB_MAX_TABLE + 1];
} store_prep;

typedef struct store_sb {
  uint32_t version; /* 1, or CSQ_SB_VERSION_PREPARED: prep is valid */
  uint64_t gen;
  uint64_t catLba;
  uint32_t catBlocks;
  uint64_t catBytes;
  uint64_t catXxh3;
  uint64_t hwm; /* first block never allocated */
  uint8_t uuid[16];
  uint64_t created;
  store_prep prep;
} store_sb;

/* superblock.c */
void store_sb_encode(const store_sb *pSb, uint8_t *aBlock);
/* 0 ok, -EBADMSG checksum/field error, -ENOENT no csq magic at all,
** -EPROTONOSUPPORT a valid copy of a format version this build does not
** know (*pVersion receives it, may be NULL). */
int store_sb_decode(const uint8_t *aBlock, store_sb *pSb, uint32_t *pVersion);
/* Of two decoded copies (rcs[i] their decode results), the one that counts:
** the valid one with the higher generation; on equal generations the one
** with a prepared commit, so that a prepare or a rollback interrupted
** between the copies is settled again rather than lost. -1 if neither is
** valid. */
int store_sb_choose(const store_sb *a, const int *rcs);

/* catalog.c: the catalog is every table with its row groups. */
int store_cat_encode(const store_snap *pSnap, uint32_t nextTabId, uint8_t **ppOut, size_t *pnOut);
int store_cat_decode(const uint8_t *p, size_t n, store_snap **ppSnap, uint32_t *pNextTabId,
                     char **pzErr);
void store_snap_free_tables(store_snap *pSnap);
store_rg *store_rg_clone(const store_rg *pRg); /* private copy, nRef = 1 */

/* space.c: extents of free blocks. */
typedef struct store_extent {
  uint64_t lba;
  uint64_t nblk;
  uint64_t gen; /* for deferred frees: generation that freed it */
} store_extent;
typedef struct store_freemap {
  store_extent *a; /* free extents, sorted by lba, coalesced */
  int n, nAlloc;
  uint64_t hwm;  /* first block never allocated */
  uint64_t nCap; /* namespace capacity in blocks */
} store_freemap;
int space_alloc(store_freemap *s, uint64_t nblk, uint64_t *pLba);
int space_free(store_freemap *s, uint64_t lba, uint64_t nblk);
void space_clear(store_freemap *s);
/* Rebuild from the set of used extents (unsorted). */
int space_rebuild(store_freemap *s, store_extent *aUsed, int nUsed, uint64_t hwm, uint64_t nCap);
uint64_t space_free_blocks(const store_freemap *s);

/* Growable byte buffer for encoders. */
typedef struct store_buf {
  uint8_t *a;
  size_t n, nAlloc;
  int oom;
} store_buf;
void sbuf_put(store_buf *b, const void *p, size_t n);
void sbuf_u8(store_buf *b, uint8_t v);
void sbuf_u16(store_buf *b, uint16_t v);
void sbuf_u32(store_buf *b, uint32_t v);
void sbuf_u64(store_buf *b, uint64_t v);
void sbuf_str(store_buf *b, const char *z); /* u16 length + bytes */

/* Bounds-checked reader for decoders: every get fails once past the end. */
typedef struct store_rd {
  const uint8_t *p;
  size_t n, i;
  int bad;
} store_rd;
uint8_t srd_u8(store_rd *r);
uint16_t srd_u16(store_rd *r);
uint32_t srd_u32(store_rd *r);
uint64_t srd_u64(store_rd *r);
int srd_bytes(store_rd *r, void *p, size_t n);
char *srd_str(store_rd *r); /* malloc'd, NUL-terminated; NULL when bad */

/* Reads of a catalog that other processes' commits keep rewriting before a
** reader gives up with -EBUSY (see store_refresh). */
#define STORE_REREAD_MAX 100

/* A store: one per device in the process (store.c keeps the registry). */
struct store {
  int nRef;
  dev_device *pDev;
  pthread_mutex_t mu;
  pthread_mutex_t writer;
  store_snap *pCur; /* newest committed snapshot known */
  store_sb sb;      /* its superblock */
  uint32_t nextTabId;
  store_freemap space;
  int bSpaceValid;     /* space describes pCur (else rebuild before writing) */
  store_extent *aPend; /* deferred frees, gen = generation that freed them */
  int nPend, nPendAlloc;
  store_snap *pLive; /* snapshots still referenced */
  int bShared;       /* other processes may open the image: re-read superblocks */
  int bReadOnly;     /* the device is write protected: read, never write nor lock */
  int bUndecided;    /* the superblock holds a prepared commit whose outcome was not
                        decided at the last look: look again at every refresh */
  int bSeen;         /* aSeen holds the prefixes of both superblock copies on the media */
  uint8_t aSeen[CSQ_SB_COPIES][CSQ_SB_PREFIX];
  store *pNext; /* registry */
};

/* A transaction: the writer lock held, private copies of the tables. */
struct store_txn {
  store *p;
  dev_queue *q;
  store_snap *pBase;
  store_sb sbBase; /* superblock of pBase: its catalog is freed at commit */
  int nTab;
  store_table **apTab; /* working copies, owned */
  uint32_t nextTabId;
  store_extent *aAlloc; /* allocated by this transaction */
  int nAlloc, nAllocAlloc;
  store_extent *aFree; /* committed extents this transaction frees at commit */
  int nFree, nFreeAlloc;
  int bDirty;
  /* after store_txn_prepare: */
  int bPrepared;
  store_snap *pPrep; /* the prepared snapshot; its tables are apTab (owned by t) */
  store_sb sbFlip;   /* the superblock that makes it current */
  store_prep prep;   /* the prepared commit as the superblock records it */
};

/* store.c: block I/O, in commands the device takes. */
/* Append to a growable extent array: 0 or -ENOMEM. */
int store_ext_push(store_extent **pa, int *pn, int *pnAlloc, uint64_t lba, uint64_t nblk,
                   uint64_t gen);
/* Block-aligned memory for nblk blocks, for the caller to free(); NULL on OOM. */
void *store_block_alloc(uint64_t nblk);
int store_io_read(dev_queue *q, uint64_t lba, uint64_t nblk, uint8_t *buf);
int store_io_write(dev_queue *q, uint64_t lba, uint64_t nblk, const uint8_t *buf);
/* A message for a failed I/O zWhat (malloc'd, the caller frees it). */
char *store_io_errmsg(store *p, dev_queue *q, int rc, const char *zWhat);

/* store.c: superblocks and catalogs on the media, the store's state. */
void store_snap_link(store *p, store_snap *s); /* s joins the live snapshots (p->mu held) */
void store_seen_written(store *p, const store_sb *pSb); /* both copies now hold *pSb */
/* The superblock that counts in blocks 0-1 (buf, 2 blocks): 0, 1 for an
** empty image, or an error with *pzErr naming zPath. */
int store_sb_from_blocks(const char *zPath, const uint8_t *buf, store_sb *pSb, char **pzErr);
/* Have the superblocks moved from the prefixes aSeen? 0 when unreadable. */
int store_sb_moved(dev_queue *q, uint8_t aSeen[CSQ_SB_COPIES][CSQ_SB_PREFIX]);
/* Write s's catalog to fresh space and fill the catalog fields of *pSb;
** blocks allocated are recorded in pTxn (NULL when formatting). */
int store_write_catalog(store *p, dev_queue *q, store_snap *s, uint32_t nextTabId, store_sb *pSb,
                        store_txn *pTxn, char **pzErr);
/* The superblock flip; *pbMaybe (may be NULL): a copy may have landed. */
int store_write_superblocks(store *p, dev_queue *q, const store_sb *pSb, char **pzErr,
                            int *pbMaybe);
int store_rebuild_space(store *p); /* the writer's free space anew (writer lock, p->mu) */
/* p->pCur as the media has it now; bLocked: the writer lock is held (a
** prepared commit found is settled). With p->mu held. */
int store_refresh(store *p, dev_queue *q, int bLocked, char **pzErr);

/* txn.c: the ends of a transaction that twostep.c shares. */
void store_txn_end(store_txn *t, int bKeep); /* free t, release the writer lock */
void store_distrust(store *p);               /* re-read the image before trusting it */
int store_txn_write_catalog(store_txn *t, store_snap **ppSnap, store_sb *pSb, char **pzErr);
void store_txn_finish(store_txn *t, store_snap *s, const store_sb *pSb); /* *pSb is durable */

/* twostep.c: a prepared commit found on the media, and one being flipped. */
/* Find the outcome of *pSb's prepared commit; *pEff the superblock that
** counts; settle it on the media when the writer lock is (or can be) held.
** With p->mu held. */
int store_settle_pending(store *p, dev_queue *q, int bLocked, store_sb *pSb, store_sb *pEff,
                         char **pzErr);
int store_txn_flip(store_txn *t, char **pzErr); /* make the prepared catalog current; frees t */

#endif /* CSQ_DEVICE_STORE_INT_H */
