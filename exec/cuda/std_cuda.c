/* std_cuda.c - standard ONNX ops on the GPU (std_cuda.h): each node is
 * turned at prepare time into launch plans over kernels/cuda/std_ops.h (and
 * cuBLASLt for MatMul), so forward and backward only fill in pointers.
 *
 * The reshape family (Identity, Reshape, Flatten, Squeeze, Unsqueeze) needs
 * only the output shape the executor inferred, not the value of a shape or
 * axes input: the data is the same bytes. */
#include "exec/cuda/std_cuda.h"

#include "base/checked.h"
#include "base/shape.h"
#include "exec/train_internal.h"
#include "import/shape_infer.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/std_ops.h"

#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum std_kind {
    K_COPY,      /* Identity, Reshape, Flatten, Squeeze, Unsqueeze */
    K_CAST,
    K_TRANSPOSE,
    K_SLICE,
    K_SPLIT,
    K_CONCAT,
    K_GATHER,
    K_EXPAND,
    K_EW,        /* Add, Sub, Mul, Div, Pow, Neg, Sqrt, Reciprocal */
    K_WHERE,
    K_SOFTMAX,   /* Softmax, LogSoftmax */
    K_MATMUL
} std_kind;

static const struct {
    const char *op;
    std_kind kind;
    tx_std_ew_op ew;
} ops[] = {
    {"Identity", K_COPY, 0},         {"Reshape", K_COPY, 0},
    {"Flatten", K_COPY, 0},          {"Squeeze", K_COPY, 0},
    {"Unsqueeze", K_COPY, 0},        {"Cast", K_CAST, 0},
    {"Transpose", K_TRANSPOSE, 0},   {"Slice", K_SLICE, 0},
    {"Split", K_SPLIT, 0},           {"Concat", K_CONCAT, 0},
    {"Gather", K_GATHER, 0},         {"Expand", K_EXPAND, 0},
    {"Add", K_EW, TX_STD_EW_ADD},    {"Sub", K_EW, TX_STD_EW_SUB},
    {"Mul", K_EW, TX_STD_EW_MUL},    {"Div", K_EW, TX_STD_EW_DIV},
    {"Pow", K_EW, TX_STD_EW_POW},    {"Neg", K_EW, TX_STD_EW_NEG},
    {"Sqrt", K_EW, TX_STD_EW_SQRT},  {"Reciprocal", K_EW, TX_STD_EW_RECIP},
    {"Where", K_WHERE, 0},           {"Softmax", K_SOFTMAX, 0},
    {"LogSoftmax", K_SOFTMAX, 0},    {"MatMul", K_MATMUL, 0},
};

/* One GEMM of a MatMul, precomputed: element offsets of each operand and
 * the beta to use (0 on the first write of an accumulated grad). */
typedef struct mm_step {
    int64_t oa, ob, oy;
    float beta_a, beta_b;
} mm_step;

struct tx_cuda_std_node {
    const tx_ir_node *node;
    std_kind kind;
    tx_std_ew_op ew;
    size_t n_in, n_out;
    tx_tensor *in, *out;  /* metadata copies (data NULL); rank -1 = omitted */
    /* copies: Transpose/Slice/Expand use cp[0]; Split one per output,
     * Concat one per input (forward direction; backward swaps src/dst) */
    tx_cuda_strided *cp;
    size_t n_cp;
    tx_cuda_bcast bc;
    tx_cuda_bgrad bg[3];  /* grad reduction plan per input slot */
    size_t outer, len, inner, n_idx;
    bool log_mode;
    /* MatMul */
    struct tx_gemm_lt *gemm;
    bool own_gemm;
    int64_t M, N, K;
    size_t n_steps;
    mm_step *steps;
    bool acc_a, acc_b;     /* grad summed over broadcast batches in FP32 scratch */
    size_t ws_off, acc_a_off, acc_b_off, scratch;
};

static bool is_float(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_BFLOAT16 || dt == TEEXEC_DTYPE_FLOAT16;
}

static teexec_status *node_err(const tx_ir_node *node, teexec_code code, const char *fmt, ...)
    TX_PRINTF(3, 4);
static teexec_status *node_err(const tx_ir_node *node, teexec_code code, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tx_status_with_node(tx_error(code, "node %s (%s): %s", node->label, node->op_type, msg),
                               node->label);
}

#define UNSUP(...) node_err(n->node, TEEXEC_ERR_UNSUPPORTED, __VA_ARGS__)

/* Gives a kernel's or CUDA's error the node's name. */
static teexec_status *at_node(const tx_cuda_std_node *n, teexec_status *st)
{
    if (!st) return NULL;
    if (teexec_status_node(st)) return st;
    st = tx_status_prefix(st, "node %s (%s)", n->node->label, n->node->op_type);
    return tx_status_with_node(st, n->node->label);
}

static teexec_status *cuda_err(const tx_cuda_std_node *n, cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return NULL;
    return node_err(n->node, TEEXEC_ERR_DEVICE, "%s failed: %s", what, cudaGetErrorString(e));
}

bool tx_cuda_std_supported(const char *domain, const char *op_type)
{
    if (!op_type || (domain && domain[0] && strcmp(domain, "ai.onnx") != 0)) return false;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(ops[i].op, op_type)) return true;
    return false;
}

/* ---- shape helpers -------------------------------------------------------- */

static void contig_strides(int32_t rank, const int64_t *dims, int64_t *st)
{
    int64_t s = 1;
    for (int32_t k = rank - 1; k >= 0; k--) {
        st[k] = s;
        s *= dims[k];
    }
}

