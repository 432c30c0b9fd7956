#include "drivers/registry_sim_nvrm.hpp"

#include "base/error.hpp"
#include "drivers/nv/hcq_device.hpp"
#include "drivers/nv/nvrm_platform.hpp"
#include "drivers/sim/nvgpu/ad102.hpp"
#include "drivers/sim/nvgpu/fake_nvidia.hpp"
#include "drivers/sim/nvgpu/nvrm_gpu.hpp"
#include "drivers/sim/nvgpu/rm_model.hpp"

#include <fmt/format.h>

namespace baregpu::registry {

namespace {

// What the device keeps alive: the fake driver and the GPU behind it (the RM model with them).
struct SimNvrm {
    std::shared_ptr<sim::nvgpu::RmModel> rm;
    std::shared_ptr<sim::nvgpu::NvrmGpu> gpu;
    std::unique_ptr<sim::nvgpu::FakeNvidia> nvidia;
    ~SimNvrm() {
        nvidia.reset();
        gpu.reset();  // engines stop before the model goes
    }
};

}  // namespace

void read_nv_queue_options(const hcq::DeviceUri& uri, nv::NvHcqOptions& options) {
    options.name = uri.name();
    const uint64_t ring = uri.option_u64("ring", 0);
    if (ring != 0) options.compute_ring_bytes = options.copy_ring_bytes = ring;
    options.compute_ring_bytes = uri.option_u64("compute_ring", options.compute_ring_bytes);
    options.copy_ring_bytes = uri.option_u64("copy_ring", options.copy_ring_bytes);
    options.gpfifo_entries = static_cast<uint32_t>(uri.option_u64("gpfifo_entries", options.gpfifo_entries));
    options.memory_bytes = uri.option_u64("memory", 0);
    options.staging_bytes = uri.option_u64("staging", options.staging_bytes);
    options.staging_slots = static_cast<uint32_t>(uri.option_u64("staging_slots", options.staging_slots));
}

std::shared_ptr<hcq::Device> open_sim_nvrm(const hcq::DeviceUri& uri) {
    if (uri.name() != "sim-nvrm:ad102") throw Error(uri.name(), "unknown simulated NVIDIA GPU behind nvidia.ko: the model is sim-nvrm:ad102");
    nv::NvHcqOptions options;
    read_nv_queue_options(uri, options);
    const uint64_t vram = uri.option_u64("vram", 1ull << 30);
    const std::string driver = uri.option("driver").value_or("570.144");
    uri.reject_unused(std::string(kNvQueueOptionsHelp) + ", driver (the nvidia.ko version RM reports, default 570.144)");

    auto sim = std::make_shared<SimNvrm>();
    sim::nvgpu::RmModelOptions rm;
    rm.driver_version = driver;
    sim->rm = std::make_shared<sim::nvgpu::RmModel>(rm);
    sim->gpu = std::make_shared<sim::nvgpu::NvrmGpu>(sim->rm, sim::nvgpu::NvrmGpuOptions{uri.name(), vram});
    sim->nvidia = std::make_unique<sim::nvgpu::FakeNvidia>(sim->rm, sim::nvgpu::kAd102DeviceId, sim->gpu);
    // Buffers may take VRAM less what RM keeps for page tables and channel memory (1/16, at least 16 MiB).
    const uint64_t memory = vram - std::max<uint64_t>(vram / 16, 16ull << 20);
    options.keepalive = sim;
    return nv::NvHcqDevice::create(nv::NvrmPlatform::open(*sim->nvidia, 0, memory), std::move(options));
}

}  // namespace baregpu::registry
