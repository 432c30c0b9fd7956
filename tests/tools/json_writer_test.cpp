// The --json writer: structure, escaping, and output that stays valid JSON for any input bytes.
#include "tools/baregpu/json_writer.hpp"

#include <catch2/catch.hpp>
#include <cmath>

using baregpu::tools::JsonWriter;

TEST_CASE("objects, arrays and scalars nest with two-space indentation") {
    JsonWriter w;
    w.begin_object();
    w.key("n");
    w.value(int64_t{-3});
    w.key("list");
    w.begin_array();
    w.value("a");
    w.value(true);
    w.null();
    w.end_array();
    w.key("empty");
    w.begin_object();
    w.end_object();
    w.key("none");
    w.begin_array();
    w.end_array();
    w.end_object();
    CHECK(w.text() ==
          "{\n"
          "  \"n\": -3,\n"
          "  \"list\": [\n"
          "    \"a\",\n"
          "    true,\n"
          "    null\n"
          "  ],\n"
          "  \"empty\": {},\n"
          "  \"none\": []\n"
          "}\n");
}

TEST_CASE("strings are escaped as RFC 8259 requires") {
    CHECK(JsonWriter::quote("plain") == "\"plain\"");
    CHECK(JsonWriter::quote("say \"hi\"\\") == "\"say \\\"hi\\\"\\\\\"");
    CHECK(JsonWriter::quote("a\nb\tc\r") == "\"a\\nb\\tc\\r\"");
    CHECK(JsonWriter::quote(std::string("\x01\x1f", 2)) == "\"\\u0001\\u001f\"");
    CHECK(JsonWriter::quote(std::string("nul\0x", 5)) == "\"nul\\u0000x\"");
}

TEST_CASE("valid UTF-8 passes through; invalid bytes become U+FFFD") {
    CHECK(JsonWriter::quote("Kön\xc3\xadg \xe2\x82\xac \xf0\x9f\x98\x80") == "\"Kön\xc3\xadg \xe2\x82\xac \xf0\x9f\x98\x80\"");
    const std::string fffd = "\xef\xbf\xbd";
    CHECK(JsonWriter::quote("\xff") == "\"" + fffd + "\"");
    CHECK(JsonWriter::quote("a\xc3") == "\"a" + fffd + "\"");  // truncated sequence
    CHECK(JsonWriter::quote("\xc0\xaf") == "\"" + fffd + fffd + "\"");  // overlong '/'
    CHECK(JsonWriter::quote("\xed\xa0\x80") == "\"" + fffd + fffd + fffd + "\"");  // UTF-16 surrogate
    CHECK(JsonWriter::quote("\xf4\x90\x80\x80") == "\"" + fffd + fffd + fffd + fffd + "\"");  // above U+10FFFF
}

TEST_CASE("doubles read back exactly; NaN and infinities become null") {
    JsonWriter w;
    w.begin_array();
    w.value(0.1);
    w.value(-2.5e-300);
    w.value(1e21);
    w.value(3.0);
    w.value(std::nan(""));
    w.value(-HUGE_VAL);
    w.end_array();
    CHECK(w.text() == "[\n  0.1,\n  -2.5e-300,\n  1e+21,\n  3,\n  null,\n  null\n]\n");
}
