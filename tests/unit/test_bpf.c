/*
** tests/unit/test_bpf.c - user eBPF programs below SQL: the object reader and
** csq's checks (device/format/bpf.c), the rte_bpf verifier and runtime
** (device/engine/bpf_rt.c) and an eBPF term inside a csq program.
**
** Each refusal is checked one by one, with a word of its reason in the
** message: a loop, an access outside the arguments, a helper csq does not
** export, too many instructions, bytes that are no object, an object
** without code, relocations, a store into the arguments, a map load,
** unreachable code, an object for another machine. Programs are assembled
** here instruction by instruction, so the test needs no clang; then the
** helpers, faults, JIT against the interpreter, and the program verifier's
** view of an eBPF term.
*/
#include "tests/unit/helpers.h"
#include "device/engine/bpf_rt.h"
#include "device/engine/ptype.h"
#include "device/format/bpf.h"
#include "device/format/le.h"
#include "device/host/scan.h"
#include "device/store/store.h"
#include "ext/csq_bpf.h"

_Static_assert(CSQ_H_FADD == CSQ_BPF_H_FADD && CSQ_H_FCMP == CSQ_BPF_H_FCMP &&
                   CSQ_H_TOINT == CSQ_BPF_H_TOINT && CSQ_H_BYTE == CSQ_BPF_H_BYTE &&
                   CSQ_H_FIND == CSQ_BPF_H_FIND && CSQ_H_FAIL == CSQ_BPF_H_FAIL &&
                   CSQ_H_FAIL == CSQ_BPF_H_MAX,
               "ext/csq_bpf.h and device/format/bpf.h agree on the helpers");
_Static_assert(CSQ_T_INTEGER == CSQ_BPF_INT && CSQ_T_REAL == CSQ_BPF_REAL &&
                   CSQ_T_TEXT == CSQ_BPF_TEXT && CSQ_T_BLOB == CSQ_BPF_BLOB &&
                   CSQ_T_NULL == CSQ_BPF_NULL && sizeof(struct csq_arg) == CSQ_BPF_SLOT,
               "ext/csq_bpf.h and device/format/bpf.h agree on the slots");

/* ---- an assembler of a few instructions ---- */

typedef struct prog {
  uint8_t a[8 * 5000];
  uint32_t n;
} prog;

static void I(prog *p, uint8_t op, int dst, int src, int16_t off, int32_t imm) {
  uint8_t *q = p->a + 8 * p->n++;
  q[0] = op;
  q[1] = (uint8_t)((src << 4) | dst);
  csq_put_le16(q + 2, (uint16_t)off);
  csq_put_le32(q + 4, (uint32_t)imm);
}
#define MOVI(d, i)     I(p, 0xb7, d, 0, 0, i)
#define MOV(d, s)      I(p, 0xbf, d, s, 0, 0)
#define LDXDW(d, s, o) I(p, 0x79, d, s, o, 0)
#define LDXB(d, s, o)  I(p, 0x71, d, s, o, 0)
#define STXDW(d, s, o) I(p, 0x7b, d, s, o, 0)
#define ADDI(d, i)     I(p, 0x07, d, 0, 0, i)
#define MODI(d, i)     I(p, 0x97, d, 0, 0, i)
#define JEQI(d, i, o)  I(p, 0x15, d, 0, o, i)
#define JLTI(d, i, o)  I(p, 0xa5, d, 0, o, i)
#define JA(o)          I(p, 0x05, 0, 0, o, 0)
#define CALL(h)        I(p, 0x85, 0, 0, 0, h)
#define EXIT()         I(p, 0x95, 0, 0, 0, 0)

/* Everything from the bytes to a loaded program; 0 or -EINVAL with zErr. */
static int load_bytes(const uint8_t *a, size_t n, int nArg, dev_bpf **pp, char *zErr, size_t nErr) {
  const uint8_t *aIns;
  uint32_t nIns;
  *pp = NULL;
  int rc = csq_bpf_code(a, n, &aIns, &nIns, zErr, nErr);
  if (rc == 0) rc = csq_bpf_check(aIns, nIns, zErr, nErr);
  if (rc == 0) rc = dev_bpf_load(aIns, nIns, nArg, pp, zErr, nErr);
  return rc;
}

