#include "drivers/sim/amdgpu/state_file.hpp"

#include "base/error.hpp"
#include "base/safe_files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <type_traits>
#include <unistd.h>
#include <vector>

namespace baregpu::sim::amdgpu {

static_assert(std::is_trivially_copyable_v<ChipState>, "ChipState is the file's format");
static_assert(sizeof(ChipState) <= (64u << 10), "ChipState must fit before the register store");

std::filesystem::path StateFile::default_dir() {
    if (const char* dir = std::getenv("BAREGPU_SIM_STATE_DIR"); dir != nullptr && *dir != '\0') return dir;
    return fmt::format("/tmp/baregpu-sim-{}", getuid());
}

StateFile::StateFile(Asic asic, const std::string& dir, bool ephemeral) : asic_(asic) {
    if (ephemeral) {
        // A memfd rather than MAP_ANONYMOUS: zero-filled and lazily backed like the sparse file, and
        // mappable again by fd (the compute engine's host mirror of VRAM).
        fd_ = ::memfd_create("baregpu-sim-am", MFD_CLOEXEC);
        if (fd_ < 0) throw SystemError("sim-am", "cannot create a memfd for an ephemeral chip", errno);
        if (::ftruncate(fd_, static_cast<off_t>(kFileBytes)) != 0) {
            int e = errno;
            ::close(fd_);
            throw SystemError("sim-am", "cannot size the ephemeral chip's memfd", e);
        }
        void* p = ::mmap(nullptr, kFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            ::close(fd_);
            throw SystemError("sim-am", "cannot map an ephemeral chip's memfd", e);
        }
        base_ = static_cast<unsigned char*>(p);
        power_on(/*keep_vram=*/false);
        powered_on_ = true;
        return;
    }
    // The default directory is a predictable name in /tmp: it must be this user's own (made
    // 0700 here), so that nobody else can plant a link or a file where the state file goes.
    const char* env = std::getenv("BAREGPU_SIM_STATE_DIR");
    const bool named = !dir.empty() || (env != nullptr && *env != '\0');
    std::filesystem::path where = dir.empty() ? default_dir() : std::filesystem::path(dir);
    files::DirectoryPolicy policy;
    policy.mode = 0700;
    policy.repair = !named;
    policy.remedy = "set BAREGPU_SIM_STATE_DIR to a directory of your own";
    files::Directory directory = [&] {
        try {
            return files::Directory::open(where.string(), policy);
        } catch (const Error& e) {
            throw Error("sim-am", fmt::format("state directory: {}", e.what()));
        }
    }();
    const std::string name = fmt::format("sim-am-{}.state", to_string(asic));
    path_ = where / name;
    files::Directory::File file = [&] {
        try {
            return directory.open_file(name, O_RDWR, /*create=*/true, 0600);
        } catch (const Error& e) {
            throw Error("sim-am", fmt::format("state file: {}", e.what()));
        }
    }();
    fd_ = file.fd.release();
    try {
        // Every process that has the file open holds a shared flock on it: the last to close it
        // knows it is the last (release_unused_blocks).
        while (::flock(fd_, LOCK_SH) != 0) {
            if (errno != EINTR) throw SystemError("sim-am", "flock " + path_.string(), errno);
        }
        struct stat st {};
        if (::fstat(fd_, &st) != 0) throw SystemError("sim-am", "fstat " + path_.string(), errno);
        bool sized = static_cast<uint64_t>(st.st_size) == kFileBytes;
        if (!sized && ::ftruncate(fd_, 0) != 0) throw SystemError("sim-am", "ftruncate " + path_.string(), errno);
        try {
            reserve(0, kFileBytes);
        } catch (const Error&) {
            if (file.created || !sized) ::unlinkat(directory.fd(), name.c_str(), 0);  // no half-reserved chip left behind
            throw;
        }
        void* p = ::mmap(nullptr, kFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
        if (p == MAP_FAILED) throw SystemError("sim-am", "cannot map the state file " + path_.string(), errno);
        base_ = static_cast<unsigned char*>(p);
        const ChipState& c = chip();
        bool matches = sized && c.magic == ChipState::kMagic && c.version == ChipState::kVersion &&
                       c.asic == static_cast<uint32_t>(asic) && c.vram_bytes == kVramBytes && c.file_bytes == kFileBytes;
        if (!matches) {
            power_on(/*keep_vram=*/false);
            powered_on_ = true;
        }
    } catch (...) {
        if (base_ != nullptr) ::munmap(base_, kFileBytes);
        base_ = nullptr;
        ::close(fd_);
        fd_ = -1;
        throw;
    }
}

StateFile::~StateFile() {
    if (base_ != nullptr) ::munmap(base_, kFileBytes);
    if (fd_ >= 0) {
        if (!path_.empty()) release_unused_blocks();
        ::close(fd_);
    }
}

void StateFile::release_unused_blocks() noexcept {
    // The blocks reserved at open that nobody wrote are unwritten extents (fallocate(2)); a
    // closed chip needs no room to grow, so they go back (the next open reserves them again),
    // and a chip on disk costs what it holds, not its VRAM size. Only when no other process has
    // the file open: its reservation stays while it runs. FIEMAP (Documentation/filesystems/
    // fiemap.rst) says which extents are unwritten once the file is written back; where a file
    // system cannot say, all stay.
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) return;
    constexpr unsigned kBatch = 128;
    std::vector<std::byte> buf(sizeof(fiemap) + kBatch * sizeof(fiemap_extent));
    auto* map = reinterpret_cast<fiemap*>(buf.data());
    uint64_t at = kVramOffset;
    while (at < kFileBytes) {
        std::memset(buf.data(), 0, buf.size());
        map->fm_start = at;
        map->fm_length = kFileBytes - at;
        map->fm_extent_count = kBatch;
        // Written back first: a page written through the mapping but not yet on disk still
        // lies in an unwritten extent, and punching it would lose it.
        map->fm_flags = at == kVramOffset ? FIEMAP_FLAG_SYNC : 0;
        if (::ioctl(fd_, FS_IOC_FIEMAP, map) != 0 || map->fm_mapped_extents == 0) return;
        for (unsigned i = 0; i < map->fm_mapped_extents; ++i) {
            const fiemap_extent& e = map->fm_extents[i];
            const uint64_t begin = std::max<uint64_t>(e.fe_logical, kVramOffset);
            const uint64_t end = std::min<uint64_t>(e.fe_logical + e.fe_length, kFileBytes);
            if ((e.fe_flags & FIEMAP_EXTENT_UNWRITTEN) != 0 && end > begin) {
                ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(begin), static_cast<off_t>(end - begin));
            }
            at = std::max(at, end);
            if (e.fe_flags & FIEMAP_EXTENT_LAST) return;
        }
    }
}

