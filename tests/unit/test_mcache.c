/*
** tests/unit/test_mcache.c - the device's DRAM cache of its media
** (device/emu/mcache.c) under file media: random reads and writes through a
** cache much smaller than the data agree with a copy in memory (so lines
** are evicted, updated on write and refilled), reads past the end are
** zeros, and a writer never sees its write undone by a reader's stale fill.
*/
#include <pthread.h>
#include <stdint.h>

#include "device/emu/mcache.h"
#include "device/emu/media.h"
#include "tests/unit/helpers.h"

#define NBLK      1024 /* 4 MiB of data, 64 cache lines */
#define CACHE_MIB 1    /* 16 lines */

static void test_random_io(const char *zPath, int bDirect) {
  dev_media *m = NULL;
  dev_mio *io = NULL;
  char *zErr = NULL;
  uint8_t *pRef = calloc(NBLK, CSQ_LBA_SIZE), *pBuf = malloc(64 * CSQ_LBA_SIZE);
  dev_mcache_stats st;
  CHECK_RC(dev_media_open(zPath, 1, bDirect, &m, &zErr), 0);
  if (!m) return;
  CHECK_RC(dev_media_set_cache(m, (uint64_t)CACHE_MIB << 20), 0);
  CHECK(dev_media_cache(m) != NULL);
  CHECK_RC(dev_mio_open(m, &io), 0);
  fill_pattern(pRef, (size_t)NBLK * CSQ_LBA_SIZE, 7);
  CHECK_RC(dev_mio_write(io, 0, NBLK, pRef), 0);
  for (int i = 0; i < 1500; i++) {
    uint32_t nlb = 1 + (uint32_t)(rnd() % 64);
    uint64_t slba = rnd() % (NBLK - nlb + 1);
    if (rnd() % 4 == 0) {
      fill_pattern(pBuf, (size_t)nlb * CSQ_LBA_SIZE, rnd());
      CHECK_RC(dev_mio_write(io, slba, nlb, pBuf), 0);
      memcpy(pRef + slba * CSQ_LBA_SIZE, pBuf, (size_t)nlb * CSQ_LBA_SIZE);
    } else {
      /* two ranges back to back, as a Memory Copy asks */
      csq_lba_range a[2] = {{CSQ_NSID_NVM, nlb / 2 + 1, slba},
                            {CSQ_NSID_NVM, nlb - nlb / 2 - 1, (slba * 7) % (NBLK - nlb + 1)}};
      int n = a[1].nlb ? 2 : 1;
      memset(pBuf, 0xEE, 64 * CSQ_LBA_SIZE);
      CHECK_RC(dev_mio_read(io, a, n, pBuf), 0);
      CHECK(memcmp(pBuf, pRef + a[0].slba * CSQ_LBA_SIZE, (size_t)a[0].nlb * CSQ_LBA_SIZE) == 0,
            "read %d at %llu", i, (unsigned long long)a[0].slba);
      if (n == 2)
        CHECK(memcmp(pBuf + (size_t)a[0].nlb * CSQ_LBA_SIZE, pRef + a[1].slba * CSQ_LBA_SIZE,
                     (size_t)a[1].nlb * CSQ_LBA_SIZE) == 0,
              "read %d second range", i);
    }
  }
  /* past the end of the file: zeros, cached like the rest */
  csq_lba_range r = {CSQ_NSID_NVM, 8, NBLK * 4};
  for (int k = 0; k < 2; k++) {
    memset(pBuf, 0xEE, 8 * CSQ_LBA_SIZE);
    CHECK_RC(dev_mio_read(io, &r, 1, pBuf), 0);
    CHECK(pBuf[0] == 0 && pBuf[8 * CSQ_LBA_SIZE - 1] == 0);
  }
  dev_mcache_stats_get(dev_media_cache(m), &st);
  CHECK(st.nHit > 0 && st.nMiss > 0 && st.nEvict > 0, "hits %llu misses %llu evictions %llu",
        (unsigned long long)st.nHit, (unsigned long long)st.nMiss, (unsigned long long)st.nEvict);
  CHECK_RC(st.nLine, CACHE_MIB * 16);
  /* a device without a cache reads what the cached one wrote */
  dev_mio_close(io);
  dev_media_close(m);
  CHECK_RC(dev_media_open(zPath, 0, 0, &m, &zErr), 0);
  CHECK_RC(dev_mio_open(m, &io), 0);
  uint8_t *pAll = malloc((size_t)NBLK * CSQ_LBA_SIZE);
  csq_lba_range all = {CSQ_NSID_NVM, NBLK, 0};
  CHECK_RC(dev_mio_read(io, &all, 1, pAll), 0);
  CHECK(memcmp(pAll, pRef, (size_t)NBLK * CSQ_LBA_SIZE) == 0);
  free(pAll);
  dev_mio_close(io);
  dev_media_close(m);
  free(pRef);
  free(pBuf);
  free(zErr);
}

