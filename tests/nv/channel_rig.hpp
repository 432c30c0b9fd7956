// A test rig for the simulated AD102's engines: 1 GiB of VRAM, drivers/nv's VRAM allocator and
// MMU v2 page table writing into it (as through BAR1), GpuEngines over it, and one GPFIFO channel
// (ring, USERD, pushbuffer memory) submitted with drivers/nv's GpFifoRing.
#pragma once

#include "base/error.hpp"
#include "drivers/nv/gpfifo.hpp"
#include "drivers/nv/page_table.hpp"
#include "drivers/sim/nvgpu/gpu_engines.hpp"
#include "fake_sim_port.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <vector>

namespace baregpu::test {

using namespace baregpu::nv;
namespace nvsim = baregpu::sim::nvgpu;
using namespace std::chrono_literals;

inline constexpr uint64_t MiB = uint64_t{1} << 20, GiB = uint64_t{1} << 30;
inline constexpr uint32_t kToken = 7;
inline constexpr auto kTimeout = 10s;

struct Rig {
    AnonymousVram vram{GiB};
    FakeSimPort port{0x80000000, 1 << 20};
    VramAllocator alloc{"test", 0, GiB};
    PageTable pt;
    nvsim::GpuEngines engines{"sim:test-ad102", vram.span(), &port};
    uint64_t next_va = 0x1000000000;

    uint64_t gpfifo_va, userd_va, pb_va;
    std::span<uint64_t> gpfifo;
    GpFifoRing ring;
    uint64_t pb_used = 0;

    // host_class: the channel's GPFIFO class as RM would announce it (0: Ampere's rules; 0xc86f: Hopper's).
    explicit Rig(uint32_t entries = 16, MmuVersion version = MmuVersion::v2, uint32_t host_class = 0)
        : pt("test", version, alloc,
             [this](uint64_t at, uint64_t value) { std::memcpy(vram.span().data() + at, &value, 8); },
             [](uint32_t, uint32_t) {}),
          gpfifo_va(map(entries * 8, true)), userd_va(map(512, true)), pb_va(map(256 * 1024, true)),
          gpfifo(reinterpret_cast<uint64_t*>(host(gpfifo_va)), entries), ring(gpfifo) {
        engines.register_channel(kToken, {gpfifo_va, entries, userd_va, std::nullopt, pt.root(),
                                          version == MmuVersion::v2 ? nvsim::MmuFormat::v2 : nvsim::MmuFormat::v3,
                                          "channel 7", host_class});
    }

    // Maps `bytes` of fresh VRAM at the next free VA (2 MiB aligned, so big allocations get big leaves).
    uint64_t map(uint64_t bytes, bool contiguous = false) {
        auto a = alloc.allocate(bytes, contiguous);
        uint64_t va = next_va, at = va;
        for (const auto& b : a.blocks) {
            pt.map(GpuVirtualAddress(at), b.offset, b.size, {});
            at += b.size;
        }
        next_va = (at + 2 * MiB - 1) & ~(2 * MiB - 1);
        return va;
    }
    // The host's view of VRAM behind va (as through BAR1), valid inside one leaf.
    std::byte* host(uint64_t va) {
        auto leaf = pt.lookup(GpuVirtualAddress(va));
        REQUIRE(leaf);
        return vram.span().data() + leaf->address;
    }
    uint64_t read64(uint64_t va) {
        uint64_t v;
        std::memcpy(&v, host(va), 8);
        return v;
    }
    void write64(uint64_t va, uint64_t v) { std::memcpy(host(va), &v, 8); }
    uint32_t userd_gp_get() {
        uint32_t v;
        std::memcpy(&v, host(userd_va + 0x88), 4);
        return v;
    }
    // Copies the pushbuffer into the channel's pushbuffer memory and queues one GP entry.
    bool submit(const PushBuffer& pb, bool wait_for_space = false) {
        auto words = pb.dwords();
        uint64_t va = pb_va + pb_used;
        std::memcpy(host(va), words.data(), words.size() * 4);
        pb_used += (words.size() * 4 + 255) & ~uint64_t{255};
        GpEntry e = gp_entry(va, static_cast<uint32_t>(words.size()));
        bool ok = wait_for_space
                      ? ring.push(e, [&] { return userd_gp_get(); }, [&] { return engines.wait_idle(kToken, kTimeout); })
                      : ring.try_push(e, userd_gp_get());
        if (!ok) return false;
        uint32_t put = ring.put();
        std::memcpy(host(userd_va + 0x8c), &put, 4);  // USERD GPPut, then the doorbell
        REQUIRE(engines.doorbell(kToken));
        return true;
    }
};

inline std::vector<uint32_t> buffer(size_t n) { return std::vector<uint32_t>(n); }

}  // namespace baregpu::test
