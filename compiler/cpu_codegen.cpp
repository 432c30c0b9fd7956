#include "compiler/cpu_codegen.hpp"

#include "base/error.hpp"
#include "compiler/cpu_kernel_abi.hpp"
#include "compiler/llvm_kernel_ir.hpp"

#include <fmt/format.h>

namespace baregpu::compiler {

namespace {

// The struct baregpu_kernel_descriptor for `fn`, in section .baregpu.kernels.
void add_descriptor(llvm::Module& module, const Kernel& kernel, const std::string& name, uint64_t private_bytes) {
    llvm::LLVMContext& ctx = module.getContext();
    auto* i16 = llvm::Type::getInt16Ty(ctx);
    auto* i32 = llvm::Type::getInt32Ty(ctx);
    auto* name_type = llvm::ArrayType::get(llvm::Type::getInt8Ty(ctx), cpu_abi::kNameBytes);
    auto* reserved_type = llvm::ArrayType::get(i32, 3);
    auto* type = llvm::StructType::get(ctx, {i32, i32, name_type, i32, i16, i16, i32, i32, i32, reserved_type});
    if (name.size() >= cpu_abi::kNameBytes) throw Error("", fmt::format("compiler: kernel name '{}' is longer than 63 bytes", name));
    std::string padded = name;
    padded.resize(cpu_abi::kNameBytes, '\0');
    const auto buffers = uint32_t(1 + kernel.inputs.size());
    auto u32 = [&](uint64_t v) { return llvm::ConstantInt::get(i32, v); };
    auto u16 = [&](uint64_t v) { return llvm::ConstantInt::get(i16, v); };
    llvm::Constant* init = llvm::ConstantStruct::get(
        type, {u32(cpu_abi::kMagic), u32(cpu_abi::kVersion), llvm::ConstantDataArray::getString(ctx, padded, false), u32(8 * buffers),
               u16(buffers), u16(0), u32(0), u32(private_bytes), u32(1), llvm::ConstantAggregateZero::get(reserved_type)});
    auto* gv = new llvm::GlobalVariable(module, type, true, llvm::GlobalValue::InternalLinkage, init, name + "_descriptor");
    gv->setSection(cpu_abi::kSection);
    gv->setAlignment(llvm::Align(8));
    llvm::appendToUsed(module, {gv});
}

}  // namespace

std::vector<std::byte> emit_cpu_object(const Kernel& kernel, const Target& target, const TileShape& tile) {
    std::unique_ptr<llvm::TargetMachine> machine = make_target_machine(target);
    llvm::LLVMContext ctx;
    llvm::Module module(kernel.name(), ctx);
    module.setTargetTriple(target.triple);
    module.setDataLayout(machine->createDataLayout());
    uint64_t private_bytes = 0;
    build_kernel_function(module, kernel, target, KernelFlavor::cpu, &private_bytes, tile);
    add_descriptor(module, kernel, kernel.name(), private_bytes);
    return optimize_and_emit(module, *machine, kernel);
}

}  // namespace baregpu::compiler