/* The refusal of p (nArg arguments) must name zWord. */
static void refused(const char *zWhat, const uint8_t *a, size_t n, int nArg, const char *zWord) {
  char zErr[600] = "";
  dev_bpf *b = NULL;
  int rc = load_bytes(a, n, nArg, &b, zErr, sizeof(zErr));
  CHECK(rc == -EINVAL, "%s: accepted (rc %d)", zWhat, rc);
  CHECK(strstr(zErr, zWord) != NULL, "%s: message '%s' lacks '%s'", zWhat, zErr, zWord);
  dev_bpf_free(b);
}

/* ---- a minimal ELF64 object: NULL, .shstrtab, the code section, and a
** relocation section against it if bRel ---- */
static size_t make_elf(uint8_t *out, const char *zSec, const prog *p, int bRel, int machine) {
  const char zStr[] = "\0.shstrtab\0.rel.x\0";
  size_t nStr0 = sizeof(zStr) - 1;
  size_t oName = nStr0, nName = strlen(zSec) + 1;
  size_t oStr = 64, nStr = nStr0 + nName;
  size_t oCode = (oStr + nStr + 7) & ~(size_t)7, nCode = 8ull * p->n;
  size_t oRel = oCode + nCode, nRel = bRel ? 16 : 0;
  size_t oSh = (oRel + nRel + 7) & ~(size_t)7;
  int nSh = bRel ? 4 : 3;
  memset(out, 0, oSh + 64ull * nSh);
  memcpy(out, "\177ELF", 4);
  out[4] = 2; /* 64-bit */
  out[5] = 1; /* little-endian */
  out[6] = 1;
  csq_put_le16(out + 16, 1); /* ET_REL */
  csq_put_le16(out + 18, (uint16_t)machine);
  csq_put_le32(out + 20, 1);
  csq_put_le64(out + 40, oSh);
  csq_put_le16(out + 52, 64);
  csq_put_le16(out + 58, 64);
  csq_put_le16(out + 60, (uint16_t)nSh);
  csq_put_le16(out + 62, 1);
  memcpy(out + oStr, zStr, nStr0);
  memcpy(out + oStr + oName, zSec, nName);
  memcpy(out + oCode, p->a, nCode);
  uint8_t *sh = out + oSh;
  /* 1: .shstrtab */
  csq_put_le32(sh + 64 + 0, 1);
  csq_put_le32(sh + 64 + 4, 3);
  csq_put_le64(sh + 64 + 24, oStr);
  csq_put_le64(sh + 64 + 32, nStr);
  /* 2: the code */
  csq_put_le32(sh + 128 + 0, (uint32_t)oName);
  csq_put_le32(sh + 128 + 4, 1);
  csq_put_le64(sh + 128 + 24, oCode);
  csq_put_le64(sh + 128 + 32, nCode);
  if (bRel) { /* 3: .rel.x, applying to section 2 */
    csq_put_le32(sh + 192 + 0, 11);
    csq_put_le32(sh + 192 + 4, 9);
    csq_put_le64(sh + 192 + 24, oRel);
    csq_put_le64(sh + 192 + 32, nRel);
    csq_put_le32(sh + 192 + 44, 2);
  }
  return oSh + 64ull * nSh;
}

/* x % 7 == 0 over argument 0 */
static void prog_mod7(prog *p) {
  p->n = 0;
  LDXDW(0, 1, 0);
  MODI(0, 7);
  JEQI(0, 0, 2);
  MOVI(0, 0);
  EXIT();
  MOVI(0, 1);
  EXIT();
}

