// UsbBackend on libusb-1.0 (API: libusb-1.0/libusb.h, https://libusb.sourceforge.io/api-1.0/).
#include "drivers/usb/libusb_backend.hpp"

#include "base/error.hpp"
#include "drivers/usb/asm24_protocol.hpp"
#include "drivers/usb/detect.hpp"

#include <fmt/format.h>
#include <libusb.h>

#include <map>
#include <thread>
#include <vector>

namespace baregpu::usb {

namespace {

[[noreturn]] void fail(const std::string& device, const std::string& what, int rc) {
    const std::string text = fmt::format("{}: {} ({})", what, libusb_error_name(rc), rc);
    switch (rc) {
        case LIBUSB_ERROR_NO_DEVICE: throw DeviceLostError(device, text + ": the bridge was unplugged or reset");
        case LIBUSB_ERROR_PIPE: throw ProtocolError(device, text + ": the bridge stalled the endpoint (request refused)");
        case LIBUSB_ERROR_TIMEOUT: throw TimeoutError(device, text);
        case LIBUSB_ERROR_BUSY: throw BusyError(device, 0, text + ": another process has claimed the bridge");
        case LIBUSB_ERROR_ACCESS:
            throw UnsupportedError(device, text + ": no permission; install udev/ rules and join the baregpu group");
        default: throw Error(device, text);
    }
}

bool is_bridge(const libusb_device_descriptor& d) { return is_bridge_id(d.idVendor, d.idProduct); }

std::string location_of(libusb_device* dev) {
    uint8_t ports[8];
    const int n = libusb_get_port_numbers(dev, ports, sizeof ports);
    std::string s = fmt::format("{}", libusb_get_bus_number(dev));
    for (int i = 0; i < n; ++i) s += fmt::format("{}{}", i == 0 ? '-' : '.', ports[i]);
    return s;
}

// The descriptors of `dev`; the product string only when `handle` (an open device) is given.
DeviceDescriptor read_descriptor(libusb_device* dev, libusb_device_handle* handle, const std::string& name) {
    libusb_device_descriptor d{};
    if (int rc = libusb_get_device_descriptor(dev, &d); rc != 0) fail(name, "libusb_get_device_descriptor", rc);
    DeviceDescriptor out;
    out.vendor_id = d.idVendor;
    out.product_id = d.idProduct;
    if (handle != nullptr && d.iProduct != 0) {
        unsigned char text[256];
        int n = libusb_get_string_descriptor_ascii(handle, d.iProduct, text, sizeof text);
        if (n > 0) out.product.assign(reinterpret_cast<char*>(text), static_cast<size_t>(n));
    }
    libusb_config_descriptor* config = nullptr;
    if (libusb_get_config_descriptor(dev, 0, &config) == 0) {
        for (int i = 0; i < config->bNumInterfaces; ++i) {
            const libusb_interface& itf = config->interface[i];
            for (int a = 0; a < itf.num_altsetting; ++a) {
                const libusb_interface_descriptor& alt = itf.altsetting[a];
                InterfaceDescriptor id{alt.bInterfaceNumber, alt.bAlternateSetting, alt.bInterfaceClass, alt.bInterfaceSubClass,
                                       alt.bInterfaceProtocol, {}};
                for (int e = 0; e < alt.bNumEndpoints; ++e) {
                    id.endpoints.push_back({alt.endpoint[e].bEndpointAddress, alt.endpoint[e].bmAttributes, alt.endpoint[e].wMaxPacketSize});
                }
                out.interfaces.push_back(std::move(id));
            }
        }
        libusb_free_config_descriptor(config);
    }
    return out;
}

struct Context {
    libusb_context* ctx = nullptr;
    explicit Context(const std::string& device) {
        if (int rc = libusb_init(&ctx); rc != 0) fail(device, "libusb_init (no USB stack reachable?)", rc);
    }
    ~Context() { libusb_exit(ctx); }
};

class LibusbBackend final : public UsbBackend {
public:
    LibusbBackend(std::unique_ptr<Context> context, libusb_device_handle* handle, std::string name)
        : context_(std::move(context)), handle_(handle), name_(std::move(name)) {}
    ~LibusbBackend() override {
        for (auto& [tag, t] : pending_) {
            libusb_cancel_transfer(t.transfer);
        }
        // Cancelled transfers still complete through the event loop before they may be freed.
        for (int i = 0; i < 100 && !pending_.empty(); ++i) {
            timeval tv{0, 10000};
            libusb_handle_events_timeout_completed(context_->ctx, &tv, nullptr);
            std::erase_if(pending_, [](auto& p) {
                if (!p.second.done) return false;
                libusb_free_transfer(p.second.transfer);
                return true;
            });
        }
        for (int i : claimed_) libusb_release_interface(handle_, i);
        libusb_close(handle_);
    }

