// Small vocabulary shared by every part of HCQ: launch dimensions, command ids, queue kinds,
// and the default wait timeout.
#pragma once

#include <chrono>
#include <string_view>
#include <cstdint>

namespace baregpu::hcq {

// A launch size in one to three dimensions. grid = number of workgroups per dimension,
// block = threads (work-items) per workgroup per dimension.
struct Dim3 {
    uint32_t x = 1;
    uint32_t y = 1;
    uint32_t z = 1;

    constexpr uint64_t count() const { return uint64_t{x} * y * z; }
    constexpr bool operator==(const Dim3&) const = default;
};

// The index of a command recorded in a queue, for in-place updates (update_wait, ...).
// Ids are dense from 0 in recording order and stay valid until the queue is reset.
enum class CommandId : uint32_t {};

enum class QueueKind : uint8_t { compute, copy };

constexpr const char* to_string(QueueKind kind) { return kind == QueueKind::compute ? "compute" : "copy"; }

using Duration = std::chrono::nanoseconds;

// How long a wait that was given no timeout waits: BAREGPU_TIMEOUT_MS, else 10 s. Read once;
// throws baregpu::Error naming the variable when it is set to anything but a whole number of
// milliseconds from 1 to kMaxTimeoutMs (Registry::open reads it first, so a bad value is
// reported when a device is opened, not at its first wait).
Duration default_timeout();
inline constexpr uint64_t kMaxTimeoutMs = 86'400'000;  // a day
// The value of BAREGPU_TIMEOUT_MS `text` stands for, with the checks above.
Duration parse_timeout_ms(std::string_view text);

}  // namespace baregpu::hcq
