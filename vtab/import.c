/*
** vtab/import.c - csq_import(): loading a csq table in bulk.
**
**   SELECT csq_import('lineitem', 'lineitem.tbl', 'separator=|');
**   SELECT csq_import('t', 'SELECT a, b FROM native_t');
**   SELECT csq_import_progress();   -- rows=..,bytes=..,total=..,percent=..
**
** Returns the number of rows loaded. The source is a CSV file (vtab/csv.c,
** RFC 4180) or, when it starts with SELECT, WITH or VALUES, a query whose
** result has the table's columns. Each value gets the column's affinity
** exactly as INSERT (or the sqlite3 shell's .import) would give it
** (vtab/affinity.c); a CSV field is text, NULL only where the null= option
** says. Options, comma-separated:
**
**   separator=C   one byte, or tab, comma, pipe, semicolon (default ',')
**   header=1      the first record names the columns: skip it (default 0)
**   null=S        a field that is exactly S (unquoted) is NULL; null= with
**                 nothing after it makes empty unquoted fields NULL. By
**                 default no field is NULL, as with .import
**   skip_bad=1    skip malformed rows and rows that break NOT NULL, and
**                 count them (csq_import_progress); by default the first
**                 one fails the load with its line and field
**   progress=1    report rows, MB/s and percent of the file on stderr
**
** Why a function and not INSERT: SQLite hands a virtual table one row at a
** time through xUpdate as sqlite3_values, which caps any virtual table's
** load near native speed. Here rows go straight into a row group's vectors,
** and a full row group goes to an encode thread (device/store/encq.c)
** while the next one is parsed; the encoded extents are written through
** one device transaction, committed at the end (outside BEGIN). So a
** failure anywhere, or a crash (kill -9) at any moment, leaves the table
** as it was, and memory stays at a few row groups whatever the file size.
**
** An INTEGER PRIMARY KEY column gives the rowid: NULL takes the next one,
** and explicit values must rise above every rowid before them (so no
** lookup keeps them unique).
**
** Inside BEGIN ... COMMIT it joins the connection's transaction instead:
** the rows are the transaction's (COMMIT, ROLLBACK and ROLLBACK TO treat
** them as inserted rows: vt_import_join in vtab/write.c), and a load that
** fails is undone in it, the transaction staying open.
**
** CHECK constraints are checked on every row as INSERT checks them (after
** NOT NULL, seeing the row's new rowid; PRAGMA ignore_check_constraints
** turns them off): a row that fails one is a bad row.
**
** A table striped over several devices gets its row groups spread over
** the members as INSERT spreads them (vt_import_member). Outside BEGIN its
** load is a transaction of its own over every member, committed with the
** two-step commit of vtab/stripe.c (vt_txn_commit_all), so that it is
** atomic across the devices as well.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "vtab/csv.h"
#include "vtab/vtab.h"

/* What csq_import_progress() shows: the load in flight in this process,
** or the last one. Written by the loading thread, read by any (a load
** runs in one connection; another connection or thread may watch). */
static struct {
  int64_t nRow, nSkip;
  uint64_t nSlow; /* values whose conversion csq asked of SQLite (rare shapes) */
  uint64_t nByte, nTotal;
  int bRunning;
  double tStart, tEnd;
} g_progress;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct imp_opts {
  char cSep;
  int bHeader;
  char *zNull; /* sqlite3_malloc'd, or NULL: no field is NULL */
  int nNull;
  int bSkipBad;
  int bProgress;
} imp_opts;

/* Parse "key=value,..." into *o. SQLITE_OK, or SQLITE_ERROR with *pzErr. */
static int parse_opts(const char *z, imp_opts *o, char **pzErr) {
  memset(o, 0, sizeof(*o));
  o->cSep = ',';
  while (z && *z) {
    while (*z == ' ') z++;
    const char *zEq = strchr(z, '=');
    if (!zEq) {
      *pzErr =
          sqlite3_mprintf("option \"%s\" has no value (options are key=value, comma-separated: "
                          "separator, header, null, skip_bad, progress)",
                          z);
      return SQLITE_ERROR;
    }
    int nKey = (int)(zEq - z);
    const char *v = zEq + 1;
    const char *zEnd;
    if (nKey == 9 && sqlite3_strnicmp(z, "separator", 9) == 0) {
      /* a separator may be ',' itself: one byte always belongs to the value */
      static const struct {
        const char *zName;
        char c;
      } aName[] = {{"tab", '\t'}, {"\\t", '\t'}, {"comma", ','}, {"pipe", '|'}, {"semicolon", ';'}};
      zEnd = v;
      for (size_t i = 0; i < sizeof(aName) / sizeof(aName[0]); i++) {
        size_t n = strlen(aName[i].zName);
        if (sqlite3_strnicmp(v, aName[i].zName, (int)n) == 0 && (v[n] == ',' || v[n] == 0)) {
          o->cSep = aName[i].c;
          zEnd = v + n;
          break;
        }
      }
      if (zEnd == v) {
        if (!*v || (v[1] != ',' && v[1] != 0) || *v == '"' || *v == '\n' || *v == '\r') {
          *pzErr = sqlite3_mprintf("separator= takes one byte other than '\"', CR and LF, or "
                                   "tab, comma, pipe, semicolon");
          return SQLITE_ERROR;
        }
        o->cSep = *v;
        zEnd = v + 1;
      }
    } else {
      zEnd = strchr(v, ',');
      if (!zEnd) zEnd = v + strlen(v);
      int nVal = (int)(zEnd - v);
      int bFlag = nVal == 1 && (*v == '0' || *v == '1');
      if (nKey == 4 && sqlite3_strnicmp(z, "null", 4) == 0) {
        sqlite3_free(o->zNull);
        o->zNull = sqlite3_mprintf("%.*s", nVal, v);
        if (!o->zNull) return SQLITE_NOMEM;
        o->nNull = nVal;
      } else if (bFlag && nKey == 6 && sqlite3_strnicmp(z, "header", 6) == 0) {
        o->bHeader = *v == '1';
      } else if (bFlag && nKey == 8 && sqlite3_strnicmp(z, "skip_bad", 8) == 0) {
        o->bSkipBad = *v == '1';
      } else if (bFlag && nKey == 8 && sqlite3_strnicmp(z, "progress", 8) == 0) {
        o->bProgress = *v == '1';
      } else {
        *pzErr =
            sqlite3_mprintf("unknown option or value \"%.*s\" (known: separator=C, header=0|1, "
                            "null=S, skip_bad=0|1, progress=0|1)",
                            (int)(zEnd - z), z);
        return SQLITE_ERROR;
      }
    }
    z = *zEnd ? zEnd + 1 : zEnd;
  }
  return SQLITE_OK;
}

