// Every real file in firmware/, cut at every length and mutated at thousands of seeded
// random places, must give a FirmwareError or a valid parse: never another exception, a crash or
// (in the ASan+UBSan build) a read outside the bytes given. Mutations are made in memory and
// undone; no mutated copy is ever written (LICENSE.amdgpu and LICENCE.nvidia allow only
// unmodified redistribution).
#include "firmware-loader/identify.hpp"
#include "tests/firmware/firmware_files.hpp"
#include "tests/sanitizers.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <thread>

using namespace baregpu;
using namespace baregpu::fw;

namespace {

std::string basename_of(const std::string& relative) { return relative.substr(relative.rfind('/') + 1); }

// Parses bytes as the file named; true when it parsed, false on FirmwareError. Any other
// exception is rethrown with what was being parsed (`what`: "length 1234", "mutation 56").
bool parses(std::span<const std::byte> bytes, const std::string& name, const char* what = "", uint64_t n = 0) {
    try {
        (void)describe_firmware(ByteReader(bytes, name), name);
        return true;
    } catch (const FirmwareError&) {
        return false;
    } catch (const std::exception& e) {
        throw std::runtime_error(name + ", " + what + " " + std::to_string(n) + ": not a FirmwareError: " + e.what());
    }
}

bool full_length() {
    const char* mode = std::getenv("BAREGPU_LONG");
    return mode != nullptr && std::string(mode) == "full";
}

// Lengths where a parser's reads cluster: the start of the file and around every part the
// description names. Every one is parsed, and by default every 16th other one (the ASan build:
// every 64th); with BAREGPU_LONG=full every length (7.6 million parses, 45 s of CPU in the normal
// build).
std::set<uint64_t> dense_lengths(const Description& d, uint64_t size) {
    std::set<uint64_t> out;
    for (uint64_t l = 0; l <= std::min<uint64_t>(size, 4096); ++l) out.insert(l);
    for (const Part& p : d.parts)
        for (uint64_t edge : {p.offset, p.offset + p.size})
            for (uint64_t l = edge > 64 ? edge - 64 : 0; l <= edge + 64 && l <= size; ++l) out.insert(l);
    for (uint64_t l = size > 64 ? size - 64 : 0; l <= size; ++l) out.insert(l);
    return out;
}

using test::kAddressSanitizer;

// Parses the lengths in [0, size) of bytes that dense_lengths' comment names, split over the
// machine's cores (each length costs an exception's unwinding). Returns how many lengths parsed;
// rethrows the first error that was not a FirmwareError.
//
// Each worker parses prefixes of its own copy, longest first, the rest of the file poisoned
// (test::PoisonedPrefixes).
uint64_t truncations_that_parse(const std::vector<std::byte>& bytes, const std::string& name,
                                const std::set<uint64_t>& dense) {
    const uint64_t stride = full_length() ? 1 : kAddressSanitizer ? 64 : 16;
    std::set<uint64_t> wanted(dense.begin(), dense.lower_bound(bytes.size()));
    for (uint64_t length = 0; length < bytes.size(); length += stride) wanted.insert(length);
    const std::vector<uint64_t> lengths(wanted.rbegin(), wanted.rend());  // longest first
    unsigned workers = std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
    std::vector<uint64_t> accepted(workers);
    std::vector<std::exception_ptr> failures(workers);
    std::vector<std::thread> threads;
    for (unsigned w = 0; w < workers; ++w)
        threads.emplace_back([&, w] {
            try {
                test::PoisonedPrefixes mine(bytes);
                for (size_t i = w; i < lengths.size(); i += workers)
                    accepted[w] += parses(mine.prefix(lengths[i]), name, "length", lengths[i]);
            } catch (...) {
                failures[w] = std::current_exception();
            }
        });
    for (auto& t : threads) t.join();
    for (auto& f : failures)
        if (f) std::rethrow_exception(f);
    uint64_t sum = 0;
    for (uint64_t a : accepted) sum += a;
    return sum;
}

}  // namespace

