#include "compiler/amdgpu_codegen.hpp"

#include "base/error.hpp"
#include "compiler/external_tool.hpp"
#include "compiler/llvm_kernel_ir.hpp"

#include <lld/Common/Driver.h>

#include <cstring>
#include <fmt/format.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>

// lld's ELF driver, linked in from Debian's liblld-19-dev (lld::elf::link).
LLD_HAS_DRIVER(elf)

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

// lld's ELF driver keeps its state in process-wide globals: one link at a time.
std::mutex& lld_mutex() {
    static std::mutex m;
    return m;
}

}  // namespace

std::vector<std::byte> link_amdgpu_shared_object(std::span<const std::byte> relocatable, const std::string& name) {
    TempDir dir("baregpu-lld-");
    const fs::path in = dir.path() / "kernel.o", out = dir.path() / "kernel.so";
    {
        std::ofstream f(in, std::ios::binary);
        f.write(reinterpret_cast<const char*>(relocatable.data()), std::streamsize(relocatable.size()));
        if (!f) throw Error("", fmt::format("compiler: cannot write {}", in.string()));
    }
    const std::string in_s = in.string(), out_s = out.string();
    const std::vector<const char*> args{"ld.lld", "-shared", "--no-undefined", "-o", out_s.c_str(), in_s.c_str()};
    std::string messages;
    llvm::raw_string_ostream messages_os(messages);
    {
        std::lock_guard lock(lld_mutex());
        static bool unusable = false;  // lld recovered from a crash: its state cannot be trusted again
        if (unusable) throw Error("", fmt::format("compiler: lld crashed linking an earlier kernel; cannot link kernel {} in this process", name));
        lld::Result result = lld::lldMain(args, messages_os, messages_os, {{lld::Gnu, &lld::elf::link}});
        unusable = !result.canRunAgain;
        if (result.retCode != 0) {
            throw Error("", fmt::format("compiler: ld.lld (LLVM {}, in-process) -shared failed for kernel {}:\n{}", LLVM_VERSION_STRING,
                                        name, messages));
        }
    }
    std::ifstream f(out, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), {});
    if (bytes.empty()) throw Error("", fmt::format("compiler: ld.lld wrote no output for kernel {}", name));
    std::vector<std::byte> result(bytes.size());
    std::memcpy(result.data(), bytes.data(), bytes.size());
    return result;
}

std::vector<std::byte> emit_amdgpu_code_object(const Kernel& kernel, const std::string& gfx_arch, const TileShape& tile) {
    return link_amdgpu_shared_object(emit_amdgpu_object(kernel, gfx_arch, tile), kernel.name());
}

}  // namespace baregpu::compiler