/* Strides of t aligned right to a rank-r output, 0 where it broadcasts. */
static void bcast_strides(const tx_tensor *t, int32_t r, const int64_t *odims, int64_t *st)
{
    int64_t s = 1;
    for (int32_t k = r - 1; k >= 0; k--) {
        int32_t tk = k - (r - t->rank);
        if (tk < 0) {
            st[k] = 0;
            continue;
        }
        int64_t d = t->dims[tk];
        st[k] = (d == 1 && odims[k] != 1) ? 0 : s;
        s *= d;
    }
}

static bool present(const tx_tensor *t) { return t->rank >= 0; }

static const tx_tensor *IN(const tx_cuda_std_node *n, size_t i)
{
    return i < n->n_in && present(&n->in[i]) ? &n->in[i] : NULL;
}

static teexec_status *need_rank(const tx_cuda_std_node *n, int32_t rank)
{
    if (rank > TX_STD_MAX_RANK)
        return UNSUP("rank %d is above the GPU kernels' %d", (int)rank, TX_STD_MAX_RANK);
    return NULL;
}

/* Grad plan of an operand with broadcast strides st over the output y. */
static void bgrad_init(tx_cuda_bgrad *g, const tx_tensor *y, const int64_t *st_x)
{
    memset(g, 0, sizeof *g);
    g->rank = y->rank;
    for (int32_t k = 0; k < y->rank; k++) {
        g->dims[k] = y->dims[k];
        g->red[k] = st_x[k] == 0 && y->dims[k] != 1;
    }
}

/* ---- prepare per kind --------------------------------------------------------- */

static teexec_status *prep_copy_like(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    if (x->numel != y->numel) return UNSUP("input and output element counts differ");
    if (n->kind == K_CAST) {
        if (!tx_cuda_cast_dtype_ok(x->dtype) || !tx_cuda_cast_dtype_ok(y->dtype))
            return UNSUP("cast %s -> %s is not supported on the GPU",
                         teexec_dtype_name(x->dtype), teexec_dtype_name(y->dtype));
    } else if (x->dtype != y->dtype) {
        return UNSUP("input and output dtypes differ");
    }
    return NULL;
}

static teexec_status *alloc_cp(tx_cuda_std_node *n, size_t count)
{
    n->cp = calloc(count ? count : 1, sizeof *n->cp);
    if (!n->cp) return tx_oom();
    n->n_cp = count;
    return NULL;
}

static teexec_status *prep_transpose(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    TX_TRY(need_rank(n, x->rank));
    const int64_t *perm;
    size_t np;
    TX_TRY(tx_ir_attr_ints(n->node, "perm", &perm, &np));
    if (np && np != (size_t)x->rank) return UNSUP("perm has %zu entries for rank %d", np, (int)x->rank);
    int64_t xst[TX_MAX_RANK];
    contig_strides(x->rank, x->dims, xst);
    TX_TRY(alloc_cp(n, 1));
    tx_cuda_strided *c = &n->cp[0];
    c->rank = y->rank;
    bool seen[TX_MAX_RANK] = {false};
    for (int32_t k = 0; k < x->rank; k++) {
        int64_t p = np ? perm[k] : x->rank - 1 - k;
        if (p < 0) p += x->rank;
        if (p < 0 || p >= x->rank || seen[p]) return UNSUP("perm is not a permutation");
        seen[p] = true;
        if (y->dims[k] != x->dims[p]) return UNSUP("output shape does not match perm");
        c->dims[k] = y->dims[k];
        c->src_st[k] = xst[p];
    }
    contig_strides(y->rank, y->dims, c->dst_st);
    return NULL;
}

static teexec_status *prep_slice(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    TX_TRY(need_rank(n, x->rank));
    const tx_tensor *vals[4] = {NULL, NULL, NULL, NULL};
    if (n->node->opset >= 10)
        for (size_t k = 1; k < 5 && k < n->n_in; k++) {
            if (!IN(n, k)) continue;
            if (!n->in[k].data) return UNSUP("input %zu is not known before running", k);
            vals[k - 1] = &n->in[k];
        }
    tx_shape xs = tx_shape_of(x), ys;
    int64_t start[TX_MAX_RANK], step[TX_MAX_RANK], xst[TX_MAX_RANK];
    TX_TRY(tx_slice_params(n->node, vals, &xs, start, step, &ys));
    if (!tx_tensor_has_shape(y, &ys)) return UNSUP("output shape differs from the slice's");
    contig_strides(x->rank, x->dims, xst);
    TX_TRY(alloc_cp(n, 1));
    tx_cuda_strided *c = &n->cp[0];
    c->rank = y->rank;
    for (int32_t k = 0; k < y->rank; k++) {
        c->dims[k] = y->dims[k];
        c->src_st[k] = xst[k] * step[k];
        c->src_base += start[k] * xst[k];
    }
    contig_strides(y->rank, y->dims, c->dst_st);
    return NULL;
}

/* Split (outputs are chunks of the input) and Concat (the reverse): one
 * copy per chunk, written in the "whole <- chunk" direction for Concat and
 * "chunk <- whole" for Split. */
