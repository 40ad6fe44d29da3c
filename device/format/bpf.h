/*
** device/format/bpf.h - a user's eBPF program as csq carries it to the
** device: the call descriptor a filter term (CSQ_OP_BPF, program.h) points
** to, the argument block a program reads, the helpers it may call, and the
** checks csq makes on top of the eBPF verifier (DPDK's rte_bpf, run by
** device/engine/bpf_rt.c). Program writers read ext/csq_bpf.h, which
** restates the parts they need; test_bpf checks that both agree.
**
** WHAT A PROGRAM IS
**   One eBPF function, u64 f(const void *args), as `clang -target bpf -O2 -c`
**   compiles it: the instructions of the object's section "csq", else of its
**   ".text" (csq_bpf_code), or raw instructions (8 bytes each). It returns a
**   u64: a filter keeps the row when it is not 0; a function's result is the
**   value as an INTEGER.
**
** WHAT A PROGRAM MAY DO (csq_bpf_check, then the eBPF verifier)
**   - at most CSQ_BPF_MAX_INS instructions, from an object of at most
**     CSQ_BPF_MAX_OBJ bytes;
**   - no loops, no unreachable code, no access outside its stack and the
**     argument block (the verifier);
**   - read the argument block only: every store goes through r10 (the
**     stack pointer), so a program cannot write anything else;
**   - call only the helpers below (call imm = helper id, src_reg 0): no
**     calls of its own functions, no maps (lddw with src_reg != 0), no
**     packet loads (LD_ABS / LD_IND); an object with relocations against
**     its code (global data, other functions) is refused;
**   so a program always ends, touches nothing but its own stack and its
**   arguments, and its work per row is bounded by its size.
**
** THE ARGUMENT BLOCK (read-only, 16 bytes per SQL argument)
**   slot i at offset 16*i:
**     0  u64  the value: INTEGER as int64, REAL as its IEEE-754 bits,
**             TEXT/BLOB its length in bytes, NULL 0
**     8  u8   the type: CSQ_BPF_NULL 0, INTEGER 1, REAL 2, TEXT 3, BLOB 4
**     9  7 bytes of zero
**   A value takes the class it has, except that an INTEGER passed where the
**   program declared REAL arrives as REAL (converted as SQLite's CAST does):
**   csq_bpf_slot_put is the one place this is decided, on both sides.
**   TEXT and BLOB bytes are reached through helpers, bounded by the length:
**   csq_byte(i, off) and csq_find(i, needle, n). A program never holds a
**   pointer to them, so it cannot read past them.
**
** HELPERS (u64 arguments and result; REAL values as IEEE-754 bits)
**    1 fadd(a, b)   2 fsub(a, b)   3 fmul(a, b)   4 fdiv(a, b)  (a / 0: NaN bits
**      stay what IEEE gives: inf or NaN)
**    5 fcmp(a, b)   -1, 0, 1 as int64 (a < b, =, >), 2 if either is NaN
**    6 fsqrt(a)  7 fsin(a)  8 fcos(a)  9 fabs(a)
**   10 fromint(i)   the int64 i as REAL bits
**   11 toint(a)     REAL a truncated toward zero to int64 (saturated; NaN 0)
**   12 byte(i, off) byte off of TEXT/BLOB argument i, or -1 past its end or
**      when argument i is not TEXT/BLOB
**   13 find(i, needle, n) first offset of the n (1..8) low-order bytes of
**      needle (little-endian) in TEXT/BLOB argument i, or -1
**   14 fail(code)   fail the query: the program found its input broken
**   An argument index i at or past the number of arguments, or n outside
**   1..8, is a fault: the query fails with an error naming the program.
**
** THE CALL DESCRIPTOR (the BLOB constant k0 of a CSQ_OP_BPF term)
**     0  u32 magic     CSQ_BPF_MAGIC ("CSQE")
**     4  u16 nArg      1..CSQ_BPF_MAX_ARGS
**     6  u16 nIns      instructions, 1..CSQ_BPF_MAX_INS
**     8  nArg x u32    argument j: bits 15:0 the source, bit 16 set = the
**                      source is a constant index, clear = an input slot;
**                      bits 27:24 the declared type (CSQ_BPF_DECL_*);
**                      other bits 0
**     then zero bytes up to a multiple of 8, then nIns x 8 bytes of code.
**   So its length is 8 + ((4*nArg + 7) & ~7) + 8*nIns exactly.
*/
#ifndef CSQ_DEVICE_BPF_H
#define CSQ_DEVICE_BPF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "device/format/value.h"
#include "device/format/vec.h"

#define CSQ_BPF_MAGIC    0x45515343u /* "CSQE" */
#define CSQ_BPF_MAX_ARGS 16
#define CSQ_BPF_MAX_INS  4096
#define CSQ_BPF_MAX_OBJ  (1u << 20)
#define CSQ_BPF_SLOT     16

/* Types in byte 8 of a slot. */
#define CSQ_BPF_NULL 0
#define CSQ_BPF_INT  1
#define CSQ_BPF_REAL 2
#define CSQ_BPF_TEXT 3
#define CSQ_BPF_BLOB 4

/* Declared argument types (csq_bpf_load's list). */
#define CSQ_BPF_DECL_ANY  0
#define CSQ_BPF_DECL_INT  1
#define CSQ_BPF_DECL_REAL 2
#define CSQ_BPF_DECL_TEXT 3
#define CSQ_BPF_DECL_BLOB 4

