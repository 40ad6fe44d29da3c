/*
** vtab/conn.c - what one SQLite connection holds: the devices its csq tables
** live on, each with the connection's own queue pair, and the counters that
** csq_stats reports for it.
**
** The device for a path is shared process-wide by the driver (dev_open) and
** its store by store_open; here each connection adds its own queue, so that
** its commands and counters stay its own.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "device/format/group.h"
#include "vtab/vtab.h"

vt_conn *vt_conn_new(sqlite3 *db) {
  vt_conn *p = sqlite3_malloc64(sizeof(*p));
  if (!p) return NULL;
  memset(p, 0, sizeof(*p));
  p->db = db;
  p->nProbeCopy = VT_PROBE_EAGER_BUDGET;
  p->nProbeChunks = VT_PROBE_CACHE_BUDGET;
  return p;
}

static void dev_close(vt_conn *pConn, vt_dev *d) {
  if (d->pTxn) store_txn_rollback(d->pTxn);
  if (d->pStmtSnap) store_snap_unref(d->pStmtSnap);
  if (d->pQ) {
    dev_stats_add(&pConn->closed, dev_queue_stats(d->pQ));
  }
  if (d->pStore) store_unref(d->pStore);
  if (d->pQ) dev_queue_close(d->pQ);
  if (d->pDev) dev_unref(d->pDev);
  sqlite3_free(d->zKey);
  sqlite3_free(d);
}

void vt_conn_free(void *pArg) {
  vt_conn *p = pArg;
  vt_drop_free_all(p); /* they hold devices */
  vt_bpf_free_all(p);
  while (p->pDevs) {
    vt_dev *d = p->pDevs;
    p->pDevs = d->pNext;
    dev_close(p, d);
  }
  sqlite3_free(p);
  csq_vec_release_kept(); /* a closed connection runs no more queries */
  csq_group_release_kept();
}

/* Map a device/store return code to SQLite's. */
int vt_rc_from(int rc) {
  switch (rc) {
  case 0:
    return SQLITE_OK;
  case -ENOMEM:
    return SQLITE_NOMEM;
  case -EBUSY:
    return SQLITE_BUSY;
  case -EBADMSG:
    return SQLITE_CORRUPT;
  case -ENOSPC:
    return SQLITE_FULL;
  case -EROFS:
    return SQLITE_READONLY; /* a write to a read-only image */
  case -EACCES:
  case -EPERM:
    return SQLITE_CANTOPEN;
  case -ENOENT:
    return SQLITE_CANTOPEN;
  default:
    return SQLITE_ERROR;
  }
}