    const std::string& name() const override { return name_; }

    DeviceDescriptor descriptor() override { return read_descriptor(libusb_get_device(handle_), handle_, name_); }

    void claim_interface(uint8_t interface, uint8_t alt_setting) override {
        // Detach uas/usb-storage, reset, configuration 1, claim, alt setting (tinygrad usb.py USB3).
        if (libusb_kernel_driver_active(handle_, interface) == 1) {
            if (int rc = libusb_detach_kernel_driver(handle_, interface); rc != 0) fail(name_, "libusb_detach_kernel_driver", rc);
            if (int rc = libusb_reset_device(handle_); rc != 0) fail(name_, "libusb_reset_device", rc);
        }
        if (int rc = libusb_set_configuration(handle_, 1); rc != 0) fail(name_, "libusb_set_configuration(1)", rc);
        if (int rc = libusb_claim_interface(handle_, interface); rc != 0) fail(name_, fmt::format("libusb_claim_interface({})", interface), rc);
        claimed_.push_back(interface);
        if (int rc = libusb_set_interface_alt_setting(handle_, interface, alt_setting); rc != 0) {
            fail(name_, fmt::format("libusb_set_interface_alt_setting({}, {})", interface, alt_setting), rc);
        }
    }

    void release_interface(uint8_t interface) override {
        libusb_release_interface(handle_, interface);
        std::erase(claimed_, interface);
    }

    size_t control(uint8_t request_type, uint8_t request, uint16_t value, uint16_t index, std::span<std::byte> data,
                   std::chrono::milliseconds timeout) override {
        int rc = libusb_control_transfer(handle_, request_type, request, value, index, reinterpret_cast<unsigned char*>(data.data()),
                                         static_cast<uint16_t>(data.size()), static_cast<unsigned>(timeout.count()));
        if (rc < 0) fail(name_, fmt::format("control request {:#04x} (bmRequestType {:#04x}, wValue {:#06x}, wIndex {:#06x})", request,
                                            request_type, value, index), rc);
        return static_cast<size_t>(rc);
    }

    size_t bulk(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout) override {
        int transferred = 0;
        int rc = libusb_bulk_transfer(handle_, endpoint, reinterpret_cast<unsigned char*>(data.data()), static_cast<int>(data.size()),
                                      &transferred, static_cast<unsigned>(timeout.count()));
        if (rc < 0) fail(name_, fmt::format("bulk {:#04x} of {} bytes", endpoint, data.size()), rc);
        return static_cast<size_t>(transferred);
    }

    Tag submit_bulk(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout, uint32_t stream) override {
        libusb_transfer* t = libusb_alloc_transfer(0);
        if (t == nullptr) throw Error(name_, "libusb_alloc_transfer failed");
        const Tag tag = next_tag_++;
        Pending& p = pending_[tag];
        p.transfer = t;
        p.endpoint = endpoint;
        p.size = data.size();
        if (stream != 0) {
            libusb_fill_bulk_stream_transfer(t, handle_, endpoint, stream, reinterpret_cast<unsigned char*>(data.data()),
                                             static_cast<int>(data.size()), &LibusbBackend::completed, &p,
                                             static_cast<unsigned>(timeout.count()));
        } else {
            libusb_fill_bulk_transfer(t, handle_, endpoint, reinterpret_cast<unsigned char*>(data.data()), static_cast<int>(data.size()),
                                      &LibusbBackend::completed, &p, static_cast<unsigned>(timeout.count()));
        }
        if (int rc = libusb_submit_transfer(t); rc != 0) {
            libusb_free_transfer(t);
            pending_.erase(tag);
            fail(name_, fmt::format("submitting bulk {:#04x} of {} bytes", endpoint, data.size()), rc);
        }
        return tag;
    }

