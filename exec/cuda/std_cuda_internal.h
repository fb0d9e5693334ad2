/*
 * std_cuda_internal.h - what the files of the CUDA standard-op node share
 * (std_cuda.h is the interface): the node's state and the per-family
 * prepare / forward / backward functions, one file per concern:
 *   std_cuda.c         the entry points, dispatch, metadata, helpers;
 *   std_cuda_shape.c   copies, Transpose, Slice, Split, Concat, Gather(-
 *                      Elements), Expand, Tile, Trilu, Range, Dropout,
 *                      Shape/Size/Constant, ConstantOfShape;
 *   std_cuda_math.c    elementwise arithmetic, comparisons, unary math,
 *                      Clip, Min/Max/Sum/Mean, Where;
 *   std_cuda_reduce.c  reductions, ArgMax/ArgMin, TopK, CumSum, Softmax,
 *                      LayerNormalization;
 *   std_cuda_linalg.c  MatMul, Gemm, Einsum;
 *   std_cuda_quant.c   QuantizeLinear, DequantizeLinear, the trt Q/DQ ops;
 *   std_cuda_nn.c      Conv, GatherND, RMSNormalization, Attention.
 *
 * Ownership and thread-safety: as std_cuda.h.
 */
#ifndef TEEXEC_EXEC_CUDA_STD_CUDA_INTERNAL_H
#define TEEXEC_EXEC_CUDA_STD_CUDA_INTERNAL_H

#include "exec/cuda/std_cuda.h"
#include "exec/cuda/std_cuda_ops.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/std_attn.h"
#include "kernels/cuda/std_conv.h"
#include "kernels/cuda/std_linalg.h"
#include "kernels/cuda/std_ops.h"
#include "kernels/cuda/std_qdq.h"
#include "kernels/cuda/std_reduce.h"
#include "kernels/cuda/std_unary.h"

#include <stdarg.h>

/* One GEMM of a MatMul, precomputed: element offsets of each operand and
 * the beta to use (0 on the first write of an accumulated grad). */
typedef struct mm_step {
    int64_t oa, ob, oy;
    float beta_a, beta_b;
} mm_step;

struct tx_cuda_std_node {
    const tx_ir_node *node;
    const tx_cuda_std_op *op;  /* the registry's entry */
    tx_std_kind kind;
    size_t n_in, n_out;
    tx_tensor *in, *out;  /* metadata copies; in[i].data: the host value when known
                           * (small tensors), else NULL; rank -1 = omitted */
    size_t scratch;
    /* copies: Transpose/Slice/Expand/Gemm's C use cp[0]; Split one per
     * output, Concat one per input (forward direction; backward swaps) */
    tx_cuda_strided *cp;
    size_t n_cp;
    tx_cuda_bcast bc;
    tx_cuda_bgrad bg[3];  /* grad reduction plan per input slot */
    size_t outer, len, inner, n_idx;
    bool log_mode;
    /* elementwise */
    bool ew_path;         /* float arithmetic through tx_cuda_ew_forward (has grads) */
    tx_std_ew_op ew;
    tx_binary_op bin;
    tx_unary_op un;
    float alpha;
    double clip_lo, clip_hi;
    bool clip_lo_host, clip_hi_host;
    double clip_lo_attr, clip_hi_attr; /* Clip-6's bounds as written (its backward's) */
    int64_t (*vst)[TX_STD_MAX_RANK]; /* Min/Max/Sum/Mean: each input's strides */
    tx_cuda_bgrad *vbg;              /* ... and grad plans */
    /* reductions and axis ops */
    tx_cuda_reduce_plan rp;
    tx_reduce_op red;
    double red_scale;     /* backward: 1, or 1 / count for ReduceMean */
    int flag_a, flag_b;   /* ArgMax: select_last; TopK: largest; CumSum: exclusive, reverse;
                           * Trilu: upper; IsInf: detect_positive, detect_negative */
    int64_t k;            /* TopK k; Trilu's k when known */
    int axis;
    size_t idx_off, val_off; /* TopK: scratch for omitted indices; backward's values */
    /* Shape / Size / Constant / ConstantOfShape */
    uint8_t *lit;
    size_t lit_bytes;
    uint8_t fill[8];
    /* LayerNormalization */
    size_t rows, h;
    float eps;
    bool ln_expand_w, ln_expand_b;
    size_t ln_w_off, ln_b_off, ln_y_off, ln_mu_off, ln_rs_off, ln_ws_off;
    size_t ln_stat_off[2]; /* Mean / InvStdDev converted from scratch, or SIZE_MAX */
    /* MatMul / Gemm */
    struct tx_gemm_lt *gemm;
    bool own_gemm;
    bool naive;
    tx_cuda_naive_gemm ng;
    int64_t M, N, K;
    int ta, tb;
    float g_alpha, g_beta;
    size_t n_steps;
    mm_step *steps;
    /* MatMul forward as one strided-batch GEMM when the steps' offsets
     * are linear in the step (0: the per-step loop) */
    int64_t bat_count, bat_sa, bat_sb;
    bool acc_a, acc_b;     /* grad summed over broadcast batches in FP32 scratch */
    size_t ws_off, acc_a_off, acc_b_off;
    tx_cuda_einsum_plan ep;
    tx_cuda_einsum_bwd_plan ebp[TX_CUDA_EINSUM_INPUTS];
    /* Conv, GatherND, Attention */
    tx_cuda_conv cv;
    tx_cuda_attn at;
    /* Q/DQ: element -> scale index */
    tx_cuda_qmap qm;
};

