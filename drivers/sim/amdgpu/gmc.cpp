#include "drivers/sim/amdgpu/gmc.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace baregpu::sim::amdgpu {

namespace {
constexpr const char* kGmcSource = "Linux amdgpu/gmc_v11_0.c, gmc_v12_0.c, mmhub_v3_0.c, gfxhub_v3_0.c";
constexpr uint32_t kFbBaseField = static_cast<uint32_t>(kFbBase >> 24);
constexpr uint32_t kFbTopField = static_cast<uint32_t>((kFbBase + kVramBytes - 1) >> 24);
}  // namespace

void Gmc::power_on() { chip_.store(chip_.reg.remap_hdp_mem_flush_cntl, gmc::kHdpFlushRemap); }

bool Gmc::read(uint32_t address, uint32_t& value) {
    for (const RegisterMap::Hub* h : {&chip_.reg.gc, &chip_.reg.mm}) {
        if (address == h->fb_location_base) {
            value = kFbBaseField;
            return true;
        }
        if (address == h->fb_location_top) {
            value = kFbTopField;
            return true;
        }
        if (address == h->inv_eng17_sem) {
            // Reading the semaphore acquires it: 1 = acquired, 0 = another agent holds it. Only the MM
            // hub's is modelled (Linux uses it only there); the GC hub's always grants.
            GmcState& g = chip_.state().gmc;
            if (h == &chip_.reg.mm) {
                value = g.mm_sem_held ? 0 : 1;
                g.mm_sem_held = 1;
            } else {
                value = 1;
            }
            return true;
        }
    }
    return false;
}

