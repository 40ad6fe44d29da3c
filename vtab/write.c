/*
** vtab/write.c - INSERT, UPDATE, DELETE and transactions of csq tables.
**
** Inserted rows collect in the table's buffer (one csq_vec per column, rowids
** first) and go to the device as a whole row group when the buffer reaches
** the row-group size, so a transaction of any size streams through a bounded
** buffer; a row group one statement filled is encoded on the table's encode
** thread meanwhile (see "The encode thread" below). Deletes mark rows in their row group's delete
*bitmap (a private
** copy inside the transaction). UPDATE is a delete plus an insert that keeps
** the rowid.
**
** The device transaction (store_txn) is per connection and device; it begins
** at the first write, on every member device of a striped table. Commit
** happens in xSync, once every csq table of the connection written in this
** transaction has flushed its buffer, because a failure in xSync still
** aborts SQLite's commit while one in xCommit would be ignored; striped
** tables commit in two steps (prepare, decide, flip: vtab/stripe.c). ROLLBACK TO undoes deletes
*from an undo log
** and removes the rows inserted after the savepoint (rows already written to
** a row group are marked deleted; the space returns at commit).
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/single_threaded.h>
#include "vtab/vtab.h"

void vt_tab_txn_reset(vt_tab *p) {
  p->markEpoch = 0;
  p->pTxnTab = NULL;
  /* row groups still with the encode thread are dropped with the
  ** transaction (a commit has written them all in xSync) */
  store_encq_free(p->pEncq);
  p->pEncq = NULL;
  sqlite3_free(p->aHeapHint);
  p->aHeapHint = NULL;
  p->nQ = p->iQHead = 0;
  p->rcBroken = 0;
  sqlite3_free(p->zBroken);
  p->zBroken = NULL;
  if (p->aBuf) {
    for (int i = 0; i <= p->s.nCol; i++) csq_vec_free(&p->aBuf[i]);
    sqlite3_free(p->aBuf);
    p->aBuf = NULL;
  }
  if (p->aStage) {
    for (int i = 0; i <= p->s.nCol; i++) csq_vec_free(&p->aStage[i]);
    sqlite3_free(p->aStage);
    p->aStage = NULL;
  }
  sqlite3_free(p->aBufDel);
  p->aBufDel = NULL;
  p->nBufDelAlloc = 0;
  sqlite3_free(p->aSpan);
  p->aSpan = NULL;
  p->nSpan = p->nSpanAlloc = 0;
  sqlite3_free(p->aUndo);
  p->aUndo = NULL;
  p->nUndo = p->nUndoAlloc = 0;
  sqlite3_free(p->aSave);
  p->aSave = NULL;
  p->nSave = p->nSaveAlloc = 0;
  sqlite3_free(p->aReplaced);
  p->aReplaced = NULL;
  p->nReplaced = p->nReplacedAlloc = 0;
  p->bufSeq0 = p->nSeq = 0;
  p->bInTxn = 0;
  p->bMaxRowid = 0;
  p->bMembersChecked = 0;
  p->bWrote = 0;
  p->bSaveBase = 0;
}

/* The transaction's working view of the table on member k. */
static store_table *member_table(vt_tab *p, int k) {
  vt_dev *d = p->apMem[k];
  return d->pTxn ? store_txn_table(d->pTxn, p->zName) : NULL;
}

/* Start (or join) the device transaction on every member and set up the
** write buffer. Members are locked in the order of their paths, so that
** writers of tables striped over the same devices in another order wait
** for each other instead of deadlocking. *ppTab: the coordinator's view,
** whose next-rowid counter numbers the rows of every member. */
static int ensure_txn(vt_tab *p, int bWrite, store_table **ppTab) {
  /* every row of an INSERT comes here: once the table has written in the
  ** open transaction, nothing below changes until the connection's device
  ** transactions or their catalogs do (pConn->txnEpoch), so the view found
  ** then serves without looking the table up by name again */
  if (bWrite && p->pTxnTab && p->txnEpoch == p->pConn->txnEpoch && p->bInTxn == 1 && p->bWrote) {
    *ppTab = p->pTxnTab;
    return SQLITE_OK;
  }
  char *zErr = NULL;
  /* read-only: refused before any lock (vtab/lock.c); a table that wrote
  ** in the open transaction passed this check then */
  int rcWritable = p->bInTxn == 1 && p->bWrote ? SQLITE_OK : vt_tab_writable(p);
  if (rcWritable) return rcWritable;
  for (;;) {
    vt_dev *d = NULL;
    for (int k = 0; k < p->nMem; k++) {
      vt_dev *m = p->apMem[k];
      if (!m->pTxn && (!d || strcmp(m->zKey, d->zKey) < 0)) d = m;
    }
    if (!d) break;
    int rc = store_txn_begin(d->pStore, d->pQ, vt_busy_ms(p->pConn), &d->pTxn, &zErr);
    p->pConn->txnEpoch++;
    if (rc) return vt_err(&p->base, rc, zErr);
  }
  if (bWrite && !p->bMembersChecked && p->nMem > 1) {
    /* all members locked: they must agree, or a crash tore the table */
    store_table **aTab = sqlite3_malloc64(sizeof(store_table *) * (size_t)p->nMem);
    store_snap **aSnap = sqlite3_malloc64(sizeof(store_snap *) * (size_t)p->nMem);
    int rc = aTab && aSnap ? vt_visible_members(p, aTab, aSnap, &zErr) : -ENOMEM;
    sqlite3_free(aTab);
    sqlite3_free(aSnap); /* every view came from a transaction: no snapshot to release */
    if (rc) return vt_err(&p->base, rc, zErr);
    p->bMembersChecked = 1;
  }
  if (!p->aBuf) {
    p->aBuf = sqlite3_malloc64(sizeof(csq_vec) * (size_t)(p->s.nCol + 1));
    if (!p->aBuf) return SQLITE_NOMEM;
    for (int i = 0; i <= p->s.nCol; i++) csq_vec_init(&p->aBuf[i]);
  }
  if (!p->aStage) {
    p->aStage = sqlite3_malloc64(sizeof(csq_vec) * (size_t)(p->s.nCol + 1));
    if (!p->aStage) return SQLITE_NOMEM;
    for (int i = 0; i <= p->s.nCol; i++) csq_vec_init(&p->aStage[i]);
  }
  if (!p->bInTxn) {
    store_table *pCoord = member_table(p, 0);
    p->nextRowid0 = pCoord ? pCoord->nextRowid : 1;
  }
  p->bInTxn = 1;
  *ppTab = member_table(p, 0);
  for (int k = 0; bWrite && k < p->nMem; k++) {
    if (!(k == 0 ? *ppTab : member_table(p, k))) {
      vt_set_error(&p->base, "csq: table %s is no longer on its device %s", p->zName,
                   p->apMem[k]->zKey);
      return SQLITE_ERROR;
    }
  }
  if (bWrite) {
    p->pTxnTab = *ppTab;
    p->txnEpoch = p->pConn->txnEpoch;
  }
  return SQLITE_OK;
}

/* The member the next row group goes to: the one holding the fewest row
** groups in the transaction (round-robin over a stripe's members; 0 for
** a one-device table). */
static int next_member(vt_tab *p) {
  int k = 0;
  for (int j = 1; j < p->nMem; j++) {
    store_table *a = member_table(p, j), *b = member_table(p, k);
    if (a && b && a->nRg < b->nRg) k = j;
  }
  return k;
}

/* Rows in aBuf; those still in the stage come after them (stage_rows). */
static uint32_t buf_rows(const vt_tab *p) {
  return p->aBuf ? p->aBuf[0].n : 0;
}

/* ---- The stage ----
** A row group's buffer is large (nCol + 1 vectors of 64 Ki values, tens of
** MB with the encode thread's two), so rows written into it one at a time
** store into memory long out of cache, one cache line per column and
** array, and push SQLite's own pages out of the cache as well. Rows are
** therefore written into a small stage that stays in cache, and moved into
** aBuf STAGE_ROWS at a time, one column after the other, as block copies.
**
** The stage is an extension of aBuf: its rows follow aBuf's in insert
** order (aBufDel covers both). Only the insert path adds to it; everything
** else in this file that looks at aBuf's rows, and every reader (through
** vt_write_settle), first moves it (unstage), so that code sees aBuf
** alone as before. */
#define STAGE_ROWS 512

