/* gemm_select.c - GEMM cache keys, the key -> slot table and the autotuning
 * rules (see gemm_select.h). Host only. */
#include "kernels/cuda/gemm_select.h"

#include "base/checked.h"
#include "base/tensor.h"
#include "base/status.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- description helpers ------------------------------------------------- */

int64_t tx_gemm_rows_a(const tx_gemm_desc *d) { return d->transa ? d->k : d->m; }
int64_t tx_gemm_cols_a(const tx_gemm_desc *d) { return d->transa ? d->m : d->k; }
int64_t tx_gemm_rows_b(const tx_gemm_desc *d) { return d->transb ? d->n : d->k; }
int64_t tx_gemm_cols_b(const tx_gemm_desc *d) { return d->transb ? d->k : d->n; }
int64_t tx_gemm_ld_or(int64_t ld, int64_t rows) { return ld ? ld : rows; }
int64_t tx_gemm_aux_ld(const tx_gemm_desc *d) { return d->aux_ld ? d->aux_ld : (d->m + 7) / 8 * 8; }

static bool is_fp8(teexec_dtype t)
{
    return t == TEEXEC_DTYPE_FLOAT8E4M3FN || t == TEEXEC_DTYPE_FLOAT8E5M2;
}

static bool is_16(teexec_dtype t)
{
    return t == TEEXEC_DTYPE_FLOAT16 || t == TEEXEC_DTYPE_BFLOAT16;
}

teexec_dtype tx_gemm_c_type(const tx_gemm_desc *d)
{
    if (d->c_type) return d->c_type;
    return is_fp8(d->d_type) ? TEEXEC_DTYPE_BFLOAT16 : d->d_type;
}

teexec_dtype tx_gemm_bias_type(const tx_gemm_desc *d)
{
    if (d->bias_type) return d->bias_type;
    const bool low = is_fp8(d->a_type) || d->a_type == TEEXEC_DTYPE_FLOAT4E2M1;
    if (low && !is_16(d->d_type)) return TEEXEC_DTYPE_BFLOAT16;
    return d->d_type;
}

static bool has_aux(const tx_gemm_desc *d)
{
    return d->epilogue == TX_GEMM_EPI_GELU_AUX_BIAS || d->epilogue == TX_GEMM_EPI_DGELU_BGRAD;
}

/* ---- key ------------------------------------------------------------------- */

int32_t tx_gemm_align_of(const void *p)
{
    if (!p) return 256;
    const uintptr_t a = (uintptr_t)p;
    int32_t al = 256;
    while (al > 1 && a % (uintptr_t)al) al /= 2;
    return al;
}

void tx_gemm_key_make(const tx_gemm_desc *d, const void *A, const void *B, const void *C,
                      const void *D, tx_gemm_key *k)
{
    memset(k, 0, sizeof *k);
    k->m = d->m;
    k->n = d->n;
    k->k = d->k;
    k->lda = tx_gemm_ld_or(d->lda, tx_gemm_rows_a(d));
    k->ldb = tx_gemm_ld_or(d->ldb, tx_gemm_rows_b(d));
    k->ldc = tx_gemm_ld_or(d->ldc, d->m);
    k->ldd = tx_gemm_ld_or(d->ldd, d->m);
    k->transa = d->transa != 0;
    k->transb = d->transb != 0;
    k->a_type = d->a_type;
    k->b_type = d->b_type;
    k->c_type = tx_gemm_c_type(d);
    k->d_type = d->d_type;
    k->epilogue = d->epilogue;
    if (d->epilogue != TX_GEMM_EPI_NONE) k->bias_type = tx_gemm_bias_type(d);
    if (has_aux(d)) k->aux_ld = tx_gemm_aux_ld(d);
    k->a_scale_mode = d->a_scale_mode;
    k->b_scale_mode = d->b_scale_mode;
    k->fast_accum = d->fast_accum != 0;
    k->tf32 = d->allow_tf32 != 0;
    k->device_alpha = d->alpha_dev != NULL;
    k->beta_nonzero = d->beta != 0.0f;
    k->has_d_scale = d->d_scale != NULL;
    k->has_amax_d = d->amax_d != NULL;
    k->align_a = tx_gemm_align_of(A);
    k->align_b = tx_gemm_align_of(B);
    k->align_c = tx_gemm_align_of(C);
    k->align_d = tx_gemm_align_of(D);
    k->align_bias = d->epilogue != TX_GEMM_EPI_NONE ? tx_gemm_align_of(d->bias) : 0;
    k->align_aux = k->aux_ld ? tx_gemm_align_of(d->aux) : 0;
    if (d->batch_count > 1) {
        /* every matrix of the batch must have the alignment promised */
        k->batch_count = d->batch_count;
        k->stride_a = d->stride_a;
        k->stride_b = d->stride_b;
        k->stride_c = d->stride_c;
        k->stride_d = d->stride_d;
        const int64_t sa = d->stride_a * (int64_t)tx_dtype_elem_size(d->a_type),
                      sb = d->stride_b * (int64_t)tx_dtype_elem_size(d->b_type),
                      sc = d->stride_c * (int64_t)tx_dtype_elem_size(tx_gemm_c_type(d)),
                      sd = d->stride_d * (int64_t)tx_dtype_elem_size(d->d_type);
        int32_t a = tx_gemm_align_of((const void *)(uintptr_t)sa),
                b = tx_gemm_align_of((const void *)(uintptr_t)sb),
                c = tx_gemm_align_of((const void *)(uintptr_t)sc),
                dd = tx_gemm_align_of((const void *)(uintptr_t)sd);
        if (a < k->align_a) k->align_a = a;
        if (b < k->align_b) k->align_b = b;
        if (c < k->align_c) k->align_c = c;
        if (dd < k->align_d) k->align_d = dd;
    }
}

