#include "tests/firmware/firmware_files.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace baregpu::test {

std::optional<std::filesystem::path> firmware_dir() {
    const char* dir = std::getenv("BAREGPU_TEST_FIRMWARE_DIR");
    if (dir == nullptr || !std::filesystem::is_directory(dir)) return std::nullopt;
    return std::filesystem::path(dir);
}

std::vector<std::byte> firmware_bytes(const std::string& relative) {
    auto dir = firmware_dir();
    if (!dir) throw std::runtime_error("BAREGPU_TEST_FIRMWARE_DIR does not name a directory");
    std::filesystem::path path = *dir / relative;
    if (!std::filesystem::is_regular_file(path))
        throw std::runtime_error("firmware file " + path.string() + " is missing (see firmware/MANIFEST.txt)");
    // One read of the whole file: a character at a time costs seconds per run in the sanitizer build.
    std::vector<std::byte> bytes(std::filesystem::file_size(path));
    std::ifstream in(path, std::ios::binary);
    if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
        throw std::runtime_error("firmware file " + path.string() + " could not be read");
    return bytes;
}

std::vector<std::string> all_firmware_files() {
    auto dir = firmware_dir();
    if (!dir) throw std::runtime_error("BAREGPU_TEST_FIRMWARE_DIR does not name a directory");
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(*dir)) {
        if (!entry.is_regular_file()) continue;
        std::string name = entry.path().filename().string();
        if (name.starts_with("LICEN") || name == "MANIFEST.txt" || name == "README.md") continue;
        out.push_back(std::filesystem::relative(entry.path(), *dir).string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace baregpu::test
