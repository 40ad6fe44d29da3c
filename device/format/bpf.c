/*
** device/format/bpf.c - a user's eBPF program as bytes: the code taken out of
** an ELF object, csq's own checks of the instructions, and the call
** descriptor a CSQ_OP_BPF term carries (device/format/bpf.h has the format
** and the rules). The eBPF verifier itself is DPDK's, run by
** device/engine/bpf_rt.c on what passes here.
*/
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "device/format/bpf.h"
#include "device/format/le.h"

__attribute__((format(printf, 3, 4))) static int berr(char *zErr, size_t nErr, const char *zFmt,
                                                      ...) {
  if (zErr && nErr) {
    va_list ap;
    va_start(ap, zFmt);
    vsnprintf(zErr, nErr, zFmt, ap);
    va_end(ap);
  }
  return -EINVAL;
}

/* ELF64 little-endian fields this file reads (elf.h names, our own offsets,
** so that every read is bounds-checked against the object's size). */
#define ELF_EM_BPF   247
#define ELF_SHT_REL  9
#define ELF_SHT_RELA 4
#define ELF_SHT_PROG 1
#define ELF_SHDR_SZ  64

int csq_bpf_code(const uint8_t *p, size_t n, const uint8_t **ppIns, uint32_t *pnIns, char *zErr,
                 size_t nErr) {
  *ppIns = NULL;
  *pnIns = 0;
  if (n == 0) return berr(zErr, nErr, "the program is empty");
  if (n > CSQ_BPF_MAX_OBJ)
    return berr(zErr, nErr, "the object is %zu bytes, csq takes at most %u", n, CSQ_BPF_MAX_OBJ);
  if (n < 4 || memcmp(p, "\177ELF", 4) != 0) {
    /* raw instructions */
    if (n % 8)
      return berr(zErr, nErr,
                  "not an ELF object, nor raw eBPF instructions (%zu bytes, not a multiple of 8)",
                  n);
    *ppIns = p;
    *pnIns = (uint32_t)(n / 8);
    return 0;
  }
  if (n < 64) return berr(zErr, nErr, "not an ELF object: header cut short (%zu bytes)", n);
  if (p[4] != 2 || p[5] != 1)
    return berr(zErr, nErr, "not a 64-bit little-endian ELF object (as clang -target bpf writes)");
  if (csq_le16(p + 18) != ELF_EM_BPF)
    return berr(zErr, nErr,
                "an ELF object for machine %u, not eBPF (compile with clang -target bpf)",
                csq_le16(p + 18));
  uint64_t shoff = csq_le64(p + 40);
  uint32_t shentsize = csq_le16(p + 58), shnum = csq_le16(p + 60), shstrndx = csq_le16(p + 62);
  if (shentsize != ELF_SHDR_SZ || shnum == 0 || shstrndx >= shnum || shoff > n ||
      (uint64_t)shnum * ELF_SHDR_SZ > n - shoff)
    return berr(zErr, nErr, "damaged ELF object: section headers outside the file");
  const uint8_t *sh = p + shoff;
  const uint8_t *str = sh + (uint64_t)shstrndx * ELF_SHDR_SZ;
  uint64_t strOff = csq_le64(str + 24), strSize = csq_le64(str + 32);
  if (strOff > n || strSize > n - strOff)
    return berr(zErr, nErr, "damaged ELF object: section names outside the file");
  int iCsq = -1, iText = -1;
  for (uint32_t i = 0; i < shnum; i++) {
    const uint8_t *s = sh + (uint64_t)i * ELF_SHDR_SZ;
    uint32_t nm = csq_le32(s);
    if (nm >= strSize) continue;
    const char *z = (const char *)p + strOff + nm;
    size_t nz = strnlen(z, strSize - nm);
    if (nz == 3 && memcmp(z, "csq", 3) == 0) iCsq = (int)i;
    if (nz == 5 && memcmp(z, ".text", 5) == 0) iText = (int)i;
  }
  int iSec = iCsq >= 0 ? iCsq : iText;
  if (iSec >= 0 && iCsq < 0) {
    /* an empty .text (code placed in other sections) is the same as none */
    if (csq_le64(sh + (uint64_t)iSec * ELF_SHDR_SZ + 32) == 0) iSec = -1;
  }
  if (iSec < 0)
    return berr(zErr, nErr, "the ELF object has no section \"csq\" and no code in \".text\"");
  const uint8_t *s = sh + (uint64_t)iSec * ELF_SHDR_SZ;
  const char *zSec = iSec == iCsq ? "csq" : ".text";
  uint64_t off = csq_le64(s + 24), sz = csq_le64(s + 32);
  if (csq_le32(s + 4) != ELF_SHT_PROG)
    return berr(zErr, nErr, "section \"%s\" holds no code", zSec);
  if (off > n || sz > n - off)
    return berr(zErr, nErr, "damaged ELF object: section \"%s\" outside the file", zSec);
  if (sz == 0 || sz % 8)
    return berr(zErr, nErr, "section \"%s\" is empty or not whole instructions", zSec);
  for (uint32_t i = 0; i < shnum; i++) {
    const uint8_t *r = sh + (uint64_t)i * ELF_SHDR_SZ;
    uint32_t type = csq_le32(r + 4);
    if ((type == ELF_SHT_REL || type == ELF_SHT_RELA) && csq_le32(r + 44) == (uint32_t)iSec &&
        csq_le64(r + 32) > 0)
      return berr(zErr, nErr,
                  "section \"%s\" has relocations: a csq program is one function that uses no "
                  "global data and calls only csq's helpers (mark other functions static inline)",
                  zSec);
  }
  *ppIns = p + off;
  *pnIns = (uint32_t)(sz / 8);
  return 0;
}

