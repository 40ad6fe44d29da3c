/*
** tests/unit/test_device_cmds.c - every command of the emulated device on
** memory and file media (buffered and O_DIRECT): Identify decoded with
** libnvme's structs, NVM Read/Write/Flush with bounds errors, SLM
** Read/Write/Fill/Copy with bounds and alignment errors, Load Program in
** chunks, Program Activation, MRS Management, Execute (inline ranges and
** MRS, faults, parallel engines), counters, error messages, the SLM
** allocator, device sharing by path, two devices at once, and reservations
** between queues and between processes.
*/
#include <libnvme.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>

#include "device/engine/ptype.h"
#include "tests/unit/helpers.h"

/* ---- a toy program type -------------------------------------------------
** Program bytes: "TEST" + anything. Run: param1 selects the behaviour:
**   0  sum the uint32 values of every range, write the sum (uint64) at SLM
**      address param0, return it; counts rows_scanned = number of values
**   1  fail with reason 42
**   2  sleep 100 ms, return the engine index
**   3  read LBA 0..1 into SLM at param0 through ctx->xReadLba
*/
#define TEST_PTYPE 0x7E

static int tp_verify(const uint8_t *p, size_t n, void **pp, char *zErr, size_t nErr) {
  if (n < 4 || memcmp(p, "TEST", 4)) {
    snprintf(zErr, nErr, "missing TEST magic");
    return 1;
  }
  *pp = malloc(8);
  return *pp ? 0 : 1;
}

static int tp_run(void *pCompiled, dev_exec_ctx *ctx, uint64_t *pRet) {
  uint64_t sum = 0;
  int i;
  (void)pCompiled;
  switch (ctx->aParam[1]) {
  case 0:
    for (i = 0; i < ctx->nRange; i++) {
      const uint32_t *a = (const uint32_t *)(ctx->pSlm + ctx->aRange[i].addr);
      uint64_t k, n = ctx->aRange[i].len / 4;
      for (k = 0; k < n; k++) sum += a[k];
      ctx->pStats->rows_scanned += n;
    }
    if (ctx->aParam[0] + 8 > ctx->nSlm) return CSQ_SC_PROGRAM_FAULT;
    memcpy(ctx->pSlm + ctx->aParam[0], &sum, 8);
    *pRet = sum;
    return 0;
  case 1:
    *pRet = 42;
    return CSQ_SC_PROGRAM_FAULT;
  case 2: {
    struct timespec ts = {0, 100 * 1000000};
    nanosleep(&ts, NULL);
    *pRet = (uint64_t)ctx->iEngine;
    return 0;
  }
  case 3: {
    csq_lba_range r = {CSQ_NSID_NVM, 2, 0};
    return ctx->xReadLba(ctx, &r, 1, ctx->pSlm + ctx->aParam[0]);
  }
  }
  return CSQ_SC_PROGRAM_FAULT;
}

static void tp_free(void *p) {
  free(p);
}

static const dev_ptype testType = {TEST_PTYPE, "test", tp_verify, tp_run, tp_free};

static void sqe_init(csq_sqe *s, uint8_t op, uint32_t nsid) {
  memset(s, 0, sizeof(*s));
  s->opcode = op;
  s->nsid = nsid;
}

static int load_program(dev_queue *q, uint16_t pind, const void *p, uint32_t n, uint64_t id,
                        uint32_t chunk, csq_cqe *pLast) {
  uint32_t off;
  int rc = 0;
  for (off = 0; off < n && rc == 0; off += chunk) {
    csq_sqe s;
    sqe_init(&s, CSQ_ADM_LOAD_PROGRAM, 0);
    s.cdw10 = pind | ((uint32_t)TEST_PTYPE << 24);
    s.cdw11 = n;
    s.cdw12 = n - off < chunk ? n - off : chunk;
    s.cdw13 = off;
    s.cdw14 = (uint32_t)id;
    s.cdw15 = (uint32_t)(id >> 32);
    s.prp1 = (uintptr_t)p + off;
    rc = dev_exec(q, &s, pLast);
  }
  return rc;
}

