/*
** vtab/cursor.c - reading csq tables: xBestIndex and the scan cursor.
**
** idxNum and idxStr (the plans and their grammar) are documented above
** vt_best_index; EXPLAIN QUERY PLAN shows them as
** "VIRTUAL TABLE INDEX idxNum:idxStr".
**
** The cursor holds references on the row groups it will read, taken at
** xFilter, so commits and writes by anyone while it runs do not disturb it.
** A striped table's cursor reads every member: a plain scan or lookup walks
** the members' row groups one after another; a device scan opens one
** dev_scan per member, all in flight at once, and takes their batches in
** turn.
** A row group's columns are fetched from the device (NVM Read commands) when
** the cursor reaches it, only the columns the statement uses (colUsed), and
** handed to SQLite straight from the decoded vectors.
** A device scan's program returns each row's number in its row group instead
** of its rowid, and after the first batch only the columns SQLite has read
** (update_omit): a rowid or column asked for later is read from its chunk
** (lazy_value), so the device sends what the statement reads, not what
** colUsed names (which includes the columns of exact, omitted constraints).
** With a pushed LIMIT the cursor stops at LIMIT + OFFSET rows; a device scan
** then runs in windows of row groups (1, 2, 4, ...) so that nothing past the
** window holding the last row is ever read. With a consumed ORDER BY the
** device keeps each row group's LIMIT + OFFSET best rows (a top-N section in
** the program), the cursor reads them into a bounded top-N heap and hands
** back its LIMIT + OFFSET best rows in order.
*/
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "vtab/vtab.h"
#include "device/format/program.h"
#include "device/format/value.h"
#include "device/host/scan.h"
#include "planner/filter.h"

/* ORDER BY ... LIMIT is consumed (a top-N in the cursor) only for at most
** this many rows (LIMIT + OFFSET) and sort keys; beyond, SQLite sorts. */
#define VT_TOPN_MAX    65536
#define VT_TOPN_MAXKEY 16
_Static_assert(VT_TOPN_MAXKEY <= CSQ_TOPN_MAX_KEYS && VT_TOPN_MAX <= CSQ_TOPN_MAX,
               "a consumed ORDER BY fits a device top-N");

typedef struct vt_cursor {
  sqlite3_vtab_cursor base; /* must be first */
  int nMem;                 /* the table's members (devices) */
  uint64_t stmtKey;         /* the statement run that opened it (vtab/stmt.c) */
  store_snap **aSnap;       /* per member: keeps committed row groups alive */
  const store_table **aTab; /* per member: table of aSnap[k], or a private copy */
  store_table **aTabCopy;   /* per member: the copy made of a transaction's working table */
  store_rg **apRg;          /* row groups to read (referenced), every member's */
  int *aRgMem;              /* member of apRg[i] */
  int nRg;
  int iRg; /* current row group; nRg = the buffer copy */
  uint32_t iRow;
  uint32_t nRow;       /* rows in the current row group or buffer */
  const uint8_t *aDel; /* deleted rows of the current source */
  csq_vec *aVec;       /* nCol + 1 vectors, [0] = rowids */
  uint8_t *aLoaded;    /* aVec[i] holds the current source's column */
  csq_vec *aBuf;       /* copy of the transaction's buffered rows */
  uint8_t *aBufDel;
  uint32_t nBuf;
  dev_scan **apScan; /* idxNum 2: the device program's scan on each member */
  int iScan;         /* member whose scan gives the next batch */
  csq_vec *aOut;     /* its output columns: rowids, then the used columns */
  int nOut;
  int *aOutOf;     /* nCol + 1: output index of aVec's slot, -1 if not fetched */
  int64_t iLookup; /* idxNum 1: the rowid sought */
  int bLookup;
  vt_probe *pProbe;       /* idxNum 3: the table, hashed on the probed column (probe.c) */
  const char *zProbePlan; /* idxStr of the plan that last looked pProbe up (SQLite's string:
                             compared by address only, never read) */
  int bProbe;             /* rows come from pProbe's hits */
  uint32_t iHit;
  int bEof;
  uint64_t colUsed;
  /* pushed LIMIT/OFFSET (see vt_best_index): */
  int64_t nLeft;  /* rows still to hand to SQLite, this one included; -1: no cap */
  int64_t nSkip;  /* of those, the first rows SQLite drops for OFFSET (host scans do
                     not read a row group made only of them) */
  uint8_t *pProg; /* capped device scan: its program, for the next window */
  size_t nProg;
  int *aWinNext; /* per member: first row group of its next window, -1 none */
  int *aWinLen;  /* per member: row groups in its next window */
  int *aWinBase; /* per member: index in its table of its scan's first row group */
  /* device scans with row numbers (see device_filter): */
  int bRowNum;
  const uint32_t *aRowNum;       /* the current batch's row numbers in its row group */
  const store_rg *pBatchRg;      /* the current batch's row group */
  int iBatchMem;                 /* and its member */
  uint64_t mAsked;               /* outputs (the first 64) SQLite has read so far */
  uint64_t mOmit;                /* outputs left out of the row groups started since */
  const store_rg **apLazyRg;     /* nCol + 1: row group whose chunk aVec[i] holds, read
                                    because the batch left column i out */
  int nKey;                      /* consumed ORDER BY: sort keys (0: none) */
  int aKeyChunk[VT_TOPN_MAXKEY]; /* chunk of each key: 0 rowid, 1 + i column i */
  uint8_t aKeyDesc[VT_TOPN_MAXKEY];
} vt_cursor;

/* ---- xBestIndex ----------------------------------------------------------
**
** Plans (idxNum), and idxStr, which EXPLAIN QUERY PLAN shows as
** "VIRTUAL TABLE INDEX idxNum:idxStr":
**   0 "scan;cols=HEX"        every live row; SQLite checks the constraints
**   1 "rowid-eq;cols=HEX"    argv[0] is the rowid (or its INTEGER PRIMARY KEY
**                            alias); row groups pruned by their rowid range
**   2 "device;cols=HEX;T;T..." the terms T run on the device as a program
**                            (planner/filter.c); argv[i] is term i's value
**   3 "probe;cols=HEX;cN"    a join probe: argv[0] is the value that column
**                            N-1 must equal; the first call reads the table
**                            once into a hash (vtab/probe.c), every call is
**                            a lookup. Chosen for an equality on a numeric
**                            column whose right side is not a constant (the
**                            inner table of a join), BINARY collation, tables
**                            of up to VT_PROBE_MAX_ROWS rows; not omitted,
**                            so SQLite checks it again
** cols is colUsed: the columns the statement reads (bit 63: all from 63 on).
** A term is "c<chunk>:<op>:<flags>:<aff>": chunk 0 the rowid, 1+c column c;
** op a CSQ_OP_* name; flags the CSQ_TF_* bits in hex; aff the affinity
** applied to its values (A none, B text, C numeric).
** Plans 0 and 2 may end with a pushed LIMIT, after the terms:
**   ";limit=N|?"               argv[nTerm] is the LIMIT value (N: the literal
**                              of the statement, ?: an expression)
**   ";offset=N|?"              argv[nTerm + 1] is the OFFSET value
**   ";order=cK:asc|desc,..."   ORDER BY consumed: the rows come back sorted on
**                              those chunks (top-N of LIMIT + OFFSET rows)
** so a whole plan reads, for example,
**   "device;cols=7;c1:ge:0:C;limit=10;offset=?;order=c2:desc".
**
** Which constraints go to the device, and which are exact (omit: SQLite
** does not check them again):
**   comparisons (= < <= > >= != IS IS NOT) on a column of INTEGER, REAL or
**     NUMERIC affinity, or the rowid: exact, the value converted by numeric
**     affinity as SQLite's comparison rules do whatever the right side is;
**   the same on a TEXT/BLOB column only when the right side is a constant
**     (sqlite3_vtab_rhs_value): then no affinity of the right side can
**     convert the column's values; exact;
**   IS NULL, IS NOT NULL: exact;
**   IN, with every value in one xFilter (sqlite3_vtab_in): pushed, not
**     marked exact, so that a list longer than a program holds can be left
**     to SQLite; on a TEXT or untyped column only when every value is TEXT,
**     BLOB or NULL (keep_term: SQLite may convert a number or the column's
**     value where the device would not);
**   LIKE, GLOB: pushed, not exact (LIKE runs case-insensitively, a superset
**     when PRAGMA case_sensitive_like is on), so SQLite checks again;
**   only with BINARY, NOCASE or RTRIM collation; anything else stays with
**     SQLite.
** LIMIT/OFFSET (SQLite 3.38 on) are pushed only when SQLite will not drop
** any row the cursor returns before counting it (plan_limit has the rules:
** every WHERE term offered, usable, pushed and exact; ORDER BY absent or
** consumed). SQLite still applies both itself: the cursor stops after
** LIMIT + OFFSET rows and SQLite skips the OFFSET ones (OFFSET is never
** omitted: SQLite 3.40 offers it to each arm of a compound SELECT, whose
** arms share one offset counter).
** pushdown=auto pushes only for tables of VT_PUSH_MIN_ROWS rows or more
** (small tables are cheaper to filter on the host from cached blocks);
** pushdown=always and never force the choice. xBestIndex has no side
** effects: it only reads the row count of the last look at the table.
*/

static const char *const azOp[] = {"",        "eq",      "ne", "lt",    "le",
                                   "gt",      "ge",      "is", "isnot", "isnull",
                                   "notnull", "between", "in", "like",  "glob"};

static int map_op(unsigned char op) {
  switch (op) {
  case SQLITE_INDEX_CONSTRAINT_EQ:
    return CSQ_OP_EQ;
  case SQLITE_INDEX_CONSTRAINT_NE:
    return CSQ_OP_NE;
  case SQLITE_INDEX_CONSTRAINT_LT:
    return CSQ_OP_LT;
  case SQLITE_INDEX_CONSTRAINT_LE:
    return CSQ_OP_LE;
  case SQLITE_INDEX_CONSTRAINT_GT:
    return CSQ_OP_GT;
  case SQLITE_INDEX_CONSTRAINT_GE:
    return CSQ_OP_GE;
  case SQLITE_INDEX_CONSTRAINT_IS:
    return CSQ_OP_IS;
  case SQLITE_INDEX_CONSTRAINT_ISNOT:
    return CSQ_OP_ISNOT;
  case SQLITE_INDEX_CONSTRAINT_ISNULL:
    return CSQ_OP_ISNULL;
  case SQLITE_INDEX_CONSTRAINT_ISNOTNULL:
    return CSQ_OP_NOTNULL;
  case SQLITE_INDEX_CONSTRAINT_LIKE:
    return CSQ_OP_LIKE;
  case SQLITE_INDEX_CONSTRAINT_GLOB:
    return CSQ_OP_GLOB;
  default:
    return 0;
  }
}

