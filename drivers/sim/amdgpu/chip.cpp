#include "drivers/sim/amdgpu/chip.hpp"

#include <cstring>
#include <fmt/format.h>

namespace baregpu::sim::amdgpu {

std::string hex(uint64_t value) { return fmt::format("0x{:x}", value); }
std::string reg_name(uint64_t address) { return fmt::format("register 0x{:x} (BAR5+0x{:x})", address, address * 4); }

uint32_t Chip::load(uint32_t address) {
    if (address < kBar5Dwords) return file_.registers()[address];
    ChipState& s = state();
    for (uint32_t i = 0; i < s.indirect_count && i < kIndirectRegisters; ++i)
        if (s.indirect[i].address == address) return s.indirect[i].value;
    return 0;
}

void Chip::store(uint32_t address, uint32_t value) {
    if (address < kBar5Dwords) {
        file_.registers()[address] = value;
        return;
    }
    ChipState& s = state();
    for (uint32_t i = 0; i < s.indirect_count && i < kIndirectRegisters; ++i) {
        if (s.indirect[i].address == address) {
            s.indirect[i].value = value;
            return;
        }
    }
    if (s.indirect_count < kIndirectRegisters) {
        s.indirect[s.indirect_count++] = {address, value};
    }
    // A model limit, not a hardware one: more than 256 distinct registers beyond BAR5 are dropped.
}

std::optional<uint64_t> Chip::vram_offset(uint64_t mc, uint64_t bytes) const {
    if (mc < kFbBase) return std::nullopt;
    uint64_t off = mc - kFbBase;
    if (off > kVramBytes || bytes > kVramBytes - off) return std::nullopt;
    return off;
}

bool Chip::read_mc(uint64_t mc, std::span<std::byte> out) {
    auto off = vram_offset(mc, out.size());
    if (!off) return false;
    std::memcpy(out.data(), vram().data() + *off, out.size());
    return true;
}

bool Chip::write_mc(uint64_t mc, std::span<const std::byte> data) {
    auto off = vram_offset(mc, data.size());
    if (!off) return false;
    std::memcpy(vram().data() + *off, data.data(), data.size());
    return true;
}

uint32_t Chip::read_mc32(uint64_t mc) {
    uint32_t v = 0;
    read_mc(mc, std::as_writable_bytes(std::span(&v, 1)));
    return v;
}

bool Chip::write_mc32(uint64_t mc, uint32_t value) { return write_mc(mc, std::as_bytes(std::span(&value, 1))); }

}  // namespace baregpu::sim::amdgpu
