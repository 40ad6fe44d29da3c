/*
** bench/gen_main.c - build/bench/gen: load TPC-H or SSB data into SQLite
** (native tables or csq virtual tables), or write it as CSV.
**
**   gen tpch|ssb SF DBFILE [--csq EXTENSION_SO] [--tables a,b,...] [--batch N]
**                          [--seed N] [--replace] [--quiet]
**   gen tpch|ssb SF - --format csv|null|schema [--tables ...] [--header]
**
** sqlite (the default format): opens DBFILE, creates each table (with
** --csq: loads the extension and uses CREATE VIRTUAL TABLE t USING
** csq(<the same column definitions>)) and fills it through one prepared
** INSERT, committing every --batch rows (default: one transaction per
** table). csv writes the rows to stdout for the shell's .import (text
** quoted only where needed, no header unless --header); null generates and
** discards (to time the generator alone); schema prints the CREATE TABLE
** statements. Per table it prints rows, seconds and rows/s (to stderr when
** stdout carries data); a progress bar goes to stderr only when stderr is a
** terminal.
**
** Example:
**   build/bench/gen tpch 0.1 /tmp/tpch.db --tables lineitem,orders
**   build/bench/gen tpch 0.01 - --format csv --tables lineitem > li.csv
*/
#include "bench/ssb.h"
#include "bench/tpch.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The two benchmarks behind one interface; called once per batch of rows. */
typedef struct bench_kind {
  const char *zName;
  int nTable;
  const char *(*xName)(int t);
  int (*xFromName)(const char *z);
  const gen_col *(*xColumns)(int t, int *pnCol);
  size_t (*xRowSize)(int t);
  int64_t (*xCount)(int t, double sf, uint64_t seed);
  void *(*xOpen)(int t, double sf, uint64_t seed);
  int (*xFill)(void *g, void *aRow, int nRow);
  void (*xClose)(void *g);
} bench_kind;

static const char *tp_name(int t) {
  return tpch_table_name((tpch_table)t);
}
static const gen_col *tp_cols(int t, int *pn) {
  return tpch_columns((tpch_table)t, pn);
}
static size_t tp_size(int t) {
  return tpch_row_size((tpch_table)t);
}
static int64_t tp_count(int t, double sf, uint64_t s) {
  return tpch_row_count((tpch_table)t, sf, s);
}
static void *tp_open(int t, double sf, uint64_t s) {
  return tpch_gen_open((tpch_table)t, sf, s);
}
static int tp_fill(void *g, void *a, int n) {
  return tpch_gen_fill(g, a, n);
}
static void tp_close(void *g) {
  tpch_gen_close(g);
}
static const char *ss_name(int t) {
  return ssb_table_name((ssb_table)t);
}
static const gen_col *ss_cols(int t, int *pn) {
  return ssb_columns((ssb_table)t, pn);
}
static size_t ss_size(int t) {
  return ssb_row_size((ssb_table)t);
}
static int64_t ss_count(int t, double sf, uint64_t s) {
  return ssb_row_count((ssb_table)t, sf, s);
}
static void *ss_open(int t, double sf, uint64_t s) {
  return ssb_gen_open((ssb_table)t, sf, s);
}
static int ss_fill(void *g, void *a, int n) {
  return ssb_gen_fill(g, a, n);
}
static void ss_close(void *g) {
  ssb_gen_close(g);
}

static const bench_kind aKind[2] = {
    {"tpch", TPCH_NTABLE, tp_name, tpch_table_from_name, tp_cols, tp_size, tp_count, tp_open,
     tp_fill, tp_close},
    {"ssb", SSB_NTABLE, ss_name, ssb_table_from_name, ss_cols, ss_size, ss_count, ss_open, ss_fill,
     ss_close},
};

enum { FMT_SQLITE, FMT_CSV, FMT_NULL, FMT_SCHEMA };

typedef struct options {
  const bench_kind *pKind;
  double sf;
  const char *zDb;
  const char *zCsq;
  int eFormat;
  int64_t nBatch; /* rows per transaction, 0 = whole table */
  uint64_t seed;
  int bQuiet, bReplace, bHeader;
  int aSel[16]; /* tables to do, in order */
  int nSel;
} options;

