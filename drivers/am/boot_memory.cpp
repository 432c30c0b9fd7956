#include "drivers/am/boot_memory.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

namespace baregpu::am {

namespace {
class BumpAllocator {
public:
    explicit BumpAllocator(BootLayout& layout) : layout_(layout) {}
    uint64_t take(const char* name, uint64_t size, uint64_t align) {
        uint64_t at = (next_ + align - 1) / align * align;
        if (at + size > kBootMemorySize) {
            throw Error("", fmt::format("boot memory: {} ({:#x} bytes) does not fit in the first {} MiB", name, size,
                                        kBootMemorySize >> 20));
        }
        next_ = at + size;
        layout_.allocations.push_back({name, at, size});
        return at;
    }

private:
    BootLayout& layout_;
    uint64_t next_ = 0;
};
}  // namespace

BootLayout make_boot_layout(const AsicInfo& asic) {
    BootLayout l;
    BumpAllocator a(l);
    l.root_pt = a.take("root page directory (PDB2)", 0x1000, 0x1000);
    l.gmc_scratch = a.take("GMC system-aperture default page", 0x1000, 0x1000);
    l.gmc_dummy = a.take("GMC protection-fault dummy page", 0x1000, 0x1000);
    l.ih_ring = a.take("IH ring 0", kIhRingSize, 0x1000);  // IH_RB_BASE holds addr >> 8
    l.ih_wptr = a.take("IH ring 0 WPTR writeback", 0x1000, 0x1000);
    l.psp_msg1 = a.take("PSP bootloader/firmware staging (msg1)", kPsp1MiB, kPsp1MiB);  // C2PMSG_36 = addr >> 20
    l.psp_cmd = a.take("PSP command buffer", kPspCmdBufferSize, 0x1000);
    l.psp_fence = a.take("PSP fence", kPspFenceBufferSize, 0x1000);
    l.psp_ring = a.take("PSP KM ring", kPspRingSize, 0x1000);
    l.has_tmr = asic.psp_setup_tmr;
    l.psp_tmr = l.has_tmr ? a.take("PSP TMR", kPspTmrMax, kPsp1MiB) : 0;  // PSP_TMR_ALIGNMENT 1 MiB
    l.smu_table = a.take("SMU driver table", kSmuDriverTableSize, 0x1000);
    // drivers/am's own record of what the boot set (the clocks it pinned), for later processes.
    l.driver_state = a.take("driver state (pinned clocks)", 0x1000, 0x1000);
    return l;
}

}  // namespace baregpu::am
