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
** are such terms), hashes the probed columns together, and keeps with each
** row where it lives (its row group and row number); each later xFilter is
** a hash lookup. The cache lives as long as the statement run and is
** shared by its cursors (see "Sharing" below); it is rebuilt if the table
** is written meanwhile.
**
** Columns: the keys are always copied into the probe. The other columns the
** statement reads are copied too while they fit the connection's copy
** budget (a dimension table: every read is an array access); past it, and
** for any column not copied, a value is read from its row group's chunk
** when SQLite asks for it, the chunk decoded once and cached, the cache
** bounded by the chunk budget (see chunk_evict for which are dropped).
** csq_probe_memory(COPY_BYTES [,
** CHUNK_BYTES]) sets both budgets for the connection's later probes and
** returns the copy budget it replaced; the defaults are
** VT_PROBE_EAGER_BUDGET and VT_PROBE_CACHE_BUDGET. So a probe of
** a large table ("EXISTS (SELECT * FROM lineitem WHERE l_orderkey = ...)")
** holds its keys and row locations, not every column of every row. To read
** chunks later the probe owns what the building cursor read from: its
** snapshots (or private copies of a transaction's tables), references on
** the row groups, and a copy of the transaction's unwritten rows.
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
  int nVec;       /* vectors: [0] rowid, [1 + i] column i (as the cursor's aVec) */
  csq_vec *aVec;  /* the copied ones, a value per row */
  uint8_t *aCopy; /* aVec[i] is copied (else read from chunks) */
  int nKey;       /* the vectors whose values are hashed, together (always copied) */
  int aKey[VT_PROBE_MAXKEY];
  uint32_t n;       /* rows */
  uint32_t *aSrc;   /* row -> its source (a row group, or the unwritten rows) */
  uint32_t *aRow;   /* row -> its row number in that source */
  uint32_t nLocCap; /* room in aSrc, aRow */
  uint32_t *aStart; /* bucket b's rows are positions [aStart[b], aStart[b + 1]) */
  uint32_t *aPos;   /* position -> row; NULL: rows were reordered, the same */
  uint32_t nBucket;
  uint64_t stamp;                   /* the table's write count when built */
  char *zSig;                       /* the filter the rows passed, with its values (never NULL) */
  csq_vec aKeyVal[VT_PROBE_MAXKEY]; /* the values sought, converted */
  /* what the rows are read from (vt_probe_adopt) */
  int nMem;
  store_snap **aSnap;       /* per member: keeps its row groups' extents alive, or NULL */
  const store_table **aTab; /* per member: the table the chunks are read through */
  store_table **aTabCopy;   /* per member: a transaction's table, copied (owned), or NULL */
  uint32_t nSrc;            /* sources: row groups, then the unwritten rows if any */
  store_rg **apRg;          /* per source: its row group (referenced), NULL: aBuf */
  int *aSrcMem;             /* per source: its member */
  csq_vec *aBuf;            /* nVec vectors: the transaction's unwritten rows, or NULL */
  /* chunks read for columns not copied */
  csq_vec **apChunk; /* [iVec * nSrc + s]: column iVec of source s, decoded, or NULL */
  uint32_t *aLoaded; /* the slots of apChunk that hold one */
  uint32_t nLoaded;
  uint32_t nPinned; /* aLoaded[0 .. nPinned) are kept while others can go (chunk_evict) */
  uint64_t nChunkBytes;
  uint64_t nCopyMax, nChunkMax; /* the connection's budgets when it was made */
  /* sharing (vt_probe_acquire) */
  int nRef;        /* cursors using it */
  int bListed;     /* on its table's pProbes list */
  uint64_t epoch;  /* the statement run it was built in */
  vt_probe *pNext; /* on the list */
};

