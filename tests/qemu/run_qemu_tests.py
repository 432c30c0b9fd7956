#!/usr/bin/env python3
"""Boots the installed Debian kernel under QEMU and runs the guest test batch in it.

Builds an initramfs (newc cpio, gzip) from: the guest test programs and the shared libraries they
need, a static busybox, and the kernel modules the tests need (with their dependencies, in dependency order), plus a small
/init. Boots it on q35 with TCG, an emulated Intel IOMMU, QEMU's edu and NVMe devices; reads the
serial console, which carries per-test markers (tests/qemu/guest_runner.hpp), and reports each
test. Exit status: 0 all passed, 1 a failure (or no complete batch within the deadline),
77 (Meson's "skipped") when QEMU, a kernel or a static busybox is missing: the message says which.

  run_qemu_tests.py --guest build/tests/qemu/guest_tests --workdir /tmp/qemu-run
      [--guest-usb build/tests/qemu/guest_usb_tests] [--accel tcg|kvm] [--break-dma]
      [--expect-failure TEST] [--timeout 240] [test names...]
"""
import argparse
import gzip
import os
import selectors
import shutil
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

SKIP = 77
# What the guest loads, by name; dependencies come from modinfo. vfio_iommu_type1 is only a soft
# dependency of vfio (the recipe's order), and nvme makes the bridge's IOMMU group not viable.
MODULES = ["vfio", "vfio_iommu_type1", "vfio-pci", "nvme"]
# For the USB batch: a virtual host + device controller pair and FunctionFS (recipe, USB part).
USB_MODULES = ["dummy_hcd", "usb_f_fs"]
LBA0_SIGNATURE = b"baregpu qemu nvme LBA 0"  # nvme_test.cpp reads it back
MARK_TEST = "@@BAREGPU-TEST "
MARK_DONE = "@@BAREGPU-BATCH DONE"

INIT = """#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /run/lock
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
echo "@@BAREGPU-GUEST UP $(/bin/busybox cat /proc/uptime)"
for m in $(/bin/busybox cat /modules.order); do
    /bin/busybox insmod "/lib/modules/$m" || echo "@@BAREGPU-GUEST insmod $m failed"
done
LD_LIBRARY_PATH=/lib/guest /guest_tests $(/bin/busybox cat /test_args)
echo "@@BAREGPU-GUEST EXIT $? $(/bin/busybox cat /proc/uptime)"
if [ -x /guest_usb_tests ]; then
    LD_LIBRARY_PATH=/lib/guest /guest_usb_tests $(/bin/busybox cat /test_args)
    echo "@@BAREGPU-GUEST USB EXIT $? $(/bin/busybox cat /proc/uptime)"
fi
/bin/busybox poweroff -f
"""


def skip(why):
    print(f"qemu-vfio: SKIPPED: {why}")
    sys.exit(SKIP)


