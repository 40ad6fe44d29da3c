/*
** device/emu/fault.c - parser and matcher of fault-injection specs (fault.h),
** and the replacement of a live device's rules (dev_fault_set).
**
** One action exists only here: action=crash ends the process at once with
** _exit(DEV_FAULT_CRASH_EXIT) when the rule fires, before the command runs,
** as a power cut or a kill -9 would stop a writer between two commands
** (whatever reached the media before stays there). Crash tests set it in a
** child process: "op=nvm_write,nth=3,action=crash".
*/
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "device/link/backend.h"
#include "device/emu/fault.h"
#include "device/link/msg.h"

#define DEV_FAULT_CRASH_EXIT 86 /* exit status of action=crash */

typedef struct fault_rule {
  char zOp[16]; /* "" = any */
  int bLba;
  uint64_t lba;
  uint64_t nth;    /* 0 = not used */
  double prob;     /* < 0 = not used */
  uint64_t rng;    /* xorshift state */
  uint64_t nLimit; /* max firings, 0 = no limit */
  uint64_t nSeen, nFired;
  int bCrash; /* action=crash: _exit when it fires */
  dev_fault_hit hit;
} fault_rule;

/* The rules may be replaced while the device runs (dev_fault_set): aRule,
** nRule and zSpec change only under mutex; nRule is also read atomically
** without it, so a device with no rules pays no lock per command. */
struct dev_fault {
  pthread_mutex_t mutex;
  int nRule;
  fault_rule *aRule;
  char *zSpec; /* the spec the rules came from (malloc'd), NULL = none */
};

static const char *const azOp[] = {
    "identify",     "load",         "activate", "mrs",      "nvm_read", "nvm_write", "nvm_flush",
    "resv_acquire", "resv_release", "execute",  "slm_copy", "slm_read", "slm_write", "slm_fill"};

const char *dev_fault_op_name(const csq_sqe *p) {
  if (dev_sqe_is_admin(p)) {
    switch (p->opcode) {
    case CSQ_ADM_IDENTIFY:
      return "identify";
    case CSQ_ADM_LOAD_PROGRAM:
      return "load";
    case CSQ_ADM_PROGRAM_ACTIVATION:
      return "activate";
    default:
      return "mrs";
    }
  }
  if (p->nsid == CSQ_NSID_CP) return p->opcode == CSQ_CP_EXECUTE ? "execute" : "cp_other";
  if (p->nsid == CSQ_NSID_SLM) {
    switch (p->opcode) {
    case CSQ_SLM_COPY:
      return "slm_copy";
    case CSQ_SLM_READ:
      return "slm_read";
    case CSQ_SLM_WRITE:
      return "slm_write";
    case CSQ_SLM_FILL:
      return "slm_fill";
    default:
      return "slm_other";
    }
  }
  switch (p->opcode) {
  case CSQ_NVM_READ:
    return "nvm_read";
  case CSQ_NVM_WRITE:
    return "nvm_write";
  case CSQ_NVM_FLUSH:
    return "nvm_flush";
  case CSQ_NVM_RESV_ACQUIRE:
    return "resv_acquire";
  case CSQ_NVM_RESV_RELEASE:
    return "resv_release";
  default:
    return "nvm_other";
  }
}

static uint64_t xorshift(uint64_t *s) {
  uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *s = x;
  return x;
}

static int fault_err(char **pzErr, const char *zFmt, ...) __attribute__((format(printf, 2, 3)));
static int fault_err(char **pzErr, const char *zFmt, ...) {
  va_list ap;
  va_start(ap, zFmt);
  if (pzErr) *pzErr = dev_vmprintf(zFmt, ap);
  va_end(ap);
  return -EINVAL;
}

static int parse_u64(const char *z, uint64_t *p) {
  char *zEnd;
  if (!*z) return 0;
  errno = 0;
  *p = strtoull(z, &zEnd, 0);
  return errno == 0 && *zEnd == 0;
}