static void test_refusals(void) {
  static prog pp;
  prog *p = &pp;
  static uint8_t elf[1 << 16];

  /* a loop: r0 counts to 10 */
  p->n = 0;
  MOVI(0, 0);
  ADDI(0, 1);
  JLTI(0, 10, -2);
  EXIT();
  refused("loop", p->a, 8 * p->n, 1, "loop");

  /* an access outside the arguments: slot 1 of a one-argument program */
  p->n = 0;
  LDXDW(0, 1, 16);
  EXIT();
  refused("out of bounds", p->a, 8 * p->n, 1, "boundary");

  /* a helper csq does not export */
  p->n = 0;
  CALL(99);
  EXIT();
  refused("bad helper", p->a, 8 * p->n, 1, "helper 99");
  p->n = 0;
  CALL(0);
  EXIT();
  refused("helper 0", p->a, 8 * p->n, 1, "helper 0");

  /* too many instructions */
  p->n = 0;
  for (int i = 0; i < CSQ_BPF_MAX_INS; i++) MOVI(0, i);
  EXIT();
  refused("too big", p->a, 8 * p->n, 1, "at most 4096");

  /* bytes that are no program */
  refused("not ELF", (const uint8_t *)"not an object", 13, 1, "not an ELF object");
  refused("empty", (const uint8_t *)"", 0, 1, "empty");
  uint8_t trunc[40];
  memset(trunc, 0, sizeof(trunc));
  memcpy(trunc, "\177ELF", 4);
  refused("cut ELF", trunc, sizeof(trunc), 1, "cut short");

  /* an ELF object with code in neither "csq" nor ".text" */
  prog_mod7(p);
  size_t n = make_elf(elf, "other", p, 0, 247);
  refused("missing section", elf, n, 1, "no section \"csq\"");
  n = make_elf(elf, "csq", p, 1, 247);
  refused("relocations", elf, n, 1, "relocations");
  n = make_elf(elf, "csq", p, 0, 62);
  refused("machine", elf, n, 1, "not eBPF");

  /* a store into the arguments */
  p->n = 0;
  MOVI(0, 0);
  STXDW(1, 0, 0);
  EXIT();
  refused("store", p->a, 8 * p->n, 1, "read-only");

  /* a map load (lddw with src_reg 1) */
  p->n = 0;
  I(p, 0x18, 0, 1, 0, 1);
  I(p, 0, 0, 0, 0, 0);
  EXIT();
  refused("map", p->a, 8 * p->n, 1, "map");

  /* unreachable code */
  p->n = 0;
  MOVI(0, 0);
  EXIT();
  MOVI(0, 1);
  EXIT();
  refused("unreachable", p->a, 8 * p->n, 1, "unreachable");

  /* malformed instructions, refused before the eBPF verifier sees them
  ** (tests/fuzz/regress/bpf/ holds one that crashed it) */
  p->n = 0;
  MOVI(0, 0);
  refused("no exit", p->a, 8 * p->n, 1, "does not end with exit");
  p->n = 0;
  JA(5);
  EXIT();
  refused("jump out", p->a, 8 * p->n, 1, "jumps outside");
  p->n = 0;
  I(p, 0x18, 0, 0, 0, 1);
  refused("half lddw", p->a, 8 * p->n, 1, "malformed 64-bit load");
  p->n = 0;
  I(p, 0xff, 0, 0, 0, 0);
  EXIT();
  refused("opcode", p->a, 8 * p->n, 1, "unknown opcode 0xff");
  p->n = 0;
  I(p, 0x16, 0, 0, 0, 0); /* JMP32 jeq */
  EXIT();
  refused("jmp32", p->a, 8 * p->n, 1, "32-bit jumps");
  p->n = 0;
  MOVI(0, 1);
  I(p, 0x37, 0, 0, 0, 0); /* r0 /= 0 */
  EXIT();
  refused("div 0", p->a, 8 * p->n, 1, "divides by the constant 0");

  /* and the accepted forms: raw, ELF ".text", ELF "csq" */
  char zErr[600];
  dev_bpf *b = NULL;
  prog_mod7(p);
  CHECK(load_bytes(p->a, 8 * p->n, 1, &b, zErr, sizeof(zErr)) == 0, "raw: %s", zErr);
  dev_bpf_free(b);
  n = make_elf(elf, ".text", p, 0, 247);
  CHECK(load_bytes(elf, n, 1, &b, zErr, sizeof(zErr)) == 0, ".text: %s", zErr);
  dev_bpf_free(b);
  n = make_elf(elf, "csq", p, 0, 247);
  CHECK(load_bytes(elf, n, 1, &b, zErr, sizeof(zErr)) == 0, "csq: %s", zErr);
  dev_bpf_free(b);
}

/* Run b over values aV[0..nArg) (declared aDecl); *pFault the fault. */
static uint64_t run_vals(const dev_bpf *b, const csq_value *aV, const uint8_t *aDecl, int nArg,
                         uint64_t *pFault) {
  uint8_t aBlock[CSQ_BPF_SLOT * CSQ_BPF_MAX_ARGS];
  const uint8_t *apZ[CSQ_BPF_MAX_ARGS];
  uint32_t aN[CSQ_BPF_MAX_ARGS];
  for (int j = 0; j < nArg; j++) {
    csq_bpf_slot_put(aBlock + CSQ_BPF_SLOT * j, &aV[j], aDecl[j]);
    apZ[j] = aV[j].z;
    aN[j] = aV[j].n;
  }
  dev_bpf_frame f;
  memset(&f, 0, sizeof(f));
  f.nArg = nArg;
  f.aBlock = aBlock;
  f.apZ = apZ;
  f.aN = aN;
  dev_bpf_frame_set(&f);
  uint64_t r = dev_bpf_run(b, &f);
  dev_bpf_frame_set(NULL);
  *pFault = f.fault;
  return r;
}

