/*
** device/engine/exec_int.h - internals of csq's program executor (program
** type CSQ_PTYPE_CSQ), shared by its files and by no one else:
**   exec_value.c    SQLite values against constants, LIKE / GLOB, the
**                   generic evaluator of one term on one value
**   exec_compile.c  xVerify: a verified program compiled into ex_prog
**   exec_col.c      the input columns of one execution (ex_col)
**   exec_term.c     a term over a selection of rows, typed per chunk
**   exec_top.c      top-N: keeping the rows that sort first
**   exec_out.c      the result of a filter program, column by column
**   exec_expr.c     a grouped program's expressions over a run of rows
**   exec_group.c    group ids: the direct and the hash table, run order
**   exec_agg.c      aggregate updates and the grouped run (ex_agg_exec)
**   exec_result.c   a grouped result written, and read back as a seed
**   exec_run.c      xRun: the job, the filter loop, and dev_ptype_csq
**   exec_bpf.c      eBPF terms: a user's program (bpf_rt.c) over a selection
**   exec_bloom.c    join filter terms over integer and real columns
**   exec_colcmp.c   column comparison terms: two input columns of a row
**
** Execution is batch at a time: CSQ_PROG_BATCH rows, a selection vector of
** row numbers, and per term a typed loop chosen once per chunk and term
** (never a function pointer per row):
**   - integer chunks (frame-of-reference, run-length, constant): the batch is
**     unpacked to int64 and every comparison, BETWEEN and IN has been reduced
**     at compile time to an integer interval test or a sorted set, so SQLite's
**     exact integer/real ordering costs nothing per row;
**   - real chunks: double comparisons when the constants are exactly
**     representable as doubles;
**   - dictionary text: the term is evaluated once per dictionary entry, then
**     per row by code lookup (this covers LIKE/GLOB too);
**   - constant chunks: once per chunk;
**   - join filters (CSQ_OP_BLOOM, CSQ_OP_KEYMAP): integer and real chunks
**     hash the selected rows' values a vector at a time and probe the
**     filter, or look them up in the bitmap (exec_bloom.c); a dictionary's
**     entries, and the codes of a narrow frame-of-reference chunk, are
**     probed once each;
**   - column comparisons (CSQ_OP_COLCMP): integer and real pairs as
**     vectors of the batch, other pairs value by value (exec_colcmp.c);
**   - plain text/blob and mixed (tagged) chunks: the generic evaluator.
** Qualifying rows are then written column by column into the output area in
** the result format of program.h. A grouped program (version 2, AGGREGATION
** in program.h) instead evaluates its expressions over the qualifying rows
** batch by batch, groups them (a direct table on dictionary / narrow integer
** codes, else a hash table on the values) and writes one row of partial
** aggregate states per group (ex_agg_exec).
**
** Helpers called per value are static inline here; what the files call of
** one another once per batch, term or chunk is out of line, prefixed ex_.
*/
#ifndef CSQ_DEVICE_EXEC_INT_H
#define CSQ_DEVICE_EXEC_INT_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/format/bloom.h"
#include "device/format/chunk.h"
#include "device/format/codemap.h"
#include "device/format/group.h"
#include "device/format/keyhash.h"
#include "device/format/keymap.h"
#include "device/format/le.h"
#include "device/format/program.h"
#include "device/format/value.h"
#include "device/engine/bpf_rt.h"
#include "device/engine/ptype.h"

#define BATCH CSQ_PROG_BATCH
_Static_assert(CSQ_PROG_BATCH <= 2048, "int64 lanes of ag_update need runs of at most 2048 rows");

/* A value in the generic evaluator (value.h: ordered, compared and hashed
** by SQLite's rules there). z/n: TEXT/BLOB bytes. */
typedef csq_value ex_val;
/* A token of a compiled LIKE/GLOB pattern (exec_value.c). */
typedef struct ex_tok {
  uint8_t kind;
  uint8_t bInvert; /* TK_SET */
  uint32_t c;      /* TK_LIT code point; TK_SET: first index in aRange */
  uint32_t nRange; /* TK_SET: number of [lo, hi] pairs */
} ex_tok;

/* Integer plan: the set of int64 values for which the term is true, as an
** interval [lo, hi] (bEmpty: no value), negated if bNeg, or a sorted set. */
enum { IP_RANGE, IP_SET, IP_GENERIC };

