// drivers/am's loader for the chip's own ISA: a real gfx1100 code object from the
// compiler (linked by ld.lld) is accepted by AmHcqDevice::load_program on a device with
// isa=native — the kernel's metadata becomes its KernelInfo and its descriptor the dispatch state
// — and malformed or foreign objects are refused with an error naming the problem. Nothing is
// dispatched here (tests/am/am_native_run_test.cpp runs such kernels on the simulated chips).
#include "base/error.hpp"
#include "compiler/amdgpu_codegen.hpp"
#include "compiler/scheduler.hpp"
#include "drivers/am/code_object.hpp"
#include "drivers/am/hcq_device.hpp"
#include "drivers/am/program.hpp"
#include "drivers/pci/sim_bus.hpp"
#include "drivers/sim/amdgpu/navi.hpp"
#include "tests/hcq/support.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

namespace am_native_load_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

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
    // A launch records (the packets are built from that state).
    hcq::Buffer out = dev->allocate(4000), a = dev->allocate(4000), b = dev->allocate(4000), c = dev->allocate(4000);
    auto q = dev->compute_queue();
    q.exec(*program, hcq::KernelArgs(*program, {out, a, b, c}), {4}, {256});
    CHECK(q.size() == 1);
    // The compiler's kernels require their block (.reqd_workgroup_size): any other is refused.
    CHECK(info.required_block == std::array<uint32_t, 3>{256, 1, 1});
    CHECK_THROWS_WITH(q.exec(*program, hcq::KernelArgs(*program, {out, a, b, c}), {16}, {64}), Catch::Contains("requires a block of 256x1x1"));
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
    auto host = test::open_device("sim-am:navi31?isa=host");
    CHECK(host->arch() == "x86_64");
    CHECK_THROWS_AS(host->load_program(object, kernel.name()), Error);
}

TEST_CASE("am native: a kernel that enables the dispatch pointer gets an hsa_kernel_dispatch_packet_t") {
    // tinygrad ops_amd.py AMDComputeQueue.exec builds one after the kernargs for such kernels; without
    // it the SGPRs hold 0 and the kernel's first read of its launch is a fault at VA 0. A dispatch
    // hook catches the user SGPRs (the kernel itself does not read the packet) and the test reads it.
    for (am::SkipStep skip : {am::SkipStep::none, am::SkipStep::dispatch_packet}) {
        namespace fs = std::filesystem;
        std::string tmpl = (fs::temp_directory_path() / "am-dispatch-ptr-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        const fs::path root = tmpl;
        fs::create_directories(root / "locks");
        ::setenv("BAREGPU_LOCK_DIR", (root / "locks").c_str(), 1);
        auto bus = std::make_shared<pci::sim::SimBus>();
        sim::amdgpu::ModelOptions mo;
        mo.state_dir = (root / "state").string();
        const pci::PciAddress address = bus->attach(sim::amdgpu::make_model(mo));
        auto& model = dynamic_cast<sim::amdgpu::NaviModel&>(bus->model(address));
        am::AmOptions o;
        o.lock_key = "sim-am-dispatch-ptr";
        o.skip_step = skip;
        am::AmHcqOptions ho;
        ho.isa = am::KernelIsa::native;
        ho.keepalive = bus;
        {
            auto dev = am::AmHcqDevice::create(am::AmDevice::open(bus->open(address), o), ho);
            Kernel kernel = elementwise_kernel();
            auto loaded = dev->load_program(emit_amdgpu_code_object(kernel, "gfx1100"), kernel.name());
            const auto& p = dynamic_cast<const am::AmProgram&>(*loaded);
            // The same kernel as if its descriptor enabled ENABLE_SGPR_DISPATCH_PTR: the pointer takes
            // the two user SGPRs before the kernarg pointer (AMDGPUUsage's user SGPR order).
            am::pm4::KernelDispatch launch = p.launch();
            REQUIRE_FALSE(launch.user_sgpr_private_segment_buffer);
            launch.user_sgpr_dispatch_ptr = true;
            auto program = std::make_shared<am::AmProgram>(*dev, loaded->info(), p.code(), launch, p.kernarg_sgpr() + 2);
            std::vector<sim::amdgpu::Dispatch> seen;
            model.set_dispatch_hook([&](const sim::amdgpu::Dispatch& d) { seen.push_back(d); });
            hcq::Buffer out = dev->allocate(4000), a = dev->allocate(4000), b = dev->allocate(4000), c = dev->allocate(4000);
            hcq::Signal done = dev->new_signal(0, "done");
            dev->compute_queue().exec(*program, hcq::KernelArgs(*program, {out, a, b, c}), {4, 2, 1}, {256, 1, 1}).signal(done, 1).submit();
            done.wait(1, std::chrono::seconds(5));
            REQUIRE(seen.size() == 1);
            const uint64_t packet_va = seen[0].sgpr_pair(0), kernargs = seen[0].sgpr_pair(p.kernarg_sgpr() + 2);
            CHECK(kernargs != 0);
            if (skip == am::SkipStep::dispatch_packet) {
                CHECK(packet_va == 0);  // what a kernel got before: a null dispatch pointer
                continue;
            }
            REQUIRE(packet_va != 0);
            std::array<uint32_t, 16> packet{};
            REQUIRE(model.gpu_read(packet_va, std::as_writable_bytes(std::span(packet))));
            CHECK((packet[0] >> 16 & 3) == 3);                // setup.dimensions
            CHECK(packet[1] == (256u | 1u << 16));            // workgroup_size_x/y (the kernel requires 256x1x1)
            CHECK((packet[2] & 0xffff) == 1);                 // workgroup_size_z
            CHECK(packet[3] == 4 * 256);                      // grid_size_x, in work-items
            CHECK(packet[4] == 2 * 1);
            CHECK(packet[5] == 1);
            CHECK(packet[7] == launch.lds_bytes);              // group_segment_size
            CHECK((uint64_t{packet[11]} << 32 | packet[10]) == kernargs);  // kernarg_address
        }
        std::error_code ec;
        fs::remove_all(root, ec);
    }
}

}  // namespace am_native_load_test