static teexec_status *prep_chunks(tx_cuda_std_node *n)
{
    bool split = n->kind == K_SPLIT;
    const tx_tensor *whole = split ? IN(n, 0) : &n->out[0];
    if (!whole) return UNSUP("input 0 is missing");
    TX_TRY(need_rank(n, whole->rank));
    size_t count = split ? n->n_out : n->n_in;
    int32_t ax;
    int64_t *sizes = calloc(count ? count : 1, sizeof *sizes);
    if (!sizes) return tx_oom();
    teexec_status *st = NULL;
    if (split) {
        const tx_tensor *split_in = NULL;
        if (n->node->opset >= 13 && IN(n, 1)) {
            if (!n->in[1].data) st = UNSUP("input split is not known before running");
            split_in = &n->in[1];
        }
        tx_shape xs = tx_shape_of(whole);
        if (!st) st = tx_split_sizes(n->node, split_in, &xs, &ax, sizes);
    } else {
        int64_t axis;
        st = tx_ir_attr_int(n->node, "axis", 0, &axis);
        if (!st) st = tx_shape_normalize_axis(axis, whole->rank, &ax);
        for (size_t j = 0; j < count && !st; j++) {
            if (!IN(n, j)) st = UNSUP("input %zu is missing", j);
            else sizes[j] = n->in[j].rank > ax ? n->in[j].dims[ax] : 0;
        }
    }
    if (!st) st = alloc_cp(n, count);
    int64_t wst[TX_MAX_RANK];
    if (!st) contig_strides(whole->rank, whole->dims, wst);
    int64_t off = 0;
    for (size_t j = 0; j < count && !st; j++) {
        const tx_tensor *part = split ? &n->out[j] : &n->in[j];
        if (!present(part) || part->rank != whole->rank) {
            st = UNSUP("chunk %zu is missing or of another rank", j);
            break;
        }
        for (int32_t k = 0; k < whole->rank && !st; k++)
            if (part->dims[k] != (k == ax ? sizes[j] : whole->dims[k]))
                st = UNSUP("chunk %zu does not fit the %s", j, split ? "split" : "output");
        if (st) break;
        tx_cuda_strided *c = &n->cp[j];
        c->rank = whole->rank;
        memcpy(c->dims, part->dims, sizeof(int64_t) * (size_t)part->rank);
        int64_t *w = split ? c->src_st : c->dst_st, *p = split ? c->dst_st : c->src_st;
        memcpy(w, wst, sizeof(int64_t) * (size_t)whole->rank);
        contig_strides(part->rank, part->dims, p);
        if (split) c->src_base = off * wst[ax];
        else c->dst_base = off * wst[ax];
        off += sizes[j];
    }
    if (!st && off != whole->dims[ax]) st = UNSUP("chunks do not cover the axis");
    free(sizes);
    return at_node(n, st);
}

static teexec_status *prep_gather(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *idx = IN(n, 1);
    if (!x || !idx) return UNSUP("inputs are missing");
    if (idx->dtype != TEEXEC_DTYPE_INT64 && idx->dtype != TEEXEC_DTYPE_INT32)
        return UNSUP("indices must be int64 or int32");
    if (tx_dtype_elem_size(x->dtype) == 0 || x->dtype == TEEXEC_DTYPE_STRING)
        return UNSUP("data of %s cannot be gathered", teexec_dtype_name(x->dtype));
    int64_t axis;
    int32_t ax;
    TX_TRY(tx_ir_attr_int(n->node, "axis", 0, &axis));
    TX_TRY(at_node(n, tx_shape_normalize_axis(axis, x->rank, &ax)));
    n->outer = 1;
    n->inner = 1;
    for (int32_t k = 0; k < ax; k++) n->outer *= (size_t)x->dims[k];
    for (int32_t k = ax + 1; k < x->rank; k++) n->inner *= (size_t)x->dims[k];
    n->len = (size_t)x->dims[ax];
    n->n_idx = (size_t)idx->numel;
    if ((uint64_t)n->outer * n->n_idx * n->inner != n->out[0].numel)
        return UNSUP("output size does not match the gather");
    return NULL;
}