/* Is op an instruction csq accepts (an allowlist: the eBPF verifier
** underneath is not hardened against every malformed instruction, so csq
** hands it only well-formed ones)? Classes: ALU and ALU64 (no byte swap
** of an odd width), JMP (not JMP32: clang's default -mcpu emits none), LDX
** and ST / STX of 1, 2, 4 or 8 bytes, and lddw. */
static int op_known(uint8_t op) {
  uint8_t cls = op & 7, code = op & 0xF0;
  switch (cls) {
  case 4: /* ALU */
  case 7: /* ALU64 */
    return code <= 0xD0 && !(code == 0x80 && (op & 8)) && !(code == 0xD0 && cls == 7);
  case 5: /* JMP */
    if (code == 0x80 || code == 0x90 || code == 0x00) return (op & 8) == 0;
    return code <= 0xD0;
  case 1: /* LDX: MEM mode */
    return (op & 0xE0) == 0x60;
  case 2: /* ST */
  case 3: /* STX */
    return (op & 0xE0) == 0x60;
  default:
    return op == 0x18;
  }
}

int csq_bpf_check(const uint8_t *aIns, uint32_t nIns, char *zErr, size_t nErr) {
  if (nIns == 0) return berr(zErr, nErr, "the program has no instructions");
  if (nIns > CSQ_BPF_MAX_INS)
    return berr(zErr, nErr, "the program has %u instructions, csq takes at most %u", nIns,
                CSQ_BPF_MAX_INS);
  /* second halves of lddw: no jump may land on one */
  uint8_t aHalf[CSQ_BPF_MAX_INS];
  memset(aHalf, 0, nIns);
  for (uint32_t pc = 0; pc < nIns; pc++) {
    const uint8_t *q = aIns + 8ull * pc;
    uint8_t op = q[0], dst = q[1] & 0xF, src = q[1] >> 4, cls = op & 7;
    int16_t off = (int16_t)csq_le16(q + 2);
    int32_t imm = (int32_t)csq_le32(q + 4);
    if (op == 0x18) { /* lddw: two slots */
      if (src != 0)
        return berr(zErr, nErr,
                    "instruction %u loads a map or a pseudo value: csq programs have no maps", pc);
      const uint8_t *q2 = q + 8;
      if (pc + 1 >= nIns || q2[0] || q2[1] || csq_le16(q2 + 2) || dst > 9)
        return berr(zErr, nErr, "instruction %u: a malformed 64-bit load", pc);
      aHalf[++pc] = 1;
      continue;
    }
    if (cls == 0 /* BPF_LD */)
      return berr(zErr, nErr, "instruction %u (opcode 0x%02x): packet loads are not allowed", pc,
                  op);
    if (cls == 6)
      return berr(zErr, nErr,
                  "instruction %u uses 32-bit jumps, which csq's runtime lacks (compile with "
                  "-mcpu=v2 or lower)",
                  pc);
    if (!op_known(op)) return berr(zErr, nErr, "instruction %u: unknown opcode 0x%02x", pc, op);
    if (dst > 10 || src > 10)
      return berr(zErr, nErr, "instruction %u: no register r%u", pc, dst > 10 ? dst : src);
    if ((cls == 2 || cls == 3) && dst != 10)
      return berr(zErr, nErr,
                  "instruction %u writes memory through r%u: a program may write its stack (r10) "
                  "only, its arguments are read-only",
                  pc, dst);
    if ((cls == 4 || cls == 7) && dst == 10)
      return berr(zErr, nErr, "instruction %u changes r10, the frame pointer", pc);
    if ((cls == 4 || cls == 7) && !(op & 8)) {
      uint8_t code = op & 0xF0;
      if ((code == 0x30 || code == 0x90) && imm == 0)
        return berr(zErr, nErr, "instruction %u divides by the constant 0", pc);
      if ((code == 0x60 || code == 0x70 || code == 0xC0) &&
          (imm < 0 || imm >= (cls == 7 ? 64 : 32)))
        return berr(zErr, nErr, "instruction %u shifts by %d bits", pc, imm);
      if (code == 0xD0 && imm != 16 && imm != 32 && imm != 64)
        return berr(zErr, nErr, "instruction %u swaps %d bits", pc, imm);
    }
    if (cls == 5) {
      uint8_t code = op & 0xF0;
      if (code == 0x80) { /* call */
        if (src != 0)
          return berr(zErr, nErr,
                      "instruction %u calls a function of the program: csq programs are one "
                      "function (mark helpers static inline)",
                      pc);
        if (imm < 1 || imm > CSQ_BPF_H_MAX)
          return berr(zErr, nErr,
                      "instruction %u calls helper %d, which csq does not export (1..%d)", pc, imm,
                      CSQ_BPF_H_MAX);
      } else if (code != 0x90) { /* a jump */
        int64_t to = (int64_t)pc + 1 + off;
        if (to < 0 || to >= (int64_t)nIns)
          return berr(zErr, nErr, "instruction %u jumps outside the program", pc);
      }
    }
  }
  for (uint32_t pc = 0; pc < nIns; pc++) {
    const uint8_t *q = aIns + 8ull * pc;
    if (aHalf[pc] || (q[0] & 7) != 5 || (q[0] & 0xF0) == 0x80 || (q[0] & 0xF0) == 0x90) continue;
    int64_t to = (int64_t)pc + 1 + (int16_t)csq_le16(q + 2);
    if (aHalf[to]) return berr(zErr, nErr, "instruction %u jumps into a 64-bit load", pc);
  }
  uint8_t last = aIns[8ull * (nIns - 1)];
  if (aHalf[nIns - 1] || (last != 0x95 && last != 0x05))
    return berr(zErr, nErr, "the program does not end with exit (or a jump)");
  return 0;
}

