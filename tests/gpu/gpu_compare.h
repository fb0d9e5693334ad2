/*
 * gpu_compare.h - runs one quantizer case on the CPU reference
 * (tx_quantize / tx_dequantize) and on the GPU (the kernels/cuda quantizers), and
 * compares every array byte for byte: rowwise and columnwise data, scales
 * (in the configured layout), FP8 scale/scale_inv/amax, NVFP4 global
 * amaxes, and both usages dequantized. Records the result (gpu_harness.h)
 * and fails the cmocka test on any difference. Test code; not thread-safe.
 */
#ifndef TEEXEC_TESTS_GPU_COMPARE_H
#define TEEXEC_TESTS_GPU_COMPARE_H

#include "kernels/cpu/qtensor.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tg_case {
    const char *name;
    size_t rows, cols;
    teexec_dtype src;     /* BFLOAT16 or FLOAT */
    int flags;            /* TG_* generator flags */
    uint64_t seed;
    int all_bf16;         /* input = every bf16 pattern, repeated */
    tx_quant_config cfg;
} tg_case;

/* Returns the number of elements processed (for the suite's total). */
size_t tg_run_case(const tg_case *c);

#endif
