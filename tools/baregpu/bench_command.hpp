// `baregpu bench`: run benchmark suites on a device and print the results.
//
//   baregpu bench [--suite hcq] [--device NAME] [--json] [--quick] [--repeats N] [--only NAMES]
#pragma once

#include <span>
#include <string_view>

namespace baregpu::tools {

// args: what follows "bench" on the command line. Returns the exit status (0 ok, 1 the
// benchmark failed, 2 bad usage); prints results to stdout and errors to stderr.
int bench_command(std::span<const std::string_view> args);

}  // namespace baregpu::tools
