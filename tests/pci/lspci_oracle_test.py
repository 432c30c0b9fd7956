#!/usr/bin/env python3
"""Each dump's header quotes lspci's capability lines (the source's, or for a source without
them, what `lspci -F` printed). This checks those quotes against the installed lspci decoding the
same dump (`lspci -F FILE -vvv`), so dump_test.cpp's cross-check rests on lspci, not on our
transcription. Usage: lspci_oracle_test.py DUMP_DIR. Exits 77 (skipped) without lspci.
"""
import pathlib
import re
import shutil
import subprocess
import sys

CAP = re.compile(r"Capabilities: \[([0-9a-f]+)(?: v([0-9]+))?\]")

lspci = shutil.which("lspci") or next((p for p in ("/usr/bin/lspci", "/usr/sbin/lspci", "/sbin/lspci")
                                       if pathlib.Path(p).exists()), None)
if lspci is None:
    print("lspci is not installed (Debian: apt install pciutils): cannot cross-check the dumps; skipped")
    sys.exit(77)

failures = 0
dumps = sorted(pathlib.Path(sys.argv[1]).glob("*.txt"))
if not dumps:
    print(f"no dumps in {sys.argv[1]}")
    sys.exit(1)
for dump in dumps:
    quoted = [m.groups() for line in dump.read_text().splitlines() if line.startswith("# lspci-vv:")
              for m in [CAP.search(line)] if m]
    out = subprocess.run([lspci, "-F", str(dump), "-vvv"], capture_output=True, text=True)
    decoded = [m.groups() for m in CAP.finditer(out.stdout)]
    # Sources printed by older lspci omit "vN"; compare versions only where the quote has one.
    same = len(quoted) == len(decoded) and all(
        q[0] == d[0] and (q[1] is None or q[1] == d[1]) for q, d in zip(quoted, decoded))
    print(f"{dump.name}: {'agrees' if same else 'DIFFERS'}: quoted {quoted}, lspci {decoded}")
    failures += not same
sys.exit(1 if failures else 0)
