#!/usr/bin/env python3
"""The dependency rule of ARCHITECTURE.md, checked on every #include "..." in the tree.

A layer may include only the layers listed for it below. Usage: check_layers.py ROOT
Exits 1 and lists each offending include (file:line -> included header, and why) otherwise.
"""
import pathlib
import re
import sys

# Directory (longest prefix wins) -> layers it may include. Every layer may include itself.
ALLOWED = {
    "base": {"base"},
    "firmware-loader": {"base"},
    "hcq": {"base"},
    "drivers/usb": {"base"},
    "drivers/pci": {"base", "drivers/usb"},
    # Host-native code objects (ELF loader, kernel ABI, the host-program descriptor): shared by the
    # CPU device, the simulated GPUs that run kernels as host code, and the drivers that load them.
    "drivers/hostcode": {"base"},
    # NVIDIA formats both ends of the link speak (the GSP message queue): the driver and the model.
    "drivers/nvshared": {"base"},
    # Models implement the simulated bus's and the fake seams' interfaces; never a driver.
    "drivers/sim": {"base", "drivers/pci", "drivers/usb", "drivers/hostcode", "drivers/nvshared", "firmware-loader"},
    "drivers/cpu": {"base", "hcq", "drivers/hostcode"},
    "drivers/am": {"base", "hcq", "drivers/pci", "drivers/hostcode", "firmware-loader"},
    "drivers/nv": {"base", "hcq", "drivers/pci", "drivers/hostcode", "drivers/nvshared", "firmware-loader"},
    "drivers/qcom": {"base", "hcq", "drivers/hostcode"},
    # The one place that composes models with drivers.
    "drivers/registry.cpp": {"base", "hcq", "drivers", "firmware-loader"},
    "drivers/registry.hpp": {"base", "hcq"},
    "drivers/registry_sim_nvrm.cpp": {"base", "hcq", "drivers"},
    "drivers/registry_sim_nvrm.hpp": {"base", "hcq"},
    "compiler": {"base", "hcq"},
    "tensor": {"base", "hcq", "compiler"},
    "tools": {"base", "hcq", "compiler", "tensor", "drivers", "firmware-loader", "bench"},  # bench/ runs behind `baregpu bench`
    "bench": {"base", "hcq", "compiler", "tensor", "drivers", "firmware-loader"},
    "tests": None,  # tests may include anything
}

LAYERS = sorted(ALLOWED, key=len, reverse=True)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = {".cpp", ".hpp", ".h", ".cc", ".c"}


def layer_of(rel: str):
    for layer in LAYERS:
        if rel == layer or rel.startswith(layer + "/"):
            return layer
    return None


def main(root: pathlib.Path) -> int:
    problems = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in SOURCES or not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        if rel.startswith("build") or "/build" in rel or rel.startswith("subprojects/"):
            continue
        layer = layer_of(rel)
        if layer is None or ALLOWED[layer] is None:
            continue
        own = layer.rsplit("/", 1)[0] if layer.endswith((".cpp", ".hpp")) else layer
        allowed = ALLOWED[layer] | {own}
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            if "/" not in target:
                continue  # a sibling header in the same directory
            if not any(target == a or target.startswith(a + "/") for a in allowed):
                problems.append(f"{rel}:{lineno}: includes \"{target}\" but {layer} may include only "
                                f"{', '.join(sorted(allowed))} (ARCHITECTURE.md, the dependency rule)")
    for p in problems:
        print(p)
    if not problems:
        print(f"dependency rule holds under {root}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
