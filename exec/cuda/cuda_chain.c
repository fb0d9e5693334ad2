/* cuda_chain.c - one te.ops chain on the GPU, forward and backward
 * (cuda_chain.h). */
#include "exec/cuda/cuda_chain.h"

#include "exec/cuda/dev_arena.h"

#include "kernels/cuda/act.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/quant_fp8.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cuBLASLt's workspace as TE sizes it on Hopper (32 MiB + 1 KiB). */
#define GEMM_WORKSPACE ((size_t)32 * 1024 * 1024 + 1024)

typedef struct op_state {
    tx_te_op_id op;
    char name[64];
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    int64_t in_w, out_w;
    int32_t extra_from;
    void *in, *out;            /* v[i], v[i+1] */
    void *gin, *gout;          /* grads of in / out */
    void *param[2], *gparam[2];
    int n_params;
    float *mu, *rs;            /* norm statistics */
    bool gemm_bias;            /* Linear: the next Bias runs in this GEMM's epilogue */
    bool bias_in_gemm;         /* Bias: done by the previous Linear's GEMM */
    bool bias_by_act;          /* Bias: its grad comes from the next activation's kernel */
    bool act_with_bias;        /* activation: also writes the previous Bias's grad */
    /* GEMM epilogues (recipe none, 16-bit dtypes): Linear, Bias, GELU(tanh)
     * as one GEMM writing the pre-activation as aux (gemm_gelu on the
     * Linear, act_in_gemm on the GELU); the next Linear's dgrad applying
     * dGELU and summing dbias (dgrad_dgelu on it, act_bwd_in_gemm on the
     * GELU). */
    bool gemm_gelu, act_in_gemm, dgrad_dgelu, act_bwd_in_gemm;
    void *gextra;              /* MakeExtraOutput: grad of its extra output (or NULL) */
    /* fp8-current Linear */
    uint8_t *x_row, *x_col, *w_row, *w_col, *dy_row, *dy_col;
    float *x_sc, *w_sc, *dy_sc; /* [0] scale, [4] scale_inv, [8] amax: 16-byte apart,
                                  * as cuBLASLt wants its scale pointers */
} op_state;

struct tx_cuda_chain {
    tx_cuda_chain_config cfg;
    cudaStream_t stream;
    op_state *ops;
    int32_t n;
    size_t esz;
    void *arena;
    size_t arena_bytes;
    void *input, *output, *grad_output, *grad_input;
    void *gextra_in;           /* grad of the input read as an AddExtraInput's extra */
    float *workspace;          /* norms and column sums */
    void *gemm_ws;
    tx_gemm_lt *gemm;
    double flops;
};


static teexec_status *cuda_err(cudaError_t e, const char *what)
{
    return tx_error(TEEXEC_ERR_DEVICE, "cuda chain: %s: %s (%s)", what, cudaGetErrorName(e),
                    cudaGetErrorString(e));
}


static tx_cuda_act act_of(const op_state *o, bool *ok)
{
    *ok = true;
    switch (o->op) {
    case TX_TE_GELU:
        return o->attrs[TX_TE_A_GELU_APPROX].i == TX_TE_GELU_ERF ? TX_CUDA_ACT_GELU_ERF
                                                                 : TX_CUDA_ACT_GELU_TANH;
    case TX_TE_RELU: return TX_CUDA_ACT_RELU;
    case TX_TE_SILU: return TX_CUDA_ACT_SILU;
    case TX_TE_SWIGLU: return TX_CUDA_ACT_SWIGLU;
    case TX_TE_GEGLU:
        *ok = o->attrs[TX_TE_A_GELU_APPROX].i != TX_TE_GELU_ERF;
        return TX_CUDA_ACT_GEGLU;
    case TX_TE_REGLU: return TX_CUDA_ACT_REGLU;
    default: *ok = false; return TX_CUDA_ACT_RELU;
    }
}

static bool is_act(tx_te_op_id op)
{
    return op == TX_TE_GELU || op == TX_TE_RELU || op == TX_TE_SILU || op == TX_TE_SWIGLU ||
           op == TX_TE_GEGLU || op == TX_TE_REGLU;
}

