/*
** vtab/stats.c - what a connection can see of its devices:
**
**   SELECT name, value FROM csq_stats;   -- this connection's counters
**   SELECT csq_stats_reset();            -- zero them
**   SELECT * FROM csq_devices;           -- devices in use, capabilities, space
**
** Both tables are eponymous and read-only; their rows are built in xFilter
** into a small array, since they hold a few dozen values at most.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "vtab/vtab.h"

typedef struct kv_row {
  char *zName;
  sqlite3_int64 iVal;
  char *zText[6];
} kv_row;

typedef struct kv_tab {
  sqlite3_vtab base; /* must be first */
  vt_conn *pConn;
  int bDevices; /* csq_devices rather than csq_stats */
} kv_tab;

typedef struct kv_cursor {
  sqlite3_vtab_cursor base; /* must be first */
  kv_row *aRow;
  int nRow, iRow;
} kv_cursor;

/* xConnect of both tables, told apart by the module's name (argv[0]). */
static int kv_connect(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                      sqlite3_vtab **ppVtab, char **pzErr) {
  (void)argc, (void)pzErr;
  const int bDevices = sqlite3_stricmp(argv[0], "csq_devices") == 0;
  int rc = sqlite3_declare_vtab(
      db, bDevices ? "CREATE TABLE x(path TEXT, backend TEXT, engines INTEGER, slm_bytes INTEGER, "
                     "blocks_used INTEGER, capacity_blocks INTEGER, compute TEXT)"
                   : "CREATE TABLE x(name TEXT, value INTEGER)");
  if (rc) return rc;
  kv_tab *p = sqlite3_malloc64(sizeof(*p));
  if (!p) return SQLITE_NOMEM;
  memset(p, 0, sizeof(*p));
  p->pConn = pAux;
  p->bDevices = bDevices;
  *ppVtab = &p->base;
  return SQLITE_OK;
}
static int kv_disconnect(sqlite3_vtab *pVtab) {
  sqlite3_free(pVtab);
  return SQLITE_OK;
}
static int kv_best_index(sqlite3_vtab *pVtab, sqlite3_index_info *pInfo) {
  (void)pVtab;
  pInfo->estimatedCost = 10;
  pInfo->estimatedRows = 20;
  return SQLITE_OK;
}
static int kv_open(sqlite3_vtab *pVtab, sqlite3_vtab_cursor **ppCur) {
  (void)pVtab;
  kv_cursor *c = sqlite3_malloc64(sizeof(*c));
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof(*c));
  *ppCur = &c->base;
  return SQLITE_OK;
}
static void kv_clear(kv_cursor *c) {
  for (int i = 0; i < c->nRow; i++) {
    sqlite3_free(c->aRow[i].zName);
    for (int j = 0; j < 6; j++) sqlite3_free(c->aRow[i].zText[j]);
  }
  sqlite3_free(c->aRow);
  c->aRow = NULL;
  c->nRow = c->iRow = 0;
}
static int kv_close(sqlite3_vtab_cursor *pCur) {
  kv_clear((kv_cursor *)pCur);
  sqlite3_free(pCur);
  return SQLITE_OK;
}

static int kv_add(kv_cursor *c, const char *zName, sqlite3_int64 v) {
  kv_row *a = sqlite3_realloc64(c->aRow, sizeof(kv_row) * (size_t)(c->nRow + 1));
  if (!a) return SQLITE_NOMEM;
  c->aRow = a;
  memset(&a[c->nRow], 0, sizeof(kv_row));
  a[c->nRow].zName = sqlite3_mprintf("%s", zName);
  a[c->nRow].iVal = v;
  c->nRow++;
  return a[c->nRow - 1].zName ? SQLITE_OK : SQLITE_NOMEM;
}

static int stats_rows(kv_cursor *c, vt_conn *pConn) {
  dev_stats s;
  vt_conn_stats(pConn, &s);
  struct {
    const char *z;
    uint64_t v;
  } a[] = {
      {"media_bytes_read", s.media_bytes_read},
      {"media_bytes_written", s.media_bytes_written},
      {"bytes_to_host", s.bytes_to_host},
      {"bytes_from_host", s.bytes_from_host},
      {"commands", s.commands},
      {"admin_commands", s.admin_commands},
      {"errors", s.errors},
      {"programs_executed", s.programs_executed},
      {"row_groups_scanned", s.row_groups_scanned},
      {"row_groups_skipped", s.row_groups_skipped},
      {"rows_scanned", s.rows_scanned},
      {"rows_returned", s.rows_returned},
      {"engine_ns", s.engine_ns},
      /* csq_import (vtab/import.c): rows and CSV bytes of committed loads */
      {"import_rows", (uint64_t)pConn->nImportRows},
      {"import_rows_skipped", (uint64_t)pConn->nImportSkipped},
      {"import_bytes", pConn->nImportBytes},
      /* csq_query: joins whose probe side's devices grouped them (planner/star.h) */
      {"star_joins", pConn->nStarJoins},
      {"key_groupings", pConn->nKeyGroups},
  };
  for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++) {
    int rc = kv_add(c, a[i].z, (sqlite3_int64)a[i].v);
    if (rc) return rc;
  }
  return SQLITE_OK;
}

