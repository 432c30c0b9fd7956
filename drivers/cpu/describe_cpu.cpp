#include "drivers/cpu/describe_cpu.hpp"

#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace baregpu::cpu {

namespace {

// The value of the first "key : value" line whose key is `key` ("" when none has a value).
std::string field(std::string_view cpuinfo, std::string_view key) {
    size_t pos = 0;
    while (pos < cpuinfo.size()) {
        size_t eol = cpuinfo.find('\n', pos);
        std::string_view line = cpuinfo.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
        pos = eol == std::string_view::npos ? cpuinfo.size() : eol + 1;
        size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        std::string_view name = line.substr(0, colon);
        while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
        if (name != key) continue;
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
        while (!value.empty() && (value.back() == ' ' || value.back() == '\r')) value.remove_suffix(1);
        if (!value.empty()) return std::string(value);
    }
    return "";
}

}  // namespace

std::string describe_cpu(std::string_view cpuinfo, unsigned online_cpus) {
    std::string model = field(cpuinfo, "model name");
    if (model.empty()) model = field(cpuinfo, "Model");
    if (model.empty()) model = field(cpuinfo, "Hardware");
    if (model.empty()) {
        std::string part = field(cpuinfo, "CPU part");
        if (!part.empty()) model = "Arm CPU part " + part;
    }
    if (model.empty()) model = "unknown CPU model";
    return fmt::format("{}, {} {}", model, online_cpus, online_cpus == 1 ? "core" : "cores");
}

std::string describe_host_cpu() {
    std::ifstream file("/proc/cpuinfo");
    std::stringstream text;
    text << file.rdbuf();
    long online = ::sysconf(_SC_NPROCESSORS_ONLN);
    return describe_cpu(text.str(), online > 0 ? static_cast<unsigned>(online) : 1);
}

}  // namespace baregpu::cpu
