/*
** vtab/plan.c - the plans of a csq table scan: xBestIndex chooses one and
** encodes it in idxNum and idxStr; xFilter (vtab/cursor.c) decodes it here.
**
** idxNum is the plan kind (vt_plan_kind in vtab/plan.h); idxStr spells the
** whole plan, so that EXPLAIN QUERY PLAN, which shows
** "VIRTUAL TABLE INDEX idxNum:idxStr", tells what runs where:
**
**   VT_PLAN_SCAN   0 "scan;cols=HEX"          every live row; SQLite checks
**                                             the constraints
**   VT_PLAN_ROWID  1 "rowid-eq;cols=HEX"      argv[0] is the rowid (or its
**                                             INTEGER PRIMARY KEY alias); row
**                                             groups pruned by their rowid range
**   VT_PLAN_DEVICE 2 "device;cols=HEX;T;T..." the terms T run on the device as
**                                             a program (planner/filter.c);
**                                             argv[i] is term i's value
**   VT_PLAN_PROBE  3 "probe;cols=HEX;T...;key=cN,cM..."
**                                             a join probe: after the terms'
**                                             values, argv holds the values that
**                                             chunks N, M... must equal; the
**                                             first call reads the rows that
**                                             pass the terms once into a hash
**                                             (vtab/probe.c), every call is a
**                                             lookup
**
** cols is colUsed: the columns the statement reads (bit 63: all from 63 on).
** A term T is "c<chunk>:<op>:<flags>:<aff>": chunk 0 the rowid, 1+c column
** c; op a CSQ_OP_* name (azOp below); flags the CSQ_TF_* bits in hex; aff the
** affinity applied to its values (A none, B text, C numeric).
** A scan may go on with ";keeps~N%": pushdown=auto left its terms to the host
** because the zone maps say the filter keeps about N% of the rows (nothing
** reads it back).
** Plans 0 and 2 may end with a pushed LIMIT, after the terms:
**   ";limit=N|?"               argv[nTerm] is the LIMIT value (N: the literal
**                              of the statement, ?: an expression)
**   ";offset=N|?"              argv[nTerm + 1] is the OFFSET value
**   ";order=cK:asc|desc,..."   ORDER BY consumed: the rows come back sorted on
**                              those chunks (top-N of LIMIT + OFFSET rows)
**   ";group=cK:asc|desc,..."   GROUP BY consumed (sqlite3_vtab_distinct 1):
**                              the rows come sorted on those chunks, group
**                              by group (vtab/group.c); no LIMIT pushed
** so a whole plan reads, for example,
**   "device;cols=7;c1:ge:0:C;limit=10;offset=?;order=c2:desc".
**
** The probe plan is chosen for equalities on numeric columns whose right
** sides are not constants (the inner table of a join), BINARY collation,
** tables of up to VT_PROBE_MAX_ROWS rows; they are not omitted, so SQLite
** checks them again. Its terms are the constraints with a literal right
** side (which cannot change during the statement run), pushed as for a
** device plan.
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
**   LIKE, GLOB: pushed, not exact, so SQLite checks again; under the flags
**     pl_like_flags finds for the connection (case_sensitive_like, BLOBs),
**     and not at all when like() or glob() is not SQLite's own;
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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "vtab/plan.h"
#include "device/format/value.h"

/* ---- xBestIndex: choosing and encoding a plan ---------------------------- */

static const char *const azOp[] = {"",   "eq",   "ne",    "lt",     "le",      "gt",
                                   "ge", "is",   "isnot", "isnull", "notnull", "between",
                                   "in", "like", "glob",  "bpf"};

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
  case SQLITE_INDEX_CONSTRAINT_FUNCTION: /* csq_bpf_col(col, 'name'): vt_bpf_find_function */
    return CSQ_OP_BPF;
  default:
    return 0;
  }
}

