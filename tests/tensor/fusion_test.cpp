// The scheduler's fusion is observable: count the kernels a realize launches.
#include "compiler/scheduler.hpp"
#include "tests/hcq/support.hpp"
#include "tests/tensor/support.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace baregpu;
using namespace baregpu::test;
using tensor::Tensor;

namespace {

// Kernels launched while `f` runs.
template <typename F>
uint64_t launches(F&& f) {
    uint64_t before = device_runtime()->kernels_launched();
    f();
    return device_runtime()->kernels_launched() - before;
}

}  // namespace

TEST_CASE("fusion: nothing runs until realized") {
    std::mt19937 gen(11);
    Ref x = Ref::random({8, 8}, gen, -1, 1);
    Tensor t = Tensor::from_vector(x.floats(), x.shape, device_runtime());
    Tensor y;
    CHECK(launches([&] { y = ((t * 2.0).exp() + t.flip({0})).sum({1}).reshape({2, 4}); }) == 0);
    CHECK_FALSE(y.realized());
    CHECK(launches([&] { y.realize(); }) == 1);
    CHECK(y.realized());
    CHECK(launches([&] { y.realize(); }) == 0);
}

TEST_CASE("fusion: an elementwise chain and a reduction are one kernel") {
    std::mt19937 gen(12);
    Ref a = Ref::random({16, 40}, gen, -1, 1), b = Ref::random({40}, gen, -1, 1);
    Tensor ta = Tensor::from_vector(a.floats(), a.shape, device_runtime());
    Tensor tb = Tensor::from_vector(b.floats(), b.shape, device_runtime());
    Tensor out = ((ta * tb + 1.0).exp().flip({1}) * 0.5).sum({1}) * 3.0 - 1.0;
    CHECK(launches([&] { out.realize(); }) == 1);
    Ref want = Ref::zip(a, b, [](double x, double y) { return std::exp(x * y + 1) * 0.5; })
                   .flip({1})
                   .reduce({1}, 0, [](double x, double y) { return x + y; })
                   .reshape({16})
                   .map([](double v) { return v * 3 - 1; });
    check_close(out, want, 1e-5, 1e-4);
}

TEST_CASE("fusion: matmul is one kernel; softmax over the last axis is one kernel") {
    std::mt19937 gen(13);
    Ref a = Ref::random({8, 12}, gen, -1, 1), b = Ref::random({12, 6}, gen, -1, 1);
    Tensor ta = Tensor::from_vector(a.floats(), a.shape, device_runtime());
    Tensor tb = Tensor::from_vector(b.floats(), b.shape, device_runtime());
    Tensor mm = ta.matmul(tb).relu();
    CHECK(launches([&] { mm.realize(); }) == 1);
    // Its max and sum are row reductions of the one kernel (computed per row, before the row's
    // elements); over another axis they are kernels of their own.
    Tensor sm = ta.softmax();
    CHECK(compiler::schedule(sm.node()).size() == 1);
    CHECK(launches([&] { sm.realize(); }) == 1);
    Tensor sm0 = ta.softmax(0);
    CHECK(compiler::schedule(sm0.node()).size() == 3);
    CHECK(launches([&] { sm0.realize(); }) == 3);
    // A kernel with a reduction of its own takes no row reductions: sum(softmax(x)) over rows
    // is max, then sum(exp), then the outer sum.
    // softmax(relu(a @ b)) unrealized: the row max needs the matmul realized, so the last
    // kernel loads it rather than folding (and computing) the same sum again.
    Tensor smm = ta.matmul(tb).relu().softmax();
    auto smm_items = compiler::schedule(smm.node());
    CHECK(smm_items.size() == 4);
    CHECK(std::count_if(smm_items.begin(), smm_items.end(), [](const compiler::ScheduleItem& it) { return it.kernel && it.kernel->full_shape.size() == 3; }) == 1);
    Ref mmr = Ref::matmul(a, b).map([](double v) { return std::max(v, 0.0); });
    Ref mmx = mmr.reduce({1}, -INFINITY, [](double x, double y) { return std::max(x, y); });
    Ref mme = Ref::zip(mmr, mmx, [](double x, double m) { return std::exp(x - m); });
    Ref mms = mme.reduce({1}, 0, [](double x, double y) { return x + y; });
    check_close(smm, Ref::zip(mme, mms, [](double x, double y) { return x / y; }), 1e-5, 1e-6);
    Tensor total = ta.softmax().sum({0});
    CHECK(launches([&] { total.realize(); }) == 3);
    Ref mx = a.reduce({1}, -INFINITY, [](double x, double y) { return std::max(x, y); });
    Ref e = Ref::zip(a, mx, [](double x, double m) { return std::exp(x - m); });
    Ref s = e.reduce({1}, 0, [](double x, double y) { return x + y; });
    check_close(total, Ref::zip(e, s, [](double x, double y) { return x / y; }).reduce({0}, 0, [](double x, double y) { return x + y; }).reshape({12}),
                1e-5, 1e-6);
}

