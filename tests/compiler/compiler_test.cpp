// The compiler on its own: views, kernel keys, the CPU code-object ABI, code generation and
// the disk cache.
#include "compiler/amdgpu_codegen.hpp"
#include "compiler/compiler.hpp"
#include "compiler/cpu_codegen.hpp"
#include "compiler/cpu_kernel_abi.hpp"
#include "compiler/scheduler.hpp"
#include "drivers/hostcode/kernel_abi.h"
#include "tests/hcq/support.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

namespace compiler_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::compiler;

static_assert(cpu_abi::kMagic == BAREGPU_KERNEL_MAGIC);
static_assert(cpu_abi::kVersion == BAREGPU_KERNEL_ABI_VERSION);
static_assert(cpu_abi::kNameBytes == BAREGPU_KERNEL_NAME_BYTES);
static_assert(cpu_abi::kDescriptorBytes == sizeof(baregpu_kernel_descriptor));
static_assert(cpu_abi::kDispatchGroupIdOffset == offsetof(baregpu_dispatch, group_id));
static_assert(cpu_abi::kDispatchGridOffset == offsetof(baregpu_dispatch, grid));

namespace {

bool within_1e4(float found, double expected) { return std::fabs(found - expected) <= 1e-4 * (1 + std::fabs(expected)); }

// Evaluate a tracker on the host: the storage element of `idx`, or -1 where masked.
int64_t evaluate(const ShapeTracker& st, std::vector<int64_t> idx) {
    const auto& views = st.views();
    int64_t addr = 0;
    bool valid = true;
    for (size_t vi = views.size(); vi-- > 0;) {
        const View& v = views[vi];
        addr = v.offset;
        for (size_t d = 0; d < v.shape.size(); ++d) {
            auto [lo, hi] = v.mask_of(d);
            valid = valid && idx[d] >= lo && idx[d] < hi;
            addr += idx[d] * v.strides[d];
        }
        if (vi == 0) break;
        const Shape& below = views[vi - 1].shape;
        idx.assign(below.size(), 0);
        int64_t rest = addr;
        for (size_t d = below.size(); d-- > 0;) {
            idx[d] = rest % below[d];
            rest /= below[d];
        }
    }
    return valid ? addr : -1;
}

// An elementwise kernel out[i] = in0[i] * c + 1 over `n` float32 elements.
Kernel scale_kernel(int64_t n, double c) {
    auto load = std::make_shared<Expr>();
    load->kind = ExprKind::load;
    load->view = ShapeTracker::contiguous({n});
    auto k = std::make_shared<Expr>();
    k->kind = ExprKind::constant;
    k->value = c;
    auto one = std::make_shared<Expr>();
    one->kind = ExprKind::constant;
    one->value = 1;
    auto mul = std::make_shared<Expr>();
    mul->kind = ExprKind::alu;
    mul->op = Op::mul;
    mul->src = {load, k};
    auto add = std::make_shared<Expr>();
    add->kind = ExprKind::alu;
    add->op = Op::add;
    add->src = {mul, one};
    Kernel kernel;
    kernel.full_shape = {n};
    kernel.inputs = {DType::float32};
    kernel.root = add;
    return kernel;
}

// The device under test runs x86-64 objects (the cpu device, a simulated chip with isa=host) or its
// own AMDGPU code (gfx1100 / gfx1201: a simulated Navi's interpreter, a real GPU).
bool runs_host_code(const hcq::Device& dev) { return dev.arch() == "x86_64"; }

// The device's own code for `kernel`: the CPU object for `cpu` and `tile`, or the linked AMDGPU code
// object for the chip's gfx target.
std::shared_ptr<hcq::Program> load_compiled(hcq::Device& dev, const Kernel& kernel, const Target& cpu = Target::host(),
                                            const TileShape& tile = {}) {
    if (runs_host_code(dev)) return dev.load_program(emit_cpu_object(kernel, cpu, tile), kernel.name());
    return dev.load_program(emit_amdgpu_code_object(kernel, dev.arch()), kernel.name());
}

// Runs `prog` (out, inputs...), `kernel`'s code, with `groups` workgroups: of one thread for CPU code,
// of the block the GPU kernel requires otherwise (whose grid must cover Kernel::gpu_workgroups:
// fewer is refused here, as the tensor runtime never launches it so).
void run_compiled(hcq::Device& dev, hcq::Program& prog, std::initializer_list<std::reference_wrapper<const hcq::Buffer>> buffers,
                  uint32_t groups, const Kernel& kernel) {
    hcq::Dim3 block{1};
    const auto& required = prog.info().required_block;
    if (required[0] != 0) {
        block = hcq::Dim3{required[0], required[1], required[2]};
        REQUIRE(int64_t(groups) >= kernel.gpu_workgroups(required[0]));
    }
    uint64_t v = dev.next_timeline();
    dev.compute_queue().wait(dev.timeline(), v - 1).exec(prog, hcq::KernelArgs(prog, buffers), {groups}, block).signal(dev.timeline(), v).submit();
    dev.synchronize();
}

std::filesystem::path fresh_directory(const char* what) {
    auto dir = std::filesystem::temp_directory_path() / ("baregpu-" + std::string(what) + "-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    return dir;
}

}  // namespace

TEST_CASE("shape tracker: movement ops map indices like the definitions say") {
    auto st = ShapeTracker::contiguous({2, 3, 4});
    CHECK(st.is_contiguous());
    CHECK(st.reshape({6, 4}).views().size() == 1);
    auto p = st.permute({2, 0, 1});
    CHECK(p.shape() == Shape{4, 2, 3});
    CHECK(evaluate(p, {3, 1, 2}) == 1 * 12 + 2 * 4 + 3);
    // A reshape of a permuted view cannot be strides: it pushes a second view.
    auto pr = p.reshape({8, 3});
    CHECK(pr.views().size() == 2);
    CHECK(evaluate(pr, {5, 1}) == evaluate(p, {2, 1, 1}));
    // Size-1 dims come and go without a new view.
    CHECK(p.reshape({4, 1, 2, 3}).views().size() == 1);
    auto padded = st.pad({{1, 0}, {0, 2}, {0, 0}});
    CHECK(padded.shape() == Shape{3, 5, 4});
    CHECK(evaluate(padded, {0, 0, 0}) == -1);
    CHECK(evaluate(padded, {1, 3, 0}) == -1);
    CHECK(evaluate(padded, {2, 2, 3}) == 1 * 12 + 2 * 4 + 3);
    auto f = st.flip({1});
    CHECK(evaluate(f, {0, 0, 0}) == 2 * 4);
    auto s = f.shrink({{1, 2}, {1, 3}, {0, 4}});
    CHECK(evaluate(s, {0, 1, 2}) == 12 + 0 * 4 + 2);
    auto e = ShapeTracker::contiguous({3, 1}).expand({3, 5});
    CHECK(evaluate(e, {2, 4}) == 2);
    auto win = st.windows(2, 3);
    CHECK(win.shape() == Shape{2, 2, 2, 2, 3});
    CHECK(evaluate(win, {1, 1, 1, 1, 2}) == 1 * 12 + (1 + 1) * 4 + (1 + 2));
    auto pwin = padded.windows(3, 2);  // windows over a padded view stack on it
    CHECK(pwin.views().size() == 2);
    CHECK(evaluate(pwin, {0, 0, 0, 0, 0}) == -1);  // padded[0, 0, 0]: the pad before dim 0
    CHECK(evaluate(pwin, {1, 2, 0, 1, 1}) == -1);  // padded[1, 3, 1]: the pad after dim 1
    CHECK(evaluate(pwin, {1, 0, 0, 2, 1}) == evaluate(padded, {1, 2, 1}));
    CHECK_THROWS_AS(st.windows(4, 1), std::invalid_argument);
    CHECK_THROWS_AS(st.reshape({5, 5}), std::invalid_argument);
    CHECK_THROWS_AS(st.permute({0, 0, 1}), std::invalid_argument);
    CHECK_THROWS_AS(st.expand({2, 3, 5}), std::invalid_argument);
    CHECK_THROWS_AS(st.shrink({{0, 3}, {0, 3}, {0, 4}}), std::invalid_argument);
}

TEST_CASE("shape tracker: random chains of views agree with step-by-step evaluation") {
    std::mt19937 gen(5);
    for (int round = 0; round < 200; ++round) {
        // Apply one random op to a tracker and check every index against the tracker before it.
        Shape shape{int64_t(gen() % 4 + 1), int64_t(gen() % 4 + 1), int64_t(gen() % 3 + 1)};
        auto st = ShapeTracker::contiguous(shape);
        for (int step = 0; step < 4; ++step) {
            ShapeTracker next;
            std::function<std::vector<int64_t>(const std::vector<int64_t>&)> back;  // next index -> st index, empty: padding
            const Shape cur = st.shape();
            switch (gen() % 4) {
                case 0: {
                    std::vector<int> order{0, 1, 2};
                    std::shuffle(order.begin(), order.end(), gen);
                    next = st.permute(order);
                    back = [order](const std::vector<int64_t>& i) {
                        std::vector<int64_t> o(3);
                        for (size_t d = 0; d < 3; ++d) o[size_t(order[d])] = i[d];
                        return o;
                    };
                    break;
                }
                case 1: {
                    int axis = int(gen() % 3);
                    next = st.flip({axis});
                    back = [cur, axis](std::vector<int64_t> i) {
                        i[size_t(axis)] = cur[size_t(axis)] - 1 - i[size_t(axis)];
                        return i;
                    };
                    break;
                }
                case 2: {
                    std::vector<std::pair<int64_t, int64_t>> pads{{gen() % 2, gen() % 2}, {gen() % 2, 0}, {0, gen() % 2}};
                    next = st.pad(pads);
                    back = [cur, pads](std::vector<int64_t> i) {
                        for (size_t d = 0; d < 3; ++d) {
                            i[d] -= pads[d].first;
                            if (i[d] < 0 || i[d] >= cur[d]) return std::vector<int64_t>{};
                        }
                        return i;
                    };
                    break;
                }
                default: {
                    std::vector<std::pair<int64_t, int64_t>> r;
                    for (size_t d = 0; d < 3; ++d) {
                        int64_t b = int64_t(gen() % uint64_t(cur[d]));
                        r.emplace_back(b, b + 1 + int64_t(gen() % uint64_t(cur[d] - b)));
                    }
                    next = st.shrink(r);
                    back = [r](std::vector<int64_t> i) {
                        for (size_t d = 0; d < 3; ++d) i[d] += r[d].first;
                        return i;
                    };
                }
            }
            const Shape ns = next.shape();
            for (int64_t flat = 0; flat < numel(ns); ++flat) {
                std::vector<int64_t> idx(3);
                int64_t rest = flat;
                for (size_t d = 3; d-- > 0;) {
                    idx[d] = rest % ns[d];
                    rest /= ns[d];
                }
                auto prev = back(idx);
                int64_t want = prev.empty() ? -1 : evaluate(st, prev);
                REQUIRE(evaluate(next, idx) == want);
            }
            st = next;
        }
    }
}

TEST_CASE("shape tracker: a view of the first rows of a tensor stacks on its layout (on_top_of)") {
    // The first 4 of 16 rows: offset 0 and row-major strides, yet fewer elements than what it
    // views, so not a reshape of it (a realized tensor's layout below, here a transposed one).
    const auto rows = ShapeTracker::contiguous({16, 4}).shrink({{0, 4}, {0, 4}});
    const auto below = ShapeTracker::contiguous({4, 16}).permute({1, 0});
    const auto stacked = rows.on_top_of(below);
    REQUIRE(stacked.shape() == Shape{4, 4});
    for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j < 4; ++j) CHECK(evaluate(stacked, {i, j}) == evaluate(below, {i, j}));
    // The whole of it is a reshape, and folds into one view.
    CHECK(ShapeTracker::contiguous({64}).on_top_of(below).views().size() == 2);
    CHECK(ShapeTracker::contiguous({4, 16}).on_top_of(ShapeTracker::contiguous({16, 4})).views().size() == 1);
}

