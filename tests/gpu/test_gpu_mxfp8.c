/* GPU test: the CUDA MXFP8 quantizer equals the CPU one byte for byte
 * (data, E8M0 scales compact and swizzled, 1-D and 32x32, bf16 and fp32
 * inputs, E4M3 and E5M2), and so does dequantization. ~1e8 elements. */
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
#define MX(fmt_, two_d_, layout_, usage_) \
    {.kind = TX_QKIND_MXFP8, .fmt = fmt_, .block_2d = two_d_, .scale_layout = layout_, .usage = usage_}
#define CPT TX_SCALE_COMPACT
#define SWZ TX_SCALE_SWIZZLED
#define RW TX_QUSAGE_ROWWISE
#define CW TX_QUSAGE_COLUMNWISE

static const tg_case cases[] = {
    {"mxfp8_e4m3_1d_compact_bf16_specials", 4096, 8192, BF16, TG_SPECIALS, 1, 0, MX(E4, false, CPT, 0)},
    {"mxfp8_e4m3_1d_swizzled_bf16", 4096, 4096, BF16, TG_PLAIN, 2, 0, MX(E4, false, SWZ, 0)},
    {"mxfp8_e5m2_1d_compact_bf16_specials", 2048, 4096, BF16, TG_SPECIALS, 3, 0, MX(E5, false, CPT, 0)},
    {"mxfp8_e4m3_2d_swizzled_fp32_specials", 2048, 4096, F32, TG_SPECIALS, 4, 0, MX(E4, true, SWZ, 0)},
    {"mxfp8_e4m3_2d_compact_bf16_odd_tiles", 4128, 1056, BF16, TG_SPECIALS, 5, 0, MX(E4, true, CPT, 0)},
    {"mxfp8_e5m2_1d_swizzled_fp32_odd_tiles", 1056, 4128, F32, TG_PLAIN, 6, 0, MX(E5, false, SWZ, 0)},
    {"mxfp8_e4m3_2d_swizzled_bf16", 2048, 8192, BF16, TG_PLAIN, 7, 0, MX(E4, true, SWZ, 0)},
    {"mxfp8_e4m3_1d_compact_all_bf16_patterns", 4096, 256, BF16, 0, 0, 1, MX(E4, false, CPT, 0)},
    {"mxfp8_e5m2_2d_swizzled_all_bf16_patterns", 4096, 256, BF16, 0, 0, 1, MX(E5, true, SWZ, 0)},
    {"mxfp8_e4m3_1d_rowwise_only_tiny", 1024, 2048, BF16, TG_TINY | TG_SPECIALS, 8, 0, MX(E4, false, SWZ, RW)},
    {"mxfp8_e5m2_1d_columnwise_only_tiny_fp32", 2048, 1024, F32, TG_TINY, 9, 0, MX(E5, false, CPT, CW)},
    /* whole 128 x 128 tiles take the block-tile kernel; with specials its
     * NaN tiles go through the careful path, here for columnwise only */
    {"mxfp8_e4m3_1d_columnwise_only_swizzled_specials", 1024, 1024, BF16, TG_SPECIALS, 12, 0, MX(E4, false, SWZ, CW)},
    {"mxfp8_e4m3_small_32x32", 32, 32, BF16, TG_SPECIALS, 10, 0, MX(E4, false, SWZ, 0)},
    {"mxfp8_e4m3_2d_small_96x160", 96, 160, F32, TG_SPECIALS, 11, 0, MX(E4, true, CPT, 0)},
};

#include "tests/gpu/gpu_main.h"
TG_MAIN("test_gpu_mxfp8", cases)
