// PM4 encoders: see pm4.hpp for the headers every field comes from.
#include "drivers/am/pm4.hpp"

#include "base/error.hpp"
#include "drivers/am/dwords.hpp"

#include <fmt/format.h>

namespace baregpu::am::pm4 {

namespace {
void check_aligned(uint64_t address, uint64_t alignment, const char* what) {
    if (address % alignment != 0)
        throw Error("", fmt::format("PM4 {}: address {:#x} is not {}-byte aligned", what, address, alignment));
}
}  // namespace

uint32_t* Pm4Writer::grab(std::size_t n) {
    if (n > out_.size() - pos_)
        throw Error("", fmt::format("PM4 buffer full: {} dwords needed, {} of {} left", n, out_.size() - pos_,
                                    out_.size()));
    uint32_t* p = out_.data() + pos_;
    pos_ += n;
    return p;
}

Pm4Writer& Pm4Writer::nop(std::size_t dwords) {
    if (dwords == 0) return *this;
    if (dwords - 1 > 0x3FFF) throw Error("", fmt::format("PM4 NOP of {} dwords is over the 14-bit count", dwords));
    uint32_t* p = grab(dwords);
    p[0] = dwords == 1 ? packet3(kNop, 0x3FFF) : packet3(kNop, static_cast<uint32_t>(dwords - 2));
    for (std::size_t i = 1; i < dwords; ++i) p[i] = 0;
    return *this;
}

Pm4Writer& Pm4Writer::set_sh_reg(uint32_t gc_register, std::span<const uint32_t> values) {
    uint32_t address = kGcBaseSeg0 + gc_register;
    if (values.empty() || address < kShRegStart || address + values.size() > kShRegEnd)
        throw Error("", fmt::format("SET_SH_REG: GC register {:#x} (+{} dwords) is at {:#x}, outside the SH range "
                                    "[{:#x}, {:#x}) (nvd.h SET_SH_REG_START/END); use SET_UCONFIG_REG or a "
                                    "register write for it",
                                    gc_register, values.size(), address, kShRegStart, kShRegEnd));
    uint32_t* p = grab(2 + values.size());
    p[0] = packet3(kSetShReg, static_cast<uint32_t>(values.size()));
    p[1] = address - kShRegStart;
    for (std::size_t i = 0; i < values.size(); ++i) p[2 + i] = values[i];
    return *this;
}

Pm4Writer& Pm4Writer::set_sh_reg(uint32_t gc_register, std::initializer_list<uint32_t> values) {
    return set_sh_reg(gc_register, std::span<const uint32_t>(values.begin(), values.size()));
}

Pm4Writer& Pm4Writer::set_uconfig_reg(uint32_t gc_register, std::initializer_list<uint32_t> values) {
    uint32_t address = kGcBaseSeg1 + gc_register;
    if (values.size() == 0 || address < kUconfigRegStart || address + values.size() > kUconfigRegEnd)
        throw Error("", fmt::format("SET_UCONFIG_REG: GC register {:#x} (BASE_IDX 1, +{} dwords) is at {:#x}, outside "
                                    "[{:#x}, {:#x}) (nvd.h SET_UCONFIG_REG_START/END)",
                                    gc_register, values.size(), address, kUconfigRegStart, kUconfigRegEnd));
    uint32_t* p = grab(2 + values.size());
    p[0] = packet3(kSetUconfigReg, static_cast<uint32_t>(values.size()));
    p[1] = address - kUconfigRegStart;
    std::size_t i = 2;
    for (uint32_t v : values) p[i++] = v;
    return *this;
}

Pm4Writer& Pm4Writer::dispatch_direct(std::array<uint32_t, 3> grid, uint32_t initiator) {
    uint32_t* p = grab(5);
    p[0] = packet3(kDispatchDirect, 3);
    p[1] = grid[0];
    p[2] = grid[1];
    p[3] = grid[2];
    p[4] = initiator;
    return *this;
}

Pm4Writer& Pm4Writer::release_mem(const ReleaseMem& r) {
    check_aligned(r.address, r.data_sel == DataSel::low32 || r.data_sel == DataSel::none ? 4 : 8, "RELEASE_MEM");
    uint32_t* p = grab(8);
    p[0] = packet3(kReleaseMem, 6);
    p[1] = r.gcr | kCacheFlushAndInvTsEvent | kEventIndexEndOfPipe << 8;  // EVENT_TYPE(x) << 0, EVENT_INDEX(x) << 8
    p[2] = static_cast<uint32_t>(r.data_sel) << 29 | static_cast<uint32_t>(r.int_sel) << 24;  // DST_SEL 0 (MC)
    p[3] = lo(r.address);
    p[4] = hi(r.address);
    p[5] = lo(r.data);
    p[6] = hi(r.data);
    p[7] = r.ctxid;
    return *this;
}

// nvd.h WAIT_REG_MEM_FUNCTION(x) << 0 | WAIT_REG_MEM_MEM_SPACE(1 = memory) << 4 | OPERATION(0) << 6 | ENGINE(0 = ME) << 8.
static uint32_t wait_control(Compare f) { return static_cast<uint32_t>(f) | 1u << 4; }

Pm4Writer& Pm4Writer::wait_reg_mem(uint64_t address, Compare f, uint32_t reference, uint32_t mask,
                                   uint32_t poll_interval) {
    check_aligned(address, 4, "WAIT_REG_MEM");
    uint32_t* p = grab(7);
    p[0] = packet3(kWaitRegMem, 5);
    p[1] = wait_control(f);
    p[2] = lo(address);
    p[3] = hi(address);
    p[4] = reference;
    p[5] = mask;
    p[6] = poll_interval;
    return *this;
}

Pm4Writer& Pm4Writer::wait_reg_mem64(uint64_t address, Compare f, uint64_t reference, uint64_t mask,
                                     uint32_t poll_interval) {
    check_aligned(address, 8, "WAIT_REG_MEM64");
    uint32_t* p = grab(9);
    p[0] = packet3(kWaitRegMem64, 7);
    p[1] = wait_control(f);
    p[2] = lo(address);
    p[3] = hi(address);
    p[4] = lo(reference);
    p[5] = hi(reference);
    p[6] = lo(mask);
    p[7] = hi(mask);
    p[8] = poll_interval;
    return *this;
}

// GC >= 10 ACQUIRE_MEM (Linux gfx_v11_0_emit_mem_sync): coher_cntl, size lo/hi, base lo/hi,
// poll interval, GCR_CNTL.
Pm4Writer& Pm4Writer::acquire_mem(uint32_t gcr_cntl) {
    uint32_t* p = grab(8);
    p[0] = packet3(kAcquireMem, 6);
    p[1] = 0;
    p[2] = 0xffffffffu;
    p[3] = 0xffffffffu;
    p[4] = 0;
    p[5] = 0;
    p[6] = 0x0000000Au;
    p[7] = gcr_cntl;
    return *this;
}

Pm4Writer& Pm4Writer::indirect_buffer(uint64_t address, uint32_t dwords, uint32_t vmid) {
    check_aligned(address, 4, "INDIRECT_BUFFER");
    if (dwords == 0 || dwords > 0xFFFFF)
        throw Error("", fmt::format("INDIRECT_BUFFER of {} dwords: the size field holds 1..{:#x}", dwords, 0xFFFFF));
    if (vmid > 0xF) throw Error("", fmt::format("INDIRECT_BUFFER vmid {} is over 15", vmid));
    uint32_t* p = grab(4);
    p[0] = packet3(kIndirectBuffer, 2);
    p[1] = lo(address);
    p[2] = hi(address) & 0xFFFF;
    p[3] = dwords | kIndirectBufferValid | vmid << 24;
    return *this;
}

Pm4Writer& Pm4Writer::event_write(uint32_t event_type, uint32_t event_index) {
    uint32_t* p = grab(2);
    p[0] = packet3(kEventWrite, 0);
    p[1] = event_type | event_index << 8;  // nvd.h EVENT_TYPE(x) << 0 | EVENT_INDEX(x) << 8
    return *this;
}

std::size_t dispatch_dwords(const KernelDispatch& k) {
    std::size_t user = (k.user_sgpr_private_segment_buffer ? 4 : 0) + (k.user_sgpr_dispatch_ptr ? 2 : 0) + 2;
    return 8                      // 1 ACQUIRE_MEM
           + 4                    // 2 PGM_LO/HI
           + 4 + 3 + 3            // 3 RSRC1/2, RSRC3, TMPRING_SIZE
           + 4                    // 4 DISPATCH_SCRATCH_BASE_LO/HI
           + 5                    // 5 RESTART_X/Y/Z
           + 2 + user             // 6 USER_DATA
           + 3                    // 7 RESOURCE_LIMITS
           + 2 + 8                // 8 START, NUM_THREAD, PIPELINESTAT, PERFCOUNT
           + 5                    // 9 DISPATCH_DIRECT
           + 2;                   // 10 EVENT_WRITE
}

Pm4Writer& Pm4Writer::dispatch(const KernelDispatch& k) {
    check_aligned(k.code_address, 256, "dispatch: kernel code");
    check_aligned(k.scratch_address, 256, "dispatch: scratch");
    if (k.lds_bytes > 64 * 1024) throw Error("", fmt::format("dispatch: {} bytes of LDS is over 64 KiB", k.lds_bytes));
    for (int i = 0; i < 3; ++i)
        if (k.grid[i] == 0 || k.block[i] == 0)
            throw Error("", fmt::format("dispatch: grid {}x{}x{} block {}x{}x{} has a zero dimension", k.grid[0],
                                        k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2]));
    if (dispatch_dwords(k) > out_.size() - pos_) grab(dispatch_dwords(k));  // throws before any packet is written

