/*
** vtab/group.c - rows handed to SQLite grouped: a csq table's scan that
** takes the place of SQLite's sorter under a GROUP BY.
**
** For "SELECT ... FROM t GROUP BY a, b" SQLite sorts every row on (a, b)
** before it aggregates, unless the table says its rows come in that order
** (orderByConsumed). The scan then collects the rows it returns (the used
** columns, as vectors), numbers the groups by value.h's GROUP BY rules
** through a csq_group table (NULL equals NULL, 1 equals 1.0), sorts the
** groups by their keys (value.h's order, BINARY) and hands the rows over
** group by group (an order of positions: the rows are not moved). SQLite
** 3.40 asks only for grouped rows (sqlite3_vtab_distinct() == 1) but then
** takes them as sorted for an ORDER BY on the same keys, so the groups must
** come sorted too. The order itself (vt_group_order) also serves the
** joined rows of csq_jrows (vtab/joinrows.c).
**
** The whole result is held: the plan consumes the GROUP BY only when the
** table's used columns fit VT_GROUP_BUDGET (vtab/plan.c).
*/
#include <stdlib.h>
#include <string.h>

#include "vtab/vtab.h"
#include "device/format/group.h"

struct vt_grouper {
  int nOut;      /* vectors per row */
  csq_vec *aSet; /* the rows of this pass */
  int nKey;      /* the key vectors, among them */
  int aKey[VT_GROUP_MAXKEY];
  uint8_t aDesc[VT_GROUP_MAXKEY]; /* key k sorts descending */
  uint32_t *aPos;                 /* emitted: the rows in the order they are served */
};

vt_grouper *vt_grouper_new(int nOut, const int *aKey, const uint8_t *aDesc, int nKey) {
  if (nKey < 1 || nKey > VT_GROUP_MAXKEY || nOut < 1) return NULL;
  vt_grouper *g = sqlite3_malloc64(sizeof(*g));
  if (!g) return NULL;
  memset(g, 0, sizeof(*g));
  g->aSet = sqlite3_malloc64(sizeof(csq_vec) * (size_t)nOut);
  if (!g->aSet) {
    sqlite3_free(g);
    return NULL;
  }
  for (int i = 0; i < nOut; i++) csq_vec_init(&g->aSet[i]);
  g->nOut = nOut;
  g->nKey = nKey;
  memcpy(g->aKey, aKey, sizeof(int) * (size_t)nKey);
  memcpy(g->aDesc, aDesc, (size_t)nKey);
  return g;
}

void vt_grouper_free(vt_grouper *g) {
  if (!g) return;
  for (int i = 0; i < g->nOut; i++) csq_vec_free(&g->aSet[i]);
  sqlite3_free(g->aSet);
  free(g->aPos);
  sqlite3_free(g);
}

int vt_grouper_reserve(vt_grouper *g, uint32_t nRow) {
  for (int i = 0; i < g->nOut; i++)
    if (csq_vec_reserve(&g->aSet[i], nRow, 0)) return SQLITE_NOMEM;
  return SQLITE_OK;
}

int vt_grouper_add(vt_grouper *g, const csq_vec *const *apSrc, const uint32_t *aRow, uint32_t n) {
  if (!aRow) {
    for (int i = 0; i < g->nOut; i++)
      if (csq_vec_append(&g->aSet[i], apSrc[i], 0, n)) return SQLITE_NOMEM;
    return SQLITE_OK;
  }
  /* runs of consecutive rows, one append each */
  for (int i = 0; i < g->nOut; i++)
    for (uint32_t k = 0; k < n;) {
      uint32_t k1 = k + 1;
      while (k1 < n && aRow[k1] == aRow[k1 - 1] + 1) k1++;
      if (csq_vec_append(&g->aSet[i], apSrc[i], aRow[k], k1 - k)) return SQLITE_NOMEM;
      k = k1;
    }
  return SQLITE_OK;
}

/* qsort_r's order of two group numbers: their keys in the ORDER BY's. */
struct sort_ctx {
  const csq_group *t;
  const uint8_t *aDesc;
};

static int cmp_groups(const void *pa, const void *pb, void *pCtx) {
  const struct sort_ctx *x = pCtx;
  const csq_value *ka = csq_group_keys(x->t, *(const uint32_t *)pa);
  const csq_value *kb = csq_group_keys(x->t, *(const uint32_t *)pb);
  for (int k = 0; k < x->t->nKey; k++) {
    int c = csq_value_cmp(&ka[k], &kb[k], CSQ_COLL_BINARY);
    if (c) return x->aDesc[k] ? -c : c;
  }
  return 0;
}

/* The key of row r in v: a vector shorter than the rows holds NULLs past
** its end. */
static csq_value key_at(const csq_vec *v, uint32_t r) {
  csq_value x;
  if (r < v->n) return csq_value_of_vec(v, r);
  memset(&x, 0, sizeof(x));
  x.cls = CSQ_NULL;
  return x;
}

