#!/usr/bin/env python3
"""`baregpu p2p` end to end on the simulated bus. Usage: p2p_test.py BAREGPU FIRMWARE_DIR

The default trio (sim-am:navi31, sim-am:navi48, sim-nv:ad102 on one simulated bus): every ordered
pair reachable, data intact, peer-to-peer faster than the host bounce in modelled time, --json in
the bench shape; the text form prints the matrix and the bandwidth table. Two devices on separate
buses: both directions refused, the reason naming the root complexes. Skips (exit 77) without the
firmware.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

BAREGPU, FIRMWARE = sys.argv[1], pathlib.Path(sys.argv[2])
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


if not FIRMWARE.is_dir():
    print(f"FAIL: {FIRMWARE} is not there (the checkout's firmware/ directory)")
    sys.exit(1)

with tempfile.TemporaryDirectory() as tmp:
    env = dict(os.environ)
    env.update({"BAREGPU_SIM_STATE_DIR": os.path.join(tmp, "state"), "BAREGPU_LOCK_DIR": os.path.join(tmp, "locks"),
                "BAREGPU_FIRMWARE_PATH": str(FIRMWARE)})
    os.makedirs(env["BAREGPU_SIM_STATE_DIR"])
    os.makedirs(env["BAREGPU_LOCK_DIR"])

    def run(*args):
        p = subprocess.run([BAREGPU, "p2p", *args], capture_output=True, text=True, env=env, timeout=120)
        return p.returncode, p.stdout, p.stderr

    rc, out, err = run("--bytes", "4194304", "--json")
    check(rc == 0, f"p2p --json exits 0 (got {rc}: {err})")
    doc = json.loads(out)
    check(doc["device"].count(",") == 2, f"three devices: {doc['device']}")
    results = doc["results"]
    check(len(results) == 6, f"six ordered pairs, got {len(results)}")
    for r in results:
        check(r["unit"] == "GB/s" and r["name"].startswith("p2p_write:"), f"bench shape: {r}")
        check(r["reachable"] and r["intact"] and r["modelled"], f"reachable, intact, modelled: {r}")
        check(r["value"] > r["host_bounce_gbps"] > 0, f"peer-to-peer beats the bounce: {r}")

    rc, out, err = run("--bytes", "1048576")
    check(rc == 0, f"p2p exits 0 (got {rc}: {err})")
    check("reachability" in out and "bounce GB/s" in out and "intact" in out, f"text form:\n{out}")
    check(out.count(" yes") == 6, f"six reachable pairs in the matrix:\n{out}")

    rc, out, err = run("--bytes", "65536", "--json", "--devices", "sim-am:navi31?bus=left,sim-nv:ad102?bus=right")
    check(rc == 0, f"refused pairs are no failure (got {rc}: {err})")
    doc = json.loads(out)
    for r in doc["results"]:
        check(not r["reachable"] and "different root complexes" in r["reason"], f"refused with the reason: {r}")

sys.exit(1 if failures else 0)
