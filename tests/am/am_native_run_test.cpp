// The simulated Navi31 and Navi48 run the compiler's own gfx1100 / gfx1201 machine code behind the
// real dispatch path: drivers/am (isa=native) loads the code object and records the dispatch,
// the simulated MEC takes the program, RSRC1/2 and user SGPRs from the COMPUTE_* registers and
// its RDNA3/RDNA4 interpreter (drivers/sim/amdgpu/rdna_*.cpp) runs every wave through the GPU page
// tables. Results are compared with a plain C++ reference; a kernel with one opcode flipped must
// give a wrong result, a launch without the workgroup-id enable must give a wrong result, and an
// encoding the model does not know must stop the dispatch with a violation naming opcode and PC.
#include "compiler/amdgpu_codegen.hpp"
#include "compiler/matmul_match.hpp"
#include "compiler/scheduler.hpp"
#include "drivers/am/code_object.hpp"
#include "drivers/am/hcq_device.hpp"
#include "drivers/am/program.hpp"
#include "drivers/pci/sim_bus.hpp"
#include "drivers/sim/amdgpu/native_exec.hpp"
#include "drivers/sim/amdgpu/navi.hpp"
#include "drivers/sim/amdgpu/rdna_decode.hpp"
#include "tests/hcq/support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <unistd.h>

namespace am_native_run_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::compiler;
namespace fs = std::filesystem;

namespace {

NodeRef input(Shape shape, DType t = DType::float32) { return Node::make_buffer({}, t, std::move(shape)); }

Kernel only_kernel(NodeRef root) {
    auto items = schedule(std::move(root));
    REQUIRE(items.size() == 1);
    return *items[0].kernel;
}

struct GpuTarget {
    sim::amdgpu::Asic asic;
    const char* gfx;
};
const GpuTarget kTargets[] = {{sim::amdgpu::Asic::navi31, "gfx1100"}, {sim::amdgpu::Asic::navi48, "gfx1201"}};

// A freshly booted chip of its own (state dir, lock key) with drivers/am on it, isa=native.
struct Rig {
    fs::path root;
    std::shared_ptr<pci::sim::SimBus> bus;
    sim::amdgpu::NaviModel* model = nullptr;
    std::shared_ptr<am::AmHcqDevice> dev;

