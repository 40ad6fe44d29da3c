/*
** device/target/target_plain.c - csq-target's plain TCP stream server for
** benchmarks (target.h, csq-target -b ADDR:PORT). bench/tcplink measures
** the NVMe/TCP link against it: same two processes, same loopback, same
** socket options (TCP_NODELAY), but no PDUs, no commands and no device, so
** the difference is what NVMe/TCP and the device path cost.
**
** Protocol: the client sends an 8-byte little-endian count N (at most
** TGT_PLAIN_MAX); the server answers N bytes (zeros). Requests may be
** pipelined. One blocking thread per connection, as the target's own.
*/
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device/format/le.h"
#include "device/link/msg.h"
#include "device/target/target.h"

#define TGT_PLAIN_MAX (16u << 20)

static uint8_t aZero[1 << 20];

/* Read exactly n bytes: 0, or -1 at end of stream. */
static int plain_read(int fd, uint8_t *p, size_t n) {
  while (n) {
    ssize_t k = recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static void *plain_conn(void *pArg) {
  int fd = (int)(intptr_t)pArg;
  uint8_t aReq[8];
  while (plain_read(fd, aReq, 8) == 0) {
    uint64_t n = csq_le64(aReq);
    if (n > TGT_PLAIN_MAX) break;
    while (n) {
      size_t k = n < sizeof(aZero) ? (size_t)n : sizeof(aZero);
      ssize_t w = send(fd, aZero, k, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) goto out;
      n -= (uint64_t)w;
    }
  }
out:
  close(fd);
  return NULL;
}

static void *plain_accept(void *pArg) {
  int fdListen = (int)(intptr_t)pArg, one = 1;
  for (;;) {
    int fd = accept4(fdListen, NULL, NULL, SOCK_CLOEXEC);
    pthread_t t;
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      break;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (pthread_create(&t, NULL, plain_conn, (void *)(intptr_t)fd)) {
      close(fd);
      continue;
    }
    pthread_detach(t);
  }
  return NULL;
}

int tgt_plain_start(const char *zListen, char **pzErr) {
  struct sockaddr_in sa;
  int one = 1, rc, fd;
  pthread_t t;
  rc = tgt_parse_addr(zListen, &sa, pzErr);
  if (rc) return rc;
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *pzErr = dev_mprintf("socket: %s", strerror(errno));
    return -errno;
  }
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 16)) {
    rc = -errno;
    *pzErr = dev_mprintf("cannot listen on %s: %s", zListen, strerror(errno));
    close(fd);
    return rc;
  }
  rc = pthread_create(&t, NULL, plain_accept, (void *)(intptr_t)fd);
  if (rc) {
    close(fd);
    *pzErr = dev_mprintf("cannot start the plain TCP server: %s", strerror(rc));
    return -rc;
  }
  pthread_detach(t);
  return 0;
}
