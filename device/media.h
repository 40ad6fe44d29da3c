/*
** device/media.h - the NVM namespace media of the emulated device.
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
** a dev_mio is not thread safe, the dev_media is.
*/
#ifndef CSQ_DEVICE_MEDIA_H
#define CSQ_DEVICE_MEDIA_H

#include <stdint.h>
#include "cmd.h"

#define DEV_MEDIA_FILE_BLOCKS (1ull << 28) /* 1 TiB of 4 KiB blocks */
#define DEV_MEDIA_MEM_BLOCKS  (1ull << 28)
#define DEV_MIO_DEPTH         16            /* reads/writes in flight per dev_mio */
#define DEV_MIO_CHUNK         (128u * 1024) /* bytes per I/O request */

typedef struct dev_media dev_media;
typedef struct dev_mio dev_mio;

/* Open media: zPath NULL or ":memory:" for memory, else a file (created if
** bCreate; a missing file without bCreate is -ENOENT). bDirect asks for
** O_DIRECT. 0, or -errno with *pzErr = malloc'd message. */
int dev_media_open(const char *zPath, int bCreate, int bDirect, dev_media **pp, char **pzErr);
void dev_media_close(dev_media *m);
uint64_t dev_media_blocks(const dev_media *m); /* nominal capacity, LBAs */
uint64_t dev_media_used_blocks(dev_media *m);  /* file size / segments written */
int dev_media_fd(const dev_media *m);          /* -1 for memory */
int dev_media_is_direct(const dev_media *m);
int dev_media_flush(dev_media *m); /* fdatasync; 0 or -errno */

int dev_mio_open(dev_media *m, dev_mio **pp); /* 0 or -errno */
void dev_mio_close(dev_mio *io);
/* Read LBA ranges back to back into pDst; 0 or -errno. Ranges must be in
** capacity (the caller checks). */
int dev_mio_read(dev_mio *io, const csq_lba_range *a, int n, void *pDst);
/* Write nlb blocks from pSrc at slba; 0 or -errno. */
int dev_mio_write(dev_mio *io, uint64_t slba, uint32_t nlb, const void *pSrc);

#endif /* CSQ_DEVICE_MEDIA_H */
