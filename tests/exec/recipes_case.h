/*
 * recipes_case.h - quantization recipes in generation on a real export, the
 * check the CPU suite (test_generate) and the GPU suite (test_gpu_generate)
 * both run, on a device each: models/kv/gpt2_kv (64 wide, so mxfp8's
 * blocks of 32 hold) in both forms, the export with past_key_values and
 * its cache form (teexec_plan_options_set_kv_cache, what `teexec convert
 * --kv-cache` writes). Per form and recipe ("none", "fp8-current",
 * "mxfp8"), a 32-token prefill, then 8 greedy decode steps. A quantized
 * prefill's logits must move off recipe none's, but stay within 0.1 rel-L2
 * of them: the recipe ran, and ran sensibly.
 *
 * rc_logits[form][recipe] gets each prefill's logits, so the GPU suite
 * can hold the CUDA ones against the CPU's. Header-only, for one test
 * program each (cmocka included before it). Returns false when the export
 * is not in the tree (the caller skips); fails the test otherwise on any
 * refusal or a logit outside the bound.
 */
#ifndef TEEXEC_TESTS_RECIPES_CASE_H
#define TEEXEC_TESTS_RECIPES_CASE_H

#include "teexec/teexec.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { RC_VOCAB = 512, RC_FORMS = 2, RC_RECIPES = 3, RC_PROMPT = 32 };

static const char *const rc_recipes[RC_RECIPES] = {"none", "fp8-current", "mxfp8"};

static void rc_ok(teexec_status *st, const char *what)
{
    if (st) fail_msg("%s: %s", what, teexec_status_message(st));
}

static double rc_rel_l2(const float *got, const float *want, size_t n)
{
    double num = 0, den = 0;
    for (size_t v = 0; v < n; v++) {
        num += ((double)got[v] - want[v]) * ((double)got[v] - want[v]);
        den += (double)want[v] * want[v];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static bool recipes_case(teexec_device dev, float rc_logits[RC_FORMS][RC_RECIPES][RC_VOCAB])
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[4200], conv[4200];
    snprintf(path, sizeof path, "%.3900s/models/kv/gpt2_kv/model.onnx", root ? root : ".");
    teexec_model *src = NULL;
    teexec_status *lst = teexec_model_load_file(path, NULL, &src);
    if (lst) {
        teexec_status_destroy(lst);
        return false;
    }
    snprintf(conv, sizeof conv, "/tmp/teexec_recipes_cache_%ld.onnx", (long)getpid());
    teexec_plan_options *po = NULL;
    rc_ok(teexec_plan_options_create(&po), "plan options");
    rc_ok(teexec_plan_options_set_kv_cache(po, 1, 64), "kv cache options");
    rc_ok(teexec_model_convert(src, po, conv, NULL), "convert --kv-cache");
    teexec_plan_options_destroy(po);
    teexec_model *cached = NULL;
    rc_ok(teexec_model_load_file(conv, NULL, &cached), "loading the cache form");
    remove(conv);
    const teexec_model *forms[RC_FORMS] = {src, cached};
    int64_t prompt[RC_PROMPT];
    for (int t = 0; t < RC_PROMPT; t++) prompt[t] = (t * 37 + 11) % RC_VOCAB;
    for (int f = 0; f < RC_FORMS; f++) {
        for (int i = 0; i < RC_RECIPES; i++) {
            teexec_generator_options o;
            teexec_generator_options_init(&o);
            o.device = dev;
            o.recipe = rc_recipes[i];
            o.max_length = 64;
            teexec_generator *g = NULL;
            rc_ok(teexec_generator_create(forms[f], &o, &g), rc_recipes[i]);
            rc_ok(teexec_generator_append(g, 0, prompt, RC_PROMPT), "append");
            rc_ok(teexec_generator_compute(g), rc_recipes[i]);
            rc_ok(teexec_generator_logits(g, 0, rc_logits[f][i], RC_VOCAB), "logits");
            if (i) {
                double rel = rc_rel_l2(rc_logits[f][i], rc_logits[f][0], RC_VOCAB);
                fprintf(stderr, "%s, %s form, %s: prefill logits rel-L2 %.3g from recipe none\n",
                        teexec_generator_device_name(g), f ? "cache" : "export", rc_recipes[i],
                        rel);
                if (!(rel > 0 && rel < 0.1))
                    fail_msg("%s form, %s: prefill logits rel-L2 %g from recipe none",
                             f ? "cache" : "export", rc_recipes[i], rel);
            }
            for (int st = 0; st < 8; st++) {
                int64_t id = -1;
                rc_ok(teexec_generator_step(g, &id, 1), rc_recipes[i]);
                assert_true(id >= 0 && id < RC_VOCAB);
            }
            teexec_generator_destroy(g);
        }
    }
    teexec_model_destroy(cached);
    teexec_model_destroy(src);
    return true;
}

#endif
