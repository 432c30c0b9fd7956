// fwinfo: what a GPU firmware file is and what its headers say, checked the way the drivers check
// it before any byte reaches a device.
//
//   fwinfo [--json] FILE...          decode each file (.zst / .xz are decompressed first)
//   fwinfo [--json] --asic NAME      the files chip NAME needs, where they were found, and whether
//                                    each one parses (search path: $BAREGPU_FIRMWARE_PATH,
//                                    /lib/firmware/updates, /lib/firmware)
//   fwinfo --list-asics
//
// Exit status: 0 when every file parsed (and, with --asic, every required file was found), 1
// otherwise, 2 for a usage error.
#include "base/error.hpp"
#include "firmware-loader/identify.hpp"
#include "firmware-loader/manifest.hpp"
#include "firmware-loader/search_path.hpp"
#include "tools/baregpu/json_writer.hpp"

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace baregpu;
using baregpu::tools::JsonWriter;

constexpr const char* kUsage =
    "usage: fwinfo [--json] FILE...\n"
    "       fwinfo [--json] --asic NAME\n"
    "       fwinfo --list-asics\n";

// One file's outcome: its description, or the error that stopped the parse.
struct Report {
    std::string shown_name;  // as given on the command line, or the firmware name for --asic
    std::optional<std::filesystem::path> path;
    uint64_t bytes = 0;
    bool compressed = false;
    std::optional<fw::Description> description;
    std::string error;
};

Report decode(const std::filesystem::path& path, std::string shown_name) {
    Report r;
    r.shown_name = std::move(shown_name);
    r.path = path;
    try {
        fw::FirmwareFile file = fw::read_firmware_file(path);
        r.bytes = file.bytes.size();
        r.compressed = file.compressed;
        std::string base = path.filename().string();
        r.description = fw::describe_firmware(fw::ByteReader(file.bytes, path.string()), base);
    } catch (const Error& e) {
        r.error = e.what();
    }
    return r;
}

std::string field_text(const fw::Field& f) {
    if (const auto* n = std::get_if<uint64_t>(&f.value))
        return f.style == fw::Field::Style::hex ? fw::hex(*n) : std::to_string(*n);
    if (const auto* s = std::get_if<std::string>(&f.value)) return *s;
    return std::get<bool>(f.value) ? "yes" : "no";
}

void print_text(const Report& r) {
    if (!r.description) {
        std::printf("%s: ERROR: %s\n", r.shown_name.c_str(), r.error.c_str());
        return;
    }
    const fw::Description& d = *r.description;
    std::printf("%s: %s (%llu bytes%s)\n", r.shown_name.c_str(), d.format.c_str(), static_cast<unsigned long long>(r.bytes),
                r.compressed ? ", decompressed" : "");
    for (const fw::Field& f : d.fields) std::printf("  %-40s %s\n", f.name.c_str(), field_text(f).c_str());
    if (!d.parts.empty()) std::printf("  parts:\n");
    for (const fw::Part& p : d.parts) {
        std::string line = "offset " + std::to_string(p.offset);
        line.resize(std::max<size_t>(line.size(), 17), ' ');
        line += " size " + std::to_string(p.size);
        for (const fw::Field& f : p.fields) {
            line.resize(std::max<size_t>(line.size(), 34), ' ');
            line += " " + f.name + "=" + field_text(f);
        }
        std::printf("    %-28s %s\n", p.name.c_str(), line.c_str());
    }
    for (const std::string& w : d.warnings) std::printf("  warning: %s\n", w.c_str());
}

void field_json(JsonWriter& w, const fw::Field& f) {
    w.key(f.name);
    if (const auto* n = std::get_if<uint64_t>(&f.value))
        w.value(static_cast<int64_t>(*n));  // every field fits: u32 header words, u64 addresses < 2^63
    else if (const auto* s = std::get_if<std::string>(&f.value))
        w.value(*s);
    else
        w.value(std::get<bool>(f.value));
}

void report_json(JsonWriter& w, const Report& r) {
    w.begin_object();
    w.key("name");
    w.value(r.shown_name);
    w.key("path");
    if (r.path) w.value(r.path->string()); else w.null();
    w.key("ok");
    w.value(r.description.has_value());
    if (!r.description) {
        w.key("error");
        w.value(r.error);
        w.end_object();
        return;
    }
    const fw::Description& d = *r.description;
    w.key("bytes");
    w.value(static_cast<int64_t>(r.bytes));
    w.key("compressed");
    w.value(r.compressed);
    w.key("format");
    w.value(d.format);
    w.key("fields");
    w.begin_object();
    for (const fw::Field& f : d.fields) field_json(w, f);
    w.end_object();
    w.key("parts");
    w.begin_array();
    for (const fw::Part& p : d.parts) {
        w.begin_object();
        w.key("name");
        w.value(p.name);
        w.key("offset");
        w.value(static_cast<int64_t>(p.offset));
        w.key("size");
        w.value(static_cast<int64_t>(p.size));
        for (const fw::Field& f : p.fields) field_json(w, f);
        w.end_object();
    }
    w.end_array();
    w.key("warnings");
    w.begin_array();
    for (const std::string& warning : d.warnings) w.value(warning);
    w.end_array();
    w.end_object();
}

