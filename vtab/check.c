/*
** vtab/check.c - DEFAULT and CHECK constraints of csq tables.
**
**   CREATE VIRTUAL TABLE a USING csq(y INTEGER CHECK(y > 0), w DEFAULT 5,
**                                    CONSTRAINT small CHECK(y < w));
**   INSERT INTO a(y) VALUES (3);   -- w is 5
**   INSERT INTO a(y) VALUES (-1);  -- error: CHECK constraint failed: y > 0
**   INSERT INTO a VALUES (9, 1);   -- error: CHECK constraint failed: small
**
** SQLite keeps neither the DEFAULT nor the CHECK clauses of a virtual
** table's declared schema, so csq applies them to every row written, before
** the row's other checks (vt_check_row, called by write.c), with SQLite's
** rules:
**
** DEFAULT. xUpdate gets a NULL for a column an INSERT leaves out, the same
** NULL as for one the INSERT gives as NULL. Which columns the INSERT names
** is read from the text of the running statement: the connection's busy
** statement that is an INSERT or REPLACE into this table, with its column
** list, DEFAULT VALUES or no list. A row an INSERT of a trigger writes comes
** from no statement of the connection; if a column with a DEFAULT gets NULL
** there, the write fails with an error rather than guess. A literal default
** is evaluated once, CURRENT_TIME/DATE/TIMESTAMP once per statement run, a
** parenthesised expression for every row. Under OR REPLACE a NULL in a NOT
** NULL column takes the column's default (INSERT and UPDATE), as in SQLite.
** A DEFAULT on the INTEGER PRIMARY KEY is never used, as in SQLite.
**
** CHECK. The table's expressions are compiled, once per table and
** connection, into one statement
**
**     SELECT (e1), (e2), ... FROM "csq_check_<address>" AS "<table>"
**
** over an eponymous virtual table (a module registered for the table, see
** row_module) declared exactly as the table and holding the one row being
** written, with the columns' affinity applied. Column references thus have
** the declared affinity and collation, as in SQLite's own evaluation, and
** a reference to the table by name works. A CHECK fails when its value is
** false (0), not when it is NULL. The error is SQLite's: "CHECK constraint
** failed: <name, or the expression>" with SQLITE_CONSTRAINT_CHECK, which
** SQLite itself turns into a skipped row under OR IGNORE and into ABORT under
** OR REPLACE (the module declares SQLITE_VTAB_CONSTRAINT_SUPPORT). NOT NULL
** is checked first, as in SQLite. A CHECK that reads the rowid of an INSERT
** that leaves it to the table fails with an error: csq picks a new rowid
** only after the row's checks. PRAGMA ignore_check_constraints turns CHECK
** off as in SQLite. Unlike SQLite, an UPDATE checks every CHECK, not only
** those that read a column it changes (xUpdate is not told which changed):
** the two differ only on a row that already fails a CHECK (one written with
** ignore_check_constraints on).
**
** At CREATE, vt_check_create refuses a constraint csq does not enforce (the
** schema's zRefused: UNIQUE, PRIMARY KEY other than INTEGER PRIMARY KEY,
** ...) and compiles every expression once, so that a CHECK naming an unknown
** column, holding a subquery or a parameter, or a DEFAULT that is not
** constant fails the CREATE, as CREATE TABLE does.
*/
#include <string.h>
#include "vtab/vtab.h"

/* When a column's default is evaluated again. */
#define DFLT_ONCE 0 /* a literal */
#define DFLT_STMT 1 /* CURRENT_TIME/DATE/TIMESTAMP: once per statement run */
#define DFLT_ROW  2 /* (expression): for every row */

typedef struct vt_dflt {
  sqlite3_stmt *pStmt; /* SELECT <default>, prepared at first use */
  sqlite3_value *pVal; /* its last value (owned), or NULL */
  uint64_t key;        /* the statement run pVal belongs to (DFLT_STMT)... */
  sqlite3_int64 msAt;  /* ... and when it was taken (ms, Julian) */
} vt_dflt;

/* The row module's client data (see row_module). */
typedef struct row_link {
  vt_rowcheck *pRc; /* NULL once the table's checks are freed */
} row_link;

