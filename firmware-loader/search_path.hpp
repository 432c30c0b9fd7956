// Finding and reading firmware the way Linux does: the same names as linux-firmware
// ("amdgpu/psp_13_0_0_sos.bin", "nvidia/ad102/gsp/gsp-570.144.bin") looked up in
// $BAREGPU_FIRMWARE_PATH (colon-separated), /lib/firmware/updates, /lib/firmware, each as the plain
// file or compressed as distributions ship it (NAME.zst, NAME.xz).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::fw {

// A firmware file's bytes, decompressed, and where they came from.
struct FirmwareFile {
    std::filesystem::path path;  // the file read (with its .zst/.xz extension if it had one)
    std::string name;            // the name it was asked for ("amdgpu/gc_11_0_0_mec.bin"), or path's filename
    std::vector<std::byte> bytes;
    bool compressed = false;
};

// Largest decompressed size accepted: 256 MiB (the biggest GSP-RM images are about 70 MB), so a
// corrupt or hostile stream cannot exhaust memory.
inline constexpr uint64_t kMaxFirmwareBytes = uint64_t{256} << 20;

// Reads path, decompressing zstd or xz when the bytes start with their magic (whatever the
// extension). Throws FirmwareError for corrupt or truncated streams, SystemError for I/O errors.
FirmwareFile read_firmware_file(const std::filesystem::path& path);

// Decompresses bytes that start with the zstd or xz magic; returns them unchanged otherwise.
// file: the name errors quote.
std::vector<std::byte> decompress(std::vector<std::byte> bytes, const std::string& file, bool* was_compressed = nullptr);

class FirmwareSearchPath {
public:
    // $BAREGPU_FIRMWARE_PATH's entries, then `ahead_of_system` (the firmware a build carries for its
    // simulated devices), then /lib/firmware/updates, then /lib/firmware.
    static FirmwareSearchPath from_environment(const std::vector<std::filesystem::path>& ahead_of_system = {});
    explicit FirmwareSearchPath(std::vector<std::filesystem::path> directories);

    const std::vector<std::filesystem::path>& directories() const { return directories_; }

    // The first of dir/name, dir/name.zst, dir/name.xz that exists, directory by directory.
    std::optional<std::filesystem::path> find(std::string_view name) const;
    // find + read_firmware_file. Throws FirmwareError naming every place looked in when absent.
    FirmwareFile load(std::string_view name) const;

private:
    std::vector<std::filesystem::path> directories_;
};

}  // namespace baregpu::fw
