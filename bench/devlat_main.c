/*
** bench/devlat_main.c - device micro-benchmark (build/bench/devlat).
**
** Reports, in one run on one image file:
**   1. synchronous command round trip: NVM Read of 1 block from a warm page
**      cache through dev_exec, against a plain pread of the same block;
**   2. media read throughput through the device at queue depth 1, 8 and 32
**      (async dev_submit/dev_reap of 128 KiB reads), against a plain pread
**      loop over the same file into the same buffers, with ratios. Both
**      sides are buffered (the device opened with dev_options defaults:
**      no O_DIRECT) and read the whole file from the same warm page cache,
**      every byte copied into the buffer the command names. Every variant
**      runs N_ROUND times, interleaved (the order flips every round), and
**      the median is reported, with the CPU time the process used per
**      second of the run ("cores": the device path may use more than one);
**   3. the media layer alone: io_uring reads of 128 KiB, 8 in flight
**      (dev_mio_read of 1 MiB), against a pread loop that cycles through a
**      1 MiB buffer the same way (same destination footprint);
**   4. the same with O_DIRECT on both sides (no page cache);
**   5. section 2 again with the device reopened with O_DIRECT media
**      (dev_options.bDirect) against O_DIRECT preads, over at most the
**      first 128 MiB, 3 rounds (skipped where O_DIRECT is refused).
**
** usage: devlat [IMAGE] [MiB]   (default: a temporary file of 256 MiB)
** Numbers are for comparison within a run; the machine is shared and noisy.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/driver/driver.h"
#include "device/emu/media.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* CPU time (user + system) of the whole process, every thread, seconds. */
static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

#define IO_BYTES  (128u * 1024)
#define N_ROUND   5 /* section 2: rounds of every variant, median reported */
#define IO_BLOCKS (IO_BYTES / CSQ_LBA_SIZE)

/* Read nTotal bytes of the image through the device with depth commands in
** flight; returns seconds. */
static double read_through_device(dev_queue *q, uint64_t nBlocks, int depth, uint8_t *pBuf) {
  uint64_t next = 0, done = 0, nIo = nBlocks / IO_BLOCKS;
  int inflight = 0;
  double t0 = now_s();
  while (done < nIo) {
    while (inflight < depth && next < nIo) {
      csq_sqe s;
      memset(&s, 0, sizeof(s));
      s.opcode = CSQ_NVM_READ;
      s.nsid = CSQ_NSID_NVM;
      s.prp1 = (uintptr_t)(pBuf + (size_t)(next % 32) * IO_BYTES);
      s.cdw10 = (uint32_t)(next * IO_BLOCKS);
      s.cdw11 = (uint32_t)((next * IO_BLOCKS) >> 32);
      s.cdw12 = IO_BLOCKS - 1;
      if (dev_submit(q, &s) != 0) break;
      next++;
      inflight++;
    }
    csq_cqe c;
    if (dev_reap(q, &c, -1) != 0 || !csq_cqe_ok(&c)) {
      fprintf(stderr, "devlat: read failed: %s\n", dev_errmsg(q));
      exit(1);
    }
    inflight--;
    done++;
  }
  return now_s() - t0;
}

/* The pread side of section 2: 128 KiB preads over the whole file into the
** same 32 rotating buffers the device reads use, so both fill the same
** memory (a single hot buffer would flatter pread). Returns seconds, or -1
** on a short read. */
static double read_with_pread(int fd, uint64_t nBlocks, uint8_t *pBuf) {
  double t0 = now_s();
  for (uint64_t i = 0; i < nBlocks; i += IO_BLOCKS)
    if (pread(fd, pBuf + (size_t)((i / IO_BLOCKS) % 32) * IO_BYTES, IO_BYTES,
              (off_t)(i * CSQ_LBA_SIZE)) != (ssize_t)IO_BYTES)
      return -1;
  return now_s() - t0;
}