void vt_note_table(vt_tab *p, store_table *const *aTab, int nTab) {
  int64_t nLive = 0;
  int nRg = 0;
  for (int k = 0; k < nTab; k++)
    for (int g = 0; g < aTab[k]->nRg; g++, nRg++)
      nLive += aTab[k]->apRg[g]->nRow - aTab[k]->apRg[g]->nDel;
  p->nRowEst = nLive;
  if (nRg == p->nZoneRg && p->aZone) return; /* an estimate: the same shape will do */
  int nChunk = p->s.nCol + 1;
  csq_zone *a = sqlite3_realloc64(p->aZone, sizeof(csq_zone) * (size_t)nChunk);
  p->nZoneRg = 0;
  if (!a) return; /* xBestIndex falls back to fixed guesses */
  p->aZone = a;
  for (int c = 0; c < nChunk; c++) {
    int bFirst = 1;
    for (int k = 0; k < nTab; k++)
      for (int g = 0; g < aTab[k]->nRg; g++) {
        const csq_zone *z = &aTab[k]->apRg[g]->aChunk[c].zone;
        if (bFirst)
          a[c] = *z;
        else
          csq_zone_merge(&a[c], z);
        bFirst = 0;
      }
  }
  p->nZoneRg = nRg;
}

/* The first 8 bytes of a string as a number, for interpolating text. */
static double text_key(const unsigned char *z, int n) {
  double d = 0;
  for (int i = 0; i < 8; i++) d = d * 256.0 + (i < n ? z[i] : 0);
  return d;
}

/*
** The fraction of the table's rows below (or at) the constant pRhs, by
** interpolating within the column's merged zone map (uniform values
** assumed): numbers by value, text by its first 8 bytes. -1 when the zone
** or the value does not allow it.
*/
static double zone_frac(const vt_tab *p, int iChunk, sqlite3_value *pRhs, int bNumeric) {
  if (!p->aZone || p->nZoneRg == 0 || !pRhs) return -1;
  const csq_zone *z = &p->aZone[iChunk];
  int t = bNumeric ? sqlite3_value_numeric_type(pRhs) : sqlite3_value_type(pRhs);
  double lo, hi, x;
  if ((t == SQLITE_INTEGER || t == SQLITE_FLOAT) &&
      (z->clsMask & ((1u << CSQ_INT) | (1u << CSQ_REAL))) &&
      !(z->clsMask & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB)))) {
    lo = z->rMin;
    hi = z->rMax;
    x = sqlite3_value_double(pRhs);
  } else if (t == SQLITE_TEXT && z->clsMask == (1u << CSQ_TEXT) && z->nMinTxt && z->nMaxTxt) {
    lo = text_key((const unsigned char *)z->zMinTxt, z->nMinTxt);
    hi = text_key((const unsigned char *)z->zMaxTxt, z->nMaxTxt);
    x = text_key(sqlite3_value_text(pRhs), sqlite3_value_bytes(pRhs));
  } else {
    return -1;
  }
  if (!(lo <= hi) || !isfinite(lo) || !isfinite(hi) || !isfinite(x)) return -1;
  if (x < lo) return 0;
  if (x >= hi) return 1;
  return hi > lo ? (x - lo) / (hi - lo) : 0.5;
}

/* Decide one constraint: returns 1 and fills the term text if it is pushed.
** *pbEst says whether *pSel came from the zone maps rather than a guess. */
static int plan_term(vt_tab *p, sqlite3_index_info *pInfo, int i, sqlite3_str *pTerms, int *pbOmit,
                     double *pSel, int *pbEst) {
  const struct sqlite3_index_constraint *c = &pInfo->aConstraint[i];
  int op = map_op(c->op);
  if (!op) return 0;
  int bRowid = c->iColumn < 0 || c->iColumn == p->s.iIpk;
  int iChunk = bRowid ? 0 : c->iColumn + 1;
  char aff = bRowid ? VT_AFF_INTEGER : p->s.aCol[c->iColumn].aff;
  int bNumeric = aff >= VT_AFF_NUMERIC;
  int flags = 0;
  const char *zColl = sqlite3_vtab_collation(pInfo, i);
  if (zColl && sqlite3_stricmp(zColl, "NOCASE") == 0)
    flags = CSQ_TF_NOCASE;
  else if (zColl && sqlite3_stricmp(zColl, "RTRIM") == 0)
    flags = CSQ_TF_RTRIM;
  else if (zColl && sqlite3_stricmp(zColl, "BINARY") != 0)
    return 0;
  char cAff = PL_AFF_NONE;
  int bOmit = 1;
  double sel = 0.3;
  sqlite3_value *pRhs = NULL;
  int bConst = sqlite3_vtab_rhs_value(pInfo, i, &pRhs) == SQLITE_OK;
  int bIn = op == CSQ_OP_EQ && sqlite3_vtab_in(pInfo, i, -1); /* an IN list, values at xFilter */
  switch (op) {
  case CSQ_OP_ISNULL:
    sel = 0.1;
    break;
  case CSQ_OP_NOTNULL:
    sel = 0.9;
    break;
  case CSQ_OP_LIKE:
  case CSQ_OP_GLOB:
    if (flags) return 0;
    if (p->pConn->bLikeBlob) flags |= CSQ_TF_BLOB_TEXT;
    cAff = PL_AFF_TEXT;
    bOmit = 0;
    sel = 0.25;
    break;
  default:
    if (bNumeric)
      cAff = PL_AFF_NUMERIC;
    else if (bIn)
      cAff = PL_AFF_NONE; /* pushed only if every value is TEXT, BLOB or NULL (keep_term) */
    else if (bConst)
      cAff = aff == VT_AFF_TEXT ? PL_AFF_TEXT : PL_AFF_NONE;
    else
      return 0;
    if (bIn) {
      sqlite3_vtab_in(pInfo, i, 1); /* every IN value in one xFilter */
      op = CSQ_OP_IN;
      bOmit = 0; /* a list too long for a program is left to SQLite (keep_term) */
      sel = 0.2;
    } else if (op == CSQ_OP_EQ || op == CSQ_OP_IS) {
      sel = bRowid ? 0.0001 : 0.05;
    } else if (op == CSQ_OP_NE || op == CSQ_OP_ISNOT) {
      sel = 0.9;
    }
  }
  *pbEst = 0;
  if (bConst && !flags &&
      (op == CSQ_OP_LT || op == CSQ_OP_LE || op == CSQ_OP_GT || op == CSQ_OP_GE)) {
    double f = zone_frac(p, iChunk, pRhs, bNumeric);
    if (f >= 0) {
      sel = op == CSQ_OP_LT || op == CSQ_OP_LE ? f : 1 - f;
      *pbEst = 1;
    }
  }
  sqlite3_str_appendf(pTerms, ";c%d:%s:%x:%c", iChunk, azOp[op], flags, cAff);
  *pbOmit = bOmit;
  *pSel = sel;
  return 1;
}

#ifdef SQLITE_INDEX_CONSTRAINT_LIMIT
static int is_limit_op(unsigned char op) {
  return op == SQLITE_INDEX_CONSTRAINT_LIMIT || op == SQLITE_INDEX_CONSTRAINT_OFFSET;
}
#endif

/*
** Push LIMIT/OFFSET, and consume ORDER BY with them, if that is safe for a
** plan (0 or 2) whose terms took argv[0..nArg). On success assigns their
** argv slots, appends the ";limit...;offset...;order..." part of the plan to
** pStr, may set orderByConsumed, and returns LIMIT + OFFSET when both are
** literals (for the estimates), else 0 with *pbPushed set; not pushed:
** *pbPushed = 0.
**
** SQLite 3.40 offers LIMIT when every WHERE term has a column of this table
** on its left and ORDER BY (if any) names only its columns. Pushing is safe
** only when SQLite keeps every row the cursor returns, so:
**   - every other constraint is usable, pushed, and exact (omit);
**   - every WHERE term reached xBestIndex: "a = b" or "a < b + 1" (both
**     sides this table) pass SQLite's test but are never offered. The
**     constraints' iTermOffset (SQLite's index of the term in its WHERE
**     list, which lists LIMIT/OFFSET last) must then be exactly 0..n-1 for
**     the n other constraints, and n, n+1 for LIMIT and OFFSET: a gap is a
**     term this table never saw (or a parent of split terms, such as a
**     vector "(a,b) = (1,2)": declined too);
**   - no bound (<=, >=) whose right side is not a literal: a row value
**     "(a,b) > (1,2)" reaches us as "a >= 1", which SQLite checks again
**     in full whatever omit says;
**   - ORDER BY absent, or consumed: only for a literal LIMIT (and OFFSET)
**     of at most VT_TOPN_MAX rows, at most VT_TOPN_MAXKEY keys, and a table
**     declared without COLLATE (the cursor sorts BINARY; SQLite offers an
**     ORDER BY only on plain columns in their declared collation).
** Anything unsure declines: SQLite then applies LIMIT after its own checks.
*/
static int64_t plan_limit(const vt_tab *p, sqlite3_index_info *pInfo, int nArg, sqlite3_str *pStr,
                          int *pbPushed) {
  *pbPushed = 0;
#ifdef SQLITE_INDEX_CONSTRAINT_LIMIT
  int iLim = -1, iOff = -1, nOther = 0;
  for (int i = 0; i < pInfo->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &pInfo->aConstraint[i];
    if (!is_limit_op(c->op)) {
      nOther++;
      continue;
    }
    int *pi = c->op == SQLITE_INDEX_CONSTRAINT_LIMIT ? &iLim : &iOff;
    if (*pi >= 0 || !c->usable) return 0;
    *pi = i;
  }
  if (iLim < 0 || nOther > 64) return 0;
  uint64_t mSeen = 0;
  int nLimOps = iOff >= 0 ? 2 : 1;
  for (int i = 0; i < pInfo->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &pInfo->aConstraint[i];
    int off = c->iTermOffset;
    if (is_limit_op(c->op)) {
      /* right after the other terms: no term between them either */
      if (off < nOther || off >= nOther + nLimOps) return 0;
      continue;
    }
    if (!c->usable || pInfo->aConstraintUsage[i].argvIndex <= 0 || !pInfo->aConstraintUsage[i].omit)
      return 0;
    if (off < 0 || off >= nOther || ((mSeen >> off) & 1)) return 0;
    mSeen |= (uint64_t)1 << off;
    sqlite3_value *pRhs = NULL;
    if ((c->op == SQLITE_INDEX_CONSTRAINT_LE || c->op == SQLITE_INDEX_CONSTRAINT_GE) &&
        sqlite3_vtab_rhs_value(pInfo, i, &pRhs) != SQLITE_OK)
      return 0;
  }
  /* the literal values, if the statement has them */
  int64_t nLim = -1, nOff = 0;
  int bLit = 1;
  sqlite3_value *v = NULL;
  if (sqlite3_vtab_rhs_value(pInfo, iLim, &v) == SQLITE_OK &&
      sqlite3_value_type(v) == SQLITE_INTEGER)
    nLim = sqlite3_value_int64(v);
  else
    bLit = 0;
  if (iOff >= 0) {
    v = NULL;
    if (sqlite3_vtab_rhs_value(pInfo, iOff, &v) == SQLITE_OK &&
        sqlite3_value_type(v) == SQLITE_INTEGER)
      nOff = sqlite3_value_int64(v);
    else
      bLit = 0;
  }
  if (bLit && (nLim < 0 || nOff < 0)) bLit = 0; /* SQLite gives these as expressions */
  int64_t nCap = bLit ? nLim + nOff : 0;        /* both below 2^31: no overflow */
  if (pInfo->nOrderBy > 0) {
    if (!bLit || nCap > VT_TOPN_MAX || pInfo->nOrderBy > VT_TOPN_MAXKEY ||
        sqlite3_strlike("%COLLATE%", p->s.zDeclare, 0) == 0)
      return 0;
    for (int k = 0; k < pInfo->nOrderBy; k++)
      if (pInfo->aOrderBy[k].iColumn >= p->s.nCol) return 0;
  }
  pInfo->aConstraintUsage[iLim].argvIndex = nArg + 1;
  pInfo->aConstraintUsage[iLim].omit = 0;
  if (bLit)
    sqlite3_str_appendf(pStr, ";limit=%lld", (long long)nLim);
  else
    sqlite3_str_appendall(pStr, ";limit=?");
  if (iOff >= 0) {
    pInfo->aConstraintUsage[iOff].argvIndex = nArg + 2;
    pInfo->aConstraintUsage[iOff].omit = 0; /* SQLite skips them (see the banner) */
    if (bLit)
      sqlite3_str_appendf(pStr, ";offset=%lld", (long long)nOff);
    else
      sqlite3_str_appendall(pStr, ";offset=?");
  }
  for (int k = 0; k < pInfo->nOrderBy; k++) {
    int iCol = pInfo->aOrderBy[k].iColumn;
    int iChunk = iCol < 0 || iCol == p->s.iIpk ? 0 : iCol + 1;
    sqlite3_str_appendf(pStr, "%s%d:%s", k ? ",c" : ";order=c", iChunk,
                        pInfo->aOrderBy[k].desc ? "desc" : "asc");
  }
  if (pInfo->nOrderBy > 0) pInfo->orderByConsumed = 1;
  *pbPushed = 1;
  return nCap;
#else
  (void)p;
  (void)pInfo;
  (void)nArg;
  (void)pStr;
  return 0;
#endif
}

