// One assertion over a whole buffer. A REQUIRE per element makes Catch2 record every element:
// seconds per test for buffers of 10^5 elements, most of all in the sanitizer build. Instead
// REQUIRE(test::first_difference(got, want) == "") checks them all and, when one differs, shows
// which: "element 1234 of 300000: expected 5, found 7".
#pragma once

#include <cstddef>
#include <iterator>
#include <sstream>
#include <string>

namespace baregpu::test {

// want(i) is what got[i] should be; agree(found, expected) says whether it is.
template <class Got, class Want, class Agree>
std::string first_difference(const Got& got, Want want, Agree agree) {
    for (size_t i = 0; i < std::size(got); ++i) {
        const auto expected = want(i);
        if (!agree(got[i], expected)) {
            std::ostringstream s;
            s << "element " << i << " of " << std::size(got) << ": expected " << +expected << ", found " << +got[i];
            return s.str();
        }
    }
    return {};
}

template <class Got, class Want>
std::string first_difference(const Got& got, Want want) {
    return first_difference(got, want, [](const auto& found, const auto& expected) { return found == expected; });
}

}  // namespace baregpu::test
