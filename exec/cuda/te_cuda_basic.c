/* te_cuda_basic.c - the te.ops basic ops on the GPU (tx_cuda_te_basic_impl,
 * te_cuda.h): Identity, Quantize (without a recipe: the executor's
 * quantizers run at the hand-offs, as on the CPU), Reshape, Bias,
 * ConstantScale, AddExtraInput, MakeExtraOutput, LayerNorm, RMSNorm, every
 * activation, Dropout, RotaryEmbedding and Embedding, over the kernels of
 * kernels/cuda.
 *
 * Prepare refuses (TEEXEC_ERR_UNSUPPORTED, "op NAME (OpType): reason")
 * what no kernel here runs: float64 tensors (the FP64 finite-difference
 * path is the CPU's), shapes the kernels cannot take. No backward here uses
 * float atomics (column sums and row sums are fixed-order two-stage or
 * per-block reductions, Embedding's backward sums each row's run of
 * indices in index order after a stable sort), so a
 * deterministic request never makes one refuse. No state is kept from
 * forward to backward besides the schema's aux; scratch holds the
 * reductions' partial sums, RoPE's cos/sin table, an FP32 copy of
 * non-FP32 freqs and Embedding's index sort.
 *
 * Ownership: the node's private data is a small malloc'd struct freed by
 * free_priv. Thread-safety: one host thread per node. */
#include "exec/cuda/te_cuda_basic.h"

#include "base/checked.h"
#include "exec/comm.h"
#include "exec/cuda/te_cuda.h"
#include "kernels/cuda/act.h"
#include "kernels/cuda/act_ext.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/scale_bias.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct basic_priv {
    tx_te_op_id op;
    char label[160];       /* "op NAME (OpType)" for messages */
    size_t scratch_bytes;
} basic_priv;

/* ---- shared helpers (te_cuda_basic.h) ---------------------------------- */

void tx_cuda_basic_rows(const tx_tensor *t, int inner_rank, size_t *rows, size_t *cols)
{
    size_t r = 1, c = 1;
    int lead = t->rank - inner_rank;
    if (lead < 0) lead = 0;
    for (int d = 0; d < t->rank; d++) {
        if (d < lead) r *= (size_t)t->dims[d];
        else c *= (size_t)t->dims[d];
    }
    *rows = r;
    *cols = c;
}

bool tx_cuda_basic_add_region(size_t *total, size_t bytes)
{
    size_t rounded;
    if (!tx_add_size(bytes, TX_CUDA_BASIC_ALIGN - 1, &rounded)) return false;
    rounded -= rounded % TX_CUDA_BASIC_ALIGN;
    return tx_add_size(*total, rounded, total) != 0;
}

static bool is_activation(tx_te_op_id op) { return tx_te_op_is(op, TX_TE_CLASS_ACTIVATION); }

bool tx_cuda_basic_act_plain(tx_te_op_id op) { return tx_te_op_is_elementwise_act(op); }

/* NULL attributes are the schema's defaults (tanh). */
static bool gelu_erf(const tx_te_attr_value *attrs)
{
    return attrs && attrs[TX_TE_A_GELU_APPROX].i == TX_TE_GELU_ERF;
}

/* act_ext.h's function for a schema act fn (the CUDA math's own ids). */
static bool actx_fn(tx_te_act_fn fn, const tx_te_attr_value *attrs, tx_cuda_actx_fn *out)
{
    switch (fn) {
    case TX_TE_ACT_GELU: *out = gelu_erf(attrs) ? TX_CUDA_ACTX_GELU_ERF : TX_CUDA_ACTX_GELU_TANH; return true;
    case TX_TE_ACT_QGELU: *out = TX_CUDA_ACTX_QGELU; return true;
    case TX_TE_ACT_RELU: *out = TX_CUDA_ACTX_RELU; return true;
    case TX_TE_ACT_SRELU: *out = TX_CUDA_ACTX_SRELU; return true;
    case TX_TE_ACT_SILU: *out = TX_CUDA_ACTX_SILU; return true;
    case TX_TE_ACT_SIGMOID: *out = TX_CUDA_ACTX_SIGMOID; return true;
    case TX_TE_ACT_SITU: *out = TX_CUDA_ACTX_SITU; return true;
    default: return false;
    }
}

/* Everything but the function comes from the schema entry (class bits and
 * cap), so a new activation needs no case here. */