int vt_best_index(sqlite3_vtab *pVtab, sqlite3_index_info *pInfo) {
  vt_tab *p = (vt_tab *)pVtab;
  double nRow = p->nRowEst > 0 ? (double)p->nRowEst : 1.0;
  unsigned long long colUsed = (unsigned long long)pInfo->colUsed;
  int bPush = p->s.ePush == VT_PUSH_ALWAYS ||
              (p->s.ePush == VT_PUSH_AUTO && p->nRowEst >= VT_PUSH_MIN_ROWS);
  int iEq = -1;
  for (int i = 0; i < pInfo->nConstraint && !bPush; i++) {
    const struct sqlite3_index_constraint *c = &pInfo->aConstraint[i];
    if (c->usable && c->op == SQLITE_INDEX_CONSTRAINT_EQ &&
        (c->iColumn == -1 || (p->s.iIpk >= 0 && c->iColumn == p->s.iIpk))) {
      iEq = i;
      break;
    }
  }
  int iProbe = -1;
  for (int i = 0; i < pInfo->nConstraint && iEq < 0 && p->nRowEst <= VT_PROBE_MAX_ROWS; i++) {
    const struct sqlite3_index_constraint *c = &pInfo->aConstraint[i];
    sqlite3_value *pRhs = NULL;
    const char *zColl = sqlite3_vtab_collation(pInfo, i);
    if (!c->usable || c->op != SQLITE_INDEX_CONSTRAINT_EQ || c->iColumn < 0 ||
        c->iColumn == p->s.iIpk || p->s.aCol[c->iColumn].aff < VT_AFF_NUMERIC ||
        (zColl && sqlite3_stricmp(zColl, "BINARY") != 0) || sqlite3_vtab_in(pInfo, i, -1) ||
        sqlite3_vtab_rhs_value(pInfo, i, &pRhs) == SQLITE_OK)
      continue;
    iProbe = i;
    break;
  }
  if (iEq < 0 && iProbe >= 0) {
    /* build once (about a scan), then a hash lookup per call */
    pInfo->idxNum = 3;
    pInfo->aConstraintUsage[iProbe].argvIndex = 1;
    pInfo->aConstraintUsage[iProbe].omit = 0;
    pInfo->estimatedCost = 20.0 + nRow / 1000.0;
    pInfo->estimatedRows = nRow < 10 ? (sqlite3_int64)nRow : 10;
    pInfo->idxStr =
        sqlite3_mprintf("probe;cols=%llx;c%d", colUsed, pInfo->aConstraint[iProbe].iColumn + 1);
  } else if (iEq >= 0) {
    pInfo->idxNum = 1;
    pInfo->aConstraintUsage[iEq].argvIndex = 1;
    pInfo->aConstraintUsage[iEq].omit = 1;
    pInfo->estimatedCost = 10.0;
    pInfo->estimatedRows = 1;
    pInfo->idxFlags = SQLITE_INDEX_SCAN_UNIQUE;
    pInfo->idxStr = sqlite3_mprintf("rowid-eq;cols=%llx", colUsed);
  } else {
    sqlite3_str *pTerms = sqlite3_str_new(NULL);
    int nArg = 0, bAllEst = 1;
    double sel = 1.0;
    for (int i = 0; i < pInfo->nConstraint && bPush; i++) {
      int bOmit = 0, bEst = 0;
      double s1 = 1.0;
      if (!pInfo->aConstraint[i].usable || !plan_term(p, pInfo, i, pTerms, &bOmit, &s1, &bEst))
        continue;
      pInfo->aConstraintUsage[i].argvIndex = ++nArg;
      pInfo->aConstraintUsage[i].omit = (unsigned char)bOmit;
      sel *= s1;
      bAllEst &= bEst;
    }
    char *zTerms = sqlite3_str_finish(pTerms);
    if (!zTerms && nArg) return SQLITE_NOMEM;
    char zKeeps[40] = "";
    if (nArg > 0 && bAllEst && p->s.ePush == VT_PUSH_AUTO && sel > VT_PUSH_MAX_SEL) {
      /* the filter keeps most rows: the device would send back nearly the
      ** whole (decoded) columns, while a host scan reads them compressed */
      for (int i = 0; i < pInfo->nConstraint; i++) {
        pInfo->aConstraintUsage[i].argvIndex = 0;
        pInfo->aConstraintUsage[i].omit = 0;
      }
      nArg = 0;
      sqlite3_snprintf(sizeof(zKeeps), zKeeps, ";keeps~%d%%", (int)(sel * 100 + 0.5));
    }
    sqlite3_str *pLim = sqlite3_str_new(NULL);
    int bLimit = 0;
    int64_t nCap = plan_limit(p, pInfo, nArg, pLim, &bLimit);
    char *zLim = sqlite3_str_finish(pLim);
    if (!zLim && bLimit) {
      sqlite3_free(zTerms);
      return SQLITE_NOMEM;
    }
    if (nArg > 0) {
      double nOut = nRow * sel < 1 ? 1 : nRow * sel;
      if (nCap > 0 && nOut > (double)nCap) nOut = (double)nCap;
      pInfo->idxNum = 2;
      pInfo->estimatedCost = 50.0 + nRow * 0.02 + nOut;
      pInfo->estimatedRows = (sqlite3_int64)nOut;
      pInfo->idxStr =
          sqlite3_mprintf("device;cols=%llx%s%s", colUsed, zTerms ? zTerms : "", zLim ? zLim : "");
    } else {
      pInfo->idxNum = 0;
      pInfo->estimatedCost = 100.0 + nRow;
      pInfo->estimatedRows = (sqlite3_int64)(nCap > 0 && nRow > (double)nCap ? (double)nCap : nRow);
      pInfo->idxStr = sqlite3_mprintf("scan;cols=%llx%s%s", colUsed, zKeeps, zLim ? zLim : "");
    }
    sqlite3_free(zTerms);
    sqlite3_free(zLim);
  }
  pInfo->needToFreeIdxStr = 1;
  return pInfo->idxStr ? SQLITE_OK : SQLITE_NOMEM;
}

int vt_open(sqlite3_vtab *pVtab, sqlite3_vtab_cursor **ppCur) {
  vt_tab *p = (vt_tab *)pVtab;
  vt_cursor *c = sqlite3_malloc64(sizeof(*c));
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof(*c));
  c->aVec = sqlite3_malloc64(sizeof(csq_vec) * (size_t)(p->s.nCol + 1));
  c->aLoaded = sqlite3_malloc64((size_t)p->s.nCol + 1);
  c->aOutOf = sqlite3_malloc64(sizeof(int) * (size_t)(p->s.nCol + 1));
  size_t nMem = (size_t)p->nMem;
  c->nMem = p->nMem;
  c->aSnap = sqlite3_malloc64(sizeof(store_snap *) * nMem);
  c->aTab = sqlite3_malloc64(sizeof(store_table *) * nMem);
  c->aTabCopy = sqlite3_malloc64(sizeof(store_table *) * nMem);
  c->apScan = sqlite3_malloc64(sizeof(dev_scan *) * nMem);
  c->aWinNext = sqlite3_malloc64(sizeof(int) * nMem);
  c->aWinLen = sqlite3_malloc64(sizeof(int) * nMem);
  c->aWinBase = sqlite3_malloc64(sizeof(int) * nMem);
  c->apLazyRg = sqlite3_malloc64(sizeof(store_rg *) * (size_t)(p->s.nCol + 1));
  if (!c->aWinBase || !c->apLazyRg || !c->aVec || !c->aLoaded || !c->aOutOf || !c->aSnap ||
      !c->aTab || !c->aTabCopy || !c->apScan || !c->aWinNext || !c->aWinLen) {
    sqlite3_free(c->aVec);
    sqlite3_free(c->aLoaded);
    sqlite3_free(c->aOutOf);
    sqlite3_free(c->aSnap);
    sqlite3_free(c->aTab);
    sqlite3_free(c->aTabCopy);
    sqlite3_free(c->apScan);
    sqlite3_free(c->aWinNext);
    sqlite3_free(c->aWinLen);
    sqlite3_free(c->aWinBase);
    sqlite3_free(c->apLazyRg);
    sqlite3_free(c);
    return SQLITE_NOMEM;
  }
  for (int k = 0; k < c->nMem; k++) c->aWinNext[k] = -1;
  memset(c->aWinBase, 0, sizeof(int) * nMem);
  memset(c->apLazyRg, 0, sizeof(store_rg *) * (size_t)(p->s.nCol + 1));
  c->nLeft = -1;
  memset(c->aSnap, 0, sizeof(store_snap *) * nMem);
  memset(c->aTab, 0, sizeof(store_table *) * nMem);
  memset(c->aTabCopy, 0, sizeof(store_table *) * nMem);
  memset(c->apScan, 0, sizeof(dev_scan *) * nMem);
  for (int i = 0; i <= p->s.nCol; i++) csq_vec_init(&c->aVec[i]);
  memset(c->aLoaded, 0, (size_t)p->s.nCol + 1);
  c->bEof = 1;
  c->stmtKey = vt_stmt_enter(p->pConn);
  *ppCur = &c->base;
  return SQLITE_OK;
}

