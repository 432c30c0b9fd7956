#!/usr/bin/env bash
# The silicon kit's one script: drives an NVIDIA GPU through nvidia.ko (the nvrm transport) and says, step by
# step, what passed. README.md beside it says what it needs and what each step shows. It reads the GPU's state
# and submits work; it never resets, unbinds, rebinds or reconfigures the GPU (no clocks, no persistence mode,
# no nvidia-smi setters), and every step runs under a timeout.
#
# Exit: 0 every step passed or was skipped with a reason; 1 a step failed; 77 no NVIDIA GPU (nothing to test).
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
kit=${BAREGPU_KIT:-$root/build-kit}
[ -d "$kit" ] || kit=$root/build
sysfs=${BAREGPU_SYSFS_ROOT:-/sys}
out=${OUT:-/tmp}/baregpu-silicon
mkdir -p "$out"

# ---- is there anything to test? ---------------------------------------------------------------
gpus=()
for dev in "$sysfs"/bus/pci/devices/*; do
    [ -r "$dev/vendor" ] && [ -r "$dev/class" ] || continue
    # NVIDIA (0x10de), display controller (class 0x03xxxx: VGA 0x0300, 3D 0x0302).
    if [ "$(cat "$dev/vendor")" = 0x10de ] && [[ "$(cat "$dev/class")" == 0x03* ]]; then gpus+=("$(basename "$dev")"); fi
done
if [ ${#gpus[@]} -eq 0 ]; then
    echo "silicon kit: no NVIDIA GPU found (no PCI function with vendor 0x10de and a display class under $sysfs/bus/pci/devices): nothing to test"
    exit 77
fi
addr=${BAREGPU_KIT_GPU:-${gpus[0]}}
driver=
[ -e "$sysfs/bus/pci/devices/$addr/driver" ] && driver=$(basename "$(readlink -f "$sysfs/bus/pci/devices/$addr/driver")")
ctl=${BAREGPU_KIT_NVIDIACTL:-/dev/nvidiactl}  # another path only to rehearse the script without a GPU
echo "silicon kit: NVIDIA GPU(s): ${gpus[*]}; testing $addr (kernel driver: ${driver:-none}); output in $out"
if [ ! -e "$ctl" ] || [ "$driver" != nvidia ]; then
    echo "silicon kit: $addr is not driven by nvidia.ko (driver '${driver:-none}', $ctl $( [ -e "$ctl" ] && echo present || echo missing));"
    echo "  the kit tests the nvrm transport only and never binds a driver itself"
    exit 1
fi
uri="nv:$addr?transport=nvrm"

# ---- steps --------------------------------------------------------------------------------------
names=() verdicts=() notes=()
record() { names+=("$1"); verdicts+=("$2"); notes+=("$3"); printf '   -> %s: %s %s\n' "$1" "$2" "${3:+($3)}"; }

# step NAME SECONDS COMMAND...: runs it under timeout, its output to $out/NAME.log (last 25 lines shown).
step() {
    local name=$1 secs=$2
    shift 2
    echo "== $name (at most ${secs} s): $*"
    timeout -k 5 "$secs" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    tail -n 25 "$out/$name.log" | sed 's/^/   | /'
    case $rc in
        0) record "$name" PASS "" ;;
        77) record "$name" SKIP "$(grep -m1 -i skip "$out/$name.log" | cut -c1-120)" ;;
        124 | 137) record "$name" FAIL "timed out after ${secs} s" ;;
        *) record "$name" FAIL "exit status $rc" ;;
    esac
    return $rc
}

# A binary that cannot load here (libLLVM.so.19.1 is not carried: 129 MB) is skipped, naming what is missing.
runnable() {
    local missing
    missing=$(ldd "$1" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
    if [ ! -x "$1" ]; then echo "$1 is not in the kit (tests/silicon/prepare.sh)"; return 1; fi
    if [ -n "$missing" ]; then echo "$(basename "$1") needs ${missing}which this machine does not have"; return 1; fi
    return 0
}
skip_unless_runnable() {
    local why
    if ! why=$(runnable "$1"); then
        echo "== $2: skipped: $why"
        record "$2" SKIP "$why"
        return 1
    fi
}

nvrm_log() { dmesg 2>/dev/null | grep -i nvrm | tail -n 40 | sed 's/^/   dmesg| /'; }

# 1. What this machine is (read-only queries).
{
    echo "date: $(date -u +%FT%TZ)"
    echo "kernel: $(uname -r)"
    cat /proc/driver/nvidia/version 2>/dev/null
    command -v nvidia-smi >/dev/null &&
        nvidia-smi --query-gpu=name,pci.bus_id,driver_version,compute_cap,memory.total --format=csv 2>/dev/null
    command -v ptxas >/dev/null && ptxas --version | tail -n 1
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null
} >"$out/machine.txt" 2>&1
echo "== machine"
sed 's/^/   | /' "$out/machine.txt"
driver_version=$(sed -n 's/.*Kernel Module *\([0-9][0-9.]*\).*/\1/p' /proc/driver/nvidia/version 2>/dev/null | head -n 1)
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
sm=sm_${cc:-90}

