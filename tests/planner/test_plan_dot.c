/* Tests for the plan as a Graphviz graph (teexec_model_plan with
 * TEEXEC_PLAN_DOT, `teexec plan --dot`), without graphviz: the structure is
 * checked against the same plan's text and --explain output (a cluster per
 * group with forward and backward sub-clusters, one labelled edge per
 * quantized operand, one note per declined fusion with its reason) and the
 * text is checked to be well-formed DOT lexically (balanced braces, closed
 * strings). tests/tools/plan_dot_render.sh renders it with `dot`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "teexec/teexec.h"

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Braces balance outside strings, every string is closed, nothing but
 * whitespace after the graph's closing brace. */
static void assert_dot_lexically_valid(const char *s)
{
    assert_int_equal(strncmp(s, "digraph plan {\n", 15), 0);
    int depth = 0;
    bool in_str = false, closed = false;
    for (const char *p = s; *p; p++) {
        if (closed) {
            assert_true(*p == '\n' || *p == ' ');
            continue;
        }
        if (in_str) {
            if (*p == '\\') {
                assert_true(p[1] != '\0');
                p++;
            } else if (*p == '"') {
                in_str = false;
            } else {
                assert_true(*p != '\n'); /* line breaks are written \n */
            }
        } else if (*p == '"') {
            in_str = true;
        } else if (*p == '{') {
            depth++;
        } else if (*p == '}') {
            assert_true(depth > 0);
            if (--depth == 0) closed = true;
        }
    }
    assert_false(in_str);
    assert_true(closed);
}

static char *plan(const char *model, teexec_plan_format fmt, bool train, const char *recipe,
                  const char *device)
{
    const char *src = getenv("TEEXEC_SOURCE_ROOT");
    assert_non_null(src);
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s/model.onnx", src, model);
    teexec_model *m = NULL;
    assert_null(teexec_model_load_file(path, NULL, &m));
    teexec_plan_options *o = NULL;
    assert_null(teexec_plan_options_create(&o));
    assert_null(teexec_plan_options_set_training(o, train));
    assert_null(teexec_plan_options_set_recipe(o, recipe));
    assert_null(teexec_plan_options_set_device(o, device));
    char *text = NULL;
    teexec_status *st = teexec_model_plan(m, o, fmt, &text);
    if (st) fprintf(stderr, "%s\n", teexec_status_message(st));
    assert_null(st);
    teexec_plan_options_destroy(o);
    teexec_model_destroy(m);
    assert_non_null(text);
    return text;
}

/* The number after `key` in the text plan ("groups: 11"). */
static long number_after(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    assert_non_null(p);
    return strtol(p + strlen(key), NULL, 10);
}

static void expect_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle)) fprintf(stderr, "missing <<%s>>\n", needle);
    assert_non_null(strstr(hay, needle));
}

static void gpt2_block_training_mxfp8(void **state)
{
    (void)state;
    char *dot = plan("gpt2_block", TEEXEC_PLAN_DOT, true, "mxfp8", "sm_90");
    char *text = plan("gpt2_block", TEEXEC_PLAN_EXPLAIN, true, "mxfp8", "sm_90");
    assert_dot_lexically_valid(dot);
    expect_contains(dot, "plan: recipe mxfp8, device sm_90, training");

    /* one cluster per group, each with forward and backward sub-clusters */
    long groups = number_after(text, "\ngroups: ");
    assert_true(groups > 1);
    assert_int_equal(count(dot, "subgraph cluster_g"), (size_t)groups * 3);
    assert_int_equal(count(dot, "_forward {"), (size_t)groups);
    assert_int_equal(count(dot, "_backward {"), (size_t)groups);
    for (long g = 0; g < groups; g++) {
        char want[96];
        snprintf(want, sizeof want, "subgraph cluster_g%ld {\n    label=\"group %ld (", g, g);
        expect_contains(dot, want);
    }

    /* the fused kernels of both layouts */
    expect_contains(dot, "ForwardLinearBiasAdd\\n/proj/MatMul /proj/Add /Add_4");
    expect_contains(dot, "BackwardAddNorm\\n");

    /* one labelled edge per quantized operand (every operand quantized) */
    size_t quantized = count(text, " mxfp8 float8e4m3fn ");
    assert_true(quantized > 0);
    assert_int_equal(count(dot, "[color=\"#c03000\""), quantized);
    expect_contains(dot, "label=\"input mxfp8 float8e4m3fn 1x32 rowwise+columnwise\"");
    expect_contains(dot, "label=\"weight mxfp8 float8e4m3fn 1x32 rowwise+columnwise\"");
    expect_contains(dot, "label=\"grad_output mxfp8 float8e4m3fn 1x32 rowwise+columnwise\"");

    /* every declined fusion, with its reason, pointing at its kernel */
    long declined = number_after(text, "\ndeclined: ");
    assert_true(declined > 0);
    assert_int_equal(count(dot, "shape=note"), (size_t)declined);
    assert_int_equal(count(dot, "[style=dashed, arrowhead=none]"), (size_t)declined);
    expect_contains(dot, "declined: ForwardNormQuantize (forward) at /ln1/LayerNormalization_1\\n"
                         "device sm_90 has no native MXFP8 GEMM");
    expect_contains(dot, "declined: ForwardLinearBiasActivation (forward) at /fc1/MatMul\\n");
    free(dot);
    free(text);
}

/* Inference: forward layouts only; no recipe: no quantized edges. */
static void te_mlp_inference(void **state)
{
    (void)state;
    char *dot = plan("te_mlp", TEEXEC_PLAN_DOT, false, "none", "cpu");
    char *text = plan("te_mlp", TEEXEC_PLAN_TEXT, false, "none", "cpu");
    assert_dot_lexically_valid(dot);
    long groups = number_after(text, "\ngroups: ");
    assert_int_equal(count(dot, "_forward {"), (size_t)groups);
    assert_int_equal(count(dot, "_backward {"), 0);
    assert_int_equal(count(dot, "[color=\"#c03000\""), 0);
    expect_contains(dot, ", inference\"");
    free(dot);
    free(text);
}

/* The same plan gives the same bytes. */
static void deterministic(void **state)
{
    (void)state;
    char *a = plan("gpt2_block", TEEXEC_PLAN_DOT, true, "nvfp4", "sm_100");
    char *b = plan("gpt2_block", TEEXEC_PLAN_DOT, true, "nvfp4", "sm_100");
    assert_dot_lexically_valid(a);
    assert_string_equal(a, b);
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt2_block_training_mxfp8),
        cmocka_unit_test(te_mlp_inference),
        cmocka_unit_test(deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