static uint32_t stage_rows(const vt_tab *p) {
  return p->aStage ? p->aStage[0].n : 0;
}

/* The larger of want and twice have (growth by doubling, so that a row
** group filled by batches reallocates O(log n) times). */
static uint64_t grown(uint64_t have, uint64_t want) {
  return want > 2 * have ? want : 2 * have;
}

/* Map the pages of n bytes at z now, in one call, instead of one page fault
** per page as the first rows reach them: a row group's buffer is tens of MB
** of fresh memory, and a fault costs most in a virtual machine. Only the
** pages z covers whole are asked for (the allocator's own header shares the
** first). A kernel without MADV_POPULATE_WRITE (before Linux 5.14) refuses
** it, and then the pages fault in as before: nothing is lost, so the
** outcome is not looked at. */
static void prefault(void *z, size_t n) {
  uintptr_t a = ((uintptr_t)z + 4095) & ~(uintptr_t)4095;
  uintptr_t e = ((uintptr_t)z + n) & ~(uintptr_t)4095;
  if (e > a) (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
}

/* Every array of v, as prefault does. */
static void vec_prefault(csq_vec *v) {
  prefault(v->aCls, v->nCap);
  prefault(v->aVal, (size_t)v->nCap * sizeof(csq_val));
  prefault(v->aLen, (size_t)v->nCap * sizeof(uint32_t));
  prefault(v->aHeap, v->nHeapCap);
}

/* Move the stage's rows to the end of aBuf. Either all move or, out of
** memory, none (SQLITE_NOMEM; aBuf may have grown). */
static int unstage(vt_tab *p) {
  uint32_t m = stage_rows(p);
  if (m == 0) return SQLITE_OK;
  /* room first, in every column, so that the copy below cannot fail half way */
  for (int i = 0; i <= p->s.nCol; i++) {
    csq_vec *v = &p->aBuf[i];
    const csq_vec *w = &p->aStage[i];
    uint32_t nCap = v->nCap;
    uint64_t nHeapCap = v->nHeapCap;
    uint64_t nRow = (uint64_t)v->n + m, nByte = v->nHeap + w->nHeap;
    int bWhole = 0; /* grown to a whole row group at once */
    if (nRow > nCap) {
      uint64_t c = grown(nCap, nRow);
      /* a buffer never holds more than a row group, and one that grew past
      ** VT_SMALL_ROWGROUP rows is taken to be a bulk load that will fill
      ** it: room for all at once, not three more doublings, each copying
      ** the rows and touching new pages */
      if (c > (uint64_t)p->s.nRowGroup && nRow <= (uint64_t)p->s.nRowGroup) {
        c = (uint64_t)p->s.nRowGroup;
      } else if (c > VT_SMALL_ROWGROUP && c < (uint64_t)p->s.nRowGroup) {
        c = (uint64_t)p->s.nRowGroup;
        bWhole = 1;
      }
      if (c > UINT32_MAX) return SQLITE_NOMEM;
      nCap = (uint32_t)c;
    }
    if (w->nHeap > 0 && nByte > nHeapCap) nHeapCap = grown(nHeapCap, nByte);
    if (bWhole && nByte > 0) {
      /* the bytes the rows so far had, per row, for the whole row group
      ** (with slack: sizes vary) */
      uint64_t nWant = nByte / nRow * nCap;
      nWant += nWant / 8;
      if (nWant > nHeapCap) nHeapCap = nWant;
    }
    if (csq_vec_reserve(v, nCap, nHeapCap)) return SQLITE_NOMEM;
    if (bWhole) vec_prefault(v);
  }
  for (int i = 0; i <= p->s.nCol; i++) {
    csq_vec *v = &p->aBuf[i];
    csq_vec *w = &p->aStage[i];
    uint32_t d = v->n;
    memcpy(v->aCls + d, w->aCls, m);
    memcpy(v->aVal + d, w->aVal, (size_t)m * sizeof(csq_val));
    memcpy(v->aLen + d, w->aLen, (size_t)m * sizeof(uint32_t));
    if (w->nHeap > 0) {
      /* the stage's bytes lie in row order from offset 0: one block, and
      ** each TEXT or BLOB value's offset moves by where it lands */
      uint64_t base = v->nHeap;
      memcpy(v->aHeap + base, w->aHeap, w->nHeap);
      for (uint32_t k = 0; k < m; k++)
        if (w->aCls[k] == CSQ_TEXT || w->aCls[k] == CSQ_BLOB) v->aVal[d + k].off += base;
      v->nHeap += w->nHeap;
    }
    v->n = d + m;
    v->clsMask |= w->clsMask;
    csq_vec_reset(w);
  }
  return SQLITE_OK;
}

static int grow(void **pa, int *pnAlloc, int n, size_t sz) {
  if (n < *pnAlloc) return SQLITE_OK;
  int nNew = *pnAlloc ? *pnAlloc * 2 : 16;
  void *a = sqlite3_realloc64(*pa, (sqlite3_uint64)nNew * sz);
  if (!a) return SQLITE_NOMEM;
  *pa = a;
  *pnAlloc = nNew;
  return SQLITE_OK;
}

static int rg_index(const store_table *pTab, const store_rg *pRg) {
  for (int g = pTab->nRg - 1; g >= 0; g--)
    if (pTab->apRg[g] == pRg) return g;
  return -1;
}

static int add_span(vt_tab *p, store_rg *pRg, int iMem, int64_t seq0, uint32_t n) {
  int rc = grow((void **)&p->aSpan, &p->nSpanAlloc, p->nSpan, sizeof(vt_span));
  if (rc) return rc;
  p->aSpan[p->nSpan].pRg = pRg;
  p->aSpan[p->nSpan].iMem = iMem;
  p->aSpan[p->nSpan].seq0 = seq0;
  p->aSpan[p->nSpan].n = n;
  p->nSpan++;
  return SQLITE_OK;
}

/* ---- The encode thread ----
** A full row group without deleted rows goes to
** the table's encode queue (device/store/encq.c): its thread encodes it
** while SQLite goes on inserting, and this thread writes the encoded
** extent when it comes back (all device I/O of the transaction stays on
** this thread). At most VT_ENCQ_DEPTH row groups are in flight, besides
** the one filling, so memory stays bounded; a producer that finds the
** queue full writes the oldest first.
**
** Everything that looks at the table's rows (a lookup by rowid, the
** largest rowid, ROLLBACK TO, a reader, xSync) first settles the queue:
** every row group in flight is written and gets its span, and from there
** on the state is the one the synchronous path would have made. A row
** group that fails to encode or to be written leaves the transaction
** broken from its first row on: every later write, read and the commit
** fail with that error, until a ROLLBACK (TO a savepoint before that row)
** removes the rows it held. */

/* The error of a broken transaction, on pVtab (SQLite code). */
static int broken_error(vt_tab *p) {
  vt_set_error(&p->base, "%s", p->zBroken ? p->zBroken : "csq: writing a row group failed");
  return p->rcBroken;
}

/* Mark the transaction broken from sequence number seq0 on (the earliest
** failure counts). Takes zErr (malloc'd). */
static void set_broken(vt_tab *p, int rc, char *zErr, int64_t seq0) {
  if (!p->rcBroken || seq0 < p->brokenSeq0) {
    sqlite3_free(p->zBroken);
    p->zBroken = sqlite3_mprintf("csq: table %s: writing a row group of rows inserted in this "
                                 "transaction failed: %s (the transaction cannot commit with "
                                 "those rows: roll it back)",
                                 p->zName, zErr ? zErr : "device error");
    p->rcBroken = vt_rc_from(rc);
    if (p->rcBroken == SQLITE_OK) p->rcBroken = SQLITE_IOERR;
    p->brokenSeq0 = seq0;
  }
  free(zErr);
}

/* Take up to nMax row groups back from the encode thread, oldest first,
** and write them: waiting for each (bWait), or only those already encoded.
** Failures mark the transaction broken (set_broken). */
static void drain_queue(vt_tab *p, int bWait, int nMax) {
  for (; p->nQ > 0 && nMax > 0; nMax--) {
    store_enc_rg *pEnc = NULL;
    char *zErr = NULL;
    int rc = store_encq_get(p->pEncq, bWait, &pEnc, &zErr);
    if (rc == 0 && !pEnc) break; /* still encoding */
    int64_t seq0 = p->aQSeq0[p->iQHead];
    uint32_t n = p->aQRows[p->iQHead];
    p->iQHead = (p->iQHead + 1) % VT_ENCQ_DEPTH;
    p->nQ--;
    /* the member is chosen now, as the synchronous path would have at this
    ** point: row groups reach the members in the order they were filled */
    int k = next_member(p);
    store_table *pTab = member_table(p, k);
    if (rc == 0 && p->rcBroken && seq0 >= p->brokenSeq0) {
      /* after a failed one: nothing to keep, a rollback removes its rows */
    } else if (rc == 0 && !pTab) {
      rc = -ENOENT;
      zErr = dev_mprintf("the table is no longer on its device %s", p->apMem[k]->zKey);
    } else if (rc == 0) {
      rc = store_txn_append_encoded(p->apMem[k]->pTxn, pTab, pEnc, &zErr);
      if (rc == 0 && add_span(p, pTab->apRg[pTab->nRg - 1], k, seq0, n)) {
        /* written, but ROLLBACK TO could not find its rows */
        rc = -ENOMEM;
        zErr = strdup("out of memory");
      }
    }
    store_enc_rg_free(pEnc);
    if (rc)
      set_broken(p, rc, zErr, seq0);
    else
      free(zErr);
  }
}

int vt_write_settle(vt_tab *p, char **pzErr) {
  if (unstage(p)) {
    *pzErr = strdup("out of memory");
    return -ENOMEM;
  }
  drain_queue(p, 1, VT_ENCQ_DEPTH);
  if (!p->rcBroken) return 0;
  *pzErr = p->zBroken ? strdup(p->zBroken) : NULL;
  return -EIO;
}

/* settle, with the error on pVtab */
static int settle(vt_tab *p) {
  drain_queue(p, 1, VT_ENCQ_DEPTH);
  return p->rcBroken ? broken_error(p) : SQLITE_OK;
}

/* The statement run that writes the buffer's first row (SQLite's
** counter of runs of that statement), to tell at the end whether one run
** filled the buffer (INSERT ... SELECT) or many (a shell's .import, one
** INSERT per row). */
static void note_filler(vt_tab *p) {
  p->pFillStmt = NULL;
  for (sqlite3_stmt *s = sqlite3_next_stmt(p->pConn->db, NULL); s;
       s = sqlite3_next_stmt(p->pConn->db, s)) {
    if (sqlite3_stmt_busy(s) && !sqlite3_stmt_readonly(s)) {
      p->pFillStmt = s;
      p->nFillRun = sqlite3_stmt_status(s, SQLITE_STMTSTATUS_RUN, 0);
      return;
    }
  }
}

/* Whether a full buffer goes to the encode thread. Once a process has a
** second thread, glibc's stdio takes a lock for every character it reads,
** which costs a shell reading its .import file row by row more than the
** thread saves; so the thread is started for a buffer that one statement
** run filled, or in a process that has threads already. */
static int use_thread(vt_tab *p) {
  if (p->pEncq || !__libc_single_threaded) return 1;
  sqlite3_stmt *s = p->pFillStmt;
  if (!s) return 0;
  for (sqlite3_stmt *x = sqlite3_next_stmt(p->pConn->db, NULL); x;
       x = sqlite3_next_stmt(p->pConn->db, x))
    if (x == s) /* the statement still exists, in the same run */
      return sqlite3_stmt_busy(s) &&
             sqlite3_stmt_status(s, SQLITE_STMTSTATUS_RUN, 0) == p->nFillRun;
  return 0;
}

/* Hand the full buffer to the encode thread; *pbDone 0 when the caller is
** to write it itself (a queue cannot be had). The thread starts here, at
** the first full row group, so that a session that never fills one (a
** shell's row-by-row .import of a small file) runs single-threaded. */
static int queue_buffer(vt_tab *p, uint32_t n, int *pbDone) {
  *pbDone = 0;
  if (!p->pEncq && store_encq_new(p->s.nCol + 1, p->zName, VT_ENCQ_DEPTH, &p->pEncq) != 0) {
    p->pEncq = NULL;
    return SQLITE_OK;
  }
  drain_queue(p, 0, VT_ENCQ_DEPTH);
  /* full: the oldest is written first, waiting for it */
  if (p->nQ == VT_ENCQ_DEPTH) drain_queue(p, 1, 1);
  if (p->rcBroken) return broken_error(p);
  if (!p->aHeapHint) p->aHeapHint = sqlite3_malloc64(sizeof(uint64_t) * (size_t)(p->s.nCol + 1));
  for (int i = 0; p->aHeapHint && i <= p->s.nCol; i++) p->aHeapHint[i] = p->aBuf[i].nHeap;
  if (store_encq_put(p->pEncq, p->aBuf, n) != 0) return SQLITE_OK; /* cannot happen: room made */
  int i = (p->iQHead + p->nQ) % VT_ENCQ_DEPTH;
  p->aQSeq0[i] = p->bufSeq0;
  p->aQRows[i] = n;
  p->nQ++;
  p->bufSeq0 = p->nSeq;
  *pbDone = 1;
  return SQLITE_OK;
}

/* Write the buffered rows as a row group, to the member holding the fewest
** row groups (round-robin over a stripe's members). bMerge: rewrite a small
** last row group of that member together with them (used at commit, when
** no savepoint can refer to the rows any more). bSync: encode them here,
** else a full buffer goes to the encode thread (its member is chosen when
** the thread hands it back, in order). */
static int flush_buffer(vt_tab *p, int bMerge, int bSync) {
  int rcStage = unstage(p);
  if (rcStage) return rcStage;
  uint32_t n = buf_rows(p);
  if (n > 0 && !bMerge && !bSync && !p->rcBroken && use_thread(p)) {
    int nDel = 0;
    for (uint32_t i = 0; i < n; i++) nDel += p->aBufDel[i];
    if (nDel == 0) {
      int bDone;
      int rc = queue_buffer(p, n, &bDone);
      if (rc || bDone) return rc;
    }
  }
  /* in order: what the thread holds goes first */
  int rcSettle = settle(p);
  if (rcSettle || n == 0) return rcSettle;
  int k = next_member(p);
  store_table *pTab = member_table(p, k);
  store_txn *t = p->apMem[k]->pTxn;
  if (!pTab) {
    vt_set_error(&p->base, "csq: table %s is no longer on its device %s", p->zName,
                 p->apMem[k]->zKey);
    return SQLITE_ERROR;
  }
  char *zErr = NULL;
  int nDel = 0;
  for (uint32_t i = 0; i < n; i++) nDel += p->aBufDel[i];
  /* rows deleted in the buffer need not reach the device, unless a
  ** savepoint or an aborting statement may bring them back */
  if (nDel == (int)n && p->nSave == 0 && p->markEpoch == 0) goto done;
  int rc;
  if (bMerge && nDel == 0) {
    rc = store_txn_append_merge(t, pTab, p->aBuf, 0, n, VT_SMALL_ROWGROUP, &zErr);
  } else {
    rc = store_txn_append(t, pTab, p->aBuf, 0, n, &zErr);
  }
  if (rc) return vt_err(&p->base, rc, zErr);
  store_rg *pRg = pTab->apRg[pTab->nRg - 1];
  if (!bMerge) {
    rc = add_span(p, pRg, k, p->bufSeq0, n);
    if (rc) return rc;
  }
  for (uint32_t i = 0; i < n && nDel; i++) {
    if (!p->aBufDel[i]) continue;
    rc = store_txn_delete(t, pTab, pTab->nRg - 1, i, 1, &zErr);
    if (rc) return vt_err(&p->base, rc, zErr);
  }
done:
  for (int i = 0; i <= p->s.nCol; i++) csq_vec_reset(&p->aBuf[i]);
  p->bufSeq0 = p->nSeq;
  return SQLITE_OK;
}

static int undo_push(vt_tab *p, int iMem, store_rg *pRg, uint32_t iRow, int64_t seq) {
  int rc = grow((void **)&p->aUndo, &p->nUndoAlloc, p->nUndo, sizeof(vt_undo));
  if (rc) return rc;
  p->aUndo[p->nUndo].iMem = iMem;
  p->aUndo[p->nUndo].pRg = pRg;
  p->aUndo[p->nUndo].iRow = iRow;
  p->aUndo[p->nUndo].seq = seq;
  p->nUndo++;
  return SQLITE_OK;
}

/* Find a live row by rowid: in the buffer (*piBuf >= 0) or on member
** *piMem's device (*piRg >= 0). */
static int locate(vt_tab *p, int64_t iRowid, int64_t *piBuf, int *piMem, int *piRg,
                  uint32_t *piRow) {
  *piBuf = -1;
  *piRg = -1;
  *piMem = 0;
  int rcSettle = unstage(p);
  if (rcSettle == SQLITE_OK) rcSettle = settle(p); /* rows with the encode thread: on the device */
  if (rcSettle) return rcSettle;
  uint32_t n = buf_rows(p);
  for (uint32_t i = n; i-- > 0;) {
    if (p->aBuf[0].aVal[i].i == iRowid && !p->aBufDel[i]) {
      *piBuf = i;
      return SQLITE_OK;
    }
  }
  for (int k = 0; k < p->nMem; k++) {
    char *zErr = NULL;
    store_table *pTab = member_table(p, k);
    if (!pTab) continue;
    int rc = store_txn_find(p->apMem[k]->pTxn, pTab, iRowid, 0, piRg, piRow, &zErr);
    if (rc) return vt_err(&p->base, rc, zErr);
    if (*piRg >= 0) {
      *piMem = k;
      return SQLITE_OK;
    }
  }
  return SQLITE_OK;
}

static int delete_row(vt_tab *p, int64_t iRowid) {
  if (p->bMaxRowid && iRowid >= p->iMaxRowid) p->bMaxRowid = 0;
  int64_t iBuf;
  int iRg, k;
  uint32_t iRow;
  int rc = locate(p, iRowid, &iBuf, &k, &iRg, &iRow);
  if (rc) return rc;
  if (iBuf >= 0) {
    p->aBufDel[iBuf] = 1;
    return undo_push(p, 0, NULL, 0, p->bufSeq0 + iBuf);
  }
  if (iRg < 0) return SQLITE_OK; /* already gone */
  char *zErr = NULL;
  store_table *pTab = member_table(p, k);
  store_rg *pRg = pTab->apRg[iRg];
  int64_t seq = -1;
  if (pRg->txnState == 2) {
    for (int i = 0; i < p->nSpan; i++)
      if (p->aSpan[i].pRg == pRg) seq = p->aSpan[i].seq0 + iRow;
  }
  rc = store_txn_delete(p->apMem[k]->pTxn, pTab, iRg, iRow, 1, &zErr);
  if (rc) return vt_err(&p->base, rc, zErr);
  if (p->nRowEst > 0) p->nRowEst--;
  if (seq >= 0) return undo_push(p, 0, NULL, 0, seq);
  return undo_push(p, k, pTab->apRg[iRg], iRow, -1);
}

static int is_autoinc(const vt_schema *s) {
  return s->iIpk >= 0 && s->aCol[s->iIpk].bAutoinc;
}

/* The largest rowid of a live row, over every member and the buffer
** (p->iMaxRowid, kept while p->bMaxRowid). */
static int max_rowid(vt_tab *p, int64_t *pMax, int *pbAny) {
  if (!p->bMaxRowid) {
    int64_t best = 0;
    int bAny = 0;
    int rcSettle = unstage(p);
    if (rcSettle == SQLITE_OK) rcSettle = settle(p);
    if (rcSettle) return rcSettle;
    for (int k = 0; k < p->nMem; k++) {
      store_table *pTab = member_table(p, k);
      int64_t m = 0;
      int bHas = 0;
      char *zErr = NULL;
      int rc = pTab ? store_txn_max_rowid(p->apMem[k]->pTxn, pTab, &m, &bHas, &zErr) : 0;
      if (rc) return vt_err(&p->base, rc, zErr);
      if (bHas && (!bAny || m > best)) best = m, bAny = 1;
    }
    for (uint32_t i = 0; i < buf_rows(p); i++) {
      int64_t r = p->aBuf[0].aVal[i].i;
      if (!p->aBufDel[i] && (!bAny || r > best)) best = r, bAny = 1;
    }
    p->iMaxRowid = best;
    p->bMaxAny = bAny;
    p->bMaxRowid = 1;
  }
  *pMax = p->iMaxRowid;
  *pbAny = p->bMaxAny;
  return SQLITE_OK;
}

static int rowid_exists(vt_tab *p, store_table *pTab, int64_t iRowid, int *pbExists) {
  *pbExists = 0;
  if (is_autoinc(&p->s)) {
    /* AUTOINCREMENT's counter counts inserted rowids only (an UPDATE may
    ** move a row above it, as in SQLite), so the bound is the largest now */
    int64_t iMax;
    int bAny;
    int rc = max_rowid(p, &iMax, &bAny);
    if (rc || !bAny || iRowid > iMax) return rc;
  } else if (iRowid >= pTab->nextRowid && pTab->nextRowid < INT64_MAX) {
    return SQLITE_OK; /* above every rowid ever used */
  }
  int64_t iBuf;
  int iRg, k;
  uint32_t iRow;
  int rc = locate(p, iRowid, &iBuf, &k, &iRg, &iRow);
  *pbExists = iBuf >= 0 || iRg >= 0;
  return rc;
}

/* A rowid for a new row, by SQLite's rules: with AUTOINCREMENT one more
** than any the table ever held; without, one more than the largest in the
** table now, or when that is the largest integer, an unused one at random. */
static int new_rowid(vt_tab *p, store_table *pTab, int64_t *piRowid) {
  if (is_autoinc(&p->s)) {
    /* SQLite takes one more than the larger of its counter and the largest
    ** rowid now: an UPDATE may have moved a row above the counter */
    int64_t iMax;
    int bAny;
    int rc = max_rowid(p, &iMax, &bAny);
    if (rc) return rc;
    if (bAny) store_txn_saw_rowid(p->pDev->pTxn, pTab, iMax);
    if (pTab->nextRowid == INT64_MAX) {
      vt_set_error(&p->base, "database or disk is full");
      return SQLITE_FULL;
    }
    *piRowid = store_txn_new_rowids(p->pDev->pTxn, pTab, 1);
    return SQLITE_OK;
  }
  int64_t iMax = 0;
  int bAny = 0;
  int rc = max_rowid(p, &iMax, &bAny);
  if (rc) return rc;
  if (!bAny || iMax < INT64_MAX) {
    *piRowid = bAny ? iMax + 1 : 1;
    return SQLITE_OK;
  }
  for (int i = 0; i < 100; i++) {
    int64_t r;
    sqlite3_randomness(sizeof(r), &r);
    r = (int64_t)((uint64_t)r >> 1);
    if (r == 0) continue;
    int bExists;
    rc = rowid_exists(p, pTab, r, &bExists);
    if (rc) return rc;
    if (!bExists) {
      *piRowid = r;
      return SQLITE_OK;
    }
  }
  vt_set_error(&p->base, "database or disk is full");
  return SQLITE_FULL;
}

/* The rowid a written row asks for: *pbGiven = 0 when SQLite leaves it to
** the table (INSERT with a NULL rowid and rowid alias). */
static int given_rowid(vt_tab *p, sqlite3_value **argv, int bUpdate, int64_t *piRowid,
                       int *pbGiven) {
  const vt_schema *s = &p->s;
  sqlite3_value *pIpk = s->iIpk >= 0 ? argv[2 + s->iIpk] : NULL;
  int64_t iOld = bUpdate ? sqlite3_value_int64(argv[0]) : 0;
  *pbGiven = 0;
  *piRowid = 0;
  /* the rowid alias wins unless it kept the old value while the statement
  ** set rowid (or _rowid_, oid) by name */
  sqlite3_value *pVal = argv[1];
  if (pIpk && (sqlite3_value_type(pIpk) != SQLITE_NULL || bUpdate)) {
    pVal = pIpk;
    if (bUpdate && sqlite3_value_type(pIpk) == SQLITE_INTEGER &&
        sqlite3_value_int64(pIpk) == iOld && sqlite3_value_type(argv[1]) != SQLITE_NULL)
      pVal = argv[1];
  }
  if (bUpdate && sqlite3_value_type(argv[1]) == SQLITE_NULL) pVal = argv[1]; /* SET rowid = NULL */
  if (sqlite3_value_type(pVal) == SQLITE_NULL && !bUpdate) return SQLITE_OK;
  /* a rowid takes its value with INTEGER affinity, and is never NULL once given */
  csq_vec tmp;
  csq_vec_init(&tmp);
  int e = vt_push_value(&tmp, pVal, VT_AFF_INTEGER);
  int cls = e == 0 ? tmp.aCls[0] : 0;
  int64_t v = cls == CSQ_INT ? tmp.aVal[0].i : 0;
  csq_vec_free(&tmp);
  if (e) return SQLITE_NOMEM;
  if (cls != CSQ_INT) {
    vt_set_error(&p->base, "datatype mismatch");
    return SQLITE_MISMATCH;
  }
  *piRowid = v;
  *pbGiven = 1;
  return SQLITE_OK;
}

/* UPDATE OR REPLACE that moves a row onto rowid iRowid deletes the row
** there. SQLite hands a virtual table each row's new values as computed
** when the statement read it, so if the same statement goes on to update
** rowid iRowid it would write the deleted row's values over the moved row,
** where a native table updates the moved row again. Such a later update is
** refused (see write_row); this notes the rowids of the running statement. */
static int note_replaced(vt_tab *p, int64_t iRowid) {
  uint64_t key = p->pConn->stmtEpoch;
  if (key != p->replacedKey) {
    p->nReplaced = 0;
    p->replacedKey = key;
  }
  int rc = grow((void **)&p->aReplaced, &p->nReplacedAlloc, p->nReplaced, sizeof(int64_t));
  if (rc) return rc;
  p->aReplaced[p->nReplaced++] = iRowid;
  return SQLITE_OK;
}

static int was_replaced(vt_tab *p, int64_t iRowid) {
  if (p->nReplaced == 0 || p->replacedKey != p->pConn->stmtEpoch) return 0;
  for (int i = 0; i < p->nReplaced; i++)
    if (p->aReplaced[i] == iRowid) return 1;
  return 0;
}

/* Room for a whole row group in every vector of the empty buffer, so that
** filling it never copies what it holds (a vector that grows by doubling
** moves itself at each step), and the column's bytes of the last row group
** handed over for its heap. Only once a row group was filled in this
** transaction: a short transaction keeps a small buffer. */
static int buffer_reserve(vt_tab *p) {
  uint32_t nCap = (uint32_t)p->s.nRowGroup;
  for (int i = 0; i <= p->s.nCol; i++) {
    csq_vec *v = &p->aBuf[i];
    uint64_t nHeap = p->aHeapHint ? p->aHeapHint[i] : 0;
    if (v->n > 0 || (v->nCap >= nCap && v->nHeapCap >= nHeap)) continue;
    if (v->nCap < nCap) csq_vec_free(v);                             /* empty: nothing to move */
    if (csq_vec_reserve(v, nCap, nHeap + nHeap / 8)) return -ENOMEM; /* slack: sizes vary */
    vec_prefault(v);
  }
  return 0;
}

/* Room for nRow rows in every vector of the stage (stage_row writes in
** place), and for their bytes as many as the last batch had (the stage's
** vectors keep their buffers). aStage[0]'s capacity is the least of
** them: only this grows it. */
static int stage_reserve(vt_tab *p, uint32_t nRow) {
  for (int i = 0; i <= p->s.nCol; i++)
    if (p->aStage[i].nCap < nRow && csq_vec_reserve(&p->aStage[i], nRow, 0)) return -ENOMEM;
  return 0;
}

/* A row's values into the stage, at its row r (every vector of the stage
** holds r values and has room for STAGE_ROWS: stage_reserve), each as
** vt_push_value (vtab/affinity.c) stores it. The classes that need no
** conversion are written here in place; the rest, and TEXT that does not
** fit the stage's heap, take vt_push_value. On failure (-ENOMEM) vectors
** may hold r + 1 values; the caller truncates them. */
static int stage_row(vt_tab *p, sqlite3_value **argv, int64_t iRowid, uint32_t r) {
  const vt_schema *s = &p->s;
  csq_vec *aStage = p->aStage;
  csq_vec *v = &aStage[0];
  v->aCls[r] = CSQ_INT;
  v->aVal[r].i = iRowid;
  v->aLen[r] = 0;
  v->n = r + 1;
  v->clsMask |= 1u << CSQ_INT;
  const int nCol = s->nCol, iIpk = s->iIpk;
  for (int i = 0; i < nCol; i++) {
    v = &aStage[i + 1];
    if (i == iIpk) {
      /* the rowid alias is held as the rowid, in aStage[0] */
      v->aCls[r] = CSQ_NULL;
      v->aVal[r].i = 0;
      v->aLen[r] = 0;
      v->n = r + 1;
      v->clsMask |= 1u << CSQ_NULL;
      continue;
    }
    sqlite3_value *pVal = argv[2 + i];
    const char aff = s->aCol[i].aff;
    int t = sqlite3_value_type(pVal);
    if (t == SQLITE_INTEGER && aff != VT_AFF_TEXT) {
      int64_t x = sqlite3_value_int64(pVal);
      if (aff == VT_AFF_REAL) {
        v->aCls[r] = CSQ_REAL;
        v->aVal[r].r = (double)x;
        v->clsMask |= 1u << CSQ_REAL;
      } else {
        v->aCls[r] = CSQ_INT;
        v->aVal[r].i = x;
        v->clsMask |= 1u << CSQ_INT;
      }
      v->aLen[r] = 0;
      v->n = r + 1;
    } else if (t == SQLITE_FLOAT && (aff == VT_AFF_REAL || aff == VT_AFF_BLOB)) {
      /* in other columns integral REALs become INTEGERs: vt_push_value */
      double x = sqlite3_value_double(pVal);
      /* an integral REAL goes through an integer in a REAL column: -0.0
      ** comes back as 0.0, every other such value as itself */
      if (aff == VT_AFF_REAL && x == 0.0) x = 0.0;
      v->aCls[r] = CSQ_REAL;
      v->aVal[r].r = x;
      v->aLen[r] = 0;
      v->n = r + 1;
      v->clsMask |= 1u << CSQ_REAL;
    } else if (t == SQLITE_NULL) {
      v->aCls[r] = CSQ_NULL;
      v->aVal[r].i = 0;
      v->aLen[r] = 0;
      v->n = r + 1;
      v->clsMask |= 1u << CSQ_NULL;
    } else {
      /* TEXT in a column of TEXT or BLOB affinity stays as it is */
      const unsigned char *z = NULL;
      uint32_t nByte = 0;
      if (t == SQLITE_TEXT && aff < VT_AFF_NUMERIC) {
        z = sqlite3_value_text(pVal);
        nByte = (uint32_t)sqlite3_value_bytes(pVal);
      }
      if (z && v->aHeap && v->nHeap + nByte <= v->nHeapCap) {
        csq_copy_short(v->aHeap + v->nHeap, z, nByte);
        v->aCls[r] = CSQ_TEXT;
        v->aVal[r].off = v->nHeap;
        v->aLen[r] = nByte;
        v->nHeap += nByte;
        v->n = r + 1;
        v->clsMask |= 1u << CSQ_TEXT;
      } else {
        int e = vt_push_value(v, pVal, aff);
        if (e) return e;
      }
    }
  }
  return 0;
}

/* Write a row: an INSERT (!bUpdate) or the new version of row iOld (an
** UPDATE). Every constraint is checked before anything changes, so that a
** row that fails leaves the table as it was (FAIL keeps the statement's
** earlier rows, ABORT undoes them through the statement savepoint). A
** failed constraint is reported with SQLite's extended code even under OR
** IGNORE: SQLite then skips the row without counting it as a change (the
** module declares SQLITE_VTAB_CONSTRAINT_SUPPORT). */
static int write_row_checked(vt_tab *p, store_table *pTab, sqlite3_value **argv, int bUpdate,
                             int64_t iOld, sqlite3_int64 *pRowid) {
  vt_schema *s = &p->s;
  int64_t iRowid;
  int bGiven;
  int rc = given_rowid(p, argv, bUpdate, &iRowid, &bGiven);
  if (rc) return rc;
  if (!bUpdate && is_autoinc(s)) {
    /* AUTOINCREMENT counts every row an INSERT tries, also one that a
    ** constraint then fails or OR IGNORE skips, as SQLite's counter does */
    if (!bGiven) {
      rc = new_rowid(p, pTab, &iRowid);
      if (rc) return rc;
      bGiven = 1;
    }
    store_txn_saw_rowid(p->pDev->pTxn, pTab, iRowid);
  }
  if (bUpdate && was_replaced(p, iOld)) {
    vt_set_error(&p->base,
                 "csq: UPDATE OR REPLACE moved a row onto rowid %lld of %s and then updates "
                 "that rowid again; csq cannot apply the update to the moved row as SQLite "
                 "would: update in two statements",
                 (long long)iOld, p->zName);
    return SQLITE_CONSTRAINT;
  }
  /* DEFAULT, CHECK: vtab/check.c; a table with neither (known once the
  ** first row has been there: p->eDflt) skips the call, row after row */
  if (p->eDflt != 1 || s->nCheck > 0 || s->zRefused) {
    rc = vt_check_row(p, &argv, bUpdate, bGiven, iRowid);
    if (rc) return rc;
  }
  if (p->eNotNull == 0) {
    /* looked at once: every row of an INSERT comes here */
    int bAny = 0;
    for (int i = 0; i < s->nCol && !bAny; i++) bAny = s->aCol[i].bNotNull && i != s->iIpk;
    p->eNotNull = bAny ? 2 : 1;
  }
  for (int i = 0; p->eNotNull == 2 && i < s->nCol; i++) {
    if (s->aCol[i].bNotNull && i != s->iIpk && sqlite3_value_type(argv[2 + i]) == SQLITE_NULL) {
      vt_set_error(&p->base, "NOT NULL constraint failed: %s.%s", p->zName, s->aCol[i].zName);
      return SQLITE_CONSTRAINT_NOTNULL;
    }
  }
  if (bGiven && (!bUpdate || iRowid != iOld)) {
    int bExists;
    rc = rowid_exists(p, pTab, iRowid, &bExists);
    if (rc) return rc;
    if (bExists) {
      if (sqlite3_vtab_on_conflict(p->pConn->db) != SQLITE_REPLACE) {
        vt_set_error(&p->base, "UNIQUE constraint failed: %s.%s", p->zName,
                     s->iIpk >= 0 ? s->aCol[s->iIpk].zName : "rowid");
        return s->iIpk >= 0 ? SQLITE_CONSTRAINT_PRIMARYKEY : SQLITE_CONSTRAINT_ROWID;
      }
      if (bUpdate) {
        rc = note_replaced(p, iRowid);
        if (rc) return rc;
      }
      rc = delete_row(p, iRowid);
      if (rc) return rc;
    }
  }
  if (bUpdate) {
    rc = delete_row(p, iOld);
    if (rc) return rc;
  }
  if (!bGiven && !is_autoinc(s) && p->bMaxRowid && p->bMaxAny && p->iMaxRowid < INT64_MAX) {
    iRowid = p->iMaxRowid + 1; /* new_rowid's answer, from the largest rowid it keeps */
  } else if (!bGiven) {
    rc = new_rowid(p, pTab, &iRowid);
    if (rc) return rc;
  }
  if (!is_autoinc(s)) store_txn_saw_rowid(p->pDev->pTxn, pTab, iRowid);
  if (p->bMaxRowid && (!p->bMaxAny || iRowid > p->iMaxRowid)) p->iMaxRowid = iRowid, p->bMaxAny = 1;
  uint32_t n0 = stage_rows(p);
  uint32_t n = buf_rows(p) + n0; /* the row's index in the buffer */
  if (n + 1 > p->nBufDelAlloc) {
    uint32_t nNew = p->nBufDelAlloc ? p->nBufDelAlloc * 2 : 1024;
    uint8_t *a = sqlite3_realloc64(p->aBufDel, nNew);
    if (!a) return SQLITE_NOMEM;
    p->aBufDel = a;
    p->nBufDelAlloc = nNew;
  }
  if (n == 0) note_filler(p);
  int e = n == 0 && p->nSeq > 0 ? buffer_reserve(p) : 0;
  /* STAGE_ROWS rows, unless a failed unstage left the stage full */
  if (e == 0 && n0 >= p->aStage[0].nCap)
    e = stage_reserve(p, n0 < STAGE_ROWS ? STAGE_ROWS : (uint32_t)grown(n0, n0 + 1));
  if (e == 0) e = stage_row(p, argv, iRowid, n0);
  if (e) {
    /* keep the columns aligned: drop the partial row */
    for (int i = 0; i <= s->nCol; i++) csq_vec_truncate(&p->aStage[i], n0);
    return SQLITE_NOMEM;
  }
  p->aBufDel[n] = 0;
  p->nSeq++;
  p->nRowEst++; /* keeps xBestIndex's estimate current without reading the catalog */
  *pRowid = iRowid;
  if (n + 1 >= (uint32_t)s->nRowGroup) return flush_buffer(p, 0, 0);
  if (n0 + 1 >= STAGE_ROWS) return unstage(p);
  return SQLITE_OK;
}

/* AUTOINCREMENT's counter counts the rows an INSERT tries, but SQLite saves
** it only when the statement goes on: a row that fails takes its count back
** (a skipped one, under OR IGNORE, keeps it; ABORT and ROLLBACK restore the
** counter through the savepoints). */
static int write_row(vt_tab *p, store_table *pTab, sqlite3_value **argv, int bUpdate, int64_t iOld,
                     sqlite3_int64 *pRowid) {
  int64_t nextRowid = pTab->nextRowid;
  int rc = write_row_checked(p, pTab, argv, bUpdate, iOld, pRowid);
  if (rc == SQLITE_OK) return rc;
  int eConflict = sqlite3_vtab_on_conflict(p->pConn->db);
  if ((rc & 0xff) != SQLITE_CONSTRAINT || eConflict != SQLITE_IGNORE) pTab->nextRowid = nextRowid;
  if (eConflict == SQLITE_FAIL && !bUpdate && is_autoinc(&p->s)) {
    /* OR FAIL keeps the rows written before, but SQLite saves the counter
    ** only when the statement completes: back to where the statement
    ** began (its own transaction in autocommit, else its savepoint; a
    ** statement of one row has none and nothing more to undo) */
    if (sqlite3_get_autocommit(p->pConn->db))
      pTab->nextRowid = p->nextRowid0;
    else if (p->nSave > 0 && p->aSave[p->nSave - 1].bStmt)
      pTab->nextRowid = p->aSave[p->nSave - 1].nextRowid;
  }
  return rc;
}

int vt_flush(vt_tab *p) {
  if (!p->bInTxn || !p->pDev->pTxn) return SQLITE_OK;
  return flush_buffer(p, 0, 1); /* the encode thread's first */
}

static void take_mark(vt_tab *p, int iSavepoint, vt_mark *m);
static int rollback_to_mark(vt_tab *p, const vt_mark *m);

/* An UPDATE with a FROM clause gets no statement savepoint from SQLite
** (it opens one only for the statements it marks as writing several
** rows), so an error that aborts the statement would keep the rows it
** changed before: they are taken back here, to the table as it was at the
** run's first write. When SQLite has a savepoint too, its rollback to it
** finds nothing more to undo. A run is known by its cursors (vtab/stmt.c):
** an UPDATE always reads the table it writes. */
static int abort_statement(vt_tab *p, int rc) {
  if (rc == SQLITE_OK) return rc;
  int eConflict = sqlite3_vtab_on_conflict(p->pConn->db);
  if ((eConflict != SQLITE_ABORT && eConflict != SQLITE_REPLACE) ||
      p->markEpoch != p->pConn->stmtEpoch || p->pConn->nStmtCur == 0)
    return rc;
  char *zMsg = p->base.zErrMsg;
  p->base.zErrMsg = NULL;
  int rc2 = rollback_to_mark(p, &p->stmtMark);
  if (rc2) {
    sqlite3_free(zMsg);
    return rc2;
  }
  p->base.zErrMsg = zMsg;
  return rc;
}

int vt_update(sqlite3_vtab *pVtab, int argc, sqlite3_value **argv, sqlite3_int64 *pRowid) {
  vt_tab *p = (vt_tab *)pVtab;
  p->nWrite++;
  store_table *pTab = NULL;
  int rc = ensure_txn(p, 1, &pTab);
  if (rc) return rc;
  if (p->rcBroken) return broken_error(p);
  p->bWrote = 1;
  p->bStripeTxn = p->nMem > 1;
  vt_conn *pConn = p->pConn;
  if (pConn->nStmtCur > 0 && p->markEpoch != pConn->stmtEpoch) {
    take_mark(p, -1, &p->stmtMark);
    p->markEpoch = pConn->stmtEpoch;
  }
  if (argc == 1) return delete_row(p, sqlite3_value_int64(argv[0]));
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL)
    rc = write_row(p, pTab, argv, 0, 0, pRowid);
  else
    rc = abort_statement(p, write_row(p, pTab, argv, 1, sqlite3_value_int64(argv[0]), pRowid));
  if ((rc & 0xff) == SQLITE_CONSTRAINT && sqlite3_vtab_on_conflict(pConn->db) == SQLITE_IGNORE) {
    /* the row is skipped, not an error: SQLite would keep a message left
    ** here and show it for a later error of the statement */
    sqlite3_free(p->base.zErrMsg);
    p->base.zErrMsg = NULL;
  }
  return rc;
}

