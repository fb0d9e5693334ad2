/* cpu_ops_quant.c - attribute handling and dispatch of the Q/DQ ops. */
#include "exec/cpu_ops_quant.h"

#include "exec/cpu_ops.h"
#include "import/shape_infer_quant.h"
#include "kernels/cpu/qdq.h"

#include <string.h>

#define ERR(expr) tx_cpu_op_error(c, (expr))

static const tx_tensor *IN(const tx_op_call *c, size_t i) { return i < c->n_in ? c->in[i] : NULL; }
static tx_tensor *OUT(const tx_op_call *c, size_t i) { return i < c->n_out ? c->out[i] : NULL; }

static teexec_status *need(const tx_op_call *c, size_t n_in, size_t n_out)
{
    for (size_t i = 0; i < n_in; i++)
        if (!IN(c, i)) return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "input %zu is missing", i));
    for (size_t j = 0; j < n_out; j++)
        if (!OUT(c, j)) return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "output %zu is missing", j));
    return NULL;
}

/* axis and block_size as the opset defines them (axis from 13, block_size
 * from 21). */
static teexec_status *axis_block(const tx_op_call *c, int64_t *axis, int64_t *block)
{
    *axis = 1;
    *block = 0;
    if (c->node->opset >= 13) TX_TRY(tx_ir_attr_int(c->node, "axis", 1, axis));
    if (c->node->opset >= 21) TX_TRY(tx_ir_attr_int(c->node, "block_size", 0, block));
    if (*block < 0) return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "block_size must be >= 0"));
    return NULL;
}

static teexec_status *op_quantize(const tx_op_call *c)
{
    TX_TRY(need(c, 2, 1));
    int64_t axis, block, sat = 1, prec = 0;
    TX_TRY(axis_block(c, &axis, &block));
    if (c->node->opset >= 19) TX_TRY(tx_ir_attr_int(c->node, "saturate", 1, &sat));
    if (c->node->opset >= 23) TX_TRY(tx_ir_attr_int(c->node, "precision", 0, &prec));
    if (prec < 0 || prec >= TEEXEC_DTYPE_COUNT)
        return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "bad precision %lld", (long long)prec));
    const tx_tensor *zp = IN(c, 2);
    teexec_dtype want;
    TX_TRY(tx_quant_q_output_dtype(c->node, zp ? zp->dtype : TEEXEC_DTYPE_UNDEFINED, &want));
    if (want != OUT(c, 0)->dtype)
        return ERR(tx_error(TEEXEC_ERR_INTERNAL, "output type differs from inference"));
    return ERR(tx_qdq_quantize(IN(c, 0), IN(c, 1), zp, axis, block, sat != 0,
                               (teexec_dtype)prec, OUT(c, 0)));
}

static teexec_status *op_dequantize(const tx_op_call *c)
{
    TX_TRY(need(c, 2, 1));
    int64_t axis, block;
    TX_TRY(axis_block(c, &axis, &block));
    return ERR(tx_qdq_dequantize(IN(c, 0), IN(c, 1), IN(c, 2), axis, block, OUT(c, 0)));
}

static teexec_status *op_trt_fp8_q(const tx_op_call *c)
{
    TX_TRY(need(c, 2, 1));
    return ERR(tx_qdq_trt_fp8_quantize(IN(c, 0), IN(c, 1), OUT(c, 0)));
}

static teexec_status *op_trt_fp8_dq(const tx_op_call *c)
{
    TX_TRY(need(c, 2, 1));
    return ERR(tx_qdq_trt_fp8_dequantize(IN(c, 0), IN(c, 1), OUT(c, 0)));
}

static teexec_status *op_trt_mxfp8_q(const tx_op_call *c)
{
    TX_TRY(need(c, 1, 2));
    return ERR(tx_qdq_trt_mxfp8_quantize(IN(c, 0), OUT(c, 0), OUT(c, 1)));
}

static teexec_status *op_trt_mxfp8_dq(const tx_op_call *c)
{
    TX_TRY(need(c, 2, 1));
    return ERR(tx_qdq_trt_mxfp8_dequantize(IN(c, 0), IN(c, 1), OUT(c, 0)));
}

static teexec_status *op_trt_fp4_q(const tx_op_call *c)
{
    TX_TRY(need(c, 2, 2));
    return ERR(tx_qdq_trt_fp4_quantize(IN(c, 0), IN(c, 1), OUT(c, 0), OUT(c, 1)));
}

static const struct {
    bool trt;
    const char *op;
    tx_op_fn fn;
} table[] = {
    {false, "QuantizeLinear", op_quantize},
    {false, "DequantizeLinear", op_dequantize},
    {true, "TRT_FP8QuantizeLinear", op_trt_fp8_q},
    {true, "TRT_FP8DequantizeLinear", op_trt_fp8_dq},
    {true, "TRT_MXFP8DynamicQuantize", op_trt_mxfp8_q},
    {true, "TRT_MXFP8DequantizeLinear", op_trt_mxfp8_dq},
    {true, "TRT_FP4DynamicQuantize", op_trt_fp4_q},
};

bool tx_cpu_quant_op_at(size_t i, const char **domain, const char **op_type, int64_t *min_opset)
{
    if (i >= sizeof(table) / sizeof(table[0])) return false;
    *domain = table[i].trt ? "trt" : "";
    *op_type = table[i].op;
    *min_opset = table[i].trt ? 1 : 10;
    return true;
}

tx_op_fn tx_cpu_quant_op_find(const char *domain, const char *op_type, int64_t opset)
{
    if (!tx_infer_quant_known(domain, op_type, opset)) return NULL;
    bool trt = domain && !strcmp(domain, "trt");
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (table[i].trt == trt && !strcmp(table[i].op, op_type)) return table[i].fn;
    return NULL;
}
