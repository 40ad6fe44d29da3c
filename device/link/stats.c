/*
** device/link/stats.c - the counters (stats.h) and the helper backends count a
** completed command with (dev_stats_account, backend.h).
*/
#include <stddef.h>
#include <stdint.h>

#include "device/link/backend.h"
#include "device/link/stats.h"

#define ADD(p, f, v) __atomic_fetch_add(&(p)->f, (v), __ATOMIC_RELAXED)

void dev_stats_account(dev_stats *p, const csq_sqe *pSqe, uint16_t sf, const dev_io_acct *a) {
  ADD(p, commands, 1);
  if (dev_sqe_is_admin(pSqe)) ADD(p, admin_commands, 1);
  if (sf & 0x7FF) ADD(p, errors, 1);
  ADD(p, cmd_by_opcode[dev_sqe_stats_row(pSqe)][pSqe->opcode], 1);
  if (a) {
    if (a->toHost) ADD(p, bytes_to_host, a->toHost);
    if (a->fromHost) ADD(p, bytes_from_host, a->fromHost);
    if (a->mediaRead) ADD(p, media_bytes_read, a->mediaRead);
    if (a->mediaWritten) ADD(p, media_bytes_written, a->mediaWritten);
  }
}

void dev_stats_add(dev_stats *pDst, const dev_stats *pSrc) {
  const uint64_t *s = (const uint64_t *)pSrc;
  uint64_t *d = (uint64_t *)pDst;
  size_t i;
  _Static_assert(sizeof(dev_stats) % sizeof(uint64_t) == 0, "dev_stats is all uint64_t");
  for (i = 0; i < sizeof(dev_stats) / sizeof(uint64_t); i++)
    if (s[i]) __atomic_fetch_add(&d[i], s[i], __ATOMIC_RELAXED);
}

void dev_stats_snapshot(dev_stats *pDst, const dev_stats *pSrc) {
  const uint64_t *s = (const uint64_t *)pSrc;
  uint64_t *d = (uint64_t *)pDst;
  size_t i;
  for (i = 0; i < sizeof(dev_stats) / sizeof(uint64_t); i++)
    d[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
}
