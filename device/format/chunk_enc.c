/*
** device/format/chunk_enc.c - column chunks: the encoder. The codec is four
** files (see chunk_int.h): bitpack.c, zone.c, this encoder and chunk_dec.c.
**
** Owns the on-media "Column chunk" format (device/store/FORMAT.md): a 56-byte
** little-endian header, an optional null bitmap, then the sections of one of
** the CSQ_ENC_* encodings, every section starting at a multiple of 8. The
** encoder picks the encoding from the values (see encode_*); the
** decoder trusts nothing in the bytes: csq_chunk_view() verifies the checksum
** and then every count, size, offset, code and tag against the buffer before
** anything is materialised, so corrupt media yields -EBADMSG, never a crash
** or an out-of-bounds read.
**
** Hot loops work on whole arrays (bit packing/unpacking in blocks, memcpy of
** plain sections); there is no per-value function call on the typed paths.
*/
#include "device/format/chunk_int.h"

/* What the encoder decided; turned into a header by chunk_alloc(). */
typedef struct enc_plan {
  uint8_t enc, cls, width;
  uint32_t nVal, nNull, nAux;
  uint64_t ref, nVar;
  uint64_t nPayload; /* bytes after the header and the bitmap */
} enc_plan;

/* Allocate the chunk (zeroed, so padding is deterministic), fill the header
** except the checksum, and write the null bitmap of v[i0, i0+n). Returns the
** buffer and the offset of the payload in *piPay, or NULL. */
static uint8_t *chunk_alloc(const enc_plan *pl, const csq_vec *v, uint32_t i0, uint64_t *pnBytes,
                            uint64_t *piPay) {
  int bNulls = pl->nNull > 0 && pl->nNull < pl->nVal;
  uint64_t nMap = bNulls ? pad8(((uint64_t)pl->nVal + 7) / 8) : 0;
  uint64_t nBytes = CSQ_CHUNK_HDR + nMap + pl->nPayload;
  if (nBytes > SIZE_MAX) return 0;
  uint8_t *p = calloc(1, (size_t)nBytes);
  if (!p) return 0;
  memcpy(p + H_MAGIC, CHUNK_MAGIC, 4);
  p[H_VERSION] = CHUNK_VERSION;
  p[H_ENC] = pl->enc;
  p[H_CLS] = pl->cls;
  p[H_FLAGS] = bNulls ? FLAG_NULLS : 0;
  csq_put_le64(p + H_NBYTES, nBytes);
  csq_put_le32(p + H_NVAL, pl->nVal);
  csq_put_le32(p + H_NNULL, pl->nNull);
  p[H_WIDTH] = pl->width;
  csq_put_le32(p + H_NAUX, pl->nAux);
  csq_put_le64(p + H_REF, pl->ref);
  csq_put_le64(p + H_NVAR, pl->nVar);
  if (bNulls) {
    uint8_t *m = p + CSQ_CHUNK_HDR;
    const uint8_t *aCls = v->aCls + i0;
    for (uint32_t k = 0; k < pl->nVal; k++)
      m[k >> 3] |= (uint8_t)((aCls[k] == CSQ_NULL) << (k & 7));
  }
  *pnBytes = nBytes;
  *piPay = CSQ_CHUNK_HDR + nMap;
  return p;
}

/*
** Streaming bit packer into a zeroed section: codes arrive in blocks (so no
** encoder needs a temporary array the size of the chunk). Groups of 8 codes
** fill exactly w bytes; with w a compile-time constant (the switch below) a
** group is assembled in registers and written with whole-word stores. A
** store may spill zeros past the group's w bytes: only into bytes of later
** codes (written afterwards) or the section's slack. Codes outside whole
** groups are OR-ed in one at a time.
*/
typedef struct packer {
  uint8_t *base; /* start of the section */
  uint64_t pos;  /* codes written */
} packer;

static inline void pack_one(uint8_t *base, unsigned w, uint64_t i, uint64_t x) {
  uint64_t bit = i * w;
  uint8_t *q = base + (bit >> 6) * 8;
  unsigned s = (unsigned)(bit & 63);
  csq_put_le64(q, csq_le64(q) | x << s);
  if (s + w > 64) csq_put_le64(q + 8, csq_le64(q + 8) | x >> (64 - s));
}

