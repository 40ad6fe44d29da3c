/*
** vtab/probe.c - the join probe cache: what lets a csq table be the inner
** table of a nested-loop join without a scan per outer row.
**
** SQLite builds automatic indexes for its own tables, never for virtual
** ones, so "fact JOIN dim ON f.k = d.k" calls the inner table's xFilter once
** per outer row with a different value of d.k. For such a probe (VT_PLAN_PROBE
** in vtab/plan.c: an equality on a numeric column whose right side is not a
** constant) the cursor reads the table once, keeps the columns the
** statement uses here, and hashes the probed column; each later xFilter is a
** hash lookup. The cache lives as long as the statement run (a closing
** cursor hands it to the next, see vt_probe_keep) and is rebuilt if the
** table is written meanwhile.
**
** The lookup is exact for SQLite's "=" between a numeric-affinity column and
** any value (numeric affinity is applied to the value first; integers and
** reals compare by value, TEXT and BLOB by their bytes), and SQLite checks
** the constraint again anyway (the plan does not set omit). Values hash
** and compare by device/format/value.h (csq_value_hash, csq_value_eq).
*/
#include <stdlib.h>
#include <string.h>

#include "vtab/vtab.h"
#include "device/format/value.h"

struct vt_probe {
  int nVec; /* vectors kept: [0] rowid, [1 + i] column i (as the cursor's aVec) */
  csq_vec *aVec;
  uint8_t *aKeep;  /* which of them hold data */
  int iKey;        /* the vector whose values are hashed */
  uint32_t n;      /* rows */
  uint32_t *aHead; /* bucket -> first row + 1 (0 = none) */
  uint32_t *aNext; /* row -> next row + 1 in its bucket */
  uint32_t nBucket;
  uint32_t *aHit; /* rows of the last lookup */
  uint32_t nHit, nHitAlloc;
  uint64_t stamp; /* the table's write count when built */
  csq_vec key;    /* the value sought, converted (kept: a join looks up once per outer row) */
};

vt_probe *vt_probe_new(int nVec, const uint8_t *aKeep, int iKey, uint64_t stamp) {
  vt_probe *p = sqlite3_malloc64(sizeof(*p));
  if (!p) return NULL;
  memset(p, 0, sizeof(*p));
  p->aVec = sqlite3_malloc64(sizeof(csq_vec) * (size_t)nVec);
  p->aKeep = sqlite3_malloc64((size_t)nVec);
  if (!p->aVec || !p->aKeep) {
    sqlite3_free(p->aVec);
    sqlite3_free(p->aKeep);
    sqlite3_free(p);
    return NULL;
  }
  for (int i = 0; i < nVec; i++) csq_vec_init(&p->aVec[i]);
  csq_vec_init(&p->key);
  memcpy(p->aKeep, aKeep, (size_t)nVec);
  p->aKeep[iKey] = 1;
  p->nVec = nVec;
  p->iKey = iKey;
  p->stamp = stamp;
  return p;
}

void vt_probe_free(vt_probe *p) {
  if (!p) return;
  for (int i = 0; i < p->nVec; i++) csq_vec_free(&p->aVec[i]);
  csq_vec_free(&p->key);
  sqlite3_free(p->aVec);
  sqlite3_free(p->aKeep);
  free(p->aHead);
  free(p->aNext);
  free(p->aHit);
  sqlite3_free(p);
}

uint64_t vt_probe_stamp(const vt_probe *p) {
  return p->stamp;
}