typedef struct ex_term {
  csq_pterm t;
  const csq_pconst *a, *b;
  int coll; /* CSQ_TF_BINARY / NOCASE / RTRIM */
  int bNot;
  uint8_t nullRes; /* result for a NULL value */
  /* IN */
  csq_pconst *aIn; /* non-NULL constants, sorted in SQLite order under coll */
  int nIn;
  int bInNull; /* the list holds a NULL */
  /* integer plan */
  int ip;
  int64_t lo, hi;
  int bEmpty, bNeg;
  int64_t *aSet;
  int nSet;
  /* IP_SET lookup (ex_set_compile), when the set is not small: a bitmap of
  ** the values setLo + i, i <= setSpan (aSetBits), or else an open-addressing
  ** hash table of setMask + 1 slots, setEmpty in the free ones (aSetHash);
  ** neither: binary search of aSet */
  uint64_t *aSetBits;
  int64_t setLo;
  uint64_t setSpan;
  int64_t *aSetHash;
  uint64_t setMask;
  int64_t setEmpty;
  /* real plan: usable when bReal; compare doubles against rA/rB */
  int bReal;
  double rA, rB;
  /* LIKE / GLOB */
  ex_tok *aTok;
  int nTok;
  uint32_t *aRange;
  /* a pattern of ASCII literals between '%' ('*') only: matched by finding
  ** its segments in turn (ex_pat_compile sets nSeg >= 0; -1 otherwise) */
  int nSeg;
  int bSegFold;                 /* ASCII letters compare folded (LIKE) */
  int bAnchorStart, bAnchorEnd; /* no wildcard before the first, after the last */
  uint8_t *aSegByte;            /* the segments' bytes, folded if bSegFold */
  uint32_t *aSegOff;            /* segment k: aSegByte[aSegOff[k], aSegOff[k + 1]) */
  /* eBPF (CSQ_OP_BPF): the call, its program, its constant arguments */
  struct csq_bpf_call *pCall;
  dev_bpf *pBpf;
  ex_val *aBpfK;
} ex_term;

typedef struct ex_prog {
  csq_prog p;
  uint8_t *aByte; /* private copy of the program: constants point into it */
  uint64_t id;
  ex_term *aT;
  ex_term *aCondT; /* the aggregation's condition terms (nCond) */
  ex_term *aExprT; /* per expression: the program of a CSQ_EX_BPF, else unused */
} ex_prog;

/* Constant k as a value (its bytes stay in the program). */
static inline void const_val(const csq_pconst *k, ex_val *v) {
  v->cls = k->cls;
  v->i = k->i;
  v->r = k->r;
  v->z = k->z;
  v->n = k->len;
}

/* v (not NULL) against constant k (not NULL): -1, 0, 1 in SQLite order,
** TEXT under coll. */
static inline int cmp_vk(const ex_val *v, const csq_pconst *k, int coll) {
  ex_val kv;
  const_val(k, &kv);
  return csq_value_cmp(v, &kv, coll);
}

/* ---- columns of one execution ---- */

enum { K_INT, K_REAL, K_TEXTP, K_DICT, K_TAG, K_CONSTX };

typedef struct ex_col {
  csq_chunk_desc d;
  int kind;
  int bAllNull;
  uint32_t *aTagOff; /* K_TAG: offset in aVar of value i's bytes */
  ex_val cval;       /* K_CONSTX and CONST INT/REAL: the value */
  int64_t b0;        /* batch materialised in aI / aR (-1 none) */
  int64_t *aI;
  double *aR;
  uint64_t *aCode;
  int64_t aCodeB0; /* FOR, REAL_DEC, DICT: batch whose codes are in aCode (-1 none) */
} ex_col;

/* Is row r of c NULL? */
static inline int col_null(const ex_col *c, uint32_t r) {
  if (c->d.aNull) return (c->d.aNull[r >> 3] >> (r & 7)) & 1;
  return c->bAllNull;
}

/* A term decided on a chunk's packed codes: a row satisfies it when its
** code lies in [lo, hi], xor neg. The chunk's codes are [0, top]; eAll is 1
** when every code is inside, 0 when none is (then lo > hi), -1 otherwise. */
typedef struct ex_crange {
  int eAll;
  uint64_t lo, hi, top;
  uint8_t neg;
} ex_crange;

/* Set r->eAll from its range. */
static inline void crange_settle(ex_crange *r) {
  r->eAll = r->lo > r->hi ? 0 : r->lo == 0 && r->hi == r->top ? 1 : -1;
}

