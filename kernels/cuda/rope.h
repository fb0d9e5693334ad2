/*
 * rope.h - the te.ops RotaryEmbedding on the GPU, forward and backward,
 * the formulas of kernels/cpu/te_rope.c: on the first r channels of each
 * head, with p(j) = j +- r/2 (halves) or j ^ 1 (interleaved) and sign
 * s(j) = -1 for the first of a pair,
 *     y[j]  = x[j] cos f[j] + s(j) x[p(j)] sin f[j]
 *     dx[j] = dy[j] cos f[j] - s(j) dy[p(j)] sin f[p(j)]
 * and channels r..d pass through. The angles come from freqs [>= s, r]
 * (FP32 on the device) or from base: f = pos * base^(-2i/r) with i =
 * j mod r/2 (halves) or j / 2 (interleaved).
 *
 * Numbers: the table of cos/sin is computed in double and rounded to
 * FP32 (the correctly rounded value the CPU's powf/cosf/sinf give in
 * nearly every case), the rotation in FP32 without FMA contraction (rope.cu
 * is compiled with -fmad=false), in the CPU's operation order: with equal
 * tables the outputs are bit-identical for FP32, and BF16/FP16 round once.
 *
 * x / y (dy / dx): [b, s, h, d] (bshd) or [s, b, h, d] (sbhd), FLOAT,
 * BFLOAT16 or FLOAT16, contiguous. Device pointers owned by the caller;
 * asynchronous on `stream` (cudaStream_t, NULL = default). Statuses owned
 * by the caller. Stateless: thread-safe (buffers in flight belong to their
 * stream).
 */
#ifndef TEEXEC_KERNELS_CUDA_ROPE_H
#define TEEXEC_KERNELS_CUDA_ROPE_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tx_cuda_rope_args {
    size_t b, s, h, d;
    size_t r;                  /* rotated width: even, 2 <= r <= d */
    int sbhd;                  /* 0: bshd, 1: sbhd */
    int interleaved;
    const float *freqs;        /* [s, r] angles (rows >= s; the first s used), or NULL */
    double base;               /* when freqs is NULL; > 0 */
    const void *in;  teexec_dtype in_dtype;    /* x (forward) or dy (backward) */
    void *out;       teexec_dtype out_dtype;   /* y or dx; must not alias in */
    float *table;              /* workspace: 2 * s * r floats (cos, then sin) */
} tx_cuda_rope_args;

teexec_status *tx_cuda_rope_forward(const tx_cuda_rope_args *a, void *stream);
teexec_status *tx_cuda_rope_backward(const tx_cuda_rope_args *a, void *stream);

#ifdef __cplusplus
}
#endif

#endif
