#include "drivers/sim/amdgpu/rdna_wave.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <limits>

namespace baregpu::sim::amdgpu::rdna {

namespace {

// Scalar operand codes (RDNA3 ISA guide §3.6 table "SSRC"; RDNA4 the same for these):
// s0-s105, VCC_LO/HI 106/107, TTMP0-15 108-123, NULL 124, M0 125, EXEC_LO/HI 126/127,
// integers 0..64 at 128-192, -1..-16 at 193-208, float constants 240-248, VCCZ 251, EXECZ 252,
// SCC 253, literal 255.
constexpr uint16_t kSgprs = 106, kVcc = 106, kNull = 124, kExec = 126, kLiteral = 255;
constexpr unsigned kLanes = 32;

float f32(uint32_t x) { return std::bit_cast<float>(x); }
uint32_t u32(float x) { return std::bit_cast<uint32_t>(x); }

// IEEE half <-> single (round to nearest even; RNE or toward zero for v_cvt_pk_rtz).
uint16_t to_half(float f, bool rtz = false) {
    const uint32_t x = u32(f);
    const uint32_t sign = (x >> 16) & 0x8000;
    const int32_t exp = int32_t((x >> 23) & 0xff);
    uint32_t mant = x & 0x7fffff;
    if (exp == 0xff) return uint16_t(sign | 0x7c00 | (mant ? 0x200 | (mant >> 13) : 0));
    int32_t e = exp - 127 + 15;
    if (e >= 0x1f) return uint16_t(rtz ? sign | 0x7bff : sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return uint16_t(sign);
        mant |= 0x800000;
        const uint32_t shift = uint32_t(14 - e);
        uint32_t h = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (!rtz && (rem > half || (rem == half && (h & 1)))) ++h;
        return uint16_t(sign | h);
    }
    uint32_t h = uint32_t(e) << 10 | (mant >> 13);
    const uint32_t rem = mant & 0x1fff;
    if (!rtz && (rem > 0x1000 || (rem == 0x1000 && (h & 1)))) ++h;  // may carry into the exponent: correct
    return uint16_t(sign | h);
}
float from_half(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0) {
        const float v = std::ldexp(float(mant), -24);
        return sign ? -v : v;
    }
    if (exp == 0x1f) return f32(sign | 0x7f800000 | (mant << 13));
    return f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

int exponent(float x) { return int((u32(x) >> 23) & 0xff); }  // the biased exponent field

// Float to integer: truncation, NaN gives 0, out of range saturates (RDNA3 §16 V_CVT_U32_F32, V_CVT_I32_F32).
uint32_t cvt_u32(float x) { return std::isnan(x) || x <= 0.0f ? 0u : x >= 4294967296.0f ? 0xffffffffu : uint32_t(x); }
uint32_t cvt_i32(float x) {
    return std::isnan(x) ? 0u : x <= -2147483648.0f ? 0x80000000u : x >= 2147483648.0f ? 0x7fffffffu : uint32_t(int32_t(x));
}

// The 16 float conditions of VOPC and (GC 12) SOPC, "ordered" ones false on NaN (RDNA3 §16 V_CMP_*_F32).
bool float_compare(CmpCond c, float x, float y) {
    const bool un = std::isnan(x) || std::isnan(y);
    switch (c) {
        case CmpCond::f: return false;
        case CmpCond::lt: return x < y;
        case CmpCond::eq: return x == y;
        case CmpCond::le: return x <= y;
        case CmpCond::gt: return x > y;
        case CmpCond::lg: return x < y || x > y;
        case CmpCond::ge: return x >= y;
        case CmpCond::o: return !un;
        case CmpCond::u: return un;
        case CmpCond::nge: return !(x >= y);
        case CmpCond::nlg: return !(x < y || x > y);
        case CmpCond::ngt: return !(x > y);
        case CmpCond::nle: return !(x <= y);
        case CmpCond::neq: return !(x == y);
        case CmpCond::nlt: return !(x < y);
        case CmpCond::t: return true;
        case CmpCond::ne: return x != y;
    }
    return false;
}

// A VALU source: one value per lane (a VGPR) or one for all (a scalar, constant or literal),
// with the VOP3 float input modifiers as masks.
struct Operand {
    const uint32_t* v = nullptr;
    uint32_t k = 0;
    uint32_t and_mask = 0xffffffffu, xor_mask = 0;
    uint32_t raw(unsigned l) const { return v != nullptr ? v[l] : k; }
    uint32_t at(unsigned l) const { return (raw(l) & and_mask) ^ xor_mask; }
    float f(unsigned l) const { return f32(at(l)); }
};

bool is_float(Op op) {
    switch (op) {
        case Op::v_cvt_u32_f32: case Op::v_cvt_i32_f32: case Op::v_cvt_f16_f32: case Op::v_fract_f32: case Op::v_trunc_f32:
        case Op::v_ceil_f32: case Op::v_rndne_f32: case Op::v_floor_f32: case Op::v_exp_f32: case Op::v_log_f32:
        case Op::v_rcp_f32: case Op::v_rcp_iflag_f32: case Op::v_rsq_f32: case Op::v_sqrt_f32: case Op::v_frexp_exp_i32_f32:
        case Op::v_frexp_mant_f32: case Op::v_add_f32: case Op::v_sub_f32: case Op::v_subrev_f32: case Op::v_mul_dx9_zero_f32:
        case Op::v_mul_f32: case Op::v_min_f32: case Op::v_max_f32: case Op::v_fmac_f32: case Op::v_cvt_pk_rtz_f16_f32:
        case Op::v_fma_f32: case Op::v_min3_f32: case Op::v_max3_f32: case Op::v_med3_f32: case Op::v_div_fixup_f32:
        case Op::v_div_fmas_f32: case Op::v_maxmin_f32: case Op::v_minmax_f32: case Op::v_div_scale_f32: case Op::v_ldexp_f32:
        case Op::v_cmp_class_f32: case Op::v_cmpx_class_f32: case Op::v_cvt_f32_f16: case Op::v_s_exp_f32: case Op::v_s_log_f32:
        case Op::v_s_rcp_f32: case Op::v_s_rsq_f32: case Op::v_s_sqrt_f32:
            return true;
        default: return false;
    }
}

struct Wave {
    std::array<uint32_t, 128> s{};
    std::vector<uint32_t> v;  // [vgpr][lane]
    uint32_t vgprs = 0;
    bool scc = false;
    uint64_t pc = 0;
    enum class State { run, barrier, done } state = State::run;
    // Loads whose data a real wave may not have yet: each until the s_waitcnt (GC 12: s_wait_*)
    // that covers it. Reading or writing their registers before then is a missing wait.
    struct Pending {
        enum class Kind : uint8_t { vm_load, smem, ds } kind;
        bool sgpr;
        uint16_t first, count;
        uint64_t pc;
    };
    std::vector<Pending> pending;
    uint32_t& exec() { return s[kExec]; }
    uint32_t& vcc() { return s[kVcc]; }
    uint32_t* vr(unsigned r) { return &v[size_t(r) * kLanes]; }
    // The state a wave starts in, reusing this one's allocations.
    void reset(uint32_t vgpr_count, uint64_t entry) {
        s.fill(0);
        v.assign(size_t(vgpr_count) * kLanes, 0);
        vgprs = vgpr_count;
        scc = false;
        pc = entry;
        state = State::run;
        pending.clear();
    }
};

class Executor {
public:
    Executor(Program& program, Memory& memory, const WaveSetup& setup, Counts& counts, Stop& stop, std::vector<std::byte>& lds)
        : program_(program), memory_(memory), setup_(setup), counts_(counts), stop_(stop), lds_(lds) {}

    // Runs `w` until it ends or waits at a barrier. false: the dispatch stops.
    bool run(Wave& w) {
        w_ = &w;
        while (w.state == Wave::State::run) {
            std::string why;
            const Inst* in = program_.at(w.pc, why);
            if (in == nullptr) return fail_at(w.pc, why);
            in_ = in;
            if (!step(*in)) return false;
        }
        return true;
    }

private:
    Program& program_;
    Memory& memory_;
    const WaveSetup& setup_;
    Counts& counts_;
    Stop& stop_;
    std::vector<std::byte>& lds_;
    Wave* w_ = nullptr;
    const Inst* in_ = nullptr;
    // The last page each direction touched (most lanes of an access share it).
    uint64_t rpage_ = ~0ull, wpage_ = ~0ull;
    std::byte* rhost_ = nullptr;
    std::byte* whost_ = nullptr;

    bool fail_at(uint64_t pc, const std::string& why) {
        stop_.what = fmt::format("shader stopped at PC {:#x} (program + {:#x}): {}", pc, pc - program_.entry(), why);
        return false;
    }
    bool fail(const std::string& why) {
        const Inst& in = *in_;
        return fail_at(w_->pc, fmt::format("{} {} (opcode {}): {}", encoding_name(in.enc), op_name(in.op), in.opcode, why));
    }

    // ---- operands ----
    // A register a load still owes (see Wave::pending): the wave would see the old value, or the
    // load's data would land after the new one (RDNA3 §4.4 "Data Dependency Resolution", s_waitcnt).
    bool ready(bool sgpr, unsigned first, unsigned count) {
        for (const Wave::Pending& p : w_->pending)
            if (p.sgpr == sgpr && first < unsigned(p.first + p.count) && p.first < first + count) {
                static constexpr const char* kCounter[] = {"vmcnt (GC 12: loadcnt)", "lgkmcnt (GC 12: kmcnt)", "lgkmcnt (GC 12: dscnt)"};
                return fail(fmt::format("uses {}{} before an s_waitcnt {} covers the load at PC {:#x} (program + {:#x}) that writes it",
                                        sgpr ? "s" : "v", std::max(first, unsigned(p.first)), kCounter[size_t(p.kind)], p.pc,
                                        p.pc - program_.entry()));
            }
        return true;
    }
    void issue(Wave::Pending::Kind kind, bool sgpr, unsigned first, unsigned count) {
        w_->pending.push_back({kind, sgpr, uint16_t(first), uint16_t(count), w_->pc});
    }
    // The wait: at most `n` loads of `kind` stay outstanding (the oldest retire first: VMEM loads
    // and LDS return in order; SMEM loads may return out of order, so only a count of 0 retires them).
    void wait(Wave::Pending::Kind kind, unsigned n) {
        auto& p = w_->pending;
        unsigned have = 0;
        for (const auto& e : p) have += e.kind == kind;
        for (auto it = p.begin(); it != p.end() && have > n;) {
            if (it->kind == kind && (kind != Wave::Pending::Kind::smem || n == 0)) {
                it = p.erase(it);
                --have;
            } else {
                ++it;
            }
        }
    }

