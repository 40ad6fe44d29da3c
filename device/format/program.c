/*
** device/format/program.c - csq device programs, the parts both sides share: the
** parser/verifier (the device runs it on Load Program, the host on the zone
** map check), the encoder the planner uses to build programs, and the zone
** map test that lets the host skip row groups. The byte format (version 1,
** and version 2 with its aggregation section) is documented in
** device/format/program.h; the executor is device/engine/exec_*.c, the host merge of grouped
** results device/host/agg.c.
*/
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack (csq_job_hash) */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "device/format/bloom.h"
#include "device/format/codemap.h"
#include "device/format/keymap.h"
#include "device/format/bpf.h"
#include "device/format/chunk.h"
#include "device/format/keyhash.h"
#include "device/format/le.h"
#include "device/format/program.h"

_Static_assert(CSQ_FAULT_BPF == CSQ_FAULT_BPF_REASON, "bpf.h restates the reason");

void csq_fault_text(uint64_t r, char *z, size_t n) {
  if ((r & 0xFF) == CSQ_FAULT_BPF && r != CSQ_FAULT_BPF)
    csq_bpf_fault_text(r, NULL, z, n);
  else
    snprintf(z, n, "%s", csq_fault_name(r));
}

const char *csq_fault_name(uint64_t r) {
  switch (r) {
  case CSQ_FAULT_BAD_RANGES:
    return "the command's memory ranges are missing or too small";
  case CSQ_FAULT_BAD_JOB:
    return "the job descriptor is malformed";
  case CSQ_FAULT_CHUNK_RANGE:
    return "a chunk lies outside the input area";
  case CSQ_FAULT_CHECKSUM:
    return "a column chunk is damaged (checksum mismatch)";
  case CSQ_FAULT_CORRUPT_CHUNK:
    return "a column chunk does not decode";
  case CSQ_FAULT_SHORT_CHUNK:
    return "a column chunk holds fewer values than the row group";
  case CSQ_FAULT_OUTPUT_FULL:
    return "the output area cannot hold one row";
  case CSQ_FAULT_NOMEM:
    return "the compute engine ran out of memory";
  case CSQ_FAULT_STALE_PROGRAM:
    return "the program slot holds another program";
  case CSQ_FAULT_NOT_NUMERIC:
    return "arithmetic or a sum met a TEXT or BLOB value (run the aggregate on the host)";
  case CSQ_FAULT_BPF:
    return "an eBPF program failed while running";
  case CSQ_FAULT_RANGE_STALE:
    return "the catalog on the media differs from the host's (run row group by row group)";
  case CSQ_FAULT_RANGE_FULL:
    return "the merged result outgrew the output area (run row group by row group)";
  default:
    return "unknown fault";
  }
}

uint64_t csq_prog_id(const uint8_t *p, size_t n) {
  return XXH3_64bits(p, n);
}

uint64_t csq_job_hash(const uint8_t *p, size_t n) {
  static const uint8_t aZero[8] = {0};
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  if (n <= 16) {
    XXH3_64bits_update(&st, p, n);
  } else {
    XXH3_64bits_update(&st, p, 16);
    XXH3_64bits_update(&st, aZero, n < 24 ? n - 16 : 8);
    if (n > 24) XXH3_64bits_update(&st, p + 24, n - 24);
  }
  return XXH3_64bits_digest(&st);
}

static int verr(char *zErr, size_t nErr, const char *zFmt, ...)
    __attribute__((format(printf, 3, 4)));
static int verr(char *zErr, size_t nErr, const char *zFmt, ...) {
  if (zErr && nErr) {
    va_list ap;
    va_start(ap, zFmt);
    vsnprintf(zErr, nErr, zFmt, ap);
    va_end(ap);
  }
  return -EINVAL;
}

void csq_prog_clear(csq_prog *p) {
  free(p->aClause);
  free(p->aTerm);
  free(p->aConst);
  free(p->aExpr);
  free(p->aCond);
  p->aClause = NULL;
  p->aTerm = NULL;
  p->aConst = NULL;
  p->aExpr = NULL;
  p->aCond = NULL;
  p->nClause = p->nTerm = p->nConst = 0;
  p->bAgg = p->nExpr = p->nKey = p->nAgg = p->nCond = 0;
}

static const char *op_name(int op) {
  static const char *az[] = {"?",    "EQ",    "NE",     "LT",      "LE",      "GT", "GE",
                             "IS",   "ISNOT", "ISNULL", "NOTNULL", "BETWEEN", "IN", "LIKE",
                             "GLOB", "BPF",   "BLOOM",  "COLCMP",  "KEYMAP"};
  return op >= 0 && op <= CSQ_OP_MAX ? az[op] : "?";
}

/* An eBPF term (EBPF TERMS in program.h): only a filter term, its call
** descriptor a BLOB constant that csq_bpf_call_parse accepts. */
static int bpf_term_check(const csq_pterm *t, uint32_t i, const char *zWhat, const csq_prog *pp,
                          char *zErr, size_t nErr) {
  char zWhy[200];
  csq_bpf_call call;
  if (strcmp(zWhat, "term") != 0)
    return verr(zErr, nErr, "%s %u (BPF): only filter terms may run eBPF programs", zWhat, i);
  if ((t->flags & ~CSQ_TF_NOT) || t->k1 || t->esc)
    return verr(zErr, nErr,
                "%s %u (BPF): flags other than NOT, second constant and escape must be 0", zWhat,
                i);
  if (t->k0 >= pp->nConst || pp->aConst[t->k0].cls != CSQ_BLOB)
    return verr(zErr, nErr, "%s %u (BPF): constant %u is not a BLOB", zWhat, i, t->k0);
  const csq_pconst *k = &pp->aConst[t->k0];
  if (csq_bpf_call_parse(k->z, k->len, pp->nIn, pp->nConst, &call, zWhy, sizeof(zWhy)))
    return verr(zErr, nErr, "%s %u (BPF): %s", zWhat, i, zWhy);
  return 0;
}

/* A join filter term (JOIN FILTERS in program.h): only a filter term, no
** flags but an affinity, its filter a BLOB constant of a size bloom.h allows. */
static int bloom_term_check(const csq_pterm *t, uint32_t i, const char *zWhat, const csq_prog *pp,
                            char *zErr, size_t nErr) {
  const char *zOp = op_name(t->op);
  if (strcmp(zWhat, "term") != 0)
    return verr(zErr, nErr, "%s %u (%s): only filter terms may be join filters", zWhat, i, zOp);
  if ((t->flags & ~CSQ_TF_AFF_MASK) || t->k1 || t->esc)
    return verr(zErr, nErr,
                "%s %u (%s): flags other than affinity, second constant and escape must be 0",
                zWhat, i, zOp);
  if (t->k0 >= pp->nConst || pp->aConst[t->k0].cls != CSQ_BLOB)
    return verr(zErr, nErr, "%s %u (%s): constant %u is not a BLOB", zWhat, i, zOp, t->k0);
  uint32_t n = pp->aConst[t->k0].len;
  if (t->op == CSQ_OP_KEYMAP && !csq_keymap_size_ok(n))
    return verr(zErr, nErr,
                "%s %u (KEYMAP): a bitmap of %u bytes (%u header bytes and 1 to %u bytes of bits "
                "expected)",
                zWhat, i, n, CSQ_KEYMAP_HDR, CSQ_KEYMAP_MAX_BYTES);
  if (t->op == CSQ_OP_BLOOM && !csq_bloom_size_ok(n))
    return verr(zErr, nErr,
                "%s %u (BLOOM): a filter of %u bytes (a power of two from %u to %u expected)",
                zWhat, i, n, CSQ_BLOOM_MIN_BYTES, CSQ_BLOOM_MAX_BYTES);
  return 0;
}