/* One load in progress. */
typedef struct imp_load {
  sqlite3 *db;
  vt_tab *pTab;
  const imp_opts *pOpt;
  vt_dev *pDev;
  store_txn *t;
  store_table *pStoreTab;
  store_encq *q;      /* started at the first full row group */
  csq_vec *aCol;      /* nCol + 1 vectors, [0] rowids: the row group being filled */
  uint32_t nRg;       /* rows per row group */
  int64_t iNextRowid; /* the next row's rowid unless its INTEGER PRIMARY KEY says */
  int64_t iLastRowid; /* the last row's */
  int bNoRowid;       /* the last rowid was the largest integer */
  int bCheck;         /* the table's CHECK constraints apply (vt_check_bulk_begin) */
  int rcRows;         /* a query source's first failure in csq__import_rows... */
  char *zRowsErr;     /* ...and its message (sqlite3_malloc'd) */
  vt_numconv *pConv;
  int bJoined;  /* t is the connection's transaction (vt_import_join): inside BEGIN... */
  int bOwnTxn;  /* ...or outside it, for a striped table: the load commits it */
  vt_mark mark; /* ... and the table before the load, to undo a failed one */
  int64_t nRow, nSkip;
  char *zFirstSkip; /* the first skipped row's message */
  double tLastReport;
  uint64_t nTotal;
  uint64_t nByte; /* of the file, read so far */
} imp_load;

static void report(imp_load *L, uint64_t nByte, int bFinal) {
  double t = now_s();
  L->nByte = nByte;
  __atomic_store_n(&g_progress.nRow, L->nRow, __ATOMIC_RELAXED);
  __atomic_store_n(&g_progress.nByte, nByte, __ATOMIC_RELAXED);
  __atomic_store_n(&g_progress.nSkip, L->nSkip, __ATOMIC_RELAXED);
  __atomic_store_n(&g_progress.nSlow, vt_numconv_slow(L->pConv), __ATOMIC_RELAXED);
  if (!L->pOpt->bProgress || (!bFinal && t - L->tLastReport < 1.0)) return;
  /* a terminal gets one line redrawn; a file or pipe only the last */
  int bTty = isatty(fileno(stderr));
  if (!bTty && !bFinal) return;
  L->tLastReport = t;
  double dt = t - g_progress.tStart;
  char zPct[32] = "";
  if (L->nTotal)
    snprintf(zPct, sizeof(zPct), ", %.0f%% of the file", 100.0 * (double)nByte / (double)L->nTotal);
  fprintf(stderr, "%scsq_import %s: %lld rows, %.1f MB/s%s, %.1f s%s", bTty ? "\r" : "",
          L->pTab->zName, (long long)L->nRow, dt > 0 ? (double)nByte / 1e6 / dt : 0.0, zPct, dt,
          bFinal ? "\n" : "");
  fflush(stderr);
}

/* A device/store error (a -errno or NVMe status, zDev libc-malloc'd or
** NULL) as the SQLite code and sqlite3_malloc'd message csq_import returns. */
static int dev_fail(int rc, char *zDev, char **pzErr) {
  *pzErr = sqlite3_mprintf("%s", zDev ? zDev : "device error");
  free(zDev);
  return vt_rc_from(rc);
}

/* Where the next row group goes: the load's transaction, or on a striped
** table the member holding the fewest row groups. */
static int dest(imp_load *L, int *piMem, store_txn **ppTxn, store_table **ppTab, char **pzErr) {
  *piMem = 0;
  *ppTxn = L->t;
  *ppTab = L->pStoreTab;
  if (L->pTab->nMem == 1) return SQLITE_OK;
  int rc = vt_import_member(L->pTab, piMem, ppTxn, ppTab);
  if (rc) *pzErr = sqlite3_mprintf("%s", L->pTab->base.zErrMsg ? L->pTab->base.zErrMsg : "?");
  return rc;
}

/* A row group of n rows was appended to member iMem's pTab: in the
** connection's transaction, the table's transaction state counts it as
** inserted rows (vt_import_span). */
static int note_rg(imp_load *L, int iMem, store_table *pTab, uint32_t n) {
  if (!L->bJoined) return SQLITE_OK;
  return vt_import_span(L->pTab, pTab->apRg[pTab->nRg - 1], iMem, n);
}

/* Write the row groups the encode thread has finished, in order: those
** ready now (DRAIN_READY), after waiting for the oldest (DRAIN_ONE: room
** for the next), or every one in flight (DRAIN_ALL: the end of the load). */
#define DRAIN_READY 0
#define DRAIN_ONE   1
#define DRAIN_ALL   2
static int drain(imp_load *L, int eWait, char **pzErr) {
  for (;;) {
    store_enc_rg *pEnc = NULL;
    char *zDev = NULL;
    int rc = store_encq_get(L->q, eWait != DRAIN_READY, &pEnc, &zDev);
    if (rc) return dev_fail(rc, zDev, pzErr);
    if (!pEnc) return SQLITE_OK;
    uint32_t n = pEnc->nRow;
    int iMem;
    store_txn *t;
    store_table *pTab;
    rc = dest(L, &iMem, &t, &pTab, pzErr);
    if (rc) {
      store_enc_rg_free(pEnc);
      return rc;
    }
    rc = store_txn_append_encoded(t, pTab, pEnc, &zDev);
    store_enc_rg_free(pEnc);
    if (rc) return dev_fail(rc, zDev, pzErr);
    rc = note_rg(L, iMem, pTab, n);
    if (rc) return rc;
    if (eWait == DRAIN_ONE) eWait = DRAIN_READY;
  }
}

