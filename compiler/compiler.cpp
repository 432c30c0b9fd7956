#include "compiler/compiler.hpp"

#include "base/error.hpp"
#include "compiler/amdgpu_codegen.hpp"
#include "compiler/cpu_codegen.hpp"
#include "compiler/matmul_match.hpp"
#include "compiler/nvptx_codegen.hpp"

#include <chrono>
#include <cstring>
#include <fmt/format.h>

namespace baregpu::compiler {

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

Compiler::Compiler() : Compiler(Target::host(), KernelCache(KernelCache::default_directory())) {}

Compiler::Compiler(Target target, KernelCache cache) : target_(std::move(target)), cache_(std::move(cache)) {
    if (starts_with(target_.triple, "nvptx")) {
        if (auto ptxas = find_ptxas()) {
            ptxas_ = ptxas->string();
            ptxas_version_ = ptxas_version(*ptxas);
        }
    }
}

std::string Compiler::cache_key(const Kernel& kernel, const TileShape& tile) const {
    std::string tools = fmt::format("LLVM {}", llvm_version());
    if (starts_with(target_.triple, "nvptx")) tools += ptxas_.empty() ? " ptx" : " ptxas " + ptxas_version_;
    std::string key = fmt::format("{} ({})\n{}\n{}", kCompilerVersion, tools, target_.key(), kernel.key());
    if (tile != TileShape{}) key += "tile " + tile.text() + "\n";
    return key;
}

std::vector<TileShape> Compiler::tile_candidates(const Kernel& kernel) const {
    if (starts_with(target_.triple, "nvptx") || starts_with(target_.triple, "amdgcn")) return gpu_tile_candidates(kernel);
    if (!starts_with(target_.triple, "x86_64") || !is_blocked_matmul(kernel, target_)) return {};
    // The default, then smaller and larger C tiles and K slices: what fits L1/L2 best depends on
    // the cache sizes and on M, N and K (a small N wastes a wide tile's padding).
    return {TileShape{}, TileShape{96, 256, 256}, TileShape{192, 128, 256}, TileShape{192, 256, 128}, TileShape{96, 128, 512},
            TileShape{384, 256, 128}};
}

std::optional<TileShape> Compiler::cached_tile(const Kernel& kernel) const {
    auto text = cache_.load_text("tile choice\n" + cache_key(kernel));
    if (!text) return std::nullopt;
    return TileShape::parse(*text);
}

void Compiler::store_tile(const Kernel& kernel, const TileShape& tile) const { cache_.store_text("tile choice\n" + cache_key(kernel), tile.text()); }

CompiledKernel Compiler::compile(const Kernel& kernel, bool refresh, const TileShape& tile) {
    CompiledKernel out;
    out.name = kernel.name();
    const bool nvptx = starts_with(target_.triple, "nvptx");
    out.ptx = nvptx && ptxas_.empty();
    const bool gpu = nvptx || starts_with(target_.triple, "amdgcn");
    if (!(gpu ? tile.valid_gpu() : tile.valid()))
        throw Error("", fmt::format("compiler: invalid {} tile shape {}", gpu ? "GPU" : "CPU", tile.text()));
    std::string key = cache_key(kernel, tile);
    if (auto hit = refresh ? std::nullopt : cache_.load(key)) {
        out.object = std::move(*hit);
        out.from_cache = true;
        cache_hits_.fetch_add(1);
        return out;
    }
    auto start = std::chrono::steady_clock::now();
    if (nvptx) {
        std::string ptx = emit_ptx(kernel, target_.cpu, tile);
        if (ptxas_.empty()) {
            out.object.resize(ptx.size());
            std::memcpy(out.object.data(), ptx.data(), ptx.size());
        } else {
            out.object = assemble_cubin(ptxas_, ptx, target_.cpu);
        }
    } else if (starts_with(target_.triple, "amdgcn")) {
        out.object = emit_amdgpu_code_object(kernel, target_.cpu, tile);  // linked: what a device loads
    } else {
        out.object = emit_cpu_object(kernel, target_, tile);
    }
    out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    generated_.fetch_add(1);
    cache_.store(key, out.object);
    return out;
}

}  // namespace baregpu::compiler
