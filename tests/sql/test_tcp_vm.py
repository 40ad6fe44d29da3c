"""tests/sql/test_tcp_vm.py - csq and the Linux kernel on the two ends of
NVMe/TCP, in a QEMU guest (../shared/tools/qemu-nvme-run --net):

- the guest kernel's nvme-tcp initiator connects to build/csq-target on the
  host (10.0.2.2); build/tests/tcp_vm_guest (static: SQLite and csq) runs
  queries on the namespace node the kernel made, so csq's program, SLM and
  Execute commands travel the kernel's NVMe stack to the target's device;
  the answers equal native SQLite's on the host for the same rows;
- csq's initiator connects to the guest kernel's nvmet-tcp target (the QEMU
  namespace, through --hostfwd): reads and writes work, compute commands are
  refused as by any plain SSD, and a csq table there (a local file lock
  standing in for the reservations nvmet lacks) answers the same queries as
  native SQLite, its programs run by the host.

Skips when qemu-nvme-run is missing or QEMU cannot start (its exit 125)."""
import os
import select
import sqlite3
import subprocess
import time

from harness import Skip, connect, same_rows, tmpdir
from test_tcp import BUILD, NQN, Target, free_port, qemu_runner

GUEST = os.path.join(BUILD, "tests", "tcp_vm_guest")
PLAIN_HOST = os.path.join(BUILD, "tests", "tcp_plain_host")

FILL = ("WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < 20000) "
        "INSERT INTO {t} SELECT x, (x * 7919) % 1000 - 500, "
        "CASE WHEN x % 11 = 0 THEN NULL ELSE (x % 1000) * 0.25 END, 'k' || (x % 17) FROM s")
QUERIES = [
    "SELECT count(*), sum(a), min(b), max(b) FROM {t} WHERE a > 10",
    "SELECT c, count(*), sum(a), sum(b), min(a) FROM {t} GROUP BY c ORDER BY c",
    "SELECT id, a, b, c FROM {t} WHERE a BETWEEN 20 AND 25 AND c = 'k3' ORDER BY id",
    "SELECT count(*), sum(id) FROM {t} WHERE c LIKE 'k1%' AND b IS NULL",
    "SELECT id, b FROM {t} WHERE b > 240 ORDER BY b DESC, id LIMIT 7",
]


def run_vm(args, timeout=240):
    """qemu-nvme-run ARGS; (exit status, output). Skip when QEMU cannot start."""
    p = subprocess.run([qemu_runner(), "--net", "--timeout", str(timeout)] + args,
                       capture_output=True, text=True, timeout=timeout + 60, env=vm_env())
    out = p.stdout + p.stderr
    if p.returncode == 125:
        raise Skip("QEMU could not start: " + (out.strip().splitlines() or ["?"])[-1][:200])
    return p.returncode, out


def vm_env(**extra):
    """The environment for QEMU: without the sanitizers make sanitize preloads
    for csq.so (QEMU is not csq's code, and slower with them)."""
    env = dict(os.environ, **extra)
    env.pop("LD_PRELOAD", None)
    return env


def as_text(con, rows):
    """Rows as the guest prints them: SQLite's text of each value."""
    out = []
    for r in rows:
        cells = []
        for v in r:
            cells.append("NULL" if v is None else con.execute("SELECT CAST(? AS TEXT)", (v,)).fetchone()[0])
        out.append(",".join(cells))
    return "|".join(out)


def test_kernel_initiator_runs_csq_queries_on_csq_target():
    if not os.access(GUEST, os.X_OK):
        raise Skip("no %s (make %s)" % (GUEST, os.path.relpath(GUEST)))
    qemu_runner()
    d = tmpdir()
    tg = Target(d, ["vm.csd"])
    try:
        rc, out = run_vm([GUEST, "10.0.2.2", str(tg.port), NQN + "vm.csd", FILL] + QUERIES)
        assert rc == 0 and "GUEST-DONE" in out, out[-4000:]
    finally:
        tg.stop()
    lines = {}
    for ln in out.splitlines():
        tag, _, rest = ln.strip().partition(" ")
        lines.setdefault(tag, rest)
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE n(id INTEGER PRIMARY KEY, a INTEGER, b REAL, c TEXT)")
    con.execute(FILL.format(t="n"))
    for i, q in enumerate(QUERIES):
        want = as_text(con, con.execute(q.format(t="n")).fetchall())
        assert lines.get("Q%d" % i) == want, "%s\nguest: %r\nhost:  %r" % (q, lines.get("Q%d" % i), want)
    # the compute ran in csq-target's device, reached through the kernel
    assert lines.get("DEV", "").startswith("nvme,device"), lines.get("DEV")
    stat = dict(kv.split(",") for kv in lines["STAT"].split("|"))
    assert int(stat["programs_executed"]) > 0, stat
    log = tg.read_log()
    assert "qid 1" in log, log[-2000:]


