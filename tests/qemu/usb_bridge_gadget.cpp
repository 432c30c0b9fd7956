#include "tests/qemu/usb_bridge_gadget.hpp"

#include "drivers/sim/asm24/sim_asm24.hpp"
#include "drivers/sim/edu.hpp"
#include "drivers/usb/asm24_protocol.hpp"
#include "tests/qemu/usb_gadget.hpp"

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <endian.h>
#include <exception>
#include <fcntl.h>
#include <linux/usb/ch9.h>
#include <linux/usb/functionfs.h>
#include <mutex>
#include <optional>
#include <thread>
#include <unistd.h>
#include <vector>

namespace baregpu::qemu {

namespace {

namespace a24 = usb::asm24;

// The data phases the model has armed, handed from the ep0 thread to the bulk thread (the host
// starts a bulk transfer only after the control transfer that arms it has completed).
// `outstanding` counts jobs not yet through the model: a host whose bulk transfer completed has the
// bridge's word that the data arrived, so its next control request must find the model past it;
// the two FunctionFS files are read by two threads, so ep0 waits for the bulk thread first.
struct BulkJobs {
    std::mutex mutex;
    std::condition_variable ready, drained;
    std::deque<sim::asm24::SimAsm24Bridge::ArmedTransfer> jobs;
    unsigned outstanding = 0;
    bool in_queued = false;  // an IN job whose data the model has not produced yet
};

// Queues the data phase the model has armed once the model would serve it (an SRAM read after
// the device's write to the CQ window, which a request or a bulk OUT stream may cause), each IN
// phase once. Called with queue.mutex held, after each control request and each bulk job.
void queue_armed(sim::asm24::SimAsm24Bridge& bridge, BulkJobs& queue) {
    std::optional<sim::asm24::SimAsm24Bridge::ArmedTransfer> armed = bridge.armed();
    if (!armed || !armed->ready) return;
    if (armed->endpoint == a24::kBulkIn) {
        if (queue.in_queued) return;
        queue.in_queued = true;
    }
    queue.jobs.push_back(*armed);
    ++queue.outstanding;
    queue.ready.notify_one();
}

void record(const std::string& line) {
    std::printf("asm24 gadget: %s\n", line.c_str());
    std::fflush(stdout);
    if (FILE* f = std::fopen(kAsm24GadgetViolations, "a")) {
        std::fprintf(f, "%s\n", line.c_str());
        std::fclose(f);
    }
}

void log_error(const char* what, const std::exception& e) { record(std::string(what) + ": " + e.what()); }

void report_violations(sim::asm24::SimAsm24Bridge& bridge) {
    for (const sim::asm24::Violation& v : bridge.violations()) record("violation: " + v.describe());
    bridge.clear_violations();
}

// Moves exactly `bytes` through a FunctionFS endpoint file, riding out endpoint resets
// (ESHUTDOWN while the host re-selects the configuration).
bool transfer(int fd, std::byte* data, size_t bytes, bool in) {
    size_t done = 0;
    while (done < bytes) {
        ssize_t n = in ? ::write(fd, data + done, bytes - done) : ::read(fd, data + done, bytes - done);
        if (n < 0) {
            if (errno == EINTR || errno == ESHUTDOWN) {
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
                continue;
            }
            std::printf("asm24 gadget: bulk %s: %s\n", in ? "IN" : "OUT", std::strerror(errno));
            std::fflush(stdout);
            return false;
        }
        done += static_cast<size_t>(n);
    }
    return true;
}

void bulk_loop(sim::asm24::SimAsm24Bridge& bridge, BulkJobs& queue) {
    int out = ::open(gadget_bulk_out_path().c_str(), O_RDONLY | O_CLOEXEC);
    int in = ::open(gadget_bulk_in_path().c_str(), O_WRONLY | O_CLOEXEC);
    for (;;) {
        sim::asm24::SimAsm24Bridge::ArmedTransfer job;
        {
            std::unique_lock lock(queue.mutex);
            queue.ready.wait(lock, [&] { return !queue.jobs.empty(); });
            job = queue.jobs.front();
            queue.jobs.pop_front();
        }
        std::vector<std::byte> data(job.bytes);
        const auto model_bulk = [&](uint8_t endpoint) {
            try {
                bridge.bulk(endpoint, data, std::chrono::milliseconds(0));
                return true;
            } catch (const std::exception& e) {
                log_error("bulk", e);
                return false;
            }
        };
        const auto through_model = [&] {
            report_violations(bridge);
            std::lock_guard lock(queue.mutex);
            if (job.endpoint == a24::kBulkIn) queue.in_queued = false;
            queue_armed(bridge, queue);  // a stream may have made the device release an SRAM read
            --queue.outstanding;
            queue.drained.notify_all();
        };
        if (job.endpoint == a24::kBulkIn) {
            // The model is past an IN job once it has produced the data, not when the host takes
            // it: the host may send control requests first (a TLP read between an SRAM arm and its
            // bulk IN).
            const bool produced = model_bulk(a24::kBulkIn);
            through_model();
            if (produced && !transfer(in, data.data(), data.size(), true)) return;
            continue;
        }
        if (!transfer(out, data.data(), data.size(), false)) return;
        model_bulk(a24::kBulkOut);
        through_model();
    }
}

[[noreturn]] void serve_bridge(int ep0) {
    sim::asm24::SimAsm24Bridge::Options options;
    options.name = "usb:gadget";
    options.vendor_id = a24::kCustomVendor;
    options.product_id = a24::kCustomProduct;
    // A PCI Express edu (4 KiB config space): the usb backend reads extended capabilities, and a
    // bridge like this one only ever carries PCIe endpoints.
    sim::EduDevice::Options edu_options;
    edu_options.pci_express = true;
    sim::asm24::SimAsm24Bridge bridge(options, std::make_unique<sim::EduDevice>(edu_options));
    // The host claims interface 0 before any vendor request; FunctionFS does not tell us when,
    // so the model is told up front.
    bridge.claim_interface(0, 0);
    BulkJobs queue;
    std::thread(bulk_loop, std::ref(bridge), std::ref(queue)).detach();
    for (;;) {
        usb_functionfs_event event{};
        ssize_t n = ::read(ep0, &event, sizeof event);
        if (n < 0 && errno == EINTR) continue;
        if (n != static_cast<ssize_t>(sizeof event)) ::_exit(0);
        if (event.type != FUNCTIONFS_SETUP) continue;
        const usb_ctrlrequest& setup = event.u.setup;
        {
            // Bounded: a host may legitimately send a request between an arm and its data phase.
            std::unique_lock lock(queue.mutex);
            queue.drained.wait_for(lock, std::chrono::seconds(2), [&] { return queue.outstanding == 0; });
        }
        std::vector<std::byte> data(le16toh(setup.wLength));
        bool in = (setup.bRequestType & USB_DIR_IN) != 0;
        if (!in && !data.empty() && ::read(ep0, data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
            continue;
        }
        size_t answered = 0;
        bool stalled = false;
        try {
            answered = bridge.control(setup.bRequestType, setup.bRequest, le16toh(setup.wValue), le16toh(setup.wIndex),
                                      data, std::chrono::milliseconds(0));
        } catch (const std::exception& e) {
            log_error("control", e);
            stalled = true;
        }
        if (in) {
            if (stalled) {
                (void)!::read(ep0, &answered, 0);  // a read on an IN setup stalls ep0
            } else {
                (void)!::write(ep0, data.data(), answered);
            }
        } else if (data.empty()) {
            if (stalled) {
                (void)!::write(ep0, &answered, 0);  // a write on an OUT setup stalls ep0
            } else {
                (void)!::read(ep0, &answered, 0);  // status stage of a request with no data
            }
        }
        report_violations(bridge);
        std::lock_guard lock(queue.mutex);
        queue_armed(bridge, queue);
    }
}

}  // namespace

pid_t start_asm24_gadget() {
    std::remove(kAsm24GadgetViolations);
    return start_gadget({a24::kCustomVendor, a24::kCustomProduct, "custom ASM2464 firmware (emulated, tests/qemu)"},
                        [](int ep0) { serve_bridge(ep0); });
}

}  // namespace baregpu::qemu
