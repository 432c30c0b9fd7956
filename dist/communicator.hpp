// Collectives across processes (MPI ranks) on HCQ device buffers. Each rank owns one or more
// devices; data moves device -> host slots -> MPI -> host slots -> device, in chunks, with the
// device copies of one chunk overlapping the MPI transfers of another (dist/stager.hpp). The host
// slots are host memory each device reaches by DMA (its copy engine writes and reads them, no
// host copy), else pinned memory filled by Device::copy_out / copy_in. Ranks
// exchange chunks over point-to-point messages in a ring (reduce-scatter then allgather: each
// rank sends and receives 2 (N-1)/N of the data, the bandwidth-optimal schedule), so a rank that
// fails or vanishes is named by whoever waits for it (dist/peer_watch.hpp). Where a rank holds
// several devices, its share is reduced on the host and the result reaches the others from the
// first by Device::transfer (peer-to-peer where they share a bus), else by copy_in. An allreduce
// on one buffer whose memory is the host's (the cpu device's) runs in place, without staging.
//
// Every rank calls the same collectives in the same order with the same sizes; a collective is
// ordered after earlier work on the devices' timelines, and later work sees its result. Calls may
// come from any one thread at a time.
#pragma once

#include "dist/peer_watch.hpp"
#include "dist/reduce.hpp"
#include "dist/stager.hpp"
#include "hcq/device.hpp"

#include <mpi.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace baregpu::dist {

struct Options {
    // Bytes of device data per pipeline step, and how many steps may be between device and MPI at once.
    uint64_t chunk_bytes = 4ull << 20;
    unsigned slots = 4;
    // How long a rank waits for another before naming it (0: BAREGPU_TIMEOUT_MS, else 10 s).
    hcq::Duration timeout{0};
};

class Communicator {
public:
    // Every rank of MPI_COMM_WORLD (MPI is initialised here unless the application did it, and
    // finalised at exit); `devices`: this rank's, at least one. Collective: every rank constructs
    // its communicator at the same point.
    explicit Communicator(std::vector<std::shared_ptr<hcq::Device>> devices, const Options& options = {});
    ~Communicator();
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;

    int rank() const { return rank_; }
    int size() const { return size_; }
    const std::vector<std::shared_ptr<hcq::Device>>& devices() const { return devices_; }
    // "rank 2 (pid 4711 on node7, sim-am:navi31)".
    std::string describe(int rank) const { return watch_->describe(rank); }

    // Elementwise op over `count` elements of every participating buffer, the result in each: one
    // buffer per device of this rank, in any order (its devices' shares are combined first).
    void allreduce(std::span<const hcq::Buffer> buffers, uint64_t count, DataType type, ReduceOp op);
    void allreduce(const hcq::Buffer& buffer, uint64_t count, DataType type, ReduceOp op);
    // `bytes` of root's first buffer into every buffer of every rank.
    void broadcast(std::span<const hcq::Buffer> buffers, uint64_t bytes, int root);
    void broadcast(const hcq::Buffer& buffer, uint64_t bytes, int root);
    // recv = the ranks' `bytes_per_rank` of send, in rank order.
    void allgather(const hcq::Buffer& send, const hcq::Buffer& recv, uint64_t bytes_per_rank);
    // send holds size() blocks of count_per_rank elements; recv gets block rank() reduced over the ranks.
    void reduce_scatter(const hcq::Buffer& send, const hcq::Buffer& recv, uint64_t count_per_rank, DataType type, ReduceOp op);
    // Point to point: `bytes` of buffer to / from another rank; tags below 2^20.
    void send(const hcq::Buffer& buffer, uint64_t bytes, int to, int tag = 0);
    void recv(const hcq::Buffer& buffer, uint64_t bytes, int from, int tag = 0);

    // The error state: after a collective threw, every later call throws the same error.
    bool failed() const { return static_cast<bool>(failure_); }

