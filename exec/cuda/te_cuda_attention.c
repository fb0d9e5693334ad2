/*
 * te_cuda_attention.c - te.ops DotProductAttention on the GPU under the
 * te_cuda.h contract: cuDNN's fused attention where it takes the node,
 * the plain CUDA kernels otherwise (te_cuda_attention.h says how the
 * choice is made).
 *
 * The op's tensors are already in the kernels' layouts (attention_desc.h
 * was written for te.ops: q/k/v bshd or sbhd, y the bshd/sbhd view of
 * [.., h, d_v], softmax_lse FP32 [b, h, s_q]), so no transposes are needed
 * and the aux is exactly what the CPU backward reads. The node keeps no
 * state between forward and backward.
 *
 * Scratch (shared between nodes, 256-byte aligned pieces): the larger of
 * the cuDNN workspaces and the fallback's backward workspace, then, when
 * the node computes grads, spare dq / dk / dv buffers, because both
 * backward kernels write all three while the contract lets the executor
 * leave unwanted grads out.
 */
#include "exec/cuda/te_cuda.h"
#include "exec/cuda/te_cuda_attention.h"

#include "base/checked.h"
#include "kernels/cuda/attention_fallback.h"
#include "kernels/cuda/sdpa_cudnn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 256u

typedef struct attn_node {
    char name[96];
    tx_attn_desc a;
    bool training;         /* a backward may follow: the forward must write softmax_lse */
    bool fwd_cudnn, bwd_cudnn;
    bool has_mask;
    bool cache;            /* the cache mode: k/v appended to k_cache/v_cache first */
    int64_t kcd[4], vcd[4]; /* cache mode: the caches' dims */
    teexec_dtype mask_dtype;
    /* shapes the calls are checked against */
    int64_t qd[4], kd[4], vd[4], yd[3], md[4];
    size_t ws_bytes;                   /* workspace at scratch offset 0 */
    bool grads;                        /* prepared for a backward */
    size_t off_dq, off_dk, off_dv;     /* spare grads in scratch (when grads) */
    char choice[640];
} attn_node;

static const char OPNAME[] = "DotProductAttention";

static teexec_status *node_err(const char *name, teexec_code code, const char *why)
{
    return tx_error(code, "op %s (%s): %s", name && *name ? name : "?", OPNAME, why);
}

static bool round_up(size_t x, size_t *out)
{
    return tx_add_size(x, ALIGN - 1, out) && ((*out &= ~(size_t)(ALIGN - 1)), true);
}

/* Appends a piece of `bytes` to a scratch layout of *end bytes. */
static bool carve(size_t *end, size_t bytes, size_t *off)
{
    size_t start, len;
    if (!round_up(*end, &start) || !round_up(bytes, &len)) return false;
    *off = start;
    return tx_add_size(start, len, end);
}

static size_t tensor_bytes(const int64_t *dims, int rank, teexec_dtype dt)
{
    uint64_t n = 0, b = 0;
    if (!tx_dims_product(dims, (size_t)rank, &n) || !tx_mul_u64(n, tx_dtype_elem_size(dt), &b) ||
        b > SIZE_MAX)
        return 0;
    return (size_t)b;
}

static bool dims_are(const tx_tensor *t, teexec_dtype dt, int rank, const int64_t *dims)
{
    if (!t || !t->data || t->dtype != dt || t->rank != rank) return false;
    for (int i = 0; i < rank; i++)
        if (t->dims[i] != dims[i]) return false;
    return true;
}

