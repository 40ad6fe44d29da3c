/*
** tests/fuzz/gen_seeds.c - writes the seed corpora of the fuzz harnesses
** from valid encodings made by the library itself:
**   corpus/chunk/    column chunks of every encoding (mode byte 0 + chunk)
**   corpus/prog/     device programs built with csq_pb
**   corpus/devcmd/   command sequences (Identify, NVM and SLM I/O, Load /
**                    Activate / Execute of a real program over a real chunk)
** (corpus/catalog/ holds catalogs cut from real device images.)
** Usage: gen_seeds DIR   (DIR = tests/fuzz/corpus)
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "device/format/chunk.h"
#include "device/link/cmd.h"
#include "device/format/bloom.h"
#include "device/format/bpf.h"
#include "device/format/keyhash.h"
#include "device/format/program.h"

static const char *g_dir;

static void save(const char *zSub, const char *zName, const void *p, size_t n) {
  char z[1024];
  snprintf(z, sizeof(z), "%s/%s/%s", g_dir, zSub, zName);
  FILE *f = fopen(z, "wb");
  if (!f || fwrite(p, 1, n, f) != n) {
    fprintf(stderr, "cannot write %s\n", z);
    exit(1);
  }
  fclose(f);
}

static void chunk_seed(const char *zName, const csq_vec *v) {
  uint8_t *p = NULL;
  size_t n = 0;
  csq_chunk_info info;
  if (csq_chunk_encode(v, 0, v->n, &p, &n, &info) != 0) exit(1);
  uint8_t *q = malloc(n + 1);
  q[0] = 0; /* mode: recompute the checksum */
  memcpy(q + 1, p, n);
  save("chunk", zName, q, n + 1);
  free(p);
  free(q);
}

static void chunks(void) {
  csq_vec v;
  csq_vec_init(&v);
  for (int i = 0; i < 300; i++) csq_vec_push_int(&v, i * 7 - 100);
  chunk_seed("int_for", &v);
  csq_vec_reset(&v);
  for (int i = 0; i < 300; i++) csq_vec_push_int(&v, i / 50);
  chunk_seed("int_rle", &v);
  csq_vec_reset(&v);
  for (int i = 0; i < 40; i++) (i % 5) ? csq_vec_push_int(&v, 42) : csq_vec_push_null(&v);
  chunk_seed("const_int_nulls", &v);
  csq_vec_reset(&v);
  for (int i = 0; i < 9; i++) csq_vec_push_null(&v);
  chunk_seed("all_null", &v);
  csq_vec_reset(&v);
  chunk_seed("empty", &v);
  for (int i = 0; i < 100; i++)
    (i % 7) ? csq_vec_push_real(&v, i * 0.25 - 3) : csq_vec_push_null(&v);
  chunk_seed("real", &v); /* quarters: REAL_DEC */
  csq_vec_reset(&v);
  for (int i = 0; i < 100; i++) (i % 9) ? csq_vec_push_real(&v, i / 3.0) : csq_vec_push_null(&v);
  chunk_seed("real_plain", &v);
  csq_vec_reset(&v);
  static const char *az[] = {"apple", "banana", "cherry", "apple", "", "banana"};
  for (int i = 0; i < 120; i++)
    csq_vec_push_bytes(&v, CSQ_TEXT, az[i % 6], (uint32_t)strlen(az[i % 6]));
  chunk_seed("text_dict", &v);
  csq_vec_reset(&v);
  for (int i = 0; i < 50; i++) {
    char z[32];
    int n = snprintf(z, sizeof(z), "row-%d", i * 31);
    (i % 9) ? csq_vec_push_bytes(&v, CSQ_TEXT, z, (uint32_t)n) : csq_vec_push_null(&v);
  }
  chunk_seed("text_plain", &v);
  csq_vec_reset(&v);
  for (int i = 0; i < 30; i++) {
    uint8_t b[8] = {(uint8_t)i, 0, 0xFF, 1, 2, 3, 4, 5};
    csq_vec_push_bytes(&v, CSQ_BLOB, b, (uint32_t)(i % 8));
  }
  chunk_seed("blob", &v);
  csq_vec_reset(&v);
  for (int i = 0; i < 60; i++) {
    switch (i % 5) {
    case 0:
      csq_vec_push_int(&v, -i);
      break;
    case 1:
      csq_vec_push_real(&v, i / 3.0);
      break;
    case 2:
      csq_vec_push_bytes(&v, CSQ_TEXT, "mixed", 5);
      break;
    case 3:
      csq_vec_push_bytes(&v, CSQ_BLOB, "\x01\x02", 2);
      break;
    default:
      csq_vec_push_null(&v);
    }
  }
  chunk_seed("tagged", &v);
  csq_vec_reset(&v);
  csq_vec_push_int(&v, INT64_MIN);
  csq_vec_push_int(&v, INT64_MAX);
  chunk_seed("int_wide", &v);
  csq_vec_free(&v);
}

