#!/usr/bin/env python3
"""The attack suite: what a careless user or another local user can do to baregpu's files.

Usage: attack_suite.py same-user|other-user WORKDIR AMCTL LOCK_PROBE CACHE_PROBE FIRMWARE_DIR

Every case sets a trap (a symbolic link where a tool creates a file, an object of someone else's
in the kernel cache, a flipped bit in a cached object, a full file system, FIFOs, foreign files
next to the cache) and checks that the tool refuses or repairs, saying why, without crashing.
Before the first case and after the last, every victim file (the files the traps point at, and
the user's files next to the cache) is hashed with its mode, owner and size: nothing outside the
tools' own directories may be created, changed or deleted.

same-user: the traps a user can set for themselves (or that a crash, a disk or a mistake sets).
other-user: the traps a second local user sets, run as uid 65534 through setpriv(1), in a private
mount namespace (unshare(1)) with its own /tmp and /run/lock so that the default directories are
the real names without touching this machine's. Needs root; exits 77 (skipped) saying why
otherwise.
"""
import hashlib
import os
import pathlib
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import time

MODE, WORK, AMCTL, LOCK_PROBE, CACHE_PROBE, FIRMWARE = sys.argv[1:7]
WORK = pathlib.Path(WORK)
NOBODY = 65534
results = []  # (name, status, detail)


def record(name, ok, detail):
    status = "ok" if ok else "FAIL"
    results.append((name, status, detail))
    print(f"{status:5} {name}: {detail}", flush=True)


def skip(name, why):
    results.append((name, "SKIP", why))
    print(f"SKIP  {name}: {why}", flush=True)


def run(args, extra_env=None, as_nobody=False, timeout=120, preexec=None, cwd=None):
    env = dict(os.environ)
    for var in ("BAREGPU_LOCK_DIR", "BAREGPU_SIM_STATE_DIR", "BAREGPU_CACHE_DIR", "BAREGPU_KERNEL_CACHE_MAX_MB", "BAREGPU_AM_RESET",
                "BAREGPU_DEVICE", "BAREGPU_TIMEOUT_MS", "BAREGPU_PROFILE", "XDG_CACHE_HOME"):
        env.pop(var, None)
    env["BAREGPU_FIRMWARE_PATH"] = FIRMWARE
    env.update(extra_env or {})
    if as_nobody:
        args = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *args]
        env["HOME"] = "/nonexistent"
    try:
        p = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, timeout=timeout, preexec_fn=preexec, cwd=cwd)
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {timeout} s"
    return p.returncode, p.stdout, p.stderr


def rc_text(rc):
    if rc is None:
        return "hung"
    if rc < 0:
        return f"killed by {signal.Signals(-rc).name}"
    return f"exit {rc}"


# ---- victims --------------------------------------------------------------------------------

VICTIMS = WORK / "victims"      # files traps point at
USERDIR = WORK / "userdir"      # a user's directory BAREGPU_CACHE_DIR names by mistake


def make_victims():
    VICTIMS.mkdir(mode=0o755)
    USERDIR.mkdir(mode=0o755)
    for name, text, mode in (("secret", "TOP SECRET\n", 0o600), ("notes", "my notes\n", 0o644), ("secret2", "key\n", 0o600),
                             ("nobody-notes", "nobody's notes\n", 0o644)):
        (VICTIMS / name).write_text(text)
        os.chmod(VICTIMS / name, mode)
    if os.geteuid() == 0:
        os.chown(VICTIMS / "nobody-notes", NOBODY, NOBODY)
    (USERDIR / "tile-map.png").write_bytes(os.urandom(2 << 20))
    (USERDIR / "kernel-notes.txt").write_text("notes\n" * 1000)
    (USERDIR / "kernel-config").write_text("x\n")
    (USERDIR / "tile-0123456789abcdef0123456789abcdef.txt.bak").write_text("backup\n")
    (USERDIR / "kernel-0123456789abcdef0123456789abcdef.o").write_text("a user's file, named as a cache entry would be\n" * 50000)