    bool sread(uint16_t c, uint32_t& out) {
        Wave& w = *w_;
        if (c < kSgprs && !w.pending.empty() && !ready(true, c, 1)) return false;
        if (c < 128) {
            out = c == kNull ? 0 : w.s[c];
            return true;
        }
        if (c <= 192) { out = c - 128u; return true; }
        if (c <= 208) { out = uint32_t(-int32_t(c - 192)); return true; }
        switch (c) {
            case 240: out = 0x3f000000; return true;  // 0.5
            case 241: out = 0xbf000000; return true;
            case 242: out = 0x3f800000; return true;  // 1.0
            case 243: out = 0xbf800000; return true;
            case 244: out = 0x40000000; return true;  // 2.0
            case 245: out = 0xc0000000; return true;
            case 246: out = 0x40800000; return true;  // 4.0
            case 247: out = 0xc0800000; return true;
            case 248: out = 0x3e22f983; return true;  // 1/(2*pi)
            case 251: out = w.vcc() == 0; return true;
            case 252: out = w.exec() == 0; return true;
            case 253: out = w.scc; return true;
            case kLiteral: out = in_->literal; return true;
            default: return fail(fmt::format("scalar operand code {} is not modelled", c));
        }
    }
    bool sread64(uint16_t c, uint64_t& out) {
        if (c < 128) {
            if (c + 1 >= 128) return fail(fmt::format("64-bit scalar operand at code {} runs off the register file", c));
            if (c < kSgprs && !w_->pending.empty() && !ready(true, c, 2)) return false;
            out = uint64_t(c == kNull ? 0 : w_->s[c]) | uint64_t(c == kNull ? 0 : w_->s[c + 1]) << 32;
            return true;
        }
        uint32_t lo = 0;
        if (c >= 240 && c <= 248) return fail("a float inline constant as a 64-bit operand is not modelled");
        if (!sread(c, lo)) return false;
        // Inline integers sign-extend; a literal is zero-extended (LLVM AMDGPUOperandSyntax, "Literals").
        out = c == kLiteral ? uint64_t(lo) : uint64_t(int64_t(int32_t(lo)));
        return true;
    }
    bool swrite(uint16_t c, uint32_t value) {
        if (c >= 128) return fail(fmt::format("scalar destination code {} is not writeable", c));
        if (c == kNull) return true;
        if (c < kSgprs && !w_->pending.empty() && !ready(true, c, 1)) return false;
        w_->s[c] = value;
        return true;
    }
    bool swrite64(uint16_t c, uint64_t value) {
        if (c + 1 >= 128) return fail(fmt::format("64-bit scalar destination code {} is not writeable", c));
        if (c == kNull) return true;
        if (c < kSgprs && !w_->pending.empty() && !ready(true, c, 2)) return false;
        w_->s[c] = uint32_t(value);
        w_->s[c + 1] = uint32_t(value >> 32);
        return true;
    }
    bool vreg(unsigned r, unsigned count = 1) {
        if (r + count > w_->vgprs)
            return fail(fmt::format("v{} is beyond the {} VGPRs COMPUTE_PGM_RSRC1.VGPRS allocated", r + count - 1, w_->vgprs));
        return w_->pending.empty() || ready(false, r, count);
    }
    bool src(uint16_t c, Operand& o, unsigned index = 0, bool mods = false) {
        if (c >= 256) {
            if (!vreg(c - 256u)) return false;
            o.v = w_->vr(c - 256u);
        } else if (!sread(c, o.k)) {
            return false;
        }
        if (mods) {
            if (in_->abs & (1u << index)) o.and_mask = 0x7fffffffu;
            if (in_->neg & (1u << index)) o.xor_mask = 0x80000000u;
        }
        return true;
    }
    // A 64-bit VALU source: a VGPR pair, or a 64-bit scalar.
    bool src64(uint16_t c, Operand& lo, Operand& hi) {
        if (c >= 256) {
            if (!vreg(c - 256u, 2)) return false;
            lo.v = w_->vr(c - 256u);
            hi.v = w_->vr(c - 255u);
            return true;
        }
        uint64_t k = 0;
        if (!sread64(c, k)) return false;
        lo.k = uint32_t(k);
        hi.k = uint32_t(k >> 32);
        return true;
    }
    uint32_t* vdst(unsigned r, unsigned count = 1) { return vreg(r, count) ? w_->vr(r) : nullptr; }

    template <class F>
    void lanes(F&& f) {
        for (uint32_t m = w_->exec(); m != 0; m &= m - 1) f(unsigned(std::countr_zero(m)));
    }

    // ---- memory ----
    std::byte* host(uint64_t va, bool write) {
        const uint64_t page = va & ~uint64_t{4095};
        if (write) {
            if (page != wpage_) {
                whost_ = memory_.page(page, true);
                if (whost_ == nullptr) return nullptr;
                wpage_ = page;
            }
            return whost_ + (va - page);
        }
        if (page != rpage_) {
            rhost_ = memory_.page(page, false);
            if (rhost_ == nullptr) return nullptr;
            rpage_ = page;
        }
        return rhost_ + (va - page);
    }
    bool load(uint64_t va, void* out, unsigned bytes) {
        auto* o = static_cast<std::byte*>(out);
        while (bytes > 0) {
            const unsigned n = unsigned(std::min<uint64_t>(bytes, 4096 - (va & 4095)));
            std::byte* h = host(va, false);
            if (h == nullptr) return page_fault(va, false);
            std::memcpy(o, h, n);
            o += n;
            va += n;
            bytes -= n;
        }
        return true;
    }
    bool store(uint64_t va, const void* in, unsigned bytes) {
        auto* i = static_cast<const std::byte*>(in);
        while (bytes > 0) {
            const unsigned n = unsigned(std::min<uint64_t>(bytes, 4096 - (va & 4095)));
            std::byte* h = host(va, true);
            if (h == nullptr) return page_fault(va, true);
            std::memcpy(h, i, n);
            i += n;
            va += n;
            bytes -= n;
        }
        return true;
    }
    bool page_fault(uint64_t va, bool write) {
        stop_.fault = true;
        return fail(fmt::format("{} of {:#x}: GPU page fault", write ? "write" : "read", va));
    }

    // ---- instructions ----
    bool step(const Inst& in) {
        Wave& w = *w_;
        const uint64_t next = w.pc + 4u * in.words;
        switch (in.unit) {
            case Unit::salu: ++counts_.salu; break;
            case Unit::smem: ++counts_.smem; break;
            case Unit::valu: ++counts_.valu; break;
            case Unit::vmem_load: ++counts_.vmem_load; break;
            case Unit::vmem_store: ++counts_.vmem_store; break;
            case Unit::lds: ++counts_.lds; break;
            case Unit::branch: ++counts_.branch; break;
            case Unit::other: ++counts_.other; break;
        }
        bool ok = true;
        // A cache invalidation or write-back: the model keeps no caches (every access reads and
        // writes memory), so there is nothing to do.
        if (in.op >= Op::buffer_gl0_inv && in.op <= Op::global_wbinv) {
            w.pc = next;
            return true;
        }
        switch (in.enc) {
            case Encoding::sop1: case Encoding::sop2: case Encoding::sopk: case Encoding::sopc: ok = salu(in); break;
            case Encoding::sopp: return sopp(in, next);
            case Encoding::smem: ok = smem(in); break;
            case Encoding::vop1: case Encoding::vop2: case Encoding::vop3: case Encoding::vopc: ok = valu(in); break;
            case Encoding::vopd: ok = vopd(in); break;
            case Encoding::ds: ok = ds(in); break;
            case Encoding::flat: case Encoding::global: ok = vmem(in); break;
            case Encoding::scratch: return fail("scratch (private) memory is not modelled");
            case Encoding::vop3p: ok = packed(in); break;
            case Encoding::mubuf: return fail("buffer loads and stores are not modelled");
        }
        if (!ok) return false;
        if (in.op != Op::s_setpc_b64) w.pc = next;
        return true;
    }

    bool sopp(const Inst& in, uint64_t next) {
        Wave& w = *w_;
        bool taken = false;
        switch (in.op) {
            case Op::s_endpgm: w.state = Wave::State::done; return true;
            case Op::s_code_end: return fail("the wave ran past its s_endpgm into the code-end padding");
            case Op::s_branch: taken = true; break;
            case Op::s_cbranch_scc0: taken = !w.scc; break;
            case Op::s_cbranch_scc1: taken = w.scc; break;
            case Op::s_cbranch_vccz: taken = w.vcc() == 0; break;
            case Op::s_cbranch_vccnz: taken = w.vcc() != 0; break;
            case Op::s_cbranch_execz: taken = w.exec() == 0; break;
            case Op::s_cbranch_execnz: taken = w.exec() != 0; break;
            case Op::s_barrier:
                w.state = Wave::State::barrier;
                break;
            case Op::s_barrier_wait:
                if (in.simm != -1) return fail(fmt::format("s_barrier_wait {}: only the workgroup barrier (-1) is modelled", in.simm));
                break;
            case Op::s_sendmsg:
                // MSG_DEALLOC_VGPRS (3): the wave frees its VGPRs before s_endpgm (RDNA3 §4.6 "sendmsg").
                if ((in.simm & 0xff) != 3) return fail(fmt::format("s_sendmsg {:#x} is not modelled", in.simm));
                break;
            // s_waitcnt: vmcnt SIMM16[15:10], lgkmcnt [9:4] (RDNA3 §4.4); lgkmcnt counts SMEM and LDS.
            case Op::s_waitcnt: {
                const uint16_t k = uint16_t(in.simm);
                wait(Wave::Pending::Kind::vm_load, (k >> 10) & 0x3f);
                wait(Wave::Pending::Kind::smem, (k >> 4) & 0x3f);
                wait(Wave::Pending::Kind::ds, (k >> 4) & 0x3f);
                break;
            }
            // GC 12's separate counters (RDNA4 §4.4); the combined forms: loadcnt or storecnt in
            // SIMM16[13:8], dscnt in [5:0].
            case Op::s_wait_loadcnt: wait(Wave::Pending::Kind::vm_load, uint16_t(in.simm) & 0x3f); break;
            case Op::s_wait_kmcnt: wait(Wave::Pending::Kind::smem, uint16_t(in.simm) & 0x1f); break;
            case Op::s_wait_dscnt: wait(Wave::Pending::Kind::ds, uint16_t(in.simm) & 0x3f); break;
            case Op::s_wait_loadcnt_dscnt:
                wait(Wave::Pending::Kind::vm_load, (uint16_t(in.simm) >> 8) & 0x3f);
                wait(Wave::Pending::Kind::ds, uint16_t(in.simm) & 0x3f);
                break;
            case Op::s_wait_storecnt_dscnt: wait(Wave::Pending::Kind::ds, uint16_t(in.simm) & 0x3f); break;
            default: break;  // s_nop, s_delay_alu, s_clause, store counters...: no effect in a model that completes each instruction
        }
        // SOPP branch target: PC + 4 + SIMM16 * 4 (RDNA3 §4.2).
        w.pc = taken ? next + int64_t(in.simm) * 4 : next;
        return true;
    }

    bool smem(const Inst& in) {
        Wave& w = *w_;
        static constexpr unsigned kDwords[] = {1, 2, 3, 4, 8, 16};
        const unsigned n = kDwords[size_t(in.op) - size_t(Op::s_load_b32)];
        if (in.dst + n > kSgprs) return fail(fmt::format("s_load of {} dwords into s{} runs past s105", n, in.dst));
        uint64_t base = uint64_t(w.s[in.sbase]) | uint64_t(w.s[in.sbase + 1]) << 32;
        uint32_t soff = 0;
        if (in.soffset != kNull && !sread(in.soffset, soff)) return false;
        // The address is dword aligned: the two low bits are ignored (RDNA3 §6.1).
        const uint64_t va = (base + int64_t(in.offset) + soff) & ~uint64_t{3};
        counts_.bytes_loaded += 4u * n;
        if (!w.pending.empty() && !ready(true, in.dst, n)) return false;
        if (!load(va, &w.s[in.dst], 4 * n)) return false;
        issue(Wave::Pending::Kind::smem, true, in.dst, n);
        return true;
    }