bool tx_cuda_basic_actx_of(tx_te_op_id op, const tx_te_attr_value *attrs, tx_cuda_actx_args *out)
{
    tx_cuda_actx_args a;
    memset(&a, 0, sizeof a);
    const tx_te_op_schema *s = tx_te_schema(op);
    if (!s || !(s->op_class & TX_TE_CLASS_ACTIVATION) || !actx_fn(s->act_fn, attrs, &a.fn))
        return false;
    a.gated = (s->op_class & TX_TE_CLASS_GATED) != 0;
    if (s->act_cap != TX_TE_CAP_NONE && !attrs) return false; /* its caps live in the attributes */
    if (s->act_cap == TX_TE_CAP_CLAMP) {
        a.clamped = 1;
        a.limit = (float)attrs[TX_TE_A_CLAMP_LIMIT].f;
        a.alpha = (float)attrs[TX_TE_A_CLAMP_ALPHA].f;
        a.offset = (float)attrs[TX_TE_A_CLAMP_OFFSET].f;
    } else if (s->act_cap == TX_TE_CAP_SOFTCAP) {
        a.softcap = 1;
        a.beta1 = (float)attrs[TX_TE_A_SITU_BETA1].f;
        a.beta2 = (float)attrs[TX_TE_A_SITU_BETA2].f;
    }
    if (out) *out = a;
    return true;
}

/* The act_ext.h description of an activation this file was given (shape
 * fields left 0; a non-activation gives the zeroed description). */
static tx_cuda_actx_args actx_of(tx_te_op_id op, const tx_te_attr_value *attrs)
{
    tx_cuda_actx_args a;
    memset(&a, 0, sizeof a);
    (void)tx_cuda_basic_actx_of(op, attrs, &a);
    return a;
}

bool tx_cuda_basic_act_scaled(tx_te_op_id op) { return tx_te_op_is(op, TX_TE_CLASS_ROW_SCALED); }

teexec_status *tx_cuda_basic_act_backward(tx_te_op_id op, const tx_te_attr_value *attrs,
                                          const tx_tensor *x, const tx_tensor *scales,
                                          const tx_tensor *dy, tx_tensor *dx, tx_tensor *dscales,
                                          tx_tensor *dbias, float *colsum_ws, void *stream)
{
    size_t rows, cols;
    tx_cuda_basic_rows(dy, 1, &rows, &cols);
    if (dbias && (!dx || !tx_cuda_basic_act_plain(op)))
        return tx_error(TEEXEC_ERR_INTERNAL, "activation backward: dbias needs a plain activation and dx");
    tx_cuda_actx_args a = actx_of(op, attrs);
    a.rows = rows;
    a.cols = cols;
    a.x = x->data;
    a.x_dtype = x->dtype;
    a.dy = dy->data;
    a.dy_dtype = dy->dtype;
    if (tx_cuda_basic_act_scaled(op) && scales) {
        a.scales = scales->data;
        a.scales_dtype = scales->dtype;
    }
    if (dx) {
        a.dx = dx->data;
        a.dx_dtype = dx->dtype;
    }
    if (dscales && tx_cuda_basic_act_scaled(op)) {
        a.dscales = dscales->data;
        a.dscales_dtype = dscales->dtype;
    }
    if (dbias) {
        a.dbias = dbias->data;
        a.dbias_dtype = dbias->dtype;
        a.workspace = colsum_ws;
    }
    TX_TRY(tx_cuda_actx_backward(&a, stream));
    return NULL;
}

/* ---- prepare -------------------------------------------------------------- */

static bool io_dtype(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_BFLOAT16 || dt == TEEXEC_DTYPE_FLOAT16;
}

static teexec_status *unsupported(const basic_priv *p, const char *why)
{
    return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: %s", p->label, why);
}

/* A float tensor of the node must be FLOAT / BFLOAT16 / FLOAT16. */
static teexec_status *check_float(const basic_priv *p, const char *what, const tx_tensor *t)
{
    if (!t) return NULL;
    if (t->dtype == TEEXEC_DTYPE_DOUBLE)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s: %s is float64, which has no CUDA kernel (the FP64 path runs on the CPU)",
                        p->label, what);
    if (!io_dtype(t->dtype))
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: %s has dtype %s; the CUDA kernels take float32, "
                        "bfloat16 or float16", p->label, what, teexec_dtype_name(t->dtype));
    return NULL;
}

static teexec_status *check_all_floats(const basic_priv *p, const tx_cuda_te_desc *d)
{
    if (d->op != TX_TE_EMBEDDING) TX_TRY(check_float(p, "the input", d->input));
    for (int i = 0; i < d->n_extra_inputs; i++) TX_TRY(check_float(p, "an extra input", d->extra_inputs[i]));
    for (int i = 0; i < d->n_params; i++) TX_TRY(check_float(p, "a parameter", d->params[i]));
    TX_TRY(check_float(p, "the output", d->output));
    for (int i = 0; i < d->n_extra_outputs; i++)
        TX_TRY(check_float(p, "an extra output", d->extra_outputs[i]));
    return NULL;
}

static teexec_status *need(const basic_priv *p, const void *t, const char *what)
{
    if (t) return NULL;
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: %s is missing", p->label, what);
}

static teexec_status *oversize(const basic_priv *p)
{
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: scratch size overflows", p->label);
}

