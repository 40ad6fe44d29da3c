/*
** device/emu/media.c - the NVM namespace media: an image file through liburing,
** or memory segments for ":memory:". See media.h.
*/
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device/emu/mcache.h"
#include "device/emu/media.h"

/* Memory media geometry: 256 KiB segments, 4096 per second-level table,
** 1024 tables: 1 TiB addressable, 8 KiB of top-level table. */
#define SEG_BYTES  (256u * 1024)
#define SEG_BLOCKS (SEG_BYTES / CSQ_LBA_SIZE)
#define L2_ENTRIES 4096u
#define L1_ENTRIES 1024u

struct dev_media {
  int fd; /* -1: memory */
  int bDirect;
  int bReadOnly;             /* the file could be opened for reading only */
  uint64_t nBlocks;          /* nominal capacity */
  uint8_t **aL1[L1_ENTRIES]; /* memory: lazily allocated tables of segments */
  uint64_t nSegUsed;
  dev_mcache *pCache; /* dev_media_set_cache; NULL: none */
};

/* An asynchronous read (dev_mio_read_start); free while xDone is NULL. */
typedef struct mio_aread {
  dev_mio_done_fn xDone;
  void *pCtx;
  uint8_t *pDst;
  uint64_t off;
  uint32_t len;
  int bDone; /* its CQE has been seen; res holds the result */
  int res;
} mio_aread;

/* user_data of an asynchronous read's SQE: this bit plus its slot. */
#define MIO_ASYNC_TAG (1ull << 63)
/* user_data of dev_mio_wait's futex wait. */
#define MIO_FUTEX_TAG (1ull << 62)

/* IORING_OP_FUTEX_WAIT (Linux 6.7) and its flags, which the kernel headers
** liburing 2.3 builds against may not name; probed for at dev_mio_open. */
#define MIO_OP_FUTEX_WAIT      51
#define MIO_FUTEX2_SIZE_U32    0x02
#define MIO_FUTEX2_PRIVATE     128
#define MIO_FUTEX_BITSET_MATCH 0xffffffffu

struct dev_mio {
  dev_media *m;
  int bRing;
  struct io_uring ring;
  uint8_t *pBounce; /* direct I/O: DEV_MIO_DEPTH chunks, registered buffers */
  int bFixed;       /* pBounce is registered with the ring */
  int bAsync;       /* dev_mio_set_async */
  int bFutexOp;     /* the kernel has IORING_OP_FUTEX_WAIT */
  int bFutexArmed;  /* a futex wait of dev_mio_wait is pending in the ring */
  int nAsync;       /* slots of aAsync in use */
  uint8_t *pLines;  /* with a cache: DEV_MIO_DEPTH aligned lines for misses */
  mio_aread aAsync[DEV_MIO_DEPTH];
};

static char *media_msg(const char *zFmt, const char *zPath, int err) {
  char *z = NULL;
  if (asprintf(&z, zFmt, zPath, strerror(err)) < 0) z = NULL;
  return z;
}

/* Probe whether O_DIRECT reads work on fd (some file systems accept the
** flag at open and fail every I/O with EINVAL). */
static int direct_works(int fd) {
  void *p = NULL;
  ssize_t r;
  if (posix_memalign(&p, 4096, 4096)) return 0;
  r = pread(fd, p, 4096, 0);
  free(p);
  return r >= 0;
}

/* Open zPath with flags into m->fd, with O_DIRECT first when bDirect and it
** works there. 0, or the errno of the failed open. */
static int media_open_fd(dev_media *m, const char *zPath, int flags, int bDirect) {
  if (bDirect) {
    m->fd = open(zPath, flags | O_DIRECT, 0644);
    if (m->fd >= 0 && !direct_works(m->fd)) {
      close(m->fd);
      m->fd = -1;
    } else if (m->fd >= 0) {
      m->bDirect = 1;
    }
  }
  if (m->fd < 0) m->fd = open(zPath, flags, 0644);
  return m->fd < 0 ? errno : 0;
}

