/* The host-program descriptor: how a driver tells a simulated GPU which host-code kernel a
 * dispatch runs. C-compatible; the contract between the AM driver's program loader (drivers/am)
 * and the simulated MEC (drivers/sim/amdgpu/pm4_engine.cpp).
 *
 * On a simulated GPU whose kernels run as host code, COMPUTE_PGM_LO/HI (<< 8, as on hardware)
 * point at a 256-byte-aligned struct baregpu_host_program in GPU memory, written by the driver's
 * program loader. It names the host ELF code object (kernel_abi.h), itself in GPU memory, and the
 * kernel in it. At DISPATCH_DIRECT the model reads the descriptor and the image through the
 * VMID 0 page table, loads the image with drivers/hostcode's ELF loader (cached by
 * (image_va, image_hash)), and runs every workgroup.
 *
 * Kernarg pointer convention: COMPUTE_USER_DATA_0/1 hold the kernarg block's GPU VA (lo/hi). The
 * block has the HCQ layout: num_buffers u64 GPU virtual addresses, then the u32 values. The
 * model translates each buffer address to its host mirror of VRAM in a copy of the block; a
 * buffer whose page is unmapped, or maps system memory (the mirror covers VRAM only), is a GPU
 * page fault and the kernel does not run.
 */
#ifndef BAREGPU_DRIVERS_HOSTCODE_HOST_PROGRAM_H
#define BAREGPU_DRIVERS_HOSTCODE_HOST_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#define BAREGPU_HOST_PROGRAM_MAGIC 0x50484742u /* "BGHP" in little-endian bytes */
#define BAREGPU_HOST_PROGRAM_VERSION 1u
#define BAREGPU_HOST_PROGRAM_ALIGN 256u /* COMPUTE_PGM_LO/HI hold address >> 8 */
#define BAREGPU_HOST_PROGRAM_KERNEL_BYTES 64

struct baregpu_host_program { /* 128 bytes */
    uint32_t magic, version;  /* BAREGPU_HOST_PROGRAM_MAGIC, BAREGPU_HOST_PROGRAM_VERSION */
    uint64_t image_va;        /* GPU VA of the host ELF code object (bytes as the compiler produced them) */
    uint64_t image_size;      /* bytes */
    uint64_t image_hash;      /* FNV-1a 64 of the image: the executor's cache key with image_va */
    char kernel[BAREGPU_HOST_PROGRAM_KERNEL_BYTES]; /* kernel (descriptor) name, NUL-terminated */
    uint32_t kernarg_size;    /* bytes the dispatch's kernarg block holds */
    uint32_t reserved[7];     /* zero */
};

/* FNV-1a, 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3). */
static inline uint64_t baregpu_host_program_hash(const void *bytes, size_t size) {
    const unsigned char *p = (const unsigned char *)bytes;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < size; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#ifndef __cplusplus
_Static_assert(sizeof(struct baregpu_host_program) == 128, "host program layout");
#else
static_assert(sizeof(baregpu_host_program) == 128, "host program layout");
static_assert(offsetof(baregpu_host_program, kernel) == 32, "host program layout");
static_assert(offsetof(baregpu_host_program, kernarg_size) == 96, "host program layout");
#endif

#endif
