#include "tools/baregpu/json_writer.hpp"

#include <fmt/format.h>

namespace baregpu::tools {

namespace {

// Length of the valid UTF-8 sequence starting at s[i], 0 when it is not one (RFC 3629 table).
size_t utf8_sequence(std::string_view s, size_t i) {
    auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned char lead = byte(i);
    size_t length = lead < 0x80 ? 1 : (lead & 0xe0) == 0xc0 ? 2 : (lead & 0xf0) == 0xe0 ? 3 : (lead & 0xf8) == 0xf0 ? 4 : 0;
    if (length == 0 || i + length > s.size()) return 0;
    for (size_t k = 1; k < length; ++k) {
        if ((byte(i + k) & 0xc0) != 0x80) return 0;
    }
    if (length == 2 && lead < 0xc2) return 0;  // overlong
    if (length == 3 && lead == 0xe0 && byte(i + 1) < 0xa0) return 0;  // overlong
    if (length == 3 && lead == 0xed && byte(i + 1) >= 0xa0) return 0;  // UTF-16 surrogate
    if (length == 4 && ((lead == 0xf0 && byte(i + 1) < 0x90) || lead > 0xf4 || (lead == 0xf4 && byte(i + 1) >= 0x90))) {
        return 0;  // overlong or above U+10FFFF
    }
    return length;
}

}  // namespace

std::string JsonWriter::quote(std::string_view text) {
    std::string out = "\"";
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
        if (static_cast<unsigned char>(c) < 0x20) {
            out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
            ++i;
            continue;
        }
        size_t length = utf8_sequence(text, i);
        if (length == 0) {
            out += "\xef\xbf\xbd";  // U+FFFD REPLACEMENT CHARACTER
            ++i;
            continue;
        }
        out.append(text.substr(i, length));
        i += length;
    }
    return out + "\"";
}

void JsonWriter::before_value() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (!levels_.empty()) {
        out_ += levels_.back().empty ? "\n" : ",\n";
        levels_.back().empty = false;
        out_.append(2 * levels_.size(), ' ');
    }
}

void JsonWriter::open(char bracket) {
    before_value();
    out_ += bracket;
    levels_.push_back({});
}

void JsonWriter::close(char bracket) {
    bool empty = levels_.back().empty;
    levels_.pop_back();
    if (!empty) {
        out_ += "\n";
        out_.append(2 * levels_.size(), ' ');
    }
    out_ += bracket;
    if (levels_.empty()) out_ += "\n";
}

void JsonWriter::begin_object() { open('{'); }
void JsonWriter::end_object() { close('}'); }
void JsonWriter::begin_array() { open('['); }
void JsonWriter::end_array() { close(']'); }

void JsonWriter::key(std::string_view name) {
    before_value();
    out_ += quote(name);
    out_ += ": ";
    after_key_ = true;
}

void JsonWriter::value(std::string_view text) {
    before_value();
    out_ += quote(text);
}

void JsonWriter::value(int64_t number) {
    before_value();
    out_ += std::to_string(number);
}

void JsonWriter::value(bool flag) {
    before_value();
    out_ += flag ? "true" : "false";
}

void JsonWriter::null() {
    before_value();
    out_ += "null";
}

}  // namespace baregpu::tools
