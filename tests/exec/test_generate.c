/* Tests for the generator (exec/generate.c) on the CPU:
 *  - KV-cache mode equals recomputing the whole sequence: greedy ids over 32
 *    new tokens and the logits at every step, on a tiny decoder with
 *    past_key_values inputs and present outputs (tests/exec/kv_model.h);
 *  - a batch of prompts of different lengths (padding masked) gives each
 *    sequence exactly what it gives alone, in both modes, and a model
 *    without attention_mask refuses that batch in KV mode but recomputes it;
 *  - seeded sampling is reproducible and independent of the batch;
 *  - rewind, then decoding again, gives the tokens of the first pass;
 *  - bad input (token id outside the vocabulary, a prompt longer than
 *    max_length, a sequence outside max_batch) is refused with a clear
 *    status and the generator then still gives the reference tokens;
 *  - the zoo decoders (models/zoo, fixed [2, 16] inputs) recompute greedily
 *    the ids PyTorch made (expected/greedy_ids.npy) as far as 16 tokens go;
 *  - once models/kv holds Hugging Face exports with a cache and HF
 *    generate's greedy ids (bench/gpu/make_kv_models.py, made on the GPU
 *    machine), both modes give those ids, padded rows included; skipped
 *    while models/kv is absent;
 *  - fp8-current and mxfp8 quantize a real export's prefill in both cache
 *    forms (past_key_values, and convert --kv-cache's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kv_cache_case.h"
#include "recipes_case.h"
#include "kv_model.h"
#include "teexec/teexec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEW_TOKENS 32

static teexec_model *kv_model(bool with_mask)
{
    size_t size = 0;
    uint8_t *bytes = kv_model_bytes(with_mask, &size);
    teexec_model *m = NULL;
    teexec_status *st = teexec_model_load_memory(bytes, size, NULL, NULL, &m);
    free(bytes);
    mb_free_all();
    if (st) fail_msg("loading the KV model: %s", teexec_status_message(st));
    return m;
}

static void ok(teexec_status *st, const char *what)
{
    if (st) fail_msg("%s: %s", what, teexec_status_message(st));
}

static void expect_code(teexec_status *st, teexec_code code, const char *needle)
{
    if (!st) fail_msg("expected %s, got success", teexec_code_name(code));
    if (teexec_status_code(st) != code || (needle && !strstr(teexec_status_message(st), needle)))
        fail_msg("expected %s mentioning \"%s\", got %s: %s", teexec_code_name(code),
                 needle ? needle : "", teexec_code_name(teexec_status_code(st)),
                 teexec_status_message(st));
    teexec_status_destroy(st);
}

static teexec_generator *make_gen(const teexec_model *m, teexec_generate_mode mode, size_t batch,
                                  size_t max_length)
{
    teexec_generator_options o;
    teexec_generator_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    o.mode = mode;
    o.max_batch = batch;
    o.max_length = max_length;
    teexec_generator *g = NULL;
    ok(teexec_generator_create(m, &o, &g), "creating the generator");
    return g;
}

static const int64_t prompts[3][8] = {
    {3, 17, 5, 29, 11, 0, 8, 21}, {30, 2}, {9, 9, 14, 1, 26, 4, 19}};
static const size_t prompt_len[3] = {5, 2, 7};

/* Appends prompts[first .. first + n) as rows 0 .. n-1 and decodes `steps`
 * tokens; ids[r * steps + s] gets row r's token of step s. */
static void decode(teexec_generator *g, size_t first, size_t n, size_t steps, int64_t *ids)
{
    for (size_t r = 0; r < n; r++)
        ok(teexec_generator_append(g, r, prompts[first + r], prompt_len[first + r]), "append");
    for (size_t s = 0; s < steps; s++) {
        int64_t step_ids[3];
        ok(teexec_generator_step(g, step_ids, 3), "step");
        for (size_t r = 0; r < n; r++) ids[r * steps + s] = step_ids[r];
    }
}