static teexec_status *prepare_norm(const basic_priv *p, const tx_cuda_te_desc *d, size_t *scratch)
{
    TX_TRY(need(p, d->n_params >= 1 ? d->params[0] : NULL, "the weight"));
    const tx_tensor *w = d->params[0];
    if (d->op == TX_TE_LAYER_NORM) {
        TX_TRY(need(p, d->n_params >= 2 ? d->params[1] : NULL, "the bias"));
        if (d->params[1]->dtype != w->dtype)
            return unsupported(p, "the CUDA norm kernel takes weight and bias of one dtype");
    }
    if (w->rank < 1 || w->rank > d->input->rank)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the weight must cover trailing dims of x",
                        p->label);
    size_t rows, h;
    tx_cuda_basic_rows(d->input, w->rank, &rows, &h);
    if (rows > 0x7fffffffu) return unsupported(p, "more than 2^31 rows");
    if (rows > 64u * 65535u)
        return unsupported(p, "too many rows for the parameter-grad chunk grid");
    size_t ws;
    if (!tx_mul_size(tx_cuda_norm_bwd_workspace_floats(rows, h), sizeof(float), &ws) ||
        !tx_cuda_basic_add_region(scratch, ws))
        return oversize(p);
    return NULL;
}

static teexec_status *prepare_rope(const basic_priv *p, const tx_cuda_te_desc *d, size_t *scratch)
{
    const tx_tensor *x = d->input;
    const tx_te_attr_value *at = d->attrs;
    if (x->rank != 4)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: x must have rank 4 (bshd or sbhd)", p->label);
    bool sbhd = at[TX_TE_A_ROPE_LAYOUT].i == TX_TE_LAYOUT_SBHD;
    int64_t s = sbhd ? x->dims[0] : x->dims[1], dh = x->dims[3], r;
    const tx_tensor *fr = d->n_extra_inputs > 0 ? d->extra_inputs[0] : NULL;
    if (fr) {
        if (fr->rank != 2 || fr->dims[0] < s)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: freqs must be [>= %lld, r]", p->label,
                            (long long)s);
        r = fr->dims[1];
    } else {
        r = at[TX_TE_A_ROPE_DIM].i ? at[TX_TE_A_ROPE_DIM].i : dh;
        if (!(at[TX_TE_A_ROPE_BASE].f > 0.0))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: base must be > 0", p->label);
    }
    if (r < 2 || r > dh || r % 2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: the rotated width %lld must be even and in [2, %lld]", p->label,
                        (long long)r, (long long)dh);
    size_t sr, bytes;
    if (!tx_mul_size((size_t)s, (size_t)r, &sr) || !tx_mul_size(sr, 2 * sizeof(float), &bytes) ||
        !tx_cuda_basic_add_region(scratch, bytes))
        return oversize(p);
    if (fr && fr->dtype != TEEXEC_DTYPE_FLOAT &&
        (!tx_mul_size(sr, sizeof(float), &bytes) || !tx_cuda_basic_add_region(scratch, bytes)))
        return oversize(p);
    return NULL;
}

