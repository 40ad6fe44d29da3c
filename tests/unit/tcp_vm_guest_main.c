/*
** tests/unit/tcp_vm_guest_main.c - the program tests/sql/test_tcp_vm.py runs
** inside a QEMU guest: the guest kernel's nvme-tcp initiator connects to
** csq-target on the host, and csq (linked in statically, with SQLite) runs
** queries on the namespace the kernel created, through io_uring passthrough
** on its /dev/ngXnY node. The target's device has csq compute, so the nvme
** backend sends csq's program, SLM and Execute commands through the kernel's
** NVMe stack to it (nvme_backend.c); the kernel is only the link.
**
** Usage: tcp_vm_guest ADDR PORT NQN FILL QUERY...
** Connects (/dev/nvme-fabrics), creates table t on device 'nvme:/dev/ngNn1',
** fills it with the statement FILL (the host makes its native copy with the
** same statement; "{t}" stands for the table), then runs each QUERY and
** prints
**   Q<i> <row>|<row>...      (columns joined by ',', NULL as "NULL")
** then the counters: "DEV <backend> <compute>" from csq_devices and
** "STAT <name> <value>" for programs_executed and commands. Exit 0, or 1
** with "FAIL ..." on the console.
*/
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/nvme/nvme_passthru.h"
#include "ext/csq.h"

/* Connect through /dev/nvme-fabrics; the controller instance, or -1. */
static int fabrics_connect(const char *zAddr, const char *zPort, const char *zNqn) {
  char zOpt[512], zAns[256];
  int fd = open("/dev/nvme-fabrics", O_RDWR), n, inst = -1;
  if (fd < 0) {
    printf("FAIL open /dev/nvme-fabrics: %s\n", strerror(errno));
    return -1;
  }
  snprintf(zOpt, sizeof(zOpt), "transport=tcp,traddr=%s,trsvcid=%s,nqn=%s", zAddr, zPort, zNqn);
  if (write(fd, zOpt, strlen(zOpt)) < 0) {
    printf("FAIL nvme-tcp connect %s: %s\n", zOpt, strerror(errno));
    close(fd);
    return -1;
  }
  n = (int)read(fd, zAns, sizeof(zAns) - 1);
  if (n > 0) {
    zAns[n] = 0;
    if (sscanf(zAns, "instance=%d", &inst) != 1) inst = -1;
  }
  close(fd);
  if (inst < 0) printf("FAIL connect answered %s\n", n > 0 ? zAns : "nothing");
  return inst;
}

/* Run zSql, printing its rows on one line after zTag (NULL: print nothing). */
static int run(sqlite3 *db, const char *zTag, const char *zSql) {
  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(db, zSql, -1, &s, NULL), nRow = 0;
  if (rc == SQLITE_OK) {
    if (zTag) printf("%s ", zTag);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      if (zTag) {
        printf("%s", nRow++ ? "|" : "");
        for (int i = 0; i < sqlite3_column_count(s); i++) {
          const unsigned char *z = sqlite3_column_text(s, i);
          printf("%s%s", i ? "," : "", z ? (const char *)z : "NULL");
        }
      }
    }
    if (zTag) printf("\n");
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
  }
  if (rc != SQLITE_OK) printf("FAIL %s: %s\n", zSql, sqlite3_errmsg(db));
  sqlite3_finalize(s);
  return rc;
}

/* zIn with every "{t}" replaced by zT; sqlite3_free it. */
static char *subst(const char *zIn, const char *zT) {
  char *z = sqlite3_mprintf("%s", "");
  const char *p;
  while (z && (p = strstr(zIn, "{t}")) != NULL) {
    char *zNew = sqlite3_mprintf("%s%.*s%s", z, (int)(p - zIn), zIn, zT);
    sqlite3_free(z);
    z = zNew;
    zIn = p + 3;
  }
  if (z) {
    char *zNew = sqlite3_mprintf("%s%s", z, zIn);
    sqlite3_free(z);
    z = zNew;
  }
  return z;
}

int main(int argc, char **argv) {
  char zDev[64], *zSql;
  sqlite3 *db = NULL;
  int inst, nFail = 0;
  if (argc < 5) {
    printf("FAIL usage: tcp_vm_guest ADDR PORT NQN FILL QUERY...\n");
    return 1;
  }
  dev_nvme_backend_get(); /* links the nvme backend in (nvme_passthru.h) */
  inst = fabrics_connect(argv[1], argv[2], argv[3]);
  if (inst < 0) return 1;
  snprintf(zDev, sizeof(zDev), "/dev/ng%dn1", inst);
  for (int i = 0; i < 50 && access(zDev, F_OK) != 0; i++) usleep(100000); /* udev-less: devtmpfs */
  sqlite3_auto_extension((void (*)(void))sqlite3_csq_init);
  if (sqlite3_open("/tmp/guest.db", &db) != SQLITE_OK) {
    printf("FAIL sqlite3_open: %s\n", sqlite3_errmsg(db));
    return 1;
  }
  zSql = sqlite3_mprintf("CREATE VIRTUAL TABLE t USING csq(id INTEGER PRIMARY KEY, a INTEGER, b "
                         "REAL, c TEXT, device='nvme:%s')",
                         zDev);
  nFail += run(db, NULL, zSql) != SQLITE_OK;
  sqlite3_free(zSql);
  zSql = subst(argv[4], "t");
  nFail += run(db, NULL, "BEGIN") != SQLITE_OK;
  nFail += run(db, NULL, zSql) != SQLITE_OK;
  nFail += run(db, NULL, "COMMIT") != SQLITE_OK;
  sqlite3_free(zSql);
  nFail += run(db, NULL, "SELECT csq_stats_reset()") != SQLITE_OK;
  for (int i = 5; !nFail && i < argc; i++) {
    char zTag[16];
    snprintf(zTag, sizeof(zTag), "Q%d", i - 5);
    zSql = subst(argv[i], "t");
    nFail += run(db, zTag, zSql) != SQLITE_OK;
    sqlite3_free(zSql);
  }
  nFail += run(db, "DEV", "SELECT backend, compute FROM csq_devices") != SQLITE_OK;
  nFail += run(db, "STAT",
               "SELECT name, value FROM csq_stats WHERE name IN ('programs_executed', "
               "'commands', 'bytes_to_host') ORDER BY name") != SQLITE_OK;
  sqlite3_close(db);
  {
    char zDel[96];
    int fd;
    snprintf(zDel, sizeof(zDel), "/sys/class/nvme/nvme%d/delete_controller", inst);
    fd = open(zDel, O_WRONLY);
    if (fd < 0 || write(fd, "1", 1) != 1) printf("FAIL disconnect: %s\n", strerror(errno));
    if (fd >= 0) close(fd);
  }
  printf("%s\n", nFail ? "FAIL" : "GUEST-DONE");
  return nFail ? 1 : 0;
}