/* Fills the kernel description from the op's tensors and attributes. */
static teexec_status *describe(const tx_cuda_te_desc *d, attn_node *n)
{
    const char *nm = n->name;
    if (d->n_extra_inputs < 2 || !d->extra_inputs || !d->extra_inputs[0] || !d->extra_inputs[1] ||
        !d->input || !d->output || !d->attrs)
        return node_err(nm, TEEXEC_ERR_INVALID_ARGUMENT, "q, k, v, y or the attributes are missing");
    const tx_tensor *q = d->input, *k = d->extra_inputs[0], *v = d->extra_inputs[1];
    const tx_tensor *m = d->n_extra_inputs > 2 ? d->extra_inputs[2] : NULL;
    const tx_tensor *const *x = d->extra_inputs;
    int nx = d->n_extra_inputs;
    n->cache = tx_te_dpa_cache_mode(x, nx);
    if (n->cache) {
        if (d->training)
            return node_err(nm, TEEXEC_ERR_UNSUPPORTED, "the cache mode is inference only");
        teexec_status *cst =
            tx_te_dpa_cache_check_tensors(q, x, nx, d->attrs[TX_TE_A_DPA_LAYOUT].i);
        if (cst) return tx_status_prefix(cst, "op %s", nm);
        memcpy(n->kcd, x[TX_TE_DPA_IN_K_CACHE]->dims, sizeof n->kcd);
        memcpy(n->vcd, x[TX_TE_DPA_IN_V_CACHE]->dims, sizeof n->vcd);
        m = NULL;
    }
    if (q->rank != 4 || k->rank != 4 || v->rank != 4)
        return node_err(nm, TEEXEC_ERR_INVALID_ARGUMENT, "q, k and v must have rank 4");
    if (k->dtype != q->dtype || v->dtype != q->dtype || d->output->dtype != q->dtype)
        return node_err(nm, TEEXEC_ERR_UNSUPPORTED,
                        "q, k, v and y must share one dtype on the GPU (the kernels read one "
                        "element type)");
    bool sbhd = d->attrs[TX_TE_A_DPA_LAYOUT].i == TX_TE_LAYOUT_SBHD;
    int bd = sbhd ? 1 : 0, sd = sbhd ? 0 : 1;
    tx_attn_desc *a = &n->a;
    memset(a, 0, sizeof *a);
    a->b = q->dims[bd];
    a->s_q = q->dims[sd];
    a->h = q->dims[2];
    a->d = q->dims[3];
    a->s_kv = n->cache ? n->kcd[1] : k->dims[sd];
    a->h_kv = k->dims[2];
    a->kv_cache = n->cache;
    a->d_v = v->dims[3];
    a->dtype = q->dtype;
    a->sbhd = sbhd;
    a->causal = d->attrs[TX_TE_A_DPA_CAUSAL].i != 0;
    a->scale = (float)d->attrs[TX_TE_A_DPA_SCALE].f;
    bool ok = k->dims[bd] == a->b && v->dims[bd] == a->b &&
              (n->cache || v->dims[sd] == a->s_kv) &&
              v->dims[2] == a->h_kv && k->dims[3] == a->d && a->h_kv >= 1 && a->h % a->h_kv == 0;
    int64_t hdv = 0;
    ok = ok && !__builtin_mul_overflow(a->h, a->d_v, &hdv);
    int64_t yd[3] = {q->dims[0], q->dims[1], hdv};
    ok = ok && d->output->rank == 3 && d->output->dims[0] == yd[0] &&
         d->output->dims[1] == yd[1] && d->output->dims[2] == yd[2];
    if (!ok)
        return node_err(nm, TEEXEC_ERR_INVALID_ARGUMENT,
                        "q, k, v, y shapes do not fit (batch, kv seq, kv heads, head dim; q heads "
                        "a multiple of kv heads; y = [.., h*d_v])");
    memcpy(n->qd, q->dims, sizeof n->qd);
    memcpy(n->kd, k->dims, sizeof n->kd);
    memcpy(n->vd, v->dims, sizeof n->vd);
    memcpy(n->yd, yd, sizeof n->yd);
    a->mask_kind = TX_ATTN_MASK_NONE;
    a->mask_b = a->mask_h = 1;
    if (m) {
        if (m->rank != 4 || (m->dims[0] != 1 && m->dims[0] != a->b) ||
            (m->dims[1] != 1 && m->dims[1] != a->h) || m->dims[2] != a->s_q ||
            m->dims[3] != a->s_kv)
            return node_err(nm, TEEXEC_ERR_INVALID_ARGUMENT, "mask must be [b|1, h|1, s_q, s_kv]");
        n->has_mask = true;
        n->mask_dtype = m->dtype;
        memcpy(n->md, m->dims, sizeof n->md);
        a->mask_b = m->dims[0];
        a->mask_h = m->dims[1];
        if (m->dtype == TEEXEC_DTYPE_BOOL) {
            a->mask_kind = TX_ATTN_MASK_BOOL;
        } else {
            a->mask_kind = TX_ATTN_MASK_FLOAT;
            a->mask_dtype = m->dtype;
        }
    }
    return NULL;
}

/* Tries cuDNN for one direction: NULL with *ws set when it takes the node;
 * else the reason in `why` (UNSUPPORTED refusals), or a hard error. */
