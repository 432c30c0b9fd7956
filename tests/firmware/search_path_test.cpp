// Finding firmware as Linux does (BAREGPU_FIRMWARE_PATH, /lib/firmware/updates, /lib/firmware;
// NAME, NAME.zst, NAME.xz) and reading compressed files. The compressed files are made here with
// libzstd and liblzma, the libraries Debian's own firmware packaging uses.
#include "base/error.hpp"
#include "firmware-loader/search_path.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <lzma.h>
#include <memory>
#include <random>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

using namespace baregpu;
using namespace baregpu::fw;
namespace fs = std::filesystem;

namespace {

std::vector<std::byte> pattern(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::byte> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>(i % 7 == 0 ? rng() : i / 64);  // compressible, not trivial
    return out;
}

// With a content checksum, as the zstd command line writes by default (so a corrupt payload is
// detected, not just a corrupt structure).
std::vector<std::byte> zstd(const std::vector<std::byte>& in) {
    std::vector<std::byte> out(ZSTD_compressBound(in.size()));
    std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
    REQUIRE_FALSE(ZSTD_isError(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1)));
    size_t n = ZSTD_compress2(cctx.get(), out.data(), out.size(), in.data(), in.size());
    REQUIRE_FALSE(ZSTD_isError(n));
    out.resize(n);
    return out;
}

// Preset 0: its 256 KiB dictionary, not preset 6's 8 MiB, is what each of the thousands of decodes
// in the truncation sweep allocates and clears (seconds under ASan); the streams are as valid.
std::vector<std::byte> xz(const std::vector<std::byte>& in) {
    std::vector<std::byte> out(lzma_stream_buffer_bound(in.size()));
    size_t pos = 0;
    REQUIRE(lzma_easy_buffer_encode(0, LZMA_CHECK_CRC64, nullptr, reinterpret_cast<const uint8_t*>(in.data()), in.size(),
                                    reinterpret_cast<uint8_t*>(out.data()), &pos, out.size()) == LZMA_OK);
    out.resize(pos);
    return out;
}

void write(const fs::path& path, const std::vector<std::byte>& bytes) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