/* Stop every device scan of the cursor, including windows not yet opened. */
static void stop_scans(vt_cursor *c) {
  for (int k = 0; k < c->nMem; k++) {
    dev_scan_close(c->apScan[k]);
    c->apScan[k] = NULL;
    c->aWinNext[k] = -1;
  }
}

/* Release what the cursor reads from: scans, row groups, the buffer copy,
** snapshots. Its output vectors (aOut) stay. */
static void release_sources(vt_cursor *c, int nCol) {
  stop_scans(c);
  for (int i = 0; i < c->nRg; i++) store_rg_unref(c->apRg[i]);
  sqlite3_free(c->apRg);
  c->apRg = NULL;
  sqlite3_free(c->aRgMem);
  c->aRgMem = NULL;
  c->nRg = 0;
  if (c->aBuf) {
    for (int i = 0; i <= nCol; i++) csq_vec_free(&c->aBuf[i]);
    sqlite3_free(c->aBuf);
    c->aBuf = NULL;
  }
  sqlite3_free(c->aBufDel);
  c->aBufDel = NULL;
  c->nBuf = 0;
  for (int k = 0; k < c->nMem; k++) {
    if (c->aSnap[k]) store_snap_unref(c->aSnap[k]);
    c->aSnap[k] = NULL;
    c->aTab[k] = NULL;
    store_table_free(c->aTabCopy[k]);
    c->aTabCopy[k] = NULL;
  }
}

static void cursor_reset(vt_cursor *c, int nCol) {
  release_sources(c, nCol);
  for (int i = 0; i < c->nOut; i++) csq_vec_free(&c->aOut[i]);
  sqlite3_free(c->aOut);
  c->aOut = NULL;
  c->nOut = 0;
  sqlite3_free(c->pProg);
  c->pProg = NULL;
  c->nProg = 0;
  c->nLeft = -1;
  c->nSkip = 0;
  c->nKey = 0;
  c->bProbe = 0;
  c->bEof = 1;
  c->bRowNum = 0;
  c->aRowNum = NULL;
  c->pBatchRg = NULL;
  c->mAsked = c->mOmit = 0;
  memset(c->apLazyRg, 0, sizeof(store_rg *) * (size_t)(nCol + 1));
}

int vt_close(sqlite3_vtab_cursor *pCur) {
  vt_cursor *c = (vt_cursor *)pCur;
  vt_tab *p = (vt_tab *)pCur->pVtab;
  cursor_reset(c, p->s.nCol);
  vt_stmt_leave(p->pConn, c->stmtKey);
  vt_probe_free(c->pProbe);
  for (int i = 0; i <= p->s.nCol; i++) csq_vec_free(&c->aVec[i]);
  sqlite3_free(c->aVec);
  sqlite3_free(c->aLoaded);
  sqlite3_free(c->aOutOf);
  sqlite3_free(c->aSnap);
  sqlite3_free(c->aTab);
  sqlite3_free(c->aTabCopy);
  sqlite3_free(c->apScan);
  sqlite3_free(c->aWinNext);
  sqlite3_free(c->aWinLen);
  sqlite3_free(c->aWinBase);
  sqlite3_free(c->apLazyRg);
  sqlite3_free(c);
  return SQLITE_OK;
}

/* Load column iCol (0 = rowid, i+1 = column i) of the current row group. */
static int load_column(vt_cursor *c, vt_tab *p, int iCol) {
  csq_vec_reset(&c->aVec[iCol]);
  if (c->iRg >= c->nRg) { /* the buffer copy */
    c->aLoaded[iCol] = 1;
    return csq_vec_append(&c->aVec[iCol], &c->aBuf[iCol], 0, c->nBuf) ? SQLITE_NOMEM : SQLITE_OK;
  }
  int ai = iCol - 1;
  char *zErr = NULL;
  int k = c->aRgMem[c->iRg];
  int rc = store_read_chunks(p->apMem[k]->pStore, p->apMem[k]->pQ, c->aTab[k], c->apRg[c->iRg], &ai,
                             1, &c->aVec[iCol], &zErr);
  if (rc) return vt_err(&p->base, rc, zErr);
  c->aLoaded[iCol] = 1;
  return SQLITE_OK;
}

static int col_used(const vt_cursor *c, int i) {
  return i >= 63 ? (c->colUsed >> 63) & 1 : (c->colUsed >> i) & 1;
}

/* Position on row group c->iRg (or the buffer): load the used columns. */
static int enter_source(vt_cursor *c, vt_tab *p) {
  memset(c->aLoaded, 0, (size_t)p->s.nCol + 1);
  if (c->iRg < c->nRg) {
    store_rg *pRg = c->apRg[c->iRg];
    c->nRow = pRg->nRow;
    c->aDel = pRg->aDel;
  } else {
    c->nRow = c->nBuf;
    c->aDel = c->aBufDel;
  }
  c->iRow = 0;
  dev_stats *st = dev_queue_stats(p->apMem[c->iRg < c->nRg ? c->aRgMem[c->iRg] : 0]->pQ);
  st->row_groups_scanned++;
  st->rows_scanned += c->nRow;
  if (c->nSkip > 0 && !c->bLookup) {
    /* SQLite drops the next nSkip rows for OFFSET without reading them: a
    ** source made only of such rows is not loaded (vt_column loads a
    ** column after all if SQLite asks, so this is only a saving) */
    uint32_t nLive = 0;
    if (c->iRg < c->nRg)
      nLive = c->apRg[c->iRg]->nRow - c->apRg[c->iRg]->nDel;
    else
      for (uint32_t r = 0; r < c->nBuf; r++) nLive += !c->aBufDel[r];
    if ((uint64_t)c->nSkip >= nLive) return SQLITE_OK;
  }
  for (int i = 0; i < p->s.nCol; i++) {
    if (!col_used(c, i) || i == p->s.iIpk) continue;
    int rc = load_column(c, p, i + 1);
    if (rc) return rc;
  }
  if (c->bLookup || (p->s.iIpk >= 0 && col_used(c, p->s.iIpk))) {
    int rc = load_column(c, p, 0);
    if (rc) return rc;
  }
  return SQLITE_OK;
}

static int row_ok(const vt_cursor *c) {
  if (c->aDel && (c->aDel[c->iRow >> 3] >> (c->iRow & 7)) & 1 && c->iRg < c->nRg) return 0;
  if (c->iRg >= c->nRg && c->aBufDel[c->iRow]) return 0;
  if (c->bLookup && c->aVec[0].aVal[c->iRow].i != c->iLookup) return 0;
  return 1;
}

/* Has member k a scan open, or a window of row groups still to open? */
static int scan_live(const vt_cursor *c, int k) {
  return c->apScan[k] || c->aWinNext[k] >= 0;
}

/* A capped device scan: open member k's next window of row groups, twice
** as many as the last. The scan reads ahead only inside its window, so
** once the cap is reached nothing beyond that window has been read. */
static int open_window(vt_cursor *c, vt_tab *p, int k) {
  const store_table *pTab = c->aTab[k];
  int i0 = c->aWinNext[k];
  int n = pTab->nRg - i0 < c->aWinLen[k] ? pTab->nRg - i0 : c->aWinLen[k];
  char *zErr = NULL;
  int rc = dev_scan_open(p->apMem[k]->pQ, p->apMem[k]->pStore, pTab, pTab->apRg + i0, n, c->pProg,
                         c->nProg, &c->apScan[k], &zErr);
  if (rc) return vt_err(&p->base, rc, zErr);
  c->aWinBase[k] = i0;
  if (c->mOmit) dev_scan_set_omit(c->apScan[k], c->mOmit);
  c->aWinNext[k] = i0 + n < pTab->nRg ? i0 + n : -1;
  if (c->aWinLen[k] < (1 << 20)) c->aWinLen[k] *= 2;
  return SQLITE_OK;
}

/* A device scan with row numbers asks only for the outputs SQLite has read
** so far: once a batch is consumed, the others are left out of the row
** groups started from then on (vt_column reads one from its chunk if SQLite
** wants it after all, and from then on it comes back again). The columns a
** statement reads do not change between rows in practice (colUsed also
** counts the columns of the constraints the device evaluated exactly, which
** SQLite never reads), so the device sends only what is read. */
static void update_omit(vt_cursor *c) {
  if (!c->bRowNum || !c->pBatchRg) return; /* no batch consumed yet */
  int n = c->nOut < 64 ? c->nOut : 64;
  uint64_t all = n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
  uint64_t m = all & ~c->mAsked;
  if (m == c->mOmit) return;
  c->mOmit = m;
  for (int k = 0; k < c->nMem; k++) dev_scan_set_omit(c->apScan[k], m);
}

/* Device mode: the rows of every batch qualify; fetch batches as needed,
** taking them from the members' scans in turn (each scan keeps its device
** busy with the row groups it has in flight meanwhile). A member whose
** window ran out opens its next window in its turn, so the order of the
** rows does not depend on the windows. */
static int settle_scan(vt_cursor *c, vt_tab *p) {
  while (c->iRow >= c->nRow) {
    uint32_t n = 0;
    update_omit(c);
    int k = c->iScan, nTry = 0;
    while (!scan_live(c, k) && nTry < c->nMem) k = (k + 1) % c->nMem, nTry++;
    if (!scan_live(c, k)) {
      c->bEof = 1;
      return SQLITE_OK;
    }
    if (!c->apScan[k]) {
      int rc = open_window(c, p, k);
      if (rc) return rc;
    }
    char *zErr = NULL;
    if (c->nLeft > 0 && c->nKey == 0) /* a LIMIT: the device sends no more rows than are left */
      dev_scan_set_row_cap(c->apScan[k], c->nLeft < UINT32_MAX ? (uint32_t)c->nLeft : 0);
    int rc = dev_scan_next(c->apScan[k], c->aOut, &n, &zErr);
    if (rc) return vt_err(&p->base, rc, zErr);
    c->iScan = (k + 1) % c->nMem;
    if (n == 0) {
      dev_scan_close(c->apScan[k]);
      c->apScan[k] = NULL;
      continue;
    }
    c->iRow = 0;
    c->nRow = n;
    if (c->bRowNum) {
      c->aRowNum = dev_scan_rownums(c->apScan[k]);
      c->iBatchMem = k;
      c->pBatchRg = c->aTab[k]->apRg[c->aWinBase[k] + dev_scan_rg(c->apScan[k])];
    }
  }
  return SQLITE_OK; /* the device counted rows_returned */
}

