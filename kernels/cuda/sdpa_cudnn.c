/*
 * sdpa_cudnn.c - cuDNN SDPA forward/backward graphs and their plan cache
 * (see sdpa_cudnn.h). The op sequence follows cuDNN frontend's composite
 * SDPA nodes (shared/reference/cudnn-sdpa-c.md, sections 3 and 4), because
 * the fused engine only recognises graphs of that shape.
 */
#include "kernels/cuda/sdpa_cudnn.h"

#include "kernels/cuda/cudnn_dl.h"

#include "base/status.h"

#include <cuda_runtime.h>

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Non-virtual tensor UIDs; virtual ones count up from UID_VIRTUAL. */
enum {
    UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV, UID_SCALE,
    UID_NEG_INF, UID_ONE, UID_SEQ_Q, UID_SEQ_KV, UID_SOFTMAX_SUM, UID_DQ_ACCUM, UID_DIAG_SHIFT,
    UID_VIRTUAL = 100
};

#define ALIGN_UP(x) (((x) + (size_t)255) & ~(size_t)255)

typedef struct plan_key {
    int dir;
    int64_t b, h, hk, sq, skv, d, dv;
    int dtype, sbhd, causal, padding;
} plan_key;

typedef struct sdpa_plan {
    plan_key key;
    cudnnBackendDescriptor_t *descs; /* everything to destroy, plan included */
    int n_descs, cap_descs;
    cudnnBackendDescriptor_t plan;
    size_t engine_ws;
    size_t off_stats, off_sum, off_dqacc, off_engine, total_ws; /* workspace layout */
    int auto_pad;       /* full-length padding mask added as cuDNN frontend does */
    int32_t *auto_seq;  /* device: seq_q [b], then seq_kv at auto_seq_kv, when auto_pad */
    size_t auto_seq_kv; /* element offset of seq_kv, 16-byte aligned */
    int uses_neg_inf;   /* a mask op reads the -inf scalar (the variant pack must
                         * name exactly the graph's tensors) */
} sdpa_plan;

struct tx_sdpa_cudnn {
    cudnnHandle_t handle;
    size_t version;
    int sm;  /* compute capability major*10+minor */
    sdpa_plan **plans;
    int n_plans, cap_plans;
};

/* ---- graph builder ---------------------------------------------------- */

typedef struct builder {
    sdpa_plan *p;
    cudnnHandle_t handle;
    cudnnStatus_t err;
    const char *where;
    int64_t next_uid;
    cudnnBackendDescriptor_t ops[64];
    int n_ops;
    bool oom;
} builder;

static cudnnBackendDescriptor_t keep(builder *B, cudnnBackendDescriptor_t d)
{
    sdpa_plan *p = B->p;
    if (p->n_descs == p->cap_descs) {
        int nc = p->cap_descs ? p->cap_descs * 2 : 64;
        cudnnBackendDescriptor_t *nd = realloc(p->descs, (size_t)nc * sizeof *nd);
        if (!nd) {
            tx_cudnn()->BackendDestroyDescriptor(d);
            B->oom = true;
            return NULL;
        }
        p->descs = nd;
        p->cap_descs = nc;
    }
    p->descs[p->n_descs++] = d;
    return d;
}

#define CK(B, call)                                                \
    do {                                                           \
        if (!(B)->err && !(B)->oom) {                              \
            cudnnStatus_t ck_ = (call);                            \
            if (ck_ != CUDNN_STATUS_SUCCESS) {                     \
                (B)->err = ck_;                                    \
                (B)->where = #call;                                \
            }                                                      \
        }                                                          \
    } while (0)

static bool failed(const builder *B) { return B->err != CUDNN_STATUS_SUCCESS || B->oom; }

static cudnnBackendDescriptor_t make(builder *B, cudnnBackendDescriptorType_t type)
{
    if (failed(B)) return NULL;
    cudnnBackendDescriptor_t d = NULL;
    CK(B, tx_cudnn()->BackendCreateDescriptor(type, &d));
    if (failed(B)) return NULL;
    return keep(B, d);
}

static void set(builder *B, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                cudnnBackendAttributeType_t type, int64_t n, const void *v)
{
    if (!d) return;
    CK(B, tx_cudnn()->BackendSetAttribute(d, name, type, n, v));
}

static void fin(builder *B, cudnnBackendDescriptor_t d)
{
    if (!d) return;
    CK(B, tx_cudnn()->BackendFinalize(d));
}

