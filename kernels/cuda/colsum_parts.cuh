/*
 * colsum_parts.cuh - the second pass of a deterministic column sum: the
 * first pass wrote n_parts rows of FP32 partial sums (ws[p * cols + j]);
 * this kernel adds them per column in a fixed order - eight groups of
 * consecutive parts, each summed in order, then the eight group sums in
 * order - so the result never depends on scheduling, while 8 x 32 threads
 * per block keep enough loads in flight for a pass that is only a few MB.
 *
 * Launch: grid ((cols + 31) / 32, n_outputs), block (32, 8); output k
 * (blockIdx.y) reads ws + k * n_parts * cols and writes out[k] (dtype
 * out_dtype, rounded once). Header-only; used by norm.cu and act.cu.
 */
#ifndef TEEXEC_KERNELS_CUDA_COLSUM_PARTS_CUH
#define TEEXEC_KERNELS_CUDA_COLSUM_PARTS_CUH

#include "kernels/cuda/elem_io.cuh"

struct tx_colsum_outs {
    void *out[2];
};

static __global__ void __launch_bounds__(256)
tx_colsum_parts_final(const float *ws, size_t n_parts, size_t cols, tx_colsum_outs outs,
                      int out_dtype)
{
    __shared__ float grp[8][33];
    size_t j = (size_t)blockIdx.x * 32 + threadIdx.x;
    const float *base = ws + (size_t)blockIdx.y * n_parts * cols;
    size_t per = (n_parts + 7) / 8;
    size_t p0 = per * threadIdx.y, p1 = p0 + per < n_parts ? p0 + per : n_parts;
    float s = 0.0f;
    if (j < cols)
        for (size_t p = p0; p < p1; p++) s += base[p * cols + j];
    grp[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && j < cols) {
        float t = 0.0f;
#pragma unroll
        for (int g = 0; g < 8; g++) t += grp[g][threadIdx.x];
        void *out = outs.out[blockIdx.y];
        if (out) tx_st(out, j, out_dtype, t);
    }
}

#endif
