#include "hcq/program.hpp"

#include "hcq/memory.hpp"
#include "hcq/profiler.hpp"

#include <cstring>
#include <fmt/format.h>
#include <stdexcept>

namespace baregpu::hcq {

Program::Program(Device& device, KernelInfo info)
    : device_(&device), info_(std::move(info)), profile_name_(Profiler::intern(info_.name)) {}

KernelArgs::KernelArgs(const Program& program) : program_(&program), size_(program.info().kernarg_size) {
    const KernelInfo& k = program.info();
    if (size_ > kMaxBytes) {
        throw std::invalid_argument(fmt::format("kernel '{}' takes {} bytes of arguments; KernelArgs holds at most {}", k.name,
                                                size_, kMaxBytes));
    }
}

KernelArgs::KernelArgs(const Program& program, std::initializer_list<std::reference_wrapper<const Buffer>> buffers,
                       std::initializer_list<uint32_t> values)
    : KernelArgs(program) {
    const KernelInfo& k = program.info();
    if (buffers.size() != k.num_buffers || values.size() != k.num_values) {
        throw std::invalid_argument(fmt::format("kernel '{}' takes {} buffers and {} values; got {} and {}", k.name,
                                                k.num_buffers, k.num_values, buffers.size(), values.size()));
    }
    uint32_t i = 0;
    for (const Buffer& b : buffers) buffer(i++, b);
    i = 0;
    for (uint32_t v : values) value(i++, v);
}

KernelArgs& KernelArgs::buffer(uint32_t index, const Buffer& b) { return address(index, b.address()); }

KernelArgs& KernelArgs::address(uint32_t index, GpuVirtualAddress addr) {
    const KernelInfo& k = program_->info();
    if (index >= k.num_buffers) {
        throw std::out_of_range(fmt::format("kernel '{}' has {} buffer arguments; index {} is out of range", k.name,
                                            k.num_buffers, index));
    }
    uint64_t v = addr.value();
    std::memcpy(bytes_.data() + KernelInfo::buffer_offset(index), &v, 8);
    return *this;
}

KernelArgs& KernelArgs::value(uint32_t index, uint32_t v) {
    const KernelInfo& k = program_->info();
    if (index >= k.num_values) {
        throw std::out_of_range(
            fmt::format("kernel '{}' has {} value arguments; index {} is out of range", k.name, k.num_values, index));
    }
    std::memcpy(bytes_.data() + k.value_offset(index), &v, 4);
    return *this;
}

}  // namespace baregpu::hcq