int vt_group_sorted(const csq_vec *const *apKey, const uint8_t *aDesc, int nKey, uint32_t n) {
  for (uint32_t r = 1; r < n; r++) {
    int c = 0;
    for (int k = 0; k < nKey && c == 0; k++) {
      csq_value a = key_at(apKey[k], r - 1), b = key_at(apKey[k], r);
      c = csq_value_cmp(&a, &b, CSQ_COLL_BINARY);
      if (aDesc[k]) c = -c;
    }
    if (c > 0) return 0;
  }
  return 1;
}

int vt_group_order(const csq_vec *const *apKey, const uint8_t *aDesc, int nKey, uint32_t n,
                   uint32_t **paPos) {
  *paPos = NULL;
  if (nKey < 1 || nKey > VT_GROUP_MAXKEY) return SQLITE_MISUSE;
  uint32_t *aGid = malloc(sizeof(uint32_t) * (n ? n : 1));
  uint32_t *aPos = malloc(sizeof(uint32_t) * (n ? n : 1));
  uint32_t *aStart = NULL;
  csq_group t;
  csq_group_init(&t, nKey, 16);
  int rc = aGid && aPos ? SQLITE_OK : SQLITE_NOMEM;
  for (uint32_t r = 0; rc == SQLITE_OK && r < n; r++) {
    csq_value aK[VT_GROUP_MAXKEY];
    for (int k = 0; k < nKey; k++) aK[k] = key_at(apKey[k], r);
    if (r > 0) { /* the previous row's group, by csq_group_find's equality:
                 ** joined rows come in runs of one key (a probe row's
                 ** matches), which then cost no hash and no table lookup */
      const csq_value *gk = csq_group_keys(&t, aGid[r - 1]);
      int k = 0;
      while (k < nKey && csq_value_eq(&gk[k], &aK[k])) k++;
      if (k == nKey) {
        aGid[r] = aGid[r - 1];
        continue;
      }
    }
    uint64_t h = csq_group_hash(aK, nKey);
    uint32_t pos = 0;
    if (csq_group_reserve(&t)) {
      rc = SQLITE_NOMEM;
      break;
    }
    int64_t gid = csq_group_find(&t, aK, h, &pos);
    if (gid < 0) gid = csq_group_add(&t, aK, h, pos);
    if (gid < 0) rc = SQLITE_NOMEM;
    aGid[r] = (uint32_t)gid;
  }
  uint32_t *aOrder = NULL; /* groups in key order, then each group's rank */
  if (rc == SQLITE_OK) {
    aStart = calloc((size_t)t.nGroup + 1, sizeof(uint32_t));
    aOrder = malloc(sizeof(uint32_t) * (t.nGroup ? t.nGroup : 1));
    if (!aStart || !aOrder) rc = SQLITE_NOMEM;
  }
  if (rc == SQLITE_OK) {
    struct sort_ctx ctx = {&t, aDesc};
    for (uint32_t k = 0; k < t.nGroup; k++) aOrder[k] = k;
    qsort_r(aOrder, t.nGroup, sizeof(uint32_t), cmp_groups, &ctx);
    for (uint32_t k = 0; k < t.nGroup; k++) aStart[aOrder[k]] = k; /* aStart as scratch */
    for (uint32_t k = 0; k < t.nGroup; k++) aOrder[k] = aStart[k];
    memset(aStart, 0, sizeof(uint32_t) * ((size_t)t.nGroup + 1));
    for (uint32_t r = 0; r < n; r++) aGid[r] = aOrder[aGid[r]];
    /* a counting sort by rank, rows in their order within each group */
    for (uint32_t r = 0; r < n; r++) aStart[aGid[r] + 1]++;
    for (uint32_t k = 0; k < t.nGroup; k++) aStart[k + 1] += aStart[k];
    for (uint32_t r = 0; r < n; r++) aPos[aStart[aGid[r]]++] = r;
    *paPos = aPos;
    aPos = NULL;
  }
  csq_group_free(&t);
  free(aGid);
  free(aPos);
  free(aStart);
  free(aOrder);
  return rc;
}

int vt_grouper_emit(vt_grouper *g, csq_vec *aOut, uint32_t *pnRow, const uint32_t **paPos) {
  uint32_t n = g->aSet[0].n;
  const csq_vec *apKey[VT_GROUP_MAXKEY];
  for (int k = 0; k < g->nKey; k++) apKey[k] = &g->aSet[g->aKey[k]];
  uint32_t *aPos = NULL;
  int rc = vt_group_order(apKey, g->aDesc, g->nKey, n, &aPos);
  if (rc == SQLITE_OK) {
    /* the rows stay where they are (moving them costs more than reading
    ** them in this order): hand the vectors over, the output's buffers
    ** take their place */
    for (int i = 0; i < g->nOut; i++) {
      csq_vec tmp = aOut[i];
      aOut[i] = g->aSet[i];
      g->aSet[i] = tmp;
    }
    free(g->aPos);
    g->aPos = aPos;
  }
  *pnRow = rc == SQLITE_OK ? n : 0;
  *paPos = g->aPos;
  return rc;
}
