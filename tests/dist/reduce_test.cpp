// The host reductions the collectives apply to staged data (dist/reduce.hpp), against the
// definitions element by element: any length (not only whole blocks of 256), unaligned data, integer
// sums that wrap as MPI's do, and NaN winning a max as in numpy's maximum.
#include "dist/reduce.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace baregpu::dist;

namespace {

template <typename T>
std::vector<T> reduced(std::vector<T> into, const std::vector<T>& from, DataType type, ReduceOp op, size_t misalign = 0) {
    // Copied to a byte offset of `misalign`: the staged data may start anywhere.
    std::vector<std::byte> a(into.size() * sizeof(T) + misalign), b(from.size() * sizeof(T) + misalign);
    std::memcpy(a.data() + misalign, into.data(), into.size() * sizeof(T));
    std::memcpy(b.data() + misalign, from.data(), from.size() * sizeof(T));
    reduce_into(a.data() + misalign, b.data() + misalign, into.size(), type, op);
    std::memcpy(into.data(), a.data() + misalign, into.size() * sizeof(T));
    return into;
}

}  // namespace

TEST_CASE("reduce: float32 sum and max over any length, aligned or not") {
    for (size_t n : {size_t{1}, size_t{255}, size_t{256}, size_t{257}, size_t{1000}}) {
        std::vector<float> a(n), b(n);
        for (size_t i = 0; i < n; ++i) a[i] = static_cast<float>(i) * 0.5f - 7.0f, b[i] = 3.0f - static_cast<float>(i % 11);
        for (size_t misalign : {size_t{0}, size_t{1}, size_t{3}}) {
            auto sum = reduced(a, b, DataType::float32, ReduceOp::sum, misalign);
            auto max = reduced(a, b, DataType::float32, ReduceOp::max, misalign);
            for (size_t i = 0; i < n; ++i) {
                REQUIRE(sum[i] == a[i] + b[i]);
                REQUIRE(max[i] == std::max(a[i], b[i]));
            }
        }
    }
}

TEST_CASE("reduce: NaN wins a max, whichever side it is on") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    auto m = reduced<float>({nan, 1.0f, 2.0f}, {1.0f, nan, -2.0f}, DataType::float32, ReduceOp::max);
    CHECK(std::isnan(m[0]));
    CHECK(std::isnan(m[1]));
    CHECK(m[2] == 2.0f);
    auto d = reduced<double>({1.0, std::nan("")}, {std::nan(""), 0.0}, DataType::float64, ReduceOp::max);
    CHECK(std::isnan(d[0]));
    CHECK(std::isnan(d[1]));
}

TEST_CASE("reduce: integer sums wrap, integer max is signed") {
    auto s32 = reduced<int32_t>({std::numeric_limits<int32_t>::max(), -5}, {1, 7}, DataType::int32, ReduceOp::sum);
    CHECK(s32[0] == std::numeric_limits<int32_t>::min());
    CHECK(s32[1] == 2);
    auto s64 = reduced<int64_t>({std::numeric_limits<int64_t>::max()}, {2}, DataType::int64, ReduceOp::sum);
    CHECK(s64[0] == std::numeric_limits<int64_t>::min() + 1);
    auto m32 = reduced<int32_t>({-3, 4}, {-1, -9}, DataType::int32, ReduceOp::max);
    CHECK(m32 == std::vector<int32_t>{-1, 4});
    CHECK(element_size(DataType::int32) == 4);
    CHECK(element_size(DataType::float64) == 8);
}
