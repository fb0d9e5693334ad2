/* GPU test: the CUDA per-tensor FP8 quantizers (current and delayed
 * scaling) equal the CPU ones byte for byte: rowwise and transposed
 * columnwise data, scale, scale_inv and amax; dequantization too. */
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
#define CUR(fmt_, pow2_, eps_, usage_) \
    {.kind = TX_QKIND_FP8_TENSOR, .fmt = fmt_, .power_2_scale = pow2_, .amax_epsilon = eps_, .usage = usage_}
#define DEL(fmt_, scale_) \
    {.kind = TX_QKIND_FP8_TENSOR, .fmt = fmt_, .use_given_scale = true, .given_scale = scale_}

static const tg_case cases[] = {
    {"fp8_current_e4m3_bf16", 4096, 8192, BF16, TG_PLAIN, 21, 0, CUR(E4, false, 0.0f, 0)},
    {"fp8_current_e5m2_pow2_bf16", 4096, 4096, BF16, TG_PLAIN, 22, 0, CUR(E5, true, 0.0f, 0)},
    {"fp8_current_e4m3_fp32_specials", 2048, 4096, F32, TG_SPECIALS, 23, 0, CUR(E4, false, 0.0f, 0)},
    {"fp8_delayed_e4m3_bf16_specials", 4096, 4096, BF16, TG_SPECIALS, 24, 0, DEL(E4, 3.5f)},
    {"fp8_delayed_e5m2_fp32", 2000, 2008, F32, TG_PLAIN, 25, 0, DEL(E5, 0.0078125f)},
    {"fp8_delayed_e4m3_all_bf16_patterns", 4096, 256, BF16, 0, 0, 1, DEL(E4, 1.0f)},
    {"fp8_delayed_e5m2_all_bf16_patterns", 4096, 256, BF16, 0, 0, 1, DEL(E5, 0.37f)},
    {"fp8_current_e4m3_tiny_eps", 1024, 4096, BF16, TG_TINY, 26, 0, CUR(E4, false, 1e-30f, 0)},
    {"fp8_current_e4m3_rowwise_only", 3000, 1000, BF16, TG_PLAIN, 27, 0, CUR(E4, true, 0.0f, TX_QUSAGE_ROWWISE)},
    {"fp8_current_e5m2_columnwise_only", 1008, 3000, F32, TG_PLAIN, 28, 0, CUR(E5, false, 0.0f, TX_QUSAGE_COLUMNWISE)},
    {"fp8_current_e4m3_small_odd", 48, 24, BF16, TG_SPECIALS, 29, 0, CUR(E4, false, 0.0f, 0)},
};

#include "tests/gpu/gpu_main.h"
TG_MAIN("test_gpu_fp8", cases)