/* Open (or reuse) the device at zPath for this connection. zPath NULL means
** the connection's in-memory device. bCreate: create and format the image
** when it does not exist (xCreate); xConnect passes 0 and so never creates a
** file nor opens something that is not a csq image. eMedia: VT_MEDIA_*; a
** device already open another way than the one asked for is an error. */
int vt_conn_device(vt_conn *pConn, const char *zPath, int bCreate, int eMedia, vt_dev **ppDev,
                   char **pzErr) {
  const char *zKey = zPath ? zPath : ":memory:";
  if (!zPath && pConn->pMem) {
    pConn->pMem->nRef++;
    *ppDev = pConn->pMem;
    return SQLITE_OK;
  }
  if (zPath) {
    for (vt_dev *d = pConn->pDevs; d; d = d->pNext) {
      if (d != pConn->pMem && strcmp(d->zKey, zKey) == 0) {
        if (eMedia != VT_MEDIA_ANY && eMedia != d->eMedia) {
          *pzErr = sqlite3_mprintf("csq: device %s is already open with media='%s' in this "
                                   "connection (the first table to open a device decides)",
                                   zKey, d->eMedia == VT_MEDIA_DIRECT ? "direct" : "buffered");
          return SQLITE_ERROR;
        }
        d->nRef++;
        *ppDev = d;
        return SQLITE_OK;
      }
    }
  }
  vt_dev *d = sqlite3_malloc64(sizeof(*d));
  if (!d) return SQLITE_NOMEM;
  memset(d, 0, sizeof(*d));
  d->zKey = sqlite3_mprintf("%s", zKey);
  if (!d->zKey) {
    sqlite3_free(d);
    return SQLITE_NOMEM;
  }
  dev_options o;
  dev_options_default(&o);
  o.bCreate = bCreate;
  o.bDirect = zPath && eMedia == VT_MEDIA_DIRECT;
  d->eMedia = o.bDirect ? VT_MEDIA_DIRECT : VT_MEDIA_BUFFERED;
  char *zDevErr = NULL;
  int rc = dev_open(zKey, &o, &d->pDev, &zDevErr);
  if (rc == -ENOENT && !bCreate && zPath) {
    /* what a user meets after copying a database file without its image */
    *pzErr = sqlite3_mprintf("cannot open device %s: the device image does not exist (a database "
                             "file copied without its image? SELECT csq_backup('dest.db') copies "
                             "both)",
                             zKey);
    free(zDevErr);
    dev_close(pConn, d);
    return SQLITE_CANTOPEN;
  }
  if (rc) {
    *pzErr = sqlite3_mprintf("cannot open device %s: %s", zKey, zDevErr ? zDevErr : "error");
    free(zDevErr);
    dev_close(pConn, d);
    return vt_rc_from(rc < 0 ? rc : -EIO);
  }
  rc = dev_queue_open(d->pDev, &d->pQ);
  if (rc) {
    *pzErr = sqlite3_mprintf("device %s: cannot create a queue pair (%d)", zKey, rc);
    dev_close(pConn, d);
    return SQLITE_ERROR;
  }
  rc = store_open(d->pDev, d->pQ, bCreate, &d->pStore, &zDevErr);
  if (rc) {
    *pzErr = sqlite3_mprintf("%s", zDevErr ? zDevErr : "cannot open the device image");
    free(zDevErr);
    dev_close(pConn, d);
    return vt_rc_from(rc < 0 ? rc : -EIO);
  }
  d->nRef = 1;
  d->pNext = pConn->pDevs;
  pConn->pDevs = d;
  if (!zPath) pConn->pMem = d;
  *ppDev = d;
  return SQLITE_OK;
}

void vt_dev_release(vt_conn *pConn, vt_dev *d) {
  if (--d->nRef > 0) return;
  /* the in-memory device holds the tables: keep it for the connection's life */
  if (d == pConn->pMem) {
    d->nRef = 0;
    return;
  }
  for (vt_dev **pp = &pConn->pDevs; *pp; pp = &(*pp)->pNext) {
    if (*pp == d) {
      *pp = d->pNext;
      break;
    }
  }
  dev_close(pConn, d);
}

void vt_conn_stats(vt_conn *pConn, dev_stats *pOut) {
  *pOut = pConn->closed;
  for (vt_dev *d = pConn->pDevs; d; d = d->pNext) dev_stats_add(pOut, dev_queue_stats(d->pQ));
}

void vt_conn_stats_reset(vt_conn *pConn) {
  memset(&pConn->closed, 0, sizeof(pConn->closed));
  pConn->nImportRows = pConn->nImportSkipped = 0;
  pConn->nImportBytes = 0;
  pConn->nStarJoins = 0;
  pConn->nKeyGroups = 0;
  for (vt_dev *d = pConn->pDevs; d; d = d->pNext)
    memset(dev_queue_stats(d->pQ), 0, sizeof(dev_stats));
}

/* The default device of a schema: "X-csd" beside database file X; NULL (the
** connection's in-memory device) for in-memory and temporary databases. */
char *vt_default_device(sqlite3 *db, const char *zDb) {
  const char *zFile = sqlite3_db_filename(db, zDb);
  if (!zFile || !zFile[0]) return NULL;
  return sqlite3_mprintf("%s-csd", zFile);
}
