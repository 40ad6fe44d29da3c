/*
** device/target/target_ctrl.c - csq-target's controllers (target.h): Connect
** and its checks, the controller properties with the CC.EN / CSTS.RDY
** handshake, and the discovery controller's Identify data and log page.
**
** Properties (NVMe base specification, "Controller Registers"):
**   CAP  00h 8 bytes  MQES 1023 (0-based), CQR 1, TO 1 (500 ms), CSS NVM
**   VS   08h 4 bytes  1.2.0: a host of 1.3 or later asks for namespace
**                     descriptor lists and command set ids, which the device
**                     does not have (the Linux kernel then skips the
**                     namespace); the Active Namespace ID list (CNS 02h) is
**                     answered here: csq's three namespaces
**   CC   14h 4 bytes  EN bit 0, SHN bits 15:14
**   CSTS 1Ch 4 bytes  RDY bit 0, SHST bits 3:2
** Setting EN makes the controller ready at once (the device is already open);
** clearing it resets; a shutdown notification completes at once.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/format/le.h"
#include "device/link/cmd.h"
#include "device/target/target.h"
#include "device/tcp/pdu.h"

#define PROP_CAP  0x00
#define PROP_VS   0x08
#define PROP_CC   0x14
#define PROP_CSTS 0x1C

/* Connect statuses, command specific (SCT 1) */
#define SC_CONNECT_INVALID_PARAM CSQ_STATUS(1, 0x82)
#define SC_CONNECT_INVALID_HOST  CSQ_STATUS(1, 0x84)

static tgt_subsys *subsys_find(tgt_server *s, const char *zNqn) {
  for (int i = 0; i < s->nSub; i++)
    if (strcmp(s->aSub[i].zNqn, zNqn) == 0) return &s->aSub[i];
  return NULL;
}

uint16_t tgt_ctrl_connect(tgt_server *s, const char *zSubNqn, const char *zHostNqn, uint16_t cntlid,
                          uint16_t qid, tgt_ctrl **ppCtrl) {
  int bDisc = strcmp(zSubNqn, TGT_DISCOVERY_NQN) == 0;
  tgt_subsys *pSub = bDisc ? NULL : subsys_find(s, zSubNqn);
  tgt_ctrl *c;
  uint16_t sf = 0;
  *ppCtrl = NULL;
  if (!bDisc && !pSub) return SC_CONNECT_INVALID_PARAM | CSQ_DNR;
  if (qid >= TGT_MAX_QUEUES || (bDisc && qid != 0)) return SC_CONNECT_INVALID_PARAM | CSQ_DNR;
  pthread_mutex_lock(&s->mu);
  if (qid == 0) {
    if (cntlid != 0xFFFF && cntlid != 0) {
      /* static controllers are not offered: the host must ask for a new one */
      sf = SC_CONNECT_INVALID_PARAM | CSQ_DNR;
      goto out;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
      sf = CSQ_SC_INTERNAL;
      goto out;
    }
    do {
      c->cntlid = s->nextCntlid++;
      if (s->nextCntlid >= 0xFFF0) s->nextCntlid = 1;
    } while (c->cntlid == 0);
    c->pSub = pSub;
    snprintf(c->zHostNqn, sizeof(c->zHostNqn), "%s", zHostNqn);
    c->aQidUsed = 1;
    c->nRef = 1;
    c->pNext = s->pCtrl;
    s->pCtrl = c;
    *ppCtrl = c;
    goto out;
  }
  for (c = s->pCtrl; c; c = c->pNext)
    if (c->cntlid == cntlid && c->pSub == pSub) break;
  if (!c) {
    sf = SC_CONNECT_INVALID_PARAM | CSQ_DNR;
    goto out;
  }
  if (strcmp(c->zHostNqn, zHostNqn) != 0) {
    sf = SC_CONNECT_INVALID_HOST | CSQ_DNR;
    goto out;
  }
  if (!(c->aQidUsed & 1)) {
    sf = SC_CONNECT_INVALID_PARAM | CSQ_DNR; /* its admin queue is gone: so is it */
    goto out;
  }
  if (c->aQidUsed & (1ull << qid)) {
    sf = SC_CONNECT_INVALID_PARAM | CSQ_DNR; /* that queue is connected already */
    goto out;
  }
  c->aQidUsed |= 1ull << qid;
  c->nRef++;
  *ppCtrl = c;
out:
  pthread_mutex_unlock(&s->mu);
  return sf;
}

void tgt_ctrl_release_qid(tgt_server *s, tgt_ctrl *pCtrl, uint16_t qid) {
  pthread_mutex_lock(&s->mu);
  pCtrl->aQidUsed &= ~(1ull << qid);
  if (qid == 0) pCtrl->csts = 0; /* a controller without its admin queue is gone */
  pthread_mutex_unlock(&s->mu);
}

