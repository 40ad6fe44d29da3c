/*
** planner/hashjoin.c - in-memory hash joins of a join plan; see hashjoin.h.
*/
#include "planner/hashjoin.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device/format/value.h"

/* A growable array of row indices. */
typedef struct hj_idx {
  uint32_t *a;
  uint32_t n, nCap;
} hj_idx;

static int idx_push(hj_idx *p, uint32_t v) {
  if (p->n == p->nCap) {
    uint32_t nNew = p->nCap ? p->nCap * 2 : 1024;
    if (nNew < p->nCap) return -E2BIG;
    uint32_t *a = realloc(p->a, sizeof(uint32_t) * (size_t)nNew);
    if (!a) return -ENOMEM;
    p->a = a;
    p->nCap = nNew;
  }
  p->a[p->n++] = v;
  return 0;
}

/* Room in p for nNeed indices: 0, -E2BIG, -ENOMEM. */
static int idx_room(hj_idx *p, uint32_t nNeed) {
  if (nNeed <= p->nCap) return 0;
  uint64_t nNew = p->nCap ? (uint64_t)p->nCap * 2 : 1024;
  if (nNew < nNeed) nNew = nNeed;
  if (nNew > UINT32_MAX) return -E2BIG;
  uint32_t *a = realloc(p->a, sizeof(uint32_t) * (size_t)nNew);
  if (!a) return -ENOMEM;
  p->a = a;
  p->nCap = (uint32_t)nNew;
  return 0;
}

/* The row of a LEFT JOINed table that had no match: its columns are NULL. */
#define HJ_NO_ROW UINT32_MAX

/* Hash of the key of row r over outputs aKey[0..nKey) of d; 0 with *pbNull
** when a key value is NULL (such a row never joins). */
static uint64_t key_hash(const pl_jdata *const *ad, const int *aOut, int nKey, const uint32_t *aRow,
                         int *pbNull) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int k = 0; k < nKey; k++) {
    const csq_vec *v = &ad[k]->aCol[aOut[k]];
    if (aRow[k] == HJ_NO_ROW || v->aCls[aRow[k]] == CSQ_NULL) {
      *pbNull = 1;
      return 0;
    }
    csq_value x = csq_value_of_vec(v, aRow[k]);
    h = csq_mix64(h ^ csq_value_hash(&x)) + (uint64_t)k;
  }
  *pbNull = 0;
  return h;
}

/* key_hash of a key whose nKey columns are the integers aX[0..nKey). */
static inline uint64_t key_hash_ints(const int64_t *aX, int nKey) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int k = 0; k < nKey; k++) h = csq_mix64(h ^ csq_mix64((uint64_t)aX[k])) + (uint64_t)k;
  return h;
}

/* Does v hold only integers and NULLs (a key column the typed loops take:
** NULL rows never join, the rest compare as int64)? */
static int vec_ints(const csq_vec *v) {
  return (v->clsMask & ~((1u << CSQ_INT) | (1u << CSQ_NULL))) == 0;
}

/* Are the key outputs aOut[0..nKey) of d all vec_ints? */
static int keys_ints(const pl_jdata *d, const int *aOut, int nKey) {
  for (int k = 0; k < nKey; k++)
    if (!vec_ints(&d->aCol[aOut[k]])) return 0;
  return 1;
}

uint64_t pl_jdata_bytes(const pl_jdata *d) {
  uint64_t n = 0;
  for (int c = 0; c < d->nCol; c++)
    n += (uint64_t)d->aCol[c].n * (sizeof(csq_val) + 5) + d->aCol[c].nHeap;
  return n;
}

/* Append value r of src to dst (NULL for HJ_NO_ROW). */
static int vec_push_from(csq_vec *dst, const csq_vec *src, uint32_t r) {
  if (r == HJ_NO_ROW) return csq_vec_push_null(dst);
  switch (src->aCls[r]) {
  case CSQ_INT:
    return csq_vec_push_int(dst, src->aVal[r].i);
  case CSQ_REAL:
    return csq_vec_push_real(dst, src->aVal[r].r);
  case CSQ_TEXT:
  case CSQ_BLOB:
    return csq_vec_push_bytes(dst, src->aCls[r], csq_vec_bytes(src, r), src->aLen[r]);
  default:
    return csq_vec_push_null(dst);
  }
}

