// What the tensor tests share: the cpu device's runtime and tolerant comparisons.
#pragma once

#include "tensor/tensor.hpp"
#include "tests/tensor/reference.hpp"

#include <catch2/catch.hpp>
#include <memory>
#include <string>

namespace baregpu::test {

// The runtime of a `cpu` device opened for the test (backends registered first).
std::shared_ptr<tensor::Runtime> cpu_runtime();

// float32: |got - want| <= atol + rtol * |want| for every element (NaN only where want is NaN);
// exact for int32 and bool. Reports the first mismatch with its row-major index.
void check_close(const tensor::Tensor& got, const Ref& want, double rtol = 1e-5, double atol = 1e-5);

}  // namespace baregpu::test
