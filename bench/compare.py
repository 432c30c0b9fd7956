#!/usr/bin/env python3
"""The tensor suite's acceptance ratios: runs `baregpu bench --suite tensor --json`, then,
each in a process of its own right after it, bench/baseline_sgemm (OpenBLAS, when built) and
bench/baseline_stream, and prints:

  matmul_1024 / OpenBLAS sgemm 1024     target >= 0.7
  matmul_2048 / OpenBLAS sgemm 2048     target >= 0.7
  ew_fused_16M / STREAM triad           target >= 0.8
  reduce_sum_16M / STREAM triad         target >= 0.6
  softmax_4096 (GB/s: 2 * 4 bytes per element) / STREAM triad   target >= 0.6

Baselines run with OMP_WAIT_POLICY=passive so that no spinning pool outlives its process.

Usage: bench/compare.py [--build DIR] [--runs N] [--quick] [--json]   (DIR default: build)
--quick only checks that everything runs: the suite shrinks its sizes, the sgemm baseline does not,
so its ratios mean nothing.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

TARGETS = [("matmul_1024", "baseline_sgemm_1024", 0.7), ("matmul_2048", "baseline_sgemm_2048", 0.7),
           ("ew_fused_16M", "baseline_stream_triad", 0.8), ("reduce_sum_16M", "baseline_stream_triad", 0.6),
           ("softmax_4096", "baseline_stream_triad", 0.6)]


def run_json_lines(cmd, env):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    return {r["name"]: r for r in (json.loads(line) for line in out.splitlines() if line.strip())}


def one_run(build, quick):
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    extra = ["--quick"] if quick else []
    suite = subprocess.run([os.path.join(build, "tools/baregpu/baregpu"), "bench", "--suite", "tensor", "--device", "cpu",
                            "--json", "--only", "matmul_1024,matmul_2048,ew_fused,reduce_sum,softmax"] + extra,
                           capture_output=True, text=True, check=True)
    results = {r["name"]: r for r in json.loads(suite.stdout)["results"]}
    base = {}
    sgemm = os.path.join(build, "bench/baseline_sgemm")
    if os.path.exists(sgemm):
        base.update(run_json_lines([sgemm] + extra, env))
    base.update(run_json_lines([os.path.join(build, "bench/baseline_stream")] + extra, env))
    ratios = {}
    for ours, theirs, _ in TARGETS:
        if ours not in results or theirs not in base:
            continue
        r = results[ours]
        value = r["gbps"] if ours == "softmax_4096" else r["value"]
        ratios[ours] = {"ours": value, "baseline": base[theirs]["value"], "ratio": value / base[theirs]["value"]}
    return ratios


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    runs = []
    for i in range(a.runs):
        runs.append(one_run(a.build, a.quick))
        print(f"compare: run {i + 1}/{a.runs} done", file=sys.stderr)
    summary = {}
    for ours, theirs, target in TARGETS:
        got = [r[ours] for r in runs if ours in r]
        if not got:
            continue
        med = statistics.median(g["ratio"] for g in got)
        summary[ours] = {"baseline": theirs, "target": target, "median_ratio": med, "met": med >= target, "runs": got}
    if a.json:
        print(json.dumps(summary, indent=1))
        return 0
    print(f"{'figure':<16} {'baseline':<22} {'target':>6} {'median':>7}  met  runs (ours / baseline = ratio)")
    for ours, s in summary.items():
        runs_text = "; ".join(f"{g['ours']:.2f}/{g['baseline']:.2f}={g['ratio']:.3f}" for g in s["runs"])
        print(f"{ours:<16} {s['baseline']:<22} {s['target']:>6.2f} {s['median_ratio']:>7.3f}  {'yes' if s['met'] else 'no ':<4} {runs_text}")
    if not any(t[1].startswith("baseline_sgemm") for t in TARGETS if t[0] in summary):
        print("(no OpenBLAS baseline: bench/baseline_sgemm is built only when libopenblas-dev is installed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
