#include "compiler/kernel_cache.hpp"

#include "base/error.hpp"
#include "base/safe_files.hpp"
#include "compiler/kernel.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/SHA256.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fmt/format.h>
#include <mutex>
#include <set>
#include <sys/stat.h>
#include <time.h>

namespace baregpu::compiler {

namespace {

// An entry: this header, then the object (or text). The digest covers the cache key and the
// contents, so a flipped bit, a truncation or an entry copied to another key's name all miss.
constexpr std::array<char, 8> kMagic = {'B', 'G', 'K', 'C', 'A', 'C', 'H', '1'};
struct EntryHeader {
    std::array<char, 8> magic;
    uint64_t bytes;  // of the contents that follow
    std::array<uint8_t, 32> digest;
};
static_assert(sizeof(EntryHeader) == 48);

std::array<uint8_t, 32> digest_of(const std::string& key, const std::byte* data, size_t size) {
    llvm::SHA256 h;
    h.update(llvm::StringRef(key));
    const uint8_t separator = 0;
    h.update(llvm::ArrayRef<uint8_t>(&separator, 1));
    h.update(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(data), size));
    return h.final();
}

// 128 bits of the key (hashed twice with different prefixes): accidental collisions are moot.
std::string key_hash(const std::string& key) { return hash_hex("a" + key) + hash_hex("b" + key); }
constexpr size_t kKeyHashChars = 32;

bool is_hex(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Exactly the names this cache gives its entries: kernel-<32 hex>.o, tile-<32 hex>.txt.
bool entry_name(std::string_view name) {
    for (auto [prefix, suffix] : {std::pair{"kernel-", ".o"}, std::pair{"tile-", ".txt"}}) {
        std::string_view p = prefix, s = suffix;
        if (name.size() == p.size() + kKeyHashChars + s.size() && name.starts_with(p) && name.ends_with(s) &&
            is_hex(name.substr(p.size(), kKeyHashChars))) {
            return true;
        }
    }
    return false;
}

// A temporary file of ours a killed process left: "<entry name>.tmp<pid>-<n>".
bool temporary_name(std::string_view name) {
    size_t at = name.find(".tmp");
    if (at == std::string_view::npos || !entry_name(name.substr(0, at))) return false;
    std::string_view rest = name.substr(at + 4);
    return !rest.empty() && std::all_of(rest.begin(), rest.end(), [](char c) { return (c >= '0' && c <= '9') || c == '-'; });
}

files::DirectoryPolicy cache_policy(bool named_by_user) {
    files::DirectoryPolicy p;
    p.mode = 0700;  // the XDG Base Directory Specification's mode for a directory it creates
    p.repair = !named_by_user;
    p.remedy = "set BAREGPU_CACHE_DIR to a directory of your own";
    return p;
}

// $BAREGPU_CACHE_DIR is the user's choice: refused, not changed, when it is too open.
bool named_by_user(const std::filesystem::path& dir) {
    const char* env = std::getenv("BAREGPU_CACHE_DIR");
    return env != nullptr && *env != '\0' && dir == std::filesystem::path(env);
}

// Opens the directory; nullopt (with the reason, printed once per directory) when it is not to be used.
std::optional<files::Directory> open_directory(const std::filesystem::path& dir, std::string* why = nullptr) {
    if (dir.empty()) return std::nullopt;
    try {
        return files::Directory::open(dir.string(), cache_policy(named_by_user(dir)));
    } catch (const Error& e) {
        if (why) *why = e.what();
        static std::mutex mutex;
        static std::set<std::string> warned;
        std::lock_guard lock(mutex);
        if (warned.insert(dir.string()).second) std::fprintf(stderr, "baregpu: kernel cache not used: %s\n", e.what());
        return std::nullopt;
    }
}

}  // namespace

std::filesystem::path KernelCache::default_directory() {
    if (const char* dir = std::getenv("BAREGPU_CACHE_DIR"); dir && *dir) return dir;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "baregpu";
    if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "baregpu";
    return {};
}

uint64_t KernelCache::default_max_bytes() {
    const char* mb = std::getenv("BAREGPU_KERNEL_CACHE_MAX_MB");
    if (mb == nullptr || *mb == '\0') return kDefaultMaxBytes;
    uint64_t v = 0;
    const char* end = mb + std::strlen(mb);
    auto [ptr, ec] = std::from_chars(mb, end, v);
    if (ec != std::errc() || ptr != end || v == 0 || v > (1u << 20)) {
        throw Error("", fmt::format("BAREGPU_KERNEL_CACHE_MAX_MB={}: expected a number of MiB from 1 to {}", mb, 1u << 20));
    }
    return v << 20;
}

std::filesystem::path KernelCache::path_of(const std::string& key) const { return dir_ / ("kernel-" + key_hash(key) + ".o"); }

std::string KernelCache::refusal() const {
    std::string why;
    open_directory(dir_, &why);
    return why;
}

std::optional<std::vector<std::byte>> KernelCache::load_entry(const std::string& name, const std::string& key) const {
    std::optional<files::Directory> dir = open_directory(dir_);
    if (!dir) return std::nullopt;
    std::vector<std::byte> bytes;
    files::Directory::File file;
    try {
        file = dir->open_file(name, O_RDONLY, /*create=*/false);
        bytes = files::read_whole_file(file.fd.get(), dir->path_of(name), kMaxEntryBytes);
    } catch (const Error&) {
        return std::nullopt;  // missing, a link, a FIFO, a directory, another user's, too large
    }
    EntryHeader h;
    if (bytes.size() < sizeof h) return std::nullopt;
    std::memcpy(&h, bytes.data(), sizeof h);
    const std::byte* data = bytes.data() + sizeof h;
    const size_t size = bytes.size() - sizeof h;
    if (h.magic != kMagic || h.bytes != size || size == 0 || h.digest != digest_of(key, data, size)) return std::nullopt;
    // A use: the eviction order is the modification time.
    ::futimens(file.fd.get(), nullptr);
    return std::vector<std::byte>(data, data + size);
}

void KernelCache::store_entry(const std::string& name, const std::string& key, const std::byte* data, size_t size) const {
    std::optional<files::Directory> dir = open_directory(dir_);
    if (!dir) return;
    EntryHeader h{kMagic, size, digest_of(key, data, size)};
    std::vector<std::byte> bytes(sizeof h + size);
    std::memcpy(bytes.data(), &h, sizeof h);
    if (size) std::memcpy(bytes.data() + sizeof h, data, size);
    try {
        dir->replace_file(name, bytes, 0600);
    } catch (const Error&) {
        return;  // a full or read-only disk: the next run compiles again
    }
    evict();
}

std::optional<std::vector<std::byte>> KernelCache::load(const std::string& key) const {
    return load_entry("kernel-" + key_hash(key) + ".o", key);
}

void KernelCache::store(const std::string& key, const std::vector<std::byte>& object) const {
    store_entry("kernel-" + key_hash(key) + ".o", key, object.data(), object.size());
}

std::optional<std::string> KernelCache::load_text(const std::string& key) const {
    auto bytes = load_entry("tile-" + key_hash(key) + ".txt", key);
    if (!bytes) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size());
}

