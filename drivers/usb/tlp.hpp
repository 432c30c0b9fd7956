// PCIe transaction layer packets as the ASM24xx bridge tunnels them: the Fmt/Type byte, the
// configuration request address, byte enables, and the completion status a non-posted request
// returns. Codes from the PCI Express Base Specification (2.2.1 Fmt/Type, 2.2.9 completion
// status); their use over the bridge from tinygrad tinygrad/runtime/support/usb.py
// (pcie_cfg_req, pcie_request).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace baregpu::usb::tlp {

// Fmt/Type byte (PCIe Base Spec table 2-3). Memory requests always use the 4-DW (64-bit address) form.
inline constexpr uint8_t kCfgRd0 = 0x04;
inline constexpr uint8_t kCfgRd1 = 0x05;
inline constexpr uint8_t kCfgWr0 = 0x44;
inline constexpr uint8_t kCfgWr1 = 0x45;
inline constexpr uint8_t kMRd64 = 0x20;
inline constexpr uint8_t kMWr64 = 0x60;

// Posted requests (memory writes, messages) get no completion: nothing to read back.
// MWr: Fmt 01x/11x, Type 00000 -> (t & 0xDF) == 0x40; Msg: Type 10rrr -> (t & 0xB8) == 0x30.
constexpr bool is_posted(uint8_t fmt_type) { return (fmt_type & 0xDF) == 0x40 || (fmt_type & 0xB8) == 0x30; }
constexpr bool is_config(uint8_t fmt_type) { return (fmt_type & 0xBE) == 0x04; }
constexpr bool is_config_write(uint8_t fmt_type) { return (fmt_type & 0xFE) == 0x44; }

// Type 0 reaches the bus directly below the root; type 1 is forwarded by bridges (bus > 0).
constexpr uint8_t config_fmt_type(bool write, uint8_t bus) { return static_cast<uint8_t>((write ? kCfgWr0 : kCfgRd0) | (bus > 0 ? 1 : 0)); }

// Config request address: bus[31:24] device[23:19] function[18:16] register[11:2] (PCIe 2.2.6.2).
constexpr uint32_t config_address(uint8_t bus, uint8_t device, uint8_t function, uint16_t reg) {
    return uint32_t{bus} << 24 | uint32_t{device & 0x1fu} << 19 | uint32_t{function & 0x7u} << 16 | (reg & 0xffcu);
}

// First DW byte enables for an access of `size` bytes at byte `offset` within the dword.
constexpr uint8_t byte_enables(unsigned size, unsigned offset) { return static_cast<uint8_t>(((1u << size) - 1u) << offset); }

// Completion status (PCIe Base Spec 2.2.9, table 2-34).
enum class CompletionStatus : uint8_t {
    Successful = 0b000,  // SC
    UnsupportedRequest = 0b001,  // UR: nothing claims the address
    ConfigRetry = 0b010,  // CRS: the function is still initialising; retry the config request
    CompleterAbort = 0b100,  // CA: the completer refused
};
// "Unsupported Request (UR)", or "reserved completion status 0b011"
std::string describe(CompletionStatus status);

// The 8 bytes `0xF0 IN` returns for the last mode-0 non-posted TLP (usb.py pcie_request): the dword of
// completion data at 0 (little-endian), the status in bits 7:5 of byte 4, the bridge's transport
// status in byte 7 (non-zero: the TLP did not complete on the link; retry).
struct Completion {
    uint32_t data = 0;
    CompletionStatus status = CompletionStatus::Successful;
    uint8_t transport_status = 0;
};
Completion decode_completion(std::span<const std::byte, 8> bytes);
std::array<std::byte, 8> encode_completion(const Completion& completion);

// `0xF0 OUT` (usb.py): wValue = fmt_type | byte_en << 8, wIndex = mode, 12-byte payload
// `<III addr_lo, addr_hi, value_or_dword_count>` little-endian.
enum class Mode : uint16_t { Single = 0, StreamWrite = 1, StreamRead = 2 };

struct Request {
    uint8_t fmt_type = 0;
    uint8_t byte_enables = 0;
    Mode mode = Mode::Single;
    uint64_t address = 0;
    uint32_t value = 0;  // data for a single write, dword count for a stream

    uint16_t w_value() const { return static_cast<uint16_t>(fmt_type | uint16_t{byte_enables} << 8); }
    uint16_t w_index() const { return static_cast<uint16_t>(mode); }
    std::array<std::byte, 12> payload() const;
    static Request decode(uint16_t w_value, uint16_t w_index, std::span<const std::byte, 12> payload);
    // "CfgRd1 bus 4 dev 0 fn 0 reg 0x010" / "MWr64 0x10000000 (16 DW stream)"
    std::string describe() const;
};

}  // namespace baregpu::usb::tlp
