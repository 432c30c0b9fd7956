// The randomized HCQ sequence fuzzer: seeded and reproducible (BAREGPU_SEED=<n> replays one
// seed; BAREGPU_LONG=full runs many more and longer sequences). Random kernels and copies over
// buffers on one or two devices, on compute and copy queues, batched into submissions at random,
// sometimes bound, ordered only by the signal waits the fuzzer derives from byte-range
// dependencies, with host copies and checks in between. Every result is compared with a plain
// host model, so a missed dependency, a lost command or a wrong copy shows up as a mismatch.
#include "base/error.hpp"
#include "hcq/engine.hpp"
#include "hcq/graph.hpp"
#include "tests/hcq/support.hpp"

#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>

using namespace baregpu;
using namespace baregpu::hcq;

namespace {

struct Stream {
    Device* device;
    QueueKind kind;
    bool is_timeline;  // the device timeline (host copies and barriers advance it)
    Signal own;        // unused for timeline streams
    uint64_t recorded = 0;   // last value recorded to be signalled
    uint64_t submitted = 0;  // last value handed to the device
    std::optional<ComputeQueue> cq;
    std::optional<CopyQueue> kq;
    Queue* queue() { return cq ? static_cast<Queue*>(&*cq) : kq ? static_cast<Queue*>(&*kq) : nullptr; }
    const Signal& signal() const { return is_timeline ? device->timeline() : own; }
};

struct Access {
    uint64_t begin, end;
    size_t stream;
    uint64_t value;
    bool write;
};

struct FuzzBuffer {
    Device* device;
    Buffer buffer;
    std::vector<uint8_t> model;
    std::vector<Access> history;
};

class Fuzzer {
public:
    Fuzzer(uint64_t seed, std::vector<std::shared_ptr<Device>> devices) : rng_(seed), devices_(std::move(devices)) {
        for (auto& d : devices_) {
            programs_.push_back(test::load_kernel(*d, "mix", "mix"));
            streams_.push_back({d.get(), QueueKind::compute, false, d->new_signal(0, "fuzz compute"), 0, 0, {}, {}});
            streams_.push_back({d.get(), QueueKind::copy, false, d->new_signal(0, "fuzz copy"), 0, 0, {}, {}});
            streams_.push_back({d.get(), QueueKind::compute, true, Signal(), 0, 0, {}, {}});
        }
        int nbuf = 3 + int(rng_() % 5);
        for (int i = 0; i < nbuf; ++i) {
            Device* d = devices_[rng_() % devices_.size()].get();
            uint64_t words = 16 + rng_() % 3000;
            FuzzBuffer b{d, d->allocate(words * 4), std::vector<uint8_t>(words * 4), {}};
            for (auto& x : b.model) x = uint8_t(rng_());
            d->copy_in(b.buffer, std::as_bytes(std::span(b.model)));
            buffers_.push_back(std::move(b));
        }
        for (auto& d : devices_) d->synchronize();
        for (size_t s = 0; s < streams_.size(); ++s) {
            if (streams_[s].is_timeline) streams_[s].recorded = streams_[s].submitted = streams_[s].device->timeline().value();
        }
    }

    void run(int ops) {
        for (int i = 0; i < ops; ++i) {
            switch (rng_() % 16) {
                case 0: case 1: case 2: case 3: case 4: case 5: exec_mix(); break;
                case 6: case 7: case 8: case 9: copy(); break;
                case 10: case 11: flush(rng_() % streams_.size()); break;
                case 12: host_write(); break;
                case 13: check(rng_() % buffers_.size()); break;
                case 14: if (rng_() % 4 == 0) sync_all(); break;
                default: break;
            }
        }
        for (size_t b = 0; b < buffers_.size(); ++b) check(b);
        sync_all();
    }

    uint64_t ops_checked() const { return checked_; }

private:
    size_t stream_of(Device* d, QueueKind kind, bool timeline = false) {
        for (size_t s = 0; s < streams_.size(); ++s) {
            if (streams_[s].device == d && streams_[s].kind == kind && streams_[s].is_timeline == timeline) return s;
        }
        FAIL("no stream");
        return 0;
    }

    Queue& open_queue(size_t s) {
        Stream& st = streams_[s];
        if (!st.queue()) {
            if (st.kind == QueueKind::compute) {
                st.cq.emplace(st.device->compute_queue());
            } else {
                st.kq.emplace(st.device->copy_queue());
            }
        }
        return *st.queue();
    }

