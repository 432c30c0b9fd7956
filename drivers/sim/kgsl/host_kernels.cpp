#include "drivers/sim/kgsl/host_kernels.hpp"

#include "base/error.hpp"
#include "drivers/hostcode/loaded_object.hpp"
#include "drivers/hostcode/host_program.h"
#include "drivers/hostcode/kernel_abi.h"
#include "drivers/sim/kgsl/sim_kgsl.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <sys/mman.h>
#include <thread>

namespace baregpu::sim::kgsl {

namespace {
constexpr uint32_t kSharedBytes = 32 * 1024;  // A6xx workgroup-shared memory
constexpr uint64_t kMaxImageBytes = 64ull << 20;
constexpr size_t kImageCacheEntries = 64;

}  // namespace

HostKernels::HostKernels() = default;
HostKernels::~HostKernels() = default;

std::shared_ptr<hostcode::LoadedObject> HostKernels::load(SimKgsl& device, uint64_t image_va, uint64_t image_size, uint64_t image_hash,
                                                      std::string& what) {
    auto key = std::make_pair(image_va, image_hash);
    if (auto it = images_.find(key); it != images_.end()) return it->second;
    if (image_size == 0 || image_size > kMaxImageBytes || !device.mapped(image_va, image_size)) {
        what = fmt::format("host program image 0x{:x}+0x{:x} is not inside one mapped GPU object", image_va, image_size);
        return nullptr;
    }
    auto bytes = std::span(reinterpret_cast<const std::byte*>(image_va), image_size);
    if (baregpu_host_program_hash(bytes.data(), bytes.size()) != image_hash) {
        what = fmt::format("host program image at 0x{:x} does not match the descriptor's hash", image_va);
        return nullptr;
    }
    try {
        auto image = hostcode::LoadedObject::load(bytes, "sim-kgsl", "host program");
        if (images_.size() >= kImageCacheEntries) images_.erase(images_.begin());
        images_[key] = image;
        return image;
    } catch (const Error& e) {
        what = fmt::format("host program image at 0x{:x} is refused: {}", image_va, e.what());
        return nullptr;
    }
}

std::string HostKernels::run(SimKgsl& device, uint64_t program, std::span<const uint8_t> constants, const uint32_t grid[3],
                             const uint32_t block[3]) {
    std::lock_guard lock(mutex_);
    if (!device.mapped(program, sizeof(baregpu_host_program))) {
        return fmt::format("no program is loaded at SP_CS_BASE 0x{:x} (page fault: not inside a mapped GPU object)", program);
    }
    baregpu_host_program d;
    std::memcpy(&d, reinterpret_cast<const void*>(program), sizeof d);
    if (d.magic != BAREGPU_HOST_PROGRAM_MAGIC || d.version != BAREGPU_HOST_PROGRAM_VERSION) {
        return fmt::format("SP_CS_BASE 0x{:x}: no host program descriptor there (magic 0x{:x} version {}, expected 0x{:x} version {})", program,
                           d.magic, d.version, BAREGPU_HOST_PROGRAM_MAGIC, BAREGPU_HOST_PROGRAM_VERSION);
    }
    d.kernel[sizeof d.kernel - 1] = '\0';
    std::string what;
    std::shared_ptr<hostcode::LoadedObject> image = load(device, d.image_va, d.image_size, d.image_hash, what);
    if (!image) return what;
    const hostcode::KernelEntry* k = image->find(d.kernel);
    if (!k) return fmt::format("host program has no kernel '{}'", d.kernel);
    if (k->kernarg_size != d.kernarg_size || k->kernarg_size > constants.size()) {
        return fmt::format("kernel '{}' takes {} bytes of arguments; the descriptor says {} and {} bytes of constants were loaded", k->name,
                           k->kernarg_size, d.kernarg_size, constants.size());
    }
    if (k->shared_bytes > kSharedBytes) return fmt::format("kernel '{}' needs {} bytes of shared memory", k->name, k->shared_bytes);
    uint64_t threads = uint64_t(block[0]) * block[1] * block[2];
    if (threads == 0 || threads > k->max_threads || grid[0] == 0 || grid[1] == 0 || grid[2] == 0) {
        return fmt::format("kernel '{}': grid {}x{}x{} block {}x{}x{} (at most {} threads per group)", k->name, grid[0], grid[1], grid[2], block[0],
                           block[1], block[2], k->max_threads);
    }
    // Every buffer the kernel will dereference must be mapped GPU memory.
    for (uint32_t i = 0; i < k->num_buffers; ++i) {
        uint64_t va;
        std::memcpy(&va, constants.data() + 8 * i, 8);
        if (!device.mapped(va, 1)) return fmt::format("page fault: kernel '{}' buffer {} at 0x{:x} is not mapped", k->name, i, va);
    }
    launcher_.run(image->entry(*k), constants.data(), {grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]},
                  k->shared_bytes);
    return "";
}

}  // namespace baregpu::sim::kgsl
