/* std_cuda_ops.c - the CUDA backend's standard-op table (std_cuda_ops.h). */
#include "exec/cuda/std_cuda_ops.h"

#include "kernels/cpu/ops.h"

#include <stdio.h>
#include <string.h>

#define ROW(name, k, s, dts, bwd) {"", name, TX_SK_##k, s, dts, bwd, 0}
#define ROW_AT(name, k, s, dts, bwd, slot) {"", name, TX_SK_##k, s, dts, bwd, slot}
#define TRT(name, k, dts) {"trt", name, TX_SK_##k, 0, dts, false, 0}

/* Data movement runs on every dtype of whole bytes; math on the dtypes the
 * CPU kernels compute in (kernels/cpu/ops.h says which). */
static const tx_cuda_std_op table[] = {
    ROW("Identity", COPY, 0, TX_DTS_MOVE, true),
    ROW("Reshape", COPY, 0, TX_DTS_MOVE, true),
    ROW("Flatten", COPY, 0, TX_DTS_MOVE, true),
    ROW("Squeeze", COPY, 0, TX_DTS_MOVE, true),
    ROW("Unsqueeze", COPY, 0, TX_DTS_MOVE, true),
    ROW("Cast", CAST, 0, TX_DTS_MOVE | TX_DTS_SUBBYTE, true),
    ROW("CastLike", CAST, 0, TX_DTS_MOVE | TX_DTS_SUBBYTE, true),
    ROW("Dropout", DROPOUT, 0, TX_DTS_MOVE, true),
    ROW("Transpose", TRANSPOSE, 0, TX_DTS_MOVE, true),
    ROW("Slice", SLICE, 0, TX_DTS_MOVE, true),
    ROW("Split", SPLIT, 0, TX_DTS_MOVE, true),
    ROW("Concat", CONCAT, 0, TX_DTS_MOVE, true),
    ROW("Gather", GATHER, 0, TX_DTS_MOVE, true),
    ROW("GatherElements", GATHER_ELEMENTS, 0, TX_DTS_MOVE, true),
    ROW("Expand", EXPAND, 0, TX_DTS_MOVE, true),
    ROW("Tile", TILE, 0, TX_DTS_MOVE, true),
    ROW("Trilu", TRILU, 0, TX_DTS_MOVE, true),
    ROW_AT("Where", WHERE, 0, TX_DTS_MOVE, true, 1),
    ROW("Add", ARITH, TX_BINARY_ADD, TX_DTS_NUM, true),
    ROW("Sub", ARITH, TX_BINARY_SUB, TX_DTS_NUM, true),
    ROW("Mul", ARITH, TX_BINARY_MUL, TX_DTS_NUM, true),
    ROW("Div", ARITH, TX_BINARY_DIV, TX_DTS_NUM, true),
    ROW("Pow", ARITH, TX_BINARY_POW, TX_DTS_NUM, true),
    ROW("Equal", COMPARE, TX_BINARY_EQUAL, TX_DTS_NUM | TX_DT(BOOL), false),
    ROW("Less", COMPARE, TX_BINARY_LESS, TX_DTS_NUM, false),
    ROW("LessOrEqual", COMPARE, TX_BINARY_LESS_OR_EQUAL, TX_DTS_NUM, false),
    ROW("Greater", COMPARE, TX_BINARY_GREATER, TX_DTS_NUM, false),
    ROW("GreaterOrEqual", COMPARE, TX_BINARY_GREATER_OR_EQUAL, TX_DTS_NUM, false),
    ROW("And", COMPARE, TX_BINARY_AND, TX_DT(BOOL), false),
    ROW("Or", COMPARE, TX_BINARY_OR, TX_DT(BOOL), false),
    ROW("Xor", COMPARE, TX_BINARY_XOR, TX_DT(BOOL), false),
    ROW("Neg", UNARY, TX_UNARY_NEG, TX_DTS_FLOAT | TX_DTS_SINT, true),
    ROW("Abs", UNARY, TX_UNARY_ABS, TX_DTS_NUM, true),
    ROW("Sign", UNARY, TX_UNARY_SIGN, TX_DTS_NUM, false),
    ROW("Relu", UNARY, TX_UNARY_RELU, TX_DTS_FLOAT | TX_DTS_SINT, true),
    ROW("Sqrt", UNARY, TX_UNARY_SQRT, TX_DTS_FLOAT, true),
    ROW("Reciprocal", UNARY, TX_UNARY_RECIPROCAL, TX_DTS_FLOAT, true),
    ROW("Exp", UNARY, TX_UNARY_EXP, TX_DTS_FLOAT, true),
    ROW("Log", UNARY, TX_UNARY_LOG, TX_DTS_FLOAT, true),
    ROW("Erf", UNARY, TX_UNARY_ERF, TX_DTS_FLOAT, true),
    ROW("Tanh", UNARY, TX_UNARY_TANH, TX_DTS_FLOAT, true),
    ROW("Sigmoid", UNARY, TX_UNARY_SIGMOID, TX_DTS_FLOAT, true),
    ROW("LeakyRelu", UNARY, TX_UNARY_LEAKY_RELU, TX_DTS_FLOAT, true),
    ROW("Elu", UNARY, TX_UNARY_ELU, TX_DTS_FLOAT, true),
    ROW("Softplus", UNARY, TX_UNARY_SOFTPLUS, TX_DTS_FLOAT, true),
    ROW("Gelu", UNARY, TX_UNARY_GELU, TX_DTS_FLOAT, true),
    ROW("Floor", UNARY, TX_UNARY_FLOOR, TX_DTS_FLOAT, false),
    ROW("Ceil", UNARY, TX_UNARY_CEIL, TX_DTS_FLOAT, false),
    ROW("Round", UNARY, TX_UNARY_ROUND, TX_DTS_FLOAT, false),
    ROW("Sin", UNARY, TX_UNARY_SIN, TX_DTS_FLOAT, true),
    ROW("Cos", UNARY, TX_UNARY_COS, TX_DTS_FLOAT, true),
    ROW("Not", NOT, 0, TX_DT(BOOL), false),
    ROW("IsNaN", ISNAN, 0, TX_DTS_FLOAT, false),
    ROW("IsInf", ISINF, 0, TX_DTS_FLOAT, false),
    ROW("Clip", CLIP, 0, TX_DTS_NUM, true),
    ROW("Min", VARIADIC, TX_VARIADIC_MIN, TX_DTS_NUM, true),
    ROW("Max", VARIADIC, TX_VARIADIC_MAX, TX_DTS_NUM, true),
    ROW("Sum", VARIADIC, TX_VARIADIC_SUM, TX_DTS_NUM, true),
    ROW("Mean", VARIADIC, TX_VARIADIC_MEAN, TX_DTS_FLOAT, true),
    ROW("Softmax", SOFTMAX, 0, TX_DTS_FLOAT, true),
    ROW("LogSoftmax", SOFTMAX, 1, TX_DTS_FLOAT, true),
    ROW("LayerNormalization", LAYERNORM, 0, TX_DTS_FLOAT, true),
    ROW("MatMul", MATMUL, 0,
        TX_DTS_FLOAT | TX_DT(INT32) | TX_DT(INT64) | TX_DT(UINT32) | TX_DT(UINT64), true),
    ROW("Gemm", GEMM, 0,
        TX_DTS_FLOAT | TX_DT(INT32) | TX_DT(INT64) | TX_DT(UINT32) | TX_DT(UINT64), true),
    ROW("Conv", CONV, 0, TX_DTS_FLOAT, true),
    ROW("GatherND", GATHER_ND, 0, TX_DTS_MOVE, true),
    ROW("RMSNormalization", RMSNORM, 0, TX_DTS_FLOAT, true),
    ROW("Attention", ATTENTION, 0, TX_DTS_FLOAT, true),
    ROW("Einsum", EINSUM, 0, TX_DTS_NUM, true),
    ROW("ReduceSum", REDUCE, TX_REDUCE_SUM, TX_DTS_NUM, true),
    ROW("ReduceMean", REDUCE, TX_REDUCE_MEAN, TX_DTS_NUM, true),
    ROW("ReduceMax", REDUCE, TX_REDUCE_MAX, TX_DTS_NUM | TX_DT(BOOL), true),
    ROW("ReduceMin", REDUCE, TX_REDUCE_MIN, TX_DTS_NUM | TX_DT(BOOL), true),
    ROW("ReduceProd", REDUCE, TX_REDUCE_PROD, TX_DTS_NUM, true),
    ROW("ArgMax", ARG, 1, TX_DTS_NUM | TX_DT(BOOL), false),
    ROW("ArgMin", ARG, 0, TX_DTS_NUM | TX_DT(BOOL), false),
    ROW("TopK", TOPK, 0, TX_DTS_NUM, true),
    ROW("CumSum", CUMSUM, 0, TX_DTS_NUM, true),
    ROW("Range", RANGE, 0,
        TX_DTS_FLOAT | TX_DT(INT16) | TX_DT(INT32) | TX_DT(INT64), false),
    ROW("Shape", LITERAL, 0, TX_DTS_ALL, false),
    ROW("Size", LITERAL, 0, TX_DTS_ALL, false),
    ROW_AT("Constant", LITERAL, 0, TX_DTS_ALL, false, -1),
    ROW_AT("ConstantOfShape", CONSTANT_OF_SHAPE, 0, TX_DTS_MOVE, false, -1),
    /* quantization (kernels/cpu/qdq.h's rules): inputs of any dtype are read
     * as floats with Cast's rules, as the CPU reads them */
    ROW("QuantizeLinear", QUANTIZE, 0, TX_DTS_MOVE | TX_DTS_SUBBYTE, false),
    ROW("DequantizeLinear", DEQUANTIZE, 0, TX_DTS_MOVE | TX_DTS_SUBBYTE, false),
    TRT("TRT_FP8QuantizeLinear", TRT_FP8_Q, TX_DTS_MOVE | TX_DTS_SUBBYTE),
    TRT("TRT_FP8DequantizeLinear", TRT_FP8_DQ, TX_DT(UINT8) | TX_DT(FLOAT8E4M3FN)),
    TRT("TRT_MXFP8DynamicQuantize", TRT_MXFP8_Q, TX_DTS_MOVE | TX_DTS_SUBBYTE),
    TRT("TRT_MXFP8DequantizeLinear", TRT_MXFP8_DQ, TX_DT(UINT8) | TX_DT(FLOAT8E4M3FN)),
    TRT("TRT_FP4DynamicQuantize", TRT_FP4_Q, TX_DTS_MOVE | TX_DTS_SUBBYTE),
};

