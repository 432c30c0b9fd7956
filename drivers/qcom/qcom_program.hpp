// A kernel loaded on a Qualcomm device. For the host ISA (the simulated A630) its buffer holds a
// struct baregpu_host_program (drivers/hostcode/host_program.h) at offset 0 and the host ELF image
// after it; SP_CS_BASE points at the descriptor.
#pragma once

#include "hcq/memory.hpp"
#include "hcq/program.hpp"

namespace baregpu::qcom {

class QcomProgram final : public hcq::Program {
public:
    QcomProgram(hcq::Device& device, hcq::KernelInfo info, hcq::Buffer code)
        : Program(device, std::move(info)), code_(std::move(code)) {}
    // What SP_CS_BASE gets.
    uint64_t code_address() const { return code_.address().value(); }

private:
    hcq::Buffer code_;  // freed (by timeline) with the last handle
};

}  // namespace baregpu::qcom
