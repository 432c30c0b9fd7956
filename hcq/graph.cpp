#include "hcq/graph.hpp"

#include "base/error.hpp"
#include "hcq/profiler.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

namespace baregpu::hcq {

GraphBuffer GraphBuffer::view(uint64_t offset, uint64_t size) const {
    if (offset > size_ || size > size_ - offset) {
        throw std::out_of_range(fmt::format("graph buffer view 0x{:x}+0x{:x} is outside 0x{:x} bytes", offset, size, size_));
    }
    GraphBuffer out = *this;
    if (is_input()) {
        out.offset_ = offset_ + offset;
    } else {
        out.buffer_ = buffer_.view(offset, size);
    }
    out.size_ = size;
    return out;
}

// Named, not anonymous: Graph::Impl holds these, and GCC warns (-Wsubobject-linkage) when a
// class with external linkage has members of internal types outside the main file (a unity build).
namespace graph_parts {

constexpr uint64_t kUnbound = ~uint64_t{0};

struct Node {
    enum class Kind { exec, copy } kind;
    const Program* program = nullptr;
    std::vector<GraphBuffer> buffers;  // exec: arguments; copy: {dst, src}
    std::vector<GraphValue> values;
    Dim3 grid, block;
    uint64_t size = 0;
    Device* device = nullptr;  // whose queue runs it
    int queue = -1;
    uint32_t pos = 0;  // index within its queue
    std::vector<uint32_t> deps;
    bool signal_after = false;
};

struct QueueSlot {
    Device* device;
    QueueKind kind;
    std::vector<uint32_t> nodes;
};

struct Site {
    uint32_t queue;
    CommandId id;
    uint32_t node;
    uint32_t index;  // exec: argument index
};

struct Instance {
    std::vector<std::unique_ptr<Queue>> queues;
    std::vector<Signal> out;                          // per queue
    std::vector<std::vector<CommandId>> timeline_waits;  // [queue][device]
    std::vector<std::pair<uint32_t, CommandId>> timeline_signals;  // [device] -> (queue, id)
    std::vector<std::vector<Site>> input_sites;       // [input]
    std::vector<std::vector<Site>> variable_sites;    // [variable]
    std::vector<uint64_t> bound_inputs;
    std::vector<uint64_t> bound_variables;  // kUnbound until first set
    std::vector<uint64_t> last_tv;          // [device], 0 = never replayed
};

}  // namespace graph_parts
using namespace graph_parts;

struct Graph::Impl {
    std::vector<Node> nodes;
    std::vector<std::pair<Device*, uint64_t>> inputs;  // declared device and size
    uint32_t variables = 0;
    std::vector<Device*> devices;
    std::vector<QueueSlot> queues;
    bool finalized = false;
    Instance instances[2];
    std::vector<uint64_t> last_tv;
    std::vector<Device*> lock_order;  // devices sorted by address: the order replays lock them in
    std::vector<uint64_t> tv;         // scratch for replay (no allocation per replay)