/* The filled row group: to the encode thread (started at the first full
** row group; a load of one row group encodes it here), then write what
** it has finished. */
static int flush_rg(imp_load *L, char **pzErr) {
  uint32_t n = L->aCol[1].n;
  if (n == 0) return SQLITE_OK;
  store_txn_saw_rowid(L->t, L->pStoreTab, L->iLastRowid);
  int nChunk = L->pTab->s.nCol + 1;
  if (!L->q && n == L->nRg) {
    /* a load of more than one row group: worth a thread */
    if (store_encq_new(nChunk, L->pTab->zName, 2, &L->q) != 0) L->q = NULL;
  }
  if (!L->q) {
    char *zDev = NULL;
    int iMem;
    store_txn *t;
    store_table *pTab;
    int rc = dest(L, &iMem, &t, &pTab, pzErr);
    if (rc == SQLITE_OK) {
      rc = store_txn_append(t, pTab, L->aCol, 0, n, &zDev);
      if (rc) rc = dev_fail(rc, zDev, pzErr);
    }
    for (int c = 0; c < nChunk; c++) csq_vec_reset(&L->aCol[c]);
    return rc ? rc : note_rg(L, iMem, pTab, n);
  }
  uint64_t aHeap[nChunk];
  for (int c = 0; c < nChunk; c++) aHeap[c] = L->aCol[c].nHeap;
  for (;;) {
    int rc = store_encq_put(L->q, L->aCol, n);
    if (rc == 0) break;
    if (rc != -EAGAIN) {
      *pzErr = sqlite3_mprintf("the encode queue failed (%d)", rc);
      return vt_rc_from(rc);
    }
    rc = drain(L, DRAIN_ONE, pzErr); /* the queue is full: write the oldest */
    if (rc) return rc;
  }
  /* the vectors that came back are a free slot's: sized like the last row
  ** group at once, not grown value by value (copies, page faults) */
  for (int c = 0; c < nChunk; c++)
    if (csq_vec_reserve(&L->aCol[c], L->nRg, aHeap[c] + aHeap[c] / 8)) return SQLITE_NOMEM;
  return drain(L, DRAIN_READY, pzErr);
}

/* A bad row: fail the load with zMsg, or skip and count it. Takes zMsg. */
static int bad_row(imp_load *L, char *zMsg, char **pzErr) {
  if (!zMsg) return SQLITE_NOMEM;
  if (!L->pOpt->bSkipBad) {
    *pzErr = zMsg;
    return SQLITE_ERROR;
  }
  L->nSkip++;
  if (!L->zFirstSkip)
    L->zFirstSkip = zMsg;
  else
    sqlite3_free(zMsg);
  return SQLITE_OK;
}

/* Keep the columns aligned: rows [0, n) of every column. */
static void truncate_row(imp_load *L, uint32_t n) {
  for (int c = 0; c <= L->pTab->s.nCol; c++) csq_vec_truncate(&L->aCol[c], n);
}

/* The rowid of the row just read (its values pushed): its INTEGER PRIMARY
** KEY's value, or the next one when it has none or that is NULL. The key
** column itself stores NULL, as in vtab/write.c. Rows are appended, so an
** explicit key must be above every rowid before it: that keeps rowids
** unique without looking anything up (the common case: a file of keys in
** increasing order). NULL, or a message saying why the row is refused. */
static char *take_rowid(imp_load *L) {
  const vt_schema *s = &L->pTab->s;
  int64_t r = L->iNextRowid;
  if (s->iIpk >= 0) {
    csq_vec *k = &L->aCol[s->iIpk + 1];
    uint32_t i = k->n - 1;
    if (k->aCls[i] == CSQ_INT) {
      r = k->aVal[i].i;
      if (r < L->iNextRowid || L->bNoRowid)
        return sqlite3_mprintf("%s %lld is not above the rowids before it (csq_import takes "
                               "INTEGER PRIMARY KEY values in increasing order; load others "
                               "with INSERT)",
                               s->aCol[s->iIpk].zName, (long long)r);
    } else if (k->aCls[i] != CSQ_NULL) {
      return sqlite3_mprintf("%s: datatype mismatch (an INTEGER PRIMARY KEY holds integers)",
                             s->aCol[s->iIpk].zName);
    }
    csq_vec_truncate(k, i);
    if (csq_vec_push_null(k)) return NULL;
  }
  if (L->bNoRowid && r == L->iNextRowid)
    return sqlite3_mprintf("table %s has no rowids left", L->pTab->zName);
  if (csq_vec_push_int(&L->aCol[0], r)) return NULL;
  L->iLastRowid = r;
  if (r == INT64_MAX)
    L->bNoRowid = 1;
  else
    L->iNextRowid = r + 1;
  return NULL;
}

/* The rowid state take_rowid moves on, kept to put back when the row is
** not loaded after all (a CHECK fails): the next row then takes its rowid,
** as after an INSERT that failed. */
typedef struct imp_rowid {
  int64_t iNext, iLast;
  int bNo;
} imp_rowid;

static imp_rowid rowid_save(const imp_load *L) {
  imp_rowid r = {L->iNextRowid, L->iLastRowid, L->bNoRowid};
  return r;
}

