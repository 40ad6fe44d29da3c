/*
** examples/bpf/luhn.c - a checksum: does the INTEGER n (a card number, up to
** 19 digits) pass the Luhn check? Its digits are walked by a fully unrolled
** loop (eBPF programs may not loop), with integer division only.
**
**   clang -target bpf -O2 -I ext -c examples/bpf/luhn.c -o luhn.o
**   SELECT csq_bpf_load('luhn', readfile('luhn.o'), 'INTEGER');
**   SELECT count(*) FROM cards WHERE csq_bpf('luhn', num);    -- pushed to the device
**   SELECT num, csq_bpf('luhn', num) FROM cards;               -- as a function
**
** Returns 1 when the digit sum (every second digit from the right doubled,
** 9 taken off a two-digit result) is a multiple of 10; 0 for a negative
** number, a non-INTEGER or NULL.
*/
#include "csq_bpf.h"

CSQ_PROGRAM u64 luhn(const struct csq_arg *a) {
  if (a[0].type != CSQ_T_INTEGER || (s64)a[0].v < 0) return 0;
  u64 n = a[0].v, sum = 0;
#pragma unroll
  for (int i = 0; i < 20; i++) {
    u64 d = n % 10;
    n /= 10;
    if (i & 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 == 0;
}
