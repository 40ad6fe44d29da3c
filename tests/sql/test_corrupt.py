"""Corruption: damage a device image at random - flipped bits, a zeroed 4 KiB
block, random bytes, truncation - aimed at the superblocks (blocks 0-1), the
catalog, column chunks, delete bitmaps and anywhere at all, then open it in a
worker process and run a fixed set of queries. Each query must return exactly
the answer of the undamaged image or raise sqlite3.Error naming the damage
(the block, and the table when a table's data is hit); the worker must never
die of a signal and never hang. The superblock rule of device/store/FORMAT.md
("the valid copy with the higher generation wins; both copies carry the same
generation after every completed commit, so one damaged copy never rolls a
commit back") is tested on purpose-built images.

Run as a program (`test_corrupt.py worker`) it is the query worker: one
image path per line on stdin, one JSON line of results per image on stdout.
"""
import json
import os
import random
import select
import shutil
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import connect, tmpdir, EXT  # noqa: E402

BLK = 4096
ROUNDS = 1000
PER_IMAGE_TIMEOUT = 15.0

QUERIES = [
    "SELECT count(*), sum(a), total(c) FROM t",
    "SELECT a, b, c FROM t WHERE a % 97 = 3 ORDER BY rowid",
    "SELECT count(*), sum(length(b)) FROM t WHERE a BETWEEN 1000 AND 1600",
    "SELECT b, count(*) FROM t GROUP BY b ORDER BY b",
    "SELECT rowid, x, typeof(x), y FROM u WHERE rowid % 50 = 7 ORDER BY rowid",
    "SELECT count(*) FROM u WHERE x > 300",
    "SELECT count(*), count(s), sum(n), max(s) FROM w",
    "SELECT n, s FROM w WHERE s = 'cat-7' ORDER BY rowid",
    "SELECT count(*) FROM t, u WHERE t.a = u.rowid",
]


# ---- the image and its layout ---------------------------------------------------

def build(d):
    """A database with three tables over several commits (so that old catalogs,
    freed extents and delete bitmaps are on the image)."""
    db = os.path.join(d, "base.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER, b TEXT, c REAL, rowgroup=500, pushdown=always)")
    con.execute("CREATE VIRTUAL TABLE u USING csq(x, y BLOB, rowgroup=300)")
    con.execute("CREATE VIRTUAL TABLE w USING csq(n INTEGER, s TEXT, rowgroup=1000, pushdown=always)")
    rnd = random.Random(5)
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES(?,?,?)", [(i, "s%d" % (i % 37), i / 3) for i in range(3000)])
    con.executemany("INSERT INTO u VALUES(?,?)",
                    [(i if i % 3 else ("txt%d" % i if i % 2 else i * 0.25), bytes([i % 256]) * (i % 9))
                     for i in range(900)])
    con.execute("COMMIT")
    con.execute("DELETE FROM t WHERE a % 10 = 1")
    con.execute("UPDATE t SET b = 'upd' WHERE a % 101 = 0")
    con.execute("BEGIN")
    con.executemany("INSERT INTO w VALUES(?,?)",
                    [(rnd.randrange(100), None if i % 11 == 0 else "cat-%d" % rnd.randrange(12))
                     for i in range(2500)])
    con.execute("COMMIT")
    con.execute("DELETE FROM u WHERE rowid % 13 = 0")
    con.execute("INSERT INTO t VALUES(99999, 'last', 1.5)")
    con.close()
    return db


