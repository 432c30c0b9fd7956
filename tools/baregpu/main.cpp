// baregpu: the command-line tool. `baregpu <command> [options]`; `baregpu --help` lists commands.
#include "drivers/registry.hpp"
#include "hcq/registry.hpp"
#include "tools/baregpu/bench_command.hpp"
#include "tools/baregpu/commands.hpp"

#include <cstdio>
#include <exception>
#include <string_view>
#include <vector>

namespace {

using baregpu::tools::bench_command;
using baregpu::tools::devices_command;
using baregpu::tools::p2p_command;

struct Command {
    std::string_view name;
    std::string_view usage;  // after "baregpu <name>"
    std::string_view summary;
    int (*run)(std::span<const std::string_view> args);
};

// One entry per command, in the order --help lists them.
constexpr Command kCommands[] = {
    {"devices", "[--json]", "list the GPUs on this machine, what drives them, and the built-in devices",
     devices_command},
    {"bench", "[--suite hcq|tensor|dist] [--device NAME] [--json] [--quick] [--full] [--repeats N] [--only NAMES]",
     "run benchmark suites on a device (default: the first GPU, else cpu)", bench_command},
    {"p2p", "[--devices URI,URI,...] [--bytes N] [--window N] [--json]",
     "which device pairs reach each other peer-to-peer, and the bandwidth both ways vs. a host bounce", p2p_command},
};

void print_help(std::FILE* out) {
    std::fprintf(out, "usage: baregpu <command> [options]\n\ncommands:\n");
    for (const Command& c : kCommands) {
        std::fprintf(out, "  %-10.*s %.*s\n      %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                     static_cast<int>(c.usage.size()), c.usage.data(), static_cast<int>(c.summary.size()),
                     c.summary.data());
    }
    std::fprintf(out, "\n`baregpu <command> --help` describes a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
    baregpu::registry::register_backends(baregpu::hcq::registry());
    std::vector<std::string_view> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
        print_help(args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    for (const Command& c : kCommands) {
        if (args[0] != c.name) continue;
        try {
            return c.run(std::span<const std::string_view>(args).subspan(1));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "baregpu %.*s: %s\n", static_cast<int>(c.name.size()), c.name.data(), e.what());
            return 1;
        }
    }
    std::fprintf(stderr, "baregpu: unknown command \"%.*s\"\n\n", static_cast<int>(args[0].size()), args[0].data());
    print_help(stderr);
    return 2;
}
