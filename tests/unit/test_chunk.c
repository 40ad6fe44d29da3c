/*
** tests/unit/test_chunk.c - column chunks: round trips of every encoding
** (random data and edge values), the encoding chosen, zone maps against
** brute force, zone merging, csq_chunk_view/csq_unpack_u64 against decoded
** values, corruption (every byte flipped, every truncation, and mutations
** with the checksum recomputed so that the structural checks are reached),
** and a throughput print (information only, never asserted).
** Exit 0 = pass; one line per failed check.
*/
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "device/format/chunk.h"
#include "device/format/checksum.h"
#include "tests/unit/helpers.h"

#define M(c) (uint8_t)(1u << (c))

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t dbits(double r) {
  uint64_t b;
  memcpy(&b, &r, 8);
  return b;
}
static double bitsd(uint64_t b) {
  double r;
  memcpy(&r, &b, 8);
  return r;
}

static int cmpb(const void *a, uint64_t na, const void *b, uint64_t nb) {
  uint64_t m = na < nb ? na : nb;
  int c = m ? memcmp(a, b, m) : 0;
  if (c) return c;
  return na < nb ? -1 : na > nb;
}

/* Exact equality of a[ia+k] and b[ib+k], k < n: class, bits, bytes. */
static int same_values(const csq_vec *a, uint32_t ia, const csq_vec *b, uint32_t ib, uint32_t n) {
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = ia + k, j = ib + k;
    if (a->aCls[i] != b->aCls[j]) return 0;
    switch (a->aCls[i]) {
    case CSQ_INT:
      if (a->aVal[i].i != b->aVal[j].i) return 0;
      break;
    case CSQ_REAL:
      if (dbits(a->aVal[i].r) != dbits(b->aVal[j].r)) return 0;
      break;
    case CSQ_TEXT:
    case CSQ_BLOB:
      if (a->aLen[i] != b->aLen[j]) return 0;
      if (a->aLen[i] && memcmp(csq_vec_bytes(a, i), csq_vec_bytes(b, j), a->aLen[i])) return 0;
      break;
    }
  }
  return 1;
}

/* The zone of v[i0, i0+n) by definition. */
static void brute_zone(const csq_vec *v, uint32_t i0, uint32_t n, csq_zone *z) {
  memset(z, 0, sizeof(*z));
  z->nVal = n;
  int bInt = 0, bNum = 0, bTxt = 0;
  uint8_t mask = 0;
  for (uint32_t k = 0; k < n; k++) mask |= M(v->aCls[i0 + k]);
  z->clsMask = mask;
  int kTxt = (mask & M(CSQ_TEXT)) ? CSQ_TEXT : CSQ_BLOB;
  const char *zMin = 0, *zMax = 0;
  uint32_t nMin = 0, nMax = 0;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = i0 + k;
    int c = v->aCls[i];
    if (c == CSQ_NULL) z->nNull++;
    if (c == CSQ_INT) {
      int64_t x = v->aVal[i].i;
      if (!bInt || x < z->iMin) z->iMin = x;
      if (!bInt || x > z->iMax) z->iMax = x;
      bInt = 1;
    }
    if (c == CSQ_INT || (c == CSQ_REAL && !isnan(v->aVal[i].r))) {
      double r = c == CSQ_INT ? (double)v->aVal[i].i : v->aVal[i].r;
      if (!bNum || r < z->rMin) z->rMin = r;
      if (!bNum || r > z->rMax) z->rMax = r;
      bNum = 1;
    }
    if (c == kTxt) {
      const char *p = csq_vec_bytes(v, i);
      uint32_t len = v->aLen[i];
      if (!bTxt || cmpb(p, len, zMin, nMin) < 0) zMin = p, nMin = len;
      if (!bTxt || cmpb(p, len, zMax, nMax) > 0) zMax = p, nMax = len;
      bTxt = 1;
    }
  }
  if (!bNum && (mask & M(CSQ_REAL))) z->rMin = -INFINITY, z->rMax = INFINITY;
  if (bTxt) {
    z->nMinTxt = nMin > CSQ_ZONE_PREFIX ? CSQ_ZONE_PREFIX : nMin;
    z->bMinTrunc = nMin > CSQ_ZONE_PREFIX;
    if (z->nMinTxt) memcpy(z->zMinTxt, zMin, z->nMinTxt);
    z->nMaxTxt = nMax > CSQ_ZONE_PREFIX ? CSQ_ZONE_PREFIX : nMax;
    z->bMaxTrunc = nMax > CSQ_ZONE_PREFIX;
    if (z->nMaxTxt) memcpy(z->zMaxTxt, zMax, z->nMaxTxt);
  }
}

/* Compare zones on the fields that are valid for their class mask. */
static int same_zone(const csq_zone *a, const csq_zone *b, const char *zWhat) {
  int ok = a->nVal == b->nVal && a->nNull == b->nNull && a->clsMask == b->clsMask;
  if (ok && (a->clsMask & M(CSQ_INT))) ok = a->iMin == b->iMin && a->iMax == b->iMax;
  if (ok && (a->clsMask & (M(CSQ_INT) | M(CSQ_REAL))))
    ok = dbits(a->rMin) == dbits(b->rMin) || a->rMin == b->rMin;
  if (ok && (a->clsMask & (M(CSQ_INT) | M(CSQ_REAL))))
    ok = dbits(a->rMax) == dbits(b->rMax) || a->rMax == b->rMax;
  if (ok && (a->clsMask & (M(CSQ_TEXT) | M(CSQ_BLOB)))) {
    ok = a->nMinTxt == b->nMinTxt && a->nMaxTxt == b->nMaxTxt && a->bMinTrunc == b->bMinTrunc &&
         a->bMaxTrunc == b->bMaxTrunc && !memcmp(a->zMinTxt, b->zMinTxt, a->nMinTxt) &&
         !memcmp(a->zMaxTxt, b->zMaxTxt, a->nMaxTxt);
  }
  if (!ok) {
    printf("zone mismatch (%s): nVal %u/%u nNull %u/%u mask %x/%x iMin %lld/%lld iMax %lld/%lld "
           "rMin %g/%g rMax %g/%g min %u%s/%u%s max %u%s/%u%s\n",
           zWhat, a->nVal, b->nVal, a->nNull, b->nNull, a->clsMask, b->clsMask, (long long)a->iMin,
           (long long)b->iMin, (long long)a->iMax, (long long)b->iMax, a->rMin, b->rMin, a->rMax,
           b->rMax, a->nMinTxt, a->bMinTrunc ? "+" : "", b->nMinTxt, b->bMinTrunc ? "+" : "",
           a->nMaxTxt, a->bMaxTrunc ? "+" : "", b->nMaxTxt, b->bMaxTrunc ? "+" : "");
  }
  return ok;
}