/* SQLite begins a virtual table's transaction before the statement that
** writes it reads anything, so the device's write lock is taken here: the
** rows an UPDATE or DELETE reads are then the state it writes over, never
** a snapshot that another connection's commit made stale meanwhile (as a
** native table's write statement reads under its RESERVED lock). */
int vt_begin(sqlite3_vtab *pVtab) {
  vt_tab *p = (vt_tab *)pVtab;
  store_table *pTab = NULL;
  vt_drop_settle(p->pConn, NULL);
  return ensure_txn(p, 0, &pTab);
}

void vt_txn_drop_idle(vt_tab *p) {
  if (!p->bInTxn || p->bWrote) return;
  for (vt_tab *t = p->pConn->pTabs; t; t = t->pNextTab)
    if (t != p && t->bInTxn) return; /* the devices' transactions are shared */
  for (int k = 0; k < p->nMem; k++) {
    vt_dev *d = p->apMem[k];
    if (d->pTxn) store_txn_rollback(d->pTxn);
    d->pTxn = NULL;
  }
  p->pConn->txnEpoch++;
  vt_tab_txn_reset(p);
}

/* Tables of this connection with unsynced writes. */
static int pending_tables(vt_conn *pConn, vt_tab *pExcept) {
  int n = 0;
  for (vt_tab *t = pConn->pTabs; t; t = t->pNextTab)
    if (t != pExcept && t->bInTxn == 1) n++;
  return n;
}