static cudnnBackendDescriptor_t tensor(builder *B, int64_t uid, cudnnDataType_t dt,
                                       const int64_t dims[4], const int64_t strides[4],
                                       bool is_virtual, bool by_value)
{
    cudnnBackendDescriptor_t t = make(B, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t align = 16;
    set(B, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    set(B, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    set(B, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    set(B, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(B, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    bool yes = true;
    if (is_virtual) set(B, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes);
    if (by_value) set(B, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes);
    fin(B, t);
    return t;
}

static cudnnBackendDescriptor_t virt(builder *B, cudnnDataType_t dt, const int64_t dims[4],
                                     const int64_t strides[4])
{
    return tensor(B, B->next_uid++, dt, dims, strides, true, false);
}

static void add_op(builder *B, cudnnBackendDescriptor_t op)
{
    if (failed(B) || !op) return;
    if (B->n_ops == (int)(sizeof B->ops / sizeof B->ops[0])) {
        B->err = CUDNN_STATUS_INTERNAL_ERROR;
        B->where = "too many operations in one graph";
        return;
    }
    B->ops[B->n_ops++] = op;
}

/* y = mode(x[, b][, t]); axis >= 0 only for GEN_INDEX. */
static void pw(builder *B, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
               cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
               cudnnBackendDescriptor_t y, int64_t axis)
{
    cudnnBackendDescriptor_t d = make(B, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(B, d, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    set(B, d, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (axis >= 0) set(B, d, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    fin(B, d);
    cudnnBackendDescriptor_t op = make(B, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    float one = 1.0f;
    set(B, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
    set(B, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (b) set(B, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    if (t) set(B, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
    set(B, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    set(B, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one);
    if (b) set(B, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
    fin(B, op);
    add_op(B, op);
}

/* c = a * b; the overrides (seq-len tensors) are NULL without padding. */
static void matmul(builder *B, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                   cudnnBackendDescriptor_t c, cudnnBackendDescriptor_t m_ovr,
                   cudnnBackendDescriptor_t n_ovr, cudnnBackendDescriptor_t k_ovr)
{
    cudnnBackendDescriptor_t d = make(B, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(B, d, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    fin(B, d);
    cudnnBackendDescriptor_t op = make(B, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set(B, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
    set(B, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    set(B, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    set(B, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
    if (m_ovr)
        set(B, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
            1, &m_ovr);
    if (n_ovr)
        set(B, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
            1, &n_ovr);
    if (k_ovr)
        set(B, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
            1, &k_ovr);
    fin(B, op);
    add_op(B, op);
}

static void reduce(builder *B, cudnnReduceTensorOp_t red, cudnnBackendDescriptor_t x,
                   cudnnBackendDescriptor_t y)
{
    cudnnBackendDescriptor_t d = make(B, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(B, d, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &red);
    set(B, d, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    fin(B, d);
    cudnnBackendDescriptor_t op = make(B, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set(B, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    set(B, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    set(B, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
    fin(B, op);
    add_op(B, op);
}

static void reshape(builder *B, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y)
{
    cudnnBackendDescriptor_t op = make(B, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set(B, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    set(B, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    fin(B, op);
    add_op(B, op);
}

/* ---- the SDPA graphs --------------------------------------------------- */

/* Strides of a logical [B, H, S, C] tensor stored bshd or sbhd. */
static void layout_strides(const plan_key *k, int64_t s, int64_t nh, int64_t c, int64_t st[4])
{
    if (k->sbhd) {
        st[0] = nh * c;
        st[1] = c;
        st[2] = k->b * nh * c;
    } else {
        st[0] = s * nh * c;
        st[1] = c;
        st[2] = nh * c;
    }
    st[3] = 1;
}

typedef struct sdpa_tensors {
    cudnnBackendDescriptor_t scale, neg_inf, seq_q, seq_kv;
    int64_t s_dims[4], s_str[4], row_dims[4], row_str[4];
    cudnnDataType_t io;
} sdpa_tensors;

/* Score masking: padding (rows >= seq_q or cols >= seq_kv) then causal,
 * bottom-right aligned: key j is kept when row + (s_kv - s_q) >= j (the
 * shift is a by-value INT32 scalar, present only when s_q != s_kv).
 * Returns the masked score tensor. */
static cudnnBackendDescriptor_t apply_masks(builder *B, const plan_key *k, const sdpa_tensors *T,
                                            cudnnBackendDescriptor_t s, bool padding)
{
    if (padding) {
        cudnnBackendDescriptor_t r = virt(B, CUDNN_DATA_INT32, T->s_dims, T->s_str);
        cudnnBackendDescriptor_t c = virt(B, CUDNN_DATA_INT32, T->s_dims, T->s_str);
        cudnnBackendDescriptor_t mq = virt(B, CUDNN_DATA_BOOLEAN, T->s_dims, T->s_str);
        cudnnBackendDescriptor_t mk = virt(B, CUDNN_DATA_BOOLEAN, T->s_dims, T->s_str);
        cudnnBackendDescriptor_t m = virt(B, CUDNN_DATA_BOOLEAN, T->s_dims, T->s_str);
        cudnnBackendDescriptor_t out = virt(B, CUDNN_DATA_FLOAT, T->s_dims, T->s_str);
        pw(B, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, NULL, NULL, r, 2);
        pw(B, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, NULL, NULL, c, 3);
        pw(B, CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, r, T->seq_q, NULL, mq, -1);
        pw(B, CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, c, T->seq_kv, NULL, mk, -1);
        pw(B, CUDNN_POINTWISE_LOGICAL_AND, CUDNN_DATA_BOOLEAN, mq, mk, NULL, m, -1);
        pw(B, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, T->neg_inf, m, out, -1);
        s = out;
    }
    if (k->causal) {
        cudnnBackendDescriptor_t r = virt(B, CUDNN_DATA_INT32, T->s_dims, T->s_str);
        cudnnBackendDescriptor_t c = virt(B, CUDNN_DATA_INT32, T->s_dims, T->s_str);
        cudnnBackendDescriptor_t m = virt(B, CUDNN_DATA_BOOLEAN, T->s_dims, T->s_str);
        cudnnBackendDescriptor_t out = virt(B, CUDNN_DATA_FLOAT, T->s_dims, T->s_str);
        pw(B, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, NULL, NULL, r, 2);
        pw(B, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, NULL, NULL, c, 3);
        if (k->sq != k->skv) {
            static const int64_t one4[4] = {1, 1, 1, 1};
            cudnnBackendDescriptor_t shift = tensor(B, UID_DIAG_SHIFT, CUDNN_DATA_INT32, one4,
                                                    one4, false, true);
            cudnnBackendDescriptor_t r2 = virt(B, CUDNN_DATA_INT32, T->s_dims, T->s_str);
            pw(B, CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, r, shift, NULL, r2, -1);
            r = r2;
        }
        pw(B, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, r, c, NULL, m, -1);
        pw(B, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, T->neg_inf, m, out, -1);
        s = out;
    }
    return s;
}

/* Tensors every graph shares: scalars, seq lengths, score/row shapes. */
static void common_tensors(builder *B, const plan_key *k, bool padding, sdpa_tensors *T)
{
    static const int64_t one4[4] = {1, 1, 1, 1};
    T->io = k->dtype == TEEXEC_DTYPE_BFLOAT16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    T->scale = tensor(B, UID_SCALE, CUDNN_DATA_FLOAT, one4, one4, false, true);
    T->neg_inf = tensor(B, UID_NEG_INF, CUDNN_DATA_FLOAT, one4, one4, false, true);
    T->seq_q = T->seq_kv = NULL;
    if (padding) {
        int64_t d[4] = {k->b, 1, 1, 1};
        T->seq_q = tensor(B, UID_SEQ_Q, CUDNN_DATA_INT32, d, one4, false, false);
        T->seq_kv = tensor(B, UID_SEQ_KV, CUDNN_DATA_INT32, d, one4, false, false);
    }
    int64_t sd[4] = {k->b, k->h, k->sq, k->skv};
    int64_t ss[4] = {k->h * k->sq * k->skv, k->sq * k->skv, k->skv, 1};
    int64_t rd[4] = {k->b, k->h, k->sq, 1};
    int64_t rs[4] = {k->h * k->sq, k->sq, 1, 1};
    memcpy(T->s_dims, sd, sizeof sd);
    memcpy(T->s_str, ss, sizeof ss);
    memcpy(T->row_dims, rd, sizeof rd);
    memcpy(T->row_str, rs, sizeof rs);
}

static void build_forward(builder *B, const plan_key *k, bool padding)
{
    sdpa_tensors T;
    common_tensors(B, k, padding, &T);
    int64_t qs[4], ks[4], vs[4], os[4];
    layout_strides(k, k->sq, k->h, k->d, qs);
    layout_strides(k, k->skv, k->hk, k->d, ks);
    layout_strides(k, k->skv, k->hk, k->dv, vs);
    layout_strides(k, k->sq, k->h, k->dv, os);
    int64_t qd[4] = {k->b, k->h, k->sq, k->d};
    int64_t ktd[4] = {k->b, k->hk, k->d, k->skv}, kts[4] = {ks[0], ks[1], ks[3], ks[2]};
    int64_t vd[4] = {k->b, k->hk, k->skv, k->dv};
    int64_t od[4] = {k->b, k->h, k->sq, k->dv};
    cudnnBackendDescriptor_t q = tensor(B, UID_Q, T.io, qd, qs, false, false);
    cudnnBackendDescriptor_t kt = tensor(B, UID_K, T.io, ktd, kts, false, false);
    cudnnBackendDescriptor_t v = tensor(B, UID_V, T.io, vd, vs, false, false);
    cudnnBackendDescriptor_t o = tensor(B, UID_O, T.io, od, os, false, false);
    cudnnBackendDescriptor_t stats = tensor(B, UID_STATS, CUDNN_DATA_FLOAT, T.row_dims, T.row_str,
                                            false, false);
    cudnnBackendDescriptor_t s1 = virt(B, CUDNN_DATA_FLOAT, T.s_dims, T.s_str);
    matmul(B, q, kt, s1, T.seq_q, T.seq_kv, NULL);
    cudnnBackendDescriptor_t s2 = virt(B, CUDNN_DATA_FLOAT, T.s_dims, T.s_str);
    pw(B, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s1, T.scale, NULL, s2, -1);
    cudnnBackendDescriptor_t s4 = apply_masks(B, k, &T, s2, padding);
    cudnnBackendDescriptor_t mx = virt(B, CUDNN_DATA_FLOAT, T.row_dims, T.row_str);
    reduce(B, CUDNN_REDUCE_TENSOR_MAX, s4, mx);
    cudnnBackendDescriptor_t z = virt(B, CUDNN_DATA_FLOAT, T.s_dims, T.s_str);
    pw(B, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, s4, mx, NULL, z, -1);
    cudnnBackendDescriptor_t e = virt(B, CUDNN_DATA_FLOAT, T.s_dims, T.s_str);
    pw(B, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, z, NULL, NULL, e, -1);
    cudnnBackendDescriptor_t l = virt(B, CUDNN_DATA_FLOAT, T.row_dims, T.row_str);
    reduce(B, CUDNN_REDUCE_TENSOR_ADD, e, l);
    cudnnBackendDescriptor_t logl = virt(B, CUDNN_DATA_FLOAT, T.row_dims, T.row_str);
    pw(B, CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, l, NULL, NULL, logl, -1);
    pw(B, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, mx, logl, NULL, stats, -1);
    /* the engine wants the second GEMM's A operand in the io type */
    cudnnBackendDescriptor_t p = virt(B, T.io, T.s_dims, T.s_str);
    pw(B, CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, l, NULL, p, -1);
    matmul(B, p, v, o, T.seq_q, NULL, T.seq_kv);
}

/* dX (real) from a per-query-head product: direct for MHA, else a virtual
 * [B,H,S,C] product summed over each group of h/h_kv heads. */
static cudnnBackendDescriptor_t grouped_target(builder *B, const plan_key *k,
                                               cudnnBackendDescriptor_t real, cudnnDataType_t io,
                                               int64_t s, int64_t c)
{
    if (k->h == k->hk) return real;
    int64_t fd[4] = {k->b, k->h, s, c}, fs[4] = {k->h * s * c, s * c, c, 1};
    return virt(B, io, fd, fs);
}

static void build_backward(builder *B, const plan_key *k, bool padding)
{
    static const int64_t one4[4] = {1, 1, 1, 1};
    sdpa_tensors T;
    common_tensors(B, k, padding, &T);
    int64_t qs[4], ks[4], vs[4], os[4];
    layout_strides(k, k->sq, k->h, k->d, qs);
    layout_strides(k, k->skv, k->hk, k->d, ks);
    layout_strides(k, k->skv, k->hk, k->dv, vs);
    layout_strides(k, k->sq, k->h, k->dv, os);
    int64_t qd[4] = {k->b, k->h, k->sq, k->d};
    int64_t kd[4] = {k->b, k->hk, k->skv, k->d};
    int64_t ktd[4] = {k->b, k->hk, k->d, k->skv}, kts[4] = {ks[0], ks[1], ks[3], ks[2]};
    int64_t vd[4] = {k->b, k->hk, k->skv, k->dv};
    int64_t vtd[4] = {k->b, k->hk, k->dv, k->skv}, vts[4] = {vs[0], vs[1], vs[3], vs[2]};
    int64_t od[4] = {k->b, k->h, k->sq, k->dv};
    cudnnBackendDescriptor_t q = tensor(B, UID_Q, T.io, qd, qs, false, false);
    cudnnBackendDescriptor_t kt = tensor(B, UID_K, T.io, ktd, kts, false, false);
    cudnnBackendDescriptor_t vt = tensor(B, UID_V, T.io, vtd, vts, false, false);
    cudnnBackendDescriptor_t o = tensor(B, UID_O, T.io, od, os, false, false);
    cudnnBackendDescriptor_t dO = tensor(B, UID_DO, T.io, od, os, false, false);
    cudnnBackendDescriptor_t stats = tensor(B, UID_STATS, CUDNN_DATA_FLOAT, T.row_dims, T.row_str,
                                            false, false);
    cudnnBackendDescriptor_t dq = tensor(B, UID_DQ, T.io, qd, qs, false, false);
    cudnnBackendDescriptor_t dk = tensor(B, UID_DK, T.io, kd, ks, false, false);
    cudnnBackendDescriptor_t dv = tensor(B, UID_DV, T.io, vd, vs, false, false);
    cudnnBackendDescriptor_t one = tensor(B, UID_ONE, CUDNN_DATA_FLOAT, one4, one4, false, true);
    cudnnBackendDescriptor_t sum = tensor(B, UID_SOFTMAX_SUM, CUDNN_DATA_FLOAT, T.row_dims,
                                          T.row_str, false, false);
    int64_t dqa_s[4] = {k->h * k->sq * k->d, k->sq * k->d, k->d, 1};
    cudnnBackendDescriptor_t dq_acc = tensor(B, UID_DQ_ACCUM, CUDNN_DATA_FLOAT, qd, dqa_s, false,
                                             false);

    /* D = rowsum(dO * O), through the softmax_sum buffer the engine reads */
    int64_t t1s[4] = {k->h * k->sq * k->dv, k->sq * k->dv, k->h * k->dv, 1};
    cudnnBackendDescriptor_t t1 = virt(B, CUDNN_DATA_FLOAT, od, t1s);
    pw(B, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dO, o, NULL, t1, -1);
    cudnnBackendDescriptor_t t2 = virt(B, CUDNN_DATA_FLOAT, T.row_dims, T.row_str);
    reduce(B, CUDNN_REDUCE_TENSOR_ADD, t1, t2);
    pw(B, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, t2, one, NULL, sum, -1);

    /* P recomputed from the saved stats */
    cudnnBackendDescriptor_t s1 = virt(B, CUDNN_DATA_FLOAT, T.s_dims, T.s_str);
    matmul(B, q, kt, s1, T.seq_q, T.seq_kv, NULL);
    cudnnBackendDescriptor_t s2 = virt(B, CUDNN_DATA_FLOAT, T.s_dims, T.s_str);
    pw(B, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s1, T.scale, NULL, s2, -1);
    plan_key nocausal = *k;
    nocausal.causal = 0;
    cudnnBackendDescriptor_t s3 = apply_masks(B, &nocausal, &T, s2, padding);
    cudnnBackendDescriptor_t s4 = virt(B, CUDNN_DATA_FLOAT, T.s_dims, T.s_str);
    pw(B, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, s3, stats, NULL, s4, -1);
    cudnnBackendDescriptor_t s5 = apply_masks(B, k, &T, s4, false);
    cudnnBackendDescriptor_t p = virt(B, CUDNN_DATA_FLOAT, T.s_dims, T.s_str);
    pw(B, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, s5, NULL, NULL, p, -1);

    /* dV = P^T dO */
    int64_t td[4] = {k->b, k->h, k->skv, k->sq}, ts[4] = {k->h * k->sq * k->skv, k->sq * k->skv, 1,
                                                          k->skv};
    cudnnBackendDescriptor_t pt = virt(B, T.io, td, ts);
    reshape(B, p, pt);
    cudnnBackendDescriptor_t dv_t = grouped_target(B, k, dv, T.io, k->skv, k->dv);
    matmul(B, pt, dO, dv_t, T.seq_kv, NULL, T.seq_q);
    if (dv_t != dv) reduce(B, CUDNN_REDUCE_TENSOR_ADD, dv_t, dv);

    /* dS = scale * P * (dO V^T - D) */
    cudnnBackendDescriptor_t dp = virt(B, CUDNN_DATA_FLOAT, T.s_dims, T.s_str);
    matmul(B, dO, vt, dp, T.seq_q, T.seq_kv, NULL);
    cudnnBackendDescriptor_t a1 = virt(B, CUDNN_DATA_FLOAT, T.s_dims, T.s_str);
    pw(B, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, dp, sum, NULL, a1, -1);
    cudnnBackendDescriptor_t a2 = virt(B, CUDNN_DATA_FLOAT, T.s_dims, T.s_str);
    pw(B, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, a1, p, NULL, a2, -1);
    cudnnBackendDescriptor_t ds = virt(B, CUDNN_DATA_FLOAT, T.s_dims, T.s_str);
    pw(B, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, a2, T.scale, NULL, ds, -1);

    /* dK = dS^T Q */
    cudnnBackendDescriptor_t dst = virt(B, T.io, td, ts);
    reshape(B, ds, dst);
    cudnnBackendDescriptor_t dk_t = grouped_target(B, k, dk, T.io, k->skv, k->d);
    matmul(B, dst, q, dk_t, T.seq_kv, NULL, T.seq_q);
    if (dk_t != dk) reduce(B, CUDNN_REDUCE_TENSOR_ADD, dk_t, dk);

    /* dQ = dS K, accumulated in FP32 then converted */
    cudnnBackendDescriptor_t kview = virt(B, CUDNN_DATA_FLOAT, kd, ks);
    reshape(B, kt, kview);
    matmul(B, ds, kview, dq_acc, T.seq_q, NULL, T.seq_kv);
    pw(B, CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, dq_acc, NULL, NULL, dq, -1);
}

/* ---- plans ------------------------------------------------------------- */

static void plan_free(sdpa_plan *p)
{
    if (!p) return;
    /* reverse creation order: users before what they reference */
    for (int i = p->n_descs - 1; i >= 0; i--) tx_cudnn()->BackendDestroyDescriptor(p->descs[i]);
    free(p->descs);
    if (p->auto_seq) cudaFree(p->auto_seq);
    free(p);
}

static teexec_status *cudnn_fail(const char *what, cudnnStatus_t st, const char *call)
{
    char msg[512] = {0};
    tx_cudnn()->GetLastErrorString(msg, sizeof msg);
    return tx_error(TEEXEC_ERR_UNSUPPORTED, "cuDNN SDPA %s: %s returned %s%s%s", what, call,
                    tx_cudnn()->GetErrorString(st), msg[0] ? ": " : "", msg);
}

static const char *dir_name(int dir) { return dir == TX_SDPA_FORWARD ? "forward" : "backward"; }

static teexec_status *plan_build(tx_sdpa_cudnn *s, const plan_key *k, sdpa_plan **out)
{
    *out = NULL;
    sdpa_plan *p = calloc(1, sizeof *p);
    if (!p) return tx_oom();
    p->key = *k;
    /* cuDNN <= 9.15.0 without a padding mask misbehaves for s_kv % 128 != 0
     * (NaNs, illegal accesses under graph replay); the frontend then adds a
     * full-length padding mask, and so do we. */
    p->auto_pad = !k->padding && k->skv % 128 != 0 && s->version <= 91500;
    bool padding = k->padding || p->auto_pad;
    p->uses_neg_inf = padding || k->causal;
    builder B = {.p = p, .handle = s->handle, .next_uid = UID_VIRTUAL};
    if (k->dir == TX_SDPA_FORWARD) build_forward(&B, k, padding);
    else build_backward(&B, k, padding);

    cudnnBackendDescriptor_t graph = make(&B, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(&B, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, B.n_ops, B.ops);
    set(&B, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &s->handle);
    fin(&B, graph);
    teexec_status *st = NULL;
    if (B.oom) {
        st = tx_oom();
        goto fail;
    }
    if (B.err) {
        st = cudnn_fail(dir_name(k->dir), B.err, B.where);
        goto fail;
    }
    /* heuristic A first, then the fallback list; the first config whose
     * plan finalizes wins (per-config failures are normal) */
    static const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
    for (int mi = 0; mi < 2 && !p->plan; mi++) {
        cudnnBackendDescriptor_t heur = make(&B, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
        set(&B, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &graph);
        set(&B, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[mi]);
        fin(&B, heur);
        int64_t n = 0;
        if (!failed(&B))
            CK(&B, tx_cudnn()->BackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL));
        if (failed(&B)) {
            last = B.err;
            B.err = CUDNN_STATUS_SUCCESS;
            continue;
        }
        if (n <= 0) continue;
        if (n > 64) n = 64;
        cudnnBackendDescriptor_t cfgs[64];
        for (int64_t i = 0; i < n; i++) cfgs[i] = make(&B, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        int64_t got = 0;
        if (!failed(&B))
            CK(&B, tx_cudnn()->BackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got, cfgs));
        if (B.oom) break;
        if (B.err) {
            last = B.err;
            B.err = CUDNN_STATUS_SUCCESS;
            continue;
        }
        for (int64_t i = 0; i < got && !p->plan; i++) {
            cudnnBackendDescriptor_t plan = NULL;
            cudnnStatus_t cs = tx_cudnn()->BackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                                            &plan);
            if (cs != CUDNN_STATUS_SUCCESS) {
                last = cs;
                continue;
            }
            cs = tx_cudnn()->BackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE,
                                          1, &s->handle);
            if (cs == CUDNN_STATUS_SUCCESS)
                cs = tx_cudnn()->BackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
            if (cs == CUDNN_STATUS_SUCCESS) cs = tx_cudnn()->BackendFinalize(plan);
            if (cs != CUDNN_STATUS_SUCCESS) {
                last = cs;
                tx_cudnn()->BackendDestroyDescriptor(plan);
                continue;
            }
            if (!keep(&B, plan)) break;
            p->plan = plan;
        }
    }
    if (B.oom) {
        st = tx_oom();
        goto fail;
    }
    if (!p->plan) {
        st = cudnn_fail(dir_name(k->dir), last,
                        "no engine configuration (heuristics A and FALLBACK) for this graph");
        goto fail;
    }
    int64_t ws = 0, cnt = 0;
    cudnnStatus_t cs = tx_cudnn()->BackendGetAttribute(p->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                CUDNN_TYPE_INT64, 1, &cnt, &ws);
    if (cs != CUDNN_STATUS_SUCCESS || ws < 0) {
        st = cudnn_fail(dir_name(k->dir), cs, "reading the plan's workspace size");
        goto fail;
    }
    p->engine_ws = (size_t)ws;
    /* sizes come from dims already bounded by tx_sdpa_cudnn_check */
    size_t rows = (size_t)k->b * (size_t)k->h * (size_t)k->sq * sizeof(float);
    size_t off = 0;
    if (k->dir == TX_SDPA_FORWARD) {
        p->off_stats = off; /* scratch stats when the caller wants no LSE */
        off += ALIGN_UP(rows);
    } else {
        p->off_sum = off;
        off += ALIGN_UP(rows);
        p->off_dqacc = off;
        off += ALIGN_UP(rows * (size_t)k->d);
    }
    p->off_engine = off;
    p->total_ws = off + ALIGN_UP(p->engine_ws);
    if (p->auto_pad) {
        size_t nb = (size_t)k->b, kv = (nb + 3) / 4 * 4;
        p->auto_seq_kv = kv;
        int32_t *host = calloc(2 * kv, sizeof *host);
        if (!host) {
            st = tx_oom();
            goto fail;
        }
        for (size_t i = 0; i < nb; i++) {
            host[i] = (int32_t)k->sq;
            host[kv + i] = (int32_t)k->skv;
        }
        cudaError_t ce = cudaMalloc((void **)&p->auto_seq, 2 * kv * sizeof(int32_t));
        if (ce == cudaSuccess)
            ce = cudaMemcpy(p->auto_seq, host, 2 * kv * sizeof(int32_t), cudaMemcpyHostToDevice);
        /* the pageable copy may still be in flight when cudaMemcpy returns,
         * and the attention runs on a stream that does not wait for it */
        if (ce == cudaSuccess) ce = cudaStreamSynchronize(cudaStreamLegacy);
        free(host);
        if (ce != cudaSuccess) {
            st = tx_error(TEEXEC_ERR_DEVICE, "cuDNN SDPA: sequence-length buffer: %s",
                          cudaGetErrorString(ce));
            goto fail;
        }
    }
    *out = p;
    return NULL;
fail:
    plan_free(p);
    return st;
}

/* ---- public ------------------------------------------------------------ */

teexec_status *tx_sdpa_cudnn_create(tx_sdpa_cudnn **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_sdpa_cudnn_create: out is NULL");
    *out = NULL;
    const tx_cudnn_api *api = NULL;
    TX_TRY(tx_cudnn_load(&api));
    size_t ver = api->GetVersion();
    if (ver < 90000)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "cuDNN SDPA: the loaded cuDNN is %zu, the graph API needs 9.0 or newer",
                        ver);
    tx_sdpa_cudnn *s = calloc(1, sizeof *s);
    if (!s) return tx_oom();
    s->version = ver;
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        free(s);
        return tx_error(TEEXEC_ERR_DEVICE, "cuDNN SDPA: no usable CUDA device");
    }
    s->sm = major * 10 + minor;
    cudnnStatus_t cs = tx_cudnn()->Create(&s->handle);
    if (cs != CUDNN_STATUS_SUCCESS) {
        free(s);
        return tx_error(TEEXEC_ERR_DEVICE, "cuDNN SDPA: cudnnCreate failed: %s",
                        tx_cudnn()->GetErrorString(cs));
    }
    *out = s;
    return NULL;
}

void tx_sdpa_cudnn_destroy(tx_sdpa_cudnn *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_plans; i++) plan_free(s->plans[i]);
    free(s->plans);
    if (s->handle) tx_cudnn()->Destroy(s->handle);
    free(s);
}

size_t tx_sdpa_cudnn_version(const tx_sdpa_cudnn *s) { return s ? s->version : 0; }

int tx_sdpa_cudnn_plan_count(const tx_sdpa_cudnn *s) { return s ? s->n_plans : 0; }

teexec_status *tx_sdpa_cudnn_check(const tx_sdpa_cudnn *s, const tx_attn_desc *a, int direction)
{
    if (!s || !a || (direction != TX_SDPA_FORWARD && direction != TX_SDPA_BACKWARD))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "cuDNN SDPA: bad arguments");
    const char *dn = dir_name(direction);
    if (a->b < 1 || a->h < 1 || a->h_kv < 1 || a->s_q < 1 || a->s_kv < 1 || a->d < 1 || a->d_v < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "cuDNN SDPA %s: every dimension must be >= 1",
                        dn);
    if (a->h % a->h_kv != 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "cuDNN SDPA %s: %lld query heads are not a multiple of %lld kv heads", dn,
                        (long long)a->h, (long long)a->h_kv);
    if (a->dtype != TEEXEC_DTYPE_BFLOAT16 && a->dtype != TEEXEC_DTYPE_FLOAT16)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "cuDNN SDPA %s: dtype %s; cuDNN's fused attention takes only bfloat16 and "
                        "float16", dn, teexec_dtype_name(a->dtype));
    if (s->sm < 80)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "cuDNN SDPA %s: compute capability %d.%d; fused attention needs 8.0+", dn,
                        s->sm / 10, s->sm % 10);
    if (s->version >= 91000 && s->version < 91002)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "cuDNN SDPA %s: cuDNN %zu has known-wrong fp16/bf16 attention (9.10.0 and "
                        "9.10.1)", dn, s->version);
    if (a->d % 8 != 0 || a->d_v % 8 != 0 || a->d > 256 || a->d_v > 256)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "cuDNN SDPA %s: head dims %lld/%lld; cuDNN needs multiples of 8 up to 256",
                        dn, (long long)a->d, (long long)a->d_v);
    if (direction == TX_SDPA_BACKWARD && a->d != a->d_v && (a->d > 128 || a->d_v > 128) &&
        s->version >= 91100 && s->version < 91300 && !(a->d == 192 && a->d_v == 128))
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "cuDNN SDPA backward: cuDNN %zu is wrong on Hopper for head dims %lld/%lld "
                        "(unequal, over 128; fixed in 9.13)", s->version, (long long)a->d,
                        (long long)a->d_v);
    if (direction == TX_SDPA_BACKWARD && a->s_q == 1 && a->s_kv == 1)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "cuDNN SDPA backward: s_q = s_kv = 1 is rejected by cuDNN");
    if (a->mask_kind == TX_ATTN_MASK_BOOL || a->mask_kind == TX_ATTN_MASK_FLOAT)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "cuDNN SDPA %s: an explicit %s mask; the cuDNN path takes only causal and "
                        "padding (sequence-length) masks", dn,
                        a->mask_kind == TX_ATTN_MASK_BOOL ? "bool" : "float");
    if (a->mask_kind != TX_ATTN_MASK_NONE && a->mask_kind != TX_ATTN_MASK_PADDING)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "cuDNN SDPA %s: unknown mask kind %d", dn,
                        a->mask_kind);
    if (a->causal && a->s_q > a->s_kv)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "cuDNN SDPA %s: causal with s_q %lld > s_kv %lld leaves whole rows "
                        "masked, which cuDNN's bottom-right causal mask does not allow", dn,
                        (long long)a->s_q, (long long)a->s_kv);
    if (a->causal && a->s_q != a->s_kv && a->mask_kind == TX_ATTN_MASK_PADDING)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "cuDNN SDPA %s: causal with s_q != s_kv and a padding mask needs a "
                        "per-batch diagonal shift, which this graph does not build", dn);
    /* keep every workspace size and cuDNN int32 index far from overflow */
    if (a->b > 65535 || a->h > 65535 || a->s_q > (1 << 20) || a->s_kv > (1 << 20) ||
        (double)a->b * (double)a->h * (double)a->s_q * (double)a->d > 1e12)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "cuDNN SDPA %s: shape too large", dn);
    return NULL;
}

static bool key_eq(const plan_key *x, const plan_key *y)
{
    return x->dir == y->dir && x->b == y->b && x->h == y->h && x->hk == y->hk && x->sq == y->sq &&
           x->skv == y->skv && x->d == y->d && x->dv == y->dv && x->dtype == y->dtype &&
           x->sbhd == y->sbhd && x->causal == y->causal && x->padding == y->padding;
}

static teexec_status *find_plan(tx_sdpa_cudnn *s, const tx_attn_desc *a, int dir, sdpa_plan **out)
{
    TX_TRY(tx_sdpa_cudnn_check(s, a, dir));
    plan_key k = {.dir = dir, .b = a->b, .h = a->h, .hk = a->h_kv, .sq = a->s_q, .skv = a->s_kv,
                  .d = a->d, .dv = a->d_v, .dtype = a->dtype, .sbhd = a->sbhd != 0,
                  .causal = a->causal != 0, .padding = a->mask_kind == TX_ATTN_MASK_PADDING};
    for (int i = 0; i < s->n_plans; i++)
        if (key_eq(&s->plans[i]->key, &k)) {
            *out = s->plans[i];
            return NULL;
        }
    if (s->n_plans == s->cap_plans) {
        int nc = s->cap_plans ? s->cap_plans * 2 : 8;
        sdpa_plan **np = realloc(s->plans, (size_t)nc * sizeof *np);
        if (!np) return tx_oom();
        s->plans = np;
        s->cap_plans = nc;
    }
    sdpa_plan *p = NULL;
    TX_TRY(plan_build(s, &k, &p));
    s->plans[s->n_plans++] = p;
    *out = p;
    return NULL;
}

teexec_status *tx_sdpa_cudnn_prepare(tx_sdpa_cudnn *s, const tx_attn_desc *a, int direction,
                                     size_t *workspace_bytes)
{
    if (workspace_bytes) *workspace_bytes = 0;
    sdpa_plan *p = NULL;
    TX_TRY(find_plan(s, a, direction, &p));
    if (workspace_bytes) *workspace_bytes = p->total_ws;
    return NULL;
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Runs plan p with the (uid, pointer) pairs. */
static teexec_status *execute(tx_sdpa_cudnn *s, sdpa_plan *p, const int64_t *uids, void **ptrs,
                              int n, void *workspace, size_t workspace_bytes, void *stream)
{
    const char *dn = dir_name(p->key.dir);
    if (workspace_bytes < p->total_ws || (p->total_ws && !workspace) || !aligned16(workspace))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "cuDNN SDPA %s: workspace of %zu bytes given, %zu needed (16-byte aligned)",
                        dn, workspace_bytes, p->total_ws);
    for (int i = 0; i < n; i++)
        if (!ptrs[i] || !aligned16(ptrs[i]))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "cuDNN SDPA %s: tensor %lld is NULL or not 16-byte aligned", dn,
                            (long long)uids[i]);
    cudnnStatus_t cs = tx_cudnn()->SetStream(s->handle, (cudaStream_t)stream);
    if (cs != CUDNN_STATUS_SUCCESS) return cudnn_fail(dn, cs, "cudnnSetStream");
    cudnnBackendDescriptor_t vp = NULL;
    cs = tx_cudnn()->BackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (cs != CUDNN_STATUS_SUCCESS) return cudnn_fail(dn, cs, "creating the variant pack");
    void *eng = p->engine_ws ? (char *)workspace + p->off_engine : NULL;
    cs = tx_cudnn()->BackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    if (cs == CUDNN_STATUS_SUCCESS)
        cs = tx_cudnn()->BackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                      CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (cs == CUDNN_STATUS_SUCCESS)
        cs = tx_cudnn()->BackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                      &eng);
    if (cs == CUDNN_STATUS_SUCCESS) cs = tx_cudnn()->BackendFinalize(vp);
    if (cs == CUDNN_STATUS_SUCCESS) cs = tx_cudnn()->BackendExecute(s->handle, p->plan, vp);
    tx_cudnn()->BackendDestroyDescriptor(vp);
    if (cs != CUDNN_STATUS_SUCCESS) {
        char msg[512] = {0};
        tx_cudnn()->GetLastErrorString(msg, sizeof msg);
        return tx_error(TEEXEC_ERR_DEVICE, "cuDNN SDPA %s: execute failed: %s%s%s", dn,
                        tx_cudnn()->GetErrorString(cs), msg[0] ? ": " : "", msg);
    }
    return NULL;
}

/* Appends the seq-len tensors (the caller's, or the plan's full lengths). */
static int add_seq(const sdpa_plan *p, const int32_t *sq, const int32_t *skv, int64_t *uids,
                   void **ptrs, int n)
{
    if (p->key.padding) {
        uids[n] = UID_SEQ_Q;
        ptrs[n++] = (void *)sq;
        uids[n] = UID_SEQ_KV;
        ptrs[n++] = (void *)skv;
    } else if (p->auto_pad) {
        uids[n] = UID_SEQ_Q;
        ptrs[n++] = p->auto_seq;
        uids[n] = UID_SEQ_KV;
        ptrs[n++] = p->auto_seq + p->auto_seq_kv;
    }
    return n;
}

teexec_status *tx_sdpa_cudnn_forward(tx_sdpa_cudnn *s, const tx_attn_desc *a,
                                     const tx_attn_fwd_io *io, void *workspace,
                                     size_t workspace_bytes, void *stream)
{
    if (!io) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "cuDNN SDPA forward: io is NULL");
    sdpa_plan *p = NULL;
    TX_TRY(find_plan(s, a, TX_SDPA_FORWARD, &p));
    /* by-value scalars are host pointers; kept 16-byte aligned like the rest */
    float __attribute__((aligned(16))) scale[4] = {tx_attn_scale(a)};
    float __attribute__((aligned(16))) ninf[4] = {s->version >= 91000 ? -INFINITY : -FLT_MAX};
    void *stats = io->lse ? (void *)io->lse : (workspace ? (char *)workspace + p->off_stats : NULL);
    int64_t uids[12] = {UID_Q, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_NEG_INF};
    void *ptrs[12] = {(void *)io->q, (void *)io->k, (void *)io->v, io->o, stats, scale, ninf};
    int n = add_seq(p, io->seq_q, io->seq_kv, uids, ptrs, p->uses_neg_inf ? 7 : 6);
    int32_t __attribute__((aligned(16))) shift[4] = {(int32_t)(a->s_kv - a->s_q)};
    if (p->key.causal && p->key.sq != p->key.skv) {
        uids[n] = UID_DIAG_SHIFT;
        ptrs[n++] = shift;
    }
    return execute(s, p, uids, ptrs, n, workspace, workspace_bytes, stream);
}

teexec_status *tx_sdpa_cudnn_backward(tx_sdpa_cudnn *s, const tx_attn_desc *a,
                                      const tx_attn_bwd_io *io, void *workspace,
                                      size_t workspace_bytes, void *stream)
{
    if (!io) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "cuDNN SDPA backward: io is NULL");
    sdpa_plan *p = NULL;
    TX_TRY(find_plan(s, a, TX_SDPA_BACKWARD, &p));
    if (!workspace)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "cuDNN SDPA backward: workspace is NULL");
    float __attribute__((aligned(16))) scale[4] = {tx_attn_scale(a)};
    float __attribute__((aligned(16))) ninf[4] = {s->version >= 91000 ? -INFINITY : -FLT_MAX};
    float __attribute__((aligned(16))) one[4] = {1.0f};
    int64_t uids[20] = {UID_Q, UID_K, UID_V, UID_O, UID_DO, UID_STATS, UID_DQ, UID_DK, UID_DV,
                        UID_SOFTMAX_SUM, UID_DQ_ACCUM, UID_SCALE, UID_ONE, UID_NEG_INF};
    void *ptrs[20] = {(void *)io->q, (void *)io->k, (void *)io->v, (void *)io->o,
                      (void *)io->d_o, (void *)io->lse, io->dq, io->dk, io->dv,
                      (char *)workspace + p->off_sum, (char *)workspace + p->off_dqacc,
                      scale, one, ninf};
    int n = add_seq(p, io->seq_q, io->seq_kv, uids, ptrs, p->uses_neg_inf ? 14 : 13);
    int32_t __attribute__((aligned(16))) shift[4] = {(int32_t)(a->s_kv - a->s_q)};
    if (p->key.causal && p->key.sq != p->key.skv) {
        uids[n] = UID_DIAG_SHIFT;
        ptrs[n++] = shift;
    }
    return execute(s, p, uids, ptrs, n, workspace, workspace_bytes, stream);
}