/* Check the view of a chunk against its decoded values (n = nVal). */
static int view_agrees(const uint8_t *p, size_t nBytes, const csq_vec *dec, uint32_t d0) {
  csq_chunk_desc w;
  if (csq_chunk_view(p, nBytes, &w)) return 0;
  uint32_t n = w.nVal;
  uint64_t *aCode = malloc(sizeof(uint64_t) * (n + 1));
  int ok = 1;
  for (uint32_t k = 0; k < n && ok; k++) {
    int bNull = w.aNull ? (w.aNull[k >> 3] >> (k & 7)) & 1 : w.nNull == w.nVal;
    ok = bNull == (dec->aCls[d0 + k] == CSQ_NULL);
  }
  if (w.enc == CSQ_ENC_INT_FOR || w.enc == CSQ_ENC_TEXT_DICT) {
    /* Unpack in odd-sized pieces from odd starts, as an executor might. */
    uint32_t k = 0;
    while (k < n) {
      uint32_t m = 1 + (uint32_t)rndn(300);
      if (m > n - k) m = n - k;
      csq_unpack_u64(w.aPacked, w.width, k, m, aCode + k);
      k += m;
    }
    /* and a few scattered indexes at a time, as a filter's survivors */
    for (k = 0; k < n && ok; k += 64) {
      uint32_t aIdx[8];
      uint64_t aSel[8];
      for (int j = 0; j < 8; j++) aIdx[j] = (uint32_t)rndn(n);
      csq_unpack_sel(w.aPacked, w.width, aIdx, 8, aSel);
      for (int j = 0; j < 8; j++) ok &= aSel[j] == aCode[aIdx[j]];
    }
    for (k = 0; k < n && ok; k++) {
      if (dec->aCls[d0 + k] == CSQ_NULL) continue;
      if (w.enc == CSQ_ENC_INT_FOR) {
        ok = (int64_t)((uint64_t)w.iRef + aCode[k]) == dec->aVal[d0 + k].i;
      } else {
        uint32_t a0 = csq_le32(w.aOff + 4 * aCode[k]), a1 = csq_le32(w.aOff + 4 * (aCode[k] + 1));
        ok = aCode[k] < w.nAux && a1 - a0 == dec->aLen[d0 + k] &&
             !memcmp(w.aVar + a0, csq_vec_bytes(dec, d0 + k), a1 - a0);
      }
    }
    if (w.enc == CSQ_ENC_TEXT_DICT) { /* codes compare like values */
      for (uint32_t t = 0; t < 200 && ok && n > 1; t++) {
        uint32_t i = (uint32_t)rndn(n), j = (uint32_t)rndn(n);
        if (dec->aCls[d0 + i] == CSQ_NULL || dec->aCls[d0 + j] == CSQ_NULL) continue;
        int c = cmpb(csq_vec_bytes(dec, d0 + i), dec->aLen[d0 + i], csq_vec_bytes(dec, d0 + j),
                     dec->aLen[d0 + j]);
        ok = (c < 0) == (aCode[i] < aCode[j]) && (c == 0) == (aCode[i] == aCode[j]);
      }
    }
  } else if (w.enc == CSQ_ENC_INT_RLE) {
    csq_unpack_u64(w.aPacked, w.width, 0, w.nAux, aCode);
    uint32_t s = 0;
    for (uint32_t r = 0; r < w.nAux && ok; r++) {
      uint32_t e = csq_le32(w.aRunEnd + 4 * r);
      for (uint32_t k = s; k < e && ok; k++)
        ok = dec->aCls[d0 + k] == CSQ_NULL ||
             dec->aVal[d0 + k].i == (int64_t)((uint64_t)w.iRef + aCode[r]);
      s = e;
    }
  } else if (w.enc == CSQ_ENC_REAL_PLAIN) {
    for (uint32_t k = 0; k < n && ok; k++)
      ok = dec->aCls[d0 + k] == CSQ_NULL || csq_le64(w.aReal + 8 * k) == dbits(dec->aVal[d0 + k].r);
  } else if (w.enc == CSQ_ENC_REAL_DEC) {
    ok = w.nAux <= CSQ_DEC_MAX_SCALE;
    csq_unpack_u64(w.aPacked, w.width, 0, n, aCode);
    for (uint32_t k = 0; k < n && ok; k++)
      ok = dec->aCls[d0 + k] == CSQ_NULL || dbits((double)(int64_t)((uint64_t)w.iRef + aCode[k]) /
                                                  csq_pow10(w.nAux)) == dbits(dec->aVal[d0 + k].r);
  }
  free(aCode);
  return ok;
}

static const char *enc_name(int e) {
  static const char *a[] = {"?",          "CONST",     "INT_FOR",    "INT_RLE", "REAL_PLAIN",
                            "TEXT_PLAIN", "TEXT_DICT", "BLOB_PLAIN", "TAGGED",  "REAL_DEC"};
  return e >= 1 && e <= 9 ? a[e] : "?";
}