/* Commit every device transaction of the connection: the devices of written
** striped tables through vt_stripe_prepare_commit (two-step, see
** vtab/stripe.c), which leaves their pTxn NULL, then the rest. After a
** failure the transactions not yet committed are rolled back, except when
** SQLite's lock cannot be had: then all stay open (an autocommit statement
** is rolled back by SQLite, a failed COMMIT may be retried). */
static int commit_all(vt_conn *pConn, char **pzErr) {
  /* SQLite's lock on the database files first (vtab/lock.c): a commit that
  ** cannot have it fails here, with the devices untouched */
  int rc = vt_lock_for_commit(pConn, pzErr);
  if (rc) return rc;
  pConn->txnEpoch++; /* transactions end below, also when it fails */
  rc = vt_stripe_prepare_commit(pConn, pzErr);
  for (int pass = 0; pass < 2; pass++) {
    for (vt_dev *d = pConn->pDevs; d; d = d->pNext) {
      if (!d->pTxn || vt_stripe_is_coordinator(pConn, d) != pass) continue;
      store_txn *t = d->pTxn;
      d->pTxn = NULL;
      if (rc)
        store_txn_rollback(t);
      else
        rc = store_txn_commit(t, pzErr);
    }
  }
  for (vt_tab *p = pConn->pTabs; p; p = p->pNextTab) p->bStripeTxn = 0;
  pConn->bTxnDdl = pConn->bOrphanTxn = 0;
  vt_stmt_forget(pConn);
  return rc;
}