/* Parse one rule (a writable copy of its text) into *r. */
static int parse_rule(char *z, int iRule, fault_rule *r, char **pzErr) {
  char *zSave = NULL, *zItem;
  uint64_t seed = 1;
  memset(r, 0, sizeof(*r));
  r->prob = -1;
  for (zItem = strtok_r(z, ",", &zSave); zItem; zItem = strtok_r(NULL, ",", &zSave)) {
    char *zEq = strchr(zItem, '=');
    const char *zKey = zItem, *zVal;
    while (*zKey == ' ') zKey++;
    if (!zEq) return fault_err(pzErr, "fault rule %d: '%s' is not key=value", iRule, zItem);
    *zEq = 0;
    zVal = zEq + 1;
    if (strcmp(zKey, "op") == 0) {
      size_t i;
      int bOk = strcmp(zVal, "any") == 0;
      for (i = 0; !bOk && i < sizeof(azOp) / sizeof(azOp[0]); i++) bOk = strcmp(zVal, azOp[i]) == 0;
      if (!bOk)
        return fault_err(pzErr,
                         "fault rule %d: unknown op '%s' (expected any, identify, load, "
                         "activate, mrs, nvm_read, nvm_write, nvm_flush, resv_acquire, "
                         "resv_release, execute, slm_copy, slm_read, slm_write, slm_fill)",
                         iRule, zVal);
      snprintf(r->zOp, sizeof(r->zOp), "%s", strcmp(zVal, "any") ? zVal : "");
    } else if (strcmp(zKey, "nth") == 0) {
      if (!parse_u64(zVal, &r->nth) || r->nth == 0)
        return fault_err(pzErr, "fault rule %d: nth=%s is not a positive integer", iRule, zVal);
    } else if (strcmp(zKey, "lba") == 0) {
      if (!parse_u64(zVal, &r->lba))
        return fault_err(pzErr, "fault rule %d: lba=%s is not an integer", iRule, zVal);
      r->bLba = 1;
    } else if (strcmp(zKey, "count") == 0) {
      if (!parse_u64(zVal, &r->nLimit) || r->nLimit == 0)
        return fault_err(pzErr, "fault rule %d: count=%s is not a positive integer", iRule, zVal);
    } else if (strcmp(zKey, "seed") == 0) {
      if (!parse_u64(zVal, &seed))
        return fault_err(pzErr, "fault rule %d: seed=%s is not an integer", iRule, zVal);
    } else if (strcmp(zKey, "prob") == 0) {
      char *zEnd;
      r->prob = strtod(zVal, &zEnd);
      if (*zVal == 0 || *zEnd || !(r->prob >= 0.0 && r->prob <= 1.0))
        return fault_err(pzErr, "fault rule %d: prob=%s is not a number in 0..1", iRule, zVal);
    } else if (strcmp(zKey, "action") == 0) {
      if (strncmp(zVal, "status:", 7) == 0) {
        uint64_t sf;
        if (!parse_u64(zVal + 7, &sf) || sf == 0 || sf > 0x7FFF)
          return fault_err(pzErr,
                           "fault rule %d: '%s': status must be a non-zero 15-bit status "
                           "field such as 0x281",
                           iRule, zVal);
        r->hit.action = DEV_FAULT_STATUS;
        r->hit.status = (uint16_t)sf;
      } else if (strcmp(zVal, "timeout") == 0) {
        r->hit.action = DEV_FAULT_TIMEOUT;
      } else if (strcmp(zVal, "corrupt") == 0) {
        r->hit.action = DEV_FAULT_CORRUPT;
      } else if (strcmp(zVal, "short") == 0) {
        r->hit.action = DEV_FAULT_SHORT;
      } else if (strcmp(zVal, "crash") == 0) {
        r->bCrash = 1;
      } else if (strncmp(zVal, "delay:", 6) == 0) {
        uint64_t ms;
        if (!parse_u64(zVal + 6, &ms) || ms > 3600000)
          return fault_err(pzErr, "fault rule %d: '%s': delay takes milliseconds", iRule, zVal);
        r->hit.action = DEV_FAULT_DELAY;
        r->hit.delayMs = (uint32_t)ms;
      } else {
        return fault_err(pzErr,
                         "fault rule %d: unknown action '%s' (expected status:SF, timeout, "
                         "corrupt, short, delay:MS, crash)",
                         iRule, zVal);
      }
    } else {
      return fault_err(pzErr,
                       "fault rule %d: unknown key '%s' (expected op, lba, nth, prob, "
                       "seed, count, action)",
                       iRule, zKey);
    }
  }
  if (r->hit.action == DEV_FAULT_NONE && !r->bCrash)
    return fault_err(pzErr, "fault rule %d: no action= given", iRule);
  if (r->nth && r->prob >= 0)
    return fault_err(pzErr, "fault rule %d: use nth or prob, not both", iRule);
  if (r->hit.action == DEV_FAULT_CORRUPT && r->zOp[0] && strcmp(r->zOp, "nvm_read") &&
      strcmp(r->zOp, "nvm_write") && strcmp(r->zOp, "slm_read") && strcmp(r->zOp, "slm_write") &&
      strcmp(r->zOp, "slm_copy"))
    return fault_err(pzErr,
                     "fault rule %d: corrupt applies to nvm_read, nvm_write, slm_read, "
                     "slm_write, slm_copy only",
                     iRule);
  if (r->hit.action == DEV_FAULT_SHORT && strcmp(r->zOp, "nvm_write"))
    return fault_err(pzErr, "fault rule %d: short applies to op=nvm_write only", iRule);
  if (r->nth && !r->nLimit) r->nLimit = 1;
  r->rng = seed * 0x9E3779B97F4A7C15ull + 1;
  return 0;
}