static inline __attribute__((always_inline)) void
pack_groups(uint8_t *base, const uint64_t *a, uint32_t nGroup, uint64_t ref, const unsigned w) {
  const uint64_t mask = w == 64 ? ~(uint64_t)0 : ((uint64_t)1 << w) - 1;
  for (uint32_t g = 0; g < nGroup; g++, base += w, a += 8) {
    uint64_t t[9] = {0};
#pragma GCC unroll 8
    for (unsigned j = 0; j < 8; j++) {
      const unsigned bit = j * w, wi = bit >> 6, sh = bit & 63;
      uint64_t x = (a[j] - ref) & mask;
      t[wi] |= x << sh;
      if (sh && sh + w > 64) t[wi + 1] |= x >> (64 - sh);
    }
#pragma GCC unroll 8
    for (unsigned q = 0; q < (w + 7) / 8; q++) csq_put_le64(base + 8 * q, t[q]);
  }
}

/* Append codes (a[i] - ref) mod 2^w, i < n, w in 1..64. */
static void pack_codes(packer *pk, const uint64_t *a, uint32_t n, unsigned w, uint64_t ref) {
  const uint64_t mask = w == 64 ? ~(uint64_t)0 : ((uint64_t)1 << w) - 1;
  uint32_t k = 0;
  for (; k < n && (pk->pos & 7); k++, pk->pos++)
    pack_one(pk->base, w, pk->pos, (a[k] - ref) & mask);
  uint32_t nGroup = (n - k) / 8;
  if (nGroup) {
    uint8_t *base = pk->base + (pk->pos / 8) * w;
    switch (w) {
#define W(x)                                                                                       \
  case x:                                                                                          \
    pack_groups(base, a + k, nGroup, ref, x);                                                      \
    break;
      EACH_WIDTH(W)
#undef W
    }
    k += nGroup * 8;
    pk->pos += (uint64_t)nGroup * 8;
  }
  for (; k < n; k++, pk->pos++) pack_one(pk->base, w, pk->pos, (a[k] - ref) & mask);
}

/* Index of the first non-NULL value of aCls (there is one), of which nNull
** are NULL. */
static inline uint32_t first_value(const uint8_t *aCls, uint32_t nNull) {
  uint32_t k = 0;
  if (nNull)
    while (aCls[k] == CSQ_NULL) k++;
  return k;
}

