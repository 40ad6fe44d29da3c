/*
** tests/unit/test_tcp_pdu.c - the NVMe/TCP PDU code both ends share
** (device/tcp/): CRC32C against known answers and the table version, every
** PDU type encoded and decoded back with and without digests, every
** malformed header refused with the right fatal error status, random bytes
** never accepted past their declared lengths, and the data length of each
** command (xfer.c).
*/
#include <string.h>

#include "device/format/le.h"
#include "device/tcp/crc32c.h"
#include "device/tcp/pdu.h"
#include "device/tcp/xfer.h"
#include "tests/unit/helpers.h"

/* Encode h with nData bytes, then run both decode steps as eRole. */
static int round_trip(const tcp_hdr *h, uint32_t nData, int bH, int bD, int eRole, tcp_hdr *pOut,
                      tcp_layout *pL) {
  uint8_t buf[TCP_MAX_HDR];
  const char *zWhy = NULL;
  uint32_t fei;
  uint32_t n = tcp_hdr_encode(h, nData, bH, bD, buf);
  int rc = tcp_ch_check(buf, eRole, bH, bD, 1u << 20, pL, &zWhy);
  if (rc) return rc;
  if (pL->nHdr != n) return -1;
  return tcp_hdr_decode(buf, pL, pOut, &fei, &zWhy);
}

static void test_crc(void) {
  /* the CRC32C check value, and RFC 3720's 32 zero bytes / 32 0xFF bytes */
  uint8_t z[32], f[32], big[4099];
  memset(z, 0, sizeof(z));
  memset(f, 0xFF, sizeof(f));
  CHECK(tcp_crc32c("123456789", 9) == 0xE3069283u);
  CHECK(tcp_crc32c(z, 32) == 0x8A9136AAu);
  CHECK(tcp_crc32c(f, 32) == 0x62A8AB43u);
  fill_pattern(big, sizeof(big), 7);
  for (size_t n = 0; n < sizeof(big); n += 1 + n / 3) {
    uint32_t a = tcp_crc32c_update(TCP_CRC32C_INIT, big + (n & 7), n - (n & 7));
    uint32_t b = tcp_crc32c_update_table(TCP_CRC32C_INIT, big + (n & 7), n - (n & 7));
    CHECK(a == b, "length %zu", n);
  }
  /* in pieces equals at once */
  uint32_t c = tcp_crc32c_update(TCP_CRC32C_INIT, big, 1000);
  c = tcp_crc32c_update(c, big + 1000, sizeof(big) - 1000);
  CHECK(tcp_crc32c_final(c) == tcp_crc32c(big, sizeof(big)));
}

