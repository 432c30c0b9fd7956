// Runs one launch of a host-code kernel: every workgroup of the grid once, on a thread pool of
// one thread per host core (the caller is thread 0; made at the first launch), each pool thread
// with its own workgroup memory (64-byte aligned, shared_bytes long). The simulated GPUs' way of
// executing a dispatch (drivers/sim/*); one launch at a time per launcher.
#pragma once

#include "drivers/hostcode/kernel_abi.h"
#include "drivers/hostcode/thread_pool.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace baregpu::hostcode {

class GridLauncher {
public:
    // args: the kernel's argument block as it reads it. grid: workgroups per dimension; a zero
    // dimension runs nothing.
    void run(baregpu_kernel_fn fn, const void* args, std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block,
             uint32_t shared_bytes);

private:
    std::unique_ptr<ThreadPool> pool_;
    std::vector<std::byte> shared_;
};

}  // namespace baregpu::hostcode
