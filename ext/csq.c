/*
** ext/csq.c - the extension's entry point: registers csq's modules and SQL
** functions on a connection. Nothing else lives here.
**
**   .load ./build/csq
**   CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT);
**   SELECT name, value FROM csq_stats;
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#include "vtab/vtab.h"

#ifdef _WIN32
__declspec(dllexport)
#endif
    int sqlite3_csq_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
  SQLITE_EXTENSION_INIT2(pApi);
  vt_conn *pConn = vt_conn_new(db);
  if (!pConn) return SQLITE_NOMEM;
  /* the connection state is freed with the module, i.e. with the connection */
  int rc = sqlite3_create_module_v2(db, "csq", &vt_module, pConn, vt_conn_free);
  if (rc == SQLITE_OK) rc = vt_stats_register(db, pConn);
  if (rc == SQLITE_OK) rc = vt_rows_register(db);
  if (rc == SQLITE_OK) rc = vt_query_register(db, pConn);
  if (rc == SQLITE_OK) rc = vt_explain_register(db, pConn);
  if (rc == SQLITE_OK) rc = vt_fault_register(db, pConn);
  if (rc == SQLITE_OK) rc = vt_backup_register(db, pConn);
  if (rc == SQLITE_OK) rc = vt_bpf_register(db, pConn);
  if (rc == SQLITE_OK) rc = vt_import_register(db, pConn);
  if (rc == SQLITE_OK) rc = vt_probe_register(db, pConn);
  if (rc != SQLITE_OK && pzErrMsg)
    *pzErrMsg = sqlite3_mprintf("csq: cannot register: %s", sqlite3_errmsg(db));
  return rc;
}