static csq_value vint(int64_t i) {
  csq_value v = {CSQ_INT, i, 0, NULL, 0};
  return v;
}
static csq_value vreal(double r) {
  csq_value v = {CSQ_REAL, 0, r, NULL, 0};
  return v;
}
static csq_value vtext(const char *z) {
  csq_value v = {CSQ_TEXT, 0, 0, (const uint8_t *)z, (uint32_t)strlen(z)};
  return v;
}

static void test_runtime(void) {
  static prog pp;
  prog *p = &pp;
  char zErr[600];
  uint64_t fault;
  dev_bpf *b = NULL, *bi = NULL;
  uint8_t aDecl[4] = {0, 0, 0, 0};

  /* JIT and interpreter agree on x % 7 == 0 */
  prog_mod7(p);
  CHECK(load_bytes(p->a, 8 * p->n, 1, &b, zErr, sizeof(zErr)) == 0, "%s", zErr);
  setenv("CSQ_BPF_JIT", "0", 1);
  CHECK(load_bytes(p->a, 8 * p->n, 1, &bi, zErr, sizeof(zErr)) == 0, "%s", zErr);
  unsetenv("CSQ_BPF_JIT");
  CHECK(bi && !dev_bpf_jitted(bi));
  printf("jit: %s\n", b && dev_bpf_jitted(b) ? "yes" : "no (interpreted)");
  for (int i = 0; b && bi && i < 2000; i++) {
    csq_value v = vint((int64_t)rnd());
    uint64_t f1, f2;
    uint64_t r1 = run_vals(b, &v, aDecl, 1, &f1), r2 = run_vals(bi, &v, aDecl, 1, &f2);
    CHECK(r1 == r2 && r1 == ((uint64_t)v.i % 7 == 0) && !f1 && !f2, "x %lld", (long long)v.i);
  }
  dev_bpf_free(b);
  dev_bpf_free(bi);

  /* REAL helpers: a + b compared with 1.0 (fcmp), INTEGER converted for REAL */
  p->n = 0;
  MOV(6, 1);
  LDXDW(1, 6, 0);
  LDXDW(2, 6, 16);
  CALL(CSQ_BPF_H_FADD);
  MOV(1, 0);
  LDXDW(2, 6, 32);
  CALL(CSQ_BPF_H_FCMP);
  EXIT();
  CHECK(load_bytes(p->a, 8 * p->n, 3, &b, zErr, sizeof(zErr)) == 0, "%s", zErr);
  uint8_t aD3[3] = {CSQ_BPF_DECL_REAL, CSQ_BPF_DECL_REAL, CSQ_BPF_DECL_REAL};
  csq_value a3[3] = {vreal(0.25), vint(1), vreal(1.0)};
  CHECK_RC(run_vals(b, a3, aD3, 3, &fault), 1); /* 1.25 > 1.0 */
  a3[1] = vreal(0.75);
  CHECK_RC(run_vals(b, a3, aD3, 3, &fault), 0);
  a3[1] = vreal(0.0);
  CHECK_RC(run_vals(b, a3, aD3, 3, &fault), (uint64_t)-1);
  a3[1] = vreal(NAN);
  CHECK_RC(run_vals(b, a3, aD3, 3, &fault), 2);
  dev_bpf_free(b);

  /* the type byte and TEXT bytes: byte(0, 1) of a TEXT, -1 past its end */
  p->n = 0;
  MOVI(1, 0);
  MOVI(2, 1);
  CALL(CSQ_BPF_H_BYTE);
  EXIT();
  CHECK(load_bytes(p->a, 8 * p->n, 1, &b, zErr, sizeof(zErr)) == 0, "%s", zErr);
  csq_value t = vtext("abc");
  CHECK_RC(run_vals(b, &t, aDecl, 1, &fault), 'b');
  t = vtext("a");
  CHECK_RC(run_vals(b, &t, aDecl, 1, &fault), (uint64_t)-1);
  t = vint(5);
  CHECK_RC(run_vals(b, &t, aDecl, 1, &fault), (uint64_t)-1);
  CHECK(fault == 0);
  dev_bpf_free(b);

  /* faults: an argument index past the arguments, and csq_fail */
  p->n = 0;
  MOVI(1, 3);
  MOVI(2, 0);
  CALL(CSQ_BPF_H_BYTE);
  EXIT();
  CHECK(load_bytes(p->a, 8 * p->n, 1, &b, zErr, sizeof(zErr)) == 0, "%s", zErr);
  t = vtext("abc");
  run_vals(b, &t, aDecl, 1, &fault);
  CHECK_RC(fault, DEV_BPF_FAULT_ARG);
  dev_bpf_free(b);
  p->n = 0;
  MOVI(1, 42);
  CALL(CSQ_BPF_H_FAIL);
  EXIT();
  CHECK(load_bytes(p->a, 8 * p->n, 1, &b, zErr, sizeof(zErr)) == 0, "%s", zErr);
  run_vals(b, &t, aDecl, 1, &fault);
  CHECK_RC(fault, DEV_BPF_FAULT_FAIL);
  dev_bpf_free(b);

  /* a fault's reason as the device reports it (program.h, EBPF TERMS) */
  char zF[200];
  csq_fault_text(CSQ_FAULT_BPF | (2u << 8) | (77u << 16), zF, sizeof(zF));
  CHECK(strstr(zF, "csq_fail(77)") != NULL, "'%s'", zF);
  /* csq_fail's code crosses as its low 48 bits, shown sign-extended */
  static const int64_t aCode[] = {0, -1, 77, -123456789012ll, (1ll << 47) - 1, -(1ll << 47)};
  for (size_t i = 0; i < sizeof(aCode) / sizeof(aCode[0]); i++) {
    char zWant[64];
    csq_fault_text(csq_bpf_fault_reason(CSQ_BPF_FAULT_FAIL, aCode[i]), zF, sizeof(zF));
    snprintf(zWant, sizeof(zWant), "csq_fail(%lld)", (long long)aCode[i]);
    CHECK(strstr(zF, zWant) != NULL, "'%s' for %s", zF, zWant);
  }
  csq_fault_text(CSQ_FAULT_BPF | (1u << 8), zF, sizeof(zF));
  CHECK(strstr(zF, "argument index") != NULL, "'%s'", zF);
  csq_fault_text(CSQ_FAULT_CHECKSUM, zF, sizeof(zF));
  CHECK(strcmp(zF, csq_fault_name(CSQ_FAULT_CHECKSUM)) == 0, "'%s'", zF);

  /* slots: NULL is type 0 with value 0 */
  uint8_t s[16];
  csq_value vn = {CSQ_NULL, 0, 0, NULL, 0};
  csq_bpf_slot_put(s, &vn, CSQ_BPF_DECL_REAL);
  CHECK(s[8] == CSQ_BPF_NULL && csq_le64(s) == 0);
}