/*
** Encode v[i0, i0+n), check info, zone and the encoding (expectEnc 0 = any),
** decode into a vector that already holds a value, compare, check the view.
** Returns the encoded size.
*/
static size_t round_trip(const char *zName, const csq_vec *v, uint32_t i0, uint32_t n,
                         int expectEnc) {
  uint8_t *p = 0;
  size_t nP = 0;
  csq_chunk_info info;
  int rc = csq_chunk_encode(v, i0, n, &p, &nP, &info);
  CHECK(rc == 0, "%s: encode rc=%d", zName, rc);
  if (rc) return 0;
  CHECK(info.nBytes == nP && info.xxh3 == XXH3_64bits(p, nP), "%s: info size/hash", zName);
  CHECK(expectEnc == 0 || info.enc == expectEnc, "%s: enc %s, expected %s", zName,
        enc_name(info.enc), enc_name(expectEnc));
  csq_zone z;
  brute_zone(v, i0, n, &z);
  CHECK(same_zone(&info.zone, &z, zName), "%s: zone", zName);
  CHECK(csq_chunk_verify(p, nP) == 0, "%s: verify", zName);

  csq_vec d;
  csq_vec_init(&d);
  csq_vec_push_bytes(&d, CSQ_BLOB, "pre", 3);
  rc = csq_chunk_decode(p, nP, &d);
  CHECK(rc == 0, "%s: decode rc=%d", zName, rc);
  if (rc == 0) {
    CHECK(d.n == n + 1, "%s: decoded %u values, expected %u", zName, d.n - 1, n);
    CHECK(d.n == n + 1 && same_values(v, i0, &d, 1, n), "%s: values differ", zName);
    uint8_t mask = M(CSQ_BLOB);
    for (uint32_t k = 0; k < d.n; k++) mask |= M(d.aCls[k]);
    CHECK(d.clsMask == mask, "%s: decoded clsMask %x, expected %x", zName, d.clsMask, mask);
    CHECK(view_agrees(p, nP, &d, 1), "%s: view disagrees with decode", zName);
  }
  /* A larger buffer (block-rounded read) decodes the same. */
  uint8_t *q = malloc(nP + 4096);
  memcpy(q, p, nP);
  memset(q + nP, 0xA5, 4096);
  csq_vec_reset(&d);
  CHECK(csq_chunk_decode(q, nP + 4096, &d) == 0 && d.n == n && same_values(v, i0, &d, 0, n),
        "%s: decode from a longer buffer", zName);
  free(q);
  csq_vec_free(&d);
  free(p);
  return nP;
}

static void push_text(csq_vec *v, int cls, const char *z) {
  csq_vec_push_bytes(v, cls, z, (uint32_t)strlen(z));
}

/* 'YYYY-MM-DD' number d of 2500 distinct dates (days 1..28 of each month). */
static void push_date(csq_vec *v, int d) {
  char buf[16];
  int y = 1992 + d / 336, m = 1 + d / 28 % 12, dd = 1 + d % 28;
  buf[0] = (char)('0' + y / 1000), buf[1] = (char)('0' + y / 100 % 10);
  buf[2] = (char)('0' + y / 10 % 10), buf[3] = (char)('0' + y % 10), buf[4] = '-';
  buf[5] = (char)('0' + m / 10), buf[6] = (char)('0' + m % 10), buf[7] = '-';
  buf[8] = (char)('0' + dd / 10), buf[9] = (char)('0' + dd % 10);
  csq_vec_push_bytes(v, CSQ_TEXT, buf, 10);
}

/* Random value of class c, with edge values mixed in. */
static void push_random(csq_vec *v, int c) {
  static const int64_t aI[] = {INT64_MIN, INT64_MAX, 0, -1, 1, INT64_MIN + 1, INT64_MAX - 1};
  static const uint64_t aR[] = {0x8000000000000000ull, 0, 0x7FF0000000000000ull,
                                0xFFF0000000000000ull, 1, 0x7FEFFFFFFFFFFFFFull};
  char buf[80];
  switch (c) {
  case CSQ_INT:
    csq_vec_push_int(v, rndn(4) == 0 ? aI[rndn(7)] : (int64_t)rnd() >> rndn(64));
    break;
  case CSQ_REAL:
    csq_vec_push_real(v, rndn(4) == 0 ? bitsd(aR[rndn(6)])
                                      : (double)(int64_t)rnd() / (double)(1 + rndn(1000)));
    break;
  case CSQ_TEXT:
  case CSQ_BLOB: {
    uint32_t len = (uint32_t)rndn(4) == 0 ? 0 : (uint32_t)rndn(sizeof buf);
    for (uint32_t k = 0; k < len; k++) buf[k] = (char)(c == CSQ_TEXT ? 'a' + rndn(3) : rnd());
    csq_vec_push_bytes(v, c, buf, len);
    break;
  }
  default:
    csq_vec_push_null(v);
  }
}

