/*
** device/emu/mcache.h - the emulated device's own DRAM cache of its media.
**
** A bounded set of DEV_MCACHE_LINE-byte lines of the image file, in one
** 4096-aligned allocation (so a line can be the target of an O_DIRECT read),
** split into shards by line number, each with its own mutex, hash chains
** and CLOCK hand for replacement. media.c fills it on read misses and keeps
** it current on writes (write-through: the media is written first, then the
** lines already cached are updated in place), so a flush has nothing to
** write back and a crash loses nothing the media did not.
**
** A read that raced with a write must not leave stale data behind: the
** reader takes dev_mcache_epoch before it reads the media and hands it to
** dev_mcache_put, which drops the line if any write finished in between.
*/
#ifndef CSQ_DEVICE_MCACHE_H
#define CSQ_DEVICE_MCACHE_H

#include <stdint.h>

#include "device/link/backend.h"

#define DEV_MCACHE_LINE (64u * 1024)

typedef struct dev_mcache dev_mcache;

typedef struct dev_mcache_stats {
  uint64_t nHit;   /* lines served from the cache */
  uint64_t nMiss;  /* lines read from the media */
  uint64_t nEvict; /* lines replaced */
  uint64_t nLine;  /* capacity, lines */
} dev_mcache_stats;

/* A cache of nBytes (at least one line per shard); 0 or -ENOMEM. */
int dev_mcache_open(uint64_t nBytes, dev_mcache **pp);
void dev_mcache_close(dev_mcache *c);

/* Copy len bytes at offset off of line iLine into pDst if the line is
** cached: 1 (a hit, counted), else 0. off + len <= line size. */
int dev_mcache_get(dev_mcache *c, uint64_t iLine, uint32_t off, uint32_t len, void *pDst);
/* 1 if line iLine is cached (not counted). */
int dev_mcache_has(dev_mcache *c, uint64_t iLine);
/* The write epoch, to take before reading a line from the media. */
uint64_t dev_mcache_epoch(dev_mcache *c);
/* Insert line iLine (DEV_MCACHE_LINE bytes at pLine) read from the media
** after epoch was taken (counted as a miss); dropped if a write finished
** since. */
void dev_mcache_put(dev_mcache *c, uint64_t iLine, const void *pLine, uint64_t epoch);
/* A write of len bytes at byte offset off reached the media (bOk) or may
** have partly (!bOk): update the cached lines it covers, or drop them. */
void dev_mcache_write(dev_mcache *c, uint64_t off, const void *pSrc, uint64_t len, int bOk);
void dev_mcache_stats_get(dev_mcache *c, dev_mcache_stats *p);

/* For csq-target's log (implemented in emu.c, which owns the device):
** the emulated device d's cache counters and whether its media is read with
** O_DIRECT. 0, or -ENOENT if d has no cache. */
int dev_emu_cache_info(dev_backend *d, dev_mcache_stats *p, int *pbDirect);

#endif /* CSQ_DEVICE_MCACHE_H */
