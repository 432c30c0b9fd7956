#!/usr/bin/env python3
"""Runs each libFuzzer target for a fixed time. Usage:
    run_fuzzers.py FIRMWARE_DIR CORPUS_DIR WRITE_SEEDS [--seed PARSER=FILE]... FUZZER...

A FUZZER is an executable whose parser is its name less "fuzz_", or EXECUTABLE@PARSER for one
that serves several (run with BAREGPU_FUZZ_PARSER=PARSER). Each is seeded with the real
files it parses (read from FIRMWARE_DIR, never written: the licences allow only unmodified
copies) and with the --seed files named for it, and writes what it finds to CORPUS_DIR/<parser>,
a build directory. FIRMWARE_DIR and WRITE_SEEDS may be "-" (none). WRITE_SEEDS adds synthetic seeds (a VBIOS, an ELF64, the PSP TOC) to
CORPUS_DIR/<parser>.seeds. BAREGPU_LONG=full runs each for 300 s, otherwise 1 s (a smoke run: CI time). A crash, a sanitizer report or a
leak fails the run and names the input libFuzzer saved.
"""
import os
import pathlib
import subprocess
import sys

firmware, corpus_root, write_seeds = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
extra_seeds, fuzzers = {}, []
args = iter(sys.argv[4:])
for arg in args:
    if arg == "--seed":
        parser, path = next(args).split("=", 1)
        extra_seeds.setdefault(parser, []).append(pathlib.Path(path))
    else:
        fuzzers.append(arg)
seconds = 300 if os.environ.get("BAREGPU_LONG") == "full" else 1

# Which real files seed which parser (globs under FIRMWARE_DIR).
SEEDS = {
    "psp_sos": ["amdgpu/psp_*_sos.bin"], "psp_ta": ["amdgpu/psp_*_ta.bin"], "psp_signed_binary": [],
    "smc": ["amdgpu/smu_*.bin"], "gfx": ["amdgpu/gc_*_pfp.bin", "amdgpu/gc_*_me.bin"],
    "rlc": ["amdgpu/gc_*_rlc.bin"], "rlc_toc": ["amdgpu/gc_*_toc.bin"], "mes": ["amdgpu/gc_*_mes1.bin"],
    "imu": ["amdgpu/gc_*_imu.bin"], "sdma": ["amdgpu/sdma_*.bin"], "discovery": ["amdgpu/*_ip_discovery.bin"],
    "nv_elf": ["nvidia/gb202/gsp/fmc-*.bin"], "nv_fmc": ["nvidia/gb202/gsp/fmc-*.bin"],
    "nv_bin_header": ["nvidia/*/gsp/*.bin"], "nv_hs_header": ["nvidia/ad102/gsp/booter_*.bin", "nvidia/ad102/gsp/scrubber*.bin"],
    "nv_riscv_desc": ["nvidia/*/gsp/bootloader-*.bin"], "nv_vbios": [], "describe": [], "decompress": [],
}

if write_seeds != "-":
    subprocess.run([write_seeds, str(corpus_root / "synthetic"), str(firmware)], check=True)

failed = []
for fuzzer in fuzzers:
    env = dict(os.environ)
    if "@" in fuzzer:
        fuzzer, parser = fuzzer.rsplit("@", 1)
        env["BAREGPU_FUZZ_PARSER"] = parser
    else:
        parser = pathlib.Path(fuzzer).name.removeprefix("fuzz_")
    out = corpus_root / parser
    out.mkdir(parents=True, exist_ok=True)
    seed_dir = corpus_root / (parser + ".seeds")  # links to the real files, so nothing is copied
    seed_dir.mkdir(parents=True, exist_ok=True)
    for f in extra_seeds.get(parser, []):
        link = seed_dir / f.name
        if not link.exists():
            link.symlink_to(f.resolve())
    if str(firmware) != "-" and firmware.is_dir():
        for pattern in SEEDS.get(parser, []):
            for f in sorted(firmware.glob(pattern)):
                link = seed_dir / f.name
                if not link.exists():
                    link.symlink_to(f.resolve())
    synthetic = corpus_root / "synthetic" / parser
    if synthetic.is_dir():
        for f in synthetic.iterdir():
            link = seed_dir / f.name
            if not link.exists():
                link.symlink_to(f.resolve())
    # The largest seed bounds -max_len, so mutations of whole real files are tried.
    sizes = [p.stat().st_size for p in seed_dir.iterdir()] or [4096]
    cmd = [fuzzer, str(out), str(seed_dir), f"-max_total_time={seconds}", f"-max_len={max(sizes) + 64}",
           "-print_final_stats=1", f"-artifact_prefix={corpus_root}/{parser}-", "-timeout=10", "-rss_limit_mb=4096"]
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    # "stat::number_of_executed_units: 11934" -> {"number_of_executed_units": "11934"}
    stats = dict(line.removeprefix("stat::").split(":", 1) for line in p.stderr.splitlines() if line.startswith("stat::"))
    print(f"{parser}: exit {p.returncode}, {stats.get('number_of_executed_units', '?').strip()} inputs, "
          f"{stats.get('new_units_added', '?').strip()} new", flush=True)
    if p.returncode != 0:
        print(p.stderr[-6000:])
        failed.append(parser)

print(f"fuzzers failed: {', '.join(failed)}" if failed else f"all {len(fuzzers)} fuzzers ran {seconds} s each without a finding")
sys.exit(1 if failed else 0)
