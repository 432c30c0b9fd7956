// What a parsed firmware file is, as fwinfo shows it: a format name, its header fields in file
// order, and the parts (binaries, lists, images) it carries. Every parser can describe what it
// decoded this way; tools print it as text or JSON without knowing the format.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace baregpu::fw {

struct Field {
    enum class Style { decimal, hex };
    std::string name;
    std::variant<uint64_t, std::string, bool> value;
    Style style = Style::decimal;  // how to print a number; JSON always gets the number itself
};

struct Part {
    std::string name;     // "SOS", "IRAM", "reg_list_format", ".fwimage"
    uint64_t offset = 0;  // bytes from the start of the file
    uint64_t size = 0;    // bytes
    std::vector<Field> fields;

    Part& num(std::string field, uint64_t value) {
        fields.push_back({std::move(field), value, Field::Style::decimal});
        return *this;
    }
    Part& hex(std::string field, uint64_t value) {
        fields.push_back({std::move(field), value, Field::Style::hex});
        return *this;
    }
    Part& text(std::string field, std::string value) {
        fields.push_back({std::move(field), std::move(value), Field::Style::decimal});
        return *this;
    }
};

struct Description {
    std::string format;  // "amdgpu psp_firmware_header v2.0", "nvfw_bin_hdr + nvfw_hs_header_v2"
    std::vector<Field> fields;
    std::vector<Part> parts;
    // Things a loader accepts but a reader should know: a CRC that does not match, say.
    std::vector<std::string> warnings;

    Description& num(std::string name, uint64_t value) {
        fields.push_back({std::move(name), value, Field::Style::decimal});
        return *this;
    }
    Description& hex(std::string name, uint64_t value) {
        fields.push_back({std::move(name), value, Field::Style::hex});
        return *this;
    }
    Description& text(std::string name, std::string value) {
        fields.push_back({std::move(name), std::move(value), Field::Style::decimal});
        return *this;
    }
    Description& flag(std::string name, bool value) {
        fields.push_back({std::move(name), value, Field::Style::decimal});
        return *this;
    }
    Part& part(std::string name, uint64_t offset, uint64_t size) {
        parts.push_back({std::move(name), offset, size, {}});
        return parts.back();
    }
};

}  // namespace baregpu::fw
