// NVPTX from the compiler: the PTX of the kernels the scheduler makes (matmul, reductions, row
// reductions, elementwise chains of every dtype) has a proper kernel entry for sm_89 and sm_90,
// and the CUDA toolkit's ptxas accepts it, producing an EM_CUDA ELF cubin.
//
// Test cases tagged [ptxas] need ptxas (compiler::find_ptxas()). Without it they WARN and
// return, and `compiler_tests -# "[#nvptx_test][ptxas]"` (meson test compiler-ptxas) prints "SKIPPED: ..." and
// exits 77, which meson reports as a skipped test, never as a pass.
#include "compiler/compiler.hpp"
#include "compiler/nvptx_codegen.hpp"
#include "compiler/scheduler.hpp"
#include "tests/skip.hpp"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace nvptx_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::compiler;

namespace {

NodeRef input(Shape shape, DType t = DType::float32) { return Node::make_buffer({}, t, std::move(shape)); }

Kernel only_kernel(const NodeRef& root) {
    auto items = schedule(root);
    REQUIRE(items.size() == 1);
    return *items[0].kernel;
}

// matmul (M,K)@(K,N) as the Tensor API builds it, relu fused above the sum.
Kernel matmul_kernel() {
    NodeRef a = input({32, 64}), b = input({64, 16});
    auto av = Node::make_view(a, ShapeTracker::contiguous({32, 64}).reshape({32, 1, 64}).expand({32, 16, 64}));
    auto bv = Node::make_view(b, ShapeTracker::contiguous({64, 16}).permute({1, 0}).reshape({1, 16, 64}).expand({32, 16, 64}));
    auto prod = Node::make_alu(Op::mul, DType::float32, {av, bv});
    auto sum = Node::make_reduce(Op::reduce_sum, prod, {2});
    auto zero = Node::make_constant(0, DType::float32, {32, 16, 1});
    return only_kernel(Node::make_alu(Op::max, DType::float32, {sum, zero}));
}

Kernel reduction_kernel() {
    auto e = Node::make_alu(Op::exp2, DType::float32, {input({100, 37})});
    return only_kernel(Node::make_reduce(Op::reduce_max, e, {1}));
}

Kernel row_kernel() {
    NodeRef x = input({40, 37});
    auto m = Node::make_reduce(Op::reduce_max, x, {1});
    auto mb = Node::make_view(m, ShapeTracker::contiguous({40, 1}).expand({40, 37}));
    Kernel k = only_kernel(Node::make_alu(Op::sub, DType::float32, {x, mb}));
    REQUIRE(k.key().find("row_reduce") != std::string::npos);
    return k;
}

// Elementwise chains over float16, bfloat16, int32 and bool: casts, log2, sqrt, division,
// a comparison and a select, through a padded and flipped view.
std::vector<Kernel> elementwise_kernels() {
    std::vector<Kernel> out;
    NodeRef h = input({8, 33}, DType::float16);
    auto hl = Node::make_alu(Op::log2, DType::float16, {Node::make_alu(Op::sqrt, DType::float16, {h})});
    out.push_back(only_kernel(Node::make_alu(Op::cast, DType::bfloat16, {hl})));
    NodeRef i = input({8, 33}, DType::int32), j = input({8, 33}, DType::int32);
    auto q = Node::make_alu(Op::div, DType::int32, {i, j});
    auto lt = Node::make_alu(Op::cmp_lt, DType::boolean, {q, i});
    out.push_back(only_kernel(Node::make_alu(Op::where, DType::int32, {lt, q, j})));
    NodeRef f = input({8, 33});
    auto padded = Node::make_view(f, ShapeTracker::contiguous({8, 33}).pad({{1, 1}, {0, 2}}));
    out.push_back(only_kernel(Node::make_alu(Op::cast, DType::int32, {Node::make_alu(Op::recip, DType::float32, {padded})})));
    return out;
}

std::vector<Kernel> all_kernels() {
    std::vector<Kernel> out{matmul_kernel(), reduction_kernel(), row_kernel()};
    for (Kernel& k : elementwise_kernels()) out.push_back(std::move(k));
    return out;
}

void check_ptx(const Kernel& kernel, const std::string& sm, const std::string& ptx) {
    INFO("kernel " << kernel.name() << " for " << sm << "\n" << ptx);
    CHECK(ptx.find(".target " + sm) != std::string::npos);
    CHECK(ptx.find(".address_size 64") != std::string::npos);
    CHECK(ptx.find(".entry " + kernel.name() + "(") != std::string::npos);
    // One .param .u64 per buffer: the output, then the inputs.
    for (size_t p = 0; p <= kernel.inputs.size(); ++p) {
        CHECK(ptx.find(".param .u64 " + kernel.name() + "_param_" + std::to_string(p)) != std::string::npos);
    }
    CHECK(ptx.find(".maxntid 256") != std::string::npos);
    CHECK(ptx.find("%ctaid.x") != std::string::npos);
    CHECK(ptx.find("%tid.x") != std::string::npos);
    CHECK(ptx.find("ld.param.u64") != std::string::npos);
    CHECK(ptx.find("st.global") != std::string::npos);
}

bool is_cuda_elf(const std::vector<std::byte>& cubin) {
    if (cubin.size() < 20 || std::memcmp(cubin.data(), "\x7f" "ELF", 4) != 0) return false;
    uint16_t machine = 0;
    std::memcpy(&machine, cubin.data() + 18, 2);  // e_machine, little-endian (EI_DATA 1)
    return machine == 190;  // EM_CUDA
}

}  // namespace