/* An output column's class mask and heap bytes over the rows written. */
typedef struct ex_outcol {
  uint8_t clsMask;
  uint64_t nHeap;
} ex_outcol;

/* n rounded up to a multiple of 8. */
static inline uint64_t pad8(uint64_t n) {
  return (n + 7) & ~(uint64_t)7;
}

/* Does class mask m hold exactly one class? */
static inline int mask_single(uint8_t m) {
  return m && !(m & (m - 1));
}

/* ---- aggregation (program.h, AGGREGATION) ----
** Per run of selected rows inside one aligned batch: every expression is
** evaluated into a vector (ex_ev), each row gets a group id (a direct table
** indexed by dictionary / frame-of-reference codes when every key is a
** narrow column, else a hash table on the key values), then each aggregate
** updates its states with a typed loop. Nothing is mutated before the run is
** known to fit the output area, so a full area cuts the result at a run. */

/* An expression's values over a run: one class for all (cls) or per row. */
typedef struct ex_ev {
  uint8_t cls;     /* CSQ_* of every value, or 0: see aCls */
  uint8_t bAsReal; /* cls INT, and aR holds (double)aI[k] too (a constant) */
  uint8_t bFilled; /* a constant's vectors hold all BATCH rows already */
  uint8_t *aCls;
  int64_t *aI; /* a column's may point into the column's batch (ev_col) */
  double *aR;
  const uint8_t **aZ;
  uint32_t *aN;
  int64_t *aIOwn;  /* this vector's own arrays, which aI and aR point to again */
  double *aROwn;   /* before each run */
  uint64_t mag;    /* cls INT: every aI[k] has aI[k] ^ (aI[k] >> 63) <= mag
                   ** (known from the encoding), else UINT64_MAX */
  uint8_t bNonNeg; /* cls INT, mag known, and no aI[k] is negative */
} ex_ev;

/* SUM / TOTAL / AVG state (48 bytes, 16-aligned inside a group's block). */
typedef struct ag_sum {
  __int128 isum; /* exact sum of the INTEGER values */
  __int128 ineg; /* sum of the magnitudes of the negative ones: bounds any
                    running sum, for SQLite's "integer overflow" (agg.c) */
  int64_t cnt;   /* non-NULL values */
  int64_t nReal; /* REAL values */
  double rs, rc; /* Kahan-Babuska-Neumaier sum of the REAL values */
} ag_sum;

#define AG_LANES 4 /* per-group scratch sums per run (REAL: four running sums) */

typedef struct ag_tab {
  int nAgg, nCol;
  csq_group g;                     /* the groups: keys, hash slots, states */
  uint32_t aOff[CSQ_AGG_MAX_AGGS]; /* each aggregate's state in a group's block */
  int32_t *aDirect;                /* direct table: composite code -> group, -1 none */
  uint32_t nDirect;
  uint32_t aDom[CSQ_AGG_MAX_KEYS];   /* direct: domain of each key (its NULL code = dom - 1) */
  int64_t aDirRef[CSQ_AGG_MAX_KEYS]; /* direct: each key chunk's reference (value of code 0) */
  uint64_t nVar;                     /* TEXT/BLOB bytes held by keys and MIN/MAX states */
  /* per run: rows of each group (0 outside the run's touched groups) and a
  ** scratch real sum per group */
  uint32_t *aRunN;
  double *aRunR;      /* AG_LANES per group */
  uint32_t nRunAlloc; /* groups aRunN and aRunR hold */
  uint32_t *aTouch;   /* groups the run touched */
  uint32_t nTouch;
  /* the run's rows grouped (ag_group_rows, whenever there are several
  ** groups): touched group aTouch[j] has rows aPerm[aSeg[j] .. aSeg[j+1]),
  ** in row order */
  uint32_t *aPerm, *aSeg;
} ag_tab;

/* The groups a range Execute (exec_range.c) carries from one row group to
** the next: each row group aggregates into them in memory, where writing
** a result and reading it back as the next row group's seed would cost
** as much as the aggregation itself when there are many groups. Key
** bytes are copied into the table once (the row group's chunks are
** replaced by the next one's); text MIN/MAX states are copied after each
** row group into aMinMax, which replaces the previous copy. */
typedef struct ex_carry {
  ag_tab t;
  int bLive;        /* t holds the groups of earlier row groups (or a seed) */
  int bLast;        /* this row group ends the range: write the result */
  uint32_t nKept;   /* groups [0, nKept) have their key bytes in the table */
  uint8_t *aMinMax; /* bytes of the text MIN/MAX states */
} ex_carry;

