// A replaced global operator new that counts the allocations of the thread that asked it to
// (hot_path_test.cpp): the host's hot path is the caller's record and submit; a device's own
// threads (the cpu backend's command processors, a simulated GPU's engine thread) are the device.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace baregpu::test {
thread_local bool counting_allocations = false;
std::atomic<uint64_t> allocations{0};
}  // namespace baregpu::test

void* operator new(std::size_t size) {
    if (baregpu::test::counting_allocations) {
        baregpu::test::allocations.fetch_add(1, std::memory_order_relaxed);
    }
    if (void* p = std::malloc(size ? size : 1)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