static bool is_passthrough(const op_state *o, bool training)
{
    if (o->op == TX_TE_IDENTITY || o->op == TX_TE_MAKE_EXTRA_OUTPUT) return true;
    if (o->op == TX_TE_DROPOUT) return !training || o->attrs[TX_TE_A_DROPOUT_P].f == 0.0;
    return false;
}

/* Ops whose input grad is their output grad (the same buffer in backward):
 * MakeExtraOutput is not one of them, it adds the extra output's grad. */
static bool passes_grad(const op_state *o, bool training)
{
    return o->op == TX_TE_BIAS || o->op == TX_TE_ADD_EXTRA_INPUT ||
           (is_passthrough(o, training) && o->op != TX_TE_MAKE_EXTRA_OUTPUT);
}

static teexec_status *unsupported(const op_state *o, const char *why)
{
    const tx_te_op_schema *s = tx_te_schema(o->op);
    return tx_error(TEEXEC_ERR_UNSUPPORTED, "cuda chain: op %s (%s) %s", o->name,
                    s ? s->name : "?", why);
}

/* Widths, fusions and support checks. */
static teexec_status *shape_ops(tx_cuda_chain *c, const tx_cuda_chain_op *ops)
{
    int64_t w = c->cfg.in_width;
    bool fp8 = c->cfg.recipe.kind == TX_RECIPE_FP8_CURRENT;
    for (int32_t i = 0; i < c->n; i++) {
        op_state *o = &c->ops[i];
        o->in_w = w;
        switch (o->op) {
        case TX_TE_LINEAR: {
            const tx_tensor *wt = ops[i].n_params > 0 ? ops[i].params[0] : NULL;
            if (!wt || wt->rank != 2 || wt->dims[1] != w)
                return unsupported(o, "needs a [N, K] weight matching its input width");
            w = wt->dims[0];
            if (fp8 && (o->in_w % 16 || w % 16 || c->cfg.rows % 16))
                return unsupported(o, "fp8-current on the GPU needs rows, K and N multiples of 16");
            o->gemm_bias = i + 1 < c->n && ops[i + 1].op == TX_TE_BIAS;
            break;
        }
        case TX_TE_BIAS:
            if (i == 0 || !c->ops[i - 1].gemm_bias)
                return unsupported(o, "is supported only right after a Linear (GEMM epilogue)");
            o->bias_in_gemm = true;
            break;
        case TX_TE_LAYER_NORM:
        case TX_TE_RMS_NORM:
            if (ops[i].n_params < 1 || ops[i].params[0]->rank != 1 || ops[i].params[0]->dims[0] != w)
                return unsupported(o, "needs [H] parameters over the last dim");
            break;
        case TX_TE_ADD_EXTRA_INPUT:
            if (o->extra_from == -1) {
                /* the chain's own input: the residual of a block */
                if (c->cfg.in_width != w) return unsupported(o, "adds tensors of different widths");
                if (c->cfg.input_needs_grad && is_passthrough(&c->ops[0], c->cfg.training))
                    return unsupported(o, "reads the input that op 0 passes through");
                break;
            }
            if (o->extra_from < 0 || o->extra_from >= i ||
                c->ops[o->extra_from].op != TX_TE_MAKE_EXTRA_OUTPUT)
                return unsupported(o, "needs its extra input from a MakeExtraOutput earlier in the chain");
            if (c->ops[o->extra_from].in_w != w)
                return unsupported(o, "adds tensors of different widths");
            break;
        default:
            if (is_passthrough(o, c->cfg.training)) break;
            if (is_act(o->op)) {
                bool ok;
                (void)act_of(o, &ok);
                if (!ok) return unsupported(o, "uses a form the GPU kernels lack (GEGLU with erf)");
                if (o->op == TX_TE_SWIGLU || o->op == TX_TE_GEGLU || o->op == TX_TE_REGLU) {
                    if (w % 2) return unsupported(o, "needs an even width");
                    w /= 2;
                } else if (i > 0 && c->ops[i - 1].op == TX_TE_BIAS) {
                    o->act_with_bias = true;
                    c->ops[i - 1].bias_by_act = true;
                }
                break;
            }
            return unsupported(o, "has no CUDA kernel yet");
        }
        o->out_w = w;
    }
    bool epi = c->cfg.recipe.kind == TX_RECIPE_NONE && c->cfg.dtype != TEEXEC_DTYPE_FLOAT;
    for (int32_t i = 0; epi && i + 2 < c->n; i++) {
        op_state *o = &c->ops[i], *g = &c->ops[i + 2];
        if (o->op != TX_TE_LINEAR || !o->gemm_bias || g->op != TX_TE_GELU ||
            g->attrs[TX_TE_A_GELU_APPROX].i != TX_TE_GELU_TANH)
            continue;
        o->gemm_gelu = g->act_in_gemm = true;
        if (c->cfg.training && i + 3 < c->n && c->ops[i + 3].op == TX_TE_LINEAR)
            c->ops[i + 3].dgrad_dgelu = g->act_bwd_in_gemm = true;
    }
    return NULL;
}

