// A synthetic GSP-RM-like ELF64 built from the public layout (Linux include/uapi/linux/elf.h), for
// the ELF tests and as a fuzzing seed (the real gsp-*.bin is too large to ship).
#pragma once

#include "tests/firmware/nvidia/nv_test_support.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace baregpu::test::nv {

struct Section {
    std::string name;
    uint32_t type;  // SHT_PROGBITS = 1
    uint64_t size;
    uint8_t fill;
};

// Where the builder put things, so tests can both check the parse and aim mutations.
struct Elf64 {
    Bytes bytes;
    std::vector<uint64_t> data_offset;  // per section in `sections` order (index + 1 in the table)
    uint64_t shstrtab_offset = 0, shstrtab_size = 0;
    uint64_t shoff = 0;
    uint16_t shnum = 0;
    uint64_t shdr(uint64_t index) const { return shoff + index * 64; }
};

// [0] SHT_NULL, [1..n] the sections, [n+1] .shstrtab; data from 0x40, the table last.
inline Elf64 build_elf64(const std::vector<Section>& sections) {
    Elf64 e;
    Bytes& b = e.bytes;
    uint64_t at = 0x40;
    for (const auto& s : sections) {
        e.data_offset.push_back(at);
        b.fill(at, s.size, s.fill);
        at += (s.size + 7) & ~uint64_t{7};
    }
    std::string strtab(1, '\0');
    std::vector<uint32_t> name_off;
    for (const auto& s : sections) {
        name_off.push_back(static_cast<uint32_t>(strtab.size()));
        strtab += s.name + '\0';
    }
    const uint32_t shstrtab_name = static_cast<uint32_t>(strtab.size());
    strtab += std::string(".shstrtab") + '\0';
    e.shstrtab_offset = at;
    e.shstrtab_size = strtab.size();
    b.str(at, strtab);
    at = (at + strtab.size() + 7) & ~uint64_t{7};
    e.shoff = at;
    e.shnum = static_cast<uint16_t>(sections.size() + 2);

    b.str(0, "\x7f" "ELF").u8(4, 2).u8(5, 1).u8(6, 1);  // ELFCLASS64, ELFDATA2LSB, EV_CURRENT
    b.u16(16, 0).u16(18, 0xf3).u32(20, 1);               // ET_NONE, EM_RISCV, e_version
    b.u64(40, e.shoff).u16(52, 64).u16(58, 64).u16(60, e.shnum).u16(62, e.shnum - 1);
    b.fill(e.shdr(0), 64, 0);
    for (size_t i = 0; i < sections.size(); ++i) {
        const uint64_t h = e.shdr(i + 1);
        b.u32(h, name_off[i]).u32(h + 4, sections[i].type).u64(h + 24, e.data_offset[i]).u64(h + 32, sections[i].size);
    }
    const uint64_t h = e.shdr(e.shnum - 1);
    b.u32(h, shstrtab_name).u32(h + 4, 3).u64(h + 24, e.shstrtab_offset).u64(h + 32, e.shstrtab_size);
    b.fit(e.shdr(e.shnum));
    return e;
}

inline Elf64 gsp_like() {
    return build_elf64({{".fwimage", 1, 0x1000, 0xaa},
                        {".fwversion", 1, 0x10, 0x31},
                        {".fwsignature_ad10x", 1, 0x1000, 0x5a},
                        {".fwsignature_gb20x", 1, 0x800, 0x6b}});
}

}  // namespace baregpu::test::nv
