/*
** planner/joinfilter.c - join filters of a join plan's probe side; see
** joinfilter.h.
*/
#include "planner/joinfilter.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device/format/bloom.h"
#include "device/format/keyhash.h"
#include "device/format/keymap.h"
#include "device/format/program.h"
#include "device/format/value.h"
#include "planner/filter.h"

/* The distinct non-NULL values of v (indices of their first rows) into
** aPick[0..*pn); 0, -E2BIG past nMax of them, or -ENOMEM. */
static int distinct(const csq_vec *v, uint32_t *aPick, uint32_t nMax, uint32_t *pn) {
  uint32_t nBucket = 16;
  while (nBucket < nMax * 2u) nBucket *= 2;
  uint32_t *aHead = malloc(sizeof(uint32_t) * nBucket);
  if (!aHead) return -ENOMEM;
  memset(aHead, 0xff, sizeof(uint32_t) * nBucket);
  uint32_t *aNext = malloc(sizeof(uint32_t) * (nMax ? nMax : 1));
  if (!aNext) {
    free(aHead);
    return -ENOMEM;
  }
  uint32_t n = 0;
  int e = 0;
  for (uint32_t r = 0; r < v->n; r++) {
    if (v->aCls[r] == CSQ_NULL) continue;
    csq_value x = csq_value_of_vec(v, r);
    uint32_t b = (uint32_t)(csq_value_hash(&x) & (nBucket - 1)), i;
    for (i = aHead[b]; i != UINT32_MAX; i = aNext[i]) {
      csq_value y = csq_value_of_vec(v, aPick[i]);
      if (csq_value_eq(&x, &y)) break;
    }
    if (i != UINT32_MAX) continue;
    if (n == nMax) {
      e = -E2BIG;
      break;
    }
    aPick[n] = r;
    aNext[n] = aHead[b];
    aHead[b] = n++;
  }
  free(aHead);
  free(aNext);
  *pn = n;
  return e;
}

/* Add "probe chunk iChunk IN (values aPick of v)" to b. */
static int add_in(csq_pb *b, int iChunk, const csq_vec *v, const uint32_t *aPick, uint32_t n) {
  int slot = csq_pb_input(b, (uint32_t)iChunk), k0 = -1;
  if (slot < 0) return slot;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t r = aPick[i];
    int k;
    switch (v->aCls[r]) {
    case CSQ_INT:
      k = csq_pb_const_int(b, v->aVal[r].i);
      break;
    case CSQ_REAL:
      k = csq_pb_const_real(b, v->aVal[r].r);
      break;
    default:
      k = csq_pb_const_bytes(b, v->aCls[r], csq_vec_bytes(v, r), v->aLen[r]);
      break;
    }
    if (k < 0) return k;
    if (k0 < 0) k0 = k;
  }
  int rc = csq_pb_clause(b);
  if (rc < 0) return rc;
  return csq_pb_term(b, CSQ_OP_IN, 0, slot, k0, (int)n, 0);
}

/* Add "probe chunk iChunk is one of the values of v" to b as a bitmap of
** them (device/format/keymap.h) if they are all integers (or REALs equal to
** one) whose span takes at most nMax bytes of bits; 0, 1 if they are not,
** or a negative errno. */
static int add_keymap(csq_pb *b, int iChunk, const csq_vec *v, uint64_t nMax) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (uint32_t r = 0; r < v->n; r++) {
    int64_t i;
    if (v->aCls[r] == CSQ_NULL) continue;
    if (v->aCls[r] == CSQ_INT)
      i = v->aVal[r].i;
    else if (v->aCls[r] != CSQ_REAL || !csq_real_int(v->aVal[r].r, &i))
      return 1;
    if (i < lo) lo = i;
    if (i > hi) hi = i;
  }
  if (lo > hi || (uint64_t)hi - (uint64_t)lo >= 8 * nMax) return 1;
  uint32_t nBytes = CSQ_KEYMAP_HDR + (uint32_t)(((uint64_t)hi - (uint64_t)lo) / 8 + 1);
  uint8_t *p = calloc(nBytes, 1);
  if (!p) return -ENOMEM;
  csq_put_le64(p, (uint64_t)lo);
  for (uint32_t r = 0; r < v->n; r++) {
    int64_t i;
    if (v->aCls[r] == CSQ_INT)
      i = v->aVal[r].i;
    else if (v->aCls[r] != CSQ_REAL || !csq_real_int(v->aVal[r].r, &i))
      continue;
    uint64_t u = (uint64_t)i - (uint64_t)lo;
    p[CSQ_KEYMAP_HDR + (u >> 3)] |= (uint8_t)(1u << (u & 7));
  }
  int slot = csq_pb_input(b, (uint32_t)iChunk);
  int e = slot < 0 ? slot : pl_filter_add_keymap(b, slot, p, nBytes);
  free(p);
  return e < 0 ? e : 0;
}