/* The row just read (row iRow, its rowid taken) against the table's CHECK
** constraints. SQLITE_OK when it passes (or nothing is checked); else the
** row is removed again, and the return is bad_row's for a failed CHECK
** (zWhere names the row in the message), or the error. */
static int check_row(imp_load *L, uint32_t iRow, const imp_rowid *pSaved, const char *zWhere,
                     char **pzErr) {
  if (!L->bCheck) return SQLITE_OK;
  int rc = vt_check_bulk_row(L->pTab, L->aCol, iRow);
  if (rc == SQLITE_OK) return SQLITE_OK;
  truncate_row(L, iRow);
  L->iNextRowid = pSaved->iNext;
  L->iLastRowid = pSaved->iLast;
  L->bNoRowid = pSaved->bNo;
  const char *zMsg = L->pTab->base.zErrMsg ? L->pTab->base.zErrMsg : sqlite3_errstr(rc);
  if (rc == SQLITE_CONSTRAINT_CHECK)
    return bad_row(L, sqlite3_mprintf("%s: %s", zWhere, zMsg), pzErr);
  *pzErr = sqlite3_mprintf("%s: %s", zWhere, zMsg);
  return rc;
}

static int load_csv(imp_load *L, const char *zPath, char **pzErr) {
  vt_csv *pCsv = NULL;
  const vt_schema *s = &L->pTab->s;
  const imp_opts *o = L->pOpt;
  int rc = vt_csv_open(zPath, o->cSep, &pCsv, pzErr);
  if (rc) return rc;
  L->nTotal = vt_csv_size(pCsv);
  __atomic_store_n(&g_progress.nTotal, L->nTotal, __ATOMIC_RELAXED);
  int bSkipHeader = o->bHeader;
  for (;;) {
    int nField;
    const vt_csv_field *aF;
    char *zMsg = NULL;
    rc = vt_csv_next(pCsv, &nField, &aF, &zMsg);
    if (rc == SQLITE_DONE) {
      rc = SQLITE_OK;
      break;
    }
    if (rc == SQLITE_ERROR) {
      rc = bad_row(L, sqlite3_mprintf("%s %s", zPath, zMsg), pzErr);
      sqlite3_free(zMsg);
      if (rc) break;
      continue;
    }
    if (rc != SQLITE_ROW) {
      *pzErr = zMsg;
      break;
    }
    rc = SQLITE_OK;
    if (bSkipHeader) {
      bSkipHeader = 0;
      continue;
    }
    if (nField != s->nCol) {
      rc = bad_row(L,
                   sqlite3_mprintf("%s line %lld: %d field%s, but table %s has %d columns", zPath,
                                   (long long)vt_csv_line(pCsv), nField, nField == 1 ? "" : "s",
                                   L->pTab->zName, s->nCol),
                   pzErr);
      if (rc) break;
      continue;
    }
    uint32_t nHad = L->aCol[1].n;
    for (int c = 0; c < nField; c++) {
      const vt_csv_field *f = &aF[c];
      csq_vec *v = &L->aCol[c + 1];
      int e;
      if (o->zNull && !f->bQuoted && f->n == (uint32_t)o->nNull &&
          memcmp(f->z, o->zNull, f->n) == 0) {
        if (s->aCol[c].bNotNull && c != s->iIpk) {
          truncate_row(L, nHad);
          rc = bad_row(L,
                       sqlite3_mprintf("%s line %lld, field %d: NULL in NOT NULL column %s.%s",
                                       zPath, (long long)vt_csv_line(pCsv), c + 1, L->pTab->zName,
                                       s->aCol[c].zName),
                       pzErr);
          goto next_record;
        }
        e = csq_vec_push_null(v);
      } else {
        e = vt_push_text(L->pConv, v, f->z, f->n, s->aCol[c].aff);
      }
      if (e) {
        truncate_row(L, nHad);
        rc = e == -12 ? SQLITE_NOMEM : SQLITE_ERROR;
        *pzErr = sqlite3_mprintf("%s line %lld, field %d: cannot convert the value (%s)", zPath,
                                 (long long)vt_csv_line(pCsv), c + 1, sqlite3_errmsg(L->db));
        goto next_record;
      }
    }
    imp_rowid saved = rowid_save(L);
    char *zWhy = take_rowid(L);
    if (zWhy || L->aCol[0].n != L->aCol[1].n) {
      truncate_row(L, nHad);
      rc = bad_row(L,
                   zWhy ? sqlite3_mprintf("%s line %lld, field %d: %s", zPath,
                                          (long long)vt_csv_line(pCsv), s->iIpk + 1, zWhy)
                        : NULL,
                   pzErr);
      sqlite3_free(zWhy);
      goto next_record;
    }
    if (L->bCheck) {
      char *zWhere = sqlite3_mprintf("%s line %lld", zPath, (long long)vt_csv_line(pCsv));
      int64_t n0 = L->nSkip;
      rc = zWhere ? check_row(L, nHad, &saved, zWhere, pzErr) : SQLITE_NOMEM;
      sqlite3_free(zWhere);
      if (rc || L->nSkip != n0) goto next_record;
    }
    L->nRow++;
    if (L->aCol[1].n >= L->nRg) {
      rc = flush_rg(L, pzErr);
      report(L, vt_csv_offset(pCsv), 0);
    }
  next_record:
    if (rc) break;
  }
  if (rc == SQLITE_OK) rc = flush_rg(L, pzErr);
  if (rc == SQLITE_OK) report(L, vt_csv_offset(pCsv), 1);
  vt_csv_close(pCsv);
  return rc;
}

/* The value of column i of a query's row, with the column's affinity.
** One sqlite3_column_value per value: every sqlite3_column_* call takes
** the connection's mutex, sqlite3_value_* calls do not (this runs on the
** connection's thread, inside its statement, so the value is safe to read
** here). */
static int push_column(imp_load *L, csq_vec *v, sqlite3_value *pVal, char aff) {
  if (sqlite3_value_type(pVal) == SQLITE_TEXT) {
    const char *z = (const char *)sqlite3_value_text(pVal);
    if (!z) return -12;
    return vt_push_text(L->pConv, v, z, (uint32_t)sqlite3_value_bytes(pVal), aff);
  }
  return vt_push_value(v, pVal, aff);
}