static void test_round_trips(void) {
  for (int dg = 0; dg < 4; dg++) {
    int bH = dg & 1, bD = dg >> 1;
    tcp_hdr h, o;
    tcp_layout L;
    memset(&h, 0, sizeof(h));
    h.type = TCP_ICREQ;
    h.dgst = 3;
    h.maxVal = 7;
    CHECK_RC(round_trip(&h, 0, 0, 0, TCP_ROLE_CONTROLLER, &o, &L), 0);
    CHECK(o.dgst == 3 && o.maxVal == 7 && L.nHdr == 128 && L.nData == 0);
    h.type = TCP_ICRESP;
    h.maxVal = 131072;
    CHECK_RC(round_trip(&h, 0, 0, 0, TCP_ROLE_HOST, &o, &L), 0);
    CHECK(o.maxVal == 131072);

    memset(&h, 0, sizeof(h));
    h.type = TCP_CAPSULE_CMD;
    fill_pattern(h.aEntry, 64, 3);
    CHECK_RC(round_trip(&h, 0, bH, bD, TCP_ROLE_CONTROLLER, &o, &L), 0);
    CHECK(memcmp(o.aEntry, h.aEntry, 64) == 0 && L.nData == 0 && L.nDdgst == 0);
    CHECK_RC(round_trip(&h, 4096, bH, bD, TCP_ROLE_CONTROLLER, &o, &L), 0);
    CHECK(L.nData == 4096 && L.nDdgst == (bD ? 4u : 0u) && L.nPad == 0);
    CHECK(L.nHdr == 72u + (bH ? 4u : 0u));

    memset(&h, 0, sizeof(h));
    h.type = TCP_CAPSULE_RSP;
    fill_pattern(h.aEntry, 16, 4);
    CHECK_RC(round_trip(&h, 0, bH, bD, TCP_ROLE_HOST, &o, &L), 0);
    CHECK(memcmp(o.aEntry, h.aEntry, 16) == 0);

    static const uint8_t aData[] = {TCP_C2H_DATA, TCP_H2C_DATA, TCP_R2T};
    for (int k = 0; k < 3; k++) {
      memset(&h, 0, sizeof(h));
      h.type = aData[k];
      h.cccid = 0x1234;
      h.ttag = 0x77;
      h.offset = 8192;
      h.length = 512;
      if (h.type == TCP_C2H_DATA) h.flags = TCP_F_LAST | TCP_F_SUCCESS;
      uint32_t nData = h.type == TCP_R2T ? 0 : 512;
      int eRole = h.type == TCP_H2C_DATA ? TCP_ROLE_CONTROLLER : TCP_ROLE_HOST;
      CHECK_RC(round_trip(&h, nData, bH, bD, eRole, &o, &L), 0);
      CHECK(o.cccid == 0x1234 && o.offset == 8192 && o.length == 512, "type %d", h.type);
      CHECK(h.type == TCP_C2H_DATA ? o.ttag == 0 : o.ttag == 0x77);
      CHECK(h.type != TCP_C2H_DATA ||
            (o.flags & (TCP_F_LAST | TCP_F_SUCCESS)) == (TCP_F_LAST | TCP_F_SUCCESS));
    }
    memset(&h, 0, sizeof(h));
    h.type = TCP_C2H_TERMREQ;
    h.fes = TCP_FES_HDGST;
    h.fei = 9;
    CHECK_RC(round_trip(&h, 72, bH, bD, TCP_ROLE_HOST, &o, &L), 0);
    CHECK(o.fes == TCP_FES_HDGST && o.fei == 9 && L.nData == 72);
  }
}

/* A capsule with data, encoded with both digests, to corrupt. */
static uint32_t good_capsule(uint8_t *buf) {
  tcp_hdr h;
  memset(&h, 0, sizeof(h));
  h.type = TCP_CAPSULE_CMD;
  fill_pattern(h.aEntry, 64, 9);
  return tcp_hdr_encode(&h, 100, 1, 1, buf);
}

static int check_bytes(const uint8_t *buf, int eRole, int bH, int bD) {
  tcp_layout L;
  tcp_hdr o;
  const char *zWhy;
  uint32_t fei;
  int rc = tcp_ch_check(buf, eRole, bH, bD, TCP_INLINE_MAX, &L, &zWhy);
  if (rc) return rc;
  return tcp_hdr_decode(buf, &L, &o, &fei, &zWhy);
}

