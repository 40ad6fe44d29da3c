/*
** device/format/zone.c - zone maps of column chunks: merging two zones
** (csq_zone_merge) and computing one by scanning values (for the encoder).
*/
#include "device/format/chunk_int.h"

void chunk_zone_set_min(csq_zone *z, const void *p, uint64_t n) {
  z->nMinTxt = (uint8_t)(n > CSQ_ZONE_PREFIX ? CSQ_ZONE_PREFIX : n);
  z->bMinTrunc = n > CSQ_ZONE_PREFIX;
  if (z->nMinTxt) memcpy(z->zMinTxt, p, z->nMinTxt);
}
void chunk_zone_set_max(csq_zone *z, const void *p, uint64_t n) {
  z->nMaxTxt = (uint8_t)(n > CSQ_ZONE_PREFIX ? CSQ_ZONE_PREFIX : n);
  z->bMaxTrunc = n > CSQ_ZONE_PREFIX;
  if (z->nMaxTxt) memcpy(z->zMaxTxt, p, z->nMaxTxt);
}

/* Widen [*pMin, *pMax] to take in [bMin, bMax]; bFirst: it held nothing. */
static void merge_i(int64_t *pMin, int64_t *pMax, int64_t bMin, int64_t bMax, int bFirst) {
  if (bFirst || bMin < *pMin) *pMin = bMin;
  if (bFirst || bMax > *pMax) *pMax = bMax;
}
static void merge_r(double *pMin, double *pMax, double bMin, double bMax, int bFirst) {
  if (bFirst || bMin < *pMin) *pMin = bMin;
  if (bFirst || bMax > *pMax) *pMax = bMax;
}

/* a's text min / max becomes b's. */
static void take_min_txt(csq_zone *a, const csq_zone *b) {
  a->nMinTxt = b->nMinTxt;
  a->bMinTrunc = b->bMinTrunc;
  memcpy(a->zMinTxt, b->zMinTxt, sizeof(a->zMinTxt));
}
static void take_max_txt(csq_zone *a, const csq_zone *b) {
  a->nMaxTxt = b->nMaxTxt;
  a->bMaxTrunc = b->bMaxTrunc;
  memcpy(a->zMaxTxt, b->zMaxTxt, sizeof(a->zMaxTxt));
}

/*
** Merge zone b into a. Fields are combined only where the class masks say
** they are valid. Min/max prefixes merge exactly: two prefixes that compare
** unequal order their full values the same way (a proper prefix is only
** possible for an untruncated, hence complete, value), and equal prefixes
** keep the min untruncated if either is, the max truncated if either is.
** nVal/nNull saturate at UINT32_MAX.
*/
void csq_zone_merge(csq_zone *a, const csq_zone *b) {
  const uint8_t mI = 1u << CSQ_INT, mNum = (1u << CSQ_INT) | (1u << CSQ_REAL);
  const uint8_t mT = 1u << CSQ_TEXT, mB = 1u << CSQ_BLOB;
  uint64_t nv = (uint64_t)a->nVal + b->nVal, nn = (uint64_t)a->nNull + b->nNull;
  a->nVal = nv > UINT32_MAX ? UINT32_MAX : (uint32_t)nv;
  a->nNull = nn > UINT32_MAX ? UINT32_MAX : (uint32_t)nn;
  if (b->clsMask & mI) merge_i(&a->iMin, &a->iMax, b->iMin, b->iMax, !(a->clsMask & mI));
  if (b->clsMask & mNum) merge_r(&a->rMin, &a->rMax, b->rMin, b->rMax, !(a->clsMask & mNum));
  /* Which class the text fields describe: 2 = TEXT, 1 = BLOB (no TEXT), 0 = none. */
  int ka = (a->clsMask & mT) ? 2 : (a->clsMask & mB) ? 1 : 0;
  int kb = (b->clsMask & mT) ? 2 : (b->clsMask & mB) ? 1 : 0;
  if (kb > ka) { /* b's fields describe the class that a's must now describe */
    take_min_txt(a, b);
    take_max_txt(a, b);
  } else if (kb && kb == ka) {
    int c = cmp_bytes(b->zMinTxt, b->nMinTxt, a->zMinTxt, a->nMinTxt);
    if (c < 0) {
      take_min_txt(a, b);
    } else if (c == 0) {
      a->bMinTrunc = a->bMinTrunc && b->bMinTrunc;
    }
    c = cmp_bytes(b->zMaxTxt, b->nMaxTxt, a->zMaxTxt, a->nMaxTxt);
    if (c > 0) {
      take_max_txt(a, b);
    } else if (c == 0) {
      a->bMaxTrunc = a->bMaxTrunc || b->bMaxTrunc;
    }
  }
  a->clsMask |= b->clsMask;
}

/* Widen z's REAL range [rMin, rMax] to r; *pbNum: it holds a value. */
static inline void widen_r(csq_zone *z, double r, int *pbNum) {
  if (!*pbNum)
    z->rMin = z->rMax = r, *pbNum = 1;
  else if (r < z->rMin)
    z->rMin = r;
  else if (r > z->rMax)
    z->rMax = r;
}

/*
** Numeric and text zone fields by brute force over the values of v[i0, i0+n)
** (used for BLOB, plain TEXT and mixed chunks; INT and REAL compute theirs on the
** way). NaN never reaches a SQLite column, but if one does it is left out of
** rMin/rMax, and a chunk of NaNs only gets the all-covering [-inf, +inf].
*/
void chunk_zone_scan(csq_zone *z, const csq_vec *v, uint32_t i0, uint32_t n) {
  int bInt = 0, bNum = 0;
  const uint8_t kTxt = (z->clsMask & (1u << CSQ_TEXT)) ? CSQ_TEXT : CSQ_BLOB;
  const char *zMin = 0, *zMax = 0;
  uint64_t nMin = 0, nMax = 0;
  int bHaveTxt = 0;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = i0 + k;
    uint8_t c = v->aCls[i];
    if (c == CSQ_INT) {
      int64_t x = v->aVal[i].i;
      if (!bInt)
        z->iMin = z->iMax = x, bInt = 1;
      else if (x < z->iMin)
        z->iMin = x;
      else if (x > z->iMax)
        z->iMax = x;
      widen_r(z, (double)x, &bNum);
    } else if (c == CSQ_REAL) {
      double r = v->aVal[i].r;
      if (isnan(r)) continue;
      widen_r(z, r, &bNum);
    } else if (c == kTxt) {
      const char *p = csq_vec_bytes(v, i);
      uint32_t len = v->aLen[i];
      if (!bHaveTxt) {
        zMin = zMax = p, nMin = nMax = len, bHaveTxt = 1;
      } else if (cmp_bytes(p, len, zMin, nMin) < 0) {
        zMin = p, nMin = len;
      } else if (cmp_bytes(p, len, zMax, nMax) > 0) {
        zMax = p, nMax = len;
      }
    }
  }
  if (!bNum && (z->clsMask & (1u << CSQ_REAL))) {
    z->rMin = -INFINITY;
    z->rMax = INFINITY;
  }
  if (bHaveTxt) {
    chunk_zone_set_min(z, zMin, nMin);
    chunk_zone_set_max(z, zMax, nMax);
  }
}
