#include "synthetic_gsp.hpp"

#include <cstdint>
#include <cstring>

namespace baregpu::sim::nvgpu {

namespace {

struct Section {
    std::string name;
    uint64_t size;
    uint8_t fill;
};

struct ElfWriter {
    std::vector<std::byte> b;
    void fit(uint64_t n) {
        if (b.size() < n) b.resize(n);
    }
    template <class T>
    void put(uint64_t at, T v) {
        fit(at + sizeof v);
        std::memcpy(b.data() + at, &v, sizeof v);
    }
    void bytes(uint64_t at, const void* p, uint64_t n) {
        fit(at + n);
        std::memcpy(b.data() + at, p, n);
    }
};

}  // namespace

std::vector<std::byte> synthetic_gsp_elf(const std::vector<std::string>& families) {
    std::vector<Section> sections = {{".fwimage", 0x2c00, 0xaa}};
    for (const auto& f : families) sections.push_back({".fwsignature_" + f, 0x1000, 0x5a});
    // ELF64 little-endian (System V gABI): header 64 bytes, section data, .shstrtab, section headers.
    ElfWriter w;
    uint64_t at = 0x40;
    std::vector<uint64_t> offsets;
    for (const auto& s : sections) {
        offsets.push_back(at);
        w.fit(at + s.size);
        std::memset(w.b.data() + at, s.fill, s.size);
        at += (s.size + 7) & ~uint64_t{7};
    }
    std::string strtab(1, '\0');
    std::vector<uint32_t> names;
    for (const auto& s : sections) {
        names.push_back(static_cast<uint32_t>(strtab.size()));
        strtab += s.name + '\0';
    }
    const auto shstrtab_name = static_cast<uint32_t>(strtab.size());
    strtab += std::string(".shstrtab") + '\0';
    const uint64_t strtab_at = at;
    w.bytes(at, strtab.data(), strtab.size());
    at = (at + strtab.size() + 7) & ~uint64_t{7};
    const uint64_t shoff = at;
    const auto shnum = static_cast<uint16_t>(sections.size() + 2);  // null, sections, .shstrtab
    const char magic[4] = {0x7f, 'E', 'L', 'F'};
    w.bytes(0, magic, 4);
    w.put<uint8_t>(4, 2);  // ELFCLASS64
    w.put<uint8_t>(5, 1);  // ELFDATA2LSB
    w.put<uint8_t>(6, 1);  // EV_CURRENT
    w.put<uint16_t>(16, 0);     // ET_NONE
    w.put<uint16_t>(18, 0xf3);  // EM_RISCV
    w.put<uint32_t>(20, 1);
    w.put<uint64_t>(40, shoff);
    w.put<uint16_t>(52, 64);  // e_ehsize
    w.put<uint16_t>(58, 64);  // e_shentsize
    w.put<uint16_t>(60, shnum);
    w.put<uint16_t>(62, static_cast<uint16_t>(shnum - 1));
    w.fit(shoff + uint64_t{shnum} * 64);
    for (size_t i = 0; i < sections.size(); ++i) {
        const uint64_t h = shoff + (i + 1) * 64;
        w.put<uint32_t>(h, names[i]);
        w.put<uint32_t>(h + 4, 1);  // SHT_PROGBITS
        w.put<uint64_t>(h + 24, offsets[i]);
        w.put<uint64_t>(h + 32, sections[i].size);
    }
    const uint64_t h = shoff + uint64_t(shnum - 1) * 64;
    w.put<uint32_t>(h, shstrtab_name);
    w.put<uint32_t>(h + 4, 3);  // SHT_STRTAB
    w.put<uint64_t>(h + 24, strtab_at);
    w.put<uint64_t>(h + 32, strtab.size());
    // .fwimage starts with an ELF header, as the real image's does.
    w.bytes(offsets[0], magic, 4);
    return std::move(w.b);
}

}  // namespace baregpu::sim::nvgpu