vt_probe *vt_probe_new(const vt_conn *pConn, int nVec, const uint8_t *aWant, const int *aKey,
                       int nKey, const char *zSig, uint64_t stamp) {
  if (nKey < 1 || nKey > VT_PROBE_MAXKEY) return NULL;
  vt_probe *p = sqlite3_malloc64(sizeof(*p));
  if (!p) return NULL;
  memset(p, 0, sizeof(*p));
  p->aVec = sqlite3_malloc64(sizeof(csq_vec) * (size_t)nVec);
  p->aCopy = sqlite3_malloc64((size_t)nVec);
  p->zSig = sqlite3_mprintf("%s", zSig ? zSig : "");
  if (!p->aVec || !p->aCopy || !p->zSig) {
    sqlite3_free(p->aVec);
    sqlite3_free(p->aCopy);
    sqlite3_free(p->zSig);
    sqlite3_free(p);
    return NULL;
  }
  for (int i = 0; i < nVec; i++) csq_vec_init(&p->aVec[i]);
  for (int k = 0; k < VT_PROBE_MAXKEY; k++) csq_vec_init(&p->aKeyVal[k]);
  memcpy(p->aCopy, aWant, (size_t)nVec);
  for (int k = 0; k < nKey; k++) {
    p->aKey[k] = aKey[k];
    p->aCopy[aKey[k]] = 1;
  }
  p->nVec = nVec;
  p->nKey = nKey;
  p->stamp = stamp;
  p->nCopyMax = pConn->nProbeCopy;
  p->nChunkMax = pConn->nProbeChunks;
  p->nPinned = UINT32_MAX; /* set when the chunk budget is first reached */
  p->nRef = 1;
  p->epoch = pConn->stmtEpoch;
  return p;
}

/* Release what the rows are read from, and the chunks read. */
static void free_sources(vt_probe *p) {
  if (p->apChunk)
    for (uint32_t j = 0; j < p->nLoaded; j++) {
      csq_vec_free(p->apChunk[p->aLoaded[j]]);
      sqlite3_free(p->apChunk[p->aLoaded[j]]);
    }
  sqlite3_free(p->apChunk);
  sqlite3_free(p->aLoaded);
  for (uint32_t s = 0; s < p->nSrc; s++)
    if (p->apRg[s]) store_rg_unref(p->apRg[s]);
  sqlite3_free(p->apRg);
  sqlite3_free(p->aSrcMem);
  if (p->aBuf)
    for (int i = 0; i < p->nVec; i++) csq_vec_free(&p->aBuf[i]);
  sqlite3_free(p->aBuf);
  for (int k = 0; k < p->nMem; k++) {
    if (p->aSnap && p->aSnap[k]) store_snap_unref(p->aSnap[k]);
    if (p->aTabCopy) store_table_free(p->aTabCopy[k]);
  }
  sqlite3_free(p->aSnap);
  sqlite3_free(p->aTab);
  sqlite3_free(p->aTabCopy);
}

void vt_probe_free(vt_probe *p) {
  if (!p) return;
  free_sources(p);
  for (int i = 0; i < p->nVec; i++) csq_vec_free(&p->aVec[i]);
  for (int k = 0; k < VT_PROBE_MAXKEY; k++) csq_vec_free(&p->aKeyVal[k]);
  sqlite3_free(p->aVec);
  sqlite3_free(p->aCopy);
  sqlite3_free(p->zSig);
  free(p->aSrc);
  free(p->aRow);
  free(p->aStart);
  free(p->aPos);
  sqlite3_free(p);
}

uint64_t vt_probe_stamp(const vt_probe *p) {
  return p->stamp;
}

/* The probe answers lookups on aKey of the rows that passed the filter
** zSig (any column can be read from it). */
static int probe_fits(const vt_probe *p, int nVec, const int *aKey, int nKey, const char *zSig) {
  if (p->nVec != nVec || p->nKey != nKey || strcmp(p->zSig, zSig ? zSig : "") != 0) return 0;
  for (int k = 0; k < nKey; k++)
    if (p->aKey[k] != aKey[k]) return 0;
  return 1;
}

/*
** Sharing. A correlated subquery over a csq table (EXISTS, IN, a scalar)
** is run once per outer row, and SQLite opens and closes its cursor each
** time, or keeps several cursors of the same table open at once (TPC-H
** Q21's EXISTS and NOT EXISTS over lineitem, Q2's and Q17's subquery over
** the table the outer query joins). A probe one cursor built is put on its
** table's list (vt_probe_publish) for the statement run that built it
** (pConn->stmtEpoch): any cursor of the run that needs the same keys of
** rows passing the same filter takes it (vt_probe_acquire, one more
** reference) instead of reading and hashing the table again. A released
** probe stays on the list while other cursors of the run are open;
** vt_stmt_leave drops the list when the run's last cursor closes
** (vt_probe_drop_kept), and a write to the table makes its probes stale.
** Lookups keep their hits in the cursor (vt_probe_hits), so cursors that
** share a probe never disturb one another.
*/
static void unlink_probe(vt_tab *pTab, vt_probe *p) {
  for (vt_probe **pp = &pTab->pProbes; *pp; pp = &(*pp)->pNext)
    if (*pp == p) {
      *pp = p->pNext;
      break;
    }
  p->pNext = NULL;
  p->bListed = 0;
}

