/*
 * recipe.c - parsing and naming recipes and device capabilities for the
 * planner (tx_recipe_parse, tx_recipe_name, tx_device_caps_parse).
 *
 * The recipe grammar is NAME[:hybrid|:e4m3][,key=value]... . Defaults follow
 * Transformer Engine's recipe classes: fp8-delayed and fp8-current are
 * HYBRID (E4M3 forward, E5M2 grads) as DelayedScaling and
 * Float8CurrentScaling are, mxfp8 is E4M3 everywhere as MXFP8BlockScaling
 * is; ":e4m3" and ":hybrid" ask for the other. (Until 2026-12-04 the plain
 * FP8 names meant E4M3 grads too: GPT-2 124M trained that way was 7% and
 * 18% off PyTorch's bf16 loss at the worst logged step of two 200-step
 * runs, HYBRID 0.22%; bench/results/gpu_gpt2_124m_2026-12-04_*.md.)
 * Device capabilities follow TE's architecture table (reference te-ops.md
 * 4.9): FP8 per-tensor GEMMs from sm_89, FP8 block-scaled GEMMs native on
 * Hopper (emulated through MXFP8 on Blackwell, which counts as native here
 * since it runs on block-scaled tensor cores), MXFP8/NVFP4 from sm_100 up
 * to (not including) sm_120.
 */
#include "planner/plan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RECIPE_LIST "none, fp8-delayed, fp8-current, fp8-block, mxfp8, nvfp4"
#define OPTION_LIST "history=N (fp8-delayed), 2d=0|1 (mxfp8, nvfp4), rht=0|1 (nvfp4), " \
                    "sr=0|1 (nvfp4), pow2=0|1 (fp8-current, fp8-block), first_last_hp=0|1, " \
                    "dtype=bf16|fp16|fp32"

static const struct {
    const char *name;
    tx_recipe_kind kind;
    bool hybrid_ok;
} kinds[] = {
    {"none", TX_RECIPE_NONE, false},
    {"fp8-delayed", TX_RECIPE_FP8_DELAYED, true},
    {"fp8-current", TX_RECIPE_FP8_CURRENT, true},
    {"fp8-block", TX_RECIPE_FP8_BLOCK, false},
    {"mxfp8", TX_RECIPE_MXFP8, true},
    {"nvfp4", TX_RECIPE_NVFP4, false},
};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

/* TE's Format.HYBRID default of DelayedScaling and Float8CurrentScaling:
 * E5M2 grads, whose range per-tensor scaling needs (te-ops.md 4.1). */
static bool default_hybrid(tx_recipe_kind kind)
{
    return kind == TX_RECIPE_FP8_DELAYED || kind == TX_RECIPE_FP8_CURRENT;
}

static void recipe_defaults(tx_recipe_kind kind, tx_recipe *r)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->amax_history_len = 1024;
    r->mxfp8_2d_weights = false;
    r->nvfp4_rht = true;
    r->nvfp4_stochastic = true;
    r->nvfp4_2d_weights = true;
    r->hybrid = default_hybrid(kind);
    /* TE: Float8BlockScaling rounds its block scales to powers of two by
     * default; Float8CurrentScaling does not */
    r->pow2_scales = kind == TX_RECIPE_FP8_BLOCK;
    /* Quantized recipes keep BF16 around the GEMMs as TE does; none keeps
     * the model's own dtype (UNDEFINED = "as the model says"). */
    r->compute_dtype = kind == TX_RECIPE_NONE ? TEEXEC_DTYPE_UNDEFINED : TEEXEC_DTYPE_BFLOAT16;
}

static teexec_status *bad_recipe(const char *text, const char *why)
{
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                    "recipe \"%s\": %s (recipes: %s; fp8-delayed and fp8-current have E5M2 "
                    "grads (HYBRID) unless :e4m3, mxfp8 E4M3 unless :hybrid; options: %s)",
                    text, why, RECIPE_LIST, OPTION_LIST);
}

static bool parse_bool01(const char *v, bool *out)
{
    if (strcmp(v, "0") == 0) { *out = false; return true; }
    if (strcmp(v, "1") == 0) { *out = true; return true; }
    return false;
}

