/*
 * quant_annotate.h - finds quantize -> dequantize pairs feeding a GEMM
 * operand (MatMul / Gemm input A or B, possibly through Reshape, Transpose,
 * Flatten, Squeeze, Unsqueeze, Identity and the Cast wrappers TE emits) and
 * records one annotation per quantized operand for the planner.
 *
 * Recognized forms (dequantize side, walking up from the GEMM operand):
 *   trt TRT_FP8DequantizeLinear             -> FP8_TENSOR (scale_inv input)
 *   trt TRT_MXFP8DequantizeLinear           -> MXFP8, block 32, last axis
 *   DequantizeLinear whose data is FLOAT4E2M1 (an initializer or the
 *     output of trt TRT_FP4DynamicQuantize) -> NVFP4, block 16, last axis
 *   DequantizeLinear with block_size > 0    -> BLOCKED (its axis/block)
 *   DequantizeLinear, per-tensor, FP8 data  -> FP8_TENSOR
 *   other DequantizeLinear                  -> OTHER (per-tensor/per-axis ints)
 * The scale source is CONSTANT when the scale input is an initializer (its
 * value is recorded when it has one element), COMPUTED otherwise (current
 * scaling subgraphs, dynamic quantizers, NVFP4's first DQ).
 *
 * Ownership: *out is malloc'd, freed by the caller with free(). The pass
 * reads the graph and file only. Thread-safety: pure.
 */
#ifndef TEEXEC_IMPORT_QUANT_ANNOTATE_H
#define TEEXEC_IMPORT_QUANT_ANNOTATE_H

#include "import/ir.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum tx_qann_format {
    TX_QANN_FP8_TENSOR = 1,
    TX_QANN_MXFP8 = 2,
    TX_QANN_NVFP4 = 3,
    TX_QANN_BLOCKED = 4,
    TX_QANN_OTHER = 5
} tx_qann_format;

typedef enum tx_qann_scale {
    TX_QANN_SCALE_CONSTANT = 1,
    TX_QANN_SCALE_COMPUTED = 2
} tx_qann_scale;

typedef struct tx_quant_annotation {
    int32_t gemm_node;      /* index in graph->nodes */
    int32_t operand;        /* 0 = A, 1 = B */
    tx_qann_format format;
    tx_qann_scale scale_source;
    bool has_scale_value;   /* CONSTANT with one element */
    float scale_value;
    int64_t block_size;     /* 0 for per-tensor */
    int64_t axis;           /* as written (-1 = last) */
    int32_t dq_node;        /* the dequantize node */
    int32_t q_node;         /* its quantize node, -1 for stored (initializer) data */
} tx_quant_annotation;

teexec_status *tx_quant_annotate(const tx_ir_graph *g, const tx_onnx_file *file,
                                 tx_quant_annotation **out, size_t *count) TX_NODISCARD;

/* "fp8-tensor", "mxfp8", "nvfp4", "blocked", "other". */
const char *tx_qann_format_name(tx_qann_format f);

#endif
