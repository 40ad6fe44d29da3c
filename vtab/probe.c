/*
** vtab/probe.c - the join probe cache: what lets a csq table be the inner
** table of a nested-loop join without a scan per outer row.
**
** SQLite builds automatic indexes for its own tables, never for virtual
** ones, so "fact JOIN dim ON f.k = d.k" calls the inner table's xFilter once
** per outer row with a different value of d.k. For such a probe (VT_PLAN_PROBE
** in vtab/plan.c: equalities on numeric columns whose right sides are not
** constants, and the constant terms beside them) the cursor reads the rows
** that pass the constant terms once (through a device program when there
** are such terms), keeps the columns the statement uses here, and hashes
** the probed columns together; each later xFilter is a hash lookup. The
** cache lives as long as the statement run (a closing cursor hands it to
** the next, see vt_probe_keep) and is rebuilt if the table is written
** meanwhile.
**
** The lookup is exact for SQLite's "=" between a numeric-affinity column and
** any value (numeric affinity is applied to the value first; integers and
** reals compare by value, TEXT and BLOB by their bytes), and SQLite checks
** the constraints again anyway (the plan does not omit the keys). Values
** hash and compare by device/format/value.h (csq_value_hash, csq_value_eq).
*/
#include <stdlib.h>
#include <string.h>

#include "vtab/vtab.h"
#include "device/format/value.h"

struct vt_probe {
  int nVec; /* vectors kept: [0] rowid, [1 + i] column i (as the cursor's aVec) */
  csq_vec *aVec;
  uint8_t *aKeep; /* which of them hold data */
  int nKey;       /* the vectors whose values are hashed, together */
  int aKey[VT_PROBE_MAXKEY];
  uint32_t n;       /* rows */
  uint32_t *aStart; /* bucket b's rows are positions [aStart[b], aStart[b + 1]) */
  uint32_t *aPos;   /* position -> row; NULL: rows were reordered, the same */
  uint32_t nBucket;
  uint32_t *aHit; /* rows of the last lookup */
  uint32_t nHit, nHitAlloc;
  uint64_t stamp;                   /* the table's write count when built */
  char *zSig;                       /* the filter the rows passed, with its values (never NULL) */
  csq_vec aKeyVal[VT_PROBE_MAXKEY]; /* the values sought, converted */
};

vt_probe *vt_probe_new(int nVec, const uint8_t *aKeep, const int *aKey, int nKey, const char *zSig,
                       uint64_t stamp) {
  if (nKey < 1 || nKey > VT_PROBE_MAXKEY) return NULL;
  vt_probe *p = sqlite3_malloc64(sizeof(*p));
  if (!p) return NULL;
  memset(p, 0, sizeof(*p));
  p->aVec = sqlite3_malloc64(sizeof(csq_vec) * (size_t)nVec);
  p->aKeep = sqlite3_malloc64((size_t)nVec);
  p->zSig = sqlite3_mprintf("%s", zSig ? zSig : "");
  if (!p->aVec || !p->aKeep || !p->zSig) {
    sqlite3_free(p->aVec);
    sqlite3_free(p->aKeep);
    sqlite3_free(p->zSig);
    sqlite3_free(p);
    return NULL;
  }
  for (int i = 0; i < nVec; i++) csq_vec_init(&p->aVec[i]);
  for (int k = 0; k < VT_PROBE_MAXKEY; k++) csq_vec_init(&p->aKeyVal[k]);
  memcpy(p->aKeep, aKeep, (size_t)nVec);
  for (int k = 0; k < nKey; k++) {
    p->aKey[k] = aKey[k];
    p->aKeep[aKey[k]] = 1;
  }
  p->nVec = nVec;
  p->nKey = nKey;
  p->stamp = stamp;
  return p;
}

void vt_probe_free(vt_probe *p) {
  if (!p) return;
  for (int i = 0; i < p->nVec; i++) csq_vec_free(&p->aVec[i]);
  for (int k = 0; k < VT_PROBE_MAXKEY; k++) csq_vec_free(&p->aKeyVal[k]);
  sqlite3_free(p->aVec);
  sqlite3_free(p->aKeep);
  sqlite3_free(p->zSig);
  free(p->aStart);
  free(p->aPos);
  free(p->aHit);
  sqlite3_free(p);
}

uint64_t vt_probe_stamp(const vt_probe *p) {
  return p->stamp;
}

