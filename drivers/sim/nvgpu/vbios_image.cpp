// The generated VBIOS (layouts: vbios_image.hpp).
#include "vbios_image.hpp"

#include <string_view>

namespace baregpu::sim::nvgpu {
namespace {

struct VbiosWriter {
    std::vector<std::byte>& b;
    void u8(uint64_t at, uint64_t v) {
        if (at + 1 > b.size()) b.resize(at + 1);
        b[at] = static_cast<std::byte>(v & 0xff);
    }
    void u16(uint64_t at, uint64_t v) { u8(at, v), u8(at + 1, v >> 8); }
    void u32(uint64_t at, uint64_t v) { u16(at, v), u16(at + 2, v >> 16); }
    void str(uint64_t at, std::string_view s) {
        for (size_t i = 0; i < s.size(); ++i) u8(at + i, static_cast<uint8_t>(s[i]));
    }
    void pattern(uint64_t at, uint64_t size, uint8_t seed) {
        for (uint64_t i = 0; i < size; ++i) u8(at + i, static_cast<uint8_t>(seed + i * 7));
    }
};

// ROM header (55 AA, PCIR pointer at +0x18), PCIR, and an NPDE after it.
void image(VbiosWriter& w, uint64_t base, uint16_t device, uint8_t code_type, uint16_t blocks, bool last) {
    constexpr uint64_t pcir = 0x40;
    w.u8(base, 0x55), w.u8(base + 1, 0xaa), w.u16(base + 0x18, pcir);
    const uint64_t p = base + pcir;
    w.str(p, "PCIR"), w.u16(p + 4, 0x10de), w.u16(p + 6, device), w.u16(p + 0xa, 0x18);
    w.u8(p + 0xf, 3);  // class code: display controller
    w.u16(p + 0x10, blocks), w.u16(p + 0x12, 1), w.u8(p + 0x14, code_type), w.u8(p + 0x15, last ? 0x80 : 0);
    const uint64_t n = p + 0x20;  // 16-byte aligned after PCIR
    w.str(n, "NPDE"), w.u16(n + 4, 0x101), w.u16(n + 6, 0x10), w.u16(n + 8, blocks), w.u8(n + 0xa, last ? 0x80 : 0);
}

}  // namespace

VbiosImage make_vbios(uint16_t device_id, bool with_fwsec) {
    VbiosImage v;
    v.has_fwsec = with_fwsec;
    VbiosWriter w{v.rom};
    constexpr uint64_t kPcAtSize = 0x400, kFwsec = 0x400;
    constexpr uint64_t kTableRel = 0x80, kDescRel = 0x100;
    constexpr uint64_t kDescSize = 44 + 384;  // descriptor + one RSA-3K signature
    constexpr uint64_t kImem = 0x400, kDmem = 0x400;
    constexpr uint64_t kFwsecSize = 0xc00;  // 6 blocks holds table, descriptor, IMEM and DMEM
    v.rom.resize(kFwsec + kFwsecSize);
    image(w, 0, device_id, 0x00, kPcAtSize / 512, false);  // PC-AT
    image(w, kFwsec, device_id, 0xe0, kFwsecSize / 512, true);  // FWSEC

    // BIT header at 0x100 with two tokens; 'p' (BIT_TOKEN_FALCON_DATA, version 2) points at the
    // falcon-data structure whose first word is the ucode table's ROM address.
    constexpr uint64_t bit = 0x100;
    w.u8(bit, 0xff), w.u8(bit + 1, 0xb8), w.str(bit + 2, "BIT"), w.u8(bit + 5, 0);
    w.u16(bit + 6, 0x0100), w.u8(bit + 8, 12), w.u8(bit + 9, 6), w.u8(bit + 10, 2);
    w.u8(bit + 12, 'I'), w.u8(bit + 13, 1), w.u16(bit + 14, 4), w.u16(bit + 16, 0x190);
    w.u8(bit + 18, 'p'), w.u8(bit + 19, 2), w.u16(bit + 20, 4), w.u16(bit + 22, 0x1a0);
    w.u32(0x1a0, kPcAtSize + kTableRel);

    // Falcon ucode table {Version 1, HeaderSize 4, EntrySize 6, EntryCount} + {AppID, TargetID, DescPtr}.
    const uint64_t table = kFwsec + kTableRel;
    w.u8(table, 1), w.u8(table + 1, 4), w.u8(table + 2, 6), w.u8(table + 3, with_fwsec ? 2 : 1);
    w.u8(table + 4, 0x05), w.u32(table + 6, 0x12345);  // FIRMWARE_SEC_LIC: not ours to run
    if (with_fwsec) w.u8(table + 10, 0x85), w.u32(table + 12, kPcAtSize + kDescRel);  // FWSEC_PROD

    // FALCON_UCODE_DESC_V3 and the ucode.
    v.interface_offset = 0x10;
    v.dmem_mapper_offset = 0x40;
    v.cmd_in_buffer_offset = 0x100;
    v.pkc_data_offset = 0x200;
    v.engine_id_mask = 0x0004;  // the GSP falcon
    v.ucode_id = 9;
    const uint64_t d = kFwsec + kDescRel;
    w.u32(d, (kDescSize << 16) | (3 << 8) | 1), w.u32(d + 4, kImem + kDmem);
    w.u32(d + 8, v.pkc_data_offset), w.u32(d + 0xc, v.interface_offset);
    w.u32(d + 0x10, 0), w.u32(d + 0x14, kImem), w.u32(d + 0x18, 0), w.u32(d + 0x1c, 0), w.u32(d + 0x20, kDmem);
    w.u16(d + 0x24, v.engine_id_mask), w.u8(d + 0x26, v.ucode_id), w.u8(d + 0x27, 1), w.u16(d + 0x28, 1);
    v.signature_offset = d + 44;
    w.pattern(v.signature_offset, 384, 0x5e);
    v.imem_offset = d + kDescSize, v.imem_size = kImem;
    w.pattern(v.imem_offset, kImem, 0xc0);
    v.dmem_offset = v.imem_offset + kImem, v.dmem_size = kDmem;
    for (uint64_t i = 0; i < kDmem; ++i) w.u8(v.dmem_offset + i, 0);
    const uint64_t dm = v.dmem_offset;
    // Application interface table: two entries, the DMEMMAPPER second.
    w.u8(dm + v.interface_offset, 1), w.u8(dm + v.interface_offset + 1, 4), w.u8(dm + v.interface_offset + 2, 8);
    w.u8(dm + v.interface_offset + 3, 2);
    w.u32(dm + v.interface_offset + 4, 0x1), w.u32(dm + v.interface_offset + 8, 0x300);
    w.u32(dm + v.interface_offset + 12, 0x4), w.u32(dm + v.interface_offset + 16, v.dmem_mapper_offset);
    const uint64_t mapper = dm + v.dmem_mapper_offset;
    w.str(mapper, "DMAP"), w.u16(mapper + 4, 3), w.u16(mapper + 6, 64);
    w.u32(mapper + 8, v.cmd_in_buffer_offset), w.u32(mapper + 12, 0x100);
    w.u32(mapper + 44, 0);  // init_cmd: the driver sets FRTS (0x15)
    return v;
}

}  // namespace baregpu::sim::nvgpu
