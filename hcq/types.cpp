#include "hcq/types.hpp"

#include <cstdlib>
#include <string>

namespace baregpu::hcq {

Duration default_timeout() {
    static const Duration timeout = [] {
        if (const char* env = std::getenv("BAREGPU_TIMEOUT_MS"); env && *env) {
            char* end = nullptr;
            unsigned long long ms = std::strtoull(env, &end, 10);
            if (end && *end == '\0' && ms > 0) return Duration(std::chrono::milliseconds(ms));
        }
        return Duration(std::chrono::seconds(10));
    }();
    return timeout;
}

}  // namespace baregpu::hcq
