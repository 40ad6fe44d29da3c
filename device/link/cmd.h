/*
** device/link/cmd.h - the csq device command set: every opcode, field and status.
**
** This header is the whole contract between the host driver and a device
** (the emulated CSD in device/emu/, or a real NVMe namespace reached through
** io_uring passthrough in device/nvme/nvme_passthru.c). Commands are 64-byte
** submission queue entries (SQE) and 16-byte completion queue entries (CQE)
** laid out exactly as in the NVMe base specification. Nothing but these
** structures and the data buffers they point at crosses the boundary.
**
** Namespaces of a csq device (NSID):
**   1  NVM namespace: the media, 4 KiB logical blocks (LBA = 4096 bytes).
**   2  Computational Programs (CP) namespace, command set identifier 4.
**   3  Subsystem Local Memory (SLM) namespace, command set identifier 3;
**      byte addressed, addresses chosen by the host (see dev_slm_* in driver.h).
**
** Opcodes follow the NVMe opcode tables where they are public (NVME-CS.md);
** where only an implementation fixed an encoding, csq's choice is documented
** beside the opcode.
**
** Data pointer: DPTR (prp1) holds the address of a host buffer and CDW for the
** length as documented per command; the emulated device "DMAs" by copying from
** or to that address, exactly as a real controller would with a PRP list.
*/
#ifndef CSQ_DEVICE_CMD_H
#define CSQ_DEVICE_CMD_H

#include <stdint.h>

#define CSQ_LBA_SIZE 4096u /* bytes per logical block on the NVM namespace */

#define CSQ_NSID_NVM 1u
#define CSQ_NSID_CP  2u
#define CSQ_NSID_SLM 3u

/* Submission queue entry, 64 bytes, NVMe common command format. */
typedef struct csq_sqe {
  uint8_t opcode; /* CDW0[7:0] */
  uint8_t flags;  /* CDW0[15:8]: FUSE/PSDT, always 0 here */
  uint16_t cid;   /* CDW0[31:16]: command identifier, set by the queue */
  uint32_t nsid;  /* CDW1 */
  uint32_t cdw2;  /* CDW2 */
  uint32_t cdw3;  /* CDW3 */
  uint64_t mptr;  /* CDW4-5: metadata pointer, unused */
  uint64_t prp1;  /* CDW6-7: data pointer (host buffer address) */
  uint64_t prp2;  /* CDW8-9: second data pointer, unused (one buffer per command) */
  uint32_t cdw10; /* command specific */
  uint32_t cdw11;
  uint32_t cdw12;
  uint32_t cdw13;
  uint32_t cdw14;
  uint32_t cdw15;
} csq_sqe;

/* Completion queue entry, 16 bytes. DW0-DW1 carry a command's 64-bit result
** (Execute Program's return value, MRS Management's id, ...). */
typedef struct csq_cqe {
  uint32_t dw0;     /* command specific result, low 32 bits */
  uint32_t dw1;     /* command specific result, high 32 bits */
  uint16_t sq_head; /* SQ head pointer at completion */
  uint16_t sq_id;   /* submission queue identifier */
  uint16_t cid;     /* command identifier of the completed command */
  uint16_t status;  /* bit 0: phase tag; bits 15:1: status field (SC | SCT<<8 | DNR<<14) */
} csq_cqe;

_Static_assert(sizeof(csq_sqe) == 64, "an SQE is 64 bytes");
_Static_assert(sizeof(csq_cqe) == 16, "a CQE is 16 bytes");

/* ---- Admin opcodes -------------------------------------------------------
** CSQ_ADM_IDENTIFY: CDW10[7:0] CNS (0x00 namespace, 0x01 controller),
**   NSID for CNS 0, DPTR -> 4096-byte buffer. Answered in libnvme's
**   struct nvme_id_ctrl / struct nvme_id_ns layouts; the compute capabilities
**   are a csq_id_vs (below) at the start of nvme_id_ctrl.vs[].
** CSQ_ADM_LOAD_PROGRAM (85h): CDW10[15:0] PIND (program slot, 0-based),
**   CDW10[16] SEL (0 load, 1 unload), CDW10[31:24] program type
**   (CSQ_PTYPE_*), CDW11 total program size in bytes, CDW12 number of bytes in
**   this chunk, CDW13 offset of this chunk, CDW14-15 64-bit program identifier
**   (csq: the XXH3-64 of the whole program). DPTR -> the chunk. A load whose
**   identifier matches the slot's current program completes with DW0 bit 0 =
**   1 ("already loaded") and transfers nothing more. The program is verified
**   when its last chunk arrives; a rejected program leaves the slot empty.
** CSQ_ADM_PROGRAM_ACTIVATION (88h): CDW10[15:0] PIND, CDW10[16] (1 activate,
**   0 deactivate).
** CSQ_ADM_MRS_MGMT (89h): CDW10[3:0] select (0 create, 1 delete), CDW10[31:16]
**   MRS id (delete), CDW11 number of ranges (create); DPTR -> csq_mrange[n].
**   Create returns the new MRS id in DW0.
**   (emu: MRS ids are 1..max_mrs, never 0 or 0xFFFF; Load Program chunks
**   must arrive in order, offset 0 first - a chunk at offset 0 restarts the
**   load; an unregistered program type fails with CSQ_SC_INVALID_PROGRAM.)
*/
#define CSQ_ADM_IDENTIFY           0x06
#define CSQ_ADM_LOAD_PROGRAM       0x85
#define CSQ_ADM_PROGRAM_ACTIVATION 0x88
#define CSQ_ADM_MRS_MGMT           0x89