bool Gmc::write(uint32_t address, uint32_t value) {
    GmcState& g = chip_.state().gmc;
    for (const RegisterMap::Hub* h : {&chip_.reg.gc, &chip_.reg.mm}) {
        const bool mm = h == &chip_.reg.mm;
        if (address == h->fb_location_base || address == h->fb_location_top) {
            chip_.violation("MC_VM_FB_LOCATION_BASE/TOP are set by the firmware; the driver only reads them",
                            reg_name(address), "Linux mmhub_v3_0.c get_fb_location (read only)");
            return true;
        }
        if (address == h->inv_eng17_sem) {
            if (mm) {
                if (value == 0 && !g.mm_sem_held) {
                    chip_.violation("VM_INVALIDATE_ENG17_SEM released without being acquired", reg_name(address),
                                    kGmcSource);
                }
                g.mm_sem_held = value & 1;
            }
            chip_.store(address, value);
            return true;
        }
        if (address == h->inv_eng17_req) {
            if (mm && !g.mm_sem_held) {
                chip_.violation("MM hub TLB invalidation without holding VM_INVALIDATE_ENG17_SEM", reg_name(address),
                                "Linux gmc_v11_0.c flush_gpu_tlb: acquire the semaphore on the MMHUB first");
            }
            if (mm && g.mm_private_pending) {
                chip_.violation("MM hub TLB invalidation while the previous one was not followed by the MMHUB private "
                                "invalidation (MMVM_L2_BANK_SELECT_RESERVED_CID2.RESERVED_CACHE_PRIVATE_INVALIDATION, bit "
                                "25, then a read back)",
                                reg_name(chip_.reg.mm.bank_select_reserved_cid2),
                                "Linux gmc_v11_0.c gmc_v11_0_flush_vm_hub (\"Issue additional private vm invalidation to "
                                "MMHUB\"); tinygrad AM_GMC.flush_tlb");
            }
            chip_.store(address, value);
            chip_.store(h->inv_eng17_ack, value & field::kPerVmidMask);  // done at once
            // The engine invalidates VMID 0's translations inside its ADDR_RANGE only (LOGI_PAGE_ADDR_RANGE:
            // HI32 bits 4:0 above LO32 bits 31:1, a page number). Linux programs every engine with
            // 0xffffffff / 0x1f, the whole space (gfxhub_v3_0_program_invalidation, mmhub_v3_0, v12_0, v4_1);
            // the reset value is 0 (gc_11_0_0_default.h). What hardware does with a range short of the
            // context is not public: the model leaves the translations above it stale.
            const uint64_t range = (uint64_t{chip_.load(h->inv_eng17_range_hi) & 0x1f} << 31) | (chip_.load(h->inv_eng17_range_lo) >> 1);
            const uint64_t end_page = (uint64_t{chip_.load(h->pt_end_hi) & 0xf} << 32) | chip_.load(h->pt_end_lo);
            if ((value & 1u) && range < end_page) {
                chip_.violation(fmt::format("{} hub TLB invalidation of VMID 0 through VM_INVALIDATE_ENG17 covers pages up to {} "
                                            "(ADDR_RANGE_LO32 {}, HI32 {}; their reset value is 0) but VMID 0's page table "
                                            "reaches page {}: the translations above stay stale",
                                            mm ? "MM" : "GC", hex(range), hex(chip_.load(h->inv_eng17_range_lo)),
                                            hex(chip_.load(h->inv_eng17_range_hi)), hex(end_page)),
                                reg_name(h->inv_eng17_range_lo),
                                "Linux gfxhub_v3_0.c gfxhub_v3_0_program_invalidation / mmhub_v3_0.c "
                                "mmhub_v3_0_program_invalidation (0xffffffff / 0x1f); gc_11_0_0_default.h");
                return true;  // not counted: whatever cached the old translations still has them
            }
            (mm ? g.mm_invalidations : g.gc_invalidations)++;
            if (mm) g.mm_private_pending = 1;
            return true;
        }
        if (address == h->inv_eng17_ack || address == h->fault_status || address == h->fault_addr_lo ||
            address == h->fault_addr_hi) {
            chip_.violation("read-only VM register written", reg_name(address), kGmcSource);
            return true;
        }
        if (h->fault_cntl != 0 && address == h->fault_cntl) {
            if (value & field::kFaultClearStatusAddr) {
                chip_.store(h->fault_status, 0);
                chip_.store(h->fault_addr_lo, 0);
                chip_.store(h->fault_addr_hi, 0);
                (mm ? g.mm_fault_latched : g.gc_fault_latched) = 0;
            }
            chip_.store(address, value & ~field::kFaultClearStatusAddr);
            return true;
        }
    }
    if (address == chip_.reg.mm.bank_select_reserved_cid2) {
        if (value & field::kMmhubPrivateInvalidation) g.mm_private_pending = 0;
        chip_.store(address, value);
        return true;
    }
    if (address == chip_.reg.gpu_hdp_flush_req) {
        // nbio_v4_3.c hdp_flush without a ring: write the engine's bit to GPU_HDP_FLUSH_REQ, poll the
        // same bit in GPU_HDP_FLUSH_DONE. The flush completes at once.
        chip_.store(address, value);
        chip_.store(chip_.reg.gpu_hdp_flush_done, value);
        g.hdp_flushes++;
        return true;
    }
    if (address == chip_.reg.gpu_hdp_flush_done) {
        chip_.violation("GPU_HDP_FLUSH_DONE is written by the hardware", reg_name(address), "Linux nbio_v4_3.c");
        return true;
    }
    if (address == chip_.load(chip_.reg.remap_hdp_mem_flush_cntl) / 4) {
        g.hdp_flushes++;  // a write to the remapped HDP_MEM_FLUSH_CNTL flushes the HDP
        return true;
    }
    return false;
}