struct vt_rowcheck {
  sqlite3 *db;
  vt_tab *pTab;
  char *zMod;            /* the row module's name, once registered */
  sqlite3_stmt *pCheck;  /* SELECT (e1), ... over the row, or NULL (no CHECK) */
  vt_dflt *aDflt;        /* per column */
  sqlite3_value **apArg; /* argv with defaults filled in (nCol + 2) */
  uint8_t *abNamed;      /* per column: the INSERT names it (2 * nCol: a scratch half) */
  csq_vec row;           /* the row being checked, one value per column, affinity applied */
  int64_t iRowid;        /* its rowid, if bRowid */
  int bRowid;
  int bReadRowid;        /* the CHECK asked for a rowid not known yet */
  int bArmed;            /* the row module shows the row (while pCheck runs) */
  row_link *pLink;       /* the row module's client data (freed by SQLite) */
  sqlite3_stmt *pIgnore; /* PRAGMA ignore_check_constraints */
};

/* ------------------------------------------------------------------------
** The row module: an eponymous virtual table holding the row being checked,
** and no row at any other time. Its client data is a row_link, which SQLite
** frees with the module once nothing uses it: a statement a user prepared
** over the module can outlive the csq table, which clears pRc.
*/
typedef struct row_vtab {
  sqlite3_vtab base; /* must be first */
  row_link *pLink;
} row_vtab;

typedef struct row_cursor {
  sqlite3_vtab_cursor base; /* must be first */
  int bEof;
} row_cursor;

static int row_connect(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                       sqlite3_vtab **ppVtab, char **pzErr) {
  row_link *pLink = pAux;
  (void)argc;
  (void)argv;
  if (!pLink->pRc) {
    *pzErr = sqlite3_mprintf("csq: the table this module checked rows for is gone");
    return SQLITE_ERROR;
  }
  int rc = sqlite3_declare_vtab(db, pLink->pRc->pTab->s.zDeclare);
  if (rc) {
    *pzErr = sqlite3_mprintf("csq: %s", sqlite3_errmsg(db));
    return rc;
  }
  row_vtab *v = sqlite3_malloc64(sizeof(*v));
  if (!v) return SQLITE_NOMEM;
  memset(v, 0, sizeof(*v));
  v->pLink = pLink;
  *ppVtab = &v->base;
  return SQLITE_OK;
}

static int row_disconnect(sqlite3_vtab *pVtab) {
  sqlite3_free(pVtab);
  return SQLITE_OK;
}

static int row_best_index(sqlite3_vtab *pVtab, sqlite3_index_info *pInfo) {
  (void)pVtab;
  pInfo->estimatedCost = 1;
  pInfo->estimatedRows = 1;
  return SQLITE_OK;
}

static int row_open(sqlite3_vtab *pVtab, sqlite3_vtab_cursor **ppCur) {
  (void)pVtab;
  row_cursor *c = sqlite3_malloc64(sizeof(*c));
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof(*c));
  *ppCur = &c->base;
  return SQLITE_OK;
}

static int row_close(sqlite3_vtab_cursor *pCur) {
  sqlite3_free(pCur);
  return SQLITE_OK;
}

static int row_filter(sqlite3_vtab_cursor *pCur, int idxNum, const char *idxStr, int argc,
                      sqlite3_value **argv) {
  (void)idxNum;
  (void)idxStr;
  (void)argc;
  (void)argv;
  vt_rowcheck *pRc = ((row_vtab *)pCur->pVtab)->pLink->pRc;
  ((row_cursor *)pCur)->bEof = !pRc || !pRc->bArmed;
  return SQLITE_OK;
}

static int row_next(sqlite3_vtab_cursor *pCur) {
  ((row_cursor *)pCur)->bEof = 1;
  return SQLITE_OK;
}

static int row_eof(sqlite3_vtab_cursor *pCur) {
  return ((row_cursor *)pCur)->bEof;
}

static int row_rowid(sqlite3_vtab_cursor *pCur, sqlite3_int64 *pRowid) {
  vt_rowcheck *pRc = ((row_vtab *)pCur->pVtab)->pLink->pRc;
  if (!pRc) return SQLITE_ERROR;
  if (!pRc->bRowid) pRc->bReadRowid = 1;
  *pRowid = pRc->bRowid ? pRc->iRowid : 0;
  return SQLITE_OK;
}

