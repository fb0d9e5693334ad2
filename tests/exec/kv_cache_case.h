/*
 * kv_cache_case.h - the check of DotProductAttention's cache mode that the
 * CPU suite (test_generate) and the GPU suite (test_gpu_generate) both run,
 * on a device each: every Hugging Face export of models/kv converted with
 * teexec_plan_options_set_kv_cache (the form `teexec convert --kv-cache`
 * writes), then generated from greedily; the ids must equal HF's greedy
 * generate (hf_greedy_ids.npy, made on the GPU machine) and those of the
 * export itself run with past_key_values. Also: a rewind gives the same
 * ids again, the caches cannot be fed by the caller, and a prompt longer
 * than the cache is refused with the generator still working after.
 *
 * Header-only, for one test program each (cmocka included before it).
 * Returns how many exports it found; fails the test on a mismatch.
 */
#ifndef TEEXEC_TESTS_KV_CACHE_CASE_H
#define TEEXEC_TESTS_KV_CACHE_CASE_H

#include "teexec/teexec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void kvc_ok(teexec_status *st, const char *what)
{
    if (st) fail_msg("%s: %s", what, teexec_status_message(st));
}

static teexec_generator *kvc_generator(const teexec_model *m, teexec_device dev, size_t batch,
                                       size_t max_length)
{
    teexec_generator_options o;
    teexec_generator_options_init(&o);
    o.device = dev;
    o.max_batch = batch;
    o.max_length = max_length;
    teexec_generator *g = NULL;
    kvc_ok(teexec_generator_create(m, &o, &g), "creating the generator");
    return g;
}

/* Greedy ids of rows of `prompt` [rows, pl] for `steps` steps into out
 * [rows * steps]. */
static void kvc_generate(teexec_generator *g, const int64_t *prompt, size_t rows, size_t pl,
                         size_t steps, int64_t *out)
{
    for (size_t r = 0; r < rows; r++)
        kvc_ok(teexec_generator_append(g, r, prompt + r * pl, pl), "append");
    for (size_t s = 0; s < steps; s++) {
        int64_t ids[8];
        kvc_ok(teexec_generator_step(g, ids, 8), "step");
        for (size_t r = 0; r < rows; r++) out[r * steps + s] = ids[r];
    }
}

