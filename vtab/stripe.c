/*
** vtab/stripe.c - csq tables over several devices: the storage-array case.
**
**   CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, devices='a.csd,b.csd');
**
** A striped table exists on every member device under its own name with
** the same columns; its row groups are spread over the members as they are
** written (each new row group goes to the member holding the fewest, so
** round-robin in practice). Rowids come from the coordinator's (member 0's)
** table, so they are unique across members. Besides the table, each member's
** catalog holds a metadata table "csq_stripe:<t>" whose three column
** definitions carry, as their declared types:
**     member   "k/n"            this device is member k (0-based) of n
**     devices  "a.csd,b.csd"    the member list, as given to devices=
**     stripe   16 hex digits    an id drawn at CREATE, the same on every member
** and whose next-rowid counter is the member's commit sequence: every write
** transaction of the table raises it on every member to the same value.
**
** Commit: the two-step commit of device/store/FORMAT.md ("Commit protocol"),
** vt_stripe_prepare_commit below. The coordinator of the first striped
** table written decides; every other member is prepared (its new catalog
** durable but not current), then the decider commits, then the members flip
** to their prepared catalogs. A crash or an I/O error at any point leaves
** each member with its old catalog or a prepared one whose outcome the
** decider's media records; the store reads that outcome whenever it meets
** a prepared catalog (device/store/twostep.c), so the table is always whole, old or
** new, with nothing to repair by hand.
**
** Readers take one snapshot per member and accept them only if every member
** shows the same commit sequence (retrying while a writer is between the
** steps). Members that still disagree after that wait were not written
** together: an image was replaced by a copy from another moment. Every read
** and write of the table then fails with an error naming the member; DROP
** TABLE still works (see GUARANTEES.md).
**
** Every function here also serves one-device tables (nMem == 1, no
** metadata), so the rest of vtab/ never special-cases a single device.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "vtab/vtab.h"

#define STRIPE_PREFIX "csq_stripe:"

char *vt_stripe_meta_name(const char *zTable) {
  return sqlite3_mprintf(STRIPE_PREFIX "%s", zTable);
}

static const char *member_name(const vt_tab *p, int k) {
  return p->s.nDevice > 1 ? p->s.azDevice[k] : p->apMem[k]->zKey;
}

/* Open each member's device for this connection. */
int vt_stripe_open(vt_tab *p, sqlite3 *db, int bCreate, char **pzErr) {
  int n = p->s.nDevice > 1 ? p->s.nDevice : 1;
  p->apMem = sqlite3_malloc64(sizeof(vt_dev *) * (size_t)n);
  if (!p->apMem) return SQLITE_NOMEM;
  memset(p->apMem, 0, sizeof(vt_dev *) * (size_t)n);
  if (n == 1) {
    char *zPath =
        p->s.zDevice ? sqlite3_mprintf("%s", p->s.zDevice) : vt_default_device(db, p->zDb);
    int rc = vt_conn_device(p->pConn, zPath, bCreate, p->s.eMedia, &p->apMem[0], pzErr);
    sqlite3_free(zPath);
    if (rc) return rc;
    p->nMem = 1;
    p->pDev = p->apMem[0];
    return SQLITE_OK;
  }
  for (int k = 0; k < n; k++) {
    char *zErr = NULL;
    int rc = vt_conn_device(p->pConn, p->s.azDevice[k], bCreate, p->s.eMedia, &p->apMem[k], &zErr);
    if (rc) {
      *pzErr = sqlite3_mprintf("csq: table %s: member %d of %d (%s): %s", p->zName, k + 1, n,
                               p->s.azDevice[k], zErr ? zErr : "cannot open the device");
      sqlite3_free(zErr);
      return rc;
    }
    p->nMem = k + 1;
    for (int j = 0; j < k; j++) {
      if (p->apMem[j]->pStore == p->apMem[k]->pStore) {
        *pzErr = sqlite3_mprintf("csq: table %s: devices %s and %s are the same device; each "
                                 "member must be its own device",
                                 p->zName, p->s.azDevice[j], p->s.azDevice[k]);
        return SQLITE_ERROR;
      }
    }
  }
  p->pDev = p->apMem[0];
  return SQLITE_OK;
}