/*
** INT values (plus NULLs) of v[i0, i0+n), at least one INT: CONST, INT_FOR
** or INT_RLE, whichever is smallest. NULL slots are coded as the previous
** value (the first value for leading NULLs) so that they never break a run;
** with FOR they cost nothing extra either way. One pass finds min, max and
** the run count, a second packs, block by block.
*/
static int encode_int(const csq_vec *v, uint32_t i0, uint32_t n, uint32_t nNull, csq_zone *z,
                      uint8_t **pp, uint64_t *pnBytes) {
  const csq_val *a = v->aVal + i0;
  const uint8_t *aCls = v->aCls + i0;
  const uint32_t k0 = first_value(aCls, nNull);
  int64_t mn = a[k0].i, mx = a[k0].i;
  uint32_t nRun = 1;
  if (nNull == 0) {
    for (uint32_t k = 0; k < n; k++) {
      int64_t x = a[k].i;
      mn = x < mn ? x : mn;
      mx = x > mx ? x : mx;
    }
    for (uint32_t k = 1; k < n; k++) nRun += a[k].i != a[k - 1].i;
  } else {
    int64_t prev = a[k0].i;
    for (uint32_t k = k0; k < n; k++) {
      if (aCls[k] == CSQ_NULL) continue;
      int64_t x = a[k].i;
      mn = x < mn ? x : mn;
      mx = x > mx ? x : mx;
      nRun += x != prev;
      prev = x;
    }
  }
  z->iMin = mn;
  z->iMax = mx;
  z->rMin = (double)mn;
  z->rMax = (double)mx;

  enc_plan pl = {.cls = CSQ_INT, .nVal = n, .nNull = nNull, .ref = (uint64_t)mn};
  if (mn == mx) {
    pl.enc = CSQ_ENC_CONST;
  } else {
    pl.width = (uint8_t)bitlen((uint64_t)mx - (uint64_t)mn);
    uint64_t nFor = csq_packed_size(n, pl.width);
    uint64_t nRle = csq_packed_size(nRun, pl.width) + pad8((uint64_t)nRun * 4);
    if (nRle < nFor) {
      pl.enc = CSQ_ENC_INT_RLE;
      pl.nAux = nRun;
      pl.nPayload = nRle;
    } else {
      pl.enc = CSQ_ENC_INT_FOR;
      pl.nPayload = nFor;
    }
  }
  uint64_t iPay;
  uint8_t *p = chunk_alloc(&pl, v, i0, pnBytes, &iPay);
  if (!p) return -ENOMEM;
  uint64_t aBuf[BLOCK];
  packer pk = {p + iPay, 0};
  if (pl.enc == CSQ_ENC_INT_FOR && nNull == 0) {
    pack_codes(&pk, (const uint64_t *)(const void *)a, n, pl.width, pl.ref);
  } else if (pl.enc == CSQ_ENC_INT_FOR) {
    uint64_t prev = (uint64_t)a[k0].i;
    for (uint32_t k = 0; k < n; k += BLOCK) {
      uint32_t m = n - k < BLOCK ? n - k : BLOCK;
      for (uint32_t j = 0; j < m; j++) {
        prev = aCls[k + j] == CSQ_NULL ? prev : (uint64_t)a[k + j].i;
        aBuf[j] = prev;
      }
      pack_codes(&pk, aBuf, m, pl.width, pl.ref);
    }
  } else if (pl.enc == CSQ_ENC_INT_RLE) {
    /* Run values are packed a block at a time; run ends go straight out. */
    uint8_t *aEnd = p + iPay + csq_packed_size(nRun, pl.width);
    uint64_t cur = (uint64_t)a[k0].i;
    uint32_t r = 0, m = 0;
    for (uint32_t k = k0; k < n; k++) {
      if (aCls[k] == CSQ_NULL || (uint64_t)a[k].i == cur) continue;
      aBuf[m++] = cur;
      csq_put_le32(aEnd + 4 * (uint64_t)r++, k);
      cur = (uint64_t)a[k].i;
      if (m == BLOCK) pack_codes(&pk, aBuf, m, pl.width, pl.ref), m = 0;
    }
    aBuf[m++] = cur;
    csq_put_le32(aEnd + 4 * (uint64_t)r, n);
    pack_codes(&pk, aBuf, m, pl.width, pl.ref);
  }
  *pp = p;
  return 0;
}

/* 1 if x is exactly (double)k / 10^s for the integer k = round(x * 10^s),
** |k| <= 2^53 (so that (double)k is exact); *pk gets k. -0.0, NaN and the
** infinities never are. */
static int dec_exact(double x, unsigned s, int64_t *pk) {
  double y = x * csq_pow10(s);
  if (!(fabs(y) <= 9007199254740992.0)) return 0;
  int64_t k = (int64_t)llrint(y);
  if (dbl2bits((double)k / csq_pow10(s)) != dbl2bits(x)) return 0;
  *pk = k;
  return 1;
}

