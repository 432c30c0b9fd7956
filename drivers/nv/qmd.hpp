// QMD (Queue Meta Data): the compute launch descriptor a NVIDIA compute class reads through
// SEND_PCAS_A (qmd_va >> 8) or a dependent-QMD pointer. Layouts from NVIDIA open-gpu-doc
// classes/compute/:
//   V03_00 (Ampere GA10x, Ada AD10x): clc6c0qmd.h (NVC6C0_QMDV03_00_*; clc9c0qmd.h repeats it), 256 bytes;
//   V04_00 (Hopper GH100):            clcbc0qmd.h (NVCBC0_QMDV04_00_*), 384 bytes;
//   V05_00 (Blackwell GB10x/GB20x):   clcdc0qmd.h / clcec0qmd.h (NVCEC0_QMDV05_00_*, identical), 384 bytes.
// Every field is MW(hi:lo): bit positions counted from bit 0 of 32-bit word 0, little-endian, as the
// headers write them. Fields move *and* change units between versions (program address and shared
// memory size are shifted in V05, constant buffer addresses in V04/V05; release addresses have 8
// upper bits in V03, 25 in V04/V05; compare the three headers) — so each version has its own
// table and every setter checks that the value fits before writing a bit.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace baregpu::nv {

enum class QmdVersion { v03_00, v04_00, v05_00 };

const char* qmd_version_name(QmdVersion v);

// One MW(hi:lo) field. name is the header's name without the NVxxC0_QMDVxx_xx_ prefix.
struct QmdField {
    uint16_t hi = 0;
    uint16_t lo = 0;
    const char* name = nullptr;
    constexpr unsigned width() const { return hi - lo + 1u; }
    // The same field for array element i (the headers' "(i)" macros are a fixed stride).
    constexpr QmdField at(unsigned i, unsigned stride) const {
        return {static_cast<uint16_t>(hi + i * stride), static_cast<uint16_t>(lo + i * stride), name};
    }
};

// The release semaphores a QMD writes when its grid completes (V03 RELEASE0/1/2_*, V04/V05
// RELEASE_SEMAPHORE0/1/2_* with RELEASE_*(i) control bits).
struct QmdReleaseFields {
    QmdField addr_lower, addr_upper, payload_lower, payload_upper, enable, structure_size, payload64b, membar_type;
};

struct QmdLayout {
    QmdVersion version;
    unsigned size_bytes;
    uint32_t major_version, minor_version;
    QmdField qmd_major_version, qmd_minor_version;
    QmdField qmd_type;  // V04/V05 only (name == nullptr in V03)
    QmdField grid_width, grid_height, grid_depth;
    QmdField block_dim0, block_dim1, block_dim2;
    QmdField shared_memory_size;
    unsigned shared_memory_shift;  // V05: SHARED_MEMORY_SIZE_SHIFTED7
    QmdField min_sm_config_shared_mem_size, max_sm_config_shared_mem_size, target_sm_config_shared_mem_size;
    QmdField register_count, barrier_count;
    QmdField program_address_lower, program_address_upper;
    unsigned program_address_shift;  // V05: PROGRAM_ADDRESS_*_SHIFTED4
    QmdField sass_version;
    // Constant buffer 0's fields; buffer i is at +i*cb_addr_stride (address, size) and
    // +i*cb_flag_stride (valid, V04/V05 invalidate; V03 invalidate sits in the address slot).
    QmdField cb_addr_lower, cb_addr_upper, cb_size_shifted4, cb_valid, cb_invalidate;
    unsigned cb_addr_stride, cb_valid_stride, cb_invalidate_stride;
    unsigned cb_addr_shift;  // V04/V05: CONSTANT_BUFFER_ADDR_*_SHIFTED6
    std::array<QmdReleaseFields, 3> release;
    QmdField invalidate_texture_header_cache, invalidate_texture_sampler_cache, invalidate_texture_data_cache,
        invalidate_shader_data_cache, invalidate_instruction_cache, invalidate_shader_constant_cache;
    QmdField dependent_qmd0_pointer, dependent_qmd0_enable, dependent_qmd0_action, dependent_qmd0_prefetch;
    QmdField cwd_membar_type;
};

const QmdLayout& qmd_layout(QmdVersion v);

