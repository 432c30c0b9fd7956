#!/usr/bin/env python3
"""What calling baregpu from Python costs over the C++ API, measured in one process on one device.

  PYTHONPATH=build/python python3 bench/python_overhead.py [--device cpu]

Two figures, each beside its C++ twin (baregpu.testing.cpp_lazy_ops / cpp_launches: the same calls
made from C++ in this process, on the same runtime):
  lazy_op          ns to record one op (`x + x` on a 16-element tensor; C++: x.add(x))
  launch_overhead  us per launch of a small fused kernel, realized one at a time (`(1.0 + x).realize()`;
                   C++: x.scalar(1.0).add(x).realize()), then one synchronize
Seven rounds alternate Python and C++ (after a warm-up of each), so both see the same state of this
shared machine. Prints {"device", "results": [...]} as JSON: "value" (Python, median of the rounds),
"cpp" (median), "python_over_cpp" (median of the rounds' differences: what Python adds per call) and
"pass" (that is under the 5 us target).
"""
import argparse
import json
import statistics
import time

import baregpu

ROUNDS = 7


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    d = baregpu.Device(args.device)
    x = baregpu.rand((16,), seed=15, device=d).realize()
    d.synchronize()
    ops = 100000
    launches = 2000 if d.arch == "x86_64" else 200  # as `baregpu bench` (fewer on an interpreted chip)

    def py_lazy():
        t0 = time.perf_counter()
        for _ in range(ops):
            x + x
        return time.perf_counter() - t0

    def py_launch():
        t0 = time.perf_counter()
        for _ in range(launches):
            (1.0 + x).realize()
        d.synchronize()
        return time.perf_counter() - t0

    loops = {
        "lazy_op": (py_lazy, lambda: baregpu.testing.cpp_lazy_ops(x, ops), ops, 1e9, "ns"),
        "launch_overhead": (py_launch, lambda: baregpu.testing.cpp_launches(x, launches), launches, 1e6, "us"),
    }
    results = []
    for name, (py, cpp, count, scale, unit) in loops.items():
        py(), cpp()  # warm-up: the kernel compiles (or comes from the cache) here
        pairs = [(py() / count * scale, cpp() / count * scale) for _ in range(ROUNDS)]
        value = statistics.median(p for p, _ in pairs)
        base = statistics.median(c for _, c in pairs)
        over = statistics.median(p - c for p, c in pairs)
        results.append({"name": "python_" + name, "value": round(value, 3), "unit": unit, "cpp": round(base, 3),
                        "python_over_cpp": round(over, 3), "ratio": round(value / base, 2), "rounds": ROUNDS,
                        "python_min": round(min(p for p, _ in pairs), 3), "cpp_min": round(min(c for _, c in pairs), 3),
                        "target_over_cpp_us": 5.0, "pass": over / (1e3 if unit == "ns" else 1) < 5.0})
    print(json.dumps({"device": d.name, "results": results}, indent=1))


if __name__ == "__main__":
    main()