    void record_wait(size_t s, size_t on, uint64_t value) {
        if (on == s || value == 0) return;
        if (streams_[on].submitted < value) flush(on);  // never wait on work still on the host
        Stream& st = streams_[s];
        open_queue(s);
        if (st.cq) st.cq->wait(streams_[on].signal(), value);
        if (st.kq) st.kq->wait(streams_[on].signal(), value);
    }

    // Wait for every earlier access that conflicts with [begin, end) of buffer b.
    void wait_for(size_t s, size_t b, uint64_t begin, uint64_t end, bool write) {
        std::map<size_t, uint64_t> need;
        for (const Access& a : buffers_[b].history) {
            if (a.begin < end && begin < a.end && (a.write || write)) need[a.stream] = std::max(need[a.stream], a.value);
        }
        for (auto [on, v] : need) record_wait(s, on, v);
    }

    void finish_op(size_t s, std::initializer_list<std::tuple<size_t, uint64_t, uint64_t, bool>> touched) {
        Stream& st = streams_[s];
        uint64_t v = ++st.recorded;
        if (st.cq) st.cq->signal(st.own, v);
        if (st.kq) st.kq->signal(st.own, v);
        for (auto [b, begin, end, write] : touched) buffers_[b].history.push_back({begin, end, s, v, write});
        if (rng_() % 3 == 0) flush(s);
    }

    void exec_mix() {
        size_t di = rng_() % devices_.size();
        Device* d = devices_[di].get();
        std::vector<size_t> local;
        for (size_t b = 0; b < buffers_.size(); ++b) {
            if (buffers_[b].device == d) local.push_back(b);
        }
        if (local.size() < 2) return;
        size_t dst = local[rng_() % local.size()], src = local[rng_() % local.size()];
        if (dst == src) return;  // the kernel's work-items would race on overlapping ranges
        uint64_t dw = buffers_[dst].model.size() / 4, sw = buffers_[src].model.size() / 4;
        uint32_t n = uint32_t(1 + rng_() % std::min(dw, sw));
        uint64_t od = rng_() % (dw - n + 1), os = rng_() % (sw - n + 1);
        uint32_t k = uint32_t(rng_());
        size_t s = stream_of(d, QueueKind::compute);
        wait_for(s, dst, od * 4, (od + n) * 4, true);
        wait_for(s, src, os * 4, (os + n) * 4, false);
        Buffer dv = buffers_[dst].buffer.view(od * 4, n * 4), sv = buffers_[src].buffer.view(os * 4, n * 4);
        uint32_t block = 1u << (rng_() % 8);
        open_queue(s);
        streams_[s].cq->exec(*programs_[di], KernelArgs(*programs_[di], {dv, sv}, {n, k}), {(n + block - 1) / block}, {block});
        // The model.
        auto* dm = reinterpret_cast<uint32_t*>(buffers_[dst].model.data()) + od;
        const auto* sm = reinterpret_cast<const uint32_t*>(buffers_[src].model.data()) + os;
        for (uint32_t i = 0; i < n; ++i) dm[i] = (dm[i] * 2654435761u) ^ sm[i] ^ (k + i);
        finish_op(s, {{dst, od * 4, (od + n) * 4, true}, {src, os * 4, (os + n) * 4, false}});
    }

    void copy() {
        size_t dst = rng_() % buffers_.size(), src = rng_() % buffers_.size();
        uint64_t ds = buffers_[dst].model.size(), ss = buffers_[src].model.size();
        uint64_t n = 1 + rng_() % std::min(ds, ss);
        if (rng_() % 4 == 0) n = 1 + rng_() % 8;
        uint64_t od = rng_() % (ds - n + 1), os = rng_() % (ss - n + 1);
        if (dst == src && od < os + n && os < od + n) return;  // overlapping self-copies: no defined order of bytes
        // Either device's copy engine may run it; the other side is a peer buffer.
        Device* engine = rng_() % 2 ? buffers_[src].device : buffers_[dst].device;
        size_t s = stream_of(engine, QueueKind::copy);
        wait_for(s, dst, od, od + n, true);
        wait_for(s, src, os, os + n, false);
        open_queue(s);
        streams_[s].kq->copy(buffers_[dst].buffer.view(od, n), buffers_[src].buffer.view(os, n), n);
        std::memmove(buffers_[dst].model.data() + od, buffers_[src].model.data() + os, n);
        finish_op(s, {{dst, od, od + n, true}, {src, os, os + n, false}});
    }

