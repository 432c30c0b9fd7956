// Our loader for x86-64 ELF relocatable objects (what `cc -c -fPIC` writes): the code objects the
// CPU device and the simulated GPUs run as host code. parse() validates everything it reads
// (header, section table, names, symbols, relocations, kernel descriptors) against the file's size
// before use and rejects what it does not support with a message that names the section, offset and
// what was expected; link() lays the loadable sections out (code, then read-only data, then
// writable data, each on its own pages so the device can protect them), resolves relocations for a
// load address, and builds a GOT and call stubs for the few host functions kernels may call.
//
// Formats: the System V gABI (ELF-64 object file format) and the x86-64 psABI relocation
// table (R_X86_64_*), as in glibc's <elf.h>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::hostcode {

// A host function kernels may call (memcpy, ...).
struct Import {
    std::string_view name;
    uint64_t address;
};

struct KernelEntry {
    std::string name;
    uint64_t offset;  // of the function in the image
    uint32_t kernarg_size;
    uint16_t num_buffers;
    uint16_t num_values;
    uint32_t shared_bytes;
    uint32_t private_bytes;
    uint32_t max_threads;
};

class ElfObject {
public:
    // Parse and validate. `origin` names the object in errors ("code object add.o").
    // Throws baregpu::Error (with device name `device`) describing the first problem found.
    static ElfObject parse(std::span<const std::byte> bytes, std::string device, std::string origin);

    struct Layout {
        uint64_t size = 0;  // bytes of image, a multiple of 4 KiB
        uint64_t exec_begin = 0, exec_end = 0;  // code and call stubs: read + execute
        uint64_t ro_begin = 0, ro_end = 0;      // read-only data and the GOT: read
        uint64_t rw_begin = 0, rw_end = 0;      // data and bss: read + write
    };
    const Layout& layout() const { return layout_; }
    const std::vector<KernelEntry>& kernels() const { return kernels_; }
    // Throws baregpu::Error listing the kernels the object has when `name` is not one.
    const KernelEntry& kernel(std::string_view name) const;

    // Write the image for load address `base` into `image` (layout().size bytes). Throws
    // baregpu::Error for an undefined symbol that is not an import, or a relocation whose value
    // does not fit its field at this address.
    void link(std::span<std::byte> image, uint64_t base, std::span<const Import> imports) const;

private:
    struct Section {
        std::string name;
        uint32_t type;
        uint64_t flags;
        uint64_t file_offset;
        uint64_t size;
        uint64_t align;
        uint32_t link;
        uint32_t info;
        uint64_t entsize;
        bool loaded = false;
        uint64_t image_offset = 0;
    };
    struct Symbol {
        std::string name;
        uint8_t type;
        uint8_t binding;
        uint16_t section;  // SHN_UNDEF, SHN_ABS or a section index
        uint64_t value;
        uint32_t got_slot = UINT32_MAX;  // index into the GOT when a GOTPCREL names it
        uint32_t stub = UINT32_MAX;      // call stub for an undefined function
    };
    struct Relocation {
        uint32_t target;  // section index
        uint64_t offset;
        uint32_t type;
        uint32_t symbol;
        int64_t addend;
    };

    std::string where(const Section& s) const;
    [[noreturn]] void fail(const std::string& what) const;

    std::string device_;
    std::string origin_;
    std::vector<std::byte> file_;  // the object, copied: parse() may outlive the caller's bytes
    std::vector<Section> sections_;
    std::vector<Symbol> symbols_;
    std::vector<Relocation> relocations_;
    std::vector<KernelEntry> kernels_;
    uint64_t got_offset_ = 0, got_entries_ = 0;
    uint64_t stubs_offset_ = 0, stub_count_ = 0;
    Layout layout_;
};

}  // namespace baregpu::hostcode
