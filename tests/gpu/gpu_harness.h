/*
 * gpu_harness.h - shared helpers of the GPU test suite (suite 'gpu').
 *
 * Device check with skip (exit 77 when no GPU), one-line result records
 * under $TEEXEC_GPU_RESULTS_DIR, deterministic test inputs with edge
 * values, device buffers, byte comparisons. Test code: exits and prints.
 * Not thread-safe (one test thread).
 */
#ifndef TEEXEC_TESTS_GPU_HARNESS_H
#define TEEXEC_TESTS_GPU_HARNESS_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

/* Exits with 77 (meson: SKIP) and the reason on stderr when no CUDA device
 * is usable; otherwise selects device 0 and remembers its name. */
void tg_require_gpu(const char *program);

/* Appends "date<TAB>device<TAB>test<TAB>PASS|FAIL<TAB>detail" to
 * $TEEXEC_GPU_RESULTS_DIR/gpu_results.txt when the variable is set. */
void tg_record(const char *test, int pass, const char *detail);

/* Input generation. Blocks of 32 columns x 8 rows share a random binade
 * (so block scales vary widely), ~2% zeros, whole zero blocks, blocks whose
 * amax is an exact power of two, bf16 ties come naturally; with specials:
 * NaN, +-Inf, +-max of the dtype, values just over 448 * 2^k and 57344 *
 * 2^k, subnormals. dtype BFLOAT16 (uint16 bits) or FLOAT. */
enum { TG_PLAIN = 0, TG_SPECIALS = 1, TG_TINY = 2 };
void tg_fill(void *dst, teexec_dtype dt, size_t rows, size_t cols, uint64_t seed, int flags);

/* Every bf16 bit pattern, in order, repeated to fill n elements. */
void tg_fill_all_bf16(uint16_t *dst, size_t n);

/* Device helpers: abort the test (fail) on CUDA errors. */
void *tg_dev_alloc(size_t bytes);          /* filled with 0xA5 (poison) */
void *tg_dev_upload(const void *host, size_t bytes);
void tg_download(void *host, const void *dev, size_t bytes);
void tg_upload_to(void *dev, const void *host, size_t bytes);
void tg_dev_free(void *p);
void tg_sync(const char *what);

/* Number of differing bytes; the first difference goes to stderr. */
size_t tg_cmp_bytes(const char *what, const uint8_t *cpu, const uint8_t *gpu, size_t n);
/* Floats compared by bits, any NaN equal to any NaN. */
size_t tg_cmp_floats(const char *what, const float *cpu, const float *gpu, size_t n);

/* Fails the test (cmocka fail_msg) with the status message when st != NULL. */
#define TG_OK(expr)                                                                  \
    do {                                                                             \
        teexec_status *tg_st_ = (expr);                                              \
        if (tg_st_) {                                                                \
            fail_msg("%s: %s", #expr, teexec_status_message(tg_st_));                \
        }                                                                            \
    } while (0)

#endif
