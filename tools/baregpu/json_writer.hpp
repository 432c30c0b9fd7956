// A small streaming JSON writer for the tools' --json output: objects, arrays, strings, integers,
// floating-point numbers, booleans and null, indented two spaces. Strings are quoted by
// base/json_string.hpp, so the output always parses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::tools {

class JsonWriter {
public:
    void begin_object();
    void end_object();
    void begin_array();
    void end_array();
    // Inside an object: the next value's name.
    void key(std::string_view name);
    void value(std::string_view text);
    void value(const char* text) { value(std::string_view(text)); }
    void value(const std::string& text) { value(std::string_view(text)); }
    void value(int64_t number);
    // Shortest form that reads back to the same double; NaN and infinities (which JSON cannot
    // spell) become null.
    void value(double number);
    void value(bool flag);
    void null();

    // The document so far, with a final newline once the outermost value is closed.
    const std::string& text() const { return out_; }

    static std::string quote(std::string_view text);

private:
    void before_value();
    void open(char bracket);
    void close(char bracket);

    struct Level {
        bool empty = true;
    };
    std::string out_;
    std::vector<Level> levels_;
    bool after_key_ = false;
};

}  // namespace baregpu::tools
