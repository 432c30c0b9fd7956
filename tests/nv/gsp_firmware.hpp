// The GSP boot's firmware for tests: the real ad102 booter_load / bootloader 570.144 from
// firmware/ ($BAREGPU_TEST_FIRMWARE_DIR) and a synthetic GSP-RM ELF, because the real
// gsp-570.144.bin is not in the firmware set (drivers/sim/nvgpu/README.md).
#pragma once

#include "drivers/nv/gsp_boot.hpp"
#include "firmware-loader/search_path.hpp"
#include "tests/firmware/nvidia/synthetic_elf.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace baregpu::test::nv {

inline std::string firmware_dir() {
    const char* d = std::getenv("BAREGPU_TEST_FIRMWARE_DIR");
    if (d == nullptr) throw std::runtime_error("BAREGPU_TEST_FIRMWARE_DIR is not set: run the tests through meson test");
    return d;
}

// A GSP-RM-shaped ELF: .fwimage (3 pages, starting with an ELF header as the real image's does)
// and one signature section per family given.
inline std::vector<std::byte> synthetic_gsp_elf(std::vector<std::string> families) {
    std::vector<Section> sections = {{".fwimage", 1, 0x2c00, 0xaa}};
    for (const auto& f : families) sections.push_back({".fwsignature_" + f, 1, 0x1000, 0x5a});
    Elf64 e = build_elf64(sections);
    e.bytes.str(e.data_offset[0], "\x7f" "ELF");
    return e.bytes.b;
}

inline baregpu::nv::GspFirmware firmware(std::vector<std::string> families = {"ga10x", "ad10x"}) {
    const fw::FirmwareSearchPath path({firmware_dir()});
    baregpu::nv::GspFirmware f;
    f.booter_name = "nvidia/ad102/gsp/booter_load-570.144.bin";
    f.bootloader_name = "nvidia/ad102/gsp/bootloader-570.144.bin";
    f.gsp_name = "synthetic gsp-570.144.bin";
    f.booter_load = path.load(f.booter_name).bytes;
    f.bootloader = path.load(f.bootloader_name).bytes;
    f.gsp_elf = synthetic_gsp_elf(std::move(families));
    return f;
}

}  // namespace baregpu::test::nv