/* One row of a query source (argv: its nCol values) into the row group,
** with the columns' affinity, NOT NULL, rowid and CHECK. SQLite codes; a
** bad row is bad_row's. */
static int query_row(imp_load *L, sqlite3_value **argv, char **pzErr) {
  const vt_schema *s = &L->pTab->s;
  uint32_t nHad = L->aCol[1].n;
  for (int c = 0; c < s->nCol; c++) {
    sqlite3_value *pVal = argv[c];
    if (s->aCol[c].bNotNull && c != s->iIpk && sqlite3_value_type(pVal) == SQLITE_NULL) {
      truncate_row(L, nHad);
      return bad_row(L,
                     sqlite3_mprintf("row %lld: NULL in NOT NULL column %s.%s",
                                     (long long)(L->nRow + L->nSkip + 1), L->pTab->zName,
                                     s->aCol[c].zName),
                     pzErr);
    }
    if (push_column(L, &L->aCol[c + 1], pVal, s->aCol[c].aff)) {
      truncate_row(L, nHad);
      return SQLITE_NOMEM;
    }
  }
  imp_rowid saved = rowid_save(L);
  char *zWhy = take_rowid(L);
  if (zWhy || L->aCol[0].n != L->aCol[1].n) {
    truncate_row(L, nHad);
    int rc = bad_row(
        L, zWhy ? sqlite3_mprintf("row %lld: %s", (long long)(L->nRow + L->nSkip + 1), zWhy) : NULL,
        pzErr);
    sqlite3_free(zWhy);
    return rc;
  }
  if (L->bCheck) {
    char *zWhere = sqlite3_mprintf("row %lld", (long long)(L->nRow + L->nSkip + 1));
    int64_t n0 = L->nSkip;
    int rc = zWhere ? check_row(L, nHad, &saved, zWhere, pzErr) : SQLITE_NOMEM;
    sqlite3_free(zWhere);
    if (rc || L->nSkip != n0) return rc;
  }
  L->nRow++;
  if (L->aCol[1].n < L->nRg) return SQLITE_OK;
  int rc = flush_rg(L, pzErr);
  report(L, 0, 0);
  return rc;
}

/* The pointer type of the load that csq__import_rows' first argument
** carries (sqlite3_bind_pointer): no SQL can make one. */
#define IMP_PTR_TYPE "csq_import_load"

/* csq__import_rows(LOAD, c1, ..., cN), an aggregate: each step is one row
** of the query for query_row. load_query wraps the user's query in it, so
** that SQLite hands the values over as arguments, without a return from
** sqlite3_step and a locked sqlite3_column_value per value. The first
** failure is kept in the load (rcRows, zRowsErr) and stops the statement. */
static void rows_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  imp_load *L = argc > 0 ? sqlite3_value_pointer(argv[0], IMP_PTR_TYPE) : NULL;
  if (!L || argc - 1 != L->pTab->s.nCol) {
    sqlite3_result_error(ctx, "csq__import_rows() is csq_import's own: call csq_import()", -1);
    return;
  }
  if (L->rcRows) return;
  int rc = query_row(L, argv + 1, &L->zRowsErr);
  if (rc) {
    L->rcRows = rc;
    sqlite3_result_error(ctx, L->zRowsErr ? L->zRowsErr : sqlite3_errstr(rc), -1);
    if (rc != SQLITE_ERROR) sqlite3_result_error_code(ctx, rc);
  }
}

static void rows_final(sqlite3_context *ctx) {
  sqlite3_result_null(ctx);
}

static int load_query(imp_load *L, const char *zSql, char **pzErr) {
  const vt_schema *s = &L->pTab->s;
  sqlite3_stmt *pStmt = NULL;
  const char *zTail = NULL;
  int rc = sqlite3_prepare_v2(L->db, zSql, -1, &pStmt, &zTail);
  if (rc) {
    *pzErr = sqlite3_mprintf("%s", sqlite3_errmsg(L->db));
    return rc;
  }
  if (!pStmt || sqlite3_column_count(pStmt) != s->nCol) {
    *pzErr = sqlite3_mprintf("the query returns %d columns, but table %s has %d",
                             pStmt ? sqlite3_column_count(pStmt) : 0, L->pTab->zName, s->nCol);
    sqlite3_finalize(pStmt);
    return SQLITE_ERROR;
  }
  if (s->nCol + 1 > sqlite3_limit(L->db, SQLITE_LIMIT_FUNCTION_ARG, -1)) {
    /* too many columns to pass as arguments: the rows one by one */
    sqlite3_value **argv = sqlite3_malloc64(sizeof(sqlite3_value *) * (size_t)s->nCol);
    if (!argv) rc = SQLITE_NOMEM;
    while (rc == SQLITE_OK && (rc = sqlite3_step(pStmt)) == SQLITE_ROW) {
      for (int c = 0; c < s->nCol; c++) argv[c] = sqlite3_column_value(pStmt, c);
      rc = query_row(L, argv, pzErr);
    }
    sqlite3_free(argv);
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
    if (rc && !*pzErr) *pzErr = sqlite3_mprintf("%s", sqlite3_errmsg(L->db));
    sqlite3_finalize(pStmt);
    if (rc == SQLITE_OK) rc = flush_rg(L, pzErr);
    if (rc == SQLITE_OK) report(L, 0, 1);
    return rc;
  }
  sqlite3_finalize(pStmt);
  pStmt = NULL;
  int nSql = (int)(zTail - zSql); /* the first statement, without its ';' */
  while (nSql > 0 && (zSql[nSql - 1] == ';' || zSql[nSql - 1] == ' ' || zSql[nSql - 1] == '\t' ||
                      zSql[nSql - 1] == '\n' || zSql[nSql - 1] == '\r'))
    nSql--;
  /* WITH csq__q(c0, ...) AS (query) SELECT csq__import_rows(@load, c0, ...)
  ** FROM csq__q: the query as written (up to the end of its statement),
  ** its columns renamed so that any names, or none, can be passed on */
  sqlite3_str *pStr = sqlite3_str_new(L->db);
  sqlite3_str_appendall(pStr, "WITH csq__q(");
  for (int c = 0; c < s->nCol; c++) sqlite3_str_appendf(pStr, "%sc%d", c ? "," : "", c);
  /* a line break before ')': a query may end in a -- comment */
  sqlite3_str_appendf(pStr, ") AS (%.*s\n) SELECT csq__import_rows(@csq_import_load", nSql, zSql);
  for (int c = 0; c < s->nCol; c++) sqlite3_str_appendf(pStr, ",c%d", c);
  sqlite3_str_appendall(pStr, ") FROM csq__q");
  char *zWrap = sqlite3_str_finish(pStr);
  if (!zWrap) return SQLITE_NOMEM;
  rc = sqlite3_prepare_v2(L->db, zWrap, -1, &pStmt, NULL);
  sqlite3_free(zWrap);
  if (rc) {
    *pzErr = sqlite3_mprintf("%s", sqlite3_errmsg(L->db));
    return rc;
  }
  rc = sqlite3_bind_pointer(pStmt, sqlite3_bind_parameter_index(pStmt, "@csq_import_load"), L,
                            IMP_PTR_TYPE, NULL);
  if (rc == SQLITE_OK) {
    while ((rc = sqlite3_step(pStmt)) == SQLITE_ROW) {}
  }
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  if (rc && L->rcRows) {
    rc = L->rcRows;
    *pzErr = L->zRowsErr;
    L->zRowsErr = NULL;
  } else if (rc && !*pzErr) {
    *pzErr = sqlite3_mprintf("%s", sqlite3_errmsg(L->db));
  }
  sqlite3_finalize(pStmt);
  if (rc == SQLITE_OK) rc = flush_rg(L, pzErr);
  if (rc == SQLITE_OK) report(L, 0, 1);
  return rc;
}

