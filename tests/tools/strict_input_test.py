#!/usr/bin/env python3
"""Bad input to the tools is refused up front, by name, and nothing is lost or hidden.

Usage: strict_input_test.py BAREGPU AMCTL FWINFO FIRMWARE_DIR

Environment variables and options that make no sense are refused with the variable's or option's
name before any work runs (BAREGPU_TIMEOUT_MS, BAREGPU_PROFILE, BAREGPU_KERNEL_CACHE_MAX_MB,
TMPDIR, URI options, `--only`, `--devices`, `--bytes`, `--device=`, `--link`); `bench --profile`
that cannot be written fails before the run, and a trace that cannot be written at the end
loses no results; fwinfo refuses a FIFO or a directory at once instead of hanging; amctl says
what the firmware parsers warned about, and brings a simulated chip with damaged saved state
back with --force-reset; `bench --suite tensor` removes cache directories killed runs left.
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

BAREGPU, AMCTL, FWINFO, FIRMWARE = sys.argv[1], sys.argv[2], sys.argv[3], pathlib.Path(sys.argv[4])
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)
    else:
        print("ok:", what)


def run(args, env=None, timeout=60, extra=None):
    e = dict(env or os.environ)
    e.update(extra or {})
    start = time.monotonic()
    try:
        p = subprocess.run(args, capture_output=True, text=True, env=e, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", f"(timed out after {timeout} s)", timeout
    return p.returncode, p.stdout, p.stderr, time.monotonic() - start


with tempfile.TemporaryDirectory() as tmp:
    tmp = pathlib.Path(tmp)
    env = dict(os.environ)
    for var in ("BAREGPU_TIMEOUT_MS", "BAREGPU_PROFILE", "BAREGPU_KERNEL_CACHE_MAX_MB", "BAREGPU_DEVICE", "BAREGPU_AM_RESET"):
        env.pop(var, None)
    env.update({"BAREGPU_SIM_STATE_DIR": str(tmp / "state"), "BAREGPU_LOCK_DIR": str(tmp / "locks"),
                "BAREGPU_CACHE_DIR": str(tmp / "cache"), "BAREGPU_FIRMWARE_PATH": str(FIRMWARE)})
    os.makedirs(tmp / "locks", mode=0o700)
    bench = [BAREGPU, "bench", "--device", "cpu", "--suite", "hcq", "--quick", "--only", "hcq_submit"]

    # Environment variables: nonsense is refused naming the variable, before any work.
    for value in ("-5", "0", "abc", "9223372036855", "5ms"):
        rc, out, err, _ = run(bench, env, extra={"BAREGPU_TIMEOUT_MS": value})
        check(rc not in (0, None) and f"BAREGPU_TIMEOUT_MS={value}" in err and "hcq_submit" not in out,
              f"BAREGPU_TIMEOUT_MS={value} is refused naming it (rc {rc}: {err.strip()[-200:]})")
    rc, out, err, _ = run(bench, env, extra={"BAREGPU_TIMEOUT_MS": "20000"})
    check(rc == 0 and "hcq_submit" in out, f"BAREGPU_TIMEOUT_MS=20000 is taken (rc {rc}: {err.strip()[-200:]})")
    rc, out, err, _ = run(bench, env, extra={"BAREGPU_PROFILE": str(tmp / "no-such-dir" / "t.json")})
    check(rc not in (0, None) and "BAREGPU_PROFILE=" in err and "hcq_submit" not in out,
          f"an unwritable BAREGPU_PROFILE is refused before the run (rc {rc}: {err.strip()[-200:]})")
    tensor = [BAREGPU, "bench", "--device", "cpu", "--suite", "tensor", "--quick", "--only", "launch_overhead"]
    rc, out, err, _ = run(tensor, env, extra={"BAREGPU_KERNEL_CACHE_MAX_MB": "abc"})
    check(rc not in (0, None) and "BAREGPU_KERNEL_CACHE_MAX_MB=abc" in err,
          f"BAREGPU_KERNEL_CACHE_MAX_MB=abc is refused naming it (rc {rc}: {err.strip()[-200:]})")
    rc, out, err, _ = run(tensor, env, extra={"BAREGPU_TILE_SEARCH": "yes"})
    check(rc not in (0, None) and "BAREGPU_TILE_SEARCH=yes" in err, f"BAREGPU_TILE_SEARCH=yes is refused naming it (rc {rc}: {err.strip()[-200:]})")
    rc, out, err, _ = run(tensor, env, extra={"TMPDIR": str(tmp / "no-such-tmp")})
    check(rc not in (0, None) and "TMPDIR=" in err and "filesystem error" not in err,
          f"a TMPDIR that is not a directory is named (rc {rc}: {err.strip()[-200:]})")

    # bench --profile: checked before the run; a trace that cannot be written loses no results.
    rc, out, err, took = run(bench + ["--profile", str(tmp / "no-such-dir" / "t.json")], env)
    check(rc not in (0, None) and "--profile" in err and "hcq_submit" not in out and "bench: hcq_submit" not in err,
          f"bench --profile into a missing directory fails before the run (rc {rc}: {err.strip()[-200:]})")
    if os.path.exists("/dev/full"):
        rc, out, err, _ = run(bench + ["--profile", "/dev/full"], env)
        check(rc == 1 and "hcq_submit" in out and "/dev/full" in err,
              f"bench --profile /dev/full prints its results, then says the trace was not written (rc {rc}: out {out!r})")

    # Options and lists: empty items and names that match nothing are refused.
    for args, what in (([BAREGPU, "bench", "--device", "cpu", "--suite", "hcq", "--quick", "--only", "nosuchbench"], "--only nosuchbench"),
                       ([BAREGPU, "bench", "--device", "cpu", "--suite", "hcq", "--quick", "--only", ",hcq_submit"], "--only ,hcq_submit"),
                       ([BAREGPU, "p2p", "--devices", ","], "p2p --devices ,"),
                       ([BAREGPU, "p2p", "--devices", "cpu,,cpu:1"], "p2p --devices cpu,,cpu:1"),
                       ([BAREGPU, "p2p", "--bytes", "8"], "p2p --bytes 8"),
                       ([AMCTL, "load", "--device="], "amctl --device="),
                       ([AMCTL, "info", "--device", "sim-am:navi31", "--link", "usb"], "amctl info --link usb"),
                       ([AMCTL, "load", "--device", "am:usb:sim", "--link", "usb"], "amctl load --device am:usb:sim --link usb"),
                       ([AMCTL, "load", "--device", "sim-am:navi31", "--link", "serial"], "amctl --link serial")):
        rc, out, err, _ = run(args, env)
        check(rc == 2 and err.strip(), f"{what} is refused as a usage error (rc {rc}: {err.strip()[-160:]})")
    for device, needle in (("am:", "not an AM device"), ("am", "not an AM device")):
        rc, out, err, _ = run([AMCTL, "load", "--device", device], env)
        check(rc not in (0, None) and needle in err and "substr" not in err, f"amctl --device {device}: {needle} (rc {rc}: {err.strip()[-160:]})")
    for uri, needle in (("cpu?threads=100000&threads=2", "given twice"), ("cpu?threads=4294967297", "larger than"),
                        ("sim-nv:ad102?vram=1024G", "vram=")):
        rc, out, err, _ = run([BAREGPU, "bench", "--device", uri, "--suite", "hcq", "--quick", "--only", "hcq_submit"], env)
        check(rc not in (0, None) and needle in err and "bad_alloc" not in err, f"--device {uri}: '{needle}' (rc {rc}: {err.strip()[-160:]})")

    # fwinfo: special files are refused at once, saying what they are.
    fifo = tmp / "fifo.bin"
    os.mkfifo(fifo)
    rc, out, err, took = run([FWINFO, str(fifo)], env, timeout=20)
    check(rc == 1 and "FIFO" in out + err, f"fwinfo on a FIFO returns at once saying so (rc {rc}, {took:.1f} s: {(out + err).strip()[-160:]})")
    rc, out, err, _ = run([FWINFO, str(tmp)], env)
    check(rc == 1 and "a directory" in out + err and "9223372036854775807" not in out + err,
          f"fwinfo on a directory says it is one (rc {rc}: {(out + err).strip()[-160:]})")

    # bench --suite tensor removes the cache directories of runs that were killed.
    own_tmp = tmp / "own-tmp"
    own_tmp.mkdir()
    abandoned = own_tmp / "baregpu-bench-4194999-abcdef"  # no such pid (above pid_max's default)
    (abandoned).mkdir()
    (abandoned / "kernel-0.o").write_bytes(b"x")
    rc, out, err, _ = run(tensor, env, extra={"TMPDIR": str(own_tmp)})
    check(rc == 0 and not abandoned.exists() and not any(own_tmp.iterdir()),
          f"bench --suite tensor removed a killed run's cache directory and its own (rc {rc}: left {sorted(os.listdir(own_tmp))})")

    # amctl and the firmware parsers' warnings; a damaged simulated chip comes back with --force-reset.
    if not (FIRMWARE / "amdgpu").is_dir():
        print("skipping the amctl cases: no firmware in", FIRMWARE)
    else:
        fw = tmp / "fw" / "amdgpu"
        fw.mkdir(parents=True)
        mec = bytearray((FIRMWARE / "amdgpu" / "gc_11_0_0_mec.bin").read_bytes())
        mec[len(mec) // 2] ^= 0x08  # a payload bit: the header's CRC no longer matches
        (fw / "gc_11_0_0_mec.bin").write_bytes(mec)
        fw_env = dict(env, BAREGPU_FIRMWARE_PATH=f"{tmp / 'fw'}:{FIRMWARE}")
        rc, out, err, _ = run([AMCTL, "load", "--device", "sim-am:navi31"], fw_env)
        check(rc == 0 and "warning" in err and "gc_11_0_0_mec.bin" in err and "crc32" in err,
              f"amctl load says what the parsers warned about (rc {rc}: {err.strip()[-300:]})")

        state = tmp / "state" / "sim-am-navi31.state"
        check(state.exists(), "the state file is where BAREGPU_SIM_STATE_DIR says")
        discovery = (2 << 20) + (1 << 30) - (64 << 10)  # VRAM starts 2 MiB in; the table is its top 64 KiB
        with open(state, "r+b") as f:
            f.seek(discovery)
            f.write(bytes(64 << 10))
        rc, out, err, _ = run([AMCTL, "load", "--device", "sim-am:navi31"], env)
        check(rc == 1 and "--force-reset" in err, f"a damaged chip fails to open and the error says how to get it back (rc {rc}: {err.strip()[-300:]})")
        rc, out, err, _ = run([AMCTL, "load", "--device", "sim-am:navi31", "--force-reset"], env, timeout=90)
        check(rc == 0 and "power-cycled" in err, f"amctl load --force-reset brings the damaged chip back (rc {rc}: {err.strip()[-300:]})")
        rc, out, err, _ = run([AMCTL, "load", "--device", "sim-am:navi31"], env)
        check(rc == 0, f"and it opens normally afterwards (rc {rc}: {err.strip()[-200:]})")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("all checks passed")
