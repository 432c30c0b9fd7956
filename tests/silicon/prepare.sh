#!/usr/bin/env bash
# Packs the silicon kit on the build machine: the programs run.sh runs and the build's own shared libraries they
# load, in the build's layout (their $ORIGIN run paths keep working), plus the compiler's PTX for sm_89 and sm_90
# for ptxas on the GPU machine. System libraries stay behind (libLLVM.so.19.1 is 129 MB: what links it is skipped
# there unless that machine has it). Usage: tests/silicon/prepare.sh [BUILD_DIR] [KIT_DIR] (build, build-kit).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
kit=${2:-$root/build-kit}
limit_mib=60  # what a device run carries is 64 MiB in all

programs=(tools/baregpu/baregpu tools/fwinfo/fwinfo tests/hcq/hcq_acceptance tests/compiler/compiler_tests
          tests/tensor/tensor_tests)
rm -rf "$kit"
mkdir -p "$kit"
for p in "${programs[@]}"; do
    [ -x "$build/$p" ] || { echo "prepare: $build/$p is not built (ninja -C $build)" >&2; exit 1; }
    mkdir -p "$kit/$(dirname "$p")"
    cp "$build/$p" "$kit/$p"
    # The build's libraries it loads (ldd resolves the run paths), at the same relative place.
    ldd "$build/$p" | awk '{print $3}' | grep "^$build/" | while read -r lib; do
        rel=${lib#"$build"/}
        [ -e "$kit/$rel" ] && continue
        mkdir -p "$kit/$(dirname "$rel")"
        cp "$lib" "$kit/$rel"
    done
done
strip --strip-unneeded $(find "$kit" -type f) 2>/dev/null || true

# The compiler's kernels as PTX (tests/compiler/nvptx_test.cpp writes them when BAREGPU_PTX_DUMP_DIR is set).
BAREGPU_PTX_DUMP_DIR="$kit/ptx" "$build/tests/compiler/compiler_tests" "nvptx: PTX entry*" >/dev/null

size=$(du -sm "$kit" | cut -f1)
echo "prepare: $kit holds $(find "$kit" -type f | wc -l) files, ${size} MiB (PTX: $(ls "$kit/ptx" | wc -l) files)"
if [ "$size" -gt "$limit_mib" ]; then
    echo "prepare: over the ${limit_mib} MiB a device run may carry" >&2
    exit 1
fi
