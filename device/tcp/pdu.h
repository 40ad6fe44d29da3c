/*
** device/tcp/pdu.h - the PDUs of the NVMe/TCP transport (NVMe over Fabrics
** TCP transport specification), shared by the target (device/target/) and
** the initiator (device/initiator/): constants, one flat header struct, an
** encoder and a strict two-step decoder.
**
** Every PDU opens with an 8-byte common header (CH):
**   byte 0 type, 1 flags, 2 HLEN (header length), 3 PDO (data offset),
**   4-7 PLEN (whole PDU length), little endian.
** then the PDU-specific header up to HLEN, a 4-byte header digest when HDGST
** was negotiated (flag HDGSTF), padding up to PDO, the data, and a 4-byte data
** digest when DDGST was negotiated and the PDU carries data (flag DDGSTF).
**
**   type            HLEN  after the CH
**   ICReq    00h    128   PFV 2, HPDA 1, DGST 1 (bit 0 HDGST, bit 1 DDGST), MAXR2T 4
**   ICResp   01h    128   PFV 2, CPDA 1, DGST 1, MAXH2CDATA 4
**   H2CTermReq 02h / C2HTermReq 03h
**                   24    FES 2, FEI 4; data: the offending header (<= 128 bytes)
**   CapsuleCmd 04h   72   the 64-byte SQE; data: in-capsule data
**   CapsuleResp 05h  24   the 16-byte CQE
**   H2CData  06h     24   CCCID 2, TTAG 2, DATAO 4, DATAL 4, 4 reserved
**   C2HData  07h     24   CCCID 2, 2 reserved, DATAO 4, DATAL 4, 4 reserved
**   R2T      09h     24   CCCID 2, TTAG 2, R2TO 4, R2TL 4, 4 reserved
** ICReq, ICResp and the TermReqs never carry digests.
**
** Decoding is two steps, because a receiver reads the CH before it knows how
** much more to read: tcp_ch_check() validates the CH against the receiver's
** role and the negotiated digests and says how many bytes follow;
** tcp_hdr_decode() checks the header digest and the type-specific fields.
** Both return 0 or a fatal error status (TCP_FES_*) for a C2H/H2CTermReq,
** and a reason in *pzWhy (static text) for the log and the user.
*/
#ifndef CSQ_DEVICE_TCP_PDU_H
#define CSQ_DEVICE_TCP_PDU_H

#include <stddef.h>
#include <stdint.h>

#define TCP_ICREQ       0x00
#define TCP_ICRESP      0x01
#define TCP_H2C_TERMREQ 0x02
#define TCP_C2H_TERMREQ 0x03
#define TCP_CAPSULE_CMD 0x04
#define TCP_CAPSULE_RSP 0x05
#define TCP_H2C_DATA    0x06
#define TCP_C2H_DATA    0x07
#define TCP_R2T         0x09

/* CH flags */
#define TCP_F_HDGST   0x01
#define TCP_F_DDGST   0x02
#define TCP_F_LAST    0x04 /* H2CData, C2HData: the last PDU of the transfer */
#define TCP_F_SUCCESS 0x08 /* C2HData: no response capsule follows */

#define TCP_CH_LEN     8
#define TCP_HLEN_IC    128
#define TCP_HLEN_CMD   72
#define TCP_HLEN_SHORT 24 /* CapsuleResp, H2CData, C2HData, R2T, TermReqs */
#define TCP_DGST_LEN   4
#define TCP_MAX_HDR    (TCP_HLEN_IC + TCP_DGST_LEN)
#define TCP_TERM_MAX   128 /* bytes of the offending header a TermReq carries */
#define TCP_MAX_PAD    128 /* padding between header and data a receiver accepts */

