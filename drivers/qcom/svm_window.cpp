#include "drivers/qcom/svm_window.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <sys/mman.h>
#include <utility>

namespace baregpu::qcom {

namespace {

constexpr uint64_t kProbeBytes = 4096;
constexpr uint64_t kHintStep = 1ull << 30;  // where in a range to try next when an address is taken

void* reserve_at(uint64_t address, uint64_t bytes, int extra_flags) {
    return ::mmap(reinterpret_cast<void*>(address), bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | extra_flags, -1, 0);
}

}  // namespace

std::vector<SvmRange> kgsl_svm_ranges() {
    return {{kKgslSvmBase64, kKgslSvmEnd64, "KGSL's 64-bit SVM range"}, {kKgslSvmBaseLegacy, kKgslSvmEndLegacy, "the older KGSL SVM range"}};
}

SvmWindow SvmWindow::reserve(KgslDevice& kgsl, uint64_t bytes, uint64_t min_bytes, uint64_t align, const std::vector<SvmRange>& ranges,
                             const std::string& name) {
    std::string tried;
    for (const SvmRange& r : ranges) {
        const uint64_t first = (r.begin + align - 1) & ~(align - 1);
        const uint64_t room = r.end > first ? (r.end - first) & ~(align - 1) : 0;
        const uint64_t size = std::min(bytes, room);
        std::string why;
        if (size < min_bytes) {
            why = fmt::format("holds 0x{:x} bytes, fewer than the 0x{:x} needed", room, min_bytes);
        } else {
            why = "no free address for the window";
            for (uint64_t hint = first; hint + size <= r.end; hint += kHintStep) {
                // MAP_FIXED_NOREPLACE: never over anything already there; a kernel that predates
                // it treats the address as a hint, hence the check.
                void* p = reserve_at(hint, size, MAP_FIXED_NOREPLACE);
                if (p == MAP_FAILED) continue;
                if (p != reinterpret_cast<void*>(hint)) {
                    ::munmap(p, size);
                    continue;
                }
                SvmWindow w;
                w.base_ = static_cast<std::byte*>(p);
                w.size_ = size;
                w.range_ = fmt::format("{} [0x{:x}, 0x{:x})", r.what, r.begin, r.end);
                try {
                    uint32_t id = kgsl.gpuobj_alloc_at(p, kProbeBytes, false);
                    kgsl.gpuobj_free(id, p, kProbeBytes);
                    reserve_at(hint, kProbeBytes, MAP_FIXED);  // the probe's page back into the window
                    return w;
                } catch (const Error& e) {
                    why = fmt::format("KGSL refused a GPU object mapped at 0x{:x}: {}", hint, e.what());
                    break;  // the kernel does not take this range (w releases the reservation)
                }
            }
        }
        tried += fmt::format("{}{} [0x{:x}, 0x{:x}): {}", tried.empty() ? "" : "; ", r.what, r.begin, r.end, why);
    }
    throw Error(name, fmt::format("cannot place the SVM window (0x{:x} bytes of GPU address space): {}", bytes, tried));
}

SvmWindow::~SvmWindow() {
    if (base_) ::munmap(base_, size_);
}

SvmWindow::SvmWindow(SvmWindow&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), size_(std::exchange(other.size_, 0)), range_(std::move(other.range_)) {}

SvmWindow& SvmWindow::operator=(SvmWindow&& other) noexcept {
    if (this != &other) {
        if (base_) ::munmap(base_, size_);
        base_ = std::exchange(other.base_, nullptr);
        size_ = std::exchange(other.size_, 0);
        range_ = std::move(other.range_);
    }
    return *this;
}

}  // namespace baregpu::qcom