/* Sections 2 and 5: variant 0 is the pread loop on fd, 1..3 the device
** (queue q) at QD 1, 8, 32, over the first nBlocks of the image; nRound
** interleaved rounds, the order reversed every other round; medians. */
static void throughput(const char *zTitle, dev_queue *q, int fd, uint64_t nBlocks, int nRound,
                       uint8_t *pBuf) {
  enum { N_VAR = 4 };
  static const int aDepth[N_VAR] = {0, 1, 8, 32};
  double aSec[N_VAR][N_ROUND], aCore[N_VAR][N_ROUND], aMed[N_VAR], aMedCore[N_VAR];
  double nMiB = (double)nBlocks * CSQ_LBA_SIZE / (1 << 20);
  if (nRound > N_ROUND) nRound = N_ROUND;
  for (int r = 0; r < nRound; r++) {
    for (int v = 0; v < N_VAR; v++) {
      int iVar = r % 2 ? N_VAR - 1 - v : v;
      double c0 = cpu_s(), t;
      if (iVar == 0)
        t = read_with_pread(fd, nBlocks, pBuf);
      else
        t = read_through_device(q, nBlocks, aDepth[iVar], pBuf);
      if (t <= 0) {
        fprintf(stderr, "devlat: short pread\n");
        exit(1);
      }
      aSec[iVar][r] = t;
      aCore[iVar][r] = (cpu_s() - c0) / t;
    }
  }
  for (int v = 0; v < N_VAR; v++) {
    qsort(aSec[v], nRound, sizeof(double), cmp_double);
    qsort(aCore[v], nRound, sizeof(double), cmp_double);
    aMed[v] = aSec[v][nRound / 2];
    aMedCore[v] = aCore[v][nRound / 2];
  }
  printf("%s, median of %d interleaved rounds (min..max MiB/s; cores = CPU time / wall time):\n",
         zTitle, nRound);
  printf("  pread loop   %7.0f MiB/s  (%.0f..%.0f)  %.2f cores\n", nMiB / aMed[0],
         nMiB / aSec[0][nRound - 1], nMiB / aSec[0][0], aMedCore[0]);
  for (int v = 1; v < N_VAR; v++)
    printf("  device QD %-2d %7.0f MiB/s  (%.0f..%.0f)  %.2f cores  (%.2fx pread)\n", aDepth[v],
           nMiB / aMed[v], nMiB / aSec[v][nRound - 1], nMiB / aSec[v][0], aMedCore[v],
           aMed[0] / aMed[v]);
}

/* Section 5: the device opened with dev_options.bDirect (O_DIRECT media)
** against O_DIRECT preads, over the first nBlocks of the image. The other
** device on the image must be closed (dev_open would share it). Skipped
** where the file system refuses O_DIRECT. */
static void direct_device(const char *zPath, uint64_t nBlocks, uint8_t *pBuf) {
  dev_options o;
  dev_device *d = NULL;
  dev_queue *q = NULL;
  char *zErr = NULL;
  int fd = open(zPath, O_RDONLY | O_DIRECT);
  if (fd < 0 || pread(fd, pBuf, 4096, 0) != 4096) {
    printf("device with O_DIRECT media: not available here (skipped)\n");
    if (fd >= 0) close(fd);
    return;
  }
  dev_options_default(&o);
  o.bDirect = 1;
  if (dev_open(zPath, &o, &d, &zErr) || dev_queue_open(d, &q)) {
    fprintf(stderr, "devlat: %s\n", zErr ? zErr : "cannot open a queue");
    exit(1);
  }
  throughput("device with O_DIRECT media vs O_DIRECT pread, 128 KiB requests", q, fd, nBlocks, 3,
             pBuf);
  dev_queue_close(q);
  dev_unref(d);
  close(fd);
}

/* Sections 3 and 4: the media layer alone. A pread loop and io_uring
** (dev_mio_read of 1 MiB: 8 reads of 128 KiB in flight) fill the same 1 MiB
** buffer over the whole file; best of three, alternating. bDirect: O_DIRECT
** on both sides (skipped where the file system refuses it). */
static void media_compare(const char *zPath, uint64_t nBlocks, double nMiB, int bDirect) {
  const uint64_t nPer = 8 * IO_BLOCKS;
  uint8_t *pBig = NULL;
  dev_media *m = NULL;
  dev_mio *io = NULL;
  char *zErr = NULL;
  double best[2] = {1e9, 1e9};
  int fd = open(zPath, O_RDONLY | (bDirect ? O_DIRECT : 0));
  int bOk = fd >= 0 && posix_memalign((void **)&pBig, 4096, nPer * CSQ_LBA_SIZE) == 0 &&
            dev_media_open(zPath, 0, bDirect, &m, &zErr) == 0 &&
            (!bDirect || dev_media_is_direct(m)) && dev_mio_open(m, &io) == 0;
  for (int rep = 0; rep < 3 && bOk; rep++) {
    double t0 = now_s();
    for (uint64_t i = 0; i + nPer <= nBlocks && bOk; i += nPer)
      for (uint64_t j = 0; j < nPer && bOk; j += IO_BLOCKS)
        bOk = pread(fd, pBig + j * CSQ_LBA_SIZE, IO_BYTES, (off_t)((i + j) * CSQ_LBA_SIZE)) ==
              (ssize_t)IO_BYTES;
    double tp = now_s() - t0;
    t0 = now_s();
    for (uint64_t i = 0; i + nPer <= nBlocks && bOk; i += nPer) {
      csq_lba_range r = {CSQ_NSID_NVM, (uint32_t)nPer, i};
      bOk = dev_mio_read(io, &r, 1, pBig) == 0;
    }
    double tu = now_s() - t0;
    if (tp < best[0]) best[0] = tp;
    if (tu < best[1]) best[1] = tu;
  }
  const char *zWhat = bDirect ? "O_DIRECT" : "media layer (page cache)";
  if (bOk)
    printf("%s, 128 KiB requests into 1 MiB:  pread %.0f MiB/s | io_uring QD 8 %.0f MiB/s "
           "(%.2fx pread)\n",
           zWhat, nMiB / best[0], nMiB / best[1], best[0] / best[1]);
  else
    printf("%s: not available here (skipped)%s%s\n", zWhat, zErr ? ": " : "", zErr ? zErr : "");
  if (fd >= 0) close(fd);
  free(zErr);
  dev_mio_close(io);
  dev_media_close(m);
  free(pBig);
}

