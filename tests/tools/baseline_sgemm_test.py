#!/usr/bin/env python3
"""bench/baseline_sgemm runs OpenBLAS at its best: with OPENBLAS_CORETYPE forcing an old kernel and
OPENBLAS_L2_SIZE shrinking its blocking, it still reports the kernel OpenBLAS picks for this CPU by
itself, and a result a JSON reader can use.

Usage: baseline_sgemm_test.py BASELINE_SGEMM
"""
import json
import os
import subprocess
import sys

exe = sys.argv[1]
failures = []


def run(extra_env):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    env.update(extra_env)
    out = subprocess.run([exe, "--quick", "64"], capture_output=True, text=True, env=env, timeout=120, check=True).stdout
    return json.loads(out.splitlines()[0])


natural = run({})
forced = run({"OPENBLAS_CORETYPE": "Prescott", "OPENBLAS_L2_SIZE": "64"})
for name, r in (("natural", natural), ("forced", forced)):
    if r.get("name") != "baseline_sgemm_64" or not r.get("value", 0) > 0 or not r.get("kernel"):
        failures.append(f"{name} run printed {r}")
if natural.get("kernel") != forced.get("kernel"):
    failures.append(f"OPENBLAS_CORETYPE=Prescott changed the kernel: {forced.get('kernel')} instead of {natural.get('kernel')}")
print(f"kernel without handicaps: {natural.get('kernel')}; with OPENBLAS_CORETYPE=Prescott set: {forced.get('kernel')}")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
