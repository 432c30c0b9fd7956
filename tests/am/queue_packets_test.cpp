// drivers/am PM4, SDMA and MQD encoders. Every expected word is built here from the public
// headers' own definitions, re-stated below with their source, not from the encoders' constants:
//   nvd.h                    Linux drivers/gpu/drm/amd/amdgpu/nvd.h
//   soc15d.h                 Linux drivers/gpu/drm/amd/amdgpu/soc15d.h (ACQUIRE_MEM GCR_CNTL)
//   sdma_v6_0_0_pkt_open.h   Linux drivers/gpu/drm/amd/amdgpu/sdma_v6_0_0_pkt_open.h
//   v11_structs.h            Linux drivers/gpu/drm/amd/include/v11_structs.h
//   gc_11_0_0_offset.h       Linux drivers/gpu/drm/amd/include/asic_reg/gc/gc_11_0_0_offset.h
#include "base/error.hpp"
#include "drivers/am/mqd.hpp"
#include "drivers/am/pm4.hpp"
#include "drivers/am/sdma_packets.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

namespace queue_packets_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::am;

namespace {
// nvd.h
constexpr uint32_t PACKET3(uint32_t op, uint32_t n) { return (3u << 30) | ((op & 0xFF) << 8) | ((n & 0x3FFF) << 16); }
constexpr uint32_t PACKET3_NOP = 0x10, PACKET3_DISPATCH_DIRECT = 0x15, PACKET3_WAIT_REG_MEM = 0x3C,
                   PACKET3_INDIRECT_BUFFER = 0x3F, PACKET3_EVENT_WRITE = 0x46, PACKET3_RELEASE_MEM = 0x49,
                   PACKET3_ACQUIRE_MEM = 0x58, PACKET3_SET_SH_REG = 0x76, PACKET3_SET_UCONFIG_REG = 0x79,
                   PACKET3_WAIT_REG_MEM64 = 0x93;
constexpr uint32_t WAIT_REG_MEM_FUNCTION(uint32_t x) { return x << 0; }
constexpr uint32_t WAIT_REG_MEM_MEM_SPACE(uint32_t x) { return x << 4; }
constexpr uint32_t INDIRECT_BUFFER_VALID = 1u << 23;
constexpr uint32_t EVENT_TYPE(uint32_t x) { return x << 0; }
constexpr uint32_t EVENT_INDEX(uint32_t x) { return x << 8; }
constexpr uint32_t PACKET3_RELEASE_MEM_EVENT_TYPE(uint32_t x) { return x << 0; }
constexpr uint32_t PACKET3_RELEASE_MEM_EVENT_INDEX(uint32_t x) { return x << 8; }
constexpr uint32_t PACKET3_RELEASE_MEM_GCR_GLM_WB = 1u << 12, PACKET3_RELEASE_MEM_GCR_GLM_INV = 1u << 13,
                   PACKET3_RELEASE_MEM_GCR_GL2_WB = 1u << 21, PACKET3_RELEASE_MEM_GCR_SEQ = 1u << 22;
constexpr uint32_t PACKET3_RELEASE_MEM_CACHE_POLICY(uint32_t x) { return x << 25; }
constexpr uint32_t PACKET3_RELEASE_MEM_DATA_SEL(uint32_t x) { return x << 29; }
constexpr uint32_t PACKET3_RELEASE_MEM_INT_SEL(uint32_t x) { return x << 24; }
constexpr uint32_t SET_SH_REG_START = 0x2c00, SET_UCONFIG_REG_START = 0xc000;
// sienna_cichlid_ip_offset.h
constexpr uint32_t GC_BASE__INST0_SEG0 = 0x1260, GC_BASE__INST0_SEG1 = 0xA000;
// gc_11_0_0_offset.h
constexpr uint32_t regCOMPUTE_PGM_LO = 0x1bac, regCOMPUTE_PGM_RSRC1 = 0x1bb2, regCOMPUTE_PGM_RSRC3 = 0x1bc8,
                   regCOMPUTE_TMPRING_SIZE = 0x1bb8, regCOMPUTE_DISPATCH_SCRATCH_BASE_LO = 0x1bb0,
                   regCOMPUTE_RESTART_X = 0x1bbb, regCOMPUTE_USER_DATA_0 = 0x1be0,
                   regCOMPUTE_RESOURCE_LIMITS = 0x1bb5, regCOMPUTE_START_X = 0x1ba4;
constexpr uint32_t sh(uint32_t reg) { return reg + GC_BASE__INST0_SEG0 - SET_SH_REG_START; }
// soc15d.h PACKET3_ACQUIRE_MEM_GCR_CNTL_*
constexpr uint32_t GCR_GLI_INV(uint32_t x) { return x << 0; }
constexpr uint32_t GCR_GLM_WB(uint32_t x) { return x << 4; }
constexpr uint32_t GCR_GLM_INV(uint32_t x) { return x << 5; }
constexpr uint32_t GCR_GLK_WB(uint32_t x) { return x << 6; }
constexpr uint32_t GCR_GLK_INV(uint32_t x) { return x << 7; }
constexpr uint32_t GCR_GLV_INV(uint32_t x) { return x << 8; }
constexpr uint32_t GCR_GL1_INV(uint32_t x) { return x << 9; }
constexpr uint32_t GCR_GL2_INV(uint32_t x) { return x << 14; }
constexpr uint32_t GCR_GL2_WB(uint32_t x) { return x << 15; }
// sdma_v6_0_0_pkt_open.h
constexpr uint32_t SDMA_OP_NOP = 0, SDMA_OP_COPY = 1, SDMA_OP_WRITE = 2, SDMA_OP_INDIRECT = 4, SDMA_OP_FENCE = 5,
                   SDMA_OP_POLL_REGMEM = 8, SDMA_OP_TIMESTAMP = 13, SDMA_SUBOP_COPY_LINEAR = 0,
                   SDMA_SUBOP_TIMESTAMP_GET_GLOBAL = 2;
constexpr uint32_t SDMA_PKT_HEADER_OP(uint32_t x) { return (x & 0xFF) << 0; }
constexpr uint32_t SDMA_PKT_HEADER_SUB_OP(uint32_t x) { return (x & 0xFF) << 8; }
constexpr uint32_t SDMA_PKT_COPY_LINEAR_COUNT_COUNT(uint32_t x) { return (x & 0x3FFFFFFF) << 0; }
constexpr uint32_t SDMA_PKT_FENCE_HEADER_MTYPE(uint32_t x) { return (x & 7) << 16; }
constexpr uint32_t SDMA_PKT_POLL_REGMEM_HEADER_FUNC(uint32_t x) { return (x & 7) << 28; }
constexpr uint32_t SDMA_PKT_POLL_REGMEM_HEADER_MEM_POLL(uint32_t x) { return (x & 1) << 31; }
constexpr uint32_t SDMA_PKT_POLL_REGMEM_DW5_INTERVAL(uint32_t x) { return (x & 0xFFFF) << 0; }
constexpr uint32_t SDMA_PKT_POLL_REGMEM_DW5_RETRY_COUNT(uint32_t x) { return (x & 0xFFF) << 16; }
constexpr uint32_t SDMA_PKT_INDIRECT_HEADER_VMID(uint32_t x) { return (x & 0xF) << 16; }

using Words = std::vector<uint32_t>;
Words span_words(std::span<const uint32_t> s) { return Words(s.begin(), s.end()); }
}  // namespace