/* Class, value, and store of row k of an expression vector. */
static inline uint8_t ev_cls(const ex_ev *e, uint32_t k) {
  return e->cls ? e->cls : e->aCls[k];
}

static inline void ev_get(const ex_ev *e, uint32_t k, ex_val *v) {
  v->cls = ev_cls(e, k);
  switch (v->cls) {
  case CSQ_INT:
    v->i = e->aI[k];
    break;
  case CSQ_REAL:
    v->r = e->aR[k];
    break;
  case CSQ_TEXT:
  case CSQ_BLOB:
    v->z = e->aZ[k];
    v->n = e->aN[k];
    break;
  default:
    break;
  }
}

static inline void ev_put(ex_ev *e, uint32_t k, const ex_val *v) {
  e->aCls[k] = v->cls;
  e->aI[k] = v->i;
  e->aR[k] = v->r;
  e->aZ[k] = v->z;
  e->aN[k] = v->n;
}

/* x ^ (x >> 63): |x|, or |x| - 1 for a negative x. */
static inline uint64_t mag_of(int64_t x) {
  return (uint64_t)(x ^ (x >> 63));
}

/* TEXT/BLOB bytes of v that a result carries (0 for other classes). */
static inline uint64_t var_bytes(const ex_val *v) {
  return v->cls == CSQ_TEXT || v->cls == CSQ_BLOB ? v->n : 0;
}

/* ---- writing a result (program.h, RESULT) ---- */

/* A result column of n values with class mask m and nHeap heap bytes:
** whether it carries a class array and a length array, and where its
** sections sit. */
typedef struct ex_res_shape {
  int bCls, bLen;
  csq_res_lay l;
} ex_res_shape;
static inline ex_res_shape ex_res_shape_of(uint8_t m, uint32_t n, uint64_t nHeap) {
  ex_res_shape s;
  s.bCls = !mask_single(m) && n > 0;
  s.bLen = (m & ((1u << CSQ_TEXT) | (1u << CSQ_BLOB))) != 0;
  s.l = csq_res_col_lay(s.bCls, s.bLen, n, nHeap);
  return s;
}

/* Write the CSQ_RES_COL_SZ-byte descriptor d of a column of shape s with
** class mask m and nHeap heap bytes. */
static inline void ex_res_desc_put(uint8_t *d, const ex_res_shape *s, uint8_t m, uint64_t nHeap) {
  memset(d, 0, CSQ_RES_COL_SZ);
  d[0] = m;
  d[1] = (uint8_t)s->bCls;
  d[2] = (uint8_t)s->bLen;
  csq_put_le64(d + 8, nHeap);
}

/* Write the CSQ_RES_HDR-byte header of a result of nBytes at p. */
static inline void ex_res_hdr_put(uint8_t *p, uint32_t nRows, uint32_t nextRow, uint32_t nCol,
                                  uint64_t nBytes) {
  csq_put_le32(p, CSQ_RES_MAGIC);
  csq_put_le32(p + 4, nRows);
  csq_put_le32(p + 8, nextRow);
  csq_put_le32(p + 12, nCol);
  csq_put_le64(p + 16, nBytes);
}

/* Write v as value k of a result column of shape s at out: its 8-byte
** word (an INT, a REAL's bits, a TEXT/BLOB's heap offset, 0 for NULL), its
** class if the column has a class array, its length if it has a length
** array; TEXT/BLOB bytes go to the heap at *pnHeap, which grows by them.
** SLM addresses are only 4-byte aligned: le.h stores at any alignment. */
static inline void ex_res_put(uint8_t *out, const ex_res_shape *s, uint32_t k, const ex_val *v,
                              uint64_t *pnHeap) {
  uint64_t u = 0;
  switch (v->cls) {
  case CSQ_INT:
    u = (uint64_t)v->i;
    break;
  case CSQ_REAL:
    memcpy(&u, &v->r, 8);
    break;
  case CSQ_TEXT:
  case CSQ_BLOB:
    u = *pnHeap;
    if (v->n) memcpy(out + s->l.oHeap + *pnHeap, v->z, v->n);
    *pnHeap += v->n;
    break;
  default:
    break;
  }
  csq_put_le64(out + s->l.oVal + 8ull * k, u);
  if (s->bCls) out[k] = v->cls;
  if (s->bLen) csq_put_le32(out + s->l.oLen + 4ull * k, (uint32_t)var_bytes(v));
}