static teexec_status *prep_expand(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    TX_TRY(need_rank(n, y->rank));
    if (x->rank > y->rank || x->dtype != y->dtype) return UNSUP("output does not fit the input");
    tx_shape xs = tx_shape_of(x), ys = tx_shape_of(y);
    if (!tx_shape_broadcastable_to(&xs, &ys)) return UNSUP("input does not broadcast to the output");
    TX_TRY(alloc_cp(n, 1));
    tx_cuda_strided *c = &n->cp[0];
    c->rank = y->rank;
    memcpy(c->dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
    bcast_strides(x, y->rank, y->dims, c->src_st);
    contig_strides(y->rank, y->dims, c->dst_st);
    bgrad_init(&n->bg[0], y, c->src_st);
    return NULL;
}

static teexec_status *prep_ew(tx_cuda_std_node *n, size_t n_operands)
{
    const tx_tensor *y = &n->out[0];
    TX_TRY(need_rank(n, y->rank));
    tx_shape ys = tx_shape_of(y);
    n->bc.rank = y->rank;
    memcpy(n->bc.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
    for (size_t i = 0; i < n_operands; i++) {
        const tx_tensor *t = IN(n, i);
        if (!t) return UNSUP("input %zu is missing", i);
        tx_shape ts = tx_shape_of(t);
        if (t->rank > y->rank || !tx_shape_broadcastable_to(&ts, &ys))
            return UNSUP("input %zu does not broadcast to the output", i);
        bcast_strides(t, y->rank, y->dims, n->bc.st[i]);
        bgrad_init(&n->bg[i], y, n->bc.st[i]);
    }
    if (n->kind == K_WHERE) {
        if (n->in[0].dtype != TEEXEC_DTYPE_BOOL) return UNSUP("condition must be bool");
        if (n->in[1].dtype != y->dtype || n->in[2].dtype != y->dtype)
            return UNSUP("x, y and the output must share a dtype");
        if (!tx_dtype_elem_size(y->dtype) || y->dtype == TEEXEC_DTYPE_STRING)
            return UNSUP("%s is not supported", teexec_dtype_name(y->dtype));
        return NULL;
    }
    for (size_t i = 0; i < n_operands; i++)
        if (!is_float(n->in[i].dtype))
            return UNSUP("%s operands are not supported on the GPU (float32, bfloat16, float16)",
                         teexec_dtype_name(n->in[i].dtype));
    if (!is_float(y->dtype)) return UNSUP("output must be a float type");
    return NULL;
}

static teexec_status *prep_softmax(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0);
    if (!x) return UNSUP("input 0 is missing");
    if (!is_float(x->dtype) || n->out[0].dtype != x->dtype)
        return UNSUP("%s is not supported", teexec_dtype_name(x->dtype));
    bool legacy = n->node->opset < 13;
    int64_t axis;
    TX_TRY(tx_ir_attr_int(n->node, "axis", legacy ? 1 : -1, &axis));
    n->log_mode = strcmp(n->node->op_type, "LogSoftmax") == 0;
    n->outer = n->len = n->inner = 1;
    if (x->rank == 0) {
        if (axis != 0 && axis != -1) return UNSUP("axis %lld for a scalar", (long long)axis);
        return NULL;
    }
    int32_t ax;
    TX_TRY(at_node(n, tx_shape_normalize_axis(axis, x->rank, &ax)));
    for (int32_t k = 0; k < ax; k++) n->outer *= (size_t)x->dims[k];
    if (legacy) {
        for (int32_t k = ax; k < x->rank; k++) n->len *= (size_t)x->dims[k];
    } else {
        n->len = (size_t)x->dims[ax];
        for (int32_t k = ax + 1; k < x->rank; k++) n->inner *= (size_t)x->dims[k];
    }
    return NULL;
}

static size_t align256(size_t v) { return (v + 255) & ~(size_t)255; }

static teexec_status *prep_matmul(tx_cuda_std_node *n, struct tx_gemm_lt *shared_gemm)
{
    const tx_tensor *A = IN(n, 0), *B = IN(n, 1), *Y = &n->out[0];
    if (!A || !B) return UNSUP("inputs are missing");
    if (!is_float(A->dtype) || A->dtype != B->dtype || Y->dtype != A->dtype)
        return UNSUP("operands must share a float dtype (float32, bfloat16, float16)");
    if (A->rank < 1 || B->rank < 1) return UNSUP("scalar operands");
    tx_shape as = tx_shape_of(A), bs = tx_shape_of(B), ys;
    TX_TRY(at_node(n, tx_shape_matmul(&as, &bs, &ys)));
    if (!tx_tensor_has_shape(Y, &ys)) return UNSUP("output shape differs from the product's");
    int64_t M = A->rank == 1 ? 1 : A->dims[A->rank - 2], K = A->dims[A->rank - 1];
    int64_t N = B->rank == 1 ? 1 : B->dims[B->rank - 1];
    int32_t nb_a = A->rank > 2 ? A->rank - 2 : 0, nb_b = B->rank > 2 ? B->rank - 2 : 0;
    int32_t nb = nb_a > nb_b ? nb_a : nb_b;
    uint64_t batch_a = 1, batch_b = 1;
    for (int32_t k = 0; k < nb_a; k++) batch_a *= (uint64_t)A->dims[k];
    for (int32_t k = 0; k < nb_b; k++) batch_b *= (uint64_t)B->dims[k];
    n->N = N;
    n->K = K;
    if (batch_b == 1) {
        /* B is one matrix: A's batch folds into its rows, one GEMM */
        n->M = (int64_t)batch_a * M;
        n->n_steps = 1;
        n->steps = calloc(1, sizeof *n->steps);
        if (!n->steps) return tx_oom();
    } else {
        n->M = M;
        int64_t bd[TX_MAX_RANK], sa[TX_MAX_RANK], sb[TX_MAX_RANK];
        int64_t s_a = M * K, s_b = K * N;
        for (int32_t k = nb - 1; k >= 0; k--) {
            int32_t ka = k - (nb - nb_a), kb = k - (nb - nb_b);
            int64_t da = ka >= 0 ? A->dims[ka] : 1, db = kb >= 0 ? B->dims[kb] : 1;
            bd[k] = da > db ? da : db;
            sa[k] = da == 1 ? 0 : s_a;
            sb[k] = db == 1 ? 0 : s_b;
            if (ka >= 0) s_a *= da;
            if (kb >= 0) s_b *= db;
        }
        uint64_t nbatch = 1;
        for (int32_t k = 0; k < nb; k++) nbatch *= (uint64_t)bd[k];
        n->acc_a = nbatch != batch_a;
        n->acc_b = nbatch != batch_b;
        n->n_steps = (size_t)nbatch;
        n->steps = calloc(nbatch ? nbatch : 1, sizeof *n->steps);
        bool *seen_a = calloc(batch_a ? batch_a : 1, 1), *seen_b = calloc(batch_b ? batch_b : 1, 1);
        if (!n->steps || !seen_a || !seen_b) {
            free(seen_a);
            free(seen_b);
            return tx_oom();
        }
        int64_t idx[TX_MAX_RANK] = {0};
        for (uint64_t bi = 0; bi < nbatch; bi++) {
            mm_step *s = &n->steps[bi];
            for (int32_t k = 0; k < nb; k++) {
                s->oa += idx[k] * sa[k];
                s->ob += idx[k] * sb[k];
            }
            s->oy = (int64_t)bi * M * N;
            int64_t ea = M * K != 0 ? M * K : 1, eb = K * N != 0 ? K * N : 1;
            size_t ia = (size_t)(s->oa / ea), ib = (size_t)(s->ob / eb);
            s->beta_a = seen_a[ia] ? 1.0f : 0.0f;
            s->beta_b = seen_b[ib] ? 1.0f : 0.0f;
            seen_a[ia] = seen_b[ib] = true;
            for (int32_t k = nb - 1; k >= 0; k--) {
                if (++idx[k] < bd[k]) break;
                idx[k] = 0;
            }
        }
        free(seen_a);
        free(seen_b);
    }
    if (shared_gemm) {
        n->gemm = shared_gemm;
    } else {
        TX_TRY(at_node(n, tx_gemm_lt_create(0, &n->gemm)));
        n->own_gemm = true;
    }
    /* FP32 accumulation of a broadcast operand's grad: in place for FLOAT,
     * in scratch for 16-bit types (one rounding at the end) */
    bool f32 = A->dtype == TEEXEC_DTYPE_FLOAT;
    size_t off = align256(tx_gemm_lt_workspace_bytes(n->gemm));
    n->ws_off = 0;
    n->acc_a_off = n->acc_b_off = SIZE_MAX;
    if (n->acc_a && !f32) {
        n->acc_a_off = off;
        off += align256((size_t)A->numel * sizeof(float));
    }
    if (n->acc_b && !f32) {
        n->acc_b_off = off;
        off += align256((size_t)B->numel * sizeof(float));
    }
    n->scratch = off;
    tx_gemm_desc d = {.m = N, .n = n->M, .k = K, .lda = N, .ldb = K, .ldd = N,
                      .a_type = A->dtype, .b_type = A->dtype, .d_type = A->dtype, .alpha = 1.0f};
    if (N && n->M && K) TX_TRY(at_node(n, tx_gemm_lt_check(n->gemm, &d)));
    return NULL;
}

/* ---- prepare / free ------------------------------------------------------------ */

static teexec_status *copy_meta(const tx_tensor *const *src, size_t count, tx_tensor **dst,
                                const tx_tensor *const *host, tx_cuda_std_node *n)
{
    *dst = calloc(count ? count : 1, sizeof **dst);
    if (!*dst) return tx_oom();
    for (size_t i = 0; i < count; i++) {
        tx_tensor *t = &(*dst)[i];
        if (!src || !src[i]) {
            t->rank = -1;
            continue;
        }
        const tx_tensor *h = host ? host[i] : NULL;
        if (h && (h->dtype == TEEXEC_DTYPE_INT64 || h->dtype == TEEXEC_DTYPE_INT32) &&
            h->numel <= 4096) {
            /* a small integer value known now drives attributes (Slice
             * starts, Split sizes); data != NULL marks it known */
            memset(t, 0, sizeof *t);
            TX_TRY(at_node(n, tx_tensor_clone(h, t)));
            continue;
        }
        *t = *src[i];
        t->data = NULL;
        t->owns_data = false;
    }
    return NULL;
}

void tx_cuda_std_node_free(tx_cuda_std_node *n)
{
    if (!n) return;
    if (n->in)
        for (size_t i = 0; i < n->n_in; i++) tx_tensor_release(&n->in[i]);
    free(n->in);
    free(n->out);
    free(n->cp);
    free(n->steps);
    if (n->own_gemm) tx_gemm_lt_destroy(n->gemm);
    free(n);
}

teexec_status *tx_cuda_std_prepare(const tx_cuda_std_desc *d, tx_cuda_std_node **out)
{
    *out = NULL;
    if (!d || !d->node) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "std_cuda: no node");
    const tx_ir_node *node = d->node;
    size_t which = SIZE_MAX;
    if (!node->domain[0] || !strcmp(node->domain, "ai.onnx"))
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
            if (!strcmp(ops[i].op, node->op_type)) which = i;
    if (which == SIZE_MAX)
        return node_err(node, TEEXEC_ERR_UNSUPPORTED, "this op has no GPU kernel");
    if (d->n_out < 1 || !d->out || !d->out[0])
        return node_err(node, TEEXEC_ERR_UNSUPPORTED, "output 0 is missing");
    tx_cuda_std_node *n = calloc(1, sizeof *n);
    if (!n) return tx_oom();
    n->node = node;
    n->kind = ops[which].kind;
    n->ew = ops[which].ew;
    n->n_in = d->n_in;
    n->n_out = d->n_out;
    teexec_status *st = copy_meta(d->in, d->n_in, &n->in, d->in_host, n);
    if (!st) st = copy_meta(d->out, d->n_out, &n->out, NULL, n);
    for (size_t j = 1; !st && j < n->n_out && n->kind != K_SPLIT; j++)
        if (present(&n->out[j])) st = UNSUP("output %zu is not produced on the GPU", j);
    if (!st) {
        switch (n->kind) {
        case K_COPY:
        case K_CAST: st = prep_copy_like(n); break;
        case K_TRANSPOSE: st = prep_transpose(n); break;
        case K_SLICE: st = prep_slice(n); break;
        case K_SPLIT:
        case K_CONCAT: st = prep_chunks(n); break;
        case K_GATHER: st = prep_gather(n); break;
        case K_EXPAND: st = prep_expand(n); break;
        case K_EW: {
            bool unary = n->ew == TX_STD_EW_NEG || n->ew == TX_STD_EW_SQRT ||
                         n->ew == TX_STD_EW_RECIP;
            st = prep_ew(n, unary ? 1 : 2);
            break;
        }
        case K_WHERE: st = prep_ew(n, 3); break;
        case K_SOFTMAX: st = prep_softmax(n); break;
        case K_MATMUL: st = prep_matmul(n, d->gemm); break;
        }
    }
    if (st) {
        st = at_node(n, st);
        tx_cuda_std_node_free(n);
        return st;
    }
    *out = n;
    return NULL;
}

