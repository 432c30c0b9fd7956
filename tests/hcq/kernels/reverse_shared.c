/* Reverses each block of dst through workgroup-shared memory: stage the block into shared, then
 * write it back reversed. Exercises the shared-memory metadata and per-thread shared buffers. */
#include "drivers/hostcode/kernel_abi.h"

#define BLOCK 256

struct reverse_args {
    uint32_t *dst;
    const uint32_t *src;
};

void reverse_shared(const void *kernargs, const struct baregpu_dispatch *d) {
    const struct reverse_args *k = kernargs;
    uint32_t *shared = d->shared;
    uint32_t n = d->block[0];
    uint32_t base = d->group_id[0] * n;
    for (uint32_t i = 0; i < n; ++i) shared[i] = k->src[base + i];
    /* the "barrier": the loop above finished for every work-item of the group */
    for (uint32_t i = 0; i < n; ++i) k->dst[base + i] = shared[n - 1 - i];
}
BAREGPU_KERNEL(reverse_shared, 2, 0, BLOCK * 4, BLOCK)
