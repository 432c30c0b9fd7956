#include "compiler/nvptx_codegen.hpp"

#include "base/error.hpp"
#include "compiler/external_tool.hpp"
#include "compiler/llvm_kernel_ir.hpp"

#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <fstream>

namespace baregpu::compiler {

Target nvptx_target(const std::string& sm_arch) { return Target{kNvptxTriple, sm_arch, ""}; }

std::string emit_ptx(const Kernel& kernel, const std::string& sm_arch, const TileShape& tile) {
    Target target = nvptx_target(sm_arch);
    std::unique_ptr<llvm::TargetMachine> machine = make_target_machine(target);
    llvm::LLVMContext ctx;
    llvm::Module module(kernel.name(), ctx);
    module.setTargetTriple(target.triple);
    module.setDataLayout(machine->createDataLayout());
    build_kernel_function(module, kernel, target, KernelFlavor::nvptx, nullptr, tile);
    std::vector<std::byte> text = optimize_and_emit(module, *machine, kernel, true);
    return std::string(reinterpret_cast<const char*>(text.data()), text.size());
}

std::optional<std::filesystem::path> find_ptxas() {
    if (const char* env = std::getenv("BAREGPU_PTXAS"); env && *env) {
        if (is_executable(env)) return std::filesystem::path(env);
        return std::nullopt;
    }
    if (auto p = find_on_path("ptxas")) return p;
    if (is_executable("/usr/local/cuda/bin/ptxas")) return std::filesystem::path("/usr/local/cuda/bin/ptxas");
    return std::nullopt;
}

std::string ptxas_version(const std::filesystem::path& ptxas) {
    TempDir dir("baregpu-ptxas-");
    std::filesystem::path log = dir.path() / "version.txt";
    int rc = run_tool({ptxas.string(), "--version"}, log);
    std::string text = read_text(log);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    size_t nl = text.rfind('\n');
    std::string last = nl == std::string::npos ? text : text.substr(nl + 1);
    return rc == 0 ? last : fmt::format("{} (exit {})", last, rc);
}

std::vector<std::byte> assemble_cubin(const std::filesystem::path& ptxas, const std::string& ptx, const std::string& sm_arch) {
    TempDir dir("baregpu-ptxas-");
    std::filesystem::path in = dir.path() / "kernel.ptx", out = dir.path() / "kernel.cubin", log = dir.path() / "ptxas.log";
    {
        std::ofstream f(in, std::ios::binary);
        f.write(ptx.data(), std::streamsize(ptx.size()));
        if (!f) throw Error("", fmt::format("compiler: cannot write {}", in.string()));
    }
    int rc = run_tool({ptxas.string(), "-arch=" + sm_arch, "-o", out.string(), in.string()}, log);
    if (rc != 0) {
        throw Error("", fmt::format("compiler: {} -arch={} failed (exit {}):\n{}", ptxas.string(), sm_arch, rc, read_text(log)));
    }
    std::string bytes = read_text(out);
    if (bytes.empty()) throw Error("", fmt::format("compiler: {} wrote no cubin", ptxas.string()));
    std::vector<std::byte> cubin(bytes.size());
    std::memcpy(cubin.data(), bytes.data(), bytes.size());
    return cubin;
}

}  // namespace baregpu::compiler