/* A hash table over a side's rows: bucket b's rows, in ascending order,
** are aRow[aStart[b] .. aStart[b + 1]), and with keys of integers
** (keys_ints) aEnt holds their first keys with them instead. A probe thus
** reads one bucket from consecutive memory, where a chain from row to row
** through a side past the caches cost a miss or two per row of the chain
** (TPC-H Q13: ten orders per customer key). A row with a NULL key is in
** no bucket (it equals nothing). */
typedef struct hj_ent {
  int64_t key; /* key 0 */
  uint32_t row;
} hj_ent;
typedef struct hj_table {
  uint32_t *aStart; /* nBucket + 1 offsets into aRow or aEnt */
  uint32_t *aRow;   /* the rows by bucket, when the keys are not keys_ints */
  hj_ent *aEnt;     /* else the rows by bucket with key 0: one line to read or write */
  uint32_t nBucket;
} hj_table;

/* The row at place x of ht. */
static inline uint32_t hj_row(const hj_table *ht, uint32_t x) {
  return ht->aEnt ? ht->aEnt[x].row : ht->aRow[x];
}

static void hj_free(hj_table *ht) {
  free(ht->aStart);
  free(ht->aRow);
  free(ht->aEnt);
  memset(ht, 0, sizeof(*ht));
}

/* Build ht over the nRow rows of d keyed on its outputs aOut[0..nKey):
** each row's bucket, the buckets' sizes, their offsets, then the rows
** placed in row order. 0 or -ENOMEM (ht's arrays are the caller's to free
** either way, with hj_free). */
static int hj_build(hj_table *ht, const pl_jdata *d, const int *aOut, int nKey) {
  uint32_t nRow = d->nRow, nAlloc = nRow ? nRow : 1, nBucket = 16;
  while (nBucket < nRow && nBucket < (1u << 31)) nBucket *= 2;
  uint32_t mask = nBucket - 1;
  int bInts = nKey > 0 && keys_ints(d, aOut, nKey); /* aEnt holds key 0 */
  ht->nBucket = nBucket;
  ht->aStart = calloc((size_t)nBucket + 1, sizeof(uint32_t));
  ht->aRow = bInts ? NULL : malloc(sizeof(uint32_t) * (size_t)nAlloc);
  ht->aEnt = bInts ? malloc(sizeof(hj_ent) * (size_t)nAlloc) : NULL;
  uint32_t *aBkt = malloc(sizeof(uint32_t) * (size_t)nAlloc); /* UINT32_MAX: a NULL key */
  if (!ht->aStart || (bInts ? !ht->aEnt : !ht->aRow) || !aBkt) {
    free(aBkt);
    return -ENOMEM;
  }
  if (ht->aRow) csq_mem_advise(ht->aRow, sizeof(uint32_t) * (size_t)nRow);
  if (ht->aEnt) csq_mem_advise(ht->aEnt, sizeof(hj_ent) * (size_t)nRow);
  uint32_t *aStart = ht->aStart;
  if (bInts) {
    for (uint32_t r = 0; r < nRow; r++) {
      int64_t aX[PL_JOIN_MAX_KEY];
      int k = 0;
      for (; k < nKey && d->aCol[aOut[k]].aCls[r] == CSQ_INT; k++)
        aX[k] = d->aCol[aOut[k]].aVal[r].i;
      aBkt[r] = k < nKey ? UINT32_MAX : (uint32_t)(key_hash_ints(aX, nKey) & mask);
    }
  } else {
    const pl_jdata *ad[PL_JOIN_MAX_KEY];
    uint32_t aR[PL_JOIN_MAX_KEY];
    for (int k = 0; k < nKey; k++) ad[k] = d;
    for (uint32_t r = 0; r < nRow; r++) {
      for (int k = 0; k < nKey; k++) aR[k] = r;
      int bNull;
      uint64_t x = key_hash(ad, aOut, nKey, aR, &bNull);
      aBkt[r] = bNull ? UINT32_MAX : (uint32_t)(x & mask);
    }
  }
  /* the buckets' sizes in aStart[b + 1], then aStart[b] their offsets; a
  ** bucket a few rows ahead is requested from memory meanwhile (a large
  ** side's buckets miss the caches) */
  enum { PF = 16 };
  for (uint32_t r = 0; r < nRow; r++) {
    if (r + PF < nRow && aBkt[r + PF] != UINT32_MAX)
      __builtin_prefetch(&aStart[aBkt[r + PF] + 1], 1);
    if (aBkt[r] != UINT32_MAX) aStart[aBkt[r] + 1]++;
  }
  for (uint32_t b = 0; b < nBucket; b++) aStart[b + 1] += aStart[b];
  /* each row placed at its bucket's next free place, which aStart[b]
  ** tracks: after the pass aStart[b] is where bucket b + 1 starts */
  const csq_vec *v0 = nKey ? &d->aCol[aOut[0]] : NULL;
  for (uint32_t r = 0; r < nRow; r++) {
    if (r + PF < nRow && aBkt[r + PF] != UINT32_MAX) __builtin_prefetch(&aStart[aBkt[r + PF]], 1);
    uint32_t bk = aBkt[r];
    if (bk == UINT32_MAX) continue;
    uint32_t x = aStart[bk]++;
    if (ht->aEnt)
      ht->aEnt[x] = (hj_ent){v0->aVal[r].i, r};
    else
      ht->aRow[x] = r;
  }
  memmove(aStart + 1, aStart, sizeof(uint32_t) * (size_t)nBucket);
  aStart[0] = 0;
  free(aBkt);
  return 0;
}

