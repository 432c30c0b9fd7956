// Every register the simulated chip knows by name, with the value it powers on with and where
// that value comes from. Offsets and BASE_IDX are Linux's asic_reg *_offset.h (gc_11_0_0, gc_12_0_0,
// mmhub_3_0_0, mmhub_4_1_0, osssys_6_0_0, osssys_7_0_0, nbio_4_3_0, nbif_6_3_1, mp_13_0_0, mp_14_0_2),
// as tinygrad's generated autogen/am/regs.py transcribes them; the absolute address is the chip's
// discovery base + offset. The catalog gives the power-on state (NaviModel::power_on stores every
// value) and the names of the register trace (BAREGPU_SIM_TRACE=regs, README.md).
#pragma once

#include "drivers/sim/amdgpu/asic.hpp"

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>

namespace baregpu::sim::amdgpu {

// Where a power-on value comes from.
enum class Origin : uint8_t {
    gc11_default,    // Linux include/asic_reg/gc/gc_11_0_0_default.h, reg<NAME>_DEFAULT
    gc12_from_gc11,  // no gc_12_0_0_default.h is public: GC 11's value for the same register (README)
    model,           // no public *_default.h for the block: the model's choice (README, "Power-on state")
    name_only,       // plain storage the model gives no meaning: named for the trace, powers on as 0
};
std::string_view to_string(Origin origin);

struct RegisterInfo {
    const char* block;  // "GC", "MMHUB", "OSSSYS", "NBIO", "MP0", "MP1"
    const char* name;   // Linux's name without the "reg" prefix
    uint16_t hw_id;
    uint8_t base_idx;
    uint32_t offset;
    uint32_t reset;
    Origin origin;
};

class RegisterCatalog {
public:
    explicit RegisterCatalog(const AsicInfo& asic);
    std::span<const RegisterInfo> all() const { return all_; }
    uint32_t address(const RegisterInfo& r) const { return asic_.base(r.hw_id, r.base_idx) + r.offset; }
    // The register at an absolute dword address, or nullptr.
    const RegisterInfo* find(uint32_t address) const;
    // By name (e.g. "CP_MEC_DOORBELL_RANGE_LOWER"); throws when the chip has none.
    const RegisterInfo& named(std::string_view name) const;

private:
    const AsicInfo& asic_;
    std::span<const RegisterInfo> all_;
    std::unordered_map<uint32_t, const RegisterInfo*> by_address_;
};

}  // namespace baregpu::sim::amdgpu
