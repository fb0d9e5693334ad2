/*
 * quant_config.h - what a quantized tensor is and how to quantize one: the
 * kinds (FP8 per-tensor, FP8 block, MXFP8, NVFP4), the usages (rowwise,
 * columnwise), the scale layouts and the quantizer configuration.
 *
 * These are plain facts shared by the layers: the planner decides them per
 * GEMM operand (planner/quant_plan.c), the executors pass them to the
 * quantizers (kernels/cpu/qtensor.h and the CUDA hand-off kernels), which
 * implement them. They live in base/ so that the planner needs nothing from
 * kernels/ to name them. Types only; nothing to own or lock.
 */
#ifndef TEEXEC_BASE_QUANT_CONFIG_H
#define TEEXEC_BASE_QUANT_CONFIG_H

#include "teexec/teexec.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum tx_qkind {
    TX_QKIND_FP8_TENSOR = 1, /* fp8-delayed and fp8-current */
    TX_QKIND_FP8_BLOCK = 2,  /* fp8-block: FP32 scale per 1x128 / 128x128 */
    TX_QKIND_MXFP8 = 3,      /* E8M0 scale per 32 (1x32 / 32x1 / 32x32) */
    TX_QKIND_NVFP4 = 4       /* E2M1 data, E4M3 scale per 16, FP32 global */
} tx_qkind;

enum {
    TX_QUSAGE_ROWWISE = 1u,
    TX_QUSAGE_COLUMNWISE = 2u
};

typedef enum tx_scale_layout {
    TX_SCALE_COMPACT = 0,
    TX_SCALE_SWIZZLED = 1 /* cuBLAS 128x4 tiles (MXFP8, NVFP4) */
} tx_scale_layout;

/* How to quantize. Zero-initialise and set what you need. */
typedef struct tx_quant_config {
    tx_qkind kind;
    teexec_dtype fmt;          /* FP8 kinds: FLOAT8E4M3FN or FLOAT8E5M2;
                                  NVFP4: FLOAT4E2M1 (0 means the default) */
    unsigned usage;            /* TX_QUSAGE_* (0 means both) */
    bool block_2d;             /* FP8_BLOCK 128x128, MXFP8 32x32, NVFP4 16x16 */
    tx_scale_layout scale_layout;
    /* FP8_TENSOR (delayed scaling): use this scale instead of one from the
     * amax; the amax is still measured and returned. */
    bool use_given_scale;
    float given_scale;
    /* FP8_TENSOR (current) and FP8_BLOCK: compute_scale_from_amax options. */
    bool power_2_scale;
    float amax_epsilon;
    /* NVFP4 */
    bool rht;                  /* Hadamard on the columnwise operand */
    bool stochastic_rounding;
    uint64_t seed;             /* Philox key for stochastic rounding */
    uint64_t sr_offset;        /* added to every Philox counter (per step) */
    bool use_given_amax;       /* NVFP4: global amax(es) given (e.g. all-reduced) */
    float given_amax_row, given_amax_col;
} tx_quant_config;

/* The names plans print for a quantizer kind and a usage (plan --explain
 * and --dot): "fp8-tensor", "fp8-block", "mxfp8", "nvfp4"; "rowwise",
 * "columnwise", "rowwise+columnwise", "none". Static strings. */
static inline const char *tx_qkind_name(tx_qkind k)
{
    switch (k) {
    case TX_QKIND_FP8_TENSOR: return "fp8-tensor";
    case TX_QKIND_FP8_BLOCK: return "fp8-block";
    case TX_QKIND_MXFP8: return "mxfp8";
    case TX_QKIND_NVFP4: return "nvfp4";
    }
    return "unknown";
}

static inline const char *tx_qusage_name(unsigned usage)
{
    switch (usage & 3u) {
    case TX_QUSAGE_ROWWISE: return "rowwise";
    case TX_QUSAGE_COLUMNWISE: return "columnwise";
    case TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE: return "rowwise+columnwise";
    default: return "none";
    }
}

#endif