    explicit Rig(sim::amdgpu::Asic asic) {
        std::string tmpl = (fs::temp_directory_path() / "am-native-run-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        root = tmpl;
        fs::create_directories(root / "locks");
        ::setenv("BAREGPU_LOCK_DIR", (root / "locks").c_str(), 1);
        bus = std::make_shared<pci::sim::SimBus>();
        sim::amdgpu::ModelOptions mo;
        mo.asic = asic;
        mo.state_dir = (root / "state").string();
        const pci::PciAddress address = bus->attach(sim::amdgpu::make_model(mo));
        model = &dynamic_cast<sim::amdgpu::NaviModel&>(bus->model(address));
        am::AmOptions o;
        o.lock_key = "sim-am-native-run-" + root.filename().string();
        am::AmHcqOptions ho;
        ho.isa = am::KernelIsa::native;
        ho.keepalive = bus;
        dev = am::AmHcqDevice::create(am::AmDevice::open(bus->open(address), o), ho);
    }
    ~Rig() {
        dev.reset();
        std::error_code ec;
        fs::remove_all(root, ec);
    }
    std::string violations() const {
        std::string out;
        for (const auto& v : bus->violations()) out += v.describe() + "\n";
        return out;
    }
};

// Runs `kernel`'s code object (after `patch`) with float inputs on the rig, in workgroups of 256 as
// the tensor runtime launches it (Kernel::gpu_workgroups: one work-item per output element, or one
// workgroup per row for a kernel with row reductions).
struct Launch {
    std::function<void(std::vector<std::byte>& object, const am::AmdgpuCodeObject& parsed)> patch;
    std::function<void(am::pm4::KernelDispatch&)> change;
    compiler::TileShape tile;  // a matmul's GPU tile (the tile search's candidates)
};
std::vector<float> run(Rig& rig, const Kernel& kernel, const std::string& gfx, const std::vector<std::vector<float>>& inputs,
                       size_t outputs, const Launch& launch = {}, bool expect_done = true) {
    std::vector<std::byte> object = emit_amdgpu_code_object(kernel, gfx, launch.tile);
    const am::AmdgpuCodeObject parsed = am::parse_code_object(object, gfx, kernel.name());
    if (launch.patch) launch.patch(object, parsed);
    auto loaded = rig.dev->load_program(object, kernel.name());
    std::shared_ptr<hcq::Program> program = loaded;
    if (launch.change) {
        const auto& p = dynamic_cast<const am::AmProgram&>(*loaded);
        am::pm4::KernelDispatch l = p.launch();
        launch.change(l);
        program = std::make_shared<am::AmProgram>(*rig.dev, loaded->info(), p.code(), l, p.kernarg_sgpr());
    }
    std::vector<hcq::Buffer> buffers;
    buffers.push_back(rig.dev->allocate(outputs * 4));
    test::upload(*rig.dev, buffers[0], std::vector<float>(outputs, -7.0f));
    for (const auto& in : inputs) {
        buffers.push_back(rig.dev->allocate(in.size() * 4));
        test::upload(*rig.dev, buffers.back(), in);
    }
    hcq::KernelArgs args(*program);
    for (size_t i = 0; i < buffers.size(); ++i) args.buffer(uint32_t(i), buffers[i]);
    hcq::Signal done = rig.dev->new_signal(0, "done");
    const uint32_t groups = uint32_t(kernel.gpu_workgroups(256, launch.tile));
    rig.dev->compute_queue().exec(*program, args, {groups}, {256}).signal(done, 1).submit();
    if (!expect_done) {
        CHECK_THROWS(done.wait(1, std::chrono::milliseconds(500)));
        return {};
    }
    done.wait(1, std::chrono::seconds(20));
    return test::download<float>(*rig.dev, buffers[0], outputs);
}

// Equal within `rel` of the reference's magnitude (at least 1): the kernels' float
// sequences (division, exp2, sums in another order) round differently from the host's.
bool near(float x, float ref, double rel) { return std::fabs(double(x) - ref) <= rel * std::max(1.0, std::fabs(double(ref))); }
bool near_1e6(float x, float ref) { return near(x, ref, 1e-6); }
bool near_1e5(float x, float ref) { return near(x, ref, 1e-5); }

std::vector<float> ramp(size_t n, float scale, float offset) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = float(i % 97) * scale + offset;
    return v;
}

// The code words of the kernel's entry in the object file, instruction by instruction, until
// s_endpgm: (file offset, decoded instruction).
std::vector<std::pair<size_t, sim::amdgpu::rdna::Inst>> instructions(const std::vector<std::byte>& object,
                                                                      const am::AmdgpuCodeObject& parsed, const std::string& gfx) {
    const uint64_t entry = parsed.kernel.entry_address;
    size_t file = 0;
    for (const am::LoadSegment& s : parsed.segments)
        if (entry >= s.vaddr && entry < s.vaddr + s.file_size) file = size_t(s.offset + (entry - s.vaddr));
    REQUIRE(file != 0);
    const auto gen = gfx == "gfx1100" ? sim::amdgpu::rdna::Gen::gfx11 : sim::amdgpu::rdna::Gen::gfx12;
    std::vector<std::pair<size_t, sim::amdgpu::rdna::Inst>> out;
    while (file + 4 <= object.size()) {
        std::array<uint32_t, 3> w{};
        std::memcpy(w.data(), object.data() + file, std::min<size_t>(12, object.size() - file));
        std::string why;
        auto in = sim::amdgpu::rdna::decode(gen, w, why);
        INFO(why);
        REQUIRE(in);
        out.emplace_back(file, *in);
        if (in->op == sim::amdgpu::rdna::Op::s_endpgm) break;
        file += 4u * in->words;
    }
    return out;
}

// Runs hand-assembled code (`code` at VA 0x10000) as one wave32 workgroup of 32 items, straight
// through the interpreter: s[0:1] hold the address of a 4 KiB page, which comes back.
std::vector<std::byte> run_words(sim::amdgpu::rdna::Gen gen, const std::vector<uint32_t>& code, uint32_t lds_bytes,
                                 sim::amdgpu::rdna::Counts& counts) {
    namespace rdna = sim::amdgpu::rdna;
    constexpr uint64_t kCode = 0x10000, kOut = 0x20000;
    struct Flat : rdna::Memory {
        std::vector<std::byte> out = std::vector<std::byte>(4096);
        std::byte* page(uint64_t va, bool) override { return va == kOut ? out.data() : nullptr; }
    } memory;
    rdna::Program program(gen, kCode, [](void* ctx, uint64_t va, std::span<uint32_t> w) {
        const auto& c = *static_cast<const std::vector<uint32_t>*>(ctx);
        const uint64_t i = (va - kCode) / 4;
        if (va < kCode || i + w.size() > c.size()) return false;
        std::copy_n(c.begin() + ptrdiff_t(i), w.size(), w.begin());
        return true;
    }, const_cast<std::vector<uint32_t>*>(&code));
    rdna::WaveSetup setup;
    setup.vgprs = 32;
    setup.user_sgpr_count = 2;
    setup.user_sgprs[0] = uint32_t(kOut);
    setup.lds_bytes = lds_bytes;
    setup.block = {32, 1, 1};
    rdna::Stop stop;
    const bool ran = rdna::run_workgroup(program, memory, setup, {0, 0, 0}, counts, stop);
    INFO(stop.what);
    REQUIRE(ran);
    return memory.out;
}

}  // namespace

