/*
** vtab/drop.c - DROP TABLE of a csq table, at once or inside a transaction.
**
** SQLite calls xDestroy while the DROP runs, and never tells the dropped
** table whether its transaction committed: a dropped table leaves SQLite's
** list of the transaction's virtual tables. In autocommit the DROP commits
** with its statement, so the table leaves the device at once. Inside
** BEGIN ... COMMIT (or a SAVEPOINT) a ROLLBACK brings the table back into
** the schema, so its rows must still be there: the table is renamed on the
** device to VT_DROPPED_PREFIX + its name (the tombstone), and the dropped
** vt_tab stays with the connection (pDropped) until the transaction's fate
** is known. That is settled by the connection's next call into csq outside
** a transaction (vt_drop_settle): if SQLite's schema has the table again the
** transaction rolled back and the tombstone gets its name back, else it is
** dropped. A connection that reconnects the table (after ROLLBACK or
** ROLLBACK TO, or another process) finds the tombstone and restores it
** (vt_drop_restore). A tombstone nobody settled (the process ended right
** after its COMMIT) is dropped when a table of that name is created again.
**
** The rename goes where every catalog change goes: into the connection's
** open device transaction if there is one (a ROLLBACK then undoes it with
** the rest), else committed at once. When the dropped table was the last
** one in the open device transactions, nobody would end them: if they hold
** only its rows they are rolled back now (whichever way the transaction
** ends, the dropped table's writes in it vanish); if they also hold
** catalog changes (a CREATE after a write) they wait for vt_drop_settle,
** which commits or rolls them back as SQLite's schema shows.
*/
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include "vtab/vtab.h"

static char *dropped_name(const char *zName) {
  return sqlite3_mprintf(VT_DROPPED_PREFIX "%s", zName);
}

/* Replace a tombstone already under that name (one nobody settled), then
** rename the table to it. pArg: the vt_rename_arg. */
static int do_bury(store_txn *t, void *pArg, char **pzErr) {
  vt_rename_arg *a = pArg;
  int rc = vt_catalog_drop(t, (void *)a->zNew, pzErr);
  if (rc) return rc;
  return vt_catalog_rename(t, pArg, pzErr);
}

/* The tombstone back to the table's name, where the name is free. */
static int do_unbury(store_txn *t, void *pArg, char **pzErr) {
  vt_rename_arg *a = pArg; /* zOld: the tombstone */
  char *zMeta = vt_stripe_meta_name(a->zOld);
  if (!zMeta) return -ENOMEM;
  int bTomb = store_txn_table(t, a->zOld) || store_txn_table(t, zMeta);
  sqlite3_free(zMeta);
  if (!bTomb || store_txn_table(t, a->zNew)) return 0;
  return vt_catalog_rename(t, pArg, pzErr);
}

int vt_drop_clear_stale(store_txn *t, const char *zName, char **pzErr) {
  char *zTomb = dropped_name(zName);
  if (!zTomb) return -ENOMEM;
  int rc = vt_catalog_drop(t, zTomb, pzErr);
  sqlite3_free(zTomb);
  return rc;
}

/* Is some other table of the connection in the open transaction? */
static int others_in_txn(vt_conn *pConn, vt_tab *p) {
  for (vt_tab *t = pConn->pTabs; t; t = t->pNextTab)
    if (t != p && t->bInTxn) return 1;
  return 0;
}

static int any_device_txn(vt_conn *pConn) {
  for (vt_dev *d = pConn->pDevs; d; d = d->pNext)
    if (d->pTxn) return 1;
  return 0;
}

static int same_table(const vt_tab *a, const vt_tab *b) {
  return sqlite3_stricmp(a->zName, b->zName) == 0 && sqlite3_stricmp(a->zDb, b->zDb) == 0;
}

int vt_drop(vt_tab *p, int *pbKept) {
  vt_conn *pConn = p->pConn;
  char *zErr = NULL;
  *pbKept = 0;
  int rc = vt_tab_writable(p);
  if (rc) return rc;
  vt_txn_drop_idle(p);
  if (sqlite3_get_autocommit(pConn->db)) {
    vt_tab_txn_reset(p);
    rc = vt_stripe_catalog(p, vt_catalog_drop, p->zName, &zErr);
    return rc ? vt_err(&p->base, rc, zErr) : SQLITE_OK;
  }
  if (!others_in_txn(pConn, p) && any_device_txn(pConn)) {
    if (!pConn->bTxnDdl)
      vt_txn_rollback_all(pConn); /* only this table's writes */
    else
      pConn->bOrphanTxn = 1;
  }
  vt_tab_txn_reset(p);
  char *zTomb = dropped_name(p->zName);
  if (!zTomb) return SQLITE_NOMEM;
  vt_rename_arg a = {p->zName, zTomb};
  rc = vt_stripe_catalog(p, do_bury, &a, &zErr);
  sqlite3_free(zTomb);
  if (rc) return vt_err(&p->base, rc, zErr);
  vt_tab_unlink(p);
  p->pNextTab = pConn->pDropped;
  pConn->pDropped = p;
  *pbKept = 1;
  return SQLITE_OK;
}