    acquire_mem(kGcrNearCaches);                                                             // 1
    set_sh_reg(reg::COMPUTE_PGM_LO, {lo(k.code_address >> 8), hi(k.code_address >> 8)});    // 2
    uint32_t rsrc1 = k.rsrc1 | (k.gen == GcGen::gc11 ? 1u << 20 : 0);  // PRIV on GC 11 (tinygrad ops_amd.py AMDComputeQueue.exec)
    uint32_t lds_blocks = (k.lds_bytes + 511) / 512;
    set_sh_reg(reg::COMPUTE_PGM_RSRC1, {rsrc1, k.rsrc2 | lds_blocks << 15});                // 3
    set_sh_reg(reg::COMPUTE_PGM_RSRC3, {k.rsrc3});
    set_sh_reg(reg::COMPUTE_TMPRING_SIZE, {k.tmpring_size});
    set_sh_reg(reg::COMPUTE_DISPATCH_SCRATCH_BASE_LO, {lo(k.scratch_address >> 8), hi(k.scratch_address >> 8)});  // 4
    set_sh_reg(reg::COMPUTE_RESTART_X, {0, 0, 0});                                           // 5
    std::array<uint32_t, 8> user{};                                                          // 6
    std::size_t n = 0;
    if (k.user_sgpr_private_segment_buffer) {
        user[n++] = lo(k.scratch_address);
        user[n++] = hi(k.scratch_address) | 1u << 31;
        user[n++] = 0xffffffffu;
        user[n++] = 0x20c14000u;
    }
    if (k.user_sgpr_dispatch_ptr) {
        user[n++] = lo(k.dispatch_packet_address);
        user[n++] = hi(k.dispatch_packet_address);
    }
    user[n++] = lo(k.kernarg_address);
    user[n++] = hi(k.kernarg_address);
    set_sh_reg(reg::COMPUTE_USER_DATA_0, std::span<const uint32_t>(user.data(), n));
    set_sh_reg(reg::COMPUTE_RESOURCE_LIMITS, {0});                                           // 7
    set_sh_reg(reg::COMPUTE_START_X, {0, 0, 0, k.block[0], k.block[1], k.block[2], 0, 0});  // 8
    dispatch_direct(k.grid, kInitiatorComputeShaderEn | kInitiatorForceStartAt000 |
                                (k.wave32 ? kInitiatorCsW32En : 0));                         // 9
    return cs_partial_flush();                                                               // 10
}

}  // namespace baregpu::am::pm4
