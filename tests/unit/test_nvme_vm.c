/*
** tests/unit/test_nvme_vm.c - the nvme backend on a real NVMe controller:
** boots a QEMU VM (qemu-nvme-run) and runs the static program
** build/tests/nvme_vm_guest (tests/unit/nvme_vm_guest_main.c) in it, twice:
** on a namespace with 512-byte LBAs (QEMU's default) and with 4096-byte LBAs.
**
** Builds nothing itself: the guest program must sit next to this binary
** (`make build/tests/nvme_vm_guest`). Skips (77) when the guest program is
** missing, qemu-nvme-run is not found, or QEMU cannot start (its exit 125).
** qemu-nvme-run is looked for in $QEMU_NVME_RUN, tools/ of the tree, then
** ../shared/tools/ beside the tree (where a checkout finds the shared tools,
** whatever folder it was cloned to). The tree is found from this program's
** own path, <tree>/<build>/tests/test_nvme_vm. Prints each VM run's wall time.
*/
#include <errno.h>
#include <limits.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Run argv with extra environment zEnv ("NAME=value" or NULL); its exit
** status, or -1 if it could not run. */
static int run(char *const argv[], const char *zEnv) {
  pid_t pid = fork();
  int st;
  if (pid < 0) return -1;
  if (pid == 0) {
    if (zEnv) putenv((char *)zEnv);
    execv(argv[0], argv);
    _exit(127);
  }
  while (waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv) {
  char zSelf[PATH_MAX], zDir[PATH_MAX], zGuest[PATH_MAX + 32], zRunner[PATH_MAX + 64];
  const char *zEnv = getenv("QEMU_NVME_RUN");
  static const struct {
    const char *zLba, *zEnv;
  } aRun[] = {
      {"512", NULL},
      {"4096", "QEMU_NVME_RUN_QEMU_OPTS=-global nvme.logical_block_size=4096 "
               "-global nvme.physical_block_size=4096"},
  };
  ssize_t n = readlink("/proc/self/exe", zSelf, sizeof(zSelf) - 1);
  int i, nFail = 0;
  (void)argc;
  if (n <= 0)
    snprintf(zSelf, sizeof(zSelf), "%s", argv[0]);
  else
    zSelf[n] = 0;
  snprintf(zDir, sizeof(zDir), "%s", zSelf);
  snprintf(zGuest, sizeof(zGuest), "%s/nvme_vm_guest", dirname(zDir));
  if (access(zGuest, X_OK) != 0) {
    printf("SKIP: %s not built (make build/tests/nvme_vm_guest)\n", zGuest);
    return 77;
  }
  /* <tree>/build/tests/<self> -> the tree's tools/, then ../shared/tools/ */
  if (zEnv && access(zEnv, X_OK) == 0) {
    snprintf(zRunner, sizeof(zRunner), "%s", zEnv);
  } else {
    snprintf(zRunner, sizeof(zRunner), "%s/../../tools/qemu-nvme-run", zDir);
    if (access(zRunner, X_OK) != 0)
      snprintf(zRunner, sizeof(zRunner), "%s/../../../shared/tools/qemu-nvme-run", zDir);
  }
  if (access(zRunner, X_OK) != 0) {
    printf("SKIP: qemu-nvme-run not found (set QEMU_NVME_RUN)\n");
    return 77;
  }
  for (i = 0; i < (int)(sizeof(aRun) / sizeof(aRun[0])); i++) {
    char *av[] = {zRunner, (char *)"--timeout",  (char *)"120",
                  zGuest,  (char *)"/dev/ng0n1", (char *)aRun[i].zLba,
                  NULL};
    int64_t t0 = now_ms();
    int rc;
    fflush(stdout);
    rc = run(av, aRun[i].zEnv);
    printf("test_nvme_vm: %s-byte LBAs: exit %d, VM wall time %.1f s\n", aRun[i].zLba, rc,
           (now_ms() - t0) / 1000.0);
    if (rc == 125) {
      printf("SKIP: QEMU could not start (qemu-nvme-run exit 125; reason above)\n");
      return 77;
    }
    if (rc != 0) {
      printf("FAIL: nvme_vm_guest with %s-byte LBAs exited %d%s\n", aRun[i].zLba, rc,
             rc == 124 ? " (timeout)" : "");
      nFail++;
    }
  }
  return nFail ? 1 : 0;
}
