/*
** device/format/value.c - the out-of-line part of SQLite's value rules
** (device/format/value.h): the compare of TEXT and BLOB bytes under a
** collation.
*/
#include "device/format/value.h"

int csq_value_cmp_bytes(const uint8_t *a, uint32_t na, const uint8_t *b, uint32_t nb, int coll) {
  if (coll == CSQ_COLL_RTRIM) {
    while (na && a[na - 1] == ' ') na--;
    while (nb && b[nb - 1] == ' ') nb--;
  }
  uint32_t m = na < nb ? na : nb;
  if (coll == CSQ_COLL_NOCASE) {
    /* sqlite3StrNICmp: ASCII folded, stops at a NUL of the left operand */
    for (uint32_t i = 0; i < m; i++) {
      int x = a[i] >= 'A' && a[i] <= 'Z' ? a[i] + 32 : a[i];
      int y = b[i] >= 'A' && b[i] <= 'Z' ? b[i] + 32 : b[i];
      if (a[i] == 0 || x != y) {
        if (x != y) return x < y ? -1 : 1;
        break; /* both NUL: equal so far, lengths decide */
      }
    }
  } else if (m) {
    int r = memcmp(a, b, m);
    if (r) return r < 0 ? -1 : 1;
  }
  return na < nb ? -1 : na > nb;
}