def layout(img):
    """Superblock and catalog of an image, parsed as in device/store/FORMAT.md."""
    gen, cat_lba, cat_blocks, cat_bytes = struct.unpack_from("<QQIxxxxQ", img, 16)
    hwm = struct.unpack_from("<Q", img, 56)[0]
    p = img[cat_lba * BLK: cat_lba * BLK + cat_bytes]
    pos = [8]

    def get(fmt):
        v = struct.unpack_from("<" + fmt, p, pos[0])
        pos[0] += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        n = get("H")
        pos[0] += n
        return p[pos[0] - n: pos[0]].decode()

    assert p[:8] == b"CSQCAT01"
    get("I")
    ntab = get("I")
    get("Q")
    get("I")
    tabs = {}
    for _ in range(ntab):
        get("I")
        name = string()
        cols = []
        for _ in range(get("I")):
            cols.append(string())
            string()
            get("B")
        get("Q")
        rgs = []
        for _ in range(get("I")):
            lba, blocks, _rows, _deleted = get("Q"), get("I"), get("I"), get("I")
            dlba, dbytes, _dx = get("Q"), get("I"), get("Q")
            chunks = []
            for _ in range(get("I")):
                off, ln = get("I"), get("I")
                xpos = pos[0]  # where the catalog keeps this chunk's XXH3
                pos[0] += 8 + 1 + (4 + 4 + 1 + 1 + 1 + 1 + 1 + 8 + 8 + 8 + 8 + 24 + 24)
                chunks.append((off, ln, xpos))
            rgs.append(dict(lba=lba, blocks=blocks, dlba=dlba, dbytes=dbytes, chunks=chunks))
        tabs[name] = dict(cols=cols, rgs=rgs)
    assert pos[0] == len(p), "catalog parse ends at %d of %d" % (pos[0], len(p))
    return dict(gen=gen, cat_lba=cat_lba, cat_blocks=cat_blocks, cat_bytes=cat_bytes, hwm=hwm, tabs=tabs)


# ---- damage -----------------------------------------------------------------------