    // How the data went so far: chunks copied between a device and the host slots (through the
    // copy queue, or by the host where the memory is the host's), device-to-device transfers to a
    // rank's other devices, and allreduces run in place in a buffer of host memory (no copies).
    struct Stats {
        uint64_t dma_copies = 0;     // the device's copy engine straight into or out of a host slot
        uint64_t device_copies = 0;  // Device::copy_out / copy_in (through the device's own staging)
        uint64_t host_copies = 0;
        uint64_t peer_transfers = 0;
        uint64_t in_place = 0;
    };
    Stats stats() const;

private:
    // Runs `body` with the error handling every operation shares: a failure of this rank's own
    // (a device error) is announced to the others; any failure leaves the communicator failed.
    template <typename Body>
    void guarded(const char* operation, Body&& body);
    void check_buffer(const hcq::Buffer& buffer, uint64_t bytes, const char* operation, const char* which) const;
    // Wait for a stager job while answering the other ranks.
    void await(Stager::Ticket ticket);
    // Host slot `i` of the pipeline (chunk_bytes each): one `via`'s engines reach by DMA where it
    // has them, else pinned memory (grown to `bytes` when needed).
    std::byte* slot(unsigned i, uint64_t bytes, const hcq::Device* via);
    // The host slot [host, host + bytes) as a buffer of `device`, when it is one of its DMA slots.
    std::optional<hcq::Buffer> dma_view(const hcq::Device& device, const std::byte* host, uint64_t bytes) const;
    std::byte* scratch(uint64_t bytes);
    std::byte* local_scratch(uint64_t bytes);
    // Device -> host and host -> device on the stager's thread.
    void fetch_into(std::byte* host, const hcq::Buffer& buffer, uint64_t offset, uint64_t bytes);
    void store_from(const hcq::Buffer& buffer, uint64_t offset, const std::byte* host, uint64_t bytes);
    // buffers[0] -> host, plus the other buffers' shares reduced into it (on the stager's thread).
    void fetch_reduced(std::byte* host, std::span<const hcq::Buffer> buffers, uint64_t offset, uint64_t count, DataType type,
                       ReduceOp op);
    // host -> buffers[first], then buffers[0] -> the others (transfer where they are peers).
    void store_all(std::span<const hcq::Buffer> buffers, uint64_t offset, const std::byte* host, uint64_t bytes, size_t first = 0);
    // The pipeline's slot for chunk k, once no stager job uses it any more.
    std::byte* take_slot(uint64_t k, uint64_t bytes, const hcq::Device* via);
    // Ring steps over host memory: segs[i] (lengths[i] bytes) is block i; `tag` names the collective.
    void ring_reduce_scatter(int tag, std::span<std::byte* const> segs, std::span<const uint64_t> lengths, DataType type, ReduceOp op,
                             const std::function<std::string()>& what);
    void ring_allgather(int tag, std::span<std::byte* const> segs, std::span<const uint64_t> lengths,
                        const std::function<std::string()>& what);
    // Receive from `from` and send to `to` at once (-1: no such half), and wait for both.
    void exchange(int tag, const std::byte* send, uint64_t send_bytes, int to, std::byte* recv, uint64_t recv_bytes, int from,
                  const std::function<std::string()>& what);

    std::vector<std::shared_ptr<hcq::Device>> devices_;
    Options options_;
    int rank_ = 0;
    int size_ = 1;
    MPI_Comm data_ = MPI_COMM_NULL;   // the collectives' messages
    MPI_Comm p2p_ = MPI_COMM_NULL;    // send / recv, with the caller's tags
    std::unique_ptr<PeerWatch> watch_;
    std::unique_ptr<Stager> stager_;
    std::vector<PinnedMemory> slots_;
    // Per device of this rank that reaches host memory by DMA: `slots` host buffers of chunk_bytes.
    std::vector<std::pair<const hcq::Device*, std::vector<hcq::Buffer>>> dma_slots_;
    std::vector<Stager::Ticket> slot_ticket_;  // the last stager job that uses each slot
    PinnedMemory scratch_;        // the calling thread's: a ring step's incoming block
    PinnedMemory local_scratch_;  // the stager's: another device's share, before it is added
    // Whether buffers[0]'s device reaches another's by Device::transfer (the stager's thread only).
    std::vector<std::pair<std::pair<const hcq::Device*, const hcq::Device*>, bool>> peers_;
    std::exception_ptr failure_;
    Stats stats_;  // the stager's thread writes it; stats() reads it once that thread is idle
};

}  // namespace baregpu::dist
