// drivers/am/code_object against real code objects from the compiler (linked by ld.lld) for
// gfx1100 and gfx1201. Every parsed field is compared with what LLVM's own tools say about the same
// file (llvm-readelf-19 --notes / -s, llvm-objdump-19 -d and its kernel-descriptor disassembly) or
// with what follows from the kernel (its name, its buffers); then each malformation the loader must
// refuse is made from a real object and its message checked; then a fuzz loop. Exits 77 (meson:
// skipped) with a message when the LLVM tools or ld.lld are not installed.
#include "compiler/amdgpu_codegen.hpp"
#include "compiler/scheduler.hpp"
#include "drivers/am/code_object.hpp"
#include "tests/skip.hpp"

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace code_object_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::compiler;
using baregpu::am::AmdgpuCodeObject;
using baregpu::am::CodeObjectError;
using baregpu::am::parse_code_object;

namespace {

using Bytes = std::vector<std::byte>;

const char* const kObjdump = "llvm-objdump-19";
const char* const kReadelf = "llvm-readelf-19";

bool have_tool(const std::string& tool) { return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0; }

std::pair<std::string, int> run(const std::string& command) {
    std::string out;
    FILE* p = popen((command + " 2>&1").c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    int status = pclose(p);
    return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

NodeRef input(Shape shape) { return Node::make_buffer({}, DType::float32, std::move(shape)); }

// a + b * c: elementwise over four buffers (output and three inputs).
Kernel elementwise_kernel() {
    NodeRef a = input({1000}), b = input({1000}), c = input({1000});
    auto items = schedule(Node::make_alu(Op::add, DType::float32, {a, Node::make_alu(Op::mul, DType::float32, {b, c})}));
    REQUIRE(items.size() == 1);
    return *items[0].kernel;
}

// Row sums: a reduction (the compiler keeps its accumulator in registers, not LDS).
Kernel reduction_kernel() {
    auto items = schedule(Node::make_reduce(Op::reduce_sum, input({64, 300}), {1}));
    REQUIRE(items.size() == 1);
    return *items[0].kernel;
}

struct TempFile {
    std::filesystem::path path;
    explicit TempFile(const Bytes& bytes, const std::string& stem) {
        path = std::filesystem::temp_directory_path() / (stem + "-" + std::to_string(getpid()) + ".so");
        std::ofstream f(path, std::ios::binary);
        f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    }
    ~TempFile() { std::filesystem::remove(path); }
};

// "      .kernarg_segment_size: 32" -> 32, from llvm-readelf's YAML rendering of the metadata.
uint64_t yaml_uint(const std::string& text, const std::string& key) {
    std::smatch m;
    REQUIRE(std::regex_search(text, m, std::regex("\\n\\s*-?\\s*" + std::regex_replace(key, std::regex("\\."), "\\.") + ":\\s+(\\d+)")));
    return std::stoull(m[1]);
}

// The first "key: word" of llvm-readelf's YAML rendering.
std::string yaml_word(const std::string& text, const std::string& key) {
    std::smatch m;
    REQUIRE(std::regex_search(text, m, std::regex(std::regex_replace(key, std::regex("\\."), "\\.") + ":\\s+(\\w+)")));
    return m[1];
}

// Address -> byte from llvm-readelf -x ("0x00000880 00000000 10010000 ... ascii").
std::map<uint64_t, uint8_t> hex_dump(const std::string& text) {
    std::map<uint64_t, uint8_t> bytes;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream words(line);
        std::string word;
        if (!(words >> word) || !word.starts_with("0x")) continue;
        uint64_t addr = std::stoull(word, nullptr, 16);
        for (int group = 0; group < 4 && (words >> word); ++group) {
            if (word.size() % 2 != 0 || word.size() > 8 || word.find_first_not_of("0123456789abcdef") != std::string::npos) break;
            for (size_t c = 0; c < word.size(); c += 2) bytes[addr++] = uint8_t(std::stoul(word.substr(c, 2), nullptr, 16));
        }
    }
    return bytes;
}

// "\t.amdhsa_kernarg_size 32" from llvm-objdump's kernel descriptor disassembly.
uint64_t kd_directive(const std::string& text, const std::string& directive) {
    std::smatch m;
    INFO(directive);
    REQUIRE(std::regex_search(text, m, std::regex("\\." + directive + " (\\d+)")));
    return std::stoull(m[1]);
}

// The value of symbol `name` in llvm-readelf -s output.
uint64_t symbol_value(const std::string& symbols, const std::string& name) {
    std::smatch m;
    INFO(name);
    REQUIRE(std::regex_search(symbols, m, std::regex("([0-9a-f]{16})\\s+\\d+\\s+\\w+\\s+\\w+\\s+\\w+\\s+\\d+\\s+" + name + "\\n")));
    return std::stoull(m[1], nullptr, 16);
}

int kd_disassembled = 0;  // kernels whose descriptor llvm-objdump could decode

void check_real_object(const Kernel& kernel, const std::string& gfx) {
    INFO("kernel " << kernel.name() << " for " << gfx);
    const Bytes object = emit_amdgpu_code_object(kernel, gfx);
    const AmdgpuCodeObject co = parse_code_object(object, gfx, kernel.name(), kernel.name());
    TempFile file(object, kernel.name() + "-" + gfx);
    const std::string path = file.path.string();

    auto [header, header_rc] = run(std::string(kReadelf) + " -h " + path);
    REQUIRE(header_rc == 0);
    CHECK(header.find("DYN (Shared object file)") != std::string::npos);
    CHECK(header.find(", " + gfx) != std::string::npos);

    // Metadata, as llvm-readelf decodes it.
    auto [notes, notes_rc] = run(std::string(kReadelf) + " --notes " + path);
    INFO(notes);
    REQUIRE(notes_rc == 0);
    const am::AmdgpuKernel& k = co.kernel;
    CHECK(co.target == "amdgcn-amd-amdhsa--" + gfx);
    CHECK(notes.find("amdhsa.target:   amdgcn-amd-amdhsa--" + gfx) != std::string::npos);
    CHECK(co.hsa_version == std::vector<uint64_t>{1, 2});  // code object v5
    CHECK(notes.find("amdhsa.version:\n  - 1\n  - 2") != std::string::npos);
    CHECK(co.kernels.size() == 1);
    CHECK(k.name == kernel.name());
    CHECK(k.metadata.name == kernel.name());
    CHECK(k.metadata.symbol == kernel.name() + ".kd");
    CHECK(k.metadata.kernarg_segment_size == yaml_uint(notes, ".kernarg_segment_size"));
    CHECK(k.metadata.kernarg_segment_align == yaml_uint(notes, ".kernarg_segment_align"));
    CHECK(k.metadata.group_segment_fixed_size == yaml_uint(notes, ".group_segment_fixed_size"));
    CHECK(k.metadata.private_segment_fixed_size == yaml_uint(notes, ".private_segment_fixed_size"));
    CHECK(k.metadata.wavefront_size == yaml_uint(notes, ".wavefront_size"));
    CHECK(k.metadata.sgpr_count == yaml_uint(notes, ".sgpr_count"));
    CHECK(k.metadata.vgpr_count == yaml_uint(notes, ".vgpr_count"));
    CHECK(k.metadata.max_flat_workgroup_size == 256);  // the compiler's workgroup (amdgpu_codegen.hpp)
    // The HCQ argument layout: one 8-byte global pointer per buffer, output first, in order.
    const size_t buffers = 1 + kernel.inputs.size();
    REQUIRE(k.metadata.args.size() >= buffers);
    for (size_t b = 0; b < buffers; ++b) {
        CHECK(k.metadata.args[b].value_kind == "global_buffer");
        CHECK(k.metadata.args[b].address_space == yaml_word(notes, ".address_space"));
        CHECK(k.metadata.args[b].size == 8);
        CHECK(k.metadata.args[b].offset == 8 * b);
    }
    // No hidden arguments: the kernels read none, so LLVM's optimizer (AMDGPUAttributor) leaves the
    // implicit argument block out and the kernarg segment is exactly the buffers.
    CHECK(k.metadata.kernarg_segment_size == 8 * buffers);
    CHECK(k.metadata.args.size() == buffers);

    // The kernel descriptor's bytes, as llvm-readelf dumps them, decoded here with the offsets
    // of AMDHSAKernelDescriptor.h.
    auto [hex, hex_rc] = run(std::string(kReadelf) + " -x .rodata " + path);
    INFO(hex);
    REQUIRE(hex_rc == 0);
    const std::map<uint64_t, uint8_t> rodata = hex_dump(hex);
    auto kd_field = [&](uint64_t offset, int bytes) {
        uint64_t v = 0;
        for (int b = bytes - 1; b >= 0; --b) {
            auto it = rodata.find(k.descriptor_address + offset + uint64_t(b));
            REQUIRE(it != rodata.end());
            v = (v << 8) | it->second;
        }
        return v;
    };
    CHECK(k.descriptor.group_segment_fixed_size == kd_field(0, 4));
    CHECK(k.descriptor.private_segment_fixed_size == kd_field(4, 4));
    CHECK(k.descriptor.kernarg_size == kd_field(8, 4));
    CHECK(uint64_t(k.descriptor.kernel_code_entry_byte_offset) == kd_field(16, 8));
    CHECK(k.descriptor.compute_pgm_rsrc1 == kd_field(48, 4));
    CHECK(k.descriptor.compute_pgm_rsrc2 == kd_field(52, 4));
    CHECK(k.descriptor.kernel_code_properties == kd_field(56, 2));
    CHECK(k.descriptor.kernarg_size == k.metadata.kernarg_segment_size);
    CHECK(k.wave_size == 32);  // RDNA3/4 compute defaults to wave32
    // The kernarg pointer's user SGPR: after the SGPRs enabled before it (AMDGPUUsage's order:
    // private segment buffer 4, dispatch ptr 2, queue ptr 2). gfx11+ have no private segment
    // buffer (architected flat scratch).
    const uint64_t props = kd_field(56, 2);
    REQUIRE((props & (1u << 3)) != 0);
    CHECK(!k.user_sgprs.private_segment_buffer.has_value());
    REQUIRE(k.user_sgprs.kernarg_segment_ptr.has_value());
    CHECK(*k.user_sgprs.kernarg_segment_ptr == 2 * ((props >> 1) & 1) + 2 * ((props >> 2) & 1));

    // Where llvm-objdump can disassemble the descriptor, its directives agree too. (LLVM 19 sets
    // COMPUTE_PGM_RSRC1.GRANULATED_WAVEFRONT_SGPR_COUNT on some gfx10+ kernels, which the
    // disassembler refuses as reserved bits; the hardware ignores them.)
    auto [kd, kd_rc] = run(std::string(kObjdump) + " -D --mcpu=" + gfx + " -j .rodata " + path);
    REQUIRE(kd_rc == 0);
    if (kd.find(".amdhsa_kernel " + kernel.name()) != std::string::npos) {
        INFO(kd);
        ++kd_disassembled;
        CHECK(k.descriptor.kernarg_size == kd_directive(kd, "amdhsa_kernarg_size"));
        CHECK(k.descriptor.group_segment_fixed_size == kd_directive(kd, "amdhsa_group_segment_fixed_size"));
        CHECK(k.descriptor.private_segment_fixed_size == kd_directive(kd, "amdhsa_private_segment_fixed_size"));
        CHECK(k.wave_size == (kd_directive(kd, "amdhsa_wavefront_size32") == 1 ? 32u : 64u));
        CHECK(*k.user_sgprs.kernarg_segment_ptr ==
              2 * kd_directive(kd, "amdhsa_user_sgpr_dispatch_ptr") + 2 * kd_directive(kd, "amdhsa_user_sgpr_queue_ptr"));
    }

    // Addresses, from the symbol table: the descriptor symbol and the function (the code entry).
    auto [syms, syms_rc] = run(std::string(kReadelf) + " -s " + path);
    INFO(syms);
    REQUIRE(syms_rc == 0);
    CHECK(k.descriptor_address == symbol_value(syms, kernel.name() + "\\.kd"));
    CHECK(k.entry_address == symbol_value(syms, kernel.name()));
    CHECK(k.descriptor_address % 64 == 0);
    CHECK(k.entry_address % 256 == 0);

    // The image holds the code where the disassembler says it is: the first instruction word.
    auto [dis, dis_rc] = run(std::string(kObjdump) + " -d --mcpu=" + gfx + " " + path);
    REQUIRE(dis_rc == 0);
    std::smatch m;
    REQUIRE(std::regex_search(dis, m, std::regex("<" + kernel.name() + ">:\\n[^\\n]*// ([0-9A-F]+): ([0-9A-F]{8})")));
    CHECK(std::stoull(m[1], nullptr, 16) == k.entry_address);
    uint32_t first_word = 0;
    REQUIRE(k.entry_address + 4 <= co.image.size());
    std::memcpy(&first_word, co.image.data() + k.entry_address, 4);
    CHECK(first_word == std::stoul(m[2], nullptr, 16));
    REQUIRE(!co.segments.empty());
    CHECK(co.image.size() == co.segments.back().vaddr + co.segments.back().mem_size);
}

// --- Making malformed objects from a real one ---

template <typename T>
void put(Bytes& b, uint64_t offset, T v) {
    REQUIRE(offset + sizeof v <= b.size());
    std::memcpy(b.data() + offset, &v, sizeof v);
}

// The file offset of a loaded virtual address.
uint64_t file_offset(const AmdgpuCodeObject& co, uint64_t vaddr) {
    for (const auto& s : co.segments)
        if (vaddr >= s.vaddr && vaddr < s.vaddr + s.file_size) return s.offset + (vaddr - s.vaddr);
    FAIL("address not in a segment");
    return 0;
}

// The NT_AMDGPU_METADATA note: the offset of its descsz field and of its descriptor.
struct NoteAt {
    uint64_t descsz_field, desc, descsz;
};
NoteAt find_note(const Bytes& b) {
    static const unsigned char head[] = {'A', 'M', 'D', 'G', 'P', 'U', 0, 0};
    for (uint64_t at = 12; at + 8 <= b.size(); ++at) {
        uint32_t namesz, type;
        std::memcpy(&namesz, b.data() + at - 12, 4);
        std::memcpy(&type, b.data() + at - 4, 4);
        if (namesz == 7 && type == 32 && std::memcmp(b.data() + at, head, 8) == 0) {
            uint32_t descsz;
            std::memcpy(&descsz, b.data() + at - 8, 4);
            return {at - 8, at + 8, descsz};
        }
    }
    FAIL("no metadata note");
    return {};
}

// A small msgpack writer, to write replacement metadata documents.
struct Msgpack {
    Bytes out;
    void byte(unsigned v) { out.push_back(std::byte(v)); }
    void be(uint64_t v, int bytes) {
        for (int k = bytes - 1; k >= 0; --k) byte(unsigned(v >> (8 * k)) & 0xff);
    }
    void str(const std::string& s) {
        if (s.size() < 32) byte(0xa0 | unsigned(s.size()));
        else { byte(0xd9); byte(unsigned(s.size())); }
        for (char c : s) byte(uint8_t(c));
    }
    void uint(uint64_t v) {
        if (v < 128) byte(unsigned(v));
        else if (v < 65536) { byte(0xcd); be(v, 2); }
        else { byte(0xce); be(v, 4); }
    }
    void map(unsigned n) { byte(0x80 | n); }
    void array(unsigned n) { byte(0x90 | n); }
};

struct MetadataEdit {
    std::optional<uint64_t> group_segment_fixed_size;
    bool wavefront_size_as_string = false;
};

// The kernel's metadata rewritten (only the fields the loader reads) with `edit` applied.
Bytes encode_metadata(const AmdgpuCodeObject& co, const MetadataEdit& edit) {
    const am::KernelMetadata& k = co.kernel.metadata;
    Msgpack w;
    w.map(3);
    w.str("amdhsa.version");
    w.array(2);
    w.uint(co.hsa_version[0]);
    w.uint(co.hsa_version[1]);
    w.str("amdhsa.target");
    w.str(co.target);
    w.str("amdhsa.kernels");
    w.array(1);
    w.map(11);
    w.str(".name"), w.str(k.name);
    w.str(".symbol"), w.str(k.symbol);
    w.str(".kernarg_segment_size"), w.uint(k.kernarg_segment_size);
    w.str(".kernarg_segment_align"), w.uint(k.kernarg_segment_align);
    w.str(".group_segment_fixed_size"), w.uint(edit.group_segment_fixed_size.value_or(k.group_segment_fixed_size));
    w.str(".private_segment_fixed_size"), w.uint(k.private_segment_fixed_size);
    w.str(".wavefront_size");
    if (edit.wavefront_size_as_string) w.str(std::to_string(k.wavefront_size));
    else w.uint(k.wavefront_size);
    w.str(".sgpr_count"), w.uint(k.sgpr_count);
    w.str(".vgpr_count"), w.uint(k.vgpr_count);
    w.str(".max_flat_workgroup_size"), w.uint(k.max_flat_workgroup_size);
    w.str(".args");
    w.array(1);
    w.map(4);
    w.str(".size"), w.uint(8);
    w.str(".offset"), w.uint(0);
    w.str(".value_kind"), w.str("global_buffer");
    w.str(".address_space"), w.str("global");
    return w.out;
}

// `object` with its metadata document replaced by `doc` (zero padded; it must not be longer).
Bytes with_metadata(Bytes object, const Bytes& doc) {
    NoteAt note = find_note(object);
    REQUIRE(doc.size() <= note.descsz);
    std::memcpy(object.data() + note.desc, doc.data(), doc.size());
    std::memset(object.data() + note.desc + doc.size(), 0, note.descsz - doc.size());
    return object;
}

// Kernel descriptor field offsets (AMDHSAKernelDescriptor.h), written independently of the parser.
constexpr uint64_t kKdGroup = 0, kKdKernarg = 8, kKdEntry = 16, kKdProperties = 56;

void expect_rejected(const Bytes& object, const std::string& gfx, const std::string& kernel, const std::vector<std::string>& parts) {
    try {
        parse_code_object(object, gfx, kernel, "bad.so");
        FAIL("accepted a malformed code object; expected an error with: " << parts.front());
    } catch (const CodeObjectError& e) {
        std::string what = e.what();
        INFO(what);
        CHECK(what.starts_with("bad.so: "));
        for (const auto& p : parts) CHECK(what.find(p) != std::string::npos);
    }
}

struct Fixture {
    Kernel kernel = elementwise_kernel();
    Bytes object = emit_amdgpu_code_object(kernel, "gfx1100");
    AmdgpuCodeObject co = parse_code_object(object, "gfx1100", kernel.name());
    uint64_t kd = file_offset(co, co.kernel.descriptor_address);
};

}  // namespace

TEST_CASE("code object: real kernels from the compiler for gfx1100 and gfx1201 parse to what LLVM's tools read") {
    for (const char* gfx : {"gfx1100", "gfx1201"}) {
        check_real_object(elementwise_kernel(), gfx);
        check_real_object(reduction_kernel(), gfx);
    }
    std::printf("kernel descriptors llvm-objdump could also decode: %d of 4\n", kd_disassembled);
}

TEST_CASE("code object: malformed objects are rejected with the field, expected and found") {
    Fixture f;
    const std::string name = f.kernel.name();
    const uint32_t kernarg = f.co.kernel.descriptor.kernarg_size;

    SECTION("truncated") {
        expect_rejected(Bytes(f.object.begin(), f.object.begin() + 40), "gfx1100", name, {"ELF header", "truncated"});
        expect_rejected(Bytes(f.object.begin(), f.object.begin() + long(f.object.size() / 2)), "gfx1100", name, {"truncated"});
        expect_rejected(Bytes(), "gfx1100", name, {"truncated"});
    }
    SECTION("not ELF, wrong e_machine") {
        Bytes b = f.object;
        b[1] = std::byte{'X'};
        expect_rejected(b, "gfx1100", name, {"not an ELF file"});
        b = f.object;
        put<uint16_t>(b, 18, 62);  // EM_X86_64
        expect_rejected(b, "gfx1100", name, {"e_machine", "expected 224 (EM_AMDGPU)", "found 62"});
    }
    SECTION("ET_REL: the unlinked object") {
        expect_rejected(emit_amdgpu_object(f.kernel, "gfx1100"), "gfx1100", name, {"e_type", "ET_DYN", "found 1 (ET_REL", "ld.lld"});
    }
    SECTION("wrong gfx for the device") {
        expect_rejected(emit_amdgpu_code_object(f.kernel, "gfx1201"), "gfx1100", name,
                        {"EF_AMDGPU_MACH", "expected 0x41 (gfx1100)", "found 0x4e (gfx1201)"});
        expect_rejected(f.object, "gfx1201", name, {"EF_AMDGPU_MACH", "expected 0x4e (gfx1201)", "found 0x41 (gfx1100)"});
        expect_rejected(f.object, "gfx9999", name, {"gfx9999", "not one drivers/am knows"});
    }
    SECTION("missing .kd symbol") {
        Bytes b = f.object;
        const std::string sym = name + ".kd";
        int renamed = 0;
        for (size_t at = 0; at + sym.size() < b.size(); ++at) {
            if (std::memcmp(b.data() + at, sym.data(), sym.size()) == 0 && b[at + sym.size()] == std::byte{0}) {
                b[at + sym.size() - 2] = std::byte{'x'};  // "<name>.xd" in .dynstr and .strtab; the metadata's .symbol stays
                ++renamed;
            }
        }
        REQUIRE(renamed >= 1);
        expect_rejected(b, "gfx1100", name, {"kernel '" + name + "'", "'" + sym + "' is not in the symbol tables"});
    }
    SECTION("kernel not in the code object") {
        expect_rejected(f.object, "gfx1100", "k_nonexistent", {"'k_nonexistent' is not in the metadata", name});
    }
    SECTION("descriptor kernarg_size disagrees with the metadata") {
        Bytes b = f.object;
        put<uint32_t>(b, f.kd + kKdKernarg, kernarg + 8);
        expect_rejected(b, "gfx1100", name,
                        {"kernel '" + name + "'", "kernarg size", "expected " + std::to_string(kernarg), "found " + std::to_string(kernarg + 8)});
    }
    SECTION("descriptor LDS size disagrees with the metadata") {
        Bytes b = f.object;
        put<uint32_t>(b, f.kd + kKdGroup, 1024);
        expect_rejected(b, "gfx1100", name, {"LDS size", "expected 0", "found 1024"});
    }
    SECTION("LDS above 64 KiB, descriptor and metadata agreeing") {
        Bytes b = with_metadata(f.object, encode_metadata(f.co, {.group_segment_fixed_size = 70000}));
        put<uint32_t>(b, f.kd + kKdGroup, 70000);
        expect_rejected(b, "gfx1100", name, {"LDS size", "at most 65536", "found 70000"});
        // The same rewrite at a legal size is accepted: the rewriting itself is sound.
        Bytes ok = with_metadata(f.object, encode_metadata(f.co, {.group_segment_fixed_size = 4096}));
        put<uint32_t>(ok, f.kd + kKdGroup, 4096);
        CHECK(parse_code_object(ok, "gfx1100", name).kernel.descriptor.group_segment_fixed_size == 4096);
    }
    SECTION("wave size: descriptor says wave64, metadata wave32") {
        Bytes b = f.object;
        uint16_t props;
        std::memcpy(&props, b.data() + f.kd + kKdProperties, 2);
        put<uint16_t>(b, f.kd + kKdProperties, uint16_t(props & ~(1u << 10)));  // ENABLE_WAVEFRONT_SIZE32
        expect_rejected(b, "gfx1100", name, {"wave size", "expected 32, found 64"});
    }
    SECTION("kernarg pointer SGPR not enabled") {
        Bytes b = f.object;
        uint16_t props;
        std::memcpy(&props, b.data() + f.kd + kKdProperties, 2);
        put<uint16_t>(b, f.kd + kKdProperties, uint16_t(props & ~(1u << 3)));  // ENABLE_SGPR_KERNARG_SEGMENT_PTR
        expect_rejected(b, "gfx1100", name, {"kernarg segment pointer"});
    }
    SECTION("code entry outside the code") {
        Bytes b = f.object;
        put<int64_t>(b, f.kd + kKdEntry, int64_t(1) << 40);
        expect_rejected(b, "gfx1100", name, {"kernel_code_entry_byte_offset", "executable segment"});
        put<int64_t>(b, f.kd + kKdEntry, -int64_t(f.co.kernel.descriptor_address) - 64);
        expect_rejected(b, "gfx1100", name, {"kernel_code_entry_byte_offset"});
    }
    SECTION("metadata note: truncated msgpack") {
        Bytes b = f.object;
        NoteAt note = find_note(b);
        put<uint32_t>(b, note.descsz_field, uint32_t(note.descsz / 2));
        expect_rejected(b, "gfx1100", name, {"metadata note: msgpack", "truncated"});
    }
    SECTION("metadata note: bad type") {
        Bytes b = f.object;
        NoteAt note = find_note(b);
        b[note.desc] = std::byte{0xc1};  // never used by msgpack
        expect_rejected(b, "gfx1100", name, {"metadata note: msgpack at byte 0", "0xc1 is not a msgpack type"});
        b = with_metadata(f.object, encode_metadata(f.co, {.group_segment_fixed_size = std::nullopt, .wavefront_size_as_string = true}));
        expect_rejected(b, "gfx1100", name, {"kernel '" + name + "'", ".wavefront_size: expected an unsigned integer, found a string"});
    }
    SECTION("dynamic relocations are refused (the image is copied unrelocated)") {
        // Retype the allocated SHT_HASH section (5) as SHT_RELA (4): Elf64_Shdr, sh_type at +4.
        Bytes b = f.object;
        uint64_t shoff;
        uint16_t shnum;
        std::memcpy(&shoff, b.data() + 40, 8);
        std::memcpy(&shnum, b.data() + 60, 2);
        bool retyped = false;
        for (uint64_t sh = 0; sh < shnum && !retyped; ++sh) {
            uint32_t type;
            std::memcpy(&type, b.data() + shoff + sh * 64 + 4, 4);
            if (type == 5) put<uint32_t>(b, shoff + sh * 64 + 4, 4), retyped = true;
        }
        REQUIRE(retyped);
        expect_rejected(b, "gfx1100", name, {"dynamic relocations", "SHT_RELA", "not supported"});
    }
    SECTION("metadata note missing") {
        Bytes b = f.object;
        NoteAt note = find_note(b);
        put<uint32_t>(b, note.desc - 4, 33);  // the note's type: no longer NT_AMDGPU_METADATA
        expect_rejected(b, "gfx1100", name, {"NT_AMDGPU_METADATA"});
    }
}

TEST_CASE("code object: mutated objects are rejected or accepted, never crash") {
    Fixture f;
    const NoteAt note = find_note(f.object);
    std::mt19937_64 rng(7);
    // A few thousand by default (under a second); BAREGPU_FUZZ_ITERATIONS for a longer run.
    const char* env = std::getenv("BAREGPU_FUZZ_ITERATIONS");
    const int iterations = env != nullptr ? std::atoi(env) : 3000;
    int accepted = 0, rejected = 0;
    for (int i = 0; i < iterations; ++i) {
        Bytes b = f.object;
        const int flips = 1 + int(rng() % 8);
        for (int k = 0; k < flips; ++k) {
            // Half the mutations in the metadata note, to reach the msgpack reader's corners.
            uint64_t at = (rng() % 2 == 0) ? note.desc + rng() % note.descsz : rng() % b.size();
            switch (rng() % 4) {
            case 0: b[at] = std::byte(rng() & 0xff); break;
            case 1: b[at] = std::byte{0xff}; break;
            case 2: b[at] = std::byte{0}; break;
            default: b[at] ^= std::byte(1u << (rng() % 8)); break;
            }
        }
        if (rng() % 16 == 0) b.resize(rng() % b.size());
        try {
            parse_code_object(b, "gfx1100", f.kernel.name(), "fuzz");
            ++accepted;
        } catch (const CodeObjectError&) {
            ++rejected;
        }
    }
    std::printf("fuzz: %d mutated objects accepted, %d rejected\n", accepted, rejected);
    CHECK(rejected > 0);
    CHECK(accepted + rejected == iterations);
}

// Without LLVM's tools there is nothing to compare the loader with, nor a linker for the objects.
const test::SkipUnless needs_llvm_tools{[](int, char**) -> std::string {
    for (const char* tool : {kObjdump, kReadelf})
        if (!have_tool(tool)) return std::string(tool) + " is not installed (Debian: apt-get install llvm-19)";
    // LLVM 19's code object v5 needs lld 15 or newer (Debian 12's plain `lld` is 14).
    if (!have_tool("ld.lld-19")) {
        auto [version, rc] = run("ld.lld --version");
        std::smatch m;
        if (rc != 0 || !std::regex_search(version, m, std::regex("LLD (\\d+)")) || std::stoi(m[1]) < 15)
            return "no ld.lld 15 or newer (Debian: apt-get install lld-19)";
    }
    return "";
}};

}  // namespace code_object_test