uint64_t tx_gemm_key_hash(const tx_gemm_key *k)
{
    /* FNV-1a over the bytes: keys are zero-filled, so padding is stable */
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof *k; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

bool tx_gemm_key_equal(const tx_gemm_key *a, const tx_gemm_key *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/* ---- cache ------------------------------------------------------------------ */

typedef struct cache_slot {
    bool used;
    uint32_t value;
    uint64_t hash;
    tx_gemm_key key;
} cache_slot;

struct tx_gemm_cache {
    cache_slot *tab;
    size_t cap, count; /* cap: a power of two; count <= cap / 2 */
};

teexec_status *tx_gemm_cache_create(tx_gemm_cache **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_gemm_cache_create: NULL out");
    *out = NULL;
    tx_gemm_cache *c = calloc(1, sizeof *c);
    if (!c) return tx_oom();
    c->cap = 64;
    c->tab = calloc(c->cap, sizeof *c->tab);
    if (!c->tab) {
        free(c);
        return tx_oom();
    }
    *out = c;
    return NULL;
}

void tx_gemm_cache_destroy(tx_gemm_cache *c)
{
    if (!c) return;
    free(c->tab);
    free(c);
}

/* The slot holding *k, or the free slot where it would go: the load stays
 * under one half, so a free slot is always met. */
static cache_slot *probe(cache_slot *tab, size_t cap, const tx_gemm_key *k, uint64_t h)
{
    for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1)) {
        cache_slot *s = &tab[i];
        if (!s->used) return s;
        if (s->hash == h && tx_gemm_key_equal(&s->key, k)) return s;
    }
}

int64_t tx_gemm_cache_find(const tx_gemm_cache *c, const tx_gemm_key *k)
{
    if (!c || !k) return -1;
    const cache_slot *s = probe(c->tab, c->cap, k, tx_gemm_key_hash(k));
    return s->used ? (int64_t)s->value : -1;
}

static teexec_status *grow(tx_gemm_cache *c)
{
    size_t ncap;
    if (!tx_mul_size(c->cap, 2, &ncap) || ncap > SIZE_MAX / sizeof(cache_slot)) return tx_oom();
    cache_slot *nt = calloc(ncap, sizeof *nt);
    if (!nt) return tx_oom();
    for (size_t i = 0; i < c->cap; i++)
        if (c->tab[i].used) *probe(nt, ncap, &c->tab[i].key, c->tab[i].hash) = c->tab[i];
    free(c->tab);
    c->tab = nt;
    c->cap = ncap;
    return NULL;
}

teexec_status *tx_gemm_cache_insert(tx_gemm_cache *c, const tx_gemm_key *k, uint32_t slot)
{
    if (!c || !k) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_gemm_cache_insert: NULL argument");
    const uint64_t h = tx_gemm_key_hash(k);
    if (probe(c->tab, c->cap, k, h)->used)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_gemm_cache_insert: the key is already cached");
    if ((c->count + 1) * 2 > c->cap) TX_TRY(grow(c));
    cache_slot *s = probe(c->tab, c->cap, k, h);
    s->used = true;
    s->value = slot;
    s->hash = h;
    s->key = *k;
    c->count++;
    return NULL;
}

