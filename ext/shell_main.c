/*
** ext/shell_main.c - the csq shell: build/csq [options] [DB] [SQL]
**
** Runs SQL statements (from the SQL argument, or standard input) against DB
** (default :memory:) with the csq extension loaded. Every SELECT goes
** through the whole-query planner (as a csq_query view), so aggregates run
** on the device where they can; other statements run as they are.
**
**   -header        print column names
**   -mode MODE     list (default, '|' separated), csv, or table
**   -stats         after each statement: rows, and bytes that crossed the
**                  device boundary (from csq_stats)
**   -explain       print the planner's split of each SELECT before it runs
**
** Dot commands, at the start of a line where a statement could start:
**   .dump [PATTERN]  SQL text that recreates the main database: schema and
**                    rows of native and csq tables (those whose name, or
**                    whose table's name, matches the LIKE PATTERN)
**   .import [--csv] [--sep C] [--skip 1] FILE TABLE
**                    load FILE (CSV, RFC 4180) into csq table TABLE with
**                    csq_import: ',' separated with --csv or in -mode csv,
**                    else '|' (TPC-H's files); --skip 1 skips a header
**                    row; progress on stderr
**   .quit            stop reading
**
** The extension is loaded from csq.so beside this program.
*/
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "vtab/module_name.h" /* static inline: the shell links SQLite only */

typedef struct shell {
  sqlite3 *db;
  int bHeader, bStats, bExplain;
  enum { MODE_LIST, MODE_CSV, MODE_TABLE } eMode;
  int nErr;
} shell;

static void print_csv_field(const char *z) {
  if (!z) return;
  if (strpbrk(z, ",\"\n\r") == NULL) {
    fputs(z, stdout);
    return;
  }
  putchar('"');
  for (; *z; z++) {
    if (*z == '"') putchar('"');
    putchar(*z);
  }
  putchar('"');
}

