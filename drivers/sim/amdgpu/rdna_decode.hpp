// The instruction decoder of the simulated GC 11 (RDNA3, gfx1100) and GC 12 (RDNA4, gfx1201)
// shader core: machine words to one `Inst` each, for wave32 compute.
//
// Field layouts and opcode numbers: AMD "RDNA3 Instruction Set Architecture Reference Guide"
// (February 2023), chapter 15 "Microcode Formats", and "AMD RDNA4 Instruction Set Architecture
// Reference Guide" (2025), chapter 14, cross-checked against LLVM 19's AMDGPU instruction
// definitions (llvm/lib/Target/AMDGPU/SOPInstructions.td, SMInstructions.td, VOP1/VOP2/VOP3/
// VOP3P/VOPC/VOPDInstructions.td, DSInstructions.td, FLATInstructions.td, their *_Real_gfx11 /
// *_Real_gfx12 records) and llvm-mc-19 -show-encoding. The opcode tables are in rdna_decode.cpp.
//
// A word the tables do not name decodes to nothing, and `why` names the encoding, the opcode and
// the word: the shader core stops the wave there (rdna_wave.hpp); nothing is skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace baregpu::sim::amdgpu::rdna {

enum class Gen : uint8_t { gfx11, gfx12 };

enum class Encoding : uint8_t { sop1, sop2, sopk, sopc, sopp, smem, vop1, vop2, vopc, vop3, vop3p, vopd, ds, flat, global, scratch, mubuf };
const char* encoding_name(Encoding e);