    bool salu(const Inst& in) {
        Wave& w = *w_;
        uint32_t a = 0, b = 0;
        uint64_t a64 = 0, b64 = 0;
        auto r2 = [&] { return sread(in.src0, a) && sread(in.src1, b); };
        auto r2_64 = [&] { return sread64(in.src0, a64) && sread64(in.src1, b64); };
        auto wr = [&](uint32_t d) { return swrite(in.dst, d); };
        auto wr_scc = [&](uint32_t d) { w.scc = d != 0; return swrite(in.dst, d); };
        auto wr64_scc = [&](uint64_t d) { w.scc = d != 0; return swrite64(in.dst, d); };
        const uint16_t k = uint16_t(in.simm);
        uint32_t k32 = 0;
        switch (in.op) {
            // SOP1
            case Op::s_mov_b32: return sread(in.src0, a) && wr(a);
            case Op::s_mov_b64: return sread64(in.src0, a64) && swrite64(in.dst, a64);
            case Op::s_cmov_b32: return sread(in.src0, a) && (!w.scc || wr(a));
            case Op::s_not_b32: return sread(in.src0, a) && wr_scc(~a);
            case Op::s_not_b64: return sread64(in.src0, a64) && wr64_scc(~a64);
            case Op::s_brev_b32: {
                if (!sread(in.src0, a)) return false;
                uint32_t r = 0;
                for (int i = 0; i < 32; ++i) r |= ((a >> i) & 1u) << (31 - i);
                return wr(r);
            }
            case Op::s_ctz_i32_b32: return sread(in.src0, a) && wr(a == 0 ? ~0u : uint32_t(std::countr_zero(a)));
            case Op::s_clz_i32_u32: return sread(in.src0, a) && wr(a == 0 ? ~0u : uint32_t(std::countl_zero(a)));
            case Op::s_sext_i32_i8: return sread(in.src0, a) && wr(uint32_t(int32_t(int8_t(a))));
            case Op::s_sext_i32_i16: return sread(in.src0, a) && wr(uint32_t(int32_t(int16_t(a))));
            case Op::s_bitset0_b32: return sread(in.src0, a) && sread(in.dst, b) && wr(b & ~(1u << (a & 31)));
            case Op::s_bitset1_b32: return sread(in.src0, a) && sread(in.dst, b) && wr(b | (1u << (a & 31)));
            case Op::s_abs_i32: return sread(in.src0, a) && wr_scc(int32_t(a) < 0 ? uint32_t(-int64_t(int32_t(a))) : a);
            case Op::s_bcnt1_i32_b32: return sread(in.src0, a) && wr_scc(uint32_t(std::popcount(a)));
            case Op::s_bcnt1_i32_b64: return sread64(in.src0, a64) && wr_scc(uint32_t(std::popcount(a64)));
            case Op::s_and_saveexec_b32: case Op::s_or_saveexec_b32: case Op::s_xor_saveexec_b32:
            case Op::s_and_not1_saveexec_b32: case Op::s_or_not1_saveexec_b32: case Op::s_and_not0_saveexec_b32: {
                if (!sread(in.src0, a)) return false;
                const uint32_t old = w.exec();
                uint32_t e = 0;
                switch (in.op) {
                    case Op::s_and_saveexec_b32: e = a & old; break;
                    case Op::s_or_saveexec_b32: e = a | old; break;
                    case Op::s_xor_saveexec_b32: e = a ^ old; break;
                    case Op::s_and_not1_saveexec_b32: e = a & ~old; break;
                    case Op::s_or_not1_saveexec_b32: e = a | ~old; break;
                    default: e = ~a & old; break;  // s_and_not0_saveexec_b32
                }
                if (!wr(old)) return false;
                w.exec() = e;
                w.scc = e != 0;
                return true;
            }
            case Op::s_getpc_b64: return swrite64(in.dst, w.pc + 4u * in.words);
            case Op::s_setpc_b64:
                if (!sread64(in.src0, a64)) return false;
                w.pc = a64;
                return true;
            case Op::s_barrier_signal:
                if (in.src0 != 193) return fail("s_barrier_signal: only the workgroup barrier (-1) is modelled");
                w.state = Wave::State::barrier;
                return true;
            // SOP2
            case Op::s_add_u32: { if (!r2()) return false; const uint64_t r = uint64_t(a) + b; w.scc = r >> 32; return wr(uint32_t(r)); }
            case Op::s_sub_u32: if (!r2()) return false; w.scc = b > a; return wr(a - b);
            case Op::s_add_i32: {
                if (!r2()) return false;
                const uint32_t r = a + b;
                w.scc = ((a ^ r) & (b ^ r)) >> 31;  // signed overflow
                return wr(r);
            }
            case Op::s_sub_i32: {
                if (!r2()) return false;
                const uint32_t r = a - b;
                w.scc = ((a ^ b) & (a ^ r)) >> 31;
                return wr(r);
            }
            case Op::s_addc_u32: { if (!r2()) return false; const uint64_t r = uint64_t(a) + b + w.scc; w.scc = r >> 32; return wr(uint32_t(r)); }
            case Op::s_subb_u32: {
                if (!r2()) return false;
                const uint64_t sub = uint64_t(b) + w.scc;
                w.scc = sub > a;
                return wr(uint32_t(a - sub));
            }
            case Op::s_absdiff_i32: {
                if (!r2()) return false;
                const int64_t d = int64_t(int32_t(a)) - int32_t(b);
                return wr_scc(uint32_t(d < 0 ? -d : d));
            }
            case Op::s_lshl_b32: return r2() && wr_scc(a << (b & 31));
            case Op::s_lshr_b32: return r2() && wr_scc(a >> (b & 31));
            case Op::s_ashr_i32: return r2() && wr_scc(uint32_t(int32_t(a) >> (b & 31)));
            case Op::s_lshl_b64: return sread64(in.src0, a64) && sread(in.src1, b) && wr64_scc(a64 << (b & 63));
            case Op::s_lshr_b64: return sread64(in.src0, a64) && sread(in.src1, b) && wr64_scc(a64 >> (b & 63));
            case Op::s_ashr_i64: return sread64(in.src0, a64) && sread(in.src1, b) && wr64_scc(uint64_t(int64_t(a64) >> (b & 63)));
            case Op::s_lshl1_add_u32: case Op::s_lshl2_add_u32: case Op::s_lshl3_add_u32: case Op::s_lshl4_add_u32: {
                if (!r2()) return false;
                const unsigned n = unsigned(in.op) - unsigned(Op::s_lshl1_add_u32) + 1;
                const uint64_t r = (uint64_t(a) << n) + b;
                w.scc = r >> 32;
                return wr(uint32_t(r));
            }
            case Op::s_min_i32: if (!r2()) return false; w.scc = int32_t(a) < int32_t(b); return wr(w.scc ? a : b);
            case Op::s_min_u32: if (!r2()) return false; w.scc = a < b; return wr(w.scc ? a : b);
            case Op::s_max_i32: if (!r2()) return false; w.scc = int32_t(a) >= int32_t(b); return wr(w.scc ? a : b);
            case Op::s_max_u32: if (!r2()) return false; w.scc = a >= b; return wr(w.scc ? a : b);
            case Op::s_and_b32: return r2() && wr_scc(a & b);
            case Op::s_or_b32: return r2() && wr_scc(a | b);
            case Op::s_xor_b32: return r2() && wr_scc(a ^ b);
            case Op::s_nand_b32: return r2() && wr_scc(~(a & b));
            case Op::s_nor_b32: return r2() && wr_scc(~(a | b));
            case Op::s_xnor_b32: return r2() && wr_scc(~(a ^ b));
            case Op::s_and_not1_b32: return r2() && wr_scc(a & ~b);
            case Op::s_or_not1_b32: return r2() && wr_scc(a | ~b);
            case Op::s_and_b64: return r2_64() && wr64_scc(a64 & b64);
            case Op::s_or_b64: return r2_64() && wr64_scc(a64 | b64);
            case Op::s_xor_b64: return r2_64() && wr64_scc(a64 ^ b64);
            case Op::s_and_not1_b64: return r2_64() && wr64_scc(a64 & ~b64);
            case Op::s_or_not1_b64: return r2_64() && wr64_scc(a64 | ~b64);
            // S_BFE: offset S1[4:0] (5:0 for 64-bit), width S1[22:16] (RDNA3 §16.1 S_BFE_U32).
            case Op::s_bfe_u32: case Op::s_bfe_i32: {
                if (!r2()) return false;
                const unsigned off = b & 31, width = (b >> 16) & 0x7f;
                if (width == 0) return wr_scc(0);
                uint32_t r = a >> off;
                if (width < 32) r &= (1u << width) - 1;
                if (in.op == Op::s_bfe_i32 && width < 32) r = uint32_t(int32_t(r << (32 - width)) >> (32 - width));
                return wr_scc(r);
            }
            case Op::s_bfe_u64: {
                if (!sread64(in.src0, a64) || !sread(in.src1, b)) return false;
                const unsigned off = b & 63, width = (b >> 16) & 0x7f;
                uint64_t r = width == 0 ? 0 : a64 >> off;
                if (width > 0 && width < 64) r &= (uint64_t{1} << width) - 1;
                return wr64_scc(r);
            }
            case Op::s_bfm_b32: return r2() && wr(((1u << (a & 31)) - 1) << (b & 31));
            case Op::s_mul_i32: return r2() && wr(a * b);
            case Op::s_mul_hi_u32: return r2() && wr(uint32_t((uint64_t(a) * b) >> 32));
            case Op::s_mul_hi_i32: return r2() && wr(uint32_t(uint64_t(int64_t(int32_t(a)) * int32_t(b)) >> 32));
            case Op::s_cselect_b32: return r2() && wr(w.scc ? a : b);
            case Op::s_cselect_b64: return r2_64() && swrite64(in.dst, w.scc ? a64 : b64);
            case Op::s_pack_ll_b32_b16: return r2() && wr((a & 0xffff) | (b << 16));
            case Op::s_add_nc_u64: return r2_64() && swrite64(in.dst, a64 + b64);
            case Op::s_sub_nc_u64: return r2_64() && swrite64(in.dst, a64 - b64);
            case Op::s_mul_u64: return r2_64() && swrite64(in.dst, a64 * b64);
            case Op::s_add_f32: return r2() && wr(u32(f32(a) + f32(b)));
            case Op::s_sub_f32: return r2() && wr(u32(f32(a) - f32(b)));
            case Op::s_mul_f32: return r2() && wr(u32(f32(a) * f32(b)));
            case Op::s_min_num_f32: return r2() && wr(u32(fmin_(f32(a), f32(b))));
            case Op::s_max_num_f32: return r2() && wr(u32(fmax_(f32(a), f32(b))));
            case Op::s_fmac_f32: return r2() && sread(in.dst, k32) && wr(u32(std::fma(f32(a), f32(b), f32(k32))));
            case Op::s_ceil_f32: return sread(in.src0, a) && wr(u32(std::ceil(f32(a))));
            case Op::s_floor_f32: return sread(in.src0, a) && wr(u32(std::floor(f32(a))));
            case Op::s_trunc_f32: return sread(in.src0, a) && wr(u32(std::trunc(f32(a))));
            case Op::s_rndne_f32: return sread(in.src0, a) && wr(u32(std::nearbyint(f32(a))));
            case Op::s_cvt_f32_i32: return sread(in.src0, a) && wr(u32(float(int32_t(a))));
            case Op::s_cvt_f32_u32: return sread(in.src0, a) && wr(u32(float(a)));
            case Op::s_cvt_i32_f32: return sread(in.src0, a) && wr(cvt_i32(f32(a)));
            case Op::s_cvt_u32_f32: return sread(in.src0, a) && wr(cvt_u32(f32(a)));
            case Op::s_cmp_f32: if (!r2()) return false; w.scc = float_compare(in.cmp_cond, f32(a), f32(b)); return true;
            // SOPK
            case Op::s_movk_i32: return wr(uint32_t(in.simm));
            case Op::s_cmovk_i32: return !w.scc || wr(uint32_t(in.simm));
            case Op::s_cmpk_eq_i32: case Op::s_cmpk_lg_i32: case Op::s_cmpk_gt_i32: case Op::s_cmpk_ge_i32:
            case Op::s_cmpk_lt_i32: case Op::s_cmpk_le_i32: {
                if (!sread(in.dst, a)) return false;
                const int32_t x = int32_t(a), y = in.simm;
                static constexpr Op kFirst = Op::s_cmpk_eq_i32;
                const bool r[] = {x == y, x != y, x > y, x >= y, x < y, x <= y};
                w.scc = r[size_t(in.op) - size_t(kFirst)];
                return true;
            }
            case Op::s_cmpk_eq_u32: case Op::s_cmpk_lg_u32: case Op::s_cmpk_gt_u32: case Op::s_cmpk_ge_u32:
            case Op::s_cmpk_lt_u32: case Op::s_cmpk_le_u32: {
                if (!sread(in.dst, a)) return false;
                const uint32_t y = k;
                const bool r[] = {a == y, a != y, a > y, a >= y, a < y, a <= y};
                w.scc = r[size_t(in.op) - size_t(Op::s_cmpk_eq_u32)];
                return true;
            }
            case Op::s_addk_i32: {
                if (!sread(in.dst, a)) return false;
                const uint32_t y = uint32_t(in.simm), r = a + y;
                w.scc = ((a ^ r) & (y ^ r)) >> 31;
                return wr(r);
            }
            case Op::s_mulk_i32: return sread(in.dst, a) && wr(a * uint32_t(in.simm));
            // SOPK forms: the count is SGPR + SIMM16 (null: the immediate).
            case Op::s_waitcnt_vmcnt: case Op::s_waitcnt_lgkmcnt: {
                if (!sread(in.dst, a)) return false;
                const unsigned n = a + uint16_t(in.simm);
                if (in.op == Op::s_waitcnt_vmcnt) {
                    wait(Wave::Pending::Kind::vm_load, n);
                } else {
                    wait(Wave::Pending::Kind::smem, n);
                    wait(Wave::Pending::Kind::ds, n);
                }
                return true;
            }
            case Op::s_waitcnt_vscnt: case Op::s_waitcnt_expcnt: return true;
            // SOPC
            case Op::s_cmp_eq_i32: case Op::s_cmp_eq_u32: if (!r2()) return false; w.scc = a == b; return true;
            case Op::s_cmp_lg_i32: case Op::s_cmp_lg_u32: if (!r2()) return false; w.scc = a != b; return true;
            case Op::s_cmp_gt_i32: if (!r2()) return false; w.scc = int32_t(a) > int32_t(b); return true;
            case Op::s_cmp_ge_i32: if (!r2()) return false; w.scc = int32_t(a) >= int32_t(b); return true;
            case Op::s_cmp_lt_i32: if (!r2()) return false; w.scc = int32_t(a) < int32_t(b); return true;
            case Op::s_cmp_le_i32: if (!r2()) return false; w.scc = int32_t(a) <= int32_t(b); return true;
            case Op::s_cmp_gt_u32: if (!r2()) return false; w.scc = a > b; return true;
            case Op::s_cmp_ge_u32: if (!r2()) return false; w.scc = a >= b; return true;
            case Op::s_cmp_lt_u32: if (!r2()) return false; w.scc = a < b; return true;
            case Op::s_cmp_le_u32: if (!r2()) return false; w.scc = a <= b; return true;
            case Op::s_bitcmp0_b32: if (!r2()) return false; w.scc = ((a >> (b & 31)) & 1) == 0; return true;
            case Op::s_bitcmp1_b32: if (!r2()) return false; w.scc = ((a >> (b & 31)) & 1) == 1; return true;
            case Op::s_cmp_eq_u64: if (!r2_64()) return false; w.scc = a64 == b64; return true;
            case Op::s_cmp_lg_u64: if (!r2_64()) return false; w.scc = a64 != b64; return true;
            default: return fail("not a scalar ALU operation the model executes");
        }
    }

