/* std_cuda_math.c - the elementwise ops of the CUDA standard node
 * (std_cuda_internal.h): arithmetic (float operands through
 * tx_cuda_ew_forward, which has the broadcast-reduced grads; every other
 * dtype through tx_cuda_binary), comparisons and logic, unary math with its
 * backward, Not, IsNaN, IsInf, Clip, variadic Min / Max / Sum / Mean, and
 * Where. */
#include "exec/cuda/std_cuda_internal.h"

#include "base/shape.h"
#include "kernels/cpu/convert.h"
#include "kernels/cuda/std_binary.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IN(n, i) tx_std_in(n, i)

/* ---- prepare ------------------------------------------------------------------------- */

/* The iteration space (the output's dims) and each operand's broadcast
 * strides and grad plan. */
static teexec_status *prep_bcast(tx_cuda_std_node *n, size_t n_operands)
{
    const tx_tensor *y = &n->out[0];
    TX_TRY(tx_std_need_rank(n, y->rank));
    tx_shape ys = tx_shape_of(y);
    n->bc.rank = y->rank;
    memcpy(n->bc.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
    for (size_t i = 0; i < n_operands; i++) {
        const tx_tensor *t = IN(n, i);
        if (!t) return UNSUP("input %zu is missing", i);
        tx_shape ts = tx_shape_of(t);
        if (t->rank > y->rank || !tx_shape_broadcastable_to(&ts, &ys))
            return UNSUP("input %zu does not broadcast to the output", i);
        tx_std_bcast_strides(t, y->rank, y->dims, n->bc.st[i]);
        tx_std_bgrad_init(&n->bg[i], y, n->bc.st[i]);
    }
    return NULL;
}

static tx_std_ew_op ew_of(tx_binary_op b)
{
    switch (b) {
    case TX_BINARY_ADD: return TX_STD_EW_ADD;
    case TX_BINARY_SUB: return TX_STD_EW_SUB;
    case TX_BINARY_MUL: return TX_STD_EW_MUL;
    case TX_BINARY_DIV: return TX_STD_EW_DIV;
    default: return TX_STD_EW_POW;
    }
}

static teexec_status *prep_binary(tx_cuda_std_node *n)
{
    if (n->n_in != 2) return UNSUP("needs two inputs");
    TX_TRY(prep_bcast(n, 2));
    n->bin = (tx_binary_op)n->op->sub;
    teexec_dtype a = n->in[0].dtype, b = n->in[1].dtype, y = n->out[0].dtype;
    /* float arithmetic: the kernel with grads (Pow's exponent may be any
     * numeric dtype, read as float as the CPU does) */
    if (n->kind == TX_SK_ARITH && tx_std_is_f16(a) && tx_std_is_f16(y) &&
        (tx_std_is_f16(b) || (n->bin == TX_BINARY_POW && tx_std_dom_numeric(tx_std_dom_of(b))))) {
        if (n->bin != TX_BINARY_POW && a != b) return UNSUP("the operands' dtypes differ");
        if (y != a) return UNSUP("the output's dtype differs from the operands'");
        n->ew_path = true;
        n->ew = ew_of(n->bin);
        return NULL;
    }
    teexec_dtype want;
    const char *why;
    if (!tx_cuda_binary_types(n->bin, a, b, &want, &why))
        return UNSUP("%s (%s, %s)", why, teexec_dtype_name(a), teexec_dtype_name(b));
    if (want != y) return UNSUP("the output should be %s", teexec_dtype_name(want));
    return NULL;
}

static teexec_status *prep_unary(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    if (x->numel != y->numel) return UNSUP("input and output element counts differ");
    n->un = (tx_unary_op)n->op->sub;
    n->alpha = 0.0f;
    if (n->un == TX_UNARY_GELU) {
        const char *approx;
        TX_TRY(tx_ir_attr_string(n->node, "approximate", "none", &approx, NULL));
        if (!strcmp(approx, "tanh")) n->un = TX_UNARY_GELU_TANH;
        else if (strcmp(approx, "none") != 0)
            return UNSUP("approximate must be \"none\" or \"tanh\", not \"%s\"", approx);
    }
    if (n->un == TX_UNARY_LEAKY_RELU) TX_TRY(tx_ir_attr_float(n->node, "alpha", 0.01f, &n->alpha));
    if (n->un == TX_UNARY_ELU) TX_TRY(tx_ir_attr_float(n->node, "alpha", 1.0f, &n->alpha));
    switch (n->kind) {
    case TX_SK_UNARY:
        if (y->dtype != x->dtype) return UNSUP("input and output dtypes differ");
        if (!tx_cuda_unary_dtype_ok(n->un, x->dtype))
            return UNSUP("%s is not supported for this op", teexec_dtype_name(x->dtype));
        return NULL;
    case TX_SK_NOT:
        if (x->dtype != TEEXEC_DTYPE_BOOL || y->dtype != TEEXEC_DTYPE_BOOL)
            return UNSUP("Not takes and gives bool");
        return NULL;
    default: { /* IsNaN, IsInf */
        if (y->dtype != TEEXEC_DTYPE_BOOL) return UNSUP("the output must be bool");
        int64_t pos = 1, neg = 1;
        if (n->kind == TX_SK_ISINF) {
            TX_TRY(tx_ir_attr_int(n->node, "detect_positive", 1, &pos));
            TX_TRY(tx_ir_attr_int(n->node, "detect_negative", 1, &neg));
        }
        n->flag_a = pos != 0;
        n->flag_b = neg != 0;
        return NULL;
    }
    }
}

/* A float attribute bound rounded to x's dtype, as the CPU's Clip-6 does. */
static teexec_status *attr_bound(tx_cuda_std_node *n, const char *name, float def, double *out)
{
    float v;
    TX_TRY(tx_ir_attr_float(n->node, name, def, &v));
    uint8_t tmp[8];
    TX_TRY(tx_std_at(n, tx_convert_from_f32(&v, tmp, n->in[0].dtype, 1, NULL)));
    return tx_std_at(n, tx_convert(tmp, n->in[0].dtype, out, TEEXEC_DTYPE_DOUBLE, 1, NULL));
}

static teexec_status *prep_clip(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    if (y->dtype != x->dtype || y->numel != x->numel) return UNSUP("output does not fit the input");
    n->clip_lo_host = n->clip_hi_host = false;
    if (n->node->opset < 11) {
        if (!tx_std_dom_float(tx_std_dom_of(x->dtype))) return UNSUP("Clip-6 takes floats");
        TX_TRY(attr_bound(n, "min", -INFINITY, &n->clip_lo));
        TX_TRY(attr_bound(n, "max", INFINITY, &n->clip_hi));
        n->clip_lo_host = n->clip_hi_host = true;
        float lo, hi;
        TX_TRY(tx_ir_attr_float(n->node, "min", -INFINITY, &lo));
        TX_TRY(tx_ir_attr_float(n->node, "max", INFINITY, &hi));
        n->clip_lo_attr = lo;
        n->clip_hi_attr = hi;
        return NULL;
    }
    for (size_t i = 1; i < 3; i++) {
        const tx_tensor *b = IN(n, i);
        if (!b) continue;
        if (b->dtype != x->dtype) return UNSUP("bound %zu has another dtype than the input", i);
        if (b->numel != 1) return UNSUP("bound %zu must be a scalar", i);
    }
    return NULL;
}

static teexec_status *prep_variadic(tx_cuda_std_node *n)
{
    const tx_tensor *y = &n->out[0];
    if (n->n_in < 1) return UNSUP("needs at least one input");
    TX_TRY(tx_std_need_rank(n, y->rank));
    tx_shape ys = tx_shape_of(y);
    n->vst = calloc(n->n_in, sizeof *n->vst);
    n->vbg = calloc(n->n_in, sizeof *n->vbg);
    if (!n->vst || !n->vbg) return tx_oom();
    for (size_t i = 0; i < n->n_in; i++) {
        const tx_tensor *t = IN(n, i);
        if (!t) return UNSUP("input %zu is missing", i);
        if (t->dtype != y->dtype) return UNSUP("input %zu has another dtype than the output", i);
        tx_shape ts = tx_shape_of(t);
        if (t->rank > y->rank || !tx_shape_broadcastable_to(&ts, &ys))
            return UNSUP("input %zu does not broadcast to the output", i);
        tx_std_bcast_strides(t, y->rank, y->dims, n->vst[i]);
        tx_std_bgrad_init(&n->vbg[i], y, n->vst[i]);
    }
    n->scratch = tx_std_align((size_t)y->numel * 8); /* the accumulator; the backward's ties */
    return NULL;
}

static teexec_status *prep_where(tx_cuda_std_node *n)
{
    if (n->n_in != 3) return UNSUP("needs three inputs");
    TX_TRY(prep_bcast(n, 3));
    const tx_tensor *y = &n->out[0];
    if (n->in[0].dtype != TEEXEC_DTYPE_BOOL) return UNSUP("condition must be bool");
    if (n->in[1].dtype != y->dtype || n->in[2].dtype != y->dtype)
        return UNSUP("x, y and the output must share a dtype");
    return NULL;
}

teexec_status *tx_std_prep_math(tx_cuda_std_node *n, const tx_cuda_std_desc *d)
{
    (void)d;
    switch (n->kind) {
    case TX_SK_ARITH:
    case TX_SK_COMPARE: return prep_binary(n);
    case TX_SK_UNARY:
    case TX_SK_NOT:
    case TX_SK_ISNAN:
    case TX_SK_ISINF: return prep_unary(n);
    case TX_SK_CLIP: return prep_clip(n);
    case TX_SK_VARIADIC: return prep_variadic(n);
    case TX_SK_WHERE: return prep_where(n);
    default: return UNSUP("not an elementwise op");
    }
}

/* ---- forward ---------------------------------------------------------------------------- */

teexec_status *tx_std_fwd_math(tx_cuda_std_node *n, const tx_tensor *const *in,
                               tx_tensor *const *out, void *scratch, void *stream)
{
    const tx_tensor *y0 = &n->out[0];
    size_t count = (size_t)y0->numel;
    switch (n->kind) {
    case TX_SK_ARITH:
    case TX_SK_COMPARE:
        if (n->ew_path)
            return tx_std_at(n, tx_cuda_ew_forward(n->ew, &n->bc, in[0]->data, n->in[0].dtype,
                                                   in[1]->data, n->in[1].dtype, out[0]->data,
                                                   y0->dtype, stream));
        return tx_std_at(n, tx_cuda_binary(n->bin, &n->bc, in[0]->data, n->in[0].dtype,
                                           in[1]->data, n->in[1].dtype, out[0]->data, y0->dtype,
                                           stream));
    case TX_SK_UNARY:
        return tx_std_at(n, tx_cuda_unary(n->un, n->alpha, in[0]->data, out[0]->data, y0->dtype,
                                          count, stream));
    case TX_SK_NOT:
        return tx_std_at(n, tx_cuda_not(in[0]->data, out[0]->data, count, stream));
    case TX_SK_ISNAN:
    case TX_SK_ISINF:
        return tx_std_at(n, tx_cuda_isnan_isinf(n->kind == TX_SK_ISINF, n->flag_a, n->flag_b,
                                                in[0]->data, n->in[0].dtype, out[0]->data, count,
                                                stream));
    case TX_SK_CLIP: {
        tx_cuda_clip_bound lo = {NULL, n->clip_lo_host, n->clip_lo},
                           hi = {NULL, n->clip_hi_host, n->clip_hi};
        if (!n->clip_lo_host && IN(n, 1)) lo.dev = in[1]->data;
        if (!n->clip_hi_host && IN(n, 2)) hi.dev = in[2]->data;
        return tx_std_at(n, tx_cuda_clip(in[0]->data, out[0]->data, y0->dtype, count, lo, hi,
                                         stream));
    }
    case TX_SK_VARIADIC: {
        tx_variadic_op op = (tx_variadic_op)n->op->sub;
        for (size_t i = 0; i < n->n_in; i++)
            TX_TRY(tx_std_at(n, tx_cuda_variadic_step(op, i == 0, y0->rank, y0->dims, n->vst[i],
                                                      in[i]->data, y0->dtype, scratch, stream)));
        return tx_std_at(n, tx_cuda_variadic_finish(op, n->n_in, scratch, out[0]->data,
                                                    y0->dtype, count, stream));
    }
    case TX_SK_WHERE:
        return tx_std_at(n, tx_cuda_where_forward(&n->bc, in[0]->data, in[1]->data, in[2]->data,
                                                  out[0]->data, tx_dtype_elem_size(y0->dtype),
                                                  stream));
    default: return tx_std_node_err(n->node, TEEXEC_ERR_INTERNAL, "not an elementwise op");
    }
}

/* ---- backward ------------------------------------------------------------------------ */

/* Float arithmetic and Where: every wanted input grad through the
 * broadcast-reduction kernel with the op's term. */
static teexec_status *bwd_bcast(tx_cuda_std_node *n, const tx_tensor *const *in,
                                const tx_tensor *const *out, const tx_tensor *const *gout,
                                tx_tensor *const *gin, void *stream)
{
    const tx_tensor *y = &n->out[0];
    bool where = n->kind == TX_SK_WHERE;
    for (size_t i = where ? 1 : 0; i < n->n_in; i++) {
        if (!gin[i]) continue;
        const tx_tensor *x = &n->in[i];
        if (!gout[0]) {
            TX_TRY(tx_std_memset0(n, gin[i]->data, x->nbytes, stream));
            continue;
        }
        tx_cuda_bgrad p = n->bg[i];
        tx_cuda_bgrad_ops o = {.g = gout[0]->data, .g_dtype = y->dtype, .y = out[0]->data,
                               .y_dtype = y->dtype};
        tx_std_grad_term term = TX_STD_GT_G;
        if (where) {
            memcpy(p.st_c, n->bc.st[0], sizeof p.st_c);
            o.cond = in[0]->data;
            term = i == 1 ? TX_STD_GT_WHERE_X : TX_STD_GT_WHERE_Y;
        } else {
            /* operand roles: "a" is this input, "b" the other one; Div's
             * and Pow's grads read them as written (a numerator / base) */
            bool as_written = n->ew == TX_STD_EW_POW || (n->ew == TX_STD_EW_DIV && i == 1);
            size_t ia = as_written ? 0 : i, ib = as_written ? 1 : 1 - i;
            memcpy(p.st_a, n->bc.st[ia], sizeof p.st_a);
            memcpy(p.st_b, n->bc.st[ib], sizeof p.st_b);
            o.a = in[ia]->data;
            o.a_dtype = n->in[ia].dtype;
            o.b = in[ib]->data;
            o.b_dtype = n->in[ib].dtype;
            switch (n->ew) {
            case TX_STD_EW_ADD: term = TX_STD_GT_G; break;
            case TX_STD_EW_SUB: term = i == 0 ? TX_STD_GT_G : TX_STD_GT_NEG_G; break;
            case TX_STD_EW_MUL: term = TX_STD_GT_MUL; break; /* g * other */
            case TX_STD_EW_DIV: term = i == 0 ? TX_STD_GT_DIV_A : TX_STD_GT_DIV_B; break;
            default: term = i == 0 ? TX_STD_GT_POW_A : TX_STD_GT_POW_B; break;
            }
        }
        TX_TRY(tx_std_at(n, tx_cuda_bcast_grad(term, &p, &o, gin[i]->data, x->dtype, stream)));
    }
    return NULL;
}

/* Sum / Mean: the output grad (over n for Mean) summed over each input's
 * broadcast dims; Max / Min: split among the inputs holding the extreme. */
static teexec_status *bwd_variadic(tx_cuda_std_node *n, const tx_tensor *const *in,
                                   const tx_tensor *const *out, const tx_tensor *const *gout,
                                   tx_tensor *const *gin, void *scratch, void *stream)
{
    const tx_tensor *y = &n->out[0];
    tx_variadic_op op = (tx_variadic_op)n->op->sub;
    bool extreme = op == TX_VARIADIC_MAX || op == TX_VARIADIC_MIN;
    if (gout[0] && extreme)
        for (size_t i = 0; i < n->n_in; i++)
            TX_TRY(tx_std_at(n, tx_cuda_variadic_ties(i == 0, y->rank, y->dims, n->vst[i],
                                                      in[i]->data, n->in[i].dtype, out[0]->data,
                                                      y->dtype, scratch, stream)));
    for (size_t i = 0; i < n->n_in; i++) {
        if (!gin[i]) continue;
        if (!gout[0]) {
            TX_TRY(tx_std_memset0(n, gin[i]->data, n->in[i].nbytes, stream));
            continue;
        }
        tx_cuda_bgrad p = n->vbg[i];
        tx_cuda_bgrad_ops o = {.g = gout[0]->data, .g_dtype = y->dtype, .y = out[0]->data,
                               .y_dtype = y->dtype, .scale = 1.0 / (double)n->n_in,
                               .ties = scratch, .a = in[i]->data, .a_dtype = n->in[i].dtype};
        memcpy(p.st_a, n->vst[i], sizeof p.st_a);
        tx_std_grad_term term = extreme ? TX_STD_GT_EXTREME
                                : op == TX_VARIADIC_MEAN ? TX_STD_GT_SCALE : TX_STD_GT_G;
        TX_TRY(tx_std_at(n, tx_cuda_bcast_grad(term, &p, &o, gin[i]->data, n->in[i].dtype, stream)));
    }
    return NULL;
}

teexec_status *tx_std_bwd_math(tx_cuda_std_node *n, const tx_tensor *const *in,
                               const tx_tensor *const *out, const tx_tensor *const *gout,
                               tx_tensor *const *gin, void *scratch, void *stream)
{
    switch (n->kind) {
    case TX_SK_ARITH:
        if (!n->ew_path) break;
        return bwd_bcast(n, in, out, gout, gin, stream);
    case TX_SK_WHERE: return bwd_bcast(n, in, out, gout, gin, stream);
    case TX_SK_VARIADIC: return bwd_variadic(n, in, out, gout, gin, scratch, stream);
    case TX_SK_UNARY:
        if (!tx_cuda_unary_has_backward(n->un)) break;
        if (!gin[0]) return NULL;
        if (!gout[0]) return tx_std_memset0(n, gin[0]->data, n->in[0].nbytes, stream);
        return tx_std_at(n, tx_cuda_unary_backward(n->un, n->alpha, in[0]->data, out[0]->data,
                                                   gout[0]->data, gin[0]->data, n->in[0].dtype,
                                                   (size_t)n->in[0].numel, stream));
    case TX_SK_CLIP: {
        if (!gin[0]) return NULL;
        if (!gout[0]) return tx_std_memset0(n, gin[0]->data, n->in[0].nbytes, stream);
        const void *lo = NULL, *hi = NULL;
        double lov = -INFINITY, hiv = INFINITY;
        if (n->clip_lo_host) {
            lov = n->clip_lo_attr;
            hiv = n->clip_hi_attr;
        } else {
            if (IN(n, 1)) lo = in[1]->data;
            if (IN(n, 2)) hi = in[2]->data;
        }
        return tx_std_at(n, tx_cuda_clip_backward(in[0]->data, gout[0]->data, gin[0]->data,
                                                  n->in[0].dtype, (size_t)n->in[0].numel, lo, lov,
                                                  hi, hiv, stream));
    }
    default: break;
    }
    return tx_std_node_err(n->node, TEEXEC_ERR_UNSUPPORTED, "no backward on the GPU");
}
