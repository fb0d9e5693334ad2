/* bench_die.h - the error exits every GPU bench program shares. A program
 * defines BENCH_NAME (its name, for messages) before including this; a
 * failed CUDA runtime call or a teexec status then prints
 * "BENCH_NAME: what: message" on stderr and exits 1. For the bench
 * programs only: library code returns statuses and never exits. */
#ifndef TEEXEC_BENCH_GPU_BENCH_DIE_H
#define TEEXEC_BENCH_GPU_BENCH_DIE_H

#include "teexec/teexec.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench_die.h"
#endif

static inline void die_cuda(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, BENCH_NAME ": %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static inline void die_status(teexec_status *st, const char *what)
{
    if (st) {
        fprintf(stderr, BENCH_NAME ": %s: %s\n", what, teexec_status_message(st));
        teexec_status_destroy(st);
        exit(1);
    }
}

#endif
