// drivers/nv/cubin against a real cubin: tests/nv/data/axpy_fill_sm89.cubin, built from
// axpy_fill.cu by `nvcc -cubin -arch=sm_89` (CUDA 13.0.88). Expected values read off the source
// (parameter sizes and offsets follow the C ABI of the kernel signatures; the shared tile is 64
// floats) and off the file with readelf (register counts in .text.* sh_info, the relocations).
// Then malformed copies of it, each refused with the field named.
#include "base/error.hpp"
#include "drivers/nv/cubin.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace cubin_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::nv;
using Catch::Matchers::Contains;

namespace {

std::vector<std::byte> load_fixture() {
    std::ifstream f(std::string(BAREGPU_TEST_DATA_DIR) + "/axpy_fill_sm89.cubin", std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    REQUIRE(raw.size() > 64);
    std::vector<std::byte> bytes(raw.size());
    std::memcpy(bytes.data(), raw.data(), raw.size());
    return bytes;
}

uint64_t u64_at(const std::vector<std::byte>& b, uint64_t at) {
    uint64_t v;
    std::memcpy(&v, b.data() + at, 8);
    return v;
}

// Section header i's file offset and a writer for its fields (Elf64_Shdr).
uint64_t shdr(const std::vector<std::byte>& b, uint32_t i) { return u64_at(b, 0x28) + 64ull * i; }
template <class T>
void poke(std::vector<std::byte>& b, uint64_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof(T));
}

}  // namespace

TEST_CASE("cubin: kernels, registers, parameters, shared memory and banks of an sm_89 cubin") {
    Cubin c = Cubin::parse(load_fixture(), "axpy_fill_sm89.cubin", 89);
    CHECK(c.sm() == 89);
    REQUIRE(c.kernels().size() == 2);

    const CubinKernel& axpy = c.kernel("axpy");
    CHECK(axpy.registers == 16);
    CHECK(axpy.shared_bytes == 64 * sizeof(float));
    CHECK(axpy.param_offset == 0x160);
    CHECK(axpy.param_size == 8 + 8 + 4 + 4);  // float*, const float*, int, float
    REQUIRE(axpy.params.size() == 4);
    CHECK(axpy.params[0].offset == 0);
    CHECK(axpy.params[0].size == 8);
    CHECK(axpy.params[1].offset == 8);
    CHECK(axpy.params[2].offset == 16);
    CHECK(axpy.params[2].size == 4);
    CHECK(axpy.params[3].offset == 20);
    CHECK(axpy.constant_bank0.size() == axpy.param_offset + axpy.param_size);
    CHECK(axpy.text_size == 0x300);
    CHECK(axpy.text_offset % 256 == 0);

    const CubinKernel& fill = c.kernel("fill");
    CHECK(fill.registers == 8);
    CHECK(fill.shared_bytes == 0);
    CHECK(fill.param_size == 12);  // int*, int
    REQUIRE(fill.params.size() == 2);
    CHECK(fill.params[1].offset == 8);
    CHECK(fill.params[1].size == 4);

    // __constant__ float scale[2] is bank 3; the compiler's address table bank 4.
    REQUIRE(c.constant_banks().count(3));
    CHECK(c.constant_banks().at(3).second == 8);
    REQUIRE(c.constant_banks().count(4));
    CHECK(c.constant_banks().at(4).second == 16);

    CHECK_THROWS_WITH(c.kernel("gemm"), Contains("no kernel 'gemm'") && Contains("axpy") && Contains("fill"));
}

TEST_CASE("cubin: link applies R_CUDA_64 and R_CUDA_G64 for the load address") {
    Cubin c = Cubin::parse(load_fixture(), "axpy_fill_sm89.cubin");
    const uint64_t base = 0x7f0000000000;
    std::vector<std::byte> image = c.link(base);
    REQUIRE(image.size() == c.image_size());
    const uint64_t table = c.symbol_offset("table");
    const uint64_t table_ptr = c.symbol_offset("table_ptr");
    // __device__ int* table_ptr = table;  (.rel.nv.global.init, R_CUDA_G64)
    CHECK(u64_at(image, table_ptr) == base + table);
    // The bank-4 address table holds &table_ptr and &table (.rel.nv.constant4, R_CUDA_64).
    const uint64_t bank4 = c.constant_banks().at(4).first;
    CHECK(u64_at(image, bank4 + 8) == base + table_ptr);
    CHECK(u64_at(image, bank4 + 0) == base + table);
    // The initialised data is there: int table[4] = {1, 2, 3, 4}.
    int32_t values[4];
    std::memcpy(values, image.data() + table, sizeof(values));
    CHECK(values[0] == 1);
    CHECK(values[3] == 4);
    // Another base moves every address.
    CHECK(u64_at(c.link(0x1000000000), table_ptr) == 0x1000000000 + table);
}

