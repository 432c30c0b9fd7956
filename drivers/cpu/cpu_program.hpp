// A kernel loaded on a CPU device: its relocated image in device memory and the program-table
// slot that exec packets name (the command processor refuses an entry the table does not hold).
#pragma once

#include "hcq/memory.hpp"
#include "hcq/program.hpp"

namespace baregpu::cpu {

class CpuDevice;

class CpuProgram final : public hcq::Program {
public:
    CpuProgram(CpuDevice& device, hcq::KernelInfo info, hcq::Buffer image, uint64_t entry, uint32_t slot);
    // Hands image and slot back to the device, which frees them once the timeline passed every
    // submission made so far.
    ~CpuProgram() override;

    uint64_t entry() const { return entry_; }
    // The program-table handle exec packets carry: slot | generation << 12.
    uint32_t slot() const { return slot_; }
    const hcq::Buffer& image() const { return image_; }

private:
    CpuDevice& cpu_device_;
    hcq::Buffer image_;
    uint64_t entry_;
    uint32_t slot_;
};

}  // namespace baregpu::cpu