void tgt_ctrl_disconnect(tgt_server *s, tgt_ctrl *pCtrl, uint16_t qid) {
  tgt_ctrl_release_qid(s, pCtrl, qid);
  tgt_ctrl_unref(s, pCtrl);
}

void tgt_ctrl_unref(tgt_server *s, tgt_ctrl *pCtrl) {
  pthread_mutex_lock(&s->mu);
  if (--pCtrl->nRef == 0) {
    for (tgt_ctrl **pp = &s->pCtrl; *pp; pp = &(*pp)->pNext) {
      if (*pp == pCtrl) {
        *pp = pCtrl->pNext;
        break;
      }
    }
    free(pCtrl);
  }
  pthread_mutex_unlock(&s->mu);
}

uint16_t tgt_prop_get(tgt_server *s, tgt_ctrl *pCtrl, uint32_t ofst, int b8, uint64_t *pVal) {
  uint16_t sf = 0;
  pthread_mutex_lock(&s->mu);
  switch (ofst) {
  case PROP_CAP:
    *pVal = (TGT_MAX_QDEPTH - 1) | 1ull << 16 /* CQR */ | 1ull << 24 /* TO */ | 1ull << 37;
    if (!b8) *pVal &= 0xFFFFFFFFu;
    break;
  case PROP_VS:
    *pVal = 0x00010200;
    break;
  case PROP_CC:
    *pVal = pCtrl->cc;
    break;
  case PROP_CSTS:
    *pVal = pCtrl->csts;
    break;
  default:
    sf = CSQ_SC_INVALID_FIELD | CSQ_DNR;
  }
  if (b8 && ofst != PROP_CAP) sf = CSQ_SC_INVALID_FIELD | CSQ_DNR;
  pthread_mutex_unlock(&s->mu);
  return sf;
}

uint16_t tgt_prop_set(tgt_server *s, tgt_ctrl *pCtrl, uint32_t ofst, uint64_t val) {
  uint32_t cc = (uint32_t)val;
  if (ofst != PROP_CC) return CSQ_SC_INVALID_FIELD | CSQ_DNR;
  pthread_mutex_lock(&s->mu);
  if ((cc & 1) && !(pCtrl->cc & 1)) pCtrl->csts |= 1;   /* EN 0 -> 1: ready */
  if (!(cc & 1) && (pCtrl->cc & 1)) pCtrl->csts &= ~1u; /* EN 1 -> 0: reset */
  if ((cc >> 14) & 3)
    pCtrl->csts = (pCtrl->csts & ~0xCu) | 0x8; /* shutdown processing complete */
  else
    pCtrl->csts &= ~0xCu;
  pCtrl->cc = cc;
  pthread_mutex_unlock(&s->mu);
  return 0;
}

int tgt_ctrl_gone(tgt_server *s, tgt_ctrl *pCtrl) {
  int b;
  pthread_mutex_lock(&s->mu);
  b = pCtrl->pSub && !(pCtrl->aQidUsed & 1);
  pthread_mutex_unlock(&s->mu);
  return b;
}

int tgt_ctrl_ready(tgt_server *s, tgt_ctrl *pCtrl) {
  int b;
  pthread_mutex_lock(&s->mu);
  b = pCtrl->csts & 1;
  pthread_mutex_unlock(&s->mu);
  return b;
}

/* Offsets in the Identify controller data (NVMe base specification). */
#define ID_CNTLID    78
#define ID_CNTRLTYPE 111
#define ID_KAS       320
#define ID_MAXCMD    514
#define ID_NN        516
#define ID_SGLS      536
#define ID_SUBNQN    768
#define ID_IOCCSZ    1792
#define ID_IORCSZ    1796
#define ID_ICDOFF    1800
#define ID_MSDBD     1803

static void put_str(uint8_t *p, size_t n, const char *z) {
  size_t k = strlen(z);
  memset(p, ' ', n);
  memcpy(p, z, k < n ? k : n);
}

void tgt_identify_patch(tgt_ctrl *pCtrl, uint8_t *pBuf) {
  csq_put_le16(pBuf + ID_CNTLID, pCtrl->cntlid);
  pBuf[ID_CNTRLTYPE] = pCtrl->pSub ? 1 : 2; /* I/O controller, discovery controller */
  csq_put_le16(pBuf + ID_KAS, 1);           /* keep alive granularity 100 ms */
  csq_put_le16(pBuf + ID_MAXCMD, TGT_MAX_QDEPTH);
  /* csq's three namespaces (cmd.h): a host that scans them (the Linux
  ** kernel) makes a passthrough node for each, through which csq's own
  ** CP and SLM commands reach the device (tgt_identify_ns_patch). */
  if (pCtrl->pSub) csq_put_le32(pBuf + ID_NN, 3);
  /* SGLs supported (bit 0), offset in-capsule data (bit 20) */
  csq_put_le32(pBuf + ID_SGLS, 1u | 1u << 20);
  memset(pBuf + ID_SUBNQN, 0, 256);
  snprintf((char *)pBuf + ID_SUBNQN, 256, "%s",
           pCtrl->pSub ? pCtrl->pSub->zNqn : TGT_DISCOVERY_NQN);
  csq_put_le32(pBuf + ID_IOCCSZ, (64 + TCP_INLINE_MAX) / 16);
  csq_put_le32(pBuf + ID_IORCSZ, 16 / 16);
  csq_put_le16(pBuf + ID_ICDOFF, 0);
  pBuf[ID_MSDBD] = 1;
}

