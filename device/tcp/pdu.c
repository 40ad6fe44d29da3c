/*
** device/tcp/pdu.c - encode and validate NVMe/TCP PDU headers (pdu.h).
**
** The decoder trusts nothing: every length is checked against the fixed
** header length of its type, the negotiated digests and the receiver's limit
** before a single byte more is read, so a peer cannot make the other end
** allocate or wait for more than it agreed to.
*/
#include <string.h>

#include "device/format/le.h"
#include "device/tcp/crc32c.h"
#include "device/tcp/pdu.h"

uint32_t tcp_hlen(uint8_t type) {
  switch (type) {
  case TCP_ICREQ:
  case TCP_ICRESP:
    return TCP_HLEN_IC;
  case TCP_CAPSULE_CMD:
    return TCP_HLEN_CMD;
  case TCP_H2C_TERMREQ:
  case TCP_C2H_TERMREQ:
  case TCP_CAPSULE_RSP:
  case TCP_H2C_DATA:
  case TCP_C2H_DATA:
  case TCP_R2T:
    return TCP_HLEN_SHORT;
  default:
    return 0;
  }
}

/* 1 if a PDU of this type may carry digests at all. */
static int type_digested(uint8_t type) {
  return type == TCP_CAPSULE_CMD || type == TCP_CAPSULE_RSP || type == TCP_H2C_DATA ||
         type == TCP_C2H_DATA || type == TCP_R2T;
}

/* 1 if the receiver in role eRole may be sent this type. */
static int type_for_role(uint8_t type, int eRole) {
  if (eRole == TCP_ROLE_CONTROLLER)
    return type == TCP_ICREQ || type == TCP_H2C_TERMREQ || type == TCP_CAPSULE_CMD ||
           type == TCP_H2C_DATA;
  return type == TCP_ICRESP || type == TCP_C2H_TERMREQ || type == TCP_CAPSULE_RSP ||
         type == TCP_C2H_DATA || type == TCP_R2T;
}

uint32_t tcp_hdr_encode(const tcp_hdr *h, uint32_t nData, int bHdgst, int bDdgst, uint8_t *out) {
  uint32_t hlen = tcp_hlen(h->type), nHd = 0, nDd = 0;
  uint8_t flags = h->flags & (uint8_t) ~(TCP_F_HDGST | TCP_F_DDGST);
  memset(out, 0, hlen);
  if (type_digested(h->type)) {
    if (bHdgst) {
      flags |= TCP_F_HDGST;
      nHd = TCP_DGST_LEN;
    }
    if (bDdgst && nData) {
      flags |= TCP_F_DDGST;
      nDd = TCP_DGST_LEN;
    }
  }
  out[0] = h->type;
  out[1] = flags;
  out[2] = (uint8_t)hlen;
  /* TermReq data follows the header directly and is not "data" for PDO */
  out[3] =
      (uint8_t)(nData && h->type != TCP_H2C_TERMREQ && h->type != TCP_C2H_TERMREQ ? hlen + nHd : 0);
  csq_put_le32(out + 4, hlen + nHd + nData + nDd);
  switch (h->type) {
  case TCP_ICREQ:
  case TCP_ICRESP:
    csq_put_le16(out + 8, h->pfv);
    out[10] = h->pda;
    out[11] = h->dgst;
    csq_put_le32(out + 12, h->maxVal);
    break;
  case TCP_H2C_TERMREQ:
  case TCP_C2H_TERMREQ:
    csq_put_le16(out + 8, h->fes);
    csq_put_le32(out + 10, h->fei);
    break;
  case TCP_CAPSULE_CMD:
    memcpy(out + 8, h->aEntry, 64);
    break;
  case TCP_CAPSULE_RSP:
    memcpy(out + 8, h->aEntry, 16);
    break;
  case TCP_H2C_DATA:
  case TCP_C2H_DATA:
  case TCP_R2T:
    csq_put_le16(out + 8, h->cccid);
    if (h->type != TCP_C2H_DATA) csq_put_le16(out + 10, h->ttag);
    csq_put_le32(out + 12, h->offset);
    csq_put_le32(out + 16, h->length);
    break;
  }
  if (nHd) csq_put_le32(out + hlen, tcp_crc32c(out, hlen));
  return hlen + nHd;
}