/* A column comparison (COLUMN COMPARISONS in program.h): the other input
** slot in k0, the comparison in k1, flags a collation and an affinity. */
static int colcmp_term_check(const csq_pterm *t, uint32_t i, const char *zWhat, const csq_prog *pp,
                             char *zErr, size_t nErr) {
  if (t->k0 >= (uint32_t)pp->nIn)
    return verr(zErr, nErr, "%s %u (COLCMP): second input slot %u out of range (%d inputs)", zWhat,
                i, t->k0, pp->nIn);
  if (t->k1 < CSQ_OP_EQ || t->k1 > CSQ_OP_ISNOT)
    return verr(zErr, nErr, "%s %u (COLCMP): comparison %u is not one of EQ..ISNOT", zWhat, i,
                t->k1);
  if (t->flags & ~(CSQ_TF_COLL_MASK | CSQ_TF_AFF_MASK))
    return verr(zErr, nErr, "%s %u (COLCMP): flags other than collation and affinity", zWhat, i);
  return 0;
}

/* Check one 16-byte term at q (the i-th of its list, named zWhat in
** messages) against the program's inputs and constants, and decode it into
** *t. 0 or -EINVAL with a message. */
static int term_check(const uint8_t *q, uint32_t i, const char *zWhat, csq_pterm *t,
                      const csq_prog *pp, char *zErr, size_t nErr) {
  uint32_t nIn = (uint32_t)pp->nIn, nConst = (uint32_t)pp->nConst;
  t->op = q[0];
  t->flags = q[1];
  t->slot = csq_le16(q + 2);
  t->k0 = csq_le16(q + 4);
  t->k1 = csq_le16(q + 6);
  t->esc = csq_le32(q + 8);
  const char *zOp = op_name(t->op);
  if (t->op == 0 || t->op > CSQ_OP_MAX)
    return verr(zErr, nErr, "%s %u: unknown opcode %u", zWhat, i, t->op);
  if (csq_le32(q + 12)) return verr(zErr, nErr, "%s %u: reserved field not zero", zWhat, i);
  if (t->flags & ~CSQ_TF_ALL)
    return verr(zErr, nErr, "%s %u (%s): unknown flags 0x%02x", zWhat, i, zOp, t->flags);
  if ((t->flags & CSQ_TF_COLL_MASK) == CSQ_TF_COLL_MASK ||
      (t->flags & CSQ_TF_AFF_MASK) == CSQ_TF_AFF_MASK)
    return verr(zErr, nErr, "%s %u (%s): bad collation or affinity in flags 0x%02x", zWhat, i, zOp,
                t->flags);
  if (t->slot >= nIn)
    return verr(zErr, nErr, "%s %u (%s): input slot %u out of range (%u inputs)", zWhat, i, zOp,
                t->slot, nIn);
  int bNot = t->op == CSQ_OP_BETWEEN || t->op == CSQ_OP_IN || t->op == CSQ_OP_LIKE ||
             t->op == CSQ_OP_GLOB || t->op == CSQ_OP_BPF;
  if ((t->flags & CSQ_TF_NOT) && !bNot)
    return verr(zErr, nErr, "%s %u (%s): NOT flag not allowed", zWhat, i, zOp);
  if ((t->flags & CSQ_TF_BLOB_TEXT) && t->op != CSQ_OP_LIKE && t->op != CSQ_OP_GLOB)
    return verr(zErr, nErr, "%s %u (%s): blob-as-text flag only applies to LIKE/GLOB", zWhat, i,
                zOp);
  if ((t->flags & CSQ_TF_LIKE_CASE) && t->op != CSQ_OP_LIKE)
    return verr(zErr, nErr, "%s %u (%s): case flag only applies to LIKE", zWhat, i, zOp);
  if (t->esc && t->op != CSQ_OP_LIKE)
    return verr(zErr, nErr, "%s %u (%s): ESCAPE only applies to LIKE", zWhat, i, zOp);
  if (t->esc > 0x10FFFF)
    return verr(zErr, nErr, "%s %u (%s): ESCAPE code point %u invalid", zWhat, i, zOp, t->esc);
  if (t->op == CSQ_OP_BPF) return bpf_term_check(t, i, zWhat, pp, zErr, nErr);
  if (t->op == CSQ_OP_BLOOM || t->op == CSQ_OP_KEYMAP)
    return bloom_term_check(t, i, zWhat, pp, zErr, nErr);
  if (t->op == CSQ_OP_COLCMP) return colcmp_term_check(t, i, zWhat, pp, zErr, nErr);
  uint32_t need0 = 1, need1 = 0; /* constants used: k0 always, k1 as index */
  switch (t->op) {
  case CSQ_OP_ISNULL:
  case CSQ_OP_NOTNULL:
    need0 = 0;
    break;
  case CSQ_OP_BETWEEN:
    need1 = 1;
    break;
  case CSQ_OP_IN:
    if (t->k1 == 0 || (uint32_t)t->k0 + t->k1 > nConst)
      return verr(zErr, nErr, "%s %u (IN): constants [%u, +%u) out of range (%u constants)", zWhat,
                  i, t->k0, t->k1, nConst);
    break;
  default:
    break;
  }
  if (!need0 && t->k0)
    return verr(zErr, nErr, "%s %u (%s): constant index must be 0", zWhat, i, zOp);
  if (need0 && t->k0 >= nConst)
    return verr(zErr, nErr, "%s %u (%s): constant %u out of range (%u constants)", zWhat, i, zOp,
                t->k0, nConst);
  if (need1 && t->k1 >= nConst)
    return verr(zErr, nErr, "%s %u (%s): constant %u out of range (%u constants)", zWhat, i, zOp,
                t->k1, nConst);
  if (!need1 && t->op != CSQ_OP_IN && t->k1)
    return verr(zErr, nErr, "%s %u (%s): second constant must be 0", zWhat, i, zOp);
  if ((t->op == CSQ_OP_LIKE || t->op == CSQ_OP_GLOB) && pp->aConst[t->k0].cls != CSQ_TEXT &&
      pp->aConst[t->k0].cls != CSQ_NULL)
    return verr(zErr, nErr, "%s %u (%s): pattern must be TEXT or NULL", zWhat, i, zOp);
  if ((t->op == CSQ_OP_LIKE || t->op == CSQ_OP_GLOB) &&
      pp->aConst[t->k0].len > CSQ_PROG_MAX_PATTERN)
    return verr(zErr, nErr, "%s %u (%s): pattern of %u bytes (limit %u)", zWhat, i, zOp,
                pp->aConst[t->k0].len, CSQ_PROG_MAX_PATTERN);
  return 0;
}

/* Bytes of an aggregation section with these counts. */
static uint64_t agg_bytes(uint32_t nExpr, uint32_t nKey, uint32_t nAgg, uint32_t nCond) {
  return CSQ_AGG_HDR + 8ull * nExpr + ((4ull * (nKey + nAgg) + 7) & ~7ull) +
         (uint64_t)CSQ_PROG_TERM_SZ * nCond;
}

/* Parse and check the aggregation section at p[off..n) into pOut (whose
** inputs and constants are already parsed). 0 or -EINVAL / -ENOMEM. */
static size_t topn_bytes(uint32_t nKey) {
  return CSQ_TOPN_HDR + ((4 * (size_t)nKey + 7) & ~(size_t)7);
}

/* The top-N section at p[off..n) (the rest of the program). */
static int topn_parse(const uint8_t *p, size_t n, size_t off, csq_prog *pOut, char *zErr,
                      size_t nErr) {
  if (n - off < CSQ_TOPN_HDR) return verr(zErr, nErr, "top-N section truncated");
  const uint8_t *h = p + off;
  uint32_t nTop = csq_le32(h), nKey = csq_le16(h + 4);
  if (csq_le16(h + 6)) return verr(zErr, nErr, "top-N section: reserved field not zero");
  if (nTop < 1 || nTop > CSQ_TOPN_MAX)
    return verr(zErr, nErr, "top-N: %u rows (1 to %d)", nTop, CSQ_TOPN_MAX);
  if (nKey < 1 || nKey > CSQ_TOPN_MAX_KEYS)
    return verr(zErr, nErr, "top-N: %u keys (1 to %d)", nKey, CSQ_TOPN_MAX_KEYS);
  if (topn_bytes(nKey) != n - off)
    return verr(zErr, nErr, "top-N section of %zu bytes, %u keys need %zu", n - off, nKey,
                topn_bytes(nKey));
  for (uint32_t i = 0; i < nKey; i++) {
    const uint8_t *k = h + CSQ_TOPN_HDR + 4 * i;
    uint32_t slot = csq_le16(k);
    if (slot >= (uint32_t)pOut->nIn)
      return verr(zErr, nErr, "top-N key %u: input slot %u out of range", i, slot);
    if ((k[2] & ~CSQ_TOPN_DESC) || k[3]) return verr(zErr, nErr, "top-N key %u: bad flags", i);
    pOut->aTopSlot[i] = (uint16_t)slot;
    pOut->aTopDesc[i] = k[2] & CSQ_TOPN_DESC;
  }
  for (size_t j = CSQ_TOPN_HDR + 4 * (size_t)nKey; j < n - off; j++)
    if (h[j]) return verr(zErr, nErr, "top-N section: padding not zero");
  pOut->nTop = nTop;
  pOut->nTopKey = (int)nKey;
  return 0;
}

