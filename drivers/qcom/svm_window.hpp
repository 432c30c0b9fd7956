// The SVM window: the CPU address range drivers/qcom places every GPU object in. With
// KGSL_MEMFLAGS_USE_CPU_MAP the GPU address is the CPU address, and KGSL takes only addresses
// inside its SVM ranges: kgsl.c kgsl_get_unmapped_area runs even for MAP_FIXED and ends in
// kgsl_iommu.c kgsl_iommu_set_svm_region, which returns -ENOMEM unless [addr, addr + len) lies
// inside the compat or the 64-bit SVM range (iommu_addr_in_svm_ranges). A window placed wherever
// mmap(NULL) puts it (near the top of a 39- or 48-bit address space) is refused on every phone.
// So the window is reserved PROT_NONE inside a known range, and one probe object mapped at its
// base shows that this kernel takes the range before anything else is placed there.
#pragma once

#include "drivers/qcom/kgsl_device.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace baregpu::qcom {

struct SvmRange {
    uint64_t begin = 0, end = 0;  // [begin, end)
    std::string what;
};

// KGSL_IOMMU_SVM_BASE64 / KGSL_IOMMU_SVM_END64 of qualcomm-linux/kgsl kgsl_iommu.h: 64-256 GiB.
inline constexpr uint64_t kKgslSvmBase64 = 0x10'0000'0000, kKgslSvmEnd64 = 0x40'0000'0000;
// The same two macros in older Android msm kernels' drivers/gpu/msm/kgsl_iommu.h ("currently we
// only support 36 bit addresses"): 28-32 GiB, 4 GiB in all.
inline constexpr uint64_t kKgslSvmBaseLegacy = 0x7'0000'0000, kKgslSvmEndLegacy = 0x8'0000'0000;
// Tried in this order: the current range first, then the older one.
std::vector<SvmRange> kgsl_svm_ranges();

class SvmWindow {
public:
    SvmWindow() = default;
    // Reserves at most `bytes` (a multiple of `align`, at least `min_bytes`) inside the first of
    // `ranges` where both the reservation and a one-page probe object mapped at its base succeed;
    // the window is smaller than asked when the range is. Throws baregpu::Error naming every range
    // tried and why it failed.
    static SvmWindow reserve(KgslDevice& kgsl, uint64_t bytes, uint64_t min_bytes, uint64_t align, const std::vector<SvmRange>& ranges,
                             const std::string& name);
    ~SvmWindow();
    SvmWindow(SvmWindow&& other) noexcept;
    SvmWindow& operator=(SvmWindow&& other) noexcept;

    std::byte* base() const { return base_; }
    uint64_t size() const { return size_; }
    const std::string& range() const { return range_; }

private:
    std::byte* base_ = nullptr;
    uint64_t size_ = 0;
    std::string range_;
};

}  // namespace baregpu::qcom
