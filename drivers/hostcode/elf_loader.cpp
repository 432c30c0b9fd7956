#include "drivers/hostcode/elf_loader.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"
#include "drivers/hostcode/kernel_abi.h"

#include <cstring>
#include <elf.h>
#include <fmt/format.h>

namespace baregpu::hostcode {

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kStubBytes = 16;  // movabs r11, imm64 (10) + jmp r11 (3) + 3 x int3

template <typename T>
T read_at(std::span<const std::byte> bytes, uint64_t offset) {
    T out;
    std::memcpy(&out, bytes.data() + offset, sizeof(T));
    return out;
}

const char* relocation_name(uint32_t type) {
    switch (type) {
        case R_X86_64_NONE: return "R_X86_64_NONE";
        case R_X86_64_64: return "R_X86_64_64";
        case R_X86_64_PC32: return "R_X86_64_PC32";
        case R_X86_64_GOT32: return "R_X86_64_GOT32";
        case R_X86_64_PLT32: return "R_X86_64_PLT32";
        case R_X86_64_GOTPCREL: return "R_X86_64_GOTPCREL";
        case R_X86_64_32: return "R_X86_64_32";
        case R_X86_64_32S: return "R_X86_64_32S";
        case R_X86_64_PC64: return "R_X86_64_PC64";
        case R_X86_64_GOTOFF64: return "R_X86_64_GOTOFF64";
        case R_X86_64_GOTPC32: return "R_X86_64_GOTPC32";
        case R_X86_64_TPOFF32: return "R_X86_64_TPOFF32";
        case R_X86_64_GOTPCRELX: return "R_X86_64_GOTPCRELX";
        case R_X86_64_REX_GOTPCRELX: return "R_X86_64_REX_GOTPCRELX";
        default: return "unknown";
    }
}

// Bytes of the field a supported relocation writes; 0 for an unsupported type.
uint32_t relocation_width(uint32_t type) {
    switch (type) {
        case R_X86_64_NONE: return 0;
        case R_X86_64_64:
        case R_X86_64_PC64: return 8;
        case R_X86_64_PC32:
        case R_X86_64_PLT32:
        case R_X86_64_GOTPCREL:
        case R_X86_64_GOTPCRELX:
        case R_X86_64_REX_GOTPCRELX:
        case R_X86_64_32:
        case R_X86_64_32S: return 4;
        default: return UINT32_MAX;
    }
}

bool uses_got(uint32_t type) {
    return type == R_X86_64_GOTPCREL || type == R_X86_64_GOTPCRELX || type == R_X86_64_REX_GOTPCRELX;
}

}  // namespace

void ElfObject::fail(const std::string& what) const {
    throw Error(device_, fmt::format("{}: {}", origin_, what));
}

std::string ElfObject::where(const Section& s) const { return fmt::format("section '{}'", s.name); }