# 2. baregpu devices.
if skip_unless_runnable "$kit/tools/baregpu/baregpu" devices; then step devices 20 "$kit/tools/baregpu/baregpu" devices; fi

# 3. Smoke: open (class list, channels), a semaphore release, a CE copy, then a kernel launch.
acc=$kit/tests/hcq/hcq_acceptance
if skip_unless_runnable "$acc" smoke; then
    export BAREGPU_TEST_DEVICES=$uri BAREGPU_TIMEOUT_MS=5000
    step smoke-signal 30 "$acc" "signal: compute and copy queues set a signal the host sees" ||
        { nvrm_log; grep -o 'rptr=[0-9]* wptr=[0-9]*' "$out/smoke-signal.log" | head -n 2 | sed 's/^/   USERD GPGet\/GPPut: /'; }
    step smoke-copy 30 "$acc" "copy: small*" || nvrm_log
    # drivers/nv launches host-code kernels only (no SASS yet): on silicon this is expected to fail (an Xid).
    step smoke-kernel 30 "$acc" "exec: one kernel computes b = a + 1" || nvrm_log
    # 4. The HCQ acceptance suite on the GPU.
    step hcq-acceptance 150 "$acc" "~[short_timeout]" --reporter compact || nvrm_log
    unset BAREGPU_TEST_DEVICES BAREGPU_TIMEOUT_MS
fi

# 5. The compiler and tensor suites on the GPU (they link libLLVM).
for suite in compiler tensor; do
    bin=$kit/tests/$suite/${suite}_tests
    if skip_unless_runnable "$bin" "$suite"; then
        BAREGPU_TEST_DEVICES=$uri BAREGPU_CACHE_DIR=$out/kernel-cache step "$suite" 60 "$bin" --reporter compact
    fi
done

# 6. baregpu bench --json.
bench_json=
if skip_unless_runnable "$kit/tools/baregpu/baregpu" bench; then
    step bench 60 "$kit/tools/baregpu/baregpu" bench --device "$uri" --json && bench_json=$out/bench.log
fi

# 7. The same measurements through PyTorch/CUDA, our/CUDA ratios; our compiler's PTX assembled here by ptxas and
#    loaded by the CUDA driver, and a cubin nvcc builds here launched through it (the real-cubin check).
mkdir -p "$out/cubins"
if command -v ptxas >/dev/null && [ -d "$kit/ptx" ]; then
    step ptxas 60 bash -c "set -e; for p in '$kit'/ptx/*.$sm.ptx; do c='$out'/cubins/\$(basename \"\$p\" .ptx).cubin;
        ptxas -arch=$sm -o \"\$c\" \"\$p\"; cuobjdump -elf \"\$c\" > \"\$c.elf.txt\" 2>&1 || true; echo \"\$p -> \$c\"; done"
else
    record ptxas SKIP "$(command -v ptxas >/dev/null && echo "no PTX in the kit ($kit/ptx)" || echo "no ptxas on PATH")"
fi
if command -v nvcc >/dev/null; then
    step nvcc 60 nvcc -cubin -arch="$sm" -o "$out/cubins/axpy_fill.$sm.cubin" "$root/tests/nv/data/axpy_fill.cu"
fi
step cuda 120 python3 "$here/cuda_baseline.py" --out "$out/cuda.json" --cubins "$out/cubins" ${bench_json:+--ours "$bench_json"}

# 8. The GSP firmware nvidia.ko ships, parsed by fwinfo.
fw=/lib/firmware/nvidia/${driver_version:-none}
if skip_unless_runnable "$kit/tools/fwinfo/fwinfo" fwinfo; then
    if ls "$fw"/gsp*.bin >/dev/null 2>&1; then
        step fwinfo 30 "$kit/tools/fwinfo/fwinfo" "$fw"/gsp*.bin
    else
        record fwinfo SKIP "no $fw/gsp*.bin"
    fi
fi

# ---- summary ------------------------------------------------------------------------------------
echo
echo "== summary ($addr, nvidia.ko ${driver_version:-?}, $sm)"
failed=0
for i in "${!names[@]}"; do
    printf '   %-16s %-5s %s\n' "${names[$i]}" "${verdicts[$i]}" "${notes[$i]}"
    [ "${verdicts[$i]}" = FAIL ] && failed=1
done | tee "$out/summary.txt"
grep -q ' FAIL ' "$out/summary.txt" && failed=1
echo "   logs, cubins and JSON: $out"
exit $failed
