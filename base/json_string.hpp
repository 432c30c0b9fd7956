// JSON string literals (RFC 8259, section 7) for every layer that writes JSON: the tools' --json
// output and the profiler's Chrome trace. Quotes, backslashes and control characters are
// escaped; invalid UTF-8 (RFC 3629) becomes U+FFFD, so the output parses whatever bytes a
// kernel name, a sysfs file or a device answer held.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace baregpu {

namespace detail {

// Length of the valid UTF-8 sequence starting at s[i], 0 when it is not one (RFC 3629, section 4).
inline size_t utf8_sequence(std::string_view s, size_t i) {
    auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned char lead = byte(i);
    size_t length = lead < 0x80 ? 1 : (lead & 0xe0) == 0xc0 ? 2 : (lead & 0xf0) == 0xe0 ? 3 : (lead & 0xf8) == 0xf0 ? 4 : 0;
    if (length == 0 || i + length > s.size()) return 0;
    for (size_t k = 1; k < length; ++k) {
        if ((byte(i + k) & 0xc0) != 0x80) return 0;
    }
    if (length == 2 && lead < 0xc2) return 0;                          // overlong
    if (length == 3 && lead == 0xe0 && byte(i + 1) < 0xa0) return 0;   // overlong
    if (length == 3 && lead == 0xed && byte(i + 1) >= 0xa0) return 0;  // UTF-16 surrogate
    if (length == 4 && ((lead == 0xf0 && byte(i + 1) < 0x90) || lead > 0xf4 || (lead == 0xf4 && byte(i + 1) >= 0x90))) {
        return 0;  // overlong or above U+10FFFF
    }
    return length;
}

}  // namespace detail

// Appends `text` as a JSON string literal, quotes included.
inline void append_json_string(std::string& out, std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += '"';
    for (size_t i = 0; i < text.size();) {
        char c = text[i];
        switch (c) {
            case '"': out += "\\\""; ++i; continue;
            case '\\': out += "\\\\"; ++i; continue;
            case '\n': out += "\\n"; ++i; continue;
            case '\r': out += "\\r"; ++i; continue;
            case '\t': out += "\\t"; ++i; continue;
            default: break;
        }
        auto u = static_cast<unsigned char>(c);
        if (u < 0x20) {
            out += "\\u00";
            out += kHex[u >> 4];
            out += kHex[u & 0xf];
            ++i;
            continue;
        }
        size_t length = detail::utf8_sequence(text, i);
        if (length == 0) {
            out += "\xef\xbf\xbd";  // U+FFFD REPLACEMENT CHARACTER
            ++i;
            continue;
        }
        out.append(text.substr(i, length));
        i += length;
    }
    out += '"';
}

inline std::string json_string(std::string_view text) {
    std::string out;
    append_json_string(out, text);
    return out;
}

}  // namespace baregpu