/* An eBPF term inside a csq program: accepted with a good descriptor, and
** the device's Load refuses one the eBPF verifier refuses, with its reason. */
static void test_term(void) {
  static prog pp;
  prog *p = &pp;
  char zErr[600];
  for (int bad = 0; bad < 2; bad++) {
    if (bad) {
      p->n = 0;
      LDXDW(0, 1, 16); /* outside the one slot */
      EXIT();
    } else {
      prog_mod7(p);
    }
    csq_pb *b = csq_pb_new();
    int slot = csq_pb_input(b, 1);
    csq_pb_output(b, slot);
    uint32_t w = (uint32_t)slot;
    uint8_t *pCall = NULL;
    size_t nCall = 0;
    CHECK(csq_bpf_call_build(1, &w, p->a, p->n, &pCall, &nCall) == 0);
    int k = csq_pb_const_bytes(b, CSQ_BLOB, pCall, (uint32_t)nCall);
    free(pCall);
    csq_pb_clause(b);
    CHECK(csq_pb_term(b, CSQ_OP_BPF, 0, slot, k, 0, 0) == 0);
    uint8_t *pProg = NULL;
    size_t nProg = 0;
    CHECK(csq_pb_finish(b, &pProg, &nProg) == 0);
    csq_pb_free(b);
    csq_prog pr;
    CHECK(csq_prog_parse(pProg, nProg, &pr, zErr, sizeof(zErr)) == 0, "parse: %s", zErr);
    csq_prog_clear(&pr);
    void *pc = NULL;
    const dev_ptype *pt = dev_ptype_find(CSQ_PTYPE_CSQ);
    int rc = pt->xVerify(pProg, nProg, &pc, zErr, sizeof(zErr));
    if (bad)
      CHECK(rc != 0 && strstr(zErr, "boundary"), "Load of a bad eBPF term: rc %d '%s'", rc, zErr);
    else
      CHECK(rc == 0, "Load: %s", zErr);
    if (pc) pt->xFree(pc);
    /* a damaged descriptor: the program verifier names it */
    pProg[nProg - 1] ^= 0xFF;
    rc = csq_prog_parse(pProg, nProg, &pr, zErr, sizeof(zErr));
    if (rc == 0) csq_prog_clear(&pr);
    free(pProg);
  }
}

