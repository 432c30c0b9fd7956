#include "drivers/nv/cubin.hpp"

#include "base/error.hpp"
#include "firmware-loader/byte_reader.hpp"
#include "firmware-loader/nvidia/elf_image.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace baregpu::nv {

namespace {

// System V gABI (Linux include/uapi/linux/elf.h).
constexpr uint32_t kShtSymtab = 2, kShtRela = 4, kShtRel = 9;
constexpr uint64_t kShfAlloc = 0x2;
constexpr uint64_t kEFlags = 48;  // Elf64_Ehdr.e_flags
constexpr uint64_t kSymSize = 24, kRelSize = 16, kRelaSize = 24;

// EIFMT_* and EIATTR_* (see cubin.hpp for the sources).
constexpr uint8_t kEifmtSval = 4;
constexpr uint8_t kEiattrParamCbank = 0x0a, kEiattrFrameSize = 0x11, kEiattrMinStackSize = 0x12,
                  kEiattrKparamInfo = 0x17, kEiattrCbankParamSize = 0x19, kEiattrMaxStackSize = 0x23,
                  kEiattrRegcount = 0x2f;
// EIATTR_NUM_BARRIERS (CuAssembler's name), a BVAL in .nv.info.<kernel>: nvcc 13.0 writes it with 1 for a kernel with
// one __syncthreads and leaves it out of one without (tests/nv/data/axpy_fill.cu, sm_89 and sm_90).
constexpr uint8_t kEiattrNumBarriers = 0x4c;

// R_CUDA_* (cuda-gdb cuda-elf-image.c; CuAssembler).
constexpr uint32_t kRCuda32 = 1, kRCuda64 = 2, kRCudaG32 = 3, kRCudaG64 = 4, kRCudaAbs32Lo32 = 56,
                   kRCudaAbs32Hi32 = 57;

constexpr uint64_t kImageAlign = 256;  // program and bank addresses are taken >> 8 by the QMD

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct Record {
    uint8_t format;
    uint8_t attribute;
    uint16_t value;                    // HVAL / BVAL value, SVAL size
    std::span<const std::byte> data;   // SVAL payload
    uint64_t at;                       // file offset, for errors
};

std::vector<Record> records(const fw::ByteReader& file, const fw::nv::ElfSection& section) {
    std::vector<Record> out;
    const uint64_t begin = section.region.offset, end = section.region.end();
    uint64_t at = begin;
    while (at < end) {
        file.expect(at + 4 <= end, section.name + " record header", at, "4 bytes inside the section", "the section end");
        Record r{file.u8(at, "EIFMT"), file.u8(at + 1, "EIATTR"), file.u16(at + 2, "EIATTR value/size"), {}, at};
        at += 4;
        if (r.format == kEifmtSval) {
            file.expect(at + r.value <= end, section.name + fmt::format(" EIATTR 0x{:x} payload", r.attribute), at,
                        "inside the section", fmt::format("{} bytes", r.value));
            r.data = file.region(at, r.value, "EIATTR payload").bytes;
            at += r.value;
        }
        out.push_back(r);
    }
    return out;
}

template <class T>
T load(std::span<const std::byte> bytes, size_t offset) {
    T v;
    std::memcpy(&v, bytes.data() + offset, sizeof(T));
    return v;
}

}  // namespace