static void kv_equals_recompute_greedy_32(void **state)
{
    (void)state;
    teexec_model *m = kv_model(true);
    teexec_generator *kv = make_gen(m, TEEXEC_GENERATE_AUTO, 1, 64);
    teexec_generator *rc = make_gen(m, TEEXEC_GENERATE_RECOMPUTE, 1, 64);
    assert_int_equal(teexec_generator_mode(kv), TEEXEC_GENERATE_KV_CACHE);
    assert_int_equal(teexec_generator_mode(rc), TEEXEC_GENERATE_RECOMPUTE);
    assert_int_equal(teexec_generator_vocab_size(kv), KV_VOCAB);
    ok(teexec_generator_append(kv, 0, prompts[0], 8), "append");
    ok(teexec_generator_append(rc, 0, prompts[0], 8), "append");
    float lk[KV_VOCAB], lr[KV_VOCAB];
    int distinct = 0;
    int64_t prev = -1;
    for (int s = 0; s < NEW_TOKENS; s++) {
        ok(teexec_generator_compute(kv), "kv compute");
        ok(teexec_generator_compute(rc), "recompute");
        ok(teexec_generator_logits(kv, 0, lk, KV_VOCAB), "kv logits");
        ok(teexec_generator_logits(rc, 0, lr, KV_VOCAB), "recompute logits");
        for (int v = 0; v < KV_VOCAB; v++)
            if (fabsf(lk[v] - lr[v]) > 1e-4f * (1 + fabsf(lr[v])))
                fail_msg("step %d, token %d: KV logit %g, recomputed %g", s, v, lk[v], lr[v]);
        int64_t a = -1, b = -1;
        ok(teexec_generator_step(kv, &a, 1), "kv step");
        ok(teexec_generator_step(rc, &b, 1), "recompute step");
        if (a != b) fail_msg("step %d: KV chose %lld, recompute %lld", s, (long long)a, (long long)b);
        distinct += a != prev;
        prev = a;
    }
    /* the model is not degenerate: the tokens change along the way */
    assert_true(distinct > 4);
    /* one run per step in both modes (the prefill is the first) */
    assert_int_equal(teexec_generator_run_count(kv), NEW_TOKENS);
    assert_int_equal(teexec_generator_run_count(rc), NEW_TOKENS);
    const int64_t *toks = NULL;
    size_t n = 0;
    ok(teexec_generator_tokens(kv, 0, &toks, &n), "tokens");
    assert_int_equal(n, 8 + NEW_TOKENS);
    assert_memory_equal(toks, prompts[0], 8 * sizeof(int64_t));
    teexec_generator_destroy(kv);
    teexec_generator_destroy(rc);
    teexec_model_destroy(m);
}

/* The past padded to buckets gives what the exact past gives, with far
 * fewer input shapes for the session to plan. */
static void past_buckets_reuse_plans(void **state)
{
    (void)state;
    teexec_model *m = kv_model(true);
    size_t buckets[] = {1, 16, 0 /* the default, 64 */};
    int64_t ids[3][3 * NEW_TOKENS];
    size_t plans[3];
    for (size_t b = 0; b < 3; b++) {
        teexec_generator_options o;
        teexec_generator_options_init(&o);
        o.device = TEEXEC_DEVICE_CPU;
        o.max_batch = 3;
        o.max_length = 64;
        o.past_bucket = buckets[b];
        teexec_generator *g = NULL;
        ok(teexec_generator_create(m, &o, &g), "create");
        decode(g, 0, 3, NEW_TOKENS, ids[b]);
        plans[b] = teexec_session_plan_count(teexec_generator_session(g));
        teexec_generator_destroy(g);
    }
    assert_memory_equal(ids[1], ids[0], sizeof ids[0]);
    assert_memory_equal(ids[2], ids[0], sizeof ids[0]);
    /* exact: the declared shapes, the prefill, 31 decode pasts (the cache
     * keeps 32); buckets of 16: pasts 7..37 in 3 buckets; of 64: one */
    print_message("plans: exact %zu, bucket 16 %zu, bucket 64 %zu\n", plans[0], plans[1], plans[2]);
    assert_true(plans[0] >= 30);
    assert_true(plans[1] <= 5);
    assert_true(plans[2] <= 3);
    /* a model without attention_mask cannot pad its past */
    teexec_model *nomask = kv_model(false);
    teexec_generator_options o;
    teexec_generator_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    o.past_bucket = 16;
    teexec_generator *g = NULL;
    expect_code(teexec_generator_create(nomask, &o, &g), TEEXEC_ERR_INVALID_ARGUMENT,
                "attention_mask");
    teexec_model_destroy(nomask);
    teexec_model_destroy(m);
}