int files_command(const std::vector<std::string_view>& files, bool json) {
    std::vector<Report> reports;
    for (std::string_view f : files) reports.push_back(decode(std::filesystem::path(f), std::string(f)));
    bool ok = true;
    for (const Report& r : reports) ok &= r.description.has_value();
    if (json) {
        JsonWriter w;
        w.begin_object();
        w.key("files");
        w.begin_array();
        for (const Report& r : reports) report_json(w, r);
        w.end_array();
        w.end_object();
        std::fputs(w.text().c_str(), stdout);
    } else {
        for (size_t i = 0; i < reports.size(); ++i) {
            if (i) std::printf("\n");
            print_text(reports[i]);
        }
    }
    for (const Report& r : reports)
        if (!r.description) std::fprintf(stderr, "fwinfo: %s\n", r.error.c_str());
    return ok ? 0 : 1;
}

int asic_command(std::string_view name, bool json) {
    const fw::AsicManifest* m = fw::find_asic(name);
    if (m == nullptr) {
        std::string known;
        for (const fw::AsicManifest& a : fw::asic_manifests()) known += " " + a.name;
        std::fprintf(stderr, "fwinfo: unknown ASIC \"%.*s\"; known:%s\n", static_cast<int>(name.size()), name.data(),
                     known.c_str());
        return 2;
    }
    fw::FirmwareSearchPath search = fw::FirmwareSearchPath::from_environment();
    struct Row {
        const fw::FirmwareNeed* need;
        Report report;
    };
    std::vector<Row> rows;
    bool ok = true;
    for (const fw::FirmwareNeed& need : m->files) {
        Row row{&need, {}};
        if (auto path = search.find(need.name)) {
            row.report = decode(*path, need.name);
        } else {
            row.report.shown_name = need.name;
            row.report.error = "not found";
        }
        ok &= row.report.description.has_value() || (!need.required && !row.report.path);
        rows.push_back(std::move(row));
    }
    if (json) {
        JsonWriter w;
        w.begin_object();
        w.key("asic");
        w.value(m->name);
        w.key("vendor");
        w.value(m->vendor);
        w.key("description");
        w.value(m->marketing);
        w.key("ip_versions");
        w.begin_object();
        for (const auto& [block, version] : m->ip_versions) {
            w.key(block);
            w.value(version);
        }
        w.end_object();
        w.key("search_path");
        w.begin_array();
        for (const auto& dir : search.directories()) w.value(dir.string());
        w.end_array();
        w.key("files");
        w.begin_array();
        for (const Row& row : rows) {
            w.begin_object();
            w.key("role");
            w.value(row.need->role);
            w.key("required");
            w.value(row.need->required);
            w.key("found");
            w.value(row.report.path.has_value());
            w.key("report");
            report_json(w, row.report);
            w.end_object();
        }
        w.end_array();
        w.key("ok");
        w.value(ok);
        w.end_object();
        std::fputs(w.text().c_str(), stdout);
        return ok ? 0 : 1;
    }
    std::printf("%s: %s\n ", m->name.c_str(), m->marketing.c_str());
    for (const auto& [block, version] : m->ip_versions) std::printf(" %s %s", block.c_str(), version.c_str());
    std::printf("\n  search path:");
    for (const auto& dir : search.directories()) std::printf(" %s", dir.string().c_str());
    std::printf("\n\n");
    for (const Row& row : rows) {
        const Report& r = row.report;
        const char* status = r.description ? "ok" : r.path ? "INVALID" : row.need->required ? "MISSING" : "absent";
        std::printf("  %-8s %-44s %s%s\n", status, row.need->name.c_str(), row.need->role.c_str(),
                    row.need->required ? "" : " (optional)");
        if (r.path) std::printf("           %s\n", r.path->string().c_str());
        if (r.description) std::printf("           %s\n", r.description->format.c_str());
        else if (r.path) std::printf("           %s\n", r.error.c_str());
    }
    std::printf("\n%s\n", ok ? "every required file is present and valid"
                             : "some required files are missing or invalid: install linux-firmware (or point "
                               "BAREGPU_FIRMWARE_PATH at a copy)");
    return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string_view> args(argv + 1, argv + argc);
    bool json = false;
    std::optional<std::string_view> asic;
    std::vector<std::string_view> files;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--json") {
            json = true;
        } else if (args[i] == "--asic") {
            if (i + 1 == args.size()) return std::fprintf(stderr, "fwinfo: --asic needs a name\n%s", kUsage), 2;
            asic = args[++i];
        } else if (args[i] == "--list-asics") {
            for (const fw::AsicManifest& m : fw::asic_manifests())
                std::printf("%-8s %-7s %s\n", m.name.c_str(), m.vendor.c_str(), m.marketing.c_str());
            return 0;
        } else if (args[i] == "--help" || args[i] == "-h") {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (args[i].starts_with("--")) {
            return std::fprintf(stderr, "fwinfo: unknown option %.*s\n%s", static_cast<int>(args[i].size()), args[i].data(),
                                kUsage),
                   2;
        } else {
            files.push_back(args[i]);
        }
    }
    if (asic && !files.empty()) return std::fprintf(stderr, "fwinfo: give FILEs or --asic, not both\n%s", kUsage), 2;
    if (asic) return asic_command(*asic, json);
    if (files.empty()) return std::fputs(kUsage, stderr), 2;
    return files_command(files, json);
}
