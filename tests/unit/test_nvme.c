/*
** tests/unit/test_nvme.c - the nvme backend's encodings, runnable anywhere
** (no NVMe device needed): csq SQE -> NVMe passthrough command mapping, LBA
** size conversion (512- and 4096-byte namespaces), splitting at the maximum
** transfer, status decoding and its messages, the passthrough ring on this
** kernel (skipped if it has no 128-byte SQEs), and dev_open's errors for
** paths that are not NVMe namespaces. The real-device test is test_nvme_vm.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "device/link/backend.h"
#include "device/driver/driver.h"
#include "device/nvme/nvme_passthru.h"
#include "tests/unit/helpers.h"

static csq_sqe nvm_sqe(uint8_t op, uint64_t slba, uint32_t nlb, uint64_t addr) {
  csq_sqe s;
  memset(&s, 0, sizeof(s));
  s.opcode = op;
  s.nsid = CSQ_NSID_NVM;
  s.prp1 = addr;
  s.cdw10 = (uint32_t)slba;
  s.cdw11 = (uint32_t)(slba >> 32);
  s.cdw12 = nlb - 1;
  return s;
}

static void test_lba_shift(void) {
  uint32_t s = 0;
  CHECK(dev_nvme_lba_shift(512, &s) == 0 && s == 9);
  CHECK(dev_nvme_lba_shift(1024, &s) == 0 && s == 10);
  CHECK(dev_nvme_lba_shift(4096, &s) == 0 && s == 12);
  CHECK(dev_nvme_lba_shift(8192, &s) == -EINVAL);
  CHECK(dev_nvme_lba_shift(520, &s) == -EINVAL);
  CHECK(dev_nvme_lba_shift(0, &s) == -EINVAL);
  CHECK(dev_nvme_max_xfer(0, 4096) == DEV_NVME_MAX_XFER);
  CHECK(dev_nvme_max_xfer(5, 4096) == 128 * 1024);
  CHECK(dev_nvme_max_xfer(7, 4096) == DEV_NVME_MAX_XFER);
  CHECK(dev_nvme_max_xfer(1, 4096) == 8192);
  CHECK(dev_nvme_max_xfer(0, 0) == DEV_NVME_MAX_XFER);
}

static void test_map(void) {
  dev_nvme_geom g4 = {7, 12, 256 * 1024}, g512 = {7, 9, 256 * 1024};
  dev_nvme_cmd c;
  csq_sqe s;
  /* 4 KiB namespace: LBAs map one to one. */
  s = nvm_sqe(CSQ_NVM_READ, 10, 2, 0x100000);
  CHECK(dev_nvme_map_nvm(&g4, &s, &c) == 0);
  CHECK(c.opcode == DEV_NVME_OP_READ && c.nsid == 7 && c.addr == 0x100000);
  CHECK(c.data_len == 8192 && c.cdw10 == 10 && c.cdw11 == 0 && c.cdw12 == 1);
  CHECK(c.metadata == 0 && c.metadata_len == 0 && c.cdw13 == 0 && c.timeout_ms == 0);
  /* 512-byte namespace: 8 device LBAs per csq block. */
  CHECK(dev_nvme_map_nvm(&g512, &s, &c) == 0);
  CHECK(c.cdw10 == 80 && c.cdw11 == 0 && c.cdw12 == 15 && c.data_len == 8192);
  /* A 64-bit LBA crosses into CDW11 after the shift. */
  s = nvm_sqe(CSQ_NVM_WRITE, 0x100000001ull, 1, 0x2000);
  CHECK(dev_nvme_map_nvm(&g512, &s, &c) == 0);
  CHECK(c.opcode == DEV_NVME_OP_WRITE && c.cdw10 == 8 && c.cdw11 == 8 && c.cdw12 == 7);
  CHECK(dev_nvme_map_nvm(&g4, &s, &c) == 0 && c.cdw10 == 1 && c.cdw11 == 1 && c.cdw12 == 0);
  /* Flush carries the namespace only. */
  s = nvm_sqe(CSQ_NVM_FLUSH, 0, 1, 0);
  s.cdw12 = 0;
  CHECK(dev_nvme_map_nvm(&g4, &s, &c) == 0 && c.opcode == DEV_NVME_OP_FLUSH && c.nsid == 7 &&
        c.data_len == 0 && c.addr == 0);
  /* Not NVM Read/Write/Flush: not mapped (the host engine answers those). */
  s = nvm_sqe(CSQ_NVM_RESV_ACQUIRE, 0, 1, 0);
  CHECK(dev_nvme_map_nvm(&g4, &s, &c) == -EINVAL);
  s = nvm_sqe(CSQ_SLM_READ, 0, 1, 0x1000);
  s.nsid = CSQ_NSID_SLM;
  CHECK(dev_nvme_map_nvm(&g4, &s, &c) == -EINVAL);
}

