#include "compiler/amdgpu_codegen.hpp"

#include "base/error.hpp"
#include "compiler/llvm_kernel_ir.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace baregpu::compiler {

std::vector<std::byte> emit_amdgpu_object(const Kernel& kernel, const std::string& gfx_arch) {
    Target target{"amdgcn-amd-amdhsa", gfx_arch, ""};
    std::unique_ptr<llvm::TargetMachine> machine = make_target_machine(target);
    llvm::LLVMContext ctx;
    llvm::Module module(kernel.name(), ctx);
    module.setTargetTriple(target.triple);
    module.setDataLayout(machine->createDataLayout());
    build_kernel_function(module, kernel, target, KernelFlavor::amdgpu);
    return optimize_and_emit(module, *machine, kernel);
}

namespace {

namespace fs = std::filesystem;

// The first executable `name` on PATH (names with a slash are taken as they are).
std::optional<std::string> find_on_path(const std::string& name) {
    if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? std::optional(name) : std::nullopt;
    const char* path = std::getenv("PATH");
    std::string_view rest = path != nullptr ? path : "/usr/bin:/bin";
    while (true) {
        size_t colon = rest.find(':');
        std::string dir(rest.substr(0, colon));
        std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
        if (access(candidate.c_str(), X_OK) == 0) return candidate;
        if (colon == std::string_view::npos) return std::nullopt;
        rest.remove_prefix(colon + 1);
    }
}

std::string find_ld_lld() {
    if (const char* forced = std::getenv("BAREGPU_LD_LLD"); forced != nullptr && *forced != '\0') {
        if (auto p = find_on_path(forced)) return *p;
        throw Error("", fmt::format("compiler: BAREGPU_LD_LLD={} is not an executable", forced));
    }
    // ld.lld-19 first: a plain ld.lld may be an older lld (Debian 12's `lld` is 14, which rejects
    // code object v5 with "unknown abi version").
    for (const char* name : {"ld.lld-19", "ld.lld"})
        if (auto p = find_on_path(name)) return *p;
    throw Error("", "compiler: no ld.lld on PATH to link the AMDGPU code object (Debian 12: apt-get install lld-19)");
}

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// A temporary directory removed with everything in it when this goes out of scope.
class TempDir {
public:
    TempDir() {
        std::string templ = (fs::temp_directory_path() / "baregpu-lld-XXXXXX").string();
        if (mkdtemp(templ.data()) == nullptr) throw SystemError("", "compiler: mkdtemp " + templ, errno);
        path_ = templ;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const fs::path& path() const { return path_; }

private:
    fs::path path_;
};

}  // namespace

std::vector<std::byte> link_amdgpu_shared_object(std::span<const std::byte> relocatable, const std::string& name) {
    const std::string lld = find_ld_lld();
    TempDir dir;
    const fs::path in = dir.path() / "kernel.o", out = dir.path() / "kernel.so", log = dir.path() / "ld.log";
    {
        std::ofstream f(in, std::ios::binary);
        f.write(reinterpret_cast<const char*>(relocatable.data()), std::streamsize(relocatable.size()));
        if (!f) throw Error("", fmt::format("compiler: cannot write {}", in.string()));
    }
    // Run the linker directly (no shell), its stdout and stderr into the log.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    std::vector<std::string> args{lld, "-shared", "--no-undefined", "-o", out.string(), in.string()};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, lld.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw SystemError("", fmt::format("compiler: starting {}", lld), rc);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) throw SystemError("", fmt::format("compiler: waiting for {}", lld), errno);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::string output = read_text(log);
        std::string hint = output.find("unknown abi version") != std::string::npos
                               ? " (this lld is too old for code object v5: install lld-19, or set BAREGPU_LD_LLD)"
                               : "";
        throw Error("", fmt::format("compiler: {} -shared failed for kernel {} (status {}){}:\n{}", lld, name, status, hint, output));
    }
    std::ifstream f(out, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), {});
    if (bytes.empty()) throw Error("", fmt::format("compiler: {} wrote no output for kernel {}", lld, name));
    std::vector<std::byte> result(bytes.size());
    std::memcpy(result.data(), bytes.data(), bytes.size());
    return result;
}

std::vector<std::byte> emit_amdgpu_code_object(const Kernel& kernel, const std::string& gfx_arch) {
    return link_amdgpu_shared_object(emit_amdgpu_object(kernel, gfx_arch), kernel.name());
}

}  // namespace baregpu::compiler
