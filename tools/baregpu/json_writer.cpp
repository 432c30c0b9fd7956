#include "tools/baregpu/json_writer.hpp"

#include "base/json_string.hpp"

#include <cmath>
#include <fmt/format.h>

namespace baregpu::tools {

std::string JsonWriter::quote(std::string_view text) { return json_string(text); }

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

void JsonWriter::value(double number) {
    if (!std::isfinite(number)) return null();
    before_value();
    out_ += fmt::format("{}", number);
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
