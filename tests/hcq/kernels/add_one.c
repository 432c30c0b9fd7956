/* b[i] = a[i] + 1 for i < n (tinygrad test_hcq's fixture kernel). */
#include "drivers/hostcode/kernel_abi.h"

struct add_one_args {
    float *b;
    const float *a;
    uint32_t n;
};

void add_one(const void *kernargs, const struct baregpu_dispatch *d) {
    const struct add_one_args *k = kernargs;
    uint32_t base = d->group_id[0] * d->block[0];
    for (uint32_t i = 0; i < d->block[0]; ++i) {
        uint32_t x = base + i;
        if (x < k->n) k->b[x] = k->a[x] + 1.0f;
    }
}
BAREGPU_KERNEL(add_one, 2, 1, 0, 1024)