TEST_CASE("am native run: compiler kernels give the reference results on Navi31 (gfx1100) and Navi48 (gfx1201)") {
    for (const GpuTarget& t : kTargets) {
        INFO(t.gfx);
        Rig rig(t.asic);
        const size_t n = 1000;
        const auto a = ramp(n, 0.5f, -3.0f), b = ramp(n, -0.25f, 1.0f), c = ramp(n, 0.125f, 2.0f);
        {
            // a + b * c
            auto out = run(rig, only_kernel(Node::make_alu(Op::add, DType::float32,
                                                            {input({1000}), Node::make_alu(Op::mul, DType::float32, {input({1000}), input({1000})})})),
                           t.gfx, {a, b, c}, n);
            REQUIRE(test::first_difference(out, [&](size_t i) { return a[i] + b[i] * c[i]; }, near_1e6) == "");
        }
        {
            // a / b, sqrt, exp2, max: the division and transcendental sequences
            auto div = run(rig, only_kernel(Node::make_alu(Op::div, DType::float32, {input({1000}), input({1000})})), t.gfx, {a, c}, n);
            REQUIRE(test::first_difference(div, [&](size_t i) { return a[i] / c[i]; }, near_1e6) == "");
            auto e = run(rig, only_kernel(Node::make_alu(Op::exp2, DType::float32, {input({1000})})), t.gfx, {b}, n);
            REQUIRE(test::first_difference(e, [&](size_t i) { return std::exp2(b[i]); }, near_1e5) == "");
            auto s = run(rig, only_kernel(Node::make_alu(Op::sqrt, DType::float32, {input({1000})})), t.gfx, {c}, n);
            REQUIRE(test::first_difference(s, [&](size_t i) { return std::sqrt(c[i]); }, near_1e6) == "");
        }
        {
            // Row sums and a matmul: loops, 64-bit address arithmetic, reductions.
            const auto x = ramp(100 * 37, 0.01f, -0.2f);
            auto sums = run(rig, only_kernel(Node::make_reduce(Op::reduce_sum, input({100, 37}), {1})), t.gfx, {x}, 100);
            for (size_t r = 0; r < 100; ++r) {
                float ref = 0;
                for (size_t k = 0; k < 37; ++k) ref += x[r * 37 + k];
                REQUIRE(near(sums[r], ref, 1e-5));
            }
            NodeRef ma = input({32, 64}), mb = input({64, 16});
            auto av = Node::make_view(ma, ShapeTracker::contiguous({32, 64}).reshape({32, 1, 64}).expand({32, 16, 64}));
            auto bv = Node::make_view(mb, ShapeTracker::contiguous({64, 16}).permute({1, 0}).reshape({1, 16, 64}).expand({32, 16, 64}));
            const auto A = ramp(32 * 64, 0.03f, -1.0f), B = ramp(64 * 16, -0.02f, 0.5f);
            auto mm = run(rig, only_kernel(Node::make_reduce(Op::reduce_sum, Node::make_alu(Op::mul, DType::float32, {av, bv}), {2})),
                          t.gfx, {A, B}, 32 * 16);
            for (size_t i = 0; i < 32; ++i)
                for (size_t j = 0; j < 16; ++j) {
                    float ref = 0;
                    for (size_t k = 0; k < 64; ++k) ref += A[i * 64 + k] * B[k * 16 + j];
                    REQUIRE(near(mm[i * 16 + j], ref, 1e-4));
                }
        }
        INFO(rig.violations());
        CHECK(rig.bus->violations().empty());
        const auto& report = rig.model->native_report();
        CHECK(report.counts.valu > 0);
        CHECK(report.counts.vmem_load > 0);
        CHECK(report.counts.bytes_stored == 32 * 16 * 4);  // the matmul's output, once
        CHECK(report.modelled_ns > 2000);
        // The interpreter's speed on this machine (BENCHMARKS.md): wave instructions per host second.
        std::printf("%s matmul 32x16x64: %llu wave instructions (%llu VALU, %llu VMEM loads), %llu bytes loaded, modelled %.1f us, "
                    "interpreted in %.2f ms: %.1f M wave instructions/s\n",
                    t.gfx, (unsigned long long)report.counts.instructions(), (unsigned long long)report.counts.valu,
                    (unsigned long long)report.counts.vmem_load, (unsigned long long)report.counts.bytes_loaded,
                    double(report.modelled_ns) / 1000, report.host_seconds * 1000,
                    double(report.counts.instructions()) / report.host_seconds / 1e6);
    }
}

TEST_CASE("am native run: a kernel with row reductions is one workgroup per row, reducing through LDS; rows up to 4096 read once") {
    // (x - max(x)) / sum(x - max(x)) along rows: two row reductions, the second over the first's
    // result, as softmax's are. Rows of 1000 stay in registers (4 elements per work-item): one
    // read; rows of 5000 are read once per pass (the maximum, the sum, the elements).
    for (const auto& shape : {std::tuple<int64_t, int64_t, int64_t>{5, 1000, 1}, {2, 5000, 3}}) {
        // Named, not bound: the lambda below captures them (clang 14 cannot capture a structured binding).
        const int64_t rows = std::get<0>(shape), len = std::get<1>(shape), passes = std::get<2>(shape);
        INFO("rows of " << len);
        NodeRef x = input({rows, len});
        auto row_of = [&](Op op, NodeRef v) {
            return Node::make_view(Node::make_reduce(op, v, {1}), ShapeTracker::contiguous({rows, 1}).expand({rows, len}));
        };
        NodeRef centred = Node::make_alu(Op::sub, DType::float32, {x, row_of(Op::reduce_max, x)});
        const Kernel k = only_kernel(Node::make_alu(Op::div, DType::float32, {centred, row_of(Op::reduce_sum, centred)}));
        REQUIRE(k.has_row_reduce());
        CHECK(k.gpu_workgroups(256) == rows);
        std::vector<float> in(size_t(rows * len));
        for (size_t i = 0; i < in.size(); ++i) in[i] = float((i * 7919) % 1013) * 0.01f - float(i / size_t(len));
        std::vector<float> want(in.size());
        for (size_t r = 0; r < size_t(rows); ++r) {
            const float* row = in.data() + r * size_t(len);
            const double mx = *std::max_element(row, row + len);
            double sum = 0;
            for (int64_t j = 0; j < len; ++j) sum += row[j] - mx;
            for (int64_t j = 0; j < len; ++j) want[r * size_t(len) + size_t(j)] = float((row[j] - mx) / sum);
        }
        for (const GpuTarget& t : kTargets) {
            INFO(t.gfx);
            Rig rig(t.asic);
            auto out = run(rig, k, t.gfx, {in}, in.size());
            REQUIRE(test::first_difference(out, [&](size_t i) { return want[i]; }, near_1e5) == "");
            INFO(rig.violations());
            CHECK(rig.bus->violations().empty());
            const auto& report = rig.model->native_report();
            CHECK(report.counts.workgroups == uint64_t(rows));
            CHECK(report.counts.lds > 0);
            // Kernel arguments, and the last position's items past the row re-read its last element.
            CHECK(report.counts.bytes_loaded <= uint64_t(passes * rows * len * 4 + rows * 256 * 4) + 1024);
            CHECK(report.counts.bytes_loaded >= uint64_t(passes * rows * len * 4));
            CHECK(report.counts.bytes_stored == uint64_t(rows * len * 4));
        }
    }
}

