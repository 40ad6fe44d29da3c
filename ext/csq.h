/*
** ext/csq.h - csq's public C API, for programs that embed SQLite.
**
** csq is a SQLite extension: most programs only load it (`.load
** ./build/csq`, sqlite3_load_extension) and use SQL. A program that links
** csq (build/libcsq.a, or build/csq.so) can also ask for whole-query
** pushdown without writing csq_query views itself:
**
**     #include "ext/csq.h"
**     sqlite3_auto_extension((void (*)(void))sqlite3_csq_init);  // once
**     sqlite3_open("tpch.db", &db);
**     sqlite3_stmt *st;
**     csq_prepare(db, "SELECT l_returnflag, sum(l_quantity) FROM lineitem "
**                     "WHERE l_shipdate <= ?1 GROUP BY 1", -1, &st, NULL);
**     sqlite3_bind_text(st, 1, "1998-09-02", -1, SQLITE_STATIC);
**     while (sqlite3_step(st) == SQLITE_ROW) ...
**     sqlite3_finalize(st);
**
** csq_prepare() behaves like sqlite3_prepare_v2() and returns an ordinary
** sqlite3_stmt for any SQL. When the statement is an aggregate SELECT over
** one csq table, or an inner join of csq tables, with only ?/?N parameters,
** the statement it returns reads a pushdown view (csq_query) of that
** SELECT, so the scan, filter, join filters and partial aggregation run on
** the devices and joins are hashed; everything else is prepared as
** written, where csq tables still push their filters. The views live in the
** temp schema, named after a hash of the query text, and are reused by
** later prepares of the same text. Column names are the query's; declared
** types are not reported for a pushed statement.
*/
#ifndef CSQ_EXT_CSQ_H
#define CSQ_EXT_CSQ_H

#include <sqlite3.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The extension's entry point (also what sqlite3_auto_extension takes). */
int sqlite3_csq_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi);

/* As sqlite3_prepare_v2(zSql, nByte, ppStmt, pzTail), pushing the whole
** query down where csq can; csq must be registered on db. On error the
** message is db's (sqlite3_errmsg), as for sqlite3_prepare_v2. */
int csq_prepare(sqlite3 *db, const char *zSql, int nByte, sqlite3_stmt **ppStmt,
                const char **pzTail);

/* 1 if pStmt came from csq_prepare() and reads a pushdown view, else 0. */
int csq_stmt_pushed(sqlite3_stmt *pStmt);

#ifdef __cplusplus
}
#endif

#endif /* CSQ_EXT_CSQ_H */
