// drivers/nv QMD builder. Every expected word is built here from bit positions re-read from
// NVIDIA open-gpu-doc classes/compute/ and typed again below (clc6c0qmd.h V03_00, clcbc0qmd.h V04_00,
// clcec0qmd.h V05_00) with a bit writer of the test's own — never from the builder's tables.
#include "base/error.hpp"
#include "drivers/nv/qmd.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace qmd_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::nv;

namespace {

// MW(hi:lo) = v into an expected image, one bit at a time (deliberately unlike the builder).
void mw(std::vector<uint32_t>& w, unsigned hi, unsigned lo, uint64_t v) {
    for (unsigned b = lo; b <= hi; ++b) {
        const uint32_t bit = static_cast<uint32_t>((v >> (b - lo)) & 1);
        w[b / 32] = (w[b / 32] & ~(1u << (b % 32))) | (bit << (b % 32));
    }
}

std::vector<uint32_t> words_of(const Qmd& q) { return {q.words().begin(), q.words().end()}; }

constexpr uint64_t kProgram = 0x0001'2345'6780ull;  // 128-byte aligned, above 4 GiB
constexpr uint64_t kCbuf0 = 0x0000'7fff'0040ull;    // 64-byte aligned
constexpr uint64_t kSignal = 0x0000'00a1'2340'0010ull;
constexpr uint64_t kNextQmd = 0x0000'0012'3456'7800ull;

}  // namespace

TEST_CASE("QMD sizes and version words", "[nv][qmd]") {
    Qmd v3(QmdVersion::v03_00), v4(QmdVersion::v04_00), v5(QmdVersion::v05_00);
    CHECK(v3.size_bytes() == 256);  // MW(2047:2016) is the last V03 field
    CHECK(v4.size_bytes() == 384);  // MW(3071:3071)
    CHECK(v5.size_bytes() == 384);
    // V03: QMD_VERSION MW(579:576) = 0, QMD_MAJOR_VERSION MW(583:580) = 3 -> word 18 = 0x30.
    std::vector<uint32_t> e3(64, 0);
    e3[18] = 0x30;
    CHECK(words_of(v3) == e3);
    // V04: QMD_MINOR MW(579:576) = 0, MAJOR MW(583:580) = 4; QMD_TYPE MW(25:23) = GRID_CTA (2).
    std::vector<uint32_t> e4(96, 0);
    e4[18] = 0x40;
    e4[0] = 2u << 23;
    CHECK(words_of(v4) == e4);
    // V05: QMD_MINOR MW(467:464), MAJOR MW(471:468) = 5 -> word 14 bits 23:16 = 0x50; QMD_TYPE MW(153:151).
    std::vector<uint32_t> e5(96, 0);
    e5[14] = 0x50u << 16;
    e5[4] = 2u << 23;
    CHECK(words_of(v5) == e5);
}

static void build_launch(Qmd& q) {
    q.set_grid(0x12345, 0x678, 0x9);
    q.set_block(256, 2, 3);
    q.set_shared_memory_size(0x3000);
    q.set_sm_config_shared_mem(9, 0x1a, 17);
    q.set_register_count(0x7f);
    q.set_barrier_count(1);
    q.set_program_address(kProgram);
    q.set_constant_buffer(0, kCbuf0, 0x1000);
    q.set_release_semaphore(0, kSignal, 0x1122334455667788ull);
    q.invalidate_caches();
    q.set_dependent_qmd0(kNextQmd);
}

