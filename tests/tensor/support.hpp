// What the tensor tests share: the runtime of the device under test and tolerant comparisons.
#pragma once

#include "tensor/tensor.hpp"
#include "tests/tensor/reference.hpp"

#include <catch2/catch.hpp>
#include <memory>
#include <string>

namespace baregpu::test {

// The runtime of the device under test: the first of $BAREGPU_TEST_DEVICES, else `cpu` (backends
// registered first). The same compiler output and the same reference checks run on every device.
std::shared_ptr<tensor::Runtime> device_runtime();
// That device (one instance per process: a simulated chip's state is locked while open).
std::shared_ptr<hcq::Device> device_under_test();

// Whether the device under test's kernels run in a simulated chip's interpreter (sim-am and
// am:usb:sim with their own gfx code: the device reports the interpreter's counts per kernel).
// Such a chip runs a naive GPU matmul at a few hundred thousand MACs per second: the cases whose
// largest shapes exist for the CPU kernel's tiles leave those out there unless BAREGPU_LONG=full.
bool interpreted_device();
// Whether a shape of `macs` multiply-adds is left out by that rule.
bool too_slow_to_interpret(int64_t macs);

// float32: |got - want| <= atol + rtol * |want| for every element (NaN only where want is NaN);
// exact for int32 and bool. Reports the first mismatch with its row-major index.
void check_close(const tensor::Tensor& got, const Ref& want, double rtol = 1e-5, double atol = 1e-5);

}  // namespace baregpu::test
