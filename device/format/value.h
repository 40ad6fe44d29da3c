/*
** device/format/value.h - SQLite's value rules, written once: the order of
** two values, their equality and a hash that agrees with it, as SQLite's
** own comparisons (sqlite3MemCompare) and its GROUP BY / DISTINCT see them.
**
** Every place that orders, compares or groups values uses these: the
** device's executor (device/engine/exec_*.c: filter terms, top-N, MIN/MAX,
** GROUP BY), the host's merge of partial aggregates (device/host/agg.c),
** the cursor's top-N (vtab/cursor.c), the join probe cache (vtab/probe.c)
** and the zone-map test of a program (device/format/program.c). They are
** checked against SQLite itself over every pair of storage classes by
** tests/unit/test_value.c.
**
** The rules:
**   - class order: NULL < numbers (INTEGER and REAL) < TEXT < BLOB;
**   - numbers by value across INTEGER and REAL, exactly: an int64 is never
**     rounded to a double (9007199254740993 > 9007199254740992.0), and
**     -0.0 = 0.0;
**   - TEXT by collation: BINARY (memcmp, then length), NOCASE (ASCII case
**     folded, as sqlite3StrNICmp: it stops at a NUL of the left operand),
**     RTRIM (trailing spaces ignored, then BINARY);
**   - BLOB by bytes: memcmp, then length (a prefix sorts first).
**
** Everything but the compare of bytes (value.c) is static inline: the
** executor's per-value loops rely on it.
** A value is a csq_value, which names bytes it does not own (they live in
** a vector's heap, a program's constants or a merger's heap).
*/
#ifndef CSQ_DEVICE_VALUE_H
#define CSQ_DEVICE_VALUE_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <xxhash.h>

#include "device/format/vec.h"

/* Collations of TEXT comparisons: the program format's codes (program.h,
** CSQ_TF_COLL_MASK); program.h checks they agree. */
#define CSQ_COLL_BINARY 0x00
#define CSQ_COLL_NOCASE 0x02
#define CSQ_COLL_RTRIM  0x04

/* One value. cls is a CSQ_* class (vec.h), or 0 for "no value yet" where a
** caller needs one (MIN/MAX states): csq_value_cmp orders it like NULL;
** csq_value_eq and csq_value_hash are never given it. Only the field
** of the class is read: i for CSQ_INT, r for CSQ_REAL (never NaN: SQLite
** stores NaN as NULL), z and n for CSQ_TEXT and CSQ_BLOB (z may be NULL
** when n is 0). */
typedef struct csq_value {
  uint8_t cls;
  int64_t i;
  double r;
  const uint8_t *z;
  uint32_t n;
} csq_value;

/* Value r of vector p; its bytes, if any, stay in p's heap. */
static inline csq_value csq_value_of_vec(const csq_vec *p, uint32_t r) {
  csq_value v;
  v.cls = p->aCls[r];
  v.i = p->aVal[r].i;
  v.r = p->aVal[r].r;
  v.z = NULL;
  v.n = 0;
  if (v.cls == CSQ_TEXT || v.cls == CSQ_BLOB) {
    v.n = p->aLen[r];
    if (v.n) v.z = (const uint8_t *)csq_vec_bytes(p, r);
  }
  return v;
}

/* The place of a class in SQLite's order: 0 NULL (and 0, "none"),
** 1 INTEGER and REAL, 2 TEXT, 3 BLOB. */
static inline int csq_value_rank(int cls) {
  return cls == CSQ_INT || cls == CSQ_REAL ? 1 : cls == CSQ_TEXT ? 2 : cls == CSQ_BLOB ? 3 : 0;
}

/* Is cls a number (INTEGER or REAL)? */
static inline int csq_value_is_num(int cls) {
  return cls == CSQ_INT || cls == CSQ_REAL;
}

/* Integer i against real r exactly, without rounding i to a double:
** -1, 0 or 1 as i <, =, > r. A NaN r (never stored) orders below every
** integer. */
static inline int csq_value_cmp_int_real(int64_t i, double r) {
  if (r != r) return 1;
  /* 2^63 is exact as a double; every double in [-2^63, 2^63) truncates to
  ** an int64 without overflow, and the integer parts decide unless they
  ** agree, where the fraction does */
  if (r < -9223372036854775808.0) return 1;
  if (r >= 9223372036854775808.0) return -1;
  int64_t y = (int64_t)r;
  if (i != y) return i < y ? -1 : 1;
  double f = r - (double)y; /* exact: y and r share the integer part */
  return f > 0 ? -1 : f < 0 ? 1 : 0;
}

