#include "drivers/sim/amdgpu/rdna_decode.hpp"

#include <array>
#include <fmt/format.h>
#include <vector>

namespace baregpu::sim::amdgpu::rdna {

namespace {

enum GenMask : uint8_t { g11 = 1, g12 = 2, both = 3 };

struct Entry {
    uint16_t opcode;
    Op op;
    const char* name;
    GenMask gens = both;
};

// Opcode numbers: RDNA3 ISA guide §15 (SOP2 15.1.1, SOPK 15.1.2, SOP1 15.1.3, SOPC 15.1.4, SOPP
// 15.1.5, SMEM 15.2, VOP2 15.3.1, VOP1 15.3.2, VOPC 15.3.3 (VOPC in Inst::cmp_*), VOP3 15.3.4,
// VOP3P 15.3.6, VOPD 15.3.7, DS 15.6, FLAT/GLOBAL/SCRATCH 15.8); RDNA4 ISA guide §14 for the GC 12
// column; each checked against llvm-mc-19 -show-encoding for gfx1100 and gfx1201.
const Entry kSop2[] = {
    {0, Op::s_add_u32, "s_add_u32"}, {1, Op::s_sub_u32, "s_sub_u32"}, {2, Op::s_add_i32, "s_add_i32"},
    {3, Op::s_sub_i32, "s_sub_i32"}, {4, Op::s_addc_u32, "s_addc_u32"}, {5, Op::s_subb_u32, "s_subb_u32"},
    {6, Op::s_absdiff_i32, "s_absdiff_i32"}, {8, Op::s_lshl_b32, "s_lshl_b32"}, {9, Op::s_lshl_b64, "s_lshl_b64"},
    {10, Op::s_lshr_b32, "s_lshr_b32"}, {11, Op::s_lshr_b64, "s_lshr_b64"}, {12, Op::s_ashr_i32, "s_ashr_i32"},
    {13, Op::s_ashr_i64, "s_ashr_i64"}, {14, Op::s_lshl1_add_u32, "s_lshl1_add_u32"},
    {15, Op::s_lshl2_add_u32, "s_lshl2_add_u32"}, {16, Op::s_lshl3_add_u32, "s_lshl3_add_u32"},
    {17, Op::s_lshl4_add_u32, "s_lshl4_add_u32"}, {18, Op::s_min_i32, "s_min_i32"}, {19, Op::s_min_u32, "s_min_u32"},
    {20, Op::s_max_i32, "s_max_i32"}, {21, Op::s_max_u32, "s_max_u32"}, {22, Op::s_and_b32, "s_and_b32"},
    {23, Op::s_and_b64, "s_and_b64"}, {24, Op::s_or_b32, "s_or_b32"}, {25, Op::s_or_b64, "s_or_b64"},
    {26, Op::s_xor_b32, "s_xor_b32"}, {27, Op::s_xor_b64, "s_xor_b64"}, {28, Op::s_nand_b32, "s_nand_b32"},
    {30, Op::s_nor_b32, "s_nor_b32"}, {32, Op::s_xnor_b32, "s_xnor_b32"}, {34, Op::s_and_not1_b32, "s_and_not1_b32"},
    {35, Op::s_and_not1_b64, "s_and_not1_b64"}, {36, Op::s_or_not1_b32, "s_or_not1_b32"},
    {37, Op::s_or_not1_b64, "s_or_not1_b64"}, {38, Op::s_bfe_u32, "s_bfe_u32"}, {39, Op::s_bfe_i32, "s_bfe_i32"},
    {40, Op::s_bfe_u64, "s_bfe_u64"}, {42, Op::s_bfm_b32, "s_bfm_b32"}, {44, Op::s_mul_i32, "s_mul_i32"},
    {45, Op::s_mul_hi_u32, "s_mul_hi_u32"}, {46, Op::s_mul_hi_i32, "s_mul_hi_i32"},
    {48, Op::s_cselect_b32, "s_cselect_b32"}, {49, Op::s_cselect_b64, "s_cselect_b64"},
    {50, Op::s_pack_ll_b32_b16, "s_pack_ll_b32_b16"}, {83, Op::s_add_nc_u64, "s_add_nc_u64", g12},
    // GC 12's scalar float operations (RDNA4 §14.1.1).
    {64, Op::s_add_f32, "s_add_f32", g12}, {65, Op::s_sub_f32, "s_sub_f32", g12}, {66, Op::s_min_num_f32, "s_min_num_f32", g12},
    {67, Op::s_max_num_f32, "s_max_num_f32", g12}, {68, Op::s_mul_f32, "s_mul_f32", g12}, {71, Op::s_fmac_f32, "s_fmac_f32", g12},
    {84, Op::s_sub_nc_u64, "s_sub_nc_u64", g12}, {85, Op::s_mul_u64, "s_mul_u64", g12},
};
const Entry kSop1[] = {
    {0, Op::s_mov_b32, "s_mov_b32"}, {1, Op::s_mov_b64, "s_mov_b64"}, {2, Op::s_cmov_b32, "s_cmov_b32"},
    {4, Op::s_brev_b32, "s_brev_b32"}, {8, Op::s_ctz_i32_b32, "s_ctz_i32_b32"}, {10, Op::s_clz_i32_u32, "s_clz_i32_u32"},
    {14, Op::s_sext_i32_i8, "s_sext_i32_i8"}, {15, Op::s_sext_i32_i16, "s_sext_i32_i16"},
    {16, Op::s_bitset0_b32, "s_bitset0_b32"}, {18, Op::s_bitset1_b32, "s_bitset1_b32"}, {21, Op::s_abs_i32, "s_abs_i32"},
    {24, Op::s_bcnt1_i32_b32, "s_bcnt1_i32_b32"}, {25, Op::s_bcnt1_i32_b64, "s_bcnt1_i32_b64"},
    {30, Op::s_not_b32, "s_not_b32"}, {31, Op::s_not_b64, "s_not_b64"},
    {32, Op::s_and_saveexec_b32, "s_and_saveexec_b32"}, {34, Op::s_or_saveexec_b32, "s_or_saveexec_b32"},
    {36, Op::s_xor_saveexec_b32, "s_xor_saveexec_b32"}, {44, Op::s_and_not0_saveexec_b32, "s_and_not0_saveexec_b32"},
    {48, Op::s_and_not1_saveexec_b32, "s_and_not1_saveexec_b32"},
    {50, Op::s_or_not1_saveexec_b32, "s_or_not1_saveexec_b32"}, {71, Op::s_getpc_b64, "s_getpc_b64"},
    {72, Op::s_setpc_b64, "s_setpc_b64"}, {78, Op::s_barrier_signal, "s_barrier_signal", g12},
    {96, Op::s_ceil_f32, "s_ceil_f32", g12}, {97, Op::s_floor_f32, "s_floor_f32", g12}, {98, Op::s_trunc_f32, "s_trunc_f32", g12},
    {99, Op::s_rndne_f32, "s_rndne_f32", g12}, {100, Op::s_cvt_f32_i32, "s_cvt_f32_i32", g12},
    {101, Op::s_cvt_f32_u32, "s_cvt_f32_u32", g12}, {102, Op::s_cvt_i32_f32, "s_cvt_i32_f32", g12},
    {103, Op::s_cvt_u32_f32, "s_cvt_u32_f32", g12},
};
const Entry kSopk[] = {
    {0, Op::s_movk_i32, "s_movk_i32"}, {2, Op::s_cmovk_i32, "s_cmovk_i32"},
    {3, Op::s_cmpk_eq_i32, "s_cmpk_eq_i32", g11}, {4, Op::s_cmpk_lg_i32, "s_cmpk_lg_i32", g11},
    {5, Op::s_cmpk_gt_i32, "s_cmpk_gt_i32", g11}, {6, Op::s_cmpk_ge_i32, "s_cmpk_ge_i32", g11},
    {7, Op::s_cmpk_lt_i32, "s_cmpk_lt_i32", g11}, {8, Op::s_cmpk_le_i32, "s_cmpk_le_i32", g11},
    {9, Op::s_cmpk_eq_u32, "s_cmpk_eq_u32", g11}, {10, Op::s_cmpk_lg_u32, "s_cmpk_lg_u32", g11},
    {11, Op::s_cmpk_gt_u32, "s_cmpk_gt_u32", g11}, {12, Op::s_cmpk_ge_u32, "s_cmpk_ge_u32", g11},
    {13, Op::s_cmpk_lt_u32, "s_cmpk_lt_u32", g11}, {14, Op::s_cmpk_le_u32, "s_cmpk_le_u32", g11},
    {15, Op::s_addk_i32, "s_addk_i32"}, {16, Op::s_mulk_i32, "s_mulk_i32"},
    {24, Op::s_waitcnt_vscnt, "s_waitcnt_vscnt", g11}, {25, Op::s_waitcnt_vmcnt, "s_waitcnt_vmcnt", g11},
    {26, Op::s_waitcnt_expcnt, "s_waitcnt_expcnt", g11}, {27, Op::s_waitcnt_lgkmcnt, "s_waitcnt_lgkmcnt", g11},
};
const Entry kSopc[] = {
    {0, Op::s_cmp_eq_i32, "s_cmp_eq_i32"}, {1, Op::s_cmp_lg_i32, "s_cmp_lg_i32"}, {2, Op::s_cmp_gt_i32, "s_cmp_gt_i32"},
    {3, Op::s_cmp_ge_i32, "s_cmp_ge_i32"}, {4, Op::s_cmp_lt_i32, "s_cmp_lt_i32"}, {5, Op::s_cmp_le_i32, "s_cmp_le_i32"},
    {6, Op::s_cmp_eq_u32, "s_cmp_eq_u32"}, {7, Op::s_cmp_lg_u32, "s_cmp_lg_u32"}, {8, Op::s_cmp_gt_u32, "s_cmp_gt_u32"},
    {9, Op::s_cmp_ge_u32, "s_cmp_ge_u32"}, {10, Op::s_cmp_lt_u32, "s_cmp_lt_u32"}, {11, Op::s_cmp_le_u32, "s_cmp_le_u32"},
    {12, Op::s_bitcmp0_b32, "s_bitcmp0_b32"}, {13, Op::s_bitcmp1_b32, "s_bitcmp1_b32"},
    {16, Op::s_cmp_eq_u64, "s_cmp_eq_u64"}, {17, Op::s_cmp_lg_u64, "s_cmp_lg_u64"},
    // GC 12: s_cmp_{lt,eq,le,gt,lg,ge,o,u,nge,nlg,ngt,nle,neq,nlt}_f32 at 65-78 (RDNA4 §14.1.4).
    {65, Op::s_cmp_f32, "s_cmp_f32", g12}, {66, Op::s_cmp_f32, "s_cmp_f32", g12}, {67, Op::s_cmp_f32, "s_cmp_f32", g12},
    {68, Op::s_cmp_f32, "s_cmp_f32", g12}, {69, Op::s_cmp_f32, "s_cmp_f32", g12}, {70, Op::s_cmp_f32, "s_cmp_f32", g12},
    {71, Op::s_cmp_f32, "s_cmp_f32", g12}, {72, Op::s_cmp_f32, "s_cmp_f32", g12}, {73, Op::s_cmp_f32, "s_cmp_f32", g12},
    {74, Op::s_cmp_f32, "s_cmp_f32", g12}, {75, Op::s_cmp_f32, "s_cmp_f32", g12}, {76, Op::s_cmp_f32, "s_cmp_f32", g12},
    {77, Op::s_cmp_f32, "s_cmp_f32", g12}, {78, Op::s_cmp_f32, "s_cmp_f32", g12},
};
const Entry kSopp[] = {
    {0, Op::s_nop, "s_nop"}, {3, Op::s_sleep, "s_sleep"},
    {4, Op::s_set_inst_prefetch_distance, "s_set_inst_prefetch_distance", g11}, {5, Op::s_clause, "s_clause"},
    {7, Op::s_delay_alu, "s_delay_alu"}, {8, Op::s_waitcnt_depctr, "s_waitcnt_depctr"},  // GC 12: s_wait_alu
    {9, Op::s_waitcnt, "s_waitcnt", g11}, {20, Op::s_barrier_wait, "s_barrier_wait", g12},
    {31, Op::s_code_end, "s_code_end"}, {32, Op::s_branch, "s_branch"}, {33, Op::s_cbranch_scc0, "s_cbranch_scc0"},
    {34, Op::s_cbranch_scc1, "s_cbranch_scc1"}, {35, Op::s_cbranch_vccz, "s_cbranch_vccz"},
    {36, Op::s_cbranch_vccnz, "s_cbranch_vccnz"}, {37, Op::s_cbranch_execz, "s_cbranch_execz"},
    {38, Op::s_cbranch_execnz, "s_cbranch_execnz"}, {48, Op::s_endpgm, "s_endpgm"}, {53, Op::s_setprio, "s_setprio"},
    {54, Op::s_sendmsg, "s_sendmsg"}, {61, Op::s_barrier, "s_barrier", g11},
    {64, Op::s_wait_loadcnt, "s_wait_loadcnt", g12}, {65, Op::s_wait_storecnt, "s_wait_storecnt", g12},
    {66, Op::s_wait_samplecnt, "s_wait_samplecnt", g12}, {67, Op::s_wait_bvhcnt, "s_wait_bvhcnt", g12},
    {68, Op::s_wait_expcnt, "s_wait_expcnt", g12}, {70, Op::s_wait_dscnt, "s_wait_dscnt", g12},
    {71, Op::s_wait_kmcnt, "s_wait_kmcnt", g12}, {72, Op::s_wait_loadcnt_dscnt, "s_wait_loadcnt_dscnt", g12},
    {73, Op::s_wait_storecnt_dscnt, "s_wait_storecnt_dscnt", g12},
};
const Entry kSmem[] = {
    {0, Op::s_load_b32, "s_load_b32"}, {1, Op::s_load_b64, "s_load_b64"}, {2, Op::s_load_b128, "s_load_b128"},
    {3, Op::s_load_b256, "s_load_b256"}, {4, Op::s_load_b512, "s_load_b512"}, {5, Op::s_load_b96, "s_load_b96", g12},
};
const Entry kVop1[] = {
    {0, Op::v_nop, "v_nop"}, {1, Op::v_mov_b32, "v_mov_b32"}, {2, Op::v_readfirstlane_b32, "v_readfirstlane_b32"},
    {5, Op::v_cvt_f32_i32, "v_cvt_f32_i32"}, {6, Op::v_cvt_f32_u32, "v_cvt_f32_u32"}, {7, Op::v_cvt_u32_f32, "v_cvt_u32_f32"},
    {8, Op::v_cvt_i32_f32, "v_cvt_i32_f32"}, {10, Op::v_cvt_f16_f32, "v_cvt_f16_f32"}, {11, Op::v_cvt_f32_f16, "v_cvt_f32_f16"},
    {17, Op::v_cvt_f32_ubyte0, "v_cvt_f32_ubyte0"}, {32, Op::v_fract_f32, "v_fract_f32"}, {33, Op::v_trunc_f32, "v_trunc_f32"},
    {34, Op::v_ceil_f32, "v_ceil_f32"}, {35, Op::v_rndne_f32, "v_rndne_f32"}, {36, Op::v_floor_f32, "v_floor_f32"},
    {37, Op::v_exp_f32, "v_exp_f32"}, {39, Op::v_log_f32, "v_log_f32"}, {42, Op::v_rcp_f32, "v_rcp_f32"},
    {43, Op::v_rcp_iflag_f32, "v_rcp_iflag_f32"}, {46, Op::v_rsq_f32, "v_rsq_f32"}, {51, Op::v_sqrt_f32, "v_sqrt_f32"},
    {55, Op::v_not_b32, "v_not_b32"}, {56, Op::v_bfrev_b32, "v_bfrev_b32"}, {57, Op::v_clz_i32_u32, "v_clz_i32_u32"},
    {58, Op::v_ctz_i32_b32, "v_ctz_i32_b32"}, {63, Op::v_frexp_exp_i32_f32, "v_frexp_exp_i32_f32"},
    {64, Op::v_frexp_mant_f32, "v_frexp_mant_f32"},
};
const Entry kVop2[] = {
    {1, Op::v_cndmask_b32, "v_cndmask_b32"}, {3, Op::v_add_f32, "v_add_f32"}, {4, Op::v_sub_f32, "v_sub_f32"},
    {5, Op::v_subrev_f32, "v_subrev_f32"}, {7, Op::v_mul_dx9_zero_f32, "v_mul_dx9_zero_f32"}, {8, Op::v_mul_f32, "v_mul_f32"},
    {9, Op::v_mul_i32_i24, "v_mul_i32_i24"}, {10, Op::v_mul_hi_i32_i24, "v_mul_hi_i32_i24"},
    {11, Op::v_mul_u32_u24, "v_mul_u32_u24"}, {12, Op::v_mul_hi_u32_u24, "v_mul_hi_u32_u24"},
    {15, Op::v_min_f32, "v_min_f32", g11}, {16, Op::v_max_f32, "v_max_f32", g11}, {17, Op::v_min_i32, "v_min_i32"},
    {18, Op::v_max_i32, "v_max_i32"}, {19, Op::v_min_u32, "v_min_u32"}, {20, Op::v_max_u32, "v_max_u32"},
    {21, Op::v_min_f32, "v_min_num_f32", g12}, {22, Op::v_max_f32, "v_max_num_f32", g12},
    {24, Op::v_lshlrev_b32, "v_lshlrev_b32"}, {25, Op::v_lshrrev_b32, "v_lshrrev_b32"}, {26, Op::v_ashrrev_i32, "v_ashrrev_i32"},
    {27, Op::v_and_b32, "v_and_b32"}, {28, Op::v_or_b32, "v_or_b32"}, {29, Op::v_xor_b32, "v_xor_b32"},
    {30, Op::v_xnor_b32, "v_xnor_b32"}, {31, Op::v_lshlrev_b64, "v_lshlrev_b64", g12},
    {32, Op::v_add_co_ci_u32, "v_add_co_ci_u32"}, {33, Op::v_sub_co_ci_u32, "v_sub_co_ci_u32"},
    {34, Op::v_subrev_co_ci_u32, "v_subrev_co_ci_u32"}, {37, Op::v_add_nc_u32, "v_add_nc_u32"},
    {38, Op::v_sub_nc_u32, "v_sub_nc_u32"}, {39, Op::v_subrev_nc_u32, "v_subrev_nc_u32"}, {43, Op::v_fmac_f32, "v_fmac_f32"},
    {44, Op::v_fmamk_f32, "v_fmamk_f32"}, {45, Op::v_fmaak_f32, "v_fmaak_f32"},
    {47, Op::v_cvt_pk_rtz_f16_f32, "v_cvt_pk_rtz_f16_f32"},
};
// VOP3-only opcodes (512 and up; 0-255 are VOPC, 256 + VOP2, 384 + VOP1).
const Entry kVop3[] = {
    {522, Op::v_mad_i32_i24, "v_mad_i32_i24"}, {523, Op::v_mad_u32_u24, "v_mad_u32_u24"}, {528, Op::v_bfe_u32, "v_bfe_u32"},
    {529, Op::v_bfe_i32, "v_bfe_i32"}, {530, Op::v_bfi_b32, "v_bfi_b32"}, {531, Op::v_fma_f32, "v_fma_f32"},
    {534, Op::v_alignbit_b32, "v_alignbit_b32"}, {537, Op::v_min3_f32, "v_min3_f32", g11},
    {538, Op::v_min3_i32, "v_min3_i32"}, {539, Op::v_min3_u32, "v_min3_u32"}, {540, Op::v_max3_f32, "v_max3_f32", g11},
    {541, Op::v_max3_i32, "v_max3_i32"}, {542, Op::v_max3_u32, "v_max3_u32"}, {543, Op::v_med3_f32, "v_med3_f32", g11},
    {544, Op::v_med3_i32, "v_med3_i32"}, {545, Op::v_med3_u32, "v_med3_u32"}, {551, Op::v_div_fixup_f32, "v_div_fixup_f32"},
    {553, Op::v_min3_f32, "v_min3_num_f32", g12}, {554, Op::v_max3_f32, "v_max3_num_f32", g12},
    {561, Op::v_med3_f32, "v_med3_num_f32", g12}, {567, Op::v_div_fmas_f32, "v_div_fmas_f32"},
    {576, Op::v_xor3_b32, "v_xor3_b32"}, {582, Op::v_lshl_add_u32, "v_lshl_add_u32"}, {583, Op::v_add_lshl_u32, "v_add_lshl_u32"},
    {597, Op::v_add3_u32, "v_add3_u32"}, {598, Op::v_lshl_or_b32, "v_lshl_or_b32"}, {599, Op::v_and_or_b32, "v_and_or_b32"},
    {600, Op::v_or3_b32, "v_or3_b32"}, {535, Op::v_alignbyte_b32, "v_alignbyte_b32"}, {577, Op::v_mad_u16, "v_mad_u16"},
    {580, Op::v_perm_b32, "v_perm_b32"}, {581, Op::v_xad_u32, "v_xad_u32"}, {586, Op::v_min3_i16, "v_min3_i16"},
    {587, Op::v_min3_u16, "v_min3_u16"}, {589, Op::v_max3_i16, "v_max3_i16"}, {590, Op::v_max3_u16, "v_max3_u16"},
    {592, Op::v_med3_i16, "v_med3_i16"}, {593, Op::v_med3_u16, "v_med3_u16"}, {595, Op::v_mad_i16, "v_mad_i16"},
    {601, Op::v_mad_u32_u16, "v_mad_u32_u16"}, {602, Op::v_mad_i32_i16, "v_mad_i32_i16"},
    {605, Op::v_cndmask_b16, "v_cndmask_b16"}, {610, Op::v_maxmin_u32, "v_maxmin_u32"}, {611, Op::v_minmax_u32, "v_minmax_u32"},
    {612, Op::v_maxmin_i32, "v_maxmin_i32"}, {613, Op::v_minmax_i32, "v_minmax_i32"}, {606, Op::v_maxmin_f32, "v_maxmin_f32", g11}, {607, Op::v_minmax_f32, "v_minmax_f32", g11},
    {616, Op::v_minmax_f32, "v_minmax_num_f32", g12}, {617, Op::v_maxmin_f32, "v_maxmin_num_f32", g12},
    {764, Op::v_div_scale_f32, "v_div_scale_f32"}, {766, Op::v_mad_u64_u32, "v_mad_u64_u32"},
    {767, Op::v_mad_i64_i32, "v_mad_i64_i32"}, {768, Op::v_add_co_u32, "v_add_co_u32"}, {769, Op::v_sub_co_u32, "v_sub_co_u32"},
    {770, Op::v_subrev_co_u32, "v_subrev_co_u32"}, {771, Op::v_add_nc_u16, "v_add_nc_u16"}, {772, Op::v_sub_nc_u16, "v_sub_nc_u16"},
    {773, Op::v_mul_lo_u16, "v_mul_lo_u16"}, {796, Op::v_ldexp_f32, "v_ldexp_f32"}, {812, Op::v_mul_lo_u32, "v_mul_lo_u32"},
    {813, Op::v_mul_hi_u32, "v_mul_hi_u32"}, {814, Op::v_mul_hi_i32, "v_mul_hi_i32"}, {824, Op::v_lshlrev_b16, "v_lshlrev_b16"},
    {825, Op::v_lshrrev_b16, "v_lshrrev_b16"}, {826, Op::v_ashrrev_i16, "v_ashrrev_i16"},
    {828, Op::v_lshlrev_b64, "v_lshlrev_b64", g11}, {829, Op::v_lshrrev_b64, "v_lshrrev_b64"},
    {830, Op::v_ashrrev_i64, "v_ashrrev_i64"}, {864, Op::v_readlane_b32, "v_readlane_b32"},
    {865, Op::v_writelane_b32, "v_writelane_b32"},
    // RDNA4 ISA guide V_S_EXP_F32 ... V_S_SQRT_F32 (VOP3; opcodes checked with llvm-mc-19 -mcpu=gfx1201);
    // the f16 forms (the odd opcodes) are not modelled.
    {640, Op::v_s_exp_f32, "v_s_exp_f32", g12}, {642, Op::v_s_log_f32, "v_s_log_f32", g12}, {644, Op::v_s_rcp_f32, "v_s_rcp_f32", g12},
    {646, Op::v_s_rsq_f32, "v_s_rsq_f32", g12}, {648, Op::v_s_sqrt_f32, "v_s_sqrt_f32", g12},
};
// VOPD OPX (0-13) and OPY (0-18): RDNA3 ISA guide §7.6 table "VOPD instructions".
const Entry kVopd[] = {
    {0, Op::v_fmac_f32, "v_dual_fmac_f32"}, {1, Op::v_fmaak_f32, "v_dual_fmaak_f32"}, {2, Op::v_fmamk_f32, "v_dual_fmamk_f32"},
    {3, Op::v_mul_f32, "v_dual_mul_f32"}, {4, Op::v_add_f32, "v_dual_add_f32"}, {5, Op::v_sub_f32, "v_dual_sub_f32"},
    {6, Op::v_subrev_f32, "v_dual_subrev_f32"}, {7, Op::v_mul_dx9_zero_f32, "v_dual_mul_dx9_zero_f32"},
    {8, Op::v_mov_b32, "v_dual_mov_b32"}, {9, Op::v_cndmask_b32, "v_dual_cndmask_b32"}, {10, Op::v_max_f32, "v_dual_max_f32"},
    {11, Op::v_min_f32, "v_dual_min_f32"}, {16, Op::v_add_nc_u32, "v_dual_add_nc_u32"},
    {17, Op::v_lshlrev_b32, "v_dual_lshlrev_b32"}, {18, Op::v_and_b32, "v_dual_and_b32"},
};
const Entry kDs[] = {
    {0, Op::ds_add_u32, "ds_add_u32"}, {1, Op::ds_sub_u32, "ds_sub_u32"}, {5, Op::ds_min_i32, "ds_min_i32"},
    {6, Op::ds_max_i32, "ds_max_i32"}, {7, Op::ds_min_u32, "ds_min_u32"}, {8, Op::ds_max_u32, "ds_max_u32"},
    {9, Op::ds_and_b32, "ds_and_b32"}, {10, Op::ds_or_b32, "ds_or_b32"}, {11, Op::ds_xor_b32, "ds_xor_b32"},
    {13, Op::ds_store_b32, "ds_store_b32"}, {14, Op::ds_store_2addr_b32, "ds_store_2addr_b32"},
    {15, Op::ds_store_2addr_stride64_b32, "ds_store_2addr_stride64_b32"},
    {18, Op::ds_min_f32, "ds_min_f32"}, {19, Op::ds_max_f32, "ds_max_f32"}, {21, Op::ds_add_f32, "ds_add_f32"},
    {30, Op::ds_store_b8, "ds_store_b8"}, {31, Op::ds_store_b16, "ds_store_b16"}, {32, Op::ds_add_rtn_u32, "ds_add_rtn_u32"},
    {54, Op::ds_load_b32, "ds_load_b32"}, {55, Op::ds_load_2addr_b32, "ds_load_2addr_b32"},
    {56, Op::ds_load_2addr_stride64_b32, "ds_load_2addr_stride64_b32"}, {57, Op::ds_load_i8, "ds_load_i8"},
    {58, Op::ds_load_u8, "ds_load_u8"}, {59, Op::ds_load_i16, "ds_load_i16"}, {60, Op::ds_load_u16, "ds_load_u16"},
    {77, Op::ds_store_b64, "ds_store_b64"},
    {78, Op::ds_store_2addr_b64, "ds_store_2addr_b64"}, {79, Op::ds_store_2addr_stride64_b64, "ds_store_2addr_stride64_b64"}, {118, Op::ds_load_b64, "ds_load_b64"},
    {119, Op::ds_load_2addr_b64, "ds_load_2addr_b64"}, {120, Op::ds_load_2addr_stride64_b64, "ds_load_2addr_stride64_b64"}, {222, Op::ds_store_b96, "ds_store_b96"},
    {223, Op::ds_store_b128, "ds_store_b128"}, {254, Op::ds_load_b96, "ds_load_b96"}, {255, Op::ds_load_b128, "ds_load_b128"},
};
// VOP3P (RDNA3 §15.3.6, RDNA4 VOP3P; opcodes from llvm-mc-19 -mcpu=gfx1100 / gfx1201): the same
// numbers on both but the f16 minimum and maximum (GC 12's v_pk_min_num_f16 / v_pk_max_num_f16).
const Entry kVop3p[] = {
    {0, Op::v_pk_mad_i16, "v_pk_mad_i16"}, {1, Op::v_pk_mul_lo_u16, "v_pk_mul_lo_u16"}, {2, Op::v_pk_add_i16, "v_pk_add_i16"},
    {3, Op::v_pk_sub_i16, "v_pk_sub_i16"}, {4, Op::v_pk_lshlrev_b16, "v_pk_lshlrev_b16"}, {5, Op::v_pk_lshrrev_b16, "v_pk_lshrrev_b16"},
    {6, Op::v_pk_ashrrev_i16, "v_pk_ashrrev_i16"}, {7, Op::v_pk_max_i16, "v_pk_max_i16"}, {8, Op::v_pk_min_i16, "v_pk_min_i16"},
    {9, Op::v_pk_mad_u16, "v_pk_mad_u16"}, {10, Op::v_pk_add_u16, "v_pk_add_u16"}, {11, Op::v_pk_sub_u16, "v_pk_sub_u16"},
    {12, Op::v_pk_max_u16, "v_pk_max_u16"}, {13, Op::v_pk_min_u16, "v_pk_min_u16"}, {14, Op::v_pk_fma_f16, "v_pk_fma_f16"},
    {15, Op::v_pk_add_f16, "v_pk_add_f16"}, {16, Op::v_pk_mul_f16, "v_pk_mul_f16"},
    {17, Op::v_pk_min_f16, "v_pk_min_f16", g11}, {18, Op::v_pk_max_f16, "v_pk_max_f16", g11},
    {27, Op::v_pk_min_f16, "v_pk_min_num_f16", g12}, {28, Op::v_pk_max_f16, "v_pk_max_num_f16", g12},
    {32, Op::v_fma_mix_f32, "v_fma_mix_f32"}, {33, Op::v_fma_mixlo_f16, "v_fma_mixlo_f16"}, {34, Op::v_fma_mixhi_f16, "v_fma_mixhi_f16"},
};
// FLAT, GLOBAL and SCRATCH share one opcode space (RDNA3 §15.8; RDNA4 §14.8 VFLAT/VGLOBAL/VSCRATCH).
const Entry kFlat[] = {
    {16, Op::m_load_u8, "load_u8"}, {17, Op::m_load_i8, "load_i8"}, {18, Op::m_load_u16, "load_u16"},
    {19, Op::m_load_i16, "load_i16"}, {20, Op::m_load_b32, "load_b32"}, {21, Op::m_load_b64, "load_b64"},
    {22, Op::m_load_b96, "load_b96"}, {23, Op::m_load_b128, "load_b128"}, {24, Op::m_store_b8, "store_b8"},
    {25, Op::m_store_b16, "store_b16"}, {26, Op::m_store_b32, "store_b32"}, {27, Op::m_store_b64, "store_b64"},
    {28, Op::m_store_b96, "store_b96"}, {29, Op::m_store_b128, "store_b128"}, {51, Op::m_atomic_swap_b32, "atomic_swap_b32"},
    {52, Op::m_atomic_cmpswap_b32, "atomic_cmpswap_b32"}, {53, Op::m_atomic_add_u32, "atomic_add_u32"},
    {54, Op::m_atomic_sub_u32, "atomic_sub_u32"}, {56, Op::m_atomic_min_i32, "atomic_min_i32"},
    {57, Op::m_atomic_min_u32, "atomic_min_u32"}, {58, Op::m_atomic_max_i32, "atomic_max_i32"},
    {59, Op::m_atomic_max_u32, "atomic_max_u32"}, {60, Op::m_atomic_and_b32, "atomic_and_b32"},
    {61, Op::m_atomic_or_b32, "atomic_or_b32"}, {62, Op::m_atomic_xor_b32, "atomic_xor_b32"},
    {86, Op::m_atomic_add_f32, "atomic_add_f32"},
    // GC 12 VGLOBAL only (RDNA4 §14.8; llvm-mc-19 -mcpu=gfx1201: global_inv is 0xee0ac07c with scope:SCOPE_SE).
    {43, Op::global_inv, "global_inv", g12}, {44, Op::global_wb, "global_wb", g12}, {79, Op::global_wbinv, "global_wbinv", g12},
};

// GC 11 MUBUF: only the two cache invalidations LLVM emits at workgroup and agent fences (RDNA3
// §15.7; llvm-mc-19 -mcpu=gfx1100: buffer_gl0_inv is 0xe0ac0000 0x00000000). Buffer loads and
// stores need a buffer resource the HCQ ABI never builds.
const Entry kMubuf[] = {
    {43, Op::buffer_gl0_inv, "buffer_gl0_inv", g11}, {44, Op::buffer_gl1_inv, "buffer_gl1_inv", g11},
};

struct Tables {
    // [gen][opcode]
    std::array<std::array<Op, 128>, 2> sop2{}, sop1_lo{}, sopc{}, sopp{}, vop3p{};
    std::array<std::array<Op, 256>, 2> sop1{}, vop1{}, smem{}, ds{}, flat{}, mubuf{};
    std::array<std::array<Op, 64>, 2> vop2{};
    std::array<std::array<Op, 32>, 2> sopk{}, vopd{};
    std::array<std::array<Op, 1024>, 2> vop3{};
    std::array<const char*, size_t(Op::count_)> names{};

