// The host clock every HCQ timing uses: CLOCK_MONOTONIC in nanoseconds (what steady_clock reads
// on Linux), and a pause hint for spin loops.
#pragma once

#include <cstdint>
#include <ctime>

namespace baregpu::hcq {

inline uint64_t host_now_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

// Tells the core we are spinning (frees pipeline resources for the sibling hyperthread).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

}  // namespace baregpu::hcq
