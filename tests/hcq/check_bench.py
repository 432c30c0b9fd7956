#!/usr/bin/env python3
"""Runs `baregpu bench --suite hcq --device cpu --quick --json` and checks the output's shape
(the same for every suite): {"device": str, "results": [{"name", "value", "unit", ...}]}, with
every HCQ result present and its value a positive number. Speed is not checked here.

Usage: check_bench.py BAREGPU
"""
import json
import subprocess
import sys


def main():
    run = subprocess.run([sys.argv[1], "bench", "--suite", "hcq", "--device", "cpu", "--quick", "--json"],
                         capture_output=True, text=True, timeout=300)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        print(f"FAIL: baregpu bench exited with {run.returncode}")
        return 1
    out = json.loads(run.stdout)
    if out.get("device") != "cpu" or not isinstance(out.get("results"), list):
        print(f"FAIL: bad shape: {run.stdout[:200]}")
        return 1
    names = {}
    for r in out["results"]:
        for key, kind in (("name", str), ("value", (int, float)), ("unit", str)):
            if not isinstance(r.get(key), kind):
                print(f"FAIL: result without a {key}: {r}")
                return 1
        if not r["value"] > 0:
            print(f"FAIL: non-positive value: {r}")
            return 1
        names[r["name"]] = r["unit"]
    want = {"hcq_submit": "ns", "hcq_submit_profiled": "ns", "hcq_graph_replay": "ns", "hcq_signal_latency": "us",
            "copy_h2d": "GB/s", "copy_d2h": "GB/s"}
    for name, unit in want.items():
        if names.get(name) != unit:
            print(f"FAIL: missing {name} in {unit}; have {names}")
            return 1
    for r in out["results"]:
        if r["name"] in ("hcq_submit", "hcq_graph_replay") and not isinstance(r.get("pass"), bool):
            print(f"FAIL: {r['name']} has no boolean 'pass': {r}")
            return 1
    bad = subprocess.run([sys.argv[1], "bench", "--suite", "nosuch"], capture_output=True, text=True, timeout=60)
    if bad.returncode != 2 or "unknown suite" not in bad.stderr:
        print(f"FAIL: an unknown suite is not refused: {bad.returncode} {bad.stderr}")
        return 1
    print(f"bench output ok: {sorted(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