/*
** Can the REAL values of v[i0, i0+n) be stored as decimal-scaled integers?
** If x = k / 10^s exactly (as a correctly rounded division) then also
** x = (k * 10^t) / 10^(s+t), the same rational number, as long as the
** integer stays exact: so the smallest scale that suits the most demanding
** value suits all, and each value is tried from the scale found so far
** upward (one try for most). Sets *pScale, the smallest integer *pkMin and
** the code width; 0 when some value has no such form.
*/
static int real_dec_plan(const csq_vec *v, uint32_t i0, uint32_t n, uint32_t nNull, int64_t *aK,
                         unsigned *pScale, int64_t *pkMin, uint8_t *pWidth) {
  const csq_val *a = v->aVal + i0;
  const uint8_t *aCls = v->aCls + i0;
  unsigned s = 0;
  int64_t k;
  for (uint32_t i = 0; i < n; i++) {
    if (nNull && aCls[i] == CSQ_NULL) continue;
    while (!dec_exact(a[i].r, s, &k))
      if (++s > CSQ_DEC_MAX_SCALE) return 0;
  }
  /* the integers at the final scale, checked again: a value exact at a
  ** smaller scale is exact here in exact arithmetic, but x * 10^s is not */
  int64_t mn = INT64_MAX, mx = INT64_MIN;
  for (uint32_t i = 0; i < n; i++) {
    if (nNull && aCls[i] == CSQ_NULL) continue;
    if (!dec_exact(a[i].r, s, &k)) return 0;
    aK[i] = k;
    mn = k < mn ? k : mn;
    mx = k > mx ? k : mx;
  }
  if (mn > mx) return 0;
  if (nNull) /* NULL slots take code 0 */
    for (uint32_t i = 0; i < n; i++)
      if (aCls[i] == CSQ_NULL) aK[i] = mn;
  *pScale = s;
  *pkMin = mn;
  *pWidth = (uint8_t)bitlen((uint64_t)mx - (uint64_t)mn);
  return *pWidth > 0; /* one value only: CONST would have been chosen */
}

/* REAL values (plus NULLs): CONST when every value has the same bits,
** REAL_DEC when they are decimals of a few digits (prices, rates) and that
** is smaller, else REAL_PLAIN (bits kept exactly: -0.0 stays -0.0, NaN payloads survive).
** NaN (which SQLite never stores) is left out of rMin/rMax; a chunk of only
** NaNs gets the all-covering [-inf, +inf]. */
static int encode_real(const csq_vec *v, uint32_t i0, uint32_t n, uint32_t nNull, csq_zone *z,
                       uint8_t **pp, uint64_t *pnBytes) {
  const csq_val *a = v->aVal + i0;
  const uint8_t *aCls = v->aCls + i0;
  const uint32_t k0 = first_value(aCls, nNull);
  const uint64_t first = dbl2bits(a[k0].r);
  double mn = INFINITY, mx = -INFINITY;
  uint64_t diff = 0; /* nonzero once some value's bits differ from the first's */
  for (uint32_t k = k0; k < n; k++) {
    if (nNull && aCls[k] == CSQ_NULL) continue;
    double r = a[k].r;
    mn = r < mn ? r : mn; /* false for NaN: NaN is skipped */
    mx = r > mx ? r : mx;
    diff |= dbl2bits(r) ^ first;
  }
  if (mn > mx) mn = -INFINITY, mx = INFINITY;
  z->rMin = mn;
  z->rMax = mx;
  enc_plan pl = {.cls = CSQ_REAL, .nVal = n, .nNull = nNull};
  unsigned scale = 0;
  int64_t kMin = 0, *aK = NULL; /* REAL_DEC: the integers */
  if (diff == 0) {
    pl.enc = CSQ_ENC_CONST;
    pl.ref = first;
  } else if ((aK = malloc(sizeof(int64_t) * (n ? n : 1))) == NULL) {
    return -ENOMEM;
  } else if (real_dec_plan(v, i0, n, nNull, aK, &scale, &kMin, &pl.width) &&
             csq_packed_size(n, pl.width) < (uint64_t)n * 8) {
    pl.enc = CSQ_ENC_REAL_DEC;
    pl.nAux = scale;
    pl.ref = (uint64_t)kMin;
    pl.nPayload = csq_packed_size(n, pl.width);
  } else {
    pl.enc = CSQ_ENC_REAL_PLAIN;
    pl.width = 0;
    pl.nPayload = (uint64_t)n * 8;
  }
  uint64_t iPay;
  uint8_t *p = chunk_alloc(&pl, v, i0, pnBytes, &iPay);
  if (!p) {
    free(aK);
    return -ENOMEM;
  }
  if (pl.enc == CSQ_ENC_REAL_DEC) {
    packer pk = {p + iPay, 0};
    pack_codes(&pk, (const uint64_t *)aK, n, pl.width, pl.ref);
  } else if (diff) {
    uint8_t *q = p + iPay;
    for (uint32_t k = 0; k < n; k++) csq_put_le64(q + 8 * (uint64_t)k, dbl2bits(a[k].r));
    if (nNull) /* NULL slots hold 0.0 whatever the vector had there */
      for (uint32_t k = 0; k < n; k++)
        if (aCls[k] == CSQ_NULL) csq_put_le64(q + 8 * (uint64_t)k, 0);
  }
  free(aK);
  *pp = p;
  return 0;
}

