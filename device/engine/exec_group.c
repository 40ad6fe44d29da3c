/*
** device/engine/exec_group.c - the group of each row of a run: a direct table
** indexed by narrow key columns' codes, else the table of groups of
** device/format/group.h (hashed on the key values); then the run's rows put in
** group order for the aggregate updates.
*/
#include "device/engine/exec_int.h"
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

/* ---- groups (device/format/group.h) and the run's arrays beside them ---- */

void ex_ag_free(ag_tab *t) {
  free(t->aRunN);
  free(t->aRunR);
  free(t->aTouch);
  free(t->aPerm);
  free(t->aSeg);
  free(t->aDirect);
  csq_group_free(&t->g);
}

/* Make a group with key values aK and hash h, in hash slot pos (from
** csq_group_find) or CSQ_GROUP_NO_SLOT; its index or -1 (OOM). */
int64_t ex_ag_new_group(ag_tab *t, const ex_val *aK, uint64_t h, uint32_t pos) {
  if (t->g.nGroup == t->nRunAlloc) {
    uint32_t nNew = t->nRunAlloc ? t->nRunAlloc * 2 : 64;
    uint32_t *aN = realloc(t->aRunN, sizeof(uint32_t) * nNew);
    if (!aN) return -1;
    t->aRunN = aN;
    memset(aN + t->nRunAlloc, 0, sizeof(uint32_t) * (nNew - t->nRunAlloc));
    double *aR = realloc(t->aRunR, sizeof(double) * AG_LANES * nNew);
    if (!aR) return -1;
    t->aRunR = aR;
    t->nRunAlloc = nNew;
  }
  int64_t g = csq_group_add(&t->g, aK, h, pos);
  for (int j = 0; g >= 0 && j < t->g.nKey; j++) t->nVar += var_bytes(&aK[j]);
  return g;
}

/* The group whose keys equal aK (hash h), created if none; -1 when out of
** memory. */
int64_t ex_ag_lookup(ag_tab *t, const ex_val *aK, uint64_t h) {
  uint32_t pos;
  if (csq_group_reserve(&t->g)) return -1;
  int64_t g = csq_group_find(&t->g, aK, h, &pos);
  return g >= 0 ? g : ex_ag_new_group(t, aK, h, pos);
}

/* Group ids of rows [0, n) while one INTEGER key comes in ascending order
** (see ex_ag_ids_hash): a row equal to the last group's key is in that
** group, a greater one makes the next group, with no hashing and no slots
** (csq_group.bNoHash). Returns the rows done: n, or the first row whose
** key is smaller than the last group's (the caller hashes from there); or
** UINT32_MAX when out of memory. */
static uint32_t ids_ascending(ag_tab *t, const int64_t *aI, uint32_t n, const uint32_t *X,
                              uint32_t *aGid) {
  uint32_t nG = t->g.nGroup;
  int64_t last = nG ? csq_group_keys(&t->g, nG - 1)->i : 0;
  for (uint32_t k = 0; k < n; k++) {
    int64_t x = aI[X ? X[k] : k];
    if (nG && x == last) {
      aGid[k] = nG - 1;
      continue;
    }
    if (nG && x < last) return k;
    ex_val v;
    memset(&v, 0, sizeof(v));
    v.cls = CSQ_INT;
    v.i = x;
    if (ex_ag_new_group(t, &v, 0, CSQ_GROUP_NO_SLOT) < 0) return UINT32_MAX;
    last = x;
    aGid[k] = nG++;
  }
  return n;
}

