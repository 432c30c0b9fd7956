// Unit: the CPU device's ELF loader rejects bad code objects with clear errors, and survives
// random corruption (brief by default, longer with BAREGPU_LONG=full).
#include "base/error.hpp"
#include "drivers/hostcode/elf_loader.hpp"
#include "tests/hcq/support.hpp"

#include <cstring>
#include <elf.h>
#include <random>

using namespace baregpu;
using namespace baregpu::hostcode;

namespace baregpu::test_kernels {
std::span<const std::byte> find_object(std::string_view name);
}

namespace {

std::vector<std::byte> object_bytes(const char* name) {
    auto span = test_kernels::find_object(name);
    REQUIRE(!span.empty());
    return {span.begin(), span.end()};
}

template <typename T>
T get(const std::vector<std::byte>& b, uint64_t off) {
    T v;
    std::memcpy(&v, b.data() + off, sizeof v);
    return v;
}
template <typename T>
void put(std::vector<std::byte>& b, uint64_t off, T v) {
    std::memcpy(b.data() + off, &v, sizeof v);
}

// Offsets of the section headers (index -> file offset) and their names.
struct Sections {
    std::vector<uint64_t> header;
    std::vector<std::string> name;
    std::vector<Elf64_Shdr> sh;
};
Sections sections_of(const std::vector<std::byte>& b) {
    auto eh = get<Elf64_Ehdr>(b, 0);
    Sections s;
    for (unsigned i = 0; i < eh.e_shnum; ++i) {
        uint64_t off = eh.e_shoff + i * sizeof(Elf64_Shdr);
        s.header.push_back(off);
        s.sh.push_back(get<Elf64_Shdr>(b, off));
    }
    auto strtab = s.sh[eh.e_shstrndx];
    for (auto& h : s.sh) s.name.push_back(reinterpret_cast<const char*>(b.data() + strtab.sh_offset + h.sh_name));
    return s;
}
int find_section(const Sections& s, const std::string& name) {
    for (size_t i = 0; i < s.name.size(); ++i) {
        if (s.name[i] == name) return int(i);
    }
    return -1;
}

const Import kImports[] = {{"memcpy", reinterpret_cast<uint64_t>(&::memcpy)},
                           {"memset", reinterpret_cast<uint64_t>(&::memset)},
                           {"memmove", reinterpret_cast<uint64_t>(&::memmove)},
                           {"memcmp", reinterpret_cast<uint64_t>(&::memcmp)}};
constexpr uint64_t kHighBase = 0x7f1234560000ull;

std::string parse_error(const std::vector<std::byte>& bytes) {
    try {
        auto o = ElfObject::parse(bytes, "cpu", "test object");
        std::vector<std::byte> image(o.layout().size);
        o.link(image, kHighBase, kImports);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("elf: a valid object parses, lays out code/ro/rw on separate pages and links") {
    auto bytes = object_bytes("globals.o");
    auto o = ElfObject::parse(bytes, "cpu", "globals.o");
    const auto& l = o.layout();
    CHECK(l.exec_begin == 0);
    CHECK(l.exec_end <= l.ro_begin);
    CHECK(l.ro_begin % 4096 == 0);
    CHECK(l.ro_end <= l.rw_begin);
    CHECK(l.rw_begin % 4096 == 0);
    CHECK(l.size % 4096 == 0);
    CHECK(l.rw_end > l.rw_begin);  // .data and .bss
    REQUIRE(o.kernels().size() == 1);
    CHECK(o.kernel("globals").num_buffers == 1);
    CHECK(o.kernel("globals").offset < l.exec_end);
    std::vector<std::byte> image(l.size);
    CHECK_NOTHROW(o.link(image, kHighBase, kImports));
    // The initialised global (1000, 2000, 3000, 4000) landed in the writable part.
    bool found = false;
    for (uint64_t off = l.rw_begin; off + 16 <= l.rw_end; off += 4) {
        if (get<uint32_t>(image, off) == 1000 && get<uint32_t>(image, off + 12) == 4000) found = true;
    }
    CHECK(found);
    CHECK_THROWS_WITH(o.kernel("nope"), Catch::Contains("no kernel named 'nope'") && Catch::Contains("globals"));
}

TEST_CASE("elf: bad objects are rejected with a message that says what is wrong") {
    auto good = object_bytes("add_one.o");
    auto secs = sections_of(good);
    auto expect = [](std::vector<std::byte> bytes, const std::string& text) {
        std::string error = parse_error(bytes);
        INFO("error: " << error);
        CHECK_THAT(error, Catch::Contains(text));
    };
    expect(std::vector<std::byte>(good.begin(), good.begin() + 10), "too small");
    {
        auto b = good;
        b[1] = std::byte{'X'};
        expect(b, "not an ELF file");
    }
    {
        auto b = good;
        put<uint16_t>(b, offsetof(Elf64_Ehdr, e_machine), EM_AARCH64);
        expect(b, "is not EM_X86_64");
    }
    {
        auto b = good;
        put<uint16_t>(b, offsetof(Elf64_Ehdr, e_type), ET_EXEC);
        expect(b, "not ET_REL");
    }
    {
        auto b = good;
        put<uint64_t>(b, offsetof(Elf64_Ehdr, e_shoff), b.size() - 8);
        expect(b, "section table");
    }
    {
        auto b = good;
        int text = find_section(secs, ".text");
        REQUIRE(text > 0);
        put<uint64_t>(b, secs.header[text] + offsetof(Elf64_Shdr, sh_offset), b.size() + 100);
        expect(b, "extends past the end of the file");
    }
    int rela = find_section(secs, ".rela.eh_frame");
    if (rela < 0) rela = find_section(secs, ".rela.text");
    REQUIRE(rela > 0);
    uint64_t first_rela = secs.sh[rela].sh_offset;
    {
        auto b = good;
        put<uint64_t>(b, first_rela + offsetof(Elf64_Rela, r_offset), 0x100000);
        expect(b, "outside section");
    }
    {
        auto b = good;
        auto r = get<Elf64_Rela>(b, first_rela);
        put<uint64_t>(b, first_rela + offsetof(Elf64_Rela, r_info), ELF64_R_INFO(ELF64_R_SYM(r.r_info), R_X86_64_GOTOFF64));
        expect(b, "unsupported type 25 (R_X86_64_GOTOFF64)");
    }
    {
        auto b = good;
        auto r = get<Elf64_Rela>(b, first_rela);
        put<uint64_t>(b, first_rela + offsetof(Elf64_Rela, r_info), ELF64_R_INFO(100000, ELF64_R_TYPE(r.r_info)));
        expect(b, "names symbol 100000");
    }
    int kernels = find_section(secs, ".baregpu.kernels");
    REQUIRE(kernels > 0);
    uint64_t desc = secs.sh[kernels].sh_offset;
    {
        auto b = good;
        put<uint32_t>(b, desc, 0x12345678);
        expect(b, "magic 0x12345678");
    }
    {
        auto b = good;
        b[desc + 8] = std::byte{'Z'};  // the name no longer matches the function
        expect(b, "no global function of that name");
    }
    {
        auto b = good;
        put<uint32_t>(b, desc + 72, 4);  // kernarg_size smaller than 2 buffers + 1 value
        expect(b, "kernarg_size 4");
    }
    {
        auto b = good;
        // Rename the descriptor section: no kernels at all.
        auto strtab = secs.sh[get<Elf64_Ehdr>(b, 0).e_shstrndx];
        b[strtab.sh_offset + secs.sh[kernels].sh_name + 1] = std::byte{'x'};
        expect(b, "no kernels");
    }
    {
        auto b = good;
        int symtab = find_section(secs, ".symtab");
        put<uint64_t>(b, secs.header[symtab] + offsetof(Elf64_Shdr, sh_entsize), 20);
        expect(b, "Elf64_Sym");
    }
    int text = find_section(secs, ".text");
    {
        // Code that is not loaded (no SHF_ALLOC) cannot hold a kernel: its entry would point
        // outside the image.
        auto b = good;
        put<uint64_t>(b, secs.header[text] + offsetof(Elf64_Shdr, sh_flags), SHF_EXECINSTR);
        // (and the unwind table that refers to it, which would be refused first)
        int eh_frame = find_section(secs, ".eh_frame");
        if (eh_frame > 0) put<uint64_t>(b, secs.header[eh_frame] + offsetof(Elf64_Shdr, sh_flags), 0);
        expect(b, "no global function of that name in code");
    }
    {
        // A kernel entry at the very end of its section.
        auto b = good;
        int symtab = find_section(secs, ".symtab");
        const Elf64_Shdr& st = secs.sh[symtab];
        const Elf64_Shdr& names = secs.sh[st.sh_link];
        bool found = false;
        for (uint64_t off = st.sh_offset; off + sizeof(Elf64_Sym) <= st.sh_offset + st.sh_size; off += sizeof(Elf64_Sym)) {
            auto sym = get<Elf64_Sym>(b, off);
            if (std::string(reinterpret_cast<const char*>(b.data() + names.sh_offset + sym.st_name)) != "add_one") continue;
            put<uint64_t>(b, off + offsetof(Elf64_Sym, st_value), secs.sh[sym.st_shndx].sh_size);
            found = true;
        }
        REQUIRE(found);
        expect(b, "at or past the end of section");
    }
}

TEST_CASE("elf: undefined symbols and non-PIC code are refused at link time with advice") {
    auto globals = ElfObject::parse(object_bytes("globals.o"), "cpu", "globals.o");
    std::vector<std::byte> image(globals.layout().size);
    CHECK_THROWS_WITH(globals.link(image, kHighBase, {}), Catch::Contains("undefined symbol 'mem"));
    auto nopic = ElfObject::parse(object_bytes("globals_nopic.o"), "cpu", "globals_nopic.o");
    std::vector<std::byte> image2(nopic.layout().size);
    CHECK_THROWS_WITH(nopic.link(image2, kHighBase, kImports), Catch::Contains("does not fit 32 bits") && Catch::Contains("-fPIC"));
}

TEST_CASE("elf: randomly corrupted objects are rejected or loaded, never read out of bounds") {
    std::vector<std::vector<std::byte>> seeds = {object_bytes("add_one.o"), object_bytes("globals.o"), object_bytes("fill.o")};
    const int iterations = test::long_run() ? 200000 : 4000;
    std::mt19937_64 rng(0xe1f);
    int rejected = 0;
    for (int i = 0; i < iterations; ++i) {
        auto b = seeds[rng() % seeds.size()];
        int flips = 1 + int(rng() % 4);
        for (int f = 0; f < flips; ++f) {
            // Bias towards the headers and tables, where the interesting fields are.
            uint64_t at = rng() % 2 ? rng() % std::min<size_t>(b.size(), 64) : rng() % b.size();
            if (rng() % 3 == 0) {
                auto eh = get<Elf64_Ehdr>(b, 0);
                if (eh.e_shoff < b.size()) at = eh.e_shoff + rng() % (b.size() - eh.e_shoff);
            }
            b[at] = std::byte(rng());
        }
        if (rng() % 8 == 0) b.resize(rng() % b.size());
        if (!parse_error(b).empty()) ++rejected;
    }
    INFO(rejected << " of " << iterations << " rejected");
    CHECK(rejected > iterations / 10);
}