struct pl_hj {
  const pl_join *j;
  pl_jdata aData[PL_JOIN_MAX_TAB]; /* the build sides' rows (not owned) */
  hj_table aTab[PL_JOIN_MAX_TAB];  /* by table */
  hj_idx aCur[PL_JOIN_MAX_TAB], aNext[PL_JOIN_MAX_TAB];
};

void pl_hj_free(pl_hj *h) {
  if (!h) return;
  for (int t = 0; t < PL_JOIN_MAX_TAB; t++) {
    hj_free(&h->aTab[t]);
    free(h->aCur[t].a);
    free(h->aNext[t].a);
  }
  free(h);
}

int pl_hj_new(const pl_join *j, const pl_jdata *aData, pl_hj **pp) {
  pl_hj *h = calloc(1, sizeof(*h));
  *pp = NULL;
  if (!h) return -ENOMEM;
  h->j = j;
  memcpy(h->aData, aData, sizeof(pl_jdata) * (size_t)j->nTab);
  for (int step = 1; step < j->nTab; step++) {
    int t = j->aOrder[step];
    const pl_jtab *jt = &j->aTab[t];
    if (hj_build(&h->aTab[t], &aData[t], jt->aKeyOut, jt->nKey) != 0) {
      pl_hj_free(h);
      return -ENOMEM;
    }
  }
  *pp = h;
  return 0;
}

/* Does place x of a typed table (aEnt) hold the key aX: key 0 in aEnt,
** the others (k < nKey) in the build side's columns aB[k]? */
static inline int keys_eq(const hj_ent *aEnt, const csq_val *const *aB, uint32_t x,
                          const int64_t *aX, int nKey) {
  if (aEnt[x].key != aX[0]) return 0;
  for (int k = 1; k < nKey; k++)
    if (aB[k][aEnt[x].row].i != aX[k]) return 0;
  return 1;
}