inline constexpr unsigned kQmdConstantBuffers = 8;  // CONSTANT_BUFFER_*(i), i = 0..7 in every version
inline constexpr unsigned kQmdMaxWords = 96;        // 384 bytes (V04/V05)
inline constexpr uint32_t kQmdTypeGridCta = 2;      // QMD_TYPE_GRID_CTA (clcbc0qmd.h, clcec0qmd.h)

// *_STRUCTURE_SIZE values (same in all three headers).
enum class SemaphoreSize : uint32_t { four_words = 0, one_word = 1, two_words = 2 };
// DEPENDENT_QMD*_ACTION values (same in all three headers).
enum class DependentAction : uint32_t { increment_put = 0, schedule = 1, invalidate_copy_schedule = 3,
                                        decrement_dependence = 4 };
// CWD_MEMBAR_TYPE values.
enum class CwdMembar : uint32_t { l1_none = 0, l1_sysmembar = 1, l1_membar = 3 };

class Qmd {
public:
    // Zeroed, with QMD_MAJOR/MINOR_VERSION set (and QMD_TYPE = GRID_CTA in V04/V05).
    explicit Qmd(QmdVersion version);
    // An encoded QMD of `version` (its first size_bytes / 4 words are taken as they are), to patch fields
    // of a QMD that already lives in command memory and write words() back.
    Qmd(QmdVersion version, std::span<const uint32_t> words);

    QmdVersion version() const { return layout_->version; }
    const QmdLayout& layout() const { return *layout_; }
    size_t size_bytes() const { return layout_->size_bytes; }
    std::span<const uint32_t> words() const { return {words_.data(), layout_->size_bytes / 4}; }

    // The generic writer: MW(hi:lo) = value. Throws baregpu::Error when hi < lo, the field is wider
    // than 64 bits or past the QMD's end, or the value does not fit in hi - lo + 1 bits.
    void set(unsigned hi, unsigned lo, uint64_t value);
    uint64_t get(unsigned hi, unsigned lo) const;
    // The same, naming the field in the error. A field this version lacks (name == nullptr) throws.
    void set(const QmdField& field, uint64_t value);
    uint64_t get(const QmdField& field) const;

    // Grid in CTAs (CTA_RASTER_* in V03, GRID_* in V04/V05).
    void set_grid(uint32_t x, uint32_t y, uint32_t z);
    // Block in threads (CTA_THREAD_DIMENSION0/1/2; dimension 2 has 8 bits in V05).
    void set_block(uint32_t x, uint32_t y, uint32_t z);
    // Shared memory per CTA in bytes (V05 stores bytes >> 7: must be a multiple of 128).
    void set_shared_memory_size(uint32_t bytes);
    // The *_SM_CONFIG_SHARED_MEM_SIZE fields, raw (6 bits each; the encoding is the caller's).
    void set_sm_config_shared_mem(uint32_t min, uint32_t max, uint32_t target);
    void set_register_count(uint32_t registers);
    void set_barrier_count(uint32_t barriers);
    // Program entry GPU VA (PROGRAM_ADDRESS_LOWER/UPPER; V05 stores va >> 4: 16-byte aligned).
    void set_program_address(uint64_t va);
    void set_sass_version(uint32_t v);
    // Constant buffer `index`: address, size in bytes (a multiple of 16: SIZE_SHIFTED4) and VALID.
    // V04/V05 store the address >> 6 (64-byte aligned).
    void set_constant_buffer(unsigned index, uint64_t va, uint32_t size_bytes);
    // Release semaphore `index` (0, 1 or 2) written when the grid completes.
    void set_release_semaphore(unsigned index, uint64_t va, uint64_t payload, bool payload64 = true,
                               SemaphoreSize size = SemaphoreSize::four_words);
    // Every INVALIDATE_*_CACHE bit: texture header, sampler, texture data, shader data, instruction, constant.
    void invalidate_caches();
    // Chaining: when this grid completes, act on the QMD at qmd_va (256-byte aligned: stored >> 8).
    void set_dependent_qmd0(uint64_t qmd_va, DependentAction action = DependentAction::schedule,
                            bool prefetch = true);
    void set_cwd_membar(CwdMembar type);

private:
    const QmdLayout* layout_;
    std::array<uint32_t, kQmdMaxWords> words_{};
    void set_shifted_address(const QmdField& lower, const QmdField& upper, unsigned shift, uint64_t va,
                             const char* what);
};

}  // namespace baregpu::nv