static teexec_status *upload_param(tx_cuda_chain *c, const tx_tensor *t, void *dst)
{
    /* host -> device as is, then converted to the compute dtype */
    teexec_dtype dt = t->dtype;
    if (dt != TEEXEC_DTYPE_FLOAT && dt != TEEXEC_DTYPE_BFLOAT16 && dt != TEEXEC_DTYPE_FLOAT16)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "cuda chain: parameters must be float32, bfloat16 or float16");
    if (dt == c->cfg.dtype) {
        cudaError_t e = cudaMemcpyAsync(dst, t->data, t->nbytes, cudaMemcpyHostToDevice, c->stream);
        return e == cudaSuccess ? NULL : cuda_err(e, "uploading a parameter");
    }
    void *tmp = NULL;
    cudaError_t e = cudaMalloc(&tmp, t->nbytes);
    if (e != cudaSuccess) return cuda_err(e, "staging a parameter");
    e = cudaMemcpyAsync(tmp, t->data, t->nbytes, cudaMemcpyHostToDevice, c->stream);
    teexec_status *st = e == cudaSuccess ? NULL : cuda_err(e, "uploading a parameter");
    if (!st) st = tx_cuda_convert(tmp, dt, dst, c->cfg.dtype, t->numel, c->stream);
    if (!st) {
        e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess) st = cuda_err(e, "converting a parameter");
    }
    cudaFree(tmp);
    return st;
}