static int activate(dev_queue *q, uint16_t pind, int bOn) {
  csq_sqe s;
  sqe_init(&s, CSQ_ADM_PROGRAM_ACTIVATION, 0);
  s.cdw10 = pind | ((uint32_t)(bOn ? 1 : 0) << 16);
  return dev_exec(q, &s, NULL);
}

static int execute(dev_queue *q, uint16_t pind, uint16_t mrs, const csq_mrange *a, uint32_t n,
                   uint64_t p0, uint64_t p1, csq_cqe *pC) {
  csq_sqe s;
  sqe_init(&s, CSQ_CP_EXECUTE, CSQ_NSID_CP);
  s.cdw10 = pind | ((uint32_t)mrs << 16);
  s.cdw11 = n;
  s.cdw12 = (uint32_t)p0;
  s.cdw13 = (uint32_t)(p0 >> 32);
  s.cdw14 = (uint32_t)p1;
  s.cdw15 = (uint32_t)(p1 >> 32);
  s.prp1 = (uintptr_t)a;
  return dev_exec(q, &s, pC);
}

static void test_identify(dev_device *d, dev_queue *q) {
  struct nvme_id_ctrl *c = aligned_alloc(4096, 4096);
  struct nvme_id_ns *ns = aligned_alloc(4096, 4096);
  csq_id_vs vs;
  csq_sqe s;
  sqe_init(&s, CSQ_ADM_IDENTIFY, 0);
  s.cdw10 = NVME_IDENTIFY_CNS_CTRL;
  s.prp1 = (uintptr_t)c;
  CHECK_RC(dev_exec(q, &s, NULL), 0);
  CHECK(memcmp(c->mn, "csq emulated", 12) == 0);
  CHECK_RC(c->nn, 3);
  CHECK_RC(c->sqes, 0x66);
  memcpy(&vs, c->vs, sizeof(vs));
  CHECK_RC(vs.magic, CSQ_ID_MAGIC);
  CHECK_RC(vs.version, 1);
  CHECK(vs.n_engines >= 1);
  CHECK(vs.slm_bytes == dev_caps(d)->slm_bytes);
  CHECK(vs.max_qdepth >= 64);
  CHECK_RC(vs.ptypes[0], CSQ_PTYPE_CSQ);
  CHECK(memcmp(&vs, dev_caps(d), sizeof(vs)) == 0);
  sqe_init(&s, CSQ_ADM_IDENTIFY, CSQ_NSID_NVM);
  s.cdw10 = NVME_IDENTIFY_CNS_NS;
  s.prp1 = (uintptr_t)ns;
  CHECK_RC(dev_exec(q, &s, NULL), 0);
  CHECK(ns->nsze == dev_nvm_blocks(d));
  CHECK(ns->nsze >= (1ull << 28));
  CHECK_RC(ns->lbaf[ns->flbas & 0xF].ds, 12);
  s.nsid = 9;
  CHECK_RC(dev_exec(q, &s, NULL), CSQ_SC_INVALID_NS);
  free(c);
  free(ns);
}