/* ---- Round trips ---- */
static void test_round_trips(void) {
  csq_vec v;
  csq_vec_init(&v);

  /* Empty and all-NULL. */
  round_trip("empty", &v, 0, 0, CSQ_ENC_CONST);
  csq_vec_push_null(&v);
  round_trip("one NULL", &v, 0, 1, CSQ_ENC_CONST);
  for (int k = 0; k < 99; k++) csq_vec_push_null(&v);
  round_trip("100 NULL", &v, 0, 100, CSQ_ENC_CONST);

  /* Single values of every class, edge values, empty text/blob. */
  static const int64_t aI[] = {INT64_MIN, INT64_MAX, 0, -1};
  for (int k = 0; k < 4; k++) {
    csq_vec_reset(&v);
    csq_vec_push_int(&v, aI[k]);
    round_trip("single int", &v, 0, 1, CSQ_ENC_CONST);
  }
  static const uint64_t aR[] = {0x8000000000000000ull, 0, 0x7FF8000000000001ull,
                                0xFFF0000000000000ull};
  for (int k = 0; k < 4; k++) {
    csq_vec_reset(&v);
    csq_vec_push_real(&v, bitsd(aR[k]));
    round_trip("single real", &v, 0, 1, CSQ_ENC_CONST);
  }
  csq_vec_reset(&v);
  csq_vec_push_bytes(&v, CSQ_TEXT, "", 0);
  round_trip("single empty text", &v, 0, 1, CSQ_ENC_CONST);
  csq_vec_reset(&v);
  csq_vec_push_bytes(&v, CSQ_BLOB, "", 0);
  round_trip("single empty blob", &v, 0, 1, CSQ_ENC_CONST);

  /* Empty strings next to NULLs stay distinct from NULL (CONST + bitmap). */
  csq_vec_reset(&v);
  for (int k = 0; k < 50; k++) {
    if (k % 3)
      csq_vec_push_bytes(&v, CSQ_TEXT, "", 0);
    else
      csq_vec_push_null(&v);
  }
  round_trip("empty text + NULL", &v, 0, 50, CSQ_ENC_CONST);
  csq_vec_reset(&v);
  for (int k = 0; k < 50; k++) {
    if (k % 3)
      csq_vec_push_bytes(&v, CSQ_BLOB, "", 0);
    else
      csq_vec_push_null(&v);
  }
  round_trip("empty blob + NULL", &v, 0, 50, CSQ_ENC_CONST);
  csq_vec_reset(&v);
  for (int k = 0; k < 50; k++) {
    if (k % 3 == 0)
      csq_vec_push_null(&v);
    else if (k % 3 == 1)
      csq_vec_push_bytes(&v, CSQ_BLOB, "", 0);
    else
      csq_vec_push_bytes(&v, CSQ_TEXT, "", 0);
  }
  round_trip("empty text + empty blob + NULL", &v, 0, 50, CSQ_ENC_TAGGED);

  /* -0.0 and 0.0 are different bits: not CONST. */
  csq_vec_reset(&v);
  csq_vec_push_real(&v, 0.0);
  csq_vec_push_real(&v, -0.0);
  round_trip("0.0 and -0.0", &v, 0, 2, CSQ_ENC_REAL_PLAIN);

  /* INT: CONST with NULLs, every FOR width, extreme spans. */
  csq_vec_reset(&v);
  for (int k = 0; k < 1000; k++) {
    if (k % 7 == 3)
      csq_vec_push_null(&v);
    else
      csq_vec_push_int(&v, -42);
  }
  round_trip("const int + NULL", &v, 0, 1000, CSQ_ENC_CONST);
  for (unsigned wdt = 1; wdt <= 64; wdt++) {
    char zName[64];
    snprintf(zName, sizeof zName, "FOR width %u", wdt);
    csq_vec_reset(&v);
    uint64_t span = wdt == 64 ? ~0ull : (1ull << wdt) - 1;
    int64_t base = wdt == 64 ? INT64_MIN : (int64_t)(rnd() >> wdt) - (int64_t)(1ull << 62) / 2;
    uint32_t n = 1 + (uint32_t)rndn(3000);
    csq_vec_push_int(&v, base);
    csq_vec_push_int(&v, (int64_t)((uint64_t)base + span));
    for (uint32_t k = 2; k < n + 2; k++) {
      if (rndn(10) == 0)
        csq_vec_push_null(&v);
      else
        csq_vec_push_int(&v, (int64_t)((uint64_t)base + (rnd() & span)));
    }
    round_trip(zName, &v, 0, v.n, CSQ_ENC_INT_FOR);
    /* a slice starting at an odd offset (may lose the extremes: any enc) */
    uint32_t i0 = 1 + (uint32_t)rndn(v.n - 1);
    round_trip(zName, &v, i0, v.n - i0, 0);
  }
  csq_vec_reset(&v);
  csq_vec_push_int(&v, INT64_MAX);
  csq_vec_push_int(&v, INT64_MIN);
  round_trip("INT64_MAX, INT64_MIN", &v, 0, 2, CSQ_ENC_INT_FOR);

  /* INT runs: RLE, NULLs inside runs, at the start and at the end. */
  csq_vec_reset(&v);
  csq_vec_push_null(&v);
  for (int r = 0; r < 300; r++) {
    int64_t x = (int64_t)rnd();
    uint32_t len = 1 + (uint32_t)rndn(400);
    for (uint32_t k = 0; k < len; k++) {
      if (rndn(20) == 0)
        csq_vec_push_null(&v);
      else
        csq_vec_push_int(&v, x);
    }
  }
  csq_vec_push_null(&v);
  round_trip("runs", &v, 0, v.n, CSQ_ENC_INT_RLE);
  round_trip("runs slice", &v, 77, v.n - 200, CSQ_ENC_INT_RLE);

  /* 65536 ints in [0,50]: FOR, width 6. */
  csq_vec_reset(&v);
  for (int k = 0; k < 65536; k++) csq_vec_push_int(&v, (int64_t)rndn(51));
  round_trip("64K ints", &v, 0, 65536, CSQ_ENC_INT_FOR);

  /* REAL random with edge values, NULLs. */
  csq_vec_reset(&v);
  for (int k = 0; k < 65536; k++) {
    if (rndn(50) == 0)
      csq_vec_push_null(&v);
    else
      push_random(&v, CSQ_REAL);
  }
  round_trip("64K reals", &v, 0, 65536, CSQ_ENC_REAL_PLAIN);
  csq_vec_reset(&v);
  csq_vec_push_real(&v, bitsd(0x7FF8000000000001ull));
  csq_vec_push_real(&v, bitsd(0xFFF8000000000123ull));
  round_trip("NaN payloads", &v, 0, 2, CSQ_ENC_REAL_PLAIN);

  /* Decimals: prices, rates, mixed scales, integral values, with NULLs; and
  ** the values that must keep REAL_PLAIN (a -0.0, 0.1 + 0.2, beyond 2^53). */
  csq_vec_reset(&v);
  for (int k = 0; k < 65536; k++) {
    if (rndn(40) == 0)
      csq_vec_push_null(&v);
    else
      csq_vec_push_real(&v, (double)(int64_t)(rndn(10000000) + 90000) / 100);
  }
  round_trip("64K prices", &v, 0, 65536, CSQ_ENC_REAL_DEC);
  csq_vec_reset(&v);
  for (int k = 0; k < 4096; k++) csq_vec_push_real(&v, (double)rndn(11) / 100);
  round_trip("rates 0.00-0.10", &v, 0, 4096, CSQ_ENC_REAL_DEC);
  static const double aDec[] = {
      1.5, 0.25, -0.125, 3.0, 12345.678, -99999.99, 0.00000001, 1e15, -4503599627370496.0,
      0.1, 0.7,  2.675};
  csq_vec_reset(&v);
  for (size_t k = 0; k < sizeof(aDec) / sizeof(aDec[0]); k++) csq_vec_push_real(&v, aDec[k]);
  csq_vec_push_null(&v);
  round_trip("mixed scales", &v, 0, (uint32_t)v.n, 0);
  round_trip("mixed scales, slice", &v, 3, 5, 0);
  static const double aNot[] = {-0.0, 0.1 + 0.2, 9007199254740994.0 * 4, 1e-9, 1.0 / 3};
  for (size_t j = 0; j < sizeof(aNot) / sizeof(aNot[0]); j++) {
    csq_vec_reset(&v);
    for (int k = 0; k < 100; k++) csq_vec_push_real(&v, (double)k / 4);
    csq_vec_push_real(&v, aNot[j]);
    round_trip("decimals with one that is not", &v, 0, (uint32_t)v.n, CSQ_ENC_REAL_PLAIN);
  }

  /* TEXT: dictionary (dates), plain (unique), long values for truncation. */
  csq_vec_reset(&v);
  for (int k = 0; k < 65536; k++) {
    if (rndn(100) == 0)
      csq_vec_push_null(&v);
    else
      push_date(&v, (int)rndn(2500));
  }
  round_trip("64K dates", &v, 0, 65536, CSQ_ENC_TEXT_DICT);
  csq_vec_reset(&v);
  for (int k = 0; k < 5000; k++) {
    char buf[64];
    snprintf(buf, sizeof buf, "unique-%016llx-%d", (unsigned long long)rnd(), k);
    push_text(&v, CSQ_TEXT, buf);
  }
  round_trip("unique text", &v, 0, 5000, CSQ_ENC_TEXT_PLAIN);
  csq_vec_reset(&v);
  for (int k = 0; k < 3000; k++) push_random(&v, rndn(10) ? CSQ_TEXT : CSQ_NULL);
  round_trip("random short text", &v, 0, 3000, 0);
  /* Dictionary with long values sharing prefixes, empty string and NULLs. */
  csq_vec_reset(&v);
  for (int k = 0; k < 4000; k++) {
    char buf[100];
    int r = (int)rndn(40);
    if (r == 0)
      csq_vec_push_null(&v);
    else if (r == 1)
      csq_vec_push_bytes(&v, CSQ_TEXT, "", 0);
    else {
      snprintf(buf, sizeof buf, "a-long-common-prefix-of-more-than-24-bytes-%d", r);
      push_text(&v, CSQ_TEXT, buf);
    }
  }
  round_trip("dict long", &v, 0, 4000, CSQ_ENC_TEXT_DICT);
  csq_vec_reset(&v);
  for (int k = 0; k < 100; k++) {
    char buf[100];
    snprintf(buf, sizeof buf, "zzzzzzzzzzzzzzzzzzzzzzzzzzzz-%d", k);
    push_text(&v, CSQ_TEXT, buf);
    csq_vec_push_bytes(&v, CSQ_TEXT, buf, 24); /* exactly the prefix: not truncated */
  }
  round_trip("truncation", &v, 0, v.n, 0);
  /* Embedded NUL bytes sort as bytes. */
  csq_vec_reset(&v);
  for (int k = 0; k < 64; k++) csq_vec_push_bytes(&v, CSQ_TEXT, "a\0b\0c", 1 + (uint32_t)(k % 5));
  round_trip("embedded NUL", &v, 0, 64, 0);

  /* Huge values: 3 MiB text and blob, next to empty ones. */
  {
    uint32_t big = 3u << 20;
    char *z = malloc(big);
    for (uint32_t k = 0; k < big; k++) z[k] = (char)('A' + k % 26);
    csq_vec_reset(&v);
    csq_vec_push_bytes(&v, CSQ_TEXT, z, big);
    csq_vec_push_bytes(&v, CSQ_TEXT, "", 0);
    csq_vec_push_null(&v);
    csq_vec_push_bytes(&v, CSQ_TEXT, z, big - 1);
    round_trip("huge text", &v, 0, 4, CSQ_ENC_TEXT_PLAIN);
    round_trip("huge text const", &v, 0, 1, CSQ_ENC_CONST);
    csq_vec_reset(&v);
    csq_vec_push_bytes(&v, CSQ_BLOB, z, big);
    csq_vec_push_bytes(&v, CSQ_BLOB, "", 0);
    csq_vec_push_null(&v);
    round_trip("huge blob", &v, 0, 3, CSQ_ENC_BLOB_PLAIN);
    free(z);
  }

  /* BLOB random with NULLs. */
  csq_vec_reset(&v);
  for (int k = 0; k < 3000; k++) push_random(&v, rndn(10) ? CSQ_BLOB : CSQ_NULL);
  round_trip("random blob", &v, 0, 3000, CSQ_ENC_BLOB_PLAIN);

  /* Mixed classes: TAGGED, every subset of two or more classes. */
  for (int m = 0; m < 32; m++) {
    int nc = __builtin_popcount(m);
    if (m == 0) continue;
    int bNullOnly = m == (1 << 4);
    csq_vec_reset(&v);
    uint32_t n = 1 + (uint32_t)rndn(2000);
    if (n < 5) n = 5;
    /* each class of the subset at least once, then random picks */
    int aC[5], nC = 0;
    for (int c = 0; c < 5; c++)
      if (m & (1 << c)) aC[nC++] = CSQ_INT + c;
    for (int c = 0; c < nC; c++) push_random(&v, aC[c]);
    for (uint32_t k = nC; k < n; k++) push_random(&v, aC[rndn(nC)]);
    char zName[64];
    snprintf(zName, sizeof zName, "classes %02x", m << 1);
    int bMixed = __builtin_popcount(m & 15) >= 2;
    round_trip(zName, &v, 0, v.n, bMixed ? CSQ_ENC_TAGGED : 0);
    (void)nc;
    (void)bNullOnly;
  }

  /* 65536 values, one of each class in turn. */
  csq_vec_reset(&v);
  for (int k = 0; k < 65536; k++) push_random(&v, CSQ_INT + k % 5);
  round_trip("64K tagged", &v, 0, 65536, CSQ_ENC_TAGGED);

  /* Bad arguments. */
  uint8_t *p = (uint8_t *)1;
  size_t nP = 1;
  CHECK(csq_chunk_encode(&v, 65530, 7, &p, &nP, NULL) == -EINVAL && p == NULL && nP == 0);
  csq_vec_free(&v);
}

