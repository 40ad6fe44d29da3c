/*
** vtab/affinity.c - store a value the way a native table column would.
**
** SQLite applies column affinity when it writes a row of an ordinary table,
** but hands a virtual table's xUpdate the values as they came. csq applies the
** same rules here, so that what is read back is what a native table with the
** same declared types returns: numeric-looking text becomes a number in
** INTEGER/NUMERIC/REAL columns, an integral REAL becomes an INTEGER in
** INTEGER/NUMERIC columns, REAL columns hold REALs, and numbers become text
** in TEXT columns. Text-to-number parsing is SQLite's own
** (sqlite3_value_numeric_type), so the edge cases agree with it.
*/
#include <string.h>
#include "vtab/vtab.h"

/* SQLite's sqlite3VdbeIntegerAffinity: a REAL that is exactly an integer
** (and not at the edges of the range) becomes that integer. */
static int real_as_int(double r, int64_t *pI) {
  if (!(r > -9223372036854775808.0 && r < 9223372036854775808.0)) return 0;
  int64_t i = (int64_t)r;
  if ((double)i != r || i == INT64_MIN || i == INT64_MAX) return 0;
  *pI = i;
  return 1;
}

/* A REAL in a column of numeric affinity aff. SQLite stores an integral
** REAL as an integer (in a REAL column too, where it reads back as REAL),
** so -0.0 comes back as 0.0 there. */
static int push_real_aff(csq_vec *pVec, double r, char aff) {
  int64_t i;
  if (!real_as_int(r, &i)) return csq_vec_push_real(pVec, r);
  if (aff == VT_AFF_REAL) return csq_vec_push_real(pVec, (double)i);
  return csq_vec_push_int(pVec, i);
}

int vt_push_value(csq_vec *pVec, sqlite3_value *pVal, char aff) {
  int t = sqlite3_value_type(pVal);
  if (t == SQLITE_NULL) return csq_vec_push_null(pVec);
  if (aff >= VT_AFF_NUMERIC) {
    if (t == SQLITE_TEXT) {
      /* numeric affinity: only text that is wholly a number converts */
      int t2 = sqlite3_value_numeric_type(pVal);
      if (t2 == SQLITE_INTEGER || t2 == SQLITE_FLOAT) t = t2;
    }
    if (t == SQLITE_FLOAT) return push_real_aff(pVec, sqlite3_value_double(pVal), aff);
    if (t == SQLITE_INTEGER) {
      int64_t i = sqlite3_value_int64(pVal);
      if (aff == VT_AFF_REAL) return csq_vec_push_real(pVec, (double)i);
      return csq_vec_push_int(pVec, i);
    }
  } else if (aff == VT_AFF_TEXT && (t == SQLITE_INTEGER || t == SQLITE_FLOAT)) {
    const unsigned char *z = sqlite3_value_text(pVal);
    if (!z) return -12; /* -ENOMEM */
    return csq_vec_push_bytes(pVec, CSQ_TEXT, z, (uint32_t)sqlite3_value_bytes(pVal));
  }
  switch (t) {
  case SQLITE_INTEGER:
    return csq_vec_push_int(pVec, sqlite3_value_int64(pVal));
  case SQLITE_FLOAT:
    return csq_vec_push_real(pVec, sqlite3_value_double(pVal));
  case SQLITE_TEXT: {
    const unsigned char *z = sqlite3_value_text(pVal);
    int n = sqlite3_value_bytes(pVal);
    return csq_vec_push_bytes(pVec, CSQ_TEXT, z ? z : (const unsigned char *)"", (uint32_t)n);
  }
  default: {
    const void *p = sqlite3_value_blob(pVal);
    int n = sqlite3_value_bytes(pVal);
    return csq_vec_push_bytes(pVec, CSQ_BLOB, p ? p : "", (uint32_t)n);
  }
  }
}

