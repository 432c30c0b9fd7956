#include "drivers/sim/amdgpu/register_file.hpp"

#include <cstring>
#include <fmt/format.h>

namespace baregpu::sim::amdgpu {

namespace {
constexpr const char* kMmAccessSource = "Linux amdgpu_device.c amdgpu_device_mm_access (MM_INDEX/MM_INDEX_HI/MM_DATA)";
constexpr uint32_t kMmIndexVram = 0x80000000u;  // MM_INDEX bit 31: the index is a VRAM address
}  // namespace

bool RegisterFile::mm_vram_offset(uint64_t& offset) {
    const ChipState& s = chip_.state();
    offset = (uint64_t{s.mm_index_hi} << 31) | (s.mm_index & 0x7fffffffu);
    if (offset % 4 != 0 || offset + 4 > kVramBytes) {
        chip_.violation(fmt::format("MM_DATA access at VRAM offset {}: not a dword inside VRAM", hex(offset)),
                        reg_name(fixed::kMmData), kMmAccessSource);
        return false;
    }
    return true;
}

uint32_t RegisterFile::read(uint32_t address) {
    ChipState& s = chip_.state();
    switch (address) {
        case fixed::kMmIndex: return s.mm_index;
        case fixed::kMmIndexHi: return s.mm_index_hi;
        case fixed::kMmData: {
            if (!(s.mm_index & kMmIndexVram)) {  // a register by byte address
                uint32_t target = s.mm_index / 4;
                return target <= fixed::kMmIndexHi ? 0 : read(target);
            }
            uint64_t off = 0;
            if (!mm_vram_offset(off)) return 0xffffffff;
            uint32_t v = 0;
            std::memcpy(&v, chip_.vram().data() + off, 4);
            return v;
        }
        case fixed::kRccConfigMemsize:
            if (chip_.now() < chip_.ifwi_ready_ns) {
                chip_.violation("RCC_CONFIG_MEMSIZE read while the IFWI init is still running (MP0_SMN_C2PMSG_33 bit 31 "
                                "clear): the VRAM size and the discovery table are not there yet",
                                reg_name(address),
                                "Linux amdgpu_discovery.c amdgpu_discovery_read_binary_from_mem (poll mmMP0_SMN_C2PMSG_33 "
                                "bit 31 for up to 1 s first)");
                return 0;
            }
            return static_cast<uint32_t>(kVramBytes >> 20);
        default: break;
    }
    // MP0_SMN_C2PMSG_33 bit 31: the IFWI init is done. A chip that just powered on (a hot-plug, e.g.
    // behind USB4) needs 60 ms of modelled time: "generally it should be in the 60-100ms range"
    // (amdgpu_discovery.c); the model takes the low end.
    if (address == chip_.reg.psp_33) return chip_.now() >= chip_.ifwi_ready_ns ? 0x80000000u : 0;
    if (address == chip_.reg.rsmu_data) {
        uint32_t target = chip_.load(chip_.reg.rsmu_index) / 4;
        return target == address ? 0 : read(target);
    }
    uint32_t v = 0;
    if (psp_.read(address, v) || smu_.read(address, v) || gmc_.read(address, v) || ih_.read(address, v) || gc_.read(address, v))
        return v;
    return chip_.load(address);
}

void RegisterFile::write(uint32_t address, uint32_t value) {
    ChipState& s = chip_.state();
    const bool indirect_pair = address == fixed::kMmIndex || address == fixed::kMmIndexHi || address == fixed::kMmData ||
                               address == chip_.reg.rsmu_index || address == chip_.reg.rsmu_data;
    if (trace && !indirect_pair) trace(address, value, via_);
    switch (address) {
        case fixed::kMmIndex: s.mm_index = value; return;
        case fixed::kMmIndexHi: s.mm_index_hi = value; return;
        case fixed::kMmData: {
            if (!(s.mm_index & kMmIndexVram)) {
                uint32_t target = s.mm_index / 4;
                if (target > fixed::kMmIndexHi) {
                    via_ = " (MM_INDEX/MM_DATA)";
                    write(target, value);
                    via_ = "";
                }
                return;
            }
            uint64_t off = 0;
            if (mm_vram_offset(off)) std::memcpy(chip_.vram().data() + off, &value, 4);
            return;
        }
        case fixed::kRccConfigMemsize:
            chip_.violation("RCC_CONFIG_MEMSIZE is read-only", reg_name(address), "Linux nbio_v4_3.c get_memsize");
            return;
        default: break;
    }
    if (address == chip_.reg.rsmu_data) {
        uint32_t target = chip_.load(chip_.reg.rsmu_index) / 4;
        if (target != address) {
            via_ = " (RSMU)";
            write(target, value);
            via_ = "";
        }
        return;
    }
    if (address == chip_.reg.rcc_dev0_epf2_strap2 &&
        ((value ^ chip_.load(address)) & ~field::kStrapNoSoftResetDev0F2) != 0) {
        // Linux only clears STRAP_NO_SOFT_RESET_DEV0_F2, read-modify-write; the other straps
        // (BAR sizes, PASID width, ...) are the board's.
        chip_.violation(fmt::format("RCC_DEV0_EPF2_STRAP2 written with {} (was {}): only STRAP_NO_SOFT_RESET_DEV0_F2 "
                                    "may change", hex(value), hex(chip_.load(address))),
                        reg_name(address), "Linux nbio_v4_3.c / nbif_v6_3_1.c init_registers");
        return;
    }
    if (address == chip_.reg.rsmu_index && value % 4 != 0) {
        chip_.violation(fmt::format("BIF_BX_PF0_RSMU_INDEX {} is not a register's byte address", hex(value)),
                        reg_name(address), "tinygrad amdev.py AMDev.indirect_wreg (index = dword address * 4)");
    }
    if (psp_.write(address, value) || smu_.write(address, value) || gmc_.write(address, value) || ih_.write(address, value) ||
        gc_.write(address, value))
        return;
    chip_.store(address, value);
}

uint64_t RegisterFile::bar5_read(uint64_t offset, unsigned width) {
    if (width != 4) {
        chip_.violation(fmt::format("{}-byte MMIO read: the register BAR takes 32-bit accesses", width),
                        fmt::format("BAR5+0x{:x}", offset), "Linux amdgpu_device.c amdgpu_device_rreg (readl)");
        return width == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * width)) - 1;
    }
    return read(static_cast<uint32_t>(offset / 4));
}

void RegisterFile::bar5_write(uint64_t offset, unsigned width, uint64_t value) {
    if (width != 4) {
        chip_.violation(fmt::format("{}-byte MMIO write: the register BAR takes 32-bit accesses", width),
                        fmt::format("BAR5+0x{:x}", offset), "Linux amdgpu_device.c amdgpu_device_wreg (writel)");
        return;
    }
    write(static_cast<uint32_t>(offset / 4), static_cast<uint32_t>(value));
}

}  // namespace baregpu::sim::amdgpu
