/* std_cuda_linalg.c - the matrix products of the CUDA standard node
 * (std_cuda_internal.h): MatMul and Gemm through cuBLASLt for FLOAT,
 * FLOAT16 and BFLOAT16 (forward and backward), through the plain kernels
 * of std_linalg.h for DOUBLE and integers (forward), and Einsum. */
#include "exec/cuda/std_cuda_internal.h"

#include "base/shape.h"
#include "import/shape_infer.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm_lt.h"

#include <stdlib.h>
#include <string.h>

#define IN(n, i) tx_std_in(n, i)

/* ---- prepare ------------------------------------------------------------------------- */

static teexec_status *own_gemm(tx_cuda_std_node *n, struct tx_gemm_lt *shared)
{
    if (shared) {
        n->gemm = shared;
        return NULL;
    }
    TX_TRY(tx_std_at(n, tx_gemm_lt_create(0, &n->gemm)));
    n->own_gemm = true;
    return NULL;
}

/* MatMul's batch walk for the plain kernel: the output's batch dims with
 * each operand's stride (0 where it broadcasts). */
static void naive_matmul_plan(tx_cuda_std_node *n, const tx_tensor *A, const tx_tensor *B,
                              int64_t M, int64_t N, int64_t K)
{
    tx_cuda_naive_gemm *p = &n->ng;
    memset(p, 0, sizeof *p);
    int32_t nb_a = A->rank > 2 ? A->rank - 2 : 0, nb_b = B->rank > 2 ? B->rank - 2 : 0;
    int32_t nb = nb_a > nb_b ? nb_a : nb_b;
    int64_t s_a = M * K, s_b = K * N;
    for (int32_t k = nb - 1; k >= 0; k--) {
        int32_t ka = k - (nb - nb_a), kb = k - (nb - nb_b);
        int64_t da = ka >= 0 ? A->dims[ka] : 1, db = kb >= 0 ? B->dims[kb] : 1;
        p->bdims[k] = da > db ? da : db;
        p->sa[k] = da == 1 ? 0 : s_a;
        p->sb[k] = db == 1 ? 0 : s_b;
        if (ka >= 0) s_a *= da;
        if (kb >= 0) s_b *= db;
    }
    p->nb = nb;
    p->M = M;
    p->N = N;
    p->K = K;
    p->a_sm = K;
    p->a_sk = 1;
    p->b_sk = N;
    p->b_sn = 1;
}