/* The flags a BPF term may carry: NOT (the rows where it returns 0), and no
** other. */
static void test_term_flags(void) {
  static prog pp;
  prog_mod7(&pp);
  static const struct {
    int flags, bOk;
  } aCase[] = {{0, 1}, {CSQ_TF_NOT, 1}, {CSQ_TF_NOCASE, 0}, {CSQ_TF_NOT | CSQ_TF_AFF_NUMERIC, 0}};
  for (size_t i = 0; i < sizeof(aCase) / sizeof(aCase[0]); i++) {
    char zErr[600] = "";
    csq_pb *b = csq_pb_new();
    int slot = csq_pb_input(b, 1);
    csq_pb_output(b, slot);
    uint32_t w = (uint32_t)slot;
    uint8_t *pCall = NULL, *pProg = NULL;
    size_t nCall = 0, nProg = 0;
    CHECK(csq_bpf_call_build(1, &w, pp.a, pp.n, &pCall, &nCall) == 0);
    int k = csq_pb_const_bytes(b, CSQ_BLOB, pCall, (uint32_t)nCall);
    free(pCall);
    csq_pb_clause(b);
    csq_pb_term(b, CSQ_OP_BPF, aCase[i].flags, slot, k, 0, 0);
    int rc = csq_pb_finish(b, &pProg, &nProg);
    csq_pb_free(b);
    csq_prog pr;
    if (rc == 0) rc = csq_prog_parse(pProg, nProg, &pr, zErr, sizeof(zErr));
    if (rc == 0) csq_prog_clear(&pr);
    if (aCase[i].bOk)
      CHECK(rc == 0, "flags 0x%x refused: %s", aCase[i].flags, zErr);
    else
      CHECK(rc != 0, "flags 0x%x accepted", aCase[i].flags);
    free(pProg);
  }
}

/* ---- on a device: terms over run-length columns, faults, the cache ---- */

#define DRG   3                              /* row groups */
#define DROWS 4000                           /* rows each */
#define DFAIL 5555                           /* the row whose b makes prog_fail fail */
static const int64_t DCODE = -77000000000ll; /* wider than 32 bits, negative */

/* x % 7 == 0 over argument 0, but csq_fail(DCODE) when x == DFAIL */
static void prog_fail(prog *p) {
  p->n = 0;
  LDXDW(0, 1, 0);
  JEQI(0, DFAIL, 6); /* to the lddw */
  MODI(0, 7);
  JEQI(0, 0, 2);
  MOVI(0, 0);
  EXIT();
  MOVI(0, 1);
  EXIT();
  I(p, 0x18, 1, 0, 0, (int32_t)(uint32_t)(uint64_t)DCODE); /* lddw r1, DCODE */
  I(p, 0x00, 0, 0, 0, (int32_t)(uint32_t)((uint64_t)DCODE >> 32));
  CALL(CSQ_BPF_H_FAIL);
  MOVI(0, 0);
  EXIT();
}

/* Table "t": rowid, a = r / 64 (long runs: stored run-length encoded), b =
** r, over DRG row groups of DROWS rows. 0 or an error. */
static int dev_table(store *st, dev_queue *q) {
  char *zErr = NULL;
  store_txn *t;
  int rc = store_txn_begin(st, q, 1000, &t, &zErr);
  store_col aCol[2] = {{"a", "INTEGER", 0}, {"b", "INTEGER", 0}};
  if (rc == 0) rc = store_txn_create_table(t, "t", 2, aCol, &zErr);
  store_table *pTab = rc == 0 ? store_txn_table(t, "t") : NULL;
  csq_vec v[3];
  for (int c = 0; c < 3; c++) csq_vec_init(&v[c]);
  for (int g = 0; g < DRG && rc == 0; g++) {
    for (int c = 0; c < 3; c++) csq_vec_reset(&v[c]);
    int64_t r0 = store_txn_new_rowids(t, pTab, DROWS);
    for (int i = 0; i < DROWS; i++) {
      int64_t r = (int64_t)g * DROWS + i;
      csq_vec_push_int(&v[0], r0 + i);
      csq_vec_push_int(&v[1], r / 64);
      csq_vec_push_int(&v[2], r);
    }
    rc = store_txn_append(t, pTab, v, 0, DROWS, &zErr);
  }
  for (int c = 0; c < 3; c++) csq_vec_free(&v[c]);
  if (rc == 0)
    rc = store_txn_commit(t, &zErr);
  else if (t)
    store_txn_rollback(t);
  CHECK(rc == 0, "table: %s", zErr ? zErr : "");
  free(zErr);
  return rc;
}

