#!/usr/bin/env python3
"""Runs `baregpu bench --device cpu --quick --json` (every suite: hcq, then tensor) and checks the
output's shape (the same for every suite): {"device": str, "isa": "x86-64", "results": [{"name", "value", "unit", ...}]},
with every HCQ and tensor result present, in its unit, its value a positive number, and every
tensor result carrying a numeric compile_ms and of_peak. Then `--suite tensor` alone must bring
its own copy_h2d/copy_d2h; on sim-am:navi31 (its own machine code) "isa" is "gfx1100", results carry the
chip's shader counts, and of_peak is against the board's roofline ("board") with the modelled time. Speed
is not checked here.

Usage: check_bench.py BAREGPU
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    run = subprocess.run([sys.argv[1], "bench", "--device", "cpu", "--quick", "--json"],
                         capture_output=True, text=True, timeout=300)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        print(f"FAIL: baregpu bench exited with {run.returncode}")
        return 1
    out = json.loads(run.stdout)
    if out.get("device") != "cpu" or out.get("isa") != "x86-64" or not isinstance(out.get("results"), list):
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
    tensor = {"matmul_512": "GFLOP/s", "matmul_1024": "GFLOP/s", "matmul_2048": "GFLOP/s", "ew_fused_16M": "GB/s",
              "reduce_sum_16M": "GB/s", "softmax_4096": "ms", "mlp_forward": "ms", "conv2d_3x3": "ms",
              "launch_overhead": "us"}
    want.update(tensor)
    want.update({"peak_fma_gflops": "GFLOP/s", "stream_triad": "GB/s"})
    for name, unit in want.items():
        if names.get(name) != unit:
            print(f"FAIL: missing {name} in {unit}; have {names}")
            return 1
    for r in out["results"]:
        if r["name"] in ("hcq_submit", "hcq_graph_replay") and not isinstance(r.get("pass"), bool):
            print(f"FAIL: {r['name']} has no boolean 'pass': {r}")
            return 1
    for r in out["results"]:
        if r["name"] in tensor or r["name"].startswith("copy_"):
            keys = ("compile_ms",) if r["name"] == "launch_overhead" else ("compile_ms", "of_peak")
            for key in keys:
                if not isinstance(r.get(key), (int, float)) or r[key] < 0:
                    print(f"FAIL: {r['name']} has no numeric {key}: {r}")
                    return 1
    alone = subprocess.run([sys.argv[1], "bench", "--suite", "tensor", "--device", "cpu", "--quick", "--json",
                            "--only", "copy_,launch_"], capture_output=True, text=True, timeout=300)
    if alone.returncode != 0:
        print(f"FAIL: --suite tensor exited with {alone.returncode}: {alone.stderr}")
        return 1
    alone_names = {r["name"] for r in json.loads(alone.stdout)["results"]}
    if not {"copy_h2d", "copy_d2h", "launch_overhead"} <= alone_names or "hcq_submit" in alone_names:
        print(f"FAIL: --suite tensor --only copy_,launch_ gave {sorted(alone_names)}")
        return 1
    # --profile writes the Chrome trace of the run: the suite's kernels on the device's compute track.
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = os.path.join(tmp, "bench.json")
        prof = subprocess.run([sys.argv[1], "bench", "--suite", "tensor", "--device", "cpu", "--quick", "--json",
                               "--only", "matmul_512", "--profile", trace_path], capture_output=True, text=True, timeout=300)
        if prof.returncode != 0 or not os.path.exists(trace_path):
            print(f"FAIL: --profile exited with {prof.returncode} and wrote {os.listdir(tmp)}: {prof.stderr}")
            return 1
        with open(trace_path) as f:
            events = json.load(f)["traceEvents"]
        kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "exec"]
        if not kernels or any(e["dur"] < 0 for e in kernels):
            cats = sorted({e.get("cat") for e in events if e.get("ph") == "X"})
            print(f"FAIL: the bench trace has no kernel (exec) events (categories: {cats})")
            return 1
        if {r["name"] for r in json.loads(prof.stdout)["results"]} != {"matmul_512"}:
            print(f"FAIL: --profile changed what was measured: {prof.stdout[:200]}")
            return 1
    # A simulated chip runs its own machine code by default: "isa" says so, and each result carries what
    # the chip's interpreter counted per run (instructions by unit, bytes, modelled time), as does each
    # kernel in the profiler's trace. With isa=host it runs x86-64 host code, and says that instead.
    for device, isa in (("sim-am:navi31", "gfx1100"), ("sim-am:navi48", "gfx1201"), ("sim-am:navi31?isa=host", "x86-64")):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, BAREGPU_SIM_STATE_DIR=tmp)
            trace_path = os.path.join(tmp, "trace.json")
            sim = subprocess.run([sys.argv[1], "bench", "--suite", "tensor", "--device", device, "--quick",
                                  "--json", "--only", "reduce_sum", "--profile", trace_path],
                                 capture_output=True, text=True, timeout=300, env=env)
            if sim.returncode != 0:
                print(f"FAIL: bench on {device} exited with {sim.returncode}: {sim.stderr}")
                return 1
            out = json.loads(sim.stdout)
            r = out["results"][0] if out.get("results") else {}
            counted = r.get("shader_valu", 0) > 0 and r.get("shader_vmem_load", 0) > 0 \
                and r.get("shader_bytes_loaded", 0) >= 4 * 1024 and r.get("shader_modelled_ns", 0) > 0
            if out.get("isa") != isa or counted != (isa != "x86-64"):
                print(f"FAIL: {device}: expected isa {isa}, shader counts only for GPU code: {sim.stdout[:600]}")
                return 1
            # GPU code: of_peak is against the board the chip is (bench/roofline.hpp), with the modelled
            # time: the roofline time of 4 bytes per element over shader_modelled_ns. Host code: the host's.
            board = out.get("board")
            if isa == "x86-64":
                ok = board is None and "roofline_us" not in r
            else:
                want = {"gfx1100": ("RX 7900 XTX", 61400, 960), "gfx1201": ("RX 9070 XT", 48700, 640)}[isa]
                roofline_us = 4.0 * r.get("n", 0) / (want[2] * 1e3)
                ok = board is not None and want[0] in board.get("name", "") and board.get("fp32_gflops") == want[1] \
                    and board.get("mem_gbps") == want[2] and board.get("time") == "modelled" \
                    and abs(r.get("roofline_us", 0) - roofline_us) < 1e-6 * roofline_us \
                    and abs(r.get("of_peak", 0) - roofline_us * 1e3 / r["shader_modelled_ns"]) < 1e-6
            if not ok:
                print(f"FAIL: {device}: of_peak should be against the board's roofline for GPU code only: {sim.stdout[:800]}")
                return 1
            with open(trace_path) as f:
                kernels = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "exec"]
            traced = [e["args"].get("shader_instructions") for e in kernels]
            if isa == "x86-64":
                ok = kernels and all(t is None for t in traced)
            else:
                ok = kernels and all(t is not None and t > 0 and e["args"].get("shader_modelled_ns", 0) > 0
                                     for t, e in zip(traced, kernels)) \
                    and sum(traced) >= r["shader_instructions"]
            if not ok:
                print(f"FAIL: {device}: the trace's kernels should carry the interpreter's counts for GPU code only "
                      f"(per run {r.get('shader_instructions')}): {kernels[:3]}")
                return 1
    bad = subprocess.run([sys.argv[1], "bench", "--suite", "nosuch"], capture_output=True, text=True, timeout=60)
    if bad.returncode != 2 or "unknown suite" not in bad.stderr:
        print(f"FAIL: an unknown suite is not refused: {bad.returncode} {bad.stderr}")
        return 1
    print(f"bench output ok: {sorted(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
