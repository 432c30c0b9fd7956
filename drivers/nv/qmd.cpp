// QMD layouts and builder. Positions transcribed from open-gpu-doc classes/compute/clc6c0qmd.h
// (V03_00), clcbc0qmd.h (V04_00) and clcec0qmd.h (V05_00); see qmd.hpp.
#include "drivers/nv/qmd.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>

namespace baregpu::nv {
namespace {

constexpr QmdField F(uint16_t hi, uint16_t lo, const char* name) { return {hi, lo, name}; }
constexpr QmdField kAbsent{};

// clc6c0qmd.h, NVC6C0_QMDV03_00_*. 2048 bits.
constexpr QmdLayout kV03{
    .version = QmdVersion::v03_00,
    .size_bytes = 256,
    .major_version = 3,
    .minor_version = 0,
    .qmd_major_version = F(583, 580, "QMD_MAJOR_VERSION"),
    .qmd_minor_version = F(579, 576, "QMD_VERSION"),
    .qmd_type = kAbsent,
    .grid_width = F(415, 384, "CTA_RASTER_WIDTH"),
    .grid_height = F(431, 416, "CTA_RASTER_HEIGHT"),
    .grid_depth = F(463, 448, "CTA_RASTER_DEPTH"),
    .block_dim0 = F(607, 592, "CTA_THREAD_DIMENSION0"),
    .block_dim1 = F(623, 608, "CTA_THREAD_DIMENSION1"),
    .block_dim2 = F(639, 624, "CTA_THREAD_DIMENSION2"),
    .shared_memory_size = F(561, 544, "SHARED_MEMORY_SIZE"),
    .shared_memory_shift = 0,
    .min_sm_config_shared_mem_size = F(567, 562, "MIN_SM_CONFIG_SHARED_MEM_SIZE"),
    .max_sm_config_shared_mem_size = F(574, 569, "MAX_SM_CONFIG_SHARED_MEM_SIZE"),
    .target_sm_config_shared_mem_size = F(662, 657, "TARGET_SM_CONFIG_SHARED_MEM_SIZE"),
    .register_count = F(656, 648, "REGISTER_COUNT_V"),
    .barrier_count = F(767, 763, "BARRIER_COUNT"),
    .program_address_lower = F(1567, 1536, "PROGRAM_ADDRESS_LOWER"),
    .program_address_upper = F(1584, 1568, "PROGRAM_ADDRESS_UPPER"),
    .program_address_shift = 0,
    .sass_version = F(1663, 1656, "SASS_VERSION"),
    .cb_addr_lower = F(1055, 1024, "CONSTANT_BUFFER_ADDR_LOWER"),
    .cb_addr_upper = F(1072, 1056, "CONSTANT_BUFFER_ADDR_UPPER"),
    .cb_size_shifted4 = F(1087, 1075, "CONSTANT_BUFFER_SIZE_SHIFTED4"),
    .cb_valid = F(640, 640, "CONSTANT_BUFFER_VALID"),
    .cb_invalidate = F(1074, 1074, "CONSTANT_BUFFER_INVALIDATE"),
    .cb_addr_stride = 64,
    .cb_valid_stride = 1,
    .cb_invalidate_stride = 64,
    .cb_addr_shift = 0,
    .release = {{
        {F(799, 768, "RELEASE0_ADDRESS_LOWER"), F(807, 800, "RELEASE0_ADDRESS_UPPER"),
         F(863, 832, "RELEASE0_PAYLOAD_LOWER"), F(895, 864, "RELEASE0_PAYLOAD_UPPER"), F(823, 823, "RELEASE0_ENABLE"),
         F(831, 830, "RELEASE0_STRUCTURE_SIZE"), F(829, 829, "RELEASE0_PAYLOAD64B"),
         F(819, 819, "RELEASE0_MEMBAR_TYPE")},
        {F(927, 896, "RELEASE1_ADDRESS_LOWER"), F(935, 928, "RELEASE1_ADDRESS_UPPER"),
         F(991, 960, "RELEASE1_PAYLOAD_LOWER"), F(1023, 992, "RELEASE1_PAYLOAD_UPPER"), F(951, 951, "RELEASE1_ENABLE"),
         F(959, 958, "RELEASE1_STRUCTURE_SIZE"), F(957, 957, "RELEASE1_PAYLOAD64B"),
         F(947, 947, "RELEASE1_MEMBAR_TYPE")},
        {F(1695, 1664, "RELEASE2_ADDRESS_LOWER"), F(1703, 1696, "RELEASE2_ADDRESS_UPPER"),
         F(1759, 1728, "RELEASE2_PAYLOAD_LOWER"), F(1791, 1760, "RELEASE2_PAYLOAD_UPPER"),
         F(1719, 1719, "RELEASE2_ENABLE"), F(1727, 1726, "RELEASE2_STRUCTURE_SIZE"),
         F(1725, 1725, "RELEASE2_PAYLOAD64B"), F(1715, 1715, "RELEASE2_MEMBAR_TYPE")},
    }},
    .invalidate_texture_header_cache = F(186, 186, "INVALIDATE_TEXTURE_HEADER_CACHE"),
    .invalidate_texture_sampler_cache = F(187, 187, "INVALIDATE_TEXTURE_SAMPLER_CACHE"),
    .invalidate_texture_data_cache = F(188, 188, "INVALIDATE_TEXTURE_DATA_CACHE"),
    .invalidate_shader_data_cache = F(189, 189, "INVALIDATE_SHADER_DATA_CACHE"),
    .invalidate_instruction_cache = F(190, 190, "INVALIDATE_INSTRUCTION_CACHE"),
    .invalidate_shader_constant_cache = F(191, 191, "INVALIDATE_SHADER_CONSTANT_CACHE"),
    .dependent_qmd0_pointer = F(511, 480, "DEPENDENT_QMD0_POINTER"),
    .dependent_qmd0_enable = F(512, 512, "DEPENDENT_QMD0_ENABLE"),
    .dependent_qmd0_action = F(515, 513, "DEPENDENT_QMD0_ACTION"),
    .dependent_qmd0_prefetch = F(516, 516, "DEPENDENT_QMD0_PREFETCH"),
    .cwd_membar_type = F(369, 368, "CWD_MEMBAR_TYPE"),
};

// clcbc0qmd.h, NVCBC0_QMDV04_00_*. 3072 bits.
constexpr QmdLayout kV04{
    .version = QmdVersion::v04_00,
    .size_bytes = 384,
    .major_version = 4,
    .minor_version = 0,
    .qmd_major_version = F(583, 580, "QMD_MAJOR_VERSION"),
    .qmd_minor_version = F(579, 576, "QMD_MINOR_VERSION"),
    .qmd_type = F(25, 23, "QMD_TYPE"),
    .grid_width = F(1055, 1024, "GRID_WIDTH"),
    .grid_height = F(1071, 1056, "GRID_HEIGHT"),
    .grid_depth = F(1103, 1088, "GRID_DEPTH"),
    .block_dim0 = F(1167, 1152, "CTA_THREAD_DIMENSION0"),
    .block_dim1 = F(1183, 1168, "CTA_THREAD_DIMENSION1"),
    .block_dim2 = F(1199, 1184, "CTA_THREAD_DIMENSION2"),
    .shared_memory_size = F(601, 584, "SHARED_MEMORY_SIZE"),
    .shared_memory_shift = 0,
    .min_sm_config_shared_mem_size = F(613, 608, "MIN_SM_CONFIG_SHARED_MEM_SIZE"),
    .max_sm_config_shared_mem_size = F(619, 614, "MAX_SM_CONFIG_SHARED_MEM_SIZE"),
    .target_sm_config_shared_mem_size = F(625, 620, "TARGET_SM_CONFIG_SHARED_MEM_SIZE"),
    .register_count = F(1208, 1200, "REGISTER_COUNT"),
    .barrier_count = F(1215, 1211, "BARRIER_COUNT"),
    .program_address_lower = F(1247, 1216, "PROGRAM_ADDRESS_LOWER"),
    .program_address_upper = F(1272, 1248, "PROGRAM_ADDRESS_UPPER"),
    .program_address_shift = 0,
    .sass_version = F(543, 536, "SASS_VERSION"),
    .cb_addr_lower = F(1567, 1536, "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6"),
    .cb_addr_upper = F(1586, 1568, "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6"),
    .cb_size_shifted4 = F(1599, 1587, "CONSTANT_BUFFER_SIZE_SHIFTED4"),
    .cb_valid = F(416, 416, "CONSTANT_BUFFER_VALID"),
    .cb_invalidate = F(419, 419, "CONSTANT_BUFFER_INVALIDATE"),
    .cb_addr_stride = 64,
    .cb_valid_stride = 4,
    .cb_invalidate_stride = 4,
    .cb_addr_shift = 6,
    .release = {{
        {F(671, 640, "RELEASE_SEMAPHORE0_ADDR_LOWER"), F(696, 672, "RELEASE_SEMAPHORE0_ADDR_UPPER"),
         F(735, 704, "RELEASE_SEMAPHORE0_PAYLOAD_LOWER"), F(767, 736, "RELEASE_SEMAPHORE0_PAYLOAD_UPPER"),
         F(320, 320, "RELEASE_ENABLE(0)"), F(322, 321, "RELEASE_STRUCTURE_SIZE(0)"),
         F(332, 332, "RELEASE_PAYLOAD64B(0)"), F(323, 323, "RELEASE_MEMBAR_TYPE(0)")},
        {F(799, 768, "RELEASE_SEMAPHORE1_ADDR_LOWER"), F(824, 800, "RELEASE_SEMAPHORE1_ADDR_UPPER"),
         F(863, 832, "RELEASE_SEMAPHORE1_PAYLOAD_LOWER"), F(895, 864, "RELEASE_SEMAPHORE1_PAYLOAD_UPPER"),
         F(336, 336, "RELEASE_ENABLE(1)"), F(338, 337, "RELEASE_STRUCTURE_SIZE(1)"),
         F(348, 348, "RELEASE_PAYLOAD64B(1)"), F(339, 339, "RELEASE_MEMBAR_TYPE(1)")},
        {F(927, 896, "RELEASE_SEMAPHORE2_ADDR_LOWER"), F(952, 928, "RELEASE_SEMAPHORE2_ADDR_UPPER"),
         F(991, 960, "RELEASE_SEMAPHORE2_PAYLOAD_LOWER"), F(1023, 992, "RELEASE_SEMAPHORE2_PAYLOAD_UPPER"),
         F(352, 352, "RELEASE_ENABLE(2)"), F(354, 353, "RELEASE_STRUCTURE_SIZE(2)"),
         F(364, 364, "RELEASE_PAYLOAD64B(2)"), F(355, 355, "RELEASE_MEMBAR_TYPE(2)")},
    }},
    .invalidate_texture_header_cache = F(602, 602, "INVALIDATE_TEXTURE_HEADER_CACHE"),
    .invalidate_texture_sampler_cache = F(603, 603, "INVALIDATE_TEXTURE_SAMPLER_CACHE"),
    .invalidate_texture_data_cache = F(604, 604, "INVALIDATE_TEXTURE_DATA_CACHE"),
    .invalidate_shader_data_cache = F(605, 605, "INVALIDATE_SHADER_DATA_CACHE"),
    .invalidate_instruction_cache = F(606, 606, "INVALIDATE_INSTRUCTION_CACHE"),
    .invalidate_shader_constant_cache = F(607, 607, "INVALIDATE_SHADER_CONSTANT_CACHE"),
    .dependent_qmd0_pointer = F(479, 448, "DEPENDENT_QMD0_POINTER"),
    .dependent_qmd0_enable = F(368, 368, "DEPENDENT_QMD_ENABLE(0)"),
    .dependent_qmd0_action = F(371, 369, "DEPENDENT_QMD_ACTION(0)"),
    .dependent_qmd0_prefetch = F(372, 372, "DEPENDENT_QMD_PREFETCH(0)"),
    .cwd_membar_type = F(1137, 1136, "CWD_MEMBAR_TYPE"),
};

// clcec0qmd.h, NVCEC0_QMDV05_00_* (clcdc0qmd.h's V05_00 is the same). 3072 bits.
constexpr QmdLayout kV05{
    .version = QmdVersion::v05_00,
    .size_bytes = 384,
    .major_version = 5,
    .minor_version = 0,
    .qmd_major_version = F(471, 468, "QMD_MAJOR_VERSION"),
    .qmd_minor_version = F(467, 464, "QMD_MINOR_VERSION"),
    .qmd_type = F(153, 151, "QMD_TYPE"),
    .grid_width = F(1279, 1248, "GRID_WIDTH"),
    .grid_height = F(1295, 1280, "GRID_HEIGHT"),
    .grid_depth = F(1327, 1312, "GRID_DEPTH"),
    .block_dim0 = F(1103, 1088, "CTA_THREAD_DIMENSION0"),
    .block_dim1 = F(1119, 1104, "CTA_THREAD_DIMENSION1"),
    .block_dim2 = F(1127, 1120, "CTA_THREAD_DIMENSION2"),
    .shared_memory_size = F(1162, 1152, "SHARED_MEMORY_SIZE_SHIFTED7"),
    .shared_memory_shift = 7,
    .min_sm_config_shared_mem_size = F(1168, 1163, "MIN_SM_CONFIG_SHARED_MEM_SIZE"),
    .max_sm_config_shared_mem_size = F(1174, 1169, "MAX_SM_CONFIG_SHARED_MEM_SIZE"),
    .target_sm_config_shared_mem_size = F(1180, 1175, "TARGET_SM_CONFIG_SHARED_MEM_SIZE"),
    .register_count = F(1136, 1128, "REGISTER_COUNT"),
    .barrier_count = F(1141, 1137, "BARRIER_COUNT"),
    .program_address_lower = F(1055, 1024, "PROGRAM_ADDRESS_LOWER_SHIFTED4"),
    .program_address_upper = F(1076, 1056, "PROGRAM_ADDRESS_UPPER_SHIFTED4"),
    .program_address_shift = 4,
    .sass_version = F(455, 448, "SASS_VERSION"),
    .cb_addr_lower = F(1375, 1344, "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6"),
    .cb_addr_upper = F(1394, 1376, "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6"),
    .cb_size_shifted4 = F(1407, 1395, "CONSTANT_BUFFER_SIZE_SHIFTED4"),
    .cb_valid = F(1856, 1856, "CONSTANT_BUFFER_VALID"),
    .cb_invalidate = F(1859, 1859, "CONSTANT_BUFFER_INVALIDATE"),
    .cb_addr_stride = 64,
    .cb_valid_stride = 4,
    .cb_invalidate_stride = 4,
    .cb_addr_shift = 6,
    .release = {{
        {F(511, 480, "RELEASE_SEMAPHORE0_ADDR_LOWER"), F(536, 512, "RELEASE_SEMAPHORE0_ADDR_UPPER"),
         F(575, 544, "RELEASE_SEMAPHORE0_PAYLOAD_LOWER"), F(607, 576, "RELEASE_SEMAPHORE0_PAYLOAD_UPPER"),
         F(288, 288, "RELEASE_ENABLE(0)"), F(290, 289, "RELEASE_STRUCTURE_SIZE(0)"),
         F(300, 300, "RELEASE_PAYLOAD64B(0)"), F(291, 291, "RELEASE_MEMBAR_TYPE(0)")},
        {F(799, 768, "RELEASE_SEMAPHORE1_ADDR_LOWER"), F(824, 800, "RELEASE_SEMAPHORE1_ADDR_UPPER"),
         F(863, 832, "RELEASE_SEMAPHORE1_PAYLOAD_LOWER"), F(895, 864, "RELEASE_SEMAPHORE1_PAYLOAD_UPPER"),
         F(304, 304, "RELEASE_ENABLE(1)"), F(306, 305, "RELEASE_STRUCTURE_SIZE(1)"),
         F(316, 316, "RELEASE_PAYLOAD64B(1)"), F(307, 307, "RELEASE_MEMBAR_TYPE(1)")},
        {F(927, 896, "RELEASE_SEMAPHORE2_ADDR_LOWER"), F(952, 928, "RELEASE_SEMAPHORE2_ADDR_UPPER"),
         F(991, 960, "RELEASE_SEMAPHORE2_PAYLOAD_LOWER"), F(1023, 992, "RELEASE_SEMAPHORE2_PAYLOAD_UPPER"),
         F(320, 320, "RELEASE_ENABLE(2)"), F(322, 321, "RELEASE_STRUCTURE_SIZE(2)"),
         F(332, 332, "RELEASE_PAYLOAD64B(2)"), F(323, 323, "RELEASE_MEMBAR_TYPE(2)")},
    }},
    .invalidate_texture_header_cache = F(472, 472, "INVALIDATE_TEXTURE_HEADER_CACHE"),
    .invalidate_texture_sampler_cache = F(473, 473, "INVALIDATE_TEXTURE_SAMPLER_CACHE"),
    .invalidate_texture_data_cache = F(474, 474, "INVALIDATE_TEXTURE_DATA_CACHE"),
    .invalidate_shader_data_cache = F(475, 475, "INVALIDATE_SHADER_DATA_CACHE"),
    .invalidate_instruction_cache = F(476, 476, "INVALIDATE_INSTRUCTION_CACHE"),
    .invalidate_shader_constant_cache = F(477, 477, "INVALIDATE_SHADER_CONSTANT_CACHE"),
    .dependent_qmd0_pointer = F(415, 384, "DEPENDENT_QMD0_POINTER"),
    .dependent_qmd0_enable = F(336, 336, "DEPENDENT_QMD0_ENABLE"),
    .dependent_qmd0_action = F(339, 337, "DEPENDENT_QMD0_ACTION"),
    .dependent_qmd0_prefetch = F(340, 340, "DEPENDENT_QMD0_PREFETCH"),
    .cwd_membar_type = F(625, 624, "CWD_MEMBAR_TYPE"),
};

uint64_t field_mask(unsigned width) { return width >= 64 ? ~0ull : (1ull << width) - 1; }

}  // namespace

const char* qmd_version_name(QmdVersion v) {
    switch (v) {
    case QmdVersion::v03_00: return "V03_00";
    case QmdVersion::v04_00: return "V04_00";
    case QmdVersion::v05_00: return "V05_00";
    }
    return "?";
}

const QmdLayout& qmd_layout(QmdVersion v) {
    switch (v) {
    case QmdVersion::v03_00: return kV03;
    case QmdVersion::v04_00: return kV04;
    case QmdVersion::v05_00: return kV05;
    }
    throw Error("", "unknown QMD version");
}

Qmd::Qmd(QmdVersion version, std::span<const uint32_t> words) : layout_(&qmd_layout(version)) {
    const size_t n = std::min<size_t>(words.size(), layout_->size_bytes / 4);
    std::copy_n(words.begin(), n, words_.begin());
}

Qmd::Qmd(QmdVersion version) : layout_(&qmd_layout(version)) {
    set(layout_->qmd_major_version, layout_->major_version);
    set(layout_->qmd_minor_version, layout_->minor_version);
    if (layout_->qmd_type.name != nullptr) set(layout_->qmd_type, kQmdTypeGridCta);
}

void Qmd::set(unsigned hi, unsigned lo, uint64_t value) {
    if (hi < lo || hi - lo >= 64 || hi >= layout_->size_bytes * 8)
        throw Error("", fmt::format("QMD {}: MW({}:{}) is not a field of a {}-byte QMD", qmd_version_name(version()),
                                    hi, lo, layout_->size_bytes));
    const unsigned width = hi - lo + 1;
    if ((value & ~field_mask(width)) != 0)
        throw Error("", fmt::format("QMD {}: value {:#x} does not fit in MW({}:{}) ({} bits)",
                                    qmd_version_name(version()), value, hi, lo, width));
    // Write bit by word: a field may straddle a 32-bit word boundary.
    unsigned bit = lo;
    while (bit <= hi) {
        const unsigned word = bit / 32, shift = bit % 32;
        const unsigned n = std::min(32 - shift, hi - bit + 1);
        const uint32_t mask = static_cast<uint32_t>(field_mask(n) << shift);
        const uint32_t part = static_cast<uint32_t>((value >> (bit - lo)) & field_mask(n)) << shift;
        words_[word] = (words_[word] & ~mask) | part;
        bit += n;
    }
}

uint64_t Qmd::get(unsigned hi, unsigned lo) const {
    if (hi < lo || hi - lo >= 64 || hi >= layout_->size_bytes * 8)
        throw Error("", fmt::format("QMD {}: MW({}:{}) is not a field of a {}-byte QMD", qmd_version_name(version()),
                                    hi, lo, layout_->size_bytes));
    uint64_t out = 0;
    unsigned bit = lo;
    while (bit <= hi) {
        const unsigned word = bit / 32, shift = bit % 32;
        const unsigned n = std::min(32 - shift, hi - bit + 1);
        out |= ((static_cast<uint64_t>(words_[word]) >> shift) & field_mask(n)) << (bit - lo);
        bit += n;
    }
    return out;
}

void Qmd::set(const QmdField& field, uint64_t value) {
    if (field.name == nullptr)
        throw Error("", fmt::format("QMD {} has no such field", qmd_version_name(version())));
    if ((value & ~field_mask(field.width())) != 0)
        throw Error("", fmt::format("QMD {} {}: value {:#x} does not fit in MW({}:{}) ({} bits)",
                                    qmd_version_name(version()), field.name, value, field.hi, field.lo,
                                    field.width()));
    set(field.hi, field.lo, value);
}

uint64_t Qmd::get(const QmdField& field) const {
    if (field.name == nullptr)
        throw Error("", fmt::format("QMD {} has no such field", qmd_version_name(version())));
    return get(field.hi, field.lo);
}

void Qmd::set_grid(uint32_t x, uint32_t y, uint32_t z) {
    set(layout_->grid_width, x);
    set(layout_->grid_height, y);
    set(layout_->grid_depth, z);
}

void Qmd::set_block(uint32_t x, uint32_t y, uint32_t z) {
    set(layout_->block_dim0, x);
    set(layout_->block_dim1, y);
    set(layout_->block_dim2, z);
}

void Qmd::set_shared_memory_size(uint32_t bytes) {
    const unsigned shift = layout_->shared_memory_shift;
    if (bytes & ((1u << shift) - 1))
        throw Error("", fmt::format("QMD {} {}: {} bytes is not a multiple of {}", qmd_version_name(version()),
                                    layout_->shared_memory_size.name, bytes, 1u << shift));
    set(layout_->shared_memory_size, bytes >> shift);
}

void Qmd::set_sm_config_shared_mem(uint32_t min, uint32_t max, uint32_t target) {
    set(layout_->min_sm_config_shared_mem_size, min);
    set(layout_->max_sm_config_shared_mem_size, max);
    set(layout_->target_sm_config_shared_mem_size, target);
}

void Qmd::set_register_count(uint32_t registers) { set(layout_->register_count, registers); }
void Qmd::set_barrier_count(uint32_t barriers) { set(layout_->barrier_count, barriers); }
void Qmd::set_sass_version(uint32_t v) { set(layout_->sass_version, v); }
void Qmd::set_cwd_membar(CwdMembar type) { set(layout_->cwd_membar_type, static_cast<uint32_t>(type)); }

// An address split over *_LOWER (32 bits) and *_UPPER, both holding va >> shift. Checks the
// alignment the shift implies and that the upper part fits (8..25 bits depending on field).
void Qmd::set_shifted_address(const QmdField& lower, const QmdField& upper, unsigned shift, uint64_t va,
                              const char* what) {
    if (va & ((1ull << shift) - 1))
        throw Error("", fmt::format("QMD {} {}: address {:#x} is not {}-byte aligned ({})", qmd_version_name(version()),
                                    what, va, 1u << shift, lower.name));
    const uint64_t v = va >> shift;
    if ((v >> 32) & ~field_mask(upper.width()))
        throw Error("", fmt::format("QMD {} {}: address {:#x} is beyond {} bits ({} has {} bits)",
                                    qmd_version_name(version()), what, va, 32 + upper.width() + shift, upper.name,
                                    upper.width()));
    set(lower, v & 0xFFFFFFFFu);
    set(upper, v >> 32);
}

void Qmd::set_program_address(uint64_t va) {
    set_shifted_address(layout_->program_address_lower, layout_->program_address_upper,
                        layout_->program_address_shift, va, "program address");
}

void Qmd::set_constant_buffer(unsigned index, uint64_t va, uint32_t size_bytes) {
    const QmdLayout& l = *layout_;
    if (index >= kQmdConstantBuffers)
        throw Error("", fmt::format("QMD {}: constant buffer {} (0..{})", qmd_version_name(version()), index,
                                    kQmdConstantBuffers - 1));
    if (size_bytes % 16 != 0)
        throw Error("", fmt::format("QMD {}: constant buffer {} size {} is not a multiple of 16 (SIZE_SHIFTED4)",
                                    qmd_version_name(version()), index, size_bytes));
    set_shifted_address(l.cb_addr_lower.at(index, l.cb_addr_stride), l.cb_addr_upper.at(index, l.cb_addr_stride),
                        l.cb_addr_shift, va, "constant buffer");
    set(l.cb_size_shifted4.at(index, l.cb_addr_stride), size_bytes >> 4);
    set(l.cb_valid.at(index, l.cb_valid_stride), 1);
}

void Qmd::set_release_semaphore(unsigned index, uint64_t va, uint64_t payload, bool payload64, SemaphoreSize size) {
    if (index >= layout_->release.size())
        throw Error("", fmt::format("QMD {}: release semaphore {} (0..2)", qmd_version_name(version()), index));
    const QmdReleaseFields& r = layout_->release[index];
    if (!payload64 && (payload >> 32) != 0)
        throw Error("", fmt::format("QMD {}: 32-bit release payload {:#x} is over 32 bits", qmd_version_name(version()),
                                    payload));
    set_shifted_address(r.addr_lower, r.addr_upper, 0, va, "release semaphore");
    set(r.payload_lower, payload & 0xFFFFFFFFu);
    set(r.payload_upper, payload >> 32);
    set(r.payload64b, payload64 ? 1 : 0);
    set(r.structure_size, static_cast<uint32_t>(size));
    set(r.enable, 1);
}

void Qmd::invalidate_caches() {
    for (const QmdField* f : {&layout_->invalidate_texture_header_cache, &layout_->invalidate_texture_sampler_cache,
                              &layout_->invalidate_texture_data_cache, &layout_->invalidate_shader_data_cache,
                              &layout_->invalidate_instruction_cache, &layout_->invalidate_shader_constant_cache})
        set(*f, 1);
}

void Qmd::set_dependent_qmd0(uint64_t qmd_va, DependentAction action, bool prefetch) {
    // The pointer field holds qmd_va >> 8 in 32 bits: a QMD is 256-byte aligned below 2^40.
    if (qmd_va & 0xFF)
        throw Error("", fmt::format("QMD {}: dependent QMD {:#x} is not 256-byte aligned", qmd_version_name(version()),
                                    qmd_va));
    if ((qmd_va >> 8) >> 32)
        throw Error("", fmt::format("QMD {}: dependent QMD {:#x} is at or above 2^40", qmd_version_name(version()),
                                    qmd_va));
    set(layout_->dependent_qmd0_pointer, qmd_va >> 8);
    set(layout_->dependent_qmd0_action, static_cast<uint32_t>(action));
    set(layout_->dependent_qmd0_prefetch, prefetch ? 1 : 0);
    set(layout_->dependent_qmd0_enable, 1);
}

}  // namespace baregpu::nv
