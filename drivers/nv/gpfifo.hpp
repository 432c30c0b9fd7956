// The host side of a NVIDIA channel: GPFIFO entries, pushbuffer method headers, host semaphores,
// and a GPFIFO ring that never overwrites an entry the GPU has not fetched.
// Sources (open-gpu-kernel-modules src/common/sdk/nvidia/inc/class/, also open-gpu-doc classes/host/):
//   clc56f.h (AMPERE_CHANNEL_GPFIFO_A): NVC56F_GP_ENTRY0/1_*, NVC56F_DMA_* method headers,
//            NVC56F_SEM_ADDR_LO/HI, SEM_PAYLOAD_LO/HI, SEM_EXECUTE_*, NON_STALL_INTERRUPT, and
//            AmpereAControlGPFifo (USERD: GPGet at +0x88, GPPut at +0x8c);
//   clc86f.h (HOPPER_CHANNEL_GPFIFO_A): the same methods, SEM_ADDR_HI_OFFSET widened to 24:0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

namespace baregpu::nv {

// The host (GPFIFO) class a channel was allocated with; the semaphore address width differs.
enum class HostClass : uint32_t { ampere_c56f = 0xc56f, hopper_c86f = 0xc86f };

// ---- GP entries (NVC56F_GP_ENTRY__SIZE = 8 bytes) ----
enum class GpLevel : uint32_t { main = 0, subroutine = 1 };  // NVC56F_GP_ENTRY1_LEVEL
enum class GpFetch : uint32_t { unconditional = 0, conditional = 1 };  // NVC56F_GP_ENTRY0_FETCH
enum class GpSync : uint32_t { proceed = 0, wait = 1 };  // NVC56F_GP_ENTRY1_SYNC

struct GpEntry {
    uint32_t entry0 = 0;
    uint32_t entry1 = 0;
    // Little-endian in memory: ENTRY0 at the lower address.
    constexpr uint64_t raw() const { return entry0 | (static_cast<uint64_t>(entry1) << 32); }
};

// A pushbuffer segment of `length_dwords` (1 .. 2^21 - 1: ENTRY1_LENGTH is 30:10) at GPU VA `va`
// (4-byte aligned: ENTRY0_GET is 31:2; below 2^40: ENTRY1_GET_HI is 7:0). Throws baregpu::Error otherwise.
GpEntry gp_entry(uint64_t va, uint32_t length_dwords, GpLevel level = GpLevel::main,
                 GpFetch fetch = GpFetch::unconditional, GpSync sync = GpSync::proceed);

// ---- method headers (NVC56F_DMA_*) ----
// SEC_OP (31:29): 1 incrementing, 3 non-incrementing, 4 immediate data, 5 increment once.
// COUNT / IMMD_DATA 28:16, SUBCHANNEL 15:13, ADDRESS 11:0 = method byte offset >> 2.
uint32_t method_incr(unsigned subchannel, uint32_t method, uint32_t count);
uint32_t method_nonincr(unsigned subchannel, uint32_t method, uint32_t count);
uint32_t method_one_incr(unsigned subchannel, uint32_t method, uint32_t count);
uint32_t method_immediate(unsigned subchannel, uint32_t method, uint32_t data13);

// Host class methods (subchannel 0), byte offsets from clc56f.h / clc86f.h.
namespace host {
inline constexpr uint32_t SET_OBJECT = 0x0000;
inline constexpr uint32_t NON_STALL_INTERRUPT = 0x0020;
inline constexpr uint32_t SEM_ADDR_LO = 0x005c;
inline constexpr uint32_t SEM_ADDR_HI = 0x0060;
inline constexpr uint32_t SEM_PAYLOAD_LO = 0x0064;
inline constexpr uint32_t SEM_PAYLOAD_HI = 0x0068;
inline constexpr uint32_t SEM_EXECUTE = 0x006c;
inline constexpr uint32_t WFI = 0x0078;
}  // namespace host

// NVC56F_SEM_EXECUTE_OPERATION (2:0). clc86f.h lists ACQUIRE, RELEASE and ACQ_CIRC_GEQ only.
enum class SemOperation : uint32_t { acquire = 0, release = 1, acq_strict_geq = 2, acq_circ_geq = 3, acq_and = 4,
                                     acq_nor = 5, reduction = 6 };

struct SemExecute {
    SemOperation operation = SemOperation::release;
    bool acquire_switch_tsg = false;  // 12:12
    bool release_wfi = false;         // 20:20
    bool payload_64bit = true;        // 24:24 PAYLOAD_SIZE_64BIT
    bool release_timestamp = false;   // 25:25 (four-word semaphore: payload, then the timestamp at +8)
    uint32_t word() const;
};

// Writes methods into a caller's buffer; never allocates. Throws baregpu::Error (before writing
// anything) when a command does not fit or a field is out of range.
class PushBuffer {
public:
    explicit PushBuffer(std::span<uint32_t> out, HostClass host = HostClass::ampere_c56f) : out_(out), host_(host) {}