/* ---- Zone merge: chunks' zones merged = the zone of the whole ---- */
static void test_zone_merge(void) {
  csq_vec v;
  csq_vec_init(&v);
  for (int t = 0; t < 200; t++) {
    csq_vec_reset(&v);
    int m = 1 + (int)rndn(31);
    int aC[5], nC = 0;
    for (int c = 0; c < 5; c++)
      if (m & (1 << c)) aC[nC++] = CSQ_INT + c;
    uint32_t n = 1 + (uint32_t)rndn(500);
    for (uint32_t k = 0; k < n; k++) {
      int c = aC[rndn(nC)];
      if (c == CSQ_TEXT && rndn(3) == 0) { /* long values to exercise truncation */
        char buf[40];
        memset(buf, 'a' + (int)rndn(2), sizeof buf);
        csq_vec_push_bytes(&v, CSQ_TEXT, buf, 20 + (uint32_t)rndn(20));
      } else if (c == CSQ_REAL) {
        csq_vec_push_real(&v, (double)(int64_t)rnd() / 7.0);
      } else {
        push_random(&v, c);
      }
    }
    csq_zone acc, whole;
    memset(&acc, 0, sizeof acc);
    uint32_t i = 0;
    while (i < n) {
      uint32_t m2 = 1 + (uint32_t)rndn(60);
      if (m2 > n - i) m2 = n - i;
      uint8_t *p;
      size_t nP;
      csq_chunk_info info;
      CHECK(csq_chunk_encode(&v, i, m2, &p, &nP, &info) == 0);
      csq_zone_merge(&acc, &info.zone);
      free(p);
      i += m2;
    }
    brute_zone(&v, 0, n, &whole);
    CHECK(same_zone(&acc, &whole, "merge"));
  }
  csq_vec_free(&v);
}