/* Does zSrc read as a query rather than a file name? Its first word is
** SELECT, WITH or VALUES, followed by a space or '(' ("select.csv" is a
** file). */
static int is_query(const char *z) {
  static const char *azKw[] = {"SELECT", "WITH", "VALUES"};
  while (*z == ' ' || *z == '\t' || *z == '\n' || *z == '\r' || *z == '(') z++;
  for (size_t i = 0; i < sizeof(azKw) / sizeof(azKw[0]); i++) {
    int n = (int)strlen(azKw[i]);
    char c = z[n];
    if (sqlite3_strnicmp(z, azKw[i], n) == 0 &&
        (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '('))
      return 1;
  }
  return 0;
}

/* Does schema zDb hold a table (or view) named zName? */
static int schema_has(sqlite3 *db, const char *zDb, const char *zName) {
  char *zSql = sqlite3_mprintf("SELECT 1 FROM \"%w\".sqlite_schema WHERE type IN ('table', 'view') "
                               "AND name = ?1 COLLATE NOCASE",
                               zDb);
  sqlite3_stmt *p = NULL;
  int bHas = zSql && sqlite3_prepare_v2(db, zSql, -1, &p, NULL) == SQLITE_OK &&
             sqlite3_bind_text(p, 1, zName, -1, SQLITE_STATIC) == SQLITE_OK &&
             sqlite3_step(p) == SQLITE_ROW;
  sqlite3_finalize(p);
  sqlite3_free(zSql);
  return bHas;
}

/* The csq table zName ("table" or "schema.table") of this connection, as
** SQLite resolves the name (temp, then main, then attached databases),
** connected by preparing a statement that names it (*ppStmt keeps it
** connected: finalize after). */
static int find_table(sqlite3 *db, vt_conn *pConn, const char *zName, vt_tab **ppTab,
                      sqlite3_stmt **ppStmt, char **pzErr) {
  *ppTab = NULL;
  char *zDb = NULL;
  const char *zTab = zName, *zDot = strchr(zName, '.');
  if (zDot) {
    zDb = sqlite3_mprintf("%.*s", (int)(zDot - zName), zName);
    zTab = zDot + 1;
  } else {
    const char *z;
    int aOrder[64], n = 0;
    aOrder[n++] = 1; /* temp */
    aOrder[n++] = 0; /* main */
    for (int i = 2; i < 64 && sqlite3_db_name(db, i); i++) aOrder[n++] = i;
    for (int k = 0; k < n && !zDb; k++) {
      z = sqlite3_db_name(db, aOrder[k]);
      if (z && schema_has(db, z, zTab)) zDb = sqlite3_mprintf("%s", z);
    }
  }
  if (!zDb) {
    *pzErr = sqlite3_mprintf("no table %s", zName);
    return SQLITE_ERROR;
  }
  char *zSql = sqlite3_mprintf("SELECT 0 FROM \"%w\".\"%w\" WHERE 0", zDb, zTab);
  int rc = zSql ? sqlite3_prepare_v2(db, zSql, -1, ppStmt, NULL) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  if (rc) {
    *pzErr = sqlite3_mprintf("no table %s (%s)", zName, sqlite3_errmsg(db));
    sqlite3_free(zDb);
    return SQLITE_ERROR;
  }
  for (vt_tab *p = pConn->pTabs; p && !*ppTab; p = p->pNextTab)
    if (sqlite3_stricmp(p->zName, zTab) == 0 && sqlite3_stricmp(p->zDb, zDb) == 0) *ppTab = p;
  sqlite3_free(zDb);
  if (!*ppTab) {
    *pzErr = sqlite3_mprintf("%s is not a csq table: load it with INSERT or .import", zName);
    return SQLITE_ERROR;
  }
  return SQLITE_OK;
}

/* Why this table cannot be loaded in bulk, or NULL. */
static char *refusal(vt_tab *p) {
  const vt_schema *s = &p->s;
  if (s->zRefused) return sqlite3_mprintf("%s", s->zRefused);
  return NULL;
}

