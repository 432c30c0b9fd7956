// A kernel loaded from an ELF code object, its metadata, and the kernel-argument block that
// exec() copies into a launch.
//
// Kernel-argument layout (every backend): the addresses of the kernel's buffers first, one
// little-endian u64 each, then its 32-bit values, one u32 each:
//   [ buffer 0 | buffer 1 | ... | buffer B-1 | value 0 | value 1 | ... | value V-1 ]
//     offset 8*i                              offset 8*B + 4*j
// kernarg_size may be larger than that (a backend's own trailing fields); it is never smaller.
#pragma once

#include "base/address.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>

namespace baregpu::hcq {

class Buffer;
class Device;

struct KernelInfo {
    std::string name;
    uint32_t kernarg_size = 0;           // bytes of kernel arguments the kernel reads
    uint16_t num_buffers = 0;            // u64 buffer addresses at the start of the kernargs
    uint16_t num_values = 0;             // u32 values after them
    uint32_t static_shared_bytes = 0;    // workgroup-shared memory (LDS) per workgroup
    uint32_t private_bytes = 0;          // scratch per work-item (0: none)
    uint32_t max_threads_per_group = 0;  // the largest block.x*y*z the kernel supports
    uint32_t registers = 0;              // per work-item, where the ISA reports it (0 otherwise)
    // The block the kernel must be launched with (a GPU kernel's reqd_workgroup_size); 0 0 0: any
    // block up to max_threads_per_group.
    std::array<uint32_t, 3> required_block{};

    static constexpr uint32_t buffer_offset(uint32_t index) { return 8 * index; }
    uint32_t value_offset(uint32_t index) const { return 8u * num_buffers + 4u * index; }
};

// A loaded kernel. Made by Device::load_program(); backends derive from it. Its code stays in
// device memory until the last handle is dropped and the device timeline passed every
// submission made until then.
class Program {
public:
    virtual ~Program() = default;
    Program(const Program&) = delete;
    Program& operator=(const Program&) = delete;

    const KernelInfo& info() const { return info_; }
    const std::string& name() const { return info_.name; }
    Device& device() const { return *device_; }
    // The kernel name's id in the profiler's string table.
    uint32_t profile_name() const { return profile_name_; }

protected:
    Program(Device& device, KernelInfo info);

private:
    friend class Device;
    std::shared_ptr<Device> keep_alive_;  // set by Device::load_program
    Device* device_;
    KernelInfo info_;
    uint32_t profile_name_;
};

// The argument block for one launch, built on the stack (no allocation). Unset bytes are zero.
class KernelArgs {
public:
    static constexpr size_t kMaxBytes = 1024;

    // Throws std::invalid_argument when the program's kernarg_size exceeds kMaxBytes.
    explicit KernelArgs(const Program& program);
    // Every buffer and value in order. Throws std::invalid_argument when the counts do not match
    // the kernel's.
    KernelArgs(const Program& program, std::initializer_list<std::reference_wrapper<const Buffer>> buffers,
               std::initializer_list<uint32_t> values = {});

    KernelArgs& buffer(uint32_t index, const Buffer& buffer);
    KernelArgs& address(uint32_t index, GpuVirtualAddress address);
    KernelArgs& value(uint32_t index, uint32_t value);

    const Program& program() const { return *program_; }
    std::span<const std::byte> bytes() const { return {bytes_.data(), size_}; }

private:
    const Program* program_;
    size_t size_;
    alignas(8) std::array<std::byte, kMaxBytes> bytes_{};
};

}  // namespace baregpu::hcq
