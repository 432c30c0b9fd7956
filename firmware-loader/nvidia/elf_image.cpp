#include "firmware-loader/nvidia/elf_image.hpp"

#include "base/checked.hpp"

#include <string>

namespace baregpu::fw::nv {

namespace {

// Where each header field sits for the two classes (Elf32_Ehdr / Elf64_Ehdr).
struct ClassLayout {
    uint64_t ehsize;
    uint64_t shentsize;
    uint64_t e_shoff, e_ehsize, e_shentsize, e_shnum, e_shstrndx;
    // Elf32_Shdr / Elf64_Shdr field offsets.
    uint64_t sh_flags, sh_offset, sh_size, sh_link, sh_info, sh_addralign, sh_entsize;
};
constexpr ClassLayout kElf32{52, 40, 32, 40, 46, 48, 50, 8, 16, 20, 24, 28, 32, 36};
constexpr ClassLayout kElf64{64, 64, 40, 52, 58, 60, 62, 8, 24, 32, 40, 44, 48, 56};

constexpr uint16_t kShnLoreserve = 0xff00;  // SHN_LORESERVE: e_shstrndx at or above it means "escaped"

}  // namespace

bool has_elf_magic(const ByteReader& file) {
    const auto d = file.data();
    return d.size() >= 4 && d[0] == std::byte{0x7f} && d[1] == std::byte{'E'} && d[2] == std::byte{'L'} &&
           d[3] == std::byte{'F'};
}

ElfImage ElfImage::parse(const ByteReader& file) {
    ElfImage elf;
    file.expect(has_elf_magic(file), "e_ident[EI_MAG0..3]", 0, "\\x7fELF", "other bytes or a shorter file");
    const uint8_t elf_class = file.u8(4, "e_ident[EI_CLASS]");
    file.expect(elf_class == kElfClass32 || elf_class == kElfClass64, "e_ident[EI_CLASS]", 4,
                "1 (ELFCLASS32) or 2 (ELFCLASS64)", std::to_string(elf_class));
    elf.is_64bit_ = elf_class == kElfClass64;
    const ClassLayout& c = elf.is_64bit_ ? kElf64 : kElf32;
    file.expect_eq(file.u8(5, "e_ident[EI_DATA]"), kElfData2Lsb, "e_ident[EI_DATA]", 5);
    file.expect_eq(file.u8(6, "e_ident[EI_VERSION]"), 1, "e_ident[EI_VERSION]", 6);
    file.region(0, c.ehsize, "ELF header");
    elf.e_type_ = file.u16(16, "e_type");
    elf.e_machine_ = file.u16(18, "e_machine");
    file.expect_eq(file.u32(20, "e_version"), 1, "e_version", 20);
    file.expect_eq(file.u16(c.e_ehsize, "e_ehsize"), c.ehsize, "e_ehsize", c.e_ehsize);

    elf.e_shoff_ = elf.is_64bit_ ? file.u64(c.e_shoff, "e_shoff") : file.u32(c.e_shoff, "e_shoff");
    const uint16_t shentsize = file.u16(c.e_shentsize, "e_shentsize");
    const uint16_t shnum = file.u16(c.e_shnum, "e_shnum");
    elf.e_shstrndx_ = file.u16(c.e_shstrndx, "e_shstrndx");
    // e_shnum == 0 with a table is the extended-numbering escape (count in section 0); NVIDIA's
    // images have a handful of sections, so that, like an escaped e_shstrndx, means garbage.
    file.expect(shnum != 0, "e_shnum", c.e_shnum, "at least one section header", "0");
    file.expect_eq(shentsize, c.shentsize, "e_shentsize", c.e_shentsize);
    file.expect(elf.e_shstrndx_ < shnum && elf.e_shstrndx_ < kShnLoreserve, "e_shstrndx", c.e_shstrndx,
                "a section index below e_shnum " + std::to_string(shnum), std::to_string(elf.e_shstrndx_));
    // The table may not overlap the ELF header it is found through.
    file.expect(elf.e_shoff_ >= c.ehsize, "e_shoff", c.e_shoff, "an offset at or past the " + std::to_string(c.ehsize) +
                "-byte ELF header", hex(elf.e_shoff_));
    const Region table = file.region(elf.e_shoff_, uint64_t{shnum} * shentsize, "e_shoff/e_shnum section header table");

    struct Raw {
        uint32_t name;
        uint32_t type;
        uint64_t flags, offset, size;
        uint32_t link, info;
        uint64_t addralign, entsize;
        uint64_t at;
    };
    std::vector<Raw> raw;
    raw.reserve(shnum);
    for (uint64_t i = 0; i < shnum; ++i) {
        const uint64_t at = table.offset + i * shentsize;
        const std::string s = "section header " + std::to_string(i);
        Raw r{};
        r.at = at;
        r.name = file.u32(at, s + " sh_name");
        r.type = file.u32(at + 4, s + " sh_type");
        if (elf.is_64bit_) {
            r.flags = file.u64(at + c.sh_flags, s + " sh_flags");
            r.offset = file.u64(at + c.sh_offset, s + " sh_offset");
            r.size = file.u64(at + c.sh_size, s + " sh_size");
            r.addralign = file.u64(at + c.sh_addralign, s + " sh_addralign");
            r.entsize = file.u64(at + c.sh_entsize, s + " sh_entsize");
        } else {
            r.flags = file.u32(at + c.sh_flags, s + " sh_flags");
            r.offset = file.u32(at + c.sh_offset, s + " sh_offset");
            r.size = file.u32(at + c.sh_size, s + " sh_size");
            r.addralign = file.u32(at + c.sh_addralign, s + " sh_addralign");
            r.entsize = file.u32(at + c.sh_entsize, s + " sh_entsize");
        }
        r.link = file.u32(at + c.sh_link, s + " sh_link");
        r.info = file.u32(at + c.sh_info, s + " sh_info");
        raw.push_back(r);
    }

    const Raw& str = raw[elf.e_shstrndx_];
    file.expect_eq(str.type, kShtStrtab, "section header " + std::to_string(elf.e_shstrndx_) + " sh_type (.shstrtab)",
                   str.at + 4);
    const Region strtab = file.region(str.offset, str.size, "section header " + std::to_string(elf.e_shstrndx_) +
                                                                " sh_offset/sh_size (.shstrtab)");

    elf.sections_.reserve(shnum);
    for (uint64_t i = 0; i < shnum; ++i) {
        const Raw& r = raw[i];
        const std::string s = "section header " + std::to_string(i);
        ElfSection sec;
        file.expect(r.name < strtab.size() || (r.name == 0 && strtab.size() == 0), s + " sh_name", r.at,
                    "an offset inside .shstrtab (" + std::to_string(strtab.size()) + " bytes)", hex(r.name));
        // A name must end inside the string table, not merely inside the file.
        if (strtab.size() != 0) sec.name = file.cstring(strtab.offset + r.name, strtab.size() - r.name, s + " name");
        sec.type = r.type;
        sec.flags = r.flags;
        sec.link = r.link;
        sec.info = r.info;
        sec.addralign = r.addralign;
        sec.entsize = r.entsize;
        sec.size = r.size;
        if (r.type == kShtNobits) {
            sec.region = Region{r.offset, {}};
        } else {
            sec.region = file.region(r.offset, r.size, s + " (" + sec.name + ") sh_offset/sh_size");
        }
        elf.sections_.push_back(std::move(sec));
    }
    return elf;
}

const ElfSection* ElfImage::find(std::string_view name) const {
    for (const auto& s : sections_)
        if (s.name == name) return &s;
    return nullptr;
}

const ElfSection& ElfImage::require(const ByteReader& file, std::string_view name) const {
    const ElfSection* s = find(name);
    if (s == nullptr)
        file.fail("section " + std::string(name), e_shoff_, "a section named " + std::string(name),
                  std::to_string(sections_.size()) + " sections, none of that name");
    return *s;
}

GspImage parse_gsp_image(const ByteReader& file) {
    GspImage g{ElfImage::parse(file), {}, {}};
    const ElfSection& fw = g.elf.require(file, ".fwimage");
    file.expect(fw.region.size() != 0, "section .fwimage", fw.region.offset, "a non-empty image", "0 bytes");
    g.fwimage = fw.region;
    for (const auto& s : g.elf.sections())
        if (s.name.starts_with(kFwSignaturePrefix)) g.signatures.push_back(s);
    return g;
}

FmcImage parse_fmc_image(const ByteReader& file) {
    FmcImage f{ElfImage::parse(file), {}, {}, {}, {}};
    f.hash = f.elf.require(file, "hash").region;
    f.signature = f.elf.require(file, "signature").region;
    f.publickey = f.elf.require(file, "publickey").region;
    f.image = f.elf.require(file, "image").region;
    file.expect(f.image.size() != 0, "section image", f.image.offset, "a non-empty image", "0 bytes");
    return f;
}

}  // namespace baregpu::fw::nv
