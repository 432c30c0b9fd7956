#!/usr/bin/env python3
"""`baregpu devices` end to end. Usage: devices_test.py BAREGPU

On this machine: exits 0, lists cpu and the simulated devices, says "no GPU found" when the JSON
lists none, and --json parses and follows the schema of tools/baregpu/README.md. Against fake
sysfs trees (--sysfs-root): an empty bus, no bus at all, and a machine with GPUs in the states
that matter, checked field by field.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

BAREGPU = sys.argv[1]
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def run(*args, env=None):
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run([BAREGPU, "devices", *args], capture_output=True, text=True, env=e, timeout=60)
    return p.returncode, p.stdout, p.stderr


# The schema, version 1 (tools/baregpu/README.md): key -> allowed Python types.
HEX = str
TOP = {"schema_version": int, "pci_bus_visible": bool, "gpus": list, "builtin": list, "warnings": list}
GPU = {
    "address": str, "vendor_id": HEX, "device_id": HEX, "revision": HEX, "class": HEX,
    "subsystem_vendor_id": HEX, "subsystem_id": HEX, "vendor": str, "device": str,
    "subsystem": (str, type(None)), "class_name": str, "driver": (str, type(None)),
    "render_node": (str, type(None)), "iommu_group": (int, type(None)), "iommu_group_peers": list,
    "owner_pid": (int, type(None)), "backend": (str, type(None)), "family": (str, type(None)),
    "uri": (str, type(None)), "transport": (str, type(None)), "ready": bool, "reason": str,
}
PEER = {"address": str, "driver": (str, type(None))}
BUILTIN = {"name": str, "kind": str, "hcq_device": bool, "summary": str}


def check_keys(obj, schema, where):
    check(isinstance(obj, dict), f"{where} is an object")
    if not isinstance(obj, dict):
        return
    check(set(obj) == set(schema), f"{where} has exactly the keys {sorted(schema)}, got {sorted(obj)}")
    for key, types in schema.items():
        if key in obj:
            # bool is an int in Python; an int field must not be a bool.
            ok = isinstance(obj[key], types) and not (types is int and isinstance(obj[key], bool))
            check(ok, f"{where}.{key} has type {types}, got {obj[key]!r}")


def check_schema(doc, where):
    check_keys(doc, TOP, where)
    check(doc.get("schema_version") == 1, f"{where}: schema_version 1")
    for i, gpu in enumerate(doc.get("gpus", [])):
        check_keys(gpu, GPU, f"{where}.gpus[{i}]")
        for j, peer in enumerate(gpu.get("iommu_group_peers", [])):
            check_keys(peer, PEER, f"{where}.gpus[{i}].iommu_group_peers[{j}]")
        for key in ("vendor_id", "device_id", "subsystem_vendor_id", "subsystem_id"):
            check(len(gpu.get(key, "")) == 4 and int(gpu[key], 16) >= 0, f"{where}.gpus[{i}].{key} is 4 hex digits")
    for i, b in enumerate(doc.get("builtin", [])):
        check_keys(b, BUILTIN, f"{where}.builtin[{i}]")
    names = [b.get("name") for b in doc.get("builtin", [])]
    check(names[:1] == ["cpu"], f"{where}: cpu is the first built-in device ({names})")
    check("sim-edu" in names, f"{where}: sim-edu is listed ({names})")
    for w in doc.get("warnings", []):
        check(isinstance(w, str), f"{where}: warnings are strings")


def parse(stdout, where):
    try:
        return json.loads(stdout)
    except json.JSONDecodeError as e:
        check(False, f"{where}: output is JSON ({e})")
        return {}


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def add_function(root, address, vendor, device, cls, rev=0, driver=None, group=None, render=None):
    """A function in a fake sysfs tree, shaped like tests/pci/fake_sysfs.hpp makes them."""
    d = root / "bus/pci/devices" / address
    d.mkdir(parents=True)
    for name, value in (("vendor", f"0x{vendor:04x}"), ("device", f"0x{device:04x}"), ("class", f"0x{cls:06x}"),
                        ("revision", f"0x{rev:02x}"), ("subsystem_vendor", "0x0000"),
                        ("subsystem_device", "0x0000"), ("irq", "0")):
        write(d / name, value + "\n")
    (d / "config").write_bytes(bytes([vendor & 0xff, vendor >> 8, device & 0xff, device >> 8]) + bytes(60))
    if driver:
        (root / "bus/pci/drivers" / driver).mkdir(parents=True, exist_ok=True)
        os.symlink(f"../../../../bus/pci/drivers/{driver}", d / "driver")
    if group is not None:
        g = root / "kernel/iommu_groups" / str(group) / "devices"
        g.mkdir(parents=True, exist_ok=True)
        os.symlink(f"../../../../kernel/iommu_groups/{group}", d / "iommu_group")
        os.symlink(f"../../../../bus/pci/devices/{address}", g / address)
    if render:
        (d / "drm" / render).mkdir(parents=True)


PCI_IDS = """1002  Advanced Micro Devices, Inc. [AMD/ATI]
\t744c  Navi 31 [Radeon RX 7900 XT/7900 XTX]
\tab30  Navi 31 HDMI/DP Audio
10de  NVIDIA Corporation
\t2684  AD102 [GeForce RTX 4090]
C 03  Display controller
\t00  VGA compatible controller
C 04  Multimedia controller
\t03  Audio device
"""

# --- this machine -------------------------------------------------------------------------------
rc, out, err = run()
check(rc == 0, f"baregpu devices exits 0 on this machine (rc {rc}, stderr {err!r})")
check("Built-in devices" in out and "\n  cpu " in out and "\n  sim-edu " in out,
      f"human output lists cpu and sim-edu:\n{out}")
rc, js, err = run("--json")
check(rc == 0, f"--json exits 0 (rc {rc}, stderr {err!r})")
doc = parse(js, "this machine")
check_schema(doc, "this machine")
if doc.get("gpus") == []:
    check("no GPU found" in out, f"with no GPU the human output says so:\n{out}")
print(out)

with tempfile.TemporaryDirectory() as tmp:
    tmp = pathlib.Path(tmp)
    locks = {"BAREGPU_LOCK_DIR": str(tmp / "locks")}
    (tmp / "locks").mkdir()
    ids = tmp / "pci.ids"
    ids.write_text(PCI_IDS)

    # --- an empty PCI bus --------------------------------------------------------------------
    empty = tmp / "empty"
    (empty / "bus/pci/devices").mkdir(parents=True)
    rc, out, err = run("--sysfs-root", str(empty), "--pci-ids", str(ids), env=locks)
    check(rc == 0, f"empty bus: exit 0 (rc {rc}, {err!r})")
    check("no GPU found" in out, f"empty bus: says no GPU found:\n{out}")
    rc, js, err = run("--sysfs-root", str(empty), "--pci-ids", str(ids), "--json", env=locks)
    d = parse(js, "empty bus")
    check_schema(d, "empty bus")
    check(d.get("gpus") == [] and d.get("pci_bus_visible") is True and d.get("warnings") == [],
          f"empty bus: no GPUs, bus visible, no warnings: {d}")

    # --- no PCI bus at all (a container without /sys) ----------------------------------------
    rc, out, err = run("--sysfs-root", str(tmp / "nothing"), env=locks)
    check(rc == 0, f"no bus: still exit 0 (rc {rc}, {err!r})")
    check("no PCI bus is visible" in out and "no GPU found" in out, f"no bus: says why:\n{out}")
    rc, js, err = run("--sysfs-root", str(tmp / "nothing"), "--json", env=locks)
    d = parse(js, "no bus")
    check_schema(d, "no bus")
    check(d.get("pci_bus_visible") is False and any("no PCI bus is visible" in w for w in d.get("warnings", [])),
          f"no bus: pci_bus_visible false and a warning says why: {d}")

    # --- GPUs in the states that matter ------------------------------------------------------
    sysfs = tmp / "sys"
    add_function(sysfs, "0000:03:00.0", 0x1002, 0x744c, 0x030000, rev=0xc8, driver="amdgpu", group=14,
                 render="renderD128")
    add_function(sysfs, "0000:03:00.1", 0x1002, 0xab30, 0x040300, driver="snd_hda_intel", group=14)
    add_function(sysfs, "0000:04:00.0", 0x10de, 0x2684, 0x030000, rev=0xa1, driver="vfio-pci", group=15)
    add_function(sysfs, "0000:05:00.0", 0x10de, 0x2684, 0x030000, rev=0xa1, driver="nvidia", group=16)
    rc, js, err = run("--sysfs-root", str(sysfs), "--pci-ids", str(ids), "--json", env=locks)
    check(rc == 0, f"GPUs: exit 0 (rc {rc}, {err!r})")
    d = parse(js, "GPUs")
    check_schema(d, "GPUs")
    gpus = {g["address"]: g for g in d.get("gpus", [])}
    check(sorted(gpus) == ["0000:03:00.0", "0000:04:00.0", "0000:05:00.0"],
          f"GPUs: the three display functions, not audio: {sorted(gpus)}")
    amd = gpus.get("0000:03:00.0", {})
    want_amd = {
        "vendor_id": "1002", "device_id": "744c", "revision": "c8", "class": "030000",
        "vendor": "Advanced Micro Devices, Inc. [AMD/ATI]", "device": "Navi 31 [Radeon RX 7900 XT/7900 XTX]",
        "class_name": "VGA compatible controller", "subsystem": None, "driver": "amdgpu",
        "render_node": "/dev/dri/renderD128", "iommu_group": 14,
        "iommu_group_peers": [{"address": "0000:03:00.1", "driver": "snd_hda_intel"}], "owner_pid": None,
        "backend": "am", "family": "Navi31 (RDNA3, GC 11.0.0)", "uri": "am:0000:03:00.0", "ready": False,
        "reason": "bound to amdgpu: unbind or use vfio-pci (udev/README.md)",
    }
    for key, value in want_amd.items():
        check(amd.get(key) == value, f"Navi31 {key}: want {value!r}, got {amd.get(key)!r}")
    nv = gpus.get("0000:04:00.0", {})
    check(amd.get("transport") is None, f"Navi31 transport: want None, got {amd.get('transport')!r}")
    for key, value in {"driver": "vfio-pci", "backend": "nv", "transport": "nvpci", "ready": True, "uri": "nv:0000:04:00.0",
                       "render_node": None, "iommu_group_peers": []}.items():
        check(nv.get(key) == value, f"AD102 {key}: want {value!r}, got {nv.get(key)!r}")
    nvidia = gpus.get("0000:05:00.0", {})
    for key, value in {"driver": "nvidia", "backend": "nv", "transport": "nvrm", "ready": True, "uri": "nv:0000:05:00.0"}.items():
        check(nvidia.get(key) == value, f"AD102 on nvidia.ko {key}: want {value!r}, got {nvidia.get(key)!r}")

    rc, out, err = run("--sysfs-root", str(sysfs), "--pci-ids", str(ids), env=locks)
    check("0000:03:00.0  Advanced Micro Devices, Inc. [AMD/ATI] Navi 31" in out, f"human: the AMD block:\n{out}")
    check("verdict      bound to amdgpu: unbind or use vfio-pci" in out, f"human: the AMD verdict:\n{out}")
    check("verdict      ready via vfio (IOMMU group 15): open as nv:0000:04:00.0" in out, f"human: NV verdict:\n{out}")
    check("backend      nv (nvpci), AD102 (Ada)" in out, f"human: the NV transport:\n{out}")
    check("backend      nv (nvrm), AD102 (Ada)" in out, f"human: the nvidia.ko transport:\n{out}")
    # $BAREGPU_SYSFS_ROOT is the default root: the listing the registry opens from.
    rc, js2, err = run("--pci-ids", str(ids), "--json", env={**locks, "BAREGPU_SYSFS_ROOT": str(sysfs)})
    check(rc == 0 and [g["uri"] for g in parse(js2, "env root").get("gpus", [])] ==
          ["am:0000:03:00.0", "nv:0000:04:00.0", "nv:0000:05:00.0"], f"BAREGPU_SYSFS_ROOT is the default root: {js2[:300]}")

    # --- the URIs it prints open through the registry (or say why not), and the default tries them in order ---
    # Addresses and IOMMU groups no real machine is likely to have: nothing here reaches a real device.
    rig = tmp / "rig"
    add_function(rig, "0000:e1:00.0", 0x1002, 0x744c, 0x030000, driver="vfio-pci", group=9014)
    add_function(rig, "0000:e2:00.0", 0x10de, 0x2684, 0x030000, driver="vfio-pci", group=9015)
    add_function(rig, "0000:e3:00.0", 0x10de, 0x2684, 0x030000, driver="nvidia", group=9016)
    rig_env = {**locks, "BAREGPU_SYSFS_ROOT": str(rig)}
    rc, js, err = run("--pci-ids", str(ids), "--json", env=rig_env)
    listed = [(g["uri"], g["transport"]) for g in parse(js, "rig").get("gpus", [])]
    check(listed == [("am:0000:e1:00.0", None), ("nv:0000:e2:00.0", "nvpci"), ("nv:0000:e3:00.0", "nvrm")],
          f"rig: the three URIs and transports: {listed}")

    def bench(*args, env):
        e = dict(os.environ)
        e.pop("BAREGPU_DEVICE", None)
        e.update(env)
        return subprocess.run([BAREGPU, "bench", "--suite", "hcq", "--quick", "--only", "hcq_submit", *args],
                              capture_output=True, text=True, env=e, timeout=120)

    for uri, why in (("am:0000:e1:00.0", "vfio"), ("nv:0000:e2:00.0", ""), ("nv:0000:e3:00.0", "nvidia")):
        p = bench("--device", uri, env=rig_env)
        # The registry's checks name the URI; the PCI layer's errors (VFIO) name the function's address.
        check(p.returncode == 1 and uri[3:] in p.stderr and "no backend" not in p.stderr and why in p.stderr.lower(),
              f"bench --device {uri} on the rig fails naming it and saying why (rc {p.returncode}): {p.stderr!r}")
    p = bench("--json", env=rig_env)
    check(p.returncode == 0 and parse(p.stdout, "default bench").get("device") == "cpu", f"default bench on the rig runs on cpu: {p.stderr!r}")
    lines = p.stderr.splitlines()
    check(lines[:1] == ["baregpu bench: device cpu (no real GPU opened)"], f"default bench: says which device and why: {lines[:4]}")
    skipped = [l.split()[0] for l in lines[1:4]]
    check(skipped == ["am:0000:e1:00.0", "nv:0000:e2:00.0", "nv:0000:e3:00.0"] and all(" not used: " in l for l in lines[1:4]),
          f"default bench: each GPU passed over in the listed order, with why: {lines[:4]}")
    p = bench("--json", env={**rig_env, "BAREGPU_DEVICE": "cpu:3"})
    check(p.returncode == 0 and p.stderr.startswith("baregpu bench: device cpu:3 ($BAREGPU_DEVICE)"),
          f"BAREGPU_DEVICE wins over the rig's GPUs: {p.stderr!r}")

# --- a GPU that is not on this machine: the error is about the missing device, never "no backend" -----------
for uri in ("nv:0000:01:00.0", "nv:0000:01:00.0?transport=nvrm", "am:0000:03:00.0"):
    address = uri.split("?")[0][3:]
    if os.path.exists(f"/sys/bus/pci/devices/{address}"):
        print(f"skip {uri}: this machine has a PCI function at {address}")
        continue
    p = subprocess.run([BAREGPU, "bench", "--device", uri, "--quick"], capture_output=True, text=True, timeout=120)
    check(p.returncode == 1 and "no backend" not in p.stderr and uri.split("?")[0] in p.stderr and
          ("no PCI function at " + address in p.stderr or "no /dev/nvidiactl" in p.stderr),
          f"bench --device {uri} on this machine names the missing device (rc {p.returncode}): {p.stderr!r}")
    check("no GPU found" not in out, "human: GPUs found, so no 'no GPU found'")

# --- the simulated chips' state is not touched ----------------------------------------------------
# Listing the sim-am models builds them only to read their PCI identity and BARs: ephemeral models,
# so no 1 GiB state file appears and none another process is driving gets mapped.
with tempfile.TemporaryDirectory() as state:
    for args in ((), ("--json",)):
        rc, out, err = run(*args, env={"BAREGPU_SIM_STATE_DIR": state})
        check(rc == 0, f"devices {args} with an empty state dir exits 0 (rc {rc}, {err!r})")
        check("sim-am:navi31" in out and "sim-am:navi48" in out, f"devices {args} lists the sim-am models")
        if args == ("--json",):
            # Both simulated AMD chips run the HCQ backend (GC 11 and GC 12 queues).
            hcq = {b.get("name"): b.get("hcq_device") for b in parse(out, "devices --json").get("builtin", [])}
            check(hcq.get("sim-am:navi31") is True and hcq.get("sim-am:navi48") is True,
                  f"devices --json: both sim-am models are HCQ devices ({hcq})")
        # A real Adreno has no machine code path yet: every listing that names the Adreno models
        # says so plainly (and names qcom:0 itself where /dev/kgsl-3d0 exists).
        check("sim-qcom:a630" in out and "qcom:0) cannot run kernels yet" in out,
              f"devices {args} says a real Adreno (qcom:0) cannot run kernels yet")
        if args == ("--json",) and os.path.exists("/dev/kgsl-3d0"):
            kinds = {b.get("name"): b.get("kind") for b in parse(out, "devices --json").get("builtin", [])}
            check(kinds.get("qcom:0") == "kgsl", f"devices --json lists qcom:0 as kind kgsl ({kinds})")
        left = sorted(os.listdir(state))
        check(left == [], f"devices {args} leaves BAREGPU_SIM_STATE_DIR empty, found {left}")
    # A state file a driver left (or is using) stays as it was.
    marker = pathlib.Path(state) / "sim-am-navi31.state"
    marker.write_bytes(b"in use")
    rc, out, err = run(env={"BAREGPU_SIM_STATE_DIR": state})
    check(rc == 0 and marker.read_bytes() == b"in use", "devices leaves an existing state file untouched")

# --- arguments ----------------------------------------------------------------------------------
rc, out, err = run("--bogus")
check(rc == 2 and "unknown option" in err, f"an unknown option exits 2 and says so (rc {rc}, {err!r})")
rc, out, err = run("--sysfs-root")
check(rc == 1 and "needs a value" in err, f"a missing operand says so (rc {rc}, {err!r})")
rc, out, err = run("--help")
check(rc == 0 and "--json" in out, f"--help exits 0 and documents --json (rc {rc})")
p = subprocess.run([BAREGPU, "nonsense"], capture_output=True, text=True)
check(p.returncode == 2 and "unknown command" in p.stderr, f"an unknown command exits 2 ({p.returncode})")
p = subprocess.run([BAREGPU, "--help"], capture_output=True, text=True)
check(p.returncode == 0 and "devices" in p.stdout, "baregpu --help lists the devices command")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
