/* gemm_emulate.c - dequantize into GEMM operands, then one TN GEMM (see
 * gemm_emulate.h). */
#include "kernels/cuda/gemm_emulate.h"

#include "base/checked.h"
#include "base/status.h"
#include "kernels/cuda/gemm_emu_prep.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define ALIGN 256u

/* Scratch layout, each part 256-byte aligned:
 *   [0, 256)   device floats: NVFP4 alpha, the unit amax (2688)
 *   op_a, op_b the operands, dequantized straight into the operand dtype */
typedef struct emu_layout {
    size_t op_a, op_b, total;
} emu_layout;

static int round_up(size_t x, size_t *out)
{
    size_t t;
    if (!tx_add_size(x, ALIGN - 1, &t)) return 0;
    *out = t / ALIGN * ALIGN;
    return 1;
}

static int layout_of(const tx_cuda_dequant_args *qa, const tx_cuda_dequant_args *qb, size_t esz,
                     emu_layout *l)
{
    size_t na, nb, ba, bb, pos = ALIGN;
    if (!tx_mul_size(qa->rows, qa->cols, &na) || !tx_mul_size(qb->rows, qb->cols, &nb)) return 0;
    if (!tx_mul_size(na, esz, &ba) || !tx_mul_size(nb, esz, &bb)) return 0;
    if (!round_up(ba, &ba) || !round_up(bb, &bb)) return 0;
    l->op_a = pos;
    if (!tx_add_size(pos, ba, &pos)) return 0;
    l->op_b = pos;
    if (!tx_add_size(pos, bb, &pos)) return 0;
    l->total = pos;
    return 1;
}

static size_t operand_size(teexec_dtype t)
{
    return t == TEEXEC_DTYPE_FLOAT ? 4 : t == TEEXEC_DTYPE_BFLOAT16 || t == 0 ? 2 : 0;
}

size_t tx_gemm_emu_scratch_bytes(const tx_cuda_dequant_args *qa, const tx_cuda_dequant_args *qb,
                                 teexec_dtype operand_type)
{
    emu_layout l;
    const size_t esz = operand_size(operand_type);
    if (!qa || !qb || !esz || !layout_of(qa, qb, esz, &l)) return 0;
    return l.total;
}

/* Dequantizes one operand into dst, K-contiguous: the source matrix as is
 * when its cols are the GEMM's reduction dim, else its transpose. The
 * quantized usage's blocks run along the reduction dim, so that is the
 * orientation the stored data mostly has already (NVFP4 / FP8 columnwise
 * copies are stored transposed) and one pass writes it; the bf16 GEMM is
 * as fast TN as NN / NT on the H200 (bench/results/
 * gpu_emulation_2026-11-30.md). unit_amax replaces an NVFP4 operand's
 * global amax. */
static teexec_status *prepare(const tx_cuda_dequant_args *q, int transposed, const float *unit_amax,
                              void *dst, teexec_dtype type, void *stream)
{
    tx_cuda_dequant_args a = *q;
    if (a.kind == TX_CUDA_Q_NVFP4) a.amax = unit_amax;
    return tx_cuda_dequantize_to(&a, transposed, type, dst, stream);
}

teexec_status *tx_gemm_emulate(tx_gemm_lt *h, const tx_gemm_desc *g, const tx_cuda_dequant_args *qa,
                               const tx_cuda_dequant_args *qb, teexec_dtype operand_type,
                               void *scratch, size_t scratch_bytes, const void *C, void *D,
                               void *workspace, void *stream)
{
    static const char *const what = "tx_gemm_emulate";
    if (!h || !g || !qa || !qb || !scratch)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NULL argument", what);
    const size_t esz = operand_size(operand_type);
    if (!esz)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: operand dtype %d is not BFLOAT16 or FLOAT",
                        what, (int)operand_type);
    emu_layout l;
    if (!layout_of(qa, qb, esz, &l))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: operand sizes overflow", what);
    if (scratch_bytes < l.total)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: scratch has %zu bytes, %zu needed", what,
                        scratch_bytes, l.total);
    if ((uintptr_t)scratch % ALIGN)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: scratch must be 256-byte aligned", what);
    /* The operands' shapes must be the GEMM's (see the header's mapping). */
    const int64_t am = g->transa ? (int64_t)qa->rows : (int64_t)qa->cols;
    const int64_t ak = g->transa ? (int64_t)qa->cols : (int64_t)qa->rows;
    const int64_t bk = g->transb ? (int64_t)qb->rows : (int64_t)qb->cols;
    const int64_t bn = g->transb ? (int64_t)qb->cols : (int64_t)qb->rows;
    if (am != g->m || ak != g->k || bk != g->k || bn != g->n)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: operands A [%zu x %zu] (trans %d) and B [%zu x %zu] (trans %d) do not "
                        "give m=%lld n=%lld k=%lld",
                        what, qa->rows, qa->cols, g->transa, qb->rows, qb->cols, g->transb,
                        (long long)g->m, (long long)g->n, (long long)g->k);

    unsigned char *base = scratch;
    float *consts = (float *)base; /* [0] alpha, [1] unit amax */
    const bool nv = qa->kind == TX_CUDA_Q_NVFP4 || qb->kind == TX_CUDA_Q_NVFP4;
    tx_gemm_desc d = *g;
    if (nv) {
        if (g->alpha_dev)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "%s: NVFP4 operands take a host alpha (the helper folds in the global "
                            "scales)", what);
        if (qa->kind == TX_CUDA_Q_NVFP4 && !qa->amax)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NVFP4 A needs its global amax", what);
        if (qb->kind == TX_CUDA_Q_NVFP4 && !qb->amax)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NVFP4 B needs its global amax", what);
        TX_TRY(tx_cuda_nvfp4_gemm_alpha(qa->kind == TX_CUDA_Q_NVFP4 ? qa->amax : NULL,
                                        qb->kind == TX_CUDA_Q_NVFP4 ? qb->amax : NULL, g->alpha,
                                        consts, consts + 1, stream));
        d.alpha_dev = consts;
    }
    void *op_a = base + l.op_a, *op_b = base + l.op_b;
    const teexec_dtype type = esz == 4 ? TEEXEC_DTYPE_FLOAT : TEEXEC_DTYPE_BFLOAT16;
    /* A with transa has k = cols (already K-contiguous); B without transb
     * likewise: the others are written transposed, and the GEMM is TN. */
    TX_TRY(tx_status_prefix(prepare(qa, !g->transa, consts + 1, op_a, type, stream),
                            "%s: operand A", what));
    TX_TRY(tx_status_prefix(prepare(qb, g->transb, consts + 1, op_b, type, stream),
                            "%s: operand B", what));

    d.a_type = d.b_type = type;
    d.transa = 1;
    d.transb = 0;
    d.lda = d.ldb = g->k;
    d.a_scale_mode = d.b_scale_mode = TX_GEMM_SCALE_NONE;
    d.a_scale_inv = d.b_scale_inv = NULL;
    d.d_scale = NULL;
    d.amax_d = NULL;
    d.fast_accum = 0;
    d.allow_tf32 = 0;
    return tx_status_prefix(tx_gemm_lt_run(h, &d, op_a, op_b, C, D, workspace, stream), "%s", what);
}
