#include "drivers/hostcode/grid_launcher.hpp"

#include <algorithm>
#include <thread>

namespace baregpu::hostcode {

namespace {

struct Launch {
    baregpu_kernel_fn fn;
    const void* args;
    std::array<uint32_t, 3> grid, block;
    std::byte* shared;
    uint64_t shared_stride;
};

void run_workgroup(void* context, uint64_t g, unsigned thread) {
    const Launch& l = *static_cast<const Launch*>(context);
    baregpu_dispatch d{};
    d.group_id[0] = static_cast<uint32_t>(g % l.grid[0]);
    d.group_id[1] = static_cast<uint32_t>(g / l.grid[0] % l.grid[1]);
    d.group_id[2] = static_cast<uint32_t>(g / (uint64_t{l.grid[0]} * l.grid[1]));
    for (int i = 0; i < 3; ++i) {
        d.grid[i] = l.grid[i];
        d.block[i] = l.block[i];
    }
    d.thread = thread;
    d.shared = l.shared_stride != 0 ? l.shared + uint64_t{thread} * l.shared_stride : nullptr;
    l.fn(l.args, &d);
}

}  // namespace

void GridLauncher::run(baregpu_kernel_fn fn, const void* args, std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block,
                       uint32_t shared_bytes) {
    const uint64_t groups = uint64_t{grid[0]} * grid[1] * grid[2];
    if (groups == 0) return;
    if (!pool_) pool_ = std::make_unique<ThreadPool>(std::max(1u, std::thread::hardware_concurrency()));
    const uint64_t stride = (uint64_t{shared_bytes} + 63) / 64 * 64;
    if (shared_.size() < stride * pool_->threads() + 64) shared_.resize(stride * pool_->threads() + 64);
    auto* base = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(shared_.data()) + 63) & ~uintptr_t{63});
    Launch launch{fn, args, grid, block, base, stride};
    pool_->run(groups, run_workgroup, &launch);
}

}  // namespace baregpu::hostcode
