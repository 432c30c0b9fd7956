// SDMA v6 packets (SDMA 6.0 on GC 11; SDMA 7.0 on GC 12 takes the same encodings, Linux
// sdma_v6_0_0_pkt_open.h = tinygrad autogen/am/sdma_6_0_0.py) and
// the placement rule of the SDMA ring. Opcodes, sub-ops and field shifts: Linux
// drivers/gpu/drm/amd/amdgpu/sdma_v6_0_0_pkt_open.h (SDMA_OP_*, SDMA_SUBOP_*, SDMA_PKT_*_shift/mask).
// SdmaWriter appends into a caller's buffer and never allocates. Used by copy_queue.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace baregpu::am::sdma {

// sdma_v6_0_0_pkt_open.h opcodes and sub-ops.
inline constexpr uint32_t kOpNop = 0, kOpCopy = 1, kOpWrite = 2, kOpIndirect = 4, kOpFence = 5, kOpPollRegmem = 8,
                          kOpTimestamp = 13;
inline constexpr uint32_t kSubOpCopyLinear = 0, kSubOpWriteLinear = 0, kSubOpTimestampGetGlobal = 2;

// The limit is the count field: SDMA_PKT_COPY_LINEAR_COUNT_count_mask = 0x3FFFFFFF with count = bytes - 1, so one
// packet moves at most 2^30 bytes = 1 GiB (tinygrad ops_amd.py AMDCopyQueue max_copy_size for SDMA >= 5). Linux's own
// sdma_v6_0 buffer_funcs chunk at a smaller copy_max_bytes; 1 GiB is the encoding's limit, not a tuning choice.
inline constexpr uint64_t kMaxCopyBytes = uint64_t{1} << 30;

// POLL_REGMEM function (HEADER bits 30:28): same encoding as PM4 WAIT_REG_MEM's.
enum class Compare : uint32_t { always = 0, lt = 1, le = 2, eq = 3, ne = 4, ge = 5, gt = 6 };

// FENCE HEADER mtype (bits 18:16), Linux amdgpu_vm.h MTYPE_* on GC 11/12: 0 = NC, 3 = UC (tinygrad ops_amd.py AMDCopyQueue
// uses UC for host signals).
enum class Mtype : uint32_t { nc = 0, uc = 3 };

class SdmaWriter {
public:
    // dword_position: where out[0] lands in the ring, in dwords (INDIRECT's 8-dword alignment depends on it).
    explicit SdmaWriter(std::span<uint32_t> out, uint64_t dword_position = 0) : out_(out), base_(dword_position) {}

    std::size_t size() const { return pos_; }
    std::span<const uint32_t> words() const { return out_.first(pos_); }

    SdmaWriter& nop(std::size_t dwords);  // zeros: op 0, count 0, one dword each (sdma_v6_0 insert_nop)
    // As many COPY_LINEAR packets as `bytes` needs, each at most kMaxCopyBytes. Throws on 0 bytes.
    SdmaWriter& copy_linear(uint64_t dst, uint64_t src, uint64_t bytes);
    SdmaWriter& fence(uint64_t address, uint32_t value, Mtype mtype = Mtype::uc);
    SdmaWriter& poll_regmem(uint64_t address, Compare f, uint32_t value, uint32_t mask = 0xffffffffu,
                            uint32_t interval = 4, uint32_t retry_count = 0xfff);
    SdmaWriter& timestamp(uint64_t address);  // TIMESTAMP GET_GLOBAL: the 64-bit 100 MHz counter
    SdmaWriter& write_linear(uint64_t address, std::span<const uint32_t> data);
    // NOP-pads so the 6-dword INDIRECT ends on an 8-dword boundary of the ring (sdma_v6_0_ring_emit_ib:
    // "IB packet must end on a 8 DW boundary"), then emits it. ib_dwords must be a multiple of 8 (pad_ib).
    SdmaWriter& indirect(uint64_t ib_address, uint32_t ib_dwords, uint32_t vmid = 0);
    // NOPs up to the next multiple of 8 dwords (sdma_v6_0_ring_pad_ib), for building an IB.
    SdmaWriter& pad_to_8();

    static std::size_t copy_dwords(uint64_t bytes) { return 7 * ((bytes + kMaxCopyBytes - 1) / kMaxCopyBytes); }

private:
    uint32_t* grab(std::size_t n);
    std::span<uint32_t> out_;
    uint64_t base_;
    std::size_t pos_ = 0;
};

// Where the next command goes in an SDMA ring. put and rptr are byte counters that only grow (the
// ring offset is counter % ring_bytes), as the engine's 64-bit RB_WPTR/RB_RPTR are.
struct SdmaPlacement {
    uint64_t pad_bytes;  // NOP fill from put's offset to the ring end (0 when the command fits before it)
    uint64_t offset;     // ring byte offset the command starts at
    uint64_t new_put;    // put after the fill and the command
};
// std::nullopt when the command (plus any fill) would overwrite bytes the engine has not read yet:
// wait for rptr and ask again. Throws when the command can never fit (bigger than the ring, not dwords).
std::optional<SdmaPlacement> sdma_place(uint64_t put, uint64_t rptr, uint64_t ring_bytes, uint64_t command_bytes);

// A ring writer over the caller's ring memory: never straddles the ring end (NOP-fills the tail and
// restarts at 0) and refuses to overrun rptr. Doorbell/wptr writes are the queue's job.
class SdmaRing {
public:
    explicit SdmaRing(std::span<uint32_t> ring, uint64_t put = 0);
    uint64_t put() const { return put_; }
    uint64_t ring_bytes() const { return ring_.size() * 4; }
    // Writes one command (kept whole); false, with nothing written, when there is no space before rptr.
    bool try_write(std::span<const uint32_t> command, uint64_t rptr);

private:
    std::span<uint32_t> ring_;
    uint64_t put_;
};

}  // namespace baregpu::am::sdma
