/*
** tests/unit/tcp_plain_host_main.c - csq's NVMe/TCP initiator against a
** plain NVMe/TCP target (tests/sql/test_tcp_vm.py runs it against the Linux
** kernel's nvmet-tcp in a QEMU guest): through csq's driver API only.
**
** Usage: tcp_plain_host URL MARK-LBA
** Checks: the device opens (retrying while the guest boots) and has no csq
** compute; blocks written (one capsule, and one large enough for R2T and
** H2CData) read back the same; a read past the end fails; csq's compute commands (Execute, SLM
*Write, Load Program) are
** refused with the target's status and a message that says so. Last, writes
** "HOST-DONE" at MARK-LBA: the guest waits for it before it stops.
** Prints "OK <what>" per check, "FAIL ..." on failure; exit 0 or 1.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/driver/driver.h"

static int nFail;

#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    if (cond) {                                                                                    \
      printf("OK ");                                                                               \
    } else {                                                                                       \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
      nFail++;                                                                                     \
    }                                                                                              \
    printf(__VA_ARGS__);                                                                           \
    printf("\n");                                                                                  \
  } while (0)

static void fill(uint8_t *p, uint32_t nlb, uint32_t seed) {
  for (uint32_t i = 0; i < nlb * CSQ_LBA_SIZE; i++)
    p[i] = (uint8_t)((i * 2654435761u) >> 13 ^ seed);
}

/* A csq compute command the plain target must refuse: its status, or 0. */
static int refused(dev_queue *q, uint8_t opcode, uint32_t nsid, void *pBuf, uint32_t cdw11,
                   uint32_t cdw12, const char *zWhat) {
  csq_sqe e;
  memset(&e, 0, sizeof(e));
  e.opcode = opcode;
  e.nsid = nsid;
  e.prp1 = (uint64_t)(uintptr_t)pBuf;
  e.cdw10 = opcode == CSQ_CP_EXECUTE ? 0xFFFFu << 16 : 0;
  e.cdw11 = cdw11;
  e.cdw12 = cdw12;
  int rc = dev_exec(q, &e, NULL);
  EXPECT(rc > 0, "%s refused: status 0x%03x: %s", zWhat, rc > 0 ? rc & 0x7FF : 0, dev_errmsg(q));
  return rc > 0 ? rc & 0x7FF : 0;
}

int main(int argc, char **argv) {
  dev_options o;
  dev_device *d = NULL;
  dev_queue *q = NULL;
  char *zErr = NULL;
  uint8_t *w, *r;
  uint64_t mark, lba1, lba64;
  int rc = -1;
  if (argc != 3) {
    printf("FAIL usage: tcp_plain_host URL MARK-LBA\n");
    return 1;
  }
  mark = strtoull(argv[2], NULL, 10);
  dev_options_default(&o);
  o.timeoutMs = 10000;
  /* the guest listens once its target is set up; until then the forwarded
  ** port stalls or resets */
  for (int i = 0; i < 60 && rc != 0; i++) {
    free(zErr);
    zErr = NULL;
    rc = dev_open(argv[1], &o, &d, &zErr);
    if (rc) sleep(1);
  }
  if (rc) {
    printf("FAIL open %s: %s\n", argv[1], zErr ? zErr : "?");
    return 1;
  }
  EXPECT(dev_caps(d)->magic != CSQ_ID_MAGIC, "no csq compute (%llu blocks of 4 KiB)",
         (unsigned long long)dev_nvm_blocks(d));
  /* at the end of the namespace, away from a csq table at its start */
  lba1 = dev_nvm_blocks(d) - 100;
  lba64 = dev_nvm_blocks(d) - 300;
  if (dev_queue_open(d, &q)) {
    printf("FAIL queue: cannot open\n");
    return 1;
  }
  w = aligned_alloc(4096, 64 * CSQ_LBA_SIZE);
  r = aligned_alloc(4096, 64 * CSQ_LBA_SIZE);
  fill(w, 64, 7);
  rc = dev_nvm_write(q, lba1, 1, w);
  EXPECT(rc == 0, "write 1 block: %s", rc ? dev_errmsg(q) : "done");
  rc = dev_nvm_write(q, lba64, 64, w);
  EXPECT(rc == 0, "write 64 blocks: %s", rc ? dev_errmsg(q) : "done");
  rc = dev_nvm_flush(q);
  EXPECT(rc == 0, "flush: %s", rc ? dev_errmsg(q) : "done");
  memset(r, 0, 64 * CSQ_LBA_SIZE);
  rc = dev_nvm_read(q, lba1, 1, r);
  EXPECT(rc == 0 && memcmp(r, w, CSQ_LBA_SIZE) == 0, "read 1 block back");
  rc = dev_nvm_read(q, lba64, 64, r);
  EXPECT(rc == 0 && memcmp(r, w, 64 * CSQ_LBA_SIZE) == 0, "read 64 blocks back");
  rc = dev_nvm_read(q, dev_nvm_blocks(d), 1, r);
  /* the status is the target's to choose: LBA Out of Range, or (Linux 6.1
  ** nvmet on a block device) Internal Error */
  EXPECT(rc > 0, "read past the end refused: status 0x%03x: %s", rc > 0 ? rc & 0x7FF : 0,
         dev_errmsg(q));
  memset(w, 0, 4096);
  refused(q, CSQ_CP_EXECUTE, CSQ_NSID_CP, w, 1, 0, "Execute");
  refused(q, CSQ_SLM_WRITE, CSQ_NSID_SLM, w, 0, 4096, "SLM Write");
  refused(q, CSQ_ADM_LOAD_PROGRAM, 0, w, 64, 64, "Load Program");
  /* the link still works after refusals */
  rc = dev_nvm_read(q, lba1, 1, r);
  EXPECT(rc == 0, "read after the refusals");
  memset(w, 0, 4096);
  memcpy(w, "HOST-DONE", 9);
  rc = dev_nvm_write(q, mark, 1, w);
  if (rc == 0) rc = dev_nvm_flush(q);
  EXPECT(rc == 0, "done marker at LBA %llu", (unsigned long long)mark);
  dev_queue_close(q);
  dev_unref(d);
  free(w);
  free(r);
  free(zErr);
  printf("%s\n", nFail ? "FAIL" : "HOST-OK");
  return nFail ? 1 : 0;
}
