/*
** device/tcp/xfer.h - how much data a command moves, and which way, read from
** its fields. Over a link the data pointer of an SQE is not an address both
** ends share: the initiator rewrites it into an NVMe/TCP SGL descriptor and
** the target allocates the buffer, and both must agree on the length from the
** command alone (device/link/cmd.h documents each field). Shared by both
** sides so they cannot disagree.
**
** Also the SGL descriptor NVMe/TCP puts in DPTR (SQE bytes 24-39): address
** 8 bytes, length 4, 3 reserved, then the type byte (type << 4 | subtype):
**   01h  Data Block, offset subtype: data inside the capsule, address = offset
**   5Ah  Transport Data Block: data moved by C2HData or R2T/H2CData
** and CDW0 bits 15:14 (PSDT) = 01b say "SGL".
*/
#ifndef CSQ_DEVICE_TCP_XFER_H
#define CSQ_DEVICE_TCP_XFER_H

#include <stdint.h>

#include "device/link/cmd.h"

#define TCP_XFER_NONE 0
#define TCP_XFER_H2C  1 /* host to controller */
#define TCP_XFER_C2H  2 /* controller to host */

#define TCP_SGL_INCAPSULE 0x01
#define TCP_SGL_TRANSPORT 0x5A
#define TCP_PSDT_SGL      0x40 /* in csq_sqe.flags */

/* Fabrics commands (opcode 7Fh, the command type in byte 4 = cdw1 low byte) */
#define TCP_OPC_FABRICS  0x7F
#define TCP_FCTYPE_PSET  0x00
#define TCP_FCTYPE_CONN  0x01
#define TCP_FCTYPE_PGET  0x04
#define TCP_CONNECT_DATA 1024 /* Connect's data: host id, cntlid, subnqn, hostnqn */

/* Standard admin opcodes a fabrics controller answers besides csq's own */
#define TCP_ADM_GET_LOG    0x02
#define TCP_ADM_SET_FEAT   0x09
#define TCP_ADM_GET_FEAT   0x0A
#define TCP_ADM_KEEP_ALIVE 0x18

/* The direction (TCP_XFER_*) of command p on an admin (bAdmin) or I/O queue,
** and its length in *pLen. -1 when the length exceeds TCP_CMD_DATA_MAX. */
int tcp_cmd_xfer(const csq_sqe *p, int bAdmin, uint32_t *pLen);

/* SGL descriptor of an SQE (prp1 = address, prp2 = length | type << 56). */
static inline uint32_t tcp_sgl_len(const csq_sqe *p) {
  return (uint32_t)p->prp2;
}
static inline uint8_t tcp_sgl_type(const csq_sqe *p) {
  return (uint8_t)(p->prp2 >> 56);
}
static inline void tcp_sgl_set(csq_sqe *p, uint8_t type, uint64_t addr, uint32_t len) {
  p->flags = (uint8_t)((p->flags & 0x3F) | TCP_PSDT_SGL);
  p->prp1 = addr;
  p->prp2 = (uint64_t)len | (uint64_t)type << 56;
}

#endif /* CSQ_DEVICE_TCP_XFER_H */
