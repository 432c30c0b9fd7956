// The state file lives where other users may reach (/tmp): it opens only a regular file of the
// user's own in a directory of the user's own, and reserves its blocks or fails saying so.
#include "base/error.hpp"
#include "drivers/sim/amdgpu/state_file.hpp"
#include "tests/sim/amdgpu/rig.hpp"

#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace state_file_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using baregpu::sim::amdgpu::Asic;
using baregpu::sim::amdgpu::StateFile;
using baregpu::test::sim_am::TempDir;

namespace {

std::string state_test_read(const std::filesystem::path& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("state file: a symbolic link at its path is refused; the file it names is not touched", "[sim-am]") {
    TempDir dir;
    const std::filesystem::path victim = dir.path / "notes";
    std::ofstream(victim) << "my notes\n";
    const std::filesystem::path state = dir.path / "state";
    std::filesystem::create_directory(state);
    std::filesystem::create_symlink(victim, state / "sim-am-navi31.state");
    CHECK_THROWS_WITH(StateFile(Asic::navi31, state.string()), Catch::Contains("symbolic link") && Catch::Contains("sim-am-navi31.state"));
    CHECK(std::filesystem::file_size(victim) == 9);
    CHECK(state_test_read(victim) == "my notes\n");
}

TEST_CASE("state file: a state directory other users can write, or another user's, is refused", "[sim-am]") {
    TempDir dir;
    const std::filesystem::path state = dir.path / "state";
    std::filesystem::create_directory(state);
    ::chmod(state.c_str(), 0777);
    CHECK_THROWS_WITH(StateFile(Asic::navi31, state.string()), Catch::Contains("every user can write it") &&
                                                                   Catch::Contains("BAREGPU_SIM_STATE_DIR"));
    ::chmod(state.c_str(), 0700);
    if (::geteuid() == 0) {
        REQUIRE(::chown(state.c_str(), 4242, 4242) == 0);
        CHECK_THROWS_WITH(StateFile(Asic::navi31, state.string()), Catch::Contains("owned by uid 4242"));
    }
    CHECK_FALSE(std::filesystem::exists(state / "sim-am-navi31.state"));
}

TEST_CASE("state file: a directory it creates is the user's alone", "[sim-am]") {
    TempDir dir;
    const std::filesystem::path state = dir.path / "a" / "b";
    {
        StateFile file(Asic::navi31, state.string());
        CHECK(file.powered_on());
    }
    struct stat st {};
    REQUIRE(::stat(state.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    REQUIRE(::stat((state / "sim-am-navi31.state").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("state file: without room for its blocks it fails naming the directory and the space, and leaves nothing", "[sim-am]") {
    TempDir dir;
    // A file system with 64 MiB free, as far as this process can tell: RLIMIT_FSIZE (with SIGXFSZ
    // ignored, writes past it fail with EFBIG, setrlimit(2)). In a child: the limit stays there.
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(fds[0]);
        std::signal(SIGXFSZ, SIG_IGN);
        rlimit limit{64u << 20, 64u << 20};
        ::setrlimit(RLIMIT_FSIZE, &limit);
        std::string out = "opened";
        try {
            StateFile file(Asic::navi31, dir.path.string());
        } catch (const std::exception& e) {
            out = e.what();
        }
        (void)!::write(fds[1], out.data(), out.size());
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string out;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK_THAT(out, Catch::Contains("cannot reserve 1026 MiB") && Catch::Contains(dir.path.string()) &&
                        Catch::Contains("BAREGPU_SIM_STATE_DIR"));
    CHECK_FALSE(std::filesystem::exists(dir.path / "sim-am-navi31.state"));
}

}  // namespace state_file_test