TEST_CASE("truncations of every real firmware file (every length with BAREGPU_LONG=full) are refused cleanly or parse", "[robustness]") {
    REQUIRE_FIRMWARE();
    for (const std::string& relative : test::all_firmware_files()) {
        INFO(relative);
        std::vector<std::byte> bytes = test::firmware_bytes(relative);
        std::string name = basename_of(relative);
        Description whole = describe_firmware(ByteReader(bytes, name), name);  // the untouched file parses
        uint64_t accepted = truncations_that_parse(bytes, name, dense_lengths(whole, bytes.size()));
        CHECK_FALSE(parses({}, name));
        // amdgpu ucode headers and discovery binaries record their own length: no shorter file passes.
        if (relative.starts_with("amdgpu/")) CHECK(accepted == 0);
    }
}

TEST_CASE("thousands of seeded random mutations of every real file are refused cleanly or parse", "[robustness]") {
    REQUIRE_FIRMWARE();
    // The ASan build: 100 per file, a quarter of the normal build's, which check the same logic; what
    // only ASan can see (a read past the end) the firmware fuzzers look for too, ASan and UBSan
    // inside (tests/firmware/fuzz).
    const int per_file = full_length() ? 20000 : kAddressSanitizer ? 100 : 400;
    std::mt19937_64 rng(0x6261726567707521ull);  // fixed seed: a failure names its iteration and reproduces
    uint64_t total = 0, refused = 0;
    for (const std::string& relative : test::all_firmware_files()) {
        INFO(relative);
        std::vector<std::byte> bytes = test::firmware_bytes(relative);  // exact size: ASan guards its end
        std::string name = basename_of(relative);
        Description whole = describe_firmware(ByteReader(bytes, name), name);
        std::vector<uint64_t> hot;  // offsets header fields point at: where a flipped bit matters most
        for (const Part& p : whole.parts)
            for (uint64_t edge : {p.offset, p.offset + p.size})
                if (edge < bytes.size()) hot.push_back(edge);
        for (int i = 0; i < per_file; ++i) {
            // Where: the headers (first 512 bytes), near a part boundary, or anywhere.
            uint64_t where;
            switch (rng() % 4) {
            case 0:
            case 1: where = rng() % std::min<uint64_t>(bytes.size(), 512); break;
            case 2: where = hot.empty() ? rng() % bytes.size() : (hot[rng() % hot.size()] + rng() % 16) % bytes.size(); break;
            default: where = rng() % bytes.size(); break;
            }
            if (rng() % 2) where &= ~uint64_t{3};  // half the time, hit a whole aligned word
            // What: random bytes, or a 32-bit value parsers find interesting.
            const uint32_t interesting[] = {0, 1, 0xffffffff, 0x80000000, 0x7fffffff,
                                            static_cast<uint32_t>(bytes.size()), static_cast<uint32_t>(bytes.size() + 1),
                                            static_cast<uint32_t>(bytes.size() - 1), 0x10000};
            uint64_t width = std::min<uint64_t>(1 + rng() % 4, bytes.size() - where);
            std::byte saved[4];
            std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(where), width, saved);
            uint32_t value = rng() % 3 == 0 ? interesting[rng() % std::size(interesting)] : static_cast<uint32_t>(rng());
            for (uint64_t b = 0; b < width; ++b) bytes[where + b] = static_cast<std::byte>(value >> (8 * b));
            refused += !parses(bytes, name, "mutation", static_cast<uint64_t>(i));
            std::copy_n(saved, width, bytes.begin() + static_cast<std::ptrdiff_t>(where));
            ++total;
        }
    }
    // Some mutations must be caught, or the parsers check nothing.
    CHECK(refused > total / 10);
    WARN("mutations: " << total << ", of which " << refused << " were refused with a FirmwareError");
}
