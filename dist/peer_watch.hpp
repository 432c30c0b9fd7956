// How one rank waits on the others without hanging: every wait of the dist layer polls its MPI
// requests and, beside them, a control communicator on which waiting ranks send each other
// heartbeats and failure notices. A rank that fails (its device faulted, a wait timed out) tells
// every other rank why, so all of them fail with the same message naming it. A rank that exits is
// named as soon as it is gone where it runs on this host (its pid no longer exists); one on another
// host, or stopped, is named once nothing was heard from it for the timeout. No progress thread:
// MPI is called only from the thread in a collective (MPI_THREAD_SERIALIZED).
#pragma once

#include "base/error.hpp"
#include "hcq/types.hpp"

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace baregpu::dist {

// Another rank failed, exited or went silent, or this rank's part failed and was reported to the
// others. rank(): the rank it is about.
class RankError : public Error {
public:
    RankError(int rank, const std::string& message) : Error("", message), rank_(rank) {}
    int rank() const noexcept { return rank_; }

private:
    int rank_;
};

// Who a rank is, for messages: "rank 2 (pid 4711 on node7, sim-am:navi31)".
struct RankInfo {
    int pid = 0;
    std::string host;
    std::string devices;
};

class PeerWatch {
public:
    // control: a communicator of its own (this object frees it); ranks: every rank's RankInfo.
    PeerWatch(MPI_Comm control, int rank, std::vector<RankInfo> ranks, hcq::Duration timeout);
    ~PeerWatch();
    PeerWatch(const PeerWatch&) = delete;
    PeerWatch& operator=(const PeerWatch&) = delete;

    // Until every request is complete; peers[i] is the rank requests[i] exchanges with, and `what`
    // says what this rank is doing, for messages. Throws RankError when a rank failed (its notice),
    // a peer exited, or a rank was silent for the timeout (every participant counts when
    // `collective`, else the peers).
    // Completed requests are MPI_REQUEST_NULL on return; on a throw the rest are cancelled.
    void wait(std::span<MPI_Request> requests, std::span<const int> peers, bool collective,
              const std::function<std::string()>& what);
    // Until done() (work of this rank's own, such as a device copy, bounded by its own timeout),
    // answering the control channel meanwhile so that no other rank takes this one for dead.
    void wait_local(const std::function<bool()>& done);

    // This rank's failure, for every other rank: sent once, then thrown by them as RankError.
    void announce(int about_rank, const std::string& message) noexcept;

    // "rank 2 (pid 4711 on node7, sim-am:navi31)".
    std::string describe(int rank) const;
    int rank() const { return rank_; }
    int size() const { return static_cast<int>(ranks_.size()); }
    hcq::Duration timeout() const { return timeout_; }

private:
    void service(uint64_t now_ns);
    void heartbeat(uint64_t now_ns);
    void receive_notices();
    // The ranks among `candidates` known to be gone (exited, on this host) or silent for the timeout.
    std::vector<int> suspects(const std::vector<int>& candidates, uint64_t now_ns, bool by_silence) const;
    [[noreturn]] void blame(const std::vector<int>& ranks, uint64_t waited_ns, bool exited, const std::string& what);

    MPI_Comm control_;
    int rank_;
    std::vector<RankInfo> ranks_;
    hcq::Duration timeout_;
    std::vector<uint64_t> last_heard_ns_;
    uint64_t last_heartbeat_ns_ = 0;
    uint64_t last_exit_check_ns_ = 0;
    std::string host_;
    bool announced_ = false;
    bool service_notices_only_ = false;  // in the destructor: drain, never throw
    std::deque<std::string> sent_;  // notices in flight: MPI reads them after MPI_Request_free
};

}  // namespace baregpu::dist