struct TempDir {
    fs::path path;
    TempDir() {
        std::string tmpl = (fs::temp_directory_path() / "baregpu-fw-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
    }
    ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("plain, .zst and .xz files read back to the same bytes", "[search]") {
    TempDir dir;
    auto original = pattern(300000, 1);
    write(dir.path / "amdgpu/a.bin", original);
    write(dir.path / "amdgpu/b.bin.zst", zstd(original));
    write(dir.path / "amdgpu/c.bin.xz", xz(original));
    FirmwareSearchPath search({dir.path});
    for (const char* name : {"amdgpu/a.bin", "amdgpu/b.bin", "amdgpu/c.bin"}) {
        INFO(name);
        FirmwareFile f = search.load(name);
        CHECK(f.name == name);
        CHECK(f.bytes == original);
        CHECK(f.compressed == (std::string(name) != "amdgpu/a.bin"));
    }
    // Two zstd frames back to back decode to both halves, as zstd -c a b does.
    auto half1 = pattern(1000, 2), half2 = pattern(2000, 3);
    auto both = zstd(half1);
    auto second = zstd(half2);
    both.insert(both.end(), second.begin(), second.end());
    auto joined = half1;
    joined.insert(joined.end(), half2.begin(), half2.end());
    CHECK(decompress(both, "two-frames") == joined);
}

TEST_CASE("the search order: earlier directories first, the plain file before its compressed forms", "[search]") {
    TempDir dir;
    write(dir.path / "first/x.bin.zst", zstd(pattern(100, 1)));
    write(dir.path / "second/x.bin", pattern(100, 2));
    write(dir.path / "second/y.bin.xz", xz(pattern(100, 3)));
    write(dir.path / "second/y.bin", pattern(100, 4));
    FirmwareSearchPath search({dir.path / "first", dir.path / "second"});
    CHECK(search.find("x.bin") == dir.path / "first/x.bin.zst");
    CHECK(search.load("x.bin").bytes == pattern(100, 1));
    CHECK(search.find("y.bin") == dir.path / "second/y.bin");
    CHECK_FALSE(search.find("z.bin").has_value());
}

TEST_CASE("BAREGPU_FIRMWARE_PATH comes before /lib/firmware/updates and /lib/firmware", "[search]") {
    ::setenv("BAREGPU_FIRMWARE_PATH", "/opt/a::/opt/b", 1);
    auto dirs = FirmwareSearchPath::from_environment().directories();
    ::unsetenv("BAREGPU_FIRMWARE_PATH");
    CHECK(dirs == std::vector<fs::path>{"/opt/a", "/opt/b", "/lib/firmware/updates", "/lib/firmware"});
    CHECK(FirmwareSearchPath::from_environment().directories() == std::vector<fs::path>{"/lib/firmware/updates", "/lib/firmware"});
}

TEST_CASE("a missing file names every place looked in", "[search]") {
    FirmwareSearchPath search({"/nonexistent/one", "/nonexistent/two"});
    try {
        search.load("amdgpu/psp_13_0_0_sos.bin");
        FAIL("loaded a file that does not exist");
    } catch (const FirmwareError& e) {
        CHECK(e.file() == "amdgpu/psp_13_0_0_sos.bin");
        CHECK_THAT(e.expected(), Catch::Contains("/nonexistent/one, /nonexistent/two"));
        CHECK_THAT(e.expected(), Catch::Contains("BAREGPU_FIRMWARE_PATH"));
    }
}

TEST_CASE("truncated and corrupt compressed streams are FirmwareErrors, at every cut", "[search]") {
    auto original = pattern(12000, 5);
    for (auto [format, packed] : {std::pair{"zstd", zstd(original)}, std::pair{"xz", xz(original)}}) {
        INFO(format);
        // Every cut after the magic: an error, never a short file returned as if whole. (Cuts inside
        // the magic are not compressed files at all and come back unchanged.)
        for (size_t cut = 6; cut < packed.size(); ++cut) {
            std::vector<std::byte> part(packed.begin(), packed.begin() + static_cast<std::ptrdiff_t>(cut));
            try {
                auto out = decompress(part, "cut.bin");
                FAIL("a stream cut at " << cut << " of " << packed.size() << " decoded to " << out.size() << " bytes");
            } catch (const FirmwareError& e) {
                CHECK_THAT(e.field(), Catch::Contains(format));
            }
        }
        // A flipped byte in the payload: the stream's checksum or structure catches it.
        auto bad = packed;
        bad[bad.size() / 2] ^= std::byte{0x55};
        CHECK_THROWS_AS(decompress(bad, "bad.bin"), FirmwareError);
    }
}

TEST_CASE("only a regular file is read: a FIFO or a directory is refused at once, saying what it is", "[search]") {
    TempDir dir;
    const fs::path fifo = dir.path / "fifo.bin";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // No writer: an open that waited for one, or a read, would never return.
    CHECK_THROWS_WITH(read_firmware_file(fifo), Catch::Contains(fifo.string()) && Catch::Contains("a FIFO"));
    CHECK_THROWS_WITH(read_firmware_file(dir.path), Catch::Contains("a directory"));
    CHECK_THROWS_WITH(read_firmware_file("/dev/zero"), Catch::Contains("a character device"));
    // Named like a firmware file in the search path, but not a file: the error says what is there.
    fs::create_directories(dir.path / "amdgpu" / "gc_11_0_0_mec.bin");
    FirmwareSearchPath search({dir.path});
    CHECK_THROWS_WITH(search.load("amdgpu/gc_11_0_0_mec.bin"), Catch::Contains("gc_11_0_0_mec.bin is a directory"));
}
