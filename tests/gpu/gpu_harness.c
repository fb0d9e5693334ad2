/* gpu_harness.c - see gpu_harness.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/gpu/gpu_harness.h"

#include "base/half.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char device_name[512] = "unknown";

void tg_require_gpu(const char *program)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        fprintf(stderr, "%s: SKIP: no CUDA device (%s)\n", program,
                e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
        exit(77);
    }
    struct cudaDeviceProp prop;
    if (cudaSetDevice(0) != cudaSuccess || cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        fprintf(stderr, "%s: SKIP: device 0 unusable\n", program);
        exit(77);
    }
    snprintf(device_name, sizeof device_name, "%.256s (sm_%d%d)", prop.name, prop.major, prop.minor);
    fprintf(stderr, "%s: running on %s\n", program, device_name);
}

void tg_record(const char *test, int pass, const char *detail)
{
    const char *dir = getenv("TEEXEC_GPU_RESULTS_DIR");
    fprintf(stderr, "[%s] %s %s\n", pass ? "PASS" : "FAIL", test, detail ? detail : "");
    if (!dir || !*dir) return;
    char path[1024];
    snprintf(path, sizeof path, "%s/gpu_results.txt", dir);
    FILE *f = fopen(path, "a");
    if (!f) return;
    char when[64];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(f, "%s\t%s\t%s\t%s\t%s\n", when, device_name, test, pass ? "PASS" : "FAIL",
            detail ? detail : "");
    fclose(f);
}

/* ---- deterministic generator (splitmix64) ------------------------------- */
static uint64_t sm64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t hash3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t s = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xD6E8FEB86659FD93ull ^ c;
    return sm64(&s);
}

static float special_value(uint64_t r, teexec_dtype dt)
{
    const float maxv = dt == TEEXEC_DTYPE_BFLOAT16 ? tx_bits_f32(0x7f7f0000u) : tx_bits_f32(0x7f7fffffu);
    float sign = (r & 1) ? -1.0f : 1.0f;
    int k = (int)((r >> 8) % 21) - 10;
    switch ((r >> 4) % 8) {
    case 0: return tx_bits_f32(((r & 1) ? 0xffc00000u : 0x7fc00000u) | (uint32_t)((r >> 40) & 0x3fffffu));
    case 1: return sign * INFINITY;
    case 2: return sign * maxv;
    case 3: return sign * ldexpf(448.0f * (1.0f + 1.0f / 128.0f), k); /* just over 448*2^k */
    case 4: return sign * ldexpf(57344.0f * (1.0f + 1.0f / 64.0f), k);
    case 5: return sign * tx_bits_f32((uint32_t)((r >> 12) & 0x7fffffu) | 1u); /* fp32 subnormal */
    case 6: return sign * tx_bits_f32((uint32_t)((r >> 12) & 0x7f0000u) | 0x10000u); /* bf16 subnormal */
    default: return sign * ldexpf(1.0f, k); /* a power of two */
    }
}

void tg_fill(void *dst, teexec_dtype dt, size_t rows, size_t cols, uint64_t seed, int flags)
{
    uint64_t s = seed * 0x2545F4914F6CDD1Dull + 1;
    for (size_t m = 0; m < rows; m++) {
        for (size_t k = 0; k < cols; k++) {
            /* per-block binade and flavour: 8 rows x 32 columns share them */
            uint64_t bh = hash3(seed, m / 8, k / 32);
            int lo = (flags & TG_TINY) ? -140 : -24;
            int span = (flags & TG_TINY) ? 40 : 48;
            int e = lo + (int)(bh % (uint64_t)span);
            unsigned flavour = (unsigned)((bh >> 20) % 64);
            uint64_t r = sm64(&s);
            float v;
            if (flavour == 0) {
                v = 0.0f; /* all-zero block */
            } else {
                float mant = 1.0f + (float)(r >> 41) * (1.0f / 8388608.0f);
                float sign = (r & 1) ? -1.0f : 1.0f;
                v = sign * ldexpf(mant, e - (int)((r >> 33) % 4));
                if (flavour == 1) {
                    /* block amax exactly 2^e: one element on it, the others below */
                    v = sign * ldexpf(mant * 0.5f, e);
                    if ((m % 8) == 0 && (k % 32) == 5) v = ldexpf(1.0f, e);
                }
                unsigned c = (unsigned)((r >> 24) % 1000);
                if (c < 20) v = 0.0f;
                else if (c < 22) v = -0.0f;
                else if ((flags & TG_SPECIALS) && c < 32) v = special_value(sm64(&s), dt);
            }
            if (dt == TEEXEC_DTYPE_BFLOAT16) ((uint16_t *)dst)[m * cols + k] = tx_f32_to_bf16(v);
            else ((float *)dst)[m * cols + k] = v;
        }
    }
}

void tg_fill_all_bf16(uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = (uint16_t)(i & 0xffffu);
}

static void check_cuda(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) fail_msg("CUDA %s: %s", what, cudaGetErrorString(e));
}

void *tg_dev_alloc(size_t bytes)
{
    void *p = NULL;
    check_cuda(cudaMalloc(&p, bytes ? bytes : 16), "cudaMalloc");
    check_cuda(cudaMemset(p, 0xA5, bytes ? bytes : 16), "cudaMemset");
    /* cudaMemset may return before it ran, and a test's non-blocking
     * stream does not wait for the legacy stream: without this the fill
     * can land after a kernel wrote the buffer (test_gpu_te_linear's
     * graph_none_bf16 failed that way, intermittently) */
    check_cuda(cudaDeviceSynchronize(), "cudaMemset");
    return p;
}

void *tg_dev_upload(const void *host, size_t bytes)
{
    void *p = tg_dev_alloc(bytes);
    if (bytes) check_cuda(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice), "upload");
    return p;
}

void tg_download(void *host, const void *dev, size_t bytes)
{
    if (bytes) check_cuda(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), "download");
}

void tg_upload_to(void *dev, const void *host, size_t bytes)
{
    if (bytes) check_cuda(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), "upload");
}

void tg_dev_free(void *p) { cudaFree(p); }

void tg_sync(const char *what) { check_cuda(cudaDeviceSynchronize(), what); }

size_t tg_cmp_bytes(const char *what, const uint8_t *cpu, const uint8_t *gpu, size_t n)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (cpu[i] != gpu[i]) {
            if (!bad) first = i;
            bad++;
        }
    if (bad)
        fprintf(stderr, "  %s: %zu of %zu bytes differ; first at %zu: cpu 0x%02x gpu 0x%02x\n", what,
                bad, n, first, cpu[first], gpu[first]);
    return bad;
}

size_t tg_cmp_floats(const char *what, const float *cpu, const float *gpu, size_t n)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(cpu[i]) && isnan(gpu[i])) continue;
        if (tx_f32_bits(cpu[i]) != tx_f32_bits(gpu[i])) {
            if (!bad) first = i;
            bad++;
        }
    }
    if (bad)
        fprintf(stderr, "  %s: %zu of %zu floats differ; first at %zu: cpu %a gpu %a\n", what, bad, n,
                first, (double)cpu[first], (double)gpu[first]);
    return bad;
}