static teexec_status *prepare_act(const basic_priv *p, const tx_cuda_te_desc *d)
{
    const tx_tensor *x = d->input;
    if (x->rank < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: x must have rank >= 1", p->label);
    tx_cuda_actx_args a = actx_of(d->op, d->attrs);
    if (a.gated && x->dims[x->rank - 1] % 2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: the last dim of x must be even ([gate | up])", p->label);
    if (tx_cuda_basic_act_scaled(d->op)) {
        TX_TRY(need(p, d->n_extra_inputs > 0 ? d->extra_inputs[0] : NULL, "the scales input"));
        size_t rows, cols;
        tx_cuda_basic_rows(x, 1, &rows, &cols);
        if (rows > 0x7fffffffu) return unsupported(p, "more than 2^31 rows");
    }
    return NULL;
}

static teexec_status *prepare_bias(const basic_priv *p, const tx_cuda_te_desc *d, size_t *scratch)
{
    TX_TRY(need(p, d->n_params >= 1 ? d->params[0] : NULL, "the bias"));
    const tx_tensor *x = d->input, *b = d->params[0];
    if (x->rank < 1 || b->rank != 1 || b->dims[0] != x->dims[x->rank - 1])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: bias must be [N] with N = the last dim of x", p->label);
    size_t rows, cols, bytes;
    tx_cuda_basic_rows(x, 1, &rows, &cols);
    if ((rows + 63) / 64 > 65535) return unsupported(p, "too many rows for the bias-grad grid");
    if (!tx_mul_size(tx_cuda_colsum_workspace_floats(rows, cols), sizeof(float), &bytes) ||
        !tx_cuda_basic_add_region(scratch, bytes))
        return oversize(p);
    return NULL;
}

static teexec_status *prepare_embedding(const basic_priv *p, const tx_cuda_te_desc *d,
                                        size_t *scratch)
{
    const tx_tensor *ids = d->input;
    TX_TRY(need(p, d->n_params >= 1 ? d->params[0] : NULL, "the weight"));
    if (ids->dtype != TEEXEC_DTYPE_INT64 && ids->dtype != TEEXEC_DTYPE_INT32)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: indices must be int64 or int32", p->label);
    if (d->params[0]->rank != 2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: weight must be [V, D]", p->label);
    /* the backward's index sort (kernels/cuda/embedding.h) */
    size_t ws;
    TX_TRY(tx_cuda_embedding_backward_workspace((size_t)ids->numel, (size_t)d->params[0]->dims[0],
                                                &ws));
    if (!tx_cuda_basic_add_region(scratch, ws)) return oversize(p);
    return NULL;
}

static teexec_status *basic_prepare(const tx_cuda_te_desc *d, void **priv, size_t *state_bytes,
                                    size_t *scratch_bytes)
{
    *priv = NULL;
    *state_bytes = 0;
    *scratch_bytes = 0;
    const tx_te_op_schema *s = tx_te_schema(d->op);
    if (!s || !d->input || !d->output || !d->attrs)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "op %s: incomplete description",
                        d->name ? d->name : "?");
    basic_priv *p = calloc(1, sizeof(*p));
    if (!p) return tx_oom();
    p->op = d->op;
    snprintf(p->label, sizeof p->label, "op %s (%s)", d->name ? d->name : "?", s->name);
    size_t scratch = 0;
    teexec_status *st = check_all_floats(p, d);
    if (!st) {
        switch (d->op) {
        case TX_TE_IDENTITY:
        case TX_TE_QUANTIZE:
        case TX_TE_RESHAPE:
        case TX_TE_ALL_REDUCE:
            if (d->input->numel != d->output->numel)
                st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: input and output sizes differ",
                              p->label);
            break;
        case TX_TE_CONSTANT_SCALE:
        case TX_TE_MAKE_EXTRA_OUTPUT:
            break;
        case TX_TE_ADD_EXTRA_INPUT:
            st = need(p, d->n_extra_inputs > 0 ? d->extra_inputs[0] : NULL, "the extra input");
            break;
        case TX_TE_BIAS: st = prepare_bias(p, d, &scratch); break;
        case TX_TE_LAYER_NORM:
        case TX_TE_RMS_NORM: st = prepare_norm(p, d, &scratch); break;
        case TX_TE_DROPOUT: {
            double pr = d->attrs[TX_TE_A_DROPOUT_P].f;
            if (!(pr >= 0.0 && pr < 1.0))
                st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: p must be in [0, 1), got %g",
                              p->label, pr);
            break;
        }
        case TX_TE_ROTARY_EMBEDDING: st = prepare_rope(p, d, &scratch); break;
        case TX_TE_EMBEDDING: st = prepare_embedding(p, d, &scratch); break;
        default:
            if (is_activation(d->op)) st = prepare_act(p, d);
            else st = unsupported(p, "no CUDA kernel");
            break;
        }
    }
    if (st) {
        free(p);
        return st;
    }
    p->scratch_bytes = scratch;
    *scratch_bytes = scratch;
    *priv = p;
    return NULL;
}

static void basic_free(void *priv) { free(priv); }

/* ---- forward / backward ------------------------------------------------------ */

static teexec_status *device_error(const basic_priv *p, const char *what, cudaError_t e)
{
    return tx_error(TEEXEC_ERR_DEVICE, "%s: %s failed: %s", p->label, what, cudaGetErrorString(e));
}

/* dst = src converted to dst's dtype; nothing when they are one buffer. */
static teexec_status *copy_to(const basic_priv *p, const tx_tensor *src, tx_tensor *dst,
                              void *stream)
{
    if (!dst) return NULL;
    if (src->numel != dst->numel)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: copy between %llu and %llu elements",
                        p->label, (unsigned long long)src->numel, (unsigned long long)dst->numel);
    if (src->dtype == dst->dtype) {
        if (src->data == dst->data || !src->nbytes) return NULL;
        cudaError_t e = cudaMemcpyAsync(dst->data, src->data, src->nbytes, cudaMemcpyDeviceToDevice,
                                        (cudaStream_t)stream);
        return e == cudaSuccess ? NULL : device_error(p, "cudaMemcpyAsync", e);
    }
    if (src->data == dst->data)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: in-place copy between dtypes", p->label);
    return tx_cuda_convert(src->data, src->dtype, dst->data, dst->dtype, (size_t)src->numel, stream);
}

static teexec_status *check_scratch(const basic_priv *p, const void *scratch)
{
    if (p->scratch_bytes && !scratch)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: needs %zu scratch bytes, got none", p->label,
                        p->scratch_bytes);
    return NULL;
}

static teexec_status *same_numel(const basic_priv *p, const tx_tensor *a, const tx_tensor *b,
                                 const char *what)
{
    if (a->numel == b->numel) return NULL;
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: %s has %llu elements, expected %llu",
                    p->label, what, (unsigned long long)b->numel, (unsigned long long)a->numel);
}

