// The PBDMA: fetches a channel's GP entries between GPGet and GPPut, fetches each pushbuffer
// segment through the MMU, decodes the method headers and executes host methods itself; class
// methods go to the subchannel's engine. Formats from open-gpu-kernel-modules
// src/common/sdk/nvidia/inc/class/clc56f.h, typed here on the model's own:
//   NVC56F_GP_ENTRY0_GET 31:2 (VA bits 31:2), ENTRY0_FETCH 0:0; ENTRY1_GET_HI 7:0 (VA bits 39:32),
//   ENTRY1_LEVEL 9:9, ENTRY1_LENGTH 30:10 (dwords; 0 = a control entry, ENTRY1_OPCODE 7:0), SYNC 31:31;
//   NVC56F_DMA_SEC_OP 31:29 (1 INC_METHOD, 3 NON_INC_METHOD, 4 IMMD_DATA_METHOD, 5 ONE_INC),
//   METHOD_COUNT / IMMD_DATA 28:16, METHOD_SUBCHANNEL 15:13, METHOD_ADDRESS 11:0 (dwords);
//   host methods below 0x100: SET_OBJECT 0x0 (NVCLASS 15:0), NON_STALL_INTERRUPT 0x20, SEM_ADDR_LO 0x5c
//   (OFFSET 31:2), SEM_ADDR_HI 0x60 (OFFSET 7:0), SEM_PAYLOAD_LO 0x64, SEM_PAYLOAD_HI 0x68,
//   SEM_EXECUTE 0x6c (OPERATION 2:0, RELEASE_WFI 20:20, PAYLOAD_SIZE 24:24, RELEASE_TIMESTAMP 25:25), WFI 0x78.
#include "gpu_engines.hpp"
#include "gpu_engines_internal.hpp"

#include <fmt/format.h>

#include <cstring>

