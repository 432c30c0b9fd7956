// UsbBackend: the seam under the libusb calls. Everything drivers/usb does to a USB device goes
// through it: descriptors, claiming an interface, control transfers, bulk transfers (synchronous,
// and asynchronous submit/reap for pipelining). libusb_backend.cpp implements it on libusb-1.0;
// drivers/sim/asm24 implements it with a simulated ASM2464 bridge.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace baregpu::usb {

// USB 3.2 spec 9.6.6: bEndpointAddress bit 7 is the direction (1 = IN).
inline constexpr uint8_t kEndpointIn = 0x80;

struct EndpointDescriptor {
    uint8_t address = 0;  // bEndpointAddress
    uint8_t attributes = 0;  // bmAttributes: transfer type in bits 1:0 (2 = bulk)
    uint16_t max_packet = 0;
};

struct InterfaceDescriptor {
    uint8_t number = 0;  // bInterfaceNumber
    uint8_t alt_setting = 0;  // bAlternateSetting
    uint8_t interface_class = 0;  // 0x08 mass storage, 0xff vendor specific
    uint8_t interface_subclass = 0;  // 0x06 SCSI transparent command set
    uint8_t interface_protocol = 0;  // 0x50 BOT, 0x62 UAS
    std::vector<EndpointDescriptor> endpoints;
};

struct DeviceDescriptor {
    uint16_t vendor_id = 0;
    uint16_t product_id = 0;
    std::string product;  // iProduct, empty when the device has none
    std::vector<InterfaceDescriptor> interfaces;  // configuration 1, every alternate setting
};

// bmRequestType for the vendor requests the bridge understands (USB 3.2 spec 9.3.1):
// direction bit 7, type vendor (2 << 5), recipient device.
inline constexpr uint8_t kVendorOut = 0x40;
inline constexpr uint8_t kVendorIn = 0xC0;

class UsbBackend {
public:
    virtual ~UsbBackend() = default;

    // "usb:3-2" (bus-port) or "usb:sim": the name every error about this device carries.
    virtual const std::string& name() const = 0;
    virtual DeviceDescriptor descriptor() = 0;

    // Detaches a kernel driver (uas, usb-storage) if one is bound, then claims. Throws BusyError
    // when another process holds the interface.
    virtual void claim_interface(uint8_t interface, uint8_t alt_setting) = 0;
    virtual void release_interface(uint8_t interface) = 0;

    // Control transfer on EP0. data is sent (request_type bit 7 clear) or filled (set); returns
    // the bytes transferred. Throws DeviceLostError (device gone), ProtocolError (stall: the
    // device refused the request), TimeoutError; every message names the request.
    virtual size_t control(uint8_t request_type, uint8_t request, uint16_t value, uint16_t index, std::span<std::byte> data,
                           std::chrono::milliseconds timeout) = 0;

    // Bulk transfer on `endpoint` (bit 7 set: IN, data is filled). Same errors as control().
    virtual size_t bulk(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout) = 0;

    // Asynchronous bulk transfer: data must stay alive and untouched until reap(tag) returns.
    // reap waits (bounded by the submit's timeout) and returns the bytes transferred, or throws
    // as bulk() would. Transfers on one endpoint and stream complete in submission order.
    // stream: a USB 3 bulk stream ID (1.., after alloc_streams; USB 3.2 spec 8.12.1.4), 0 for none.
    using Tag = uint64_t;
    virtual Tag submit_bulk(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout, uint32_t stream = 0) = 0;
    virtual size_t reap(Tag tag) = 0;
    // Gives each of `endpoints` `count` bulk streams (libusb_alloc_streams) and returns how many
    // they got: 0 where the link has none (USB 2) or the host controller cannot.
    virtual unsigned alloc_streams(unsigned count, std::span<const uint8_t> endpoints) = 0;

    // CLEAR_FEATURE(ENDPOINT_HALT) on a bulk endpoint (libusb_clear_halt): after a failed bulk
    // transfer, the host's and the device's view of the pipe agree again (the custom firmware also
    // drops its streaming state: asm2464pd-firmware handmade/src/main.c, handle_usb_control).
    virtual void clear_halt(uint8_t endpoint) = 0;

    // The clock waits measure themselves with: the steady clock on a real device, the modelled
    // link clock on the simulator (which sleep() advances instead of sleeping).
    virtual std::chrono::nanoseconds now() = 0;
    virtual void sleep(std::chrono::nanoseconds duration) = 0;
};

}  // namespace baregpu::usb
