/* shape_infer_quant.c - inference for Q/DQ and TE's trt Q/DQ ops. */
#include "import/shape_infer_quant.h"

#include "base/checked.h"

#include <string.h>

static bool is_default(const char *d) { return !d || !d[0] || !strcmp(d, "ai.onnx"); }
static bool is_trt(const char *d) { return d && !strcmp(d, "trt"); }

static const char *const trt_ops[] = {
    "TRT_FP8QuantizeLinear", "TRT_FP8DequantizeLinear", "TRT_MXFP8DynamicQuantize",
    "TRT_MXFP8DequantizeLinear", "TRT_FP4DynamicQuantize",
};

bool tx_infer_quant_known(const char *domain, const char *op_type, int64_t opset)
{
    if (is_default(domain))
        return opset >= 10 &&
               (!strcmp(op_type, "QuantizeLinear") || !strcmp(op_type, "DequantizeLinear"));
    if (is_trt(domain))
        for (size_t i = 0; i < sizeof(trt_ops) / sizeof(trt_ops[0]); i++)
            if (!strcmp(op_type, trt_ops[i])) return true;
    return false;
}

static teexec_status *node_err(const tx_ir_node *n, teexec_status *st)
{
    if (!st) return NULL;
    return tx_status_with_node(tx_status_prefix(st, "node \"%s\" (%s)", n->label, n->op_type),
                               n->label);
}

teexec_status *tx_quant_q_output_dtype(const tx_ir_node *node, teexec_dtype zp_dtype,
                                       teexec_dtype *out)
{
    int64_t od = 0;
    if (node->opset >= 21) TX_TRY(tx_ir_attr_int(node, "output_dtype", 0, &od));
    if (od != 0 && zp_dtype != TEEXEC_DTYPE_UNDEFINED && (int64_t)zp_dtype != od)
        return node_err(node, tx_error(TEEXEC_ERR_BAD_MODEL,
                                       "output_dtype %lld disagrees with the zero point's type %s",
                                       (long long)od, teexec_dtype_name(zp_dtype)));
    if (od < 0 || od >= TEEXEC_DTYPE_COUNT)
        return node_err(node, tx_error(TEEXEC_ERR_BAD_MODEL, "bad output_dtype %lld", (long long)od));
    *out = od ? (teexec_dtype)od : zp_dtype != TEEXEC_DTYPE_UNDEFINED ? zp_dtype : TEEXEC_DTYPE_UINT8;
    return NULL;
}

static bool is_out_float(teexec_dtype d)
{
    return d == TEEXEC_DTYPE_FLOAT || d == TEEXEC_DTYPE_FLOAT16 || d == TEEXEC_DTYPE_BFLOAT16;
}

teexec_status *tx_quant_dq_output_dtype(const tx_ir_node *node, teexec_dtype scale_dtype,
                                        teexec_dtype *out)
{
    *out = TEEXEC_DTYPE_FLOAT;
    if (node->opset < 19) return NULL;
    int64_t od = 0;
    if (node->opset >= 23) TX_TRY(tx_ir_attr_int(node, "output_dtype", 0, &od));
    if (od != 0) {
        if (!is_out_float((teexec_dtype)od))
            return node_err(node, tx_error(TEEXEC_ERR_BAD_MODEL,
                                           "output_dtype must be float, float16 or bfloat16, not %lld",
                                           (long long)od));
        *out = (teexec_dtype)od;
        return NULL;
    }
    if (is_out_float(scale_dtype)) *out = scale_dtype;
    return NULL;
}

static teexec_status *need(const tx_ir_node *n, const tx_infer_value *const *in, size_t k)
{
    if (n->n_inputs < k) return node_err(n, tx_error(TEEXEC_ERR_BAD_MODEL, "needs %zu inputs", k));
    for (size_t i = 0; i < k; i++)
        if (!in[i]) return node_err(n, tx_error(TEEXEC_ERR_BAD_MODEL, "input %zu is missing", i));
    return NULL;
}

static void set_out(tx_infer_value *o, teexec_dtype dt, const tx_infer_value *like)
{
    o->dtype = dt;
    o->shape_known = like->shape_known;
    if (like->shape_known) o->shape = like->shape;
}