int dev_media_open(const char *zPath, int bCreate, int bDirect, dev_media **pp, char **pzErr) {
  dev_media *m = calloc(1, sizeof(*m));
  struct stat st;
  *pp = NULL;
  if (pzErr) *pzErr = NULL;
  if (!m) return -ENOMEM;
  m->fd = -1;
  if (zPath == NULL || strcmp(zPath, ":memory:") == 0) {
    m->nBlocks = DEV_MEDIA_MEM_BLOCKS;
    *pp = m;
    return 0;
  }
  int e = media_open_fd(m, zPath, O_RDWR | O_CLOEXEC | (bCreate ? O_CREAT : 0), bDirect);
  if ((e == EACCES || e == EROFS || e == EPERM) &&
      media_open_fd(m, zPath, O_RDONLY | O_CLOEXEC, bDirect) == 0) {
    /* a file this process may only read (permissions, a read-only file
    ** system, chattr +i): served read-only, every write refused */
    m->bReadOnly = 1;
    e = 0;
  }
  if (e) {
    if (pzErr)
      *pzErr = media_msg(e == ENOENT ? "cannot open device image %s: %s (create it with bCreate)"
                                     : "cannot open device image %s: %s",
                         zPath, e);
    free(m);
    return -e;
  }
  if (fstat(m->fd, &st) == 0 && S_ISBLK(st.st_mode)) {
    uint64_t nByte = 0;
    if (ioctl(m->fd, BLKGETSIZE64, &nByte) != 0) nByte = 0;
    m->nBlocks = nByte / CSQ_LBA_SIZE;
  } else {
    uint64_t nFile = (uint64_t)st.st_size / CSQ_LBA_SIZE;
    m->nBlocks = nFile > DEV_MEDIA_FILE_BLOCKS ? nFile : DEV_MEDIA_FILE_BLOCKS;
  }
  *pp = m;
  return 0;
}

void dev_media_close(dev_media *m) {
  unsigned i, j;
  if (!m) return;
  if (m->fd >= 0) close(m->fd);
  dev_mcache_close(m->pCache);
  for (i = 0; i < L1_ENTRIES; i++) {
    if (!m->aL1[i]) continue;
    for (j = 0; j < L2_ENTRIES; j++) free(m->aL1[i][j]);
    free(m->aL1[i]);
  }
  free(m);
}

uint64_t dev_media_blocks(const dev_media *m) {
  return m->nBlocks;
}
int dev_media_fd(const dev_media *m) {
  return m->fd;
}
int dev_media_is_direct(const dev_media *m) {
  return m->bDirect;
}
int dev_media_read_only(const dev_media *m) {
  return m->bReadOnly;
}
dev_mcache *dev_media_cache(const dev_media *m) {
  return m->pCache;
}

int dev_media_set_cache(dev_media *m, uint64_t nBytes) {
  if (m->fd < 0 || nBytes == 0 || m->pCache) return 0;
  return dev_mcache_open(nBytes, &m->pCache);
}

uint64_t dev_media_used_blocks(dev_media *m) {
  struct stat st;
  if (m->fd < 0) return __atomic_load_n(&m->nSegUsed, __ATOMIC_RELAXED) * SEG_BLOCKS;
  if (fstat(m->fd, &st) != 0) return 0;
  return ((uint64_t)st.st_blocks * 512 + CSQ_LBA_SIZE - 1) / CSQ_LBA_SIZE;
}

int dev_media_flush(dev_media *m) {
  if (m->fd < 0) return 0;
  return fdatasync(m->fd) == 0 ? 0 : -errno;
}

/* ---- memory media ------------------------------------------------------ */