/* Helper ids. */
#define CSQ_BPF_H_FADD    1
#define CSQ_BPF_H_FSUB    2
#define CSQ_BPF_H_FMUL    3
#define CSQ_BPF_H_FDIV    4
#define CSQ_BPF_H_FCMP    5
#define CSQ_BPF_H_FSQRT   6
#define CSQ_BPF_H_FSIN    7
#define CSQ_BPF_H_FCOS    8
#define CSQ_BPF_H_FABS    9
#define CSQ_BPF_H_FROMINT 10
#define CSQ_BPF_H_TOINT   11
#define CSQ_BPF_H_BYTE    12
#define CSQ_BPF_H_FIND    13
#define CSQ_BPF_H_FAIL    14
#define CSQ_BPF_H_MAX     14

#define CSQ_BPF_ARG_CONST (1u << 16)

/* A parsed call descriptor: a view into its bytes. */
typedef struct csq_bpf_call {
  int nArg;
  uint16_t aSrc[CSQ_BPF_MAX_ARGS];  /* input slot or constant index */
  uint8_t aConst[CSQ_BPF_MAX_ARGS]; /* 1: aSrc is a constant index */
  uint8_t aDecl[CSQ_BPF_MAX_ARGS];  /* CSQ_BPF_DECL_* */
  const uint8_t *aIns;              /* nIns x 8 bytes (inside the descriptor) */
  uint32_t nIns;
} csq_bpf_call;

/* The instructions of object p[0..n): an ELF object's "csq" or ".text"
** section, or raw instructions. *ppIns points into p. 0, or -EINVAL with
** the reason in zErr (never reads outside p[0..n)). */
int csq_bpf_code(const uint8_t *p, size_t n, const uint8_t **ppIns, uint32_t *pnIns, char *zErr,
                 size_t nErr);

/* csq's own checks of nIns instructions (WHAT A PROGRAM MAY DO, all but the
** verifier's part). 0 or -EINVAL with the reason. */
int csq_bpf_check(const uint8_t *aIns, uint32_t nIns, char *zErr, size_t nErr);

/* Parse and check a call descriptor p[0..n) (sources against nIn input
** slots and nConst constants; then csq_bpf_check). 0 or -EINVAL. */
int csq_bpf_call_parse(const uint8_t *p, size_t n, int nIn, int nConst, csq_bpf_call *pOut,
                       char *zErr, size_t nErr);

/* Write a call descriptor of nArg arguments (aArg: source words as in the
** format) over nIns instructions into a malloc'd buffer *pp of *pn bytes.
** 0, -EINVAL or -ENOMEM. */
int csq_bpf_call_build(int nArg, const uint32_t *aArg, const uint8_t *aIns, uint32_t nIns,
                       uint8_t **pp, size_t *pn);

/* The declared type named z[0..n) (INTEGER, INT, REAL, TEXT, BLOB, ANY; any
** case), or -1. */
int csq_bpf_decl_parse(const char *z, size_t n);

/* What a CSQ_FAULT_BPF fault carries (program.h, EBPF TERMS): the kind in
** bits 15:8 (the DEV_BPF_FAULT_* numbers: 1 a helper's argument index out
** of range, 2 csq_fail, 3 csq_find's needle length) and csq_fail's code in
** bits 63:16, its low 48 bits. */
#define CSQ_BPF_FAULT_ARG    1
#define CSQ_BPF_FAULT_FAIL   2
#define CSQ_BPF_FAULT_FIND   3
#define CSQ_FAULT_BPF_REASON 11 /* program.h's CSQ_FAULT_BPF */
static inline uint64_t csq_bpf_fault_reason(unsigned kind, int64_t code) {
  uint64_t r = CSQ_FAULT_BPF_REASON | (uint64_t)(kind & 0xFF) << 8;
  if (kind == CSQ_BPF_FAULT_FAIL) r |= ((uint64_t)code & 0xFFFFFFFFFFFFull) << 16;
  return r;
}

/* The sentence for eBPF fault reason r in z[0..n), naming program zName
** ("an eBPF program" when NULL: the device does not know names). The one
** text of every eBPF fault, on the host and from the device. */
void csq_bpf_fault_text(uint64_t r, const char *zName, char *z, size_t n);

/* Slot s (16 bytes) for value v passed where decl is declared; the bytes of
** a TEXT/BLOB stay where v has them. */
static inline void csq_bpf_slot_put(uint8_t *s, const csq_value *v, int decl) {
  uint64_t u = 0;
  uint8_t t = CSQ_BPF_NULL;
  memset(s, 0, CSQ_BPF_SLOT);
  switch (v->cls) {
  case CSQ_INT:
    if (decl == CSQ_BPF_DECL_REAL) {
      double r = (double)v->i;
      memcpy(&u, &r, 8);
      t = CSQ_BPF_REAL;
    } else {
      u = (uint64_t)v->i;
      t = CSQ_BPF_INT;
    }
    break;
  case CSQ_REAL:
    memcpy(&u, &v->r, 8);
    t = CSQ_BPF_REAL;
    break;
  case CSQ_TEXT:
  case CSQ_BLOB:
    u = v->n;
    t = v->cls == CSQ_TEXT ? CSQ_BPF_TEXT : CSQ_BPF_BLOB;
    break;
  default:
    break;
  }
  memcpy(s, &u, 8); /* little-endian hosts only, as the rest of csq */
  s[8] = t;
}

#endif /* CSQ_DEVICE_BPF_H */