static int row_column(sqlite3_vtab_cursor *pCur, sqlite3_context *ctx, int i) {
  vt_rowcheck *pRc = ((row_vtab *)pCur->pVtab)->pLink->pRc;
  if (!pRc) return SQLITE_ERROR;
  if (i == pRc->pTab->s.iIpk) {
    if (pRc->bRowid)
      sqlite3_result_int64(ctx, pRc->iRowid);
    else
      pRc->bReadRowid = 1; /* and NULL */
  } else if (i >= 0 && (uint32_t)i < pRc->row.n) {
    vt_result_value(ctx, &pRc->row, (uint32_t)i);
  }
  return SQLITE_OK;
}

/* Eponymous only (no xCreate): it exists as soon as it is registered. */
static sqlite3_module row_module = {
    .iVersion = 0,
    .xCreate = NULL,
    .xConnect = row_connect,
    .xBestIndex = row_best_index,
    .xDisconnect = row_disconnect,
    .xDestroy = row_disconnect,
    .xOpen = row_open,
    .xClose = row_close,
    .xFilter = row_filter,
    .xNext = row_next,
    .xEof = row_eof,
    .xColumn = row_column,
    .xRowid = row_rowid,
};

/* ------------------------------------------------------------------------
** Compiling the expressions.
*/

/* Does SQL text z hold the keyword zKw outside strings and quoted names,
** at any depth of parentheses? */
static int has_keyword(const char *z, const char *zKw) {
  for (;;) {
    vt_tok t = vt_tok_next(&z);
    if (t.n <= 0) return 0;
    if (vt_tok_is(t, zKw)) return 1;
    if (t.n >= 2 && t.z[0] == '(') {
      char *zIn = sqlite3_mprintf("%.*s", t.n - 2, t.z + 1);
      int b = zIn ? has_keyword(zIn, zKw) : 0;
      sqlite3_free(zIn);
      if (b) return 1;
    }
  }
}

static int dflt_kind(const char *zDflt) {
  if (zDflt[0] == '(') return DFLT_ROW;
  if (sqlite3_strnicmp(zDflt, "CURRENT_", 8) == 0 || sqlite3_strnicmp(zDflt, "-CURRENT_", 9) == 0)
    return DFLT_STMT;
  return DFLT_ONCE;
}

/* Is column i's default one SQLite uses? (Never the rowid alias's.) */
static int has_default(const vt_schema *s, int i) {
  return s->aCol[i].zDflt && i != s->iIpk;
}

/* "column x: " for messages about column iCol, or "" (iCol < 0). */
static char *where_col(const vt_schema *s, int iCol) {
  return iCol >= 0 ? sqlite3_mprintf("column %s: ", s->aCol[iCol].zName) : sqlite3_mprintf("");
}

/* Check at CREATE that DEFAULT of column i is constant, as CREATE TABLE
** does: no column, no parameter, no subquery. Other errors (an unknown
** function, say) show when the default is used, as in SQLite. */
static int dflt_validate(vt_rowcheck *pRc, int i, char **pzErr) {
  const vt_col *c = &pRc->pTab->s.aCol[i];
  char *zSql = sqlite3_mprintf("SELECT %s", c->zDflt);
  if (!zSql) return SQLITE_NOMEM;
  sqlite3_stmt *pStmt = NULL;
  int rc = sqlite3_prepare_v2(pRc->db, zSql, -1, &pStmt, NULL);
  sqlite3_free(zSql);
  int bBad = has_keyword(c->zDflt, "SELECT") ||
             (rc == SQLITE_OK && sqlite3_bind_parameter_count(pStmt) > 0) ||
             (rc != SQLITE_OK && strstr(sqlite3_errmsg(pRc->db), "no such column"));
  if (rc != SQLITE_OK && strstr(sqlite3_errmsg(pRc->db), "syntax error")) {
    *pzErr = sqlite3_mprintf("csq: column %s: DEFAULT %s: %s", c->zName, c->zDflt,
                             sqlite3_errmsg(pRc->db));
  } else if (bBad) {
    *pzErr = sqlite3_mprintf("csq: column %s: default value of column [%s] is not constant",
                             c->zName, c->zName);
  }
  sqlite3_finalize(pStmt);
  if (*pzErr) return SQLITE_ERROR;
  return SQLITE_OK;
}