static void import_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  vt_conn *pConn = sqlite3_user_data(ctx);
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  const char *zTable = (const char *)sqlite3_value_text(argv[0]);
  const char *zSrc = (const char *)sqlite3_value_text(argv[1]);
  const char *zOpts = argc > 2 ? (const char *)sqlite3_value_text(argv[2]) : NULL;
  imp_opts o;
  imp_load L;
  memset(&L, 0, sizeof(L));
  char *zErr = NULL, *zDevErr = NULL;
  sqlite3_stmt *pHold = NULL;
  int rc;
  if (!zTable || !zSrc) {
    sqlite3_result_error(ctx,
                         "csq_import(TABLE, FILE-OR-QUERY [, OPTIONS]): TABLE and the "
                         "source must not be NULL",
                         -1);
    return;
  }
  rc = parse_opts(zOpts, &o, &zErr);
  if (rc) goto done;
  rc = find_table(db, pConn, zTable, &L.pTab, &pHold, &zErr);
  if (rc) goto done;
  zErr = refusal(L.pTab);
  if (zErr) {
    rc = SQLITE_ERROR;
    goto done;
  }
  rc = vt_tab_writable(L.pTab);
  if (rc) {
    zErr = sqlite3_mprintf("%s", L.pTab->base.zErrMsg ? L.pTab->base.zErrMsg : "read-only");
    goto done;
  }
  L.db = db;
  L.pOpt = &o;
  L.pDev = L.pTab->pDev;
  L.nRg = (uint32_t)L.pTab->s.nRowGroup;
  int bInTxn = !sqlite3_get_autocommit(db);
  int bBusy = 0; /* a device transaction of this connection is open */
  for (vt_dev *d = pConn->pDevs; d; d = d->pNext) bBusy |= d->pTxn != NULL;
  if (!bInTxn && bBusy) {
    zErr = sqlite3_mprintf("table %s's device has a transaction of this connection open: finish "
                           "it first",
                           zTable);
    rc = SQLITE_ERROR;
    goto done;
  }
  rc = vt_check_bulk_begin(L.pTab, &L.bCheck);
  if (rc) {
    zErr = sqlite3_mprintf("%s", L.pTab->base.zErrMsg ? L.pTab->base.zErrMsg : sqlite3_errstr(rc));
    goto done;
  }
  rc = vt_numconv_new(db, &L.pConv);
  if (rc) goto done;
  L.aCol = sqlite3_malloc64(sizeof(csq_vec) * (size_t)(L.pTab->s.nCol + 1));
  if (!L.aCol) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  for (int c = 0; c <= L.pTab->s.nCol; c++) csq_vec_init(&L.aCol[c]);
  for (int c = 0; c <= L.pTab->s.nCol; c++) {
    if (csq_vec_reserve(&L.aCol[c], L.nRg, 0)) {
      rc = SQLITE_NOMEM;
      goto done;
    }
  }
  if (bInTxn) {
    /* inside BEGIN: a statement that writes the table (and changes
    ** nothing) makes SQLite count it in the transaction (xBegin now;
    ** xSync, xCommit, xRollback and savepoints later), then the load
    ** appends to the connection's device transaction */
    char *zSql = sqlite3_mprintf("DELETE FROM \"%w\".\"%w\" WHERE 0", L.pTab->zDb, L.pTab->zName);
    rc = zSql ? sqlite3_exec(db, zSql, NULL, NULL, NULL) : SQLITE_NOMEM;
    sqlite3_free(zSql);
    if (rc == SQLITE_OK) rc = vt_import_join(L.pTab, &L.mark, &L.t, &L.pStoreTab);
    if (rc) {
      zErr = sqlite3_mprintf("cannot join the transaction: %s",
                             L.pTab->base.zErrMsg ? L.pTab->base.zErrMsg : sqlite3_errmsg(db));
      L.t = NULL;
      goto done;
    }
    L.bJoined = 1;
  } else if (L.pTab->nMem > 1) {
    /* striped, outside BEGIN: a transaction of its own over every member,
    ** committed with the two-step commit (atomic across the devices) */
    rc = vt_import_join(L.pTab, &L.mark, &L.t, &L.pStoreTab);
    if (rc) {
      zErr = sqlite3_mprintf("%s", L.pTab->base.zErrMsg ? L.pTab->base.zErrMsg : "device error");
      vt_txn_rollback_all(pConn);
      vt_tab_txn_reset(L.pTab);
      L.t = NULL;
      goto done;
    }
    L.bJoined = L.bOwnTxn = 1;
  } else {
    rc = store_txn_begin(L.pDev->pStore, L.pDev->pQ, vt_busy_ms(pConn), &L.t, &zDevErr);
    if (rc) goto dev_error;
    L.pStoreTab = store_txn_table(L.t, L.pTab->zName);
  }
  if (!L.pStoreTab) {
    zErr = sqlite3_mprintf("table %s is no longer on its device %s", zTable, L.pDev->zKey);
    rc = SQLITE_ERROR;
    goto done;
  }
  int64_t iMax = 0;
  int bAny = 0;
  if (L.bJoined) {
    rc = vt_import_max_rowid(L.pTab, &iMax, &bAny);
    if (rc) {
      zErr = sqlite3_mprintf("%s", L.pTab->base.zErrMsg ? L.pTab->base.zErrMsg : "device error");
      goto done;
    }
  } else {
    rc = store_txn_max_rowid(L.t, L.pStoreTab, &iMax, &bAny, &zDevErr);
    if (rc) goto dev_error;
  }
  if (bAny && iMax == INT64_MAX) {
    zErr = sqlite3_mprintf("table %s has no rowids left", zTable);
    rc = SQLITE_FULL;
    goto done;
  }
  /* SQLite's next rowid: one above the largest, or with AUTOINCREMENT
  ** above any the table ever held */
  L.iNextRowid = bAny ? iMax + 1 : 1;
  if (L.pTab->s.iIpk >= 0 && L.pTab->s.aCol[L.pTab->s.iIpk].bAutoinc &&
      L.pStoreTab->nextRowid > L.iNextRowid)
    L.iNextRowid = L.pStoreTab->nextRowid;
  memset(&g_progress, 0, sizeof(g_progress));
  g_progress.tStart = now_s();
  g_progress.bRunning = 1;
  L.tLastReport = g_progress.tStart;
  rc = is_query(zSrc) ? load_query(&L, zSrc, &zErr) : load_csv(&L, zSrc, &zErr);
  if (L.q) {
    /* the rows still in the queue, then the thread's end */
    if (rc == SQLITE_OK) rc = drain(&L, DRAIN_ALL, &zErr);
    store_encq_free(L.q);
    L.q = NULL;
  }
  if (rc) goto done;
  if (L.bOwnTxn) {
    L.bOwnTxn = 0;
    rc = vt_txn_commit_all(pConn, &zDevErr);
    if (rc) vt_txn_rollback_all(pConn); /* what a failed commit left open */
    vt_tab_txn_reset(L.pTab);
    L.t = NULL;
    if (rc) goto dev_error;
    L.pTab->nRowEst += L.nRow;
    pConn->nImportRows += L.nRow;
    pConn->nImportSkipped += L.nSkip;
    pConn->nImportBytes += L.nByte;
    L.pTab->nWrite++;
  } else if (L.bJoined) {
    /* COMMIT or ROLLBACK decides */
    pConn->nImportRows += L.nRow;
    pConn->nImportSkipped += L.nSkip;
    pConn->nImportBytes += L.nByte;
  } else if (L.nRow > 0) {
    store_txn *t = L.t;
    L.t = NULL;
    rc = store_txn_commit(t, &zDevErr);
    vt_stmt_forget(pConn); /* the next statement reads the new rows */
    if (rc) goto dev_error;
    L.pTab->nRowEst += L.nRow;
    pConn->nImportRows += L.nRow;
    pConn->nImportSkipped += L.nSkip;
    pConn->nImportBytes += L.nByte;
    L.pTab->nWrite++; /* a kept join probe is stale */
  }
  goto done;