/* Add "probe chunk iChunk may be one of the values of v" to b as a Bloom
** filter sized for v's non-NULL values (device/format/bloom.h), or as a
** bitmap of them when they are integers whose span takes at most
** PL_JOINFILTER_KEYMAP_RATIO times the filter's bytes (or 64 KiB); 0, 1 if
** none was added (no keys), or a negative errno. */
static int add_bloom(csq_pb *b, int iChunk, const csq_vec *v) {
  uint32_t nKeys = 0;
  for (uint32_t r = 0; r < v->n; r++) nKeys += v->aCls[r] != CSQ_NULL;
  if (nKeys == 0) return 1;
  uint32_t nBytes = csq_bloom_size(nKeys, PL_JOINFILTER_BLOOM_FPR);
  if (nBytes > PL_JOINFILTER_BLOOM_MAX) nBytes = PL_JOINFILTER_BLOOM_MAX;
  uint64_t nMap = (uint64_t)nBytes * PL_JOINFILTER_KEYMAP_RATIO;
  if (nMap < 65536) nMap = 65536;
  if (nMap > CSQ_KEYMAP_MAX_BYTES) nMap = CSQ_KEYMAP_MAX_BYTES;
  int rc = add_keymap(b, iChunk, v, nMap);
  if (rc <= 0) return rc;
  void *pF = malloc(nBytes);
  uint64_t *aHash = malloc(sizeof(uint64_t) * 1024);
  uint8_t *aNull = malloc(1024);
  int e = pF && aHash && aNull ? 0 : -ENOMEM;
  if (e == 0) {
    csq_bloom_init(pF, nBytes);
    for (uint32_t i0 = 0; i0 < v->n; i0 += 1024) {
      uint32_t n = v->n - i0 < 1024 ? v->n - i0 : 1024;
      csq_key_hash_vec(v, i0, n, aHash, aNull);
      for (uint32_t k = 0; k < n; k++)
        if (!aNull[k]) csq_bloom_add(pF, nBytes, aHash[k]);
    }
    int slot = csq_pb_input(b, (uint32_t)iChunk);
    e = slot < 0 ? slot : pl_filter_add_bloom(b, slot, pF, nBytes);
  }
  free(pF);
  free(aHash);
  free(aNull);
  return e < 0 ? e : 0;
}

/* What the join filters of one program hold so far. */
typedef struct jf_room {
  uint32_t nTotal, nHeap; /* IN lists: values, bytes */
  int nBloom;
  uint32_t *aPick; /* PL_JOINFILTER_MAX_KEYS indices */
} jf_room;

/* Add to b a join filter on chunk iChunk holding the values of v: an IN list
** of the distinct ones, or a Bloom filter when they are too many, while the
** program has room for it. 0 or a negative errno. */
static int add_filter(csq_pb *b, int iChunk, const csq_vec *v, jf_room *pRoom, int *pnFilter) {
  uint32_t n = 0;
  int rc = distinct(v, pRoom->aPick, PL_JOINFILTER_MAX_KEYS, &n);
  if (rc == -E2BIG) { /* too many keys for a list: a Bloom filter of them */
    if (pRoom->nBloom >= PL_JOINFILTER_MAX_BLOOMS) return 0;
    rc = add_bloom(b, iChunk, v);
    if (rc < 0) return rc;
    if (rc == 0) pRoom->nBloom++, (*pnFilter)++;
    return 0;
  }
  if (rc) return rc;
  uint32_t nBytes = 0;
  for (uint32_t i = 0; i < n; i++) nBytes += v->aLen[pRoom->aPick[i]];
  if (n == 0 || pRoom->nTotal + n > 2 * PL_JOINFILTER_MAX_KEYS || pRoom->nHeap + nBytes > 64 * 1024)
    return 0;
  rc = add_in(b, iChunk, v, pRoom->aPick, n);
  if (rc < 0) return rc;
  pRoom->nTotal += n;
  pRoom->nHeap += nBytes;
  (*pnFilter)++;
  return 0;
}

/* Union-find over the (table, chunk) ends of a join's keys. */
typedef struct jf_nodes {
  int aTab[2 * PL_JOIN_MAX_TAB * PL_JOIN_MAX_KEY], aChunk[2 * PL_JOIN_MAX_TAB * PL_JOIN_MAX_KEY];
  int aUp[2 * PL_JOIN_MAX_TAB * PL_JOIN_MAX_KEY];
  int n;
} jf_nodes;

