/*
** device/format/keyhash.h - the hash of a join key, the one both sides use:
** the host hashes the build side's keys into a Bloom filter (bloom.h), the
** device hashes the probe column's values to test them (CSQ_OP_BLOOM in
** program.h). Built on XXH3-64.
**
** THE RULE: two values that are equal by SQLite's `=` under the BINARY
** collation, with no affinity conversion, hash alike. So:
**   - an INTEGER hashes as its int64 value;
**   - a REAL with an integral value inside the int64 range [-2^63, 2^63)
**     hashes as that integer (4.0 as 4, -0.0 and 0.0 as 0, 2^53 as
**     9007199254740992), since SQLite compares an integer and a real
**     exactly and finds them equal; any other REAL (fractional, beyond
**     int64, infinite) hashes its IEEE-754 bits, and no integer equals it;
**   - TEXT and BLOB hash their bytes, each with its own seed: SQLite never
**     finds a TEXT equal to a BLOB, so they need not agree;
**   - NULL has no hash: it never joins (the caller leaves it out).
** Affinity is the caller's: SQLite converts a join key by the affinity of
** the comparison before comparing, so the planner converts the build side's
** keys the way the probe column's values would compare (e.g. '5' -> 5
** against an INTEGER column) and hashes the converted values.
** The hashes are part of the program format (a Bloom filter travels in a
** program), so they never change without a new program version; that is
** why this is not value.h's csq_value_hash, which only lives in memory.
*/
#ifndef CSQ_DEVICE_KEYHASH_H
#define CSQ_DEVICE_KEYHASH_H

#include <stdint.h>

#include "device/format/value.h"
#include "device/format/vec.h"

uint64_t csq_key_hash_int(int64_t v);
uint64_t csq_key_hash_real(double r);
/* cls is CSQ_TEXT or CSQ_BLOB (vec.h; SQLite's SQLITE_TEXT / SQLITE_BLOB
** have the same numbers); p[0..n) the bytes (p may be NULL when n is 0). */
uint64_t csq_key_hash_bytes(int cls, const void *p, uint32_t n);

/* The hashes of n integers / reals at once: aHash[i] = csq_key_hash_*(a[i])
** (the executor's loops; one call per vector, not per value). */
void csq_key_hash_ints(const int64_t *a, uint64_t *aHash, int n);
void csq_key_hash_reals(const double *a, uint64_t *aHash, int n);

/* The hashes of values [i0, i0+n) of vector v: aHash[k] for value i0+k,
** and aNull[k] = 1 where it is NULL (its aHash[k] is then 0 and must not
** enter a filter), else 0. */
void csq_key_hash_vec(const csq_vec *v, uint32_t i0, uint32_t n, uint64_t *aHash, uint8_t *aNull);

/* The hash of v (value.h), which is not NULL. */
static inline uint64_t csq_key_hash_value(const csq_value *v) {
  switch (v->cls) {
  case CSQ_INT:
    return csq_key_hash_int(v->i);
  case CSQ_REAL:
    return csq_key_hash_real(v->r);
  default:
    return csq_key_hash_bytes(v->cls, v->z, v->n);
  }
}

#endif /* CSQ_DEVICE_KEYHASH_H */