static teexec_status *plan_memory(tx_cuda_chain *c, const tx_cuda_chain_op *ops)
{
    tx_dev_reqs l = {0};
    size_t rows = (size_t)c->cfg.rows, esz = c->esz;
    bool train = c->cfg.training, fp8 = c->cfg.recipe.kind == TX_RECIPE_FP8_CURRENT;
    size_t ws_floats = 0;
    tx_dev_want(&l, &c->input, rows * (size_t)c->cfg.in_width * esz);
    for (int32_t i = 0; i < c->n; i++) {
        op_state *o = &c->ops[i];
        for (int p = 0; p < ops[i].n_params && p < 2; p++) {
            tx_dev_want(&l, &o->param[p], ops[i].params[p]->numel * esz);
            if (train) tx_dev_want(&l, &o->gparam[p], ops[i].params[p]->numel * esz);
        }
        o->n_params = ops[i].n_params < 2 ? ops[i].n_params : 2;
        bool alias = is_passthrough(o, train) || o->bias_in_gemm;
        if (!alias) tx_dev_want(&l, &o->out, rows * (size_t)o->out_w * esz);
        if ((o->op == TX_TE_LAYER_NORM || o->op == TX_TE_RMS_NORM) && train) {
            tx_dev_want(&l, &o->mu, rows * sizeof(float));
            tx_dev_want(&l, &o->rs, rows * sizeof(float));
            size_t wsf = tx_cuda_norm_bwd_workspace_floats(rows, (size_t)o->in_w);
            if (wsf > ws_floats) ws_floats = wsf;
        }
        if (train && (o->op == TX_TE_BIAS || o->act_with_bias)) {
            size_t wsf = tx_cuda_colsum_workspace_floats(rows, (size_t)o->out_w);
            if (wsf > ws_floats) ws_floats = wsf;
        }
        if (o->op == TX_TE_LINEAR) {
            size_t k = (size_t)o->in_w, nn = (size_t)o->out_w;
            c->flops += 2.0 * (double)rows * (double)k * (double)nn;
            if (fp8) {
                tx_dev_want(&l, &o->x_row, rows * k);
                tx_dev_want(&l, &o->w_row, nn * k);
                tx_dev_want(&l, &o->x_sc, 16 * sizeof(float));
                tx_dev_want(&l, &o->w_sc, 16 * sizeof(float));
                if (train) {
                    tx_dev_want(&l, &o->x_col, rows * k);
                    tx_dev_want(&l, &o->w_col, nn * k);
                    tx_dev_want(&l, &o->dy_row, rows * nn);
                    tx_dev_want(&l, &o->dy_col, rows * nn);
                    tx_dev_want(&l, &o->dy_sc, 16 * sizeof(float));
                }
            }
        }
        /* backward buffers: a new grad for the op's input unless it passes
         * the output's grad through */
        if (train && (i > 0 || c->cfg.input_needs_grad) && !passes_grad(o, train))
            tx_dev_want(&l, &o->gin, rows * (size_t)o->in_w * esz);
    }
    int64_t out_w = c->n ? c->ops[c->n - 1].out_w : c->cfg.in_width;
    if (train) tx_dev_want(&l, &c->grad_output, rows * (size_t)out_w * esz);
    tx_dev_want(&l, &c->workspace, (ws_floats + 1) * sizeof(float));
    tx_dev_want(&l, &c->gemm_ws, GEMM_WORKSPACE);
    teexec_status *st = tx_dev_place(&l, "cuda chain", &c->arena, &c->arena_bytes);
    tx_dev_reqs_free(&l);
    return st;
}

/* Forward pointers v[i] and backward pointers g[i]. */
static void wire(tx_cuda_chain *c)
{
    bool train = c->cfg.training;
    void *v = c->input;
    for (int32_t i = 0; i < c->n; i++) {
        op_state *o = &c->ops[i];
        o->in = v;
        if (is_passthrough(o, train)) o->out = v;
        else if (o->bias_in_gemm) o->out = v; /* the Linear already wrote y + b */
        v = o->out;
    }
    c->output = v;
    if (!train) return;
    void *g = c->grad_output;
    for (int32_t i = c->n - 1; i >= 0; i--) {
        op_state *o = &c->ops[i];
        o->gout = g;
        if (!o->gin) {
            /* passes the grad through (or is op 0 without an input grad) */
            if (i > 0 || c->cfg.input_needs_grad) o->gin = g;
        }
        if (o->op == TX_TE_ADD_EXTRA_INPUT) {
            if (o->extra_from >= 0) c->ops[o->extra_from].gextra = g;
            else c->gextra_in = g;
        }
        g = o->gin;
    }
    c->grad_input = c->cfg.input_needs_grad && c->n > 0 ? c->ops[0].gin : NULL;
}

