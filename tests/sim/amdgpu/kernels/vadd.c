/* c[i] = a[i] + b[i] + k for i < n: the simulated MEC's host-code dispatch test. Each workgroup
 * stages its slice of a in workgroup-shared memory first, so that a wrong shared-memory size or
 * shared buffers between concurrent workgroups show up as wrong sums. */
#include "drivers/hostcode/kernel_abi.h"

#define VADD_MAX_THREADS 256

struct vadd_args {
    const uint32_t *a;
    const uint32_t *b;
    uint32_t *c;
    uint32_t n;
    uint32_t k;
};

void vadd(const void *kernargs, const struct baregpu_dispatch *d) {
    const struct vadd_args *p = kernargs;
    uint32_t *stage = d->shared;
    const uint32_t threads = d->block[0] * d->block[1] * d->block[2];
    const uint32_t group = d->group_id[0] + d->grid[0] * (d->group_id[1] + d->grid[1] * d->group_id[2]);
    const uint32_t base = group * threads;
    for (uint32_t t = 0; t < threads; ++t)
        if (base + t < p->n) stage[t] = p->a[base + t];
    for (uint32_t t = 0; t < threads; ++t)
        if (base + t < p->n) p->c[base + t] = stage[t] + p->b[base + t] + p->k;
}
BAREGPU_KERNEL(vadd, 3, 2, VADD_MAX_THREADS * 4, VADD_MAX_THREADS)