/* One step of the probe, the typed loop: build side t (the plan's step-th
** table) keyed on nKey columns of integers (keys_ints), probed with columns
** of integers of the n current joined rows (NULLs allowed on both sides).
** Appends the joined rows to aNext of the tables aOrder[0..step] as the
** generic loop does, in the same order. 0, -ENOMEM or -E2BIG. Inlined
** with nKey 1 too, the common case. */
static inline __attribute__((always_inline)) int
probe_step_int(pl_hj *h, int step, const pl_jdata *aData, uint32_t n, int nKey) {
  const pl_join *j = h->j;
  int t = j->aOrder[step];
  const pl_jtab *jt = &j->aTab[t];
  const hj_table *ht = &h->aTab[t];
  const csq_val *aB[PL_JOIN_MAX_KEY];
  const csq_vec *apV[PL_JOIN_MAX_KEY];
  const uint32_t *apKeyRow[PL_JOIN_MAX_KEY];
  for (int k = 0; k < nKey; k++) {
    aB[k] = aData[t].aCol[jt->aKeyOut[k]].aVal;
    apV[k] = &aData[jt->aKeyTab[k]].aCol[jt->aKeyProbe[k]];
    apKeyRow[k] = h->aCur[jt->aKeyTab[k]].a;
  }
  const uint32_t *aStart = ht->aStart, mask = ht->nBucket - 1;
  const hj_ent *aEnt = ht->aEnt;
  hj_idx *aCur = h->aCur, *aNext = h->aNext;
  const uint32_t *apCur[PL_JOIN_MAX_TAB];
  uint32_t *apNext[PL_JOIN_MAX_TAB];
  uint32_t nOut = aNext[t].n, nRoom = 0;
  /* a block of rows at a time: their keys and buckets first, each
  ** bucket's offsets requested from memory as it is found, then the
  ** buckets read, the keys and rows of a bucket PF rows ahead requested
  ** meanwhile; a build side past the caches costs a miss or two a row,
  ** overlapped this way */
  enum { BLK = 64, PF = 8 };
  int64_t aXb[BLK * PL_JOIN_MAX_KEY] = {0}; /* the keys of the block's rows */
  uint32_t aBkt[BLK + PF];                  /* their buckets, UINT32_MAX: a NULL key */
  for (int s = 0; s < step; s++) apCur[s] = aCur[j->aOrder[s]].a;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t ib = i % BLK;
    if (ib == 0) {
      uint32_t nb = n - i < BLK ? n - i : BLK;
      for (uint32_t m = 0; m < nb; m++) {
        int64_t *aX = aXb + m * nKey;
        int k = 0;
        for (; k < nKey; k++) {
          uint32_t r0 = apKeyRow[k][i + m];
          if (r0 == HJ_NO_ROW || apV[k]->aCls[r0] != CSQ_INT) break; /* NULL: joins nothing */
          aX[k] = apV[k]->aVal[r0].i;
        }
        aBkt[m] = k == nKey ? (uint32_t)(key_hash_ints(aX, nKey) & mask) : UINT32_MAX;
        if (aBkt[m] != UINT32_MAX) __builtin_prefetch(&aStart[aBkt[m]]);
      }
      for (uint32_t m = nb; m < nb + PF; m++) aBkt[m] = UINT32_MAX;
    }
    if (aBkt[ib + PF] != UINT32_MAX) {
      uint32_t xAhead = aStart[aBkt[ib + PF]];
      __builtin_prefetch(&aEnt[xAhead]);
    }
    const int64_t *aX = aXb + ib * nKey;
    uint32_t x = 0, xe = 0, nBefore = nOut;
    if (aBkt[ib] != UINT32_MAX) x = aStart[aBkt[ib]], xe = aStart[aBkt[ib] + 1];
    while (x < xe && !keys_eq(aEnt, aB, x, aX, nKey)) x++;
    /* every match, or one row with t's side NULL for an unmatched row of a
    ** LEFT JOIN */
    while (x < xe || (jt->bLeft && nOut == nBefore)) {
      if (nOut == nRoom) { /* the tables' index lists grow together */
        nRoom = UINT32_MAX;
        for (int s = 0; s <= step; s++) {
          hj_idx *q = &aNext[j->aOrder[s]];
          int e = idx_room(q, nOut + 1);
          if (e) return e;
          apNext[s] = q->a;
          if (q->nCap < nRoom) nRoom = q->nCap;
        }
      }
      for (int s = 0; s < step; s++) apNext[s][nOut] = apCur[s][i];
      if (x >= xe) {
        apNext[step][nOut++] = HJ_NO_ROW;
        break;
      }
      apNext[step][nOut++] = aEnt[x].row;
      for (x++; x < xe && !keys_eq(aEnt, aB, x, aX, nKey); x++) {}
    }
  }
  for (int s = 0; s <= step; s++) aNext[j->aOrder[s]].n = nOut;
  return 0;
}

