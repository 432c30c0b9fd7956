// A growable run of command bytes, 8-byte aligned. Recording appends; reset keeps the capacity,
// so a queue that is re-recorded the same way never allocates again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

namespace baregpu::hcq {

class CommandBuffer {
public:
    CommandBuffer() = default;
    explicit CommandBuffer(size_t capacity) { reserve(capacity); }

    // n bytes at the end (n is rounded up to 8); their contents are unspecified until written.
    std::byte* append(size_t n) {
        n = (n + 7) & ~size_t{7};
        if (size_ + n > capacity_) grow(size_ + n);
        std::byte* out = data() + size_;
        size_ += n;
        return out;
    }
    template <typename T>
    T* append_as() {
        static_assert(alignof(T) <= 8);
        return reinterpret_cast<T*>(append(sizeof(T)));
    }

    std::byte* data() { return reinterpret_cast<std::byte*>(words_.get()); }
    const std::byte* data() const { return reinterpret_cast<const std::byte*>(words_.get()); }
    size_t size() const { return size_; }
    std::span<std::byte> bytes() { return {data(), size_}; }
    std::span<const std::byte> bytes() const { return {data(), size_}; }
    void clear() { size_ = 0; }
    void reserve(size_t capacity) {
        if (capacity > capacity_) grow(capacity);
    }

private:
    void grow(size_t need) {
        size_t cap = capacity_ ? capacity_ : 256;
        while (cap < need) cap *= 2;
        auto words = std::make_unique_for_overwrite<uint64_t[]>(cap / 8);
        if (size_) std::memcpy(words.get(), words_.get(), size_);
        words_ = std::move(words);
        capacity_ = cap;
    }
    std::unique_ptr<uint64_t[]> words_;
    size_t size_ = 0;
    size_t capacity_ = 0;
};

}  // namespace baregpu::hcq
