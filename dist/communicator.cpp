#include "dist/communicator.hpp"

#include "dist/mpi.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

namespace baregpu::dist {

namespace {

// One tag per collective: ranks that call different ones never match each other's messages (and
// time out saying so) instead of taking a broadcast's chunk for an allreduce's.
enum CollectiveTag : int { kAllreduceTag = 1, kBroadcastTag = 2, kAllgatherTag = 3, kReduceScatterTag = 4 };
constexpr size_t kRankInfoBytes = 512;

int mod(int a, int n) { return ((a % n) + n) % n; }

std::string device_names(const std::vector<std::shared_ptr<hcq::Device>>& devices) {
    std::string out;
    for (const auto& d : devices) out += (out.empty() ? "" : "+") + d->name();
    return out;
}

// Whether the host may read and write `buffer` in place (the cpu device's memory, or host memory a
// GPU reaches over the bus), instead of through the device's copy queue.
bool host_addressable(const hcq::Buffer& buffer) {
    if (!buffer.cpu()) return false;
    if (buffer.device().limits().host_memory) return true;
    return buffer.options().host && !buffer.options().uncached;
}

// [start, end) of block i when `count` elements are split in n nearly equal blocks.
uint64_t block_start(uint64_t count, int n, int i) { return count * static_cast<uint64_t>(i) / static_cast<uint64_t>(n); }

}  // namespace

Communicator::Communicator(std::vector<std::shared_ptr<hcq::Device>> devices, const Options& options)
    : devices_(std::move(devices)), options_(options) {
    if (devices_.empty()) throw Error("", "baregpu::dist::Communicator: a rank needs at least one device");
    for (const auto& d : devices_) {
        if (!d) throw Error("", "baregpu::dist::Communicator: a null device");
    }
    if (options_.chunk_bytes < 4096 || options_.slots < 2)
        throw Error("", fmt::format("baregpu::dist::Options: chunk_bytes {} (at least 4096) and slots {} (at least 2)", options_.chunk_bytes,
                                    options_.slots));
    if (options_.timeout.count() <= 0) options_.timeout = hcq::default_timeout();
    mpi::ensure_initialized();
    MPI_Comm control = MPI_COMM_NULL;
    mpi::check(MPI_Comm_dup(MPI_COMM_WORLD, &data_), "MPI_Comm_dup");
    mpi::check(MPI_Comm_dup(MPI_COMM_WORLD, &p2p_), "MPI_Comm_dup");
    mpi::check(MPI_Comm_dup(MPI_COMM_WORLD, &control), "MPI_Comm_dup");
    for (MPI_Comm c : {data_, p2p_, control}) mpi::check(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    MPI_Comm_rank(data_, &rank_);
    MPI_Comm_size(data_, &size_);

    // Who every rank is, for the messages that name one. Bounded: a rank that never constructs its
    // communicator is reported, not waited for.
    struct Exchange {
        std::string mine, all;
        MPI_Request request = MPI_REQUEST_NULL;
    };
    auto ex = std::make_unique<Exchange>();
    ex->mine.assign(kRankInfoBytes, '\0');
    const std::string text = fmt::format("{}\n{}\n{}", ::getpid(), mpi::processor_name(), device_names(devices_));
    std::memcpy(ex->mine.data(), text.data(), std::min(text.size(), kRankInfoBytes - 1));
    ex->all.assign(kRankInfoBytes * static_cast<size_t>(size_), '\0');
    mpi::check(MPI_Iallgather(ex->mine.data(), kRankInfoBytes, MPI_BYTE, ex->all.data(), kRankInfoBytes, MPI_BYTE, control, &ex->request),
               "MPI_Iallgather");
    const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
    for (int done = 0;;) {
        mpi::check(MPI_Test(&ex->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done) break;
        if (std::chrono::steady_clock::now() > deadline) {
            // MPI forbids cancelling a nonblocking collective: it stays pending and may still write
            // its buffers, which are kept until exit; MPI_Finalize, which would wait for it, is skipped.
            static std::vector<std::unique_ptr<Exchange>> abandoned;
            abandoned.push_back(std::move(ex));
            mpi::note_broken();
            throw Error("", fmt::format("rank {} of {}: not every rank created its baregpu::dist::Communicator within {} ms "
                                        "(BAREGPU_TIMEOUT_MS)",
                                        rank_, size_, std::chrono::duration_cast<std::chrono::milliseconds>(options_.timeout).count()));
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    std::vector<RankInfo> ranks(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
        std::string entry(ex->all.data() + kRankInfoBytes * static_cast<size_t>(r));
        const size_t a = entry.find('\n'), b = entry.find('\n', a + 1);
        ranks[static_cast<size_t>(r)] = {std::atoi(entry.substr(0, a).c_str()), entry.substr(a + 1, b - a - 1), entry.substr(b + 1)};
    }
    watch_ = std::make_unique<PeerWatch>(control, rank_, std::move(ranks), options_.timeout);
    // Host slots the devices' copy engines write and read themselves. Not for memory that is the
    // host's already (read in place), nor a device whose host buffers are copies (no DMA).
    for (const auto& d : devices_) {
        if (d->limits().host_memory || !d->limits().host_dma) continue;
        if (std::any_of(dma_slots_.begin(), dma_slots_.end(), [&](const auto& e) { return e.first == d.get(); })) continue;
        std::vector<hcq::Buffer> buffers;
        try {
            for (unsigned i = 0; i < options_.slots; ++i) buffers.push_back(d->allocate(options_.chunk_bytes, hcq::BufferOptions{.host = true}));
        } catch (const UnsupportedError&) {
            continue;  // copy_out / copy_in through pinned memory instead
        }
        dma_slots_.emplace_back(d.get(), std::move(buffers));
    }
    stager_ = std::make_unique<Stager>();
    slot_ticket_.assign(options_.slots, 0);
}

Communicator::~Communicator() {
    if (stager_) stager_->drain();
    stager_.reset();
    watch_.reset();
    if (data_ != MPI_COMM_NULL) MPI_Comm_free(&data_);
    if (p2p_ != MPI_COMM_NULL) MPI_Comm_free(&p2p_);
}

template <typename Body>
void Communicator::guarded(const char* operation, Body&& body) {
    if (failure_) std::rethrow_exception(failure_);
    try {
        body();
    } catch (const std::exception& e) {
        // This rank's own failure (its device, MPI): every other rank hears of it, by name. Another
        // rank's (a RankError) they have heard of already.
        if (!dynamic_cast<const RankError*>(&e))
            watch_->announce(rank_, fmt::format("{} failed in {}: {}", watch_->describe(rank_), operation, e.what()));
        mpi::note_broken();
        failure_ = std::current_exception();
        stager_->drain();
        throw;
    }
}

void Communicator::check_buffer(const hcq::Buffer& buffer, uint64_t bytes, const char* operation, const char* which) const {
    if (!buffer) throw Error("", fmt::format("rank {}: {}: the {} buffer is empty", rank_, operation, which));
    if (buffer.size() < bytes)
        throw Error(buffer.device().name(),
                    fmt::format("rank {}: {}: the {} buffer holds {} bytes, the operation needs {}", rank_, operation, which, buffer.size(), bytes));
}

void Communicator::await(Stager::Ticket ticket) {
    watch_->wait_local([&] { return stager_->done(ticket); });
}

std::byte* Communicator::slot(unsigned i, uint64_t bytes, const hcq::Device* via) {
    if (bytes <= options_.chunk_bytes) {
        for (const auto& [device, buffers] : dma_slots_) {
            if (device == via) return buffers[i].cpu();
        }
    }
    if (slots_.size() < options_.slots) slots_.resize(options_.slots);
    if (slots_[i].size() < bytes) slots_[i] = PinnedMemory(std::max(bytes, options_.chunk_bytes));
    return slots_[i].data();
}

std::byte* Communicator::take_slot(uint64_t k, uint64_t bytes, const hcq::Device* via) {
    const unsigned s = static_cast<unsigned>(k % options_.slots);
    await(slot_ticket_[s]);
    return slot(s, bytes, via);
}

std::optional<hcq::Buffer> Communicator::dma_view(const hcq::Device& device, const std::byte* host, uint64_t bytes) const {
    for (const auto& [owner, buffers] : dma_slots_) {
        if (owner != &device) continue;
        for (const hcq::Buffer& b : buffers) {
            if (host >= b.cpu() && host + bytes <= b.cpu() + b.size()) return b.view(static_cast<uint64_t>(host - b.cpu()), bytes);
        }
    }
    return std::nullopt;
}

std::byte* Communicator::scratch(uint64_t bytes) {
    if (scratch_.size() < bytes) scratch_ = PinnedMemory(std::max(bytes, options_.chunk_bytes));
    return scratch_.data();
}

std::byte* Communicator::local_scratch(uint64_t bytes) {
    if (local_scratch_.size() < bytes) local_scratch_ = PinnedMemory(std::max(bytes, options_.chunk_bytes));
    return local_scratch_.data();
}

Communicator::Stats Communicator::stats() const {
    stager_->drain();
    return stats_;
}

void Communicator::fetch_into(std::byte* host, const hcq::Buffer& buffer, uint64_t offset, uint64_t bytes) {
    if (host_addressable(buffer)) {
        buffer.device().synchronize();  // earlier work on the device writes what is read here
        std::memcpy(host, buffer.cpu() + offset, bytes);
        ++stats_.host_copies;
    } else if (auto slot = dma_view(buffer.device(), host, bytes)) {
        // The copy engine writes the host slot; the wait makes it the host's to read.
        hcq::Device::transfer(*slot, buffer.view(offset, bytes), bytes);
        buffer.device().synchronize();
        ++stats_.dma_copies;
    } else {
        buffer.device().copy_out(std::span<std::byte>(host, bytes), buffer.view(offset, bytes));
        ++stats_.device_copies;
    }
}

void Communicator::store_from(const hcq::Buffer& buffer, uint64_t offset, const std::byte* host, uint64_t bytes) {
    if (host_addressable(buffer)) {
        buffer.device().synchronize();  // nothing earlier still reads what is overwritten here
        std::memcpy(buffer.cpu() + offset, host, bytes);
        ++stats_.host_copies;
    } else if (auto slot = dma_view(buffer.device(), host, bytes)) {
        // Waited for: the slot is the host's again (MPI receives into it) once this job ends.
        hcq::Device::transfer(buffer.view(offset, bytes), *slot, bytes);
        buffer.device().synchronize();
        ++stats_.dma_copies;
    } else {
        buffer.device().copy_in(buffer.view(offset, bytes), std::span<const std::byte>(host, bytes));
        ++stats_.device_copies;
    }
}

void Communicator::fetch_reduced(std::byte* host, std::span<const hcq::Buffer> buffers, uint64_t offset, uint64_t count,
                                 DataType type, ReduceOp op) {
    const uint64_t bytes = count * element_size(type);
    fetch_into(host, buffers[0], offset, bytes);
    for (size_t d = 1; d < buffers.size(); ++d) {
        std::byte* share = local_scratch(bytes);
        fetch_into(share, buffers[d], offset, bytes);
        reduce_into(host, share, count, type, op);
    }
}

void Communicator::store_all(std::span<const hcq::Buffer> buffers, uint64_t offset, const std::byte* host, uint64_t bytes, size_t first) {
    if (first == 0) store_from(buffers[0], offset, host, bytes);
    for (size_t d = 1; d < buffers.size(); ++d) {
        const std::pair<const hcq::Device*, const hcq::Device*> key(&buffers[0].device(), &buffers[d].device());
        auto known = std::find_if(peers_.begin(), peers_.end(), [&](const auto& p) { return p.first == key; });
        bool peer = known == peers_.end() || known->second;
        if (peer) {
            try {
                // Device to device: over the bus between peers, without another host copy.
                hcq::Device::transfer(buffers[d].view(offset, bytes), buffers[0].view(offset, bytes), bytes);
                ++stats_.peer_transfers;
            } catch (const UnsupportedError&) {
                peer = false;
            }
            if (known == peers_.end()) peers_.emplace_back(key, peer);
        }
        if (!peer) store_from(buffers[d], offset, host, bytes);
    }
}

void Communicator::exchange(int tag, const std::byte* send, uint64_t send_bytes, int to, std::byte* recv, uint64_t recv_bytes, int from,
                            const std::function<std::string()>& what) {
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    const int peers[2] = {from, to};
    // By rank, not by pointer: an empty block's pointer may be null, and its message must still
    // be matched (zero bytes), or it would be taken by the next receive from that rank.
    if (from >= 0)
        mpi::check(MPI_Irecv(recv, static_cast<int>(recv_bytes), MPI_BYTE, from, tag, data_, &requests[0]), "MPI_Irecv");
    if (to >= 0)
        mpi::check(MPI_Isend(send, static_cast<int>(send_bytes), MPI_BYTE, to, tag, data_, &requests[1]), "MPI_Isend");
    watch_->wait(requests, peers, /*collective*/ true, what);
}

void Communicator::ring_reduce_scatter(int tag, std::span<std::byte* const> segs, std::span<const uint64_t> lengths, DataType type, ReduceOp op,
                                       const std::function<std::string()>& what) {
    const int n = size_, right = mod(rank_ + 1, n), left = mod(rank_ - 1, n);
    for (int step = 0; step + 1 < n; ++step) {
        // Block r - step - 1 leaves (it holds the sums of this rank and of the ones before it);
        // block r - step - 2 arrives and takes this rank's share. At the end block r is complete.
        const auto out = static_cast<size_t>(mod(rank_ - step - 1, n));
        const auto in = static_cast<size_t>(mod(rank_ - step - 2, n));
        std::byte* incoming = scratch(lengths[in]);
        exchange(tag, segs[out], lengths[out], right, incoming, lengths[in], left,
                 [&] { return fmt::format("{}, reduce-scatter step {} of {} (from {}, to rank {})", what(), step + 1, n - 1, describe(left), right); });
        reduce_into(segs[in], incoming, lengths[in] / element_size(type), type, op);
    }
}

void Communicator::ring_allgather(int tag, std::span<std::byte* const> segs, std::span<const uint64_t> lengths,
                                  const std::function<std::string()>& what) {
    const int n = size_, right = mod(rank_ + 1, n), left = mod(rank_ - 1, n);
    for (int step = 0; step + 1 < n; ++step) {
        const auto out = static_cast<size_t>(mod(rank_ - step, n));
        const auto in = static_cast<size_t>(mod(rank_ - step - 1, n));
        exchange(tag, segs[out], lengths[out], right, segs[in], lengths[in], left,
                 [&] { return fmt::format("{}, allgather step {} of {} (from {}, to rank {})", what(), step + 1, n - 1, describe(left), right); });
    }
}

void Communicator::allreduce(const hcq::Buffer& buffer, uint64_t count, DataType type, ReduceOp op) {
    allreduce(std::span<const hcq::Buffer>(&buffer, 1), count, type, op);
}

void Communicator::allreduce(std::span<const hcq::Buffer> buffers, uint64_t count, DataType type, ReduceOp op) {
    guarded("allreduce", [&] {
        const uint64_t esz = element_size(type);
        if (buffers.empty()) throw Error("", fmt::format("rank {}: allreduce: no buffer", rank_));
        for (const auto& b : buffers) check_buffer(b, count * esz, "allreduce", "");
        const uint64_t per_chunk = std::max<uint64_t>(1, options_.chunk_bytes / esz);
        const uint64_t chunks = (count + per_chunk - 1) / per_chunk;
        const std::string op_text = fmt::format("allreduce ({}) of {} {} ({} bytes)", to_string(op), count, to_string(type), count * esz);
        auto ring = [&](std::byte* host, uint64_t k, uint64_t n) {
            std::vector<std::byte*> segs(static_cast<size_t>(size_));
            std::vector<uint64_t> lengths(static_cast<size_t>(size_));
            for (int i = 0; i < size_; ++i) {
                const uint64_t a = block_start(n, size_, i), b = block_start(n, size_, i + 1);
                segs[static_cast<size_t>(i)] = host + a * esz;
                lengths[static_cast<size_t>(i)] = (b - a) * esz;
            }
            auto what = [&] { return fmt::format("{}, chunk {} of {}", op_text, k + 1, chunks); };
            ring_reduce_scatter(kAllreduceTag, segs, lengths, type, op, what);
            ring_allgather(kAllreduceTag, segs, lengths, what);
        };
        if (buffers.size() == 1 && host_addressable(buffers[0])) {
            // The device's memory is the host's: once the device is idle, the ring runs in place.
            const hcq::Buffer& b = buffers[0];
            await(stager_->post([&b] { b.device().synchronize(); }));
            for (uint64_t k = 0; k < chunks; ++k) ring(b.cpu() + k * per_chunk * esz, k, std::min(per_chunk, count - k * per_chunk));
            ++stats_.in_place;
            return;
        }
        const std::vector<hcq::Buffer> list(buffers.begin(), buffers.end());  // the stager's jobs own copies
        std::vector<Stager::Ticket> fetched(chunks);
        auto fetch = [&](uint64_t k) {
            const uint64_t first = k * per_chunk, n = std::min(per_chunk, count - first);
            // The stager runs jobs in order: this fetch comes after the store that last used the slot.
            std::byte* host = slot(static_cast<unsigned>(k % options_.slots), n * esz, &buffers[0].device());
            fetched[k] = stager_->post([this, host, list, first, n, esz, type, op] { fetch_reduced(host, list, first * esz, n, type, op); });
            slot_ticket_[k % options_.slots] = fetched[k];
        };
        for (uint64_t k = 0; k < std::min<uint64_t>(chunks, options_.slots); ++k) fetch(k);
        for (uint64_t k = 0; k < chunks; ++k) {
            const uint64_t first = k * per_chunk, n = std::min(per_chunk, count - first);
            await(fetched[k]);
            std::byte* host = slot(static_cast<unsigned>(k % options_.slots), n * esz, &buffers[0].device());
            ring(host, k, n);
            slot_ticket_[k % options_.slots] =
                stager_->post([this, host, list, first, n, esz] { store_all(list, first * esz, host, n * esz); });
            if (k + options_.slots < chunks) fetch(k + options_.slots);
        }
        for (Stager::Ticket t : slot_ticket_) await(t);
    });
}

void Communicator::broadcast(const hcq::Buffer& buffer, uint64_t bytes, int root) {
    broadcast(std::span<const hcq::Buffer>(&buffer, 1), bytes, root);
}

void Communicator::broadcast(std::span<const hcq::Buffer> buffers, uint64_t bytes, int root) {
    guarded("broadcast", [&] {
        if (buffers.empty()) throw Error("", fmt::format("rank {}: broadcast: no buffer", rank_));
        if (root < 0 || root >= size_) throw Error("", fmt::format("rank {}: broadcast from rank {}: there are {} ranks", rank_, root, size_));
        for (const auto& b : buffers) check_buffer(b, bytes, "broadcast", "");
        // A chain in rank order from the root: each chunk is forwarded as soon as it arrived.
        const int position = mod(rank_ - root, size_);
        const int prev = mod(rank_ - 1, size_), next = position + 1 < size_ ? mod(rank_ + 1, size_) : -1;
        const uint64_t chunk = options_.chunk_bytes, chunks = (bytes + chunk - 1) / chunk;
        const std::vector<hcq::Buffer> list(buffers.begin(), buffers.end());
        std::vector<Stager::Ticket> fetched(chunks);
        auto fetch = [&](uint64_t k) {
            const uint64_t offset = k * chunk, n = std::min(chunk, bytes - offset);
            std::byte* host = slot(static_cast<unsigned>(k % options_.slots), n, &list[0].device());  // after the slot's last store (in order)
            fetched[k] = stager_->post([this, host, list, offset, n] { fetch_into(host, list[0], offset, n); });
            slot_ticket_[k % options_.slots] = fetched[k];
        };
        if (position == 0) {
            for (uint64_t k = 0; k < std::min<uint64_t>(chunks, options_.slots); ++k) fetch(k);
        }
        for (uint64_t k = 0; k < chunks; ++k) {
            const uint64_t offset = k * chunk, n = std::min(chunk, bytes - offset);
            std::byte* host;
            if (position == 0) {
                await(fetched[k]);
                host = slot(static_cast<unsigned>(k % options_.slots), n, &list[0].device());
            } else {
                host = take_slot(k, n, &list[0].device());
            }
            auto what = [&] { return fmt::format("broadcast of {} bytes from rank {}, chunk {} of {}", bytes, root, k + 1, chunks); };
            if (position != 0) exchange(kBroadcastTag, nullptr, 0, -1, host, n, prev, what);
            if (next >= 0) exchange(kBroadcastTag, host, n, next, nullptr, 0, -1, what);
            slot_ticket_[k % options_.slots] =
                stager_->post([this, host, list, offset, n, position] { store_all(list, offset, host, n, position == 0 ? 1 : 0); });
            if (position == 0 && k + options_.slots < chunks) fetch(k + options_.slots);
        }
        for (Stager::Ticket t : slot_ticket_) await(t);
    });
}

void Communicator::allgather(const hcq::Buffer& send, const hcq::Buffer& recv, uint64_t bytes_per_rank) {
    guarded("allgather", [&] {
        check_buffer(send, bytes_per_rank, "allgather", "send");
        check_buffer(recv, bytes_per_rank * static_cast<uint64_t>(size_), "allgather", "receive");
        const uint64_t piece = std::max<uint64_t>(1, options_.chunk_bytes / static_cast<uint64_t>(size_));
        const uint64_t chunks = (bytes_per_rank + piece - 1) / piece;
        for (uint64_t k = 0; k < chunks; ++k) {
            const uint64_t offset = k * piece, n = std::min(piece, bytes_per_rank - offset);
            std::byte* host = take_slot(k, n * static_cast<uint64_t>(size_), &send.device());
            const Stager::Ticket fetched = stager_->post([this, host, send, offset, n] { fetch_into(host + n * static_cast<uint64_t>(rank_), send, offset, n); });
            await(fetched);
            std::vector<std::byte*> segs(static_cast<size_t>(size_));
            std::vector<uint64_t> lengths(static_cast<size_t>(size_), n);
            for (int i = 0; i < size_; ++i) segs[static_cast<size_t>(i)] = host + n * static_cast<uint64_t>(i);
            ring_allgather(kAllgatherTag, segs, lengths, [&] {
                return fmt::format("allgather of {} bytes per rank, chunk {} of {}", bytes_per_rank, k + 1, chunks);
            });
            slot_ticket_[k % options_.slots] = stager_->post([this, host, recv, offset, n, bytes_per_rank] {
                for (int i = 0; i < size_; ++i)
                    store_from(recv, static_cast<uint64_t>(i) * bytes_per_rank + offset, host + n * static_cast<uint64_t>(i), n);
            });
        }
        for (Stager::Ticket t : slot_ticket_) await(t);
    });
}

void Communicator::reduce_scatter(const hcq::Buffer& send, const hcq::Buffer& recv, uint64_t count_per_rank, DataType type, ReduceOp op) {
    guarded("reduce-scatter", [&] {
        const uint64_t esz = element_size(type);
        check_buffer(send, count_per_rank * esz * static_cast<uint64_t>(size_), "reduce-scatter", "send");
        check_buffer(recv, count_per_rank * esz, "reduce-scatter", "receive");
        const uint64_t piece = std::max<uint64_t>(1, options_.chunk_bytes / esz / static_cast<uint64_t>(size_));
        const uint64_t chunks = (count_per_rank + piece - 1) / piece;
        for (uint64_t k = 0; k < chunks; ++k) {
            const uint64_t first = k * piece, n = std::min(piece, count_per_rank - first), bytes = n * esz;
            std::byte* host = take_slot(k, bytes * static_cast<uint64_t>(size_), &send.device());
            const Stager::Ticket fetched = stager_->post([this, host, send, first, bytes, esz, count_per_rank] {
                for (int i = 0; i < size_; ++i)
                    fetch_into(host + bytes * static_cast<uint64_t>(i), send, (static_cast<uint64_t>(i) * count_per_rank + first) * esz, bytes);
            });
            await(fetched);
            std::vector<std::byte*> segs(static_cast<size_t>(size_));
            std::vector<uint64_t> lengths(static_cast<size_t>(size_), bytes);
            for (int i = 0; i < size_; ++i) segs[static_cast<size_t>(i)] = host + bytes * static_cast<uint64_t>(i);
            ring_reduce_scatter(kReduceScatterTag, segs, lengths, type, op, [&] {
                return fmt::format("reduce-scatter ({}) of {} {} per rank, chunk {} of {}", to_string(op), count_per_rank, to_string(type), k + 1,
                                   chunks);
            });
            std::byte* mine = segs[static_cast<size_t>(rank_)];
            slot_ticket_[k % options_.slots] = stager_->post([this, mine, recv, first, bytes, esz] { store_from(recv, first * esz, mine, bytes); });
        }
        for (Stager::Ticket t : slot_ticket_) await(t);
    });
}

void Communicator::send(const hcq::Buffer& buffer, uint64_t bytes, int to, int tag) {
    guarded("send", [&] {
        check_buffer(buffer, bytes, "send", "");
        if (to < 0 || to >= size_ || to == rank_) throw Error("", fmt::format("rank {}: send to rank {} ({} ranks)", rank_, to, size_));
        const uint64_t chunk = options_.chunk_bytes, chunks = (bytes + chunk - 1) / chunk;
        std::vector<Stager::Ticket> fetched(chunks);
        auto fetch = [&](uint64_t k) {
            const uint64_t offset = k * chunk, n = std::min(chunk, bytes - offset);
            std::byte* host = slot(static_cast<unsigned>(k % options_.slots), n, &buffer.device());
            fetched[k] = stager_->post([this, host, buffer, offset, n] { fetch_into(host, buffer, offset, n); });
            slot_ticket_[k % options_.slots] = fetched[k];
        };
        for (uint64_t k = 0; k < std::min<uint64_t>(chunks, options_.slots); ++k) fetch(k);
        for (uint64_t k = 0; k < chunks; ++k) {
            const uint64_t n = std::min(chunk, bytes - k * chunk);
            await(fetched[k]);
            MPI_Request request = MPI_REQUEST_NULL;
            mpi::check(MPI_Isend(slot(static_cast<unsigned>(k % options_.slots), n, &buffer.device()), static_cast<int>(n), MPI_BYTE, to, tag, p2p_, &request),
                       "MPI_Isend");
            watch_->wait(std::span<MPI_Request>(&request, 1), std::span<const int>(&to, 1), false,
                         [&] { return fmt::format("send of {} bytes to {} (tag {}), chunk {} of {}", bytes, describe(to), tag, k + 1, chunks); });
            if (k + options_.slots < chunks) fetch(k + options_.slots);
        }
    });
}

void Communicator::recv(const hcq::Buffer& buffer, uint64_t bytes, int from, int tag) {
    guarded("recv", [&] {
        check_buffer(buffer, bytes, "recv", "");
        if (from < 0 || from >= size_ || from == rank_)
            throw Error("", fmt::format("rank {}: recv from rank {} ({} ranks)", rank_, from, size_));
        const uint64_t chunk = options_.chunk_bytes, chunks = (bytes + chunk - 1) / chunk;
        for (uint64_t k = 0; k < chunks; ++k) {
            const uint64_t offset = k * chunk, n = std::min(chunk, bytes - offset);
            std::byte* host = take_slot(k, n, &buffer.device());
            MPI_Request request = MPI_REQUEST_NULL;
            mpi::check(MPI_Irecv(host, static_cast<int>(n), MPI_BYTE, from, tag, p2p_, &request), "MPI_Irecv");
            watch_->wait(std::span<MPI_Request>(&request, 1), std::span<const int>(&from, 1), false,
                         [&] { return fmt::format("recv of {} bytes from {} (tag {}), chunk {} of {}", bytes, describe(from), tag, k + 1, chunks); });
            slot_ticket_[k % options_.slots] = stager_->post([this, host, buffer, offset, n] { store_from(buffer, offset, host, n); });
        }
        for (Stager::Ticket t : slot_ticket_) await(t);
    });
}

}  // namespace baregpu::dist
