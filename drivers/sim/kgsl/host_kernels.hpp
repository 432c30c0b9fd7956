// How the simulated A630 runs a compute dispatch: as host code. SP_CS_BASE points at a struct
// baregpu_host_program (drivers/hostcode/host_program.h) naming a host x86-64 ELF image in GPU
// memory; the image is linked once per (image_va, image_hash) into executable host memory by
// drivers/hostcode's loader and its workgroups run on a thread pool shared by all contexts. With
// SVM the kernel arguments' buffer addresses are host addresses: the kernel dereferences them
// after the model checked that each one lies in a mapped GPU object.
#pragma once


#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "drivers/hostcode/grid_launcher.hpp"
#include "drivers/hostcode/loaded_object.hpp"

namespace baregpu::sim::kgsl {

class SimKgsl;

class HostKernels {
public:
    HostKernels();
    ~HostKernels();

    // Runs every workgroup. Returns "" or why the dispatch is a GPU fault (nothing ran then).
    std::string run(SimKgsl& device, uint64_t program, std::span<const uint8_t> constants, const uint32_t grid[3], const uint32_t block[3]);

private:
    std::shared_ptr<hostcode::LoadedObject> load(SimKgsl& device, uint64_t image_va, uint64_t image_size, uint64_t image_hash, std::string& what);

    std::mutex mutex_;  // one dispatch at a time on the pool
    std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<hostcode::LoadedObject>> images_;
    hostcode::GridLauncher launcher_;
};

}  // namespace baregpu::sim::kgsl