namespace baregpu::sim::nvgpu {

namespace {
constexpr uint32_t SET_OBJECT = 0x0000, NON_STALL_INTERRUPT = 0x0020, SEM_ADDR_LO = 0x005c, SEM_ADDR_HI = 0x0060,
                   SEM_PAYLOAD_LO = 0x0064, SEM_PAYLOAD_HI = 0x0068, SEM_EXECUTE = 0x006c, WFI = 0x0078;
constexpr uint32_t kHostMethodEnd = 0x100;

bool is_hopper(const ChannelState& s) { return s.host_class == kHopperChannelGpfifoA; }
// The engine classes a channel binds: an Ampere/Ada host class the Ampere/Ada ones; HOPPER_CHANNEL_GPFIFO_A the
// Hopper ones (GH100's class list has no Ampere or Ada compute or copy class: RM's g_gpu_class_list.c).
bool class_supported(const ChannelState& s, uint32_t c) {
    if (is_hopper(s)) return c == kHopperDmaCopyA || c == kHopperComputeA;
    return c == kAmpereDmaCopyA || c == kAmpereDmaCopyB || c == kAmpereComputeA || c == kAmpereComputeB || c == kAdaComputeA;
}
bool is_copy_class(uint32_t c) { return c == kAmpereDmaCopyA || c == kAmpereDmaCopyB || c == kHopperDmaCopyA; }
}  // namespace

GpuEngines::Step GpuEngines::stop(Channel& c, EngineFault f) {
    f.token = c.token;
    f.what = fmt::format("{}: {}: {}", device_, c.state.name, f.what);
    c.fault = f;
    c.status = ChannelStatus::faulted;
    faults_pending_.push_back(f);
    return Step::fault;
}

GpuEngines::Step GpuEngines::mmu_fault(Channel& c, const MmuFault& f, const char* during) {
    EngineFault e;
    e.kind = EngineFault::Kind::mmu;
    e.address = f.va;
    e.subchannel = c.header_subchannel;
    e.method = c.header_method;
    e.what = fmt::format("{} during {}", f.describe(), during);
    return stop(c, e);
}

bool GpuEngines::read64(Channel& c, uint64_t va, uint64_t& out, const char* during) {
    std::byte b[8];
    if (auto f = mmu_.read(c.state.page_directory_base, c.state.mmu_format, va, b)) {
        mmu_fault(c, *f, during);
        return false;
    }
    std::memcpy(&out, b, 8);
    return true;
}

bool GpuEngines::write_bytes(Channel& c, uint64_t va, std::span<const std::byte> data, const char* during) {
    if (auto f = mmu_.write(c.state.page_directory_base, c.state.mmu_format, va, data)) {
        mmu_fault(c, *f, during);
        return false;
    }
    return true;
}

bool GpuEngines::read_userd(Channel& c, uint64_t offset, uint32_t& out, const char* during) {
    if (c.state.userd_vram) {
        const uint64_t at = *c.state.userd_vram + offset;
        if (at + 4 > vram_.size()) return false;
        std::memcpy(&out, vram_.data() + at, 4);
        return true;
    }
    if (auto f = mmu_.read(c.state.page_directory_base, c.state.mmu_format, c.state.userd_va + offset,
                           std::as_writable_bytes(std::span(&out, 1)))) {
        mmu_fault(c, *f, during);
        return false;
    }
    return true;
}

bool GpuEngines::write_userd(Channel& c, uint64_t offset, uint32_t value, const char* during) {
    if (c.state.userd_vram) {
        const uint64_t at = *c.state.userd_vram + offset;
        if (at + 4 > vram_.size()) return false;
        std::memcpy(vram_.data() + at, &value, 4);
        return true;
    }
    return write_bytes(c, c.state.userd_va + offset, std::as_bytes(std::span(&value, 1)), during);
}

void GpuEngines::run_channel(Channel& c) {
    const uint64_t pdb = c.state.page_directory_base;
    const MmuFormat fmt_ = c.state.mmu_format;
    for (;;) {
        if (c.fault) return;
        if (!c.in_segment) {
            uint32_t put = 0;
            if (!read_userd(c, kUserdGpPut, put, "the USERD GPPut read")) return;
            if (put == c.gp_get) {
                c.status = ChannelStatus::idle;
                return;
            }
            if (put >= c.state.gpfifo_entries) {
                EngineFault e;
                e.kind = EngineFault::Kind::bad_gp_entry;
                e.address = c.state.userd_vram ? *c.state.userd_vram + kUserdGpPut : c.state.userd_va + kUserdGpPut;
                e.what = fmt::format("USERD GPPut {} is outside the {}-entry GPFIFO (clc56f.h AmpereAControlGPFifo)",
                                     put, c.state.gpfifo_entries);
                stop(c, e);
                return;
            }
            uint64_t entry_va = c.state.gpfifo_va + uint64_t{c.gp_get} * 8, entry = 0;
            if (!read64(c, entry_va, entry, "a GP entry fetch")) return;
            uint32_t e0 = static_cast<uint32_t>(entry), e1 = static_cast<uint32_t>(entry >> 32);
            uint32_t length = (e1 >> 10) & 0x1fffff;
            if (length == 0) {
                // A control entry: ENTRY1_OPCODE 7:0; NOP (0) is the only one modelled.
                if ((e1 & 0xff) != 0) {
                    EngineFault e;
                    e.kind = EngineFault::Kind::bad_gp_entry;
                    e.address = entry_va;
                    e.what = fmt::format("GP entry {} at {:#x} is a control entry with opcode {:#x}; only NOP is "
                                         "modelled (clc56f.h NVC56F_GP_ENTRY1_OPCODE)", c.gp_get, entry_va, e1 & 0xff);
                    stop(c, e);
                    return;
                }
            } else {
                if ((e1 >> 9) & 1) {
                    EngineFault e;
                    e.kind = EngineFault::Kind::bad_gp_entry;
                    e.address = entry_va;
                    e.what = fmt::format("GP entry {} at {:#x} is LEVEL_SUBROUTINE, which is not modelled", c.gp_get, entry_va);
                    stop(c, e);
                    return;
                }
                c.segment_va = (e0 & ~uint64_t{3}) | (uint64_t{e1 & 0xff} << 32);
                c.segment.assign(length, 0);
                if (auto f = mmu_.read(pdb, fmt_, c.segment_va, std::as_writable_bytes(std::span(c.segment)))) {
                    mmu_fault(c, *f, "a pushbuffer segment fetch");
                    return;
                }
                c.segment_pos = 0;
                c.in_segment = true;
            }
            if (!c.in_segment) {  // NOP entry done
                c.gp_get = (c.gp_get + 1) % c.state.gpfifo_entries;
                if (!write_userd(c, kUserdGpGet, c.gp_get, "the USERD GPGet write")) return;
                continue;
            }
        }
        while (c.segment_pos < c.segment.size()) {
            uint32_t d = c.segment[c.segment_pos];
            if (c.remaining == 0) {
                uint32_t sec_op = d >> 29, count = (d >> 16) & 0x1fff, subch = (d >> 13) & 7, method = (d & 0xfff) * 4;
                c.header_subchannel = subch;
                c.header_method = method;
                if (sec_op == 4) {  // IMMD_DATA_METHOD: the data is the count field
                    Step s = this->method(c, subch, method, count);
                    if (s != Step::ok) {
                        if (s == Step::blocked) c.status = ChannelStatus::acquire_pending;
                        return;
                    }
                    ++c.segment_pos;
                    continue;
                }
                if (sec_op != 1 && sec_op != 3 && sec_op != 5) {
                    EngineFault e;
                    e.kind = EngineFault::Kind::bad_method;
                    e.address = c.segment_va + c.segment_pos * 4;
                    e.subchannel = subch;
                    e.method = method;
                    e.data = d;
                    e.what = fmt::format("method header {:#010x} at {:#x} has SEC_OP {}, which is not INC (1), "
                                         "NON_INC (3), IMMD (4) or ONE_INC (5) (clc56f.h NVC56F_DMA_SEC_OP)", d,
                                         e.address, sec_op);
                    stop(c, e);
                    return;
                }
                c.sec_op = sec_op;
                c.remaining = count;
                c.first_done = false;
                ++c.segment_pos;
                continue;
            }
            Step s = this->method(c, c.header_subchannel, c.header_method, d);
            if (s == Step::blocked) {
                c.status = ChannelStatus::acquire_pending;
                return;
            }
            if (s == Step::fault) return;
            ++c.segment_pos;
            --c.remaining;
            if (c.sec_op == 1 || (c.sec_op == 5 && !c.first_done)) c.header_method += 4;
            c.first_done = true;
        }
        // The whole segment ran: only now does GPGet move past its entry.
        c.in_segment = false;
        c.gp_get = (c.gp_get + 1) % c.state.gpfifo_entries;
        if (!write_userd(c, kUserdGpGet, c.gp_get, "the USERD GPGet write")) return;
    }
}

GpuEngines::Step GpuEngines::method(Channel& c, unsigned subchannel, uint32_t method, uint32_t data) {
    if (method < kHostMethodEnd) return host_method(c, subchannel, method, data);
    uint32_t cls = c.classes[subchannel];
    if (cls == 0) {
        EngineFault e;
        e.kind = EngineFault::Kind::bad_method;
        e.subchannel = subchannel;
        e.method = method;
        e.data = data;
        e.what = fmt::format("method {:#06x} (data {:#x}) on subchannel {}, which has no object (SET_OBJECT first)",
                             method, data, subchannel);
        return stop(c, e);
    }
    if (method >= kMethodSpace) {
        EngineFault e;
        e.kind = EngineFault::Kind::bad_method;
        e.subchannel = subchannel;
        e.method = method;
        e.data = data;
        e.what = fmt::format("method {:#06x} on subchannel {} (class {:#x}) is outside the modelled methods", method,
                             subchannel, cls);
        return stop(c, e);
    }
    if (is_copy_class(cls)) return copy_method(c, subchannel, method, data);
    return compute_method(c, subchannel, method, data);
}

GpuEngines::Step GpuEngines::host_method(Channel& c, unsigned subchannel, uint32_t method, uint32_t data) {
    switch (method) {
    case SET_OBJECT: {
        uint32_t cls = data & 0xffff;
        if (!class_supported(c.state, cls)) {
            EngineFault e;
            e.kind = EngineFault::Kind::bad_class;
            e.subchannel = subchannel;
            e.method = method;
            e.data = data;
            e.what = is_hopper(c.state)
                         ? fmt::format("SET_OBJECT on subchannel {} names class {:#x}; a Hopper channel binds copy class "
                                       "0xc8b5 and compute class 0xcbc0", subchannel, cls)
                         : fmt::format("SET_OBJECT on subchannel {} names class {:#x}; this AD102 model has copy classes "
                                       "0xc6b5/0xc7b5 and compute classes 0xc6c0/0xc7c0/0xc9c0", subchannel, cls);
            return stop(c, e);
        }
        c.classes[subchannel] = cls;
        std::fill(c.methods[subchannel].begin(), c.methods[subchannel].end(), 0u);
        return Step::ok;
    }
    case NON_STALL_INTERRUPT:
        ++c.nonstall;
        nonstall_pending_.push_back(c.token);
        return Step::ok;
    case SEM_ADDR_LO: c.sem_va = (c.sem_va & ~uint64_t{0xffffffff}) | (data & ~uint32_t{3}); return Step::ok;
    case SEM_ADDR_HI: c.sem_va = (c.sem_va & 0xffffffffull) | (uint64_t{data & 0xff} << 32); return Step::ok;
    case SEM_PAYLOAD_LO: c.sem_payload = (c.sem_payload & ~uint64_t{0xffffffff}) | data; return Step::ok;
    case SEM_PAYLOAD_HI: c.sem_payload = (c.sem_payload & 0xffffffffull) | (uint64_t{data} << 32); return Step::ok;
    case SEM_EXECUTE: return sem_execute(c, data);
    case WFI: return Step::ok;  // every engine here finishes its work inside the method
    default: {
        EngineFault e;
        e.kind = EngineFault::Kind::bad_method;
        e.subchannel = subchannel;
        e.method = method;
        e.data = data;
        e.what = fmt::format("host method {:#06x} (data {:#x}) on subchannel {} is not one this model executes "
                             "(clc56f.h)", method, data, subchannel);
        return stop(c, e);
    }
    }
}

GpuEngines::Step GpuEngines::sem_execute(Channel& c, uint32_t data) {
    const uint32_t op = data & 7;
    const bool payload64 = (data >> 24) & 1, timestamp = (data >> 25) & 1;
    const uint64_t mask = payload64 ? ~uint64_t{0} : 0xffffffffull;
    const uint64_t payload = c.sem_payload & mask;
    // HOPPER_CHANNEL_GPFIFO_A's SEM_EXECUTE_OPERATION has ACQUIRE 0, RELEASE 1 and ACQ_CIRC_GEQ 3 only (clc86f.h;
    // UVM's Hopper HAL waits with ACQ_CIRC_GEQ, uvm_hopper_host.c): the others are refused as the method they are not.
    if (is_hopper(c.state) && op != 0 && op != 1 && op != 3) {
        EngineFault e;
        e.kind = EngineFault::Kind::bad_method;
        e.method = SEM_EXECUTE;
        e.data = data;
        e.address = c.sem_va;
        e.what = fmt::format("SEM_EXECUTE OPERATION {} on HOPPER_CHANNEL_GPFIFO_A, which has ACQUIRE, RELEASE and "
                             "ACQ_CIRC_GEQ only (clc86f.h)", op);
        return stop(c, e);
    }
    if (op == 1) {  // RELEASE (after WFI: all prior work is done here already)
        if (c.sem_va % (payload64 ? 8 : 4) != 0) {
            EngineFault e;
            e.kind = EngineFault::Kind::bad_method;
            e.method = SEM_EXECUTE;
            e.data = data;
            e.address = c.sem_va;
            e.what = fmt::format("SEM_EXECUTE RELEASE to {:#x}, not aligned to the {}-bit payload", c.sem_va,
                                 payload64 ? 64 : 32);
            return stop(c, e);
        }
        std::byte b[16];
        std::memcpy(b, &payload, 8);
        uint64_t ts = now_ns();
        std::memcpy(b + 8, &ts, 8);
        if (!write_bytes(c, c.sem_va, std::span<const std::byte>(b, payload64 ? 8 : 4), "a semaphore release"))
            return Step::fault;
        if (timestamp && !write_bytes(c, c.sem_va + 8, std::span<const std::byte>(b + 8, 8), "a semaphore timestamp"))
            return Step::fault;
        return Step::ok;
    }
    if (op == 0 || op == 2 || op == 3 || op == 4 || op == 5) {
        uint64_t value = 0;
        std::byte b[8]{};
        if (auto f = mmu_.read(c.state.page_directory_base, c.state.mmu_format, c.sem_va,
                               std::span<std::byte>(b, payload64 ? 8 : 4))) {
            mmu_fault(c, *f, "a semaphore acquire");
            return Step::fault;
        }
        std::memcpy(&value, b, 8);
        value &= mask;
        bool done = false;
        switch (op) {
        case 0: done = value == payload; break;                                      // ACQUIRE (equal)
        case 2: done = value >= payload; break;                                      // ACQ_STRICT_GEQ
        case 3:                                                                      // ACQ_CIRC_GEQ: wrap-aware
            done = payload64 ? static_cast<int64_t>(value - payload) >= 0
                             : static_cast<int32_t>(static_cast<uint32_t>(value - payload)) >= 0;
            break;
        case 4: done = (value & payload) != 0; break;                                // ACQ_AND
        case 5: done = (~(value | payload) & mask) != 0; break;                      // ACQ_NOR
        }
        return done ? Step::ok : Step::blocked;
    }
    EngineFault e;
    e.kind = EngineFault::Kind::bad_method;
    e.method = SEM_EXECUTE;
    e.data = data;
    e.what = fmt::format("SEM_EXECUTE operation {} (data {:#x}) is not modelled (REDUCTION)", op, data);
    return stop(c, e);
}

}  // namespace baregpu::sim::nvgpu
