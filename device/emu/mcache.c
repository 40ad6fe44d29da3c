/*
** device/emu/mcache.c - the emulated device's DRAM cache of its media:
** sharded hash chains over a fixed array of lines, CLOCK replacement,
** write-through updates. See mcache.h.
*/
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "device/emu/mcache.h"

#define MC_MAX_SHARDS    16
#define MC_MIN_PER_SHARD 16
#define MC_NONE          UINT32_MAX

typedef struct mc_line {
  uint64_t iLine; /* which line of the media */
  uint32_t next;  /* next in its hash chain, MC_NONE at the end */
  uint8_t bValid;
  uint8_t bRef; /* used since the CLOCK hand last passed */
} mc_line;

typedef struct mc_shard {
  pthread_mutex_t mu;
  uint32_t nLine, nBucket; /* nBucket a power of two */
  uint32_t iHand;
  mc_line *aLine;
  uint32_t *aBucket;
  uint8_t *pData; /* nLine lines, inside the cache's aligned block */
  uint64_t nHit, nMiss, nEvict;
} mc_shard;

struct dev_mcache {
  int nShard;
  uint64_t epoch; /* atomic: bumped by every write that reached the media */
  void *pBlock;   /* every shard's data */
  mc_shard aShard[MC_MAX_SHARDS];
};

static mc_shard *mc_shard_of(dev_mcache *c, uint64_t iLine) {
  return &c->aShard[iLine % (uint64_t)c->nShard];
}

static uint32_t mc_hash(const mc_shard *s, uint64_t iLine) {
  return (uint32_t)((iLine * 0x9E3779B97F4A7C15ull) >> 32) & (s->nBucket - 1);
}

/* The slot caching iLine in s, or MC_NONE; s->mu held. */
static uint32_t mc_find(const mc_shard *s, uint64_t iLine) {
  uint32_t i = s->aBucket[mc_hash(s, iLine)];
  while (i != MC_NONE && s->aLine[i].iLine != iLine) i = s->aLine[i].next;
  return i;
}

static void mc_unlink(mc_shard *s, uint32_t iSlot) {
  uint32_t *p = &s->aBucket[mc_hash(s, s->aLine[iSlot].iLine)];
  while (*p != iSlot) p = &s->aLine[*p].next;
  *p = s->aLine[iSlot].next;
  s->aLine[iSlot].bValid = 0;
}

int dev_mcache_open(uint64_t nBytes, dev_mcache **pp) {
  dev_mcache *c = calloc(1, sizeof(*c));
  uint64_t nLine = nBytes / DEV_MCACHE_LINE;
  void *pBlock = NULL;
  *pp = NULL;
  if (!c) return -ENOMEM;
  c->nShard = (int)(nLine / MC_MIN_PER_SHARD);
  if (c->nShard > MC_MAX_SHARDS) c->nShard = MC_MAX_SHARDS;
  if (c->nShard < 1) c->nShard = 1;
  if (nLine < (uint64_t)c->nShard) nLine = (uint64_t)c->nShard;
  if (nLine / (uint64_t)c->nShard >= MC_NONE ||
      posix_memalign(&pBlock, 4096, (size_t)(nLine * DEV_MCACHE_LINE))) {
    free(c);
    return -ENOMEM;
  }
  c->pBlock = pBlock;
  uint8_t *pData = pBlock;
  for (int k = 0; k < c->nShard; k++) {
    mc_shard *s = &c->aShard[k];
    s->nLine = (uint32_t)(nLine / (uint64_t)c->nShard);
    for (s->nBucket = 1; s->nBucket < s->nLine; s->nBucket *= 2) {}
    s->aLine = calloc(s->nLine, sizeof(mc_line));
    s->aBucket = malloc(s->nBucket * sizeof(uint32_t));
    s->pData = pData;
    pData += (size_t)s->nLine * DEV_MCACHE_LINE;
    pthread_mutex_init(&s->mu, NULL);
    if (!s->aLine || !s->aBucket) {
      c->nShard = k + 1;
      dev_mcache_close(c);
      return -ENOMEM;
    }
    memset(s->aBucket, 0xff, s->nBucket * sizeof(uint32_t));
  }
  *pp = c;
  return 0;
}

