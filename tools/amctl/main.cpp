// amctl: bring up, reset and inspect an AMD GPU driven by drivers/am.
//   amctl info   [--device URI] [--json] [--force-reset]   what the chip is and runs
//   amctl reset  [--device URI] [--json]                   mode1 reset, with the time it took
//   amctl load   [--device URI] [--json] [--force-reset]   bring-up, a line per stage, a summary
//   amctl status [--device URI] [--json]                   up or not, owner, pending faults
// --link pcie|usb (load, sim-am:* only): the simulated link's cost model, for bring-up cost numbers.
// --queues (load): also start the HCQ queues (compute queue 0 on MEC1, SDMA0 queue 0) and stop them,
// so that a register trace (BAREGPU_SIM_TRACE=regs) covers queue setup too.
// URI: am:<pci address> (real hardware), am:usb:<bus>-<port> (behind an ASM24xx USB bridge),
// am:usb:sim (the simulated Navi31 behind the simulated bridge) or sim-am:navi31 / sim-am:navi48.
// Without --device: the first supported AMD GPU, else sim-am:navi31 (amctl says which).
#include "base/error.hpp"
#include "drivers/am/am_device.hpp"
#include "drivers/am/hcq_device.hpp"
#include "drivers/registry_am.hpp"
#include "firmware-loader/identify.hpp"
#include "firmware-loader/manifest.hpp"
#include "firmware-loader/search_path.hpp"
#include "tools/baregpu/json_writer.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <optional>
#include <string>
#include <vector>

using namespace baregpu;