def is_static_elf(path):
    """True when the ELF file has no PT_INTERP program header (needs no dynamic loader)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            return False
        phoff, = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != 3 for i in range(phnum))


def find_kernel():
    """The newest /boot/vmlinuz-<ver> whose /lib/modules/<ver> exists."""
    candidates = []
    for image in Path("/boot").glob("vmlinuz-*"):
        version = image.name[len("vmlinuz-"):]
        if Path(f"/lib/modules/{version}").is_dir():
            candidates.append((image.stat().st_mtime, version, image))
    if not candidates:
        return None, None
    _, version, image = max(candidates)
    return version, image


def modinfo(version, module, field):
    out = subprocess.run(["modinfo", "-k", version, "-F", field, module], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"modinfo -k {version} {module}: {out.stderr.strip()}")
    return out.stdout.strip()


def resolve_modules(version, names):
    """Module files in load order: every module after its dependencies, each once."""
    order, seen = [], set()

    def visit(name):
        path = modinfo(version, name, "filename")
        if path in seen or path == "(builtin)":
            return
        seen.add(path)
        for dep in filter(None, modinfo(version, name, "depends").split(",")):
            visit(dep)
        order.append(path)

    for name in names:
        visit(name)
    return order


def module_bytes(path):
    """The .ko itself; busybox insmod takes no compressed modules, so decompress here."""
    if path.endswith(".xz"):
        import lzma
        return lzma.decompress(Path(path).read_bytes())
    if path.endswith(".zst"):
        if not shutil.which("zstd"):
            skip(f"{path} is zstd-compressed and zstd is not installed")
        return subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
    return Path(path).read_bytes()


def cpio_newc(entries):
    """An uncompressed newc archive of (name, mode, data) entries (see the kernel's
    Documentation/driver-api/early-userspace/buffer-format.rst)."""
    out = bytearray()

    def pad4():
        out.extend(b"\0" * (-len(out) % 4))

    for ino, (name, mode, data) in enumerate(entries + [("TRAILER!!!", 0, b"")], start=1):
        encoded = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0]
        out.extend(b"070701" + b"".join(b"%08X" % v for v in fields))
        out.extend(encoded)
        pad4()
        out.extend(data)
        pad4()
    return bytes(out)


def shared_libraries(program):
    """(path, is_loader) of every shared library `program` needs, from ldd."""
    out = subprocess.run(["ldd", str(program)], capture_output=True, text=True, check=True).stdout
    libs = []
    for line in out.splitlines():
        words = line.split()
        if "=>" in words and len(words) >= 3 and words[2].startswith("/"):
            libs.append((words[2], False))
        elif words and words[0].startswith("/"):
            libs.append((words[0], True))  # the dynamic loader, needed at its own path
    return libs


def strip_debug(path, workdir):
    """The bytes of `path` without debug info (a third of the size, a faster boot), when objcopy exists."""
    if not shutil.which("objcopy"):
        return Path(path).read_bytes()
    stripped = workdir / (Path(path).name + ".stripped")
    subprocess.run(["objcopy", "--strip-debug", str(path), str(stripped)], check=True)
    return stripped.read_bytes()


def build_initramfs(workdir, guest, guest_usb, busybox, version, test_args):
    entries = [("bin", stat.S_IFDIR | 0o755, b""), ("lib", stat.S_IFDIR | 0o755, b""),
               ("lib/modules", stat.S_IFDIR | 0o755, b""), ("lib/guest", stat.S_IFDIR | 0o755, b"")]
    entries.append(("init", stat.S_IFREG | 0o755, INIT.encode()))
    entries.append(("bin/busybox", stat.S_IFREG | 0o755, Path(busybox).read_bytes()))
    programs = [("guest_tests", guest)]
    modules = MODULES
    if guest_usb:
        modules = MODULES + USB_MODULES
        programs.append(("guest_usb_tests", guest_usb))
    # The guest programs are linked against the build's shared libraries (compiling drivers/pci
    # again for a static binary cost minutes of CI): each library they need goes to /lib/guest,
    # once, and the dynamic loader to its own path.
    dirs = {"lib", "lib/guest"}
    copied = set()
    for name, program in programs:
        entries.append((name, stat.S_IFREG | 0o755, strip_debug(program, workdir)))
        for path, is_loader in shared_libraries(program):
            if path in copied:
                continue
            copied.add(path)
            if is_loader:
                parent = str(Path(path).parent).lstrip("/")
                parts = Path(parent).parts
                for i in range(1, len(parts) + 1):
                    d = "/".join(parts[:i])
                    if d not in dirs:
                        dirs.add(d)
                        entries.append((d, stat.S_IFDIR | 0o755, b""))
                entries.append((path.lstrip("/"), stat.S_IFREG | 0o755, Path(path).read_bytes()))
            else:
                entries.append((f"lib/guest/{Path(path).name}", stat.S_IFREG | 0o755, strip_debug(path, workdir)))
    order = []
    for path in resolve_modules(version, modules):
        name = Path(path).name.removesuffix(".xz").removesuffix(".zst")
        entries.append((f"lib/modules/{name}", stat.S_IFREG | 0o644, module_bytes(path)))
        order.append(name)
    entries.append(("modules.order", stat.S_IFREG | 0o644, "\n".join(order).encode() + b"\n"))
    entries.append(("test_args", stat.S_IFREG | 0o644, " ".join(test_args).encode() + b"\n"))
    image = workdir / "initramfs.cpio.gz"
    image.write_bytes(gzip.compress(cpio_newc(entries), compresslevel=1))
    return image, order


def make_disk(path, signature):
    data = bytearray(1 << 20)
    data[: len(signature)] = signature
    path.write_bytes(bytes(data))


def qemu_command(qemu, kernel, initramfs, workdir, break_dma, accel):
    append = "console=ttyS0 intel_iommu=on iommu=pt quiet panic=-1"
    if break_dma:
        append += " baregpu.break=dma"
    # Slots are pinned: tests/qemu/guest_devices.hpp names the same addresses.
    return [qemu, "-machine", f"q35,kernel-irqchip=split,accel={accel}", "-cpu", "max", "-m", "256", "-smp", "1",
            "-nodefaults", "-display", "none", "-serial", "stdio", "-no-reboot",
            "-device", "intel-iommu,intremap=on",
            "-device", "edu,addr=0x10",
            "-drive", f"file={workdir / 'nvme0.img'},if=none,id=nvm0,format=raw",
            "-device", "nvme,serial=baregpu0,drive=nvm0,addr=0x11",
            "-device", "pcie-pci-bridge,id=br0,addr=0x12",
            "-device", "edu,bus=br0,addr=0x1",
            "-drive", f"file={workdir / 'nvme1.img'},if=none,id=nvm1,format=raw",
            "-device", "nvme,serial=baregpu1,drive=nvm1,bus=br0,addr=0x2",
            "-kernel", str(kernel), "-initrd", str(initramfs), "-append", append]


def run_qemu(command, timeout, log_path):
    """Streams the console to stdout and the log; returns (lines, batch-done markers, seconds)."""
    start = time.monotonic()
    lines, finished = [], 0
    with open(log_path, "w") as log, subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                      stderr=subprocess.STDOUT) as proc:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        buffer = b""
        while True:
            left = timeout - (time.monotonic() - start)
            if left <= 0:
                print(f"qemu-vfio: no complete batch within {timeout} s: killing QEMU")
                proc.kill()
                break
            if not sel.select(timeout=min(left, 1.0)):
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for raw in complete:
                line = raw.decode(errors="replace").rstrip("\r")
                lines.append(line)
                log.write(line + "\n")
                print(line, flush=True)
                finished += line.startswith(MARK_DONE)
        proc.wait(timeout=10)
    return lines, finished, time.monotonic() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guest", required=True, help="the guest_tests binary")
    parser.add_argument("--guest-usb", help="the dynamically linked guest_usb_tests binary (optional)")
    parser.add_argument("--workdir", required=True, help="where the initramfs, disk images and console log go")
    parser.add_argument("--timeout", type=float, default=240, help="hard limit on the whole boot and batch, seconds")
    parser.add_argument("--accel", choices=["tcg", "kvm"], default="tcg",
                        help="QEMU accelerator; tcg by default because kvm hung on the machines the recipe was tried on")
    parser.add_argument("--break-dma", action="store_true",
                        help="boot with baregpu.break=dma: the DMA round trip uses an unmapped IOVA and must FAIL")
    parser.add_argument("--expect-failure", metavar="TEST",
                        help="succeed only if the batch completes and TEST fails (with --break-dma: proves the "
                             "IOMMU path is exercised and the test can go red)")
    parser.add_argument("tests", nargs="*", help="run only these guest tests")
    args = parser.parse_args()

    qemu = shutil.which("qemu-system-x86_64")
    if not qemu:
        skip("qemu-system-x86_64 is not installed (Debian: apt-get install qemu-system-x86; ./bootstrap.sh does)")
    version, kernel = find_kernel()
    if not kernel:
        skip("no /boot/vmlinuz-<ver> with a matching /lib/modules/<ver> (Debian: apt-get install linux-image-amd64)")
    if not os.access(kernel, os.R_OK):
        skip(f"{kernel} is not readable by this user (Debian installs it 0600 root); run as root or chmod it")
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not Path(busybox).exists() or not is_static_elf(busybox):
        skip(f"no static busybox ({busybox}); Debian: apt-get install busybox-static")
    if not shutil.which("modinfo"):
        skip("modinfo (kmod) is not installed: needed to find the kernel modules and their dependencies")

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    initramfs, order = build_initramfs(workdir, Path(args.guest), args.guest_usb, busybox, version,
                                       args.tests)
    make_disk(workdir / "nvme0.img", LBA0_SIGNATURE)
    make_disk(workdir / "nvme1.img", b"")
    print(f"qemu-vfio: kernel {kernel}, modules {' '.join(order)}, initramfs {initramfs.stat().st_size} bytes")
    command = qemu_command(qemu, kernel, initramfs, workdir, args.break_dma, args.accel)
    print("qemu-vfio: " + " ".join(command), flush=True)
    programs = 2 if args.guest_usb else 1
    lines, done_markers, seconds = run_qemu(command, args.timeout, workdir / "console.log")
    finished = done_markers == programs

    results = []
    for line in lines:
        if line.startswith(MARK_TEST + "END "):
            parts = line[len(MARK_TEST + "END "):].split()
            results.append((parts[0], parts[1], parts[2] if len(parts) > 2 else "?"))
    print(f"\nqemu-vfio: {len(results)} guest tests in {seconds:.1f} s (boot + batch, {args.accel}), console log "
          f"{workdir / 'console.log'}")
    for name, verdict, secs in results:
        print(f"  {verdict:4}  {name}  ({secs} s)")
    failed = [r for r in results if r[1] == "FAIL"]
    if args.expect_failure:
        verdict = next((r[1] for r in results if r[0] == args.expect_failure), None)
        if finished and verdict == "FAIL":
            print(f"qemu-vfio: {args.expect_failure} failed, as it must in this run")
            return 0
        print(f"qemu-vfio: FAILED: {args.expect_failure} was expected to fail; verdict: {verdict or 'not run'}"
              f"{'' if finished else ', batch incomplete'}")
        return 1
    if not finished:
        print("qemu-vfio: FAILED: the guest never reported the end of the batch (crash, panic or timeout; see above)")
        return 1
    if failed or not results:
        print(f"qemu-vfio: FAILED: {len(failed)} of {len(results)} guest tests failed")
        return 1
    print("qemu-vfio: all guest tests passed or were skipped with a reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