teexec_status *tx_cuda_basic_norm_fwd_args(const tx_te_fwd_args *a, const char *label,
                                           tx_cuda_norm_fwd *out)
{
    const bool rms = a->op == TX_TE_RMS_NORM;
    if (a->n_params < (rms ? 1 : 2) || !a->input || !a->output)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: missing norm tensors or parameters",
                        label);
    const tx_tensor *x = a->input, *w = a->params[0], *b = rms ? NULL : a->params[1];
    size_t rows, h;
    tx_cuda_basic_rows(x, w->rank, &rows, &h);
    if (a->output->numel != x->numel)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: y has %llu elements, expected %llu",
                        label, (unsigned long long)a->output->numel,
                        (unsigned long long)x->numel);
    tx_tensor *mu = NULL, *rs = NULL;
    if (a->training && a->aux && a->n_aux > 0) {
        if (rms) rs = a->aux[0];
        else {
            mu = a->aux[0];
            rs = a->n_aux > 1 ? a->aux[1] : NULL;
        }
    }
    tx_tensor *stats[2] = {mu, rs};
    for (int i = 0; i < 2; i++)
        if (stats[i] && (stats[i]->dtype != TEEXEC_DTYPE_FLOAT || stats[i]->numel != rows))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: statistics must be float32 [%zu]",
                            label, rows);
    *out = (tx_cuda_norm_fwd){.rms = rms, .rows = rows, .h = h,
                              .eps = (float)a->attrs[TX_TE_A_NORM_EPS].f,
                              .zero_centered_gamma = a->attrs[TX_TE_A_NORM_ZCG].i != 0,
                              .x = x->data, .x_dtype = x->dtype, .gamma = w->data,
                              .beta = b ? b->data : NULL, .w_dtype = w->dtype,
                              .y = a->output->data, .y_dtype = a->output->dtype,
                              .mu = mu ? mu->data : NULL, .rsigma = rs ? rs->data : NULL};
    return NULL;
}

static teexec_status *norm_fwd(const basic_priv *p, const tx_te_fwd_args *a, void *stream)
{
    tx_cuda_norm_fwd f;
    TX_TRY(tx_cuda_basic_norm_fwd_args(a, p->label, &f));
    return tx_cuda_norm_forward(&f, stream);
}

/* Also the fused BackwardAddNorm's kernel (dresid: the fork's grad). */
static teexec_status *norm_bwd_into(const basic_priv *p, const tx_te_bwd_args *a, tx_tensor *dx,
                                    const tx_tensor *dresid, void *scratch, void *stream)
{
    bool rms = a->op == TX_TE_RMS_NORM;
    int want = rms ? 3 : 4;
    if (a->n_saved != want)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: expected %d saved tensors, got %d",
                        p->label, want, a->n_saved);
    const tx_tensor *x = a->saved[0], *w = a->saved[1];
    const tx_tensor *mu = rms ? NULL : a->saved[2], *rs = a->saved[rms ? 2 : 3];
    tx_tensor *dg = a->n_grad_params > 0 ? a->grad_params[0] : NULL;
    tx_tensor *db = !rms && a->n_grad_params > 1 ? a->grad_params[1] : NULL;
    TX_TRY(need(p, x, "the saved x"));
    TX_TRY(need(p, rs, "the saved rsigma"));
    if (!rms) TX_TRY(need(p, mu, "the saved mu"));
    if (dx) TX_TRY(need(p, w, "the saved weight"));
    const tx_tensor *wlike = w ? w : dg ? dg : db;
    if (!wlike) return NULL; /* nothing wanted */
    size_t rows, h;
    tx_cuda_basic_rows(x, wlike->rank, &rows, &h);
    TX_TRY(same_numel(p, x, a->grad_output, "dy"));
    if (dx) TX_TRY(same_numel(p, x, dx, "dx"));
    if (dresid && (!dx || dresid->dtype != dx->dtype || dresid->numel != dx->numel))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the added grad must match dx", p->label);
    teexec_dtype wdt = wlike->dtype;
    if ((dg && dg->dtype != wdt) || (db && db->dtype != wdt))
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s: the CUDA norm kernel writes parameter grads in the weight's dtype",
                        p->label);
    tx_cuda_norm_bwd k = {.rms = rms, .rows = rows, .h = h,
                          .zero_centered_gamma = a->attrs[TX_TE_A_NORM_ZCG].i != 0,
                          .x = x->data, .x_dtype = x->dtype, .dy = a->grad_output->data,
                          .dy_dtype = a->grad_output->dtype, .gamma = w ? w->data : NULL,
                          .w_dtype = wdt, .mu = mu ? mu->data : NULL, .rsigma = rs->data,
                          .dx = dx ? dx->data : NULL,
                          .dx_dtype = dx ? dx->dtype : TEEXEC_DTYPE_FLOAT,
                          .dresid = dresid ? dresid->data : NULL, .dgamma = dg ? dg->data : NULL,
                          .dbeta = db ? db->data : NULL, .workspace = scratch};
    return tx_cuda_norm_backward(&k, stream);
}

