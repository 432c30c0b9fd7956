// `baregpu p2p`: which devices reach each other as bus peers (Device::transfer across peer
// groups: one device's copy engine writing into the other's VRAM through its BAR), and the
// bandwidth of each direction next to the same copy bounced through host memory (copy_out to
// the host, copy_in from it). On the simulated bus the figures are modelled link time (the
// DMA time the bus's PCIe 4.0 x16 model charges the devices, SimBusTraffic::dma_ns), so they
// are the same on every machine; on real devices they are wall-clock time.
#include "base/error.hpp"
#include "drivers/registry.hpp"
#include "hcq/device.hpp"
#include "hcq/registry.hpp"
#include "tools/baregpu/commands.hpp"
#include "tools/baregpu/json_writer.hpp"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::tools {

namespace {

constexpr const char* kP2pUsage =
    "usage: baregpu p2p [--devices URI,URI,...] [--bytes N] [--window N] [--json]\n"
    "  --devices  the devices to pair (default: sim-am:navi31, sim-am:navi48 and sim-nv:ad102 on one simulated bus,\n"
    "             each opened with ?bus=p2p)\n"
    "  --bytes    bytes per transfer (default 64 MiB)\n"
    "  --window   bytes of the destination's BAR one peer mapping covers (default: 256 MiB)\n"
    "  --json     print {\"device\": ..., \"results\": [{\"name\", \"value\", \"unit\", ...}]}, one result per ordered pair\n";

int p2p_usage(const std::string& problem) {
    std::fprintf(stderr, "baregpu p2p: %s\n%s", problem.c_str(), kP2pUsage);
    return 2;
}

struct Peer {
    std::string label;  // the URI without options
    std::shared_ptr<hcq::Device> device;
};

struct PairResult {
    std::string from, to;
    bool reachable = false;
    std::string reason;  // when not
    bool modelled = false;
    double p2p_gbps = 0, bounce_gbps = 0;
    bool intact = false;
};

std::vector<uint64_t> pattern(uint64_t bytes, uint64_t seed) {
    std::vector<uint64_t> words(bytes / 8);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint64_t& w : words) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w = x;
    }
    return words;
}

// DMA link time of both devices (modelled) or nullopt when they are not on a simulated bus.
std::optional<uint64_t> dma_ns(hcq::Device& a, hcq::Device& b) {
    auto ta = registry::sim_bus_traffic(a), tb = registry::sim_bus_traffic(b);
    if (!ta || !tb) return std::nullopt;
    return ta->dma_ns + tb->dma_ns;
}

uint64_t wall_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

PairResult measure(Peer& from, Peer& to, uint64_t bytes, uint64_t window, uint64_t seed) {
    PairResult r;
    r.from = from.label;
    r.to = to.label;
    hcq::Device& a = *from.device;
    hcq::Device& b = *to.device;
    hcq::Buffer src = a.allocate(bytes), dst = b.allocate(bytes);
    const std::vector<uint64_t> data = pattern(bytes, seed);
    const auto as_bytes = std::as_bytes(std::span(data));
    a.copy_in(src, as_bytes);
    a.synchronize();
    b.synchronize();
    const hcq::TransferOptions options{.window_bytes = window};
    try {
        hcq::Device::transfer(dst, src, 4096, options);  // reachable at all?
        a.synchronize();
        b.synchronize();
    } catch (const UnsupportedError& e) {
        r.reason = e.what();
        return r;
    }
    r.reachable = true;
    const std::optional<uint64_t> m0 = dma_ns(a, b);
    r.modelled = m0.has_value();
    const uint64_t w0 = wall_ns();
    hcq::Device::transfer(dst, src, bytes, options);
    b.synchronize();
    a.synchronize();
    const uint64_t p2p_ns = r.modelled ? *dma_ns(a, b) - *m0 : wall_ns() - w0;

    std::vector<uint64_t> back(bytes / 8);
    b.copy_out(std::as_writable_bytes(std::span(back)), dst);
    r.intact = back == data;

    // The same bytes bounced: a's engine into host memory, then b's from it.
    std::fill(back.begin(), back.end(), 0);
    const std::optional<uint64_t> m1 = dma_ns(a, b);
    const uint64_t w1 = wall_ns();
    a.copy_out(std::as_writable_bytes(std::span(back)), src);
    b.copy_in(dst, std::as_bytes(std::span(back)));
    b.synchronize();
    const uint64_t bounce_ns = r.modelled ? *dma_ns(a, b) - *m1 : wall_ns() - w1;
    r.p2p_gbps = p2p_ns ? static_cast<double>(bytes) / static_cast<double>(p2p_ns) : 0;
    r.bounce_gbps = bounce_ns ? static_cast<double>(bytes) / static_cast<double>(bounce_ns) : 0;
    return r;
}

std::string first_line(const std::string& text, size_t max) {
    std::string line = text.substr(0, text.find('\n'));
    return line.size() > max ? line.substr(0, max - 3) + "..." : line;
}

}  // namespace