TEST_CASE("cubin: malformed or foreign objects are refused with the field named") {
    const std::vector<std::byte> good = load_fixture();

    SECTION("another SM") {
        CHECK_THROWS_WITH(Cubin::parse(good, "k.cubin", 120), Contains("sm_89") && Contains("sm_120"));
    }
    SECTION("not EM_CUDA") {
        auto b = good;
        poke<uint16_t>(b, 18, 62);  // EM_X86_64
        CHECK_THROWS_WITH(Cubin::parse(b, "k.cubin"), Contains("e_machine"));
    }
    SECTION("truncated") {
        auto b = good;
        b.resize(b.size() / 2);
        CHECK_THROWS_AS(Cubin::parse(b, "k.cubin"), FirmwareError);
    }
    SECTION("a relocation type the loader does not apply") {
        auto b = good;
        // Section 12 is .rel.nv.constant4 (readelf): make its first entry's type 0x2a (R_CUDA_ABS32_20).
        uint64_t rel = u64_at(b, shdr(b, 12) + 24);
        poke<uint32_t>(b, rel + 8, 0x2a);
        CHECK_THROWS_WITH(Cubin::parse(b, "k.cubin"), Contains("relocation type") && Contains("42"));
    }
    SECTION("a parameter outside the parameter block") {
        auto b = good;
        // .nv.info.fill (section 8): CUDA_API_VERSION (8 bytes), PARAM_CBANK (12), CBANK_PARAM_SIZE (4), then
        // the first KPARAM_INFO record at +24; move its parameter to +0x40.
        uint64_t info = u64_at(b, shdr(b, 8) + 24);
        REQUIRE(static_cast<uint8_t>(b[info + 24 + 1]) == 0x17);
        poke<uint16_t>(b, info + 24 + 4 + 6, 0x40);
        CHECK_THROWS_WITH(Cubin::parse(b, "k.cubin"), Contains("kernel fill") && Contains("outside"));
    }
    SECTION("an attribute record running past its section") {
        auto b = good;
        uint64_t info = u64_at(b, shdr(b, 8) + 24);
        poke<uint16_t>(b, info + 2, 0x4000);  // the first SVAL claims 16 KiB
        CHECK_THROWS_AS(Cubin::parse(b, "k.cubin"), FirmwareError);
    }
}

TEST_CASE("cubin: ptxas 13.0's cubins of the compiler's PTX (tests/nv/data/ptx) read as their PTX declares") {
    // Each <kernel>.<sm>.cubin was assembled by ptxas from the <kernel>.<sm>.ptx beside it: the entry and its u64
    // parameters must be there, in bank 0 at the offset ptxas chose for the SM (0x160 on sm_89, 0x210 on sm_90).
    namespace fs = std::filesystem;
    size_t checked = 0;
    for (const auto& entry : fs::directory_iterator(std::string(BAREGPU_TEST_DATA_DIR) + "/ptx")) {
        if (entry.path().extension() != ".cubin") continue;
        const std::string stem = entry.path().stem().string();  // <kernel>.<sm>
        const std::string kernel = stem.substr(0, stem.find('.')), sm = stem.substr(stem.find('.') + 4);
        INFO(entry.path());
        std::ifstream pf(fs::path(entry.path()).replace_extension(".ptx"));
        const std::string ptx((std::istreambuf_iterator<char>(pf)), std::istreambuf_iterator<char>());
        REQUIRE(ptx.find(".entry " + kernel + "(") != std::string::npos);
        size_t params = 0;
        for (size_t at = 0; (at = ptx.find(".param .u64 " + kernel + "_param_", at)) != std::string::npos; ++at) ++params;
        std::ifstream cf(entry.path(), std::ios::binary);
        std::vector<char> raw((std::istreambuf_iterator<char>(cf)), std::istreambuf_iterator<char>());
        std::vector<std::byte> bytes(raw.size());
        std::memcpy(bytes.data(), raw.data(), raw.size());
        const Cubin c = Cubin::parse(bytes, entry.path().filename().string(), static_cast<uint32_t>(std::stoul(sm)));
        const CubinKernel& k = c.kernel(kernel);
        CHECK(k.params.size() == params);
        CHECK(k.param_size == 8 * params);
        CHECK(k.param_offset == (sm == "90" ? 0x210u : 0x160u));
        CHECK(k.registers > 0);
        ++checked;
    }
    CHECK(checked == 12);
}

}  // namespace cubin_test