/* ---- shared helpers (std_cuda.c) ---- */

teexec_status *tx_std_node_err(const tx_ir_node *node, teexec_code code, const char *fmt, ...)
    TX_PRINTF(3, 4);
#define UNSUP(...) tx_std_node_err(n->node, TEEXEC_ERR_UNSUPPORTED, __VA_ARGS__)
/* Gives a kernel's or CUDA's error the node's name. */
teexec_status *tx_std_at(const tx_cuda_std_node *n, teexec_status *st);
teexec_status *tx_std_memset0(const tx_cuda_std_node *n, void *p, size_t bytes, void *stream);
teexec_status *tx_std_copy(const tx_cuda_std_node *n, void *dst, const void *src, size_t bytes,
                           void *stream);

static inline bool tx_std_present(const tx_tensor *t) { return t->rank >= 0; }
static inline const tx_tensor *tx_std_in(const tx_cuda_std_node *n, size_t i)
{
    return i < n->n_in && tx_std_present(&n->in[i]) ? &n->in[i] : NULL;
}
static inline bool tx_std_is_f16(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_BFLOAT16 || dt == TEEXEC_DTYPE_FLOAT16;
}
static inline size_t tx_std_align(size_t v) { return (v + 255) & ~(size_t)255; }

void tx_std_contig_strides(int32_t rank, const int64_t *dims, int64_t *st);
/* Strides of t aligned right to a rank-r output, 0 where it broadcasts. */
void tx_std_bcast_strides(const tx_tensor *t, int32_t r, const int64_t *odims, int64_t *st);
/* Grad plan of an operand with broadcast strides st over the output y. */
void tx_std_bgrad_init(tx_cuda_bgrad *g, const tx_tensor *y, const int64_t *st_x);
teexec_status *tx_std_need_rank(const tx_cuda_std_node *n, int32_t rank);
teexec_status *tx_std_alloc_cp(tx_cuda_std_node *n, size_t count);
/* The host value of input i as int64s (it must be known). */
teexec_status *tx_std_host_ints(const tx_cuda_std_node *n, size_t i, int64_t **v, size_t *nv);
teexec_status *tx_std_host_scalar(const tx_cuda_std_node *n, size_t i, double *v);

/* ---- per family ---- */

teexec_status *tx_std_prep_shape(tx_cuda_std_node *n, const tx_cuda_std_desc *d);
teexec_status *tx_std_fwd_shape(tx_cuda_std_node *n, const tx_tensor *const *in,
                                tx_tensor *const *out, void *scratch, void *stream);
teexec_status *tx_std_bwd_shape(tx_cuda_std_node *n, const tx_tensor *const *in,
                                const tx_tensor *const *out, const tx_tensor *const *gout,
                                tx_tensor *const *gin, void *scratch, void *stream);

teexec_status *tx_std_prep_math(tx_cuda_std_node *n, const tx_cuda_std_desc *d);
teexec_status *tx_std_fwd_math(tx_cuda_std_node *n, const tx_tensor *const *in,
                               tx_tensor *const *out, void *scratch, void *stream);
teexec_status *tx_std_bwd_math(tx_cuda_std_node *n, const tx_tensor *const *in,
                               const tx_tensor *const *out, const tx_tensor *const *gout,
                               tx_tensor *const *gin, void *scratch, void *stream);

teexec_status *tx_std_prep_reduce(tx_cuda_std_node *n, const tx_cuda_std_desc *d);
teexec_status *tx_std_fwd_reduce(tx_cuda_std_node *n, const tx_tensor *const *in,
                                 tx_tensor *const *out, void *scratch, void *stream);
teexec_status *tx_std_bwd_reduce(tx_cuda_std_node *n, const tx_tensor *const *in,
                                 const tx_tensor *const *out, const tx_tensor *const *gout,
                                 tx_tensor *const *gin, void *scratch, void *stream);

teexec_status *tx_std_prep_linalg(tx_cuda_std_node *n, const tx_cuda_std_desc *d);
teexec_status *tx_std_fwd_linalg(tx_cuda_std_node *n, const tx_tensor *const *in,
                                 tx_tensor *const *out, void *scratch, void *stream);
teexec_status *tx_std_bwd_linalg(tx_cuda_std_node *n, const tx_tensor *const *in,
                                 const tx_tensor *const *out, const tx_tensor *const *gout,
                                 tx_tensor *const *gin, void *scratch, void *stream);

teexec_status *tx_std_prep_nn(tx_cuda_std_node *n, const tx_cuda_std_desc *d);
teexec_status *tx_std_fwd_nn(tx_cuda_std_node *n, const tx_tensor *const *in,
                             tx_tensor *const *out, void *scratch, void *stream);
teexec_status *tx_std_bwd_nn(tx_cuda_std_node *n, const tx_tensor *const *in,
                             const tx_tensor *const *out, const tx_tensor *const *gout,
                             tx_tensor *const *gin, void *scratch, void *stream);

teexec_status *tx_std_prep_quant(tx_cuda_std_node *n, const tx_cuda_std_desc *d);
teexec_status *tx_std_fwd_quant(tx_cuda_std_node *n, const tx_tensor *const *in,
                                tx_tensor *const *out, void *scratch, void *stream);

/* Which family file owns a kind. */
typedef enum tx_std_family {
    TX_SF_SHAPE,
    TX_SF_MATH,
    TX_SF_REDUCE,
    TX_SF_LINALG,
    TX_SF_QUANT,
    TX_SF_NN
} tx_std_family;
tx_std_family tx_std_family_of(tx_std_kind k);

#endif