TEST_CASE("am native run: a matmul is one workgroup per tile of C (64x64, 128x128 where C spans them), staged through LDS, edges zero-padded") {
    // A (M x K) @ B^T (B stored N x K) + 1: M, N and K off the tile and the 16-deep slice, a
    // transposed B, an epilogue above the sum. 130 x 70 takes 64-tiles (2 / 64 = 1/32 global
    // loads per FMA); 260 x 200 takes 128-tiles (1/64).
    for (const auto& [M, K, N, tile] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{130, 100, 70, 64}, {260, 40, 200, 128}}) {
        INFO(M << " x " << K << " @ " << K << " x " << N);
        NodeRef a = input({M, K}), b = input({N, K});
        auto av = Node::make_view(a, ShapeTracker::contiguous({M, K}).reshape({M, 1, K}).expand({M, N, K}));
        auto bv = Node::make_view(b, ShapeTracker::contiguous({N, K}).reshape({1, N, K}).expand({M, N, K}));
        NodeRef sum = Node::make_reduce(Op::reduce_sum, Node::make_alu(Op::mul, DType::float32, {av, bv}), {2});
        const Kernel k = only_kernel(Node::make_alu(Op::add, DType::float32, {sum, Node::make_constant(1.0, DType::float32, {M, N, 1})}));
        const int64_t tiles = (M + tile - 1) / tile * ((N + tile - 1) / tile), slices = (K + 15) / 16;
        CHECK(k.gpu_workgroups(256) == tiles);
        const auto A = ramp(size_t(M * K), 0.03f, -1.0f), B = ramp(size_t(N * K), -0.02f, 0.5f);
        std::vector<float> want(size_t(M * N));
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
                double ref = 1;
                for (int64_t x = 0; x < K; ++x) ref += double(A[size_t(i * K + x)]) * B[size_t(j * K + x)];
                want[size_t(i * N + j)] = float(ref);
            }
        for (const GpuTarget& t : kTargets) {
            INFO(t.gfx);
            Rig rig(t.asic);
            auto out = run(rig, k, t.gfx, {A, B}, want.size());
            REQUIRE(test::first_difference(out, [&](size_t i) { return want[i]; }, [](float x, float r) { return near(x, r, 1e-4); }) == "");
            INFO(rig.violations());
            CHECK(rig.bus->violations().empty());
            const auto& report = rig.model->native_report();
            CHECK(report.counts.workgroups == uint64_t(tiles));
            CHECK(report.counts.lds > 0);
            // Each workgroup stages `tile` rows of A and `tile` columns of B per slice of 16.
            const uint64_t staged = uint64_t(tiles * slices * 2 * tile * 16);
            CHECK(report.counts.bytes_loaded <= staged * 4 + 4096);
            CHECK(report.counts.bytes_stored == uint64_t(M * N * 4));
            // A and B are re-read by every tile: the DRAM traffic the model charges is the pages
            // touched (they fit in the Infinity Cache), less than what the loads moved.
            CHECK(report.dram_bytes == report.footprint_bytes);
            CHECK(report.footprint_bytes <= uint64_t((M * K + N * K + M * N) * 4) + 8 * 4096);
            if (tile == 64) CHECK(report.dram_bytes < report.counts.bytes_loaded);
            // The FMAs, padded: tile x tile x 16 per slice, 32 lanes to a wave operation (a VOPD
            // instruction is two).
            CHECK(report.counts.valu + report.counts.vopd >= uint64_t(tiles * slices * tile * tile * 16 / 32));
        }
        // Every tile the GPU tile search may pick computes the same product.
        const std::vector<compiler::TileShape> candidates = compiler::gpu_tile_candidates(k);
        // The default, then the other three of 64/128-tiles with 8-, 16- or 32-deep slices offered.
        REQUIRE(candidates.size() == 4);
        CHECK(candidates.front() == compiler::TileShape{});
        Rig rig(kTargets[0].asic);
        for (const compiler::TileShape& shape : candidates) {
            INFO("tile " << shape.text());
            Launch launch;
            launch.tile = shape;
            auto out = run(rig, k, kTargets[0].gfx, {A, B}, want.size(), launch);
            REQUIRE(test::first_difference(out, [&](size_t i) { return want[i]; }, [](float x, float r) { return near(x, r, 1e-4); }) == "");
            CHECK(rig.model->native_report().counts.workgroups == uint64_t(k.gpu_workgroups(256, shape)));
        }
    }
}