Cubin Cubin::parse(std::span<const std::byte> elf, std::string name, uint32_t sm) {
    const fw::ByteReader file(elf, name);
    file.expect(fw::nv::has_elf_magic(file), "ELF magic", 0, "\\x7fELF", "something else");
    const fw::nv::ElfImage image = fw::nv::ElfImage::parse(file);
    file.expect(image.is_64bit(), "EI_CLASS", 4, "ELFCLASS64", "ELFCLASS32");
    file.expect_eq(image.e_machine(), kEmCuda, "e_machine (EM_CUDA)", 18);

    Cubin c;
    c.name_ = std::move(name);
    c.sm_ = (file.u32(kEFlags, "e_flags") >> 8) & 0xff;
    if (sm != 0 && c.sm_ != sm) {
        throw FirmwareError(c.name_, "e_flags SM field (bits 15:8)", kEFlags, fmt::format("sm_{} (the GPU's)", sm),
                            fmt::format("sm_{}", c.sm_));
    }
    const auto& sections = image.sections();

    // Symbols.
    std::vector<std::pair<std::string, std::pair<uint32_t, uint64_t>>> symbols;
    for (const auto& s : sections) {
        if (s.type != kShtSymtab) continue;
        file.expect(s.link < sections.size(), ".symtab sh_link", s.region.offset, "a string table section", fmt::format("{}", s.link));
        const auto& strtab = sections[s.link];
        for (uint64_t at = s.region.offset; at + kSymSize <= s.region.end(); at += kSymSize) {
            uint32_t name_offset = file.u32(at, "st_name");
            std::string sym_name;
            if (name_offset != 0) {
                file.expect(name_offset < strtab.region.size(), "st_name", at, "inside .strtab", fmt::format("{}", name_offset));
                sym_name = file.cstring(strtab.region.offset + name_offset, strtab.region.size() - name_offset, "symbol name");
            }
            symbols.push_back({sym_name, {file.u16(at + 6, "st_shndx"), file.u64(at + 8, "st_value")}});
        }
    }
    c.symbols_ = symbols;

    // The image: every allocated section but the per-kernel bank-0 images (copied per launch) and
    // shared memory (not memory the image holds).
    uint64_t offset = 0;
    for (uint32_t i = 0; i < sections.size(); ++i) {
        const auto& s = sections[i];
        if (!(s.flags & kShfAlloc) || s.name.starts_with(".nv.constant0") || s.name.starts_with(".nv.shared")) continue;
        offset = round_up(offset, std::max<uint64_t>(kImageAlign, s.addralign));
        Piece piece{offset, {s.region.bytes.begin(), s.region.bytes.end()}, s.size};
        c.pieces_[i] = piece;
        if (s.name.starts_with(".nv.constant")) {
            uint32_t bank = 0;
            for (char ch : s.name.substr(12)) {
                if (ch < '0' || ch > '9') break;
                bank = bank * 10 + static_cast<uint32_t>(ch - '0');
            }
            c.banks_[bank] = {offset, s.size};
        }
        offset += s.size;
    }
    c.image_size_ = round_up(offset, kImageAlign);

    // Relocations of sections in the image.
    for (const auto& s : sections) {
        if (s.type != kShtRel && s.type != kShtRela) continue;
        const uint64_t entry = s.type == kShtRel ? kRelSize : kRelaSize;
        file.expect(s.info < sections.size(), s.name + " sh_info", s.region.offset, "a section index", fmt::format("{}", s.info));
        const std::string& target = sections[s.info].name;
        if (!c.pieces_.count(s.info)) {
            // Debug information and the like: nothing the GPU loads.
            file.expect(!(sections[s.info].flags & kShfAlloc), s.name, s.region.offset,
                        "relocations of sections the loader places", "relocations of " + target + ", which it does not place");
            continue;
        }
        for (uint64_t at = s.region.offset; at + entry <= s.region.end(); at += entry) {
            Relocation r{s.info, file.u64(at, "r_offset"), static_cast<uint32_t>(file.u64(at + 8, "r_info")),
                         static_cast<uint32_t>(file.u64(at + 8, "r_info") >> 32)};
            const bool known = r.type == kRCuda32 || r.type == kRCuda64 || r.type == kRCudaG32 || r.type == kRCudaG64 ||
                               r.type == kRCudaAbs32Lo32 || r.type == kRCudaAbs32Hi32;
            file.expect(known, s.name + " relocation type", at + 8,
                        "R_CUDA_32/64, R_CUDA_G32/G64 or R_CUDA_ABS32_LO_32/HI_32 (1-4, 56, 57)", fmt::format("{}", r.type));
            const uint64_t width = (r.type == kRCuda64 || r.type == kRCudaG64) ? 8 : 4;
            const uint64_t field = r.type >= kRCudaAbs32Lo32 ? r.offset + 4 : r.offset;  // bits 63:32 of the instruction
            file.expect(field + width <= sections[s.info].size, s.name + " r_offset", at,
                        "inside " + target, fmt::format("0x{:x}", r.offset));
            file.expect(r.symbol < symbols.size(), s.name + " symbol", at + 12, "an index into .symtab",
                        fmt::format("{}", r.symbol));
            file.expect(c.pieces_.count(symbols[r.symbol].second.first) != 0, s.name + " symbol", at + 12,
                        "a symbol in a section the loader places", symbols[r.symbol].first);
            c.relocations_.push_back(r);
        }
    }

    // Kernels.
    auto find = [&](const std::string& n) -> const fw::nv::ElfSection* { return image.find(n); };
    for (uint32_t i = 0; i < sections.size(); ++i) {
        const auto& s = sections[i];
        if (!s.name.starts_with(".text.")) continue;
        CubinKernel k;
        k.name = s.name.substr(6);
        k.text_offset = c.pieces_.at(i).image_offset;
        k.text_size = s.size;
        k.registers = s.info >> 24;
        if (const auto* shared = find(".nv.shared." + k.name)) k.shared_bytes = static_cast<uint32_t>(shared->size);
        if (const auto* bank0 = find(".nv.constant0." + k.name)) {
            k.constant_bank0.assign(bank0->region.bytes.begin(), bank0->region.bytes.end());
        }
        uint64_t info_at = 0;
        if (const auto* info = find(".nv.info." + k.name)) {
            info_at = info->region.offset;
            for (const Record& r : records(file, *info)) {
                if (r.attribute == kEiattrParamCbank) {
                    file.expect(r.format == kEifmtSval && r.data.size() == 8, "EIATTR_PARAM_CBANK", r.at, "8 bytes", "another size");
                    k.param_offset = load<uint16_t>(r.data, 4);
                    k.param_size = load<uint16_t>(r.data, 6);
                } else if (r.attribute == kEiattrNumBarriers && r.format != kEifmtSval) {
                    k.barriers = r.value;
                } else if (r.attribute == kEiattrCbankParamSize && r.format != kEifmtSval) {
                    k.param_size = r.value;
                } else if (r.attribute == kEiattrKparamInfo) {
                    file.expect(r.format == kEifmtSval && r.data.size() == 12, "EIATTR_KPARAM_INFO", r.at, "12 bytes", "another size");
                    CubinParam p{load<uint16_t>(r.data, 4), load<uint16_t>(r.data, 6), (load<uint32_t>(r.data, 8) >> 18) & 0x3fff};
                    k.params.push_back(p);
                }
            }
        }
        std::sort(k.params.begin(), k.params.end(), [](const CubinParam& a, const CubinParam& b) { return a.ordinal < b.ordinal; });
        for (const CubinParam& p : k.params) {
            if (p.offset + p.size > k.param_size) {
                throw FirmwareError(c.name_, fmt::format(".nv.info.{} EIATTR_KPARAM_INFO of kernel {}", k.name, k.name), info_at,
                                    fmt::format("parameters inside the {}-byte block EIATTR_PARAM_CBANK gives", k.param_size),
                                    fmt::format("parameter {} at +{} ({} bytes), outside it", p.ordinal, p.offset, p.size));
            }
        }
        if (k.param_offset + k.param_size > k.constant_bank0.size()) {
            throw FirmwareError(c.name_, fmt::format(".nv.info.{} EIATTR_PARAM_CBANK of kernel {}", k.name, k.name), info_at,
                                fmt::format("a block inside .nv.constant0.{} ({} bytes)", k.name, k.constant_bank0.size()),
                                fmt::format("+0x{:x}, {} bytes, outside it", k.param_offset, k.param_size));
        }
        c.kernels_.push_back(std::move(k));
    }

    // Per-kernel attributes of the module-wide .nv.info, keyed by the kernel's symbol.
    if (const auto* info = find(".nv.info")) {
        for (const Record& r : records(file, *info)) {
            if (r.format != kEifmtSval || r.data.size() != 8) continue;
            uint32_t sym = load<uint32_t>(r.data, 0), value = load<uint32_t>(r.data, 4);
            file.expect(sym < symbols.size(), ".nv.info symbol", r.at, "an index into .symtab", fmt::format("{}", sym));
            for (CubinKernel& k : c.kernels_) {
                if (k.name != symbols[sym].first) continue;
                if (r.attribute == kEiattrRegcount) k.registers = value;
                if (r.attribute == kEiattrMinStackSize) k.min_stack_bytes = value;
                if (r.attribute == kEiattrMaxStackSize) k.max_stack_bytes = value;
                if (r.attribute == kEiattrFrameSize) k.frame_bytes = value;
            }
        }
    }
    if (c.kernels_.empty()) {
        throw FirmwareError(c.name_, "section table", image.e_shoff(), "a .text.<kernel> section", "none");
    }
    return c;
}