/* ---- NVM namespace I/O opcodes (NSID 1) -----------------------------------
** CSQ_NVM_WRITE / CSQ_NVM_READ: CDW10-11 SLBA, CDW12[15:0] NLB (0-based),
**   DPTR -> (NLB+1)*4096 bytes. A write completes once it is in the device's
**   write cache; CSQ_NVM_FLUSH makes every completed write durable.
*/
#define CSQ_NVM_FLUSH 0x00
#define CSQ_NVM_WRITE 0x01
#define CSQ_NVM_READ  0x02
/* Reservations serialise writers from several hosts (processes) on one
** namespace: CSQ_NVM_RESV_ACQUIRE (11h) CDW10[2:0] 0 = acquire exclusive
** access; completes with CSQ_SC_RESV_CONFLICT at once if another host holds it
** (the host driver retries until its busy timeout). CSQ_NVM_RESV_RELEASE (15h).
** A reservation is held per queue pair and released when the queue closes. */
#define CSQ_NVM_RESV_ACQUIRE 0x11
#define CSQ_NVM_RESV_RELEASE 0x15

/* ---- Computational Programs I/O (NSID 2) ---------------------------------
** CSQ_CP_EXECUTE: CDW10[15:0] PIND, CDW10[31:16] MRS id to use, or 0xFFFF for
**   ranges passed inline; CDW11 number of inline ranges; CDW12-13 program
**   parameter 0 (64 bit); CDW14-15 program parameter 1 (64 bit). DPTR -> the
**   inline csq_mrange[] when CDW10[31:16] == 0xFFFF. The program's 64-bit
**   return value comes back in DW0-DW1 of the completion.
*/
#define CSQ_CP_EXECUTE 0x01

/* ---- Subsystem Local Memory I/O (NSID 3) ---------------------------------
** CSQ_SLM_COPY (Memory Copy, NVM -> SLM): CDW10-11 destination SLM byte
**   address; CDW12[7:0] number of ranges, 0-based; CDW12[11:8] descriptor
**   format (0: NVM LBA ranges csq_lba_range, 1: SLM byte ranges csq_mrange).
**   DPTR -> the descriptors. Source ranges are copied back to back.
** CSQ_SLM_READ (SLM -> host) / CSQ_SLM_WRITE (host -> SLM): CDW10-11 SLM byte
**   address, CDW12 byte count, DPTR -> host buffer.
** CSQ_SLM_FILL: CDW10-11 SLM byte address, CDW12 byte count, CDW13[7:0] byte.
** All SLM addresses and lengths are 4-byte aligned.
*/
#define CSQ_SLM_COPY  0x01
#define CSQ_SLM_READ  0x02
#define CSQ_SLM_FILL  0x04
#define CSQ_SLM_WRITE 0x05

/* Program types (Load Program CDW10[31:24]). */
#define CSQ_PTYPE_CSQ 0xC5 /* csq's own verifiable program format, device/format/program.h */

/* A memory range descriptor, 32 bytes (MRS entries, inline Execute ranges,
** SLM-format Memory Copy sources). */
typedef struct csq_mrange {
  uint32_t nsid; /* memory namespace: CSQ_NSID_SLM */
  uint32_t rsvd;
  uint64_t len;  /* bytes */
  uint64_t addr; /* starting byte in that namespace */
  uint64_t rsvd2;
} csq_mrange;
_Static_assert(sizeof(csq_mrange) == 32, "a memory range is 32 bytes");

/* An NVM LBA range for Memory Copy, 16 bytes. */
typedef struct csq_lba_range {
  uint32_t nsid; /* CSQ_NSID_NVM */
  uint32_t nlb;  /* number of logical blocks, 1-based here (0 is invalid) */
  uint64_t slba;
} csq_lba_range;
_Static_assert(sizeof(csq_lba_range) == 16, "an LBA range is 16 bytes");