TEST_CASE("am native run: one opcode flipped (v_add_f32 -> v_sub_f32) gives a wrong result") {
    for (const GpuTarget& t : kTargets) {
        INFO(t.gfx);
        Rig rig(t.asic);
        const size_t n = 1000;
        const auto a = ramp(n, 0.5f, 1.0f), b = ramp(n, 0.25f, 3.0f);
        const Kernel k = only_kernel(Node::make_alu(Op::add, DType::float32, {input({1000}), input({1000})}));
        auto good = run(rig, k, t.gfx, {a, b}, n);
        REQUIRE(test::first_difference(good, [&](size_t i) { return a[i] + b[i]; }) == "");
        int flipped = 0;
        Launch flip;
        flip.patch = [&](std::vector<std::byte>& object, const am::AmdgpuCodeObject& parsed) {
            for (auto& [at, in] : instructions(object, parsed, t.gfx)) {
                if (in.op != sim::amdgpu::rdna::Op::v_add_f32 || in.enc != sim::amdgpu::rdna::Encoding::vop2) continue;
                uint32_t w;
                std::memcpy(&w, object.data() + at, 4);
                w = (w & ~(0x3fu << 25)) | 4u << 25;  // VOP2 opcode 3 (v_add_f32) -> 4 (v_sub_f32), RDNA3 §15.3.1
                std::memcpy(object.data() + at, &w, 4);
                ++flipped;
            }
        };
        auto bad = run(rig, k, t.gfx, {a, b}, n, flip);
        REQUIRE(flipped == 1);
        REQUIRE(test::first_difference(bad, [&](size_t i) { return a[i] - b[i]; }) == "");
        CHECK(rig.bus->violations().empty());
    }
}

TEST_CASE("am native run: COMPUTE_PGM_RSRC2 without TGID_X_EN gives the wrong result on GC 11 (GC 12's ids are architected)") {
    for (const GpuTarget& t : kTargets) {
        INFO(t.gfx);
        Rig rig(t.asic);
        const size_t n = 1000;
        const auto a = ramp(n, 1.0f, 0.0f), b = ramp(n, 2.0f, 1.0f);
        const Kernel k = only_kernel(Node::make_alu(Op::add, DType::float32, {input({1000}), input({1000})}));
        Launch no_tgid;
        no_tgid.change = [](am::pm4::KernelDispatch& l) {
            REQUIRE((l.rsrc2 >> 7 & 1) == 1);
            l.rsrc2 &= ~(1u << 7);  // ENABLE_SGPR_WORKGROUP_ID_X
        };
        auto out = run(rig, k, t.gfx, {a, b}, n, no_tgid);
        size_t right = 0;
        for (size_t i = 0; i < n; ++i) right += out[i] == a[i] + b[i];
        if (std::string(t.gfx) == "gfx1100") {
            // The kernel reads its group id from the SGPR after USER_SGPR; without the enable that SGPR
            // is not loaded: every workgroup computes the same (wrong) slice.
            CHECK(right <= 256);
            CHECK(right < n);
        } else {
            CHECK(right == n);  // gfx1201 reads TTMP9, which GC 12 always loads
        }
    }
}

TEST_CASE("am native run: an encoding the model does not execute stops the dispatch with its opcode and PC") {
    for (const GpuTarget& t : kTargets) {
        INFO(t.gfx);
        Rig rig(t.asic);
        const Kernel k = only_kernel(Node::make_alu(Op::add, DType::float32, {input({1000}), input({1000})}));
        size_t pc_offset = 0;
        Launch unknown;
        unknown.patch = [&](std::vector<std::byte>& object, const am::AmdgpuCodeObject& parsed) {
            const auto code = instructions(object, parsed, t.gfx);
            for (auto& [at, in] : code) {
                if (in.op != sim::amdgpu::rdna::Op::v_add_f32 || in.enc != sim::amdgpu::rdna::Encoding::vop2) continue;
                uint32_t w;
                std::memcpy(&w, object.data() + at, 4);
                w = (w & ~(0x3fu << 25)) | 0x3cu << 25;  // VOP2 opcode 60: no instruction in the model's tables
                std::memcpy(object.data() + at, &w, 4);
                pc_offset = at - code.front().first;
            }
        };
        run(rig, k, t.gfx, {std::vector<float>(1000, 1.0f), std::vector<float>(1000, 2.0f)}, 1000, unknown, false);
        const std::string v = rig.violations();
        INFO(v);
        CHECK(v.find("VOP2 opcode 60") != std::string::npos);
        REQUIRE(pc_offset != 0);
        CHECK(v.find(fmt::format("program + {:#x}", pc_offset)) != std::string::npos);
    }
}

