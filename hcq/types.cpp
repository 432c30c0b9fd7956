#include "hcq/types.hpp"

#include "base/error.hpp"

#include <charconv>
#include <cstdlib>
#include <fmt/format.h>
#include <string>

namespace baregpu::hcq {

Duration parse_timeout_ms(std::string_view text) {
    // Digits only (strtoull would take "-5" and wrap it), checked before the conversion to
    // nanoseconds can overflow.
    uint64_t ms = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || ms == 0 || ms > kMaxTimeoutMs) {
        throw Error("", fmt::format("BAREGPU_TIMEOUT_MS={}: expected a whole number of milliseconds from 1 to {} (a day); unset it for "
                                    "the default of 10000",
                                    text, kMaxTimeoutMs));
    }
    return std::chrono::milliseconds(ms);
}

Duration default_timeout() {
    static const Duration timeout = [] {
        if (const char* env = std::getenv("BAREGPU_TIMEOUT_MS"); env != nullptr && *env != '\0') return parse_timeout_ms(env);
        return Duration(std::chrono::seconds(10));
    }();
    return timeout;
}

}  // namespace baregpu::hcq