int vt_drop_pending(vt_tab *p, char **pzErr) {
  for (vt_tab *t = p->pConn->pDropped; t; t = t->pNextTab)
    if (same_table(t, p)) {
      *pzErr = sqlite3_mprintf("csq: table %s was dropped in this transaction and csq keeps its "
                               "rows until the transaction ends: COMMIT before creating it again",
                               p->zName);
      return SQLITE_ERROR;
    }
  return SQLITE_OK;
}

int vt_drop_restore(vt_tab *p, int *pbRestored, char **pzErr) {
  *pbRestored = 0;
  if (p->bReadOnly) return SQLITE_OK;
  char *zTomb = dropped_name(p->zName), *zErr = NULL;
  if (!zTomb) return SQLITE_NOMEM;
  vt_rename_arg a = {zTomb, p->zName};
  int rc = vt_stripe_catalog(p, do_unbury, &a, &zErr);
  sqlite3_free(zTomb);
  if (rc) {
    free(zErr);
    return vt_rc_from(rc < 0 ? rc : -EIO);
  }
  /* the connection's own record of the drop is settled by this */
  for (vt_tab **pp = &p->pConn->pDropped; *pp; pp = &(*pp)->pNextTab) {
    vt_tab *t = *pp;
    if (same_table(t, p)) {
      *pp = t->pNextTab;
      t->pNextTab = NULL;
      vt_tab_free(t);
      break;
    }
  }
  (void)pzErr;
  *pbRestored = 1;
  return SQLITE_OK;
}

/* Does SQLite's schema hold table zName of database zDb? -1: the database
** is no longer attached, nobody can tell. */
static int schema_has(sqlite3 *db, const char *zDb, const char *zName) {
  if (!sqlite3_db_filename(db, zDb) && sqlite3_stricmp(zDb, "temp") != 0) return -1;
  return sqlite3_table_column_metadata(db, zDb, zName, NULL, NULL, NULL, NULL, NULL, NULL) ==
         SQLITE_OK;
}

/* Does dropped table p come back (1), or is it gone (0, or -1 when nobody
** can tell)? The schema has the table being created now, not the dropped
** one of its name. */
static int comes_back(vt_conn *pConn, const vt_tab *p, const vt_tab *pCreating) {
  if (pCreating && same_table(pCreating, p)) return 0;
  return schema_has(pConn->db, p->zDb, p->zName);
}

void vt_drop_settle(vt_conn *pConn, const vt_tab *pCreating) {
  if (!pConn->pDropped || !sqlite3_get_autocommit(pConn->db)) return;
  for (vt_tab *t = pConn->pTabs; t; t = t->pNextTab)
    if (t->bInTxn) return; /* a statement of its own is running */
  if (pConn->bOrphanTxn) {
    int bBack = comes_back(pConn, pConn->pDropped, pCreating);
    char *zErr = NULL;
    if (bBack != 0 || vt_txn_commit_all(pConn, &zErr)) vt_txn_rollback_all(pConn);
    free(zErr);
  }
  while (pConn->pDropped) {
    vt_tab *p = pConn->pDropped;
    pConn->pDropped = p->pNextTab;
    p->pNextTab = NULL;
    char *zTomb = dropped_name(p->zName), *zErr = NULL;
    int bBack = comes_back(pConn, p, pCreating);
    if (zTomb && bBack == 1) {
      vt_rename_arg a = {zTomb, p->zName};
      vt_stripe_catalog(p, do_unbury, &a, &zErr);
    } else if (zTomb && bBack == 0) {
      vt_stripe_catalog(p, vt_catalog_drop, zTomb, &zErr);
    }
    /* a failure leaves the tombstone: reconnecting or re-creating the
    ** table settles it */
    free(zErr);
    sqlite3_free(zTomb);
    vt_tab_free(p);
  }
}

void vt_drop_free_all(vt_conn *pConn) {
  while (pConn->pDropped) {
    vt_tab *p = pConn->pDropped;
    pConn->pDropped = p->pNextTab;
    p->pNextTab = NULL;
    vt_tab_free(p);
  }
  if (pConn->bOrphanTxn) vt_txn_rollback_all(pConn);
}
