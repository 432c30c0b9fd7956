// Graphs: a sequence of kernel launches and copies over one or more devices, recorded once into
// bound queues and replayed many times. A replay binds new input buffers and variable values by
// patching only the recorded words whose value changed, reserves each device's next timeline
// value, and submits one pointer per queue.
//
//   Graph g;
//   GraphBuffer x = g.input(dev, bytes);                      // bound at each replay
//   g.exec(*prg, {x, scratch}, {GraphValue::variable(0)}, grid, block);
//   g.copy(out, scratch, bytes);
//   g.finalize();
//   g.replay({{xbuf}}, {{n}});                                 // returns once submitted
//   g.wait();
//
// Dependencies come from the buffers nodes touch, by byte range: an exec reads and writes every
// buffer it is given, a copy reads its source and writes its destination. Nodes on one queue run
// in order; a node that depends on a node of another queue (or device) waits on that queue's
// signal, and waits already implied by an earlier wait are not recorded again. Inputs are
// assumed not to alias each other or the graph's own buffers.
//
// Replays are double-buffered: the graph keeps two recorded instances, so replay N+1 is patched
// and submitted while replay N runs (it starts once N finished on every device of the graph).
// Every queue of a replay waits for the previous replay on all the graph's devices; each
// device's timeline covers the replay when it is done.
#pragma once

#include "hcq/device.hpp"
#include "hcq/queue.hpp"

#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

namespace baregpu::hcq {

// A buffer as a graph node names it: a concrete buffer (or a view of one), or an input bound at
// each replay (or a range of one).
class GraphBuffer {
public:
    GraphBuffer(const Buffer& buffer) : buffer_(buffer), device_(&buffer.device()), size_(buffer.size()) {}  // NOLINT: implicit
    // [offset, offset + size) of this buffer. Throws std::out_of_range outside it.
    GraphBuffer view(uint64_t offset, uint64_t size) const;

    bool is_input() const { return input_ >= 0; }
    int input() const { return input_; }
    uint64_t offset() const { return offset_; }
    uint64_t size() const { return size_; }
    Device& device() const { return *device_; }
    const Buffer& buffer() const { return buffer_; }

private:
    friend class Graph;
    GraphBuffer(int input, Device& device, uint64_t size) : device_(&device), input_(input), size_(size) {}
    Buffer buffer_;
    Device* device_ = nullptr;
    int input_ = -1;
    uint64_t offset_ = 0;  // into an input
    uint64_t size_ = 0;
};

// A 32-bit kernel value: a constant, or variable i set at each replay.
class GraphValue {
public:
    GraphValue(uint32_t constant) : value_(constant) {}  // NOLINT: implicit
    static GraphValue variable(uint32_t index) {
        GraphValue v(0);
        v.variable_ = int(index);
        return v;
    }
    bool is_variable() const { return variable_ >= 0; }
    int variable() const { return variable_; }
    uint32_t value() const { return value_; }

private:
    uint32_t value_ = 0;
    int variable_ = -1;
};

class Graph {
public:
    struct Stats {
        uint64_t replays = 0;
        uint64_t patched_words = 0;    // recorded words rewritten by replays, in total
        uint64_t last_patched = 0;     // by the last replay
        size_t nodes = 0;
        size_t queues = 0;             // per instance
        size_t waits = 0;              // cross-queue waits recorded per instance (after pruning)
    };

    Graph();
    ~Graph();  // waits for the last replay
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;

    // Declares input i (i = declaration order) of `size` bytes, used on `device`.
    GraphBuffer input(Device& device, uint64_t size);
    // Returns the node index. Throws std::invalid_argument on counts that do not match the
    // kernel, std::logic_error after finalize().
    uint32_t exec(const Program& program, std::initializer_list<GraphBuffer> buffers, std::initializer_list<GraphValue> values,
                  Dim3 grid, Dim3 block);
    // `engine`: the device whose copy engine runs it (default: the source's device; the other
    // side is mapped into it).
    uint32_t copy(const GraphBuffer& dst, const GraphBuffer& src, uint64_t size, Device* engine = nullptr);

    // Record and bind the queues (both instances). No nodes may be added afterwards.
    void finalize();
    // One run. inputs[i] binds input i (at least as large as declared); variables[j] sets
    // variable j. Throws std::invalid_argument on missing or small inputs, and what submit
    // throws (DeviceLostError, TimeoutError).
    void replay(std::span<const Buffer> inputs = {}, std::span<const uint32_t> variables = {});
    // Wait until the last replay finished on every device.
    void wait(Duration timeout = default_timeout());

    const Stats& stats() const { return stats_; }

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    Stats stats_;
};

}  // namespace baregpu::hcq