/* The probe holds at least the vectors aKeep names, hashed on aKey, of the
** rows that passed the filter zSig. */
static int probe_fits(const vt_probe *p, int nVec, const uint8_t *aKeep, const int *aKey, int nKey,
                      const char *zSig) {
  if (p->nVec != nVec || p->nKey != nKey || strcmp(p->zSig, zSig ? zSig : "") != 0) return 0;
  for (int k = 0; k < nKey; k++)
    if (p->aKey[k] != aKey[k]) return 0;
  for (int i = 0; i < nVec; i++)
    if (aKeep[i] && !p->aKeep[i]) return 0;
  return 1;
}

/* A correlated subquery over a csq table (EXISTS, IN, a scalar) is run once
** per outer row, and SQLite opens and closes its cursor each time: the
** probe a closing cursor built is kept on its table for the next cursor of
** the same statement run, so the table is read and hashed once per
** statement, not once per outer row. The run is pConn->stmtEpoch while any
** of its cursors is open; vt_stmt_leave drops what is kept when the last
** one closes. */
void vt_probe_keep(vt_tab *pTab, vt_probe *p) {
  vt_conn *pConn = pTab->pConn;
  if (!p) return; /* a cursor without a probe leaves the kept one alone */
  vt_probe_free(pTab->pKeptProbe);
  pTab->pKeptProbe = NULL;
  if (pConn->nStmtCur <= 1 || p->stamp != pTab->nWrite) {
    vt_probe_free(p); /* the run ends with this cursor, or the table changed */
    return;
  }
  pTab->pKeptProbe = p;
  pTab->keptEpoch = pConn->stmtEpoch;
}

vt_probe *vt_probe_take(vt_tab *pTab, int nVec, const uint8_t *aKeep, const int *aKey, int nKey,
                        const char *zSig) {
  vt_probe *p = pTab->pKeptProbe;
  if (!p) return NULL;
  pTab->pKeptProbe = NULL;
  if (pTab->keptEpoch == pTab->pConn->stmtEpoch && pTab->pConn->nStmtCur > 0 &&
      p->stamp == pTab->nWrite && probe_fits(p, nVec, aKeep, aKey, nKey, zSig))
    return p;
  vt_probe_free(p);
  return NULL;
}

void vt_probe_drop_kept(vt_conn *pConn) {
  for (vt_tab *t = pConn->pTabs; t; t = t->pNextTab) {
    vt_probe_free(t->pKeptProbe);
    t->pKeptProbe = NULL;
  }
}
uint32_t vt_probe_rows(const vt_probe *p) {
  return p->n;
}

int vt_probe_reserve(vt_probe *p, uint32_t nRow) {
  for (int i = 0; i < p->nVec; i++)
    if (p->aKeep[i] && csq_vec_reserve(&p->aVec[i], nRow, 0)) return SQLITE_NOMEM;
  return SQLITE_OK;
}

int vt_probe_append(vt_probe *p, const csq_vec *const *apSrc, uint32_t iRow, uint32_t n) {
  for (int i = 0; i < p->nVec; i++) {
    if (!p->aKeep[i]) continue;
    if (!apSrc[i]) return SQLITE_INTERNAL; /* the scan did not fetch a column the probe keeps */
    if (csq_vec_append(&p->aVec[i], apSrc[i], iRow, n)) return SQLITE_NOMEM;
  }
  p->n += n;
  return SQLITE_OK;
}

/* The hash of row r's key (UINT64_MAX: a key is NULL, and "=" never holds). */
static uint64_t row_hash(const csq_vec *const *apKey, int nKey, uint32_t r) {
  uint64_t h = 0;
  for (int k = 0; k < nKey; k++) {
    csq_value v = csq_value_of_vec(apKey[k], r);
    if (v.cls == CSQ_NULL) return UINT64_MAX;
    h = csq_mix64(h ^ csq_value_hash(&v));
  }
  return h;
}

