#!/usr/bin/env python3
"""`fwinfo` end to end. Usage: fwinfo_test.py FWINFO FIRMWARE_DIR

On every file of FIRMWARE_DIR (firmware/): exits 0, names each file's format, and
--json parses with one ok entry per file. Then: a truncated copy (made in a temporary directory,
never committed) exits 1 with the FirmwareError's field and offset; --asic finds what navi31 and
navi48 need through BAREGPU_FIRMWARE_PATH, reports ad102's absent GSP-RM image as MISSING (exit
1), and an unknown ASIC is a usage error listing the known ones. Skips (exit 77) without the
firmware directory.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

FWINFO, FIRMWARE = sys.argv[1], pathlib.Path(sys.argv[2])
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def run(*args, env=None):
    e = dict(os.environ)
    e.pop("BAREGPU_FIRMWARE_PATH", None)
    if env:
        e.update(env)
    p = subprocess.run([FWINFO, *args], capture_output=True, text=True, env=e, timeout=120)
    return p.returncode, p.stdout, p.stderr


if not FIRMWARE.is_dir():
    print(f"FAIL: {FIRMWARE} is not there (the checkout's firmware/ directory)")
    sys.exit(1)

files = sorted(str(p) for p in FIRMWARE.rglob("*.bin"))
check(len(files) >= 41, f"expected the 41 files of MANIFEST.txt, found {len(files)}")

rc, out, err = run(*files)
check(rc == 0, f"fwinfo on every file exited {rc}: {err}")
for f in files:
    check(f + ": " in out, f"no header line for {f}")
check("ERROR" not in out, "an ERROR line in the text output")
check("amdgpu psp_firmware_header v2.0" in out, "the PSP sOS format is not named")
check("nvfw_bin_hdr + nvfw_hs_header_v2" in out, "the booter format is not named")

rc, out, err = run("--json", *files)
check(rc == 0, f"fwinfo --json exited {rc}: {err}")
doc = json.loads(out)
check(len(doc["files"]) == len(files), "one JSON entry per file")
for entry in doc["files"]:
    check(entry["ok"] is True, f"{entry['name']} is not ok: {entry.get('error')}")
    check(isinstance(entry["format"], str) and entry["format"], f"{entry['name']} has no format")
    check(isinstance(entry["fields"], dict) and isinstance(entry["parts"], list), f"{entry['name']} shape")
    for part in entry["parts"]:
        check({"name", "offset", "size"} <= set(part), f"{entry['name']} part without name/offset/size")
sos = next(e for e in doc["files"] if e["name"].endswith("psp_13_0_0_sos.bin"))
check(sos["fields"]["ucode_version"] == 0x310033, "psp_13_0_0_sos ucode_version")
check([p["name"] for p in sos["parts"]] == ["SYS_DRV", "SOS", "TOC", "KDB", "SPL", "RL"], "psp_13_0_0_sos binaries")

with tempfile.TemporaryDirectory() as tmp:
    cut = pathlib.Path(tmp) / "psp_13_0_0_sos.bin"
    cut.write_bytes((FIRMWARE / "amdgpu/psp_13_0_0_sos.bin").read_bytes()[:1000])
    rc, out, err = run(str(cut))
    check(rc == 1, f"a truncated file exited {rc}")
    check("size_bytes at offset 0: expected 1000 (the file's length), found 268304" in err, f"truncation error: {err!r}")
    rc, out, err = run("--json", str(cut))
    entry = json.loads(out)["files"][0]
    check(rc == 1 and entry["ok"] is False and "size_bytes" in entry["error"], "truncated file in JSON")

env = {"BAREGPU_FIRMWARE_PATH": str(FIRMWARE)}
for asic in ("navi31", "navi48"):
    rc, out, err = run("--asic", asic, env=env)
    check(rc == 0, f"--asic {asic} exited {rc}: {out}{err}")
    check("MISSING" not in out and "INVALID" not in out, f"--asic {asic} reports a problem:\n{out}")
    rc, out, err = run("--json", "--asic", asic, env=env)
    doc = json.loads(out)
    check(doc["ok"] is True and all(f["found"] for f in doc["files"]), f"--json --asic {asic}")
    check(doc["search_path"][0] == str(FIRMWARE), "BAREGPU_FIRMWARE_PATH is searched first")

rc, out, err = run("--asic", "ad102", env=env)
check(rc == 1, f"--asic ad102 without gsp-570.144.bin exited {rc}")
check("MISSING  nvidia/ad102/gsp/gsp-570.144.bin" in out, f"the missing GSP-RM image is not reported:\n{out}")
check("ok       nvidia/ad102/gsp/booter_load-570.144.bin" in out, "booter_load is not found")

rc, out, err = run("--asic", "navi99")
check(rc == 2 and "navi31" in err, f"an unknown ASIC: rc {rc}, {err!r}")
rc, out, err = run()
check(rc == 2 and "usage" in err, "no arguments is a usage error")

print(f"{len(failures)} failures" if failures else "fwinfo: all checks passed")
sys.exit(1 if failures else 0)