static int agg_parse(const uint8_t *p, size_t n, size_t off, csq_prog *pOut, char *zErr,
                     size_t nErr) {
  if (n - off < CSQ_AGG_HDR) return verr(zErr, nErr, "aggregation section truncated");
  const uint8_t *h = p + off;
  uint32_t nExpr = csq_le16(h), nKey = csq_le16(h + 2), nAgg = csq_le16(h + 4),
           nCond = csq_le16(h + 6);
  if (csq_le64(h + 8)) return verr(zErr, nErr, "aggregation section: reserved field not zero");
  if (nExpr > CSQ_AGG_MAX_EXPR)
    return verr(zErr, nErr, "aggregation: %u expressions (limit %d)", nExpr, CSQ_AGG_MAX_EXPR);
  if (nKey > CSQ_AGG_MAX_KEYS)
    return verr(zErr, nErr, "aggregation: %u group keys (limit %d)", nKey, CSQ_AGG_MAX_KEYS);
  if (nAgg > CSQ_AGG_MAX_AGGS)
    return verr(zErr, nErr, "aggregation: %u aggregates (limit %d)", nAgg, CSQ_AGG_MAX_AGGS);
  if (nCond > CSQ_AGG_MAX_CONDS)
    return verr(zErr, nErr, "aggregation: %u condition terms (limit %d)", nCond, CSQ_AGG_MAX_CONDS);
  if (nKey + nAgg == 0) return verr(zErr, nErr, "aggregation: no group key and no aggregate");
  if (agg_bytes(nExpr, nKey, nAgg, nCond) != n - off)
    return verr(zErr, nErr, "aggregation section of %zu bytes, its counts need %llu", n - off,
                (unsigned long long)agg_bytes(nExpr, nKey, nAgg, nCond));
  if (pOut->nOut) return verr(zErr, nErr, "aggregation: a grouped program has no outputs");
  pOut->aExpr = malloc(sizeof(csq_pexpr) * (nExpr ? nExpr : 1));
  pOut->aCond = malloc(sizeof(csq_pterm) * (nCond ? nCond : 1));
  if (!pOut->aExpr || !pOut->aCond) return -ENOMEM;
  pOut->bAgg = 1;
  pOut->nExpr = (int)nExpr;
  pOut->nKey = (int)nKey;
  pOut->nAgg = (int)nAgg;
  pOut->nCond = (int)nCond;
  const uint8_t *q = h + CSQ_AGG_HDR;
  for (uint32_t i = 0; i < nExpr; i++, q += 8) {
    csq_pexpr *e = &pOut->aExpr[i];
    e->op = q[0];
    e->a = csq_le16(q + 2);
    e->b = csq_le16(q + 4);
    e->c = csq_le16(q + 6);
    if (q[1]) return verr(zErr, nErr, "expression %u: flags not zero", i);
    int nArg = 0; /* operands that are instructions */
    switch (e->op) {
    case CSQ_EX_COL:
      if (e->a >= (uint32_t)pOut->nIn)
        return verr(zErr, nErr, "expression %u (COL): input slot %u out of range (%d inputs)", i,
                    e->a, pOut->nIn);
      break;
    case CSQ_EX_CONST:
      if (e->a >= (uint32_t)pOut->nConst)
        return verr(zErr, nErr, "expression %u (CONST): constant %u out of range (%d constants)", i,
                    e->a, pOut->nConst);
      break;
    case CSQ_EX_ADD:
    case CSQ_EX_SUB:
    case CSQ_EX_MUL:
    case CSQ_EX_DIV:
      nArg = 2;
      break;
    case CSQ_EX_NEG:
      nArg = 1;
      break;
    case CSQ_EX_BPF: {
      char zWhy[200];
      csq_bpf_call call;
      if (e->a >= (uint32_t)pOut->nConst || pOut->aConst[e->a].cls != CSQ_BLOB)
        return verr(zErr, nErr, "expression %u (BPF): constant %u is not a BLOB", i, e->a);
      const csq_pconst *k = &pOut->aConst[e->a];
      if (csq_bpf_call_parse(k->z, k->len, pOut->nIn, pOut->nConst, &call, zWhy, sizeof(zWhy)))
        return verr(zErr, nErr, "expression %u (BPF): %s", i, zWhy);
      break;
    }
    case CSQ_EX_MAP:
      nArg = 1;
      if (e->b >= (uint32_t)pOut->nConst || pOut->aConst[e->b].cls != CSQ_BLOB ||
          !csq_codemap_size_ok(pOut->aConst[e->b].len))
        return verr(zErr, nErr, "expression %u (MAP): constant %u is not a key code map", i, e->b);
      break;
    case CSQ_EX_CASE:
      if (e->a >= nCond)
        return verr(zErr, nErr, "expression %u (CASE): condition %u out of range (%u conditions)",
                    i, e->a, nCond);
      if (e->b >= i || e->c >= i)
        return verr(zErr, nErr, "expression %u (CASE): branch is not an earlier instruction", i);
      break;
    default:
      return verr(zErr, nErr, "expression %u: unknown operator %u", i, e->op);
    }
    if (nArg >= 1 && e->a >= i)
      return verr(zErr, nErr, "expression %u: operand %u is not an earlier instruction", i, e->a);
    if (nArg == 2 && e->b >= i)
      return verr(zErr, nErr, "expression %u: operand %u is not an earlier instruction", i, e->b);
    if ((e->op != CSQ_EX_CASE && e->op != CSQ_EX_MAP && nArg < 2 && e->b) ||
        (e->op != CSQ_EX_CASE && e->c))
      return verr(zErr, nErr, "expression %u: unused operand not zero", i);
  }
  int nCol = (int)nKey;
  for (uint32_t i = 0; i < nKey; i++, q += 4) {
    pOut->aKey[i] = csq_le16(q);
    if (csq_le16(q + 2)) return verr(zErr, nErr, "group key %u: flags not zero", i);
    if (pOut->aKey[i] >= nExpr)
      return verr(zErr, nErr, "group key %u: expression %u out of range (%u expressions)", i,
                  pOut->aKey[i], nExpr);
  }
  for (uint32_t i = 0; i < nAgg; i++, q += 4) {
    csq_pagg *a = &pOut->aAgg[i];
    a->fn = q[0];
    a->flags = q[1];
    a->expr = csq_le16(q + 2);
    if (a->fn == 0 || a->fn > CSQ_AGG_FN_MAX)
      return verr(zErr, nErr, "aggregate %u: unknown function %u", i, a->fn);
    if (a->fn == CSQ_AGG_COUNT_STAR) {
      if (a->expr) return verr(zErr, nErr, "aggregate %u (COUNT(*)): expression must be 0", i);
    } else if (a->expr >= nExpr) {
      return verr(zErr, nErr, "aggregate %u: expression %u out of range (%u expressions)", i,
                  a->expr, nExpr);
    }
    int bColl = a->fn == CSQ_AGG_MIN || a->fn == CSQ_AGG_MAX;
    if ((a->flags & ~(bColl ? CSQ_TF_COLL_MASK : 0)) ||
        (a->flags & CSQ_TF_COLL_MASK) == CSQ_TF_COLL_MASK)
      return verr(zErr, nErr, "aggregate %u: bad flags 0x%02x", i, a->flags);
    nCol += csq_agg_state_cols(a->fn);
  }
  for (uint32_t j = 4 * (nKey + nAgg); j % 8; j++, q++)
    if (*q) return verr(zErr, nErr, "aggregation section: padding not zero");
  for (uint32_t i = 0; i < nCond; i++, q += CSQ_PROG_TERM_SZ) {
    int rc = term_check(q, i, "condition term", &pOut->aCond[i], pOut, zErr, nErr);
    if (rc) return rc;
  }
  pOut->nResCol = nCol;
  return 0;
}

