/*
** device/store/catalog.c - the catalog: every table of an image with its columns and
** row groups (where each chunk is, its checksum and zone map, the delete
** bitmap). Serialised little-endian, field by field, as documented in
** device/store/FORMAT.md section "Catalog"; written copy-on-write at each commit.
** Also the lifecycle of the in-memory table and row-group objects.
*/
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>
#include "device/format/le.h"
#include "device/store/store_int.h"

/* ---- byte buffer ---- */
void sbuf_put(store_buf *b, const void *p, size_t n) {
  if (b->oom) return;
  if (b->n + n > b->nAlloc) {
    size_t nNew = b->nAlloc ? b->nAlloc * 2 : 4096;
    while (nNew < b->n + n) nNew *= 2;
    uint8_t *a = realloc(b->a, nNew);
    if (!a) {
      b->oom = 1;
      return;
    }
    b->a = a;
    b->nAlloc = nNew;
  }
  memcpy(b->a + b->n, p, n);
  b->n += n;
}
void sbuf_u8(store_buf *b, uint8_t v) {
  sbuf_put(b, &v, 1);
}
void sbuf_u16(store_buf *b, uint16_t v) {
  uint8_t a[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
  sbuf_put(b, a, 2);
}
void sbuf_u32(store_buf *b, uint32_t v) {
  uint8_t a[4];
  for (int i = 0; i < 4; i++) a[i] = (uint8_t)(v >> (8 * i));
  sbuf_put(b, a, 4);
}
void sbuf_u64(store_buf *b, uint64_t v) {
  uint8_t a[8];
  for (int i = 0; i < 8; i++) a[i] = (uint8_t)(v >> (8 * i));
  sbuf_put(b, a, 8);
}
void sbuf_str(store_buf *b, const char *z) {
  size_t n = strlen(z);
  if (n > 0xFFFF) n = 0xFFFF;
  sbuf_u16(b, (uint16_t)n);
  sbuf_put(b, z, n);
}

/* ---- bounds-checked reader ---- */
static const uint8_t *srd_take(store_rd *r, size_t n) {
  if (r->bad || n > r->n - r->i) {
    r->bad = 1;
    return NULL;
  }
  const uint8_t *p = r->p + r->i;
  r->i += n;
  return p;
}
uint8_t srd_u8(store_rd *r) {
  const uint8_t *p = srd_take(r, 1);
  return p ? p[0] : 0;
}
uint16_t srd_u16(store_rd *r) {
  const uint8_t *p = srd_take(r, 2);
  return p ? csq_le16(p) : 0;
}
uint32_t srd_u32(store_rd *r) {
  const uint8_t *p = srd_take(r, 4);
  return p ? csq_le32(p) : 0;
}
uint64_t srd_u64(store_rd *r) {
  const uint8_t *p = srd_take(r, 8);
  return p ? csq_le64(p) : 0;
}
int srd_bytes(store_rd *r, void *pOut, size_t n) {
  const uint8_t *p = srd_take(r, n);
  if (!p) return -EBADMSG;
  memcpy(pOut, p, n);
  return 0;
}
char *srd_str(store_rd *r) {
  uint16_t n = srd_u16(r);
  const uint8_t *p = srd_take(r, n);
  if (!p) return NULL;
  char *z = malloc((size_t)n + 1);
  if (!z) {
    r->bad = 1;
    return NULL;
  }
  memcpy(z, p, n);
  z[n] = 0;
  return z;
}

/* ---- objects ---- */
void store_rg_unref(store_rg *pRg) {
  if (!pRg || __atomic_sub_fetch(&pRg->nRef, 1, __ATOMIC_ACQ_REL) > 0) return;
  free(pRg->aDel);
  free(pRg->aChunk);
  free(pRg->aRowid);
  free(pRg->aRaw);
  free(pRg);
}

store_rg *store_rg_clone(const store_rg *pRg) {
  store_rg *p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  *p = *pRg;
  p->nRef = 1;
  p->aDel = NULL;
  p->aRowid = NULL;
  p->aRaw = NULL;
  p->bSorted = 0;
  p->aChunk = malloc(sizeof(store_chunk) * (size_t)pRg->nChunk);
  size_t nDelBytes = (pRg->nRow + 7) / 8;
  if (pRg->aDel) p->aDel = malloc(nDelBytes);
  if (!p->aChunk || (pRg->aDel && !p->aDel)) {
    free(p->aChunk);
    free(p->aDel);
    free(p);
    return NULL;
  }
  memcpy(p->aChunk, pRg->aChunk, sizeof(store_chunk) * (size_t)pRg->nChunk);
  if (pRg->aDel) memcpy(p->aDel, pRg->aDel, nDelBytes);
  return p;
}

void store_table_free(store_table *pTab) {
  if (!pTab) return;
  for (int i = 0; i < pTab->nCol; i++) {
    free(pTab->aCol[i].zName);
    free(pTab->aCol[i].zType);
  }
  free(pTab->aCol);
  for (int i = 0; i < pTab->nRg; i++) store_rg_unref(pTab->apRg[i]);
  free(pTab->apRg);
  free(pTab->zName);
  free(pTab);
}

store_table *store_table_clone(const store_table *pTab) {
  store_table *p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  p->id = pTab->id;
  p->nextRowid = pTab->nextRowid;
  p->zName = strdup(pTab->zName);
  p->aCol = calloc((size_t)pTab->nCol + 1, sizeof(store_col));
  p->apRg = malloc(sizeof(store_rg *) * ((size_t)pTab->nRg + 1));
  if (!p->zName || !p->aCol || !p->apRg) goto oom;
  p->nRgAlloc = pTab->nRg + 1;
  for (int i = 0; i < pTab->nCol; i++) {
    p->aCol[i].zName = strdup(pTab->aCol[i].zName);
    p->aCol[i].zType = strdup(pTab->aCol[i].zType);
    p->aCol[i].bNotNull = pTab->aCol[i].bNotNull;
    p->nCol = i + 1;
    if (!p->aCol[i].zName || !p->aCol[i].zType) goto oom;
  }
  for (int i = 0; i < pTab->nRg; i++) {
    p->apRg[i] = pTab->apRg[i];
    __atomic_add_fetch(&p->apRg[i]->nRef, 1, __ATOMIC_RELAXED);
  }
  p->nRg = pTab->nRg;
  return p;
oom:
  store_table_free(p);
  return NULL;
}

/* ---- serialisation ---- */
static void put_zone(store_buf *b, const csq_zone *z) {
  sbuf_u32(b, z->nVal);
  sbuf_u32(b, z->nNull);
  sbuf_u8(b, z->clsMask);
  sbuf_u8(b, z->bMinTrunc);
  sbuf_u8(b, z->bMaxTrunc);
  sbuf_u8(b, z->nMinTxt);
  sbuf_u8(b, z->nMaxTxt);
  sbuf_u64(b, (uint64_t)z->iMin);
  sbuf_u64(b, (uint64_t)z->iMax);
  uint64_t u;
  memcpy(&u, &z->rMin, 8);
  sbuf_u64(b, u);
  memcpy(&u, &z->rMax, 8);
  sbuf_u64(b, u);
  sbuf_put(b, z->zMinTxt, CSQ_ZONE_PREFIX);
  sbuf_put(b, z->zMaxTxt, CSQ_ZONE_PREFIX);
}

static void get_zone(store_rd *r, csq_zone *z) {
  memset(z, 0, sizeof(*z));
  z->nVal = srd_u32(r);
  z->nNull = srd_u32(r);
  z->clsMask = srd_u8(r);
  z->bMinTrunc = srd_u8(r);
  z->bMaxTrunc = srd_u8(r);
  z->nMinTxt = srd_u8(r);
  z->nMaxTxt = srd_u8(r);
  z->iMin = (int64_t)srd_u64(r);
  z->iMax = (int64_t)srd_u64(r);
  uint64_t u = srd_u64(r);
  memcpy(&z->rMin, &u, 8);
  u = srd_u64(r);
  memcpy(&z->rMax, &u, 8);
  srd_bytes(r, z->zMinTxt, CSQ_ZONE_PREFIX);
  srd_bytes(r, z->zMaxTxt, CSQ_ZONE_PREFIX);
  if (z->nMinTxt > CSQ_ZONE_PREFIX || z->nMaxTxt > CSQ_ZONE_PREFIX) r->bad = 1;
}

/* One row group's record (FORMAT.md "Catalog"): CSQ_CATREC_HDR bytes,
** then CSQ_CATREC_CHUNK per chunk, which the device reads for an Execute
** over a range of row groups (device/engine/exec_range.c). */
static void put_rg(store_buf *b, const store_rg *pRg) {
  sbuf_u64(b, pRg->lba);
  sbuf_u32(b, pRg->nblk);
  sbuf_u32(b, pRg->nRow);
  sbuf_u32(b, pRg->nDel);
  sbuf_u64(b, pRg->delLba);
  sbuf_u32(b, pRg->delBytes);
  sbuf_u64(b, pRg->delXxh3);
  sbuf_u32(b, (uint32_t)pRg->nChunk);
  for (int c = 0; c < pRg->nChunk; c++) {
    const store_chunk *pC = &pRg->aChunk[c];
    sbuf_u32(b, pC->off);
    sbuf_u32(b, pC->len);
    sbuf_u64(b, pC->xxh3);
    sbuf_u8(b, pC->enc);
    put_zone(b, &pC->zone);
  }
}

int store_rg_records_hash(store_rg *const *apRg, int n, uint64_t *pHash) {
  store_buf b = {0};
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  for (int g = 0; g < n && !b.oom; g++) {
    b.n = 0;
    put_rg(&b, apRg[g]);
    if (!b.oom) XXH3_64bits_update(&st, b.a, b.n);
  }
  free(b.a);
  if (b.oom) return -ENOMEM;
  *pHash = XXH3_64bits_digest(&st);
  return 0;
}

int store_table_catpos(const store_table *pTab, uint64_t *pLba, uint64_t *pOff) {
  if (!pTab->catLba) return -ENOENT;
  *pLba = pTab->catLba;
  *pOff = pTab->catOff;
  return 0;
}

int store_cat_encode(const store_snap *pSnap, uint32_t nextTabId, uint8_t **ppOut, size_t *pnOut) {
  store_buf b = {0};
  sbuf_put(&b, CSQ_CAT_MAGIC, 8);
  sbuf_u32(&b, CSQ_FORMAT_VERSION);
  sbuf_u32(&b, (uint32_t)pSnap->nTab);
  sbuf_u64(&b, pSnap->gen);
  sbuf_u32(&b, nextTabId);
  for (int t = 0; t < pSnap->nTab; t++) {
    store_table *pTab = pSnap->apTab[t];
    sbuf_u32(&b, pTab->id);
    sbuf_str(&b, pTab->zName);
    sbuf_u32(&b, (uint32_t)pTab->nCol);
    for (int c = 0; c < pTab->nCol; c++) {
      sbuf_str(&b, pTab->aCol[c].zName);
      sbuf_str(&b, pTab->aCol[c].zType);
      sbuf_u8(&b, (uint8_t)pTab->aCol[c].bNotNull);
    }
    sbuf_u64(&b, (uint64_t)pTab->nextRowid);
    sbuf_u32(&b, (uint32_t)pTab->nRg);
    pTab->catOff = b.n; /* the caller records catLba once the catalog is written */
    for (int g = 0; g < pTab->nRg; g++) put_rg(&b, pTab->apRg[g]);
  }
  if (b.oom) {
    free(b.a);
    return -ENOMEM;
  }
  *ppOut = b.a;
  *pnOut = b.n;
  return 0;
}

int store_cat_decode(const uint8_t *p, size_t n, store_snap **ppSnap, uint32_t *pNextTabId,
                     char **pzErr) {
  store_rd r = {p, n, 0, 0};
  char magic[8];
  store_snap *pSnap = calloc(1, sizeof(*pSnap));
  if (!pSnap) return -ENOMEM;
  pSnap->nRef = 1;
  if (srd_bytes(&r, magic, 8) || memcmp(magic, CSQ_CAT_MAGIC, 8) != 0 ||
      srd_u32(&r) != CSQ_FORMAT_VERSION)
    goto bad;
  uint32_t nTab = srd_u32(&r);
  pSnap->gen = srd_u64(&r);
  *pNextTabId = srd_u32(&r);
  if (r.bad || nTab > n / 16) goto bad;
  pSnap->apTab = calloc((size_t)nTab + 1, sizeof(store_table *));
  if (!pSnap->apTab) goto oom;
  for (uint32_t t = 0; t < nTab; t++) {
    store_table *pTab = calloc(1, sizeof(*pTab));
    if (!pTab) goto oom;
    pSnap->apTab[pSnap->nTab++] = pTab;
    pTab->id = srd_u32(&r);
    pTab->zName = srd_str(&r);
    uint32_t nCol = srd_u32(&r);
    if (r.bad || !pTab->zName || nCol == 0 || nCol > n / 5) goto bad;
    pTab->aCol = calloc(nCol, sizeof(store_col));
    if (!pTab->aCol) goto oom;
    for (uint32_t c = 0; c < nCol; c++) {
      pTab->aCol[c].zName = srd_str(&r);
      pTab->aCol[c].zType = srd_str(&r);
      pTab->aCol[c].bNotNull = srd_u8(&r);
      pTab->nCol = (int)c + 1;
      if (r.bad) goto bad;
    }
    pTab->nextRowid = (int64_t)srd_u64(&r);
    uint32_t nRg = srd_u32(&r);
    if (r.bad || nRg > n / 32) goto bad;
    pTab->catOff = r.i; /* the caller sets catLba, where it read the catalog */
    pTab->apRg = calloc((size_t)nRg + 1, sizeof(store_rg *));
    if (!pTab->apRg) goto oom;
    pTab->nRgAlloc = (int)nRg + 1;
    for (uint32_t g = 0; g < nRg; g++) {
      store_rg *pRg = calloc(1, sizeof(*pRg));
      if (!pRg) goto oom;
      pRg->nRef = 1;
      pTab->apRg[pTab->nRg++] = pRg;
      pRg->lba = srd_u64(&r);
      pRg->nblk = srd_u32(&r);
      pRg->nRow = srd_u32(&r);
      pRg->nDel = srd_u32(&r);
      pRg->delLba = srd_u64(&r);
      pRg->delBytes = srd_u32(&r);
      pRg->delXxh3 = srd_u64(&r);
      uint32_t nChunk = srd_u32(&r);
      if (r.bad || nChunk != nCol + 1 || pRg->nDel > pRg->nRow ||
          (pRg->nDel && pRg->delBytes != (pRg->nRow + 7) / 8) ||
          (uint64_t)pRg->nblk * CSQ_LBA_SIZE > UINT32_MAX)
        goto bad;
      pRg->nChunk = (int)nChunk;
      pRg->aChunk = calloc(nChunk, sizeof(store_chunk));
      if (!pRg->aChunk) goto oom;
      for (uint32_t c = 0; c < nChunk; c++) {
        store_chunk *pC = &pRg->aChunk[c];
        pC->off = srd_u32(&r);
        pC->len = srd_u32(&r);
        pC->xxh3 = srd_u64(&r);
        pC->enc = srd_u8(&r);
        get_zone(&r, &pC->zone);
        if (r.bad || (uint64_t)pC->off + pC->len > (uint64_t)pRg->nblk * CSQ_LBA_SIZE) goto bad;
      }
    }
  }
  if (r.i != r.n) goto bad;
  *ppSnap = pSnap;
  return 0;
bad:
  if (pzErr) *pzErr = dev_mprintf("catalog is malformed (at byte %zu of %zu)", r.i, n);
  store_snap_free_tables(pSnap);
  free(pSnap);
  return -EBADMSG;
oom:
  store_snap_free_tables(pSnap);
  free(pSnap);
  return -ENOMEM;
}

void store_snap_free_tables(store_snap *pSnap) {
  for (int i = 0; i < pSnap->nTab; i++) store_table_free(pSnap->apTab[i]);
  free(pSnap->apTab);
  pSnap->apTab = NULL;
  pSnap->nTab = 0;
}
