// The CPU device's code-object ABI as the code generator writes it. The compiler may not
// include drivers/ (docs/ARCHITECTURE.md, the dependency rule), so the numbers are repeated here
// from drivers/hostcode/kernel_abi.h; tests/compiler/abi_test.cpp checks that both agree.
#pragma once

#include <cstdint>

namespace baregpu::compiler::cpu_abi {

inline constexpr uint32_t kMagic = 0x314b4742u;  // "BGK1"
inline constexpr uint32_t kVersion = 1;
inline constexpr const char* kSection = ".baregpu.kernels";
inline constexpr uint32_t kNameBytes = 64;
inline constexpr uint32_t kDescriptorBytes = 104;
// struct baregpu_dispatch: group_id[3] at 0, grid[3] at 12 (u32 each).
inline constexpr uint32_t kDispatchGroupIdOffset = 0;
inline constexpr uint32_t kDispatchGridOffset = 12;

}  // namespace baregpu::compiler::cpu_abi
