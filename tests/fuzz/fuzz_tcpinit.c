/*
** tests/fuzz/fuzz_tcpinit.c - libFuzzer harness for csq's NVMe/TCP initiator
** facing a hostile target: each input is what a target sends on one
** connected I/O queue. The queue (device/initiator/tcp_queue.c: the PDU
** state machine, R2T/H2CData, C2HData into the caller's buffers, digests,
** completions) holds five commands in flight when the bytes arrive through a
** socketpair, then the target's side closes. Every command must complete
** (with its status, or "link is down"), never crash, hang, or write outside
** its buffer (the buffers are exactly as long as the commands say, so ASan
** sees one byte too far).
**
** Input: byte 0 bits 0-1 choose the negotiated digests (header, data), bit
** 2 the socket path (0: the queue's io_uring, 1: send/recv and ppoll, as
** where io_uring is unavailable; tcp_sock.c); the rest is the stream. Wire command ids are the slot indexes 0..4:
**   0 Read of 2 blocks (8192 bytes, C2HData)   1 Write of 3 blocks (R2T)
**   2 Identify (4096 bytes, C2HData)           3 Flush   4 Execute
** The seeds (tests/fuzz/corpus/tcpinit/, gen_tcpinit_seeds.py) answer all
** five correctly (FUZZ_TCPINIT_VERBOSE=1 prints each completion).
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device/initiator/tcp_int.h"

static uint8_t *buf_new(size_t n) {
  uint8_t *p = malloc(n);
  if (!p) abort();
  memset(p, 0x5A, n);
  return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static dev_backend d;
  static dev_stats st;
  dev_bqueue *q = NULL;
  int sv[2];
  csq_sqe e[5];
  uint8_t *aBuf[5] = {buf_new(8192), buf_new(3 * 4096), buf_new(4096), NULL, NULL};
  if (size < 1) goto out;
  memset(&d, 0, sizeof(d));
  d.zUrl = (char *)"nvme-tcp://fuzz:4420/nqn.2026-12.io.csq:f.csd";
  d.timeoutMs = 1000;
  d.nReconnect = 0; /* a drop kills the queue: no dialing from here */
  setenv("CSQ_TCP_URING", (data[0] & 4) ? "0" : "1", 1); /* read by tcpb_queue_alloc */
  if (tcpb_queue_alloc(&d, 1, 8, &st, &q)) goto out;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv)) goto out;
  q->fd = sv[0];
  q->bDown = 0;
  q->bHdgst = data[0] & 1;
  q->bDdgst = (data[0] >> 1) & 1;
  q->maxH2C = 4096;
  memset(e, 0, sizeof(e));
  e[0].opcode = CSQ_NVM_READ;
  e[0].nsid = CSQ_NSID_NVM;
  e[0].cdw12 = 1;
  e[1].opcode = CSQ_NVM_WRITE;
  e[1].nsid = CSQ_NSID_NVM;
  e[1].cdw12 = 2;
  e[2].opcode = CSQ_ADM_IDENTIFY;
  e[2].cdw10 = 1;
  e[3].opcode = CSQ_NVM_FLUSH;
  e[3].nsid = CSQ_NSID_NVM;
  e[4].opcode = CSQ_CP_EXECUTE;
  e[4].nsid = CSQ_NSID_CP;
  for (int i = 0; i < 5; i++) {
    e[i].cid = (uint16_t)(100 + i);
    e[i].prp1 = (uint64_t)(uintptr_t)aBuf[i];
    tcpb_submit(q, &e[i]);
  }
  /* what the host sent is not read: the socket buffer holds it */
  for (size_t off = 1; off < size;) {
    ssize_t k = send(sv[1], data + off, size - off, MSG_NOSIGNAL);
    if (k <= 0) break;
    off += (size_t)k;
  }
  shutdown(sv[1], SHUT_WR);
  /* every command completes: at the latest when the stream ends */
  for (int n = 0, nIdle = 0; n < 5;) {
    csq_cqe c;
    if (tcpb_reap(q, &c, 100 * 1000 * 1000)) {
      if (++nIdle == 20) abort(); /* a hang: the stream has ended long ago */
      continue;
    }
    if (c.cid < 100 || c.cid > 104) abort();
    if (getenv("FUZZ_TCPINIT_VERBOSE")) /* to check that a seed goes where meant */
      fprintf(stderr, "cid %u status 0x%03x\n", c.cid, csq_cqe_sf(&c) & 0x7FF);
    n++;
  }
  close(sv[1]);
out:
  tcpb_queue_free(q); /* closes sv[0] */
  for (int i = 0; i < 5; i++) free(aBuf[i]);
  return 0;
}