    void flush(size_t s) {
        Stream& st = streams_[s];
        Queue* q = st.queue();
        if (!q) return;
        // A batch larger than the ring is submitted bound (Queue::submit refuses it unbound).
        if (rng_() % 5 == 0 || q->bytes() > q->engine().max_submit_bytes()) q->bind();
        q->submit();
        st.submitted = st.recorded;
        st.cq.reset();
        st.kq.reset();
    }

    // Make device d's timeline cover every access to b so far (host copies wait on the timeline).
    void timeline_covers(size_t b, uint64_t begin, uint64_t end, bool write) {
        Device* d = buffers_[b].device;
        size_t t = stream_of(d, QueueKind::compute, true);
        std::map<size_t, uint64_t> need;
        for (const Access& a : buffers_[b].history) {
            if (a.begin < end && begin < a.end && (a.write || write) && a.stream != t) need[a.stream] = std::max(need[a.stream], a.value);
        }
        if (need.empty()) return;
        for (auto [on, v] : need) {
            if (streams_[on].submitted < v) flush(on);
        }
        // A barrier on the device's compute engine: behind it nothing of the compute stream is
        // pending (flushed above when needed), so it cannot block that stream's own work.
        flush(stream_of(d, QueueKind::compute));
        auto q = d->compute_queue();
        uint64_t v = d->next_timeline();
        q.wait(d->timeline(), v - 1);
        for (auto [on, val] : need) q.wait(streams_[on].signal(), val);
        q.signal(d->timeline(), v).submit();
        streams_[t].recorded = streams_[t].submitted = v;
    }

    void host_write() {
        size_t b = rng_() % buffers_.size();
        uint64_t size = buffers_[b].model.size();
        uint64_t n = 1 + rng_() % size, off = rng_() % (size - n + 1);
        timeline_covers(b, off, off + n, true);
        std::vector<uint8_t> data(n);
        for (auto& x : data) x = uint8_t(rng_());
        Device* d = buffers_[b].device;
        d->copy_in(buffers_[b].buffer.view(off, n), std::as_bytes(std::span(data)));
        std::memcpy(buffers_[b].model.data() + off, data.data(), n);
        size_t t = stream_of(d, QueueKind::compute, true);
        streams_[t].recorded = streams_[t].submitted = d->timeline_value() - 1;
        buffers_[b].history.push_back({off, off + n, t, streams_[t].recorded, true});
    }

    void check(size_t b) {
        uint64_t size = buffers_[b].model.size();
        timeline_covers(b, 0, size, false);
        std::vector<uint8_t> got(size);
        Device* d = buffers_[b].device;
        d->copy_out(std::as_writable_bytes(std::span(got)), buffers_[b].buffer);
        size_t t = stream_of(d, QueueKind::compute, true);
        streams_[t].recorded = streams_[t].submitted = d->timeline_value() - 1;
        buffers_[b].history.push_back({0, size, t, streams_[t].recorded, false});
        if (got != buffers_[b].model) {
            size_t first = 0;
            while (got[first] == buffers_[b].model[first]) ++first;
            FAIL("buffer " << b << " on " << d->name() << " differs from the model at byte " << first << " of " << size);
        }
        ++checked_;
    }

    void sync_all() {
        for (size_t s = 0; s < streams_.size(); ++s) flush(s);
        for (size_t b = 0; b < buffers_.size(); ++b) timeline_covers(b, 0, buffers_[b].model.size(), true);
        for (auto& d : devices_) d->synchronize();
        for (auto& b : buffers_) b.history.clear();
    }

    std::mt19937_64 rng_;
    std::vector<std::shared_ptr<Device>> devices_;
    std::vector<std::shared_ptr<Program>> programs_;
    std::vector<Stream> streams_;
    std::vector<FuzzBuffer> buffers_;
    uint64_t checked_ = 0;
};

// BAREGPU_SEED=<n> replays seed n alone; otherwise `count` seeds from `first`.
std::vector<uint64_t> seeds_to_run(uint64_t first, uint64_t count) {
    if (const char* env = std::getenv("BAREGPU_SEED"); env && *env) return {std::strtoull(env, nullptr, 0)};
    std::vector<uint64_t> seeds;
    for (uint64_t i = 0; i < count; ++i) seeds.push_back(first + i);
    return seeds;
}

}  // namespace

