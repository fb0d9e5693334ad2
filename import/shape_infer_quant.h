/*
 * shape_infer_quant.h - shape/type inference for the quantization ops:
 * standard QuantizeLinear / DequantizeLinear (opsets 10-25) and the `trt`
 * domain ops TE and Model Optimizer export (TRT_FP8QuantizeLinear,
 * TRT_FP8DequantizeLinear, TRT_MXFP8DynamicQuantize,
 * TRT_MXFP8DequantizeLinear, TRT_FP4DynamicQuantize). shape_infer.c
 * forwards these ops here (tx_infer_node / tx_infer_op_known).
 *
 * Output types: Q: output_dtype, else the zero point's type, else UINT8.
 * DQ: FLOAT before opset 19; from 19 output_dtype (23+), else the scale's
 * type (FLOAT when that is FLOAT8E8M0 or an integer). TRT FP8/MXFP8 data
 * and scales: UINT8 (or the output_dtype attribute Model Optimizer sets);
 * TRT_FP4DynamicQuantize: FLOAT4E2M1 data, FLOAT8E4M3FN scales [..., K/16].
 *
 * Same calling convention and ownership as tx_infer_node. Pure; thread-safe.
 */
#ifndef TEEXEC_IMPORT_SHAPE_INFER_QUANT_H
#define TEEXEC_IMPORT_SHAPE_INFER_QUANT_H

#include "import/shape_infer.h"

/* True for the ops above ("" / "ai.onnx" QuantizeLinear and
 * DequantizeLinear at opset >= 10; domain "trt" ops at any version). */
bool tx_infer_quant_known(const char *domain, const char *op_type, int64_t opset);

teexec_status *tx_infer_quant_node(const tx_ir_node *node, const tx_infer_value *const *inputs,
                                   tx_infer_value *outputs) TX_NODISCARD;

/* The quantized dtype a standard QuantizeLinear writes (attribute
 * output_dtype, else zp_dtype when not UNDEFINED, else UINT8). */
teexec_status *tx_quant_q_output_dtype(const tx_ir_node *node, teexec_dtype zp_dtype,
                                       teexec_dtype *out) TX_NODISCARD;

/* The dtype a standard DequantizeLinear writes. */
teexec_status *tx_quant_dq_output_dtype(const tx_ir_node *node, teexec_dtype scale_dtype,
                                        teexec_dtype *out) TX_NODISCARD;

#endif
