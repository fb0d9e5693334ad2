/*
 * act_fn.cuh - f(x) and f'(x) of the plain activations (act_ext.h's
 * tx_cuda_actx_fn), written as the CPU reference (kernels/cpu/
 * te_activation.c) writes them in its float pass. One definition for every
 * kernel that evaluates them (act_ext.cu: the unfused ops; handoff_act.cu:
 * the FP8 hand-offs), so that the compiler contracts the same expressions
 * alike and fused and unfused paths store the same bits.
 *
 * Header-only device code; no state; thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_ACT_FN_CUH
#define TEEXEC_KERNELS_CUDA_ACT_FN_CUH

extern "C" {
#include "kernels/cuda/act_ext.h"
}

#include <math.h>

namespace txa {

__device__ __forceinline__ float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

/* f(x) and f'(x) of fn (p: QGELU's / ClampedSwiGLU's sigmoid slope, SiTU's β1; the
 * default case is the sigmoid, GLU's gate). With fn a compile-time
 * constant the switch folds away, and an unused f'(x) is not computed. */
__device__ __forceinline__ void fn_eval(int fn, float x, float p, float *f, float *df)
{
    switch (fn) {
    case TX_CUDA_ACTX_GELU_TANH: {
        float t = tanhf(0.79788456f * x * (1.0f + 0.044715f * x * x));
        *f = 0.5f * x * (1.0f + t);
        *df = 0.5f * x * ((1.0f - t * t) * (0.79788456f + 0.1070322243f * x * x)) +
              0.5f * (1.0f + t);
        return;
    }
    case TX_CUDA_ACTX_GELU_ERF: {
        float c = 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
        *f = x * c;
        *df = c + x * 0.39894228040143267794f * expf(-0.5f * x * x);
        return;
    }
    case TX_CUDA_ACTX_QGELU: {
        float s = sigm(p * x);
        *f = x * s;
        *df = p * x * s * (1.0f - s) + s;
        return;
    }
    case TX_CUDA_ACTX_RELU:
        *f = x > 0.0f ? x : 0.0f;
        *df = x > 0.0f ? 1.0f : 0.0f;
        return;
    case TX_CUDA_ACTX_SRELU:
        *f = x > 0.0f ? x * x : 0.0f;
        *df = x > 0.0f ? 2.0f * x : 0.0f;
        return;
    case TX_CUDA_ACTX_SILU: {
        float s = sigm(x);
        *f = x * s;
        *df = x * s * (1.0f - s) + s;
        return;
    }
    case TX_CUDA_ACTX_SITU: { /* p is β1 */
        float t = tanhf(x / p), s = sigm(x);
        *f = p * t * s;
        *df = (1.0f - t * t) * s + p * t * s * (1.0f - s);
        return;
    }
    default: { /* sigmoid, GLU's gate */
        float s = sigm(x);
        *f = s;
        *df = s * (1.0f - s);
        return;
    }
    }
}

} // namespace txa

#endif