int vt_txn_commit_all(vt_conn *pConn, char **pzErr) {
  return commit_all(pConn, pzErr);
}

/* A rollback is the connection's: every device transaction ends with it,
** also those of tables dropped in it (vtab/drop.c). */
void vt_txn_rollback_all(vt_conn *pConn) {
  for (vt_dev *d = pConn->pDevs; d; d = d->pNext) {
    if (d->pTxn) store_txn_rollback(d->pTxn);
    d->pTxn = NULL;
  }
  pConn->txnEpoch++;
  pConn->bTxnDdl = pConn->bOrphanTxn = 0;
}

int vt_sync(sqlite3_vtab *pVtab) {
  vt_tab *p = (vt_tab *)pVtab;
  if (!p->bInTxn || !p->pDev->pTxn) return SQLITE_OK;
  if (p->bInTxn == 1) {
    int rc = flush_buffer(p, 1, 1);
    if (rc) return rc;
  }
  p->bInTxn = 2; /* synced */
  /* one commit for every table and device of the transaction, by the last
  ** table to sync */
  if (pending_tables(p->pConn, p) > 0) return SQLITE_OK;
  char *zErr = NULL;
  int rc = commit_all(p->pConn, &zErr);
  if (rc) return vt_err(pVtab, rc, zErr);
  return SQLITE_OK;
}