/* How dev_prog calls its program: over column b instead of a; NOT of it. */
#define DEV_OVER_B 1
#define DEV_NOT    2

/* A program returning (a, b) where lo <= b < hi (when hi > lo) and the
** eBPF program p over column a (mode: DEV_*) is true. */
static uint8_t *dev_prog(const prog *p, int mode, int64_t lo, int64_t hi, size_t *pn) {
  csq_pb *b = csq_pb_new();
  int sA = csq_pb_input(b, 1), sB = csq_pb_input(b, 2);
  csq_pb_output(b, sA);
  csq_pb_output(b, sB);
  if (hi > lo) {
    csq_pb_clause(b);
    csq_pb_term(b, CSQ_OP_GE, 0, sB, csq_pb_const_int(b, lo), 0, 0);
    csq_pb_clause(b);
    csq_pb_term(b, CSQ_OP_LT, 0, sB, csq_pb_const_int(b, hi), 0, 0);
  }
  int slot = (mode & DEV_OVER_B) ? sB : sA;
  uint32_t w = (uint32_t)slot;
  uint8_t *pCall = NULL, *pProg = NULL;
  size_t nCall = 0;
  CHECK(csq_bpf_call_build(1, &w, p->a, p->n, &pCall, &nCall) == 0);
  int k = csq_pb_const_bytes(b, CSQ_BLOB, pCall, (uint32_t)nCall);
  free(pCall);
  csq_pb_clause(b);
  csq_pb_term(b, CSQ_OP_BPF, (mode & DEV_NOT) ? CSQ_TF_NOT : 0, slot, k, 0, 0);
  CHECK(csq_pb_finish(b, &pProg, pn) == 0);
  csq_pb_free(b);
  return pProg;
}

/* Scan with program pProg; the rows' (a, b) checked against the same
** filter in C. 0, or the error of dev_scan_next (*pzErr set). */
static int dev_check(dev_queue *q, store *st, const store_table *pTab, const uint8_t *pProg,
                     size_t nProg, int mode, int64_t lo, int64_t hi, char **pzErr) {
  dev_scan *s = NULL;
  int rc = dev_scan_open(q, st, pTab, pTab->apRg, pTab->nRg, pProg, nProg, &s, pzErr);
  CHECK(rc == 0, "open: %s", *pzErr ? *pzErr : "");
  if (rc) return rc;
  csq_vec v[2];
  csq_vec_init(&v[0]);
  csq_vec_init(&v[1]);
  int64_t nGot = 0, nBad = 0, nWant = 0;
  for (;;) {
    uint32_t nr = 0;
    rc = dev_scan_next(s, v, &nr, pzErr);
    if (rc || nr == 0) break;
    for (uint32_t i = 0; i < nr; i++) {
      int64_t bv = v[1].aVal[i].i, x = (mode & DEV_OVER_B) ? bv : bv / 64;
      nBad += v[0].aCls[i] != CSQ_INT || v[1].aCls[i] != CSQ_INT || v[0].aVal[i].i != bv / 64 ||
              (hi > lo && (bv < lo || bv >= hi)) || (x % 7 == 0) == !!(mode & DEV_NOT);
      nGot++;
    }
  }
  for (int64_t r = 0; r < (int64_t)DRG * DROWS; r++)
    nWant += (hi <= lo || (r >= lo && r < hi)) &&
             (((mode & DEV_OVER_B) ? r : r / 64) % 7 == 0) != !!(mode & DEV_NOT);
  if (rc == 0)
    CHECK(nBad == 0 && nGot == nWant, "b in [%lld, %lld): %lld rows, want %lld, %lld wrong",
          (long long)lo, (long long)hi, (long long)nGot, (long long)nWant, (long long)nBad);
  dev_scan_close(s);
  csq_vec_free(&v[0]);
  csq_vec_free(&v[1]);
  return rc;
}