/* A transaction on d: the connection's open one, or one of its own
** committed at once. */
static int member_txn(vt_dev *d, vt_catalog_fn fn, void *pArg, char **pzErr) {
  if (d->pTxn) return fn(d->pTxn, pArg, pzErr);
  store_txn *t = NULL;
  int rc = store_txn_begin(d->pStore, d->pQ, VT_BUSY_MS, &t, pzErr);
  if (rc) return rc;
  rc = fn(t, pArg, pzErr);
  if (rc) {
    store_txn_rollback(t);
    return rc;
  }
  return store_txn_commit(t, pzErr);
}

/* Does a catalog change on p go into the connection's open transaction? */
static void note_txn_ddl(vt_tab *p) {
  for (int k = 0; k < p->nMem; k++)
    if (p->apMem[k]->pTxn) p->pConn->bTxnDdl = 1;
}

int vt_stripe_catalog(vt_tab *p, vt_catalog_fn fn, void *pArg, char **pzErr) {
  int rc = 0;
  note_txn_ddl(p);
  for (int k = p->nMem - 1; k >= 0 && rc == 0; k--) rc = member_txn(p->apMem[k], fn, pArg, pzErr);
  p->pConn->txnEpoch++; /* tables were added, dropped or renamed (vtab/write.c, ensure_txn) */
  vt_stmt_forget(p->pConn);
  return rc;
}

typedef struct meta_arg {
  vt_catalog_fn fn; /* the table's own create */
  void *pArg;
  const char *zMeta;
  store_col aCol[3];
} meta_arg;

static int do_create_member(store_txn *t, void *pArg, char **pzErr) {
  meta_arg *a = pArg;
  int rc = a->fn(t, a->pArg, pzErr);
  if (rc) return rc;
  if (store_txn_table(t, a->zMeta)) {
    rc = store_txn_drop_table(t, a->zMeta, pzErr); /* left over from a rolled-back CREATE */
    if (rc) return rc;
  }
  return store_txn_create_table(t, a->zMeta, 3, a->aCol, pzErr);
}

int vt_stripe_create(vt_tab *p, vt_catalog_fn fnCreate, void *pArg, char **pzErr) {
  note_txn_ddl(p);
  p->pConn->txnEpoch++; /* a table is added (vtab/write.c, ensure_txn) */
  if (p->nMem == 1) {
    int rc = member_txn(p->pDev, fnCreate, pArg, pzErr);
    vt_stmt_forget(p->pConn); /* the statements after it must see the new table */
    return rc;
  }
  uint64_t id = 0;
  sqlite3_randomness(sizeof(id), &id);
  char zId[17], zMember[32];
  snprintf(zId, sizeof(zId), "%016llx", (unsigned long long)id);
  char *zMeta = vt_stripe_meta_name(p->zName);
  if (!zMeta) return -ENOMEM;
  meta_arg a = {fnCreate, pArg, zMeta, {{0}}};
  a.aCol[0].zName = "member";
  a.aCol[0].zType = zMember;
  a.aCol[1].zName = "devices";
  a.aCol[1].zType = p->s.zDevices;
  a.aCol[2].zName = "stripe";
  a.aCol[2].zType = zId;
  int rc = 0;
  for (int k = p->nMem - 1; k >= 0 && rc == 0; k--) {
    snprintf(zMember, sizeof(zMember), "%d/%d", k, p->nMem);
    rc = member_txn(p->apMem[k], do_create_member, &a, pzErr);
  }
  sqlite3_free(zMeta);
  vt_stmt_forget(p->pConn);
  return rc;
}

/* The commit sequence of member k as table view pMeta shows it. */
static int64_t meta_seq(const store_table *pMeta) {
  return pMeta ? pMeta->nextRowid : -1;
}