/*
** Hash every row and list the rows bucket by bucket, in table order within
** each (a counting sort), so that a lookup reads one run of positions. When
** many rows share a key and they lie scattered over the table (a foreign
** key probed from its parent), the kept vectors are reordered to that list
** too: a lookup then reads adjacent rows instead of missing the cache on
** each. Rows with a NULL key are left out: no lookup can find them.
*/
int vt_probe_index(vt_probe *p) {
  uint32_t nb = 16;
  while (nb < 2 * (uint64_t)p->n && nb < (1u << 31)) nb <<= 1;
  free(p->aStart);
  free(p->aPos);
  p->aPos = NULL;
  p->aStart = calloc((size_t)nb + 1, sizeof(uint32_t));
  uint32_t *aBkt = malloc(sizeof(uint32_t) * (p->n ? p->n : 1));
  uint32_t *aPos = malloc(sizeof(uint32_t) * (p->n ? p->n : 1));
  if (!p->aStart || !aBkt || !aPos) {
    free(aBkt);
    free(aPos);
    return SQLITE_NOMEM;
  }
  p->nBucket = nb;
  const csq_vec *apKey[VT_PROBE_MAXKEY];
  for (int k = 0; k < p->nKey; k++) apKey[k] = &p->aVec[p->aKey[k]];
  uint32_t nLive = 0;
  for (uint32_t r = 0; r < p->n; r++) {
    uint64_t h = row_hash(apKey, p->nKey, r);
    aBkt[r] = h == UINT64_MAX ? UINT32_MAX : (uint32_t)h & (nb - 1);
    if (aBkt[r] != UINT32_MAX) {
      p->aStart[aBkt[r] + 1]++;
      nLive++;
    }
  }
  for (uint32_t b = 0; b < nb; b++) p->aStart[b + 1] += p->aStart[b];
  /* aStart[b] counts up while filling, then is restored from its neighbour */
  for (uint32_t r = 0; r < p->n; r++)
    if (aBkt[r] != UINT32_MAX) aPos[p->aStart[aBkt[r]]++] = r;
  for (uint32_t b = nb; b > 0; b--) p->aStart[b] = p->aStart[b - 1];
  p->aStart[0] = 0;
  free(aBkt);
  /* rows that follow a row of their bucket, and those of them that are
  ** its neighbour in the table already */
  uint32_t nShared = 0, nAdjacent = 0;
  for (uint32_t b = 0; b < nb; b++)
    for (uint32_t i = p->aStart[b] + 1; i < p->aStart[b + 1]; i++) {
      nShared++;
      nAdjacent += aPos[i] == aPos[i - 1] + 1;
    }
  if (nShared > nLive / 2 && nAdjacent < nShared / 2) {
    for (int i = 0; i < p->nVec; i++)
      if (p->aKeep[i] && csq_vec_permute(&p->aVec[i], aPos, nLive)) {
        free(aPos);
        return SQLITE_NOMEM;
      }
    free(aPos);
    p->n = nLive;
  } else {
    p->aPos = aPos;
  }
  return SQLITE_OK;
}

int vt_probe_find(vt_probe *p, sqlite3_value **apVal) {
  p->nHit = 0;
  const csq_vec *apKey[VT_PROBE_MAXKEY];
  csq_value aSought[VT_PROBE_MAXKEY];
  uint64_t h = 0;
  for (int k = 0; k < p->nKey; k++) {
    csq_vec *pv = &p->aKeyVal[k];
    csq_vec_reset(pv);
    /* the comparison applies the column's numeric affinity to the value */
    if (vt_push_value(pv, apVal[k], VT_AFF_NUMERIC)) return SQLITE_NOMEM;
    aSought[k] = csq_value_of_vec(pv, 0);
    if (aSought[k].cls == CSQ_NULL) return SQLITE_OK; /* "=" NULL: no row */
    h = csq_mix64(h ^ csq_value_hash(&aSought[k]));
    apKey[k] = &p->aVec[p->aKey[k]];
  }
  uint32_t b = (uint32_t)h & (p->nBucket - 1);
  uint32_t r1 = p->aStart[b + 1];
  for (uint32_t i = p->aStart[b]; i < r1; i++) {
    uint32_t r = p->aPos ? p->aPos[i] : i;
    int k = 0;
    while (k < p->nKey) {
      csq_value x = csq_value_of_vec(apKey[k], r);
      if (!csq_value_eq(&x, &aSought[k])) break;
      k++;
    }
    if (k < p->nKey) continue;
    if (p->nHit == p->nHitAlloc) {
      uint32_t nNew = p->nHitAlloc ? p->nHitAlloc * 2 : 16;
      uint32_t *a = realloc(p->aHit, sizeof(uint32_t) * nNew);
      if (!a) return SQLITE_NOMEM;
      p->aHit = a;
      p->nHitAlloc = nNew;
    }
    p->aHit[p->nHit++] = r;
  }
  return SQLITE_OK;
}

uint32_t vt_probe_nhit(const vt_probe *p) {
  return p->nHit;
}

const csq_vec *vt_probe_value(const vt_probe *p, int iVec, uint32_t iHit, uint32_t *piRow) {
  *piRow = p->aHit[iHit];
  return p->aKeep[iVec] ? &p->aVec[iVec] : NULL;
}
