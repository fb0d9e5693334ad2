/* GPU test: the CUDA FP8 block quantizer (1x128 / 128x128, FP32 scales)
 * equals the CPU one byte for byte, data and scale_inv, partial tiles
 * included; dequantization too. */
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
#define E4 TEEXEC_DTYPE_FLOAT8E4M3FN
#define E5 TEEXEC_DTYPE_FLOAT8E5M2
#define BLK(fmt_, two_d_, pow2_, eps_, usage_)                                                 \
    {.kind = TX_QKIND_FP8_BLOCK, .fmt = fmt_, .block_2d = two_d_, .power_2_scale = pow2_, \
     .amax_epsilon = eps_, .usage = usage_}

static const tg_case cases[] = {
    {"block_1d_e4m3_pow2_bf16", 4096, 8192, BF16, TG_PLAIN, 41, 0, BLK(E4, false, true, 0.0f, 0)},
    {"block_2d_e4m3_pow2_bf16_specials", 4096, 4096, BF16, TG_SPECIALS, 42, 0, BLK(E4, true, true, 0.0f, 0)},
    {"block_1d_e4m3_fp32_specials", 2048, 4096, F32, TG_SPECIALS, 43, 0, BLK(E4, false, false, 0.0f, 0)},
    {"block_1d_e5m2_bf16_partial_tiles", 4112, 1032, BF16, TG_SPECIALS, 44, 0, BLK(E5, false, false, 0.0f, 0)},
    {"block_2d_e4m3_fp32_partial_tiles_eps", 1040, 4104, F32, TG_PLAIN, 45, 0, BLK(E4, true, false, 1e-3f, 0)},
    {"block_1d_e4m3_pow2_bf16_tiny", 4096, 4096, BF16, TG_TINY | TG_SPECIALS, 46, 0, BLK(E4, false, true, 0.0f, 0)},
    {"block_1d_e4m3_all_bf16_patterns", 4096, 256, BF16, 0, 0, 1, BLK(E4, false, false, 0.0f, 0)},
    {"block_2d_e5m2_rowwise_only", 2048, 2048, BF16, TG_PLAIN, 47, 0, BLK(E5, true, true, 0.0f, TX_QUSAGE_ROWWISE)},
    {"block_1d_e4m3_columnwise_only", 2048, 2048, F32, TG_PLAIN, 48, 0, BLK(E4, false, true, 0.0f, TX_QUSAGE_COLUMNWISE)},
    {"block_2d_e4m3_small_odd", 48, 40, BF16, TG_SPECIALS, 49, 0, BLK(E4, true, false, 0.0f, 0)},
};

#include "tests/gpu/gpu_main.h"
TG_MAIN("test_gpu_block", cases)