    size_t reap(Tag tag) override {
        auto it = pending_.find(tag);
        if (it == pending_.end()) throw Error(name_, fmt::format("reap of unknown transfer {}", tag));
        // Bounded by the transfer's own timeout: libusb completes it with LIBUSB_TRANSFER_TIMED_OUT.
        while (!it->second.done) {
            if (int rc = libusb_handle_events_completed(context_->ctx, &it->second.done); rc != 0) fail(name_, "libusb_handle_events", rc);
        }
        libusb_transfer* t = it->second.transfer;
        const int status = t->status;
        const size_t actual = static_cast<size_t>(t->actual_length);
        const uint8_t ep = it->second.endpoint;
        const size_t size = it->second.size;
        libusb_free_transfer(t);
        pending_.erase(it);
        const std::string what = fmt::format("asynchronous bulk {:#04x} of {} bytes", ep, size);
        switch (status) {
            case LIBUSB_TRANSFER_COMPLETED: return actual;
            case LIBUSB_TRANSFER_NO_DEVICE: fail(name_, what, LIBUSB_ERROR_NO_DEVICE);
            case LIBUSB_TRANSFER_STALL: fail(name_, what, LIBUSB_ERROR_PIPE);
            case LIBUSB_TRANSFER_TIMED_OUT: fail(name_, what, LIBUSB_ERROR_TIMEOUT);
            default: fail(name_, what + fmt::format(" (transfer status {})", status), LIBUSB_ERROR_IO);
        }
    }

    unsigned alloc_streams(unsigned count, std::span<const uint8_t> endpoints) override {
        std::vector<unsigned char> eps(endpoints.begin(), endpoints.end());
        const int rc = libusb_alloc_streams(handle_, static_cast<uint32_t>(count), eps.data(), static_cast<int>(eps.size()));
        return rc < 0 ? 0u : static_cast<unsigned>(rc);  // a USB 2 link or controller has none: not an error
    }

    void clear_halt(uint8_t endpoint) override {
        if (int rc = libusb_clear_halt(handle_, endpoint); rc != 0) fail(name_, fmt::format("clear halt on {:#04x}", endpoint), rc);
    }

    std::chrono::nanoseconds now() override {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch());
    }
    void sleep(std::chrono::nanoseconds duration) override { std::this_thread::sleep_for(duration); }

private:
    struct Pending {
        libusb_transfer* transfer = nullptr;
        int done = 0;
        uint8_t endpoint = 0;
        size_t size = 0;
    };
    static void LIBUSB_CALL completed(libusb_transfer* t) { static_cast<Pending*>(t->user_data)->done = 1; }

    std::unique_ptr<Context> context_;
    libusb_device_handle* handle_;
    std::string name_;
    std::vector<int> claimed_;
    std::map<Tag, Pending> pending_;  // std::map: node addresses are stable for user_data
    Tag next_tag_ = 1;
};

}  // namespace

bool libusb_available() { return true; }

std::vector<BridgeInfo> enumerate_bridges() {
    std::vector<BridgeInfo> out;
    libusb_context* ctx = nullptr;
    if (libusb_init(&ctx) != 0) return out;  // no USB stack (containers): nothing to list
    libusb_device** list = nullptr;
    const ssize_t n = libusb_get_device_list(ctx, &list);
    for (ssize_t i = 0; i < n; ++i) {
        libusb_device_descriptor d{};
        if (libusb_get_device_descriptor(list[i], &d) != 0 || !is_bridge(d)) continue;
        BridgeInfo info{location_of(list[i]), d.idVendor, d.idProduct, std::nullopt};
        // The product string needs the device open (it tells the custom firmware apart); without
        // permission the interfaces alone still say UAS or BOT.
        libusb_device_handle* handle = nullptr;
        if (libusb_open(list[i], &handle) != 0) handle = nullptr;
        try {
            info.protocol = detect_protocol(read_descriptor(list[i], handle, "usb:" + info.location));
        } catch (const Error&) {
            // Unreadable descriptors: listed without a protocol.
        }
        if (handle != nullptr) libusb_close(handle);
        out.push_back(std::move(info));
    }
    if (n >= 0) libusb_free_device_list(list, 1);
    libusb_exit(ctx);
    return out;
}

std::unique_ptr<UsbBackend> open_libusb(std::string_view location) {
    const std::string name = "usb:" + std::string(location);
    auto context = std::make_unique<Context>(name);
    libusb_device** list = nullptr;
    const ssize_t n = libusb_get_device_list(context->ctx, &list);
    if (n < 0) fail(name, "libusb_get_device_list", static_cast<int>(n));
    libusb_device_handle* handle = nullptr;
    int rc = 0;
    bool found = false;
    for (ssize_t i = 0; i < n; ++i) {
        if (location_of(list[i]) == location) {
            found = true;
            rc = libusb_open(list[i], &handle);
            break;
        }
    }
    libusb_free_device_list(list, 1);
    if (!found) {
        throw DeviceLostError(name, fmt::format("no USB device at bus-port {} (`baregpu devices` lists the ASM24xx bridges found)", location));
    }
    if (rc != 0) fail(name, "opening the bridge (libusb_open)", rc);
    return std::make_unique<LibusbBackend>(std::move(context), handle, name);
}

}  // namespace baregpu::usb