/* Writes offsets [nVal+1] and then the bytes of the TEXT/BLOB values of
** v[i0, i0+n) at q (NULL slots are empty). Returns the end of the bytes. */
static uint8_t *write_plain(uint8_t *q, const csq_vec *v, uint32_t i0, uint32_t n) {
  uint8_t *b = q + pad8(((uint64_t)n + 1) * 4);
  uint32_t off = 0;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = i0 + k;
    csq_put_le32(q + 4 * (uint64_t)k, off);
    if (v->aCls[i] != CSQ_NULL && v->aLen[i]) {
      memcpy(b + off, csq_vec_bytes(v, i), v->aLen[i]);
      off += v->aLen[i];
    }
  }
  csq_put_le32(q + 4 * (uint64_t)n, off);
  return b + off;
}

/* a[0..n) == b[0..n); short values (dates, codes) without a call. */
static inline int bytes_eq(const char *a, const char *b, uint32_t n) {
  if (n >= 8 && n <= 16) {
    const uint8_t *x = (const uint8_t *)a, *y = (const uint8_t *)b;
    return csq_le64(x) == csq_le64(y) && csq_le64(x + n - 8) == csq_le64(y + n - 8);
  }
  return n == 0 || !memcmp(a, b, n);
}

/* Sort context for dictionary entries: entry e is value aFirst[e] of v. */
typedef struct dict_ctx {
  const csq_vec *v;
  const uint32_t *aFirst;
} dict_ctx;

static int dict_cmp(const void *pa, const void *pb, void *pCtx) {
  const dict_ctx *c = pCtx;
  uint32_t ia = c->aFirst[*(const uint32_t *)pa], ib = c->aFirst[*(const uint32_t *)pb];
  return cmp_bytes(csq_vec_bytes(c->v, ia), c->v->aLen[ia], csq_vec_bytes(c->v, ib),
                   c->v->aLen[ib]);
}

/*
** TEXT or BLOB values (plus NULLs), cls says which, nVar = their total bytes
** (< 2^32). TEXT: CONST, TEXT_DICT or TEXT_PLAIN; BLOB: CONST or BLOB_PLAIN.
** The dictionary is tried when TEXT repeats: distinct values are found with
** an XXH3 hash table (abandoned once they exceed half the values: then the
** dictionary cannot pay much), sorted in BINARY order, and kept only if the
** chunk comes out smaller than plain.
*/
/* Values looked at before a dictionary that is not paying is given up. */
#define DICT_PROBE 4096

