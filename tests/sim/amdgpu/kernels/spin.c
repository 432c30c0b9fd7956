/* Writes flag[2] = 1 (running), spins until flag[0] is non-zero — the host sets it through BAR0
 * while the kernel runs — then writes flag[1] = flag[0] + 1. Bounded (about 2^34 polls) so that a
 * broken model fails the test instead of hanging it. */
#include "drivers/hostcode/kernel_abi.h"

void spin(const void *kernargs, const struct baregpu_dispatch *d) {
    volatile uint32_t *flag = *(uint32_t *const *)kernargs;
    (void)d;
    flag[2] = 1;
    for (uint64_t i = 0; i < (1ull << 34) && flag[0] == 0; ++i) {
    }
    flag[1] = flag[0] + 1;
}
BAREGPU_KERNEL(spin, 1, 0, 0, 1)
