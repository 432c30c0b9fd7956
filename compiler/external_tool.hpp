// Running the external tools code generation needs (ld.lld for AMDGPU code objects, ptxas for
// cubins): finding them, a private scratch directory for their files, running them without a
// shell with their output captured, reading back what they wrote.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::compiler {

// The first executable `name` on $PATH; a name with a slash is taken as it is.
std::optional<std::filesystem::path> find_on_path(std::string_view name);
bool is_executable(const std::filesystem::path& path);

// Runs argv (argv[0] a path, no shell) with stdout and stderr into `log`. Returns its exit
// status, or -1 when it did not run or did not exit normally.
int run_tool(const std::vector<std::string>& argv, const std::filesystem::path& log);

// The whole file (empty when it cannot be read).
std::string read_text(const std::filesystem::path& path);

// A fresh private directory "<tmp>/<prefix>XXXXXX", removed with its contents by the destructor.
// Throws SystemError when it cannot be created.
class TempDir {
public:
    explicit TempDir(std::string_view prefix);
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

}  // namespace baregpu::compiler