/* Register the row module and prepare the CHECK statement. CHECK i is also
** prepared alone, as SQLite resolves it: in a WHERE clause (no aggregate,
** no window function), without parameters or subqueries. */
static int check_compile(vt_rowcheck *pRc, char **pzErr) {
  vt_tab *p = pRc->pTab;
  const vt_schema *s = &p->s;
  pRc->zMod = sqlite3_mprintf("csq_check_%p", (void *)p);
  row_link *pLink = sqlite3_malloc64(sizeof(*pLink));
  if (!pRc->zMod || !pLink) {
    sqlite3_free(pLink);
    return SQLITE_NOMEM;
  }
  pLink->pRc = pRc;
  /* on failure SQLite frees pLink itself */
  int rc = sqlite3_create_module_v2(pRc->db, pRc->zMod, &row_module, pLink, sqlite3_free);
  if (rc) return rc;
  pRc->pLink = pLink;
  char *zFrom = sqlite3_mprintf("FROM \"%w\" AS \"%w\"", pRc->zMod, p->zName);
  sqlite3_str *pSql = sqlite3_str_new(pRc->db);
  sqlite3_str_appendall(pSql, "SELECT ");
  for (int i = 0; i < s->nCheck; i++)
    sqlite3_str_appendf(pSql, "%s(%s)", i ? ", " : "", s->aCheck[i].zExpr);
  sqlite3_str_appendf(pSql, " %s", zFrom);
  char *zSql = sqlite3_str_finish(pSql);
  if (!zFrom || !zSql) rc = SQLITE_NOMEM;
  for (int i = 0; rc == SQLITE_OK && i < s->nCheck; i++) {
    const vt_check *k = &s->aCheck[i];
    char *zOne = sqlite3_mprintf("SELECT 1 %s WHERE (%s)", zFrom, k->zExpr);
    sqlite3_stmt *pOne = NULL;
    const char *zWhy = NULL;
    if (!zOne) {
      rc = SQLITE_NOMEM;
      break;
    }
    rc = sqlite3_prepare_v2(pRc->db, zOne, -1, &pOne, NULL);
    if (rc)
      zWhy = sqlite3_errmsg(pRc->db);
    else if (has_keyword(k->zExpr, "SELECT"))
      zWhy = "subqueries prohibited in CHECK constraints";
    else if (sqlite3_bind_parameter_count(pOne) > 0)
      zWhy = "parameters prohibited in CHECK constraints";
    if (zWhy) {
      char *zCol = where_col(s, k->iCol);
      *pzErr = sqlite3_mprintf("csq: %sCHECK(%s): %s", zCol ? zCol : "", k->zExpr, zWhy);
      sqlite3_free(zCol);
      rc = SQLITE_ERROR;
    }
    sqlite3_finalize(pOne);
    sqlite3_free(zOne);
  }
  if (rc == SQLITE_OK) {
    rc = sqlite3_prepare_v3(pRc->db, zSql, -1, SQLITE_PREPARE_PERSISTENT, &pRc->pCheck, NULL);
    if (rc) *pzErr = sqlite3_mprintf("csq: CHECK constraints: %s", sqlite3_errmsg(pRc->db));
  }
  sqlite3_free(zFrom);
  sqlite3_free(zSql);
  return rc;
}

void vt_check_free(vt_tab *p) {
  vt_rowcheck *pRc = p->pCheck;
  if (!pRc) return;
  sqlite3_finalize(pRc->pCheck);
  sqlite3_finalize(pRc->pIgnore);
  for (int i = 0; pRc->aDflt && i < p->s.nCol; i++) {
    sqlite3_finalize(pRc->aDflt[i].pStmt);
    sqlite3_value_free(pRc->aDflt[i].pVal);
  }
  /* after the statement over it is gone: unregistering drops the row table
  ** (and pLink, unless a statement of the user's still reads it) */
  if (pRc->pLink) pRc->pLink->pRc = NULL;
  if (pRc->pLink) sqlite3_create_module_v2(pRc->db, pRc->zMod, NULL, NULL, NULL);
  sqlite3_free(pRc->zMod);
  sqlite3_free(pRc->aDflt);
  sqlite3_free(pRc->apArg);
  sqlite3_free(pRc->abNamed);
  csq_vec_free(&pRc->row);
  sqlite3_free(pRc);
  p->pCheck = NULL;
}