static teexec_status *prep_matmul(tx_cuda_std_node *n, struct tx_gemm_lt *shared_gemm)
{
    const tx_tensor *A = IN(n, 0), *B = IN(n, 1), *Y = &n->out[0];
    if (!A || !B) return UNSUP("inputs are missing");
    if (A->dtype != B->dtype || Y->dtype != A->dtype) return UNSUP("operands must share a dtype");
    if (A->rank < 1 || B->rank < 1) return UNSUP("scalar operands");
    tx_shape as = tx_shape_of(A), bs = tx_shape_of(B), ys;
    TX_TRY(tx_std_at(n, tx_shape_matmul(&as, &bs, &ys)));
    if (!tx_tensor_has_shape(Y, &ys)) return UNSUP("output shape differs from the product's");
    int64_t M = A->rank == 1 ? 1 : A->dims[A->rank - 2], K = A->dims[A->rank - 1];
    int64_t N = B->rank == 1 ? 1 : B->dims[B->rank - 1];
    if (!tx_std_is_f16(A->dtype)) {
        if (!tx_cuda_naive_gemm_dtype_ok(A->dtype))
            return UNSUP("%s is not supported", teexec_dtype_name(A->dtype));
        TX_TRY(tx_std_need_rank(n, ys.rank));
        n->naive = true;
        naive_matmul_plan(n, A, B, M, N, K);
        return NULL;
    }
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
        /* operand offsets linear in the step (no batch dim broadcast
         * partly): the forward is one strided-batch GEMM, not nbatch
         * launches (attention's per-head products at decode: b x h of
         * them, each a few microseconds of launch) */
        bool linear = nbatch > 1;
        int64_t da = linear ? n->steps[1].oa : 0, db = linear ? n->steps[1].ob : 0;
        for (uint64_t bi = 0; linear && bi < nbatch; bi++)
            linear = n->steps[bi].oa == (int64_t)bi * da && n->steps[bi].ob == (int64_t)bi * db;
        if (linear && nbatch <= INT32_MAX) {
            n->bat_count = (int64_t)nbatch;
            n->bat_sa = da;
            n->bat_sb = db;
        }
    }
    TX_TRY(own_gemm(n, shared_gemm));
    /* FP32 accumulation of a broadcast operand's grad: in place for FLOAT,
     * in scratch for 16-bit types (one rounding at the end) */
    bool f32 = A->dtype == TEEXEC_DTYPE_FLOAT;
    size_t off = tx_std_align(tx_gemm_lt_workspace_bytes(n->gemm));
    n->ws_off = 0;
    n->acc_a_off = n->acc_b_off = SIZE_MAX;
    if (n->acc_a && !f32) {
        n->acc_a_off = off;
        off += tx_std_align((size_t)A->numel * sizeof(float));
    }
    if (n->acc_b && !f32) {
        n->acc_b_off = off;
        off += tx_std_align((size_t)B->numel * sizeof(float));
    }
    n->scratch = off;
    tx_gemm_desc d = {.m = N, .n = n->M, .k = K, .lda = N, .ldb = K, .ldd = N,
                      .a_type = A->dtype, .b_type = A->dtype, .d_type = A->dtype, .alpha = 1.0f};
    if (N && n->M && K) TX_TRY(tx_std_at(n, tx_gemm_lt_check(n->gemm, &d)));
    if (n->bat_count > 1 && N && n->M && K) {
        d.batch_count = n->bat_count;
        d.stride_a = n->bat_sb;
        d.stride_b = n->bat_sa;
        d.stride_c = d.stride_d = n->M * N;
        teexec_status *st = tx_gemm_lt_check(n->gemm, &d);
        if (st) { /* the loop then */
            teexec_status_destroy(st);
            n->bat_count = 0;
        }
    }
    return NULL;
}

static teexec_status *prep_gemm(tx_cuda_std_node *n, struct tx_gemm_lt *shared_gemm)
{
    const tx_tensor *A = IN(n, 0), *B = IN(n, 1), *C = IN(n, 2), *Y = &n->out[0];
    if (!A || !B) return UNSUP("inputs are missing");
    if (A->dtype != B->dtype || Y->dtype != A->dtype || (C && C->dtype != A->dtype))
        return UNSUP("operands must share a dtype");
    int64_t ta, tb;
    TX_TRY(tx_ir_attr_float(n->node, "alpha", 1.0f, &n->g_alpha));
    TX_TRY(tx_ir_attr_float(n->node, "beta", 1.0f, &n->g_beta));
    TX_TRY(tx_ir_attr_int(n->node, "transA", 0, &ta));
    TX_TRY(tx_ir_attr_int(n->node, "transB", 0, &tb));
    n->ta = ta != 0;
    n->tb = tb != 0;
    tx_shape as = tx_shape_of(A), bs = tx_shape_of(B);
    TX_TRY(tx_std_at(n, tx_shape_gemm(&as, &bs, n->ta, n->tb, &n->M, &n->N, &n->K)));
    tx_shape ys = {.rank = 2, .dims = {n->M, n->N}};
    if (!tx_tensor_has_shape(Y, &ys)) return UNSUP("output shape differs from the product's");
    int64_t c_si = 0, c_sj = 0;
    if (C) {
        tx_shape cs = tx_shape_of(C);
        if (C->rank > 2 || !tx_shape_broadcastable_to(&cs, &ys))
            return UNSUP("C does not broadcast to [M, N]");
        int64_t cm = C->rank == 2 ? C->dims[0] : 1, cn = C->rank >= 1 ? C->dims[C->rank - 1] : 1;
        c_si = cm == 1 ? 0 : cn;
        c_sj = cn == 1 ? 0 : 1;
        TX_TRY(tx_std_alloc_cp(n, 1));
        tx_cuda_strided *c = &n->cp[0];
        c->rank = 2;
        c->dims[0] = n->M;
        c->dims[1] = n->N;
        c->src_st[0] = c_si;
        c->src_st[1] = c_sj;
        c->dst_st[0] = n->N;
        c->dst_st[1] = 1;
        int64_t st[TX_MAX_RANK];
        tx_std_bcast_strides(C, 2, ys.dims, st);
        tx_std_bgrad_init(&n->bg[2], Y, st);
    }
    if (!tx_std_is_f16(A->dtype)) {
        if (!tx_cuda_naive_gemm_dtype_ok(A->dtype))
            return UNSUP("%s is not supported", teexec_dtype_name(A->dtype));
        n->naive = true;
        tx_cuda_naive_gemm *p = &n->ng;
        memset(p, 0, sizeof *p);
        p->M = n->M;
        p->N = n->N;
        p->K = n->K;
        p->a_sm = n->ta ? 1 : n->K;
        p->a_sk = n->ta ? n->M : 1;
        p->b_sk = n->tb ? 1 : n->N;
        p->b_sn = n->tb ? n->K : 1;
        p->gemm = 1;
        p->alpha = n->g_alpha;
        p->beta = n->g_beta;
        p->c_si = c_si;
        p->c_sj = c_sj;
        return NULL;
    }
    if (n->K == 0 && C && n->g_beta != 0.0f && n->g_beta != 1.0f)
        return UNSUP("an empty product with beta %g is not run on the GPU", (double)n->g_beta);
    TX_TRY(own_gemm(n, shared_gemm));
    n->ws_off = 0;
    n->scratch = tx_gemm_lt_workspace_bytes(n->gemm);
    return NULL;
}