static teexec_status *try_cudnn(tx_sdpa_cudnn *s, const tx_attn_desc *a, int dir, size_t *ws,
                                bool *taken, char *why, size_t why_len)
{
    *taken = false;
    *ws = 0;
    if (!s) {
        snprintf(why, why_len, "no cuDNN handle (cuDNN 9 not loadable here)");
        return NULL;
    }
    teexec_status *st = tx_sdpa_cudnn_check(s, a, dir);
    if (!st) st = tx_sdpa_cudnn_prepare(s, a, dir, ws);
    if (!st) {
        *taken = true;
        return NULL;
    }
    teexec_code c = teexec_status_code(st);
    if (c != TEEXEC_ERR_UNSUPPORTED && c != TEEXEC_ERR_INVALID_ARGUMENT) return st;
    snprintf(why, why_len, "%s", teexec_status_message(st));
    teexec_status_destroy(st);
    return NULL;
}

static teexec_status *attn_prepare(const tx_cuda_te_desc *d, void **priv, size_t *state_bytes,
                                   size_t *scratch_bytes)
{
    *priv = NULL;
    *state_bytes = 0;
    *scratch_bytes = 0;
    attn_node *n = calloc(1, sizeof *n);
    if (!n) return tx_oom();
    snprintf(n->name, sizeof n->name, "%s", d->name ? d->name : "?");
    n->training = d->training;
    bool wants_grads = d->training && (d->needs & (TX_TE_FOR_DX | TX_TE_FOR_DEXTRA)) != 0;
    teexec_status *st = describe(d, n);
    if (st) goto fail;

    /* The fallback is the floor: a node it cannot run is not runnable. */
    st = tx_attn_fallback_check(&n->a);
    if (st) {
        st = tx_status_prefix(st, "op %s (%s): no GPU kernel", n->name, OPNAME);
        goto fail;
    }
    char fwhy[320] = "", bwhy[320] = "";
    size_t ws_f = 0, ws_b = 0;
    if (n->cache)
        snprintf(fwhy, sizeof fwhy, "the cache mode (per-row cache lengths read on the device)");
    else
        st = try_cudnn(d->sdpa, &n->a, TX_SDPA_FORWARD, &ws_f, &n->fwd_cudnn, fwhy, sizeof fwhy);
    if (st) goto fail;
    if (wants_grads) {
        if (d->deterministic) {
            snprintf(bwhy, sizeof bwhy,
                     "deterministic mode: cuDNN's backward accumulates dQ with float atomics, "
                     "not bitwise reproducible");
        } else {
            st = try_cudnn(d->sdpa, &n->a, TX_SDPA_BACKWARD, &ws_b, &n->bwd_cudnn, bwhy,
                           sizeof bwhy);
            if (st) goto fail;
        }
        if (!n->bwd_cudnn) {
            size_t fb = tx_attn_fallback_bwd_workspace(&n->a);
            if (fb > ws_b) ws_b = fb;
        }
    }
    n->ws_bytes = ws_f > ws_b ? ws_f : ws_b;
    size_t end = n->ws_bytes;
    n->grads = wants_grads;
    if (wants_grads) {
        size_t bq = tensor_bytes(n->qd, 4, n->a.dtype), bk = tensor_bytes(n->kd, 4, n->a.dtype),
               bv = tensor_bytes(n->vd, 4, n->a.dtype);
        if (!bq || !bk || !bv || !carve(&end, bq, &n->off_dq) || !carve(&end, bk, &n->off_dk) ||
            !carve(&end, bv, &n->off_dv))
            goto overflow;
    }

    const char *ver = "";
    char vbuf[32] = "";
    if (d->sdpa) {
        snprintf(vbuf, sizeof vbuf, " %zu", tx_sdpa_cudnn_version(d->sdpa));
        ver = vbuf;
    }
    if (!wants_grads) {
        snprintf(n->choice, sizeof n->choice, "forward: %s%s%s%s (no backward)",
                 n->fwd_cudnn ? "cuDNN fused attention" : "CUDA fallback",
                 n->fwd_cudnn ? ver : "", n->fwd_cudnn ? "" : ": ", n->fwd_cudnn ? "" : fwhy);
    } else if (n->fwd_cudnn && n->bwd_cudnn) {
        snprintf(n->choice, sizeof n->choice, "forward and backward: cuDNN fused attention%s", ver);
    } else if (!n->fwd_cudnn && !n->bwd_cudnn && !d->deterministic) {
        snprintf(n->choice, sizeof n->choice, "forward and backward: CUDA fallback: %s", fwhy);
    } else {
        snprintf(n->choice, sizeof n->choice, "forward: %s%s%s; backward: %s%s%s",
                 n->fwd_cudnn ? "cuDNN fused attention" : "CUDA fallback: ",
                 n->fwd_cudnn ? ver : "", n->fwd_cudnn ? "" : fwhy,
                 n->bwd_cudnn ? "cuDNN fused attention" : "CUDA fallback: ",
                 n->bwd_cudnn ? ver : "", n->bwd_cudnn ? "" : bwhy);
    }
    *scratch_bytes = end;
    *priv = n;
    return NULL;
overflow:
    st = node_err(n->name, TEEXEC_ERR_UNSUPPORTED, "scratch size overflows");
fail:
    free(n);
    return st;
}

