/*
** vtab/table.c - the csq module: creating, connecting, renaming and dropping
** device tables.
**
**   CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT NOT NULL, ..., device='x.csd');
**
** xCreate puts the table in the device's catalog (creating and formatting the
** image when the path does not exist yet); xConnect, run when a database that
** already has the table is opened, only ever opens an existing csq image and
** finds the table in it. Catalog changes made here (create, drop, rename)
** commit on the device at once, unless the connection has a write
** transaction open on that device, whose commit then carries them.
*/
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include "vtab/vtab.h"

void vt_set_error(sqlite3_vtab *pVtab, const char *zFmt, ...) {
  va_list ap;
  va_start(ap, zFmt);
  sqlite3_free(pVtab->zErrMsg);
  pVtab->zErrMsg = sqlite3_vmprintf(zFmt, ap);
  va_end(ap);
}

/* Report a device/store failure: zMsg is malloc'd (libc) and freed here. */
int vt_err(sqlite3_vtab *pVtab, int rc, char *zMsg) {
  if (zMsg) {
    vt_set_error(pVtab, "csq: %s", zMsg);
    free(zMsg);
  } else if (rc == -ENOMEM) {
    vt_set_error(pVtab, "csq: out of memory");
  } else {
    vt_set_error(pVtab, "csq: device error %d", rc);
  }
  return vt_rc_from(rc < 0 ? rc : -EIO);
}

typedef struct create_arg {
  const char *zName;
  vt_schema *pS;
} create_arg;

static int do_create(store_txn *t, void *pArg, char **pzErr) {
  create_arg *a = pArg;
  store_table *pOld = store_txn_table(t, a->zName);
  if (pOld) {
    /* left over from a CREATE whose SQLite transaction rolled back: reuse
    ** it only if it holds nothing */
    if (pOld->nRg > 0) {
      *pzErr = NULL;
      return -EEXIST;
    }
    int rc = store_txn_drop_table(t, a->zName, pzErr);
    if (rc) return rc;
  }
  store_col *aCol = calloc((size_t)a->pS->nCol, sizeof(store_col));
  if (!aCol) return -ENOMEM;
  for (int i = 0; i < a->pS->nCol; i++) {
    aCol[i].zName = a->pS->aCol[i].zName;
    aCol[i].zType = a->pS->aCol[i].zType;
    aCol[i].bNotNull = a->pS->aCol[i].bNotNull;
  }
  int rc = store_txn_create_table(t, a->zName, a->pS->nCol, aCol, pzErr);
  free(aCol);
  return rc;
}

/* Drop the table, and its stripe metadata if it has some. */
static int do_drop(store_txn *t, void *pArg, char **pzErr) {
  const char *zName = pArg;
  int rc = 0;
  if (store_txn_table(t, zName)) rc = store_txn_drop_table(t, zName, pzErr);
  char *zMeta = vt_stripe_meta_name(zName);
  if (!zMeta) return -ENOMEM;
  if (rc == 0 && store_txn_table(t, zMeta)) rc = store_txn_drop_table(t, zMeta, pzErr);
  sqlite3_free(zMeta);
  return rc;
}

typedef struct rename_arg {
  const char *zOld, *zNew;
} rename_arg;
static int do_rename(store_txn *t, void *pArg, char **pzErr) {
  rename_arg *a = pArg;
  int rc = store_txn_rename_table(t, a->zOld, a->zNew, pzErr);
  char *zOld = vt_stripe_meta_name(a->zOld), *zNew = vt_stripe_meta_name(a->zNew);
  if (!zOld || !zNew) rc = rc ? rc : -ENOMEM;
  if (rc == 0 && store_txn_table(t, zOld)) rc = store_txn_rename_table(t, zOld, zNew, pzErr);
  sqlite3_free(zOld);
  sqlite3_free(zNew);
  return rc;
}

static void tab_free(vt_tab *p) {
  if (!p) return;
  vt_tab_txn_reset(p);
  if (p->pConn) {
    for (vt_tab **pp = &p->pConn->pTabs; *pp; pp = &(*pp)->pNextTab)
      if (*pp == p) {
        *pp = p->pNextTab;
        break;
      }
  }
  for (int k = 0; k < p->nMem; k++)
    if (p->apMem[k]) vt_dev_release(p->pConn, p->apMem[k]);
  sqlite3_free(p->apMem);
  vt_schema_clear(&p->s);
  sqlite3_free(p->aZone);
  sqlite3_free(p->zName);
  sqlite3_free(p->zDb);
  sqlite3_free(p);
}