/* The backward's plan per input (exec/backward_std.c's bwd_einsum): the
 * labels in use in ascending label order, every operand's stride per label
 * (a dim of size 1 under a longer label adds none: it broadcasts) and the
 * output's. */
static teexec_status *einsum_bwd_plans(tx_cuda_std_node *n, const tx_einsum *e)
{
    enum { NL = TX_EINSUM_MAX_LABELS };
    int used[NL], slot[NL], nu = 0;
    bool in_use[NL] = {false};
    for (size_t i = 0; i < n->n_in; i++)
        for (int d = 0; d < e->in_rank[i]; d++) in_use[e->in_labels[i][d]] = true;
    for (int l = 0; l < NL; l++) {
        slot[l] = -1;
        if (in_use[l]) {
            slot[l] = nu;
            used[nu++] = l;
        }
    }
    if (nu > TX_CUDA_EINSUM_LABELS) return UNSUP("%d labels (the GPU takes %d)", nu, TX_CUDA_EINSUM_LABELS);
    tx_cuda_einsum_bwd_plan base;
    memset(&base, 0, sizeof base);
    base.n_inputs = (int)n->n_in;
    base.nlabels = nu;
    for (int u = 0; u < nu; u++) base.size[u] = e->label_dim[used[u]];
    for (size_t i = 0; i < n->n_in; i++) {
        const tx_tensor *t = &n->in[i];
        int64_t s = 1;
        for (int d = e->in_rank[i] - 1; d >= 0; d--) {
            int lab = e->in_labels[i][d];
            if (t->dims[d] != 1 || e->label_dim[lab] == 1) base.stride[i][slot[lab]] += s;
            s *= t->dims[d];
        }
    }
    int64_t s = 1;
    for (int d = e->out_rank - 1; d >= 0; d--) {
        base.ostride[slot[e->out_labels[d]]] = s;
        s *= e->label_dim[e->out_labels[d]];
    }
    for (size_t i = 0; i < n->n_in; i++) {
        tx_cuda_einsum_bwd_plan *p = &n->ebp[i];
        *p = base;
        p->target = (int)i;
        const tx_tensor *t = &n->in[i];
        if (t->rank > TX_STD_RANK) return UNSUP("rank %d is above the GPU kernels'", (int)t->rank);
        p->trank = t->rank;
        for (int d = 0; d < t->rank; d++) {
            int lab = e->in_labels[i][d];
            p->tdims[d] = t->dims[d];
            p->tlab[d] = t->dims[d] != 1 || e->label_dim[lab] == 1 ? slot[lab] : -1;
        }
    }
    return NULL;
}

