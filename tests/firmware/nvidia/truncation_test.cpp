// Every real NVIDIA file cut at every length (step 1 below 64 KiB; for the larger gb202 files a
// few thousand evenly spread lengths plus every length within 512 bytes of each header and
// section boundary): describe_file must throw FirmwareError, never crash, read out of bounds
// (the sanitizer build checks) or accept a cut file. Everything past a cut is poisoned, so
// AddressSanitizer sees a read one byte past it. Seeded mutations of the real files follow.
#include "firmware-loader/nvidia/describe.hpp"
#include "tests/firmware/nvidia/nv_test_support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace nv = baregpu::fw::nv;
using baregpu::test::nv::firmware_file;
using baregpu::test::nv::reader_for;

namespace {

struct File {
    const char* path;
    // Structure boundaries read by hand (xxd, readelf): header, sub-header, data image, sections.
    std::vector<uint64_t> boundaries;
};

const File kFiles[] = {
    {"nvidia/ad102/gsp/booter_load-535.113.01.bin", {}},
    {"nvidia/ad102/gsp/booter_load-570.144.bin", {}},
    {"nvidia/ad102/gsp/booter_unload-535.113.01.bin", {}},
    {"nvidia/ad102/gsp/booter_unload-570.144.bin", {}},
    {"nvidia/ad102/gsp/bootloader-535.113.01.bin", {}},
    {"nvidia/ad102/gsp/bootloader-570.144.bin", {}},
    {"nvidia/ad102/gsp/scrubber-570.144.bin", {}},
    // nvfw_bin_hdr 0..0x18, RM_RISCV_UCODE_DESC 0x18..0x6c, data 0x6c..0x3106c; manifest,
    // monitor data and monitor code at data + 0, 0xa00, 0xb200, ending at data + 0x30a00.
    {"nvidia/gb202/gsp/bootloader-570.144.bin",
     {0, 0x18, 0x6c, 0x6c + 0xa00, 0x6c + 0xb200, 0x6c + 0x30a00, 0x3106c}},
    // Elf32_Ehdr 0..0x34, section headers 0x34..0x124, .shstrtab 0x124, hash 0x150,
    // signature 0x180, publickey 0x1e0, image 0x244..0x30c8c.
    {"nvidia/gb202/gsp/fmc-570.144.bin", {0, 0x34, 0x124, 0x14e, 0x150, 0x180, 0x1e0, 0x241, 0x244, 0x30c8c}},
};

std::vector<uint64_t> lengths_for(uint64_t size, const std::vector<uint64_t>& boundaries) {
    std::set<uint64_t> out;
    if (size < 64 * 1024) {
        for (uint64_t n = 0; n < size; ++n) out.insert(n);
    } else {
        constexpr uint64_t kSpread = 3000;
        for (uint64_t i = 0; i < kSpread; ++i) out.insert(size * i / kSpread);
        for (uint64_t b : boundaries)
            for (uint64_t n = b > 512 ? b - 512 : 0; n <= b + 512; ++n)
                if (n < size) out.insert(n);
    }
    return {out.begin(), out.end()};
}

}  // namespace

TEST_CASE("nvidia: every truncation of every real file is a FirmwareError", "[nvidia][truncation]") {
    for (const File& f : kFiles) {
        DYNAMIC_SECTION(f.path) {
            auto bytes = firmware_file(f.path);
            if (!bytes) return;
            const std::string base = std::string(f.path).substr(std::string(f.path).rfind('/') + 1);
            REQUIRE(nv::describe_file(reader_for(*bytes, base), base).has_value());
            const auto lengths = lengths_for(bytes->size(), f.boundaries);
            size_t failures = 0;
            // Longest first, everything past each cut poisoned for the sanitizer build.
            baregpu::test::PoisonedPrefixes prefixes(*bytes);
            for (auto it = lengths.rbegin(); it != lengths.rend(); ++it) {
                const uint64_t len = *it;
                const std::span<const std::byte> cut = prefixes.prefix(len);
                try {
                    const auto d = nv::describe_file(reader_for(cut, base), base);
                    // Below 4 bytes no magic can be read: "not an NVIDIA file" is the answer.
                    if (d.has_value() || len >= 4) {
                        ++failures;
                        FAIL_CHECK("length " << len << " of " << f.path << " parsed without error");
                    }
                } catch (const baregpu::FirmwareError& e) {
                    if (e.file() != base) {
                        ++failures;
                        FAIL_CHECK("error names " << e.file() << ", not " << base);
                    }
                }
                if (failures > 10) break;  // enough to see the pattern
            }
            INFO(lengths.size() << " lengths of " << f.path);
            CHECK(failures == 0);
        }
    }
}

TEST_CASE("nvidia: seeded byte mutations of every real file parse or fail cleanly", "[nvidia][truncation]") {
    for (const File& f : kFiles) {
        DYNAMIC_SECTION(f.path) {
            auto bytes = firmware_file(f.path);
            if (!bytes) return;
            const std::string base = std::string(f.path).substr(std::string(f.path).rfind('/') + 1);
            std::vector<std::byte> work = *bytes;
            std::mt19937_64 rng(0x6e76 + work.size());
            // Most mutations land in the first KiB, where every header and table of these
            // files lives; the rest anywhere.
            const uint64_t head = std::min<uint64_t>(work.size(), 0x400);
            size_t parsed = 0, rejected = 0;
            for (int i = 0; i < 3000; ++i) {
                std::vector<std::pair<uint64_t, std::byte>> undo;
                const int flips = 1 + static_cast<int>(rng() % 4);
                for (int k = 0; k < flips; ++k) {
                    const uint64_t at = (rng() % 4 != 0) ? rng() % head : rng() % work.size();
                    undo.emplace_back(at, work[at]);
                    work[at] = static_cast<std::byte>(rng());
                }
                try {
                    (void)nv::describe_file(reader_for(work, base), base);
                    ++parsed;
                } catch (const baregpu::FirmwareError&) {
                    ++rejected;
                }
                for (auto it = undo.rbegin(); it != undo.rend(); ++it) work[it->first] = it->second;
            }
            INFO(parsed << " parsed, " << rejected << " rejected");
            CHECK(parsed + rejected == 3000);
            CHECK(rejected > 0);  // a mutator that never breaks anything tests nothing
        }
    }
}
