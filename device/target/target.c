/*
** device/target/target.c - csq-target's server (target.h): the subsystems it
** serves, the listening socket, the accept loop and an orderly end.
**
** Shutting down closes the listener, then every connection (each one's device
** queue pair drains the commands already inside the device, so every write
** a host saw complete is in the image), then the devices.
*/
#include <arpa/inet.h>
#include <errno.h>
#include <libgen.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device/emu/mcache.h"
#include "device/link/msg.h"
#include "device/link/options.h"
#include "device/target/target.h"

int tgt_parse_addr(const char *z, struct sockaddr_in *pSa, char **pzErr) {
  char zHost[64];
  const char *zColon = strrchr(z, ':');
  char *zEnd;
  long port;
  memset(pSa, 0, sizeof(*pSa));
  pSa->sin_family = AF_INET;
  snprintf(zHost, sizeof(zHost), "%.*s", zColon ? (int)(zColon - z) : 0, z);
  port = strtol(zColon ? zColon + 1 : z, &zEnd, 10);
  if (*zEnd || port <= 0 || port > 65535) {
    *pzErr = dev_mprintf("bad listen address %s: want ADDR:PORT, e.g. 127.0.0.1:4420", z);
    return -EINVAL;
  }
  pSa->sin_port = htons((uint16_t)port);
  if (!zHost[0]) strcpy(zHost, "0.0.0.0");
  if (inet_pton(AF_INET, zHost, &pSa->sin_addr) != 1) {
    *pzErr = dev_mprintf("bad listen address %s: %s is not an IPv4 address", z, zHost);
    return -EINVAL;
  }
  return 0;
}

int tgt_server_open(const char *zListen, char **azImage, int nImage, int nEngines,
                    const char *zFault, uint64_t nCacheMiB, tgt_server **ppS, char **pzErr) {
  tgt_server *s = calloc(1, sizeof(*s));
  struct sockaddr_in sa;
  int rc, one = 1;
  *ppS = NULL;
  *pzErr = NULL;
  if (!s) return -ENOMEM;
  pthread_mutex_init(&s->mu, NULL);
  s->fdListen = -1;
  s->nextCntlid = 1;
  snprintf(s->zAddr, sizeof(s->zAddr), "%s", zListen);
  rc = tgt_parse_addr(zListen, &sa, pzErr);
  if (rc) goto fail;
  s->port = ntohs(sa.sin_port);
  s->aSub = calloc((size_t)nImage, sizeof(tgt_subsys));
  if (!s->aSub) {
    rc = -ENOMEM;
    goto fail;
  }
  for (int i = 0; i < nImage; i++) {
    tgt_subsys *p = &s->aSub[i];
    dev_options o;
    char *zCopy = strdup(azImage[i]);
    if (!zCopy) {
      rc = -ENOMEM;
      goto fail;
    }
    snprintf(p->zNqn, sizeof(p->zNqn), "%s%s", TGT_NQN_PREFIX, basename(zCopy));
    free(zCopy);
    for (int k = 0; k < i; k++) {
      if (strcmp(s->aSub[k].zNqn, p->zNqn) == 0) {
        *pzErr = dev_mprintf("%s and %s would both be %s: give images distinct names",
                             s->aSub[k].zPath, azImage[i], p->zNqn);
        rc = -EINVAL;
        goto fail;
      }
    }
    p->zPath = strdup(azImage[i]);
    dev_options_default(&o);
    o.bCreate = 1;
    o.nEngines = nEngines;
    o.zFault = zFault;
    /* the device's own memory caches its media: the page cache under it
    ** would be the host's */
    o.bDirect = nCacheMiB > 0;
    o.nCacheBytes = nCacheMiB << 20;
    rc = p->zPath ? dev_emu_backend.xOpen(p->zPath, &o, &p->pDev, pzErr) : -ENOMEM;
    s->nSub = i + 1;
    if (rc) {
      p->pDev = NULL;
      if (!*pzErr) *pzErr = dev_mprintf("cannot open %s: %s", azImage[i], strerror(-rc));
      goto fail;
    }
    dev_mcache_stats st;
    int bDirect;
    if (dev_emu_cache_info(p->pDev, &st, &bDirect) == 0)
      fprintf(stderr, "csq-target: %s: media cache of %llu MiB over %s\n", p->zPath,
              (unsigned long long)nCacheMiB,
              bDirect ? "O_DIRECT reads"
                      : "buffered I/O (the file system refuses O_DIRECT, e.g. tmpfs)");
  }
  s->fdListen = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s->fdListen < 0) {
    rc = -errno;
    *pzErr = dev_mprintf("socket: %s", strerror(errno));
    goto fail;
  }
  setsockopt(s->fdListen, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(s->fdListen, (struct sockaddr *)&sa, sizeof(sa)) || listen(s->fdListen, 64)) {
    rc = -errno;
    *pzErr = dev_mprintf("cannot listen on %s: %s", zListen, strerror(errno));
    goto fail;
  }
  *ppS = s;
  return 0;
fail:
  tgt_server_close(s);
  return rc;
}

int tgt_server_run(tgt_server *s, int fdStop) {
  for (;;) {
    struct pollfd a[2] = {{s->fdListen, POLLIN, 0}, {fdStop, POLLIN, 0}};
    int n = poll(a, 2, 200);
    tgt_conn_reap(s, 0);
    if (n < 0 && errno != EINTR) return -errno;
    if (n <= 0) continue;
    if (a[1].revents) return 0;
    if (a[0].revents & POLLIN) {
      struct sockaddr_in peer;
      socklen_t nPeer = sizeof(peer);
      char zPeer[64], zIp[INET_ADDRSTRLEN];
      int fd = accept4(s->fdListen, (struct sockaddr *)&peer, &nPeer, SOCK_CLOEXEC);
      if (fd < 0) continue;
      inet_ntop(AF_INET, &peer.sin_addr, zIp, sizeof(zIp));
      snprintf(zPeer, sizeof(zPeer), "%s:%u", zIp, ntohs(peer.sin_port));
      if (tgt_conn_start(s, fd, zPeer))
        fprintf(stderr, "csq-target: %s: cannot serve: out of memory or threads\n", zPeer);
    }
  }
}

void tgt_server_log_cache(tgt_server *s) {
  for (int i = 0; i < s->nSub; i++) {
    dev_mcache_stats st;
    int bDirect;
    if (!s->aSub[i].pDev || dev_emu_cache_info(s->aSub[i].pDev, &st, &bDirect)) continue;
    fprintf(stderr, "csq-target: %s: cache %llu hits, %llu misses, %llu evictions, %llu lines\n",
            s->aSub[i].zPath, (unsigned long long)st.nHit, (unsigned long long)st.nMiss,
            (unsigned long long)st.nEvict, (unsigned long long)st.nLine);
  }
}

void tgt_server_close(tgt_server *s) {
  if (!s) return;
  if (s->fdListen >= 0) close(s->fdListen);
  tgt_conn_stop_all(s);
  tgt_conn_reap(s, 1);
  for (int i = 0; i < s->nSub; i++) {
    if (s->aSub[i].pDev) dev_emu_backend.xClose(s->aSub[i].pDev);
    free(s->aSub[i].zPath);
  }
  free(s->aSub);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
