/*
** device/tcp/xfer.c - the data length and direction of a command (xfer.h).
*/
#include <stddef.h>

#include "device/link/backend.h"
#include "device/tcp/pdu.h"
#include "device/tcp/xfer.h"

/* csq's own admin opcodes (cmd.h), on whichever queue they arrive. */
static int csq_admin_xfer(const csq_sqe *p, uint64_t *pLen) {
  switch (p->opcode) {
  case CSQ_ADM_IDENTIFY:
    *pLen = 4096;
    return TCP_XFER_C2H;
  case CSQ_ADM_LOAD_PROGRAM:
    if (p->cdw10 & (1u << 16)) return TCP_XFER_NONE; /* unload */
    *pLen = p->cdw12;
    return *pLen ? TCP_XFER_H2C : TCP_XFER_NONE;
  case CSQ_ADM_MRS_MGMT:
    if ((p->cdw10 & 0xF) != 0) return TCP_XFER_NONE; /* delete */
    *pLen = (uint64_t)p->cdw11 * sizeof(csq_mrange);
    return *pLen ? TCP_XFER_H2C : TCP_XFER_NONE;
  default:
    return TCP_XFER_NONE;
  }
}

int tcp_cmd_xfer(const csq_sqe *p, int bAdmin, uint32_t *pLen) {
  uint64_t n = 0;
  int dir = TCP_XFER_NONE;
  if (p->opcode == TCP_OPC_FABRICS) {
    if ((p->nsid & 0xFF) == TCP_FCTYPE_CONN) {
      n = TCP_CONNECT_DATA;
      dir = TCP_XFER_H2C;
    }
  } else if (bAdmin && p->opcode == TCP_ADM_GET_LOG) {
    /* NUMD = NUMDU:NUMDL, 0-based dwords */
    n = (((uint64_t)(p->cdw11 & 0xFFFF) << 16 | (p->cdw10 >> 16)) + 1) * 4;
    dir = TCP_XFER_C2H;
  } else if (dev_sqe_is_admin(p)) {
    dir = csq_admin_xfer(p, &n);
  } else if (!bAdmin) {
    switch (p->nsid) {
    case CSQ_NSID_NVM:
      if (p->opcode == CSQ_NVM_READ || p->opcode == CSQ_NVM_WRITE) {
        n = ((uint64_t)(p->cdw12 & 0xFFFF) + 1) * CSQ_LBA_SIZE;
        dir = p->opcode == CSQ_NVM_READ ? TCP_XFER_C2H : TCP_XFER_H2C;
      }
      break;
    case CSQ_NSID_CP:
      if (p->opcode == CSQ_CP_EXECUTE && (p->cdw10 >> 16) == 0xFFFF && p->cdw11) {
        n = (uint64_t)p->cdw11 * sizeof(csq_mrange);
        dir = TCP_XFER_H2C;
      }
      break;
    case CSQ_NSID_SLM:
      if (p->opcode == CSQ_SLM_COPY) {
        n = ((uint64_t)(p->cdw12 & 0xFF) + 1) *
            (((p->cdw12 >> 8) & 0xF) ? sizeof(csq_mrange) : sizeof(csq_lba_range));
        dir = TCP_XFER_H2C;
      } else if (p->opcode == CSQ_SLM_READ || p->opcode == CSQ_SLM_WRITE) {
        n = p->cdw12;
        dir = n == 0 ? TCP_XFER_NONE : p->opcode == CSQ_SLM_READ ? TCP_XFER_C2H : TCP_XFER_H2C;
      }
      break;
    }
  }
  if (n > TCP_CMD_DATA_MAX) return -1;
  *pLen = dir == TCP_XFER_NONE ? 0 : (uint32_t)n;
  return dir;
}
