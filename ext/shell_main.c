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
** The extension is loaded from csq.so beside this program.
*/
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Run every statement of zSql. */
static void run_sql(shell *sh, const char *zSql) {
  while (zSql && *zSql) {
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