int tcp_ch_check(const uint8_t *ch, int eRole, int bHdgst, int bDdgst, uint32_t maxData,
                 tcp_layout *pL, const char **pzWhy) {
  uint8_t type = ch[0], flags = ch[1], hlen = ch[2], pdo = ch[3];
  uint32_t plen = csq_le32(ch + 4), want = tcp_hlen(type), nHd, nDd;
  memset(pL, 0, sizeof(*pL));
  pL->type = type;
  pL->flags = flags;
  pL->plen = plen;
  if (!want || !type_for_role(type, eRole)) {
    *pzWhy = want ? "a PDU type this end never receives" : "an unknown PDU type";
    return TCP_FES_HDR;
  }
  if (hlen != want) {
    *pzWhy = "a header length (HLEN) wrong for the PDU type";
    return TCP_FES_HDR;
  }
  if (!type_digested(type)) {
    if (flags) {
      *pzWhy = "flags on a PDU that takes none";
      return TCP_FES_HDR;
    }
    if (type == TCP_ICREQ || type == TCP_ICRESP) {
      if (pdo != 0 || plen != TCP_HLEN_IC) {
        *pzWhy = "an ICReq/ICResp whose PDO or PLEN is not 0 and 128";
        return TCP_FES_HDR;
      }
    } else if (plen < hlen || plen > (uint32_t)hlen + TCP_TERM_MAX) {
      *pzWhy = "a TermReq whose PLEN is out of range";
      return TCP_FES_HDR;
    }
    pL->nHdr = hlen;
    pL->nData = plen - hlen; /* a TermReq's copy of the offending header */
    return 0;
  }
  /* the digests are all or nothing per connection, as negotiated */
  if (!!(flags & TCP_F_HDGST) != !!bHdgst) {
    *pzWhy = bHdgst ? "a PDU without the negotiated header digest"
                    : "a header digest that was not negotiated";
    return TCP_FES_HDR;
  }
  if ((flags & TCP_F_DDGST) && !bDdgst) {
    *pzWhy = "a data digest that was not negotiated";
    return TCP_FES_HDR;
  }
  if (flags & ~(TCP_F_HDGST | TCP_F_DDGST | TCP_F_LAST | TCP_F_SUCCESS)) {
    *pzWhy = "reserved flags set";
    return TCP_FES_HDR;
  }
  if ((flags & (TCP_F_LAST | TCP_F_SUCCESS)) &&
      !(type == TCP_C2H_DATA || (type == TCP_H2C_DATA && !(flags & TCP_F_SUCCESS)))) {
    *pzWhy = "LAST_PDU or SUCCESS on a PDU type that has no such flag";
    return TCP_FES_HDR;
  }
  if ((flags & TCP_F_SUCCESS) && !(flags & TCP_F_LAST)) {
    *pzWhy = "SUCCESS without LAST_PDU";
    return TCP_FES_HDR;
  }
  nHd = bHdgst ? TCP_DGST_LEN : 0;
  nDd = (flags & TCP_F_DDGST) ? TCP_DGST_LEN : 0;
  pL->nHdr = hlen + nHd;
  if (pdo == 0) {
    int bMustData = type == TCP_H2C_DATA || type == TCP_C2H_DATA;
    if (bMustData || nDd || plen != hlen + nHd) {
      *pzWhy = bMustData ? "a data PDU without data" : "a PLEN that disagrees with the header";
      return TCP_FES_HDR;
    }
    return 0;
  }
  if (type == TCP_CAPSULE_RSP || type == TCP_R2T) {
    *pzWhy = "data on a PDU type that carries none";
    return TCP_FES_HDR;
  }
  if (pdo < hlen + nHd || pdo > hlen + nHd + TCP_MAX_PAD) {
    *pzWhy = "a data offset (PDO) inside the header or too far after it";
    return TCP_FES_HDR;
  }
  if (bDdgst && !nDd) {
    *pzWhy = "data without the negotiated data digest";
    return TCP_FES_HDR;
  }
  if (plen <= (uint32_t)pdo + nDd) {
    *pzWhy = "a PLEN that leaves no room for the data";
    return TCP_FES_HDR;
  }
  if (plen - pdo - nDd > maxData) {
    *pzWhy = "more data in one PDU than this end accepts";
    return TCP_FES_LIMIT;
  }
  pL->nPad = pdo - (hlen + nHd);
  pL->nData = plen - pdo - nDd;
  pL->nDdgst = nDd;
  return 0;
}

