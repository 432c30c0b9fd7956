/* The launch benchmark's kernel: does nothing, so what is measured is the queue. */
#include "drivers/hostcode/kernel_abi.h"

void empty(const void *kernargs, const struct baregpu_dispatch *dispatch) {
    (void)kernargs;
    (void)dispatch;
}
BAREGPU_KERNEL(empty, 0, 0, 0, 1024)

/* One store per launch: graph replays check that every kernel ran. */
struct bump_args {
    uint32_t *counter;
};
void bump(const void *kernargs, const struct baregpu_dispatch *dispatch) {
    const struct bump_args *a = kernargs;
    (void)dispatch;
    a->counter[0] += 1;
}
BAREGPU_KERNEL(bump, 1, 0, 0, 1)