void dev_mcache_close(dev_mcache *c) {
  if (!c) return;
  for (int k = 0; k < c->nShard; k++) {
    free(c->aShard[k].aLine);
    free(c->aShard[k].aBucket);
    pthread_mutex_destroy(&c->aShard[k].mu);
  }
  free(c->pBlock);
  free(c);
}

int dev_mcache_get(dev_mcache *c, uint64_t iLine, uint32_t off, uint32_t len, void *pDst) {
  mc_shard *s = mc_shard_of(c, iLine);
  uint32_t i;
  pthread_mutex_lock(&s->mu);
  i = mc_find(s, iLine);
  if (i != MC_NONE) {
    memcpy(pDst, s->pData + (size_t)i * DEV_MCACHE_LINE + off, len);
    s->aLine[i].bRef = 1;
    s->nHit++;
  }
  pthread_mutex_unlock(&s->mu);
  return i != MC_NONE;
}

int dev_mcache_has(dev_mcache *c, uint64_t iLine) {
  mc_shard *s = mc_shard_of(c, iLine);
  pthread_mutex_lock(&s->mu);
  uint32_t i = mc_find(s, iLine);
  pthread_mutex_unlock(&s->mu);
  return i != MC_NONE;
}

uint64_t dev_mcache_epoch(dev_mcache *c) {
  return __atomic_load_n(&c->epoch, __ATOMIC_ACQUIRE);
}

void dev_mcache_put(dev_mcache *c, uint64_t iLine, const void *pLine, uint64_t epoch) {
  mc_shard *s = mc_shard_of(c, iLine);
  pthread_mutex_lock(&s->mu);
  s->nMiss++;
  /* A write finished after the read began: its data may not be in pLine,
  ** and it found no line to update. Leave the line to the next reader. */
  if (__atomic_load_n(&c->epoch, __ATOMIC_ACQUIRE) == epoch && mc_find(s, iLine) == MC_NONE) {
    mc_line *p;
    for (;;) { /* CLOCK: a free slot, or the first not used since the last pass */
      p = &s->aLine[s->iHand];
      if (!p->bValid) break;
      if (!p->bRef) {
        mc_unlink(s, s->iHand);
        s->nEvict++;
        break;
      }
      p->bRef = 0;
      s->iHand = (s->iHand + 1) % s->nLine;
    }
    uint32_t iSlot = s->iHand, h = mc_hash(s, iLine);
    s->iHand = (s->iHand + 1) % s->nLine;
    memcpy(s->pData + (size_t)iSlot * DEV_MCACHE_LINE, pLine, DEV_MCACHE_LINE);
    *p = (mc_line){iLine, s->aBucket[h], 1, 0};
    s->aBucket[h] = iSlot;
  }
  pthread_mutex_unlock(&s->mu);
}

void dev_mcache_write(dev_mcache *c, uint64_t off, const void *pSrc, uint64_t len, int bOk) {
  const uint8_t *p = pSrc;
  /* before the lines are touched: a reader that read the media before this
  ** write ended either inserts now-stale data before the update below (and
  ** the update fixes it) or sees the new epoch and inserts nothing */
  __atomic_add_fetch(&c->epoch, 1, __ATOMIC_ACQ_REL);
  while (len > 0) {
    uint64_t iLine = off / DEV_MCACHE_LINE;
    uint32_t o = (uint32_t)(off % DEV_MCACHE_LINE);
    uint32_t n = DEV_MCACHE_LINE - o;
    mc_shard *s = mc_shard_of(c, iLine);
    if (n > len) n = (uint32_t)len;
    pthread_mutex_lock(&s->mu);
    uint32_t i = mc_find(s, iLine);
    if (i != MC_NONE) {
      if (bOk)
        memcpy(s->pData + (size_t)i * DEV_MCACHE_LINE + o, p, n);
      else
        mc_unlink(s, i);
    }
    pthread_mutex_unlock(&s->mu);
    off += n;
    p += n;
    len -= n;
  }
}

void dev_mcache_stats_get(dev_mcache *c, dev_mcache_stats *p) {
  memset(p, 0, sizeof(*p));
  for (int k = 0; k < c->nShard; k++) {
    mc_shard *s = &c->aShard[k];
    pthread_mutex_lock(&s->mu);
    p->nHit += s->nHit;
    p->nMiss += s->nMiss;
    p->nEvict += s->nEvict;
    p->nLine += s->nLine;
    pthread_mutex_unlock(&s->mu);
  }
}
