#include "dist/peer_watch.hpp"

#include "dist/mpi.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

namespace baregpu::dist {

namespace {

enum : int32_t { kHeartbeat = 0, kFailure = 1 };
constexpr int kControlTag = 1;
constexpr uint64_t kExitCheckNs = 20'000'000;  // how often a wait looks for ranks of this host that exited

uint64_t now_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// A notice on the wire: kind, the rank it is about, then the text.
std::string encode(int32_t kind, int32_t about, const std::string& text) {
    std::string wire(8 + text.size(), '\0');
    std::memcpy(wire.data(), &kind, 4);
    std::memcpy(wire.data() + 4, &about, 4);
    std::memcpy(wire.data() + 8, text.data(), text.size());
    return wire;
}

// Poll, yielding the core, for the first millisecond of a wait, then sleep between polls, longer
// as the wait goes on. MPI moves a large message between processes only while both poll it
// (shared-memory fragments, no progress thread): a receiver asleep for long stalls the sender,
// and a chunk's fragments pass within a millisecond. Longer waits are for a rank that is busy or
// shares this core (4 ranks on 2 cores in the tests): polling on would take the core it needs.
void back_off(uint64_t polls, uint64_t waited_ns) {
    if (polls < 64) return;
    if (waited_ns < 1'000'000) {
        std::this_thread::yield();
        return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(waited_ns < 10'000'000 ? 50 : 500));
}

std::string join_ranks(const std::vector<int>& ranks, const PeerWatch& watch) {
    std::string out;
    for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + watch.describe(ranks[i]);
    return out;
}

}  // namespace

PeerWatch::PeerWatch(MPI_Comm control, int rank, std::vector<RankInfo> ranks, hcq::Duration timeout)
    : control_(control), rank_(rank), ranks_(std::move(ranks)), timeout_(timeout), last_heard_ns_(ranks_.size(), now_ns()),
      host_(ranks_.at(static_cast<size_t>(rank)).host) {}

PeerWatch::~PeerWatch() {
    // Take what is still queued (heartbeats of ranks that waited on this one), then let go.
    try {
        service_notices_only_ = true;
        receive_notices();
    } catch (...) {
    }
    MPI_Comm_free(&control_);
}

std::string PeerWatch::describe(int rank) const {
    if (rank < 0 || rank >= size()) return fmt::format("rank {}", rank);
    const RankInfo& r = ranks_[static_cast<size_t>(rank)];
    return fmt::format("rank {} (pid {} on {}, {})", rank, r.pid, r.host, r.devices);
}

void PeerWatch::heartbeat(uint64_t now) {
    const uint64_t interval =
        std::clamp<uint64_t>(static_cast<uint64_t>(timeout_.count()) / 8, 1'000'000, 200'000'000);
    if (now - last_heartbeat_ns_ < interval) return;
    last_heartbeat_ns_ = now;
    static const std::string beat = encode(kHeartbeat, 0, "");
    for (int r = 0; r < size(); ++r) {
        if (r == rank_) continue;
        MPI_Request request;
        // Freed at once: a few bytes, sent eagerly; nothing waits for them.
        if (MPI_Isend(beat.data(), static_cast<int>(beat.size()), MPI_BYTE, r, kControlTag, control_, &request) == MPI_SUCCESS)
            MPI_Request_free(&request);
    }
}

void PeerWatch::receive_notices() {
    for (;;) {
        int flag = 0;
        MPI_Status status;
        mpi::check(MPI_Iprobe(MPI_ANY_SOURCE, kControlTag, control_, &flag, &status), "MPI_Iprobe (control channel)");
        if (!flag) return;
        int bytes = 0;
        MPI_Get_count(&status, MPI_BYTE, &bytes);
        std::string wire(static_cast<size_t>(std::max(bytes, 8)), '\0');
        mpi::check(MPI_Recv(wire.data(), bytes, MPI_BYTE, status.MPI_SOURCE, kControlTag, control_, MPI_STATUS_IGNORE),
                   "MPI_Recv (control channel)");
        const int from = status.MPI_SOURCE;
        if (from >= 0 && from < size()) last_heard_ns_[static_cast<size_t>(from)] = now_ns();
        int32_t kind = 0, about = 0;
        std::memcpy(&kind, wire.data(), 4);
        std::memcpy(&about, wire.data() + 4, 4);
        if (kind != kFailure || service_notices_only_) continue;
        std::string text = wire.substr(8, static_cast<size_t>(bytes) - 8);
        announced_ = true;  // the ranks know already: whoever sent this told every one of them
        throw RankError(about, from == about ? text : fmt::format("{} (reported by rank {})", text, from));
    }
}

void PeerWatch::service(uint64_t now) {
    heartbeat(now);
    receive_notices();
}

std::vector<int> PeerWatch::suspects(const std::vector<int>& candidates, uint64_t now, bool by_silence) const {
    std::vector<int> out;
    for (int r : candidates) {
        const RankInfo& info = ranks_[static_cast<size_t>(r)];
        const bool exited = info.host == host_ && info.pid > 0 && ::kill(info.pid, 0) != 0 && errno == ESRCH;
        const bool silent = now - last_heard_ns_[static_cast<size_t>(r)] > static_cast<uint64_t>(timeout_.count()) / 2;
        if (exited || (by_silence && silent)) out.push_back(r);
    }
    return out;
}

void PeerWatch::blame(const std::vector<int>& ranks, uint64_t waited_ns, bool exited, const std::string& what) {
    const double waited_ms = static_cast<double>(waited_ns) / 1e6;
    std::string message;
    int about = ranks.empty() ? rank_ : ranks.front();
    if (exited) {
        message = fmt::format("{} exited during {} (rank {} had waited {:.0f} ms in this step)", join_ranks(ranks, *this), what, rank_,
                              waited_ms);
    } else if (!ranks.empty()) {
        message = fmt::format("{} sent nothing for {:.0f} ms (BAREGPU_TIMEOUT_MS) while rank {} waited in {}: it died, is stopped, or "
                              "is busy outside baregpu::dist",
                              join_ranks(ranks, *this), waited_ms, rank_, what);
    } else {
        message = fmt::format("rank {} waited {:.0f} ms (BAREGPU_TIMEOUT_MS) in {} while every rank it waited on was alive and waiting: "
                              "the ranks called different operations, the same ones in another order, or with other sizes",
                              rank_, waited_ms, what);
    }
    announce(about, message);
    throw RankError(about, message);
}

void PeerWatch::announce(int about_rank, const std::string& message) noexcept {
    if (announced_) return;
    announced_ = true;
    try {
        sent_.push_back(encode(kFailure, about_rank, message));
        const std::string& wire = sent_.back();
        for (int r = 0; r < size(); ++r) {
            if (r == rank_) continue;
            MPI_Request request;
            if (MPI_Isend(wire.data(), static_cast<int>(wire.size()), MPI_BYTE, r, kControlTag, control_, &request) == MPI_SUCCESS)
                MPI_Request_free(&request);
        }
    } catch (...) {
    }
}

void PeerWatch::wait(std::span<MPI_Request> requests, std::span<const int> peers, bool collective,
                     const std::function<std::string()>& what) {
    const uint64_t start = now_ns();
    const uint64_t deadline = start + static_cast<uint64_t>(timeout_.count());
    // Exited: only the ranks this step exchanges with (one that finished the collective may exit
    // before this rank's last step). Silent: any participant (the cause may be further along the ring).
    std::vector<int> direct, candidates;
    for (int r = 0; r < size(); ++r) {
        const bool peer = std::find(peers.begin(), peers.end(), r) != peers.end();
        if (r != rank_ && peer) direct.push_back(r);
        if (r != rank_ && (collective || peer)) candidates.push_back(r);
    }
    std::vector<int> indices(requests.size());
    try {
        for (uint64_t polls = 0;; ++polls) {
            int completed = 0;
            int code = MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &completed, indices.data(), MPI_STATUSES_IGNORE);
            if (code != MPI_SUCCESS) throw Error("", fmt::format("MPI_Testsome in {}: {}", what(), mpi::error_text(code)));
            const uint64_t now = now_ns();
            if (completed == MPI_UNDEFINED) return;  // none left active
            for (int i = 0; i < completed; ++i) last_heard_ns_[static_cast<size_t>(peers[static_cast<size_t>(indices[static_cast<size_t>(i)])])] = now;
            if (std::all_of(requests.begin(), requests.end(), [](MPI_Request r) { return r == MPI_REQUEST_NULL; })) return;
            service(now);
            if (now - last_exit_check_ns_ >= kExitCheckNs) {
                last_exit_check_ns_ = now;
                if (auto gone = suspects(direct, now, false); !gone.empty()) {
                    // One that announced a failure (another rank's exit) and then exited: its notice is the cause.
                    receive_notices();
                    blame(gone, now - start, true, what());
                }
            }
            if (now >= deadline) blame(suspects(candidates, now, true), now - start, false, what());
            if (completed == 0) back_off(polls, now - start);
        }
    } catch (...) {
        for (MPI_Request& r : requests) {
            if (r == MPI_REQUEST_NULL) continue;
            MPI_Cancel(&r);
            MPI_Request_free(&r);
        }
        throw;
    }
}

void PeerWatch::wait_local(const std::function<bool()>& done) {
    const uint64_t start = now_ns();
    for (uint64_t polls = 0; !done(); ++polls) {
        const uint64_t now = now_ns();
        service(now);
        back_off(polls, now - start);
    }
}

}  // namespace baregpu::dist