int csq_bpf_call_parse(const uint8_t *p, size_t n, int nIn, int nConst, csq_bpf_call *pOut,
                       char *zErr, size_t nErr) {
  memset(pOut, 0, sizeof(*pOut));
  if (n < 8 || csq_le32(p) != CSQ_BPF_MAGIC)
    return berr(zErr, nErr, "eBPF call descriptor: bad magic");
  uint32_t nArg = csq_le16(p + 4), nIns = csq_le16(p + 6);
  if (nArg < 1 || nArg > CSQ_BPF_MAX_ARGS)
    return berr(zErr, nErr, "eBPF call descriptor: %u arguments (1..%d)", nArg, CSQ_BPF_MAX_ARGS);
  uint64_t oIns = 8 + ((4ull * nArg + 7) & ~7ull);
  if (n != oIns + 8ull * nIns)
    return berr(zErr, nErr, "eBPF call descriptor: %zu bytes, its counts say %llu", n,
                (unsigned long long)(oIns + 8ull * nIns));
  for (uint32_t j = 0; j < nArg; j++) {
    uint32_t w = csq_le32(p + 8 + 4 * j);
    uint32_t src = w & 0xFFFF, decl = (w >> 24) & 0xF;
    int bConst = (w & CSQ_BPF_ARG_CONST) != 0;
    if (w & 0xF0FE0000u) return berr(zErr, nErr, "eBPF argument %u: reserved bits set", j);
    if (decl > CSQ_BPF_DECL_BLOB)
      return berr(zErr, nErr, "eBPF argument %u: unknown type %u", j, decl);
    if (bConst ? (int)src >= nConst : (int)src >= nIn)
      return berr(zErr, nErr, "eBPF argument %u: %s %u out of range", j,
                  bConst ? "constant" : "input slot", src);
    pOut->aSrc[j] = (uint16_t)src;
    pOut->aConst[j] = (uint8_t)bConst;
    pOut->aDecl[j] = (uint8_t)decl;
  }
  for (uint64_t o = 8 + 4ull * nArg; o < oIns; o++)
    if (p[o]) return berr(zErr, nErr, "eBPF call descriptor: padding not zero");
  pOut->nArg = (int)nArg;
  pOut->aIns = p + oIns;
  pOut->nIns = nIns;
  return csq_bpf_check(pOut->aIns, nIns, zErr, nErr);
}