/* The table's vt_rowcheck, compiled. */
static int check_init(sqlite3 *db, vt_tab *p, char **pzErr) {
  if (p->pCheck) return SQLITE_OK;
  const vt_schema *s = &p->s;
  vt_rowcheck *pRc = sqlite3_malloc64(sizeof(*pRc));
  if (!pRc) return SQLITE_NOMEM;
  memset(pRc, 0, sizeof(*pRc));
  pRc->db = db;
  pRc->pTab = p;
  csq_vec_init(&pRc->row);
  p->pCheck = pRc;
  pRc->aDflt = sqlite3_malloc64(sizeof(vt_dflt) * (size_t)s->nCol);
  pRc->apArg = sqlite3_malloc64(sizeof(sqlite3_value *) * (size_t)(s->nCol + 2));
  pRc->abNamed = sqlite3_malloc64((size_t)s->nCol * 2);
  if (!pRc->aDflt || !pRc->apArg || !pRc->abNamed) {
    vt_check_free(p);
    return SQLITE_NOMEM;
  }
  memset(pRc->aDflt, 0, sizeof(vt_dflt) * (size_t)s->nCol);
  int rc = s->nCheck > 0 ? check_compile(pRc, pzErr) : SQLITE_OK;
  if (rc) vt_check_free(p);
  return rc;
}

