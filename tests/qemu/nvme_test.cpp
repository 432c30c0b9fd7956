// QEMU's NVMe controller through our vfio backend: the controller registers, then the first
// steps of a userspace NVMe driver (NVM Express Base Specification 1.4): admin queues in our DMA
// buffers, Identify Controller, one I/O queue pair, and a Read of LBA 0 into a DMA buffer. The
// harness writes a known signature into LBA 0 of the disk image.
#include "base/error.hpp"
#include "tests/qemu/guest_devices.hpp"
#include "tests/qemu/guest_runner.hpp"
#include "tests/qemu/guest_tests.hpp"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <thread>

namespace baregpu::qemu {

namespace {

// Controller registers (NVMe 1.4 section 3.1).
constexpr uint64_t kCap = 0x00;
constexpr uint64_t kVs = 0x08;
constexpr uint64_t kCc = 0x14;
constexpr uint64_t kCsts = 0x1c;
constexpr uint64_t kAqa = 0x24;
constexpr uint64_t kAsq = 0x28;
constexpr uint64_t kAcq = 0x30;
constexpr uint64_t kDoorbells = 0x1000;
constexpr uint32_t kCcEnable = 1;
constexpr uint32_t kCcIosqes64 = 6u << 16;  // I/O submission entries: 2^6 bytes
constexpr uint32_t kCcIocqes16 = 4u << 20;  // I/O completion entries: 2^4 bytes
constexpr uint32_t kCstsReady = 1;
constexpr uint32_t kCstsFatal = 2;
// Opcodes (section 5, admin; section 6, NVM).
constexpr uint8_t kAdminCreateIoSq = 0x01;
constexpr uint8_t kAdminCreateIoCq = 0x05;
constexpr uint8_t kAdminIdentify = 0x06;
constexpr uint8_t kNvmRead = 0x02;
constexpr uint32_t kQueueEntries = 16;

// The signature run_qemu_tests.py writes at byte 0 of the disk image.
constexpr std::string_view kLba0Signature = "baregpu qemu nvme LBA 0";

struct Command {
    uint32_t cdw0 = 0;  // opcode | command id << 16
    uint32_t nsid = 0;
    uint64_t reserved = 0;
    uint64_t metadata = 0;
    uint64_t prp1 = 0;
    uint64_t prp2 = 0;
    uint32_t cdw10 = 0, cdw11 = 0, cdw12 = 0, cdw13 = 0, cdw14 = 0, cdw15 = 0;
};
static_assert(sizeof(Command) == 64);

struct Completion {
    uint32_t dw0, dw1;
    uint16_t sq_head, sq_id;
    uint16_t command_id, status;  // status: phase bit 0, status field 15:1
};
static_assert(sizeof(Completion) == 16);

class Queue {
public:
    Queue(pci::PciDevice& dev, unsigned id, uint32_t stride) : dev_(dev), id_(id), stride_(stride) {
        sq_ = dev.alloc_dma(4096);
        cq_ = dev.alloc_dma(4096);
        std::memset(sq_->cpu().data(), 0, 4096);
        std::memset(cq_->cpu().data(), 0, 4096);
    }
    uint64_t sq_bus() const { return sq_->bus_address().value(); }
    uint64_t cq_bus() const { return cq_->bus_address().value(); }

