"""tests/sql/test_tcp_vm.py - csq and the Linux kernel on the two ends of
NVMe/TCP, in a QEMU guest (../shared/tools/qemu-nvme-run --net):

- the guest kernel's nvme-tcp initiator connects to build/csq-target on the
  host (10.0.2.2); build/tests/tcp_vm_guest (static: SQLite and csq) runs
  queries on the namespace node the kernel made, so csq's program, SLM and
  Execute commands travel the kernel's NVMe stack to the target's device;
  the answers equal native SQLite's on the host for the same rows;
- csq's initiator connects to the guest kernel's nvmet-tcp target (the QEMU
  namespace, through --hostfwd): reads and writes work, compute commands are
  refused as by any plain SSD, and a csq table cannot be made there (the
  message names what the target lacks).

Skips when qemu-nvme-run is missing or QEMU cannot start (its exit 125)."""
import os
import sqlite3
import subprocess

from harness import Skip, connect, same_rows, tmpdir
from test_tcp import BUILD, NQN, Target, qemu_runner

GUEST = os.path.join(BUILD, "tests", "tcp_vm_guest")

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
                       capture_output=True, text=True, timeout=timeout + 60)
    out = p.stdout + p.stderr
    if p.returncode == 125:
        raise Skip("QEMU could not start: " + (out.strip().splitlines() or ["?"])[-1][:200])
    return p.returncode, out


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
