// "sim-nvk:ad102?...": drivers/nv's HCQ backend over nvidia.ko's ioctls (NvkPlatform) where nvidia.ko
// is the simulated one (drivers/sim/nvgpu/fake_nvidia.hpp) with a simulated AD102 behind it
// (drivers/sim/nvgpu/nvk_gpu.hpp: the same engines sim-nv:ad102 runs, RM owning VRAM and page tables).
// Composed in registry_sim_nvk.cpp, part of the registry (the one place that sees models and drivers).
#pragma once

#include "hcq/registry.hpp"

#include <memory>

namespace baregpu::registry {

std::shared_ptr<hcq::Device> open_sim_nvk(const hcq::DeviceUri& uri);

}  // namespace baregpu::registry
