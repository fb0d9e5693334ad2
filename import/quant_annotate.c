/* quant_annotate.c - Q->DQ pairs on GEMM operands (quant_annotate.h). */
#include "import/quant_annotate.h"

#include "format/tensor_proto.h"
#include "import/shape_infer.h"

#include <stdlib.h>
#include <string.h>

const char *tx_qann_format_name(tx_qann_format f)
{
    switch (f) {
    case TX_QANN_FP8_TENSOR: return "fp8-tensor";
    case TX_QANN_MXFP8: return "mxfp8";
    case TX_QANN_NVFP4: return "nvfp4";
    case TX_QANN_BLOCKED: return "blocked";
    default: return "other";
    }
}

static bool is_op(const tx_ir_node *n, const char *domain, const char *op)
{
    return !strcmp(n->domain, domain) && !strcmp(n->op_type, op);
}

/* The node producing input `slot` of n, or NULL. */
static const tx_ir_node *producer(const tx_ir_graph *g, const tx_ir_node *n, size_t slot)
{
    if (slot >= n->n_inputs || n->inputs[slot] < 0) return NULL;
    int32_t p = g->values[n->inputs[slot]].producer;
    return p >= 0 ? &g->nodes[p] : NULL;
}

static bool passthrough(const tx_ir_node *n)
{
    static const char *const ops[] = {"Reshape", "Transpose", "Flatten", "Squeeze",
                                      "Unsqueeze", "Identity", "Cast"};
    if (n->domain[0]) return false;
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (!strcmp(n->op_type, ops[i])) return true;
    return false;
}

static void read_scale(const tx_ir_graph *g, const tx_onnx_file *file, const tx_ir_node *dq,
                       tx_quant_annotation *a)
{
    a->scale_source = TX_QANN_SCALE_COMPUTED;
    if (dq->n_inputs < 2 || dq->inputs[1] < 0) return;
    const tx_ir_value *v = &g->values[dq->inputs[1]];
    if (!(v->flags & TX_IR_VALUE_INITIALIZER) || !v->initializer) return;
    a->scale_source = TX_QANN_SCALE_CONSTANT;
    tx_tensor t;
    teexec_status *st = tx_tensor_from_proto(v->initializer, file, &t);
    if (st) {
        teexec_status_destroy(st); /* the value is informative only */
        return;
    }
    double d;
    if (t.numel == 1) {
        st = tx_tensor_read_scalar(&t, &d);
        if (st) teexec_status_destroy(st);
        else {
            a->has_scale_value = true;
            a->scale_value = (float)d;
        }
    }
    tx_tensor_release(&t);
}

static bool classify(const tx_ir_graph *g, const tx_onnx_file *file, const tx_ir_node *dq,
                     tx_quant_annotation *a)
{
    const tx_ir_node *q = producer(g, dq, 0);
    a->dq_node = dq->index;
    a->q_node = -1;
    a->axis = -1;
    a->block_size = 0;
    if (is_op(dq, "trt", "TRT_FP8DequantizeLinear")) {
        a->format = TX_QANN_FP8_TENSOR;
        if (q && is_op(q, "trt", "TRT_FP8QuantizeLinear")) a->q_node = q->index;
    } else if (is_op(dq, "trt", "TRT_MXFP8DequantizeLinear")) {
        a->format = TX_QANN_MXFP8;
        a->block_size = 32;
        if (q && is_op(q, "trt", "TRT_MXFP8DynamicQuantize")) a->q_node = q->index;
    } else if (is_op(dq, "", "DequantizeLinear")) {
        int64_t axis = 1, block = 0;
        if (tx_ir_attr_int(dq, "axis", 1, &axis) || tx_ir_attr_int(dq, "block_size", 0, &block))
            return false;
        teexec_dtype xdt = dq->inputs[0] >= 0 ? g->values[dq->inputs[0]].dtype : 0;
        bool fp4_dyn = q && is_op(q, "trt", "TRT_FP4DynamicQuantize");
        const tx_ir_node *sdq = producer(g, dq, 1);
        if (fp4_dyn || (xdt == TEEXEC_DTYPE_FLOAT4E2M1 && sdq && is_op(sdq, "", "DequantizeLinear"))) {
            a->format = TX_QANN_NVFP4;
        } else if (block > 0) {
            a->format = TX_QANN_BLOCKED;
        } else if (xdt >= TEEXEC_DTYPE_FLOAT8E4M3FN && xdt <= TEEXEC_DTYPE_FLOAT8E5M2FNUZ) {
            a->format = TX_QANN_FP8_TENSOR;
        } else if (q && is_op(q, "", "QuantizeLinear")) {
            int64_t od = 0;
            if (tx_ir_attr_int(q, "output_dtype", 0, &od)) return false;
            a->format = od >= TEEXEC_DTYPE_FLOAT8E4M3FN && od <= TEEXEC_DTYPE_FLOAT8E5M2FNUZ
                            ? TX_QANN_FP8_TENSOR
                            : TX_QANN_OTHER;
        } else {
            a->format = TX_QANN_OTHER;
        }
        a->axis = axis;
        a->block_size = block;
        if (q && (fp4_dyn || is_op(q, "", "QuantizeLinear"))) a->q_node = q->index;
    } else {
        return false;
    }
    read_scale(g, file, dq, a);
    return true;
}

teexec_status *tx_quant_annotate(const tx_ir_graph *g, const tx_onnx_file *file,
                                 tx_quant_annotation **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    tx_quant_annotation *list = NULL;
    size_t n = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
        const tx_ir_node *gemm = &g->nodes[i];
        if (gemm->domain[0] || (strcmp(gemm->op_type, "MatMul") && strcmp(gemm->op_type, "Gemm")))
            continue;
        for (int32_t k = 0; k < 2; k++) {
            const tx_ir_node *p = producer(g, gemm, (size_t)k);
            /* bounded walk: a graph is acyclic, the bound guards a bad IR */
            for (size_t hops = 0; p && passthrough(p) && hops < g->n_nodes; hops++)
                p = producer(g, p, 0);
            if (!p) continue;
            tx_quant_annotation a;
            memset(&a, 0, sizeof(a));
            a.gemm_node = (int32_t)i;
            a.operand = k;
            if (!classify(g, file, p, &a)) continue;
            tx_quant_annotation *grown = realloc(list, (n + 1) * sizeof(*list));
            if (!grown) {
                free(list);
                return tx_error(TEEXEC_ERR_NO_MEMORY, "out of memory annotating quantized GEMMs");
            }
            list = grown;
            list[n++] = a;
        }
    }
    *out = list;
    *count = n;
    return NULL;
}