/* Rows of lengths 5, 2, 7 in one batch: each gets the tokens it gets alone. */
static void padded_batch_matches_each_alone(void **state)
{
    (void)state;
    teexec_model *m = kv_model(true), *nomask = kv_model(false);
    int64_t alone[3][NEW_TOKENS], batch_kv[3 * NEW_TOKENS], batch_rc[3 * NEW_TOKENS];
    int64_t nomask_rc[3 * NEW_TOKENS];
    for (size_t r = 0; r < 3; r++) {
        teexec_generator *g = make_gen(m, TEEXEC_GENERATE_KV_CACHE, 1, 64);
        decode(g, r, 1, NEW_TOKENS, alone[r]);
        teexec_generator_destroy(g);
    }
    teexec_generator *g = make_gen(m, TEEXEC_GENERATE_KV_CACHE, 3, 64);
    decode(g, 0, 3, NEW_TOKENS, batch_kv);
    assert_int_equal(teexec_generator_batch(g), 3);
    teexec_generator_destroy(g);
    g = make_gen(m, TEEXEC_GENERATE_RECOMPUTE, 3, 64);
    decode(g, 0, 3, NEW_TOKENS, batch_rc);
    teexec_generator_destroy(g);
    /* without attention_mask, recompute pads after the tokens (causal) */
    g = make_gen(nomask, TEEXEC_GENERATE_RECOMPUTE, 3, 64);
    decode(g, 0, 3, NEW_TOKENS, nomask_rc);
    teexec_generator_destroy(g);
    for (size_t r = 0; r < 3; r++) {
        for (size_t s = 0; s < NEW_TOKENS; s++) {
            int64_t want = alone[r][s];
            if (batch_kv[r * NEW_TOKENS + s] != want || batch_rc[r * NEW_TOKENS + s] != want ||
                nomask_rc[r * NEW_TOKENS + s] != want)
                fail_msg("row %zu step %zu: alone %lld, batch KV %lld, batch recompute %lld, "
                         "no-mask recompute %lld", r, s, (long long)want,
                         (long long)batch_kv[r * NEW_TOKENS + s],
                         (long long)batch_rc[r * NEW_TOKENS + s],
                         (long long)nomask_rc[r * NEW_TOKENS + s]);
        }
    }
    /* KV mode without attention_mask cannot mask the padding: refused at
     * the run, and the generator still decodes equal-length rows after a
     * rewind to nothing */
    g = make_gen(nomask, TEEXEC_GENERATE_KV_CACHE, 3, 64);
    ok(teexec_generator_append(g, 0, prompts[0], 5), "append");
    ok(teexec_generator_append(g, 1, prompts[1], 2), "append");
    int64_t ids[3];
    expect_code(teexec_generator_step(g, ids, 3), TEEXEC_ERR_UNSUPPORTED, "attention_mask");
    ok(teexec_generator_rewind(g, 0), "rewind");
    assert_int_equal(teexec_generator_batch(g), 0);
    int64_t again[NEW_TOKENS];
    decode(g, 0, 1, NEW_TOKENS, again);
    assert_memory_equal(again, alone[0], sizeof again);
    teexec_generator_destroy(g);
    teexec_model_destroy(nomask);
    teexec_model_destroy(m);
}

static void sample_run(const teexec_model *m, size_t rows, uint64_t seed, int64_t *ids)
{
    teexec_generator_options o;
    teexec_generator_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    o.max_batch = rows;
    o.max_length = 64;
    o.temperature = 0.9;
    o.top_k = 12;
    o.top_p = 0.9;
    o.seed = seed;
    teexec_generator *g = NULL;
    ok(teexec_generator_create(m, &o, &g), "create");
    decode(g, 0, rows, NEW_TOKENS, ids);
    teexec_generator_destroy(g);
}

static void seeded_sampling_is_reproducible(void **state)
{
    (void)state;
    teexec_model *m = kv_model(true);
    int64_t a[3 * NEW_TOKENS], b[3 * NEW_TOKENS], c[NEW_TOKENS], d[3 * NEW_TOKENS];
    sample_run(m, 3, 1234, a);
    sample_run(m, 3, 1234, b);
    assert_memory_equal(a, b, sizeof a);
    /* row 0 alone draws what it drew in the batch */
    sample_run(m, 1, 1234, c);
    assert_memory_equal(c, a, sizeof c);
    /* another seed, other tokens */
    sample_run(m, 3, 99, d);
    assert_true(memcmp(a, d, sizeof a) != 0);
    teexec_model_destroy(m);
}

