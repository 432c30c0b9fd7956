#include "drivers/am/code_object.hpp"

#include "base/checked.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <fmt/format.h>

namespace baregpu::am {

namespace {

// --- ELF constants: llvm/BinaryFormat/ELF.h (LLVM 19) ---
constexpr std::array<uint8_t, 4> kElfMagic{0x7f, 'E', 'L', 'F'};
constexpr size_t kEiClass = 4, kEiData = 5, kEiOsAbi = 7, kEiAbiVersion = 8;
constexpr uint8_t kElfClass64 = 2;           // ELFCLASS64
constexpr uint8_t kElfData2Lsb = 1;          // ELFDATA2LSB
constexpr uint8_t kElfOsAbiAmdgpuHsa = 64;   // ELFOSABI_AMDGPU_HSA
// ELFABIVERSION_AMDGPU_HSA_V4 = 2, _V5 = 3, _V6 = 4: the code object versions whose metadata is
// the msgpack note read here (V2/V3 are no longer emitted by LLVM 19).
constexpr uint8_t kAbiVersionV4 = 2, kAbiVersionV6 = 4;
constexpr uint16_t kEtRel = 1, kEtDyn = 3;   // ET_REL, ET_DYN
constexpr uint16_t kEmAmdgpu = 224;          // EM_AMDGPU
constexpr uint32_t kEfAmdgpuMach = 0x0ff;    // EF_AMDGPU_MACH (processor mask of e_flags)
constexpr uint32_t kPtLoad = 1, kPtNote = 4; // PT_LOAD, PT_NOTE
constexpr uint32_t kPfX = 1;                 // PF_X
constexpr uint32_t kShtSymtab = 2, kShtRela = 4, kShtNote = 7, kShtRel = 9, kShtDynsym = 11;
constexpr uint64_t kShfAlloc = 0x2;          // SHF_ALLOC
constexpr uint32_t kNtAmdgpuMetadata = 32;   // NT_AMDGPU_METADATA, note name "AMDGPU"
constexpr size_t kEhdrSize = 64, kPhdrSize = 56, kShdrSize = 64, kSymSize = 24;  // Elf64_Ehdr, _Phdr, _Shdr, _Sym

// --- Kernel descriptor: llvm/Support/AMDHSAKernelDescriptor.h (AMDGPUUsage "Kernel Descriptor") ---
// AMDGPUUsage: "CP microcode requires the Kernel descriptor to be allocated on 64-byte alignment".
constexpr uint64_t kKdSize = 64, kKdAlign = 64;
constexpr size_t kKdGroupSegmentFixedSize = 0, kKdPrivateSegmentFixedSize = 4, kKdKernargSize = 8,
                 kKdKernelCodeEntryByteOffset = 16, kKdComputePgmRsrc3 = 44, kKdComputePgmRsrc1 = 48,
                 kKdComputePgmRsrc2 = 52, kKdKernelCodeProperties = 56, kKdKernargPreload = 58;
// KERNEL_CODE_PROPERTY_* bits.
constexpr uint16_t kEnableSgprPrivateSegmentBuffer = 1u << 0, kEnableSgprDispatchPtr = 1u << 1,
                   kEnableSgprQueuePtr = 1u << 2, kEnableSgprKernargSegmentPtr = 1u << 3,
                   kEnableSgprDispatchId = 1u << 4, kEnableSgprFlatScratchInit = 1u << 5,
                   kEnableSgprPrivateSegmentSize = 1u << 6, kEnableWavefrontSize32 = 1u << 10;
// COMPUTE_PGM_RSRC2 fields: ENABLE_PRIVATE_SEGMENT bit 0, USER_SGPR_COUNT bits 5:1.
constexpr uint32_t kRsrc2EnablePrivateSegment = 1u << 0, kRsrc2UserSgprCountShift = 1, kRsrc2UserSgprCountMask = 0x1f;
// AMDGPUUsage, KERNEL_CODE_ENTRY_BYTE_OFFSET: the entry point instruction "must be 256 byte
// aligned" (the CP programs COMPUTE_PGM_LO with the address >> 8).
constexpr uint64_t kCodeEntryAlign = 256;
// AMDGPUUsage: the largest flat workgroup size the hardware dispatches.
constexpr uint64_t kMaxFlatWorkgroupSize = 1024;

// The metadata nests maps in arrays in maps a few levels deep; anything deeper is not metadata,
// and the bound keeps a hostile note from exhausting the stack.
constexpr int kMaxMsgpackDepth = 16;

struct GfxMach {
    std::string_view gfx;
    uint32_t mach;
};
// EF_AMDGPU_MACH_AMDGCN_GFX1100 = 0x041 (RDNA3, Navi31) and EF_AMDGPU_MACH_AMDGCN_GFX1201 = 0x04e
// (RDNA4, Navi48): llvm/BinaryFormat/ELF.h. Only the chips drivers/am brings up.
constexpr std::array<GfxMach, 2> kGfxMachs{{{"gfx1100", 0x041}, {"gfx1201", 0x04e}}};

std::string hex(uint64_t v) { return fmt::format("0x{:x}", v); }

// "<where>: <field>: expected <expected>, found <found>": the shape of every check's error.
CodeObjectError field_error(std::string_view source, std::string_view field, const auto& expected, const auto& found) {
    return CodeObjectError(fmt::format("{}: {}: expected {}, found {}", source, field, expected, found));
}

// Bounds-checked little-endian reads from the file; `what` names the field in the error.
class ElfBytes {
public:
    ElfBytes(std::span<const std::byte> bytes, std::string_view source) : bytes_(bytes), source_(source) {}