// Every operation the interpreter executes, named as the ISA guides name them (GC 12 renames,
// e.g. v_max_num_f32 for GC 11's v_max_f32, map to the same operation where the behaviour the
// compiler relies on is the same).
enum class Op : uint16_t {
    invalid,
    // SOP1
    s_mov_b32, s_mov_b64, s_cmov_b32, s_not_b32, s_not_b64, s_brev_b32, s_ctz_i32_b32, s_clz_i32_u32, s_sext_i32_i8,
    s_sext_i32_i16, s_bitset0_b32, s_bitset1_b32, s_abs_i32, s_bcnt1_i32_b32, s_bcnt1_i32_b64, s_and_saveexec_b32,
    s_or_saveexec_b32, s_xor_saveexec_b32, s_and_not1_saveexec_b32, s_or_not1_saveexec_b32, s_and_not0_saveexec_b32,
    s_getpc_b64, s_setpc_b64, s_barrier_signal,
    // SOP2
    s_add_u32, s_sub_u32, s_add_i32, s_sub_i32, s_addc_u32, s_subb_u32, s_absdiff_i32, s_lshl_b32, s_lshl_b64, s_lshr_b32,
    s_lshr_b64, s_ashr_i32, s_ashr_i64, s_lshl1_add_u32, s_lshl2_add_u32, s_lshl3_add_u32, s_lshl4_add_u32, s_min_i32,
    s_min_u32, s_max_i32, s_max_u32, s_and_b32, s_and_b64, s_or_b32, s_or_b64, s_xor_b32, s_xor_b64, s_nand_b32, s_nor_b32,
    s_xnor_b32, s_and_not1_b32, s_and_not1_b64, s_or_not1_b32, s_or_not1_b64, s_bfe_u32, s_bfe_i32, s_bfe_u64, s_bfm_b32,
    s_mul_i32, s_mul_hi_u32, s_mul_hi_i32, s_cselect_b32, s_cselect_b64, s_pack_ll_b32_b16, s_add_nc_u64,
    s_sub_nc_u64, s_mul_u64, s_add_f32, s_sub_f32, s_min_num_f32, s_max_num_f32, s_mul_f32, s_fmac_f32,
    s_ceil_f32, s_floor_f32, s_trunc_f32, s_rndne_f32, s_cvt_f32_i32, s_cvt_f32_u32, s_cvt_i32_f32, s_cvt_u32_f32,
    // SOPK
    s_movk_i32, s_cmovk_i32, s_cmpk_eq_i32, s_cmpk_lg_i32, s_cmpk_gt_i32, s_cmpk_ge_i32, s_cmpk_lt_i32, s_cmpk_le_i32,
    s_cmpk_eq_u32, s_cmpk_lg_u32, s_cmpk_gt_u32, s_cmpk_ge_u32, s_cmpk_lt_u32, s_cmpk_le_u32, s_addk_i32, s_mulk_i32,
    s_waitcnt_vscnt, s_waitcnt_vmcnt, s_waitcnt_expcnt, s_waitcnt_lgkmcnt,
    // SOPC
    s_cmp_eq_i32, s_cmp_lg_i32, s_cmp_gt_i32, s_cmp_ge_i32, s_cmp_lt_i32, s_cmp_le_i32, s_cmp_eq_u32, s_cmp_lg_u32,
    s_cmp_gt_u32, s_cmp_ge_u32, s_cmp_lt_u32, s_cmp_le_u32, s_bitcmp0_b32, s_bitcmp1_b32, s_cmp_eq_u64, s_cmp_lg_u64,
    s_cmp_f32,  // GC 12: the condition in Inst::cmp_cond
    // SOPP
    s_nop, s_endpgm, s_branch, s_cbranch_scc0, s_cbranch_scc1, s_cbranch_vccz, s_cbranch_vccnz, s_cbranch_execz,
    s_cbranch_execnz, s_barrier, s_barrier_wait, s_sendmsg, s_code_end, s_clause, s_delay_alu, s_set_inst_prefetch_distance,
    s_waitcnt_depctr, s_waitcnt, s_sleep, s_setprio, s_wait_loadcnt, s_wait_storecnt, s_wait_samplecnt, s_wait_bvhcnt,
    s_wait_expcnt, s_wait_dscnt, s_wait_kmcnt, s_wait_loadcnt_dscnt, s_wait_storecnt_dscnt,
    // SMEM
    s_load_b32, s_load_b64, s_load_b96, s_load_b128, s_load_b256, s_load_b512,
    // VOP1
    v_nop, v_mov_b32, v_readfirstlane_b32, v_cvt_f32_i32, v_cvt_f32_u32, v_cvt_u32_f32, v_cvt_i32_f32, v_cvt_f16_f32,
    v_cvt_f32_f16, v_cvt_f32_ubyte0, v_fract_f32, v_trunc_f32, v_ceil_f32, v_rndne_f32, v_floor_f32, v_exp_f32, v_log_f32,
    v_rcp_f32, v_rcp_iflag_f32, v_rsq_f32, v_sqrt_f32, v_not_b32, v_bfrev_b32, v_clz_i32_u32, v_ctz_i32_b32,
    v_frexp_exp_i32_f32, v_frexp_mant_f32,
    // VOP2
    v_cndmask_b32, v_add_f32, v_sub_f32, v_subrev_f32, v_mul_dx9_zero_f32, v_mul_f32, v_mul_i32_i24, v_mul_hi_i32_i24,
    v_mul_u32_u24, v_mul_hi_u32_u24, v_min_f32, v_max_f32, v_min_i32, v_max_i32, v_min_u32, v_max_u32, v_lshlrev_b32,
    v_lshrrev_b32, v_ashrrev_i32, v_and_b32, v_or_b32, v_xor_b32, v_xnor_b32, v_add_co_ci_u32, v_sub_co_ci_u32,
    v_subrev_co_ci_u32, v_add_nc_u32, v_sub_nc_u32, v_subrev_nc_u32, v_fmac_f32, v_fmamk_f32, v_fmaak_f32,
    v_cvt_pk_rtz_f16_f32, v_lshlrev_b64,
    // VOP3 only
    v_mad_i32_i24, v_mad_u32_u24, v_bfe_u32, v_bfe_i32, v_bfi_b32, v_fma_f32, v_alignbit_b32, v_min3_f32, v_min3_i32,
    v_min3_u32, v_max3_f32, v_max3_i32, v_max3_u32, v_med3_f32, v_med3_i32, v_med3_u32, v_div_fixup_f32, v_div_fmas_f32,
    v_xor3_b32, v_lshl_add_u32, v_add_lshl_u32, v_add3_u32, v_lshl_or_b32, v_and_or_b32, v_or3_b32, v_alignbyte_b32,
    v_mad_u16, v_mad_i16, v_mad_u32_u16, v_mad_i32_i16, v_perm_b32, v_xad_u32, v_min3_i16, v_min3_u16, v_max3_i16, v_max3_u16,
    v_med3_i16, v_med3_u16, v_cndmask_b16, v_maxmin_u32, v_minmax_u32, v_maxmin_i32, v_minmax_i32, v_maxmin_f32,
    v_minmax_f32, v_div_scale_f32, v_mad_u64_u32, v_mad_i64_i32, v_add_co_u32, v_sub_co_u32, v_subrev_co_u32,
    v_add_nc_u16, v_sub_nc_u16, v_mul_lo_u16, v_lshlrev_b16, v_lshrrev_b16, v_ashrrev_i16, v_ldexp_f32, v_mul_lo_u32,
    v_mul_hi_u32, v_mul_hi_i32, v_lshrrev_b64, v_ashrrev_i64, v_readlane_b32, v_writelane_b32,
    // GC 12's pseudo-scalar transcendentals: a scalar source, an SGPR result
    v_s_exp_f32, v_s_log_f32, v_s_rcp_f32, v_s_rsq_f32, v_s_sqrt_f32,
    // VOPC (and their VOP3 forms): the comparison is in Inst::cmp
    v_cmp, v_cmpx, v_cmp_class_f32, v_cmpx_class_f32,
    // VOP3P: two 16-bit operations per lane, and the mixed-precision FMAs
    v_pk_mad_i16, v_pk_mul_lo_u16, v_pk_add_i16, v_pk_sub_i16, v_pk_lshlrev_b16, v_pk_lshrrev_b16, v_pk_ashrrev_i16,
    v_pk_max_i16, v_pk_min_i16, v_pk_mad_u16, v_pk_add_u16, v_pk_sub_u16, v_pk_max_u16, v_pk_min_u16, v_pk_fma_f16,
    v_pk_add_f16, v_pk_mul_f16, v_pk_min_f16, v_pk_max_f16, v_fma_mix_f32, v_fma_mixlo_f16, v_fma_mixhi_f16,
    // DS
    ds_add_u32, ds_sub_u32, ds_min_i32, ds_max_i32, ds_min_u32, ds_max_u32, ds_and_b32, ds_or_b32, ds_xor_b32, ds_store_b32,
    ds_store_2addr_b32, ds_min_f32, ds_max_f32, ds_add_f32, ds_store_b8, ds_store_b16, ds_add_rtn_u32, ds_load_b32,
    ds_load_2addr_b32, ds_store_2addr_stride64_b32, ds_load_2addr_stride64_b32, ds_store_2addr_b64,
    ds_store_2addr_stride64_b64, ds_load_2addr_b64, ds_load_2addr_stride64_b64, ds_load_i8, ds_load_u8, ds_load_i16, ds_load_u16, ds_store_b64, ds_load_b64, ds_store_b96,
    ds_store_b128, ds_load_b96, ds_load_b128,
    // FLAT / GLOBAL / SCRATCH
    m_load_u8, m_load_i8, m_load_u16, m_load_i16, m_load_b32, m_load_b64, m_load_b96, m_load_b128, m_store_b8, m_store_b16,
    m_store_b32, m_store_b64, m_store_b96, m_store_b128, m_atomic_swap_b32, m_atomic_cmpswap_b32, m_atomic_add_u32,
    m_atomic_sub_u32, m_atomic_min_i32, m_atomic_min_u32, m_atomic_max_i32, m_atomic_max_u32, m_atomic_and_b32,
    m_atomic_or_b32, m_atomic_xor_b32, m_atomic_add_f32,
    // Cache control (GC 11 MUBUF, GC 12 VGLOBAL): what LLVM's memory legalizer emits for a fence.
    buffer_gl0_inv, buffer_gl1_inv, global_inv, global_wb, global_wbinv,
    count_,
};
const char* op_name(Op op);

