// The baregpu subcommands. Each takes the arguments after its name and returns the process exit
// status; main.cpp's table maps names to these functions. A new command is a function here, a
// source file, and one table entry.
#pragma once

#include <span>
#include <string_view>

namespace baregpu::tools {

// `baregpu devices [--json]`: the GPUs on this machine and the built-in devices.
int devices_command(std::span<const std::string_view> args);

// `baregpu p2p [--devices URI,...] [--bytes N] [--window N] [--json]`: which device pairs reach
// each other as bus peers, and each direction's bandwidth next to a copy bounced through host memory.
int p2p_command(std::span<const std::string_view> args);

}  // namespace baregpu::tools
