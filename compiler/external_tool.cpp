#include "compiler/external_tool.hpp"

#include "base/error.hpp"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace baregpu::compiler {

namespace fs = std::filesystem;

bool is_executable(const fs::path& path) {
    std::error_code ec;
    return fs::is_regular_file(path, ec) && access(path.c_str(), X_OK) == 0;
}

std::optional<fs::path> find_on_path(std::string_view name) {
    if (name.find('/') != std::string_view::npos) return is_executable(name) ? std::optional<fs::path>(name) : std::nullopt;
    const char* path = std::getenv("PATH");
    std::string_view rest = path != nullptr ? path : "/usr/bin:/bin";
    while (true) {
        const size_t colon = rest.find(':');
        const std::string_view dir = rest.substr(0, colon);
        const fs::path candidate = fs::path(dir.empty() ? std::string_view(".") : dir) / name;
        if (is_executable(candidate)) return candidate;
        if (colon == std::string_view::npos) return std::nullopt;
        rest.remove_prefix(colon + 1);
    }
}

int run_tool(const std::vector<std::string>& argv, const fs::path& log) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    // posix_spawn, not fork: glibc starts the child in this process's memory (CLONE_VFORK) instead of
    // copying its page tables, which for a runtime holding gigabytes of mappings (or ASan's shadow)
    // cost more than the tool's own run. An exec failure comes back as its errno here.
    posix_spawn_file_actions_t actions;
    if (posix_spawn_file_actions_init(&actions) != 0) {
        close(fd);
        return -1;
    }
    pid_t pid = -1;
    int rc = posix_spawn_file_actions_adddup2(&actions, fd, 1);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions, fd, 2);
    if (rc == 0) rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fd);
    if (rc != 0) return -1;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

TempDir::TempDir(std::string_view prefix) {
    std::string templ = (fs::temp_directory_path() / (std::string(prefix) + "XXXXXX")).string();
    if (mkdtemp(templ.data()) == nullptr) throw SystemError("", "compiler: cannot create a temporary directory " + templ, errno);
    path_ = templ;
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

}  // namespace baregpu::compiler