/* Advance to the next visible row at or after (iRg, iRow). */
static int settle(vt_cursor *c, vt_tab *p) {
  if (c->nOut) return settle_scan(c, p);
  for (;;) {
    while (c->iRow < c->nRow) {
      if (row_ok(c)) {
        dev_queue_stats(p->apMem[c->iRg < c->nRg ? c->aRgMem[c->iRg] : 0]->pQ)->rows_returned++;
        return SQLITE_OK;
      }
      c->iRow++;
    }
    if (c->iRg >= c->nRg) {
      c->bEof = 1;
      return SQLITE_OK;
    }
    c->iRg++;
    if (c->iRg == c->nRg && c->nBuf == 0) {
      c->bEof = 1;
      return SQLITE_OK;
    }
    int rc = enter_source(c, p);
    if (rc) return rc;
  }
}

/* Is the idxStr segment at z (just after its ';') a term "c<chunk>:..."? */
static int is_term(const char *z) {
  return z[0] == 'c' && z[1] >= '0' && z[1] <= '9';
}

/* The number of terms of an idxStr: the segments after "cols=" until the
** first that is not a term (";limit=", ";keeps~" ...). */
static int count_terms(const char *idxStr) {
  int n = 0;
  for (const char *z = strchr(idxStr, ';');
       z && (z = strchr(z + 1, ';')) != NULL && is_term(z + 1);)
    n++;
  return n;
}

/* Parse the terms of a "device" idxStr into a[] (values from argv; IN
** lists read with sqlite3_vtab_in_first/next and copied). Returns the number
** of terms, or -1 on a malformed idxStr. */
static int parse_terms(const char *idxStr, int argc, sqlite3_value **argv, pl_cons *a, int nMax) {
  int n = 0;
  for (const char *z = strchr(idxStr, ';');
       z && (z = strchr(z + 1, ';')) != NULL && is_term(z + 1);) {
    int iChunk = 0, flags = 0;
    char zOp[16], cAff = 0;
    if (n >= nMax || n >= argc ||
        sscanf(z + 1, "c%d:%15[a-z]:%x:%c", &iChunk, zOp, &flags, &cAff) != 4)
      return -1;
    int op = 0;
    for (int k = 1; k < (int)(sizeof(azOp) / sizeof(azOp[0])); k++)
      if (strcmp(azOp[k], zOp) == 0) op = k;
    if (!op) return -1;
    pl_cons *t = &a[n];
    memset(t, 0, sizeof(*t));
    t->iChunk = iChunk;
    t->op = op;
    t->flags = flags;
    t->aff = cAff;
    if (op == CSQ_OP_IN) {
      sqlite3_value *v = NULL;
      for (int rc = sqlite3_vtab_in_first(argv[n], &v); rc == SQLITE_OK && v;
           rc = sqlite3_vtab_in_next(argv[n], &v)) {
        sqlite3_value **ap = sqlite3_realloc64(t->apVal, sizeof(*ap) * (size_t)(t->nVal + 1));
        if (!ap) return -1;
        t->apVal = ap;
        if (!(ap[t->nVal] = sqlite3_value_dup(v))) return -1;
        t->nVal++;
      }
    } else if (op != CSQ_OP_ISNULL && op != CSQ_OP_NOTNULL) {
      t->apVal = sqlite3_malloc64(sizeof(sqlite3_value *));
      if (!t->apVal || !(t->apVal[0] = sqlite3_value_dup(argv[n]))) return -1;
      t->nVal = 1;
    }
    n++;
  }
  return n;
}

static void free_terms(pl_cons *a, int n) {
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < a[i].nVal; k++) sqlite3_value_free(a[i].apVal[k]);
    sqlite3_free(a[i].apVal);
  }
}

/* LIKE/GLOB with a pattern that is not text, or an IN list longer than a
** program can hold, is left out of the program: such terms are never exact
** (omit = 0), so SQLite still applies them. */
#define VT_IN_MAX 4096
static int keep_term(const pl_cons *t) {
  if (t->op == CSQ_OP_IN) {
    if (t->nVal > VT_IN_MAX) return 0;
    if (t->aff == PL_AFF_NUMERIC) return 1;
    /* IN on a TEXT or untyped column: SQLite may compare a number in the
    ** list after converting the column's value or the number (a list's
    ** values take the column's affinity; a subquery's compare as "x = y"),
    ** which the device does not do. Text, blobs and NULLs compare as they
    ** are, or not at all where SQLite would convert the column's value to a
    ** number: the device's answer is then a superset, which SQLite checks
    ** again (IN is never omitted). */
    for (int i = 0; i < t->nVal; i++) {
      int ty = sqlite3_value_type(t->apVal[i]);
      if (ty == SQLITE_INTEGER || ty == SQLITE_FLOAT) return 0;
    }
    return 1;
  }
  if (t->op != CSQ_OP_LIKE && t->op != CSQ_OP_GLOB) return 1;
  int ty = sqlite3_value_type(t->apVal[0]);
  return ty == SQLITE_TEXT || ty == SQLITE_NULL;
}

/* Take the table's visible state on every member: snapshots, or private
** copies of a transaction's working tables (they change as it writes). */
static int visible(vt_cursor *c, vt_tab *p) {
  char *zErr = NULL;
  int rc = vt_visible_members(p, (store_table **)c->aTab, c->aSnap, &zErr);
  if (rc) return vt_err(&p->base, rc, zErr);
  for (int k = 0; k < c->nMem; k++) {
    if (c->aSnap[k]) continue;
    c->aTabCopy[k] = store_table_clone(c->aTab[k]);
    if (!c->aTabCopy[k]) return SQLITE_NOMEM;
    c->aTab[k] = c->aTabCopy[k];
  }
  return SQLITE_OK;
}

/* ---- ORDER BY ... LIMIT: the top-N heap -----------------------------------
**
** Keeps the nMax rows that sort first among those offered, each copied out
** of its batch into a slot (its values, and its TEXT/BLOB bytes in a buffer
** of the slot's own that only grows: no allocation per value). aHeap orders
** the slots with the row that sorts last at the root, so a new row costs
** one comparison with the root when it does not belong, log(nMax) when it
** does. Equal keys keep the row that came first (row group order).
*/
typedef struct vt_topn {
  int nCol;                 /* values per row: the cursor's outputs */
  int nKey;                 /* sort keys */
  int aKey[VT_TOPN_MAXKEY]; /* output column of each key */
  uint8_t aDesc[VT_TOPN_MAXKEY];
  uint32_t nMax;   /* rows kept at most */
  uint32_t nRow;   /* rows held */
  uint32_t nSlot;  /* rows the arrays have room for */
  uint8_t *aCls;   /* [slot * nCol + j]: storage class */
  csq_val *aVal;   /* [slot * nCol + j]: value; TEXT/BLOB: offset in azBuf[slot] */
  uint32_t *aLen;  /* [slot * nCol + j]: TEXT/BLOB bytes */
  char **azBuf;    /* per slot: its TEXT/BLOB bytes */
  uint64_t *anBuf; /* per slot: bytes allocated at azBuf[slot] */
  uint64_t *aSeq;  /* per slot: arrival number */
  uint32_t *aHeap; /* slots; root = the kept row that sorts last */
  uint64_t nSeq;
} vt_topn;

/* Value j of slot s; its bytes, if any, stay in the slot's buffer. A
** batch's value is csq_value_of_vec's (value.h). */
static inline csq_value vref_slot(const vt_topn *t, uint32_t s, int j) {
  size_t i = (size_t)s * (size_t)t->nCol + (size_t)j;
  csq_value x = {t->aCls[i], t->aVal[i].i, t->aVal[i].r, NULL, 0};
  if (x.cls == CSQ_TEXT || x.cls == CSQ_BLOB) {
    x.n = t->aLen[i];
    if (x.n) x.z = (const uint8_t *)t->azBuf[s] + t->aVal[i].off;
  }
  return x;
}

/* Order of two values as SQLite's ORDER BY (ascending, BINARY; NULL first). */
static inline int vref_cmp(const csq_value *a, const csq_value *b) {
  return csq_value_cmp(a, b, CSQ_COLL_BINARY);
}

/* Output order of slots a and b (< 0: a first). */
static int topn_cmp_slot(const vt_topn *t, uint32_t a, uint32_t b) {
  for (int k = 0; k < t->nKey; k++) {
    csq_value x = vref_slot(t, a, t->aKey[k]), y = vref_slot(t, b, t->aKey[k]);
    int c = vref_cmp(&x, &y);
    if (c) return t->aDesc[k] ? -c : c;
  }
  return (t->aSeq[a] > t->aSeq[b]) - (t->aSeq[a] < t->aSeq[b]);
}

/* Output order of row r of the batch apSrc against slot s; the batch row
** came later, so it sorts after on equal keys. */
static int topn_cmp_src(const vt_topn *t, const csq_vec *const *apSrc, uint32_t r, uint32_t s) {
  for (int k = 0; k < t->nKey; k++) {
    csq_value x = csq_value_of_vec(apSrc[t->aKey[k]], r), y = vref_slot(t, s, t->aKey[k]);
    int c = vref_cmp(&x, &y);
    if (c) return t->aDesc[k] ? -c : c;
  }
  return 1;
}

static void topn_sift_down(vt_topn *t, uint32_t i, uint32_t n) {
  uint32_t *h = t->aHeap;
  for (;;) {
    uint32_t l = 2 * i + 1, m;
    if (l >= n) return;
    m = l;
    if (l + 1 < n && topn_cmp_slot(t, h[l + 1], h[l]) > 0) m = l + 1;
    if (topn_cmp_slot(t, h[m], h[i]) <= 0) return;
    uint32_t x = h[i];
    h[i] = h[m];
    h[m] = x;
    i = m;
  }
}

static int topn_grow(vt_topn *t) {
  uint64_t n = t->nSlot ? (uint64_t)t->nSlot * 2 : 64;
  if (n > t->nMax) n = t->nMax;
  size_t nv = (size_t)n * (size_t)t->nCol;
  uint8_t *aCls = sqlite3_realloc64(t->aCls, nv ? nv : 1);
  if (aCls) t->aCls = aCls;
  csq_val *aVal = sqlite3_realloc64(t->aVal, sizeof(csq_val) * (nv ? nv : 1));
  if (aVal) t->aVal = aVal;
  uint32_t *aLen = sqlite3_realloc64(t->aLen, sizeof(uint32_t) * (nv ? nv : 1));
  if (aLen) t->aLen = aLen;
  char **azBuf = sqlite3_realloc64(t->azBuf, sizeof(char *) * n);
  if (azBuf) t->azBuf = azBuf;
  uint64_t *anBuf = sqlite3_realloc64(t->anBuf, sizeof(uint64_t) * n);
  if (anBuf) t->anBuf = anBuf;
  uint64_t *aSeq = sqlite3_realloc64(t->aSeq, sizeof(uint64_t) * n);
  if (aSeq) t->aSeq = aSeq;
  uint32_t *aHeap = sqlite3_realloc64(t->aHeap, sizeof(uint32_t) * n);
  if (aHeap) t->aHeap = aHeap;
  if (!aCls || !aVal || !aLen || !azBuf || !anBuf || !aSeq || !aHeap) return SQLITE_NOMEM;
  for (uint32_t s = t->nSlot; s < n; s++) {
    t->azBuf[s] = NULL;
    t->anBuf[s] = 0;
  }
  t->nSlot = (uint32_t)n;
  return SQLITE_OK;
}

