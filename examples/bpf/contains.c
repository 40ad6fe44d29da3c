/*
** examples/bpf/contains.c - a byte-pattern match over TEXT or BLOB: does
** value s contain the pattern p (1 to 8 bytes)? The pattern's bytes are
** packed into one word and found with the csq_find helper, which reads the
** value's bytes bounded by its length (a program never holds a pointer).
**
**   clang -target bpf -O2 -I ext -c examples/bpf/contains.c -o contains.o
**   SELECT csq_bpf_load('contains', readfile('contains.o'), 'ANY,ANY');
**   SELECT count(*) FROM log WHERE csq_bpf('contains', msg, 'ERR');
**
** The same in SQL: instr(s, p) > 0, for TEXT or BLOB s and p of 1..8 bytes
** (NULL or a number: 0). A longer pattern fails the query (csq_fail(8)).
*/
#include "csq_bpf.h"

CSQ_PROGRAM u64 contains(const struct csq_arg *a) {
  if ((a[0].type != CSQ_T_TEXT && a[0].type != CSQ_T_BLOB) ||
      (a[1].type != CSQ_T_TEXT && a[1].type != CSQ_T_BLOB))
    return 0;
  u64 n = a[1].v;
  if (n == 0) return 1; /* instr(s, '') is 1 */
  if (n > 8) {
    csq_fail(8);
    return 0;
  }
  u64 needle = 0;
#pragma unroll
  for (int k = 7; k >= 0; k--) {
    s64 b = csq_byte(1, k); /* -1 past the end */
    needle = (needle << 8) | (b < 0 ? 0 : (u64)b);
  }
  return csq_find(0, needle, n) >= 0;
}