TEST_CASE("kernel keys: equal graphs, equal keys; any difference, a different key") {
    CHECK(scale_kernel(100, 2).key() == scale_kernel(100, 2).key());
    CHECK(scale_kernel(100, 2).name() == scale_kernel(100, 2).name());
    CHECK(scale_kernel(100, 2).key() != scale_kernel(101, 2).key());
    CHECK(scale_kernel(100, 2).key() != scale_kernel(100, 3).key());
    CHECK(scale_kernel(100, 2).name().size() < cpu_abi::kNameBytes);
}

TEST_CASE("codegen: the object loads on the device under test and runs over any grid") {
    auto dev = test::open_device(test::hcq_devices().front());  // the device under test
    INFO(dev->name() << " (" << dev->arch() << ")");
    const int64_t n = 10007;
    Kernel k = scale_kernel(n, 3);
    auto prog = load_compiled(*dev, k);
    CHECK(prog->info().num_buffers == 2);
    CHECK(prog->info().num_values == 0);
    // CPU code loops over its elements in one-thread groups; GPU code is one work-item per element in
    // the block it was compiled for, which the code object requires.
    std::vector<uint32_t> grids{1u, 3u, 64u, 10007u};
    if (runs_host_code(*dev)) {
        CHECK(prog->info().max_threads_per_group == 1);
    } else {
        CHECK(prog->info().required_block == std::array<uint32_t, 3>{256, 1, 1});
        const uint32_t cover = uint32_t((n + 255) / 256);
        grids = {cover, cover + 1, cover + 64};  // groups past the end write nothing
        hcq::Buffer a = dev->allocate(4), b = dev->allocate(4);
        CHECK_THROWS_AS(dev->compute_queue().exec(*prog, hcq::KernelArgs(*prog, {a, b}), {cover}, {128}), std::invalid_argument);
    }
    std::vector<float> in(static_cast<size_t>(n));
    for (size_t i = 0; i < in.size(); ++i) in[i] = float(i) * 0.25f - 100;
    hcq::Buffer a = dev->allocate(uint64_t(n) * 4), out = dev->allocate(uint64_t(n) * 4 + 1024);
    test::upload(*dev, a, in);
    for (uint32_t groups : grids) {
        INFO(groups << " groups");
        test::upload(*dev, out, std::vector<float>(size_t(n) + 256, -1.0f));
        run_compiled(*dev, *prog, {out, a}, groups, k);
        auto got = test::download<float>(*dev, out, size_t(n) + 256);
        REQUIRE(test::first_difference(got, [&](size_t i) { return i < size_t(n) ? in[i] * 3 + 1 : -1.0f; }) == "");
    }
}