/* Copy row r of apSrc[0..nCol) into slot s. */
static int topn_copy(vt_topn *t, const csq_vec *const *apSrc, uint32_t r, uint32_t s) {
  uint64_t nb = 0;
  for (int j = 0; j < t->nCol; j++) {
    int cls = apSrc[j]->aCls[r];
    if (cls == CSQ_TEXT || cls == CSQ_BLOB) nb += apSrc[j]->aLen[r];
  }
  if (nb > t->anBuf[s]) {
    uint64_t want = t->anBuf[s] * 2 > nb ? t->anBuf[s] * 2 : nb;
    if (want < 64) want = 64;
    char *z = sqlite3_realloc64(t->azBuf[s], want);
    if (!z) return SQLITE_NOMEM;
    t->azBuf[s] = z;
    t->anBuf[s] = want;
  }
  size_t i = (size_t)s * (size_t)t->nCol;
  uint64_t off = 0;
  for (int j = 0; j < t->nCol; j++, i++) {
    const csq_vec *v = apSrc[j];
    int cls = v->aCls[r];
    t->aCls[i] = (uint8_t)cls;
    t->aLen[i] = 0;
    if (cls == CSQ_TEXT || cls == CSQ_BLOB) {
      uint32_t n = v->aLen[r];
      if (n) memcpy(t->azBuf[s] + off, csq_vec_bytes(v, r), n);
      t->aVal[i].off = off;
      t->aLen[i] = n;
      off += n;
    } else {
      t->aVal[i] = v->aVal[r];
    }
  }
  t->aSeq[s] = t->nSeq++;
  return SQLITE_OK;
}

/* Offer row r of the batch apSrc[0..nCol). */
static int topn_add(vt_topn *t, const csq_vec *const *apSrc, uint32_t r) {
  if (t->nRow < t->nMax) {
    if (t->nRow == t->nSlot && topn_grow(t)) return SQLITE_NOMEM;
    uint32_t s = t->nRow, i = t->nRow;
    if (topn_copy(t, apSrc, r, s)) return SQLITE_NOMEM;
    t->aHeap[t->nRow++] = s;
    while (i > 0) {
      uint32_t up = (i - 1) / 2;
      if (topn_cmp_slot(t, t->aHeap[i], t->aHeap[up]) <= 0) break;
      uint32_t x = t->aHeap[i];
      t->aHeap[i] = t->aHeap[up];
      t->aHeap[up] = x;
      i = up;
    }
    return SQLITE_OK;
  }
  if (t->nRow == 0 || topn_cmp_src(t, apSrc, r, t->aHeap[0]) >= 0) return SQLITE_OK;
  if (topn_copy(t, apSrc, r, t->aHeap[0])) return SQLITE_NOMEM;
  topn_sift_down(t, 0, t->nRow);
  return SQLITE_OK;
}

/* Sort the kept rows and write them, in order, into aOut[0..nCol)
** (reset first). */
static int topn_emit(vt_topn *t, csq_vec *aOut) {
  for (uint32_t n = t->nRow; n > 1; n--) {
    uint32_t x = t->aHeap[0];
    t->aHeap[0] = t->aHeap[n - 1];
    t->aHeap[n - 1] = x;
    topn_sift_down(t, 0, n - 1);
  }
  for (int j = 0; j < t->nCol; j++) {
    csq_vec *v = &aOut[j];
    csq_vec_reset(v);
    if (csq_vec_reserve(v, t->nRow, 0)) return SQLITE_NOMEM;
    for (uint32_t k = 0; k < t->nRow; k++) {
      csq_value x = vref_slot(t, t->aHeap[k], j);
      int rc;
      switch (x.cls) {
      case CSQ_INT:
        rc = csq_vec_push_int(v, x.i);
        break;
      case CSQ_REAL:
        rc = csq_vec_push_real(v, x.r);
        break;
      case CSQ_TEXT:
      case CSQ_BLOB:
        rc = csq_vec_push_bytes(v, x.cls, x.z, x.n);
        break;
      default:
        rc = csq_vec_push_null(v);
      }
      if (rc) return SQLITE_NOMEM;
    }
  }
  return SQLITE_OK;
}

static void topn_free(vt_topn *t) {
  for (uint32_t s = 0; s < t->nSlot; s++) sqlite3_free(t->azBuf[s]);
  sqlite3_free(t->aCls);
  sqlite3_free(t->aVal);
  sqlite3_free(t->aLen);
  sqlite3_free(t->azBuf);
  sqlite3_free(t->anBuf);
  sqlite3_free(t->aSeq);
  sqlite3_free(t->aHeap);
  memset(t, 0, sizeof(*t));
}

/* A heap for the cursor's sort keys over outputs aOutOf (as the cursor's),
** keeping nMax rows. */
static void topn_init(vt_topn *t, const vt_cursor *c, int nOut, uint32_t nMax) {
  memset(t, 0, sizeof(*t));
  t->nCol = nOut;
  t->nMax = nMax;
  t->nKey = c->nKey;
  for (int k = 0; k < c->nKey; k++) {
    t->aKey[k] = c->aOutOf[c->aKeyChunk[k]];
    t->aDesc[k] = c->aKeyDesc[k];
  }
}

/* The cursor's output columns: rowids (if bRowid, or the INTEGER PRIMARY
** KEY is read), then every column the statement reads (colUsed, which
** includes the sort keys); fills aChunk[] with their chunks and c->aOutOf.
** Returns their number. */
static int set_outputs(vt_cursor *c, const vt_tab *p, int bRowid, int *aChunk) {
  int nOut = 0, nCol = p->s.nCol;
  for (int i = 0; i <= nCol; i++) c->aOutOf[i] = -1;
  if (bRowid || (p->s.iIpk >= 0 && col_used(c, p->s.iIpk))) {
    aChunk[nOut] = 0;
    c->aOutOf[0] = nOut++;
  }
  for (int i = 0; i < nCol; i++) {
    if (!col_used(c, i) || i == p->s.iIpk) continue;
    aChunk[nOut] = i + 1;
    c->aOutOf[i + 1] = nOut++;
  }
  return nOut;
}

/* Rows the top-N keeps: LIMIT + OFFSET (no cap: all of them). */
static uint32_t topn_max(const vt_cursor *c) {
  return c->nLeft >= 0 && c->nLeft < UINT32_MAX ? (uint32_t)c->nLeft : UINT32_MAX;
}

/* The top-N is complete: serve its rows, sorted, as the cursor's output
** vectors (allocated here for a host scan) through the device-mode path. */
static int serve_topn(vt_cursor *c, vt_topn *t, int nOut) {
  if (!c->aOut) {
    c->aOut = sqlite3_malloc64(sizeof(csq_vec) * (size_t)nOut);
    if (!c->aOut) return SQLITE_NOMEM;
    for (int i = 0; i < nOut; i++) csq_vec_init(&c->aOut[i]);
    c->nOut = nOut;
  }
  int rc = topn_emit(t, c->aOut);
  if (rc) return rc;
  c->iScan = 0;
  c->iRow = 0;
  c->nRow = t->nRow;
  c->bEof = t->nRow == 0;
  return SQLITE_OK;
}

/* idxNum 2: run the pushed terms as a device program over the visible row
** groups (the transaction's buffered rows are written out first, so the
** device sees them).
** With a cap (nLeft > 0) the scans run in windows of row groups; with sort
** keys every qualifying row goes through a top-N heap first. */
static int device_filter(vt_cursor *c, vt_tab *p, const char *idxStr, int nArg,
                         sqlite3_value **argv) {
  int nCol = p->s.nCol, rc, nTerm;
  pl_cons *aTerm = sqlite3_malloc64(sizeof(pl_cons) * (size_t)(nArg + 1));
  int *aChunk = sqlite3_malloc64(sizeof(int) * (size_t)(nCol + 1));
  const csq_vec **apSrc = NULL;
  uint8_t *pProg = NULL;
  size_t nProg = 0;
  int bEmpty = 0;
  char *zErr = NULL;
  vt_topn t;
  memset(&t, 0, sizeof(t));
  if (!aTerm || !aChunk) {
    rc = SQLITE_NOMEM;
    nTerm = 0;
    goto done;
  }
  memset(aTerm, 0, sizeof(pl_cons) * (size_t)(nArg + 1));
  nTerm = parse_terms(idxStr, nArg, argv, aTerm, nArg);
  if (nTerm < 0) {
    vt_set_error(&p->base, "csq: malformed plan '%s'", idxStr);
    rc = SQLITE_ERROR;
    nTerm = nArg; /* free whatever was parsed */
    goto done;
  }
  int nKeep = 0;
  for (int i = 0; i < nTerm; i++)
    if (keep_term(&aTerm[i]))
      aTerm[nKeep++] = aTerm[i];
    else
      free_terms(&aTerm[i], 1);
  nTerm = nKeep;
  /* Without a top-N, rows go to SQLite straight from the batches: the
  ** program then returns row numbers, so the rowid (which SQLite reads only
  ** for writes, rowid in the statement, or OR-by-union) and any column left
  ** out can be read from their chunks when asked for (vt_column). */
  c->bRowNum = c->nKey == 0;
  int nOut = set_outputs(c, p, !c->bRowNum, aChunk);
  if (nOut == 0) /* no column read (count(*)): one output all the same, dropped after a batch */
    nOut = set_outputs(c, p, 1, aChunk);
  /* With sort keys the device keeps only each row group's top LIMIT +
  ** OFFSET rows; the cursor's top-N merges them. */
  pl_topn top;
  memset(&top, 0, sizeof(top));
  top.nTop = topn_max(c);
  top.nKey = c->nKey;
  for (int k = 0; k < c->nKey; k++) {
    top.aChunk[k] = c->aKeyChunk[k];
    top.aDesc[k] = c->aKeyDesc[k];
  }
  const pl_topn *pTop = c->nKey > 0 && top.nTop >= 1 && top.nTop <= CSQ_TOPN_MAX ? &top : NULL;
  rc = pl_filter_program(aTerm, nTerm, aChunk, nOut, c->bRowNum, pTop, &pProg, &nProg, &bEmpty,
                         &zErr);
  if (rc) {
    vt_set_error(&p->base, "%s", zErr ? zErr : "csq: cannot build the device program");
    sqlite3_free(zErr);
    goto done;
  }
  if (bEmpty) goto done; /* a comparison with NULL: no row */
  rc = vt_flush(p);
  if (rc) goto done;
  rc = visible(c, p);
  if (rc) goto done;
  c->aOut = sqlite3_malloc64(sizeof(csq_vec) * (size_t)nOut);
  if (!c->aOut) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  for (int i = 0; i < nOut; i++) csq_vec_init(&c->aOut[i]);
  c->nOut = nOut;
  vt_note_table(p, (store_table *const *)c->aTab, c->nMem);
  if (c->nLeft > 0 && c->nKey == 0) {
    /* capped: each member's first window holds the row groups the cap
    ** would fill if every row qualified (at least one); it is opened when
    ** the member's turn comes (settle_scan), later ones twice as large */
    int64_t nPer = (int64_t)p->s.nRowGroup * c->nMem;
    int64_t nWin = nPer > 0 ? (c->nLeft + nPer - 1) / nPer : 1;
    for (int k = 0; k < c->nMem; k++) {
      c->aWinNext[k] = c->aTab[k]->nRg > 0 ? 0 : -1;
      c->aWinLen[k] = nWin < 1 ? 1 : nWin > c->aTab[k]->nRg ? c->aTab[k]->nRg : (int)nWin;
    }
    c->pProg = pProg;
    c->nProg = nProg;
    pProg = NULL;
  } else {
    /* one scan per member, all open at once: every device works in parallel */
    for (int k = 0; k < c->nMem; k++) {
      const store_table *pTab = c->aTab[k];
      c->aWinBase[k] = 0;
      rc = dev_scan_open(p->apMem[k]->pQ, p->apMem[k]->pStore, pTab, pTab->apRg, pTab->nRg, pProg,
                         nProg, &c->apScan[k], &zErr);
      if (rc) {
        rc = vt_err(&p->base, rc, zErr);
        goto done;
      }
    }
  }
  c->iScan = 0;
  c->bEof = 0;
  c->iRow = c->nRow = 0;
  if (c->nKey == 0) {
    rc = settle_scan(c, p);
    goto done;
  }
  /* ORDER BY consumed: every qualifying row through the heap */
  apSrc = sqlite3_malloc64(sizeof(csq_vec *) * (size_t)nOut);
  if (!apSrc) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  for (int j = 0; j < nOut; j++) apSrc[j] = &c->aOut[j];
  topn_init(&t, c, nOut, topn_max(c));
  for (;;) {
    rc = settle_scan(c, p);
    if (rc || c->bEof) break;
    for (uint32_t r = c->iRow; r < c->nRow && rc == SQLITE_OK; r++) rc = topn_add(&t, apSrc, r);
    if (rc) break;
    c->iRow = c->nRow;
  }
  release_sources(c, nCol);
  if (rc == SQLITE_OK) rc = serve_topn(c, &t, nOut);
done:
  topn_free(&t);
  free_terms(aTerm, nTerm);
  sqlite3_free(aTerm);
  sqlite3_free(aChunk);
  sqlite3_free(apSrc);
  sqlite3_free(pProg);
  return rc;
}