    // Submits and waits (deadline) for the completion; returns the completion's dw0.
    uint32_t run(Command cmd, const char* what) {
        cmd.cdw0 |= static_cast<uint32_t>(next_id_++) << 16;
        std::memcpy(sq_->cpu().data() + tail_ * sizeof(Command), &cmd, sizeof cmd);
        tail_ = (tail_ + 1) % kQueueEntries;
        std::atomic_thread_fence(std::memory_order_release);  // the entry before the doorbell
        dev_.bar(0).write32(BarOffset{kDoorbells + (2 * id_) * stride_}, tail_);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        for (;;) {
            Completion c;
            std::memcpy(&c, cq_->cpu().data() + head_ * sizeof(Completion), sizeof c);
            if ((c.status & 1) == phase_) {
                head_ = (head_ + 1) % kQueueEntries;
                if (head_ == 0) phase_ ^= 1;
                dev_.bar(0).write32(BarOffset{kDoorbells + (2 * id_ + 1) * stride_}, head_);
                uint16_t status = c.status >> 1;
                check(status == 0, fmt::format("{}: {} on queue {} completed with status 0x{:x} (SCT {}, SC 0x{:02x})",
                                               dev_.name(), what, id_, status, (status >> 8) & 7, status & 0xff));
                return c.dw0;
            }
            check(std::chrono::steady_clock::now() < deadline,
                  fmt::format("{}: {} on queue {}: no completion within 10 s (CSTS 0x{:x})", dev_.name(), what, id_,
                              dev_.bar(0).read32(BarOffset{kCsts})));
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    }

private:
    pci::PciDevice& dev_;
    unsigned id_;
    uint32_t stride_;
    std::unique_ptr<pci::DmaBuffer> sq_, cq_;
    uint32_t tail_ = 0, head_ = 0;
    uint16_t phase_ = 1, next_id_ = 1;
};

void wait_ready(pci::PciDevice& dev, bool ready, uint64_t cap) {
    // CAP.TO: worst-case time to change CSTS.RDY, in 500 ms units.
    auto timeout = std::chrono::milliseconds(500 * std::max<uint64_t>(1, (cap >> 24) & 0xff));
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        uint32_t csts = dev.bar(0).read32(BarOffset{kCsts});
        check((csts & kCstsFatal) == 0, fmt::format("{}: CSTS 0x{:x}: controller fatal status", dev.name(), csts));
        if (((csts & kCstsReady) != 0) == ready) return;
        check(std::chrono::steady_clock::now() < deadline,
              fmt::format("{}: CSTS.RDY still {} after CAP.TO ({} ms), expected {}", dev.name(), !ready,
                          timeout.count(), ready));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

}  // namespace

void nvme_registers() {
    auto dev = open_vfio(kNvme);
    uint64_t cap = dev->bar(0).read64(BarOffset{kCap});
    uint32_t vs = dev->bar(0).read32(BarOffset{kVs});
    std::printf("%s: CAP 0x%016llx VS 0x%08x (NVMe %u.%u)\n", dev->name().c_str(), static_cast<unsigned long long>(cap),
                vs, vs >> 16, (vs >> 8) & 0xff);
    check((vs >> 16) >= 1, fmt::format("{}: VS 0x{:08x}, expected major version 1 or later", kNvme, vs));
    uint32_t mqes = static_cast<uint32_t>(cap & 0xffff) + 1;
    check(mqes >= kQueueEntries, fmt::format("{}: CAP.MQES allows {} entries, expected at least {}", kNvme, mqes,
                                             kQueueEntries));
    check(((cap >> 37) & 1) != 0, fmt::format("{}: CAP.CSS lacks the NVM command set (CAP 0x{:x})", kNvme, cap));
}

void nvme_identify_and_read() {
    auto dev = open_vfio(kNvme);
    dev->set_bus_master(true);
    uint64_t cap = dev->bar(0).read64(BarOffset{kCap});
    uint32_t stride = 4u << ((cap >> 32) & 0xf);  // CAP.DSTRD
    check(((cap >> 48) & 0xf) == 0, fmt::format("{}: CAP.MPSMIN is not 4 KiB (CAP 0x{:x})", kNvme, cap));

    // Reset, set up the admin queues, enable (NVMe 1.4 section 7.6.1).
    dev->bar(0).write32(BarOffset{kCc}, 0);
    wait_ready(*dev, false, cap);
    Queue admin(*dev, 0, stride);
    dev->bar(0).write32(BarOffset{kAqa}, (kQueueEntries - 1) << 16 | (kQueueEntries - 1));
    dev->bar(0).write64(BarOffset{kAsq}, admin.sq_bus());
    dev->bar(0).write64(BarOffset{kAcq}, admin.cq_bus());
    dev->bar(0).write32(BarOffset{kCc}, kCcEnable | kCcIosqes64 | kCcIocqes16);
    wait_ready(*dev, true, cap);

    auto data = dev->alloc_dma(4096);
    Command identify;
    identify.cdw0 = kAdminIdentify;
    identify.prp1 = data->bus_address().value();
    identify.cdw10 = 1;  // CNS 1: Identify Controller
    admin.run(identify, "Identify Controller");
    const auto* id = reinterpret_cast<const char*>(data->cpu().data());
    uint16_t vid;
    std::memcpy(&vid, id, 2);
    std::string serial(id + 4, 20), model(id + 24, 40);
    std::printf("Identify Controller: VID 0x%04x serial '%s' model '%s'\n", vid, serial.c_str(), model.c_str());
    check(serial.rfind("baregpu0", 0) == 0,
          fmt::format("{}: Identify serial '{}', expected the harness's 'baregpu0'", kNvme, serial));

    std::memset(data->cpu().data(), 0, 4096);
    identify.cdw10 = 0;  // CNS 0: Identify Namespace
    identify.nsid = 1;
    admin.run(identify, "Identify Namespace 1");
    uint64_t nsze;
    std::memcpy(&nsze, data->cpu().data(), 8);
    uint8_t flbas = static_cast<uint8_t>(data->cpu()[26]) & 0xf;
    uint32_t lbaf;
    std::memcpy(&lbaf, data->cpu().data() + 128 + 4 * flbas, 4);
    unsigned lba_bytes = 1u << ((lbaf >> 16) & 0xff);
    std::printf("namespace 1: %llu blocks of %u bytes\n", static_cast<unsigned long long>(nsze), lba_bytes);
    check(nsze > 0 && lba_bytes >= 512 && lba_bytes <= 4096,
          fmt::format("{}: namespace 1 has {} blocks of {} bytes", kNvme, nsze, lba_bytes));

    Queue io(*dev, 1, stride);
    Command create_cq;
    create_cq.cdw0 = kAdminCreateIoCq;
    create_cq.prp1 = io.cq_bus();
    create_cq.cdw10 = (kQueueEntries - 1) << 16 | 1;
    create_cq.cdw11 = 1;  // physically contiguous, interrupts off: we poll
    admin.run(create_cq, "Create I/O Completion Queue 1");
    Command create_sq;
    create_sq.cdw0 = kAdminCreateIoSq;
    create_sq.prp1 = io.sq_bus();
    create_sq.cdw10 = (kQueueEntries - 1) << 16 | 1;
    create_sq.cdw11 = 1u << 16 | 1;  // completion queue 1, physically contiguous
    admin.run(create_sq, "Create I/O Submission Queue 1");

    std::memset(data->cpu().data(), 0xee, 4096);
    Command read;
    read.cdw0 = kNvmRead;
    read.nsid = 1;
    read.prp1 = data->bus_address().value();
    read.cdw10 = 0;  // starting LBA 0
    read.cdw12 = 0;  // one block (0-based)
    io.run(read, "Read LBA 0");
    std::string got(reinterpret_cast<const char*>(data->cpu().data()), kLba0Signature.size());
    check(got == kLba0Signature,
          fmt::format("{}: LBA 0 read into IOVA 0x{:x} starts '{}', expected '{}'", kNvme, data->bus_address().value(),
                      got, kLba0Signature));
    std::printf("LBA 0 read through the IOMMU into our DMA buffer: '%s'\n", got.c_str());
    dev->bar(0).write32(BarOffset{kCc}, 0);
    wait_ready(*dev, false, cap);
}

}  // namespace baregpu::qemu