static teexec_status *prep_einsum(tx_cuda_std_node *n)
{
    const tx_tensor *y = &n->out[0];
    if (n->n_in < 1 || n->n_in > TX_CUDA_EINSUM_INPUTS)
        return UNSUP("%zu inputs (the GPU takes 1 to %d)", n->n_in, TX_CUDA_EINSUM_INPUTS);
    const tx_shape *shapes[TX_CUDA_EINSUM_INPUTS];
    tx_shape sv[TX_CUDA_EINSUM_INPUTS];
    for (size_t i = 0; i < n->n_in; i++) {
        if (!IN(n, i)) return UNSUP("input %zu is missing", i);
        if (n->in[i].dtype != y->dtype) return UNSUP("input %zu has another dtype", i);
        sv[i] = tx_shape_of(&n->in[i]);
        shapes[i] = &sv[i];
    }
    tx_einsum *e = malloc(sizeof *e);
    if (!e) return tx_oom();
    teexec_status *st = tx_einsum_parse(n->node, n->n_in, shapes, e);
    tx_cuda_einsum_plan *p = &n->ep;
    memset(p, 0, sizeof *p);
    p->n_inputs = (int)n->n_in;
    /* walk order: the output's labels, then the summed ones as the CPU
     * orders them (letters a-z, A-Z, then the ellipsis dims) */
    int order[TX_EINSUM_MAX_LABELS], nl = 0;
    bool used[TX_EINSUM_MAX_LABELS] = {false};
    if (!st) {
        for (int j = 0; j < e->out_rank; j++) {
            order[nl++] = e->out_labels[j];
            used[e->out_labels[j]] = true;
        }
        p->nout = e->out_rank;
        const char *letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        for (const char *c = letters; *c; c++) {
            int lab = e->letter_index[(unsigned char)*c];
            if (lab >= 0 && !used[lab]) {
                order[nl++] = lab;
                used[lab] = true;
            }
        }
        for (int k = 0; k < e->ell_rank; k++) {
            int lab = TX_EINSUM_MAX_LABELS - TX_MAX_RANK + k;
            if (!used[lab]) {
                order[nl++] = lab;
                used[lab] = true;
            }
        }
        if (nl > TX_CUDA_EINSUM_LABELS)
            st = UNSUP("%d labels (the GPU takes %d)", nl, TX_CUDA_EINSUM_LABELS);
    }
    if (!st) {
        p->nlabels = nl;
        for (int l = 0; l < nl; l++) p->size[l] = e->label_dim[order[l]];
        int64_t ys_n = 1;
        for (int l = 0; l < p->nout; l++) ys_n *= p->size[l];
        if ((uint64_t)ys_n != y->numel || y->rank != p->nout) st = UNSUP("output shape differs");
        for (size_t k = 0; k < n->n_in && !st; k++) {
            const tx_tensor *t = &n->in[k];
            int64_t own[TX_MAX_RANK];
            tx_std_contig_strides(t->rank, t->dims, own);
            for (int d = 0; d < e->in_rank[k]; d++) {
                if (t->dims[d] == 1) continue; /* a broadcast (or unit) dim: stride 0 */
                int lab = e->in_labels[k][d];
                for (int l = 0; l < nl; l++)
                    if (order[l] == lab) p->stride[k][l] += own[d];
            }
        }
    }
    if (!st) st = einsum_bwd_plans(n, e);
    free(e);
    return st;
}

teexec_status *tx_std_prep_linalg(tx_cuda_std_node *n, const tx_cuda_std_desc *d)
{
    switch (n->kind) {
    case TX_SK_MATMUL: return prep_matmul(n, d->gemm);
    case TX_SK_GEMM: return prep_gemm(n, d->gemm);
    case TX_SK_EINSUM: return prep_einsum(n);
    default: return UNSUP("not a matrix product");
    }
}

/* ---- forward ---------------------------------------------------------------------------- */

static void *ptr(void *base, int64_t elems, teexec_dtype dt)
{
    return (char *)base + (size_t)elems * tx_dtype_elem_size(dt);
}

