// The on-disk cache of compiled code objects, one file per kernel, keyed by a hash of
// (kernel IR text, target, compiler version, LLVM version). Directory: $BAREGPU_CACHE_DIR, else
// $XDG_CACHE_HOME/baregpu, else ~/.cache/baregpu. Files are written to a temporary name and
// renamed, so concurrent processes never see half an object. A file that cannot be read or
// written makes the cache miss, never fails a compile.
//
// What is read back is what this user wrote: the directory must be the user's (or root's) and
// writable by nobody else, as ssh asks of ~/.ssh (created 0700 when missing; a default one of
// the user's that others can write is made 0700, one named by $BAREGPU_CACHE_DIR is refused
// with a warning on stderr and the cache is not used). Entries are opened without following
// links, must be regular files of the user's (or root's) of at most kMaxEntryBytes, and carry
// a SHA-256 of their cache key and contents: a damaged, truncated or swapped entry misses and is
// generated anew.
//
// Size limit: after each store, while the cache's entries (kernel-<hash>.o and tile-<hash>.txt
// files of the user's, in this format) take more than max_bytes, the least recently used go (a
// hit sets the file's modification time to now, so the modification time is the last use).
// Nothing else in the directory is ever removed. $BAREGPU_KERNEL_CACHE_MAX_MB, default 512.
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
    // $BAREGPU_KERNEL_CACHE_MAX_MB in bytes, else kDefaultMaxBytes. Throws baregpu::Error naming
    // the variable when it is not a number of MiB from 1 to 2^20.
    static uint64_t default_max_bytes();

    // The largest entry read back (a larger file misses): code objects are kilobytes.
    static constexpr uint64_t kMaxEntryBytes = 256ull << 20;

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

    // Remove least recently used entries until the cache takes at most max_bytes.
    void evict() const;

    // Why the directory is not used (another user's, writable by others, not a directory...),
    // empty when it is used or there is none. The first refusal per directory is also printed
    // on stderr.
    std::string refusal() const;

private:
    std::optional<std::vector<std::byte>> load_entry(const std::string& name, const std::string& key) const;
    void store_entry(const std::string& name, const std::string& key, const std::byte* data, size_t size) const;

    std::filesystem::path dir_;
    uint64_t max_bytes_;
};

}  // namespace baregpu::compiler