# The guest exports its QEMU namespace (4 KiB LBAs, as csq's blocks) with
# nvmet-tcp on port 4420, then waits until the host writes its done marker
# at LBA $1 (or $2 seconds pass).
NVMET_SCRIPT = r"""#!/bin/sh
N=%(nqn)s
c=/sys/kernel/config/nvmet s=$c/subsystems/$N p=$c/ports/1
mkdir "$s" && mkdir "$s/namespaces/1" "$p" &&
echo 1 >"$s/attr_allow_any_host" &&
echo /dev/nvme0n1 >"$s/namespaces/1/device_path" &&
echo 1 >"$s/namespaces/1/enable" &&
echo tcp >"$p/addr_trtype" && echo ipv4 >"$p/addr_adrfam" &&
echo 0.0.0.0 >"$p/addr_traddr" && echo 4420 >"$p/addr_trsvcid" &&
ln -s "$s" "$p/subsystems/$N" || { echo NVMET-SETUP-FAILED; exit 1; }
echo NVMET-READY
i=0
while [ $i -lt $(($2 * 5)) ]; do
  if dd if=/dev/nvme0n1 bs=4096 skip=$1 count=1 iflag=direct 2>/dev/null | grep -q HOST-DONE; then
    echo GUEST-SAW-DONE
    exit 0
  fi
  sleep 0.2
  i=$((i + 1))
done
echo GUEST-TIMEOUT
exit 1
"""


def test_csq_initiator_against_kernel_nvmet_target():
    if not os.access(PLAIN_HOST, os.X_OK):
        raise Skip("no %s (make %s)" % (PLAIN_HOST, os.path.relpath(PLAIN_HOST)))
    runner = qemu_runner()
    d = tmpdir()
    nqn = "nqn.2026-12.io.csq.test:plain"
    script = os.path.join(d, "nvmet.sh")
    with open(script, "w") as f:
        f.write(NVMET_SCRIPT % {"nqn": nqn})
    os.chmod(script, 0o755)
    port, mark = free_port(), 60000
    env = vm_env(QEMU_NVME_RUN_QEMU_OPTS="-global nvme.logical_block_size=4096 "
                 "-global nvme.physical_block_size=4096")
    vm = subprocess.Popen([runner, "--hostfwd", "%d:4420" % port, "--timeout", "200", script,
                           str(mark), "150"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          env=env)
    out = b""
    try:
        deadline = time.time() + 180
        while b"NVMET-READY" not in out and b"NVMET-SETUP-FAILED" not in out:
            assert time.time() < deadline, out.decode(errors="replace")[-3000:]
            r, _, _ = select.select([vm.stdout], [], [], 1)
            if r:
                chunk = os.read(vm.stdout.fileno(), 65536)
                if not chunk:
                    break
                out += chunk
        if b"NVMET-READY" not in out and vm.wait(timeout=60) == 125:
            raise Skip("QEMU could not start: " + out.decode(errors="replace").strip()[-200:])
        assert b"NVMET-READY" in out, out.decode(errors="replace")[-3000:]
        url = "nvme-tcp://127.0.0.1:%d/%s" % (port, nqn)
        # a csq table on the plain target: the host runs its programs
        con = connect(os.path.join(d, "p.db"))
        con.execute("CREATE VIRTUAL TABLE t USING csq(id INTEGER PRIMARY KEY, a INTEGER, b REAL, "
                    "c TEXT, device='%s')" % url)
        con.execute("CREATE TABLE n(id INTEGER PRIMARY KEY, a INTEGER, b REAL, c TEXT)")
        con.execute("BEGIN")
        for t in ("t", "n"):
            con.execute(FILL.replace("20000", "1000").format(t=t))
        con.execute("COMMIT")
        for q in QUERIES:
            same_rows(con.execute(q.format(t="t")).fetchall(), con.execute(q.format(t="n")).fetchall(), q)
        assert con.execute("SELECT compute FROM csq_devices").fetchall() == [("host",)]
        con.close()
        p = subprocess.run([PLAIN_HOST, url, str(mark)], capture_output=True, text=True, timeout=120)
        host = p.stdout + p.stderr
        assert p.returncode == 0 and "HOST-OK" in host, host
        for frag in ["read 64 blocks back", "read past the end refused",
                     "Execute refused", "SLM Write refused", "Load Program refused"]:
            assert "OK " + frag in host, host
        # nvmet has no namespaces 2 and 3 (csq's CP and SLM): Invalid Namespace;
        # csq's admin opcodes (on an I/O queue) Invalid Namespace or Opcode
        assert "Execute refused: status 0x00b" in host, host
        assert ("Load Program refused: status 0x00b" in host or
                "Load Program refused: status 0x001" in host), host
        rest, _ = vm.communicate(timeout=120)
        out += rest
    finally:
        if vm.poll() is None:
            vm.kill()
            vm.wait()
    text = out.decode(errors="replace")
    assert vm.returncode == 0 and "GUEST-SAW-DONE" in text, text[-3000:]
