/* cpu_ops.c - CPU dispatch table and the math ops' attribute handling. */
#include "exec/cpu_ops.h"

#include "base/dtype.h"
#include "exec/cpu_ops_quant.h"
#include "exec/cpu_te_ops.h"
#include "import/shape_infer.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

teexec_status *tx_cpu_op_error(const tx_op_call *c, teexec_status *st)
{
    if (!st) return NULL;
    if (!teexec_status_node(st)) {
        st = tx_status_prefix(st, "node \"%s\" (%s)", c->node->label, c->node->op_type);
        st = tx_status_with_node(st, c->node->label);
    }
    return st;
}

#define ERR(expr) tx_cpu_op_error(c, (expr))

static const tx_tensor *IN(const tx_op_call *c, size_t i)
{
    return i < c->n_in ? c->in[i] : NULL;
}

static tx_tensor *OUT(const tx_op_call *c, size_t i)
{
    return i < c->n_out ? c->out[i] : NULL;
}

/* ---- unary ------------------------------------------------------------- */

static const struct {
    const char *op;
    tx_unary_op u;
} unary_ops[] = {
    {"Neg", TX_UNARY_NEG}, {"Abs", TX_UNARY_ABS}, {"Sign", TX_UNARY_SIGN},
    {"Relu", TX_UNARY_RELU}, {"Sqrt", TX_UNARY_SQRT}, {"Reciprocal", TX_UNARY_RECIPROCAL},
    {"Exp", TX_UNARY_EXP}, {"Log", TX_UNARY_LOG}, {"Erf", TX_UNARY_ERF},
    {"Tanh", TX_UNARY_TANH}, {"Sigmoid", TX_UNARY_SIGMOID}, {"LeakyRelu", TX_UNARY_LEAKY_RELU},
    {"Elu", TX_UNARY_ELU}, {"Softplus", TX_UNARY_SOFTPLUS}, {"Floor", TX_UNARY_FLOOR},
    {"Ceil", TX_UNARY_CEIL}, {"Round", TX_UNARY_ROUND}, {"Sin", TX_UNARY_SIN},
    {"Cos", TX_UNARY_COS},
};

static teexec_status *op_unary(const tx_op_call *c)
{
    const char *op = c->node->op_type;
    for (size_t i = 0; i < sizeof(unary_ops) / sizeof(unary_ops[0]); i++) {
        if (strcmp(unary_ops[i].op, op) != 0) continue;
        float alpha = 0;
        if (unary_ops[i].u == TX_UNARY_LEAKY_RELU)
            TX_TRY(tx_ir_attr_float(c->node, "alpha", 0.01f, &alpha));
        if (unary_ops[i].u == TX_UNARY_ELU)
            TX_TRY(tx_ir_attr_float(c->node, "alpha", 1.0f, &alpha));
        return ERR(tx_cpu_unary(unary_ops[i].u, IN(c, 0), alpha, OUT(c, 0)));
    }
    return tx_error(TEEXEC_ERR_INTERNAL, "no unary kernel for %s", op);
}

static teexec_status *op_gelu(const tx_op_call *c)
{
    const char *approx;
    TX_TRY(tx_ir_attr_string(c->node, "approximate", "none", &approx, NULL));
    bool t = strcmp(approx, "tanh") == 0;
    if (!t && strcmp(approx, "none") != 0)
        return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "approximate must be \"none\" or \"tanh\", not \"%s\"",
                            approx));
    return ERR(tx_cpu_gelu(IN(c, 0), t, OUT(c, 0)));
}

static teexec_status *op_not(const tx_op_call *c) { return ERR(tx_cpu_not(IN(c, 0), OUT(c, 0))); }
static teexec_status *op_isnan(const tx_op_call *c) { return ERR(tx_cpu_isnan(IN(c, 0), OUT(c, 0))); }

static teexec_status *op_isinf(const tx_op_call *c)
{
    int64_t pos, neg;
    TX_TRY(tx_ir_attr_int(c->node, "detect_positive", 1, &pos));
    TX_TRY(tx_ir_attr_int(c->node, "detect_negative", 1, &neg));
    return ERR(tx_cpu_isinf(IN(c, 0), pos != 0, neg != 0, OUT(c, 0)));
}