/* ---- Corruption ---- */

/* Recompute the checksum of a chunk buffer after a mutation. */
static void reseal(uint8_t *p, size_t n) {
  uint64_t nBytes = csq_le64(p + 16);
  if (nBytes < 12 || nBytes > n) return;
  uint64_t h = XXH3_64bits(p + 12, nBytes - 12);
  for (int k = 0; k < 8; k++) p[4 + k] = (uint8_t)(h >> (8 * k));
}

static void corrupt_one(const char *zName, const csq_vec *v, uint32_t i0, uint32_t n) {
  uint8_t *p;
  size_t nP;
  CHECK(csq_chunk_encode(v, i0, n, &p, &nP, NULL) == 0);
  csq_vec d;
  csq_vec_init(&d);
  uint8_t *q = malloc(nP);
  int nBadFlip = 0, nBadTrunc = 0, nAccepted = 0;
  /* Every byte flipped: the checksum (or magic/size check) must catch it. */
  for (size_t k = 0; k < nP; k++) {
    memcpy(q, p, nP);
    q[k] ^= (uint8_t)(1u << (k % 8));
    csq_vec_reset(&d);
    int rc = csq_chunk_decode(q, nP, &d);
    if (rc != -EBADMSG || d.n != 0) nBadFlip++;
    if (csq_chunk_verify(q, nP) != -EBADMSG) nBadFlip++;
  }
  /* Every truncation, into an exactly-sized heap buffer so ASan sees overreads. */
  for (size_t len = 0; len < nP; len++) {
    uint8_t *t = malloc(len ? len : 1);
    memcpy(t, p, len);
    csq_vec_reset(&d);
    if (csq_chunk_decode(t, len, &d) != -EBADMSG || d.n != 0) nBadTrunc++;
    free(t);
  }
  /* Mutations that keep the checksum valid: must fail cleanly or decode to
  ** something (a "valid" chunk); never crash or read out of bounds. */
  for (size_t k = 0; k < nP; k++) {
    for (int b = 0; b < 3; b++) {
      memcpy(q, p, nP);
      q[k] = b == 0 ? q[k] ^ 0xFF : b == 1 ? q[k] + 1 : (uint8_t)rnd();
      reseal(q, nP);
      csq_vec_reset(&d);
      int rc = csq_chunk_decode(q, nP, &d);
      if (rc == 0)
        nAccepted++;
      else if (rc != -EBADMSG)
        nBadFlip++;
      csq_chunk_desc w;
      rc = csq_chunk_view(q, nP, &w);
      if (rc != 0 && rc != -EBADMSG) nBadFlip++;
    }
  }
  CHECK(nBadFlip == 0, "%s: %d flips not reported as -EBADMSG", zName, nBadFlip);
  CHECK(nBadTrunc == 0, "%s: %d truncations not reported as -EBADMSG", zName, nBadTrunc);
  (void)nAccepted;
  free(q);
  free(p);
  csq_vec_free(&d);
}

/* Random header fields with a valid checksum: counts/sizes far out of range. */
static void corrupt_header_fields(const csq_vec *v, uint32_t i0, uint32_t n) {
  uint8_t *p;
  size_t nP;
  CHECK(csq_chunk_encode(v, i0, n, &p, &nP, NULL) == 0);
  uint8_t *q = malloc(nP);
  csq_vec d;
  csq_vec_init(&d);
  static const uint64_t aBig[] = {
      0, 1, 7, 8, 0xFFFFFFFFull, 0x7FFFFFFFull, 0xFFFFFFFFFFFFFFFFull, 1u << 20, (1u << 20) + 1,
      64};
  static const int aOff[] = {13, 14, 15, 24, 28, 32, 36, 40, 48};
  static const int aSize[] = {1, 1, 1, 4, 4, 1, 4, 8, 8};
  int nBad = 0;
  for (int f = 0; f < 9; f++) {
    for (int t = 0; t < 40; t++) {
      memcpy(q, p, nP);
      uint64_t x = t < 10 ? aBig[t] : rnd() >> rndn(64);
      for (int k = 0; k < aSize[f]; k++) q[aOff[f] + k] = (uint8_t)(x >> (8 * k));
      reseal(q, nP);
      csq_vec_reset(&d);
      int rc = csq_chunk_decode(q, nP, &d);
      if (rc != 0 && rc != -EBADMSG) nBad++;
    }
  }
  CHECK(nBad == 0);
  free(q);
  free(p);
  csq_vec_free(&d);
}