TEST_CASE("am native run: the cache invalidations LLVM puts at fences decode; other buffer instructions are refused") {
    namespace rdna = sim::amdgpu::rdna;
    // Encodings from llvm-mc-19 -show-encoding (-mcpu=gfx1100 / gfx1201).
    const struct {
        rdna::Gen gen;
        std::vector<uint32_t> words;
        rdna::Op op;  // invalid: refused, naming `refused`
        const char* refused;
    } cases[] = {
        {rdna::Gen::gfx11, {0xe0ac0000u, 0, 0}, rdna::Op::buffer_gl0_inv, ""},
        {rdna::Gen::gfx11, {0xe0b00000u, 0, 0}, rdna::Op::buffer_gl1_inv, ""},
        {rdna::Gen::gfx11, {0xe0500000u, 0x80000100u, 0}, rdna::Op::invalid, "MUBUF opcode 20"},  // buffer_load_b32
        {rdna::Gen::gfx12, {0xee0ac07cu, 0x00040000u, 0}, rdna::Op::global_inv, ""},
        {rdna::Gen::gfx12, {0xee0b007cu, 0x000c0000u, 0}, rdna::Op::global_wb, ""},
        {rdna::Gen::gfx12, {0xee13c07cu, 0x000c0000u, 0}, rdna::Op::global_wbinv, ""},
        {rdna::Gen::gfx12, {0xec0ac07cu, 0x00040000u, 0}, rdna::Op::invalid, "FLAT opcode 43"},  // global_inv's opcode as FLAT
        {rdna::Gen::gfx11, {0xdcac0000u, 0, 0}, rdna::Op::invalid, "opcode 43"},  // GC 11 FLAT has no opcode 43
    };
    for (const auto& c : cases) {
        INFO(fmt::format("{:#010x}", c.words[0]));
        std::string why;
        const std::optional<rdna::Inst> in = rdna::decode(c.gen, c.words, why);
        if (c.op == rdna::Op::invalid) {
            CHECK_FALSE(in.has_value());
            CHECK_THAT(why, Catch::Contains(c.refused));
        } else {
            REQUIRE(in.has_value());
            CHECK(in->op == c.op);
            CHECK(in->words == (c.gen == rdna::Gen::gfx11 ? 2 : 3));
            CHECK(in->unit == rdna::Unit::other);
        }
    }
}

TEST_CASE("am native run: the two-address DS forms store and load at offset0 and offset1 in elements, x64 for stride64") {
    namespace rdna = sim::amdgpu::rdna;
    // One wave32 of GC 11 code, assembled by llvm-mc-19 -mcpu=gfx1100 (the DS words are the same for
    // gfx1201). Lane l: v2..v5 = 100+l, 200+l, 300+l, 400+l; v10 = 8l, v20 = v10+0x800, v21 =
    // v10+0x400, v22 = v10+0x1000, v23 = 4l+0x2000.
    //   ds_store_2addr_stride64_b64 v10, v[2:3], v[4:5] offset0:1 offset1:2  (v10+512, v10+1024)
    //   ds_store_2addr_b32 v20, v2, v3 offset1:1                            (v20, v20+4)
    //   ds_store_2addr_b64 v22, v[2:3], v[4:5] offset1:32                    (v22, v22+256)
    //   ds_store_2addr_stride64_b32 v23, v4, v5 offset1:1                    (v23, v23+256)
    //   ds_load_2addr_b32 v[6:7], v10 offset0:128 offset1:129                (v10+512, +516)
    //   ds_load_2addr_stride64_b32 v[8:9], v10 offset0:4 offset1:2           (v10+1024, v10+512)
    //   ds_load_2addr_b64 v[12:15], v21 offset0:128                          (v21+1024, v21)
    //   ds_load_2addr_stride64_b64 v[16:19], v10 offset0:1 offset1:2         (v10+512, v10+1024)
    //   ds_load_2addr_b32 v[24:25], v22 offset1:65                           (v22, v22+260)
    //   ds_load_2addr_b32 v[26:27], v23 offset1:64                           (v23, v23+256)
    //   s_waitcnt lgkmcnt(0); then v[6:9], v[12:15], v[16:19], v[24:27] to s[0:1] + 64l.
    const std::vector<uint32_t> code{
        0x30140083u, 0x4a0400ffu, 0x00000064u, 0x4a0600ffu, 0x000000c8u, 0x4a0800ffu, 0x0000012cu, 0x4a0a00ffu, 0x00000190u,
        0x4a2814ffu, 0x00000800u, 0x4a2a14ffu, 0x00000400u, 0x4a2c14ffu, 0x00001000u, 0x302e0082u, 0x4a2e2effu, 0x00002000u,
        0xd93c0201u, 0x0004020au, 0xd8380100u, 0x00030214u, 0xd9382000u, 0x00040216u, 0xd83c0100u, 0x00050417u,
        0xd8dc8180u, 0x0600000au, 0xd8e00204u, 0x0800000au, 0xd9dc0080u, 0x0c000015u, 0xd9e00201u, 0x1000000au,
        0xd8dc4100u, 0x18000016u, 0xd8dc4000u, 0x1a000017u, 0xbf89fc07u, 0x30160086u, 0xdc760000u, 0x0000060bu,
        0xdc760010u, 0x00000c0bu, 0xdc760020u, 0x0000100bu, 0xdc760030u, 0x0000180bu, 0xbfb00000u};
    rdna::Counts counts;
    const std::vector<std::byte> out = run_words(rdna::Gen::gfx11, code, 16384, counts);
    for (uint32_t l = 0; l < 32; ++l) {
        uint32_t got[16];
        std::memcpy(got, out.data() + 64 * l, sizeof got);
        const uint32_t want[16] = {100 + l, 200 + l, 300 + l, 100 + l, 100 + l, 200 + l, 300 + l, 400 + l,
                                   100 + l, 200 + l, 300 + l, 400 + l, 100 + l, 400 + l, 300 + l, 400 + l};
        INFO("lane " << l);
        CHECK(std::vector<uint32_t>(got, got + 16) == std::vector<uint32_t>(want, want + 16));
    }
    CHECK(counts.lds == 10);
}