TEST_CASE("codegen: the matmul kernel (on the CPU register-blocked for AVX-512 and AVX2 register files) over any grid") {
    auto dev = test::open_device(test::hcq_devices().front());  // the device under test
    // Sizes that cross the kernel's 192 x 256 tiles and 256-deep K slices, with ragged edges.
    const int64_t m = 203, k = 261, n = 270;
    std::mt19937 gen(3);
    std::uniform_real_distribution<float> dist(-1, 1);
    std::vector<float> a(size_t(m * k)), b(size_t(k * n));
    for (float& x : a) x = dist(gen);
    for (float& x : b) x = dist(gen);
    hcq::Buffer da = dev->allocate(uint64_t(m * k) * 4), db = dev->allocate(uint64_t(k * n) * 4), out = dev->allocate(uint64_t(m * n) * 4);
    test::upload(*dev, da, a);
    test::upload(*dev, db, b);
    // relu(A @ B) as the Tensor API builds it: A (m, 1, k) and B^T (1, n, k) expanded to
    // (m, n, k), multiplied, summed over k.
    NodeRef na = Node::make_buffer(da, DType::float32, {m, k}), nb = Node::make_buffer(db, DType::float32, {k, n});
    NodeRef ea = Node::make_view(na, ShapeTracker::contiguous({m, k}).reshape({m, 1, k}).expand({m, n, k}));
    NodeRef eb = Node::make_view(nb, ShapeTracker::contiguous({k, n}).permute({1, 0}).reshape({1, n, k}).expand({m, n, k}));
    NodeRef sum = Node::make_reduce(Op::reduce_sum, Node::make_alu(Op::mul, DType::float32, {ea, eb}), {2});
    NodeRef root = Node::make_alu(Op::max, DType::float32, {sum, Node::make_constant(0, DType::float32, {m, n, 1})});
    auto items = schedule(root);
    REQUIRE(items.size() == 1);
    REQUIRE(items[0].kernel);
    const Kernel& kernel = *items[0].kernel;
    std::vector<double> want(size_t(m * n));
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double acc = 0;
            for (int64_t q = 0; q < k; ++q) acc += double(a[size_t(i * k + q)]) * double(b[size_t(q * n + j)]);
            want[size_t(i * n + j)] = std::max(acc, 0.0);
        }
    if (!runs_host_code(*dev)) {
        // The GPU kernel: one workgroup per 128 x 128 tile of C (2 x 3 here), and groups past the
        // last tile write nothing. The register blocking and tile shapes below are the CPU code's.
        auto prog = load_compiled(*dev, kernel);
        const uint32_t tiles = uint32_t(kernel.gpu_workgroups(256));
        CHECK(tiles == 6);
        for (uint32_t groups : {tiles, tiles + 5}) {
            test::upload(*dev, out, std::vector<float>(size_t(m * n), NAN));
            run_compiled(*dev, *prog, {out, da, db}, groups, kernel);
            auto got = test::download<float>(*dev, out, size_t(m * n));
            REQUIRE(test::first_difference(got, [&](size_t i) { return want[i]; }, within_1e4) == "");
        }
        return;
    }
    // x86-64-v3 without target features: AVX2 and FMA, 16 vector registers (this CPU runs it).
    Target avx2{Target::host().triple, "x86-64-v3", ""};
    for (const Target& target : {Target::host(), avx2}) {
        INFO(target.cpu);
        std::vector<std::byte> object = emit_cpu_object(kernel, target);
        auto prog = dev->load_program(object, kernel.name());
        // The packed panels and the C tile live on the stack: more than the ABI's 64 KiB.
        CHECK(prog->info().private_bytes >= (192 * 256 + 256 * 256 + 192 * 256) * 4);
        for (uint32_t groups : {1u, 3u, 7u, 256u}) {
            test::upload(*dev, out, std::vector<float>(size_t(m * n), NAN));
            uint64_t v = dev->next_timeline();
            dev->compute_queue().wait(dev->timeline(), v - 1).exec(*prog, hcq::KernelArgs(*prog, {out, da, db}), {groups}, {1}).signal(dev->timeline(), v).submit();
            auto got = test::download<float>(*dev, out, size_t(m * n));
            REQUIRE(test::first_difference(got, [&](size_t i) { return want[i]; }, within_1e4) == "");
        }
    }
    // Every tile shape the tile search may pick computes the same result (AVX-512 and AVX2).
    Compiler host(Target::host(), KernelCache({}));
    std::vector<TileShape> tiles = host.tile_candidates(kernel);
    REQUIRE(tiles.size() > 1);
    CHECK(tiles[0] == TileShape{});
    for (const Target& target : {Target::host(), avx2}) {
        for (const TileShape& tile : tiles) {
            INFO(target.cpu << " " << tile.text());
            REQUIRE(tile.valid());
            CHECK(TileShape::parse(tile.text()) == tile);
            std::vector<std::byte> object = emit_cpu_object(kernel, target, tile);
            auto prog = dev->load_program(object, kernel.name());
            CHECK(prog->info().private_bytes >= uint64_t(tile.mc * tile.kc + tile.kc * tile.nc + tile.mc * tile.nc) * 4);
            for (uint32_t groups : {1u, 5u}) {
                test::upload(*dev, out, std::vector<float>(size_t(m * n), NAN));
                uint64_t v = dev->next_timeline();
                dev->compute_queue().wait(dev->timeline(), v - 1).exec(*prog, hcq::KernelArgs(*prog, {out, da, db}), {groups}, {1}).signal(dev->timeline(), v).submit();
                auto got = test::download<float>(*dev, out, size_t(m * n));
                REQUIRE(test::first_difference(got, [&](size_t i) { return want[i]; }, within_1e4) == "");
            }
        }
    }
    // A tile shape's key differs from the default's; the default's is the plain key.
    CHECK(host.cache_key(kernel, TileShape{96, 256, 256}) != host.cache_key(kernel));
    CHECK(host.cache_key(kernel, TileShape{}) == host.cache_key(kernel));
    CHECK_FALSE(TileShape::parse("mc 100 nc 256 kc 256"));  // not a multiple of 12
    CHECK_FALSE(TileShape::parse("mc 192 nc 256 kc 256 x"));
    // Not a matmul: nothing to search.
    CHECK(host.tile_candidates(scale_kernel(64, 2.0)).empty());
}