/* The verifier. Every count is bounded before it is multiplied, every offset
** checked against n before it is read, so no input can make it read outside
** p[0..n) or allocate more than the limits allow. */
int csq_prog_parse(const uint8_t *p, size_t n, csq_prog *pOut, char *zErr, size_t nErr) {
  memset(pOut, 0, sizeof(*pOut));
  if (!p || n < CSQ_PROG_HDR)
    return verr(zErr, nErr, "program of %zu bytes is shorter than its header", n);
  if (n > CSQ_PROG_MAX_BYTES)
    return verr(zErr, nErr, "program of %zu bytes exceeds the limit of %u", n, CSQ_PROG_MAX_BYTES);
  if (csq_le32(p) != CSQ_PROG_MAGIC) return verr(zErr, nErr, "bad magic (not a csq program)");
  uint32_t version = csq_le16(p + 4), pflags = csq_le16(p + 6);
  if (version != CSQ_PROG_VERSION && version != CSQ_PROG_VERSION_AGG)
    return verr(zErr, nErr, "unsupported program version %u", version);
  if ((version == CSQ_PROG_VERSION && pflags) ||
      (pflags & ~(uint32_t)(CSQ_PF_AGG | CSQ_PF_ROWNUM | CSQ_PF_TOPN)) || csq_le16(p + 22) != 0 ||
      csq_le32(p + 28) != 0)
    return verr(zErr, nErr, "reserved header fields are not zero");
  if ((pflags & CSQ_PF_AGG) && (pflags & CSQ_PF_ROWNUM))
    return verr(zErr, nErr, "row numbers are for programs without aggregation");
  if ((pflags & CSQ_PF_TOPN) && (pflags & (CSQ_PF_AGG | CSQ_PF_ROWNUM)))
    return verr(zErr, nErr, "a top-N goes with neither aggregation nor row numbers");
  int bAggFlag = (pflags & CSQ_PF_AGG) != 0;
  int bTopFlag = (pflags & CSQ_PF_TOPN) != 0;
  uint32_t nTotal = csq_le32(p + 8);
  uint32_t nIn = csq_le16(p + 12), nOut = csq_le16(p + 14), nClause = csq_le16(p + 16);
  uint32_t nTerm = csq_le16(p + 18), nConst = csq_le16(p + 20), nHeap = csq_le32(p + 24);
  if (nTotal != n) return verr(zErr, nErr, "header says %u bytes, program has %zu", nTotal, n);
  if (nIn > CSQ_PROG_MAX_IN) return verr(zErr, nErr, "%u inputs (limit %d)", nIn, CSQ_PROG_MAX_IN);
  if (nOut > CSQ_PROG_MAX_OUT)
    return verr(zErr, nErr, "%u outputs (limit %d)", nOut, CSQ_PROG_MAX_OUT);
  if (nTerm > CSQ_PROG_MAX_TERMS)
    return verr(zErr, nErr, "%u terms (limit %d)", nTerm, CSQ_PROG_MAX_TERMS);
  if (nClause > nTerm) return verr(zErr, nErr, "%u clauses for %u terms", nClause, nTerm);
  if (nConst > CSQ_PROG_MAX_CONSTS)
    return verr(zErr, nErr, "%u constants (limit %d)", nConst, CSQ_PROG_MAX_CONSTS);
  if (nHeap > CSQ_PROG_MAX_HEAP)
    return verr(zErr, nErr, "constant heap of %u bytes (limit %u)", nHeap, CSQ_PROG_MAX_HEAP);
  uint64_t want = CSQ_PROG_HDR + 4ull * (nIn + nOut + nClause) +
                  (uint64_t)CSQ_PROG_TERM_SZ * nTerm + (uint64_t)CSQ_PROG_CONST_SZ * nConst +
                  ((nHeap + 7ull) & ~7ull);
  size_t aggOff = (size_t)want;
  if (bAggFlag || bTopFlag ? want > n : want != n)
    return verr(zErr, nErr, "sections add up to %llu bytes, program has %zu",
                (unsigned long long)want, n);
  const uint8_t *q = p + CSQ_PROG_HDR;
  pOut->nTotal = nTotal;
  pOut->bRowNum = (pflags & CSQ_PF_ROWNUM) != 0;
  pOut->nIn = (int)nIn;
  pOut->nOut = (int)nOut;
  for (uint32_t i = 0; i < nIn; i++, q += 4) {
    uint32_t c = csq_le32(q);
    if (c > 0xFFFF) return verr(zErr, nErr, "input %u: chunk index %u out of range", i, c);
    for (uint32_t j = 0; j < i; j++)
      if (pOut->aIn[j] == c) return verr(zErr, nErr, "input %u: chunk %u listed twice", i, c);
    pOut->aIn[i] = (uint16_t)c;
  }
  for (uint32_t i = 0; i < nOut; i++, q += 4) {
    uint32_t s = csq_le32(q);
    if (s >= nIn)
      return verr(zErr, nErr, "output %u: input slot %u out of range (%u inputs)", i, s, nIn);
    pOut->aOut[i] = (uint16_t)s;
  }
  int rc = -ENOMEM;
  pOut->aClause = malloc(sizeof(uint16_t) * (nClause ? nClause : 1));
  pOut->aTerm = malloc(sizeof(csq_pterm) * (nTerm ? nTerm : 1));
  pOut->aConst = malloc(sizeof(csq_pconst) * (nConst ? nConst : 1));
  if (!pOut->aClause || !pOut->aTerm || !pOut->aConst) goto fail;
  pOut->nClause = (int)nClause;
  pOut->nTerm = (int)nTerm;
  pOut->nConst = (int)nConst;
  uint32_t sum = 0;
  for (uint32_t i = 0; i < nClause; i++, q += 4) {
    uint32_t c = csq_le32(q);
    if (c == 0 || c > nTerm) {
      rc = verr(zErr, nErr, "clause %u has %u terms", i, c);
      goto fail;
    }
    sum += c;
    pOut->aClause[i] = (uint16_t)c;
  }
  if (sum != nTerm) {
    rc = verr(zErr, nErr, "clauses hold %u terms, header says %u", sum, nTerm);
    goto fail;
  }
  const uint8_t *pTerms = q;
  q += (size_t)CSQ_PROG_TERM_SZ * nTerm;
  const uint8_t *pHeap = q + (size_t)CSQ_PROG_CONST_SZ * nConst;
  for (uint32_t i = 0; i < nConst; i++, q += CSQ_PROG_CONST_SZ) {
    csq_pconst *k = &pOut->aConst[i];
    memset(k, 0, sizeof(*k));
    k->cls = q[0];
    k->len = csq_le32(q + 4);
    uint64_t v = csq_le64(q + 8);
    if (q[1] || q[2] || q[3]) {
      rc = verr(zErr, nErr, "constant %u: reserved bytes not zero", i);
      goto fail;
    }
    switch (k->cls) {
    case CSQ_INT:
      k->i = (int64_t)v;
      break;
    case CSQ_REAL:
      memcpy(&k->r, &v, 8);
      if (isnan(k->r)) {
        rc = verr(zErr, nErr, "constant %u: REAL is NaN", i);
        goto fail;
      }
      break;
    case CSQ_TEXT:
    case CSQ_BLOB:
      if (v > nHeap || k->len > nHeap - v) {
        rc = verr(zErr, nErr, "constant %u: bytes [%llu, +%u) outside the heap of %u", i,
                  (unsigned long long)v, k->len, nHeap);
        goto fail;
      }
      k->z = pHeap + v;
      break;
    case CSQ_NULL:
      if (v) {
        rc = verr(zErr, nErr, "constant %u: NULL with a value", i);
        goto fail;
      }
      break;
    default:
      rc = verr(zErr, nErr, "constant %u: unknown class %u", i, k->cls);
      goto fail;
    }
    if (k->cls != CSQ_TEXT && k->cls != CSQ_BLOB && k->len) {
      rc = verr(zErr, nErr, "constant %u: length on a non TEXT/BLOB value", i);
      goto fail;
    }
  }
  for (uint32_t j = nHeap; j < ((nHeap + 7u) & ~7u); j++)
    if (pHeap[j]) {
      rc = verr(zErr, nErr, "heap padding byte %u not zero", j);
      goto fail;
    }
  q = pTerms;
  for (uint32_t i = 0; i < nTerm; i++, q += CSQ_PROG_TERM_SZ) {
    rc = term_check(q, i, "term", &pOut->aTerm[i], pOut, zErr, nErr);
    if (rc) goto fail;
  }
  if (bAggFlag) {
    rc = agg_parse(p, n, aggOff, pOut, zErr, nErr);
    if (rc) goto fail;
  } else {
    pOut->nResCol = pOut->nOut;
  }
  if (bTopFlag) {
    rc = topn_parse(p, n, aggOff, pOut, zErr, nErr);
    if (rc) goto fail;
  }
  return 0;
fail:
  csq_prog_clear(pOut);
  return rc;
}

