/*
** device/nvme/nvme_discover.c - namespace discovery for the nvme backend
** (nvme_discover.h) through libnvme's topology scan: host -> subsystem ->
** controller -> namespace. Only reads sysfs, so it works without root.
** Includes <libnvme.h>, hence never <linux/nvme_ioctl.h> (NVME-CS.md).
*/
#include <errno.h>
#include <libnvme.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/nvme/nvme_discover.h"

/* Copy z into a fixed field, trimming the space padding of NVMe strings. */
static void copy_trim(char *zDst, size_t n, const char *z) {
  size_t l;
  snprintf(zDst, n, "%s", z ? z : "");
  l = strlen(zDst);
  while (l > 0 && zDst[l - 1] == ' ') zDst[--l] = 0;
}

/* Append one namespace to the growing array; 0 or -ENOMEM. */
static int add_ns(dev_nvme_nsinfo **pa, int *pn, int *pnAlloc, nvme_ctrl_t c, nvme_ns_t ns) {
  dev_nvme_nsinfo *e;
  const char *zGen = nvme_ns_get_generic_name(ns);
  int lba;
  if (*pn == *pnAlloc) {
    int nNew = *pnAlloc ? *pnAlloc * 2 : 8;
    dev_nvme_nsinfo *a = realloc(*pa, nNew * sizeof(*a));
    if (!a) return -ENOMEM;
    *pa = a;
    *pnAlloc = nNew;
  }
  e = &(*pa)[(*pn)++];
  memset(e, 0, sizeof(*e));
  if (zGen && zGen[0]) snprintf(e->zGeneric, sizeof(e->zGeneric), "/dev/%s", zGen);
  copy_trim(e->zBlock, sizeof(e->zBlock), nvme_ns_get_name(ns));
  copy_trim(e->zCtrl, sizeof(e->zCtrl), c ? nvme_ctrl_get_name(c) : "");
  copy_trim(e->zModel, sizeof(e->zModel), c ? nvme_ctrl_get_model(c) : "");
  e->nsid = (uint32_t)nvme_ns_get_nsid(ns);
  e->csi = (int)nvme_ns_get_csi(ns);
  lba = nvme_ns_get_lba_size(ns);
  e->lbaSize = lba > 0 ? (uint32_t)lba : 0;
  e->nLba = nvme_ns_get_lba_count(ns);
  e->bUsable = e->zGeneric[0] && e->csi == NVME_CSI_NVM && e->lbaSize >= 512 &&
               e->lbaSize <= 4096 && (e->lbaSize & (e->lbaSize - 1)) == 0;
  return 0;
}

int dev_nvme_discover(dev_nvme_nsinfo **paNs, int *pnNs, char **pzErr) {
  nvme_root_t r;
  nvme_host_t h;
  nvme_subsystem_t s;
  nvme_ctrl_t c;
  nvme_ns_t ns;
  dev_nvme_nsinfo *a = NULL;
  int n = 0, nAlloc = 0, rc = 0;
  *paNs = NULL;
  *pnNs = 0;
  if (pzErr) *pzErr = NULL;
  r = nvme_create_root(NULL, 0); /* log level 0: libnvme stays quiet */
  if (!r) {
    rc = -ENOMEM;
    goto fail;
  }
  if (nvme_scan_topology(r, NULL, NULL) < 0) {
    rc = errno ? -errno : -EIO;
    nvme_free_tree(r);
    if (rc == -ENOENT) return 0; /* no /sys/class/nvme: no NVMe devices */
    goto fail;
  }
  nvme_for_each_host(r, h) {
    nvme_for_each_subsystem(h, s) {
      nvme_subsystem_for_each_ctrl(s, c) {
        nvme_ctrl_for_each_ns(c, ns) {
          if (rc == 0) rc = add_ns(&a, &n, &nAlloc, c, ns);
        }
      }
      /* Multipath namespaces hang off the subsystem, not a controller. */
      nvme_subsystem_for_each_ns(s, ns) {
        if (rc == 0) rc = add_ns(&a, &n, &nAlloc, nvme_subsystem_first_ctrl(s), ns);
      }
    }
  }
  nvme_free_tree(r);
  if (rc) goto fail;
  *paNs = a;
  *pnNs = n;
  return 0;
fail:
  free(a);
  if (pzErr && asprintf(pzErr, "cannot list NVMe namespaces: %s", strerror(-rc)) < 0) *pzErr = NULL;
  return rc;
}
