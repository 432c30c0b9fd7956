// A SimPort over a plain host buffer, for tests of the simulated AD102's engines without a bus:
// system memory is [sys_base, sys_base + size) of bus addresses; anything else fails as an IOMMU
// fault would. VRAM is an anonymous mapping (pages appear when touched), so 1 GiB+ costs nothing.
#pragma once

#include "drivers/pci/sim_device_model.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace baregpu::test {

class AnonymousVram {
public:
    explicit AnonymousVram(uint64_t bytes) : bytes_(bytes) {
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) throw std::runtime_error("mmap of test VRAM failed");
        data_ = static_cast<std::byte*>(p);
    }
    ~AnonymousVram() { munmap(data_, bytes_); }
    AnonymousVram(const AnonymousVram&) = delete;
    AnonymousVram& operator=(const AnonymousVram&) = delete;
    std::span<std::byte> span() { return {data_, bytes_}; }

private:
    std::byte* data_;
    uint64_t bytes_;
};

class FakeSimPort final : public pci::sim::SimPort {
public:
    FakeSimPort(uint64_t sys_base, uint64_t sys_bytes) : base_(sys_base), sys_(sys_bytes) {}

    std::span<std::byte> sys() { return sys_; }
    uint64_t sys_base() const { return base_; }
    std::atomic<unsigned> dma_faults{0};
    std::vector<std::string> violations;

    bool dma_read(BusAddress a, std::span<std::byte> out) override {
        if (!inside(a.value(), out.size())) return ++dma_faults, false;
        std::memcpy(out.data(), sys_.data() + (a.value() - base_), out.size());
        return true;
    }
    bool dma_write(BusAddress a, std::span<const std::byte> in) override {
        if (!inside(a.value(), in.size())) return ++dma_faults, false;
        std::memcpy(sys_.data() + (a.value() - base_), in.data(), in.size());
        return true;
    }
    std::byte* dma_host_memory(BusAddress a, uint64_t bytes) override {
        return inside(a.value(), bytes) ? sys_.data() + (a.value() - base_) : nullptr;
    }
    void raise_interrupt(unsigned) override { ++interrupts; }
    bool bus_master_enabled() override { return true; }
    std::span<std::byte> bar_memory(unsigned) override { return {}; }
    void violation(const std::string& what, const std::string& where, const std::string& source) override {
        std::lock_guard lock(mutex_);
        violations.push_back(what + " at " + where + " (" + source + ")");
    }
    uint64_t now_ns() const override { return now_; }
    void spend_ns(uint64_t ns) override { now_ += ns; }
    const std::string& device_name() const override { return name_; }
    std::atomic<unsigned> interrupts{0};

private:
    bool inside(uint64_t a, uint64_t n) const { return a >= base_ && a - base_ <= sys_.size() && n <= sys_.size() - (a - base_); }
    uint64_t base_;
    std::vector<std::byte> sys_;
    std::mutex mutex_;
    std::atomic<uint64_t> now_{0};
    std::string name_ = "sim:test-ad102";
};

}  // namespace baregpu::test