std::optional<Gmc::Translation> Gmc::translate(uint64_t va, VmClient client) {
    // The system aperture: MC addresses inside [fb_base, fb_top] are VRAM, untranslated.
    if (auto off = chip_.vram_offset(va, 1)) return Translation{*off, false, true};
    const RegisterMap::Hub& h = hub(client);
    const uint32_t cntl = chip_.load(h.context0_cntl);
    if (!(cntl & field::kContextEnable)) return std::nullopt;
    const uint64_t start = ((uint64_t{chip_.load(h.pt_start_hi) & 0xf} << 32) | chip_.load(h.pt_start_lo)) << 12;
    const uint64_t end = ((uint64_t{chip_.load(h.pt_end_hi) & 0xf} << 32) | chip_.load(h.pt_end_lo)) << 12;
    if (va < start || va > end + 0xfff) return std::nullopt;
    const unsigned depth = (cntl >> field::kPageTableDepthShift) & 3;  // 3: PDB2 -> PDB1 -> PDB0 -> PTB
    const uint64_t base = (uint64_t{chip_.load(h.pt_base_hi)} << 32) | chip_.load(h.pt_base_lo);
    if (!(base & gmc::kPteValid)) return std::nullopt;
    const uint64_t pde_pte = chip_.asic.gc_major() >= 12 ? gmc::kPdePteGfx12 : gmc::kPdePteGfx11;
    const uint64_t rel = va - start;  // the walk indexes with VA - PAGE_TABLE_START_ADDR
    uint64_t table = base & gmc::kPteAddressMask;
    for (unsigned level = 0; level <= depth; ++level) {
        const unsigned shift = 12 + 9 * (depth - level);
        const uint64_t index = (rel >> shift) & 511;
        if (table + index * 8 + 8 > kVramBytes) return std::nullopt;
        uint64_t entry = 0;
        std::memcpy(&entry, chip_.vram().data() + table + index * 8, 8);
        if (!(entry & gmc::kPteValid)) return std::nullopt;
        const bool leaf = level == depth || (level > 0 && (entry & pde_pte));
        if (leaf) {
            const uint64_t page = uint64_t{1} << shift;
            Translation t;
            t.address = (entry & gmc::kPteAddressMask & ~(page - 1)) + (rel & (page - 1));
            t.system = (entry & gmc::kPteSystem) != 0;
            t.writeable = (entry & gmc::kPteWriteable) != 0;
            if (!(entry & gmc::kPteReadable) && !t.writeable) return std::nullopt;
            return t;
        }
        table = entry & gmc::kPteAddressMask;
    }
    return std::nullopt;
}

void Gmc::for_each_leaf(VmClient client,
                        const std::function<void(uint64_t va, uint64_t bytes, const Translation&)>& visit) {
    // The same decode as translate(), walked top-down over valid entries only.
    const RegisterMap::Hub& h = hub(client);
    const uint32_t cntl = chip_.load(h.context0_cntl);
    if (!(cntl & field::kContextEnable)) return;
    const uint64_t start = ((uint64_t{chip_.load(h.pt_start_hi) & 0xf} << 32) | chip_.load(h.pt_start_lo)) << 12;
    const uint64_t end = ((uint64_t{chip_.load(h.pt_end_hi) & 0xf} << 32) | chip_.load(h.pt_end_lo)) << 12;
    const unsigned depth = (cntl >> field::kPageTableDepthShift) & 3;
    const uint64_t base = (uint64_t{chip_.load(h.pt_base_hi)} << 32) | chip_.load(h.pt_base_lo);
    if (!(base & gmc::kPteValid) || end < start) return;
    const uint64_t pde_pte = chip_.asic.gc_major() >= 12 ? gmc::kPdePteGfx12 : gmc::kPdePteGfx11;
    const uint64_t limit = end - start + 0x1000;  // relative VAs the range covers
    std::function<void(uint64_t, unsigned, uint64_t)> walk = [&](uint64_t table, unsigned level, uint64_t rel_base) {
        const unsigned shift = 12 + 9 * (depth - level);
        for (uint64_t index = 0; index < 512; ++index) {
            const uint64_t rel = rel_base + (index << shift);
            if (rel >= limit) return;
            if (table + index * 8 + 8 > kVramBytes) return;
            uint64_t entry = 0;
            std::memcpy(&entry, chip_.vram().data() + table + index * 8, 8);
            if (!(entry & gmc::kPteValid)) continue;
            const bool leaf = level == depth || (level > 0 && (entry & pde_pte));
            if (!leaf) {
                walk(entry & gmc::kPteAddressMask, level + 1, rel);
                continue;
            }
            const uint64_t page = uint64_t{1} << shift;
            Translation t;
            t.address = entry & gmc::kPteAddressMask & ~(page - 1);
            t.system = (entry & gmc::kPteSystem) != 0;
            t.writeable = (entry & gmc::kPteWriteable) != 0;
            if (!(entry & gmc::kPteReadable) && !t.writeable) continue;
            visit(start + rel, std::min(page, limit - rel), t);
        }
    };
    walk(base & gmc::kPteAddressMask, 0, 0);
}