TEST_CASE("fuzz: random HCQ sequences match a host model") {
    auto name = HCQ_DEVICE_NAME();
    std::string peer = test::peer_of(name);
    const bool full = test::long_run();
    // Brief: 11 seeds, so that one (0xbaf0) runs a 4 KiB ring with batches larger than the ring.
    std::vector<uint64_t> seeds = seeds_to_run(0xbae6u, full ? 60u : 11u);
    const int ops = full ? 3000 : 600;
    uint64_t checked = 0;
    for (uint64_t seed : seeds) {
        INFO("device " << name << ", seed " << seed << " (reproduce with BAREGPU_SEED=" << seed << ")");
        std::mt19937_64 pick(seed);
        // Some seeds run on tiny rings (wrap-around and back-pressure all the time).
        static const char* const rings[] = {"", "ring=4096", "ring=65536"};
        std::string opts = rings[pick() % 3];
        auto open = [&](const std::string& n) {
            std::string with = opts.empty() ? n : test::with_options(n, opts);
            return test::open_device(with.empty() ? n : with);
        };
        std::vector<std::shared_ptr<Device>> devices{open(name)};
        if (!peer.empty() && pick() % 3 != 0) devices.push_back(open(peer));
        Fuzzer f(seed, devices);
        f.run(ops);
        checked += f.ops_checked();
    }
    INFO("buffers checked: " << checked);
    CHECK(checked > seeds.size());
    WARN("fuzz: " << seeds.size() << " seeds x " << ops << " operations, " << checked << " buffer checks");
}

