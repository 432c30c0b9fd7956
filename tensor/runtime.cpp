#include "tensor/runtime.hpp"

#include "base/error.hpp"
#include "compiler/scheduler.hpp"
#include "hcq/registry.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <unordered_set>
#include <vector>

namespace baregpu::tensor {

using compiler::DType;
using compiler::NodeRef;

namespace {
std::mutex registry_mutex;
std::map<const hcq::Device*, std::weak_ptr<Runtime>> runtimes;
std::weak_ptr<Runtime> default_one;
}  // namespace

std::shared_ptr<Runtime> Runtime::for_device(const std::shared_ptr<hcq::Device>& device) {
    std::lock_guard lock(registry_mutex);
    if (auto rt = runtimes[device.get()].lock()) return rt;
    auto rt = std::make_shared<Runtime>(device);
    runtimes[device.get()] = rt;
    return rt;
}

std::shared_ptr<Runtime> Runtime::default_runtime() {
    {
        std::lock_guard lock(registry_mutex);
        if (auto rt = default_one.lock()) return rt;
    }
    auto rt = for_device(hcq::open_device());
    std::lock_guard lock(registry_mutex);
    default_one = rt;
    return rt;
}

namespace {

// The compiler for what the device runs: the host (x86-64 devices) or an AMDGPU code object for the
// device's gfx target.
compiler::Compiler compiler_for(const hcq::Device& device) {
    const std::string& arch = device.arch();
    if (arch == "x86_64") return compiler::Compiler();
    if (arch.rfind("gfx", 0) == 0)
        return compiler::Compiler(compiler::Target{"amdgcn-amd-amdhsa", arch, ""},
                                  compiler::KernelCache(compiler::KernelCache::default_directory()));
    throw UnsupportedError(device.name(), fmt::format("the compiler generates code for x86_64 and AMDGPU (gfx*) devices only so far; "
                                                      "this device runs {}", arch));
}

}  // namespace

Runtime::Runtime(std::shared_ptr<hcq::Device> device) : device_(std::move(device)), compiler_(compiler_for(*device_)) {
    if (const char* search = std::getenv("BAREGPU_TILE_SEARCH"); search && *search) {
        const std::string v = search;
        if (v != "0" && v != "1") throw Error("", fmt::format("BAREGPU_TILE_SEARCH={}: expected 1 (search tile shapes) or 0", v));
        tile_search_ = v == "1";
    }
}

Runtime::~Runtime() {
    std::lock_guard lock(registry_mutex);
    auto it = runtimes.find(device_.get());
    if (it != runtimes.end() && it->second.expired()) runtimes.erase(it);
}

std::optional<compiler::TileShape> Runtime::choose_tile(const compiler::Kernel& kernel, const TimeLaunch& time) {
    std::vector<compiler::TileShape> candidates = compiler_.tile_candidates(kernel);
    if (candidates.empty()) return std::nullopt;
    if (auto cached = compiler_.cached_tile(kernel)) {
        tile_reused_.fetch_add(1);
        return cached;
    }
    std::optional<compiler::TileShape> best;
    double best_s = 0;
    for (const compiler::TileShape& tile : candidates) {
        auto [compiled, program] = compile_and_load(kernel, tile);
        compile_ms_ += compiled.compile_ms;
        time(*program, tile);  // warm-up: caches, page faults of the stack
        double s = std::min(time(*program, tile), time(*program, tile));
        if (!best || s < best_s) {
            best = tile;
            best_s = s;
        }
    }
    compiler_.store_tile(kernel, *best);
    tile_searches_.fetch_add(1);
    return best;
}

std::pair<compiler::CompiledKernel, std::shared_ptr<hcq::Program>> Runtime::compile_and_load(const compiler::Kernel& kernel,
                                                                                           const compiler::TileShape& tile) {
    compiler::CompiledKernel compiled = compiler_.compile(kernel, false, tile);
    try {
        return {compiled, device_->load_program(compiled.object, compiled.name)};
    } catch (const Error&) {
        if (!compiled.from_cache) throw;
        // An object the device refuses although its checksum matched (another version's): generate anew.
        compiled = compiler_.compile(kernel, true, tile);
        return {compiled, device_->load_program(compiled.object, compiled.name)};
    }
}

std::pair<std::shared_ptr<hcq::Program>, compiler::TileShape> Runtime::program_for(const compiler::Kernel& kernel, const TimeLaunch& time) {
    std::string key = compiler_.cache_key(kernel);
    if (auto it = programs_.find(key); it != programs_.end()) return it->second;
    compiler::TileShape tile;
    if (tile_search_.load()) tile = choose_tile(kernel, time).value_or(compiler::TileShape{});
    auto [compiled, program] = compile_and_load(kernel, tile);
    compile_ms_ += compiled.compile_ms;
    programs_.emplace(std::move(key), std::pair{program, tile});
    loaded_.fetch_add(1);
    return {program, tile};
}

double Runtime::compile_ms() const {
    std::lock_guard lock(mutex_);
    return compile_ms_;
}

void Runtime::resolve_pending(const NodeRef& node) {
    std::vector<compiler::Node*> stack{node.get()};
    std::unordered_set<const compiler::Node*> seen;
    while (!stack.empty()) {
        compiler::Node* n = stack.back();
        stack.pop_back();
        if (!seen.insert(n).second) continue;
        {
            // One thread runs a node's transfer; another one asking meanwhile waits for it. Recursive:
            // the transfer realizes the source graph, which may hold transfers of its own.
            static std::recursive_mutex pending_mutex;
            std::lock_guard lock(pending_mutex);
            if (n->pending) {
                auto pending = std::move(n->pending);
                n->pending = nullptr;
                pending(*n);
            }
        }
        if (n->realized) continue;
        for (const NodeRef& s : n->src) stack.push_back(s.get());
    }
}

NodeRef Runtime::import(const NodeRef& src, std::shared_ptr<Runtime> from) {
    if (from.get() == this) return src;
    NodeRef node = compiler::Node::make_buffer({}, src->dtype, src->shape);
    node->pending = [this, src, from = std::move(from)](compiler::Node& self) {
        from->realize(src);
        from->device().synchronize();
        uint64_t bytes = uint64_t(compiler::numel(src->shape)) * compiler::dtype_bytes(src->dtype);
        hcq::Buffer dst = device_->allocate(std::max<uint64_t>(bytes, 4));
        if (bytes) {
            try {
                hcq::Device::transfer(dst.view(0, bytes), src->realized.view(0, bytes), bytes);
            } catch (const UnsupportedError&) {
                // Different peer groups (or no copy engine): through host memory.
                std::vector<std::byte> host(bytes);
                from->device().copy_out(host, src->realized.view(0, bytes));
                device_->copy_in(dst.view(0, bytes), host);
            }
        }
        self.realized = std::move(dst);
        transfers_.fetch_add(1);
    };
    return node;
}

void Runtime::realize(const NodeRef& node) {
    resolve_pending(node);
    std::lock_guard lock(mutex_);
    for (compiler::ScheduleItem& item : compiler::schedule(node)) {
        if (!item.kernel) {
            item.output->realized = item.inputs[0]->realized;
            item.output->release = item.inputs[0]->release;
            continue;
        }
        const compiler::Kernel& k = *item.kernel;
        uint64_t bytes = std::max<uint64_t>(uint64_t(k.output_elements()) * compiler::dtype_bytes(k.output_dtype), 4);
        auto made = output_buffer(bytes);  // not a structured binding: `submit` captures `out` (clang 14)
        hcq::Buffer& out = made.first;
        item.output->release = std::move(made.second);
        if (k.output_elements() == 0) {  // nothing to compute
            item.output->realized = std::move(out);
            continue;
        }
        // GPU code (a required block): workgroups of that block, as many as the kernel's schedule
        // asks (Kernel::gpu_workgroups: one per output row or one work-item per element). CPU code:
        // about 16K element-operations per workgroup of one thread, at most one group per output element.
        hcq::Dim3 block{1};
        uint32_t groups = 0;
        auto launch_shape = [&](const hcq::Program& program, const compiler::TileShape& tile) {
            const auto& required = program.info().required_block;
            if (required[0] != 0) {
                block = hcq::Dim3{required[0], required[1], required[2]};
                groups = uint32_t(k.gpu_workgroups(required[0], tile));
            } else {
                block = hcq::Dim3{1};
                int64_t work = k.output_elements() * k.reduce_elements();
                groups = uint32_t(std::clamp<int64_t>(work / 16384, 1, std::min<int64_t>(k.output_elements(), 256)));
            }
        };
        // Submit `program` (compiled with `tile`) on the timeline, between the device timestamps
        // `begin` and `end` when given; the value that says it finished.
        auto submit = [&](hcq::Program& program, const compiler::TileShape& tile, const hcq::Signal* begin, const hcq::Signal* end) {
            launch_shape(program, tile);
            hcq::KernelArgs args(program);
            args.buffer(0, out);
            for (size_t i = 0; i < item.inputs.size(); ++i) args.buffer(uint32_t(i + 1), item.inputs[i]->realized);
            std::lock_guard submitting(device_->submission_mutex());
            if (!queue_) queue_.emplace(device_->compute_queue());
            queue_->reset();
            uint64_t v = device_->next_timeline();
            hcq::ComputeQueue& q = queue_->wait(device_->timeline(), v - 1);
            if (begin) q.timestamp(*begin);
            q.exec(program, args, hcq::Dim3{groups}, block);
            if (end) q.timestamp(*end);
            q.signal(device_->timeline(), v).submit();
            return v;
        };
        auto time = [&](hcq::Program& program, const compiler::TileShape& tile) {
            device_->synchronize();  // what came before is not this kernel's time
            if (program.info().required_block[0] != 0 && device_->timestamp_frequency() > 0) {
                // GPU code: the device's clock around the launch, without the host's submission and
                // wait (a simulated chip's clock advances by its modelled time, not the interpreter's).
                hcq::Signal begin = device_->new_signal(0, "tile search: launch begins");
                hcq::Signal end = device_->new_signal(0, "tile search: launch ends");
                device_->timeline().wait(submit(program, tile, &begin, &end));
                return double(end.timestamp() - begin.timestamp()) / double(device_->timestamp_frequency());
            }
            auto start = std::chrono::steady_clock::now();
            device_->timeline().wait(submit(program, tile, nullptr, nullptr));
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        };
        auto [program, tile] = program_for(k, time);
        submit(*program, tile, nullptr, nullptr);
        launched_.fetch_add(1);
        item.output->realized = std::move(out);
    }
}

std::pair<hcq::Buffer, std::shared_ptr<void>> Runtime::output_buffer(uint64_t bytes) {
    hcq::Buffer buffer;
    {
        std::lock_guard lock(pool_->mutex);
        if (auto it = pool_->free.find(bytes); it != pool_->free.end()) {
            buffer = std::move(it->second);
            pool_->free.erase(it);
            pool_->bytes -= bytes;
        }
    }
    if (!buffer) buffer = device_->allocate(bytes);
    std::weak_ptr<BufferPool> pool = pool_;
    std::shared_ptr<void> release(nullptr, [pool, buffer, bytes](void*) noexcept {
        auto p = pool.lock();
        if (!p) return;  // the runtime is gone: the buffer is simply freed
        try {
            std::lock_guard lock(p->mutex);
            if (p->bytes + bytes > BufferPool::kMaxBytes) return;
            p->free.emplace(bytes, buffer);
            p->bytes += bytes;
        } catch (...) {
            // Out of memory for the pool's entry: the buffer is freed instead.
        }
    });
    return {std::move(buffer), std::move(release)};
}

NodeRef Runtime::upload(std::span<const std::byte> bytes, DType dtype, compiler::Shape shape) {
    uint64_t expect = uint64_t(compiler::numel(shape)) * compiler::dtype_bytes(dtype);
    if (bytes.size() != expect) {
        throw Error(device_->name(), fmt::format("upload: {} bytes given for {} {} ({} bytes expected)", bytes.size(),
                                                 compiler::dtype_name(dtype), compiler::shape_string(shape), expect));
    }
    hcq::Buffer buffer = device_->allocate(std::max<uint64_t>(expect, 4));
    if (expect) device_->copy_in(buffer.view(0, expect), bytes);
    return compiler::Node::make_buffer(std::move(buffer), dtype, std::move(shape));
}

void Runtime::read(const NodeRef& node, std::span<std::byte> out) {
    uint64_t expect = uint64_t(compiler::numel(node->shape)) * compiler::dtype_bytes(node->dtype);
    if (out.size() != expect) {
        throw Error(device_->name(), fmt::format("read: a {}-byte destination for {} {} ({} bytes)", out.size(),
                                                 compiler::dtype_name(node->dtype), compiler::shape_string(node->shape), expect));
    }
    realize(node);
    device_->synchronize();
    if (expect) device_->copy_out(out, node->realized.view(0, expect));
}

}  // namespace baregpu::tensor
