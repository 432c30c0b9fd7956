#include "drivers/qcom/cache.hpp"

#include <atomic>

namespace baregpu::qcom {

void clean_dcache(const void* address, uint64_t bytes) noexcept {
#if defined(__aarch64__)
    uint64_t ctr;
    asm volatile("mrs %0, ctr_el0" : "=r"(ctr));
    const uint64_t line = 4ull << ((ctr >> 16) & 0xf);  // CTR_EL0.DminLine: log2 of words per line
    uint64_t begin = reinterpret_cast<uint64_t>(address) & ~(line - 1);
    const uint64_t end = reinterpret_cast<uint64_t>(address) + bytes;
    for (; begin < end; begin += line) asm volatile("dc cvac, %0" ::"r"(begin) : "memory");
    asm volatile("dsb sy" ::: "memory");
#else
    (void)address;
    (void)bytes;
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace baregpu::qcom