namespace {

// A random graph of mix kernels and copies over concrete buffers and inputs, on one or two
// devices, replayed with new bindings and variables and compared with the host model.
void fuzz_graph(uint64_t seed, const std::vector<std::shared_ptr<Device>>& devices, int replays) {
    std::mt19937_64 rng(seed);
    struct B {
        Device* device;
        Buffer buffer;
        std::vector<uint8_t> model;
    };
    std::vector<B> bufs;  // concrete ones first, then two candidates per input
    int nconcrete = 2 + int(rng() % 4), ninputs = int(rng() % 3);
    auto make = [&](Device* d, uint64_t words) {
        B b{d, d->allocate(words * 4), std::vector<uint8_t>(words * 4)};
        for (auto& x : b.model) x = uint8_t(rng());
        d->copy_in(b.buffer, std::as_bytes(std::span(b.model)));
        bufs.push_back(std::move(b));
    };
    for (int i = 0; i < nconcrete; ++i) make(devices[rng() % devices.size()].get(), 16 + rng() % 1000);
    std::vector<Device*> input_device;
    std::vector<uint64_t> input_words;
    for (int i = 0; i < ninputs; ++i) {
        input_device.push_back(devices[rng() % devices.size()].get());
        input_words.push_back(16 + rng() % 1000);
        make(input_device.back(), input_words.back());
        make(input_device.back(), input_words.back());
    }
    std::vector<std::shared_ptr<Program>> programs;
    for (auto& d : devices) programs.push_back(test::load_kernel(*d, "mix", "mix"));
    auto program_of = [&](Device* d) -> Program& {
        for (size_t i = 0; i < devices.size(); ++i) {
            if (devices[i].get() == d) return *programs[i];
        }
        throw std::logic_error("no program");
    };

    Graph g;
    std::vector<GraphBuffer> handles;  // per slot: concrete i, or input j at nconcrete + j
    for (int i = 0; i < nconcrete; ++i) handles.push_back(GraphBuffer(bufs[size_t(i)].buffer));
    for (int j = 0; j < ninputs; ++j) handles.push_back(g.input(*input_device[size_t(j)], input_words[size_t(j)] * 4));
    auto slot_device = [&](size_t slot) { return slot < size_t(nconcrete) ? bufs[slot].device : input_device[slot - size_t(nconcrete)]; };
    auto slot_bytes = [&](size_t slot) { return handles[slot].size(); };

    struct Op {
        bool exec;
        size_t dst, src;
        uint64_t od, os, n;  // exec: words; copy: bytes
        int variable;        // exec: -1 or the variable index for k
        uint32_t k;
    };
    std::vector<Op> ops;
    uint32_t variables = 0;
    int nops = 3 + int(rng() % 30);
    for (int i = 0; i < nops; ++i) {
        size_t dst = rng() % handles.size(), src = rng() % handles.size();
        if (rng() % 2 == 0) {
            if (dst == src || slot_device(dst) != slot_device(src)) continue;
            uint64_t dw = slot_bytes(dst) / 4, sw = slot_bytes(src) / 4;
            uint64_t n = 1 + rng() % std::min(dw, sw);
            Op op{true, dst, src, rng() % (dw - n + 1), rng() % (sw - n + 1), n, -1, uint32_t(rng())};
            if (rng() % 3 == 0) op.variable = int(variables++);
            GraphBuffer d = handles[dst].view(op.od * 4, n * 4), s2 = handles[src].view(op.os * 4, n * 4);
            GraphValue kv = op.variable >= 0 ? GraphValue::variable(uint32_t(op.variable)) : GraphValue(op.k);
            uint32_t block = 1u << (rng() % 7);
            g.exec(program_of(slot_device(dst)), {d, s2}, {uint32_t(n), kv}, {uint32_t((n + block - 1) / block)}, {block});
            ops.push_back(op);
        } else {
            uint64_t n = 1 + rng() % std::min(slot_bytes(dst), slot_bytes(src));
            uint64_t od = rng() % (slot_bytes(dst) - n + 1), os = rng() % (slot_bytes(src) - n + 1);
            if (dst == src && od < os + n && os < od + n) continue;
            Device* engine = rng() % 2 ? slot_device(src) : slot_device(dst);
            g.copy(handles[dst].view(od, n), handles[src].view(os, n), n, engine);
            ops.push_back({false, dst, src, od, os, n, -1, 0});
        }
    }
    if (ops.empty()) return;
    g.finalize();
    for (int r = 0; r < replays; ++r) {
        std::vector<Buffer> bound;
        std::vector<size_t> bound_index;  // index into bufs for each input
        for (int j = 0; j < ninputs; ++j) {
            size_t which = size_t(nconcrete) + 2 * size_t(j) + rng() % 2;
            bound.push_back(bufs[which].buffer);
            bound_index.push_back(which);
        }
        std::vector<uint32_t> vars(variables);
        for (auto& v : vars) v = uint32_t(rng());
        g.replay(bound, vars);
        auto model_of = [&](size_t slot) -> std::vector<uint8_t>& {
            return slot < size_t(nconcrete) ? bufs[slot].model : bufs[bound_index[slot - size_t(nconcrete)]].model;
        };
        for (const Op& op : ops) {
            auto& dm = model_of(op.dst);
            auto& sm = model_of(op.src);
            if (op.exec) {
                uint32_t k = op.variable >= 0 ? vars[size_t(op.variable)] : op.k;
                auto* d = reinterpret_cast<uint32_t*>(dm.data()) + op.od;
                const auto* s2 = reinterpret_cast<const uint32_t*>(sm.data()) + op.os;
                for (uint64_t i = 0; i < op.n; ++i) d[i] = (d[i] * 2654435761u) ^ s2[i] ^ (k + uint32_t(i));
            } else {
                std::memmove(dm.data() + op.od, sm.data() + op.os, op.n);
            }
        }
        if (rng() % 3 == 0) g.wait();
    }
    g.wait();
    for (size_t i = 0; i < bufs.size(); ++i) {
        std::vector<uint8_t> got(bufs[i].model.size());
        bufs[i].device->copy_out(std::as_writable_bytes(std::span(got)), bufs[i].buffer);
        if (got != bufs[i].model) {
            size_t first = 0;
            while (got[first] == bufs[i].model[first]) ++first;
            FAIL("graph seed " << seed << ": buffer " << i << " on " << bufs[i].device->name() << " differs at byte " << first);
        }
    }
}

}  // namespace

TEST_CASE("fuzz: random graphs over one or two devices match a host model across replays") {
    auto name = HCQ_DEVICE_NAME();
    std::string peer = test::peer_of(name);
    const bool full = test::long_run();
    std::vector<uint64_t> seeds = seeds_to_run(0x6a9u, full ? 300u : 30u);
    auto d0 = test::open_device(name);
    std::shared_ptr<Device> d1 = peer.empty() ? nullptr : test::open_device(peer);
    for (uint64_t seed : seeds) {
        INFO("device " << name << ", graph seed " << seed << " (reproduce with BAREGPU_SEED=" << seed << ")");
        std::vector<std::shared_ptr<Device>> devices{d0};
        if (d1 && seed % 2) devices.push_back(d1);
        fuzz_graph(seed, devices, full ? 12 : 5);
    }
    SUCCEED("graph seeds: " << seeds.size());
}