vt_probe *vt_probe_acquire(vt_tab *pTab, int nVec, const int *aKey, int nKey, const char *zSig) {
  vt_conn *pConn = pTab->pConn;
  vt_probe *pFound = NULL;
  for (vt_probe *p = pTab->pProbes, *pNext; p; p = pNext) {
    pNext = p->pNext;
    if (p->epoch != pConn->stmtEpoch || p->stamp != pTab->nWrite) {
      unlink_probe(pTab, p); /* another run's, or stale: freed when unused */
      if (p->nRef == 0) vt_probe_free(p);
      continue;
    }
    if (!pFound && pConn->nStmtCur > 0 && probe_fits(p, nVec, aKey, nKey, zSig)) pFound = p;
  }
  if (pFound) pFound->nRef++;
  return pFound;
}

void vt_probe_publish(vt_tab *pTab, vt_probe *p) {
  vt_conn *pConn = pTab->pConn;
  if (p->bListed || pConn->nStmtCur == 0 || p->epoch != pConn->stmtEpoch) return;
  p->pNext = pTab->pProbes;
  pTab->pProbes = p;
  p->bListed = 1;
}

void vt_probe_release(vt_tab *pTab, vt_probe *p, int bRun) {
  vt_conn *pConn = pTab->pConn;
  if (!p) return;
  if (--p->nRef > 0) return;
  /* kept for the run's next cursors only while some are open (this one is
  ** still counted) and the table is as it was built from */
  if (p->bListed &&
      (!bRun || pConn->nStmtCur <= 1 || p->epoch != pConn->stmtEpoch || p->stamp != pTab->nWrite))
    unlink_probe(pTab, p);
  if (!p->bListed) vt_probe_free(p);
}

void vt_probe_drop_table(vt_tab *pTab) {
  while (pTab->pProbes) {
    vt_probe *p = pTab->pProbes;
    unlink_probe(pTab, p);
    if (p->nRef == 0) vt_probe_free(p); /* a cursor still using it frees it */
  }
}

void vt_probe_drop_kept(vt_conn *pConn) {
  for (vt_tab *t = pConn->pTabs; t; t = t->pNextTab) vt_probe_drop_table(t);
}

uint32_t vt_probe_rows(const vt_probe *p) {
  return p->n;
}

int vt_probe_copied(const vt_probe *p, int iVec) {
  return p->aCopy[iVec];
}

/* Bytes a vector holds, about. */
static uint64_t vec_bytes(const csq_vec *v) {
  return (uint64_t)v->nCap * (sizeof(csq_val) + sizeof(uint32_t) + 1) + v->nHeapCap;
}

/* Stop copying the columns that are not keys: they are read from chunks. */
static void copy_keys_only(vt_probe *p) {
  for (int i = 0; i < p->nVec; i++) {
    int bKey = 0;
    for (int k = 0; k < p->nKey; k++) bKey |= p->aKey[k] == i;
    if (bKey || !p->aCopy[i]) continue;
    p->aCopy[i] = 0;
    csq_vec_free(&p->aVec[i]);
  }
}

/* The copies of nRow rows would not fit the copy budget: copy only
** the keys (values of VT_PROBE_VALUE_BYTES each, about). */
void vt_probe_expect(vt_probe *p, uint64_t nRow) {
  int nCopy = 0;
  for (int i = 0; i < p->nVec; i++) nCopy += p->aCopy[i];
  if ((double)nRow * nCopy * VT_PROBE_VALUE_BYTES > (double)p->nCopyMax) copy_keys_only(p);
}

int vt_probe_reserve(vt_probe *p, uint32_t nRow) {
  for (int i = 0; i < p->nVec; i++)
    if (p->aCopy[i] && csq_vec_reserve(&p->aVec[i], nRow, 0)) return SQLITE_NOMEM;
  if (nRow > p->nLocCap) {
    uint32_t *a = realloc(p->aSrc, sizeof(uint32_t) * nRow);
    if (!a) return SQLITE_NOMEM;
    p->aSrc = a;
    a = realloc(p->aRow, sizeof(uint32_t) * nRow);
    if (!a) return SQLITE_NOMEM;
    p->aRow = a;
    p->nLocCap = nRow;
  }
  return SQLITE_OK;
}

