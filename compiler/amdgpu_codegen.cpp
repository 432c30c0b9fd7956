#include "compiler/amdgpu_codegen.hpp"

#include "compiler/llvm_kernel_ir.hpp"

namespace baregpu::compiler {

std::vector<std::byte> emit_amdgpu_object(const Kernel& kernel, const std::string& gfx_arch) {
    Target target{"amdgcn-amd-amdhsa", gfx_arch, ""};
    std::unique_ptr<llvm::TargetMachine> machine = make_target_machine(target);
    llvm::LLVMContext ctx;
    llvm::Module module(kernel.name(), ctx);
    module.setTargetTriple(target.triple);
    module.setDataLayout(machine->createDataLayout());
    build_kernel_function(module, kernel, target, KernelFlavor::amdgpu);
    return optimize_and_emit(module, *machine, kernel);
}

}  // namespace baregpu::compiler