TEST_CASE("nvptx: PTX entry, params and ctaid/tid indexing for sm_89 and sm_90") {
    // $BAREGPU_PTX_DUMP_DIR: each kernel's PTX is also written there as <kernel>.<sm>.ptx (tests/silicon/prepare.sh
    // carries them to a machine with ptxas, whose cubins become test data).
    const char* dump = std::getenv("BAREGPU_PTX_DUMP_DIR");
    for (const char* sm : {"sm_89", "sm_90"}) {
        for (const Kernel& k : all_kernels()) {
            const std::string ptx = emit_ptx(k, sm);
            check_ptx(k, sm, ptx);
            if (dump != nullptr && *dump != 0) {
                std::filesystem::create_directories(dump);
                const std::string path = std::string(dump) + "/" + k.name() + "." + sm + ".ptx";
                std::FILE* f = std::fopen(path.c_str(), "w");
                REQUIRE(f != nullptr);
                std::fwrite(ptx.data(), 1, ptx.size(), f);
                std::fclose(f);
            }
        }
    }
}

TEST_CASE("nvptx: ptxas accepts the PTX of matmul, reductions and elementwise kernels; the cubin is an EM_CUDA ELF", "[ptxas]") {
    auto ptxas = find_ptxas();
    if (!ptxas) {
        WARN("SKIPPED: ptxas not found ($BAREGPU_PTXAS, PATH, /usr/local/cuda/bin): PTX not assembled");
        return;
    }
    for (const char* sm : {"sm_89", "sm_90"}) {
        for (const Kernel& k : all_kernels()) {
            INFO(ptxas->string() << " -arch=" << sm << " kernel " << k.name());
            std::vector<std::byte> cubin = assemble_cubin(*ptxas, emit_ptx(k, sm), sm);
            CHECK(is_cuda_elf(cubin));
        }
    }
    std::printf("ptxas %s accepted %zu kernels for sm_89 and sm_90\n", ptxas_version(*ptxas).c_str(), all_kernels().size());
}

TEST_CASE("nvptx: ptxas reports PTX it rejects", "[ptxas]") {
    auto ptxas = find_ptxas();
    if (!ptxas) {
        WARN("SKIPPED: ptxas not found");
        return;
    }
    CHECK_THROWS_WITH(assemble_cubin(*ptxas, ".version 7.8\n.target sm_90\n.address_size 64\nnot ptx\n", "sm_90"),
                      Catch::Contains("failed"));
}

TEST_CASE("nvptx: the Compiler caches the cubin (or the PTX without ptxas) by IR and target", "[ptxas]") {
    auto dir = std::filesystem::temp_directory_path() / ("baregpu-nvptx-cache-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    Kernel k = reduction_kernel();
    Compiler c90(nvptx_target("sm_90"), KernelCache(dir));
    Compiler c89(nvptx_target("sm_89"), KernelCache(dir));
    CHECK(c90.cache_key(k) != c89.cache_key(k));
    CompiledKernel first = c90.compile(k);
    CHECK_FALSE(first.from_cache);
    CompiledKernel again = Compiler(nvptx_target("sm_90"), KernelCache(dir)).compile(k);
    CHECK(again.from_cache);
    CHECK(again.object == first.object);
    CHECK_FALSE(c89.compile(k).from_cache);
    if (find_ptxas()) {
        CHECK_FALSE(first.ptx);
        CHECK(is_cuda_elf(first.object));
    } else {
        WARN("SKIPPED: ptxas not found: the cache holds PTX text");
        CHECK(first.ptx);
    }
    std::filesystem::remove_all(dir);
}

// `[ptxas]` alone (meson's compiler-ptxas) is skipped where no ptxas is found.
const test::SkipUnless needs_ptxas_for_ptxas_tests{[](int argc, char** argv) -> std::string {
    bool ptxas_only = false;
    for (int i = 1; i < argc; ++i) ptxas_only = ptxas_only || std::strcmp(argv[i], "[ptxas]") == 0;
    if (ptxas_only && !find_ptxas()) return "ptxas not found ($BAREGPU_PTXAS, PATH, /usr/local/cuda/bin; the CUDA toolkit): PTX not assembled";
    return "";
}};

}  // namespace nvptx_test
