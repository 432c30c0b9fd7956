// A simulated Navi on a SimBus, driven through PciDevice with raw register sequences written
// here, independently of drivers/am: register offsets are transcribed again from the Linux
// asic_reg headers and every base is read from the discovery table in VRAM, so a wrong offset on
// the model's side fails these tests.
#pragma once

#include "drivers/pci/sim_bus.hpp"
#include "drivers/sim/amdgpu/navi.hpp"
#include "firmware-loader/amd/discovery.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::test::sim_am {

using baregpu::sim::amdgpu::Asic;
using baregpu::sim::amdgpu::NaviModel;

// BAREGPU_TEST_FIRMWARE_DIR/amdgpu, or nullopt (REQUIRE_AMD_FIRMWARE then fails the test: the
// repository carries the files).
std::optional<std::filesystem::path> firmware_dir();
std::vector<std::byte> firmware(const std::string& name);

#define REQUIRE_AMD_FIRMWARE()                                                                           \
    do {                                                                                                      \
        if (!::baregpu::test::sim_am::firmware_dir())                                                         \
            FAIL("BAREGPU_TEST_FIRMWARE_DIR does not name the checkout's firmware/ (with amdgpu/ in it)");     \
    } while (false)

// A fresh state directory per test case (tests run in parallel), removed afterwards.
struct TempDir {
    TempDir();
    ~TempDir();
    std::filesystem::path path;
};

// Absolute dword addresses the test computes: header offset + discovery base.
struct Regs {
    uint32_t psp_35, psp_36, psp_64, psp_67, psp_69, psp_70, psp_71, psp_81;
    uint32_t smu_msg, smu_param, smu_resp, smu_debug_msg, smu_debug_param, smu_debug_resp;
    uint32_t rsmu_index, rsmu_data, rcc_strap2;
    uint32_t scratch_reg7, cp_stat, rlc_bootload_status;
    uint32_t gc_fault_status, gc_fault_cntl, gc_fault_addr_lo, gc_fault_addr_hi;
    uint32_t gc_ctx0_cntl, gc_pt_base_lo, gc_pt_base_hi, gc_pt_start_lo, gc_pt_start_hi, gc_pt_end_lo, gc_pt_end_hi;
    uint32_t mm_fb_base, mm_fb_top, mm_sem, mm_req, mm_ack;
    uint32_t ih_cntl, ih_base, ih_base_hi, ih_rptr, ih_wptr, ih_wptr_addr_hi, ih_wptr_addr_lo;
};

struct Rig {
    explicit Rig(Asic asic, const std::filesystem::path& state_dir, bool with_firmware = true);
    ~Rig();

    uint32_t rd(uint32_t address);  // BAR5, or RSMU past 1 MiB
    void wr(uint32_t address, uint32_t value);
    void vram_write(uint64_t offset, std::span<const std::byte> bytes);
    std::vector<std::byte> vram_read(uint64_t offset, size_t bytes);
    uint32_t vram32(uint64_t offset);
    void vram_write32(uint64_t offset, uint32_t value);
    uint64_t mc(uint64_t vram_offset) const { return fb_base + vram_offset; }
    // Polls until pred() (advancing modelled time 1 ms per try); false after `ms` tries.
    bool wait(const std::function<bool()>& pred, int ms = 2000);

    fw::amd::Discovery discover();
    // The Linux bring-up sequences, step by step.
    void bootloader_load_all();                                 // KDB, SPL, SYS, ..., SOS; sOS alive
    bool bootloader_load(uint32_t command, std::span<const std::byte> blob);  // one component; true when 35 bit31 and status 0
    void ring_create();
    uint32_t submit(std::vector<std::byte> cmd, uint32_t* tmr_size = nullptr);  // -> resp.status
    uint32_t load_ip_fw(uint32_t type, std::span<const std::byte> blob);
    uint32_t setup_tmr(uint32_t size);
    uint32_t load_toc(uint32_t* tmr_size);
    uint32_t autoload_rlc();
    void load_all_ip_firmware();  // SMU, [TMR], SDMA, CP, IMU, RLC, AUTOLOAD
    // Everything load_all_ip_firmware loads before AUTOLOAD_RLC, leaving out GFX_FW_TYPE `skip` (0: none).
    void load_ip_firmware_before_autoload(uint32_t skip = 0);
    uint32_t smu_send(uint32_t msg, uint32_t param, uint32_t* out = nullptr, int wait_ms = 100);
    // The whole Linux bring-up up to compute queues, as raw register sequences: the PSP bootloader,
    // ring and IP firmware with AUTOLOAD_RLC, the SMU's features, the RLC-autoload wait, then
    // gfx_v11_0_hw_init's compute part (MEC start address per pipe and a pipe reset, SH_MEM_CONFIG of
    // VMID 0, the S2A CP and SDMA doorbell routes, CP_MEC_DOORBELL_RANGE) and SDMA0 un-halted. The MEC
    // stays halted: tests un-halt it themselves.
    void boot_gc();
    uint32_t gc_base(unsigned idx);   // discovery base of GC segment idx
    uint32_t nbio_base(unsigned idx);

    size_t violations() const { return bus->violations().size(); }
    std::string violation_text() const;
    bool has_violation(const std::string& fragment) const;

    Asic asic;
    std::filesystem::path state_dir;
    std::unique_ptr<pci::sim::SimBus> bus;
    NaviModel* model = nullptr;
    pci::PciAddress address;
    std::unique_ptr<pci::PciDevice> dev;
    fw::amd::Discovery disc;
    std::vector<std::byte> discovery_bytes;
    Regs r{};
    uint64_t fb_base = 0;
    uint32_t wptr = 0;  // PSP ring write pointer (dwords)

    // Boot-memory layout the test uses (VRAM offsets).
    static constexpr uint64_t kMsg1 = 16u << 20;  // 1 MiB aligned
    static constexpr uint64_t kRing = 20u << 20;
    static constexpr uint64_t kCmd = 21u << 20;
    static constexpr uint64_t kFence = kCmd + 0x1000;
    static constexpr uint64_t kFw = 24u << 20;
    static constexpr uint64_t kTmr = 64u << 20;
};

}  // namespace baregpu::test::sim_am