TEST_CASE("PM4 headers, NOP, SET_SH_REG and SET_UCONFIG_REG", "[pm4]") {
    std::array<uint32_t, 64> buf{};
    pm4::Pm4Writer w(buf);
    w.nop(1).nop(3).set_sh_reg(regCOMPUTE_PGM_LO, {0x1234, 0x5}).set_uconfig_reg(0x2200, {7});
    CHECK(span_words(w.words()) == Words{PACKET3(PACKET3_NOP, 0x3FFF), PACKET3(PACKET3_NOP, 1), 0, 0,
                                         PACKET3(PACKET3_SET_SH_REG, 2), 0x20c, 0x1234, 0x5,
                                         PACKET3(PACKET3_SET_UCONFIG_REG, 1), 0x2200 + GC_BASE__INST0_SEG1 - SET_UCONFIG_REG_START, 7});
    // Linux nvd.h PACKET3_SET_SH_REG_START 0x2c00: COMPUTE_PGM_LO = 0x1bac + 0x1260 = 0x2e0c -> offset 0x20c.
    CHECK(sh(regCOMPUTE_PGM_LO) == 0x20c);
}

TEST_CASE("SET_SH_REG refuses registers outside the SH range", "[pm4]") {
    std::array<uint32_t, 16> buf{};
    pm4::Pm4Writer w(buf);
    // 0x2c00 - 0x1260 = 0x19a0 is the first SH register; 0x3000 - 0x1260 = 0x1da0 is one past the last.
    CHECK_NOTHROW(w.set_sh_reg(0x19a0, {1}));
    CHECK_NOTHROW(w.set_sh_reg(0x1d9f, {1}));
    CHECK_THROWS_AS(w.set_sh_reg(0x199f, {1}), Error);
    CHECK_THROWS_AS(w.set_sh_reg(0x1da0, {1}), Error);
    CHECK_THROWS_WITH(w.set_sh_reg(0x1d9f, {1, 2}), Catch::Contains("outside the SH range"));
    CHECK_THROWS_AS(w.set_uconfig_reg(0x1fa9, {1}), Error);  // a BASE_IDX 0 register is no UCONFIG register
    CHECK(w.size() == 6);                                    // the refused packets wrote nothing
    std::array<uint32_t, 3> small{};
    pm4::Pm4Writer full(small);
    CHECK_THROWS_WITH(full.set_sh_reg(regCOMPUTE_PGM_LO, {1, 2}), Catch::Contains("buffer full"));
}