def snapshot():
    out = {}
    for d in (VICTIMS, USERDIR):
        for p in sorted(d.iterdir()):
            st = p.lstat()
            out[str(p)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_size,
                           hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else "")
    return out


def cache_entry(path):
    """A name the kernel cache gives its entries (kernel-<32 hex>.o, tile-<32 hex>.txt)."""
    p = pathlib.Path(path)
    return p.parent == USERDIR and re.fullmatch(r"(kernel-[0-9a-f]{32}\.o|tile-[0-9a-f]{32}\.txt)", p.name) is not None


# ---- helpers --------------------------------------------------------------------------------

def fresh(name, mode=0o700, owner=None):
    d = WORK / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    os.chmod(d, mode)
    if owner is not None:
        os.chown(d, owner, owner)
    return d


def entries(cache):
    return sorted(p for p in cache.iterdir() if p.name.startswith("kernel-") and p.name.endswith(".o"))


def probe(cache, extra=None, **kw):
    env = {"BAREGPU_CACHE_DIR": str(cache)}
    env.update(extra or {})
    rc, out, err = run([CACHE_PROBE], env, **kw)
    hits = None
    if rc == 0 and out.startswith("ok hits="):
        hits = int(out.split()[1].split("=")[1])
    return rc, out.strip(), err.strip(), hits


def flip_text_bit(path):
    """Bit 3 of byte 1 of the object's .text (the object follows a header in this cache's format)."""
    data = bytearray(path.read_bytes())
    elf = data.find(b"\x7fELF")
    if elf < 0:
        return False
    shoff = int.from_bytes(data[elf + 0x28:elf + 0x30], "little")
    shentsize = int.from_bytes(data[elf + 0x3a:elf + 0x3c], "little")
    shnum = int.from_bytes(data[elf + 0x3c:elf + 0x3e], "little")
    shstrndx = int.from_bytes(data[elf + 0x3e:elf + 0x40], "little")
    def sh(i):
        at = elf + shoff + i * shentsize
        return (int.from_bytes(data[at:at + 4], "little"), int.from_bytes(data[at + 0x18:at + 0x20], "little"),
                int.from_bytes(data[at + 0x20:at + 0x28], "little"))
    _, stroff, _ = sh(shstrndx)
    for i in range(shnum):
        name, off, size = sh(i)
        at = elf + stroff + name
        if data[at:data.index(0, at)] == b".text" and size > 1:
            data[elf + off + 1] ^= 0x08
            path.write_bytes(data)
            return True
    return False