static void rewind_then_decode_repeats(void **state)
{
    (void)state;
    teexec_model *m = kv_model(true);
    for (int mode = TEEXEC_GENERATE_RECOMPUTE; mode <= TEEXEC_GENERATE_KV_CACHE; mode++) {
        teexec_generator *g = make_gen(m, (teexec_generate_mode)mode, 3, 64);
        int64_t first[3 * 12], second[3 * 6];
        decode(g, 0, 3, 12, first);
        /* rows hold 5+12, 2+12, 7+12 tokens; cutting to 10 leaves row 0
         * with 5 generated, row 1 with 8, row 2 with 3 */
        ok(teexec_generator_rewind(g, 10), "rewind");
        for (size_t s = 0; s < 6; s++) {
            int64_t ids[3];
            ok(teexec_generator_step(g, ids, 3), "step after rewind");
            for (size_t r = 0; r < 3; r++) second[r * 6 + s] = ids[r];
        }
        for (size_t r = 0; r < 3; r++) {
            size_t gen_kept = 10 - prompt_len[r];
            for (size_t s = 0; s < 6 && gen_kept + s < 12; s++)
                if (second[r * 6 + s] != first[r * 12 + gen_kept + s])
                    fail_msg("mode %d row %zu: after rewind token %zu is %lld, first pass %lld",
                             mode, r, gen_kept + s, (long long)second[r * 6 + s],
                             (long long)first[r * 12 + gen_kept + s]);
        }
        teexec_generator_destroy(g);
    }
    teexec_model_destroy(m);
}

static void bad_input_refused_and_generator_usable(void **state)
{
    (void)state;
    teexec_model *m = kv_model(true);
    int64_t want[NEW_TOKENS];
    teexec_generator *ref = make_gen(m, TEEXEC_GENERATE_KV_CACHE, 1, 64);
    decode(ref, 0, 1, NEW_TOKENS, want);
    teexec_generator_destroy(ref);
    for (int mode = TEEXEC_GENERATE_RECOMPUTE; mode <= TEEXEC_GENERATE_KV_CACHE; mode++) {
        teexec_generator *g = make_gen(m, (teexec_generate_mode)mode, 2, 48);
        /* a token id outside the vocabulary of 32 */
        int64_t bad[] = {1, 2, KV_VOCAB};
        expect_code(teexec_generator_append(g, 0, bad, 3), TEEXEC_ERR_INVALID_ARGUMENT,
                    "vocabulary");
        int64_t neg[] = {-1};
        expect_code(teexec_generator_append(g, 0, neg, 1), TEEXEC_ERR_INVALID_ARGUMENT,
                    "vocabulary");
        /* a prompt longer than max_length (48) */
        int64_t longp[49] = {0};
        expect_code(teexec_generator_append(g, 0, longp, 49), TEEXEC_ERR_LIMIT, "max_length");
        /* a sequence outside max_batch (2) */
        expect_code(teexec_generator_append(g, 2, prompts[0], 5), TEEXEC_ERR_INVALID_ARGUMENT,
                    "max_batch");
        /* stepping with nothing appended, logits before any run */
        int64_t id = 0;
        expect_code(teexec_generator_step(g, &id, 1), TEEXEC_ERR_INVALID_ARGUMENT, "no sequence");
        float l[KV_VOCAB];
        expect_code(teexec_generator_logits(g, 0, l, KV_VOCAB), TEEXEC_ERR_INVALID_ARGUMENT,
                    "no current logits");
        assert_int_equal(teexec_generator_batch(g), 0);
        /* still usable: the reference tokens */
        int64_t got[NEW_TOKENS];
        decode(g, 0, 1, NEW_TOKENS, got);
        assert_memory_equal(got, want, sizeof got);
        /* 5 + 32 tokens held: 12 more do not fit in 48, and nothing changed */
        int64_t more[12] = {0};
        expect_code(teexec_generator_append(g, 0, more, 12), TEEXEC_ERR_LIMIT, "max_length");
        const int64_t *toks = NULL;
        size_t n = 0;
        ok(teexec_generator_tokens(g, 0, &toks, &n), "tokens");
        assert_int_equal(n, 5 + NEW_TOKENS);
        /* a step past max_length is refused the same way */
        ok(teexec_generator_append(g, 0, more, 48 - 5 - NEW_TOKENS - 1), "fill");
        ok(teexec_generator_step(g, &id, 1), "last step that fits");
        expect_code(teexec_generator_step(g, &id, 1), TEEXEC_ERR_LIMIT, "max_length");
        /* a hole in the batch (row 1 used, row 0 cut to nothing) */
        ok(teexec_generator_rewind(g, 0), "rewind");
        ok(teexec_generator_append(g, 1, prompts[1], 2), "append row 1");
        int64_t two[2];
        expect_code(teexec_generator_step(g, two, 2), TEEXEC_ERR_INVALID_ARGUMENT, "no tokens");
        teexec_generator_destroy(g);
    }
    /* options refused at creation */
    teexec_generator_options o;
    teexec_generator_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    teexec_generator *g = NULL;
    o.top_p = 0;
    expect_code(teexec_generator_create(m, &o, &g), TEEXEC_ERR_INVALID_ARGUMENT, "top_p");
    assert_null(g);
    o.top_p = 1;
    o.max_batch = 0;
    expect_code(teexec_generator_create(m, &o, &g), TEEXEC_ERR_INVALID_ARGUMENT, "max_batch");
    o.max_batch = 1;
    o.pad_id = KV_VOCAB;
    expect_code(teexec_generator_create(m, &o, &g), TEEXEC_ERR_INVALID_ARGUMENT, "pad_id");
    teexec_model_destroy(m);
}

