#include "drivers/sim/kgsl/host_kernels.hpp"

#include "base/error.hpp"
#include "drivers/hostcode/elf_loader.hpp"
#include "drivers/hostcode/host_program.h"
#include "drivers/hostcode/kernel_abi.h"
#include "drivers/hostcode/thread_pool.hpp"
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

struct Launch {
    baregpu_kernel_fn fn;
    const void* kernargs;
    uint32_t grid[3], block[3];
    std::byte* shared;
};

void run_workgroup(void* context, uint64_t index, unsigned thread) {
    auto* l = static_cast<Launch*>(context);
    baregpu_dispatch d;
    uint64_t gx = l->grid[0], gy = l->grid[1];
    d.group_id[0] = uint32_t(index % gx);
    d.group_id[1] = uint32_t((index / gx) % gy);
    d.group_id[2] = uint32_t(index / (gx * gy));
    std::memcpy(d.grid, l->grid, sizeof d.grid);
    std::memcpy(d.block, l->block, sizeof d.block);
    d.thread = thread;
    d.shared = l->shared + size_t(thread) * kSharedBytes;
    l->fn(l->kernargs, &d);
}
}  // namespace

struct HostKernels::Image {
    Image(hostcode::ElfObject o, void* m, size_t b) : object(std::move(o)), memory(m), bytes(b) {}
    ~Image() { ::munmap(memory, bytes); }
    Image(const Image&) = delete;
    Image& operator=(const Image&) = delete;
    hostcode::ElfObject object;
    void* memory;
    size_t bytes;
};

HostKernels::HostKernels() = default;
HostKernels::~HostKernels() = default;

std::shared_ptr<HostKernels::Image> HostKernels::load(SimKgsl& device, uint64_t image_va, uint64_t image_size, uint64_t image_hash,
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
        hostcode::ElfObject object = hostcode::ElfObject::parse(bytes, "sim-kgsl", "host program");
        const auto& layout = object.layout();
        void* mem = ::mmap(nullptr, layout.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) {
            what = "out of host memory for a kernel image";
            return nullptr;
        }
        auto image = std::make_shared<Image>(std::move(object), mem, layout.size);
        static const hostcode::Import imports[] = {
            {"memcpy", reinterpret_cast<uint64_t>(&::memcpy)},
            {"memmove", reinterpret_cast<uint64_t>(&::memmove)},
            {"memset", reinterpret_cast<uint64_t>(&::memset)},
            {"memcmp", reinterpret_cast<uint64_t>(&::memcmp)},
        };
        auto* base = static_cast<std::byte*>(mem);
        image->object.link(std::span(base, layout.size), reinterpret_cast<uint64_t>(base), imports);
        ::mprotect(base + layout.exec_begin, layout.ro_begin - layout.exec_begin, PROT_READ | PROT_EXEC);
        ::mprotect(base + layout.ro_begin, layout.rw_begin - layout.ro_begin, PROT_READ);
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
    std::shared_ptr<Image> image = load(device, d.image_va, d.image_size, d.image_hash, what);
    if (!image) return what;
    const hostcode::KernelEntry* k = nullptr;
    for (const auto& e : image->object.kernels()) {
        if (e.name == d.kernel) k = &e;
    }
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
    if (!pool_) {
        pool_ = std::make_unique<hostcode::ThreadPool>(std::max(1u, std::thread::hardware_concurrency()));
        shared_.resize(size_t(pool_->threads()) * kSharedBytes);
    }
    Launch launch{reinterpret_cast<baregpu_kernel_fn>(reinterpret_cast<uint64_t>(image->memory) + k->offset), constants.data(),
                  {grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]}, shared_.data()};
    pool_->run(uint64_t(grid[0]) * grid[1] * grid[2], run_workgroup, &launch);
    return "";
}

}  // namespace baregpu::sim::kgsl
