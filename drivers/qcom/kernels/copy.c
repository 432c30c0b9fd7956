/* The copy program the simulated A630's copy queue runs (drivers/qcom/qcom_engine.hpp): one
 * workgroup moves `size` bytes; memmove, so overlapping ranges copy as the CPU device's do. */
#include "drivers/hostcode/kernel_abi.h"

#include <stddef.h>
#include <string.h>

void qcom_copy(const void *kernargs, const struct baregpu_dispatch *dispatch) {
    const uint64_t *a = (const uint64_t *)kernargs; /* dst, src, size */
    (void)dispatch;
    if (a[2] != 0) memmove((void *)(uintptr_t)a[0], (const void *)(uintptr_t)a[1], (size_t)a[2]);
}
BAREGPU_KERNEL(qcom_copy, 2, 2, 0, 1)
