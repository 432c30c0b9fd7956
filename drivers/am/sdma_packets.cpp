// SDMA v6 encoders and ring placement: see sdma_packets.hpp for the header every field comes from.
#include "drivers/am/sdma_packets.hpp"

#include "base/error.hpp"
#include "drivers/am/dwords.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace baregpu::am::sdma {

namespace {
// HEADER: op bits 7:0, sub_op bits 15:8 (every SDMA_PKT_*_HEADER_op/sub_op shift).
constexpr uint32_t header(uint32_t op, uint32_t sub_op) { return (op & 0xFF) | (sub_op & 0xFF) << 8; }
void check_aligned(uint64_t address, uint64_t alignment, const char* what) {
    if (address % alignment != 0)
        throw Error("", fmt::format("SDMA {}: address {:#x} is not {}-byte aligned", what, address, alignment));
}
}  // namespace

uint32_t* SdmaWriter::grab(std::size_t n) {
    if (n > out_.size() - pos_)
        throw Error("", fmt::format("SDMA buffer full: {} dwords needed, {} of {} left", n, out_.size() - pos_,
                                    out_.size()));
    uint32_t* p = out_.data() + pos_;
    pos_ += n;
    return p;
}

SdmaWriter& SdmaWriter::nop(std::size_t dwords) {
    uint32_t* p = grab(dwords);
    std::fill(p, p + dwords, header(kOpNop, 0));
    return *this;
}

SdmaWriter& SdmaWriter::copy_linear(uint64_t dst, uint64_t src, uint64_t bytes) {
    if (bytes == 0) throw Error("", "SDMA COPY_LINEAR of 0 bytes: the count field cannot encode it (count = bytes - 1)");
    if (copy_dwords(bytes) > out_.size() - pos_) grab(copy_dwords(bytes));  // throws before a partial copy
    for (uint64_t done = 0; done < bytes;) {
        uint64_t n = std::min(bytes - done, kMaxCopyBytes);
        uint32_t* p = grab(7);
        p[0] = header(kOpCopy, kSubOpCopyLinear);
        p[1] = static_cast<uint32_t>(n - 1) & 0x3FFFFFFF;  // COUNT_count, bits 29:0
        p[2] = 0;                                          // PARAMETER: swaps and cache policies 0
        p[3] = lo(src + done);
        p[4] = hi(src + done);
        p[5] = lo(dst + done);
        p[6] = hi(dst + done);
        done += n;
    }
    return *this;
}

SdmaWriter& SdmaWriter::fence(uint64_t address, uint32_t value, Mtype mtype) {
    check_aligned(address, 4, "FENCE");
    uint32_t* p = grab(4);
    p[0] = header(kOpFence, 0) | static_cast<uint32_t>(mtype) << 16;  // FENCE_HEADER_mtype_shift 16
    p[1] = lo(address);
    p[2] = hi(address);
    p[3] = value;
    return *this;
}

SdmaWriter& SdmaWriter::poll_regmem(uint64_t address, Compare f, uint32_t value, uint32_t mask, uint32_t interval,
                                    uint32_t retry_count) {
    check_aligned(address, 4, "POLL_REGMEM");
    if (interval > 0xFFFF || retry_count > 0xFFF)
        throw Error("", fmt::format("SDMA POLL_REGMEM interval {} / retry {} over the 16-/12-bit fields", interval,
                                    retry_count));
    uint32_t* p = grab(6);
    // POLL_REGMEM_HEADER func_shift 28, mem_poll_shift 31 (hdp_flush 0).
    p[0] = header(kOpPollRegmem, 0) | static_cast<uint32_t>(f) << 28 | 1u << 31;
    p[1] = lo(address);
    p[2] = hi(address);
    p[3] = value;
    p[4] = mask;
    p[5] = interval | retry_count << 16;  // DW5 interval_shift 0, retry_count_shift 16
    return *this;
}

SdmaWriter& SdmaWriter::timestamp(uint64_t address) {
    check_aligned(address, 8, "TIMESTAMP");
    uint32_t* p = grab(3);
    p[0] = header(kOpTimestamp, kSubOpTimestampGetGlobal);
    p[1] = lo(address);
    p[2] = hi(address);
    return *this;
}