TEST_CASE("PM4 RELEASE_MEM, WAIT_REG_MEM(64), ACQUIRE_MEM, INDIRECT_BUFFER, EVENT_WRITE, DISPATCH_DIRECT", "[pm4]") {
    std::array<uint32_t, 128> buf{};
    pm4::Pm4Writer w(buf);
    SECTION("RELEASE_MEM: end-of-pipe 32-bit signal with the GC 11 fence flush") {
        w.release_mem({pm4::release_mem_flush(pm4::GcGen::gc11), pm4::DataSel::low32, pm4::IntSel::none,
                       0x2000'0000'1000, 42, 0});
        uint32_t dw1 = PACKET3_RELEASE_MEM_GCR_SEQ | PACKET3_RELEASE_MEM_GCR_GL2_WB | PACKET3_RELEASE_MEM_GCR_GLM_INV |
                       PACKET3_RELEASE_MEM_GCR_GLM_WB | PACKET3_RELEASE_MEM_CACHE_POLICY(3) |
                       PACKET3_RELEASE_MEM_EVENT_TYPE(0x14) |
                       PACKET3_RELEASE_MEM_EVENT_INDEX(5);
        CHECK(span_words(w.words()) == Words{PACKET3(PACKET3_RELEASE_MEM, 6), dw1, PACKET3_RELEASE_MEM_DATA_SEL(1),
                                             0x1000, 0x2000, 42, 0, 0});
    }
    SECTION("RELEASE_MEM: GC 12 flush, 64-bit data with interrupt, and the GPU clock timestamp") {
        w.release_mem({pm4::release_mem_flush(pm4::GcGen::gc12), pm4::DataSel::data64,
                       pm4::IntSel::interrupt_after_write, 0x10008, 0x1'0000'0002, 7});
        w.release_mem({0, pm4::DataSel::gpu_clock, pm4::IntSel::none, 0x10010, 0, 0});
        uint32_t ev = PACKET3_RELEASE_MEM_EVENT_TYPE(0x14) | PACKET3_RELEASE_MEM_EVENT_INDEX(5);
        CHECK(span_words(w.words()) ==
              Words{PACKET3(PACKET3_RELEASE_MEM, 6),
                    PACKET3_RELEASE_MEM_GCR_SEQ | PACKET3_RELEASE_MEM_GCR_GL2_WB | PACKET3_RELEASE_MEM_CACHE_POLICY(3) | ev,
                    PACKET3_RELEASE_MEM_DATA_SEL(2) | PACKET3_RELEASE_MEM_INT_SEL(2), 0x10008, 0, 2, 1, 7,
                    PACKET3(PACKET3_RELEASE_MEM, 6), ev, PACKET3_RELEASE_MEM_DATA_SEL(3), 0x10010, 0, 0, 0, 0});
        CHECK_THROWS_AS(w.release_mem({0, pm4::DataSel::data64, pm4::IntSel::none, 0x10004, 0, 0}), Error);
    }
    SECTION("WAIT_REG_MEM memory GE / EQ / NE and the 64-bit WAIT_REG_MEM64") {
        w.wait_reg_mem(0x5000, pm4::Compare::ge, 9).wait_reg_mem(0x5004, pm4::Compare::eq, 1, 0xff, 10);
        w.wait_reg_mem(0x5008, pm4::Compare::ne, 0);
        w.wait_reg_mem64(0x1'0000'5010, pm4::Compare::ge, 0x0000'0003'8000'0001);
        uint32_t mem = WAIT_REG_MEM_MEM_SPACE(1);
        CHECK(span_words(w.words()) ==
              Words{PACKET3(PACKET3_WAIT_REG_MEM, 5), WAIT_REG_MEM_FUNCTION(5) | mem, 0x5000, 0, 9, 0xffffffff, 4,
                    PACKET3(PACKET3_WAIT_REG_MEM, 5), WAIT_REG_MEM_FUNCTION(3) | mem, 0x5004, 0, 1, 0xff, 10,
                    PACKET3(PACKET3_WAIT_REG_MEM, 5), WAIT_REG_MEM_FUNCTION(4) | mem, 0x5008, 0, 0, 0xffffffff, 4,
                    PACKET3(PACKET3_WAIT_REG_MEM64, 7), WAIT_REG_MEM_FUNCTION(5) | mem, 0x5010, 1, 0x80000001, 3,
                    0xffffffff, 0xffffffff, 4});
        CHECK_THROWS_AS(w.wait_reg_mem64(0x5004, pm4::Compare::ge, 1), Error);  // 64-bit compare needs 8-byte alignment
    }
    SECTION("ACQUIRE_MEM with every GCR_CNTL bit, INDIRECT_BUFFER, CS_PARTIAL_FLUSH, DISPATCH_DIRECT") {
        w.acquire_mem().indirect_buffer(0x7'0000'0100, 40, 3).cs_partial_flush();
        w.dispatch_direct({4, 2, 1}, pm4::kInitiatorComputeShaderEn);
        uint32_t gcr = GCR_GLI_INV(1) | GCR_GLM_WB(1) | GCR_GLM_INV(1) | GCR_GLK_WB(1) | GCR_GLK_INV(1) |
                       GCR_GLV_INV(1) | GCR_GL1_INV(1) | GCR_GL2_INV(1) | GCR_GL2_WB(1);
        CHECK(span_words(w.words()) ==
              Words{PACKET3(PACKET3_ACQUIRE_MEM, 6), 0, 0xffffffff, 0xffffffff, 0, 0, 0xA, gcr,
                    PACKET3(PACKET3_INDIRECT_BUFFER, 2), 0x100, 7, 40 | INDIRECT_BUFFER_VALID | 3u << 24,
                    PACKET3(PACKET3_EVENT_WRITE, 0), EVENT_TYPE(7) | EVENT_INDEX(4),
                    PACKET3(PACKET3_DISPATCH_DIRECT, 3), 4, 2, 1, 1});
        CHECK_THROWS_AS(w.indirect_buffer(0x102, 4), Error);
        CHECK_THROWS_AS(w.indirect_buffer(0x100, 0), Error);
    }
}

TEST_CASE("PM4 compute dispatch sequence (tinygrad AMDComputeQueue.exec)", "[pm4]") {
    pm4::KernelDispatch k;
    k.gen = pm4::GcGen::gc11;
    k.code_address = 0x2000'0010'0100;
    k.rsrc1 = 0x60af0000;
    k.rsrc2 = 0x1390;
    k.rsrc3 = 0;
    k.lds_bytes = 1000;  // 2 blocks of 512
    k.scratch_address = 0x2000'0100'0000;
    k.tmpring_size = 0x00200010;
    k.user_sgpr_private_segment_buffer = true;
    k.user_sgpr_dispatch_ptr = true;
    k.dispatch_packet_address = 0x2000'0020'0040;
    k.kernarg_address = 0x2000'0020'0000;
    k.grid = {16, 8, 1};
    k.block = {64, 2, 1};
    k.wave32 = true;
    std::array<uint32_t, 128> buf{};
    pm4::Pm4Writer w(buf);
    w.dispatch(k);
    Words expect = {
        // 1 ACQUIRE_MEM: GLM/GLK/GLV/GL1 only (gli = 0, gl2 = 0)
        PACKET3(PACKET3_ACQUIRE_MEM, 6), 0, 0xffffffff, 0xffffffff, 0, 0, 0xA,
        GCR_GLM_WB(1) | GCR_GLM_INV(1) | GCR_GLK_WB(1) | GCR_GLK_INV(1) | GCR_GLV_INV(1) | GCR_GL1_INV(1),
        // 2 COMPUTE_PGM_LO/HI = code >> 8
        PACKET3(PACKET3_SET_SH_REG, 2), sh(regCOMPUTE_PGM_LO), 0x0000'1001, 0x20,
        // 3 RSRC1 (| PRIV bit 20 on GC 11), RSRC2 (| LDS blocks << 15), RSRC3, TMPRING_SIZE
        PACKET3(PACKET3_SET_SH_REG, 2), sh(regCOMPUTE_PGM_RSRC1), 0x60af0000 | 1u << 20, 0x1390 | 2u << 15,
        PACKET3(PACKET3_SET_SH_REG, 1), sh(regCOMPUTE_PGM_RSRC3), 0,
        PACKET3(PACKET3_SET_SH_REG, 1), sh(regCOMPUTE_TMPRING_SIZE), 0x00200010,
        // 4 DISPATCH_SCRATCH_BASE_LO/HI = scratch >> 8
        PACKET3(PACKET3_SET_SH_REG, 2), sh(regCOMPUTE_DISPATCH_SCRATCH_BASE_LO), 0x0001'0000, 0x20,
        // 5 RESTART_X/Y/Z
        PACKET3(PACKET3_SET_SH_REG, 3), sh(regCOMPUTE_RESTART_X), 0, 0, 0,
        // 6 USER_DATA: scratch descriptor, dispatch ptr, kernarg ptr
        PACKET3(PACKET3_SET_SH_REG, 8), sh(regCOMPUTE_USER_DATA_0), 0x0100'0000, 0x2000 | 1u << 31, 0xffffffff,
        0x20c14000, 0x0020'0040, 0x2000, 0x0020'0000, 0x2000,
        // 7 RESOURCE_LIMITS
        PACKET3(PACKET3_SET_SH_REG, 1), sh(regCOMPUTE_RESOURCE_LIMITS), 0,
        // 8 START_X/Y/Z, NUM_THREAD_X/Y/Z, PIPELINESTAT_ENABLE, PERFCOUNT_ENABLE
        PACKET3(PACKET3_SET_SH_REG, 8), sh(regCOMPUTE_START_X), 0, 0, 0, 64, 2, 1, 0, 0,
        // 9 DISPATCH_DIRECT, initiator COMPUTE_SHADER_EN | FORCE_START_AT_000 | CS_W32_EN
        PACKET3(PACKET3_DISPATCH_DIRECT, 3), 16, 8, 1, 1u | 1u << 2 | 1u << 15,
        // 10 EVENT_WRITE CS_PARTIAL_FLUSH
        PACKET3(PACKET3_EVENT_WRITE, 0), EVENT_TYPE(7) | EVENT_INDEX(4)};
    CHECK(span_words(w.words()) == expect);
    CHECK(pm4::dispatch_dwords(k) == expect.size());

    SECTION("GC 12 has no PRIV workaround; wave64 clears CS_W32_EN; bad launches are refused whole") {
        k.gen = pm4::GcGen::gc12;
        k.wave32 = false;
        k.user_sgpr_private_segment_buffer = false;
        k.user_sgpr_dispatch_ptr = false;
        std::array<uint32_t, 128> b2{};
        pm4::Pm4Writer w2(b2);
        w2.dispatch(k);
        CHECK(w2.words()[14] == 0x60af0000);
        CHECK(w2.words()[w2.size() - 3] == (1u | 1u << 2));
        CHECK(w2.size() == pm4::dispatch_dwords(k));
        k.block = {0, 1, 1};
        CHECK_THROWS_AS(w2.dispatch(k), Error);
        k.block = {64, 1, 1};
        k.code_address += 4;
        CHECK_THROWS_AS(w2.dispatch(k), Error);
        std::array<uint32_t, 20> small{};
        pm4::Pm4Writer w3(small);
        k.code_address -= 4;
        CHECK_THROWS_WITH(w3.dispatch(k), Catch::Contains("buffer full"));
        CHECK(w3.size() == 0);
    }
}

TEST_CASE("SDMA packets against sdma_v6_0_0_pkt_open.h", "[sdma]") {
    std::array<uint32_t, 64> buf{};
    sdma::SdmaWriter w(buf);
    uint32_t data[2] = {0xdead, 0xbeef};
    w.copy_linear(0x2000'0000'0000, 0x1'0000'1000, 4096)
        .fence(0x3000, 5)
        .poll_regmem(0x3008, sdma::Compare::ge, 9)
        .timestamp(0x3010)
        .write_linear(0x3020, data)
        .nop(2);
    CHECK(span_words(w.words()) ==
          Words{SDMA_PKT_HEADER_OP(SDMA_OP_COPY) | SDMA_PKT_HEADER_SUB_OP(SDMA_SUBOP_COPY_LINEAR),
                SDMA_PKT_COPY_LINEAR_COUNT_COUNT(4095), 0, 0x1000, 1, 0, 0x2000,
                SDMA_PKT_HEADER_OP(SDMA_OP_FENCE) | SDMA_PKT_FENCE_HEADER_MTYPE(3), 0x3000, 0, 5,
                SDMA_PKT_HEADER_OP(SDMA_OP_POLL_REGMEM) | SDMA_PKT_POLL_REGMEM_HEADER_FUNC(5) |
                    SDMA_PKT_POLL_REGMEM_HEADER_MEM_POLL(1),
                0x3008, 0, 9, 0xffffffff,
                SDMA_PKT_POLL_REGMEM_DW5_INTERVAL(4) | SDMA_PKT_POLL_REGMEM_DW5_RETRY_COUNT(0xfff),
                SDMA_PKT_HEADER_OP(SDMA_OP_TIMESTAMP) | SDMA_PKT_HEADER_SUB_OP(SDMA_SUBOP_TIMESTAMP_GET_GLOBAL),
                0x3010, 0,
                SDMA_PKT_HEADER_OP(SDMA_OP_WRITE), 0x3020, 0, 1, 0xdead, 0xbeef,
                SDMA_OP_NOP, SDMA_OP_NOP});
    CHECK_THROWS_AS(w.copy_linear(0, 0, 0), Error);
    CHECK_THROWS_AS(w.timestamp(0x3014), Error);
}

TEST_CASE("SDMA INDIRECT ends on an 8-dword boundary of the ring", "[sdma]") {
    for (uint64_t start = 0; start < 16; ++start) {
        std::array<uint32_t, 32> buf{};
        sdma::SdmaWriter w(buf, start);
        w.indirect(0x4'0000'0100, 16, 2);
        std::size_t pad = w.size() - 6;
        CHECK((start + w.size()) % 8 == 0);
        CHECK(pad < 8);
        for (std::size_t i = 0; i < pad; ++i) CHECK(w.words()[i] == SDMA_OP_NOP);
        CHECK(span_words(w.words().subspan(pad)) ==
              Words{SDMA_PKT_HEADER_OP(SDMA_OP_INDIRECT) | SDMA_PKT_INDIRECT_HEADER_VMID(2), 0x100, 4, 16, 0, 0});
    }
    std::array<uint32_t, 32> ib{};
    sdma::SdmaWriter w(ib);
    w.fence(0x3000, 1).pad_to_8();
    CHECK(w.size() == 8);
    CHECK_THROWS_AS(w.indirect(0x100, 12), Error);  // IB not a multiple of 8 dwords
}

TEST_CASE("SDMA COPY_LINEAR of 3 GiB is three 1 GiB packets (the 30-bit count's limit)", "[sdma]") {
    const uint64_t gib = uint64_t{1} << 30;
    std::array<uint32_t, 32> buf{};
    sdma::SdmaWriter w(buf);
    w.copy_linear(0x10'0000'0000, 0x20'0000'0000, 3 * gib);
    REQUIRE(w.size() == 21);
    CHECK(sdma::SdmaWriter::copy_dwords(3 * gib) == 21);
    for (uint64_t i = 0; i < 3; ++i) {
        auto p = w.words().subspan(i * 7, 7);
        uint64_t src = 0x20'0000'0000 + i * gib, dst = 0x10'0000'0000 + i * gib;
        CHECK(span_words(p) == Words{SDMA_PKT_HEADER_OP(SDMA_OP_COPY), 0x3FFFFFFF, 0, uint32_t(src), uint32_t(src >> 32),
                                     uint32_t(dst), uint32_t(dst >> 32)});
    }
    sdma::SdmaWriter w2(buf);
    w2.copy_linear(0, 0, gib + 1);  // 1 GiB + a 1-byte tail
    CHECK(w2.size() == 14);
    CHECK(w2.words()[8] == 0);
}

TEST_CASE("SDMA ring placement: never straddles the end, never passes rptr", "[sdma]") {
    // Fits before the end.
    auto a = sdma::sdma_place(0, 0, 1024, 64);
    REQUIRE(a);
    CHECK(a->pad_bytes == 0);
    CHECK(a->offset == 0);
    CHECK(a->new_put == 64);
    // 1000 % 1024 = 1000: 28 bytes of fill, then at 0 - allowed only once rptr has passed byte 64 of the next lap.
    CHECK_FALSE(sdma::sdma_place(1000, 0, 1024, 64));
    CHECK_FALSE(sdma::sdma_place(1000, 63, 1024, 64));
    auto b = sdma::sdma_place(1000, 64, 1024, 64);
    REQUIRE(b);
    CHECK(b->pad_bytes == 24);
    CHECK(b->offset == 0);
    CHECK(b->new_put == 1088);
    // Exactly full is allowed, one more dword is not.
    CHECK(sdma::sdma_place(960, 0, 1024, 64));
    CHECK_FALSE(sdma::sdma_place(964, 0, 1024, 64));
    CHECK_THROWS_AS(sdma::sdma_place(0, 0, 1024, 2048), Error);
    CHECK_THROWS_AS(sdma::sdma_place(0, 4, 1024, 4), Error);  // rptr ahead of put
}

TEST_CASE("SDMA ring: more work than the ring holds, a simulated consumer, no overrun", "[sdma]") {
    // A 256-dword ring; the producer writes 2000 commands of 3..40 dwords (FENCE/WRITE/COPY mixes), tagged
    // with a sequence number; the consumer decodes from rptr at a random pace, checks every command arrives
    // whole and in order, and that the producer never wrote over bytes it had not consumed.
    constexpr std::size_t kRing = 256;
    std::vector<uint32_t> ring(kRing, 0xCCCCCCCC);
    sdma::SdmaRing writer(ring);
    std::mt19937 rng(7);
    uint64_t rptr = 0;
    uint32_t next_seq = 0, consumed_seq = 0;
    std::size_t wraps = 0, refusals = 0, fills = 0;
    std::deque<std::pair<uint64_t, std::size_t>> in_flight;  // (put before, dwords) for the overrun check
    auto consume = [&](std::size_t budget) {
        while (budget-- && rptr < writer.put()) {
            uint32_t h = ring[(rptr / 4) % kRing];
            if (h == SDMA_OP_NOP) {  // tail fill
                rptr += 4;
                continue;
            }
            REQUIRE((h & 0xFF) == SDMA_OP_WRITE);
            uint64_t at = (rptr / 4) % kRing;
            uint32_t count = ring[at + 3] + 1;
            REQUIRE(at + 4 + count <= kRing);  // never straddles the end
            REQUIRE(ring[at + 1] == consumed_seq * 4);
            for (uint32_t i = 0; i < count; ++i) REQUIRE(ring[at + 4 + i] == consumed_seq * 1000 + i);
            ++consumed_seq;
            rptr += (4 + count) * 4;
        }
    };
    while (next_seq < 2000) {
        std::size_t n = 1 + rng() % 36;
        std::vector<uint32_t> cmd(4 + n);
        sdma::SdmaWriter w(cmd);
        std::vector<uint32_t> data(n);
        for (std::size_t i = 0; i < n; ++i) data[i] = next_seq * 1000 + static_cast<uint32_t>(i);
        w.write_linear(uint64_t{next_seq} * 4, data);  // the address carries the sequence number
        uint64_t before = writer.put();
        if (writer.try_write(w.words(), rptr)) {
            // No overrun: everything from the old put to the new one lay in bytes the consumer had finished.
            REQUIRE(writer.put() - rptr <= kRing * 4);
            if ((before % (kRing * 4)) + cmd.size() * 4 > kRing * 4) ++fills;
            if (before / (kRing * 4) != (writer.put() - 1) / (kRing * 4)) ++wraps;
            ++next_seq;
        } else {
            ++refusals;
            REQUIRE(writer.put() == before);
            consume(1 + rng() % 4);
        }
        if (rng() % 3 == 0) consume(rng() % 3);
    }
    consume(SIZE_MAX);
    CHECK(consumed_seq == 2000);
    CHECK(rptr == writer.put());
    CHECK(wraps > 50);
    CHECK(fills > 10);
    CHECK(refusals > 100);
    INFO("wraps " << wraps << " fills " << fills << " refusals " << refusals);
}

TEST_CASE("Compute MQD: v11/v12_compute_mqd offsets and the encodings of Linux gfx_v11_0_compute_mqd_init", "[mqd]") {
    // v11_structs.h / v12_structs.h comments.
    CHECK(mqd::dw::cp_mqd_base_addr_lo == 0x80);
    CHECK(mqd::dw::cp_hqd_pq_base_lo == 0x88);
    CHECK(mqd::dw::cp_hqd_pq_doorbell_control == 0x8F);
    CHECK(mqd::dw::cp_hqd_pq_control == 0x91);
    CHECK(mqd::dw::cp_hqd_ib_control == 0x95);
    CHECK(mqd::dw::cp_hqd_hq_status0 == 0xA0);
    CHECK(mqd::dw::cp_mqd_control == 0xA2);
    CHECK(mqd::dw::cp_hqd_eop_base_addr_lo == 0xA5);
    CHECK(mqd::dw::cp_hqd_eop_control == 0xA7);
    CHECK(mqd::dw::cp_hqd_aql_control == 0xB5);
    CHECK(mqd::dw::cp_hqd_pq_wptr_hi == 0xB7);
    CHECK(sizeof(mqd::ComputeMqd) == 2048);

    mqd::ComputeQueueConfig c;
    c.mqd_mc_address = 0x80'0010'0000;
    c.ring_va = 0x2000'0040'0000;
    c.ring_bytes = 16 << 20;  // 4 Mi dwords: queue_size = 22 - 1
    c.rptr_va = 0x2000'0000'0080;
    c.wptr_va = 0x2000'0000'0038;
    c.eop_va = 0x2000'0080'0000;
    c.eop_bytes = 0x1000;  // 1024 dwords: eop_size = 10 - 1
    auto m = mqd::build_compute_mqd(c);
    CHECK(m[0] == 0xC0310800);
    CHECK(m[0x80] == 0x0010'0000);
    CHECK(m[0x81] == 0x80);
    CHECK(m[0x88] == 0x0040'0000 >> 8);
    CHECK(m[0x89] == 0x20);
    CHECK(m[0x8B] == 0x80);
    CHECK(m[0x8D] == 0x38);
    CHECK(m[0x8E] == 0x2000);
    CHECK(m[0x8F] == ((3u * 2) << 2 | 1u << 30));  // MEC_RING0 = 3 (amdgpu_doorbell.h), dword offset 6, DOORBELL_EN
    // QUEUE_SIZE, RPTR_BLOCK_SIZE, UNORD_DISPATCH 28, PRIV_STATE 30, KMD_QUEUE 31 (gfx_v11_0_compute_mqd_init).
    CHECK(m[0x91] == (21u | 5u << 8 | 1u << 28 | 1u << 30 | 1u << 31));
    CHECK(m[0xA7] == 9u);                          // EOP_SIZE
    CHECK(m[0xA5] == 0x0080'0000 >> 8);
    CHECK(m[0x84] == (1u | 0x55u << 8));           // PRELOAD_REQ, PRELOAD_SIZE
    CHECK(m[0x85] == 2);
    CHECK(m[0x86] == 0xf);
    CHECK(m[0x87] == 0x111);
    CHECK(m[0x95] == 3u << 20);                    // MIN_IB_AVAIL_SIZE (gc_11_0_0_sh_mask.h shift 0x14)
    CHECK(m[0xA0] == 0x20004000);
    CHECK(m[0xA2] == 1u << 8);
    CHECK(m[23] == 0xffffffff);
    for (uint32_t se : {23, 24, 26, 27, 44, 45, 46, 47}) CHECK(m[se] == 0xffffffff);  // static_thread_mgmt_se0..7
    CHECK(m[25] == 0);                                                               // compute_tmpring_size
    CHECK(m[0x82] == 0);  // CP_HQD_ACTIVE is set by the register write, not the image
    auto regs = mqd::register_block(m);
    CHECK(regs.size() == 0x1fe0 - 0x1fa9 + 1);
    CHECK(regs[0x1fa9 - 0x1fa9] == m[0x80]);
    CHECK(regs.back() == m[0xB7]);

    c.ring_bytes = 3 << 20;
    CHECK_THROWS_AS(mqd::build_compute_mqd(c), Error);
    c.ring_bytes = 1 << 20;
    c.eop_va += 0x80;
    CHECK_THROWS_AS(mqd::build_compute_mqd(c), Error);
}

}  // namespace queue_packets_test