def tmpfs_command(size, mountpoint, args):
    """args run with a tmpfs of `size` on mountpoint, in a mount namespace of their own; None when unshare cannot."""
    base = ["unshare", "--mount", "--propagation", "private"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--mount"]
    probe_cmd = base + ["sh", "-c", f"mount -t tmpfs -o size={size} tmpfs '{mountpoint}'"]
    if shutil.which("unshare") is None or subprocess.run(probe_cmd, capture_output=True).returncode != 0:
        return None
    return base + ["sh", "-c", f"mount -t tmpfs -o size={size} tmpfs '{mountpoint}' && exec \"$@\"", "sh", *map(str, args)]


# ---- same-user cases ------------------------------------------------------------------------

def same_user_cases():
    key = "0000:00:00.0"
    locks = fresh("locks")
    os.symlink(VICTIMS / "secret", locks / f"{key}.lock")
    rc, out, _ = run([LOCK_PROBE, key], {"BAREGPU_LOCK_DIR": str(locks)})
    record("lock-symlink", rc == 1 and "symbolic link" in out, f"{rc_text(rc)}: {out.strip()}")

    shared = fresh("locks-1777", 0o1777)
    os.symlink(VICTIMS / "secret", shared / f"{key}.lock")
    rc, out, _ = run([LOCK_PROBE, key], {"BAREGPU_LOCK_DIR": str(shared)})
    record("lock-world-writable-dir", rc == 1 and "every user can write it" in out, f"{rc_text(rc)}: {out.strip()}")

    state = fresh("state-symlink")
    os.symlink(VICTIMS / "notes", state / "sim-am-navi31.state")
    rc, out, err = run([AMCTL, "load", "--device", "sim-am:navi31"], {"BAREGPU_SIM_STATE_DIR": str(state),
                                                                       "BAREGPU_LOCK_DIR": str(fresh("locks-state"))})
    record("state-symlink", rc == 1 and "symbolic link" in err, f"{rc_text(rc)}: {err.strip()[-200:]}")

    # The chip's lock lives next to its state: nothing is left in the shared lock directory, and
    # no file either creates is writable by other users.
    state, locks = fresh("state"), fresh("locks-left")
    rc, out, err = run([AMCTL, "load", "--device", "sim-am:navi31"], {"BAREGPU_SIM_STATE_DIR": str(state), "BAREGPU_LOCK_DIR": str(locks)})
    made = {p.name: stat.S_IMODE(p.stat().st_mode) for p in state.iterdir()}
    record("lock-leftovers-and-modes", rc == 0 and not any(locks.iterdir()) and "sim-am-navi31.lock" in made
           and all(m & 0o022 == 0 for m in made.values()) and stat.S_IMODE(state.stat().st_mode) & 0o022 == 0,
           f"{rc_text(rc)}; shared lock dir holds {sorted(os.listdir(locks))}; state dir holds {made}")

    cache = fresh("cache-bitflip")
    rc1, out1, err1, _ = probe(cache)
    flipped = sum(flip_text_bit(p) for p in entries(cache))
    rc, out, err, hits = probe(cache)
    record("cache-bitflip", rc1 == 0 and flipped > 0 and rc == 0 and hits == 0,
           f"{flipped} objects with a flipped .text bit; then {rc_text(rc)}: {out or err}")

    shared = fresh("cache-1777", 0o1777)
    rc, out, err, hits = probe(shared)
    record("cache-world-writable-dir", rc == 0 and hits == 0 and "kernel cache not used" in err and not any(shared.iterdir()),
           f"{rc_text(rc)}: {out}; {err[-160:]}")

    rc, out, err, hits = probe(USERDIR, {"BAREGPU_KERNEL_CACHE_MAX_MB": "1"})
    rc2, out2, err2, hits2 = probe(USERDIR, {"BAREGPU_KERNEL_CACHE_MAX_MB": "1"})  # over the limit: evicts
    foreign = ("tile-map.png", "kernel-notes.txt", "kernel-config", "tile-0123456789abcdef0123456789abcdef.txt.bak")
    record("cache-eviction-foreign-files", rc == 0 and rc2 == 0 and all((USERDIR / f).is_file() for f in foreign),
           f"{rc_text(rc)}, {rc_text(rc2)}: {out2 or err2}; left: {sorted(os.listdir(USERDIR))}")

    cache = fresh("cache-special")
    probe(cache)
    names = entries(cache)
    for i, p in enumerate(names):
        p.unlink()
        if i % 3 == 0:
            os.mkfifo(p)
        elif i % 3 == 1:
            os.symlink("/dev/zero", p)
        else:
            p.mkdir()
    rc, out, err, hits = probe(cache, timeout=60)
    record("cache-fifo-devzero-directory-entries", rc == 0 and len(names) >= 3 and hits == 0, f"{len(names)} entries replaced; {rc_text(rc)}: {out or err}")

    # The old temporary name, <entry>.tmp<pid>, planted for the pids the next process may get.
    cache = fresh("cache-tmp-links")
    probe(cache)
    names = entries(cache)
    for p in names:
        p.unlink()
    try:
        last = int(pathlib.Path("/proc/sys/kernel/ns_last_pid").read_text())
    except OSError:
        last = os.getpid()
    for p in names:
        for pid in range(last + 1, last + 300):
            os.symlink(VICTIMS / "secret2", f"{p}.tmp{pid}")
    rc, out, err, hits = probe(cache)
    record("cache-tmp-symlinks", rc == 0 and all(p.is_file() and not p.is_symlink() for p in names),
           f"{len(names)} entries x 299 links; {rc_text(rc)}: {out or err}")
    shutil.rmtree(cache)

    # A full file system under the state file and under the cache.
    small = fresh("small", 0o755)
    cmd = tmpfs_command("1m", small, [AMCTL, "load", "--device", "sim-am:navi31"])
    env = {"BAREGPU_SIM_STATE_DIR": str(small / "state"), "BAREGPU_LOCK_DIR": str(fresh("locks-small"))}
    if cmd is not None:
        rc, out, err = run(cmd, env)
        record("full-disk-state-file (1 MiB tmpfs)", rc == 1 and "cannot reserve" in err and str(small) in err,
               f"{rc_text(rc)}: {err.strip()[-200:]}")
        cmd = tmpfs_command("24k", small, [CACHE_PROBE])
        rc, out, err = run(cmd, {"BAREGPU_CACHE_DIR": str(small / "cache")})
        record("full-disk-cache (24 KiB tmpfs)", rc == 0 and out.startswith("ok"), f"{rc_text(rc)}: {(out or err).strip()[-200:]}")
    else:
        def limit():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))
        rc, out, err = run([AMCTL, "load", "--device", "sim-am:navi31"], env, preexec=limit)
        record("full-disk-state-file (RLIMIT_FSIZE 64 MiB: no tmpfs here)", rc == 1 and "cannot reserve" in err,
               f"{rc_text(rc)}: {err.strip()[-200:]}")


