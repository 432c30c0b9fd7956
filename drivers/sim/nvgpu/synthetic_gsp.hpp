// The stand-in for the missing gsp-570.144.bin (drivers/sim/nvgpu/README.md, "Not modelled"): a
// GSP-RM-shaped ELF the simulated AD102 accepts — `.fwimage` (3 pages, starting with an ELF header
// as the real image's does) and one `.fwsignature_<family>` section per family. The model never
// runs GSP-RM; it only checks how the image was handed over. Used by drivers/registry_nv.cpp's
// sim-nv:ad102 and by tests; never a substitute for the real file on silicon.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace baregpu::sim::nvgpu {

// Families default to the two the AD102 boot accepts a signature from.
std::vector<std::byte> synthetic_gsp_elf(const std::vector<std::string>& families = {"ga10x", "ad10x"});

}  // namespace baregpu::sim::nvgpu
