// PM4 type-3 packets for the MEC compute queue (GC 11 / GC 12), as tinygrad ops_amd.py AMDComputeQueue. Every opcode and
// field is named after its public definition and cites it: Linux drivers/gpu/drm/amd/amdgpu/nvd.h
// (PACKET3, opcodes, WAIT_REG_MEM / RELEASE_MEM / INDIRECT_BUFFER / EVENT_WRITE fields),
// soc15d.h (ACQUIRE_MEM GCR_CNTL), include/asic_reg/gc/gc_11_0_0_offset.h (COMPUTE_* registers),
// include/sienna_cichlid_ip_offset.h (the static GC bases PM4 register addresses use).
// Pm4Writer appends into a caller's buffer and never allocates; it throws when the buffer is full.
// Used by compute_queue.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

namespace baregpu::am::pm4 {

// nvd.h: PACKET3(op, n) = 3 << 30 | (op & 0xFF) << 8 | (n & 0x3FFF) << 16, n = payload dwords - 1.
constexpr uint32_t packet3(uint32_t op, uint32_t n) { return (3u << 30) | ((op & 0xFFu) << 8) | ((n & 0x3FFFu) << 16); }

// nvd.h opcodes.
inline constexpr uint32_t kNop = 0x10;             // PACKET3_NOP
inline constexpr uint32_t kDispatchDirect = 0x15;  // PACKET3_DISPATCH_DIRECT
inline constexpr uint32_t kWaitRegMem = 0x3C;      // PACKET3_WAIT_REG_MEM
inline constexpr uint32_t kIndirectBuffer = 0x3F;  // PACKET3_INDIRECT_BUFFER
inline constexpr uint32_t kEventWrite = 0x46;      // PACKET3_EVENT_WRITE
inline constexpr uint32_t kReleaseMem = 0x49;      // PACKET3_RELEASE_MEM
inline constexpr uint32_t kAcquireMem = 0x58;      // PACKET3_ACQUIRE_MEM
inline constexpr uint32_t kSetShReg = 0x76;        // PACKET3_SET_SH_REG
inline constexpr uint32_t kSetUconfigReg = 0x79;   // PACKET3_SET_UCONFIG_REG
inline constexpr uint32_t kWaitRegMem64 = 0x93;    // PACKET3_WAIT_REG_MEM64

// nvd.h PACKET3_SET_SH_REG_START/END, PACKET3_SET_UCONFIG_REG_START/END (absolute dword addresses).
inline constexpr uint32_t kShRegStart = 0x2c00, kShRegEnd = 0x3000;
inline constexpr uint32_t kUconfigRegStart = 0xc000, kUconfigRegEnd = 0xc400;
// sienna_cichlid_ip_offset.h GC_BASE__INST0_SEG0 / SEG1: PM4 register addresses are these static bases
// plus the asic_reg offset (BASE_IDX 0 / 1), never the discovery bases (Linux nvd.h
// PACKET3_SET_SH_REG_START / PACKET3_SET_UCONFIG_REG_START).
inline constexpr uint32_t kGcBaseSeg0 = 0x1260, kGcBaseSeg1 = 0xA000;

// gc_11_0_0_offset.h (BASE_IDX 0 for all of them; gc_12_0_0_offset.h has the same values).
namespace reg {
inline constexpr uint32_t COMPUTE_DISPATCH_INITIATOR = 0x1ba0;
inline constexpr uint32_t COMPUTE_START_X = 0x1ba4;
inline constexpr uint32_t COMPUTE_NUM_THREAD_X = 0x1ba7;
inline constexpr uint32_t COMPUTE_PGM_LO = 0x1bac;
inline constexpr uint32_t COMPUTE_DISPATCH_SCRATCH_BASE_LO = 0x1bb0;
inline constexpr uint32_t COMPUTE_PGM_RSRC1 = 0x1bb2;
inline constexpr uint32_t COMPUTE_RESOURCE_LIMITS = 0x1bb5;
inline constexpr uint32_t COMPUTE_TMPRING_SIZE = 0x1bb8;
inline constexpr uint32_t COMPUTE_RESTART_X = 0x1bbb;
inline constexpr uint32_t COMPUTE_PGM_RSRC3 = 0x1bc8;
inline constexpr uint32_t COMPUTE_USER_DATA_0 = 0x1be0;
}  // namespace reg

// nvd.h WAIT_REG_MEM_FUNCTION values.
enum class Compare : uint32_t { always = 0, lt = 1, le = 2, eq = 3, ne = 4, ge = 5, gt = 6 };

// nvd.h PACKET3_RELEASE_MEM_DATA_SEL / _INT_SEL.
enum class DataSel : uint32_t { none = 0, low32 = 1, data64 = 2, gpu_clock = 3 };
enum class IntSel : uint32_t { none = 0, interrupt = 1, interrupt_after_write = 2 };

// nvd.h RELEASE_MEM dword 1 GCR bits.
inline constexpr uint32_t kRelGlmWb = 1u << 12, kRelGlmInv = 1u << 13, kRelGlvInv = 1u << 14, kRelGl1Inv = 1u << 15,
                          kRelGl2Inv = 1u << 20, kRelGl2Wb = 1u << 21, kRelGcrSeq = 1u << 22;
// nvd.h PACKET3_RELEASE_MEM_CACHE_POLICY(x) << 25: 3 = bypass.
inline constexpr uint32_t kRelCachePolicyBypass = 3u << 25;
// VGT event types (soc21_enum.h / soc24_enum.h): CACHE_FLUSH_AND_INV_TS_EVENT, CS_PARTIAL_FLUSH.
inline constexpr uint32_t kCacheFlushAndInvTsEvent = 0x14, kCsPartialFlush = 7;
// kfd_pm4_headers_ai.h event_index_end_of_pipe = 5; nvd.h EVENT_INDEX comment: 4 = *S_PARTIAL_FLUSH.
inline constexpr uint32_t kEventIndexEndOfPipe = 5, kEventIndexPartialFlush = 4;

// soc15d.h PACKET3_ACQUIRE_MEM_GCR_CNTL_* bit positions.
inline constexpr uint32_t kGcrGliInv = 1u << 0, kGcrGlmWb = 1u << 4, kGcrGlmInv = 1u << 5, kGcrGlkWb = 1u << 6,
                          kGcrGlkInv = 1u << 7, kGcrGlvInv = 1u << 8, kGcrGl1Inv = 1u << 9, kGcrGl2Inv = 1u << 14,
                          kGcrGl2Wb = 1u << 15;
// Everything (tinygrad ops_amd.py AMDComputeQueue.acquire_mem defaults) and the L0/L1-only invalidate used before a dispatch (step 1).
inline constexpr uint32_t kGcrAll = kGcrGliInv | kGcrGlmWb | kGcrGlmInv | kGcrGlkWb | kGcrGlkInv | kGcrGlvInv |
                                    kGcrGl1Inv | kGcrGl2Inv | kGcrGl2Wb;
inline constexpr uint32_t kGcrNearCaches = kGcrGlmWb | kGcrGlmInv | kGcrGlkWb | kGcrGlkInv | kGcrGlvInv | kGcrGl1Inv;

// nvd.h INDIRECT_BUFFER_VALID; the control dword is `length_dw | vmid << 24` (Linux gfx_v11_0_ring_emit_ib).
inline constexpr uint32_t kIndirectBufferValid = 1u << 23;

// COMPUTE_DISPATCH_INITIATOR fields (gc_11_0_0_sh_mask.h): COMPUTE_SHADER_EN bit 0, FORCE_START_AT_000
// bit 2, CS_W32_EN bit 15.
inline constexpr uint32_t kInitiatorComputeShaderEn = 1u << 0, kInitiatorForceStartAt000 = 1u << 2,
                          kInitiatorCsW32En = 1u << 15;

enum class GcGen { gc11, gc12 };

// The RELEASE_MEM cache actions of a fence: Linux gfx_v11_0_ring_emit_fence (GCR_SEQ | GL2_WB | GLM_INV | GLM_WB |
// CACHE_POLICY(3)) and gfx_v12_0_ring_emit_fence (GCR_SEQ | GL2_WB | CACHE_POLICY(3); no GLM on GC 12).
// GC 12.0 (Navi48, gfx_v12_0.c) uses nvd.h's encodings; GC 12.1 (gfx_v12_1_pkt.h) moves the GCR bits and is
// not supported here.
constexpr uint32_t release_mem_flush(GcGen gen) {
    return gen == GcGen::gc11 ? (kRelGcrSeq | kRelGl2Wb | kRelGlmInv | kRelGlmWb | kRelCachePolicyBypass)
                              : (kRelGcrSeq | kRelGl2Wb | kRelCachePolicyBypass);
}

struct ReleaseMem {
    uint32_t gcr = 0;  // kRel* bits, e.g. release_mem_flush(gen)
    DataSel data_sel = DataSel::low32;
    IntSel int_sel = IntSel::none;
    uint64_t address = 0;  // 4-byte aligned for low32, 8-byte for data64 / gpu_clock
    uint64_t data = 0;
    uint32_t ctxid = 0;
};

// A kernel launch, from the kernel descriptor and the launch (tinygrad ops_amd.py AMDComputeQueue.exec, single XCC:
// step 4's PRED_EXEC per XCC is not emitted).
struct KernelDispatch {
    GcGen gen = GcGen::gc11;
    uint64_t code_address = 0;  // descriptor VA + kernel_code_entry_byte_offset; 256-byte aligned
    uint32_t rsrc1 = 0, rsrc2 = 0, rsrc3 = 0;
    uint32_t lds_bytes = 0;         // group segment size, rounded up to 512-byte blocks into RSRC2.LDS_SIZE
    uint64_t scratch_address = 0;   // 256-byte aligned; 0 = no scratch
    uint32_t tmpring_size = 0;      // COMPUTE_TMPRING_SIZE (WAVES, WAVESIZE)
    bool user_sgpr_private_segment_buffer = false;  // 4 SGPRs: the scratch buffer descriptor
    bool user_sgpr_dispatch_ptr = false;            // 2 SGPRs: dispatch_packet_address
    uint64_t dispatch_packet_address = 0;
    uint64_t kernarg_address = 0;                   // 2 SGPRs, always
    std::array<uint32_t, 3> grid{1, 1, 1};          // workgroups
    std::array<uint32_t, 3> block{1, 1, 1};         // threads per workgroup
    bool wave32 = true;
};

class Pm4Writer {
public:
    explicit Pm4Writer(std::span<uint32_t> out) : out_(out) {}