int dev_fault_parse(const char *zSpec, dev_fault **pp, char **pzErr) {
  dev_fault *f;
  char *zCopy, *zSave = NULL, *zRule;
  int rc = 0;
  *pp = NULL;
  if (pzErr) *pzErr = NULL;
  if (!zSpec || !zSpec[0]) return 0;
  f = calloc(1, sizeof(*f));
  zCopy = strdup(zSpec);
  if (!f || !zCopy) {
    free(f);
    free(zCopy);
    return -ENOMEM;
  }
  pthread_mutex_init(&f->mutex, NULL);
  for (zRule = strtok_r(zCopy, ";", &zSave); zRule && rc == 0;
       zRule = strtok_r(NULL, ";", &zSave)) {
    fault_rule *a;
    if (strspn(zRule, " ") == strlen(zRule)) continue;
    a = realloc(f->aRule, (f->nRule + 1) * sizeof(fault_rule));
    if (!a) {
      rc = -ENOMEM;
      break;
    }
    f->aRule = a;
    rc = parse_rule(zRule, f->nRule + 1, &f->aRule[f->nRule], pzErr);
    if (rc == 0) f->nRule++;
  }
  free(zCopy);
  if (rc == 0 && f->nRule == 0) rc = fault_err(pzErr, "fault spec '%s' has no rule", zSpec);
  if (rc) {
    if (pzErr && *pzErr) {
      char *z = NULL;
      if (asprintf(&z, "%s (in fault spec \"%s\")", *pzErr, zSpec) >= 0) {
        free(*pzErr);
        *pzErr = z;
      }
    }
    dev_fault_free(f);
    return rc;
  }
  f->zSpec = strdup(zSpec);
  if (!f->zSpec) {
    dev_fault_free(f);
    return -ENOMEM;
  }
  *pp = f;
  return 0;
}

void dev_fault_free(dev_fault *f) {
  if (!f) return;
  pthread_mutex_destroy(&f->mutex);
  free(f->aRule);
  free(f->zSpec);
  free(f);
}

int dev_fault_new(dev_fault **pp) {
  dev_fault *f = calloc(1, sizeof(*f));
  *pp = NULL;
  if (!f) return -ENOMEM;
  pthread_mutex_init(&f->mutex, NULL);
  *pp = f;
  return 0;
}