static void test_malformed(void) {
  uint8_t buf[TCP_MAX_HDR], b[TCP_MAX_HDR];
  good_capsule(buf);
  CHECK_RC(check_bytes(buf, TCP_ROLE_CONTROLLER, 1, 1), 0);
  /* the wrong role for the type, an unknown type */
  CHECK_RC(check_bytes(buf, TCP_ROLE_HOST, 1, 1), TCP_FES_HDR);
  for (int t = 0; t < 256; t++) {
    memcpy(b, buf, sizeof(b));
    b[0] = (uint8_t)t;
    int rc = check_bytes(b, TCP_ROLE_CONTROLLER, 1, 1);
    CHECK(t == TCP_CAPSULE_CMD ? rc == 0 : rc != 0, "type %d", t);
  }
  /* digests not as negotiated */
  CHECK_RC(check_bytes(buf, TCP_ROLE_CONTROLLER, 0, 1), TCP_FES_HDR);
  CHECK_RC(check_bytes(buf, TCP_ROLE_CONTROLLER, 1, 0), TCP_FES_HDR);
  /* every single-bit flip in the header proper fails the header digest, or an
  ** earlier check */
  for (int i = 8; i < 72; i++) {
    memcpy(b, buf, sizeof(b));
    b[i] ^= 0x10;
    CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 1, 1), TCP_FES_HDGST);
  }
  memcpy(b, buf, sizeof(b));
  b[73] ^= 1; /* the digest itself */
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 1, 1), TCP_FES_HDGST);
  /* wrong HLEN, PDO inside the header, PDO too far, PLEN too short or long */
  memcpy(b, buf, sizeof(b));
  b[2] = 24;
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 1, 1), TCP_FES_HDR);
  memcpy(b, buf, sizeof(b));
  b[3] = 40;
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 1, 1), TCP_FES_HDR);
  memcpy(b, buf, sizeof(b));
  b[3] = 250;
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 1, 1), TCP_FES_HDR);
  memcpy(b, buf, sizeof(b));
  csq_put_le32(b + 4, 76 + 4);
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 1, 1), TCP_FES_HDR);
  memcpy(b, buf, sizeof(b));
  csq_put_le32(b + 4, 0xFFFFFFF0u);
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 1, 1), TCP_FES_LIMIT);
  /* reserved flags, LAST on a capsule */
  memcpy(b, buf, sizeof(b));
  b[1] |= 0x80;
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 1, 1), TCP_FES_HDR);
  memcpy(b, buf, sizeof(b));
  b[1] |= TCP_F_LAST;
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 1, 1), TCP_FES_HDR);
  /* a capsule without data but with a PLEN that says otherwise */
  tcp_hdr h;
  memset(&h, 0, sizeof(h));
  h.type = TCP_CAPSULE_CMD;
  tcp_hdr_encode(&h, 0, 0, 0, b);
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 0, 0), 0);
  csq_put_le32(b + 4, 73);
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 0, 0), TCP_FES_HDR);
  /* ICReq: flags, PLEN, version, digest bits */
  memset(&h, 0, sizeof(h));
  h.type = TCP_ICREQ;
  tcp_hdr_encode(&h, 0, 0, 0, buf);
  CHECK_RC(check_bytes(buf, TCP_ROLE_CONTROLLER, 0, 0), 0);
  memcpy(b, buf, sizeof(b));
  b[1] = 1;
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 0, 0), TCP_FES_HDR);
  memcpy(b, buf, sizeof(b));
  csq_put_le32(b + 4, 132);
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 0, 0), TCP_FES_HDR);
  memcpy(b, buf, sizeof(b));
  b[8] = 1;
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 0, 0), TCP_FES_PARAMETER);
  memcpy(b, buf, sizeof(b));
  b[11] = 4;
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 0, 0), TCP_FES_HDR);
  /* data PDUs: DATAL that disagrees, no data, an R2T with data or for nothing */
  memset(&h, 0, sizeof(h));
  h.type = TCP_H2C_DATA;
  h.length = 64;
  tcp_hdr_encode(&h, 64, 0, 0, buf);
  CHECK_RC(check_bytes(buf, TCP_ROLE_CONTROLLER, 0, 0), 0);
  memcpy(b, buf, sizeof(b));
  csq_put_le32(b + 16, 65);
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 0, 0), TCP_FES_HDR);
  tcp_hdr_encode(&h, 0, 0, 0, b);
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 0, 0), TCP_FES_HDR);
  memcpy(b, buf, sizeof(b));
  csq_put_le32(b + 12, 0xFFFFFF00u);
  CHECK_RC(check_bytes(b, TCP_ROLE_CONTROLLER, 0, 0), TCP_FES_RANGE);
  h.type = TCP_R2T;
  h.length = 0;
  tcp_hdr_encode(&h, 0, 0, 0, b);
  CHECK_RC(check_bytes(b, TCP_ROLE_HOST, 0, 0), TCP_FES_HDR);
  h.length = 10;
  tcp_hdr_encode(&h, 0, 0, 0, b);
  CHECK_RC(check_bytes(b, TCP_ROLE_HOST, 0, 0), 0);
  b[3] = 24;
  csq_put_le32(b + 4, 40);
  CHECK_RC(check_bytes(b, TCP_ROLE_HOST, 0, 0), TCP_FES_HDR);
  /* a TermReq longer than the header it may quote */
  memset(&h, 0, sizeof(h));
  h.type = TCP_C2H_TERMREQ;
  tcp_hdr_encode(&h, 0, 0, 0, b);
  csq_put_le32(b + 4, 24 + 129);
  CHECK_RC(check_bytes(b, TCP_ROLE_HOST, 0, 0), TCP_FES_HDR);

  /* random headers: whatever is accepted stays within its declared lengths */
  for (int i = 0; i < 200000; i++) {
    tcp_layout L;
    const char *zWhy;
    for (int k = 0; k < (int)sizeof(b); k += 8) {
      uint64_t r = rnd();
      memcpy(b + k, &r, sizeof(b) - k < 8 ? sizeof(b) - k : 8);
    }
    b[0] &= 0x0F;
    b[2] = (uint8_t)tcp_hlen(b[0]);
    int bH = i & 1, bD = (i >> 1) & 1;
    if (tcp_ch_check(b, i & 4 ? TCP_ROLE_HOST : TCP_ROLE_CONTROLLER, bH, bD, TCP_INLINE_MAX, &L,
                     &zWhy) == 0) {
      CHECK(L.nHdr <= TCP_MAX_HDR && L.nData <= TCP_INLINE_MAX + TCP_TERM_MAX);
      CHECK(L.nHdr + L.nPad + L.nData + L.nDdgst == L.plen, "type %d", b[0]);
    }
  }
}