TEST_CASE("QMD V03_00 launch, word for word (clc6c0qmd.h)", "[nv][qmd]") {
    Qmd q(QmdVersion::v03_00);
    build_launch(q);
    std::vector<uint32_t> e(64, 0);
    mw(e, 583, 580, 3);
    mw(e, 415, 384, 0x12345);    // CTA_RASTER_WIDTH
    mw(e, 431, 416, 0x678);      // CTA_RASTER_HEIGHT
    mw(e, 463, 448, 9);          // CTA_RASTER_DEPTH
    mw(e, 607, 592, 256);        // CTA_THREAD_DIMENSION0
    mw(e, 623, 608, 2);          // CTA_THREAD_DIMENSION1
    mw(e, 639, 624, 3);          // CTA_THREAD_DIMENSION2
    mw(e, 561, 544, 0x3000);     // SHARED_MEMORY_SIZE (bytes)
    mw(e, 567, 562, 9);          // MIN_SM_CONFIG_SHARED_MEM_SIZE
    mw(e, 574, 569, 0x1a);       // MAX_SM_CONFIG_SHARED_MEM_SIZE
    mw(e, 662, 657, 17);         // TARGET_SM_CONFIG_SHARED_MEM_SIZE
    mw(e, 656, 648, 0x7f);       // REGISTER_COUNT_V
    mw(e, 767, 763, 1);          // BARRIER_COUNT
    mw(e, 1567, 1536, 0x23456780);  // PROGRAM_ADDRESS_LOWER
    mw(e, 1584, 1568, 0x1);         // PROGRAM_ADDRESS_UPPER
    mw(e, 1055, 1024, 0x7fff0040);  // CONSTANT_BUFFER_ADDR_LOWER(0)
    mw(e, 1072, 1056, 0);           // CONSTANT_BUFFER_ADDR_UPPER(0)
    mw(e, 1087, 1075, 0x100);       // CONSTANT_BUFFER_SIZE_SHIFTED4(0)
    mw(e, 640, 640, 1);             // CONSTANT_BUFFER_VALID(0)
    mw(e, 799, 768, 0x23400010);    // RELEASE0_ADDRESS_LOWER
    mw(e, 807, 800, 0xa1);          // RELEASE0_ADDRESS_UPPER (8 bits)
    mw(e, 863, 832, 0x55667788);    // RELEASE0_PAYLOAD_LOWER
    mw(e, 895, 864, 0x11223344);    // RELEASE0_PAYLOAD_UPPER
    mw(e, 823, 823, 1);             // RELEASE0_ENABLE
    mw(e, 829, 829, 1);             // RELEASE0_PAYLOAD64B
    mw(e, 831, 830, 0);             // RELEASE0_STRUCTURE_SIZE = SEMAPHORE_FOUR_WORDS
    for (unsigned b = 186; b <= 191; ++b) mw(e, b, b, 1);  // INVALIDATE_*_CACHE
    mw(e, 511, 480, 0x12345678);    // DEPENDENT_QMD0_POINTER = va >> 8
    mw(e, 512, 512, 1);             // DEPENDENT_QMD0_ENABLE
    mw(e, 515, 513, 1);             // DEPENDENT_QMD0_ACTION_QMD_SCHEDULE
    mw(e, 516, 516, 1);             // DEPENDENT_QMD0_PREFETCH
    CHECK(words_of(q) == e);
    // Spot checks in plain words, so a fault in mw() itself would show too.
    CHECK(q.words()[12] == 0x12345u);
    CHECK(q.words()[48] == 0x23456780u);
    CHECK(q.words()[49] == 0x1u);
    CHECK(q.words()[15] == 0x12345678u);
}

