#!/usr/bin/env python3
"""Checks udev/70-baregpu.rules. Usage: check_rules.py RULES_FILE

Debian 12's udev (252) has no `udevadm verify` (it arrived in 253), so this parses the file the
way udev's rules parser reads it (udev(7), "Rules Files"): one rule per line, comma-separated
KEY op "value" pairs, match keys with == / !=, assignment keys with = += -= :=. It rejects what
udev would reject or silently ignore, then checks that the rules grant what udev/README.md
promises: group baregpu, mode 0660, on the VFIO, iommufd and ASMedia bridge nodes.
When `udevadm verify` exists (udev >= 253) it runs that too.

`check_rules.py --self-test` feeds the parser broken rules and fails unless each is rejected.
"""
import re
import shutil
import subprocess
import sys

MATCH_KEYS = {"ACTION", "DEVPATH", "KERNEL", "NAME", "SYMLINK", "SUBSYSTEM", "DRIVER", "KERNELS",
              "SUBSYSTEMS", "DRIVERS", "TAG", "TAGS", "TEST", "PROGRAM", "RESULT"}
MATCH_KEYS_WITH_ATTR = {"ATTR", "SYSCTL", "ATTRS", "ENV", "CONST", "TEST"}
ASSIGN_KEYS = {"NAME", "SYMLINK", "OWNER", "GROUP", "MODE", "TAG", "RUN", "LABEL", "GOTO", "IMPORT",
               "OPTIONS", "SECLABEL"}
ASSIGN_KEYS_WITH_ATTR = {"ATTR", "SYSCTL", "ENV", "RUN", "IMPORT", "SECLABEL"}
MATCH_OPS = {"==", "!="}
ASSIGN_OPS = {"=", "+=", "-=", ":="}

PAIR = re.compile(r'\s*([A-Z]+)(?:\{([^}]*)\})?\s*(==|!=|\+=|-=|:=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')


class RuleError(Exception):
    pass


def parse_line(line):
    """A rule line -> list of (key, attr, op, value). Raises RuleError saying what is wrong."""
    pairs = []
    pos = 0
    while pos < len(line):
        m = PAIR.match(line, pos)
        if not m:
            raise RuleError(f"cannot parse at column {pos + 1}: {line[pos:]!r} (expected KEY op \"value\")")
        key, attr, op, value, sep = m.groups()
        if op in MATCH_OPS:
            allowed = MATCH_KEYS_WITH_ATTR if attr is not None else MATCH_KEYS
            if key not in allowed:
                raise RuleError(f"{key}{'{' + attr + '}' if attr is not None else ''} cannot be matched with {op}")
        else:
            allowed = ASSIGN_KEYS_WITH_ATTR if attr is not None else ASSIGN_KEYS
            if key not in allowed:
                raise RuleError(f"{key} cannot be assigned with {op} (did you mean ==?)")
        if attr is not None and not attr:
            raise RuleError(f"{key}{{}} needs an attribute name")
        if key == "MODE" and not re.fullmatch(r"0?[0-7]{3,4}", value):
            raise RuleError(f"MODE=\"{value}\" is not an octal mode")
        if key == "GROUP" and not re.fullmatch(r"[a-z_][a-z0-9_-]*", value):
            raise RuleError(f"GROUP=\"{value}\" is not a group name")
        pairs.append((key, attr, op, value))
        pos = m.end()
        if sep == "" and pos < len(line):
            raise RuleError(f"missing comma before column {pos + 1}")
    if not any(op in MATCH_OPS for _, _, op, _ in pairs):
        raise RuleError("a rule without any match applies to every device")
    if not any(op in ASSIGN_OPS for _, _, op, _ in pairs):
        raise RuleError("a rule without any assignment does nothing")
    return pairs


def parse_rules(text):
    """The rules of a file: list of (line number, pairs). Comments and blank lines skipped;
    a trailing backslash continues a line, as udev allows."""
    rules = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not pending:
            start = number
            if not line.strip() or line.lstrip().startswith("#"):
                continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        try:
            rules.append((start, parse_line(line)))
        except RuleError as e:
            raise RuleError(f"line {start}: {e}") from None
    if pending:
        raise RuleError(f"line {start}: the file ends inside a continued line")
    return rules


