/*
** vtab/lock.c - how csq's writes fit SQLite's locks: the connection's busy
** timeout, SQLite's database-file lock taken before a device commit, and
** tables that may not be written at all.
**
** Busy timeout. A writer waits for the device's write lock (another
** connection's or another process's transaction on the same image) as long
** as SQLite would wait for a lock of its own: the connection's busy timeout,
** read with PRAGMA busy_timeout when a device transaction begins (SQLite has
** no other getter). 0 (none set, or a busy handler of the application's own,
** which csq cannot call) means no waiting, as in SQLite.
**
** Commit order. SQLite commits a virtual table's transaction in xSync, and
** only then takes the EXCLUSIVE lock on the database file that every write
** transaction in rollback-journal mode ends with (it waits there for the
** connections still reading the database). If that wait timed out after
** csq had committed the device, the statement would fail with "database is
** locked" while its rows stayed committed. So before the device commit,
** csq takes that lock itself, through the database file's own xLock, with
** the same timeout; SQLite then finds it held and goes on. A timeout there
** fails the commit before anything is written: an autocommit statement is
** rolled back whole, and a COMMIT stays open, to be retried or rolled back,
** as with SQLite's own "database is locked". Databases in WAL mode (where a
** commit takes no such lock) and files whose VFS does not report its lock
** state (SQLITE_FCNTL_LOCKSTATE) are left to SQLite as before.
**
** Read-only. A table is read-only when its database is (sqlite3_db_readonly:
** mode=ro, immutable=1, sqlite3 -readonly, a file the process may not
** write) or when one of its devices is (store_read_only: an image file the
** process may only read). Reads work as usual; a write, CREATE, DROP or
** RENAME fails with SQLITE_READONLY and a message naming the table, before
** anything is locked or changed.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "vtab/vtab.h"

/* The connection's busy timeout in ms, read now and kept in pConn->busyMs
** (which stays as it was if the PRAGMA cannot run). */
int vt_busy_ms(vt_conn *pConn) {
  sqlite3_stmt *pStmt = NULL;
  if (sqlite3_prepare_v2(pConn->db, "PRAGMA busy_timeout", -1, &pStmt, NULL) == SQLITE_OK &&
      sqlite3_step(pStmt) == SQLITE_ROW) {
    int ms = sqlite3_column_int(pStmt, 0);
    pConn->busyMs = ms > 0 ? ms : 0;
  }
  sqlite3_finalize(pStmt);
  return pConn->busyMs;
}

/* Take the EXCLUSIVE lock on pFile, retrying while it is busy for up to ms
** milliseconds (back-off as SQLite's busy handler: 1 ms doubling to 64).
** SQLite's code: SQLITE_OK, SQLITE_BUSY, or an I/O error. */
static int lock_exclusive(sqlite3_file *pFile, int ms) {
  int waited = 0, step = 1;
  for (;;) {
    int rc = pFile->pMethods->xLock(pFile, SQLITE_LOCK_EXCLUSIVE);
    if (rc != SQLITE_BUSY || waited >= ms) return rc;
    int n = step < ms - waited ? step : ms - waited;
    sqlite3_sleep(n);
    waited += n;
    if (step < 64) step *= 2;
  }
}

/* Before the devices commit: SQLite's EXCLUSIVE lock on the file of every
** database this connection writes in rollback-journal mode, waiting up to
** pConn->busyMs for its readers. 0, or -EBUSY / -EIO with *pzErr
** (libc-malloc'd) saying nothing was committed. */
int vt_lock_for_commit(vt_conn *pConn, char **pzErr) {
  sqlite3 *db = pConn->db;
  int bNames = sqlite3_libversion_number() >= 3039000; /* sqlite3_db_name: else "main" only */
  const char *zDb;
  for (int i = 0; (zDb = bNames ? sqlite3_db_name(db, i) : i == 0 ? "main" : NULL) != NULL; i++) {
    sqlite3_file *pFile = NULL;
    int eLock = SQLITE_LOCK_NONE;
    if (sqlite3_txn_state(db, zDb) != SQLITE_TXN_WRITE) continue;
    if (sqlite3_file_control(db, zDb, SQLITE_FCNTL_FILE_POINTER, &pFile) != SQLITE_OK || !pFile ||
        !pFile->pMethods)
      continue; /* in memory: no lock */
    if (sqlite3_file_control(db, zDb, SQLITE_FCNTL_LOCKSTATE, &eLock) != SQLITE_OK) continue;
    if (eLock != SQLITE_LOCK_RESERVED && eLock != SQLITE_LOCK_PENDING) continue; /* WAL, or held */
    int rc = lock_exclusive(pFile, pConn->busyMs);
    if (rc == SQLITE_BUSY) {
      *pzErr = dev_mprintf("database %s is locked: other connections still read it after %d ms "
                           "(busy_timeout), and a commit waits for them; nothing was committed",
                           zDb, pConn->busyMs);
      return -EBUSY;
    }
    if (rc != SQLITE_OK) {
      *pzErr = dev_mprintf("database %s: cannot lock its file to commit (%s); nothing was "
                           "committed",
                           zDb, sqlite3_errstr(rc));
      return -EIO;
    }
  }
  return 0;
}

/* SQLITE_OK when table p may be written; else SQLITE_READONLY with the
** vtab's error message naming the table and why. */
int vt_tab_writable(vt_tab *p) {
  char aName[DEV_NAME_SHOW_BUF];
  const char *zTab = dev_name_show(p->zName, aName);
  if (p->bReadOnly) {
    vt_set_error(&p->base, "csq: table %s is read-only: database %s is opened read-only", zTab,
                 p->zDb);
    return SQLITE_READONLY;
  }
  for (int k = 0; k < p->nMem; k++) {
    if (p->apMem[k] && store_read_only(p->apMem[k]->pStore)) {
      vt_set_error(&p->base,
                   "csq: table %s is read-only: its device image %s may not be written by this "
                   "process (file permissions, a read-only file system or a write-protected "
                   "device)",
                   zTab, p->apMem[k]->zKey);
      return SQLITE_READONLY;
    }
  }
  return SQLITE_OK;
}
