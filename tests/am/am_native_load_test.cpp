// drivers/am's loader for the chip's own ISA (issue 7): a real gfx1100 code object from the
// compiler (linked by ld.lld) is accepted by AmHcqDevice::load_program on a device with
// isa=native — the kernel's metadata becomes its KernelInfo and its descriptor the dispatch state
// — and malformed or foreign objects are refused with an error naming the problem. The simulated
// chip cannot run gfx code, so nothing is dispatched here (tests/am/am_hcq_test.cpp runs kernels).
#include "base/error.hpp"
#include "compiler/amdgpu_codegen.hpp"
#include "compiler/scheduler.hpp"
#include "drivers/am/code_object.hpp"
#include "drivers/am/hcq_device.hpp"
#include "drivers/am/program.hpp"
#include "tests/hcq/support.hpp"

#include <catch2/catch.hpp>

using namespace baregpu;
using namespace baregpu::compiler;

namespace {

NodeRef input(Shape shape) { return Node::make_buffer({}, DType::float32, std::move(shape)); }

// out = a + b * c over 1000 floats: four buffers, no values.
Kernel elementwise_kernel() {
    NodeRef a = input({1000}), b = input({1000}), c = input({1000});
    auto items = schedule(Node::make_alu(Op::add, DType::float32, {a, Node::make_alu(Op::mul, DType::float32, {b, c})}));
    REQUIRE(items.size() == 1);
    return *items[0].kernel;
}

}  // namespace

TEST_CASE("am native: a real gfx1100 code object from the compiler is accepted by the device's loader") {
    auto dev = test::open_device("sim-am:navi31?isa=native");
    CHECK(dev->arch() == "gfx1100");
    Kernel kernel = elementwise_kernel();
    const std::vector<std::byte> object = emit_amdgpu_code_object(kernel, "gfx1100");
    const am::AmdgpuCodeObject parsed = am::parse_code_object(object, "gfx1100", kernel.name());

    auto program = dev->load_program(object, kernel.name());
    const hcq::KernelInfo& info = program->info();
    CHECK(info.name == kernel.name());
    CHECK(info.num_buffers == 4);
    CHECK(info.num_values == 0);
    CHECK(info.kernarg_size == 32);
    CHECK(info.kernarg_size == parsed.kernel.metadata.kernarg_segment_size);
    CHECK(info.max_threads_per_group == std::min<uint64_t>(parsed.kernel.metadata.max_flat_workgroup_size, 1024));
    CHECK(info.registers == parsed.kernel.metadata.vgpr_count);
    // The dispatch state comes from the descriptor; the code is where the descriptor says.
    const auto& p = dynamic_cast<const am::AmProgram&>(*program);
    CHECK(p.launch().rsrc1 == parsed.kernel.descriptor.compute_pgm_rsrc1);
    CHECK(p.launch().rsrc2 == parsed.kernel.descriptor.compute_pgm_rsrc2);
    CHECK(p.launch().wave32);
    CHECK(p.launch().code_address % 256 == 0);
    CHECK(p.kernarg_sgpr() == parsed.kernel.user_sgprs.kernarg_segment_ptr.value());
    // A launch records (the packets are built from that state) even though the model cannot run it.
    hcq::Buffer out = dev->allocate(4000), a = dev->allocate(4000), b = dev->allocate(4000), c = dev->allocate(4000);
    auto q = dev->compute_queue();
    q.exec(*program, hcq::KernelArgs(*program, {out, a, b, c}), {4}, {256});
    CHECK(q.size() == 1);
}

TEST_CASE("am native: malformed and foreign code objects are refused with what is wrong") {
    Kernel kernel = elementwise_kernel();
    const std::vector<std::byte> object = emit_amdgpu_code_object(kernel, "gfx1100");

    {
    auto dev = test::open_device("sim-am:navi31?isa=native");
    std::vector<std::byte> truncated(object.begin(), object.begin() + static_cast<std::ptrdiff_t>(object.size() / 3));
    CHECK_THROWS_AS(dev->load_program(truncated, kernel.name()), Error);

    const std::vector<std::byte> rdna4 = emit_amdgpu_code_object(kernel, "gfx1201");
    CHECK_THROWS_WITH(dev->load_program(rdna4, kernel.name()), Catch::Contains("gfx1100"));

    CHECK_THROWS_WITH(dev->load_program(emit_amdgpu_object(kernel, "gfx1100"), kernel.name()), Catch::Contains("ET_DYN"));
    CHECK_THROWS_WITH(dev->load_program(object, "no_such_kernel"), Catch::Contains("no_such_kernel"));
    }  // one owner of the chip at a time

    // And a host-code device refuses a gfx object (it loads x86-64 objects).
    auto host = test::open_device("sim-am:navi31");
    CHECK(host->arch() == "x86_64");
    CHECK_THROWS_AS(host->load_program(object, kernel.name()), Error);
}