bool tx_cuda_std_is_alias(const tx_cuda_std_node *n)
{
    if (!n) return false;
    if (n->kind == K_COPY) return true;
    return n->kind == K_CAST && n->in[0].dtype == n->out[0].dtype;
}

bool tx_cuda_std_differentiable(const tx_cuda_std_node *n, size_t slot)
{
    if (!n || slot >= n->n_in || !present(&n->in[slot]) || !is_float(n->in[slot].dtype))
        return false;
    if (n->kind == K_CAST && !is_float(n->out[0].dtype)) return false;
    if (n->kind == K_SPLIT || n->kind == K_SLICE) return slot == 0;
    return tx_bwd_slot_differentiable(n->node->op_type, slot);
}

size_t tx_cuda_std_scratch_bytes(const tx_cuda_std_node *n) { return n ? n->scratch : 0; }

/* ---- forward -------------------------------------------------------------------- */

static void *ptr(void *base, int64_t elems, teexec_dtype dt)
{
    return (char *)base + (size_t)elems * tx_dtype_elem_size(dt);
}

static teexec_status *gemm(tx_cuda_std_node *n, int64_t m, int64_t nn, int64_t k, int ta, int tb,
                           int64_t lda, int64_t ldb, int64_t ldd, const void *A, const void *B,
                           void *D, teexec_dtype in_dt, teexec_dtype out_dt, float beta,
                           void *scratch, void *stream)
{
    if (!m || !nn) return NULL;
    tx_gemm_desc d = {.m = m, .n = nn, .k = k, .transa = ta, .transb = tb, .lda = lda,
                      .ldb = ldb, .ldd = ldd, .ldc = ldd, .a_type = in_dt, .b_type = in_dt,
                      .d_type = out_dt, .alpha = 1.0f, .beta = beta};
    void *ws = tx_gemm_lt_workspace_bytes(n->gemm) ? (char *)scratch + n->ws_off : NULL;
    if (!k) {
        /* an empty sum: cuBLASLt may refuse k == 0, the answer is beta * D */
        if (beta != 0.0f) return NULL;
        return cuda_err(n, cudaMemsetAsync(D, 0, (size_t)(m * nn) * tx_dtype_elem_size(out_dt),
                                           (cudaStream_t)stream),
                        "cudaMemsetAsync");
    }
    return at_node(n, tx_gemm_lt_run(n->gemm, &d, A, B, beta != 0.0f ? D : NULL, D, ws, stream));
}

