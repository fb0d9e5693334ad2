/*
 * std_cast.h - element type conversion on the GPU with ONNX Cast semantics,
 * the rules of kernels/cpu/convert.h applied element by element so the
 * bytes are the CPU's: every numeric dtype and BOOL, FLOAT8 (E4M3FN,
 * E4M3FNUZ, E5M2, E5M2FNUZ) with `saturate`, FLOAT8E8M0 with its round
 * mode, FLOAT4E2M1 and the packed 4-/2-bit integers (element 0 in the low
 * bits; a destination's padding bits written as zero). Narrow float targets
 * round once (through round-to-odd FP64/FP32 intermediates, as the CPU);
 * float -> integer truncates, saturates, NaN -> 0; integer -> integer
 * wraps; -> bool is nonzero.
 *
 * Device pointers owned by the caller (x and y must not overlap);
 * asynchronous on `stream`. Statuses owned by the caller. Stateless:
 * thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_CAST_H
#define TEEXEC_KERNELS_CUDA_STD_CAST_H

#include "teexec/teexec.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether the GPU converts from / to dt (convert.h's set). */
int tx_cuda_cast_dtype_ok(teexec_dtype dt);

/* n elements, saturate = 1 and E8M0 round mode "up" (Cast's defaults). */
teexec_status *tx_cuda_cast(const void *x, teexec_dtype xt, void *y, teexec_dtype yt, size_t n,
                            void *stream);
/* e8m0_round: 0 up, 1 down, 2 nearest (base/numfmt.h tx_e8m0_round). */
teexec_status *tx_cuda_cast_ex(const void *x, teexec_dtype xt, void *y, teexec_dtype yt,
                               size_t n, int saturate, int e8m0_round, void *stream);

#ifdef __cplusplus
}
#endif

#endif