static teexec_status *act_fwd(const basic_priv *p, const tx_te_fwd_args *a, void *stream)
{
    const tx_tensor *x = a->input;
    tx_tensor *y = a->output;
    size_t rows, cols;
    tx_cuda_basic_rows(y, 1, &rows, &cols);
    tx_cuda_actx_args e = actx_of(a->op, a->attrs);
    if ((uint64_t)rows * cols * (e.gated ? 2u : 1u) != x->numel)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: y does not fit x", p->label);
    e.rows = rows;
    e.cols = cols;
    e.x = x->data;
    e.x_dtype = x->dtype;
    e.y = y->data;
    e.y_dtype = y->dtype;
    if (tx_cuda_basic_act_scaled(a->op)) {
        const tx_tensor *sc = a->n_extra_inputs > 0 ? a->extra_inputs[0] : NULL;
        TX_TRY(need(p, sc, "the scales input"));
        if (sc->numel != rows)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: scales must have one entry per row",
                            p->label);
        e.scales = sc->data;
        e.scales_dtype = sc->dtype;
    }
    return tx_cuda_actx_forward(&e, stream);
}

static teexec_status *act_bwd(const basic_priv *p, const tx_te_bwd_args *a, void *stream)
{
    bool scaled = tx_cuda_basic_act_scaled(a->op);
    if (a->n_saved < (scaled ? 2 : 1) || !a->saved[0])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the saved context is incomplete", p->label);
    const tx_tensor *x = a->saved[0], *sc = scaled ? a->saved[1] : NULL;
    tx_tensor *dx = a->grad_input;
    tx_tensor *ds = scaled && a->n_grad_extra_inputs > 0 ? a->grad_extra_inputs[0] : NULL;
    if (dx) TX_TRY(same_numel(p, x, dx, "dx"));
    if (scaled && dx) TX_TRY(need(p, sc, "the saved scales"));
    size_t rows, cols;
    tx_cuda_basic_rows(a->grad_output, 1, &rows, &cols);
    if ((sc && sc->numel != rows) || (ds && ds->numel != rows))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: scales must have one entry per row",
                        p->label);
    return tx_cuda_basic_act_backward(a->op, a->attrs, x, sc, a->grad_output, dx, ds, NULL, NULL,
                                      stream);
}

static teexec_status *rope_run(const basic_priv *p, const tx_te_attr_value *at,
                               const tx_tensor *freqs, const tx_tensor *in, tx_tensor *out,
                               bool backward, void *scratch, void *stream)
{
    if (in->rank != 4 || out->numel != in->numel)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: x must have rank 4 and y its size", p->label);
    bool sbhd = at[TX_TE_A_ROPE_LAYOUT].i == TX_TE_LAYOUT_SBHD;
    size_t s = (size_t)(sbhd ? in->dims[0] : in->dims[1]);
    size_t r = freqs ? (size_t)freqs->dims[1]
                     : (size_t)(at[TX_TE_A_ROPE_DIM].i ? at[TX_TE_A_ROPE_DIM].i : in->dims[3]);
    float *table = scratch;
    const float *fr32 = NULL;
    if (freqs) {
        if (freqs->dtype == TEEXEC_DTYPE_FLOAT) {
            fr32 = freqs->data;
        } else {
            size_t off = 0;
            if (!tx_cuda_basic_add_region(&off, 2 * s * r * sizeof(float))) return oversize(p);
            float *conv = (float *)((char *)scratch + off);
            /* the first s rows are contiguous: only they are read */
            TX_TRY(tx_cuda_convert(freqs->data, freqs->dtype, conv, TEEXEC_DTYPE_FLOAT, s * r,
                                   stream));
            fr32 = conv;
        }
    }
    tx_cuda_rope_args k = {.b = (size_t)(sbhd ? in->dims[1] : in->dims[0]), .s = s,
                           .h = (size_t)in->dims[2], .d = (size_t)in->dims[3], .r = r,
                           .sbhd = sbhd, .interleaved = at[TX_TE_A_ROPE_INTERLEAVED].i != 0,
                           .freqs = fr32, .base = at[TX_TE_A_ROPE_BASE].f, .in = in->data,
                           .in_dtype = in->dtype, .out = out->data, .out_dtype = out->dtype,
                           .table = table};
    return backward ? tx_cuda_rope_backward(&k, stream) : tx_cuda_rope_forward(&k, stream);
}

