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

/* zMsg (sqlite3_malloc'd, freed here) with every name of table p longer
** than DEV_NAME_SHOW bytes (its own, its columns') cut as dev_name_show
** cuts it: a name may be 65535 bytes long, and it reaches messages from
** many places (the store, the cursor, the write path), so it is cut once,
** where the message leaves csq. Longest names first, so that a name inside
** a longer one is not cut twice. NULL when out of memory. */
static char *cut_names(const vt_tab *p, char *zMsg) {
  const char *azLong[1 + 64];
  int nLong = 0;
  if (!zMsg) return NULL;
  for (int i = -1; i < p->s.nCol && nLong < (int)(sizeof(azLong) / sizeof(azLong[0])); i++) {
    const char *z = i < 0 ? p->zName : p->s.aCol[i].zName;
    if (z && strlen(z) > DEV_NAME_SHOW && strstr(zMsg, z)) azLong[nLong++] = z;
  }
  for (int i = 1; i < nLong; i++) /* insertion sort, longest first: a handful */
    for (int j = i; j > 0 && strlen(azLong[j]) > strlen(azLong[j - 1]); j--) {
      const char *t = azLong[j];
      azLong[j] = azLong[j - 1];
      azLong[j - 1] = t;
    }
  for (int i = 0; i < nLong && zMsg; i++) {
    char aBuf[DEV_NAME_SHOW_BUF];
    const char *zShow = dev_name_show(azLong[i], aBuf);
    size_t nName = strlen(azLong[i]);
    sqlite3_str *pOut = sqlite3_str_new(NULL);
    const char *z = zMsg, *zHit;
    while ((zHit = strstr(z, azLong[i])) != NULL) {
      sqlite3_str_append(pOut, z, (int)(zHit - z));
      sqlite3_str_appendall(pOut, zShow);
      z = zHit + nName;
    }
    sqlite3_str_appendall(pOut, z);
    sqlite3_free(zMsg);
    zMsg = sqlite3_str_finish(pOut);
  }
  return zMsg;
}