/* Complete an Execute that read rows [start, nextRow) of a row group of
** nRow rows and wrote a result of nBytes at pOut with nReturned new rows:
** its completion's DW0-DW1 in *pRet, and the counters. */
static inline void ex_res_done(dev_exec_ctx *ctx, const uint8_t *pOut, uint64_t nBytes,
                               uint64_t start, uint32_t nextRow, uint32_t nRow, uint64_t nReturned,
                               uint64_t *pRet) {
  *pRet = csq_res_ret(pOut, nBytes, nextRow < nRow);
  ctx->pStats->rows_scanned += nextRow - start;
  ctx->pStats->rows_returned += nReturned;
  if (start == 0) ctx->pStats->row_groups_scanned++;
}

/* Zero the padding of a column of shape s with n values and nHeap heap
** bytes at out, once its values are written. */
static inline void ex_res_pad(uint8_t *out, const ex_res_shape *s, uint32_t n, uint64_t nHeap) {
  if (s->bCls) memset(out + n, 0, s->l.oVal - n);
  if (s->bLen) memset(out + s->l.oLen + 4ull * n, 0, s->l.oHeap - s->l.oLen - 4ull * n);
  memset(out + s->l.oHeap + nHeap, 0, s->l.nBytes - s->l.oHeap - nHeap);
}

/* ---- exec_value.c ---- */

/* Compile the pattern of LIKE/GLOB term et into et->aTok, et->aRange
** (freed by ex_free). 0 or -ENOMEM. */
int ex_pat_compile(ex_term *et);
/* Term et on one value v: 1 true, 0 false or NULL. */
int ex_ev_one(const ex_term *et, const ex_val *v);
/* LIKE / GLOB term et of a pattern of segments over rows aSel[0..n) of a
** plain TEXT column, into aM, as ex_ev_one would give them; 0 (nothing
** done) for any other term or column. */
int ex_like_text_col(const ex_term *et, const ex_col *c, const uint32_t *aSel, uint32_t n,
                     uint8_t *aM);

/* ---- exec_compile.c: the program type's xVerify and xFree ---- */

int ex_verify(const uint8_t *p, size_t n, void **ppCompiled, char *zErr, size_t nErr);
/* xRun of the executor (exec_run.c): one row group, or with CSQ_EXEC_RANGE
** a range of them (exec_range.c, which runs ex_run_one per row group). */
int ex_run(void *pCompiled, dev_exec_ctx *ctx, uint64_t *pRet);
/* One row group; an aggregation with pCarry aggregates into its groups and
** writes the result only if pCarry->bLast. */
int ex_run_one(void *pCompiled, dev_exec_ctx *ctx, ex_carry *pCarry, uint64_t *pRet);
int ex_run_range(void *pCompiled, dev_exec_ctx *ctx, uint64_t *pRet);
void ex_free(void *pv);

/* ---- exec_col.c ---- */

/* Set up c over the chunk p[0..n) of an nRow-row group (bChecked: these
** bytes passed csq_chunk_view before). 0 or a CSQ_FAULT_*; ex_col_close
** frees c either way. */
int ex_col_open(ex_col *c, const uint8_t *p, size_t n, uint32_t nRow, int bChecked);
void ex_col_close(ex_col *c);
/* Value of row r; its bytes stay in the chunk. */
void ex_col_get(const ex_col *c, uint32_t r, ex_val *v);
/* Packed codes of batch [b0, b0+n) (INT_FOR, REAL_DEC, TEXT_DICT), in c. */
const uint64_t *ex_col_codes(ex_col *c, uint32_t b0, uint32_t n);
/* Packed codes of rows aSel[0..n) of batch b0 into u. */
void ex_col_sel_codes(const ex_col *c, uint32_t b0, const uint32_t *aSel, uint32_t n, uint64_t *u);
/* Batch [b0, b0+n) of an integer (real) column into c->aI (c->aR). */
void ex_col_ints(ex_col *c, uint32_t b0, uint32_t n);
void ex_col_reals(ex_col *c, uint32_t b0, uint32_t n);
/* The values of rows aSel[0..n) (ascending, n <= BATCH) of aligned batch
** [b0, b0+nb) of a K_INT or K_REAL column, as 8-byte words (int64, or a
** double's bits) into u; a NULL row's word is unspecified. When they are
** few of the batch and the batch is not materialised, only theirs are
** unpacked (FOR and REAL_DEC codes, RLE runs, plain reals); otherwise the
** batch is materialised in c (for later terms too) and gathered. */
void ex_col_sel_words(ex_col *c, uint32_t b0, uint32_t nb, const uint32_t *aSel, uint32_t n,
                      uint64_t *u);