    // ---- VALU ----
    static float fmin_(float a, float b) { return std::fmin(a, b); }  // IEEE minNum: a NaN loses
    static float fmax_(float a, float b) { return std::fmax(a, b); }
    static float med3(float a, float b, float c) { return fmax_(fmin_(a, b), fmin_(fmax_(a, b), c)); }
    template <class T>
    static T med3i(T a, T b, T c) { return std::max(std::min(a, b), std::min(std::max(a, b), c)); }

    float out_mods(float r) const {
        // VOP3 output modifiers: omod (1: *2, 2: *4, 3: /2), then clamp to [0, 1] (RDNA3 §7.3).
        if (in_->omod == 1) r *= 2.0f;
        else if (in_->omod == 2) r *= 4.0f;
        else if (in_->omod == 3) r *= 0.5f;
        if (in_->clamp) r = std::isnan(r) ? 0.0f : std::clamp(r, 0.0f, 1.0f);
        return r;
    }

    bool cmp(const Inst& in) {
        Wave& w = *w_;
        Operand a, b, ah, bh;
        const bool wide = in.cmp_type == CmpType::i64 || in.cmp_type == CmpType::u64;
        if (wide) {
            if (!src64(in.src0, a, ah) || !src64(in.src1, b, bh)) return false;
        } else {
            const bool f = in.op == Op::v_cmp_class_f32 || in.op == Op::v_cmpx_class_f32 || in.cmp_type == CmpType::f32 ||
                           in.cmp_type == CmpType::f16;
            const bool mods = f && in.enc == Encoding::vop3;
            const bool class_op = in.op == Op::v_cmp_class_f32 || in.op == Op::v_cmpx_class_f32;
            if (!src(in.src0, a, 0, mods) || !src(in.src1, b, 1, mods && !class_op)) return false;
        }
        uint32_t result = 0;
        if (in.op == Op::v_cmp_class_f32 || in.op == Op::v_cmpx_class_f32) {
            // S1 bits: 0 signaling NaN, 1 quiet NaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0,
            // 7 +denormal, 8 +normal, 9 +inf (RDNA3 §16 V_CMP_CLASS_F32).
            lanes([&](unsigned l) {
                const uint32_t x = a.at(l), mask = b.raw(l);
                const bool neg = x >> 31;
                const uint32_t e = (x >> 23) & 0xff, m = x & 0x7fffff;
                unsigned cls;
                if (e == 0xff) cls = m == 0 ? (neg ? 2 : 9) : ((m >> 22) ? 1 : 0);
                else if (e == 0) cls = m == 0 ? (neg ? 5 : 6) : (neg ? 4 : 7);
                else cls = neg ? 3 : 8;
                if ((mask >> cls) & 1) result |= 1u << l;
            });
        } else {
            const CmpCond c = in.cmp_cond;
            auto fcmp = [c](float x, float y) { return float_compare(c, x, y); };
            auto icmp = [c](auto x, auto y) {
                switch (c) {
                    case CmpCond::f: return false;
                    case CmpCond::lt: return x < y;
                    case CmpCond::eq: return x == y;
                    case CmpCond::le: return x <= y;
                    case CmpCond::gt: return x > y;
                    case CmpCond::ne: return x != y;
                    case CmpCond::ge: return x >= y;
                    case CmpCond::t: return true;
                    default: return false;
                }
            };
            const unsigned sel0 = (in.opsel & 1) ? 16 : 0, sel1 = (in.opsel & 2) ? 16 : 0;
            lanes([&](unsigned l) {
                bool r = false;
                switch (in.cmp_type) {
                    case CmpType::f32: r = fcmp(a.f(l), b.f(l)); break;
                    case CmpType::f16: r = fcmp(from_half(uint16_t(a.at(l) >> sel0)), from_half(uint16_t(b.at(l) >> sel1))); break;
                    case CmpType::i32: r = icmp(int32_t(a.raw(l)), int32_t(b.raw(l))); break;
                    case CmpType::u32: r = icmp(a.raw(l), b.raw(l)); break;
                    case CmpType::i16: r = icmp(int16_t(a.raw(l) >> sel0), int16_t(b.raw(l) >> sel1)); break;
                    case CmpType::u16: r = icmp(uint16_t(a.raw(l) >> sel0), uint16_t(b.raw(l) >> sel1)); break;
                    case CmpType::i64:
                        r = icmp(int64_t(uint64_t(ah.raw(l)) << 32 | a.raw(l)), int64_t(uint64_t(bh.raw(l)) << 32 | b.raw(l)));
                        break;
                    case CmpType::u64: r = icmp(uint64_t(ah.raw(l)) << 32 | a.raw(l), uint64_t(bh.raw(l)) << 32 | b.raw(l)); break;
                    case CmpType::f64: break;
                }
                if (r) result |= 1u << l;
            });
        }
        // v_cmpx writes EXEC only (GC 10 and later); v_cmp writes VCC or the VOP3 SGPR, 0 for inactive lanes.
        if (in.op == Op::v_cmpx || in.op == Op::v_cmpx_class_f32) {
            w.exec() = result;
            return true;
        }
        return swrite(in.sdst, result);
    }