void StateFile::reserve(uint64_t offset, uint64_t bytes) {
    // Every page of a MAP_SHARED file mapping must have its blocks: a store to a hole the file
    // system cannot fill raises SIGBUS (mmap(2)), with no message and no way to recover.
    int rc = ::posix_fallocate(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes));
    if (rc == 0) return;
    std::string free_text = "an unknown amount";
    const std::filesystem::path dir = path_.parent_path();
    if (struct statvfs vfs {}; ::statvfs(dir.c_str(), &vfs) == 0) {
        free_text = fmt::format("{} MiB", uint64_t(vfs.f_bavail) * vfs.f_frsize >> 20);
    }
    throw SystemError("sim-am", fmt::format("cannot reserve {} MiB for the state file {} ({} free in {}); free space there or set "
                                            "BAREGPU_SIM_STATE_DIR to a directory with {} MiB free",
                                            kFileBytes >> 20, path_.string(), free_text, dir.string(), kFileBytes >> 20),
                      rc);
}

void StateFile::power_on(bool keep_vram) {
    if (!keep_vram) {
        // A power cycle loses VRAM. Zeroing the range keeps its blocks reserved (FALLOC_FL_ZERO_RANGE,
        // fallocate(2)); where the file system cannot, the pages go back (punch) and are reserved
        // anew. Either keeps the inode, so mappings of it elsewhere (the host mirror) read zeroes too.
        // The ephemeral memfd stays sparse: shared memory has no blocks to run out of.
        const auto off = static_cast<off_t>(kVramOffset);
        const auto len = static_cast<off_t>(kVramBytes);
        if (path_.empty() || ::fallocate(fd_, FALLOC_FL_ZERO_RANGE, off, len) != 0) {
            if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len) != 0) {
                std::memset(base_ + kVramOffset, 0, kVramBytes);
            } else if (!path_.empty()) {
                reserve(kVramOffset, kVramBytes);
            }
        }
    }
    std::memset(base_ + kRegistersOffset, 0, uint64_t{kBar5Dwords} * 4);
    ChipState fresh{};
    fresh.magic = ChipState::kMagic;
    fresh.version = ChipState::kVersion;
    fresh.asic = static_cast<uint32_t>(asic_);
    fresh.vram_bytes = kVramBytes;
    fresh.file_bytes = kFileBytes;
    std::memcpy(base_, &fresh, sizeof fresh);
}

}  // namespace baregpu::sim::amdgpu