/* Print every row of a prepared statement in the shell's mode. */
static int print_rows(shell *sh, sqlite3_stmt *pStmt, long long *pnRow) {
  int nCol = sqlite3_column_count(pStmt), rc;
  long long nRow = 0;
  if (sh->bHeader && nCol > 0) {
    for (int i = 0; i < nCol; i++) {
      if (i) fputs(sh->eMode == MODE_CSV ? "," : sh->eMode == MODE_TABLE ? " | " : "|", stdout);
      fputs(sqlite3_column_name(pStmt, i), stdout);
    }
    putchar('\n');
  }
  while ((rc = sqlite3_step(pStmt)) == SQLITE_ROW) {
    for (int i = 0; i < nCol; i++) {
      if (i) fputs(sh->eMode == MODE_CSV ? "," : sh->eMode == MODE_TABLE ? " | " : "|", stdout);
      const char *z = (const char *)sqlite3_column_text(pStmt, i);
      if (sh->eMode == MODE_CSV)
        print_csv_field(z);
      else
        fputs(z ? z : (sh->eMode == MODE_TABLE ? "NULL" : ""), stdout);
    }
    putchar('\n');
    nRow++;
  }
  *pnRow = nRow;
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static long long stat_value(shell *sh, const char *zName) {
  sqlite3_stmt *p = NULL;
  long long v = 0;
  if (sqlite3_prepare_v2(sh->db, "SELECT value FROM csq_stats WHERE name = ?1", -1, &p, NULL) ==
      SQLITE_OK) {
    sqlite3_bind_text(p, 1, zName, -1, SQLITE_STATIC);
    if (sqlite3_step(p) == SQLITE_ROW) v = sqlite3_column_int64(p, 0);
  }
  sqlite3_finalize(p);
  return v;
}

static void exec_simple(shell *sh, const char *zSql) {
  char *zErr = NULL;
  if (sqlite3_exec(sh->db, zSql, NULL, NULL, &zErr) != SQLITE_OK) {
    fprintf(stderr, "Error: %s\n", zErr ? zErr : sqlite3_errmsg(sh->db));
    sh->nErr++;
  }
  sqlite3_free(zErr);
}

/* A SELECT: through a csq_query view (the planner), printing its rows. */
static void run_select(shell *sh, const char *zSql, int nSql) {
  char *zText = sqlite3_mprintf("%.*s", nSql, zSql);
  char *zQuoted = sqlite3_mprintf("%Q", zText);
  sqlite3_free(zText);
  if (sh->bExplain) {
    char *z = sqlite3_mprintf("SELECT part, detail FROM csq_explain(%s)", zQuoted);
    sqlite3_stmt *p = NULL;
    if (z && sqlite3_prepare_v2(sh->db, z, -1, &p, NULL) == SQLITE_OK) {
      while (sqlite3_step(p) == SQLITE_ROW)
        printf("-- %s: %s\n", sqlite3_column_text(p, 0), sqlite3_column_text(p, 1));
    }
    sqlite3_finalize(p);
    sqlite3_free(z);
  }
  exec_simple(sh, "DROP TABLE IF EXISTS temp.csq_shell_q; SELECT csq_stats_reset()");
  char *zCreate =
      sqlite3_mprintf("CREATE VIRTUAL TABLE temp.csq_shell_q USING csq_query(%s)", zQuoted);
  sqlite3_free(zQuoted);
  sqlite3_stmt *pStmt = NULL;
  int rc = sqlite3_exec(sh->db, zCreate, NULL, NULL, NULL);
  sqlite3_free(zCreate);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(sh->db, "SELECT * FROM temp.csq_shell_q", -1, &pStmt, NULL);
  long long nRow = 0;
  if (rc == SQLITE_OK) rc = print_rows(sh, pStmt, &nRow);
  if (rc != SQLITE_OK) {
    fprintf(stderr, "Error: %s\n", sqlite3_errmsg(sh->db));
    sh->nErr++;
  }
  sqlite3_finalize(pStmt);
  fflush(stdout); /* the stats line (stderr) follows the rows it describes */
  if (sh->bStats && rc == SQLITE_OK)
    fprintf(stderr, "-- rows %lld, device->host %lld bytes, media read %lld bytes, programs %lld\n",
            nRow, stat_value(sh, "bytes_to_host"), stat_value(sh, "media_bytes_read"),
            stat_value(sh, "programs_executed"));
  exec_simple(sh, "DROP TABLE IF EXISTS temp.csq_shell_q");
}

/* ---- .dump ----
** The output reads like the sqlite3 shell's .dump and loads into either
** shell (the stock one after `.load csq`): PRAGMA foreign_keys=OFF, one
** transaction, each table's CREATE statement followed by an INSERT per row,
** then indexes, triggers and views in creation order. What differs: a csq
** table is written as CREATE VIRTUAL TABLE plus its rows (the sqlite3
** shell writes only its schema, as for any virtual table), so loading the
** dump creates it on the new database's device and inserts the rows. Other
** virtual tables are written as the sqlite3 shell writes them (a
** sqlite_schema row; their shadow tables carry the rows). Values round-trip
** exactly: REALs through SQLite's quote() (15 digits when they read back as
** the same double, else 20), infinities as 1e999, text with NUL bytes as
** CAST(X'..' AS TEXT), carriage returns as char(13). Rowids are not kept
** (as in the sqlite3 shell), except through an INTEGER PRIMARY KEY. */

static void put_hex(const unsigned char *p, int n) {
  for (int i = 0; i < n; i++) printf("%02x", p[i]);
}

/* Print column i of pRow as an SQL literal. pQuote is "SELECT quote(?1)". */
static void put_value(sqlite3_stmt *pRow, int i, sqlite3_stmt *pQuote) {
  switch (sqlite3_column_type(pRow, i)) {
  case SQLITE_NULL:
    fputs("NULL", stdout);
    break;
  case SQLITE_INTEGER:
    printf("%lld", (long long)sqlite3_column_int64(pRow, i));
    break;
  case SQLITE_FLOAT: {
    double r = sqlite3_column_double(pRow, i);
    if (r > 1.7976931348623157e308 || r < -1.7976931348623157e308) {
      fputs(r > 0 ? "1e999" : "-1e999", stdout);
      break;
    }
    sqlite3_bind_double(pQuote, 1, r);
    if (sqlite3_step(pQuote) == SQLITE_ROW)
      fputs((const char *)sqlite3_column_text(pQuote, 0), stdout);
    else
      printf("%.17g", r);
    sqlite3_reset(pQuote);
    break;
  }
  case SQLITE_TEXT: {
    const unsigned char *z = sqlite3_column_text(pRow, i);
    int n = sqlite3_column_bytes(pRow, i);
    if ((int)strlen((const char *)z) != n) { /* holds NUL bytes */
      fputs("CAST(X'", stdout);
      put_hex(z, n);
      fputs("' AS TEXT)", stdout);
      break;
    }
    /* a carriage return is written as char(13): the sqlite3 shell drops
    ** one at the end of an input line */
    putchar('\'');
    for (int k = 0; k < n; k++) {
      if (z[k] == '\r') {
        fputs("'||char(13)||'", stdout);
        continue;
      }
      if (z[k] == '\'') putchar('\'');
      putchar(z[k]);
    }
    putchar('\'');
    break;
  }
  default: /* SQLITE_BLOB */
    fputs("X'", stdout);
    put_hex(sqlite3_column_blob(pRow, i), sqlite3_column_bytes(pRow, i));
    putchar('\'');
  }
}

/* Print an INSERT for each row of main.zTab: its columns but hidden and
** generated ones. */
static int dump_rows(shell *sh, const char *zTab, sqlite3_stmt *pQuote) {
  sqlite3_str *pSel = sqlite3_str_new(sh->db), *pCols = sqlite3_str_new(sh->db);
  char *zInfo = sqlite3_mprintf("PRAGMA main.table_xinfo(%Q)", zTab);
  sqlite3_stmt *p = NULL;
  int nCol = 0, bSkipped = 0, rc;
  rc = zInfo ? sqlite3_prepare_v2(sh->db, zInfo, -1, &p, NULL) : SQLITE_NOMEM;
  sqlite3_free(zInfo);
  while (rc == SQLITE_OK && sqlite3_step(p) == SQLITE_ROW) {
    if (sqlite3_column_int(p, 6) != 0) { /* hidden (1) or generated (2, 3) */
      bSkipped = 1;
      continue;
    }
    const char *zCol = (const char *)sqlite3_column_text(p, 1);
    sqlite3_str_appendf(pSel, "%s\"%w\"", nCol ? "," : "SELECT ", zCol);
    sqlite3_str_appendf(pCols, "%s\"%w\"", nCol ? "," : "(", zCol);
    nCol++;
  }
  if (rc == SQLITE_OK) rc = sqlite3_finalize(p);
  p = NULL;
  sqlite3_str_appendf(pSel, " FROM main.\"%w\"", zTab);
  sqlite3_str_appendchar(pCols, 1, ')');
  char *zSel = sqlite3_str_finish(pSel), *zCols = sqlite3_str_finish(pCols);
  if (rc == SQLITE_OK && (!zSel || !zCols)) rc = SQLITE_NOMEM;
  if (rc == SQLITE_OK && nCol > 0) rc = sqlite3_prepare_v2(sh->db, zSel, -1, &p, NULL);
  while (rc == SQLITE_OK && p && (rc = sqlite3_step(p)) == SQLITE_ROW) {
    char *zInto = sqlite3_mprintf("INSERT INTO \"%w\"%s VALUES(", zTab, bSkipped ? zCols : "");
    fputs(zInto ? zInto : "", stdout);
    sqlite3_free(zInto);
    for (int i = 0; i < nCol; i++) {
      if (i) putchar(',');
      put_value(p, i, pQuote);
    }
    fputs(");\n", stdout);
    rc = SQLITE_OK;
  }
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  if (rc != SQLITE_OK) {
    fprintf(stderr, "Error: .dump: table %s: %s\n", zTab, sqlite3_errmsg(sh->db));
    sh->nErr++;
  }
  sqlite3_finalize(p);
  sqlite3_free(zSel);
  sqlite3_free(zCols);
  return rc;
}

/* .dump [PATTERN] */
static void dump(shell *sh, const char *zPattern) {
  sqlite3_stmt *pTab = NULL, *pQuote = NULL, *pRest = NULL;
  int bWritable = 0;
  int rc = sqlite3_prepare_v2(sh->db, "SELECT quote(?1)", -1, &pQuote, NULL);
  if (rc == SQLITE_OK)
    rc =
        sqlite3_prepare_v2(sh->db,
                           "SELECT name, sql FROM main.sqlite_schema WHERE type = 'table' AND "
                           "sql NOT NULL AND name LIKE ?1 ORDER BY name = 'sqlite_sequence', rowid",
                           -1, &pTab, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(
        sh->db,
        "SELECT sql FROM main.sqlite_schema WHERE type IN ('index', "
        "'trigger', 'view') AND sql NOT NULL AND tbl_name LIKE ?1 ORDER BY rowid",
        -1, &pRest, NULL);
  if (rc != SQLITE_OK) {
    fprintf(stderr, "Error: .dump: %s\n", sqlite3_errmsg(sh->db));
    sh->nErr++;
    goto done;
  }
  sqlite3_bind_text(pTab, 1, zPattern ? zPattern : "%", -1, SQLITE_STATIC);
  sqlite3_bind_text(pRest, 1, zPattern ? zPattern : "%", -1, SQLITE_STATIC);
  fputs("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n", stdout);
  while (sqlite3_step(pTab) == SQLITE_ROW) {
    const char *zName = (const char *)sqlite3_column_text(pTab, 0);
    const char *zSql = (const char *)sqlite3_column_text(pTab, 1);
    if (strcmp(zName, "sqlite_sequence") == 0) {
      fputs("DELETE FROM sqlite_sequence;\n", stdout);
    } else if (strcmp(zName, "sqlite_stat1") == 0) {
      fputs("ANALYZE sqlite_schema;\n", stdout);
    } else if (sqlite3_strnicmp(zName, "sqlite_", 7) == 0) {
      continue;
    } else if (sqlite3_strnicmp(zSql, "CREATE VIRTUAL TABLE", 20) == 0 &&
               !vt_sql_is_csq_table(zSql)) {
      if (!bWritable) fputs("PRAGMA writable_schema=ON;\n", stdout);
      bWritable = 1;
      char *z = sqlite3_mprintf("INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)"
                                "VALUES('table',%Q,%Q,0,%Q);",
                                zName, zName, zSql);
      if (z) puts(z);
      sqlite3_free(z);
      continue;
    } else {
      printf("%s;\n", zSql);
    }
    dump_rows(sh, zName, pQuote);
  }
  while (sqlite3_step(pRest) == SQLITE_ROW) printf("%s;\n", sqlite3_column_text(pRest, 0));
  if (bWritable) fputs("PRAGMA writable_schema=OFF;\n", stdout);
  fputs(sh->nErr ? "ROLLBACK; -- due to errors\n" : "COMMIT;\n", stdout);
done:
  sqlite3_finalize(pTab);
  sqlite3_finalize(pRest);
  sqlite3_finalize(pQuote);
  fflush(stdout);
}

/* .import [--csv] [--sep C] [--skip 1] FILE TABLE: csq_import, with
** progress on stderr (it writes the whole file in one transaction). */
static void import(shell *sh, int nArg, char **azArg) {
  char cSep = sh->eMode == MODE_CSV ? ',' : '|';
  int bHeader = 0;
  const char *zFile = NULL, *zTable = NULL;
  for (int i = 1; i < nArg; i++) {
    if (strcmp(azArg[i], "--csv") == 0) {
      cSep = ',';
    } else if (strcmp(azArg[i], "--sep") == 0 && i + 1 < nArg && strlen(azArg[i + 1]) == 1) {
      cSep = azArg[++i][0];
    } else if (strcmp(azArg[i], "--skip") == 0 && i + 1 < nArg && strcmp(azArg[i + 1], "1") == 0) {
      i++;
      bHeader = 1;
    } else if (azArg[i][0] != '-' && !zFile) {
      zFile = azArg[i];
    } else if (azArg[i][0] != '-' && !zTable) {
      zTable = azArg[i];
    } else {
      zFile = NULL;
      break;
    }
  }
  if (!zFile || !zTable) {
    fprintf(stderr, "Error: usage: .import [--csv] [--sep C] [--skip 1] FILE TABLE\n");
    sh->nErr++;
    return;
  }
  char *zOpt = sqlite3_mprintf("separator=%c,header=%d,progress=1", cSep, bHeader);
  sqlite3_stmt *p = NULL;
  int rc = sqlite3_prepare_v2(sh->db, "SELECT csq_import(?1, ?2, ?3)", -1, &p, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(p, 1, zTable, -1, SQLITE_STATIC);
    sqlite3_bind_text(p, 2, zFile, -1, SQLITE_STATIC);
    sqlite3_bind_text(p, 3, zOpt, -1, SQLITE_STATIC);
    rc = sqlite3_step(p) == SQLITE_ROW ? SQLITE_OK : SQLITE_ERROR;
  }
  if (rc != SQLITE_OK) {
    fprintf(stderr, "Error: .import: %s\n", sqlite3_errmsg(sh->db));
    sh->nErr++;
  }
  sqlite3_finalize(p);
  sqlite3_free(zOpt);
}

/* Run the dot command in [z, z + n). 1 to stop reading (.quit). */
static int run_dot(shell *sh, const char *z, int n) {
  char *zLine = sqlite3_mprintf("%.*s", n, z);
  char *azArg[8] = {0};
  int nArg = 0, bQuit = 0;
  for (char *p = zLine; p && *p && nArg < 8;) {
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    if (!*p) break;
    if (*p == '\'' || *p == '"') { /* a quoted argument */
      char q = *p++;
      azArg[nArg++] = p;
      while (*p && *p != q) p++;
    } else {
      azArg[nArg++] = p;
      while (*p && *p != ' ' && *p != '\t' && *p != '\r') p++;
    }
    if (*p) *p++ = 0;
  }
  if (nArg == 0) {
    /* a bare "." */
  } else if (strcmp(azArg[0], ".dump") == 0 && nArg <= 2) {
    dump(sh, nArg == 2 ? azArg[1] : NULL);
  } else if (strcmp(azArg[0], ".import") == 0) {
    import(sh, nArg, azArg);
  } else if (strcmp(azArg[0], ".quit") == 0 || strcmp(azArg[0], ".exit") == 0) {
    bQuit = 1;
  } else {
    fprintf(stderr,
            "Error: unknown command or invalid arguments: \"%s\" (this shell knows "
            ".dump [PATTERN], .import and .quit)\n",
            azArg[0]);
    sh->nErr++;
  }
  sqlite3_free(zLine);
  return bQuit;
}

/* Run every statement of zSql. */
static void run_sql(shell *sh, const char *zSql) {
  while (zSql && *zSql) {
    /* a dot command: the first thing on a line where a statement could start */
    const char *zAt = zSql;
    for (;;) {
      while (*zAt == ' ' || *zAt == '\t' || *zAt == '\r' || *zAt == '\n') zAt++;
      if (zAt[0] != '-' || zAt[1] != '-') break;
      while (*zAt && *zAt != '\n') zAt++;
    }
    if (*zAt == '.') {
      const char *zEnd = strchr(zAt, '\n');
      int n = zEnd ? (int)(zEnd - zAt) : (int)strlen(zAt);
      if (run_dot(sh, zAt, n)) return;
      zSql = zAt + n;
      continue;
    }
    sqlite3_stmt *pStmt = NULL;
    const char *zTail = NULL;
    if (sqlite3_prepare_v2(sh->db, zSql, -1, &pStmt, &zTail) != SQLITE_OK) {
      fprintf(stderr, "Error: %s\n", sqlite3_errmsg(sh->db));
      sh->nErr++;
      return;
    }
    if (!pStmt) { /* whitespace or a comment */
      zSql = zTail;
      continue;
    }
    const char *z = sqlite3_sql(pStmt);
    while (*z == ' ' || *z == '\n' || *z == '\t' || *z == '\r') z++;
    int bSelect = sqlite3_stmt_readonly(pStmt) && sqlite3_column_count(pStmt) > 0 &&
                  sqlite3_strnicmp(z, "SELECT", 6) == 0 && sqlite3_bind_parameter_count(pStmt) == 0;
    if (bSelect) {
      char *zCopy = sqlite3_mprintf("%s", z); /* z belongs to pStmt */
      sqlite3_finalize(pStmt);
      if (!zCopy) return;
      size_t n = strlen(zCopy);
      while (n > 0 && (zCopy[n - 1] == ';' || zCopy[n - 1] == ' ' || zCopy[n - 1] == '\n')) n--;
      run_select(sh, zCopy, (int)n);
      sqlite3_free(zCopy);
    } else {
      long long nRow = 0;
      if (print_rows(sh, pStmt, &nRow) != SQLITE_OK) {
        fprintf(stderr, "Error: %s\n", sqlite3_errmsg(sh->db));
        sh->nErr++;
      }
      sqlite3_finalize(pStmt);
    }
    zSql = zTail;
  }
}

static char *read_all(FILE *f) {
  size_t n = 0, nAlloc = 65536;
  char *z = malloc(nAlloc);
  while (z) {
    size_t k = fread(z + n, 1, nAlloc - n - 1, f);
    n += k;
    if (k == 0) break;
    if (n + 1 == nAlloc) {
      char *z2 = realloc(z, nAlloc * 2);
      if (!z2) {
        free(z);
        return NULL;
      }
      z = z2;
      nAlloc *= 2;
    }
  }
  if (z) z[n] = 0;
  return z;
}

int main(int argc, char **argv) {
  shell sh;
  memset(&sh, 0, sizeof(sh));
  const char *zDb = NULL, *zSql = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-header") == 0)
      sh.bHeader = 1;
    else if (strcmp(argv[i], "-stats") == 0)
      sh.bStats = 1;
    else if (strcmp(argv[i], "-explain") == 0)
      sh.bExplain = 1;
    else if (strcmp(argv[i], "-mode") == 0 && i + 1 < argc) {
      i++;
      if (strcmp(argv[i], "csv") == 0)
        sh.eMode = MODE_CSV;
      else if (strcmp(argv[i], "table") == 0)
        sh.eMode = MODE_TABLE;
      else if (strcmp(argv[i], "list") == 0)
        sh.eMode = MODE_LIST;
      else {
        fprintf(stderr, "csq: unknown mode %s (list, csv, table)\n", argv[i]);
        return 2;
      }
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr,
              "usage: csq [-header] [-mode list|csv|table] [-stats] [-explain] [DB] [SQL]\n");
      return 2;
    } else if (!zDb)
      zDb = argv[i];
    else if (!zSql)
      zSql = argv[i];
  }
  if (sqlite3_open(zDb ? zDb : ":memory:", &sh.db) != SQLITE_OK) {
    fprintf(stderr, "csq: cannot open %s: %s\n", zDb, sqlite3_errmsg(sh.db));
    return 1;
  }
  /* the extension beside this program */
  char zExe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", zExe, sizeof(zExe) - 16);
  if (n <= 0) {
    fprintf(stderr, "csq: cannot find the extension\n");
    return 1;
  }
  zExe[n] = 0;
  char *zSlash = strrchr(zExe, '/');
  strcpy(zSlash ? zSlash + 1 : zExe, "csq.so");
  char *zErr = NULL;
  sqlite3_enable_load_extension(sh.db, 1);
  if (sqlite3_load_extension(sh.db, zExe, NULL, &zErr) != SQLITE_OK) {
    fprintf(stderr, "csq: cannot load %s: %s\n", zExe, zErr ? zErr : "?");
    return 1;
  }
  if (zSql) {
    run_sql(&sh, zSql);
  } else {
    char *z = read_all(stdin);
    run_sql(&sh, z);
    free(z);
  }
  sqlite3_close(sh.db);
  return sh.nErr ? 1 : 0;
}