size_t tx_gemm_cache_count(const tx_gemm_cache *c) { return c ? c->count : 0; }

/* ---- autotuning ---------------------------------------------------------------- */

tx_gemm_tune_config tx_gemm_tune_off(void)
{
    tx_gemm_tune_config c = {
        .candidates = 1, .target_ms = 2.0, .min_reps = 3, .max_reps = 200, .rounds = 1};
    return c;
}

tx_gemm_tune_config tx_gemm_tune_from_env(const char *value, bool deterministic)
{
    tx_gemm_tune_config c = tx_gemm_tune_off();
    if (deterministic) return c;
    c.candidates = TX_GEMM_TUNE_DEFAULT_CANDIDATES;
    c.rounds = TX_GEMM_TUNE_DEFAULT_ROUNDS;
    if (!value || !*value) return c;
    if (!strcmp(value, "0") || !strcasecmp(value, "off") || !strcasecmp(value, "false") ||
        !strcasecmp(value, "no")) {
        c.candidates = 1;
        return c;
    }
    /* "N" or "NxR" (R passes); anything else keeps the defaults */
    char *end = NULL;
    errno = 0;
    const long n = strtol(value, &end, 10);
    long r = c.rounds;
    bool ok = errno == 0 && end != value && n >= 2;
    if (ok && (*end == 'x' || *end == 'X')) {
        const char *rs = end + 1;
        errno = 0;
        r = strtol(rs, &end, 10);
        ok = errno == 0 && end != rs && r >= 1;
    }
    if (ok && *end == '\0') {
        c.candidates = n > TX_GEMM_TUNE_MAX_CANDIDATES ? TX_GEMM_TUNE_MAX_CANDIDATES : (int)n;
        c.rounds = r > TX_GEMM_TUNE_MAX_ROUNDS ? TX_GEMM_TUNE_MAX_ROUNDS : (int)r;
    }
    return c;
}

int tx_gemm_tune_candidates(const tx_gemm_tune_config *c, int64_t m, int64_t n, int64_t k)
{
    if (!tx_gemm_tune_enabled(c)) return 1;
    int want = c->candidates > TX_GEMM_TUNE_MAX_CANDIDATES ? TX_GEMM_TUNE_MAX_CANDIDATES : c->candidates;
    /* double: the product of three int64 dims may not fit an integer */
    const double macs = (double)m * (double)n * (double)k;
    if (macs <= TX_GEMM_TUNE_SMALL_MACS)
        want = want > TX_GEMM_TUNE_MAX_CANDIDATES / 4 ? TX_GEMM_TUNE_MAX_CANDIDATES : want * 4;
    return want;
}

int tx_gemm_tune_reps(const tx_gemm_tune_config *c, double first_ms)
{
    const int lo = c->min_reps > 0 ? c->min_reps : 1;
    const int hi = c->max_reps >= lo ? c->max_reps : lo;
    if (!(first_ms > 0.0) || !(c->target_ms > 0.0)) return lo;
    const double r = ceil(c->target_ms / first_ms);
    if (!(r < (double)hi)) return hi;
    return r < (double)lo ? lo : (int)r;
}

int tx_gemm_tune_pick(const double *ms, size_t n)
{
    int best = -1;
    for (size_t i = 0; i < n; i++) {
        if (!(ms[i] >= 0.0)) continue; /* failed, or NaN */
        if (best < 0 || ms[i] < ms[best]) best = (int)i;
    }
    if (best > 0 && ms[0] >= 0.0 && !(ms[best] < ms[0] * (1.0 - TX_GEMM_TUNE_MARGIN))) best = 0;
    return best;
}

/* ---- repeatability ------------------------------------------------------------- */

typedef struct range {
    uintptr_t lo, hi; /* [lo, hi) */
} range;

/* Bytes of `count` elements of dtype t (FP4: two per byte). */
static bool bytes_of(teexec_dtype t, uint64_t count, uint64_t *out)
{
    switch (t) {
    case TEEXEC_DTYPE_FLOAT4E2M1: *out = count / 2 + count % 2; return true;
    case TEEXEC_DTYPE_FLOAT8E4M3FN:
    case TEEXEC_DTYPE_FLOAT8E5M2: *out = count; return true;
    case TEEXEC_DTYPE_FLOAT16:
    case TEEXEC_DTYPE_BFLOAT16: return tx_mul_u64(count, 2, out);
    default: return tx_mul_u64(count, 4, out);
    }
}

