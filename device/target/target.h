/*
** device/target/target.h - csq-target, an NVMe/TCP target that serves csq
** device images: the subsystems and controllers (target_ctrl.c), one
** connection per queue (target_conn.c), the listener and its life
** (target.c). build/csq-target (target_main.c) is a thin program over this.
**
** Model, as NVMe over Fabrics has it: each image "x.csd" is a subsystem
** "nqn.2026-12.io.csq:x.csd" with the emulated device (device/emu/) inside
** this process; a host creates a controller by connecting its admin queue
** (Fabrics Connect, qid 0), enables it with Property Set CC.EN and waits for
** CSTS.RDY, then connects I/O queues (qid 1..) to that controller. Every
** queue is its own TCP connection and gets its own queue pair on the
** emulated device, so commands of different queues run in parallel. The
** discovery subsystem (TGT_DISCOVERY_NQN) has an admin queue only and
** answers the Discovery log page with one entry per subsystem.
**
** Keep Alive: a controller whose host asked for a Keep Alive timeout (KATO,
** in the admin queue's Connect or by Set Features) and from which none of
** its queues has received a PDU for 2 x KATO is torn down: each of its
** connections ends, logging "keep alive timeout".
**
** Besides the Fabrics commands and Keep Alive, an admin queue answers
** Identify, Get Log Page (discovery), Set Features (Number of Queues), and
** csq's own admin commands (Load Program, Program Activation, MRS
** Management: cmd.h) by passing them to the device; an I/O queue passes
** every command to the device. csq's admin opcodes are also accepted on an
** I/O queue (they are disjoint from its I/O opcodes), which is how csq's
** initiator sends them without a second connection per queue.
*/
#ifndef CSQ_DEVICE_TARGET_H
#define CSQ_DEVICE_TARGET_H

#include <pthread.h>
#include <stdint.h>

#include "device/link/backend.h"

#define TGT_NQN_PREFIX    "nqn.2026-12.io.csq:"
#define TGT_DISCOVERY_NQN "nqn.2014-08.org.nvmexpress.discovery"
#define TGT_MAX_QUEUES    64   /* queues per controller, the admin queue included */
#define TGT_MAX_QDEPTH    1024 /* entries per queue (CAP.MQES + 1) */
#define TGT_NQN_MAX       256

typedef struct tgt_server tgt_server;
typedef struct tgt_subsys tgt_subsys;
typedef struct tgt_ctrl tgt_ctrl;

/* A served image. */
struct tgt_subsys {
  char zNqn[TGT_NQN_MAX];
  char *zPath;
  dev_backend *pDev; /* the emulated device, opened once for all hosts */
};

/* A controller: created by an admin-queue Connect, shared by its queues. */
struct tgt_ctrl {
  tgt_ctrl *pNext;
  uint16_t cntlid;
  tgt_subsys *pSub; /* NULL for a discovery controller */
  char zHostNqn[TGT_NQN_MAX];
  uint32_t cc, csts;
  /* Keep Alive: KATO in ms (0 = none) from the admin Connect or Set
  ** Features; the last time any queue of the controller heard the host
  ** (CLOCK_MONOTONIC ns). Atomic: every connection's receiver touches it. */
  uint32_t katoMs;
  int64_t tHeardNs;
  uint64_t aQidUsed; /* bit q: queue q is connected */
  int nRef;          /* connected queues; freed at 0 (server mutex) */
};

struct tgt_server {
  char zAddr[64]; /* what -l said, for log lines and the discovery log */
  uint16_t port;
  int nSub;
  tgt_subsys *aSub;
  pthread_mutex_t mu; /* controllers and connections */
  tgt_ctrl *pCtrl;
  uint16_t nextCntlid;
  struct tgt_conn *pConn; /* live connections (target_conn.c) */
  int fdListen;
};

/* target.c ------------------------------------------------------------------
** Parse "ADDR:PORT" (or ":PORT", "PORT") into an IPv4 address. 0 or -EINVAL
** with *pzErr (malloc'd). */
struct sockaddr_in;
int tgt_parse_addr(const char *z, struct sockaddr_in *pSa, char **pzErr);
/*
** Open every image (created when missing) with nEngines compute engines (0 =
** one per core), the fault-injection rules zFault (device/emu/fault.h;
** NULL = none; for tests) and, if nCacheMiB > 0, a media cache of that
** many MiB per device over O_DIRECT reads (device/emu/mcache.h), and listen
** on zListen ("ADDR:PORT", IPv4). 0 or -errno with *pzErr (malloc'd). */
int tgt_server_open(const char *zListen, char **azImage, int nImage, int nEngines,
                    const char *zFault, uint64_t nCacheMiB, tgt_server **ppS, char **pzErr);
