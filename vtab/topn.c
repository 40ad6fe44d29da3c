/*
** vtab/topn.c - the top-N heap of a consumed ORDER BY ... LIMIT (topn.h).
**
** The device keeps each row group's LIMIT + OFFSET best rows (a top-N
** section of the program); the cursor offers them all to this heap, which
** keeps the nMax rows that sort first among those offered, each copied out
** of its batch into a slot (its values, and its TEXT/BLOB bytes in a buffer
** of the slot's own that only grows: no allocation per value). aHeap orders
** the slots with the row that sorts last at the root, so a new row costs
** one comparison with the root when it does not belong, log(nMax) when it
** does. Equal keys keep the row that came first (row group order). A host
** scan with a consumed ORDER BY offers every live row the same way.
*/
#include <string.h>
#include "vtab/topn.h"
#include "device/format/value.h"

struct vt_topn {
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
};

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
int vt_topn_emit(vt_topn *t, csq_vec *aOut) {
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

void vt_topn_free(vt_topn *t) {
  if (!t) return;
  for (uint32_t s = 0; s < t->nSlot; s++) sqlite3_free(t->azBuf[s]);
  sqlite3_free(t->aCls);
  sqlite3_free(t->aVal);
  sqlite3_free(t->aLen);
  sqlite3_free(t->azBuf);
  sqlite3_free(t->anBuf);
  sqlite3_free(t->aSeq);
  sqlite3_free(t->aHeap);
  sqlite3_free(t);
}

vt_topn *vt_topn_new(int nCol, int nKey, const int *aKey, const uint8_t *aDesc, uint32_t nMax) {
  vt_topn *t = sqlite3_malloc64(sizeof(*t));
  if (!t) return NULL;
  memset(t, 0, sizeof(*t));
  t->nCol = nCol;
  t->nMax = nMax;
  t->nKey = nKey;
  for (int k = 0; k < nKey; k++) {
    t->aKey[k] = aKey[k];
    t->aDesc[k] = aDesc[k];
  }
  return t;
}

int vt_topn_add(vt_topn *t, const csq_vec *const *apSrc, uint32_t iRow, uint32_t nRow) {
  for (uint32_t r = iRow; r < iRow + nRow; r++)
    if (topn_add(t, apSrc, r)) return SQLITE_NOMEM;
  return SQLITE_OK;
}

uint32_t vt_topn_rows(const vt_topn *t) {
  return t->nRow;
}
