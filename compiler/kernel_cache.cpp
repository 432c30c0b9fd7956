#include "compiler/kernel_cache.hpp"

#include "compiler/kernel.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace baregpu::compiler {

namespace {

// 128 bits of the key (hashed twice with different prefixes): accidental collisions are moot.
std::string key_hash(const std::string& key) { return hash_hex("a" + key) + hash_hex("b" + key); }

bool cache_file(const std::filesystem::path& p) {
    std::string name = p.filename().string();
    if (name.find(".tmp") != std::string::npos) return false;  // another writer's, not finished
    return name.rfind("kernel-", 0) == 0 || name.rfind("tile-", 0) == 0;
}

}  // namespace

std::filesystem::path KernelCache::default_directory() {
    if (const char* dir = std::getenv("BAREGPU_CACHE_DIR"); dir && *dir) return dir;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "baregpu";
    if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "baregpu";
    return {};
}

uint64_t KernelCache::default_max_bytes() {
    if (const char* mb = std::getenv("BAREGPU_KERNEL_CACHE_MAX_MB"); mb && *mb) {
        char* end = nullptr;
        unsigned long long v = std::strtoull(mb, &end, 10);
        if (end && *end == '\0') return uint64_t(v) << 20;
    }
    return kDefaultMaxBytes;
}

std::filesystem::path KernelCache::path_of(const std::string& key) const { return dir_ / ("kernel-" + key_hash(key) + ".o"); }

std::optional<std::vector<std::byte>> KernelCache::load_file(const std::filesystem::path& path) const {
    if (dir_.empty()) return std::nullopt;
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return std::nullopt;
    if (bytes.empty()) return std::nullopt;
    std::vector<std::byte> out(bytes.size());
    std::memcpy(out.data(), bytes.data(), bytes.size());
    // A use: the eviction order is the modification time.
    std::error_code ec;
    std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ec);
    return out;
}

void KernelCache::store_file(const std::filesystem::path& final_path, const std::vector<std::byte>& bytes) const {
    if (dir_.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) return;
    std::filesystem::path tmp = final_path;
    tmp += ".tmp" + std::to_string(getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) return;
        out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        if (!out) {
            std::filesystem::remove(tmp, ec);
            return;
        }
    }
    std::filesystem::rename(tmp, final_path, ec);
    if (ec) {
        std::filesystem::remove(tmp, ec);
        return;
    }
    evict();
}

std::optional<std::vector<std::byte>> KernelCache::load(const std::string& key) const { return load_file(path_of(key)); }

void KernelCache::store(const std::string& key, const std::vector<std::byte>& object) const { store_file(path_of(key), object); }

std::optional<std::string> KernelCache::load_text(const std::string& key) const {
    auto bytes = load_file(dir_ / ("tile-" + key_hash(key) + ".txt"));
    if (!bytes) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size());
}

void KernelCache::store_text(const std::string& key, const std::string& text) const {
    std::vector<std::byte> bytes(text.size());
    std::memcpy(bytes.data(), text.data(), text.size());
    store_file(dir_ / ("tile-" + key_hash(key) + ".txt"), bytes);
}

void KernelCache::evict() const {
    if (dir_.empty()) return;
    struct Entry {
        std::filesystem::file_time_type used;
        uint64_t bytes;
        std::filesystem::path path;
    };
    std::vector<Entry> entries;
    uint64_t total = 0;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
        if (!cache_file(it->path())) continue;
        std::error_code e1, e2;
        uint64_t size = it->file_size(e1);
        auto used = it->last_write_time(e2);
        if (e1 || e2) continue;  // removed meanwhile
        entries.push_back({used, size, it->path()});
        total += size;
    }
    if (total <= max_bytes_) return;
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used != b.used ? a.used < b.used : a.path < b.path; });
    for (const Entry& e : entries) {
        if (total <= max_bytes_) break;
        std::error_code rm;
        std::filesystem::remove(e.path, rm);
        total -= e.bytes;
    }
}

}  // namespace baregpu::compiler
