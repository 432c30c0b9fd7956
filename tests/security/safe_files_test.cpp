// base/safe_files.hpp: the one way the tools open files in directories other users can reach.
#include "base/error.hpp"
#include "base/safe_files.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace baregpu;
namespace fs = std::filesystem;

namespace {

struct Scratch {
    fs::path path;
    Scratch() {
        char tmpl[] = "/tmp/baregpu-safe-files-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~Scratch() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

mode_t mode_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("safe files: a missing directory is made with the policy's mode, parents included") {
    Scratch s;
    files::DirectoryPolicy p;
    p.mode = 0700;
    files::Directory d = files::Directory::open((s.path / "a" / "b").string(), p);
    CHECK(mode_of(s.path / "a" / "b") == 0700);
    CHECK(mode_of(s.path / "a") == 0700);
    files::Directory::File f = d.open_file("x", O_RDWR, /*create=*/true, 0640);
    CHECK(f.created);
    CHECK(mode_of(s.path / "a" / "b" / "x") == 0640);
    CHECK_FALSE(d.open_file("x", O_RDWR, true, 0640).created);
}

TEST_CASE("safe files: a directory others can write is refused, or made private when it is a default of ours") {
    Scratch s;
    fs::create_directory(s.path / "d");
    ::chmod((s.path / "d").c_str(), 0777);
    files::DirectoryPolicy p;
    p.remedy = "use another";
    CHECK_THROWS_WITH(files::Directory::open((s.path / "d").string(), p),
                      Catch::Contains("every user can write it (mode 0777)") && Catch::Contains("use another"));
    ::chmod((s.path / "d").c_str(), 0770);
    CHECK_THROWS_WITH(files::Directory::open((s.path / "d").string(), p), Catch::Contains("can write it (mode 0770)"));
    p.repair = true;
    CHECK_NOTHROW(files::Directory::open((s.path / "d").string(), p));
    CHECK(mode_of(s.path / "d") == 0700);
}

TEST_CASE("safe files: links, FIFOs, directories and hard links are refused where a file is expected") {
    Scratch s;
    files::Directory d = files::Directory::open(s.path.string(), {});
    std::ofstream(s.path / "target") << "keep";
    fs::create_symlink(s.path / "target", s.path / "link");
    CHECK_THROWS_WITH(d.open_file("link", O_RDWR, true), Catch::Contains("a symbolic link"));
    REQUIRE(::mkfifo((s.path / "fifo").c_str(), 0600) == 0);
    CHECK_THROWS_WITH(d.open_file("fifo", O_RDONLY, false), Catch::Contains("a FIFO"));
    fs::create_directory(s.path / "dir");
    CHECK_THROWS_WITH(d.open_file("dir", O_RDONLY, false), Catch::Contains("a directory"));
    REQUIRE(::link((s.path / "target").c_str(), (s.path / "hard").c_str()) == 0);
    CHECK_THROWS_WITH(d.open_file("hard", O_RDWR, false), Catch::Contains("2 hard links"));
    // replace_file replaces a link at the name; it never writes through it.
    d.replace_file("link", std::as_bytes(std::span("new", 3)));
    CHECK(fs::is_regular_file(fs::symlink_status(s.path / "link")));
    std::ifstream in(s.path / "target");
    CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "keep");
}

TEST_CASE("safe files: another user's directory, file or symbolic link to a directory is refused") {
    if (::geteuid() != 0) {
        WARN("skipped: making files of another user's needs root");
        return;
    }
    Scratch s;
    fs::create_directory(s.path / "theirs");
    REQUIRE(::chown((s.path / "theirs").c_str(), 4242, 4242) == 0);
    CHECK_THROWS_WITH(files::Directory::open((s.path / "theirs").string(), {}), Catch::Contains("owned by uid 4242"));
    fs::create_directory(s.path / "mine");
    fs::create_directory_symlink(s.path / "mine", s.path / "their-link");
    REQUIRE(::lchown((s.path / "their-link").c_str(), 4242, 4242) == 0);
    CHECK_THROWS_WITH(files::Directory::open((s.path / "their-link").string(), {}), Catch::Contains("a symbolic link owned by uid 4242"));
    files::Directory d = files::Directory::open((s.path / "mine").string(), {});
    std::ofstream(s.path / "mine" / "planted") << "x";
    REQUIRE(::chown((s.path / "mine" / "planted").c_str(), 4242, 4242) == 0);
    CHECK_THROWS_WITH(d.open_file("planted", O_RDONLY, false), Catch::Contains("owned by uid 4242"));
    CHECK_FALSE(d.remove_own_file("planted"));
    CHECK(fs::exists(s.path / "mine" / "planted"));
}

TEST_CASE("safe files: a file is read whole only up to its bound") {
    Scratch s;
    std::ofstream(s.path / "f") << std::string(100, 'x');
    struct stat st {};
    UniqueFd fd = files::open_regular_file((s.path / "f").string(), st);
    CHECK(files::read_whole_file(fd.get(), "f", 100).size() == 100);
    UniqueFd again = files::open_regular_file((s.path / "f").string(), st);
    CHECK_THROWS_WITH(files::read_whole_file(again.get(), "f", 99), Catch::Contains("more than the 99"));
}