/* Clip: min/max attributes (float) before opset 11, optional inputs from 11. */
static teexec_status *op_clip(const tx_op_call *c)
{
    const tx_tensor *x = IN(c, 0);
    if (c->node->opset >= 11) return ERR(tx_cpu_clip(x, IN(c, 1), IN(c, 2), OUT(c, 0)));
    float lo, hi;
    TX_TRY(tx_ir_attr_float(c->node, "min", -INFINITY, &lo));
    TX_TRY(tx_ir_attr_float(c->node, "max", INFINITY, &hi));
    tx_tensor tlo, thi;
    TX_TRY(tx_tensor_alloc(&tlo, x->dtype, 0, NULL));
    teexec_status *st = tx_tensor_alloc(&thi, x->dtype, 0, NULL);
    if (st) {
        tx_tensor_release(&tlo);
        return st;
    }
    st = tx_convert_from_f32(&lo, tlo.data, x->dtype, 1, NULL);
    if (!st) st = tx_convert_from_f32(&hi, thi.data, x->dtype, 1, NULL);
    if (!st) st = tx_cpu_clip(x, &tlo, &thi, OUT(c, 0));
    tx_tensor_release(&tlo);
    tx_tensor_release(&thi);
    return ERR(st);
}

/* ---- binary / variadic -------------------------------------------------- */

static const struct {
    const char *op;
    tx_binary_op b;
} binary_ops[] = {
    {"Add", TX_BINARY_ADD}, {"Sub", TX_BINARY_SUB}, {"Mul", TX_BINARY_MUL},
    {"Div", TX_BINARY_DIV}, {"Pow", TX_BINARY_POW}, {"Equal", TX_BINARY_EQUAL},
    {"Less", TX_BINARY_LESS}, {"LessOrEqual", TX_BINARY_LESS_OR_EQUAL},
    {"Greater", TX_BINARY_GREATER}, {"GreaterOrEqual", TX_BINARY_GREATER_OR_EQUAL},
    {"And", TX_BINARY_AND}, {"Or", TX_BINARY_OR}, {"Xor", TX_BINARY_XOR},
};

static teexec_status *op_binary(const tx_op_call *c)
{
    const char *op = c->node->op_type;
    if (c->n_in != 2 || !IN(c, 0) || !IN(c, 1))
        return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "needs two inputs"));
    for (size_t i = 0; i < sizeof(binary_ops) / sizeof(binary_ops[0]); i++)
        if (strcmp(binary_ops[i].op, op) == 0)
            return ERR(tx_cpu_binary(binary_ops[i].b, IN(c, 0), IN(c, 1), OUT(c, 0)));
    return tx_error(TEEXEC_ERR_INTERNAL, "no binary kernel for %s", op);
}

static teexec_status *op_variadic(const tx_op_call *c)
{
    const char *op = c->node->op_type;
    tx_variadic_op v = strcmp(op, "Min") == 0   ? TX_VARIADIC_MIN
                       : strcmp(op, "Max") == 0 ? TX_VARIADIC_MAX
                       : strcmp(op, "Sum") == 0 ? TX_VARIADIC_SUM
                                                : TX_VARIADIC_MEAN;
    for (size_t i = 0; i < c->n_in; i++)
        if (!c->in[i]) return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "input %zu is missing", i));
    return ERR(tx_cpu_variadic(v, c->n_in, c->in, OUT(c, 0)));
}

static teexec_status *op_where(const tx_op_call *c)
{
    return ERR(tx_cpu_where(IN(c, 0), IN(c, 1), IN(c, 2), OUT(c, 0)));
}

/* ---- matrix products ---------------------------------------------------- */

static teexec_status *op_matmul(const tx_op_call *c)
{
    return ERR(tx_cpu_matmul(IN(c, 0), IN(c, 1), OUT(c, 0)));
}