    uint64_t size() const { return bytes_.size(); }

    template <typename T>
    T read(uint64_t offset, const char* what) const {
        need(offset, sizeof(T), what);
        T v;
        std::memcpy(&v, bytes_.data() + offset, sizeof(T));  // the host is little-endian, as the file is
        return v;
    }
    void need(uint64_t offset, uint64_t length, const char* what) const {
        if (!range_within(offset, length, bytes_.size())) {
            throw CodeObjectError(fmt::format("{}: {} ({} bytes at offset {}) lies outside the file of {} bytes; the "
                                              "file is truncated or corrupt",
                                              source_, what, length, offset, bytes_.size()));
        }
    }
    std::span<const std::byte> slice(uint64_t offset, uint64_t length, const char* what) const {
        need(offset, length, what);
        return bytes_.subspan(offset, length);
    }

private:
    std::span<const std::byte> bytes_;
    std::string_view source_;
};

static_assert(std::endian::native == std::endian::little, "the ELF reader assumes a little-endian host");

// --- A small bounded msgpack reader (https://github.com/msgpack/msgpack/blob/master/spec.md) ---

struct MsgValue {
    enum class Kind { nil, boolean, uint, sint, floating, str, bin, ext, array, map };
    Kind kind = Kind::nil;
    uint64_t u = 0;  // uint, boolean
    int64_t i = 0;   // sint
    std::string s;   // str
    std::vector<MsgValue> items;  // array elements; map keys and values alternating
};

const char* kind_name(MsgValue::Kind k) {
    switch (k) {
    case MsgValue::Kind::nil: return "nil";
    case MsgValue::Kind::boolean: return "a boolean";
    case MsgValue::Kind::uint: return "an unsigned integer";
    case MsgValue::Kind::sint: return "a negative integer";
    case MsgValue::Kind::floating: return "a float";
    case MsgValue::Kind::str: return "a string";
    case MsgValue::Kind::bin: return "binary data";
    case MsgValue::Kind::ext: return "an extension value";
    case MsgValue::Kind::array: return "an array";
    case MsgValue::Kind::map: return "a map";
    }
    return "?";
}

class MsgpackReader {
public:
    MsgpackReader(std::span<const std::byte> data, std::string_view source) : data_(data), source_(source) {}

    MsgValue read_document() {
        MsgValue v = read(0);
        if (pos_ != data_.size()) {
            // descsz is the document's exact length when LLVM writes it; zero bytes after the
            // document (one rewritten in place, shorter) carry nothing, anything else is corrupt.
            for (size_t p = pos_; p < data_.size(); ++p)
                if (data_[p] != std::byte{0}) fail(p, "bytes follow the metadata document");
        }
        return v;
    }

private:
    [[noreturn]] void fail(uint64_t at, const std::string& what) const {
        throw CodeObjectError(fmt::format("{}: metadata note: msgpack at byte {} of {}: {}", source_, at, data_.size(), what));
    }
    uint64_t remaining() const { return data_.size() - pos_; }
    uint64_t big_endian(unsigned bytes) {
        if (remaining() < bytes) fail(pos_, fmt::format("truncated: {} more bytes needed, {} left", bytes, remaining()));
        uint64_t v = 0;
        for (unsigned k = 0; k < bytes; ++k) v = (v << 8) | std::to_integer<uint64_t>(data_[pos_ + k]);
        pos_ += bytes;
        return v;
    }
    void skip(uint64_t bytes) {
        if (remaining() < bytes) fail(pos_, fmt::format("truncated: {} more bytes needed, {} left", bytes, remaining()));
        pos_ += bytes;
    }
    std::string read_str(uint64_t length) {
        if (remaining() < length) fail(pos_, fmt::format("truncated string: {} bytes needed, {} left", length, remaining()));
        std::string s(reinterpret_cast<const char*>(data_.data() + pos_), length);
        pos_ += length;
        return s;
    }
    // Every element takes at least one byte, so a count above the bytes left is corrupt; this
    // also bounds the work and memory a count from the file can ask for.
    void read_items(MsgValue& v, uint64_t count, int depth, uint64_t at) {
        if (count > remaining()) fail(at, fmt::format("{} elements announced but only {} bytes left", count, remaining()));
        v.items.reserve(count);
        for (uint64_t k = 0; k < count; ++k) v.items.push_back(read(depth + 1));
    }
    MsgValue read(int depth) {
        if (depth > kMaxMsgpackDepth) fail(pos_, fmt::format("nested deeper than {} levels", kMaxMsgpackDepth));
        const uint64_t at = pos_;
        const auto tag = static_cast<uint8_t>(big_endian(1));
        MsgValue v;
        using K = MsgValue::Kind;
        if (tag <= 0x7f) { v.kind = K::uint; v.u = tag; return v; }                          // positive fixint
        if (tag >= 0xe0) { v.kind = K::sint; v.i = int64_t(int8_t(tag)); return v; }          // negative fixint
        if ((tag & 0xf0) == 0x80) { v.kind = K::map; read_items(v, 2ull * (tag & 0x0f), depth, at); return v; }
        if ((tag & 0xf0) == 0x90) { v.kind = K::array; read_items(v, tag & 0x0f, depth, at); return v; }
        if ((tag & 0xe0) == 0xa0) { v.kind = K::str; v.s = read_str(tag & 0x1f); return v; }  // fixstr
        switch (tag) {
        case 0xc0: v.kind = K::nil; return v;
        case 0xc2: case 0xc3: v.kind = K::boolean; v.u = tag == 0xc3; return v;
        case 0xc4: case 0xc5: case 0xc6: v.kind = K::bin; skip(big_endian(1u << (tag - 0xc4))); return v;
        case 0xc7: case 0xc8: case 0xc9: v.kind = K::ext; skip(big_endian(1u << (tag - 0xc7)) + 1); return v;
        case 0xca: v.kind = K::floating; skip(4); return v;
        case 0xcb: v.kind = K::floating; skip(8); return v;
        case 0xcc: case 0xcd: case 0xce: case 0xcf: v.kind = K::uint; v.u = big_endian(1u << (tag - 0xcc)); return v;
        case 0xd0: v.kind = K::sint; v.i = int8_t(big_endian(1)); break;
        case 0xd1: v.kind = K::sint; v.i = int16_t(big_endian(2)); break;
        case 0xd2: v.kind = K::sint; v.i = int32_t(big_endian(4)); break;
        case 0xd3: v.kind = K::sint; v.i = int64_t(big_endian(8)); break;
        case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: v.kind = K::ext; skip(1 + (1u << (tag - 0xd4))); return v;
        case 0xd9: case 0xda: case 0xdb: v.kind = K::str; v.s = read_str(big_endian(1u << (tag - 0xd9))); return v;
        case 0xdc: case 0xdd: v.kind = K::array; read_items(v, big_endian(2u << (tag - 0xdc)), depth, at); return v;
        case 0xde: case 0xdf: {
            v.kind = K::map;
            uint64_t pairs = big_endian(2u << (tag - 0xde));
            if (pairs > remaining()) fail(at, fmt::format("{} map entries announced but only {} bytes left", pairs, remaining()));
            read_items(v, 2 * pairs, depth, at);
            return v;
        }
        default: fail(at, fmt::format("type byte {} is not a msgpack type", hex(tag)));  // 0xc1 (never used)
        }
        // A signed integer that is not negative reads as an unsigned one: producers may use either.
        if (v.i >= 0) { v.kind = K::uint; v.u = uint64_t(v.i); }
        return v;
    }

