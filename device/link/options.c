/*
** device/link/options.c - the default settings of dev_open (options.h).
*/
#include <string.h>

#include "device/link/options.h"

void dev_options_default(dev_options *p) {
  memset(p, 0, sizeof(*p));
  p->nEngines = 0;
  p->nQueueDepth = 256;
  p->timeoutMs = 30000;
  p->bCreate = 0;
  p->bDirect = 0;
  p->zFault = NULL;
  p->nCacheBytes = 0;
  p->nSlmBytes = 256ull << 20;
}
