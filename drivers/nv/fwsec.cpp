// FWSEC-FRTS patching (fwsec.hpp has the layouts).
#include "drivers/nv/fwsec.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

#include <cstring>
#include <optional>

namespace baregpu::nv {
namespace {
constexpr uint32_t kDmemMapperId = 0x4, kCmdFrts = 0x15, kReadVbiosFlags = 2, kMediaFb = 2, kRegionSize4K = 0x100;
constexpr uint32_t kFrtsCmdSize = 48;

std::vector<std::byte> padded(std::span<const std::byte> b) {
    std::vector<std::byte> v(b.begin(), b.end());
    v.resize((v.size() + 255) & ~size_t{255});
    return v;
}
uint32_t get32(const std::vector<std::byte>& b, size_t at) {
    uint32_t v;
    std::memcpy(&v, b.data() + at, 4);
    return v;
}
void put32(std::vector<std::byte>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
}  // namespace

FwsecFrts prepare_fwsec_frts(const fw::nv::Vbios& vbios, uint64_t fb_size, const std::string& file) {
    const fw::nv::Fwsec& f = vbios.fwsec;
    FwsecFrts out;
    out.imem = padded(f.imem.bytes);
    out.dmem = padded(f.dmem.bytes);
    out.pkc_data_offset = f.desc.pkc_data_offset;
    out.engine_id_mask = f.desc.engine_id_mask;
    out.ucode_id = f.desc.ucode_id;
    out.imem_virt_base = f.desc.imem_virt_base;
    out.frts_offset = fb_size - kVgaWorkspaceSize - kFrtsSize;
    const size_t dmem_size = f.dmem.size();

    // The application interface table, then the DMEMMAPPER entry in it.
    const size_t itf = f.desc.interface_offset;
    const auto header_size = std::to_integer<uint8_t>(out.dmem[itf + 1]);
    const auto entry_size = std::to_integer<uint8_t>(out.dmem[itf + 2]);
    const auto entry_count = std::to_integer<uint8_t>(out.dmem[itf + 3]);
    std::optional<uint32_t> mapper;
    for (unsigned i = 0; i < entry_count; ++i) {
        const size_t e = itf + header_size + size_t{i} * entry_size;
        if (entry_size < 8 || e + 8 > dmem_size)
            throw FirmwareError(file, "FALCON_APPLICATION_INTERFACE_ENTRY_V1", f.dmem.offset + e, "an entry inside DMEM",
                                fmt::format("entry {} of {} bytes at DMEM {:#x}", i, entry_size, e));
        if (get32(out.dmem, e) == kDmemMapperId) mapper = get32(out.dmem, e + 4);
    }
    if (!mapper || *mapper + 64 > dmem_size)
        throw FirmwareError(file, "FWSEC application interface DMEMMAPPER entry", f.dmem.offset + itf,
                            "an entry with id 4 (DMEMMAPPER) pointing inside DMEM",
                            mapper ? fmt::format("DMEM offset {:#x}", *mapper) : fmt::format("{} entries, none", entry_count));
    const uint32_t cmd_in = get32(out.dmem, *mapper + 8), cmd_in_size = get32(out.dmem, *mapper + 12);
    if (cmd_in_size < kFrtsCmdSize || uint64_t{cmd_in} + kFrtsCmdSize > dmem_size)
        throw FirmwareError(file, "DMEM_MAPPER_V3.cmd_in_buffer", f.dmem.offset + *mapper + 8,
                            "room for FWSECLIC_FRTS_CMD (48 bytes) inside DMEM",
                            fmt::format("offset {:#x}, size {:#x}", cmd_in, cmd_in_size));
    put32(out.dmem, *mapper + 44, kCmdFrts);  // init_cmd
    std::memset(out.dmem.data() + cmd_in, 0, kFrtsCmdSize);
    put32(out.dmem, cmd_in + 0, 1);        // readVbiosDesc.version
    put32(out.dmem, cmd_in + 4, 24);       // .size
    put32(out.dmem, cmd_in + 20, kReadVbiosFlags);
    put32(out.dmem, cmd_in + 24, 1);       // frtsRegionDesc.version
    put32(out.dmem, cmd_in + 28, 20);      // .size
    put32(out.dmem, cmd_in + 32, static_cast<uint32_t>(out.frts_offset >> 12));
    put32(out.dmem, cmd_in + 36, kRegionSize4K);
    put32(out.dmem, cmd_in + 40, kMediaFb);

    // The signature the BROM checks, at PKCDataOffset. The last of the stored signatures (what
    // tinygrad takes); choosing by the board's fuse version is not done yet (README).
    if (f.desc.signature_count == 0)
        throw FirmwareError(file, "FALCON_UCODE_DESC_V3.SignatureCount", f.descriptor.offset + 0x27, "at least 1", "0");
    const auto sig = f.signatures.bytes.last(fw::nv::kRsa3kSignatureSize);
    std::memcpy(out.dmem.data() + out.pkc_data_offset, sig.data(), sig.size());
    return out;
}

}  // namespace baregpu::nv