/* One cuBLASLt call in column-major terms (gemm_lt.h). */
static teexec_status *gemm(tx_cuda_std_node *n, int64_t m, int64_t nn, int64_t k, int ta, int tb,
                           int64_t lda, int64_t ldb, int64_t ldd, const void *A, const void *B,
                           void *D, teexec_dtype in_dt, teexec_dtype out_dt, float alpha,
                           float beta, void *scratch, void *stream)
{
    if (!m || !nn) return NULL;
    tx_gemm_desc d = {.m = m, .n = nn, .k = k, .transa = ta, .transb = tb, .lda = lda,
                      .ldb = ldb, .ldd = ldd, .ldc = ldd, .a_type = in_dt, .b_type = in_dt,
                      .d_type = out_dt, .alpha = alpha, .beta = beta};
    void *ws = tx_gemm_lt_workspace_bytes(n->gemm) ? (char *)scratch + n->ws_off : NULL;
    if (!k) {
        /* an empty sum: cuBLASLt may refuse k == 0, the answer is beta * D */
        if (beta == 1.0f) return NULL;
        return tx_std_memset0(n, D, (size_t)(m * nn) * tx_dtype_elem_size(out_dt), stream);
    }
    return tx_std_at(n, tx_gemm_lt_run(n->gemm, &d, A, B, beta != 0.0f ? D : NULL, D, ws, stream));
}

/* Row-major C[M,N] = alpha op(A)[M,K] op(B)[K,N] + beta C, A stored
 * [M,K] (or [K,M] when ta), B stored [K,N] (or [N,K] when tb): in
 * column-major terms C^T = op(B)^T op(A)^T. */
static teexec_status *rm_gemm(tx_cuda_std_node *n, int64_t M, int64_t N, int64_t K, const void *A,
                              int ta, const void *B, int tb, void *C, teexec_dtype in_dt,
                              teexec_dtype out_dt, float alpha, float beta, void *scratch,
                              void *stream)
{
    return gemm(n, N, M, K, tb, ta, tb ? K : N, ta ? M : K, N, B, A, C, in_dt, out_dt, alpha,
                beta, scratch, stream);
}

/* The row-major batch C_i = A_i B_i (A_i at A + i * sa elements, B_i at
 * B + i * sb, C_i at C + i * M * N) as one cuBLASLt call: column-major
 * C^T = B^T A^T, like rm_gemm. */
static teexec_status *rm_gemm_batched(tx_cuda_std_node *n, const void *A, const void *B, void *C,
                                      teexec_dtype dt, void *scratch, void *stream)
{
    if (!n->M || !n->N) return NULL;
    if (!n->K) return tx_std_memset0(n, C, (size_t)(n->bat_count * n->M * n->N) *
                                               tx_dtype_elem_size(dt), stream);
    tx_gemm_desc d = {.m = n->N, .n = n->M, .k = n->K, .lda = n->N, .ldb = n->K, .ldd = n->N,
                      .ldc = n->N, .a_type = dt, .b_type = dt, .d_type = dt, .alpha = 1.0f,
                      .batch_count = n->bat_count, .stride_a = n->bat_sb, .stride_b = n->bat_sa,
                      .stride_c = n->M * n->N, .stride_d = n->M * n->N};
    void *ws = tx_gemm_lt_workspace_bytes(n->gemm) ? (char *)scratch + n->ws_off : NULL;
    return tx_std_at(n, tx_gemm_lt_run(n->gemm, &d, B, A, NULL, C, ws, stream));
}

static teexec_status *fwd_matmul(tx_cuda_std_node *n, const tx_tensor *const *in,
                                 tx_tensor *const *out, void *scratch, void *stream)
{
    teexec_dtype dt = n->in[0].dtype;
    if (n->naive)
        return tx_std_at(n, tx_cuda_naive_gemm_run(&n->ng, in[0]->data, in[1]->data,
                                                   out[0]->data, dt, stream));
    if (n->bat_count > 1)
        return rm_gemm_batched(n, in[0]->data, in[1]->data, out[0]->data, dt, scratch, stream);
    for (size_t s = 0; s < n->n_steps; s++) {
        const mm_step *st = &n->steps[s];
        TX_TRY(rm_gemm(n, n->M, n->N, n->K, ptr(in[0]->data, st->oa, dt), 0,
                       ptr(in[1]->data, st->ob, dt), 0, ptr(out[0]->data, st->oy, dt), dt, dt,
                       1.0f, 0.0f, scratch, stream));
    }
    return NULL;
}