static teexec_status *fwd_matmul(tx_cuda_std_node *n, const tx_tensor *const *in,
                                 tx_tensor *const *out, void *scratch, void *stream)
{
    teexec_dtype dt = n->in[0].dtype;
    for (size_t s = 0; s < n->n_steps; s++) {
        const mm_step *st = &n->steps[s];
        /* row-major Y = A B is column-major Y^T = B^T A^T: "NN" with B first */
        TX_TRY(gemm(n, n->N, n->M, n->K, 0, 0, n->N, n->K, n->N, ptr(in[1]->data, st->ob, dt),
                    ptr(in[0]->data, st->oa, dt), ptr(out[0]->data, st->oy, dt), dt, dt, 0.0f,
                    scratch, stream));
    }
    return NULL;
}

static teexec_status *memset0(const tx_cuda_std_node *n, void *p, size_t bytes, void *stream)
{
    if (!bytes) return NULL;
    return cuda_err(n, cudaMemsetAsync(p, 0, bytes, (cudaStream_t)stream), "cudaMemsetAsync");
}

static teexec_status *memcpy_d2d(const tx_cuda_std_node *n, void *dst, const void *src,
                                 size_t bytes, void *stream)
{
    if (!bytes || dst == src) return NULL;
    return cuda_err(n, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                       (cudaStream_t)stream),
                    "cudaMemcpyAsync");
}

teexec_status *tx_cuda_std_forward(tx_cuda_std_node *n, const tx_tensor *const *in,
                                   tx_tensor *const *out, void *scratch, void *stream)
{
    const tx_tensor *y0 = &n->out[0];
    size_t esz = tx_dtype_elem_size(y0->dtype);
    switch (n->kind) {
    case K_COPY: return memcpy_d2d(n, out[0]->data, in[0]->data, y0->nbytes, stream);
    case K_CAST:
        if (n->in[0].dtype == y0->dtype)
            return memcpy_d2d(n, out[0]->data, in[0]->data, y0->nbytes, stream);
        return at_node(n, tx_cuda_cast(in[0]->data, n->in[0].dtype, out[0]->data, y0->dtype,
                                       (size_t)y0->numel, stream));
    case K_TRANSPOSE:
    case K_SLICE:
    case K_EXPAND:
        return at_node(n, tx_cuda_strided_copy(&n->cp[0], in[0]->data, out[0]->data, esz, stream));
    case K_SPLIT:
        for (size_t j = 0; j < n->n_cp; j++)
            TX_TRY(at_node(n, tx_cuda_strided_copy(&n->cp[j], in[0]->data, out[j]->data,
                                                   tx_dtype_elem_size(n->in[0].dtype), stream)));
        return NULL;
    case K_CONCAT:
        for (size_t j = 0; j < n->n_cp; j++)
            TX_TRY(at_node(n, tx_cuda_strided_copy(&n->cp[j], in[j]->data, out[0]->data, esz,
                                                   stream)));
        return NULL;
    case K_GATHER:
        return at_node(n, tx_cuda_gather_forward(in[0]->data, esz, in[1]->data, n->in[1].dtype,
                                                 n->n_idx, n->outer, n->len, n->inner,
                                                 out[0]->data, stream));
    case K_EW:
        return at_node(n, tx_cuda_ew_forward(n->ew, &n->bc, in[0]->data, n->in[0].dtype,
                                             n->n_in > 1 && in[1] ? in[1]->data : NULL,
                                             n->n_in > 1 && present(&n->in[1]) ? n->in[1].dtype
                                                                               : y0->dtype,
                                             out[0]->data, y0->dtype, stream));
    case K_WHERE:
        return at_node(n, tx_cuda_where_forward(&n->bc, in[0]->data, in[1]->data, in[2]->data,
                                                out[0]->data, esz, stream));
    case K_SOFTMAX:
        return at_node(n, tx_cuda_softmax_forward(in[0]->data, out[0]->data, y0->dtype, n->outer,
                                                  n->len, n->inner, n->log_mode, stream));
    case K_MATMUL: return fwd_matmul(n, in, out, scratch, stream);
    }
    return node_err(n->node, TEEXEC_ERR_INTERNAL, "unknown kind");
}