void KernelCache::store_text(const std::string& key, const std::string& text) const {
    store_entry("tile-" + key_hash(key) + ".txt", key, reinterpret_cast<const std::byte*>(text.data()), text.size());
}

void KernelCache::evict() const {
    std::optional<files::Directory> dir = open_directory(dir_);
    if (!dir) return;
    struct Entry {
        timespec used;
        uint64_t bytes;
        std::string name;
    };
    std::vector<Entry> entries;
    std::vector<std::string> stale;
    uint64_t total = 0;
    const uid_t me = ::geteuid();
    const time_t now = ::time(nullptr);
    int fd = ::dup(dir->fd());
    DIR* d = fd >= 0 ? ::fdopendir(fd) : nullptr;
    if (d == nullptr) {
        if (fd >= 0) ::close(fd);
        return;
    }
    while (dirent* e = ::readdir(d)) {
        std::string name = e->d_name;
        const bool entry = entry_name(name);
        if (!entry && !temporary_name(name)) continue;  // not ours: never touched
        std::optional<struct stat> st = dir->stat_of(name);
        if (!st || !S_ISREG(st->st_mode) || st->st_uid != me) continue;
        if (!entry) {
            if (now - st->st_mtime > 3600) stale.push_back(name);  // a writer killed an hour ago or more
            continue;
        }
        entries.push_back({st->st_mtim, static_cast<uint64_t>(st->st_size), std::move(name)});
        total += static_cast<uint64_t>(st->st_size);
    }
    ::closedir(d);
    for (const std::string& name : stale) dir->remove_own_file(name);
    if (total <= max_bytes_) return;
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        if (a.used.tv_sec != b.used.tv_sec) return a.used.tv_sec < b.used.tv_sec;
        if (a.used.tv_nsec != b.used.tv_nsec) return a.used.tv_nsec < b.used.tv_nsec;
        return a.name < b.name;
    });
    for (const Entry& e : entries) {
        if (total <= max_bytes_) break;
        // Ours by name, owner and contents: an entry in this format, or one an earlier version
        // wrote (an ELF object, a tile choice). Anything else is not the cache's: it is neither
        // removed nor counted.
        char head[8] = {};
        bool ours = false;
        try {
            files::Directory::File f = dir->open_file(e.name, O_RDONLY, /*create=*/false);
            ours = ::pread(f.fd.get(), head, sizeof head, 0) >= 4 &&
                   (std::memcmp(head, kMagic.data(), kMagic.size()) == 0 || std::memcmp(head, "\x7f" "ELF", 4) == 0 ||
                    std::memcmp(head, "mc ", 3) == 0);
        } catch (const Error&) {
        }
        if (!ours || dir->remove_own_file(e.name)) total -= e.bytes;
    }
}

}  // namespace baregpu::compiler
