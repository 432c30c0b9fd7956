// What the compute (PM4) and copy (SDMA) queues share: a ring and its control words in host
// memory, the 64-bit write pointer, tickets written by a fence packet at the end of every
// submission, waiting for ring space and for tickets with the device's fault polling, and the
// bookkeeping of a restart after a fault. Pointer units are the engine's: dwords for PM4, bytes
// for SDMA.
#pragma once

#include "hcq/engine.hpp"
#include "hcq/memory.hpp"

#include <cstdint>
#include <mutex>

namespace baregpu::am {

class AmHcqDevice;

class RingQueue : public hcq::Engine {
public:
    uint64_t completed_ticket() const noexcept override;
    void wait_ticket(uint64_t ticket, hcq::Duration timeout) override;

    // After the engine stopped, before the device's memory manager goes: give the memory back.
    virtual void release() noexcept;

    GpuVirtualAddress ring_address() const { return ring_.address(); }
    // The 64-bit write pointer (units since the queue was last (re)started) and how often the ring
    // wrapped since.
    uint64_t write_pointer() const { return wptr_; }
    uint64_t wraps() const { return wptr_ / ring_units_; }

protected:
    // ring_units: the ring's size in pointer units; unit_bytes: bytes per unit (4 or 1).
    RingQueue(AmHcqDevice& device, hcq::QueueKind kind, std::string name, uint64_t ring_units, uint64_t unit_bytes);

    // The ring and the control page: write pointer at +0, the engine's read pointer report at
    // +0x100, the fence (last completed ticket) at +0x200. Host memory, as tinygrad's AM queues
    // have them (tinygrad ops_amd.py AMDDevice.__init__ create_queue): the CPU writes them at memory speed, no HDP flush needed.
    void allocate_ring();
    GpuVirtualAddress wptr_address() const { return control_.address(); }
    GpuVirtualAddress rptr_address() const { return control_.address() + 0x100; }
    GpuVirtualAddress fence_address() const { return control_.address() + 0x200; }
    uint64_t read_pointer() const noexcept;  // what the engine last reported
    // Over a shadowed link: read the engine's read pointer and fence back from device memory;
    // true when they moved.
    bool refresh_progress();
    // Blocks (bounded by the default timeout, polling faults) until `units` more fit in the ring
    // without passing what the fence says completed. Throws TimeoutError or DeviceLostError.
    void wait_for_space(uint64_t units);
    // Stores the write pointer where the engine polls it, fenced before the doorbell that follows.
    void publish_wptr();
    // A restart after a fault: tickets stay monotonic (everything handed out counts as done) and
    // the pointers go back to 0. Caller holds mutex_ and re-enables the engine afterwards.
    void reset_pointers();
    // The ticket a fence written after `units_before_fence` more units will carry.
    uint64_t ticket_at(uint64_t wptr) const { return base_ + wptr; }

    AmHcqDevice& device_;
    const uint64_t ring_units_;
    const uint64_t unit_bytes_;
    hcq::Buffer ring_, control_;
    uint32_t* ring_words_ = nullptr;
    mutable std::mutex mutex_;
    uint64_t wptr_ = 0;  // units since the engine was (re)started
    uint64_t base_ = 0;  // tickets handed out before the last restart

private:
    uint64_t* wptr_word_ = nullptr;
    uint64_t* rptr_word_ = nullptr;
    uint64_t* fence_word_ = nullptr;
    uint64_t published_wptr_ = 0;  // over a shadowed link: the ring is in VRAM up to here
};

}  // namespace baregpu::am