    size_t device_index(Device* d) {
        auto it = std::find(devices.begin(), devices.end(), d);
        if (it != devices.end()) return size_t(it - devices.begin());
        devices.push_back(d);
        return devices.size() - 1;
    }
    int queue_of(Device* d, QueueKind kind) {
        for (size_t i = 0; i < queues.size(); ++i) {
            if (queues[i].device == d && queues[i].kind == kind) return int(i);
        }
        queues.push_back({d, kind, {}});
        return int(queues.size() - 1);
    }
    uint64_t resolve(const GraphBuffer& b, std::span<const Buffer> bound) const {
        if (!b.is_input()) return b.buffer().address().value();
        return bound.empty() ? 0 : bound[size_t(b.input())].address().value() + b.offset();
    }
};

Graph::Graph() : impl_(std::make_unique<Impl>()) {}

Graph::~Graph() {
    try {
        if (stats_.replays) wait();
    } catch (...) {
        // The device failed; its queues are quarantined when they are destroyed.
    }
}

GraphBuffer Graph::input(Device& device, uint64_t size) {
    if (impl_->finalized) throw std::logic_error("graph: input() after finalize()");
    impl_->inputs.push_back({&device, size});
    return GraphBuffer(int(impl_->inputs.size() - 1), device, size);
}

uint32_t Graph::exec(const Program& program, std::initializer_list<GraphBuffer> buffers, std::initializer_list<GraphValue> values,
                     Dim3 grid, Dim3 block) {
    if (impl_->finalized) throw std::logic_error("graph: exec() after finalize()");
    const KernelInfo& k = program.info();
    if (buffers.size() != k.num_buffers || values.size() != k.num_values) {
        throw std::invalid_argument(fmt::format("graph: kernel '{}' takes {} buffers and {} values; got {} and {}", k.name, k.num_buffers,
                                                k.num_values, buffers.size(), values.size()));
    }
    Node n;
    n.kind = Node::Kind::exec;
    n.program = &program;
    n.buffers.assign(buffers.begin(), buffers.end());
    n.values.assign(values.begin(), values.end());
    n.grid = grid;
    n.block = block;
    n.device = &program.device();
    for (const GraphValue& v : values) {
        if (v.is_variable()) impl_->variables = std::max(impl_->variables, uint32_t(v.variable()) + 1);
    }
    impl_->nodes.push_back(std::move(n));
    return uint32_t(impl_->nodes.size() - 1);
}

uint32_t Graph::copy(const GraphBuffer& dst, const GraphBuffer& src, uint64_t size, Device* engine) {
    if (impl_->finalized) throw std::logic_error("graph: copy() after finalize()");
    if (size > dst.size() || size > src.size()) {
        throw std::out_of_range(fmt::format("graph: copy of 0x{:x} bytes from 0x{:x} into 0x{:x}", size, src.size(), dst.size()));
    }
    Node n;
    n.kind = Node::Kind::copy;
    n.buffers = {dst, src};
    n.size = size;
    n.device = engine ? engine : &src.device();
    impl_->nodes.push_back(std::move(n));
    return uint32_t(impl_->nodes.size() - 1);
}

void Graph::finalize() {
    Impl& g = *impl_;
    if (g.finalized) throw std::logic_error("graph: finalize() twice");
    if (g.nodes.empty()) throw std::logic_error("graph: nothing to finalize");

    // Queues and devices, in order of first use.
    for (Node& n : g.nodes) {
        g.device_index(n.device);
        for (const GraphBuffer& b : n.buffers) g.device_index(&b.device());
        n.queue = g.queue_of(n.device, n.kind == Node::Kind::exec ? QueueKind::compute : QueueKind::copy);
        n.pos = uint32_t(g.queues[size_t(n.queue)].nodes.size());
        g.queues[size_t(n.queue)].nodes.push_back(uint32_t(&n - g.nodes.data()));
    }
    // Every device's compute queue closes the replay on that device (the timeline signal).
    for (Device* d : std::vector<Device*>(g.devices)) g.queue_of(d, QueueKind::compute);

    // Dependencies by byte range: read-after-write, write-after-write, write-after-read.
    struct Access {
        uint64_t key;
        uint64_t begin, end;
        uint32_t node;
        bool write;
    };
    std::vector<Access> history;
    for (uint32_t i = 0; i < g.nodes.size(); ++i) {
        Node& n = g.nodes[i];
        std::vector<Access> mine;
        for (size_t b = 0; b < n.buffers.size(); ++b) {
            const GraphBuffer& gb = n.buffers[b];
            uint64_t key = gb.is_input() ? (1ull << 63) | uint64_t(gb.input()) : gb.buffer().allocation_id();
            uint64_t begin = gb.is_input() ? gb.offset() : gb.buffer().offset();
            uint64_t len = n.kind == Node::Kind::copy ? n.size : gb.size();
            bool write = n.kind == Node::Kind::exec || b == 0;
            mine.push_back({key, begin, begin + len, i, write});
        }
        std::set<uint32_t> deps;
        for (const Access& a : mine) {
            for (const Access& h : history) {
                if (h.key == a.key && h.begin < a.end && a.begin < h.end && (h.write || a.write)) deps.insert(h.node);
            }
        }
        n.deps.assign(deps.begin(), deps.end());
        for (uint32_t d : n.deps) {
            if (g.nodes[d].queue != n.queue) g.nodes[d].signal_after = true;
        }
        history.insert(history.end(), mine.begin(), mine.end());
    }
    // The epilogues wait for every queue's last node.
    for (QueueSlot& q : g.queues) {
        if (!q.nodes.empty()) g.nodes[q.nodes.back()].signal_after = true;
    }

    const size_t nq = g.queues.size(), nd = g.devices.size();
    stats_.nodes = g.nodes.size();
    stats_.queues = nq;
    for (int which = 0; which < 2; ++which) {
        Instance& inst = g.instances[which];
        inst.timeline_waits.assign(nq, {});
        inst.timeline_signals.assign(nd, {0, CommandId(0)});
        inst.input_sites.assign(g.inputs.size(), {});
        inst.variable_sites.assign(g.variables, {});
        inst.bound_inputs.assign(g.inputs.size(), kUnbound);
        inst.bound_variables.assign(g.variables, kUnbound);
        inst.last_tv.assign(nd, 0);
        for (size_t q = 0; q < nq; ++q) {
            inst.out.push_back(g.queues[q].device->new_signal(0, fmt::format("graph queue {} ({} {})", q, g.queues[q].device->name(),
                                                                            to_string(g.queues[q].kind))));
        }
        size_t waits = 0;
        std::vector<std::vector<uint64_t>> waited(nq, std::vector<uint64_t>(nq, 0));
        for (size_t q = 0; q < nq; ++q) {
            QueueSlot& slot = g.queues[q];
            std::unique_ptr<Queue> queue;
            ComputeQueue* cq = nullptr;
            CopyQueue* kq = nullptr;
            if (slot.kind == QueueKind::compute) {
                auto p = std::make_unique<ComputeQueue>(slot.device->compute_queue());
                cq = p.get();
                queue = std::move(p);
            } else {
                auto p = std::make_unique<CopyQueue>(slot.device->copy_queue());
                kq = p.get();
                queue = std::move(p);
            }
            auto wait = [&](const Signal& s, uint64_t v) {
                if (cq) cq->wait(s, v);
                if (kq) kq->wait(s, v);
                return queue->last();
            };
            auto signal = [&](const Signal& s, uint64_t v) {
                if (cq) cq->signal(s, v);
                if (kq) kq->signal(s, v);
                return queue->last();
            };
            // Prologue: the previous replay finished on every device.
            for (Device* d : g.devices) inst.timeline_waits[q].push_back(wait(d->timeline(), 0));
            for (uint32_t ni : slot.nodes) {
                Node& n = g.nodes[ni];
                for (uint32_t di : n.deps) {
                    const Node& dep = g.nodes[di];
                    if (dep.queue == int(q)) continue;  // in order on this queue
                    uint64_t v = dep.pos + 1;
                    if (waited[q][size_t(dep.queue)] >= v) continue;
                    wait(inst.out[size_t(dep.queue)], v);
                    waited[q][size_t(dep.queue)] = v;
                    ++waits;
                }
                if (n.kind == Node::Kind::exec) {
                    KernelArgs args(*n.program);
                    for (uint32_t b = 0; b < n.buffers.size(); ++b) {
                        const GraphBuffer& gb = n.buffers[b];
                        if (gb.is_input()) {
                            inst.input_sites[size_t(gb.input())].push_back({uint32_t(q), CommandId(0), ni, b});
                        } else {
                            if (&gb.device() != slot.device) slot.device->map_peer(gb.buffer());
                            args.buffer(b, gb.buffer());
                        }
                    }
                    for (uint32_t v = 0; v < n.values.size(); ++v) {
                        if (n.values[v].is_variable()) {
                            inst.variable_sites[size_t(n.values[v].variable())].push_back({uint32_t(q), CommandId(0), ni, v});
                        } else {
                            args.value(v, n.values[v].value());
                        }
                    }
                    cq->exec(*n.program, args, n.grid, n.block);
                } else {
                    for (const GraphBuffer& gb : n.buffers) {
                        if (!gb.is_input() && &gb.device() != slot.device) slot.device->map_peer(gb.buffer());
                    }
                    kq->copy(GpuVirtualAddress(g.resolve(n.buffers[0], {})), GpuVirtualAddress(g.resolve(n.buffers[1], {})), n.size);
                    for (uint32_t b = 0; b < 2; ++b) {
                        if (n.buffers[b].is_input()) inst.input_sites[size_t(n.buffers[b].input())].push_back({uint32_t(q), CommandId(0), ni, b});
                    }
                }
                CommandId id = queue->last();
                for (auto& sites : inst.input_sites) {
                    for (Site& s : sites) {
                        if (s.node == ni && s.queue == q) s.id = id;
                    }
                }
                for (auto& sites : inst.variable_sites) {
                    for (Site& s : sites) {
                        if (s.node == ni && s.queue == q) s.id = id;
                    }
                }
                if (n.signal_after) signal(inst.out[q], n.pos + 1);
            }
            // Epilogue on a device's compute queue: every other queue is done, then the timeline.
            if (slot.kind == QueueKind::compute) {
                for (size_t b = 0; b < nq; ++b) {
                    uint64_t v = g.queues[b].nodes.size();
                    if (b == q || v == 0 || waited[q][b] >= v) continue;
                    wait(inst.out[b], v);
                    waited[q][b] = v;
                    ++waits;
                }
                size_t d = size_t(std::find(g.devices.begin(), g.devices.end(), slot.device) - g.devices.begin());
                inst.timeline_signals[d] = {uint32_t(q), signal(slot.device->timeline(), 0)};
            }
            queue->bind();
            inst.queues.push_back(std::move(queue));
        }
        stats_.waits = waits;
    }
    g.last_tv.assign(nd, 0);
    g.tv.assign(nd, 0);
    g.lock_order = g.devices;
    std::sort(g.lock_order.begin(), g.lock_order.end());
    g.finalized = true;
}

void Graph::replay(std::span<const Buffer> inputs, std::span<const uint32_t> variables) {
    Impl& g = *impl_;
    if (!g.finalized) throw std::logic_error("graph: replay() before finalize()");
    if (inputs.size() < g.inputs.size() || variables.size() < g.variables) {
        throw std::invalid_argument(fmt::format("graph: replay needs {} inputs and {} variables; got {} and {}", g.inputs.size(),
                                                g.variables, inputs.size(), variables.size()));
    }
    for (size_t i = 0; i < g.inputs.size(); ++i) {
        if (!inputs[i] || &inputs[i].device() != g.inputs[i].first || inputs[i].size() < g.inputs[i].second) {
            throw std::invalid_argument(fmt::format("graph: input {} must be a buffer of at least 0x{:x} bytes on {}", i,
                                                    g.inputs[i].second, g.inputs[i].first->name()));
        }
    }
    ProfileHostSpan span("graph replay");
    Instance& inst = g.instances[stats_.replays % 2];
    const size_t nd = g.devices.size();
    // This instance's previous run (two replays ago) must be done before its words change.
    for (size_t d = 0; d < nd; ++d) {
        if (inst.last_tv[d]) g.devices[d]->timeline().wait(inst.last_tv[d]);
    }
    // Reserving timeline values and submitting must not interleave with other submitters.
    struct Locks {
        const std::vector<Device*>& devices;
        size_t held = 0;
        explicit Locks(const std::vector<Device*>& d) : devices(d) {
            for (Device* dev : devices) {
                dev->submission_mutex().lock();
                ++held;
            }
        }
        ~Locks() {
            while (held) devices[--held]->submission_mutex().unlock();
        }
    } locks(g.lock_order);

    uint64_t patched = 0;
    for (size_t i = 0; i < g.inputs.size(); ++i) {
        uint64_t address = inputs[i].address().value();
        if (inst.bound_inputs[i] == address) continue;
        for (const Site& s : inst.input_sites[i]) {
            const Node& n = g.nodes[s.node];
            Queue& q = *inst.queues[s.queue];
            if (&inputs[i].device() != &q.device()) q.device().map_peer(inputs[i]);
            GpuVirtualAddress at(g.resolve(n.buffers[s.index], inputs));
            if (n.kind == Node::Kind::exec) {
                q.update_exec_address(s.id, s.index, at);
            } else if (s.index == 0) {
                q.update_copy_dst(s.id, at);
            } else {
                q.update_copy_src(s.id, at);
            }
            patched += 1;
        }
        inst.bound_inputs[i] = address;
    }
    for (size_t v = 0; v < g.variables; ++v) {
        if (inst.bound_variables[v] == variables[v]) continue;
        for (const Site& s : inst.variable_sites[v]) {
            inst.queues[s.queue]->update_exec_value(s.id, s.index, variables[v]);
            ++patched;
        }
        inst.bound_variables[v] = variables[v];
    }
    std::vector<uint64_t>& tv = g.tv;
    for (size_t d = 0; d < nd; ++d) tv[d] = g.devices[d]->next_timeline();
    try {
        for (size_t q = 0; q < inst.queues.size(); ++q) {
            for (size_t d = 0; d < nd; ++d) inst.queues[q]->update_wait_value(inst.timeline_waits[q][d], tv[d] - 1);
            patched += nd;
        }
        for (size_t d = 0; d < nd; ++d) {
            inst.queues[inst.timeline_signals[d].first]->update_signal_value(inst.timeline_signals[d].second, tv[d]);
            ++patched;
        }
        // Nothing of this instance runs now, so its signals restart from zero safely.
        for (Signal& s : inst.out) s.set(0);
        for (auto& q : inst.queues) q->submit();
    } catch (const std::exception& e) {
        // The timeline values reserved above will not all be signalled (some queues of this
        // replay never reached their device), so every later wait on these timelines would
        // hang. Say why now, on every device of the graph.
        for (size_t d = 0; d < nd; ++d) {
            g.devices[d]->fail(fmt::format("a graph replay was only partly submitted, so timeline value {} is never signalled: {}",
                                           tv[d], e.what()));
        }
        throw;
    }
    inst.last_tv = tv;
    g.last_tv = tv;
    stats_.replays += 1;
    stats_.patched_words += patched;
    stats_.last_patched = patched;
}

void Graph::wait(Duration timeout) {
    Impl& g = *impl_;
    for (size_t d = 0; d < g.devices.size(); ++d) {
        if (g.last_tv[d]) g.devices[d]->timeline().wait(g.last_tv[d], timeout);
    }
}

}  // namespace baregpu::hcq
