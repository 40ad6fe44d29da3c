/*
** tests/unit/nvme_vm_guest_main.c - the program test_nvme_vm runs inside a
** QEMU VM with a real (emulated) NVMe controller (/dev/nvme0, /dev/ng0n1):
** it drives "nvme:/dev/ng0n1" through csq's driver API only.
**
** Checks: discovery lists ng0n1; dev_open decodes Identify (no csq compute
** on a plain device, capacity in 4 KiB blocks); writes and reads back blocks
** (one command and one split into several NVMe commands, many commands in
** flight); LBA range errors; Flush; Identify through the queue; that a
** plain device answers csq/vendor opcodes with Invalid Command Opcode and
** that the message says so; the host engine: SLM Write/Read/Fill, Memory Copy
** NVM -> SLM, Load/Activate a program of a toy type registered here, Execute
** over an MRS and over inline ranges with the program reading LBAs itself;
** reservations; counters.
**
** Built statically (gcc -static) so the VM needs nothing but this file.
** Usage: nvme_vm_guest [PATH [LBA-SIZE]] (default /dev/ng0n1; LBA-SIZE, if
** given, is the namespace format the test expects). Exit 0 pass, 1 fail.
*/
#include <errno.h>
#include <fcntl.h>
#include <libnvme.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/link/backend.h"
#include "device/driver/driver.h"
#include "device/nvme/nvme_discover.h"
#include "device/nvme/nvme_passthru.h"
#include "device/engine/ptype.h"
#include "tests/unit/helpers.h"

