"""tests/fuzz/gen_tcpinit_seeds.py - writes the seed corpus of fuzz_tcpinit.c
(tests/fuzz/corpus/tcpinit/): what a well-behaved target sends for the five
commands the harness has in flight, with each choice of digests and of the
socket path (io_uring, or send/recv: byte 0 bit 2).

    python3 tests/fuzz/gen_tcpinit_seeds.py
"""
import os
import struct


def crc32c(b):
    crc = 0xFFFFFFFF
    for x in b:
        crc ^= x
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def pdu(typ, hdr, data=b"", flags=0, hd=False, dd=False):
    hlen = 8 + len(hdr)
    hlen_d = hlen + (4 if hd else 0)
    pdo = hlen_d if data else 0
    plen = hlen_d + len(data) + (4 if (dd and data) else 0)
    flags |= (1 if hd else 0) | (2 if (dd and data) else 0)
    b = struct.pack("<BBBBI", typ, flags, hlen, pdo, plen) + hdr
    if hd:
        b += struct.pack("<I", crc32c(b))
    if data:
        b += data + (struct.pack("<I", crc32c(data)) if dd else b"")
    return b


def resp(cid, status=0, **k):
    return pdu(5, struct.pack("<IIHHHH", 0, 0, 0, 1, cid, status << 1), **k)


def c2h(cid, off, data, flags=0, **k):
    return pdu(7, struct.pack("<HHIII", cid, 0, off, len(data), 0), data, flags=flags, **k)


def r2t(cid, ttag, off, n, **k):
    return pdu(9, struct.pack("<HHIII", cid, ttag, off, n, 0), **k)


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "tcpinit")
    os.makedirs(out, exist_ok=True)
    for mode in range(8):
        k = {"hd": bool(mode & 1), "dd": bool(mode & 2)}
        s = bytes([mode])
        s += c2h(0, 0, bytes(range(256)) * 16, **k) + c2h(0, 4096, bytes(4096), flags=4, **k)
        s += resp(0, **k)
        s += r2t(1, 7, 0, 12288, **k) + resp(1, **k)
        s += c2h(2, 0, b"\x01" * 4096, flags=4 | 8, **k)
        s += resp(3, **k) + resp(4, status=0x1C6, **k)
        open(os.path.join(out, "all-%d" % mode), "wb").write(s)
    # a C2HTermReq, and a second ICResp
    open(os.path.join(out, "termreq"), "wb").write(
        b"\x00" + struct.pack("<BBBBIHI", 3, 0, 24, 0, 24 + 8, 1, 0) + bytes(14) + bytes(8))
    open(os.path.join(out, "icresp"), "wb").write(
        b"\x00" + struct.pack("<BBBBIHBBI", 1, 0, 128, 0, 128, 0, 0, 0, 131072) + bytes(112))


if __name__ == "__main__":
    main()