/* Recipes quantize the Linears in generation as in inference: the prefill
 * of 16 tokens (FP8 GEMMs need M, N, K multiples of 16, so a one-token
 * decode step at batch 1 runs its GEMMs unquantized, as TE's FP8 GEMMs
 * would refuse it) moves the logits a little off the unquantized ones, so
 * the recipe did run, and decoding goes on in both modes. */
static void recipes_in_generation(void **state)
{
    (void)state;
    teexec_model *m = kv_model(true);
    float base[KV_VOCAB], got[KV_VOCAB];
    /* (mxfp8 needs multiples of 32: this model's width of 16 never has one) */
    const char *recipes[] = {"none", "fp8-current", "fp8-delayed"};
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++) {
        for (int mode = TEEXEC_GENERATE_RECOMPUTE; mode <= TEEXEC_GENERATE_KV_CACHE; mode++) {
            teexec_generator_options o;
            teexec_generator_options_init(&o);
            o.device = TEEXEC_DEVICE_CPU;
            o.recipe = recipes[i];
            o.mode = (teexec_generate_mode)mode;
            o.max_length = 64;
            teexec_generator *g = NULL;
            ok(teexec_generator_create(m, &o, &g), recipes[i]);
            int64_t p16[16];
            for (int t = 0; t < 16; t++) p16[t] = (t * 7 + 3) % KV_VOCAB;
            ok(teexec_generator_append(g, 0, p16, 16), "append");
            ok(teexec_generator_compute(g), recipes[i]);
            ok(teexec_generator_logits(g, 0, i ? got : base, KV_VOCAB), "logits");
            if (i) {
                double num = 0, den = 0;
                for (int v = 0; v < KV_VOCAB; v++) {
                    num += (got[v] - base[v]) * (double)(got[v] - base[v]);
                    den += base[v] * (double)base[v];
                }
                double rel = sqrt(num / den);
                if (!(rel > 0 && rel < 0.1))
                    fail_msg("%s: prefill logits rel-L2 %g from recipe none", recipes[i], rel);
            }
            for (int s = 0; s < 16; s++) {
                int64_t id = -1;
                ok(teexec_generator_step(g, &id, 1), recipes[i]);
                assert_true(id >= 0 && id < KV_VOCAB);
            }
            teexec_generator_destroy(g);
        }
    }
    teexec_model_destroy(m);
}

/* ---- the zoo ------------------------------------------------------------- */

