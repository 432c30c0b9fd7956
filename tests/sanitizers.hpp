// Whether this test program is built with AddressSanitizer: GCC defines __SANITIZE_ADDRESS__,
// clang (which builds the sanitizer tests, bootstrap.sh) answers __has_feature(address_sanitizer).
#pragma once

namespace baregpu::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace baregpu::test
