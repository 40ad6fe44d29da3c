/*
** device/engine/bpf_rt.c - the eBPF runtime (bpf_rt.h): csq's helpers as
** rte_bpf external functions, loading through DPDK's verifier with its
** message kept, JIT or interpreter, and the thread-local frame helpers read.
**
** DPDK's BPF library needs no EAL initialisation for load, verify, exec and
** JIT; it reports why it refused a program only through rte_log, so
** dev_bpf_load points the log at a memory stream for the length of the
** load (under a mutex: the log stream is process-wide).
*/
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_bpf.h>
#include <rte_errno.h>
#include <rte_log.h>

#include "device/engine/bpf_rt.h"
#include "device/format/bpf.h"

struct dev_bpf {
  struct rte_bpf *pBpf;
  uint64_t (*xJit)(void *); /* NULL: interpret */
  int nArg;
};

static __thread dev_bpf_frame *tlsFrame;

void dev_bpf_frame_set(dev_bpf_frame *f) {
  tlsFrame = f;
}

static double dbl(uint64_t u) {
  double d;
  memcpy(&d, &u, 8);
  return d;
}
static uint64_t bits(double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  return u;
}

/* The helpers (bpf.h, HELPERS). rte_bpf calls every external function with
** five u64 arguments. */
#define H(name) static uint64_t name(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
#define UNUSED5 ((void)a, (void)b, (void)c, (void)d, (void)e)
H(h_fadd) {
  UNUSED5;
  return bits(dbl(a) + dbl(b));
}
H(h_fsub) {
  UNUSED5;
  return bits(dbl(a) - dbl(b));
}
H(h_fmul) {
  UNUSED5;
  return bits(dbl(a) * dbl(b));
}
H(h_fdiv) {
  UNUSED5;
  return bits(dbl(a) / dbl(b));
}
H(h_fcmp) {
  UNUSED5;
  double x = dbl(a), y = dbl(b);
  if (isnan(x) || isnan(y)) return 2;
  return x < y ? (uint64_t)-1 : x > y;
}
H(h_fsqrt) {
  UNUSED5;
  return bits(sqrt(dbl(a)));
}
H(h_fsin) {
  UNUSED5;
  return bits(sin(dbl(a)));
}
H(h_fcos) {
  UNUSED5;
  return bits(cos(dbl(a)));
}
H(h_fabs) {
  UNUSED5;
  return bits(fabs(dbl(a)));
}
H(h_fromint) {
  UNUSED5;
  return bits((double)(int64_t)a);
}
H(h_toint) {
  UNUSED5;
  double x = dbl(a);
  if (isnan(x)) return 0;
  if (x >= 9223372036854775807.0) return (uint64_t)INT64_MAX;
  if (x <= -9223372036854775808.0) return (uint64_t)INT64_MIN;
  return (uint64_t)(int64_t)x;
}

/* TEXT/BLOB argument i of the current frame: 1 with its bytes, 0 if it is
** of another type; a fault (and 0) for an index out of range. */
static int frame_bytes(uint64_t i, const uint8_t **pz, uint32_t *pn) {
  dev_bpf_frame *f = tlsFrame;
  if (!f || i >= (uint64_t)f->nArg) {
    if (f && !f->fault) f->fault = DEV_BPF_FAULT_ARG;
    return 0;
  }
  uint8_t t = f->aBlock[CSQ_BPF_SLOT * i + 8];
  if (t != CSQ_BPF_TEXT && t != CSQ_BPF_BLOB) return 0;
  *pz = f->apZ[i];
  *pn = f->aN[i];
  return 1;
}
H(h_byte) {
  UNUSED5;
  const uint8_t *z;
  uint32_t n;
  if (!frame_bytes(a, &z, &n) || b >= n) return (uint64_t)-1;
  return z[b];
}
H(h_find) {
  UNUSED5;
  const uint8_t *z;
  uint32_t n;
  if (c < 1 || c > 8) {
    if (tlsFrame && !tlsFrame->fault) tlsFrame->fault = DEV_BPF_FAULT_FIND;
    return (uint64_t)-1;
  }
  if (!frame_bytes(a, &z, &n) || c > n) return (uint64_t)-1;
  uint8_t nd[8];
  for (int k = 0; k < 8; k++) nd[k] = (uint8_t)(b >> (8 * k));
  const uint8_t *hit = memmem(z, n, nd, c);
  return hit ? (uint64_t)(hit - z) : (uint64_t)-1;
}
H(h_fail) {
  UNUSED5;
  if (tlsFrame && !tlsFrame->fault) {
    tlsFrame->fault = DEV_BPF_FAULT_FAIL;
    tlsFrame->failCode = (int64_t)a;
  }
  return 0;
}