TEST_CASE("am native run: GC 12's pseudo-scalar transcendentals (v_s_*_f32) write their SGPR from a scalar source") {
    namespace rdna = sim::amdgpu::rdna;
    // llvm-mc-19 -mcpu=gfx1201: s_mov_b32 s2, 4.0; v_s_sqrt_f32 s3, s2; v_s_rsq_f32 s4, s2;
    // v_s_rcp_f32 s5, -s2; v_s_exp_f32 s6, s2; v_s_log_f32 s7, s2 mul:2; v1..v5 = s3..s7;
    // global_store_b128 v0, v[1:4], s[0:1]; global_store_b32 v0, v5, s[0:1] offset:16 (v0 = 0).
    const std::vector<uint32_t> code{0xbe8200f6u, 0xd6880003u, 0x00000002u, 0xd6860004u, 0x00000002u, 0xd6840005u, 0x20000002u,
                                     0xd6800006u, 0x00000002u, 0xd6820007u, 0x08000002u, 0x7e020203u, 0x7e040204u, 0x7e060205u,
                                     0x7e080206u, 0x7e0a0207u, 0x7e000280u, 0xee074000u, 0x00800000u, 0x00000000u, 0xee068000u,
                                     0x02800000u, 0x00001000u, 0xbfb00000u};
    rdna::Counts counts;
    const std::vector<std::byte> out = run_words(rdna::Gen::gfx12, code, 0, counts);
    float got[5];
    std::memcpy(got, out.data(), sizeof got);
    CHECK(got[0] == 2.0f);     // sqrt 4
    CHECK(got[1] == 0.5f);     // 1 / sqrt 4
    CHECK(got[2] == -0.25f);   // 1 / -4 (the neg modifier)
    CHECK(got[3] == 16.0f);    // 2^4
    CHECK(got[4] == 4.0f);     // log2 4, times 2 (omod)
    // GC 11 has no such opcodes: the same words are refused there.
    std::string why;
    CHECK_FALSE(rdna::decode(rdna::Gen::gfx11, std::vector<uint32_t>{0xd6880003u, 0x00000002u}, why).has_value());
    CHECK_THAT(why, Catch::Contains("VOP3 opcode 648"));
}

TEST_CASE("am native run: a VOPD is one VALU instruction doing two operations (counted in valu once, in vopd once)") {
    namespace rdna = sim::amdgpu::rdna;
    // llvm-mc-19 -mcpu=gfx1100 / gfx1201: v_mov_b32 v1, 2.0; v_mov_b32 v2, 0.5; v_mov_b32 v4, 1.0;
    // v_mov_b32 v5, 4.0; v_dual_fmac_f32 v4, v1, v2 :: v_dual_fmac_f32 v5, v2, v1; v_mov_b32 v0, 0;
    // global_store_b64 v0, v[4:5], s[0:1]; s_endpgm.
    const std::vector<uint32_t> head{0x7e0202f4u, 0x7e0402f0u, 0x7e0802f2u, 0x7e0a02f6u, 0xc8000501u, 0x04040302u, 0x7e000280u};
    for (const auto& [gen, store] : {std::pair{rdna::Gen::gfx11, std::vector<uint32_t>{0xdc6e0000u, 0x00000400u}},
                                     std::pair{rdna::Gen::gfx12, std::vector<uint32_t>{0xee06c000u, 0x02000000u, 0x00000000u}}}) {
        std::vector<uint32_t> code = head;
        code.insert(code.end(), store.begin(), store.end());
        code.push_back(0xbfb00000u);
        rdna::Counts counts;
        const std::vector<std::byte> out = run_words(gen, code, 0, counts);
        float got[2];
        std::memcpy(got, out.data(), sizeof got);
        CHECK(got[0] == 2.0f);  // 1 + 2 * 0.5
        CHECK(got[1] == 5.0f);  // 4 + 0.5 * 2
        CHECK(counts.valu == 6);  // five v_mov_b32 and the VOPD
        CHECK(counts.vopd == 1);
    }
}