static teexec_status *op_gemm(const tx_op_call *c)
{
    float alpha, beta;
    int64_t ta, tb;
    TX_TRY(tx_ir_attr_float(c->node, "alpha", 1.0f, &alpha));
    TX_TRY(tx_ir_attr_float(c->node, "beta", 1.0f, &beta));
    TX_TRY(tx_ir_attr_int(c->node, "transA", 0, &ta));
    TX_TRY(tx_ir_attr_int(c->node, "transB", 0, &tb));
    return ERR(tx_cpu_gemm(IN(c, 0), IN(c, 1), IN(c, 2), alpha, beta, ta != 0, tb != 0,
                           OUT(c, 0)));
}

static teexec_status *op_einsum(const tx_op_call *c)
{
    const char *eq;
    TX_TRY(tx_ir_attr_string(c->node, "equation", NULL, &eq, NULL));
    if (!eq) return tx_ir_attr_missing(c->node, "equation");
    return ERR(tx_cpu_einsum(eq, c->n_in, c->in, OUT(c, 0)));
}

/* ---- normalization ------------------------------------------------------ */

/* Softmax/LogSoftmax: before opset 13 the default axis is 1 and the input
 * is coerced to 2-D around it; from 13 the default is -1 and the axis
 * stands alone. */
static teexec_status *op_softmax(const tx_op_call *c)
{
    bool legacy = c->node->opset < 13;
    int64_t axis;
    TX_TRY(tx_ir_attr_int(c->node, "axis", legacy ? 1 : -1, &axis));
    if (strcmp(c->node->op_type, "Softmax") == 0)
        return ERR(tx_cpu_softmax(IN(c, 0), axis, legacy, OUT(c, 0)));
    return ERR(tx_cpu_log_softmax(IN(c, 0), axis, legacy, OUT(c, 0)));
}

static teexec_status *op_layernorm(const tx_op_call *c)
{
    int64_t axis, stash;
    float eps;
    TX_TRY(tx_ir_attr_int(c->node, "axis", -1, &axis));
    TX_TRY(tx_ir_attr_int(c->node, "stash_type", 1, &stash));
    TX_TRY(tx_ir_attr_float(c->node, "epsilon", 1e-5f, &eps));
    return ERR(tx_cpu_layer_norm(IN(c, 0), IN(c, 1), IN(c, 2), axis, eps, (int)stash, OUT(c, 0),
                                 OUT(c, 1), OUT(c, 2)));
}

/* ---- reductions --------------------------------------------------------- */

static teexec_status *op_reduce(const tx_op_call *c)
{
    const char *op = c->node->op_type;
    tx_reduce_op r = strcmp(op, "ReduceSum") == 0    ? TX_REDUCE_SUM
                     : strcmp(op, "ReduceMean") == 0 ? TX_REDUCE_MEAN
                     : strcmp(op, "ReduceMax") == 0  ? TX_REDUCE_MAX
                     : strcmp(op, "ReduceMin") == 0  ? TX_REDUCE_MIN
                                                     : TX_REDUCE_PROD;
    bool axes_input = r == TX_REDUCE_SUM ? c->node->opset >= 13 : c->node->opset >= 18;
    int64_t keep, noop;
    TX_TRY(tx_ir_attr_int(c->node, "keepdims", 1, &keep));
    TX_TRY(tx_ir_attr_int(c->node, "noop_with_empty_axes", 0, &noop));
    const int64_t *axes = NULL;
    size_t naxes = 0;
    int64_t *owned = NULL;
    if (axes_input) {
        if (IN(c, 1)) TX_TRY(ERR(tx_tensor_read_ints(IN(c, 1), &owned, &naxes)));
        axes = owned;
    } else {
        TX_TRY(tx_ir_attr_ints(c->node, "axes", &axes, &naxes));
    }
    teexec_status *st = tx_cpu_reduce(r, IN(c, 0), axes, naxes, keep != 0, noop != 0, OUT(c, 0));
    free(owned);
    return ERR(st);
}