TEST_CASE("cache: a second compile of the same kernel is read from disk") {
    auto dir = fresh_directory("kernel-cache");
    Kernel k = scale_kernel(4096, 1.5);
    std::vector<std::byte> first_object;
    {
        Compiler c(Target::host(), KernelCache(dir));
        CompiledKernel first = c.compile(k);
        CHECK_FALSE(first.from_cache);
        CHECK(c.generated() == 1);
        CHECK(std::filesystem::exists(c.cache().path_of(c.cache_key(k))));
        first_object = first.object;
    }
    {
        Compiler c(Target::host(), KernelCache(dir));  // a new compiler: only the disk is shared
        CompiledKernel second = c.compile(k);
        CHECK(second.from_cache);
        CHECK(c.generated() == 0);
        CHECK(c.cache_hits() == 1);
        CHECK(second.object == first_object);
        CompiledKernel other = c.compile(scale_kernel(4096, 2.5));
        CHECK_FALSE(other.from_cache);
    }
    {
        // What came from the cache runs, on the device under test in its own code.
        auto dev = test::open_device(test::hcq_devices().front());
        const Target target = runs_host_code(*dev) ? Target::host() : Target{"amdgcn-amd-amdhsa", dev->arch(), ""};
        const auto dev_dir = dir / "device";
        { Compiler(target, KernelCache(dev_dir)).compile(k); }
        Compiler c(target, KernelCache(dev_dir));
        CompiledKernel cached = c.compile(k);
        CHECK(cached.from_cache);
        auto prog = dev->load_program(cached.object, cached.name);
        hcq::Buffer a = dev->allocate(4096 * 4), out = dev->allocate(4096 * 4);
        test::upload(*dev, a, std::vector<float>(4096, 2.0f));
        run_compiled(*dev, *prog, {out, a}, prog->info().required_block[0] != 0 ? 4096 / prog->info().required_block[0] : 4, k);
        CHECK(test::download<float>(*dev, out, 4096) == std::vector<float>(4096, 4.0f));
    }
    // A different target misses.
    Target t = Target::host();
    t.features += ",-avx512f";
    Compiler c(t, KernelCache(dir));
    CHECK_FALSE(c.compile(k).from_cache);
    std::filesystem::remove_all(dir);
}