int vt_probe_append(vt_probe *p, const csq_vec *const *apSrc, uint32_t iRow, uint32_t n,
                    uint32_t iSrc, const uint32_t *aRowNum) {
  if (n == 0) return SQLITE_OK;
  if ((uint64_t)p->n + n > UINT32_MAX) return SQLITE_FULL;
  if (p->n + n > p->nLocCap) {
    uint64_t nNew = p->nLocCap ? (uint64_t)p->nLocCap * 2 : 1024;
    while (nNew < (uint64_t)p->n + n) nNew *= 2;
    if (nNew > UINT32_MAX) nNew = UINT32_MAX;
    if (vt_probe_reserve(p, (uint32_t)nNew) == SQLITE_NOMEM) return SQLITE_NOMEM;
  }
  uint64_t nBytes = 0;
  for (int i = 0; i < p->nVec; i++) {
    if (!p->aCopy[i]) continue;
    const csq_vec *v = apSrc[i];
    if (!v || v->n < iRow + n) {
      int bKey = 0;
      for (int k = 0; k < p->nKey; k++) bKey |= p->aKey[k] == i;
      if (bKey) return SQLITE_INTERNAL; /* the scan did not fetch a key */
      p->aCopy[i] = 0;                  /* the scan left it out: read it from its chunks */
      csq_vec_free(&p->aVec[i]);
      continue;
    }
    if (csq_vec_append(&p->aVec[i], v, iRow, n)) return SQLITE_NOMEM;
    nBytes += vec_bytes(&p->aVec[i]);
  }
  for (uint32_t k = 0; k < n; k++) {
    p->aSrc[p->n + k] = iSrc;
    p->aRow[p->n + k] = aRowNum ? aRowNum[iRow + k] : iRow + k;
  }
  p->n += n;
  if (nBytes > p->nCopyMax) copy_keys_only(p);
  return SQLITE_OK;
}

