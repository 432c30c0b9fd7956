#!/usr/bin/env python3
"""What calling baregpu from Python costs over the C++ API, measured in one run on one device.

  PYTHONPATH=build/python python3 bench/python_overhead.py [--device cpu] [--baregpu build/tools/baregpu/baregpu]

Two figures, each beside its C++ twin from `baregpu bench --suite tensor` run by this script:
  lazy_op          ns to record one op (`x + x` on a 16-element tensor; C++: x.add(x))
  launch_overhead  us per launch of a small fused kernel, realized one at a time (`(1.0 + x).realize()`;
                   C++: x.scalar(1.0).add(x).realize()), then one synchronize
Each is the median of 5 timed runs after a warm-up. Prints {"device", "results": [...]} as JSON;
"python_over_cpp" is what Python adds per call, "pass" whether that is under the 5 us target.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import baregpu

RUNS = 5


def timed(fn, count):
    fn()  # warm-up: the kernel compiles (or comes from the cache) here
    per = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        fn()
        per.append((time.perf_counter() - t0) / count)
    return statistics.median(per), min(per), max(per)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--baregpu", default=os.path.join(here, "..", "build", "tools", "baregpu", "baregpu"))
    args = ap.parse_args()

    d = baregpu.Device(args.device)
    x = baregpu.rand((16,), seed=15, device=d).realize()
    d.synchronize()
    ops = 100000
    launches = 2000 if d.arch == "x86_64" else 200  # as the C++ bench (fewer on an interpreted chip)

    def lazy():
        for _ in range(ops):
            x + x

    def launch():
        for _ in range(launches):
            (1.0 + x).realize()
        d.synchronize()

    py_lazy = timed(lazy, ops)
    py_launch = timed(launch, launches)

    cpp = subprocess.run([args.baregpu, "bench", "--suite", "tensor", "--device", args.device, "--json",
                          "--only", "launch_overhead,lazy_op"], capture_output=True, text=True, timeout=600)
    if cpp.returncode != 0:
        sys.exit(f"python_overhead: {args.baregpu} bench failed ({cpp.returncode}): {cpp.stderr.strip()}")
    cpp_results = {r["name"]: r for r in json.loads(cpp.stdout)["results"]}

    results = []
    for name, (median, lo, hi), scale, unit in (("lazy_op", py_lazy, 1e9, "ns"), ("launch_overhead", py_launch, 1e6, "us")):
        c = cpp_results[name]
        value = median * scale
        results.append({"name": "python_" + name, "value": round(value, 3), "unit": unit, "min": round(lo * scale, 3),
                        "max": round(hi * scale, 3), "cpp": c["value"], "python_over_cpp": round(value - c["value"], 3),
                        "ratio": round(value / c["value"], 2), "target_over_cpp_us": 5.0,
                        "pass": (value - c["value"]) / (1e3 if unit == "ns" else 1) < 5.0})
    print(json.dumps({"device": d.name, "results": results}, indent=1))


if __name__ == "__main__":
    main()
