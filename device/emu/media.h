/*
** device/emu/media.h - the NVM namespace media of the emulated device.
**
** Two kinds:
**   file    an image file (or block device) read and written with liburing;
**           O_DIRECT when asked for and the file system allows it (aligned
**           bounce buffers, registered with the ring), buffered otherwise.
**           Nominal capacity DEV_MEDIA_FILE_BLOCKS (1 TiB, sparse): writes
**           extend the file, reads past its end return zeros.
**   memory  for ":memory:": a two-level table of fixed-size segments
**           allocated on first write (never a big realloc copy); unwritten
**           blocks read as zeros.
** I/O goes through a dev_mio, one per device thread (each owns an io_uring);
** a dev_mio is not thread safe, the dev_media is. Besides the synchronous
** calls, a dev_mio can keep up to DEV_MIO_DEPTH single reads in flight for
** its thread (dev_mio_read_start / dev_mio_reap): an emulated controller
** thread uses them to have several commands' media reads outstanding.
** Optionally a bounded DRAM cache of the file (dev_media_set_cache,
** mcache.h) sits under the dev_mio reads and writes.
*/
#ifndef CSQ_DEVICE_MEDIA_H
#define CSQ_DEVICE_MEDIA_H

#include <stdint.h>
#include "device/link/cmd.h"

#define DEV_MEDIA_FILE_BLOCKS (1ull << 28) /* 1 TiB of 4 KiB blocks */
#define DEV_MEDIA_MEM_BLOCKS  (1ull << 28)
#define DEV_MIO_DEPTH         16            /* reads/writes in flight per dev_mio */
#define DEV_MIO_CHUNK         (128u * 1024) /* bytes per I/O request */

typedef struct dev_media dev_media;
typedef struct dev_mio dev_mio;

/* Open media: zPath NULL or ":memory:" for memory, else a file (created if
** bCreate; a missing file without bCreate is -ENOENT). bDirect asks for
** O_DIRECT. A file that exists but may not be written (EACCES, EROFS,
** EPERM) is opened read-only (dev_media_read_only). 0, or -errno with
** *pzErr = malloc'd message. */
int dev_media_open(const char *zPath, int bCreate, int bDirect, dev_media **pp, char **pzErr);
void dev_media_close(dev_media *m);
uint64_t dev_media_blocks(const dev_media *m); /* nominal capacity, LBAs */
uint64_t dev_media_used_blocks(dev_media *m);  /* file size / segments written */
int dev_media_fd(const dev_media *m);          /* -1 for memory */
int dev_media_is_direct(const dev_media *m);
int dev_media_read_only(const dev_media *m); /* opened for reading only: refuse writes */
int dev_media_flush(dev_media *m);           /* fdatasync; 0 or -errno */
/* Give file media a DRAM cache of nBytes (mcache.h), before any dev_mio is
** opened: reads go through it, writes through it to the media. Memory
** media or nBytes 0: no cache. 0 or -ENOMEM. */
int dev_media_set_cache(dev_media *m, uint64_t nBytes);
struct dev_mcache *dev_media_cache(const dev_media *m); /* NULL: none */

int dev_mio_open(dev_media *m, dev_mio **pp); /* 0 or -errno */
void dev_mio_close(dev_mio *io);
/* Read LBA ranges back to back into pDst; 0 or -errno. Ranges must be in
** capacity (the caller checks). */
int dev_mio_read(dev_mio *io, const csq_lba_range *a, int n, void *pDst);
/* Write nlb blocks from pSrc at slba; 0 or -errno. */
int dev_mio_write(dev_mio *io, uint64_t slba, uint32_t nlb, const void *pSrc);

/* Asynchronous reads. dev_mio_read_start submits a read of nlb blocks at
** slba (in capacity) straight into pDst, at most DEV_MIO_CHUNK bytes, and
** returns without waiting (a page-cache hit is usually complete on return:
** the kernel copies it during the submission). A later dev_mio_reap on the
** same thread reports it by calling xDone(pCtx, rc): rc 0 (pDst filled,
** zeros past the end of the file) or -errno. pDst must stay valid until
** then. Returns 0, or -EAGAIN where an asynchronous read does not apply
** (memory media, O_DIRECT with an unaligned pDst, DEV_MIO_DEPTH reads
** already in flight): the caller then uses dev_mio_read. The synchronous
** calls stay usable while reads are in flight. */
typedef void (*dev_mio_done_fn)(void *pCtx, int rc);
int dev_mio_read_start(dev_mio *io, uint64_t slba, uint32_t nlb, void *pDst, dev_mio_done_fn xDone,
                       void *pCtx);
/* Report finished asynchronous reads (their xDone run on the caller). If
** none has finished and waitNs > 0, wait up to waitNs for one. Returns how
** many were reported. */
int dev_mio_reap(dev_mio *io, int64_t waitNs);
/* Asynchronous reads started and not yet reported. */
int dev_mio_inflight(const dev_mio *io);
/* Sleep until an asynchronous read finishes (reported as by dev_mio_reap),
** or the futex word *pWord is woken with FUTEX_WAKE_PRIVATE or no longer
** holds val, or timeoutNs passes: a thread with reads in flight can sleep
** on them and on its doorbell (a dev_bell's seq) at once. The word is
** watched through io_uring (IORING_OP_FUTEX_WAIT, Linux 6.7); without it
** the sleep is cut to DEV_MIO_POLL_NS so the caller looks at its doorbell
** again soon. *pWord must outlive io. Returns how many reads were
** reported. */
#define DEV_MIO_POLL_NS 50000
int dev_mio_wait(dev_mio *io, uint32_t *pWord, uint32_t val, int64_t timeoutNs);
/* Whether the thread owning io reaps asynchronous reads (so its callers
** may start them): set by the thread, read by the command code it runs. */
void dev_mio_set_async(dev_mio *io, int bAsync);
int dev_mio_async(const dev_mio *io);

#endif /* CSQ_DEVICE_MEDIA_H */
