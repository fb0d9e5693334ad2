/* quant_block.cu - FP8 block-scaling quantizer (1x128 / 128x128). See
 * quant_block.h; the tile kernel is shared with quant_fp8.cu
 * (fp8_tile.cuh). */
#include "kernels/cuda/quant_block.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/fp8_tile.cuh"

extern "C" teexec_status *tx_cuda_block_quantize(const tx_cuda_block_args *a, void *stream)
{
    static const char *const what = "tx_cuda_block_quantize";
    if (!a || !a->x) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: no input", what);
    if (a->x_dtype != TEEXEC_DTYPE_BFLOAT16 && a->x_dtype != TEEXEC_DTYPE_FLOAT)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: input dtype %d is not bf16 or fp32", what,
                        (int)a->x_dtype);
    if (a->fmt != TEEXEC_DTYPE_FLOAT8E4M3FN && a->fmt != TEEXEC_DTYPE_FLOAT8E5M2)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: format %d is not E4M3FN or E5M2", what,
                        (int)a->fmt);
    if (a->cols % 8 || (a->col_data && a->rows % 16))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: shape [%zu, %zu] needs cols %% 8 == 0 (and rows %% 16 == 0 for the "
                        "transposed copy)", what, a->rows, a->cols);
    if (((uintptr_t)a->x | (uintptr_t)a->row_data | (uintptr_t)a->col_data) % 16)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: buffers must be 16-byte aligned", what);
    if ((a->row_data && !a->row_scale_inv) || (a->col_data && !a->col_scale_inv))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: data without a scale buffer", what);
    if (a->rows == 0 || a->cols == 0 || (!a->row_data && !a->col_data)) return NULL;

    cudaStream_t s = (cudaStream_t)stream;
    if (a->row_data)
        TX_CUDA_TRY(cudaMemsetAsync(a->row_scale_inv, 0, a->row_scale_count * sizeof(float), s), what);
    if (a->col_data)
        TX_CUDA_TRY(cudaMemsetAsync(a->col_scale_inv, 0, a->col_scale_count * sizeof(float), s), what);

    txq::Fp8TileParams p = {};
    p.x = a->x;
    p.rows = a->rows;
    p.cols = a->cols;
    p.ncb = (a->cols + txq::FT_C - 1) / txq::FT_C;
    p.row_data = a->row_data;
    p.col_data = a->col_data;
    p.row_scale_inv = a->row_scale_inv;
    p.col_scale_inv = a->col_scale_inv;
    p.row_ld = a->row_ld;
    p.col_ld = a->col_ld;
    p.eps = a->amax_eps;
    p.inf_value = a->x_dtype == TEEXEC_DTYPE_BFLOAT16 ? 3.38953139e38f : FLT_MAX; /* bf16 max = 0x7f7f0000 */
    p.pow2 = a->pow2;
    const size_t blocks = (a->rows + txq::FT_R - 1) / txq::FT_R * p.ncb;
    if (blocks > 0x7fffffffu)
        return tx_error(TEEXEC_ERR_LIMIT, "%s: tensor too large for one launch", what);
    const bool bf16 = a->x_dtype == TEEXEC_DTYPE_BFLOAT16;
    p.e5m2 = a->fmt == TEEXEC_DTYPE_FLOAT8E5M2;
    if (a->two_d)
        TX_CUDA_TRY(txq::fp8_tile_dispatch<txq::FP8_BLOCK_2D>(p, bf16, (unsigned)blocks, s),
                    "fp8_tile_kernel (block 128x128)");
    else
        TX_CUDA_TRY(txq::fp8_tile_dispatch<txq::FP8_BLOCK_1D>(p, bf16, (unsigned)blocks, s),
                    "fp8_tile_kernel (block 1x128)");
    return NULL;
}