/* Two numbers (both INTEGER or REAL): -1, 0 or 1 by value. */
static inline int csq_value_cmp_num(const csq_value *a, const csq_value *b) {
  if (a->cls == CSQ_INT) {
    if (b->cls == CSQ_INT) return a->i < b->i ? -1 : a->i > b->i;
    return csq_value_cmp_int_real(a->i, b->r);
  }
  if (b->cls == CSQ_INT) return -csq_value_cmp_int_real(b->i, a->r);
  return a->r < b->r ? -1 : a->r > b->r;
}

/* Bytes a (na) against bytes b (nb) under collation coll (CSQ_COLL_*; a
** BLOB is always compared under BINARY): -1, 0 or 1. Out of line
** (device/format/value.c): the loops that compare numbers inline better
** without it, and a compare of bytes costs its memcmp anyway. */
int csq_value_cmp_bytes(const uint8_t *a, uint32_t na, const uint8_t *b, uint32_t nb, int coll);

/* SQLite's order of a and b, TEXT under collation coll: -1, 0 or 1.
** NULL (or "none") sorts first and equals NULL, as in ORDER BY; callers
** that need SQL's "a < b is NULL" check for NULL themselves. */
static inline int csq_value_cmp(const csq_value *a, const csq_value *b, int coll) {
  int ra = csq_value_rank(a->cls), rb = csq_value_rank(b->cls);
  if (ra != rb) return ra < rb ? -1 : 1;
  if (ra == 1) return csq_value_cmp_num(a, b);
  if (ra == 0) return 0;
  return csq_value_cmp_bytes(a->z, a->n, b->z, b->n, ra == 2 ? coll : CSQ_COLL_BINARY);
}

/* Are a and b the same value for GROUP BY, DISTINCT and "IS" (BINARY):
** 1 or 0. The same as csq_value_cmp(a, b, CSQ_COLL_BINARY) == 0 for
** values of a class (NULL equals NULL; 1 equals 1.0; TEXT never equals a
** BLOB of the same bytes), faster. */
static inline int csq_value_eq(const csq_value *a, const csq_value *b) {
  if (a->cls == CSQ_NULL || b->cls == CSQ_NULL) return a->cls == b->cls;
  if (a->cls == CSQ_INT && b->cls == CSQ_INT) return a->i == b->i;
  if (csq_value_is_num(a->cls) && csq_value_is_num(b->cls)) {
    if (a->cls == CSQ_REAL && b->cls == CSQ_REAL) return a->r == b->r;
    return a->cls == CSQ_INT ? csq_value_cmp_int_real(a->i, b->r) == 0
                             : csq_value_cmp_int_real(b->i, a->r) == 0;
  }
  return a->cls == b->cls && a->n == b->n && (a->n == 0 || memcmp(a->z, b->z, a->n) == 0);
}

/* A 64-bit finaliser (MurmurHash3's fmix64): every input bit moves every
** output bit. */
static inline uint64_t csq_mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

/* The int64 a REAL equals, if any: 1 with it in *pi, else 0 (a fraction,
** NaN, or outside the int64 range: -2^63 is exactly a double, 2^63 is not
** in range, so the test is r < 2^63). */
static inline int csq_real_int(double r, int64_t *pi) {
  if (!(r >= -9223372036854775808.0 && r < 9223372036854775808.0)) return 0;
  *pi = (int64_t)r;
  return (double)*pi == r;
}

/* Hash of v that agrees with csq_value_eq: equal values hash equal. An
** INTEGER i hashes as csq_mix64(i), and a REAL with an integral value in
** the int64 range as that integer (so 1 and 1.0, 0 and -0.0 collide); a
** caller may hash a vector of integers through csq_mix64 directly. TEXT
** and BLOB of the same bytes hash apart. */
static inline uint64_t csq_value_hash(const csq_value *v) {
  switch (v->cls) {
  case CSQ_INT:
    return csq_mix64((uint64_t)v->i);
  case CSQ_REAL: {
    int64_t i;
    if (csq_real_int(v->r, &i)) return csq_mix64((uint64_t)i);
    uint64_t u;
    memcpy(&u, &v->r, 8);
    return csq_mix64(u ^ 0x5bd1e9955bd1e995ull);
  }
  case CSQ_TEXT:
    return XXH3_64bits(v->z, v->n) ^ 0x27d4eb2f165667c5ull;
  case CSQ_BLOB:
    return XXH3_64bits(v->z, v->n) ^ 0x94d049bb133111ebull;
  default:
    return 0x9e3779b97f4a7c15ull;
  }
}

/* Add x to the sum *ps with compensation *pc (Kahan-Babuska-Neumaier, as
** SQLite's sum() and total() since 3.43); the sum is *ps + *pc. */
static inline void csq_kbn_add(double *ps, double *pc, double x) {
  double s = *ps, t = s + x;
  *pc += fabs(s) >= fabs(x) ? (s - t) + x : (x - t) + s;
  *ps = t;
}

#endif /* CSQ_DEVICE_VALUE_H */