static void test_nvm(dev_device *d, dev_queue *q) {
  size_t nBig = 3 * 1024 * 1024 + 8192; /* several chunks, engine path */
  uint8_t *w = malloc(nBig), *r = malloc(nBig + 1);
  uint64_t nBlk = dev_nvm_blocks(d);
  csq_sqe s;
  fill_pattern(w, nBig, 1);
  /* Small (inline) and large (engine), aligned and unaligned host buffers. */
  CHECK_RC(dev_nvm_write(q, 10, 1, w), 0);
  CHECK_RC(dev_nvm_read(q, 10, 1, r + 1), 0);
  CHECK(memcmp(w, r + 1, 4096) == 0);
  CHECK_RC(dev_nvm_write(q, 60, (uint32_t)(nBig / 4096), w), 0); /* crosses memory segments */
  memset(r, 0, nBig);
  CHECK_RC(dev_nvm_read(q, 60, (uint32_t)(nBig / 4096), r + 1), 0);
  CHECK(memcmp(w, r + 1, nBig) == 0);
  CHECK_RC(dev_nvm_flush(q), 0);
  /* Never written: zeros (sparse file, unallocated segment). */
  memset(r, 0xAA, 8192);
  CHECK_RC(dev_nvm_read(q, 5000000, 2, r), 0);
  CHECK(r[0] == 0 && r[8191] == 0);
  /* The last block is addressable, one past it is not. */
  CHECK_RC(dev_nvm_write(q, nBlk - 1, 1, w), 0);
  CHECK_RC(dev_nvm_read(q, nBlk - 1, 1, r), 0);
  CHECK(memcmp(w, r, 4096) == 0);
  CHECK_RC(dev_nvm_read(q, nBlk - 1, 2, r), CSQ_SC_LBA_RANGE);
  CHECK(strstr(dev_errmsg(q), "LBA Out of Range") != NULL);
  CHECK(strstr(dev_errmsg(q), dev_path(d)) != NULL);
  CHECK(strstr(dev_errmsg(q), "Read of LBAs") != NULL);
  CHECK_RC(dev_nvm_write(q, nBlk, 1, w), CSQ_SC_LBA_RANGE);
  sqe_init(&s, CSQ_NVM_READ, CSQ_NSID_NVM); /* no data pointer */
  CHECK_RC(dev_exec(q, &s, NULL), CSQ_SC_INVALID_FIELD);
  sqe_init(&s, 0x7F, CSQ_NSID_NVM);
  CHECK_RC(dev_exec(q, &s, NULL), CSQ_SC_INVALID_OPCODE);
  sqe_init(&s, CSQ_NVM_READ, 77);
  CHECK_RC(dev_exec(q, &s, NULL), CSQ_SC_INVALID_NS);
  /* Two failures in flight, reaped together: each completion keeps its own
  ** description and device detail, whichever is handled last (dev_errmsg is
  ** only the latest). */
  {
    csq_sqe a, b;
    csq_cqe c1, c2;
    char zA[80], zB[80];
    sqe_init(&a, CSQ_NVM_READ, CSQ_NSID_NVM);
    a.cdw10 = (uint32_t)(nBlk - 1);
    a.cdw11 = (uint32_t)((nBlk - 1) >> 32);
    a.cdw12 = 1; /* two blocks: one past the end */
    a.prp1 = (uint64_t)(uintptr_t)r;
    b = a;
    b.cdw10 = (uint32_t)(nBlk + 100);
    b.cdw11 = (uint32_t)((nBlk + 100) >> 32);
    snprintf(zA, sizeof(zA), "LBAs %llu..%llu, namespace has", (unsigned long long)nBlk - 1,
             (unsigned long long)nBlk);
    snprintf(zB, sizeof(zB), "LBAs %llu..%llu, namespace has", (unsigned long long)nBlk + 100,
             (unsigned long long)nBlk + 101);
    CHECK_RC(dev_submit(q, &a), 0);
    CHECK_RC(dev_submit(q, &b), 0);
    CHECK_RC(dev_reap(q, &c1, 5000), 0);
    CHECK_RC(dev_reap(q, &c2, 5000), 0);
    const csq_cqe *pA = c1.cid == a.cid ? &c1 : &c2, *pB = c1.cid == a.cid ? &c2 : &c1;
    CHECK(strstr(dev_cqe_errmsg(q, pA), "LBA Out of Range") != NULL, "%s", dev_cqe_errmsg(q, pA));
    CHECK(strstr(dev_cqe_errmsg(q, pA), zA) != NULL, "%s", dev_cqe_errmsg(q, pA));
    CHECK(strstr(dev_cqe_errmsg(q, pB), zB) != NULL, "%s", dev_cqe_errmsg(q, pB));
    CHECK(strstr(dev_cqe_errmsg(q, pA), zB) == NULL, "%s", dev_cqe_errmsg(q, pA));
  }
  free(w);
  free(r);
}