/* dst[k] = src[aSel[k] - b0] for k < n, elements of 8 bytes. */
void ex_gather8(void *dst, const void *src, const uint32_t *aSel, uint32_t n, uint32_t b0);

/* ---- exec_term.c ---- */

/* aM[k] = whether row aSel[k]'s packed code lies in [lo, lo + w], xor neg
** (eAll >= 0: decided for all); NULL rows get rn. */
void ex_code_range(ex_col *c, uint32_t b0, uint32_t nb, const uint32_t *aSel, uint32_t n, int eAll,
                   uint64_t lo, uint64_t w, uint8_t neg, uint8_t rn, uint8_t *aM);
/* Is term et on c a range of c's codes in this chunk? 1 with *pr; 0 if
** not, or on a fault with *pRc set. *ppDict: the term's dictionary mask
** of this row group, built on first use (the caller frees it). */
int ex_term_codes(const ex_term *et, ex_col *c, uint8_t **ppDict, ex_crange *pr, int *pRc);
/* Build the lookup table of IN term et's integer set (aSet, sorted and
** compiled): 0 or -ENOMEM. ex_set_free frees it. */
int ex_set_compile(ex_term *et);
void ex_set_free(ex_term *et);
/* aM[k] = term et on row aSel[k] of batch [b0, b0+nb) of c. 0 or a
** CSQ_FAULT_*. */
int ex_eval_term(const ex_term *et, ex_col *c, uint32_t b0, uint32_t nb, const uint32_t *aSel,
                 uint32_t n, uint8_t *aM, uint8_t **ppDict);

/* ---- exec_bpf.c ---- */

/* Compile eBPF term et of program ep: parse its call, run the eBPF
** verifier, JIT. 0, -EINVAL with the reason in zErr, or -ENOMEM. */
int ex_bpf_compile(const ex_prog *ep, ex_term *et, char *zErr, size_t nErr);
void ex_bpf_free(ex_term *et);
/* aM[k] = eBPF term et on row aSel[k] of aligned batch [b0, b0+nb) over
** the input columns aCol. 0 or CSQ_FAULT_BPF. */
int ex_bpf_eval(const ex_term *et, ex_col *aCol, uint32_t b0, uint32_t nb, const uint32_t *aSel,
                uint32_t n, uint8_t *aM);
/* Fault reason reason as it leaves the executor: an eBPF csq_fail fault
** with the program's code in bits 63:16 (program.h, EBPF TERMS); others
** as they are. */
uint64_t ex_bpf_fault_reason(uint64_t reason);
/* aI[k] = the program of et (compiled for a CSQ_EX_BPF instruction) on row
** aSel[k], as an INTEGER. 0 or CSQ_FAULT_BPF. */
int ex_bpf_values(const ex_term *et, ex_col *aCol, uint32_t b0, uint32_t nb, const uint32_t *aSel,
                  uint32_t n, int64_t *aI);

/* ---- exec_bloom.c ---- */

/* aM[k] = join filter term et on row aSel[k] of aligned batch [b0, b0+nb)
** of c, when c is an integer or real column: 1 done (*pRc = a CSQ_FAULT_*
** if it failed), 0 not such a column (the caller takes another path).
** *ppDict: the term's mask over a narrow FOR chunk's codes in this row
** group, built on first use (the caller frees it). */
int ex_bloom_eval(const ex_term *et, ex_col *c, uint32_t b0, uint32_t nb, const uint32_t *aSel,
                  uint32_t n, uint8_t *aM, uint8_t **ppDict, int *pRc);

/* ---- exec_colcmp.c ---- */

/* aM[k] = column comparison et (x in cx, y in cy) on row aSel[k] of
** aligned batch [b0, b0+nb). 0 (it cannot fault). */
int ex_colcmp_eval(const ex_term *et, ex_col *cx, ex_col *cy, uint32_t b0, uint32_t nb,
                   const uint32_t *aSel, uint32_t n, uint8_t *aM);

/* ---- exec_top.c ---- */

