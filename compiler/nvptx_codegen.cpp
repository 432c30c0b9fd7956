#include "compiler/nvptx_codegen.hpp"

#include "base/error.hpp"
#include "compiler/llvm_kernel_ir.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace baregpu::compiler {

namespace {

bool executable(const std::filesystem::path& p) {
    std::error_code ec;
    return std::filesystem::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0;
}

// Runs argv (no shell) with stdout and stderr into `log`; its exit status, -1 if it did not run.
int run_tool(const std::vector<std::string>& argv, const std::filesystem::path& log) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        execv(args[0], args.data());
        _exit(127);
    }
    close(fd);
    if (pid < 0) return -1;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_text(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A fresh private directory under the temporary directory, removed by the destructor.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "baregpu-ptxas-XXXXXX").string();
        if (!mkdtemp(tmpl.data())) throw Error("", fmt::format("compiler: cannot create a temporary directory: {}", std::strerror(errno)));
        path = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
};

}  // namespace

Target nvptx_target(const std::string& sm_arch) { return Target{kNvptxTriple, sm_arch, ""}; }

std::string emit_ptx(const Kernel& kernel, const std::string& sm_arch) {
    Target target = nvptx_target(sm_arch);
    std::unique_ptr<llvm::TargetMachine> machine = make_target_machine(target);
    llvm::LLVMContext ctx;
    llvm::Module module(kernel.name(), ctx);
    module.setTargetTriple(target.triple);
    module.setDataLayout(machine->createDataLayout());
    build_kernel_function(module, kernel, target, KernelFlavor::nvptx);
    std::vector<std::byte> text = optimize_and_emit(module, *machine, kernel, true);
    return std::string(reinterpret_cast<const char*>(text.data()), text.size());
}

std::optional<std::filesystem::path> find_ptxas() {
    if (const char* env = std::getenv("BAREGPU_PTXAS"); env && *env) {
        if (executable(env)) return std::filesystem::path(env);
        return std::nullopt;
    }
    if (const char* path = std::getenv("PATH")) {
        std::string dirs = path;
        for (size_t at = 0; at <= dirs.size();) {
            size_t end = dirs.find(':', at);
            if (end == std::string::npos) end = dirs.size();
            if (end > at) {
                std::filesystem::path p = std::filesystem::path(dirs.substr(at, end - at)) / "ptxas";
                if (executable(p)) return p;
            }
            at = end + 1;
        }
    }
    if (executable("/usr/local/cuda/bin/ptxas")) return std::filesystem::path("/usr/local/cuda/bin/ptxas");
    return std::nullopt;
}

std::string ptxas_version(const std::filesystem::path& ptxas) {
    TempDir dir;
    std::filesystem::path log = dir.path / "version.txt";
    int rc = run_tool({ptxas.string(), "--version"}, log);
    std::string text = read_text(log);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    size_t nl = text.rfind('\n');
    std::string last = nl == std::string::npos ? text : text.substr(nl + 1);
    return rc == 0 ? last : fmt::format("{} (exit {})", last, rc);
}

std::vector<std::byte> assemble_cubin(const std::filesystem::path& ptxas, const std::string& ptx, const std::string& sm_arch) {
    TempDir dir;
    std::filesystem::path in = dir.path / "kernel.ptx", out = dir.path / "kernel.cubin", log = dir.path / "ptxas.log";
    {
        std::ofstream f(in, std::ios::binary);
        f.write(ptx.data(), std::streamsize(ptx.size()));
        if (!f) throw Error("", fmt::format("compiler: cannot write {}", in.string()));
    }
    int rc = run_tool({ptxas.string(), "-arch=" + sm_arch, "-o", out.string(), in.string()}, log);
    if (rc != 0) {
        throw Error("", fmt::format("compiler: {} -arch={} failed (exit {}):\n{}", ptxas.string(), sm_arch, rc, read_text(log)));
    }
    std::string bytes = read_text(out);
    if (bytes.empty()) throw Error("", fmt::format("compiler: {} wrote no cubin", ptxas.string()));
    std::vector<std::byte> cubin(bytes.size());
    std::memcpy(cubin.data(), bytes.data(), bytes.size());
    return cubin;
}

}  // namespace baregpu::compiler