static teexec_status *parse_option(const char *text, const char *key, const char *val,
                                   tx_recipe *r)
{
    char why[160];
    if (strcmp(key, "history") == 0) {
        if (r->kind != TX_RECIPE_FP8_DELAYED)
            return bad_recipe(text, "history= applies to fp8-delayed only");
        char *end = NULL;
        errno = 0;
        long n = strtol(val, &end, 10);
        if (errno || !end || *end || n < 1 || n > 1000000) {
            snprintf(why, sizeof why, "history=%s is not a length from 1 to 1000000", val);
            return bad_recipe(text, why);
        }
        r->amax_history_len = (int)n;
        return NULL;
    }
    if (strcmp(key, "2d") == 0) {
        bool b;
        if (!parse_bool01(val, &b)) return bad_recipe(text, "2d= takes 0 or 1");
        if (r->kind == TX_RECIPE_MXFP8) r->mxfp8_2d_weights = b;
        else if (r->kind == TX_RECIPE_NVFP4) r->nvfp4_2d_weights = b;
        else return bad_recipe(text, "2d= applies to mxfp8 and nvfp4 only");
        return NULL;
    }
    if (strcmp(key, "rht") == 0 || strcmp(key, "sr") == 0) {
        bool b;
        if (!parse_bool01(val, &b)) {
            snprintf(why, sizeof why, "%s= takes 0 or 1", key);
            return bad_recipe(text, why);
        }
        if (r->kind != TX_RECIPE_NVFP4) {
            snprintf(why, sizeof why, "%s= applies to nvfp4 only", key);
            return bad_recipe(text, why);
        }
        if (key[0] == 'r') r->nvfp4_rht = b;
        else r->nvfp4_stochastic = b;
        return NULL;
    }
    if (strcmp(key, "pow2") == 0) {
        if (!parse_bool01(val, &r->pow2_scales)) return bad_recipe(text, "pow2= takes 0 or 1");
        if (r->kind != TX_RECIPE_FP8_CURRENT && r->kind != TX_RECIPE_FP8_BLOCK)
            return bad_recipe(text, "pow2= applies to fp8-current and fp8-block only");
        return NULL;
    }
    if (strcmp(key, "first_last_hp") == 0) {
        if (!parse_bool01(val, &r->keep_first_last_hp))
            return bad_recipe(text, "first_last_hp= takes 0 or 1");
        if (r->kind == TX_RECIPE_NONE)
            return bad_recipe(text, "first_last_hp= applies to quantized recipes only");
        return NULL;
    }
    if (strcmp(key, "dtype") == 0) {
        if (strcmp(val, "bf16") == 0 || strcmp(val, "bfloat16") == 0)
            r->compute_dtype = TEEXEC_DTYPE_BFLOAT16;
        else if (strcmp(val, "fp16") == 0 || strcmp(val, "float16") == 0)
            r->compute_dtype = TEEXEC_DTYPE_FLOAT16;
        else if (strcmp(val, "fp32") == 0 || strcmp(val, "float32") == 0)
            r->compute_dtype = TEEXEC_DTYPE_FLOAT;
        else {
            snprintf(why, sizeof why, "dtype=%s is not bf16, fp16 or fp32", val);
            return bad_recipe(text, why);
        }
        /* NVFP4's quantizers (RHT, the E2M1 kernels) take BF16 only, as TE's. */
        if (r->kind == TX_RECIPE_NVFP4 && r->compute_dtype != TEEXEC_DTYPE_BFLOAT16)
            return bad_recipe(text, "nvfp4 computes in bf16 only");
        return NULL;
    }
    snprintf(why, sizeof why, "unknown option \"%s\"", key);
    return bad_recipe(text, why);
}

teexec_status *tx_recipe_parse(const char *text, tx_recipe *out)
{
    if (!text || !out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "recipe: NULL argument");
    char buf[256];
    size_t len = strlen(text);
    if (len == 0 || len >= sizeof buf) return bad_recipe(text, "empty or too long");
    memcpy(buf, text, len + 1);

    char *opts = strchr(buf, ',');
    if (opts) *opts++ = '\0';
    char *fmt = strchr(buf, ':');
    if (fmt) *fmt++ = '\0';

    size_t k = 0;
    while (k < N_KINDS && strcasecmp(kinds[k].name, buf) != 0) k++;
    if (k == N_KINDS) return bad_recipe(text, "unknown recipe");
    tx_recipe r;
    recipe_defaults(kinds[k].kind, &r);
    if (fmt) {
        if (strcasecmp(fmt, "hybrid") == 0) {
            if (!kinds[k].hybrid_ok)
                return bad_recipe(text, ":hybrid applies to fp8-delayed, fp8-current and mxfp8 only");
            r.hybrid = true;
        } else if (strcasecmp(fmt, "e4m3") == 0) {
            r.hybrid = false;
        } else {
            return bad_recipe(text, "the format after ':' must be hybrid or e4m3");
        }
    }
    while (opts && *opts) {
        char *next = strchr(opts, ',');
        if (next) *next++ = '\0';
        char *eq = strchr(opts, '=');
        if (!eq || eq == opts || !eq[1]) return bad_recipe(text, "options are key=value");
        *eq = '\0';
        TX_TRY(parse_option(text, opts, eq + 1, &r));
        opts = next;
    }
    *out = r;
    return NULL;
}