const CubinKernel& Cubin::kernel(std::string_view name) const {
    for (const CubinKernel& k : kernels_) {
        if (k.name == name) return k;
    }
    std::string names;
    for (const CubinKernel& k : kernels_) names += (names.empty() ? "" : ", ") + k.name;
    throw Error(name_, fmt::format("no kernel '{}' in the cubin (it has: {})", name, names));
}

uint64_t Cubin::symbol_address(uint32_t index, uint64_t base) const {
    const auto& [section, value] = symbols_[index].second;
    return base + pieces_.at(section).image_offset + value;
}

uint64_t Cubin::symbol_offset(std::string_view symbol) const {
    for (uint32_t i = 0; i < symbols_.size(); ++i) {
        if (symbols_[i].first == symbol && pieces_.count(symbols_[i].second.first)) return symbol_address(i, 0);
    }
    throw Error(name_, fmt::format("no symbol '{}' in a loaded section of the cubin", symbol));
}

std::vector<std::byte> Cubin::link(uint64_t base) const {
    std::vector<std::byte> out(image_size_);
    for (const auto& [index, piece] : pieces_) {
        if (!piece.bytes.empty()) std::memcpy(out.data() + piece.image_offset, piece.bytes.data(), piece.bytes.size());
    }
    for (const Relocation& r : relocations_) {
        const uint64_t at = pieces_.at(r.section).image_offset + r.offset;
        const uint64_t s = symbol_address(r.symbol, base);
        switch (r.type) {
            case kRCuda64:
            case kRCudaG64: {
                uint64_t addend;
                std::memcpy(&addend, out.data() + at, 8);  // REL: the addend is what the field holds
                uint64_t v = s + addend;
                std::memcpy(out.data() + at, &v, 8);
                break;
            }
            case kRCuda32:
            case kRCudaG32: {
                uint32_t addend;
                std::memcpy(&addend, out.data() + at, 4);
                uint32_t v = static_cast<uint32_t>(s + addend);
                std::memcpy(out.data() + at, &v, 4);
                break;
            }
            case kRCudaAbs32Lo32:
            case kRCudaAbs32Hi32: {
                uint32_t v = static_cast<uint32_t>(r.type == kRCudaAbs32Lo32 ? s : s >> 32);
                std::memcpy(out.data() + at + 4, &v, 4);
                break;
            }
            default: break;  // refused at parse
        }
    }
    return out;
}

}  // namespace baregpu::nv