/* One writer rewrites a region and reads it back while readers keep
** reading the same region: a reader's fill that began before a write and
** ends after it must not undo the write in the cache. */
#define NREADER 3
#define REGION  64
typedef struct thr_arg {
  dev_media *m;
  int bStop; /* atomic */
  int nBad;
} thr_arg;

static void *reader_main(void *p) {
  thr_arg *a = p;
  dev_mio *io = NULL;
  uint8_t *pGot = malloc(8 * REGION * CSQ_LBA_SIZE);
  /* twice the cache: the writer's lines keep being evicted and refilled */
  csq_lba_range r = {CSQ_NSID_NVM, 8 * REGION, 0};
  if (dev_mio_open(a->m, &io) == 0) {
    while (!__atomic_load_n(&a->bStop, __ATOMIC_ACQUIRE)) dev_mio_read(io, &r, 1, pGot);
    dev_mio_close(io);
  }
  free(pGot);
  return NULL;
}

static void test_threads(const char *zPath) {
  dev_media *m = NULL;
  dev_mio *io = NULL;
  char *zErr = NULL;
  pthread_t t[NREADER];
  thr_arg a = {0};
  uint8_t *pBuf = malloc(REGION * CSQ_LBA_SIZE), *pGot = malloc(REGION * CSQ_LBA_SIZE);
  csq_lba_range r = {CSQ_NSID_NVM, REGION, 0};
  CHECK_RC(dev_media_open(zPath, 1, 1, &m, &zErr), 0);
  if (!m) return;
  CHECK_RC(dev_media_set_cache(m, 1u << 20), 0);
  CHECK_RC(dev_mio_open(m, &io), 0);
  a.m = m;
  for (int i = 0; i < NREADER; i++) pthread_create(&t[i], NULL, reader_main, &a);
  for (uint32_t v = 1; v <= 1000; v++) {
    memset(pBuf, (int)(v & 0xff), REGION * CSQ_LBA_SIZE);
    if (dev_mio_write(io, 0, REGION, pBuf)) a.nBad++;
    if (dev_mio_read(io, &r, 1, pGot) || memcmp(pGot, pBuf, REGION * CSQ_LBA_SIZE)) a.nBad++;
  }
  __atomic_store_n(&a.bStop, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < NREADER; i++) pthread_join(t[i], NULL);
  CHECK_RC(a.nBad, 0);
  dev_mio_close(io);
  dev_media_close(m);
  free(pBuf);
  free(pGot);
}

int main(void) {
  char zPath[300];
  snprintf(zPath, sizeof(zPath), "%s/direct.csd", test_tmpdir());
  test_random_io(zPath, 1);
  snprintf(zPath, sizeof(zPath), "%s/buffered.csd", test_tmpdir());
  test_random_io(zPath, 0);
  snprintf(zPath, sizeof(zPath), "%s/threads.csd", test_tmpdir());
  test_threads(zPath);
  test_tmp_cleanup();
  return test_done("test_mcache");
}