TEST_CASE("fusion: a shared reduction is computed once") {
    std::mt19937 gen(14);
    Ref a = Ref::random({5, 9}, gen, -1, 1);
    Tensor t = Tensor::from_vector(a.floats(), a.shape, device_runtime());
    for (int axis : {0, 1}) {
        Tensor m = t.max({axis}, true);
        // m broadcast twice. Over axis 0: one kernel for m, one for out. Over the last axis
        // the one kernel computes m once per row (one row reduction shared by both uses).
        Tensor out = (t - m) * (t + m);
        auto items = compiler::schedule(out.node());
        CHECK(items.size() == (axis == 1 ? 1u : 2u));
        if (axis == 1) {
            const std::string key = items[0].kernel->key();
            size_t first = key.find("row_reduce");
            CHECK(first != std::string::npos);
            CHECK(key.find("row_reduce", first + 1) == std::string::npos);
        }
        CHECK(launches([&] { out.realize(); }) == (axis == 1 ? 1 : 2));
        Ref mr = a.reduce({axis}, -INFINITY, [](double x, double y) { return std::max(x, y); });
        check_close(out, Ref::zip(Ref::zip(a, mr, [](double x, double y) { return x - y; }), Ref::zip(a, mr, [](double x, double y) { return x + y; }),
                                  [](double x, double y) { return x * y; }));
    }
}

TEST_CASE("cache: a damaged cache file is regenerated, not fatal") {
    auto rt = device_runtime();
    // A kernel no other test makes: its shape is unique to this case.
    Tensor t = Tensor::from_vector(std::vector<float>(13 * 17, 1.5f), {13, 17}, rt);
    Tensor y = (t * 4.0 - 2.0).sum({0}, true);
    auto items = compiler::schedule(y.node());
    REQUIRE(items.size() == 1);
    std::string key = rt->compiler().cache_key(*items[0].kernel);
    auto path = rt->compiler().cache().path_of(key);
    if (rt->compiler().cache().directory().empty()) return;  // no cache directory: nothing to damage
    std::filesystem::create_directories(path.parent_path());
    {
        std::ofstream f(path, std::ios::binary | std::ios::trunc);
        f << "not an ELF object";
    }
    check_close(y, Ref::filled({1, 17}, 13 * (1.5 * 4 - 2)));
    // The file now holds the regenerated object.
    std::optional<std::vector<std::byte>> object = rt->compiler().cache().load(key);
    REQUIRE(object);
    REQUIRE(object->size() > 4);
    CHECK(std::string(reinterpret_cast<const char*>(object->data()), 4) == "\x7f" "ELF");
}

TEST_CASE("runtime: compile time is counted on a cache miss only") {
    // A runtime of its own whose compiler sees an empty cache directory.
    auto dir = std::filesystem::temp_directory_path() / ("baregpu-runtime-cache-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    const char* saved = std::getenv("BAREGPU_CACHE_DIR");
    std::string keep = saved ? saved : "";
    setenv("BAREGPU_CACHE_DIR", dir.c_str(), 1);
    auto fresh = std::make_shared<tensor::Runtime>(open_device("cpu"));
    auto again = std::make_shared<tensor::Runtime>(open_device("cpu"));
    if (saved) setenv("BAREGPU_CACHE_DIR", keep.c_str(), 1); else unsetenv("BAREGPU_CACHE_DIR");
    auto run = [](const std::shared_ptr<tensor::Runtime>& rt) {
        Tensor t = Tensor::from_vector(std::vector<float>(100, 2.0f), {10, 10}, rt);
        return (t * t).sum({1}).to_vector<float>();
    };
    CHECK(run(fresh) == std::vector<float>(10, 40.0f));
    CHECK(fresh->kernels_loaded() == 1);
    CHECK(fresh->compile_ms() > 0);
    CHECK(run(again) == std::vector<float>(10, 40.0f));  // same kernel: read from the disk cache
    CHECK(again->kernels_loaded() == 1);
    CHECK(again->compile_ms() == 0);
    std::filesystem::remove_all(dir);
}

TEST_CASE("runtime: a freed kernel output is reused for the next one of its size, a live one never") {
    auto rt = device_runtime();
    // A shape no other test uses, so that no earlier output of this size waits in the pool.
    Tensor x = Tensor::from_vector(std::vector<float>(61 * 67, 1.0f), {61, 67}, rt);
    uint64_t freed = 0;
    {
        Tensor y = x + 1.0;
        y.realize();
        freed = y.node()->realized.address().value();
    }
    Tensor z = x + 2.0;
    z.realize();
    CHECK(z.node()->realized.address().value() == freed);
    // z and a reshape aliasing its buffer are alive: the next output gets other memory.
    Tensor alias = z.reshape({61 * 67});
    alias.realize();
    CHECK(alias.node()->realized.address().value() == freed);
    Tensor w = x + 3.0;
    w.realize();
    CHECK(w.node()->realized.address().value() != freed);
    for (float v : alias.to_vector<float>()) REQUIRE(v == 3.0f);
    for (float v : w.to_vector<float>()) REQUIRE(v == 4.0f);
}

TEST_CASE("fusion: a row reduction broadcast to a row of another length") {
    std::mt19937 gen(15);
    Ref a = Ref::random({6, 7}, gen, -1, 1), b = Ref::random({6, 5}, gen, -1, 1);
    Tensor ta = Tensor::from_vector(a.floats(), a.shape, device_runtime());
    Tensor tb = Tensor::from_vector(b.floats(), b.shape, device_runtime());
    // The sum runs over a's 7 columns inside the kernel over b's 5.
    Tensor out = ta.sum({1}, true).expand({6, 5}) * tb;
    CHECK(launches([&] { out.realize(); }) == 1);
    Ref s = a.reduce({1}, 0, [](double x, double y) { return x + y; });
    check_close(out, Ref::zip(s, b, [](double x, double y) { return x * y; }), 1e-5, 1e-5);
}
