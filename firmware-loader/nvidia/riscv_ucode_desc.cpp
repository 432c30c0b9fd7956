#include "firmware-loader/nvidia/riscv_ucode_desc.hpp"

#include "firmware-loader/nvidia/subregion.hpp"

#include <string>

namespace baregpu::fw::nv {

RiscvUcodeDesc parse_riscv_ucode_desc(const ByteReader& file) {
    RiscvUcodeDesc d;
    d.bin = parse_bin_header(file);
    const uint64_t at = d.bin.header_offset;
    // The descriptor sits between its header_offset and the data image; its length there
    // tells the two layouts apart.
    const uint64_t room = d.bin.data_offset > at ? d.bin.data_offset - at : 0;
    file.expect(room == kRiscvUcodeDescSize || room == kRiscvUcodeDescShortSize, "RM_RISCV_UCODE_DESC", at,
                std::to_string(kRiscvUcodeDescSize) + " or " + std::to_string(kRiscvUcodeDescShortSize) +
                    " bytes between nvfw_bin_hdr.header_offset and data_offset",
                std::to_string(room) + " (data_offset " + hex(d.bin.data_offset) + ")");
    file.region(at, room, "RM_RISCV_UCODE_DESC");

    auto word = [&](uint64_t index, const char* name) {
        return file.u32(at + 4 * index, std::string("RM_RISCV_UCODE_DESC.") + name);
    };
    d.version = word(0, "version");
    d.bootloaderOffset = word(1, "bootloaderOffset");
    d.bootloaderSize = word(2, "bootloaderSize");
    d.bootloaderParamOffset = word(3, "bootloaderParamOffset");
    d.bootloaderParamSize = word(4, "bootloaderParamSize");
    d.riscvElfOffset = word(5, "riscvElfOffset");
    d.riscvElfSize = word(6, "riscvElfSize");
    d.appVersion = word(7, "appVersion");
    d.manifestOffset = word(8, "manifestOffset");
    d.manifestSize = word(9, "manifestSize");
    d.monitorDataOffset = word(10, "monitorDataOffset");
    d.monitorDataSize = word(11, "monitorDataSize");
    d.monitorCodeOffset = word(12, "monitorCodeOffset");
    d.monitorCodeSize = word(13, "monitorCodeSize");
    d.bIsMonitorEnabled = word(14, "bIsMonitorEnabled");
    d.swbromCodeOffset = word(15, "swbromCodeOffset");
    d.swbromCodeSize = word(16, "swbromCodeSize");
    d.swbromDataOffset = word(17, "swbromDataOffset");
    d.swbromDataSize = word(18, "swbromDataSize");
    if (room == kRiscvUcodeDescSize) {
        d.fbReservedSize = word(19, "fbReservedSize");
        d.bSignedAsCode = word(20, "bSignedAsCode");
    }

    // Offsets count from the start of the data image ("offset within RISCV image").
    auto part = [&](uint32_t offset, uint32_t size, uint64_t index, const char* name) {
        return subregion(file, d.bin.data, offset, size, std::string("RM_RISCV_UCODE_DESC.") + name, at + 4 * index);
    };
    d.bootloader = part(d.bootloaderOffset, d.bootloaderSize, 1, "bootloaderOffset/Size");
    d.bootloader_param = part(d.bootloaderParamOffset, d.bootloaderParamSize, 3, "bootloaderParamOffset/Size");
    d.riscv_elf = part(d.riscvElfOffset, d.riscvElfSize, 5, "riscvElfOffset/Size");
    d.manifest = part(d.manifestOffset, d.manifestSize, 8, "manifestOffset/Size");
    d.monitor_data = part(d.monitorDataOffset, d.monitorDataSize, 10, "monitorDataOffset/Size");
    d.monitor_code = part(d.monitorCodeOffset, d.monitorCodeSize, 12, "monitorCodeOffset/Size");
    d.swbrom_code = part(d.swbromCodeOffset, d.swbromCodeSize, 15, "swbromCodeOffset/Size");
    d.swbrom_data = part(d.swbromDataOffset, d.swbromDataSize, 17, "swbromDataOffset/Size");
    // fbReservedSize = 0 is accepted: gb202's bootloader-570.144.bin has it.
    return d;
}

}  // namespace baregpu::fw::nv