static void test_xfer(void) {
  csq_sqe s;
  uint32_t n;
  memset(&s, 0, sizeof(s));
  s.opcode = CSQ_NVM_READ;
  s.nsid = CSQ_NSID_NVM;
  s.cdw12 = 3;
  CHECK(tcp_cmd_xfer(&s, 0, &n) == TCP_XFER_C2H && n == 4 * 4096);
  s.opcode = CSQ_NVM_WRITE;
  CHECK(tcp_cmd_xfer(&s, 0, &n) == TCP_XFER_H2C && n == 4 * 4096);
  s.opcode = CSQ_NVM_FLUSH;
  CHECK(tcp_cmd_xfer(&s, 0, &n) == TCP_XFER_NONE && n == 0);
  s.nsid = CSQ_NSID_SLM;
  s.opcode = CSQ_SLM_READ;
  s.cdw12 = 1000;
  CHECK(tcp_cmd_xfer(&s, 0, &n) == TCP_XFER_C2H && n == 1000);
  s.opcode = CSQ_SLM_COPY;
  s.cdw12 = 2 | 1 << 8;
  CHECK(tcp_cmd_xfer(&s, 0, &n) == TCP_XFER_H2C && n == 3 * 32);
  s.cdw12 = 2;
  CHECK(tcp_cmd_xfer(&s, 0, &n) == TCP_XFER_H2C && n == 3 * 16);
  s.nsid = CSQ_NSID_CP;
  s.opcode = CSQ_CP_EXECUTE;
  s.cdw10 = 0xFFFFu << 16;
  s.cdw11 = 2;
  CHECK(tcp_cmd_xfer(&s, 0, &n) == TCP_XFER_H2C && n == 64);
  s.cdw10 = 5u << 16;
  CHECK(tcp_cmd_xfer(&s, 0, &n) == TCP_XFER_NONE);
  memset(&s, 0, sizeof(s));
  s.opcode = CSQ_ADM_IDENTIFY;
  CHECK(tcp_cmd_xfer(&s, 1, &n) == TCP_XFER_C2H && n == 4096);
  s.opcode = CSQ_ADM_MRS_MGMT;
  s.cdw11 = 0xFFFFFFFFu;
  CHECK(tcp_cmd_xfer(&s, 1, &n) == -1);
  s.opcode = TCP_ADM_GET_LOG;
  s.cdw10 = 0x70 | 255u << 16;
  s.cdw11 = 0;
  CHECK(tcp_cmd_xfer(&s, 1, &n) == TCP_XFER_C2H && n == 1024);
  CHECK(tcp_cmd_xfer(&s, 0, &n) == TCP_XFER_NONE); /* 02h on an I/O queue, no nsid */
  s.opcode = TCP_OPC_FABRICS;
  s.nsid = TCP_FCTYPE_CONN;
  CHECK(tcp_cmd_xfer(&s, 1, &n) == TCP_XFER_H2C && n == 1024);
  tcp_sgl_set(&s, TCP_SGL_TRANSPORT, 0, 777);
  CHECK(tcp_sgl_len(&s) == 777 && tcp_sgl_type(&s) == TCP_SGL_TRANSPORT);
  CHECK((s.flags & 0xC0) == TCP_PSDT_SGL);
}

int main(void) {
  test_crc();
  test_round_trips();
  test_malformed();
  test_xfer();
  return test_done("tcp_pdu");
}