int pl_hj_probe(pl_hj *h, const pl_jdata *pProbe, csq_vec *aOut, uint32_t *pnRow) {
  const pl_join *j = h->j;
  int nTab = j->nTab, e = 0;
  int t0 = j->aOrder[0];
  pl_jdata aData[PL_JOIN_MAX_TAB];
  memcpy(aData, h->aData, sizeof(pl_jdata) * (size_t)nTab);
  aData[t0] = *pProbe;
  hj_idx *aCur = h->aCur, *aNext = h->aNext;
  for (int t = 0; t < nTab; t++) aCur[t].n = aNext[t].n = 0;
  e = idx_room(&aCur[t0], pProbe->nRow);
  for (uint32_t r = 0; e == 0 && r < pProbe->nRow; r++) aCur[t0].a[r] = r;
  if (e == 0) aCur[t0].n = pProbe->nRow;
  uint32_t n = pProbe->nRow;
  for (int step = 1; e == 0 && step < nTab && n > 0; step++) {
    int t = j->aOrder[step];
    const pl_jtab *jt = &j->aTab[t];
    const pl_jdata *d = &aData[t];
    const hj_table *ht = &h->aTab[t];
    const pl_jdata *adP[PL_JOIN_MAX_KEY];
    uint32_t aRow[PL_JOIN_MAX_KEY];
    for (int k = 0; k < jt->nKey; k++) adP[k] = &aData[jt->aKeyTab[k]];
    int bInts = ht->aEnt != NULL; /* keys_ints, as the build found */
    for (int k = 0; bInts && k < jt->nKey; k++) bInts = vec_ints(&adP[k]->aCol[jt->aKeyProbe[k]]);
    if (bInts && jt->nKey == 1)
      e = probe_step_int(h, step, aData, n, 1);
    else if (bInts)
      e = probe_step_int(h, step, aData, n, jt->nKey);
    else
      for (uint32_t i = 0; e == 0 && i < n; i++) {
        for (int k = 0; k < jt->nKey; k++) aRow[k] = aCur[jt->aKeyTab[k]].a[i];
        int bNull;
        uint64_t x = key_hash(adP, jt->aKeyProbe, jt->nKey, aRow, &bNull);
        uint32_t nBefore = aNext[t].n;
        uint32_t bk = (uint32_t)(x & (ht->nBucket - 1));
        for (uint32_t xi = bNull ? 0 : ht->aStart[bk], xe = bNull ? 0 : ht->aStart[bk + 1];
             e == 0 && xi < xe; xi++) {
          uint32_t r = hj_row(ht, xi);
          int bEq = 1;
          for (int k = 0; bEq && k < jt->nKey; k++) {
            csq_value a = csq_value_of_vec(&d->aCol[jt->aKeyOut[k]], r);
            csq_value b = csq_value_of_vec(&adP[k]->aCol[jt->aKeyProbe[k]], aRow[k]);
            bEq = csq_value_eq(&a, &b);
          }
          if (!bEq) continue;
          for (int s = 0; e == 0 && s < step; s++) {
            int u = j->aOrder[s];
            e = idx_push(&aNext[u], aCur[u].a[i]);
          }
          if (e == 0) e = idx_push(&aNext[t], r);
        }
        if (e == 0 && jt->bLeft && aNext[t].n == nBefore) { /* no match: kept, t's side NULL */
          for (int s = 0; e == 0 && s < step; s++) {
            int u = j->aOrder[s];
            e = idx_push(&aNext[u], aCur[u].a[i]);
          }
          if (e == 0) e = idx_push(&aNext[t], HJ_NO_ROW);
        }
      }
    if (e) break;
    n = aNext[t].n;
    for (int s = 0; s <= step; s++) { /* the joined rows become the current ones */
      int u = j->aOrder[s];
      hj_idx x = aCur[u];
      aCur[u] = aNext[u];
      aNext[u] = x;
      aNext[u].n = 0;
    }
  }
  if (e == 0 && n > UINT32_MAX - *pnRow) e = -E2BIG;
  /* gather the row-set columns */
  for (int t = 0; e == 0 && n > 0 && t < nTab; t++) {
    const pl_jtab *jt = &j->aTab[t];
    for (int o = 0; e == 0 && o < jt->nOut; o++) {
      int k = jt->aRowCol[o];
      if (k < 0) continue;
      const csq_vec *src = &aData[t].aCol[o];
      uint32_t nWant = aOut[k].n + n;
      if (nWant > aOut[k].nCap)
        e = csq_vec_reserve(&aOut[k], nWant > aOut[k].nCap * 2 ? nWant : aOut[k].nCap * 2,
                            aOut[k].nHeap);
      if (e == 0 && nTab == 1) /* no join (semi-joins follow): the rows as they came */
        e = csq_vec_append(&aOut[k], src, 0, n);
      else if (e == 0)
        e = csq_vec_gather(&aOut[k], src, aCur[t].a, n);
    }
  }
  if (e == 0) *pnRow += n;
  return e;
}