TEST_CASE("QMD V04_00 launch, word for word (clcbc0qmd.h)", "[nv][qmd]") {
    Qmd q(QmdVersion::v04_00);
    build_launch(q);
    std::vector<uint32_t> e(96, 0);
    mw(e, 583, 580, 4);
    mw(e, 25, 23, 2);                // QMD_TYPE_GRID_CTA
    mw(e, 1055, 1024, 0x12345);      // GRID_WIDTH
    mw(e, 1071, 1056, 0x678);        // GRID_HEIGHT
    mw(e, 1103, 1088, 9);            // GRID_DEPTH
    mw(e, 1167, 1152, 256);
    mw(e, 1183, 1168, 2);
    mw(e, 1199, 1184, 3);
    mw(e, 601, 584, 0x3000);         // SHARED_MEMORY_SIZE
    mw(e, 613, 608, 9);
    mw(e, 619, 614, 0x1a);
    mw(e, 625, 620, 17);
    mw(e, 1208, 1200, 0x7f);         // REGISTER_COUNT
    mw(e, 1215, 1211, 1);            // BARRIER_COUNT
    mw(e, 1247, 1216, 0x23456780);   // PROGRAM_ADDRESS_LOWER
    mw(e, 1272, 1248, 0x1);          // PROGRAM_ADDRESS_UPPER
    mw(e, 1567, 1536, (kCbuf0 >> 6) & 0xffffffff);  // CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)
    mw(e, 1586, 1568, kCbuf0 >> 38);                // CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)
    mw(e, 1599, 1587, 0x100);
    mw(e, 416, 416, 1);              // CONSTANT_BUFFER_VALID(0)
    mw(e, 671, 640, 0x23400010);     // RELEASE_SEMAPHORE0_ADDR_LOWER
    mw(e, 696, 672, 0xa1);           // RELEASE_SEMAPHORE0_ADDR_UPPER
    mw(e, 735, 704, 0x55667788);
    mw(e, 767, 736, 0x11223344);
    mw(e, 320, 320, 1);              // RELEASE_ENABLE(0)
    mw(e, 332, 332, 1);              // RELEASE_PAYLOAD64B(0)
    for (unsigned b = 602; b <= 607; ++b) mw(e, b, b, 1);
    mw(e, 479, 448, 0x12345678);     // DEPENDENT_QMD0_POINTER
    mw(e, 368, 368, 1);              // DEPENDENT_QMD_ENABLE(0)
    mw(e, 371, 369, 1);              // DEPENDENT_QMD_ACTION(0) = SCHEDULE
    mw(e, 372, 372, 1);              // DEPENDENT_QMD_PREFETCH(0)
    CHECK(words_of(q) == e);
}

TEST_CASE("QMD V05_00 launch, word for word (clcec0qmd.h)", "[nv][qmd]") {
    Qmd q(QmdVersion::v05_00);
    build_launch(q);
    std::vector<uint32_t> e(96, 0);
    mw(e, 471, 468, 5);
    mw(e, 153, 151, 2);
    mw(e, 1279, 1248, 0x12345);      // GRID_WIDTH
    mw(e, 1295, 1280, 0x678);
    mw(e, 1327, 1312, 9);
    mw(e, 1103, 1088, 256);          // CTA_THREAD_DIMENSION0
    mw(e, 1119, 1104, 2);
    mw(e, 1127, 1120, 3);            // CTA_THREAD_DIMENSION2 (8 bits)
    mw(e, 1162, 1152, 0x3000 >> 7);  // SHARED_MEMORY_SIZE_SHIFTED7
    mw(e, 1168, 1163, 9);
    mw(e, 1174, 1169, 0x1a);
    mw(e, 1180, 1175, 17);
    mw(e, 1136, 1128, 0x7f);         // REGISTER_COUNT
    mw(e, 1141, 1137, 1);            // BARRIER_COUNT
    mw(e, 1055, 1024, (kProgram >> 4) & 0xffffffff);  // PROGRAM_ADDRESS_LOWER_SHIFTED4
    mw(e, 1076, 1056, kProgram >> 36);                // PROGRAM_ADDRESS_UPPER_SHIFTED4
    mw(e, 1375, 1344, (kCbuf0 >> 6) & 0xffffffff);
    mw(e, 1394, 1376, kCbuf0 >> 38);
    mw(e, 1407, 1395, 0x100);
    mw(e, 1856, 1856, 1);            // CONSTANT_BUFFER_VALID(0)
    mw(e, 511, 480, 0x23400010);     // RELEASE_SEMAPHORE0_ADDR_LOWER
    mw(e, 536, 512, 0xa1);
    mw(e, 575, 544, 0x55667788);
    mw(e, 607, 576, 0x11223344);
    mw(e, 288, 288, 1);              // RELEASE_ENABLE(0)
    mw(e, 300, 300, 1);              // RELEASE_PAYLOAD64B(0)
    for (unsigned b = 472; b <= 477; ++b) mw(e, b, b, 1);
    mw(e, 415, 384, 0x12345678);     // DEPENDENT_QMD0_POINTER
    mw(e, 336, 336, 1);
    mw(e, 339, 337, 1);
    mw(e, 340, 340, 1);
    CHECK(words_of(q) == e);
    CHECK(q.words()[32] == static_cast<uint32_t>(kProgram >> 4));
}

