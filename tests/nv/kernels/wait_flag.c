/* One workgroup that announces it runs (state[1] = 1), waits until the host sets state[0], then
 * writes state[2] = 2. The wait is bounded (about 2^31 polls) so a broken model cannot hang the test. */
#include "drivers/hostcode/kernel_abi.h"

struct wait_flag_args {
    volatile uint32_t *state;
};

void wait_flag(const void *kernargs, const struct baregpu_dispatch *d) {
    const struct wait_flag_args *k = kernargs;
    (void)d;
    k->state[1] = 1;
    for (uint32_t i = 0; i < 0x7fffffffu && k->state[0] == 0; ++i) {
    }
    k->state[2] = 2;
}
BAREGPU_KERNEL(wait_flag, 1, 0, 0, 1)
