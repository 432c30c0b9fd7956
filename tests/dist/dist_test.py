#!/usr/bin/env python3
"""baregpu::dist under mpirun: tests/dist/dist_check.cpp on 2 to 4 ranks.

1. every collective on cpu devices (4 ranks), on 2 ranks holding 2 cpu devices each, and on
   simulated GPUs (ranks 0-1 on sim-am:navi31, ranks 2-3 on sim-nv:ad102), checked on every rank;
2. a rank killed (SIGKILL) in the middle of allreduces: every other rank fails with an error naming
   it, well within BAREGPU_TIMEOUT_MS (mpirun --enable-recovery keeps them running: by default
   Open MPI's mpirun itself ends the job when a rank dies);
3. a rank whose device faults: its error reaches every other rank, naming it and the device;
4. a rank that stays away from the collectives: named once nothing was heard from it for the timeout;
   ranks that call different collectives: each says so after the timeout;
5. examples/data_parallel (gradients allreduced across ranks) matches its single-process run.

With "brief" (the sanitizer build, where 4 processes under ASan on CI's two cores cost a minute):
1 on cpu (4 ranks) and on the simulated GPUs; the rest in the normal build.
Exits 77 (SKIPPED) with the reason where mpirun is missing."""
import os
import re
import subprocess
import sys
import tempfile
import time

check, example, mpirun = sys.argv[1], sys.argv[2], sys.argv[3]
brief = sys.argv[4:] == ["brief"]
if not mpirun:
    print("SKIPPED: no mpirun or mpiexec on PATH (Debian: openmpi-bin)")
    sys.exit(77)

TIMEOUT_MS = 8000
env = dict(os.environ)
# Open MPI refuses root without these (CI runs as root); the test runs on this host's shared memory.
env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_btl": "self,vader", "OMPI_MCA_rmaps_base_oversubscribe": "1",
            # No single-copy (CMA): containers often forbid process_vm_readv between ranks.
            "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
            "BAREGPU_TIMEOUT_MS": str(TIMEOUT_MS)})
# ASan's leak checker would report Open MPI's own allocations left at exit.
env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
state = tempfile.mkdtemp(prefix="dist-test-")
env["BAREGPU_CACHE_DIR"] = os.path.join(state, "cache")
failures = []


def run(name, apps, expect_rc, extra=(), timeout=120, program=check):
    """apps: [(ranks, [args], {env})]: mpirun's MPMD form, one app context each."""
    cmd = [mpirun, "--oversubscribe", *extra]
    for i, (n, args, app_env) in enumerate(apps):
        if i:
            cmd.append(":")
        cmd += ["-np", str(n)]
        for k, v in app_env.items():
            cmd += ["-x", f"{k}={v}"]
        cmd += [program, *args]
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    took = time.monotonic() - t0
    out = p.stdout + p.stderr
    print(f"--- {name}: exit {p.returncode} in {took:.1f} s\n{out.strip()}\n")
    if p.returncode not in expect_rc:
        failures.append(f"{name}: mpirun exited {p.returncode}, expected {sorted(expect_rc)}")
    return out


def states(prefix):
    d = os.path.join(state, prefix)
    os.makedirs(d, exist_ok=True)
    return {"BAREGPU_SIM_STATE_DIR": d}


def expect_ok(name, out):
    if "dist-check ok" not in out:
        failures.append(f"{name}: no 'dist-check ok' line")


out = run("cpu, 4 ranks", [(4, ["check", "cpu?threads=1"], {})], {0})
expect_ok("cpu, 4 ranks", out)

if not brief:
    out = run("cpu, 2 ranks of 2 devices", [(2, ["check", "cpu?threads=1,cpu?threads=1"], {})], {0})
    expect_ok("cpu, 2 ranks of 2 devices", out)

# MPMD: each app context its own device and simulated chip state.
out = run("sim-am x2 + sim-nv x2", [(1, ["check", "sim-am:navi31?isa=host"], states("am0")),
                                    (1, ["check", "sim-am:navi31?isa=host"], states("am1")),
                                    (1, ["check", "sim-nv:ad102"], states("nv0")),
                                    (1, ["check", "sim-nv:ad102"], states("nv1"))], {0})
expect_ok("sim-am x2 + sim-nv x2", out)
# The GPUs' copy engines move the chunks straight into and out of the host slots.
m = re.search(r"dma_copies=(\d+)", out)
if not m or int(m.group(1)) == 0:
    failures.append("sim-am x2 + sim-nv x2: no chunk went by DMA into or out of a host slot")