/* One line on stderr per device with a media cache: how its media is read
** and the cache's counters. */
void tgt_server_log_cache(tgt_server *s);
/* Accept and serve until fdStop becomes readable (a signalfd, a pipe). */
int tgt_server_run(tgt_server *s, int fdStop);
/* Close every connection (each drains its commands), then every device. */
void tgt_server_close(tgt_server *s);

/* target_ctrl.c -------------------------------------------------------------
** Connect: attach a queue to a controller. For qid 0 (cntlid 0xFFFF) a new
** controller of the subsystem zSubNqn for zHostNqn; for qid > 0 the existing
** controller cntlid of that subsystem and host. 0 with *ppCtrl, or the NVMe
** status field to answer (Connect Invalid Parameters / Invalid Host). */
uint16_t tgt_ctrl_connect(tgt_server *s, const char *zSubNqn, const char *zHostNqn, uint16_t cntlid,
                          uint16_t qid, tgt_ctrl **ppCtrl);
/* Detach queue qid from pCtrl; the last queue frees the controller.
** tgt_ctrl_disconnect is tgt_ctrl_release_qid (qid free for a new Connect)
** then tgt_ctrl_unref (the queue's reference), which a connection that
** still drains its commands takes in two steps. */
void tgt_ctrl_disconnect(tgt_server *s, tgt_ctrl *pCtrl, uint16_t qid);
void tgt_ctrl_release_qid(tgt_server *s, tgt_ctrl *pCtrl, uint16_t qid);
void tgt_ctrl_unref(tgt_server *s, tgt_ctrl *pCtrl);
/* Property Get / Set (fctype 04h / 00h) on pCtrl: status field; *pVal. */
uint16_t tgt_prop_get(tgt_server *s, tgt_ctrl *pCtrl, uint32_t ofst, int b8, uint64_t *pVal);
uint16_t tgt_prop_set(tgt_server *s, tgt_ctrl *pCtrl, uint32_t ofst, uint64_t val);
/* 1 if the controller is enabled and ready (CSTS.RDY). */
int tgt_ctrl_ready(tgt_server *s, tgt_ctrl *pCtrl);
/* 1 if the controller's admin queue has disconnected: the association is
** over, its I/O queues end too (the host reconnects them to a new one). */
int tgt_ctrl_gone(tgt_server *s, tgt_ctrl *pCtrl);
/* Identify controller data of a discovery controller, 4096 bytes in pBuf. */
void tgt_discovery_identify(tgt_server *s, tgt_ctrl *pCtrl, uint8_t *pBuf);
/* The discovery log page from byte offset lpo, n bytes into pBuf. */
void tgt_discovery_log(tgt_server *s, uint64_t lpo, uint32_t n, uint8_t *pBuf);
/* Patch a device's Identify controller data with what a fabrics host reads:
** controller id, subsystem NQN, capsule sizes, SGL support. */
void tgt_identify_patch(tgt_ctrl *pCtrl, uint8_t *pBuf);
/* The Active Namespace ID list (Identify CNS 02h) of a csq subsystem: the
** namespaces above nsid, of csq's three (cmd.h), 4096 bytes in pBuf. */
void tgt_active_ns_list(uint32_t nsid, uint8_t *pBuf);
/* Patch the device's Identify Namespace data of nsid for a host that scans
** the namespaces (the Linux kernel): the CP and SLM namespaces report a
** nonzero capacity in 64 KiB "blocks", larger than a page, so the kernel
** keeps them (a /dev/ngXnY node for passthrough) without block I/O on them. */
void tgt_identify_ns_patch(uint32_t nsid, uint8_t *pBuf);

/* target_conn.c -------------------------------------------------------------
** Serve one accepted connection on its own threads; takes fd. 0 or -errno. */
int tgt_conn_start(tgt_server *s, int fd, const char *zPeer);
/* Ask every connection to close (shutdown of its socket). */
void tgt_conn_stop_all(tgt_server *s);
/* Join connections that have ended; with bAll, wait for every one. */
void tgt_conn_reap(tgt_server *s, int bAll);

/* target_plain.c ------------------------------------------------------------
** A plain TCP stream server on zListen for benchmarks (csq-target -b): the
** baseline an NVMe/TCP link is measured against, in the same process. Each
** request is 8 bytes, a little-endian byte count N (at most 16 MiB); the
** answer is N bytes. Runs on its own threads until the process ends. 0 or
** -errno with *pzErr. */
int tgt_plain_start(const char *zListen, char **pzErr);

#endif /* CSQ_DEVICE_TARGET_H */