int p2p_command(std::span<const std::string_view> args) {
    std::vector<std::string> uris = {"sim-am:navi31?bus=p2p", "sim-am:navi48?bus=p2p", "sim-nv:ad102?bus=p2p"};
    uint64_t bytes = 64ull << 20, window = 0;
    bool json = false;
    for (size_t i = 0; i < args.size(); ++i) {
        std::string_view a = args[i];
        auto value = [&]() -> std::string_view { return i + 1 < args.size() ? args[++i] : std::string_view(); };
        auto number = [&](uint64_t& out) {
            std::string_view v = value();
            auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
            return ec == std::errc() && end == v.data() + v.size() && out != 0;
        };
        if (a == "--devices") {
            std::string list(value());
            if (list.empty()) return p2p_usage("--devices needs device URIs");
            uris.clear();
            for (size_t start = 0;;) {
                size_t comma = list.find(',', start);
                uris.push_back(list.substr(start, comma - start));
                // An empty item would open the default device under an empty label.
                if (uris.back().empty()) return p2p_usage("--devices '" + list + "' has an empty device name");
                if (comma == std::string::npos) break;
                start = comma + 1;
            }
            if (uris.size() < 2) return p2p_usage("--devices needs at least two devices");
        } else if (a == "--bytes") {
            // Transfers move whole pages (a peer mapping is page-granular).
            if (!number(bytes) || bytes % 4096 != 0) return p2p_usage("--bytes needs a positive multiple of 4096");
        } else if (a == "--window") {
            if (!number(window) || window % 4096 != 0) return p2p_usage("--window needs a positive multiple of 4096");
        } else if (a == "--json") {
            json = true;
        } else if (a == "-h" || a == "--help") {
            std::fputs(kP2pUsage, stdout);
            return 0;
        } else {
            return p2p_usage("unknown argument '" + std::string(a) + "'");
        }
    }

    std::vector<Peer> peers;
    for (const std::string& uri : uris) peers.push_back({uri.substr(0, uri.find('?')), hcq::open_device(uri)});
    std::vector<PairResult> results;
    uint64_t seed = 1;
    for (Peer& from : peers) {
        for (Peer& to : peers) {
            if (&from != &to) results.push_back(measure(from, to, bytes, window, seed++));
        }
    }
    bool all_intact = true;
    for (const PairResult& r : results) all_intact = all_intact && (!r.reachable || r.intact);

    std::string device_list;
    for (const Peer& p : peers) device_list += (device_list.empty() ? "" : ",") + p.device->name();
    if (json) {
        JsonWriter w;
        w.begin_object();
        w.key("device");
        w.value(device_list);
        w.key("results");
        w.begin_array();
        for (const PairResult& r : results) {
            w.begin_object();
            w.key("name");
            w.value(fmt::format("p2p_write:{}->{}", r.from, r.to));
            w.key("value");
            w.value(r.p2p_gbps);
            w.key("unit");
            w.value("GB/s");
            w.key("reachable");
            w.value(r.reachable);
            if (r.reachable) {
                w.key("host_bounce_gbps");
                w.value(r.bounce_gbps);
                w.key("ratio");
                w.value(r.bounce_gbps > 0 ? r.p2p_gbps / r.bounce_gbps : 0.0);
                w.key("bytes");
                w.value(static_cast<int64_t>(bytes));
                w.key("modelled");
                w.value(r.modelled);
                w.key("intact");
                w.value(r.intact);
            } else {
                w.key("reason");
                w.value(r.reason);
            }
            w.end_object();
        }
        w.end_array();
        w.end_object();
        std::fputs(w.text().c_str(), stdout);
        return all_intact ? 0 : 1;
    }

    std::string out = "devices:\n";
    for (size_t i = 0; i < peers.size(); ++i) out += fmt::format("  [{}] {} ({})\n", i, peers[i].label, peers[i].device->name());
    out += "\nreachability (row: the copy engine's device, writing; column: the destination, through its BAR):\n      ";
    for (size_t j = 0; j < peers.size(); ++j) out += fmt::format("  [{}]", j);
    out += "\n";
    size_t k = 0;
    std::vector<std::string> reasons;
    for (size_t i = 0; i < peers.size(); ++i) {
        out += fmt::format("  [{}] ", i);
        for (size_t j = 0; j < peers.size(); ++j) {
            if (i == j) {
                out += "    -";
                continue;
            }
            const PairResult& r = results[k++];
            if (r.reachable) {
                out += "  yes";
            } else {
                reasons.push_back(fmt::format("  [{}] -> [{}]: {}", i, j, first_line(r.reason, 400)));
                out += "   no";
            }
        }
        out += "\n";
    }
    for (const std::string& why : reasons) out += why + "\n";
    bool modelled = false;
    for (const PairResult& r : results) modelled = modelled || r.modelled;
    out += fmt::format("\nbandwidth, {} per transfer ({}):\n", bytes >= (1u << 20) ? fmt::format("{} MiB", bytes >> 20) : fmt::format("{} B", bytes),
                       modelled ? "modelled link time on the simulated PCIe 4.0 x16 bus" : "wall-clock time");
    out += fmt::format("  {:<34} {:>10} {:>13} {:>7}  {}\n", "pair", "p2p GB/s", "bounce GB/s", "ratio", "data");
    for (const PairResult& r : results) {
        if (!r.reachable) continue;
        out += fmt::format("  {:<34} {:>10.2f} {:>13.2f} {:>7.2f}  {}\n", r.from + " -> " + r.to, r.p2p_gbps, r.bounce_gbps,
                           r.bounce_gbps > 0 ? r.p2p_gbps / r.bounce_gbps : 0.0, r.intact ? "intact" : "CORRUPTED");
    }
    std::fputs(out.c_str(), stdout);
    return all_intact ? 0 : 1;
}

}  // namespace baregpu::tools