TEST_CASE("cache: the directory comes from the environment") {
    const char* saved = std::getenv("BAREGPU_CACHE_DIR");
    std::string keep = saved ? saved : "";
    setenv("BAREGPU_CACHE_DIR", "/tmp/x-baregpu-cache", 1);
    CHECK(KernelCache::default_directory() == "/tmp/x-baregpu-cache");
    unsetenv("BAREGPU_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
    CHECK(KernelCache::default_directory() == "/tmp/xdg/baregpu");
    unsetenv("XDG_CACHE_HOME");
    if (const char* home = std::getenv("HOME")) CHECK(KernelCache::default_directory() == std::filesystem::path(home) / ".cache" / "baregpu");
    if (saved) setenv("BAREGPU_CACHE_DIR", keep.c_str(), 1);
}

TEST_CASE("cache: the key is the compiler version, LLVM version, target and IR, and nothing else") {
    Kernel k = scale_kernel(64, 3.0);
    Compiler a(Target::host(), KernelCache({}));
    Compiler b(Target::host(), KernelCache({}));
    std::string key = a.cache_key(k);
    // Reproducible: no build time, no process state.
    CHECK(key == b.cache_key(k));
    CHECK(key == fmt::format("{} (LLVM {})\n{}\n{}", kCompilerVersion, llvm_version(), Target::host().key(), k.key()));
    CHECK(key.find(__DATE__) == std::string::npos);
    CHECK(llvm_version().rfind("19.", 0) == 0);
    // Every target field counts.
    Target t = Target::host();
    t.features += ",+fake";
    CHECK(Compiler(t, KernelCache({})).cache_key(k) != key);
    t = Target::host();
    t.cpu = "x86-64";
    CHECK(Compiler(t, KernelCache({})).cache_key(k) != key);
}

TEST_CASE("cache: least recently used files go beyond the size limit") {
    auto dir = fresh_directory("kernel-cache-lru");
    const std::vector<std::byte> object(1000, std::byte{7});
    KernelCache cache(dir, 3500);  // room for three objects
    auto pause = [] { usleep(20000); };  // distinct modification times
    cache.store("a", object);
    pause();
    cache.store("b", object);
    pause();
    cache.store("c", object);
    pause();
    CHECK(cache.load("a"));  // a is used again: b is now the least recently used
    pause();
    cache.store("d", object);
    CHECK(cache.load("a"));
    CHECK_FALSE(cache.load("b"));
    CHECK(cache.load("c"));
    CHECK(cache.load("d"));
    // Text records (tile choices) count and are evicted the same way; other files are left alone.
    std::ofstream(dir / "unrelated.txt") << std::string(5000, 'x');
    pause();
    cache.store_text("tile", std::string(1000, 't'));
    CHECK(cache.load_text("tile") == std::string(1000, 't'));
    CHECK(std::filesystem::exists(dir / "unrelated.txt"));
    int left = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) left += e.path().filename().string().rfind("kernel-", 0) == 0;
    CHECK(left == 2);
    // The limit comes from the environment, in MiB.
    setenv("BAREGPU_KERNEL_CACHE_MAX_MB", "7", 1);
    CHECK(KernelCache::default_max_bytes() == 7ull << 20);
    unsetenv("BAREGPU_KERNEL_CACHE_MAX_MB");
    CHECK(KernelCache::default_max_bytes() == KernelCache::kDefaultMaxBytes);
    CHECK(KernelCache(dir).max_bytes() == 512ull << 20);
    std::filesystem::remove_all(dir);
}