static const char *kind_name(tx_recipe_kind k)
{
    for (size_t i = 0; i < N_KINDS; i++)
        if (kinds[i].kind == k) return kinds[i].name;
    return "unknown";
}

static const char *dtype_opt(teexec_dtype dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_BFLOAT16: return "bf16";
    case TEEXEC_DTYPE_FLOAT16: return "fp16";
    case TEEXEC_DTYPE_FLOAT: return "fp32";
    default: return NULL;
    }
}

const char *tx_recipe_name(const tx_recipe *r, char *buf, size_t size)
{
    if (!r) return "none";
    const char *base = kind_name(r->kind);
    if (!buf || size == 0) return base;
    /* Options that differ from the defaults are written so that parsing
     * the name gives the same recipe back. */
    tx_recipe d;
    recipe_defaults(r->kind, &d);
    int n = snprintf(buf, size, "%s%s", base,
                     r->hybrid == d.hybrid ? "" : r->hybrid ? ":hybrid" : ":e4m3");
    size_t used = n > 0 ? (size_t)n : 0;
#define ADD(...)                                                                  \
    do {                                                                          \
        if (used < size) {                                                        \
            int m_ = snprintf(buf + used, size - used, __VA_ARGS__);              \
            if (m_ > 0) used += (size_t)m_;                                       \
        }                                                                         \
    } while (0)
    if (r->kind == TX_RECIPE_FP8_DELAYED && r->amax_history_len != d.amax_history_len)
        ADD(",history=%d", r->amax_history_len);
    if (r->kind == TX_RECIPE_MXFP8 && r->mxfp8_2d_weights != d.mxfp8_2d_weights)
        ADD(",2d=%d", r->mxfp8_2d_weights ? 1 : 0);
    if (r->kind == TX_RECIPE_NVFP4) {
        if (r->nvfp4_2d_weights != d.nvfp4_2d_weights) ADD(",2d=%d", r->nvfp4_2d_weights ? 1 : 0);
        if (r->nvfp4_rht != d.nvfp4_rht) ADD(",rht=%d", r->nvfp4_rht ? 1 : 0);
        if (r->nvfp4_stochastic != d.nvfp4_stochastic) ADD(",sr=%d", r->nvfp4_stochastic ? 1 : 0);
    }
    if ((r->kind == TX_RECIPE_FP8_CURRENT || r->kind == TX_RECIPE_FP8_BLOCK) &&
        r->pow2_scales != d.pow2_scales)
        ADD(",pow2=%d", r->pow2_scales ? 1 : 0);
    if (r->keep_first_last_hp) ADD(",first_last_hp=1");
    if (r->compute_dtype != d.compute_dtype && dtype_opt(r->compute_dtype))
        ADD(",dtype=%s", dtype_opt(r->compute_dtype));
#undef ADD
    if (used >= size) return base; /* truncated: the bare name is still true */
    return buf;
}

/* ---- devices ---------------------------------------------------------- */

static void caps_for_sm(int sm, tx_device_caps *c)
{
    memset(c, 0, sizeof *c);
    c->sm = sm;
    if (sm == 0) {
        snprintf(c->name, sizeof c->name, "cpu");
        return;
    }
    snprintf(c->name, sizeof c->name, "sm_%d", sm);
    c->fp8_gemm = sm >= 89;
    c->fp8_block_gemm = sm >= 90 && sm < 120;
    c->mx_gemm = sm >= 100 && sm < 120;
}

teexec_status *tx_device_caps_parse(const char *text, tx_device_caps *out)
{
    if (!text || !out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "device: NULL argument");
    static const struct {
        const char *alias;
        int sm;
    } aliases[] = {{"cpu", 0}, {"h100", 90}, {"h200", 90}, {"hopper", 90},
                   {"b200", 100}, {"gb200", 100}, {"blackwell", 100}, {"l40s", 89}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcasecmp(text, aliases[i].alias) == 0) {
            caps_for_sm(aliases[i].sm, out);
            return NULL;
        }
    if (strncasecmp(text, "sm_", 3) == 0 || strncasecmp(text, "sm", 2) == 0) {
        const char *d = text + (text[2] == '_' ? 3 : 2);
        char *end = NULL;
        errno = 0;
        long sm = strtol(d, &end, 10);
        if (!errno && end && end != d && (*end == '\0' || ((*end == 'a' || *end == 'f') && end[1] == '\0'))
            && sm >= 50 && sm <= 200) {
            caps_for_sm((int)sm, out);
            return NULL;
        }
    }
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                    "device \"%s\": not one of cpu, sm_NN (sm_89, sm_90, sm_100, sm_120), "
                    "h100, h200, b200",
                    text);
}