/* The distinct values of an integer-only chunk, at most: no more than its
** range holds, overall or summed over the row groups. 0: not integers only. */
static double zone_ndv(store_table *const *aTab, int nTab, int c, const csq_zone *pAll) {
  if (pAll->clsMask & ~((1u << CSQ_INT) | (1u << CSQ_NULL))) return 0;
  if (!(pAll->clsMask & (1u << CSQ_INT))) return 1; /* only NULLs */
  double nSum = 0;
  for (int k = 0; k < nTab; k++)
    for (int g = 0; g < aTab[k]->nRg; g++) {
      const store_rg *pRg = aTab[k]->apRg[g];
      const csq_zone *z = &pRg->aChunk[c].zone;
      double nRange = (double)z->iMax - (double)z->iMin + 1;
      double nLive = pRg->nRow - pRg->nDel;
      if (z->clsMask & (1u << CSQ_INT)) nSum += nRange < nLive ? nRange : nLive;
    }
  double nRange = (double)pAll->iMax - (double)pAll->iMin + 1;
  double n = nRange < nSum ? nRange : nSum;
  return n < 1 ? 1 : n;
}

/* The distinct values of a TEXT-only chunk pAll (the merged zone), at
** least: the largest dictionary of a few row groups spread over the table
** (their chunk is read from the device); where one is plain (most values
** distinct), half the values. 0: unknown (a read failed). */
#define VT_NDV_SAMPLES 3
static double text_ndv(vt_tab *p, store_table *const *aTab, int nTab, int c, const csq_zone *pAll) {
  int nRg = 0;
  for (int k = 0; k < nTab; k++) nRg += aTab[k]->nRg;
  double nMax = 0;
  for (int j = 0; j < VT_NDV_SAMPLES && j < nRg; j++) {
    int g = (int)((int64_t)nRg * j / VT_NDV_SAMPLES), k = 0;
    while (g >= aTab[k]->nRg) g -= aTab[k++]->nRg;
    const store_rg *pRg = aTab[k]->apRg[g];
    uint32_t n = 0;
    char *zErr = NULL;
    int rc = store_chunk_distinct(p->apMem[k]->pStore, p->apMem[k]->pQ, aTab[k], pRg, c, &n, &zErr);
    free(zErr);
    if (rc) return 0; /* the scan that reads it reports the error */
    double nd = n == UINT32_MAX ? ((double)pAll->nVal - pAll->nNull) / 2 : n;
    if (nd > nMax) nMax = nd;
  }
  return nMax;
}

void vt_note_table(vt_tab *p, store_table *const *aTab, int nTab, int bSample) {
  int64_t nLive = 0;
  int nRg = 0;
  uint64_t sig = 0; /* which row groups: a written one is new, at a new address */
  for (int k = 0; k < nTab; k++)
    for (int g = 0; g < aTab[k]->nRg; g++, nRg++) {
      nLive += aTab[k]->apRg[g]->nRow - aTab[k]->apRg[g]->nDel;
      sig = (sig ^ (aTab[k]->apRg[g]->lba + (uint64_t)k)) * 0x100000001B3ull;
    }
  p->nRowEst = nLive;
  /* an estimate: the same row groups will do (deletes do not change it) */
  if (nRg == p->nZoneRg && sig == p->zoneSig && p->aZone) return;
  int nChunk = p->s.nCol + 1;
  csq_zone *a = sqlite3_realloc64(p->aZone, sizeof(csq_zone) * (size_t)nChunk);
  p->nZoneRg = 0;
  if (!a) return; /* xBestIndex falls back to fixed guesses */
  p->aZone = a;
  int bHad = p->aNdv != NULL; /* aNdv[c] holds the last estimate (same chunks) */
  double *aNdv = sqlite3_realloc64(p->aNdv, sizeof(double) * (size_t)nChunk);
  if (!aNdv) return;
  p->aNdv = aNdv;
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
    double nOld = bHad ? aNdv[c] : 0;
    aNdv[c] = bFirst ? 0 : zone_ndv(aTab, nTab, c, &a[c]);
    if (!bFirst && aNdv[c] == 0 && (a[c].clsMask & (1u << CSQ_TEXT)) &&
        !(a[c].clsMask & ~((1u << CSQ_TEXT) | (1u << CSQ_NULL))))
      aNdv[c] = bSample ? text_ndv(p, aTab, nTab, c, &a[c]) : nOld;
  }
  p->nZoneRg = nRg;
  p->zoneSig = sig;
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

