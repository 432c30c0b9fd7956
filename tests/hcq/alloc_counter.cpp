// A replaced global operator new that counts allocations while asked to (hot_path_test.cpp).
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace baregpu::test {
std::atomic<bool> counting_allocations{false};
std::atomic<uint64_t> allocations{0};
}  // namespace baregpu::test

void* operator new(std::size_t size) {
    if (baregpu::test::counting_allocations.load(std::memory_order_relaxed)) {
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