static void test_corruption(void) {
  csq_vec v;
  csq_vec_init(&v);
  struct {
    const char *zName;
    int kind;
  } aCase[] = {{"const", 0}, {"for", 1},  {"rle", 2},    {"real", 3}, {"text", 4},
               {"dict", 5},  {"blob", 6}, {"tagged", 7}, {"null", 8}, {"const text", 9}};
  for (unsigned c = 0; c < sizeof aCase / sizeof aCase[0]; c++) {
    csq_vec_reset(&v);
    for (int k = 0; k < 37; k++) {
      if (k % 9 == 4 && aCase[c].kind != 8) {
        csq_vec_push_null(&v);
        continue;
      }
      switch (aCase[c].kind) {
      case 0:
        csq_vec_push_int(&v, 5);
        break;
      case 1:
        csq_vec_push_int(&v, (int64_t)rndn(1000) - 500);
        break;
      case 2:
        csq_vec_push_int(&v, k / 12);
        break;
      case 3:
        csq_vec_push_real(&v, k * 0.5);
        break;
      case 4:
        push_random(&v, CSQ_TEXT);
        break;
      case 5:
        push_text(&v, CSQ_TEXT, k % 3 ? "ab" : k % 2 ? "" : "abc");
        break;
      case 6:
        push_random(&v, CSQ_BLOB);
        break;
      case 7:
        push_random(&v, CSQ_INT + k % 5);
        break;
      case 8:
        csq_vec_push_null(&v);
        break;
      case 9:
        push_text(&v, CSQ_TEXT, "same");
        break;
      }
    }
    corrupt_one(aCase[c].zName, &v, 0, v.n);
    corrupt_header_fields(&v, 0, v.n);
  }
  /* Random bytes never decode, whatever the length. */
  uint8_t buf[512];
  csq_vec d;
  csq_vec_init(&d);
  int nOk = 0;
  for (int t = 0; t < 2000; t++) {
    size_t len = rndn(sizeof buf);
    for (size_t k = 0; k < len; k++) buf[k] = (uint8_t)rnd();
    if (t & 1 && len >= 56) memcpy(buf, "CSQC", 4);
    if (csq_chunk_decode(buf, len, &d) == 0) nOk++;
  }
  CHECK(nOk == 0 && d.n == 0);
  CHECK(csq_chunk_decode(NULL, 0, &d) == -EBADMSG);
  csq_vec_free(&d);
  csq_vec_free(&v);
}

/* ---- Throughput (printed, not asserted) and the sizes asked about ---- */
static void throughput(const char *zName, const csq_vec *v) {
  uint8_t *p = 0;
  size_t nP = 0;
  csq_chunk_info info;
  csq_vec d;
  csq_vec_init(&d);
  const int nRep = 20;
  double t0 = now();
  for (int r = 0; r < nRep; r++) {
    free(p);
    csq_chunk_encode(v, 0, v->n, &p, &nP, &info);
  }
  double t1 = now();
  for (int r = 0; r < nRep; r++) {
    csq_vec_reset(&d);
    csq_chunk_decode(p, nP, &d);
  }
  double t2 = now();
  double mv = (double)v->n * nRep / 1e6;
  printf("  %-22s %-10s %8zu bytes (%5.2f B/value)  encode %6.0f Mv/s  decode %6.0f Mv/s\n", zName,
         enc_name(info.enc), nP, (double)nP / v->n, mv / (t1 - t0), mv / (t2 - t1));
  csq_chunk_desc w;
  if (info.enc == CSQ_ENC_INT_FOR && csq_chunk_view(p, nP, &w) == 0) {
    uint64_t *aOut = malloc(sizeof(uint64_t) * 1024);
    uint64_t sum = 0;
    double t3 = now();
    for (int r = 0; r < nRep; r++)
      for (uint32_t k = 0; k < w.nVal; k += 1024) {
        uint32_t m = w.nVal - k < 1024 ? w.nVal - k : 1024;
        csq_unpack_u64(w.aPacked, w.width, k, m, aOut);
        sum += aOut[m - 1];
      }
    double t4 = now();
    printf("  %-22s csq_unpack_u64 width %u: %6.0f Mv/s (%llu)\n", "", w.width, mv / (t4 - t3),
           (unsigned long long)(sum & 1));
    free(aOut);
  }
  free(p);
  csq_vec_free(&d);
}

static void test_throughput(void) {
  csq_vec v;
  csq_vec_init(&v);
  printf("sizes and throughput for 65536 values (information only):\n");
  for (int k = 0; k < 65536; k++) csq_vec_push_int(&v, (int64_t)rndn(51));
  throughput("ints [0,50]", &v);
  csq_vec_reset(&v);
  for (int k = 0; k < 65536; k++) csq_vec_push_int(&v, (int64_t)(rnd() >> 1));
  throughput("ints 63-bit", &v);
  csq_vec_reset(&v);
  for (int k = 0; k < 65536; k++) csq_vec_push_int(&v, k / 100);
  throughput("ints sorted runs", &v);
  csq_vec_reset(&v);
  for (int k = 0; k < 65536; k++) csq_vec_push_real(&v, (double)rnd() / 3.0);
  throughput("doubles", &v);
  csq_vec_reset(&v);
  for (int k = 0; k < 65536; k++)
    csq_vec_push_real(&v, (double)(int64_t)(rndn(10000000) + 90000) / 100);
  throughput("prices (2 decimals)", &v);
  csq_vec_reset(&v);
  for (int k = 0; k < 65536; k++) {
    push_date(&v, (int)rndn(2500));
  }
  throughput("dates (2500 distinct)", &v);
  csq_vec_reset(&v);
  for (int k = 0; k < 65536; k++) {
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%llu", (unsigned long long)rnd());
    csq_vec_push_bytes(&v, CSQ_TEXT, buf, (uint32_t)n);
  }
  throughput("unique text", &v);
  csq_vec_reset(&v);
  for (int k = 0; k < 65536; k++) push_random(&v, CSQ_INT + k % 5);
  throughput("mixed classes", &v);
  csq_vec_free(&v);
}