def grants(rules, matches):
    """True when some rule matches exactly `matches` (a dict key -> value, ATTR{x} spelled as
    'ATTR{x}') and assigns GROUP="baregpu" and MODE="0660"."""
    for _, pairs in rules:
        m = {(k if a is None else f"{k}{{{a}}}"): v for k, a, op, v in pairs if op == "=="}
        assigned = {k: v for k, a, op, v in pairs if op in ASSIGN_OPS and a is None}
        if m == matches and assigned.get("GROUP") == "baregpu" and assigned.get("MODE") == "0660":
            return True
    return False


def usb(vendor, product):
    return {"SUBSYSTEM": "usb", "ENV{DEVTYPE}": "usb_device", "ATTR{idVendor}": vendor, "ATTR{idProduct}": product}


EXPECTED = {
    "VFIO group nodes /dev/vfio/<n>": {"SUBSYSTEM": "vfio"},
    "VFIO device cdevs /dev/vfio/devices/vfio<n>": {"SUBSYSTEM": "vfio-dev"},
    "iommufd /dev/iommu": {"SUBSYSTEM": "misc", "KERNEL": "iommu"},
    "ASM2464PD stock firmware 174c:2464": usb("174c", "2464"),
    "ASM2463 stock firmware 174c:2463": usb("174c", "2463"),
    "custom firmware add1:0001": usb("add1", "0001"),
    "custom firmware 3801:0001": usb("3801", "0001"),
}

BROKEN = [
    'SUBSYSTEM="vfio", GROUP="baregpu", MODE="0660"',  # assigns SUBSYSTEM instead of matching
    'SUBSYSTEM=="vfio", GROUP=="baregpu", MODE="0660"',  # matches GROUP, assigns nothing useful
    'SUBSYSTEM=="vfio", GROUP="baregpu" MODE="0660"',  # missing comma
    'SUBSYSTEM=="vfio", GROUP="baregpu", MODE="660a"',  # not octal
    'SUBSYSTEM=="vfio", GROUP="baregpu, MODE="0660"',  # unterminated quote
    'GROUP="baregpu", MODE="0660"',  # matches everything
    'SUBSYSTEM=="usb", ATTR{}=="174c", GROUP="baregpu"',  # empty attribute name
    'SUBSYSTEM=="vfio"',  # no assignment
    'SUBSYSTEM=="vfio", GROUP="Bare GPU", MODE="0660"',  # not a group name
    'SUBSYSTEM=="vfio", GROUP="baregpu", MODE="0660" \\',  # file ends mid-rule
]


def self_test():
    failures = 0
    for text in BROKEN:
        try:
            parse_rules(text + "\n")
        except RuleError as e:
            print(f"rejected as it should be: {text!r}: {e}")
            continue
        print(f"FAIL: accepted a broken rule: {text!r}")
        failures += 1
    good = parse_rules('# c\n\nSUBSYSTEM=="vfio", \\\n  GROUP="baregpu", MODE="0660"\n')
    if not grants(good, {"SUBSYSTEM": "vfio"}):
        print("FAIL: a continued line was not joined")
        failures += 1
    if grants(good, {"SUBSYSTEM": "vfio-dev"}):
        print("FAIL: grants() matched a rule it should not")
        failures += 1
    return 1 if failures else 0


def main(path):
    text = open(path).read()
    try:
        rules = parse_rules(text)
    except RuleError as e:
        print(f"{path}: {e}")
        return 1
    print(f"{path}: {len(rules)} rules parse")
    missing = [what for what, matches in EXPECTED.items() if not grants(rules, matches)]
    for what in missing:
        print(f"{path}: no rule gives group baregpu mode 0660 on {what}")
    for number, pairs in rules:
        for k, a, op, v in pairs:
            if k == "GROUP" and v != "baregpu":
                print(f"{path}: line {number} gives group {v!r}, not baregpu")
                missing.append(number)
    udevadm = shutil.which("udevadm")
    if udevadm and subprocess.run([udevadm, "verify", "--help"], capture_output=True).returncode == 0:
        r = subprocess.run([udevadm, "verify", "--no-style", path], capture_output=True, text=True)
        print(r.stdout + r.stderr)
        if r.returncode != 0:
            return 1
    else:
        print("udevadm verify is not available (udev < 253, e.g. Debian 12): structural check only")
    return 1 if missing else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    sys.exit(main(sys.argv[1]))