    bool valu(const Inst& in) {
        if (in.op == Op::v_cmp || in.op == Op::v_cmpx || in.op == Op::v_cmp_class_f32 || in.op == Op::v_cmpx_class_f32) return cmp(in);
        Wave& w = *w_;
        const bool fl = is_float(in.op) && in.enc == Encoding::vop3;
        if (in.clamp && !is_float(in.op)) return fail("clamp on an integer operation is not modelled");
        if (in.enc == Encoding::vop3 && !is_float(in.op) && (in.abs || in.neg)) return fail("abs/neg on an integer operation");
        Operand a, b, c;
        switch (in.op) {
            case Op::v_nop: return true;
            case Op::v_readfirstlane_b32: {
                if (!src(in.src0, a)) return false;
                const uint32_t e = w.exec();
                return swrite(in.dst, a.raw(e == 0 ? 0 : unsigned(std::countr_zero(e))));
            }
            // GC 12's pseudo-scalar transcendentals (RDNA4 ISA guide V_S_EXP_F32 ... V_S_SQRT_F32): the
            // VALU computes one value from a scalar source (SGPR, constant or literal) into an SGPR.
            case Op::v_s_exp_f32: case Op::v_s_log_f32: case Op::v_s_rcp_f32: case Op::v_s_rsq_f32: case Op::v_s_sqrt_f32: {
                if (in.src0 >= 256) return fail(fmt::format("{} reads v{}: its source is scalar", op_name(in.op), in.src0 - 256));
                if (!src(in.src0, a, 0, true)) return false;
                const float x = a.f(0);
                const float r = in.op == Op::v_s_exp_f32   ? std::exp2(x)
                                : in.op == Op::v_s_log_f32 ? std::log2(x)
                                : in.op == Op::v_s_rcp_f32 ? 1.0f / x
                                : in.op == Op::v_s_rsq_f32 ? 1.0f / std::sqrt(x)
                                                           : std::sqrt(x);
                return swrite(in.dst, u32(out_mods(r)));
            }
            case Op::v_readlane_b32: {
                uint32_t lane = 0;
                if (in.src0 < 256) return fail("v_readlane_b32 reads a VGPR");
                if (!src(in.src0, a) || !sread(in.src1, lane)) return false;
                return swrite(in.dst, a.raw(lane & 31));
            }
            case Op::v_writelane_b32: {
                uint32_t value = 0, lane = 0;
                if (!sread(in.src0, value) || !sread(in.src1, lane)) return false;
                uint32_t* d = vdst(in.dst);
                if (d == nullptr) return false;
                d[lane & 31] = value;
                return true;
            }
            case Op::v_lshlrev_b64: case Op::v_lshrrev_b64: case Op::v_ashrrev_i64: {
                Operand bh;
                if (!src(in.src0, a) || !src64(in.src1, b, bh)) return false;
                uint32_t* d = vdst(in.dst, 2);
                if (d == nullptr) return false;
                uint32_t* dh = d + kLanes;
                lanes([&](unsigned l) {
                    const uint64_t x = uint64_t(bh.raw(l)) << 32 | b.raw(l);
                    const unsigned s = a.raw(l) & 63;
                    const uint64_t r = in.op == Op::v_lshlrev_b64 ? x << s
                                       : in.op == Op::v_lshrrev_b64 ? x >> s
                                                                     : uint64_t(int64_t(x) >> s);
                    d[l] = uint32_t(r);
                    dh[l] = uint32_t(r >> 32);
                });
                return true;
            }
            case Op::v_mad_u64_u32: case Op::v_mad_i64_i32: {
                Operand ch;
                if (!src(in.src0, a) || !src(in.src1, b) || !src64(in.src2, c, ch)) return false;
                uint32_t* d = vdst(in.dst, 2);
                if (d == nullptr) return false;
                uint32_t* dh = d + kLanes;
                uint32_t carry = 0;
                lanes([&](unsigned l) {
                    const uint64_t add = uint64_t(ch.raw(l)) << 32 | c.raw(l);
                    uint64_t r;
                    bool co;
                    if (in.op == Op::v_mad_u64_u32) {
                        const uint64_t p = uint64_t(a.raw(l)) * b.raw(l);
                        r = p + add;
                        co = r < p;
                    } else {
                        const uint64_t p = uint64_t(int64_t(int32_t(a.raw(l))) * int32_t(b.raw(l)));
                        r = p + add;
                        co = int64_t((p ^ r) & (add ^ r)) < 0;  // signed overflow
                    }
                    d[l] = uint32_t(r);
                    dh[l] = uint32_t(r >> 32);
                    if (co) carry |= 1u << l;
                });
                return swrite(in.sdst, carry);
            }
            default: break;
        }
        // Three 32-bit sources at most; the carry/condition mask where the operation has one.
        if (!src(in.src0, a, 0, fl)) return false;
        // The VOP1 operations (also in their VOP3 form) have one source: the others' fields are unused.
        const bool two = !(in.op >= Op::v_nop && in.op <= Op::v_frexp_mant_f32);
        if (two && !src(in.src1, b, 1, fl)) return false;
        const bool three = in.enc == Encoding::vop3 && in.op >= Op::v_mad_i32_i24 && in.op <= Op::v_minmax_f32;
        if (three && !src(in.src2, c, 2, fl)) return false;
        uint32_t mask_in = 0;
        if (in.op == Op::v_cndmask_b32 || in.op == Op::v_add_co_ci_u32 || in.op == Op::v_sub_co_ci_u32 ||
            in.op == Op::v_subrev_co_ci_u32 || in.op == Op::v_div_fmas_f32) {
            const uint16_t m = in.op == Op::v_div_fmas_f32 ? kVcc : in.src2;
            if (!sread(m, mask_in)) return false;
        }
        uint32_t* d = vdst(in.dst);
        if (d == nullptr) return false;
        const float K = f32(in.literal);
        auto f1 = [&](auto op) { lanes([&](unsigned l) { d[l] = u32(out_mods(op(a.f(l)))); }); return true; };
        auto f2 = [&](auto op) { lanes([&](unsigned l) { d[l] = u32(out_mods(op(a.f(l), b.f(l)))); }); return true; };
        auto f3 = [&](auto op) { lanes([&](unsigned l) { d[l] = u32(out_mods(op(a.f(l), b.f(l), c.f(l)))); }); return true; };
        auto i1 = [&](auto op) { lanes([&](unsigned l) { d[l] = op(a.raw(l)); }); return true; };
        auto i2 = [&](auto op) { lanes([&](unsigned l) { d[l] = op(a.raw(l), b.raw(l)); }); return true; };
        auto i3 = [&](auto op) { lanes([&](unsigned l) { d[l] = op(a.raw(l), b.raw(l), c.raw(l)); }); return true; };
        // 16-bit integer operations: opsel picks each source's half and the destination's half,
        // whose other half keeps its value.
        auto h2 = [&](auto op) {
            const unsigned s0 = (in.opsel & 1) ? 16 : 0, s1 = (in.opsel & 2) ? 16 : 0, sd = (in.opsel & 8) ? 16 : 0;
            lanes([&](unsigned l) {
                const uint16_t r = uint16_t(op(uint16_t(a.raw(l) >> s0), uint16_t(b.raw(l) >> s1)));
                d[l] = (d[l] & ~(0xffffu << sd)) | uint32_t(r) << sd;
            });
            return true;
        };
        auto h3 = [&](auto op) {
            const unsigned s0 = (in.opsel & 1) ? 16 : 0, s1 = (in.opsel & 2) ? 16 : 0, s2 = (in.opsel & 4) ? 16 : 0,
                           sd = (in.opsel & 8) ? 16 : 0;
            lanes([&](unsigned l) {
                const uint16_t r = uint16_t(op(uint16_t(a.raw(l) >> s0), uint16_t(b.raw(l) >> s1), uint16_t(c.raw(l) >> s2)));
                d[l] = (d[l] & ~(0xffffu << sd)) | uint32_t(r) << sd;
            });
            return true;
        };
        auto carry_op = [&](auto op) {  // op(x, y, carry_in, carry_out&) -> result
            uint32_t out = 0;
            lanes([&](unsigned l) {
                bool co = false;
                d[l] = op(a.raw(l), b.raw(l), (mask_in >> l) & 1, co);
                if (co) out |= 1u << l;
            });
            return swrite(in.sdst, out);
        };
        switch (in.op) {
            // VOP1
            case Op::v_mov_b32: return i1([](uint32_t x) { return x; });
            case Op::v_cvt_f32_i32: return i1([](uint32_t x) { return u32(float(int32_t(x))); });
            case Op::v_cvt_f32_u32: return i1([](uint32_t x) { return u32(float(x)); });
            case Op::v_cvt_f32_ubyte0: return i1([](uint32_t x) { return u32(float(x & 0xff)); });
            case Op::v_cvt_u32_f32: lanes([&](unsigned l) { d[l] = cvt_u32(a.f(l)); }); return true;
            case Op::v_cvt_i32_f32: lanes([&](unsigned l) { d[l] = cvt_i32(a.f(l)); }); return true;
            case Op::v_cvt_f16_f32: {
                const unsigned sd = (in.opsel & 8) ? 16 : 0;
                lanes([&](unsigned l) { d[l] = (d[l] & ~(0xffffu << sd)) | uint32_t(to_half(out_mods(a.f(l)))) << sd; });
                return true;
            }
            case Op::v_cvt_f32_f16: {
                const unsigned s0 = (in.opsel & 1) ? 16 : 0;
                lanes([&](unsigned l) {
                    uint16_t h = uint16_t(a.raw(l) >> s0);
                    if (in.abs & 1) h &= 0x7fff;
                    if (in.neg & 1) h ^= 0x8000;
                    d[l] = u32(out_mods(from_half(h)));
                });
                return true;
            }
            case Op::v_fract_f32:
                return f1([](float x) { return std::isinf(x) ? std::numeric_limits<float>::quiet_NaN()
                                                            : std::min(x - std::floor(x), 0x1.fffffep-1f); });
            case Op::v_trunc_f32: return f1([](float x) { return std::trunc(x); });
            case Op::v_ceil_f32: return f1([](float x) { return std::ceil(x); });
            case Op::v_rndne_f32: return f1([](float x) { return std::nearbyint(x); });
            case Op::v_floor_f32: return f1([](float x) { return std::floor(x); });
            case Op::v_exp_f32: return f1([](float x) { return std::exp2(x); });
            case Op::v_log_f32: return f1([](float x) { return std::log2(x); });
            case Op::v_rcp_f32: case Op::v_rcp_iflag_f32: return f1([](float x) { return 1.0f / x; });
            case Op::v_rsq_f32: return f1([](float x) { return 1.0f / std::sqrt(x); });
            case Op::v_sqrt_f32: return f1([](float x) { return std::sqrt(x); });
            case Op::v_not_b32: return i1([](uint32_t x) { return ~x; });
            case Op::v_bfrev_b32:
                return i1([](uint32_t x) {
                    uint32_t r = 0;
                    for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
                    return r;
                });
            case Op::v_clz_i32_u32: return i1([](uint32_t x) { return x == 0 ? ~0u : uint32_t(std::countl_zero(x)); });
            case Op::v_ctz_i32_b32: return i1([](uint32_t x) { return x == 0 ? ~0u : uint32_t(std::countr_zero(x)); });
            case Op::v_frexp_exp_i32_f32:
                lanes([&](unsigned l) {
                    const float x = a.f(l);
                    int e = 0;
                    if (!std::isnan(x) && !std::isinf(x)) std::frexp(x, &e);
                    d[l] = uint32_t(e);
                });
                return true;
            case Op::v_frexp_mant_f32:
                return f1([](float x) { int e; return std::isnan(x) || std::isinf(x) ? x : std::frexp(x, &e); });
            // VOP2
            case Op::v_cndmask_b32:
                lanes([&](unsigned l) { d[l] = ((mask_in >> l) & 1) ? b.at(l) : a.at(l); });
                return true;
            case Op::v_add_f32: return f2([](float x, float y) { return x + y; });
            case Op::v_sub_f32: return f2([](float x, float y) { return x - y; });
            case Op::v_subrev_f32: return f2([](float x, float y) { return y - x; });
            case Op::v_mul_f32: return f2([](float x, float y) { return x * y; });
            case Op::v_mul_dx9_zero_f32: return f2([](float x, float y) { return x == 0.0f || y == 0.0f ? 0.0f : x * y; });
            case Op::v_mul_i32_i24:
                return i2([](uint32_t x, uint32_t y) { return uint32_t(int64_t(int32_t(x << 8) >> 8) * (int32_t(y << 8) >> 8)); });
            case Op::v_mul_hi_i32_i24:
                return i2([](uint32_t x, uint32_t y) { return uint32_t(uint64_t(int64_t(int32_t(x << 8) >> 8) * (int32_t(y << 8) >> 8)) >> 32); });
            case Op::v_mul_u32_u24: return i2([](uint32_t x, uint32_t y) { return (x & 0xffffff) * (y & 0xffffff); });
            case Op::v_mul_hi_u32_u24:
                return i2([](uint32_t x, uint32_t y) { return uint32_t((uint64_t(x & 0xffffff) * (y & 0xffffff)) >> 32); });
            case Op::v_min_f32: return f2(fmin_);
            case Op::v_max_f32: return f2(fmax_);
            case Op::v_min_i32: return i2([](uint32_t x, uint32_t y) { return uint32_t(std::min(int32_t(x), int32_t(y))); });
            case Op::v_max_i32: return i2([](uint32_t x, uint32_t y) { return uint32_t(std::max(int32_t(x), int32_t(y))); });
            case Op::v_min_u32: return i2([](uint32_t x, uint32_t y) { return std::min(x, y); });
            case Op::v_max_u32: return i2([](uint32_t x, uint32_t y) { return std::max(x, y); });
            case Op::v_lshlrev_b32: return i2([](uint32_t x, uint32_t y) { return y << (x & 31); });
            case Op::v_lshrrev_b32: return i2([](uint32_t x, uint32_t y) { return y >> (x & 31); });
            case Op::v_ashrrev_i32: return i2([](uint32_t x, uint32_t y) { return uint32_t(int32_t(y) >> (x & 31)); });
            case Op::v_and_b32: return i2([](uint32_t x, uint32_t y) { return x & y; });
            case Op::v_or_b32: return i2([](uint32_t x, uint32_t y) { return x | y; });
            case Op::v_xor_b32: return i2([](uint32_t x, uint32_t y) { return x ^ y; });
            case Op::v_xnor_b32: return i2([](uint32_t x, uint32_t y) { return ~(x ^ y); });
            case Op::v_add_nc_u32: return i2([](uint32_t x, uint32_t y) { return x + y; });
            case Op::v_sub_nc_u32: return i2([](uint32_t x, uint32_t y) { return x - y; });
            case Op::v_subrev_nc_u32: return i2([](uint32_t x, uint32_t y) { return y - x; });
            case Op::v_add_co_u32:
                return carry_op([](uint32_t x, uint32_t y, uint32_t, bool& co) { const uint64_t r = uint64_t(x) + y; co = r >> 32; return uint32_t(r); });
            case Op::v_sub_co_u32: return carry_op([](uint32_t x, uint32_t y, uint32_t, bool& co) { co = y > x; return x - y; });
            case Op::v_subrev_co_u32: return carry_op([](uint32_t x, uint32_t y, uint32_t, bool& co) { co = x > y; return y - x; });
            case Op::v_add_co_ci_u32:
                return carry_op([](uint32_t x, uint32_t y, uint32_t ci, bool& co) { const uint64_t r = uint64_t(x) + y + ci; co = r >> 32; return uint32_t(r); });
            case Op::v_sub_co_ci_u32:
                return carry_op([](uint32_t x, uint32_t y, uint32_t ci, bool& co) { co = uint64_t(y) + ci > x; return uint32_t(x - y - ci); });
            case Op::v_subrev_co_ci_u32:
                return carry_op([](uint32_t x, uint32_t y, uint32_t ci, bool& co) { co = uint64_t(x) + ci > y; return uint32_t(y - x - ci); });
            case Op::v_fmac_f32: lanes([&](unsigned l) { d[l] = u32(out_mods(std::fma(a.f(l), b.f(l), f32(d[l])))); }); return true;
            case Op::v_fmamk_f32: lanes([&](unsigned l) { d[l] = u32(std::fma(a.f(l), K, b.f(l))); }); return true;
            case Op::v_fmaak_f32: lanes([&](unsigned l) { d[l] = u32(std::fma(a.f(l), b.f(l), K)); }); return true;
            case Op::v_cvt_pk_rtz_f16_f32:
                lanes([&](unsigned l) { d[l] = uint32_t(to_half(a.f(l), true)) | uint32_t(to_half(b.f(l), true)) << 16; });
                return true;
            case Op::v_ldexp_f32: lanes([&](unsigned l) { d[l] = u32(out_mods(std::ldexp(a.f(l), int32_t(b.raw(l))))); }); return true;
            case Op::v_mul_lo_u32: return i2([](uint32_t x, uint32_t y) { return x * y; });
            case Op::v_mul_hi_u32: return i2([](uint32_t x, uint32_t y) { return uint32_t((uint64_t(x) * y) >> 32); });
            case Op::v_mul_hi_i32:
                return i2([](uint32_t x, uint32_t y) { return uint32_t(uint64_t(int64_t(int32_t(x)) * int32_t(y)) >> 32); });
            case Op::v_add_nc_u16: return h2([](uint16_t x, uint16_t y) { return x + y; });
            case Op::v_sub_nc_u16: return h2([](uint16_t x, uint16_t y) { return x - y; });
            case Op::v_mul_lo_u16: return h2([](uint16_t x, uint16_t y) { return x * y; });
            case Op::v_lshlrev_b16: return h2([](uint16_t x, uint16_t y) { return y << (x & 15); });
            case Op::v_lshrrev_b16: return h2([](uint16_t x, uint16_t y) { return y >> (x & 15); });
            case Op::v_ashrrev_i16: return h2([](uint16_t x, uint16_t y) { return int16_t(y) >> (x & 15); });
            // VOP3
            case Op::v_mad_i32_i24:
                return i3([](uint32_t x, uint32_t y, uint32_t z) { return uint32_t(int32_t(x << 8) >> 8) * uint32_t(int32_t(y << 8) >> 8) + z; });
            case Op::v_mad_u32_u24: return i3([](uint32_t x, uint32_t y, uint32_t z) { return (x & 0xffffff) * (y & 0xffffff) + z; });
            case Op::v_bfe_u32:
                return i3([](uint32_t x, uint32_t y, uint32_t z) {
                    const unsigned o = y & 31, wd = z & 31;
                    return wd == 0 ? 0u : (x >> o) & ((1u << wd) - 1);
                });
            case Op::v_bfe_i32:
                return i3([](uint32_t x, uint32_t y, uint32_t z) {
                    const unsigned o = y & 31, wd = z & 31;
                    if (wd == 0) return 0u;
                    const uint32_t f = (x >> o) & ((1u << wd) - 1);
                    return uint32_t(int32_t(f << (32 - wd)) >> (32 - wd));
                });
            case Op::v_bfi_b32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return (x & y) | (~x & z); });
            case Op::v_fma_f32: return f3([](float x, float y, float z) { return std::fma(x, y, z); });
            case Op::v_alignbit_b32:
                return i3([](uint32_t x, uint32_t y, uint32_t z) { return uint32_t((uint64_t(x) << 32 | y) >> (z & 31)); });
            case Op::v_min3_f32: return f3([](float x, float y, float z) { return fmin_(fmin_(x, y), z); });
            case Op::v_max3_f32: return f3([](float x, float y, float z) { return fmax_(fmax_(x, y), z); });
            case Op::v_med3_f32: return f3(med3);
            case Op::v_min3_i32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return uint32_t(std::min({int32_t(x), int32_t(y), int32_t(z)})); });
            case Op::v_max3_i32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return uint32_t(std::max({int32_t(x), int32_t(y), int32_t(z)})); });
            case Op::v_min3_u32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return std::min({x, y, z}); });
            case Op::v_max3_u32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return std::max({x, y, z}); });
            case Op::v_med3_i32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return uint32_t(med3i(int32_t(x), int32_t(y), int32_t(z))); });
            case Op::v_med3_u32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return med3i(x, y, z); });
            case Op::v_maxmin_f32: return f3([](float x, float y, float z) { return fmin_(fmax_(x, y), z); });
            case Op::v_minmax_f32: return f3([](float x, float y, float z) { return fmax_(fmin_(x, y), z); });
            case Op::v_xor3_b32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return x ^ y ^ z; });
            case Op::v_lshl_add_u32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return (x << (y & 31)) + z; });
            case Op::v_add_lshl_u32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return (x + y) << (z & 31); });
            case Op::v_add3_u32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return x + y + z; });
            case Op::v_lshl_or_b32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return (x << (y & 31)) | z; });
            case Op::v_and_or_b32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return (x & y) | z; });
            case Op::v_or3_b32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return x | y | z; });
            case Op::v_alignbyte_b32:
                return i3([](uint32_t x, uint32_t y, uint32_t z) { return uint32_t((uint64_t(x) << 32 | y) >> (8 * (z & 3))); });
            case Op::v_xad_u32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return (x ^ y) + z; });
            // V_PERM_B32: each byte of S2 selects a byte of {S0, S1} (0-7), a sign fill from bit 15/31
            // of S1 or S0 (8-11), 0x00 (12) or 0xff (13+) (RDNA3 §16 V_PERM_B32).
            case Op::v_perm_b32:
                return i3([](uint32_t x, uint32_t y, uint32_t z) {
                    const uint64_t v = uint64_t(x) << 32 | y;
                    uint32_t r = 0;
                    for (int i = 0; i < 4; ++i) {
                        const uint32_t sel = (z >> (8 * i)) & 0xff;
                        uint32_t byte;
                        if (sel < 8) byte = uint32_t(v >> (8 * sel)) & 0xff;
                        else if (sel == 8) byte = (y >> 15) & 1 ? 0xff : 0;
                        else if (sel == 9) byte = (y >> 31) & 1 ? 0xff : 0;
                        else if (sel == 10) byte = (x >> 15) & 1 ? 0xff : 0;
                        else if (sel == 11) byte = (x >> 31) & 1 ? 0xff : 0;
                        else if (sel == 12) byte = 0;
                        else byte = 0xff;
                        r |= byte << (8 * i);
                    }
                    return r;
                });
            case Op::v_mad_u16: case Op::v_mad_i16: return h3([](uint16_t x, uint16_t y, uint16_t z) { return x * y + z; });
            case Op::v_mad_u32_u16: {
                const unsigned s0 = (in.opsel & 1) ? 16 : 0, s1 = (in.opsel & 2) ? 16 : 0;
                lanes([&](unsigned l) { d[l] = uint32_t(uint16_t(a.raw(l) >> s0)) * uint16_t(b.raw(l) >> s1) + c.raw(l); });
                return true;
            }
            case Op::v_mad_i32_i16: {
                const unsigned s0 = (in.opsel & 1) ? 16 : 0, s1 = (in.opsel & 2) ? 16 : 0;
                lanes([&](unsigned l) {
                    d[l] = uint32_t(int32_t(int16_t(a.raw(l) >> s0)) * int16_t(b.raw(l) >> s1)) + c.raw(l);
                });
                return true;
            }
            case Op::v_min3_i16: return h3([](uint16_t x, uint16_t y, uint16_t z) { return std::min({int16_t(x), int16_t(y), int16_t(z)}); });
            case Op::v_min3_u16: return h3([](uint16_t x, uint16_t y, uint16_t z) { return std::min({x, y, z}); });
            case Op::v_max3_i16: return h3([](uint16_t x, uint16_t y, uint16_t z) { return std::max({int16_t(x), int16_t(y), int16_t(z)}); });
            case Op::v_max3_u16: return h3([](uint16_t x, uint16_t y, uint16_t z) { return std::max({x, y, z}); });
            case Op::v_med3_i16: return h3([](uint16_t x, uint16_t y, uint16_t z) { return med3i(int16_t(x), int16_t(y), int16_t(z)); });
            case Op::v_med3_u16: return h3([](uint16_t x, uint16_t y, uint16_t z) { return med3i(x, y, z); });
            case Op::v_cndmask_b16: {
                // S2 is the lane mask (an SGPR), S0/S1 the 16-bit halves opsel picks.
                const unsigned s0 = (in.opsel & 1) ? 16 : 0, s1 = (in.opsel & 2) ? 16 : 0, sd = (in.opsel & 8) ? 16 : 0;
                lanes([&](unsigned l) {
                    const uint16_t r = ((c.k >> l) & 1) ? uint16_t(b.raw(l) >> s1) : uint16_t(a.raw(l) >> s0);
                    d[l] = (d[l] & ~(0xffffu << sd)) | uint32_t(r) << sd;
                });
                return true;
            }
            case Op::v_maxmin_u32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return std::min(std::max(x, y), z); });
            case Op::v_minmax_u32: return i3([](uint32_t x, uint32_t y, uint32_t z) { return std::max(std::min(x, y), z); });
            case Op::v_maxmin_i32:
                return i3([](uint32_t x, uint32_t y, uint32_t z) { return uint32_t(std::min(std::max(int32_t(x), int32_t(y)), int32_t(z))); });
            case Op::v_minmax_i32:
                return i3([](uint32_t x, uint32_t y, uint32_t z) { return uint32_t(std::max(std::min(int32_t(x), int32_t(y)), int32_t(z))); });
            // Division helpers (RDNA3 §16 V_DIV_SCALE_F32, V_DIV_FMAS_F32, V_DIV_FIXUP_F32): the
            // compiler's f32 division is rcp + Newton steps between a scale and a fixup.
            case Op::v_div_fmas_f32:
                lanes([&](unsigned l) {
                    float r = std::fma(a.f(l), b.f(l), c.f(l));
                    if ((mask_in >> l) & 1) r = std::ldexp(r, exponent(c.f(l)) > 127 ? 64 : -64);
                    d[l] = u32(out_mods(r));
                });
                return true;
            case Op::v_div_fixup_f32:
                // S0 the quotient estimate, S1 the denominator, S2 the numerator.
                lanes([&](unsigned l) {
                    const float q = a.f(l), den = b.f(l), num = c.f(l);
                    const bool sign = std::signbit(den) != std::signbit(num);
                    float r;
                    if (std::isnan(num)) r = num;
                    else if (std::isnan(den)) r = den;
                    else if ((den == 0.0f && num == 0.0f) || (std::isinf(den) && std::isinf(num))) r = std::numeric_limits<float>::quiet_NaN();
                    else if (den == 0.0f || std::isinf(num)) r = sign ? -INFINITY : INFINITY;
                    else if (std::isinf(den) || num == 0.0f) r = sign ? -0.0f : 0.0f;
                    else r = sign ? -std::fabs(q) : std::fabs(q);
                    d[l] = u32(out_mods(r));
                });
                return true;
            case Op::v_div_scale_f32: {
                // S0 the value to scale (numerator or denominator), S1 the denominator, S2 the numerator;
                // VCC per lane: the quotient needs the post-scale of v_div_fmas.
                uint32_t vcc = 0;
                if (!src(in.src2, c, 2, true)) return false;
                lanes([&](unsigned l) {
                    const float s0 = a.f(l), den = b.f(l), num = c.f(l);
                    float r = s0;
                    const int ed = exponent(den), en = exponent(num);
                    if (den == 0.0f || num == 0.0f) {
                        r = std::numeric_limits<float>::quiet_NaN();
                    } else if (en - ed >= 96) {
                        vcc |= 1u << l;
                        if (s0 == den) r = std::ldexp(s0, 64);
                    } else if (ed == 0) {  // denominator denormal
                        r = std::ldexp(s0, 64);
                    } else if (exponent(1.0f / den) == 0 && exponent(num / den) != 0) {
                        vcc |= 1u << l;
                        if (s0 == den) r = std::ldexp(s0, 64);
                    } else if (exponent(1.0f / den) == 0) {
                        r = std::ldexp(s0, -64);
                    } else if (exponent(num / den) == 0) {
                        vcc |= 1u << l;
                        if (s0 == num) r = std::ldexp(s0, 64);
                    } else if (en <= 23) {
                        r = std::ldexp(s0, 64);
                    }
                    d[l] = u32(r);
                });
                return swrite(in.sdst, vcc);
            }
            default: return fail("not a vector ALU operation the model executes");
        }
    }

    // VOPD: two VALU operations issued together; both read their sources before either writes
    // (RDNA3 §7.6).
    bool vopd(const Inst& in) {
        Wave& w = *w_;
        std::array<uint32_t, kLanes> rx{}, ry{};
        auto one = [&](Op op, uint16_t s0, uint16_t s1, uint16_t dst, std::array<uint32_t, kLanes>& out) {
            Operand a, b;
            if (!src(s0, a) || (op != Op::v_mov_b32 && !src(s1, b)) || !vreg(dst)) return false;
            const uint32_t* d = w.vr(dst);
            const float K = f32(in.literal);
            const uint32_t vcc = w.vcc();
            lanes([&](unsigned l) {
                const float x = a.f(l), y = b.f(l);
                float r = 0;
                switch (op) {
                    case Op::v_fmac_f32: r = std::fma(x, y, f32(d[l])); break;
                    case Op::v_fmaak_f32: r = std::fma(x, y, K); break;
                    case Op::v_fmamk_f32: r = std::fma(x, K, y); break;
                    case Op::v_mul_f32: r = x * y; break;
                    case Op::v_add_f32: r = x + y; break;
                    case Op::v_sub_f32: r = x - y; break;
                    case Op::v_subrev_f32: r = y - x; break;
                    case Op::v_mul_dx9_zero_f32: r = x == 0.0f || y == 0.0f ? 0.0f : x * y; break;
                    case Op::v_max_f32: r = fmax_(x, y); break;
                    case Op::v_min_f32: r = fmin_(x, y); break;
                    case Op::v_mov_b32: out[l] = a.raw(l); return;
                    case Op::v_cndmask_b32: out[l] = ((vcc >> l) & 1) ? b.raw(l) : a.raw(l); return;
                    case Op::v_add_nc_u32: out[l] = a.raw(l) + b.raw(l); return;
                    case Op::v_lshlrev_b32: out[l] = b.raw(l) << (a.raw(l) & 31); return;
                    case Op::v_and_b32: out[l] = a.raw(l) & b.raw(l); return;
                    default: break;
                }
                out[l] = u32(r);
            });
            return true;
        };
        if (in.dst == in.dst_y) return fail("VOPD with the same destination for X and Y");
        if (!one(in.op, in.src0, in.src1, in.dst, rx) || !one(in.op_y, in.src0_y, in.src1_y, in.dst_y, ry)) return false;
        uint32_t* dx = w.vr(in.dst);
        uint32_t* dy = w.vr(in.dst_y);
        lanes([&](unsigned l) {
            dx[l] = rx[l];
            dy[l] = ry[l];
        });
        ++counts_.vopd;  // two operations, one instruction issued (Counts)
        return true;
    }

    // VOP3P (RDNA3 §15.3.6 and chapter 16's V_PK_*, V_FMA_MIX*): two 16-bit operations per lane.
    // Source i gives the low operation its half opsel[i] and the high one its half opsel_hi[i] (0:
    // bits 15:0, 1: bits 31:16); for the f16 operations neg negates source i of the low operation,
    // neg_hi of the high one. V_FMA_MIX* read source i as f32 where opsel_hi[i] is 0, else as the f16
    // half opsel[i] picks, with neg as negate and neg_hi as absolute value (LLVM VOP3PInstructions.td
    // "mix" modifiers), and write f32, or f16 into the low or high half keeping the other.
    bool packed(const Inst& in) {
        const bool mix = in.op == Op::v_fma_mix_f32 || in.op == Op::v_fma_mixlo_f16 || in.op == Op::v_fma_mixhi_f16;
        const bool f16 = in.op == Op::v_pk_fma_f16 || in.op == Op::v_pk_add_f16 || in.op == Op::v_pk_mul_f16 ||
                         in.op == Op::v_pk_min_f16 || in.op == Op::v_pk_max_f16;
        const bool three = mix || in.op == Op::v_pk_fma_f16 || in.op == Op::v_pk_mad_i16 || in.op == Op::v_pk_mad_u16;
        if (in.clamp) return fail("clamp on packed math is not modelled");
        if (!f16 && !mix && (in.neg != 0 || in.neg_hi != 0)) return fail("neg on a 16-bit integer operation");
        Operand s[3];
        const uint16_t codes[3] = {in.src0, in.src1, in.src2};
        for (unsigned i = 0; i < (three ? 3u : 2u); ++i) {
            // A float inline constant is an f16 value in packed math, and its high half is not
            // documented: neither is modelled (LLVM materializes such constants as literals here).
            if (codes[i] >= 240 && codes[i] <= 248) return fail(fmt::format("a float inline constant (source {}) in packed math", codes[i]));
            if (!src(codes[i], s[i])) return false;
        }
        uint32_t* d = vdst(in.dst);
        if (d == nullptr) return false;
        if (mix) {
            auto value = [&](unsigned i, unsigned l) {
                const uint32_t raw = s[i].raw(l);
                float x = ((in.opsel_hi >> i) & 1) ? from_half(uint16_t(raw >> (((in.opsel >> i) & 1) ? 16 : 0))) : f32(raw);
                if ((in.neg_hi >> i) & 1) x = std::fabs(x);
                if ((in.neg >> i) & 1) x = -x;
                return x;
            };
            lanes([&](unsigned l) {
                const float r = std::fma(value(0, l), value(1, l), value(2, l));
                if (in.op == Op::v_fma_mix_f32) d[l] = u32(r);
                else if (in.op == Op::v_fma_mixlo_f16) d[l] = (d[l] & 0xffff0000u) | to_half(r);
                else d[l] = (d[l] & 0xffffu) | uint32_t(to_half(r)) << 16;
            });
            return true;
        }
        auto half = [&](unsigned i, unsigned l, bool high) {
            uint16_t h = uint16_t(s[i].raw(l) >> ((((high ? in.opsel_hi : in.opsel) >> i) & 1) ? 16 : 0));
            if (f16 && (((high ? in.neg_hi : in.neg) >> i) & 1)) h ^= 0x8000;
            return h;
        };
        // f16 results are computed in double and rounded to f16 (through f32: exact for the sum and
        // product of two f16 values, which f32 holds; the FMA may differ from silicon in the last bit).
        auto op = [&](uint16_t a, uint16_t b, uint16_t c) -> uint16_t {
            const auto fa = double(from_half(a)), fb = double(from_half(b)), fc = double(from_half(c));
            const auto ia = int16_t(a), ib = int16_t(b);
            switch (in.op) {
                case Op::v_pk_fma_f16: return to_half(float(fa * fb + fc));
                case Op::v_pk_add_f16: return to_half(float(fa + fb));
                case Op::v_pk_mul_f16: return to_half(float(fa * fb));
                case Op::v_pk_min_f16: return to_half(float(std::fmin(fa, fb)));
                case Op::v_pk_max_f16: return to_half(float(std::fmax(fa, fb)));
                case Op::v_pk_mad_i16: case Op::v_pk_mad_u16: return uint16_t(a * b + c);
                case Op::v_pk_mul_lo_u16: return uint16_t(a * b);
                case Op::v_pk_add_i16: case Op::v_pk_add_u16: return uint16_t(a + b);
                case Op::v_pk_sub_i16: case Op::v_pk_sub_u16: return uint16_t(a - b);
                case Op::v_pk_lshlrev_b16: return uint16_t(b << (a & 15));
                case Op::v_pk_lshrrev_b16: return uint16_t(b >> (a & 15));
                case Op::v_pk_ashrrev_i16: return uint16_t(ib >> (a & 15));
                case Op::v_pk_max_i16: return uint16_t(std::max(ia, ib));
                case Op::v_pk_min_i16: return uint16_t(std::min(ia, ib));
                case Op::v_pk_max_u16: return std::max(a, b);
                case Op::v_pk_min_u16: return std::min(a, b);
                default: return 0;
            }
        };
        lanes([&](unsigned l) {
            const uint16_t lo = op(half(0, l, false), half(1, l, false), three ? half(2, l, false) : 0);
            const uint16_t hi = op(half(0, l, true), half(1, l, true), three ? half(2, l, true) : 0);
            d[l] = uint32_t(hi) << 16 | lo;
        });
        return true;
    }

    bool ds(const Inst& in) {
        Wave& w = *w_;
        if (!vreg(in.addr)) return false;
        const uint32_t* addr = w.vr(in.addr);
        const size_t size = lds_.size();
        auto at = [&](unsigned l, uint32_t off, unsigned bytes, std::byte*& p) {
            const uint64_t a = uint64_t(addr[l]) + off;
            if (a + bytes > size) {
                fail(fmt::format("lane {} accesses LDS bytes {:#x}..{:#x} beyond the {} bytes COMPUTE_PGM_RSRC2.LDS_SIZE allocated", l, a,
                                 a + bytes - 1, size));
                return false;
            }
            p = lds_.data() + a;
            return true;
        };
        auto store = [&](unsigned bytes, uint32_t off, uint16_t data) {
            if (!vreg(data, (bytes + 3) / 4)) return false;
            bool ok = true;
            lanes([&](unsigned l) {
                std::byte* p;
                if (!ok || !(ok = at(l, off, bytes, p))) return;
                for (unsigned i = 0; i < bytes; i += 4) {
                    const uint32_t v = w.vr(data + i / 4)[l];
                    std::memcpy(p + i, &v, std::min(4u, bytes - i));
                }
            });
            counts_.lds_bytes += uint64_t(bytes) * unsigned(std::popcount(w.exec()));
            return ok;
        };
        auto load = [&](unsigned bytes, uint32_t off, uint16_t dst, bool sign) {
            if (!vreg(dst, (bytes + 3) / 4)) return false;
            bool ok = true;
            lanes([&](unsigned l) {
                std::byte* p;
                if (!ok || !(ok = at(l, off, bytes, p))) return;
                if (bytes < 4) {
                    uint32_t v = 0;
                    std::memcpy(&v, p, bytes);
                    if (sign) v = bytes == 1 ? uint32_t(int32_t(int8_t(v))) : uint32_t(int32_t(int16_t(v)));
                    w.vr(dst)[l] = v;
                    return;
                }
                for (unsigned i = 0; i < bytes; i += 4) std::memcpy(&w.vr(dst + i / 4)[l], p + i, 4);
            });
            counts_.lds_bytes += uint64_t(bytes) * unsigned(std::popcount(w.exec()));
            return ok;
        };
        auto rmw = [&](auto op, bool ret) {
            if (!vreg(in.data0) || (ret && !vreg(in.dst))) return false;
            bool ok = true;
            lanes([&](unsigned l) {
                std::byte* p;
                if (!ok || !(ok = at(l, uint32_t(in.offset), 4, p))) return;
                uint32_t old;
                std::memcpy(&old, p, 4);
                const uint32_t nv = op(old, w.vr(in.data0)[l]);
                std::memcpy(p, &nv, 4);
                if (ret) w.vr(in.dst)[l] = old;
            });
            counts_.lds_bytes += 8ull * unsigned(std::popcount(w.exec()));
            if (ok && ret) issue(Wave::Pending::Kind::ds, false, in.dst, 1);
            return ok;
        };
        const uint32_t off = uint32_t(in.offset);
        auto lds_issue = [&](unsigned n) {
            issue(Wave::Pending::Kind::ds, false, in.dst, n);
            return true;
        };
        // The 2addr forms: two elements of `bytes`, at offset0 and offset1 counted in elements (in 64
        // elements for the stride64 forms); a load fills dst then the registers after it (RDNA3 §16
        // DS_LOAD_2ADDR_B32, DS_LOAD_2ADDR_STRIDE64_B64, DS_STORE_2ADDR_*).
        auto two = [&](unsigned bytes, unsigned stride, bool store_them) {
            const uint32_t first = uint32_t(in.offset) * bytes * stride, second = uint32_t(in.offset1) * bytes * stride;
            if (store_them) return store(bytes, first, in.data0) && store(bytes, second, in.data1);
            const unsigned regs = bytes / 4;
            return load(bytes, first, in.dst, false) && load(bytes, second, uint16_t(in.dst + regs), false) && lds_issue(2 * regs);
        };
        switch (in.op) {
            case Op::ds_store_b8: return store(1, off, in.data0);
            case Op::ds_store_b16: return store(2, off, in.data0);
            case Op::ds_store_b32: return store(4, off, in.data0);
            case Op::ds_store_b64: return store(8, off, in.data0);
            case Op::ds_store_b96: return store(12, off, in.data0);
            case Op::ds_store_b128: return store(16, off, in.data0);
            case Op::ds_store_2addr_b32: return two(4, 1, true);
            case Op::ds_store_2addr_stride64_b32: return two(4, 64, true);
            case Op::ds_store_2addr_b64: return two(8, 1, true);
            case Op::ds_store_2addr_stride64_b64: return two(8, 64, true);
            case Op::ds_load_2addr_b32: return two(4, 1, false);
            case Op::ds_load_2addr_stride64_b32: return two(4, 64, false);
            case Op::ds_load_2addr_b64: return two(8, 1, false);
            case Op::ds_load_2addr_stride64_b64: return two(8, 64, false);
            case Op::ds_load_b32: return load(4, off, in.dst, false) && lds_issue(1);
            case Op::ds_load_b64: return load(8, off, in.dst, false) && lds_issue(2);
            case Op::ds_load_b96: return load(12, off, in.dst, false) && lds_issue(3);
            case Op::ds_load_b128: return load(16, off, in.dst, false) && lds_issue(4);
            case Op::ds_load_u8: return load(1, off, in.dst, false) && lds_issue(1);
            case Op::ds_load_i8: return load(1, off, in.dst, true) && lds_issue(1);
            case Op::ds_load_u16: return load(2, off, in.dst, false) && lds_issue(1);
            case Op::ds_load_i16: return load(2, off, in.dst, true) && lds_issue(1);
            case Op::ds_add_u32: return rmw([](uint32_t x, uint32_t y) { return x + y; }, false);
            case Op::ds_add_rtn_u32: return rmw([](uint32_t x, uint32_t y) { return x + y; }, true);
            case Op::ds_sub_u32: return rmw([](uint32_t x, uint32_t y) { return x - y; }, false);
            case Op::ds_min_i32: return rmw([](uint32_t x, uint32_t y) { return uint32_t(std::min(int32_t(x), int32_t(y))); }, false);
            case Op::ds_max_i32: return rmw([](uint32_t x, uint32_t y) { return uint32_t(std::max(int32_t(x), int32_t(y))); }, false);
            case Op::ds_min_u32: return rmw([](uint32_t x, uint32_t y) { return std::min(x, y); }, false);
            case Op::ds_max_u32: return rmw([](uint32_t x, uint32_t y) { return std::max(x, y); }, false);
            case Op::ds_and_b32: return rmw([](uint32_t x, uint32_t y) { return x & y; }, false);
            case Op::ds_or_b32: return rmw([](uint32_t x, uint32_t y) { return x | y; }, false);
            case Op::ds_xor_b32: return rmw([](uint32_t x, uint32_t y) { return x ^ y; }, false);
            case Op::ds_min_f32: return rmw([](uint32_t x, uint32_t y) { return u32(fmin_(f32(x), f32(y))); }, false);
            case Op::ds_max_f32: return rmw([](uint32_t x, uint32_t y) { return u32(fmax_(f32(x), f32(y))); }, false);
            case Op::ds_add_f32: return rmw([](uint32_t x, uint32_t y) { return u32(f32(x) + f32(y)); }, false);
            default: return fail("not an LDS operation the model executes");
        }
    }

    // GLOBAL and FLAT (FLAT addresses are taken as global: the model maps no LDS or scratch
    // aperture). Address: SADDR (64-bit SGPR pair) + VADDR (32-bit) + offset, or VADDR (64-bit pair)
    // + offset when SADDR is off (RDNA3 §10.1 "Global Memory Instructions").
    bool vmem(const Inst& in) {
        Wave& w = *w_;
        const bool sbase = in.enc == Encoding::global && in.saddr != kNull && in.saddr != 0x7d;
        if (!vreg(in.addr, sbase ? 1 : 2)) return false;
        uint64_t base = 0;
        if (sbase && !sread64(in.saddr, base)) return false;
        const uint32_t* va_lo = w.vr(in.addr);
        const uint32_t* va_hi = sbase ? nullptr : w.vr(in.addr + 1u);
        auto address = [&](unsigned l) {
            return sbase ? base + va_lo[l] + int64_t(in.offset) : (uint64_t(va_hi[l]) << 32 | va_lo[l]) + int64_t(in.offset);
        };
        const unsigned active = unsigned(std::popcount(w.exec()));
        bool ok = true;
        switch (in.op) {
            case Op::m_load_u8: case Op::m_load_i8: case Op::m_load_u16: case Op::m_load_i16: {
                const unsigned bytes = in.op <= Op::m_load_i8 ? 1 : 2;
                const bool sign = in.op == Op::m_load_i8 || in.op == Op::m_load_i16;
                uint32_t* d = vdst(in.dst);
                if (d == nullptr) return false;
                lanes([&](unsigned l) {
                    uint32_t v = 0;
                    if (!ok || !(ok = load(address(l), &v, bytes))) return;
                    if (sign) v = bytes == 1 ? uint32_t(int32_t(int8_t(v))) : uint32_t(int32_t(int16_t(v)));
                    d[l] = v;
                });
                counts_.bytes_loaded += uint64_t(bytes) * active;
                if (ok) issue(Wave::Pending::Kind::vm_load, false, in.dst, 1);
                return ok;
            }
            case Op::m_load_b32: case Op::m_load_b64: case Op::m_load_b96: case Op::m_load_b128: {
                const unsigned n = unsigned(in.op) - unsigned(Op::m_load_b32) + 1;
                if (!vreg(in.dst, n)) return false;
                lanes([&](unsigned l) {
                    std::array<uint32_t, 4> v{};
                    if (!ok || !(ok = load(address(l), v.data(), 4 * n))) return;
                    for (unsigned i = 0; i < n; ++i) w.vr(in.dst + i)[l] = v[i];
                });
                counts_.bytes_loaded += 4ull * n * active;
                if (ok) issue(Wave::Pending::Kind::vm_load, false, in.dst, n);
                return ok;
            }
            case Op::m_store_b8: case Op::m_store_b16: case Op::m_store_b32: case Op::m_store_b64: case Op::m_store_b96:
            case Op::m_store_b128: {
                static constexpr unsigned kBytes[] = {1, 2, 4, 8, 12, 16};
                const unsigned bytes = kBytes[unsigned(in.op) - unsigned(Op::m_store_b8)];
                if (!vreg(in.data0, (bytes + 3) / 4)) return false;
                lanes([&](unsigned l) {
                    std::array<uint32_t, 4> v{};
                    for (unsigned i = 0; i < (bytes + 3) / 4; ++i) v[i] = w.vr(in.data0 + i)[l];
                    if (ok) ok = store(address(l), v.data(), bytes);
                });
                counts_.bytes_stored += uint64_t(bytes) * active;
                return ok;
            }
            default: break;
        }
        // Atomics, lane by lane in lane order (the model has one shader engine).
        const bool cmpswap = in.op == Op::m_atomic_cmpswap_b32;
        if (!vreg(in.data0, cmpswap ? 2 : 1) || (in.glc && !vreg(in.dst))) return false;
        lanes([&](unsigned l) {
            if (!ok) return;
            const uint64_t a = address(l);
            uint32_t old = 0;
            if (!(ok = load(a, &old, 4))) return;
            const uint32_t x = w.vr(in.data0)[l];
            uint32_t nv = old;
            switch (in.op) {
                case Op::m_atomic_swap_b32: nv = x; break;
                case Op::m_atomic_cmpswap_b32: nv = old == w.vr(in.data0 + 1u)[l] ? x : old; break;  // DATA[0] src, DATA[1] cmp
                case Op::m_atomic_add_u32: nv = old + x; break;
                case Op::m_atomic_sub_u32: nv = old - x; break;
                case Op::m_atomic_min_i32: nv = uint32_t(std::min(int32_t(old), int32_t(x))); break;
                case Op::m_atomic_min_u32: nv = std::min(old, x); break;
                case Op::m_atomic_max_i32: nv = uint32_t(std::max(int32_t(old), int32_t(x))); break;
                case Op::m_atomic_max_u32: nv = std::max(old, x); break;
                case Op::m_atomic_and_b32: nv = old & x; break;
                case Op::m_atomic_or_b32: nv = old | x; break;
                case Op::m_atomic_xor_b32: nv = old ^ x; break;
                case Op::m_atomic_add_f32: nv = u32(f32(old) + f32(x)); break;
                default: break;
            }
            if (!(ok = store(a, &nv, 4))) return;
            if (in.glc) w.vr(in.dst)[l] = old;
        });
        counts_.bytes_loaded += 4ull * active;
        counts_.bytes_stored += 4ull * active;
        if (ok && in.glc) issue(Wave::Pending::Kind::vm_load, false, in.dst, 1);
        return ok;
    }
};

}  // namespace

