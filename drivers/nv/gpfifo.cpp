// GPFIFO entries, method headers, host semaphores and the ring (clc56f.h, clc86f.h; see gpfifo.hpp).
#include "drivers/nv/gpfifo.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

namespace baregpu::nv {
namespace {

// NVC56F_DMA_SEC_OP values (31:29).
constexpr uint32_t kSecOpIncMethod = 1, kSecOpNonIncMethod = 3, kSecOpImmdDataMethod = 4, kSecOpOneInc = 5;

uint32_t method_header(uint32_t sec_op, unsigned subchannel, uint32_t method, uint32_t count_or_data,
                       const char* what) {
    if (subchannel > 7)
        throw Error("", fmt::format("{}: subchannel {} is over 7 (DMA_METHOD_SUBCHANNEL 15:13)", what, subchannel));
    if (method & 3) throw Error("", fmt::format("{}: method {:#x} is not a dword offset", what, method));
    if ((method >> 2) > 0xFFF)
        throw Error("", fmt::format("{}: method {:#x} is beyond DMA_METHOD_ADDRESS 11:0 (dword {:#x})", what, method,
                                    method >> 2));
    if (count_or_data > 0x1FFF)
        throw Error("", fmt::format("{}: {:#x} does not fit in 13 bits (28:16)", what, count_or_data));
    return (sec_op << 29) | (count_or_data << 16) | (static_cast<uint32_t>(subchannel) << 13) | (method >> 2);
}

}  // namespace

GpEntry gp_entry(uint64_t va, uint32_t length_dwords, GpLevel level, GpFetch fetch, GpSync sync) {
    if (va & 3)
        throw Error("", fmt::format("GP entry: pushbuffer address {:#x} is not 4-byte aligned (GP_ENTRY0_GET 31:2)",
                                    va));
    if (va >> 40)
        throw Error("", fmt::format("GP entry: pushbuffer address {:#x} is at or above 2^40 (GP_ENTRY1_GET_HI 7:0)",
                                    va));
    if (length_dwords == 0 || length_dwords > 0x1FFFFF)
        throw Error("", fmt::format("GP entry: length {} dwords is outside 1..{:#x} (GP_ENTRY1_LENGTH 30:10)",
                                    length_dwords, 0x1FFFFF));
    GpEntry e;
    e.entry0 = static_cast<uint32_t>(va & 0xFFFFFFFCu) | static_cast<uint32_t>(fetch);
    e.entry1 = static_cast<uint32_t>(va >> 32) | (static_cast<uint32_t>(level) << 9) | (length_dwords << 10) |
               (static_cast<uint32_t>(sync) << 31);
    return e;
}

uint32_t method_incr(unsigned subchannel, uint32_t method, uint32_t count) {
    return method_header(kSecOpIncMethod, subchannel, method, count, "incrementing method");
}
uint32_t method_nonincr(unsigned subchannel, uint32_t method, uint32_t count) {
    return method_header(kSecOpNonIncMethod, subchannel, method, count, "non-incrementing method");
}
uint32_t method_one_incr(unsigned subchannel, uint32_t method, uint32_t count) {
    return method_header(kSecOpOneInc, subchannel, method, count, "increment-once method");
}
uint32_t method_immediate(unsigned subchannel, uint32_t method, uint32_t data13) {
    return method_header(kSecOpImmdDataMethod, subchannel, method, data13, "immediate-data method");
}

uint32_t SemExecute::word() const {
    return static_cast<uint32_t>(operation) | (uint32_t{acquire_switch_tsg} << 12) | (uint32_t{release_wfi} << 20) |
           (uint32_t{payload_64bit} << 24) | (uint32_t{release_timestamp} << 25);
}

void PushBuffer::reserve(size_t n, const char* what) const {
    if (n > out_.size() - pos_)
        throw Error("", fmt::format("pushbuffer full: {} needs {} dwords, {} of {} left", what, n, out_.size() - pos_,
                                    out_.size()));
}

PushBuffer& PushBuffer::incr(unsigned subchannel, uint32_t method, std::span<const uint32_t> data) {
    const uint32_t header = method_incr(subchannel, method, static_cast<uint32_t>(data.size()));
    reserve(1 + data.size(), "incrementing method");
    out_[pos_++] = header;
    for (uint32_t d : data) out_[pos_++] = d;
    return *this;
}

PushBuffer& PushBuffer::nonincr(unsigned subchannel, uint32_t method, std::span<const uint32_t> data) {
    const uint32_t header = method_nonincr(subchannel, method, static_cast<uint32_t>(data.size()));
    reserve(1 + data.size(), "non-incrementing method");
    out_[pos_++] = header;
    for (uint32_t d : data) out_[pos_++] = d;
    return *this;
}

PushBuffer& PushBuffer::immediate(unsigned subchannel, uint32_t method, uint32_t data13) {
    const uint32_t header = method_immediate(subchannel, method, data13);
    reserve(1, "immediate-data method");
    out_[pos_++] = header;
    return *this;
}

PushBuffer& PushBuffer::semaphore(uint64_t va, uint64_t payload, const SemExecute& exec) {
    // SEM_ADDR_LO_OFFSET 31:2; SEM_ADDR_HI_OFFSET 7:0 (clc56f.h) or 24:0 (clc86f.h).
    const unsigned hi_bits = host_ == HostClass::hopper_c86f ? 25 : 8;
    if (va & 3) throw Error("", fmt::format("semaphore address {:#x} is not 4-byte aligned (SEM_ADDR_LO 31:2)", va));
    if ((va >> 32) >> hi_bits)
        throw Error("", fmt::format("semaphore address {:#x} is beyond {} bits (SEM_ADDR_HI_OFFSET of class {:#x})", va,
                                    32 + hi_bits, static_cast<uint32_t>(host_)));
    if (!exec.payload_64bit && (payload >> 32))
        throw Error("", fmt::format("32-bit semaphore payload {:#x} is over 32 bits", payload));
    const uint32_t words[5] = {static_cast<uint32_t>(va), static_cast<uint32_t>(va >> 32),
                               static_cast<uint32_t>(payload), static_cast<uint32_t>(payload >> 32), exec.word()};
    return incr(0, host::SEM_ADDR_LO, words);
}

PushBuffer& PushBuffer::sem_acquire_geq(uint64_t va, uint64_t value, bool payload_64bit) {
    SemExecute e;
    e.operation = SemOperation::acq_circ_geq;
    e.payload_64bit = payload_64bit;
    return semaphore(va, value, e);
}

PushBuffer& PushBuffer::sem_release(uint64_t va, uint64_t value, bool timestamp, bool payload_64bit) {
    SemExecute e;
    e.operation = SemOperation::release;
    e.release_wfi = true;
    e.payload_64bit = payload_64bit;
    e.release_timestamp = timestamp;
    return semaphore(va, value, e);
}

PushBuffer& PushBuffer::non_stall_interrupt() {
    // NON_STALL_INTERRUPT_HANDLE 31:0; the handle value is unused by the host, 0 as Mesa's nouveau Vulkan driver does.
    return incr(0, host::NON_STALL_INTERRUPT, {0u});
}

GpFifoRing::GpFifoRing(std::span<uint64_t> entries) : entries_(entries) {
    if (entries_.size() < 2 || entries_.size() > 0x80000000u)
        throw Error("", fmt::format("GPFIFO ring of {} entries: need 2 .. 2^31", entries_.size()));
}

uint32_t GpFifoRing::free_entries(uint32_t gp_get) const {
    if (gp_get >= size())
        throw ProtocolError("", fmt::format("GPFIFO: GPGet {} is not a slot of a {}-entry ring (put {})", gp_get,
                                            size(), put_));
    const uint32_t outstanding = put_ >= gp_get ? put_ - gp_get : put_ + size() - gp_get;
    return size() - 1 - outstanding;
}

bool GpFifoRing::try_push(const GpEntry& entry, uint32_t gp_get) {
    if (free_entries(gp_get) == 0) return false;
    entries_[put_] = entry.raw();
    put_ = put_ + 1 == size() ? 0 : put_ + 1;
    return true;
}

bool GpFifoRing::push(const GpEntry& entry, const std::function<uint32_t()>& read_gp_get,
                      const std::function<bool()>& wait) {
    for (;;) {
        if (try_push(entry, read_gp_get())) return true;
        if (!wait()) return false;
    }
}

}  // namespace baregpu::nv
