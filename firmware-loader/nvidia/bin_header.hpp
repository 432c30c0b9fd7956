// nvfw_bin_hdr: the 24-byte container header at the start of NVIDIA's booter, scrubber and
// bootloader files. It points at a format-specific header (nvfw_hs_header_v2 or
// RM_RISCV_UCODE_DESC) and at the data image that is copied to the falcon.
#pragma once

#include "firmware-loader/byte_reader.hpp"

#include <cstdint>

namespace baregpu::fw::nv {

// Layout: nouveau drivers/gpu/drm/nouveau/include/nvfw/fw.h, struct nvfw_bin_hdr
// (torvalds/linux 3efaf503ab3f701d9579c6101dc8b07a40ce27ff); six little-endian u32s.
inline constexpr uint32_t kBinHdrMagic = 0x10de;  // bin_magic: NVIDIA's PCI vendor id, in every such file
inline constexpr uint64_t kBinHdrSize = 24;

struct BinHeader {
    uint32_t bin_magic = 0;
    uint32_t bin_ver = 0;
    uint32_t bin_size = 0;  // not the file size (data_size + 0x400 or + 0x100 in the real files)
    uint32_t header_offset = 0;
    uint32_t data_offset = 0;
    uint32_t data_size = 0;
    Region data;  // [data_offset, data_offset + data_size): the image the falcon gets
};

// Throws FirmwareError unless the magic matches, the sub-header offset lies past the container
// header, and the data image lies inside the file.
BinHeader parse_bin_header(const ByteReader& file);

}  // namespace baregpu::fw::nv
