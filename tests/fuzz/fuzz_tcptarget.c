/*
** tests/fuzz/fuzz_tcptarget.c - libFuzzer harness for csq-target's side of
** NVMe/TCP: each input is the byte stream a host sends on one connection.
** It goes through a socketpair to a real connection of a target serving an
** in-memory emulated device (device/target/target_conn.c: the PDU decoder,
** ICReq, capsules, R2T/H2CData, Fabrics commands, the device commands), then
** the host side closes; the target must answer, end the connection, and free
** everything, never crash, hang or touch memory it does not own. What the
** target sends back is read and dropped.
**
** The seeds (tests/fuzz/corpus/tcptarget/) open with a valid ICReq and
** Fabrics Connect, so the fuzzer starts past the handshake.
*/
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device/link/options.h"
#include "device/target/target.h"

static tgt_server *g_s;

static void setup(void) {
  dev_options o;
  char *zErr = NULL;
  g_s = calloc(1, sizeof(*g_s));
  pthread_mutex_init(&g_s->mu, NULL);
  g_s->nextCntlid = 1;
  g_s->fdListen = -1;
  strcpy(g_s->zAddr, "127.0.0.1:4420");
  g_s->port = 4420;
  g_s->nSub = 1;
  g_s->aSub = calloc(1, sizeof(tgt_subsys));
  strcpy(g_s->aSub[0].zNqn, "nqn.2026-12.io.csq:f.csd");
  g_s->aSub[0].zPath = strdup(":memory:");
  dev_options_default(&o);
  o.nEngines = 1;
  o.nSlmBytes = 4u << 20;
  if (dev_emu_backend.xOpen(":memory:", &o, &g_s->aSub[0].pDev, &zErr)) abort();
}

/* Drop whatever the target sends until it closes its end. */
static void *drain(void *p) {
  int fd = *(int *)p;
  char buf[65536];
  while (read(fd, buf, sizeof(buf)) > 0) {}
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int sv[2];
  pthread_t th;
  if (!g_s) setup();
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) return 0;
  if (tgt_conn_start(g_s, sv[0], "fuzz")) {
    close(sv[1]);
    return 0;
  }
  pthread_create(&th, NULL, drain, &sv[1]);
  for (size_t off = 0; off < size;) {
    ssize_t k = send(sv[1], data + off, size - off, MSG_NOSIGNAL);
    if (k <= 0) break;
    off += (size_t)k;
  }
  shutdown(sv[1], SHUT_WR);
  pthread_join(th, NULL);
  close(sv[1]);
  tgt_conn_reap(g_s, 1);
  return 0;
}
