#!/usr/bin/env python3
"""The vendor's own stack on the same GPU in the same run, for tests/silicon/run.sh.

PyTorch/CUDA measures what `baregpu bench` measures (pinned H2D/D2H bandwidth, the per-kernel launch cost of a
replayed CUDA graph, an fp32 4096 matmul with TF32 off, an elementwise op, a sum) and prints our/CUDA ratios when
our bench JSON is given. Then the CUDA driver API (ctypes on libcuda.so.1) loads every cubin in --cubins (ptxas's
output for our compiler's PTX: the driver refuses a cubin for another arch) and launches `fill` from the cubin nvcc
built from tests/nv/data/axpy_fill.cu, checking what it wrote. Only reads and submits work: no clocks, no resets.
Exit 0 when every check passed, 1 otherwise, 77 when there is no CUDA device.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time


def timed(fn, sync, repeats=9):
    fn()
    sync()
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def measure(torch):
    dev = torch.device("cuda")
    sync = torch.cuda.synchronize
    out = {}
    n = 256 << 20
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    gpu = torch.empty(n, dtype=torch.uint8, device=dev)
    out["copy_h2d"] = (n / timed(lambda: gpu.copy_(host, non_blocking=True), sync) / 1e9, "GB/s")
    out["copy_d2h"] = (n / timed(lambda: host.copy_(gpu, non_blocking=True), sync) / 1e9, "GB/s")

    # Per-kernel launch cost of a replayed graph of 1000 tiny kernels.
    x = torch.zeros(256, device=dev)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        x.add_(1)  # warm up outside the capture
    sync()
    graph = torch.cuda.CUDAGraph()
    kernels = 1000
    with torch.cuda.graph(graph):
        for _ in range(kernels):
            x.add_(1)
    out["launch_overhead"] = (timed(graph.replay, sync) / kernels * 1e9, "ns")

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    a = torch.randn(4096, 4096, device=dev)
    b = torch.randn(4096, 4096, device=dev)
    out["matmul_4096"] = (2 * 4096**3 / timed(lambda: a @ b, sync) / 1e12, "TFLOP/s")

    m = 64 << 20
    p, q, r = (torch.randn(m, device=dev) for _ in range(3))
    # One kernel: r + p * q (addcmul), 4 floats moved per element.
    out["elementwise"] = (4 * 4 * m / timed(lambda: torch.addcmul(r, p, q), sync) / 1e9, "GB/s")
    out["sum"] = (4 * m / timed(lambda: p.sum(), sync) / 1e9, "GB/s")
    return out


def load_ours(path):
    """The results of `baregpu bench --json` from its log (the JSON object, whatever precedes it)."""
    text = open(path).read()
    start = text.find("{")
    if start < 0:
        return {}
    doc = json.loads(text[start:text.rfind("}") + 1])
    return {r["name"]: (r["value"], r.get("unit", "")) for r in doc.get("results", [])}


def check_cubins(torch, directory):
    """Loads each cubin through the CUDA driver; launches fill(out, v) from axpy_fill.*.cubin. (ok, lines)."""
    lines, ok = [], True
    cuda = ctypes.CDLL("libcuda.so.1")
    torch.zeros(1, device="cuda")  # the primary context, current on this thread
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".cubin"):
            continue
        data = open(os.path.join(directory, name), "rb").read()
        module = ctypes.c_void_p()
        rc = cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(data))
        lines.append(f"cuModuleLoadData {name}: {'ok' if rc == 0 else f'CUresult {rc}'}")
        ok = ok and rc == 0
        if rc != 0 or not name.startswith("axpy_fill."):
            continue
        fn = ctypes.c_void_p()
        rc = cuda.cuModuleGetFunction(ctypes.byref(fn), module, b"fill")
        target = torch.zeros(64, dtype=torch.int32, device="cuda")
        ptr, value = ctypes.c_uint64(target.data_ptr()), ctypes.c_int32(0x5eed)
        params = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(ptr), ctypes.c_void_p),
                                       ctypes.cast(ctypes.byref(value), ctypes.c_void_p))
        if rc == 0:
            rc = cuda.cuLaunchKernel(fn, 1, 1, 1, 64, 1, 1, 0, None, params, None)
        if rc == 0:
            rc = cuda.cuCtxSynchronize()
        good = rc == 0 and bool((target == 0x5eed).all().item())
        lines.append(f"launch fill from {name}: {'ok, 64 words written' if good else f'FAILED (CUresult {rc})'}")
        ok = ok and good
    return ok, lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="JSON file for the CUDA figures")
    ap.add_argument("--ours", help="the log of `baregpu bench --json` on the same GPU")
    ap.add_argument("--cubins", help="cubins to load (and axpy_fill.*.cubin to launch)")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("SKIPPED: no PyTorch")
        return 77
    if not torch.cuda.is_available():
        print("SKIPPED: PyTorch sees no CUDA device")
        return 77
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) on {torch.cuda.get_device_name()}")
    cuda = measure(torch)
    ours = load_ours(args.ours) if args.ours else {}
    json.dump({"device": torch.cuda.get_device_name(), "results": cuda}, open(args.out, "w"), indent=1)
    print(f"{'measure':<16} {'CUDA':>12} {'ours':>12}  ours/CUDA")
    for name, (value, unit) in cuda.items():
        mine = ours.get(name)
        ratio = f"{mine[0] / value:.3f}" if mine and mine[1] == unit and value else "n/a"
        print(f"{name:<16} {value:>9.2f} {unit:<6} {(f'{mine[0]:.2f}' if mine else '-'):>8}  {ratio}")
    ok = True
    if args.cubins and os.path.isdir(args.cubins):
        ok, lines = check_cubins(torch, args.cubins)
        print("\n".join(lines) if lines else "no cubins to load")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