/* The segment holding block lba, or NULL if never written and !bAlloc.
** Tables and segments are installed with compare-and-swap so threads can
** race on first touch without a lock. */
static uint8_t *mem_seg(dev_media *m, uint64_t lba, int bAlloc) {
  uint64_t iSeg = lba / SEG_BLOCKS;
  unsigned i1 = (unsigned)(iSeg / L2_ENTRIES), i2 = (unsigned)(iSeg % L2_ENTRIES);
  uint8_t **aL2 = __atomic_load_n(&m->aL1[i1], __ATOMIC_ACQUIRE);
  uint8_t *pSeg;
  if (!aL2) {
    if (!bAlloc) return NULL;
    uint8_t **aNew = calloc(L2_ENTRIES, sizeof(uint8_t *));
    if (!aNew) return NULL;
    if (!__atomic_compare_exchange_n(&m->aL1[i1], &aL2, aNew, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
      free(aNew); /* aL2 now holds the winner's table */
    } else {
      aL2 = aNew;
    }
  }
  pSeg = __atomic_load_n(&aL2[i2], __ATOMIC_ACQUIRE);
  if (!pSeg && bAlloc) {
    uint8_t *pNew = calloc(1, SEG_BYTES);
    if (!pNew) return NULL;
    if (!__atomic_compare_exchange_n(&aL2[i2], &pSeg, pNew, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
      free(pNew);
    } else {
      pSeg = pNew;
      __atomic_fetch_add(&m->nSegUsed, 1, __ATOMIC_RELAXED);
    }
  }
  return pSeg;
}

static int mem_rw(dev_media *m, uint64_t lba, uint64_t nlb, uint8_t *p, int bWrite) {
  while (nlb > 0) {
    uint64_t iIn = lba % SEG_BLOCKS;
    uint64_t n = SEG_BLOCKS - iIn;
    uint8_t *pSeg;
    if (n > nlb) n = nlb;
    pSeg = mem_seg(m, lba, bWrite);
    if (bWrite) {
      if (!pSeg) return -ENOMEM;
      memcpy(pSeg + iIn * CSQ_LBA_SIZE, p, n * CSQ_LBA_SIZE);
    } else if (pSeg) {
      memcpy(p, pSeg + iIn * CSQ_LBA_SIZE, n * CSQ_LBA_SIZE);
    } else {
      memset(p, 0, n * CSQ_LBA_SIZE);
    }
    lba += n;
    nlb -= n;
    p += n * CSQ_LBA_SIZE;
  }
  return 0;
}

/* ---- file media through io_uring ---------------------------------------- */

int dev_mio_open(dev_media *m, dev_mio **pp) {
  dev_mio *io = calloc(1, sizeof(*io));
  int rc;
  *pp = NULL;
  if (!io) return -ENOMEM;
  io->m = m;
  if (m->fd >= 0) {
    /* room for a synchronous transfer's DEV_MIO_DEPTH requests next to
    ** DEV_MIO_DEPTH asynchronous reads (the CQ ring is twice as large) */
    rc = io_uring_queue_init(DEV_MIO_DEPTH * 2, &io->ring, 0);
    if (rc < 0) {
      free(io);
      return rc;
    }
    io->bRing = 1;
    struct io_uring_probe *pProbe = io_uring_get_probe_ring(&io->ring);
    io->bFutexOp = pProbe && io_uring_opcode_supported(pProbe, MIO_OP_FUTEX_WAIT);
    if (pProbe) io_uring_free_probe(pProbe);
    if (m->bDirect) {
      struct iovec aIov[DEV_MIO_DEPTH];
      void *p = NULL;
      int i;
      if (posix_memalign(&p, 4096, (size_t)DEV_MIO_DEPTH * DEV_MIO_CHUNK)) {
        dev_mio_close(io);
        return -ENOMEM;
      }
      io->pBounce = p;
      for (i = 0; i < DEV_MIO_DEPTH; i++) {
        aIov[i].iov_base = io->pBounce + (size_t)i * DEV_MIO_CHUNK;
        aIov[i].iov_len = DEV_MIO_CHUNK;
      }
      /* Registration can fail under a low RLIMIT_MEMLOCK: then plain reads
      ** into the same bounce buffers. */
      io->bFixed = io_uring_register_buffers(&io->ring, aIov, DEV_MIO_DEPTH) == 0;
    }
    if (m->pCache) {
      void *p = NULL;
      if (posix_memalign(&p, 4096, (size_t)DEV_MIO_DEPTH * DEV_MCACHE_LINE)) {
        dev_mio_close(io);
        return -ENOMEM;
      }
      io->pLines = p;
    }
  }
  *pp = io;
  return 0;
}

void dev_mio_close(dev_mio *io) {
  if (!io) return;
  /* The owner reaps its reads before closing; this only guards against a
  ** read left behind (its xDone still runs, here). */
  for (int i = 0; i < 1000 && io->nAsync > 0; i++) dev_mio_reap(io, 10000000);
  if (io->bRing) io_uring_queue_exit(&io->ring);
  free(io->pBounce);
  free(io->pLines);
  free(io);
}

/* Record a CQE that is not a synchronous transfer's (user_data data,
** result res): an asynchronous read's, or dev_mio_wait's futex wait;
** liburing's internal timeouts (all bits set) are ignored. */
static void mio_other_cqe(dev_mio *io, uint64_t data, int res) {
  uint64_t i = data & ~MIO_ASYNC_TAG;
  if (data == MIO_FUTEX_TAG) {
    io->bFutexArmed = 0;
    if (res == -EINVAL) io->bFutexOp = 0; /* refused after all: poll instead */
  } else if ((data & MIO_ASYNC_TAG) && i < DEV_MIO_DEPTH && io->aAsync[i].xDone) {
    io->aAsync[i].bDone = 1;
    io->aAsync[i].res = res;
  }
}

/* One request of a transfer: file offset, the host memory it moves, and the
** bounce slot used for it (-1: straight into host memory). */
typedef struct mio_piece {
  uint64_t off;
  uint8_t *pHost;
  uint32_t len;
  int iSlot;
} mio_piece;

typedef struct mio_xfer {
  mio_piece *aPiece;
  int nPiece, nAlloc;
  mio_piece aStatic[8]; /* small transfers need no malloc */
} mio_xfer;

static void xfer_init(mio_xfer *x) {
  x->aPiece = x->aStatic;
  x->nPiece = 0;
  x->nAlloc = 8;
}

static void xfer_free(mio_xfer *x) {
  if (x->aPiece != x->aStatic) free(x->aPiece);
}

static int xfer_add(mio_xfer *x, uint64_t off, uint8_t *pHost, uint64_t len) {
  while (len > 0) {
    uint32_t n = len > DEV_MIO_CHUNK ? DEV_MIO_CHUNK : (uint32_t)len;
    if (x->nPiece == x->nAlloc) {
      int nNew = x->nAlloc * 2;
      mio_piece *a = x->aPiece == x->aStatic ? malloc(nNew * sizeof(mio_piece))
                                             : realloc(x->aPiece, nNew * sizeof(mio_piece));
      if (!a) return -ENOMEM;
      if (x->aPiece == x->aStatic) memcpy(a, x->aStatic, sizeof(x->aStatic));
      x->aPiece = a;
      x->nAlloc = nNew;
    }
    x->aPiece[x->nPiece++] = (mio_piece){off, pHost, n, -1};
    off += n;
    pHost += n;
    len -= n;
  }
  return 0;
}

/* Run every piece of x with up to DEV_MIO_DEPTH in flight. Reads that end
** past the end of the file are completed with zeros. */
static int xfer_run(dev_mio *io, mio_xfer *x, int bWrite) {
  int iNext = 0, nFlight = 0, rc = 0;
  int aFree[DEV_MIO_DEPTH], nFree = DEV_MIO_DEPTH, i;
  int fd = io->m->fd;
  for (i = 0; i < DEV_MIO_DEPTH; i++) aFree[i] = i;
  while ((iNext < x->nPiece && rc == 0) || nFlight > 0) {
    struct io_uring_cqe *cqe;
    unsigned head, nSeen = 0;
    while (rc == 0 && iNext < x->nPiece && nFree > 0) {
      mio_piece *p = &x->aPiece[iNext];
      struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
      uint8_t *pBuf = p->pHost;
      if (!sqe) break;
      p->iSlot = -1;
      if (io->m->bDirect && ((uintptr_t)p->pHost & 4095) != 0) {
        p->iSlot = aFree[--nFree];
        pBuf = io->pBounce + (size_t)p->iSlot * DEV_MIO_CHUNK;
        if (bWrite) memcpy(pBuf, p->pHost, p->len);
      } else {
        /* A slot is still taken so that nFlight never exceeds the depth. */
        p->iSlot = -2 - aFree[--nFree];
      }
      if (p->iSlot >= 0 && io->bFixed) {
        if (bWrite)
          io_uring_prep_write_fixed(sqe, fd, pBuf, p->len, p->off, p->iSlot);
        else
          io_uring_prep_read_fixed(sqe, fd, pBuf, p->len, p->off, p->iSlot);
      } else if (bWrite) {
        io_uring_prep_write(sqe, fd, pBuf, p->len, p->off);
      } else {
        io_uring_prep_read(sqe, fd, pBuf, p->len, p->off);
      }
      io_uring_sqe_set_data64(sqe, (uint64_t)iNext);
      iNext++;
      nFlight++;
    }
    int r = io_uring_submit_and_wait(&io->ring, 1);
    if (r < 0 && r != -EINTR && r != -EAGAIN) {
      /* Nothing more can be waited for reliably; fail the transfer. */
      return r;
    }
    io_uring_for_each_cqe(&io->ring, head, cqe) {
      uint64_t data = io_uring_cqe_get_data64(cqe);
      nSeen++;
      if (data & (MIO_ASYNC_TAG | MIO_FUTEX_TAG)) { /* dev_mio_reap reports it */
        mio_other_cqe(io, data, cqe->res);
        continue;
      }
      mio_piece *p = &x->aPiece[data];
      int res = cqe->res;
      int iSlot = p->iSlot >= 0 ? p->iSlot : -2 - p->iSlot;
      nFlight--;
      aFree[nFree++] = iSlot;
      if (res == -EAGAIN || res == -EINTR) {
        /* Rare: finish this piece synchronously. */
        ssize_t s = bWrite ? pwrite(fd, p->pHost, p->len, (off_t)p->off)
                           : pread(fd, p->pHost, p->len, (off_t)p->off);
        res = s < 0 ? -errno : (int)s;
        if (res == -EINVAL && io->m->bDirect) res = -EIO;
        if (res >= 0 && p->iSlot >= 0 && !bWrite) p->iSlot = -1; /* data already in pHost */
      }
      if (res < 0) {
        if (rc == 0) rc = res;
        continue;
      }
      if (!bWrite) {
        if (p->iSlot >= 0) memcpy(p->pHost, io->pBounce + (size_t)p->iSlot * DEV_MIO_CHUNK, res);
        if ((uint32_t)res < p->len) memset(p->pHost + res, 0, p->len - res); /* past EOF */
      } else if ((uint32_t)res < p->len) {
        ssize_t s = pwrite(fd, p->pHost + res, p->len - res, (off_t)(p->off + res));
        if (s != (ssize_t)(p->len - res) && rc == 0) rc = s < 0 ? -errno : -EIO;
      }
    }
    io_uring_cq_advance(&io->ring, nSeen);
  }
  return rc;
}

/* Read len bytes at off through the cache: hits are copied out, a miss is
** read with the uncached lines after it that the read also needs (up to
** DEV_MIO_DEPTH lines in flight, into aligned memory: O_DIRECT needs no
** bounce), entered into the cache, and copied out. */
static int mio_read_cached(dev_mio *io, uint64_t off, uint64_t len, uint8_t *p) {
  dev_mcache *c = io->m->pCache;
  while (len > 0) {
    uint64_t iLine = off / DEV_MCACHE_LINE, iLast = (off + len - 1) / DEV_MCACHE_LINE;
    uint32_t o = (uint32_t)(off % DEV_MCACHE_LINE);
    uint64_t n = DEV_MCACHE_LINE - o, epoch;
    mio_xfer x;
    int k = 1, rc;
    if (n > len) n = len;
    if (dev_mcache_get(c, iLine, o, (uint32_t)n, p)) {
      off += n;
      p += n;
      len -= n;
      continue;
    }
    while (k < DEV_MIO_DEPTH && iLine + k <= iLast && !dev_mcache_has(c, iLine + k)) k++;
    epoch = dev_mcache_epoch(c);
    xfer_init(&x);
    rc = xfer_add(&x, iLine * DEV_MCACHE_LINE, io->pLines, (uint64_t)k * DEV_MCACHE_LINE);
    if (rc == 0) rc = xfer_run(io, &x, 0);
    xfer_free(&x);
    if (rc) return rc;
    for (int j = 0; j < k; j++)
      dev_mcache_put(c, iLine + j, io->pLines + (size_t)j * DEV_MCACHE_LINE, epoch);
    n = (uint64_t)k * DEV_MCACHE_LINE - o;
    if (n > len) n = len;
    memcpy(p, io->pLines + o, n);
    off += n;
    p += n;
    len -= n;
  }
  return 0;
}

int dev_mio_read(dev_mio *io, const csq_lba_range *a, int n, void *pDst) {
  uint8_t *p = pDst;
  mio_xfer x;
  int i, rc = 0;
  xfer_init(&x);
  if (io->m->fd < 0) {
    for (i = 0; i < n && rc == 0; i++) {
      rc = mem_rw(io->m, a[i].slba, a[i].nlb, p, 0);
      p += (uint64_t)a[i].nlb * CSQ_LBA_SIZE;
    }
    return rc;
  }
  if (io->m->pCache) {
    for (i = 0; i < n && rc == 0; i++) {
      uint64_t len = (uint64_t)a[i].nlb * CSQ_LBA_SIZE;
      rc = mio_read_cached(io, a[i].slba * CSQ_LBA_SIZE, len, p);
      p += len;
    }
    return rc;
  }
  for (i = 0; i < n && rc == 0; i++) {
    uint64_t len = (uint64_t)a[i].nlb * CSQ_LBA_SIZE;
    rc = xfer_add(&x, a[i].slba * CSQ_LBA_SIZE, p, len);
    p += len;
  }
  if (rc == 0) rc = xfer_run(io, &x, 0);
  xfer_free(&x);
  return rc;
}

int dev_mio_write(dev_mio *io, uint64_t slba, uint32_t nlb, const void *pSrc) {
  mio_xfer x;
  int rc;
  xfer_init(&x);
  if (io->m->fd < 0) return mem_rw(io->m, slba, nlb, (uint8_t *)pSrc, 1);
  rc = xfer_add(&x, slba * CSQ_LBA_SIZE, (uint8_t *)pSrc, (uint64_t)nlb * CSQ_LBA_SIZE);
  if (rc == 0) rc = xfer_run(io, &x, 1);
  xfer_free(&x);
  /* write-through: the media has it (or, failed, may have part of it) */
  if (io->m->pCache)
    dev_mcache_write(io->m->pCache, slba * CSQ_LBA_SIZE, pSrc, (uint64_t)nlb * CSQ_LBA_SIZE,
                     rc == 0);
  return rc;
}

/* ---- asynchronous reads ------------------------------------------------ */

void dev_mio_set_async(dev_mio *io, int bAsync) {
  io->bAsync = bAsync;
}
int dev_mio_async(const dev_mio *io) {
  return io->bAsync;
}
int dev_mio_inflight(const dev_mio *io) {
  return io->nAsync;
}

int dev_mio_read_start(dev_mio *io, uint64_t slba, uint32_t nlb, void *pDst, dev_mio_done_fn xDone,
                       void *pCtx) {
  uint64_t len = (uint64_t)nlb * CSQ_LBA_SIZE;
  struct io_uring_sqe *sqe;
  mio_aread *a = NULL;
  int i;
  if (!io->bRing || len == 0 || len > DEV_MIO_CHUNK) return -EAGAIN;
  if (io->m->pCache) return -EAGAIN; /* dev_mio_read goes through the cache */
  /* O_DIRECT into unaligned memory needs dev_mio_read's bounce buffers */
  if (io->m->bDirect && ((uintptr_t)pDst & 4095) != 0) return -EAGAIN;
  if (io->nAsync == DEV_MIO_DEPTH) return -EAGAIN;
  for (i = 0; i < DEV_MIO_DEPTH && io->aAsync[i].xDone; i++) {}
  sqe = io_uring_get_sqe(&io->ring);
  if (i == DEV_MIO_DEPTH || !sqe) return -EAGAIN; /* (no SQE: cannot happen, see dev_mio_open) */
  a = &io->aAsync[i];
  *a = (mio_aread){xDone, pCtx, pDst, slba * CSQ_LBA_SIZE, (uint32_t)len, 0, 0};
  io_uring_prep_read(sqe, io->m->fd, pDst, (unsigned)len, a->off);
  io_uring_sqe_set_data64(sqe, MIO_ASYNC_TAG | (uint64_t)i);
  io->nAsync++;
  /* A failed submission leaves the SQE queued: the next io_uring_enter on
  ** this ring (dev_mio_reap, a synchronous call) submits it. */
  io_uring_submit(&io->ring);
  return 0;
}

/* Mark the asynchronous reads whose CQEs are in the ring as done. */
static void aread_collect(dev_mio *io) {
  struct io_uring_cqe *cqe;
  unsigned head, nSeen = 0;
  io_uring_for_each_cqe(&io->ring, head, cqe) {
    uint64_t data = io_uring_cqe_get_data64(cqe);
    nSeen++;
    /* (a synchronous transfer reaps all of its own CQEs before it returns) */
    mio_other_cqe(io, data, cqe->res);
  }
  io_uring_cq_advance(&io->ring, nSeen);
}

/* 1 if some asynchronous read has its CQE seen and is not yet reported. */
static int aread_any_done(const dev_mio *io) {
  int i;
  for (i = 0; i < DEV_MIO_DEPTH; i++)
    if (io->aAsync[i].xDone && io->aAsync[i].bDone) return 1;
  return 0;
}

/* Report the asynchronous reads whose CQEs were seen: finish them (a
** retry, zeros past EOF), free their slots, call their xDone. Returns how
** many. */
static int aread_report(dev_mio *io) {
  int i, n = 0;
  for (i = 0; i < DEV_MIO_DEPTH; i++) {
    mio_aread *a = &io->aAsync[i];
    dev_mio_done_fn xDone = a->xDone;
    int res = a->res, rc = 0;
    if (!xDone || !a->bDone) continue;
    if (res == -EAGAIN || res == -EINTR) {
      /* Rare: finish it synchronously. */
      ssize_t s = pread(io->m->fd, a->pDst, a->len, (off_t)a->off);
      res = s < 0 ? -errno : (int)s;
      if (res == -EINVAL && io->m->bDirect) res = -EIO;
    }
    if (res < 0)
      rc = res;
    else if ((uint32_t)res < a->len)
      memset(a->pDst + res, 0, a->len - res); /* past EOF */
    /* the slot is free before the callback runs (it may start another) */
    a->xDone = NULL;
    io->nAsync--;
    n++;
    xDone(a->pCtx, rc);
  }
  return n;
}

/* Enter the kernel to submit what is queued and wait up to waitNs for one
** CQE (it stays in the ring for aread_collect). */
static void mio_wait_cqe(dev_mio *io, int64_t waitNs) {
  struct __kernel_timespec ts = {waitNs / 1000000000, waitNs % 1000000000};
  struct io_uring_cqe *cqe;
  io_uring_submit_and_wait_timeout(&io->ring, &cqe, 1, &ts, NULL);
}

int dev_mio_reap(dev_mio *io, int64_t waitNs) {
  if (io->nAsync == 0) return 0;
  if (io_uring_sq_ready(&io->ring)) io_uring_submit(&io->ring);
  aread_collect(io);
  if (waitNs > 0 && !aread_any_done(io)) {
    mio_wait_cqe(io, waitNs);
    aread_collect(io);
  }
  return aread_report(io);
}

int dev_mio_wait(dev_mio *io, uint32_t *pWord, uint32_t val, int64_t timeoutNs) {
  if (!io->bRing) return 0;
  aread_collect(io);
  if (!aread_any_done(io)) {
    if (io->bFutexOp && !io->bFutexArmed) {
      /* Stays armed across calls until woken: FUTEX_WAKE wakes it whatever
      ** value it was armed with. */
      struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
      if (sqe) {
        io_uring_prep_rw(MIO_OP_FUTEX_WAIT, sqe, MIO_FUTEX2_SIZE_U32 | MIO_FUTEX2_PRIVATE, pWord, 0,
                         val);
        sqe->addr3 = MIO_FUTEX_BITSET_MATCH;
        io_uring_sqe_set_data64(sqe, MIO_FUTEX_TAG);
        io->bFutexArmed = 1;
      }
    }
    if (!io->bFutexArmed && timeoutNs > DEV_MIO_POLL_NS) timeoutNs = DEV_MIO_POLL_NS;
    if (__atomic_load_n(pWord, __ATOMIC_SEQ_CST) == val)
      mio_wait_cqe(io, timeoutNs);
    else if (io_uring_sq_ready(&io->ring))
      io_uring_submit(&io->ring);
    aread_collect(io);
  }
  return aread_report(io);
}
