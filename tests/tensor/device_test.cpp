// Tensor::to between devices, and the matmul tile search with its on-disk choice.
#include "compiler/scheduler.hpp"
#include "tests/hcq/support.hpp"
#include "tests/tensor/support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

using namespace baregpu;
using namespace baregpu::test;
using tensor::Runtime;
using tensor::Tensor;

namespace {

// BAREGPU_CACHE_DIR pointed at a fresh directory baregpu-<what>-<pid> for the test's runtimes, and put
// back, the directory removed, when the test ends (however it ends).
struct ScopedCacheDir {
    std::filesystem::path dir;
    std::optional<std::string> saved;
    explicit ScopedCacheDir(const std::string& what)
        : dir(std::filesystem::temp_directory_path() / ("baregpu-" + what + "-" + std::to_string(getpid()))) {
        std::filesystem::remove_all(dir);
        if (const char* s = std::getenv("BAREGPU_CACHE_DIR")) saved = s;
        setenv("BAREGPU_CACHE_DIR", dir.c_str(), 1);
    }
    ~ScopedCacheDir() {
        if (saved) {
            setenv("BAREGPU_CACHE_DIR", saved->c_str(), 1);
        } else {
            unsetenv("BAREGPU_CACHE_DIR");
        }
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
};

}  // namespace

TEST_CASE("to: a tensor moves to a second cpu device instance lazily, computed first where it lives") {
    auto a = device_runtime();
    auto dev_b = open_device("cpu");
    REQUIRE(dev_b.get() != &a->device());  // a second instance of the cpu backend
    auto b = Runtime::for_device(dev_b);
    REQUIRE(b.get() != a.get());

    std::mt19937 gen(5);
    Ref x = Ref::random({33, 17}, gen, -2, 2);
    Tensor ta = Tensor::from_vector(x.floats(), x.shape, a);
    Tensor y = (ta * 2.0).exp();  // not computed yet on a
    uint64_t a_before = a->kernels_launched(), b_before = b->kernels_launched();
    Tensor moved = y.to(b);
    Tensor z = moved.sum({1});  // on b, from the moved data
    CHECK(&moved.runtime() == b.get());
    CHECK_FALSE(moved.realized());
    CHECK(a->kernels_launched() == a_before);  // lazy: nothing ran anywhere
    CHECK(b->transfers_in() == 0);

    Ref want = x.map([](double v) { return std::exp(2 * v); });
    check_close(z, want.reduce({1}, 0, [](double acc, double v) { return acc + v; }).reshape({33}), 1e-5, 1e-3);
    CHECK(a->kernels_launched() == a_before + 1);  // y computed on a
    CHECK(b->kernels_launched() == b_before + 1);  // the sum on b
    CHECK(b->transfers_in() == 1);
    CHECK(moved.realized());
    check_close(moved, want, 1e-5, 1e-5);
    CHECK(b->transfers_in() == 1);  // once

    // Back again, a view on the way, every dtype's bytes unchanged; same runtime: no copy.
    Tensor back = moved.transpose().to(a);
    check_close(back, want.permute({1, 0}), 1e-5, 1e-5);
    Tensor ints = Tensor::from_vector(std::vector<int32_t>{1, -2, 3, -4}, {4}, a);
    CHECK(ints.to(dev_b).to_vector<int32_t>() == std::vector<int32_t>{1, -2, 3, -4});
    CHECK(ints.to(a).node() == ints.node());
}

TEST_CASE("tile search: off by default; on, it times the candidates, caches the winner and reuses it") {
    ScopedCacheDir cache("tile-search");
    const std::filesystem::path& dir = cache.dir;
    unsetenv("BAREGPU_TILE_SEARCH");

    std::mt19937 gen(9);
    Ref ra = Ref::random({70, 300}, gen, -1, 1), rb = Ref::random({300, 50}, gen, -1, 1);
    Ref want = Ref::matmul(ra, rb);
    auto run = [&](Runtime& rt_ref, const std::shared_ptr<Runtime>& rt) {
        (void)rt_ref;
        Tensor a = Tensor::from_vector(ra.floats(), ra.shape, rt), b = Tensor::from_vector(rb.floats(), rb.shape, rt);
        check_close(a.matmul(b), want, 1e-4, 1e-4);
    };
    {
        auto rt = std::make_shared<Runtime>(open_device("cpu"));
        CHECK_FALSE(rt->tile_search());
        run(*rt, rt);
        CHECK(rt->tile_searches() == 0);
        CHECK(rt->tile_choices_reused() == 0);
    }
    compiler::TileShape chosen;
    {
        setenv("BAREGPU_TILE_SEARCH", "1", 1);
        auto rt = std::make_shared<Runtime>(open_device("cpu"));
        unsetenv("BAREGPU_TILE_SEARCH");
        CHECK(rt->tile_search());
        uint64_t generated = rt->compiler().generated();
        run(*rt, rt);
        CHECK(rt->tile_searches() == 1);
        CHECK(rt->tile_choices_reused() == 0);
        // The default's object was in the cache already; every other candidate was generated.
        auto& c = rt->compiler();
        CHECK(c.generated() - generated == 5);
        // The winner is one of the candidates and is on disk.
        bool found = false;
        for (const auto& e : std::filesystem::directory_iterator(dir)) found = found || e.path().filename().string().rfind("tile-", 0) == 0;
        CHECK(found);
        // The kernel: the one matmul the graph schedules.
        Tensor a = Tensor::from_vector(ra.floats(), ra.shape, rt), b = Tensor::from_vector(rb.floats(), rb.shape, rt);
        std::optional<compiler::Kernel> kernel;
        for (const auto& item : compiler::schedule(a.matmul(b).node())) {
            if (item.kernel) kernel = *item.kernel;
        }
        REQUIRE(kernel);
        auto candidates = c.tile_candidates(*kernel);
        REQUIRE(candidates.size() > 1);
        auto cached = c.cached_tile(*kernel);
        REQUIRE(cached);
        CHECK(std::find(candidates.begin(), candidates.end(), *cached) != candidates.end());
        chosen = *cached;
    }
    {
        // A new runtime (as a new process would): the choice comes from disk, nothing is timed
        // or generated again.
        auto rt = std::make_shared<Runtime>(open_device("cpu"));
        rt->set_tile_search(true);
        uint64_t generated = rt->compiler().generated();
        run(*rt, rt);
        CHECK(rt->tile_searches() == 0);
        CHECK(rt->tile_choices_reused() == 1);
        CHECK(rt->compiler().generated() == generated);
        CHECK(rt->compiler().cache_hits() >= 1);
    }
    // Kernels that are no blocked matmul have no candidates and are never searched.
    {
        auto rt = std::make_shared<Runtime>(open_device("cpu"));
        rt->set_tile_search(true);
        Tensor s = Tensor::from_vector(ra.floats(), ra.shape, rt).sum({1});
        check_close(s, ra.reduce({1}, 0, [](double acc, double v) { return acc + v; }).reshape({70}), 1e-5, 1e-4);
        CHECK(rt->tile_searches() == 0);
        CHECK(rt->tile_choices_reused() == 0);
    }
    (void)chosen;
}

TEST_CASE("tile search on GPU code: the GPU matmul's tiles, timed on the device's own clock, the winner cached and reused") {
    auto dev = device_under_test();
    if (dev->arch() == "x86_64") {
        WARN("skipped: " << dev->name() << " runs host code (the CPU search is the case above)");
        return;
    }
    ScopedCacheDir cache("gpu-tile-search");
    unsetenv("BAREGPU_TILE_SEARCH");
    // C of 130 x 140: the default is a 128-tile (4 workgroups); 64-tiles take 9.
    std::mt19937 gen(11);
    Ref ra = Ref::random({130, 96}, gen, -1, 1), rb = Ref::random({96, 140}, gen, -1, 1);
    Ref want = Ref::matmul(ra, rb);
    std::optional<compiler::Kernel> kernel;
    auto run = [&](const std::shared_ptr<Runtime>& rt) {
        Tensor a = Tensor::from_vector(ra.floats(), ra.shape, rt), b = Tensor::from_vector(rb.floats(), rb.shape, rt);
        Tensor c = a.matmul(b);
        for (const auto& item : compiler::schedule(c.node())) {
            if (item.kernel) kernel = *item.kernel;
        }
        check_close(c, want, 1e-4, 1e-4);
    };
    {
        auto rt = std::make_shared<Runtime>(dev);
        run(rt);  // the default tile, into the cache
        CHECK(rt->tile_searches() == 0);
    }
    {
        auto rt = std::make_shared<Runtime>(dev);
        rt->set_tile_search(true);
        const uint64_t generated = rt->compiler().generated();
        run(rt);
        CHECK(rt->tile_searches() == 1);
        REQUIRE(kernel);
        const auto candidates = rt->compiler().tile_candidates(*kernel);
        REQUIRE(candidates.size() == 4);
        CHECK(rt->compiler().generated() - generated == 3);  // every candidate but the cached default
        auto cached = rt->compiler().cached_tile(*kernel);
        REQUIRE(cached);
        CHECK(cached->valid_gpu());
        CHECK(std::find(candidates.begin(), candidates.end(), *cached) != candidates.end());
    }
    {
        auto rt = std::make_shared<Runtime>(dev);
        rt->set_tile_search(true);
        const uint64_t generated = rt->compiler().generated();
        run(rt);  // with the cached choice: its launch shape follows the chosen tile
        CHECK(rt->tile_searches() == 0);
        CHECK(rt->tile_choices_reused() == 1);
        CHECK(rt->compiler().generated() == generated);
    }
}

TEST_CASE("tile search: candidates whose cached objects the device refuses are generated anew") {
    ScopedCacheDir cache("tile-search-damaged");

    std::mt19937 gen(11);
    Ref ra = Ref::random({40, 260}, gen, -1, 1), rb = Ref::random({260, 30}, gen, -1, 1);
    auto rt = std::make_shared<Runtime>(open_device("cpu"));
    rt->set_tile_search(true);
    Tensor a = Tensor::from_vector(ra.floats(), ra.shape, rt), b = Tensor::from_vector(rb.floats(), rb.shape, rt);
    std::optional<compiler::Kernel> kernel;
    for (const auto& item : compiler::schedule(a.matmul(b).node())) {
        if (item.kernel) kernel = *item.kernel;
    }
    REQUIRE(kernel);
    // Every candidate's entry holds something no device loads, stored as the cache stores (its
    // checksum matches): an object another version of the compiler wrote, say.
    const compiler::Compiler& c = rt->compiler();
    auto candidates = c.tile_candidates(*kernel);
    REQUIRE(candidates.size() > 1);
    const std::string junk = "not a code object";
    for (const compiler::TileShape& tile : candidates) {
        c.cache().store(c.cache_key(*kernel, tile), std::vector<std::byte>(reinterpret_cast<const std::byte*>(junk.data()),
                                                                           reinterpret_cast<const std::byte*>(junk.data()) + junk.size()));
    }
    check_close(a.matmul(b), Ref::matmul(ra, rb), 1e-4, 1e-4);
    CHECK(rt->tile_searches() == 1);

}
