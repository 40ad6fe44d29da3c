/*
** device/target/target_main.c - build/csq-target, csq's NVMe/TCP target:
**
**   csq-target [-l ADDR:PORT] [-t THREADS] [-m MIB] [-b ADDR:PORT] [-f FAULTS] IMAGE...
**
** serves each image x.csd (created when missing) as the subsystem
** nqn.2026-12.io.csq:x.csd on ADDR:PORT (default 127.0.0.1:4420), with
** THREADS compute engines per device (default one per core). A host reaches
** it as device='nvme-tcp://ADDR:PORT/nqn.2026-12.io.csq:x.csd'; the Linux
** kernel as `nvme connect -t tcp -a ADDR -s PORT -n NQN`. -b also serves
** a plain TCP stream on a second address, the baseline bench/tcplink
** measures the link against (target_plain.c). -f gives the devices
** fault-injection rules (device/emu/fault.h), for tests: "op=execute,nth=3,
** action=crash" ends the target as the third Execute arrives. One log line per
** connection on stderr; SIGTERM or SIGINT ends it cleanly. -m gives each
** device MIB MiB of its own DRAM to cache its media, read with O_DIRECT
** under it (device/emu/mcache.h); SIGUSR1 logs the caches' counters.
*/
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "device/target/target.h"

static void usage(void) {
  fprintf(stderr,
          "usage: csq-target [-l ADDR:PORT] [-t THREADS] [-m MIB] [-b ADDR:PORT] [-f FAULTS] "
          "IMAGE...\n"
          "  serves each IMAGE (created if missing) as nqn.2026-12.io.csq:<name>\n"
          "  -m: a media cache of MIB MiB per device, media read with O_DIRECT under it\n"
          "  -b: also a plain TCP stream server for benchmarks (bench/tcplink)\n"
          "  -f: fault-injection rules for the devices (device/emu/fault.h), tests\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *zListen = "127.0.0.1:4420", *zPlain = NULL, *zFault = NULL;
  int nEngines = 0, opt, fdSig, rc;
  long long nCacheMiB = 0;
  sigset_t set;
  tgt_server *s;
  char *zErr = NULL;
  while ((opt = getopt(argc, argv, "l:t:m:b:f:h")) != -1) {
    switch (opt) {
    case 'l':
      zListen = optarg;
      break;
    case 'f':
      zFault = optarg;
      break;
    case 'b':
      zPlain = optarg;
      break;
    case 'm':
      nCacheMiB = atoll(optarg);
      if (nCacheMiB <= 0) usage();
      break;
    case 't':
      nEngines = atoi(optarg);
      if (nEngines < 0) usage();
      break;
    default:
      usage();
    }
  }
  if (optind >= argc) usage();
  /* every thread inherits the mask: the signals arrive only through fdSig */
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  fdSig = signalfd(-1, &set, SFD_CLOEXEC);
  if (fdSig < 0) {
    perror("csq-target: signalfd");
    return 1;
  }
  rc = tgt_server_open(zListen, argv + optind, argc - optind, nEngines, zFault, (uint64_t)nCacheMiB,
                       &s, &zErr);
  if (rc) {
    fprintf(stderr, "csq-target: %s\n", zErr ? zErr : strerror(-rc));
    free(zErr);
    return 1;
  }
  if (zPlain) {
    rc = tgt_plain_start(zPlain, &zErr);
    if (rc) {
      fprintf(stderr, "csq-target: %s\n", zErr ? zErr : strerror(-rc));
      free(zErr);
      tgt_server_close(s);
      return 1;
    }
    fprintf(stderr, "csq-target: plain TCP stream (benchmarks) on %s\n", zPlain);
  }
  for (int i = 0; i < s->nSub; i++)
    fprintf(stderr, "csq-target: serving %s as %s on %s\n", s->aSub[i].zPath, s->aSub[i].zNqn,
            zListen);
  fprintf(stderr, "csq-target: ready\n");
  for (;;) {
    struct signalfd_siginfo si;
    rc = tgt_server_run(s, fdSig);
    if (rc || read(fdSig, &si, sizeof(si)) != (ssize_t)sizeof(si) || si.ssi_signo != SIGUSR1) break;
    tgt_server_log_cache(s);
  }
  tgt_server_log_cache(s);
  tgt_server_close(s);
  fprintf(stderr, "csq-target: stopped\n");
  return rc ? 1 : 0;
}
