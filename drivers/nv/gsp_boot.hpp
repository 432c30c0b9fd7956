// NVPCI bring-up: boots GSP-RM on an NVIDIA GPU we own through a PciDevice (vfio, sysfs or the
// simulated bus) and hands back the RPC channel the RM layer talks through. Ada (AD10x) is done,
// in the order tinygrad's NVDev boots it (runtime/support/nv/nvdev.py, nv/ip.py), cross-checked
// with Linux nouveau r535 and open-gpu-kernel-modules kernel_gsp*.c:
//   chip id (PMC_BOOT_42) -> firmware checked -> stale state (WPR2 up: bus master off, function
//   reset) -> GFW boot done -> VRAM size -> FWSEC-FRTS on the GSP falcon (WPR2 + FRTS) -> GSP-RM
//   ELF behind radix3, bootloader, signature, GspFwWprMeta, LibOS args, message queues, pre-queued
//   SET_SYSTEM_INFO / SET_REGISTRY -> GSP to RISC-V with the LibOS args in its mailboxes -> booter
//   on SEC2 (mailbox = GspFwWprMeta) -> status queue -> GSP_INIT_DONE (running the CPU sequencer on
//   the way). close() sends UNLOADING_GUEST_DRIVER.
// Hopper (GH100) and Blackwell (GB20x) get their own BootFlow; both throw UnsupportedError naming
// what is missing (no FWSEC on GH100; Blackwell needs the FSP chain-of-trust message).
#pragma once

#include "drivers/nv/falcon.hpp"
#include "drivers/nv/gsp_rpc.hpp"
#include "drivers/pci/pci_device.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::fw {
class FirmwareSearchPath;
}

namespace baregpu::nv {

// The three files GSP boot needs, as bytes (validated before any of them reaches the device).
struct GspFirmware {
    std::string booter_name, bootloader_name, gsp_name;  // what errors call them
    std::vector<std::byte> booter_load;  // nvidia/<chip>/gsp/booter_load-<version>.bin
    std::vector<std::byte> bootloader;   // nvidia/<chip>/gsp/bootloader-<version>.bin
    std::vector<std::byte> gsp_elf;      // nvidia/<chip>/gsp/gsp-<version>.bin (GSP-RM ELF)
};
// Loads them through the firmware search path (FirmwareError naming every place looked in).
GspFirmware load_gsp_firmware(const fw::FirmwareSearchPath& path, std::string_view chip = "ad102",
                              std::string_view version = "570.144");

struct BootStage {
    std::string name;                    // "chip id", "stale state", "FWSEC-FRTS", ...
    std::chrono::nanoseconds time{0};    // device clock
    std::string detail;
};

struct BootReport {
    std::string chip;              // "ad102"
    uint32_t boot42 = 0;
    bool function_reset = false;   // stale WPR2 found and the function reset
    uint64_t vram_bytes = 0;
    uint64_t frts_offset = 0;
    std::vector<BootStage> stages;
    std::chrono::nanoseconds total{0};
};

struct GspOptions {
    std::chrono::nanoseconds init_timeout = std::chrono::seconds(10);  // GSP_INIT_DONE
    std::function<void(const BootStage&)> progress;
};

class GspDevice;

// One architecture's way to boot GSP-RM (the seam for Hopper and Blackwell).
class BootFlow {
public:
    virtual ~BootFlow() = default;
    virtual std::string_view name() const = 0;
    virtual void boot(GspDevice& device) = 0;
};

class GspDevice {
public:
    // Boots GSP-RM on `pci` (which must outlive the GspDevice; `firmware` need only live through
    // open: what GSP keeps is copied into DMA memory and VRAM). Throws FirmwareError (bad or
    // wrong-chip firmware, before the device is written), UnsupportedError (an architecture not
    // done yet, a BAR1 smaller than VRAM), TimeoutError / ProtocolError naming the stage.
    static std::unique_ptr<GspDevice> open(pci::PciDevice& pci, const GspFirmware& firmware, GspOptions options = {});
    ~GspDevice();
    GspDevice(const GspDevice&) = delete;
    GspDevice& operator=(const GspDevice&) = delete;

    // Sends UNLOADING_GUEST_DRIVER and waits for its reply; the destructor does it too (errors
    // swallowed there). Idempotent.
    void close();

    GspRpc& rpc() { return *rpc_; }
    const BootReport& report() const { return report_; }
    pci::PciDevice& pci() { return pci_; }
    uint64_t vram_bytes() const { return report_.vram_bytes; }

    struct Impl;  // boot state (gsp_boot.cpp)

private:
    friend class AdaBootFlow;
    GspDevice(pci::PciDevice& pci, const GspFirmware& firmware, GspOptions options);
    void stage(std::string name, const std::function<std::string()>& body);

    pci::PciDevice& pci_;
    const GspFirmware& firmware_;
    GspOptions options_;
    BootReport report_;
    std::unique_ptr<Impl> impl_;
    std::unique_ptr<GspRpc> rpc_;
    bool open_ = false;
};

}  // namespace baregpu::nv
