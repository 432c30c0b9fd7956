// A strict reader for the section table of little-endian ELF32/ELF64 files: the GSP-RM image
// (ELF64, sections .fwimage and .fwsignature_<family>) and the Blackwell FMC (ELF32, sections
// hash, signature, publickey and image). Only sections are read; nothing is loaded or run.
#pragma once

#include "firmware-loader/byte_reader.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::fw::nv {

// Layouts: Linux include/uapi/linux/elf.h (torvalds/linux db03dce9365dc4350698b885e723b01b90484525):
// Elf32_Ehdr/Elf64_Ehdr and Elf32_Shdr/Elf64_Shdr, which follow the System V gABI.
inline constexpr uint8_t kElfClass32 = 1;  // EI_CLASS: ELFCLASS32
inline constexpr uint8_t kElfClass64 = 2;  // ELFCLASS64
inline constexpr uint8_t kElfData2Lsb = 1;  // EI_DATA: ELFDATA2LSB
inline constexpr uint32_t kShtStrtab = 3;   // SHT_STRTAB
inline constexpr uint32_t kShtNobits = 8;   // SHT_NOBITS: occupies no bytes of the file

// True when the file starts with "\x7fELF" (EI_MAG0..3).
bool has_elf_magic(const ByteReader& file);

struct ElfSection {
    std::string name;
    uint32_t type = 0;
    uint64_t flags = 0;
    uint32_t link = 0;        // sh_link
    uint32_t info = 0;        // sh_info
    uint64_t addralign = 0;   // sh_addralign
    uint64_t entsize = 0;     // sh_entsize
    uint64_t size = 0;        // sh_size (also for SHT_NOBITS, which has no bytes in the file)
    Region region;  // its bytes in the file; empty for SHT_NOBITS
};

class ElfImage {
public:
    // Checks the ELF identification and header, then every section header: the table, each
    // section's bytes and the section-name string table lie inside the file.
    static ElfImage parse(const ByteReader& file);

    bool is_64bit() const { return is_64bit_; }
    uint16_t e_type() const { return e_type_; }
    uint16_t e_machine() const { return e_machine_; }
    uint64_t e_shoff() const { return e_shoff_; }
    uint16_t e_shstrndx() const { return e_shstrndx_; }
    const std::vector<ElfSection>& sections() const { return sections_; }

    // The first section with this name, or nullptr.
    const ElfSection* find(std::string_view name) const;
    // Like find, but a missing section is a FirmwareError naming it.
    const ElfSection& require(const ByteReader& file, std::string_view name) const;

private:
    bool is_64bit_ = false;
    uint16_t e_type_ = 0;
    uint16_t e_machine_ = 0;
    uint64_t e_shoff_ = 0;
    uint16_t e_shstrndx_ = 0;
    std::vector<ElfSection> sections_;
};

// The GSP-RM image: .fwimage (what GSP runs) and one signature section per GPU family, named
// .fwsignature_<family> (".fwsignature_ad10x").
struct GspImage {
    ElfImage elf;
    Region fwimage;
    std::vector<ElfSection> signatures;
};
// Throws FirmwareError when .fwimage is missing or empty.
GspImage parse_gsp_image(const ByteReader& file);
inline constexpr std::string_view kFwSignaturePrefix = ".fwsignature_";

// The Blackwell FSP "first mutable code" image (nvidia/gb202/gsp/fmc-*.bin, an ELF32; tinygrad nv/ip.py
// NV_FLCN_COT reads the same sections): four named sections, all required.
struct FmcImage {
    ElfImage elf;
    Region hash, signature, publickey, image;
};
FmcImage parse_fmc_image(const ByteReader& file);

}  // namespace baregpu::fw::nv
