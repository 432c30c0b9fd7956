/* Every work-item of the launch writes `value` at its flat global id:
 * out[(z * pitch_y + y) * pitch_x + x], (x, y, z) = group_id * block + local id. */
#include "drivers/hostcode/kernel_abi.h"

struct count_args {
    uint32_t *out;
    uint32_t pitch_x;
    uint32_t pitch_y;
    uint32_t value;
};

void count_items(const void *kernargs, const struct baregpu_dispatch *d) {
    const struct count_args *k = kernargs;
    for (uint32_t lz = 0; lz < d->block[2]; ++lz) {
        for (uint32_t ly = 0; ly < d->block[1]; ++ly) {
            for (uint32_t lx = 0; lx < d->block[0]; ++lx) {
                uint32_t x = d->group_id[0] * d->block[0] + lx;
                uint32_t y = d->group_id[1] * d->block[1] + ly;
                uint32_t z = d->group_id[2] * d->block[2] + lz;
                k->out[(z * k->pitch_y + y) * k->pitch_x + x] = k->value;
            }
        }
    }
}
BAREGPU_KERNEL(count_items, 1, 3, 0, 1024)
