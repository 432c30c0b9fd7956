// Runs the lazy graph on one hcq::Device: schedules what a realize() needs, compiles each
// kernel once (memory cache here, disk cache in the compiler), launches it on the device's
// timeline, and moves host data in and out.
#pragma once

#include "compiler/compiler.hpp"
#include "compiler/graph.hpp"
#include "hcq/device.hpp"

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

namespace baregpu::tensor {

class Runtime {
public:
    // The runtime of `device` (one per device while any tensor uses it).
    static std::shared_ptr<Runtime> for_device(const std::shared_ptr<hcq::Device>& device);
    // The runtime of hcq::open_device()'s default ($BAREGPU_DEVICE, else the first GPU that opens, else
    // cpu). The application registers backends with hcq's registry before (drivers/registry.hpp).
    static std::shared_ptr<Runtime> default_runtime();

    explicit Runtime(std::shared_ptr<hcq::Device> device);
    ~Runtime();
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

    hcq::Device& device() { return *device_; }
    compiler::Compiler& compiler() { return compiler_; }

    // Compute `node` and everything it needs that is not realized yet (asynchronously: the
    // device runs the kernels; read() waits).
    void realize(const compiler::NodeRef& node);
    // A node of this runtime's device holding `src`'s elements (a node of another runtime `from`),
    // lazily: nothing moves until something on this runtime reads the node. Then `src` is
    // realized on `from`, and its data copied with hcq::Device::transfer (devices of one peer
    // group), else through host memory (copy_out, copy_in).
    compiler::NodeRef import(const compiler::NodeRef& src, std::shared_ptr<Runtime> from);
    // A realized node holding a copy of `bytes` (numel(shape) elements of dtype).
    compiler::NodeRef upload(std::span<const std::byte> bytes, compiler::DType dtype, compiler::Shape shape);
    // Realize `node` and copy its elements into `out` (exactly numel * dtype_bytes).
    void read(const compiler::NodeRef& node, std::span<std::byte> out);

    // Kernels launched so far (fusion is observable: one fused chain is one launch).
    uint64_t kernels_launched() const { return launched_.load(); }
    // Distinct kernels this runtime compiled or took from the disk cache.
    uint64_t kernels_loaded() const { return loaded_.load(); }
    // Milliseconds spent generating code (first calls that missed the disk cache), in total.
    double compile_ms() const;

    // The tile search (compiler::Compiler::tile_candidates): when on, the first launch of a
    // matmul kernel (the CPU's register-blocked one, or a GPU's LDS-tiled one) compiles it with
    // each candidate tile shape, times each on this device with the launch's own buffers (one
    // warm-up, best of two; GPU code by the device's timestamps around the launch, which on a
    // chip that interprets its code are the modelled time), and keeps the fastest;
    // the choice is cached on disk next to the kernel cache (Compiler::store_tile) and reused
    // without timing by later runtimes and processes. Off by default; on when the environment
    // has BAREGPU_TILE_SEARCH=1 at construction, or by set_tile_search(true).
    void set_tile_search(bool on) { tile_search_.store(on); }
    bool tile_search() const { return tile_search_.load(); }
    // Kernels whose tile shape was searched (timed), and taken from the disk cache instead.
    uint64_t tile_searches() const { return tile_searches_.load(); }
    uint64_t tile_choices_reused() const { return tile_reused_.load(); }
    // Tensors moved in from other devices (import) so far.
    uint64_t transfers_in() const { return transfers_.load(); }

private:
    // Kernel outputs no node needs any more, by size, kept mapped for the next output of the
    // same size. A fresh allocation costs a page fault and the OS zeroing each page on first
    // touch, which costs more than a memory-bound kernel's own work: a 4096x4096 softmax spent
    // about 12 times as long in the kernel's page zeroing as in its loops. Reuse is safe
    // because every kernel runs in order on the device timeline: work submitted before a
    // buffer came back finishes before work submitted after it was handed out again.
    struct BufferPool {
        static constexpr uint64_t kMaxBytes = 512ull << 20;  // beyond this, freed outputs are unmapped
        std::mutex mutex;
        std::multimap<uint64_t, hcq::Buffer> free;
        uint64_t bytes = 0;
    };
    // A buffer of `bytes` for a kernel's output, and the token that returns it to the pool.
    std::pair<hcq::Buffer, std::shared_ptr<void>> output_buffer(uint64_t bytes);
    // Seconds one launch of a candidate program, compiled with a tile, takes (the tile search).
    using TimeLaunch = std::function<double(hcq::Program&, const compiler::TileShape&)>;
    // The kernel's program and the tile it was compiled with (its launch shape depends on it).
    std::pair<std::shared_ptr<hcq::Program>, compiler::TileShape> program_for(const compiler::Kernel& kernel, const TimeLaunch& time);
    // Run the `pending` transfers of the nodes `node` reads (Node::pending), outside mutex_.
    static void resolve_pending(const compiler::NodeRef& node);
    // Compiles `kernel` with `tile` (or reads it from the disk cache) and loads it; an object
    // from the cache the device refuses (another version's, a damaged file) is generated anew.
    std::pair<compiler::CompiledKernel, std::shared_ptr<hcq::Program>> compile_and_load(const compiler::Kernel& kernel,
                                                                                      const compiler::TileShape& tile);
    std::optional<compiler::TileShape> choose_tile(const compiler::Kernel& kernel, const TimeLaunch& time);

    std::shared_ptr<hcq::Device> device_;
    compiler::Compiler compiler_;
    mutable std::mutex mutex_;
    std::map<std::string, std::pair<std::shared_ptr<hcq::Program>, compiler::TileShape>> programs_;  // by the kernel's cache key
    std::optional<hcq::ComputeQueue> queue_;
    std::atomic<uint64_t> launched_{0};
    std::atomic<uint64_t> loaded_{0};
    std::atomic<bool> tile_search_{false};
    std::atomic<uint64_t> tile_searches_{0};
    std::atomic<uint64_t> tile_reused_{0};
    std::atomic<uint64_t> transfers_{0};
    double compile_ms_ = 0;  // under mutex_
    std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();  // destroyed before device_
};

}  // namespace baregpu::tensor