static int jf_node(jf_nodes *g, int t, int iChunk) {
  for (int i = 0; i < g->n; i++)
    if (g->aTab[i] == t && g->aChunk[i] == iChunk) return i;
  g->aTab[g->n] = t;
  g->aChunk[g->n] = iChunk;
  g->aUp[g->n] = g->n;
  return g->n++;
}

static int jf_root(const jf_nodes *g, int i) {
  while (g->aUp[i] != i) i = g->aUp[i];
  return i;
}

static int jf_has(const pl_jf_src *a, int n, int u, int iChunk, int iOut) {
  for (int i = 0; i < n; i++)
    if (a[i].u == u && a[i].iChunk == iChunk && a[i].iOut == iOut) return 1;
  return 0;
}

/* Where table t is in the read order (the probe side last). */
static int read_pos(const pl_join *j, int t) {
  for (int i = 0; i < j->nTab - 1; i++)
    if (j->aRead[i] == t) return i;
  return j->nTab - 1;
}

/* The union-find of the chunks that inner-join keys make equal. */
static void jf_equal_keys(const pl_join *j, jf_nodes *g) {
  g->n = 0;
  for (int u = 0; u < j->nTab; u++) {
    const pl_jtab *ju = &j->aTab[u];
    if (ju->bLeft) continue;
    for (int k = 0; k < ju->nKey; k++) {
      int a = jf_root(g, jf_node(g, u, ju->aChunk[ju->aKeyOut[k]]));
      const pl_jtab *jp = &j->aTab[ju->aKeyTab[k]];
      int b = jf_root(g, jf_node(g, ju->aKeyTab[k], jp->aChunk[ju->aKeyProbe[k]]));
      g->aUp[a] = b;
    }
  }
}

int pl_join_filter_sources(const pl_join *j, int t, pl_jf_src *aSrc, int nMax) {
  int n = 0, iPos = read_pos(j, t);
  for (int u = 0; u < j->nTab; u++) {
    const pl_jtab *ju = &j->aTab[u];
    if (u == t || read_pos(j, u) > iPos) continue;
    if (ju->bLeft) continue; /* a LEFT JOIN keeps the rows it does not match */
    for (int k = 0; k < ju->nKey && n < nMax; k++)
      if (ju->aKeyTab[k] == t &&
          !jf_has(aSrc, n, u, j->aTab[t].aChunk[ju->aKeyProbe[k]], ju->aKeyOut[k]))
        aSrc[n++] = (pl_jf_src){u, j->aTab[t].aChunk[ju->aKeyProbe[k]], ju->aKeyOut[k], 0};
  }
  if (j->aTab[t].bLeft) return n;
  /* equal keys: every inner key is an equality that holds in each joined
  ** row, and SQLite's "=" between join keys (numeric with numeric, TEXT
  ** with TEXT, BINARY) is transitive */
  jf_nodes g;
  jf_equal_keys(j, &g);
  for (int a = 0; a < g.n; a++) {
    if (g.aTab[a] != t) continue;
    for (int b = 0; b < g.n && n < nMax; b++) {
      int u = g.aTab[b];
      if (u == t || jf_root(&g, a) != jf_root(&g, b)) continue;
      if (read_pos(j, u) > iPos) continue; /* read after t */
      const pl_jtab *ju = &j->aTab[u];
      for (int o = 0; o < ju->nOut; o++)
        if (ju->aChunk[o] == g.aChunk[b] && !jf_has(aSrc, n, u, g.aChunk[a], o) && n < nMax) {
          aSrc[n++] = (pl_jf_src){u, g.aChunk[a], o, 1};
          break;
        }
    }
  }
  return n;
}

/* Would the scan of t be reduced by its filters or its join filters, with
** the build sides read in j->aRead's order? aRed: the answer for every
** table before t. */
static int read_reduced(const pl_join *j, int t, const int *aRed) {
  if (j->aTab[t].nFilter > 0 || j->aTab[t].bEmpty) return 1;
  pl_jf_src aSrc[2 * PL_JOIN_MAX_TAB * PL_JOIN_MAX_KEY];
  int nSrc = pl_join_filter_sources(j, t, aSrc, (int)(sizeof(aSrc) / sizeof(aSrc[0])));
  for (int i = 0; i < nSrc; i++)
    if (aRed[aSrc[i].u]) return 1;
  return 0;
}