if not brief:
    # Two ranks each holding a simulated AMD and a simulated NVIDIA GPU on one simulated PCIe bus: the
    # rank's result reaches its second device by Device::transfer over the bus, not from the host.
    both = "sim-am:navi31?isa=host&bus=r,sim-nv:ad102?bus=r"
    out = run("2 ranks of sim-am + sim-nv on one bus", [(1, ["check", both], states("pair0")), (1, ["check", both], states("pair1"))], {0})
    expect_ok("2 ranks of sim-am + sim-nv on one bus", out)
    m = re.search(r"peer_transfers=(\d+)", out)
    if not m or int(m.group(1)) == 0:
        failures.append("2 ranks of sim-am + sim-nv on one bus: no peer transfer between the rank's devices")


def expect_named(name, out, victim, survivors, within_ms, words):
    lines = [l for l in out.splitlines() if l.startswith("RankError") and not l.startswith(f"RankError on={victim} ")]
    if len(lines) != survivors:
        failures.append(f"{name}: {len(lines)} ranks reported a RankError, expected {survivors}")
    for l in lines:
        m = re.match(r"RankError on=\d+ rank=(\d+) after_ms=(\d+): (.*)", l)
        if not m or int(m.group(1)) != victim:
            failures.append(f"{name}: does not name rank {victim}: {l}")
            continue
        if int(m.group(2)) > within_ms:
            failures.append(f"{name}: reported after {m.group(2)} ms, more than {within_ms} ms: {l}")
        for w in words:
            if w not in m.group(3):
                failures.append(f"{name}: the message lacks '{w}': {l}")


if not brief:
    # --enable-recovery: the job goes on without the dead rank, as under a launcher that does not end it.
    # The failures on 3 ranks: a victim, a neighbour on each side of it in the ring, nobody else needed.
    out = run("rank 2 killed mid-allreduce", [(3, ["die", "2", "cpu?threads=1"], {})], {0, 3, 137},
              extra=["--enable-recovery"])
    expect_named("rank 2 killed mid-allreduce", out, 2, 2, TIMEOUT_MS, ["rank 2 (pid", "exited", "allreduce"])

    out = run("rank 1's device faults", [(3, ["fault", "1", "cpu?threads=1"], {})], {0, 1, 3, 4},
              extra=["--enable-recovery"])
    expect_named("rank 1's device faults", out, 1, 2, TIMEOUT_MS, ["rank 1 (pid", "failed in allreduce", "injected"])

if not brief:
    # The data-parallel example: 3 ranks on cpu, then ranks on simulated AMD and NVIDIA GPUs.
    for name, apps in [("data_parallel on cpu", [(3, ["--device", "cpu?threads=1"], {})]),
                       ("data_parallel on sim-am + sim-nv", [(1, ["--device", "sim-am:navi31?isa=host"], states("dp-am")),
                                                             (1, ["--device", "sim-nv:ad102"], states("dp-nv"))])]:
        out = run(name, apps, {0}, program=example)
        if not re.search(r"data_parallel: \d+ ranks on .*: ok", out):
            failures.append(f"{name}: no 'ok' line from rank 0")

    # Alive but away from the collectives for twice the timeout: named once nothing was heard from it
    # for the timeout (no exit to see, no failure of its own to announce).
    env["BAREGPU_TIMEOUT_MS"] = "1500"
    out = run("rank 2 stalls", [(3, ["stall", "2", "cpu?threads=1"], {})], {0, 3}, extra=["--enable-recovery"])
    expect_named("rank 2 stalls", out, 2, 2, 2 * 1500, ["rank 2 (pid", "sent nothing for", "allreduce"])

    # Every rank alive and waiting, in different collectives: each says so after the timeout.
    out = run("rank 1 calls broadcast, the others allreduce", [(3, ["mismatch", "1", "cpu?threads=1"], {})], {0, 3},
              extra=["--enable-recovery"])
    lines = [l for l in out.splitlines() if l.startswith("RankError")]
    if len(lines) != 3 or not all("called different operations" in l for l in lines):
        failures.append(f"mismatched collectives: expected 3 ranks to report 'called different operations', got {lines}")
    env["BAREGPU_TIMEOUT_MS"] = str(TIMEOUT_MS)

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("dist: every check passed")