static int encode_bytes(const csq_vec *v, uint32_t i0, uint32_t n, uint32_t nNull, uint8_t cls,
                        uint64_t nVar, csq_zone *z, uint8_t **pp, uint64_t *pnBytes) {
  const uint8_t *aCls = v->aCls + i0;
  uint32_t nNonNull = n - nNull;
  uint32_t *aFirst = 0, *aProv = 0, *aSort = 0, *aRank = 0;
  uint64_t *aHash = 0, *aEnt = 0, nArena = 0; /* aEnt[e] = arena offset << 32 | length */
  char *zArena = 0;
  uint32_t nDict = 0;
  uint64_t nDictVar = 0;
  int bDict = 0, rc = -ENOMEM;
  uint8_t *p = 0;

  const uint32_t k0 = first_value(aCls, nNull);
  const char *zFirst = csq_vec_bytes(v, i0 + k0);
  uint32_t nFirst = v->aLen[i0 + k0];
  int bConst = 1;
  for (uint32_t k = k0 + 1; k < n && bConst; k++) {
    uint32_t i = i0 + k;
    bConst = aCls[k] == CSQ_NULL || (v->aLen[i] == nFirst &&
                                     (nFirst == 0 || !memcmp(csq_vec_bytes(v, i), zFirst, nFirst)));
  }

  if (!bConst && cls == CSQ_TEXT && nNonNull >= 4) {
    /* Open addressing; a slot holds the hash's high 32 bits and entry+1, so
    ** a probe touches the (small, growing) table only, and bytes are
    ** compared on a full match of the hash only. */
    uint32_t nLimit = nNonNull / 2, cap = 1024;
    uint64_t *aTab = calloc(cap, 8);
    aFirst = malloc((size_t)nLimit * 4);
    aHash = malloc((size_t)nLimit * 8);
    aEnt = malloc((size_t)nLimit * 8);
    aProv = malloc((size_t)n * 4);
    zArena = malloc(nArena = 256);
    if (!aTab || !aFirst || !aHash || !aEnt || !aProv || !zArena) {
      free(aTab);
      goto done;
    }
    bDict = 1;
    for (uint32_t k = 0; k < n && bDict; k++) {
      uint32_t i = i0 + k;
      /* values that are nearly all distinct so far (comments, names) will
      ** not make a dictionary pay: stop hashing them early */
      if (k == DICT_PROBE && nDict > DICT_PROBE / 4 * 3) {
        bDict = 0;
        break;
      }
      if (aCls[k] == CSQ_NULL) {
        aProv[k] = UINT32_MAX;
        continue;
      }
      const char *z = csq_vec_bytes(v, i);
      uint32_t len = v->aLen[i];
      uint64_t h = XXH3_64bits(z, len), hTag = h & 0xFFFFFFFF00000000ull;
      uint32_t j = (uint32_t)h & (cap - 1);
      for (;;) {
        uint64_t t = aTab[j];
        if (t == 0) {
          if (nDict == nLimit) {
            bDict = 0;
            break;
          }
          if (nDictVar + len > nArena) { /* entries' bytes, packed together for locality */
            uint64_t nNew = nArena * 2 > nDictVar + len + 256 ? nArena * 2 : nDictVar + len + 256;
            char *zNew = realloc(zArena, (size_t)nNew);
            if (!zNew) {
              free(aTab);
              goto done;
            }
            zArena = zNew;
            nArena = nNew;
          }
          if (len) memcpy(zArena + nDictVar, z, len);
          aEnt[nDict] = nDictVar << 32 | len;
          aFirst[nDict] = i;
          aHash[nDict] = h;
          nDictVar += len;
          aTab[j] = hTag | ++nDict;
          aProv[k] = nDict - 1;
          if (2 * (uint64_t)nDict > cap) { /* keep the load under 1/2 */
            uint64_t *aNew = calloc((size_t)cap * 2, 8);
            if (!aNew) {
              free(aTab);
              goto done;
            }
            cap *= 2;
            for (uint32_t e = 0; e < nDict; e++) {
              uint32_t jj = (uint32_t)aHash[e] & (cap - 1);
              while (aNew[jj]) jj = (jj + 1) & (cap - 1);
              aNew[jj] = (aHash[e] & 0xFFFFFFFF00000000ull) | (e + 1);
            }
            free(aTab);
            aTab = aNew;
          }
          break;
        }
        if ((t & 0xFFFFFFFF00000000ull) == hTag) {
          uint32_t e = (uint32_t)t - 1;
          if ((uint32_t)aEnt[e] == len && bytes_eq(zArena + (aEnt[e] >> 32), z, len)) {
            aProv[k] = e;
            break;
          }
        }
        j = (j + 1) & (cap - 1);
      }
    }
    free(aTab);
    if (bDict) {
      unsigned w = bitlen(nDict - 1);
      uint64_t nDictSize = pad8(((uint64_t)nDict + 1) * 4) + pad8(nDictVar) + csq_packed_size(n, w);
      uint64_t nPlainSize = pad8(((uint64_t)n + 1) * 4) + pad8(nVar);
      bDict = nDictSize < nPlainSize;
    }
  }

  enc_plan pl = {.cls = cls, .nVal = n, .nNull = nNull};
  if (bConst) {
    pl.enc = CSQ_ENC_CONST;
    pl.nVar = nFirst;
    pl.nPayload = pad8(nFirst);
    chunk_zone_set_min(z, zFirst, nFirst);
    chunk_zone_set_max(z, zFirst, nFirst);
  } else if (bDict) {
    pl.enc = CSQ_ENC_TEXT_DICT;
    pl.nAux = nDict;
    pl.width = (uint8_t)bitlen(nDict - 1);
    pl.nVar = nDictVar;
    pl.nPayload = pad8(((uint64_t)nDict + 1) * 4) + pad8(nDictVar) + csq_packed_size(n, pl.width);
  } else {
    pl.enc = cls == CSQ_TEXT ? CSQ_ENC_TEXT_PLAIN : CSQ_ENC_BLOB_PLAIN;
    pl.nVar = nVar;
    pl.nPayload = pad8(((uint64_t)n + 1) * 4) + pad8(nVar);
    chunk_zone_scan(z, v, i0, n);
  }
  uint64_t iPay;
  p = chunk_alloc(&pl, v, i0, pnBytes, &iPay);
  if (!p) goto done;
  uint8_t *q = p + iPay;
  if (bConst) {
    if (nFirst) memcpy(q, zFirst, nFirst);
  } else if (bDict) {
    /* Sort the entries, then rank[entry] = its code. */
    dict_ctx ctx = {v, aFirst};
    aSort = malloc((size_t)nDict * 4);
    aRank = malloc((size_t)nDict * 4);
    if (!aSort || !aRank) goto done;
    for (uint32_t e = 0; e < nDict; e++) aSort[e] = e;
    qsort_r(aSort, nDict, 4, dict_cmp, &ctx);
    uint8_t *b = q + pad8(((uint64_t)nDict + 1) * 4);
    uint32_t off = 0;
    for (uint32_t r = 0; r < nDict; r++) {
      uint32_t f = aFirst[aSort[r]];
      aRank[aSort[r]] = r;
      csq_put_le32(q + 4 * (uint64_t)r, off);
      if (v->aLen[f]) memcpy(b + off, csq_vec_bytes(v, f), v->aLen[f]);
      off += v->aLen[f];
    }
    csq_put_le32(q + 4 * (uint64_t)nDict, off);
    uint32_t fMin = aFirst[aSort[0]], fMax = aFirst[aSort[nDict - 1]];
    chunk_zone_set_min(z, csq_vec_bytes(v, fMin), v->aLen[fMin]);
    chunk_zone_set_max(z, csq_vec_bytes(v, fMax), v->aLen[fMax]);
    packer pk = {b + pad8(nDictVar), 0};
    uint64_t aBuf[BLOCK];
    for (uint32_t k = 0; k < n; k += BLOCK) {
      uint32_t m = n - k < BLOCK ? n - k : BLOCK;
      for (uint32_t j = 0; j < m; j++)
        aBuf[j] = aProv[k + j] == UINT32_MAX ? 0 : aRank[aProv[k + j]];
      pack_codes(&pk, aBuf, m, pl.width, 0);
    }
  } else {
    write_plain(q, v, i0, n);
  }
  *pp = p;
  p = 0;
  rc = 0;
done:
  free(p);
  free(aFirst);
  free(aEnt);
  free(zArena);
  free(aHash);
  free(aProv);
  free(aSort);
  free(aRank);
  return rc;
}