TEST_CASE("am native run: packed math (VOP3P) takes each half by opsel / opsel_hi, negates by neg / neg_hi, and mixes f16 with f32") {
    namespace rdna = sim::amdgpu::rdna;
    // Assembled by llvm-mc-19 -mcpu=gfx1100 and -mcpu=gfx1201: the same words up to the stores, but
    // for the f16 maximum (GC 12's v_pk_max_num_f16, opcode 28 instead of 18: word 10). v1 = (1.0,
    // 2.0) and v2 = (3.0, 4.0) as (low, high) f16;
    //   v_pk_add_f16 v3, v1, v2
    //   v_pk_mul_f16 v4, v1, v2 op_sel:[1,0] op_sel_hi:[0,1]
    //   v_pk_fma_f16 v5, v1, v2, v1 neg_lo:[1,0,0]
    //   v_pk_max_f16 v6, v1, v2 neg_hi:[0,1]
    // v7 = (-2, 5), v8 = (7, 3), v12 = (1, 1) as 16-bit integers;
    //   v_pk_add_u16 v9, v7, v8; v_pk_mad_i16 v10, v7, v8, v8; v_pk_ashrrev_i16 v11, v12, v7;
    //   v_pk_max_i16 v13, v7, v8; v_pk_max_u16 v14, v7, v8
    // v16 = 0.5f, v17 = 0xabcd0000;
    //   v_fma_mix_f32 v15, v1, v2, v16 op_sel_hi:[1,1,0]
    //   v_fma_mixlo_f16 v17, v1, v2, v16 op_sel:[1,1,0] op_sel_hi:[1,1,0]
    // then (v0 = 0) v3..v6, v9, v10, v11, v13, v14, v15, v17 to s[0:1] (GLOBAL stores, encoded per generation).
    const std::vector<uint32_t> math{
        0x7e0202ffu, 0x40003c00u, 0x7e0402ffu, 0x44004200u, 0xcc0f4003u, 0x18020501u, 0xcc104804u, 0x10020501u, 0xcc0e4005u,
        0x3c060501u, 0xcc124206u, 0x18020501u, 0x7e0e02ffu, 0x0005fffeu, 0x7e1002ffu, 0x00030007u, 0x7e1802ffu, 0x00010001u,
        0xcc0a4009u, 0x18021107u, 0xcc00400au, 0x1c221107u, 0xcc06400bu, 0x18020f0cu, 0xcc07400du, 0x18021107u, 0xcc0c400eu,
        0x18021107u, 0x7e2002f0u, 0xcc20000fu, 0x1c420501u, 0x7e2202ffu, 0xabcd0000u, 0xcc211811u, 0x1c420501u, 0x7e000280u};
    std::vector<uint32_t> gfx1100 = math, gfx1201 = math;
    gfx1201[10] = 0xcc1c4206u;
    gfx1100.insert(gfx1100.end(), {0xdc760000u, 0x00000300u, 0xdc6a0010u, 0x00000900u, 0xdc6a0014u, 0x00000a00u, 0xdc6a0018u,
                                   0x00000b00u, 0xdc6a001cu, 0x00000d00u, 0xdc6a0020u, 0x00000e00u, 0xdc6a0024u, 0x00000f00u,
                                   0xdc6a0028u, 0x00001100u, 0xbfb00000u});
    gfx1201.insert(gfx1201.end(), {0xee074000u, 0x01800000u, 0x00000000u, 0xee068000u, 0x04800000u, 0x00001000u, 0xee068000u,
                                   0x05000000u, 0x00001400u, 0xee068000u, 0x05800000u, 0x00001800u, 0xee068000u, 0x06800000u,
                                   0x00001c00u, 0xee068000u, 0x07000000u, 0x00002000u, 0xee068000u, 0x07800000u, 0x00002400u,
                                   0xee068000u, 0x08800000u, 0x00002800u, 0xbfb00000u});
    const std::vector<uint32_t> want{
        0x46004400u,  // (4.0, 6.0)
        0x44004600u,  // (2 * 3, 1 * 4)
        0x4900c000u,  // (-1 * 3 + 1, 2 * 4 + 2)
        0x40004200u,  // (max(1, 3), max(2, -4))
        0x00080005u,  // (-2 + 7, 5 + 3)
        0x0012fff9u,  // (-2 * 7 + 7, 5 * 3 + 3)
        0x0002ffffu,  // (-2 >> 1, 5 >> 1)
        0x00050007u,  // signed maxima
        0x0005fffeu,  // unsigned maxima
        0x40600000u,  // 1 * 3 + 0.5 as f32
        0xabcd4840u,  // 2 * 4 + 0.5 as f16 in the low half, the high half kept
    };
    for (auto [gen, code] : {std::pair{rdna::Gen::gfx11, &gfx1100}, std::pair{rdna::Gen::gfx12, &gfx1201}}) {
        INFO((gen == rdna::Gen::gfx11 ? "gfx1100" : "gfx1201"));
        rdna::Counts counts;
        const std::vector<std::byte> out = run_words(gen, *code, 0, counts);
        std::vector<uint32_t> got(want.size());
        std::memcpy(got.data(), out.data(), got.size() * 4);
        CHECK(got == want);
    }
}

TEST_CASE("am native run: a kernel without its s_waitcnt reads a register its load still owes: a violation") {
    for (const GpuTarget& t : kTargets) {
        INFO(t.gfx);
        Rig rig(t.asic);
        const Kernel k = only_kernel(Node::make_alu(Op::add, DType::float32, {input({1000}), input({1000})}));
        int removed = 0;
        Launch no_wait;
        no_wait.patch = [&](std::vector<std::byte>& object, const am::AmdgpuCodeObject& parsed) {
            using sim::amdgpu::rdna::Op;
            for (auto& [at, in] : instructions(object, parsed, t.gfx)) {
                if (in.op != Op::s_waitcnt && in.op != Op::s_wait_kmcnt) continue;
                const uint32_t nop = 0xbf800000;  // s_nop 0 (SOPP opcode 0)
                std::memcpy(object.data() + at, &nop, 4);
                ++removed;
                break;  // the first: the wait for the kernarg loads
            }
        };
        run(rig, k, t.gfx, {std::vector<float>(1000, 1.0f), std::vector<float>(1000, 2.0f)}, 1000, no_wait, false);
        REQUIRE(removed == 1);
        const std::string v = rig.violations();
        INFO(v);
        CHECK(v.find("before an s_waitcnt lgkmcnt") != std::string::npos);
    }
}

}  // namespace am_native_run_test