# ---- other-user cases -----------------------------------------------------------------------

def other_user_cases(private_ns):
    key = "0000:00:00.0"
    attacker = fresh("attacker", 0o755, owner=NOBODY)

    if private_ns:
        # /run/lock is 1777 (as the distributions make it): anyone may create /run/lock/baregpu first.
        rc, _, err = run(["sh", "-c", f"mkdir -m 777 /run/lock/baregpu && ln -s '{VICTIMS / 'secret'}' /run/lock/baregpu/{key}.lock"],
                         as_nobody=True)
        rc2, out, _ = run([LOCK_PROBE, key])
        record("lock-default-dir-made-by-other-user", rc == 0 and rc2 == 1 and f"owned by uid {NOBODY}" in out,
               f"attacker {rc_text(rc)} {err.strip()}; root's lock: {rc_text(rc2)}: {out.strip()}")
        shutil.rmtree("/run/lock/baregpu")

        # An earlier version's directory: root's, mode 1777. It is made root's alone again; the
        # link planted in it is refused.
        os.mkdir("/run/lock/baregpu")
        os.chmod("/run/lock/baregpu", 0o1777)
        rc, _, err = run(["ln", "-s", str(VICTIMS / "secret"), f"/run/lock/baregpu/{key}.lock"], as_nobody=True)
        rc2, out, _ = run([LOCK_PROBE, key])
        mode = stat.S_IMODE(os.stat("/run/lock/baregpu").st_mode)
        record("lock-legacy-1777-dir", rc == 0 and rc2 == 1 and "symbolic link" in out and mode & 0o002 == 0,
               f"attacker {rc_text(rc)}; root's lock: {rc_text(rc2)}: {out.strip()}; directory now {mode:o}")

        # Another user can neither hold a device nor rewrite the pid the owner is named by.
        holder = subprocess.Popen([LOCK_PROBE, "0000:00:01.0", "hold"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = holder.stdout.readline().strip()
        lock_file = line.split(" ", 1)[1] if line.startswith("locked ") else ""
        rc_w, out_w, err_w = run(["sh", "-c", f"echo 1 > '{lock_file}'"], as_nobody=True)
        rc_l, out_l, _ = run([LOCK_PROBE, "0000:00:01.0"], as_nobody=True)
        rc_o, out_o, _ = run([LOCK_PROBE, "--owner", "0000:00:01.0"])
        holder.stdin.close()
        holder.wait(timeout=10)
        fmode = stat.S_IMODE(os.stat(lock_file).st_mode) if lock_file else 0o777
        record("lock-spoof-by-other-user", lock_file != "" and rc_w != 0 and rc_l == 1 and out_o.strip() == str(holder.pid)
               and fmode & 0o002 == 0,
               f"lock file mode {fmode:o}; other user's write: {rc_text(rc_w)} {err_w.strip()}; other user's lock: {out_l.strip()[-120:]}; "
               f"owner seen: {out_o.strip()} (holder {holder.pid})")

        # The simulator's default state directory, /tmp/baregpu-sim-<uid>, made by someone else first.
        rc, _, err = run(["sh", "-c", f"mkdir -m 777 /tmp/baregpu-sim-0 && ln -s '{VICTIMS / 'notes'}' /tmp/baregpu-sim-0/sim-am-navi31.state"],
                         as_nobody=True)
        rc2, out, err2 = run([AMCTL, "load", "--device", "sim-am:navi31"], {"BAREGPU_LOCK_DIR": str(fresh("locks-root"))})
        record("state-default-dir-made-by-other-user", rc == 0 and rc2 == 1 and f"owned by uid {NOBODY}" in err2,
               f"attacker {rc_text(rc)} {err.strip()}; root's amctl: {rc_text(rc2)}: {err2.strip()[-200:]}")

        # The same against uid 65534 by a third user (uid 4242) who made 65534's directory.
        os.mkdir(f"/tmp/baregpu-sim-{NOBODY}")
        os.symlink(VICTIMS / "nobody-notes", f"/tmp/baregpu-sim-{NOBODY}/sim-am-navi31.state")
        os.lchown(f"/tmp/baregpu-sim-{NOBODY}/sim-am-navi31.state", 4242, 4242)
        os.chown(f"/tmp/baregpu-sim-{NOBODY}", 4242, 4242)
        nobody_locks = fresh("locks-nobody", owner=NOBODY)
        rc, out, err = run([AMCTL, "load", "--device", "sim-am:navi31"], {"BAREGPU_LOCK_DIR": str(nobody_locks)}, as_nobody=True)
        record("state-default-dir-of-uid-65534-made-by-uid-4242", rc == 1 and "owned by uid 4242" in err,
               f"amctl as uid {NOBODY}: {rc_text(rc)}: {err.strip()[-200:]}")
    else:
        for name in ("lock-default-dir-made-by-other-user", "lock-legacy-1777-dir", "lock-spoof-by-other-user",
                     "state-default-dir-made-by-other-user", "state-default-dir-of-uid-65534-made-by-uid-4242"):
            skip(name, "no private mount namespace (unshare --mount failed): the real /run/lock and /tmp are not touched")

    # A lock or state directory named by the environment but made by the other user.
    rc, _, err = run(["sh", "-c", f"mkdir -m 777 '{attacker}/locks' && ln -s '{VICTIMS / 'secret'}' '{attacker}/locks/{key}.lock' && "
                      f"mkdir -m 777 '{attacker}/state' && ln -s '{VICTIMS / 'notes'}' '{attacker}/state/sim-am-navi31.state'"],
                     as_nobody=True)
    rc2, out, _ = run([LOCK_PROBE, key], {"BAREGPU_LOCK_DIR": f"{attacker}/locks"})
    record("lock-dir-named-in-env-made-by-other-user", rc == 0 and rc2 == 1 and f"owned by uid {NOBODY}" in out,
           f"attacker {rc_text(rc)} {err.strip()}; root's lock: {rc_text(rc2)}: {out.strip()}")
    rc2, out, err2 = run([AMCTL, "load", "--device", "sim-am:navi31"], {"BAREGPU_SIM_STATE_DIR": f"{attacker}/state",
                                                                        "BAREGPU_LOCK_DIR": str(fresh("locks-root2"))})
    record("state-dir-named-in-env-made-by-other-user", rc2 == 1 and f"owned by uid {NOBODY}" in err2,
           f"root's amctl: {rc_text(rc2)}: {err2.strip()[-200:]}")

    # A kernel cache another user wrote: root must compile its own objects, never run theirs.
    shared = fresh("cache-shared", 0o1777)
    rc, out, err = run(["sh", "-c", f"mkdir -m 755 '{shared}/c'"], as_nobody=True)
    rc1, out1, err1 = run([CACHE_PROBE], {"BAREGPU_CACHE_DIR": f"{shared}/c"}, as_nobody=True)
    planted = len(entries(shared / "c")) if (shared / "c").exists() else 0
    rc2, out2, err2, hits = probe(shared / "c")
    record("cache-planted-by-other-user", rc1 == 0 and planted > 0 and rc2 == 0 and hits == 0 and f"owned by uid {NOBODY}" in err2,
           f"uid {NOBODY} wrote {planted} objects ({rc_text(rc1)}: {(out1 or err1).strip()[-80:]}); root: {rc_text(rc2)}: {out2}; "
           f"{err2[-160:]}")


# ---- main -----------------------------------------------------------------------------------

def main():
    if MODE == "other-user":
        if os.geteuid() != 0:
            print("SKIPPED: the other-user cases run a second user (uid 65534) through setpriv, which needs root")
            sys.exit(77)
        if shutil.which("setpriv") is None:
            print("SKIPPED: setpriv(1) (util-linux) is not installed")
            sys.exit(77)
        if os.environ.get("BAREGPU_ATTACK_NS") != "1":
            # Own /tmp and /run/lock: the default directories by their real names, this machine's
            # untouched. What this run needs from the real /tmp (a build there) is bound back in.
            WORK.mkdir(parents=True, exist_ok=True)
            keep = sorted({pathlib.Path(a).parts[2] for a in sys.argv if a.startswith("/tmp/") and len(pathlib.Path(a).parts) > 2})
            script = "set -e; "
            if keep:
                script += "mount -t tmpfs tmpfs /mnt; mkdir /mnt/tmp; mount --bind /tmp /mnt/tmp; "
            script += "mount -t tmpfs -o mode=1777 tmpfs /tmp; "
            for c in keep:
                script += f"mkdir -p '/tmp/{c}'; mount --bind '/mnt/tmp/{c}' '/tmp/{c}'; "
            script += "mkdir -p /run/lock; mount -t tmpfs -o mode=1777 tmpfs /run/lock; exec \"$@\""
            cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", sys.executable, *sys.argv]
            if shutil.which("unshare") and subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode == 0:
                os.environ["BAREGPU_ATTACK_NS"] = "1"
                os.execvp(cmd[0], cmd)
    start = time.monotonic()
    WORK.mkdir(parents=True, exist_ok=True)
    for p in WORK.iterdir():  # emptied, not removed: it may be a mount point here
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    os.chmod(WORK, 0o755)
    make_victims()
    before = snapshot()
    if MODE == "same-user":
        same_user_cases()
    else:
        other_user_cases(private_ns=os.environ.get("BAREGPU_ATTACK_NS") == "1")
    after = snapshot()
    changed = [p for p in before if before[p] != after.get(p)]
    created = [p for p in after if p not in before and not cache_entry(p)]  # the cache's own entries may come
    record("victim files untouched", not changed and not created,
           f"{len(before)} files hashed; changed or deleted: {changed}; created: {created}")
    failed = [r for r in results if r[1] == "FAIL"]
    print(f"{len(results)} cases, {len(failed)} failed, {sum(r[1] == 'SKIP' for r in results)} skipped, "
          f"{time.monotonic() - start:.1f} s")
    if not failed:
        for p in WORK.iterdir():
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() and not p.is_symlink() else p.unlink()
    sys.exit(1 if failed else 0)


main()
