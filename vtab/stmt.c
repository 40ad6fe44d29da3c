/*
** vtab/stmt.c - the committed state one statement run reads.
**
** Every cursor of one statement run reads the same committed state of a
** device, as every cursor of a native table's statement reads one state
** under SQLite's read lock: a self-join, a subquery over the table it
** filters, an UPDATE that reads what it rewrites. That state is a store
** snapshot kept on the device (vt_dev.pStmtSnap) for the run.
**
** SQLite tells a virtual table neither when a statement starts nor when
** it ends, so a run is recognised by its key (the connection's busy
** statements with their run counts, vt_stmt_key) and its life is bounded
** by its cursors: the run registers its cursors as they open (xOpen) and the
** shared snapshot is dropped when the last one closes (SQLite closes a
** statement's cursors when it resets or finalizes it). A key alone is not
** enough: a finalized statement's address is reused by the next one
** prepared, with the same run count. The connection's own commits also drop
** the snapshots (vt_stmt_forget), so that the next statement reads them.
*/
#include "vtab/vtab.h"

uint64_t vt_stmt_key(sqlite3 *db) {
  uint64_t k = 0;
  for (sqlite3_stmt *s = sqlite3_next_stmt(db, NULL); s; s = sqlite3_next_stmt(db, s)) {
    if (!sqlite3_stmt_busy(s)) continue;
    k = (k ^ (uint64_t)(uintptr_t)s) * 0x100000001B3ull;
    k = (k ^ (uint64_t)sqlite3_stmt_status(s, SQLITE_STMTSTATUS_RUN, 0)) * 0x100000001B3ull;
    k |= 1;
  }
  return k;
}

void vt_stmt_forget(vt_conn *pConn) {
  for (vt_dev *d = pConn->pDevs; d; d = d->pNext) {
    if (d->pStmtSnap) store_snap_unref(d->pStmtSnap);
    d->pStmtSnap = NULL;
    d->stmtKey = 0;
  }
}

uint64_t vt_stmt_enter(vt_conn *pConn) {
  uint64_t key = vt_stmt_key(pConn->db);
  if (key == 0) return 0; /* a call from C outside any statement: nothing to share */
  if (key != pConn->stmtKey) {
    /* another run: what an earlier one kept is not this one's state */
    vt_stmt_forget(pConn);
    pConn->stmtKey = key;
    pConn->nStmtCur = 0;
    pConn->stmtEpoch++;
  }
  pConn->nStmtCur++;
  return key;
}

void vt_stmt_leave(vt_conn *pConn, uint64_t key) {
  if (key == 0 || key != pConn->stmtKey) return;
  if (--pConn->nStmtCur > 0) return;
  vt_stmt_forget(pConn);
  vt_probe_drop_kept(pConn);
  pConn->stmtKey = 0;
}

int vt_stmt_snapshot(vt_conn *pConn, vt_dev *d, int bFresh, store_snap **ppSnap, char **pzErr) {
  uint64_t key = pConn->nStmtCur > 0 ? vt_stmt_key(pConn->db) : 0;
  int bShare = key != 0 && key == pConn->stmtKey;
  if (!bFresh && bShare && d->pStmtSnap && d->stmtKey == key) {
    store_snap_ref(d->pStmtSnap);
    *ppSnap = d->pStmtSnap;
    return 0;
  }
  int rc = store_snapshot(d->pStore, d->pQ, ppSnap, pzErr);
  if (rc) return rc;
  if (!bShare) return 0;
  if (d->pStmtSnap) store_snap_unref(d->pStmtSnap);
  store_snap_ref(*ppSnap);
  d->pStmtSnap = *ppSnap;
  d->stmtKey = key;
  return 0;
}