void pl_join_read_order(pl_join *j) {
  int n = j->nTab - 1, aRed[PL_JOIN_MAX_TAB];
  for (int i = 0; i < n; i++) j->aRead[i] = j->aOrder[j->nTab - 1 - i];
  j->aRead[n > 0 ? n : 0] = j->aOrder[0];
  jf_nodes g;
  jf_equal_keys(j, &g);
  /* each move leaves one table fewer read whole: it ends */
  for (int i = 0; i < n; i++) {
    memset(aRed, 0, sizeof(aRed));
    for (int k = 0; k < i; k++) aRed[j->aRead[k]] = read_reduced(j, j->aRead[k], aRed);
    int t = j->aRead[i];
    if (j->aTab[t].bLeft || read_reduced(j, t, aRed)) continue;
    for (int k = i + 1; k < n; k++) {
      int u = j->aRead[k], bLink = 0;
      if (j->aTab[u].bLeft || j->aTab[u].nFilter == 0) continue;
      for (int a = 0; a < g.n && !bLink; a++)
        for (int b = 0; b < g.n && !bLink; b++)
          bLink = g.aTab[a] == t && g.aTab[b] == u && jf_root(&g, a) == jf_root(&g, b);
      if (!bLink) continue;
      memmove(&j->aRead[i], &j->aRead[i + 1], sizeof(int) * (size_t)(k - i));
      j->aRead[k] = t;
      i--; /* another table is at i now */
      break;
    }
  }
}

/* A join filter to add: source aSrc[i], from a table holding this share of
** its table's rows. */
typedef struct jf_cand {
  double share;
  int i;
} jf_cand;

int pl_join_filter_program(pl_join *j, int t, const pl_jdata *aData, uint8_t **pp, size_t *pn,
                           int *pnFilter) {
  csq_pb *b = j->apB[t];
  j->apB[t] = NULL;
  *pp = NULL;
  *pn = 0;
  *pnFilter = 0;
  if (!b) return -EINVAL;
  int e = 0, nCand = 0;
  jf_room room = {0, 0, 0, malloc(sizeof(uint32_t) * PL_JOINFILTER_MAX_KEYS)};
  if (!room.aPick) e = -ENOMEM;
  /* the candidates by the share of its table the source table holds,
  ** smallest first, so that the filters likely to keep fewest rows take
  ** the room (the Bloom filters above all): a table read whole filters
  ** nothing a foreign key joins, though it may where its keys are not all
  ** the probe side's. Equal shares: the fewer rows (a smaller filter) first */
  pl_jf_src aSrc[2 * PL_JOIN_MAX_TAB * PL_JOIN_MAX_KEY];
  jf_cand aCand[2 * PL_JOIN_MAX_TAB * PL_JOIN_MAX_KEY];
  int nSrc = pl_join_filter_sources(j, t, aSrc, (int)(sizeof(aSrc) / sizeof(aSrc[0])));
  for (int c = 0; c < nSrc; c++) {
    int u = aSrc[c].u;
    const pl_jtab *ju = &j->aTab[u];
    double share = ju->nRows > 0 ? (double)aData[u].nRow / (double)ju->nRows : 0.5;
    if (share > 1) share = 1; /* rows written since the count */
    uint32_t n = aData[u].nRow;
    int i = nCand++;
    for (; i > 0 && (aCand[i - 1].share > share ||
                     (aCand[i - 1].share == share && aData[aSrc[aCand[i - 1].i].u].nRow > n));
         i--)
      aCand[i] = aCand[i - 1];
    aCand[i] = (jf_cand){share, c};
  }
  for (int i = 0; e == 0 && i < nCand; i++) {
    const pl_jf_src *x = &aSrc[aCand[i].i];
    e = add_filter(b, x->iChunk, &aData[x->u].aCol[x->iOut], &room, pnFilter);
  }
  free(room.aPick);
  if (e == 0) e = csq_pb_finish(b, pp, pn);
  csq_pb_free(b);
  return e < 0 ? e : 0;
}

int pl_join_filter_sub(pl_join *j, int t, int nKey, const int *aKeyOut, const int *aKeyCol,
                       const csq_vec *aRow, uint8_t **pp, size_t *pn, int *pnFilter) {
  csq_pb *b = j->apB[t];
  j->apB[t] = NULL;
  *pp = NULL;
  *pn = 0;
  *pnFilter = 0;
  if (!b) return -EINVAL;
  int e = 0;
  jf_room room = {0, 0, 0, malloc(sizeof(uint32_t) * PL_JOINFILTER_MAX_KEYS)};
  if (!room.aPick) e = -ENOMEM;
  for (int k = 0; e == 0 && k < nKey; k++)
    e = add_filter(b, j->aTab[t].aChunk[aKeyOut[k]], &aRow[aKeyCol[k]], &room, pnFilter);
  free(room.aPick);
  if (e == 0) e = csq_pb_finish(b, pp, pn);
  csq_pb_free(b);
  return e < 0 ? e : 0;
}