static teexec_status *op_argmax(const tx_op_call *c)
{
    int64_t axis, keep, last;
    TX_TRY(tx_ir_attr_int(c->node, "axis", 0, &axis));
    TX_TRY(tx_ir_attr_int(c->node, "keepdims", 1, &keep));
    TX_TRY(tx_ir_attr_int(c->node, "select_last_index", 0, &last));
    if (strcmp(c->node->op_type, "ArgMax") == 0)
        return ERR(tx_cpu_argmax(IN(c, 0), axis, keep != 0, last != 0, OUT(c, 0)));
    return ERR(tx_cpu_argmin(IN(c, 0), axis, keep != 0, last != 0, OUT(c, 0)));
}

static teexec_status *op_topk(const tx_op_call *c)
{
    int64_t axis, largest, sorted, k;
    TX_TRY(tx_ir_attr_int(c->node, "axis", -1, &axis));
    TX_TRY(tx_ir_attr_int(c->node, "largest", 1, &largest));
    TX_TRY(tx_ir_attr_int(c->node, "sorted", 1, &sorted));
    if (c->node->opset < 10) {
        TX_TRY(tx_ir_attr_int(c->node, "k", 0, &k));
    } else {
        int64_t *v;
        size_t nv;
        if (!IN(c, 1)) return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "needs input K"));
        TX_TRY(ERR(tx_tensor_read_ints(IN(c, 1), &v, &nv)));
        if (nv != 1) {
            free(v);
            return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "K must have one element"));
        }
        k = v[0];
        free(v);
    }
    /* the indices output is optional in the graph but the kernel writes both */
    tx_tensor scratch;
    memset(&scratch, 0, sizeof(scratch));
    tx_tensor *idx = OUT(c, 1);
    if (!idx) {
        TX_TRY(tx_tensor_alloc(&scratch, TEEXEC_DTYPE_INT64, OUT(c, 0)->rank, OUT(c, 0)->dims));
        idx = &scratch;
    }
    teexec_status *st = tx_cpu_topk(IN(c, 0), k, axis, largest != 0, sorted != 0, OUT(c, 0), idx);
    tx_tensor_release(&scratch);
    return ERR(st);
}

static teexec_status *op_cumsum(const tx_op_call *c)
{
    int64_t excl, rev;
    TX_TRY(tx_ir_attr_int(c->node, "exclusive", 0, &excl));
    TX_TRY(tx_ir_attr_int(c->node, "reverse", 0, &rev));
    if (!IN(c, 1)) return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "needs input axis"));
    int64_t *v;
    size_t nv;
    TX_TRY(ERR(tx_tensor_read_ints(IN(c, 1), &v, &nv)));
    if (nv != 1) {
        free(v);
        return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "axis must have one element"));
    }
    int64_t axis = v[0];
    free(v);
    return ERR(tx_cpu_cumsum(IN(c, 0), axis, excl != 0, rev != 0, OUT(c, 0)));
}

/* ---- the table ---------------------------------------------------------- */

typedef struct op_entry {
    const char *op;
    int64_t min_opset;
    tx_op_fn fn;
} op_entry;