/* Mixed classes: tags, one 8-byte slot per value, then TEXT/BLOB bytes. */
static int encode_tagged(const csq_vec *v, uint32_t i0, uint32_t n, uint32_t nNull, uint64_t nVar,
                         csq_zone *z, uint8_t **pp, uint64_t *pnBytes) {
  chunk_zone_scan(z, v, i0, n);
  enc_plan pl = {.enc = CSQ_ENC_TAGGED, .cls = 0, .nVal = n, .nNull = nNull, .nVar = nVar};
  pl.nPayload = pad8(n) + (uint64_t)n * 8 + pad8(nVar);
  uint64_t iPay;
  uint8_t *p = chunk_alloc(&pl, v, i0, pnBytes, &iPay);
  if (!p) return -ENOMEM;
  uint8_t *aTag = p + iPay, *aSlot = aTag + pad8(n), *b = aSlot + (uint64_t)n * 8;
  memcpy(aTag, v->aCls + i0, n);
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = i0 + k;
    uint64_t s = 0;
    switch (v->aCls[i]) {
    case CSQ_INT:
      s = (uint64_t)v->aVal[i].i;
      break;
    case CSQ_REAL:
      s = dbl2bits(v->aVal[i].r);
      break;
    case CSQ_TEXT:
    case CSQ_BLOB:
      s = v->aLen[i];
      if (s) memcpy(b, csq_vec_bytes(v, i), (size_t)s);
      b += s;
      break;
    }
    csq_put_le64(aSlot + 8 * (uint64_t)k, s);
  }
  *pp = p;
  return 0;
}