/* ---- encoder ---- */

struct csq_pb {
  int rc;
  uint32_t aIn[CSQ_PROG_MAX_IN];
  uint32_t aOut[CSQ_PROG_MAX_OUT];
  int nIn, nOut;
  uint32_t aClause[CSQ_PROG_MAX_TERMS];
  int nClause;
  uint8_t aTerm[CSQ_PROG_MAX_TERMS][CSQ_PROG_TERM_SZ];
  int nTerm;
  uint8_t *aConst; /* nConst x 16 */
  int nConst, nConstAlloc;
  uint8_t *aHeap;
  uint32_t nHeap, nHeapAlloc;
  /* aggregation section */
  uint8_t aExpr[CSQ_AGG_MAX_EXPR][8];
  int nExpr;
  uint16_t aKey[CSQ_AGG_MAX_KEYS];
  int nKey;
  uint8_t aAgg[CSQ_AGG_MAX_AGGS][4];
  int nAgg;
  uint8_t aCond[CSQ_AGG_MAX_CONDS][CSQ_PROG_TERM_SZ];
  int nCond;
  int bRowNum;
  uint32_t nTop;
  int nTopKey;
  uint8_t aTopKey[CSQ_TOPN_MAX_KEYS][4];
};

void csq_pb_rownums(csq_pb *b) {
  b->bRowNum = 1;
}

csq_pb *csq_pb_new(void) {
  return calloc(1, sizeof(csq_pb));
}

void csq_pb_free(csq_pb *b) {
  if (!b) return;
  free(b->aConst);
  free(b->aHeap);
  free(b);
}

csq_pb *csq_pb_copy(const csq_pb *b) {
  csq_pb *c = malloc(sizeof(*c));
  if (!c) return NULL;
  memcpy(c, b, sizeof(*c));
  c->aConst = b->nConstAlloc ? malloc((size_t)b->nConstAlloc * CSQ_PROG_CONST_SZ) : NULL;
  c->aHeap = b->nHeapAlloc ? malloc(b->nHeapAlloc) : NULL;
  if ((b->nConstAlloc && !c->aConst) || (b->nHeapAlloc && !c->aHeap)) {
    csq_pb_free(c);
    return NULL;
  }
  if (b->nConst) memcpy(c->aConst, b->aConst, (size_t)b->nConst * CSQ_PROG_CONST_SZ);
  if (b->nHeap) memcpy(c->aHeap, b->aHeap, b->nHeap);
  return c;
}

void csq_pb_drop_outputs(csq_pb *b) {
  b->nOut = 0;
}

static int pb_fail(csq_pb *b, int rc) {
  if (!b->rc) b->rc = rc;
  return rc;
}

int csq_pb_topn(csq_pb *b, uint32_t nTop) {
  if (b->rc) return b->rc;
  if (nTop < 1 || nTop > CSQ_TOPN_MAX) return pb_fail(b, -EINVAL);
  b->nTop = nTop;
  return 0;
}

int csq_pb_topn_key(csq_pb *b, int slot, int bDesc) {
  if (b->rc) return b->rc;
  if (b->nTopKey >= CSQ_TOPN_MAX_KEYS || slot < 0 || slot >= b->nIn) return pb_fail(b, -EINVAL);
  uint8_t *k = b->aTopKey[b->nTopKey++];
  csq_put_le16(k, (uint16_t)slot);
  k[2] = bDesc ? CSQ_TOPN_DESC : 0;
  k[3] = 0;
  return 0;
}

int csq_pb_input(csq_pb *b, uint32_t iChunk) {
  if (b->rc) return b->rc;
  if (iChunk > 0xFFFF) return pb_fail(b, -EINVAL);
  for (int i = 0; i < b->nIn; i++)
    if (b->aIn[i] == iChunk) return i;
  if (b->nIn >= CSQ_PROG_MAX_IN) return pb_fail(b, -EINVAL);
  b->aIn[b->nIn] = iChunk;
  return b->nIn++;
}

int csq_pb_output(csq_pb *b, int slot) {
  if (b->rc) return b->rc;
  if (slot < 0 || slot >= b->nIn || b->nOut >= CSQ_PROG_MAX_OUT) return pb_fail(b, -EINVAL);
  b->aOut[b->nOut++] = (uint32_t)slot;
  return 0;
}

static int pb_const(csq_pb *b, int cls, uint64_t v, const void *p, uint32_t n) {
  if (b->rc) return b->rc;
  if (b->nConst >= CSQ_PROG_MAX_CONSTS) return pb_fail(b, -EINVAL);
  if (b->nConst == b->nConstAlloc) {
    int nNew = b->nConstAlloc ? b->nConstAlloc * 2 : 16;
    uint8_t *a = realloc(b->aConst, (size_t)nNew * CSQ_PROG_CONST_SZ);
    if (!a) return pb_fail(b, -ENOMEM);
    b->aConst = a;
    b->nConstAlloc = nNew;
  }
  if (cls == CSQ_TEXT || cls == CSQ_BLOB) {
    if (n > CSQ_PROG_MAX_HEAP - b->nHeap) return pb_fail(b, -EINVAL);
    if (b->nHeap + n > b->nHeapAlloc) {
      uint32_t nNew = (b->nHeap + n) * 2 + 64;
      uint8_t *a = realloc(b->aHeap, nNew);
      if (!a) return pb_fail(b, -ENOMEM);
      b->aHeap = a;
      b->nHeapAlloc = nNew;
    }
    if (n) memcpy(b->aHeap + b->nHeap, p, n);
    v = b->nHeap;
    b->nHeap += n;
  } else {
    n = 0;
  }
  uint8_t *e = b->aConst + (size_t)b->nConst * CSQ_PROG_CONST_SZ;
  memset(e, 0, CSQ_PROG_CONST_SZ);
  e[0] = (uint8_t)cls;
  csq_put_le32(e + 4, n);
  csq_put_le64(e + 8, v);
  return b->nConst++;
}

int csq_pb_const_null(csq_pb *b) {
  return pb_const(b, CSQ_NULL, 0, NULL, 0);
}
int csq_pb_const_int(csq_pb *b, int64_t v) {
  return pb_const(b, CSQ_INT, (uint64_t)v, NULL, 0);
}
int csq_pb_const_real(csq_pb *b, double v) {
  uint64_t u;
  if (isnan(v)) return csq_pb_const_null(b); /* SQLite stores NaN as NULL */
  memcpy(&u, &v, 8);
  return pb_const(b, CSQ_REAL, u, NULL, 0);
}
int csq_pb_const_bytes(csq_pb *b, int cls, const void *p, uint32_t n) {
  if (cls != CSQ_TEXT && cls != CSQ_BLOB) return pb_fail(b, -EINVAL);
  return pb_const(b, cls, 0, p, n);
}

int csq_pb_clause(csq_pb *b) {
  if (b->rc) return b->rc;
  if (b->nClause >= CSQ_PROG_MAX_TERMS) return pb_fail(b, -EINVAL);
  b->aClause[b->nClause++] = 0;
  return 0;
}

