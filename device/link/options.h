/*
** device/link/options.h - how to open a device: the settings the host driver
** passes to a backend's xOpen (backend.h).
*/
#ifndef CSQ_DEVICE_OPTIONS_H
#define CSQ_DEVICE_OPTIONS_H

#include <stdint.h>

typedef struct dev_options {
  int nEngines;         /* compute engines; 0 = one per online core */
  int nQueueDepth;      /* entries per queue pair; 0 = 256 (>= 64) */
  int timeoutMs;        /* a command not completed by then fails with
                           CSQ_SC_HOST_TIMEOUT; 0 = 30000 */
  int bCreate;          /* create the image if it does not exist */
  int bDirect;          /* try O_DIRECT for the media (falls back to buffered) */
  const char *zFault;   /* fault injection, emu only; see device/emu/fault.h; NULL = none */
  uint64_t nSlmBytes;   /* SLM size; 0 = 256 MiB */
  uint64_t nCacheBytes; /* emu only: the device's DRAM cache of its media
                           (device/emu/mcache.h); 0 = none */
} dev_options;

/* Fill *p with the defaults. */
void dev_options_default(dev_options *p);

#endif /* CSQ_DEVICE_OPTIONS_H */