static int open_scan(vt_cursor *c, vt_tab *p);

/* Plan 3: look argv[0] up in the probe cache, building it first (one scan
** of the table through this cursor) if the cursor has none or the table
** was written since. */
static int probe_filter(vt_cursor *c, vt_tab *p, const char *idxStr, int argc,
                        sqlite3_value **argv) {
  const char *zKey = idxStr ? strstr(idxStr, ";c") : NULL;
  while (zKey && zKey[2] == 'o') zKey = strstr(zKey + 2, ";c"); /* skip ";cols=" */
  int iKey = zKey ? atoi(zKey + 2) : 0;
  if (argc < 1 || iKey < 1 || iKey > p->s.nCol) {
    vt_set_error(&p->base, "csq: malformed probe plan '%s'", idxStr ? idxStr : "");
    return SQLITE_ERROR;
  }
  if (c->pProbe && vt_probe_stamp(c->pProbe) != p->nWrite) {
    vt_probe_free(c->pProbe);
    c->pProbe = NULL;
  }
  if (!c->pProbe) {
    int nVec = p->s.nCol + 1;
    uint8_t *aKeep = sqlite3_malloc64((size_t)nVec);
    if (!aKeep) return SQLITE_NOMEM;
    aKeep[0] = 1; /* the rowid */
    for (int i = 0; i < p->s.nCol; i++) aKeep[i + 1] = col_used(c, i) && i != p->s.iIpk;
    vt_probe *pr = vt_probe_new(nVec, aKeep, iKey, p->nWrite);
    sqlite3_free(aKeep);
    if (!pr) return SQLITE_NOMEM;
    int rc = open_scan(c, p);
    if (rc == SQLITE_OK) {
      uint64_t nLive = c->nBuf;
      for (int g = 0; g < c->nRg; g++) nLive += c->apRg[g]->nRow - c->apRg[g]->nDel;
      if (nLive < VT_PROBE_MAX_ROWS * 2u) rc = vt_probe_reserve(pr, (uint32_t)nLive);
    }
    while (rc == SQLITE_OK && !c->bEof) {
      if (!c->aLoaded[0]) rc = load_column(c, p, 0);
      for (int i = 0; rc == SQLITE_OK && i < p->s.nCol; i++)
        if ((i + 1 == iKey || col_used(c, i)) && i != p->s.iIpk && !c->aLoaded[i + 1])
          rc = load_column(c, p, i + 1);
      if (rc == SQLITE_OK && vt_probe_rows(pr) >= VT_PROBE_MAX_ROWS * 2u) {
        vt_set_error(&p->base, "csq: table %s grew past %d rows during a join probe", p->zName,
                     VT_PROBE_MAX_ROWS * 2);
        rc = SQLITE_FULL;
      }
      if (rc == SQLITE_OK) {
        /* the run of visible rows from here, in one append */
        uint32_t r0 = c->iRow;
        do c->iRow++;
        while (c->iRow < c->nRow && row_ok(c));
        rc = vt_probe_append(pr, c->aVec, r0, c->iRow - r0);
        dev_queue_stats(p->apMem[c->iRg < c->nRg ? c->aRgMem[c->iRg] : 0]->pQ)->rows_returned +=
            c->iRow - r0 - 1; /* settle counted the first */
      }
      if (rc == SQLITE_OK) rc = settle(c, p);
    }
    if (rc == SQLITE_OK) rc = vt_probe_index(pr);
    cursor_reset(c, p->s.nCol);
    if (rc) {
      vt_probe_free(pr);
      return rc;
    }
    c->pProbe = pr;
  }
  int rc = vt_probe_find(c->pProbe, argv[0]);
  if (rc) return rc;
  c->bProbe = 1;
  c->zProbePlan = idxStr;
  c->iHit = 0;
  c->bEof = vt_probe_nhit(c->pProbe) == 0;
  return SQLITE_OK;
}

/* An integer LIMIT/OFFSET value (SQLite made it one: MustBeInt). */
static int limit_value(sqlite3_value *v, int64_t *pn) {
  if (sqlite3_value_type(v) != SQLITE_INTEGER) return 0;
  *pn = sqlite3_value_int64(v);
  return 1;
}

/*
** Read the ";limit", ";offset" and ";order" parts of a plan 0 or 2 (grammar
** above vt_best_index): sets nLeft (LIMIT + OFFSET rows, -1 no cap), nSkip
** (the OFFSET, rows SQLite drops itself) and the sort keys, and *pnTerm to
** the number of terms, whose values come first in argv. The sort keys are
** added to colUsed so that they are fetched.
*/
static int parse_limit(vt_cursor *c, vt_tab *p, const char *idxStr, int argc, sqlite3_value **argv,
                       int *pnTerm) {
  int nTerm = idxStr ? count_terms(idxStr) : 0;
  *pnTerm = nTerm;
  const char *zLim = idxStr ? strstr(idxStr, ";limit=") : NULL;
  if (!zLim) return SQLITE_OK;
  const char *zOff = strstr(zLim, ";offset=");
  const char *zOrd = strstr(zLim, ";order=");
  if (argc < nTerm + 1 + (zOff != NULL)) goto malformed;
  int64_t nLim = -1, nOff = 0;
  int bLim = limit_value(argv[nTerm], &nLim);
  int bOff = !zOff || limit_value(argv[nTerm + 1], &nOff);
  if (nOff < 0) nOff = 0; /* SQLite: a negative OFFSET is none */
  if (bOff) c->nSkip = nOff;
  if (bLim && bOff && nLim >= 0) c->nLeft = nLim > INT64_MAX - nOff ? -1 : nLim + nOff;
  if (zOrd) {
    const char *z = zOrd + 7;
    for (;;) {
      int iChunk = -1, nUsed = 0;
      char zDir[5] = "";
      if (c->nKey >= VT_TOPN_MAXKEY || sscanf(z, "c%d:%4[a-z]%n", &iChunk, zDir, &nUsed) != 2 ||
          iChunk < 0 || iChunk > p->s.nCol || (strcmp(zDir, "asc") && strcmp(zDir, "desc")))
        goto malformed;
      if (iChunk == p->s.iIpk + 1) iChunk = 0; /* the rowid's alias is the rowid */
      c->aKeyChunk[c->nKey] = iChunk;
      c->aKeyDesc[c->nKey++] = zDir[0] == 'd';
      if (iChunk > 0) c->colUsed |= (uint64_t)1 << (iChunk - 1 < 63 ? iChunk - 1 : 63);
      z += nUsed;
      if (*z != ',') break;
      z++;
    }
    c->nSkip = 0; /* the top-N reads every row anyway */
  }
  return SQLITE_OK;
malformed:
  vt_set_error(&p->base, "csq: malformed plan '%s'", idxStr);
  return SQLITE_ERROR;
}

/* Plan 0 with ORDER BY consumed: every live row through the top-N heap
** (the used columns of each row group loaded as usual), then the kept rows,
** sorted, are served as output vectors. */
static int host_topn(vt_cursor *c, vt_tab *p) {
  int nCol = p->s.nCol, rc = SQLITE_OK;
  int *aChunk = sqlite3_malloc64(sizeof(int) * (size_t)(nCol + 1));
  const csq_vec **apSrc = sqlite3_malloc64(sizeof(csq_vec *) * (size_t)(nCol + 1));
  vt_topn t;
  memset(&t, 0, sizeof(t));
  if (!aChunk || !apSrc) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  int nOut = set_outputs(c, p, 1, aChunk);
  for (int j = 0; j < nOut; j++) apSrc[j] = &c->aVec[aChunk[j]];
  topn_init(&t, c, nOut, topn_max(c));
  rc = open_scan(c, p);
  int iSrc = -1;
  while (rc == SQLITE_OK && !c->bEof) {
    for (int j = 0; c->iRg != iSrc && rc == SQLITE_OK && j < nOut; j++)
      if (!c->aLoaded[aChunk[j]]) rc = load_column(c, p, aChunk[j]);
    iSrc = c->iRg;
    if (rc == SQLITE_OK) rc = topn_add(&t, apSrc, c->iRow);
    if (rc == SQLITE_OK) {
      c->iRow++;
      rc = settle(c, p);
    }
  }
  release_sources(c, nCol);
  if (rc == SQLITE_OK) rc = serve_topn(c, &t, nOut);
done:
  topn_free(&t);
  sqlite3_free(aChunk);
  sqlite3_free(apSrc);
  return rc;
}

