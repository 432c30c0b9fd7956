#include "drivers/sim/amdgpu/state_file.hpp"

#include "base/error.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <type_traits>
#include <unistd.h>

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
    std::filesystem::path where = dir.empty() ? default_dir() : std::filesystem::path(dir);
    std::error_code ec;
    std::filesystem::create_directories(where, ec);
    if (ec) throw SystemError("sim-am", fmt::format("cannot create the state directory {}", where.string()), ec.value());
    path_ = where / fmt::format("sim-am-{}.state", to_string(asic));
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) throw SystemError("sim-am", fmt::format("cannot open the state file {}", path_.string()), errno);
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw SystemError("sim-am", "fstat " + path_.string(), errno);
    bool sized = static_cast<uint64_t>(st.st_size) == kFileBytes;
    if (!sized && ::ftruncate(fd_, 0) != 0) throw SystemError("sim-am", "ftruncate " + path_.string(), errno);
    if (::ftruncate(fd_, static_cast<off_t>(kFileBytes)) != 0) {
        throw SystemError("sim-am", fmt::format("cannot size the state file {} to {} bytes", path_.string(), kFileBytes),
                          errno);
    }
    void* p = ::mmap(nullptr, kFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        ::close(fd_);
        throw SystemError("sim-am", "cannot map the state file " + path_.string(), e);
    }
    base_ = static_cast<unsigned char*>(p);
    const ChipState& c = chip();
    bool matches = sized && c.magic == ChipState::kMagic && c.version == ChipState::kVersion &&
                   c.asic == static_cast<uint32_t>(asic) && c.vram_bytes == kVramBytes && c.file_bytes == kFileBytes;
    if (!matches) {
        power_on(/*keep_vram=*/false);
        powered_on_ = true;
    }
}

StateFile::~StateFile() {
    if (base_ != nullptr) ::munmap(base_, kFileBytes);
    if (fd_ >= 0) ::close(fd_);
}

void StateFile::power_on(bool keep_vram) {
    if (!keep_vram) {
        // A power cycle loses VRAM: give the pages back (the file or memfd stays sparse). Punching
        // keeps the inode, so mappings of it elsewhere (the host mirror) read zeroes too.
        if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(kVramOffset),
                        static_cast<off_t>(kVramBytes)) != 0) {
            std::memset(base_ + kVramOffset, 0, kVramBytes);
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