int vt_check_create(sqlite3 *db, vt_tab *p, char **pzErr) {
  const vt_schema *s = &p->s;
  if (s->zRefused) {
    *pzErr = sqlite3_mprintf("%s", s->zRefused);
    return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  int bDflt = 0;
  for (int i = 0; i < s->nCol; i++) bDflt |= s->aCol[i].zDflt != NULL;
  if (s->nCheck == 0 && !bDflt) return SQLITE_OK;
  int rc = check_init(db, p, pzErr);
  for (int i = 0; rc == SQLITE_OK && i < s->nCol; i++)
    if (s->aCol[i].zDflt) rc = dflt_validate(p->pCheck, i, pzErr);
  vt_check_free(p); /* compiled again at the first write */
  return rc;
}

/* ------------------------------------------------------------------------
** Which columns the running INSERT names.
*/

/* If zSql is an INSERT or REPLACE into table zName (of schema zDb when it
** names one), set abNamed[i] for every column i it gives a value and
** return 1; else return 0. Only the statement's head is read:
** [WITH ...] INSERT [OR x] INTO [schema.]name [AS alias] [(columns)]. */
static int parse_insert(const char *zSql, const vt_schema *s, const char *zDb, const char *zName,
                        uint8_t *abNamed) {
  const char *z = zSql;
  vt_tok t = vt_tok_next(&z);
  if (vt_tok_is(t, "WITH")) {
    t = vt_tok_next(&z);
    if (vt_tok_is(t, "RECURSIVE")) t = vt_tok_next(&z);
    for (;;) {
      if (t.n <= 0) return 0; /* the common table's name */
      t = vt_tok_next(&z);
      if (t.n >= 2 && t.z[0] == '(') t = vt_tok_next(&z);
      if (!vt_tok_is(t, "AS")) return 0;
      t = vt_tok_next(&z);
      if (vt_tok_is(t, "NOT")) t = vt_tok_next(&z);
      if (vt_tok_is(t, "MATERIALIZED")) t = vt_tok_next(&z);
      if (!(t.n >= 2 && t.z[0] == '(')) return 0;
      t = vt_tok_next(&z);
      if (!(t.n == 1 && t.z[0] == ',')) break;
      t = vt_tok_next(&z);
    }
  }
  if (vt_tok_is(t, "INSERT")) {
    t = vt_tok_next(&z);
    if (vt_tok_is(t, "OR")) {
      vt_tok_next(&z);
      t = vt_tok_next(&z);
    }
  } else if (vt_tok_is(t, "REPLACE")) {
    t = vt_tok_next(&z);
  } else {
    return 0;
  }
  if (!vt_tok_is(t, "INTO")) return 0;
  vt_tok a = vt_tok_next(&z), b = {0, 0};
  t = vt_tok_next(&z);
  if (t.n == 1 && t.z[0] == '.') {
    b = vt_tok_next(&z);
    t = vt_tok_next(&z);
  }
  if (vt_tok_is(t, "AS")) {
    vt_tok_next(&z);
    t = vt_tok_next(&z);
  }
  char *zTab = vt_tok_ident(b.n > 0 ? b : a);
  char *zSchema = b.n > 0 ? vt_tok_ident(a) : NULL;
  int bMatch = zTab && sqlite3_stricmp(zTab, zName) == 0 &&
               (b.n <= 0 || (zSchema && sqlite3_stricmp(zSchema, zDb) == 0));
  sqlite3_free(zTab);
  sqlite3_free(zSchema);
  if (!bMatch) return 0;
  if (t.n >= 2 && t.z[0] == '(') {
    char *zList = sqlite3_mprintf("%.*s", t.n - 2, t.z + 1);
    if (!zList) return 0;
    memset(abNamed, 0, (size_t)s->nCol);
    const char *zc = zList;
    for (vt_tok c = vt_tok_next(&zc); c.n > 0; c = vt_tok_next(&zc)) {
      char *zCol = vt_tok_ident(c);
      for (int i = 0; zCol && i < s->nCol; i++)
        if (sqlite3_stricmp(zCol, s->aCol[i].zName) == 0) abNamed[i] = 1;
      sqlite3_free(zCol);
    }
    sqlite3_free(zList);
  } else {
    /* DEFAULT VALUES names none; VALUES, SELECT, WITH: every column */
    memset(abNamed, vt_tok_is(t, "DEFAULT") ? 0 : 1, (size_t)s->nCol);
  }
  return 1;
}

/* Fill pRc->abNamed from the one INSERT into the table the connection is
** running. Otherwise an error naming column iCol (whose default is due). */
static int insert_named(vt_rowcheck *pRc, int iCol) {
  vt_tab *p = pRc->pTab;
  const vt_schema *s = &p->s;
  int nFound = 0, bDiffer = 0;
  uint8_t *aOther = pRc->abNamed + s->nCol;
  for (sqlite3_stmt *x = sqlite3_next_stmt(pRc->db, NULL); x; x = sqlite3_next_stmt(pRc->db, x)) {
    const char *zSql = sqlite3_stmt_busy(x) ? sqlite3_sql(x) : NULL;
    if (!zSql || !parse_insert(zSql, s, p->zDb, p->zName, nFound ? aOther : pRc->abNamed)) continue;
    if (nFound++ && memcmp(aOther, pRc->abNamed, (size_t)s->nCol) != 0) bDiffer = 1;
  }
  if (nFound > 0 && !bDiffer) return SQLITE_OK;
  vt_set_error(&p->base,
               "csq: cannot apply DEFAULT of %s.%s: %s; give the column its value in the INSERT",
               p->zName, s->aCol[iCol].zName,
               nFound ? "several running INSERT statements into the table name different columns"
                      : "the row does not come from an INSERT statement on the table that csq "
                        "can read (an INSERT in a trigger?)");
  return SQLITE_ERROR;
}

/* The default value of column i, for this row (owned by pRc). */
static int dflt_value(vt_rowcheck *pRc, int i, sqlite3_value **ppVal) {
  vt_tab *p = pRc->pTab;
  vt_dflt *d = &pRc->aDflt[i];
  const char *zDflt = p->s.aCol[i].zDflt;
  int eKind = dflt_kind(zDflt);
  uint64_t key = eKind == DFLT_STMT ? vt_stmt_key(pRc->db) : 0;
  sqlite3_int64 msNow = 0;
  if (eKind == DFLT_STMT) {
    sqlite3_vfs *pVfs = sqlite3_vfs_find(NULL);
    if (pVfs && pVfs->iVersion >= 2 && pVfs->xCurrentTimeInt64)
      pVfs->xCurrentTimeInt64(pVfs, &msNow);
  }
  /* SQLite takes the time once per statement run. A run's key can repeat
  ** (a finalized statement's address, with the same run count, goes to
  ** the next one prepared), so a time is kept for one second at most: a
  ** later statement never gets a stale one */
  if (d->pVal && (eKind == DFLT_ONCE || (eKind == DFLT_STMT && key == d->key && key != 0 &&
                                         msNow - d->msAt >= 0 && msNow - d->msAt < 1000))) {
    *ppVal = d->pVal;
    return SQLITE_OK;
  }
  int rc = SQLITE_OK;
  if (!d->pStmt) {
    char *zSql = sqlite3_mprintf("SELECT %s", zDflt);
    if (!zSql) return SQLITE_NOMEM;
    rc = sqlite3_prepare_v3(pRc->db, zSql, -1, SQLITE_PREPARE_PERSISTENT, &d->pStmt, NULL);
    sqlite3_free(zSql);
  }
  if (rc == SQLITE_OK) {
    if (sqlite3_step(d->pStmt) == SQLITE_ROW) {
      sqlite3_value_free(d->pVal);
      d->pVal = sqlite3_value_dup(sqlite3_column_value(d->pStmt, 0));
      d->key = key;
      d->msAt = msNow;
      if (!d->pVal) rc = SQLITE_NOMEM;
    }
    int rc2 = sqlite3_reset(d->pStmt);
    if (rc == SQLITE_OK) rc = rc2;
  }
  if (rc) {
    if (rc != SQLITE_NOMEM)
      vt_set_error(&p->base, "csq: DEFAULT of %s.%s: %s", p->zName, p->s.aCol[i].zName,
                   sqlite3_errmsg(pRc->db));
    return rc;
  }
  *ppVal = d->pVal;
  return SQLITE_OK;
}

/* ------------------------------------------------------------------------
** A row.
*/

/* PRAGMA ignore_check_constraints, read for every row: a statement run
** cannot be told apart from the next one prepared at its address, and a
** PRAGMA between them would go unseen. */
static int checks_ignored(vt_rowcheck *pRc, int *pbIgnore) {
  int rc = SQLITE_OK;
  if (!pRc->pIgnore)
    rc = sqlite3_prepare_v3(pRc->db, "PRAGMA ignore_check_constraints", -1,
                            SQLITE_PREPARE_PERSISTENT, &pRc->pIgnore, NULL);
  if (rc) return rc;
  *pbIgnore = sqlite3_step(pRc->pIgnore) == SQLITE_ROW && sqlite3_column_int(pRc->pIgnore, 0);
  return sqlite3_reset(pRc->pIgnore);
}

/* Evaluate the CHECK constraints over the row in pRc->row (rowid iRowid
** if bGiven). */
static int check_run(vt_rowcheck *pRc, int bGiven, int64_t iRowid) {
  vt_tab *p = pRc->pTab;
  const vt_schema *s = &p->s;
  pRc->bRowid = bGiven;
  pRc->iRowid = iRowid;
  pRc->bReadRowid = 0;
  pRc->bArmed = 1;
  int iFail = -1;
  int rc = sqlite3_step(pRc->pCheck);
  if (rc == SQLITE_ROW) {
    for (int i = 0; i < s->nCheck && iFail < 0; i++) {
      /* false as SQLite's IF tests it: a non-NULL value that is 0 as a number */
      if (sqlite3_column_type(pRc->pCheck, i) != SQLITE_NULL &&
          sqlite3_column_double(pRc->pCheck, i) == 0.0)
        iFail = i;
    }
    rc = SQLITE_OK;
  } else if (rc == SQLITE_DONE) {
    rc = SQLITE_OK; /* cannot happen: the row table always has its row */
  }
  int rc2 = sqlite3_reset(pRc->pCheck);
  pRc->bArmed = 0;
  if (rc == SQLITE_OK) rc = rc2;
  if (rc) {
    if (rc != SQLITE_NOMEM) vt_set_error(&p->base, "%s", sqlite3_errmsg(pRc->db));
    return rc;
  }
  if (pRc->bReadRowid) {
    vt_set_error(&p->base,
                 "csq: a CHECK constraint of %s reads the rowid of the new row, which csq "
                 "assigns only after the row's checks; give %s a value in the INSERT",
                 p->zName, s->iIpk >= 0 ? s->aCol[s->iIpk].zName : "the rowid");
    return SQLITE_ERROR;
  }
  if (iFail >= 0) {
    vt_set_error(&p->base, "CHECK constraint failed: %s", s->aCheck[iFail].zName);
    return SQLITE_CONSTRAINT_CHECK;
  }
  return SQLITE_OK;
}

/* Evaluate the CHECK constraints over argv (rowid iRowid if bGiven). */
static int check_eval(vt_rowcheck *pRc, sqlite3_value **argv, int bGiven, int64_t iRowid) {
  const vt_schema *s = &pRc->pTab->s;
  csq_vec_reset(&pRc->row);
  int e = 0;
  for (int i = 0; i < s->nCol && e == 0; i++) {
    if (i == s->iIpk)
      e = csq_vec_push_null(&pRc->row);
    else
      e = vt_push_value(&pRc->row, argv[2 + i], s->aCol[i].aff);
  }
  if (e) return SQLITE_NOMEM;
  return check_run(pRc, bGiven, iRowid);
}

int vt_check_bulk_begin(vt_tab *p, int *pbCheck) {
  *pbCheck = 0;
  if (p->s.nCheck == 0) return SQLITE_OK;
  char *zErr = NULL;
  int rc = check_init(p->pConn->db, p, &zErr);
  if (rc) {
    if (zErr) vt_set_error(&p->base, "%s", zErr);
    sqlite3_free(zErr);
    return rc;
  }
  int bIgnore = 0;
  rc = checks_ignored(p->pCheck, &bIgnore);
  if (rc) {
    vt_set_error(&p->base, "csq: %s", sqlite3_errmsg(p->pConn->db));
    return rc;
  }
  *pbCheck = !bIgnore;
  return SQLITE_OK;
}

int vt_check_bulk_row(vt_tab *p, const csq_vec *aCol, uint32_t iRow) {
  vt_rowcheck *pRc = p->pCheck;
  const vt_schema *s = &p->s;
  csq_vec_reset(&pRc->row);
  int e = 0;
  for (int i = 0; i < s->nCol && e == 0; i++) {
    if (i == s->iIpk)
      e = csq_vec_push_null(&pRc->row);
    else
      e = csq_vec_append(&pRc->row, &aCol[i + 1], iRow, 1);
  }
  if (e) return SQLITE_NOMEM;
  return check_run(pRc, 1, aCol[0].aVal[iRow].i);
}

int vt_check_row(vt_tab *p, sqlite3_value ***pArgv, int bUpdate, int bGiven, int64_t iRowid) {
  const vt_schema *s = &p->s;
  if (s->zRefused) {
    vt_set_error(&p->base,
                 "%s; table %s was created by an older csq that ignored it, and takes no writes "
                 "(copy its rows into a table declared without it)",
                 s->zRefused, p->zName);
    return SQLITE_ERROR;
  }
  if (p->eDflt == 0) {
    /* looked at once: every row of an INSERT comes here */
    int bAny = 0;
    for (int i = 0; i < s->nCol && !bAny; i++) bAny = has_default(s, i);
    p->eDflt = bAny ? 2 : 1;
  }
  int bDflt = p->eDflt == 2;
  if (s->nCheck == 0 && !bDflt) return SQLITE_OK;
  sqlite3 *db = p->pConn->db;
  char *zErr = NULL;
  int rc = check_init(db, p, &zErr);
  if (rc) {
    if (zErr) vt_set_error(&p->base, "%s", zErr);
    sqlite3_free(zErr);
    return rc;
  }
  vt_rowcheck *pRc = p->pCheck;
  sqlite3_value **argv = *pArgv;
  int eConflict = sqlite3_vtab_on_conflict(db);
  int bNamed = 0; /* pRc->abNamed is filled */
  for (int i = 0; bDflt && i < s->nCol; i++) {
    if (!has_default(s, i) || sqlite3_value_type(argv[2 + i]) != SQLITE_NULL) continue;
    int bUse = eConflict == SQLITE_REPLACE && s->aCol[i].bNotNull;
    if (!bUse && !bUpdate) {
      if (!bNamed) {
        rc = insert_named(pRc, i);
        if (rc) return rc;
        bNamed = 1;
      }
      bUse = !pRc->abNamed[i];
    }
    if (!bUse) continue;
    sqlite3_value *pVal = NULL;
    rc = dflt_value(pRc, i, &pVal);
    if (rc) return rc;
    if (argv != pRc->apArg) {
      memcpy(pRc->apArg, argv, sizeof(sqlite3_value *) * (size_t)(s->nCol + 2));
      argv = pRc->apArg;
      *pArgv = argv;
    }
    argv[2 + i] = pVal;
  }
  int bIgnore = 0;
  if (s->nCheck > 0) {
    rc = checks_ignored(pRc, &bIgnore);
    if (rc) {
      vt_set_error(&p->base, "csq: %s", sqlite3_errmsg(db));
      return rc;
    }
  }
  if (s->nCheck == 0 || bIgnore) return SQLITE_OK; /* write.c checks NOT NULL */
  for (int i = 0; i < s->nCol; i++) {
    if (s->aCol[i].bNotNull && i != s->iIpk && sqlite3_value_type(argv[2 + i]) == SQLITE_NULL) {
      vt_set_error(&p->base, "NOT NULL constraint failed: %s.%s", p->zName, s->aCol[i].zName);
      return SQLITE_CONSTRAINT_NOTNULL;
    }
  }
  return check_eval(pRc, argv, bGiven, iRowid);
}
