/* The host-code kernel ABI, version 1: what the CPU device (drivers/cpu) and the simulated GPUs
 * (drivers/sim, which run kernels as host code) execute. Included by kernels written in C, by the
 * loader, and by the code that runs kernels.
 *
 * A code object is an x86-64 ELF relocatable object (ET_REL, as `cc -c -fPIC` writes it). Each
 * kernel is a global function
 *
 *     void name(const void *kernargs, const struct baregpu_dispatch *dispatch);
 *
 * (System V calling convention) that runs ONE workgroup: it loops over the block's work-items
 * itself (dispatch->block), so barriers inside a workgroup are the kernel's own loop structure.
 * Workgroups of one launch run concurrently on the device's thread pool in no fixed order.
 * kernargs holds the HCQ layout (hcq/program.hpp): the buffers' addresses as u64, then the
 * values as u32. Device addresses are host addresses on the CPU device: dereference them. On a
 * simulated GPU the kernargs hold GPU virtual addresses; the model hands the kernel a copy whose
 * buffer addresses it has translated to its host mirror of GPU memory (host_program.h).
 *
 * Each kernel is described by a struct baregpu_kernel_descriptor in the section
 * ".baregpu.kernels" (the BAREGPU_KERNEL macro writes it); the loader finds kernels by the
 * descriptor's name and checks that a function of that name is defined.
 *
 * What a kernel may use: its arguments, the dispatch struct, the workgroup-shared memory
 * (shared_bytes, 64-byte aligned, contents undefined at entry), its stack (up to 64 KiB), and
 * memcpy/memset/memmove/memcmp (the only symbols the loader resolves from outside). No
 * constructors, no thread-local storage, no common symbols (-fno-common, the default since GCC 10).
 */
#ifndef BAREGPU_DRIVERS_HOSTCODE_KERNEL_ABI_H
#define BAREGPU_DRIVERS_HOSTCODE_KERNEL_ABI_H

#include <stdint.h>

#define BAREGPU_KERNEL_MAGIC 0x314b4742u /* "BGK1" in little-endian bytes */
#define BAREGPU_KERNEL_ABI_VERSION 1u
#define BAREGPU_KERNEL_SECTION ".baregpu.kernels"
#define BAREGPU_KERNEL_NAME_BYTES 64

struct baregpu_kernel_descriptor {
    uint32_t magic;       /* BAREGPU_KERNEL_MAGIC */
    uint32_t abi_version; /* BAREGPU_KERNEL_ABI_VERSION */
    char name[BAREGPU_KERNEL_NAME_BYTES]; /* the function's symbol name, NUL-terminated */
    uint32_t kernarg_size;  /* >= 8 * num_buffers + 4 * num_values */
    uint16_t num_buffers;
    uint16_t num_values;
    uint32_t shared_bytes;  /* workgroup-shared memory per workgroup */
    uint32_t private_bytes; /* stack per workgroup beyond the 64 KiB every kernel has; the loader refuses more than 1 MiB */
    uint32_t max_threads;   /* the largest block.x * y * z the kernel supports */
    uint32_t reserved[3];   /* zero */
};

struct baregpu_dispatch {
    uint32_t group_id[3]; /* this workgroup's position in the grid */
    uint32_t grid[3];     /* workgroups per dimension */
    uint32_t block[3];    /* work-items per workgroup per dimension */
    uint32_t thread;      /* which pool thread runs it (0 = the queue's own) */
    void *shared;         /* shared_bytes of workgroup memory */
};

typedef void (*baregpu_kernel_fn)(const void *kernargs, const struct baregpu_dispatch *dispatch);

#ifndef __cplusplus
_Static_assert(sizeof(struct baregpu_kernel_descriptor) == 104, "descriptor layout");
_Static_assert(sizeof(struct baregpu_dispatch) == 48, "dispatch layout");

/* Describe kernel `fn` taking nbuf buffers and nval 32-bit values. */
#define BAREGPU_KERNEL(fn, nbuf, nval, shared, maxthreads)                                              \
    __attribute__((used, section(BAREGPU_KERNEL_SECTION), aligned(8))) static const struct               \
        baregpu_kernel_descriptor fn##_baregpu_descriptor = {BAREGPU_KERNEL_MAGIC, BAREGPU_KERNEL_ABI_VERSION, \
                                                             #fn, 8u * (nbuf) + 4u * (nval), (nbuf), (nval),   \
                                                             (shared), 0u, (maxthreads), {0u, 0u, 0u}};
#else
static_assert(sizeof(baregpu_kernel_descriptor) == 104, "descriptor layout");
static_assert(sizeof(baregpu_dispatch) == 48, "dispatch layout");
#endif

#endif
