#include "compiler/amdgpu_codegen.hpp"

#include "base/error.hpp"
#include "compiler/external_tool.hpp"
#include "compiler/llvm_kernel_ir.hpp"

#include <cstring>
#include <fmt/format.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace baregpu::compiler {

std::vector<std::byte> emit_amdgpu_object(const Kernel& kernel, const std::string& gfx_arch, const TileShape& tile) {
    Target target{"amdgcn-amd-amdhsa", gfx_arch, ""};
    std::unique_ptr<llvm::TargetMachine> machine = make_target_machine(target);
    llvm::LLVMContext ctx;
    llvm::Module module(kernel.name(), ctx);
    module.setTargetTriple(target.triple);
    module.setDataLayout(machine->createDataLayout());
    build_kernel_function(module, kernel, target, KernelFlavor::amdgpu, nullptr, tile);
    return optimize_and_emit(module, *machine, kernel);
}

namespace {

namespace fs = std::filesystem;

std::string find_ld_lld() {
    if (const char* forced = std::getenv("BAREGPU_LD_LLD"); forced != nullptr && *forced != '\0') {
        if (auto p = find_on_path(forced)) return p->string();
        throw Error("", fmt::format("compiler: BAREGPU_LD_LLD={} is not an executable", forced));
    }
    // ld.lld-19 first: a plain ld.lld may be an older lld (Debian 12's `lld` is 14, which rejects
    // code object v5 with "unknown abi version").
    for (const char* name : {"ld.lld-19", "ld.lld"})
        if (auto p = find_on_path(name)) return p->string();
    throw Error("", "compiler: no ld.lld on PATH to link the AMDGPU code object (Debian 12: apt-get install lld-19)");
}

}  // namespace

std::vector<std::byte> link_amdgpu_shared_object(std::span<const std::byte> relocatable, const std::string& name) {
    const std::string lld = find_ld_lld();
    TempDir dir("baregpu-lld-");
    const fs::path in = dir.path() / "kernel.o", out = dir.path() / "kernel.so", log = dir.path() / "ld.log";
    {
        std::ofstream f(in, std::ios::binary);
        f.write(reinterpret_cast<const char*>(relocatable.data()), std::streamsize(relocatable.size()));
        if (!f) throw Error("", fmt::format("compiler: cannot write {}", in.string()));
    }
    const int status = run_tool({lld, "-shared", "--no-undefined", "-o", out.string(), in.string()}, log);
    if (status != 0) {
        std::string output = read_text(log);
        std::string hint = output.find("unknown abi version") != std::string::npos
                               ? " (this lld is too old for code object v5: install lld-19, or set BAREGPU_LD_LLD)"
                               : "";
        throw Error("", fmt::format("compiler: {} -shared failed for kernel {} (status {}){}:\n{}", lld, name, status, hint, output));
    }
    std::ifstream f(out, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), {});
    if (bytes.empty()) throw Error("", fmt::format("compiler: {} wrote no output for kernel {}", lld, name));
    std::vector<std::byte> result(bytes.size());
    std::memcpy(result.data(), bytes.data(), bytes.size());
    return result;
}

std::vector<std::byte> emit_amdgpu_code_object(const Kernel& kernel, const std::string& gfx_arch, const TileShape& tile) {
    return link_amdgpu_shared_object(emit_amdgpu_object(kernel, gfx_arch, tile), kernel.name());
}

}  // namespace baregpu::compiler
