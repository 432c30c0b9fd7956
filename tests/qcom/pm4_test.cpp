// drivers/qcom PM4 encoders against packet words computed from the public definitions, and the
// simulated A630's decoder against the same words and their corruptions.
//
// Definitions: mesa src/freedreno/common/freedreno_pm4.h (pm4_pkt4_hdr, pm4_pkt7_hdr,
// pm4_odd_parity_bit: fold the value to a nibble, parity bit = (~0x6996 >> nibble) & 1) and
// src/freedreno/registers/adreno/adreno_pm4.xml (bminor/mesa-mesa 32be52a4) for the opcodes. Three
// expected words are captured command-stream dumps quoted in adreno_pm4.xml itself
// ("70b90001" CP_REG_TEST, "70c70002" CP_COND_REG_EXEC, "70b0000b" CP_LOAD_STATE4 with 11 dwords).
#include "drivers/qcom/a6xx_registers.hpp"
#include "drivers/qcom/pm4.hpp"
#include "drivers/sim/kgsl/pm4_decode.hpp"

#include <catch2/catch.hpp>

namespace pm4_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

namespace qpm4 = baregpu::qcom::pm4;
namespace spm4 = baregpu::sim::kgsl::pm4;

TEST_CASE("pm4: odd parity bit as freedreno_pm4.h folds it") {
    // 0: no bits set (even) -> 1; 1: one bit -> 0; 7: three bits -> 0; 0x3c: four bits -> 1.
    CHECK(qpm4::odd_parity_bit(0) == 1);
    CHECK(qpm4::odd_parity_bit(1) == 0);
    CHECK(qpm4::odd_parity_bit(7) == 0);
    CHECK(qpm4::odd_parity_bit(0x3c) == 1);
    CHECK(qpm4::odd_parity_bit(0x80000000u) == 0);  // the fold reaches bit 31
    CHECK(qpm4::odd_parity_bit(0xb990) == 0);       // b^9^9^0 = 0xb: three bits
}

TEST_CASE("pm4: type-7 headers equal the words mesa's adreno_pm4.xml quotes from real command streams") {
    CHECK(qpm4::type7(0x39, 1) == 0x70b90001u);   // CP_REG_TEST, 1 payload dword
    CHECK(qpm4::type7(0x47, 2) == 0x70c70002u);   // CP_COND_REG_EXEC, 2
    CHECK(qpm4::type7(0x30, 11) == 0x70b0000bu);  // CP_LOAD_STATE4, 11
}

TEST_CASE("pm4: type-7 headers of the opcodes drivers/qcom emits, computed by hand") {
    using namespace qpm4;
    // CP_WAIT_REG_MEM 0x3c, 6 dwords: count 6 (0b110, even) -> bit 15 = 1; opcode 0x3c (4 bits) -> bit 23 = 1.
    CHECK(type7(CP_WAIT_REG_MEM, 6) == (0x70000000u | 6 | 1u << 15 | 0x3cu << 16 | 1u << 23));
    CHECK(type7(CP_WAIT_REG_MEM, 6) == 0x70bc8006u);
    // CP_EXEC_CS 0x33, 4: count 4 (one bit) -> 0; 0x33 (four bits) -> 1.
    CHECK(type7(CP_EXEC_CS, 4) == 0x70b30004u);
    // CP_NOP 0x10 with no payload: count 0 -> 1; 0x10 (one bit) -> 0.
    CHECK(type7(CP_NOP, 0) == 0x70108000u);
    // CP_EVENT_WRITE 0x46, 4: 4 -> 0; 0x46 (three bits) -> 0.
    CHECK(type7(CP_EVENT_WRITE, 4) == 0x70460004u);
    // CP_MEM_WRITE 0x3d, 4: 4 -> 0; 0x3d (five bits) -> 0.
    CHECK(type7(CP_MEM_WRITE, 4) == 0x703d0004u);
    // CP_REG_TO_MEM 0x3e, 3: 3 (two bits) -> 1; 0x3e (five bits) -> 0.
    CHECK(type7(CP_REG_TO_MEM, 3) == 0x703e8003u);
    // CP_COND_EXEC 0x44, 6: 6 -> 1; 0x44 (two bits) -> 1.
    CHECK(type7(CP_COND_EXEC, 6) == 0x70c48006u);
    // CP_SET_MARKER 0x65, 1: 1 -> 0; 0x65 (four bits) -> 1.
    CHECK(type7(CP_SET_MARKER, 1) == 0x70e50001u);
    // CP_WAIT_FOR_IDLE 0x26, 0: 0 -> 1; 0x26 (three bits) -> 0.
    CHECK(type7(CP_WAIT_FOR_IDLE, 0) == 0x70268000u);
}