namespace {

struct Args {
    std::string command;
    std::string device;
    bool json = false;
    bool force_reset = false;
    std::string link;  // sim-am:* only: pcie (default) or usb
    bool queues = false;
};

int usage(std::FILE* to) {
    fmt::print(to,
               "usage: amctl info|reset|load|status [--device URI] [--json] [--force-reset] [--link pcie|usb] [--queues]\n"
               "  URI: am:<pci address>, am:usb:<bus>-<port>, am:usb:sim, sim-am:navi31, sim-am:navi48 (default: the first AMD GPU, else sim-am:navi31)\n"
               "  --link: the simulated bus's cost model for sim-am:* (usb: 100 us per register round trip)\n"
               "  --queues (load): also start and stop the HCQ compute and copy queues\n");
    return to == stdout ? 0 : 2;
}

int usage_error(const char* problem) {
    fmt::print(stderr, "amctl: {}\n", problem);
    return usage(stderr);
}

double ms(std::chrono::nanoseconds t) { return static_cast<double>(t.count()) / 1e6; }

void stage_line(const am::StageReport& s) {
    fmt::print("  {:<16} {:>10.3f} ms  {:>7} reads {:>7} writes{}{}\n", s.name, ms(s.time), s.mmio_reads, s.mmio_writes,
               s.detail.empty() ? "" : "  ", s.detail);
    std::fflush(stdout);
}

void json_stages(tools::JsonWriter& j, const am::BringUpReport& r) {
    j.key("stages");
    j.begin_array();
    for (const am::StageReport& s : r.stages) {
        j.begin_object();
        j.key("name"); j.value(s.name);
        j.key("time_ms"); j.value(ms(s.time));
        j.key("mmio_reads"); j.value(static_cast<int64_t>(s.mmio_reads));
        j.key("mmio_writes"); j.value(static_cast<int64_t>(s.mmio_writes));
        j.key("detail"); j.value(s.detail);
        j.end_object();
    }
    j.end_array();
}

void json_summary(tools::JsonWriter& j, const am::BringUpReport& r) {
    j.key("start"); j.value(r.warm ? "warm" : "cold");
    j.key("why_cold"); j.value(r.why_cold);
    j.key("mode1_reset"); j.value(r.reset);
    j.key("stale_psp_ring_destroyed"); j.value(r.stale_ring_destroyed);
    j.key("time_ms"); j.value(ms(r.total));
    j.key("mmio_reads"); j.value(static_cast<int64_t>(r.mmio_reads));
    j.key("mmio_writes"); j.value(static_cast<int64_t>(r.mmio_writes));
    j.key("mmio_ops"); j.value(static_cast<int64_t>(r.mmio_ops()));
    j.key("vram_bytes_written"); j.value(static_cast<int64_t>(r.vram_bytes_written));
    j.key("vram_bytes_read"); j.value(static_cast<int64_t>(r.vram_bytes_read));
}

std::string summary_line(const am::BringUpReport& r) {
    return fmt::format("{} start in {:.3f} ms (device clock), {} register operations ({} reads, {} writes), "
                       "{} KiB written / {} KiB read through BAR0{}",
                       r.warm ? "warm" : "cold", ms(r.total), r.mmio_ops(), r.mmio_reads, r.mmio_writes,
                       r.vram_bytes_written >> 10, r.vram_bytes_read >> 10,
                       r.warm ? "" : fmt::format(" ({})", r.why_cold));
}

// What the firmware parsers noticed about the files a cold boot loaded (a CRC that matches no
// range, a PSP component of a type Linux does not load): the bring-up takes such files, as Linux
// does, and says so here.
void print_firmware_warnings(const Args& a, const am::AmDevice& device) {
    const fw::AsicManifest* manifest = fw::find_asic(device.asic().name);
    if (manifest == nullptr) return;
    std::vector<std::filesystem::path> dirs;
    for (const std::string& d : registry::am_firmware_dirs(a.device)) dirs.emplace_back(d);
    const fw::FirmwareSearchPath path(dirs);
    for (const fw::FirmwareNeed& need : manifest->files) {
        std::optional<std::filesystem::path> file = path.find(need.name);
        if (!file) continue;
        try {
            fw::FirmwareFile f = fw::read_firmware_file(*file);
            fw::Description d = fw::describe_firmware(fw::ByteReader(f.bytes, file->string()), file->filename().string());
            for (const std::string& w : d.warnings) fmt::print(stderr, "amctl: warning: {}: {}\n", file->string(), w);
        } catch (const Error& e) {
            fmt::print(stderr, "amctl: warning: {}\n", e.what());
        }
    }
}

int cmd_load(const Args& a) {
    am::AmOptions o;
    o.force_reset = a.force_reset;
    if (!a.json) {
        fmt::print("{}: bringing up\n", a.device);
        o.progress = stage_line;
        // A stage that is seconds long over a USB bridge shows each step as it ends.
        o.progress_step = [](std::string_view step, std::chrono::nanoseconds elapsed) {
            fmt::print("  {:<16} {:>10.3f} ms  {}\n", "  ...", ms(elapsed), step);
            std::fflush(stdout);
        };
    }
    registry::AmTarget t = registry::open_am(a.device, o, a.link);
    if (!t.note.empty()) fmt::print(stderr, "amctl: {}: {}\n", a.device, t.note);
    const am::BringUpReport r = t.device->report();  // a copy: --queues hands the device on
    if (!r.warm) print_firmware_warnings(a, *t.device);
    const std::string asic(t.device->asic().name);
    if (a.queues) {
        // The queues' setup (the HQD, the SDMA ring and engine), then their teardown with the device.
        am::AmHcqOptions ho;
        ho.name = a.device;
        ho.keepalive = t.keepalive;
        am::AmHcqDevice::create(std::move(t.device), std::move(ho));
    }
    if (a.json) {
        tools::JsonWriter j;
        j.begin_object();
        j.key("device"); j.value(a.device);
        j.key("asic"); j.value(asic);
        j.key("link"); j.value(a.link.empty() ? "pcie" : a.link);
        json_summary(j, r);
        json_stages(j, r);
        j.end_object();
        fmt::print("{}", j.text());
    } else {
        fmt::print("{}: {}{}\n", asic, summary_line(r), a.queues ? "; queues started and stopped" : "");
    }
    return 0;
}

int cmd_info(const Args& a) {
    am::AmOptions o;
    o.force_reset = a.force_reset;
    registry::AmTarget t = registry::open_am(a.device, o);
    am::AmDevice& d = *t.device;
    am::FirmwareVersions fw = d.firmware_versions();
    uint64_t features = d.smu_features();
    std::optional<am::SmuMetrics> metrics = d.smu_metrics();
    std::vector<uint32_t> gfxclk = d.dpm_levels(am::kPpclkGfx), uclk = d.dpm_levels(am::kPpclkUclk);
    std::vector<am::ClockLimit> limits = d.clock_limits();
    auto levels = [](const std::vector<uint32_t>& v) {
        std::string s;
        for (uint32_t f : v) s += (s.empty() ? "" : " ") + std::to_string(f);
        return s.empty() ? std::string("not reported") : s + " MHz";
    };
    const auto& blocks = d.discovery().blocks;
    if (a.json) {
        tools::JsonWriter j;
        j.begin_object();
        j.key("device"); j.value(a.device);
        j.key("asic"); j.value(std::string(d.asic().name));
        j.key("marketing"); j.value(std::string(d.asic().marketing));
        j.key("ip_versions");
        j.begin_object();
        for (const auto& b : blocks) { j.key(std::string(am::to_string(b.ip))); j.value(b.version.str()); }
        j.end_object();
        j.key("vram_bytes"); j.value(static_cast<int64_t>(d.vram_size()));
        j.key("gc_info");
        if (const auto& g = d.discovery().gc_info) {
            j.begin_object();
            j.key("shader_engines"); j.value(static_cast<int64_t>(g->num_se));
            j.key("shader_arrays_per_se"); j.value(static_cast<int64_t>(g->num_sa_per_se));
            j.key("wgp_per_sa"); j.value(static_cast<int64_t>(g->num_wgp0_per_sa + g->num_wgp1_per_sa));
            j.key("compute_units"); j.value(static_cast<int64_t>(g->compute_units()));
            j.key("max_waves_per_simd"); j.value(static_cast<int64_t>(g->max_waves_per_simd));
            j.key("lds_size"); j.value(static_cast<int64_t>(g->lds_size));
            j.end_object();
        } else {
            j.null();
        }
        j.key("harvested");
        j.begin_array();
        for (const auto& h : d.discovery().harvested) j.value(fmt::format("{} instance {}", fw::amd::hw_id_name(h.hw_id), h.instance));
        j.end_array();
        j.key("bars");
        j.begin_object();
        for (unsigned i : {0u, 2u, 5u}) { j.key(fmt::format("bar{}", i)); j.value(static_cast<int64_t>(d.pci().bar_info(i).size)); }
        j.end_object();
        j.key("psp_sos_version"); j.value(static_cast<int64_t>(fw.sos));
        j.key("smu_version"); j.value(static_cast<int64_t>(fw.smu));
        j.key("smu_features"); j.value(static_cast<int64_t>(features));
        j.key("gfxclk_levels_mhz");
        j.begin_array();
        for (uint32_t f : gfxclk) j.value(static_cast<int64_t>(f));
        j.end_array();
        j.key("uclk_levels_mhz");
        j.begin_array();
        for (uint32_t f : uclk) j.value(static_cast<int64_t>(f));
        j.end_array();
        // The soft limits the boot pinned (SetSoftMinByFreq / SetSoftMaxByFreq, as tinygrad's AM_SMU.set_clocks),
        // with the SMU's current frequency.
        j.key("clocks");
        j.begin_object();
        for (const am::ClockLimit& c : limits) {
            j.key(am::ppclk_name(c.clk));
            j.begin_object();
            j.key("min_mhz"); j.value(static_cast<int64_t>(c.min_mhz));
            j.key("max_mhz"); j.value(static_cast<int64_t>(c.max_mhz));
            j.key("current_mhz");
            if (metrics && c.clk < 4) j.value(static_cast<int64_t>(metrics->current_mhz[c.clk])); else j.null();
            j.end_object();
        }
        j.end_object();
        j.key("temperature_c");
        if (metrics) j.value(static_cast<int64_t>(metrics->edge_temperature_c)); else j.null();
        j.key("hotspot_temperature_c");
        if (metrics) j.value(static_cast<int64_t>(metrics->hotspot_temperature_c)); else j.null();
        j.key("power_w");
        if (metrics) j.value(static_cast<int64_t>(metrics->socket_power_w)); else j.null();
        j.key("gfx_activity_percent");
        if (metrics) j.value(static_cast<int64_t>(metrics->gfx_activity_percent)); else j.null();
        j.key("start"); j.value(d.report().warm ? "warm" : "cold");
        j.end_object();
        fmt::print("{}", j.text());
        return 0;
    }
    fmt::print("{}: {} ({})\n", a.device, d.asic().name, d.asic().marketing);
    fmt::print("  IP versions:");
    for (const auto& b : blocks) fmt::print(" {} {}", am::to_string(b.ip), b.version.str());
    fmt::print("\n");
    if (const auto& g = d.discovery().gc_info) {
        fmt::print("  GC: {} SE x {} SA x {} WGP = {} CUs, {} waves/SIMD, LDS {}\n", g->num_se, g->num_sa_per_se,
                   g->num_wgp0_per_sa + g->num_wgp1_per_sa, g->compute_units(), g->max_waves_per_simd, g->lds_size);
    }
    fmt::print("  harvested:");
    if (d.discovery().harvested.empty()) fmt::print(" nothing");
    for (const auto& h : d.discovery().harvested) fmt::print(" {} instance {}", fw::amd::hw_id_name(h.hw_id), h.instance);
    fmt::print("\n  VRAM {} MiB; BAR0 {} MiB, BAR2 {} KiB, BAR5 {} KiB\n", d.vram_size() >> 20,
               d.pci().bar_info(0).size >> 20, d.pci().bar_info(2).size >> 10, d.pci().bar_info(5).size >> 10);
    fmt::print("  firmware running: PSP sOS {:#010x}, SMU {:#010x}\n", fw.sos, fw.smu);
    fmt::print("  SMU features enabled: {:#018x}\n", features);
    fmt::print("  GFXCLK levels: {}; UCLK levels: {}\n", levels(gfxclk), levels(uclk));
    fmt::print("  clocks pinned (soft min-max):");
    if (limits.empty()) fmt::print(" none recorded by drivers/am");
    for (size_t i = 0; i < limits.size(); ++i) {
        const am::ClockLimit& c = limits[i];
        fmt::print("{} {} {}-{} MHz", i == 0 ? "" : ",", am::ppclk_name(c.clk), c.min_mhz, c.max_mhz);
        if (metrics && c.clk < 4) fmt::print(" (now {})", metrics->current_mhz[c.clk]);
    }
    fmt::print("\n");
    if (metrics) {
        fmt::print("  temperature {} C (hotspot {} C), power {} W, GFX activity {}%\n", metrics->edge_temperature_c,
                   metrics->hotspot_temperature_c, metrics->socket_power_w, metrics->gfx_activity_percent);
    } else {
        fmt::print("  temperature / power: not reported by this SMU\n");
    }
    fmt::print("  this open: {}\n", summary_line(d.report()));
    return 0;
}

int cmd_reset(const Args& a) {
    am::AmOptions o;
    o.force_reset = a.force_reset;
    registry::AmTarget t = registry::open_am(a.device, o);
    if (!t.note.empty()) fmt::print(stderr, "amctl: {}: {}\n", a.device, t.note);
    std::chrono::nanoseconds took = t.device->mode1_reset();
    if (a.json) {
        tools::JsonWriter j;
        j.begin_object();
        j.key("device"); j.value(a.device);
        j.key("reset"); j.value("mode1");
        j.key("time_ms"); j.value(ms(took));
        j.end_object();
        fmt::print("{}", j.text());
    } else {
        fmt::print("{}: mode1 reset done in {:.3f} ms (device clock); the next open boots fully\n", a.device, ms(took));
    }
    return 0;
}

int cmd_status(const Args& a) {
    std::optional<pid_t> owner = registry::am_owner(a.device);
    bool up = false;
    std::vector<std::string> faults;
    uint32_t fault_status = 0;
    std::string why;
    if (!owner) {
        am::AmOptions o;
        o.inspect_only = true;
        registry::AmTarget t = registry::open_am(a.device, o);
        up = t.device->report().warm;
        why = t.device->report().why_cold;
        if (up) {
            for (const am::IhEntry& e : t.device->pending_interrupts()) {
                if (e.kind() == am::IhEntry::Kind::page_fault) faults.push_back(e.describe());
            }
            fault_status = t.device->gc_fault_status();
        }
    }
    if (a.json) {
        tools::JsonWriter j;
        j.begin_object();
        j.key("device"); j.value(a.device);
        j.key("owner_pid");
        if (owner) j.value(static_cast<int64_t>(*owner)); else j.null();
        j.key("up");
        if (owner) j.null(); else j.value(up);
        j.key("gc_fault_status"); j.value(static_cast<int64_t>(fault_status));
        j.key("pending_faults");
        j.begin_array();
        for (const std::string& f : faults) j.value(f);
        j.end_array();
        j.end_object();
        fmt::print("{}", j.text());
        return 0;
    }
    if (owner) {
        fmt::print("{}: owned by pid {} (not inspected: the owner drives it)\n", a.device, *owner);
        return 0;
    }
    fmt::print("{}: {}\n", a.device, up ? "up (initialised by drivers/am, clean)" : "not up: " + why);
    fmt::print("  owner: none\n");
    if (up) {
        fmt::print("  GC VM fault status: {:#x}\n", fault_status);
        fmt::print("  page faults pending in the IH ring: {}\n", faults.size());
        for (const std::string& f : faults) fmt::print("    {}\n", f);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Args a;
    std::vector<std::string> rest(argv + 1, argv + argc);
    for (size_t i = 0; i < rest.size(); ++i) {
        const std::string& s = rest[i];
        if (s == "--json") {
            a.json = true;
        } else if (s == "--force-reset") {
            a.force_reset = true;
        } else if (s == "--device" && i + 1 < rest.size()) {
            a.device = rest[++i];
            if (a.device.empty()) return usage_error("--device needs a device name");
        } else if (s.starts_with("--device=")) {
            a.device = s.substr(9);
            if (a.device.empty()) return usage_error("--device needs a device name");
        } else if (s == "--link" && i + 1 < rest.size()) {
            a.link = rest[++i];
            if (a.link != "pcie" && a.link != "usb") return usage_error("--link is pcie or usb");
        } else if (s == "--queues") {
            a.queues = true;
        } else if (s == "-h" || s == "--help") {
            return usage(stdout);
        } else if (a.command.empty() && !s.starts_with("-")) {
            a.command = s;
        } else {
            fmt::print(stderr, "amctl: unexpected argument '{}'\n", s);
            return usage(stderr);
        }
    }
    if (a.command.empty()) return usage(stderr);
    try {
        if (a.device.empty()) {
            std::string note;
            a.device = registry::default_am_uri(&note);
            if (!a.json) fmt::print("amctl: {}\n", note);
        } else if (!registry::is_am_uri(a.device)) {
            fmt::print(stderr, "amctl: '{}' is not an AM device (am:<pci address>, am:usb:<bus>-<port>, am:usb:sim, sim-am:navi31, sim-am:navi48)\n", a.device);
            return 2;
        }
        if (!a.link.empty() && (a.command != "load" || !a.device.starts_with("sim-am:"))) {
            fmt::print(stderr, "amctl: --link sets the simulated link of `amctl load --device sim-am:...` only\n");
            return 2;
        }
        if (a.command == "load") return cmd_load(a);
        if (a.command == "info") return cmd_info(a);
        if (a.command == "reset") return cmd_reset(a);
        if (a.command == "status") return cmd_status(a);
        fmt::print(stderr, "amctl: unknown command '{}'\n", a.command);
        return usage(stderr);
    } catch (const BusyError& e) {
        fmt::print(stderr, "amctl: {} (owner pid {})\n", e.what(), e.owner_pid());
        return 1;
    } catch (const Error& e) {
        fmt::print(stderr, "amctl: {}\n", e.what());
        // A chip that answers wrongly or not at all (not a refused file or option).
        const bool chip_failed = dynamic_cast<const TimeoutError*>(&e) != nullptr || dynamic_cast<const ProtocolError*>(&e) != nullptr;
        if (chip_failed && !a.force_reset && (a.device.starts_with("sim-am:") || a.device == "am:usb:sim") && a.command != "status") {
            // The state file may be what is wrong: say how to get the chip back without deleting it.
            fmt::print(stderr, "amctl: a simulated chip whose saved state is damaged comes back with `amctl load --force-reset "
                               "--device {}` (a reset, else a power cycle)\n",
                       a.device == "am:usb:sim" ? "sim-am:navi31" : a.device);
        }
        return 1;
    }
}
