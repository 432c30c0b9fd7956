#include "compiler/compiler.hpp"

#include "base/error.hpp"
#include "compiler/amdgpu_codegen.hpp"
#include "compiler/cpu_codegen.hpp"
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

std::string Compiler::cache_key(const Kernel& kernel) const {
    std::string tools = fmt::format("LLVM {}", llvm_version());
    if (starts_with(target_.triple, "nvptx")) tools += ptxas_.empty() ? " ptx" : " ptxas " + ptxas_version_;
    return fmt::format("{} ({})\n{}\n{}", kCompilerVersion, tools, target_.key(), kernel.key());
}

CompiledKernel Compiler::compile(const Kernel& kernel, bool refresh) {
    CompiledKernel out;
    out.name = kernel.name();
    const bool nvptx = starts_with(target_.triple, "nvptx");
    out.ptx = nvptx && ptxas_.empty();
    std::string key = cache_key(kernel);
    if (auto hit = refresh ? std::nullopt : cache_.load(key)) {
        out.object = std::move(*hit);
        out.from_cache = true;
        cache_hits_.fetch_add(1);
        return out;
    }
    auto start = std::chrono::steady_clock::now();
    if (nvptx) {
        std::string ptx = emit_ptx(kernel, target_.cpu);
        if (ptxas_.empty()) {
            out.object.resize(ptx.size());
            std::memcpy(out.object.data(), ptx.data(), ptx.size());
        } else {
            out.object = assemble_cubin(ptxas_, ptx, target_.cpu);
        }
    } else if (starts_with(target_.triple, "amdgcn")) {
        out.object = emit_amdgpu_object(kernel, target_.cpu);
    } else {
        out.object = emit_cpu_object(kernel, target_);
    }
    out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    generated_.fetch_add(1);
    cache_.store(key, out.object);
    return out;
}

}  // namespace baregpu::compiler