int vt_probe_adopt(vt_probe *p, int nMem, store_snap **aSnap, const store_table **aTab,
                   store_table **aTabCopy, uint32_t nRg, store_rg **apRg, const int *aRgMem,
                   csq_vec *aBuf) {
  int rc = SQLITE_OK;
  p->nMem = nMem;
  p->aSnap = sqlite3_malloc64(sizeof(store_snap *) * (size_t)nMem);
  p->aTab = sqlite3_malloc64(sizeof(store_table *) * (size_t)nMem);
  p->aTabCopy = sqlite3_malloc64(sizeof(store_table *) * (size_t)nMem);
  uint32_t nSrc = nRg + (aBuf != NULL);
  p->apRg = sqlite3_malloc64(sizeof(store_rg *) * (size_t)(nSrc + 1));
  p->aSrcMem = sqlite3_malloc64(sizeof(int) * (size_t)(nSrc + 1));
  if (!p->aSnap || !p->aTab || !p->aTabCopy || !p->apRg || !p->aSrcMem) {
    /* what the caller handed over is released all the same */
    rc = SQLITE_NOMEM;
    for (int k = 0; k < nMem; k++) {
      if (aSnap[k]) store_snap_unref(aSnap[k]);
      store_table_free(aTabCopy[k]);
    }
    for (uint32_t s = 0; s < nRg; s++) store_rg_unref(apRg[s]);
    if (aBuf)
      for (int i = 0; i < p->nVec; i++) csq_vec_free(&aBuf[i]);
    sqlite3_free(aBuf);
    sqlite3_free(p->aSnap);
    sqlite3_free(p->aTab);
    sqlite3_free(p->aTabCopy);
    sqlite3_free(p->apRg);
    sqlite3_free(p->aSrcMem);
    p->aSnap = NULL;
    p->aTab = NULL;
    p->aTabCopy = NULL;
    p->apRg = NULL;
    p->aSrcMem = NULL;
    p->nMem = 0;
    return rc;
  }
  for (int k = 0; k < nMem; k++) {
    p->aSnap[k] = aSnap[k];
    p->aTab[k] = aTab[k];
    p->aTabCopy[k] = aTabCopy[k];
    aSnap[k] = NULL;
    aTabCopy[k] = NULL;
  }
  for (uint32_t s = 0; s < nRg; s++) {
    p->apRg[s] = apRg[s];
    p->aSrcMem[s] = aRgMem[s];
  }
  if (aBuf) {
    p->apRg[nRg] = NULL;
    p->aSrcMem[nRg] = 0;
  }
  p->aBuf = aBuf;
  p->nSrc = nSrc;
  return rc;
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

/* Reorder aSrc and aRow as csq_vec_permute does a vector. */
static int permute_u32(uint32_t **pa, const uint32_t *aPerm, uint32_t n) {
  uint32_t *a = malloc(sizeof(uint32_t) * (n ? n : 1));
  if (!a) return SQLITE_NOMEM;
  for (uint32_t k = 0; k < n; k++) a[k] = (*pa)[aPerm[k]];
  free(*pa);
  *pa = a;
  return SQLITE_OK;
}

/*
** Hash every row and list the rows bucket by bucket, in table order within
** each (a counting sort), so that a lookup reads one run of positions. When
** many rows share a key and they lie scattered over the table (a foreign
** key probed from its parent), the copied vectors and the row locations are
** reordered to that list too: a lookup then reads adjacent rows instead of
** missing the cache on each. Rows with a NULL key are left out: no lookup
** can find them.
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
    int rc = SQLITE_OK;
    for (int i = 0; rc == SQLITE_OK && i < p->nVec; i++)
      if (p->aCopy[i] && csq_vec_permute(&p->aVec[i], aPos, nLive)) rc = SQLITE_NOMEM;
    if (rc == SQLITE_OK) rc = permute_u32(&p->aSrc, aPos, nLive);
    if (rc == SQLITE_OK) rc = permute_u32(&p->aRow, aPos, nLive);
    free(aPos);
    if (rc) return rc;
    p->n = nLive;
    p->nLocCap = nLive;
  } else {
    p->aPos = aPos;
  }
  return SQLITE_OK;
}

int vt_probe_find(vt_probe *p, sqlite3_value **apVal, vt_probe_hits *pHits) {
  pHits->n = 0;
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
    if (pHits->n == pHits->nAlloc) {
      uint32_t nNew = pHits->nAlloc ? pHits->nAlloc * 2 : 16;
      uint32_t *a = sqlite3_realloc64(pHits->a, sizeof(uint32_t) * nNew);
      if (!a) return SQLITE_NOMEM;
      pHits->a = a;
      pHits->nAlloc = nNew;
    }
    pHits->a[pHits->n++] = r;
  }
  return SQLITE_OK;
}

/*
** Make room for nNew more bytes of chunks of source sKeep: drop cached ones
** until the cache fits its budget. Which ones: a lookup of a key scattered
** over the table reads the row groups in table order, again for every key
** (a sweep). Least-recently-used would drop each chunk just before it is
** read again, and chunks dropped at random still lose a share of the sweep
** on every pass. So the chunks cached until the budget is first reached
** stay (pinned) and later ones pass through the rest of the budget: a sweep
** then decodes again only what never fit. The chunks of the row group
** being read are not dropped (SQLite reads several columns of each row);
** when only pinned chunks are left to drop, the last pinned one goes.
*/
static void chunk_evict(vt_probe *p, uint64_t nNew, uint32_t sKeep) {
  if (p->nPinned == UINT32_MAX && p->nChunkBytes + nNew > p->nChunkMax) p->nPinned = p->nLoaded;
  while (p->nLoaded > 0 && p->nChunkBytes + nNew > p->nChunkMax) {
    uint32_t jOld = p->nLoaded;
    for (uint32_t j = p->nPinned; j < p->nLoaded && jOld == p->nLoaded; j++)
      if (p->aLoaded[j] % p->nSrc != sKeep) jOld = j;
    if (jOld == p->nLoaded) {
      if (p->nPinned == 0) break; /* only the row group being read: over budget by it */
      p->nPinned--;
      continue;
    }
    uint32_t iSlot = p->aLoaded[jOld];
    p->nChunkBytes -= vec_bytes(p->apChunk[iSlot]);
    csq_vec_free(p->apChunk[iSlot]);
    sqlite3_free(p->apChunk[iSlot]);
    p->apChunk[iSlot] = NULL;
    p->aLoaded[jOld] = p->aLoaded[--p->nLoaded];
  }
}

/* Column iVec of source s, read from its chunk if not cached. */
static int read_chunk(vt_probe *p, vt_tab *pTab, int iVec, uint32_t s, const csq_vec **ppV) {
  if (!p->apRg || s >= p->nSrc) {
    vt_set_error(&pTab->base, "csq: the join probe of %s lost its rows", pTab->zName);
    return SQLITE_INTERNAL;
  }
  if (!p->apRg[s]) { /* the transaction's unwritten rows, copied whole */
    *ppV = &p->aBuf[iVec];
    return SQLITE_OK;
  }
  if (!p->apChunk) {
    size_t nSlot = (size_t)p->nVec * p->nSrc;
    p->apChunk = sqlite3_malloc64(sizeof(csq_vec *) * nSlot);
    p->aLoaded = sqlite3_malloc64(sizeof(uint32_t) * nSlot);
    if (!p->apChunk || !p->aLoaded) {
      sqlite3_free(p->apChunk);
      sqlite3_free(p->aLoaded);
      p->apChunk = NULL;
      p->aLoaded = NULL;
      return SQLITE_NOMEM;
    }
    memset(p->apChunk, 0, sizeof(csq_vec *) * nSlot);
  }
  uint32_t iSlot = (uint32_t)iVec * p->nSrc + s;
  if (p->apChunk[iSlot]) {
    *ppV = p->apChunk[iSlot];
    return SQLITE_OK;
  }
  csq_vec *v = sqlite3_malloc64(sizeof(csq_vec));
  if (!v) return SQLITE_NOMEM;
  csq_vec_init(v);
  int k = p->aSrcMem[s], ai = iVec - 1;
  char *zErr = NULL;
  int rc = store_read_chunks(pTab->apMem[k]->pStore, pTab->apMem[k]->pQ, p->aTab[k], p->apRg[s],
                             &ai, 1, v, &zErr);
  if (rc) {
    csq_vec_free(v);
    sqlite3_free(v);
    return vt_err(&pTab->base, rc, zErr);
  }
  uint64_t nBytes = vec_bytes(v);
  chunk_evict(p, nBytes, s);
  p->apChunk[iSlot] = v;
  p->aLoaded[p->nLoaded++] = iSlot;
  p->nChunkBytes += nBytes;
  *ppV = v;
  return SQLITE_OK;
}

int vt_probe_value(vt_probe *p, vt_tab *pTab, int iVec, uint32_t r, const csq_vec **ppV,
                   uint32_t *piRow) {
  if (p->aCopy[iVec]) {
    *ppV = &p->aVec[iVec];
    *piRow = r;
    return SQLITE_OK;
  }
  *piRow = p->aRow[r];
  int rc = read_chunk(p, pTab, iVec, p->aSrc[r], ppV);
  if (rc == SQLITE_OK && *piRow >= (*ppV)->n) {
    vt_set_error(&pTab->base, "csq: a join probe row of %s is past its row group", pTab->zName);
    return SQLITE_CORRUPT;
  }
  return rc;
}

/* csq_probe_memory(COPY_BYTES [, CHUNK_BYTES]): see the banner. */
static void probe_memory_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  vt_conn *pConn = sqlite3_user_data(ctx);
  sqlite3_int64 aVal[2];
  for (int i = 0; i < argc; i++) {
    if (sqlite3_value_numeric_type(argv[i]) != SQLITE_INTEGER || sqlite3_value_int64(argv[i]) < 0) {
      sqlite3_result_error(ctx, "csq_probe_memory: the budgets are bytes, integers of 0 or more",
                           -1);
      return;
    }
    aVal[i] = sqlite3_value_int64(argv[i]);
  }
  sqlite3_result_int64(ctx, (sqlite3_int64)pConn->nProbeCopy);
  pConn->nProbeCopy = (uint64_t)aVal[0];
  if (argc > 1) pConn->nProbeChunks = (uint64_t)aVal[1];
}

int vt_probe_register(sqlite3 *db, vt_conn *pConn) {
  int flags = SQLITE_UTF8 | SQLITE_DIRECTONLY;
  int rc = sqlite3_create_function(db, "csq_probe_memory", 1, flags, pConn, probe_memory_func, NULL,
                                   NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_create_function(db, "csq_probe_memory", 2, flags, pConn, probe_memory_func, NULL,
                                 NULL);
  return rc;
}
