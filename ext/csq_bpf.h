/*
** ext/csq_bpf.h - the one header a writer of a csq eBPF program includes: a
** predicate or function of your own that csq runs next to the data (on the
** device for a csq table, on the host otherwise, with the same answer).
**
**   #include "csq_bpf.h"
**   CSQ_PROGRAM u64 near(const struct csq_arg *a) {       // csq_bpf('near', lat, lon)
**     if (!csq_is(a, 0, CSQ_T_REAL) || !csq_is(a, 1, CSQ_T_REAL)) return 0;
**     u64 dlat = csq_fsub(a[0].v, csq_real(40.75));
**     ...
**   }
**
**   clang -target bpf -O2 -I ext -c near.c -o near.o
**   SELECT csq_bpf_load('near', readfile('near.o'), 'REAL,REAL');
**   SELECT count(*) FROM trips WHERE csq_bpf('near', lat, lon);
**
** THE PROGRAM: one function, u64 f(const struct csq_arg *args), in the
** object's section "csq" (CSQ_PROGRAM puts it there) or in ".text". Its
** u64 result: a filter keeps the row when it is not 0; used as a value
** (select list, aggregate argument, GROUP BY key), csq_bpf() returns it as
** an INTEGER (cast to s64).
**
** THE ARGUMENTS (read-only): args[i], a 16-byte slot, is SQL argument i
** (csq_bpf's second argument is args[0]; csq_bpf_col(col, 'f') passes col
** as args[0]). At most 16 arguments.
**   v     INTEGER: the value (as u64; cast to s64 or use csq_int);
**         REAL: its IEEE-754 bits (eBPF has no floating point: use the
**         REAL helpers below); TEXT, BLOB: the length in bytes (csq_len);
**         NULL: 0
**   type  CSQ_T_NULL 0, CSQ_T_INTEGER 1, CSQ_T_REAL 2, CSQ_T_TEXT 3, CSQ_T_BLOB 4
** The types given to csq_bpf_load ('INTEGER,REAL,TEXT,BLOB' or 'ANY', one
** per argument) fix the number of arguments, and an INTEGER passed for a
** parameter declared REAL arrives as REAL (as CAST converts it); any other
** value arrives with its own type, NULL included, so a program checks the
** type before it reads v.
**
** TEXT AND BLOB BYTES: a program never holds a pointer to them; it asks
** for them through helpers bounded by the value's length: csq_byte(i, off)
** (one byte, -1 past the end) and csq_find(i, needle, n) (a pattern of 1
** to 8 bytes). TEXT is UTF-8, without a terminating NUL.
**
** WHAT A PROGRAM MAY DO: no loops (unroll bounded ones: #pragma unroll over a
** constant count), no global or static data (constants in code are fine),
** no calls but to the helpers below (other functions must be static inline,
** and are then inlined), no writes but to its own stack (512 bytes), at
** most 4096 instructions. csq_bpf_load refuses anything else and says why
** (csq's rules first, then the eBPF verifier's message). eBPF has no signed
** division or remainder: clang refuses `x % 3` on an s64 ("Unsupport signed
** division"); divide the magnitude as u64. The full rules:
** device/format/bpf.h.
**
** FAULTS: csq_fail(code) fails the query with an error that shows code
** (its low 48 bits, sign-extended); so does a helper given an argument
** index past the arguments or csq_find a length outside 1..8. The
** connection and the device go on serving. A WHERE's conditions run in no
** fixed order, so a program may see rows another condition excludes.
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
_Static_assert(sizeof(struct csq_arg) == 16, "a slot is 16 bytes");

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

/* The slot of argument i: its type, and its value as each type reads it. */
static inline int csq_is(const struct csq_arg *a, int i, int type) {
  return a[i].type == type;
}
static inline int csq_is_null(const struct csq_arg *a, int i) {
  return a[i].type == CSQ_T_NULL;
}
static inline s64 csq_int(const struct csq_arg *a, int i) { /* INTEGER */
  return (s64)a[i].v;
}
static inline u64 csq_len(const struct csq_arg *a, int i) { /* TEXT, BLOB: bytes */
  return a[i].v;
}

#ifdef __bpf__
/* REAL arithmetic on IEEE-754 bits (what REAL slots hold); results are what
** C's double arithmetic gives (x / 0 is inf or NaN, never a fault). */
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
/* Fail the query with an error that shows code (its low 48 bits); the
** program's result is then unused. */
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