teexec_status *tx_infer_quant_node(const tx_ir_node *n, const tx_infer_value *const *in,
                                   tx_infer_value *out)
{
    const char *op = n->op_type;
    const tx_infer_value *zp = n->n_inputs > 2 ? in[2] : NULL;
    if (is_default(n->domain) && !strcmp(op, "QuantizeLinear")) {
        TX_TRY(need(n, in, 2));
        teexec_dtype dt;
        TX_TRY(tx_quant_q_output_dtype(n, zp ? zp->dtype : TEEXEC_DTYPE_UNDEFINED, &dt));
        set_out(&out[0], dt, in[0]);
        return NULL;
    }
    if (is_default(n->domain) && !strcmp(op, "DequantizeLinear")) {
        TX_TRY(need(n, in, 2));
        teexec_dtype dt;
        TX_TRY(tx_quant_dq_output_dtype(n, in[1]->dtype, &dt));
        set_out(&out[0], dt, in[0]);
        return NULL;
    }
    if (!is_trt(n->domain))
        return node_err(n, tx_error(TEEXEC_ERR_INTERNAL, "not a quantization op"));
    int64_t od;
    if (!strcmp(op, "TRT_FP8QuantizeLinear")) {
        TX_TRY(need(n, in, 2));
        set_out(&out[0], TEEXEC_DTYPE_UINT8, in[0]);
        return NULL;
    }
    if (!strcmp(op, "TRT_FP8DequantizeLinear") || !strcmp(op, "TRT_MXFP8DequantizeLinear")) {
        TX_TRY(need(n, in, 2));
        TX_TRY(tx_ir_attr_int(n, "output_dtype", TEEXEC_DTYPE_FLOAT, &od));
        if (!is_out_float((teexec_dtype)od))
            return node_err(n, tx_error(TEEXEC_ERR_BAD_MODEL, "bad output_dtype %lld", (long long)od));
        set_out(&out[0], (teexec_dtype)od, in[0]);
        return NULL;
    }
    int64_t axis, block;
    TX_TRY(tx_ir_attr_int(n, "axis", -1, &axis));
    if (!strcmp(op, "TRT_MXFP8DynamicQuantize")) {
        TX_TRY(need(n, in, 1));
        TX_TRY(tx_ir_attr_int(n, "block_size", 32, &block));
        TX_TRY(tx_ir_attr_int(n, "output_dtype", TEEXEC_DTYPE_UINT8, &od));
        if (od != TEEXEC_DTYPE_UINT8 && od != TEEXEC_DTYPE_FLOAT8E4M3FN)
            return node_err(n, tx_error(TEEXEC_ERR_UNSUPPORTED, "output_dtype %lld is not E4M3",
                                        (long long)od));
        set_out(&out[0], (teexec_dtype)od, in[0]);
        if (n->n_outputs > 1) {
            out[1].dtype = TEEXEC_DTYPE_UINT8;
            out[1].shape_known = false;
        }
        if (!in[0]->shape_known) return NULL;
        if (axis != -1 && axis != in[0]->shape.rank - 1)
            return node_err(n, tx_error(TEEXEC_ERR_UNSUPPORTED, "only the last axis is supported"));
        /* TE's padded scale shape (kernels/cpu/qdq.h repeats this rule). */
        const tx_shape *s = &in[0]->shape;
        uint64_t M;
        if (block != 32)
            return node_err(n, tx_error(TEEXEC_ERR_UNSUPPORTED, "block_size must be 32"));
        if (s->rank < 1 || !tx_dims_product(s->dims, (size_t)s->rank - 1, &M) ||
            M > (uint64_t)INT64_MAX - 128)
            return node_err(n, tx_error(TEEXEC_ERR_BAD_MODEL, "input must have rank >= 1"));
        int64_t K = s->dims[s->rank - 1];
        if (K % 32 != 0)
            return node_err(n, tx_error(TEEXEC_ERR_BAD_MODEL, "last dim %lld is not a multiple of 32",
                                        (long long)K));
        int64_t sd[2] = {(int64_t)((M + 127) / 128 * 128), (K / 32 + 3) / 4 * 4};
        if (n->n_outputs > 1) {
            out[1].shape_known = true;
            TX_TRY(tx_shape_make(2, sd, &out[1].shape));
        }
        return NULL;
    }
    if (!strcmp(op, "TRT_FP4DynamicQuantize")) {
        TX_TRY(need(n, in, 2));
        TX_TRY(tx_ir_attr_int(n, "block_size", 16, &block));
        TX_TRY(tx_ir_attr_int(n, "scale_type", TEEXEC_DTYPE_FLOAT8E4M3FN, &od));
        if (block != 16 || od != TEEXEC_DTYPE_FLOAT8E4M3FN)
            return node_err(n, tx_error(TEEXEC_ERR_UNSUPPORTED,
                                        "only block_size 16 with FLOAT8E4M3FN scales is supported"));
        set_out(&out[0], TEEXEC_DTYPE_FLOAT4E2M1, in[0]);
        if (n->n_outputs > 1) {
            out[1].dtype = TEEXEC_DTYPE_FLOAT8E4M3FN;
            out[1].shape_known = false;
        }
        if (!in[0]->shape_known) return NULL;
        const tx_shape *s = &in[0]->shape;
        if (s->rank < 1 || (axis != -1 && axis != s->rank - 1))
            return node_err(n, tx_error(TEEXEC_ERR_UNSUPPORTED, "only the last axis is supported"));
        if (s->dims[s->rank - 1] % 16 != 0)
            return node_err(n, tx_error(TEEXEC_ERR_BAD_MODEL, "last dim %lld is not a multiple of 16",
                                        (long long)s->dims[s->rank - 1]));
        if (n->n_outputs > 1) {
            out[1].shape_known = true;
            out[1].shape = *s;
            out[1].shape.dims[s->rank - 1] /= 16;
        }
        return NULL;
    }
    return node_err(n, tx_error(TEEXEC_ERR_INTERNAL, "not a quantization op"));
}
