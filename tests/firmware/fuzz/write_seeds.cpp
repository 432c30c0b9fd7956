// Writes the fuzzers' synthetic seeds into a directory: inputs for the parsers that no file in
// firmware/ exercises (a VBIOS, a GSP-RM-like ELF64) and the PSP TOC cut out of a real
// sOS file (a part of an unmodified file, written only into the build directory).
// Usage: write_seeds OUT_DIR [FIRMWARE_DIR]
#include "firmware-loader/amd/psp.hpp"
#include "firmware-loader/search_path.hpp"
#include "tests/firmware/nvidia/synthetic_elf.hpp"
#include "tests/firmware/nvidia/synthetic_vbios.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace {

void write(const std::filesystem::path& path, std::span<const std::byte> bytes) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: write_seeds OUT_DIR [FIRMWARE_DIR]\n");
        return 2;
    }
    std::filesystem::path out = argv[1];
    write(out / "nv_vbios" / "synthetic.rom", baregpu::test::nv::build_rom().bytes.b);
    write(out / "describe" / "synthetic.rom", baregpu::test::nv::build_rom().bytes.b);
    write(out / "nv_elf" / "synthetic-gsp.elf", baregpu::test::nv::gsp_like().bytes.b);
    if (argc > 2) {
        std::filesystem::path sos = std::filesystem::path(argv[2]) / "amdgpu" / "psp_13_0_0_sos.bin";
        if (std::filesystem::exists(sos)) {
            auto file = baregpu::fw::read_firmware_file(sos);
            auto fw = baregpu::fw::amd::parse_psp_sos(baregpu::fw::ByteReader(file.bytes, sos.string()));
            if (const auto* toc = fw.find(baregpu::fw::amd::PspFwType::toc))
                write(out / "psp_signed_binary" / "psp_13_0_0_toc", toc->bytes.bytes);
        }
    }
    return 0;
}