void Gmc::fault(uint64_t va, bool write, VmClient client) {
    const RegisterMap::Hub& h = hub(client);
    GmcState& g = chip_.state().gmc;
    // Which protection fault it is (VM_CONTEXT0_CNTL names seven): outside START..END a RANGE fault;
    // a write to a mapped read-only page a WRITE fault; otherwise no valid PTE, a VALID fault.
    const uint64_t start = ((uint64_t{chip_.load(h.pt_start_hi) & 0xf} << 32) | chip_.load(h.pt_start_lo)) << 12;
    const uint64_t end = ((uint64_t{chip_.load(h.pt_end_hi) & 0xf} << 32) | chip_.load(h.pt_end_lo)) << 12;
    field::FaultKind kind = field::FaultKind::valid;
    if (va < start || va > end + 0xfff) {
        kind = field::FaultKind::range;
    } else if (write) {
        if (auto t = translate(va, client); t && !t->writeable) kind = field::FaultKind::write;
    }
    // VM_CONTEXT0_CNTL decoded with this generation's layout (registers.hpp).
    const field::ContextCntlLayout layout = chip_.reg.gc12_context_layout ? field::kContextCntlGc12 : field::kContextCntlGc11;
    const uint32_t cntl = chip_.load(h.context0_cntl);
    const bool other = kind != field::FaultKind::valid && kind != field::FaultKind::read && kind != field::FaultKind::write &&
                       kind != field::FaultKind::execute;
    const unsigned retry_bit = other ? layout.retry_other : layout.retry_permission_or_invalid;
    if (cntl & (1u << retry_bit)) {
        // A retried fault is not reported: the client re-requests the translation until it succeeds.
        static const char* const kinds[] = {"RANGE", "DUMMY_PAGE", "PDE0", "VALID", "READ", "WRITE", "EXECUTE"};
        chip_.violation(fmt::format("a {} protection fault at VA {} (VMID 0) is retried forever instead of reported: {}VM_CONTEXT0_CNTL "
                                    "{} has {} set (bit {} in {}'s field layout{})",
                                    kinds[static_cast<unsigned>(kind)], hex(va), client == VmClient::gfx ? "GC" : "MM", hex(cntl),
                                    other ? "RETRY_OTHER_FAULT" : "RETRY_PERMISSION_OR_INVALID_PAGE_FAULT", retry_bit,
                                    chip_.reg.gc12_context_layout ? "GC 12 / MMHUB 4.1" : "GC 11 / MMHUB 3.0",
                                    chip_.reg.gc12_context_layout && retry_bit == 9 ? "; in GC 11's, bit 9 is RANGE_PROTECTION_FAULT_ENABLE_INTERRUPT"
                                                                                   : ""),
                        reg_name(h.context0_cntl),
                        "Linux gfxhub_v12_0.c / mmhub_v4_1_0.c (VM_CONTEXT0_CNTL read-modify-written by field); gc_12_0_0_sh_mask.h");
        return;
    }
    uint32_t& latched = client == VmClient::gfx ? g.gc_fault_latched : g.mm_fault_latched;
    if (latched) {
        chip_.store(h.fault_status, chip_.load(h.fault_status) | field::kFaultMoreFaults);
    } else {
        latched = 1;
        chip_.store(h.fault_status, field::kFaultMappingError | (gmc::kCidShader << field::kFaultCidShift) |
                                        (write ? field::kFaultRw : 0));  // VMID 0
        if (h.fault_addr_lo != 0) {
            chip_.store(h.fault_addr_lo, static_cast<uint32_t>(va >> 12));
            chip_.store(h.fault_addr_hi, static_cast<uint32_t>(va >> 44) & 0xf);
        }
    }
    // The fault interrupts only when its kind's ENABLE_INTERRUPT bit is set.
    if (!(cntl & (1u << (layout.first_enable + 2 * static_cast<unsigned>(kind))))) return;
    // gmc_v11_0_process_interrupt: addr = src_data[0] << 12 | (src_data[1] & 0xf) << 44.
    IhEntry e;
    e.client_id = client == VmClient::gfx ? gmc::kIhClientGfx : gmc::kIhClientVmc;
    e.source_id = gmc::kIhSrcFault;
    e.vmid = 0;
    e.src_data = {static_cast<uint32_t>(va >> 12), static_cast<uint32_t>(va >> 44) & 0xf, 0, 0};
    ih_.push(e);
}

