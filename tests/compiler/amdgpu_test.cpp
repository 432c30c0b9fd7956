// AMDGPU code objects from the compiler, checked by LLVM's own tools: llvm-objdump must
// disassemble them for the target and llvm-readelf must show the HSA metadata note with the
// kernel; emit_amdgpu_code_object must give a shared object (ld.lld). Exits 77 (meson: skipped)
// with a message when the tools are not installed.
#include "base/error.hpp"
#include "compiler/amdgpu_codegen.hpp"
#include "compiler/scheduler.hpp"
#include "tests/skip.hpp"

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace amdgpu_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::compiler;

namespace {

const char* const kObjdump = "llvm-objdump-19";
const char* const kReadelf = "llvm-readelf-19";

bool have_tool(const char* tool) { return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0; }

// stdout of `command`, and its exit status.
std::pair<std::string, int> run(const std::string& command) {
    std::string out;
    FILE* p = popen((command + " 2>&1").c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    int status = pclose(p);
    return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

NodeRef input(Shape shape) { return Node::make_buffer({}, DType::float32, std::move(shape)); }

// matmul (M,K)@(K,N) as the Tensor API builds it: reshape + expand + mul + sum.
Kernel matmul_kernel() {
    NodeRef a = input({32, 64}), b = input({64, 16});
    auto av = Node::make_view(a, ShapeTracker::contiguous({32, 64}).reshape({32, 1, 64}).expand({32, 16, 64}));
    auto bv = Node::make_view(b, ShapeTracker::contiguous({64, 16}).permute({1, 0}).reshape({1, 16, 64}).expand({32, 16, 64}));
    auto prod = Node::make_alu(Op::mul, DType::float32, {av, bv});
    auto items = schedule(Node::make_reduce(Op::reduce_sum, prod, {2}));
    REQUIRE(items.size() == 1);
    return *items[0].kernel;
}

// max over rows of exp(x): a reduction with a transcendental under it.
Kernel reduction_kernel() {
    NodeRef x = input({100, 37});
    auto e = Node::make_alu(Op::exp2, DType::float32, {x});
    auto items = schedule(Node::make_reduce(Op::reduce_max, e, {1}));
    REQUIRE(items.size() == 1);
    return *items[0].kernel;
}

// x - max(x) over rows, broadcast back: one kernel with a row reduction (each work-item loops
// over its row).
Kernel row_kernel() {
    NodeRef x = input({40, 37});
    auto m = Node::make_reduce(Op::reduce_max, x, {1});
    auto mb = Node::make_view(m, ShapeTracker::contiguous({40, 1}).expand({40, 37}));
    auto items = schedule(Node::make_alu(Op::sub, DType::float32, {x, mb}));
    REQUIRE(items.size() == 1);
    REQUIRE(items[0].kernel->key().find("row_reduce") != std::string::npos);
    return *items[0].kernel;
}

void check_object(const Kernel& kernel, const std::string& gfx) {
    INFO("kernel " << kernel.name() << " for " << gfx);
    std::vector<std::byte> object = emit_amdgpu_object(kernel, gfx);
    REQUIRE(object.size() > 64);
    auto path = std::filesystem::temp_directory_path() / (kernel.name() + "-" + gfx + "-" + std::to_string(getpid()) + ".o");
    {
        std::ofstream f(path, std::ios::binary);
        f.write(reinterpret_cast<const char*>(object.data()), std::streamsize(object.size()));
    }
    auto [dis, dis_rc] = run(std::string(kObjdump) + " -d --mcpu=" + gfx + " " + path.string());
    INFO(dis);
    CHECK(dis_rc == 0);
    CHECK(dis.find("<" + kernel.name() + ">:") != std::string::npos);
    CHECK(dis.find("s_endpgm") != std::string::npos);
    CHECK(dis.find("global_load") != std::string::npos);
    CHECK(dis.find("<unknown>") == std::string::npos);
    auto [notes, notes_rc] = run(std::string(kReadelf) + " --notes " + path.string());
    INFO(notes);
    CHECK(notes_rc == 0);
    CHECK(notes.find("NT_AMDGPU_METADATA") != std::string::npos);
    CHECK(notes.find("amdhsa.kernels") != std::string::npos);
    CHECK(notes.find(".name:           " + kernel.name()) != std::string::npos);
    CHECK(notes.find(".symbol:         " + kernel.name() + ".kd") != std::string::npos);
    CHECK(notes.find("amdgcn-amd-amdhsa--" + gfx) != std::string::npos);
    // Two global buffers of 8 bytes each at least (output + inputs), in the HCQ order.
    CHECK(notes.find(".offset:         0") != std::string::npos);
    CHECK(notes.find(".offset:         8") != std::string::npos);
    CHECK(notes.find(".max_flat_workgroup_size: 256") != std::string::npos);
    std::filesystem::remove(path);
}

}  // namespace

TEST_CASE("amdgpu: matmul, reduction and row-reduction code objects for gfx1100 and gfx1201") {
    for (const char* gfx : {"gfx1100", "gfx1201"}) {
        check_object(matmul_kernel(), gfx);
        check_object(reduction_kernel(), gfx);
        check_object(row_kernel(), gfx);
    }
}

TEST_CASE("amdgpu: emit_amdgpu_code_object links with ld.lld into a shared object; linker problems are clear errors") {
    auto [version, version_rc] = run("ld.lld-19 --version || ld.lld --version");
    if (version_rc != 0 || version.find("LLD 1") == std::string::npos || version.find("LLD 14") != std::string::npos) {
        WARN("no ld.lld 15 or newer (Debian: apt-get install lld-19): linking not checked");
        return;
    }
    Kernel kernel = row_kernel();
    std::vector<std::byte> so = emit_amdgpu_code_object(kernel, "gfx1100");
    auto path = std::filesystem::temp_directory_path() / (kernel.name() + "-" + std::to_string(getpid()) + ".so");
    {
        std::ofstream f(path, std::ios::binary);
        f.write(reinterpret_cast<const char*>(so.data()), std::streamsize(so.size()));
    }
    auto [header, header_rc] = run(std::string(kReadelf) + " -h --dyn-syms " + path.string());
    std::filesystem::remove(path);
    INFO(header);
    CHECK(header_rc == 0);
    CHECK(header.find("DYN (Shared object file)") != std::string::npos);
    CHECK(header.find(kernel.name() + ".kd") != std::string::npos);  // exported for the loader

    // Not an object: the linker's own message comes back.
    std::vector<std::byte> junk(64, std::byte{0x5a});
    try {
        link_amdgpu_shared_object(junk, "junk");
        FAIL("linked junk");
    } catch (const Error& e) {
        INFO(e.what());
        CHECK(std::string(e.what()).find("-shared failed for kernel junk") != std::string::npos);
    }
}

// Without LLVM's tools there is nothing to check the objects with.
const test::SkipUnless needs_llvm_tools{[](int, char**) -> std::string {
    for (const char* tool : {kObjdump, kReadelf})
        if (!have_tool(tool)) return std::string(tool) + " is not installed (Debian: apt-get install llvm-19)";
    return "";
}};

}  // namespace amdgpu_test
