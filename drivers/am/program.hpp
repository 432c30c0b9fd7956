// A kernel loaded on an AM device: its code in GPU memory and the launch state a dispatch
// programs (COMPUTE_PGM_*, user SGPRs), filled in by the device's loader for its ISA.
#pragma once

#include "drivers/am/pm4.hpp"
#include "hcq/memory.hpp"
#include "hcq/program.hpp"

namespace baregpu::am {

class AmProgram final : public hcq::Program {
public:
    // launch: code_address, rsrc1/2/3, lds_bytes, wave32 and the user-SGPR flags of this kernel;
    // grid, block and kernarg_address are the launch's. kernarg_sgpr: the COMPUTE_USER_DATA index
    // of the kernarg pointer's low dword (what the dispatch sequence puts before it).
    AmProgram(hcq::Device& device, hcq::KernelInfo info, hcq::Buffer code, const pm4::KernelDispatch& launch,
              uint32_t kernarg_sgpr)
        : Program(device, std::move(info)), code_(std::move(code)), launch_(launch), kernarg_sgpr_(kernarg_sgpr) {}
    // Tells the device where the code was, so that a launch recorded earlier that still names it
    // is reported as a launch of an unloaded program rather than as a bare page fault.
    ~AmProgram() override;

    const pm4::KernelDispatch& launch() const { return launch_; }
    const hcq::Buffer& code() const { return code_; }
    uint32_t kernarg_sgpr() const { return kernarg_sgpr_; }

private:
    hcq::Buffer code_;  // freed (by timeline) with the last handle
    pm4::KernelDispatch launch_;
    uint32_t kernarg_sgpr_;
};

}  // namespace baregpu::am
