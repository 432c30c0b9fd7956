#include "firmware-loader/nvidia/bin_header.hpp"

namespace baregpu::fw::nv {

BinHeader parse_bin_header(const ByteReader& file) {
    BinHeader h;
    h.bin_magic = file.u32(0x00, "nvfw_bin_hdr.bin_magic");
    file.expect_eq(h.bin_magic, kBinHdrMagic, "nvfw_bin_hdr.bin_magic", 0x00);
    h.bin_ver = file.u32(0x04, "nvfw_bin_hdr.bin_ver");
    h.bin_size = file.u32(0x08, "nvfw_bin_hdr.bin_size");
    h.header_offset = file.u32(0x0c, "nvfw_bin_hdr.header_offset");
    h.data_offset = file.u32(0x10, "nvfw_bin_hdr.data_offset");
    h.data_size = file.u32(0x14, "nvfw_bin_hdr.data_size");
    // The sub-header may not overlap the container header it is found through.
    file.expect(h.header_offset >= kBinHdrSize && h.header_offset < file.size(), "nvfw_bin_hdr.header_offset", 0x0c,
                "an offset in [" + hex(kBinHdrSize) + ", " + hex(file.size()) + ")", hex(h.header_offset));
    // bin_size is deliberately not compared with the file size: in the real files it never matches
    // (data_size + 0x400 for HS images, + 0x100 for bootloaders).
    h.data = file.region(h.data_offset, h.data_size, "nvfw_bin_hdr.data_offset/data_size");
    return h;
}

}  // namespace baregpu::fw::nv