/* ---- backward ------------------------------------------------------------------- */

static tx_cuda_strided swapped(const tx_cuda_strided *c)
{
    tx_cuda_strided s = *c;
    memcpy(s.src_st, c->dst_st, sizeof s.src_st);
    memcpy(s.dst_st, c->src_st, sizeof s.dst_st);
    s.src_base = c->dst_base;
    s.dst_base = c->src_base;
    return s;
}

static teexec_status *bwd_matmul(tx_cuda_std_node *n, const tx_tensor *const *in,
                                 const tx_tensor *const *gout, tx_tensor *const *gin,
                                 void *scratch, void *stream)
{
    teexec_dtype dt = n->in[0].dtype;
    tx_tensor *ga = gin[0], *gb = n->n_in > 1 ? gin[1] : NULL;
    if (!gout[0]) {
        if (ga) TX_TRY(memset0(n, ga->data, n->in[0].nbytes, stream));
        if (gb) TX_TRY(memset0(n, gb->data, n->in[1].nbytes, stream));
        return NULL;
    }
    const void *g = gout[0]->data;
    bool sa = ga && n->acc_a_off != SIZE_MAX, sb = gb && n->acc_b_off != SIZE_MAX;
    void *da = sa ? (char *)scratch + n->acc_a_off : ga ? ga->data : NULL;
    void *db = sb ? (char *)scratch + n->acc_b_off : gb ? gb->data : NULL;
    teexec_dtype dta = sa ? TEEXEC_DTYPE_FLOAT : dt, dtb = sb ? TEEXEC_DTYPE_FLOAT : dt;
    for (size_t s = 0; s < n->n_steps; s++) {
        const mm_step *st = &n->steps[s];
        const void *gy = ptr((void *)g, st->oy, dt);
        if (da) /* dA^T = B dY^T: "TN" */
            TX_TRY(gemm(n, n->K, n->M, n->N, 1, 0, n->N, n->N, n->K,
                        ptr(in[1]->data, st->ob, dt), gy, ptr(da, st->oa, dta), dt, dta,
                        st->beta_a, scratch, stream));
        if (db) /* dB^T = dY^T A: "NT" */
            TX_TRY(gemm(n, n->N, n->K, n->M, 0, 1, n->N, n->K, n->N, gy,
                        ptr(in[0]->data, st->oa, dt), ptr(db, st->ob, dtb), dt, dtb,
                        st->beta_b, scratch, stream));
    }
    if (sa)
        TX_TRY(at_node(n, tx_cuda_convert(da, TEEXEC_DTYPE_FLOAT, ga->data, dt,
                                          (size_t)n->in[0].numel, stream)));
    if (sb)
        TX_TRY(at_node(n, tx_cuda_convert(db, TEEXEC_DTYPE_FLOAT, gb->data, dt,
                                          (size_t)n->in[1].numel, stream)));
    return NULL;
}

/* Elementwise ops, Where and Expand: every wanted input grad through the
 * broadcast-reduction kernel with the op's term. */
static teexec_status *bwd_bcast(tx_cuda_std_node *n, const tx_tensor *const *in,
                                const tx_tensor *const *out, const tx_tensor *const *gout,
                                tx_tensor *const *gin, void *stream)
{
    const tx_tensor *y = &n->out[0];
    size_t first = n->kind == K_WHERE ? 1 : 0;
    size_t count = n->kind == K_EXPAND ? 1 : n->n_in;
    if (n->kind == K_EW && (n->ew == TX_STD_EW_NEG || n->ew == TX_STD_EW_SQRT ||
                            n->ew == TX_STD_EW_RECIP))
        count = 1;
    for (size_t i = first; i < count; i++) {
        if (!gin[i]) continue;
        const tx_tensor *x = &n->in[i];
        if (!gout[0]) {
            TX_TRY(memset0(n, gin[i]->data, x->nbytes, stream));
            continue;
        }
        tx_cuda_bgrad p = n->bg[i];
        tx_cuda_bgrad_ops o = {.g = gout[0]->data, .g_dtype = y->dtype, .y = out[0]->data,
                               .y_dtype = y->dtype};
        tx_std_grad_term term = TX_STD_GT_G;
        /* operand roles: "a" is this input, "b" the other one */
        if (n->kind == K_EW && count == 2) {
            size_t other = 1 - i;
            memcpy(p.st_a, n->bc.st[i], sizeof p.st_a);
            memcpy(p.st_b, n->bc.st[other], sizeof p.st_b);
            o.a = in[i]->data;
            o.a_dtype = n->in[i].dtype;
            o.b = in[other]->data;
            o.b_dtype = n->in[other].dtype;
        }
        if (n->kind == K_WHERE) {
            memcpy(p.st_c, n->bc.st[0], sizeof p.st_c);
            o.cond = in[0]->data;
            term = i == 1 ? TX_STD_GT_WHERE_X : TX_STD_GT_WHERE_Y;
        } else if (n->kind == K_EW) {
            switch (n->ew) {
            case TX_STD_EW_ADD: term = TX_STD_GT_G; break;
            case TX_STD_EW_SUB: term = i == 0 ? TX_STD_GT_G : TX_STD_GT_NEG_G; break;
            case TX_STD_EW_MUL: term = TX_STD_GT_MUL; break; /* g * other */
            case TX_STD_EW_DIV:
                if (i == 0) {
                    term = TX_STD_GT_DIV_A;
                } else {
                    /* -g a / b^2 with a the numerator: roles as written */
                    term = TX_STD_GT_DIV_B;
                    memcpy(p.st_a, n->bc.st[0], sizeof p.st_a);
                    memcpy(p.st_b, n->bc.st[1], sizeof p.st_b);
                    o.a = in[0]->data;
                    o.a_dtype = n->in[0].dtype;
                    o.b = in[1]->data;
                    o.b_dtype = n->in[1].dtype;
                }
                break;
            case TX_STD_EW_POW:
                term = i == 0 ? TX_STD_GT_POW_A : TX_STD_GT_POW_B;
                memcpy(p.st_a, n->bc.st[0], sizeof p.st_a);
                memcpy(p.st_b, n->bc.st[1], sizeof p.st_b);
                o.a = in[0]->data;
                o.a_dtype = n->in[0].dtype;
                o.b = in[1]->data;
                o.b_dtype = n->in[1].dtype;
                break;
            case TX_STD_EW_NEG: term = TX_STD_GT_NEG_G; break;
            case TX_STD_EW_SQRT: term = TX_STD_GT_SQRT; break;
            default: term = TX_STD_GT_RECIP; break;
            }
        }
        TX_TRY(at_node(n, tx_cuda_bcast_grad(term, &p, &o, gin[i]->data, x->dtype, stream)));
    }
    return NULL;
}