/* Group ids of rows [0, n) by hashing the key vectors (row k's values at
** X[k], or k if X is NULL; see ex_agg_exec). 0 or a fault.
**
** A single INTEGER key is first tried in ascending order (ids_ascending),
** from an empty table on: a row group stored in the order of its GROUP BY
** key then makes its groups without a hash or a probe, its runs of equal
** keys each taking the last group. The first key out of order hashes the
** groups made so far (csq_group_reserve) and the rest goes by hash. */
int ex_ag_ids_hash(ag_tab *t, const csq_prog *pp, const ex_ev *aEv, uint32_t n, const uint32_t *X,
                   uint32_t *aGid) {
  uint64_t aH[BATCH];
  int nKey = t->g.nKey;
  uint32_t k0 = 0;
  if (nKey == 1 && aEv[pp->aKey[0]].cls == CSQ_INT &&
      (t->g.bNoHash || (t->g.nGroup == 0 && t->g.nSlot == 0))) {
    t->g.bNoHash = 1;
    k0 = ids_ascending(t, aEv[pp->aKey[0]].aI, n, X, aGid);
    if (k0 == UINT32_MAX) return CSQ_FAULT_NOMEM;
    if (k0 == n) return 0;
  }
  ex_val aK[CSQ_AGG_MAX_KEYS];
  memset(aK, 0, sizeof(aK));
  for (uint32_t k = k0; k < n; k++) aH[k] = CSQ_GROUP_HASH_SEED;
  for (int j = 0; j < nKey; j++) {
    const ex_ev *e = &aEv[pp->aKey[j]];
    if (e->cls == CSQ_INT) {
      for (uint32_t k = k0; k < n; k++)
        aH[k] = csq_group_hash_step(aH[k], csq_mix64((uint64_t)e->aI[X ? X[k] : k]));
    } else {
      for (uint32_t k = k0; k < n; k++) {
        ev_get(e, X ? X[k] : k, &aK[0]);
        aH[k] = csq_group_hash_step(aH[k], csq_value_hash(&aK[0]));
      }
    }
  }
  for (uint32_t k = k0; k < n; k++) {
    for (int j = 0; j < nKey; j++) ev_get(&aEv[pp->aKey[j]], X ? X[k] : k, &aK[j]);
    int64_t g = ex_ag_lookup(t, aK, csq_mix64(aH[k]));
    if (g < 0) return CSQ_FAULT_NOMEM;
    aGid[k] = (uint32_t)g;
  }
  return 0;
}

/* Domain of a key column for the direct table (codes 0..dom-2, NULL dom-1),
** or 0 if the column does not qualify. */
uint32_t ex_key_domain(const ex_col *c) {
  if (c->bAllNull || c->kind == K_CONSTX) return 2;
  if (c->kind == K_DICT) return c->d.nAux + 1;
  if (c->kind == K_INT && c->d.width <= 16) return (1u << c->d.width) + 1;
  return 0;
}