/* ---- Text to a column's affinity, without an sqlite3_value ----
** csq_import converts text fields itself, since making an sqlite3_value
** per field would cost more than the rest of the load. Its answers must be
** SQLite's: the fast path below takes only the plain shapes (an optional
** '-', up to 18 digits, maybe one '.' and up to 15 digits in all) and
** computes the double as the running SQLite does; every other text that
** could be a number goes to SQLite itself (vt_numconv's statement), and
** text that cannot (a character no number has) stays text. */

struct vt_numconv {
  sqlite3_stmt *pSlow;  /* SELECT ?1: its value, duplicated, gets the affinity */
  int eReal;            /* how this SQLite turns a decimal into a double: */
#define VT_REAL_SLOW  0 /* not known: always ask SQLite */
#define VT_REAL_EXACT 1 /* correctly rounded (s / 10^k in double) */
#define VT_REAL_LDBL  2 /* through long double (SQLite before 3.43 on x86) */
  uint64_t nSlow;       /* texts SQLite converted (a measure of the fast path) */
};

static const double aPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The slow path: SQLite's own affinity through a protected value. */
static int push_slow(vt_numconv *pConv, csq_vec *pVec, const char *z, uint32_t n, char aff) {
  sqlite3_stmt *s = pConv->pSlow;
  pConv->nSlow++;
  int rc = sqlite3_bind_text(s, 1, z, (int)n, SQLITE_STATIC);
  if (rc == SQLITE_OK && sqlite3_step(s) != SQLITE_ROW) rc = sqlite3_reset(s);
  if (rc != SQLITE_OK) {
    sqlite3_reset(s);
    return -5; /* -EIO */
  }
  sqlite3_value *v = sqlite3_value_dup(sqlite3_column_value(s, 0));
  sqlite3_reset(s);
  if (!v) return -12; /* -ENOMEM */
  rc = vt_push_value(pVec, v, aff);
  sqlite3_value_free(v);
  return rc;
}

/* A plain decimal's shape: *pS its digits, *pK the digits after the '.',
** *pbNeg its sign. 1 integer, 2 decimal, 0 not plain. */
static int plain_number(const char *z, uint32_t n, uint64_t *pS, int *pK, int *pbNeg) {
  uint32_t i = 0;
  int bNeg = 0, nDigit = 0, k = -1;
  uint64_t s = 0;
  if (i < n && z[i] == '-') {
    bNeg = 1;
    i++;
  }
  for (; i < n; i++) {
    unsigned c = (unsigned char)z[i] - '0';
    if (c < 10) {
      s = s * 10 + c;
      nDigit++;
      if (k >= 0) k++;
    } else if (z[i] == '.' && k < 0) {
      k = 0;
    } else {
      return 0;
    }
  }
  if (nDigit == 0) return 0;
  *pS = s;
  *pbNeg = bNeg;
  if (k < 0) {
    *pK = 0;
    return nDigit <= 18 ? 1 : 0;
  }
  *pK = k;
  return nDigit <= 15 ? 2 : 0;
}

static double decimal_value(const vt_numconv *pConv, uint64_t s, int k, int bNeg) {
  double r;
  if (pConv->eReal == VT_REAL_LDBL) {
    r = (double)((long double)s / (long double)aPow10[k]);
  } else {
    r = (double)s / aPow10[k];
  }
  return bNeg ? -r : r;
}

/* Could SQLite read z as a number at all? Only these characters make one. */
static int maybe_number(const char *z, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    char c = z[i];
    if (!((c >= '0' && c <= '9') || c == '.' || c == '+' || c == '-' || c == 'e' || c == 'E' ||
          c == ' ' || (c >= '\t' && c <= '\r')))
      return 0;
  }
  return n > 0;
}