ElfObject ElfObject::parse(std::span<const std::byte> bytes, std::string device, std::string origin) {
    ElfObject o;
    o.device_ = std::move(device);
    o.origin_ = std::move(origin);
    o.file_.assign(bytes.begin(), bytes.end());
    std::span<const std::byte> file(o.file_);
    const uint64_t file_size = file.size();

    // ELF header (gABI "ELF Header").
    if (file_size < sizeof(Elf64_Ehdr)) {
        o.fail(fmt::format("{} bytes is too small for an ELF header ({} bytes)", file_size, sizeof(Elf64_Ehdr)));
    }
    auto eh = read_at<Elf64_Ehdr>(file, 0);
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) o.fail("not an ELF file (bad magic); expected an x86-64 object from cc -c");
    if (eh.e_ident[EI_CLASS] != ELFCLASS64) o.fail(fmt::format("ELF class {} is not ELFCLASS64", eh.e_ident[EI_CLASS]));
    if (eh.e_ident[EI_DATA] != ELFDATA2LSB) o.fail("not little-endian (EI_DATA != ELFDATA2LSB)");
    if (eh.e_ident[EI_VERSION] != EV_CURRENT || eh.e_version != EV_CURRENT) o.fail("ELF version is not EV_CURRENT");
    if (eh.e_type != ET_REL) {
        o.fail(fmt::format("ELF type {} is not ET_REL (1): the CPU device loads relocatable objects (cc -c), not executables or "
                           "shared libraries",
                           eh.e_type));
    }
    if (eh.e_machine != EM_X86_64) {
        o.fail(fmt::format("machine {} is not EM_X86_64 ({}): compile the kernel for x86-64", eh.e_machine, EM_X86_64));
    }
    if (eh.e_shentsize != sizeof(Elf64_Shdr)) o.fail(fmt::format("e_shentsize {} is not {}", eh.e_shentsize, sizeof(Elf64_Shdr)));
    if (eh.e_shnum == 0 || eh.e_shnum >= SHN_LORESERVE) o.fail(fmt::format("e_shnum {} is not a usable section count", eh.e_shnum));
    if (!range_within(eh.e_shoff, uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr), file_size)) {
        o.fail(fmt::format("section table at 0x{:x} ({} entries) extends past the end of the file (0x{:x} bytes)", eh.e_shoff,
                           eh.e_shnum, file_size));
    }
    if (eh.e_shstrndx == SHN_UNDEF || eh.e_shstrndx >= eh.e_shnum) o.fail(fmt::format("e_shstrndx {} is out of range", eh.e_shstrndx));

    // Section table.
    std::vector<Elf64_Shdr> shdrs(eh.e_shnum);
    for (uint32_t i = 0; i < eh.e_shnum; ++i) shdrs[i] = read_at<Elf64_Shdr>(file, eh.e_shoff + uint64_t(i) * sizeof(Elf64_Shdr));
    for (uint32_t i = 0; i < eh.e_shnum; ++i) {
        const Elf64_Shdr& sh = shdrs[i];
        if (sh.sh_type != SHT_NOBITS && sh.sh_type != SHT_NULL && !range_within(sh.sh_offset, sh.sh_size, file_size)) {
            o.fail(fmt::format("section {} at 0x{:x} (0x{:x} bytes) extends past the end of the file (0x{:x} bytes)", i, sh.sh_offset,
                               sh.sh_size, file_size));
        }
    }
    const Elf64_Shdr& strtab_hdr = shdrs[eh.e_shstrndx];
    if (strtab_hdr.sh_type != SHT_STRTAB) o.fail("e_shstrndx does not name a string table");
    auto string_at = [&](const Elf64_Shdr& table, uint64_t offset, const char* what) -> std::string {
        if (offset >= table.sh_size) o.fail(fmt::format("{} name offset 0x{:x} is outside its string table (0x{:x} bytes)", what, offset, table.sh_size));
        const char* begin = reinterpret_cast<const char*>(file.data() + table.sh_offset + offset);
        const void* nul = std::memchr(begin, 0, table.sh_size - offset);
        if (!nul) o.fail(fmt::format("{} name at 0x{:x} is not NUL-terminated inside its string table", what, offset));
        return std::string(begin, static_cast<const char*>(nul));
    };

    o.sections_.resize(eh.e_shnum);
    uint32_t symtab_index = 0;
    for (uint32_t i = 0; i < eh.e_shnum; ++i) {
        const Elf64_Shdr& sh = shdrs[i];
        Section& s = o.sections_[i];
        s.name = i == 0 ? "" : string_at(strtab_hdr, sh.sh_name, "section");
        s.type = sh.sh_type;
        s.flags = sh.sh_flags;
        s.file_offset = sh.sh_offset;
        s.size = sh.sh_size;
        s.align = sh.sh_addralign ? sh.sh_addralign : 1;
        s.link = sh.sh_link;
        s.info = sh.sh_info;
        s.entsize = sh.sh_entsize;
        if (!is_power_of_two(s.align) || s.align > kPage) {
            o.fail(fmt::format("{}: alignment {} is not a power of two up to 4096", o.where(s), s.align));
        }
        if (sh.sh_type == SHT_SYMTAB) {
            if (symtab_index) o.fail("more than one symbol table");
            symtab_index = i;
        }
        if (sh.sh_type == SHT_DYNAMIC || sh.sh_type == SHT_DYNSYM) o.fail(fmt::format("{}: dynamic sections are not allowed in a relocatable object", o.where(s)));
        if (!(sh.sh_flags & SHF_ALLOC)) continue;
        if (sh.sh_flags & SHF_TLS) o.fail(fmt::format("{}: thread-local storage is not supported in kernels", o.where(s)));
        if (sh.sh_type == SHT_INIT_ARRAY || sh.sh_type == SHT_FINI_ARRAY || sh.sh_type == SHT_PREINIT_ARRAY) {
            o.fail(fmt::format("{}: constructors and destructors are not supported in kernels", o.where(s)));
        }
        // Loadable: code, data, bss and unwind tables; notes (.note.gnu.property) are metadata.
        if (sh.sh_type == SHT_PROGBITS || sh.sh_type == SHT_NOBITS || sh.sh_type == SHT_X86_64_UNWIND) s.loaded = true;
    }
    if (!symtab_index) o.fail("no symbol table (.symtab); was the object stripped?");

    // Layout: code, read-only, writable; each group page-aligned.
    uint64_t cursor = 0;
    auto place = [&](auto predicate) {
        for (Section& s : o.sections_) {
            if (!s.loaded || !predicate(s)) continue;
            auto at = align_up(cursor, s.align);
            auto end = at ? checked_add(*at, s.size) : std::nullopt;
            if (!end || *end > (256ull << 20)) o.fail(fmt::format("{}: 0x{:x} bytes do not fit a 256 MiB kernel image", o.where(s), s.size));
            s.image_offset = *at;
            cursor = *end;
        }
    };
    auto is_exec = [](const Section& s) { return (s.flags & SHF_EXECINSTR) != 0; };
    auto is_rw = [](const Section& s) { return !(s.flags & SHF_EXECINSTR) && (s.flags & SHF_WRITE); };
    auto is_ro = [](const Section& s) { return !(s.flags & SHF_EXECINSTR) && !(s.flags & SHF_WRITE); };

    // Symbols (gABI "Symbol Table").
    const Section& symtab = o.sections_[symtab_index];
    if (symtab.entsize != sizeof(Elf64_Sym) || symtab.size % sizeof(Elf64_Sym) != 0) {
        o.fail(fmt::format("symbol table entry size {} / size 0x{:x} do not match Elf64_Sym ({} bytes)", symtab.entsize, symtab.size,
                           sizeof(Elf64_Sym)));
    }
    if (symtab.link == 0 || symtab.link >= eh.e_shnum || shdrs[symtab.link].sh_type != SHT_STRTAB) {
        o.fail("the symbol table's sh_link does not name a string table");
    }
    const Elf64_Shdr& symstr = shdrs[symtab.link];
    uint64_t nsyms = symtab.size / sizeof(Elf64_Sym);
    o.symbols_.resize(nsyms);
    for (uint64_t i = 0; i < nsyms; ++i) {
        auto sym = read_at<Elf64_Sym>(file, symtab.file_offset + i * sizeof(Elf64_Sym));
        Symbol& s = o.symbols_[i];
        s.name = i == 0 ? "" : string_at(symstr, sym.st_name, "symbol");
        s.type = ELF64_ST_TYPE(sym.st_info);
        s.binding = ELF64_ST_BIND(sym.st_info);
        s.section = sym.st_shndx;
        s.value = sym.st_value;
        if (s.section == SHN_COMMON) o.fail(fmt::format("symbol '{}' is a common symbol; compile with -fno-common", s.name));
        if (s.section == SHN_XINDEX) o.fail(fmt::format("symbol '{}' uses an extended section index (more than 65280 sections)", s.name));
        if (s.type == STT_TLS) o.fail(fmt::format("symbol '{}' is thread-local; kernels cannot use thread-local storage", s.name));
        if (s.section != SHN_UNDEF && s.section != SHN_ABS) {
            if (s.section >= eh.e_shnum) o.fail(fmt::format("symbol '{}' names section {} of {}", s.name, s.section, eh.e_shnum));
            const Section& in = o.sections_[s.section];
            if (s.type != STT_SECTION && s.value > in.size) {
                o.fail(fmt::format("symbol '{}' at 0x{:x} is outside {} (0x{:x} bytes)", s.name, s.value, o.where(in), in.size));
            }
        }
    }

    // Relocations (psABI x86-64 "Relocation Types").
    for (uint32_t i = 0; i < eh.e_shnum; ++i) {
        const Section& rs = o.sections_[i];
        if (rs.type != SHT_RELA && rs.type != SHT_REL) continue;
        if (rs.info == 0 || rs.info >= eh.e_shnum) o.fail(fmt::format("{}: sh_info {} names no section", o.where(rs), rs.info));
        const Section& target = o.sections_[rs.info];
        if (!target.loaded) continue;  // debug info and the like
        if (rs.type == SHT_REL) o.fail(fmt::format("{}: SHT_REL relocations are not used on x86-64; expected SHT_RELA", o.where(rs)));
        if (rs.link != symtab_index) o.fail(fmt::format("{}: sh_link {} is not the symbol table", o.where(rs), rs.link));
        if (rs.entsize != sizeof(Elf64_Rela) || rs.size % sizeof(Elf64_Rela) != 0) {
            o.fail(fmt::format("{}: entry size {} does not match Elf64_Rela ({} bytes)", o.where(rs), rs.entsize, sizeof(Elf64_Rela)));
        }
        for (uint64_t k = 0; k < rs.size / sizeof(Elf64_Rela); ++k) {
            auto r = read_at<Elf64_Rela>(file, rs.file_offset + k * sizeof(Elf64_Rela));
            Relocation rel{rs.info, r.r_offset, uint32_t(ELF64_R_TYPE(r.r_info)), uint32_t(ELF64_R_SYM(r.r_info)), r.r_addend};
            uint32_t width = relocation_width(rel.type);
            if (width == UINT32_MAX) {
                o.fail(fmt::format("{}: relocation #{} at 0x{:x} has unsupported type {} ({}); supported: R_X86_64_64, PC32, PLT32, "
                                   "GOTPCREL(X), 32, 32S, PC64. Compile kernels with -fPIC",
                                   o.where(rs), k, rel.offset, rel.type, relocation_name(rel.type)));
            }
            if (!range_within(rel.offset, width, target.size)) {
                o.fail(fmt::format("{}: relocation #{} writes {} bytes at 0x{:x}, outside {} (0x{:x} bytes)", o.where(rs), k, width,
                                   rel.offset, o.where(target), target.size));
            }
            if (rel.symbol >= nsyms) {
                o.fail(fmt::format("{}: relocation #{} names symbol {} of {}", o.where(rs), k, rel.symbol, nsyms));
            }
            Symbol& sym = o.symbols_[rel.symbol];
            if (sym.section != SHN_UNDEF && sym.section != SHN_ABS && !o.sections_[sym.section].loaded && rel.type != R_X86_64_NONE) {
                o.fail(fmt::format("{}: relocation #{} refers to '{}' in {}, which is not loaded", o.where(rs), k, sym.name,
                                   o.where(o.sections_[sym.section])));
            }
            if (uses_got(rel.type) && sym.got_slot == UINT32_MAX) sym.got_slot = uint32_t(o.got_entries_++);
            if (rel.type == R_X86_64_PLT32 && sym.section == SHN_UNDEF && sym.stub == UINT32_MAX) sym.stub = uint32_t(o.stub_count_++);
            o.relocations_.push_back(rel);
        }
    }

    // Lay out: code + stubs | read-only + GOT | writable.
    o.layout_.exec_begin = cursor;
    place(is_exec);
    o.stubs_offset_ = *align_up(cursor, 16);
    cursor = o.stubs_offset_ + o.stub_count_ * kStubBytes;
    o.layout_.exec_end = cursor;
    cursor = *align_up(cursor, kPage);
    o.layout_.ro_begin = cursor;
    place(is_ro);
    o.got_offset_ = *align_up(cursor, 8);
    cursor = o.got_offset_ + o.got_entries_ * 8;
    o.layout_.ro_end = cursor;
    cursor = *align_up(cursor, kPage);
    o.layout_.rw_begin = cursor;
    place(is_rw);
    o.layout_.rw_end = cursor;
    o.layout_.size = *align_up(std::max<uint64_t>(cursor, 1), kPage);

    // Kernel descriptors (drivers/hostcode/kernel_abi.h).
    for (const Section& s : o.sections_) {
        if (s.name != BAREGPU_KERNEL_SECTION) continue;
        if (s.type != SHT_PROGBITS || s.size % sizeof(baregpu_kernel_descriptor) != 0) {
            o.fail(fmt::format("{}: 0x{:x} bytes is not a whole number of {}-byte kernel descriptors", o.where(s), s.size,
                               sizeof(baregpu_kernel_descriptor)));
        }
        for (uint64_t off = 0; off < s.size; off += sizeof(baregpu_kernel_descriptor)) {
            auto d = read_at<baregpu_kernel_descriptor>(file, s.file_offset + off);
            if (d.magic != BAREGPU_KERNEL_MAGIC || d.abi_version != BAREGPU_KERNEL_ABI_VERSION) {
                o.fail(fmt::format("{}: descriptor at 0x{:x} has magic 0x{:08x} version {}; expected 0x{:08x} version {}", o.where(s),
                                   off, d.magic, d.abi_version, BAREGPU_KERNEL_MAGIC, BAREGPU_KERNEL_ABI_VERSION));
            }
            const void* nul = std::memchr(d.name, 0, sizeof d.name);
            if (!nul || nul == d.name) o.fail(fmt::format("{}: descriptor at 0x{:x} has no NUL-terminated name", o.where(s), off));
            std::string name(static_cast<const char*>(d.name), static_cast<const char*>(nul));
            if (d.kernarg_size < 8u * d.num_buffers + 4u * d.num_values) {
                o.fail(fmt::format("kernel '{}': kernarg_size {} is smaller than {} buffers and {} values need ({})", name,
                                   d.kernarg_size, d.num_buffers, d.num_values, 8u * d.num_buffers + 4u * d.num_values));
            }
            if (d.max_threads == 0) o.fail(fmt::format("kernel '{}': max_threads is 0", name));
            const Symbol* fn = nullptr;
            for (const Symbol& sym : o.symbols_) {
                if (sym.name == name && sym.section != SHN_UNDEF && sym.section != SHN_ABS &&
                    (sym.binding == STB_GLOBAL || sym.binding == STB_WEAK)) {
                    fn = &sym;
                }
            }
            if (!fn || fn->type != STT_FUNC || !is_exec(o.sections_[fn->section]) || !o.sections_[fn->section].loaded) {
                o.fail(fmt::format("kernel '{}' has a descriptor but no global function of that name in code", name));
            }
            if (fn->value >= o.sections_[fn->section].size) {
                o.fail(fmt::format("kernel '{}' starts at 0x{:x}, at or past the end of {} (0x{:x} bytes)", name, fn->value,
                                   o.where(o.sections_[fn->section]), o.sections_[fn->section].size));
            }
            for (const KernelEntry& k : o.kernels_) {
                if (k.name == name) o.fail(fmt::format("kernel '{}' is described twice", name));
            }
            o.kernels_.push_back({name, o.sections_[fn->section].image_offset + fn->value, d.kernarg_size, d.num_buffers, d.num_values,
                                  d.shared_bytes, d.private_bytes, d.max_threads});
        }
    }
    if (o.kernels_.empty()) {
        o.fail("no kernels: the object has no " BAREGPU_KERNEL_SECTION " descriptors (use BAREGPU_KERNEL from drivers/hostcode/kernel_abi.h)");
    }
    return o;
}