static const char *zoo_decoders[] = {
    "gemma_dynamo",     "gemma_torchscript",    "gpt2_dynamo",       "gpt2_torchscript",
    "gpt_neox_dynamo",  "gpt_neox_torchscript", "llama_dynamo",      "llama_dynamo_op23",
    "llama_torchscript", "mistral_dynamo",      "mistral_torchscript", "nanogpt12_dynamo",
    "nanogpt12_torchscript", "opt_dynamo",      "opt_torchscript",   "phi_dynamo",
    "phi_torchscript",  "qwen2_dynamo",         "qwen2_torchscript"};

static void zoo_greedy_recompute(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    int failures = 0;
    for (size_t z = 0; z < sizeof zoo_decoders / sizeof zoo_decoders[0]; z++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/models/zoo/%s/expected/greedy_ids.npy", root ? root : ".",
                 zoo_decoders[z]);
        teexec_tensor *ref = NULL;
        ok(teexec_tensor_load_file(path, &ref), path);
        assert_int_equal(teexec_tensor_rank(ref), 2);
        assert_int_equal(teexec_tensor_dtype(ref), TEEXEC_DTYPE_INT64);
        size_t rows = (size_t)teexec_tensor_dims(ref)[0], cols = (size_t)teexec_tensor_dims(ref)[1];
        const int64_t *want = teexec_tensor_data_const(ref);
        assert_true(rows <= 2 && cols >= 16);
        snprintf(path, sizeof path, "%s/models/zoo/%s/model.onnx", root ? root : ".",
                 zoo_decoders[z]);
        teexec_model *m = NULL;
        ok(teexec_model_load_file(path, NULL, &m), path);
        teexec_generator_options o;
        teexec_generator_options_init(&o);
        o.device = TEEXEC_DEVICE_CPU;
        o.max_batch = rows;
        teexec_generator *g = NULL;
        ok(teexec_generator_create(m, &o, &g), zoo_decoders[z]);
        assert_int_equal(teexec_generator_mode(g), TEEXEC_GENERATE_RECOMPUTE);
        /* KV mode is refused: these exports have no cache */
        teexec_generator *kvg = NULL;
        o.mode = TEEXEC_GENERATE_KV_CACHE;
        expect_code(teexec_generator_create(m, &o, &kvg), TEEXEC_ERR_UNSUPPORTED,
                    "past_key_values");
        /* the fixed [2, 16] input: prompt 8, then 8 new tokens */
        for (size_t r = 0; r < rows; r++) ok(teexec_generator_append(g, r, want + r * cols, 8), "append");
        for (size_t s = 0; s < 8; s++) {
            int64_t ids[2];
            ok(teexec_generator_step(g, ids, 2), zoo_decoders[z]);
            for (size_t r = 0; r < rows; r++) {
                if (ids[r] == want[r * cols + 8 + s]) continue;
                print_message("%s: row %zu step %zu: %lld, PyTorch %lld\n", zoo_decoders[z], r, s,
                              (long long)ids[r], (long long)want[r * cols + 8 + s]);
                failures++;
                s = 8;
                break;
            }
        }
        teexec_generator_destroy(g);
        teexec_model_destroy(m);
        teexec_tensor_destroy(ref);
    }
    assert_int_equal(failures, 0);
}

/* ---- Hugging Face references (bench/gpu/make_kv_models.py) -------------- */

static teexec_tensor *load_npy(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%.4000s/%.100s", dir, name);
    teexec_tensor *t = NULL;
    ok(teexec_tensor_load_file(path, &t), path);
    assert_int_equal(teexec_tensor_dtype(t), TEEXEC_DTYPE_INT64);
    assert_int_equal(teexec_tensor_rank(t), 2);
    return t;
}

/* Greedy ids of rows `prompt` (-1 ends a row early) against `want` (new
 * tokens only, [rows, n]) in one mode; returns the mismatches printed. */