TEST_CASE("QMD constant buffer i and release 1 use the header's strides", "[nv][qmd]") {
    Qmd q3(QmdVersion::v03_00);
    q3.set_constant_buffer(3, 0x1000, 0x20);
    CHECK(q3.get(1055 + 3 * 64, 1024 + 3 * 64) == 0x1000);  // CONSTANT_BUFFER_ADDR_LOWER(3)
    CHECK(q3.get(1087 + 3 * 64, 1075 + 3 * 64) == 2);       // SIZE_SHIFTED4(3)
    CHECK(q3.get(643, 643) == 1);                           // VALID(3) = 640 + 3
    q3.set_release_semaphore(1, 0x2000, 7, false, SemaphoreSize::one_word);
    CHECK(q3.words()[28] == 0x2000);                        // RELEASE1_ADDRESS_LOWER MW(927:896)
    CHECK(q3.get(951, 951) == 1);                           // RELEASE1_ENABLE
    CHECK(q3.get(959, 958) == 1);                           // RELEASE1_STRUCTURE_SIZE ONE_WORD
    CHECK(q3.get(957, 957) == 0);                           // RELEASE1_PAYLOAD64B
    Qmd q5(QmdVersion::v05_00);
    q5.set_constant_buffer(7, 0x40, 0x10);
    CHECK(q5.get(1375 + 7 * 64, 1344 + 7 * 64) == 1);       // 0x40 >> 6
    CHECK(q5.get(1856 + 7 * 4, 1856 + 7 * 4) == 1);         // VALID(7)
    q5.set_release_semaphore(1, 0x3000, 9);
    CHECK(q5.get(304, 304) == 1);                           // RELEASE_ENABLE(1) = 288 + 16
    CHECK(q5.words()[24] == 0x3000);                        // RELEASE_SEMAPHORE1_ADDR_LOWER MW(799:768)

    // Release 2: V03 RELEASE2_* (MW(1695:1664) ...), V04 RELEASE_ENABLE(2) = 320 + 32, V05 288 + 32.
    q3.set_release_semaphore(2, 0x12'0000'4000, 0x5);
    CHECK(q3.words()[52] == 0x4000);                        // RELEASE2_ADDRESS_LOWER MW(1695:1664)
    CHECK((q3.words()[53] & 0xff) == 0x12);                 // RELEASE2_ADDRESS_UPPER MW(1703:1696)
    CHECK(q3.words()[54] == 5);                             // RELEASE2_PAYLOAD_LOWER MW(1759:1728)
    CHECK((q3.words()[53] >> 23) == (1u | 1u << 6));        // ENABLE 1719 (bit 23), PAYLOAD64B 1725 (bit 29)
    Qmd q4(QmdVersion::v04_00);
    q4.set_release_semaphore(2, 0x5000, 6);
    CHECK(q4.words()[28] == 0x5000);                        // RELEASE_SEMAPHORE2_ADDR_LOWER MW(927:896)
    CHECK(q4.words()[30] == 6);                             // RELEASE_SEMAPHORE2_PAYLOAD_LOWER MW(991:960)
    CHECK(q4.words()[11] == (1u << 0 | 1u << 12));          // RELEASE_ENABLE(2) 352, RELEASE_PAYLOAD64B(2) 364
    q5.set_release_semaphore(2, 0x6000, 7);
    CHECK(q5.words()[28] == 0x6000);
    CHECK(q5.words()[9] == (1u << 16 | 1u << 28));          // RELEASE_ENABLE(1) 304, RELEASE_PAYLOAD64B(1) 316
    CHECK(q5.words()[10] == (1u << 0 | 1u << 12));          // RELEASE_ENABLE(2) 320, RELEASE_PAYLOAD64B(2) 332
    CHECK_THROWS_AS(q5.set_release_semaphore(3, 0x6000, 7), Error);
}

