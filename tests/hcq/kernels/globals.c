/* Exercises the loader: initialised global data (reached through the GOT with -fPIC), a
 * read-only table, zero-initialised data (.bss), a static function, calls to memcpy and memset
 * (real calls through the loader's stubs; compiled with -fno-builtin) and a pointer to memmove
 * stored in data (an absolute relocation against an import).
 * out[0..n) = table[i] + offset[i % 4] + bss_marker; run with one workgroup. */
#include "drivers/hostcode/kernel_abi.h"
#include <string.h>

uint32_t offsets[4] = {1000, 2000, 3000, 4000};
static const uint32_t table[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
uint32_t staging[64];
/* An imported function's address taken as data: a GOT entry for memmove. */
void *(*mover)(void *, const void *, unsigned long) = memmove;

static uint32_t pick(uint32_t i) { return table[i % 16] + offsets[i % 4]; }

struct globals_args {
    uint32_t *out;
    uint32_t n;
};

void globals(const void *kernargs, const struct baregpu_dispatch *d) {
    const struct globals_args *k = kernargs;
    uint32_t n = k->n < 64 ? k->n : 64;
    (void)d;
    memset(staging, 0, n * sizeof(uint32_t));
    for (uint32_t i = 0; i < n; ++i) staging[i] += pick(i);
    memcpy(k->out, staging, n * sizeof(uint32_t));
    mover(k->out, k->out, n * sizeof(uint32_t));
}
BAREGPU_KERNEL(globals, 1, 1, 0, 1)