/*
** Encode v[i0, i0+n) as one chunk (see chunk.h). -EINVAL for a bad range,
** more than CSQ_CHUNK_MAX_VALS values, a class byte outside CSQ_INT..
** CSQ_NULL, or TEXT/BLOB bytes of 4 GiB or more in a typed chunk (the
** offsets are 32-bit: split such a row group).
*/
int csq_chunk_encode(const csq_vec *v, uint32_t i0, uint32_t n, uint8_t **ppOut, size_t *pnOut,
                     csq_chunk_info *pInfo) {
  csq_chunk_info info;
  memset(&info, 0, sizeof(info));
  *ppOut = 0;
  *pnOut = 0;
  if (i0 > v->n || n > v->n - i0 || n > CSQ_CHUNK_MAX_VALS) return -EINVAL;

  /* Classes present and NULL count. A vector of one class (clsMask, an
  ** invariant of csq_vec) needs no scan. */
  const uint8_t *aCls = n ? v->aCls + i0 : 0;
  uint8_t mask = 0;
  uint32_t nNull = 0;
  if (n && __builtin_popcount(v->clsMask) == 1) {
    mask = v->clsMask;
    nNull = mask == (1u << CSQ_NULL) ? n : 0;
  } else if (n) {
    uint8_t seen[256] = {0};
    for (uint32_t k = 0; k < n; k++) seen[aCls[k]] = 1;
    for (uint32_t k = 0; k < n; k++) nNull += aCls[k] == CSQ_NULL;
    for (int c = 0; c < 256; c++) {
      if (!seen[c]) continue;
      if (c < CSQ_INT || c > CSQ_NULL) return -EINVAL;
      mask |= (uint8_t)(1u << c);
    }
  }
  uint64_t nVar = 0;
  if (mask & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) {
    for (uint32_t k = 0; k < n; k++)
      if (aCls[k] == CSQ_TEXT || aCls[k] == CSQ_BLOB) nVar += v->aLen[i0 + k];
  }

  csq_zone *z = &info.zone;
  z->nVal = n;
  z->nNull = nNull;
  z->clsMask = mask;
  uint8_t *p = 0;
  uint64_t nBytes = 0;
  int rc;
  uint8_t only = mask & (uint8_t) ~(1u << CSQ_NULL);
  if (only == 0) { /* empty, or all NULL */
    enc_plan pl = {.enc = CSQ_ENC_CONST, .cls = CSQ_NULL, .nVal = n, .nNull = n};
    uint64_t iPay;
    p = chunk_alloc(&pl, v, i0, &nBytes, &iPay);
    rc = p ? 0 : -ENOMEM;
  } else if (only == (1u << CSQ_INT)) {
    rc = encode_int(v, i0, n, nNull, z, &p, &nBytes);
  } else if (only == (1u << CSQ_REAL)) {
    rc = encode_real(v, i0, n, nNull, z, &p, &nBytes);
  } else if (only == (1u << CSQ_TEXT) || only == (1u << CSQ_BLOB)) {
    if (nVar > UINT32_MAX) return -EINVAL;
    rc = encode_bytes(v, i0, n, nNull, only == (1u << CSQ_TEXT) ? CSQ_TEXT : CSQ_BLOB, nVar, z, &p,
                      &nBytes);
  } else {
    rc = encode_tagged(v, i0, n, nNull, nVar, z, &p, &nBytes);
  }
  if (rc) return rc;
  csq_put_le64(p + H_XXH3, csq_checksum(p + H_VERSION, (size_t)nBytes - H_VERSION));
  info.enc = p[H_ENC];
  info.nBytes = nBytes;
  info.xxh3 = csq_checksum(p, (size_t)nBytes);
  if (pInfo) *pInfo = info;
  *ppOut = p;
  *pnOut = (size_t)nBytes;
  return 0;
}