#define FILL_ROWS 256 /* rows generated per fill call */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(void) {
  fprintf(stderr,
          "usage: gen tpch|ssb SF DBFILE [--csq EXTENSION_SO] [--tables t1,t2,...] [--batch N]\n"
          "                              [--seed N] [--replace] [--quiet]\n"
          "       gen tpch|ssb SF - --format csv|null|schema [--tables ...] [--header]\n"
          "  SF      scale factor, 0.001 .. 1000 (1 = 6M lineitem rows)\n"
          "  DBFILE  SQLite database to create the tables in ('-' for csv/null/schema)\n"
          "  tables  tpch: region nation supplier customer part partsupp orders lineitem\n"
          "          ssb:  dwdate supplier customer part lineorder\n");
}

/* The column list "(a INTEGER, b TEXT, ...)" of table t, malloc'd. */
static char *column_defs(const options *o, int t) {
  int nCol;
  const gen_col *aCol = o->pKind->xColumns(t, &nCol);
  size_t n = 2, k = 0;
  for (int i = 0; i < nCol; i++) n += strlen(aCol[i].zName) + strlen(aCol[i].zType) + 3;
  char *z = malloc(n + 1);
  if (!z) return 0;
  z[k++] = '(';
  for (int i = 0; i < nCol; i++)
    k += (size_t)sprintf(z + k, "%s%s %s", i ? ", " : "", aCol[i].zName, aCol[i].zType);
  z[k++] = ')';
  z[k] = 0;
  return z;
}

/* ---- progress ---------------------------------------------------------- */

typedef struct progress {
  int bOn;
  const char *zTable;
  int64_t nTotal;
  double tLast;
} progress;

static void progress_show(progress *p, int64_t n) {
  if (!p->bOn) return;
  double t = now();
  if (t - p->tLast < 0.1 && n < p->nTotal) return;
  p->tLast = t;
  int nBar = 30, nFull = p->nTotal > 0 ? (int)(n * nBar / p->nTotal) : nBar;
  char aBar[31];
  for (int i = 0; i < nBar; i++) aBar[i] = i < nFull ? '#' : '.';
  aBar[nBar] = 0;
  fprintf(stderr, "\r%-10s [%s] %3d%% %lld/%lld", p->zTable, aBar,
          p->nTotal > 0 ? (int)(n * 100 / p->nTotal) : 100, (long long)n, (long long)p->nTotal);
  fflush(stderr);
}

static void progress_done(progress *p) {
  if (p->bOn) fprintf(stderr, "\r\033[K");
}

/* ---- CSV --------------------------------------------------------------- */

typedef struct csv_out {
  char *z;
  size_t n, nCap;
  int bErr;
} csv_out;

static void csv_flush(csv_out *c) {
  if (c->n && fwrite(c->z, 1, c->n, stdout) != c->n) c->bErr = 1;
  c->n = 0;
}

/* Appends one row; the caller guarantees 8 KiB of room (rows are < 2 KiB). */
static void csv_row(csv_out *c, const gen_col *aCol, int nCol, const char *pRow) {
  char *z = c->z + c->n;
  for (int i = 0; i < nCol; i++) {
    const char *p = pRow + aCol[i].off;
    if (i) *z++ = ',';
    switch (aCol[i].eKind) {
    case GEN_INT:
      z += gen_fmt_i64(z, *(const int64_t *)p);
      break;
    case GEN_REAL: {
      double v = *(const double *)p;
      if (aCol[i].nDec) {
        double scale = 1;
        for (int d = 0; d < aCol[i].nDec; d++) scale *= 10;
        z += gen_fmt_scaled(z, llround(v * scale), aCol[i].nDec);
      } else {
        z += sprintf(z, "%.17g", v);
      }
      break;
    }
    default: {
      size_t n = strlen(p);
      if (strpbrk(p, ",\"\r\n")) {
        *z++ = '"';
        for (size_t k = 0; k < n; k++) {
          if (p[k] == '"') *z++ = '"';
          *z++ = p[k];
        }
        *z++ = '"';
      } else {
        memcpy(z, p, n);
        z += n;
      }
    }
    }
  }
  *z++ = '\n';
  c->n = (size_t)(z - c->z);
  if (c->n + 8192 > c->nCap) csv_flush(c);
}

/* ---- SQLite ------------------------------------------------------------ */