/* The bytes a column-major rows x cols matrix with leading dim ld spans:
 * (cols - 1) * ld + rows elements. */
static bool matrix_range(const void *p, teexec_dtype t, int64_t rows, int64_t cols, int64_t ld,
                         range *r)
{
    r->lo = (uintptr_t)p;
    r->hi = r->lo;
    if (!p || rows <= 0 || cols <= 0) return true;
    if (ld < rows) return false;
    uint64_t elems, bytes;
    if (!tx_mul_u64((uint64_t)(cols - 1), (uint64_t)ld, &elems) ||
        !tx_add_u64(elems, (uint64_t)rows, &elems) || !bytes_of(t, elems, &bytes))
        return false;
    if (bytes > UINTPTR_MAX - r->lo) return false;
    r->hi = r->lo + (uintptr_t)bytes;
    return true;
}

static bool overlap(const range *a, const range *b)
{
    return a->lo < a->hi && b->lo < b->hi && a->lo < b->hi && b->lo < a->hi;
}

bool tx_gemm_tune_repeatable(const tx_gemm_desc *d, const void *A, const void *B, const void *C,
                             const void *D, const char **why)
{
    range rd[8], wr[4];
    size_t nr = 0, nw = 0;
    bool ok = true;
    const int64_t m = d->m, n = d->n;
    ok &= matrix_range(A, d->a_type, tx_gemm_rows_a(d), tx_gemm_cols_a(d),
                       tx_gemm_ld_or(d->lda, tx_gemm_rows_a(d)), &rd[nr++]);
    ok &= matrix_range(B, d->b_type, tx_gemm_rows_b(d), tx_gemm_cols_b(d),
                       tx_gemm_ld_or(d->ldb, tx_gemm_rows_b(d)), &rd[nr++]);
    if (d->beta != 0.0f)
        ok &= matrix_range(C, tx_gemm_c_type(d), m, n, tx_gemm_ld_or(d->ldc, m), &rd[nr++]);
    ok &= matrix_range(D, d->d_type, m, n, tx_gemm_ld_or(d->ldd, m), &wr[nw++]);
    const int64_t blen = d->epilogue == TX_GEMM_EPI_BGRADB ? n : m;
    switch (d->epilogue) {
    case TX_GEMM_EPI_BIAS:
        ok &= matrix_range(d->bias, tx_gemm_bias_type(d), blen, 1, blen, &rd[nr++]);
        break;
    case TX_GEMM_EPI_GELU_AUX_BIAS:
        ok &= matrix_range(d->bias, tx_gemm_bias_type(d), blen, 1, blen, &rd[nr++]);
        ok &= matrix_range(d->aux, d->d_type, m, n, tx_gemm_aux_ld(d), &wr[nw++]);
        break;
    case TX_GEMM_EPI_DGELU_BGRAD:
        ok &= matrix_range(d->aux, d->d_type, m, n, tx_gemm_aux_ld(d), &rd[nr++]);
        ok &= matrix_range(d->bias, tx_gemm_bias_type(d), blen, 1, blen, &wr[nw++]);
        break;
    case TX_GEMM_EPI_BGRADB:
        ok &= matrix_range(d->bias, tx_gemm_bias_type(d), blen, 1, blen, &wr[nw++]);
        break;
    default: break;
    }
    if (d->amax_d) ok &= matrix_range(d->amax_d, TEEXEC_DTYPE_FLOAT, 1, 1, 1, &wr[nw++]);
    /* scales: their first byte is enough to catch a scale inside an output */
    const void *sc[3] = {d->a_scale_inv, d->b_scale_inv, d->d_scale};
    for (int i = 0; i < 3; i++)
        if (sc[i]) ok &= matrix_range(sc[i], TEEXEC_DTYPE_FLOAT8E4M3FN, 1, 1, 1, &rd[nr++]);
    if (!ok) {
        if (why) *why = "a matrix's extent overflows the address space";
        return false;
    }
    /* Outputs overlapping each other are fine: every run rewrites all of
     * them from the inputs alone (an inference plan may let the GELU aux
     * share the output's memory), and the last run decides the bytes. */
    for (size_t i = 0; i < nw; i++)
        for (size_t j = 0; j < nr; j++)
            if (overlap(&wr[i], &rd[j])) {
                if (why) *why = "an output overlaps an input (e.g. C == D with beta != 0)";
                return false;
            }
    if (why) *why = NULL;
    return true;
}