static int pb_term_bytes(uint8_t *e, int op, int flags, int slot, int k0, int k1, uint32_t esc);

int csq_pb_term(csq_pb *b, int op, int flags, int slot, int k0, int k1, uint32_t esc) {
  if (b->rc) return b->rc;
  if (b->nTerm >= CSQ_PROG_MAX_TERMS || op < 1 || op > CSQ_OP_MAX || slot < 0 || slot > 0xFFFF ||
      k0 < 0 || k0 > 0xFFFF || k1 < 0 || k1 > 0xFFFF || flags < 0 || flags > 0xFF)
    return pb_fail(b, -EINVAL);
  if (b->nClause == 0 && csq_pb_clause(b)) return b->rc;
  pb_term_bytes(b->aTerm[b->nTerm++], op, flags, slot, k0, k1, esc);
  b->aClause[b->nClause - 1]++;
  return 0;
}

int csq_pb_colcmp(csq_pb *b, int cmp, int flags, int slot, int slot2) {
  if (b->rc) return b->rc;
  if (cmp < CSQ_OP_EQ || cmp > CSQ_OP_ISNOT || (flags & ~(CSQ_TF_COLL_MASK | CSQ_TF_AFF_MASK)) ||
      (flags & CSQ_TF_COLL_MASK) == CSQ_TF_COLL_MASK ||
      (flags & CSQ_TF_AFF_MASK) == CSQ_TF_AFF_MASK || slot < 0 || slot >= b->nIn || slot2 < 0 ||
      slot2 >= b->nIn)
    return pb_fail(b, -EINVAL);
  return csq_pb_term(b, CSQ_OP_COLCMP, flags, slot, slot2, cmp, 0);
}

/* A join filter term (op BLOOM or KEYMAP) whose BLOB constant is p[0..n),
** a size the op's format allows (bSizeOk). */
static int pb_join_filter(csq_pb *b, int op, int flags, int slot, const void *p, uint32_t n,
                          int bSizeOk) {
  if (b->rc) return b->rc;
  if ((flags & ~CSQ_TF_AFF_MASK) || (flags & CSQ_TF_AFF_MASK) == CSQ_TF_AFF_MASK || slot < 0 ||
      slot >= b->nIn || !p || !bSizeOk)
    return pb_fail(b, -EINVAL);
  int k = csq_pb_const_bytes(b, CSQ_BLOB, p, n);
  if (k < 0) return k;
  return csq_pb_term(b, op, flags, slot, k, 0, 0);
}

int csq_pb_bloom(csq_pb *b, int flags, int slot, const void *pFilter, uint32_t nBytes) {
  return pb_join_filter(b, CSQ_OP_BLOOM, flags, slot, pFilter, nBytes, csq_bloom_size_ok(nBytes));
}

int csq_pb_keymap(csq_pb *b, int flags, int slot, const void *pMap, uint32_t nBytes) {
  return pb_join_filter(b, CSQ_OP_KEYMAP, flags, slot, pMap, nBytes, csq_keymap_size_ok(nBytes));
}

/* Encode a 16-byte term (filter or condition) at e. -EINVAL if a field
** does not fit its width. */
static int pb_term_bytes(uint8_t *e, int op, int flags, int slot, int k0, int k1, uint32_t esc) {
  if (op < 1 || op > CSQ_OP_MAX || slot < 0 || slot > 0xFFFF || k0 < 0 || k0 > 0xFFFF || k1 < 0 ||
      k1 > 0xFFFF || flags < 0 || flags > 0xFF)
    return -EINVAL;
  memset(e, 0, CSQ_PROG_TERM_SZ);
  e[0] = (uint8_t)op;
  e[1] = (uint8_t)flags;
  csq_put_le16(e + 2, (uint16_t)slot);
  csq_put_le16(e + 4, (uint16_t)k0);
  csq_put_le16(e + 6, (uint16_t)k1);
  csq_put_le32(e + 8, esc);
  return 0;
}

int csq_pb_expr(csq_pb *b, int op, int a, int bb, int c) {
  if (b->rc) return b->rc;
  if (b->nExpr >= CSQ_AGG_MAX_EXPR || op < 1 || op > CSQ_EX_MAX || a < 0 || a > 0xFFFF || bb < 0 ||
      bb > 0xFFFF || c < 0 || c > 0xFFFF)
    return pb_fail(b, -EINVAL);
  uint8_t *e = b->aExpr[b->nExpr];
  e[0] = (uint8_t)op;
  e[1] = 0;
  csq_put_le16(e + 2, (uint16_t)a);
  csq_put_le16(e + 4, (uint16_t)bb);
  csq_put_le16(e + 6, (uint16_t)c);
  return b->nExpr++;
}

/* 1 if e names an instruction already emitted. */
static int pb_expr_ok(const csq_pb *b, int e) {
  return e >= 0 && e < b->nExpr;
}

int csq_pb_expr_col(csq_pb *b, int slot) {
  if (!b->rc && (slot < 0 || slot >= b->nIn)) return pb_fail(b, -EINVAL);
  return csq_pb_expr(b, CSQ_EX_COL, slot, 0, 0);
}
int csq_pb_expr_const(csq_pb *b, int k) {
  if (!b->rc && (k < 0 || k >= b->nConst)) return pb_fail(b, -EINVAL);
  return csq_pb_expr(b, CSQ_EX_CONST, k, 0, 0);
}
int csq_pb_expr_arith(csq_pb *b, int op, int e1, int e2) {
  if (b->rc) return b->rc;
  if ((op != CSQ_EX_ADD && op != CSQ_EX_SUB && op != CSQ_EX_MUL && op != CSQ_EX_DIV) ||
      !pb_expr_ok(b, e1) || !pb_expr_ok(b, e2))
    return pb_fail(b, -EINVAL);
  return csq_pb_expr(b, op, e1, e2, 0);
}
int csq_pb_expr_neg(csq_pb *b, int e) {
  if (!b->rc && !pb_expr_ok(b, e)) return pb_fail(b, -EINVAL);
  return csq_pb_expr(b, CSQ_EX_NEG, e, 0, 0);
}
int csq_pb_expr_map(csq_pb *b, int e, const void *pMap, uint32_t nBytes) {
  if (b->rc) return b->rc;
  if (!pb_expr_ok(b, e) || !csq_codemap_size_ok(nBytes)) return pb_fail(b, -EINVAL);
  int k = csq_pb_const_bytes(b, CSQ_BLOB, pMap, nBytes);
  if (k < 0) return k;
  return csq_pb_expr(b, CSQ_EX_MAP, e, k, 0);
}
int csq_pb_cond(csq_pb *b, int op, int flags, int slot, int k0, int k1, uint32_t esc) {
  if (b->rc) return b->rc;
  if (b->nCond >= CSQ_AGG_MAX_CONDS) return pb_fail(b, -EINVAL);
  if (pb_term_bytes(b->aCond[b->nCond], op, flags, slot, k0, k1, esc)) return pb_fail(b, -EINVAL);
  return b->nCond++;
}
int csq_pb_expr_case(csq_pb *b, int cond, int eThen, int eElse) {
  if (b->rc) return b->rc;
  if (cond < 0 || cond >= b->nCond || !pb_expr_ok(b, eThen) || !pb_expr_ok(b, eElse))
    return pb_fail(b, -EINVAL);
  return csq_pb_expr(b, CSQ_EX_CASE, cond, eThen, eElse);
}
int csq_pb_group(csq_pb *b, int e) {
  if (b->rc) return b->rc;
  if (b->nKey >= CSQ_AGG_MAX_KEYS || !pb_expr_ok(b, e)) return pb_fail(b, -EINVAL);
  b->aKey[b->nKey] = (uint16_t)e;
  return b->nKey++;
}
int csq_pb_agg(csq_pb *b, int fn, int flags, int e) {
  if (b->rc) return b->rc;
  if (fn == CSQ_AGG_COUNT_STAR)
    e = 0;
  else if (!pb_expr_ok(b, e))
    return pb_fail(b, -EINVAL);
  if (b->nAgg >= CSQ_AGG_MAX_AGGS || fn < 1 || fn > CSQ_AGG_FN_MAX || flags < 0 || flags > 0xFF)
    return pb_fail(b, -EINVAL);
  uint8_t *a = b->aAgg[b->nAgg];
  a[0] = (uint8_t)fn;
  a[1] = (uint8_t)flags;
  csq_put_le16(a + 2, (uint16_t)e);
  return b->nAgg++;
}