static void test_device(void) {
  static prog pp;
  prog *p = &pp;
  char *zErr = NULL;
  dev_options o;
  dev_options_default(&o);
  dev_device *d = NULL, *d2 = NULL;
  dev_queue *q = NULL, *q2 = NULL;
  store *st = NULL;
  store_snap *snap = NULL;
  if (dev_open(":memory:", &o, &d, &zErr) || dev_queue_open(d, &q) ||
      store_open(d, q, 1, &st, &zErr) || dev_table(st, q) || store_snapshot(st, q, &snap, &zErr)) {
    CHECK(0, "device: %s", zErr ? zErr : "?");
    goto done;
  }
  const store_table *pTab = store_snap_table(snap, "t");
  prog_fail(p);
  /* the term over the run-length column: alone (whole batches), then after
  ** a selective range (the selected rows' runs only), in and across
  ** batches and row groups */
  static const int64_t aRange[][2] = {{0, 0},       {100, 140},   {1000, 1030}, {3990, 4100},
                                      {4096, 4097}, {8000, 8400}, {0, 12000},   {11990, 12000}};
  for (size_t i = 0; i < sizeof(aRange) / sizeof(aRange[0]); i++) {
    size_t n;
    for (int mode = 0; mode <= DEV_NOT; mode += DEV_NOT) { /* the call, and NOT of it */
      uint8_t *pProg = dev_prog(p, mode, aRange[i][0], aRange[i][1], &n);
      CHECK_RC(dev_check(q, st, pTab, pProg, n, mode, aRange[i][0], aRange[i][1], &zErr), 0);
      free(zErr);
      zErr = NULL;
      free(pProg);
    }
  }
  /* a fault: the query fails with csq_fail's whole code, and the device
  ** serves the next query */
  size_t nF;
  uint8_t *pF = dev_prog(p, DEV_OVER_B, 0, 0, &nF);
  int rc = dev_check(q, st, pTab, pF, nF, DEV_OVER_B, 0, 0, &zErr);
  CHECK(rc != 0 && zErr && strstr(zErr, "csq_fail(-77000000000)"), "fault: rc %d '%s'", rc,
        zErr ? zErr : "");
  free(zErr);
  zErr = NULL;
  /* (another program: the conditions of a filter run in no fixed order, so
  ** prog_fail may see row DFAIL whatever range is AND-ed with it) */
  static prog pp7;
  prog_mod7(&pp7);
  uint8_t *pOk = dev_prog(&pp7, DEV_OVER_B, 0, DFAIL, &nF);
  rc = dev_check(q, st, pTab, pOk, nF, DEV_OVER_B, 0, DFAIL, &zErr);
  CHECK(rc == 0, "after the fault: %s", zErr ? zErr : "");
  free(zErr);
  zErr = NULL;
  /* the cache: a device keeps a program it was given (by its XXH3 id), so
  ** loading it again sends next to nothing; another device gets it whole */
  uint16_t pind;
  dev_stats *ps = dev_queue_stats(q);
  uint64_t f0 = ps->bytes_from_host;
  CHECK_RC(dev_prog_load(q, pOk, nF, &pind, &zErr), 0);
  uint64_t f1 = ps->bytes_from_host;
  CHECK_RC(dev_prog_load(q, pOk, nF, &pind, &zErr), 0);
  uint64_t f2 = ps->bytes_from_host;
  CHECK(f1 - f0 < nF && f2 - f1 < nF, "reloads sent %llu and %llu bytes of a %zu-byte program",
        (unsigned long long)(f1 - f0), (unsigned long long)(f2 - f1), nF);
  if (dev_open(":memory:", &o, &d2, &zErr) == 0 && dev_queue_open(d2, &q2) == 0) {
    uint64_t g0 = dev_queue_stats(q2)->bytes_from_host;
    CHECK_RC(dev_prog_load(q2, pOk, nF, &pind, &zErr), 0);
    CHECK(dev_queue_stats(q2)->bytes_from_host - g0 >= nF, "a second device got %llu bytes",
          (unsigned long long)(dev_queue_stats(q2)->bytes_from_host - g0));
  } else {
    CHECK(0, "second device: %s", zErr ? zErr : "?");
  }
  free(pF);
  free(pOk);
done:
  free(zErr);
  if (snap) store_snap_unref(snap);
  if (st) store_unref(st);
  if (q2) dev_queue_close(q2);
  if (d2) dev_unref(d2);
  if (q) dev_queue_close(q);
  if (d) dev_unref(d);
}

int main(void) {
  test_refusals();
  test_runtime();
  test_term();
  test_term_flags();
  test_device();
  return test_done("bpf");
}