    std::size_t size() const { return pos_; }
    std::span<const uint32_t> words() const { return out_.first(pos_); }

    // `dwords` dwords of NOP: PACKET3(NOP, dwords-2) and dwords-1 zeros; one dword is PACKET3(NOP, 0x3FFF),
    // the header-only NOP Linux's gfx_v11_0 ring uses as its nop.
    Pm4Writer& nop(std::size_t dwords);
    // register = the gc_11_0_0_offset.h offset with BASE_IDX 0; throws unless base + register + count is
    // within [SET_SH_REG_START, SET_SH_REG_END).
    Pm4Writer& set_sh_reg(uint32_t gc_register, std::span<const uint32_t> values);
    Pm4Writer& set_sh_reg(uint32_t gc_register, std::initializer_list<uint32_t> values);
    // register = the offset with BASE_IDX 1 (GC_BASE__INST0_SEG1); range [SET_UCONFIG_REG_START, _END).
    Pm4Writer& set_uconfig_reg(uint32_t gc_register, std::initializer_list<uint32_t> values);
    Pm4Writer& dispatch_direct(std::array<uint32_t, 3> grid, uint32_t initiator);
    Pm4Writer& release_mem(const ReleaseMem& r);
    Pm4Writer& wait_reg_mem(uint64_t address, Compare f, uint32_t reference, uint32_t mask = 0xffffffffu,
                            uint32_t poll_interval = 4);
    // 64-bit compare in one packet: PACKET3_WAIT_REG_MEM64 (nvd.h 0x93), 8 payload dwords (count field 7): control (as
    // WAIT_REG_MEM), address lo/hi (8-byte aligned), reference lo/hi, mask lo/hi, poll interval (Mesa
    // src/amd/common/amd_cp_packets_gfx11.h PKT3_WAIT_REG_MEM64). Linux defines the opcode but never emits it;
    // a pair of 32-bit waits cannot express a 64-bit >= atomically, so this is the 64-bit wait.
    Pm4Writer& wait_reg_mem64(uint64_t address, Compare f, uint64_t reference, uint64_t mask = ~0ull,
                              uint32_t poll_interval = 4);
    Pm4Writer& acquire_mem(uint32_t gcr_cntl = kGcrAll);
    Pm4Writer& indirect_buffer(uint64_t address, uint32_t dwords, uint32_t vmid = 0);
    Pm4Writer& event_write(uint32_t event_type, uint32_t event_index);
    Pm4Writer& cs_partial_flush() { return event_write(kCsPartialFlush, kEventIndexPartialFlush); }

    // tinygrad ops_amd.py AMDComputeQueue.exec.
    Pm4Writer& dispatch(const KernelDispatch& k);

private:
    uint32_t* grab(std::size_t n);
    std::span<uint32_t> out_;
    std::size_t pos_ = 0;
};

// How many dwords dispatch() emits for k (for sizing a ring reservation).
std::size_t dispatch_dwords(const KernelDispatch& k);

}  // namespace baregpu::am::pm4