/* Group ids through the direct table: every key is a narrow column. With X
** (see ex_agg_exec) the table index is computed for every batch row up to the
** run's last, in place, and looked up for the run's rows only. */
int ex_ag_ids_direct(ag_tab *t, const csq_prog *pp, ex_col *aCol, uint32_t b0, uint32_t nb,
                     const uint32_t *aSel, uint32_t n, const uint32_t *X, uint32_t *aGid) {
  uint32_t aIdx[BATCH];
  uint32_t stride = 1;
  /* rows k < nIdx; row k is batch row S ? S[k] - b0 : k */
  const uint32_t *S = X ? NULL : aSel;
  uint32_t nIdx = X ? (n ? X[n - 1] + 1 : 0) : n;
#define ROW(k) (S ? S[k] - b0 : (k))
  memset(aIdx, 0, sizeof(uint32_t) * nIdx);
  for (int j = 0; j < t->g.nKey; j++) {
    ex_col *c = &aCol[pp->aExpr[pp->aKey[j]].a];
    uint32_t dom = t->aDom[j], nullCode = dom - 1;
    if (c->bAllNull || c->kind == K_CONSTX) {
      for (uint32_t k = 0; k < nIdx; k++)
        aIdx[k] += stride * (col_null(c, b0 + ROW(k)) ? nullCode : 0);
    } else if (c->kind == K_DICT) {
      const uint64_t *u = ex_col_codes(c, b0, nb);
      if (c->d.aNull) {
        for (uint32_t k = 0; k < nIdx; k++)
          aIdx[k] += stride * (col_null(c, b0 + ROW(k)) ? nullCode : (uint32_t)u[ROW(k)]);
      } else if (S) {
        uint64_t aU[BATCH];
        ex_gather8(aU, u, aSel, n, b0);
        for (uint32_t k = 0; k < n; k++) aIdx[k] += stride * (uint32_t)aU[k];
      } else {
        for (uint32_t k = 0; k < nIdx; k++) aIdx[k] += stride * (uint32_t)u[k];
      }
    } else {
      ex_col_ints(c, b0, nb);
      uint64_t ref = (uint64_t)c->d.iRef;
      if (c->d.aNull) {
        for (uint32_t k = 0; k < nIdx; k++)
          aIdx[k] +=
              stride *
              (col_null(c, b0 + ROW(k)) ? nullCode : (uint32_t)((uint64_t)c->aI[ROW(k)] - ref));
      } else {
        for (uint32_t k = 0; k < nIdx; k++)
          aIdx[k] += stride * (uint32_t)((uint64_t)c->aI[ROW(k)] - ref);
      }
    }
    stride *= dom;
  }
#undef ROW
  /* the run's indexes, checked, then their groups; a row whose group does
  ** not exist yet is rare (the first rows of each group): a second pass */
  uint32_t aRunIdx[BATCH], mx = 0;
  int32_t gOr = 0;
  if (X)
    for (uint32_t k = 0; k < n; k++) aRunIdx[k] = aIdx[X[k]];
  else
    memcpy(aRunIdx, aIdx, sizeof(uint32_t) * n);
  for (uint32_t k = 0; k < n; k++) mx = aRunIdx[k] > mx ? aRunIdx[k] : mx;
  if (n && mx >= t->nDirect) return CSQ_FAULT_CORRUPT_CHUNK; /* a code beyond its domain */
  for (uint32_t k = 0; k < n; k++) {
    int32_t g = t->aDirect[aRunIdx[k]];
    aGid[k] = (uint32_t)g;
    gOr |= g;
  }
  for (uint32_t k = 0; gOr < 0 && k < n; k++) {
    uint32_t idx = aRunIdx[k];
    int32_t g = t->aDirect[idx];
    if (g < 0) {
      ex_val aK[CSQ_AGG_MAX_KEYS];
      memset(aK, 0, sizeof(aK));
      for (int j = 0; j < t->g.nKey; j++)
        ex_col_get(&aCol[pp->aExpr[pp->aKey[j]].a], aSel[k], &aK[j]);
      /* codes are this row group's: a seeded group is found by its values */
      int64_t gg;
      if (t->g.nSlot)
        gg = ex_ag_lookup(t, aK, csq_group_hash(aK, t->g.nKey));
      else
        gg = ex_ag_new_group(t, aK, idx, CSQ_GROUP_NO_SLOT);
      if (gg < 0) return CSQ_FAULT_NOMEM;
      g = (int32_t)gg;
      t->aDirect[idx] = g;
    }
    aGid[k] = (uint32_t)g;
  }
  return 0;
}

/* ---- aggregate updates ---- */

#if defined(__x86_64__) && defined(__GNUC__)
#define AG_PART_MAX 8 /* groups ag_partition_avx2 picks out one by one, at most */
/* What the touched-group count and ag_group_rows do, for a table of at most
** AG_PART_MAX groups: each group's rows are picked out of the run in turn,
** 8 at a time (a compare, and a compress of the rows' positions through a
** permutation that PDEP/PEXT make from the compare's mask), which counts
** them too. The counting sort's per-row counters in memory, which
** consecutive rows of one group wait on, are gone. */
__attribute__((target("avx2,bmi2,popcnt"))) static void
ag_partition_avx2(ag_tab *t, const uint32_t *aGid, uint32_t n, const uint32_t *X) {
  uint32_t *P = t->aPerm, pos = 0;
  const __m256i vIota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  t->nTouch = 0;
  for (uint32_t g = 0; g < t->g.nGroup; g++) {
    uint32_t start = pos, k = 0;
    const __m256i vG = _mm256_set1_epi32((int)g);
    for (; k + 8 <= n; k += 8) {
      __m256i vGid = _mm256_loadu_si256((const __m256i *)(const void *)(aGid + k));
      unsigned bits =
          (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(vGid, vG)));
      uint64_t wanted =
          _pext_u64(0x0706050403020100ull, _pdep_u64(bits, 0x0101010101010101ull) * 0xFF);
      __m256i perm = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)wanted));
      __m256i src = X ? _mm256_loadu_si256((const __m256i *)(const void *)(X + k))
                      : _mm256_add_epi32(_mm256_set1_epi32((int)k), vIota);
      /* all 8 lanes are stored, the selected ones first: P has 8 spare */
      _mm256_storeu_si256((__m256i *)(void *)(P + pos), _mm256_permutevar8x32_epi32(src, perm));
      pos += (uint32_t)__builtin_popcount(bits);
    }
    for (; k < n; k++) {
      P[pos] = X ? X[k] : k;
      pos += aGid[k] == g;
    }
    if (pos > start) {
      t->aSeg[t->nTouch] = start;
      t->aTouch[t->nTouch++] = g;
      t->aRunN[g] = pos - start;
    }
  }
  t->aSeg[t->nTouch] = pos;
}
#endif