SdmaWriter& SdmaWriter::write_linear(uint64_t address, std::span<const uint32_t> data) {
    check_aligned(address, 4, "WRITE");
    if (data.empty() || data.size() - 1 > 0xFFFFF)
        throw Error("", fmt::format("SDMA WRITE of {} dwords: DW_3 count (dwords - 1) holds 20 bits", data.size()));
    uint32_t* p = grab(4 + data.size());
    p[0] = header(kOpWrite, kSubOpWriteLinear);
    p[1] = lo(address);
    p[2] = hi(address);
    p[3] = static_cast<uint32_t>(data.size() - 1);  // WRITE_UNTILED_DW_3 count_shift 0
    std::copy(data.begin(), data.end(), p + 4);
    return *this;
}

SdmaWriter& SdmaWriter::indirect(uint64_t ib_address, uint32_t ib_dwords, uint32_t vmid) {
    check_aligned(ib_address, 32, "INDIRECT");  // the IB is 8-dword aligned
    if (ib_dwords == 0 || ib_dwords % 8 != 0)
        throw Error("", fmt::format("SDMA INDIRECT of {} dwords: pad the IB to a multiple of 8 (pad_to_8)", ib_dwords));
    if (vmid > 0xF) throw Error("", fmt::format("SDMA INDIRECT vmid {} over 15", vmid));
    // The packet is 6 dwords and must end on an 8-dword boundary: start at 2 mod 8 (sdma_v6_0_ring_emit_ib
    // inserts (2 - wptr) & 7 NOPs).
    nop((2 - (base_ + pos_)) & 7);
    uint32_t* p = grab(6);
    p[0] = header(kOpIndirect, 0) | vmid << 16;  // INDIRECT_HEADER vmid_shift 16
    p[1] = lo(ib_address);
    p[2] = hi(ib_address);
    p[3] = ib_dwords;
    p[4] = 0;  // CSA address lo/hi
    p[5] = 0;
    return *this;
}

SdmaWriter& SdmaWriter::pad_to_8() { return nop((8 - (base_ + pos_) % 8) % 8); }

std::optional<SdmaPlacement> sdma_place(uint64_t put, uint64_t rptr, uint64_t ring_bytes, uint64_t command_bytes) {
    if (ring_bytes == 0 || ring_bytes % 4 != 0 || command_bytes % 4 != 0 || put % 4 != 0)
        throw Error("", fmt::format("SDMA ring placement: ring {} B, command {} B and put {} must be whole dwords",
                                    ring_bytes, command_bytes, put));
    if (command_bytes > ring_bytes)
        throw Error("", fmt::format("SDMA command of {} B can never fit a {} B ring; split it", command_bytes,
                                    ring_bytes));
    if (rptr > put || put - rptr > ring_bytes)
        throw Error("", fmt::format("SDMA ring pointers inconsistent: rptr {:#x}, put {:#x}, ring {} B", rptr, put,
                                    ring_bytes));
    uint64_t offset = put % ring_bytes;
    uint64_t pad = offset + command_bytes > ring_bytes ? ring_bytes - offset : 0;
    uint64_t new_put = put + pad + command_bytes;
    if (new_put - rptr > ring_bytes) return std::nullopt;
    return SdmaPlacement{pad, pad ? 0 : offset, new_put};
}

SdmaRing::SdmaRing(std::span<uint32_t> ring, uint64_t put) : ring_(ring), put_(put) {
    if (ring.empty() || (ring.size() & (ring.size() - 1)) != 0)
        throw Error("", fmt::format("SDMA ring of {} dwords: RB_CNTL.rb_size is log2, use a power of two", ring.size()));
}

bool SdmaRing::try_write(std::span<const uint32_t> command, uint64_t rptr) {
    auto at = sdma_place(put_, rptr, ring_bytes(), command.size() * 4);
    if (!at) return false;
    if (at->pad_bytes) {
        uint64_t from = (put_ % ring_bytes()) / 4;
        std::fill(ring_.begin() + static_cast<std::ptrdiff_t>(from), ring_.end(), header(kOpNop, 0));
    }
    std::copy(command.begin(), command.end(), ring_.begin() + static_cast<std::ptrdiff_t>(at->offset / 4));
    put_ = at->new_put;
    return true;
}

}  // namespace baregpu::am::sdma
