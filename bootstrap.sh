#!/usr/bin/env bash
# Set up, build and run baregpu on Debian 12. Installs the Debian packages it needs when they
# are missing (apt-get, through sudo unless already root), configures with Meson, builds.
#
#   ./bootstrap.sh run     build the tools and the Python module, then run the main job: `baregpu devices` (what this
#                          machine has), then `baregpu bench` on the default device (the first GPU
#                          that opens, else cpu)
#   ./bootstrap.sh test    build and run every test in an ASan+UBSan build, then, in the normal
#                          build (what `run` builds), the tests the sanitizers cannot run and the
#                          product's bench (meson suite `unsanitized`); the long suites (fuzzing,
#                          QEMU, soak) run in their brief form; the QEMU batch skips (77) saying why
#                          when qemu, a kernel or busybox is missing
#       --long             the long suites at full length
#       --no-sanitizers    every test in the normal build instead (local iteration only)
set -euo pipefail
cd "$(dirname "$0")"

packages=(
    g++ clang meson ninja-build pkg-config python3
    libpci-dev pci.ids libusb-1.0-0-dev libdrm-dev libfmt-dev catch2 libzstd-dev liblzma-dev
    llvm-19-dev llvm-19 lld-19 liblld-19-dev zlib1g-dev libclang-rt-14-dev libopenblas-dev
    # the Python module (python/) and its tests; meson-python for `pip install .`
    python3-dev pybind11-dev python3-numpy python3-pytest python3-mesonpy
    # dist/ (collectives across processes) and its tests under mpirun
    openmpi-bin libopenmpi-dev
    # tests/qemu: a Debian kernel booted under QEMU with a static busybox initramfs
    qemu-system-x86 linux-image-amd64 busybox-static kmod
)

install_missing() {
    local missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return
    echo "bootstrap: installing ${missing[*]}"
    local sudo=()
    [ "$(id -u)" -ne 0 ] && sudo=(sudo)
    "${sudo[@]}" apt-get update -q
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
}

configure() {  # dir, extra meson options...
    local dir=$1
    shift
    if [ ! -f "$dir/build.ninja" ]; then
        # Unity blocks of 12 sources: on CI's 2 cores this halves the compile time of a fresh
        # build (headers and template instantiations once per block, not once per file).
        meson setup "$dir" -Dunity=on -Dunity_size=12 "$@"
    fi
}

cmd=${1:-}
shift || true
long=brief
sanitizers=yes
for arg in "$@"; do
    case "$arg" in
        --long) long=full ;;
        --no-sanitizers) sanitizers=no ;;
        *) echo "bootstrap: unknown option $arg" >&2; exit 2 ;;
    esac
done

case "$cmd" in
    run)
        install_missing
        configure build
        ninja -C build product
        build/tools/baregpu/baregpu devices
        echo
        exec build/tools/baregpu/baregpu bench
        ;;
    test)
        install_missing
        # Long suites read BAREGPU_LONG (brief|full) to size themselves.
        export BAREGPU_LONG=$long
        # One more test than cores: the simulated devices' tests spend about a third of their time
        # waiting (measured: 1.3 of 2 cores busy with one test per core).
        jobs=$(( $(nproc) + 1 ))
        if [ "$sanitizers" = no ]; then
            configure build
            ninja -C build
            exec meson test -C build --print-errorlogs --num-processes "$jobs"
        fi
        # Every test once, in the build that checks the most. optimization and debug by name:
        # -Dbuildtype=debug would keep meson.build's default optimization=2 (slower to compile,
        # and it warns falsely in std::regex under ASan). The libraries at -O1 (the tests run in
        # them: a third faster than at -O0, for about the same compile time), the test code at
        # -O0 (tests/meson.build). Built by clang: with the sanitizers it compiles in about half
        # GCC's time, and checks what GCC's build does not. clang links the sanitizer runtime into
        # executables only, so shared libraries keep undefined __asan_* symbols: b_lundef off here
        # (the normal build enforces the layering with it, meson.build). Linked by lld 19 (in the
        # packages above): the instrumented test programs link in half binutils ld's time. Line
        # tables only, not full debug information: what ASan's and UBSan's reports print (file,
        # line, function), at less compile and link time.
        CC=clang CXX=clang++ CC_LD=/usr/bin/ld.lld-19 CXX_LD=/usr/bin/ld.lld-19 \
            configure build-asan -Db_sanitize=address,undefined -Db_lundef=false -Doptimization=1 \
            -Ddebug=false -Dcpp_args=-gline-tables-only
        ninja -C build-asan
        # The normal build, as `run` builds it (GCC, -O2, warnings as errors), compiles while the
        # sanitizer tests run, at the lowest priority: it takes what CPU they leave idle (waiting
        # on simulated devices; little, measured: about three quarters of it was done when they
        # ended), and their timing stays theirs.
        configure build
        nice -n 19 ninja -C build product > build/product-build.log 2>&1 &
        product=$!
        trap 'kill "$product" 2>/dev/null || true' EXIT
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            meson test -C build-asan --print-errorlogs --timeout-multiplier 4 --num-processes "$jobs"
        if ! wait "$product"; then
            cat build/product-build.log
            echo "bootstrap: the normal build failed" >&2
            exit 1
        fi
        trap - EXIT
        # What only the normal build runs: two builds of every test would not fit CI's 15 minutes
        # on two cores. One more at a time than above: the runs over the USB bridge mostly wait on
        # the modelled link.
        meson test -C build --suite unsanitized --print-errorlogs --num-processes "$((jobs + 1))"
        ;;
    *)
        sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