static int kv_cache_case(teexec_device dev)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    const char *names[] = {"gpt2_kv", "llama_gqa_kv"};
    int found = 0;
    for (size_t i = 0; i < 2; i++) {
        char path[4200], conv[4200];
        snprintf(path, sizeof path, "%.3900s/models/kv/%s/model.onnx", root ? root : ".", names[i]);
        teexec_model *src = NULL;
        teexec_status *st = teexec_model_load_file(path, NULL, &src);
        if (st) {
            teexec_status_destroy(st);
            continue;
        }
        found++;
        /* the cache form, written and loaded back as a user would */
        snprintf(conv, sizeof conv, "/tmp/teexec_kv_cache_%ld_%s.onnx", (long)getpid(), names[i]);
        teexec_plan_options *po = NULL;
        kvc_ok(teexec_plan_options_create(&po), "plan options");
        /* one of the two counts alone, a negative one or no options: refused */
        const int64_t bad_counts[3][2] = {{0, 48}, {4, 0}, {-1, -1}};
        for (int b = 0; b < 3; b++) {
            teexec_status *bst = teexec_plan_options_set_kv_cache(po, bad_counts[b][0], bad_counts[b][1]);
            assert_non_null(bst);
            assert_int_equal(teexec_status_code(bst), TEEXEC_ERR_INVALID_ARGUMENT);
            teexec_status_destroy(bst);
        }
        teexec_status *nst = teexec_plan_options_set_kv_cache(NULL, 4, 48);
        assert_int_equal(teexec_status_code(nst), TEEXEC_ERR_INVALID_ARGUMENT);
        teexec_status_destroy(nst);
        kvc_ok(teexec_plan_options_set_kv_cache(po, 4, 48), "kv cache options");
        char *summary = NULL;
        kvc_ok(teexec_model_convert(src, po, conv, &summary), "convert --kv-cache");
        assert_non_null(strstr(summary, "attentions in the cache mode"));
        teexec_string_free(summary);
        teexec_plan_options_destroy(po);
        teexec_model *m = NULL;
        kvc_ok(teexec_model_load_file(conv, NULL, &m), conv);
        remove(conv);

        teexec_tensor *prompt = NULL, *hf = NULL;
        snprintf(path, sizeof path, "%.3900s/models/kv/%s/prompt.npy", root ? root : ".", names[i]);
        kvc_ok(teexec_tensor_load_file(path, &prompt), path);
        snprintf(path, sizeof path, "%.3900s/models/kv/%s/hf_greedy_ids.npy", root ? root : ".",
                 names[i]);
        kvc_ok(teexec_tensor_load_file(path, &hf), path);
        size_t rows = (size_t)teexec_tensor_dims(prompt)[0], pl = (size_t)teexec_tensor_dims(prompt)[1];
        size_t hl = (size_t)teexec_tensor_dims(hf)[1], steps = hl - pl;
        assert_true(rows <= 4 && pl + steps <= 48);
        const int64_t *p = teexec_tensor_data_const(prompt), *w = teexec_tensor_data_const(hf);
        int64_t *got = calloc(rows * steps, sizeof(*got)), *again = calloc(rows * steps, sizeof(*again));
        int64_t *past = calloc(rows * steps, sizeof(*past));
        assert_non_null(got);
        assert_non_null(again);
        assert_non_null(past);

        teexec_generator *g = kvc_generator(m, dev, rows, 0);
        assert_int_equal(teexec_generator_mode(g), TEEXEC_GENERATE_KV_CACHE);
        kvc_generate(g, p, rows, pl, steps, got);
        int bad = 0;
        for (size_t r = 0; r < rows; r++)
            for (size_t s = 0; s < steps; s++)
                if (got[r * steps + s] != w[r * hl + pl + s]) {
                    if (bad++ < 5)
                        fprintf(stderr, "%s (cache mode): row %zu step %zu: %lld, HF %lld\n",
                                names[i], r, s, (long long)got[r * steps + s],
                                (long long)w[r * hl + pl + s]);
                }
        /* rewound to the prompt, the same ids again over the same state */
        kvc_ok(teexec_generator_rewind(g, pl), "rewind");
        for (size_t s = 0; s < steps; s++) {
            int64_t ids[8];
            kvc_ok(teexec_generator_step(g, ids, 8), "step after rewind");
            for (size_t r = 0; r < rows; r++) again[r * steps + s] = ids[r];
        }
        assert_memory_equal(got, again, rows * steps * sizeof(*got));
        /* a prompt past the capacity: refused, and the generator goes on */
        int64_t longp[60] = {0};
        st = teexec_generator_append(g, 0, longp, 60);
        assert_non_null(st);
        assert_int_equal(teexec_status_code(st), TEEXEC_ERR_LIMIT);
        teexec_status_destroy(st);
        kvc_ok(teexec_generator_rewind(g, 0), "rewind to empty");
        kvc_generate(g, p, rows, pl, steps, again);
        assert_memory_equal(got, again, rows * steps * sizeof(*got));
        /* the caches are the session's: a caller cannot feed one */
        const teexec_session *cs = teexec_generator_session(g);
        int64_t kd[4] = {4, 48, 1, 1};
        teexec_tensor *kt = NULL;
        kvc_ok(teexec_tensor_create(TEEXEC_DTYPE_FLOAT, 4, kd, &kt), "tensor");
        const char *kn = "kv_cache.0.key";
        teexec_tensor *out = NULL;
        const char *on = "logits";
        st = teexec_session_run((teexec_session *)cs, 1, &kn, (const teexec_tensor *const *)&kt, 1,
                                &on, &out);
        assert_non_null(st);
        assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(teexec_status_message(st), "KV cache the session keeps"));
        teexec_status_destroy(st);
        teexec_tensor_destroy(kt);
        teexec_generator_destroy(g);

        /* the export itself, with past_key_values, gives the same ids */
        g = kvc_generator(src, dev, rows, 0);
        kvc_generate(g, p, rows, pl, steps, past);
        teexec_generator_destroy(g);
        for (size_t k = 0; k < rows * steps; k++)
            if (past[k] != got[k]) bad++;
        free(got);
        free(again);
        free(past);
        teexec_tensor_destroy(prompt);
        teexec_tensor_destroy(hf);
        teexec_model_destroy(m);
        teexec_model_destroy(src);
        if (bad) fail_msg("%s: %d ids differ (HF or the past_key_values export)", names[i], bad);
    }
    return found;
}

#endif