/* csq_dec_values against the division it replaces, bit for bit: every code
** under 2^20 around refs near 0 and far out, then random 52-bit codes, at
** every scale; plus codes too wide for the fast path. */
static void test_dec_values(void) {
  enum { N = 4096 };
  static uint64_t u[N];
  static double out[N];
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  long nBad = 0;
  for (unsigned s = 0; s <= CSQ_DEC_MAX_SCALE; s++) {
    const int64_t aRef[] = {0, -(1 << 19), -1234567, 987654321, -((int64_t)1 << 51)};
    for (size_t r = 0; r < sizeof(aRef) / sizeof(aRef[0]); r++)
      for (uint64_t b = 0; b < (1u << 20); b += N) {
        for (uint32_t i = 0; i < N; i++) u[i] = b + i;
        csq_dec_values(u, N, aRef[r], s, out);
        for (uint32_t i = 0; i < N; i++) {
          double e = (double)(int64_t)(u[i] + (uint64_t)aRef[r]) / csq_pow10(s);
          nBad += memcmp(&e, &out[i], 8) != 0;
        }
      }
    for (int rep = 0; rep < 64; rep++) {
      int64_t ref = 0;
      for (uint32_t i = 0; i < N; i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        u[i] = (seed & (((uint64_t)1 << 52) - 1)) >> (seed >> 58);
        if (i == 0) ref = (int64_t)(seed >> 13) - ((int64_t)1 << 50);
      }
      if (rep == 63) u[7] = (uint64_t)1 << 60; /* too wide: the division path */
      csq_dec_values(u, N, rep & 1 ? ref : 0, s, out);
      for (uint32_t i = 0; i < N; i++) {
        double e = (double)(int64_t)(u[i] + (uint64_t)(rep & 1 ? ref : 0)) / csq_pow10(s);
        nBad += memcmp(&e, &out[i], 8) != 0;
      }
    }
  }
  CHECK(nBad == 0, "csq_dec_values: %ld values differ from the division", nBad);
}

/* csq_select_range and csq_unpack_sel against csq_unpack_u64 and the plain test, for every
** width, unaligned starts, ranges inside, around and past the codes, both
** polarities; each section is allocated to its exact size, so that a read
** past its slack shows under AddressSanitizer. */
static void test_select_range(void) {
  enum { NT = 3000 };
  static uint64_t aCode[NT], aU[NT];
  static uint32_t aOut[NT];
  uint64_t x = 0x9E3779B97F4A7C15ull;
  int nBad = 0;
  for (unsigned w = 1; w <= 64; w++) {
    uint64_t top = w == 64 ? ~(uint64_t)0 : ((uint64_t)1 << w) - 1;
    size_t nBytes = (size_t)csq_packed_size(NT, w);
    uint8_t *p = calloc(1, nBytes);
    if (!p) return;
    for (uint32_t i = 0; i < NT; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      aCode[i] = (i % 7 == 0 ? x >> 3 : x % 23) & top; /* many small codes, some large */
      for (unsigned b = 0; b < w; b++)
        if ((aCode[i] >> b) & 1) {
          uint64_t bit = (uint64_t)i * w + b;
          p[bit / 8] |= (uint8_t)(1u << (bit % 8));
        }
    }
    for (int rep = 0; rep < 24; rep++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      uint32_t i0 = rep < 4 ? 0 : (uint32_t)(x % NT), n = (uint32_t)((x >> 20) % (NT - i0 + 1));
      if (rep == 1) n = NT; /* the whole section: the last groups end at its slack */
      uint64_t lo = rep % 6 == 0   ? 0
                    : rep % 6 == 1 ? top + 1
                                   : (x >> 30) % 20,
               wid = rep % 6 == 2   ? ~(uint64_t)0 - lo
                     : rep % 6 == 3 ? top
                                    : (x >> 40) % 10;
      int neg = rep & 1;
      csq_unpack_u64(p, w, i0, n, aU);
      uint32_t m = csq_select_range(p, w, i0, n, lo, wid, neg, aOut), e = 0;
      for (uint32_t k = 0; k < n; k++) {
        if (aU[k] != aCode[i0 + k]) nBad++;
        if (((aU[k] - lo <= wid) ^ (neg != 0)) == 0) continue;
        if (e >= m || aOut[e] != i0 + k) nBad++;
        e++;
      }
      if (e != m) nBad++;
      /* csq_unpack_sel on indexes in any order, up to the last code */
      for (uint32_t k = 0; k < 40; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        aOut[k] = k == 0 ? NT - 1 : (uint32_t)(x % NT);
      }
      csq_unpack_sel(p, w, aOut, 40, aU);
      for (uint32_t k = 0; k < 40; k++) nBad += aU[k] != aCode[aOut[k]];
    }
    free(p);
  }
  CHECK(nBad == 0, "csq_select_range: %d disagreements with the plain test", nBad);
}

/* csq_checksum is XXH3-64 whichever code computes it: every length up to
** 4 KiB (the short paths and the block boundaries) and some long ones. */
static void test_checksum(void) {
  enum { N = 1 << 20 };
  uint8_t *p = malloc(N + 64);
  if (!p) return;
  uint64_t x = 0x243F6A8885A308D3ull;
  for (size_t i = 0; i < N + 64; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = (uint8_t)x;
  }
  int nBad = 0;
  for (size_t n = 0; n <= 4096; n++)
    nBad += csq_checksum(p + (n & 7), n) != XXH3_64bits(p + (n & 7), n);
  const size_t aLong[] = {65536, 65537, 100003, 458752, N};
  for (size_t i = 0; i < sizeof(aLong) / sizeof(aLong[0]); i++)
    nBad += csq_checksum(p + i, aLong[i]) != XXH3_64bits(p + i, aLong[i]);
  CHECK(nBad == 0, "csq_checksum: %d lengths differ from XXH3_64bits", nBad);
  free(p);
}

int main(int argc, char **argv) {
  (void)argv;
  test_round_trips();
  test_zone_merge();
  test_corruption();
  test_dec_values();
  test_checksum();
  test_select_range();
  if (argc < 2) test_throughput(); /* any argument: skip the timing print */
  if (nFail) {
    printf("test_chunk: %d checks failed\n", nFail);
    return 1;
  }
  printf("test_chunk: ok\n");
  return 0;
}
