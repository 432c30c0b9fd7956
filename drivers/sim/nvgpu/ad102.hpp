// A strict simulated AD102 (GeForce RTX 4090) for the simulated PCI bus: what a kernel-bypass
// driver meets when it boots GSP-RM (tinygrad nv/ip.py, nouveau r535). BAR0 = registers (16 MiB),
// BAR1 = VRAM aperture (vram_bytes; real boards have 24 GiB). Everything happens synchronously
// inside the register write that triggers it: FWSEC runs when the GSP falcon starts, the booter
// when SEC2 starts, GSP-RM serves the command queue when the doorbell is rung. What is modelled
// and what is not: README.md next to this file.
#pragma once

#include "drivers/pci/sim_device_model.hpp"
#include "falcon.hpp"
#include "gpu_engines.hpp"
#include "gsp_rm.hpp"
#include "gsp_rpc_server.hpp"
#include "vbios_image.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace baregpu::sim::nvgpu {

inline constexpr uint16_t kAd102DeviceId = 0x2684;  // GeForce RTX 4090 (pci.ids)

struct Ad102Options {
    uint64_t vram_bytes = uint64_t{512} << 20;  // power of two, >= 256 MiB (the WPR heap alone is 129 MiB)
    bool fwsec_in_vbios = true;   // false: the VBIOS has no FWSEC entry
    bool stale_wpr2 = false;      // a previous GSP left WPR2 up: only a function reset clears it
    bool gfw_boot_hangs = false;  // the VBIOS's boot code never reports done (GROUP_05(0) stays 0x0f)
    std::shared_ptr<GspRpcServer> server;  // answers RPCs after GSP_INIT_DONE; none: NV_ERR_NOT_SUPPORTED
    // Where the booter finds its known-good image (nvidia/ad102/gsp/booter_load-570.144.bin) to
    // compare what SEC2 was loaded with; empty: the simulated devices' search path (drivers/sim/firmware_path.hpp).
    std::string firmware_dir;
    // Test knob: NV_PMC_BOOT_42 as another chip would read it (0: AD102's), to drive a driver's
    // per-architecture seams; nothing else about the model changes.
    uint32_t pmc_boot42 = 0;
};

class Ad102Model final : public pci::sim::SimDeviceModel {
public:
    explicit Ad102Model(Ad102Options options);

    pci::sim::DeviceSpec spec() const override;
    void connect(pci::sim::SimPort& port) override;
    void disconnect() override;  // stops the engine thread
    uint64_t mmio_read(unsigned bar, uint64_t offset, unsigned width) override;
    void mmio_write(unsigned bar, uint64_t offset, unsigned width, uint64_t value) override;
    void function_reset() override;  // everything back to power-on, WPR2 down

    // VRAM (BAR1's bytes), for engines added later (MMU, PBDMA) and tests. Valid once attached.
    std::span<std::byte> vram();
    const VbiosImage& vbios() const { return vbios_; }
    void set_server(std::shared_ptr<GspRpcServer> server);
    // The channel engines (PBDMA, copy engine, compute; gpu_engines.hpp): the RM model registers
    // channels here; a BAR0 write of a token to the doorbell (registers.hpp) runs them. Valid once attached.
    GpuEngines& engines();

    // ---- fault knobs ----
    void corrupt_next_reply();       // the next reply's checksum will not hold
    void stop_replying(bool stop);   // GSP-RM consumes RPCs but never answers
    // Posts an asynchronous GSP event (OS_ERROR_LOG, MMU_FAULT_QUEUED, ...) into the status queue.
    void post_event(uint32_t function, std::span<const std::byte> payload);

    // ---- introspection ----
    bool wpr2_up() const;
    bool gsp_initialized() const;  // GSP_INIT_DONE sent and serving
    bool gsp_unloaded() const;     // UNLOADING_GUEST_DRIVER acknowledged
    unsigned function_resets() const;
    std::vector<uint32_t> rpcs_seen() const;       // command-queue functions GSP-RM took, in order
    std::vector<std::string> registry_keys() const;  // SET_REGISTRY's names

private:
    void power_on();
    void violation(const std::string& what, const std::string& where, const std::string& source);
    void run_fwsec();
    void run_booter();
    bool booter_matches_known_image();
    void resume_gsp();

    Ad102Options options_;
    VbiosImage vbios_;
    mutable std::mutex mutex_;
    std::map<uint32_t, uint32_t> regs_;
    FalconModel gsp_{"GSP", 0x110000}, sec2_{"SEC2", 0x840000};
    std::unique_ptr<GspRmModel> rm_;
    std::unique_ptr<GpuEngines> engines_;
    uint32_t wpr2_lo_ = 0, wpr2_hi_ = 0;
    bool bar1_taken_ = false;  // GSP-RM set NV_PBUS_BAR1_BLOCK to its virtual mode
    void gsp_took_bar1();
    uint64_t frts_offset_ = 0;
    unsigned gfw_reads_ = 0;
    unsigned resets_ = 0;
};

std::unique_ptr<Ad102Model> make_ad102(Ad102Options options = {});

}  // namespace baregpu::sim::nvgpu
