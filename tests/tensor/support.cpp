#include "tests/tensor/support.hpp"

#include "tests/hcq/support.hpp"

#include <cmath>
#include <cstdlib>
#include <fmt/format.h>

namespace baregpu::test {

std::shared_ptr<hcq::Device> device_under_test() {
    static std::shared_ptr<hcq::Device> dev = open_device(hcq_devices().front());
    return dev;
}

std::shared_ptr<tensor::Runtime> device_runtime() {
    static std::shared_ptr<tensor::Runtime> rt = tensor::Runtime::for_device(device_under_test());
    return rt;
}

namespace {
// With BAREGPU_LONG=full the largest shapes make single kernels of several seconds on a chip that
// interprets its code (tens of seconds under ASan: the padded 30-channel conv2d): waits get two
// minutes there unless BAREGPU_TIMEOUT_MS says otherwise (read once, at the first wait).
const bool long_waits = [] {
    if (long_run()) setenv("BAREGPU_TIMEOUT_MS", "120000", /*overwrite*/ 0);
    return true;
}();
}  // namespace

bool interpreted_device() { return bool(device_runtime()->device().exec_details()); }

bool too_slow_to_interpret(int64_t macs) { return macs > 1'000'000 && interpreted_device() && !long_run(); }

void check_close(const tensor::Tensor& got, const Ref& want, double rtol, double atol) {
    REQUIRE(got.shape() == want.shape);
    std::vector<double> values;
    switch (got.dtype()) {
        case compiler::DType::float32:
        case compiler::DType::float16:
        case compiler::DType::bfloat16:
            for (float x : got.to_vector<float>()) values.push_back(x);
            break;
        case compiler::DType::int32:
            for (int32_t x : got.to_vector<int32_t>()) values.push_back(x);
            rtol = atol = 0;
            break;
        case compiler::DType::boolean:
            for (bool x : got.to_vector<bool>()) values.push_back(x ? 1 : 0);
            rtol = atol = 0;
            break;
    }
    REQUIRE(values.size() == want.v.size());
    for (size_t i = 0; i < values.size(); ++i) {
        double g = values[i], w = want.v[i];
        bool ok = std::isnan(w) ? std::isnan(g) : (std::isinf(w) ? g == w : std::fabs(g - w) <= atol + rtol * std::fabs(w));
        if (!ok) {
            FAIL(fmt::format("element {} (index {}): got {}, want {} (rtol {}, atol {})", i, fmt::join(want.unravel(int64_t(i)), ","), g, w,
                             rtol, atol));
        }
    }
}

}  // namespace baregpu::test
