#include "compiler/kernel_cache.hpp"

#include "compiler/kernel.hpp"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace baregpu::compiler {

std::filesystem::path KernelCache::default_directory() {
    if (const char* dir = std::getenv("BAREGPU_CACHE_DIR"); dir && *dir) return dir;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "baregpu";
    if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "baregpu";
    return {};
}

std::filesystem::path KernelCache::path_of(const std::string& key) const {
    // The key hashed twice with different prefixes: 128 bits make accidental collisions moot.
    return dir_ / ("kernel-" + hash_hex("a" + key) + hash_hex("b" + key) + ".o");
}

std::optional<std::vector<std::byte>> KernelCache::load(const std::string& key) const {
    if (dir_.empty()) return std::nullopt;
    std::ifstream in(path_of(key), std::ios::binary);
    if (!in) return std::nullopt;
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return std::nullopt;
    if (bytes.empty()) return std::nullopt;
    std::vector<std::byte> out(bytes.size());
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
}

void KernelCache::store(const std::string& key, const std::vector<std::byte>& object) const {
    if (dir_.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) return;
    std::filesystem::path final_path = path_of(key);
    std::filesystem::path tmp = final_path;
    tmp += ".tmp" + std::to_string(getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) return;
        out.write(reinterpret_cast<const char*>(object.data()), std::streamsize(object.size()));
        if (!out) {
            std::filesystem::remove(tmp, ec);
            return;
        }
    }
    std::filesystem::rename(tmp, final_path, ec);
    if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace baregpu::compiler
