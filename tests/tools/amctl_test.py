#!/usr/bin/env python3
"""`amctl` end to end on the simulated Navi31. Usage: amctl_test.py AMCTL FIRMWARE_DIR

Two `amctl load` runs, each its own process, on one temporary sim state dir: the first is a cold
start that prints every bring-up stage, the second a warm start with under 3 % of the cold
register operations. Then `status` (up, no owner), `info --json` (IP versions, temperature),
`reset` (the next load is cold again) and `--force-reset`. Skips (exit 77) without the firmware.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

AMCTL, FIRMWARE = sys.argv[1], pathlib.Path(sys.argv[2])
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


if not FIRMWARE.is_dir():
    print(f"FAIL: {FIRMWARE} is not there (the checkout's firmware/ directory)")
    sys.exit(1)

with tempfile.TemporaryDirectory() as tmp:
    env = dict(os.environ)
    env.update({"BAREGPU_SIM_STATE_DIR": os.path.join(tmp, "state"), "BAREGPU_LOCK_DIR": os.path.join(tmp, "locks"),
                "BAREGPU_FIRMWARE_PATH": str(FIRMWARE)})
    env.pop("BAREGPU_AM_RESET", None)
    os.makedirs(env["BAREGPU_SIM_STATE_DIR"])
    os.makedirs(env["BAREGPU_LOCK_DIR"])

    def run(*args):
        p = subprocess.run([AMCTL, *args], capture_output=True, text=True, env=env, timeout=120)
        return p.returncode, p.stdout, p.stderr

    rc, out, err = run("load", "--device", "sim-am:navi31")
    print(out, err)
    check(rc == 0, f"first load exits 0 (got {rc}: {err})")
    for stage in ("discovery", "firmware", "psp bootloader", "psp ring", "psp firmware", "rlc autoload", "smu", "gc hub"):
        check(stage in out, f"first load prints the '{stage}' stage")
    check("cold start" in out, "first load is a cold start")

    rc, out, err = run("load", "--device", "sim-am:navi31", "--json")
    check(rc == 0, f"second load exits 0 (got {rc}: {err})")
    warm = json.loads(out)
    check(warm["start"] == "warm", f"second load (a new process) is warm: {warm.get('start')}")
    rc, out, err = run("load", "--device", "sim-am:navi31", "--json", "--force-reset")
    cold = json.loads(out)
    check(cold["start"] == "cold" and cold["mode1_reset"], "--force-reset boots fully with a mode1 reset")
    check(warm["mmio_ops"] * 100 < cold["mmio_ops"] * 3,
          f"warm uses < 3 % of the cold register operations ({warm['mmio_ops']} vs {cold['mmio_ops']})")

    # The same chip behind a bridge running ASMedia's stock firmware, over UAS and over BOT: each a
    # cold boot (a fresh state dir), every stage printed as it ends, under 20 s of the link's
    # modelled time (the figure amctl prints: "cold start in N ms (device clock)").
    for firmware in ("uas", "bot"):
        state = os.path.join(tmp, "state-" + firmware)
        os.makedirs(state)
        p = subprocess.run([AMCTL, "load", "--device", f"am:usb:sim?firmware={firmware}"], capture_output=True, text=True,
                           env=dict(env, BAREGPU_SIM_STATE_DIR=state), timeout=300)
        print(p.stdout, p.stderr)
        check(p.returncode == 0, f"load over {firmware} exits 0 (got {p.returncode}: {p.stderr})")
        for stage in ("psp bootloader", "psp firmware", "gc hub"):
            check(stage in p.stdout, f"load over {firmware} prints the '{stage}' stage")
        # The seconds-long PSP firmware stage shows each load as it ends (not a silent stage).
        steps = [line for line in p.stdout.splitlines() if line.strip().startswith("...") and " of " in line]
        check(len(steps) >= 10, f"load over {firmware} shows each PSP firmware load: {len(steps)} step lines")
        ms = [float(w) for line in p.stdout.splitlines() if "cold start in" in line for w in [line.split("cold start in ")[1].split()[0]]]
        check(len(ms) == 1 and ms[0] < 20000, f"a cold boot over {firmware} takes under 20 s of modelled time: {ms}")

    rc, out, err = run("status", "--device", "sim-am:navi31", "--json")
    status = json.loads(out)
    check(rc == 0 and status["up"] is True and status["owner_pid"] is None and status["pending_faults"] == [],
          f"status: up, unowned, no faults ({status})")

    rc, out, err = run("info", "--device", "sim-am:navi31", "--json")
    info = json.loads(out)
    check(rc == 0 and info["ip_versions"].get("GC") == "11.0.0" and info["ip_versions"].get("MP0") == "13.0.0",
          f"info names the IP versions ({info.get('ip_versions')})")
    check(info["temperature_c"] is not None and info["power_w"] is not None, "info reports temperature and power")
    # The boot pinned GFXCLK/UCLK/FCLK/SOCCLK to their top DPM level (soft min = max), and the SMU runs them there.
    clocks = info.get("clocks", {})
    check(sorted(clocks) == ["FCLK", "GFXCLK", "SOCCLK", "UCLK"], f"info lists the pinned clocks ({clocks})")
    gfx = clocks.get("GFXCLK", {})
    top = max(info.get("gfxclk_levels_mhz") or [0])
    check(gfx.get("min_mhz") == top and gfx.get("max_mhz") == top and gfx.get("current_mhz") == top,
          f"GFXCLK pinned to its top level {top} ({gfx})")

    rc, out, err = run("reset", "--device", "sim-am:navi31")
    check(rc == 0 and "mode1 reset done in" in out, f"reset reports its time ({out} {err})")
    rc, out, err = run("load", "--device", "sim-am:navi31", "--json")
    check(rc == 0 and json.loads(out)["start"] == "cold", "the load after a reset is cold")

    # The USB latency model: same operations, every register access a 100 us round trip.
    rc, out, err = run("load", "--device", "sim-am:navi31", "--json", "--link", "usb")
    usb = json.loads(out) if rc == 0 else {}
    check(usb.get("link") == "usb" and usb.get("start") == "warm" and usb["time_ms"] >= 100 * usb["mmio_reads"] / 1000,
          f"--link usb: a warm start costing >= 100 us per register read ({usb})")

    rc, out, err = run("load", "--device", "sim-am:navi99")
    check(rc == 1 and "sim-am:navi31 and sim-am:navi48" in err, f"an unknown model is an error naming the known ones ({err})")
    rc, out, err = run("frobnicate")
    check(rc == 2, "an unknown command is a usage error")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("amctl: all checks passed")