static int devices_rows(kv_cursor *c, vt_conn *pConn) {
  for (vt_dev *d = pConn->pDevs; d; d = d->pNext) {
    const csq_id_vs *caps = dev_caps(d->pDev);
    uint64_t nUsed = 0, nHigh = 0;
    store_space(d->pStore, &nUsed, &nHigh);
    int rc = kv_add(c, d->zKey, 0);
    if (rc) return rc;
    kv_row *r = &c->aRow[c->nRow - 1];
    r->zText[0] = sqlite3_mprintf("%s", dev_backend_name(d->pDev));
    r->zText[1] = sqlite3_mprintf("%d", caps->magic == CSQ_ID_MAGIC ? caps->n_engines : 0);
    r->zText[2] = sqlite3_mprintf("%llu", (unsigned long long)caps->slm_bytes);
    r->zText[3] = sqlite3_mprintf("%llu", (unsigned long long)nUsed);
    r->zText[4] = sqlite3_mprintf("%llu", (unsigned long long)dev_nvm_blocks(d->pDev));
    r->zText[5] = sqlite3_mprintf("%s", caps->magic == CSQ_ID_MAGIC ? "device" : "host");
    for (int j = 0; j < 6; j++)
      if (!r->zText[j]) return SQLITE_NOMEM;
  }
  return SQLITE_OK;
}

static int kv_filter(sqlite3_vtab_cursor *pCur, int idxNum, const char *idxStr, int argc,
                     sqlite3_value **argv) {
  (void)idxNum, (void)idxStr, (void)argc, (void)argv;
  kv_cursor *c = (kv_cursor *)pCur;
  kv_tab *p = (kv_tab *)pCur->pVtab;
  kv_clear(c);
  return p->bDevices ? devices_rows(c, p->pConn) : stats_rows(c, p->pConn);
}
static int kv_next(sqlite3_vtab_cursor *pCur) {
  ((kv_cursor *)pCur)->iRow++;
  return SQLITE_OK;
}
static int kv_eof(sqlite3_vtab_cursor *pCur) {
  kv_cursor *c = (kv_cursor *)pCur;
  return c->iRow >= c->nRow;
}
static int kv_column(sqlite3_vtab_cursor *pCur, sqlite3_context *ctx, int i) {
  kv_cursor *c = (kv_cursor *)pCur;
  kv_tab *p = (kv_tab *)pCur->pVtab;
  kv_row *r = &c->aRow[c->iRow];
  if (i == 0) {
    sqlite3_result_text(ctx, r->zName, -1, SQLITE_TRANSIENT);
  } else if (!p->bDevices) {
    sqlite3_result_int64(ctx, r->iVal);
  } else if (i == 1 || i == 6) {
    sqlite3_result_text(ctx, r->zText[i == 1 ? 0 : 5], -1, SQLITE_TRANSIENT);
  } else {
    sqlite3_result_int64(ctx, (sqlite3_int64)strtoll(r->zText[i - 1], NULL, 10));
  }
  return SQLITE_OK;
}
static int kv_rowid(sqlite3_vtab_cursor *pCur, sqlite3_int64 *pRowid) {
  *pRowid = ((kv_cursor *)pCur)->iRow;
  return SQLITE_OK;
}

/* The module of both csq_stats and csq_devices. */
static sqlite3_module kv_module = {
    .xConnect = kv_connect,
    .xBestIndex = kv_best_index,
    .xDisconnect = kv_disconnect,
    .xOpen = kv_open,
    .xClose = kv_close,
    .xFilter = kv_filter,
    .xNext = kv_next,
    .xEof = kv_eof,
    .xColumn = kv_column,
    .xRowid = kv_rowid,
};

static void stats_reset_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc, (void)argv;
  vt_conn_stats_reset(sqlite3_user_data(ctx));
  sqlite3_result_int(ctx, 1);
}

int vt_stats_register(sqlite3 *db, vt_conn *pConn) {
  int rc = sqlite3_create_module(db, "csq_stats", &kv_module, pConn);
  if (rc == SQLITE_OK) rc = sqlite3_create_module(db, "csq_devices", &kv_module, pConn);
  if (rc == SQLITE_OK)
    rc = sqlite3_create_function(db, "csq_stats_reset", 0, SQLITE_UTF8, pConn, stats_reset_func,
                                 NULL, NULL);
  return rc;
}