static int tab_init(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                    sqlite3_vtab **ppVtab, char **pzErr, int bCreate) {
  vt_conn *pConn = pAux;
  vt_tab *p = sqlite3_malloc64(sizeof(*p));
  int rc;
  if (!p) return SQLITE_NOMEM;
  memset(p, 0, sizeof(*p));
  p->s.iIpk = -1;
  p->pConn = pConn;
  p->zDb = sqlite3_mprintf("%s", argv[1]);
  p->zName = sqlite3_mprintf("%s", argv[2]);
  if (!p->zDb || !p->zName) {
    rc = SQLITE_NOMEM;
    goto fail;
  }
  rc = vt_schema_parse(argc, argv, &p->s, pzErr);
  if (rc) goto fail;
  rc = vt_stripe_open(p, db, bCreate, pzErr);
  if (rc) goto fail;
  const char *zDevName = p->nMem > 1 ? p->s.zDevices : p->pDev->zKey;
  if (strcmp(zDevName, ":memory:") == 0) zDevName = "(in-memory device)";
  char *zErr = NULL;
  if (bCreate) {
    create_arg a = {p->zName, &p->s};
    int e = vt_stripe_create(p, do_create, &a, &zErr);
    if (e == -EEXIST && !zErr) {
      *pzErr = sqlite3_mprintf("csq: table %s already exists on device %s and holds rows; drop "
                               "it from the database that owns it, or use another name",
                               p->zName, zDevName);
      rc = SQLITE_ERROR;
      goto fail;
    }
    if (e) {
      *pzErr = sqlite3_mprintf("csq: %s", zErr ? zErr : "cannot create the table");
      free(zErr);
      rc = vt_rc_from(e < 0 ? e : -EIO);
      goto fail;
    }
  } else {
    rc = vt_stripe_check(p, pzErr);
    if (rc) goto fail;
  }
  rc = sqlite3_declare_vtab(db, p->s.zDeclare);
  if (rc) {
    *pzErr = sqlite3_mprintf("csq: bad column definitions: %s", sqlite3_errmsg(db));
    goto fail;
  }
  sqlite3_vtab_config(db, SQLITE_VTAB_CONSTRAINT_SUPPORT, 1);
  p->pNextTab = pConn->pTabs;
  pConn->pTabs = p;
  *ppVtab = &p->base;
  return SQLITE_OK;
fail:
  tab_free(p);
  return rc;
}

static int vt_create(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                     sqlite3_vtab **ppVtab, char **pzErr) {
  return tab_init(db, pAux, argc, argv, ppVtab, pzErr, 1);
}

static int vt_connect(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                      sqlite3_vtab **ppVtab, char **pzErr) {
  return tab_init(db, pAux, argc, argv, ppVtab, pzErr, 0);
}

static int vt_disconnect(sqlite3_vtab *pVtab) {
  tab_free((vt_tab *)pVtab);
  return SQLITE_OK;
}

static int vt_destroy(sqlite3_vtab *pVtab) {
  vt_tab *p = (vt_tab *)pVtab;
  char *zErr = NULL;
  vt_txn_drop_idle(p);
  vt_tab_txn_reset(p);
  int rc = vt_stripe_catalog(p, do_drop, p->zName, &zErr);
  if (rc) return vt_err(pVtab, rc, zErr);
  tab_free(p);
  return SQLITE_OK;
}

static int vt_rename(sqlite3_vtab *pVtab, const char *zNew) {
  vt_tab *p = (vt_tab *)pVtab;
  char *zErr = NULL;
  rename_arg a = {p->zName, zNew};
  vt_txn_drop_idle(p);
  int rc = vt_stripe_catalog(p, do_rename, &a, &zErr);
  if (rc) return vt_err(pVtab, rc, zErr);
  char *z = sqlite3_mprintf("%s", zNew);
  if (!z) return SQLITE_NOMEM;
  sqlite3_free(p->zName);
  p->zName = z;
  return SQLITE_OK;
}

static int vt_shadow_name(const char *zName) {
  (void)zName;
  return 0;
}

sqlite3_module vt_module = {
    .iVersion = 3,
    .xCreate = vt_create,
    .xConnect = vt_connect,
    .xBestIndex = vt_best_index,
    .xDisconnect = vt_disconnect,
    .xDestroy = vt_destroy,
    .xOpen = vt_open,
    .xClose = vt_close,
    .xFilter = vt_filter,
    .xNext = vt_next,
    .xEof = vt_eof,
    .xColumn = vt_column,
    .xRowid = vt_rowid,
    .xUpdate = vt_update,
    .xBegin = vt_begin,
    .xSync = vt_sync,
    .xCommit = vt_commit,
    .xRollback = vt_rollback,
    .xFindFunction = NULL,
    .xRename = vt_rename,
    .xSavepoint = vt_savepoint,
    .xRelease = vt_release,
    .xRollbackTo = vt_rollback_to,
    .xShadowName = vt_shadow_name,
};