/* In-capsule data both sides accept (IOCCSZ = (64 + this) / 16); larger
** host-to-controller transfers go by R2T and H2CData. */
#define TCP_INLINE_MAX 8192u
/* Largest H2CData a csq target accepts (MAXH2CDATA), and the largest C2HData a
** csq target sends. */
#define TCP_H2C_MAX (128u * 1024)
#define TCP_C2H_MAX (128u * 1024)
/* Largest data one command may move; a longer transfer is refused with
** Invalid Field. */
#define TCP_CMD_DATA_MAX (256u << 20)

/* Fatal error status of a TermReq. */
#define TCP_FES_HDR       0x01 /* invalid PDU header field; FEI = its byte offset */
#define TCP_FES_SEQUENCE  0x02 /* PDU sequence error */
#define TCP_FES_HDGST     0x03 /* header digest error */
#define TCP_FES_RANGE     0x04 /* data transfer out of range */
#define TCP_FES_LIMIT     0x05 /* data transfer limit exceeded */
#define TCP_FES_PARAMETER 0x06 /* unsupported parameter */

/* Which end receives: the controller (target) receives ICReq, H2CTermReq,
** CapsuleCmd and H2CData; the host the others. */
#define TCP_ROLE_CONTROLLER 0
#define TCP_ROLE_HOST       1

/* Where the parts of a PDU lie, from its CH (tcp_ch_check). */
typedef struct tcp_layout {
  uint8_t type, flags;
  uint32_t nHdr;   /* HLEN plus the header digest: the bytes from 0 to decode */
  uint32_t nPad;   /* bytes between the header (with digest) and the data */
  uint32_t nData;  /* data bytes */
  uint32_t nDdgst; /* 4 when a data digest follows the data, else 0 */
  uint32_t plen;
} tcp_layout;

/* A decoded header; which fields mean something depends on the type. */
typedef struct tcp_hdr {
  uint8_t type, flags;
  /* ICReq / ICResp */
  uint16_t pfv;    /* 0 */
  uint8_t pda;     /* HPDA / CPDA */
  uint8_t dgst;    /* bit 0 HDGST, bit 1 DDGST */
  uint32_t maxVal; /* MAXR2T (0-based) / MAXH2CDATA */
  /* H2CData, C2HData, R2T */
  uint16_t cccid, ttag;
  uint32_t offset, length;
  /* TermReqs */
  uint16_t fes;
  uint32_t fei;
  /* CapsuleCmd: the SQE, CapsuleResp: the CQE (first 16 bytes) */
  uint8_t aEntry[64];
} tcp_hdr;

/* The fixed HLEN of a type, 0 for an unknown type. */
uint32_t tcp_hlen(uint8_t type);

/* Encode header h for a PDU carrying nData data bytes into out (at least
** TCP_MAX_HDR bytes): the CH (flags from h->flags plus the digest flags the
** connection uses; PDO and PLEN computed), the fields, the header digest.
** Returns the bytes to send before the data. The caller sends the data and,
** when bDdgst and nData > 0, its digest (tcp_crc32c, little endian). */
uint32_t tcp_hdr_encode(const tcp_hdr *h, uint32_t nData, int bHdgst, int bDdgst, uint8_t *out);

/* Step one: validate the 8-byte CH at ch for a receiver in role eRole on a
** connection with the given digests (both 0 before ICReq/ICResp), accepting
** up to maxData data bytes; fill *pL. 0 or TCP_FES_* with *pzWhy. */
int tcp_ch_check(const uint8_t *ch, int eRole, int bHdgst, int bDdgst, uint32_t maxData,
                 tcp_layout *pL, const char **pzWhy);

/* Step two: buf holds pL->nHdr bytes (the CH included). Check the header
** digest and the type's fields; fill *h. 0 or TCP_FES_* with *pzWhy and, for
** TCP_FES_HDR, *pFei = the offending byte offset. */
int tcp_hdr_decode(const uint8_t *buf, const tcp_layout *pL, tcp_hdr *h, uint32_t *pFei,
                   const char **pzWhy);

#endif /* CSQ_DEVICE_TCP_PDU_H */