int vt_commit(sqlite3_vtab *pVtab) {
  vt_tab *p = (vt_tab *)pVtab;
  /* normally committed in xSync; a transaction still open here had no
  ** xSync (SQLite skips it for some statement shapes): commit now */
  if (p->bInTxn == 1 && p->pDev->pTxn) {
    int rc = vt_sync(pVtab);
    if (rc) return rc;
  }
  vt_tab_txn_reset(p);
  return SQLITE_OK;
}

int vt_rollback(sqlite3_vtab *pVtab) {
  vt_tab *p = (vt_tab *)pVtab;
  vt_txn_rollback_all(p->pConn);
  p->bStripeTxn = 0;
  vt_tab_txn_reset(p);
  return SQLITE_OK;
}

/* A statement that writes is running: a savepoint SQLite opens now is
** that statement's (a SAVEPOINT statement is read-only to SQLite). */
static int writing_statement(sqlite3 *db) {
  for (sqlite3_stmt *s = sqlite3_next_stmt(db, NULL); s; s = sqlite3_next_stmt(db, s))
    if (sqlite3_stmt_busy(s) && !sqlite3_stmt_readonly(s)) return 1;
  return 0;
}

static void take_mark(vt_tab *p, int iSavepoint, vt_mark *m) {
  store_table *pTab = member_table(p, 0);
  m->bStmt = writing_statement(p->pConn->db);
  m->iSavepoint = iSavepoint;
  m->seq = p->nSeq;
  m->nUndo = p->nUndo;
  m->nextRowid = pTab ? pTab->nextRowid : p->nextRowid0;
}