static teexec_status *fwd_gemm(tx_cuda_std_node *n, const tx_tensor *const *in,
                               tx_tensor *const *out, void *scratch, void *stream)
{
    teexec_dtype dt = n->in[0].dtype;
    bool use_c = IN(n, 2) && n->g_beta != 0.0f;
    if (n->naive) {
        tx_cuda_naive_gemm p = n->ng;
        p.c = IN(n, 2) ? in[2]->data : NULL;
        return tx_std_at(n, tx_cuda_naive_gemm_run(&p, in[0]->data, in[1]->data, out[0]->data,
                                                   dt, stream));
    }
    /* Y = C broadcast, then Y = alpha op(A) op(B) + beta Y */
    if (use_c)
        TX_TRY(tx_std_at(n, tx_cuda_strided_copy(&n->cp[0], in[2]->data, out[0]->data,
                                                 tx_dtype_elem_size(dt), stream)));
    return rm_gemm(n, n->M, n->N, n->K, in[0]->data, n->ta, in[1]->data, n->tb, out[0]->data,
                   dt, dt, n->g_alpha, use_c ? n->g_beta : 0.0f, scratch, stream);
}

teexec_status *tx_std_fwd_linalg(tx_cuda_std_node *n, const tx_tensor *const *in,
                                 tx_tensor *const *out, void *scratch, void *stream)
{
    switch (n->kind) {
    case TX_SK_MATMUL: return fwd_matmul(n, in, out, scratch, stream);
    case TX_SK_GEMM: return fwd_gemm(n, in, out, scratch, stream);
    case TX_SK_EINSUM: {
        const void *ins[TX_CUDA_EINSUM_INPUTS] = {NULL, NULL, NULL, NULL};
        for (size_t i = 0; i < n->n_in; i++) ins[i] = in[i]->data;
        return tx_std_at(n, tx_cuda_einsum(&n->ep, ins, out[0]->data, n->out[0].dtype, stream));
    }
    default: return tx_std_node_err(n->node, TEEXEC_ERR_INTERNAL, "not a matrix product");
    }
}

/* ---- backward ------------------------------------------------------------------------ */

static teexec_status *bwd_matmul(tx_cuda_std_node *n, const tx_tensor *const *in,
                                 const tx_tensor *const *gout, tx_tensor *const *gin,
                                 void *scratch, void *stream)
{
    teexec_dtype dt = n->in[0].dtype;
    tx_tensor *ga = gin[0], *gb = n->n_in > 1 ? gin[1] : NULL;
    if (!gout[0]) {
        if (ga) TX_TRY(tx_std_memset0(n, ga->data, n->in[0].nbytes, stream));
        if (gb) TX_TRY(tx_std_memset0(n, gb->data, n->in[1].nbytes, stream));
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
        if (da) /* dA = dY B^T */
            TX_TRY(rm_gemm(n, n->M, n->K, n->N, gy, 0, ptr(in[1]->data, st->ob, dt), 1,
                           ptr(da, st->oa, dta), dt, dta, 1.0f, st->beta_a, scratch, stream));
        if (db) /* dB = A^T dY */
            TX_TRY(rm_gemm(n, n->K, n->N, n->M, ptr(in[0]->data, st->oa, dt), 1, gy, 0,
                           ptr(db, st->ob, dtb), dt, dtb, 1.0f, st->beta_b, scratch, stream));
    }
    if (sa)
        TX_TRY(tx_std_at(n, tx_cuda_convert(da, TEEXEC_DTYPE_FLOAT, ga->data, dt,
                                            (size_t)n->in[0].numel, stream)));
    if (sb)
        TX_TRY(tx_std_at(n, tx_cuda_convert(db, TEEXEC_DTYPE_FLOAT, gb->data, dt,
                                            (size_t)n->in[1].numel, stream)));
    return NULL;
}

