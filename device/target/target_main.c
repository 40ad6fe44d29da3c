/*
** device/target/target_main.c - build/csq-target, csq's NVMe/TCP target:
**
**   csq-target [-l ADDR:PORT] [-t THREADS] IMAGE...
**
** serves each image x.csd (created when missing) as the subsystem
** nqn.2026-12.io.csq:x.csd on ADDR:PORT (default 127.0.0.1:4420), with
** THREADS compute engines per device (default one per core). A host reaches
** it as device='nvme-tcp://ADDR:PORT/nqn.2026-12.io.csq:x.csd'; the Linux
** kernel as `nvme connect -t tcp -a ADDR -s PORT -n NQN`. One log line per
** connection on stderr; SIGTERM or SIGINT ends it cleanly.
*/
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "device/target/target.h"

static void usage(void) {
  fprintf(stderr, "usage: csq-target [-l ADDR:PORT] [-t THREADS] IMAGE...\n"
                  "  serves each IMAGE (created if missing) as nqn.2026-12.io.csq:<name>\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *zListen = "127.0.0.1:4420";
  int nEngines = 0, opt, fdSig, rc;
  sigset_t set;
  tgt_server *s;
  char *zErr = NULL;
  while ((opt = getopt(argc, argv, "l:t:h")) != -1) {
    switch (opt) {
    case 'l':
      zListen = optarg;
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
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  fdSig = signalfd(-1, &set, SFD_CLOEXEC);
  if (fdSig < 0) {
    perror("csq-target: signalfd");
    return 1;
  }
  rc = tgt_server_open(zListen, argv + optind, argc - optind, nEngines, &s, &zErr);
  if (rc) {
    fprintf(stderr, "csq-target: %s\n", zErr ? zErr : strerror(-rc));
    free(zErr);
    return 1;
  }
  for (int i = 0; i < s->nSub; i++)
    fprintf(stderr, "csq-target: serving %s as %s on %s\n", s->aSub[i].zPath, s->aSub[i].zNqn,
            zListen);
  fprintf(stderr, "csq-target: ready\n");
  rc = tgt_server_run(s, fdSig);
  tgt_server_close(s);
  fprintf(stderr, "csq-target: stopped\n");
  return rc ? 1 : 0;
}