static teexec_status *basic_forward(void *priv, const tx_te_fwd_args *a, void *state,
                                    void *scratch, const tx_cuda_env *env)
{
    (void)state;
    basic_priv *p = priv;
    void *stream = env ? env->stream : NULL;
    if (a->op != p->op)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: forward called with another op", p->label);
    TX_TRY(check_scratch(p, scratch));
    const tx_tensor *x = a->input;
    tx_tensor *y = a->output;
    switch (a->op) {
    case TX_TE_IDENTITY:
    case TX_TE_QUANTIZE:
    case TX_TE_RESHAPE: return copy_to(p, x, y, stream);
    case TX_TE_ALL_REDUCE:
        /* y = x summed over the run's tensor-parallel group (exec/comm.h):
         * NCCL queued on the executor's stream, nothing at world size 1 */
        TX_TRY(copy_to(p, x, y, stream));
        return tx_status_prefix(tx_comm_enqueue_all_reduce(tx_comm_current(), y->dtype, y->data,
                                                           (size_t)y->numel, stream),
                                "%s", p->label);
    case TX_TE_CONSTANT_SCALE:
        TX_TRY(same_numel(p, x, y, "y"));
        return tx_cuda_scale(x->data, x->dtype, (float)a->attrs[TX_TE_A_SCALE].f, y->data, y->dtype,
                             (size_t)x->numel, stream);
    case TX_TE_ADD_EXTRA_INPUT: {
        const tx_tensor *e = a->n_extra_inputs > 0 ? a->extra_inputs[0] : NULL;
        TX_TRY(need(p, e, "the extra input"));
        TX_TRY(same_numel(p, x, e, "the extra input"));
        TX_TRY(same_numel(p, x, y, "y"));
        return tx_cuda_add(x->data, x->dtype, e->data, e->dtype, y->data, y->dtype,
                           (size_t)x->numel, stream);
    }
    case TX_TE_MAKE_EXTRA_OUTPUT: {
        tx_tensor *e = a->n_extra_outputs > 0 ? a->extra_outputs[0] : NULL;
        TX_TRY(need(p, e, "the extra output"));
        TX_TRY(copy_to(p, x, y, stream));
        return copy_to(p, x, e, stream);
    }
    case TX_TE_BIAS: {
        const tx_tensor *b = a->params[0];
        size_t rows, cols;
        tx_cuda_basic_rows(x, 1, &rows, &cols);
        TX_TRY(same_numel(p, x, y, "y"));
        if (b->numel != cols)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: bias must be [%zu]", p->label, cols);
        return tx_cuda_bias_add(x->data, x->dtype, b->data, b->dtype, y->data, y->dtype, rows, cols,
                                stream);
    }
    case TX_TE_LAYER_NORM:
    case TX_TE_RMS_NORM: return norm_fwd(p, a, stream);
    case TX_TE_DROPOUT: {
        TX_TRY(same_numel(p, x, y, "y"));
        if (!a->training) return copy_to(p, x, y, stream);
        tx_tensor *m = a->aux && a->n_aux > 0 ? a->aux[0] : NULL;
        if (m && (m->dtype != TEEXEC_DTYPE_UINT8 ||
                  m->nbytes != tx_cuda_dropout_mask_bytes((size_t)x->numel)))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the mask must be uint8 [%zu]",
                            p->label, tx_cuda_dropout_mask_bytes((size_t)x->numel));
        return tx_cuda_dropout_forward(x->data, x->dtype, y->data, y->dtype, m ? m->data : NULL,
                                       (size_t)x->numel, a->attrs[TX_TE_A_DROPOUT_P].f,
                                       (uint64_t)a->attrs[TX_TE_A_DROPOUT_SEED].i, a->rng_offset,
                                       stream);
    }
    case TX_TE_ROTARY_EMBEDDING:
        return rope_run(p, a->attrs, a->n_extra_inputs > 0 ? a->extra_inputs[0] : NULL, x, y, false,
                        scratch, stream);
    case TX_TE_EMBEDDING: {
        const tx_tensor *w = a->params[0];
        if (w->rank != 2 || y->dtype != w->dtype || y->numel != x->numel * (uint64_t)w->dims[1])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: y must be [..., D] in the table's dtype",
                            p->label);
        /* Out-of-range ids cannot be reported without synchronizing: the
         * kernel writes zero rows for them. */
        return tx_cuda_embedding_forward(x->data, x->dtype, (size_t)x->numel, w->data, w->dtype,
                                         (size_t)w->dims[0], (size_t)w->dims[1], y->data, NULL,
                                         stream);
    }
    default:
        if (is_activation(a->op)) return act_fwd(p, a, stream);
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: no CUDA kernel", p->label);
    }
}

