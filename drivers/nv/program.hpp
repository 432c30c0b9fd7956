// A kernel loaded on an NVIDIA HCQ device: its code in GPU memory and what a QMD launch needs.
// A host-code object behind a baregpu_host_program descriptor (drivers/hostcode/host_program.h) at
// `program_address` (the simulated GPUs), or a cubin's linked image with PROGRAM_ADDRESS at the kernel's SASS.
#pragma once

#include "hcq/memory.hpp"
#include "hcq/program.hpp"

#include <cstddef>
#include <optional>
#include <vector>

namespace baregpu::nv {

// What a cubin's kernel asks of its launch (its .nv.info and sections, drivers/nv/cubin.hpp).
struct NvCubinLaunch {
    uint64_t text_offset = 0;  // the kernel's SASS in the linked image
    uint32_t registers = 0, barriers = 0, shared_bytes = 0;
    uint32_t param_offset = 0, param_size = 0;  // EIATTR_PARAM_CBANK: the parameters in constant bank 0
    std::vector<std::byte> constant_bank0;       // .nv.constant0.<kernel>: bank 0's initial image
};

class NvProgram final : public hcq::Program {
public:
    NvProgram(hcq::Device& device, hcq::KernelInfo info, hcq::Buffer code)
        : Program(device, std::move(info)), code_(std::move(code)) {}
    NvProgram(hcq::Device& device, hcq::KernelInfo info, hcq::Buffer code, NvCubinLaunch cubin)
        : Program(device, std::move(info)), code_(std::move(code)), cubin_(std::move(cubin)) {}
    // Tells the device where the code was, so that a launch recorded earlier that still names it is
    // reported as a launch of an unloaded program rather than as a bare page fault.
    ~NvProgram() override;
    // The QMD's PROGRAM_ADDRESS.
    uint64_t program_address() const { return code_.address().value() + (cubin_ ? cubin_->text_offset : 0); }
    // A cubin's launch needs, none for a host-code program.
    const std::optional<NvCubinLaunch>& cubin() const { return cubin_; }

private:
    hcq::Buffer code_;  // freed (by timeline) with the last handle
    std::optional<NvCubinLaunch> cubin_;
};

}  // namespace baregpu::nv