bool Gmc::probe(uint64_t va, uint64_t bytes, bool write, VmClient client) {
    for (uint64_t done = 0; done < bytes;) {
        const uint64_t at = va + done;
        auto t = translate(at, client);
        if (!t || (write && !t->writeable) || (!t->system && t->address >= kVramBytes)) {
            fault(at, write, client);
            return false;
        }
        done += std::min<uint64_t>(bytes - done, 4096 - (at & 0xfff));
    }
    return true;
}

bool Gmc::access(uint64_t va, std::span<std::byte> data, bool write, VmClient client) {
    for (uint64_t done = 0; done < data.size();) {
        const uint64_t at = va + done;
        const uint64_t n = std::min<uint64_t>(data.size() - done, 4096 - (at & 0xfff));
        auto t = translate(at, client);
        if (!t || (write && !t->writeable)) {
            fault(at, write, client);
            return false;
        }
        auto chunk = data.subspan(done, n);
        if (t->system) {
            bool ok = chip_.port != nullptr &&
                      (write ? chip_.port->dma_write(BusAddress(t->address), chunk) : chip_.port->dma_read(BusAddress(t->address), chunk));
            if (!ok) return false;
        } else {
            if (t->address + n > kVramBytes) {
                fault(at, write, client);
                return false;
            }
            std::byte* word = chip_.vram().data() + t->address;
            if ((n == 4 || n == 8) && t->address % n == 0) {
                // A single aligned word (a signal, a wait target, a pointer report) is one access
                // on hardware, and the host may touch it at the same time through BAR0: atomic.
                if (n == 4) {
                    uint32_t v = 0;
                    if (write) {
                        std::memcpy(&v, chunk.data(), 4);
                        __atomic_store_n(reinterpret_cast<uint32_t*>(word), v, __ATOMIC_RELAXED);
                    } else {
                        v = __atomic_load_n(reinterpret_cast<const uint32_t*>(word), __ATOMIC_RELAXED);
                        std::memcpy(chunk.data(), &v, 4);
                    }
                } else {
                    uint64_t v = 0;
                    if (write) {
                        std::memcpy(&v, chunk.data(), 8);
                        __atomic_store_n(reinterpret_cast<uint64_t*>(word), v, __ATOMIC_RELAXED);
                    } else {
                        v = __atomic_load_n(reinterpret_cast<const uint64_t*>(word), __ATOMIC_RELAXED);
                        std::memcpy(chunk.data(), &v, 8);
                    }
                }
            } else if (write) {
                std::memcpy(word, chunk.data(), n);
            } else {
                std::memcpy(chunk.data(), word, n);
            }
        }
        done += n;
    }
    return true;
}

}  // namespace baregpu::sim::amdgpu
