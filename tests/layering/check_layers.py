#!/usr/bin/env python3
"""The dependency rule of docs/ARCHITECTURE.md, checked on every #include "..." in the tree.

A layer may include only the layers listed for it below. Usage: check_layers.py ROOT [--expect FILE,...]
Exits 1 and lists each offending include (file:line -> included header, and why) otherwise. With
--expect, exits 0 exactly when the files with offending includes are the ones listed (so a fixture
tree shows that each rule catches its violation).
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
    # The one place that composes models with drivers: the registry's .cpp files. Its headers name no
    # model: registry.hpp no driver either, registry_am.hpp the AM driver's types, registry_internal.hpp
    # (shared by the .cpp files) the PCI layer's.
    "drivers/registry.cpp": {"base", "hcq", "drivers", "firmware-loader"},
    "drivers/registry_am.cpp": {"base", "hcq", "drivers", "firmware-loader"},
    "drivers/registry_nv.cpp": {"base", "hcq", "drivers", "firmware-loader"},
    "drivers/registry_qcom.cpp": {"base", "hcq", "drivers", "firmware-loader"},
    "drivers/registry.hpp": {"base", "hcq"},
    "drivers/registry_am.hpp": {"base", "hcq", "drivers/am"},
    "drivers/registry_internal.hpp": {"base", "hcq", "drivers/pci", "drivers/registry.hpp"},
    "compiler": {"base", "hcq"},
    "tensor": {"base", "hcq", "compiler"},
    # Collectives across processes on MPI: above hcq, beside tensor.
    "dist": {"base", "hcq"},
    # Programs that show the API in use: devices by name, tensors, collectives.
    "examples": {"base", "hcq", "compiler", "tensor", "dist", "drivers/registry.hpp"},
    # Tools and benchmarks get devices from the registry and may use the drivers' own types; never a
    # model (drivers/sim): that is the registry's to compose.
    "tools": {"base", "hcq", "compiler", "tensor", "drivers/registry.hpp", "drivers/registry_am.hpp", "drivers/am",
              "drivers/pci", "drivers/usb", "drivers/hostcode", "firmware-loader", "bench", "dist"},  # bench/ runs behind `baregpu bench`
    "bench": {"base", "hcq", "compiler", "tensor", "drivers/registry.hpp", "drivers/registry_am.hpp", "drivers/am",
              "drivers/pci", "drivers/usb", "drivers/hostcode", "firmware-loader", "dist"},
    # The Python module: the tensor API and devices by name, like a tool; never a driver's own types.
    "python": {"base", "hcq", "compiler", "tensor", "drivers/registry.hpp"},
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


def main(root: pathlib.Path, expect=None) -> int:
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
        # A directory may include itself; a single file (the registry's) only what its entry lists.
        allowed = ALLOWED[layer] if layer.endswith((".cpp", ".hpp")) else ALLOWED[layer] | {layer}
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            if "/" not in target:
                continue  # a sibling header in the same directory
            if not any(target == a or target.startswith(a + "/") for a in allowed):
                problems.append(f"{rel}:{lineno}: includes \"{target}\" but {layer} may include only "
                                f"{', '.join(sorted(allowed))} (docs/ARCHITECTURE.md, the dependency rule)")
    for p in problems:
        print(p)
    if expect is not None:
        found = sorted({p.split(":", 1)[0] for p in problems})
        if found != sorted(expect):
            print(f"expected violations in exactly {sorted(expect)}, found them in {found}")
            return 1
        print(f"each expected violation was caught: {found}")
        return 0
    if not problems:
        print(f"dependency rule holds under {root}")
    return 1 if problems else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    expected = None
    if "--expect" in args:
        i = args.index("--expect")
        expected = [f for f in args[i + 1].split(",") if f]
        del args[i:i + 2]
    sys.exit(main(pathlib.Path(args[0] if args else "."), expected))
