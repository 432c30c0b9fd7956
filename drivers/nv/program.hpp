// A kernel loaded on an NVIDIA HCQ device: its code in GPU memory and what a QMD launch needs.
// On the simulated AD102 the code is a host-code object behind a baregpu_host_program descriptor
// (drivers/hostcode/host_program.h) at `program_address`; cubins for silicon are not loaded yet.
#pragma once

#include "hcq/memory.hpp"
#include "hcq/program.hpp"

namespace baregpu::nv {

class NvProgram final : public hcq::Program {
public:
    NvProgram(hcq::Device& device, hcq::KernelInfo info, hcq::Buffer code)
        : Program(device, std::move(info)), code_(std::move(code)) {}
    // Tells the device where the code was, so that a launch recorded earlier that still names it is
    // reported as a launch of an unloaded program rather than as a bare page fault.
    ~NvProgram() override;
    // The QMD's PROGRAM_ADDRESS.
    uint64_t program_address() const { return code_.address().value(); }

private:
    hcq::Buffer code_;  // freed (by timeline) with the last handle
};

}  // namespace baregpu::nv
