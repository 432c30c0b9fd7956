// A kernel loaded on a Qualcomm device. For the host ISA (the simulated A630) its buffer holds a
// struct baregpu_host_program (drivers/hostcode/host_program.h) at offset 0 and the host ELF image
// after it; SP_CS_BASE points at the descriptor.
#pragma once

#include "drivers/qcom/a6xx_registers.hpp"
#include "hcq/memory.hpp"
#include "hcq/program.hpp"

namespace baregpu::qcom {

// What the SP needs to know about a program besides its address (SP_CS_CNTL_0/1, SP_CS_CONFIG,
// SP_CS_INSTR_SIZE, the work-item id registers).
struct ShaderState {
    uint32_t instr_units = 1;  // SP_CS_INSTR_SIZE: 128-byte units (16 instructions; ir3 instrlen)
    uint32_t full_regs = 1, half_regs = 0, branchstack = 0;
    bool thread128 = false;
    uint32_t local_id_reg = a6xx::kRegidNone, wg_id_const = a6xx::kRegidNone;
    uint32_t uavs = 0;
    uint32_t shared_bytes = 0;
};

class QcomProgram final : public hcq::Program {
public:
    QcomProgram(hcq::Device& device, hcq::KernelInfo info, hcq::Buffer code, ShaderState shader)
        : Program(device, std::move(info)), code_(std::move(code)), shader_(shader) {}
    // What SP_CS_BASE gets.
    uint64_t code_address() const { return code_.address().value(); }
    const ShaderState& shader() const { return shader_; }

private:
    hcq::Buffer code_;  // freed (by timeline) with the last handle
    ShaderState shader_;
};

}  // namespace baregpu::qcom