int tcp_hdr_decode(const uint8_t *buf, const tcp_layout *pL, tcp_hdr *h, uint32_t *pFei,
                   const char **pzWhy) {
  uint32_t hlen = buf[2];
  memset(h, 0, sizeof(*h));
  *pFei = 0;
  h->type = pL->type;
  h->flags = pL->flags;
  if (pL->nHdr > hlen && csq_le32(buf + hlen) != tcp_crc32c(buf, hlen)) {
    *pzWhy = "a header digest that does not match";
    return TCP_FES_HDGST;
  }
  switch (h->type) {
  case TCP_ICREQ:
  case TCP_ICRESP:
    h->pfv = csq_le16(buf + 8);
    h->pda = buf[10];
    h->dgst = buf[11];
    h->maxVal = csq_le32(buf + 12);
    if (h->pfv != 0) {
      *pFei = 8;
      *pzWhy = "a PDU format version other than 0";
      return TCP_FES_PARAMETER;
    }
    if (h->pda > 31) {
      *pFei = 10;
      *pzWhy = "a PDU data alignment above 31";
      return TCP_FES_HDR;
    }
    if (h->dgst & ~3u) {
      *pFei = 11;
      *pzWhy = "reserved digest bits set";
      return TCP_FES_HDR;
    }
    if (h->type == TCP_ICRESP && h->maxVal < 4096) {
      *pFei = 12;
      *pzWhy = "a MAXH2CDATA below 4096";
      return TCP_FES_HDR;
    }
    break;
  case TCP_H2C_TERMREQ:
  case TCP_C2H_TERMREQ:
    h->fes = csq_le16(buf + 8);
    h->fei = csq_le32(buf + 10);
    break;
  case TCP_CAPSULE_CMD:
    memcpy(h->aEntry, buf + 8, 64);
    break;
  case TCP_CAPSULE_RSP:
    memcpy(h->aEntry, buf + 8, 16);
    break;
  case TCP_H2C_DATA:
  case TCP_C2H_DATA:
  case TCP_R2T:
    h->cccid = csq_le16(buf + 8);
    h->ttag = h->type == TCP_C2H_DATA ? 0 : csq_le16(buf + 10);
    h->offset = csq_le32(buf + 12);
    h->length = csq_le32(buf + 16);
    if (h->type != TCP_R2T && h->length != pL->nData) {
      *pFei = 16;
      *pzWhy = "a DATAL that disagrees with the PDU length";
      return TCP_FES_HDR;
    }
    if (h->type == TCP_R2T && h->length == 0) {
      *pFei = 16;
      *pzWhy = "an R2T for no data";
      return TCP_FES_HDR;
    }
    if ((uint64_t)h->offset + h->length > TCP_CMD_DATA_MAX) {
      *pFei = 12;
      *pzWhy = "a data offset beyond any command's data";
      return TCP_FES_RANGE;
    }
    break;
  }
  return 0;
}