/* The new rules are parsed outside the lock, then swapped in under it: a
** command checked concurrently sees either the old rules or the new ones,
** never a mix, and the old array is freed only after the swap, when no
** checker can hold it (checkers read aRule only under the mutex). */
int dev_fault_set(dev_fault *f, const char *zSpec, char **pzPrev, char **pzErr) {
  dev_fault *pNew = NULL;
  fault_rule *aOld;
  char *zOld;
  int rc;
  if (pzPrev) *pzPrev = NULL;
  rc = dev_fault_parse(zSpec, &pNew, pzErr);
  if (rc) return rc;
  pthread_mutex_lock(&f->mutex);
  aOld = f->aRule;
  zOld = f->zSpec;
  f->aRule = pNew ? pNew->aRule : NULL;
  f->zSpec = pNew ? pNew->zSpec : NULL;
  __atomic_store_n(&f->nRule, pNew ? pNew->nRule : 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&f->mutex);
  if (pNew) {
    pNew->aRule = NULL;
    pNew->zSpec = NULL;
    dev_fault_free(pNew);
  }
  free(aOld);
  if (pzPrev)
    *pzPrev = zOld;
  else
    free(zOld);
  return 0;
}

char *dev_fault_spec(dev_fault *f) {
  char *z = NULL;
  if (!f) return NULL;
  pthread_mutex_lock(&f->mutex);
  if (f->zSpec) z = strdup(f->zSpec);
  pthread_mutex_unlock(&f->mutex);
  return z;
}

/* Does the command's LBA range cover lba? Only NVM reads/writes and
** LBA-format Memory Copies have one. */
static int covers_lba(const csq_sqe *p, uint64_t lba) {
  if (p->nsid == CSQ_NSID_NVM && (p->opcode == CSQ_NVM_READ || p->opcode == CSQ_NVM_WRITE)) {
    uint64_t slba = (uint64_t)p->cdw10 | ((uint64_t)p->cdw11 << 32);
    return lba >= slba && lba <= slba + (p->cdw12 & 0xFFFF);
  }
  if (p->nsid == CSQ_NSID_SLM && p->opcode == CSQ_SLM_COPY && ((p->cdw12 >> 8) & 0xF) == 0 &&
      p->prp1) {
    const csq_lba_range *a = (const csq_lba_range *)(uintptr_t)p->prp1;
    uint32_t i, n = (p->cdw12 & 0xFF) + 1;
    for (i = 0; i < n; i++)
      if (lba >= a[i].slba && lba < a[i].slba + a[i].nlb) return 1;
  }
  return 0;
}

int dev_fault_check(dev_fault *f, const csq_sqe *pSqe, dev_fault_hit *pHit) {
  const char *zOp;
  int i, bFire = 0;
  if (!f || __atomic_load_n(&f->nRule, __ATOMIC_ACQUIRE) == 0) return 0;
  zOp = dev_fault_op_name(pSqe);
  pthread_mutex_lock(&f->mutex);
  for (i = 0; i < f->nRule && !bFire; i++) {
    fault_rule *r = &f->aRule[i];
    if (r->zOp[0] && strcmp(r->zOp, zOp)) continue;
    if (r->bLba && !covers_lba(pSqe, r->lba)) continue;
    r->nSeen++;
    if (r->nLimit && r->nFired >= r->nLimit) continue;
    if (r->nth)
      bFire = r->nSeen == r->nth;
    else if (r->prob >= 0)
      bFire = (double)(xorshift(&r->rng) >> 11) * (1.0 / 9007199254740992.0) < r->prob;
    else
      bFire = 1;
    if (bFire && r->bCrash) _exit(DEV_FAULT_CRASH_EXIT); /* before the command runs */
    if (bFire) {
      r->nFired++;
      *pHit = r->hit;
      pHit->rnd = xorshift(&r->rng);
    }
  }
  pthread_mutex_unlock(&f->mutex);
  return bFire;
}

void dev_fault_corrupt(const dev_fault_hit *pHit, void *p, size_t n) {
  if (n == 0) return;
  ((uint8_t *)p)[pHit->rnd % n] ^= 0xFF;
}
