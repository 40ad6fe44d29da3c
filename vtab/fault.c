/*
** vtab/fault.c - fault injection and command timeouts from SQL:
**
**   SELECT csq_fault('op=nvm_read,nth=1,action=status:0x281');  -- default device
**   SELECT csq_fault('op=execute,action=timeout', 'data/x.csd'); -- a named device
**   SELECT csq_fault(NULL);            -- or '': no more faults
**   SELECT csq_timeout(200);           -- commands fail after 200 ms
**   SELECT csq_timeout(30000, 'data/x.csd');
**
** The spec language is device/emu/fault.h's. csq_fault returns the spec it
** replaced (NULL if none); csq_timeout returns the previous timeout in ms.
** Without a path both act on the default device of the main database (the
** image "X-csd" beside database file X; the connection's in-memory device
** for an in-memory database).
**
** Both act on the device object, and a device is shared by every connection
** and table of this process that uses the same image: a fault set here fires
** on their commands too, and stays until it is cleared or the last user of
** the device closes it. The device stays open for this connection's life
** once one of these functions named it, so the setting is not lost between
** statements. Only the emulated device (emu backend) injects faults.
**
** Both functions are SQLITE_DIRECTONLY: a view or trigger in a database file
** from elsewhere cannot call them.
*/
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "vtab/vtab.h"

/* The device a call names: argv[iPath] if given and not NULL, else the
** default device of "main". Opens it for the connection if no table of the
** connection has it open yet (and keeps it open: see the banner); an image
** that does not exist is an error, never created. 0, or an error already
** reported on ctx. */
static int fault_device(sqlite3_context *ctx, int argc, sqlite3_value **argv, int iPath,
                        dev_device **ppDev) {
  vt_conn *pConn = sqlite3_user_data(ctx);
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  char *zPath = NULL, *zErr = NULL;
  vt_dev *pVd = NULL;
  int rc;
  *ppDev = NULL;
  if (argc > iPath && sqlite3_value_type(argv[iPath]) != SQLITE_NULL) {
    const char *z = (const char *)sqlite3_value_text(argv[iPath]);
    if (!z || !z[0]) {
      sqlite3_result_error(ctx, "csq: the device path is empty", -1);
      return SQLITE_ERROR;
    }
    zPath = sqlite3_mprintf("%s", z);
    if (!zPath) {
      sqlite3_result_error_nomem(ctx);
      return SQLITE_NOMEM;
    }
  } else {
    zPath = vt_default_device(db, "main"); /* NULL: the in-memory device */
  }
  if (!zPath) {
    if (pConn->pMem) {
      *ppDev = pConn->pMem->pDev;
      return SQLITE_OK;
    }
  } else {
    /* A device this connection has open under another spelling of the path. */
    char *zReal = realpath(zPath, NULL);
    for (vt_dev *d = pConn->pDevs; d && zReal; d = d->pNext) {
      if (d != pConn->pMem && strcmp(dev_path(d->pDev), zReal) == 0) {
        *ppDev = d->pDev;
        break;
      }
    }
    free(zReal);
    if (*ppDev) {
      sqlite3_free(zPath);
      return SQLITE_OK;
    }
  }
  /* The in-memory device is private to the connection: creating it is harmless. */
  rc = vt_conn_device(pConn, zPath, zPath == NULL, VT_MEDIA_ANY, &pVd, &zErr);
  if (rc) {
    vt_result_errorf(ctx, "csq: %s", zErr ? zErr : sqlite3_errstr(rc));
    sqlite3_free(zErr);
    sqlite3_free(zPath);
    return rc;
  }
  sqlite3_free(zPath);
  *ppDev = pVd->pDev;
  return SQLITE_OK;
}

/* csq_fault(SPEC [, PATH]): set (or with NULL/'' clear) the device's fault
** rules; returns the previous spec or NULL. A bad spec is an SQL error
** quoting the parser's message, and leaves the device's rules unchanged. */
static void fault_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  dev_device *pDev;
  const char *zSpec = (const char *)sqlite3_value_text(argv[0]); /* NULL for NULL */
  char *zPrev = NULL, *zErr = NULL;
  if (fault_device(ctx, argc, argv, 1, &pDev)) return;
  int rc = dev_set_fault(pDev, zSpec, &zPrev, &zErr);
  if (rc) {
    vt_result_errorf(ctx, "csq_fault: %s", zErr ? zErr : "cannot set the fault");
    free(zErr);
    return;
  }
  if (zPrev)
    sqlite3_result_text(ctx, zPrev, -1, SQLITE_TRANSIENT);
  else
    sqlite3_result_null(ctx);
  free(zPrev);
}

/* csq_timeout(MS [, PATH]): set the device's command timeout; returns the
** previous one. MS must be an integer from 1 to 86400000 (a day). */
static void timeout_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  dev_device *pDev;
  sqlite3_int64 ms = sqlite3_value_int64(argv[0]);
  int t = sqlite3_value_numeric_type(argv[0]);
  if ((t != SQLITE_INTEGER && t != SQLITE_FLOAT) || ms < 1 || ms > 86400000) {
    sqlite3_result_error(ctx,
                         "csq_timeout: the timeout must be a number of milliseconds "
                         "from 1 to 86400000",
                         -1);
    return;
  }
  if (fault_device(ctx, argc, argv, 1, &pDev)) return;
  sqlite3_result_int(ctx, dev_set_timeout(pDev, (int)ms));
}

/* Register csq_fault and csq_timeout (one and two arguments each). */
int vt_fault_register(sqlite3 *db, vt_conn *pConn) {
  int flags = SQLITE_UTF8 | SQLITE_DIRECTONLY;
  int rc = sqlite3_create_function(db, "csq_fault", 1, flags, pConn, fault_func, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_create_function(db, "csq_fault", 2, flags, pConn, fault_func, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_create_function(db, "csq_timeout", 1, flags, pConn, timeout_func, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_create_function(db, "csq_timeout", 2, flags, pConn, timeout_func, NULL, NULL);
  return rc;
}
