/* The sequence fuzzer's kernel: dst[i] = (dst[i] * 2654435761) ^ src[i] ^ (k + i), i < n.
 * Order-sensitive, so a missed dependency changes the result. */
#include "drivers/hostcode/kernel_abi.h"

struct mix_args {
    uint32_t *dst;
    const uint32_t *src;
    uint32_t n;
    uint32_t k;
};

void mix(const void *kernargs, const struct baregpu_dispatch *d) {
    const struct mix_args *a = kernargs;
    uint32_t base = d->group_id[0] * d->block[0];
    for (uint32_t i = 0; i < d->block[0]; ++i) {
        uint32_t x = base + i;
        if (x < a->n) a->dst[x] = (a->dst[x] * 2654435761u) ^ a->src[x] ^ (a->k + x);
    }
}
BAREGPU_KERNEL(mix, 2, 2, 0, 1024)
