#include "compiler/compiler.hpp"

#include "compiler/cpu_codegen.hpp"

#include <chrono>
#include <fmt/format.h>

namespace baregpu::compiler {

Compiler::Compiler() : Compiler(Target::host(), KernelCache(KernelCache::default_directory())) {}

Compiler::Compiler(Target target, KernelCache cache) : target_(std::move(target)), cache_(std::move(cache)) {}

std::string Compiler::cache_key(const Kernel& kernel) const {
    return fmt::format("{} ({})\n{}\n{}", kCompilerVersion, codegen_build_stamp(), target_.key(), kernel.key());
}

CompiledKernel Compiler::compile(const Kernel& kernel, bool refresh) {
    CompiledKernel out;
    out.name = kernel.name();
    std::string key = cache_key(kernel);
    if (auto hit = refresh ? std::nullopt : cache_.load(key)) {
        out.object = std::move(*hit);
        out.from_cache = true;
        cache_hits_.fetch_add(1);
        return out;
    }
    auto start = std::chrono::steady_clock::now();
    out.object = emit_cpu_object(kernel, target_);
    out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    generated_.fetch_add(1);
    cache_.store(key, out.object);
    return out;
}

}  // namespace baregpu::compiler