teexec_status *tx_cuda_chain_create(const tx_cuda_chain_op *ops, int32_t n_ops,
                                    const tx_cuda_chain_config *cfg, void *stream,
                                    tx_cuda_chain **out)
{
    *out = NULL;
    if (cfg->dtype != TEEXEC_DTYPE_BFLOAT16 && cfg->dtype != TEEXEC_DTYPE_FLOAT16 &&
        cfg->dtype != TEEXEC_DTYPE_FLOAT)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "cuda chain: compute dtype must be bf16, fp16 or fp32");
    if (cfg->recipe.kind != TX_RECIPE_NONE && cfg->recipe.kind != TX_RECIPE_FP8_CURRENT)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "cuda chain: recipe not run on the GPU yet (none and fp8-current are)");
    if (cfg->recipe.kind == TX_RECIPE_FP8_CURRENT && cfg->dtype == TEEXEC_DTYPE_FLOAT16)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "cuda chain: fp8-current needs bf16 or fp32 activations");
    if (cfg->rows <= 0 || cfg->in_width <= 0 || n_ops <= 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "cuda chain: empty chain or shape");
    tx_cuda_chain *c = calloc(1, sizeof(*c));
    if (!c) return tx_oom();
    c->cfg = *cfg;
    c->stream = (cudaStream_t)stream;
    c->n = n_ops;
    c->esz = cfg->dtype == TEEXEC_DTYPE_FLOAT ? 4 : 2;
    c->ops = calloc((size_t)n_ops, sizeof(*c->ops));
    teexec_status *st = c->ops ? NULL : tx_oom();
    for (int32_t i = 0; !st && i < n_ops; i++) {
        op_state *o = &c->ops[i];
        o->op = ops[i].op;
        snprintf(o->name, sizeof o->name, "%s", ops[i].name ? ops[i].name : "?");
        const tx_te_op_schema *s = tx_te_schema(o->op);
        if (!s) st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "cuda chain: bad op id");
        else if (ops[i].attrs) memcpy(o->attrs, ops[i].attrs, (size_t)s->n_attrs * sizeof(o->attrs[0]));
        else tx_te_attr_defaults(s, o->attrs);
        o->extra_from = ops[i].extra_from;
    }
    if (!st) st = shape_ops(c, ops);
    if (!st) st = plan_memory(c, ops);
    if (!st) {
        wire(c);
        for (int32_t i = 0; !st && i < n_ops; i++)
            for (int p = 0; !st && p < c->ops[i].n_params; p++)
                st = upload_param(c, ops[i].params[p], c->ops[i].param[p]);
    }
    if (!st) st = tx_gemm_lt_create(GEMM_WORKSPACE, &c->gemm);
    if (!st) {
        cudaError_t e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess) st = cuda_err(e, "setting up");
    }
    if (st) {
        tx_cuda_chain_destroy(c);
        return st;
    }
    *out = c;
    return NULL;
}

void tx_cuda_chain_destroy(tx_cuda_chain *c)
{
    if (!c) return;
    tx_gemm_lt_destroy(c->gemm);
    if (c->arena) cudaFree(c->arena);
    free(c->ops);
    free(c);
}

void *tx_cuda_chain_input(tx_cuda_chain *c) { return c->input; }
void *tx_cuda_chain_output(tx_cuda_chain *c) { return c->output; }
void *tx_cuda_chain_grad_output(tx_cuda_chain *c) { return c->grad_output; }
void *tx_cuda_chain_grad_input(tx_cuda_chain *c) { return c->grad_input; }
int64_t tx_cuda_chain_out_width(const tx_cuda_chain *c) { return c->ops[c->n - 1].out_w; }
double tx_cuda_chain_forward_flops(const tx_cuda_chain *c) { return c->flops; }
size_t tx_cuda_chain_device_bytes(const tx_cuda_chain *c) { return c->arena_bytes; }

void *tx_cuda_chain_grad_param(tx_cuda_chain *c, int32_t op, int p)
{
    if (op < 0 || op >= c->n || p < 0 || p >= 2) return NULL;
    return c->ops[op].gparam[p];
}

/* ---- forward ---------------------------------------------------------------- */

static teexec_dtype fwd_fp8(void) { return TEEXEC_DTYPE_FLOAT8E4M3FN; }
static teexec_dtype grad_fp8(const tx_cuda_chain *c)
{
    return c->cfg.recipe.hybrid ? TEEXEC_DTYPE_FLOAT8E5M2 : TEEXEC_DTYPE_FLOAT8E4M3FN;
}