static teexec_status *bad_tensor(const attn_node *n, const char *what)
{
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                    "op %s (%s): %s is missing or has another dtype/shape than the node was "
                    "prepared for", n->name, OPNAME, what);
}

static teexec_status *check_mask(const attn_node *n, const tx_tensor *m)
{
    if (!n->has_mask) return m ? bad_tensor(n, "mask (prepared without one)") : NULL;
    return dims_are(m, n->mask_dtype, 4, n->md) ? NULL : bad_tensor(n, "mask");
}

static void lse_dims(const attn_node *n, int64_t out[3])
{
    out[0] = n->a.b;
    out[1] = n->a.h;
    out[2] = n->a.s_q;
}

static teexec_status *attn_forward(void *priv, const tx_te_fwd_args *fa, void *state,
                                   void *scratch, const tx_cuda_env *env)
{
    (void)state;
    attn_node *n = priv;
    if (!n || !fa || !env) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "DotProductAttention: NULL argument");
    if (!dims_are(fa->input, n->a.dtype, 4, n->qd)) return bad_tensor(n, "q");
    if (fa->n_extra_inputs < 2 || !dims_are(fa->extra_inputs[0], n->a.dtype, 4, n->kd))
        return bad_tensor(n, "k");
    if (!dims_are(fa->extra_inputs[1], n->a.dtype, 4, n->vd)) return bad_tensor(n, "v");
    const tx_tensor *m = fa->n_extra_inputs > 2 ? fa->extra_inputs[2] : NULL;
    const tx_tensor *kc = NULL, *vc = NULL, *cl = NULL;
    if (n->cache) {
        kc = fa->n_extra_inputs > TX_TE_DPA_IN_K_CACHE ? fa->extra_inputs[TX_TE_DPA_IN_K_CACHE] : NULL;
        vc = fa->n_extra_inputs > TX_TE_DPA_IN_V_CACHE ? fa->extra_inputs[TX_TE_DPA_IN_V_CACHE] : NULL;
        cl = fa->n_extra_inputs > TX_TE_DPA_IN_CACHE_LEN ? fa->extra_inputs[TX_TE_DPA_IN_CACHE_LEN]
                                                         : NULL;
        int64_t cld[1] = {n->a.b};
        if (!dims_are(kc, n->a.dtype, 4, n->kcd)) return bad_tensor(n, "k_cache");
        if (!dims_are(vc, n->a.dtype, 4, n->vcd)) return bad_tensor(n, "v_cache");
        if (!dims_are(cl, TEEXEC_DTYPE_INT64, 1, cld)) return bad_tensor(n, "cache_len");
        if (m) return bad_tensor(n, "mask (the cache mode takes none)");
    } else {
        TX_TRY(check_mask(n, m));
    }
    if (!dims_are(fa->output, n->a.dtype, 3, n->yd)) return bad_tensor(n, "y");
    tx_tensor *lse = fa->training && fa->aux && fa->n_aux > 0 ? fa->aux[0] : NULL;
    int64_t ld[3];
    lse_dims(n, ld);
    if (lse && !dims_are(lse, TEEXEC_DTYPE_FLOAT, 3, ld)) return bad_tensor(n, "softmax_lse");
    if (fa->training && !lse)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "op %s (%s): training forward without the softmax_lse aux", n->name,
                        OPNAME);
    if (n->ws_bytes && !scratch)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "op %s (%s): no scratch given (%zu bytes needed)",
                        n->name, OPNAME, n->ws_bytes);
    tx_attn_fwd_io io = {.q = fa->input->data, .k = fa->extra_inputs[0]->data,
                         .v = fa->extra_inputs[1]->data, .mask = m ? m->data : NULL,
                         .o = fa->output->data, .lse = lse ? lse->data : NULL};
    teexec_status *st;
    if (n->cache) {
        /* the caches are the session's state: appended in place, then read */
        st = tx_attn_cache_append(&n->a, io.k, io.v, kc->data, vc->data, cl->data, env->stream);
        io.k = kc->data;
        io.v = vc->data;
        io.cache_len = cl->data;
        if (!st) st = tx_attn_fallback_forward(&n->a, &io, env->stream);
    } else if (n->fwd_cudnn) {
        if (!env->sdpa)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "op %s (%s): prepared for cuDNN but the environment has no cuDNN handle",
                            n->name, OPNAME);
        st = tx_sdpa_cudnn_forward(env->sdpa, &n->a, &io, scratch, n->ws_bytes, env->stream);
    } else {
        st = tx_attn_fallback_forward(&n->a, &io, env->stream);
    }
    return st ? tx_status_prefix(st, "op %s (%s) forward", n->name, OPNAME) : NULL;
}