struct pl_semi {
  const pl_jsemi *q;
  const csq_vec *aRow; /* the joined rows (not owned) */
  uint32_t nRow;
  hj_table ht;      /* over the joined rows' keys */
  uint8_t *aMark;   /* per place of ht's rows: some row of the subquery matches
                    ** that joined row (beside its key, where marking reads) */
  uint32_t nMarked; /* places marked so far (of ht.aStart[ht.nBucket]: no more) */
  int bInts;        /* the joined rows' keys are integers and NULLs (ht.aEnt) */
};

void pl_semi_free(pl_semi *h) {
  if (!h) return;
  hj_free(&h->ht);
  free(h->aMark);
  free(h);
}

int pl_semi_new(const pl_join *j, int iSemi, const csq_vec *aRow, uint32_t nRow, pl_semi **pp) {
  pl_semi *h = calloc(1, sizeof(*h));
  *pp = NULL;
  if (!h) return -ENOMEM;
  h->q = &j->aSemi[iSemi];
  h->aRow = aRow;
  h->nRow = nRow;
  h->aMark = calloc((size_t)(nRow ? nRow : 1), 1);
  pl_jdata d = {(csq_vec *)aRow, 0, nRow};
  /* "=" with a NULL key: nothing matches the row */
  if (!h->aMark || hj_build(&h->ht, &d, h->q->aKeyCol, h->q->nKey) != 0) {
    pl_semi_free(h);
    return -ENOMEM;
  }
  h->bInts = h->ht.aEnt != NULL;
  *pp = h;
  return 0;
}

/* Do batch row i and joined row r differ (both non-NULL, not equal) on
** every "<>" of the semi-join? */
static int semi_ne(const pl_semi *h, const pl_jdata *pBatch, uint32_t i, uint32_t r) {
  const pl_jsemi *q = h->q;
  for (int k = 0; k < q->nNe; k++) {
    const csq_vec *va = &pBatch->aCol[q->aNeOut[k]], *vb = &h->aRow[q->aNeCol[k]];
    if (va->aCls[i] == CSQ_NULL || vb->aCls[r] == CSQ_NULL) return 0;
    csq_value a = csq_value_of_vec(va, i);
    csq_value b = csq_value_of_vec(vb, r);
    if (csq_value_eq(&a, &b)) return 0;
  }
  return 1;
}

