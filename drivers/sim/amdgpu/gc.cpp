#include "drivers/sim/amdgpu/gc.hpp"

#include <cstring>
#include <fmt/format.h>

namespace baregpu::sim::amdgpu {

namespace {
constexpr const char* kRs64Source = "Linux gfx_v11_0.c gfx_v11_0_config_gfx_rs64 (gfx_v12_0.c the same)";
// GRBM_GFX_CNTL: PIPEID 1:0, MEID 3:2, VMID 7:4 (gc_11_0_0_sh_mask.h, gc_12_0_0_sh_mask.h).
// CP_MEC_RS64_CNTL.MEC_PIPEn_RESET: bit 16 + n.
constexpr unsigned kPipeResetShift = 16;
// S2A_DOORBELL_ENTRY_n_CTRL (nbio_4_3_0_sh_mask.h; GDC_S2A0_ in nbif_6_3_1_sh_mask.h): ENABLE 0,
// RANGE_OFFSET 16:7, RANGE_SIZE 24:17 (in dwords of the doorbell aperture, as Linux passes
// ring->doorbell_index).
constexpr uint32_t kS2aEnable = 1u;
uint32_t s2a_offset(uint32_t v) { return (v >> 7) & 0x3ff; }
uint32_t s2a_size(uint32_t v) { return (v >> 17) & 0xff; }
constexpr const char* kS2aCp = "Linux nbio_v4_3.c nbio_v4_3_gc_doorbell_init / nbif_v6_3_1.c nbif_v6_3_1_gc_doorbell_init "
                               "(S2A entries 0 and 3), called from gfx_v11_0_hw_init";
constexpr const char* kS2aSdma = "Linux nbio_v4_3.c nbio_v4_3_sdma_doorbell_range / nbif_v6_3_1_sdma_doorbell_range (S2A "
                                 "entry 2), called from sdma_v6_0_gfx_resume_instance";
}  // namespace

GcRegs::GcRegs(Chip& chip, const RegisterCatalog& catalog, ReferenceFirmware& firmware) : chip_(chip), firmware_(firmware) {
    auto at = [&](const char* name) { return catalog.address(catalog.named(name)); };
    grbm_gfx_cntl_ = at("GRBM_GFX_CNTL");
    mec_rs64_cntl_ = at("CP_MEC_RS64_CNTL");
    pc_start_ = at("CP_MEC_RS64_PRGRM_CNTR_START");
    pc_start_hi_ = at("CP_MEC_RS64_PRGRM_CNTR_START_HI");
    doorbell_lower_ = at("CP_MEC_DOORBELL_RANGE_LOWER");
    doorbell_upper_ = at("CP_MEC_DOORBELL_RANGE_UPPER");
    sh_mem_config_ = at("SH_MEM_CONFIG");
    sh_mem_bases_ = at("SH_MEM_BASES");
    const bool nbif = chip.asic.gc_major() >= 12;
    for (unsigned i = 0; i < 4; ++i)
        s2a_[i] = at(((nbif ? std::string("GDC_S2A0_S2A_DOORBELL_ENTRY_") : std::string("S2A_DOORBELL_ENTRY_")) +
                      std::to_string(i) + "_CTRL").c_str());
    sdma_doorbell_ = at("SDMA0_QUEUE0_DOORBELL");
    sdma_doorbell_offset_ = at("SDMA0_QUEUE0_DOORBELL_OFFSET");
}

void GcRegs::power_on() {
    GcState& g = chip_.state().gc;
    for (unsigned p = 0; p < 4; ++p) {
        // gc_11_0_0_default.h: CP_MEC_RS64_PRGRM_CNTR_START 0x00000800, _HI 0. A pipe that has never
        // left reset since power-on runs from there.
        g.mec_pc_start[p] = chip_.load(pc_start_);
        g.mec_pc_start_hi[p] = chip_.load(pc_start_hi_);
        g.mec_pc_lo[p] = g.mec_pc_start[p];
        g.mec_pc_hi[p] = g.mec_pc_start_hi[p];
    }
    for (unsigned v = 0; v < 16; ++v) {
        g.sh_mem_config[v] = chip_.load(sh_mem_config_);  // 0x0000c000 (gc_11_0_0_default.h)
        g.sh_mem_bases[v] = chip_.load(sh_mem_bases_);
    }
}

uint32_t GcRegs::selected_pipe() const {
    const uint32_t sel = chip_.load(grbm_gfx_cntl_);
    return ((sel >> 2) & 3) == 1 ? (sel & 3) : ~0u;
}
uint32_t GcRegs::selected_vmid() const { return (chip_.load(grbm_gfx_cntl_) >> 4) & 0xf; }

bool GcRegs::read(uint32_t address, uint32_t& value) {
    GcState& g = chip_.state().gc;
    if (address == pc_start_ || address == pc_start_hi_) {
        const uint32_t pipe = selected_pipe();
        if (pipe == ~0u) return false;  // another ME: plain storage
        value = address == pc_start_ ? g.mec_pc_start[pipe] : g.mec_pc_start_hi[pipe];
        return true;
    }
    if (address == sh_mem_config_ || address == sh_mem_bases_) {
        const uint32_t vmid = selected_vmid();
        value = address == sh_mem_config_ ? g.sh_mem_config[vmid] : g.sh_mem_bases[vmid];
        return true;
    }
    return false;
}

bool GcRegs::write(uint32_t address, uint32_t value) {
    GcState& g = chip_.state().gc;
    if (address == pc_start_ || address == pc_start_hi_) {
        const uint32_t pipe = selected_pipe();
        if (pipe == ~0u) {
            chip_.violation(fmt::format("CP_MEC_RS64_PRGRM_CNTR_START{} written with GRBM_GFX_CNTL {} not selecting ME 1: "
                                        "the MEC pipes' start address is per pipe",
                                        address == pc_start_hi_ ? "_HI" : "", hex(chip_.load(grbm_gfx_cntl_))),
                            reg_name(address), kRs64Source);
            return true;
        }
        (address == pc_start_ ? g.mec_pc_start : g.mec_pc_start_hi)[pipe] = value;
        return true;
    }
    if (address == sh_mem_config_ || address == sh_mem_bases_) {
        const uint32_t vmid = selected_vmid();
        (address == sh_mem_config_ ? g.sh_mem_config : g.sh_mem_bases)[vmid] = value;
        return true;
    }
    if (address == mec_rs64_cntl_) {
        // A pipe leaving reset starts from its CP_MEC_RS64_PRGRM_CNTR_START/_HI.
        const uint32_t old = chip_.load(address);
        for (unsigned p = 0; p < 4; ++p) {
            const uint32_t bit = 1u << (kPipeResetShift + p);
            if ((old & bit) && !(value & bit)) {
                g.mec_pc_lo[p] = g.mec_pc_start[p];
                g.mec_pc_hi[p] = g.mec_pc_start_hi[p];
            }
        }
        chip_.store(address, value);
        return true;
    }
    return false;
}

uint64_t GcRegs::mec_pc(uint32_t pipe) const {
    const GcState& g = chip_.state().gc;
    // START holds the low 32 bits of the dword PC, START_HI the rest (gfx_v11_0_config_gfx_rs64:
    // START = ucode_start_addr_lo >> 2 | ucode_start_addr_hi << 30, START_HI = ucode_start_addr_hi >> 2).
    return uint64_t{g.mec_pc_hi[pipe & 3]} << 32 | g.mec_pc_lo[pipe & 3];
}

std::optional<uint64_t> GcRegs::firmware_mec_pc() {
    std::optional<uint64_t> start = firmware_.mec_ucode_start();
    if (!start) return std::nullopt;
    return *start >> 2;
}

uint32_t GcRegs::sh_mem_config(uint32_t vmid) const { return chip_.state().gc.sh_mem_config[vmid & 15]; }
uint32_t GcRegs::sh_mem_bases(uint32_t vmid) const { return chip_.state().gc.sh_mem_bases[vmid & 15]; }

GcRegs::Route GcRegs::route(uint64_t offset, std::string& why, std::string& source) {
    const uint32_t dword = static_cast<uint32_t>(offset / 4);
    // A ranged entry first (entry 2, SDMA), then the CP's entries (0 and 3), which Linux programs with
    // no range (0x30000007 / 0x3000000d): the model lets them take every doorbell no range claims.
    // What a rangeless entry means is not public; this choice makes both missing steps observable.
    const uint32_t sdma = chip_.load(s2a_[2]);
    if ((sdma & kS2aEnable) && dword >= s2a_offset(sdma) && dword < s2a_offset(sdma) + s2a_size(sdma)) return Route::sdma;
    const bool sdma_queue_doorbell = (chip_.load(sdma_doorbell_) & (1u << 28)) &&
                                     ((chip_.load(sdma_doorbell_offset_) >> 2) & 0x3ffffff) == dword;
    if (sdma_queue_doorbell) {
        why = fmt::format("SDMA0 queue 0's doorbell (dword {}) has no S2A route to SDMA: {} is {} (want ENABLE, AWID 0xe and "
                          "a range covering the doorbell)",
                          hex(dword), chip_.asic.gc_major() >= 12 ? "GDC_S2A0_S2A_DOORBELL_ENTRY_2_CTRL" : "S2A_DOORBELL_ENTRY_2_CTRL",
                          hex(sdma));
        source = kS2aSdma;
        return Route::dropped;
    }
    if ((chip_.load(s2a_[0]) & kS2aEnable) || (chip_.load(s2a_[3]) & kS2aEnable)) return Route::cp;
    why = fmt::format("no S2A doorbell route to the CP: {}_DOORBELL_ENTRY_0_CTRL and _ENTRY_3_CTRL are {} and {} (want "
                      "0x30000007 / 0x3000000d)",
                      chip_.asic.gc_major() >= 12 ? "GDC_S2A0_S2A" : "S2A", hex(chip_.load(s2a_[0])), hex(chip_.load(s2a_[3])));
    source = kS2aCp;
    return Route::dropped;
}

bool GcRegs::mec_accepts(uint64_t offset, std::string& why, std::string& source) {
    // CP_MEC_DOORBELL_RANGE_LOWER/UPPER.DOORBELL_RANGE_* bits 11:2: byte offsets into the doorbell
    // aperture (gfx_v11_0_cp_set_doorbell_range writes (index * 2) << 2).
    const uint32_t lower = chip_.load(doorbell_lower_) & 0xffc, upper = chip_.load(doorbell_upper_) & 0xffc;
    if (offset >= lower && offset <= upper) return true;
    why = fmt::format("doorbell at byte {} is outside CP_MEC_DOORBELL_RANGE_LOWER/UPPER [{}, {}]{}: the MEC drops it", hex(offset),
                      hex(lower), hex(upper),
                      lower == 0x110 && upper == 0xffc ? " (their reset values, gc_11_0_0_default.h; "
                                                         "gfx_v11_0_cp_set_doorbell_range programs [0, 0x450])"
                                                       : "");
    source = "Linux gfx_v11_0.c gfx_v11_0_cp_set_doorbell_range (gfx_v12_0.c the same); gc_11_0_0_default.h";
    return false;
}

void GcRegs::drop(uint64_t offset, const std::string& why, const std::string& source) {
    chip_.state().gc.dropped_doorbells++;
    chip_.violation(fmt::format("doorbell dropped: {}", why), fmt::format("BAR2+0x{:x}", offset), source);
}

uint32_t GcRegs::dropped_doorbells() const { return chip_.state().gc.dropped_doorbells; }

}  // namespace baregpu::sim::amdgpu
