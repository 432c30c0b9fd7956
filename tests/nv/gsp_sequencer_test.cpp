// The GSP CPU sequencer decoder and runner against a fake register file. Payload layout re-typed
// from open-gpu-kernel-modules 570.144: rpc_run_cpu_sequencer_v17_00 {bufferSizeDWord, cmdIndex,
// regSaveArea[8]} (40 bytes, g_rpc-structures.h) then opcodes of rmgspseq.h: REG_WRITE = 0 {addr; val},
// REG_MODIFY = 1 {addr; mask; val}, REG_POLL = 2 {addr; mask; val; timeout; error}, DELAY_US = 3 {val},
// REG_STORE = 4 {addr; index}, CORE_RESUME = 8.
#include "drivers/nv/gsp_sequencer.hpp"

#include "base/error.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <map>

namespace gsp_sequencer_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;

namespace {

std::vector<std::byte> payload(std::initializer_list<uint32_t> cmds) {
    std::vector<std::byte> b(40 + cmds.size() * 4);
    const uint32_t n = static_cast<uint32_t>(cmds.size());
    std::memcpy(b.data(), &n, 4);
    std::memcpy(b.data() + 4, &n, 4);
    size_t i = 0;
    for (uint32_t c : cmds) std::memcpy(b.data() + 40 + 4 * i++, &c, 4);
    return b;
}

struct FakeChip : nv::SequencerTarget {
    std::map<uint32_t, uint32_t> regs;
    std::chrono::nanoseconds clock{0};
    std::vector<std::string> core;
    std::string name = "fake";
    unsigned poll_until_set = 0;  // reads of 0x300 before it reads 1
    uint32_t read32(uint32_t a) override {
        if (a == 0x300) return poll_until_set ? (--poll_until_set, 0u) : 1u;
        return regs[a];
    }
    void write32(uint32_t a, uint32_t v) override { regs[a] = v; }
    void delay(std::chrono::nanoseconds d) override { clock += d; }
    std::chrono::nanoseconds now() override { return clock; }
    void core_reset() override { core.push_back("reset"); }
    void core_start() override { core.push_back("start"); }
    void core_wait_for_halt() override { core.push_back("halt"); }
    void core_resume() override { core.push_back("resume"); }
    const std::string& device_name() const override { return name; }
};

}  // namespace

TEST_CASE("sequencer REG_MODIFY reads {addr, mask, val} as rmgspseq.h declares", "[nv][sequencer]") {
    // Old value 0xffff0000, mask 0x0000ff00, val 0x00001200: (old & ~mask) | val = 0xffff1200. Read as
    // tinygrad does ({addr, val, mask}) the same words would give (old & ~0x1200) | 0xff00 = 0xffffff00.
    const auto p = payload({1, 0x100, 0x0000ff00, 0x00001200});
    const auto ops = nv::parse_sequencer(p, "fake");
    REQUIRE(ops.size() == 1);
    CHECK(ops[0].opcode == nv::SeqOpcode::RegModify);
    CHECK(ops[0].mask == 0x0000ff00);
    CHECK(ops[0].val == 0x00001200);
    FakeChip chip;
    chip.regs[0x100] = 0xffff0000;
    std::array<uint32_t, 8> save{};
    nv::run_sequencer(ops, chip, save);
    CHECK(chip.regs[0x100] == 0xffff1200);
    CHECK(chip.regs[0x100] != 0xffffff00);  // what the swapped order would write
}

TEST_CASE("sequencer runs every opcode in order", "[nv][sequencer]") {
    const auto p = payload({0, 0x200, 0xabcd, 2, 0x300, 1, 1, 0, 0x77, 3, 25, 4, 0x200, 5, 5, 6, 7, 8});
    const auto ops = nv::parse_sequencer(p, "fake");
    REQUIRE(ops.size() == 8);
    FakeChip chip;
    chip.poll_until_set = 3;
    std::array<uint32_t, 8> save{};
    nv::run_sequencer(ops, chip, save);
    CHECK(chip.regs[0x200] == 0xabcd);
    CHECK(save[5] == 0xabcd);
    CHECK(chip.poll_until_set == 0);
    CHECK(chip.clock >= std::chrono::microseconds(25));
    CHECK(chip.core == std::vector<std::string>{"reset", "start", "halt", "resume"});
}

TEST_CASE("sequencer errors name what went wrong", "[nv][sequencer][negative]") {
    SECTION("unknown opcode") {
        REQUIRE_THROWS_AS(nv::parse_sequencer(payload({9}), "fake"), ProtocolError);
    }
    SECTION("truncated REG_POLL") {
        REQUIRE_THROWS_AS(nv::parse_sequencer(payload({2, 0x300, 1}), "fake"), ProtocolError);
    }
    SECTION("REG_POLL that never matches times out naming the register") {
        FakeChip chip;
        const auto ops = nv::parse_sequencer(payload({2, 0x400, 1, 1, 1000, 0x55}), "fake");
        std::array<uint32_t, 8> save{};
        REQUIRE_THROWS_MATCHES(nv::run_sequencer(ops, chip, save), TimeoutError,
                               Catch::Matchers::Predicate<TimeoutError>([](const TimeoutError& e) {
                                   return std::string(e.what()).find("0x400") != std::string::npos;
                               }, "names BAR0 0x400"));
    }
}

}  // namespace gsp_sequencer_test