TEST_CASE("pm4: type-4 headers, computed by hand") {
    using namespace qpm4;
    namespace r = baregpu::qcom::a6xx;
    // SP_CS_NDRANGE_0 0xb990, 7 regs: 7 (three bits) -> bit 7 = 0; 0xb990 folds to 0xb -> bit 27 = 0.
    CHECK(type4(r::SP_CS_NDRANGE_0, 7) == 0x40b99007u);
    // SP_CS_BASE 0xa9b4, 2: 2 (one bit) -> 0; 0xa9b4 folds a^9=3, 3^b=8, 8^4=0xc (two bits) -> bit 27 = 1.
    CHECK(type4(r::SP_CS_BASE, 2) == 0x48a9b402u);
    // SP_CS_KERNEL_GROUP_X 0xb999, 3: 3 (two bits) -> 1; b^9^9^9 = 2 (one bit) -> 0.
    CHECK(type4(r::SP_CS_KERNEL_GROUP_X, 3) == 0x40b99983u);
    // CP_ALWAYS_ON_COUNTER 0x980, 2: 2 -> 0; 0^9^8^0 = 1 -> 0.
    CHECK(type4(r::CP_ALWAYS_ON_COUNTER, 2) == 0x40098002u);
}

TEST_CASE("pm4: the simulated CP decodes good headers and rejects a flipped parity bit, reserved bits and other packet types") {
    auto h = spm4::decode(qpm4::type7(qpm4::CP_EXEC_CS, 4));
    REQUIRE(h.type == spm4::Header::type7);
    CHECK(h.opcode == 0x33);
    CHECK(h.count == 4);
    auto r = spm4::decode(qpm4::type4(0xb990, 7));
    REQUIRE(r.type == spm4::Header::type4);
    CHECK(r.reg == 0xb990);
    CHECK(r.count == 7);

    // Every parity bit flipped on its own is caught, and says which field.
    auto t7 = spm4::decode(qpm4::type7(qpm4::CP_EXEC_CS, 4) ^ (1u << 15));
    CHECK(t7.type == spm4::Header::invalid);
    CHECK_THAT(t7.error, Catch::Contains("count parity"));
    auto op = spm4::decode(qpm4::type7(qpm4::CP_EXEC_CS, 4) ^ (1u << 23));
    CHECK(op.type == spm4::Header::invalid);
    CHECK_THAT(op.error, Catch::Contains("opcode parity"));
    auto c4 = spm4::decode(qpm4::type4(0xb990, 7) ^ (1u << 7));
    CHECK(c4.type == spm4::Header::invalid);
    auto r4 = spm4::decode(qpm4::type4(0xb990, 7) ^ (1u << 27));
    CHECK(r4.type == spm4::Header::invalid);
    CHECK_THAT(r4.error, Catch::Contains("register parity"));
    // A changed count or opcode without its parity bit is caught the same way.
    CHECK(spm4::decode(qpm4::type7(qpm4::CP_EXEC_CS, 4) + 1).type == spm4::Header::invalid);
    // Type 0/3 (pre-A5xx) and garbage.
    CHECK(spm4::decode(0xc0001000u).type == spm4::Header::invalid);
    CHECK(spm4::decode(0x00000000u).type == spm4::Header::invalid);
}

TEST_CASE("pm4: CP_EVENT_WRITE7 dword 0 (A7XX) from adreno_pm4.xml's bit positions") {
    // EVENT bits 0-7; WRITE_SRC bits 20-22 = EV_WRITE_USER_32B (0); WRITE_DST bit 24 = EV_DST_RAM (0);
    // WRITE_ENABLED bit 27.
    CHECK(qpm4::event_write7_0(qpm4::CACHE_FLUSH_TS, true) == 0x08000004u);
    CHECK(qpm4::event_write7_0(qpm4::CACHE_INVALIDATE7, false) == 0x00000033u);
}

}  // namespace pm4_test
