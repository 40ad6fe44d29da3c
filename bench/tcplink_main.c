/*
** bench/tcplink_main.c - the NVMe/TCP link against a plain TCP stream
** between the same two processes (build/bench/tcplink).
**
**   tcplink nvme-tcp://HOST:PORT/NQN HOST:PLAINPORT [ROUNDS]
**
** The second address is csq-target's plain stream server (csq-target -b,
** device/target/target_plain.c), in the same process as the NVMe/TCP target.
** Measured, each variant ROUNDS times (default 5), interleaved, medians
** reported:
**   rtt   one 4 KiB read at a time: NVM Read of 1 block through the host
**         driver (capsule, C2HData, response; the device reads its page
**         cache) against an 8-byte request answered by 4096 bytes;
**   read  128 KiB reads, 8 in flight, over the first 64 MiB of the image
**         (written once first) against 8 pipelined 128 KiB requests.
** Output, one line each, for bench/tcp_bench.py:
**   rtt_4k_us nvme-tcp 98.1 plain 74.2
**   read_128k_MBps nvme-tcp 512.3 plain 601.0
*/
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "device/driver/driver.h"

#define RTT_N      2000
#define READ_BYTES (256ull << 20) /* per throughput round */
#define BIG        (128u * 1024)
#define INFLIGHT   8
#define AREA_LBAS  (16384u) /* 64 MiB of 4 KiB blocks */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *z) {
  fprintf(stderr, "tcplink: %s\n", z);
  exit(1);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *a, int n) {
  qsort(a, (size_t)n, sizeof(double), cmp_d);
  return a[n / 2];
}

/* ---- plain TCP ------------------------------------------------------------ */

static int plain_dial(const char *zAddr) {
  char zHost[256];
  const char *zColon = strrchr(zAddr, ':');
  struct addrinfo hints, *p = NULL;
  int fd, one = 1;
  if (!zColon) die("want HOST:PORT for the plain stream");
  snprintf(zHost, sizeof(zHost), "%.*s", (int)(zColon - zAddr), zAddr);
  memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(zHost, zColon + 1, &hints, &p)) die("cannot resolve the plain address");
  fd = socket(p->ai_family, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, p->ai_addr, p->ai_addrlen)) die("cannot connect to the plain stream");
  freeaddrinfo(p);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

static void plain_ask(int fd, uint64_t n) {
  uint8_t a[8];
  for (int i = 0; i < 8; i++) a[i] = (uint8_t)(n >> (8 * i));
  if (send(fd, a, 8, MSG_NOSIGNAL) != 8) die("plain stream: send failed");
}

static void plain_take(int fd, uint8_t *p, size_t n) {
  while (n) {
    ssize_t k = recv(fd, p, n, 0);
    if (k <= 0) die("plain stream: closed");
    p += k;
    n -= (size_t)k;
  }
}

static double plain_rtt(int fd, uint8_t *buf) {
  double t0 = now_s();
  for (int i = 0; i < RTT_N; i++) {
    plain_ask(fd, 4096);
    plain_take(fd, buf, 4096);
  }
  return (now_s() - t0) / RTT_N * 1e6;
}

static double plain_read(int fd, uint8_t *buf) {
  uint64_t nReq = READ_BYTES / BIG, nAsked = 0, nGot = 0;
  double t0 = now_s();
  while (nAsked < INFLIGHT) plain_ask(fd, BIG), nAsked++;
  while (nGot < nReq) {
    plain_take(fd, buf + (nGot % INFLIGHT) * BIG, BIG);
    nGot++;
    if (nAsked < nReq) plain_ask(fd, BIG), nAsked++;
  }
  return (double)READ_BYTES / (now_s() - t0) / 1e6;
}

/* ---- NVMe/TCP --------------------------------------------------------------- */

static double link_rtt(dev_queue *q, uint8_t *buf) {
  double t0 = now_s();
  for (int i = 0; i < RTT_N; i++)
    if (dev_nvm_read(q, (uint64_t)(i % AREA_LBAS), 1, buf)) die("NVM Read failed");
  return (now_s() - t0) / RTT_N * 1e6;
}