void vt_set_error(sqlite3_vtab *pVtab, const char *zFmt, ...) {
  va_list ap;
  va_start(ap, zFmt);
  sqlite3_free(pVtab->zErrMsg);
  pVtab->zErrMsg = sqlite3_vmprintf(zFmt, ap);
  va_end(ap);
  /* a csq table's (SQLite sets pModule once xCreate/xConnect returned;
  ** tab_init cuts its own messages) */
  if (pVtab->pModule == &vt_module) pVtab->zErrMsg = cut_names((vt_tab *)pVtab, pVtab->zErrMsg);
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

void vt_result_errorf(sqlite3_context *ctx, const char *zFmt, ...) {
  va_list ap;
  va_start(ap, zFmt);
  char *z = sqlite3_vmprintf(zFmt, ap);
  va_end(ap);
  if (z)
    sqlite3_result_error(ctx, z, -1);
  else
    sqlite3_result_error_nomem(ctx);
  sqlite3_free(z);
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
  int rc = vt_drop_clear_stale(t, a->zName, pzErr);
  if (rc) return rc;
  store_col *aCol = calloc((size_t)a->pS->nCol, sizeof(store_col));
  if (!aCol) return -ENOMEM;
  for (int i = 0; i < a->pS->nCol; i++) {
    aCol[i].zName = a->pS->aCol[i].zName;
    aCol[i].zType = a->pS->aCol[i].zType;
    aCol[i].bNotNull = a->pS->aCol[i].bNotNull;
  }
  rc = store_txn_create_table(t, a->zName, a->pS->nCol, aCol, pzErr);
  free(aCol);
  return rc;
}

int vt_catalog_drop(store_txn *t, void *pArg, char **pzErr) {
  const char *zName = pArg;
  int rc = 0;
  if (store_txn_table(t, zName)) rc = store_txn_drop_table(t, zName, pzErr);
  char *zMeta = vt_stripe_meta_name(zName);
  if (!zMeta) return -ENOMEM;
  if (rc == 0 && store_txn_table(t, zMeta)) rc = store_txn_drop_table(t, zMeta, pzErr);
  sqlite3_free(zMeta);
  return rc;
}

int vt_catalog_rename(store_txn *t, void *pArg, char **pzErr) {
  vt_rename_arg *a = pArg;
  /* a stripe's member may lack the table (torn): its metadata still moves */
  int rc = store_txn_table(t, a->zOld) ? store_txn_rename_table(t, a->zOld, a->zNew, pzErr) : 0;
  char *zOld = vt_stripe_meta_name(a->zOld), *zNew = vt_stripe_meta_name(a->zNew);
  if (!zOld || !zNew) rc = rc ? rc : -ENOMEM;
  if (rc == 0 && store_txn_table(t, zOld)) rc = store_txn_rename_table(t, zOld, zNew, pzErr);
  sqlite3_free(zOld);
  sqlite3_free(zNew);
  return rc;
}

/* Refuse at CREATE (bColumns) or RENAME a name the catalog cannot hold
** (STORE_MAX_NAME bytes: table and column names, declared types, a stripe's
** device list); a striped table's name must also leave room for its
** metadata table's in a prepared commit (STORE_MAX_DECISION_NAME); and
** every name room for VT_DROPPED_PREFIX (vtab/drop.c). So a table never
** works in its session only to be lost at the next open.
** SQLITE_OK, or SQLITE_ERROR with *pzErr sqlite3_malloc'd. */
static int names_fit(const vt_tab *p, const char *zName, int bColumns, char **pzErr) {
  char aName[DEV_NAME_SHOW_BUF];
  size_t nDropped = strlen(VT_DROPPED_PREFIX);
  size_t nMax = STORE_MAX_NAME - nDropped, n = strlen(zName);
  if (p->s.nDevice > 1) {
    char *zMeta = vt_stripe_meta_name(zName);
    if (!zMeta) return SQLITE_NOMEM;
    size_t nExtra = strlen(zMeta) - n;
    sqlite3_free(zMeta);
    nMax = STORE_MAX_DECISION_NAME - nExtra - nDropped;
  }
  if (n > nMax) {
    *pzErr =
        sqlite3_mprintf("csq: table name '%s' is %llu bytes long; csq keeps names of "
                        "at most %llu bytes for a table%s",
                        dev_name_show(zName, aName), (unsigned long long)n,
                        (unsigned long long)nMax, p->s.nDevice > 1 ? " over several devices" : "");
    return SQLITE_ERROR;
  }
  for (int i = 0; bColumns && i < p->s.nCol; i++) {
    const vt_col *c = &p->s.aCol[i];
    int bName = strlen(c->zName) > STORE_MAX_NAME;
    const char *z = bName ? c->zName : c->zType;
    if (z && strlen(z) > STORE_MAX_NAME) {
      *pzErr = sqlite3_mprintf("csq: %s '%s' is %llu bytes long; csq keeps %s of at most %d "
                               "bytes",
                               bName ? "column name" : "declared type", dev_name_show(z, aName),
                               (unsigned long long)strlen(z), bName ? "names" : "declared types",
                               STORE_MAX_NAME);
      return SQLITE_ERROR;
    }
  }
  if (bColumns && p->s.zDevices && strlen(p->s.zDevices) > STORE_MAX_NAME) {
    *pzErr = sqlite3_mprintf("csq: the devices= list is %llu bytes long; csq keeps one of at "
                             "most %d bytes",
                             (unsigned long long)strlen(p->s.zDevices), STORE_MAX_NAME);
    return SQLITE_ERROR;
  }
  return SQLITE_OK;
}

void vt_tab_unlink(vt_tab *p) {
  if (!p->pConn) return;
  for (vt_tab **pp = &p->pConn->pTabs; *pp; pp = &(*pp)->pNextTab)
    if (*pp == p) {
      *pp = p->pNextTab;
      p->pNextTab = NULL;
      return;
    }
}

void vt_tab_free(vt_tab *p) {
  if (!p) return;
  vt_tab_txn_reset(p);
  vt_tab_unlink(p);
  for (int k = 0; k < p->nMem; k++)
    if (p->apMem[k]) vt_dev_release(p->pConn, p->apMem[k]);
  sqlite3_free(p->apMem);
  vt_check_free(p);
  vt_probe_drop_table(p);
  vt_schema_clear(&p->s);
  sqlite3_free(p->aZone);
  sqlite3_free(p->aNdv);
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
  p->bReadOnly = sqlite3_db_readonly(db, p->zDb) == 1;
  vt_drop_settle(pConn, bCreate ? p : NULL);
  rc = vt_schema_parse(argc, argv, &p->s, pzErr);
  if (rc == SQLITE_OK && bCreate) rc = names_fit(p, p->zName, 1, pzErr);
  if (rc == SQLITE_OK && bCreate) rc = vt_check_create(db, p, pzErr);
  if (rc) goto fail;
  rc = vt_stripe_open(p, db, bCreate, pzErr);
  if (rc) goto fail;
  const char *zDevName = p->nMem > 1 ? p->s.zDevices : p->pDev->zKey;
  if (strcmp(zDevName, ":memory:") == 0) zDevName = "(in-memory device)";
  char *zErr = NULL;
  if (bCreate) {
    rc = vt_drop_pending(p, pzErr);
    if (rc) goto fail;
    rc = vt_tab_writable(p);
    if (rc) {
      *pzErr = p->base.zErrMsg; /* moved: vt_tab_free does not free it */
      p->base.zErrMsg = NULL;
      goto fail;
    }
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
    int bRestored = 0;
    /* a DROP inside a transaction that rolled back: the table is back */
    if (rc && vt_drop_restore(p, &bRestored, pzErr) == SQLITE_OK && bRestored) {
      sqlite3_free(*pzErr);
      *pzErr = NULL;
      rc = vt_stripe_check(p, pzErr);
    }
    if (rc) goto fail;
  }
  rc = sqlite3_declare_vtab(db, p->s.zDeclare);
  if (rc) {
    *pzErr = sqlite3_mprintf("csq: bad column definitions: %s", sqlite3_errmsg(db));
    goto fail;
  }
  sqlite3_vtab_config(db, SQLITE_VTAB_CONSTRAINT_SUPPORT, 1);
  /* SQLite reconnects a table after it reloads the schema (a ROLLBACK TO
  ** over a CREATE), while the old object keeps the transaction's buffered
  ** rows until COMMIT: write them to the device transaction, which both
  ** objects read */
  for (vt_tab *t = pConn->pTabs; t; t = t->pNextTab) {
    if (t->bInTxn != 1 || sqlite3_stricmp(t->zName, p->zName) || sqlite3_stricmp(t->zDb, p->zDb))
      continue;
    rc = vt_flush(t);
    if (rc) {
      *pzErr = sqlite3_mprintf("%s", t->base.zErrMsg ? t->base.zErrMsg : "csq: cannot write");
      goto fail;
    }
  }
  p->pNextTab = pConn->pTabs;
  pConn->pTabs = p;
  *ppVtab = &p->base;
  return SQLITE_OK;
fail:
  if (*pzErr) *pzErr = cut_names(p, *pzErr);
  vt_tab_free(p);
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
  vt_tab_free((vt_tab *)pVtab);
  return SQLITE_OK;
}

/* RENAME changes the device's catalog at once: SQLite would roll its
** schema back with a transaction while the device kept the new name, so
** inside BEGIN ... COMMIT it is refused. (DROP is not: vtab/drop.c.) */
static int ddl_outside_txn(vt_tab *p, const char *zWhat) {
  if (sqlite3_get_autocommit(p->pConn->db)) return SQLITE_OK;
  vt_set_error(&p->base,
               "csq: %s of csq table %s inside a transaction is not supported (it could not be "
               "rolled back): run it outside BEGIN ... COMMIT",
               zWhat, p->zName);
  return SQLITE_ERROR;
}

static int vt_destroy(sqlite3_vtab *pVtab) {
  vt_tab *p = (vt_tab *)pVtab;
  int bKept = 0;
  int rc = vt_drop(p, &bKept);
  if (rc == SQLITE_OK && !bKept) vt_tab_free(p);
  return rc;
}

static int vt_rename(sqlite3_vtab *pVtab, const char *zNew) {
  vt_tab *p = (vt_tab *)pVtab;
  char *zErr = NULL;
  vt_rename_arg a = {p->zName, zNew};
  if (ddl_outside_txn(p, "ALTER TABLE RENAME")) return SQLITE_ERROR;
  int rc = vt_tab_writable(p);
  if (rc) return rc;
  char *zTooLong = NULL;
  rc = names_fit(p, zNew, 0, &zTooLong);
  if (rc) {
    sqlite3_free(pVtab->zErrMsg);
    pVtab->zErrMsg = zTooLong;
    return rc;
  }
  vt_txn_drop_idle(p);
  rc = vt_stripe_catalog(p, vt_catalog_rename, &a, &zErr);
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
    .xFindFunction = vt_bpf_find_function,
    .xRename = vt_rename,
    .xSavepoint = vt_savepoint,
    .xRelease = vt_release,
    .xRollbackTo = vt_rollback_to,
    .xShadowName = vt_shadow_name,
};
