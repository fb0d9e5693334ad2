/* GPU test: the CUDA NVFP4 quantizer equals the CPU one byte for byte:
 * packed E2M1 data, E4M3 block scales (compact and swizzled), global
 * amaxes; round-to-nearest and stochastic rounding (Philox), 16x16 2-D,
 * Hadamard-transformed columnwise; dequantization too. Shapes down to
 * the planner's rule (cols % 16; rows % 16 for a columnwise or 2-D copy,
 * any rows rowwise). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

#include "tests/gpu/gpu_compare.h"
#include "tests/gpu/gpu_harness.h"

#define BF16 TEEXEC_DTYPE_BFLOAT16
#define F32 TEEXEC_DTYPE_FLOAT
#define FP4(two_d_, rht_, sr_, layout_, usage_)                                               \
    {.kind = TX_QKIND_NVFP4, .block_2d = two_d_, .rht = rht_, .stochastic_rounding = sr_,    \
     .seed = 0x1234567890abcdefull, .sr_offset = 77, .scale_layout = layout_, .usage = usage_}
#define CPT TX_SCALE_COMPACT
#define SWZ TX_SCALE_SWIZZLED

static const tg_case cases[] = {
    {"nvfp4_1d_rn_compact_bf16", 4096, 8192, BF16, TG_PLAIN, 61, 0, FP4(false, false, false, CPT, 0)},
    {"nvfp4_1d_rht_sr_swizzled_bf16", 4096, 4096, BF16, TG_PLAIN, 62, 0, FP4(false, true, true, SWZ, 0)},
    {"nvfp4_2d_rn_swizzled_bf16_specials", 2048, 4096, BF16, TG_SPECIALS, 63, 0, FP4(true, false, false, SWZ, 0)},
    {"nvfp4_1d_sr_compact_fp32_specials", 2048, 4096, F32, TG_SPECIALS, 64, 0, FP4(false, false, true, CPT, 0)},
    {"nvfp4_1d_rht_rn_fp32", 2048, 2048, F32, TG_PLAIN, 65, 0, FP4(false, true, false, CPT, 0)},
    {"nvfp4_2d_sr_compact_bf16", 2048, 4096, BF16, TG_PLAIN, 66, 0, FP4(true, false, true, CPT, 0)},
    {"nvfp4_1d_rht_sr_bf16_specials", 4096, 2048, BF16, TG_SPECIALS, 67, 0, FP4(false, true, true, SWZ, 0)},
    {"nvfp4_1d_rn_all_bf16_patterns", 4096, 256, BF16, 0, 0, 1, FP4(false, false, false, CPT, 0)},
    {"nvfp4_1d_rn_tiny_bf16", 1024, 2048, BF16, TG_TINY, 68, 0, FP4(false, false, false, SWZ, 0)},
    {"nvfp4_1d_rht_columnwise_only", 1024, 2048, BF16, TG_PLAIN, 69, 0, FP4(false, true, false, CPT, TX_QUSAGE_COLUMNWISE)},
    {"nvfp4_2d_rowwise_only_fp32", 1024, 1024, F32, TG_SPECIALS, 70, 0, FP4(true, false, false, SWZ, TX_QUSAGE_ROWWISE)},
    /* shapes that are multiples of 16 but not 32 (the planner's rule): a
     * last tile of 16 rows, columns past a 256-column tile's end */
    {"nvfp4_1d_rn_rows48_cols80_bf16", 48, 80, BF16, TG_PLAIN, 72, 0, FP4(false, false, false, CPT, 0)},
    {"nvfp4_1d_rht_sr_rows16_fp32", 16, 48, F32, TG_SPECIALS, 73, 0, FP4(false, true, true, SWZ, 0)},
    {"nvfp4_2d_rn_rows80_cols272_bf16", 80, 272, BF16, TG_PLAIN, 74, 0, FP4(true, false, false, CPT, 0)},
    {"nvfp4_2d_sr_rows16_swizzled_bf16", 16, 16, BF16, TG_PLAIN, 75, 0, FP4(true, false, true, SWZ, 0)},
    /* rowwise only: any row count */
    {"nvfp4_1d_rn_rowwise_rows7_bf16", 7, 32, BF16, TG_PLAIN, 76, 0, FP4(false, false, false, CPT, TX_QUSAGE_ROWWISE)},
    {"nvfp4_1d_sr_rowwise_rows33_fp32", 33, 64, F32, TG_SPECIALS, 77, 0, FP4(false, false, true, SWZ, TX_QUSAGE_ROWWISE)},
    {"nvfp4_given_amax_bf16",
     1024, 4096, BF16, TG_PLAIN, 71, 0,
     {.kind = TX_QKIND_NVFP4, .use_given_amax = true, .given_amax_row = 1000.0f, .given_amax_col = 3.0f}},
};

#include "tests/gpu/gpu_main.h"
TG_MAIN("test_gpu_nvfp4", cases)