void tgt_active_ns_list(uint32_t nsid, uint8_t *pBuf) {
  static const uint32_t aNs[] = {CSQ_NSID_NVM, CSQ_NSID_CP, CSQ_NSID_SLM};
  int n = 0;
  memset(pBuf, 0, 4096);
  for (int i = 0; i < 3; i++)
    if (aNs[i] > nsid) csq_put_le32(pBuf + 4 * n++, aNs[i]);
}

/* Identify Namespace: NSZE 0, NCAP 8, NUSE 16, LBAF[0].LBADS at 130 */
#define IDNS_NSZE  0
#define IDNS_NCAP  8
#define IDNS_NUSE  16
#define IDNS_LBADS 130
#define NS_KB_LOG2 16 /* 64 KiB: beyond any page size, so no block I/O */

void tgt_identify_ns_patch(uint32_t nsid, uint8_t *pBuf) {
  uint64_t n;
  if (nsid != CSQ_NSID_CP && nsid != CSQ_NSID_SLM) return;
  n = csq_le64(pBuf + IDNS_NSZE) * 4096 >> NS_KB_LOG2;
  if (n == 0) n = 1; /* a namespace of capacity 0 is one the host ignores */
  csq_put_le64(pBuf + IDNS_NSZE, n);
  csq_put_le64(pBuf + IDNS_NCAP, n);
  csq_put_le64(pBuf + IDNS_NUSE, 0);
  pBuf[IDNS_LBADS] = NS_KB_LOG2;
}

void tgt_discovery_identify(tgt_server *s, tgt_ctrl *pCtrl, uint8_t *pBuf) {
  (void)s;
  memset(pBuf, 0, 4096);
  put_str(pBuf + 4, 20, "CSQTARGET0001");           /* sn */
  put_str(pBuf + 24, 40, "csq NVMe/TCP discovery"); /* mn */
  put_str(pBuf + 64, 8, "1");                       /* fr */
  pBuf[77] = 0;                                     /* mdts: no limit */
  csq_put_le32(pBuf + 80, 0x00020000);              /* ver */
  pBuf[260] = 0x02;                                 /* lpa: extended data for Get Log */
  pBuf[512] = 0x66;                                 /* sqes */
  pBuf[513] = 0x44;                                 /* cqes */
  tgt_identify_patch(pCtrl, pBuf);
}

/* Discovery log page: a 1024-byte header (GENCTR, NUMREC, RECFMT), then one
** 1024-byte entry per subsystem: TRTYPE 3 (TCP), ADRFAM 1 (IPv4), SUBTYPE 2
** (NVM subsystem), TREQ, PORTID, CNTLID FFFFh (dynamic), ASQSZ, TRSVCID at
** 32, SUBNQN at 256, TRADDR at 512, TSAS at 768 (SECTYPE 0: no TLS). */
void tgt_discovery_log(tgt_server *s, uint64_t lpo, uint32_t n, uint8_t *pBuf) {
  uint64_t nAll = 1024 + 1024ull * s->nSub;
  uint8_t *a = calloc(1, nAll);
  memset(pBuf, 0, n);
  if (!a) return;
  csq_put_le64(a, 1);
  csq_put_le64(a + 8, (uint64_t)s->nSub);
  for (int i = 0; i < s->nSub; i++) {
    uint8_t *e = a + 1024 + 1024 * (size_t)i;
    char zHost[64], *zColon;
    e[0] = 3;
    e[1] = 1;
    e[2] = 2;
    e[3] = 0x02; /* TREQ: secure channel not required */
    csq_put_le16(e + 4, 1);
    csq_put_le16(e + 6, 0xFFFF);
    csq_put_le16(e + 8, TGT_MAX_QDEPTH);
    snprintf((char *)e + 32, 32, "%u", s->port);
    snprintf((char *)e + 256, 256, "%s", s->aSub[i].zNqn);
    snprintf(zHost, sizeof(zHost), "%s", s->zAddr);
    zColon = strrchr(zHost, ':');
    if (zColon) *zColon = 0;
    snprintf((char *)e + 512, 256, "%s", zHost);
  }
  if (lpo < nAll) memcpy(pBuf, a + lpo, nAll - lpo < n ? nAll - lpo : n);
  free(a);
}