static teexec_status *basic_backward(void *priv, const tx_te_bwd_args *a, void *state,
                                     void *scratch, const tx_cuda_env *env)
{
    (void)state;
    basic_priv *p = priv;
    void *stream = env ? env->stream : NULL;
    if (a->op != p->op)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: backward called with another op", p->label);
    TX_TRY(check_scratch(p, scratch));
    const tx_tensor *dy = a->grad_output;
    tx_tensor *dx = a->grad_input;
    TX_TRY(need(p, dy, "dy"));
    switch (a->op) {
    case TX_TE_IDENTITY:
    case TX_TE_QUANTIZE:
    case TX_TE_RESHAPE:
    case TX_TE_ALL_REDUCE: return copy_to(p, dy, dx, stream); /* AllReduce: dx = dy */
    case TX_TE_CONSTANT_SCALE:
        if (!dx) return NULL;
        TX_TRY(same_numel(p, dy, dx, "dx"));
        return tx_cuda_scale(dy->data, dy->dtype, (float)a->attrs[TX_TE_A_SCALE].f, dx->data,
                             dx->dtype, (size_t)dy->numel, stream);
    case TX_TE_ADD_EXTRA_INPUT: {
        tx_tensor *de = a->n_grad_extra_inputs > 0 ? a->grad_extra_inputs[0] : NULL;
        TX_TRY(copy_to(p, dy, dx, stream));
        return copy_to(p, dy, de, stream);
    }
    case TX_TE_MAKE_EXTRA_OUTPUT: {
        const tx_tensor *de = a->n_grad_extra_outputs > 0 ? a->grad_extra_outputs[0] : NULL;
        if (!dx) return NULL;
        if (!de) return copy_to(p, dy, dx, stream);
        TX_TRY(same_numel(p, dy, de, "dextra"));
        TX_TRY(same_numel(p, dy, dx, "dx"));
        return tx_cuda_add(dy->data, dy->dtype, de->data, de->dtype, dx->data, dx->dtype,
                           (size_t)dy->numel, stream);
    }
    case TX_TE_BIAS: {
        tx_tensor *db = a->n_grad_params > 0 ? a->grad_params[0] : NULL;
        TX_TRY(copy_to(p, dy, dx, stream));
        if (!db) return NULL;
        size_t rows, cols;
        tx_cuda_basic_rows(dy, 1, &rows, &cols);
        if (db->numel != cols)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: dbias must be [%zu]", p->label, cols);
        return tx_cuda_bias_grad(dy->data, dy->dtype, rows, cols, db->data, db->dtype, scratch,
                                 stream);
    }
    case TX_TE_LAYER_NORM:
    case TX_TE_RMS_NORM: return norm_bwd_into(p, a, dx, NULL, scratch, stream);
    case TX_TE_DROPOUT: {
        if (!dx) return NULL;
        TX_TRY(same_numel(p, dy, dx, "dx"));
        const tx_tensor *m = a->n_saved > 0 ? a->saved[0] : NULL;
        TX_TRY(need(p, m, "the saved mask"));
        if (m->nbytes != tx_cuda_dropout_mask_bytes((size_t)dy->numel))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the saved mask has the wrong size",
                            p->label);
        return tx_cuda_dropout_backward(dy->data, dy->dtype, dx->data, dx->dtype, m->data,
                                        (size_t)dy->numel, a->attrs[TX_TE_A_DROPOUT_P].f, stream);
    }
    case TX_TE_ROTARY_EMBEDDING:
        if (!dx) return NULL;
        return rope_run(p, a->attrs, a->n_saved > 0 ? a->saved[0] : NULL, dy, dx, true, scratch,
                        stream);
    case TX_TE_EMBEDDING: {
        tx_tensor *dw = a->n_grad_params > 0 ? a->grad_params[0] : NULL;
        if (!dw) return NULL;
        const tx_tensor *ids = a->n_saved > 0 ? a->saved[0] : NULL;
        TX_TRY(need(p, ids, "the saved indices"));
        if (dw->rank != 2 || dy->numel != ids->numel * (uint64_t)dw->dims[1])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: dy must be [..., D]", p->label);
        return tx_cuda_embedding_backward(ids->data, ids->dtype, (size_t)ids->numel, dy->data,
                                          dy->dtype, (size_t)dw->dims[0], (size_t)dw->dims[1],
                                          dw->data, dw->dtype, scratch, p->scratch_bytes, stream);
    }
    default:
        if (is_activation(a->op)) return act_bwd(p, a, stream);
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: no CUDA kernel", p->label);
    }
}

teexec_status *tx_cuda_basic_norm_backward_add(void *priv, const tx_te_bwd_args *a, tx_tensor *dx,
                                               const tx_tensor *dresid, void *scratch,
                                               void *stream)
{
    const basic_priv *p = priv;
    if (p->op != TX_TE_LAYER_NORM && p->op != TX_TE_RMS_NORM)
        return tx_error(TEEXEC_ERR_INTERNAL, "%s: not a norm", p->label);
    return norm_bwd_into(p, a, dx, dresid, scratch, stream);
}

static const tx_cuda_te_impl basic_impl = {basic_prepare, basic_forward, basic_backward,
                                           basic_free};

const tx_cuda_te_impl *tx_cuda_te_basic_impl(tx_te_op_id op)
{
    switch (op) {
    case TX_TE_ALL_REDUCE:
    case TX_TE_IDENTITY:
    case TX_TE_QUANTIZE:
    case TX_TE_RESHAPE:
    case TX_TE_BIAS:
    case TX_TE_CONSTANT_SCALE:
    case TX_TE_ADD_EXTRA_INPUT:
    case TX_TE_MAKE_EXTRA_OUTPUT:
    case TX_TE_LAYER_NORM:
    case TX_TE_RMS_NORM:
    case TX_TE_DROPOUT:
    case TX_TE_ROTARY_EMBEDDING:
    case TX_TE_EMBEDDING: return &basic_impl;
    default: return is_activation(op) ? &basic_impl : NULL;
    }
}