/* A program: inputs rowid + column 0, output both, where col0 > 10 AND (col0
** IN (1,2,3) OR col0 LIKE 'a%'); kind 4 adds row numbers, kind 5 a top-N,
** kind 6 an eBPF term over column 0 and a constant (bpf.h), kind 7 a join
** filter (CSQ_OP_BLOOM) over column 0. */
static int build_prog(int kind, uint8_t **pp, size_t *pn) {
  csq_pb *b = csq_pb_new();
  int s0 = csq_pb_input(b, 0);
  int s1 = csq_pb_input(b, 1);
  csq_pb_output(b, s0);
  csq_pb_output(b, s1);
  if (kind >= 1) {
    int k = csq_pb_const_int(b, 10);
    csq_pb_clause(b);
    csq_pb_term(b, CSQ_OP_GT, 0, s1, k, 0, 0);
  }
  if (kind >= 2) {
    int k1 = csq_pb_const_int(b, 1);
    csq_pb_const_int(b, 2);
    csq_pb_const_real(b, 3.5);
    int kl = csq_pb_const_bytes(b, CSQ_TEXT, "a%", 2);
    csq_pb_clause(b);
    csq_pb_term(b, CSQ_OP_IN, 0, s1, k1, 3, 0);
    csq_pb_term(b, CSQ_OP_LIKE, CSQ_TF_NOT, s1, kl, 0, '\\');
  }
  if (kind >= 3) {
    int ka = csq_pb_const_bytes(b, CSQ_BLOB, "\x00\x01", 2);
    int kb = csq_pb_const_null(b);
    csq_pb_clause(b);
    csq_pb_term(b, CSQ_OP_BETWEEN, CSQ_TF_NOCASE, s1, ka, kb, 0);
    csq_pb_term(b, CSQ_OP_ISNULL, 0, s0, 0, 0, 0);
    csq_pb_term(b, CSQ_OP_GLOB, 0, s1, csq_pb_const_bytes(b, CSQ_TEXT, "*x?[a-c]", 8), 0, 0);
  }
  if (kind == 6) { /* r0 = args[0].v % 7; return r0 == 0 */
    static const uint8_t aIns[] = {0x79, 0x10, 0,    0,    0, 0, 0, 0, 0x97, 0,    0,    0, 7, 0, 0,
                                   0,    0x15, 0,    2,    0, 0, 0, 0, 0,    0xb7, 0,    0, 0, 0, 0,
                                   0,    0,    0x95, 0,    0, 0, 0, 0, 0,    0,    0xb7, 0, 0, 0, 1,
                                   0,    0,    0,    0x95, 0, 0, 0, 0, 0,    0,    0};
    int kc = csq_pb_const_int(b, 5);
    uint32_t aW[2] = {(uint32_t)s1, (uint32_t)kc | CSQ_BPF_ARG_CONST};
    uint8_t *pCall;
    size_t nCall;
    if (csq_bpf_call_build(2, aW, aIns, sizeof(aIns) / 8, &pCall, &nCall)) return -1;
    int k = csq_pb_const_bytes(b, CSQ_BLOB, pCall, (uint32_t)nCall);
    free(pCall);
    csq_pb_clause(b);
    csq_pb_term(b, CSQ_OP_BPF, 0, s1, k, 0, 0);
  }
  if (kind == 7) { /* a join filter of keys 1..20 (bloom.h, keyhash.h) */
    uint8_t f[64];
    csq_bloom_init(f, sizeof(f));
    for (int64_t i = 1; i <= 20; i++) csq_bloom_add(f, sizeof(f), csq_key_hash_int(i));
    csq_pb_clause(b);
    csq_pb_bloom(b, 0, s1, f, sizeof(f));
  }
  if (kind == 4) csq_pb_rownums(b); /* row numbers and omit masks */
  if (kind == 5) {                  /* a top-N on two keys */
    csq_pb_topn(b, 7);
    csq_pb_topn_key(b, s1, 1);
    csq_pb_topn_key(b, s0, 0);
  }
  int rc = csq_pb_finish(b, pp, pn);
  csq_pb_free(b);
  return rc;
}