dev_error:
  zErr = sqlite3_mprintf("%s", zDevErr ? zDevErr : "device error");
  rc = vt_rc_from(rc);
done:
  free(zDevErr);
  if (L.q) store_encq_free(L.q);
  if (L.bOwnTxn) {
    vt_txn_rollback_all(pConn);
    vt_tab_txn_reset(L.pTab);
  } else if (L.bJoined && L.t) {
    /* not the load's own transaction: a failed load is undone in it */
    if (rc != SQLITE_OK && vt_import_undo(L.pTab, &L.mark) != SQLITE_OK && zErr) {
      char *z = sqlite3_mprintf("%s; undoing the rows loaded failed too: %s (ROLLBACK)", zErr,
                                L.pTab->base.zErrMsg ? L.pTab->base.zErrMsg : "?");
      sqlite3_free(zErr);
      zErr = z;
    }
  } else if (L.t) {
    store_txn_rollback(L.t);
  }
  if (L.aCol) {
    for (int c = 0; c <= L.pTab->s.nCol; c++) csq_vec_free(&L.aCol[c]);
    sqlite3_free(L.aCol);
  }
  vt_numconv_free(L.pConv);
  sqlite3_finalize(pHold);
  g_progress.bRunning = 0;
  g_progress.tEnd = now_s();
  if (rc == SQLITE_OK) {
    if (L.nSkip && o.bProgress)
      fprintf(stderr, "csq_import %s: skipped %lld bad rows; the first: %s\n", zTable,
              (long long)L.nSkip, L.zFirstSkip);
    sqlite3_result_int64(ctx, L.nRow);
  } else {
    vt_result_errorf(ctx, "csq_import(%s): %s", zTable, zErr ? zErr : sqlite3_errstr(rc));
    if (rc != SQLITE_ERROR) sqlite3_result_error_code(ctx, rc);
  }
  sqlite3_free(L.zFirstSkip);
  sqlite3_free(L.zRowsErr);
  sqlite3_free(zErr);
  sqlite3_free(o.zNull);
}

/* csq_import_progress(): the load in flight in this process, or the last
** one, as "rows=N,skipped=N,bytes=N,total=N,percent=P,seconds=S,running=0|1,
** by_sqlite=N" (by_sqlite: values of shapes csq leaves to SQLite to convert,
** vtab/affinity.c; a plain number there means the fast path is off); NULL
** before the first. */
static void progress_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc, (void)argv;
  if (g_progress.tStart == 0) return;
  int bRunning = g_progress.bRunning;
  uint64_t nByte = __atomic_load_n(&g_progress.nByte, __ATOMIC_RELAXED);
  uint64_t nTotal = g_progress.nTotal;
  double t = (bRunning ? now_s() : g_progress.tEnd) - g_progress.tStart;
  char *z = sqlite3_mprintf(
      "rows=%lld,skipped=%lld,bytes=%llu,total=%llu,percent=%.1f,seconds=%.3f,running=%d,"
      "by_sqlite=%llu",
      (long long)__atomic_load_n(&g_progress.nRow, __ATOMIC_RELAXED),
      (long long)__atomic_load_n(&g_progress.nSkip, __ATOMIC_RELAXED), (unsigned long long)nByte,
      (unsigned long long)nTotal, nTotal ? 100.0 * (double)nByte / (double)nTotal : 0.0, t,
      bRunning, (unsigned long long)__atomic_load_n(&g_progress.nSlow, __ATOMIC_RELAXED));
  sqlite3_result_text(ctx, z, -1, sqlite3_free);
}

int vt_import_register(sqlite3 *db, vt_conn *pConn) {
  /* DIRECTONLY: it reads files and writes tables, so no view or trigger of
  ** an untrusted schema may call it */
  int flags = SQLITE_UTF8 | SQLITE_DIRECTONLY;
  int rc = sqlite3_create_function(db, "csq_import", 2, flags, pConn, import_func, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_create_function(db, "csq_import", 3, flags, pConn, import_func, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_create_function(db, "csq_import_progress", 0, SQLITE_UTF8, pConn, progress_func,
                                 NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_create_function(db, "csq__import_rows", -1, flags, pConn, NULL, rows_step,
                                 rows_final);
  return rc;
}