/* The fraction of rows "= constant" keeps on chunk iChunk: one distinct
** value's share where the distinct values are estimated (integer ranges,
** dictionaries), else a guess. */
static double eq_sel(const vt_tab *p, int iChunk, int bRowid) {
  if (bRowid) return 0.0001;
  double n = p->aNdv && p->nZoneRg ? p->aNdv[iChunk] : 0;
  return n >= 1 ? 1.0 / n : 0.05;
}

/* The fraction of NULLs in chunk iChunk by its zone maps (bNull), or of
** values that are not; -1 unknown. */
static double null_sel(const vt_tab *p, int iChunk, int bNull) {
  if (!p->aZone || p->nZoneRg == 0 || p->aZone[iChunk].nVal == 0) return -1;
  double f = (double)p->aZone[iChunk].nNull / p->aZone[iChunk].nVal;
  return bNull ? f : 1 - f;
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
  /* SQLite 3.40 names BINARY for the "<>" and IS NOT terms it offers over a
  ** column that declares another collation, which the comparison uses:
  ** such a term stays with SQLite */
  if ((op == CSQ_OP_NE || op == CSQ_OP_ISNOT) && !bRowid && p->s.aCol[c->iColumn].bColl &&
      (!zColl || sqlite3_stricmp(zColl, "BINARY") == 0))
    return 0;
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
  case CSQ_OP_BPF: {
    /* csq_bpf_col(col, 'name'): pushed when the name is a literal of a program
    ** of one argument loaded now; exact, as it is the same program */
    const char *zName = bConst ? (const char *)sqlite3_value_text(pRhs) : NULL;
    const vt_bpf *pB = zName ? vt_bpf_find(p->pConn, zName) : NULL;
    if (!pB || vt_bpf_nArg(pB) != 1) return 0;
    flags = 0;
    sel = 0.5;
    break;
  }
  case CSQ_OP_ISNULL:
  case CSQ_OP_NOTNULL:
    sel = null_sel(p, iChunk, op == CSQ_OP_ISNULL);
    if (sel < 0) sel = op == CSQ_OP_ISNULL ? 0.1 : 0.9;
    break;
  case CSQ_OP_LIKE:
  case CSQ_OP_GLOB:
    if (flags) return 0;
    flags = pl_like_flags(p->pConn->db, op == CSQ_OP_GLOB);
    if (flags < 0) return 0;
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
      sel = eq_sel(p, iChunk, bRowid);
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
** scan or device plan whose terms took argv[0..nArg). On success assigns their
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

/*
** Consume a GROUP BY: when SQLite asks for rows grouped on columns of this
** table (sqlite3_vtab_distinct() == 1), the cursor collects them and hands
** them over sorted on those keys (vtab/group.c), faster than SQLite's
** sorter. Only when the rows' used columns fit VT_GROUP_BUDGET (about 16
** bytes a value), for a table declared without COLLATE (the cursor
** compares BINARY) and at most VT_GROUP_MAXKEY keys. Appends ";group=..."
** to pStr and returns 1.
*/
static int plan_group(const vt_tab *p, sqlite3_index_info *pInfo, sqlite3_str *pStr) {
  if (pInfo->nOrderBy < 1 || pInfo->nOrderBy > VT_GROUP_MAXKEY ||
      sqlite3_vtab_distinct(pInfo) != 1 || sqlite3_strlike("%COLLATE%", p->s.zDeclare, 0) == 0)
    return 0;
  int nUsed = 1 + __builtin_popcountll((unsigned long long)pInfo->colUsed);
  if ((double)(p->nRowEst > 0 ? p->nRowEst : 0) * nUsed * 16 > (double)VT_GROUP_BUDGET) return 0;
  for (int k = 0; k < pInfo->nOrderBy; k++)
    if (pInfo->aOrderBy[k].iColumn >= p->s.nCol) return 0;
  for (int k = 0; k < pInfo->nOrderBy; k++) {
    int iCol = pInfo->aOrderBy[k].iColumn;
    int iChunk = iCol < 0 || iCol == p->s.iIpk ? 0 : iCol + 1;
    sqlite3_str_appendf(pStr, "%sc%d:%s", k ? "," : ";group=", iChunk,
                        pInfo->aOrderBy[k].desc ? "desc" : "asc");
  }
  pInfo->orderByConsumed = 1;
  return 1;
}

/*
** The fraction of rows that the constraints with constant right sides
** (and IS [NOT] NULL) keep, estimated as for pushed terms, for a plan that
** leaves them to SQLite (a small table read on the host, a filter keeping
** most rows): SQLite orders the joins by estimatedRows, so a dimension
** table filtered to a few rows must say so even when it is scanned whole.
** Only reads pInfo (no constraint is used).
*/
static double host_sel(const vt_tab *p, sqlite3_index_info *pInfo) {
  double sel = 1.0;
  for (int i = 0; i < pInfo->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &pInfo->aConstraint[i];
    int op = map_op(c->op);
    if (!c->usable || !op || op == CSQ_OP_BPF) continue;
    int bRowid = c->iColumn < 0 || c->iColumn == p->s.iIpk;
    int iChunk = bRowid ? 0 : c->iColumn + 1;
    sqlite3_value *pRhs = NULL;
    int bConst = sqlite3_vtab_rhs_value(pInfo, i, &pRhs) == SQLITE_OK;
    double s1 = -1;
    switch (op) {
    case CSQ_OP_ISNULL:
    case CSQ_OP_NOTNULL:
      s1 = null_sel(p, iChunk, op == CSQ_OP_ISNULL);
      if (s1 < 0) s1 = op == CSQ_OP_ISNULL ? 0.1 : 0.9;
      break;
    case CSQ_OP_LIKE:
    case CSQ_OP_GLOB:
      if (bConst) s1 = 0.25;
      break;
    case CSQ_OP_EQ:
    case CSQ_OP_IS:
      if (sqlite3_vtab_in(pInfo, i, -1))
        s1 = 0.2;
      else if (bConst)
        s1 = eq_sel(p, iChunk, bRowid);
      break;
    case CSQ_OP_NE:
    case CSQ_OP_ISNOT:
      if (bConst) s1 = 0.9;
      break;
    default: /* < <= > >= */
      if (bConst) {
        int bNumeric = bRowid || p->s.aCol[c->iColumn].aff >= VT_AFF_NUMERIC;
        double f = zone_frac(p, iChunk, pRhs, bNumeric);
        s1 = f < 0                                                                        ? 0.3
             : c->op == SQLITE_INDEX_CONSTRAINT_LT || c->op == SQLITE_INDEX_CONSTRAINT_LE ? f
                                                                                          : 1 - f;
      }
    }
    if (s1 >= 0) sel *= s1;
  }
  return sel;
}

/* Rows of the table per distinct value of the probed chunks (the keys
** assumed independent; a chunk without an estimate counts ten rows a value). */
static double rows_per_key(const vt_tab *p, const int *aChunk, int nKey, double nRow) {
  double nKeys = 1;
  for (int k = 0; k < nKey; k++) {
    double n = p->aNdv && p->nZoneRg ? p->aNdv[aChunk[k]] : 0;
    nKeys *= n > 0 ? n : nRow / 10;
  }
  if (nKeys > nRow) nKeys = nRow;
  return nKeys >= 1 ? nRow / nKeys : nRow;
}

/*
** What one lookup of a probe costs beyond its nHit rows: the chunks it
** decodes again. A probe copies the columns the statement reads only while
** they fit the connection's copy budget (vt_probe_expect); past it, it
** reads them from row-group chunks it caches up to the chunk budget. When
** the chunks do not fit either, each lookup of a key scattered over the
** table sweeps its row groups and decodes again the share of their chunks
** that the cache could not keep: SQLite should then rather scan this table
** once as the outer table than probe it once per outer row. The rows of a
** key are assumed scattered over the row groups (a foreign key in a fact
** table); a row group holds about nRow / nRg rows, decoding one costs that.
*/
static double probe_reread_cost(const vt_tab *p, double nRow, double sel, int nKey,
                                unsigned long long colUsed, double nHit) {
  int nWant = 0;
  for (int i = 0; i < p->s.nCol; i++)
    if (i != p->s.iIpk && (i >= 63 ? (colUsed >> 63) & 1 : (colUsed >> i) & 1)) nWant++;
  int nLazy = nWant - nKey;
  if (nLazy <= 0) return 0;
  double nCopy = nRow * sel * (nWant > nKey ? nWant : nKey) * VT_PROBE_VALUE_BYTES;
  if (nCopy <= (double)p->pConn->nProbeCopy) return 0; /* every column copied */
  double nChunk = nRow * nLazy * VT_PROBE_VALUE_BYTES;
  double nKeep = (double)p->pConn->nProbeChunks;
  if (nChunk <= nKeep) return nHit; /* each chunk decoded once; a lookup reads scattered rows */
  double nRg = p->nZoneRg > 0 ? p->nZoneRg : ceil(nRow / VT_ROWGROUP_ROWS);
  if (nRg < 1) nRg = 1;
  double nTouched = nHit < nRg ? nHit : nRg;
  return nHit + nTouched * nLazy * (1.0 - nKeep / nChunk) * (nRow / nRg);
}

/*
** The probe plan, if the table is the inner table of a join: its keys are
** the usable equalities (not IN) on numeric columns, BINARY, whose right
** side is not a literal (another table's column); the terms with literal
** right sides (and IS [NOT] NULL) filter the rows the probe is built of, as
** a device program. Returns 1 with pInfo filled, 0 (pInfo untouched) if
** there is no key or the probe would not fit VT_PROBE_BUDGET.
*/
static int plan_probe(vt_tab *p, sqlite3_index_info *pInfo, double nRow,
                      unsigned long long colUsed) {
  if (p->nRowEst > VT_PROBE_MAX_ROWS) return 0;
  int aKeyCons[VT_PROBE_MAXKEY], aKeyChunk[VT_PROBE_MAXKEY], nKey = 0;
  for (int i = 0; i < pInfo->nConstraint && nKey < VT_PROBE_MAXKEY; i++) {
    const struct sqlite3_index_constraint *c = &pInfo->aConstraint[i];
    sqlite3_value *pRhs = NULL;
    const char *zColl = sqlite3_vtab_collation(pInfo, i);
    if (!c->usable || c->op != SQLITE_INDEX_CONSTRAINT_EQ || c->iColumn < 0 ||
        c->iColumn == p->s.iIpk || p->s.aCol[c->iColumn].aff < VT_AFF_NUMERIC ||
        (zColl && sqlite3_stricmp(zColl, "BINARY") != 0) || sqlite3_vtab_in(pInfo, i, -1) ||
        sqlite3_vtab_rhs_value(pInfo, i, &pRhs) == SQLITE_OK)
      continue;
    int bDup = 0;
    for (int k = 0; k < nKey; k++) bDup |= aKeyChunk[k] == c->iColumn + 1;
    if (bDup) continue; /* "a = x AND a = y": one key, SQLite checks the other */
    aKeyCons[nKey] = i;
    aKeyChunk[nKey++] = c->iColumn + 1;
  }
  if (nKey == 0) return 0;
  sqlite3_str *pStr = sqlite3_str_new(NULL);
  sqlite3_str_appendf(pStr, "probe;cols=%llx", colUsed);
  int nArg = 0;
  double sel = 1.0;
  for (int i = 0; i < pInfo->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &pInfo->aConstraint[i];
    sqlite3_value *pRhs = NULL;
    int bKey = 0, bOmit = 0, bEst = 0;
    double s1 = 1.0;
    for (int k = 0; k < nKey; k++) bKey |= aKeyCons[k] == i;
    if (bKey || !c->usable || p->s.ePush == VT_PUSH_NEVER) continue;
    if (c->op != SQLITE_INDEX_CONSTRAINT_ISNULL && c->op != SQLITE_INDEX_CONSTRAINT_ISNOTNULL &&
        sqlite3_vtab_rhs_value(pInfo, i, &pRhs) != SQLITE_OK)
      continue; /* not known to stay the same for the statement run */
    if (sqlite3_vtab_in(pInfo, i, -1) || !plan_term(p, pInfo, i, pStr, &bOmit, &s1, &bEst))
      continue;
    pInfo->aConstraintUsage[i].argvIndex = ++nArg;
    pInfo->aConstraintUsage[i].omit = (unsigned char)bOmit;
    sel *= s1;
  }
  for (int k = 0; k < nKey; k++) {
    pInfo->aConstraintUsage[aKeyCons[k]].argvIndex = nArg + 1 + k;
    pInfo->aConstraintUsage[aKeyCons[k]].omit = 0;
    sqlite3_str_appendf(pStr, "%sc%d", k ? "," : ";key=", aKeyChunk[k]);
  }
  /* the probe holds its rows' keys and locations (other columns are read
  ** from their chunks if they do not fit): a table too large for the
  ** budget is probed by device scans instead */
  double nBytes = nRow * sel * (nKey + 1) * VT_PROBE_VALUE_BYTES;
  if (nBytes > (double)VT_PROBE_BUDGET) {
    sqlite3_free(sqlite3_str_finish(pStr));
    for (int i = 0; i < pInfo->nConstraint; i++) {
      pInfo->aConstraintUsage[i].argvIndex = 0;
      pInfo->aConstraintUsage[i].omit = 0;
    }
    return 0;
  }
  pInfo->idxStr = sqlite3_str_finish(pStr);
  double nHit = rows_per_key(p, aKeyChunk, nKey, nRow) * sel;
  if (nHit < 1) nHit = 1;
  /* built once (about a scan), then a hash lookup per call: what a call
  ** costs is its rows, and the chunks it must decode again */
  pInfo->idxNum = VT_PLAN_PROBE;
  pInfo->estimatedCost = 2.0 + nHit + probe_reread_cost(p, nRow, sel, nKey, colUsed, nHit);
  pInfo->estimatedRows = (sqlite3_int64)nHit;
  return 1;
}

int vt_best_index(sqlite3_vtab *pVtab, sqlite3_index_info *pInfo) {
  vt_tab *p = (vt_tab *)pVtab;
  vt_drop_settle(p->pConn, NULL); /* a read after COMMIT frees what the transaction dropped */
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
  if (iEq < 0 && plan_probe(p, pInfo, nRow, colUsed)) {
    /* chosen: the keys and constant terms are assigned */
  } else if (iEq >= 0) {
    pInfo->idxNum = VT_PLAN_ROWID;
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
    if (!bLimit) bLimit = plan_group(p, pInfo, pLim);
    char *zLim = sqlite3_str_finish(pLim);
    if (!zLim && bLimit) {
      sqlite3_free(zTerms);
      return SQLITE_NOMEM;
    }
    if (nArg > 0) {
      double nOut = nRow * sel < 1 ? 1 : nRow * sel;
      if (nCap > 0 && nOut > (double)nCap) nOut = (double)nCap;
      pInfo->idxNum = VT_PLAN_DEVICE;
      pInfo->estimatedCost = 50.0 + nRow * 0.02 + nOut;
      pInfo->estimatedRows = (sqlite3_int64)nOut;
      pInfo->idxStr =
          sqlite3_mprintf("device;cols=%llx%s%s", colUsed, zTerms ? zTerms : "", zLim ? zLim : "");
    } else {
      /* SQLite checks every constraint: its rows are those they keep */
      double nOut = nRow * host_sel(p, pInfo);
      if (nOut < 1) nOut = 1;
      if (nCap > 0 && nOut > (double)nCap) nOut = (double)nCap;
      pInfo->idxNum = VT_PLAN_SCAN;
      pInfo->estimatedCost = 100.0 + nRow;
      pInfo->estimatedRows = (sqlite3_int64)nOut;
      pInfo->idxStr = sqlite3_mprintf("scan;cols=%llx%s%s", colUsed, zKeeps, zLim ? zLim : "");
    }
    sqlite3_free(zTerms);
    sqlite3_free(zLim);
  }
  pInfo->needToFreeIdxStr = 1;
  return pInfo->idxStr ? SQLITE_OK : SQLITE_NOMEM;
}

/* ---- xFilter: decoding a plan -------------------------------------------- */

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

/* An integer LIMIT/OFFSET value (SQLite made it one: MustBeInt). */
static int limit_value(sqlite3_value *v, int64_t *pn) {
  if (sqlite3_value_type(v) != SQLITE_INTEGER) return 0;
  *pn = sqlite3_value_int64(v);
  return 1;
}

/*
** Read the ";limit", ";offset" and ";order" parts of a scan or device plan: sets
** nLeft (LIMIT + OFFSET rows, -1 no cap), nSkip (the OFFSET, rows SQLite
** drops itself) and the sort keys, whose columns are added to colUsed so
** that they are fetched. The LIMIT and OFFSET values follow the nTerm terms'
** values in argv.
*/
static int decode_limit(vt_tab *p, const char *idxStr, int argc, sqlite3_value **argv,
                        vt_plan *pPlan) {
  int nTerm = pPlan->nTerm;
  const char *zLim = idxStr ? strstr(idxStr, ";limit=") : NULL;
  if (!zLim) return SQLITE_OK;
  const char *zOff = strstr(zLim, ";offset=");
  const char *zOrd = strstr(zLim, ";order=");
  if (argc < nTerm + 1 + (zOff != NULL)) goto malformed;
  int64_t nLim = -1, nOff = 0;
  int bLim = limit_value(argv[nTerm], &nLim);
  int bOff = !zOff || limit_value(argv[nTerm + 1], &nOff);
  if (nOff < 0) nOff = 0; /* SQLite: a negative OFFSET is none */
  if (bOff) pPlan->nSkip = nOff;
  if (bLim && bOff && nLim >= 0) pPlan->nLeft = nLim > INT64_MAX - nOff ? -1 : nLim + nOff;
  if (zOrd) {
    const char *z = zOrd + 7;
    for (;;) {
      int iChunk = -1, nUsed = 0;
      char zDir[5] = "";
      if (pPlan->nKey >= VT_TOPN_MAXKEY || sscanf(z, "c%d:%4[a-z]%n", &iChunk, zDir, &nUsed) != 2 ||
          iChunk < 0 || iChunk > p->s.nCol || (strcmp(zDir, "asc") && strcmp(zDir, "desc")))
        goto malformed;
      if (iChunk == p->s.iIpk + 1) iChunk = 0; /* the rowid's alias is the rowid */
      pPlan->aKeyChunk[pPlan->nKey] = iChunk;
      pPlan->aKeyDesc[pPlan->nKey++] = zDir[0] == 'd';
      if (iChunk > 0) pPlan->colUsed |= (uint64_t)1 << (iChunk - 1 < 63 ? iChunk - 1 : 63);
      z += nUsed;
      if (*z != ',') break;
      z++;
    }
    pPlan->nSkip = 0; /* the top-N reads every row anyway */
  }
  return SQLITE_OK;
malformed:
  vt_set_error(&p->base, "csq: malformed plan '%s'", idxStr);
  return SQLITE_ERROR;
}

/* The ";group=cK,..." part of a scan or device plan: the group keys,
** whose columns are added to colUsed so that they are fetched. */
static int decode_group(vt_tab *p, const char *idxStr, vt_plan *pPlan) {
  const char *z = idxStr ? strstr(idxStr, ";group=") : NULL;
  if (!z) return SQLITE_OK;
  z += 7;
  for (;;) {
    int iChunk = -1, nUsed = 0;
    char zDir[5] = "";
    if (pPlan->nGroup >= VT_GROUP_MAXKEY ||
        sscanf(z, "c%d:%4[a-z]%n", &iChunk, zDir, &nUsed) != 2 || iChunk < 0 ||
        iChunk > p->s.nCol || (strcmp(zDir, "asc") && strcmp(zDir, "desc"))) {
      vt_set_error(&p->base, "csq: malformed plan '%s'", idxStr);
      return SQLITE_ERROR;
    }
    if (iChunk == p->s.iIpk + 1) iChunk = 0; /* the rowid's alias is the rowid */
    pPlan->aGroupDesc[pPlan->nGroup] = zDir[0] == 'd';
    pPlan->aGroupChunk[pPlan->nGroup++] = iChunk;
    if (iChunk > 0) pPlan->colUsed |= (uint64_t)1 << (iChunk - 1 < 63 ? iChunk - 1 : 63);
    z += nUsed;
    if (*z != ',') break;
    z++;
  }
  return SQLITE_OK;
}

/* The probed chunks of a plan 3: its ";key=cN,cM..." segment, whose values
** follow the terms' in argv. */
static int decode_probe(vt_tab *p, const char *idxStr, int argc, vt_plan *pPlan) {
  const char *z = idxStr ? strstr(idxStr, ";key=") : NULL;
  pPlan->nTerm = idxStr ? count_terms(idxStr) : 0;
  pPlan->nProbeKey = 0;
  if (z) {
    z += 5;
    for (;;) {
      int iChunk = 0, nUsed = 0;
      if (pPlan->nProbeKey >= VT_PROBE_MAXKEY || sscanf(z, "c%d%n", &iChunk, &nUsed) != 1 ||
          iChunk < 1 || iChunk > p->s.nCol)
        goto malformed;
      pPlan->aProbeChunk[pPlan->nProbeKey++] = iChunk;
      z += nUsed;
      if (*z != ',') break;
      z++;
    }
  }
  if (pPlan->nProbeKey == 0 || argc < pPlan->nTerm + pPlan->nProbeKey) goto malformed;
  return SQLITE_OK;
malformed:
  vt_set_error(&p->base, "csq: malformed probe plan '%s'", idxStr ? idxStr : "");
  return SQLITE_ERROR;
}

int vt_plan_decode(vt_tab *p, int idxNum, const char *idxStr, int argc, sqlite3_value **argv,
                   vt_plan *pPlan) {
  memset(pPlan, 0, sizeof(*pPlan));
  pPlan->eKind = idxNum;
  pPlan->nLeft = -1;
  pPlan->colUsed = ~(uint64_t)0;
  const char *zCols = idxStr ? strstr(idxStr, ";cols=") : NULL;
  if (zCols) pPlan->colUsed = strtoull(zCols + 6, NULL, 16);
  switch (idxNum) {
  case VT_PLAN_SCAN:
  case VT_PLAN_DEVICE:
    pPlan->nTerm = idxStr ? count_terms(idxStr) : 0;
    if (decode_group(p, idxStr, pPlan)) return SQLITE_ERROR;
    return decode_limit(p, idxStr, argc, argv, pPlan);
  case VT_PLAN_PROBE:
    return decode_probe(p, idxStr, argc, pPlan);
  default:
    return SQLITE_OK;
  }
}

void vt_plan_terms_free(pl_cons *aTerm, int nTerm) {
  for (int i = 0; i < nTerm; i++) {
    for (int k = 0; k < aTerm[i].nVal; k++) sqlite3_value_free(aTerm[i].apVal[k]);
    sqlite3_free(aTerm[i].apVal);
  }
}

/* Parse the terms of a "device" idxStr into a[] (values from argv; IN
** lists read with sqlite3_vtab_in_first/next and copied). Returns the number
** of terms, or -1 on a malformed idxStr or no memory (a[0..nMax) then holds
** whatever was parsed, zeroed beyond). */
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

int vt_plan_terms(vt_tab *p, const vt_plan *pPlan, const char *idxStr, sqlite3_value **argv,
                  pl_cons *aTerm, int *pnTerm) {
  int nArg = pPlan->nTerm;
  *pnTerm = 0;
  memset(aTerm, 0, sizeof(pl_cons) * (size_t)nArg);
  int nTerm = parse_terms(idxStr, nArg, argv, aTerm, nArg);
  if (nTerm < 0) {
    vt_plan_terms_free(aTerm, nArg); /* whatever was parsed */
    vt_set_error(&p->base, "csq: malformed plan '%s'", idxStr);
    return SQLITE_ERROR;
  }
  for (int i = 0; i < nTerm; i++) {
    if (aTerm[i].op != CSQ_OP_BPF) continue;
    /* the program the name means now: the one csq_bpf would run */
    const char *zName = (const char *)sqlite3_value_text(aTerm[i].apVal[0]);
    const vt_bpf *pB = zName ? vt_bpf_find(p->pConn, zName) : NULL;
    if (!pB || vt_bpf_nArg(pB) != 1) {
      vt_plan_terms_free(aTerm, nTerm);
      vt_set_error(&p->base, "csq_bpf: no eBPF program of one argument named '%s'",
                   zName ? zName : "");
      return SQLITE_ERROR;
    }
    vt_bpf_code(pB, &aTerm[i].aBpfIns, &aTerm[i].nBpfIns, &aTerm[i].aBpfDecl);
  }
  int nKeep = 0;
  for (int i = 0; i < nTerm; i++)
    if (keep_term(&aTerm[i]))
      aTerm[nKeep++] = aTerm[i];
    else
      vt_plan_terms_free(&aTerm[i], 1);
  *pnTerm = nKeep;
  return SQLITE_OK;
}