int vt_savepoint(sqlite3_vtab *pVtab, int iSavepoint) {
  vt_tab *p = (vt_tab *)pVtab;
  int rc = grow((void **)&p->aSave, &p->nSaveAlloc, p->nSave, sizeof(vt_mark));
  if (rc) return rc;
  take_mark(p, iSavepoint, &p->aSave[p->nSave++]);
  if (!p->bSaveBase) {
    p->bSaveBase = 1;
    p->iSaveBase = iSavepoint;
  }
  return SQLITE_OK;
}

int vt_release(sqlite3_vtab *pVtab, int iSavepoint) {
  vt_tab *p = (vt_tab *)pVtab;
  while (p->nSave > 0 && p->aSave[p->nSave - 1].iSavepoint >= iSavepoint) p->nSave--;
  return SQLITE_OK;
}

/* Take the table back to mark m: the deletes after it undone, the rows
** inserted after it removed, the rowid counter as it was. */
static int rollback_to_mark(vt_tab *p, const vt_mark *m) {
  p->bMaxRowid = 0;
  if (unstage(p)) return SQLITE_NOMEM;
  /* the encode thread's row groups written first (spans for all rows) */
  drain_queue(p, 1, VT_ENCQ_DEPTH);
  if (p->rcBroken && m->seq <= p->brokenSeq0) {
    /* the rows of the failed row group, and all after it, go with it */
    p->rcBroken = 0;
    sqlite3_free(p->zBroken);
    p->zBroken = NULL;
  }
  store_table *pCoord = member_table(p, 0);
  if (pCoord && p->bInTxn) pCoord->nextRowid = m->nextRowid; /* AUTOINCREMENT's counter too */
  if (!p->pDev->pTxn || !p->aBuf) {
    p->nSeq = m->seq;
    p->nUndo = m->nUndo;
    return SQLITE_OK;
  }
  char *zErr = NULL;
  int rc = 0;
  /* 1. undo deletes made after the mark */
  for (int i = p->nUndo - 1; i >= m->nUndo && rc == 0; i--) {
    vt_undo *u = &p->aUndo[i];
    if (u->pRg) {
      store_table *pTab = member_table(p, u->iMem);
      int g = pTab ? rg_index(pTab, u->pRg) : -1;
      if (g >= 0) rc = store_txn_delete(p->apMem[u->iMem]->pTxn, pTab, g, u->iRow, 0, &zErr);
    } else if (u->seq >= p->bufSeq0) {
      if (u->seq - p->bufSeq0 < (int64_t)buf_rows(p)) p->aBufDel[u->seq - p->bufSeq0] = 0;
    } else {
      for (int k = 0; k < p->nSpan; k++) {
        vt_span *sp = &p->aSpan[k];
        if (u->seq >= sp->seq0 && u->seq < sp->seq0 + sp->n) {
          store_table *pTab = member_table(p, sp->iMem);
          int g = pTab ? rg_index(pTab, sp->pRg) : -1;
          if (g >= 0)
            rc = store_txn_delete(p->apMem[sp->iMem]->pTxn, pTab, g, (uint32_t)(u->seq - sp->seq0),
                                  0, &zErr);
        }
      }
    }
  }
  p->nUndo = m->nUndo;
  /* 2. remove rows inserted after the mark */
  int64_t S = m->seq;
  if (S >= p->bufSeq0) {
    uint32_t keep = (uint32_t)(S - p->bufSeq0);
    if (keep < buf_rows(p))
      for (int i = 0; i <= p->s.nCol; i++) csq_vec_truncate(&p->aBuf[i], keep);
  } else {
    for (int i = 0; i <= p->s.nCol; i++) csq_vec_reset(&p->aBuf[i]);
    p->bufSeq0 = S;
  }
  for (int k = 0; k < p->nSpan && rc == 0; k++) {
    vt_span *sp = &p->aSpan[k];
    if (sp->seq0 + sp->n <= S) continue;
    uint32_t from = S > sp->seq0 ? (uint32_t)(S - sp->seq0) : 0;
    store_table *pTab = member_table(p, sp->iMem);
    int g = pTab ? rg_index(pTab, sp->pRg) : -1;
    for (uint32_t r = from; g >= 0 && r < sp->n && rc == 0; r++)
      rc = store_txn_delete(p->apMem[sp->iMem]->pTxn, pTab, g, r, 1, &zErr);
    sp->n = from;
  }
  int j = 0;
  for (int k = 0; k < p->nSpan; k++)
    if (p->aSpan[k].n > 0) p->aSpan[j++] = p->aSpan[k];
  p->nSpan = j;
  p->nSeq = S;
  if (rc) return vt_err(&p->base, rc, zErr);
  return SQLITE_OK;
}