#define CHECK_Q(rc, q)                                                                             \
  do {                                                                                             \
    int rc_ = (rc);                                                                                \
    if (rc_ != 0) {                                                                                \
      printf("FAIL %s:%d: %s = %d: %s\n", __FILE__, __LINE__, #rc, rc_, dev_errmsg(q));            \
      nFail++;                                                                                     \
    }                                                                                              \
  } while (0)

static void fill_blocks(uint8_t *p, uint64_t slba, uint32_t nlb, uint32_t seed) {
  uint32_t i, b;
  for (b = 0; b < nlb; b++) {
    uint32_t *w = (uint32_t *)(p + (size_t)b * CSQ_LBA_SIZE);
    for (i = 0; i < CSQ_LBA_SIZE / 4; i++)
      w[i] = (uint32_t)((slba + b) * 2654435761u) ^ (i * 40503u) ^ seed;
  }
}

static uint64_t sum_u32(const uint8_t *p, uint64_t n) {
  uint64_t s = 0, i;
  for (i = 0; i + 4 <= n; i += 4) {
    uint32_t v;
    memcpy(&v, p + i, 4);
    s += v;
  }
  return s;
}

/* ---- a toy program type for the host engine ---------------------------------
** Program bytes: "SUMP" + mode byte. Mode 0: sum the u32 words of every range.
** Mode 1: read aParam[1] blocks at LBA aParam[0] into range 0 with xReadLba,
** then sum them. Returns the sum. */
#define TOY_PTYPE 0xE7

static int toy_verify(const uint8_t *p, size_t n, void **pp, char *zErr, size_t nErr) {
  if (n != 5 || memcmp(p, "SUMP", 4) != 0 || p[4] > 1) {
    snprintf(zErr, nErr, "not a SUMP program");
    return 1;
  }
  *pp = (void *)(uintptr_t)(p[4] + 1);
  return 0;
}

static int toy_run(void *pCompiled, dev_exec_ctx *ctx, uint64_t *pRet) {
  int mode = (int)(uintptr_t)pCompiled - 1, i;
  uint64_t s = 0;
  if (mode == 1) {
    csq_lba_range r = {CSQ_NSID_NVM, (uint32_t)ctx->aParam[1], ctx->aParam[0]};
    int rc;
    if (ctx->nRange < 1 || ctx->aRange[0].len < (uint64_t)r.nlb * CSQ_LBA_SIZE)
      return CSQ_SC_INVALID_FIELD;
    rc = ctx->xReadLba(ctx, &r, 1, ctx->pSlm + ctx->aRange[0].addr);
    if (rc) {
      *pRet = (uint64_t)rc;
      return CSQ_SC_PROGRAM_FAULT;
    }
    *pRet = sum_u32(ctx->pSlm + ctx->aRange[0].addr, (uint64_t)r.nlb * CSQ_LBA_SIZE);
    ctx->pStats->rows_scanned += r.nlb;
    return 0;
  }
  for (i = 0; i < ctx->nRange; i++)
    s += sum_u32(ctx->pSlm + ctx->aRange[i].addr, ctx->aRange[i].len);
  *pRet = s;
  return 0;
}

static void toy_free(void *p) {
  (void)p;
}

static const dev_ptype toyType = {TOY_PTYPE, "toy-sum", toy_verify, toy_run, toy_free};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_discover(const char *zPath, uint32_t lbaWant) {
  dev_nvme_nsinfo *a = NULL;
  char *zErr = NULL;
  int n = 0, i, bFound = 0;
  int rc = dev_nvme_discover(&a, &n, &zErr);
  CHECK(rc == 0);
  if (rc) printf("discover: %s\n", zErr ? zErr : "?");
  for (i = 0; i < n; i++) {
    printf("namespace %s (%s, ctrl %s \"%s\") nsid %u csi %d lba %u x %llu usable %d\n",
           a[i].zGeneric, a[i].zBlock, a[i].zCtrl, a[i].zModel, a[i].nsid, a[i].csi, a[i].lbaSize,
           (unsigned long long)a[i].nLba, a[i].bUsable);
    if (strcmp(a[i].zGeneric, zPath) == 0) {
      bFound = a[i].bUsable;
      if (lbaWant) CHECK(a[i].lbaSize == lbaWant);
    }
  }
  CHECK(bFound);
  free(a);
  free(zErr);
}

/* A plain device refuses csq's and vendor opcodes: raw passthrough. */
static void test_vendor_opcode(const char *zPath) {
  dev_nvme_ring *r = NULL;
  dev_nvme_cqe e;
  dev_nvme_cmd c;
  char z[400];
  int fd = open(zPath, O_RDWR), cfd = open("/dev/nvme0", O_RDWR);
  CHECK(fd >= 0 && cfd >= 0);
  CHECK(dev_nvme_ring_open(8, &r) == 0);
  if (fd < 0 || cfd < 0 || !r) return;
  memset(&c, 0, sizeof(c));
  c.opcode = 0xC1;
  c.nsid = (uint32_t)dev_nvme_ioctl_nsid(fd);
  CHECK(dev_nvme_ring_prep(r, fd, 0, &c, 1) == 0);
  memset(&c, 0, sizeof(c));
  c.opcode = CSQ_ADM_LOAD_PROGRAM; /* 85h: Load Program */
  CHECK(dev_nvme_ring_prep(r, cfd, 1, &c, 2) == 0);
  CHECK(dev_nvme_ring_submit(r) == 2);
  for (int k = 0; k < 2; k++) {
    CHECK(dev_nvme_ring_reap(r, &e, 1, 5000000000ll) == 1);
    dev_nvme_describe(e.userData == 2, e.userData == 2 ? CSQ_ADM_LOAD_PROGRAM : 0xC1, e.res, z,
                      sizeof(z));
    printf("%s opcode -> res 0x%x: %s\n", e.userData == 2 ? "admin 85h" : "I/O C1h", e.res, z);
    CHECK((dev_nvme_status_sf(e.res) & 0x7FF) == CSQ_SC_INVALID_OPCODE);
    CHECK(strstr(z, "does not implement csq") != NULL);
  }
  dev_nvme_ring_close(r);
  close(fd);
  close(cfd);
}

static void sqe_init(csq_sqe *s, uint8_t op, uint32_t nsid) {
  memset(s, 0, sizeof(*s));
  s->opcode = op;
  s->nsid = nsid;
}

static void test_identify(dev_queue *q, uint64_t nBlocks) {
  struct nvme_id_ctrl *ctrl = aligned_alloc(4096, 4096);
  struct nvme_id_ns *ns = aligned_alloc(4096, 4096);
  csq_sqe s;
  sqe_init(&s, CSQ_ADM_IDENTIFY, 0);
  s.cdw10 = 1;
  s.prp1 = (uint64_t)(uintptr_t)ctrl;
  CHECK_Q(dev_exec(q, &s, NULL), q);
  printf("identify: mn \"%.40s\" sn \"%.20s\" fr \"%.8s\" mdts %u\n", ctrl->mn, ctrl->sn, ctrl->fr,
         ctrl->mdts);
  CHECK(strncmp(ctrl->mn, "QEMU NVMe Ctrl", 14) == 0);
  CHECK(strncmp(ctrl->sn, "csq0", 4) == 0);
  {
    csq_id_vs vs;
    memcpy(&vs, ctrl->vs, sizeof(vs));
    CHECK(vs.magic != CSQ_ID_MAGIC);
  }
  sqe_init(&s, CSQ_ADM_IDENTIFY, CSQ_NSID_NVM);
  s.cdw10 = 0;
  s.prp1 = (uint64_t)(uintptr_t)ns;
  CHECK_Q(dev_exec(q, &s, NULL), q);
  CHECK(le64toh(ns->nsze) == nBlocks && ns->lbaf[ns->flbas & 0xF].ds == 12);
  sqe_init(&s, CSQ_ADM_IDENTIFY, CSQ_NSID_SLM);
  s.prp1 = (uint64_t)(uintptr_t)ns;
  CHECK_Q(dev_exec(q, &s, NULL), q);
  CHECK(le64toh(ns->nsze) == (16u << 20) / 4096);
  sqe_init(&s, CSQ_ADM_IDENTIFY, 9);
  s.prp1 = (uint64_t)(uintptr_t)ns;
  CHECK(dev_exec(q, &s, NULL) == CSQ_SC_INVALID_NS);
  free(ctrl);
  free(ns);
}

static void test_rw(dev_queue *q, uint64_t nBlocks) {
  uint32_t nBig = 300; /* > the 256 KiB per NVMe command: split into parts */
  uint8_t *w = aligned_alloc(4096, (size_t)nBig * 4096),
          *r = aligned_alloc(4096, (size_t)nBig * 4096);
  int i, rc;
  fill_blocks(w, 100, 16, 1);
  CHECK_Q(dev_nvm_write(q, 100, 16, w), q);
  memset(r, 0, 16 * 4096);
  CHECK_Q(dev_nvm_read(q, 100, 16, r), q);
  CHECK(memcmp(w, r, 16 * 4096) == 0);
  fill_blocks(w, 1000, nBig, 2);
  CHECK_Q(dev_nvm_write(q, 1000, nBig, w), q);
  memset(r, 0, (size_t)nBig * 4096);
  CHECK_Q(dev_nvm_read(q, 1000, nBig, r), q);
  CHECK(memcmp(w, r, (size_t)nBig * 4096) == 0);
  /* the last block */
  fill_blocks(w, nBlocks - 1, 1, 3);
  CHECK_Q(dev_nvm_write(q, nBlocks - 1, 1, w), q);
  CHECK_Q(dev_nvm_read(q, nBlocks - 1, 1, r), q);
  CHECK(memcmp(w, r, 4096) == 0);
  CHECK_Q(dev_nvm_flush(q), q);
  /* out of range: refused with a message naming the LBAs */
  rc = dev_nvm_read(q, nBlocks - 1, 2, r);
  CHECK(rc == CSQ_SC_LBA_RANGE);
  printf("out of range read: %s\n", dev_errmsg(q));
  CHECK(strstr(dev_errmsg(q), "LBA") != NULL);
  /* many commands in flight, completed in any order */
  {
    csq_sqe s[64];
    csq_cqe c;
    int nOk = 0;
    for (i = 0; i < 64; i++) {
      sqe_init(&s[i], CSQ_NVM_READ, CSQ_NSID_NVM);
      s[i].cdw10 = 1000 + (uint32_t)i * 4;
      s[i].cdw12 = 3;
      s[i].prp1 = (uint64_t)(uintptr_t)(r + (size_t)i * 4 * 4096);
      CHECK_Q(dev_submit(q, &s[i]), q);
    }
    for (i = 0; i < 64; i++) {
      CHECK_Q(dev_reap(q, &c, -1), q);
      nOk += csq_cqe_ok(&c);
    }
    CHECK(nOk == 64);
    fill_blocks(w, 1000, 256, 2);
    CHECK(memcmp(w, r, 256 * 4096) == 0);
  }
  free(w);
  free(r);
}

/* SLM commands and programs through the host engine. */
static void test_host_engine(dev_device *d, dev_queue *q) {
  uint8_t *buf = malloc(64 * 4096), *blk = aligned_alloc(4096, 32 * 4096);
  csq_lba_range ar[2] = {{CSQ_NSID_NVM, 8, 1000}, {CSQ_NSID_NVM, 4, 100}};
  csq_sqe s;
  csq_cqe c;
  uint64_t want;
  int i, rc;
  (void)d;
  /* SLM Write / Read / Fill */
  for (i = 0; i < 8192; i++) buf[i] = (uint8_t)(i * 7);
  CHECK_Q(dev_slm_write(q, 0x10000, buf, 8192), q);
  memset(buf + 8192, 0, 8192);
  CHECK_Q(dev_slm_read(q, 0x10000, buf + 8192, 8192), q);
  CHECK(memcmp(buf, buf + 8192, 8192) == 0);
  sqe_init(&s, CSQ_SLM_FILL, CSQ_NSID_SLM);
  s.cdw10 = 0x10000;
  s.cdw12 = 4096;
  s.cdw13 = 0xAB;
  CHECK_Q(dev_exec(q, &s, NULL), q);
  CHECK_Q(dev_slm_read(q, 0x10000, buf, 8), q);
  CHECK(buf[0] == 0xAB && buf[7] == 0xAB);
  CHECK(dev_slm_read(q, (16u << 20) - 4, buf, 8) == CSQ_SC_SLM_RANGE);
  /* Memory Copy NVM -> SLM: two ranges back to back (written by test_rw) */
  CHECK_Q(dev_slm_copy(q, 0x100000, ar, 2), q);
  CHECK_Q(dev_slm_read(q, 0x100000, buf, 12 * 4096), q);
  fill_blocks(blk, 1000, 8, 2);
  fill_blocks(blk + 8 * 4096, 100, 4, 1);
  CHECK(memcmp(buf, blk, 12 * 4096) == 0);

  if (!dev_ptype_find(TOY_PTYPE)) CHECK(dev_ptype_register(&toyType) == 0);
  if (dev_ptype_find(CSQ_PTYPE_CSQ))
    printf("note: csq's program type 0x%02x is registered; this test runs its toy type\n",
           CSQ_PTYPE_CSQ);
  else
    printf("note: csq's program type 0x%02x is not linked in; running the toy type 0x%02x\n",
           CSQ_PTYPE_CSQ, TOY_PTYPE);
  /* Load (two chunks) + activate, slots 0 and 1 */
  for (i = 0; i < 2; i++) {
    uint8_t prog[5] = {'S', 'U', 'M', 'P', (uint8_t)i};
    sqe_init(&s, CSQ_ADM_LOAD_PROGRAM, 0);
    s.cdw10 = (uint32_t)i | ((uint32_t)TOY_PTYPE << 24);
    s.cdw11 = 5;
    s.cdw12 = 3;
    s.cdw13 = 0;
    s.cdw14 = 0x1234 + (uint32_t)i;
    s.prp1 = (uint64_t)(uintptr_t)prog;
    CHECK_Q(dev_exec(q, &s, NULL), q);
    s.cdw12 = 2;
    s.cdw13 = 3;
    s.prp1 = (uint64_t)(uintptr_t)(prog + 3);
    CHECK_Q(dev_exec(q, &s, NULL), q);
    sqe_init(&s, CSQ_ADM_PROGRAM_ACTIVATION, 0);
    s.cdw10 = (uint32_t)i | (1u << 16);
    CHECK_Q(dev_exec(q, &s, NULL), q);
  }
  /* A bad program is refused by the verifier, with its words. */
  {
    uint8_t bad[5] = {'N', 'O', 'P', 'E', 0};
    sqe_init(&s, CSQ_ADM_LOAD_PROGRAM, 0);
    s.cdw10 = 5u | ((uint32_t)TOY_PTYPE << 24);
    s.cdw11 = s.cdw12 = 5;
    s.prp1 = (uint64_t)(uintptr_t)bad;
    rc = dev_exec(q, &s, NULL);
    CHECK(rc == CSQ_SC_INVALID_PROGRAM);
    CHECK(strstr(dev_errmsg(q), "not a SUMP program") != NULL);
  }
  /* MRS over the copied data; Execute slot 0 over it */
  {
    csq_mrange mr[1] = {{CSQ_NSID_SLM, 0, 12 * 4096, 0x100000, 0}};
    uint32_t mrs;
    sqe_init(&s, CSQ_ADM_MRS_MGMT, 0);
    s.cdw11 = 1;
    s.prp1 = (uint64_t)(uintptr_t)mr;
    CHECK_Q(dev_exec(q, &s, &c), q);
    mrs = c.dw0;
    CHECK(mrs >= 1);
    sqe_init(&s, CSQ_CP_EXECUTE, CSQ_NSID_CP);
    s.cdw10 = 0 | (mrs << 16);
    CHECK_Q(dev_exec(q, &s, &c), q);
    want = sum_u32(blk, 12 * 4096);
    CHECK(((uint64_t)c.dw1 << 32 | c.dw0) == want);
  }
  /* Execute slot 1: the program reads 32 blocks at LBA 1000 itself */
  {
    csq_mrange mr[1] = {{CSQ_NSID_SLM, 0, 32 * 4096, 0x400000, 0}};
    sqe_init(&s, CSQ_CP_EXECUTE, CSQ_NSID_CP);
    s.cdw10 = 1 | (0xFFFFu << 16);
    s.cdw11 = 1;
    s.cdw12 = 1000;
    s.cdw14 = 32;
    s.prp1 = (uint64_t)(uintptr_t)mr;
    CHECK_Q(dev_exec(q, &s, &c), q);
    fill_blocks(blk, 1000, 32, 2);
    want = sum_u32(blk, 32 * 4096);
    CHECK(((uint64_t)c.dw1 << 32 | c.dw0) == want);
    /* several Executes in flight at once, on the engines */
    for (i = 0; i < 8; i++) CHECK_Q(dev_submit(q, &s), q);
    for (i = 0; i < 8; i++) {
      CHECK_Q(dev_reap(q, &c, -1), q);
      CHECK(csq_cqe_ok(&c) && ((uint64_t)c.dw1 << 32 | c.dw0) == want);
    }
  }
  /* Executing an empty slot fails cleanly */
  sqe_init(&s, CSQ_CP_EXECUTE, CSQ_NSID_CP);
  s.cdw10 = 7 | (0xFFFFu << 16);
  CHECK(dev_exec(q, &s, NULL) == CSQ_SC_NO_PROGRAM);
  free(buf);
  free(blk);
}

int main(int argc, char **argv) {
  const char *zDev = argc > 1 ? argv[1] : "/dev/ng0n1";
  char zPath[128];
  dev_options opt;
  dev_device *d = NULL;
  dev_queue *q = NULL, *q2 = NULL;
  char *zErr = NULL;
  dev_stats st;
  int64_t t0 = now_ms();
  uint64_t nBlocks;
  int rc;

  dev_nvme_backend_get(); /* link the backend out of libcsq.a */
  test_discover(zDev, argc > 2 ? (uint32_t)atoi(argv[2]) : 0);
  test_vendor_opcode(zDev);

  snprintf(zPath, sizeof(zPath), "nvme:%s", zDev);
  dev_options_default(&opt);
  opt.nSlmBytes = 16u << 20;
  opt.nEngines = 2;
  rc = dev_open(zPath, &opt, &d, &zErr);
  if (rc) {
    printf("FAIL dev_open(%s): %s\n", zPath, zErr ? zErr : "?");
    return 1;
  }
  CHECK(strcmp(dev_backend_name(d), "nvme") == 0);
  CHECK(dev_caps(d)->magic == 0); /* a plain device: no csq compute */
  {
    /* the host engine's SLM is allocatable like a device's */
    uint64_t a1 = 1, a2 = 1, aBig = 0;
    CHECK(dev_slm_alloc(d, 1u << 20, &a1) == 0 && a1 == 0, "first SLM allocation at %llu",
          (unsigned long long)a1);
    CHECK(dev_slm_alloc(d, 4096, &a2) == 0 && a2 == (1u << 20));
    CHECK(dev_slm_alloc(d, 64u << 20, &aBig) != 0, "more SLM than the engine has");
    dev_slm_free(d, a1);
    dev_slm_free(d, a2);
  }
  nBlocks = dev_nvm_blocks(d);
  printf("opened %s: %llu blocks of 4 KiB\n", zPath, (unsigned long long)nBlocks);
  CHECK(nBlocks >= 4096);
  CHECK_Q(dev_queue_open(d, &q), q);
  CHECK_Q(dev_queue_open(d, &q2), q2);
  if (!q || !q2) return 1;

  test_identify(q, nBlocks);
  test_rw(q, nBlocks);
  test_host_engine(d, q);

  /* reservations: one holder queue at a time */
  CHECK_Q(dev_resv_acquire(q, 0), q);
  CHECK(dev_resv_acquire(q2, 0) == CSQ_SC_RESV_CONFLICT);
  CHECK_Q(dev_resv_release(q), q);
  CHECK_Q(dev_resv_acquire(q2, 0), q2);
  CHECK_Q(dev_resv_release(q2), q2);

  dev_device_stats(d, &st);
  printf("device counters: commands %llu, errors %llu, media read %llu, written %llu, to host "
         "%llu, programs %llu\n",
         (unsigned long long)st.commands, (unsigned long long)st.errors,
         (unsigned long long)st.media_bytes_read, (unsigned long long)st.media_bytes_written,
         (unsigned long long)st.bytes_to_host, (unsigned long long)st.programs_executed);
  CHECK(st.programs_executed == 10);
  CHECK(st.media_bytes_written >= (16 + 300 + 1) * 4096ull);
  CHECK(st.media_bytes_read >= (16 + 300 + 1 + 256 + 12 + 32 * 9) * 4096ull);
  dev_queue_close(q);
  dev_queue_close(q2);
  dev_unref(d);
  printf("nvme_vm_guest: %s in %lld ms\n", nFail ? "FAIL" : "ok", (long long)(now_ms() - t0));
  return nFail ? 1 : 0;
}