static void test_slm(dev_device *d, dev_queue *q) {
  uint64_t nSlm = dev_caps(d)->slm_bytes;
  uint8_t w[8192], r[8192];
  csq_lba_range aR[3];
  csq_mrange aM[2];
  csq_sqe s;
  int i;
  fill_pattern(w, sizeof(w), 2);
  CHECK_RC(dev_slm_write(q, 4096, w, 8192), 0);
  CHECK_RC(dev_slm_read(q, 4096, r, 8192), 0);
  CHECK(memcmp(w, r, 8192) == 0);
  CHECK_RC(dev_slm_write(q, 2, w, 8), CSQ_SC_SLM_RANGE); /* misaligned address */
  CHECK_RC(dev_slm_write(q, 8, w, 6), CSQ_SC_SLM_RANGE); /* misaligned length */
  CHECK_RC(dev_slm_read(q, nSlm - 4, r, 8), CSQ_SC_SLM_RANGE);
  CHECK_RC(dev_slm_read(q, nSlm - 8, r, 8), 0);
  CHECK_RC(dev_slm_read(q, UINT64_MAX - 3, r, 8), CSQ_SC_SLM_RANGE); /* overflow */
  CHECK(strstr(dev_errmsg(q), "SLM Read of 8 bytes") != NULL);
  /* Fill */
  sqe_init(&s, CSQ_SLM_FILL, CSQ_NSID_SLM);
  s.cdw10 = 4096;
  s.cdw12 = 64;
  s.cdw13 = 0x5A;
  CHECK_RC(dev_exec(q, &s, NULL), 0);
  CHECK_RC(dev_slm_read(q, 4096, r, 128), 0);
  CHECK(r[0] == 0x5A && r[63] == 0x5A && r[64] == w[64]);
  /* Memory Copy NVM -> SLM, three ranges back to back. */
  for (i = 0; i < 3; i++) {
    fill_pattern(w, 4096, 100 + (uint64_t)i);
    CHECK_RC(dev_nvm_write(q, 200 + (uint64_t)i * 10, 1, w), 0);
    aR[i].nsid = CSQ_NSID_NVM;
    aR[i].nlb = 1;
    aR[i].slba = 200 + (uint64_t)i * 10;
  }
  CHECK_RC(dev_slm_copy(q, 65536 + 4, aR, 3), 0); /* 4-byte aligned destination */
  for (i = 0; i < 3; i++) {
    fill_pattern(w, 4096, 100 + (uint64_t)i);
    CHECK_RC(dev_slm_read(q, 65536 + 4 + (uint64_t)i * 4096, r, 4096), 0);
    CHECK(memcmp(w, r, 4096) == 0);
  }
  aR[1].slba = dev_nvm_blocks(d);
  CHECK_RC(dev_slm_copy(q, 65536, aR, 3), CSQ_SC_LBA_RANGE);
  aR[1].slba = 210;
  aR[1].nlb = 0;
  CHECK_RC(dev_slm_copy(q, 65536, aR, 3), CSQ_SC_INVALID_FIELD);
  aR[1].nlb = 1;
  CHECK_RC(dev_slm_copy(q, nSlm - 4096, aR, 3), CSQ_SC_SLM_RANGE);
  CHECK_RC(dev_slm_copy(q, 65536, aR, 0), -EINVAL);
  /* Memory Copy SLM -> SLM (descriptor format 1). */
  aM[0] = (csq_mrange){CSQ_NSID_SLM, 0, 16, 65536 + 4, 0};
  aM[1] = (csq_mrange){CSQ_NSID_SLM, 0, 8, 65536 + 4 + 4096, 0};
  sqe_init(&s, CSQ_SLM_COPY, CSQ_NSID_SLM);
  s.cdw10 = 1 << 20;
  s.cdw12 = 1 | (1u << 8);
  s.prp1 = (uintptr_t)aM;
  CHECK_RC(dev_exec(q, &s, NULL), 0);
  CHECK_RC(dev_slm_read(q, 1 << 20, r, 24), 0);
  fill_pattern(w, 4096, 100);
  CHECK(memcmp(r, w, 16) == 0);
  fill_pattern(w, 4096, 101);
  CHECK(memcmp(r + 16, w, 8) == 0);
  aM[1].addr = 3; /* misaligned source */
  CHECK_RC(dev_exec(q, &s, NULL), CSQ_SC_SLM_RANGE);
}