static void progs(void) {
  for (int kind = 0; kind < 8; kind++) {
    uint8_t *p;
    size_t n;
    char z[32];
    if (build_prog(kind, &p, &n) != 0) exit(1);
    snprintf(z, sizeof(z), "prog%d", kind);
    save("prog", z, p, n);
    free(p);
  }
}

/* ---- device command sequences ---- */
static uint8_t g_seq[1 << 18];
static size_t g_nSeq;

static void rec(const csq_sqe *e, const void *p, uint16_t n) {
  memcpy(g_seq + g_nSeq, e, sizeof(*e));
  g_nSeq += sizeof(*e);
  g_seq[g_nSeq++] = (uint8_t)n;
  g_seq[g_nSeq++] = (uint8_t)(n >> 8);
  if (n) memcpy(g_seq + g_nSeq, p, n);
  g_nSeq += n;
}

static csq_sqe sqe(uint8_t op, uint32_t nsid) {
  csq_sqe e;
  memset(&e, 0, sizeof(e));
  e.opcode = op;
  e.nsid = nsid;
  return e;
}

static void devcmds(void) {
  csq_sqe e;
  uint8_t blk[4096];
  memset(blk, 0xA5, sizeof(blk));
  /* identify, media I/O */
  g_nSeq = 0;
  e = sqe(CSQ_ADM_IDENTIFY, 0);
  e.cdw10 = 1;
  rec(&e, NULL, 0);
  e = sqe(CSQ_ADM_IDENTIFY, 1);
  e.cdw10 = 0;
  rec(&e, NULL, 0);
  e = sqe(CSQ_NVM_WRITE, CSQ_NSID_NVM);
  e.cdw10 = 5;
  e.cdw12 = 0;
  rec(&e, blk, 64);
  e = sqe(CSQ_NVM_READ, CSQ_NSID_NVM);
  e.cdw10 = 5;
  e.cdw12 = 1;
  rec(&e, NULL, 0);
  e = sqe(CSQ_NVM_FLUSH, CSQ_NSID_NVM);
  rec(&e, NULL, 0);
  e = sqe(CSQ_NVM_RESV_ACQUIRE, CSQ_NSID_NVM);
  rec(&e, NULL, 0);
  e = sqe(CSQ_NVM_RESV_RELEASE, CSQ_NSID_NVM);
  rec(&e, NULL, 0);
  save("devcmd", "nvm", g_seq, g_nSeq);
  /* SLM */
  g_nSeq = 0;
  e = sqe(CSQ_SLM_WRITE, CSQ_NSID_SLM);
  e.cdw10 = 4096;
  e.cdw12 = 256;
  rec(&e, blk, 256);
  e = sqe(CSQ_SLM_READ, CSQ_NSID_SLM);
  e.cdw10 = 4096;
  e.cdw12 = 256;
  rec(&e, NULL, 0);
  e = sqe(CSQ_SLM_FILL, CSQ_NSID_SLM);
  e.cdw10 = 8192;
  e.cdw12 = 128;
  e.cdw13 = 7;
  rec(&e, NULL, 0);
  {
    csq_lba_range r = {CSQ_NSID_NVM, 2, 5};
    e = sqe(CSQ_SLM_COPY, CSQ_NSID_SLM);
    e.cdw10 = 16384;
    e.cdw12 = 0;
    rec(&e, &r, sizeof(r));
    csq_mrange m = {CSQ_NSID_SLM, 0, 256, 4096, 0};
    e = sqe(CSQ_SLM_COPY, CSQ_NSID_SLM);
    e.cdw10 = 32768;
    e.cdw12 = 1u << 8;
    rec(&e, &m, sizeof(m));
    e = sqe(CSQ_ADM_MRS_MGMT, 0);
    e.cdw10 = 0;
    e.cdw11 = 1;
    rec(&e, &m, sizeof(m));
  }
  save("devcmd", "slm", g_seq, g_nSeq);
  /* a whole Execute: chunk + job in SLM, program loaded and activated */
  g_nSeq = 0;
  {
    csq_vec v;
    csq_vec_init(&v);
    for (int i = 0; i < 100; i++) csq_vec_push_int(&v, i);
    uint8_t *c0, *c1;
    size_t n0, n1;
    csq_chunk_info i0, i1;
    csq_chunk_encode(&v, 0, v.n, &c0, &n0, &i0); /* rowids */
    csq_chunk_encode(&v, 0, v.n, &c1, &n1, &i1); /* column 0 */
    uint8_t job[24 + 48];
    memset(job, 0, sizeof(job));
    uint32_t magic = CSQ_JOB_MAGIC, nRow = 100, nIn = 2;
    memcpy(job, &magic, 4);
    memcpy(job + 4, &nRow, 4);
    memcpy(job + 8, &nIn, 4);
    uint64_t t0[3] = {0, n0, i0.xxh3}, t1[3] = {(n0 + 7) & ~7ull, n1, i1.xxh3};
    memcpy(job + 24, t0, 24);
    memcpy(job + 48, t1, 24);
    uint64_t hJob = csq_job_hash(job, sizeof(job));
    memcpy(job + 16, &hJob, 8);
    static uint8_t in[16384];
    memcpy(in, c0, n0);
    memcpy(in + t1[0], c1, n1);
    uint8_t *p;
    size_t np;
    build_prog(1, &p, &np);
    uint64_t id = csq_prog_id(p, np);
    e = sqe(CSQ_SLM_WRITE, CSQ_NSID_SLM);
    e.cdw10 = 0;
    e.cdw12 = sizeof(job);
    rec(&e, job, sizeof(job));
    uint32_t nIn4 = (uint32_t)((t1[0] + n1 + 3) & ~3ull);
    e = sqe(CSQ_SLM_WRITE, CSQ_NSID_SLM);
    e.cdw10 = 4096;
    e.cdw12 = nIn4;
    rec(&e, in, (uint16_t)nIn4);
    e = sqe(CSQ_ADM_LOAD_PROGRAM, 0);
    e.cdw10 = 3 | ((uint32_t)CSQ_PTYPE_CSQ << 24);
    e.cdw11 = (uint32_t)np;
    e.cdw12 = (uint32_t)np;
    e.cdw13 = 0;
    e.cdw14 = (uint32_t)id;
    e.cdw15 = (uint32_t)(id >> 32);
    rec(&e, p, (uint16_t)np);
    e = sqe(CSQ_ADM_PROGRAM_ACTIVATION, 0);
    e.cdw10 = 3 | 1u << 16;
    rec(&e, NULL, 0);
    csq_mrange r[3] = {{CSQ_NSID_SLM, 0, 4096, 0, 0},
                       {CSQ_NSID_SLM, 0, 16384, 4096, 0},
                       {CSQ_NSID_SLM, 0, 65536, 65536, 0}};
    e = sqe(CSQ_CP_EXECUTE, CSQ_NSID_CP);
    e.cdw10 = 3 | 0xFFFFu << 16;
    e.cdw11 = 3;
    e.cdw12 = (uint32_t)id;
    e.cdw13 = (uint32_t)(id >> 32);
    rec(&e, r, sizeof(r));
    e = sqe(CSQ_SLM_READ, CSQ_NSID_SLM);
    e.cdw10 = 65536;
    e.cdw12 = 4096;
    rec(&e, NULL, 0);
    e = sqe(CSQ_ADM_PROGRAM_ACTIVATION, 0);
    e.cdw10 = 3;
    rec(&e, NULL, 0);
    e = sqe(CSQ_ADM_LOAD_PROGRAM, 0);
    e.cdw10 = 3 | 1u << 16;
    rec(&e, NULL, 0);
    free(p);
    free(c0);
    free(c1);
    csq_vec_free(&v);
  }
  save("devcmd", "execute", g_seq, g_nSeq);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gen_seeds DIR\n");
    return 2;
  }
  g_dir = argv[1];
  chunks();
  progs();
  devcmds();
  return 0;
}