int csq_pb_finish(csq_pb *b, uint8_t **pp, size_t *pn) {
  *pp = NULL;
  *pn = 0;
  if (b->rc) return b->rc;
  /* An empty clause (csq_pb_clause with no term after it) is dropped. */
  int nClause = 0;
  for (int i = 0; i < b->nClause; i++)
    if (b->aClause[i]) b->aClause[nClause++] = b->aClause[i];
  b->nClause = nClause;
  size_t nHeapPad = (b->nHeap + 7u) & ~7u;
  size_t n = CSQ_PROG_HDR + 4u * (size_t)(b->nIn + b->nOut + nClause) +
             (size_t)CSQ_PROG_TERM_SZ * b->nTerm + (size_t)CSQ_PROG_CONST_SZ * b->nConst + nHeapPad;
  int bAgg = b->nKey + b->nAgg > 0, bTop = b->nTop > 0;
  size_t nBase = n;
  if (bTop) {
    if (bAgg || b->bRowNum || b->nTopKey == 0) return pb_fail(b, -EINVAL);
    n += topn_bytes((uint32_t)b->nTopKey);
  }
  if (bAgg) {
    if (b->nOut || b->bRowNum) return pb_fail(b, -EINVAL);
    n += (size_t)agg_bytes((uint32_t)b->nExpr, (uint32_t)b->nKey, (uint32_t)b->nAgg,
                           (uint32_t)b->nCond);
  }
  if (n > CSQ_PROG_MAX_BYTES) return pb_fail(b, -EINVAL);
  uint8_t *p = calloc(1, n), *q = p;
  if (!p) return pb_fail(b, -ENOMEM);
  csq_put_le32(q, CSQ_PROG_MAGIC);
  csq_put_le16(q + 4, bAgg || bTop || b->bRowNum ? CSQ_PROG_VERSION_AGG : CSQ_PROG_VERSION);
  csq_put_le16(q + 6, bAgg ? CSQ_PF_AGG : bTop ? CSQ_PF_TOPN : b->bRowNum ? CSQ_PF_ROWNUM : 0);
  csq_put_le32(q + 8, (uint32_t)n);
  csq_put_le16(q + 12, (uint16_t)b->nIn);
  csq_put_le16(q + 14, (uint16_t)b->nOut);
  csq_put_le16(q + 16, (uint16_t)nClause);
  csq_put_le16(q + 18, (uint16_t)b->nTerm);
  csq_put_le16(q + 20, (uint16_t)b->nConst);
  csq_put_le32(q + 24, b->nHeap);
  q += CSQ_PROG_HDR;
  for (int i = 0; i < b->nIn; i++, q += 4) csq_put_le32(q, b->aIn[i]);
  for (int i = 0; i < b->nOut; i++, q += 4) csq_put_le32(q, b->aOut[i]);
  for (int i = 0; i < nClause; i++, q += 4) csq_put_le32(q, b->aClause[i]);
  for (int i = 0; i < b->nTerm; i++, q += CSQ_PROG_TERM_SZ)
    memcpy(q, b->aTerm[i], CSQ_PROG_TERM_SZ);
  if (b->nConst) memcpy(q, b->aConst, (size_t)b->nConst * CSQ_PROG_CONST_SZ);
  q += (size_t)b->nConst * CSQ_PROG_CONST_SZ;
  if (b->nHeap) memcpy(q, b->aHeap, b->nHeap);
  if (bTop) {
    q = p + nBase;
    csq_put_le32(q, b->nTop);
    csq_put_le16(q + 4, (uint16_t)b->nTopKey);
    for (int i = 0; i < b->nTopKey; i++) memcpy(q + CSQ_TOPN_HDR + 4 * i, b->aTopKey[i], 4);
  }
  if (bAgg) {
    q = p + nBase;
    csq_put_le16(q, (uint16_t)b->nExpr);
    csq_put_le16(q + 2, (uint16_t)b->nKey);
    csq_put_le16(q + 4, (uint16_t)b->nAgg);
    csq_put_le16(q + 6, (uint16_t)b->nCond);
    q += CSQ_AGG_HDR;
    for (int i = 0; i < b->nExpr; i++, q += 8) memcpy(q, b->aExpr[i], 8);
    for (int i = 0; i < b->nKey; i++, q += 4) csq_put_le16(q, b->aKey[i]);
    for (int i = 0; i < b->nAgg; i++, q += 4) memcpy(q, b->aAgg[i], 4);
    q += (4 * (b->nKey + b->nAgg)) % 8;
    for (int i = 0; i < b->nCond; i++, q += CSQ_PROG_TERM_SZ)
      memcpy(q, b->aCond[i], CSQ_PROG_TERM_SZ);
  }
  *pp = p;
  *pn = n;
  return 0;
}

/* ---- zone maps ----
** For one term and one chunk's zone: may some row satisfy the term? The
** non-NULL values of the chunk are split by class group: integers lie in
** [iMin, iMax]; reals in [rMin, rMax] (rMin/rMax cover integers too, as
** doubles, so they bound the reals exactly); text (when no blob is present)
** between the min prefix and the max prefix (extended when truncated); blobs
** alike when no text is present. Whatever the zone cannot bound answers
** "maybe". */

enum { G_INT, G_REAL, G_TXT, G_BLOB }; /* value groups */

/* c compared with a group's lower and upper bound: *pLo = sign(lower - c)
** and *pHi = sign(upper - c) where "upper" is a least upper bound as far as
** the comparison can tell (a truncated max counts as +infinity after its
** prefix). Returns 0 when the group cannot be bounded. */
static int zone_bounds(const csq_zone *z, int g, const csq_pconst *c, int *pLo, int *pHi) {
  int rg = g == G_INT || g == G_REAL ? 1 : g == G_TXT ? 2 : 3;
  int rc = csq_value_rank(c->cls);
  if (rc != rg) {
    *pLo = *pHi = rg < rc ? -1 : 1;
    return 1;
  }
  if (g == G_INT) {
    if (c->cls == CSQ_INT) {
      *pLo = z->iMin < c->i ? -1 : z->iMin > c->i;
      *pHi = z->iMax < c->i ? -1 : z->iMax > c->i;
    } else {
      *pLo = csq_value_cmp_int_real(z->iMin, c->r);
      *pHi = csq_value_cmp_int_real(z->iMax, c->r);
    }
    return 1;
  }
  if (g == G_REAL) {
    if (c->cls == CSQ_REAL) {
      *pLo = z->rMin < c->r ? -1 : z->rMin > c->r;
      *pHi = z->rMax < c->r ? -1 : z->rMax > c->r;
    } else {
      *pLo = -csq_value_cmp_int_real(c->i, z->rMin);
      *pHi = -csq_value_cmp_int_real(c->i, z->rMax);
    }
    return 1;
  }
  /* TEXT or BLOB, memcmp order (BINARY). */
  size_t nMin = z->nMinTxt, nMax = z->nMaxTxt;
  if (nMin > CSQ_ZONE_PREFIX || nMax > CSQ_ZONE_PREFIX) return 0;
  size_t m = nMin < c->len ? nMin : c->len;
  int x = m ? memcmp(z->zMinTxt, c->z, m) : 0;
  if (x == 0) x = nMin < c->len ? -1 : nMin > c->len;
  /* A truncated min prefix is below the true min: a sound lower bound,
  ** except that "prefix == c" then means min > c. */
  if (x == 0 && z->bMinTrunc) x = 1;
  *pLo = x < 0 ? -1 : x > 0;
  m = nMax < c->len ? nMax : c->len;
  x = m ? memcmp(z->zMaxTxt, c->z, m) : 0;
  if (x == 0) {
    if (z->bMaxTrunc)
      x = 1; /* the true max extends the prefix: >= any c sharing it */
    else
      x = nMax < c->len ? -1 : nMax > c->len;
  }
  *pHi = x < 0 ? -1 : x > 0;
  return 1;
}

