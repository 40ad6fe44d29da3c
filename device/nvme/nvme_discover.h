/*
** device/nvme/nvme_discover.h - list the NVMe namespaces of this machine that
** the nvme backend can open ("nvme:/dev/ngXnY"), with libnvme's topology
** scan (sysfs; no commands are sent to the devices).
*/
#ifndef CSQ_DEVICE_NVME_DISCOVER_H
#define CSQ_DEVICE_NVME_DISCOVER_H

#include <stdint.h>

typedef struct dev_nvme_nsinfo {
  char zGeneric[64]; /* generic char device, "/dev/ng0n1" ("" if the kernel has none) */
  char zBlock[64];   /* block device name, "nvme0n1" */
  char zCtrl[64];    /* controller, "nvme0" (its char device /dev/nvme0 takes admin commands) */
  char zModel[64];   /* controller model, trimmed */
  uint32_t nsid;
  int csi;          /* command set identifier: 0 NVM, 2 ZNS, ... */
  uint32_t lbaSize; /* bytes per LBA */
  uint64_t nLba;    /* capacity in LBAs */
  int bUsable;      /* NVM command set, generic device present, LBA 512..4096 */
} dev_nvme_nsinfo;

/* Scan the topology. On success returns 0 with *paNs a malloc'd array of
** *pnNs entries (caller frees with free(); NULL when there are none). On
** failure returns -errno and, if pzErr, a malloc'd message. */
int dev_nvme_discover(dev_nvme_nsinfo **paNs, int *pnNs, char **pzErr);

#endif /* CSQ_DEVICE_NVME_DISCOVER_H */
