/* dst[i] = value for i < n; also the memory-barrier tests' reader (copy), and a kernel with a
 * one-thread limit (max_threads 1) for the launch-limit tests. */
#include "drivers/hostcode/kernel_abi.h"

struct fill_args {
    uint32_t *dst;
    uint32_t n;
    uint32_t value;
};

void fill(const void *kernargs, const struct baregpu_dispatch *d) {
    const struct fill_args *k = kernargs;
    uint32_t base = d->group_id[0] * d->block[0];
    for (uint32_t i = 0; i < d->block[0]; ++i) {
        uint32_t x = base + i;
        if (x < k->n) k->dst[x] = k->value;
    }
}
BAREGPU_KERNEL(fill, 1, 2, 0, 1024)

struct copy_args {
    uint32_t *dst;
    const uint32_t *src;
    uint32_t n;
};

void copy_words(const void *kernargs, const struct baregpu_dispatch *d) {
    const struct copy_args *k = kernargs;
    uint32_t base = d->group_id[0] * d->block[0];
    for (uint32_t i = 0; i < d->block[0]; ++i) {
        uint32_t x = base + i;
        if (x < k->n) k->dst[x] = k->src[x];
    }
}
BAREGPU_KERNEL(copy_words, 2, 1, 0, 1)
