/*
** ext/csq_bpf.h - for writers of csq eBPF programs: a predicate or function
** of your own that csq runs next to the data (on the device for a csq table,
** on the host otherwise, with the same answer).
**
**   #include "csq_bpf.h"
**   CSQ_PROGRAM u64 near(const struct csq_arg *a) {       // csq_bpf('near', lat, lon)
**     if (a[0].type != CSQ_T_REAL || a[1].type != CSQ_T_REAL) return 0;
**     u64 dlat = csq_fsub(a[0].v, csq_real(40.75));
**     ...
**   }
**
**   clang -target bpf -O2 -I ext -c near.c -o near.o
**   SELECT csq_bpf_load('near', readfile('near.o'), 'REAL,REAL');
**   SELECT count(*) FROM trips WHERE csq_bpf('near', lat, lon);
**
** THE PROGRAM: one function, u64 f(const struct csq_arg *args), in the
** object's section "csq" (CSQ_PROGRAM puts it there) or in ".text". It
** returns a u64: a filter keeps the row when it is not 0; used as a value,
** csq_bpf() returns it as an INTEGER.
**
** THE ARGUMENTS: args[i] is SQL argument i (read-only):
**   v     INTEGER: the value (as u64; cast to s64); REAL: its IEEE-754 bits
**         (use the helpers below: eBPF has no floating point); TEXT, BLOB:
**         the length in bytes; NULL: 0
**   type  CSQ_T_NULL 0, CSQ_T_INTEGER 1, CSQ_T_REAL 2, CSQ_T_TEXT 3, CSQ_T_BLOB 4
**   An INTEGER passed for a parameter declared REAL arrives as REAL; any
**   other value arrives with its own type, so check `type` first.
**   TEXT and BLOB bytes: csq_byte(i, off) and csq_find(i, needle, n); a
**   program never holds a pointer to them.
**
** WHAT A PROGRAM MAY DO: no loops (unroll bounded ones: #pragma unroll over a
** constant count), no global or static data, no calls but to the helpers
** below (other functions must be static inline), no writes but to its own
** stack, at most 4096 instructions. csq_bpf_load refuses anything else and
** says why. The full rules: device/format/bpf.h.
*/
#ifndef CSQ_BPF_H
#define CSQ_BPF_H

typedef unsigned long long u64;
typedef long long s64;
typedef unsigned char u8;

#define CSQ_T_NULL    0
#define CSQ_T_INTEGER 1
#define CSQ_T_REAL    2
#define CSQ_T_TEXT    3
#define CSQ_T_BLOB    4

struct csq_arg {
  u64 v;
  u8 type;
  u8 pad[7];
};

/* Put the program's function in section "csq". */
#define CSQ_PROGRAM __attribute__((section("csq"), used))

/* Helper ids (device/format/bpf.h, HELPERS). */
#define CSQ_H_FADD    1
#define CSQ_H_FSUB    2
#define CSQ_H_FMUL    3
#define CSQ_H_FDIV    4
#define CSQ_H_FCMP    5
#define CSQ_H_FSQRT   6
#define CSQ_H_FSIN    7
#define CSQ_H_FCOS    8
#define CSQ_H_FABS    9
#define CSQ_H_FROMINT 10
#define CSQ_H_TOINT   11
#define CSQ_H_BYTE    12
#define CSQ_H_FIND    13
#define CSQ_H_FAIL    14

#ifdef __bpf__
/* REAL arithmetic on IEEE-754 bits. */
static u64 (*const csq_fadd)(u64 a, u64 b) = (void *)CSQ_H_FADD;
static u64 (*const csq_fsub)(u64 a, u64 b) = (void *)CSQ_H_FSUB;
static u64 (*const csq_fmul)(u64 a, u64 b) = (void *)CSQ_H_FMUL;
static u64 (*const csq_fdiv)(u64 a, u64 b) = (void *)CSQ_H_FDIV;
/* -1, 0, 1 for a < b, a = b, a > b; 2 if either is NaN. */
static s64 (*const csq_fcmp)(u64 a, u64 b) = (void *)CSQ_H_FCMP;
static u64 (*const csq_fsqrt)(u64 a) = (void *)CSQ_H_FSQRT;
static u64 (*const csq_fsin)(u64 a) = (void *)CSQ_H_FSIN;
static u64 (*const csq_fcos)(u64 a) = (void *)CSQ_H_FCOS;
static u64 (*const csq_fabs)(u64 a) = (void *)CSQ_H_FABS;
/* int64 -> REAL bits; REAL bits -> int64 truncated (saturated, NaN 0). */
static u64 (*const csq_fromint)(s64 i) = (void *)CSQ_H_FROMINT;
static s64 (*const csq_toint)(u64 a) = (void *)CSQ_H_TOINT;
/* Byte off of TEXT/BLOB argument i, or -1 past its end or for another type. */
static s64 (*const csq_byte)(u64 i, u64 off) = (void *)CSQ_H_BYTE;
/* First offset of the n (1..8) low-order bytes of needle in TEXT/BLOB
** argument i, or -1. */
static s64 (*const csq_find)(u64 i, u64 needle, u64 n) = (void *)CSQ_H_FIND;
/* Fail the query with an error that shows code. */
static u64 (*const csq_fail)(s64 code) = (void *)CSQ_H_FAIL;

/* The bits of a REAL constant, computed by the compiler. */
static inline u64 csq_real(double d) {
  union {
    double d;
    u64 u;
  } x = {d};
  return x.u;
}
#endif

#endif /* CSQ_BPF_H */