teexec_status *tx_cuda_std_backward(tx_cuda_std_node *n, const tx_tensor *const *in,
                                    const tx_tensor *const *out,
                                    const tx_tensor *const *gout, tx_tensor *const *gin,
                                    void *scratch, void *stream)
{
    const tx_tensor *x0 = &n->in[0];
    tx_tensor *g0 = gin[0];
    size_t esz = tx_dtype_elem_size(x0->dtype);
    switch (n->kind) {
    case K_COPY:
    case K_CAST:
        if (!g0) return NULL;
        if (!gout[0]) return memset0(n, g0->data, x0->nbytes, stream);
        if (n->out[0].dtype == x0->dtype)
            return memcpy_d2d(n, g0->data, gout[0]->data, x0->nbytes, stream);
        if (!is_float(x0->dtype) || !is_float(n->out[0].dtype))
            return node_err(n->node, TEEXEC_ERR_UNSUPPORTED, "no gradient through this cast");
        return at_node(n, tx_cuda_convert(gout[0]->data, n->out[0].dtype, g0->data, x0->dtype,
                                          (size_t)x0->numel, stream));
    case K_TRANSPOSE:
    case K_SLICE: {
        if (!g0) return NULL;
        if (n->kind == K_SLICE || !gout[0])
            TX_TRY(memset0(n, g0->data, x0->nbytes, stream));
        if (!gout[0]) return NULL;
        tx_cuda_strided s = swapped(&n->cp[0]);
        return at_node(n, tx_cuda_strided_copy(&s, gout[0]->data, g0->data, esz, stream));
    }
    case K_SPLIT: {
        if (!g0) return NULL;
        bool all = true;
        for (size_t j = 0; j < n->n_cp; j++) all = all && gout[j];
        if (!all) TX_TRY(memset0(n, g0->data, x0->nbytes, stream));
        for (size_t j = 0; j < n->n_cp; j++) {
            if (!gout[j]) continue;
            tx_cuda_strided s = swapped(&n->cp[j]);
            TX_TRY(at_node(n, tx_cuda_strided_copy(&s, gout[j]->data, g0->data, esz, stream)));
        }
        return NULL;
    }
    case K_CONCAT:
        for (size_t j = 0; j < n->n_cp; j++) {
            if (!gin[j]) continue;
            if (!gout[0]) {
                TX_TRY(memset0(n, gin[j]->data, n->in[j].nbytes, stream));
                continue;
            }
            tx_cuda_strided s = swapped(&n->cp[j]);
            TX_TRY(at_node(n, tx_cuda_strided_copy(&s, gout[0]->data, gin[j]->data,
                                                   tx_dtype_elem_size(n->in[j].dtype), stream)));
        }
        return NULL;
    case K_GATHER:
        if (!g0) return NULL;
        if (!gout[0]) return memset0(n, g0->data, x0->nbytes, stream);
        return at_node(n, tx_cuda_gather_backward(gout[0]->data, n->out[0].dtype, in[1]->data,
                                                  n->in[1].dtype, n->n_idx, n->outer, n->len,
                                                  n->inner, g0->data, x0->dtype, stream));
    case K_EXPAND:
    case K_EW:
    case K_WHERE: return bwd_bcast(n, in, out, gout, gin, stream);
    case K_SOFTMAX:
        if (!g0) return NULL;
        if (!gout[0]) return memset0(n, g0->data, x0->nbytes, stream);
        return at_node(n, tx_cuda_softmax_backward(out[0]->data, gout[0]->data, g0->data,
                                                   x0->dtype, n->outer, n->len, n->inner,
                                                   n->log_mode, stream));
    case K_MATMUL: return bwd_matmul(n, in, gout, gin, scratch, stream);
    }
    return node_err(n->node, TEEXEC_ERR_INTERNAL, "unknown kind");
}