    std::span<const std::byte> data_;
    std::string_view source_;
    uint64_t pos_ = 0;
};

const MsgValue* lookup(const MsgValue& map, std::string_view key) {
    for (size_t k = 0; k + 1 < map.items.size(); k += 2)
        if (map.items[k].kind == MsgValue::Kind::str && map.items[k].s == key) return &map.items[k + 1];
    return nullptr;
}

// Reads the metadata fields of one context ("amdhsa", "kernel 'name'") with clear errors.
class MetadataFields {
public:
    MetadataFields(const MsgValue& map, std::string context) : map_(map), context_(std::move(context)) {}

    const MsgValue& get(std::string_view key, MsgValue::Kind kind) const {
        const MsgValue* v = lookup(map_, key);
        if (v == nullptr) throw CodeObjectError(fmt::format("{}: {} is missing", context_, key));
        if (v->kind != kind)
            throw CodeObjectError(fmt::format("{}: {}: expected {}, found {}", context_, key, kind_name(kind), kind_name(v->kind)));
        return *v;
    }
    uint64_t get_uint(std::string_view key) const { return get(key, MsgValue::Kind::uint).u; }
    std::string get_str(std::string_view key) const { return get(key, MsgValue::Kind::str).s; }
    std::string get_optional_str(std::string_view key) const {
        return lookup(map_, key) != nullptr ? get_str(key) : std::string();
    }
    const std::string& context() const { return context_; }

private:
    const MsgValue& map_;
    std::string context_;
};

KernelMetadata parse_kernel_metadata(const MsgValue& map, std::string_view source, size_t index) {
    std::string context = fmt::format("{}: metadata: amdhsa.kernels[{}]", source, index);
    if (map.kind != MsgValue::Kind::map)
        throw CodeObjectError(fmt::format("{}: expected a map, found {}", context, kind_name(map.kind)));
    KernelMetadata k;
    k.name = MetadataFields(map, context).get_str(".name");
    MetadataFields f(map, fmt::format("{}: metadata: kernel '{}'", source, k.name));
    k.symbol = f.get_str(".symbol");
    k.kernarg_segment_size = f.get_uint(".kernarg_segment_size");
    k.kernarg_segment_align = f.get_uint(".kernarg_segment_align");
    k.group_segment_fixed_size = f.get_uint(".group_segment_fixed_size");
    k.private_segment_fixed_size = f.get_uint(".private_segment_fixed_size");
    k.wavefront_size = f.get_uint(".wavefront_size");
    k.sgpr_count = f.get_uint(".sgpr_count");
    k.vgpr_count = f.get_uint(".vgpr_count");
    k.max_flat_workgroup_size = f.get_uint(".max_flat_workgroup_size");
    if (const MsgValue* reqd = lookup(map, ".reqd_workgroup_size")) {
        if (reqd->kind != MsgValue::Kind::array || reqd->items.size() != 3)
            throw CodeObjectError(fmt::format("{}: .reqd_workgroup_size: expected an array of 3", f.context()));
        for (size_t i = 0; i < 3; ++i) {
            if (reqd->items[i].kind != MsgValue::Kind::uint || reqd->items[i].u == 0 || reqd->items[i].u > 1024)
                throw CodeObjectError(fmt::format("{}: .reqd_workgroup_size[{}]: expected 1..1024", f.context(), i));
            k.reqd_workgroup_size[i] = reqd->items[i].u;
        }
    }
    if (const MsgValue* args = lookup(map, ".args")) {
        if (args->kind != MsgValue::Kind::array)
            throw CodeObjectError(fmt::format("{}: .args: expected an array, found {}", f.context(), kind_name(args->kind)));
        for (size_t a = 0; a < args->items.size(); ++a) {
            const MsgValue& arg = args->items[a];
            std::string arg_context = fmt::format("{}: .args[{}]", f.context(), a);
            if (arg.kind != MsgValue::Kind::map)
                throw CodeObjectError(fmt::format("{}: expected a map, found {}", arg_context, kind_name(arg.kind)));
            MetadataFields af(arg, arg_context);
            k.args.push_back({af.get_uint(".size"), af.get_uint(".offset"), af.get_str(".value_kind"),
                              af.get_optional_str(".address_space")});
        }
    }
    return k;
}

struct Metadata {
    std::vector<uint64_t> version;
    std::string target;
    std::vector<KernelMetadata> kernels;
};

Metadata parse_metadata(std::span<const std::byte> desc, std::string_view source) {
    MsgValue root = MsgpackReader(desc, source).read_document();
    std::string context = fmt::format("{}: metadata", source);
    if (root.kind != MsgValue::Kind::map)
        throw CodeObjectError(fmt::format("{}: expected a map at the top, found {}", context, kind_name(root.kind)));
    MetadataFields f(root, context);
    Metadata m;
    for (const MsgValue& v : f.get("amdhsa.version", MsgValue::Kind::array).items) {
        if (v.kind != MsgValue::Kind::uint)
            throw CodeObjectError(fmt::format("{}: amdhsa.version: expected unsigned integers, found {}", context, kind_name(v.kind)));
        m.version.push_back(v.u);
    }
    if (m.version.size() != 2)
        throw CodeObjectError(fmt::format("{}: amdhsa.version: expected [major, minor], found {} numbers", context, m.version.size()));
    m.target = f.get_str("amdhsa.target");
    const MsgValue& kernels = f.get("amdhsa.kernels", MsgValue::Kind::array);
    for (size_t k = 0; k < kernels.items.size(); ++k) m.kernels.push_back(parse_kernel_metadata(kernels.items[k], source, k));
    return m;
}

// --- ELF structure ---

struct Section {
    uint32_t type = 0;
    uint64_t flags = 0, offset = 0, size = 0, entsize = 0;
    uint32_t link = 0;
};

struct KdSymbol {
    std::string name;
    uint64_t value = 0, size = 0;
};

std::vector<Section> read_sections(const ElfBytes& f, std::string_view source) {
    const auto shoff = f.read<uint64_t>(40, "e_shoff");
    const auto shentsize = f.read<uint16_t>(58, "e_shentsize");
    const auto shnum = f.read<uint16_t>(60, "e_shnum");
    std::vector<Section> sections;
    if (shnum == 0) return sections;
    if (shentsize != kShdrSize)
        throw CodeObjectError(fmt::format("{}: e_shentsize: expected {}, found {}", source, kShdrSize, shentsize));
    f.need(shoff, uint64_t(shnum) * kShdrSize, "the section header table");
    for (uint64_t s = 0; s < shnum; ++s) {
        uint64_t h = shoff + s * kShdrSize;
        Section sec;
        sec.type = f.read<uint32_t>(h + 4, "sh_type");
        sec.flags = f.read<uint64_t>(h + 8, "sh_flags");
        sec.offset = f.read<uint64_t>(h + 24, "sh_offset");
        sec.size = f.read<uint64_t>(h + 32, "sh_size");
        sec.link = f.read<uint32_t>(h + 40, "sh_link");
        sec.entsize = f.read<uint64_t>(h + 56, "sh_entsize");
        sections.push_back(sec);
    }
    return sections;
}

// The symbols named "*.kd" of the dynamic symbol table (what a loader of a stripped object sees)
// and of the full one.
std::vector<KdSymbol> read_kd_symbols(const ElfBytes& f, const std::vector<Section>& sections, std::string_view source) {
    std::vector<KdSymbol> out;
    for (uint32_t want : {kShtDynsym, kShtSymtab}) {
        for (const Section& sec : sections) {
            if (sec.type != want) continue;
            if (sec.entsize != kSymSize)
                throw field_error(source, "symbol table sh_entsize", kSymSize, sec.entsize);
            if (sec.link >= sections.size())
                throw CodeObjectError(fmt::format("{}: symbol table sh_link: expected a section index below {}, found {}", source,
                                                  sections.size(), sec.link));
            const Section& strtab = sections[sec.link];
            auto syms = f.slice(sec.offset, sec.size, "a symbol table");
            auto strs = f.slice(strtab.offset, strtab.size, "a string table");
            for (uint64_t at = 0; at + kSymSize <= syms.size(); at += kSymSize) {
                uint32_t name_off;
                std::memcpy(&name_off, syms.data() + at, 4);
                if (name_off >= strs.size()) continue;  // no name we could read: not a kernel descriptor
                const char* begin = reinterpret_cast<const char*>(strs.data()) + name_off;
                const void* nul = std::memchr(begin, 0, strs.size() - name_off);
                if (nul == nullptr) continue;
                std::string_view name(begin, size_t(static_cast<const char*>(nul) - begin));
                if (!name.ends_with(".kd")) continue;
                KdSymbol sym;
                sym.name = std::string(name);
                std::memcpy(&sym.value, syms.data() + at + 8, 8);
                std::memcpy(&sym.size, syms.data() + at + 16, 8);
                out.push_back(std::move(sym));
            }
        }
    }
    return out;
}

// Finds the NT_AMDGPU_METADATA note in PT_NOTE segments, else in SHT_NOTE sections.
std::optional<std::span<const std::byte>> find_metadata_note(std::span<const std::byte> region, uint64_t align,
                                                             std::string_view source) {
    uint64_t at = 0;
    while (region.size() - at >= 12) {  // each note advances `at` by at least 12: bounded
        uint32_t namesz, descsz, type;
        std::memcpy(&namesz, region.data() + at, 4);
        std::memcpy(&descsz, region.data() + at + 4, 4);
        std::memcpy(&type, region.data() + at + 8, 4);
        uint64_t name_at = at + 12;
        uint64_t desc_at = *align_up(name_at + namesz, align);  // < 2^34: no overflow
        uint64_t end = *align_up(desc_at + descsz, align);
        if (desc_at + descsz > region.size())
            throw CodeObjectError(fmt::format("{}: note at byte {} of its segment: namesz {} / descsz {} run past its "
                                              "end ({} bytes)",
                                              source, at, namesz, descsz, region.size()));
        std::string_view name(reinterpret_cast<const char*>(region.data() + name_at), namesz);
        if (type == kNtAmdgpuMetadata && name == std::string_view("AMDGPU\0", 7)) return region.subspan(desc_at, descsz);
        at = std::min<uint64_t>(end, region.size());
    }
    return std::nullopt;
}

uint32_t rsrc2_user_sgpr_count(uint32_t rsrc2) { return (rsrc2 >> kRsrc2UserSgprCountShift) & kRsrc2UserSgprCountMask; }

}  // namespace

std::optional<uint32_t> amdgpu_mach_of(std::string_view gfx) {
    for (const GfxMach& g : kGfxMachs)
        if (g.gfx == gfx) return g.mach;
    return std::nullopt;
}

UserSgprLayout user_sgpr_layout(uint16_t props) {
    // AMDGPUUsage "Initial Kernel Execution State": enabled user SGPRs are allocated in this order.
    UserSgprLayout l;
    auto take = [&](uint16_t bit, uint32_t count, std::optional<uint32_t>& slot) {
        if ((props & bit) == 0) return;
        slot = l.count;
        l.count += count;
    };
    take(kEnableSgprPrivateSegmentBuffer, 4, l.private_segment_buffer);
    take(kEnableSgprDispatchPtr, 2, l.dispatch_ptr);
    take(kEnableSgprQueuePtr, 2, l.queue_ptr);
    take(kEnableSgprKernargSegmentPtr, 2, l.kernarg_segment_ptr);
    take(kEnableSgprDispatchId, 2, l.dispatch_id);
    take(kEnableSgprFlatScratchInit, 2, l.flat_scratch_init);
    take(kEnableSgprPrivateSegmentSize, 1, l.private_segment_size);
    return l;
}

const AmdgpuKernel* AmdgpuCodeObject::find(std::string_view name) const {
    for (const AmdgpuKernel& k : kernels)
        if (k.name == name) return &k;
    return nullptr;
}

namespace {

// The segment holding [vaddr, vaddr + length) in its file bytes, or null.
const LoadSegment* segment_with(const std::vector<LoadSegment>& segments, uint64_t vaddr, uint64_t length) {
    for (const LoadSegment& s : segments)
        if (vaddr >= s.vaddr && range_within(vaddr - s.vaddr, length, s.file_size)) return &s;
    return nullptr;
}

KernelDescriptor read_descriptor(std::span<const std::byte> kd) {
    auto get = [&](size_t offset, auto v) {
        std::memcpy(&v, kd.data() + offset, sizeof v);
        return v;
    };
    KernelDescriptor d;
    d.group_segment_fixed_size = get(kKdGroupSegmentFixedSize, uint32_t{});
    d.private_segment_fixed_size = get(kKdPrivateSegmentFixedSize, uint32_t{});
    d.kernarg_size = get(kKdKernargSize, uint32_t{});
    d.kernel_code_entry_byte_offset = get(kKdKernelCodeEntryByteOffset, int64_t{});
    d.compute_pgm_rsrc3 = get(kKdComputePgmRsrc3, uint32_t{});
    d.compute_pgm_rsrc1 = get(kKdComputePgmRsrc1, uint32_t{});
    d.compute_pgm_rsrc2 = get(kKdComputePgmRsrc2, uint32_t{});
    d.kernel_code_properties = get(kKdKernelCodeProperties, uint16_t{});
    d.kernarg_preload = get(kKdKernargPreload, uint16_t{});
    return d;
}

AmdgpuKernel check_kernel(const KernelMetadata& md, const std::vector<KdSymbol>& kd_symbols, const AmdgpuCodeObject& co,
                          std::string_view source) {
    const std::string ctx = fmt::format("{}: kernel '{}'", source, md.name);
    if (md.symbol != md.name + ".kd") throw field_error(ctx, "metadata .symbol", md.name + ".kd", md.symbol);
    auto sym = std::find_if(kd_symbols.begin(), kd_symbols.end(), [&](const KdSymbol& s) { return s.name == md.symbol; });
    if (sym == kd_symbols.end())
        throw CodeObjectError(fmt::format("{}: the kernel descriptor symbol '{}' is not in the symbol tables", ctx, md.symbol));
    if (sym->size != 0 && sym->size != kKdSize) throw field_error(ctx, md.symbol + " st_size", kKdSize, sym->size);
    if (sym->value % kKdAlign != 0) throw field_error(ctx, md.symbol + " address", "a multiple of 64", hex(sym->value));
    if (segment_with(co.segments, sym->value, kKdSize) == nullptr)
        throw field_error(ctx, md.symbol, "64 bytes inside a loaded segment's file bytes", hex(sym->value));

    AmdgpuKernel k;
    k.name = md.name;
    k.metadata = md;
    k.descriptor_address = sym->value;
    const KernelDescriptor& d = k.descriptor = read_descriptor(std::span(co.image).subspan(sym->value, kKdSize));

    // The code entry: signed offset from the descriptor, into executable file bytes.
    const int64_t off = d.kernel_code_entry_byte_offset;
    std::optional<uint64_t> entry;
    if (off >= 0) entry = checked_add<uint64_t>(sym->value, uint64_t(off));
    else if (uint64_t back = uint64_t(-(off + 1)) + 1; back <= sym->value) entry = sym->value - back;
    const LoadSegment* code = entry ? segment_with(co.segments, *entry, 4) : nullptr;
    if (code == nullptr || (code->flags & kPfX) == 0)
        throw CodeObjectError(fmt::format("{}: kernel_code_entry_byte_offset {} from the descriptor at {} does not point "
                                          "into an executable segment",
                                          ctx, off, hex(sym->value)));
    if (*entry % kCodeEntryAlign != 0) throw field_error(ctx, "code entry address", "a multiple of 256", hex(*entry));
    k.entry_address = *entry;

    k.user_sgprs = user_sgpr_layout(d.kernel_code_properties);
    const uint32_t rsrc2_sgprs = rsrc2_user_sgpr_count(d.compute_pgm_rsrc2);
    if (k.user_sgprs.count > rsrc2_sgprs)
        throw field_error(ctx, "COMPUTE_PGM_RSRC2.USER_SGPR_COUNT",
                          fmt::format("at least {} (the SGPRs kernel_code_properties enables)", k.user_sgprs.count),
                       rsrc2_sgprs);
    k.wave_size = (d.kernel_code_properties & kEnableWavefrontSize32) != 0 ? 32 : 64;

    // Descriptor against metadata, then against the device.
    if (d.kernarg_size != md.kernarg_segment_size)
        throw field_error(ctx, "kernarg size (descriptor kernarg_size vs metadata .kernarg_segment_size)", md.kernarg_segment_size,
                          d.kernarg_size);
    if (!is_power_of_two(md.kernarg_segment_align))
        throw field_error(ctx, ".kernarg_segment_align", "a power of two", md.kernarg_segment_align);
    if (d.kernarg_size > 0 && !k.user_sgprs.kernarg_segment_ptr)
        throw CodeObjectError(fmt::format("{}: kernarg size {} but kernel_code_properties {} does not enable the kernarg "
                                          "segment pointer user SGPR",
                                          ctx, d.kernarg_size, hex(d.kernel_code_properties)));
    for (size_t a = 0; a < md.args.size(); ++a) {
        const KernelArgMetadata& arg = md.args[a];
        if (!range_within(arg.offset, arg.size, md.kernarg_segment_size))
            throw field_error(ctx, fmt::format(".args[{}] (offset {}, size {})", a, arg.offset, arg.size),
                           fmt::format("inside the kernarg segment of {} bytes", md.kernarg_segment_size), "outside");
    }
    if (d.group_segment_fixed_size != md.group_segment_fixed_size)
        throw field_error(ctx, "LDS size (descriptor group_segment_fixed_size vs metadata .group_segment_fixed_size)",
                       md.group_segment_fixed_size, d.group_segment_fixed_size);
    if (d.group_segment_fixed_size > kMaxLdsBytes)
        throw field_error(ctx, "LDS size (group_segment_fixed_size)",
                          fmt::format("at most {} bytes (64 KiB per workgroup on RDNA3/4)", kMaxLdsBytes),
                       d.group_segment_fixed_size);
    if (d.private_segment_fixed_size != md.private_segment_fixed_size)
        throw field_error(ctx, "scratch size (descriptor private_segment_fixed_size vs metadata .private_segment_fixed_size)",
                       md.private_segment_fixed_size, d.private_segment_fixed_size);
    if (d.private_segment_fixed_size > 0 && (d.compute_pgm_rsrc2 & kRsrc2EnablePrivateSegment) == 0)
        throw CodeObjectError(fmt::format("{}: scratch size {} but COMPUTE_PGM_RSRC2.ENABLE_PRIVATE_SEGMENT is clear", ctx,
                                          d.private_segment_fixed_size));
    if (md.wavefront_size != 32 && md.wavefront_size != 64)
        throw field_error(ctx, "metadata .wavefront_size", "32 or 64", md.wavefront_size);
    if (md.wavefront_size != k.wave_size)
        throw field_error(ctx, "wave size (metadata .wavefront_size vs descriptor ENABLE_WAVEFRONT_SIZE32)", md.wavefront_size,
                          k.wave_size);
    if (md.max_flat_workgroup_size == 0 || md.max_flat_workgroup_size > kMaxFlatWorkgroupSize)
        throw field_error(ctx, "metadata .max_flat_workgroup_size", "1..1024", md.max_flat_workgroup_size);
    return k;
}

}  // namespace

namespace {

// ELF64, little-endian, EM_AMDGPU, the HSA OS ABI, code object v4..v6, a shared object, built for
// this chip. Returns e_flags.
uint32_t check_elf_header(const ElfBytes& f, std::span<const std::byte> elf, std::string_view expected_gfx,
                          std::string_view source) {
    f.need(0, kEhdrSize, "the ELF header");
    for (size_t k = 0; k < kElfMagic.size(); ++k)
        if (std::to_integer<uint8_t>(elf[k]) != kElfMagic[k])
            throw CodeObjectError(fmt::format("{}: not an ELF file (no \\x7fELF magic)", source));
    const auto ident = [&](size_t i) { return std::to_integer<unsigned>(elf[i]); };
    if (ident(kEiClass) != kElfClass64) throw field_error(source, "EI_CLASS", "2 (ELFCLASS64)", ident(kEiClass));
    if (ident(kEiData) != kElfData2Lsb) throw field_error(source, "EI_DATA", "1 (ELFDATA2LSB, little-endian)", ident(kEiData));
    const auto machine = f.read<uint16_t>(18, "e_machine");
    if (machine != kEmAmdgpu) throw field_error(source, "e_machine", "224 (EM_AMDGPU)", machine);
    if (ident(kEiOsAbi) != kElfOsAbiAmdgpuHsa) throw field_error(source, "EI_OSABI", "64 (ELFOSABI_AMDGPU_HSA)", ident(kEiOsAbi));
    if (ident(kEiAbiVersion) < kAbiVersionV4 || ident(kEiAbiVersion) > kAbiVersionV6)
        throw field_error(source, "EI_ABIVERSION", "2..4 (code object v4..v6)", ident(kEiAbiVersion));
    const auto type = f.read<uint16_t>(16, "e_type");
    if (type != kEtDyn) {
        throw field_error(source, "e_type", "3 (ET_DYN, a linked shared object)",
                       type == kEtRel ? std::string("1 (ET_REL, an unlinked relocatable object: link it with ld.lld -shared)")
                                      : std::to_string(type));
    }
    const std::optional<uint32_t> mach = amdgpu_mach_of(expected_gfx);
    if (!mach) {
        throw CodeObjectError(
            fmt::format("{}: device target '{}' is not one drivers/am knows (gfx1100, gfx1201)", source, expected_gfx));
    }
    const auto e_flags = f.read<uint32_t>(48, "e_flags");
    if ((e_flags & kEfAmdgpuMach) != *mach) {
        std::string found = hex(e_flags & kEfAmdgpuMach);
        for (const GfxMach& g : kGfxMachs)
            if (g.mach == (e_flags & kEfAmdgpuMach)) found += fmt::format(" ({})", g.gfx);
        throw field_error(source, fmt::format("e_flags EF_AMDGPU_MACH (the device is {})", expected_gfx),
                       fmt::format("{} ({})", hex(*mach), expected_gfx), found);
    }
    return e_flags;
}

struct ProgramHeaders {
    std::vector<LoadSegment> segments;
    std::optional<std::span<const std::byte>> note;  // the metadata, from a PT_NOTE segment
};

// PT_LOAD segments (inside the file, ascending and disjoint, within the image limit) and the
// metadata note of the PT_NOTE segments.
ProgramHeaders read_program_headers(const ElfBytes& f, std::string_view source) {
    const auto phoff = f.read<uint64_t>(32, "e_phoff");
    const auto phentsize = f.read<uint16_t>(54, "e_phentsize");
    const auto phnum = f.read<uint16_t>(56, "e_phnum");
    if (phnum == 0) throw CodeObjectError(fmt::format("{}: no program headers: nothing to load", source));
    if (phentsize != kPhdrSize) throw field_error(source, "e_phentsize", kPhdrSize, phentsize);
    f.need(phoff, uint64_t(phnum) * kPhdrSize, "the program header table");
    ProgramHeaders out;
    for (uint64_t p = 0; p < phnum; ++p) {
        const uint64_t h = phoff + p * kPhdrSize;
        const auto p_type = f.read<uint32_t>(h, "p_type");
        LoadSegment s;
        s.flags = f.read<uint32_t>(h + 4, "p_flags");
        s.offset = f.read<uint64_t>(h + 8, "p_offset");
        s.vaddr = f.read<uint64_t>(h + 16, "p_vaddr");
        s.file_size = f.read<uint64_t>(h + 32, "p_filesz");
        s.mem_size = f.read<uint64_t>(h + 40, "p_memsz");
        const auto p_align = f.read<uint64_t>(h + 48, "p_align");
        if (p_type == kPtNote && !out.note) {
            // Notes are 4-byte aligned unless the segment says 8 (gABI, "Note Section").
            out.note = find_metadata_note(f.slice(s.offset, s.file_size, "a PT_NOTE segment"), p_align == 8 ? 8 : 4, source);
        }
        if (p_type != kPtLoad) continue;
        const std::string what = fmt::format("PT_LOAD at {}", hex(s.vaddr));
        f.need(s.offset, s.file_size, "a PT_LOAD segment's file bytes");
        if (s.file_size > s.mem_size)
            throw field_error(source, what + " p_filesz", fmt::format("at most p_memsz {}", s.mem_size), s.file_size);
        if (!range_within(s.vaddr, s.mem_size, kMaxImageBytes)) {
            throw field_error(source, what, fmt::format("to end within the image limit of {} bytes", kMaxImageBytes),
                           fmt::format("p_memsz {}", s.mem_size));
        }
        if (!out.segments.empty() && s.vaddr < out.segments.back().vaddr + out.segments.back().mem_size) {
            throw CodeObjectError(
                fmt::format("{}: {} overlaps or precedes the previous one (ELF requires ascending, disjoint segments)", source, what));
        }
        out.segments.push_back(s);
    }
    if (out.segments.empty()) throw CodeObjectError(fmt::format("{}: no PT_LOAD segment: nothing to load", source));
    return out;
}

// The segments at their vaddr, zero filled (bounded by kMaxImageBytes).
std::vector<std::byte> load_image(const std::vector<LoadSegment>& segments, std::span<const std::byte> elf) {
    std::vector<std::byte> image(segments.back().vaddr + segments.back().mem_size, std::byte{0});
    for (const LoadSegment& s : segments)
        if (s.file_size > 0) std::memcpy(image.data() + s.vaddr, elf.data() + s.offset, s.file_size);
    return image;
}

// The image is copied as it is: an object that needs dynamic relocations applied (a kernel that
// takes the address of a global) would run with unrelocated addresses, so it is refused here.
void refuse_relocations(const std::vector<Section>& sections, std::string_view source) {
    for (const Section& sec : sections) {
        if ((sec.type == kShtRela || sec.type == kShtRel) && (sec.flags & kShfAlloc) != 0 && sec.size > 0) {
            throw CodeObjectError(fmt::format("{}: has dynamic relocations ({} bytes of {}); loading an object that needs "
                                              "relocating is not supported",
                                              source, sec.size, sec.type == kShtRela ? "SHT_RELA" : "SHT_REL"));
        }
    }
}

}  // namespace

AmdgpuCodeObject parse_code_object(std::span<const std::byte> elf, std::string_view expected_gfx, std::string_view kernel,
                                   std::string_view source) {
    const ElfBytes f(elf, source);
    AmdgpuCodeObject co;
    co.e_flags = check_elf_header(f, elf, expected_gfx, source);
    ProgramHeaders ph = read_program_headers(f, source);
    co.segments = std::move(ph.segments);
    co.image = load_image(co.segments, elf);

    const std::vector<Section> sections = read_sections(f, source);
    refuse_relocations(sections, source);
    std::optional<std::span<const std::byte>> note = ph.note;
    for (const Section& sec : sections) {
        if (note) break;
        if (sec.type == kShtNote) note = find_metadata_note(f.slice(sec.offset, sec.size, "a SHT_NOTE section"), 4, source);
    }
    if (!note) {
        throw CodeObjectError(
            fmt::format("{}: no \"AMDGPU\" NT_AMDGPU_METADATA (32) note: not an HSA code object of v3 or later", source));
    }
    Metadata md = parse_metadata(*note, source);
    co.target = md.target;
    co.hsa_version = md.version;
    // amdhsa.target: "amdgcn-amd-amdhsa--gfx1100", optionally followed by ":feature+/-" settings.
    const std::string target_prefix = "amdgcn-amd-amdhsa--" + std::string(expected_gfx);
    if (!(md.target == target_prefix || md.target.starts_with(target_prefix + ":")))
        throw field_error(source, "metadata amdhsa.target", target_prefix, "'" + md.target + "'");

    const std::vector<KdSymbol> kd_symbols = read_kd_symbols(f, sections, source);
    for (const KernelMetadata& k : md.kernels) co.kernels.push_back(check_kernel(k, kd_symbols, co, source));
    const AmdgpuKernel* wanted = co.find(kernel);
    if (wanted == nullptr) {
        std::string names;
        for (const AmdgpuKernel& k : co.kernels) names += (names.empty() ? "" : ", ") + k.name;
        throw CodeObjectError(fmt::format("{}: kernel '{}' is not in the metadata (it has: {})", source, kernel,
                                          names.empty() ? std::string("no kernels") : names));
    }
    co.kernel = *wanted;
    return co;
}

}  // namespace baregpu::am