static void test_split(void) {
  dev_nvme_geom g = {1, 9, 128 * 1024}; /* 32 csq blocks per command */
  dev_nvme_cmd c;
  uint32_t i, nTot = 0;
  CHECK(dev_nvme_rw_parts(&g, 1) == 1);
  CHECK(dev_nvme_rw_parts(&g, 32) == 1);
  CHECK(dev_nvme_rw_parts(&g, 33) == 2);
  CHECK(dev_nvme_rw_parts(&g, 100) == 4);
  CHECK(dev_nvme_rw_parts(&g, 65536) == 2048);
  dev_nvme_rw_part(&g, DEV_NVME_OP_READ, 1000, 100, 0x10000000, 3, &c);
  CHECK(c.cdw10 == (1000 + 96) * 8 && c.cdw12 == 4 * 8 - 1);
  CHECK(c.addr == 0x10000000 + 96ull * 4096 && c.data_len == 4 * 4096);
  for (i = 0; i < dev_nvme_rw_parts(&g, 100); i++) {
    dev_nvme_rw_part(&g, DEV_NVME_OP_WRITE, 1000, 100, 0, i, &c);
    CHECK(c.cdw10 == (1000 + i * 32) * 8);
    CHECK(c.data_len <= g.maxXfer && c.cdw12 + 1 <= 65536);
    nTot += c.data_len;
  }
  CHECK(nTot == 100 * 4096);
  /* The largest csq command on a 4 KiB namespace without an MDTS limit. */
  g.lbaShift = 12;
  g.maxXfer = dev_nvme_max_xfer(0, 4096);
  dev_nvme_rw_part(&g, DEV_NVME_OP_READ, 0, 65536, 0, dev_nvme_rw_parts(&g, 65536) - 1, &c);
  CHECK(c.cdw10 + c.cdw12 + 1 == 65536);
}

static void test_identify_cmd(void) {
  dev_nvme_cmd c;
  char buf[8];
  dev_nvme_identify_cmd(1, 0, buf, &c);
  CHECK(c.opcode == 0x06 && c.nsid == 0 && c.cdw10 == 1 && c.data_len == 4096 &&
        c.addr == (uint64_t)(uintptr_t)buf);
  dev_nvme_identify_cmd(0, 3, buf, &c);
  CHECK(c.cdw10 == 0 && c.nsid == 3);
}

static void test_status(void) {
  char z[400];
  CHECK(dev_nvme_status_sf(0) == 0);
  CHECK(dev_nvme_status_sf(0x4001) == (CSQ_SC_INVALID_OPCODE | CSQ_DNR));
  CHECK((dev_nvme_status_sf(0x4001) & 0x7FF) == CSQ_SC_INVALID_OPCODE);
  CHECK(dev_nvme_status_sf(0x0080) == CSQ_SC_LBA_RANGE);
  CHECK(dev_nvme_status_sf(0x0281) == CSQ_SC_READ_ERROR);
  CHECK(dev_nvme_status_sf(-EINVAL) == (CSQ_SC_INVALID_FIELD | CSQ_DNR));
  CHECK((dev_nvme_status_sf(-ENOTTY) & 0x7FF) == CSQ_SC_INVALID_OPCODE);
  CHECK(dev_nvme_status_sf(-EINTR) == CSQ_SC_ABORTED);
  CHECK((dev_nvme_status_sf(-EIO) & 0x7FF) == CSQ_SC_INTERNAL);
  CHECK((dev_nvme_status_sf(-ENOSPC) & 0x7FF) == CSQ_SC_CAPACITY);
  CHECK(dev_nvme_is_csq_opcode(1, CSQ_ADM_LOAD_PROGRAM));
  CHECK(dev_nvme_is_csq_opcode(1, 0xC0) && dev_nvme_is_csq_opcode(0, 0xC1));
  CHECK(!dev_nvme_is_csq_opcode(1, 0x06) && !dev_nvme_is_csq_opcode(0, 0x02));
  /* A plain device refusing a csq opcode: the message says so. */
  dev_nvme_describe(1, CSQ_ADM_LOAD_PROGRAM, 0x4001, z, sizeof(z));
  CHECK(strstr(z, "does not implement csq") && strstr(z, "0x85") && strstr(z, "0x4001"));
  dev_nvme_describe(0, 0xC1, 0x4001, z, sizeof(z));
  CHECK(strstr(z, "does not implement csq") && strstr(z, "I/O opcode 0xc1"));
  dev_nvme_describe(0, DEV_NVME_OP_READ, 0x4080, z, sizeof(z));
  CHECK(strstr(z, "Read") && strstr(z, "LBA Out of Range") && !strstr(z, "csq"));
  dev_nvme_describe(1, 0x06, -ENOTTY, z, sizeof(z));
  CHECK(strstr(z, "/dev/nvmeX") != NULL);
  dev_nvme_describe(0, DEV_NVME_OP_WRITE, -EACCES, z, sizeof(z));
  CHECK(strstr(z, "read-write access") != NULL);
}