static teexec_status *quantize(tx_cuda_chain *c, const void *x, size_t rows, size_t cols,
                               teexec_dtype fmt, float *sc, uint8_t *row, uint8_t *col)
{
    tx_cuda_fp8_args a = {.x = x, .x_dtype = c->cfg.dtype, .rows = rows, .cols = cols,
                          .fmt = fmt, .scale = &sc[0], .scale_inv = &sc[4], .amax = &sc[8],
                          .row_data = row, .col_data = col};
    return tx_cuda_fp8_quantize_current(&a, 0.0f, 0, c->stream);
}

static teexec_status *linear_fwd(tx_cuda_chain *c, op_state *o)
{
    size_t rows = (size_t)c->cfg.rows, k = (size_t)o->in_w, n = (size_t)o->out_w;
    op_state *bias = o->gemm_bias ? o + 1 : NULL;
    tx_gemm_desc d = {.m = (int64_t)n, .n = (int64_t)rows, .k = (int64_t)k, .transa = 1,
                      .transb = 0, .a_type = c->cfg.dtype, .b_type = c->cfg.dtype,
                      .d_type = c->cfg.dtype, .alpha = 1.0f, .beta = 0.0f,
                      .epilogue = bias ? TX_GEMM_EPI_BIAS : TX_GEMM_EPI_NONE,
                      .bias = bias ? bias->param[0] : NULL, .bias_type = c->cfg.dtype};
    void *out = bias ? bias->out : o->out;
    if (o->gemm_gelu) {
        /* D = gelu(x W^T + b) into the GELU's output; aux = the
         * pre-activation, which the GELU's backward reads as its input */
        op_state *gelu = o + 2;
        d.epilogue = TX_GEMM_EPI_GELU_AUX_BIAS;
        d.aux = o->out;
        d.aux_ld = (int64_t)n;
        out = gelu->out;
    }
    if (c->cfg.recipe.kind == TX_RECIPE_FP8_CURRENT) {
        bool train = c->cfg.training;
        TX_TRY(quantize(c, o->in, rows, k, fwd_fp8(), o->x_sc, o->x_row, train ? o->x_col : NULL));
        TX_TRY(quantize(c, o->param[0], n, k, fwd_fp8(), o->w_sc, o->w_row, train ? o->w_col : NULL));
        d.a_type = d.b_type = fwd_fp8();
        d.a_scale_mode = d.b_scale_mode = TX_GEMM_SCALE_TENSOR;
        d.a_scale_inv = &o->w_sc[4];
        d.b_scale_inv = &o->x_sc[4];
        d.fast_accum = 1;
        return tx_gemm_lt_run(c->gemm, &d, o->w_row, o->x_row, NULL, out, c->gemm_ws, c->stream);
    }
    return tx_gemm_lt_run(c->gemm, &d, o->param[0], o->in, NULL, out, c->gemm_ws, c->stream);
}

teexec_status *tx_cuda_chain_forward(tx_cuda_chain *c)
{
    size_t rows = (size_t)c->cfg.rows;
    for (int32_t i = 0; i < c->n; i++) {
        op_state *o = &c->ops[i];
        if (is_passthrough(o, c->cfg.training) || o->bias_in_gemm || o->act_in_gemm) continue;
        switch (o->op) {
        case TX_TE_LINEAR: TX_TRY(linear_fwd(c, o)); break;
        case TX_TE_LAYER_NORM:
        case TX_TE_RMS_NORM: {
            tx_cuda_norm_fwd a = {.rms = o->op == TX_TE_RMS_NORM, .rows = rows,
                                  .h = (size_t)o->in_w, .eps = (float)o->attrs[TX_TE_A_NORM_EPS].f,
                                  .zero_centered_gamma = (int)o->attrs[TX_TE_A_NORM_ZCG].i,
                                  .x = o->in, .x_dtype = c->cfg.dtype, .gamma = o->param[0],
                                  .beta = o->n_params > 1 ? o->param[1] : NULL,
                                  .w_dtype = c->cfg.dtype, .y = o->out, .y_dtype = c->cfg.dtype,
                                  .mu = o->mu, .rsigma = o->rs};
            TX_TRY(tx_cuda_norm_forward(&a, c->stream));
            break;
        }
        case TX_TE_ADD_EXTRA_INPUT:
            TX_TRY(tx_cuda_add(o->in, c->cfg.dtype,
                               o->extra_from >= 0 ? c->ops[o->extra_from].in : c->input,
                               c->cfg.dtype, o->out,
                               c->cfg.dtype, rows * (size_t)o->out_w, c->stream));
            break;
        default: {
            bool ok;
            tx_cuda_act_args a = {.act = act_of(o, &ok), .rows = rows, .cols = (size_t)o->out_w,
                                  .x = o->in, .x_dtype = c->cfg.dtype, .y = o->out,
                                  .y_dtype = c->cfg.dtype};
            TX_TRY(tx_cuda_act_forward(&a, c->stream));
            break;
        }
        }
    }
    if (c->gextra_in && c->grad_input)
        TX_TRY(tx_cuda_add(c->grad_input, c->cfg.dtype, c->gextra_in, c->cfg.dtype, c->grad_input,
                           c->cfg.dtype, rows * (size_t)c->cfg.in_width, c->stream));
    return NULL;
}