/* Order the run's n rows by group (a counting sort on aRunN, the rows of
** each group kept in row order): the sums below then add each group's
** values in registers, instead of through per-group lanes in memory where
** rows of the same group wait for one another's stores. */
static void ag_group_rows(ag_tab *t, const uint32_t *aGid, uint32_t n, const uint32_t *X) {
  uint32_t pos = 0;
  for (uint32_t j = 0; j < t->nTouch; j++) { /* aRunN: counts -> starts */
    uint32_t g = t->aTouch[j], c = t->aRunN[g];
    t->aSeg[j] = pos;
    t->aRunN[g] = pos;
    pos += c;
  }
  t->aSeg[t->nTouch] = pos;
  if (X) /* aPerm holds where the values are (ex_agg_exec) */
    for (uint32_t k = 0; k < n; k++) t->aPerm[t->aRunN[aGid[k]]++] = X[k];
  else
    for (uint32_t k = 0; k < n; k++) t->aPerm[t->aRunN[aGid[k]]++] = k; /* -> ends */
  for (uint32_t j = 0; j < t->nTouch; j++)                              /* -> counts again */
    t->aRunN[t->aTouch[j]] = t->aSeg[j + 1] - t->aSeg[j];
}

/* What ag_group_rows does, when the run's group ids never decrease (rows
** of each group together, as ids_ascending makes them for a table stored
** in key order): each stretch of one id is a touched group, and the rows
** are in group order already. 1 if so, else 0 with nothing changed
** (aSeg and aTouch are scratch until the caller fills them). */
static int ag_runs(ag_tab *t, const uint32_t *aGid, uint32_t n, const uint32_t *X) {
  uint32_t nT = 0;
  for (uint32_t k = 0; k < n; k++) {
    if (k && aGid[k] == aGid[k - 1]) continue;
    if (k && aGid[k] < aGid[k - 1]) return 0;
    t->aSeg[nT] = k;
    t->aTouch[nT++] = aGid[k];
  }
  t->aSeg[nT] = n;
  t->nTouch = nT;
  for (uint32_t j = 0; j < nT; j++) t->aRunN[t->aTouch[j]] = t->aSeg[j + 1] - t->aSeg[j];
  if (X)
    memcpy(t->aPerm, X, sizeof(uint32_t) * n);
  else
    for (uint32_t k = 0; k < n; k++) t->aPerm[k] = k;
  return 1;
}

/* Group the run's rows for ag_update: the touched groups with their row
** counts, and with more than one group the rows in group order (aPerm,
** aSeg). */
void ex_ag_order_run(ag_tab *t, const uint32_t *aGid, uint32_t n, const uint32_t *X) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (t->g.nGroup > 1 && t->g.nGroup <= AG_PART_MAX && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt")) {
    ag_partition_avx2(t, aGid, n, X);
    return;
  }
#endif
  if (t->g.nGroup > 1 && ag_runs(t, aGid, n, X)) return;
  t->nTouch = 0;
  for (uint32_t k = 0; k < n; k++)
    if (t->aRunN[aGid[k]]++ == 0) t->aTouch[t->nTouch++] = aGid[k];
  if (t->g.nGroup > 1) ag_group_rows(t, aGid, n, X);
}
