// CUDA code objects (cubin): an ELF64 file (e_machine EM_CUDA 190) from ptxas / nvcc, parsed and
// linked into one image that a QMD can point at. What is read, per kernel:
//   .text.<kernel>            the SASS (sh_info bits 31:24 = registers per thread)
//   .nv.constant0.<kernel>    constant bank 0: driver words, then the kernel parameters
//   .nv.info.<kernel>         attributes: EIATTR_PARAM_CBANK (where the parameters sit in bank 0),
//                             EIATTR_KPARAM_INFO (each parameter's ordinal, offset and size),
//                             EIATTR_CBANK_PARAM_SIZE, EIATTR_MAXREG_COUNT
//   .nv.info                  per-kernel EIATTR_REGCOUNT, EIATTR_MIN_STACK_SIZE / MAX_STACK_SIZE, FRAME_SIZE
//   .nv.shared.<kernel>       static shared memory (NOBITS: its size)
//   .nv.constant<N> (N > 0)   module constant banks (user __constant__ data, address tables)
//   .nv.global / .nv.global.init   module globals
//   .rel.<section>            R_CUDA_32/64 (1/2), R_CUDA_G32/G64 (3/4), R_CUDA_ABS32_LO_32/HI_32 (56/57)
// Sources: the EIATTR numbers and record formats (EIFMT_NVAL 1, BVAL 2, HVAL 3, SVAL 4: a u8 format,
// a u8 attribute, a u16 value or size, then size bytes) as published in NVIDIA's cuda-gdb sources and
// the GVirtuS cudart headers; the R_CUDA_* numbers from cuda-gdb (cuda-elf-image.c) and CuAssembler;
// each checked against a cubin nvcc 13.0 produced for sm_89 (tests/nv/data/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::nv {

inline constexpr uint16_t kEmCuda = 190;

struct CubinParam {
    uint32_t ordinal = 0;
    uint32_t offset = 0;  // in the parameter block (add KernelInfo::param_offset for bank 0)
    uint32_t size = 0;    // bytes
};

struct CubinKernel {
    std::string name;
    uint64_t text_offset = 0;  // in the linked image
    uint64_t text_size = 0;
    uint32_t registers = 0;
    uint32_t barriers = 0;      // named barriers the kernel uses (EIATTR 0x4c)
    uint32_t shared_bytes = 0;  // static shared memory
    uint32_t min_stack_bytes = 0, max_stack_bytes = 0, frame_bytes = 0;
    uint32_t param_offset = 0;  // in constant bank 0
    uint32_t param_size = 0;
    std::vector<CubinParam> params;         // by ordinal
    std::vector<std::byte> constant_bank0;  // the initial bank 0 image (driver words are the launcher's)
};

// A parsed and linked cubin. Throws FirmwareError (a baregpu::Error) naming the file, the section or
// attribute and what was expected: not an ELF64 for EM_CUDA, another SM than `sm` (when non-zero), a
// section or record outside the file, a relocation of a type we do not apply, a symbol out of range.
class Cubin {
public:
    // sm: 89 for sm_89 (the e_flags SM field, bits 15:8); 0 accepts any.
    static Cubin parse(std::span<const std::byte> elf, std::string name = "cubin", uint32_t sm = 0);

    uint32_t sm() const { return sm_; }
    // The kernels, in file order.
    const std::vector<CubinKernel>& kernels() const { return kernels_; }
    // Throws Error listing the kernels there are when `name` is not one of them.
    const CubinKernel& kernel(std::string_view name) const;

    // The loadable image (text, module constant banks, globals) laid out at 256-byte aligned
    // offsets; its size. link() returns it with every relocation applied for `base`, the GPU VA
    // the image will live at.
    uint64_t image_size() const { return image_size_; }
    std::vector<std::byte> link(uint64_t base) const;
    // Module constant banks (N > 0): bank number -> {offset in the image, size}.
    const std::map<uint32_t, std::pair<uint64_t, uint64_t>>& constant_banks() const { return banks_; }
    // Where a symbol (a global, a kernel) lands in the image; throws Error for unknown names.
    uint64_t symbol_offset(std::string_view symbol) const;

private:
    struct Piece {
        uint64_t image_offset;
        std::vector<std::byte> bytes;  // empty + size for NOBITS
        uint64_t size;
    };
    struct Relocation {
        uint32_t section;  // target section index
        uint64_t offset;
        uint32_t type;
        uint32_t symbol;
    };
    uint64_t symbol_address(uint32_t index, uint64_t base) const;

    std::string name_;
    uint32_t sm_ = 0;
    std::vector<CubinKernel> kernels_;
    std::map<uint32_t, Piece> pieces_;  // section index -> where it is in the image
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> banks_;
    std::vector<std::pair<std::string, std::pair<uint32_t, uint64_t>>> symbols_;  // name -> (section, value)
    std::vector<Relocation> relocations_;
    uint64_t image_size_ = 0;
};

}  // namespace baregpu::nv
