// The on-disk cache of compiled code objects, one file per kernel, keyed by a hash of
// (kernel IR text, target, compiler version). Directory: $BAREGPU_CACHE_DIR, else
// $XDG_CACHE_HOME/baregpu, else ~/.cache/baregpu. Files are written to a temporary name and
// renamed, so concurrent processes never see half an object. A file that cannot be read or
// written makes the cache miss, never fails a compile.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::compiler {

class KernelCache {
public:
    // The directory from the environment, as above; empty when none of the variables is set.
    static std::filesystem::path default_directory();

    explicit KernelCache(std::filesystem::path directory) : dir_(std::move(directory)) {}

    const std::filesystem::path& directory() const { return dir_; }
    // The file a key is stored in.
    std::filesystem::path path_of(const std::string& key) const;

    std::optional<std::vector<std::byte>> load(const std::string& key) const;
    void store(const std::string& key, const std::vector<std::byte>& object) const;

private:
    std::filesystem::path dir_;
};

}  // namespace baregpu::compiler