/* ---- backward --------------------------------------------------------------- */

static teexec_status *linear_bwd(tx_cuda_chain *c, op_state *o, bool want_dx)
{
    size_t rows = (size_t)c->cfg.rows, k = (size_t)o->in_w, n = (size_t)o->out_w;
    bool fp8 = c->cfg.recipe.kind == TX_RECIPE_FP8_CURRENT;
    if (fp8)
        TX_TRY(quantize(c, o->gout, rows, n, grad_fp8(c), o->dy_sc, o->dy_row, o->dy_col));
    if (want_dx) {
        tx_gemm_desc d = {.m = (int64_t)k, .n = (int64_t)rows, .k = (int64_t)n,
                          .a_type = c->cfg.dtype, .b_type = c->cfg.dtype, .d_type = c->cfg.dtype,
                          .alpha = 1.0f};
        if (fp8) {
            /* TN on Hopper: A = W's columnwise (transposed) copy */
            d.transa = 1;
            d.a_type = fwd_fp8();
            d.b_type = grad_fp8(c);
            d.a_scale_mode = d.b_scale_mode = TX_GEMM_SCALE_TENSOR;
            d.a_scale_inv = &o->w_sc[4];
            d.b_scale_inv = &o->dy_sc[4];
            TX_TRY(tx_gemm_lt_run(c->gemm, &d, o->w_col, o->dy_row, NULL, o->gin, c->gemm_ws,
                                  c->stream));
        } else if (o->dgrad_dgelu) {
            /* dz = (dY W) * gelu'(z) straight into the GELU's input grad,
             * dbias = its column sums: BackwardActivationBias in the epilogue */
            op_state *gelu = o - 1, *bias = o - 2;
            d.epilogue = TX_GEMM_EPI_DGELU_BGRAD;
            d.aux = gelu->in;
            d.aux_ld = (int64_t)k;
            d.bias = bias->gparam[0];
            TX_TRY(tx_gemm_lt_run(c->gemm, &d, o->param[0], o->gout, NULL, gelu->gin, c->gemm_ws,
                                  c->stream));
        } else {
            TX_TRY(tx_gemm_lt_run(c->gemm, &d, o->param[0], o->gout, NULL, o->gin, c->gemm_ws,
                                  c->stream));
        }
    }
    tx_gemm_desc w = {.m = (int64_t)k, .n = (int64_t)n, .k = (int64_t)rows,
                      .a_type = c->cfg.dtype, .b_type = c->cfg.dtype, .d_type = c->cfg.dtype,
                      .alpha = 1.0f, .transb = 1};
    if (fp8) {
        w.transa = 1;
        w.transb = 0;
        w.a_type = fwd_fp8();
        w.b_type = grad_fp8(c);
        w.a_scale_mode = w.b_scale_mode = TX_GEMM_SCALE_TENSOR;
        w.a_scale_inv = &o->x_sc[4];
        w.b_scale_inv = &o->dy_sc[4];
        return tx_gemm_lt_run(c->gemm, &w, o->x_col, o->dy_col, NULL, o->gparam[0], c->gemm_ws,
                              c->stream);
    }
    return tx_gemm_lt_run(c->gemm, &w, o->in, o->gout, NULL, o->gparam[0], c->gemm_ws, c->stream);
}

