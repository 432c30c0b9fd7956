// The simulated AD102 on the simulated PCI bus running a GPFIFO channel the way the driver will:
// page tables written through BAR1 by drivers/nv's PageTable, the TLB invalidate through BAR0, the
// doorbell (NV_VIRTUAL_FUNCTION_DOORBELL, BAR0 0xbb0090) rung with the channel's token.
#include "drivers/nv/gpfifo.hpp"
#include "drivers/nv/page_table.hpp"
#include "drivers/pci/pci_device.hpp"
#include "drivers/pci/sim_bus.hpp"
#include "drivers/sim/nvgpu/ad102.hpp"

#include <catch2/catch.hpp>

#include <chrono>

namespace ad102_channel_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::nv;
namespace nvsim = baregpu::sim::nvgpu;
using namespace std::chrono_literals;

TEST_CASE("AD102 model: a channel runs on a BAR0 doorbell, page tables written through BAR1", "[nv][sim][ad102]") {
    pci::sim::SimBus bus;
    auto m = nvsim::make_ad102();
    nvsim::Ad102Model* model = m.get();
    auto address = bus.attach(std::move(m));
    auto dev = bus.open(address);
    pci::MmioRegion& bar0 = dev->bar(0);
    pci::MmioRegion& bar1 = dev->bar(1);
    std::vector<std::pair<uint32_t, uint32_t>> invalidates;
    VramAllocator vram("sim", 0, 256u << 20);
    PageTable pt("sim", MmuVersion::v2, vram, [&](uint64_t at, uint64_t v) { bar1.write64(BarOffset(at), v); },
                 [&](uint32_t reg, uint32_t v) {
                     invalidates.emplace_back(reg, v);
                     bar0.write32(BarOffset(reg), v);
                 });
    auto block = vram.allocate(64 * 1024, true).blocks.front();  // ring, USERD, pushbuffer, semaphore
    const uint64_t va = 0x2000000000;
    pt.map(GpuVirtualAddress(va), block.offset, 64 * 1024, {});
    REQUIRE(invalidates.size() == 3);
    const uint64_t ring_va = va, userd_va = va + 0x1000, pb_va = va + 0x2000, sem_va = va + 0x3000;
    model->engines().register_channel(0x42, {ring_va, 8, userd_va, std::nullopt, pt.root(), nvsim::MmuFormat::v2, "channel 0x42"});

    std::vector<uint32_t> mem(32);
    PushBuffer pb(mem);
    pb.sem_release(sem_va, 0xfeedfacecafe, false);
    for (size_t i = 0; i < pb.size_dwords(); ++i) bar1.write32(BarOffset(block.offset + 0x2000 + 4 * i), pb.dwords()[i]);
    GpEntry e = gp_entry(pb_va, static_cast<uint32_t>(pb.size_dwords()));
    bar1.write64(BarOffset(block.offset), e.raw());
    bar1.write32(BarOffset(block.offset + 0x1000 + 0x8c), 1);  // USERD GPPut
    bar0.write32(BarOffset(0xbb0090), 0x42);                   // the doorbell
    REQUIRE(model->engines().wait_idle(0x42, 10s));
    CHECK_FALSE(model->engines().fault(0x42));
    CHECK(bar1.read64(BarOffset(block.offset + 0x3000)) == 0xfeedfacecafe);
    CHECK(bar1.read32(BarOffset(block.offset + 0x1000 + 0x88)) == 1);  // USERD GPGet
    CHECK(bus.violations().empty());

    bar0.write32(BarOffset(0xbb0090), 0x43);  // no such channel: a violation naming the token
    auto v = bus.violations();
    REQUIRE(v.size() == 1);
    CHECK(v[0].describe().find("0x43") != std::string::npos);
}

}  // namespace ad102_channel_test