namespace {

std::vector<char> cache_test_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void cache_test_write(const std::filesystem::path& path, const std::vector<char>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
}

}  // namespace

TEST_CASE("cache: an entry with one flipped bit misses and is generated anew") {
    auto dir = fresh_directory("kernel-cache-bitflip");
    Kernel k = scale_kernel(4096, 3.5);
    std::vector<std::byte> genuine;
    std::filesystem::path path;
    {
        Compiler c(Target::host(), KernelCache(dir));
        genuine = c.compile(k).object;
        path = c.cache().path_of(c.cache_key(k));
    }
    // Bit 3 of a byte in the middle of the object (its code: the object is little more than .text).
    std::vector<char> bytes = cache_test_bytes(path);
    REQUIRE(bytes.size() > genuine.size());
    bytes[bytes.size() - genuine.size() / 2] ^= 0x08;
    cache_test_write(path, bytes);
    Compiler c(Target::host(), KernelCache(dir));
    CompiledKernel again = c.compile(k);
    CHECK_FALSE(again.from_cache);
    CHECK(c.generated() == 1);
    CHECK(again.object == genuine);
    // The regenerated entry replaced the damaged one.
    CompiledKernel third = Compiler(Target::host(), KernelCache(dir)).compile(k);
    CHECK(third.from_cache);
    CHECK(third.object == genuine);
    // The same bytes under another key's name miss too (the checksum covers the key).
    Kernel other = scale_kernel(4096, 4.5);
    std::filesystem::copy_file(path, c.cache().path_of(c.cache_key(other)));
    CHECK_FALSE(Compiler(Target::host(), KernelCache(dir)).compile(other).from_cache);
    std::filesystem::remove_all(dir);
}

