/*
** device/link/status.c - names of statuses and opcodes (device/link/cmd.h), for error
** messages and tools.
*/
#include "device/link/cmd.h"

/* Name of a status field (the CQE status >> 1). The DNR and More bits are
** ignored; an unknown code gets a generic name of its type. */
const char *csq_status_name(uint16_t sf) {
  switch (sf & 0x7FF) {
  case CSQ_SC_SUCCESS:
    return "Success";
  case CSQ_SC_INVALID_OPCODE:
    return "Invalid Command Opcode";
  case CSQ_SC_INVALID_FIELD:
    return "Invalid Field in Command";
  case CSQ_SC_CID_CONFLICT:
    return "Command ID Conflict";
  case CSQ_SC_DATA_XFER_ERROR:
    return "Data Transfer Error";
  case CSQ_SC_INTERNAL:
    return "Internal Error";
  case CSQ_SC_ABORTED:
    return "Command Aborted";
  case CSQ_SC_INVALID_NS:
    return "Invalid Namespace";
  case CSQ_SC_LBA_RANGE:
    return "LBA Out of Range";
  case CSQ_SC_CAPACITY:
    return "Capacity Exceeded";
  case CSQ_SC_RESV_CONFLICT:
    return "Reservation Conflict";
  case CSQ_SC_INVALID_PIND:
    return "Invalid Program Index";
  case CSQ_SC_NO_PROGRAM:
    return "No Program in Slot";
  case CSQ_SC_PROGRAM_IN_USE:
    return "Program In Use";
  case CSQ_SC_INVALID_PROGRAM:
    return "Invalid Program Data";
  case CSQ_SC_PROGRAM_TOO_BIG:
    return "Program Too Big";
  case CSQ_SC_MAX_ACTIVE:
    return "Maximum Programs Activated";
  case CSQ_SC_NOT_ACTIVATED:
    return "Program Not Activated";
  case CSQ_SC_INVALID_MRS:
    return "Invalid Memory Range Set";
  case CSQ_SC_MAX_RANGES:
    return "Maximum Memory Ranges Exceeded";
  case CSQ_SC_SLM_RANGE:
    return "SLM Address Out of Range or Misaligned";
  case CSQ_SC_PROGRAM_FAULT:
    return "Program Fault";
  case CSQ_SC_WRITE_FAULT:
    return "Write Fault";
  case CSQ_SC_READ_ERROR:
    return "Unrecovered Read Error";
  case CSQ_SC_HOST_TIMEOUT:
    return "Host Timeout (no completion)";
  case CSQ_SC_HOST_LINK:
    return "Link to the Device Lost";
  }
  switch ((sf >> 8) & 7) {
  case CSQ_SCT_GENERIC:
    return "Generic Error";
  case CSQ_SCT_CMD:
    return "Command Specific Error";
  case CSQ_SCT_MEDIA:
    return "Media Error";
  case CSQ_SCT_VENDOR:
    return "Vendor Specific Error";
  default:
    return "Unknown Status";
  }
}

/* Name of an opcode: nsid 0 = admin; the CP and SLM namespaces reuse low
** opcode numbers, so the namespace decides. */
const char *csq_opcode_name(uint32_t nsid, uint8_t opcode) {
  if (opcode == CSQ_ADM_IDENTIFY) return "Identify";
  if (opcode == CSQ_ADM_LOAD_PROGRAM) return "Load Program";
  if (opcode == CSQ_ADM_PROGRAM_ACTIVATION) return "Program Activation";
  if (opcode == CSQ_ADM_MRS_MGMT) return "Memory Range Set Management";
  if (nsid == 0) return "Unknown Admin Command";
  if (nsid == CSQ_NSID_CP)
    return opcode == CSQ_CP_EXECUTE ? "Execute Program" : "Unknown CP Command";
  if (nsid == CSQ_NSID_SLM) {
    switch (opcode) {
    case CSQ_SLM_COPY:
      return "Memory Copy";
    case CSQ_SLM_READ:
      return "SLM Read";
    case CSQ_SLM_WRITE:
      return "SLM Write";
    case CSQ_SLM_FILL:
      return "SLM Fill";
    default:
      return "Unknown SLM Command";
    }
  }
  switch (opcode) {
  case CSQ_NVM_FLUSH:
    return "Flush";
  case CSQ_NVM_WRITE:
    return "Write";
  case CSQ_NVM_READ:
    return "Read";
  case CSQ_NVM_RESV_ACQUIRE:
    return "Reservation Acquire";
  case CSQ_NVM_RESV_RELEASE:
    return "Reservation Release";
  default:
    return "Unknown NVM Command";
  }
}