/* Compute capabilities, stored at the start of nvme_id_ctrl.vs[] (1024 bytes).
** A device without csq compute leaves vs[] zero, so magic != CSQ_ID_MAGIC. */
#define CSQ_ID_MAGIC 0x31515343u /* "CSQ1" little endian */
typedef struct csq_id_vs {
  uint32_t magic;          /* CSQ_ID_MAGIC */
  uint16_t version;        /* command set version, 1 */
  uint16_t n_engines;      /* compute engines */
  uint64_t slm_bytes;      /* size of the SLM namespace */
  uint32_t max_programs;   /* program slots */
  uint32_t max_active;     /* programs that may be active at once */
  uint32_t max_prog_bytes; /* largest program accepted */
  uint32_t load_gran;      /* Load Program chunk granularity, bytes */
  uint32_t max_mrs;        /* memory range sets */
  uint32_t max_ranges;     /* ranges per MRS / per Execute */
  uint32_t n_queues;       /* I/O queue pairs available */
  uint32_t max_qdepth;     /* entries per queue */
  uint8_t ptypes[8];       /* program types understood, 0-terminated */
  uint64_t nvm_blocks;     /* capacity of the NVM namespace in LBAs */
} csq_id_vs;

/* ---- Status field (CQE status >> 1) --------------------------------------
** SCT 0 generic, SCT 1 command specific, SCT 2 media errors, SCT 7 vendor.
** csq_status() builds the 15-bit field; DNR (bit 14) set for errors that a
** retry will not fix.
*/
#define CSQ_SCT_GENERIC     0x0
#define CSQ_SCT_CMD         0x1
#define CSQ_SCT_MEDIA       0x2
#define CSQ_SCT_VENDOR      0x7
#define CSQ_DNR             0x4000
#define CSQ_STATUS(sct, sc) ((uint16_t)(((sct) << 8) | (sc)))

#define CSQ_SC_SUCCESS         CSQ_STATUS(0, 0x00)
#define CSQ_SC_INVALID_OPCODE  CSQ_STATUS(0, 0x01)
#define CSQ_SC_INVALID_FIELD   CSQ_STATUS(0, 0x02)
#define CSQ_SC_CID_CONFLICT    CSQ_STATUS(0, 0x03)
#define CSQ_SC_DATA_XFER_ERROR CSQ_STATUS(0, 0x04)
#define CSQ_SC_INTERNAL        CSQ_STATUS(0, 0x06)
#define CSQ_SC_ABORTED         CSQ_STATUS(0, 0x07)
#define CSQ_SC_INVALID_NS      CSQ_STATUS(0, 0x0B)
#define CSQ_SC_WRITE_PROTECTED CSQ_STATUS(0, 0x20) /* a write to a read-only namespace */
#define CSQ_SC_LBA_RANGE       CSQ_STATUS(0, 0x80)
#define CSQ_SC_CAPACITY        CSQ_STATUS(0, 0x81)
#define CSQ_SC_RESV_CONFLICT   CSQ_STATUS(0, 0x83)
/* Computational Programs, command specific (SCT 1). */
#define CSQ_SC_INVALID_PIND    CSQ_STATUS(1, 0xC0)
#define CSQ_SC_NO_PROGRAM      CSQ_STATUS(1, 0xC1)
#define CSQ_SC_PROGRAM_IN_USE  CSQ_STATUS(1, 0xC2)
#define CSQ_SC_INVALID_PROGRAM CSQ_STATUS(1, 0xC3) /* the verifier refused it */
#define CSQ_SC_PROGRAM_TOO_BIG CSQ_STATUS(1, 0xC4)
#define CSQ_SC_MAX_ACTIVE      CSQ_STATUS(1, 0xC5)
#define CSQ_SC_NOT_ACTIVATED   CSQ_STATUS(1, 0xC6)
#define CSQ_SC_INVALID_MRS     CSQ_STATUS(1, 0xC7)
#define CSQ_SC_MAX_RANGES      CSQ_STATUS(1, 0xC8)
#define CSQ_SC_SLM_RANGE       CSQ_STATUS(1, 0xC9) /* outside SLM or not 4-byte aligned */
#define CSQ_SC_PROGRAM_FAULT   CSQ_STATUS(1, 0xCA) /* a program failed at run time; DW0 = reason */
/* Media errors (SCT 2). */
#define CSQ_SC_WRITE_FAULT CSQ_STATUS(2, 0x80)
#define CSQ_SC_READ_ERROR  CSQ_STATUS(2, 0x81)
/* Host-side statuses never sent by a device, used by the driver. */
#define CSQ_SC_HOST_TIMEOUT CSQ_STATUS(7, 0xF0)
/* The connection to a device across a link (nvme-tcp) broke with the command
** outstanding: it may or may not have run, as after a timeout. */
#define CSQ_SC_HOST_LINK CSQ_STATUS(7, 0xF1)

static inline uint16_t csq_cqe_sf(const csq_cqe *c) {
  return (uint16_t)(c->status >> 1);
}
static inline int csq_cqe_ok(const csq_cqe *c) {
  return (csq_cqe_sf(c) & 0x7FF) == 0;
}

/* Human-readable name of a status field, for error messages. */
const char *csq_status_name(uint16_t sf);
/* Human-readable name of an opcode on a namespace (nsid 0 = admin). */
const char *csq_opcode_name(uint32_t nsid, uint8_t opcode);

#endif /* CSQ_DEVICE_CMD_H */