def damage(img, lay, rnd):
    """Damage a copy of img; returns (bytes, description, kind, table or None)."""
    b = bytearray(img)
    target = rnd.choice(["sb0", "sb1", "sb0", "sb1", "sbboth", "catalog", "catalog", "chunk", "chunk",
                         "chunk", "chunk", "delbitmap", "random", "random", "zeroblock", "truncate"])
    table = None
    if target in ("sb0", "sb1"):
        lo, hi = (0, BLK) if target == "sb0" else (BLK, 2 * BLK)
    elif target == "sbboth":
        lo, hi = 0, 2 * BLK
    elif target == "catalog":
        lo = lay["cat_lba"] * BLK
        hi = lo + lay["cat_bytes"]
    elif target in ("chunk", "delbitmap"):
        table = rnd.choice(sorted(lay["tabs"]))
        rgs = lay["tabs"][table]["rgs"]
        if target == "delbitmap":
            rgs = [r for r in rgs if r["dlba"]]
            if not rgs:
                target, table = "chunk", rnd.choice(sorted(lay["tabs"]))
                rgs = lay["tabs"][table]["rgs"]
        rg = rnd.choice(rgs)
        if target == "delbitmap":
            lo = rg["dlba"] * BLK
            hi = lo + rg["dbytes"]
        else:
            off, ln, _ = rnd.choice(rg["chunks"])
            lo = rg["lba"] * BLK + off
            hi = lo + ln
    elif target == "truncate":
        n = rnd.choice([0, rnd.randrange(1, 2 * BLK), rnd.randrange(2 * BLK, len(b)),
                        rnd.randrange(len(b) // BLK) * BLK])
        return bytes(b[:n]), "truncated to %d bytes" % n, target, None
    else:
        lo, hi = 0, len(b)
    mode = "zero" if target == "zeroblock" else rnd.choice(["flip", "flip", "flip", "zero", "bytes"])
    if mode == "flip":
        k = rnd.choice([1, 1, 2, 8])
        where = []
        for _ in range(k):
            i = rnd.randrange(lo, hi)
            b[i] ^= 1 << rnd.randrange(8)
            where.append(i)
        desc = "%s: flipped bits at %s" % (target, where)
    elif mode == "zero":
        blk = rnd.randrange(lo // BLK, (hi - 1) // BLK + 1)
        b[blk * BLK:(blk + 1) * BLK] = bytes(BLK)
        desc = "%s: zeroed block %d" % (target, blk)
        if target == "sbboth":  # both copies
            b[0:2 * BLK] = bytes(2 * BLK)
            desc = "sbboth: zeroed blocks 0-1"
    else:
        i = rnd.randrange(lo, hi)
        n = min(hi - i, rnd.randrange(1, 64))
        b[i:i + n] = bytes(rnd.randrange(256) for _ in range(n))
        desc = "%s: random bytes at %d..%d" % (target, i, i + n)
    if target == "sbboth" and mode == "flip":
        # make sure both copies are hit
        b[rnd.randrange(0, BLK)] ^= 0x40
        b[rnd.randrange(BLK, 2 * BLK)] ^= 0x40
    return bytes(b), desc, target, table


def message_ok(msg, desc, target, table, nbytes):
    """Does the error name the damage?"""
    m = msg.lower()
    if "superblock" in m and "block" in m:
        return True
    if "catalog" in m and "block" in m:
        return True
    if "table '" in m and "block" in m:
        if target in ("chunk", "delbitmap") and ("table '%s'" % table) not in m:
            return False
        return True
    if "block" in m and ("damaged" in m or "corrupt" in m or "beyond" in m or "outside" in m
                         or "short" in m or "truncat" in m or "read error" in m or "lba" in m):
        return True
    # both superblocks gone: the image reads as empty / foreign, refused without writing
    if ("empty image" in m or "not a csq device image" in m) and (
            target == "sbboth" or nbytes < 2 * BLK or "zeroed block 0" in desc or "zeroed block 1" in desc):
        return True
    return False


# ---- forged damage: checksums recomputed, so only validation stands in the way ----

def xxh3(data):
    import ctypes
    lib = ctypes.CDLL("libxxhash.so.0")
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib.XXH3_64bits(bytes(data), len(data))


def reseal(b, lay):
    """Recompute the catalog checksum in both superblocks and their own checksums."""
    lo = lay["cat_lba"] * BLK
    cx = xxh3(b[lo:lo + lay["cat_bytes"]])
    for s in (0, BLK):
        struct.pack_into("<Q", b, s + 48, cx)
        struct.pack_into("<Q", b, s + 4088, xxh3(b[s:s + 4088]))


def forge(img, lay, rnd):
    """Damage the catalog or a chunk and make every checksum agree again."""
    b = bytearray(img)
    lo = lay["cat_lba"] * BLK
    if rnd.random() < 0.4:
        for _ in range(rnd.choice([1, 1, 2, 4])):
            i = lo + rnd.randrange(8, lay["cat_bytes"])
            if rnd.random() < 0.5:
                b[i] ^= 1 << rnd.randrange(8)
            else:
                b[i] = rnd.choice([0, 0xFF, 0x7F, 0x80, 1, rnd.randrange(256)])
        reseal(b, lay)
        return bytes(b), "forged catalog"
    table = rnd.choice(sorted(lay["tabs"]))
    rg = rnd.choice(lay["tabs"][table]["rgs"])
    off, ln, xpos = rnd.choice(rg["chunks"])
    c0 = rg["lba"] * BLK + off
    for _ in range(rnd.choice([1, 1, 2, 3])):
        i = c0 + rnd.choice([12, 12, 56]) + rnd.randrange(0, ln - 12 if ln > 56 else 44)
        i = min(i, c0 + ln - 1)
        if rnd.random() < 0.5:
            b[i] ^= 1 << rnd.randrange(8)
        else:
            b[i] = rnd.choice([0, 0xFF, 0x7F, 0x80, 1, rnd.randrange(256)])
    struct.pack_into("<Q", b, c0 + 4, xxh3(b[c0 + 12:c0 + ln]))  # the chunk's own checksum
    struct.pack_into("<Q", b, lo + xpos, xxh3(b[c0:c0 + ln]))     # the catalog's
    reseal(b, lay)
    return bytes(b), "forged chunk of %s at block %d" % (table, c0 // BLK)


# ---- the worker process --------------------------------------------------------------

def run_queries(db):
    out = []
    try:
        con = connect(db)
    except Exception as e:  # noqa: BLE001
        return [["err", "connect: %s" % e]] * len(QUERIES)
    for q in QUERIES:
        try:
            out.append(["ok", repr(con.execute(q).fetchall())])
        except Exception as e:  # noqa: BLE001 - any sqlite3.Error is acceptable, others are not
            out.append(["err" if isinstance(e, __import__("sqlite3").Error) else "exc", str(e)])
    con.close()
    return out


def worker():
    for line in sys.stdin:
        db = line.strip()
        if not db:
            continue
        res = run_queries(db)
        os.write(1, (json.dumps(res) + "\n").encode())


class Worker:
    def __init__(self):
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=dict(os.environ, CSQ_EXT=EXT))
        self.buf = b""
        self.n = 0

    def ask(self, db, timeout):
        """Results for one image; ('died', rc, stderr) or ('hung',) on failure."""
        self.n += 1
        self.p.stdin.write((db + "\n").encode())
        self.p.stdin.flush()
        fd = self.p.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return ("hung",)
            r, _, _ = select.select([fd], [], [], left)
            if r:
                data = os.read(fd, 1 << 20)
                if not data:
                    rc = self.p.wait()
                    return ("died", rc, self.p.stderr.read().decode(errors="replace")[-3000:])
                self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return ("ok", json.loads(line))

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            try:
                f.close()
            except Exception:  # noqa: BLE001
                pass


# ---- tests --------------------------------------------------------------------------

def test_random_damage_never_wrong_never_crash():
    d = tmpdir()
    base = build(d)
    img = open(base + "-csd", "rb").read()
    lay = layout(img)
    assert img[16:24] == img[BLK + 16:BLK + 24], "superblock copies carry different generations"
    clean = run_queries(base)
    for (kind, v), q in zip(clean, QUERIES):
        assert kind == "ok", "undamaged image fails %s: %s" % (q, v)
    rnd = random.Random(77)
    w = Worker()
    t0 = time.monotonic()
    failures = []
    stats = {}
    for i in range(ROUNDS):
        bad, desc, target, table = damage(img, lay, rnd)
        sub = os.path.join(d, "r%d" % i)
        os.mkdir(sub)
        db = os.path.join(sub, "x.db")
        shutil.copyfile(base, db)
        with open(db + "-csd", "wb") as f:
            f.write(bad)
        got = w.ask(db, PER_IMAGE_TIMEOUT)
        if got[0] != "ok":
            failures.append("round %d (%s): worker %s" % (i, desc, got))
            w.close()
            w = Worker()
        else:
            nerr = 0
            for (kind, v), (_, want), q in zip(got[1], clean, QUERIES):
                if kind == "ok":
                    if v != want:
                        failures.append("round %d (%s): WRONG ANSWER to %s:\n  got  %s\n  want %s"
                                        % (i, desc, q, v[:300], want[:300]))
                elif kind == "exc":
                    failures.append("round %d (%s): non-sqlite exception on %s: %s" % (i, desc, q, v))
                else:
                    nerr += 1
                    if not message_ok(v, desc, target, table, len(bad)):
                        failures.append("round %d (%s): error does not name the damage, on %s: %s"
                                        % (i, desc, q, v))
            s = stats.setdefault(target, [0, 0])
            s[0] += 1
            s[1] += nerr > 0
        shutil.rmtree(sub, ignore_errors=True)
        if w.n >= 250:  # keep the worker's memory bounded
            w.close()
            w = Worker()
        if len(failures) > 40:
            break
    w.close()
    took = time.monotonic() - t0
    print("    %d damaged images in %.1f s; per target [images, with errors]: %s" % (i + 1, took, stats))
    assert not failures, "%d failures:\n%s" % (len(failures), "\n".join(failures[:40]))


def test_forged_damage_never_crashes():
    """Checksums recomputed after the damage: the decoders' validation is all
    that stands between the bytes and the executor. Answers may differ (the
    image says something else now); the process must not die or hang, and
    every failure must be an sqlite3.Error."""
    d = tmpdir()
    base = build(d)
    img = open(base + "-csd", "rb").read()
    lay = layout(img)
    chk = bytearray(img)
    reseal(chk, lay)
    assert bytes(chk) == img, "reseal() does not reproduce the image's own checksums"
    rnd = random.Random(99)
    w = Worker()
    failures = []
    t0 = time.monotonic()
    nerr = 0
    for i in range(400):
        bad, desc = forge(img, lay, rnd)
        sub = os.path.join(d, "f%d" % i)
        os.mkdir(sub)
        db = os.path.join(sub, "x.db")
        shutil.copyfile(base, db)
        with open(db + "-csd", "wb") as f:
            f.write(bad)
        got = w.ask(db, PER_IMAGE_TIMEOUT)
        if got[0] != "ok":
            keep = os.path.join(d, "crash%d.db" % i)
            shutil.copyfile(db, keep)
            shutil.copyfile(db + "-csd", keep + "-csd")
            failures.append("round %d (%s): worker %s (image kept: %s)" % (i, desc, got[:2], keep))
            w.close()
            w = Worker()
        else:
            for (kind, v), q in zip(got[1], QUERIES):
                if kind == "exc":
                    failures.append("round %d (%s): non-sqlite exception on %s: %s" % (i, desc, q, v))
                nerr += kind == "err"
        shutil.rmtree(sub, ignore_errors=True)
        if w.n >= 250:
            w.close()
            w = Worker()
        if len(failures) > 20:
            break
    w.close()
    print("    %d forged images in %.1f s, %d query errors" % (i + 1, time.monotonic() - t0, nerr))
    assert not failures, "%d failures:\n%s" % (len(failures), "\n".join(failures[:20]))


def test_superblock_generation_rule():
    """Copies A/B at generations N and N-1 in either order open at N (the
    higher valid copy wins); a commit leaves both copies at the same
    generation, so damaging either one afterwards still opens at N."""
    d = tmpdir()
    db = os.path.join(d, "g.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER)")
    con.execute("INSERT INTO t VALUES(1)")
    con.close()
    old = open(db + "-csd", "rb").read()
    con = connect(db)
    con.execute("INSERT INTO t VALUES(2)")
    con.close()
    new = open(db + "-csd", "rb").read()
    g_old = struct.unpack_from("<Q", old, 16)[0]
    g_new = struct.unpack_from("<Q", new, 16)[0]
    assert g_new == g_old + 1, (g_old, g_new)
    for img in (old, new):
        assert img[:BLK] == img[BLK:2 * BLK], "the two superblock copies differ after a commit"
    sb_old, sb_new = old[:BLK], new[:BLK]
    body = new[2 * BLK:]
    damaged_b = sb_new[:100] + bytes([sb_new[100] ^ 1]) + sb_new[101:]
    cases = [
        ("A new, B old (crash between the copies)", sb_new + sb_old, [(1,), (2,)], g_new),
        ("A old, B new", sb_old + sb_new, [(1,), (2,)], g_new),
        ("A damaged, B new", bytes(BLK) + sb_new, [(1,), (2,)], g_new),
        ("A new, B damaged", sb_new + damaged_b, [(1,), (2,)], g_new),
        ("A new, B zero", sb_new + bytes(BLK), [(1,), (2,)], g_new),
        ("A zero, B new", bytes(BLK) + sb_new, [(1,), (2,)], g_new),
        # an incomplete commit: only copy A carried it, and A is damaged -> the old
        # generation is the last complete one, and its catalog is intact
        ("A new damaged, B old", damaged_b + sb_old, [(1,)], g_old),
    ]
    for i, (what, sbs, want, gen) in enumerate(cases):
        sub = os.path.join(d, "c%d" % i)
        os.mkdir(sub)
        x = os.path.join(sub, "g.db")
        shutil.copyfile(db, x)
        with open(x + "-csd", "wb") as f:
            f.write(sbs + body)
        c = connect(x)
        got = c.execute("SELECT a FROM t ORDER BY a").fetchall()
        assert got == want, "%s: got %r, want %r" % (what, got, want)
        # and it keeps working: a commit on it brings both copies to one generation
        c.execute("INSERT INTO t VALUES(3)")
        c.close()
        after = open(x + "-csd", "rb").read()
        assert after[:BLK] == after[BLK:2 * BLK], "%s: copies differ after the next commit" % what
        g = struct.unpack_from("<Q", after, 16)[0]
        assert g == gen + 1, "%s: opened at generation %d, next commit wrote %d" % (what, gen, g)


def test_damaged_catalog_never_falls_back():
    """A damaged current catalog is an error, never the previous generation's
    catalog (which is still on the image) silently read instead."""
    d = tmpdir()
    db = os.path.join(d, "k.db")
    con = connect(db)
    con.execute("CREATE VIRTUAL TABLE t USING csq(a INTEGER)")
    for i in range(5):
        con.execute("INSERT INTO t VALUES(?)", (i,))
    con.close()
    img = bytearray(open(db + "-csd", "rb").read())
    lay = layout(bytes(img))
    img[lay["cat_lba"] * BLK + 20] ^= 4
    open(db + "-csd", "wb").write(img)
    con = connect(db)
    try:
        r = con.execute("SELECT count(*) FROM t").fetchall()
    except Exception as e:  # noqa: BLE001
        assert "catalog" in str(e) and "block" in str(e), str(e)
    else:
        raise AssertionError("damaged catalog returned %r" % r)


if __name__ == "__main__" and len(sys.argv) >= 2 and sys.argv[1] == "worker":
    worker()