static void read_submit(dev_queue *q, uint8_t *buf, uint64_t i) {
  csq_sqe s;
  uint32_t nlb = BIG / 4096;
  uint64_t slba = (i * nlb) % AREA_LBAS;
  memset(&s, 0, sizeof(s));
  s.opcode = CSQ_NVM_READ;
  s.nsid = CSQ_NSID_NVM;
  s.prp1 = (uint64_t)(uintptr_t)(buf + (i % INFLIGHT) * BIG);
  s.cdw10 = (uint32_t)slba;
  s.cdw11 = (uint32_t)(slba >> 32);
  s.cdw12 = nlb - 1;
  if (dev_submit(q, &s)) die("cannot submit a read");
}

static double link_read(dev_queue *q, uint8_t *buf) {
  uint64_t nReq = READ_BYTES / BIG, nSent = 0, nDone = 0;
  double t0 = now_s();
  while (nSent < INFLIGHT) read_submit(q, buf, nSent++);
  while (nDone < nReq) {
    csq_cqe c;
    if (dev_reap(q, &c, -1)) die("no completion");
    if (csq_cqe_sf(&c) & 0x7FF) die(dev_cqe_errmsg(q, &c));
    nDone++;
    if (nSent < nReq) read_submit(q, buf, nSent++);
  }
  return (double)READ_BYTES / (now_s() - t0) / 1e6;
}

int main(int argc, char **argv) {
  dev_device *pDev = NULL;
  dev_queue *q = NULL;
  char *zErr = NULL;
  int nRound = argc > 3 ? atoi(argv[3]) : 5, fd;
  if (argc < 3 || nRound < 1) {
    fprintf(stderr, "usage: tcplink nvme-tcp://HOST:PORT/NQN HOST:PLAINPORT [ROUNDS]\n");
    return 2;
  }
  uint8_t *buf = aligned_alloc(4096, (size_t)INFLIGHT * BIG);
  double *a = calloc((size_t)nRound * 4, sizeof(double));
  if (!buf || !a) die("out of memory");
  if (dev_open(argv[1], NULL, &pDev, &zErr)) die(zErr ? zErr : "cannot open the device");
  if (dev_queue_open(pDev, &q)) die("cannot open a queue");
  if (dev_nvm_blocks(pDev) < AREA_LBAS) die("the image is smaller than 64 MiB");
  memset(buf, 0xA5, (size_t)INFLIGHT * BIG);
  for (uint32_t lba = 0; lba < AREA_LBAS; lba += BIG / 4096)
    if (dev_nvm_write(q, lba, BIG / 4096, buf)) die("cannot write the read area");
  fd = plain_dial(argv[2]);
  /* warm both paths */
  link_rtt(q, buf);
  plain_rtt(fd, buf);
  for (int r = 0; r < nRound; r++) {
    /* the order flips every round, so that neither side always goes first */
    if (r & 1) {
      a[1 * nRound + r] = plain_rtt(fd, buf);
      a[0 * nRound + r] = link_rtt(q, buf);
      a[3 * nRound + r] = plain_read(fd, buf);
      a[2 * nRound + r] = link_read(q, buf);
    } else {
      a[0 * nRound + r] = link_rtt(q, buf);
      a[1 * nRound + r] = plain_rtt(fd, buf);
      a[2 * nRound + r] = link_read(q, buf);
      a[3 * nRound + r] = plain_read(fd, buf);
    }
  }
  printf("rtt_4k_us nvme-tcp %.1f plain %.1f\n", median(a, nRound), median(a + nRound, nRound));
  printf("read_128k_MBps nvme-tcp %.1f plain %.1f\n", median(a + 2 * nRound, nRound),
         median(a + 3 * nRound, nRound));
  close(fd);
  dev_queue_close(q);
  dev_unref(pDev);
  free(buf);
  free(a);
  return 0;
}