/* The probe holds at least the vectors aKeep names, hashed on iKey. */
static int probe_fits(const vt_probe *p, int nVec, const uint8_t *aKeep, int iKey) {
  if (p->nVec != nVec || p->iKey != iKey) return 0;
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

vt_probe *vt_probe_take(vt_tab *pTab, int nVec, const uint8_t *aKeep, int iKey) {
  vt_probe *p = pTab->pKeptProbe;
  if (!p) return NULL;
  pTab->pKeptProbe = NULL;
  if (pTab->keptEpoch == pTab->pConn->stmtEpoch && pTab->pConn->nStmtCur > 0 &&
      p->stamp == pTab->nWrite && probe_fits(p, nVec, aKeep, iKey))
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

int vt_probe_append(vt_probe *p, const csq_vec *aSrc, uint32_t iRow, uint32_t n) {
  for (int i = 0; i < p->nVec; i++) {
    if (!p->aKeep[i]) continue;
    if (csq_vec_append(&p->aVec[i], &aSrc[i], iRow, n)) return SQLITE_NOMEM;
  }
  p->n += n;
  return SQLITE_OK;
}

int vt_probe_index(vt_probe *p) {
  uint32_t nb = 16;
  while (nb < 2 * (uint64_t)p->n && nb < (1u << 31)) nb <<= 1;
  free(p->aHead);
  free(p->aNext);
  p->aHead = calloc(nb, sizeof(uint32_t));
  p->aNext = malloc(sizeof(uint32_t) * (p->n ? p->n : 1));
  if (!p->aHead || !p->aNext) return SQLITE_NOMEM;
  p->nBucket = nb;
  const csq_vec *k = &p->aVec[p->iKey];
  /* Two passes: every row's bucket first (into aNext, UINT32_MAX for NULL),
  ** then the inserts, prefetching the bucket a few rows ahead: the buckets
  ** of a large table are random accesses into an array bigger than the
  ** cache, and waiting for each was most of the build. */
  for (uint32_t r = 0; r < p->n; r++) {
    csq_value v = csq_value_of_vec(k, r);
    p->aNext[r] = v.cls == CSQ_NULL ? UINT32_MAX : (uint32_t)csq_value_hash(&v) & (nb - 1);
  }
  /* back to front, so that each chain lists rows in table order */
  enum { AHEAD = 16 };
  for (uint32_t r = p->n; r-- > 0;) {
    if (r >= AHEAD && p->aNext[r - AHEAD] != UINT32_MAX)
      __builtin_prefetch(&p->aHead[p->aNext[r - AHEAD]], 1);
    uint32_t b = p->aNext[r];
    if (b == UINT32_MAX) {
      p->aNext[r] = 0;
      continue;
    }
    p->aNext[r] = p->aHead[b];
    p->aHead[b] = r + 1;
  }
  return SQLITE_OK;
}

int vt_probe_find(vt_probe *p, sqlite3_value *pVal) {
  p->nHit = 0;
  csq_vec *pv = &p->key;
  csq_vec_reset(pv);
  /* the comparison applies the column's numeric affinity to the value */
  if (vt_push_value(pv, pVal, VT_AFF_NUMERIC)) return SQLITE_NOMEM;
  const csq_value v = csq_value_of_vec(pv, 0);
  int rc = SQLITE_OK;
  if (v.cls != CSQ_NULL) {
    uint64_t h = csq_value_hash(&v);
    const csq_vec *k = &p->aVec[p->iKey];
    for (uint32_t s = p->aHead[(uint32_t)h & (p->nBucket - 1)]; s; s = p->aNext[s - 1]) {
      uint32_t r = s - 1;
      csq_value x = csq_value_of_vec(k, r);
      if (!csq_value_eq(&x, &v)) continue;
      if (p->nHit == p->nHitAlloc) {
        uint32_t nNew = p->nHitAlloc ? p->nHitAlloc * 2 : 16;
        uint32_t *a = realloc(p->aHit, sizeof(uint32_t) * nNew);
        if (!a) {
          rc = SQLITE_NOMEM;
          break;
        }
        p->aHit = a;
        p->nHitAlloc = nNew;
      }
      p->aHit[p->nHit++] = r;
    }
  }
  return rc;
}

uint32_t vt_probe_nhit(const vt_probe *p) {
  return p->nHit;
}

const csq_vec *vt_probe_value(const vt_probe *p, int iVec, uint32_t iHit, uint32_t *piRow) {
  *piRow = p->aHit[iHit];
  return p->aKeep[iVec] ? &p->aVec[iVec] : NULL;
}