static const op_entry table[] = {
    {"Neg", 1, op_unary}, {"Abs", 1, op_unary}, {"Sign", 9, op_unary}, {"Relu", 1, op_unary},
    {"Sqrt", 1, op_unary}, {"Reciprocal", 1, op_unary}, {"Exp", 1, op_unary},
    {"Log", 1, op_unary}, {"Erf", 9, op_unary}, {"Tanh", 1, op_unary},
    {"Sigmoid", 1, op_unary}, {"LeakyRelu", 1, op_unary}, {"Elu", 1, op_unary},
    {"Softplus", 1, op_unary}, {"Floor", 1, op_unary}, {"Ceil", 1, op_unary},
    {"Round", 11, op_unary}, {"Gelu", 20, op_gelu}, {"Not", 1, op_not},
    {"IsNaN", 9, op_isnan}, {"IsInf", 10, op_isinf}, {"Clip", 1, op_clip},
    {"Add", 1, op_binary}, {"Sub", 1, op_binary}, {"Mul", 1, op_binary},
    {"Div", 1, op_binary}, {"Pow", 1, op_binary}, {"Equal", 1, op_binary},
    {"Less", 1, op_binary}, {"LessOrEqual", 12, op_binary}, {"Greater", 1, op_binary},
    {"GreaterOrEqual", 12, op_binary}, {"And", 1, op_binary}, {"Or", 1, op_binary},
    {"Xor", 1, op_binary},
    {"Min", 1, op_variadic}, {"Max", 1, op_variadic}, {"Sum", 1, op_variadic},
    {"Mean", 1, op_variadic}, {"Where", 9, op_where},
    {"MatMul", 1, op_matmul}, {"Gemm", 1, op_gemm}, {"Einsum", 12, op_einsum},
    {"Softmax", 1, op_softmax}, {"LogSoftmax", 1, op_softmax},
    {"LayerNormalization", 17, op_layernorm},
    {"ReduceSum", 1, op_reduce}, {"ReduceMean", 1, op_reduce}, {"ReduceMax", 1, op_reduce},
    {"ReduceMin", 1, op_reduce}, {"ReduceProd", 1, op_reduce},
    {"ArgMax", 1, op_argmax}, {"ArgMin", 1, op_argmax}, {"TopK", 1, op_topk},
    {"CumSum", 11, op_cumsum},
    {"Reshape", 1, tx_cpu_op_reshape}, {"Squeeze", 1, tx_cpu_op_reshape},
    {"Unsqueeze", 1, tx_cpu_op_reshape}, {"Flatten", 1, tx_cpu_op_reshape},
    {"Identity", 1, tx_cpu_op_reshape}, {"Dropout", 1, tx_cpu_op_dropout},
    {"Shape", 1, tx_cpu_op_shape}, {"Size", 1, tx_cpu_op_size},
    {"Constant", 1, tx_cpu_op_constant}, {"ConstantOfShape", 9, tx_cpu_op_constant_of_shape},
    {"Cast", 1, tx_cpu_op_cast}, {"CastLike", 15, tx_cpu_op_cast},
    {"Transpose", 1, tx_cpu_op_transpose}, {"Concat", 1, tx_cpu_op_concat},
    {"Split", 2, tx_cpu_op_split}, {"Slice", 1, tx_cpu_op_slice},
    {"Gather", 1, tx_cpu_op_gather}, {"GatherElements", 11, tx_cpu_op_gather_elements},
    {"Expand", 8, tx_cpu_op_expand}, {"Tile", 6, tx_cpu_op_tile},
    {"Range", 11, tx_cpu_op_range}, {"Trilu", 14, tx_cpu_op_trilu},
    {"Sin", 7, op_unary}, {"Cos", 7, op_unary},
    {"Conv", 1, tx_cpu_op_conv}, {"GatherND", 11, tx_cpu_op_gather_nd},
    {"RMSNormalization", 23, tx_cpu_op_rms_norm}, {"Attention", 23, tx_cpu_op_attention},
};

bool tx_cpu_op_at(size_t i, const char **domain, const char **op_type, int64_t *min_opset)
{
    size_t n = sizeof(table) / sizeof(table[0]);
    if (i >= n) return tx_cpu_quant_op_at(i - n, domain, op_type, min_opset);
    *domain = "";
    *op_type = table[i].op;
    *min_opset = table[i].min_opset;
    return true;
}

tx_op_fn tx_cpu_op_find(const char *domain, const char *op_type, int64_t opset)
{
    tx_op_fn quant = tx_cpu_quant_op_find(domain, op_type, opset); /* exec/cpu_ops_quant.c */
    if (quant) return quant;
    if (tx_te_domain(domain)) return tx_cpu_te_op_find(op_type, opset); /* exec/cpu_te_ops.c */
    if (domain && domain[0] && strcmp(domain, "ai.onnx") != 0) return NULL;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strcmp(table[i].op, op_type) == 0)
            return opset >= table[i].min_opset && tx_infer_op_known(domain, op_type, opset)
                       ? table[i].fn
                       : NULL;
    return NULL;
}