/* pl_semi_mark's typed loop: the keys of the joined rows and of the batch
** are integers and NULLs (keys_ints); as probe_step_int, a block of rows'
** buckets first, each head requested from memory as it is found, then the
** chains walked. A row of the batch stops at nothing: every joined row
** with its key is marked. Inlined with nKey 1 too, the common case. */
static inline __attribute__((always_inline)) void semi_mark_int(pl_semi *h, const pl_jdata *pBatch,
                                                                int nKey) {
  const pl_jsemi *q = h->q;
  const hj_table *ht = &h->ht;
  const csq_vec *apV[PL_JOIN_MAX_KEY];
  const csq_val *aB[PL_JOIN_MAX_KEY];
  for (int k = 0; k < nKey; k++) {
    apV[k] = &pBatch->aCol[q->aKeyOut[k]];
    aB[k] = h->aRow[q->aKeyCol[k]].aVal;
  }
  const uint32_t *aStart = ht->aStart, mask = ht->nBucket - 1;
  const hj_ent *aEnt = ht->aEnt;
  uint8_t *aMark = h->aMark;
  enum { BLK = 64, PF = 8 };
  int64_t aXb[BLK * PL_JOIN_MAX_KEY] = {0};
  uint32_t aBkt[BLK];
  uint32_t n = pBatch->nRow;
  for (uint32_t i0 = 0; i0 < n && h->nMarked < h->ht.aStart[h->ht.nBucket]; i0 += BLK) {
    uint32_t nb = n - i0 < BLK ? n - i0 : BLK;
    for (uint32_t m = 0; m < nb; m++) {
      int64_t *aX = aXb + m * nKey;
      int k = 0;
      for (; k < nKey && apV[k]->aCls[i0 + m] == CSQ_INT; k++) aX[k] = apV[k]->aVal[i0 + m].i;
      aBkt[m] = k == nKey ? (uint32_t)(key_hash_ints(aX, nKey) & mask) : UINT32_MAX;
      if (aBkt[m] != UINT32_MAX) __builtin_prefetch(&aStart[aBkt[m]]);
    }
    for (uint32_t m = 0; m < nb; m++) {
      if (m + PF < nb && aBkt[m + PF] != UINT32_MAX) {
        uint32_t xAhead = aStart[aBkt[m + PF]];
        __builtin_prefetch(&aEnt[xAhead]);
        __builtin_prefetch(&aMark[xAhead]);
      }
      if (aBkt[m] == UINT32_MAX) continue; /* a NULL key matches nothing */
      const int64_t *aX = aXb + m * nKey;
      for (uint32_t x = aStart[aBkt[m]], xe = aStart[aBkt[m] + 1]; x < xe; x++) {
        if (!keys_eq(aEnt, aB, x, aX, nKey) || aMark[x]) continue;
        if (q->nNe && !semi_ne(h, pBatch, i0 + m, aEnt[x].row)) continue;
        aMark[x] = 1;
        h->nMarked++;
      }
    }
  }
}

int pl_semi_mark(pl_semi *h, const pl_jdata *pBatch) {
  const pl_jsemi *q = h->q;
  const hj_table *ht = &h->ht;
  const pl_jdata *ad[PL_JOIN_MAX_KEY];
  uint32_t aR[PL_JOIN_MAX_KEY];
  if (h->bInts && keys_ints(pBatch, q->aKeyOut, q->nKey)) {
    if (q->nKey == 1)
      semi_mark_int(h, pBatch, 1);
    else
      semi_mark_int(h, pBatch, q->nKey);
    return 0;
  }
  for (int k = 0; k < q->nKey; k++) ad[k] = pBatch;
  for (uint32_t i = 0; i < pBatch->nRow && h->nMarked < h->ht.aStart[h->ht.nBucket]; i++) {
    for (int k = 0; k < q->nKey; k++) aR[k] = i;
    int bNull;
    uint64_t x = key_hash(ad, q->aKeyOut, q->nKey, aR, &bNull);
    if (bNull) continue;
    uint32_t bk = (uint32_t)(x & (ht->nBucket - 1));
    for (uint32_t xi = ht->aStart[bk]; xi < ht->aStart[bk + 1]; xi++) {
      uint32_t r = hj_row(ht, xi);
      if (h->aMark[xi]) continue;
      int bMatch = 1;
      for (int k = 0; bMatch && k < q->nKey; k++) {
        csq_value a = csq_value_of_vec(&pBatch->aCol[q->aKeyOut[k]], i);
        csq_value b = csq_value_of_vec(&h->aRow[q->aKeyCol[k]], r);
        bMatch = csq_value_eq(&a, &b);
      }
      if (bMatch) bMatch = semi_ne(h, pBatch, i, r);
      if (bMatch) {
        h->aMark[xi] = 1;
        h->nMarked++;
      }
    }
  }
  return 0;
}

