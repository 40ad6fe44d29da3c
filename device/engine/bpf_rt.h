/*
** device/engine/bpf_rt.h - the eBPF runtime of the device: a user's program
** (device/format/bpf.h) verified by DPDK's BPF library (rte_bpf: no loops,
** no unreachable code, no access outside the argument block and the stack),
** JIT-compiled to x86-64 where the library can, interpreted otherwise, and
** run one argument block at a time with csq's helpers.
**
** The same runtime evaluates a program on the host (vtab/bpf.c) when a call
** cannot be pushed, so that an answer never depends on where it ran.
**
** Thread safety: a loaded dev_bpf is read-only; any number of threads may
** run it at once. Helpers reach the running row's TEXT/BLOB bytes through a
** thread-local frame (dev_bpf_frame), set by the caller around its runs.
*/
#ifndef CSQ_DEVICE_BPF_RT_H
#define CSQ_DEVICE_BPF_RT_H

#include <stddef.h>
#include <stdint.h>

#include "device/format/bpf.h"

typedef struct dev_bpf dev_bpf;

/* Verify nIns instructions at aIns (csq_bpf_check already passed) for a
** program of nArg arguments and compile them. 0 with *pp (free with
** dev_bpf_free), -EINVAL with the verifier's reason in zErr, or -ENOMEM.
** The instructions are copied. */
int dev_bpf_load(const uint8_t *aIns, uint32_t nIns, int nArg, dev_bpf **pp, char *zErr,
                 size_t nErr);
void dev_bpf_free(dev_bpf *p);
/* 1 if the program runs as native code (JIT), 0 if interpreted. */
int dev_bpf_jitted(const dev_bpf *p);

/* What helpers see of the row being run: set by the caller, on its own
** thread, before dev_bpf_run, and valid until the run returns. */
typedef struct dev_bpf_frame {
  int nArg;
  const uint8_t *aBlock;     /* nArg slots of 16 bytes */
  const uint8_t *const *apZ; /* TEXT/BLOB bytes of argument i (else unused) */
  const uint32_t *aN;        /* and their lengths */
  uint64_t fault;            /* set by a helper: 0, or why the program failed */
  int64_t failCode;          /* csq_fail's code */
} dev_bpf_frame;

/* Reasons in dev_bpf_frame.fault: the kinds a CSQ_FAULT_BPF fault
** carries (device/format/bpf.h). */
#define DEV_BPF_FAULT_ARG  CSQ_BPF_FAULT_ARG  /* a helper's argument index out of range */
#define DEV_BPF_FAULT_FAIL CSQ_BPF_FAULT_FAIL /* the program called fail(code) */
#define DEV_BPF_FAULT_FIND CSQ_BPF_FAULT_FIND /* find() with a needle length outside 1..8 */

/* Make f the calling thread's frame (NULL: none). */
void dev_bpf_frame_set(dev_bpf_frame *f);

/* Run p over f->aBlock (f is the thread's frame). Returns the program's
** u64; check f->fault afterwards. */
uint64_t dev_bpf_run(const dev_bpf *p, dev_bpf_frame *f);

/* The native function of a JIT-compiled program (NULL if interpreted): a
** batch loop calls it straight, f being the thread's frame. */
typedef uint64_t (*dev_bpf_fn)(void *pArgs);
dev_bpf_fn dev_bpf_native(const dev_bpf *p);

/* A message for a fault of frame f, naming program zName (csq_bpf_fault_text,
** the same words the device's fault gets). */
void dev_bpf_fault_msg(const dev_bpf_frame *f, const char *zName, char *z, size_t n);

#endif /* CSQ_DEVICE_BPF_RT_H */
