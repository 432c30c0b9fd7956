// The on-disk cache of compiled code objects, one file per kernel, keyed by a hash of
// (kernel IR text, target, compiler version, LLVM version). Directory: $BAREGPU_CACHE_DIR, else
// $XDG_CACHE_HOME/baregpu, else ~/.cache/baregpu. Files are written to a temporary name and
// renamed, so concurrent processes never see half an object. A file that cannot be read or
// written makes the cache miss, never fails a compile.
//
// Size limit: after each store, while the cache's files (kernel-* and tile-*) take more than
// max_bytes, the least recently used go (a hit sets the file's modification time to now, so
// the modification time is the last use). $BAREGPU_KERNEL_CACHE_MAX_MB, default 512.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::compiler {

class KernelCache {
public:
    // The directory from the environment, as above; empty when none of the variables is set.
    static std::filesystem::path default_directory();

    static constexpr uint64_t kDefaultMaxBytes = 512ull << 20;
    // $BAREGPU_KERNEL_CACHE_MAX_MB in bytes, else kDefaultMaxBytes.
    static uint64_t default_max_bytes();

    explicit KernelCache(std::filesystem::path directory, uint64_t max_bytes = default_max_bytes())
        : dir_(std::move(directory)), max_bytes_(max_bytes) {}

    const std::filesystem::path& directory() const { return dir_; }
    uint64_t max_bytes() const { return max_bytes_; }
    // The file a key is stored in.
    std::filesystem::path path_of(const std::string& key) const;

    std::optional<std::vector<std::byte>> load(const std::string& key) const;
    void store(const std::string& key, const std::vector<std::byte>& object) const;

    // Small text records next to the objects (the tile search's winners), in files named
    // "tile-<hash>.txt", under the same size limit and LRU order.
    std::optional<std::string> load_text(const std::string& key) const;
    void store_text(const std::string& key, const std::string& text) const;

    // Remove least recently used files until the cache takes at most max_bytes.
    void evict() const;

private:
    std::optional<std::vector<std::byte>> load_file(const std::filesystem::path& path) const;
    void store_file(const std::filesystem::path& path, const std::vector<std::byte>& bytes) const;

    std::filesystem::path dir_;
    uint64_t max_bytes_;
};

}  // namespace baregpu::compiler