static int greedy_against(const teexec_model *m, const char *name, teexec_generate_mode mode,
                          const teexec_tensor *prompt, const teexec_tensor *want, size_t want_from)
{
    size_t rows = (size_t)teexec_tensor_dims(prompt)[0], cols = (size_t)teexec_tensor_dims(prompt)[1];
    size_t wcols = (size_t)teexec_tensor_dims(want)[1], n = wcols - want_from;
    const int64_t *p = teexec_tensor_data_const(prompt), *w = teexec_tensor_data_const(want);
    teexec_generator *g = make_gen(m, mode, rows, cols + n);
    for (size_t r = 0; r < rows; r++) {
        size_t len = 0;
        while (len < cols && p[r * cols + len] >= 0) len++;
        ok(teexec_generator_append(g, r, p + r * cols, len), "append");
    }
    int bad = 0;
    for (size_t s = 0; s < n && !bad; s++) {
        int64_t ids[8];
        assert_true(rows <= 8);
        ok(teexec_generator_step(g, ids, 8), name);
        for (size_t r = 0; r < rows; r++) {
            if (ids[r] == w[r * wcols + want_from + s]) continue;
            print_message("%s (%s): row %zu step %zu: %lld, Hugging Face %lld\n", name,
                          mode == TEEXEC_GENERATE_KV_CACHE ? "kv" : "recompute", r, s,
                          (long long)ids[r], (long long)w[r * wcols + want_from + s]);
            bad++;
        }
    }
    teexec_generator_destroy(g);
    return bad;
}

/* Runs once models/kv holds the device script's output (bench/gpu/
 * run_kv_models.sh, committed by the lead); skipped until then. */
static void hf_generate_references(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    const char *names[] = {"gpt2_kv", "llama_gqa_kv"};
    int found = 0, bad = 0;
    for (size_t i = 0; i < 2; i++) {
        char dir[4000], path[4200];
        snprintf(dir, sizeof dir, "%.3900s/models/kv/%s", root ? root : ".", names[i]);
        snprintf(path, sizeof path, "%s/model.onnx", dir);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fclose(f);
        found++;
        teexec_model *m = NULL;
        ok(teexec_model_load_file(path, NULL, &m), path);
        teexec_tensor *prompt = load_npy(dir, "prompt.npy"), *hf = load_npy(dir, "hf_greedy_ids.npy");
        size_t plen = (size_t)teexec_tensor_dims(prompt)[1];
        bad += greedy_against(m, names[i], TEEXEC_GENERATE_KV_CACHE, prompt, hf, plen);
        bad += greedy_against(m, names[i], TEEXEC_GENERATE_RECOMPUTE, prompt, hf, plen);
        snprintf(path, sizeof path, "%s/hf_greedy_padded_new.npy", dir);
        if ((f = fopen(path, "rb"))) {
            fclose(f);
            teexec_tensor *pp = load_npy(dir, "prompt_padded.npy");
            teexec_tensor *hp = load_npy(dir, "hf_greedy_padded_new.npy");
            bad += greedy_against(m, names[i], TEEXEC_GENERATE_KV_CACHE, pp, hp, 0);
            teexec_tensor_destroy(pp);
            teexec_tensor_destroy(hp);
        }
        teexec_tensor_destroy(prompt);
        teexec_tensor_destroy(hf);
        teexec_model_destroy(m);
    }
    if (!found) skip();
    assert_int_equal(bad, 0);
}

/* fp8-current and mxfp8 in generation on a real export, both forms, on
 * the CPU (tests/exec/recipes_case.h). */
static void recipes_on_a_real_export(void **state)
{
    (void)state;
    static float logits[RC_FORMS][RC_RECIPES][RC_VOCAB];
    if (!recipes_case(TEEXEC_DEVICE_CPU, logits)) skip();
}

/* DotProductAttention's cache mode on the CPU: converted HF exports give
 * HF's greedy ids (tests/exec/kv_cache_case.h). */
static void cache_mode_matches_hf(void **state)
{
    (void)state;
    if (!kv_cache_case(TEEXEC_DEVICE_CPU)) skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kv_equals_recompute_greedy_32),
        cmocka_unit_test(past_buckets_reuse_plans),
        cmocka_unit_test(padded_batch_matches_each_alone),
        cmocka_unit_test(seeded_sampling_is_reproducible),
        cmocka_unit_test(rewind_then_decode_repeats),
        cmocka_unit_test(bad_input_refused_and_generator_usable),
        cmocka_unit_test(recipes_in_generation),
        cmocka_unit_test(zoo_greedy_recompute),
        cmocka_unit_test(hf_generate_references),
        cmocka_unit_test(cache_mode_matches_hf),
        cmocka_unit_test(recipes_on_a_real_export),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
