#!/bin/sh
# The first minute on a phone: runs the qcom_first_contact probe (tests/silicon/qcom_first_contact.cpp)
# against /dev/kgsl-3d0 under a one-minute timeout, with what the kernel says about the GPU, and keeps
# the output in $OUT/baregpu-qcom/first_contact.txt. Read-only: nothing is reset or reconfigured.
# Exit: the probe's (0 every finding as drivers/qcom assumes, 1 one differs), 77 no /dev/kgsl-3d0,
# 124 the probe ran past a minute.
#   tests/silicon/qcom_first_contact.sh [PROBE]   (default: build/tests/qcom/qcom_first_contact)
probe=${1:-build/tests/qcom/qcom_first_contact}
out=${OUT:-/tmp}/baregpu-qcom
mkdir -p "$out"
: > "$out/first_contact.txt"
if [ -e /dev/kgsl-3d0 ]; then
    {
        echo "== machine"
        uname -a
        for f in gpu_model gpubusy max_gpuclk; do
            [ -r "/sys/class/kgsl/kgsl-3d0/$f" ] && echo "$f: $(cat /sys/class/kgsl/kgsl-3d0/$f)"
        done
        ls -l /dev/kgsl-3d0
        echo "== probe"
    } >> "$out/first_contact.txt" 2>&1
fi
# The probe itself says when there is no /dev/kgsl-3d0 (exit 77).
timeout 60 "$probe" >> "$out/first_contact.txt" 2>&1
rc=$?
cat "$out/first_contact.txt"
exit $rc
