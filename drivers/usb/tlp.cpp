#include "drivers/usb/tlp.hpp"

#include <fmt/format.h>

#include <cstring>

namespace baregpu::usb::tlp {

namespace {
uint32_t load_le32(const std::byte* p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
void store_le32(std::byte* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = std::byte(v >> (8 * i));
}
}  // namespace

std::string describe(CompletionStatus status) {
    switch (status) {
        case CompletionStatus::Successful: return "Successful Completion (SC)";
        case CompletionStatus::UnsupportedRequest: return "Unsupported Request (UR)";
        case CompletionStatus::ConfigRetry: return "Configuration Request Retry Status (CRS)";
        case CompletionStatus::CompleterAbort: return "Completer Abort (CA)";
    }
    return fmt::format("reserved completion status 0b{:03b}", static_cast<unsigned>(status));
}

Completion decode_completion(std::span<const std::byte, 8> b) {
    Completion c;
    c.data = load_le32(b.data());
    c.status = static_cast<CompletionStatus>((static_cast<uint8_t>(b[4]) >> 5) & 7);
    c.transport_status = static_cast<uint8_t>(b[7]);
    return c;
}

std::array<std::byte, 8> encode_completion(const Completion& c) {
    std::array<std::byte, 8> b{};
    store_le32(b.data(), c.data);
    b[4] = std::byte(static_cast<uint8_t>(c.status) << 5);
    b[7] = std::byte(c.transport_status);
    return b;
}

std::array<std::byte, 12> Request::payload() const {
    std::array<std::byte, 12> p{};
    store_le32(p.data(), static_cast<uint32_t>(address));
    store_le32(p.data() + 4, static_cast<uint32_t>(address >> 32));
    store_le32(p.data() + 8, value);
    return p;
}

Request Request::decode(uint16_t w_value, uint16_t w_index, std::span<const std::byte, 12> p) {
    Request r;
    r.fmt_type = static_cast<uint8_t>(w_value & 0xff);
    r.byte_enables = static_cast<uint8_t>(w_value >> 8);
    r.mode = static_cast<Mode>(w_index);
    r.address = uint64_t{load_le32(p.data())} | uint64_t{load_le32(p.data() + 4)} << 32;
    r.value = load_le32(p.data() + 8);
    return r;
}

std::string Request::describe() const {
    if (is_config(fmt_type)) {
        const uint32_t a = static_cast<uint32_t>(address);
        return fmt::format("{}{} bus {} dev {} fn {} reg {:#05x} (byte enables {:#x})", is_config_write(fmt_type) ? "CfgWr" : "CfgRd",
                           fmt_type & 1, a >> 24, (a >> 19) & 0x1f, (a >> 16) & 7, a & 0xffc, byte_enables);
    }
    const char* kind = fmt_type == kMWr64 ? "MWr64" : fmt_type == kMRd64 ? "MRd64" : "TLP";
    if (mode != Mode::Single) return fmt::format("{} {:#x} ({} DW stream)", kind, address, value);
    return fmt::format("{} (fmt/type {:#04x}) {:#x} (byte enables {:#x})", kind, fmt_type, address, byte_enables);
}

}  // namespace baregpu::usb::tlp