void Counts::add(const Counts& o) {
    salu += o.salu;
    smem += o.smem;
    valu += o.valu;
    vmem_load += o.vmem_load;
    vmem_store += o.vmem_store;
    lds += o.lds;
    branch += o.branch;
    other += o.other;
    vopd += o.vopd;
    bytes_loaded += o.bytes_loaded;
    bytes_stored += o.bytes_stored;
    lds_bytes += o.lds_bytes;
    waves += o.waves;
    workgroups += o.workgroups;
}

const Inst* Program::at(uint64_t pc, std::string& why) {
    if (pc < entry_ || pc % 4 != 0 || (pc - entry_) / 4 > (64u << 20)) {
        why = fmt::format("the program counter {:#x} is outside the program at {:#x} or not dword aligned", pc, entry_);
        return nullptr;
    }
    const size_t index = size_t((pc - entry_) / 4);
    if (index < slots_.size() && slots_[index].valid) return &slots_[index].inst;
    std::array<uint32_t, 3> words{};
    // Fetch up to 3 dwords; a fault on the 2nd/3rd page only matters if the instruction needs them.
    size_t have = 0;
    for (; have < words.size(); ++have)
        if (!fetch_(ctx_, pc + 4 * have, std::span(words).subspan(have, 1))) break;
    if (have == 0) {
        why = fmt::format("instruction fetch at {:#x}: GPU page fault", pc);
        return nullptr;
    }
    std::optional<Inst> in = decode(gen_, std::span(words).first(have), why);
    if (!in) return nullptr;
    if (slots_.size() <= index) slots_.resize(std::max(index + 1, slots_.size() * 2));
    slots_[index] = {*in, true};
    return &slots_[index].inst;
}