teexec_status *tx_cuda_chain_backward(tx_cuda_chain *c)
{
    if (!c->cfg.training)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "cuda chain: created for inference");
    size_t rows = (size_t)c->cfg.rows;
    for (int32_t i = c->n - 1; i >= 0; i--) {
        op_state *o = &c->ops[i];
        bool want_dx = o->gin != NULL && o->gin != o->gout;
        switch (o->op) {
        case TX_TE_LINEAR: TX_TRY(linear_bwd(c, o, o->gin != NULL)); break;
        case TX_TE_BIAS:
            if (!o->bias_by_act)
                TX_TRY(tx_cuda_bias_grad(o->gout, c->cfg.dtype, rows, (size_t)o->out_w,
                                         o->gparam[0], c->cfg.dtype, c->workspace, c->stream));
            break;
        case TX_TE_LAYER_NORM:
        case TX_TE_RMS_NORM: {
            tx_cuda_norm_bwd a = {.rms = o->op == TX_TE_RMS_NORM, .rows = rows,
                                  .h = (size_t)o->in_w,
                                  .zero_centered_gamma = (int)o->attrs[TX_TE_A_NORM_ZCG].i,
                                  .x = o->in, .x_dtype = c->cfg.dtype, .dy = o->gout,
                                  .dy_dtype = c->cfg.dtype, .gamma = o->param[0],
                                  .w_dtype = c->cfg.dtype, .mu = o->mu, .rsigma = o->rs,
                                  .dx = want_dx ? o->gin : NULL, .dx_dtype = c->cfg.dtype,
                                  .dgamma = o->gparam[0],
                                  .dbeta = o->n_params > 1 ? o->gparam[1] : NULL,
                                  .workspace = c->workspace};
            TX_TRY(tx_cuda_norm_backward(&a, c->stream));
            break;
        }
        case TX_TE_MAKE_EXTRA_OUTPUT:
            if (!o->gin) break;
            if (o->gextra)
                TX_TRY(tx_cuda_add(o->gout, c->cfg.dtype, o->gextra, c->cfg.dtype, o->gin,
                                   c->cfg.dtype, rows * (size_t)o->in_w, c->stream));
            else if (o->gin != o->gout) {
                cudaError_t e = cudaMemcpyAsync(o->gin, o->gout, rows * (size_t)o->in_w * c->esz,
                                                cudaMemcpyDeviceToDevice, c->stream);
                if (e != cudaSuccess) return cuda_err(e, "MakeExtraOutput backward");
            }
            break;
        case TX_TE_ADD_EXTRA_INPUT:
        case TX_TE_IDENTITY:
        case TX_TE_DROPOUT:
            break; /* grads pass through (wired at creation) */
        default: {
            if (!o->gin || o->act_bwd_in_gemm) break;
            bool ok;
            op_state *bias = o->act_with_bias ? o - 1 : NULL;
            tx_cuda_act_args a = {.act = act_of(o, &ok), .rows = rows, .cols = (size_t)o->out_w,
                                  .x = o->in, .x_dtype = c->cfg.dtype, .dy = o->gout,
                                  .dy_dtype = c->cfg.dtype, .dx = o->gin, .dx_dtype = c->cfg.dtype,
                                  .dbias = bias ? bias->gparam[0] : NULL,
                                  .dbias_dtype = c->cfg.dtype, .workspace = c->workspace};
            TX_TRY(tx_cuda_act_backward(&a, c->stream));
            break;
        }
        }
    }
    if (c->gextra_in && c->grad_input)
        TX_TRY(tx_cuda_add(c->grad_input, c->cfg.dtype, c->gextra_in, c->cfg.dtype, c->grad_input,
                           c->cfg.dtype, rows * (size_t)c->cfg.in_width, c->stream));
    return NULL;
}