static void test_programs(dev_device *d, dev_queue *q) {
  static const char zProg[] = "TEST program body that is loaded in several chunks........";
  uint32_t nProg = (uint32_t)sizeof(zProg);
  uint32_t aVal[256];
  csq_mrange aM[2];
  csq_cqe c;
  csq_sqe s;
  dev_stats st0 = *dev_queue_stats(q), *st;
  uint64_t sum = 0, got = 0;
  int i;
  CHECK_RC(dev_ptype_register(&testType), 0);
  CHECK_RC(dev_ptype_register(&testType), 0);
  for (i = 0; i < 256; i++) {
    aVal[i] = (uint32_t)i * 3 + 1;
    sum += aVal[i];
  }
  CHECK_RC(dev_slm_write(q, 8192, aVal, sizeof(aVal)), 0);
  aM[0] = (csq_mrange){CSQ_NSID_SLM, 0, 512, 8192, 0};
  aM[1] = (csq_mrange){CSQ_NSID_SLM, 0, 512, 8192 + 512, 0};

  CHECK_RC(execute(q, 3, 0xFFFF, aM, 2, 0, 0, NULL), CSQ_SC_NO_PROGRAM);
  CHECK_RC(load_program(q, 3, zProg, nProg, 0x1234, 16, &c), 0);
  CHECK_RC(c.dw0 & 1, 0);
  CHECK_RC(execute(q, 3, 0xFFFF, aM, 2, 0, 0, NULL), CSQ_SC_NOT_ACTIVATED);
  CHECK_RC(activate(q, 3, 1), 0);
  CHECK_RC(execute(q, 3, 0xFFFF, aM, 2, 0, 0, &c), 0);
  CHECK(((uint64_t)c.dw1 << 32 | c.dw0) == sum);
  CHECK_RC(dev_slm_read(q, 0, &got, 8), 0);
  CHECK(got == sum);
  st = dev_queue_stats(q);
  CHECK_RC(st->programs_executed - st0.programs_executed, 1);
  CHECK_RC(st->rows_scanned - st0.rows_scanned, 256);
  CHECK(st->cmd_by_opcode[0][CSQ_ADM_LOAD_PROGRAM] - st0.cmd_by_opcode[0][CSQ_ADM_LOAD_PROGRAM] ==
        4);
  /* Same identifier again: free. Different one into an active slot: refused. */
  CHECK_RC(load_program(q, 3, zProg, nProg, 0x1234, 64, &c), 0);
  CHECK_RC(c.dw0 & 1, 1);
  CHECK_RC(load_program(q, 3, zProg, nProg, 0x9999, 64, NULL), CSQ_SC_PROGRAM_IN_USE);
  /* MRS */
  sqe_init(&s, CSQ_ADM_MRS_MGMT, 0);
  s.cdw11 = 2;
  s.prp1 = (uintptr_t)aM;
  CHECK_RC(dev_exec(q, &s, &c), 0);
  uint16_t mrs = (uint16_t)c.dw0;
  CHECK(mrs != 0 && mrs != 0xFFFF);
  CHECK_RC(execute(q, 3, mrs, NULL, 0, 16, 0, &c), 0);
  CHECK(c.dw0 == (uint32_t)sum);
  sqe_init(&s, CSQ_ADM_MRS_MGMT, 0);
  s.cdw10 = 1 | ((uint32_t)mrs << 16);
  CHECK_RC(dev_exec(q, &s, NULL), 0);
  CHECK_RC(execute(q, 3, mrs, NULL, 0, 16, 0, NULL), CSQ_SC_INVALID_MRS);
  CHECK_RC(dev_exec(q, &s, NULL), CSQ_SC_INVALID_MRS);
  aM[1].addr = dev_caps(d)->slm_bytes; /* out of SLM */
  sqe_init(&s, CSQ_ADM_MRS_MGMT, 0);
  s.cdw11 = 2;
  s.prp1 = (uintptr_t)aM;
  CHECK_RC(dev_exec(q, &s, NULL), CSQ_SC_SLM_RANGE);
  CHECK_RC(execute(q, 3, 0xFFFF, aM, 2, 0, 0, NULL), CSQ_SC_SLM_RANGE);
  aM[1].addr = 8192 + 512;
  CHECK_RC(execute(q, 3, 0xFFFF, aM, 300, 0, 0, NULL), CSQ_SC_MAX_RANGES);
  /* Run-time fault with a reason. */
  CHECK_RC(execute(q, 3, 0xFFFF, aM, 2, 0, 1, &c), CSQ_SC_PROGRAM_FAULT);
  CHECK_RC(c.dw0, 42);
  CHECK(strstr(dev_errmsg(q), "Program Fault") != NULL);
  /* A program reading media through its context. */
  {
    uint8_t w[8192], r[8192];
    fill_pattern(w, sizeof(w), 77);
    CHECK_RC(dev_nvm_write(q, 0, 2, w), 0);
    CHECK_RC(execute(q, 3, 0xFFFF, NULL, 0, 1 << 21, 3, NULL), 0);
    CHECK_RC(dev_slm_read(q, 1 << 21, r, 8192), 0);
    CHECK(memcmp(w, r, 8192) == 0);
    CHECK_RC(execute(q, 3, 0xFFFF, NULL, 0, dev_caps(d)->slm_bytes - 4096, 3, NULL),
             CSQ_SC_SLM_RANGE);
  }
  /* Deactivate, unload, errors. */
  CHECK_RC(activate(q, 3, 0), 0);
  CHECK_RC(execute(q, 3, 0xFFFF, aM, 2, 0, 0, NULL), CSQ_SC_NOT_ACTIVATED);
  CHECK_RC(load_program(q, 3, "BAD program", 12, 0x5555, 64, NULL), CSQ_SC_INVALID_PROGRAM);
  CHECK(strstr(dev_errmsg(q), "missing TEST magic") != NULL);
  CHECK_RC(activate(q, 3, 1), CSQ_SC_NO_PROGRAM); /* the rejected program left the slot empty */
  CHECK_RC(activate(q, 9999, 1), CSQ_SC_INVALID_PIND);
  CHECK_RC(execute(q, 9999, 0xFFFF, NULL, 0, 0, 0, NULL), CSQ_SC_INVALID_PIND);
  {
    csq_sqe l;
    sqe_init(&l, CSQ_ADM_LOAD_PROGRAM, 0);
    l.cdw10 = 4 | (0x33u << 24); /* unregistered type */
    l.cdw11 = 8;
    l.cdw12 = 8;
    l.prp1 = (uintptr_t)zProg;
    CHECK_RC(dev_exec(q, &l, NULL), CSQ_SC_INVALID_PROGRAM);
    l.cdw10 = 4 | ((uint32_t)TEST_PTYPE << 24);
    l.cdw11 = dev_caps(d)->max_prog_bytes + 1;
    CHECK_RC(dev_exec(q, &l, NULL), CSQ_SC_PROGRAM_TOO_BIG);
    l.cdw11 = 64;
    l.cdw13 = 8; /* chunk without a start */
    CHECK_RC(dev_exec(q, &l, NULL), CSQ_SC_INVALID_FIELD);
  }
  /* Several Executes run in parallel on the engines. */
  CHECK_RC(load_program(q, 5, zProg, nProg, 0x77, 1024, NULL), 0);
  CHECK_RC(activate(q, 5, 1), 0);
  {
    int nEng = dev_caps(d)->n_engines, n = nEng * 2;
    struct timespec t0, t1;
    csq_cqe cc;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (i = 0; i < n; i++) {
      sqe_init(&s, CSQ_CP_EXECUTE, CSQ_NSID_CP);
      s.cdw10 = 5 | (0xFFFFu << 16);
      s.cdw14 = 2;
      CHECK_RC(dev_submit(q, &s), 0);
    }
    /* Deactivating while they run is refused. */
    usleep(20000);
    CHECK_RC(activate(q, 5, 0), CSQ_SC_PROGRAM_IN_USE);
    for (i = 0; i < n; i++) {
      CHECK_RC(dev_reap(q, &cc, 5000), 0);
      CHECK(csq_cqe_ok(&cc));
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    printf("note: %d Executes of 100 ms on %d engines took %.0f ms\n", n, nEng, ms);
    if (nEng > 1) CHECK(ms < n * 100.0 * 0.85); /* not serialised */
    CHECK_RC(activate(q, 5, 0), 0);
  }
  /* Unload */
  sqe_init(&s, CSQ_ADM_LOAD_PROGRAM, 0);
  s.cdw10 = 5 | (1u << 16);
  CHECK_RC(dev_exec(q, &s, NULL), 0);
  CHECK_RC(activate(q, 5, 1), CSQ_SC_NO_PROGRAM);
}

static void test_stats(dev_device *d, dev_queue *q) {
  dev_stats *st = dev_queue_stats(q), dst0, dst1;
  uint8_t buf[8192];
  memset(st, 0, sizeof(*st));
  dev_device_stats(d, &dst0);
  CHECK_RC(dev_nvm_write(q, 1, 2, buf), 0);
  CHECK_RC(dev_nvm_read(q, 1, 1, buf), 0);
  CHECK_RC(dev_slm_write(q, 0, buf, 100), 0);
  CHECK_RC(dev_slm_read(q, 0, buf, 40), 0);
  CHECK_RC(dev_nvm_read(q, UINT64_MAX / 2, 1, buf), CSQ_SC_LBA_RANGE);
  CHECK_RC(st->commands, 5);
  CHECK_RC(st->errors, 1);
  CHECK_RC(st->bytes_from_host, 8192 + 100);
  CHECK_RC(st->bytes_to_host, 4096 + 40);
  CHECK_RC(st->media_bytes_written, 8192);
  CHECK_RC(st->media_bytes_read, 4096);
  CHECK_RC(st->cmd_by_opcode[1][CSQ_NVM_READ], 2);
  CHECK_RC(st->cmd_by_opcode[2][CSQ_SLM_READ], 1);
  dev_device_stats(d, &dst1);
  CHECK_RC(dst1.commands - dst0.commands, 5);
}

static void test_slm_alloc(dev_device *d) {
  uint64_t a, b, c, e, n = dev_caps(d)->slm_bytes;
  CHECK_RC(dev_slm_alloc(d, 1, &a), 0);
  CHECK_RC(dev_slm_alloc(d, 8192, &b), 0);
  CHECK_RC(dev_slm_alloc(d, 4096, &c), 0);
  CHECK(b == a + 4096 && c == b + 8192);
  dev_slm_free(d, b);
  CHECK_RC(dev_slm_alloc(d, 4096, &e), 0);
  CHECK(e == b); /* first fit */
  CHECK_RC(dev_slm_alloc(d, n, &e), -ENOMEM);
  CHECK_RC(dev_slm_alloc(d, 0, &e), -EINVAL);
  dev_slm_free(d, a);
  dev_slm_free(d, b);
  dev_slm_free(d, c);
  CHECK_RC(dev_slm_alloc(d, n, &e), 0); /* everything coalesced back */
  CHECK(e == 0);
  dev_slm_free(d, e);
}

static void test_device(const char *zPath, int bDirect) {
  dev_options o;
  dev_device *d;
  dev_queue *q;
  dev_options_default(&o);
  o.bCreate = 1;
  o.bDirect = bDirect;
  o.nSlmBytes = 64 << 20;
  d = open_dev(zPath, &o);
  q = open_queue(d);
  CHECK(strcmp(dev_backend_name(d), "emu") == 0);
  CHECK_RC(dev_caps(d)->slm_bytes, 64 << 20);
  test_identify(d, q);
  test_nvm(d, q);
  test_slm(d, q);
  test_programs(d, q);
  test_stats(d, q);
  test_slm_alloc(d);
  dev_queue_close(q);
  dev_unref(d);
}

static void test_sharing(void) {
  char zA[300], zB[300], zA2[300];
  dev_options o;
  dev_device *a, *a2, *b, *m1, *m2;
  dev_queue *qa, *qb;
  uint8_t w[4096], r[4096];
  char *zErr = NULL;
  dev_device *x = NULL;
  snprintf(zA, sizeof(zA), "%s/a.csd", test_tmpdir());
  snprintf(zA2, sizeof(zA2), "%s/../%s/./a.csd", test_tmpdir(), strrchr(test_tmpdir(), '/') + 1);
  snprintf(zB, sizeof(zB), "%s/b.csd", test_tmpdir());
  dev_options_default(&o);
  /* Missing file without bCreate: a message naming it. */
  CHECK(dev_open(zA, &o, &x, &zErr) != 0);
  CHECK(zErr && strstr(zErr, "a.csd") && strstr(zErr, "does not exist"));
  free(zErr);
  o.bCreate = 1;
  a = open_dev(zA, &o);
  a2 = open_dev(zA2, &o); /* same file by another spelling */
  CHECK(a == a2);
  b = open_dev(zB, &o);
  CHECK(a != b);
  m1 = open_dev(":memory:", &o);
  m2 = open_dev(":memory:", &o);
  CHECK(m1 != m2);
  qa = open_queue(a);
  qb = open_queue(b);
  fill_pattern(w, 4096, 5);
  CHECK_RC(dev_nvm_write(qa, 3, 1, w), 0);
  CHECK_RC(dev_nvm_read(qb, 3, 1, r), 0);
  CHECK(r[0] == 0 && r[4095] == 0); /* independent devices */
  CHECK_RC(dev_nvm_read(qa, 3, 1, r), 0);
  CHECK(memcmp(w, r, 4096) == 0);
  dev_unref(a2);
  dev_unref(a); /* the queue still holds a reference */
  CHECK_RC(dev_nvm_read(qa, 3, 1, r), 0);
  dev_queue_close(qa);
  dev_queue_close(qb);
  dev_unref(b);
  dev_unref(m1);
  dev_unref(m2);
  /* Reopen: the data is in the file. */
  a = open_dev(zA, &o);
  qa = open_queue(a);
  CHECK_RC(dev_nvm_read(qa, 3, 1, r), 0);
  CHECK(memcmp(w, r, 4096) == 0);
  dev_queue_close(qa);
  dev_unref(a);
}

static void test_reservations(void) {
  char zPath[300];
  dev_options o;
  dev_device *d;
  dev_queue *q1, *q2;
  int aToChild[2], aToParent[2], status = 0;
  char ch;
  pid_t pid;
  snprintf(zPath, sizeof(zPath), "%s/resv.csd", test_tmpdir());
  dev_options_default(&o);
  o.bCreate = 1;
  d = open_dev(zPath, &o);
  q1 = open_queue(d);
  q2 = open_queue(d);
  CHECK_RC(dev_resv_acquire(q1, 0), 0);
  CHECK_RC(dev_resv_acquire(q1, 0), 0); /* idempotent */
  CHECK_RC(dev_resv_acquire(q2, 30), CSQ_SC_RESV_CONFLICT);
  CHECK(strstr(dev_errmsg(q2), "Reservation Conflict") != NULL);
  CHECK_RC(dev_resv_release(q1), 0);
  CHECK_RC(dev_resv_acquire(q2, 0), 0);
  dev_queue_close(q2); /* closing releases */
  CHECK_RC(dev_resv_acquire(q1, 0), 0);

  /* Another process: its own dev_device on the same file. */
  if (pipe(aToChild) || pipe(aToParent)) {
    printf("SKIP part: no pipes\n");
    return;
  }
  pid = fork();
  if (pid == 0) {
    dev_device *dc;
    dev_queue *qc;
    int rc1, rc2;
    dc = open_dev(zPath, &o);
    qc = open_queue(dc);
    rc1 = dev_resv_acquire(qc, 50); /* the parent holds it */
    if (write(aToParent[1], "x", 1) != 1) _exit(3);
    if (read(aToChild[0], &ch, 1) != 1) _exit(3);
    rc2 = dev_resv_acquire(qc, 5000); /* released by now */
    dev_queue_close(qc);
    dev_unref(dc);
    _exit(rc1 == CSQ_SC_RESV_CONFLICT && rc2 == 0 ? 0 : 1);
  }
  CHECK(pid > 0);
  CHECK(read(aToParent[0], &ch, 1) == 1);
  CHECK_RC(dev_resv_release(q1), 0);
  CHECK(write(aToChild[1], "x", 1) == 1);
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  /* The child has exited: its lock is gone. */
  CHECK_RC(dev_resv_acquire(q1, 2000), 0);
  dev_queue_close(q1);
  dev_unref(d);
}

int main(void) {
  char zPath[300];
  test_device(":memory:", 0);
  snprintf(zPath, sizeof(zPath), "%s/buffered.csd", test_tmpdir());
  test_device(zPath, 0);
  snprintf(zPath, sizeof(zPath), "%s/direct.csd", test_tmpdir());
  test_device(zPath, 1);
  test_sharing();
  test_reservations();
  test_tmp_cleanup();
  return test_done("test_device_cmds");
}