static teexec_status *attn_backward(void *priv, const tx_te_bwd_args *ba, void *state,
                                    void *scratch, const tx_cuda_env *env)
{
    (void)state;
    attn_node *n = priv;
    if (!n || !ba || !env) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "DotProductAttention: NULL argument");
    tx_tensor *dq = ba->grad_input;
    tx_tensor *dk = ba->n_grad_extra_inputs > 0 ? ba->grad_extra_inputs[0] : NULL;
    tx_tensor *dv = ba->n_grad_extra_inputs > 1 ? ba->grad_extra_inputs[1] : NULL;
    if (!dq && !dk && !dv) return NULL;
    if (!n->grads)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "op %s (%s): backward called on a node prepared without gradients "
                        "(training off or needs empty)", n->name, OPNAME);
    if (ba->n_saved != 6 || !ba->saved)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "op %s (%s): expected 6 saved tensors (q, k, v, mask, y, softmax_lse), got %d",
                        n->name, OPNAME, ba->n_saved);
    const tx_tensor *const *s = ba->saved;
    if (!dims_are(s[0], n->a.dtype, 4, n->qd)) return bad_tensor(n, "saved q");
    if (!dims_are(s[1], n->a.dtype, 4, n->kd)) return bad_tensor(n, "saved k");
    if (!dims_are(s[2], n->a.dtype, 4, n->vd)) return bad_tensor(n, "saved v");
    TX_TRY(check_mask(n, s[3]));
    if (!dims_are(s[4], n->a.dtype, 3, n->yd)) return bad_tensor(n, "saved y");
    int64_t ld[3];
    lse_dims(n, ld);
    if (!dims_are(s[5], TEEXEC_DTYPE_FLOAT, 3, ld)) return bad_tensor(n, "saved softmax_lse");
    if (!dims_are(ba->grad_output, n->a.dtype, 3, n->yd)) return bad_tensor(n, "dy");
    if (dq && !dims_are(dq, n->a.dtype, 4, n->qd)) return bad_tensor(n, "dq");
    if (dk && !dims_are(dk, n->a.dtype, 4, n->kd)) return bad_tensor(n, "dk");
    if (dv && !dims_are(dv, n->a.dtype, 4, n->vd)) return bad_tensor(n, "dv");
    if (!scratch)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "op %s (%s): no scratch given", n->name,
                        OPNAME);
    char *sc = scratch;
    tx_attn_bwd_io io = {.q = s[0]->data, .k = s[1]->data, .v = s[2]->data,
                         .o = s[4]->data, .d_o = ba->grad_output->data, .lse = s[5]->data,
                         .mask = s[3] ? s[3]->data : NULL,
                         .dq = dq ? dq->data : sc + n->off_dq,
                         .dk = dk ? dk->data : sc + n->off_dk,
                         .dv = dv ? dv->data : sc + n->off_dv};
    teexec_status *st;
    if (n->bwd_cudnn) {
        if (!env->sdpa)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "op %s (%s): prepared for cuDNN but the environment has no cuDNN handle",
                            n->name, OPNAME);
        st = tx_sdpa_cudnn_backward(env->sdpa, &n->a, &io, scratch, n->ws_bytes, env->stream);
    } else {
        st = tx_attn_fallback_backward(&n->a, &io, scratch, n->ws_bytes, env->stream);
    }
    return st ? tx_status_prefix(st, "op %s (%s) backward", n->name, OPNAME) : NULL;
}

static void attn_free(void *priv) { free(priv); }

static const tx_cuda_te_impl attention_impl = {attn_prepare, attn_forward, attn_backward,
                                               attn_free};

const tx_cuda_te_impl *tx_cuda_te_attention_impl(tx_te_op_id op)
{
    return op == TX_TE_DOT_PRODUCT_ATTENTION ? &attention_impl : NULL;
}

const char *tx_cuda_te_attention_choice(const void *priv)
{
    return priv ? ((const attn_node *)priv)->choice : "";
}

bool tx_cuda_te_attention_uses_cudnn(const void *priv, bool backward)
{
    const attn_node *n = priv;
    return n && (backward ? n->bwd_cudnn : n->fwd_cudnn);
}