    template <size_t N, size_t M>
    void fill(std::array<std::array<Op, N>, 2>& t, const Entry (&entries)[M]) {
        for (const Entry& e : entries) {
            for (int g = 0; g < 2; ++g)
                if (e.gens & (1 << g)) t[size_t(g)][e.opcode] = e.op;
            if (names[size_t(e.op)] == nullptr) names[size_t(e.op)] = e.name;
        }
    }
    Tables() {
        fill(sop2, kSop2);
        fill(sop1, kSop1);
        fill(sopk, kSopk);
        fill(sopc, kSopc);
        fill(sopp, kSopp);
        fill(smem, kSmem);
        fill(vop1, kVop1);
        fill(vop2, kVop2);
        fill(vop3, kVop3);
        fill(vop3p, kVop3p);
        fill(vopd, kVopd);
        fill(ds, kDs);
        fill(flat, kFlat);
        fill(mubuf, kMubuf);
        for (int g = 0; g < 2; ++g) {
            for (int i = 0; i < 64; ++i)
                if (vop2[size_t(g)][size_t(i)] != Op::invalid) vop3[size_t(g)][256 + size_t(i)] = vop2[size_t(g)][size_t(i)];
            for (int i = 0; i < 128; ++i)
                if (vop1[size_t(g)][size_t(i)] != Op::invalid) vop3[size_t(g)][384 + size_t(i)] = vop1[size_t(g)][size_t(i)];
        }
        // VOP2 ops with no VOP3 form (their literal is part of the operation).
        for (int g = 0; g < 2; ++g) vop3[size_t(g)][256 + 44] = vop3[size_t(g)][256 + 45] = Op::invalid;
        names[size_t(Op::v_cmp)] = "v_cmp";
        names[size_t(Op::v_cmpx)] = "v_cmpx";
        names[size_t(Op::v_cmp_class_f32)] = "v_cmp_class_f32";
        names[size_t(Op::v_cmpx_class_f32)] = "v_cmpx_class_f32";
        names[size_t(Op::invalid)] = "(invalid)";
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

uint32_t bits(uint64_t w, unsigned hi, unsigned lo) { return uint32_t((w >> lo) & ((1ull << (hi - lo + 1)) - 1)); }
int32_t sext(uint32_t v, unsigned width) { return int32_t(v << (32 - width)) >> (32 - width); }

// The DS forms with two addresses take offset0 and offset1 as two 8-bit fields; the others one 16-bit offset.
bool ds_two_addresses(Op op) {
    switch (op) {
        case Op::ds_store_2addr_b32:
        case Op::ds_store_2addr_stride64_b32:
        case Op::ds_store_2addr_b64:
        case Op::ds_store_2addr_stride64_b64:
        case Op::ds_load_2addr_b32:
        case Op::ds_load_2addr_stride64_b32:
        case Op::ds_load_2addr_b64:
        case Op::ds_load_2addr_stride64_b64: return true;
        default: return false;
    }
}

Unit unit_of(Op op) {
    if (op >= Op::buffer_gl0_inv && op <= Op::global_wbinv) return Unit::other;
    if (op >= Op::s_load_b32 && op <= Op::s_load_b512) return Unit::smem;
    if (op >= Op::s_nop && op <= Op::s_wait_storecnt_dscnt) {
        if (op >= Op::s_branch && op <= Op::s_cbranch_execnz) return Unit::branch;
        return Unit::other;
    }
    if (op < Op::s_nop) return Unit::salu;
    if (op >= Op::ds_add_u32 && op <= Op::ds_load_b128) return Unit::lds;
    if (op >= Op::m_load_u8 && op <= Op::m_load_b128) return Unit::vmem_load;
    if (op >= Op::m_store_b8) return Unit::vmem_store;  // stores and atomics
    return Unit::valu;
}

// VOPC opcode → type and condition (RDNA3 §15.3.3: f16 0-15, f32 16-31, f64 32-47 with the 16
// float conditions; i16 48, u16 56, i32 64, u32 72, i64 80, u64 88 with f,lt,eq,le,gt,ne,ge,t;
// class 125-127; +128: the v_cmpx_ form). GC 12 dropped the always-false/true forms.
bool decode_cmp(Gen gen, uint32_t opcode, Inst& in) {
    const bool x = opcode & 0x80;
    const uint32_t base = opcode & 0x7f;
    if (base == 126) {
        in.op = x ? Op::v_cmpx_class_f32 : Op::v_cmp_class_f32;
        return true;
    }
    static constexpr CmpCond kInt[] = {CmpCond::f, CmpCond::lt, CmpCond::eq, CmpCond::le,
                                       CmpCond::gt, CmpCond::ne, CmpCond::ge, CmpCond::t};
    if (base < 48) {
        in.cmp_type = base < 16 ? CmpType::f16 : base < 32 ? CmpType::f32 : CmpType::f64;
        in.cmp_cond = CmpCond(base % 16);
    } else if (base < 96) {
        static constexpr CmpType kTypes[] = {CmpType::i16, CmpType::u16, CmpType::i32, CmpType::u32, CmpType::i64, CmpType::u64};
        in.cmp_type = kTypes[(base - 48) / 8];
        in.cmp_cond = kInt[(base - 48) % 8];
    } else {
        return false;
    }
    if (gen == Gen::gfx12 && (in.cmp_cond == CmpCond::f || in.cmp_cond == CmpCond::t)) return false;
    if (in.cmp_type == CmpType::f64) return false;  // no f64 in the model
    in.op = x ? Op::v_cmpx : Op::v_cmp;
    return true;
}

// Whether any VALU source is the literal (255), and the literal then follows.
void take_literal(Inst& in, std::span<const uint32_t> w, unsigned at, std::initializer_list<uint16_t> srcs) {
    for (uint16_t s : srcs)
        if (s == 255) {
            in.has_literal = true;
            if (w.size() > at) in.literal = w[at];
            in.words = uint8_t(at + 1);
            return;
        }
}

// The second dword VOP3 and VOP3P share: src0 [40:32], src1 [49:41], src2 [58:50], neg [63:61];
// then the literal dword when a source is 255. false: a source selects DPP (not modelled).
bool take_vop3_sources(Inst& in, uint64_t q, std::span<const uint32_t> w) {
    in.src0 = uint16_t(bits(q, 40, 32));
    in.src1 = uint16_t(bits(q, 49, 41));
    in.src2 = uint16_t(bits(q, 58, 50));
    in.neg = uint8_t(bits(q, 63, 61));
    for (uint16_t s : {in.src0, in.src1, in.src2})
        if (s == 0xfa || s == 0xe9 || s == 0xea) return false;
    take_literal(in, w, 2, {in.src0, in.src1, in.src2});
    return true;
}

}  // namespace

const char* encoding_name(Encoding e) {
    static constexpr const char* kNames[] = {"SOP1", "SOP2", "SOPK", "SOPC", "SOPP", "SMEM", "VOP1", "VOP2",
                                             "VOPC", "VOP3", "VOP3P", "VOPD", "DS", "FLAT", "GLOBAL", "SCRATCH", "MUBUF"};
    return kNames[size_t(e)];
}

const char* op_name(Op op) {
    const char* n = size_t(op) < size_t(Op::count_) ? tables().names[size_t(op)] : nullptr;
    return n != nullptr ? n : "(unnamed)";
}

std::optional<Inst> decode(Gen gen, std::span<const uint32_t> w, std::string& why) {
    const Tables& t = tables();
    const size_t g = gen == Gen::gfx11 ? 0 : 1;
    if (w.empty()) {
        why = "no instruction word (the code ends)";
        return std::nullopt;
    }
    const uint32_t d = w[0];
    const uint64_t q = w.size() > 1 ? (uint64_t{w[1]} << 32) | d : d;
    Inst in;
    auto unknown = [&](const char* enc, uint32_t opcode) {
        why = fmt::format("{} opcode {} ({:#x}) is not an instruction the model executes (word {:#010x})", enc, opcode, opcode, d);
        return std::nullopt;
    };
    auto need = [&](unsigned n) {
        if (w.size() >= n) return true;
        why = fmt::format("a {}-dword instruction is cut off by the end of the code (word {:#010x})", n, d);
        return false;
    };
    auto finish = [&]() -> std::optional<Inst> {
        if (in.words > w.size()) {
            why = fmt::format("the {} instruction's literal is cut off by the end of the code", op_name(in.op));
            return std::nullopt;
        }
        in.unit = unit_of(in.op);
        return in;
    };

    // Scalar formats (RDNA3 §15.1): SOP1 0b101111101, SOPC 0b101111110, SOPP 0b101111111 in [31:23];
    // SOPK 0b1011 in [31:28]; SOP2 0b10 in [31:30].
    if (bits(d, 31, 23) == 0x17d) {
        in.enc = Encoding::sop1;
        in.opcode = uint16_t(bits(d, 15, 8));
        in.op = t.sop1[g][in.opcode];
        if (in.op == Op::invalid) return unknown("SOP1", in.opcode);
        in.src0 = uint16_t(bits(d, 7, 0));
        in.dst = uint16_t(bits(d, 22, 16));
        take_literal(in, w, 1, {in.src0});
        return finish();
    }
    if (bits(d, 31, 23) == 0x17e) {
        in.enc = Encoding::sopc;
        in.opcode = uint16_t(bits(d, 22, 16));
        in.op = t.sopc[g][in.opcode];
        if (in.op == Op::invalid) return unknown("SOPC", in.opcode);
        in.src0 = uint16_t(bits(d, 7, 0));
        in.src1 = uint16_t(bits(d, 15, 8));
        if (in.op == Op::s_cmp_f32) in.cmp_cond = CmpCond(in.opcode - 64);
        take_literal(in, w, 1, {in.src0, in.src1});
        return finish();
    }
    if (bits(d, 31, 23) == 0x17f) {
        in.enc = Encoding::sopp;
        in.opcode = uint16_t(bits(d, 22, 16));
        in.op = t.sopp[g][in.opcode];
        if (in.op == Op::invalid) return unknown("SOPP", in.opcode);
        in.simm = sext(bits(d, 15, 0), 16);
        return finish();
    }
    if (bits(d, 31, 28) == 0xb) {
        in.enc = Encoding::sopk;
        in.opcode = uint16_t(bits(d, 27, 23));
        in.op = t.sopk[g][in.opcode];
        if (in.op == Op::invalid) return unknown("SOPK", in.opcode);
        in.dst = uint16_t(bits(d, 22, 16));
        in.simm = sext(bits(d, 15, 0), 16);
        return finish();
    }
    if (bits(d, 31, 30) == 0x2) {
        in.enc = Encoding::sop2;
        in.opcode = uint16_t(bits(d, 29, 23));
        in.op = t.sop2[g][in.opcode];
        if (in.op == Op::invalid) return unknown("SOP2", in.opcode);
        in.src0 = uint16_t(bits(d, 7, 0));
        in.src1 = uint16_t(bits(d, 15, 8));
        in.dst = uint16_t(bits(d, 22, 16));
        take_literal(in, w, 1, {in.src0, in.src1});
        return finish();
    }
    // SMEM 0b111101 in [31:26] (RDNA3 §15.2: op [25:18], offset [52:32] signed 21 bits; RDNA4 §14.2:
    // op [18:13], offset [55:32] signed 24 bits); sbase [5:0] in SGPR pairs, sdata [12:6], soffset [63:57].
    if (bits(d, 31, 26) == 0x3d) {
        if (!need(2)) return std::nullopt;
        in.enc = Encoding::smem;
        in.words = 2;
        in.opcode = uint16_t(gen == Gen::gfx11 ? bits(d, 25, 18) : bits(d, 18, 13));
        in.op = t.smem[g][in.opcode];
        if (in.op == Op::invalid) return unknown("SMEM", in.opcode);
        in.sbase = uint16_t(bits(d, 5, 0) << 1);
        in.dst = uint16_t(bits(d, 12, 6));
        in.offset = gen == Gen::gfx11 ? sext(bits(q, 52, 32), 21) : sext(bits(q, 55, 32), 24);
        in.soffset = uint16_t(bits(q, 63, 57));
        return finish();
    }
    // VOP1 0b0111111 [31:25]; VOPC 0b0111110 [31:25]; VOP2 bit 31 = 0 (RDNA3 §15.3).
    if (bits(d, 31, 25) == 0x3f) {
        in.enc = Encoding::vop1;
        in.opcode = uint16_t(bits(d, 16, 9));
        in.op = t.vop1[g][in.opcode];
        if (in.op == Op::invalid) return unknown("VOP1", in.opcode);
        in.src0 = uint16_t(bits(d, 8, 0));
        in.dst = uint16_t(bits(d, 24, 17));
        if (in.src0 == 0xfa || in.src0 == 0xe9 || in.src0 == 0xea) return unknown("VOP1 with DPP", in.opcode);
        take_literal(in, w, 1, {in.src0});
        return finish();
    }
    if (bits(d, 31, 25) == 0x3e) {
        in.enc = Encoding::vopc;
        in.opcode = uint16_t(bits(d, 24, 17));
        if (!decode_cmp(gen, in.opcode, in)) return unknown("VOPC", in.opcode);
        in.src0 = uint16_t(bits(d, 8, 0));
        in.src1 = uint16_t(256 + bits(d, 16, 9));
        in.sdst = 106;  // VCC
        if (in.src0 == 0xfa || in.src0 == 0xe9 || in.src0 == 0xea) return unknown("VOPC with DPP", in.opcode);
        take_literal(in, w, 1, {in.src0});
        return finish();
    }
    if (bits(d, 31, 31) == 0) {
        in.enc = Encoding::vop2;
        in.opcode = uint16_t(bits(d, 30, 25));
        in.op = t.vop2[g][in.opcode];
        if (in.op == Op::invalid) return unknown("VOP2", in.opcode);
        in.src0 = uint16_t(bits(d, 8, 0));
        in.src1 = uint16_t(256 + bits(d, 16, 9));
        in.dst = uint16_t(bits(d, 24, 17));
        if (in.src0 == 0xfa || in.src0 == 0xe9 || in.src0 == 0xea) return unknown("VOP2 with DPP", in.opcode);
        if (in.op == Op::v_fmamk_f32 || in.op == Op::v_fmaak_f32) {
            in.has_literal = true;
            in.words = 2;
            if (w.size() > 1) in.literal = w[1];
        } else {
            take_literal(in, w, 1, {in.src0});
        }
        // VOP2 carry ops read and write VCC implicitly.
        if (in.op == Op::v_add_co_ci_u32 || in.op == Op::v_sub_co_ci_u32 || in.op == Op::v_subrev_co_ci_u32) {
            in.src2 = 106;
            in.sdst = 106;
        }
        if (in.op == Op::v_cndmask_b32) in.src2 = 106;
        return finish();
    }
    // VOP3 0b110101 [31:26] (RDNA3 §15.3.4): vdst [7:0], abs [10:8] (or sdst [14:8] for the VOP3SD
    // forms), opsel [14:11], clamp [15], op [25:16]; src0 [40:32], src1 [49:41], src2 [58:50],
    // omod [60:59], neg [63:61].
    if (bits(d, 31, 26) == 0x35) {
        if (!need(2)) return std::nullopt;
        in.enc = Encoding::vop3;
        in.words = 2;
        in.opcode = uint16_t(bits(d, 25, 16));
        if (in.opcode < 256) {
            if (!decode_cmp(gen, in.opcode, in)) return unknown("VOP3 (VOPC)", in.opcode);
            in.sdst = uint16_t(bits(d, 7, 0));
        } else {
            in.op = t.vop3[g][in.opcode];
            if (in.op == Op::invalid) return unknown("VOP3", in.opcode);
            in.dst = uint16_t(bits(d, 7, 0));
        }
        const bool sd = in.op == Op::v_div_scale_f32 || in.op == Op::v_mad_u64_u32 || in.op == Op::v_mad_i64_i32 ||
                        in.op == Op::v_add_co_u32 || in.op == Op::v_sub_co_u32 || in.op == Op::v_subrev_co_u32 ||
                        in.op == Op::v_add_co_ci_u32 || in.op == Op::v_sub_co_ci_u32 || in.op == Op::v_subrev_co_ci_u32;
        if (sd) {
            in.sdst = uint16_t(bits(d, 14, 8));
        } else {
            in.abs = uint8_t(bits(d, 10, 8));
            in.opsel = uint8_t(bits(d, 14, 11));
        }
        in.clamp = bits(d, 15, 15);
        in.omod = uint8_t(bits(q, 60, 59));
        if (!take_vop3_sources(in, q, w)) return unknown("VOP3 with DPP", in.opcode);
        return finish();
    }
    // VOP3P 0b11001100 [31:24] (RDNA3 §15.3.6): vdst [7:0], neg_hi [10:8], opsel [13:11], opsel_hi[2]
    // [14], clamp [15], op [22:16]; src0 [40:32], src1 [49:41], src2 [58:50], opsel_hi[1:0] [60:59],
    // neg [63:61].
    if (bits(d, 31, 24) == 0xcc) {
        if (!need(2)) return std::nullopt;
        in.enc = Encoding::vop3p;
        in.words = 2;
        in.opcode = uint16_t(bits(d, 22, 16));
        in.op = t.vop3p[g][in.opcode];
        if (in.op == Op::invalid) return unknown("VOP3P", in.opcode);
        in.dst = uint16_t(bits(d, 7, 0));
        in.neg_hi = uint8_t(bits(d, 10, 8));
        in.opsel = uint8_t(bits(d, 13, 11));
        in.opsel_hi = uint8_t(bits(d, 14, 14) << 2 | bits(q, 60, 59));
        in.clamp = bits(d, 15, 15);
        if (!take_vop3_sources(in, q, w)) return unknown("VOP3P with DPP", in.opcode);
        return finish();
    }
    // VOPD 0b110010 [31:26] (RDNA3 §15.3.7): src0X [8:0], vsrc1X [16:9], opY [21:17], opX [25:22];
    // src0Y [40:32], vsrc1Y [48:41], vdstY [55:49] (its low bit is the inverse of vdstX's),
    // vdstX [63:56]; a literal follows when a source is 255 or the operation is fmaak/fmamk.
    if (bits(d, 31, 26) == 0x32) {
        if (!need(2)) return std::nullopt;
        in.enc = Encoding::vopd;
        in.words = 2;
        const uint32_t opx = bits(d, 25, 22), opy = bits(d, 21, 17);
        in.opcode = uint16_t(opx << 5 | opy);
        in.op = opx < 12 ? t.vopd[g][opx] : Op::invalid;
        in.op_y = opy < 19 ? t.vopd[g][opy] : Op::invalid;
        if (in.op == Op::invalid) return unknown("VOPD OPX", opx);
        if (in.op_y == Op::invalid) return unknown("VOPD OPY", opy);
        in.src0 = uint16_t(bits(d, 8, 0));
        in.src1 = uint16_t(256 + bits(d, 16, 9));
        in.src0_y = uint16_t(bits(q, 40, 32));
        in.src1_y = uint16_t(256 + bits(q, 48, 41));
        in.dst = uint16_t(bits(q, 63, 56));
        in.dst_y = uint16_t(bits(q, 55, 49) << 1 | ((in.dst & 1) ^ 1));
        const bool lit = in.op == Op::v_fmaak_f32 || in.op == Op::v_fmamk_f32 || in.op_y == Op::v_fmaak_f32 ||
                         in.op_y == Op::v_fmamk_f32 || in.src0 == 255 || in.src0_y == 255;
        if (lit) {
            in.has_literal = true;
            in.words = 3;
            if (w.size() > 2) in.literal = w[2];
        }
        return finish();
    }
    // DS 0b110110 [31:26] (RDNA3 §15.6): offset0 [7:0], offset1 [15:8], op [25:18]; addr [39:32],
    // data0 [47:40], data1 [55:48], vdst [63:56].
    if (bits(d, 31, 26) == 0x36) {
        if (!need(2)) return std::nullopt;
        in.enc = Encoding::ds;
        in.words = 2;
        in.opcode = uint16_t(bits(d, 25, 18));
        in.op = t.ds[g][in.opcode];
        if (in.op == Op::invalid) return unknown("DS", in.opcode);
        if (bits(d, 17, 17)) return unknown("DS with GDS", in.opcode);
        in.offset = int32_t(bits(d, 7, 0));
        in.offset1 = int32_t(bits(d, 15, 8));
        if (!ds_two_addresses(in.op)) in.offset |= in.offset1 << 8;
        in.addr = uint16_t(bits(q, 39, 32));
        in.data0 = uint16_t(bits(q, 47, 40));
        in.data1 = uint16_t(bits(q, 55, 48));
        in.dst = uint16_t(bits(q, 63, 56));
        return finish();
    }
    // GC 11 MUBUF 0b111000 [31:26] (RDNA3 §15.7): op [25:18]; two dwords.
    if (gen == Gen::gfx11 && bits(d, 31, 26) == 0x38) {
        if (!need(2)) return std::nullopt;
        in.enc = Encoding::mubuf;
        in.words = 2;
        in.opcode = uint16_t(bits(d, 25, 18));
        in.op = t.mubuf[g][in.opcode];
        if (in.op == Op::invalid) return unknown("MUBUF", in.opcode);
        return finish();
    }
    // GC 11 FLAT/GLOBAL/SCRATCH 0b110111 [31:26] (RDNA3 §15.8): offset [12:0] signed, glc [14],
    // seg [17:16] (0 flat, 1 scratch, 2 global), op [24:18]; addr [39:32], data [47:40],
    // saddr [54:48] (0x7c: none), vdst [63:56].
    if (gen == Gen::gfx11 && bits(d, 31, 26) == 0x37) {
        if (!need(2)) return std::nullopt;
        const uint32_t seg = bits(d, 17, 16);
        in.enc = seg == 0 ? Encoding::flat : seg == 1 ? Encoding::scratch : Encoding::global;
        in.words = 2;
        in.opcode = uint16_t(bits(d, 24, 18));
        in.op = seg <= 2 ? t.flat[g][in.opcode] : Op::invalid;
        if (in.op == Op::invalid) return unknown(seg <= 2 ? encoding_name(in.enc) : "FLAT segment 3", in.opcode);
        in.offset = sext(bits(d, 12, 0), 13);
        in.glc = bits(d, 14, 14);
        in.addr = uint16_t(bits(q, 39, 32));
        in.data0 = uint16_t(bits(q, 47, 40));
        in.saddr = uint16_t(bits(q, 54, 48));
        in.dst = uint16_t(bits(q, 63, 56));
        return finish();
    }
    // GC 12 VFLAT/VSCRATCH/VGLOBAL 0b111011 [31:26], seg [25:24] (RDNA4 §14.8): saddr [6:0], op [21:14];
    // vdst [39:32], th/scope [54:50]... (glc = th bit 0 for atomics), vsrc [62:55]; vaddr [71:64],
    // offset [95:72] signed 24 bits.
    if (gen == Gen::gfx12 && bits(d, 31, 26) == 0x3b) {
        if (!need(3)) return std::nullopt;
        const uint32_t seg = bits(d, 25, 24);
        in.enc = seg == 0 ? Encoding::flat : seg == 1 ? Encoding::scratch : Encoding::global;
        in.words = 3;
        in.opcode = uint16_t(bits(d, 21, 14));
        in.op = seg <= 2 ? t.flat[g][in.opcode] : Op::invalid;
        if (in.op == Op::invalid) return unknown(seg <= 2 ? encoding_name(in.enc) : "VFLAT segment 3", in.opcode);
        if (in.op >= Op::global_inv && in.op <= Op::global_wbinv && seg != 2) return unknown(encoding_name(in.enc), in.opcode);
        in.saddr = uint16_t(bits(d, 6, 0));
        in.dst = uint16_t(bits(q, 39, 32));
        in.glc = bits(q, 52, 52);
        in.data0 = uint16_t(bits(q, 62, 55));
        in.addr = uint16_t(bits(w[2], 7, 0));
        in.offset = sext(bits(w[2], 31, 8), 24);
        return finish();
    }
    why = fmt::format("word {:#010x} is no encoding the model decodes", d);
    return std::nullopt;
}

}  // namespace baregpu::sim::amdgpu::rdna