TEST_CASE("QMD generic writer: straddling fields, read back, out of range", "[nv][qmd]") {
    Qmd q(QmdVersion::v03_00);
    q.set(47, 16, 0xdeadbeef);  // crosses words 0 and 1
    CHECK(q.words()[0] == 0xbeef0000u);
    CHECK((q.words()[1] & 0xffff) == 0xdeadu);
    CHECK(q.get(47, 16) == 0xdeadbeef);
    CHECK_THROWS_AS(q.set(3, 0, 16), Error);          // 16 needs 5 bits
    CHECK_THROWS_AS(q.set(2048, 2048, 1), Error);     // past a 256-byte QMD
    CHECK_THROWS_AS(q.set(0, 1, 0), Error);           // hi < lo
    CHECK(q.words()[0] == 0xbeef0000u);               // nothing written by a refused set
}

TEST_CASE("QMD named fields refuse values that do not fit", "[nv][qmd]") {
    Qmd q3(QmdVersion::v03_00), q5(QmdVersion::v05_00);
    CHECK_THROWS_AS(q3.set_grid(1, 0x10000, 1), Error);         // CTA_RASTER_HEIGHT is 16 bits
    CHECK_THROWS_AS(q5.set_block(1, 1, 256), Error);            // V05 CTA_THREAD_DIMENSION2 is 8 bits
    CHECK_NOTHROW(q3.set_block(1, 1, 256));                     // ... V03's is 16
    CHECK_THROWS_AS(q3.set_register_count(512), Error);         // 9 bits
    CHECK_THROWS_AS(q3.set_barrier_count(32), Error);           // 5 bits
    CHECK_THROWS_AS(q3.set_shared_memory_size(1u << 18), Error);  // 18 bits
    CHECK_THROWS_AS(q5.set_shared_memory_size(100), Error);     // V05: a multiple of 128
    CHECK_THROWS_AS(q5.set_program_address(0x1008), Error);     // V05: 16-byte aligned
    CHECK_THROWS_AS(q3.set_program_address(1ull << 49), Error); // V03: 17 upper bits
    CHECK_NOTHROW(q5.set_program_address((1ull << 57) - 16));   // V05: 21 upper bits of va >> 4
    CHECK_THROWS_AS(q5.set_program_address(1ull << 57), Error);
    CHECK_THROWS_AS(q3.set_release_semaphore(0, 1ull << 40, 1), Error);  // V03 release: 8 upper bits
    CHECK_NOTHROW(Qmd(QmdVersion::v04_00).set_release_semaphore(0, 1ull << 40, 1));  // 25 in V04
    CHECK_THROWS_AS(q5.set_constant_buffer(0, 0x20, 0x10), Error);  // V05: 64-byte aligned
    CHECK_THROWS_AS(q3.set_constant_buffer(0, 0x20, 0x18), Error);  // size: multiple of 16
    CHECK_THROWS_AS(q3.set_constant_buffer(8, 0x20, 0x10), Error);
    CHECK_THROWS_AS(q3.set_dependent_qmd0(0x1080), Error);      // 256-byte aligned
    CHECK_THROWS_AS(q3.set_dependent_qmd0(1ull << 40), Error);  // pointer is 32 bits of va >> 8
    CHECK_THROWS_AS(q3.set(q3.layout().qmd_type, 1), Error);    // V03 has no QMD_TYPE
}

}  // namespace qmd_test