static bool std_domain(const char *d) { return !d || !d[0] || !strcmp(d, "ai.onnx"); }

const tx_cuda_std_op *tx_cuda_std_op_find(const char *domain, const char *op_type)
{
    if (!op_type) return NULL;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const tx_cuda_std_op *e = &table[i];
        bool dom = e->domain[0] ? (domain && !strcmp(domain, e->domain)) : std_domain(domain);
        if (dom && !strcmp(e->op, op_type)) return e;
    }
    return NULL;
}

size_t tx_cuda_std_op_count(void) { return sizeof table / sizeof table[0]; }

const tx_cuda_std_op *tx_cuda_std_op_at(size_t i)
{
    return i < tx_cuda_std_op_count() ? &table[i] : NULL;
}

const char *tx_cuda_std_dtypes_text(uint32_t set, char *buf, size_t size)
{
    size_t len = 0;
    if (size) buf[0] = 0;
    for (int d = 1; d < TEEXEC_DTYPE_COUNT && d < 32; d++) {
        if (!(set & (UINT32_C(1) << d))) continue;
        int w = snprintf(buf + len, len < size ? size - len : 0, "%s%s", len ? "," : "",
                         teexec_dtype_name((teexec_dtype)d));
        if (w > 0) len += (size_t)w;
        if (len >= size) break;
    }
    return buf;
}
