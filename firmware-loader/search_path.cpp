#include "firmware-loader/search_path.hpp"

#include "base/error.hpp"
#include "base/safe_files.hpp"
#include "firmware-loader/byte_reader.hpp"

#include <cerrno>
#include <cstdlib>
#include <sys/stat.h>
#include <memory>
#include <lzma.h>
#include <zstd.h>

namespace baregpu::fw {

namespace {

constexpr uint8_t kZstdMagic[] = {0x28, 0xb5, 0x2f, 0xfd};
constexpr uint8_t kXzMagic[] = {0xfd, '7', 'z', 'X', 'Z', 0x00};

template <size_t N>
bool starts_with(const std::vector<std::byte>& bytes, const uint8_t (&magic)[N]) {
    if (bytes.size() < N) return false;
    for (size_t i = 0; i < N; ++i)
        if (static_cast<uint8_t>(bytes[i]) != magic[i]) return false;
    return true;
}

[[noreturn]] void corrupt(const std::string& file, const char* format, uint64_t offset, const std::string& what) {
    throw FirmwareError(file, std::string(format) + " stream", offset, std::string("a complete, valid ") + format + " stream",
                        what);
}

void grow(std::vector<std::byte>& out, const std::string& file, const char* format) {
    if (out.size() >= kMaxFirmwareBytes)
        throw FirmwareError(file, std::string(format) + " stream", 0,
                            "at most " + std::to_string(kMaxFirmwareBytes >> 20) + " MiB decompressed", "more");
    // From 64 KiB, doubling: a first buffer of a whole MiB (zeroed) cost more than the decoding of
    // small or broken streams.
    out.resize(std::min<uint64_t>(std::max<uint64_t>(out.size() * 2, 64 << 10), kMaxFirmwareBytes));
}

std::vector<std::byte> unzstd(const std::vector<std::byte>& in, const std::string& file) {
    std::unique_ptr<ZSTD_DStream, size_t (*)(ZSTD_DStream*)> stream(ZSTD_createDStream(), ZSTD_freeDStream);
    if (!stream) throw std::bad_alloc();
    std::vector<std::byte> out;
    ZSTD_inBuffer src{in.data(), in.size(), 0};
    size_t used = 0;
    for (;;) {
        if (used == out.size()) grow(out, file, "zstd");
        ZSTD_outBuffer dst{out.data(), out.size(), used};
        size_t hint = ZSTD_decompressStream(stream.get(), &dst, &src);  // 0: a frame just ended
        if (ZSTD_isError(hint)) corrupt(file, "zstd", src.pos, ZSTD_getErrorName(hint));
        used = dst.pos;
        if (src.pos < src.size) continue;  // more input (maybe another frame)
        if (hint == 0) break;
        // All input given, room left, frame unfinished: the stream was cut short.
        if (dst.pos < dst.size) corrupt(file, "zstd", in.size(), "the stream ends inside a frame");
    }
    out.resize(used);
    return out;
}

std::vector<std::byte> unxz(const std::vector<std::byte>& in, const std::string& file) {
    lzma_stream stream = LZMA_STREAM_INIT;
    // 128 MiB of decoder memory covers every preset (xz -9 needs 65 MiB).
    if (lzma_stream_decoder(&stream, uint64_t{128} << 20, LZMA_CONCATENATED) != LZMA_OK) throw std::bad_alloc();
    std::unique_ptr<lzma_stream, void (*)(lzma_stream*)> guard(&stream, lzma_end);
    std::vector<std::byte> out;
    stream.next_in = reinterpret_cast<const uint8_t*>(in.data());
    stream.avail_in = in.size();
    lzma_action action = LZMA_RUN;
    for (;;) {
        if (stream.total_out == out.size()) grow(out, file, "xz");
        stream.next_out = reinterpret_cast<uint8_t*>(out.data()) + stream.total_out;
        stream.avail_out = out.size() - stream.total_out;
        if (stream.avail_in == 0) action = LZMA_FINISH;
        lzma_ret ret = lzma_code(&stream, action);
        if (ret == LZMA_STREAM_END) break;
        if (ret == LZMA_OK) continue;
        if (ret == LZMA_BUF_ERROR && stream.avail_in == 0)
            corrupt(file, "xz", in.size(), "the stream ends early");
        corrupt(file, "xz", stream.total_in,
                ret == LZMA_DATA_ERROR ? "corrupt data"
                : ret == LZMA_FORMAT_ERROR ? "not an xz stream"
                : ret == LZMA_OPTIONS_ERROR ? "unsupported options"
                : ret == LZMA_MEMLIMIT_ERROR ? "a stream needing more than 128 MiB to decode"
                : "lzma error " + std::to_string(ret));
    }
    out.resize(stream.total_out);
    return out;
}

}  // namespace

std::vector<std::byte> decompress(std::vector<std::byte> bytes, const std::string& file, bool* was_compressed) {
    bool zstd = starts_with(bytes, kZstdMagic);
    bool xz = !zstd && starts_with(bytes, kXzMagic);
    if (was_compressed) *was_compressed = zstd || xz;
    if (zstd) return unzstd(bytes, file);
    if (xz) return unxz(bytes, file);
    return bytes;
}

FirmwareFile read_firmware_file(const std::filesystem::path& path) {
    // A regular file only (a FIFO would block the open and the read, /dev/zero never end), and
    // no more than the largest firmware file.
    struct stat st {};
    UniqueFd fd;
    try {
        fd = files::open_regular_file(path.string(), st);
    } catch (const SystemError&) {
        throw;
    } catch (const Error&) {
        throw FirmwareError(path.string(), "file type", 0, "a regular file", files::kind_of(st.st_mode));
    }
    if (static_cast<uint64_t>(st.st_size) > kMaxFirmwareBytes)
        throw FirmwareError(path.string(), "file size", 0, "at most " + std::to_string(kMaxFirmwareBytes >> 20) + " MiB",
                            std::to_string(st.st_size) + " bytes");
    std::vector<std::byte> bytes;
    try {
        bytes = files::read_whole_file(fd.get(), path.string(), kMaxFirmwareBytes);
    } catch (const SystemError&) {
        throw;
    } catch (const Error& e) {
        throw FirmwareError(path.string(), "file size", 0, "at most " + std::to_string(kMaxFirmwareBytes >> 20) + " MiB", e.what());
    }
    FirmwareFile f;
    f.path = path;
    f.name = path.filename().string();
    f.bytes = decompress(std::move(bytes), path.string(), &f.compressed);
    return f;
}

FirmwareSearchPath FirmwareSearchPath::from_environment(const std::vector<std::filesystem::path>& ahead_of_system) {
    std::vector<std::filesystem::path> dirs;
    if (const char* env = std::getenv("BAREGPU_FIRMWARE_PATH")) {
        std::string_view rest = env;
        while (!rest.empty()) {
            size_t colon = rest.find(':');
            std::string_view entry = rest.substr(0, colon);
            if (!entry.empty()) dirs.emplace_back(entry);
            if (colon == std::string_view::npos) break;
            rest.remove_prefix(colon + 1);
        }
    }
    dirs.insert(dirs.end(), ahead_of_system.begin(), ahead_of_system.end());
    dirs.emplace_back("/lib/firmware/updates");
    dirs.emplace_back("/lib/firmware");
    return FirmwareSearchPath(std::move(dirs));
}

FirmwareSearchPath::FirmwareSearchPath(std::vector<std::filesystem::path> directories)
    : directories_(std::move(directories)) {}

std::optional<std::filesystem::path> FirmwareSearchPath::find(std::string_view name) const {
    for (const auto& dir : directories_)
        for (const char* suffix : {"", ".zst", ".xz"}) {
            std::filesystem::path candidate = dir / (std::string(name) + suffix);
            std::error_code ec;
            if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
        }
    return std::nullopt;
}

FirmwareFile FirmwareSearchPath::load(std::string_view name) const {
    auto path = find(name);
    if (!path) {
        std::string looked;
        // Something by that name that is not a file (a directory, a FIFO, a dangling link): say so.
        std::string found = "none";
        for (const auto& dir : directories_) {
            looked += (looked.empty() ? "" : ", ") + dir.string();
            for (const char* suffix : {"", ".zst", ".xz"}) {
                std::filesystem::path candidate = dir / (std::string(name) + suffix);
                std::error_code ec;
                std::filesystem::file_status st = std::filesystem::symlink_status(candidate, ec);
                if (found != "none" || ec || !std::filesystem::exists(st)) continue;
                found = candidate.string() + " is " +
                        (std::filesystem::is_directory(st)   ? "a directory"
                         : std::filesystem::is_symlink(st)   ? "a symbolic link to nothing that is a regular file"
                         : std::filesystem::is_fifo(st)      ? "a FIFO"
                                                             : "not a regular file");
            }
        }
        throw FirmwareError(std::string(name), "file", 0,
                            "the file (or NAME.zst / NAME.xz) in one of: " + looked +
                                " (set BAREGPU_FIRMWARE_PATH to add a directory; the linux-firmware package provides them)",
                            found);
    }
    FirmwareFile f = read_firmware_file(*path);
    f.name = std::string(name);
    return f;
}

}  // namespace baregpu::fw