static void ms_sleep(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The members' commit sequences disagree: a writer is between the steps of
** its commit (wait), or the images are not from the same moment (error).
** Message for the latter, sqlite3_malloc'd. */
static char *torn_message(vt_tab *p, const int64_t *aSeq) {
  for (int k = 1; k < p->nMem; k++) {
    if (aSeq[k] > aSeq[0])
      return sqlite3_mprintf(
          "table %s is torn: member %d of %d (%s) holds commit %lld of the table but the "
          "coordinator %s holds only commit %lld: the members' images are not from the same "
          "moment (was the coordinator's image replaced by an older copy?). Restore the "
          "members' images together, or DROP the table",
          p->zName, k + 1, p->nMem, member_name(p, k), (long long)aSeq[k] - 1, member_name(p, 0),
          (long long)aSeq[0] - 1);
    if (aSeq[k] < aSeq[0])
      return sqlite3_mprintf("table %s: member %d of %d (%s) holds commit %lld of the table, older "
                             "than the coordinator %s's commit %lld: was the image replaced by an "
                             "older copy?",
                             p->zName, k + 1, p->nMem, member_name(p, k), (long long)aSeq[k] - 1,
                             member_name(p, 0), (long long)aSeq[0] - 1);
  }
  return sqlite3_mprintf("table %s: members disagree", p->zName);
}

/* Take the views of every member into aTab/aSnap/aSeq: the connection's
** transaction's where it has one, else a snapshot (the statement's own
** unless bFresh). */
static int take_views(vt_tab *p, const char *zMeta, int bFresh, store_table **aTab,
                      store_snap **aSnap, int64_t *aSeq, char **pzErr) {
  for (int k = 0; k < p->nMem; k++) {
    vt_dev *d = p->apMem[k];
    if (d->pTxn) {
      aTab[k] = store_txn_table(d->pTxn, p->zName);
      if (aSeq) aSeq[k] = meta_seq(store_txn_table(d->pTxn, zMeta));
    } else {
      int rc = vt_stmt_snapshot(p->pConn, d, bFresh, &aSnap[k], pzErr);
      if (rc) return rc;
      aTab[k] = store_snap_table(aSnap[k], p->zName);
      if (aSeq) aSeq[k] = meta_seq(store_snap_table(aSnap[k], zMeta));
    }
    if (!aTab[k] || (aSeq && aSeq[k] < 0)) {
      *pzErr = p->nMem > 1 ? dev_mprintf("table %s is no longer on member %d of %d (%s)", p->zName,
                                         k + 1, p->nMem, member_name(p, k))
                           : strdup("the table is no longer on its device (dropped by another "
                                    "connection?)");
      return -ENOENT;
    }
  }
  return 0;
}

static void drop_views(vt_tab *p, store_table **aTab, store_snap **aSnap) {
  for (int k = 0; k < p->nMem; k++) {
    if (aSnap[k]) store_snap_unref(aSnap[k]);
    aSnap[k] = NULL;
    aTab[k] = NULL;
  }
}

static int all_same(const int64_t *aSeq, int n) {
  for (int k = 1; k < n; k++)
    if (aSeq[k] != aSeq[0]) return 0;
  return 1;
}

/* Views of the table on every member; see vtab.h. With more than one
** member, the views must show the same commit sequence. They can differ
** for a moment: views taken one after the other around the decision of a
** writer's two-step commit (a prepared member shows the old state until the
** decision, the new one after it). A writer holds the coordinator's write
** lock until the coordinator has committed or flipped, that is until the
** decision is made, so: if that lock can be taken at once, views taken
** while holding it are final (every member shows the decided state), and a
** disagreement means images from different moments; if not, look again
** after a moment, up to VT_BUSY_MS. Errors are device codes with *pzErr
** libc-malloc'd. */
int vt_visible_members(vt_tab *p, store_table **aTab, store_snap **aSnap, char **pzErr) {
  char *zMeta = NULL;
  int64_t *aSeq = NULL;
  for (int k = 0; k < p->nMem; k++) aSnap[k] = NULL, aTab[k] = NULL;
  /* rows still with the encode thread are written first (vtab/write.c) */
  int rc = vt_write_settle(p, pzErr);
  if (rc) return rc;
  if (p->nMem > 1) {
    zMeta = vt_stripe_meta_name(p->zName);
    aSeq = sqlite3_malloc64(sizeof(int64_t) * (size_t)p->nMem);
    if (!zMeta || !aSeq) {
      sqlite3_free(zMeta);
      sqlite3_free(aSeq);
      return -ENOMEM;
    }
  }
  rc = take_views(p, zMeta, 0, aTab, aSnap, aSeq, pzErr);
  for (int waited = 0; rc == 0 && aSeq && !all_same(aSeq, p->nMem);) {
    store_txn *pLock = NULL;
    char *zBusy = NULL;
    /* holding the coordinator ourselves, nobody else can be mid-commit */
    int bFinal = p->pDev->pTxn != NULL || waited >= VT_BUSY_MS;
    if (!bFinal && store_txn_begin(p->pDev->pStore, p->pDev->pQ, 0, &pLock, &zBusy) == 0) {
      drop_views(p, aTab, aSnap);
      rc = take_views(p, zMeta, 1, aTab, aSnap, aSeq, pzErr);
      store_txn_rollback(pLock);
      bFinal = 1;
      if (rc || all_same(aSeq, p->nMem)) break;
    }
    free(zBusy);
    if (bFinal) {
      char *z = torn_message(p, aSeq);
      *pzErr = z ? strdup(z) : NULL;
      sqlite3_free(z);
      rc = -EBADMSG;
      break;
    }
    drop_views(p, aTab, aSnap);
    ms_sleep(2);
    waited += 2;
    rc = take_views(p, zMeta, 1, aTab, aSnap, aSeq, pzErr);
  }
  if (rc) drop_views(p, aTab, aSnap);
  sqlite3_free(zMeta);
  sqlite3_free(aSeq);
  return rc;
}

/* At reopen: every member holds the table with the declared columns, and
** metadata saying it is member k of this very stripe; then the members must
** agree on their commit sequence (a torn or stale member still connects, so
** that DROP TABLE works; reads and writes report it). Sets nRowEst. */
int vt_stripe_check(vt_tab *p, char **pzErr) {
  int n = p->nMem, rc = SQLITE_OK;
  char *zMeta = vt_stripe_meta_name(p->zName);
  char *zId = NULL;
  if (!zMeta) return SQLITE_NOMEM;
  for (int k = 0; k < n && rc == SQLITE_OK; k++) {
    store_snap *pSnap = NULL;
    char *zErr = NULL;
    vt_dev *d = p->apMem[k];
    const store_table *pTab, *m;
    if (d->pTxn) {
      /* the connection's open transaction, where a table created in it
      ** lives until COMMIT (SQLite reconnects tables after a ROLLBACK TO) */
      pTab = store_txn_table(d->pTxn, p->zName);
      m = n > 1 ? store_txn_table(d->pTxn, zMeta) : NULL;
    } else {
      int e = store_snapshot(d->pStore, d->pQ, &pSnap, &zErr);
      if (e) {
        *pzErr = sqlite3_mprintf("csq: %s", zErr ? zErr : "cannot read the device");
        free(zErr);
        rc = vt_rc_from(e < 0 ? e : -EIO);
        break;
      }
      pTab = store_snap_table(pSnap, p->zName);
      m = n > 1 ? store_snap_table(pSnap, zMeta) : NULL;
    }
    char zWant[32];
    snprintf(zWant, sizeof(zWant), "%d/%d", k, n);
    if (!pTab) {
      *pzErr = n > 1 ? sqlite3_mprintf("csq: table %s is not on member %d of %d (%s) (was the "
                                       "image replaced?)",
                                       p->zName, k + 1, n, member_name(p, k))
                     : sqlite3_mprintf("csq: table %s is not on device %s (was the image "
                                       "replaced?)",
                                       p->zName, member_name(p, k));
      rc = SQLITE_ERROR;
    } else if (pTab->nCol != p->s.nCol) {
      *pzErr = sqlite3_mprintf("csq: table %s on device %s has %d columns, the schema says %d",
                               p->zName, member_name(p, k), pTab->nCol, p->s.nCol);
      rc = SQLITE_CORRUPT;
    } else if (n > 1 && (!m || m->nCol != 3 || strcmp(m->aCol[0].zType, zWant) != 0 ||
                         strcmp(m->aCol[1].zType, p->s.zDevices) != 0 ||
                         (zId && strcmp(m->aCol[2].zType, zId) != 0))) {
      int bM = m && m->nCol == 3;
      *pzErr = sqlite3_mprintf(
          "csq: table %s: device %s is not member %d of %d of this table's stripe (devices='%s'); "
          "it says %s%s%s%s (was an image replaced or the member list reordered?)",
          p->zName, member_name(p, k), k + 1, n, p->s.zDevices, bM ? "member " : "nothing",
          bM ? m->aCol[0].zType : "", bM ? " of devices=" : "", bM ? m->aCol[1].zType : "");
      rc = SQLITE_CORRUPT;
    } else if (n > 1 && !zId) {
      zId = sqlite3_mprintf("%s", m->aCol[2].zType);
      if (!zId) rc = SQLITE_NOMEM;
    }
    if (pSnap) store_snap_unref(pSnap);
  }
  sqlite3_free(zId);
  sqlite3_free(zMeta);
  if (rc) return rc;
  store_table **aTab = sqlite3_malloc64(sizeof(store_table *) * (size_t)n);
  store_snap **aSnap = sqlite3_malloc64(sizeof(store_snap *) * (size_t)n);
  char *zErr = NULL;
  int e = aTab && aSnap ? vt_visible_members(p, aTab, aSnap, &zErr) : -ENOMEM;
  if (e == 0) {
    vt_note_table(p, aTab, n, 1);
    for (int k = 0; k < n; k++)
      if (aSnap[k]) store_snap_unref(aSnap[k]);
  } else if (e == -EBADMSG && n > 1) {
    free(zErr); /* torn or stale: reported by every read and write */
  } else {
    *pzErr = sqlite3_mprintf("csq: %s", zErr ? zErr : "cannot read the devices");
    free(zErr);
    rc = e == -ENOENT ? SQLITE_ERROR : vt_rc_from(e < 0 ? e : -EIO);
  }
  sqlite3_free(aTab);
  sqlite3_free(aSnap);
  return rc;
}

/* Is the device of d one of p's members? (Compared by store: one image
** opened under two spellings of its path is one device.) */
static int is_member(const vt_tab *p, const vt_dev *d) {
  for (int k = 0; k < p->nMem; k++)
    if (p->apMem[k]->pStore == d->pStore) return 1;
  return 0;
}

/* A striped table written in the open transaction. */
static int stripe_written(const vt_tab *p) {
  return p->nMem > 1 && p->bStripeTxn;
}

/* Is d a member of a striped table written in this transaction? */
static int in_written_stripe(vt_conn *pConn, const vt_dev *d) {
  for (vt_tab *p = pConn->pTabs; p; p = p->pNextTab)
    if (stripe_written(p) && is_member(p, d)) return 1;
  return 0;
}

/* Raise the commit sequence of every member of each striped table written
** in this transaction to the coordinator's + 1 (all members' transactions
** are open). */
static int bump_sequences(vt_conn *pConn, char **pzErr) {
  for (vt_tab *p = pConn->pTabs; p; p = p->pNextTab) {
    if (!stripe_written(p)) continue;
    char *zMeta = vt_stripe_meta_name(p->zName);
    if (!zMeta) return -ENOMEM;
    store_table *m0 = p->apMem[0]->pTxn ? store_txn_table(p->apMem[0]->pTxn, zMeta) : NULL;
    int64_t seq = meta_seq(m0);
    for (int k = 0; k < p->nMem && seq >= 0; k++) {
      vt_dev *d = p->apMem[k];
      store_table *m = d->pTxn ? store_txn_table(d->pTxn, zMeta) : NULL;
      if (!m) {
        seq = -1;
        break;
      }
      store_txn_saw_rowid(d->pTxn, m, seq);
    }
    sqlite3_free(zMeta);
    if (seq < 0) {
      *pzErr = dev_mprintf("table %s: a member's transaction or metadata is missing at commit",
                           p->zName);
      return -EIO;
    }
  }
  return 0;
}

/* Where device d's prepared commit is decided, for the two-step commit with
** decider pDec: the commit sequence of a written striped table that both
** hold (the metadata table's counter on pDec), else, for a table of d's
** that pDec is not a member of, a decision counter "csq_decide:<stripe id>"
** that pDec's transaction creates or raises now. Either way only a writer
** that has locked (and so settled) d can move that counter again: one of
** the table's writers. *pzTable is sqlite3_malloc'd. */
static int decision_for(vt_conn *pConn, vt_dev *pDec, vt_dev *d, char **pzTable, int64_t *pSeq,
                        char **pzErr) {
  vt_tab *pRef = NULL;
  int bHeld = 0;
  for (vt_tab *p = pConn->pTabs; p && !bHeld; p = p->pNextTab) {
    if (!stripe_written(p) || !is_member(p, d)) continue;
    if (!pRef) pRef = p;
    if (is_member(p, pDec)) pRef = p, bHeld = 1;
  }
  char *zMeta = pRef ? vt_stripe_meta_name(pRef->zName) : NULL;
  store_table *m =
      zMeta && pRef->apMem[0]->pTxn ? store_txn_table(pRef->apMem[0]->pTxn, zMeta) : NULL;
  if (!m || m->nCol != 3) {
    sqlite3_free(zMeta);
    *pzErr = dev_mprintf("device %s: its striped table's metadata is missing at commit", d->zKey);
    return -EIO;
  }
  *pSeq = m->nextRowid;
  if (bHeld) {
    *pzTable = zMeta;
    return 0;
  }
  sqlite3_free(zMeta);
  *pzTable = sqlite3_mprintf("csq_decide:%s", m->aCol[2].zType);
  if (!*pzTable) return -ENOMEM;
  store_table *e = store_txn_table(pDec->pTxn, *pzTable);
  if (!e) {
    store_col c = {"seq", "", 0};
    int rc = store_txn_create_table(pDec->pTxn, *pzTable, 1, &c, pzErr);
    if (rc) return rc;
    e = store_txn_table(pDec->pTxn, *pzTable);
  }
  if (e) store_txn_saw_rowid(pDec->pTxn, e, *pSeq - 1);
  return e ? 0 : -ENOMEM;
}

/* Finish every prepared transaction of the connection by what its decider
** recorded: after the decider's commit failed, or before it was tried. */
static void settle_prepared(vt_conn *pConn) {
  for (vt_dev *d = pConn->pDevs; d; d = d->pNext) {
    if (!d->pTxn || !store_txn_prepared(d->pTxn)) continue;
    store_txn *t = d->pTxn;
    int bCommitted = 0;
    char *zErr = NULL;
    d->pTxn = NULL;
    store_txn_settle(t, &bCommitted, &zErr); /* on error the next reader settles it */
    free(zErr);
  }
}

/* The commit of a transaction that wrote striped tables: the two-step
** commit of device/store/FORMAT.md ("Commit protocol"). The coordinator of the
** first striped table written decides; every other member of a written
** stripe is prepared, then the decider commits (the decision), then the
** prepared members flip. Devices of the transaction outside every written
** stripe commit first, one by one as before. Every device it finishes loses
** its d->pTxn; on failure the rest are left for the caller to roll back.
** Without a striped table written, nothing happens here. */
int vt_stripe_prepare_commit(vt_conn *pConn, char **pzErr) {
  vt_tab *pFirst = NULL;
  for (vt_tab *p = pConn->pTabs; p && !pFirst; p = p->pNextTab)
    if (stripe_written(p)) pFirst = p;
  if (!pFirst) return 0;
  int rc = bump_sequences(pConn, pzErr);
  if (rc) return rc;
  vt_dev *pDec = pFirst->apMem[0];
  for (vt_dev *d = pConn->pDevs; d; d = d->pNext) {
    if (!d->pTxn || d->pStore == pDec->pStore || in_written_stripe(pConn, d)) continue;
    store_txn *t = d->pTxn;
    d->pTxn = NULL;
    rc = store_txn_commit(t, pzErr);
    if (rc) return rc;
  }
  store_decision dec;
  memset(&dec, 0, sizeof(dec));
  store_image_id(pDec->pStore, dec.uuid);
  dec.zPath = dev_path(pDec->pDev);
  for (vt_dev *d = pConn->pDevs; d && rc == 0; d = d->pNext) {
    if (!d->pTxn || d->pStore == pDec->pStore) continue;
    char *zTable = NULL;
    rc = decision_for(pConn, pDec, d, &zTable, &dec.seq, pzErr);
    if (rc == 0) {
      dec.zTable = zTable;
      rc = store_txn_prepare(d->pTxn, &dec, pzErr);
    }
    sqlite3_free(zTable);
  }
  if (rc == 0) {
    store_txn *t = pDec->pTxn;
    pDec->pTxn = NULL;
    rc = t ? store_txn_commit(t, pzErr) : -EIO;
    if (!t)
      *pzErr = dev_mprintf("table %s: the coordinator's transaction is missing at commit",
                           pFirst->zName);
  }
  if (rc) {
    /* the decider did not commit, or its outcome is unknown: each prepared
    ** member reads it from the decider's media and follows it */
    settle_prepared(pConn);
    return rc;
  }
  for (vt_dev *d = pConn->pDevs; d; d = d->pNext) {
    if (!d->pTxn) continue;
    store_txn *t = d->pTxn;
    char *zErr = NULL;
    d->pTxn = NULL;
    store_txn_commit(t, &zErr); /* decided: a flip that fails is redone by the next reader */
    free(zErr);
  }
  return 0;
}

int vt_stripe_is_coordinator(vt_conn *pConn, vt_dev *d) {
  for (vt_tab *p = pConn->pTabs; p; p = p->pNextTab)
    if (p->nMem > 1 && p->bStripeTxn && p->apMem[0] == d) return 1;
  return 0;
}