// The comparison of a VOPC (or VOP3-encoded VOPC) instruction: its type and condition.
enum class CmpType : uint8_t { f16, f32, f64, i16, u16, i32, u32, i64, u64 };
enum class CmpCond : uint8_t { f, lt, eq, le, gt, lg, ge, o, u, nge, nlg, ngt, nle, neq, nlt, t, ne };

// What an instruction costs and which counter it belongs to (the cost report).
enum class Unit : uint8_t { salu, smem, valu, vmem_load, vmem_store, lds, branch, other };

struct Inst {
    Op op = Op::invalid;
    Encoding enc = Encoding::sop1;
    Unit unit = Unit::other;
    uint8_t words = 1;     // length in dwords, literal included
    uint16_t opcode = 0;   // the raw opcode field (diagnostics)
    // Operands. Scalar source codes 0-255 as the ISA guide's SSRC table; VALU sources add 256
    // for VGPRs (v0 = 256). VALU destinations are VGPR numbers; SALU destinations SGPR codes.
    uint16_t dst = 0, sdst = 0x7c, src0 = 0, src1 = 0, src2 = 0;
    uint32_t literal = 0;  // the dword after the instruction when a source is 255
    bool has_literal = false;
    int32_t simm = 0;      // SOPK/SOPP immediate (SOPK sign-extended where the operation is signed)
    // VOP3 / VOP3P modifiers.
    uint8_t abs = 0, neg = 0, neg_hi = 0, opsel = 0, opsel_hi = 7, omod = 0;
    bool clamp = false;
    // VOPC condition.
    CmpType cmp_type = CmpType::f32;
    CmpCond cmp_cond = CmpCond::f;
    // VOPD: the second operation (Y) and its operands; the first is op/dst/src0/src1.
    Op op_y = Op::invalid;
    uint16_t dst_y = 0, src0_y = 0, src1_y = 0;
    // Memory: address VGPR, data VGPRs, SGPR base (0x7c = none), offsets.
    uint16_t addr = 0, data0 = 0, data1 = 0, saddr = 0x7c, sbase = 0, soffset = 0x7c;
    int32_t offset = 0, offset1 = 0;
    bool glc = false;
};

// Decodes the instruction at the start of `words` (at least 3 words, or up to the end of the
// code). nullopt with `why` set: an encoding or opcode the tables do not name, or one cut off.
std::optional<Inst> decode(Gen gen, std::span<const uint32_t> words, std::string& why);

}  // namespace baregpu::sim::amdgpu::rdna