const KernelEntry& ElfObject::kernel(std::string_view name) const {
    std::string have;
    for (const KernelEntry& k : kernels_) {
        if (k.name == name) return k;
        have += (have.empty() ? "" : ", ") + k.name;
    }
    fail(fmt::format("no kernel named '{}'; it has: {}", name, have));
}

void ElfObject::link(std::span<std::byte> image, uint64_t base, std::span<const Import> imports) const {
    if (image.size() != layout_.size) fail(fmt::format("image buffer of 0x{:x} bytes; layout needs 0x{:x}", image.size(), layout_.size));
    std::memset(image.data(), 0, image.size());
    for (const Section& s : sections_) {
        if (s.loaded && s.type != SHT_NOBITS && s.size) std::memcpy(image.data() + s.image_offset, file_.data() + s.file_offset, s.size);
    }
    // An undefined symbol is one of `imports`, or a weak reference that resolves to 0.
    auto undefined_address = [&](const Symbol& sym) -> uint64_t {
        for (const Import& imp : imports) {
            if (imp.name == sym.name) return imp.address;
        }
        if (sym.binding == STB_WEAK) return 0;
        std::string names;
        for (const Import& imp : imports) names += (names.empty() ? "" : ", ") + std::string(imp.name);
        fail(fmt::format("undefined symbol '{}'; a kernel may call only: {}", sym.name, names));
    };
    auto symbol_address = [&](const Symbol& sym) -> uint64_t {
        if (sym.section == SHN_ABS) return sym.value;
        if (sym.section != SHN_UNDEF) return base + sections_[sym.section].image_offset + sym.value;
        if (sym.stub != UINT32_MAX) return base + stubs_offset_ + sym.stub * kStubBytes;
        return undefined_address(sym);
    };
    // Call stubs for imported functions: movabs r11, target; jmp r11 (r11 is the psABI's
    // scratch register for exactly this).
    for (const Symbol& sym : symbols_) {
        if (sym.stub == UINT32_MAX) continue;
        uint64_t target = undefined_address(sym);
        std::byte* p = image.data() + stubs_offset_ + sym.stub * kStubBytes;
        const uint8_t code[16] = {0x49, 0xbb, 0, 0, 0, 0, 0, 0, 0, 0, 0x41, 0xff, 0xe3, 0xcc, 0xcc, 0xcc};
        std::memcpy(p, code, sizeof code);
        std::memcpy(p + 2, &target, 8);
    }
    // GOT entries hold the symbols' absolute addresses.
    for (const Symbol& sym : symbols_) {
        if (sym.got_slot == UINT32_MAX) continue;
        uint64_t value = sym.section == SHN_UNDEF ? undefined_address(sym) : symbol_address(sym);
        std::memcpy(image.data() + got_offset_ + sym.got_slot * 8, &value, 8);
    }
    for (const Relocation& r : relocations_) {
        const Section& target = sections_[r.target];
        const Symbol& sym = symbols_[r.symbol];
        uint64_t field = target.image_offset + r.offset;
        uint64_t P = base + field;
        auto fits32s = [](int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; };
        auto put32 = [&](int64_t v, bool is_signed) {
            if (is_signed ? !fits32s(v) : (v < 0 || v > int64_t(UINT32_MAX))) {
                fail(fmt::format("{} at {}+0x{:x} against '{}': value 0x{:x} does not fit 32 bits at load address 0x{:x}; compile "
                                 "kernels with -fPIC",
                                 relocation_name(r.type), where(target), r.offset, sym.name, uint64_t(v), base));
            }
            auto v32 = uint32_t(v);
            std::memcpy(image.data() + field, &v32, 4);
        };
        switch (r.type) {
            case R_X86_64_NONE: break;
            case R_X86_64_64: {
                uint64_t v = symbol_address(sym) + uint64_t(r.addend);
                std::memcpy(image.data() + field, &v, 8);
                break;
            }
            case R_X86_64_PC64: {
                uint64_t v = symbol_address(sym) + uint64_t(r.addend) - P;
                std::memcpy(image.data() + field, &v, 8);
                break;
            }
            case R_X86_64_PC32:
            case R_X86_64_PLT32: put32(int64_t(symbol_address(sym) + uint64_t(r.addend) - P), true); break;
            case R_X86_64_GOTPCREL:
            case R_X86_64_GOTPCRELX:
            case R_X86_64_REX_GOTPCRELX: put32(int64_t(base + got_offset_ + sym.got_slot * 8 + uint64_t(r.addend) - P), true); break;
            case R_X86_64_32: put32(int64_t(symbol_address(sym) + uint64_t(r.addend)), false); break;
            case R_X86_64_32S: put32(int64_t(symbol_address(sym) + uint64_t(r.addend)), true); break;
            default: fail(fmt::format("unsupported relocation type {}", r.type));
        }
    }
}

}  // namespace baregpu::hostcode