    size_t size_dwords() const { return pos_; }
    std::span<const uint32_t> dwords() const { return out_.first(pos_); }
    void reset() { pos_ = 0; }

    PushBuffer& incr(unsigned subchannel, uint32_t method, std::span<const uint32_t> data);
    PushBuffer& incr(unsigned subchannel, uint32_t method, std::initializer_list<uint32_t> data) {
        return incr(subchannel, method, std::span<const uint32_t>(data.begin(), data.size()));
    }
    PushBuffer& nonincr(unsigned subchannel, uint32_t method, std::span<const uint32_t> data);
    PushBuffer& immediate(unsigned subchannel, uint32_t method, uint32_t data13);

    // SEM_ADDR_LO..SEM_EXECUTE as one incrementing run of five methods.
    PushBuffer& semaphore(uint64_t va, uint64_t payload, const SemExecute& exec);
    // Wait until the 64-bit (or 32-bit) value at va is >= value (ACQ_CIRC_GEQ: wrap-aware).
    PushBuffer& sem_acquire_geq(uint64_t va, uint64_t value, bool payload_64bit = true);
    // Write value (and, with timestamp, the GPU time at va + 8) after prior work finished (WFI).
    PushBuffer& sem_release(uint64_t va, uint64_t value, bool timestamp = true, bool payload_64bit = true);
    PushBuffer& non_stall_interrupt();

private:
    std::span<uint32_t> out_;
    HostClass host_;
    size_t pos_ = 0;
    void reserve(size_t n, const char* what) const;
};

// ---- the GPFIFO ring ----
// `entries` is the ring the GPU fetches from (gpFifoOffset, gpFifoEntries of the channel). put
// is the next slot the CPU writes, GPGet the next the GPU fetches; put == get means empty, so at
// most size - 1 entries are outstanding. An entry is only written once GPGet has passed its slot:
// the GPU may still be fetching the old one (GPGet: clc56f.h AmpereAControlGPFifo).
class GpFifoRing {
public:
    explicit GpFifoRing(std::span<uint64_t> entries);

    uint32_t size() const { return static_cast<uint32_t>(entries_.size()); }
    uint32_t put() const { return put_; }
    // Entries that can be written now given the GPU's GPGet. Throws ProtocolError when gp_get
    // is not a slot of the ring (a corrupt USERD read).
    uint32_t free_entries(uint32_t gp_get) const;

    // Writes entry at put and advances put (the caller then writes GPPut = put() to USERD,
    // fences and rings the doorbell). Returns false, writing nothing, when the ring is full.
    bool try_push(const GpEntry& entry, uint32_t gp_get);
    // As try_push, rereading GPGet with read_gp_get; while full, calls wait() and gives up
    // (returns false) when it returns false. wait() is where the caller bounds the time.
    bool push(const GpEntry& entry, const std::function<uint32_t()>& read_gp_get, const std::function<bool()>& wait);

private:
    std::span<uint64_t> entries_;
    uint32_t put_ = 0;
};

}  // namespace baregpu::nv