/* Keep in aSel[0..*pnSel) only the program's nTop rows that sort first,
** still ascending. 0 or CSQ_FAULT_NOMEM. */
int ex_top_select(const csq_prog *pp, const ex_col *aCol, uint32_t *aSel, uint32_t *pnSel);

/* ---- exec_out.c ---- */

/* Class mask and heap bytes of column c over rows aSel[0..n). */
void ex_out_size(const ex_col *c, const uint32_t *aSel, uint32_t n, ex_outcol *o);
/* Did the job's omit mask (NULL: none) leave output column j out? */
int ex_out_omitted(const uint8_t *aOmit, int j);
/* Bytes of an output column of n rows sized by ex_out_size. */
uint64_t ex_out_bytes(const ex_outcol *o, uint32_t n);
/* Write column c over aSel[0..n) at out (ex_out_bytes of it). */
void ex_out_write(ex_col *c, const uint32_t *aSel, uint32_t n, const ex_outcol *o, uint8_t *out);

/* ---- exec_expr.c ---- */

/* Evaluate the instructions marked in aNeed over rows aSel[0..n) of batch
** [b0, b0+nb) into aEv (aM: scratch for CASE conditions, apCondDict: their
** dictionary masks). 0 or a CSQ_FAULT_*. */
int ex_ev_all(const ex_prog *ep, ex_col *aCol, uint8_t **apCondDict, ex_ev *aEv, uint8_t *aM,
              const uint8_t *aNeed, uint32_t b0, uint32_t nb, const uint32_t *aSel, uint32_t n);

/* ---- exec_group.c ---- */

void ex_ag_free(ag_tab *t);
/* Make a group with key values aK and hash h in hash slot pos (or
** CSQ_GROUP_NO_SLOT): its index, or -1 (OOM). */
int64_t ex_ag_new_group(ag_tab *t, const ex_val *aK, uint64_t h, uint32_t pos);
/* The group whose keys equal aK (hash h: csq_group_hash), created if
** none; -1 on OOM. */
int64_t ex_ag_lookup(ag_tab *t, const ex_val *aK, uint64_t h);
/* Group ids of a run's rows by hashing the key vectors. 0 or a fault. */
int ex_ag_ids_hash(ag_tab *t, const csq_prog *pp, const ex_ev *aEv, uint32_t n, const uint32_t *X,
                   uint32_t *aGid);
/* Domain of a key column for the direct table, or 0. */
uint32_t ex_key_domain(const ex_col *c);
/* Group ids through the direct table. 0 or a fault. */
int ex_ag_ids_direct(ag_tab *t, const csq_prog *pp, ex_col *aCol, uint32_t b0, uint32_t nb,
                     const uint32_t *aSel, uint32_t n, const uint32_t *X, uint32_t *aGid);
/* The run's touched groups and row counts, and its rows in group order. */
void ex_ag_order_run(ag_tab *t, const uint32_t *aGid, uint32_t n, const uint32_t *X);

/* ---- exec_agg.c ---- */

/* Aggregate the selected rows into the output area (or into pCarry's
** groups, see ex_run_one); 0 or a CSQ_FAULT_*, *pRet the completion's
** DW0-DW1. */
int ex_agg_exec(const ex_prog *ep, ex_col *aCol, const uint32_t *aSel, uint32_t nSel,
                uint32_t start, uint32_t nRow, const uint8_t *pSeed, uint64_t nSeed, uint8_t *pOut,
                uint64_t nOutArea, ex_carry *pCarry, dev_exec_ctx *ctx, uint64_t *pRet);
/* Free what a carry holds. */
void ex_carry_free(ex_carry *c);

/* ---- exec_result.c ---- */

/* Upper bound of the result's bytes with nGroup rows and nVar heap bytes. */
uint64_t ex_ag_bound(const ag_tab *t, uint64_t nGroup, uint64_t nVar);
/* Write t's result at pOut; its bytes. */
uint64_t ex_ag_write(const ag_tab *t, const csq_prog *pp, uint8_t *pOut, uint32_t nextRow);
/* Load a previous result p[0..n) into t as its starting groups. 0 or
** CSQ_FAULT_BAD_JOB / CSQ_FAULT_NOMEM. */
int ex_ag_seed(ag_tab *t, const csq_prog *pp, const int8_t *aAlias, const uint8_t *p, uint64_t n);

#endif /* CSQ_DEVICE_EXEC_INT_H */
