/*
 * std_cuda_ops.h - the table of ONNX ops the CUDA backend runs as standard
 * ops (exec/cuda/std_cuda.h): for each op its kernel family, the dtypes of
 * its data input the GPU computes in, and whether it has a backward. It is
 * the one source of these facts: tx_cuda_std_supported and the prepare
 * step's dtype refusals read it, and so do the per-device op table
 * (docs/ops-by-device.md) and the parity test against the CPU backend's
 * tables (tests/exec/test_op_parity.c).
 *
 * Plain data and lookups with no CUDA dependency, compiled in every build
 * (a CPU-only build can still say what the GPU would run).
 *
 * Thread-safety: the table is immutable.
 */
#ifndef TEEXEC_EXEC_CUDA_STD_CUDA_OPS_H
#define TEEXEC_EXEC_CUDA_STD_CUDA_OPS_H

#include "teexec/teexec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kernel families (std_cuda.c dispatches on them). */
typedef enum tx_std_kind {
    TX_SK_COPY,            /* Identity, Reshape, Flatten, Squeeze, Unsqueeze */
    TX_SK_CAST,            /* Cast, CastLike */
    TX_SK_DROPOUT,         /* inference-mode Dropout: a copy and an all-true mask */
    TX_SK_TRANSPOSE,
    TX_SK_SLICE,
    TX_SK_SPLIT,
    TX_SK_CONCAT,
    TX_SK_GATHER,
    TX_SK_GATHER_ELEMENTS,
    TX_SK_EXPAND,
    TX_SK_TILE,
    TX_SK_TRILU,
    TX_SK_ARITH,           /* Add .. Pow (sub: tx_binary_op) */
    TX_SK_COMPARE,         /* Equal .. Xor (sub: tx_binary_op) */
    TX_SK_UNARY,           /* sub: tx_unary_op (Gelu picks its form by attribute) */
    TX_SK_NOT,
    TX_SK_ISNAN,
    TX_SK_ISINF,
    TX_SK_CLIP,
    TX_SK_VARIADIC,        /* sub: tx_variadic_op */
    TX_SK_WHERE,
    TX_SK_SOFTMAX,         /* Softmax, LogSoftmax */
    TX_SK_LAYERNORM,
    TX_SK_MATMUL,
    TX_SK_GEMM,
    TX_SK_EINSUM,
    TX_SK_CONV,
    TX_SK_GATHER_ND,
    TX_SK_RMSNORM,
    TX_SK_ATTENTION,
    TX_SK_REDUCE,          /* sub: tx_reduce_op */
    TX_SK_ARG,             /* ArgMax (sub 1), ArgMin (sub 0) */
    TX_SK_TOPK,
    TX_SK_CUMSUM,
    TX_SK_RANGE,
    TX_SK_LITERAL,         /* Shape, Size, Constant: a value known at prepare */
    TX_SK_CONSTANT_OF_SHAPE,
    TX_SK_QUANTIZE,        /* QuantizeLinear */
    TX_SK_DEQUANTIZE,      /* DequantizeLinear */
    TX_SK_TRT_FP8_Q,       /* trt.TRT_FP8QuantizeLinear */
    TX_SK_TRT_FP8_DQ,
    TX_SK_TRT_MXFP8_Q,
    TX_SK_TRT_MXFP8_DQ,
    TX_SK_TRT_FP4_Q
} tx_std_kind;

/* Dtype sets: bit (1 << dtype). */
#define TX_DT(d) (UINT32_C(1) << TEEXEC_DTYPE_##d)
#define TX_DTS_F16 (TX_DT(FLOAT) | TX_DT(FLOAT16) | TX_DT(BFLOAT16))
#define TX_DTS_FLOAT (TX_DTS_F16 | TX_DT(DOUBLE))
#define TX_DTS_SINT (TX_DT(INT8) | TX_DT(INT16) | TX_DT(INT32) | TX_DT(INT64))
#define TX_DTS_UINT (TX_DT(UINT8) | TX_DT(UINT16) | TX_DT(UINT32) | TX_DT(UINT64))
#define TX_DTS_NUM (TX_DTS_FLOAT | TX_DTS_SINT | TX_DTS_UINT)
#define TX_DTS_FP8 (TX_DT(FLOAT8E4M3FN) | TX_DT(FLOAT8E4M3FNUZ) | TX_DT(FLOAT8E5M2) | \
                    TX_DT(FLOAT8E5M2FNUZ) | TX_DT(FLOAT8E8M0))
/* every dtype of a whole number of bytes: what copies move */
#define TX_DTS_MOVE (TX_DTS_NUM | TX_DT(BOOL) | TX_DTS_FP8)
#define TX_DTS_SUBBYTE (TX_DT(INT4) | TX_DT(UINT4) | TX_DT(INT2) | TX_DT(UINT2) | \
                        TX_DT(FLOAT4E2M1))
#define TX_DTS_ALL (TX_DTS_MOVE | TX_DTS_SUBBYTE | TX_DT(STRING))

typedef struct tx_cuda_std_op {
    const char *domain;   /* "" (ai.onnx) or "trt" */
    const char *op;
    tx_std_kind kind;
    int sub;
    uint32_t dtypes;      /* dtypes of the data input the forward runs */
    bool backward;        /* has a backward (FLOAT, FLOAT16, BFLOAT16 grads) */
    int slot;             /* the data input: 0, Where's x 1; -1: output 0 (Constant,
                           * ConstantOfShape) */
} tx_cuda_std_op;

/* The entry for (domain, op) ("" or "ai.onnx" for the standard domain), or
 * NULL when the GPU does not run the op. */
const tx_cuda_std_op *tx_cuda_std_op_find(const char *domain, const char *op_type);

/* Every entry, in table order. */
size_t tx_cuda_std_op_count(void);
const tx_cuda_std_op *tx_cuda_std_op_at(size_t i);

/* "float,float16,bfloat16,..." for a dtype set, into buf (truncated). */
const char *tx_cuda_std_dtypes_text(uint32_t set, char *buf, size_t size);

#endif
