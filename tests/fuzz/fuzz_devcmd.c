/*
** tests/fuzz/fuzz_devcmd.c - libFuzzer harness for the emulated device's
** command decoder: arbitrary 64-byte SQEs go to an in-memory emulated device
** through dev_exec, which must validate every field and answer with a status,
** never crash, hang or touch memory it was not given.
**
** Input: up to 32 records of [64-byte SQE][u16 LE n][n bytes]. The n bytes
** pre-fill the data buffer (the rest is zero). The harness owns the one data
** buffer, exactly DATA_BYTES long (heap: ASan sees any overrun), and points
** prp1 at it; fields that size the transfer of a documented command are
** clamped so the size the command implies fits the buffer - anything the
** device moves past it is the device's fault. The device lives across inputs
** (programs, MRS, SLM and media contents accumulate, as in real use).
*/
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device/driver/driver.h"
#include "device/format/program.h"

#define DATA_BYTES (64u * 1024u)

static dev_device *g_dev;
static dev_queue *g_q;
static uint8_t *g_buf;

static void setup(void) {
  dev_options o;
  char *zErr = NULL;
  dev_options_default(&o);
  o.nEngines = 1;
  o.timeoutMs = 5000;
  o.nSlmBytes = 1u << 20;
  if (dev_open(":memory:", &o, &g_dev, &zErr) != 0 || dev_queue_open(g_dev, &g_q) != 0) abort();
  g_buf = malloc(DATA_BYTES);
  if (!g_buf) abort();
}

static uint32_t clamp(uint32_t v, uint32_t max) {
  return v > max ? v % (max + 1) : v;
}

/* Make the transfer the command implies fit DATA_BYTES (see cmd.h). */
static void bound(csq_sqe *e) {
  switch (e->opcode) {
  case CSQ_ADM_LOAD_PROGRAM:
    e->cdw12 = clamp(e->cdw12, DATA_BYTES);
    break;
  case CSQ_ADM_MRS_MGMT:
    e->cdw11 = clamp(e->cdw11, DATA_BYTES / sizeof(csq_mrange));
    break;
  default:
    break;
  }
  if (e->nsid == CSQ_NSID_NVM && (e->opcode == CSQ_NVM_READ || e->opcode == CSQ_NVM_WRITE))
    e->cdw12 = (e->cdw12 & ~0xFFFFu) | clamp(e->cdw12 & 0xFFFF, DATA_BYTES / CSQ_LBA_SIZE - 1);
  if (e->nsid == CSQ_NSID_CP && e->opcode == CSQ_CP_EXECUTE)
    e->cdw11 = clamp(e->cdw11, DATA_BYTES / sizeof(csq_mrange));
  if (e->nsid == CSQ_NSID_SLM && (e->opcode == CSQ_SLM_READ || e->opcode == CSQ_SLM_WRITE))
    e->cdw12 = clamp(e->cdw12, DATA_BYTES);
  /* SLM_COPY: at most 256 descriptors of 32 bytes: always fits */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_dev) setup();
  size_t i = 0;
  for (int k = 0; k < 32 && i + sizeof(csq_sqe) <= size; k++) {
    csq_sqe e;
    csq_cqe c;
    memcpy(&e, data + i, sizeof(e));
    i += sizeof(e);
    size_t n = 0;
    if (i + 2 <= size) {
      n = (size_t)data[i] | (size_t)data[i + 1] << 8;
      i += 2;
    }
    if (n > size - i) n = size - i;
    if (n > DATA_BYTES) n = DATA_BYTES;
    memset(g_buf, 0, DATA_BYTES);
    memcpy(g_buf, data + i, n);
    i += n;
    e.mptr = 0;
    e.prp1 = (uint64_t)(uintptr_t)g_buf;
    e.prp2 = 0;
    bound(&e);
    int rc = dev_exec(g_q, &e, &c);
    if (rc == -ETIMEDOUT || rc == CSQ_SC_HOST_TIMEOUT) abort(); /* the device hung on a command */
  }
  return 0;
}
