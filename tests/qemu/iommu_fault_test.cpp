// The acceptance point that the IOMMU is really in the DMA path: edu asked to DMA to an IOVA
// that nothing mapped must not reach memory, and the kernel's DMAR driver must report the
// blocked write for our device at that address. A control transfer to the mapped IOVA, in the
// same test and the same code path, must succeed.
#include "base/error.hpp"
#include "drivers/sim/edu.hpp"
#include "tests/qemu/guest_devices.hpp"
#include "tests/qemu/guest_runner.hpp"
#include "tests/qemu/guest_tests.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

namespace baregpu::qemu {

namespace edu = sim::edu;

namespace {

// /dev/kmsg positioned at its end, so only records logged from now on are read.
class KernelLog {
public:
    KernelLog() : fd_(::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC)) {
        check(fd_ >= 0, fmt::format("open /dev/kmsg: {}", std::strerror(errno)));
        ::lseek(fd_, 0, SEEK_END);
    }
    ~KernelLog() { ::close(fd_); }
    KernelLog(const KernelLog&) = delete;
    KernelLog& operator=(const KernelLog&) = delete;

    // The first new record containing every one of `needles`, waiting up to `timeout`.
    std::string wait_for(std::initializer_list<std::string> needles, std::chrono::milliseconds timeout) {
        auto deadline = std::chrono::steady_clock::now() + timeout;
        char record[2048];
        for (;;) {
            ssize_t n = ::read(fd_, record, sizeof record - 1);
            if (n > 0) {
                std::string text(record, static_cast<size_t>(n));
                bool all = true;
                for (const std::string& needle : needles) all = all && text.find(needle) != std::string::npos;
                if (all) return text;
                continue;
            }
            if (n < 0 && errno == EPIPE) continue;  // records overwritten while we read: carry on
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) return {};
            pollfd pfd{fd_, POLLIN, 0};
            ::poll(&pfd, 1, static_cast<int>(left.count()));
        }
    }

private:
    int fd_;
};

}  // namespace

void edu_unmapped_iova_faults() {
    auto dev = open_vfio(kEdu);
    dev->set_dma_address_bits(edu::kDefaultDmaBits);
    dev->set_bus_master(true);
    auto buffer = dev->alloc_dma(4096);
    auto cpu = buffer->cpu();
    for (size_t i = 0; i < cpu.size(); ++i) cpu[i] = std::byte(static_cast<uint8_t>(0xc3 ^ i));
    uint64_t mapped = buffer->bus_address().value();
    uint64_t unmapped = mapped + 4096;  // the page after our only buffer: mapped by nobody

    // Control: the mapped IOVA works (edu's buffer now holds the pattern).
    edu_dma(*dev, EduDirection::ToDevice, mapped, 0, kEduDmaBytes);

    KernelLog log;
    // edu -> host memory at the unmapped IOVA: the IOMMU must block the write and say so.
    edu_dma(*dev, EduDirection::FromDevice, unmapped, 0, kEduDmaBytes);
    // 6.1's dmar_fault_do_one: "[DMA Write NO_PASID] Request device [00:10.0] fault addr 0x...".
    std::string bdf = std::string(kEdu.substr(5));  // "00:10.0"
    std::string fault = log.wait_for({"fault addr", fmt::format("[{}]", bdf), fmt::format("0x{:x}", unmapped)},
                                     std::chrono::seconds(3));
    check(!fault.empty(), fmt::format("{}: DMA write to unmapped IOVA 0x{:x}: no DMAR fault for [{}] at that address in "
                                      "the kernel log within 3 s",
                                      kEdu, unmapped, bdf));
    std::printf("kernel: %s", fault.c_str());

    // host memory -> edu from the unmapped IOVA: whatever edu receives, it is not our data.
    // First clear edu's buffer through the mapped page, then read from the unmapped one into it.
    std::vector<std::byte> pattern(cpu.begin(), cpu.end());
    std::memset(cpu.data(), 0x11, cpu.size());
    edu_dma(*dev, EduDirection::ToDevice, mapped, 0, kEduDmaBytes);
    std::memcpy(cpu.data(), pattern.data(), cpu.size());
    edu_dma(*dev, EduDirection::ToDevice, unmapped, 0, kEduDmaBytes);
    fault = log.wait_for({"fault addr", fmt::format("[{}]", bdf), fmt::format("0x{:x}", unmapped)},
                         std::chrono::seconds(3));
    check(!fault.empty(), fmt::format("{}: DMA read from unmapped IOVA 0x{:x}: no DMAR fault in the kernel log", kEdu,
                                      unmapped));
    std::printf("kernel: %s", fault.c_str());
    std::memset(cpu.data(), 0, cpu.size());
    edu_dma(*dev, EduDirection::FromDevice, mapped, 0, kEduDmaBytes);
    check(std::memcmp(cpu.data(), pattern.data(), kEduDmaBytes) != 0,
          fmt::format("{}: edu's buffer holds our pattern after a DMA from unmapped IOVA 0x{:x}", kEdu, unmapped));
    std::printf("DMA to and from unmapped IOVA 0x%llx blocked and reported by the IOMMU\n",
                static_cast<unsigned long long>(unmapped));
}

}  // namespace baregpu::qemu
