#!/usr/bin/env python3
"""Build a hand-written AMDGPU kernel: LLVM IR to the linked code object a chip loads.

Usage: amdgpu_kernel.py LLC LD_LLD GFX_ARCH INPUT.ll OUTPUT.so
llc compiles INPUT.ll for GFX_ARCH (amdgcn-amd-amdhsa, code object v5) into a relocatable object
beside OUTPUT, and ld.lld links it into the shared object (ET_DYN) drivers/am loads, as the compiler
links its own AMDGPU kernels (compiler/amdgpu_codegen.cpp).
"""
import subprocess
import sys


def main() -> int:
    llc, lld, arch, source, out = sys.argv[1:6]
    relocatable = out + ".o"
    for cmd in ([llc, "-mtriple=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-O2", "-filetype=obj", source, "-o", relocatable],
                [lld, "-shared", "--no-undefined", relocatable, "-o", out]):
        if subprocess.run(cmd).returncode != 0:
            print(f"amdgpu_kernel.py: {' '.join(cmd)} failed", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
