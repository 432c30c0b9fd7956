#include "firmware-loader/identify.hpp"

#include "firmware-loader/amd/describe.hpp"
#include "firmware-loader/nvidia/describe.hpp"

namespace baregpu::fw {

Description describe_firmware(const ByteReader& file, std::string_view basename) {
    if (auto d = amd::describe_file(file, basename)) return std::move(*d);
    if (auto d = nv::describe_file(file, basename)) return std::move(*d);
    file.fail("file type", 0,
              "an amdgpu firmware name (psp_*_sos, smu_*, gc_*_mec, sdma_*, *_ip_discovery, ...), an ELF image, "
              "an nvfw_bin_hdr (magic 0x10de) or a PCI expansion ROM (0x55aa)",
              file.size() >= 4 ? "first word " + hex(file.u32(0, "first word")) : std::to_string(file.size()) + " bytes");
}

}  // namespace baregpu::fw
