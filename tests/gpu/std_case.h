/*
 * std_case.h - the case runner of the standard-op GPU tests (test_gpu_std*.c):
 * one ONNX node built in memory from a table row, run through the CPU
 * backend's kernel (exec/cpu_ops.h) and the CUDA standard node
 * (exec/cuda/std_cuda.h) on the same inputs, outputs compared; where the
 * op has a CPU backward rule (exec/train_internal.h, FP64) and the GPU node
 * says its inputs carry grads, the backward too, on random output grads.
 * Output shapes come from shape inference (import/shape_infer.h), as the
 * executor gets them. Device outputs and grads start poisoned (0xA5 bytes),
 * so an element a kernel forgets to write fails.
 *
 * Comparison: integer, bool and EXACT outputs bit for bit (NaN equal to
 * NaN); floats within DESIGN.md's tolerances plus the case's absolute term
 * (DOUBLE: 1e-12 relative). TWICE: backward run again, bits equal.
 *
 * With TEEXEC_STD_CASE_PREPARE_ONLY=1 (the unit suite, no GPU) every case is
 * built, run on the CPU and prepared for the GPU, nothing launched: a case
 * the CPU refuses, or a node the GPU refuses at prepare, fails there.
 *
 * Ops named TRT_* are in the `trt` domain, the rest in the standard one.
 *
 * A case's float inputs (dt F) take the pass's dtype: each case runs in
 * FLOAT, BFLOAT16 and FLOAT16, unless it is ONCE (fixed dtypes; F means
 * FLOAT). Test code: cmocka, exits and prints; not thread-safe.
 */
#ifndef TEEXEC_TESTS_GPU_STD_CASE_H
#define TEEXEC_TESTS_GPU_STD_CASE_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#define SC_F (-1) /* the pass's float dtype */
#define SC_MAXIO 6

/* input kinds */
enum {
    IN_RAND,   /* uniform [-2, 2) in the dtype (integers: [-1000, 1000]) */
    IN_POS,    /* uniform [0.5, 2) */
    IN_INTS,   /* vals, known before running (host) */
    IN_IDX,    /* vals, on the device only */
    IN_BOOL,   /* random 0 / 1 */
    IN_IRAND,  /* integers in [-1000, 1000] (as floats for float dtypes) */
    IN_IDXR,   /* random indices in [-vals[0], vals[0]) */
    IN_SMALL,  /* integers in [-4, 4] (as floats for float dtypes): ties, exact sums */
    IN_SPECIAL,/* floats with NaN, +-Inf, -0, halves (x.5), huge and tiny values */
    IN_ABSENT
};
/* flags */
enum { EXACT = 1, NO_BWD = 2, TWICE = 4, ONCE = 8, FWD_ONLY_CPU_ERR = 16 };
/* attribute types */
enum { A_I = 0, A_IS, A_F, A_S, A_T };

typedef struct tattr {
    const char *name;
    int type;
    int64_t i;
    int64_t v[8];
    int n;
    float f;
    const char *s;
    int t_dtype; /* A_T: a one-element tensor of this dtype holding f (or i) */
} tattr;

typedef struct tin {
    int dt; /* SC_F or a dtype */
    int rank;
    int64_t dims[6];
    int kind;
    int64_t vals[12];
    int n_vals;
    double fvals[12]; /* IN_INTS / IN_IDX for float dtypes when n_fvals */
    int n_fvals;
} tin;

typedef struct tcase {
    const char *name;
    const char *op;
    int64_t opset;
    int n_attr;
    tattr attr[4];
    int n_in;
    tin in[SC_MAXIO];
    int n_out;
    int flags;
    double atol32, atol16;
} tcase;

/* Runs every case (three float passes each, or once), plus `extra`
 * (may be NULL) first. Returns the cmocka result. */
int sc_main(const char *program, const tcase *cases, size_t n_cases,
            void (*extra)(void **), const char *extra_name);

/* Table helpers. */
#define A_INT(nm, val) {.name = nm, .type = A_I, .i = val}
#define A_FLT(nm, val) {.name = nm, .type = A_F, .f = val}
#define A_STR(nm, val) {.name = nm, .type = A_S, .s = val}
#define A_INTS(nm, ...) {.name = nm, .type = A_IS, .v = {__VA_ARGS__}, \
                         .n = sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)}
#define A_TEN(nm, dt, fv) {.name = nm, .type = A_T, .t_dtype = dt, .f = fv, .i = (int64_t)(fv)}
#define T(r, ...) {.dt = SC_F, .rank = r, .dims = {__VA_ARGS__}, .kind = IN_RAND}
#define TP(r, ...) {.dt = SC_F, .rank = r, .dims = {__VA_ARGS__}, .kind = IN_POS}
#define TK(k, r, ...) {.dt = SC_F, .rank = r, .dims = {__VA_ARGS__}, .kind = k}
#define TD(d, k, r, ...) {.dt = d, .rank = r, .dims = {__VA_ARGS__}, .kind = k}
#define INTS(...) {.dt = TEEXEC_DTYPE_INT64, .rank = 1, \
                   .dims = {sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)}, \
                   .kind = IN_INTS, .vals = {__VA_ARGS__}, \
                   .n_vals = sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)}
/* A scalar (rank 0) of dtype d: value known before running, or on the device only. */
#define SCALAR(d, v) {.dt = d, .rank = 0, .kind = IN_INTS, .vals = {v}, .n_vals = 1, \
                      .fvals = {v}, .n_fvals = 1}
#define DSCALAR(d, v) {.dt = d, .rank = 0, .kind = IN_IDX, .vals = {v}, .n_vals = 1, \
                       .fvals = {v}, .n_fvals = 1}
#define IDX(d, r, dim0, dim1, ...) {.dt = d, .rank = r, .dims = {dim0, dim1}, .kind = IN_IDX, \
                   .vals = {__VA_ARGS__}, .n_vals = sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)}
#define ABSENT {.kind = IN_ABSENT}

#endif
