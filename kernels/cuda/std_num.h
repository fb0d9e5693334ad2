/*
 * std_num.h - the compute domains of the standard ONNX ops on the GPU, as
 * the CPU kernels define them (kernels/cpu/kcommon.h): FLOAT, FLOAT16 and
 * BFLOAT16 compute in FP32, DOUBLE in FP64, signed integers in int64,
 * unsigned integers in uint64 (both wrapping), BOOL as bytes 0/1. The host
 * side (exec/cuda/std_cuda*.c) picks a domain from a dtype with
 * tx_std_dom_of and hands it to the kernels of std_unary.h, std_binary.h,
 * std_reduce.h, ...; kernels/cuda/std_num.cuh holds the device-side loads
 * and stores that follow kcommon.c's conversion rules.
 *
 * Header-only, no state; usable from C and CUDA C++.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_NUM_H
#define TEEXEC_KERNELS_CUDA_STD_NUM_H

#include "teexec/teexec.h"

#include <stdbool.h>

typedef enum tx_std_dom {
    TX_DOM_F32 = 0, /* FLOAT, FLOAT16, BFLOAT16 */
    TX_DOM_F64 = 1, /* DOUBLE */
    TX_DOM_I64 = 2, /* INT8 .. INT64 */
    TX_DOM_U64 = 3, /* UINT8 .. UINT64 */
    TX_DOM_BOOL = 4,
    TX_DOM_NONE = 5 /* everything else: only moved, never computed */
} tx_std_dom;

static inline tx_std_dom tx_std_dom_of(teexec_dtype dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT:
    case TEEXEC_DTYPE_FLOAT16:
    case TEEXEC_DTYPE_BFLOAT16: return TX_DOM_F32;
    case TEEXEC_DTYPE_DOUBLE: return TX_DOM_F64;
    case TEEXEC_DTYPE_INT8:
    case TEEXEC_DTYPE_INT16:
    case TEEXEC_DTYPE_INT32:
    case TEEXEC_DTYPE_INT64: return TX_DOM_I64;
    case TEEXEC_DTYPE_UINT8:
    case TEEXEC_DTYPE_UINT16:
    case TEEXEC_DTYPE_UINT32:
    case TEEXEC_DTYPE_UINT64: return TX_DOM_U64;
    case TEEXEC_DTYPE_BOOL: return TX_DOM_BOOL;
    default: return TX_DOM_NONE;
    }
}

static inline bool tx_std_dom_numeric(tx_std_dom d) { return d <= TX_DOM_U64; }
static inline bool tx_std_dom_float(tx_std_dom d) { return d == TX_DOM_F32 || d == TX_DOM_F64; }

/* The iteration-space rank every std_* kernel takes (as std_ops.h). */
#define TX_STD_RANK 8

#endif