bool run_workgroup(Program& program, Memory& memory, const WaveSetup& setup, std::array<uint32_t, 3> group, Counts& counts,
                   Stop& stop) {
    const uint32_t threads = setup.block[0] * setup.block[1] * setup.block[2];
    const uint32_t nwaves = (threads + kLanes - 1) / kLanes;
    // Kept per thread from one workgroup to the next (zeroed, not allocated again): a dispatch of
    // thousands of workgroups spent more time allocating them than running its instructions.
    thread_local std::vector<std::byte> lds;
    thread_local std::vector<Wave> waves;
    lds.assign(setup.lds_bytes, std::byte{0});
    waves.resize(nwaves);
    for (uint32_t wi = 0; wi < nwaves; ++wi) {
        Wave& w = waves[wi];
        w.reset(setup.vgprs, program.entry());
        // SGPR initialization (AMDGPUUsage "Initial Kernel Execution State"): the user SGPRs, then on
        // GC 11 the enabled workgroup ids X, Y, Z, then the workgroup info. GC 12 has "architected
        // SGPRs": the ids are always in TTMP9 (X) and TTMP7 (Y [15:0], Z [31:16]) and take no SGPRs
        // (LLVM D143707 / PR 76140: SIISelLowering allocates no system SGPRs for them, reads TTMP7/9).
        unsigned n = 0;
        for (; n < setup.user_sgpr_count; ++n) w.s[n] = setup.user_sgprs[n];
        if (program.gen() == Gen::gfx11) {
            for (int i = 0; i < 3; ++i)
                if (setup.tgid_en[i]) w.s[n++] = group[size_t(i)];
        } else {
            w.s[108 + 9] = group[0];
            w.s[108 + 7] = (group[1] & 0xffff) | group[2] << 16;
        }
        if (setup.tg_size_en) w.s[n++] = nwaves << 6;  // TG_SIZE: wave count in bits 11:6 (first-wave bit 31 left clear)
        // v0: the work-item ids packed X [9:0], Y [19:10], Z [29:20], as many as TIDIG_COMP_CNT enables.
        uint32_t exec = 0;
        for (unsigned l = 0; l < kLanes; ++l) {
            const uint32_t t = wi * kLanes + l;
            if (t >= threads) break;
            exec |= 1u << l;
            const uint32_t x = t % setup.block[0], y = (t / setup.block[0]) % setup.block[1], z = t / (setup.block[0] * setup.block[1]);
            if (w.vgprs > 0) w.v[l] = x | (setup.tidig_comp_cnt >= 1 ? y << 10 : 0) | (setup.tidig_comp_cnt >= 2 ? z << 20 : 0);
        }
        w.exec() = exec;
    }
    Executor ex(program, memory, setup, counts, stop, lds);
    counts.waves += nwaves;
    counts.workgroups += 1;
    for (;;) {
        bool live = false;
        for (Wave& w : waves) {
            if (w.state != Wave::State::run) continue;
            if (!ex.run(w)) return false;
        }
        // Every wave ended or waits at the barrier: release it.
        for (Wave& w : waves)
            if (w.state == Wave::State::barrier) {
                w.state = Wave::State::run;
                live = true;
            }
        if (!live) return true;
    }
}

}  // namespace baregpu::sim::amdgpu::rdna