/* Y = alpha op(A) op(B) + beta C: dop(A) = alpha dY op(B)^T, dop(B) =
 * alpha op(A)^T dY, each written in its operand's storage order; dC = beta
 * dY summed over C's broadcast dims. */
static teexec_status *bwd_gemm(tx_cuda_std_node *n, const tx_tensor *const *in,
                               const tx_tensor *const *gout, tx_tensor *const *gin,
                               void *scratch, void *stream)
{
    teexec_dtype dt = n->in[0].dtype;
    tx_tensor *ga = gin[0], *gb = n->n_in > 1 ? gin[1] : NULL, *gc = n->n_in > 2 ? gin[2] : NULL;
    if (!gout[0]) {
        for (size_t i = 0; i < 3 && i < n->n_in; i++)
            if (gin[i]) TX_TRY(tx_std_memset0(n, gin[i]->data, n->in[i].nbytes, stream));
        return NULL;
    }
    const void *g = gout[0]->data, *A = in[0]->data, *B = in[1]->data;
    int64_t M = n->M, N = n->N, K = n->K;
    float al = n->g_alpha;
    if (ga) {
        if (!n->ta) /* dA[M,K] = dY op(B)^T */
            TX_TRY(rm_gemm(n, M, K, N, g, 0, B, !n->tb, ga->data, dt, dt, al, 0.0f, scratch,
                           stream));
        else /* A stored [K,M]: dA = op(B) dY^T */
            TX_TRY(rm_gemm(n, K, M, N, B, n->tb, g, 1, ga->data, dt, dt, al, 0.0f, scratch,
                           stream));
    }
    if (gb) {
        if (!n->tb) /* dB[K,N] = op(A)^T dY */
            TX_TRY(rm_gemm(n, K, N, M, A, !n->ta, g, 0, gb->data, dt, dt, al, 0.0f, scratch,
                           stream));
        else /* B stored [N,K]: dB = dY^T op(A) */
            TX_TRY(rm_gemm(n, N, K, M, g, 1, A, n->ta, gb->data, dt, dt, al, 0.0f, scratch,
                           stream));
    }
    if (gc) {
        tx_cuda_bgrad_ops o = {.g = g, .g_dtype = dt, .scale = (double)n->g_beta};
        TX_TRY(tx_std_at(n, tx_cuda_bcast_grad(TX_STD_GT_SCALE, &n->bg[2], &o, gc->data, dt,
                                               stream)));
    }
    return NULL;
}

teexec_status *tx_std_bwd_linalg(tx_cuda_std_node *n, const tx_tensor *const *in,
                                 const tx_tensor *const *out, const tx_tensor *const *gout,
                                 tx_tensor *const *gin, void *scratch, void *stream)
{
    (void)out;
    if (n->naive) return tx_std_node_err(n->node, TEEXEC_ERR_UNSUPPORTED, "no backward for this dtype");
    switch (n->kind) {
    case TX_SK_MATMUL: return bwd_matmul(n, in, gout, gin, scratch, stream);
    case TX_SK_GEMM: return bwd_gemm(n, in, gout, gin, scratch, stream);
    case TX_SK_EINSUM: {
        const void *ins[TX_CUDA_EINSUM_INPUTS] = {NULL, NULL, NULL, NULL};
        for (size_t i = 0; i < n->n_in; i++) ins[i] = in[i]->data;
        for (size_t i = 0; i < n->n_in; i++) {
            if (!gin[i]) continue;
            if (!gout[0]) TX_TRY(tx_std_memset0(n, gin[i]->data, n->in[i].nbytes, stream));
            else
                TX_TRY(tx_std_at(n, tx_cuda_einsum_backward(&n->ebp[i], ins, gout[0]->data,
                                                            gin[i]->data, n->in[i].dtype,
                                                            stream)));
        }
        return NULL;
    }
    default: return tx_std_node_err(n->node, TEEXEC_ERR_UNSUPPORTED, "no backward on the GPU");
    }
}