int main(int argc, char **argv) {
  char zTmp[] = "/tmp/devlat-XXXXXX";
  const char *zPath = argc > 1 && argv[1][0] ? argv[1] : NULL;
  uint64_t nMiB = argc > 2 ? strtoull(argv[2], NULL, 10) : 256;
  uint64_t nBlocks = nMiB * 256, i;
  dev_options o;
  dev_device *d = NULL;
  dev_queue *q = NULL;
  char *zErr = NULL;
  uint8_t *pBuf = NULL;
  int fd, rc, k;
  enum { N_LAT = 20000 };
  static double aLat[N_LAT];

  if (!zPath) {
    int tfd = mkstemp(zTmp);
    if (tfd < 0) {
      perror("mkstemp");
      return 1;
    }
    close(tfd);
    zPath = zTmp;
  }
  dev_options_default(&o);
  o.bCreate = 1;
  rc = dev_open(zPath, &o, &d, &zErr);
  if (rc) {
    fprintf(stderr, "devlat: %s\n", zErr);
    return 1;
  }
  if (dev_queue_open(d, &q)) return 1;
  if (posix_memalign((void **)&pBuf, 4096, 32 * IO_BYTES)) return 1;

  /* Fill the image (through the device) so it is in the page cache. */
  for (i = 0; i < nBlocks; i += IO_BLOCKS) {
    memset(pBuf, (int)(i & 0xFF), IO_BYTES);
    if (dev_nvm_write(q, i, IO_BLOCKS, pBuf)) {
      fprintf(stderr, "devlat: %s\n", dev_errmsg(q));
      return 1;
    }
  }
  dev_nvm_flush(q);
  fd = open(zPath, O_RDONLY);
  if (fd < 0) {
    perror(zPath);
    return 1;
  }

  printf("devlat: image %s, %llu MiB, backend %s, %u engines\n", zPath, (unsigned long long)nMiB,
         dev_backend_name(d), dev_caps(d)->n_engines);

  /* 1. Round trip of a 1-block read (warm). */
  for (k = 0; k < 2000; k++) dev_nvm_read(q, (uint64_t)k % 64, 1, pBuf);
  for (k = 0; k < N_LAT; k++) {
    double t0 = now_s();
    dev_nvm_read(q, (uint64_t)k % 64, 1, pBuf);
    aLat[k] = now_s() - t0;
  }
  qsort(aLat, N_LAT, sizeof(double), cmp_double);
  double devP50 = aLat[N_LAT / 2], devP99 = aLat[N_LAT * 99 / 100];
  for (k = 0; k < N_LAT; k++) {
    double t0 = now_s();
    if (pread(fd, pBuf, 4096, (off_t)(k % 64) * 4096) != 4096) return 1;
    aLat[k] = now_s() - t0;
  }
  qsort(aLat, N_LAT, sizeof(double), cmp_double);
  double prP50 = aLat[N_LAT / 2], prP99 = aLat[N_LAT * 99 / 100];
  printf("sync 1-block read:  device p50 %.2f us p99 %.2f us | pread p50 %.2f us p99 %.2f us | "
         "ratio p50 %.1fx\n",
         devP50 * 1e6, devP99 * 1e6, prP50 * 1e6, prP99 * 1e6, devP50 / prP50);

  /* 2. Throughput through the page cache. */
  throughput("read throughput, 128 KiB requests", q, fd, nBlocks, N_ROUND, pBuf);
  /* 3. The media layer, through the page cache; 4. the same with O_DIRECT
  ** on both sides, where the storage rather than memcpy sets the pace. */
  media_compare(zPath, nBlocks, nMiB, 0);
  media_compare(zPath, nBlocks, nMiB, 1);
  dev_stats *st = dev_queue_stats(q);
  printf("queue counters: commands %llu, media_bytes_read %llu, bytes_to_host %llu\n",
         (unsigned long long)st->commands, (unsigned long long)st->media_bytes_read,
         (unsigned long long)st->bytes_to_host);
  close(fd);
  dev_queue_close(q);
  dev_unref(d);
  /* 5. The whole command path with O_DIRECT media (at most 128 MiB: the
  ** disk, not memcpy, sets this pace). */
  direct_device(zPath, nBlocks < 128 * 256 ? nBlocks : 128 * 256, pBuf);
  free(pBuf);
  if (zPath == zTmp) unlink(zTmp);
  return 0;
}