int vt_rollback_to(sqlite3_vtab *pVtab, int iSavepoint) {
  vt_tab *p = (vt_tab *)pVtab;
  while (p->nSave > 0 && p->aSave[p->nSave - 1].iSavepoint > iSavepoint) p->nSave--;
  /* a savepoint older than the table's first (the table joined the
  ** transaction inside it), or -1 (a SAVEPOINT that began the transaction),
  ** takes the table back to the transaction's start */
  vt_mark start = {iSavepoint, 0, 0, p->nextRowid0, 0};
  const vt_mark *m;
  if (p->nSave > 0 && p->aSave[p->nSave - 1].iSavepoint == iSavepoint)
    m = &p->aSave[p->nSave - 1];
  else if (iSavepoint < 0 || (p->bSaveBase && iSavepoint < p->iSaveBase))
    m = &start;
  else
    return SQLITE_OK;
  p->markEpoch = 0;
  return rollback_to_mark(p, m);
}

/* ---- csq_import inside BEGIN ... COMMIT (vtab/import.c) ----
** A bulk load there appends its row groups to the connection's device
** transaction, as inserts would: the table joins the transaction (SQLite
** has called xBegin), its buffered rows go out first, and each row group
** the load writes becomes a span of insert sequence numbers, so that
** ROLLBACK TO, ROLLBACK and COMMIT treat the rows like inserted ones. A
** load that fails is undone back to the mark taken when it joined. */
int vt_import_join(vt_tab *p, vt_mark *pMark, store_txn **ppTxn, store_table **ppTab) {
  store_table *pTab = NULL;
  int rc = ensure_txn(p, 1, &pTab);
  if (rc == SQLITE_OK) rc = flush_buffer(p, 0, 1);
  if (rc) return rc;
  p->bWrote = 1;
  p->bStripeTxn = p->nMem > 1;
  p->bMaxRowid = 0;
  p->nWrite++;
  take_mark(p, -1, pMark);
  *ppTxn = p->pDev->pTxn;
  *ppTab = member_table(p, 0);
  return SQLITE_OK;
}

int vt_import_member(vt_tab *p, int *piMem, store_txn **ppTxn, store_table **ppTab) {
  int k = next_member(p);
  *piMem = k;
  *ppTxn = p->apMem[k]->pTxn;
  *ppTab = member_table(p, k);
  if (*ppTab) return SQLITE_OK;
  vt_set_error(&p->base, "csq: table %s is no longer on its device %s", p->zName,
               p->apMem[k]->zKey);
  return SQLITE_ERROR;
}

int vt_import_max_rowid(vt_tab *p, int64_t *pMax, int *pbAny) {
  p->bMaxRowid = 0;
  int rc = max_rowid(p, pMax, pbAny);
  p->bMaxRowid = 0; /* the load appends rows it does not count there */
  return rc;
}

int vt_import_span(vt_tab *p, store_rg *pRg, int iMem, uint32_t n) {
  int rc = grow((void **)&p->aSpan, &p->nSpanAlloc, p->nSpan, sizeof(vt_span));
  if (rc) return rc;
  p->aSpan[p->nSpan].pRg = pRg;
  p->aSpan[p->nSpan].iMem = iMem;
  p->aSpan[p->nSpan].seq0 = p->nSeq;
  p->aSpan[p->nSpan].n = n;
  p->nSpan++;
  p->nSeq += n;
  p->bufSeq0 = p->nSeq;
  p->nRowEst += n;
  p->nWrite++;
  return SQLITE_OK;
}

int vt_import_undo(vt_tab *p, const vt_mark *pMark) {
  p->bMaxRowid = 0;
  return rollback_to_mark(p, pMark);
}