static int exec(sqlite3 *db, const char *zSql) {
  char *zErr = 0;
  int rc = sqlite3_exec(db, zSql, 0, 0, &zErr);
  if (rc != SQLITE_OK) {
    fprintf(stderr, "gen: %s: %s\n", zSql, zErr ? zErr : sqlite3_errmsg(db));
    sqlite3_free(zErr);
  }
  return rc;
}

/* Binds row pRow to the INSERT statement and runs it. */
static int insert_row(sqlite3_stmt *pStmt, const gen_col *aCol, int nCol, const char *pRow) {
  for (int i = 0; i < nCol; i++) {
    const char *p = pRow + aCol[i].off;
    switch (aCol[i].eKind) {
    case GEN_INT:
      sqlite3_bind_int64(pStmt, i + 1, *(const int64_t *)p);
      break;
    case GEN_REAL:
      sqlite3_bind_double(pStmt, i + 1, *(const double *)p);
      break;
    default:
      sqlite3_bind_text(pStmt, i + 1, p, -1, SQLITE_STATIC);
      break;
    }
  }
  int rc = sqlite3_step(pStmt);
  sqlite3_reset(pStmt);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Creates and fills table t in db. Returns 0 or 1 (message printed). */
static int load_table(const options *o, sqlite3 *db, int t, void *g, char *aRow, progress *pp,
                      int64_t *pnRow) {
  const char *zName = o->pKind->xName(t);
  int nCol;
  const gen_col *aCol = o->pKind->xColumns(t, &nCol);
  size_t szRow = o->pKind->xRowSize(t);
  char *zDefs = column_defs(o, t);
  char zSql[4096];
  sqlite3_stmt *pStmt = 0;
  int rc = 1, bTxn = 0;
  if (!zDefs) goto out;
  if (o->bReplace) {
    snprintf(zSql, sizeof(zSql), "DROP TABLE IF EXISTS %s", zName);
    if (exec(db, zSql)) goto out;
  }
  if (o->zCsq)
    snprintf(zSql, sizeof(zSql), "CREATE VIRTUAL TABLE %s USING csq%s", zName, zDefs);
  else
    snprintf(zSql, sizeof(zSql), "CREATE TABLE %s%s", zName, zDefs);
  if (exec(db, zSql)) {
    fprintf(stderr, "gen: (use --replace to drop an existing table first)\n");
    goto out;
  }
  int k = snprintf(zSql, sizeof(zSql), "INSERT INTO %s VALUES(", zName);
  for (int i = 0; i < nCol; i++) k += snprintf(zSql + k, sizeof(zSql) - (size_t)k, i ? ",?" : "?");
  snprintf(zSql + k, sizeof(zSql) - (size_t)k, ")");
  if (sqlite3_prepare_v2(db, zSql, -1, &pStmt, 0) != SQLITE_OK) {
    fprintf(stderr, "gen: %s: %s\n", zSql, sqlite3_errmsg(db));
    goto out;
  }
  if (exec(db, "BEGIN")) goto out;
  bTxn = 1;
  int64_t nRow = 0, nInTxn = 0;
  int n;
  while ((n = o->pKind->xFill(g, aRow, FILL_ROWS)) > 0) {
    for (int i = 0; i < n; i++) {
      int rc2 = insert_row(pStmt, aCol, nCol, aRow + (size_t)i * szRow);
      if (rc2 != SQLITE_OK) {
        fprintf(stderr, "gen: insert into %s, row %lld: %s\n", zName, (long long)(nRow + i + 1),
                sqlite3_errmsg(db));
        goto out;
      }
      if (o->nBatch && ++nInTxn == o->nBatch) {
        if (exec(db, "COMMIT") || exec(db, "BEGIN")) {
          bTxn = 0;
          goto out;
        }
        nInTxn = 0;
      }
    }
    nRow += n;
    progress_show(pp, nRow);
  }
  bTxn = 0;
  if (exec(db, "COMMIT")) goto out;
  *pnRow = nRow;
  rc = 0;
out:
  if (bTxn) sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
  sqlite3_finalize(pStmt);
  free(zDefs);
  return rc;
}

/* ---- main -------------------------------------------------------------- */

static int parse_tables(options *o, const char *zList) {
  char z[256];
  snprintf(z, sizeof(z), "%s", zList);
  o->nSel = 0;
  for (char *zSave = 0, *p = strtok_r(z, ",", &zSave); p; p = strtok_r(0, ",", &zSave)) {
    int t = o->pKind->xFromName(p);
    if (t < 0) {
      fprintf(stderr, "gen: no table \"%s\" in %s\n", p, o->pKind->zName);
      return 1;
    }
    if (o->nSel < 16) o->aSel[o->nSel++] = t;
  }
  return 0;
}

static int parse_args(options *o, int argc, char **argv) {
  memset(o, 0, sizeof(*o));
  o->seed = 1;
  if (argc < 4) return 1;
  if (strcmp(argv[1], "tpch") == 0)
    o->pKind = &aKind[0];
  else if (strcmp(argv[1], "ssb") == 0)
    o->pKind = &aKind[1];
  else
    return fprintf(stderr, "gen: unknown benchmark \"%s\" (tpch or ssb)\n", argv[1]), 1;
  char *zEnd;
  o->sf = strtod(argv[2], &zEnd);
  if (*zEnd || !(o->sf > 0 && o->sf <= 1000))
    return fprintf(stderr, "gen: bad scale factor \"%s\" (0 < SF <= 1000)\n", argv[2]), 1;
  o->zDb = argv[3];
  for (int i = 0; i < o->pKind->nTable; i++) o->aSel[o->nSel++] = i;
  for (int i = 4; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : 0;
    if (strcmp(a, "--quiet") == 0)
      o->bQuiet = 1;
    else if (strcmp(a, "--replace") == 0)
      o->bReplace = 1;
    else if (strcmp(a, "--header") == 0)
      o->bHeader = 1;
    else if (!v)
      return fprintf(stderr, "gen: %s needs a value (or is unknown)\n", a), 1;
    else if (strcmp(a, "--csq") == 0)
      o->zCsq = v, i++;
    else if (strcmp(a, "--tables") == 0) {
      if (parse_tables(o, v)) return 1;
      i++;
    } else if (strcmp(a, "--batch") == 0) {
      o->nBatch = strtoll(v, &zEnd, 10);
      if (*zEnd || o->nBatch < 0) return fprintf(stderr, "gen: bad --batch \"%s\"\n", v), 1;
      i++;
    } else if (strcmp(a, "--seed") == 0) {
      o->seed = strtoull(v, &zEnd, 0);
      if (*zEnd) return fprintf(stderr, "gen: bad --seed \"%s\"\n", v), 1;
      i++;
    } else if (strcmp(a, "--format") == 0) {
      if (strcmp(v, "sqlite") == 0)
        o->eFormat = FMT_SQLITE;
      else if (strcmp(v, "csv") == 0)
        o->eFormat = FMT_CSV;
      else if (strcmp(v, "null") == 0)
        o->eFormat = FMT_NULL;
      else if (strcmp(v, "schema") == 0)
        o->eFormat = FMT_SCHEMA;
      else
        return fprintf(stderr, "gen: bad --format \"%s\" (sqlite, csv, null, schema)\n", v), 1;
      i++;
    } else
      return fprintf(stderr, "gen: unknown option %s\n", a), 1;
  }
  if (o->eFormat == FMT_SQLITE && strcmp(o->zDb, "-") == 0)
    return fprintf(stderr, "gen: DBFILE '-' needs --format csv, null or schema\n"), 1;
  return 0;
}

int main(int argc, char **argv) {
  options o;
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    usage();
    return 0;
  }
  if (parse_args(&o, argc, argv)) {
    usage();
    return 2;
  }
  if (o.eFormat == FMT_SCHEMA) {
    for (int s = 0; s < o.nSel; s++) {
      char *zDefs = column_defs(&o, o.aSel[s]);
      if (!zDefs) return 1;
      printf("CREATE TABLE %s%s;\n", o.pKind->xName(o.aSel[s]), zDefs);
      free(zDefs);
    }
    return 0;
  }

  int rc = 1;
  sqlite3 *db = 0;
  char *aRow = 0;
  csv_out csv = {0};
  FILE *fStat = o.eFormat == FMT_CSV ? stderr : stdout;
  progress prog = {0};
  prog.bOn = !o.bQuiet && isatty(2) && o.eFormat != FMT_CSV;

  if (o.eFormat == FMT_SQLITE) {
    /* NOMUTEX: one thread uses the connection, and the per-bind mutex costs ~10%. */
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(o.zDb, &db, flags, 0) != SQLITE_OK) {
      fprintf(stderr, "gen: cannot open %s: %s\n", o.zDb,
              db ? sqlite3_errmsg(db) : "out of memory");
      goto out;
    }
    if (o.zCsq) {
      char *zErr = 0;
      if (access(o.zCsq, R_OK) != 0) {
        fprintf(stderr, "gen: extension %s: %s (build it with make)\n", o.zCsq, strerror(errno));
        goto out;
      }
      sqlite3_enable_load_extension(db, 1);
      if (sqlite3_load_extension(db, o.zCsq, 0, &zErr) != SQLITE_OK) {
        /* SQLite reports its last attempt (the name with ".so" appended);
        ** dlopen on the name itself says what is really wrong. */
        void *h = dlopen(o.zCsq, RTLD_NOW | RTLD_LOCAL);
        const char *zWhy = h ? (zErr ? zErr : "?") : dlerror();
        fprintf(stderr, "gen: cannot load extension %s: %s\n", o.zCsq, zWhy);
        if (h) dlclose(h);
        sqlite3_free(zErr);
        goto out;
      }
    }
  }
  if (o.eFormat == FMT_CSV) {
    csv.nCap = 1 << 20;
    csv.z = malloc(csv.nCap);
    if (!csv.z) goto out;
  }
  size_t szMax = 0;
  for (int t = 0; t < o.pKind->nTable; t++)
    if (o.pKind->xRowSize(t) > szMax) szMax = o.pKind->xRowSize(t);
  aRow = malloc(szMax * FILL_ROWS);
  if (!aRow) goto out;

  for (int s = 0; s < o.nSel; s++) {
    int t = o.aSel[s];
    void *g = o.pKind->xOpen(t, o.sf, o.seed);
    if (!g) {
      fprintf(stderr, "gen: cannot open generator for %s\n", o.pKind->xName(t));
      goto out;
    }
    prog.zTable = o.pKind->xName(t);
    prog.nTotal = prog.bOn ? o.pKind->xCount(t, o.sf, o.seed) : 0;
    prog.tLast = 0;
    double t0 = now();
    int64_t nRow = 0;
    int nCol;
    const gen_col *aCol = o.pKind->xColumns(t, &nCol);
    size_t szRow = o.pKind->xRowSize(t);
    int bad = 0;
    if (o.eFormat == FMT_SQLITE) {
      bad = load_table(&o, db, t, g, aRow, &prog, &nRow);
    } else {
      if (o.eFormat == FMT_CSV && o.bHeader) {
        for (int i = 0; i < nCol; i++)
          csv.n += (size_t)sprintf(csv.z + csv.n, "%s%s", i ? "," : "", aCol[i].zName);
        csv.z[csv.n++] = '\n';
      }
      int n;
      while ((n = o.pKind->xFill(g, aRow, FILL_ROWS)) > 0) {
        if (o.eFormat == FMT_CSV)
          for (int i = 0; i < n; i++) csv_row(&csv, aCol, nCol, aRow + (size_t)i * szRow);
        nRow += n;
        progress_show(&prog, nRow);
      }
      if (o.eFormat == FMT_CSV) {
        csv_flush(&csv);
        if (fflush(stdout) || csv.bErr) {
          fprintf(stderr, "gen: writing CSV: %s\n", strerror(errno));
          bad = 1;
        }
      }
    }
    double dt = now() - t0;
    o.pKind->xClose(g);
    progress_done(&prog);
    if (bad) goto out;
    if (!o.bQuiet)
      fprintf(fStat, "%-10s %12lld rows %9.3f s %12.0f rows/s\n", o.pKind->xName(t),
              (long long)nRow, dt, dt > 0 ? (double)nRow / dt : 0.0);
  }
  rc = 0;
out:
  if (db && sqlite3_close(db) != SQLITE_OK) {
    fprintf(stderr, "gen: closing %s: %s\n", o.zDb, sqlite3_errmsg(db));
    rc = 1;
  }
  free(aRow);
  free(csv.z);
  return rc;
}
