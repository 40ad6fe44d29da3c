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

int vt_push_value(csq_vec *pVec, sqlite3_value *pVal, char aff) {
  int t = sqlite3_value_type(pVal);
  if (t == SQLITE_NULL) return csq_vec_push_null(pVec);
  if (aff >= VT_AFF_NUMERIC) {
    if (t == SQLITE_TEXT) {
      /* numeric affinity: only text that is wholly a number converts */
      int t2 = sqlite3_value_numeric_type(pVal);
      if (t2 == SQLITE_INTEGER || t2 == SQLITE_FLOAT) t = t2;
    }
    if (t == SQLITE_FLOAT) {
      double r = sqlite3_value_double(pVal);
      int64_t i;
      if (aff == VT_AFF_REAL) return csq_vec_push_real(pVec, r);
      if (real_as_int(r, &i)) return csq_vec_push_int(pVec, i);
      return csq_vec_push_real(pVec, r);
    }
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