typedef uint64_t (*h_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
static const struct {
  const char *zName;
  h_fn x;
  int nArg;
} aHelper[CSQ_BPF_H_MAX + 1] = {
    [0] = {"csq_none", h_fail, 1}, /* id 0 is never callable: csq_bpf_check refuses it */
    [CSQ_BPF_H_FADD] = {"csq_fadd", h_fadd, 2},
    [CSQ_BPF_H_FSUB] = {"csq_fsub", h_fsub, 2},
    [CSQ_BPF_H_FMUL] = {"csq_fmul", h_fmul, 2},
    [CSQ_BPF_H_FDIV] = {"csq_fdiv", h_fdiv, 2},
    [CSQ_BPF_H_FCMP] = {"csq_fcmp", h_fcmp, 2},
    [CSQ_BPF_H_FSQRT] = {"csq_fsqrt", h_fsqrt, 1},
    [CSQ_BPF_H_FSIN] = {"csq_fsin", h_fsin, 1},
    [CSQ_BPF_H_FCOS] = {"csq_fcos", h_fcos, 1},
    [CSQ_BPF_H_FABS] = {"csq_fabs", h_fabs, 1},
    [CSQ_BPF_H_FROMINT] = {"csq_fromint", h_fromint, 1},
    [CSQ_BPF_H_TOINT] = {"csq_toint", h_toint, 1},
    [CSQ_BPF_H_BYTE] = {"csq_byte", h_byte, 2},
    [CSQ_BPF_H_FIND] = {"csq_find", h_find, 3},
    [CSQ_BPF_H_FAIL] = {"csq_fail", h_fail, 1},
};

static pthread_mutex_t logMutex = PTHREAD_MUTEX_INITIALIZER;

/* The verifier's log lines joined into one message: newlines become "; ",
** separators a line already ends with dropped, and the addresses the
** library prints ("validate(0x7ffd...)") left out, since they mean nothing
** to a user and differ from run to run. */
static void log_to_msg(const char *zLog, char *zErr, size_t nErr) {
  size_t j = 0;
  for (size_t i = 0; zLog[i] && j + 3 < nErr; i++) {
    if (zLog[i] == '(' && zLog[i + 1] == '0' && zLog[i + 2] == 'x') {
      const char *e = strchr(zLog + i, ')');
      if (e) {
        i = (size_t)(e - zLog);
        continue;
      }
    }
    if (zLog[i] == '\n') {
      while (j > 0 && (zErr[j - 1] == ';' || zErr[j - 1] == ' ')) j--;
      if (zLog[i + 1] && j > 0) {
        zErr[j++] = ';';
        zErr[j++] = ' ';
      }
    } else {
      zErr[j++] = zLog[i];
    }
  }
  while (j > 0 && (zErr[j - 1] == ';' || zErr[j - 1] == ' ')) j--;
  zErr[j] = 0;
}

int dev_bpf_load(const uint8_t *aIns, uint32_t nIns, int nArg, dev_bpf **pp, char *zErr,
                 size_t nErr) {
  *pp = NULL;
  struct rte_bpf_xsym aX[CSQ_BPF_H_MAX + 1];
  memset(aX, 0, sizeof(aX));
  for (int i = 0; i <= CSQ_BPF_H_MAX; i++) {
    aX[i].name = aHelper[i].zName;
    aX[i].type = RTE_BPF_XTYPE_FUNC;
    aX[i].func.val = aHelper[i].x;
    aX[i].func.nb_args = (uint32_t)aHelper[i].nArg;
    for (int k = 0; k < aHelper[i].nArg; k++) {
      aX[i].func.args[k].type = RTE_BPF_ARG_RAW;
      aX[i].func.args[k].size = sizeof(uint64_t);
    }
    aX[i].func.ret.type = RTE_BPF_ARG_RAW;
    aX[i].func.ret.size = sizeof(uint64_t);
  }
  /* rte_bpf reads the instructions as its own struct: give it an aligned copy */
  struct ebpf_insn *aCopy = malloc(sizeof(struct ebpf_insn) * nIns);
  dev_bpf *p = calloc(1, sizeof(*p));
  if (!aCopy || !p) {
    free(aCopy);
    free(p);
    return -ENOMEM;
  }
  memcpy(aCopy, aIns, 8ull * nIns);
  struct rte_bpf_prm prm;
  memset(&prm, 0, sizeof(prm));
  prm.ins = aCopy;
  prm.nb_ins = nIns;
  prm.xsym = aX;
  prm.nb_xsym = CSQ_BPF_H_MAX + 1;
  prm.prog_arg.type = RTE_BPF_ARG_PTR;
  prm.prog_arg.size = (size_t)CSQ_BPF_SLOT * (size_t)nArg;

  char *zLog = NULL;
  size_t nLog = 0;
  pthread_mutex_lock(&logMutex);
  FILE *pOld = rte_log_get_stream();
  FILE *pMem = open_memstream(&zLog, &nLog);
  if (pMem) rte_openlog_stream(pMem);
  p->pBpf = rte_bpf_load(&prm);
  int err = rte_errno;
  if (pMem) {
    rte_openlog_stream(pOld);
    fclose(pMem);
  }
  pthread_mutex_unlock(&logMutex);
  free(aCopy);
  if (!p->pBpf) {
    char zWhy[400] = "";
    if (zLog) log_to_msg(zLog, zWhy, sizeof(zWhy));
    snprintf(zErr, nErr, "the eBPF verifier refused the program: %s",
             zWhy[0] ? zWhy : strerror(err > 0 ? err : EINVAL));
    free(zLog);
    free(p);
    return err == ENOMEM ? -ENOMEM : -EINVAL;
  }
  free(zLog);
  struct rte_bpf_jit jit;
  memset(&jit, 0, sizeof(jit));
  const char *zJit = getenv("CSQ_BPF_JIT"); /* "0": interpret (tests, benchmarks) */
  if (!(zJit && zJit[0] == '0') && rte_bpf_get_jit(p->pBpf, &jit) == 0) p->xJit = jit.func;
  p->nArg = nArg;
  *pp = p;
  return 0;
}

void dev_bpf_free(dev_bpf *p) {
  if (!p) return;
  rte_bpf_destroy(p->pBpf);
  free(p);
}

dev_bpf_fn dev_bpf_native(const dev_bpf *p) {
  return p->xJit;
}

int dev_bpf_jitted(const dev_bpf *p) {
  return p->xJit != NULL;
}

uint64_t dev_bpf_run(const dev_bpf *p, dev_bpf_frame *f) {
  void *pArg = (void *)(uintptr_t)f->aBlock; /* the verifier let it only read */
  return p->xJit ? p->xJit(pArg) : rte_bpf_exec(p->pBpf, pArg);
}

void dev_bpf_fault_msg(const dev_bpf_frame *f, const char *zName, char *z, size_t n) {
  csq_bpf_fault_text(csq_bpf_fault_reason((unsigned)f->fault, f->failCode), zName, z, n);
}