/* The ring itself, on an eventfd (no NVMe device needed). */
static int test_ring(void) {
  dev_nvme_ring *r;
  dev_nvme_cqe e;
  uint64_t v = 0, one = 5;
  int fd, rc = dev_nvme_ring_open(8, &r);
  if (rc) {
    printf("note: no io_uring with 128-byte SQEs here (%s): ring test skipped\n", strerror(-rc));
    return 0;
  }
  fd = eventfd(0, 0);
  CHECK(fd >= 0);
  CHECK(dev_nvme_ring_space(r) == 8);
  CHECK(dev_nvme_ring_prep_read(r, fd, &v, sizeof(v), 42) == 0);
  CHECK(dev_nvme_ring_submit(r) == 1);
  CHECK(dev_nvme_ring_reap(r, &e, 1, 0) == -ETIMEDOUT);
  CHECK(dev_nvme_ring_reap(r, &e, 1, 1000000) == -ETIMEDOUT);
  CHECK(write(fd, &one, sizeof(one)) == sizeof(one));
  CHECK(dev_nvme_ring_reap(r, &e, 1, 2000000000) == 1);
  CHECK(e.userData == 42 && e.res == 8 && v == 5);
  close(fd);
  dev_nvme_ring_close(r);
  return 1;
}

/* dev_open on things that are not NVMe namespaces: clear errors. */
static void test_open_errors(void) {
  dev_device *d = NULL;
  char *zErr = NULL;
  int rc = dev_open("nvme:/nonexistent/ng9n9", NULL, &d, &zErr);
  CHECK(rc != 0 && d == NULL && zErr && strstr(zErr, "/nonexistent/ng9n9"));
  if (zErr && !strstr(zErr, "No such file")) printf("FAIL message: %s\n", zErr), nFail++;
  free(zErr);
  zErr = NULL;
  rc = dev_open("nvme:/dev/null", NULL, &d, &zErr);
  CHECK(rc != 0 && d == NULL && zErr && strstr(zErr, "not an NVMe namespace"));
  if (zErr && !strstr(zErr, "not an NVMe namespace")) printf("message was: %s\n", zErr);
  free(zErr);
  zErr = NULL;
  rc = dev_open("nvme:/tmp", NULL, &d, &zErr);
  CHECK(rc != 0 && d == NULL && zErr);
  free(zErr);
}

int main(void) {
  /* A strong reference: backend.h's weak one does not pull nvme_backend.o
  ** out of libcsq.a. */
  CHECK(dev_nvme_backend_get() == &dev_nvme_backend);
  CHECK(strcmp(dev_nvme_backend.zName, "nvme") == 0);
  test_lba_shift();
  test_map();
  test_split();
  test_identify_cmd();
  test_status();
  test_ring();
  test_open_errors();
  if (nFail) {
    printf("test_nvme: %d check(s) failed\n", nFail);
    return 1;
  }
  printf("test_nvme: ok\n");
  return 0;
}