/* May some value of group g satisfy "v op c"? (op a plain comparison) */
static int zone_may(const csq_zone *z, int g, int op, const csq_pconst *c) {
  int lo, hi;
  if (c->cls == CSQ_NULL) return 0;
  if (!zone_bounds(z, g, c, &lo, &hi)) return 1;
  switch (op) {
  case CSQ_OP_EQ:
    return lo <= 0 && hi >= 0;
  case CSQ_OP_NE:
    return !(lo == 0 && hi == 0 && g == G_INT);
  case CSQ_OP_LT:
    return lo < 0;
  case CSQ_OP_LE:
    return lo <= 0;
  case CSQ_OP_GT:
    return hi > 0;
  case CSQ_OP_GE:
    return hi >= 0;
  default:
    return 1;
  }
}

/* May some value of a chunk with zone z be in join filter t's key set?
** NULL never is; a chunk of integers only, within a narrow range, has each
** value of the range probed (a chunk sorted on the key, or of one value,
** keeps a run of keys); one of a single REAL or TEXT value has it probed. */
#define ZONE_BLOOM_PROBES 4096
static int bloom_may(const csq_prog *pp, const csq_pterm *t, const csq_zone *z) {
  const csq_pconst *f = &pp->aConst[t->k0];
  if (z->nNull >= z->nVal) return 0;
  uint8_t m = z->clsMask & (uint8_t) ~(1u << CSQ_NULL);
  if (m == (1u << CSQ_INT) && (uint64_t)z->iMax - (uint64_t)z->iMin < ZONE_BLOOM_PROBES &&
      z->iMin <= z->iMax) {
    for (uint64_t k = 0; k <= (uint64_t)z->iMax - (uint64_t)z->iMin; k++)
      if (csq_bloom_maybe(f->z, f->len, csq_key_hash_int((int64_t)((uint64_t)z->iMin + k))))
        return 1;
    return 0;
  }
  if (m == (1u << CSQ_REAL) && z->rMin == z->rMax)
    return csq_bloom_maybe(f->z, f->len, csq_key_hash_real(z->rMin));
  if (m == (1u << CSQ_TEXT) && !z->bMinTrunc && !z->bMaxTrunc && z->nMinTxt == z->nMaxTxt &&
      memcmp(z->zMinTxt, z->zMaxTxt, z->nMinTxt) == 0 && z->nMinTxt <= CSQ_ZONE_PREFIX)
    return csq_bloom_maybe(f->z, f->len, csq_key_hash_bytes(CSQ_TEXT, z->zMinTxt, z->nMinTxt));
  return 1;
}

static int keymap_may(const csq_prog *pp, const csq_pterm *t, const csq_zone *z) {
  const csq_pconst *f = &pp->aConst[t->k0];
  if (z->nNull >= z->nVal) return 0;
  uint8_t m = z->clsMask & (uint8_t) ~(1u << CSQ_NULL);
  if (!(m & ((1u << CSQ_INT) | (1u << CSQ_REAL)))) return 0; /* no number */
  if (m != (1u << CSQ_INT) || z->iMin > z->iMax) return 1;
  int64_t base = (int64_t)csq_le64(f->z);
  uint64_t nBits = 8ull * (f->len - CSQ_KEYMAP_HDR);
  /* the zone's integers against the span, as offsets from its base */
  if (z->iMax < base || (z->iMin >= base && (uint64_t)z->iMin - (uint64_t)base >= nBits)) return 0;
  if ((uint64_t)z->iMax - (uint64_t)z->iMin >= ZONE_BLOOM_PROBES) return 1;
  for (uint64_t k = 0; k <= (uint64_t)z->iMax - (uint64_t)z->iMin; k++)
    if (csq_keymap_has_int(f->z, f->len, (int64_t)((uint64_t)z->iMin + k))) return 1;
  return 0;
}

static int term_may(const csq_prog *pp, const csq_pterm *t, const csq_zone *z) {
  if (t->op == CSQ_OP_BPF) return 1; /* a program may keep any row, NULLs too */
  if (t->op == CSQ_OP_BLOOM) return bloom_may(pp, t, z);
  if (t->op == CSQ_OP_KEYMAP) return keymap_may(pp, t, z);
  /* one zone bounds each column, not how a row pairs their values */
  if (t->op == CSQ_OP_COLCMP) return 1;
  int bNull = z->nNull > 0, bVal = z->nNull < z->nVal;
  if (z->nVal == 0) return 0;
  const csq_pconst *a = &pp->aConst[t->k0];
  switch (t->op) {
  case CSQ_OP_ISNULL:
    return bNull;
  case CSQ_OP_NOTNULL:
    return bVal;
  case CSQ_OP_IS:
    if (a->cls == CSQ_NULL) return bNull;
    break;
  case CSQ_OP_ISNOT:
    if (a->cls == CSQ_NULL) return bVal;
    if (bNull) return 1;
    break;
  default:
    break;
  }
  if (!bVal) return 0;
  int aG[4], nG = 0;
  uint8_t m = z->clsMask;
  if (m & (1u << CSQ_INT)) aG[nG++] = G_INT;
  if (m & (1u << CSQ_REAL)) aG[nG++] = G_REAL;
  if ((m & (1u << CSQ_TEXT)) && (m & (1u << CSQ_BLOB))) return 1; /* min/max mix both */
  int bText = (m & (1u << CSQ_TEXT)) != 0;
  if (bText) aG[nG++] = G_TXT;
  if (m & (1u << CSQ_BLOB)) aG[nG++] = G_BLOB;
  if (bText && (t->flags & CSQ_TF_COLL_MASK) != CSQ_TF_BINARY) return 1;
  int bNot = (t->flags & CSQ_TF_NOT) != 0;
  for (int i = 0; i < nG; i++) {
    int g = aG[i];
    switch (t->op) {
    case CSQ_OP_EQ:
    case CSQ_OP_IS:
      if (zone_may(z, g, CSQ_OP_EQ, a)) return 1;
      break;
    case CSQ_OP_NE:
    case CSQ_OP_ISNOT:
      if (zone_may(z, g, CSQ_OP_NE, a)) return 1;
      break;
    case CSQ_OP_LT:
    case CSQ_OP_LE:
    case CSQ_OP_GT:
    case CSQ_OP_GE:
      if (zone_may(z, g, t->op, a)) return 1;
      break;
    case CSQ_OP_BETWEEN: {
      const csq_pconst *b = &pp->aConst[t->k1];
      if (bNot) {
        if (zone_may(z, g, CSQ_OP_LT, a) || zone_may(z, g, CSQ_OP_GT, b)) return 1;
      } else if (zone_may(z, g, CSQ_OP_GE, a) && zone_may(z, g, CSQ_OP_LE, b)) {
        return 1;
      }
      break;
    }
    case CSQ_OP_IN:
      if (bNot) return 1;
      for (int k = 0; k < t->k1; k++)
        if (zone_may(z, g, CSQ_OP_EQ, &pp->aConst[t->k0 + k])) return 1;
      break;
    default:
      return 1; /* LIKE, GLOB (NOT LIKE of a BLOB is true even for a NULL pattern) */
    }
  }
  return 0;
}

int csq_prog_zone_skip(const csq_prog *pProg, uint32_t nRow, uint32_t nDel,
                       const csq_zone *(*xZone)(const void *pCtx, int iChunk), const void *pCtx) {
  if (nRow == 0) return 1;
  if (nDel >= nRow) return 1;
  int iTerm = 0;
  for (int c = 0; c < pProg->nClause; c++) {
    int bMay = 0;
    for (int k = 0; k < pProg->aClause[c]; k++) {
      const csq_pterm *t = &pProg->aTerm[iTerm + k];
      const csq_zone *z = xZone(pCtx, pProg->aIn[t->slot]);
      if (!z) return 0;
      if (z->nVal != nRow || term_may(pProg, t, z)) {
        bMay = 1;
        break;
      }
    }
    if (!bMay) return 1;
    iTerm += pProg->aClause[c];
  }
  return 0;
}
