// "sim-nvrm:ad102?...": drivers/nv's HCQ backend over nvidia.ko's ioctls (NvrmPlatform) where nvidia.ko
// is the simulated one (drivers/sim/nvgpu/fake_nvidia.hpp) with a simulated AD102 behind it
// (drivers/sim/nvgpu/nvrm_gpu.hpp: the same engines sim-nv:ad102 runs, RM owning VRAM and page tables).
// Composed in registry_sim_nvrm.cpp, part of the registry (the one place that sees models and drivers).
#pragma once

#include "drivers/nv/hcq_device.hpp"
#include "hcq/registry.hpp"

#include <memory>

namespace baregpu::registry {

std::shared_ptr<hcq::Device> open_sim_nvrm(const hcq::DeviceUri& uri);

// The options both simulated NVIDIA devices take (sim-nv, sim-nvrm): queue and memory sizes into
// `options` (named uri.name()); kNvQueueOptionsHelp says them for reject_unused.
void read_nv_queue_options(const hcq::DeviceUri& uri, nv::NvHcqOptions& options);
inline constexpr const char* kNvQueueOptionsHelp =
    "ring, compute_ring, copy_ring (command ring bytes, powers of two of at least 4 KiB), gpfifo_entries "
    "(GP entries per channel, a power of two), memory (bytes buffers may map), staging, staging_slots "
    "(copy_in/copy_out slots), vram (the model's VRAM bytes, default 1 GiB)";

}  // namespace baregpu::registry