int csq_bpf_call_build(int nArg, const uint32_t *aArg, const uint8_t *aIns, uint32_t nIns,
                       uint8_t **pp, size_t *pn) {
  *pp = NULL;
  *pn = 0;
  if (nArg < 1 || nArg > CSQ_BPF_MAX_ARGS || nIns < 1 || nIns > CSQ_BPF_MAX_INS) return -EINVAL;
  size_t oIns = 8 + ((4u * (unsigned)nArg + 7) & ~7u), n = oIns + 8ull * nIns;
  uint8_t *p = calloc(1, n);
  if (!p) return -ENOMEM;
  csq_put_le32(p, CSQ_BPF_MAGIC);
  csq_put_le16(p + 4, (uint16_t)nArg);
  csq_put_le16(p + 6, (uint16_t)nIns);
  for (int j = 0; j < nArg; j++) csq_put_le32(p + 8 + 4 * j, aArg[j]);
  memcpy(p + oIns, aIns, 8ull * nIns);
  *pp = p;
  *pn = n;
  return 0;
}

int csq_bpf_decl_parse(const char *z, size_t n) {
  static const struct {
    const char *z;
    int t;
  } a[] = {{"INTEGER", CSQ_BPF_DECL_INT}, {"INT", CSQ_BPF_DECL_INT},   {"REAL", CSQ_BPF_DECL_REAL},
           {"TEXT", CSQ_BPF_DECL_TEXT},   {"BLOB", CSQ_BPF_DECL_BLOB}, {"ANY", CSQ_BPF_DECL_ANY}};
  for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++)
    if (strlen(a[i].z) == n && strncasecmp(a[i].z, z, n) == 0) return a[i].t;
  return -1;
}

void csq_bpf_fault_text(uint64_t r, const char *zName, char *z, size_t n) {
  char zWho[200];
  if (zName)
    snprintf(zWho, sizeof(zWho), "eBPF program %s", zName);
  else
    snprintf(zWho, sizeof(zWho), "an eBPF program");
  switch ((r >> 8) & 0xFF) {
  case CSQ_BPF_FAULT_ARG:
    snprintf(z, n, "%s gave a helper an argument index past its arguments", zWho);
    break;
  case CSQ_BPF_FAULT_FAIL: {
    /* the code's low 48 bits, sign-extended back */
    int64_t code = (int64_t)(r >> 16);
    if (code & (1ll << 47)) code -= 1ll << 48;
    snprintf(z, n, "%s failed: it called csq_fail(%lld)", zWho, (long long)code);
    break;
  }
  case CSQ_BPF_FAULT_FIND:
    snprintf(z, n, "%s called csq_find with a needle length outside 1..8", zWho);
    break;
  default:
    snprintf(z, n, "%s failed while running", zWho);
  }
}