TEST_CASE("cache: a directory other users can write, or another user's, is not used; nor is another user's entry") {
    auto dir = fresh_directory("kernel-cache-shared");
    std::filesystem::create_directories(dir);
    const std::vector<std::byte> object(100, std::byte{7});
    ::chmod(dir.c_str(), 01777);
    const char* saved = std::getenv("BAREGPU_CACHE_DIR");
    const std::string keep = saved ? saved : "";
    {
        // Named by the user: refused as it is (a default directory of the user's own would be made 0700).
        setenv("BAREGPU_CACHE_DIR", dir.c_str(), 1);
        KernelCache cache(KernelCache::default_directory());
        CHECK_THAT(cache.refusal(), Catch::Contains("every user can write it") && Catch::Contains("BAREGPU_CACHE_DIR"));
        cache.store("a", object);
        CHECK_FALSE(cache.load("a"));
        CHECK(std::filesystem::is_empty(dir));
    }
    if (saved) {
        setenv("BAREGPU_CACHE_DIR", keep.c_str(), 1);
    } else {
        unsetenv("BAREGPU_CACHE_DIR");
    }
    ::chmod(dir.c_str(), 0700);
    KernelCache cache(dir);
    CHECK(cache.refusal().empty());
    cache.store("a", object);
    REQUIRE(cache.load("a") == object);
    if (::geteuid() == 0) {
        // An entry of another user's, even a well-formed one, is never read: its code would run here.
        REQUIRE(::chown(cache.path_of("a").c_str(), 4242, 4242) == 0);
        CHECK_FALSE(cache.load("a"));
        REQUIRE(::chown(dir.c_str(), 4242, 4242) == 0);
        CHECK_THAT(KernelCache(dir).refusal(), Catch::Contains("owned by uid 4242"));
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("cache: a link planted at an entry's name, or at a temporary name, is replaced, not followed") {
    auto dir = fresh_directory("kernel-cache-links");
    std::filesystem::create_directories(dir);
    const auto victim = fresh_directory("kernel-cache-victim");
    std::ofstream(victim) << "not yours";
    KernelCache cache(dir);
    const std::filesystem::path entry = cache.path_of("k");
    std::filesystem::create_symlink(victim, entry);
    for (int i = 0; i < 4; ++i) {
        std::filesystem::create_symlink(victim, entry.string() + ".tmp" + std::to_string(getpid()) + (i ? "-" + std::to_string(i - 1) : ""));
    }
    const std::vector<std::byte> object(64, std::byte{1});
    CHECK_FALSE(cache.load("k"));
    cache.store("k", object);
    CHECK(cache.load("k") == object);
    CHECK(std::filesystem::is_regular_file(std::filesystem::symlink_status(entry)));
    std::ifstream in(victim);
    CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "not yours");
    std::filesystem::remove_all(dir);
    std::filesystem::remove(victim);
}

TEST_CASE("cache: eviction removes only the cache's own entries") {
    auto dir = fresh_directory("kernel-cache-foreign");
    std::filesystem::create_directories(dir);
    // What else may be in a directory BAREGPU_CACHE_DIR names by mistake.
    // The last is named as an entry would be, but is not one: it must not count towards the limit either.
    const std::vector<std::string> foreign = {"tile-map.png", "kernel-notes.txt", "kernel-config", "tile-0123456789abcdef0123456789abcdef.txt.bak",
                                              "kernel-0123456789abcdef0123456789abcdef.o"};
    for (const std::string& name : foreign) std::ofstream(dir / name) << std::string(5000, 'x');
    KernelCache cache(dir, 2500);
    const std::vector<std::byte> object(1000, std::byte{7});
    cache.store("a", object);
    usleep(20000);
    cache.store("b", object);
    usleep(20000);
    cache.store("c", object);  // over the limit: a goes
    CHECK_FALSE(cache.load("a"));
    CHECK(cache.load("b"));
    CHECK(cache.load("c"));
    for (const std::string& name : foreign) {
        INFO(name);
        CHECK(std::filesystem::file_size(dir / name) == 5000);
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("cache: a FIFO, a directory or a link to a device as an entry misses at once") {
    auto dir = fresh_directory("kernel-cache-special");
    std::filesystem::create_directories(dir);
    KernelCache cache(dir);
    REQUIRE(::mkfifo(cache.path_of("fifo").c_str(), 0600) == 0);
    CHECK_FALSE(cache.load("fifo"));  // no writer: reading it would block forever
    std::filesystem::create_directory(cache.path_of("directory"));
    CHECK_FALSE(cache.load("directory"));
    std::filesystem::create_symlink("/dev/zero", cache.path_of("zero"));
    CHECK_FALSE(cache.load("zero"));  // endless: read whole it would exhaust memory
    // A store over the directory fails quietly: the compile goes on without the cache.
    cache.store("directory", std::vector<std::byte>(16, std::byte{1}));
    CHECK(std::filesystem::is_directory(cache.path_of("directory")));
    std::filesystem::remove_all(dir);
}

TEST_CASE("cache: BAREGPU_KERNEL_CACHE_MAX_MB is a number of MiB, or refused naming it") {
    for (const char* bad : {"abc", "0", "-5", "12x", "99999999999999999999"}) {
        INFO(bad);
        setenv("BAREGPU_KERNEL_CACHE_MAX_MB", bad, 1);
        CHECK_THROWS_WITH(KernelCache::default_max_bytes(), Catch::Contains(std::string("BAREGPU_KERNEL_CACHE_MAX_MB=") + bad));
    }
    setenv("BAREGPU_KERNEL_CACHE_MAX_MB", "3", 1);
    CHECK(KernelCache::default_max_bytes() == 3ull << 20);
    unsetenv("BAREGPU_KERNEL_CACHE_MAX_MB");
}

}  // namespace compiler_test