int pl_semi_keep(pl_semi *h, csq_vec *aRow, int nCol, uint32_t *pnRow) {
  uint32_t *aSel = malloc(sizeof(uint32_t) * (size_t)(h->nRow ? h->nRow : 1)), n = 0;
  uint8_t *aRowMark = calloc((size_t)(h->nRow ? h->nRow : 1), 1); /* by joined row */
  if (!aSel || !aRowMark) {
    free(aSel);
    free(aRowMark);
    return -ENOMEM;
  }
  for (uint32_t x = 0; x < h->ht.aStart[h->ht.nBucket]; x++)
    aRowMark[hj_row(&h->ht, x)] = h->aMark[x];
  uint8_t want = h->q->bAnti ? 0 : 1;
  for (uint32_t r = 0; r < h->nRow; r++)
    if (aRowMark[r] == want) aSel[n++] = r;
  for (int c = 0; c < nCol; c++)
    if (aRow[c].n == h->nRow) csq_vec_select(&aRow[c], aSel, n);
  free(aSel);
  free(aRowMark);
  *pnRow = n;
  return 0;
}

int pl_scalar_fill(const pl_join *j, int iScalar, const csq_vec *aGroupKey,
                   const csq_vec *pGroupVal, uint32_t nGroup, const csq_vec *pEmpty,
                   const csq_vec *aRow, uint32_t nRow, csq_vec *pOut) {
  const pl_jscalar *q = &j->aScalar[iScalar];
  int nKey = q->nKey, e = 0;
  hj_table ht = {NULL, NULL, NULL, 0};
  pl_jdata g = {(csq_vec *)aGroupKey, nKey, nGroup}, r = {(csq_vec *)aRow, 0, nRow};
  const pl_jdata *adR[PL_JOIN_MAX_KEY];
  int aOutG[PL_JOIN_MAX_KEY];
  uint32_t aR[PL_JOIN_MAX_KEY];
  for (int k = 0; k < nKey; k++) adR[k] = &r, aOutG[k] = k;
  e = hj_build(&ht, &g, aOutG, nKey); /* a NULL key equals no row's */
  for (uint32_t i = 0; e == 0 && i < nRow; i++) {
    for (int k = 0; k < nKey; k++) aR[k] = i;
    int bNull;
    uint64_t x = key_hash(adR, q->aKeyCol, nKey, aR, &bNull);
    uint32_t hit = UINT32_MAX;
    uint32_t bk = (uint32_t)(x & (ht.nBucket - 1));
    for (uint32_t xi = bNull ? 0 : ht.aStart[bk], xe = bNull ? 0 : ht.aStart[bk + 1];
         xi < xe && hit == UINT32_MAX; xi++) {
      uint32_t gi = hj_row(&ht, xi);
      int bEq = 1;
      for (int k = 0; bEq && k < nKey; k++) {
        csq_value a = csq_value_of_vec(&aGroupKey[k], gi);
        csq_value b = csq_value_of_vec(&aRow[q->aKeyCol[k]], i);
        bEq = csq_value_eq(&a, &b);
      }
      if (bEq) hit = gi;
    }
    e = hit == UINT32_MAX ? vec_push_from(pOut, pEmpty, 0) : vec_push_from(pOut, pGroupVal, hit);
  }
  hj_free(&ht);
  return e;
}
