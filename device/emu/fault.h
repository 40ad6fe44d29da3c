/*
** device/emu/fault.h - fault injection for the emulated device: dev_options.zFault
** at open, dev_set_fault (driver.h) on an open device, csq_fault() in SQL
** (vtab/fault.c).
**
** A spec is one or more rules separated by ';'; a rule is comma-separated
** key=value items:
**
**   op=NAME      which commands the rule watches (default any): any, identify,
**                load, activate, mrs, nvm_read, nvm_write, nvm_flush,
**                resv_acquire, resv_release, execute, slm_copy, slm_read,
**                slm_write, slm_fill
**   lba=N        only NVM commands whose LBA range covers block N (nvm_read,
**                nvm_write, slm_copy with LBA descriptors)
**   nth=N        fire on the N-th watched command only (1-based)
**   prob=P       fire on each watched command with probability P (0..1)
**   seed=S       seed of the rule's random numbers (default 1): runs repeat
**   count=K      fire at most K times (default: once with nth, else no limit)
**   action=A     what happens (required):
**                  status:SF  complete with status field SF (hex 0x.. or
**                             decimal, e.g. 0x281 = media read error) and
**                             do nothing else
**                  timeout    the device never completes the command
**                  corrupt    the command succeeds but one byte of the data
**                             it moves is flipped (reads: the data returned;
**                             writes: the data stored)
**                  delay:MS   the command runs, its completion is posted MS
**                             milliseconds later
**                  short      (nvm_write only) a short write: only the first
**                             k of the command's n blocks reach the media
**                             (k < n, chosen by the rule's random numbers,
**                             0 included), then the command fails with
**                             Write Fault, as a device losing power mid-write
**                             or a failing one would leave it
**                  crash      the process ends at once (_exit status 86)
**                             before the command runs, as a power cut or a
**                             kill -9 between two commands would: for crash
**                             tests, in a child process
**
** Examples:  "op=nvm_read,nth=3,action=status:0x281"
**            "op=execute,action=timeout"
**            "op=nvm_read,lba=7,action=corrupt"
**            "prob=0.01,seed=7,action=status:0x6;op=nvm_flush,nth=1,action=delay:200"
** The first rule that fires wins. Without nth and prob a rule fires on every
** watched command.
*/
#ifndef CSQ_DEVICE_FAULT_H
#define CSQ_DEVICE_FAULT_H

#include <stddef.h>
#include <stdint.h>
#include "device/link/cmd.h"

typedef struct dev_fault dev_fault;

enum {
  DEV_FAULT_NONE = 0,
  DEV_FAULT_STATUS,
  DEV_FAULT_TIMEOUT,
  DEV_FAULT_CORRUPT,
  DEV_FAULT_DELAY,
  DEV_FAULT_SHORT
};

typedef struct dev_fault_hit {
  int action;       /* DEV_FAULT_* */
  uint16_t status;  /* DEV_FAULT_STATUS */
  uint32_t delayMs; /* DEV_FAULT_DELAY */
  uint64_t rnd;     /* DEV_FAULT_CORRUPT: picks the byte; DEV_FAULT_SHORT: the blocks */
} dev_fault_hit;

/* Parse zSpec (NULL or "" gives *pp = NULL, no faults). 0, or -EINVAL with
** *pzErr = malloc'd message naming the rule and the bad item. */
int dev_fault_parse(const char *zSpec, dev_fault **pp, char **pzErr);
void dev_fault_free(dev_fault *f);
/* An empty fault set (no rules), to be filled later with dev_fault_set. */
int dev_fault_new(dev_fault **pp);
/* Replace f's rules by those of zSpec (NULL or "" = no rules) while commands
** may be checked against f on other threads. A bad spec leaves f as it was
** and returns -EINVAL with *pzErr (malloc'd) as dev_fault_parse. On success
** *pzPrev (if pzPrev) receives the previous spec, malloc'd, NULL if none.
** Counters of the new rules (nth, count) start from zero. */
int dev_fault_set(dev_fault *f, const char *zSpec, char **pzPrev, char **pzErr);
/* A malloc'd copy of the spec f holds, NULL if none. */
char *dev_fault_spec(dev_fault *f);

/* Decide for one command (thread safe). Returns 1 and fills *pHit if a rule
** fires, else 0. f may be NULL. */
int dev_fault_check(dev_fault *f, const csq_sqe *pSqe, dev_fault_hit *pHit);
/* Flip one byte of p[0..n) as chosen by pHit->rnd. */
void dev_fault_corrupt(const dev_fault_hit *pHit, void *p, size_t n);
/* Name of the fault-spec op a command belongs to ("nvm_read", ...). */
const char *dev_fault_op_name(const csq_sqe *pSqe);

#endif /* CSQ_DEVICE_FAULT_H */