int vt_filter(sqlite3_vtab_cursor *pCur, int idxNum, const char *idxStr, int argc,
              sqlite3_value **argv) {
  vt_cursor *c = (vt_cursor *)pCur;
  vt_tab *p = (vt_tab *)pCur->pVtab;
  if (idxNum == 3 && c->bProbe && idxStr == c->zProbePlan && argc >= 1 &&
      vt_probe_stamp(c->pProbe) == p->nWrite) {
    /* the next probe of a join, same plan: only the lookup (the cursor
    ** holds nothing else since the last one) */
    int rc = vt_probe_find(c->pProbe, argv[0]);
    c->iHit = 0;
    c->bEof = rc != SQLITE_OK || vt_probe_nhit(c->pProbe) == 0;
    return rc;
  }
  cursor_reset(c, p->s.nCol);
  c->colUsed = ~(uint64_t)0;
  const char *zCols = idxStr ? strstr(idxStr, ";cols=") : NULL;
  if (zCols) c->colUsed = strtoull(zCols + 6, NULL, 16);
  c->bLookup = 0;
  if (idxNum == 0 || idxNum == 2) {
    int nTerm = 0;
    int rc = parse_limit(c, p, idxStr, argc, argv, &nTerm);
    if (rc) return rc;
    if (c->nLeft == 0) return SQLITE_OK; /* LIMIT 0: nothing to read (bEof is set) */
    if (idxNum == 2) return device_filter(c, p, idxStr, nTerm, argv);
    if (c->nKey) return host_topn(c, p);
  }
  if (idxNum == 3) return probe_filter(c, p, idxStr, argc, argv);
  if (idxNum == 1 && argc >= 1) {
    sqlite3_value *v = argv[0];
    int t = sqlite3_value_numeric_type(v);
    if (t == SQLITE_FLOAT) {
      double r = sqlite3_value_double(v);
      /* no integer rowid equals a fraction or a value out of range: empty */
      if (!(r >= -9223372036854775808.0 && r < 9223372036854775808.0)) return SQLITE_OK;
      if (r != (double)(int64_t)r) return SQLITE_OK;
      c->iLookup = (int64_t)r;
    } else if (t == SQLITE_INTEGER) {
      c->iLookup = sqlite3_value_int64(v);
    } else {
      return SQLITE_OK; /* NULL or text: nothing matches a rowid */
    }
    c->bLookup = 1;
  }
  return open_scan(c, p);
}

/* Plans 0 and 1 (and building a probe cache): take the visible row groups
** (pruned by the rowid sought, if any) and the write buffer, and position
** on the first live row. */
static int open_scan(vt_cursor *c, vt_tab *p) {
  int rc = visible(c, p);
  if (rc) return rc;
  int nAll = 0;
  for (int k = 0; k < c->nMem; k++) nAll += c->aTab[k]->nRg;
  c->apRg = sqlite3_malloc64(sizeof(store_rg *) * (size_t)(nAll + 1));
  c->aRgMem = sqlite3_malloc64(sizeof(int) * (size_t)(nAll + 1));
  if (!c->apRg || !c->aRgMem) return SQLITE_NOMEM;
  for (int k = 0; k < c->nMem; k++) {
    const store_table *pTab = c->aTab[k];
    for (int g = 0; g < pTab->nRg; g++) {
      store_rg *pRg = pTab->apRg[g];
      if (c->bLookup) {
        const csq_zone *z = &pRg->aChunk[0].zone;
        if (c->iLookup < z->iMin || c->iLookup > z->iMax) {
          dev_queue_stats(p->apMem[k]->pQ)->row_groups_skipped++;
          continue;
        }
      }
      if (pRg->nDel == pRg->nRow) continue;
      __atomic_add_fetch(&pRg->nRef, 1, __ATOMIC_RELAXED);
      c->aRgMem[c->nRg] = k;
      c->apRg[c->nRg++] = pRg;
    }
  }
  vt_note_table(p, (store_table *const *)c->aTab, c->nMem);
  if (p->aBuf) {
    /* rows still in the write buffer */
    uint32_t nBuf = p->aBuf[0].n;
    if (nBuf > 0) {
      c->aBuf = sqlite3_malloc64(sizeof(csq_vec) * (size_t)(p->s.nCol + 1));
      c->aBufDel = sqlite3_malloc64(nBuf);
      if (!c->aBuf || !c->aBufDel) return SQLITE_NOMEM;
      for (int i = 0; i <= p->s.nCol; i++) {
        csq_vec_init(&c->aBuf[i]);
        if (csq_vec_append(&c->aBuf[i], &p->aBuf[i], 0, nBuf)) return SQLITE_NOMEM;
      }
      memcpy(c->aBufDel, p->aBufDel, nBuf);
      c->nBuf = nBuf;
    }
  }
  c->bEof = 0;
  c->iRg = 0;
  if (c->nRg == 0 && c->nBuf == 0) {
    c->bEof = 1;
    return SQLITE_OK;
  }
  rc = enter_source(c, p);
  if (rc) return rc;
  return settle(c, p);
}

int vt_next(sqlite3_vtab_cursor *pCur) {
  vt_cursor *c = (vt_cursor *)pCur;
  if (c->bProbe) {
    c->bEof = ++c->iHit >= vt_probe_nhit(c->pProbe);
    return SQLITE_OK;
  }
  if (c->nSkip > 0) c->nSkip--;
  if (c->nLeft > 0 && --c->nLeft == 0) {
    /* the pushed LIMIT is reached: no further row group is read */
    stop_scans(c);
    c->bEof = 1;
    return SQLITE_OK;
  }
  c->iRow++;
  return settle(c, (vt_tab *)pCur->pVtab);
}

int vt_eof(sqlite3_vtab_cursor *pCur) {
  return ((vt_cursor *)pCur)->bEof;
}

/* The value of column iVec (0 the rowid) for the current row of a device
** batch that left it out: its chunk of the batch's row group is read (once
** per row group) and indexed by the row's number. */
static int lazy_value(vt_cursor *c, vt_tab *p, int iVec, const csq_vec **ppV, uint32_t *pR) {
  csq_vec *v = &c->aVec[iVec];
  if (!c->aRowNum || !c->pBatchRg) {
    vt_set_error(&p->base, "csq: no device batch to read a column for");
    return SQLITE_ERROR;
  }
  if (c->apLazyRg[iVec] != c->pBatchRg) {
    int k = c->iBatchMem, ai = iVec - 1;
    char *zErr = NULL;
    c->apLazyRg[iVec] = NULL;
    csq_vec_reset(v);
    int rc = store_read_chunks(p->apMem[k]->pStore, p->apMem[k]->pQ, c->aTab[k], c->pBatchRg, &ai,
                               1, v, &zErr);
    if (rc) return vt_err(&p->base, rc, zErr);
    c->apLazyRg[iVec] = c->pBatchRg;
  }
  uint32_t r = c->aRowNum[c->iRow];
  if (r >= v->n) {
    vt_set_error(&p->base, "csq: the device returned row %u of a row group of %u rows", r, v->n);
    return SQLITE_CORRUPT;
  }
  *ppV = v;
  *pR = r;
  return SQLITE_OK;
}

/* Device mode: where the current row's value of column iVec (0 the rowid)
** is: its output vector in the batch, or, if the batch left it out, its
** chunk (lazy_value). Notes that SQLite read it (update_omit). zName names
** the column (NULL: the rowid) in the error of a program without row
** numbers that did not fetch it. */
static int batch_value(vt_cursor *c, vt_tab *p, int iVec, const char *zName, const csq_vec **ppV,
                       uint32_t *pR) {
  int j = c->aOutOf[iVec];
  if (j >= 0 && j < 64) c->mAsked |= (uint64_t)1 << j;
  if (j >= 0 && c->aOut[j].n == c->nRow) {
    *ppV = &c->aOut[j];
    *pR = c->iRow;
    return SQLITE_OK;
  }
  if (c->bRowNum) return lazy_value(c, p, iVec, ppV, pR);
  if (zName)
    vt_set_error(&p->base, "csq: column %s was not fetched (colUsed)", zName);
  else
    vt_set_error(&p->base, "csq: rowids were not fetched");
  return SQLITE_ERROR;
}

int vt_column(sqlite3_vtab_cursor *pCur, sqlite3_context *ctx, int i) {
  vt_cursor *c = (vt_cursor *)pCur;
  vt_tab *p = (vt_tab *)pCur->pVtab;
  if (i < 0 || i >= p->s.nCol) return SQLITE_OK;
  int iVec = i == p->s.iIpk ? 0 : i + 1;
  const csq_vec *v;
  if (c->bProbe) {
    uint32_t r;
    v = vt_probe_value(c->pProbe, iVec, c->iHit, &r);
    if (!v) {
      vt_set_error(&p->base, "csq: column %s was not kept by the join probe", p->s.aCol[i].zName);
      return SQLITE_ERROR;
    }
    vt_result_value(ctx, v, r);
    return SQLITE_OK;
  }
  if (c->nOut) {
    uint32_t r;
    int rc = batch_value(c, p, iVec, p->s.aCol[i].zName, &v, &r);
    if (rc) return rc;
    vt_result_value(ctx, v, r);
    return SQLITE_OK;
  } else {
    if (!c->aLoaded[iVec]) {
      int rc = load_column(c, p, iVec);
      if (rc) return rc;
    }
    v = &c->aVec[iVec];
  }
  vt_result_value(ctx, v, c->iRow);
  return SQLITE_OK;
}

int vt_rowid(sqlite3_vtab_cursor *pCur, sqlite3_int64 *pRowid) {
  vt_cursor *c = (vt_cursor *)pCur;
  vt_tab *p = (vt_tab *)pCur->pVtab;
  if (c->bProbe) {
    uint32_t r;
    const csq_vec *v = vt_probe_value(c->pProbe, 0, c->iHit, &r);
    *pRowid = v->aVal[r].i;
    return SQLITE_OK;
  }
  if (c->nOut) {
    const csq_vec *v;
    uint32_t r;
    int rc = batch_value(c, p, 0, NULL, &v, &r);
    if (rc) return rc;
    *pRowid = v->aVal[r].i;
    return SQLITE_OK;
  }
  if (!c->aLoaded[0]) {
    int rc = load_column(c, p, 0);
    if (rc) return rc;
  }
  *pRowid = c->aVec[0].aVal[c->iRow].i;
  return SQLITE_OK;
}