int vt_push_text(vt_numconv *pConv, csq_vec *pVec, const char *z, uint32_t n, char aff) {
  if (aff < VT_AFF_NUMERIC) return csq_vec_push_bytes(pVec, CSQ_TEXT, z, n);
  uint64_t s;
  int k, bNeg;
  switch (plain_number(z, n, &s, &k, &bNeg)) {
  case 1: {
    int64_t i = bNeg ? -(int64_t)s : (int64_t)s;
    if (aff == VT_AFF_REAL) return csq_vec_push_real(pVec, (double)i);
    return csq_vec_push_int(pVec, i);
  }
  case 2: {
    if (pConv->eReal == VT_REAL_SLOW) break;
    return push_real_aff(pVec, decimal_value(pConv, s, k, bNeg), aff);
  }
  default:
    if (!maybe_number(z, n)) return csq_vec_push_bytes(pVec, CSQ_TEXT, z, n);
  }
  return push_slow(pConv, pVec, z, n, aff);
}

/* Which way this SQLite computes decimals: ask it for a sample of plain
** decimals and keep the method that gives every one of them bit for bit
** (20,000 conversions, about 20 ms, once per load). */
static int probe_real(vt_numconv *pConv) {
  int bExact = 1, bLdbl = 1;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  csq_vec v;
  csq_vec_init(&v);
  for (int t = 0; t < 20000 && (bExact || bLdbl); t++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int nDig = 1 + (int)(x % 15), k = (int)((x >> 8) % (unsigned)(nDig + 1));
    char z[40];
    int n = 0;
    uint64_t y = x >> 16;
    if ((x >> 4) & 1) z[n++] = '-';
    for (int d = 0; d < nDig; d++) {
      if (d == nDig - k) z[n++] = '.';
      z[n++] = (char)('0' + (y % 10));
      y = y / 10 ^ (y << 3);
    }
    if (k == nDig) z[n++] = '.';
    csq_vec_reset(&v);
    uint64_t s;
    int kk, bNeg;
    /* zeros are signed: -0.0 becomes 0.0 (push_real_aff), whichever way */
    if (plain_number(z, (uint32_t)n, &s, &kk, &bNeg) != 2 || s == 0) continue;
    if (push_slow(pConv, &v, z, (uint32_t)n, VT_AFF_REAL) || v.aCls[0] != CSQ_REAL) {
      bExact = bLdbl = 0;
      break;
    }
    double r = v.aVal[0].r, r1 = (double)s / aPow10[kk];
    double r2 = (double)((long double)s / (long double)aPow10[kk]);
    if (bNeg) r1 = -r1, r2 = -r2;
    if (memcmp(&r, &r1, 8) != 0) bExact = 0;
    if (memcmp(&r, &r2, 8) != 0) bLdbl = 0;
  }
  csq_vec_free(&v);
  pConv->nSlow = 0;
  /* both can agree on a sample (they differ about once in 10^4): SQLite
  ** 3.43 replaced its long double conversion with a correctly rounded one */
  if (bExact && bLdbl) return sqlite3_libversion_number() >= 3043000 ? VT_REAL_EXACT : VT_REAL_LDBL;
  return bExact ? VT_REAL_EXACT : bLdbl ? VT_REAL_LDBL : VT_REAL_SLOW;
}

int vt_numconv_new(sqlite3 *db, vt_numconv **pp) {
  *pp = NULL;
  vt_numconv *p = sqlite3_malloc64(sizeof(*p));
  if (!p) return SQLITE_NOMEM;
  memset(p, 0, sizeof(*p));
  int rc = sqlite3_prepare_v2(db, "SELECT ?1", -1, &p->pSlow, NULL);
  if (rc) {
    sqlite3_free(p);
    return rc;
  }
  p->eReal = probe_real(p);
  *pp = p;
  return SQLITE_OK;
}

void vt_numconv_free(vt_numconv *p) {
  if (!p) return;
  sqlite3_finalize(p->pSlow);
  sqlite3_free(p);
}

uint64_t vt_numconv_slow(const vt_numconv *p) {
  return p->nSlow;
}
